"""Kafka's `bin/` tools on kt: each tool's command line translated to a kt command.

Every tool here takes Kafka 3.x's options (see `compat_args` for the parsing) and
runs the kt command that already implements it (`kt topic`, `kt configs`, `kt
group`, ...), so the output formats are those commands' (which follow Kafka's).
The few tools kt had no command for (kafka-get-offsets, kafka-delete-records,
kafka-cluster cluster-id) are small renderers over kt's client here. Exit codes are
Kafka's: 0 ok, 1 anything else, usage errors included (Kafka's tools exit 1 there).
"""

from __future__ import annotations

import base64
import contextlib
import io
import json
import re
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import click

from kt.client import KafkaClient, KafkaError
from kt.client.records import EARLIEST, LATEST
from kt.tools.compat_acls import ACLS, kafka_acls
from kt.tools.compat_args import (
    Arity,
    CompatUsageError,
    KafkaMessage,
    Parsed,
    Spec,
    UnsupportedOption,
    parse,
)
from kt.tools.compat_common import (
    COMMON,
    EXIT_FAILED,
    EXIT_OK,
    Connection,
    connection,
    one_action,
    passthrough,
    read_config_file,
    refuse_positional,
    run_kt,
)
from kt.tools.compat_configs import unknown, warn_unknown
from kt.tools.compat_kraft import (
    FEATURES,
    QUORUM,
    STORAGE,
    kafka_features,
    kafka_metadata_quorum,
    kafka_storage,
)
from kt.tools.connect_settings import GENERAL_KEYS
from kt.tools.console import KAFKA_TABLES, CommandError
from kt.tools.wire import DEFAULT_BOOTSTRAP, match_names

F, V, O = Arity.FLAG, Arity.VALUE, Arity.OPTIONAL  # noqa: E741 - the three arities


# --- kafka-topics -------------------------------------------------------------------

TOPIC_FILTERS = [
    "under-replicated-partitions",
    "under-min-isr-partitions",
    "at-min-isr-partitions",
    "unavailable-partitions",
    "topics-with-overrides",
]
TOPICS = Spec(
    {
        **COMMON,
        **dict.fromkeys(["create", "list", "describe", "alter", "delete"], F),
        "topic": V,
        "partitions": V,
        "replication-factor": V,
        "replica-assignment": V,
        "config": V,
        "if-exists": F,
        "if-not-exists": F,
        "exclude-internal": F,
        **dict.fromkeys(TOPIC_FILTERS, F),
        # DescribeTopicPartitions' page size: kt reads every partition at once
        "partition-size-limit-per-response": V,
    },
    {
        "topic-id": "kt selects topics by name",
        "delete-config": "removed from kafka-topics; use kafka-configs --alter --delete-config",
        "disable-rack-aware": "kt's CreateTopics leaves replica placement to the broker",
    },
)


def kafka_topics(p: Parsed) -> int:
    """kafka-topics.sh: --create/--list/--describe/--alter/--delete."""
    refuse_positional(p)
    action = one_action(p, ["list", "describe", "create", "alter", "delete"])
    conn = connection("kafka-topics", p)
    if action not in ("list", "describe") and not p.has("topic"):
        raise CompatUsageError('Missing required argument "[topic]"')
    if action == "alter" and p.has("config"):
        raise CompatUsageError(
            'Option combination "[bootstrap-server],[config]" can\'t be used with option '
            '"[alter]". To alter topic configurations, use kafka-configs.sh (kt compat: '
            "kafka-configs --alter --entity-type topics)"
        )
    for opt, allowed in [
        ("config", ("create",)),
        ("partitions", ("create", "alter")),
        ("replication-factor", ("create",)),
        ("replica-assignment", ("create", "alter")),
        ("if-not-exists", ("create",)),
        ("if-exists", ("alter", "delete", "describe")),
        ("exclude-internal", ("list", "describe")),
        *((f, ("describe",)) for f in TOPIC_FILTERS),
    ]:
        if p.has(opt) and action not in allowed:
            raise CompatUsageError(f'Option "[{opt}]" can\'t be used with option "[{action}]"')
    if action == "alter" and not p.has("partitions"):
        raise CompatUsageError('Missing required argument "[partitions]"')
    argv = ["topic", action, *conn.argv()]
    argv += passthrough(
        p,
        [
            "topic",
            "partitions",
            "replication-factor",
            "replica-assignment",
            "config",
            "if-exists",
            "if-not-exists",
            "exclude-internal",
            *TOPIC_FILTERS,
        ],
    )
    topic = p.value("topic")

    def kafka_error(message: str) -> None:
        # TopicCommand's failure line (on stdout, as Kafka prints it), in its words
        # for the two failures runbooks look for.
        if "already exists" in message:
            message = f"Topic '{topic}' already exists."
        elif "does not exist" in message:
            message = f"Topic '{topic}' does not exist as expected"
        sys.stdout.write(f"Error while executing topic command : {message}\n")
        sys.stdout.flush()

    # Kafka's --alter and --delete print nothing on success; kt's say what they did.
    code, _ = run_kt(argv, quiet=action in ("alter", "delete"), on_error=kafka_error)
    return code


# --- kafka-configs ------------------------------------------------------------------

CONFIGS = Spec(
    {
        **COMMON,
        "describe": F,
        "alter": F,
        "entity-type": V,
        "entity-name": V,
        "entity-default": F,
        "add-config": V,
        "delete-config": V,
        "all": F,
        "topic": V,
        "broker": V,
        "broker-defaults": F,
        "user": V,
        "add-config-file": V,
        "force": F,  # Kafka's "suppress console prompts": kafka-configs asks nothing here
    },
    {
        "zookeeper": "kt has no ZooKeeper-side config store to edit; use --bootstrap-server",
        "bootstrap-controller": "use --bootstrap-server",
        "client": "client quotas are not implemented",
        "ip": "IP quotas are not implemented",
        "client-metrics": "client metrics subscriptions are not implemented",
        "group": "group configs are not implemented",
        "broker-logger": "broker loggers are not implemented",
    },
)
#: users: SCRAM credentials only (kt configs --entity-type users); quotas are refused there
CONFIG_ENTITY_TYPES = ("topics", "brokers", "users")


