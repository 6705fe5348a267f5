"""`kt reassign-partitions --execute --throttle R --clear-throttles-when-done`
(beyond Kafka): stay in the foreground after starting the reassignment, show its
progress as `--progress --watch` does, and clear the throttles exactly as `--verify`
does once every partition of the plan (and every log-dir move) is done.

kt talks Kafka's protocol only: there is nowhere in the cluster to record "clear
these throttles later" (an unknown topic config is refused, ZooKeeper is out of
reach), so the waiting process is the record. When someone else cancels or
replaces the reassignment the throttles are cleared too (exit 1: the plan did not
complete). SIGINT/SIGTERM and `--wait-timeout` stop the wait and leave the
throttles in place, with one line saying to run `--verify` (exit 130 / 143 as
shells report those signals; 1 for the timeout). Client errors while waiting (a
broker restarting) are retried; only after RETRY_FOR seconds of them does the wait
give up the same way (exit 1).
"""

from __future__ import annotations

import asyncio
import signal
import time
from collections.abc import Awaitable
from dataclasses import asdict, dataclass, field
from typing import TypeVar

import click

from kt.admin.reassign_plan import Plan
from kt.admin.reassignment import (
    LogDirMoves,
    MoveStatus,
    ReplicaProgress,
    Status,
    clear_throttles,
    plan_state,
)
from kt.client import KafkaClient, KafkaConnectionError, KafkaError, KafkaTimeoutError
from kt.tools.console import emit_json, fail, warn
from kt.tools.reassign_cmd import ProgressDisplay, move_line, next_sample, verify_line
from kt.tools.wire import Wire

T = TypeVar("T")

#: the signals that stop the wait, and the exit code shells report for each
STOP_SIGNALS = {signal.SIGINT: 130, signal.SIGTERM: 143}
#: client errors retried while waiting, and for how long (seconds) before giving up
RETRIED = (KafkaError, KafkaConnectionError, KafkaTimeoutError)
RETRY_FOR = 300.0


@dataclass
class WaitOutcome:
    """How the wait ended: completed / cancelled (throttles cleared), or
    interrupted / timed_out / failed (throttles left in place)."""

    state: str
    statuses: list[Status] = field(default_factory=list)
    move_states: list[MoveStatus] = field(default_factory=list)
    cleared: list[int] | None = None  # the brokers whose throttles were cleared
    signal: int | None = None  # the signal that interrupted the wait
    error: str | None = None  # the client error that ended the wait (failed)


