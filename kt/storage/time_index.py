"""Kafka's time index (``.timeindex``, KIP-33): max timestamp so far → offset.

Each entry is 12 bytes, big-endian: timestamp (int64) and relative offset (int32).
An entry (T, O) says "the largest timestamp among records up to offset O is T", so
both columns are monotonic. Preallocation works as for the offset index: slot 0
always counts, and a later all-zero slot (timestamp 0, relative offset 0) is the
start of a zero-filled tail. A genuine entry after the first can never have
timestamp 0: ``maybeAppend`` only appends timestamps greater than the last one and
the first must exceed -1.

Append semantics follow Kafka's ``TimeIndex.maybeAppend``: offsets must not
decrease, timestamps must not decrease, an entry is only added when its timestamp
is greater than the last one, and ``is_full`` reserves the last slot for the
entry written when the segment becomes inactive (``skip_full_check``).
"""

from __future__ import annotations

import bisect
import os
import struct
from collections.abc import Iterable
from pathlib import Path
from typing import NamedTuple

from kt.storage.errors import CorruptIndexError
from kt.storage.offset_index import (
    DEFAULT_MAX_INDEX_SIZE,
    FixedWidthIndex,
    IndexLayout,
    IndexView,
    base_offset_for,
    layout_problems,
)

TIME_INDEX_ENTRY_SIZE = 12
NO_TIMESTAMP = -1  # RecordBatch.NO_TIMESTAMP

_ENTRY = struct.Struct(">qi")


class TimestampOffset(NamedTuple):
    """One time-index entry: a timestamp (ms) and the absolute offset it was reached at."""

    timestamp: int
    offset: int


def _time_end_marker(data: bytes, i: int) -> bool:
    ts, rel = _ENTRY.unpack_from(data, i * TIME_INDEX_ENTRY_SIZE)
    return bool(ts == 0 and rel == 0)


class TimeIndexView(IndexView[TimestampOffset]):
    """Read-only view of a time index file's bytes: :class:`TimestampOffset` entries."""

    entry_size = TIME_INDEX_ENTRY_SIZE
    _struct = _ENTRY

    def _is_end_marker(self, data: bytes, i: int) -> bool:
        return _time_end_marker(data, i)

    def _decode(self, first: int, second: int) -> TimestampOffset:
        return TimestampOffset(first, self.base_offset + second)

    def lookup(self, target_timestamp: int) -> TimestampOffset:
        """The last entry with timestamp <= target, or (-1, base_offset) — Kafka's ``lookup``."""
        return _floor_by_timestamp(self, target_timestamp, self.base_offset)

    def problems(self) -> list[str]:
        """Everything wrong with the file, in order; empty when it is sound."""
        return _time_problems(self, self.layout)


def _floor_by_timestamp(
    entries: TimeIndexView | list[TimestampOffset], target: int, base_offset: int
) -> TimestampOffset:
    i = bisect.bisect_right(entries, target, key=lambda e: e.timestamp)
    return TimestampOffset(NO_TIMESTAMP, base_offset) if i == 0 else entries[i - 1]


def _time_problems(entries: Iterable[TimestampOffset], layout: IndexLayout | None) -> list[str]:
    out: list[str] = []
    if layout is not None:
        out += layout_problems(layout)
    prev: TimestampOffset | None = None
    for i, e in enumerate(entries):
        if prev is not None:
            if e.timestamp <= prev.timestamp:
                out.append(
                    f"entry {i}: timestamp {e.timestamp} is not greater than the previous "
                    f"entry's {prev.timestamp}"
                )
            if e.offset < prev.offset:
                out.append(
                    f"entry {i}: offset {e.offset} is less than the previous entry's {prev.offset}"
                )
        prev = e
    return out


def read_time_index(path: str | os.PathLike[str], base_offset: int | None = None) -> TimeIndexView:
    """Read a time index file; ``base_offset`` defaults to the one in its name."""
    base = base_offset_for(path, base_offset)
    return TimeIndexView(Path(path).read_bytes(), base, str(path))


