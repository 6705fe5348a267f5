"""The TUI's data model: immutable snapshots of cluster state, and their history.

`ClusterSampler` (kt/tui/sampler.py) polls a cluster through kt's client library
and produces one `ClusterSnapshot` per refresh; `History` keeps the last N
snapshots so screens can show rates and trends (throughput sparklines, lag over
time, lag in seconds). Screens only read these objects: they never talk to the
network, so a refresh can never freeze input and screens are testable with
deterministic data (snapshot tests build snapshots by hand).
"""

from __future__ import annotations

import itertools
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass, field

from kt.admin import describe
from kt.admin.describe import (
    BrokerLoad,
    GroupDescription,
    GroupLag,
    GroupMember,
    LogDirUsage,
)
from kt.admin.reassignment import LISTS, ReplicaProgress, with_rates
from kt.cluster.election import LeaderAndIsr
from kt.cluster.rebalance import LeaderImbalance, preferred_replica_imbalance
from kt.storage.checkpoint import TopicPartition


@dataclass(frozen=True, slots=True)
class BrokerInfo:
    """One broker as the cluster reports it."""

    node_id: int
    host: str
    port: int
    rack: str | None
    is_controller: bool
    partitions_led: int
    log_dir_bytes: int  # total size of its log directories (-1 unknown)
    offline_log_dirs: int


@dataclass(frozen=True, slots=True)
class PartitionInfo:
    """One partition: placement, replication state and offsets."""

    topic: str
    partition: int
    leader: int  # -1 when offline
    leader_epoch: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    offline_replicas: tuple[int, ...]
    log_start_offset: int  # -1 unknown
    log_end_offset: int  # -1 unknown
    size_bytes: int  # -1 unknown
    #: ListOffsets latest under read_committed: asked only for the watched topic
    last_stable_offset: int = -1  # -1 unknown
    #: replicas an ongoing reassignment is adding (not yet part of the
    #: replication factor, as Kafka counts it)
    adding_replicas: tuple[int, ...] = ()

    @property
    def lso_lag(self) -> int:
        """Records a read_committed consumer cannot see yet: high watermark minus
        last stable offset (-1 unknown)."""
        if self.last_stable_offset < 0 or self.log_end_offset < 0:
            return -1
        return max(0, self.log_end_offset - self.last_stable_offset)

    @property
    def preferred_leader(self) -> int:
        """The first replica: where the leader should be."""
        return describe.preferred_leader(self)

    @property
    def under_replicated(self) -> bool:
        """Fewer in-sync replicas than the replication factor (replicas being added
        by a reassignment do not count yet, as in Kafka)."""
        return describe.under_replicated(self, self.adding_replicas)

    @property
    def offline(self) -> bool:
        """No leader."""
        return describe.offline(self)

    @property
    def leader_not_preferred(self) -> bool:
        """Led by a replica other than the preferred one."""
        return not self.offline and self.leader != self.preferred_leader


@dataclass(frozen=True, slots=True)
class TopicInfo:
    """One topic with its partitions and configuration."""

    name: str
    topic_id: str
    internal: bool
    partitions: tuple[PartitionInfo, ...]
    replication_factor: int
    min_insync_replicas: int
    overridden_configs: dict[str, str] = field(default_factory=dict)

    @property
    def size_bytes(self) -> int:
        """Total size of the partitions whose size is known."""
        return sum(p.size_bytes for p in self.partitions if p.size_bytes >= 0)

    @property
    def end_offsets_sum(self) -> int:
        """Sum of log end offsets (records produced so far, for rates)."""
        return sum(p.log_end_offset for p in self.partitions if p.log_end_offset >= 0)

    @property
    def under_replicated(self) -> int:
        """How many partitions are under-replicated."""
        return sum(1 for p in self.partitions if p.under_replicated)

    @property
    def under_min_isr(self) -> int:
        """How many partitions are under min ISR: no leader, or fewer in-sync replicas
        than min.insync.replicas (kafka-topics.sh's --under-min-isr-partitions)."""
        return sum(
            1 for p in self.partitions if describe.under_min_isr(p, self.min_insync_replicas)
        )

    @property
    def offline(self) -> int:
        """How many partitions have no leader."""
        return sum(1 for p in self.partitions if p.offline)


#: a group, its members and its lag per partition: the admin layer's model, which
#: `kt group describe` builds too (the TUI's names for them)
GroupMemberInfo = GroupMember
GroupPartitionLag = GroupLag
GroupInfo = GroupDescription


