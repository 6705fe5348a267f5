"""One classic group: its members, generation, selected protocol and committed offsets.

The states and their transitions are Kafka's (ClassicGroupState):

    Empty -> PreparingRebalance -> CompletingRebalance -> Stable
      ^            ^  |                    |                |
      |            |  +--------------------+----------------+  (rebalance again)
      +------------+-- (no members left)
    any -> Dead (group deleted, or emptied of members and offsets)

The coordinator drives the transitions; this module only keeps the state and the
rules that depend on nothing else (protocol support and selection, leader choice).
"""

from __future__ import annotations

import asyncio
import enum
import time
from collections.abc import Collection, Iterable
from dataclasses import dataclass, field
from typing import Any

from kt.broker.errors import IllegalTransition
from kt.protocol.consumer_protocol import decode_subscription
from kt.protocol.errors import DecodeError

CONSUMER_PROTOCOL_TYPE = "consumer"


class GroupState(enum.Enum):
    """A classic group's state, valued as Kafka names it (ListGroups, DescribeGroups)."""

    EMPTY = "Empty"
    PREPARING_REBALANCE = "PreparingRebalance"
    COMPLETING_REBALANCE = "CompletingRebalance"
    STABLE = "Stable"
    DEAD = "Dead"


_VALID_PREVIOUS: dict[GroupState, frozenset[GroupState]] = {
    GroupState.EMPTY: frozenset({GroupState.PREPARING_REBALANCE}),
    GroupState.PREPARING_REBALANCE: frozenset(
        {GroupState.STABLE, GroupState.COMPLETING_REBALANCE, GroupState.EMPTY}
    ),
    GroupState.COMPLETING_REBALANCE: frozenset({GroupState.PREPARING_REBALANCE}),
    GroupState.STABLE: frozenset({GroupState.COMPLETING_REBALANCE}),
    GroupState.DEAD: frozenset(
        {
            GroupState.STABLE,
            GroupState.PREPARING_REBALANCE,
            GroupState.COMPLETING_REBALANCE,
            GroupState.EMPTY,
            GroupState.DEAD,
        }
    ),
}


@dataclass(slots=True)
class OffsetEntry:
    """A committed offset as the coordinator keeps it."""

    offset: int
    leader_epoch: int
    metadata: str
    commit_timestamp: int
    expire_timestamp: int = -1


@dataclass(eq=False, slots=True)
class Member:
    """One member of a classic group."""

    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    protocol_type: str
    # (name, metadata) in the member's order of preference.
    protocols: list[tuple[str, bytes]]
    assignment: bytes = b""
    # Set while the member's JoinGroup / SyncGroup waits for the rebalance.
    join_future: asyncio.Future[Any] | None = None
    sync_future: asyncio.Future[Any] | None = None
    # A member added in the current rebalance (it expires on the new-member timeout).
    is_new: bool = False
    heartbeat_timer: asyncio.TimerHandle | None = None

    @property
    def is_static(self) -> bool:
        """Whether the member joined with a group.instance.id."""
        return self.group_instance_id is not None

    @property
    def awaiting_join(self) -> bool:
        """Whether a JoinGroup of this member is parked until the rebalance completes."""
        return self.join_future is not None

    @property
    def awaiting_sync(self) -> bool:
        """Whether a SyncGroup of this member waits for the leader's assignment."""
        return self.sync_future is not None

    def protocol_names(self) -> list[str]:
        """The protocols the member supports, most preferred first."""
        return [name for name, _ in self.protocols]

    def metadata(self, protocol: str) -> bytes:
        """The member's metadata for `protocol` (b"" if it does not support it)."""
        for name, meta in self.protocols:
            if name == protocol:
                return meta
        return b""

    def matches(self, protocols: list[tuple[str, bytes]]) -> bool:
        """Whether a rejoin carries the same protocols and metadata (no rebalance needed)."""
        return [(n, bytes(m)) for n, m in protocols] == [(n, bytes(m)) for n, m in self.protocols]

    def vote(self, candidates: set[str]) -> str:
        """The member's most preferred protocol among `candidates`."""
        for name in self.protocol_names():
            if name in candidates:
                return name
        raise ValueError("member does not support any of the candidate protocols")

    def cancel_heartbeat(self) -> None:
        """Stop the session timer."""
        if self.heartbeat_timer is not None:
            self.heartbeat_timer.cancel()
            self.heartbeat_timer = None


def now_ms() -> int:
    """Wall-clock milliseconds, as Kafka's commit and state timestamps."""
    return int(time.time() * 1000)


