"""PartitionLog: what the broker and its users rely on.

Appends (offsets, epochs, LogAppendTime, bytes kept verbatim), sparse indexes,
rolling, reads, lookups by timestamp, truncation, validation, and loading after a
clean or unclean shutdown. Batches are cross-checked with kafka-python's decoder,
indexes with `scan_log` of the same files and with an independent model.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kafka.record.memory_records import MemoryRecords

from kt.storage import record_batch as v2
from kt.storage.compression import Codec
from kt.storage.errors import CorruptRecordError, OffsetOutOfRangeError
from kt.storage.file_records import LogBatch
from kt.storage.index_check import verify_segment
from kt.storage.leader_epoch import EpochEntry, read_leader_epoch_checkpoint
from kt.storage.log import InvalidRecordError, PartitionLog, RecordTooLargeError
from kt.storage.log_config import LogConfig
from kt.storage.log_files import segment_file_name
from kt.storage.offset_index import OffsetPosition
from kt.storage.record_batch import RecordSpec, build_batch
from kt.storage.segment import INT32_MAX, batch_infos, scan_log
from kt.storage.time_index import TimestampOffset

SETTINGS = settings(
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)


def producer_batch(
    n: int,
    *,
    ts: int | list[int] = 1_000,
    value_size: int = 30,
    codec: Codec = Codec.NONE,
    tag: bytes = b"",
) -> bytes:
    """A batch as a producer sends it: base offset 0, no leader epoch."""
    tss = ts if isinstance(ts, list) else [ts + i for i in range(n)]
    return build_batch(
        [
            RecordSpec(
                tag + b"key-%d" % i,
                bytes([97 + i % 26]) * value_size,
                headers=[("h", b"%d" % i)],
                timestamp=tss[i],
            )
            for i in range(n)
        ],
        codec=codec,
    )


def all_batches(log: PartitionLog) -> list[LogBatch]:
    return list(log.iter_batches(log.log_start_offset))


def all_records(log: PartitionLog) -> list[tuple[int, int, bytes | None, bytes | None]]:
    return [(r.offset, r.timestamp, r.key, r.value) for b in all_batches(log) for r in b.records()]


def assert_indexes_match_scan(log: PartitionLog) -> None:
    """Every segment's indexes are the ones Kafka's recovery would build for its file,
    and the files on disk verify clean."""
    for seg in log.segments:
        scan = scan_log(seg.records, seg.base_offset, log.config.index_interval_bytes)
        assert scan.invalid_bytes == 0
        assert seg.offset_index.entries == scan.offset_entries
        times = seg.time_index.entries
        # The scan ends with the largest-timestamp entry a rolled segment carries; the
        # active segment gets it only when it rolls or closes.
        if seg is log.active_segment and times != scan.time_entries:
            assert times == scan.time_entries[:-1]
        else:
            assert times == scan.time_entries
        seg.flush()
        check = verify_segment(seg.log_path)
        assert check.ok, check.problems


def fill(log: PartitionLog, batches: int, per_batch: int = 3) -> None:
    """Append `batches` producer batches of `per_batch` records, timestamps rising."""
    for i in range(batches):
        log.append_as_leader(producer_batch(per_batch, ts=1_000 + 10 * i), 0)


@pytest.fixture
def logdir(tmp_path: Path) -> Path:
    return tmp_path / "topic-0"


# --- appending -----------------------------------------------------------------------


def test_append_assigns_consecutive_offsets_across_batches(logdir: Path) -> None:
    log = PartitionLog.open(logdir)
    data = producer_batch(3, ts=[10, 30, 20]) + producer_batch(1, ts=5) + producer_batch(5, ts=7)
    res = log.append_as_leader(data, 4, now_ms=99)
    assert (res.first_offset, res.last_offset, res.batches, res.bytes) == (0, 8, 3, len(data))
    assert (res.max_timestamp, res.offset_of_max_timestamp) == (30, 2)
    assert (res.log_append_time, res.log_start_offset) == (-1, 0)
    res2 = log.append_as_leader(producer_batch(2, ts=1), 4)
    assert (res2.first_offset, res2.last_offset, res2.batches) == (9, 10, 1)
    assert log.log_end_offset == 11
    headers = [b.header for b in all_batches(log)]
    assert [(h.base_offset, h.last_offset) for h in headers if h] == [
        (0, 2),
        (3, 3),
        (4, 8),
        (9, 10),
    ]
    assert [r[0] for r in all_records(log)] == list(range(11))
    log.close()


def test_leader_epoch_stamped_and_checkpointed(logdir: Path) -> None:
    log = PartitionLog.open(logdir)
    log.append_as_leader(producer_batch(2), 3)
    log.append_as_leader(producer_batch(1) + producer_batch(2), 3)
    log.append_as_leader(producer_batch(4), 7)
    epochs = [(b.base_offset, b.partition_leader_epoch) for b in all_batches(log)]
    assert epochs == [(0, 3), (2, 3), (3, 3), (5, 7)]
    expected = [EpochEntry(3, 0), EpochEntry(7, 5)]
    assert log.leader_epoch_cache.entries == expected
    assert read_leader_epoch_checkpoint(logdir / "leader-epoch-checkpoint") == expected
    assert (logdir / "leader-epoch-checkpoint").read_text() == "0\n2\n3 0\n7 5\n"
    log.close()


def test_log_append_time_stamps_max_timestamp_and_keeps_crc(logdir: Path) -> None:
    log = PartitionLog.open(logdir, LogConfig(message_timestamp_type="LogAppendTime"))
    plain = producer_batch(3, ts=[5, 50, 7])
    gz = producer_batch(2, ts=[1, 2], codec=Codec.GZIP)
    res = log.append_as_leader(plain + gz, 1, now_ms=1_234_567)
    assert (res.log_append_time, res.max_timestamp) == (1_234_567, 1_234_567)
    for b in all_batches(log):
        assert b.header is not None
        assert b.header.timestamp_type == v2.LOG_APPEND_TIME
        assert b.header.max_timestamp == 1_234_567
        assert b.is_valid()
        kb = MemoryRecords(bytes(b.data)).next_batch()
        assert kb.validate_crc()
        # Consumers see the append time on every record (kafka-python agrees).
        assert {r.timestamp for r in kb} == {1_234_567}
    assert log.active_segment.max_timestamp_so_far == 1_234_567
    log.close()


@pytest.mark.parametrize("codec", [Codec.NONE, Codec.GZIP, Codec.LZ4, Codec.ZSTD])
def test_batches_stored_verbatim_except_offset_and_epoch(logdir: Path, codec: Codec) -> None:
    log = PartitionLog.open(logdir)
    sent = [producer_batch(4, codec=codec, tag=b"a"), producer_batch(2, codec=codec, tag=b"b")]
    log.append_as_leader(b"".join(sent), 9)
    log.append_as_leader(producer_batch(3, codec=codec, tag=b"c"), 9)
    sent.append(producer_batch(3, codec=codec, tag=b"c"))
    stored = all_batches(log)
    assert len(stored) == 3
    base = 0
    for original, got in zip(sent, stored):
        data = bytes(got.data)
        assert len(data) == len(original)
        assert data[:8] == base.to_bytes(8, "big")
        assert data[12:16] == (9).to_bytes(4, "big")
        assert data[8:12] == original[8:12] and data[16:] == original[16:]
        assert got.is_valid()
        mine = [(r.offset, r.timestamp, r.key, r.value, r.headers) for r in got.records()]
        theirs = [
            (r.offset, r.timestamp, r.key, r.value, [(k, v) for k, v in r.headers])
            for r in MemoryRecords(data).next_batch()
        ]
        assert mine == theirs
        assert [m[0] for m in mine] == list(range(base, base + len(mine)))
        original_records = list(v2.iter_records(v2.parse_header(original), original))
        assert [(r.key, r.value, r.timestamp) for r in original_records] == [
            (m[2], m[3], m[1]) for m in mine
        ]
        base += len(mine)
    log.close()


# --- sparse indexes ---------------------------------------------------------------------


def model_offset_index(
    sizes_and_last: list[tuple[int, int]], interval: int
) -> list[OffsetPosition]:
    entries = []
    since = pos = 0
    for size, last in sizes_and_last:
        if since > interval:
            entries.append(OffsetPosition(last, pos))
            since = 0
        pos += size
        since += size
    return entries


@pytest.mark.parametrize("interval", [0, 100, 333, 4096])
def test_index_entries_per_index_interval_bytes(logdir: Path, interval: int) -> None:
    log = PartitionLog.open(logdir, LogConfig(index_interval_bytes=interval))
    sizes_and_last = []
    for i in range(60):
        data = producer_batch(1 + i % 4, value_size=10 + (i * 37) % 90)
        res = log.append_as_leader(data, 0)
        sizes_and_last.append((len(data), res.last_offset))
    assert len(log.segments) == 1
    assert log.active_segment.offset_index.entries == model_offset_index(sizes_and_last, interval)
    assert_indexes_match_scan(log)
    log.close()


# --- rolling ----------------------------------------------------------------------------


def test_roll_on_segment_bytes(logdir: Path) -> None:
    cfg = LogConfig(segment_bytes=1_000, index_interval_bytes=200)
    log = PartitionLog.open(logdir, cfg)
    sizes = []
    expected_bases = [0]
    current = 0
    for i in range(40):
        data = producer_batch(1 + i % 3, value_size=20 + (i * 13) % 60)
        rolls = current > cfg.segment_bytes - len(data)
        if rolls:
            expected_bases.append(log.log_end_offset)
            current = 0
        # the append says whether it rolled (callers snapshot producer state then)
        assert log.append_as_leader(data, 0).rolled is rolls
        current += len(data)
        sizes.append(len(data))
    assert [s.base_offset for s in log.segments] == expected_bases
    assert all(s.size <= cfg.segment_bytes for s in log.segments)
    assert sum(s.size for s in log.segments) == sum(sizes)
    # Sealed segments carry their largest timestamp as the time index's last entry.
    for seg in log.segments[:-1]:
        assert seg.time_index.entries[-1] == TimestampOffset(
            seg.max_timestamp_so_far, seg.offset_of_max_timestamp_so_far
        )
    assert_indexes_match_scan(log)
    assert [r[0] for r in all_records(log)] == list(range(log.log_end_offset))
    log.close()


def test_roll_on_segment_ms_by_batch_timestamps(logdir: Path) -> None:
    log = PartitionLog.open(logdir, LogConfig(segment_ms=1_000), now_ms=0)
    log.append_as_leader(producer_batch(2, ts=[10_000, 10_500]), 0, now_ms=0)
    # The segment's age is measured from its first batch's largest timestamp (10500).
    log.append_as_leader(producer_batch(1, ts=11_500), 0, now_ms=0)
    assert len(log.segments) == 1
    log.append_as_leader(producer_batch(1, ts=11_501), 0, now_ms=0)
    assert [s.base_offset for s in log.segments] == [0, 3]
    # Wall-clock time does not matter while batches carry timestamps.
    log.append_as_leader(producer_batch(1, ts=11_600), 0, now_ms=10**12)
    assert [s.base_offset for s in log.segments] == [0, 3]
    log.close()


def test_roll_on_segment_ms_by_creation_time_without_timestamps(logdir: Path) -> None:
    log = PartitionLog.open(logdir, LogConfig(segment_ms=1_000), now_ms=5_000)
    log.append_as_leader(producer_batch(1, ts=-1), 0, now_ms=5_000)
    log.append_as_leader(producer_batch(1, ts=-1), 0, now_ms=6_000)
    assert len(log.segments) == 1
    log.append_as_leader(producer_batch(1, ts=-1), 0, now_ms=6_001)
    assert [s.base_offset for s in log.segments] == [0, 2]
    log.close()


def test_roll_on_full_offset_index(logdir: Path) -> None:
    # 48 bytes: 6 offset entries; one timestamp throughout, so the time index stays small.
    cfg = LogConfig(segment_index_bytes=48, index_interval_bytes=0)
    log = PartitionLog.open(logdir, cfg)
    for _ in range(20):
        log.append_as_leader(producer_batch(1, ts=[42]), 0)
    # Entries from the 2nd batch on: 7 batches fill a segment's index.
    assert [s.base_offset for s in log.segments] == [0, 7, 14]
    assert [len(s.offset_index) for s in log.segments] == [6, 6, 5]
    assert_indexes_match_scan(log)
    log.close()


def test_roll_on_relative_offset_overflow_as_follower(logdir: Path) -> None:
    log = PartitionLog.open(logdir)
    log.append_as_follower(build_batch([RecordSpec(b"k", b"v")] * 3, partition_leader_epoch=1))
    far = 10 + INT32_MAX
    res = log.append_as_follower(
        build_batch([RecordSpec(b"k", b"v")] * 2, base_offset=far, partition_leader_epoch=2)
    )
    assert (res.first_offset, res.last_offset) == (far, far + 1)
    assert res.rolled
    assert [s.base_offset for s in log.segments] == [0, far]
    assert log.log_end_offset == far + 2
    assert log.leader_epoch_cache.entries == [EpochEntry(1, 0), EpochEntry(2, far)]
    assert [b.base_offset for b in all_batches(log)] == [0, far]
    assert_indexes_match_scan(log)
    log.close()


def test_empty_segment_with_zero_capacity_index_is_not_rolled_onto_itself(
    logdir: Path,
) -> None:
    """KAFKA-6388: an index too small for one entry makes every segment 'full'; the
    empty active segment is reused instead of failing to roll at its own offset."""
    log = PartitionLog.open(logdir, LogConfig(segment_index_bytes=4))
    for _ in range(4):
        log.append_as_leader(producer_batch(2), 0)
    assert [s.base_offset for s in log.segments] == [0, 2, 4, 6]
    assert [r[0] for r in all_records(log)] == list(range(8))
    log.roll()  # explicit roll of the non-empty active segment
    assert [s.base_offset for s in log.segments] == [0, 2, 4, 6, 8]
    assert log.roll() is log.active_segment  # empty: reused in place
    assert len(log.segments) == 5
    log.close()


# --- reading ----------------------------------------------------------------------------


@pytest.fixture
def multi(logdir: Path) -> Iterator[tuple[PartitionLog, list[tuple[int, int, int]]]]:
    """A log of several segments; yields it with (first, last, size) per batch."""
    log = PartitionLog.open(logdir, LogConfig(segment_bytes=700, index_interval_bytes=150))
    batches = []
    for i in range(24):
        data = producer_batch(1 + i % 4, value_size=15 + (i * 29) % 50)
        res = log.append_as_leader(data, 0)
        batches.append((res.first_offset, res.last_offset, len(data)))
    assert len(log.segments) >= 3
    yield log, batches
    log.close()


def test_read_every_offset_starts_at_the_batch_holding_it(multi) -> None:  # type: ignore[no-untyped-def]
    log, batches = multi
    for first, last, size in batches:
        for offset in range(first, last + 1):
            got = log.read(offset, 1)  # min_one_message by default
            assert got is not None
            assert got.length == size
            data = got.read_bytes()
            header = v2.parse_header(data)
            assert (header.base_offset, header.last_offset) == (first, last)
            assert got.first_offset == offset


def whole_batches(data: bytes) -> list[tuple[int, int]]:
    """(base, last) of the complete batches in a fetch slice (a partial tail dropped)."""
    out, pos = [], 0
    while pos + v2.HEADER_SIZE <= len(data):
        h = v2.parse_header(data, pos)
        if pos + h.size_in_bytes > len(data):
            break
        out.append((h.base_offset, h.last_offset))
        pos += h.size_in_bytes
    return out


def test_read_respects_max_bytes_within_a_segment(multi) -> None:  # type: ignore[no-untyped-def]
    """Sized as Kafka: max_bytes from the first batch (raised to its size with
    min_one_message), never past the segment's end."""
    log, batches = multi
    for i, (first, _last, size) in enumerate(batches):
        seg = log.segments[log._floor_segment_index(first)]
        following = [b for b in batches[i:] if b[0] < (seg.read_next_offset())]
        in_segment = sum(b[2] for b in following)
        for budget in [0, size - 1, size, size + 5, 10**6]:
            for min_one in (False, True):
                got = log.read(first, budget, min_one_message=min_one)
                expect = min(in_segment, max(budget, size) if min_one else budget)
                if not min_one and budget < size:
                    expect = 0  # an incomplete first batch is not sent (Kafka, v3+)
                if expect == 0:
                    assert got is None
                    continue
                assert got is not None
                assert got.length == expect
                assert got.segment is seg
                data = got.read_bytes()
                complete = whole_batches(data)
                assert complete == [(b[0], b[1]) for b in following][: len(complete)]
                assert sum(b[2] for b in following[: len(complete)]) <= expect


