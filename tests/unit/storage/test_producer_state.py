"""ProducerStateManager: Kafka's idempotent-producer rules, snapshots and replay.

Sequence and epoch rules follow ProducerAppendInfo.checkSequence/checkProducerEpoch
and UnifiedLog.analyzeAndValidateProducerState; replaying the real Kafka fixtures
must rebuild exactly what their .snapshot files say; a hypothesis model drives
random produce/retry/epoch-bump/restart sequences through a real PartitionLog.
"""

from __future__ import annotations

import tempfile
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from kt.storage import record_batch as v2
from kt.storage.file_records import LogBatch, open_file_records
from kt.storage.log import AppendOrigin, PartitionLog
from kt.storage.producer_snapshot import (
    ProducerSnapshotEntry,
    read_producer_snapshot,
    snapshot_file_name,
    write_producer_snapshot,
)
from kt.storage.producer_state import (
    INT32_MAX,
    BatchMetadata,
    CheckOutcome,
    CompletedTxn,
    ProducerDescription,
    ProducerStateManager,
    decrement_sequence,
    in_sequence,
)
from kt.storage.record_batch import RecordSpec, build_batch

T0 = 1_700_000_000_000
PID = 1000


def batch_bytes(
    pid: int = PID,
    epoch: int = 0,
    seq: int = 0,
    count: int = 1,
    ts: int = T0,
    *,
    transactional: bool = False,
    control: bool = False,
) -> bytes:
    records = [RecordSpec(b"k", b"v%d" % i, timestamp=ts + i) for i in range(count)]
    return build_batch(
        records,
        producer_id=pid,
        producer_epoch=epoch,
        base_sequence=seq,
        is_transactional=transactional,
        is_control=control,
    )


def hdr(
    pid: int = PID,
    epoch: int = 0,
    seq: int = 0,
    count: int = 1,
    ts: int = T0,
    *,
    transactional: bool = False,
    control: bool = False,
) -> v2.BatchHeader:
    data = batch_bytes(pid, epoch, seq, count, ts, transactional=transactional, control=control)
    return v2.parse_header(data)


class Writer:
    """Checks and applies batches the way the broker's produce path will."""

    def __init__(self, psm: ProducerStateManager, start: int = 0) -> None:
        self.psm = psm
        self.next_offset = start

    def produce(self, h: v2.BatchHeader) -> CheckOutcome:
        result = self.psm.check(h)
        if result.ok:
            first = self.next_offset
            self.psm.update(h, first, first + h.last_offset_delta, h.max_timestamp)
            self.next_offset = first + h.last_offset_delta + 1
        return result.outcome


class MemoryLog:
    """A log in memory: batches get consecutive offsets, read back as LogBatch."""

    def __init__(self) -> None:
        self.batches: list[LogBatch] = []
        self.log_end_offset = 0

    def append(self, data: bytes) -> tuple[int, int]:
        buf = bytearray(data)
        v2.set_base_offset(buf, self.log_end_offset)
        header = v2.parse_header(buf)
        self.batches.append(LogBatch(0, bytes(buf), header, None))
        self.log_end_offset = header.next_offset
        return header.base_offset, header.last_offset

    def iter_batches(self, start: int = 0) -> Iterator[LogBatch]:
        return (b for b in self.batches if b.last_offset >= start)


@pytest.fixture
def psm(tmp_path: Path) -> ProducerStateManager:
    return ProducerStateManager(tmp_path)


# --- sequence arithmetic -------------------------------------------------------------


def test_sequence_helpers_wrap() -> None:
    assert in_sequence(4, 5)
    assert in_sequence(INT32_MAX, 0)
    assert not in_sequence(INT32_MAX, 1)
    assert not in_sequence(5, 5)
    assert in_sequence(-1, 0)
    assert decrement_sequence(2, 4) == INT32_MAX - 1
    assert decrement_sequence(10, 3) == 7
    for seq in (0, 1, INT32_MAX - 2, INT32_MAX):
        for delta in (0, 1, 5):
            assert decrement_sequence(v2.increment_sequence(seq, delta), delta) == seq
    meta = BatchMetadata(last_seq=1, last_offset=10, offset_delta=3, timestamp=5)
    assert (meta.first_seq, meta.first_offset) == (INT32_MAX - 1, 7)