@dataclass(eq=False, slots=True)
class Group:
    """A classic group and its committed offsets."""

    group_id: str
    state: GroupState = GroupState.EMPTY
    previous_state: GroupState = GroupState.EMPTY
    generation: int = 0
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader_id: str | None = None
    members: dict[str, Member] = field(default_factory=dict)
    # Members told MEMBER_ID_REQUIRED that have not joined with their id yet.
    pending_members: dict[str, asyncio.TimerHandle | None] = field(default_factory=dict)
    # group.instance.id -> member id
    static_members: dict[str, str] = field(default_factory=dict)
    # Members of the current generation that have not sent SyncGroup yet.
    pending_sync: set[str] = field(default_factory=set)
    # Topics the members subscribe to (consumer protocol), None when unknown.
    subscribed_topics: set[str] | None = None
    offsets: dict[tuple[str, int], OffsetEntry] = field(default_factory=dict)
    # Commits appended but not replicated yet: partition -> the log position (end
    # offset) of the newest such write. A commit is applied to `offsets` only when
    # durable, and only while its partition is still pending (a deletion meanwhile
    # wins), as Kafka's pendingOffsetCommits.
    pending_offsets: dict[tuple[str, int], int] = field(default_factory=dict)
    # The log position of the write each entry of `offsets` came from (-1: loaded),
    # so a slower acknowledgement of an older commit never replaces a newer one.
    offset_positions: dict[tuple[str, int], int] = field(default_factory=dict)
    # TxnOffsetCommit offsets waiting for their transaction's marker: producer id ->
    # partition -> (offset, log position of the write; -1 until it is replicated),
    # as Kafka's pendingTransactionalOffsetCommits.
    pending_txn_offsets: dict[int, dict[tuple[str, int], tuple[OffsetEntry, int]]] = field(
        default_factory=dict
    )
    current_state_timestamp: int = field(default_factory=now_ms)
    # The initial delayed join may be extended while new members keep arriving.
    new_member_added: bool = False
    join_timer: asyncio.TimerHandle | None = None
    sync_timer: asyncio.TimerHandle | None = None

    # --- state ---

    def is_state(self, *states: GroupState) -> bool:
        """Whether the group is in one of `states`."""
        return self.state in states

    def transition_to(self, target: GroupState) -> None:
        """Move to `target`, enforcing Kafka's valid previous states."""
        if self.state not in _VALID_PREVIOUS[target]:
            raise IllegalTransition(
                f"group {self.group_id} cannot go from {self.state.value} to {target.value}"
            )
        self.previous_state = self.state
        self.state = target
        self.current_state_timestamp = now_ms()

    def can_rebalance(self) -> bool:
        """Whether a rebalance may start now (not already preparing one, not dead)."""
        return self.state in (GroupState.STABLE, GroupState.COMPLETING_REBALANCE, GroupState.EMPTY)

    # --- members ---

    def has_member(self, member_id: str) -> bool:
        """Whether `member_id` is a (non-pending) member."""
        return member_id in self.members

    def is_pending(self, member_id: str) -> bool:
        """Whether `member_id` was handed out with MEMBER_ID_REQUIRED and not joined yet."""
        return member_id in self.pending_members

    def is_leader(self, member_id: str) -> bool:
        """Whether `member_id` leads the group."""
        return self.leader_id == member_id

    def add(self, member: Member) -> None:
        """Add a member (the first one becomes the leader)."""
        if not self.members:
            self.protocol_type = member.protocol_type
        self.members[member.member_id] = member
        if member.group_instance_id is not None:
            self.static_members[member.group_instance_id] = member.member_id
        self.pending_members.pop(member.member_id, None)
        if self.leader_id is None:
            self.leader_id = member.member_id

    def remove(self, member_id: str) -> Member | None:
        """Remove a member (or pending member); a new leader is picked if it led."""
        handle = self.pending_members.pop(member_id, None)
        if handle is not None:
            handle.cancel()
        member = self.members.pop(member_id, None)
        if member is None:
            return None
        member.cancel_heartbeat()
        instance = member.group_instance_id
        if instance is not None and self.static_members.get(instance) == member_id:
            del self.static_members[instance]
        self.pending_sync.discard(member_id)
        if self.leader_id == member_id:
            self.leader_id = next(iter(self.members), None)
        return member

    def static_member_id(self, instance_id: str | None) -> str | None:
        """The member id currently holding `instance_id`."""
        return None if instance_id is None else self.static_members.get(instance_id)

    def replace_static_member(self, instance_id: str, old_id: str, new_id: str) -> Member:
        """Give a static member a new member id (a restarted instance takes its place)."""
        member = self.members.pop(old_id)
        member.member_id = new_id
        self.members[new_id] = member
        self.static_members[instance_id] = new_id
        if self.leader_id == old_id:
            self.leader_id = new_id
        if old_id in self.pending_sync:
            self.pending_sync.discard(old_id)
            self.pending_sync.add(new_id)
        return member

    def all_joined(self) -> bool:
        """Whether every member has rejoined and no pending member is still expected."""
        return not self.pending_members and all(m.awaiting_join for m in self.members.values())

    def rebalance_timeout_ms(self) -> int:
        """The longest rebalance timeout of the members (how long a rebalance may take)."""
        return max((m.rebalance_timeout_ms for m in self.members.values()), default=0)

    def elect_joined_leader(self) -> bool:
        """Make sure the leader is a member that rejoined; False if none rejoined."""
        leader = self.members.get(self.leader_id or "")
        if leader is not None and leader.awaiting_join:
            return True
        for member in self.members.values():
            if member.awaiting_join:
                self.leader_id = member.member_id
                return True
        return False

    # --- protocols ---

    def supports_protocols(self, protocol_type: str, names: list[str]) -> bool:
        """Kafka's supportsProtocols: an empty group takes any non-empty offer; otherwise
        the type must match and one offered protocol must be supported by every member."""
        if self.state is GroupState.EMPTY or not self.members:
            return bool(protocol_type) and bool(names)
        if self.protocol_type != protocol_type:
            return False
        counts = self._protocol_counts()
        return any(counts.get(n, 0) == len(self.members) for n in names)

    def _protocol_counts(self) -> dict[str, int]:
        counts: dict[str, int] = {}
        for member in self.members.values():
            for name in set(member.protocol_names()):
                counts[name] = counts.get(name, 0) + 1
        return counts

    def candidate_protocols(self) -> list[str]:
        """Protocols every member supports, in the leader's (else first member's) order."""
        counts = self._protocol_counts()
        everyone = {n for n, c in counts.items() if c == len(self.members)}
        first = self.members.get(self.leader_id or "") or next(iter(self.members.values()), None)
        order = first.protocol_names() if first is not None else sorted(everyone)
        return [n for n in order if n in everyone]

    def select_protocol(self) -> str:
        """The protocol with most votes among those every member supports (each member
        votes for its most preferred candidate); ties go to the earlier candidate."""
        candidates = self.candidate_protocols()
        if not candidates:
            raise ValueError(f"no protocol supported by every member of {self.group_id}")
        votes = dict.fromkeys(candidates, 0)
        cand_set = set(candidates)
        for member in self.members.values():
            votes[member.vote(cand_set)] += 1
        return max(candidates, key=lambda n: votes[n])

    def compute_subscribed_topics(self) -> set[str] | None:
        """The union of the members' subscribed topics (consumer protocol), None when
        the protocol is not "consumer" or a subscription does not decode."""
        if self.protocol_type != CONSUMER_PROTOCOL_TYPE:
            return None
        if not self.members:
            return set()
        if self.protocol_name is None:
            return None
        topics: set[str] = set()
        for member in self.members.values():
            try:
                topics.update(decode_subscription(member.metadata(self.protocol_name)).topics)
            except DecodeError:
                return None
        return topics

    def is_subscribed_to(self, topic: str) -> bool:
        """Whether an active member consumes `topic` (True when unknown, to be safe)."""
        if self.subscribed_topics is None:
            return True
        return topic in self.subscribed_topics

    # --- offsets ---

    def has_offsets(
        self, excluding: Collection[tuple[str, int]] = (), *, cancel_pending: bool = True
    ) -> bool:
        """Kafka's hasOffsets, once `excluding` is removed (:meth:`remove_offsets`
        with the same `cancel_pending`): committed offsets, commits in flight, or a
        producer with transactional offsets waiting for its marker (even one whose
        partitions were all removed: it stays until its marker, as in Kafka). A
        group Empty and without any of these dies at the next clean-up."""
        if self.pending_txn_offsets:
            return True
        gone = set(excluding)
        if any(tp not in gone for tp in self.offsets):
            return True
        return any(tp not in gone or not cancel_pending for tp in self.pending_offsets)

    def has_pending_commit(self, tp: tuple[str, int]) -> bool:
        """Kafka's hasPendingOffsetCommitsForTopicPartition: a commit of `tp` still
        in flight, or a transactional one waiting for its marker."""
        if tp in self.pending_offsets:
            return True
        return any(tp in txn for txn in self.pending_txn_offsets.values())

    def remove_offsets(
        self, partitions: Iterable[tuple[str, int]], *, cancel_pending: bool = True
    ) -> list[tuple[str, int]]:
        """Forget the partitions' committed offsets; returns those that had one (they
        need a tombstone). With `cancel_pending` (Kafka's removeOffsets: OffsetDelete,
        DeleteGroups, topic deletion) their commits still pending are cancelled too,
        transactional ones included, so a later marker applies nothing for them;
        without (Kafka's removeExpiredOffsets) those stay."""
        removed = []
        for tp in partitions:
            if cancel_pending:
                self.pending_offsets.pop(tp, None)
                for txn in self.pending_txn_offsets.values():
                    txn.pop(tp, None)
            self.offset_positions.pop(tp, None)
            if self.offsets.pop(tp, None) is not None:
                removed.append(tp)
        return removed
