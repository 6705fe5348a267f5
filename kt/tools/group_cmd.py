"""`kt group list|describe|delete|reset-offsets`: kafka-consumer-groups.sh over kt's client."""

from __future__ import annotations

from datetime import datetime
from typing import Any

import click

from kt.admin.describe import GroupDescription, describe_group
from kt.admin.offset_reset import ResetTarget, is_inactive, plan_moves
from kt.client import GroupListing, KafkaClient, KafkaError, TopicPartition
from kt.protocol.errors import ErrorCode
from kt.tools.console import (
    emit_json,
    fail,
    handle_errors,
    render_table,
    stdout_is_terminal,
    usage_error,
    warn,
)
from kt.tools.wire import Wire, wire_options


@click.group()
def group() -> None:
    """List, describe, delete consumer groups and reset their offsets
    (like kafka-consumer-groups.sh).

    \b
    Examples:
      kt group list --state
      kt group describe --group billing
      kt group describe --all-groups --members
      kt group reset-offsets --group billing --topic orders --to-earliest
      kt group reset-offsets --group billing --all-topics --shift-by -100 --execute
      kt group delete --group billing

    Exit codes: 0 ok, 1 the operation failed (unknown or active group, broker
    error, unreachable cluster), 2 usage error.
    """


@group.command("list")
@wire_options
@click.option("--state", "show_state", is_flag=True, help="Show each group's state too.")
@click.option("--json", "as_json", is_flag=True, help="A JSON array of groups.")
@handle_errors
def list_groups(wire: Wire, show_state: bool, as_json: bool) -> None:
    """List group ids, one per line (with --state: a GROUP STATE table)."""

    async def go(c: KafkaClient) -> list[GroupListing]:
        groups = await c.list_groups()
        if show_state or as_json:
            # ListGroups before v4 has no state; DescribeGroups always does.
            missing = [g for g in groups if not g.state]
            if missing:
                descs = await c.describe_groups([g.group_id for g in missing])
                for g, d in zip(missing, descs, strict=True):
                    g.state = d.state
        return groups

    groups = wire.run(go)
    if as_json:
        emit_json(
            [
                {"group": g.group_id, "protocol_type": g.protocol_type, "state": g.state}
                for g in groups
            ]
        )
    elif show_state:
        render_table(["GROUP", "STATE"], [[g.group_id, g.state] for g in groups])
    else:
        for g in groups:
            click.echo(g.group_id)


def _dash(v: int | str | None) -> str:
    return "-" if v is None or (isinstance(v, int) and v < 0) else str(v)


