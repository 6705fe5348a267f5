"""The log engine against Kafka's behaviour, one test (or a few) per reviewed gap:
validation by origin, header-only leader checks, delayed segment deletion,
directory fsyncs, the high watermark at open, `.txnindex` recovery, header-only
reads, per-iteration read caches, rolling without fsync, flush costs, recovery of
non-increasing or overflowing offsets, truncation below the log start, and
LogConfig ranges and roll jitter.
"""

from __future__ import annotations

import os
import random
import struct
from pathlib import Path

import pytest

from kt.storage import file_records
from kt.storage import log as log_module
from kt.storage import record_batch as v2
from kt.storage.errors import LogSegmentOffsetOverflowError, StorageError
from kt.storage.file_records import FileRecords, LogBatch
from kt.storage.index_check import TxnTracker
from kt.storage.leader_epoch import LeaderEpochCache
from kt.storage.log import (
    AppendOrigin,
    InvalidRecordError,
    InvalidTimestampError,
    PartitionLog,
    UnsupportedCompressionError,
)
from kt.storage.log_config import LogConfig
from kt.storage.log_files import segment_file_name
from kt.storage.record_batch import RecordSpec, build_batch
from kt.storage.segment import LogSegment
from kt.storage.txn_index import AbortedTxn

NOW = 1_700_000_000_000


def batch(n: int = 1, *, ts: int = NOW, value_size: int = 30, **kw: object) -> bytes:
    specs = [RecordSpec(b"k%d" % i, b"v" * value_size, timestamp=ts + i) for i in range(n)]
    return build_batch(specs, **kw)  # type: ignore[arg-type]


def repatch(data: bytes, at: int, fmt: str, value: int) -> bytes:
    """Overwrite a header field and fix the CRC."""
    out = bytearray(data)
    struct.pack_into(fmt, out, at, value)
    struct.pack_into(">I", out, v2.CRC_OFFSET, v2.compute_crc(out))
    return bytes(out)


@pytest.fixture
def logdir(tmp_path: Path) -> Path:
    return tmp_path / "topic-0"


# --- 1. follower validation ------------------------------------------------------


def test_follower_accepts_compacted_and_empty_batches(logdir: Path) -> None:
    log = PartitionLog.open(logdir)
    compacted = build_batch(
        [RecordSpec(b"k", b"v", offset_delta=9, timestamp=5)],
        last_offset_delta=9,
        partition_leader_epoch=0,
    )
    res = log.append_as_follower(compacted)
    assert (res.first_offset, res.last_offset, log.log_end_offset) == (0, 9, 10)
    empty = build_batch(
        [],
        base_offset=10,
        last_offset_delta=4,
        producer_id=5,
        producer_epoch=0,
        base_sequence=0,
        partition_leader_epoch=0,
    )
    assert v2.parse_header(empty).record_count == 0
    log.append_as_follower(empty)
    assert log.log_end_offset == 15
    # Replicas are not held to max.message.bytes either (Kafka's ignoreRecordSize).
    small = PartitionLog.open(logdir.parent / "t-1", LogConfig(max_message_bytes=100))
    small.append_as_follower(build_batch([RecordSpec(b"k", b"v" * 500)]))
    assert small.log_end_offset == 1
    # The same batches from a client are refused.
    with pytest.raises(InvalidRecordError):
        log.append_as_leader(compacted, 0)
    with pytest.raises(InvalidRecordError):
        log.append_as_leader(empty, 0)
    log.close()
    small.close()


# --- 2. leader validation --------------------------------------------------------


def test_clients_may_not_write_control_batches_coordinators_may(logdir: Path) -> None:
    log = PartitionLog.open(logdir)
    marker = v2.build_end_txn_marker(
        commit=True, producer_id=1, producer_epoch=0, coordinator_epoch=0, timestamp=NOW
    )
    with pytest.raises(InvalidRecordError, match="control"):
        log.append_as_leader(marker, 0, now_ms=NOW)
    assert log.log_end_offset == 0
    res = log.append_as_leader(marker, 0, now_ms=NOW, origin=AppendOrigin.COORDINATOR)
    assert res.first_offset == 0 and log.log_end_offset == 1
    log.close()


