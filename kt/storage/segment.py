"""One log segment: a `.log` file with its offset, time and transaction indexes.

The rules follow Kafka's LogSegment:

- An index entry is added for a batch when more than `index.interval.bytes` were
  appended since the previous entry; the offset index maps the batch's *last*
  offset to the batch's position, the time index records the largest timestamp
  seen so far with the offset of the batch that carried it.
- A segment rolls when the next append would pass `segment.bytes`, when it is
  older than `segment.ms` (measured from its first batch's timestamp), when an
  index is full, or when the next offset cannot be stored relative to the base.
- Recovery re-reads the log, validates every batch, rebuilds the indexes from
  scratch and truncates at the first invalid byte.
- Becoming inactive (rolled) appends the segment's final largest-timestamp entry
  to the time index.

Not thread-safe for mutation: the partition log serialises writers.
"""

from __future__ import annotations

import os
import struct
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from kt.storage import record_batch as v2
from kt.storage.errors import (
    CorruptIndexError,
    CorruptRecordError,
    LogSegmentOffsetOverflowError,
)
from kt.storage.file_records import BatchHead, Damage, FileRecords, LogBatch
from kt.storage.log_files import segment_file_name
from kt.storage.offset_index import DEFAULT_MAX_INDEX_SIZE, OffsetIndex, OffsetPosition
from kt.storage.time_index import TimeIndex, TimestampOffset
from kt.storage.txn_index import AbortedTxn, TransactionIndex

INT32_MAX = 2**31 - 1
NO_TIMESTAMP = -1
DEFAULT_INDEX_INTERVAL_BYTES = 4096


@dataclass(frozen=True, slots=True)
class BatchInfo:
    """What the segment needs to know about an appended batch, read from its header."""

    last_offset: int
    max_timestamp: int
    size: int


def batch_infos(data: bytes | bytearray | memoryview) -> list[BatchInfo]:
    """Shallow header scan of concatenated v2 batches (no record decoding)."""
    out = []
    pos = 0
    end = len(data)
    while pos < end:
        if end - pos < v2.HEADER_SIZE:
            raise CorruptRecordError("incomplete batch header", position=pos)
        base, length = struct.unpack_from(">qi", data, pos)
        (delta,) = struct.unpack_from(">i", data, pos + 23)
        (max_ts,) = struct.unpack_from(">q", data, pos + 35)
        size = length + v2.LOG_OVERHEAD
        if length < v2.MIN_BATCH_LENGTH or pos + size > end:
            raise CorruptRecordError(f"bad batch length {length}", position=pos)
        out.append(BatchInfo(base + delta, max_ts, size))
        pos += size
    return out


@dataclass(frozen=True, slots=True)
class LogOffsetPosition:
    """Where a batch sits: the batch's last offset, its file position and size."""

    offset: int
    position: int
    size: int


@dataclass(frozen=True, slots=True)
class RecoveryResult:
    """The outcome of recovering a segment."""

    truncated_bytes: int
    reason: str | None
    valid_bytes: int


