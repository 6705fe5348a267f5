"""Transactional offset commits in the group coordinator: held pending until the
transaction's marker lands on the group's partition, applied on commit, dropped on
abort, reported unstable meanwhile, and rebuilt the same way when a partition is
loaded from its log."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

from kt.broker.groups import CoordinatorSettings, GroupCoordinator, GroupState
from kt.broker.groups.group import OffsetEntry
from kt.broker.groups.offsets_log import (
    MemoryRecordStore,
    StoredBatch,
    partition_for,
    replay_batches,
)
from kt.protocol import ErrorCode as E
from kt.protocol.coordinator_records import (
    GroupMetadataRecord,
    OffsetCommitRecord,
    OffsetCommitValue,
    decode_consumer_offsets_record,
    encode_offset_commit,
)

PARTITIONS = 5
GID = "g"
P = partition_for(GID, PARTITIONS)
TP = ("t", 0)
PID, EPOCH = 4000, 3


def run(test: Callable[[], Awaitable[None]]) -> None:
    asyncio.run(test())  # type: ignore[arg-type]


async def make(
    store: MemoryRecordStore | None = None, **overrides: int
) -> tuple[GroupCoordinator, MemoryRecordStore]:
    store = store or MemoryRecordStore(partitions=PARTITIONS)
    settings = CoordinatorSettings(**{"initial_rebalance_delay_ms": 0, **overrides})
    coord = GroupCoordinator(settings, store)
    await coord.start()
    return coord, store


def offset(coord: GroupCoordinator, tp: tuple[str, int] = TP) -> int | None:
    error, found = coord.fetch_offsets(GID, [tp])
    assert error == E.NONE
    entry = found[0][2]
    return entry.offset if entry is not None else None


async def txn_commit(
    coord: GroupCoordinator, value: int, pid: int = PID, tps: tuple[tuple[str, int], ...] = (TP,)
) -> E:
    offsets = {tp: OffsetEntry(value, -1, "", 1) for tp in tps}
    return await coord.commit_txn_offsets(GID, (pid, EPOCH), -1, "", None, offsets)


async def plain_commit(coord: GroupCoordinator, value: int, at: int = 1) -> E:
    return await coord.commit_offsets(GID, -1, "", None, {TP: OffsetEntry(value, -1, "", at)})


def log_records(store: MemoryRecordStore) -> list[tuple[str, object]]:
    """The group's partition as (kind, key) per record, tombstones marked."""
    out: list[tuple[str, object]] = []
    for key, value in store.read(P):
        rec = decode_consumer_offsets_record(key, value)
        gone = "tombstone " if rec.value is None else ""
        if isinstance(rec, GroupMetadataRecord):
            out.append((gone + "group", rec.group))
        else:
            out.append((gone + "offset", (rec.topic, rec.partition)))
    return out


def test_offsets_take_effect_only_when_the_commit_marker_lands() -> None:
    async def t() -> None:
        coord, store = await make()
        assert await txn_commit(coord, 42) == E.NONE
        assert offset(coord) is None
        assert coord.unstable_partitions(GID, [TP, ("t", 1)]) == {TP}
        # The batch is transactional, of the producer.
        (batch,) = store.batches[P]
        assert batch.transactional and batch.producer_id == PID
        # A marker for another partition or producer changes nothing.
        coord.complete_txn(PID, [P + 1], True)
        coord.complete_txn(PID + 1, [P], True)
        assert offset(coord) is None
        coord.complete_txn(PID, [P], True)
        assert offset(coord) == 42
        assert coord.unstable_partitions(GID, [TP]) == set()

    run(t)


def test_abort_drops_the_offsets() -> None:
    async def t() -> None:
        coord, _ = await make()
        assert await coord.commit_offsets(GID, -1, "", None, {TP: OffsetEntry(7, -1, "", 1)}) == (
            E.NONE
        )
        assert await txn_commit(coord, 42) == E.NONE
        coord.complete_txn(PID, [P], False)
        assert offset(coord) == 7
        assert coord.unstable_partitions(GID, [TP]) == set()

    run(t)


def test_a_newer_plain_commit_wins_over_an_older_transactional_one() -> None:
    async def t() -> None:
        coord, _ = await make()
        assert await txn_commit(coord, 42) == E.NONE
        assert await coord.commit_offsets(GID, -1, "", None, {TP: OffsetEntry(50, -1, "", 1)}) == (
            E.NONE
        )
        coord.complete_txn(PID, [P], True)
        assert offset(coord) == 50

    run(t)


