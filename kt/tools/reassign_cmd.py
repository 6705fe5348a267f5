"""`kt reassign-partitions`: kafka-reassign-partitions.sh over kt's admin client.

Kafka's actions and exact output lines (runbooks grep them), Kafka's JSON files,
plus `--progress` (bytes copied per adding replica, rate, ETA) and
`--generate --minimal-movement`. The JSON formats and plan checks are in
`kt.admin.reassign_plan`; progress, throttles and the status of a plan (shared with
`kt tui`) in `kt.admin.reassignment`; this module parses and prints.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterable
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING

import click

from kt.admin.reassign_plan import (
    Plan,
    PlanError,
    check_plan,
    format_plan,
    generate,
    generate_minimal,
    moved_replicas,
    parse_log_dirs,
    parse_plan,
    parse_topics,
    plan_doc,
)
from kt.admin.reassignment import (
    LOG_DIR_RATE,
    LogDirMoves,
    MoveStatus,
    Replica,
    ReplicaProgress,
    Status,
    clear_throttles,
    current_assignment,
    eta_text,
    plan_state,
    replica_name,
    sample_finished,
    sample_moves,
    sample_progress,
    set_throttles,
    with_rates,
)
from kt.client import OP_SET, RESOURCE_BROKER, KafkaClient, PartitionReassignment
from kt.cluster.assignment import BrokerMetadata
from kt.protocol.errors import ErrorCode
from kt.tools.console import emit_json, fail, handle_errors, stdout_is_terminal, usage_error
from kt.tools.wire import Wire, wire_options

if TYPE_CHECKING:
    from rich.live import Live
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


def _plan_and_moves_from(path: str) -> tuple[Plan, LogDirMoves]:
    plan = _plan_from(path)
    return plan, parse_log_dirs(_read(path, "--reassignment-json-file"))


def _replicas(rs: Iterable[Replica]) -> str:
    return ",".join(replica_name(r) for r in sorted(rs, key=lambda r: (r[2], r[0], r[1])))


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
@click.option(
    "--replica-alter-log-dirs-throttle",
    type=click.IntRange(min=-1),
    default=-1,
    metavar="B/S",
    help="--execute: limit moves between log dirs of a broker to this many bytes/s.",
)
@click.option(
    "--preserve-throttles", is_flag=True, help="--verify, --cancel: leave the throttles in place."
)
@click.option(
    "--clear-throttles-when-done", is_flag=True,
    help="--execute --throttle: wait for the plan to complete, then clear the throttles "
    "(beyond Kafka).",
)  # fmt: skip
@click.option(
    "--wait-timeout", type=click.FloatRange(min=0, min_open=True), default=None,
    metavar="SECONDS",
    help="--clear-throttles-when-done: stop waiting after this long (throttles stay).",
)  # fmt: skip
@click.option("--watch", is_flag=True, help="--progress: refresh until nothing is in progress.")
@click.option(
    "--interval", type=click.FloatRange(min=0.1), default=2.0, show_default=True,
    metavar="SECONDS",
    help="--progress, --clear-throttles-when-done: seconds between samples.",
)  # fmt: skip
@click.option("--json", "as_json", is_flag=True, help="JSON output.")
@handle_errors
def reassign_partitions(
    wire: Wire,
    mode: str | None,
    topics_to_move_json_file: str | None,
    broker_list: str | None,
    disable_rack_aware: bool,
    minimal_movement: bool,
    reassignment_json_file: str | None,
    additional: bool,
    throttle: int,
    replica_alter_log_dirs_throttle: int,
    preserve_throttles: bool,
    clear_throttles_when_done: bool,
    wait_timeout: float | None,
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
    in progress, and --cancel at once, unless --preserve-throttles. --command-config reads Kafka's
    admin properties file (bootstrap.servers, client.id, timeouts, TLS and SASL
    settings), as every online kt command does.

    A log_dirs entry other than "any" moves that broker's replica to that log
    directory (absolute, as `kt log-dirs describe` shows it): --execute checks
    the directories exist, starts the moves of replicas already there, then the
    reassignment, then the moves of replicas it creates (waiting up to --timeout
    for them); --replica-alter-log-dirs-throttle limits the copy on the brokers
    moving replicas; --verify adds "Reassignment of replica foo-0-1 completed
    successfully." or "... is still in progress." per moved replica; --cancel
    stops the plan's moves still running (each replica stays where it is).

    --execute --throttle B/S --clear-throttles-when-done (beyond Kafka) stays in
    the foreground, shows the progress as --progress --watch does (every
    --interval seconds), and once the whole plan is done clears the throttles as
    --verify does, prints its lines and exits 0. A reassignment cancelled or
    replaced by someone else: throttles cleared too, exit 1. Ctrl-C / SIGTERM or
    --wait-timeout stop the wait and leave the throttles in place, saying to run
    --verify (exit 130 / 143 / 1).
    """
    if mode is None:
        usage_error(
            "Command must include exactly one action: --generate, --execute, --verify, "
            "--cancel, --list or --progress"
        )
    if clear_throttles_when_done and mode != "execute":
        usage_error("--clear-throttles-when-done works with --execute only")
    if wait_timeout is not None and not clear_throttles_when_done:
        usage_error("--wait-timeout needs --clear-throttles-when-done")
    if clear_throttles_when_done and throttle < 0 and replica_alter_log_dirs_throttle < 0:
        usage_error(
            "--clear-throttles-when-done needs --throttle or --replica-alter-log-dirs-throttle "
            "(without a throttle there is nothing to clear)"
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
        plan, moves = _plan_and_moves_from(reassignment_json_file)
        if mode == "execute":
            _execute(wire, plan, moves, additional, throttle, replica_alter_log_dirs_throttle,
                     as_json)  # fmt: skip
            if clear_throttles_when_done:
                # Imported here: kt.tools.reassign_wait builds on this module.
                from kt.tools.reassign_wait import run_wait

                run_wait(wire, plan, moves, reassignment_json_file, interval, wait_timeout,
                         as_json)  # fmt: skip
        elif mode == "verify":
            _verify(wire, plan, moves, preserve_throttles, as_json)
        else:
            _cancel(wire, plan, moves, preserve_throttles, as_json)


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
        cur = await current_assignment(c, topics)
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


def _execute(
    wire: Wire,
    plan: Plan,
    moves: LogDirMoves,
    additional: bool,
    throttle: int,
    log_dir_throttle: int,
    as_json: bool,
) -> None:
    async def go(
        c: KafkaClient,
    ) -> tuple[Plan, dict[tuple[str, int], object], list[Replica]]:
        topics = await c.list_topics()
        check_plan_or_exit(
            plan, {t: list(i.partitions) for t, i in topics.items()}, c.metadata.brokers
        )
        running = await c.list_partition_reassignments()
        if running and not additional:
            fail(EXISTING)
        if moves:
            await check_log_dirs_exist(c, moves)
        current = await current_assignment(c, sorted({t for t, _ in plan}))
        current = {tp: rs for tp, rs in current.items() if tp in plan}
        if not as_json:
            click.echo("Current partition replica assignment\n")
            click.echo(format_plan(current))
            click.echo("\nSave this to use as the --reassignment-json-file option during rollback")
        if (throttle >= 0 or log_dir_throttle >= 0) and not as_json:
            click.echo(THROTTLE_WARNING)
        if throttle >= 0:
            await set_throttles(c, current, plan, throttle)
            if not as_json:
                click.echo(f"The inter-broker throttle limit was set to {throttle} B/s")
        if log_dir_throttle >= 0 and moves:
            for b in sorted({b for _, _, b in moves}):
                await c.incremental_alter_configs(
                    RESOURCE_BROKER, str(b), [(LOG_DIR_RATE, OP_SET, str(log_dir_throttle))]
                )
            if not as_json:
                click.echo(
                    f"The replica-alter-dir throttle limit was set to {log_dir_throttle} B/s"
                )
        # Replicas already on their broker start moving now; the others are created
        # by the reassignment (their brokers remember the directory meanwhile).
        started = await start_log_dir_moves(c, moves)
        answers = await c.alter_partition_reassignments(plan)
        errors: dict[tuple[str, int], object] = {
            tp: e for tp, e in answers.items() if e is not None
        }
        if not errors:
            deadline = time.monotonic() + wire.timeout
            while len(started) < len(moves):
                pending = {r: d for r, d in moves.items() if r not in started}
                started += await start_log_dir_moves(c, pending)
                if len(started) < len(moves):
                    if time.monotonic() >= deadline:
                        left = [r for r in moves if r not in started]
                        s = "" if len(left) == 1 else "s"
                        fail(f"Timed out before log directory move{s} could be started for: "
                             + _replicas(left))  # fmt: skip
                    await asyncio.sleep(0.1)
        return current, errors, started

    current, errors, started = wire.run(go)
    begun = [tp for tp in sorted(plan) if tp not in errors]
    if as_json:
        emit_json({"current": plan_doc(current), "started": [_tp(*tp) for tp in begun],
                   "log_dir_moves_started": [replica_name(r) for r in sorted(started)],
                   "errors": {_tp(*tp): str(e) for tp, e in sorted(errors.items())}})  # fmt: skip
    elif begun:
        s = "" if len(begun) == 1 else "s"
        click.echo(f"Successfully started partition reassignment{s} for "
                   + ",".join(_tp(*tp) for tp in begun))  # fmt: skip
    if errors:
        if not as_json:
            click.echo("Error reassigning partition(s):", err=True)
            for tp, e in sorted(errors.items()):
                click.echo(f"{_tp(*tp)}: {e}", err=True)
        fail(f"{len(errors)} partition reassignment(s) could not be started")
    if started and not as_json:
        s = "" if len(started) == 1 else "s"
        click.echo(f"Successfully started log directory move{s} for: {_replicas(started)}")


async def check_log_dirs_exist(c: KafkaClient, moves: LogDirMoves) -> None:
    """Refuse (one line, exit 1, nothing started) a plan moving a replica to a
    directory its broker does not have: the broker would answer LOG_DIR_NOT_FOUND."""
    brokers = sorted({b for _, _, b in moves} & set(c.metadata.brokers))
    dirs: dict[int, set[str]] = {b: set() for b in brokers}
    for info in await c.describe_log_dirs(brokers, {}):
        dirs[info.broker].add(info.path)
    for r, d in sorted(moves.items()):
        if r[2] in dirs and d not in dirs[r[2]]:
            fail(
                f"Failed to alter dir for {replica_name(r)}: broker {r[2]} has no log dir {d} "
                f"(LOG_DIR_NOT_FOUND; its log dirs: {', '.join(sorted(dirs[r[2]]))})"
            )


async def start_log_dir_moves(c: KafkaClient, moves: LogDirMoves) -> list[Replica]:
    """AlterReplicaLogDirs for `moves`: the replicas whose move started (or that
    are in their directory already). REPLICA_NOT_AVAILABLE (not on its broker
    yet) is left for a later try, as Kafka's tool does; any other error fails."""
    if not moves:
        return []
    out = []
    for r, err in sorted((await c.alter_replica_log_dirs(moves)).items()):
        if err is None:
            out.append(r)
        elif err.code != ErrorCode.REPLICA_NOT_AVAILABLE:
            fail(f"Failed to alter dir for {replica_name(r)} to {moves[r]}: {err}")
    return out


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


def move_line(m: MoveStatus) -> str:
    """Kafka's line for one replica move (replicaMoveStatesToString)."""
    t, p, b = m.replica.rsplit("-", 2)
    if m.status == "completed":
        return f"Reassignment of replica {m.replica} completed successfully."
    if m.status == "in_progress":
        return f"Reassignment of replica {m.replica} is still in progress."
    if m.status == "elsewhere":
        return (f"Partition {t}-{p} on broker {b} is being moved to log dir {m.future} "
                f"instead of {m.target}.")  # fmt: skip
    if m.status == "cancelled":
        return (f"Partition {t}-{p} on broker {b} is not being moved from log dir "
                f"{m.current} to {m.target}.")  # fmt: skip
    if m.status == "offline":
        return (f"Partition {t}-{p} is not found in any live log dir on broker {b}. "
                "There is likely an offline log directory on the broker.")  # fmt: skip
    return f"Partition {t}-{p} cannot be found in any live log directory on broker {b}."


def _verify(
    wire: Wire, plan: Plan, moves: LogDirMoves, preserve_throttles: bool, as_json: bool
) -> None:
    topics = sorted({t for t, _ in plan})

    async def go(c: KafkaClient) -> tuple[list[Status], list[MoveStatus], list[int] | None]:
        statuses, move_states = await plan_state(c, plan, moves)
        if not as_json:
            click.echo("Status of partition reassignment:")
            for st in statuses:
                click.echo(verify_line(st))
            for m in move_states:
                click.echo(move_line(m))
        cleared = None
        done = all(st.status != "in_progress" for st in statuses)
        if not preserve_throttles and done and all(m.done for m in move_states):
            cleared = await clear_throttles(c, topics)
        return statuses, move_states, cleared

    statuses, move_states, cleared = wire.run(go)
    if as_json:
        emit_json({"partitions": [asdict(st) for st in statuses],
                   "replica_moves": [asdict(m) for m in move_states],
                   "done": all(st.status != "in_progress" for st in statuses)
                   and all(m.done for m in move_states),
                   "throttles_cleared": cleared is not None})  # fmt: skip
        return
    if cleared is not None:
        s = "" if len(cleared) == 1 else "s"
        click.echo(f"Clearing broker-level throttles on broker{s} {_ids(cleared)}")
        s = "" if len(topics) == 1 else "s"
        click.echo(f"Clearing topic-level throttles on topic{s} {','.join(topics)}")


def _cancel(
    wire: Wire, plan: Plan, moves: LogDirMoves, preserve_throttles: bool, as_json: bool
) -> None:
    topics = sorted({t for t, _ in plan})

    async def go(
        c: KafkaClient,
    ) -> tuple[
        list[tuple[str, int]], dict[tuple[str, int], object], list[Replica], list[int] | None
    ]:
        running = await c.list_partition_reassignments()
        active = [tp for tp in sorted(plan) if tp in running]
        errors: dict[tuple[str, int], object] = {}
        if active:
            answers = await c.alter_partition_reassignments({tp: None for tp in active})
            errors = {tp: e for tp, e in answers.items() if e is not None}
        # Kafka's cancel of a log dir move: ask for the replica's current directory.
        back = {
            (t, int(p), int(b)): m.current
            for m in await sample_moves(c, moves)
            if m.status in ("in_progress", "elsewhere") and m.current is not None
            for t, p, b in [m.replica.rsplit("-", 2)]
        }
        moved_back = await start_log_dir_moves(c, back)
        # Kafka's --cancel clears the plan's throttles too (whether or not anything
        # was still running), unless --preserve-throttles.
        cleared = None if preserve_throttles else await clear_throttles(c, topics)
        return active, errors, moved_back, cleared

    active, errors, moved_back, cleared = wire.run(go)
    done = [tp for tp in active if tp not in errors]
    if as_json:
        emit_json({"cancelled": [_tp(*tp) for tp in done],
                   "cancelled_log_dir_moves": [replica_name(r) for r in sorted(moved_back)],
                   "throttles_cleared": cleared is not None,
                   "errors": {_tp(*tp): str(e) for tp, e in sorted(errors.items())}})  # fmt: skip
    elif done:
        s = "" if len(done) == 1 else "s"
        click.echo(f"Successfully cancelled partition reassignment{s} for: "
                   + ",".join(_tp(*tp) for tp in done))  # fmt: skip
    elif not errors:
        click.echo("None of the specified partition reassignments are active.")
    if moves and not as_json:
        # Kafka prints the second line for any plan; kt only for plans naming log dirs,
        # so the output for plain plans is unchanged.
        if moved_back:
            s = "" if len(moved_back) == 1 else "s"
            click.echo(f"Successfully started log directory move{s} for: {_replicas(moved_back)}")
        else:
            click.echo("None of the specified partition moves are active.")
    if cleared is not None and not as_json:
        s = "" if len(cleared) == 1 else "s"
        click.echo(f"Clearing broker-level throttles on broker{s} {_ids(cleared)}")
        s = "" if len(topics) == 1 else "s"
        click.echo(f"Clearing topic-level throttles on topic{s} {','.join(topics)}")
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


class ProgressDisplay:
    """How --progress shows its samples (and --execute --clear-throttles-when-done
    while it waits): rich progress bars on a terminal, one line per replica when
    piped, NDJSON with --json."""

    def __init__(self, as_json: bool) -> None:
        self.as_json = as_json
        self.rich = stdout_is_terminal() and not as_json
        self._live: Live | None = None

    def start(self) -> None:
        """Begin the rich display (nothing when piped)."""
        if self.rich:
            from rich.live import Live

            self._live = Live(_render([]), auto_refresh=False)
            self._live.start()

    def stop(self) -> None:
        """End the rich display, leaving its last table on screen."""
        if self._live is not None:
            self._live.stop()
            self._live = None

    def show(self, rows: list[ReplicaProgress], finished: list[ReplicaProgress]) -> None:
        """One sample: the replicas copying now, after those whose reassignment
        ended since the previous sample (not on the rich display)."""
        if finished and not self.rich:
            self._emit(finished)
        if self._live is not None:
            self._live.update(_render(rows), refresh=True)
        self._emit(rows)

    def _emit(self, rows: list[ReplicaProgress]) -> None:
        if self.as_json:
            doc = [dict(asdict(x), remaining=x.remaining) for x in rows]
            emit_json({"time": time.time(), "replicas": doc})
        elif not self.rich:
            if not rows:
                click.echo("No partition reassignments in progress.")
            for x in rows:
                click.echo(progress_line(x))


async def next_sample(
    c: KafkaClient, plan: Plan | None, before: list[ReplicaProgress], t0: float, watch: bool
) -> tuple[list[ReplicaProgress], list[ReplicaProgress], float]:
    """The adding replicas now with their rates since `before` (taken at `t0`), and
    (`watch`) the replicas of `before` whose reassignment ended meanwhile, measured
    once more. Also returns when this sample was taken."""
    rows = await sample_progress(c, plan)
    t1 = time.monotonic()
    rows = with_rates(rows, before, t1 - t0)
    finished: list[ReplicaProgress] = []
    if watch:
        listed = {(x.partition, x.broker) for x in rows}
        gone = [x for x in before if (x.partition, x.broker) not in listed]
        if gone:
            finished = await sample_finished(c, gone)
    return rows, finished, t1


def _progress(wire: Wire, plan: Plan | None, watch: bool, interval: float, as_json: bool) -> None:
    display = ProgressDisplay(as_json)

    async def go(c: KafkaClient) -> None:
        display.start()
        try:
            before = await sample_progress(c, plan)
            t0 = time.monotonic()
            while True:
                await asyncio.sleep(interval)
                rows, finished, t0 = await next_sample(c, plan, before, t0, watch)
                display.show(rows, finished)
                if not watch or not rows:
                    return
                before = rows
        finally:
            display.stop()

    wire.run(go)
