"""The transaction coordinator against an in-memory `__transaction_state` and a fake
marker sender: the state machine, fencing, KIP-360 retries, markers retried until
written, loading and coordinator epochs, timeouts and expiry, the admin views."""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Awaitable, Callable

from kt.broker.groups.offsets_log import partition_for
from kt.broker.transactions.coordinator import TransactionCoordinator, TxnSettings
from kt.broker.transactions.markers import NO_LEADER, TxnMarker
from kt.broker.transactions.state_log import MemoryTxnRecordStore, replay
from kt.broker.transactions.state_manager import TransactionStateManager, now_ms
from kt.protocol import ErrorCode as E
from kt.protocol.coordinator_records import decode_transaction_log_record

PARTITIONS = 5
TID = "txn-a"
P = partition_for(TID, PARTITIONS)
TP = ("t", 0)
TP2 = ("t", 1)


def run(test: Callable[[], Awaitable[None]]) -> None:
    asyncio.run(test())  # type: ignore[arg-type]


class FakeSender:
    """Leaders per partition (default broker 1); answers per partition from
    `answers` (a list consumed in order, then NONE); records every marker."""

    def __init__(self) -> None:
        self.leaders: dict[tuple[str, int], int | None] = {}
        self.answers: dict[tuple[str, int], list[int]] = {}
        self.sent: list[tuple[int, TxnMarker]] = []
        self.down: set[int] = set()

    def leader_of(self, topic: str, partition: int) -> int | None:
        return self.leaders.get((topic, partition), 1)

    async def send(self, broker_id: int, marker: TxnMarker) -> dict[tuple[str, int], int]:
        self.sent.append((broker_id, marker))
        if broker_id in self.down:
            raise ConnectionError("down")
        out = {}
        for tp in marker.partitions:
            queue = self.answers.get(tp)
            out[tp] = queue.pop(0) if queue else int(E.NONE)
        return out

    def written(self, tp: tuple[str, int]) -> list[TxnMarker]:
        return [m for b, m in self.sent if tp in m.partitions and b not in self.down]


async def make(
    *, settings: TxnSettings | None = None, store: MemoryTxnRecordStore | None = None
) -> tuple[TransactionCoordinator, MemoryTxnRecordStore, FakeSender]:
    store = store or MemoryTxnRecordStore(partitions=PARTITIONS)
    store.created = True
    state = TransactionStateManager(store)
    sender = FakeSender()
    ids = itertools.count(1000)

    async def allocate() -> int:
        return next(ids)

    coord = TransactionCoordinator(state, sender, allocate, settings or TxnSettings())
    coord.marker_backoff_s = 0.001
    state.on_election(store.led_partitions())
    await state.wait_loaded()
    return coord, store, sender


async def settle(coord: TransactionCoordinator) -> None:
    for _ in range(200):
        if not coord._completions:
            return
        await asyncio.sleep(0.005)
    raise AssertionError("markers never completed")


def states(store: MemoryTxnRecordStore, tid: str = TID) -> list[str]:
    out = []
    for key, value in store.read(partition_for(tid, PARTITIONS)):
        rec = decode_transaction_log_record(key, value)
        if rec.transactional_id == tid:
            out.append(rec.value.state_name if rec.value else "TOMBSTONE")
    return out


async def begin(coord: TransactionCoordinator, tid: str = TID) -> tuple[int, int]:
    r = await coord.init_producer_id(tid, 60_000, None)
    assert r.error == E.NONE
    assert await coord.add_partitions(tid, r.producer_id, r.producer_epoch, [TP]) == E.NONE
    return r.producer_id, r.producer_epoch


