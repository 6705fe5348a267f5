"""`kt reassign-partitions`: kafka-reassign-partitions.sh over kt's admin client.

Kafka's actions and exact output lines (runbooks grep them), Kafka's JSON files,
plus `--progress` (bytes copied per adding replica, rate, ETA) and
`--generate --minimal-movement`. The JSON formats and plan checks are in
`kt.tools.reassign_plan`; progress and throttles (shared with `kt tui`) in
`kt.tools.reassignment`.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import click

from kt.broker.controller.assignment import BrokerMetadata
from kt.client import KafkaClient, PartitionReassignment
from kt.tools.command_config import apply_command_config
from kt.tools.console import emit_json, fail, handle_errors, stdout_is_terminal, usage_error
from kt.tools.reassign_plan import (
    Plan,
    PlanError,
    check_plan,
    format_plan,
    generate,
    generate_minimal,
    moved_replicas,
    parse_plan,
    parse_topics,
    plan_doc,
)
from kt.tools.reassignment import (
    ReplicaProgress,
    clear_throttles,
    eta_text,
    sample_finished,
    sample_progress,
    set_throttles,
    with_rates,
)
from kt.tools.wire import Wire, wire_options

if TYPE_CHECKING:
    from rich.table import Table

EXISTING = (
    "Cannot execute because there is an existing partition assignment.  Use --additional to "
    "override this and create a new partition assignment in addition to the existing one. "
    "The --additional flag can also be used to change the throttle by resubmitting the "
    "current reassignment."
)


def _tp(t: str, p: int) -> str:
    return f"{t}-{p}"


def _ids(ids: list[int] | tuple[int, ...]) -> str:
    return ",".join(map(str, ids))


def _read(path: str, option: str) -> str:
    p = Path(path)
    if not p.is_file():
        usage_error(f"{option}: {path}: no such file")
    return p.read_text()


def _plan_from(path: str) -> Plan:
    try:
        return parse_plan(_read(path, "--reassignment-json-file"))
    except PlanError as exc:
        usage_error(str(exc))


def _topics_from(path: str) -> list[str]:
    try:
        return parse_topics(_read(path, "--topics-to-move-json-file"))
    except PlanError as exc:
        usage_error(str(exc))


@click.command("reassign-partitions")
@wire_options
@click.option("--generate", "mode", flag_value="generate", help="Propose a plan.")
@click.option("--execute", "mode", flag_value="execute", help="Start the plan's reassignments.")
@click.option("--verify", "mode", flag_value="verify", help="Report whether the plan is done.")
@click.option("--cancel", "mode", flag_value="cancel", help="Cancel the plan's reassignments.")
@click.option("--list", "mode", flag_value="list", help="List reassignments in progress.")
@click.option(
    "--progress", "mode", flag_value="progress",
    help="Bytes copied per adding replica, rate and ETA (beyond Kafka).",
)  # fmt: skip
@click.option("--topics-to-move-json-file", metavar="FILE", help="--generate: the topics.")
@click.option("--broker-list", metavar="ID,ID,...", help="--generate: brokers to use.")
@click.option("--disable-rack-aware", is_flag=True, help="--generate: ignore racks.")
@click.option(
    "--minimal-movement", is_flag=True,
    help="--generate: keep replicas already on listed brokers (beyond Kafka).",
)  # fmt: skip
@click.option("--reassignment-json-file", metavar="FILE", help="The plan (Kafka's format).")
@click.option("--additional", is_flag=True, help="--execute while others are running.")
@click.option(
    "--throttle",
    type=click.IntRange(min=-1),
    default=-1,
    metavar="B/S",
    help="--execute: limit the moving replicas' replication to this many bytes/s.",
)
@click.option("--preserve-throttles", is_flag=True, help="--verify: leave the throttles in place.")
@click.option("--watch", is_flag=True, help="--progress: refresh until nothing is in progress.")
@click.option(
    "--interval", type=click.FloatRange(min=0.1), default=2.0, show_default=True,
    metavar="SECONDS", help="--progress: seconds between samples.",
)  # fmt: skip
@click.option(
    "--command-config", metavar="FILE",
    help="Admin client properties (Kafka's): bootstrap.servers, client.id, "
    "request.timeout.ms, default.api.timeout.ms, security.protocol=PLAINTEXT.",
)  # fmt: skip
@click.option("--json", "as_json", is_flag=True, help="JSON output.")
@handle_errors
def reassign_partitions(
    wire: Wire,
    command_config: str | None,
    mode: str | None,
    topics_to_move_json_file: str | None,
    broker_list: str | None,
    disable_rack_aware: bool,
    minimal_movement: bool,
    reassignment_json_file: str | None,
    additional: bool,
    throttle: int,
    preserve_throttles: bool,
    watch: bool,
    interval: float,
    as_json: bool,
) -> None:
    """Move partition replicas between brokers (like kafka-reassign-partitions.sh).

    \b
    Examples:
      kt reassign-partitions --generate --topics-to-move-json-file topics.json \\
          --broker-list 2,3 > out.txt
      kt reassign-partitions --execute --reassignment-json-file plan.json
      kt reassign-partitions --verify --reassignment-json-file plan.json
      kt reassign-partitions --progress --watch
      kt reassign-partitions --cancel --reassignment-json-file plan.json
      kt reassign-partitions --list

    Output lines are Kafka 3.8's: --verify prints "Reassignment of partition
    foo-0 is completed." or "... is still in progress.", --list "foo-1: replicas:
    1,2,3. adding: 4,5. removing: 1,2.". Plans are Kafka's single-line JSON
    files (version 1; per partition: topic, partition, replicas, log_dirs); a
    malformed plan is refused before anything starts (exit 2). --throttle sets
    Kafka's throttles (both rates on every broker involved, the topics'
    throttled-replica lists); --verify clears them once nothing of the plan is
    in progress, unless --preserve-throttles. --command-config reads Kafka's
    admin properties file; a property kt cannot honour (TLS, SASL, ...) is an
    error, not ignored.
    """
    wire = apply_command_config(wire, command_config)
    if mode is None:
        usage_error(
            "Command must include exactly one action: --generate, --execute, --verify, "
            "--cancel, --list or --progress"
        )
    if mode == "generate":
        _generate(wire, topics_to_move_json_file, broker_list, disable_rack_aware,
                  minimal_movement, as_json)  # fmt: skip
    elif mode == "list":
        _list(wire, as_json)
    elif mode == "progress":
        plan = None
        if reassignment_json_file:
            plan = _plan_from(reassignment_json_file)
        _progress(wire, plan, watch, interval, as_json)
    else:
        if not reassignment_json_file:
            usage_error(f"--{mode} needs --reassignment-json-file")
        plan = _plan_from(reassignment_json_file)
        if mode == "execute":
            _execute(wire, plan, additional, throttle, as_json)
        elif mode == "verify":
            _verify(wire, plan, preserve_throttles, as_json)
        else:
            _cancel(wire, plan, as_json)


async def _current(c: KafkaClient, topics: list[str] | None = None) -> Plan:
    infos = await (c.describe_topics(topics) if topics is not None else c.list_topics())
    return {(t, p): list(info.replicas) for t, ti in infos.items()
            for p, info in ti.partitions.items()}  # fmt: skip


def _generate(
    wire: Wire,
    topics_file: str | None,
    broker_list: str | None,
    disable_rack_aware: bool,
    minimal: bool,
    as_json: bool,
) -> None:
    if not topics_file or not broker_list:
        usage_error("--generate needs --topics-to-move-json-file and --broker-list")
    topics = _topics_from(topics_file)
    try:
        ids = [int(b) for b in broker_list.split(",") if b.strip()]
    except ValueError:
        usage_error(f"--broker-list: not a list of broker ids: {broker_list!r}")
    if len(set(ids)) != len(ids):
        usage_error(f"--broker-list: duplicate broker id in {broker_list!r}")

    async def go(c: KafkaClient) -> tuple[Plan, dict[int, str | None]]:
        known = await c.list_topics()
        missing = [t for t in topics if t not in known]
        if missing:
            usage_error(f"Topic {missing[0]} not found")
        cur = await _current(c, topics)
        return cur, {b.node_id: b.rack for b in c.metadata.brokers.values()}

    current, racks = wire.run(go)
    unknown = [b for b in ids if b not in racks]
    if unknown:
        usage_error(f"--broker-list: unknown broker ids: {_ids(unknown)}")
    brokers = [BrokerMetadata(b, None if disable_rack_aware else racks[b]) for b in sorted(ids)]
    if not disable_rack_aware and 0 < sum(b.rack is not None for b in brokers) < len(brokers):
        fail(
            "Not all brokers have rack information. Add --disable-rack-aware in command line "
            "to make replica assignment without rack information."
        )
    try:
        proposed = generate_minimal(current, brokers) if minimal else generate(current, brokers)
    except PlanError as exc:
        fail(str(exc))
    if as_json:
        emit_json({"current": plan_doc(current), "proposed": plan_doc(proposed),
                   "moved_replicas": moved_replicas(current, proposed)})  # fmt: skip
        return
    click.echo("Current partition replica assignment")
    click.echo(format_plan(current))
    click.echo()
    click.echo("Proposed partition reassignment configuration")
    click.echo(format_plan(proposed))


def _execute(wire: Wire, plan: Plan, additional: bool, throttle: int, as_json: bool) -> None:
    async def go(c: KafkaClient) -> tuple[Plan, dict[tuple[str, int], object]]:
        topics = await c.list_topics()
        check_plan_or_exit(
            plan, {t: list(i.partitions) for t, i in topics.items()}, c.metadata.brokers
        )
        running = await c.list_partition_reassignments()
        if running and not additional:
            fail(EXISTING)
        current = await _current(c, sorted({t for t, _ in plan}))
        current = {tp: rs for tp, rs in current.items() if tp in plan}
        if not as_json:
            click.echo("Current partition replica assignment\n")
            click.echo(format_plan(current))
            click.echo("\nSave this to use as the --reassignment-json-file option during rollback")
        if throttle >= 0:
            await set_throttles(c, current, plan, throttle)
            if not as_json:
                click.echo(THROTTLE_WARNING)
                click.echo(f"The inter-broker throttle limit was set to {throttle} B/s")
        errors = await c.alter_partition_reassignments(plan)
        return current, {tp: e for tp, e in errors.items() if e is not None}

    current, errors = wire.run(go)
    started = [tp for tp in sorted(plan) if tp not in errors]
    if as_json:
        emit_json({"current": plan_doc(current), "started": [_tp(*tp) for tp in started],
                   "errors": {_tp(*tp): str(e) for tp, e in sorted(errors.items())}})  # fmt: skip
    elif started:
        s = "" if len(started) == 1 else "s"
        click.echo(f"Successfully started partition reassignment{s} for "
                   + ",".join(_tp(*tp) for tp in started))  # fmt: skip
    if errors:
        if not as_json:
            click.echo("Error reassigning partition(s):", err=True)
            for tp, e in sorted(errors.items()):
                click.echo(f"{_tp(*tp)}: {e}", err=True)
        fail(f"{len(errors)} partition reassignment(s) could not be started")


THROTTLE_WARNING = (
    "Warning: You must run --verify periodically, until the reassignment completes, to "
    "ensure the throttle is removed."
)


def check_plan_or_exit(
    plan: Plan, partitions: dict[str, list[int]], brokers: Iterable[int]
) -> None:
    """check_plan, its problem as a usage error (exit 2, nothing started)."""
    try:
        check_plan(plan, partitions, brokers)
    except PlanError as exc:
        usage_error(str(exc))


@dataclass
class Status:
    """One partition's --verify status."""

    partition: str
    status: str  # completed | in_progress | mismatch
    replicas: list[int]
    target: list[int]