#: one log directory of one broker (the admin layer's model)
LogDirInfo = LogDirUsage


@dataclass(frozen=True, slots=True)
class ReassignmentInfo:
    """A partition reassignment in progress (ListPartitionReassignments)."""

    topic: str
    partition: int
    replicas: tuple[int, ...]  # the full set while it runs
    adding: tuple[int, ...]
    removing: tuple[int, ...]

    @property
    def original(self) -> tuple[int, ...]:
        """The replicas before it started: what a cancellation goes back to."""
        return tuple(r for r in self.replicas if r not in self.adding)

    @property
    def target(self) -> tuple[int, ...]:
        """The replicas once it completes."""
        return tuple(r for r in self.replicas if r not in self.removing)


@dataclass(frozen=True, slots=True)
class BrokerThrottle:
    """A broker's replication throttle rates in bytes/s (None: not set)."""

    broker: int
    leader_rate: int | None
    follower_rate: int | None


#: how long an ongoing transaction may run before the TUI highlights it, when it
#: is not already past its own timeout (kt transactions find-hanging's idea of
#: "long" is the broker's max timeout; an operator wants to see it well before)
LONG_TRANSACTION_MS = 60_000


@dataclass(frozen=True, slots=True)
class TransactionInfo:
    """A transactional id (ListTransactions), described by its coordinator
    (DescribeTransactions) when ongoing: otherwise epoch, timeout and start are -1."""

    transactional_id: str
    coordinator: int
    producer_id: int
    producer_epoch: int
    state: str
    timeout_ms: int
    start_ms: int  # -1: no transaction running (or not described)
    partitions: tuple[tuple[str, int], ...] = ()

    def duration_ms(self, now_ms: int) -> int:
        """How long the running transaction has been open (-1 when none), as `kt
        transactions describe` computes it: now minus its start time."""
        return max(0, now_ms - self.start_ms) if self.start_ms >= 0 else -1

    def long_running(self, now_ms: int, threshold_ms: int = LONG_TRANSACTION_MS) -> bool:
        """Ongoing for longer than its own timeout or than `threshold_ms`."""
        d = self.duration_ms(now_ms)
        if d < 0:
            return False
        limit = min(self.timeout_ms, threshold_ms) if self.timeout_ms > 0 else threshold_ms
        return d > limit


@dataclass(frozen=True, slots=True)
class OpenTransaction:
    """A producer with a transaction open on one partition (DescribeProducers:
    current_txn_start_offset >= 0)."""

    topic: str
    partition: int
    producer_id: int
    producer_epoch: int
    coordinator_epoch: int
    first_offset: int  # current_txn_start_offset
    last_timestamp: int  # ms, the producer's last write

    def age_ms(self, now_ms: int) -> int:
        """Now minus the producer's last timestamp: the transaction duration
        `kafka-transactions.sh find-hanging` computes for an open transaction
        (DescribeProducers carries no start time)."""
        return max(0, now_ms - self.last_timestamp) if self.last_timestamp >= 0 else -1