def test_init_commit_cycle_writes_every_state_and_markers() -> None:
    async def t() -> None:
        coord, store, sender = await make()
        r = await coord.init_producer_id(TID, 60_000, None)
        assert (r.error, r.producer_id, r.producer_epoch) == (E.NONE, 1000, 0)
        pid, epoch = r.producer_id, r.producer_epoch
        assert await coord.add_partitions(TID, pid, epoch, [TP, TP2]) == E.NONE
        # Already in the transaction: nothing is written.
        assert await coord.add_partitions(TID, pid, epoch, [TP]) == E.NONE
        assert await coord.end_txn(TID, pid, epoch, True) == E.NONE
        await settle(coord)
        assert states(store) == ["EMPTY", "ONGOING", "PREPARE_COMMIT", "COMPLETE_COMMIT"]
        (broker, marker), = sender.sent  # fmt: skip
        assert broker == 1 and marker.committed and marker.producer_id == pid
        assert sorted(marker.partitions) == [TP, TP2] and marker.coordinator_epoch == 0
        # A retried EndTxn of a completed commit is fine; an abort of it is not.
        assert await coord.end_txn(TID, pid, epoch, True) == E.NONE
        assert await coord.end_txn(TID, pid, epoch, False) == E.INVALID_TXN_STATE
        _, d = coord.describe(TID)
        assert d is not None and d.state == "CompleteCommit" and d.partitions == ()
        # The next transaction starts from CompleteCommit.
        assert await coord.add_partitions(TID, pid, epoch, [TP]) == E.NONE
        assert await coord.end_txn(TID, pid, epoch, False) == E.NONE
        await settle(coord)
        assert states(store)[-2:] == ["PREPARE_ABORT", "COMPLETE_ABORT"]
        assert not sender.sent[-1][1].committed

    run(t)


def test_log_records_are_kafkas_value_v0() -> None:
    async def t() -> None:
        coord, store, _ = await make()
        pid, epoch = await begin(coord)
        records = list(store.read(P))
        empty = decode_transaction_log_record(*records[0])
        ongoing = decode_transaction_log_record(*records[1])
        assert empty.value is not None and ongoing.value is not None
        assert empty.value.version == 0 and empty.value.partitions is None
        assert ongoing.value.partitions == [("t", [0])]
        assert ongoing.value.transaction_timeout_ms == 60_000
        assert ongoing.value.start_timestamp_ms > 0
        assert (ongoing.value.producer_id, ongoing.value.producer_epoch) == (pid, epoch)

    run(t)


def test_errors_of_wrong_ids_epochs_and_states() -> None:
    async def t() -> None:
        coord, _, _ = await make()
        assert (await coord.init_producer_id(TID, 0, None)).error == E.INVALID_TRANSACTION_TIMEOUT
        too_long = coord.settings.max_timeout_ms + 1
        assert (await coord.init_producer_id(TID, too_long, None)).error == (
            E.INVALID_TRANSACTION_TIMEOUT
        )
        assert (await coord.init_producer_id("", 1000, None)).error == E.INVALID_REQUEST
        assert await coord.add_partitions("nope", 1, 0, [TP]) == E.INVALID_PRODUCER_ID_MAPPING
        pid, epoch = await begin(coord)
        assert await coord.add_partitions(TID, pid + 1, epoch, [TP]) == (
            E.INVALID_PRODUCER_ID_MAPPING
        )
        assert await coord.add_partitions(TID, pid, epoch + 1, [TP]) == E.PRODUCER_FENCED
        assert await coord.end_txn(TID, pid, epoch - 1, True) == E.PRODUCER_FENCED
        assert await coord.end_txn(TID, pid, epoch, True) == E.NONE
        # Until the markers are written the transaction is completing.
        assert await coord.add_partitions(TID, pid, epoch, [TP]) == E.CONCURRENT_TRANSACTIONS
        assert await coord.end_txn(TID, pid, epoch, True) == E.CONCURRENT_TRANSACTIONS
        assert await coord.end_txn(TID, pid, epoch, False) == E.INVALID_TXN_STATE
        assert (await coord.init_producer_id(TID, 1000, None)).error == E.CONCURRENT_TRANSACTIONS
        await settle(coord)
        # Ending a transaction that never started.
        r = await coord.init_producer_id(TID, 1000, None)
        assert await coord.end_txn(TID, r.producer_id, r.producer_epoch, True) == (
            E.INVALID_TXN_STATE
        )

    run(t)


