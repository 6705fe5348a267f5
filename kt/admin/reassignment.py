"""What `kt reassign-partitions` and `kt tui` share about reassignments in progress.

- Progress: how many bytes each adding replica already holds against the leader's
  replica (DescribeLogDirs sizes), the copy rate between two samples and the ETA.
  The CLI's `--progress` and the TUI's reassignments view compute the same numbers
  with the same functions; only where the sizes come from differs (the CLI asks
  DescribeLogDirs for the moving partitions, the TUI reuses the DescribeLogDirs of
  its refresh). `--progress --watch` measures each replica once more when its
  reassignment ends: completed or cancelled (`sample_finished`).
- Throttles: Kafka's `--execute --throttle` (the topics' throttled-replica lists, both
  rates on every broker involved) and their removal.
- Status: Kafka's `--verify` view of a plan, each partition's reassignment and each
  replica's move between log directories (`plan_state`); the CLI prints Kafka's lines
  for it and its `--clear-throttles-when-done` wait polls it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

from kt.admin import describe
from kt.admin.reassign_plan import Plan, throttle_lists
from kt.client import (
    OP_DELETE,
    OP_SET,
    RESOURCE_BROKER,
    RESOURCE_TOPIC,
    KafkaClient,
    LogDirInfo,
    PartitionReassignment,
)
from kt.protocol.errors import ErrorCode

TopicPartition = tuple[str, int]

#: the broker configs --throttle sets (bytes/s)
RATES = ("leader.replication.throttled.rate", "follower.replication.throttled.rate")
#: the topic configs --throttle sets ("partition:broker,...")
LISTS = ("leader.replication.throttled.replicas", "follower.replication.throttled.replicas")
#: the throttle of moves between a broker's log directories (--replica-alter-log-dirs-throttle)
LOG_DIR_RATE = "replica.alter.log.dirs.io.max.bytes.per.second"


@dataclass(frozen=True, slots=True)
class ReplicaProgress:
    """How far one adding replica has copied its partition."""

    partition: str  # "topic-N"
    broker: int
    copied: int  # bytes in the adding replica
    total: int  # bytes in the leader's replica
    rate: float | None = None  # bytes/s since the previous sample
    eta_s: float | None = None
    # copying while the reassignment runs; then (--watch's last word on it)
    # completed (the broker holds a replica) or cancelled (it does not)
    state: str = "copying"

    @property
    def remaining(self) -> int:
        """Bytes still to copy."""
        return max(0, self.total - self.copied)

    @property
    def fraction(self) -> float:
        """Copied share of the leader's bytes, 0..1 (1 when the leader holds nothing)."""
        return 1.0 if self.total <= 0 else min(1.0, self.copied / self.total)


def replica_progress(
    adding: Mapping[TopicPartition, Sequence[int]],
    leaders: Mapping[TopicPartition, int],
    sizes: Mapping[tuple[str, int, int], int],
) -> list[ReplicaProgress]:
    """One entry per adding replica of each partition in `adding`, sorted: its bytes
    (`sizes` by (topic, partition, broker); 0 when the broker has nothing yet) against
    the bytes of the partition's leader (`leaders`)."""
    out = []
    for (t, p), brokers in sorted(adding.items()):
        total = sizes.get((t, p, leaders.get((t, p), -1)), 0)
        for b in brokers:
            out.append(ReplicaProgress(f"{t}-{p}", b, sizes.get((t, p, b), 0), total))
    return out


async def replica_sizes(
    c: KafkaClient, wanted: Mapping[TopicPartition, Sequence[int]]
) -> tuple[dict[tuple[str, int, int], int], dict[TopicPartition, tuple[int, list[int]]]]:
    """Each (topic, partition, broker)'s replica size in bytes (DescribeLogDirs of the
    `wanted` brokers and the leaders, future replicas left out), and each partition's
    (leader, replicas) now."""
    topics = sorted({t for t, _ in wanted})
    infos = await c.describe_topics(topics)
    parts: dict[TopicPartition, tuple[int, list[int]]] = {}
    for t, p in wanted:
        info = infos[t].partitions.get(p) if t in infos else None
        if info is not None:
            parts[(t, p)] = (info.leader, list(info.replicas))
    brokers = {b for bs in wanted.values() for b in bs} | {lead for lead, _ in parts.values()}
    by_topic = {t: sorted(p for tt, p in wanted if tt == t) for t in topics}
    dirs = await c.describe_log_dirs(sorted(brokers & set(c.metadata.brokers)), by_topic)
    return describe.replica_sizes(dirs), parts