def test_read_too_small_budget_does_not_skip_to_a_later_segment(logdir: Path) -> None:
    log = PartitionLog.open(logdir, LogConfig(segment_bytes=500))
    big, small = producer_batch(1, value_size=400), producer_batch(1, value_size=10)
    assert len(small) < 200 < len(big) <= 500 < len(big) + len(small)
    log.append_as_leader(big, 0)
    log.append_as_leader(small, 0)  # rolls
    assert len(log.segments) == 2
    # Offset 0's batch does not fit: nothing (Kafka sends no incomplete first
    # batch), never offset 1's batch from the next segment.
    assert log.read(0, 200, min_one_message=False) is None
    assert log.read(0, 0, min_one_message=False) is None
    got = log.read(1, 200, min_one_message=False)
    assert got is not None and v2.parse_header(got.read_bytes()).base_offset == 1
    got = log.read(0, 200, min_one_message=True)
    assert got is not None and v2.parse_header(got.read_bytes()).base_offset == 0
    assert got.length == len(big)
    log.close()


def test_read_upper_bound_and_out_of_range(multi) -> None:  # type: ignore[no-untyped-def]
    log, batches = multi
    leo = log.log_end_offset
    for first, last, _size in batches:
        # High watermark at this batch's start: reads stop before it.
        for start in range(0, first):
            got = log.read(start, 10**6, upper_bound=first)
            assert got is not None
            # Bounded by the batch holding the upper bound: whole batches only.
            infos = batch_infos(got.read_bytes())
            assert infos[-1].last_offset < first
            assert any(b.last_offset >= start for b in infos)
        # An upper bound inside a batch excludes that batch.
        if last > first:
            got = log.read(first, 10**6, upper_bound=first + 1)
            assert got is None
    assert log.read(leo, 100) is None
    assert log.read(5, 100, upper_bound=5) is None
    with pytest.raises(OffsetOutOfRangeError):
        log.read(leo + 1, 100)
    log.update_high_watermark(leo)
    assert log.maybe_increment_log_start_offset(7)
    with pytest.raises(OffsetOutOfRangeError):
        log.read(6, 100)
    got = log.read(7, 1)
    assert got is not None and whole_batches(got.read_bytes())[0][1] >= 7
    with pytest.raises(OffsetOutOfRangeError):
        log.maybe_increment_log_start_offset(leo + 1)


