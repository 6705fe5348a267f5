"""Deterministic cluster data for the TUI's tests: a fake sampler and snapshots
built by hand (no network, no clock), shaped like a small, slightly unhealthy
three-broker cluster."""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from kt.client import ConsumerRecord
from kt.tui.app import KtApp
from kt.tui.model import (
    BrokerInfo,
    ClusterSnapshot,
    GroupInfo,
    GroupMemberInfo,
    GroupPartitionLag,
    History,
    LogDirInfo,
    PartitionInfo,
    TopicInfo,
)

BOOTSTRAP = "kafka-1.example:9092"
T0 = 1_767_261_600.0  # 2026-01-01 10:00:00 UTC
STEP = 2.0
#: records/s produced per snapshot step (a made-up, bumpy load)
LOAD = [120, 135, 150, 180, 240, 310, 300, 280, 260, 220, 200, 210, 260, 330, 420, 400, 380]


def _produced(i: int) -> int:
    return int(sum(LOAD[j % len(LOAD)] * STEP for j in range(i)))


def _partitions(topic: str, count: int, rf: int, i: int, share: float) -> list[PartitionInfo]:
    out = []
    for p in range(count):
        replicas = tuple(((p + k) % 3) + 1 for k in range(rf))
        isr = replicas
        leader = replicas[0]
        offline: tuple[int, ...] = ()
        if topic == "orders" and p == 2:
            leader = replicas[1]  # led by a replica that is not the preferred one
        if topic == "orders" and p == 4:
            isr = replicas[:2]  # a follower fell behind
        if topic == "audit-log":
            leader, isr, offline = -1, (), replicas  # its only broker lost the disk
        end = 10_000 * (p + 1) + int(_produced(i) * share / count) if leader >= 0 else -1
        start = 1_000 * p
        out.append(
            PartitionInfo(
                topic=topic,
                partition=p,
                leader=leader,
                leader_epoch=3,
                replicas=replicas,
                isr=isr,
                offline_replicas=offline,
                log_start_offset=start if leader >= 0 else -1,
                log_end_offset=end,
                size_bytes=(end - start) * 180 if leader >= 0 else -1,
            )
        )
    return out


