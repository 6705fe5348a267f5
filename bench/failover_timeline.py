"""Failover timeline: where the time between a leader's SIGKILL and the first
acknowledged produce goes, from the brokers' ``kt.timeline`` marks (see
kt/broker/timeline.py) and, optionally, librdkafka's debug lines.

Used by bench/cluster_bench.py ``--failover-only --timeline``. Every time here is
``time.monotonic()`` (CLOCK_MONOTONIC, shared by every process on the host), so
the brokers' marks, the client's log lines and the bench's own kill and ack times
line up without clock skew.
"""

from __future__ import annotations

import logging
import re
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

_LINE = re.compile(r"timeline (\S+) mono=([\d.]+) wall=[\d.]+ ?(.*)$")

#: librdkafka debug contexts the bench producer logs with --client-debug.
CLIENT_DEBUG = "broker,topic,metadata,msg"


@dataclass(frozen=True, slots=True)
class Mark:
    """One timeline line of one broker's log."""

    event: str
    mono: float
    broker: int
    fields: dict[str, str] = field(default_factory=dict)


def read_marks(logs: Mapping[int, Path]) -> list[Mark]:
    """Every timeline mark in the brokers' logs (broker id -> log file), by time."""
    out = []
    for broker, path in logs.items():
        if not path.exists():
            continue
        with open(path, errors="replace") as f:
            for line in f:
                m = _LINE.search(line)
                if m is None:
                    continue
                fields = dict(kv.split("=", 1) for kv in m.group(3).split() if "=" in kv)
                out.append(Mark(m.group(1), float(m.group(2)), broker, fields))
    out.sort(key=lambda m: m.mono)
    return out


class ClientLog:
    """librdkafka's log lines (a logging.Logger for the producer's `logger`
    setting), each with the monotonic time it arrived."""

    def __init__(self) -> None:
        self.lines: list[tuple[float, str]] = []
        self._lock = threading.Lock()
        self.logger = logging.getLogger("bench.librdkafka")
        self.logger.propagate = False
        self.logger.setLevel(logging.DEBUG)
        self.logger.handlers[:] = [_Collect(self)]

    def add(self, line: str) -> None:
        """Record one line now."""
        with self._lock:
            self.lines.append((time.monotonic(), line))

    def between(self, start: float, end: float) -> list[tuple[float, str]]:
        """The lines that arrived in [start, end]."""
        with self._lock:
            return [(t, s) for t, s in self.lines if start <= t <= end]


class _Collect(logging.Handler):
    def __init__(self, into: ClientLog) -> None:
        super().__init__(logging.DEBUG)
        self.into = into

    def emit(self, record: logging.LogRecord) -> None:
        self.into.add(record.getMessage())


@dataclass(frozen=True, slots=True)
class Kill:
    """One leader kill as the bench saw it."""

    kill_at: float
    ack_at: float
    killed: int
    leader: int  # the new leader
    follower: int  # the surviving follower
    topic: str = "failover"

    @property
    def tp(self) -> str:
        return f"{self.topic}-0"


Match = Callable[[Mark, Kill], bool]


def _at(event: str, who: str | None = None, **want: Callable[[str, Kill], bool]) -> Match:
    """A mark of `event`, on the broker `who` names ("leader", "follower", "killed";
    None: any), whose fields pass every test in `want`."""

    def match(m: Mark, k: Kill) -> bool:
        if m.event != event or (who is not None and m.broker != getattr(k, who)):
            return False
        return all(key in m.fields and test(m.fields[key], k) for key, test in want.items())

    return match


def _tp(value: str, k: Kill) -> bool:
    return value == k.tp


def _is_leader(value: str, k: Kill) -> bool:
    return value == str(k.leader)


def _killed_in(value: str, k: Kill) -> bool:
    return str(k.killed) in value.split(",")


#: The steps of a failover, in the order they usually happen: the label and which
#: broker mark is the step (its first occurrence after the kill).
BROKER_STEPS: list[tuple[str, Match]] = [
    ("controller: dead broker seen", _at("ctl_brokers_gone", ids=_killed_in)),
    ("controller: new controller (it was killed)", _at("ctl_elected")),
    ("controller: new leader written to ZK", _at("ctl_state_written", tp=_tp, leader=_is_leader)),
    ("new leader: LeaderAndIsr applied", _at("lai_leader", "leader", tp=_tp)),
    ("follower: LeaderAndIsr applied", _at("lai_follower", "follower", tp=_tp)),
    ("follower: fetcher switched", _at("fetcher_switch", "follower", tp=_tp)),
    ("follower: first fetch sent", _at("follower_fetch_sent", "follower", key=_tp)),
    ("new leader: first follower fetch", _at("leader_follower_fetch", "leader", key=_tp)),
    ("follower: first fetch answered", _at("follower_fetch_answered", "follower", key=_tp)),
    ("a broker answers Metadata: new leader",
     _at("metadata_answer", key=lambda v, k: v == f"metadata:{k.tp}", value=_is_leader)),
    ("new leader: first Produce", _at("leader_produce", "leader", key=_tp)),
    ("new leader: HW advanced", _at("leader_hw", "leader", key=_tp)),
    ("new leader: first Produce acknowledged", _at("leader_produce_acked", "leader", key=_tp)),
]  # fmt: skip


