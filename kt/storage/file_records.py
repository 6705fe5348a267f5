"""Streaming the batches of a `.log` segment file, any magic, damage and all.

Both formats start with `offset int64, size int32` and keep the magic byte at
position 16 of an entry, so one reader frames v2 batches and legacy messages
alike. The file is read in bounded chunks with `pread`, never whole, so memory
stays flat whatever the segment size.

The reader reports damage instead of failing: a `Damage` item says where, how
many bytes and why. Without `resync` the stream ends after it; with `resync` the
reader scans forward to the next position holding a batch whose framing and CRC
check out, and carries on from there.
"""

from __future__ import annotations

import os
import struct
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from typing import BinaryIO

import crc32c as _crc32c

from kt.storage import legacy as legacy_format
from kt.storage import record_batch as v2
from kt.storage.compression import Codec, codec_from_id
from kt.storage.errors import CorruptRecordError, UnsupportedFormatError

LOG_OVERHEAD = 12
# offset, size, and the fields up to the magic byte (Kafka's HEADER_SIZE_UP_TO_MAGIC).
HEADER_UP_TO_MAGIC = 17
CHUNK_SIZE = 4 * 1024 * 1024
# Read size of header-only scans: a few small batches per read, large ones skipped.
HEADER_WINDOW = 8 * 1024
_ENTRY = struct.Struct(">qi")
_I64 = struct.Struct(">q")
_U32 = struct.Struct(">I")


@dataclass(slots=True)
class Damage:
    """A region of a log file that does not hold valid batches."""

    position: int
    length: int
    reason: str
    # True when the region runs to the end of the file (a torn or preallocated tail).
    at_end: bool = False