def test_new_producer_fences_an_ongoing_transaction() -> None:
    async def t() -> None:
        coord, store, sender = await make()
        pid, epoch = await begin(coord)
        # The new producer: the old transaction is aborted first, with a fenced epoch.
        r = await coord.init_producer_id(TID, 60_000, None)
        assert r.error == E.CONCURRENT_TRANSACTIONS
        await settle(coord)
        (_, marker), = sender.sent  # fmt: skip
        assert not marker.committed and marker.producer_epoch == epoch + 1
        r = await coord.init_producer_id(TID, 60_000, None)
        assert (r.error, r.producer_id, r.producer_epoch) == (E.NONE, pid, epoch + 2)
        assert states(store) == ["EMPTY", "ONGOING", "PREPARE_ABORT", "COMPLETE_ABORT", "EMPTY"]
        # The zombie is fenced everywhere.
        assert await coord.end_txn(TID, pid, epoch, True) == E.PRODUCER_FENCED
        assert await coord.add_partitions(TID, pid, epoch, [TP]) == E.PRODUCER_FENCED

    run(t)


def test_kip360_epoch_bump_and_retry() -> None:
    async def t() -> None:
        coord, _, _ = await make()
        r0 = await coord.init_producer_id(TID, 60_000, None)
        pid = r0.producer_id
        r1 = await coord.init_producer_id(TID, 60_000, (pid, 0))
        assert (r1.error, r1.producer_id, r1.producer_epoch) == (E.NONE, pid, 1)
        # The answer was lost: the same request again gets the same epoch.
        r2 = await coord.init_producer_id(TID, 60_000, (pid, 0))
        assert (r2.error, r2.producer_epoch) == (E.NONE, 1)
        # An epoch that is neither current nor previous is a zombie.
        assert (await coord.init_producer_id(TID, 60_000, (pid, 7))).error == E.PRODUCER_FENCED
        assert (await coord.init_producer_id(TID, 60_000, (pid + 5, 1))).error == (
            E.PRODUCER_FENCED
        )

    run(t)


def test_exhausted_epoch_rotates_the_producer_id() -> None:
    async def t() -> None:
        coord, _store, _ = await make()
        r = await coord.init_producer_id(TID, 60_000, None)
        _, _, txn = coord.state.get(TID)
        assert txn is not None
        txn.producer_epoch = 32766
        r2 = await coord.init_producer_id(TID, 60_000, (r.producer_id, 32766))
        assert (r2.error, r2.producer_epoch) == (E.NONE, 0)
        assert r2.producer_id != r.producer_id
        assert (txn.last_producer_id, txn.last_producer_epoch) == (r.producer_id, 32766)
        # A KIP-360 retry of the rotation (its answer was lost) gets the same id and epoch.
        r3 = await coord.init_producer_id(TID, 60_000, (r.producer_id, 32766))
        assert (r3.error, r3.producer_id, r3.producer_epoch) == (E.NONE, r2.producer_id, 0)
        # Without an expected epoch, an exhausted epoch rotates too.
        txn.producer_epoch = 32767
        r4 = await coord.init_producer_id(TID, 60_000, None)
        assert r4.error == E.NONE and r4.producer_id not in (r.producer_id, r2.producer_id)

    run(t)


def test_markers_are_retried_until_written() -> None:
    async def t() -> None:
        coord, store, sender = await make()
        pid, epoch = await begin(coord)
        assert await coord.add_partitions(TID, pid, epoch, [TP2]) == E.NONE
        sender.answers[TP] = [int(E.NOT_LEADER_OR_FOLLOWER), int(E.NOT_ENOUGH_REPLICAS)]
        sender.leaders[TP2] = NO_LEADER
        assert await coord.end_txn(TID, pid, epoch, True) == E.NONE
        await asyncio.sleep(0.05)
        assert states(store)[-1] == "PREPARE_COMMIT"  # TP2 has no leader yet
        sender.leaders[TP2] = 2
        sender.down.add(2)
        await asyncio.sleep(0.05)
        assert states(store)[-1] == "PREPARE_COMMIT"  # broker 2 does not answer
        sender.down.clear()
        await settle(coord)
        assert states(store)[-1] == "COMPLETE_COMMIT"
        assert len(sender.written(TP)) == 3 and sender.written(TP2)[-1].partitions == (TP2,)

    run(t)


def test_partition_of_a_deleted_topic_is_dropped() -> None:
    async def t() -> None:
        coord, store, sender = await make()
        pid, epoch = await begin(coord)
        sender.leaders[TP] = None
        assert await coord.end_txn(TID, pid, epoch, False) == E.NONE
        await settle(coord)
        assert states(store)[-1] == "COMPLETE_ABORT" and not sender.sent

    run(t)


