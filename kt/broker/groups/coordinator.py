"""The group coordinator: classic-protocol rebalances, offsets and group administration.

Behaviour follows Apache Kafka's classic group coordinator (GroupMetadataManager
for classic groups, and the older GroupCoordinator.scala):

- JoinGroup parks until the rebalance completes: when every known member has
  rejoined, or the rebalance timeout (the members' largest) fires, which removes
  dynamic members that did not rejoin. A group leaving Empty waits
  `group.initial.rebalance.delay.ms` first, extended while new members arrive.
  Since v4 a member without an id is answered MEMBER_ID_REQUIRED with one.
- The leader (whose JoinGroup response lists every member's metadata) sends the
  assignment in SyncGroup; followers' SyncGroups wait for it. The assignment is
  persisted before anyone receives it. Members that do not sync within the
  rebalance timeout are removed.
- Heartbeats keep a member's session alive; a session that expires removes the
  member and triggers a rebalance. Static members (group.instance.id) that come
  back with a new member id take over their old identity without a rebalance.
- Offsets are committed by members of the current generation, or by anyone while
  the group has no members (generation -1: "simple" consumers).

In a cluster each broker coordinates the groups of the `__consumer_offsets`
partitions it leads (Kafka's onElection/onResignation): becoming leader of a
partition loads its groups and offsets from the log (its groups are answered
COORDINATOR_LOAD_IN_PROGRESS meanwhile); becoming follower, or the partition
being stopped, unloads them (timers cancelled, parked JoinGroup/SyncGroup
answered NOT_COORDINATOR). Groups of partitions not led here are NOT_COORDINATOR,
so clients look the coordinator up again. The single-node broker leads every
partition, so it serves every group.

Offset commits and group metadata are appended as the partition's leader and
take effect (and are answered) only once the high watermark passed them
(acks=all, `offsets.commit.timeout.ms`); the append's partition errors are mapped
to coordinator errors as Kafka's GroupMetadataManager maps them. Tombstones
(deletions, expiry) are appended without waiting, as Kafka's cleanup does.

Every timer is a handle on the event loop; nothing blocks.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from kt.broker.coordinator_log import Record, RecordStore, partition_for
from kt.broker.errors import AppendError, CoordinatorError, error_code_for
from kt.broker.groups.group import (
    CONSUMER_PROTOCOL_TYPE,
    Group,
    GroupState,
    Member,
    OffsetEntry,
    now_ms,
)
from kt.broker.groups.offsets_log import replay_batches
from kt.broker.metadata_store import CONSUMER_OFFSETS
from kt.protocol import ErrorCode
from kt.protocol.coordinator_records import (
    GroupMember,
    GroupMetadataRecord,
    GroupMetadataValue,
    OffsetCommitRecord,
    OffsetCommitValue,
    encode_group_metadata,
    encode_offset_commit,
)

log = logging.getLogger("kt.broker.groups")

E = ErrorCode


@dataclass(slots=True)
class CoordinatorSettings:
    """The broker settings the coordinator uses (Kafka's names, in milliseconds)."""

    initial_rebalance_delay_ms: int = 3000
    min_session_timeout_ms: int = 6000
    max_session_timeout_ms: int = 1_800_000
    max_group_size: int = 2**31 - 1
    offsets_retention_ms: int = 7 * 24 * 3_600_000
    retention_check_interval_ms: int = 600_000
    offset_metadata_max_bytes: int = 4096
    new_member_join_timeout_ms: int = 300_000
    offsets_commit_timeout_ms: int = 5000


@dataclass(slots=True)
class JoinRequest:
    """A JoinGroup request, version differences resolved by the handler."""

    group_id: str
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    session_timeout_ms: int
    rebalance_timeout_ms: int
    protocol_type: str
    protocols: list[tuple[str, bytes]]
    require_known_member_id: bool = True
    supports_skip_assignment: bool = True


@dataclass(slots=True)
class JoinResult:
    """What a JoinGroup is answered with."""

    error: ErrorCode
    member_id: str = ""
    generation: int = -1
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader: str = ""
    # (member id, group instance id, metadata) - for the leader only
    members: list[tuple[str, str | None, bytes]] = field(default_factory=list)
    skip_assignment: bool = False


@dataclass(slots=True)
class SyncResult:
    """What a SyncGroup is answered with."""

    error: ErrorCode
    assignment: bytes = b""
    protocol_type: str | None = None
    protocol_name: str | None = None


@dataclass(slots=True)
class MemberDescription:
    """One member in DescribeGroups."""

    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    metadata: bytes
    assignment: bytes


@dataclass(slots=True)
class GroupDescription:
    """One group in DescribeGroups."""

    error: ErrorCode
    group_id: str
    state: str
    protocol_type: str = ""
    protocol: str = ""
    members: list[MemberDescription] = field(default_factory=list)


# Kafka's GroupMetadataManager.storeOffsets: what a failed append of offsets tells the
# committer (any other code is passed on as it is).
_COMMIT_ERRORS = {
    E.UNKNOWN_TOPIC_OR_PARTITION: E.COORDINATOR_NOT_AVAILABLE,
    E.NOT_ENOUGH_REPLICAS: E.COORDINATOR_NOT_AVAILABLE,
    E.NOT_ENOUGH_REPLICAS_AFTER_APPEND: E.COORDINATOR_NOT_AVAILABLE,
    E.NOT_LEADER_OR_FOLLOWER: E.NOT_COORDINATOR,
    E.KAFKA_STORAGE_ERROR: E.NOT_COORDINATOR,
    E.MESSAGE_TOO_LARGE: E.INVALID_COMMIT_OFFSET_SIZE,
    E.RECORD_LIST_TOO_LARGE: E.INVALID_COMMIT_OFFSET_SIZE,
    E.INVALID_FETCH_SIZE: E.INVALID_COMMIT_OFFSET_SIZE,
}


def commit_error(exc: BaseException) -> ErrorCode:
    """The OffsetCommit error for an append of offsets that raised `exc`."""
    code = exc.code if isinstance(exc, AppendError) else error_code_for(exc)
    return offset_commit_error(code)


def _complete(fut: asyncio.Future[Any] | None, value: Any) -> None:
    # A parked request whose connection went away has had its future cancelled.
    if fut is not None and not fut.done():
        fut.set_result(value)


def offset_commit_error(code: ErrorCode) -> ErrorCode:
    """The OffsetCommit error for a failed append with partition error `code`."""
    return _COMMIT_ERRORS.get(code, code)


def group_write_error(code: ErrorCode) -> ErrorCode:
    """The JoinGroup/SyncGroup error for a failed group metadata append (Kafka's
    storeGroup mapping: a timeout makes the members rebalance)."""
    if code in (E.UNKNOWN_TOPIC_OR_PARTITION, E.NOT_ENOUGH_REPLICAS,
                E.NOT_ENOUGH_REPLICAS_AFTER_APPEND):  # fmt: skip
        return E.COORDINATOR_NOT_AVAILABLE
    if code in (E.NOT_LEADER_OR_FOLLOWER, E.KAFKA_STORAGE_ERROR):
        return E.NOT_COORDINATOR
    if code == E.REQUEST_TIMED_OUT:
        return E.REBALANCE_IN_PROGRESS
    if code in (E.MESSAGE_TOO_LARGE, E.RECORD_LIST_TOO_LARGE, E.INVALID_FETCH_SIZE):
        return E.UNKNOWN_SERVER_ERROR
    return code


class GroupCoordinator:
    """Every classic group of this broker and the offsets they committed."""

    def __init__(
        self,
        settings: CoordinatorSettings,
        store: RecordStore,
        partition_exists: Callable[[str, int], bool] | None = None,
    ) -> None:
        self.settings = settings
        self.store = store
        self.groups: dict[str, Group] = {}
        # __consumer_offsets partitions led here and loaded: their groups are served.
        self.owned: set[int] = set()
        # Led here, being loaded (their groups answer COORDINATOR_LOAD_IN_PROGRESS).
        self.loading: set[int] = set()
        self._loads: dict[int, asyncio.Task[None]] = {}
        # Appends waiting to be replicated.
        self._writes: set[asyncio.Task[None]] = set()
        self._partitions: int | None = None
        self._expiry_task: asyncio.Task[None] | None = None
        # Set by stop(): a LeaderAndIsr arriving during shutdown loads nothing.
        self._stopped = False
        # Checks a topic partition exists (OffsetCommit / OffsetDelete answer
        # UNKNOWN_TOPIC_OR_PARTITION otherwise); None accepts any.
        self.partition_exists = partition_exists

    # --- lifecycle ---------------------------------------------------------

    async def start(self) -> None:
        """Serve the partitions led now (the single node: all of them) once loaded,
        then expire offsets periodically. Later leadership changes arrive through
        on_election / on_resignation."""
        self.on_election(self.store.led_partitions())
        await self.wait_loaded()
        if self.owned:
            log.info("serving %d groups from %d partitions", len(self.groups), len(self.owned))
        loop = asyncio.get_running_loop()
        self._expiry_task = loop.create_task(self._expire_periodically())

    async def stop(self) -> None:
        """Cancel timers and unload everything: parked requests are answered
        NOT_COORDINATOR, as when a coordinator resigns."""
        if self._expiry_task is not None:
            self._expiry_task.cancel()
            try:
                await self._expiry_task
            except (asyncio.CancelledError, Exception):
                pass
            self._expiry_task = None
        self._stopped = True
        self.on_resignation(sorted(self.owned | self.loading))
        for group in list(self.groups.values()):
            self._unload_group(group)
        writes = list(self._writes)
        for task in writes:
            task.cancel()
        if writes:
            await asyncio.gather(*writes, return_exceptions=True)

    async def wait_loaded(self) -> None:
        """Until no partition is loading."""
        while self._loads:
            await asyncio.gather(*list(self._loads.values()), return_exceptions=True)

    # --- ownership (Kafka's onElection / onResignation) ------------------------

    def on_election(self, partitions: Iterable[int]) -> None:
        """This broker now leads `partitions`: load their groups in the background;
        until loaded their groups get COORDINATOR_LOAD_IN_PROGRESS. Partitions
        already served or loading are left as they are (our memory is current)."""
        if self._stopped:
            return
        # The topic exists now: take its partition count from it, not the config.
        self._partitions = None
        loop = asyncio.get_running_loop()
        for p in partitions:
            if p in self.owned or p in self.loading:
                continue
            self.loading.add(p)
            self._loads[p] = loop.create_task(self._load(p))

    def on_resignation(self, partitions: Iterable[int]) -> None:
        """This broker no longer leads `partitions` (follower, stopped or deleted):
        forget their groups; parked requests are answered NOT_COORDINATOR."""
        gone = set(partitions)
        served = gone & (self.owned | self.loading)
        for p in gone:
            task = self._loads.pop(p, None)
            if task is not None:
                task.cancel()
            self.loading.discard(p)
            self.owned.discard(p)
        if not served:
            return
        unloaded = 0
        for group in list(self.groups.values()):
            if self.partition_for(group.group_id) in gone:
                self._unload_group(group)
                unloaded += 1
        log.info("resigned as coordinator of %s-%s: unloaded %d groups", CONSUMER_OFFSETS,
                 ",".join(map(str, sorted(served))), unloaded)  # fmt: skip

    async def _load(self, p: int) -> None:
        try:
            # Yield first: the LeaderAndIsr that elected us completes, and several
            # partitions elected at once load one per loop iteration.
            await asyncio.sleep(0)
            if p not in self.loading:
                return
            started = now_ms()
            try:
                groups = self._load_partition(p)
            except Exception:
                # Not served: clients get NOT_COORDINATOR rather than groups missing
                # their offsets; a storage failure moves the leadership away.
                log.exception("cannot load %s-%d", CONSUMER_OFFSETS, p)
                self.loading.discard(p)
                return
            self.loading.discard(p)
            self.owned.add(p)
            log.info("loaded %d groups from %s-%d in %d ms", groups, CONSUMER_OFFSETS, p,
                     now_ms() - started)  # fmt: skip
        finally:
            if self._loads.get(p) is asyncio.current_task():
                del self._loads[p]

    def _unload_group(self, group: Group) -> None:
        """Forget a group (Kafka's onGroupUnloaded): timers off, parked requests
        answered NOT_COORDINATOR; a write still in flight finds it gone."""
        self._cancel_group_timers(group)
        for member in group.members.values():
            member.cancel_heartbeat()
            _complete(member.join_future, JoinResult(E.NOT_COORDINATOR, member.member_id))
            _complete(member.sync_future, SyncResult(E.NOT_COORDINATOR))
            member.join_future = member.sync_future = None
        group.pending_offsets.clear()
        group.pending_txn_offsets.clear()
        if group.state is not GroupState.DEAD:
            group.transition_to(GroupState.DEAD)
        if self.groups.get(group.group_id) is group:
            del self.groups[group.group_id]

    def _cancel_group_timers(self, group: Group) -> None:
        for handle in (group.join_timer, group.sync_timer):
            if handle is not None:
                handle.cancel()
        group.join_timer = group.sync_timer = None
        for pending in group.pending_members.values():
            if pending is not None:
                pending.cancel()

    def _partition_count(self) -> int:
        if self._partitions is None:
            self._partitions = self.store.partition_count()
        return self._partitions

    async def ensure_topic(self) -> None:
        """Create `__consumer_offsets` if it does not exist yet (FindCoordinator);
        after creating it, wait for the new partitions led here to load, so the
        first JoinGroup does not meet COORDINATOR_LOAD_IN_PROGRESS."""
        existed = self.store.exists()
        await self.store.ensure()
        self._partitions = None
        self._partition_count()
        if not existed:
            self.on_election(self.store.led_partitions())
            await self.wait_loaded()

    def partition_for(self, group_id: str) -> int:
        """The `__consumer_offsets` partition holding `group_id`."""
        return partition_for(group_id, self._partition_count())

    def _load_partition(self, p: int) -> int:
        """Replay partition `p` into `groups`; returns how many groups it holds."""
        loaded = replay_batches(self.store.read_batches(p))
        now = now_ms()
        for gid, value in loaded.groups.items():
            group = Group(gid)
            group.generation = value.generation
            group.protocol_type = value.protocol_type or None
            if value.members:
                # Members must rejoin (as after a coordinator failover, without the
                # wait for their sessions to expire): the group starts Empty.
                group.current_state_timestamp = now
            else:
                group.protocol_name = value.protocol
                ts = value.current_state_timestamp
                group.current_state_timestamp = ts if ts >= 0 else now
            group.subscribed_topics = group.compute_subscribed_topics()
            self.groups[gid] = group
        for (gid, topic, partition), rec in loaded.offsets.items():
            owner = self.groups.get(gid)
            if owner is None:
                owner = self.groups[gid] = Group(gid)
            v = rec.value
            assert v is not None
            owner.offsets[(topic, partition)] = _entry(v)
            position = loaded.positions.get((gid, topic, partition), -1)
            owner.offset_positions[(topic, partition)] = position
        for pid, pending in loaded.pending_txn.items():
            for (gid, topic, partition), (rec, position) in pending.items():
                # A group holding nothing else loads Empty, as Kafka's load does.
                owner = self.groups.get(gid)
                if owner is None:
                    owner = self.groups[gid] = Group(gid)
                assert rec.value is not None  # replay_batches keeps no tombstones pending
                txn = owner.pending_txn_offsets.setdefault(pid, {})
                txn[(topic, partition)] = (_entry(rec.value), position)
        if loaded.skipped:
            log.info("__consumer_offsets-%d: skipped %d records of other kinds", p, loaded.skipped)
        pending_groups = {gid for txn in loaded.pending_txn.values() for gid, _, _ in txn}
        return len({gid for gid, _, _ in loaded.offsets} | set(loaded.groups) | pending_groups)

    # --- checks --------------------------------------------------------------

    def _check_group_id(self, group_id: str | None) -> None:
        # Kafka's validateGroupStatus, in its order.
        if not group_id:
            raise CoordinatorError(E.INVALID_GROUP_ID)
        p = self.partition_for(group_id)
        if p in self.loading:
            raise CoordinatorError(E.COORDINATOR_LOAD_IN_PROGRESS)
        if p not in self.owned:
            raise CoordinatorError(E.NOT_COORDINATOR)

    def _is_loading(self, group_id: str) -> bool:
        return bool(self.loading) and self.partition_for(group_id) in self.loading

    def check_group(self, group_id: str | None) -> ErrorCode:
        """INVALID_GROUP_ID / COORDINATOR_LOAD_IN_PROGRESS / NOT_COORDINATOR, or NONE."""
        try:
            self._check_group_id(group_id)
        except CoordinatorError as exc:
            return exc.code
        return E.NONE

    @staticmethod
    def _validate_member(group: Group, member_id: str, instance_id: str | None) -> ErrorCode:
        """Kafka's validateMember: the instance id must map to this member id."""
        if instance_id is not None:
            existing = group.static_member_id(instance_id)
            if existing is None:
                return E.UNKNOWN_MEMBER_ID
            if existing != member_id:
                return E.FENCED_INSTANCE_ID
            return E.NONE
        return E.NONE if group.has_member(member_id) else E.UNKNOWN_MEMBER_ID

    # --- timers ----------------------------------------------------------------

    @staticmethod
    def _later(delay_ms: int, callback: Callable[..., None], *args: Any) -> asyncio.TimerHandle:
        return asyncio.get_running_loop().call_later(max(delay_ms, 0) / 1000, callback, *args)

    def _schedule_heartbeat(
        self, group: Group, member: Member, timeout_ms: int | None = None
    ) -> None:
        member.cancel_heartbeat()
        timeout = member.session_timeout_ms if timeout_ms is None else timeout_ms
        member.heartbeat_timer = self._later(timeout, self._on_heartbeat_expired, group, member)

    def _live(self, group: Group) -> bool:
        return self.groups.get(group.group_id) is group

    def _on_heartbeat_expired(self, group: Group, member: Member) -> None:
        if not self._live(group) or group.members.get(member.member_id) is not member:
            return
        member.heartbeat_timer = None
        if not member.is_new and (member.awaiting_join or member.awaiting_sync):
            # Members parked in a rebalance are covered by the rebalance timeout.
            self._schedule_heartbeat(group, member)
            return
        log.info("member %s of group %s expired (session timeout)", member.member_id,
                 group.group_id)  # fmt: skip
        self._remove_member_and_update_group(group, member)

    def _on_pending_member_expired(self, group: Group, member_id: str) -> None:
        if not self._live(group) or member_id not in group.pending_members:
            return
        group.pending_members.pop(member_id, None)
        log.info("pending member %s of group %s expired", member_id, group.group_id)
        if group.state is GroupState.PREPARING_REBALANCE:
            self._maybe_complete_join(group)

    # --- JoinGroup -------------------------------------------------------------

    def join_group(self, req: JoinRequest) -> asyncio.Future[JoinResult]:
        """Join (or rejoin) a group; the future completes when the rebalance does."""
        fut: asyncio.Future[JoinResult] = asyncio.get_running_loop().create_future()
        try:
            self._join(req, fut)
        except CoordinatorError as exc:
            _complete(fut, JoinResult(exc.code, req.member_id))
        return fut

    def _join(self, req: JoinRequest, fut: asyncio.Future[JoinResult]) -> None:
        self._check_group_id(req.group_id)
        s = self.settings
        if not s.min_session_timeout_ms <= req.session_timeout_ms <= s.max_session_timeout_ms:
            raise CoordinatorError(E.INVALID_SESSION_TIMEOUT)
        unknown = req.member_id == ""
        group = self.groups.get(req.group_id)
        if group is None:
            if not unknown:
                raise CoordinatorError(E.UNKNOWN_MEMBER_ID)
            self._partition_count()  # the group will be persisted: make sure the topic exists
            group = self.groups[req.group_id] = Group(req.group_id)
        if not self._accept_joining_member(group, req.member_id):
            member = group.members.get(req.member_id)
            if member is not None:
                self._remove_member_and_update_group(group, member)
            raise CoordinatorError(E.GROUP_MAX_SIZE_REACHED)
        if unknown:
            self._join_new_member(group, req, fut)
        else:
            self._join_existing_member(group, req, fut)

    def _accept_joining_member(self, group: Group, member_id: str) -> bool:
        limit = self.settings.max_group_size
        if group.state in (GroupState.EMPTY, GroupState.DEAD):
            return True
        if group.state is GroupState.PREPARING_REBALANCE:
            member = group.members.get(member_id)
            awaiting = sum(1 for m in group.members.values() if m.awaiting_join)
            return (member is not None and member.awaiting_join) or awaiting < limit
        return group.has_member(member_id) or len(group.members) < limit

    def _join_new_member(
        self, group: Group, req: JoinRequest, fut: asyncio.Future[JoinResult]
    ) -> None:
        if group.state is GroupState.DEAD:
            raise CoordinatorError(E.COORDINATOR_NOT_AVAILABLE)
        if not group.supports_protocols(req.protocol_type, [n for n, _ in req.protocols]):
            raise CoordinatorError(E.INCONSISTENT_GROUP_PROTOCOL)
        prefix = req.group_instance_id if req.group_instance_id is not None else req.client_id
        new_id = f"{prefix}-{uuid.uuid4()}"
        if req.group_instance_id is not None:
            existing = group.static_member_id(req.group_instance_id)
            if existing is not None:
                self._update_static_member(group, req, existing, new_id, fut)
            else:
                self._add_member_and_rebalance(group, req, new_id, fut)
        elif req.require_known_member_id:
            group.pending_members[new_id] = self._later(
                req.session_timeout_ms, self._on_pending_member_expired, group, new_id
            )
            _complete(fut, JoinResult(E.MEMBER_ID_REQUIRED, new_id))
        else:
            self._add_member_and_rebalance(group, req, new_id, fut)

    def _join_existing_member(
        self, group: Group, req: JoinRequest, fut: asyncio.Future[JoinResult]
    ) -> None:
        member_id = req.member_id
        if group.state is GroupState.DEAD:
            raise CoordinatorError(E.COORDINATOR_NOT_AVAILABLE)
        if not group.supports_protocols(req.protocol_type, [n for n, _ in req.protocols]):
            raise CoordinatorError(E.INCONSISTENT_GROUP_PROTOCOL)
        if group.is_pending(member_id):
            if req.group_instance_id is not None:
                raise CoordinatorError(E.UNKNOWN_MEMBER_ID)  # pending members are dynamic
            self._add_member_and_rebalance(group, req, member_id, fut)
            return
        error = self._validate_member(group, member_id, req.group_instance_id)
        if error != E.NONE:
            raise CoordinatorError(error)
        member = group.members[member_id]
        state = group.state
        if state is GroupState.PREPARING_REBALANCE:
            self._update_member_and_rebalance(group, member, req, fut)
        elif state is GroupState.COMPLETING_REBALANCE:
            if member.matches(req.protocols):
                # A retry of a JoinGroup whose response was lost: the current generation.
                leads = group.is_leader(member_id)
                _complete(fut, self._join_result(group, member, with_members=leads))
            else:
                self._update_member_and_rebalance(group, member, req, fut)
        elif state is GroupState.STABLE:
            if group.is_leader(member_id) or not member.matches(req.protocols):
                # The leader rejoining forces a rebalance (e.g. topic metadata changed).
                self._update_member_and_rebalance(group, member, req, fut)
            else:
                _complete(fut, self._join_result(group, member, with_members=False))
        else:
            raise CoordinatorError(E.UNKNOWN_MEMBER_ID)

    def _join_result(
        self,
        group: Group,
        member: Member,
        *,
        with_members: bool,
        skip_assignment: bool = False,
        leader: str | None = None,
    ) -> JoinResult:
        members = []
        if with_members and group.protocol_name is not None:
            members = [
                (m.member_id, m.group_instance_id, m.metadata(group.protocol_name))
                for m in group.members.values()
            ]
        return JoinResult(
            E.NONE,
            member.member_id,
            group.generation,
            group.protocol_type,
            group.protocol_name,
            group.leader_id or "" if leader is None else leader,
            members,
            skip_assignment,
        )

    def _add_member_and_rebalance(
        self, group: Group, req: JoinRequest, member_id: str, fut: asyncio.Future[JoinResult]
    ) -> None:
        member = Member(
            member_id=member_id,
            group_instance_id=req.group_instance_id,
            client_id=req.client_id,
            client_host=req.client_host,
            rebalance_timeout_ms=req.rebalance_timeout_ms,
            session_timeout_ms=req.session_timeout_ms,
            protocol_type=req.protocol_type,
            protocols=list(req.protocols),
            join_future=fut,
            is_new=True,
        )
        if group.is_state(GroupState.PREPARING_REBALANCE) and (
            group.previous_state is GroupState.EMPTY
        ):
            group.new_member_added = True
        group.add(member)
        # New members cannot heartbeat before their JoinGroup returns; a JoinGroup
        # parked too long (client gone) is dropped after the new-member timeout.
        self._schedule_heartbeat(group, member, self.settings.new_member_join_timeout_ms)
        self._maybe_prepare_rebalance_or_complete_join(group)

    def _update_member_and_rebalance(
        self, group: Group, member: Member, req: JoinRequest, fut: asyncio.Future[JoinResult]
    ) -> None:
        self._update_member(member, req, fut)
        self._maybe_prepare_rebalance_or_complete_join(group)

    @staticmethod
    def _update_member(member: Member, req: JoinRequest, fut: asyncio.Future[JoinResult]) -> None:
        member.protocols = list(req.protocols)
        member.rebalance_timeout_ms = req.rebalance_timeout_ms
        member.session_timeout_ms = req.session_timeout_ms
        if member.join_future is not None and member.join_future is not fut:
            _complete(member.join_future, JoinResult(E.REBALANCE_IN_PROGRESS, member.member_id))
        member.join_future = fut

    def _update_static_member(
        self,
        group: Group,
        req: JoinRequest,
        old_id: str,
        new_id: str,
        fut: asyncio.Future[JoinResult],
    ) -> None:
        assert req.group_instance_id is not None
        current_leader = group.leader_id
        member = group.members[old_id]
        # The instance's previous incarnation is fenced.
        _complete(member.join_future, JoinResult(E.FENCED_INSTANCE_ID, old_id))
        _complete(member.sync_future, SyncResult(E.FENCED_INSTANCE_ID))
        member.join_future = member.sync_future = None
        old = (list(member.protocols), member.rebalance_timeout_ms, member.session_timeout_ms)
        group.replace_static_member(req.group_instance_id, old_id, new_id)
        self._update_member(member, req, fut)
        self._schedule_heartbeat(group, member)
        if group.state is GroupState.STABLE:
            if group.protocol_name == group.select_protocol():
                # Same protocol: no rebalance, just persist the new member id; the
                # JoinGroup is answered once that is replicated.
                instance_id = req.group_instance_id

                def stored(error: ErrorCode) -> None:
                    if not self._live(group) or fut.done() or member.join_future is not fut:
                        return  # unloaded, or a rebalance answered it meanwhile
                    member.join_future = None
                    if error != E.NONE:
                        log.warning("cannot persist static member %s of %s: %s", new_id,
                                    group.group_id, error.name)  # fmt: skip
                        member.protocols, member.rebalance_timeout_ms = old[0], old[1]
                        member.session_timeout_ms = old[2]
                        group.replace_static_member(instance_id, new_id, old_id)
                        self._schedule_heartbeat(group, member)
                        _complete(fut, JoinResult(error, ""))
                        return
                    if req.supports_skip_assignment:
                        is_leader = group.is_leader(new_id)
                        result = self._join_result(group, member, with_members=is_leader,
                                                   skip_assignment=is_leader)  # fmt: skip
                    else:
                        # Older clients keep following the leader they knew; the
                        # restarted instance gets its assignment through SyncGroup.
                        result = self._join_result(group, member, with_members=False,
                                                   leader=current_leader or "")  # fmt: skip
                    _complete(fut, result)

                self._store_group(group, on_done=stored)
            else:
                self._maybe_prepare_rebalance_or_complete_join(group)
        elif group.state is GroupState.COMPLETING_REBALANCE:
            # The leader may already be assigning to the old member id: start over.
            self._prepare_rebalance(group)
        else:
            self._maybe_complete_join(group)

    # --- rebalance ---------------------------------------------------------------

    def _maybe_prepare_rebalance_or_complete_join(self, group: Group) -> None:
        if group.can_rebalance():
            self._prepare_rebalance(group)
        else:
            self._maybe_complete_join(group)

    def _prepare_rebalance(self, group: Group) -> None:
        if group.state is GroupState.COMPLETING_REBALANCE:
            self._reset_and_propagate_assignment_error(group, E.REBALANCE_IN_PROGRESS)
        if group.sync_timer is not None:
            group.sync_timer.cancel()
            group.sync_timer = None
        was_empty = group.state is GroupState.EMPTY
        group.transition_to(GroupState.PREPARING_REBALANCE)
        if group.join_timer is not None:
            group.join_timer.cancel()
        if was_empty:
            delay = self.settings.initial_rebalance_delay_ms
            remaining = max(group.rebalance_timeout_ms() - delay, 0)
            group.new_member_added = False
            group.join_timer = self._later(delay, self._on_initial_delay, group, remaining)
        else:
            group.join_timer = self._later(group.rebalance_timeout_ms(), self._complete_join, group)
            self._maybe_complete_join(group)

    def _on_initial_delay(self, group: Group, remaining: int) -> None:
        group.join_timer = None
        if not self._live(group) or group.state is not GroupState.PREPARING_REBALANCE:
            return
        if group.new_member_added and remaining > 0:
            # Members keep arriving: wait a little longer, within the rebalance timeout.
            group.new_member_added = False
            delay = min(self.settings.initial_rebalance_delay_ms, remaining)
            group.join_timer = self._later(
                delay, self._on_initial_delay, group, max(remaining - delay, 0)
            )
            return
        self._complete_join(group)

    def _maybe_complete_join(self, group: Group) -> None:
        # During the initial delay the join completes only when the delay ends.
        if (
            group.state is GroupState.PREPARING_REBALANCE
            and group.all_joined()
            and group.previous_state is not GroupState.EMPTY
        ):
            self._complete_join(group)

    def _complete_join(self, group: Group) -> None:
        if group.join_timer is not None:
            group.join_timer.cancel()
            group.join_timer = None
        if not self._live(group) or group.state is not GroupState.PREPARING_REBALANCE:
            return
        for member in list(group.members.values()):
            if not member.awaiting_join and not member.is_static:
                # Dynamic members that did not rejoin within the rebalance timeout.
                log.info("member %s of group %s did not rejoin in time, removing it",
                         member.member_id, group.group_id)  # fmt: skip
                group.remove(member.member_id)
        if group.members and not group.elect_joined_leader():
            # Only static members that have not rejoined: wait for their sessions.
            group.join_timer = self._later(group.rebalance_timeout_ms(), self._complete_join, group)
            return
        group.generation += 1
        if group.members:
            group.protocol_name = group.select_protocol()
            group.subscribed_topics = group.compute_subscribed_topics()
            group.transition_to(GroupState.COMPLETING_REBALANCE)
        else:
            group.protocol_name = None
            group.subscribed_topics = group.compute_subscribed_topics()
            group.transition_to(GroupState.EMPTY)
            gid = group.group_id

            def stored(error: ErrorCode) -> None:
                if error != E.NONE:
                    log.warning("cannot persist empty group %s: %s", gid, error.name)

            self._store_group(group, on_done=stored)
        log.info("group %s generation %d (%s) with %d members", group.group_id,
                 group.generation, group.state.value, len(group.members))  # fmt: skip
        group.pending_sync = set(group.members)
        for member in group.members.values():
            if member.join_future is not None:
                leads = group.is_leader(member.member_id)
                result = self._join_result(group, member, with_members=leads)
                _complete(member.join_future, result)
                member.join_future = None
            member.is_new = False
            self._schedule_heartbeat(group, member)
        if group.members:
            group.sync_timer = self._later(
                group.rebalance_timeout_ms(), self._on_sync_timeout, group, group.generation
            )

    def _on_sync_timeout(self, group: Group, generation: int) -> None:
        group.sync_timer = None
        if not self._live(group) or group.generation != generation:
            return
        if group.state not in (GroupState.COMPLETING_REBALANCE, GroupState.STABLE):
            return
        if not group.pending_sync:
            return
        for member_id in list(group.pending_sync):
            member = group.members.get(member_id)
            log.info("member %s of group %s did not sync in time, removing it", member_id,
                     group.group_id)  # fmt: skip
            if member is not None:
                _complete(member.sync_future, SyncResult(E.UNKNOWN_MEMBER_ID))
                member.sync_future = None
            group.remove(member_id)
        self._maybe_prepare_rebalance_or_complete_join(group)

    def _reset_and_propagate_assignment_error(self, group: Group, error: ErrorCode) -> None:
        for member in group.members.values():
            member.assignment = b""
        self._propagate_assignment(group, error)

    def _propagate_assignment(self, group: Group, error: ErrorCode) -> None:
        for member in group.members.values():
            if member.sync_future is not None:
                if error == E.NONE:
                    result = SyncResult(E.NONE, member.assignment, group.protocol_type,
                                        group.protocol_name)  # fmt: skip
                else:
                    result = SyncResult(error)
                _complete(member.sync_future, result)
                member.sync_future = None
                self._schedule_heartbeat(group, member)

    def _remove_member_and_update_group(self, group: Group, member: Member) -> None:
        _complete(member.join_future, JoinResult(E.UNKNOWN_MEMBER_ID, member.member_id))
        _complete(member.sync_future, SyncResult(E.UNKNOWN_MEMBER_ID))
        member.join_future = member.sync_future = None
        group.remove(member.member_id)
        if group.state in (GroupState.STABLE, GroupState.COMPLETING_REBALANCE):
            self._prepare_rebalance(group)
        elif group.state is GroupState.PREPARING_REBALANCE:
            self._maybe_complete_join(group)

    # --- SyncGroup -------------------------------------------------------------------

    def sync_group(
        self,
        group_id: str,
        generation: int,
        member_id: str,
        instance_id: str | None,
        protocol_type: str | None,
        protocol_name: str | None,
        assignments: dict[str, bytes],
    ) -> asyncio.Future[SyncResult]:
        """The member's assignment; a follower waits for the leader's SyncGroup."""
        fut: asyncio.Future[SyncResult] = asyncio.get_running_loop().create_future()
        try:
            self._sync(fut, group_id, generation, member_id, instance_id, protocol_type,
                       protocol_name, assignments)  # fmt: skip
        except CoordinatorError as exc:
            _complete(fut, SyncResult(exc.code))
        return fut

    def _sync(
        self,
        fut: asyncio.Future[SyncResult],
        group_id: str,
        generation: int,
        member_id: str,
        instance_id: str | None,
        protocol_type: str | None,
        protocol_name: str | None,
        assignments: dict[str, bytes],
    ) -> None:
        self._check_group_id(group_id)
        group = self.groups.get(group_id)
        if group is None:
            raise CoordinatorError(E.UNKNOWN_MEMBER_ID)
        if group.state is GroupState.DEAD:
            raise CoordinatorError(E.COORDINATOR_NOT_AVAILABLE)
        error = self._validate_member(group, member_id, instance_id)
        if error != E.NONE:
            raise CoordinatorError(error)
        if generation != group.generation:
            raise CoordinatorError(E.ILLEGAL_GENERATION)
        if _inconsistent(protocol_type, group.protocol_type) or _inconsistent(
            protocol_name, group.protocol_name
        ):
            raise CoordinatorError(E.INCONSISTENT_GROUP_PROTOCOL)
        member = group.members[member_id]
        if group.state is GroupState.EMPTY:
            raise CoordinatorError(E.UNKNOWN_MEMBER_ID)
        if group.state is GroupState.PREPARING_REBALANCE:
            raise CoordinatorError(E.REBALANCE_IN_PROGRESS)
        self._received_sync(group, member_id)
        if group.state is GroupState.STABLE:
            self._schedule_heartbeat(group, member)
            _complete(fut, SyncResult(E.NONE, member.assignment, group.protocol_type,
                                      group.protocol_name))  # fmt: skip
            return
        # CompletingRebalance
        if member.sync_future is not None:
            _complete(member.sync_future, SyncResult(E.REBALANCE_IN_PROGRESS))
        member.sync_future = fut
        if not group.is_leader(member_id):
            return
        full = {mid: bytes(assignments.get(mid, b"")) for mid in group.members}

        def stored(error: ErrorCode) -> None:
            # Members may have joined (or the partition moved) while the write was
            # replicated: act only on the generation it was for.
            if not self._live(group) or group.generation != generation:
                return
            if group.state is not GroupState.COMPLETING_REBALANCE:
                return
            if error != E.NONE:
                log.warning("cannot persist the assignment of group %s: %s", group.group_id,
                            error.name)  # fmt: skip
                self._reset_and_propagate_assignment_error(group, error)
                self._prepare_rebalance(group)
                return
            for mid, m in group.members.items():
                m.assignment = full.get(mid, b"")
            self._propagate_assignment(group, E.NONE)
            group.transition_to(GroupState.STABLE)
            # With the "generation N (CompletingRebalance)" line, this tells a group
            # whose leader never synced from one that completed its rebalance.
            log.info("group %s generation %d is Stable", group.group_id, group.generation)

        self._store_group(group, full, on_done=stored)

    def _received_sync(self, group: Group, member_id: str) -> None:
        group.pending_sync.discard(member_id)
        if not group.pending_sync and group.sync_timer is not None:
            group.sync_timer.cancel()
            group.sync_timer = None

    # --- Heartbeat / LeaveGroup ----------------------------------------------------

    def heartbeat(
        self, group_id: str, member_id: str, instance_id: str | None, generation: int
    ) -> ErrorCode:
        """Keep a member's session alive; REBALANCE_IN_PROGRESS tells it to rejoin."""
        try:
            self._check_group_id(group_id)
        except CoordinatorError as exc:
            return exc.code
        group = self.groups.get(group_id)
        if group is None:
            return E.UNKNOWN_MEMBER_ID
        if group.state is GroupState.DEAD:
            return E.COORDINATOR_NOT_AVAILABLE
        error = self._validate_member(group, member_id, instance_id)
        if error != E.NONE:
            return error
        if generation != group.generation:
            return E.ILLEGAL_GENERATION
        if group.state is GroupState.EMPTY:
            return E.UNKNOWN_MEMBER_ID
        self._schedule_heartbeat(group, group.members[member_id])
        if group.state is GroupState.PREPARING_REBALANCE:
            return E.REBALANCE_IN_PROGRESS
        return E.NONE

    def leave_group(
        self, group_id: str, leaving: list[tuple[str, str | None]]
    ) -> tuple[ErrorCode, list[ErrorCode]]:
        """Remove members (by member id, or by instance id with an empty member id);
        returns the top-level error and one error per member."""
        try:
            self._check_group_id(group_id)
        except CoordinatorError as exc:
            return exc.code, []
        group = self.groups.get(group_id)
        if group is None:
            return E.UNKNOWN_MEMBER_ID, []
        if group.state is GroupState.DEAD:
            return E.COORDINATOR_NOT_AVAILABLE, []
        errors = []
        removed = 0
        for member_id, instance_id in leaving:
            if member_id == "":
                target = group.static_member_id(instance_id)
                if target is None:
                    errors.append(E.UNKNOWN_MEMBER_ID)
                    continue
            elif group.is_pending(member_id):
                group.remove(member_id)
                errors.append(E.NONE)
                removed += 1
                continue
            else:
                error = self._validate_member(group, member_id, instance_id)
                if error != E.NONE:
                    errors.append(error)
                    continue
                target = member_id
            member = group.members[target]
            _complete(member.join_future, JoinResult(E.UNKNOWN_MEMBER_ID, target))
            _complete(member.sync_future, SyncResult(E.UNKNOWN_MEMBER_ID))
            member.join_future = member.sync_future = None
            group.remove(target)
            log.info("member %s left group %s", target, group_id)
            errors.append(E.NONE)
            removed += 1
        if removed:
            if group.state in (GroupState.STABLE, GroupState.COMPLETING_REBALANCE):
                self._prepare_rebalance(group)
            elif group.state is GroupState.PREPARING_REBALANCE:
                self._maybe_complete_join(group)
        return E.NONE, errors

    # --- offsets ---------------------------------------------------------------------

    def commit_offsets(
        self,
        group_id: str,
        generation: int,
        member_id: str,
        instance_id: str | None,
        offsets: dict[tuple[str, int], OffsetEntry],
    ) -> asyncio.Future[ErrorCode]:
        """Commit offsets (all or nothing); the future completes with the error for
        every partition once the write is replicated (or failed). The offsets take
        effect (OffsetFetch) only then."""
        fut: asyncio.Future[ErrorCode] = asyncio.get_running_loop().create_future()
        try:
            self._commit(fut, group_id, generation, member_id, instance_id, offsets)
        except CoordinatorError as exc:
            _complete(fut, exc.code)
        return fut

    def _commit(
        self,
        fut: asyncio.Future[ErrorCode],
        group_id: str,
        generation: int,
        member_id: str,
        instance_id: str | None,
        offsets: dict[tuple[str, int], OffsetEntry],
    ) -> None:
        self._check_group_id(group_id)
        group = self.groups.get(group_id)
        created = False
        if group is None:
            if generation >= 0 or member_id or instance_id is not None:
                # A member of a generation this coordinator does not know.
                raise CoordinatorError(E.ILLEGAL_GENERATION)
            # A "simple" consumer: the group exists only to hold offsets.
            group = self.groups[group_id] = Group(group_id)
            created = True
        error = self._validate_offset_commit(group, generation, member_id, instance_id)
        if error != E.NONE:
            raise CoordinatorError(error)
        if not offsets:
            _complete(fut, E.NONE)
            return
        records = [encode_offset_commit(_offset_record(group_id, t, p, entry))
                   for (t, p), entry in offsets.items()]  # fmt: skip

        def forget_if_unused() -> None:
            # A group created for this commit and still holding nothing.
            unused = not (group.members or group.offsets or group.pending_offsets
                          or group.pending_txn_offsets)  # fmt: skip
            if created and unused and self._live(group) and group.state is GroupState.EMPTY:
                del self.groups[group_id]

        try:
            position = self.store.append(self.partition_for(group_id), records)
        except AppendError as exc:
            log.warning("cannot persist offsets of group %s: %s", group_id, exc)
            forget_if_unused()
            _complete(fut, offset_commit_error(exc.code))
            return
        for tp in offsets:
            group.pending_offsets[tp] = position
        member = group.members.get(member_id)
        if member is not None and group.state is GroupState.STABLE:
            self._schedule_heartbeat(group, member)  # a commit shows the member is alive

        def durable(error: ErrorCode) -> None:
            live = self._live(group)
            for tp, entry in offsets.items():
                pending = group.pending_offsets.get(tp)
                # Kafka's onOffsetCommitAppend: a pending commit newer than the applied one.
                newer = position > group.offset_positions.get(tp, -1)
                if error == E.NONE and live and pending is not None and newer:
                    group.offsets[tp] = entry
                    group.offset_positions[tp] = position
                if pending == position:
                    del group.pending_offsets[tp]
            if error != E.NONE:
                log.warning("offsets of group %s not committed: %s", group_id, error.name)
                forget_if_unused()
            _complete(fut, E.NONE if error == E.NONE else offset_commit_error(error))

        self._when_committed(self.partition_for(group_id), position, durable)

    def _validate_offset_commit(
        self, group: Group, generation: int, member_id: str, instance_id: str | None
    ) -> ErrorCode:
        if group.state is GroupState.DEAD:
            return E.COORDINATOR_NOT_AVAILABLE
        if generation >= 0 or member_id or instance_id is not None:
            if group.is_pending(member_id):
                return E.UNKNOWN_MEMBER_ID
            error = self._validate_member(group, member_id, instance_id)
            if error != E.NONE:
                return error
            if generation != group.generation:
                return E.ILLEGAL_GENERATION
        elif group.state is not GroupState.EMPTY:
            # While the group has members, only members may commit.
            return E.UNKNOWN_MEMBER_ID
        if group.state is GroupState.COMPLETING_REBALANCE:
            # The member has its new generation but not its assignment yet.
            return E.REBALANCE_IN_PROGRESS
        return E.NONE

    # --- transactional offsets (TxnOffsetCommit) ------------------------------------

    def commit_txn_offsets(
        self,
        group_id: str,
        producer: tuple[int, int],
        generation: int,
        member_id: str,
        instance_id: str | None,
        offsets: dict[tuple[str, int], OffsetEntry],
    ) -> asyncio.Future[ErrorCode]:
        """TxnOffsetCommit (Kafka's handleTxnCommitOffsets): the offsets are written
        in a transactional batch of `producer` (id, epoch) and held pending until
        the transaction's marker lands on the group's partition
        (:meth:`complete_txn`); the future completes once the write is replicated."""
        fut: asyncio.Future[ErrorCode] = asyncio.get_running_loop().create_future()
        try:
            self._txn_commit(fut, group_id, producer, generation, member_id, instance_id, offsets)
        except CoordinatorError as exc:
            _complete(fut, exc.code)
        return fut

    def _txn_commit(
        self,
        fut: asyncio.Future[ErrorCode],
        group_id: str,
        producer: tuple[int, int],
        generation: int,
        member_id: str,
        instance_id: str | None,
        offsets: dict[tuple[str, int], OffsetEntry],
    ) -> None:
        self._check_group_id(group_id)
        group = self.groups.get(group_id)
        created = group is None
        if group is None:
            # Kafka adds the group (Empty) whoever commits: the checks below decide.
            group = self.groups[group_id] = Group(group_id)

        def forget_if_unused() -> None:
            unused = not (group.members or group.offsets or group.pending_offsets
                          or group.pending_txn_offsets)  # fmt: skip
            if created and unused and self._live(group) and group.state is GroupState.EMPTY:
                del self.groups[group_id]

        error = E.NONE
        if group.state is GroupState.DEAD:
            error = E.COORDINATOR_NOT_AVAILABLE
        elif instance_id is not None and group.static_member_id(instance_id) not in (
            None,
            member_id,
        ):
            error = E.FENCED_INSTANCE_ID
        elif member_id and not group.has_member(member_id):
            error = E.UNKNOWN_MEMBER_ID
        elif generation >= 0 and generation != group.generation:
            error = E.ILLEGAL_GENERATION
        if error != E.NONE or not offsets:
            forget_if_unused()
            _complete(fut, error)
            return
        producer_id = producer[0]
        records = [encode_offset_commit(_offset_record(group_id, t, p, entry))
                   for (t, p), entry in offsets.items()]  # fmt: skip
        partition = self.partition_for(group_id)
        pending = group.pending_txn_offsets.setdefault(producer_id, {})
        marks = {tp: (entry, -1) for tp, entry in offsets.items()}
        pending.update(marks)

        def drop_ours() -> None:
            # Kafka's failPendingTxnOffsetCommit: only what this request put there.
            for tp, mark in marks.items():
                if pending.get(tp) is mark:
                    del pending[tp]
            if not pending and group.pending_txn_offsets.get(producer_id) is pending:
                del group.pending_txn_offsets[producer_id]

        try:
            position = self.store.append(partition, records, producer=producer)
        except AppendError as exc:
            log.warning("cannot persist transactional offsets of group %s: %s", group_id, exc)
            drop_ours()
            forget_if_unused()
            _complete(fut, offset_commit_error(exc.code))
            return

        def durable(error: ErrorCode) -> None:
            if error != E.NONE:
                drop_ours()
                forget_if_unused()
                _complete(fut, offset_commit_error(error))
                return
            for tp, mark in marks.items():
                if pending.get(tp) is mark:
                    pending[tp] = (mark[0], position)
            _complete(fut, E.NONE)

        self._when_committed(partition, position, durable)

    def complete_txn(self, producer_id: int, partitions: Iterable[int], committed: bool) -> None:
        """A transaction marker of `producer_id` landed on these `__consumer_offsets`
        partitions (Kafka's handleTxnCompletion): its pending offsets take effect on
        commit (unless a newer commit of the same partition already did) and are
        dropped on abort."""
        parts = set(partitions)
        for group in list(self.groups.values()):
            if producer_id not in group.pending_txn_offsets:
                continue
            if self.partition_for(group.group_id) not in parts:
                continue
            pending = group.pending_txn_offsets.pop(producer_id)
            if not committed:
                continue
            for tp, (entry, position) in pending.items():
                if position < 0:
                    log.error("group %s: transactional offset of %s-%d committed before it "
                              "was written", group.group_id, tp[0], tp[1])  # fmt: skip
                    continue
                if tp not in group.offsets or group.offset_positions.get(tp, -1) < position:
                    group.offsets[tp] = entry
                    group.offset_positions[tp] = position

    def unstable_partitions(
        self, group_id: str, partitions: Iterable[tuple[str, int]]
    ) -> set[tuple[str, int]]:
        """Partitions with a commit still in flight or a transactional offset waiting
        for its marker (OffsetFetch require_stable answers UNSTABLE_OFFSET_COMMIT)."""
        group = self.groups.get(group_id)
        if group is None or group.state is GroupState.DEAD:
            return set()
        return {tp for tp in partitions if group.has_pending_commit(tp)}

    def fetch_offsets(
        self, group_id: str, partitions: list[tuple[str, int]] | None
    ) -> tuple[ErrorCode, list[tuple[str, int, OffsetEntry | None]]]:
        """Committed offsets of `partitions` (None: every partition with one)."""
        try:
            self._check_group_id(group_id)
        except CoordinatorError as exc:
            return exc.code, []
        group = self.groups.get(group_id)
        stored = group.offsets if group is not None and group.state is not GroupState.DEAD else {}
        if partitions is None:
            return E.NONE, [(t, p, e) for (t, p), e in sorted(stored.items())]
        return E.NONE, [(t, p, stored.get((t, p))) for t, p in partitions]

    def delete_offsets(
        self, group_id: str, partitions: list[tuple[str, int]]
    ) -> tuple[ErrorCode, dict[tuple[str, int], ErrorCode]]:
        """Delete committed offsets of partitions no active member consumes."""
        try:
            self._check_group_id(group_id)
        except CoordinatorError as exc:
            return exc.code, {}
        group = self.groups.get(group_id)
        if group is None or group.state is GroupState.DEAD:
            return E.GROUP_ID_NOT_FOUND, {}
        errors: dict[tuple[str, int], ErrorCode] = {}
        if group.state is GroupState.EMPTY:
            eligible = list(partitions)
        elif group.protocol_type == CONSUMER_PROTOCOL_TYPE:
            eligible = []
            for tp in partitions:
                if group.is_subscribed_to(tp[0]):
                    errors[tp] = E.GROUP_SUBSCRIBED_TO_TOPIC
                else:
                    eligible.append(tp)
        else:
            return E.NON_EMPTY_GROUP, {}
        if eligible:
            # Kafka's removeOffsets: pending commits of these partitions, transactional
            # ones included, are cancelled too; an Empty group left with nothing dies.
            error = self._cleanup(group, eligible)
            if error != E.NONE:
                log.warning("cannot delete offsets of group %s: %s", group_id, error.name)
                return error, {}
        for tp in eligible:
            errors[tp] = E.NONE
        return E.NONE, errors

    # --- admin -----------------------------------------------------------------------

    def list_groups(self, states: list[str] | None = None) -> list[tuple[str, str, str]]:
        """(group id, protocol type, state) of every live group, optionally filtered
        by state name (case-insensitive)."""
        wanted = {s.lower() for s in states} if states else None
        out = []
        for group in self.groups.values():
            if group.state is GroupState.DEAD:
                continue
            if self._is_loading(group.group_id):
                continue
            if wanted is not None and group.state.value.lower() not in wanted:
                continue
            out.append((group.group_id, group.protocol_type or "", group.state.value))
        return out

    def describe_group(self, group_id: str) -> GroupDescription:
        """A group's state, protocol and members (metadata and assignment when Stable)."""
        error = self.check_group(group_id)
        if error != E.NONE:
            return GroupDescription(error, group_id, "")
        group = self.groups.get(group_id)
        if group is None or group.state is GroupState.DEAD:
            return GroupDescription(E.NONE, group_id, GroupState.DEAD.value)
        stable = group.state is GroupState.STABLE
        protocol = group.protocol_name or "" if stable else ""
        members = [
            MemberDescription(
                m.member_id,
                m.group_instance_id,
                m.client_id,
                m.client_host,
                m.metadata(protocol) if stable else b"",
                m.assignment if stable else b"",
            )
            for m in group.members.values()
        ]
        return GroupDescription(
            E.NONE, group_id, group.state.value, group.protocol_type or "", protocol, members
        )

    def delete_groups(self, group_ids: list[str]) -> dict[str, ErrorCode]:
        """Delete empty groups with their offsets (tombstones for both)."""
        out: dict[str, ErrorCode] = {}
        by_partition: dict[int, list[Group]] = {}
        for gid in group_ids:
            error = self.check_group(gid)
            if error != E.NONE:
                out[gid] = error
                continue
            group = self.groups.get(gid)
            if group is None or group.state is GroupState.DEAD:
                out[gid] = E.GROUP_ID_NOT_FOUND
            elif group.state is not GroupState.EMPTY:
                out[gid] = E.NON_EMPTY_GROUP
            else:
                by_partition.setdefault(self.partition_for(gid), []).append(group)
        for p, groups in by_partition.items():
            # Kafka's removeAllOffsets: the committed offsets (with their pending
            # commits); transactional offsets of other partitions go with the group,
            # so a marker arriving later finds no group and applies nothing.
            records: list[Record] = []
            for group in groups:
                records.extend(_tombstones(group, list(group.offsets)))
                records.extend(_group_tombstone(group))
            error = self._append_tombstones(p, records)
            if error != E.NONE:
                log.warning("cannot delete groups in partition %d: %s", p, error.name)
                for group in groups:
                    out[group.group_id] = error
                continue
            for group in groups:
                self._drop_group(group)
                out[group.group_id] = E.NONE
        return out

    def _drop_group(self, group: Group) -> None:
        self._cancel_group_timers(group)
        group.offsets.clear()
        group.offset_positions.clear()
        group.pending_offsets.clear()
        group.pending_txn_offsets.clear()
        group.transition_to(GroupState.DEAD)
        if self.groups.get(group.group_id) is group:
            del self.groups[group.group_id]

    # --- expiration and topic deletion ------------------------------------------------

    async def _expire_periodically(self) -> None:
        interval = max(self.settings.retention_check_interval_ms, 1) / 1000
        while True:
            await asyncio.sleep(interval)
            try:
                self.expire_offsets()
            except Exception:
                log.exception("offset expiration failed")

    def expire_offsets(self, now: int | None = None) -> int:
        """Delete offsets past their retention (Kafka's rules per group kind) and
        groups left Empty with no offsets, pending ones included (Kafka's
        cleanupGroupMetadata); returns how many offsets expired."""
        now = now_ms() if now is None else now
        expired_total = 0
        for group in list(self.groups.values()):
            expired = self._expired_offsets(group, now)
            # Kafka's removeExpiredOffsets leaves pending commits alone.
            if self._cleanup(group, expired, cancel_pending=False) == E.NONE:
                expired_total += len(expired)
        return expired_total

    def _expired_offsets(self, group: Group, now: int) -> list[tuple[str, int]]:
        retention = self.settings.offsets_retention_ms
        base: Callable[[OffsetEntry], int]
        only_unsubscribed = False
        if group.protocol_type and group.state is GroupState.EMPTY:
            # Retention counts from when the group became empty.
            def base(e: OffsetEntry) -> int:
                return group.current_state_timestamp

        elif (
            group.protocol_type == CONSUMER_PROTOCOL_TYPE
            and group.state is GroupState.STABLE
            and group.subscribed_topics is not None
        ):
            only_unsubscribed = True

            def base(e: OffsetEntry) -> int:
                return e.commit_timestamp

        elif not group.protocol_type:

            def base(e: OffsetEntry) -> int:
                return e.commit_timestamp

        else:
            return []
        out = []
        for (topic, partition), entry in group.offsets.items():
            if only_unsubscribed and group.subscribed_topics and topic in group.subscribed_topics:
                continue
            if (topic, partition) in group.pending_offsets:
                # A commit in flight renews it (Kafka's removeExpiredOffsets). A pending
                # transactional offset does not: Kafka 3.x's coordinator expires the
                # committed one all the same; the marker may bring a new one.
                continue
            if entry.expire_timestamp >= 0:
                if now >= entry.expire_timestamp:
                    out.append((topic, partition))
            elif now - base(entry) >= retention:
                out.append((topic, partition))
        return out

    def _cleanup(
        self, group: Group, partitions: list[tuple[str, int]], *, cancel_pending: bool = True
    ) -> ErrorCode:
        """Kafka's cleanupGroupMetadata for one group: remove `partitions` (tombstones
        for the committed offsets; with `cancel_pending` their pending commits,
        transactional ones included, are cancelled: Group.remove_offsets), then an
        Empty group left without offsets (Group.has_offsets: a producer's pending
        transactional offsets keep it) dies, with a group tombstone if it had a
        generation. The tombstones are appended first: if that fails nothing changes."""
        if not self._live(group) or self._is_loading(group.group_id):
            return E.NONE
        dies = (
            group.state is GroupState.EMPTY
            and not group.pending_members
            and not group.has_offsets(partitions, cancel_pending=cancel_pending)
        )
        committed = [tp for tp in partitions if tp in group.offsets]
        records = _tombstones(group, committed)
        if dies:
            records.extend(_group_tombstone(group))
        error = self._append_tombstones(self.partition_for(group.group_id), records)
        if error != E.NONE:
            log.warning("cannot remove offsets of group %s: %s", group.group_id, error.name)
            return error
        group.remove_offsets(partitions, cancel_pending=cancel_pending)
        if committed:
            log.info("removed %d offsets of group %s", len(committed), group.group_id)
        if dies:
            self._drop_group(group)
        return E.NONE

    def on_topic_deleted(self, topic: str) -> None:
        """Drop every group's offsets of a deleted topic, pending ones included; as
        Kafka's handleDeletedPartitions this cleans up every group (an Empty one
        without offsets dies)."""
        for group in list(self.groups.values()):
            txn = [tp for pending in group.pending_txn_offsets.values() for tp in pending]
            known = set(group.offsets) | set(group.pending_offsets) | set(txn)
            self._cleanup(group, sorted(tp for tp in known if tp[0] == topic))

    # --- persistence -----------------------------------------------------------------

    def _append_tombstones(self, partition: int, records: Sequence[Record]) -> ErrorCode:
        """Append deletions as the leader without waiting for replication (Kafka's
        cleanupGroupMetadata); NONE or the coordinator error. Nothing to delete
        appends nothing."""
        if not records:
            return E.NONE
        try:
            self.store.append(partition, records, acks_all=False)
        except AppendError as exc:
            return offset_commit_error(exc.code)
        return E.NONE

    def _when_committed(
        self, partition: int, position: int, on_done: Callable[[ErrorCode], None]
    ) -> None:
        """Call `on_done` with NONE once the high watermark passed `position`, else with
        the append's partition error (NOT_LEADER_OR_FOLLOWER when stopped meanwhile)."""
        timeout = self.settings.offsets_commit_timeout_ms
        task = asyncio.get_running_loop().create_task(
            self.store.wait_committed(partition, position, timeout)
        )
        self._writes.add(task)

        def done(t: asyncio.Task[None]) -> None:
            self._writes.discard(t)
            if t.cancelled():
                code = E.NOT_LEADER_OR_FOLLOWER
            else:
                exc = t.exception()
                if exc is None:
                    code = E.NONE
                elif isinstance(exc, AppendError):
                    code = exc.code
                else:
                    log.error("waiting for %s-%d failed: %r", CONSUMER_OFFSETS, partition, exc)
                    code = E.UNKNOWN_SERVER_ERROR
            on_done(code)

        task.add_done_callback(done)

    def _store_group(
        self,
        group: Group,
        assignment: dict[str, bytes] | None = None,
        *,
        on_done: Callable[[ErrorCode], None],
    ) -> None:
        """Write the group's metadata record (members with `assignment`, default their
        current one); `on_done` gets NONE once it is replicated, else the JoinGroup /
        SyncGroup error (Kafka's storeGroup mapping)."""
        protocol = group.protocol_name
        members = [
            GroupMember(
                member_id=m.member_id,
                client_id=m.client_id,
                client_host=m.client_host,
                session_timeout=m.session_timeout_ms,
                subscription=m.metadata(protocol) if protocol is not None else b"",
                assignment=m.assignment if assignment is None else assignment.get(m.member_id, b""),
                rebalance_timeout=m.rebalance_timeout_ms,
                group_instance_id=m.group_instance_id,
            )
            for m in group.members.values()
        ]
        value = GroupMetadataValue(
            protocol_type=group.protocol_type or "",
            generation=group.generation,
            protocol=protocol,
            leader=group.leader_id if group.members else None,
            members=members,
            current_state_timestamp=group.current_state_timestamp,
            version=3,
        )
        record = encode_group_metadata(GroupMetadataRecord(group.group_id, value))
        p = self.partition_for(group.group_id)
        try:
            position = self.store.append(p, [record])
        except AppendError as exc:
            error = group_write_error(exc.code)
            # Answered from the loop, as a replicated write would be: callers finish
            # parking their request first.
            asyncio.get_running_loop().call_soon(on_done, error)
            return
        self._when_committed(p, position, lambda code: on_done(group_write_error(code)))


def _entry(v: OffsetCommitValue) -> OffsetEntry:
    return OffsetEntry(v.offset, v.leader_epoch, v.metadata, v.commit_timestamp, v.expire_timestamp)


def _inconsistent(requested: str | None, current: str | None) -> bool:
    return requested is not None and current is not None and requested != current


def _offset_record(group_id: str, topic: str, partition: int, e: OffsetEntry) -> OffsetCommitRecord:
    # Value v1 is the only one with an expire timestamp (explicit retention); else v3.
    version = 1 if e.expire_timestamp >= 0 else 3
    value = OffsetCommitValue(
        offset=e.offset,
        metadata=e.metadata,
        commit_timestamp=e.commit_timestamp,
        leader_epoch=e.leader_epoch,
        expire_timestamp=e.expire_timestamp,
        version=version,
    )
    return OffsetCommitRecord(group_id, topic, partition, value, key_version=1)


def _tombstones(group: Group, partitions: list[tuple[str, int]]) -> list[Record]:
    return [
        encode_offset_commit(OffsetCommitRecord(group.group_id, t, p, None)) for t, p in partitions
    ]


def _group_tombstone(group: Group) -> list[Record]:
    # Kafka writes none for a group of generation 0: it only ever stored offsets,
    # never group metadata.
    if group.generation <= 0:
        return []
    return [encode_group_metadata(GroupMetadataRecord(group.group_id, None))]
