"""LogSegment: sparse indexing, rolling conditions, reads, recovery and truncation.

Expectations come from a small model of Kafka's rules written here (one offset
and time index entry when more than index.interval.bytes were appended since the
previous one), compared with what the segment writes and with `scan_log` of the
same file.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import pytest

from kt.storage.errors import CorruptRecordError, LogSegmentOffsetOverflowError
from kt.storage.index_check import verify_segment
from kt.storage.offset_index import OffsetPosition, read_offset_index
from kt.storage.record_batch import RecordSpec, build_batch
from kt.storage.segment import (
    INT32_MAX,
    BatchInfo,
    LogSegment,
    batch_infos,
    scan_log,
)
from kt.storage.time_index import TimestampOffset, read_time_index


@dataclass(frozen=True)
class Spec:
    """A batch as the model sees it."""

    base: int
    count: int
    timestamps: tuple[int, ...]
    value_size: int = 40


def make(spec: Spec) -> bytes:
    return build_batch(
        [
            RecordSpec(b"k%d" % i, bytes([97 + i % 26]) * spec.value_size, timestamp=ts)
            for i, ts in enumerate(spec.timestamps)
        ],
        base_offset=spec.base,
    )


def specs(n: int, *, start: int = 0, per_batch: int = 3, ts0: int = 1_000, step: int = 10):
    out = []
    offset = start
    for b in range(n):
        tss = tuple(ts0 + (b * per_batch + i) * step for i in range(per_batch))
        out.append(Spec(offset, per_batch, tss))
        offset += per_batch
    return out


def model_indexes(
    batches: list[bytes], base: int, interval: int
) -> tuple[list[OffsetPosition], list[TimestampOffset]]:
    """Kafka's sparse-index rule, computed from the raw batch headers."""
    offsets: list[OffsetPosition] = []
    times: list[TimestampOffset] = []
    since = position = 0
    max_ts, max_ts_offset = -1, base
    for data in batches:
        (info,) = batch_infos(data)
        if info.max_timestamp > max_ts:
            max_ts, max_ts_offset = info.max_timestamp, info.last_offset
        if since > interval:
            offsets.append(OffsetPosition(info.last_offset, position))
            if not times or max_ts > times[-1].timestamp:
                times.append(TimestampOffset(max_ts, max_ts_offset))
            since = 0
        position += len(data)
        since += len(data)
    return offsets, times


def open_new(d: Path, base: int = 0, **kw) -> LogSegment:  # type: ignore[no-untyped-def]
    d.mkdir(parents=True, exist_ok=True)
    return LogSegment.open(d, base, create=True, now_ms=kw.pop("now_ms", 0), **kw)


def append(seg: LogSegment, *datas: bytes) -> None:
    joined = b"".join(datas)
    seg.append(joined, batch_infos(joined))


# --- batch_infos ------------------------------------------------------------------


def test_batch_infos_reads_each_header() -> None:
    a = make(Spec(5, 3, (100, 300, 200)))
    b = make(Spec(8, 1, (50,)))
    assert batch_infos(a + b) == [BatchInfo(7, 300, len(a)), BatchInfo(8, 50, len(b))]
    with pytest.raises(CorruptRecordError):
        batch_infos(a + b[:-1])
    with pytest.raises(CorruptRecordError):
        batch_infos(a + b[:30])


# --- sparse indexing -------------------------------------------------------------


@pytest.mark.parametrize("interval", [0, 1, 150, 400, 4096])
@pytest.mark.parametrize("together", [False, True])
def test_index_entries_follow_index_interval_bytes(
    tmp_path: Path, interval: int, together: bool
) -> None:
    batches = [make(s) for s in specs(40)]
    seg = open_new(tmp_path, index_interval_bytes=interval)
    if together:
        append(seg, *batches)
    else:
        for b in batches:
            append(seg, b)
    offsets, times = model_indexes(batches, 0, interval)
    assert seg.offset_index.entries == offsets
    assert seg.time_index.entries == times
    scan = scan_log(seg.records, 0, interval)
    assert scan.offset_entries == offsets
    # A scan also adds the segment's final largest-timestamp entry, written at roll.
    assert scan.time_entries[: len(times)] == times
    assert scan.time_entries[-1] == TimestampOffset(seg.max_timestamp_so_far, 119)
    seg.close()
    on_disk = read_offset_index(tmp_path / "00000000000000000000.index")
    assert list(on_disk) == offsets
    assert list(read_time_index(tmp_path / "00000000000000000000.timeindex")) == scan.time_entries
    assert verify_segment(seg.log_path).ok