class LogSegment:
    """A segment's files and the bookkeeping that keeps its indexes sparse."""

    def __init__(
        self,
        directory: Path,
        base_offset: int,
        fd: int,
        offset_index: OffsetIndex,
        time_index: TimeIndex,
        txn_index: TransactionIndex,
        index_interval_bytes: int,
        created_ms: int,
        suffix: str = "",
    ) -> None:
        self.dir = directory
        self.base_offset = base_offset
        self._fd = fd
        self.offset_index = offset_index
        self.time_index = time_index
        self.txn_index = txn_index
        self.index_interval_bytes = index_interval_bytes
        self.created_ms = created_ms
        self.suffix = suffix
        self._size = os.fstat(fd).st_size
        self._records = FileRecords(fd, self._size)
        self.bytes_since_last_index_entry = 0
        self.max_timestamp_so_far = NO_TIMESTAMP
        self.offset_of_max_timestamp_so_far = base_offset
        self.rolling_based_timestamp: int | None = None
        # This segment's share of segment.jitter.ms, drawn when the log opens it.
        self.roll_jitter_ms = 0
        last = time_index.last_entry
        if len(time_index):
            self.max_timestamp_so_far = last.timestamp
            self.offset_of_max_timestamp_so_far = last.offset

    # --- opening ---------------------------------------------------------

    @classmethod
    def open(
        cls,
        directory: str | os.PathLike[str],
        base_offset: int,
        *,
        index_interval_bytes: int = DEFAULT_INDEX_INTERVAL_BYTES,
        max_index_size: int = DEFAULT_MAX_INDEX_SIZE,
        create: bool = False,
        suffix: str = "",
        now_ms: int | None = None,
    ) -> LogSegment:
        """Open a segment's files (creating them with `create`).

        Raises CorruptIndexError when an index breaks its rules; the caller
        recovers the segment (see `open_or_recover`).
        """
        d = Path(directory)
        log_path = d / segment_file_name(base_offset, ".log", suffix or None)
        flags = os.O_RDWR | (os.O_CREAT if create else 0)
        fd = os.open(log_path, flags, 0o644)
        try:
            oi = OffsetIndex.open(
                d / segment_file_name(base_offset, ".index", suffix or None),
                base_offset,
                max_index_size,
            )
            ti = TimeIndex.open(
                d / segment_file_name(base_offset, ".timeindex", suffix or None),
                base_offset,
                max_index_size,
            )
            txn_path = d / segment_file_name(base_offset, ".txnindex", suffix or None)
            txn = (
                TransactionIndex.open(txn_path, base_offset)
                if txn_path.exists()
                else TransactionIndex(base_offset, txn_path)
            )
        except BaseException:
            os.close(fd)
            raise
        created = now_ms if now_ms is not None else int(time.time() * 1000)
        if not create:
            created = int(os.stat(log_path).st_mtime * 1000)
        return cls(d, base_offset, fd, oi, ti, txn, index_interval_bytes, created, suffix)

    @classmethod
    def open_or_recover(
        cls,
        directory: str | os.PathLike[str],
        base_offset: int,
        *,
        index_interval_bytes: int = DEFAULT_INDEX_INTERVAL_BYTES,
        max_index_size: int = DEFAULT_MAX_INDEX_SIZE,
        max_batch_size: int | None = None,
    ) -> tuple[LogSegment, RecoveryResult | None]:
        """Open a segment; if an index is missing or corrupt, rebuild it from the log."""
        d = Path(directory)
        # A missing time index is rebuilt too: the segment's largest timestamp (time
        # rolling, lookups by timestamp) is read back from its last entry.
        missing = not all(
            (d / segment_file_name(base_offset, ext)).exists() for ext in (".index", ".timeindex")
        )
        try:
            seg = cls.open(
                d,
                base_offset,
                index_interval_bytes=index_interval_bytes,
                max_index_size=max_index_size,
            )
        except CorruptIndexError:
            for ext in (".index", ".timeindex"):
                (d / segment_file_name(base_offset, ext)).unlink(missing_ok=True)
            seg = cls.open(
                d,
                base_offset,
                index_interval_bytes=index_interval_bytes,
                max_index_size=max_index_size,
            )
            missing = True
        if missing and seg.size > 0:
            return seg, seg.recover(max_batch_size)
        return seg, None

    # --- state -----------------------------------------------------------

    @property
    def size(self) -> int:
        """Bytes in the `.log` file."""
        return self._size

    @property
    def log_path(self) -> Path:
        """Path of the `.log` file."""
        return self.dir / segment_file_name(self.base_offset, ".log", self.suffix or None)

    @property
    def fd(self) -> int:
        """The `.log` file descriptor (for sendfile)."""
        return self._fd

    @property
    def records(self) -> FileRecords:
        """Positional reader over the `.log` file."""
        self._records.size = self._size
        return self._records

    @property
    def largest_timestamp(self) -> int:
        """Largest timestamp in the segment, or its last-modified time when none."""
        if self.max_timestamp_so_far >= 0:
            return self.max_timestamp_so_far
        return int(os.stat(self.log_path).st_mtime * 1000)

    def can_convert_to_relative_offset(self, offset: int) -> bool:
        """True when `offset` fits the index's int32 relative offset."""
        return 0 <= offset - self.base_offset <= INT32_MAX

    # --- appending -------------------------------------------------------

    def append(self, data: bytes | bytearray | memoryview, infos: list[BatchInfo]) -> None:
        """Append whole batches (already given their offsets) and index them."""
        if not infos:
            return
        largest = infos[-1].last_offset
        if not self.can_convert_to_relative_offset(largest):
            raise LogSegmentOffsetOverflowError(
                f"offset {largest} cannot be stored relative to base offset {self.base_offset}",
                path=str(self.log_path),
            )
        position = self._size
        written = os.pwrite(self._fd, data, position)
        if written != len(data):
            # A short write leaves a torn tail that recovery will cut; surface it.
            raise OSError(f"short write to {self.log_path}: {written} of {len(data)} bytes")
        self._size += written
        if self.rolling_based_timestamp is None and self._size == written:
            self.rolling_based_timestamp = infos[0].max_timestamp
        for info in infos:
            self._index_batch(info.last_offset, info.max_timestamp, position)
            position += info.size
            self.bytes_since_last_index_entry += info.size

    def _index_batch(self, last_offset: int, max_timestamp: int, position: int) -> None:
        if max_timestamp > self.max_timestamp_so_far:
            self.max_timestamp_so_far = max_timestamp
            self.offset_of_max_timestamp_so_far = last_offset
        if self.bytes_since_last_index_entry > self.index_interval_bytes:
            self.offset_index.append(last_offset, position)
            self.time_index.maybe_append(
                self.max_timestamp_so_far, self.offset_of_max_timestamp_so_far
            )
            self.bytes_since_last_index_entry = 0

    def append_aborted_txn(self, txn: AbortedTxn) -> None:
        """Record an aborted transaction in this segment's `.txnindex`."""
        self.txn_index.append(txn)

    # --- rolling ---------------------------------------------------------

    def should_roll(
        self,
        *,
        max_segment_bytes: int,
        max_segment_ms: int,
        jitter_ms: int,
        messages_size: int,
        max_timestamp_in_messages: int,
        max_offset_in_messages: int,
        now_ms: int,
    ) -> bool:
        """Kafka's roll conditions for appending `messages_size` more bytes."""
        reached_roll_ms = self.time_waited_for_roll(now_ms, max_timestamp_in_messages) > (
            max_segment_ms - jitter_ms
        )
        return (
            self._size > max_segment_bytes - messages_size
            or (self._size > 0 and reached_roll_ms)
            or self.offset_index.is_full()
            or self.time_index.is_full()
            or not self.can_convert_to_relative_offset(max_offset_in_messages)
        )

    def time_waited_for_roll(self, now_ms: int, message_timestamp: int) -> int:
        """How long the segment has been open, by its first batch's timestamp if any."""
        if self.rolling_based_timestamp is None:
            self._load_first_batch_timestamp()
        if self.rolling_based_timestamp is not None and self.rolling_based_timestamp >= 0:
            return message_timestamp - self.rolling_based_timestamp
        return now_ms - self.created_ms

    def _load_first_batch_timestamp(self) -> None:
        for item in self.records.headers(0):
            if isinstance(item, BatchHead):
                self.rolling_based_timestamp = item.max_timestamp
            break

    def on_become_inactive(self) -> None:
        """Seal the segment at roll: record its final largest timestamp.

        Not fsynced here: the append path must not wait for the disk. The log's
        flush (driven by the broker's schedule) makes it durable and only then
        moves the recovery point past it, as Kafka's asynchronous roll flush.
        """
        self._append_final_time_entry()

    def _append_final_time_entry(self) -> None:
        # The slot a time index reserves for this entry does not exist when
        # segment.index.bytes is below one entry (KAFKA-6388's zero-capacity case).
        if len(self.time_index) < self.time_index.max_entries:
            self.time_index.maybe_append(
                self.max_timestamp_so_far,
                self.offset_of_max_timestamp_so_far,
                skip_full_check=True,
            )

    # --- reading ---------------------------------------------------------

    def translate_offset(self, offset: int, starting_position: int = 0) -> LogOffsetPosition | None:
        """The first batch whose last offset is >= `offset`: index floor lookup, then a
        short forward scan. None when the segment holds no such batch."""
        entry = self.offset_index.lookup(offset)
        start = max(entry.position, starting_position)
        # Headers only: a fetch must not read (or decompress) the batches it skips.
        for item in self.records.headers(start):
            if isinstance(item, Damage):
                return None
            if item.last_offset >= offset:
                return LogOffsetPosition(item.last_offset, item.position, item.size_in_bytes)
        return None

    def read(
        self,
        start_offset: int,
        max_size: int,
        max_position: int | None = None,
        min_one_message: bool = False,
    ) -> tuple[int, int] | None:
        """(position, length) of the bytes a fetch from `start_offset` returns.

        Sized as Kafka's LogSegment.read: from the batch holding `start_offset`,
        `min(max_position - start, max_size)` bytes, where `min_one_message`
        raises `max_size` to the first batch's size. The slice may end inside a
        later batch (clients drop a partial trailing batch), but not inside the
        first: a first batch larger than `max_size` gives a length of 0, as Kafka's
        fetch replaces such a read with no records (KIP-74; a client given only part
        of a batch cannot make progress and stops with an error). Only the first
        batch's header is read. None when the offset is past this segment's data or
        its batch starts at or after `max_position`.
        """
        if max_size < 0:
            raise ValueError(f"invalid max size {max_size}")
        limit = self._size if max_position is None else min(max_position, self._size)
        start = self.translate_offset(start_offset)
        if start is None or start.position >= limit:
            return None
        adjusted = max(max_size, start.size) if min_one_message else max_size
        if adjusted < start.size:
            return start.position, 0
        return start.position, min(limit - start.position, adjusted)

    def find_offset_by_timestamp(
        self, timestamp: int, starting_offset: int
    ) -> tuple[int, int] | None:
        """(offset, timestamp) of the first record with timestamp >= `timestamp`."""
        entry = self.time_index.lookup(timestamp)
        lookup_offset = max(entry.offset, starting_offset)
        position = self.offset_index.lookup(lookup_offset).position
        for head in self.records.headers(position):
            if isinstance(head, Damage):
                return None
            if head.max_timestamp >= timestamp and head.last_offset >= starting_offset:
                # Only the batch that can hold the answer is read and decoded.
                for item in self.records.batches(head.position, head.next_position):
                    if not isinstance(item, LogBatch):
                        return None
                    for rec in item.records():
                        if rec.timestamp >= timestamp and rec.offset >= starting_offset:
                            return rec.offset, rec.timestamp
        return None

    def read_next_offset(self) -> int:
        """The offset after the segment's last batch (its base offset when empty)."""
        last = self.offset_index.lookup(2**63 - 1)
        next_offset = self.base_offset
        for item in self.records.headers(last.position):
            if isinstance(item, Damage):
                break
            next_offset = item.next_offset
        return next_offset

    def iter_batches(self, start: int = 0) -> Iterator[LogBatch | Damage]:
        """All batches from byte `start`."""
        return self.records.batches(start)

    # --- recovery and truncation ------------------------------------------

    def recover(
        self,
        max_batch_size: int | None = None,
        on_batch: Callable[[LogBatch], None] | None = None,
        txn_tracker: TxnFeed | None = None,
    ) -> RecoveryResult:
        """Rebuild the indexes from the log, validating every batch; truncate at the
        first invalid byte. `on_batch` sees each valid batch (leader epochs, producer
        state).

        The `.txnindex` is rebuilt from the log when a `txn_tracker` (index_check's
        TxnTracker, seeded with the transactions open at this segment's base) is
        given, as Kafka rebuilds it from producer state; without one its entries are
        kept up to the end of the valid data. Raises LogSegmentOffsetOverflowError
        for offsets that do not fit the segment (see `scan_log`).
        """
        first_new = len(txn_tracker.aborted) if txn_tracker is not None else 0

        def feed(batch: LogBatch) -> None:
            if txn_tracker is not None:
                txn_tracker.feed(batch)
            if on_batch is not None:
                on_batch(batch)

        try:
            scan = scan_log(
                self.records,
                self.base_offset,
                self.index_interval_bytes,
                max_batch_size=max_batch_size,
                on_batch=feed,
            )
        except LogSegmentOffsetOverflowError as exc:
            raise LogSegmentOffsetOverflowError(
                exc.message, path=str(self.log_path), position=exc.position
            ) from None
        if scan.valid_bytes < self._size:
            self._truncate_file(scan.valid_bytes)
        self.offset_index.reset()
        self.time_index.reset()
        if txn_tracker is not None:
            self.txn_index.reset()
            for txn in txn_tracker.aborted[first_new:]:
                self.txn_index.append(txn)
        else:
            self.txn_index.truncate_to(scan.next_offset)
        for entry in scan.offset_entries:
            self.offset_index.append(entry.offset, entry.position)
        for tentry in scan.time_entries:
            self.time_index.maybe_append(tentry.timestamp, tentry.offset, skip_full_check=True)
        self.max_timestamp_so_far = scan.max_timestamp
        self.offset_of_max_timestamp_so_far = scan.offset_of_max_timestamp
        self.bytes_since_last_index_entry = scan.bytes_since_last_index_entry
        self.rolling_based_timestamp = None
        return RecoveryResult(scan.invalid_bytes, scan.reason, scan.valid_bytes)

    def truncate_to(self, offset: int) -> int:
        """Remove every batch at or after `offset`; return the bytes removed."""
        mapping = self.translate_offset(offset)
        self.offset_index.truncate_to(offset)
        self.time_index.truncate_to(offset)
        self.txn_index.truncate_to(offset)
        if mapping is None:
            return 0
        # As Kafka: cut at the start of the batch holding `offset`, so a batch that
        # straddles it goes too (nothing at or after `offset` may survive).
        position = mapping.position
        removed = self._size - position
        if removed > 0:
            self._truncate_file(position)
        if self._size == 0:
            self.rolling_based_timestamp = None
        self.bytes_since_last_index_entry = 0
        self._reload_largest_timestamp()
        return removed

    def _truncate_file(self, size: int) -> None:
        os.ftruncate(self._fd, size)
        self._size = size
        # A fresh reader: the old one's read-ahead chunk would serve the cut bytes
        # again once new batches are written over them.
        self._records = FileRecords(self._fd, size)

    def _reload_largest_timestamp(self) -> None:
        last = self.time_index.last_entry
        self.max_timestamp_so_far = last.timestamp
        self.offset_of_max_timestamp_so_far = last.offset
        start = self.offset_index.lookup(last.offset).position
        for item in self.records.headers(start):
            if isinstance(item, Damage):
                break
            if item.max_timestamp > self.max_timestamp_so_far:
                self.max_timestamp_so_far = item.max_timestamp
                self.offset_of_max_timestamp_so_far = item.last_offset

    # --- durability and lifecycle -----------------------------------------

    def flush(self) -> None:
        """fsync the log and the indexes."""
        os.fsync(self._fd)
        self.offset_index.flush()
        self.time_index.flush()
        self.txn_index.flush()

    def close(self) -> None:
        """Close every file of the segment.

        Like Kafka's LogSegment.close, the largest timestamp is recorded in the time
        index first: a cleanly closed segment is reopened without recovery, and its
        largest timestamp is read back from the time index's last entry.
        """
        if self._fd >= 0 and self.max_timestamp_so_far >= 0:
            self._append_final_time_entry()
        self.offset_index.close()
        self.time_index.close()
        self.txn_index.close()
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1

    def file_paths(self) -> list[Path]:
        """The segment's existing files (log and indexes)."""
        names = [".log", ".index", ".timeindex", ".txnindex"]
        out = []
        for ext in names:
            p = self.dir / segment_file_name(self.base_offset, ext, self.suffix or None)
            if p.exists():
                out.append(p)
        return out

    def rename_suffix(self, new_suffix: str) -> None:
        """Rename every file from the current state suffix to `new_suffix` ('' = live).

        Open file handles stay valid across a rename, so the segment keeps working.
        """
        for ext in (".log", ".index", ".timeindex", ".txnindex"):
            old = self.dir / segment_file_name(self.base_offset, ext, self.suffix or None)
            new = self.dir / segment_file_name(self.base_offset, ext, new_suffix or None)
            if old.exists():
                os.replace(old, new)
            if ext == ".index":
                self.offset_index._path = new
            elif ext == ".timeindex":
                self.time_index._path = new
        self.txn_index.path = self.dir / segment_file_name(
            self.base_offset, ".txnindex", new_suffix or None
        )
        self.suffix = new_suffix