@dataclass(frozen=True, slots=True)
class ClusterSnapshot:
    """Everything one refresh learned, at one instant."""

    taken_at: float  # time.monotonic() of the refresh
    wall_time: float  # time.time() of the refresh
    bootstrap: str
    cluster_id: str | None
    controller_id: int
    brokers: tuple[BrokerInfo, ...]
    topics: tuple[TopicInfo, ...]
    groups: tuple[GroupInfo, ...]
    log_dirs: tuple[LogDirInfo, ...]
    refresh_seconds: float  # how long the refresh took
    error: str | None = None  # set when the cluster could not be reached
    # requests of the refresh that failed while others worked (their fields are -1)
    warnings: tuple[str, ...] = ()
    reassignments: tuple[ReassignmentInfo, ...] = ()
    #: each adding replica's bytes against its leader's (rate and ETA unset: they
    #: need two snapshots, see History.reassignment_progress)
    reassignment_progress: tuple[ReplicaProgress, ...] = ()
    #: brokers with a replication throttle rate set (asked only while reassignments
    #: are in progress or throttles were seen)
    throttles: tuple[BrokerThrottle, ...] = ()
    #: every transactional id the brokers list (None: ListTransactions not answered)
    transactions: tuple[TransactionInfo, ...] | None = None
    #: the topic whose producers and last stable offsets were asked (the one viewed)
    watched_topic: str | None = None
    #: the watched topic's open transactions, per partition
    open_transactions: tuple[OpenTransaction, ...] = ()

    @property
    def wall_ms(self) -> int:
        """The refresh's wall clock in ms (ages are computed against it)."""
        return int(self.wall_time * 1000)

    def topic(self, name: str) -> TopicInfo | None:
        """The topic of that name, if any."""
        for t in self.topics:
            if t.name == name:
                return t
        return None

    def group(self, group_id: str) -> GroupInfo | None:
        """The group of that id, if any."""
        for g in self.groups:
            if g.group_id == group_id:
                return g
        return None

    @property
    def partitions(self) -> Iterable[PartitionInfo]:
        """Every partition of every topic."""
        for t in self.topics:
            yield from t.partitions

    def broker_loads(self) -> dict[int, BrokerLoad]:
        """Per broker id (live ones, and any other a partition names as a replica):
        partitions led, replicas hosted, replicas out of the ISR, hosted partitions
        that are under-replicated or offline."""
        return describe.broker_loads(
            self.partitions,
            (b.node_id for b in self.brokers),
            adding=lambda p: p.adding_replicas if isinstance(p, PartitionInfo) else (),
        )

    def leader_imbalance(self) -> dict[int, LeaderImbalance]:
        """Per preferred replica: its partitions and those another broker leads, as
        the controller's auto leader rebalance measures them (an offline partition
        counts as not led, as in Kafka, whose controller keeps its state)."""
        parts = {TopicPartition(p.topic, p.partition): p for p in self.partitions}
        leadership = {
            tp: LeaderAndIsr(p.leader, p.leader_epoch, p.isr, -1, -1) for tp, p in parts.items()
        }
        return preferred_replica_imbalance(parts, lambda tp: parts[tp].replicas, leadership)

    def throttled_replicas(self) -> dict[str, tuple[str, str]]:
        """Per topic with throttled-replica lists: (leader list, follower list)."""
        out = {}
        for t in self.topics:
            leader, follower = (t.overridden_configs.get(k, "") for k in LISTS)
            if leader or follower:
                out[t.name] = (leader, follower)
        return out