def test_index_entries_concrete_positions(tmp_path: Path) -> None:
    """Equal-sized batches: an entry for every batch once more than the interval has
    accumulated since the last one."""
    batches = [make(s) for s in specs(10, per_batch=1)]
    size = len(batches[0])
    assert all(len(b) == size for b in batches)
    seg = open_new(tmp_path, index_interval_bytes=2 * size)
    append(seg, *batches)
    # Bytes since the last entry reach 3*size (> 2*size) before batches 3, 6 and 9.
    assert seg.offset_index.entries == [
        OffsetPosition(3, 3 * size),
        OffsetPosition(6, 6 * size),
        OffsetPosition(9, 9 * size),
    ]
    assert seg.time_index.entries == [
        TimestampOffset(1030, 3),
        TimestampOffset(1060, 6),
        TimestampOffset(1090, 9),
    ]
    seg.close()


def test_time_index_keeps_largest_timestamp_and_its_offset(tmp_path: Path) -> None:
    # Non-monotonic CreateTime: the time index names the batch holding the maximum.
    batches = [
        make(Spec(0, 2, (5_000, 5_001))),
        make(Spec(2, 2, (9_000, 100))),
        make(Spec(4, 2, (10, 20))),
        make(Spec(6, 2, (30, 40))),
        make(Spec(8, 2, (9_500, 1))),
    ]
    seg = open_new(tmp_path, index_interval_bytes=1)
    append(seg, *batches)
    assert seg.time_index.entries == [TimestampOffset(9_000, 3), TimestampOffset(9_500, 9)]
    assert [e.offset for e in seg.offset_index.entries] == [3, 5, 7, 9]
    assert (seg.max_timestamp_so_far, seg.offset_of_max_timestamp_so_far) == (9_500, 9)
    seg.close()


def test_on_become_inactive_appends_final_time_entry(tmp_path: Path) -> None:
    batches = [make(s) for s in specs(3)]
    seg = open_new(tmp_path)  # 4096: no regular entries for three small batches
    append(seg, *batches)
    assert seg.time_index.entries == []
    seg.on_become_inactive()
    assert seg.time_index.entries == [TimestampOffset(1080, 8)]
    seg.close()
    assert list(read_time_index(tmp_path / "00000000000000000000.timeindex")) == [
        TimestampOffset(1080, 8)
    ]


def test_close_records_largest_timestamp_for_clean_reopen(tmp_path: Path) -> None:
    seg = open_new(tmp_path)
    append(seg, *[make(s) for s in specs(3)])
    seg.close()
    again, rec = LogSegment.open_or_recover(tmp_path, 0)
    assert rec is None  # indexes present: no recovery
    assert (again.max_timestamp_so_far, again.offset_of_max_timestamp_so_far) == (1080, 8)
    assert again.find_offset_by_timestamp(1041, 0) == (5, 1050)
    again.close()


# --- rolling -----------------------------------------------------------------------


def roll_kw(**over: int) -> dict[str, int]:
    kw = {
        "max_segment_bytes": 10_000,
        "max_segment_ms": 1_000_000,
        "jitter_ms": 0,
        "messages_size": 100,
        "max_timestamp_in_messages": 0,
        "max_offset_in_messages": 10,
        "now_ms": 0,
    }
    kw.update(over)
    return kw


def test_should_roll_on_size(tmp_path: Path) -> None:
    seg = open_new(tmp_path)
    data = make(Spec(0, 3, (1, 2, 3)))
    append(seg, data)
    n = len(data)
    assert not seg.should_roll(**roll_kw(max_segment_bytes=n + 100, messages_size=100))
    assert seg.should_roll(**roll_kw(max_segment_bytes=n + 99, messages_size=100))
    seg.close()