# --- the produce checks ----------------------------------------------------------------


def test_non_idempotent_batches_always_pass(psm: ProducerStateManager) -> None:
    h = hdr(pid=-1, epoch=-1, seq=-1)
    assert psm.check(h).ok
    psm.update(h, 0, 0, T0)
    assert psm.check(h).ok
    assert dict(psm.producers) == {}
    assert psm.map_end_offset == 1


def test_unknown_producer_accepts_any_sequence(psm: ProducerStateManager) -> None:
    # Kafka >= 2.5 (KIP-360): no state means no epoch to compare with, so any
    # sequence is accepted instead of UNKNOWN_PRODUCER_ID.
    w = Writer(psm)
    assert w.produce(hdr(seq=42)) is CheckOutcome.OK
    assert w.produce(hdr(seq=43)) is CheckOutcome.OK
    assert w.produce(hdr(seq=45)) is CheckOutcome.OUT_OF_ORDER_SEQUENCE
    assert w.produce(hdr(pid=7, epoch=3, seq=1_000_000)) is CheckOutcome.OK


def test_in_epoch_sequences_must_follow(psm: ProducerStateManager) -> None:
    w = Writer(psm)
    assert w.produce(hdr(seq=0, count=3)) is CheckOutcome.OK
    assert w.produce(hdr(seq=3, count=2)) is CheckOutcome.OK
    gap = psm.check(hdr(seq=6))
    assert gap.outcome is CheckOutcome.OUT_OF_ORDER_SEQUENCE
    assert gap.error_code == 45
    assert "6 (incoming seq. number), 4 (current end sequence number)" in gap.message
    # Overlapping a written batch without matching its range exactly is not a retry.
    assert psm.check(hdr(seq=3, count=1)).outcome is CheckOutcome.OUT_OF_ORDER_SEQUENCE
    assert psm.check(hdr(seq=4, count=1)).outcome is CheckOutcome.OUT_OF_ORDER_SEQUENCE
    assert w.produce(hdr(seq=5)) is CheckOutcome.OK
    entry = psm.last_entry(PID)
    assert entry is not None
    assert (entry.first_seq, entry.last_seq, entry.last_data_offset) == (0, 5, 5)


def test_sequence_wraps_at_int_max(psm: ProducerStateManager) -> None:
    w = Writer(psm)
    assert w.produce(hdr(seq=INT32_MAX - 1, count=3)) is CheckOutcome.OK  # MAX-1, MAX, 0
    entry = psm.last_entry(PID)
    assert entry is not None and entry.last_seq == 0
    assert psm.check(hdr(seq=0)).outcome is CheckOutcome.OUT_OF_ORDER_SEQUENCE
    assert w.produce(hdr(seq=1)) is CheckOutcome.OK
    # The batch spanning the wrap is still recognised as a duplicate.
    dup = psm.check(hdr(seq=INT32_MAX - 1, count=3))
    assert dup.outcome is CheckOutcome.DUPLICATE
    assert (dup.base_offset, dup.last_offset) == (0, 2)
    # A batch ending exactly at Int.MaxValue is followed by 0.
    assert w.produce(hdr(pid=2, seq=INT32_MAX - 1)) is CheckOutcome.OK
    assert w.produce(hdr(pid=2, seq=INT32_MAX)) is CheckOutcome.OK
    assert psm.check(hdr(pid=2, seq=INT32_MAX + 1 - 2**31)).ok  # 0
    assert psm.check(hdr(pid=2, seq=1)).outcome is CheckOutcome.OUT_OF_ORDER_SEQUENCE


def test_epoch_bump_and_fencing(psm: ProducerStateManager) -> None:
    w = Writer(psm)
    for s in range(3):
        assert w.produce(hdr(epoch=0, seq=s)) is CheckOutcome.OK
    # A new epoch must start at sequence 0.
    bad = psm.check(hdr(epoch=1, seq=3))
    assert bad.outcome is CheckOutcome.OUT_OF_ORDER_SEQUENCE
    assert "new epoch" in bad.message
    assert w.produce(hdr(epoch=1, seq=0)) is CheckOutcome.OK
    # Epochs may jump, still from 0.
    assert psm.check(hdr(epoch=5, seq=0)).ok
    # The old epoch is fenced, even for an exact retry of one of its batches.
    stale = psm.check(hdr(epoch=0, seq=2))
    assert stale.outcome is CheckOutcome.INVALID_PRODUCER_EPOCH
    assert stale.error_code == 47
    assert psm.check(hdr(epoch=0, seq=3)).outcome is CheckOutcome.INVALID_PRODUCER_EPOCH
    entry = psm.last_entry(PID)
    assert entry is not None
    assert entry.producer_epoch == 1 and len(entry.batches) == 1  # old epoch forgotten
    assert psm.check(hdr(epoch=1, seq=1)).ok