@group.command()
@wire_options
@click.option("--group", "-g", "groups", multiple=True, help="The group (repeatable).")
@click.option("--all-groups", is_flag=True, help="Describe every group.")
@click.option("--members", is_flag=True, help="Show members instead of offsets.")
@click.option("--state", "show_state", is_flag=True, help="Show the group's state instead.")
@click.option("--verbose", "-v", is_flag=True, help="With --members: list each assignment.")
@click.option("--json", "as_json", is_flag=True, help="One JSON object per group (NDJSON).")
@handle_errors
def describe(
    wire: Wire,
    groups: tuple[str, ...],
    all_groups: bool,
    members: bool,
    show_state: bool,
    verbose: bool,
    as_json: bool,
) -> None:
    """Describe groups: committed offsets, lag and owners per partition.

    Per partition the committed (current) offset, the log end offset, the lag and
    the consumer that owns it; on a terminal, then the total lag (piped, the rows
    alone, as kafka-consumer-groups.sh prints them; --json has total_lag).

    Columns as kafka-consumer-groups.sh --describe prints them: GROUP TOPIC
    PARTITION CURRENT-OFFSET LOG-END-OFFSET LAG CONSUMER-ID HOST CLIENT-ID ('-'
    where there is none). A group that does not exist is an error (exit 1).
    """
    if not groups and not all_groups:
        usage_error("give --group or --all-groups")
    if members and show_state:
        usage_error("--members and --state exclude each other")

    async def go(c: KafkaClient) -> list[GroupDescription]:
        ids = list(groups) if groups else [g.group_id for g in await c.list_groups()]
        return [await describe_group(c, gid) for gid in ids]

    results = wire.run(go)
    missing = [desc.group_id for desc in results if not desc.exists]
    for n, desc in enumerate(results):
        if not desc.exists:
            continue
        gid = desc.group_id
        if as_json:
            emit_json(
                {
                    "group": gid,
                    "state": desc.state,
                    "protocol_type": desc.protocol_type,
                    "assignment_strategy": desc.protocol,
                    "coordinator": desc.coordinator,
                    "members": [
                        {
                            "consumer_id": m.member_id,
                            "group_instance_id": m.group_instance_id,
                            "host": m.host,
                            "client_id": m.client_id,
                            "assignment": [{"topic": t, "partition": p} for t, p in m.assignment],
                        }
                        for m in desc.members
                    ],
                    "offsets": [
                        {
                            "topic": r.topic,
                            "partition": r.partition,
                            "current_offset": r.committed if r.committed >= 0 else None,
                            "log_end_offset": r.log_end_offset if r.log_end_offset >= 0 else None,
                            "lag": r.lag if r.known else None,
                            "consumer_id": r.consumer,
                            "host": m.host if (m := desc.member(r.consumer)) else None,
                            "client_id": m.client_id if m else None,
                        }
                        for r in desc.lags
                    ],
                    "total_lag": desc.total_lag,
                }
            )
            continue
        if n:
            click.echo()
        if show_state:
            render_table(
                ["GROUP", "COORDINATOR (ID)", "ASSIGNMENT-STRATEGY", "STATE", "#MEMBERS"],
                [[gid, str(desc.coordinator), desc.protocol, desc.state, len(desc.members)]],
            )
            continue
        if not desc.members:
            click.echo(f"Consumer group '{gid}' has no active members.", err=True)
        elif desc.state in ("PreparingRebalance", "CompletingRebalance"):
            warn(f"consumer group '{gid}' is rebalancing")
        if members:
            headers = ["GROUP", "CONSUMER-ID", "HOST", "CLIENT-ID", "#PARTITIONS"]
            if verbose:
                headers.append("ASSIGNMENT")
            table = []
            for m in desc.members:
                row: list[Any] = [gid, m.member_id, m.host, m.client_id, len(m.assignment)]
                if verbose:
                    row.append(",".join(f"{t}-{p}" for t, p in m.assignment) or "-")
                table.append(row)
            render_table(headers, table)
            continue
        render_table(
            [
                "GROUP",
                "TOPIC",
                "PARTITION",
                "CURRENT-OFFSET",
                "LOG-END-OFFSET",
                "LAG",
                "CONSUMER-ID",
                "HOST",
                "CLIENT-ID",
            ],
            [
                [
                    gid,
                    r.topic,
                    r.partition,
                    _dash(r.committed),
                    _dash(r.log_end_offset),
                    _dash(r.lag if r.known else None),
                    _dash(r.consumer),
                    _dash(m.host if (m := desc.member(r.consumer)) else None),
                    _dash(m.client_id if m else None),
                ]
                for r in desc.lags
            ],
        )
        if stdout_is_terminal():
            # kafka-consumer-groups.sh prints no total: piped output stays its rows
            # alone (what scripts parse; --json has total_lag), a person gets the sum.
            click.echo(f"TOTAL LAG: {desc.total_lag}")
    if missing:
        fail(
            "consumer group "
            + ", ".join(f"'{g}'" for g in missing)
            + (" does not exist" if len(missing) == 1 else " do not exist")
        )


@group.command()
@wire_options
@click.option("--group", "-g", "groups", multiple=True, required=True, help="Group to delete.")
@handle_errors
def delete(wire: Wire, groups: tuple[str, ...]) -> None:
    """Delete groups and their committed offsets (groups must have no members)."""

    async def go(c: KafkaClient) -> dict[str, KafkaError | None]:
        return await c.delete_groups(groups)

    results = wire.run(go)
    failed = {g: e for g, e in results.items() if e is not None}
    ok = [g for g, e in results.items() if e is None]
    if ok:
        names = ", ".join(f"'{g}'" for g in ok)
        click.echo(f"Deletion of requested consumer groups ({names}) was successful.")
    if failed:
        g, e = next(iter(failed.items()))
        assert e is not None
        reason = e.code.message
        if e.code == ErrorCode.GROUP_ID_NOT_FOUND:
            reason = "it does not exist"
        elif e.code == ErrorCode.NON_EMPTY_GROUP:
            reason = "it is not empty (it has active members)"
        more = f" (and {len(failed) - 1} more)" if len(failed) > 1 else ""
        fail(f"group '{g}' could not be deleted: {reason}{more}")


def parse_datetime(text: str) -> int:
    """ISO-8601 date/time (local time unless it has an offset or Z) -> epoch ms."""
    t = text.strip()
    if t.endswith("Z"):
        t = t[:-1] + "+00:00"
    try:
        dt = datetime.fromisoformat(t)
    except ValueError:
        usage_error(f"--to-datetime: not an ISO date/time: {text!r} (e.g. 2024-05-01T12:00:00)")
    return int(dt.timestamp() * 1000)