# --- lookup by timestamp --------------------------------------------------------------------


@st.composite
def timestamped_batches(draw: st.DrawFn) -> list[list[int]]:
    n = draw(st.integers(1, 25))
    return [draw(st.lists(st.integers(0, 500), min_size=1, max_size=5)) for _ in range(n)]


@SETTINGS
@given(
    batches=timestamped_batches(),
    targets=st.lists(st.integers(-5, 520), min_size=1, max_size=15),
    start_at=st.integers(0, 30),
)
def test_fetch_offset_by_timestamp_matches_brute_force(
    batches: list[list[int]], targets: list[int], start_at: int
) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        cfg = LogConfig(segment_bytes=600, index_interval_bytes=120)
        log = PartitionLog.open(Path(tmp) / "t-0", cfg)
        flat: list[int] = []
        for tss in batches:
            log.append_as_leader(producer_batch(len(tss), ts=tss, value_size=20), 0)
            flat.extend(tss)
        log.update_high_watermark(log.log_end_offset)
        start = min(start_at, log.log_end_offset)
        log.maybe_increment_log_start_offset(start)

        def brute(target: int) -> tuple[int, int] | None:
            return next(((o, t) for o, t in enumerate(flat) if o >= start and t >= target), None)

        for target in targets:
            assert log.fetch_offset_by_timestamp(target) == brute(target)
        log.close()
        # The same answers after a clean restart (largest timestamps come from the
        # time indexes then).
        again = PartitionLog.open(
            Path(tmp) / "t-0",
            cfg,
            log_start_offset=start,
            recovery_point=len(flat),
            had_clean_shutdown=True,
        )
        for target in targets:
            assert again.fetch_offset_by_timestamp(target) == brute(target)
        again.close()