async def _unless_stopped(work: Awaitable[T], stop: asyncio.Event) -> tuple[bool, T | None]:
    """Run `work` unless `stop` is set first (then `work` is cancelled): (stopped, result)."""
    task = asyncio.ensure_future(work)
    stopper = asyncio.ensure_future(stop.wait())
    try:
        await asyncio.wait({task, stopper}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        stopper.cancel()
    if task.done():
        return False, task.result()
    task.cancel()
    try:
        await task
    except asyncio.CancelledError:
        pass
    return True, None


async def wait_then_clear(
    c: KafkaClient,
    plan: Plan,
    moves: LogDirMoves,
    *,
    interval: float,
    stop: asyncio.Event,
    deadline: float | None,
    display: ProgressDisplay,
    retry_for: float = RETRY_FOR,
) -> WaitOutcome:
    """Sample the plan every `interval` seconds (progress to `display`) until it is
    done, then clear the throttles as --verify does. Setting `stop` or passing
    `deadline` (time.monotonic()) ends the wait with the throttles left alone, as
    do client errors lasting `retry_for` seconds (shorter ones are retried)."""
    topics = sorted({t for t, _ in plan})
    before: list[ReplicaProgress] = []
    t0 = time.monotonic()
    statuses: list[Status] = []
    move_states: list[MoveStatus] = []
    failing_since: float | None = None
    while True:
        try:
            stopped, state = await _unless_stopped(plan_state(c, plan, moves), stop)
            if stopped or state is None:
                return WaitOutcome("interrupted", statuses, move_states)
            statuses, move_states = state
            if all(s.status != "in_progress" for s in statuses) and all(
                m.done for m in move_states
            ):
                # Not raced against `stop`: a signal now must not leave half the
                # throttles cleared.
                cleared = await clear_throttles(c, topics)
                undone = any(s.status != "completed" for s in statuses) or any(
                    m.status != "completed" for m in move_states
                )
                return WaitOutcome(
                    "cancelled" if undone else "completed", statuses, move_states, cleared
                )
            stopped, sample = await _unless_stopped(next_sample(c, plan, before, t0, True), stop)
            if stopped or sample is None:
                return WaitOutcome("interrupted", statuses, move_states)
            rows, finished, t0 = sample
            display.show(rows, finished)
            before = rows
            failing_since = None
        except RETRIED as exc:
            # A wait can span broker restarts and controller moves: keep trying
            # (one warning per streak) rather than leave the throttles behind.
            now = time.monotonic()
            if failing_since is None:
                failing_since = now
                warn(f"{exc}; retrying every {interval:g}s")
            if now - failing_since >= retry_for:
                return WaitOutcome("failed", statuses, move_states, error=str(exc))
        if deadline is not None and time.monotonic() >= deadline:
            return WaitOutcome("timed_out", statuses, move_states)
        if (await _unless_stopped(asyncio.sleep(interval), stop))[0]:
            return WaitOutcome("interrupted", statuses, move_states)


def report(outcome: WaitOutcome, topics: list[str], plan_path: str, as_json: bool) -> None:
    """The outcome as --verify prints it, then exit: 0 completed, 1 cancelled or
    timed out or failed, 130/143 interrupted (one error line on stderr for those)."""
    if as_json:
        emit_json({"outcome": outcome.state,
                   "partitions": [asdict(s) for s in outcome.statuses],
                   "replica_moves": [asdict(m) for m in outcome.move_states],
                   "throttles_cleared": outcome.cleared is not None})  # fmt: skip
    elif outcome.cleared is not None:
        click.echo("Status of partition reassignment:")
        for s in outcome.statuses:
            click.echo(verify_line(s))
        for m in outcome.move_states:
            click.echo(move_line(m))
        n = "" if len(outcome.cleared) == 1 else "s"
        click.echo(f"Clearing broker-level throttles on broker{n} "
                   + ",".join(map(str, outcome.cleared)))  # fmt: skip
        n = "" if len(topics) == 1 else "s"
        click.echo(f"Clearing topic-level throttles on topic{n} {','.join(topics)}")
    verify = f"run kt reassign-partitions --verify --reassignment-json-file {plan_path}"
    if outcome.state == "cancelled":
        fail("the reassignment was cancelled or replaced before it completed; "
             "its throttles are cleared")  # fmt: skip
    if outcome.state == "timed_out":
        fail(f"--wait-timeout reached before the reassignment completed; the throttles "
             f"stay in place: {verify} once it completes")  # fmt: skip
    if outcome.state == "failed":
        fail(f"gave up waiting: {outcome.error}; the throttles stay in place: {verify} "
             "once the reassignment completes")  # fmt: skip
    if outcome.state == "interrupted":
        sig = signal.Signals(outcome.signal or signal.SIGINT)
        fail(f"stopped waiting ({sig.name}); the throttles stay in place: "
             f"{verify} once the reassignment completes", STOP_SIGNALS.get(sig, 1))  # fmt: skip


def run_wait(
    wire: Wire,
    plan: Plan,
    moves: LogDirMoves,
    plan_path: str,
    interval: float,
    wait_timeout: float | None,
    as_json: bool,
) -> None:
    """--clear-throttles-when-done after --execute started the plan: wait (SIGINT and
    SIGTERM stop the wait, not the process mid-request), clear, report, exit."""
    display = ProgressDisplay(as_json)
    deadline = None if wait_timeout is None else time.monotonic() + wait_timeout
    if not as_json:
        click.echo("Waiting for the reassignment to complete to clear the throttles "
                   "(Ctrl-C stops waiting and leaves them in place).")  # fmt: skip

    async def go(c: KafkaClient) -> WaitOutcome:
        loop = asyncio.get_running_loop()
        stop = asyncio.Event()
        got: list[int] = []

        def on_signal(sig: int) -> None:
            got.append(sig)
            stop.set()

        for sig in STOP_SIGNALS:
            loop.add_signal_handler(sig, on_signal, sig)
        display.start()
        try:
            outcome = await wait_then_clear(
                c, plan, moves, interval=interval, stop=stop, deadline=deadline, display=display
            )
        finally:
            display.stop()
            for sig in STOP_SIGNALS:
                loop.remove_signal_handler(sig)
        if outcome.state == "interrupted" and got:
            outcome.signal = got[0]
        return outcome

    report(wire.run(go), sorted({t for t, _ in plan}), plan_path, as_json)