def verify_statuses(
    plan: Plan, current: Plan, running: dict[tuple[str, int], PartitionReassignment]
) -> list[Status]:
    """Kafka's verify: in progress while listed, else completed when the replicas are
    the target, else a mismatch."""
    out = []
    for tp, target in sorted(plan.items()):
        replicas = current.get(tp, [])
        if tp in running:
            state = "in_progress"
        elif replicas == target:
            state = "completed"
        else:
            state = "mismatch"
        out.append(Status(_tp(*tp), state, replicas, target))
    return out


def verify_line(s: Status) -> str:
    """Kafka 3.3+'s line for one partition."""
    if s.status == "in_progress":
        return f"Reassignment of partition {s.partition} is still in progress."
    if s.status == "completed":
        return f"Reassignment of partition {s.partition} is completed."
    return (
        f"There is no active reassignment of partition {s.partition}, but replica set is "
        f"{_ids(s.replicas)} rather than {_ids(s.target)}."
    )


def _verify(wire: Wire, plan: Plan, preserve_throttles: bool, as_json: bool) -> None:
    topics = sorted({t for t, _ in plan})

    async def go(c: KafkaClient) -> tuple[list[Status], list[int] | None]:
        running = await c.list_partition_reassignments(
            {t: sorted(p for tt, p in plan if tt == t) for t in topics}
        )
        statuses = verify_statuses(plan, await _current(c, topics), running)
        if not as_json:
            click.echo("Status of partition reassignment:")
            for st in statuses:
                click.echo(verify_line(st))
        cleared = None
        if not preserve_throttles and all(st.status != "in_progress" for st in statuses):
            cleared = await clear_throttles(c, topics)
        return statuses, cleared

    statuses, cleared = wire.run(go)
    if as_json:
        emit_json({"partitions": [asdict(st) for st in statuses],
                   "done": all(st.status != "in_progress" for st in statuses),
                   "throttles_cleared": cleared is not None})  # fmt: skip
        return
    if cleared is not None:
        s = "" if len(cleared) == 1 else "s"
        click.echo(f"Clearing broker-level throttles on broker{s} {_ids(cleared)}")
        s = "" if len(topics) == 1 else "s"
        click.echo(f"Clearing topic-level throttles on topic{s} {','.join(topics)}")