def test_producer_id_without_sequence_is_invalid(logdir: Path) -> None:
    log = PartitionLog.open(logdir)
    bad = batch(2, producer_id=7, producer_epoch=0, base_sequence=-1)
    with pytest.raises(InvalidRecordError, match="sequence"):
        log.append_as_leader(bad, 0, now_ms=NOW)
    log.append_as_leader(batch(2, producer_id=7, producer_epoch=0, base_sequence=0), 0, now_ms=NOW)
    assert log.log_end_offset == 2
    log.close()


@pytest.mark.parametrize("codec_id", [5, 6, 7])
def test_unknown_codec_ids_are_refused(logdir: Path, codec_id: int) -> None:
    log = PartitionLog.open(logdir)
    good = batch(1)
    attrs = v2.parse_header(good).attributes
    bad = repatch(good, v2.ATTRIBUTES_OFFSET, ">h", (attrs & ~v2.CODEC_MASK) | codec_id)
    with pytest.raises(UnsupportedCompressionError, match=str(codec_id)):
        log.append_as_leader(bad, 0, now_ms=NOW)
    assert log.log_end_offset == 0
    log.close()


def test_client_log_append_time_bit_is_reset_on_create_time_topics(logdir: Path) -> None:
    log = PartitionLog.open(logdir)
    sent = build_batch(
        [RecordSpec(b"k", b"v", timestamp=NOW)],
        timestamp_type=v2.LOG_APPEND_TIME,
        log_append_time=NOW,
    )
    assert v2.parse_header(sent).timestamp_type == v2.LOG_APPEND_TIME
    res = log.append_as_leader(sent, 0, now_ms=NOW + 5)
    assert res.log_append_time == -1
    stored = next(log.iter_batches(0))
    assert stored.header is not None
    assert stored.header.timestamp_type == v2.CREATE_TIME
    assert stored.is_valid()
    log.close()


def test_timestamp_window_defaults_follow_kafka_4() -> None:
    cfg = LogConfig()
    assert cfg.message_timestamp_before_max_ms == 2**63 - 1
    assert cfg.message_timestamp_after_max_ms == 3_600_000
    props = LogConfig.from_properties(
        {"message.timestamp.before.max.ms": "1000", "log.message.timestamp.after.max.ms": "5"}
    )
    assert (props.message_timestamp_before_max_ms, props.message_timestamp_after_max_ms) == (
        1000,
        5,
    )


def test_timestamps_outside_the_window_are_refused(logdir: Path) -> None:
    cfg = LogConfig(message_timestamp_before_max_ms=1_000, message_timestamp_after_max_ms=500)
    log = PartitionLog.open(logdir, cfg)
    log.append_as_leader(batch(1, ts=NOW - 1_000), 0, now_ms=NOW)
    log.append_as_leader(batch(1, ts=NOW + 500), 0, now_ms=NOW)
    with pytest.raises(InvalidTimestampError, match="before"):
        log.append_as_leader(batch(1, ts=NOW - 1_001), 0, now_ms=NOW)
    with pytest.raises(InvalidTimestampError, match="after"):
        log.append_as_leader(batch(1, ts=NOW + 501), 0, now_ms=NOW)
    # The base timestamp counts too (the first record may be the oldest).
    with pytest.raises(InvalidTimestampError):
        log.append_as_leader(
            build_batch(
                [
                    RecordSpec(b"a", b"1", timestamp=NOW - 5_000),
                    RecordSpec(b"b", b"2", timestamp=NOW),
                ]
            ),
            0,
            now_ms=NOW,
        )
    assert log.log_end_offset == 2
    # Default: an hour into the future at most, any age.
    default = PartitionLog.open(logdir.parent / "t-1")
    default.append_as_leader(batch(1, ts=1), 0, now_ms=NOW)
    with pytest.raises(InvalidTimestampError):
        default.append_as_leader(batch(1, ts=NOW + 3_600_001), 0, now_ms=NOW)
    # LogAppendTime topics ignore client timestamps; replicas are not checked.
    lat = PartitionLog.open(
        logdir.parent / "t-2", LogConfig(message_timestamp_type="LogAppendTime")
    )
    lat.append_as_leader(batch(1, ts=NOW + 10**9), 0, now_ms=NOW)
    default.append_as_follower(
        build_batch([RecordSpec(b"k", b"v", timestamp=NOW * 2)], base_offset=1)
    )
    for lg in (log, default, lat):
        lg.close()