def test_members_are_checked() -> None:
    async def t() -> None:
        coord, _ = await make()
        fut = coord.commit_txn_offsets(GID, (PID, EPOCH), 3, "someone", None, {})
        assert await fut == E.UNKNOWN_MEMBER_ID
        fut = coord.commit_txn_offsets(GID, (PID, EPOCH), 3, "", None, {})
        assert await fut == E.ILLEGAL_GENERATION
        assert GID not in coord.groups  # nothing was left behind

    run(t)


def test_failed_write_leaves_nothing_pending() -> None:
    async def t() -> None:
        coord, store = await make()
        store.fail = True
        assert await txn_commit(coord, 42) == E.NOT_COORDINATOR
        assert coord.unstable_partitions(GID, [TP]) == set()

    run(t)


def test_loading_replays_markers_and_keeps_open_transactions_pending() -> None:
    async def t() -> None:
        coord, store = await make()
        assert await txn_commit(coord, 10, pid=1) == E.NONE
        assert await txn_commit(coord, 20, pid=2) == E.NONE
        store.write_marker(P, 1, True)
        store.write_marker(P, 2, False)
        assert await txn_commit(coord, 30, pid=3) == E.NONE  # still open
        coord2, _ = await make(store)
        assert offset(coord2) == 10
        assert coord2.unstable_partitions(GID, [TP]) == {TP}
        coord2.complete_txn(3, [P], True)
        assert offset(coord2) == 30

    run(t)


# --- pending transactional offsets and the group's lifecycle (Kafka 3.x's GroupMetadata /
# GroupMetadataManager.cleanupGroupMetadata / GroupCoordinator.handleDeleteGroups) ---

FAR = 10**13  # a clean-up long after every retention


def test_a_group_with_only_pending_transactional_offsets_is_empty_and_survives_expiry() -> None:
    async def t() -> None:
        coord, store = await make(offsets_retention_ms=1000)
        assert await txn_commit(coord, 42) == E.NONE
        assert coord.list_groups() == [(GID, "", "Empty")]
        assert coord.describe_group(GID).state == "Empty"
        # hasOffsets counts the producer's pending offsets: the group is kept.
        assert coord.expire_offsets(now=FAR) == 0
        assert coord.groups[GID].state is GroupState.EMPTY
        coord.complete_txn(PID, [P], True)
        assert offset(coord) == 42
        # The committed offset now expires, and the group with it (generation 0:
        # only the offset's tombstone is written, no group tombstone).
        assert coord.expire_offsets(now=FAR) == 1
        assert GID not in coord.groups
        assert log_records(store) == [("offset", TP), ("tombstone offset", TP)]

    run(t)


def test_an_aborted_transaction_leaves_the_group_to_the_next_clean_up() -> None:
    async def t() -> None:
        coord, _ = await make()
        assert await txn_commit(coord, 42) == E.NONE
        coord.complete_txn(PID, [P], False)
        assert GID in coord.groups  # nothing removes it until the clean-up runs
        assert coord.expire_offsets(now=FAR) == 0
        assert GID not in coord.groups

    run(t)


def test_expiry_spares_commits_in_flight_but_not_committed_offsets_under_a_transaction() -> None:
    async def t() -> None:
        coord, store = await make(offsets_retention_ms=1000)
        assert await plain_commit(coord, 7) == E.NONE
        # A plain commit still being replicated renews the partition: not expired.
        store.hold = True
        fut = coord.commit_offsets(GID, -1, "", None, {TP: OffsetEntry(8, -1, "", 2)})
        await asyncio.sleep(0.01)
        assert coord.expire_offsets(now=FAR) == 0
        store.release()
        assert await fut == E.NONE and offset(coord) == 8
        # A pending transactional offset does not: Kafka 3.x expires the committed
        # offset under it, and keeps the group for the transaction.
        assert await txn_commit(coord, 42) == E.NONE
        assert coord.expire_offsets(now=FAR) == 1
        assert offset(coord) is None and GID in coord.groups
        assert coord.unstable_partitions(GID, [TP]) == {TP}
        coord.complete_txn(PID, [P], True)
        assert offset(coord) == 42

    run(t)


def test_delete_groups_drops_pending_transactional_offsets_and_the_marker_finds_no_group() -> None:
    async def t() -> None:
        coord, store = await make()
        assert await txn_commit(coord, 42) == E.NONE
        # Empty (no members): Kafka deletes it, whatever transactions are open.
        assert coord.delete_groups([GID]) == {GID: E.NONE}
        assert GID not in coord.groups and coord.describe_group(GID).state == "Dead"
        assert coord.unstable_partitions(GID, [TP]) == set()
        assert coord.delete_groups([GID]) == {GID: E.GROUP_ID_NOT_FOUND}
        # Generation 0 and no committed offset: nothing to write (not even a batch).
        assert log_records(store) == [("offset", TP)] and len(store.batches[P]) == 1
        coord.complete_txn(PID, [P], True)
        assert GID not in coord.groups and offset(coord) is None
        # The marker did commit the record in the log, and Kafka's loader applies
        # it: a reloaded coordinator has the group back, Empty, with that offset.
        store.write_marker(P, PID, True)
        coord2, _ = await make(store)
        assert offset(coord2) == 42
        assert coord2.groups[GID].state is GroupState.EMPTY

    run(t)