def _cancel(wire: Wire, plan: Plan, as_json: bool) -> None:
    async def go(c: KafkaClient) -> tuple[list[tuple[str, int]], dict[tuple[str, int], object]]:
        running = await c.list_partition_reassignments()
        active = [tp for tp in sorted(plan) if tp in running]
        if not active:
            return [], {}
        errors = await c.alter_partition_reassignments({tp: None for tp in active})
        return active, {tp: e for tp, e in errors.items() if e is not None}

    active, errors = wire.run(go)
    done = [tp for tp in active if tp not in errors]
    if as_json:
        emit_json({"cancelled": [_tp(*tp) for tp in done],
                   "errors": {_tp(*tp): str(e) for tp, e in sorted(errors.items())}})  # fmt: skip
    elif done:
        s = "" if len(done) == 1 else "s"
        click.echo(f"Successfully cancelled partition reassignment{s} for: "
                   + ",".join(_tp(*tp) for tp in done))  # fmt: skip
    elif not errors:
        click.echo("None of the specified partition reassignments are active.")
    if errors:
        for tp, e in sorted(errors.items()):
            click.echo(f"{_tp(*tp)}: {e}", err=True)
        fail(f"{len(errors)} partition reassignment(s) could not be cancelled")


def list_line(r: PartitionReassignment) -> str:
    """Kafka's --list line."""
    return (
        f"{r.topic}-{r.partition}: replicas: {_ids(r.replicas)}. adding: "
        f"{_ids(r.adding_replicas)}. removing: {_ids(r.removing_replicas)}."
    )


