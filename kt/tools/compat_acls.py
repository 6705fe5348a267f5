"""kafka-acls.sh's command line on kt: Kafka 3.x's options and checks, run by `kt acl`.

`kt acl` already prints kafka-acls.sh's blocks ("Adding ACLs for resource `...`: ",
"Current ACLs for resource ...") and asks its (y/n) question on --remove; this module
takes Kafka's exact command line (joptsimple parsing, the checks of AclCommand's
checkArgs in its order and words) and turns a broker's refusal into Kafka's
"Error while executing ACL command: <exception>: <message>" line on stdout, exit 1,
as Kafka's tool prints it (e.g. SECURITY_DISABLED from a broker without an authorizer).
The ZooKeeper-direct mode (--authorizer-properties) is refused: kt edits ACLs through
the brokers only.
"""

from __future__ import annotations

import re
import sys

from kt.tools.compat_args import Arity, CompatUsageError, Parsed, Spec, UnsupportedOption
from kt.tools.compat_common import (
    COMMON,
    Connection,
    refuse_positional,
    run_kt,
    warn_config_file,
)

F, V, O = Arity.FLAG, Arity.VALUE, Arity.OPTIONAL  # noqa: E741 - the three arities

RESOURCES = ["topic", "group", "transactional-id", "delegation-token", "user-principal"]
ACLS = Spec(
    {
        **COMMON,
        **dict.fromkeys(["add", "remove", "list", "cluster", "idempotent", "producer"], F),
        **dict.fromkeys(["consumer", "force"], F),
        **dict.fromkeys(RESOURCES, V),
        "resource-pattern-type": V,
        "operation": V,
        "allow-principal": V,
        "deny-principal": V,
        "allow-host": V,
        "deny-host": V,
        "principal": O,
        # kept to give Kafka's own refusals (see kafka_acls)
        "authorizer": V,
        "authorizer-properties": V,
    },
    {
        "zk-tls-config-file": "kt edits ACLs through the brokers: use --bootstrap-server",
        "bootstrap-controller": "use --bootstrap-server",
    },
    refused={
        "authorizer": "the ZooKeeper-direct mode; with --bootstrap-server, Kafka's own "
        "refusal (Only one of --bootstrap-server or --authorizer must be specified)",
        "authorizer-properties": "the ZooKeeper-direct mode (kt edits ACLs through the "
        "brokers); with --bootstrap-server, Kafka's own refusal",
    },
)
# Kafka's deprecation words for the ZooKeeper-direct mode (AclCommand 3.x).
DIRECT = (
    "support for ACL configuration directly through the authorizer is deprecated and will be "
    "removed in a future release; kt does not support it: use --bootstrap-server instead to "
    "set ACLs through the admin client"
)
# The Java exceptions Kafka's admin client raises for the brokers' error codes, as
# "Error while executing ACL command: " names them (ExecutionException's message).
EXCEPTIONS = {
    "SECURITY_DISABLED": "SecurityDisabledException",
    "CLUSTER_AUTHORIZATION_FAILED": "ClusterAuthorizationException",
    "INVALID_REQUEST": "InvalidRequestException",
    "UNKNOWN_SERVER_ERROR": "UnknownServerException",
    "UNSUPPORTED_VERSION": "UnsupportedVersionException",
    "NOT_CONTROLLER": "NotControllerException",
    "REQUEST_TIMED_OUT": "TimeoutException",
}
PATTERN_TYPES = ("literal", "prefixed", "any", "match")


def exception_line(message: str) -> str | None:
    """kt's "CODE: message" failure as Kafka's tool prints it, or None when the
    failure is not a broker's error code (kt's own line says it then)."""
    m = re.fullmatch(r"([A-Z_]+): (.*)", message, re.DOTALL)
    if m is None:
        return None
    code, text = m.groups()
    name = EXCEPTIONS.get(code) or "".join(w.title() for w in code.split("_")) + "Exception"
    return f"Error while executing ACL command: org.apache.kafka.common.errors.{name}: {text}"


def _invalid_with(p: Parsed, option: str, others: list[str]) -> None:
    # CommandLineUtils.checkInvalidArgs's words
    if p.has(option):
        for other in others:
            if p.has(other):
                raise CompatUsageError(
                    f'Option "[{option}]" can\'t be used with option "[{other}]"'
                )


def check(p: Parsed) -> str:
    """AclCommandOptions.checkArgs (Kafka 3.x), in its order; returns the action."""
    if p.has("bootstrap-server") and p.has("authorizer"):
        raise CompatUsageError("Only one of --bootstrap-server or --authorizer must be specified")
    if not p.has("bootstrap-server"):
        if not p.has("authorizer-properties"):
            raise CompatUsageError('Missing required argument "[authorizer-properties]"')
        raise UnsupportedOption("kafka-acls", "authorizer-properties", DIRECT)
    if p.has("authorizer-properties"):
        raise CompatUsageError(
            "The --authorizer-properties option can only be used with --authorizer option"
        )
    actions = [a for a in ("add", "remove", "list") if p.has(a)]
    if len(actions) != 1:
        raise CompatUsageError("Command must include exactly one action: --list, --add, --remove. ")
    _invalid_with(p, "list", ["producer", "consumer", "allow-host", "allow-principal",
                              "deny-host", "deny-principal"])  # fmt: skip
    for convenience in ("producer", "consumer"):
        _invalid_with(p, convenience, ["operation", "deny-principal", "deny-host"])
    if p.has("principal") and not p.has("list"):
        raise CompatUsageError("The --principal option is only available if --list is set")
    if p.has("producer") and not p.has("topic"):
        raise CompatUsageError("With --producer you must specify a --topic")
    if p.has("idempotent") and not p.has("producer"):
        raise CompatUsageError("The --idempotent option is only available if --producer is set")
    if p.has("consumer") and (
        not p.has("topic")
        or not p.has("group")
        or (not p.has("producer") and (p.has("cluster") or p.has("transactional-id")))
    ):
        raise CompatUsageError(
            "With --consumer you must specify a --topic and a --group and no --cluster or "
            "--transactional-id option should be specified."
        )
    ptype = p.value("resource-pattern-type")
    if ptype is not None and ptype.lower() not in PATTERN_TYPES:
        raise CompatUsageError(f"Unknown resource-pattern-type: {ptype}")
    if p.has("principal") and p.value("principal") is None:
        raise CompatUsageError("Option principal requires an argument")
    return actions[0]


def kafka_acls(p: Parsed) -> int:
    """kafka-acls.sh --add/--remove/--list through `kt acl`."""
    refuse_positional(p)
    action = check(p)
    conn = Connection(p.value("bootstrap-server"), p.value("command-config"))
    if conn.command_config:
        warn_config_file(conn.command_config, "admin")
    argv = ["acl", f"--{action}", *conn.argv()]
    for name in [*RESOURCES, "operation", "allow-principal", "deny-principal", "allow-host",
                 "deny-host", "principal"]:  # fmt: skip
        for value in p.values(name):
            # Kafka trims each value (principals, hosts, operations, names)
            argv += [f"--{name}", value if name == "transactional-id" else value.strip()]
    for flag in ("cluster", "producer", "consumer", "idempotent", "force"):
        argv += [f"--{flag}"] if p.has(flag) else []
    if p.has("resource-pattern-type"):
        argv += ["--resource-pattern-type", (p.value("resource-pattern-type") or "").lower()]

    def kafka_error(message: str) -> None:
        line = exception_line(message)
        if line is not None:
            sys.stdout.write(line + "\n")
            sys.stdout.flush()

    code, _ = run_kt(argv, on_error=kafka_error)
    return code