def test_delete_groups_of_a_group_with_a_generation_writes_its_tombstone() -> None:
    async def t() -> None:
        coord, store = await make()
        assert await plain_commit(coord, 7) == E.NONE
        coord.groups[GID].generation = 3  # as a consumer group that has emptied
        assert await txn_commit(coord, 42, tps=(TP, ("t", 1))) == E.NONE
        assert coord.delete_groups([GID]) == {GID: E.NONE}
        assert log_records(store)[-2:] == [("tombstone offset", TP), ("tombstone group", GID)]
        coord.complete_txn(PID, [P], True)
        assert GID not in coord.groups

    run(t)


def test_offset_delete_cancels_pending_transactional_offsets_of_its_partitions() -> None:
    async def t() -> None:
        coord, store = await make()
        tp1 = ("t", 1)
        assert await plain_commit(coord, 7) == E.NONE
        assert await txn_commit(coord, 42, tps=(TP, tp1)) == E.NONE
        top, errors = coord.delete_offsets(GID, [tp1])
        assert top == E.NONE and errors == {tp1: E.NONE}
        assert coord.unstable_partitions(GID, [TP, tp1]) == {TP}
        assert log_records(store)[-1] == ("offset", tp1)  # nothing committed there: no tombstone
        coord.complete_txn(PID, [P], True)
        assert offset(coord) == 42 and offset(coord, tp1) is None

    run(t)


def test_offset_delete_keeps_the_group_until_the_producers_marker() -> None:
    async def t() -> None:
        coord, _ = await make()
        assert await txn_commit(coord, 42) == E.NONE
        assert coord.delete_offsets(GID, [TP]) == (E.NONE, {TP: E.NONE})
        # Kafka's removeOffsets empties the producer's pending offsets but keeps the
        # producer until its marker: hasOffsets, so the group is not removed yet.
        assert coord.unstable_partitions(GID, [TP]) == set()
        assert coord.expire_offsets(now=FAR) == 0 and GID in coord.groups
        coord.complete_txn(PID, [P], True)
        assert offset(coord) is None
        assert coord.expire_offsets(now=FAR) == 0 and GID not in coord.groups

    run(t)


def test_offset_delete_of_the_last_offset_removes_an_empty_group() -> None:
    async def t() -> None:
        coord, _ = await make()
        assert await plain_commit(coord, 7) == E.NONE
        assert coord.delete_offsets(GID, [TP]) == (E.NONE, {TP: E.NONE})
        assert GID not in coord.groups  # Kafka's cleanupGroupMetadata: Empty, no offsets
        assert coord.delete_offsets(GID, [TP])[0] == E.GROUP_ID_NOT_FOUND

    run(t)


def test_topic_deletion_cancels_pending_transactional_offsets() -> None:
    async def t() -> None:
        coord, _ = await make()
        assert await txn_commit(coord, 42, tps=(TP, ("u", 0))) == E.NONE
        coord.on_topic_deleted("t")
        assert coord.unstable_partitions(GID, [TP, ("u", 0)]) == {("u", 0)}
        coord.complete_txn(PID, [P], True)
        assert offset(coord) is None and offset(coord, ("u", 0)) == 42

    run(t)


def test_a_reloaded_group_with_only_pending_transactional_offsets_is_empty_and_kept() -> None:
    async def t() -> None:
        coord, store = await make()
        assert await txn_commit(coord, 42) == E.NONE
        coord2, _ = await make(store, offsets_retention_ms=1000)
        assert coord2.list_groups() == [(GID, "", "Empty")]
        assert coord2.expire_offsets(now=FAR) == 0 and GID in coord2.groups
        assert coord2.unstable_partitions(GID, [TP]) == {TP}

    run(t)


def test_loading_a_transactional_tombstone_cancels_the_pending_offset() -> None:
    key = ("g", "t", 0)

    def record(value: int | None) -> tuple[bytes, bytes | None]:
        v = None if value is None else OffsetCommitValue(value, "", 1, -1, -1, 3)
        return encode_offset_commit(OffsetCommitRecord(*key, v, key_version=1))

    loaded = replay_batches([
        StoredBatch((record(5),), 0, PID, True),
        StoredBatch((record(None),), 1, PID, True),
        StoredBatch((), 2, PID, True, True),
    ])  # fmt: skip
    assert key not in loaded.offsets and not loaded.pending_txn