def test_duplicates_of_last_five_batches_return_original_offsets(
    psm: ProducerStateManager,
) -> None:
    w = Writer(psm, start=100)
    sent = []
    for i in range(6):
        h = hdr(seq=2 * i, count=2, ts=T0 + 10 * i)
        assert w.produce(h) is CheckOutcome.OK
        sent.append(h)
    entry = psm.last_entry(PID)
    assert entry is not None and len(entry.batches) == 5
    for i in range(1, 6):
        r = psm.check(sent[i])
        assert r.outcome is CheckOutcome.DUPLICATE
        assert r.error_code == 0 and not r.ok
        assert (r.base_offset, r.last_offset) == (100 + 2 * i, 101 + 2 * i)
        assert r.timestamp == T0 + 10 * i + 1  # the batch's max timestamp
    # The sixth-oldest has been forgotten: Kafka sees a sequence gap.
    assert psm.check(sent[0]).outcome is CheckOutcome.OUT_OF_ORDER_SEQUENCE
    assert psm.check(hdr(seq=12)).ok
    with pytest.raises(ValueError):
        _ = psm.check(hdr(seq=12)).base_offset


def test_request_with_several_batches(psm: ProducerStateManager) -> None:
    w = Writer(psm)
    assert w.produce(hdr(seq=0)) is CheckOutcome.OK
    # Later batches are checked against the earlier ones of the same request.
    assert psm.check_batches([hdr(seq=1), hdr(seq=2, count=2), hdr(pid=5, seq=9)]).ok
    r = psm.check_batches([hdr(seq=1), hdr(seq=1)])
    assert r.outcome is CheckOutcome.OUT_OF_ORDER_SEQUENCE and r.batch_index == 1
    r = psm.check_batches([hdr(seq=1), hdr(seq=0)])
    assert r.outcome is CheckOutcome.DUPLICATE and r.batch_index == 1
    assert r.base_offset == 0
    r = psm.check_batches([hdr(epoch=1, seq=0), hdr(epoch=0, seq=1)])
    assert r.outcome is CheckOutcome.INVALID_PRODUCER_EPOCH and r.batch_index == 1
    # Kafka quirk kept: without prior state (no epoch), the batches of one request
    # are not sequence-checked against each other either.
    assert psm.check_batches([hdr(pid=6, seq=0), hdr(pid=6, seq=7)]).ok
    # check changes nothing
    entry = psm.last_entry(PID)
    assert entry is not None and entry.last_seq == 0 and entry.producer_epoch == 0


def test_on_append_assigns_per_batch_offsets(psm: ProducerStateManager) -> None:
    hs = [hdr(seq=0, count=2), hdr(pid=9, seq=0, count=3), hdr(seq=2)]
    assert psm.check_batches(hs).ok
    psm.on_append(hs, first_offset=10, log_append_time=T0 + 99)
    a, b = psm.last_entry(PID), psm.last_entry(9)
    assert a is not None and b is not None
    assert [(m.first_offset, m.last_offset) for m in a.batches] == [(10, 11), (15, 15)]
    assert [(m.first_offset, m.last_offset, m.timestamp) for m in b.batches] == [(12, 14, T0 + 99)]
    assert psm.map_end_offset == 16


def test_validator_rules(psm: ProducerStateManager) -> None:
    r = psm.check(hdr(seq=-1))
    assert r.outcome is CheckOutcome.INVALID_RECORD and r.error_code == 87
    r = psm.check_batches([hdr(seq=0), hdr(seq=1, control=True)])
    assert r.outcome is CheckOutcome.INVALID_RECORD and r.batch_index == 1


