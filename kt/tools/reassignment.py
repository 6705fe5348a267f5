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
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

from kt.client import OP_DELETE, OP_SET, RESOURCE_BROKER, RESOURCE_TOPIC, KafkaClient
from kt.tools.reassign_plan import Plan, throttle_lists

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
    sizes: dict[tuple[str, int, int], int] = {}
    for d in await c.describe_log_dirs(sorted(brokers & set(c.metadata.brokers)), by_topic):
        for lp in d.partitions:
            if not lp.is_future:
                key = (lp.topic, lp.partition, d.broker)
                sizes[key] = max(sizes.get(key, 0), lp.size)
    return sizes, parts


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
