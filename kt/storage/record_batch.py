"""Kafka's record batch, magic v2: the 61-byte header, its records, control records.

Layout (big-endian), offsets within the batch:

    @0  baseOffset int64         @27 baseTimestamp int64
    @8  batchLength int32        @35 maxTimestamp int64
    @12 partitionLeaderEpoch i32 @43 producerId int64
    @16 magic int8 (=2)          @51 producerEpoch int16
    @17 crc uint32 (CRC-32C)     @53 baseSequence int32
    @21 attributes int16         @57 recordCount int32
    @23 lastOffsetDelta int32    @61 records...

The CRC covers everything from the attributes to the end of the batch, so the base
offset and the partition leader epoch can be patched in place without
recomputing it — which is what lets a broker append producer bytes untouched.

Attributes: bits 0-2 codec, bit 3 timestamp type (1 = LogAppendTime), bit 4
transactional, bit 5 control, bit 6 "delete horizon set" (the base timestamp then
holds the delete horizon, stamped by the log cleaner on tombstone batches).

Each record: length varint, attributes int8, timestampDelta varlong, offsetDelta
varint, key (varint length, -1 = null), value (likewise), header count varint,
then each header's key (varint length + UTF-8) and value (varint length, -1 = null).
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field

import crc32c as _crc32c

from kt.storage.compression import Codec, codec_from_id, compress, decompress
from kt.storage.errors import CorruptRecordError
from kt.storage.varint import (
    read_varint,
    read_varlong,
    write_varint,
)

MAGIC_V2 = 2
HEADER_SIZE = 61
# The bytes before batchLength counts start: baseOffset + batchLength.
LOG_OVERHEAD = 12
# Smallest legal batchLength: the header after the length field, no records.
MIN_BATCH_LENGTH = HEADER_SIZE - LOG_OVERHEAD
CRC_OFFSET = 17
ATTRIBUTES_OFFSET = 21
NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
NO_SEQUENCE = -1
NO_PARTITION_LEADER_EPOCH = -1
NO_TIMESTAMP = -1

CODEC_MASK = 0x07
TIMESTAMP_TYPE_MASK = 0x08
TRANSACTIONAL_MASK = 0x10
CONTROL_MASK = 0x20
DELETE_HORIZON_MASK = 0x40

CREATE_TIME = 0
LOG_APPEND_TIME = 1

_HEADER = struct.Struct(">qiibIhiqqqhii")
_BASE_OFFSET = struct.Struct(">q")
_LEADER_EPOCH = struct.Struct(">i")
_U32 = struct.Struct(">I")
_I64 = struct.Struct(">q")
_INT32_MAX = 2**31 - 1


def timestamp_type_name(magic: int, timestamp_type: int) -> str:
    """Kafka's TimestampType name: CreateTime, LogAppendTime, or NoTimestampType (magic 0)."""
    if magic == 0:
        return "NoTimestampType"
    return "LogAppendTime" if timestamp_type == LOG_APPEND_TIME else "CreateTime"


def increment_sequence(sequence: int, increment: int) -> int:
    """Kafka's sequence arithmetic: sequences wrap from Int.MaxValue to 0."""
    if sequence > _INT32_MAX - increment:
        return increment - (_INT32_MAX - sequence) - 1
    return sequence + increment


@dataclass(slots=True)
class BatchHeader:
    """The 61-byte header of a v2 record batch, decoded."""

    base_offset: int
    batch_length: int
    partition_leader_epoch: int
    magic: int
    crc: int
    attributes: int
    last_offset_delta: int
    base_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    record_count: int

    @property
    def size_in_bytes(self) -> int:
        """The whole batch's size on disk, header included."""
        return self.batch_length + LOG_OVERHEAD

    @property
    def last_offset(self) -> int:
        """Offset of the batch's last record (even when compaction removed it)."""
        return self.base_offset + self.last_offset_delta

    @property
    def next_offset(self) -> int:
        """The offset after this batch."""
        return self.last_offset + 1

    @property
    def codec(self) -> Codec:
        """Compression codec of the records section."""
        return codec_from_id(self.attributes & CODEC_MASK)

    @property
    def codec_id(self) -> int:
        """The raw codec bits (0-7), valid or not."""
        return self.attributes & CODEC_MASK

    @property
    def timestamp_type(self) -> int:
        """CREATE_TIME (0) or LOG_APPEND_TIME (1)."""
        return LOG_APPEND_TIME if self.attributes & TIMESTAMP_TYPE_MASK else CREATE_TIME

    @property
    def is_transactional(self) -> bool:
        """True when written by a transactional producer."""
        return bool(self.attributes & TRANSACTIONAL_MASK)

    @property
    def is_control(self) -> bool:
        """True for control batches (transaction markers and similar)."""
        return bool(self.attributes & CONTROL_MASK)

    @property
    def has_delete_horizon(self) -> bool:
        """True when the cleaner stamped a delete horizon into baseTimestamp."""
        return bool(self.attributes & DELETE_HORIZON_MASK)

    @property
    def delete_horizon_ms(self) -> int | None:
        """The tombstone delete horizon, when set."""
        return self.base_timestamp if self.has_delete_horizon else None

    @property
    def last_sequence(self) -> int:
        """Sequence of the last record, -1 without a producer sequence."""
        if self.base_sequence == NO_SEQUENCE:
            return NO_SEQUENCE
        return increment_sequence(self.base_sequence, self.last_offset_delta)

    @property
    def has_producer_id(self) -> bool:
        """True when an idempotent or transactional producer wrote the batch."""
        return self.producer_id > NO_PRODUCER_ID