def _list(wire: Wire, as_json: bool) -> None:
    async def go(c: KafkaClient) -> dict[tuple[str, int], PartitionReassignment]:
        return await c.list_partition_reassignments()

    running = wire.run(go)
    if as_json:
        emit_json({"reassignments": [asdict(running[tp]) for tp in sorted(running)]})
        return
    if not running:
        click.echo("No partition reassignments found.")
        return
    click.echo("Current partition reassignments:")
    for tp in sorted(running):
        click.echo(list_line(running[tp]))


# --- --progress (beyond Kafka) ---------------------------------------------------------


def progress_line(x: ReplicaProgress) -> str:
    """The plain (piped) line of one adding replica."""
    pct = 100.0 * x.fraction
    if x.state != "copying":
        return f"{x.partition} broker {x.broker}: {x.state}, {x.copied} of {x.total} bytes"
    rate = "-" if x.rate is None else f"{x.rate:.0f} B/s"
    return (
        f"{x.partition} broker {x.broker}: copied {x.copied} of {x.total} bytes ({pct:.1f}%), "
        f"remaining {x.remaining} bytes, rate {rate}, eta {eta_text(x.eta_s)}"
    )


def _render(rows: list[ReplicaProgress]) -> Table:
    from rich.progress_bar import ProgressBar
    from rich.table import Table

    table = Table(title="Partition reassignment progress")
    for h in ("Partition", "Broker", "Progress", "Copied", "Remaining", "Rate", "ETA"):
        table.add_column(h)
    for x in rows:
        table.add_row(
            x.partition, str(x.broker), ProgressBar(total=max(x.total, 1), completed=x.copied,
                                                    width=30),
            str(x.copied), str(x.remaining), "-" if x.rate is None else f"{x.rate:.0f} B/s",
            eta_text(x.eta_s),
        )  # fmt: skip
    if not rows:
        table.caption = "No partition reassignments in progress."
    return table


def _progress(wire: Wire, plan: Plan | None, watch: bool, interval: float, as_json: bool) -> None:
    rich_out = stdout_is_terminal() and not as_json

    def show(rows: list[ReplicaProgress]) -> None:
        if as_json:
            doc = [dict(asdict(x), remaining=x.remaining) for x in rows]
            emit_json({"time": time.time(), "replicas": doc})
        elif not rich_out:
            if not rows:
                click.echo("No partition reassignments in progress.")
            for x in rows:
                click.echo(progress_line(x))

    async def go(c: KafkaClient) -> None:
        live = None
        if rich_out:
            from rich.live import Live

            live = Live(_render([]), auto_refresh=False)
            live.start()
        try:
            before = await sample_progress(c, plan)
            t0 = time.monotonic()
            while True:
                await asyncio.sleep(interval)
                rows = await sample_progress(c, plan)
                t1 = time.monotonic()
                rows = with_rates(rows, before, t1 - t0)
                if watch:
                    # Replicas whose reassignment ended since the last sample: their
                    # final sizes (a finished copy is the leader's size).
                    listed = {(x.partition, x.broker) for x in rows}
                    gone = [x for x in before if (x.partition, x.broker) not in listed]
                    if gone:
                        finished = await sample_finished(c, gone)
                        if as_json or not rich_out:
                            show(finished)
                if live is not None:
                    live.update(_render(rows), refresh=True)
                show(rows)
                if not watch or not rows:
                    return
                before, t0 = rows, t1
        finally:
            if live is not None:
                live.stop()

    wire.run(go)