def test_fenced_markers_stop_the_completion() -> None:
    async def t() -> None:
        coord, store, sender = await make()
        pid, epoch = await begin(coord)
        sender.answers[TP] = [int(E.TRANSACTION_COORDINATOR_FENCED)]
        assert await coord.end_txn(TID, pid, epoch, True) == E.NONE
        await settle(coord)
        assert states(store)[-1] == "PREPARE_COMMIT"

    run(t)


def test_failed_write_leaves_the_state_unchanged() -> None:
    async def t() -> None:
        coord, store, _ = await make()
        pid, epoch = await begin(coord)
        store.fail, store.fail_code = True, E.NOT_ENOUGH_REPLICAS
        assert await coord.end_txn(TID, pid, epoch, True) == E.COORDINATOR_NOT_AVAILABLE
        store.fail_code = E.NOT_LEADER_OR_FOLLOWER
        assert await coord.end_txn(TID, pid, epoch, True) == E.NOT_COORDINATOR
        _, d = coord.describe(TID)
        assert d is not None and d.state == "Ongoing"
        store.fail = False
        assert await coord.end_txn(TID, pid, epoch, True) == E.NONE

    run(t)


def test_replication_is_awaited_before_the_state_changes() -> None:
    async def t() -> None:
        coord, store, _ = await make()
        pid, epoch = await begin(coord)
        store.hold = True
        end = asyncio.ensure_future(coord.end_txn(TID, pid, epoch, True))
        await asyncio.sleep(0.01)
        assert not end.done()
        # Meanwhile the id is busy.
        assert await coord.add_partitions(TID, pid, epoch, [TP2]) == E.CONCURRENT_TRANSACTIONS
        _, d = coord.describe(TID)
        assert d is not None and d.state == "Ongoing"
        store.release(E.REQUEST_TIMED_OUT)
        assert await end == E.COORDINATOR_NOT_AVAILABLE
        _, d = coord.describe(TID)
        assert d is not None and d.state == "Ongoing"

    run(t)


def test_not_coordinator_and_loading() -> None:
    async def t() -> None:
        store = MemoryTxnRecordStore(partitions=PARTITIONS)
        store.leaders = set(range(PARTITIONS)) - {P}
        coord, store, _ = await make(store=store)
        assert (await coord.init_producer_id(TID, 1000, None)).error == E.NOT_COORDINATOR
        assert coord.describe(TID)[0] == E.NOT_COORDINATOR
        store.leaders.add(P)
        coord.state.on_election([P])
        assert (await coord.init_producer_id(TID, 1000, None)).error == (
            E.COORDINATOR_LOAD_IN_PROGRESS
        )
        assert coord.list_transactions([], [])[0] == E.COORDINATOR_LOAD_IN_PROGRESS
        await coord.state.wait_loaded()
        assert (await coord.init_producer_id(TID, 1000, None)).error == E.NONE

    run(t)


def test_new_coordinator_loads_and_finishes_a_completing_transaction() -> None:
    async def t() -> None:
        coord, store, sender = await make()
        pid, epoch = await begin(coord)
        sender.leaders[TP] = NO_LEADER  # the markers cannot be written yet
        assert await coord.end_txn(TID, pid, epoch, True) == E.NONE
        await asyncio.sleep(0.01)
        # The coordinator moves: the old one resigns, a new one (next epoch) loads.
        coord.state.on_resignation([P])
        assert not coord._completions
        store.epochs[P] = 5
        coord2, _, sender2 = await make(store=store)
        _, d = coord2.describe(TID)
        assert d is not None and d.state == "PrepareCommit"
        await settle(coord2)
        assert states(store)[-1] == "COMPLETE_COMMIT"
        (_, marker), = sender2.sent  # fmt: skip
        assert marker.coordinator_epoch == 5 and marker.committed
        # The old coordinator's view is gone.
        assert coord.describe(TID)[0] == E.NOT_COORDINATOR

    run(t)