def parse_header(buf: bytes | bytearray | memoryview, pos: int = 0) -> BatchHeader:
    """Decode a v2 batch header at `pos`. Checks nothing but that 61 bytes exist."""
    if len(buf) - pos < HEADER_SIZE:
        raise CorruptRecordError(
            f"record batch header needs {HEADER_SIZE} bytes, {len(buf) - pos} left", position=pos
        )
    return BatchHeader(*_HEADER.unpack_from(buf, pos))


def compute_crc(batch: bytes | bytearray | memoryview) -> int:
    """The CRC-32C a v2 batch should carry: over attributes..end."""
    view = batch if isinstance(batch, memoryview) else memoryview(batch)
    return int(_crc32c.crc32c(view[ATTRIBUTES_OFFSET:]))


def is_crc_valid(batch: bytes | bytearray | memoryview) -> bool:
    """True when the stored CRC matches the batch's bytes."""
    (stored,) = _U32.unpack_from(batch, CRC_OFFSET)
    return bool(stored == compute_crc(batch))


def validate_batch(
    batch: bytes | bytearray | memoryview, position: int | None = None
) -> BatchHeader:
    """Check a whole v2 batch's framing and CRC; return its header.

    `batch` must be exactly one batch. Raises CorruptRecordError with the reason.
    """
    header = parse_header(batch)
    if header.magic != MAGIC_V2:
        raise CorruptRecordError(f"magic {header.magic} is not 2", position=position)
    if header.batch_length < MIN_BATCH_LENGTH:
        raise CorruptRecordError(
            f"batch length {header.batch_length} is below the minimum {MIN_BATCH_LENGTH}",
            position=position,
        )
    if header.size_in_bytes != len(batch):
        raise CorruptRecordError(
            f"batch length {header.batch_length} does not match the {len(batch)} bytes given",
            position=position,
        )
    actual = compute_crc(batch)
    if actual != header.crc:
        raise CorruptRecordError(
            f"CRC mismatch (stored {header.crc}, computed {actual})", position=position
        )
    return header


# --- records -----------------------------------------------------------------


@dataclass(slots=True)
class Record:
    """One decoded record with absolute offset and timestamp."""

    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: list[tuple[str, bytes | None]] = field(default_factory=list)
    sequence: int = NO_SEQUENCE
    # Legacy messages keep their attributes here; v2 record attributes are always 0.
    attributes: int = 0

    @property
    def key_size(self) -> int:
        """Key length, -1 for a null key (Kafka's keySize)."""
        return -1 if self.key is None else len(self.key)

    @property
    def value_size(self) -> int:
        """Value length, -1 for a null value (a tombstone)."""
        return -1 if self.value is None else len(self.value)


RecordTuple = tuple[int, int, bytes | None, bytes | None, list[tuple[str, bytes | None]], int]
_SEQUENCE_WRAP = 2**31


def iter_record_tuples(
    header: BatchHeader, batch: bytes | bytearray | memoryview
) -> Iterator[RecordTuple]:
    """Decode the records of one whole v2 batch as plain tuples, the fast path.

    Yields `(offset, timestamp, key, value, headers, sequence)`; records without
    headers share one empty list, which callers must not mutate. Raises
    CorruptRecordError when the records section does not decode, or holds more or
    fewer records than the header says.
    """
    buf = records_section(header, batch)
    count = header.record_count
    if count < 0:
        raise CorruptRecordError(f"negative record count {count}")
    return _decode_tuples(header, buf, count)


