"""Describe models: what `kt group describe`, `kt cluster describe`, `kt topic
describe` and the TUI's sampler all compute from the cluster's answers.

The commands fetch through `kt.client`'s high-level calls, one group or one cluster
at a time; the TUI's sampler asks for everything at once in as few round trips as it
can, straight on the wire. Where the answers come from differs; what is made of
them does not, and lives here so that the two agree by construction:

- groups: a member's assigned partitions, the partition each member owns, the lag
  per partition (log end offset minus committed offset, never negative, unknown
  when either is) and the total lag (`GroupDescription`, `GroupLag`,
  `describe_group`);
- partitions: under-replicated (fewer in-sync replicas than replicas), offline (no
  leader), the preferred leader, the topic's min.insync.replicas from its configs
  (`PartitionState`, `min_insync_replicas`);
- brokers: what each leads, hosts and is the preferred leader of, and the
  controller (`BrokerLoad`, `broker_loads`, `controller_warning`);
- log directories: each replica's size, each directory's bytes and partitions
  (`replica_sizes`, `LogDirUsage`, `log_dir_usage`); `kt reassign-partitions
  --progress` and the TUI's log-dirs and reassignments views read them.

Offsets and sizes follow the TUI's convention: -1 is unknown.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

from kt.client import LATEST, KafkaClient, KafkaError, LogDirInfo, MemberDescription
from kt.protocol.errors import ErrorCode

TopicPartition = tuple[str, int]

#: what min.insync.replicas is when the topic's configs do not say
DEFAULT_MIN_ISR = 1
#: the group states in which a group with no offsets and no members does not exist
_ABSENT_STATES = ("Dead", "")


# --- groups ---------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class GroupMember:
    """A live member of a group and the partitions assigned to it."""

    member_id: str
    client_id: str
    host: str
    group_instance_id: str | None
    assignment: tuple[TopicPartition, ...]


@dataclass(frozen=True, slots=True)
class GroupLag:
    """A group's committed offset on one partition and how far it is behind the end."""

    topic: str
    partition: int
    committed: int  # -1: nothing committed
    log_end_offset: int  # -1: unknown
    consumer: str | None  # the member id owning the partition, if any

    @property
    def known(self) -> bool:
        """Whether both offsets are known (else the lag is unknown)."""
        return self.committed >= 0 and self.log_end_offset >= 0

    @property
    def lag(self) -> int:
        """Records behind the log end: 0 when unknown, and never negative (a log
        truncated below the committed offset)."""
        return max(0, self.log_end_offset - self.committed) if self.known else 0


@dataclass(frozen=True, slots=True)
class GroupDescription:
    """A group: state, members, and its lag per partition (the partitions it has
    committed offsets for or a member owns, sorted)."""

    group_id: str
    state: str
    protocol_type: str
    protocol: str
    members: tuple[GroupMember, ...]
    lags: tuple[GroupLag, ...]
    coordinator: int = -1  # the broker that answered for it (-1 unknown)

    @property
    def total_lag(self) -> int:
        """Sum of the partitions' known lag."""
        return sum(pl.lag for pl in self.lags)

    @property
    def exists(self) -> bool:
        """False for a group the coordinator does not know: dead (or stateless),
        with no members and no committed offsets."""
        return not (self.state in _ABSENT_STATES and not self.lags and not self.members)

    def member(self, member_id: str | None) -> GroupMember | None:
        """The member of that id, if any."""
        for m in self.members:
            if m.member_id == member_id:
                return m
        return None


def consumer_protocol(protocol_type: str) -> bool:
    """Whether members' assignments are the consumer protocol's (decodable)."""
    return protocol_type in ("consumer", "")


def group_lags(
    members: Iterable[GroupMember],
    committed: Mapping[TopicPartition, int],
    ends: Mapping[TopicPartition, int],
) -> tuple[GroupLag, ...]:
    """The lag rows of a group: every partition it has a committed offset for or a
    member owns, sorted, with the owner, the committed offset (-1 none) and the log
    end offset (-1 unknown)."""
    owner: dict[TopicPartition, str] = {}
    for m in members:
        for tp in m.assignment:
            owner[tp] = m.member_id
    return tuple(
        GroupLag(
            topic=tp[0],
            partition=tp[1],
            committed=committed.get(tp, -1),
            log_end_offset=ends.get(tp, -1),
            consumer=owner.get(tp),
        )
        for tp in sorted(set(committed) | set(owner))
    )


