"""`kt acl`: ACLs of a cluster with an authorizer, with kafka-acls.sh's options and
output (`--add`, `--remove`, `--list`, principals, hosts, operations, resources,
`--resource-pattern-type`, the `--producer`/`--consumer` conveniences), over the
CreateAcls / DescribeAcls / DeleteAcls APIs; `--json` for scripts.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass

import click

from kt.client import KafkaClient
from kt.cluster.acl_decision import decide
from kt.protocol import ErrorCode, apis
from kt.tools.console import emit_json, fail, handle_errors, usage_error
from kt.tools.wire import Wire, wire_options

# Kafka's codes (ResourceType, PatternType, AclOperation, AclPermissionType)
RESOURCE_TYPES = {2: "TOPIC", 3: "GROUP", 4: "CLUSTER", 5: "TRANSACTIONAL_ID",
                  6: "DELEGATION_TOKEN", 7: "USER"}  # fmt: skip
PATTERN_TYPES = {"any": 1, "match": 2, "literal": 3, "prefixed": 4}
OPERATIONS = {"All": 2, "Read": 3, "Write": 4, "Create": 5, "Delete": 6, "Alter": 7,
              "Describe": 8, "ClusterAction": 9, "DescribeConfigs": 10, "AlterConfigs": 11,
              "IdempotentWrite": 12, "CreateTokens": 13, "DescribeTokens": 14}  # fmt: skip
_OP_NAMES = {code: name for name, code in OPERATIONS.items()}
SUPPORTED = {
    2: {"Read", "Write", "Create", "Describe", "Delete", "Alter", "DescribeConfigs",
        "AlterConfigs"},
    3: {"Read", "Describe", "Delete"},
    4: {"Create", "ClusterAction", "DescribeConfigs", "AlterConfigs", "IdempotentWrite",
        "Alter", "Describe"},
    5: {"Describe", "Write"},
    6: {"Describe"},
    7: {"CreateTokens", "DescribeTokens"},
}  # fmt: skip
ALLOW, DENY, ANY = 3, 2, 1
CLUSTER_NAME = "kafka-cluster"
_PATTERN_NAMES = {code: name.upper() for name, code in PATTERN_TYPES.items()}


@dataclass(frozen=True, order=True)
class Resource:
    """A resource pattern: type code, name, pattern type code."""

    rtype: int
    name: str
    ptype: int

    def __str__(self) -> str:
        return (f"ResourcePattern(resourceType={RESOURCE_TYPES[self.rtype]}, name={self.name}, "
                f"patternType={_PATTERN_NAMES[self.ptype]})")  # fmt: skip

    def to_json(self) -> dict[str, str]:
        return {"resourceType": RESOURCE_TYPES[self.rtype], "name": self.name,
                "patternType": _PATTERN_NAMES[self.ptype]}  # fmt: skip


@dataclass(frozen=True, order=True)
class Entry:
    """An access control entry: principal, host, operation code, permission code."""

    principal: str
    host: str
    operation: int
    permission: int

    def __str__(self) -> str:
        op = _OP_NAMES[self.operation]
        op_enum = "".join("_" + c if c.isupper() and i else c for i, c in enumerate(op)).upper()
        perm = "ALLOW" if self.permission == ALLOW else "DENY"
        return (f"(principal={self.principal}, host={self.host}, operation={op_enum}, "
                f"permissionType={perm})")  # fmt: skip

    def to_json(self) -> dict[str, str]:
        return {"principal": self.principal, "host": self.host,
                "operation": _OP_NAMES[self.operation],
                "permissionType": "ALLOW" if self.permission == ALLOW else "DENY"}  # fmt: skip


def parse_operation(text: str) -> str:
    """An operation as kafka-acls.sh takes it: any case, no underscores."""
    for name in OPERATIONS:
        if name.upper() == text.upper():
            return name
    usage_error(f"--operation: unknown operation {text!r} ({', '.join(OPERATIONS)})")


def _block(title: str, resource: Resource, entries: list[Entry]) -> str:
    # kafka-acls.sh: "<title> `R`: \n \t(a)\n\t(b) \n" and println's newline
    body = "\n".join("\t" + str(e) for e in sorted(entries))
    return f"{title} `{resource}`: \n {body} \n"


@click.group(invoke_without_command=True)
@click.option("--add", "action", flag_value="add", help="Add ACLs.")
@click.option("--remove", "action", flag_value="remove", help="Remove ACLs.")
@click.option("--list", "action", flag_value="list", help="List ACLs.")
@click.option("--topic", multiple=True, metavar="NAME", help="A topic (or *); repeatable.")
@click.option("--group", multiple=True, metavar="NAME", help="A group (or *); repeatable.")
@click.option("--cluster", is_flag=True, help="The cluster resource (kafka-cluster).")
@click.option("--transactional-id", multiple=True, metavar="ID", help="A transactional id.")
@click.option("--delegation-token", multiple=True, metavar="ID", help="A delegation token id.")
@click.option("--user-principal", multiple=True, metavar="TYPE:NAME",
              help="A user principal as the resource (CreateTokens, DescribeTokens).")  # fmt: skip
@click.option("--resource-pattern-type", default="literal", show_default=True,
              type=click.Choice(sorted(PATTERN_TYPES), case_sensitive=False),
              help="literal, prefixed (add/remove/list), any or match (list/remove).")  # fmt: skip
@click.option("--allow-principal", multiple=True, metavar="TYPE:NAME")
@click.option("--deny-principal", multiple=True, metavar="TYPE:NAME")
@click.option("--allow-host", multiple=True, metavar="HOST", help="Default * with a principal.")
@click.option("--deny-host", multiple=True, metavar="HOST", help="Default * with a principal.")
@click.option("--operation", multiple=True, metavar="OP", help="Default All; repeatable.")
@click.option("--principal", multiple=True, metavar="TYPE:NAME", help="--list: only these.")
@click.option("--producer", is_flag=True, help="WRITE, DESCRIBE, CREATE on the topics.")
@click.option("--consumer", is_flag=True, help="READ, DESCRIBE on topics; READ on groups.")
@click.option("--idempotent", is_flag=True, help="With --producer: IDEMPOTENT_WRITE.")
@click.option("--force", is_flag=True, help="--remove without asking.")
@click.option("--json", "as_json", is_flag=True, help="The resulting ACLs as JSON.")
@wire_options
@click.pass_context
@handle_errors
def acl(
    ctx: click.Context,
    action: str | None,
    topic: tuple[str, ...],
    group: tuple[str, ...],
    cluster: bool,
    transactional_id: tuple[str, ...],
    delegation_token: tuple[str, ...],
    user_principal: tuple[str, ...],
    resource_pattern_type: str,
    allow_principal: tuple[str, ...],
    deny_principal: tuple[str, ...],
    allow_host: tuple[str, ...],
    deny_host: tuple[str, ...],
    operation: tuple[str, ...],
    principal: tuple[str, ...],
    producer: bool,
    consumer: bool,
    idempotent: bool,
    force: bool,
    as_json: bool,
    wire: Wire,
) -> None:
    """Add, remove and list ACLs, like kafka-acls.sh.

    \b
    Examples:
      kt acl --add --allow-principal User:alice --operation Read --topic orders
      kt acl --add --allow-principal User:svc --producer --topic orders --idempotent
      kt acl --add --allow-principal User:app --consumer --topic orders --group app- \\
          --resource-pattern-type prefixed
      kt acl --list --topic orders
      kt acl --remove --force --deny-principal User:bob --topic orders

    `kt acl check` says whether a principal may do something, and why.

    Exit codes: 0 ok, 1 the operation failed (no authorizer, not authorized,
    unreachable cluster), 2 usage error.
    """
    if ctx.invoked_subcommand is not None:
        return
    if action is None:
        usage_error("Command must include exactly one action: --list, --add, --remove.")
    ptype = PATTERN_TYPES[resource_pattern_type.lower()]
    if action == "add" and ptype not in (3, 4):
        usage_error(f"A '--resource-pattern-type' value of '{resource_pattern_type.upper()}' "
                    "is not valid when adding acls.")  # fmt: skip
    if action == "list" and (producer or consumer or allow_host or allow_principal
                             or deny_host or deny_principal):  # fmt: skip
        usage_error("--list takes no --producer, --consumer, principals or hosts to grant")
    if (producer or consumer) and (operation or deny_principal or deny_host):
        usage_error("--producer/--consumer cannot be used with --operation, --deny-principal "
                    "or --deny-host")  # fmt: skip
    if principal and action != "list":
        usage_error("The --principal option is only available if --list is set")
    if producer and not topic:
        usage_error("With --producer you must specify a --topic")
    if consumer and (not topic or not group or (not producer and (cluster or transactional_id))):
        usage_error("With --consumer you must specify a --topic and a --group and no --cluster "
                    "or --transactional-id option should be specified.")  # fmt: skip
    if idempotent and not producer:
        usage_error("The --idempotent option is only available if --producer is set")
    for p in (*allow_principal, *deny_principal, *principal):
        if ":" not in p or p.startswith(":") or p.endswith(":"):
            usage_error(f"expected a string in format principalType:principalName but got {p}")
    cluster_ptype = 3 if ptype != 1 else ptype
    resources: list[Resource] = (
        [Resource(2, t, ptype) for t in topic] + [Resource(3, g, ptype) for g in group]
        + [Resource(5, x, ptype) for x in transactional_id]
        + [Resource(6, d, ptype) for d in delegation_token]
        + [Resource(7, u, ptype) for u in user_principal]
        + ([Resource(4, CLUSTER_NAME, cluster_ptype)] if cluster else [])
    )  # fmt: skip
    if action != "list" and not resources and not (producer and idempotent):
        usage_error("You must provide at least one resource: --topic <topic> or --cluster or "
                    "--group <group> or --delegation-token <Delegation Token ID>")  # fmt: skip
    ops = [parse_operation(o) for o in operation] or ["All"]
    if action == "list":
        _list(wire, resources, principal, as_json)
        return
    wanted = _entries_by_resource(resources, ops, allow_principal, deny_principal, allow_host,
                                  deny_host, producer, consumer, idempotent)  # fmt: skip
    if action == "add":
        if not any(wanted.values()):
            usage_error("You must specify one of: --allow-principal, --deny-principal when "
                        "trying to add ACLs.")  # fmt: skip
        for r, entries in wanted.items():
            for e in entries:
                if e.operation != OPERATIONS["All"] and _OP_NAMES[e.operation] not in SUPPORTED[
                    r.rtype
                ]:  # fmt: skip
                    usage_error(f"ResourceType {RESOURCE_TYPES[r.rtype]} only supports "
                                f"operations {', '.join(sorted(SUPPORTED[r.rtype]))}")  # fmt: skip
        _add(wire, wanted, as_json)
    else:
        if not any(wanted.values()):
            # no principal: every ACL of the resources (kafka-acls.sh asks the same)
            wanted = {r: [] for r in resources}
        _remove(wire, wanted, force, as_json)


def _entries_by_resource(resources: list[Resource], ops: list[str],
                         allow_principal: tuple[str, ...], deny_principal: tuple[str, ...],
                         allow_host: tuple[str, ...], deny_host: tuple[str, ...],
                         producer: bool, consumer: bool,
                         idempotent: bool) -> dict[Resource, list[Entry]]:  # fmt: skip
    def cross(principals: tuple[str, ...], hosts: tuple[str, ...], perm: int,
              names: list[str]) -> list[Entry]:  # fmt: skip
        return [Entry(p, h, OPERATIONS[o], perm) for p in principals for h in (hosts or ("*",))
                for o in names]  # fmt: skip

    out: dict[Resource, list[Entry]] = {}
    for r in resources:
        names = ops
        if producer or consumer:
            names = []
            if producer and r.rtype == 2:
                names += ["Write", "Describe", "Create"]
            if producer and r.rtype == 5:
                names += ["Write", "Describe"]
            if consumer and r.rtype == 2:
                names += ["Read", "Describe"]
            if consumer and r.rtype == 3:
                names += ["Read"]
        out[r] = (cross(allow_principal, allow_host, ALLOW, names)
                  + cross(deny_principal, deny_host, DENY, names))  # fmt: skip
    if producer and idempotent:
        cl = Resource(4, CLUSTER_NAME, 3)
        out[cl] = out.get(cl, []) + cross(allow_principal, allow_host, ALLOW, ["IdempotentWrite"])
    return {r: sorted(set(e)) for r, e in out.items() if e}


def _check(code: int, message: str | None) -> None:
    if code != ErrorCode.NONE:
        err = ErrorCode(code)
        fail(f"{err.name}: {message or err.message}")


async def _describe(client: KafkaClient, rtype: int, name: str | None, ptype: int,
                    principal: str | None = None) -> dict[Resource, list[Entry]]:  # fmt: skip
    r = await client.send(apis.DESCRIBE_ACLS, {
        "resource_type_filter": rtype, "resource_name_filter": name, "pattern_type_filter": ptype,
        "principal_filter": principal, "host_filter": None, "operation": ANY,
        "permission_type": ANY})  # fmt: skip
    _check(r.error_code, r.error_message)
    out: dict[Resource, list[Entry]] = {}
    for res in r.resources:
        key = Resource(res.resource_type, res.resource_name, res.pattern_type)
        out[key] = [Entry(a.principal, a.host, a.operation, a.permission_type) for a in res.acls]
    return out


def _print_current(found: dict[Resource, list[Entry]], as_json: bool) -> None:
    if as_json:
        emit_json([{"resource": r.to_json(), "acls": [e.to_json() for e in sorted(es)]}
                   for r, es in sorted(found.items())])  # fmt: skip
        return
    for r, es in sorted(found.items()):
        click.echo(_block("Current ACLs for resource", r, es))


def _list(wire: Wire, resources: list[Resource], principals: tuple[str, ...],
          as_json: bool) -> None:  # fmt: skip
    async def run(client: KafkaClient) -> list[dict[Resource, list[Entry]]]:
        filters: list[tuple[int, str | None, int]] = [
            (r.rtype, r.name, r.ptype) for r in resources
        ] or [(1, None, PATTERN_TYPES["any"])]  # no resource: every ACL, as kafka-acls.sh
        out = []
        for p in principals or (None,):
            found: dict[Resource, list[Entry]] = {}
            for rtype, name, pt in filters:
                for k, v in (await _describe(client, rtype, name, pt, p)).items():
                    found[k] = sorted(set(found.get(k, []) + v))
            out.append(found)
        return out

    per_principal = wire.run(run)
    if as_json:
        merged: dict[Resource, list[Entry]] = {}
        for found in per_principal:
            for k, v in found.items():
                merged[k] = sorted(set(merged.get(k, []) + v))
        _print_current(merged, as_json)
        return
    # kafka-acls.sh: with --principal, each principal's heading, then its blocks
    for p, found in zip(principals or (None,), per_principal, strict=True):
        if p is not None:
            click.echo(f"ACLs for principal `{p}`")
        _print_current(found, as_json)


def _add(wire: Wire, wanted: dict[Resource, list[Entry]], as_json: bool) -> None:
    async def run(client: KafkaClient) -> dict[Resource, list[Entry]]:
        creations = [
            {"resource_type": r.rtype, "resource_name": r.name, "resource_pattern_type": r.ptype,
             "principal": e.principal, "host": e.host, "operation": e.operation,
             "permission_type": e.permission}
            for r, es in wanted.items() for e in es
        ]  # fmt: skip
        resp = await client.send(apis.CREATE_ACLS, {"creations": creations})
        for res in resp.results:
            _check(res.error_code, res.error_message)
        current: dict[Resource, list[Entry]] = {}
        for r in wanted:
            current.update(await _describe(client, r.rtype, r.name, r.ptype))
        return current

    if not as_json:
        for r, es in sorted(wanted.items()):
            click.echo(_block("Adding ACLs for resource", r, es))
    _print_current(wire.run(run), as_json)


def _remove(wire: Wire, wanted: dict[Resource, list[Entry]], force: bool, as_json: bool) -> None:
    listed = list(wanted)
    if not force:
        # kafka-acls.sh asks per resource filter (its question on a line of its own,
        # the answer a line: y or Y), skips the filters not confirmed, then lists.
        wanted = {r: es for r, es in wanted.items() if _confirm(r, es)}

    async def run(client: KafkaClient) -> dict[Resource, list[Entry]]:
        if not wanted:
            return await _current(client, listed)
        filters = [
            {"resource_type_filter": r.rtype, "resource_name_filter": r.name,
             "pattern_type_filter": r.ptype, "principal_filter": e.principal,
             "host_filter": e.host, "operation": e.operation, "permission_type": e.permission}
            for r, es in wanted.items() for e in es
        ] + [
            {"resource_type_filter": r.rtype, "resource_name_filter": r.name,
             "pattern_type_filter": r.ptype, "principal_filter": None, "host_filter": None,
             "operation": ANY, "permission_type": ANY}
            for r, es in wanted.items() if not es
        ]  # fmt: skip
        resp = await client.send(apis.DELETE_ACLS, {"filters": filters})
        for res in resp.filter_results:
            _check(res.error_code, res.error_message)
        return await _current(client, listed)

    _print_current(wire.run(run), as_json)


async def _current(client: KafkaClient, resources: list[Resource]) -> dict[Resource, list[Entry]]:
    current: dict[Resource, list[Entry]] = {}
    for r in resources:
        current.update(await _describe(client, r.rtype, r.name, r.ptype))
    return current


def _confirm(r: Resource, es: list[Entry]) -> bool:
    listed = "\n".join("\t" + str(e) for e in es)
    click.echo(
        f"Are you sure you want to remove ACLs: \n {listed} \n from resource filter `{r}`? (y/n)"
        if es
        else f"Are you sure you want to delete all ACLs for resource filter `{r}`? (y/n)"
    )
    answer = sys.stdin.readline()
    if not answer:
        fail("no answer to the question on standard input (--force removes without asking)")
    return answer.rstrip("\r\n").lower() == "y"


@acl.command("check")
@click.option("--principal", required=True, metavar="TYPE:NAME", help="Who, e.g. User:alice.")
@click.option("--operation", required=True, metavar="OP", help="What, e.g. Read.")
@click.option("--topic", metavar="NAME")
@click.option("--group", metavar="NAME")
@click.option("--transactional-id", metavar="ID")
@click.option("--cluster", is_flag=True)
@click.option("--host", default="*", show_default=True,
              help="The client's IP address (* : ACLs for any host only).")  # fmt: skip
@click.option(
    "--allow-everyone-if-no-acl-found",
    is_flag=True,
    help="Decide as a broker with allow.everyone.if.no.acl.found=true.",
)
@click.option("--json", "as_json", is_flag=True, help="The verdict as JSON.")
@wire_options
@handle_errors
def acl_check(principal: str, operation: str, topic: str | None, group: str | None,
              transactional_id: str | None, cluster: bool, host: str,
              allow_everyone_if_no_acl_found: bool, as_json: bool, wire: Wire) -> None:  # fmt: skip
    """Whether a principal may do an operation on one resource, and which ACL decides.

    The decision is the broker's authorizer's, over the ACLs DescribeAcls returns for
    the resource; super users (super.users is not visible over the wire) are allowed
    everything whatever the ACLs say.

    \b
    Examples:
      kt acl check --principal User:alice --operation Read --topic orders
      kt acl check --principal User:svc --operation IdempotentWrite --cluster --host 10.0.0.5

    Exit codes: 0 allowed, 1 denied (or the check failed), 2 usage error.
    """
    chosen = [(2, topic), (3, group), (5, transactional_id), (4, CLUSTER_NAME if cluster else None)]
    given = [(t, n) for t, n in chosen if n is not None]
    if len(given) != 1:
        usage_error("name exactly one resource: --topic, --group, --transactional-id or --cluster")
    rtype, name = given[0]
    op_name = parse_operation(operation)
    if ":" not in principal:
        usage_error(f"expected a string in format principalType:principalName but got {principal}")

    async def run(client: KafkaClient) -> dict[Resource, list[Entry]]:
        # MATCH: the literal name, the type's literal * and the prefixes of the name
        return await _describe(client, rtype, name, PATTERN_TYPES["match"])

    found = wire.run(run)
    candidates = [((r, e), e) for r, es in sorted(found.items()) for e in sorted(es)]
    verdict = decide(candidates, principal, host, OPERATIONS[op_name],
                     allow_everyone_if_no_acl_found)  # fmt: skip
    what = f"{op_name} on {RESOURCE_TYPES[rtype]} {name} from host {host}"
    if as_json:
        by = None
        if verdict.by is not None:
            r, e = verdict.by
            by = {"resource": r.to_json(), "acl": e.to_json()}
        emit_json({"allowed": verdict.allowed, "principal": principal, "operation": op_name,
                   "resource": {"resourceType": RESOURCE_TYPES[rtype], "name": name},
                   "host": host, "reason": verdict.reason, "decidedBy": by,
                   "applicableAcls": len(candidates)})  # fmt: skip
    else:
        word = "ALLOWED" if verdict.allowed else "DENIED"
        click.echo(f"{word}: {principal} {what}")
        click.echo(f"  because {verdict.reason}")
        if verdict.by is not None:
            r, e = verdict.by
            click.echo(f"  ACL {e} on {r}")
        click.echo(f"  ({len(candidates)} ACLs apply to the resource; a super user is allowed "
                   "whatever they say)")  # fmt: skip
    if not verdict.allowed:
        raise SystemExit(1)