class LogBatch:
    """One batch as found in a file: a v2 record batch or a legacy entry.

    Exposes the fields Kafka's tools print for both formats. `data` holds the
    batch's bytes.
    """

    __slots__ = ("_legacy", "data", "header", "position")

    def __init__(
        self,
        position: int,
        data: bytes | memoryview,
        header: v2.BatchHeader | None,
        legacy_message: legacy_format.LegacyMessage | None,
    ) -> None:
        self.position = position
        self.data = data
        self.header = header
        self._legacy = legacy_message

    # --- framing ---
    @property
    def magic(self) -> int:
        """0, 1 or 2."""
        return self.header.magic if self.header is not None else self.legacy.magic

    @property
    def size_in_bytes(self) -> int:
        """The batch's total size on disk."""
        return len(self.data)

    @property
    def next_position(self) -> int:
        """Where the following batch starts."""
        return self.position + len(self.data)

    @property
    def legacy(self) -> legacy_format.LegacyMessage:
        """The legacy message (magic 0/1 only)."""
        if self._legacy is None:
            self._legacy = legacy_format.parse_message(self.data)
        return self._legacy

    # --- offsets ---
    @property
    def base_offset(self) -> int:
        """First offset. For a compressed legacy wrapper this decompresses it."""
        if self.header is not None:
            return self.header.base_offset
        msg = self.legacy
        if msg.codec_id == 0:
            return msg.offset
        for inner in legacy_format.iter_inner(msg):
            return inner.offset
        return msg.offset

    @property
    def last_offset(self) -> int:
        """Last offset (the wrapper's offset for legacy entries)."""
        if self.header is not None:
            return self.header.last_offset
        return int(_ENTRY.unpack_from(self.data, 0)[0])

    @property
    def next_offset(self) -> int:
        """The offset after this batch."""
        return self.last_offset + 1

    @property
    def count(self) -> int | None:
        """Record count from the v2 header; None for legacy (unknown without decoding)."""
        return self.header.record_count if self.header is not None else None

    # --- attributes ---
    @property
    def codec(self) -> Codec:
        """Compression codec."""
        if self.header is not None:
            return codec_from_id(self.header.attributes & v2.CODEC_MASK)
        return self.legacy.codec

    @property
    def codec_id(self) -> int:
        """Raw codec bits."""
        if self.header is not None:
            return self.header.attributes & v2.CODEC_MASK
        return self.legacy.codec_id

    @property
    def timestamp_type(self) -> int:
        """0 CreateTime, 1 LogAppendTime."""
        if self.header is not None:
            return self.header.timestamp_type
        return self.legacy.timestamp_type

    @property
    def timestamp_type_name(self) -> str:
        """CreateTime, LogAppendTime or NoTimestampType (magic 0)."""
        return v2.timestamp_type_name(self.magic, self.timestamp_type)

    @property
    def max_timestamp(self) -> int:
        """Largest timestamp in the batch (-1 for magic 0)."""
        if self.header is not None:
            return self.header.max_timestamp
        return self.legacy.timestamp

    @property
    def is_transactional(self) -> bool:
        """Transactional batch (v2 only)."""
        return self.header is not None and self.header.is_transactional

    @property
    def is_control(self) -> bool:
        """Control batch (v2 only)."""
        return self.header is not None and self.header.is_control

    @property
    def producer_id(self) -> int:
        """Producer id, -1 for none or legacy."""
        return self.header.producer_id if self.header is not None else -1

    @property
    def producer_epoch(self) -> int:
        """Producer epoch, -1 for none or legacy."""
        return self.header.producer_epoch if self.header is not None else -1

    @property
    def base_sequence(self) -> int:
        """First sequence, -1 for none or legacy."""
        return self.header.base_sequence if self.header is not None else -1

    @property
    def last_sequence(self) -> int:
        """Last sequence, -1 for none or legacy."""
        return self.header.last_sequence if self.header is not None else -1

    @property
    def partition_leader_epoch(self) -> int:
        """Leader epoch stamped by the broker, -1 for none or legacy."""
        return self.header.partition_leader_epoch if self.header is not None else -1

    @property
    def delete_horizon_ms(self) -> int | None:
        """Delete horizon stamped by the cleaner, if any."""
        return self.header.delete_horizon_ms if self.header is not None else None

    # --- integrity ---
    @property
    def stored_crc(self) -> int:
        """The checksum stored in the batch (CRC-32C for v2, CRC-32 for legacy)."""
        if self.header is not None:
            return self.header.crc
        return int(_U32.unpack_from(self.data, 12)[0])

    def computed_crc(self) -> int:
        """The checksum the bytes actually have."""
        view = self.data if isinstance(self.data, memoryview) else memoryview(self.data)
        if self.header is not None:
            return int(_crc32c.crc32c(view[v2.ATTRIBUTES_OFFSET :]))
        return zlib.crc32(view[16:]) & 0xFFFFFFFF

    def is_valid(self) -> bool:
        """True when the stored checksum matches."""
        return self.stored_crc == self.computed_crc()

    # --- records ---
    def records(self) -> Iterator[v2.Record]:
        """Decode the records (decompressing), uniformly as v2 Record objects.

        Legacy messages map to Record with sequence -1 and no headers; their
        `attributes` carry the legacy attributes.
        """
        if self.header is not None:
            yield from v2.iter_records(self.header, self.data)
            return
        for msg in legacy_format.iter_inner(self.legacy):
            yield v2.Record(
                msg.offset,
                msg.timestamp,
                msg.key,
                msg.value,
                [],
                v2.NO_SEQUENCE,
                msg.attributes,
            )

    def legacy_messages(self) -> Iterator[legacy_format.LegacyMessage]:
        """The inner legacy messages with their own CRCs (magic 0/1 only)."""
        return legacy_format.iter_inner(self.legacy)


def _check_entry(magic: int, size: int, max_size: int | None) -> str | None:
    """Why an entry header cannot start a batch, or None when plausible."""
    if magic == 2:
        if size < v2.MIN_BATCH_LENGTH:
            return f"batch length {size} is less than the minimum {v2.MIN_BATCH_LENGTH}"
    elif magic in (0, 1):
        if size < legacy_format.min_message_size(magic):
            return (
                f"record size {size} is less than the minimum record overhead "
                f"({legacy_format.min_message_size(magic)})"
            )
    else:
        return f"invalid magic byte {magic}"
    if max_size is not None and size + LOG_OVERHEAD > max_size:
        return f"batch size {size + LOG_OVERHEAD} is larger than the maximum {max_size}"
    return None