def test_should_roll_on_time_from_first_batch_timestamp(tmp_path: Path) -> None:
    seg = open_new(tmp_path, now_ms=50)
    # An empty segment never rolls on time, however old.
    assert not seg.should_roll(**roll_kw(max_segment_ms=10, now_ms=10**9))
    append(seg, make(Spec(0, 2, (1_000, 1_500))))  # first batch's max timestamp: 1500
    kw = roll_kw(max_segment_ms=500)
    assert not seg.should_roll(**{**kw, "max_timestamp_in_messages": 2_000})
    assert seg.should_roll(**{**kw, "max_timestamp_in_messages": 2_001})
    # segment.jitter.ms shortens the wait.
    assert seg.should_roll(**{**kw, "max_timestamp_in_messages": 1_901, "jitter_ms": 100})
    seg.close()
    # After reopening, the first batch's timestamp is read back from the log.
    again = LogSegment.open(tmp_path, 0)
    assert again.time_waited_for_roll(0, 2_001) == 501
    again.close()


def test_should_roll_on_time_without_timestamps_uses_creation_time(tmp_path: Path) -> None:
    seg = open_new(tmp_path, now_ms=1_000)
    append(seg, build_batch([RecordSpec(b"k", b"v", timestamp=-1)]))
    kw = roll_kw(max_segment_ms=500, max_timestamp_in_messages=-1)
    assert not seg.should_roll(**{**kw, "now_ms": 1_500})
    assert seg.should_roll(**{**kw, "now_ms": 1_501})
    seg.close()


def test_should_roll_on_full_indexes_and_offset_overflow(tmp_path: Path) -> None:
    # 48 bytes: 6 offset entries, 4 time entries (the last reserved for the roll).
    # One timestamp throughout, so only the offset index fills up.
    seg = open_new(tmp_path, index_interval_bytes=0, max_index_size=48)
    data = [make(Spec(i, 1, (7,))) for i in range(7)]
    append(seg, *data[:6])
    assert len(seg.offset_index) == 5 and not seg.should_roll(**roll_kw())
    append(seg, data[6])  # entries for batches 1..6: the offset index is full
    assert len(seg.offset_index) == 6 and len(seg.time_index) == 1
    assert seg.should_roll(**roll_kw(max_offset_in_messages=7))
    seg.close()

    # Rising timestamps fill the time index first: full at 3 of its 4 slots.
    seg = open_new(tmp_path / "t", index_interval_bytes=0, max_index_size=48)
    append(seg, *[make(Spec(i, 1, (i,))) for i in range(4)])
    assert len(seg.time_index) == 3 and not seg.offset_index.is_full()
    assert seg.should_roll(**roll_kw(max_offset_in_messages=4))
    seg.close()

    big = open_new(tmp_path / "b", base=100)
    assert not big.should_roll(**roll_kw(max_offset_in_messages=100 + INT32_MAX))
    assert big.should_roll(**roll_kw(max_offset_in_messages=101 + INT32_MAX))
    with pytest.raises(LogSegmentOffsetOverflowError):
        append(big, make(Spec(101 + INT32_MAX, 1, (1,))))
    assert big.size == 0
    big.close()


# --- reading ------------------------------------------------------------------------


def test_translate_and_read_sized_as_kafka(tmp_path: Path) -> None:
    batches = [make(s) for s in specs(12)]
    seg = open_new(tmp_path, base=0, index_interval_bytes=200)
    append(seg, *batches)
    positions = [sum(len(b) for b in batches[:i]) for i in range(len(batches))]
    for offset in range(36):
        loc = seg.translate_offset(offset)
        assert loc is not None
        i = offset // 3
        assert (loc.position, loc.offset, loc.size) == (positions[i], 3 * i + 2, len(batches[i]))
        # Kafka's LogSegment.read: max_size bytes from the batch, capped by the data.
        budget = 2 * len(batches[0]) - 7
        got = seg.read(offset, budget)
        assert got == (positions[i], min(budget, seg.size - positions[i]))
    assert seg.translate_offset(36) is None
    assert seg.read(36, 1000) is None
    # A budget below the first batch: nothing (Kafka's fetch drops an incomplete
    # first batch: a client could not use it), or the whole first batch with
    # min_one_message; zero stays zero.
    assert seg.read(4, 10) == (positions[1], 0)
    assert seg.read(4, 0) == (positions[1], 0)
    assert seg.read(4, 10, min_one_message=True) == (positions[1], len(batches[1]))
    # max_position stops before the batch at that position, min_one_message or not.
    assert seg.read(0, 10_000, max_position=positions[3]) == (0, positions[3])
    assert seg.read(3, 1, max_position=positions[3], min_one_message=True) == (
        positions[1],
        len(batches[1]),
    )
    assert seg.read(9, 10_000, max_position=positions[3]) is None
    seg.close()