def kafka_configs(p: Parsed) -> int:
    """kafka-configs.sh --describe/--alter for topics, brokers and users' SCRAM
    credentials."""
    refuse_positional(p)
    action = one_action(p, ["alter", "describe"])
    conn = connection("kafka-configs", p)
    types = p.values("entity-type")
    names = p.values("entity-name")
    default = p.has("entity-default")
    if p.has("topic"):
        types.append("topics")
        names += p.values("topic")
    if p.has("broker"):
        types.append("brokers")
        names += p.values("broker")
    if p.has("broker-defaults"):
        types.append("brokers")
        default = True
    if p.has("user"):
        types.append("users")
        names += p.values("user")
    if not types:
        raise CompatUsageError("--entity-type must be specified")
    if len(set(types)) != 1 or len(names) > 1:
        raise UnsupportedOption(
            "kafka-configs", "entity-type", "one entity type and name at a time"
        )
    etype = types[0]
    if etype not in CONFIG_ENTITY_TYPES:
        raise UnsupportedOption(
            "kafka-configs",
            "entity-type",
            f"{etype} (kt supports {', '.join(CONFIG_ENTITY_TYPES)})",
        )
    if action == "alter" and not (
        p.has("add-config") or p.has("delete-config") or p.has("add-config-file")
    ):
        raise CompatUsageError(
            "At least one of --add-config, --add-config-file, or --delete-config must be "
            "specified with --alter"
        )
    if action == "describe":
        # checkInvalidArgs(describeOpt, alterOpt, addConfig, deleteConfig); kt also
        # refuses --add-config-file, which Kafka would ignore without a word
        for option in ("add-config", "delete-config", "add-config-file"):
            if p.has(option):
                raise CompatUsageError(
                    f'Option "[describe]" can\'t be used with option "[{option}]"'
                )
    if action == "alter" and not names and not default:
        raise CompatUsageError("an entity name must be specified with --alter of topics")
    argv = ["configs", action, *conn.argv(), "--entity-type", etype]
    argv += [a for n in names for a in ("--entity-name", n)]
    argv += ["--entity-default"] if default else []
    if action == "describe":
        argv += passthrough(p, ["all"])
    else:
        if p.has("all"):
            raise CompatUsageError('Option "[all]" can\'t be used with option "[alter]"')
        argv += passthrough(p, ["add-config", "delete-config"])
        if p.has("add-config-file"):
            path = p.value("add-config-file") or ""
            read_config_file(path, "add-config-file")  # an unreadable file: one line
            # the path itself, not its entries re-encoded as --add-config: kt configs
            # alter loads it as Kafka does (Utils.loadProps), each value verbatim
            argv += ["--add-config-file", path]
    code, _ = run_kt(argv)
    return code


# --- kafka-consumer-groups ----------------------------------------------------------

GROUPS = Spec(
    {
        **COMMON,
        **dict.fromkeys(["list", "describe", "delete", "reset-offsets"], F),
        "group": V,
        "all-groups": F,
        "members": F,
        "verbose": F,
        "offsets": F,
        "state": O,
        "topic": V,
        "all-topics": F,
        "to-earliest": F,
        "to-latest": F,
        "to-current": F,
        "to-offset": V,
        "to-datetime": V,
        "shift-by": V,
        "dry-run": F,
        "execute": F,
        "timeout": V,
    },
    {
        "export": "CSV export of reset plans is not implemented",
        "from-file": "CSV import of reset plans is not implemented",
        "by-duration": "give the time as --to-datetime",
        "delete-offsets": "not implemented: reset the offsets or delete the group",
        "type": "group types (KIP-848) are not implemented",
    },
)


def kafka_consumer_groups(p: Parsed) -> int:
    """kafka-consumer-groups.sh --list/--describe/--delete/--reset-offsets."""
    refuse_positional(p)
    action = one_action(p, ["list", "describe", "delete", "reset-offsets"])
    conn = connection("kafka-consumer-groups", p)
    if p.has("timeout"):
        conn = Connection(conn.bootstrap, conn.command_config, _ms(p, "timeout") / 1000)
    argv = ["group", action, *conn.argv()]
    if action == "list":
        if p.has("state"):
            wanted = _state_filter(p.value("state"))
            code, out = run_kt([*argv, "--json"], quiet=True)
            if code == EXIT_OK:
                groups = [
                    g for g in json.loads(out)
                    if wanted is None or (g["state"] or "Unknown").lower() in wanted
                ]  # fmt: skip
                sys.stdout.write(groups_state_table(groups))
            return code
    elif action == "describe":
        if not p.has("group") and not p.has("all-groups"):
            raise CompatUsageError(
                "Option [describe] takes one of these options: [all-groups], [group]"
            )
        argv += passthrough(p, ["group", "all-groups"])
        # Kafka's tables in ConsumerGroupCommand's widths, from kt's JSON; which one
        # as Kafka picks it (--offsets, or no sub-action, first; then --members; then --state).
        offsets = p.has("offsets") or not (p.has("members") or p.has("state"))
        missing: list[str] = []
        code, out = run_kt(
            [*argv, "--members", "--json"],
            quiet=True,
            on_error=lambda message: missing.append(message),
            show_errors=False,
        )
        if code != EXIT_OK and missing and "does not exist" in missing[0]:
            # a group the coordinator does not know is a Dead one to Kafka's tool:
            # its error line, exit 0
            for group in p.values("group"):
                _print_error(f"Consumer group '{group}' does not exist.")
            return EXIT_OK
        for message in missing:
            click.echo(f"kt: error: {message}", err=True)
        docs = [json.loads(line) for line in out.splitlines() if line.strip()]
        brokers: dict[int, str] = {}
        if docs and not offsets and not p.has("members"):
            brokers = _broker_addresses(conn)
        for doc in docs:
            rows = 1 if not offsets and not p.has("members") else (
                len(doc["offsets"]) if offsets else len(doc["members"]))  # fmt: skip
            if not _should_print(doc["group"], doc["state"], rows):
                continue
            if offsets:
                sys.stdout.write(offsets_table(doc))
            elif p.has("members"):
                sys.stdout.write(members_table(doc, verbose=p.has("verbose")))
            else:
                sys.stdout.write(state_table(doc, brokers))
        return code
    elif action == "delete":
        if p.has("all-groups"):
            raise UnsupportedOption(
                "kafka-consumer-groups", "all-groups", "name the groups to delete"
            )
        argv += passthrough(p, ["group"])
    else:
        if len(p.values("group")) != 1:
            raise UnsupportedOption("kafka-consumer-groups", "group", "reset one group at a time")
        if p.has("dry-run") and p.has("execute"):
            raise CompatUsageError(
                "Option [reset-offsets] only accepts one of [execute] and [dry-run]"
            )
        if not p.has("dry-run") and not p.has("execute"):
            # ConsumerGroupCommand 3.x's words, its missing space included
            click.echo(RESET_DRY_RUN_WARNING, err=True)
        argv += passthrough(
            p,
            [
                "group",
                "topic",
                "all-topics",
                "to-earliest",
                "to-latest",
                "to-current",
                "to-offset",
                "to-datetime",
                "shift-by",
                "dry-run",
                "execute",
            ],
        )
        code, out = run_kt([*argv, "--json"], quiet=True)
        if code == EXIT_OK:
            sys.stdout.write(reset_table(json.loads(out)))
        return code
    code, _ = run_kt(argv)
    return code