class FileRecords:
    """Positional, chunked reading of one `.log` file.

    Holds no buffers between calls: each `batches()` iteration owns its read-ahead
    chunk, so idle segments cost no memory and concurrent iterations over the same
    file cannot disturb each other.
    """

    def __init__(self, file: BinaryIO | int, size: int | None = None) -> None:
        self._fd = file if isinstance(file, int) else file.fileno()
        self.size = os.fstat(self._fd).st_size if size is None else size

    def read(self, position: int, length: int) -> bytes:
        """Up to `length` bytes at `position` (fewer at the end of the file)."""
        return os.pread(self._fd, length, position)

    def headers(self, start: int = 0, end: int | None = None) -> Iterator[BatchHead | Damage]:
        """Yield the headers of the batches from byte `start` up to `end`, reading
        only each entry's first bytes (61 for v2) and skipping its body by size.

        Checks framing (sizes, magic) but not CRCs; stops after the first Damage.
        Reads go through a small window so runs of small batches cost one `pread`,
        while a large batch is never read just for its header.
        """
        limit = self.size if end is None else min(end, self.size)
        window = b""
        window_start = 0
        pos = start
        while pos < limit:
            remaining = limit - pos
            if remaining < HEADER_UP_TO_MAGIC:
                yield Damage(
                    pos, remaining, f"{remaining} bytes are too few for a batch header", True
                )
                return
            rel = pos - window_start
            want = min(v2.HEADER_SIZE, remaining)
            if rel < 0 or rel + want > len(window):
                window = self.read(pos, min(HEADER_WINDOW, remaining))
                window_start, rel = pos, 0
            offset, size = _ENTRY.unpack_from(window, rel)
            magic = window[rel + 16]
            reason = _check_entry(magic, size, None)
            if reason is None and size + LOG_OVERHEAD > remaining:
                yield Damage(
                    pos,
                    remaining,
                    f"batch of {size + LOG_OVERHEAD} bytes is truncated: only {remaining} "
                    "bytes left",
                    True,
                )
                return
            if reason is not None:
                yield Damage(pos, 0, reason)
                return
            header = None
            max_ts = -1
            if magic == 2:
                header = v2.BatchHeader(*v2._HEADER.unpack_from(window, rel))
                max_ts = header.max_timestamp
            elif magic == 1 and len(window) - rel >= 26:
                (max_ts,) = _I64.unpack_from(window, rel + 18)
            yield BatchHead(pos, size + LOG_OVERHEAD, magic, offset, max_ts, header)
            pos += size + LOG_OVERHEAD

    def batches(
        self,
        start: int = 0,
        end: int | None = None,
        *,
        max_batch_size: int | None = None,
        validate: bool = False,
        resync: bool = False,
    ) -> Iterator[LogBatch | Damage]:
        """Yield batches from byte `start` up to `end` (default: end of file).

        `validate` also checks each batch's CRC (and, for v2, its framing
        fields), reporting a failing batch as Damage. `max_batch_size` reports
        larger batches as Damage. Without `resync` the stream stops after the
        first Damage.
        """
        limit = self.size if end is None else min(end, self.size)
        chunks = _ChunkReader(self)
        pos = start
        while pos < limit:
            remaining = limit - pos
            reason: str | None = None
            at_end = False
            if remaining < HEADER_UP_TO_MAGIC:
                reason = f"{remaining} bytes are too few for a batch header"
                at_end = True
            else:
                head = chunks.view(pos, HEADER_UP_TO_MAGIC)
                _offset, size = _ENTRY.unpack_from(head, 0)
                magic = head[16]
                reason = _check_entry(magic, size, max_batch_size)
                if reason is None and size + LOG_OVERHEAD > remaining:
                    reason = (
                        f"batch of {size + LOG_OVERHEAD} bytes is truncated: "
                        f"only {remaining} bytes left"
                    )
                    at_end = True
                if reason is None:
                    data = chunks.view(pos, size + LOG_OVERHEAD)
                    batch = _make_batch(pos, data, magic)
                    if validate:
                        reason = _validate(batch)
                    if reason is None:
                        yield batch
                        pos += size + LOG_OVERHEAD
                        continue
            if self._all_zero(pos, limit):
                yield Damage(pos, limit - pos, "zero-filled (preallocated, never written)", True)
                return
            if not resync or (at_end and remaining < HEADER_UP_TO_MAGIC):
                yield Damage(pos, limit - pos if at_end else 0, reason, at_end)
                return
            found = self._resync(pos + 1, limit, max_batch_size)
            if found is None:
                yield Damage(pos, limit - pos, reason, True)
                return
            yield Damage(pos, found - pos, reason, False)
            pos = found

    def _all_zero(self, pos: int, limit: int) -> bool:
        step = 1 << 20
        while pos < limit:
            chunk = self.read(pos, min(step, limit - pos))
            if chunk.count(0) != len(chunk):
                return False
            pos += len(chunk)
        return True

    def _resync(self, pos: int, limit: int, max_batch_size: int | None) -> int | None:
        """The first position >= pos that starts a batch passing framing and CRC checks."""
        window = 1 << 20
        while pos + HEADER_UP_TO_MAGIC <= limit:
            chunk = self.read(pos, min(window + HEADER_UP_TO_MAGIC, limit - pos))
            last = len(chunk) - HEADER_UP_TO_MAGIC
            i = 0
            while i <= last:
                # A candidate's magic byte sits 16 bytes in; look for plausible ones.
                m = chunk[i + 16]
                if m <= 2:
                    _offset, size = _ENTRY.unpack_from(chunk, i)
                    if (
                        _offset >= 0
                        and _check_entry(m, size, max_batch_size) is None
                        and pos + i + size + LOG_OVERHEAD <= limit
                    ):
                        data = memoryview(self.read(pos + i, size + LOG_OVERHEAD))
                        batch = _make_batch(pos + i, data, m)
                        if _validate(batch) is None:
                            return pos + i
                i += 1
            pos += last + 1
        return None


