"""Kafka's offset index (``.index``): sparse map from offset to byte position in ``.log``.

Each entry is 8 bytes, big-endian: relative offset (int32, offset minus the
segment's base offset) and physical position (int32). Kafka preallocates the file
of an active segment to ``segment.index.bytes`` (default 10 MiB) of zeros and trims
it when the segment rolls or the broker shuts down cleanly; after an unclean
shutdown the zero-filled tail stays. Like Kafka's ``DumpLogSegments`` we treat the
first entry after entry 0 whose relative offset is 0 as the end of the data (a
real entry > 0 always has a relative offset > 0, since offsets strictly increase).

kt itself never preallocates: its index files hold exactly the entries (the same
bytes a trimmed Kafka index has); Kafka reads such files fine, and resizes the
active segment's index itself when it opens it.

This module also holds the parts shared with ``time_index``: the layout scan of a
possibly preallocated file, the read-only view base class and the
in-memory/append-only-file base class.
"""

from __future__ import annotations

import bisect
import os
import struct
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Generic, NamedTuple, TypeVar

from kt.storage.atomic import atomic_write
from kt.storage.errors import CorruptIndexError, LogSegmentOffsetOverflowError
from kt.storage.log_files import parse_segment_file_name

OFFSET_INDEX_ENTRY_SIZE = 8
DEFAULT_MAX_INDEX_SIZE = 10 * 1024 * 1024  # segment.index.bytes / log.index.size.max.bytes
INT32_MAX = 2**31 - 1

_ENTRY = struct.Struct(">ii")


class OffsetPosition(NamedTuple):
    """One offset-index entry: absolute offset and byte position in the segment's log."""

    offset: int
    position: int


def max_entries(max_index_size: int, entry_size: int) -> int:
    """How many entries fit in an index of ``max_index_size`` bytes (Kafka's ``maxEntries``).

    Kafka rounds the size down to a whole number of entries.
    """
    if max_index_size < 0:
        raise ValueError(f"max index size must not be negative: {max_index_size}")
    return max_index_size // entry_size


@dataclass(frozen=True, slots=True)
class IndexLayout:
    """Where the entries of an index file end and what follows them."""

    file_size: int
    entry_size: int
    entries: int  # entries before the end marker (the usable entries)
    trailing_bytes: int  # file_size % entry_size: a torn last entry
    tail_entries: int  # whole slots after the usable entries (the preallocated tail)
    tail_nonzero_position: int | None  # first non-zero byte after the entries, if any