def test_transaction_state(psm: ProducerStateManager) -> None:
    w = Writer(psm, start=20)
    assert w.produce(hdr(seq=0, transactional=True)) is CheckOutcome.OK
    assert w.produce(hdr(seq=1, transactional=True)) is CheckOutcome.OK
    r = psm.check(hdr(seq=2))
    assert r.outcome is CheckOutcome.INVALID_TXN_STATE and r.error_code == 48
    assert psm.describe_producers() == [ProducerDescription(PID, 0, 1, T0, -1, 20)]
    done = psm.apply_end_txn_marker(PID, 0, 7, offset=22, timestamp=T0 + 5)
    assert done == CompletedTxn(PID, 20, 22, is_aborted=False)
    assert psm.describe_producers() == [ProducerDescription(PID, 0, 1, T0 + 5, 7, -1)]
    assert psm.check(hdr(seq=2)).ok
    assert psm.map_end_offset == 23


# --- snapshots -------------------------------------------------------------------------


def test_snapshot_layout_holds_last_batch_per_producer(tmp_path: Path) -> None:
    psm = ProducerStateManager(tmp_path)
    w = Writer(psm)
    w.produce(hdr(seq=0, count=2, ts=T0))
    w.produce(hdr(seq=2, count=3, ts=T0 + 10))
    w.produce(hdr(pid=3, epoch=2, seq=7, ts=T0 + 20, transactional=True))
    path = psm.take_snapshot()
    assert path == tmp_path / "00000000000000000006.snapshot"
    snap = read_producer_snapshot(path)
    assert snap.offset == 6
    assert snap.entries == [
        ProducerSnapshotEntry(3, 2, 7, 5, 0, T0 + 20, -1, 5),
        ProducerSnapshotEntry(PID, 0, 4, 4, 2, T0 + 12, -1, -1),
    ]
    # Nothing new: no second snapshot (Kafka's lastMapOffset > lastSnapOffset rule).
    assert psm.take_snapshot() is None
    assert psm.snapshot_offsets() == [6]


def test_load_picks_latest_snapshot_and_deletes_out_of_range(tmp_path: Path) -> None:
    for off, seq in ((5, 4), (9, 8), (12, 11)):
        write_producer_snapshot(
            tmp_path / snapshot_file_name(off),
            [ProducerSnapshotEntry(PID, 0, seq, off - 1, 0, T0, -1, -1)],
        )
    psm = ProducerStateManager(tmp_path)
    assert psm.load(0, 10, now_ms=T0) == 9
    assert psm.map_end_offset == 9
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        snapshot_file_name(5),
        snapshot_file_name(9),
    ]
    entry = psm.last_entry(PID)
    assert entry is not None and entry.last_seq == 8 and entry.last_data_offset == 8
    # Only the last batch survives a snapshot: it is still recognised as a retry.
    dup = psm.check(hdr(seq=8))
    assert dup.outcome is CheckOutcome.DUPLICATE and dup.base_offset == 8
    assert psm.check(hdr(seq=9)).ok
    # Kafka deletes snapshots at or below the log start offset too.
    assert psm.load(5, 10, now_ms=T0) == 9
    assert psm.snapshot_offsets() == [9]
    assert not (tmp_path / snapshot_file_name(5)).exists()


def test_corrupt_snapshot_is_deleted_and_older_one_used(tmp_path: Path) -> None:
    write_producer_snapshot(
        tmp_path / snapshot_file_name(4), [ProducerSnapshotEntry(PID, 0, 3, 3, 0, T0, -1, -1)]
    )
    good = tmp_path / snapshot_file_name(8)
    write_producer_snapshot(good, [ProducerSnapshotEntry(PID, 0, 7, 7, 0, T0, -1, -1)])
    data = bytearray(good.read_bytes())
    data[-1] ^= 0xFF
    good.write_bytes(bytes(data))
    (tmp_path / snapshot_file_name(9)).write_bytes(b"\x00")  # truncated
    psm = ProducerStateManager(tmp_path)
    assert psm.load(0, 20, now_ms=T0) == 4
    assert psm.snapshot_offsets() == [4]
    assert not good.exists()
    entry = psm.last_entry(PID)
    assert entry is not None and entry.last_seq == 3


def test_load_without_snapshot_replays_from_log_start(tmp_path: Path) -> None:
    psm = ProducerStateManager(tmp_path)
    assert psm.load(7, 30) == 7
    assert dict(psm.producers) == {}