class _ChunkReader:
    """The read-ahead cache of one iteration (never shared between iterations)."""

    __slots__ = ("_buf", "_records", "_start")

    def __init__(self, records: FileRecords) -> None:
        self._records = records
        self._buf = b""
        self._start = 0

    def view(self, position: int, length: int) -> memoryview:
        """`length` bytes at `position` (may be short at EOF)."""
        start = position - self._start
        if start < 0 or start + length > len(self._buf):
            if length > CHUNK_SIZE:
                return memoryview(self._records.read(position, length))
            self._buf = self._records.read(position, max(CHUNK_SIZE, length))
            self._start = position
            start = 0
        return memoryview(self._buf)[start : start + length]


@dataclass(frozen=True, slots=True)
class BatchHead:
    """What a header-only scan knows about one entry of a `.log` file."""

    position: int
    size_in_bytes: int
    magic: int
    # The entry's offset field: a v2 batch's base offset, a legacy entry's last offset.
    offset: int
    max_timestamp: int
    header: v2.BatchHeader | None

    @property
    def last_offset(self) -> int:
        """Last offset of the batch (the wrapper's offset for legacy entries)."""
        return self.header.last_offset if self.header is not None else self.offset

    @property
    def next_offset(self) -> int:
        """The offset after this batch."""
        return self.last_offset + 1

    @property
    def next_position(self) -> int:
        """Where the following batch starts."""
        return self.position + self.size_in_bytes


def _make_batch(pos: int, data: memoryview, magic: int) -> LogBatch:
    if magic == 2:
        return LogBatch(pos, data, v2.BatchHeader(*v2._HEADER.unpack_from(data, 0)), None)
    return LogBatch(pos, data, None, None)


def _validate(batch: LogBatch) -> str | None:
    """Why a framed batch is not valid, or None."""
    try:
        if batch.header is None:
            msg = batch.legacy
            if not msg.is_valid:
                return f"CRC-32 mismatch (stored {msg.crc}, computed {msg.computed_crc})"
            return None
        h = batch.header
        if h.last_offset_delta < 0 or h.record_count < 0:
            return "negative record count or offset delta"
        stored, computed = h.crc, batch.computed_crc()
        if stored != computed:
            return f"CRC-32C mismatch (stored {stored}, computed {computed})"
        return None
    except (CorruptRecordError, UnsupportedFormatError) as exc:
        return exc.message


def open_file_records(path: str | os.PathLike[str]) -> tuple[FileRecords, BinaryIO]:
    """Open a `.log` file read-only; the caller closes the returned file object."""
    f = open(path, "rb")  # noqa: SIM115 - handed to the caller
    return FileRecords(f), f