def _client_steps(k: Kill) -> list[tuple[str, re.Pattern[str]]]:
    """librdkafka debug lines that are steps: learning the new leader, the first
    Produce sent to it."""
    return [
        ("client: metadata names the new leader",
         re.compile(rf"Topic {k.topic} \[0\] Leader {k.leader} Epoch")),
        # librdkafka 2.x decommissions a broker missing from the metadata; when that
        # runs after the leader update the partition falls back to "no leader" and
        # waits for the next metadata refresh.
        ("client: partition reverted to no leader",
         re.compile(rf"Topic {k.topic} \[0\]: Reverting from preferred replica \d+ to leader -1")),
        ("client: new leader taken again after the revert",
         re.compile(rf"{k.topic} \[0\]: leader -1 epoch -1 -> leader {k.leader} epoch")),
        ("client: first Produce to the new leader",
         re.compile(rf"/{k.leader}: {k.topic} \[0\]: Produce MessageSet")),
    ]  # fmt: skip


def steps_of(marks: list[Mark], kill: Kill, client: ClientLog | None) -> dict[str, float]:
    """Seconds from the kill to each step seen (first occurrence in the window from the
    kill to shortly after the ack)."""
    window = [m for m in marks if kill.kill_at <= m.mono <= kill.ack_at + 0.5]
    out: dict[str, float] = {}
    for label, match in BROKER_STEPS:
        hit = next((m for m in window if match(m, kill)), None)
        if hit is not None:
            out[label] = hit.mono - kill.kill_at
    if client is not None:
        lines = client.between(kill.kill_at, kill.ack_at + 0.5)
        for label, pattern in _client_steps(kill):
            at = next((t for t, s in lines if pattern.search(s)), None)
            if at is not None:
                out[label] = at - kill.kill_at
    out["client: first ack"] = kill.ack_at - kill.kill_at
    # the fetcher toward the dead leader: failures after the kill
    out["(follower: fetches from the dead leader failed)"] = float(
        sum(1 for m in window if m.event == "follower_fetch_failed"
            and m.broker == kill.follower and m.fields.get("source") == str(kill.killed))
    )  # fmt: skip
    return out


def add_flags(steps: dict[str, float], gone: float) -> None:
    """Add the per-kill yes/no rows (1.0 or 0.0), given when ZooKeeper deleted the
    dead broker's node (`gone`, seconds from the kill)."""
    # A client refresh period lost: the first Produce came a whole metadata interval
    # (librdkafka's retry.backoff.max.ms, 1 s) after a broker first named the leader.
    named = steps.get("a broker answers Metadata: new leader")
    produced = steps.get("new leader: first Produce")
    if named is not None and produced is not None:
        steps["(kills: first Produce >= 0.9 s after Metadata named the leader)"] = float(
            produced - named >= 0.9
        )
    # The controller's preferred-leader rebalance can move a dead leader's partitions
    # before ZooKeeper notices the death (acks=all then waits for the ISR to shrink).
    # (The bench's own ZooKeeper watch fires a few ms after the controller's.)
    written = steps.get("controller: new leader written to ZK")
    if written is not None:
        steps["(kills: leader moved before ZooKeeper saw the death)"] = float(written < gone - 0.1)


def pct(samples: list[float], q: float) -> float:
    """The q-quantile (sorted, nearest rank below), as the bench takes it."""
    s = sorted(samples)
    return s[max(0, int(len(s) * q + 0.5) - 1)] if s else float("nan")


def report(rows: list[dict[str, float]], anchor: str) -> list[str]:
    """Lines of a table: per step, how many kills showed it and p50/p99 seconds from
    the kill and from `anchor` (a step every kill has, e.g. the election)."""
    labels: list[str] = []
    for r in rows:
        for label in r:
            if label not in labels:
                labels.append(label)
    order = {label: i for i, label in enumerate(labels)}
    labels.sort(key=lambda lb: (lb.startswith("("), _median([r[lb] for r in rows if lb in r]),
                                order[lb]))  # fmt: skip
    out = [f"  {'step':46} {'kills':>5} {'from kill p50/p99 s':>20} "
           f"{'from ' + anchor[:24] + ' p50/p99 ms':>40}"]  # fmt: skip
    for label in labels:
        have = [r for r in rows if label in r]
        if label.startswith("(kills:"):
            out.append(f"  {label:46} {int(sum(r[label] for r in have)):5}")
            continue
        if label.startswith("("):
            counts = [r[label] for r in have]
            out.append(f"  {label:46} {len(have):5} {'median ' + f'{_median(counts):g}':>20}")
            continue
        since = [(r[label] - r[anchor]) * 1000 for r in have if anchor in r]
        vals = [r[label] for r in have]
        out.append(
            f"  {label:46} {len(have):5} {_median(vals):9.2f} / {pct(vals, 0.99):6.2f} "
            f"{_median(since):18.0f} / {pct(since, 0.99):6.0f}"
        )
    return out


def _median(xs: list[float]) -> float:
    s = sorted(xs)
    if not s:
        return float("nan")
    mid = len(s) // 2
    return s[mid] if len(s) % 2 else (s[mid - 1] + s[mid]) / 2


def as_kill(row: Mapping[str, Any], brokers: list[int]) -> Kill:
    """A Kill from a failover() row of cluster_bench."""
    follower = next(b for b in brokers if b not in (row["killed"], row["leader"]))
    return Kill(row["kill_at"], row["ack_at"], row["killed"], row["leader"], follower)
