"""The group coordinator in a cluster: it serves the groups of the `__consumer_offsets`
partitions this broker leads, loads them on election, unloads them on resignation,
and answers commits only once they are replicated."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any, cast

import pytest
from replication_helpers import new_partition, state

from kt.broker.errors import (
    AppendError,
    KafkaStorageError,
    NotLeaderOrFollowerError,
    is_storage_failure,
)
from kt.broker.groups import CoordinatorSettings, GroupCoordinator, GroupState
from kt.broker.groups.coordinator import JoinRequest, JoinResult
from kt.broker.groups.group import OffsetEntry
from kt.broker.groups.offsets_log import LogRecordStore, MemoryRecordStore, partition_for
from kt.broker.metadata_store import CONSUMER_OFFSETS
from kt.broker.partition import Partition
from kt.broker.purgatory import DelayedOperationPurgatory, DelayedProduce
from kt.protocol import ErrorCode as E
from kt.storage.checkpoint import TopicPartition
from kt.storage.errors import StorageError
from kt.storage.log import AppendResult

PARTITIONS = 5
GID = "grp"
P = partition_for(GID, PARTITIONS)
# A group on another partition, unaffected by P's changes.
OTHER = next(g for g in (f"other-{i}" for i in range(100)) if partition_for(g, PARTITIONS) != P)
OFF = {("t", 0): OffsetEntry(10, 1, "m", 1000)}


def run(test: Any) -> None:
    asyncio.run(test())


async def make(leaders: set[int] | None = None) -> tuple[GroupCoordinator, MemoryRecordStore]:
    store = MemoryRecordStore(partitions=PARTITIONS)
    if leaders is not None:
        store.leaders = set(leaders)
    settings = CoordinatorSettings(initial_rebalance_delay_ms=0, min_session_timeout_ms=10)
    coord = GroupCoordinator(settings, store)
    await coord.start()
    return coord, store


def join(member_id: str = "", group_id: str = GID) -> JoinRequest:
    return JoinRequest(
        group_id=group_id,
        member_id=member_id,
        group_instance_id=None,
        client_id="c",
        client_host="/127.0.0.1",
        session_timeout_ms=10_000,
        rebalance_timeout_ms=10_000,
        protocol_type="consumer",
        protocols=[("range", b"")],
        require_known_member_id=False,
    )


async def wait(fut: asyncio.Future[Any], timeout: float = 2.0) -> Any:
    return await asyncio.wait_for(asyncio.shield(fut), timeout)


async def stable_member(coord: GroupCoordinator, group_id: str = GID) -> JoinResult:
    a: JoinResult = await wait(coord.join_group(join(group_id=group_id)))
    assert a.error == E.NONE
    s = await wait(coord.sync_group(group_id, a.generation, a.member_id, None, None, None,
                                    {a.member_id: b"A"}))  # fmt: skip
    assert s.error == E.NONE
    return a


def test_only_led_partitions_are_served_and_load_on_election() -> None:
    async def t() -> None:
        coord, store = await make(leaders={p for p in range(PARTITIONS) if p != P})
        assert P not in coord.owned and coord.check_group(GID) == E.NOT_COORDINATOR
        assert (await wait(coord.join_group(join()))).error == E.NOT_COORDINATOR
        assert await coord.commit_offsets(GID, -1, "", None, OFF) == E.NOT_COORDINATOR
        assert coord.fetch_offsets(GID, None)[0] == E.NOT_COORDINATOR
        assert coord.heartbeat(GID, "m", None, 1) == E.NOT_COORDINATOR
        assert coord.describe_group(GID).error == E.NOT_COORDINATOR
        assert coord.delete_groups([GID]) == {GID: E.NOT_COORDINATOR}
        assert coord.check_group(OTHER) == E.NONE
        # Another broker committed for GID before this one became the leader.
        other, other_store = await make()
        await other.commit_offsets(GID, -1, "", None, OFF)
        store.batches[P] = other_store.batches[P]
        await other.stop()
        store.leaders.add(P)
        coord.on_election([P])
        # Until loaded: COORDINATOR_LOAD_IN_PROGRESS, for every API.
        assert coord.check_group(GID) == E.COORDINATOR_LOAD_IN_PROGRESS
        assert coord.fetch_offsets(GID, None)[0] == E.COORDINATOR_LOAD_IN_PROGRESS
        assert coord.check_group(OTHER) == E.NONE
        assert coord.join_group(join()).result().error == E.COORDINATOR_LOAD_IN_PROGRESS
        await coord.wait_loaded()
        assert P in coord.owned and not coord.loading
        assert coord.fetch_offsets(GID, None) == (E.NONE, [("t", 0, OFF[("t", 0)])])
        await coord.stop()

    run(t)


def test_resignation_answers_parked_requests_and_forgets_the_groups() -> None:
    async def t() -> None:
        coord, store = await make()
        a = await stable_member(coord)
        await stable_member(coord, OTHER)
        assert await coord.commit_offsets(GID, a.generation, a.member_id, None, OFF) == E.NONE
        # b's JoinGroup parks (the rebalance waits for a to rejoin) ...
        b_join = coord.join_group(join())
        await asyncio.sleep(0.01)
        assert not b_join.done()
        group = coord.groups[GID]
        assert group.state is GroupState.PREPARING_REBALANCE and group.join_timer is not None
        members = list(group.members.values())
        # ... until the partition moves to another broker.
        store.leaders.discard(P)
        coord.on_resignation([P])
        assert (await wait(b_join)).error == E.NOT_COORDINATOR
        assert GID not in coord.groups and group.state is GroupState.DEAD
        assert group.join_timer is None and all(m.heartbeat_timer is None for m in members)
        assert coord.heartbeat(GID, a.member_id, None, a.generation) == E.NOT_COORDINATOR
        assert coord.check_group(OTHER) == E.NONE and OTHER in coord.groups
        # Leading it again: the group comes back from the log, Empty, with its offsets.
        store.leaders.add(P)
        coord.on_election([P])
        await coord.wait_loaded()
        again = coord.groups[GID]
        assert again.state is GroupState.EMPTY and again.generation == a.generation
        assert again.offsets == OFF
        await coord.stop()

    run(t)


def test_parked_sync_is_answered_not_coordinator_on_resignation() -> None:
    async def t() -> None:
        coord, _ = await make()
        a = await stable_member(coord)
        b_join = coord.join_group(join())
        a2 = await wait(coord.join_group(join(a.member_id)))
        b = await wait(b_join)
        follower = coord.sync_group(GID, b.generation, b.member_id, None, None, None, {})
        await asyncio.sleep(0.01)
        assert not follower.done()
        coord.on_resignation([P])
        assert (await wait(follower)).error == E.NOT_COORDINATOR
        late = coord.sync_group(GID, a2.generation, a2.member_id, None, None, None, {})
        assert (await wait(late)).error == E.NOT_COORDINATOR
        await coord.stop()

    run(t)


def test_stop_replica_while_loading_cancels_the_load() -> None:
    async def t() -> None:
        coord, _ = await make(leaders=set())
        coord.on_election([P])
        coord.on_resignation([P])
        await coord.wait_loaded()
        assert P not in coord.owned and not coord.loading
        assert coord.check_group(GID) == E.NOT_COORDINATOR
        await coord.stop()

    run(t)


def test_commit_takes_effect_once_replicated() -> None:
    async def t() -> None:
        coord, store = await make()
        store.hold = True
        fut = coord.commit_offsets(GID, -1, "", None, OFF)
        await asyncio.sleep(0.01)
        assert not fut.done(), "answered only when the high watermark passed it"
        assert coord.fetch_offsets(GID, [("t", 0)])[1] == [("t", 0, None)]
        store.release()
        assert await wait(fut) == E.NONE
        assert coord.fetch_offsets(GID, [("t", 0)])[1] == [("t", 0, OFF[("t", 0)])]

        # The ISR shrank below min.insync.replicas meanwhile: not committed.
        store.hold = True
        newer = {("t", 0): OffsetEntry(20, 1, "", 2000)}
        fut = coord.commit_offsets(GID, -1, "", None, newer)
        await asyncio.sleep(0.01)
        store.release(E.NOT_ENOUGH_REPLICAS_AFTER_APPEND)
        assert await wait(fut) == E.COORDINATOR_NOT_AVAILABLE
        assert coord.fetch_offsets(GID, [("t", 0)])[1] == [("t", 0, OFF[("t", 0)])]
        assert not coord.groups[GID].pending_offsets

        # Refused before the append (ISR below the minimum, or not the leader).
        store.fail = True
        store.fail_code = E.NOT_ENOUGH_REPLICAS
        assert await coord.commit_offsets(GID, -1, "", None, newer) == E.COORDINATOR_NOT_AVAILABLE
        store.fail_code = E.NOT_LEADER_OR_FOLLOWER
        assert await coord.commit_offsets(GID, -1, "", None, newer) == E.NOT_COORDINATOR
        store.fail = False
        store.fail_code = E.REQUEST_TIMED_OUT
        store.hold = True
        fut = coord.commit_offsets(GID, -1, "", None, newer)
        await asyncio.sleep(0)
        store.release(E.REQUEST_TIMED_OUT)
        assert await wait(fut) == E.REQUEST_TIMED_OUT

        # Leadership lost while the write was being replicated.
        store.hold = True
        fut = coord.commit_offsets(GID, -1, "", None, newer)
        await asyncio.sleep(0.01)
        store.leaders.discard(P)
        coord.on_resignation([P])
        store.release()
        assert await wait(fut) == E.NOT_COORDINATOR
        await coord.stop()

    run(t)


def test_a_deletion_wins_over_a_commit_in_flight() -> None:
    async def t() -> None:
        coord, store = await make()
        assert await coord.commit_offsets(GID, -1, "", None, OFF) == E.NONE
        store.hold = True
        fut = coord.commit_offsets(GID, -1, "", None, {("t", 0): OffsetEntry(30, 1, "", 3)})
        await asyncio.sleep(0.01)
        top, errors = coord.delete_offsets(GID, [("t", 0)])
        assert top == E.NONE and errors == {("t", 0): E.NONE}
        store.release()
        assert await wait(fut) == E.NONE
        assert coord.fetch_offsets(GID, [("t", 0)])[1] == [("t", 0, None)]
        await coord.stop()

    run(t)


def test_assignment_is_handed_out_once_replicated() -> None:
    async def t() -> None:
        coord, store = await make()
        a = await wait(coord.join_group(join()))
        store.hold = True
        sync = coord.sync_group(GID, a.generation, a.member_id, None, None, None,
                                {a.member_id: b"A"})  # fmt: skip
        await asyncio.sleep(0.01)
        assert not sync.done() and coord.groups[GID].state is GroupState.COMPLETING_REBALANCE
        store.release()
        assert (await wait(sync)).assignment == b"A"
        assert coord.groups[GID].state is GroupState.STABLE
        # A failed write makes the members rebalance with the mapped error.
        b_join = coord.join_group(join())
        a2 = await wait(coord.join_group(join(a.member_id)))
        await wait(b_join)
        store.hold = True
        sync = coord.sync_group(GID, a2.generation, a2.member_id, None, None, None, {})
        await asyncio.sleep(0.01)
        store.release(E.NOT_ENOUGH_REPLICAS)
        assert (await wait(sync)).error == E.COORDINATOR_NOT_AVAILABLE
        assert coord.groups[GID].state is GroupState.PREPARING_REBALANCE
        assert all(m.assignment == b"" for m in coord.groups[GID].members.values())
        await coord.stop()

    run(t)


# --- the real store over a Partition ------------------------------------------------


class FakeReplicaManager:
    """What LogRecordStore uses of the ReplicaManager (its purgatory is the real one)."""

    def __init__(self, part: Partition) -> None:
        self.part = part
        self.failed: list[BaseException] = []
        self.purgatory: DelayedOperationPurgatory[TopicPartition] = DelayedOperationPurgatory("p")
        part.offsets_listener = lambda p: self.purgatory.check_and_complete(p.tp)

    async def wait_for_replication(
        self, required: dict[TopicPartition, int], timeout_ms: int
    ) -> dict[TopicPartition, BaseException | None]:
        def lookup(tp: TopicPartition) -> Partition:
            part = self.get(tp)
            if part is None or not part.is_leader:
                raise NotLeaderOrFollowerError(str(tp))
            return part

        op: DelayedProduce[TopicPartition] = DelayedProduce(timeout_ms, required, lookup)
        if not self.purgatory.try_complete_else_watch(op, list(required)):
            await op.wait()
        return op.result

    def get(self, tp: TopicPartition) -> Partition | None:
        return self.part if tp == self.part.tp else None

    def append_records(
        self, topic: str, index: int, records: bytes, *, now_ms: int, acks: int, **kw: Any
    ) -> AppendResult:
        # As ReplicaManager.append_records: refusals first, a failed log offline.
        part = self.part
        if part.offline:
            raise KafkaStorageError(str(part.tp))
        refusal = part.check_enough_replicas_for_append(acks)
        if refusal is not None:
            raise refusal
        try:
            return part.append_records(records, now_ms=now_ms, origin=kw["origin"])
        except (StorageError, OSError) as exc:
            if is_storage_failure(exc):
                self.on_storage_error(part, exc)
            raise

    def __iter__(self) -> Any:
        return iter([self.part])

    def on_storage_error(self, part: Partition, exc: BaseException) -> None:
        self.failed.append(exc)
        part.offline = True


def _log_store(part: Partition) -> LogRecordStore:
    """The offsets log over one partition: only the replica manager is used here."""
    unused = cast(Any, None)
    return LogRecordStore(cast(Any, FakeReplicaManager(part)), unused, unused, unused)


def offsets_partition(tmp_path: Path, *, min_isr: int = 1) -> Partition:
    part = new_partition(tmp_path, 1, min_isr=min_isr)
    part.tp = TopicPartition(CONSUMER_OFFSETS, 0)
    return part


def test_log_store_waits_for_the_high_watermark(tmp_path: Path) -> None:
    async def t() -> None:
        part = offsets_partition(tmp_path)
        assert part.make_leader(state(1, 1, [1, 2]))
        store = _log_store(part)
        assert store.led_partitions() == [0]
        end = store.append(0, [(b"k", b"v")])
        assert end == 1 and part.high_watermark == 0
        waiting = asyncio.ensure_future(store.wait_committed(0, end, 2000))
        await asyncio.sleep(0.01)
        assert not waiting.done()
        now = int(time.time() * 1000)
        assert part.update_follower_fetch_state(2, end, now, part.log_end_offset)
        await asyncio.wait_for(waiting, 2)
        assert part.high_watermark == 1

        # Becoming a follower fails the writes still waiting.
        end = store.append(0, [(b"k", b"v2")])
        waiting = asyncio.ensure_future(store.wait_committed(0, end, 2000))
        await asyncio.sleep(0.01)
        assert part.make_follower(state(2, 2, [1, 2]))
        with pytest.raises(AppendError) as err:
            await asyncio.wait_for(waiting, 2)
        assert err.value.code == E.NOT_LEADER_OR_FOLLOWER
        with pytest.raises(AppendError) as err:
            store.append(0, [(b"k", b"v3")])
        assert err.value.code == E.NOT_LEADER_OR_FOLLOWER
        assert store.led_partitions() == []

    run(t)


def test_log_store_min_isr_and_timeout(tmp_path: Path) -> None:
    async def t() -> None:
        part = offsets_partition(tmp_path, min_isr=2)
        assert part.make_leader(state(1, 1, [1], [1, 2]))
        store = _log_store(part)
        with pytest.raises(AppendError) as err:
            store.append(0, [(b"k", b"v")])
        assert err.value.code == E.NOT_ENOUGH_REPLICAS
        # Tombstones do not wait for the ISR (Kafka's cleanup appends them as leader).
        end = store.append(0, [(b"k", None)], acks_all=False)
        with pytest.raises(AppendError) as err:
            await store.wait_committed(0, end, 50)
        assert err.value.code == E.REQUEST_TIMED_OUT

    run(t)