class TimeIndex(FixedWidthIndex[TimestampOffset]):
    """The time index of one segment, as the log engine maintains it."""

    entry_size = TIME_INDEX_ENTRY_SIZE
    _struct = _ENTRY

    def _encode(self, entry: TimestampOffset) -> bytes:
        return _ENTRY.pack(entry.timestamp, entry.offset - self.base_offset)

    @classmethod
    def from_entries(
        cls,
        base_offset: int,
        entries: Iterable[TimestampOffset],
        max_index_size: int = DEFAULT_MAX_INDEX_SIZE,
    ) -> TimeIndex:
        """An in-memory index holding ``entries``; each must be a real append."""
        index = cls(base_offset, max_index_size)
        for e in entries:
            before = len(index)
            index.maybe_append(e.timestamp, e.offset, skip_full_check=True)
            if len(index) == before:
                raise CorruptIndexError(
                    f"entry {before}: timestamp {e.timestamp} is not greater than the "
                    f"previous entry's"
                )
        return index

    @classmethod
    def open(
        cls,
        path: str | os.PathLike[str],
        base_offset: int | None = None,
        max_index_size: int = DEFAULT_MAX_INDEX_SIZE,
    ) -> TimeIndex:
        """Open (creating if missing) a time index file for appending; a tail is cut off."""
        p = Path(path)
        base = base_offset_for(p, base_offset)
        if not p.exists():
            p.touch()
        view = read_time_index(p, base)
        try:
            index = cls.from_entries(base, view, max_index_size)
        except CorruptIndexError as exc:
            raise CorruptIndexError(exc.message, path=str(p)) from None
        index._bind(p, len(view))
        return index

    @property
    def last_entry(self) -> TimestampOffset:
        """The last entry, or (-1, base_offset) when empty (Kafka's ``lastEntry``)."""
        return (
            self._entries[-1] if self._entries else TimestampOffset(NO_TIMESTAMP, self.base_offset)
        )

    def is_full(self) -> bool:
        """True at max_entries - 1: the last slot is reserved for the roll-time entry."""
        return len(self._entries) >= self.max_entries - 1

    def maybe_append(self, timestamp: int, offset: int, skip_full_check: bool = False) -> bool:
        """Append (timestamp, offset) if the timestamp is new; return whether it was appended.

        Raises CorruptIndexError for a full index (unless ``skip_full_check``), an
        offset below the last entry's, or a timestamp below the last entry's.
        """
        where = str(self._path) if self._path else None
        if not skip_full_check and self.is_full():
            raise CorruptIndexError("attempt to append to a full time index", path=where)
        last = self.last_entry
        if self._entries and offset < last.offset:
            raise CorruptIndexError(
                f"attempt to append offset {offset} at slot {len(self._entries)}, smaller than "
                f"the last offset appended ({last.offset})",
                path=where,
            )
        if self._entries and timestamp < last.timestamp:
            raise CorruptIndexError(
                f"attempt to append timestamp {timestamp} at slot {len(self._entries)}, smaller "
                f"than the last timestamp appended ({last.timestamp})",
                path=where,
            )
        # Equal timestamps are skipped: rolling or closing a segment re-offers the last entry.
        if timestamp <= last.timestamp:
            return False
        if len(self._entries) >= self.max_entries:
            raise CorruptIndexError(
                "attempt to append beyond the time index's capacity", path=where
            )
        self.relative_offset(offset)
        self._append_entry(TimestampOffset(timestamp, offset))
        return True

    def lookup(self, target_timestamp: int) -> TimestampOffset:
        """The last entry with timestamp <= target, or (-1, base_offset) if none."""
        return _floor_by_timestamp(self._entries, target_timestamp, self.base_offset)

    def truncate_to(self, offset: int) -> None:
        """Remove the entries with offset >= ``offset`` (Kafka's ``truncateTo``)."""
        i = bisect.bisect_left(self._entries, offset, key=lambda e: e.offset)
        self._truncate_entries(i)

    def problems(self) -> list[str]:
        """Rule violations among the entries (none for an index built by appends)."""
        return _time_problems(self._entries, None)


def encode_time_index(base_offset: int, entries: Iterable[TimestampOffset]) -> bytes:
    """The bytes of a trimmed time index holding ``entries`` (validated)."""
    return TimeIndex.from_entries(base_offset, entries, max_index_size=2**62).to_bytes()