def records_section(header: BatchHeader, batch: bytes | bytearray | memoryview) -> bytes:
    """The records section of one whole v2 batch, decompressed.

    Raises CorruptRecordError (or the codec's error) when it does not decompress.
    """
    payload: bytes | memoryview = memoryview(batch)[HEADER_SIZE : header.size_in_bytes]
    codec_id = header.attributes & CODEC_MASK
    # An empty records section holds no compressed stream at all (Kafka does not
    # decompress record-less batches); the record count check still applies.
    if codec_id != 0 and len(payload) > 0:
        return decompress(codec_from_id(codec_id), payload)
    return bytes(payload)


def iter_records(header: BatchHeader, batch: bytes | bytearray | memoryview) -> Iterator[Record]:
    """Decode the records of one whole v2 batch (decompressing if needed) as Record objects.

    Raises CorruptRecordError like `iter_record_tuples`.
    """
    for offset, timestamp, key, value, headers, sequence in iter_record_tuples(header, batch):
        yield Record(offset, timestamp, key, value, list(headers), sequence)


def _decode_tuples(header: BatchHeader, buf: bytes, count: int) -> Iterator[RecordTuple]:
    # The hot loop of deep iteration: one- and two-byte varints (record lengths of
    # a few hundred bytes and more) are decoded inline, longer ones by a call.
    end = len(buf)
    pos = 0
    base_offset = header.base_offset
    base_ts = header.base_timestamp
    log_append = header.attributes & TIMESTAMP_TYPE_MASK
    max_ts = header.max_timestamp
    base_seq = header.base_sequence
    no_headers: list[tuple[str, bytes | None]] = []
    try:
        for _ in range(count):
            # Each varint: one byte, two bytes, or the general decoder.
            b = buf[pos]
            if b < 0x80:
                length = (b >> 1) ^ -(b & 1)
                pos += 1
            else:
                b2 = buf[pos + 1]
                if b2 < 0x80:
                    raw = (b & 0x7F) | (b2 << 7)
                    length = (raw >> 1) ^ -(raw & 1)
                    pos += 2
                else:
                    length, pos = read_varint(buf, pos)
            rec_end = pos + length
            if length < 0 or rec_end > end:
                raise CorruptRecordError(f"record length {length} runs past the batch")
            pos += 1  # record attributes, unused
            b = buf[pos]
            if b < 0x80:
                ts_delta = (b >> 1) ^ -(b & 1)
                pos += 1
            else:
                b2 = buf[pos + 1]
                if b2 < 0x80:
                    raw = (b & 0x7F) | (b2 << 7)
                    ts_delta = (raw >> 1) ^ -(raw & 1)
                    pos += 2
                else:
                    ts_delta, pos = read_varlong(buf, pos)
            b = buf[pos]
            if b < 0x80:
                off_delta = (b >> 1) ^ -(b & 1)
                pos += 1
            else:
                b2 = buf[pos + 1]
                if b2 < 0x80:
                    raw = (b & 0x7F) | (b2 << 7)
                    off_delta = (raw >> 1) ^ -(raw & 1)
                    pos += 2
                else:
                    off_delta, pos = read_varint(buf, pos)
            b = buf[pos]
            if b < 0x80:
                klen = (b >> 1) ^ -(b & 1)
                pos += 1
            else:
                b2 = buf[pos + 1]
                if b2 < 0x80:
                    raw = (b & 0x7F) | (b2 << 7)
                    klen = (raw >> 1) ^ -(raw & 1)
                    pos += 2
                else:
                    klen, pos = read_varint(buf, pos)
            if klen < 0:
                key = None
            else:
                key = buf[pos : pos + klen]
                pos += klen
            b = buf[pos]
            if b < 0x80:
                vlen = (b >> 1) ^ -(b & 1)
                pos += 1
            else:
                b2 = buf[pos + 1]
                if b2 < 0x80:
                    raw = (b & 0x7F) | (b2 << 7)
                    vlen = (raw >> 1) ^ -(raw & 1)
                    pos += 2
                else:
                    vlen, pos = read_varint(buf, pos)
            if vlen < 0:
                value = None
            else:
                value = buf[pos : pos + vlen]
                pos += vlen
            b = buf[pos]
            if b == 0:
                headers = no_headers
                pos += 1
            else:
                nheaders, pos = read_varint(buf, pos)
                if nheaders < 0:
                    raise CorruptRecordError(f"negative header count {nheaders}")
                headers = []
                for _h in range(nheaders):
                    hklen, pos = read_varint(buf, pos)
                    if hklen < 0:
                        raise CorruptRecordError("null header key")
                    hkey = buf[pos : pos + hklen].decode("utf-8")
                    pos += hklen
                    hvlen, pos = read_varint(buf, pos)
                    if hvlen < 0:
                        hval = None
                    else:
                        hval = buf[pos : pos + hvlen]
                        pos += hvlen
                    headers.append((hkey, hval))
            if pos != rec_end:
                raise CorruptRecordError(
                    f"record at offset delta {off_delta} has {rec_end - pos} bytes unaccounted for"
                )
            if base_seq >= 0:
                seq = base_seq + off_delta
                if seq >= _SEQUENCE_WRAP:
                    seq -= _SEQUENCE_WRAP
            else:
                seq = -1
            yield (
                base_offset + off_delta,
                max_ts if log_append else base_ts + ts_delta,
                key,
                value,
                headers,
                seq,
            )
    except IndexError:
        raise CorruptRecordError("records section is truncated") from None
    except UnicodeDecodeError:
        raise CorruptRecordError("header key is not valid UTF-8") from None
    if pos != end:
        raise CorruptRecordError(
            f"{end - pos} bytes after the last of {count} records in the batch"
        )