def test_expiry(tmp_path: Path) -> None:
    psm = ProducerStateManager(tmp_path, producer_id_expiration_ms=1000)
    w = Writer(psm)
    w.produce(hdr(pid=1, ts=T0))
    w.produce(hdr(pid=2, ts=T0 + 500))
    w.produce(hdr(pid=3, ts=T0, transactional=True))  # open transactions never expire
    psm.take_snapshot()
    assert psm.remove_expired(T0 + 999) == []
    assert psm.remove_expired(T0 + 1000) == [1]
    assert sorted(psm.producers) == [2, 3]
    reloaded = ProducerStateManager(tmp_path, producer_id_expiration_ms=1000)
    reloaded.load(0, 3, now_ms=T0 + 1500)
    assert sorted(reloaded.producers) == [3]


def test_snapshot_housekeeping(tmp_path: Path) -> None:
    for off in (0, 10, 20, 25, 30):
        write_producer_snapshot(tmp_path / snapshot_file_name(off), [])
    psm = ProducerStateManager(tmp_path)
    psm.delete_snapshots_below(20)
    assert psm.snapshot_offsets() == [20, 25, 30]
    # Strays are those matching no segment; only the newest stray past the last
    # segment survives.
    psm.remove_stray_snapshots([0, 20, 25])
    assert psm.snapshot_offsets() == [20, 25, 30]
    psm.remove_stray_snapshots([0, 20, 30])
    assert psm.snapshot_offsets() == [20, 30]
    psm.truncate_fully_and_start_at(50)
    assert psm.snapshot_offsets() == [] and list(tmp_path.iterdir()) == []
    assert psm.map_end_offset == 50


def test_truncate_and_reload(tmp_path: Path) -> None:
    psm = ProducerStateManager(tmp_path)
    w = Writer(psm)
    w.produce(hdr(seq=0))
    w.produce(hdr(seq=1))
    psm.take_snapshot()  # at 2
    w.produce(hdr(seq=2))
    w.produce(hdr(seq=3))
    psm.take_snapshot()  # at 4
    # Same end offset: the state is kept, only offsets move.
    assert psm.truncate_and_reload(0, 4, now_ms=T0) == 4
    entry = psm.last_entry(PID)
    assert entry is not None and entry.last_seq == 3
    # The log lost offsets 3 and 4: reload from the snapshot at 2.
    assert psm.truncate_and_reload(0, 3, now_ms=T0) == 2
    assert psm.snapshot_offsets() == [2]
    entry = psm.last_entry(PID)
    assert entry is not None and entry.last_seq == 1
    psm.on_log_start_offset_incremented(40)
    assert psm.map_end_offset == 40


# --- replaying real Kafka logs -------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "snapshot_offset"), [("tenitems-0", 9), ("quickstart-events-0", 3)]
)
def test_replay_real_kafka_log_matches_its_snapshot(
    fixture_copy: Callable[[str], Path], tmp_path: Path, name: str, snapshot_offset: int
) -> None:
    src = fixture_copy(name)
    expected = read_producer_snapshot(src / snapshot_file_name(snapshot_offset))
    records, f = open_file_records(src / "00000000000000000000.log")
    with f:
        batches = [b for b in records.batches() if isinstance(b, LogBatch)]
    assert batches[-1].next_offset == snapshot_offset
    state_dir = tmp_path / "state"
    state_dir.mkdir()
    psm = ProducerStateManager(state_dir)
    assert psm.load(0, snapshot_offset) == 0
    for batch in batches:
        psm.replay(batch)
    assert psm.map_end_offset == snapshot_offset
    assert sorted(psm.snapshot_entries()) == sorted(expected.entries)
    path = psm.take_snapshot()
    assert path is not None and path.name == snapshot_file_name(snapshot_offset)
    assert sorted(read_producer_snapshot(path).entries) == sorted(expected.entries)

    # Kafka's own snapshot loads into the same state, with nothing left to replay.
    newest = max(e.timestamp for e in expected.entries)
    loaded = ProducerStateManager(src)
    assert loaded.load(0, snapshot_offset, now_ms=newest) == snapshot_offset
    assert sorted(loaded.snapshot_entries()) == sorted(expected.entries)
    # A client retrying its last batch after the restart gets the old offsets back.
    for e in expected.entries:
        dup = loaded.check(hdr(e.producer_id, e.epoch, e.last_sequence))
        assert dup.outcome is CheckOutcome.DUPLICATE
        assert (dup.base_offset, dup.timestamp) == (e.last_offset, e.timestamp)
        assert loaded.check(hdr(e.producer_id, e.epoch, e.last_sequence + 1)).ok
        assert (
            loaded.check(hdr(e.producer_id, e.epoch, e.last_sequence - 1)).outcome
            is CheckOutcome.OUT_OF_ORDER_SEQUENCE
            or e.last_sequence == 0
        )
    # Kafka's defaults expire them a day after their last write.
    assert ProducerStateManager(src).load(0, snapshot_offset) == snapshot_offset