# --- recovery and truncation ----------------------------------------------------------


def test_recover_rebuilds_indexes_and_cuts_a_torn_tail(tmp_path: Path) -> None:
    batches = [make(s) for s in specs(30)]
    seg = open_new(tmp_path, index_interval_bytes=300)
    append(seg, *batches)
    offsets, times = seg.offset_index.entries, seg.time_index.entries
    good = seg.size
    seg.close()
    with open(tmp_path / "00000000000000000000.log", "ab") as f:
        f.write(batches[0][:40])
    seg = LogSegment.open(tmp_path, 0, index_interval_bytes=300)
    # Wipe the in-memory indexes to show recovery rebuilds them.
    seg.offset_index.reset()
    seg.time_index.reset()
    result = seg.recover()
    assert (result.truncated_bytes, result.valid_bytes) == (40, good)
    assert result.reason is not None and "truncated" in result.reason
    assert seg.size == good == os.path.getsize(seg.log_path)
    assert seg.offset_index.entries == offsets
    assert seg.time_index.entries[: len(times)] == times
    assert seg.read_next_offset() == 90
    seg.close()


@pytest.mark.parametrize("cut", [0, 1, 2, 3, 17, 44, 45, 46, 60, 89, 90])
def test_truncate_to_removes_the_batch_holding_the_offset_and_after(
    tmp_path: Path, cut: int
) -> None:
    batches = [make(s) for s in specs(30)]
    seg = open_new(tmp_path, index_interval_bytes=250)
    append(seg, *batches)
    seg.truncate_to(cut)
    kept = [b for i, b in enumerate(batches) if 3 * i + 2 < cut]
    assert seg.size == sum(len(b) for b in kept)
    assert seg.read_next_offset() == 3 * len(kept)
    scan = scan_log(seg.records, 0, 250)
    assert scan.invalid_bytes == 0
    assert seg.offset_index.entries == scan.offset_entries
    assert seg.time_index.entries == scan.time_entries[: len(seg.time_index)]
    expected_max = (1000 + (3 * len(kept) - 1) * 10, 3 * len(kept) - 1) if kept else (-1, 0)
    assert (seg.max_timestamp_so_far, seg.offset_of_max_timestamp_so_far) == expected_max
    seg.close()
    assert verify_segment(tmp_path / "00000000000000000000.log").ok


def test_find_offset_by_timestamp_scans_from_the_time_index(tmp_path: Path) -> None:
    tss = [(500, 400), (300, 800), (100, 200), (900, 100), (50, 60)]
    batches = [make(Spec(2 * i, 2, t)) for i, t in enumerate(tss)]
    seg = open_new(tmp_path, index_interval_bytes=1)
    append(seg, *batches)
    flat = [(o, t) for o, t in enumerate(x for pair in tss for x in pair)]
    for target in [0, 60, 100, 399, 400, 401, 500, 800, 801, 900]:
        expect = next(((o, t) for o, t in flat if t >= target), None)
        assert seg.find_offset_by_timestamp(target, 0) == expect
    # starting_offset skips earlier records.
    assert seg.find_offset_by_timestamp(100, 5) == (5, 200)
    assert seg.find_offset_by_timestamp(300, 5) == (6, 900)
    assert seg.find_offset_by_timestamp(901, 0) is None
    seg.close()