def group_description(
    group_id: str,
    state: str,
    protocol_type: str,
    protocol: str,
    members: Sequence[GroupMember],
    committed: Mapping[TopicPartition, int],
    ends: Mapping[TopicPartition, int],
    coordinator: int = -1,
) -> GroupDescription:
    """A `GroupDescription` from DescribeGroups' fields, the group's committed offsets
    (OffsetFetch) and the partitions' log end offsets (ListOffsets latest). Members
    keep the order given."""
    return GroupDescription(
        group_id=group_id,
        state=state,
        protocol_type=protocol_type,
        protocol=protocol,
        members=tuple(members),
        lags=group_lags(members, committed, ends),
        coordinator=coordinator,
    )


def member_of(m: MemberDescription) -> GroupMember:
    """A `GroupMember` from the client's DescribeGroups member."""
    return GroupMember(
        m.member_id, m.client_id, m.client_host, m.group_instance_id, tuple(m.assignment)
    )


async def describe_group(client: KafkaClient, group_id: str) -> GroupDescription:
    """Describe one group through its coordinator: DescribeGroups, OffsetFetch, then
    ListOffsets latest for the partitions of topics that still exist (a deleted
    topic's committed offsets stay, with no log end). Raises `KafkaError` for an
    error other than an unknown group; an unknown group has `exists` False."""
    desc = (await client.describe_groups([group_id]))[0]
    if desc.error not in (ErrorCode.NONE, ErrorCode.GROUP_ID_NOT_FOUND):
        raise KafkaError(desc.error, f"group {group_id!r}")
    committed = await client.fetch_committed(group_id)
    members = [member_of(m) for m in desc.members]
    wanted = {tp for m in members for tp in m.assignment} | set(committed)
    ends: dict[TopicPartition, int] = {}
    existing = await client.list_topics()
    live = [tp for tp in sorted(wanted) if tp[0] in existing]
    if live:
        ends = {tp: off for tp, (off, _) in (await client.list_offsets(live, LATEST)).items()}
    return group_description(
        group_id,
        desc.state,
        desc.protocol_type,
        desc.protocol,
        members,
        {tp: c.offset for tp, c in committed.items()},
        ends,
        desc.coordinator,
    )


# --- partitions -----------------------------------------------------------------------


class PartitionState(Protocol):
    """A partition's leadership and replicas, as the client's `PartitionInfo` and the
    TUI's model both carry them."""

    @property
    def leader(self) -> int: ...  # -1 when there is none
    @property
    def replicas(self) -> Sequence[int]: ...
    @property
    def isr(self) -> Sequence[int]: ...
    @property
    def offline_replicas(self) -> Sequence[int]: ...


def under_replicated(p: PartitionState, adding: Collection[int] = ()) -> bool:
    """Fewer in-sync replicas than the replication factor: the replicas less those a
    reassignment is still `adding` (Kafka's Partition.isUnderReplicated, behind the
    UnderReplicatedPartitions metric, and kafka-topics.sh's
    --under-replicated-partitions: a partition being moved is not under-replicated
    while its new replicas catch up)."""
    factor = len(p.replicas) - sum(1 for r in adding if r in p.replicas)
    return len(p.isr) < factor


def under_min_isr(p: PartitionState, min_isr: int) -> bool:
    """No leader, or fewer in-sync replicas than min.insync.replicas
    (kafka-topics.sh's --under-min-isr-partitions)."""
    return offline(p) or len(p.isr) < min_isr


def offline(p: PartitionState) -> bool:
    """No leader."""
    return p.leader < 0


def preferred_leader(p: PartitionState) -> int:
    """The first replica, where the leader should be (-1 without replicas)."""
    return p.replicas[0] if p.replicas else -1


def min_insync_replicas(configs: Iterable[tuple[str, str | None]]) -> int:
    """The topic's min.insync.replicas from its (name, value) configs; 1 when it is
    absent, empty or not a number."""
    for name, value in configs:
        if name == "min.insync.replicas" and value:
            try:
                return int(value)
            except ValueError:
                break
    return DEFAULT_MIN_ISR


# --- brokers --------------------------------------------------------------------------