def test_partition_log_round_trip(tmp_path: Path) -> None:
    """The broker's path: check, append_as_leader, on_append; restart: load, replay
    PartitionLog.iter_batches, with a transaction closed by a marker."""
    d = tmp_path / "log"
    log = PartitionLog.open(d)
    psm = ProducerStateManager(d)
    psm.load(log.log_start_offset, log.log_end_offset)
    try:
        for data in (
            batch_bytes(seq=0, count=2),
            batch_bytes(pid=5, seq=0, transactional=True),
            batch_bytes(seq=2),
        ):
            h = v2.parse_header(data)
            assert psm.check(h).ok
            res = log.append_as_leader(data, 0, now_ms=T0)
            psm.on_append([h], res.first_offset, res.log_append_time)
        psm.take_snapshot(log.log_end_offset)
        marker = v2.build_end_txn_marker(
            commit=True, producer_id=5, producer_epoch=0, coordinator_epoch=3, timestamp=T0 + 9
        )
        log.append_as_leader(marker, 0, origin=AppendOrigin.COORDINATOR)
        dup = psm.check(hdr(seq=0, count=2))
        assert (dup.outcome, dup.base_offset, dup.last_offset) == (CheckOutcome.DUPLICATE, 0, 1)

        restarted = ProducerStateManager(d)
        start = restarted.load(log.log_start_offset, log.log_end_offset, now_ms=T0)
        assert start == 4
        for batch in log.iter_batches(start):
            restarted.replay(batch)
        assert restarted.map_end_offset == log.log_end_offset == 5
        assert restarted.describe_producers() == [
            ProducerDescription(5, 0, 0, T0 + 9, 3, -1),
            ProducerDescription(PID, 0, 2, T0, -1, -1),
        ]
    finally:
        log.close()


def test_replay_rebuilds_transactions_from_markers(tmp_path: Path) -> None:
    log = MemoryLog()
    log.append(batch_bytes(seq=0, transactional=True))
    log.append(batch_bytes(pid=5, seq=0, transactional=True))
    log.append(
        v2.build_end_txn_marker(
            commit=False, producer_id=PID, producer_epoch=0, coordinator_epoch=3, timestamp=T0 + 9
        )
    )
    psm = ProducerStateManager(tmp_path)
    start = psm.load(0, log.log_end_offset, now_ms=T0)
    for batch in log.iter_batches(start):
        psm.replay(batch)
    assert psm.describe_producers() == [
        ProducerDescription(5, 0, 0, T0, -1, 1),
        ProducerDescription(PID, 0, 0, T0 + 9, 3, -1),
    ]
    assert psm.map_end_offset == 3


# --- random produce / retry sequences against a model ------------------------------


@dataclass
class ModelProducer:
    epoch: int
    batches: deque[tuple[int, int, int, int, int]] = field(default_factory=lambda: deque(maxlen=5))


@dataclass
class Client:
    epoch: int
    next_seq: int
    sent: list[tuple[int, int, int]] = field(default_factory=list)  # epoch, seq, count


def model_verdict(
    model: dict[int, ModelProducer], pid: int, epoch: int, first: int, last: int
) -> tuple[CheckOutcome, tuple[int, int, int, int, int] | None]:
    m = model.get(pid)
    if m is None:
        return CheckOutcome.OK, None
    if m.epoch == epoch:
        for b in m.batches:
            if (b[0], b[1]) == (first, last):
                return CheckOutcome.DUPLICATE, b
    if epoch < m.epoch:
        return CheckOutcome.INVALID_PRODUCER_EPOCH, None
    if epoch > m.epoch:
        return (CheckOutcome.OK if first == 0 else CheckOutcome.OUT_OF_ORDER_SEQUENCE), None
    last_seq = m.batches[-1][1] if m.batches else -1
    wraps = last_seq == INT32_MAX and first == 0
    ok = first == last_seq + 1 or wraps
    return (CheckOutcome.OK if ok else CheckOutcome.OUT_OF_ORDER_SEQUENCE), None