RESET_DRY_RUN_WARNING = (
    "WARN: No action will be performed as the --execute option is missing.In a future major "
    "release, the default behavior of this command will be to prompt the user before executing "
    "the reset rather than doing a dry run. You should add the --dry-run option explicitly if "
    "you are scripting this command and want to keep the current default behavior without "
    "prompting."
)


def members_table(doc: dict[str, Any], *, verbose: bool = False) -> str:
    """--describe --members as ConsumerGroupCommand prints it: a blank line, the
    header, one row per member, each cell padded (GROUP-INSTANCE-ID only when a
    member has one), #PARTITIONS padded to 15 and followed by a space; with
    --verbose an ASSIGNMENT column: topic(p,q) per topic, sorted, ", " between, "-"
    for none."""
    members = doc["members"]
    with_instance = any(m.get("group_instance_id") for m in members)
    rows = [
        [doc["group"], m["consumer_id"], m.get("group_instance_id") or "", m["host"],
         m["client_id"], str(len(m["assignment"])), _assignment_text(m["assignment"])]
        for m in members
    ]  # fmt: skip
    header = ["GROUP", "CONSUMER-ID", "GROUP-INSTANCE-ID", "HOST", "CLIENT-ID", "#PARTITIONS",
              "ASSIGNMENT"]  # fmt: skip
    widths = [15, 15, 17, 15, 15, 15]
    for col in range(5):
        widths[col] = max([widths[col]] + [len(r[col]) for r in rows])
    keep = [0, 1, 2, 3, 4, 5] if with_instance else [0, 1, 3, 4, 5]

    def line(cells: list[str]) -> str:
        text = "".join(cells[i].ljust(widths[i]) + " " for i in keep)
        return text + (cells[6] if verbose else "")

    return "\n" + line(header) + "\n" + "".join(line(r) + "\n" for r in rows)


def _assignment_text(assignment: list[dict[str, Any]]) -> str:
    by_topic: dict[str, list[int]] = {}
    for tp in assignment:
        by_topic.setdefault(tp["topic"], []).append(int(tp["partition"]))
    if not by_topic:
        return "-"
    parts = [f"{t}({','.join(map(str, sorted(ps)))})" for t, ps in by_topic.items()]
    return ", ".join(sorted(parts))


def state_table(doc: dict[str, Any], brokers: dict[int, str]) -> str:
    """--describe --state as ConsumerGroupCommand prints it: '\n%-Ls %-25s %-20s %-15s %s'
    for the header and the row, L the width of "host:port (id)" (at least 25), then
    a newline."""
    node = doc.get("coordinator")
    coordinator = f"{brokers.get(node, '-')} ({node})" if node is not None else "-"
    width = max(25, len(coordinator))

    def line(*cells: object) -> str:
        first, *rest = (str(c) for c in cells)
        return (f"\n{first.ljust(width)} {rest[0].ljust(25)} {rest[1].ljust(20)} "
                f"{rest[2].ljust(15)} {rest[3]}")  # fmt: skip

    return (line("GROUP", "COORDINATOR (ID)", "ASSIGNMENT-STRATEGY", "STATE", "#MEMBERS")
            + line(doc["group"], coordinator, doc.get("assignment_strategy") or "",
                   doc["state"], len(doc["members"])) + "\n")  # fmt: skip


def _broker_addresses(conn: Connection) -> dict[int, str]:
    async def go(c: KafkaClient) -> dict[int, str]:
        return {b.node_id: f"{b.host}:{b.port}" for b in (await c.describe_cluster()).brokers}

    return conn.wire().run(go)


# ConsumerGroupState's order, Unknown left out (the --state filter refuses it)
GROUP_STATES = ["PreparingRebalance", "CompletingRebalance", "Stable", "Dead", "Empty",
                "Assigning", "Reconciling"]  # fmt: skip


def _state_filter(text: str | None) -> set[str] | None:
    # ConsumerGroupCommand's --list --state [A,B]: any case, comma separated
    if text is None:
        return None
    states = {s.strip().lower() for s in text.split(",") if s.strip()}
    valid = {s.lower() for s in GROUP_STATES}
    if not states or not states <= valid:
        raise CompatUsageError(
            f"Invalid state list '{text}'. Valid states are: {', '.join(GROUP_STATES)}"
        )
    return states


def _print_error(message: str) -> None:
    # ConsumerGroupCommand.printError: on stdout, after a blank line
    click.echo(f"\nError: {message}")


def _should_print(group: str, state: str | None, rows: int) -> bool:
    """ConsumerGroupCommand.shouldPrintMemberState: its notes on stderr, and whether a
    table follows (not for a dead group, nor without rows)."""
    if state == "Dead":
        _print_error(f"Consumer group '{group}' does not exist.")
    elif state == "Empty":
        click.echo(f"\nConsumer group '{group}' has no active members.", err=True)
    elif state in ("PreparingRebalance", "CompletingRebalance", "Assigning", "Reconciling"):
        click.echo(f"\nWarning: Consumer group '{group}' is rebalancing.", err=True)
    return state != "Dead" and rows > 0


def reset_table(plan: list[dict[str, Any]]) -> str:
    """printOffsetsToReset: each line '%n%-30s %-30s %-10s %-15s' (padding kept),
    the header only when there is something to reset, then a newline."""

    def line(*cells: object) -> str:
        return "\n" + " ".join(
            str(c).ljust(w) for c, w in zip(cells, (30, 30, 10, 15), strict=True)
        )

    out = line("GROUP", "TOPIC", "PARTITION", "NEW-OFFSET") if plan else ""
    for r in plan:
        out += line(r["group"], r["topic"], r["partition"], r["new_offset"])
    return out + "\n"


def groups_state_table(groups: list[dict[str, Any]]) -> str:
    """--list --state as ConsumerGroupCommand prints it: GROUP padded to the longest
    id (at least 15) plus 10, STATE padded to 20, in the order listed."""
    width = max([15, *(len(g["group"]) for g in groups)]) + 10
    rows = [("GROUP", "STATE"), *((g["group"], g["state"] or "Unknown") for g in groups)]
    return "".join(f"{gid.ljust(width)} {state.ljust(20)}\n" for gid, state in rows)