def test_write_finishing_after_reelection_is_not_applied() -> None:
    async def t() -> None:
        coord, store, _ = await make()
        pid, epoch = await begin(coord)
        store.hold = True
        end = asyncio.ensure_future(coord.end_txn(TID, pid, epoch, True))
        await asyncio.sleep(0.01)
        store.epochs[P] = 1
        coord.state.on_election([P])  # re-elected with a newer epoch: reloads
        store.release()
        assert await end == E.NOT_COORDINATOR
        await coord.state.wait_loaded()

    run(t)


def test_timed_out_transaction_is_aborted_with_a_fenced_epoch() -> None:
    async def t() -> None:
        coord, store, sender = await make()
        r = await coord.init_producer_id(TID, 100, None)
        pid, epoch = r.producer_id, r.producer_epoch
        assert await coord.add_partitions(TID, pid, epoch, [TP]) == E.NONE
        _, _, txn = coord.state.get(TID)
        assert txn is not None
        assert await coord.abort_timed_out(now=txn.start_ms + 50) == 0
        assert await coord.abort_timed_out(now=txn.start_ms + 101) == 1
        await settle(coord)
        assert states(store)[-2:] == ["PREPARE_ABORT", "COMPLETE_ABORT"]
        assert sender.sent[-1][1].producer_epoch == epoch + 1
        # The producer that let it time out is fenced.
        assert await coord.end_txn(TID, pid, epoch, True) == E.PRODUCER_FENCED

    run(t)


def test_expired_ids_are_removed_with_a_tombstone() -> None:
    async def t() -> None:
        settings = TxnSettings(expiration_ms=1000)
        coord, store, _ = await make(settings=settings)
        _pid, _epoch = await begin(coord)
        r = await coord.init_producer_id("idle", 60_000, None)
        _, _, idle = coord.state.get("idle")
        assert idle is not None
        later = idle.last_update_ms + 1000
        # Ongoing transactions do not expire; idle ids do.
        assert await coord.expire_ids(now=later) == 1
        assert coord.describe("idle")[0] == E.TRANSACTIONAL_ID_NOT_FOUND
        assert coord.describe(TID)[0] == E.NONE
        assert states(store, "idle")[-1] == "TOMBSTONE"
        # A reload agrees.
        txns, _ = replay(store.read(partition_for("idle", PARTITIONS)))
        assert "idle" not in txns and r.producer_id >= 0

    run(t)


def test_list_and_describe() -> None:
    async def t() -> None:
        coord, _, _ = await make()
        pid, _ = await begin(coord)
        await coord.init_producer_id("other", 60_000, None)
        error, unknown, found = coord.list_transactions([], [])
        assert error == E.NONE and unknown == []
        assert [(d.transactional_id, d.state) for d in found] == [
            ("other", "Empty"), (TID, "Ongoing")
        ]  # fmt: skip
        _, unknown, found = coord.list_transactions(["Ongoing", "Bogus"], [])
        assert unknown == ["Bogus"] and [d.transactional_id for d in found] == [TID]
        _, _, found = coord.list_transactions([], [pid])
        assert [d.transactional_id for d in found] == [TID]
        # Running longer than a day: none (Kafka compares now - start time).
        _, _, found = coord.list_transactions(["Ongoing"], [], duration_ms=86_400_000)
        assert found == []
        _, _, found = coord.list_transactions(["Ongoing"], [], duration_ms=0, now=now_ms() + 5)
        assert [d.transactional_id for d in found] == [TID]
        error, d = coord.describe(TID)
        assert error == E.NONE and d is not None
        assert (d.producer_id, d.timeout_ms, d.partitions) == (pid, 60_000, (TP,))
        assert coord.describe("missing")[0] == E.TRANSACTIONAL_ID_NOT_FOUND

    run(t)


def test_verify_only() -> None:
    async def t() -> None:
        coord, _, _ = await make()
        pid, epoch = await begin(coord)
        assert coord.verify_partitions(TID, pid, epoch, [TP, TP2]) == {
            TP: E.NONE, TP2: E.INVALID_TXN_STATE
        }  # fmt: skip
        assert coord.verify_partitions(TID, pid, epoch + 1, [TP]) == {TP: E.PRODUCER_FENCED}
        assert coord.verify_partitions("x", pid, epoch, [TP]) == {TP: E.INVALID_PRODUCER_ID_MAPPING}

    run(t)
