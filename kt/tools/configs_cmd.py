"""`kt configs describe|alter`: topic and broker configs, like kafka-configs.sh."""

from __future__ import annotations

import click

from kt.client import (
    OP_DELETE,
    OP_SET,
    RESOURCE_BROKER,
    RESOURCE_TOPIC,
    ConfigEntry,
    KafkaClient,
    KafkaError,
)
from kt.protocol import ErrorCode
from kt.tools.console import emit_json, handle_errors, usage_error
from kt.tools.wire import Wire, wire_options

ENTITY_TYPES = {"topics": RESOURCE_TOPIC, "brokers": RESOURCE_BROKER}
#: --entity-type values: the config resources, and users (SCRAM credentials)
ENTITY_CHOICES = sorted([*ENTITY_TYPES, "users"])
#: the config source shown without --all, per entity
_DYNAMIC_SOURCE = {"topics": 1, "brokers": 2, "broker-default": 3}


@click.group()
def configs() -> None:
    """Describe and change topic and broker configs (like kafka-configs.sh).

    \b
    Examples:
      kt configs describe --entity-type topics --entity-name orders
      kt configs describe --entity-type brokers --entity-name 1 --all
      kt configs alter --entity-type topics --entity-name orders \\
          --add-config retention.ms=86400000,cleanup.policy=[compact,delete]
      kt configs alter --entity-type topics --entity-name orders --delete-config retention.ms
      kt configs alter --entity-type brokers --entity-default \\
          --add-config log.retention.ms=3600000,follower.replication.throttled.rate=1048576
      kt configs alter --entity-type brokers --entity-name 2 --delete-config message.max.bytes
      kt configs alter --entity-type users --entity-name alice \\
          --add-config 'SCRAM-SHA-256=[iterations=8192,password=alice-secret]'
      kt configs alter --entity-type users --entity-name alice --delete-config SCRAM-SHA-256
      kt configs describe --entity-type users --entity-name alice

    Broker configs change live: --entity-name ID is that broker's own, --entity-default
    the cluster-wide default; precedence: per broker > cluster default >
    server.properties > built-in default.

    Users: SCRAM credentials, as kafka-configs.sh --bootstrap-server changes them
    (AlterUserScramCredentials; the password is salted here and never sent), the
    same as `kt user scram`; describe shows mechanisms and iterations, never secrets.

    Exit codes: 0 ok, 1 the operation failed (unknown topic, invalid config,
    unreachable cluster), 2 usage error.
    """


def split_config_list(text: str) -> list[str]:
    """Split 'a=1,b=[x,y],c' on the commas outside square brackets."""
    items: list[str] = []
    depth = 0
    cur: list[str] = []
    for ch in text:
        if ch == "[":
            depth += 1
        elif ch == "]":
            depth = max(0, depth - 1)
        if ch == "," and depth == 0:
            items.append("".join(cur))
            cur = []
        else:
            cur.append(ch)
    items.append("".join(cur))
    return [i.strip() for i in items if i.strip()]


def parse_add_config(text: str) -> list[tuple[str, str]]:
    """--add-config 'k=v,k2=[a,b]' -> [(k, v), (k2, 'a,b')]."""
    out = []
    for item in split_config_list(text):
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            usage_error(f"--add-config: expected K=V, got {item!r}")
        value = value.strip()
        if value.startswith("[") and value.endswith("]"):
            value = value[1:-1]
        out.append((key.strip(), value))
    return out


def _entity(entity_type: str, entity_name: str | None, entity_default: bool) -> tuple[int, str]:
    if entity_default:
        if entity_type != "brokers":
            usage_error("--entity-default works with --entity-type brokers")
        if entity_name is not None:
            usage_error("--entity-name and --entity-default exclude each other")
        return RESOURCE_BROKER, ""
    return ENTITY_TYPES[entity_type], entity_name or ""


def _broker_id(text: str) -> None:
    if not text.strip().isdigit():
        usage_error(f"The entity name for brokers must be a valid integer broker id, found: {text}")


def _label(entity_type: str, name: str) -> str:
    if entity_type == "brokers":
        return f"broker {name}" if name else "brokers in the cluster"
    return f"topic {name}"


def _synonyms(c: ConfigEntry) -> str:
    from kt.client.admin import CONFIG_SOURCES

    inner = ", ".join(f"{CONFIG_SOURCES.get(s, str(s))}:{n}={v}" for n, v, s in c.synonyms)
    return "{" + inner + "}"