# --- truncation -----------------------------------------------------------------------------


@SETTINGS
@given(
    shapes=st.lists(st.integers(1, 4), min_size=1, max_size=30),
    cut=st.integers(0, 130),
)
def test_truncate_to_keeps_exactly_the_batches_below(shapes: list[int], cut: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        cfg = LogConfig(segment_bytes=500, index_interval_bytes=100)
        log = PartitionLog.open(Path(tmp) / "t-0", cfg)
        spans = []
        for i, n in enumerate(shapes):
            res = log.append_as_leader(producer_batch(n, ts=[10 * i] * n, value_size=12), i // 10)
            spans.append((res.first_offset, res.last_offset))
        leo = log.log_end_offset
        log.update_high_watermark(leo)
        changed = log.truncate_to(cut)
        assert changed == (cut < leo)
        kept = [s for s in spans if s[1] < cut] if cut < leo else spans
        assert [(b.base_offset, b.last_offset) for b in all_batches(log)] == kept
        new_leo = kept[-1][1] + 1 if kept else 0
        assert log.log_end_offset == new_leo
        assert log.high_watermark <= new_leo
        assert all(e.start_offset < new_leo for e in log.leader_epoch_cache.entries)
        assert log.active_segment.read_next_offset() == new_leo
        assert_indexes_match_scan(log)
        # Appends continue at the new end.
        res = log.append_as_leader(producer_batch(2), 5)
        assert res.first_offset == new_leo
        assert [r[0] for r in all_records(log)] == list(range(new_leo + 2))
        log.close()


def test_truncate_fully_and_start_at(logdir: Path) -> None:
    log = PartitionLog.open(logdir, LogConfig(segment_bytes=500))
    fill(log, 10)
    log.truncate_fully_and_start_at(1_000)
    assert [s.base_offset for s in log.segments] == [1_000]
    assert (log.log_start_offset, log.log_end_offset, log.high_watermark) == (1_000, 1_000, 1_000)
    assert sorted(p.name for p in logdir.iterdir() if p.suffix == ".log") == [
        segment_file_name(1_000, ".log")
    ]
    assert log.append_as_leader(producer_batch(1), 2).first_offset == 1_000
    log.close()


def test_truncate_at_the_log_end_drops_an_epoch_that_wrote_nothing(logdir: Path) -> None:
    """Found by the cluster tests: a broker that led briefly at epoch 7 and wrote
    nothing keeps `7 -> LEO` in its epoch cache; as a follower its divergence
    truncation to its own LEO must still drop that entry (Kafka's truncateTo does),
    or it keeps fetching as epoch 7, the leader keeps answering "diverged", and it
    never catches up."""
    log = PartitionLog.open(logdir)
    log.append_as_leader(producer_batch(1), 6)
    log.leader_epoch_cache.assign(7, log.log_end_offset)
    assert log.leader_epoch_cache.latest_epoch == 7
    assert log.truncate_to(log.log_end_offset) is False  # nothing cut from the log
    assert log.leader_epoch_cache.latest_epoch == 6
    log.close()
    entries = read_leader_epoch_checkpoint(logdir / "leader-epoch-checkpoint")
    assert [e.epoch for e in entries] == [6]


# --- validation -------------------------------------------------------------------------------


def _corrupt_crc(b: bytes) -> bytes:
    out = bytearray(b)
    out[-1] ^= 0x01
    return bytes(out)


def _wrong_magic(b: bytes) -> bytes:
    out = bytearray(b)
    out[16] = 1
    return bytes(out)


def _count_mismatch(b: bytes) -> bytes:
    out = bytearray(b)
    out[23:27] = (5).to_bytes(4, "big")  # lastOffsetDelta 5 for a 3-record batch
    out[17:21] = v2.compute_crc(out).to_bytes(4, "big")
    return bytes(out)


@pytest.mark.parametrize(
    ("mangle", "error", "words"),
    [
        (_corrupt_crc, CorruptRecordError, "CRC"),
        (_wrong_magic, CorruptRecordError, "magic"),
        (lambda b: b[:-5], CorruptRecordError, "size"),
        (lambda b: b[:40], CorruptRecordError, "truncated"),
        (_count_mismatch, InvalidRecordError, "record count 3"),
        (lambda b: b"\x00" * 30, CorruptRecordError, "truncated"),
    ],
)
def test_validate_rejects_and_writes_nothing(logdir: Path, mangle, error, words) -> None:  # type: ignore[no-untyped-def]
    log = PartitionLog.open(logdir)
    log.append_as_leader(producer_batch(2), 0)
    before = (log.log_end_offset, log.size, log.active_segment.log_path.read_bytes())
    good = producer_batch(3)
    with pytest.raises(error, match=words):
        log.append_as_leader(good + mangle(good), 0)
    if mangle is not _count_mismatch:  # a client-only check (see the follower tests)
        with pytest.raises(error, match=words):
            log.append_as_follower(
                build_batch([RecordSpec(b"k", b"v")], base_offset=2) + mangle(good)
            )
    assert (log.log_end_offset, log.size, log.active_segment.log_path.read_bytes()) == before
    with pytest.raises(CorruptRecordError, match="no record batches"):
        log.append_as_leader(b"", 0)
    log.close()


def test_oversize_batch_rejected(logdir: Path) -> None:
    log = PartitionLog.open(logdir, LogConfig(max_message_bytes=500))
    ok = producer_batch(1, value_size=300)
    big = producer_batch(1, value_size=600)
    assert len(ok) <= 500 < len(big)
    with pytest.raises(RecordTooLargeError, match=r"max\.message\.bytes 500"):
        log.append_as_leader(ok + big, 0)
    assert (log.log_end_offset, log.size) == (0, 0)
    log.append_as_leader(ok, 0)
    assert log.log_end_offset == 1
    log.close()


def test_follower_rejects_offsets_going_backwards(logdir: Path) -> None:
    log = PartitionLog.open(logdir, LogConfig(index_interval_bytes=0))
    log.append_as_follower(build_batch([RecordSpec(b"k", b"v")] * 2, base_offset=0))
    size = log.size
    overlapping = build_batch([RecordSpec(b"k", b"v")] * 3, base_offset=2) + build_batch(
        [RecordSpec(b"k", b"v")] * 3, base_offset=3
    )
    with pytest.raises(CorruptRecordError, match="out of order"):
        log.append_as_follower(overlapping)
    with pytest.raises(CorruptRecordError, match="below the log end offset"):
        log.append_as_follower(build_batch([RecordSpec(b"k", b"v")], base_offset=1))
    assert (log.log_end_offset, log.size) == (2, size)
    # Gaps are fine (compacted leaders).
    log.append_as_follower(build_batch([RecordSpec(b"k", b"v")], base_offset=10))
    assert log.log_end_offset == 11
    log.close()


# --- loading ---------------------------------------------------------------------------------


def snapshot_files(d: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(d.iterdir()) if p.is_file()}


def test_clean_reopen_preserves_everything(logdir: Path) -> None:
    cfg = LogConfig(segment_bytes=800, index_interval_bytes=150)
    log = PartitionLog.open(logdir, cfg)
    fill(log, 15)
    log.append_as_leader(producer_batch(2), 3)
    log.update_high_watermark(log.log_end_offset)
    log.maybe_increment_log_start_offset(4)
    records = all_records(log)
    state = (log.log_end_offset, [s.base_offset for s in log.segments])
    indexes = [(s.offset_index.entries, s.time_index.entries) for s in log.segments[:-1]]
    epochs = log.leader_epoch_cache.entries
    leo = log.log_end_offset
    log.close()
    files = snapshot_files(logdir)
    again = PartitionLog.open(
        logdir, cfg, log_start_offset=4, recovery_point=leo, had_clean_shutdown=True
    )
    assert again.load_report.recovered_segments == []
    assert all_records(again) == records
    assert (again.log_end_offset, [s.base_offset for s in again.segments]) == state
    assert [(s.offset_index.entries, s.time_index.entries) for s in again.segments[:-1]] == indexes
    assert again.leader_epoch_cache.entries == epochs
    assert (again.log_start_offset, again.recovery_point) == (4, leo)
    assert_indexes_match_scan(again)
    again.close()
    assert snapshot_files(logdir) == files  # a clean reopen rewrites nothing
    again = PartitionLog.open(logdir, cfg, log_start_offset=4, had_clean_shutdown=True)
    assert again.append_as_leader(producer_batch(1), 3).first_offset == leo
    again.close()


def _tear_truncate(path: Path, last: int) -> int:
    os.truncate(path, path.stat().st_size - 7)
    return last


def _tear_garbage(path: Path, last: int) -> int:
    with open(path, "ab") as f:
        f.write(b"\x00\x00\x00\x00\x00\x00\x00\x2a\x00\x00\x01\x00garbage-from-a-torn-write")
    return 0


def _tear_zeros(path: Path, last: int) -> int:
    with open(path, "ab") as f:
        f.write(b"\x00" * 4096)  # preallocated, never written
    return 0


def _tear_bitflip(path: Path, last: int) -> int:
    data = bytearray(path.read_bytes())
    data[-3] ^= 0x10
    path.write_bytes(bytes(data))
    return last


@pytest.mark.parametrize(
    ("tear", "reason"),
    [
        (_tear_truncate, "truncated"),
        (_tear_garbage, "invalid magic byte 97"),
        (_tear_zeros, "zero-filled"),
        (_tear_bitflip, "CRC-32C mismatch"),
    ],
)
def test_unclean_reopen_cuts_exactly_the_torn_tail(logdir: Path, tear, reason: str) -> None:  # type: ignore[no-untyped-def]
    cfg = LogConfig(index_interval_bytes=100)
    log = PartitionLog.open(logdir, cfg)
    fill(log, 12)
    records = all_records(log)
    last_size = len(all_batches(log)[-1].data)
    seg_path = log.active_segment.log_path
    log.close()
    good_size = seg_path.stat().st_size
    lost_batch = tear(seg_path, last_size)  # bytes of the last batch the tear destroys
    torn_size = seg_path.stat().st_size
    again = PartitionLog.open(logdir, cfg, had_clean_shutdown=False)
    report = again.load_report
    assert seg_path.stat().st_size == good_size - lost_batch
    assert report.truncated_bytes == torn_size - (good_size - lost_batch)
    assert report.recovered_segments == [0]
    assert len(report.truncation_reasons) == 1 and reason in report.truncation_reasons[0]
    kept = records[: len(records) - (3 if lost_batch else 0)]
    assert all_records(again) == kept
    assert again.log_end_offset == kept[-1][0] + 1
    assert_indexes_match_scan(again)
    res = again.append_as_leader(producer_batch(2), 1)
    assert res.first_offset == kept[-1][0] + 1
    again.close()


def test_unclean_reopen_deletes_segments_after_a_torn_one(logdir: Path) -> None:
    cfg = LogConfig(segment_bytes=600, index_interval_bytes=100)
    log = PartitionLog.open(logdir, cfg)
    fill(log, 20)
    bases = [s.base_offset for s in log.segments]
    assert len(bases) >= 3
    second = log.segments[1]
    torn_end = bases[2]
    kept = [r for r in all_records(log) if r[0] < torn_end - 3]  # its last batch goes
    log.close()
    path = logdir / segment_file_name(bases[1], ".log")
    data = bytearray(path.read_bytes())
    data[-1] ^= 0xFF
    path.write_bytes(bytes(data))
    assert second.base_offset == bases[1]
    again = PartitionLog.open(logdir, cfg, recovery_point=bases[1])
    assert [s.base_offset for s in again.segments] == bases[:2]
    for b in bases[2:]:
        assert not (logdir / segment_file_name(b, ".log")).exists()
        assert segment_file_name(b, ".log") in again.load_report.deleted_files
    assert all_records(again) == kept
    assert again.log_end_offset == torn_end - 3
    # Segments below the recovery point are trusted and not re-read.
    assert again.load_report.recovered_segments == [bases[1]]
    assert_indexes_match_scan(again)
    again.close()


def test_unclean_reopen_leaves_recovery_point_until_flushed(logdir: Path) -> None:
    log = PartitionLog.open(logdir)
    fill(log, 5)
    log.close()
    again = PartitionLog.open(logdir, recovery_point=6, had_clean_shutdown=False)
    assert again.log_end_offset == 15
    # What recovery read may not be durable yet: only a flush advances the point.
    assert again.recovery_point == 6
    again.flush()
    assert again.recovery_point == 15
    again.close()
    clean = PartitionLog.open(logdir, recovery_point=6, had_clean_shutdown=True)
    assert clean.recovery_point == 15
    clean.close()


def _three_segments(
    logdir: Path,
) -> tuple[LogConfig, list[int], list[tuple[int, int, bytes | None, bytes | None]]]:
    cfg = LogConfig(segment_bytes=600, index_interval_bytes=100)
    log = PartitionLog.open(logdir, cfg)
    fill(log, 12)
    bases = [s.base_offset for s in log.segments]
    records = all_records(log)
    log.close()
    assert len(bases) >= 3
    return cfg, bases, records


def test_leftover_deleted_and_cleaned_files_are_removed(logdir: Path) -> None:
    cfg, bases, records = _three_segments(logdir)
    stray = [
        segment_file_name(bases[0], ".log", ".deleted"),
        segment_file_name(bases[0], ".index", ".deleted"),
        segment_file_name(900, ".log", ".cleaned"),
        segment_file_name(900, ".timeindex", ".cleaned"),
    ]
    for name in stray:
        (logdir / name).write_bytes(b"leftover")
    log = PartitionLog.open(logdir, cfg, recovery_point=10**6, had_clean_shutdown=True)
    assert sorted(log.load_report.deleted_files) == sorted(stray)
    assert not any((logdir / n).exists() for n in stray)
    assert all_records(log) == records
    log.close()


def test_swap_file_replaces_the_segments_it_covers(logdir: Path) -> None:
    cfg, bases, records = _three_segments(logdir)
    # A compaction result covering the first two segments, left as .swap.
    merged = b"".join((logdir / segment_file_name(b, ".log")).read_bytes() for b in bases[:2])
    (logdir / segment_file_name(bases[0], ".log", ".swap")).write_bytes(merged)
    log = PartitionLog.open(logdir, cfg, recovery_point=10**6, had_clean_shutdown=True)
    assert log.load_report.swapped_in == [segment_file_name(bases[0], ".log")]
    assert segment_file_name(bases[1], ".log") in log.load_report.deleted_files
    assert [s.base_offset for s in log.segments] == [bases[0], *bases[2:]]
    assert not list(logdir.glob("*.swap"))
    assert all_records(log) == records
    assert_indexes_match_scan(log)  # the swapped-in segment's indexes were rebuilt
    log.close()


def test_swap_at_or_above_smallest_cleaned_is_dropped(logdir: Path) -> None:
    cfg, bases, records = _three_segments(logdir)
    orig = snapshot_files(logdir)
    swap = segment_file_name(bases[1], ".log", ".swap")
    cleaned = segment_file_name(bases[1], ".log", ".cleaned")
    (logdir / swap).write_bytes((logdir / segment_file_name(bases[1], ".log")).read_bytes()[:50])
    (logdir / cleaned).write_bytes(b"partial")
    log = PartitionLog.open(logdir, cfg, recovery_point=10**6, had_clean_shutdown=True)
    assert sorted(log.load_report.deleted_files) == sorted([swap, cleaned])
    assert log.load_report.swapped_in == []
    assert [s.base_offset for s in log.segments] == bases
    assert all_records(log) == records
    log.close()
    assert snapshot_files(logdir) == orig


def test_log_start_checkpoint_beyond_the_end_starts_empty_there(logdir: Path) -> None:
    log = PartitionLog.open(logdir)
    fill(log, 4)
    log.close()
    again = PartitionLog.open(logdir, log_start_offset=500, recovery_point=12)
    assert [s.base_offset for s in again.segments] == [500]
    assert (again.log_start_offset, again.log_end_offset) == (500, 500)
    assert not (logdir / segment_file_name(0, ".log")).exists()
    assert all_records(again) == []
    assert again.append_as_leader(producer_batch(1), 1).first_offset == 500
    again.close()


def test_orphan_index_files_are_removed(logdir: Path) -> None:
    cfg, _, records = _three_segments(logdir)
    orphans = [segment_file_name(7777, ext) for ext in (".index", ".timeindex", ".txnindex")]
    for name in orphans:
        (logdir / name).write_bytes(b"")
    log = PartitionLog.open(logdir, cfg, recovery_point=10**6, had_clean_shutdown=True)
    assert sorted(log.load_report.deleted_files) == sorted(orphans)
    assert not any((logdir / n).exists() for n in orphans)
    assert all_records(log) == records
    log.close()


@pytest.mark.parametrize(
    "damage",
    ["delete-index", "delete-timeindex", "delete-both", "garbage-index", "garbage-timeindex"],
)
def test_missing_or_corrupt_index_rebuilt_on_open(logdir: Path, damage: str) -> None:
    cfg, bases, records = _three_segments(logdir)
    target = bases[1]
    expect = snapshot_files(logdir)
    index = logdir / segment_file_name(target, ".index")
    timeindex = logdir / segment_file_name(target, ".timeindex")
    assert index.stat().st_size > 0 and timeindex.stat().st_size > 0
    if damage in ("delete-index", "delete-both"):
        index.unlink()
    if damage in ("delete-timeindex", "delete-both"):
        timeindex.unlink()
    if damage == "garbage-index":
        # Offsets going backwards: Kafka's CorruptIndexException.
        index.write_bytes((5).to_bytes(4, "big") + bytes(4) + (3).to_bytes(4, "big") + bytes(4))
    if damage == "garbage-timeindex":
        timeindex.write_bytes(
            (900).to_bytes(8, "big") + bytes(4) + (100).to_bytes(8, "big") + (1).to_bytes(4, "big")
        )
    log = PartitionLog.open(logdir, cfg, recovery_point=10**6, had_clean_shutdown=True)
    assert log.load_report.rebuilt_indexes == [target]
    assert all_records(log) == records
    assert_indexes_match_scan(log)
    log.close()
    assert snapshot_files(logdir) == expect  # rebuilt byte for byte


def test_open_real_kafka_partition(fixture_copy) -> None:  # type: ignore[no-untyped-def]
    d: Path = fixture_copy("test-0")
    for p in d.iterdir():
        p.chmod(0o644)
    kafka_index = (d / "00000000000000000000.index").read_bytes()
    kafka_timeindex = (d / "00000000000000000000.timeindex").read_bytes()
    log = PartitionLog.open(d, recovery_point=0, had_clean_shutdown=False)
    report = log.load_report
    assert (report.recovered_segments, report.truncated_bytes) == ([0], 0)
    assert log.log_end_offset == 109  # the producer snapshot is 00000000000000000109
    assert log.leader_epoch_cache.entries == [EpochEntry(0, 0)]
    # Recovery rebuilds exactly Kafka's own indexes.
    assert log.active_segment.offset_index.to_bytes() == kafka_index
    assert log.active_segment.time_index.to_bytes() == kafka_timeindex
    res = log.append_as_leader(producer_batch(2), 0)
    assert (res.first_offset, res.last_offset) == (109, 110)
    assert [r[0] for r in all_records(log)] == list(range(111))
    log.close()
