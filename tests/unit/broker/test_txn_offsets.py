"""Transactional offset commits in the group coordinator: held pending until the
transaction's marker lands on the group's partition, applied on commit, dropped on
abort, reported unstable meanwhile, and rebuilt the same way when a partition is
loaded from its log."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

from kt.broker.groups import CoordinatorSettings, GroupCoordinator
from kt.broker.groups.group import OffsetEntry
from kt.broker.groups.offsets_log import MemoryRecordStore, partition_for
from kt.protocol import ErrorCode as E

PARTITIONS = 5
GID = "g"
P = partition_for(GID, PARTITIONS)
TP = ("t", 0)
PID, EPOCH = 4000, 3


def run(test: Callable[[], Awaitable[None]]) -> None:
    asyncio.run(test())  # type: ignore[arg-type]


async def make(
    store: MemoryRecordStore | None = None,
) -> tuple[GroupCoordinator, MemoryRecordStore]:
    store = store or MemoryRecordStore(partitions=PARTITIONS)
    coord = GroupCoordinator(CoordinatorSettings(initial_rebalance_delay_ms=0), store)
    await coord.start()
    return coord, store


def offset(coord: GroupCoordinator, tp: tuple[str, int] = TP) -> int | None:
    error, found = coord.fetch_offsets(GID, [tp])
    assert error == E.NONE
    entry = found[0][2]
    return entry.offset if entry is not None else None


async def txn_commit(coord: GroupCoordinator, value: int, pid: int = PID) -> E:
    return await coord.commit_txn_offsets(
        GID, (pid, EPOCH), -1, "", None, {TP: OffsetEntry(value, -1, "", 1)}
    )


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