@configs.command()
@wire_options
@click.option(
    "--entity-type",
    type=click.Choice(ENTITY_CHOICES),
    required=True,
    help="What to describe.",
)
@click.option("--entity-name", help="Topic name, broker id or user (topics, users: default all).")
@click.option("--entity-default", is_flag=True, help="The cluster-wide broker defaults.")
@click.option("--all", "show_all", is_flag=True, help="Every config, not only the dynamic ones.")
@click.option("--json", "as_json", is_flag=True, help="One JSON object per entity (NDJSON).")
@handle_errors
def describe(
    wire: Wire,
    entity_type: str,
    entity_name: str | None,
    entity_default: bool,
    show_all: bool,
    as_json: bool,
) -> None:
    """Print configs in kafka-configs.sh's format:

    \b
    Dynamic configs for topic orders are:
      retention.ms=86400000 sensitive=false synonyms={DYNAMIC_TOPIC_CONFIG:retention.ms=86400000}

    Without --all only the entity's own overrides are shown. Sensitive values
    print as null. Brokers without --entity-name or --entity-default: every
    broker, then the cluster-wide default. Users: their SCRAM credentials'
    mechanisms and iterations:

    \b
    SCRAM credential configs for user-principal 'alice' are SCRAM-SHA-256=iterations=8192
    """
    if entity_type == "users":
        if entity_default or show_all:
            usage_error("--entity-default and --all do not apply to --entity-type users")
        from kt.tools.user_cmd import describe_credentials

        describe_credentials(wire, (entity_name,) if entity_name else (), as_json)
        return
    rtype, name = _entity(entity_type, entity_name, entity_default)
    if entity_type == "brokers" and entity_name is not None:
        _broker_id(entity_name)

    async def go(c: KafkaClient) -> list[tuple[str, list[ConfigEntry]]]:
        if name or entity_default:
            names = [name]
        elif entity_type == "brokers":
            cluster = await c.describe_cluster()
            names = [str(b.node_id) for b in cluster.brokers] + [""]
        else:
            names = sorted(await c.list_topics())
        if entity_type == "topics" and name:
            await c.topic(name)  # an unknown topic is an error, not an empty list
        return [(n, await c.describe_configs(rtype, n)) for n in names]

    results = wire.run(go)
    for n, entries in results:
        key = "broker-default" if entity_type == "brokers" and not n else entity_type
        shown = entries if show_all else [e for e in entries if e.source == _DYNAMIC_SOURCE[key]]
        shown.sort(key=lambda e: e.name)
        if as_json:
            emit_json(
                {
                    "entity_type": entity_type,
                    "entity_name": n or None,
                    "configs": [
                        {
                            "name": e.name,
                            "value": None if e.is_sensitive else e.value,
                            "source": e.source_name,
                            "sensitive": e.is_sensitive,
                            "read_only": e.read_only,
                            "synonyms": [
                                {"name": sn, "value": sv, "source": ss} for sn, sv, ss in e.synonyms
                            ],
                        }
                        for e in shown
                    ],
                }
            )
            continue
        if key == "broker-default":
            click.echo("Default configs for brokers in the cluster are:")
        else:
            kind = "All" if show_all else "Dynamic"
            click.echo(f"{kind} configs for {_label(entity_type, n)} are:")
        for e in shown:
            value = "null" if e.is_sensitive or e.value is None else e.value
            click.echo(
                f"  {e.name}={value} sensitive={str(e.is_sensitive).lower()} "
                f"synonyms={_synonyms(e)}"
            )


@configs.command()
@wire_options
@click.option(
    "--entity-type", type=click.Choice(ENTITY_CHOICES), required=True, help="What to change."
)
@click.option("--entity-name", help="Topic name, broker id or user.")
@click.option("--entity-default", is_flag=True, help="The cluster-wide broker defaults.")
@click.option(
    "--add-config", "add", multiple=True, metavar="K=V,...", help="Set configs ([a,b] for lists)."
)
@click.option(
    "--add-config-file",
    "add_file",
    metavar="FILE",
    help="Set the configs of a properties file (values as written, no [a,b] syntax).",
)
@click.option("--delete-config", "delete", multiple=True, metavar="K,...", help="Remove configs.")
@handle_errors
def alter(
    wire: Wire,
    entity_type: str,
    entity_name: str | None,
    entity_default: bool,
    add: tuple[str, ...],
    add_file: str | None,
    delete: tuple[str, ...],
) -> None:
    """Set and remove dynamic configs (IncrementalAlterConfigs, else AlterConfigs).

    Users: --add-config 'SCRAM-SHA-256=[iterations=8192,password=SECRET]' (iterations
    default 4096) creates or replaces that mechanism's credential, --delete-config
    SCRAM-SHA-256 removes it (kt user scram add reads the password from a file or a
    prompt instead, out of the shell's history and `ps`)."""
    # The file's entries first, as kafka-configs adds them before --add-config's.
    sets = _config_file_pairs(add_file) if add_file is not None else []
    sets += [kv for a in add for kv in parse_add_config(a)]
    if entity_type == "users":
        _alter_user(wire, entity_name, entity_default, sets, delete)
        return
    rtype, name = _entity(entity_type, entity_name, entity_default)
    if not name and not entity_default:
        usage_error("--entity-name is required (or --entity-default for brokers)")
    dels = [k for d in delete for k in split_config_list(d)]
    if not sets and not dels:
        usage_error("give --add-config and/or --delete-config")
    both = {k for k, _ in sets} & set(dels)
    if both:
        usage_error(f"config(s) both added and deleted: {', '.join(sorted(both))}")
    ops: list[tuple[str, int, str | None]] = [(k, OP_SET, v) for k, v in sets]
    ops += [(k, OP_DELETE, None) for k in dels]

    if entity_type == "brokers" and entity_name is not None:
        _broker_id(entity_name)

    async def go(c: KafkaClient) -> None:
        if entity_type == "topics":
            await c.topic(name)
        else:
            # As kafka-configs.sh: deleting a config the broker entity does not have
            # is an error, not a silent no-op.
            source = _DYNAMIC_SOURCE["brokers" if name else "broker-default"]
            current = {e.name for e in await c.describe_configs(rtype, name) if e.source == source}
            missing = [k for k in dels if k not in current]
            if missing:
                raise KafkaError(
                    ErrorCode.INVALID_CONFIG,
                    _label(entity_type, name),
                    f"Invalid config(s): {','.join(missing)}",
                )
        await c.incremental_alter_configs(rtype, name, ops)

    wire.run(go)
    if entity_default:
        click.echo("Completed updating default config for brokers in the cluster.")
    else:
        click.echo(f"Completed updating config for {_label(entity_type, name)}.")