# --- 3. delayed deletion ----------------------------------------------------------


def test_fetch_slice_survives_truncation_until_files_expire(logdir: Path) -> None:
    cfg = LogConfig(segment_bytes=600, file_delete_delay_ms=60_000)
    log = PartitionLog.open(logdir, cfg)
    for _ in range(6):
        log.append_as_leader(batch(3, value_size=50), 1, now_ms=NOW)
    assert len(log.segments) >= 3
    sl = log.read(12, 10**6)
    assert sl is not None
    expected = sl.read_bytes()
    doomed = sl.segment
    log.truncate_to(3, now_ms=NOW)
    assert doomed not in log.segments
    # Renamed at once, still open: the captured slice reads the same bytes even when
    # new files are opened (an fd closed now would be reused by them).
    assert not doomed.log_path.name.endswith(".log")
    assert (logdir / segment_file_name(doomed.base_offset, ".log", ".deleted")).exists()
    others = [os.open(os.devnull, os.O_RDONLY) for _ in range(8)]
    try:
        assert sl.read_bytes() == expected
    finally:
        for fd in others:
            os.close(fd)
    assert log.pending_deletes >= 1
    assert log.delete_expired_files(NOW + 59_999) == 0
    gone = log.delete_expired_files(NOW + 60_000)
    assert gone >= 1 and log.pending_deletes == 0
    assert doomed.fd == -1
    assert not any(p.name.endswith(".deleted") for p in logdir.iterdir())
    log.close()


def test_truncate_fully_defers_deletion_and_reload_drops_leftovers(logdir: Path) -> None:
    log = PartitionLog.open(logdir, LogConfig(segment_bytes=600))
    for _ in range(4):
        log.append_as_leader(batch(3, value_size=50), 1, now_ms=NOW)
    sl = log.read(0, 10**6)
    assert sl is not None
    expected = sl.read_bytes()
    log.truncate_fully_and_start_at(0, now_ms=NOW)
    assert sl.read_bytes() == expected
    assert any(p.name.endswith(".deleted") for p in logdir.iterdir())
    # A crash before the delay: loading removes the leftovers.
    for _deadline, seg in log._pending_deletes:
        seg.close()
    log._pending_deletes = []
    again = PartitionLog.open(logdir, had_clean_shutdown=True)
    assert not any(p.name.endswith(".deleted") for p in logdir.iterdir())
    assert again.load_report.deleted_files
    again.close()


# --- 4. directory fsyncs ------------------------------------------------------------