operations = st.lists(
    st.one_of(
        st.tuples(st.just("send"), st.integers(0, 1), st.integers(1, 4)),
        st.tuples(st.just("retry"), st.integers(0, 1), st.integers(1, 7)),
        st.tuples(st.just("bump"), st.integers(0, 1), st.integers(1, 2)),
        st.tuples(st.just("gap"), st.integers(0, 1), st.integers(1, 3)),
        st.tuples(st.just("stale"), st.integers(0, 1), st.just(0)),
        st.tuples(st.just("restart"), st.just(0), st.just(0)),
    ),
    max_size=40,
)


@settings(
    max_examples=300,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(
    ops=operations,
    starts=st.lists(st.sampled_from([0, 5, INT32_MAX - 3, INT32_MAX]), min_size=2, max_size=2),
)
def test_random_produce_and_retry_against_model(
    ops: list[tuple[str, int, int]], starts: list[int]
) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        d = Path(tmp)
        log = MemoryLog()
        psm = ProducerStateManager(d)
        psm.load(0, 0)
        model: dict[int, ModelProducer] = {}
        clients = [Client(0, starts[0]), Client(0, starts[1])]
        ts = T0
        for op, idx, arg in ops:
            pid = 100 + idx
            client = clients[idx]
            if op == "restart":
                psm.take_snapshot(log.log_end_offset)
                psm = ProducerStateManager(d)
                start = psm.load(0, log.log_end_offset, now_ms=ts)
                for batch in log.iter_batches(start):
                    psm.replay(batch)
                for m in model.values():  # a snapshot keeps each producer's last batch
                    while len(m.batches) > 1:
                        m.batches.popleft()
                continue
            if op == "bump":
                client.epoch += arg
                client.next_seq = 0
                continue
            if op == "gap":
                client.next_seq = v2.increment_sequence(client.next_seq, arg)
                op, arg = "send", 1
            if op == "retry":
                if not client.sent:
                    continue
                epoch, seq, count = client.sent[-min(arg, len(client.sent))]
            elif op == "stale":
                if client.epoch == 0:
                    continue
                epoch, seq, count = client.epoch - 1, client.next_seq, 1
            else:
                epoch, seq, count = client.epoch, client.next_seq, arg
            ts += 1
            data = batch_bytes(pid, epoch, seq, count, ts)
            h = v2.parse_header(data)
            expected, dup = model_verdict(model, pid, epoch, seq, h.last_sequence)
            result = psm.check(h)
            event(f"{op}: {expected.value}")
            assert result.outcome is expected, (op, pid, epoch, seq, result.message)
            if op == "send":
                client.sent.append((epoch, seq, count))
                client.next_seq = v2.increment_sequence(h.last_sequence, 1)
            if expected is CheckOutcome.DUPLICATE:
                assert dup is not None
                assert (result.base_offset, result.last_offset, result.timestamp) == dup[2:]
            elif expected is CheckOutcome.OK:
                first, last = log.append(data)
                psm.on_append([h], first)
                m = model.setdefault(pid, ModelProducer(epoch))
                if m.epoch != epoch:
                    m.epoch = epoch
                    m.batches.clear()
                m.batches.append((seq, h.last_sequence, first, last, h.max_timestamp))
        assert psm.map_end_offset == log.log_end_offset
        # Rebuilding from the log alone gives the same snapshot as the live state.
        rebuilt = ProducerStateManager(d / "nowhere")
        rebuilt.load(0, log.log_end_offset)
        for batch in log.iter_batches(0):
            rebuilt.replay(batch)
        assert rebuilt.snapshot_entries() == psm.snapshot_entries()
        assert {p: (m.epoch, m.batches[-1][1]) for p, m in model.items()} == {
            p.producer_id: (p.producer_epoch, p.last_sequence) for p in psm.describe_producers()
        }