class History:
    """The last `capacity` snapshots, oldest first, with rates derived from them."""

    def __init__(self, capacity: int = 120) -> None:
        self._items: deque[ClusterSnapshot] = deque(maxlen=capacity)

    def add(self, snap: ClusterSnapshot) -> None:
        """Record a snapshot (failed refreshes included: screens show the outage)."""
        self._items.append(snap)

    @property
    def latest(self) -> ClusterSnapshot | None:
        """The newest snapshot."""
        return self._items[-1] if self._items else None

    @property
    def latest_ok(self) -> ClusterSnapshot | None:
        """The newest snapshot that reached the cluster."""
        for snap in reversed(self._items):
            if snap.error is None:
                return snap
        return None

    def snapshots(self) -> list[ClusterSnapshot]:
        """All kept snapshots, oldest first."""
        return list(self._items)

    def _ok_pairs(self) -> list[tuple[ClusterSnapshot, ClusterSnapshot]]:
        ok = [s for s in self._items if s.error is None]
        return list(itertools.pairwise(ok))

    def topic_rate_series(self, topic: str) -> list[float]:
        """Records/s of a topic between consecutive snapshots (for sparklines)."""
        out = []
        for a, b in self._ok_pairs():
            ta, tb = a.topic(topic), b.topic(topic)
            dt = b.taken_at - a.taken_at
            if ta is None or tb is None or dt <= 0:
                continue
            out.append(max(0.0, (tb.end_offsets_sum - ta.end_offsets_sum) / dt))
        return out

    def produce_rate_series(self) -> list[float]:
        """Records/s produced cluster-wide between consecutive snapshots."""
        out = []
        for a, b in self._ok_pairs():
            dt = b.taken_at - a.taken_at
            if dt <= 0:
                continue
            before = sum(t.end_offsets_sum for t in a.topics)
            after = sum(t.end_offsets_sum for t in b.topics)
            out.append(max(0.0, (after - before) / dt))
        return out

    def bytes_rate_series(self) -> list[float]:
        """Bytes/s of log growth cluster-wide between consecutive snapshots."""
        out = []
        for a, b in self._ok_pairs():
            dt = b.taken_at - a.taken_at
            if dt <= 0:
                continue
            before = sum(t.size_bytes for t in a.topics)
            after = sum(t.size_bytes for t in b.topics)
            out.append(max(0.0, (after - before) / dt))
        return out

    def consume_rate_series(self) -> list[float]:
        """Records/s committed cluster-wide by consumer groups (the consume rate)."""
        out = []
        for a, b in self._ok_pairs():
            dt = b.taken_at - a.taken_at
            if dt <= 0:
                continue
            out.append(max(0.0, (_committed_sum(b) - _committed_sum(a)) / dt))
        return out

    def reassignment_progress(self, window: int = 10) -> list[ReplicaProgress]:
        """The newest snapshot's adding replicas, with rate and ETA computed as `kt
        reassign-partitions --progress` computes them, against the oldest of the last
        `window` snapshots that has the replica: a throttled follower copies in bursts
        of up to replica.fetch.max.bytes, so a rate over two refreshes alone would
        jump between 0 and a burst."""
        ok = [s for s in self._items if s.error is None][-(window + 1) :]
        if not ok:
            return []
        latest, earlier = ok[-1], ok[:-1]
        out = []
        for x in latest.reassignment_progress:
            for before in earlier:
                rows = before.reassignment_progress
                if any(b.partition == x.partition and b.broker == x.broker for b in rows):
                    x = with_rates([x], rows, latest.taken_at - before.taken_at)[0]
                    break
            out.append(x)
        return out

    def group_lag_series(self, group_id: str) -> list[int]:
        """A group's total lag at each snapshot (its trend)."""
        out = []
        for s in self._items:
            g = s.group(group_id) if s.error is None else None
            if g is not None:
                out.append(g.total_lag)
        return out

    def group_consume_rate(self, group_id: str, window: int = 10) -> float:
        """Records/s a group committed over the last `window` snapshots (0 if unknown)."""
        ok = [s for s in self._items if s.error is None and s.group(group_id) is not None]
        ok = ok[-window:]
        if len(ok) < 2:
            return 0.0
        a, b = ok[0], ok[-1]
        dt = b.taken_at - a.taken_at
        ga, gb = a.group(group_id), b.group(group_id)
        assert ga is not None and gb is not None
        done = _group_committed(gb) - _group_committed(ga)
        return max(0.0, done / dt) if dt > 0 else 0.0

    def group_lag_seconds(self, group_id: str) -> float | None:
        """Estimated time to catch up: lag / consume rate (None when not consuming)."""
        latest = self.latest_ok
        g = latest.group(group_id) if latest else None
        if g is None:
            return None
        if g.total_lag == 0:
            return 0.0
        rate = self.group_consume_rate(group_id)
        return g.total_lag / rate if rate > 0 else None


def _group_committed(g: GroupInfo) -> int:
    return sum(pl.committed for pl in g.lags if pl.committed >= 0)


def _committed_sum(s: ClusterSnapshot) -> int:
    return sum(_group_committed(g) for g in s.groups)


# --- authorization failures -------------------------------------------------------------

#: which failed requests (words of the sampler's warning lines, lower case) each view
#: depends on; the overview summarises everything
_VIEW_REQUESTS: dict[str, tuple[str, ...]] = {
    "topics": ("metadata", "offset", "configs of topic", "describeconfigs"),
    "topic": ("metadata", "offset", "producers", "configs of topic"),
    "groups": ("group",),
    "group": ("group",),
    "logdirs": ("describelogdirs", "log dir"),
    "brokers": ("listpartitionreassignments", "throttle rates", "configs of broker"),
    "reassignments": ("listpartitionreassignments", "reassign", "throttle rates"),
    "transactions": ("transaction",),
    "messages": ("fetch", "offset"),
}


def authorization_denials(snapshot: ClusterSnapshot | None, view: str) -> list[str]:
    """The refresh's authorization failures (`*_AUTHORIZATION_FAILED`) that concern a
    view, as readable lines: what could not be asked and why. The brokers answer a
    principal without the needed ACL with those codes; the sampler keeps the rest of
    the refresh, so a view says what it cannot show instead of looking empty."""
    if snapshot is None:
        return []
    words = _VIEW_REQUESTS.get(view)
    out: list[str] = []
    for line in getattr(snapshot, "warnings", ()):
        if "AUTHORIZATION_FAILED" not in line:
            continue
        if words is not None and not any(w in line.lower() for w in words):
            continue
        text = f"Not authorized: {line}"
        if text not in out:
            out.append(text)
    return out