def _config_file_pairs(path: str) -> list[tuple[str, str]]:
    """--add-config-file's entries as kafka-configs loads them (Utils.loadProps, a
    java.util.Properties): each value exactly as the file has it, so `[x]` keeps its
    brackets and a comma is part of the value, not a list separator."""
    from kt.storage.errors import StorageError
    from kt.storage.meta_properties import parse_properties

    try:
        with open(path, "rb") as f:
            return list(parse_properties(f.read(), path).items())
    except (OSError, StorageError) as exc:
        usage_error(f"--add-config-file: {path}: {getattr(exc, 'strerror', None) or exc}")


def _alter_user(
    wire: Wire,
    entity_name: str | None,
    entity_default: bool,
    sets: list[tuple[str, str]],
    delete: tuple[str, ...],
) -> None:
    """kafka-configs.sh's SCRAM form for --entity-type users, through
    AlterUserScramCredentials (as Kafka 2.7+ does with --bootstrap-server)."""
    from kt.tools.user_cmd import (
        MAX_ITERATIONS,
        MECHANISMS,
        MIN_ITERATIONS,
        alter_credentials,
        upsertion,
    )

    if entity_default:
        usage_error("--entity-default does not apply to SCRAM credentials: name the user")
    if not entity_name:
        usage_error("--entity-name is required for --entity-type users")
    upserts: list[dict[str, object]] = []
    added: list[str] = []
    for key, value in sets:
        mechanism = key.upper()
        if value.startswith("[") and value.endswith("]"):
            value = value[1:-1]  # a properties file's value keeps its brackets
        if mechanism not in MECHANISMS:
            usage_error(
                f"--add-config: {key}: kt alters only SCRAM credentials of users "
                f"({', '.join(sorted(MECHANISMS))}), not quotas"
            )
        settings: dict[str, str] = {}
        for part in split_config_list(value):
            k, sep, v = part.partition("=")
            if not sep or k.strip() not in ("iterations", "password"):
                # never echo the item: it may be the password
                usage_error(
                    f"--add-config: {key}: expected [iterations=N,password=SECRET] "
                    "(iterations optional)"
                )
            settings[k.strip()] = v
        password = settings.get("password", "")
        if not password:
            usage_error(f"--add-config: {key}: password is required")
        try:
            iterations = int(settings.get("iterations", "4096"))
        except ValueError:
            usage_error(f"--add-config: {key}: iterations must be an integer")
        if not MIN_ITERATIONS <= iterations <= MAX_ITERATIONS:
            usage_error(
                f"--add-config: {key}: iterations must be {MIN_ITERATIONS} to "
                f"{MAX_ITERATIONS}, got {iterations}"
            )
        upserts.append(upsertion(entity_name, mechanism, password, iterations))
        added.append(mechanism)
    deletions: list[dict[str, object]] = []
    for key in (k for d in delete for k in split_config_list(d)):
        mechanism = key.upper()
        if mechanism not in MECHANISMS:
            usage_error(f"--delete-config: {key}: not a SCRAM mechanism "
                        f"({', '.join(sorted(MECHANISMS))})")  # fmt: skip
        if mechanism in added:
            usage_error(f"config(s) both added and deleted: {mechanism}")
        deletions.append({"name": entity_name, "mechanism": MECHANISMS[mechanism][0]})
    if not upserts and not deletions:
        usage_error("give --add-config and/or --delete-config")
    alter_credentials(wire, entity_name, {"deletions": deletions, "upsertions": upserts})