def test_directory_is_fsynced_on_create_roll_rename_and_flush(
    logdir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    synced: list[Path] = []
    monkeypatch.setattr(log_module, "fsync_dir", lambda d: synced.append(Path(d)))
    log = PartitionLog.open(logdir, LogConfig(segment_bytes=600))
    assert logdir.parent in synced and logdir in synced  # new dir, first segment
    synced.clear()
    log.append_as_leader(batch(3, value_size=50), 1, now_ms=NOW)
    assert synced == []
    while len(log.segments) < 2:
        log.append_as_leader(batch(3, value_size=50), 1, now_ms=NOW)
    assert synced == [logdir]  # the roll created a file
    synced.clear()
    log.flush()  # covers the new segment, based above the old recovery point
    assert synced == [logdir]
    synced.clear()
    log.append_as_leader(batch(1), 1, now_ms=NOW)
    log.flush()  # only data in an already-durable segment
    assert synced == []
    log.truncate_to(1, now_ms=NOW)  # renames the later segment `.deleted`
    assert synced == [logdir]
    log.close()


# --- 5. high watermark at open ------------------------------------------------------


def test_high_watermark_starts_at_log_start_offset(logdir: Path) -> None:
    log = PartitionLog.open(logdir)
    for _ in range(3):
        log.append_as_leader(batch(2), 0, now_ms=NOW)
    log.close()
    again = PartitionLog.open(logdir, log_start_offset=1, recovery_point=6, had_clean_shutdown=True)
    assert (again.log_start_offset, again.high_watermark, again.log_end_offset) == (1, 1, 6)
    assert again.update_high_watermark(4) == 4
    assert again.update_high_watermark(99) == 6
    again.close()


# --- 6. .txnindex through recovery --------------------------------------------------


def _txn_log(logdir: Path) -> tuple[PartitionLog, dict[int, list[AbortedTxn]]]:
    """Interleaved transactional producers over several segments, with ABORT and
    COMMIT markers; the `.txnindex` entries are those Kafka's producer state writes."""
    log = PartitionLog.open(logdir, LogConfig(segment_bytes=700))
    tracker = TxnTracker()
    seqs: dict[int, int] = {}

    def data(pid: int) -> None:
        seq = seqs.get(pid, 0)
        seqs[pid] = seq + 2
        b = batch(2, producer_id=pid, producer_epoch=0, base_sequence=seq, is_transactional=True)
        log.append_as_leader(b, 0, now_ms=NOW)

    def marker(pid: int, commit: bool) -> None:
        m = v2.build_end_txn_marker(
            commit=commit, producer_id=pid, producer_epoch=0, coordinator_epoch=1, timestamp=NOW
        )
        log.append_as_leader(m, 0, now_ms=NOW, origin=AppendOrigin.COORDINATOR)

    script = [
        ("d", 1), ("d", 2), ("d", 1), ("d", 3), ("d", 2), ("a", 2), ("d", 3),
        ("d", 1), ("c", 3), ("d", 2), ("d", 4), ("a", 1), ("d", 2), ("a", 4),
        ("d", 1), ("a", 2), ("c", 1),
    ]  # fmt: skip
    for kind, pid in script:
        if kind == "d":
            data(pid)
        else:
            marker(pid, kind == "c")
    for b in log.iter_batches(0):
        before = len(tracker.aborted)
        tracker.feed(b)
        for txn in tracker.aborted[before:]:
            seg = log.segments[log._floor_segment_index(txn.last_offset)]
            seg.append_aborted_txn(txn)
    expected = {s.base_offset: s.txn_index.entries for s in log.segments}
    assert sum(len(v) for v in expected.values()) == 4
    # An aborted transaction whose LSO points into an earlier segment.
    assert any(t.last_stable_offset < base for base, ts in expected.items() for t in ts)
    return log, expected


def test_unclean_recovery_rebuilds_the_txn_index(logdir: Path) -> None:
    log, expected = _txn_log(logdir)
    bases = sorted(expected)
    assert len(bases) >= 3
    log.flush()
    # Simulate a crash: the last segments' txn index entries never reached the disk.
    for seg in log.segments:
        seg.txn_index.flush()
    for base in bases[1:]:
        (logdir / segment_file_name(base, ".txnindex")).unlink(missing_ok=True)
    for seg in log.segments:
        os.close(seg.fd)
        seg._fd = -1
    again = PartitionLog.open(logdir, recovery_point=bases[1], had_clean_shutdown=False)
    assert bases[1] in again.load_report.recovered_segments
    got = {s.base_offset: s.txn_index.entries for s in again.segments}
    assert got == expected
    again.close()
    # Reloaded unclean again from 0: the same entries, nothing erased.
    third = PartitionLog.open(logdir, recovery_point=0, had_clean_shutdown=False)
    assert {s.base_offset: s.txn_index.entries for s in third.segments} == expected
    third.close()


def test_index_rebuild_on_open_keeps_the_txn_index(logdir: Path) -> None:
    log, expected = _txn_log(logdir)
    base = next(b for b, e in expected.items() if e)
    log.close()
    (logdir / segment_file_name(base, ".index")).unlink()
    again = PartitionLog.open(logdir, had_clean_shutdown=True)
    assert base in again.load_report.rebuilt_indexes
    assert {s.base_offset: s.txn_index.entries for s in again.segments} == expected
    again.close()


# --- 7. header-only reads -----------------------------------------------------------


def test_reads_never_materialise_batches(logdir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    log = PartitionLog.open(logdir, LogConfig(index_interval_bytes=10**6))
    for _ in range(50):
        log.append_as_leader(batch(2, value_size=100), 0, now_ms=NOW)
    log.update_high_watermark(80)

    def forbidden(*_a: object, **_k: object) -> None:
        raise AssertionError("batches() used on the read path")

    monkeypatch.setattr(FileRecords, "batches", forbidden)
    calls = []
    real = LogSegment.translate_offset

    def counting(self: LogSegment, offset: int, starting_position: int = 0) -> object:
        calls.append(offset)
        return real(self, offset, starting_position)

    monkeypatch.setattr(LogSegment, "translate_offset", counting)
    for start in range(0, 80, 7):
        sl = log.read(start, 10**6, upper_bound=log.high_watermark)
        assert sl is not None
    # The bound's position is computed once, not per read.
    assert calls.count(80) == 1
    assert log.active_segment.read_next_offset() == 100
    monkeypatch.undo()
    log.close()


def test_large_batches_are_skipped_not_read(logdir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cfg = LogConfig(max_message_bytes=20 << 20, segment_bytes=64 << 20, index_interval_bytes=10**9)
    log = PartitionLog.open(logdir, cfg)
    big = build_batch([RecordSpec(b"k", os.urandom(5 << 20), timestamp=NOW)])
    for _ in range(3):
        log.append_as_leader(big, 0, now_ms=NOW)
    log.append_as_leader(batch(1), 0, now_ms=NOW)
    sizes: list[int] = []
    real = os.pread

    def spy(fd: int, n: int, pos: int) -> bytes:
        sizes.append(n)
        return real(fd, n, pos)

    monkeypatch.setattr(os, "pread", spy)
    sl = log.read(3, 1000)
    assert sl is not None and sl.length == len(batch(1))
    assert log.active_segment.read_next_offset() == 4
    assert max(sizes) <= file_records.HEADER_WINDOW
    monkeypatch.undo()
    log.close()


# --- 8. per-iteration read caches ---------------------------------------------------


def test_file_records_hold_no_buffer_and_iterations_do_not_interfere(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(file_records, "CHUNK_SIZE", 100)
    data = [
        build_batch([RecordSpec(b"k", b"x" * (i * 7), timestamp=i)], base_offset=i)
        for i in range(20)
    ]
    path = tmp_path / "00000000000000000000.log"
    path.write_bytes(b"".join(data))
    with open(path, "rb") as f:
        reader = FileRecords(f)
        a = reader.batches(0)
        b = reader.batches(0)
        got_a, got_b = [], []
        for x, y in zip(a, b, strict=True):
            assert isinstance(x, LogBatch) and isinstance(y, LogBatch)
            got_a.append(bytes(x.data))
            got_b.append(bytes(y.data))
            next(reader.batches(len(b"".join(data[:10]))))  # a third, elsewhere
        assert got_a == got_b == data
        assert not any(hasattr(reader, n) for n in ("_buf", "_buf_start"))


# --- 9. rolling without fsync ---------------------------------------------------------


def test_roll_does_not_fsync_the_sealed_segment(
    logdir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    log = PartitionLog.open(logdir, LogConfig(segment_bytes=600))
    flushed: list[int] = []
    real = LogSegment.flush

    def spy(self: LogSegment) -> None:
        flushed.append(self.base_offset)
        real(self)

    monkeypatch.setattr(LogSegment, "flush", spy)
    while len(log.segments) < 3:
        log.append_as_leader(batch(3, value_size=50), 0, now_ms=NOW)
    assert flushed == []
    sealed = log.segments[0]
    assert len(sealed.time_index) >= 1  # sealed: final time entry written
    assert log.recovery_point == 0 and log.pending_roll_flush == log.segments[-1].base_offset
    assert log.flush_rolled()
    assert flushed == [s.base_offset for s in log.segments[:-1]]
    assert log.recovery_point == log.segments[-1].base_offset
    assert not log.flush_rolled()
    log.close()


# --- 10. flush costs ------------------------------------------------------------------


def test_flush_starts_at_the_recovery_point_and_skips_unchanged_epochs(
    logdir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    log = PartitionLog.open(logdir, LogConfig(segment_bytes=600))
    while len(log.segments) < 4:
        log.append_as_leader(batch(3, value_size=50), 0, now_ms=NOW)
    log.flush()
    flushed: list[int] = []
    epochs_written: list[int] = []
    real = LogSegment.flush
    real_epochs = LeaderEpochCache.flush

    def spy(self: LogSegment) -> None:
        flushed.append(self.base_offset)
        real(self)

    def epoch_spy(self: LeaderEpochCache) -> None:
        epochs_written.append(1)
        real_epochs(self)

    monkeypatch.setattr(LogSegment, "flush", spy)
    monkeypatch.setattr(LeaderEpochCache, "flush", epoch_spy)
    log.append_as_leader(batch(1), 0, now_ms=NOW)
    log.flush()
    assert flushed == [log.active_segment.base_offset]
    assert epochs_written == []  # epoch 0 was already checkpointed
    log.append_as_leader(batch(1), 3, now_ms=NOW)
    log.flush()
    assert epochs_written == [1]  # by the assignment itself, not again by flush
    log.close()


# --- 11. recovery of bad offsets -----------------------------------------------------


def test_recovery_truncates_at_offsets_going_backwards(logdir: Path) -> None:
    logdir.mkdir(parents=True)
    good = [build_batch([RecordSpec(b"k", b"v", timestamp=NOW)], base_offset=i) for i in range(3)]
    backwards = build_batch([RecordSpec(b"k", b"v", timestamp=NOW)], base_offset=1)
    (logdir / segment_file_name(0, ".log")).write_bytes(b"".join(good) + backwards + good[0])
    log = PartitionLog.open(logdir, recovery_point=0, had_clean_shutdown=False)
    assert log.log_end_offset == 3
    assert log.active_segment.size == sum(len(b) for b in good)
    assert any("do not increase" in r for r in log.load_report.truncation_reasons)
    log.close()


def test_offset_overflow_refuses_to_load_without_cutting_data(logdir: Path) -> None:
    logdir.mkdir(parents=True)
    first = build_batch([RecordSpec(b"k", b"v", timestamp=NOW)], base_offset=0)
    far = build_batch([RecordSpec(b"k", b"v", timestamp=NOW)], base_offset=2**31 + 5)
    path = logdir / segment_file_name(0, ".log")
    path.write_bytes(first + far)
    with pytest.raises(LogSegmentOffsetOverflowError, match="cannot be stored") as info:
        PartitionLog.open(logdir, recovery_point=0, had_clean_shutdown=False)
    assert isinstance(info.value, StorageError)
    assert path.read_bytes() == first + far


# --- 12. truncation below the log start -----------------------------------------------


def test_truncate_below_log_start_lowers_it_when_segments_cover_it(logdir: Path) -> None:
    log = PartitionLog.open(logdir)
    for _ in range(5):
        log.append_as_leader(batch(2), 0, now_ms=NOW)
    log.update_high_watermark(10)
    assert log.maybe_increment_log_start_offset(6)
    assert log.truncate_to(4, now_ms=NOW)
    assert (log.log_start_offset, log.log_end_offset) == (4, 4)
    assert [b.base_offset for b in log.iter_batches(log.log_start_offset)] == [] or all(
        b.last_offset < 4 for b in log.iter_batches(0)
    )
    log.close()


def test_truncate_below_the_first_segment_restarts_the_log(logdir: Path) -> None:
    log = PartitionLog.open(logdir, log_start_offset=100)
    for _ in range(3):
        log.append_as_leader(batch(2), 0, now_ms=NOW)
    assert log.segments[0].base_offset == 100
    assert log.truncate_to(40, now_ms=NOW)
    assert [s.base_offset for s in log.segments] == [40]
    assert (log.log_start_offset, log.log_end_offset, log.high_watermark) == (40, 40, 40)
    log.close()


def test_truncate_at_a_segment_base_keeps_it_active_and_empty(logdir: Path) -> None:
    log = PartitionLog.open(logdir, LogConfig(segment_bytes=600))
    while len(log.segments) < 3:
        log.append_as_leader(batch(3, value_size=50), 0, now_ms=NOW)
    second = log.segments[1]
    sealed_entries = log.segments[0].time_index.entries
    assert log.truncate_to(second.base_offset, now_ms=NOW)
    assert log.segments[-1] is second and second.size == 0
    assert log.log_end_offset == second.base_offset
    assert log.segments[0].time_index.entries == sealed_entries
    res = log.append_as_leader(batch(1), 0, now_ms=NOW)
    assert res.first_offset == second.base_offset and second.size > 0
    log.close()


# --- 13. LogConfig ranges and jitter ----------------------------------------------------


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("segment.bytes", "13"),
        ("segment.bytes", str(2**31)),
        ("index.interval.bytes", "-1"),
        ("segment.ms", "0"),
        ("segment.index.bytes", "3"),
        ("min.cleanable.dirty.ratio", "1.5"),
        ("message.timestamp.after.max.ms", "-1"),
        ("file.delete.delay.ms", "-5"),
        ("min.insync.replicas", "0"),
        ("cleanup.policy", "keep"),
    ],
)
def test_log_config_rejects_out_of_range_values(key: str, value: str) -> None:
    with pytest.raises(StorageError, match=key.replace(".", r"\.")):
        LogConfig.from_properties({key: value})


def test_log_config_bounds_accept_kafka_extremes() -> None:
    cfg = LogConfig.from_properties(
        {"segment.bytes": "14", "index.interval.bytes": "0", "cleanup.policy": "compact,delete"}
    )
    assert (cfg.segment_bytes, cfg.index_interval_bytes) == (14, 0)
    assert LogConfig(segment_bytes=2**31 - 1).segment_bytes == 2**31 - 1


def test_segment_jitter_is_random_per_segment(logdir: Path) -> None:
    cfg = LogConfig(segment_jitter_ms=1_000, segment_ms=600)
    draws = [cfg.random_segment_jitter(random.Random(s)) for s in range(50)]
    assert all(0 <= d < 600 for d in draws) and len(set(draws)) > 10
    assert LogConfig().random_segment_jitter(random.Random(1)) == 0
    log = PartitionLog.open(
        logdir, LogConfig(segment_jitter_ms=500, segment_ms=1_000), rng=random.Random(7)
    )
    expect = random.Random(7)
    assert log.active_segment.roll_jitter_ms == expect.randrange(500)
    # The segment rolls once its age passes segment.ms minus its own jitter.
    jitter = log.active_segment.roll_jitter_ms
    log.append_as_leader(batch(1, ts=NOW), 0, now_ms=NOW)
    log.append_as_leader(batch(1, ts=NOW + 1_000 - jitter), 0, now_ms=NOW)
    assert len(log.segments) == 1
    log.append_as_leader(batch(1, ts=NOW + 1_001 - jitter), 0, now_ms=NOW)
    assert len(log.segments) == 2
    assert log.active_segment.roll_jitter_ms == expect.randrange(500)
    log.close()