# --- building batches --------------------------------------------------------


@dataclass(slots=True)
class RecordSpec:
    """A record to write. offset_delta/timestamp default to position and batch time."""

    key: bytes | None
    value: bytes | None
    headers: Sequence[tuple[str, bytes | None]] = ()
    timestamp: int | None = None
    offset_delta: int | None = None


def encode_record(
    out: bytearray,
    offset_delta: int,
    timestamp_delta: int,
    key: bytes | None,
    value: bytes | None,
    headers: Sequence[tuple[str, bytes | None]] = (),
) -> None:
    """Append one v2 record (length-prefixed) to `out`."""
    body = bytearray(b"\x00")  # record attributes: unused, always 0
    write_varint(body, timestamp_delta)
    write_varint(body, offset_delta)
    if key is None:
        body += b"\x01"  # zigzag(-1)
    else:
        write_varint(body, len(key))
        body += key
    if value is None:
        body += b"\x01"
    else:
        write_varint(body, len(value))
        body += value
    write_varint(body, len(headers))
    for hkey, hval in headers:
        hk = hkey.encode("utf-8")
        write_varint(body, len(hk))
        body += hk
        if hval is None:
            body += b"\x01"
        else:
            write_varint(body, len(hval))
            body += hval
    write_varint(out, len(body))
    out += body


def build_batch(
    records: Iterable[RecordSpec],
    *,
    base_offset: int = 0,
    codec: Codec | int = Codec.NONE,
    timestamp_type: int = CREATE_TIME,
    base_timestamp: int | None = None,
    log_append_time: int | None = None,
    producer_id: int = NO_PRODUCER_ID,
    producer_epoch: int = NO_PRODUCER_EPOCH,
    base_sequence: int = NO_SEQUENCE,
    partition_leader_epoch: int = NO_PARTITION_LEADER_EPOCH,
    is_transactional: bool = False,
    is_control: bool = False,
    delete_horizon_ms: int | None = None,
    last_offset_delta: int | None = None,
) -> bytes:
    """Encode a complete v2 batch with a correct CRC.

    Records without a timestamp take `base_timestamp` (or 0); offset deltas default
    to 0, 1, 2, ... `last_offset_delta` may exceed the last record's delta (as after
    compaction). With `delete_horizon_ms`, baseTimestamp holds the horizon and the
    timestamp deltas are taken relative to it, as Kafka's cleaner writes.
    """
    recs = list(records)
    timestamps = [r.timestamp for r in recs if r.timestamp is not None]
    if delete_horizon_ms is not None:
        first_ts = delete_horizon_ms
    elif base_timestamp is not None:
        first_ts = base_timestamp
    elif timestamps:
        first_ts = timestamps[0]
    else:
        first_ts = NO_TIMESTAMP if not recs else 0
    body = bytearray()
    max_ts = NO_TIMESTAMP
    max_delta = -1
    for i, r in enumerate(recs):
        delta = i if r.offset_delta is None else r.offset_delta
        ts = r.timestamp if r.timestamp is not None else (first_ts if first_ts >= 0 else 0)
        max_ts = max(max_ts, ts)
        max_delta = max(max_delta, delta)
        encode_record(body, delta, ts - first_ts, r.key, r.value, r.headers)
    if last_offset_delta is None:
        last_offset_delta = max(max_delta, 0)
    attributes = int(codec) & CODEC_MASK
    if timestamp_type == LOG_APPEND_TIME:
        attributes |= TIMESTAMP_TYPE_MASK
        if log_append_time is not None:
            max_ts = log_append_time
    if is_transactional:
        attributes |= TRANSACTIONAL_MASK
    if is_control:
        attributes |= CONTROL_MASK
    if delete_horizon_ms is not None:
        attributes |= DELETE_HORIZON_MASK
    payload = compress(codec, body) if int(codec) != 0 else bytes(body)
    batch_length = HEADER_SIZE - LOG_OVERHEAD + len(payload)
    out = bytearray(
        _HEADER.pack(
            base_offset,
            batch_length,
            partition_leader_epoch,
            MAGIC_V2,
            0,
            attributes,
            last_offset_delta,
            first_ts,
            max_ts,
            producer_id,
            producer_epoch,
            base_sequence,
            len(recs),
        )
    )
    out += payload
    _U32.pack_into(out, CRC_OFFSET, compute_crc(out))
    return bytes(out)