def make_snapshot(i: int) -> ClusterSnapshot:
    """The i-th refresh of the fake cluster (offsets grow with i)."""
    topics = [
        TopicInfo(
            "orders",
            "Jz1kq0uPQw2q9mO8iQn7XA",
            False,
            tuple(_partitions("orders", 6, 3, i, 0.7)),
            3,
            2,
            {"retention.ms": "604800000"},
        ),
        TopicInfo(
            "payments",
            "b3sJ6bTgQhS1y2xq0g5xqw",
            False,
            tuple(_partitions("payments", 3, 3, i, 0.3)),
            3,
            2,
            {"cleanup.policy": "compact", "min.insync.replicas": "2"},
        ),
        TopicInfo("audit-log", "c9a0", False, tuple(_partitions("audit-log", 1, 1, i, 0)), 1, 1),
        TopicInfo(
            "__consumer_offsets",
            "Qm9vbGVhbg",
            True,
            tuple(_partitions("__consumer_offsets", 3, 3, 0, 0)),
            3,
            1,
            {"cleanup.policy": "compact"},
        ),
    ]
    ends = {(p.topic, p.partition): p.log_end_offset for t in topics for p in t.partitions}
    # billing falls behind while the load peaks, then catches up a little
    billing_behind = [0, 40, 90, 160, 300, 520, 700, 820, 860, 820, 760, 700, 720, 900, 1200]
    behind = billing_behind[min(i, len(billing_behind) - 1)]
    members = (
        GroupMemberInfo(
            "billing-1-6f1c",
            "billing-1",
            "/10.0.0.11",
            None,
            tuple(("orders", p) for p in (0, 1, 2)),
        ),
        GroupMemberInfo(
            "billing-2-93ab",
            "billing-2",
            "/10.0.0.12",
            None,
            tuple(("orders", p) for p in (3, 4, 5)),
        ),
    )
    billing = GroupInfo(
        "billing",
        "Stable",
        "consumer",
        "range",
        members,
        tuple(
            GroupPartitionLag(
                "orders",
                p,
                ends[("orders", p)] - behind // 6 - p,
                ends[("orders", p)],
                members[p // 3].member_id,
            )
            for p in range(6)
        ),
    )
    analytics = GroupInfo(
        "analytics",
        "Empty",
        "consumer",
        "",
        (),
        tuple(
            GroupPartitionLag("payments", p, 5_000 * (p + 1), ends[("payments", p)], None)
            for p in range(3)
        ),
    )
    brokers = tuple(
        BrokerInfo(
            n,
            f"kafka-{n}.example",
            9092,
            "abc"[n - 1],
            n == 1,
            sum(1 for t in topics for p in t.partitions if p.leader == n),
            sum(max(0, p.size_bytes) for t in topics for p in t.partitions if n in p.replicas),
            1 if n == 3 else 0,
        )
        for n in (1, 2, 3)
    )
    log_dirs = []
    for b in brokers:
        log_dirs.append(
            LogDirInfo(
                b.node_id,
                "/var/lib/kafka/data",
                None,
                b.log_dir_bytes,
                sum(1 for t in topics for p in t.partitions if b.node_id in p.replicas),
                500 * 2**30,
                (320 - 40 * b.node_id) * 2**30,
            )
        )
    log_dirs.append(LogDirInfo(3, "/mnt/disk2/kafka", "KAFKA_STORAGE_ERROR", 0, 0, -1, -1))
    return ClusterSnapshot(
        taken_at=1000.0 + STEP * i,
        wall_time=T0 + STEP * i,
        bootstrap=BOOTSTRAP,
        cluster_id="kt-demo-cluster",
        controller_id=1,
        brokers=brokers,
        topics=tuple(topics),
        groups=(billing, analytics),
        log_dirs=tuple(log_dirs),
        refresh_seconds=0.04,
    )


def down_snapshot(i: int) -> ClusterSnapshot:
    """A refresh that could not reach the cluster."""
    return ClusterSnapshot(
        taken_at=1000.0 + STEP * i,
        wall_time=T0 + STEP * i,
        bootstrap=BOOTSTRAP,
        cluster_id=None,
        controller_id=-1,
        brokers=(),
        topics=(),
        groups=(),
        log_dirs=(),
        refresh_seconds=5.0,
        error="cannot connect to any bootstrap server (kafka-1.example:9092: connection refused)",
    )


def history(n: int = 14) -> History:
    """A history of the first n refreshes."""
    h = History()
    for i in range(n):
        h.add(make_snapshot(i))
    return h


class FakeSampler:
    """Returns scripted snapshots, then keeps returning the last one (moved on in time)."""

    def __init__(self, snapshots: list[ClusterSnapshot]) -> None:
        self.snapshots = list(snapshots)
        self.calls = 0
        self.closed = False

    async def sample(self) -> ClusterSnapshot:
        i = min(self.calls, len(self.snapshots) - 1)
        self.calls += 1
        return self.snapshots[i]

    async def close(self) -> None:
        self.closed = True


@dataclass(frozen=True)
class Outcome:
    """Like kt.tui.actions.ActionResult."""

    ok: bool
    message: str


class FakeActions:
    """Stands in for kt.tui.actions.ClusterActions: records what was done and
    describes every request the same fixed way."""

    def __init__(self) -> None:
        self.performed: list[tuple[str, dict[str, Any]]] = []

    def __getattr__(self, name: str) -> Callable[..., Awaitable[Outcome]]:
        if name.startswith("_"):
            raise AttributeError(name)

        async def call(**params: Any) -> Outcome:
            args = ", ".join(f"{k}={v!r}" for k, v in sorted(params.items()))
            if name.startswith("describe_"):
                what = name.removeprefix("describe_").replace("_", " ")
                return Outcome(True, f"Will {what}: {args}.")
            self.performed.append((name, params))
            return Outcome(True, f"{name.replace('_', ' ')}: done")

        return call


def records(topic: str = "orders", partition: int = 0, n: int = 12) -> list[ConsumerRecord]:
    """Canned records: JSON values, one binary, one without a key."""
    out = []
    for k in range(n):
        offset = 41_000 + k
        key: bytes | None = f"customer-{k % 4}".encode()
        value: bytes | None = (
            f'{{"order_id": {offset}, "customer": "customer-{k % 4}", '
            f'"amount": {12.5 * (k + 1)}, "currency": "EUR"}}'
        ).encode()
        if k == 5:
            value = bytes(range(0, 40))
        if k == 7:
            key = None
        out.append(
            ConsumerRecord(
                topic,
                partition,
                offset,
                int(T0 * 1000) + 250 * k,
                0,
                key,
                value,
                [("trace-id", f"t{k:04d}".encode())] if k % 3 == 0 else [],
            )
        )
    return out


def fake_app(
    *,
    theme: str | None = None,
    down: bool = False,
    actions: FakeActions | None = None,
    interval: float = 3600,
) -> KtApp:
    """The app on the fake cluster, with 14 refreshes of history and one more on start."""
    nxt = down_snapshot(14) if down else make_snapshot(14)
    return KtApp(
        FakeSampler([nxt]),
        bootstrap=BOOTSTRAP,
        interval=interval,
        history=history(14),
        actions=actions if actions is not None else FakeActions(),
        theme=theme,
    )


def run_async(fn: Callable[..., Awaitable[None]]) -> Callable[..., None]:
    """Run an async test with asyncio.run (the suite has no asyncio plugin)."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> None:
        asyncio.run(fn(*args, **kwargs))

    return wrapper


#: the fake reassignment: partition -> (replicas while moving, adding, removing,
#: leader's bytes, bytes the adding replica gains per refresh)
MOVES = {
    ("events", 0): ((2, 3, 1), (3,), (1,), 50_000_000, 3_000_000),
    ("events", 1): ((3, 1, 2), (3,), (2,), 20_000_000, 1_000_000),
}
THROTTLE = 2 * 2**20


def reassigning_snapshot(i: int) -> ClusterSnapshot:
    """The i-th refresh of the fake cluster while topic `events` moves to broker 3
    under a 2 MiB/s throttle (copied bytes grow with i)."""
    from kt.admin.reassignment import LISTS, ReplicaProgress
    from kt.tui.model import BrokerThrottle, ReassignmentInfo

    base = make_snapshot(i)
    parts = []
    for (t, p), (replicas, adding, _, total, _) in MOVES.items():
        original = tuple(r for r in replicas if r not in adding)
        parts.append(PartitionInfo(t, p, original[0], 5, replicas, original, (), 0, 90_000, total))
    events = TopicInfo(
        "events",
        "ZXZlbnRz",
        False,
        tuple(parts),
        2,
        1,
        {LISTS[0]: "0:2,0:1,1:1,1:2", LISTS[1]: "0:3,1:3"},
    )
    moves = tuple(
        ReassignmentInfo(t, p, replicas, adding, removing)
        for (t, p), (replicas, adding, removing, _, _) in MOVES.items()
    )
    progress = tuple(
        ReplicaProgress(f"{t}-{p}", adding[0], min(total, step * i), total)
        for (t, p), (_, adding, _, total, step) in MOVES.items()
    )
    return ClusterSnapshot(
        taken_at=base.taken_at,
        wall_time=base.wall_time,
        bootstrap=base.bootstrap,
        cluster_id=base.cluster_id,
        controller_id=base.controller_id,
        brokers=base.brokers,
        topics=(*base.topics[:2], events, *base.topics[2:]),
        groups=base.groups,
        log_dirs=base.log_dirs,
        refresh_seconds=base.refresh_seconds,
        reassignments=moves,
        reassignment_progress=progress,
        throttles=tuple(BrokerThrottle(n, THROTTLE, THROTTLE) for n in (1, 2, 3)),
    )


def reassigning_app(*, actions: FakeActions | None = None, n: int = 14) -> KtApp:
    """The app on the fake cluster while `events` is being reassigned."""
    h = History()
    for i in range(n):
        h.add(reassigning_snapshot(i))
    return KtApp(
        FakeSampler([reassigning_snapshot(n)]),
        bootstrap=BOOTSTRAP,
        interval=3600,
        history=h,
        actions=actions if actions is not None else FakeActions(),
    )


#: the fake transactions: (transactional id, coordinator, producer id, state,
#: timeout ms, started ms before T0 or None, partitions of orders)
TXNS = [
    ("orders-writer-1", 1, 4001, "Ongoing", 60_000, -10_000, (0, 3)),
    ("billing-txn", 2, 4002, "Ongoing", 15_000, 95_000, (3,)),
    ("payments-tx", 3, 4003, "CompleteCommit", 60_000, None, ()),
    ("legacy-tx", 1, 4004, "Empty", 60_000, None, ()),
]


def transactions_snapshot(i: int, *, watched: str | None = "orders") -> ClusterSnapshot:
    """The i-th refresh of the fake cluster with two transactions open on `orders`
    (one for longer than its timeout), one committing and one idle id; `watched` is
    the topic whose producers the refresh asked for."""
    from dataclasses import replace

    from kt.tui.model import OpenTransaction, TransactionInfo

    snap = make_snapshot(i)
    t0 = int(T0 * 1000)
    txns = []
    opened: list[OpenTransaction] = []
    orders = snap.topic("orders")
    assert orders is not None
    ends = {p.partition: p.log_end_offset for p in orders.partitions}
    first: dict[int, int] = {}
    for tid, coord, pid, state, timeout, before, parts in TXNS:
        start = -1 if before is None else t0 - before
        txns.append(
            TransactionInfo(
                tid,
                coord,
                pid,
                0 if before is not None else -1,
                state,
                timeout if before is not None else -1,
                start,
                tuple(("orders", p) for p in parts),
            )
        )
        for p in parts:
            # its first record 500 records back, its last write a second after start
            offset = ends[p] - 500 if pid == 4002 else ends[p] - 120
            first[p] = min(first.get(p, offset), offset)
            opened.append(OpenTransaction("orders", p, pid, 0, 5, offset, start + 1_000))
    parts = tuple(
        replace(p, last_stable_offset=first.get(p.partition, p.log_end_offset))
        for p in orders.partitions
    )
    topics = tuple(replace(t, partitions=parts) if t.name == "orders" else t for t in snap.topics)
    return replace(
        snap,
        topics=topics,
        transactions=tuple(sorted(txns, key=lambda t: t.transactional_id)),
        watched_topic=watched,
        open_transactions=tuple(
            sorted(opened, key=lambda o: (o.partition, o.producer_id))
            if watched == "orders"
            else ()
        ),
    )


def transactions_app(*, n: int = 14) -> KtApp:
    """The app on the fake cluster while transactions are open on `orders`."""
    h = History()
    for i in range(n):
        h.add(transactions_snapshot(i))
    return KtApp(
        FakeSampler([transactions_snapshot(n)]),
        bootstrap=BOOTSTRAP,
        interval=3600,
        history=h,
        actions=FakeActions(),
    )