@dataclass(slots=True)
class IndexScan:
    """The indexes Kafka's recovery builds for a log, and where its valid data ends."""

    offset_entries: list[OffsetPosition]
    time_entries: list[TimestampOffset]
    valid_bytes: int
    invalid_bytes: int
    reason: str | None
    max_timestamp: int
    offset_of_max_timestamp: int
    bytes_since_last_index_entry: int
    # The offset after the last valid batch (the base offset when there is none).
    next_offset: int = 0


class TxnFeed(Protocol):
    """What recovery needs of a transaction tracker (index_check.TxnTracker)."""

    aborted: list[AbortedTxn]

    def feed(self, batch: LogBatch) -> None:
        """Account for one batch, in offset order."""


def scan_log(
    records: FileRecords,
    base_offset: int,
    index_interval_bytes: int = DEFAULT_INDEX_INTERVAL_BYTES,
    *,
    max_batch_size: int | None = None,
    on_batch: Callable[[LogBatch], None] | None = None,
) -> IndexScan:
    """Validate a segment's batches and compute the offset and time index entries
    Kafka's recovery would write for them. Reads only; stops at the first invalid
    batch, including a CRC-valid one whose offsets do not increase.

    An offset that cannot be stored relative to the base offset (a legacy segment
    written before Kafka split such segments) raises LogSegmentOffsetOverflowError
    rather than cutting good data: Kafka splits the segment there, kt does not
    split segments yet.
    """
    # Entries are built as plain lists: the scan itself guarantees Kafka's
    # ordering rules, and this loop is the whole cost of `kt index rebuild`.
    offset_entries: list[OffsetPosition] = []
    time_entries: list[TimestampOffset] = []
    last_time_entry = TimestampOffset(NO_TIMESTAMP, base_offset)
    max_ts = NO_TIMESTAMP
    max_ts_offset = base_offset
    valid = 0
    last_index_entry = 0
    reason = None
    prev_last: int | None = None
    for item in records.batches(0, validate=True, max_batch_size=max_batch_size):
        if isinstance(item, Damage):
            reason = item.reason
            break
        last_offset = item.last_offset
        if prev_last is not None and (
            last_offset <= prev_last
            or (item.header is not None and item.header.base_offset <= prev_last)
        ):
            reason = (
                f"offsets do not increase: the batch ending at offset {last_offset} follows "
                f"one ending at {prev_last}"
            )
            break
        if not 0 <= last_offset - base_offset <= INT32_MAX:
            raise LogSegmentOffsetOverflowError(
                f"offset {last_offset} at position {valid} cannot be stored relative to the "
                f"base offset {base_offset}; this segment needs splitting, which kt does not do",
                position=valid,
            )
        prev_last = last_offset
        batch_max_ts = item.max_timestamp
        if batch_max_ts > max_ts:
            max_ts = batch_max_ts
            max_ts_offset = last_offset
        if valid - last_index_entry > index_interval_bytes:
            offset_entries.append(OffsetPosition(last_offset, valid))
            if max_ts > last_time_entry.timestamp:
                last_time_entry = TimestampOffset(max_ts, max_ts_offset)
                time_entries.append(last_time_entry)
            last_index_entry = valid
        valid += item.size_in_bytes
        if on_batch is not None:
            on_batch(item)
    # A segment that was closed normally ends with its largest timestamp.
    if max_ts > last_time_entry.timestamp:
        time_entries.append(TimestampOffset(max_ts, max_ts_offset))
    return IndexScan(
        offset_entries,
        time_entries,
        valid,
        records.size - valid,
        reason,
        max_ts,
        max_ts_offset,
        valid - last_index_entry,
        base_offset if prev_last is None else prev_last + 1,
    )