async def sample_progress(c: KafkaClient, plan: Plan | None) -> list[ReplicaProgress]:
    """The adding replicas of the reassignments in progress (of the plan's
    partitions, or all), with their size and the leader's (DescribeLogDirs)."""
    running = await c.list_partition_reassignments()
    if plan is not None:
        running = {tp: r for tp, r in running.items() if tp in plan}
    if not running:
        return []
    sizes, parts = await replica_sizes(c, {tp: r.replicas for tp, r in running.items()})
    leaders = {tp: lead for tp, (lead, _) in parts.items()}
    return replica_progress({tp: r.adding_replicas for tp, r in running.items()}, leaders, sizes)


async def sample_finished(c: KafkaClient, gone: Sequence[ReplicaProgress]) -> list[ReplicaProgress]:
    """The adding replicas of `gone`, whose reassignment is no longer listed, measured
    once more: completed with the new replica's size against the leader's, or
    cancelled when the broker no longer holds a replica."""
    last = {x.partition: x for x in gone}
    wanted: dict[TopicPartition, list[int]] = {}
    for x in gone:
        topic, _, index = x.partition.rpartition("-")
        wanted.setdefault((topic, int(index)), []).append(x.broker)
    sizes, parts = await replica_sizes(c, wanted)
    out = []
    for (t, p), brokers in sorted(wanted.items()):
        leader, replicas = parts.get((t, p), (-1, []))
        name = f"{t}-{p}"
        for b in brokers:
            done = b in replicas
            out.append(ReplicaProgress(
                name, b, sizes.get((t, p, b), 0) if done else 0,
                sizes.get((t, p, leader), last[name].total),
                state="completed" if done else "cancelled",
            ))  # fmt: skip
    return out


def with_rates(
    now: Sequence[ReplicaProgress], before: Sequence[ReplicaProgress], dt: float
) -> list[ReplicaProgress]:
    """`now` with rate and ETA from the previous sample `before`, `dt` seconds
    earlier (unchanged where that sample did not have the replica)."""
    prev = {(x.partition, x.broker): x.copied for x in before}
    out = []
    for x in now:
        key = (x.partition, x.broker)
        if key in prev and dt > 0:
            rate = max(0.0, (x.copied - prev[key]) / dt)
            eta = 0.0 if x.remaining == 0 else (x.remaining / rate if rate > 0 else None)
            x = replace(x, rate=rate, eta_s=eta)
        out.append(x)
    return out


def eta_text(s: float | None) -> str:
    """An ETA as '42s', '3m05s', '1h02m03s'; '-' when unknown."""
    if s is None:
        return "-"
    n = int(s)
    if n >= 3600:
        return f"{n // 3600}h{n % 3600 // 60:02d}m{n % 60:02d}s"
    return f"{n // 60}m{n % 60:02d}s" if n >= 60 else f"{n}s"


async def set_throttles(c: KafkaClient, current: Plan, plan: Plan, rate: int) -> list[int]:
    """Kafka's --throttle: the topics' throttled-replica lists, then both rates on
    every broker involved. Returns those brokers."""
    lists, brokers = throttle_lists(current, plan)
    for topic, configs in sorted(lists.items()):
        await c.incremental_alter_configs(
            RESOURCE_TOPIC, topic, [(k, OP_SET, v) for k, v in configs.items()]
        )
    for b in brokers:
        await c.incremental_alter_configs(
            RESOURCE_BROKER, str(b), [(k, OP_SET, str(rate)) for k in RATES]
        )
    return brokers