def offsets_table(doc: dict[str, Any]) -> str:
    """One group's offsets as ConsumerGroupCommand prints them: a blank line, then
    the header and rows padded to Kafka's widths (group, topic, consumer id and host
    at least 15 wide), '-' for a missing value, a newline after the last row."""
    rows = [
        [doc["group"], r["topic"], r["partition"], r["current_offset"], r["log_end_offset"],
         r["lag"], r["consumer_id"], r["host"], r["client_id"]]
        for r in doc["offsets"]
    ]  # fmt: skip
    cells = [["-" if v is None else str(v) for v in row] for row in rows]
    header = ["GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG",
              "CONSUMER-ID", "HOST", "CLIENT-ID"]  # fmt: skip
    widths = [15, 15, 10, 15, 15, 15, 15, 15]
    for col in (0, 1, 6, 7):
        widths[col] = max([15] + [len(c[col]) for c in cells])
    out = ""
    for row in [header, *cells]:
        out += "\n" + " ".join(v.ljust(w) for v, w in zip(row, widths, strict=False))
        out += " " + row[-1]
    return out + "\n"


def _ms(p: Parsed, name: str) -> int:
    value = p.value(name) or ""
    if not value.isdigit():
        raise CompatUsageError(f"--{name}: expected milliseconds, got {value!r}")
    return int(value)


# --- kafka-console-producer ---------------------------------------------------------

PRODUCER_TUNING = ["timeout", "message-send-max-retries", "retry-backoff-ms", "max-block-ms",
                   "max-memory-bytes", "max-partition-memory-bytes", "metadata-expiry-ms",
                   "request-timeout-ms", "socket-buffer-size"]  # fmt: skip
PRODUCER = Spec(
    {
        "bootstrap-server": V,
        "broker-list": V,
        "topic": V,
        "property": V,
        "producer-property": V,
        "producer.config": V,
        "request-required-acks": V,
        "compression-codec": O,
        "batch-size": V,
        "sync": F,
        "help": F,
        "version": F,
        # how fast records go out, not what is written: accepted with a word
        **dict.fromkeys(PRODUCER_TUNING, V),
    },
    {
        "line-reader": "only the default line reader is implemented (its --property settings)",
        "reader-config": "only the default line reader is implemented (its --property settings)",
        "reader-property": "only the default line reader is implemented (its --property settings)",
    },
)