def scan_index_layout(
    data: bytes, entry_size: int, is_end_marker: Callable[[bytes, int], bool]
) -> IndexLayout:
    """Find the usable entries of a (possibly preallocated, zero-filled) index file.

    ``is_end_marker(data, i)`` is asked for slots i >= 1 that lie before the last
    non-zero byte; a zero slot there, or anything after the last non-zero byte,
    ends the entries. Finding that last byte in C keeps a 10 MiB zero tail cheap.
    """
    size = len(data)
    slots = size // entry_size
    body = data[: slots * entry_size]
    nonzero_end = len(body.rstrip(b"\x00"))
    candidates = -(-nonzero_end // entry_size)
    if slots > 0:
        # Entry 0 may legitimately be all zeros (offset index: relative offset 0 at
        # position 0), so it always counts.
        candidates = max(candidates, 1)
    count = candidates
    for i in range(1, candidates):
        if is_end_marker(data, i):
            count = i
            break
    tail_nonzero: int | None = None
    if nonzero_end > count * entry_size:
        start = count * entry_size
        tail_nonzero = start + (len(body[start:]) - len(body[start:].lstrip(b"\x00")))
    return IndexLayout(size, entry_size, count, size % entry_size, slots - count, tail_nonzero)


def _offset_end_marker(data: bytes, i: int) -> bool:
    (rel,) = struct.unpack_from(">i", data, i * OFFSET_INDEX_ENTRY_SIZE)
    return bool(rel == 0)


def base_offset_for(path: str | os.PathLike[str], base_offset: int | None) -> int:
    """``base_offset`` if given, else the one in the file name (raises CorruptIndexError)."""
    if base_offset is not None:
        return base_offset
    parsed = parse_segment_file_name(Path(path).name)
    if parsed is None:
        raise CorruptIndexError(
            "cannot tell the base offset: the file name is not <20 digits>.<suffix>",
            path=str(path),
        )
    return parsed.base_offset


E = TypeVar("E", bound=tuple[int, int])


class IndexView(Generic[E]):
    """Read-only view of an index file's bytes (forensics and lookups), shared by the
    offset and time indexes.

    Indexing and iteration yield entries with absolute offsets, decoded on demand,
    so a 10 MiB index costs no per-entry Python objects. Subclasses give the entry
    layout (``entry_size``, ``_struct``), the end marker of a preallocated tail, how
    the two fields of an entry become one, and what is wrong with a file.
    """

    entry_size = 0  # set by subclasses
    _struct: struct.Struct

    def __init__(self, data: bytes, base_offset: int, path: str | None = None) -> None:
        self.data = data
        self.base_offset = base_offset
        self.path = path
        self.layout = scan_index_layout(data, self.entry_size, self._is_end_marker)

    def _is_end_marker(self, data: bytes, i: int) -> bool:
        raise NotImplementedError

    def _decode(self, first: int, second: int) -> E:
        raise NotImplementedError

    def __len__(self) -> int:
        return self.layout.entries

    def __getitem__(self, i: int) -> E:
        if i < 0:
            i += len(self)
        if not 0 <= i < len(self):
            raise IndexError(i)
        first, second = self._struct.unpack_from(self.data, i * self.entry_size)
        return self._decode(first, second)

    def __iter__(self) -> Iterator[E]:
        end = len(self) * self.entry_size
        for first, second in self._struct.iter_unpack(self.data[:end]):
            yield self._decode(first, second)

    def entries(self) -> list[E]:
        """All usable entries as a list."""
        return list(self)

    def problems(self) -> list[str]:
        """Everything wrong with the file, in order; empty when it is sound."""
        raise NotImplementedError

    def check(self) -> None:
        """Raise CorruptIndexError for the first problem, as Kafka's ``sanityCheck`` would."""
        found = self.problems()
        if found:
            raise CorruptIndexError(found[0], path=self.path)


def layout_problems(layout: IndexLayout, tail_note: str = "") -> list[str]:
    """What is wrong with where an index file's entries end: a torn last entry, or
    non-zero bytes after the end marker (``tail_note`` says what those may be)."""
    out: list[str] = []
    if layout.trailing_bytes:
        out.append(
            f"size {layout.file_size} is not a multiple of {layout.entry_size} "
            f"({layout.trailing_bytes} trailing bytes: a torn last entry)"
        )
    if layout.tail_nonzero_position is not None:
        out.append(
            f"non-zero bytes at position {layout.tail_nonzero_position}, after the end of "
            f"the {layout.entries} entries{tail_note}"
        )
    return out


class OffsetIndexView(IndexView[OffsetPosition]):
    """Read-only view of an offset index file's bytes: :class:`OffsetPosition` entries."""

    entry_size = OFFSET_INDEX_ENTRY_SIZE
    _struct = _ENTRY

    def _is_end_marker(self, data: bytes, i: int) -> bool:
        return _offset_end_marker(data, i)

    def _decode(self, first: int, second: int) -> OffsetPosition:
        return OffsetPosition(self.base_offset + first, second)

    def lookup(self, target_offset: int) -> OffsetPosition:
        """The last entry with offset <= target, or (base_offset, 0) — Kafka's ``lookup``."""
        return _floor_lookup(self, target_offset, OffsetPosition(self.base_offset, 0))

    def problems(self) -> list[str]:
        """Everything wrong with the file, in order; empty when it is sound."""
        return _offset_problems(self, self.layout)


def _floor_lookup(
    view: OffsetIndexView | list[OffsetPosition], target: int, default: OffsetPosition
) -> OffsetPosition:
    i = bisect.bisect_right(view, target, key=lambda e: e.offset)
    return default if i == 0 else view[i - 1]


def _offset_problems(entries: Iterable[OffsetPosition], layout: IndexLayout | None) -> list[str]:
    out: list[str] = []
    if layout is not None:
        out += layout_problems(layout, " (garbage or an entry with relative offset 0)")
    prev: OffsetPosition | None = None
    base: int | None = None
    for i, e in enumerate(entries):
        if base is None:
            base = e.offset
        if e.position < 0:
            out.append(f"entry {i}: negative position {e.position}")
        if prev is not None:
            if e.offset <= prev.offset:
                out.append(
                    f"entry {i}: offset {e.offset} is not greater than the previous entry's "
                    f"{prev.offset}"
                )
            elif e.position <= prev.position:
                out.append(
                    f"entry {i}: position {e.position} is not greater than the previous "
                    f"entry's {prev.position}"
                )
        prev = e
    return out


def read_offset_index(
    path: str | os.PathLike[str], base_offset: int | None = None
) -> OffsetIndexView:
    """Read an offset index file; ``base_offset`` defaults to the one in its name."""
    base = base_offset_for(path, base_offset)
    return OffsetIndexView(Path(path).read_bytes(), base, str(path))


# --- in-memory index, optionally backed by an append-only file -------------------


class FixedWidthIndex(Generic[E]):
    """Shared machinery of the live offset and time indexes.

    Entries live in a list; when bound to a file, appends go straight to an
    append-only handle and :meth:`flush` makes them durable. Not thread-safe:
    like Kafka's ``LogSegment``, the caller holds the partition's lock.
    """

    entry_size = 0  # set by subclasses
    _struct: struct.Struct

    def __init__(self, base_offset: int, max_index_size: int = DEFAULT_MAX_INDEX_SIZE) -> None:
        if base_offset < 0:
            raise ValueError(f"base offset must not be negative: {base_offset}")
        self.base_offset = base_offset
        self.max_index_size = max_index_size
        self._entries: list[E] = []
        self._path: Path | None = None
        self._fh: IO[bytes] | None = None

    # conversions between entries and the raw (int, int) fields of the file
    def _encode(self, entry: E) -> bytes:
        raise NotImplementedError

    @property
    def path(self) -> Path | None:
        """The backing file, if any."""
        return self._path

    def __len__(self) -> int:
        return len(self._entries)

    @property
    def entries(self) -> list[E]:
        """A copy of the entries, oldest first."""
        return list(self._entries)

    def entry(self, n: int) -> E:
        """The n-th entry (IndexError past the end)."""
        return self._entries[n]

    @property
    def max_entries(self) -> int:
        """The capacity implied by ``max_index_size``."""
        return max_entries(self.max_index_size, self.entry_size)

    def relative_offset(self, offset: int) -> int:
        """``offset - base_offset``, or LogSegmentOffsetOverflowError if it does not fit int32."""
        rel = offset - self.base_offset
        if not 0 <= rel <= INT32_MAX:
            raise LogSegmentOffsetOverflowError(
                f"offset {offset} cannot be stored relative to base offset {self.base_offset}",
                path=str(self._path) if self._path else None,
            )
        return rel

    def to_bytes(self) -> bytes:
        """The file content: exactly the entries, no preallocated tail."""
        return b"".join(self._encode(e) for e in self._entries)

    def write(self, path: str | os.PathLike[str] | None = None) -> None:
        """Write the trimmed index atomically (to ``path`` or the bound file)."""
        target = Path(path) if path is not None else self._path
        if target is None:
            raise ValueError("no path to write the index to")
        if self._fh is not None and target == self._path:
            self._fh.close()
            self._fh = None
            atomic_write(target, self.to_bytes())
            self._fh = open(target, "r+b")  # noqa: SIM115 - kept open across calls
            self._fh.seek(0, os.SEEK_END)
        else:
            atomic_write(target, self.to_bytes())

    def _bind(self, path: Path, valid_entries: int) -> None:
        self._path = path
        fh = open(path, "r+b")  # noqa: SIM115 - kept open across calls
        # Drop a preallocated or torn tail: kt keeps index files trimmed.
        fh.truncate(valid_entries * self.entry_size)
        fh.seek(0, os.SEEK_END)
        self._fh = fh

    def _append_entry(self, entry: E) -> None:
        self._entries.append(entry)
        if self._fh is not None:
            self._fh.write(self._encode(entry))

    def _truncate_entries(self, count: int) -> None:
        del self._entries[count:]
        if self._fh is not None:
            self._fh.flush()
            self._fh.truncate(count * self.entry_size)
            self._fh.seek(0, os.SEEK_END)

    def reset(self) -> None:
        """Remove every entry (Kafka's ``reset``/``truncate``)."""
        self._truncate_entries(0)

    def flush(self) -> None:
        """Make appended entries durable (no-op without a backing file)."""
        if self._fh is not None:
            self._fh.flush()
            os.fsync(self._fh.fileno())

    def close(self) -> None:
        """Flush and close the backing file; the in-memory entries stay usable."""
        if self._fh is not None:
            self.flush()
            self._fh.close()
            self._fh = None


class OffsetIndex(FixedWidthIndex[OffsetPosition]):
    """The offset index of one segment, as the log engine maintains it.

    Build one in memory (``OffsetIndex(base)``), or bind it to a file with
    :meth:`open`. ``append`` enforces Kafka's rules: strictly increasing offsets,
    and no append once full.
    """

    entry_size = OFFSET_INDEX_ENTRY_SIZE
    _struct = _ENTRY

    def _encode(self, entry: OffsetPosition) -> bytes:
        return _ENTRY.pack(entry.offset - self.base_offset, entry.position)

    @classmethod
    def from_entries(
        cls,
        base_offset: int,
        entries: Iterable[OffsetPosition],
        max_index_size: int = DEFAULT_MAX_INDEX_SIZE,
    ) -> OffsetIndex:
        """An in-memory index holding ``entries`` (validated as appends)."""
        index = cls(base_offset, max_index_size)
        for e in entries:
            index.append(e.offset, e.position)
        return index

    @classmethod
    def open(
        cls,
        path: str | os.PathLike[str],
        base_offset: int | None = None,
        max_index_size: int = DEFAULT_MAX_INDEX_SIZE,
    ) -> OffsetIndex:
        """Open (creating if missing) an index file for appending.

        Existing entries are loaded; a zero-filled or torn tail is cut off the file.
        Raises CorruptIndexError if the existing entries break the index's rules.
        """
        p = Path(path)
        base = base_offset_for(p, base_offset)
        if not p.exists():
            p.touch()
        view = read_offset_index(p, base)
        index = cls(base, max_index_size)
        try:
            for e in view:
                index.append(e.offset, e.position)
        except CorruptIndexError as exc:
            raise CorruptIndexError(exc.message, path=str(p)) from None
        index._bind(p, len(view))
        return index

    @property
    def last_offset(self) -> int:
        """The offset of the last entry, or the base offset when empty (Kafka's ``lastOffset``)."""
        return self._entries[-1].offset if self._entries else self.base_offset

    def is_full(self) -> bool:
        """True when no entry can be appended: time to roll the segment."""
        return len(self._entries) >= self.max_entries

    def append(self, offset: int, position: int) -> None:
        """Append an entry; raises CorruptIndexError when full or offsets do not increase."""
        if self.is_full():
            raise CorruptIndexError(
                f"attempt to append to a full index ({len(self._entries)} entries)",
                path=str(self._path) if self._path else None,
            )
        if self._entries and offset <= self.last_offset:
            raise CorruptIndexError(
                f"attempt to append offset {offset} at slot {len(self._entries)}, no larger "
                f"than the last offset appended ({self.last_offset})",
                path=str(self._path) if self._path else None,
            )
        self.relative_offset(offset)
        if not 0 <= position <= INT32_MAX:
            raise CorruptIndexError(f"position {position} does not fit an int32 >= 0")
        self._append_entry(OffsetPosition(offset, position))

    def lookup(self, target_offset: int) -> OffsetPosition:
        """The last entry with offset <= target, or (base_offset, 0) if none."""
        return _floor_lookup(self._entries, target_offset, OffsetPosition(self.base_offset, 0))

    def truncate_to(self, offset: int) -> None:
        """Remove the entries with offset >= ``offset`` (Kafka's ``truncateTo``)."""
        i = bisect.bisect_left(self._entries, offset, key=lambda e: e.offset)
        self._truncate_entries(i)

    def problems(self) -> list[str]:
        """Rule violations among the entries (none for an index built by ``append``)."""
        return _offset_problems(self._entries, None)


def encode_offset_index(base_offset: int, entries: Iterable[OffsetPosition]) -> bytes:
    """The bytes of a trimmed offset index holding ``entries`` (validated)."""
    return OffsetIndex.from_entries(base_offset, entries, max_index_size=2**62).to_bytes()