# --- in-place patching (the broker's append path) ----------------------------


def set_base_offset(batch: bytearray | memoryview, base_offset: int, pos: int = 0) -> None:
    """Overwrite baseOffset in place; the CRC does not cover it."""
    _BASE_OFFSET.pack_into(batch, pos, base_offset)


def set_partition_leader_epoch(batch: bytearray | memoryview, epoch: int, pos: int = 0) -> None:
    """Overwrite partitionLeaderEpoch in place; the CRC does not cover it."""
    _LEADER_EPOCH.pack_into(batch, pos + 12, epoch)


def set_log_append_time(
    batch: bytearray | memoryview, timestamp: int, pos: int = 0, size: int | None = None
) -> None:
    """Mark a batch LogAppendTime with `timestamp` as its max timestamp; fixes the CRC."""
    (attrs,) = struct.unpack_from(">h", batch, pos + ATTRIBUTES_OFFSET)
    struct.pack_into(">h", batch, pos + ATTRIBUTES_OFFSET, attrs | TIMESTAMP_TYPE_MASK)
    _I64.pack_into(batch, pos + 35, timestamp)
    if size is None:
        size = struct.unpack_from(">i", batch, pos + 8)[0] + LOG_OVERHEAD
    view = memoryview(batch)[pos : pos + size]
    _U32.pack_into(batch, pos + CRC_OFFSET, compute_crc(view))


# --- control records ---------------------------------------------------------

CONTROL_ABORT = 0
CONTROL_COMMIT = 1
_CONTROL_TYPE_NAMES = {
    0: "ABORT",
    1: "COMMIT",
    2: "LEADER_CHANGE",
    3: "SNAPSHOT_HEADER",
    4: "SNAPSHOT_FOOTER",
    5: "KRAFT_VERSION",
    6: "KRAFT_VOTERS",
}
_CONTROL_KEY = struct.Struct(">hh")
_END_TXN_VALUE = struct.Struct(">hi")


def control_type_name(type_id: int) -> str:
    """Kafka's ControlRecordType name for an id, UNKNOWN otherwise."""
    return _CONTROL_TYPE_NAMES.get(type_id, "UNKNOWN")


def parse_control_key(key: bytes | None) -> tuple[int, int]:
    """(version, type id) of a control record's key."""
    if key is None or len(key) < 4:
        raise CorruptRecordError("control record key shorter than 4 bytes")
    version, type_id = _CONTROL_KEY.unpack_from(key, 0)
    return int(version), int(type_id)


def parse_end_txn_marker(value: bytes | None) -> tuple[int, int]:
    """(version, coordinator epoch) of a COMMIT/ABORT marker's value."""
    if value is None or len(value) < 6:
        raise CorruptRecordError("transaction marker value shorter than 6 bytes")
    version, coordinator_epoch = _END_TXN_VALUE.unpack_from(value, 0)
    return int(version), int(coordinator_epoch)


def build_end_txn_marker(
    *,
    commit: bool,
    producer_id: int,
    producer_epoch: int,
    coordinator_epoch: int,
    base_offset: int = 0,
    timestamp: int = 0,
    partition_leader_epoch: int = NO_PARTITION_LEADER_EPOCH,
) -> bytes:
    """A control batch holding one COMMIT or ABORT transaction marker."""
    key = _CONTROL_KEY.pack(0, CONTROL_COMMIT if commit else CONTROL_ABORT)
    value = _END_TXN_VALUE.pack(0, coordinator_epoch)
    return build_batch(
        [RecordSpec(key, value, timestamp=timestamp)],
        base_offset=base_offset,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        partition_leader_epoch=partition_leader_epoch,
        is_transactional=True,
        is_control=True,
    )
