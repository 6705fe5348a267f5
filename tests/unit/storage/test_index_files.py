"""Offset and time indexes: byte layout, Kafka's fixtures, zero-filled tails, append rules."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kt.storage.errors import CorruptIndexError, LogSegmentOffsetOverflowError
from kt.storage.offset_index import (
    DEFAULT_MAX_INDEX_SIZE,
    OffsetIndex,
    OffsetIndexView,
    OffsetPosition,
    encode_offset_index,
    max_entries,
    read_offset_index,
)
from kt.storage.time_index import (
    TimeIndex,
    TimeIndexView,
    TimestampOffset,
    encode_time_index,
    read_time_index,
)

TEST0 = "test-0/00000000000000000000"


def test_real_offset_index_round_trips(fixtures_dir: Path) -> None:
    path = fixtures_dir / f"{TEST0}.index"
    view = read_offset_index(path)
    assert len(view) == 45 and view.problems() == []
    assert view[0] == OffsetPosition(1, 5158)
    assert view[-1] == OffsetPosition(107, 228545)
    assert encode_offset_index(0, view) == path.read_bytes()
    assert view.lookup(0) == OffsetPosition(0, 0)  # below the first entry: base offset, pos 0
    assert view.lookup(1) == OffsetPosition(1, 5158)
    assert view.lookup(10**9) == view[-1]


@pytest.mark.parametrize(
    "rel", [TEST0, "tenitems-0/00000000000000000000", "quickstart-events-0/00000000000000000000"]
)
def test_real_time_indexes_round_trip(fixtures_dir: Path, rel: str) -> None:
    path = fixtures_dir / f"{rel}.timeindex"
    view = read_time_index(path)
    assert view.problems() == []
    assert len(view) == path.stat().st_size // 12
    assert encode_time_index(0, view) == path.read_bytes()


def test_real_time_index_lookup(fixtures_dir: Path) -> None:
    view = read_time_index(fixtures_dir / f"{TEST0}.timeindex")
    assert len(view) == 46
    first = view[0]
    assert first == TimestampOffset(1676167330768, 1)
    assert view.lookup(first.timestamp - 1) == TimestampOffset(-1, 0)
    assert view.lookup(first.timestamp) == first
    assert view.lookup(view[5].timestamp + 1) == view[5]


def test_byte_layouts() -> None:
    idx = OffsetIndex(1000)
    idx.append(1000, 0)
    idx.append(1007, 4096)
    assert idx.to_bytes() == struct.pack(">ii", 0, 0) + struct.pack(">ii", 7, 4096)
    tix = TimeIndex(1000)
    assert tix.maybe_append(1_700_000_000_000, 1003)
    assert tix.to_bytes() == struct.pack(">qi", 1_700_000_000_000, 3)


def test_zero_filled_preallocated_tail() -> None:
    # An active segment's index after an unclean shutdown: 3 entries then zeros.
    body = struct.pack(">ii", 0, 0) + struct.pack(">ii", 5, 4100) + struct.pack(">ii", 9, 8300)
    data = body + bytes(DEFAULT_MAX_INDEX_SIZE - len(body))
    view = OffsetIndexView(data, 100)
    assert len(view) == 3
    assert view.layout.tail_entries == DEFAULT_MAX_INDEX_SIZE // 8 - 3
    assert view.problems() == []
    assert view.lookup(10**6) == OffsetPosition(109, 8300)

    tbody = struct.pack(">qi", 10, 0) + struct.pack(">qi", 20, 5)
    tview = TimeIndexView(tbody + bytes(12 * 1000), 100)
    assert list(tview) == [TimestampOffset(10, 100), TimestampOffset(20, 105)]


def test_all_zero_file_has_one_entry_at_base() -> None:
    # Slot 0 = (rel 0, pos 0) is a legitimate first entry; the rest is preallocation.
    view = OffsetIndexView(bytes(80), 7)
    assert list(view) == [OffsetPosition(7, 0)]
    assert OffsetIndexView(b"", 7).entries() == []


def test_damage_is_reported() -> None:
    good = struct.pack(">ii", 1, 10) + struct.pack(">ii", 2, 20)
    torn = OffsetIndexView(good + b"\x00\x00\x01", 0)
    assert len(torn) == 2
    assert "not a multiple of 8" in torn.problems()[0]
    garbage_after_zero = OffsetIndexView(good + bytes(16) + b"\xff" * 8, 0)
    assert len(garbage_after_zero) == 2
    assert "non-zero bytes at position 32" in garbage_after_zero.problems()[0]
    backwards = OffsetIndexView(struct.pack(">ii", 5, 10) + struct.pack(">ii", 3, 20), 0)
    with pytest.raises(CorruptIndexError, match="not greater"):
        backwards.check()
    tbad = TimeIndexView(struct.pack(">qi", 50, 1) + struct.pack(">qi", 40, 2) + b"\x01", 0)
    problems = tbad.problems()
    assert any("not a multiple of 12" in p for p in problems)
    assert any("timestamp 40" in p for p in problems)


def test_offset_index_append_rules() -> None:
    idx = OffsetIndex(100, max_index_size=8 * 3 + 5)  # rounds down to 3 entries
    assert idx.max_entries == 3 == max_entries(29, 8)
    assert idx.last_offset == 100
    idx.append(100, 0)  # relative offset 0 is allowed for the first entry
    with pytest.raises(CorruptIndexError, match="no larger than the last offset"):
        idx.append(100, 10)
    idx.append(105, 4096)
    with pytest.raises(LogSegmentOffsetOverflowError):
        idx.append(100 + 2**31, 5000)
    idx.append(110, 8192)
    assert idx.is_full()
    with pytest.raises(CorruptIndexError, match="full"):
        idx.append(120, 9000)
    assert idx.lookup(107) == OffsetPosition(105, 4096)
    idx.truncate_to(105)  # removes the entry for 105 and everything after
    assert idx.entries == [OffsetPosition(100, 0)]
    idx.truncate_to(101)
    assert len(idx) == 1


def test_time_index_maybe_append_semantics() -> None:
    tix = TimeIndex(0, max_index_size=12 * 3)
    assert tix.last_entry == TimestampOffset(-1, 0)
    assert tix.maybe_append(100, 5)
    assert not tix.maybe_append(100, 7)  # same timestamp: ignored (roll re-offers it)
    with pytest.raises(CorruptIndexError, match="smaller than the last offset"):
        tix.maybe_append(200, 4)
    with pytest.raises(CorruptIndexError, match="smaller than the last timestamp"):
        tix.maybe_append(50, 9)
    assert tix.maybe_append(200, 9)
    assert tix.is_full()  # max_entries - 1: the last slot is reserved
    with pytest.raises(CorruptIndexError, match="full"):
        tix.maybe_append(300, 10)
    assert tix.maybe_append(300, 10, skip_full_check=True)
    assert tix.lookup(250) == TimestampOffset(200, 9)
    tix.truncate_to(9)
    assert tix.entries == [TimestampOffset(100, 5)]


def test_live_index_files(tmp_path: Path) -> None:
    path = tmp_path / "00000000000000000100.index"
    # A preallocated file left by an unclean shutdown is trimmed when opened for append.
    path.write_bytes(struct.pack(">ii", 0, 0) + struct.pack(">ii", 3, 500) + bytes(800))
    idx = OffsetIndex.open(path)
    assert idx.entries == [OffsetPosition(100, 0), OffsetPosition(103, 500)]
    assert path.stat().st_size == 16
    idx.append(110, 900)
    idx.flush()
    assert path.read_bytes()[-8:] == struct.pack(">ii", 10, 900)
    idx.truncate_to(103)
    idx.flush()
    assert path.stat().st_size == 8
    idx.append(104, 600)
    idx.close()
    assert read_offset_index(path).entries() == [OffsetPosition(100, 0), OffsetPosition(104, 600)]

    tpath = tmp_path / "00000000000000000100.timeindex"
    tix = TimeIndex.open(tpath)  # created when missing
    tix.maybe_append(1000, 100)
    tix.maybe_append(2000, 104)
    tix.close()
    tix2 = TimeIndex.open(tpath)
    assert tix2.last_entry == TimestampOffset(2000, 104)
    tix2.write()  # atomic rewrite keeps the handle usable
    tix2.maybe_append(3000, 105)
    tix2.close()
    assert len(read_time_index(tpath)) == 3


def test_open_refuses_corrupt_index(tmp_path: Path) -> None:
    path = tmp_path / "00000000000000000000.index"
    data = struct.pack(">ii", 5, 10) + struct.pack(">ii", 3, 20)
    path.write_bytes(data)
    with pytest.raises(CorruptIndexError, match="no larger"):
        OffsetIndex.open(path)
    assert path.read_bytes() == data


offsets = st.lists(st.integers(0, 2**31 - 1), unique=True, max_size=50).map(sorted)


@given(offsets, st.integers(0, 2**40))
def test_offset_index_round_trip(rels: list[int], base: int) -> None:
    entries = [OffsetPosition(base + r, i * 100) for i, r in enumerate(rels)]
    data = encode_offset_index(base, entries)
    assert len(data) == 8 * len(entries)
    view = OffsetIndexView(data, base)
    assert list(view) == entries
    for e in entries:
        assert view.lookup(e.offset) == e


@given(
    st.lists(st.integers(0, 2**62), unique=True, max_size=50).map(sorted),
    st.integers(0, 2**40),
)
def test_time_index_round_trip(timestamps: list[int], base: int) -> None:
    entries = [TimestampOffset(ts, base + i) for i, ts in enumerate(timestamps)]
    data = encode_time_index(base, entries)
    view = TimeIndexView(data, base)
    assert list(view) == entries