async def clear_throttles(c: KafkaClient, topics: Sequence[str]) -> list[int]:
    """Kafka's --verify once done: the rates (the log dir move throttle too) off
    every broker, the lists off `topics`. Returns the brokers."""
    brokers = sorted(c.metadata.brokers)
    for b in brokers:
        await c.incremental_alter_configs(
            RESOURCE_BROKER, str(b), [(k, OP_DELETE, None) for k in (*RATES, LOG_DIR_RATE)]
        )
    for t in topics:
        await c.incremental_alter_configs(RESOURCE_TOPIC, t, [(k, OP_DELETE, None) for k in LISTS])
    return brokers


# --- the status of a plan: Kafka's --verify ---------------------------------------

Replica = tuple[str, int, int]
#: (topic, partition, broker) -> the log directory the plan moves it to
LogDirMoves = dict[Replica, str]


def replica_name(r: Replica) -> str:
    """Kafka's TopicPartitionReplica.toString: `topic-partition-broker`."""
    return f"{r[0]}-{r[1]}-{r[2]}"


async def current_assignment(c: KafkaClient, topics: list[str] | None = None) -> Plan:
    """The replicas of every partition of `topics` (None: of every topic), as a plan."""
    infos = await (c.describe_topics(topics) if topics is not None else c.list_topics())
    return {(t, p): list(info.replicas) for t, ti in infos.items()
            for p, info in ti.partitions.items()}  # fmt: skip


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
        out.append(Status(f"{tp[0]}-{tp[1]}", state, replicas, target))
    return out


@dataclass
class MoveStatus:
    """One replica's move between log dirs, for --verify (Kafka's LogDirMoveState)."""

    replica: str
    # completed | in_progress | elsewhere (moving to another dir) | cancelled
    # (not moving, in another dir) | missing (not on the broker) | offline
    status: str
    target: str
    current: str | None
    future: str | None

    @property
    def done(self) -> bool:
        """Kafka: only an active move is not done."""
        return self.status not in ("in_progress", "elsewhere")


def move_statuses(moves: LogDirMoves, dirs: list[LogDirInfo]) -> list[MoveStatus]:
    """Kafka's findLogDirMoveStates from the brokers' DescribeLogDirs."""
    current: dict[Replica, str] = {}
    future: dict[Replica, str] = {}
    offline: set[int] = set()
    for d in dirs:
        if d.error != ErrorCode.NONE:
            offline.add(d.broker)
        for p in d.partitions:
            (future if p.is_future else current)[(p.topic, p.partition, d.broker)] = d.path
    out = []
    for r in sorted(moves, key=lambda r: (r[2], r[0], r[1])):
        target, cur, fut = moves[r], current.get(r), future.get(r)
        if cur is None:
            state = "offline" if r[2] in offline else "missing"
        elif fut is None:
            state = "completed" if cur == target else "cancelled"
        else:
            state = "in_progress" if fut == target else "elsewhere"
        out.append(MoveStatus(replica_name(r), state, target, cur, fut))
    return out


async def sample_moves(c: KafkaClient, moves: LogDirMoves) -> list[MoveStatus]:
    """The state of each replica move of a plan."""
    if not moves:
        return []
    brokers = sorted({b for _, _, b in moves} & set(c.metadata.brokers))
    topics: dict[str, set[int]] = {}
    for t, p, _ in moves:
        topics.setdefault(t, set()).add(p)
    dirs = await c.describe_log_dirs(brokers, {t: sorted(ps) for t, ps in topics.items()})
    return move_statuses(moves, dirs)


async def plan_state(
    c: KafkaClient, plan: Plan, moves: LogDirMoves
) -> tuple[list[Status], list[MoveStatus]]:
    """--verify's view of the plan: each partition's status, each log-dir move's."""
    topics = sorted({t for t, _ in plan})
    running = await c.list_partition_reassignments(
        {t: sorted(p for tt, p in plan if tt == t) for t in topics}
    )
    statuses = verify_statuses(plan, await current_assignment(c, topics), running)
    return statuses, await sample_moves(c, moves)