def _parse_topic_spec(spec: str) -> tuple[str, list[int] | None]:
    name, sep, parts = spec.partition(":")
    if not sep:
        return name, None
    try:
        return name, [int(p) for p in parts.split(",") if p]
    except ValueError:
        usage_error(f"--topic: expected TOPIC or TOPIC:P,P..., got {spec!r}")


@group.command("reset-offsets")
@wire_options
@click.option("--group", "-g", "group_id", required=True, help="The group.")
@click.option(
    "--topic",
    "-t",
    "topics",
    multiple=True,
    metavar="TOPIC[:P,...]",
    help="Reset this topic (or these of its partitions); repeatable.",
)
@click.option("--all-topics", is_flag=True, help="Every topic the group has offsets for.")
@click.option("--to-earliest", is_flag=True, help="To the log start offset.")
@click.option("--to-latest", is_flag=True, help="To the log end offset.")
@click.option("--to-current", is_flag=True, help="To the committed offset (re-commit it).")
@click.option("--to-offset", type=int, metavar="N", help="To offset N (clamped to the log).")
@click.option("--to-datetime", metavar="ISO", help="To the first offset at or after this time.")
@click.option("--shift-by", type=int, metavar="N", help="Move the committed offset by N.")
@click.option("--dry-run", is_flag=True, help="Show the new offsets only (the default).")
@click.option("--execute", is_flag=True, help="Commit the new offsets.")
@click.option("--json", "as_json", is_flag=True, help="A JSON array of the new offsets.")
@handle_errors
def reset_offsets(
    wire: Wire,
    group_id: str,
    topics: tuple[str, ...],
    all_topics: bool,
    to_earliest: bool,
    to_latest: bool,
    to_current: bool,
    to_offset: int | None,
    to_datetime: str | None,
    shift_by: int | None,
    dry_run: bool,
    execute: bool,
    as_json: bool,
) -> None:
    """Reset a group's committed offsets; shows the plan unless --execute.

    Like Kafka, refuses while the group has active members (state other than
    Empty or Dead). New offsets are clamped to the partitions' log start and
    end offsets. Prints GROUP TOPIC PARTITION NEW-OFFSET.
    """
    scenarios = [
        to_earliest,
        to_latest,
        to_current,
        to_offset is not None,
        to_datetime is not None,
        shift_by is not None,
    ]
    if sum(scenarios) != 1:
        usage_error(
            "give exactly one of --to-earliest, --to-latest, --to-current, --to-offset, "
            "--to-datetime, --shift-by"
        )
    if bool(topics) == all_topics:
        usage_error("give --topic or --all-topics")
    if dry_run and execute:
        usage_error("--dry-run and --execute exclude each other")
    if to_earliest:
        target = ResetTarget("earliest")
    elif to_latest:
        target = ResetTarget("latest")
    elif to_current:
        target = ResetTarget("current")
    elif to_offset is not None:
        target = ResetTarget("offset", to_offset)
    elif to_datetime is not None:
        target = ResetTarget("timestamp", parse_datetime(to_datetime))
    else:
        target = ResetTarget("shift", shift_by)
    specs = [_parse_topic_spec(t) for t in topics]

    async def go(c: KafkaClient) -> dict[TopicPartition, int]:
        desc = (await c.describe_groups([group_id]))[0]
        if not is_inactive(desc.state):
            raise KafkaError(
                ErrorCode.NON_EMPTY_GROUP,
                "",
                f"assignments can only be reset if the group '{group_id}' is inactive, "
                f"but the current state is {desc.state}",
            )
        committed = await c.fetch_committed(group_id)
        tps: list[TopicPartition] = []
        if all_topics:
            tps = sorted(committed)
        for name, parts in specs:
            avail = await c.partitions_for(name)
            for p in parts if parts is not None else avail:
                if p not in avail:
                    raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"partition {name}-{p}")
                tps.append((name, p))
        moves = await plan_moves(c, target, sorted(set(tps)), committed)
        plan = {(t, p): new for t, p, _, new in moves}
        if execute and plan:
            await c.commit_offsets(group_id, plan)
        return plan

    plan = wire.run(go)
    if as_json:
        emit_json(
            [
                {"group": group_id, "topic": t, "partition": p, "new_offset": o}
                for (t, p), o in sorted(plan.items())
            ]
        )
        return
    render_table(
        ["GROUP", "TOPIC", "PARTITION", "NEW-OFFSET"],
        [[group_id, t, p, o] for (t, p), o in sorted(plan.items())],
    )
    if not execute:
        click.echo("(dry run: nothing committed; add --execute to commit)", err=True)