@dataclass
class BrokerLoad:
    """What one broker leads and hosts, from the partitions' leadership."""

    leaders: int = 0  # partitions it leads
    replicas: int = 0  # partition replicas it hosts
    out_of_sync: int = 0  # of those, replicas not in the partition's ISR
    under_replicated: int = 0  # hosted partitions that are under-replicated
    under_replicated_led: int = 0  # partitions it leads that are under-replicated
    offline: int = 0  # hosted partitions without a leader
    offline_replicas: int = 0  # its replicas the cluster reports offline
    preferred: int = 0  # partitions whose preferred (first) replica it is
    preferred_not_led: int = 0  # ... that another broker (or nobody) leads

    @property
    def imbalance_percent(self) -> float:
        """Kafka's leader imbalance of the broker (the auto rebalance's measure): the
        share of the partitions it is preferred for that it does not lead."""
        return 100 * self.preferred_not_led / self.preferred if self.preferred else 0.0


def broker_loads(
    partitions: Iterable[PartitionState],
    broker_ids: Iterable[int],
    adding: Callable[[PartitionState], Collection[int]] = lambda p: (),
) -> dict[int, BrokerLoad]:
    """Per broker id, sorted (the live ones given, and any other a partition names as
    a replica or leader): see `BrokerLoad`. `adding` gives a partition's replicas a
    reassignment is adding, when the caller knows them (see `under_replicated`)."""
    loads = {b: BrokerLoad() for b in broker_ids}
    for p in partitions:
        urp, down = under_replicated(p, adding(p)), offline(p)
        head = preferred_leader(p)
        if head >= 0:
            pref = loads.setdefault(head, BrokerLoad())
            pref.preferred += 1
            pref.preferred_not_led += p.leader != head
        for r in p.replicas:
            load = loads.setdefault(r, BrokerLoad())
            load.replicas += 1
            load.out_of_sync += r not in p.isr
            load.under_replicated += urp
            load.offline += down
            load.offline_replicas += r in p.offline_replicas
        if not down:
            load = loads.setdefault(p.leader, BrokerLoad())
            load.leaders += 1
            load.under_replicated_led += urp
    return dict(sorted(loads.items()))


def controller_warning(controller_id: int, broker_ids: Iterable[int]) -> str | None:
    """One line when the cluster names a controller that is not among its brokers
    (a controller that just failed over, or metadata from a broker cut off from the
    cluster); None when it is listed or there is none (-1)."""
    ids = set(broker_ids)
    if controller_id < 0 or controller_id in ids:
        return None
    listed = ",".join(map(str, sorted(ids))) or "none"
    return f"controller {controller_id} is not among the listed brokers ({listed})"


# --- log directories ------------------------------------------------------------------


def replica_sizes(dirs: Iterable[LogDirInfo]) -> dict[tuple[str, int, int], int]:
    """Each (topic, partition, broker)'s replica size in bytes; a future replica (a
    move between a broker's directories in progress) is left out, and a replica a
    broker reports twice counts at its largest."""
    sizes: dict[tuple[str, int, int], int] = {}
    for d in dirs:
        for lp in d.partitions:
            if not lp.is_future:
                key = (lp.topic, lp.partition, d.broker)
                sizes[key] = max(sizes.get(key, 0), lp.size)
    return sizes


@dataclass(frozen=True, slots=True)
class LogDirUsage:
    """One log directory of one broker: what it holds and the disk around it."""

    broker: int
    path: str
    error: str | None  # the error's name when offline, None when online
    size_bytes: int  # its replicas' bytes (future replicas left out)
    partitions: int  # its replicas (future replicas left out)
    total_bytes: int  # -1 unknown
    usable_bytes: int  # -1 unknown


def log_dir_usage(dirs: Iterable[LogDirInfo]) -> list[LogDirUsage]:
    """Per log directory, sorted by broker and path: see `LogDirUsage`."""
    out = []
    for d in dirs:
        current = [lp for lp in d.partitions if not lp.is_future]
        out.append(
            LogDirUsage(
                broker=d.broker,
                path=d.path,
                error=None if d.error == ErrorCode.NONE else d.error.name,
                size_bytes=sum(lp.size for lp in current),
                partitions=len(current),
                total_bytes=d.total_bytes,
                usable_bytes=d.usable_bytes,
            )
        )
    return sorted(out, key=lambda u: (u.broker, u.path))