def _properties(p: Parsed, option: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for text in p.values(option):
        key, sep, value = text.partition("=")
        if not sep:
            raise CompatUsageError(f"Invalid {option} {text!r}: expected key=value")
        out[key.strip()] = value
    return out


# Settings that change what a client does, not just how fast: refused when kt cannot
# honour them (a transactional or custom-partitioned producer, a custom interceptor).
SEMANTIC = {"transactional.id", "transaction.timeout.ms", "partitioner.class",
            "partitioner.ignore.keys", "interceptor.classes", "group.instance.id",
            "group.protocol", "group.remote.assignor", "partition.assignment.strategy",
            "client.rack", "max.poll.records", "exclude.internal.topics",
            "allow.auto.create.topics", "check.crcs"}  # fmt: skip
SERDES = {"key.serializer", "value.serializer", "key.deserializer", "value.deserializer"}


def client_properties(
    p: Parsed, kind: str, config_option: str, property_option: str
) -> tuple[dict[str, str], list[str]]:
    """The client's settings as Kafka's console tools build them: the --*.config
    file, then each --*-property over it. Names Kafka's client does not know get its
    WARN line and are dropped; connection settings (security.protocol, ssl.*, sasl.*,
    client.id, timeouts) become kt's -X options (kt refuses one it cannot honour);
    the rest is returned for the tool to apply."""
    props: dict[str, str] = {}
    if p.has(config_option):
        props.update(read_config_file(p.value(config_option) or "", config_option))
    props.update(_properties(p, property_option))
    warn_unknown(props, kind)
    known = {k: v for k, v in props.items() if k not in unknown(props, kind)}
    x_args: list[str] = []
    rest: dict[str, str] = {}
    for key, value in known.items():
        if key == "bootstrap.servers":
            continue  # --bootstrap-server wins, as in Kafka's tools
        if key in GENERAL_KEYS or key.startswith(("security.", "ssl.", "sasl.")):
            x_args += ["-X", f"{key}={value}"]
        elif key in SEMANTIC:
            raise UnsupportedOption(f"kafka-console-{kind}", property_option, key)
        elif key not in SERDES:  # the console tools set their own (de)serializers
            rest[key] = value
    return rest, x_args


def _tuning(tool: str, key: str) -> None:
    click.echo(f"kt: warning: {tool}: {key} ignored (tuning only)", err=True)


def kafka_console_producer(p: Parsed) -> int:
    """kafka-console-producer.sh: one record per input line."""
    refuse_positional(p)
    if not p.has("topic"):
        raise CompatUsageError('Missing required argument "[topic]"')
    bootstrap = p.value("bootstrap-server") or p.value("broker-list")
    if not bootstrap:
        raise CompatUsageError("--bootstrap-server must be specified")
    argv = ["produce", p.values("topic")[-1], "-b", bootstrap]
    reader = _properties(p, "property")
    for key in reader:
        if key not in ("parse.key", "key.separator", "ignore.error"):
            raise UnsupportedOption("kafka-console-producer", "property", f"{key}")
    if reader.get("ignore.error", "false").lower() == "true":
        raise UnsupportedOption("kafka-console-producer", "property", "ignore.error=true")
    if reader.get("parse.key", "false").lower() == "true":
        argv += ["-K", _kt_delim(reader.get("key.separator", "\t"))]
    acks = p.value("request-required-acks")
    compression = p.value("compression-codec") if p.has("compression-codec") else None
    if p.has("compression-codec") and compression is None:
        compression = "gzip"  # Kafka's default when the option is given bare
    for option in PRODUCER_TUNING:
        if p.has(option):
            _tuning("kafka-console-producer", f"--{option}")
    settings, x_args = client_properties(p, "producer", "producer.config", "producer-property")
    argv += x_args
    for key, value in settings.items():
        if key == "acks":
            # an explicit --request-required-acks wins, as CommandLineUtils.maybeMergeOptions
            acks = acks if p.has("request-required-acks") else value
        elif key == "compression.type":
            compression = compression if p.has("compression-codec") else value
        else:
            _tuning("kafka-console-producer", key)
    if acks is not None:
        argv += ["--acks", acks]
    if compression is not None:
        argv += ["-z", compression]
    if p.has("batch-size"):
        argv += ["--batch-size", p.value("batch-size") or ""]
    code, _ = run_kt(argv, quiet=True)
    return code


def _kt_delim(text: str) -> str:
    # kt's delimiters take \t, \n ... escapes: a literal backslash must be doubled.
    return text.replace("\\", "\\\\").replace("\t", "\\t").replace("\n", "\\n")


# --- kafka-console-consumer ---------------------------------------------------------

CONSUMER = Spec(
    {
        "bootstrap-server": V,
        "topic": V,
        "from-beginning": F,
        "partition": V,
        "offset": V,
        "max-messages": V,
        "timeout-ms": V,
        "group": V,
        "property": V,
        "consumer-property": V,
        "consumer.config": V,
        "isolation-level": V,
        "key-deserializer": V,
        "value-deserializer": V,
        # the default formatter never fails on a record: nothing to skip
        "skip-message-on-error": F,
        "help": F,
        "version": F,
    },
    {
        "formatter": "only the default formatter is implemented",
        "formatter-config": "only the default formatter is implemented (its --property settings)",
        "include": "consume a named --topic",
        "whitelist": "consume a named --topic",
        "enable-systest-events": "system-test events are not implemented",
    },
)
STRING_SERDE = {
    "org.apache.kafka.common.serialization.StringDeserializer",
    "org.apache.kafka.common.serialization.ByteArrayDeserializer",
}


@dataclass(frozen=True)
class MessageFormat:
    """DefaultMessageFormatter's settings (the --property options)."""

    timestamp: bool = False
    partition: bool = False
    offset: bool = False
    headers: bool = False
    key: bool = False
    value: bool = True
    key_separator: bytes = b"\t"
    line_separator: bytes = b"\n"
    headers_separator: bytes = b","
    null_literal: bytes = b"null"

    @classmethod
    def from_properties(cls, props: dict[str, str]) -> MessageFormat:
        """From --property k=v settings (booleans: "true", any case)."""

        def on(key: str, default: bool) -> bool:
            return props.get(key, str(default)).lower() == "true"

        def text(key: str, default: bytes) -> bytes:
            return props[key].encode() if key in props else default

        return cls(
            on("print.timestamp", False),
            on("print.partition", False),
            on("print.offset", False),
            on("print.headers", False),
            on("print.key", False),
            on("print.value", True),
            text("key.separator", b"\t"),
            text("line.separator", b"\n"),
            text("headers.separator", b","),
            text("null.literal", b"null"),
        )

    def render(self, record: dict[str, Any]) -> bytes:
        """One record (kt consume's JSON object, base64 bytes) as Kafka prints it:
        the chosen fields in Kafka's order, key.separator between them,
        line.separator after the last."""

        def raw(value: str | None) -> bytes:
            return self.null_literal if value is None else base64.b64decode(value)

        fields: list[bytes] = []
        if self.timestamp:
            kind = record["timestamp_type"]
            fields.append(
                b"NO_TIMESTAMP" if kind == "None" else f"{kind}:{record['timestamp']}".encode()
            )
        if self.partition:
            fields.append(b"Partition:%d" % record["partition"])
        if self.offset:
            fields.append(b"Offset:%d" % record["offset"])
        if self.headers:
            hdrs = [h["key"].encode() + b":" + raw(h["value"]) for h in record["headers"]]
            fields.append(self.headers_separator.join(hdrs) if hdrs else b"NO_HEADERS")
        if self.key:
            fields.append(raw(record["key"]))
        if self.value:
            fields.append(raw(record["value"]))
        return self.key_separator.join(fields) + self.line_separator if fields else b""


class FormattingStdout(io.RawIOBase):
    """Stands in for stdout under `kt consume --json`: turns each NDJSON line into
    Kafka's console format on the real stdout as it comes, and counts the records
    (for Kafka's closing "Processed a total of N messages")."""

    def __init__(self, fmt: MessageFormat, target: Any) -> None:
        super().__init__()
        self.fmt = fmt
        self.target = target
        self.pending = b""
        self.count = 0

    def writable(self) -> bool:
        return True

    def write(self, data: Any) -> int:
        self.pending += bytes(data)
        *lines, self.pending = self.pending.split(b"\n")
        for line in lines:
            if line.strip():
                self.target.write(self.fmt.render(json.loads(line)))
                self.count += 1
        self.target.flush()
        return len(data)


CONSUMER_PROPS = {"print.timestamp", "print.partition", "print.offset", "print.headers",
                  "print.key", "print.value", "key.separator", "line.separator",
                  "headers.separator", "null.literal"}  # fmt: skip


def kafka_console_consumer(p: Parsed) -> int:
    """kafka-console-consumer.sh with the default formatter."""
    refuse_positional(p)
    if not p.has("topic"):
        raise CompatUsageError("Exactly one of --include/--topic is required. ")
    if not p.has("bootstrap-server"):
        raise CompatUsageError("--bootstrap-server must be specified")
    topic = p.values("topic")[-1]
    props = _properties(p, "property")
    for key in props:
        if key not in CONSUMER_PROPS:
            raise UnsupportedOption("kafka-console-consumer", "property", key)
    for opt in ("key-deserializer", "value-deserializer"):
        if p.has(opt) and p.value(opt) not in STRING_SERDE:
            raise UnsupportedOption("kafka-console-consumer", opt, p.value(opt) or "")
    argv = ["consume", topic, "-b", p.value("bootstrap-server") or DEFAULT_BOOTSTRAP]
    argv += ["--json", "--binary-encoding", "base64"]
    settings, x_args = client_properties(p, "consumer", "consumer.config", "consumer-property")
    argv += x_args
    group = p.value("group")
    if "group.id" in settings:
        if group is not None and group != settings["group.id"]:
            raise CompatUsageError(
                "The group ids provided in different places (directly using '--group', via "
                "'--consumer-property', or via '--consumer.config') do not match. Detected "
                f"group ids: '{group}', '{settings['group.id']}'"
            )
        group = settings["group.id"]
    if p.has("partition"):
        argv += ["-p", p.value("partition") or ""]
    offset = p.value("offset")
    if offset is not None:
        if not p.has("partition"):
            raise CompatUsageError("The partition is required when offset is specified.")
        if p.has("from-beginning"):
            raise CompatUsageError(
                "Options from-beginning and offset cannot be specified together."
            )
        argv += ["-o", {"earliest": "beginning", "latest": "end"}.get(offset.lower(), offset)]
    elif p.has("from-beginning"):
        argv += ["-o", "beginning"]
    elif group is None:
        argv += ["-o", "end"]
    if group is not None:
        argv += ["-G", group]
        if p.has("partition"):
            raise CompatUsageError("Options group and partition cannot be specified together.")
    if p.has("max-messages"):
        argv += ["-c", str(_ms(p, "max-messages"))]
    if p.has("timeout-ms"):
        # kt stops at the end of the partitions rather than after an idle time.
        _ms(p, "timeout-ms")
        argv.append("-e")
    level = (p.value("isolation-level") or "read_uncommitted").lower()
    for key, value in settings.items():
        if key == "isolation.level":
            level = level if p.has("isolation-level") else value.lower()
        elif key == "auto.offset.reset":
            if "-o" not in argv:
                argv += ["-o", {"earliest": "beginning", "latest": "end"}.get(value, value)]
        elif key not in ("group.id", "enable.auto.commit"):
            _tuning("kafka-console-consumer", key)
    if level == "read_committed":
        argv.append("--read-committed")
    real = sys.stdout
    real.flush()
    sink = FormattingStdout(MessageFormat.from_properties(props), real.buffer)
    # kt consume writes its NDJSON to sys.stdout.buffer; the stand-in reformats it.
    stand_in = io.TextIOWrapper(io.BufferedWriter(sink, 1), write_through=True)
    with contextlib.redirect_stdout(stand_in):
        code, _ = run_kt(argv)
        stand_in.flush()
    click.echo(f"Processed a total of {sink.count} messages", err=True)
    return code


# --- kafka-get-offsets, kafka-delete-records, kafka-cluster -------------------------

GET_OFFSETS = Spec(
    {
        **COMMON,
        "broker-list": V,
        "topic": V,
        "partitions": V,
        "time": V,
        "exclude-internal-topics": F,
    },
    {"topic-partitions": "use --topic and --partitions"},
)


def _partition_set(text: str) -> set[int]:
    out: set[int] = set()
    for part in text.split(","):
        lo, dash, hi = part.strip().partition("-")
        try:
            if dash:
                out.update(range(int(lo), int(hi) + 1))
            else:
                out.add(int(lo))
        except ValueError:
            raise CompatUsageError(f"Invalid partition '{part}' specified") from None
    return out


def kafka_get_offsets(p: Parsed) -> int:
    """kafka-get-offsets.sh: `topic:partition:offset` for a time (-1 latest, -2 earliest)."""
    refuse_positional(p)
    option = "bootstrap-server" if p.has("bootstrap-server") else "broker-list"
    conn = connection("kafka-get-offsets", p, option=option)
    time_text = (p.value("time") or "latest").lower()
    named = {"latest": LATEST, "earliest": EARLIEST, "-1": LATEST, "-2": EARLIEST}
    if time_text in ("max-timestamp", "-3", "earliest-local", "-4", "latest-tiered", "-5"):
        raise UnsupportedOption("kafka-get-offsets", "time", time_text)
    try:
        when = named[time_text] if time_text in named else int(time_text)
    except ValueError:
        raise CompatUsageError(f"Malformed time argument {time_text}") from None
    pattern = p.value("topic")
    wanted = _partition_set(p.value("partitions") or "") if p.has("partitions") else None

    async def go(c: KafkaClient) -> list[tuple[str, int, int]]:
        topics = await c.list_topics(include_internal=not p.has("exclude-internal-topics"))
        names = sorted(topics) if pattern is None else _regex_names(pattern, topics)
        tps = [(n, q) for n in names for q in sorted(topics[n].partitions)
               if wanted is None or q in wanted]  # fmt: skip
        got = await c.list_offsets(tps, when) if tps else {}
        return [(t, q, got[(t, q)][0]) for t, q in tps if got[(t, q)][0] >= 0]

    for t, q, off in conn.wire().run(go):
        click.echo(f"{t}:{q}:{off}")
    return EXIT_OK


def _regex_names(pattern: str, names: Mapping[str, object]) -> list[str]:
    # Kafka's --topic here is a regular expression matched against the whole name.
    try:
        rx = re.compile(pattern)
    except re.error:
        return match_names(pattern, names)
    return sorted(n for n in names if rx.fullmatch(n))


DELETE_RECORDS = Spec({**COMMON, "offset-json-file": V})


def kafka_delete_records(p: Parsed) -> int:
    """kafka-delete-records.sh --offset-json-file FILE."""
    refuse_positional(p)
    conn = connection("kafka-delete-records", p)
    path = p.value("offset-json-file")
    if path is None:
        raise CompatUsageError('Missing required argument "[offset-json-file]"')
    try:
        doc = json.loads(Path(path).read_text())
        offsets = {
            (str(e["topic"]), int(e["partition"])): int(e["offset"]) for e in doc["partitions"]
        }
    except OSError as exc:
        raise CompatUsageError(f"{path}: {exc.strerror}") from None
    except (ValueError, KeyError, TypeError) as exc:
        raise CompatUsageError(f"{path}: not an offset JSON file ({exc})") from None
    click.echo("Executing records delete operation")

    async def go(c: KafkaClient) -> dict[tuple[str, int], int]:
        return await c.delete_records(offsets)

    result = conn.wire().run(go)
    click.echo("Records delete operation completed:")
    for (t, q), low in sorted(result.items()):
        click.echo(f"partition: {t}-{q}\tlow_watermark: {low}")
    return EXIT_OK


UNREGISTER_BROKER_KEY = 64
# ClusterTool (argparse4j): -b/--bootstrap-server and -c/--config, the admin client's
# properties file (Kafka's kafka-cluster has no --command-config).
CLUSTER = Spec(
    {"bootstrap-server": V, "config": V, "bootstrap-controller": V, "id": V, "help": F,
     "version": F},
    short={"-b": "bootstrap-server", "-c": "config", "-C": "bootstrap-controller", "-i": "id"},
)  # fmt: skip


def kafka_cluster(p: Parsed) -> int:
    """kafka-cluster.sh cluster-id, and unregister as ClusterTool answers it for a
    cluster without the UnregisterBroker API (ZooKeeper mode, kt's)."""
    if p.positional not in (["cluster-id"], ["unregister"]):
        raise CompatUsageError("kafka-cluster: expected the command cluster-id or unregister")
    if p.has("bootstrap-controller"):
        raise UnsupportedOption("kafka-cluster", "bootstrap-controller", "use --bootstrap-server")
    if p.has("config"):
        p.options["command-config"] = p.options.pop("config")
    conn = connection("kafka-cluster", p)
    if p.positional == ["unregister"]:
        if not p.has("id"):
            raise CompatUsageError("argument --id/-i is required")

        async def offered(c: KafkaClient) -> dict[int, tuple[int, int]]:
            return (await c.any_connection()).broker_versions

        if UNREGISTER_BROKER_KEY in conn.wire().run(offered):
            raise UnsupportedOption(
                "kafka-cluster", "id", "kt's client does not speak UnregisterBroker"
            )
        click.echo("The target cluster does not support the broker unregistration API.")
        return EXIT_OK

    async def go(c: KafkaClient) -> str | None:
        return (await c.describe_cluster()).cluster_id

    cluster_id = conn.wire().run(go)
    if cluster_id:
        click.echo(f"Cluster ID: {cluster_id}")
    else:
        click.echo("No cluster ID found. The Kafka version is probably too old.")
    return EXIT_OK


BROKER_API_VERSIONS = Spec(COMMON, {"bootstrap-controller": "use --bootstrap-server"})


def api_versions_text(broker: str, offered: dict[int, tuple[int, int]]) -> str:
    """NodeApiVersions.toString(true): every API the broker offers, in key order, with
    the highest version both sides speak ("usable"; kt's client is the other side),
    and UNSUPPORTED for the APIs kt knows that the broker does not offer."""
    from kt.protocol.apis import APIS_BY_KEY

    texts: dict[int, str] = {}
    for key, (lo, hi) in offered.items():
        api = APIS_BY_KEY.get(key)
        text = f"{api.name if api else 'UNKNOWN'}({key}): {lo if lo == hi else f'{lo} to {hi}'}"
        if api is not None:
            if api.max_version < lo:
                text += " [unusable: node too new]"
            elif hi < api.min_version:
                text += " [unusable: node too old]"
            else:
                text += f" [usable: {min(api.max_version, hi)}]"
        texts[key] = text
    for key, api in APIS_BY_KEY.items():
        texts.setdefault(key, f"{api.name}({key}): UNSUPPORTED")
    body = ",\n\t".join(texts[k] for k in sorted(texts))
    return f"{broker} -> (\n\t{body}\n)\n"


def kafka_broker_api_versions(p: Parsed) -> int:
    """kafka-broker-api-versions.sh: each broker's ApiVersions, as Kafka prints them."""
    refuse_positional(p)
    conn = connection("kafka-broker-api-versions", p)

    async def go(c: KafkaClient) -> list[str]:
        out = []
        for b in (await c.describe_cluster()).brokers:
            node = f"{b.host}:{b.port} (id: {b.node_id} rack: {b.rack or 'null'})"
            try:
                versions = (await c.connection(b.node_id)).broker_versions
                out.append(api_versions_text(node, versions))
            except KafkaError as exc:
                out.append(f"{node} -> ERROR: {exc}\n")
        return out

    for text in conn.wire().run(go):
        sys.stdout.write(text)
    return EXIT_OK


# --- the tools that map one to one onto a kt command ---------------------------------

DUMP_LOG_OPTIONS = ["files", "print-data-log", "deep-iteration", "verify-index-only",
                    "index-sanity-check", "max-bytes", "max-message-size", "offsets-decoder",
                    "transaction-log-decoder", "cluster-metadata-decoder",
                    "skip-record-metadata"]  # fmt: skip
DUMP_LOG = Spec(
    {
        "help": F,
        "version": F,
        **{
            o: (V if o in ("files", "max-bytes", "max-message-size") else F)
            for o in DUMP_LOG_OPTIONS
        },
    },
    {
        "key-decoder-class": "decoders are Java classes; kt prints keys as text",
        "value-decoder-class": "decoders are Java classes; kt prints values as text",
        "remote-log-metadata-decoder": "tiered storage is not implemented",
        "share-group-state-decoder": "share groups are not implemented",
    },
)


def kafka_dump_log(p: Parsed) -> int:
    """kafka-dump-log.sh: kt dump-log-segments (same options and output)."""
    refuse_positional(p)
    if not p.has("files"):
        raise CompatUsageError('Missing required argument "[files]"')
    code, _ = run_kt(["dump-log-segments", *passthrough(p, DUMP_LOG_OPTIONS)])
    return code


REASSIGN_OPTIONS = ["generate", "execute", "verify", "cancel", "list",
                    "topics-to-move-json-file", "broker-list", "disable-rack-aware",
                    "reassignment-json-file", "additional", "throttle",
                    "replica-alter-log-dirs-throttle", "preserve-throttles"]  # fmt: skip
REASSIGN = Spec(
    {
        **COMMON,
        "timeout": V,
        **{o: V if o.endswith(("file", "list", "throttle")) else F for o in REASSIGN_OPTIONS},
    },
    {"bootstrap-controller": "use --bootstrap-server"},
)


def kafka_reassign_partitions(p: Parsed) -> int:
    """kafka-reassign-partitions.sh: kt reassign-partitions (same options and output)."""
    refuse_positional(p)
    one_action(p, ["generate", "execute", "verify", "cancel", "list"])
    conn = connection("kafka-reassign-partitions", p)
    if p.has("timeout"):
        conn = Connection(conn.bootstrap, conn.command_config, _ms(p, "timeout") / 1000)
    code, _ = run_kt(["reassign-partitions", *conn.argv(), *passthrough(p, REASSIGN_OPTIONS)])
    return code


LEADER_ELECTION = Spec(
    {
        "bootstrap-server": V,
        "admin.config": V,
        "election-type": V,
        "topic": V,
        "partition": V,
        "all-topic-partitions": F,
        "path-to-json-file": V,
        "help": F,
        "version": F,
    },
    {"bootstrap-controller": "use --bootstrap-server"},
)


def kafka_leader_election(p: Parsed) -> int:
    """kafka-leader-election.sh: kt leader-election (same options and output)."""
    refuse_positional(p)
    if p.has("admin.config"):
        p.options["command-config"] = p.options.pop("admin.config")
    conn = connection("kafka-leader-election", p)
    if not p.has("election-type"):
        raise CompatUsageError('Missing required argument "[election-type]"')
    argv = ["leader-election", *conn.argv()]
    argv += ["--election-type", (p.value("election-type") or "").lower()]
    argv += passthrough(p, ["topic", "partition", "all-topic-partitions", "path-to-json-file"])
    code, _ = run_kt(argv)
    return code


LOG_DIRS = Spec({**COMMON, "describe": F, "broker-list": V, "topic-list": V})


def kafka_log_dirs(p: Parsed) -> int:
    """kafka-log-dirs.sh --describe: Kafka's two status lines, then its JSON."""
    refuse_positional(p)
    if not p.has("describe"):
        raise CompatUsageError('Missing required argument "[describe]"')
    conn = connection("kafka-log-dirs", p)
    argv = ["log-dirs", "describe", *conn.argv(), "--json"]
    argv += passthrough(p, ["broker-list", "topic-list"])
    click.echo("Querying brokers for log directories information")
    code, out = run_kt(argv, quiet=True)
    if code == EXIT_OK:
        brokers = [str(b["broker"]) for b in json.loads(out).get("brokers", [])]
        click.echo(f"Received log directory information from brokers {','.join(brokers)}")
        sys.stdout.write(out)
    return code


TXN_SUBCOMMANDS = ["list", "describe", "describe-producers", "abort", "find-hanging"]
TXN_OPTIONS = ["transactional-id", "topic", "partition", "broker-id", "start-offset", "producer-id",
               "producer-epoch", "coordinator-epoch", "max-transaction-timeout",
               "duration-filter"]  # fmt: skip
TRANSACTIONS = Spec(
    {**COMMON, **dict.fromkeys(TXN_OPTIONS, V)},
    {"bootstrap-controller": "use --bootstrap-server"},
)


def kafka_transactions(p: Parsed) -> int:
    """kafka-transactions.sh SUBCOMMAND: kt transactions SUBCOMMAND."""
    if len(p.positional) != 1 or p.positional[0] not in TXN_SUBCOMMANDS:
        raise CompatUsageError(
            f"kafka-transactions: expected one command of {', '.join(TXN_SUBCOMMANDS)}"
        )
    conn = connection("kafka-transactions", p)
    # TransactionsCommand's tables: prettyPrintTable's layout, not kt's
    token = KAFKA_TABLES.set(True)
    try:
        code, _ = run_kt(
            ["transactions", p.positional[0], *conn.argv(), *passthrough(p, TXN_OPTIONS)]
        )
    finally:
        KAFKA_TABLES.reset(token)
    return code


# MetadataShellTool (argparse4j): --snapshot/-s and the command to run, if any.
METADATA_SHELL = Spec(
    {"snapshot": V, "help": F, "version": F},
    {"directory": "give the metadata log directory as --snapshot"},
    short={"-s": "snapshot"},
)


def kafka_metadata_shell(p: Parsed) -> int:
    """kafka-metadata-shell.sh --snapshot PATH [COMMAND...]: kt metadata shell."""
    if not p.has("snapshot"):
        raise CompatUsageError("--snapshot must be specified (a snapshot or metadata log)")
    code, _ = run_kt(["metadata", "shell", "-s", p.value("snapshot") or "", *p.positional])
    return code


# --- the registry -------------------------------------------------------------------


@dataclass(frozen=True)
class Tool:
    """One of Kafka's tools as kt runs it."""

    name: str
    spec: Spec
    run: Callable[[Parsed], int]
    kt_command: str  # what runs it, for `kt compat list`


TOOLS: dict[str, Tool] = {
    t.name: t
    for t in [
        Tool("kafka-topics", TOPICS, kafka_topics, "kt topic"),
        Tool("kafka-configs", CONFIGS, kafka_configs, "kt configs"),
        Tool("kafka-consumer-groups", GROUPS, kafka_consumer_groups, "kt group"),
        Tool("kafka-console-producer", PRODUCER, kafka_console_producer, "kt produce"),
        Tool("kafka-console-consumer", CONSUMER, kafka_console_consumer, "kt consume"),
        Tool("kafka-get-offsets", GET_OFFSETS, kafka_get_offsets, "kt compat (ListOffsets)"),
        Tool(
            "kafka-delete-records",
            DELETE_RECORDS,
            kafka_delete_records,
            "kt compat (DeleteRecords)",
        ),
        Tool("kafka-cluster", CLUSTER, kafka_cluster, "kt compat (DescribeCluster)"),
        Tool(
            "kafka-broker-api-versions",
            BROKER_API_VERSIONS,
            kafka_broker_api_versions,
            "kt compat (ApiVersions)",
        ),
        Tool("kafka-dump-log", DUMP_LOG, kafka_dump_log, "kt dump-log-segments"),
        Tool(
            "kafka-reassign-partitions",
            REASSIGN,
            kafka_reassign_partitions,
            "kt reassign-partitions",
        ),
        Tool("kafka-leader-election", LEADER_ELECTION, kafka_leader_election, "kt leader-election"),
        Tool("kafka-log-dirs", LOG_DIRS, kafka_log_dirs, "kt log-dirs describe"),
        Tool("kafka-transactions", TRANSACTIONS, kafka_transactions, "kt transactions"),
        Tool("kafka-acls", ACLS, kafka_acls, "kt acl"),
        Tool(
            "kafka-metadata-quorum",
            QUORUM,
            kafka_metadata_quorum,
            "kt compat (ApiVersions: DescribeQuorum)",
        ),
        Tool("kafka-features", FEATURES, kafka_features, "kt compat (ApiVersions features)"),
        Tool("kafka-storage", STORAGE, kafka_storage, "kt compat (meta.properties)"),
        Tool("kafka-metadata-shell", METADATA_SHELL, kafka_metadata_shell, "kt metadata shell"),
    ]
}
# Kafka's tools kt does not run (yet), with why: named in the error and in the list.
NOT_COVERED: dict[str, str] = {}


def tool_name(word: str) -> str:
    """`kafka-topics.sh`, `/opt/kafka/bin/kafka-topics.sh` or `kafka-topics` -> `kafka-topics`."""
    name = word.rsplit("/", 1)[-1]
    return name[:-3] if name.endswith(".sh") else name


def run_tool(name: str, argv: list[str]) -> int:
    """Run Kafka's tool `name` with its command line; returns the exit code."""
    tool = TOOLS.get(tool_name(name))
    if tool is None:
        why = NOT_COVERED.get(tool_name(name), "not a Kafka tool kt knows")
        click.echo(f"kt: error: {tool_name(name)}: {why} (see 'kt compat list')", err=True)
        return EXIT_FAILED
    try:
        parsed = parse(tool.name, tool.spec, argv)
        if parsed.has("version"):
            from kt import __version__

            click.echo(f"{__version__} (kt)")
            return EXIT_OK
        if parsed.has("help") or not argv:
            click.echo(_usage(tool))
            return EXIT_OK if parsed.has("help") else EXIT_FAILED
        return tool.run(parsed)
    except UnsupportedOption as exc:
        click.echo(f"kt: error: {exc} (see 'kt compat list {tool.name}')", err=True)
    except KafkaMessage as exc:
        click.echo(str(exc), err=True)
    except CompatUsageError as exc:
        if "is not a recognized option" in str(exc):
            # What Kafka 3.x's JVM prints for joptsimple's exception (e.g. --zookeeper).
            click.echo(
                f'Exception in thread "main" joptsimple.UnrecognizedOptionException: {exc}',
                err=True,
            )
        else:
            click.echo(f"kt: error: {tool.name}: {exc}", err=True)
    except CommandError as exc:
        exc.show()
    return EXIT_FAILED


def _usage(tool: Tool) -> str:
    lines = [f"{tool.name} (run by {tool.kt_command}); options kt supports:"]
    lines += [
        f"  --{n}{'' if a is Arity.FLAG else ' <value>'}"
        for n, a in sorted(tool.spec.supported.items())
        if n not in tool.spec.refused
    ]
    refused = sorted([*tool.spec.unsupported, *tool.spec.refused])
    if refused:
        lines.append("Kafka's options kt refuses: " + ", ".join(f"--{n}" for n in refused))
    return "\n".join(lines)
