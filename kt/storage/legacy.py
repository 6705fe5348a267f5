"""Kafka's legacy message format, magic 0 and 1 (message sets, Kafka < 0.11).

A log entry is `offset int64, size int32, message`; the message is

    crc uint32 (CRC-32 over magic..end) | magic int8 | attributes int8 |
    [timestamp int64, magic 1 only] | key (int32 length, -1 = null) |
    value (int32 length, -1 = null)

Attributes: bits 0-2 codec, bit 3 timestamp type (magic 1). A compressed message
is a *wrapper*: its value is a compressed message set of inner messages. With
magic 1 the inner offsets are relative (0..n-1) and the wrapper carries the
absolute offset of the last inner message; with magic 0 inner offsets are absolute.
When a magic-1 wrapper says LogAppendTime, its timestamp applies to every inner
message.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from kt.storage.compression import Codec, codec_from_id, compress, decompress
from kt.storage.errors import CorruptRecordError

LOG_OVERHEAD = 12
# crc + magic + attributes + key length + value length
MESSAGE_OVERHEAD_V0 = 14
# ... + timestamp
MESSAGE_OVERHEAD_V1 = 22
CODEC_MASK = 0x07
TIMESTAMP_TYPE_MASK = 0x08
NO_TIMESTAMP = -1

_ENTRY_HEAD = struct.Struct(">qiIbb")  # offset, size, crc, magic, attributes
_I64 = struct.Struct(">q")
_I32 = struct.Struct(">i")


def min_message_size(magic: int) -> int:
    """The smallest legal `size` field for a message of this magic."""
    return MESSAGE_OVERHEAD_V0 if magic == 0 else MESSAGE_OVERHEAD_V1


@dataclass(slots=True)
class LegacyMessage:
    """One legacy log entry (a plain message or a compressed wrapper)."""

    offset: int
    size: int  # the size field: bytes after it
    crc: int
    magic: int
    attributes: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    computed_crc: int

    @property
    def size_in_bytes(self) -> int:
        """Whole entry size on disk, offset and size fields included."""
        return self.size + LOG_OVERHEAD

    @property
    def codec_id(self) -> int:
        """Raw codec bits of the attributes."""
        return self.attributes & CODEC_MASK

    @property
    def codec(self) -> Codec:
        """Compression codec (a non-NONE codec makes this a wrapper)."""
        return codec_from_id(self.attributes & CODEC_MASK)

    @property
    def timestamp_type(self) -> int:
        """0 CreateTime, 1 LogAppendTime (magic 1 only)."""
        return 1 if (self.magic > 0 and self.attributes & TIMESTAMP_TYPE_MASK) else 0

    @property
    def is_valid(self) -> bool:
        """True when the stored CRC-32 matches the message bytes."""
        return self.crc == self.computed_crc

    @property
    def key_size(self) -> int:
        """Key length, -1 for a null key."""
        return -1 if self.key is None else len(self.key)

    @property
    def value_size(self) -> int:
        """Value length, -1 for a null value."""
        return -1 if self.value is None else len(self.value)


def parse_message(buf: bytes | bytearray | memoryview, pos: int = 0) -> LegacyMessage:
    """Decode one whole legacy entry at `pos` (its bytes must all be present)."""
    end_avail = len(buf)
    if end_avail - pos < LOG_OVERHEAD + MESSAGE_OVERHEAD_V0:
        raise CorruptRecordError("legacy message shorter than its minimum size", position=pos)
    offset, size, crc, magic, attrs = _ENTRY_HEAD.unpack_from(buf, pos)
    if magic not in (0, 1):
        raise CorruptRecordError(f"invalid legacy magic {magic}", position=pos)
    if size < min_message_size(magic):
        raise CorruptRecordError(
            f"message size {size} is less than the minimum {min_message_size(magic)}", position=pos
        )
    end = pos + LOG_OVERHEAD + size
    if end > end_avail:
        raise CorruptRecordError("legacy message is truncated", position=pos)
    view = memoryview(buf)
    computed = zlib.crc32(view[pos + 16 : end]) & 0xFFFFFFFF
    p = pos + 18
    timestamp = NO_TIMESTAMP
    if magic == 1:
        (timestamp,) = _I64.unpack_from(buf, p)
        p += 8
    key, p = _read_bytes(buf, p, end, pos)
    value, p = _read_bytes(buf, p, end, pos)
    if p != end:
        raise CorruptRecordError(
            f"legacy message has {end - p} bytes after its value", position=pos
        )
    return LegacyMessage(offset, size, crc, magic, attrs, timestamp, key, value, computed)


def _read_bytes(
    buf: bytes | bytearray | memoryview, p: int, end: int, pos: int
) -> tuple[bytes | None, int]:
    if p + 4 > end:
        raise CorruptRecordError("legacy message truncated inside a length field", position=pos)
    (n,) = _I32.unpack_from(buf, p)
    p += 4
    if n < 0:
        if n != -1:
            raise CorruptRecordError(f"negative length {n}", position=pos)
        return None, p
    if p + n > end:
        raise CorruptRecordError(f"length {n} runs past the message", position=pos)
    return bytes(buf[p : p + n]), p + n


def iter_inner(wrapper: LegacyMessage) -> Iterator[LegacyMessage]:
    """The messages of a legacy entry with absolute offsets and effective timestamps.

    A plain message yields itself; a compressed wrapper yields its inner messages.
    """
    if wrapper.codec_id == 0:
        yield wrapper
        return
    if wrapper.value is None:
        raise CorruptRecordError("compressed wrapper message has a null value")
    data = decompress(wrapper.codec, wrapper.value, magic=wrapper.magic)
    inner: list[LegacyMessage] = []
    pos = 0
    while pos < len(data):
        if len(data) - pos < LOG_OVERHEAD:
            raise CorruptRecordError("compressed message set ends inside an entry")
        msg = parse_message(data, pos)
        if msg.codec_id != 0:
            raise CorruptRecordError("compressed message nested inside a compressed wrapper")
        inner.append(msg)
        pos += msg.size_in_bytes
    if not inner:
        return
    if wrapper.magic > 0:
        # Relative inner offsets: the wrapper holds the last absolute offset.
        base = wrapper.offset - inner[-1].offset
        for msg in inner:
            msg.offset = base + msg.offset
    log_append = wrapper.timestamp_type == 1
    for msg in inner:
        if log_append:
            msg.timestamp = wrapper.timestamp
            msg.attributes |= TIMESTAMP_TYPE_MASK
        yield msg


def encode_message(
    offset: int,
    magic: int,
    key: bytes | None,
    value: bytes | None,
    timestamp: int = NO_TIMESTAMP,
    attributes: int = 0,
) -> bytes:
    """Encode one legacy log entry with a correct CRC-32."""
    body = bytearray(struct.pack(">bb", magic, attributes))
    if magic == 1:
        body += _I64.pack(timestamp)
    for part in (key, value):
        if part is None:
            body += _I32.pack(-1)
        else:
            body += _I32.pack(len(part))
            body += part
    crc = zlib.crc32(body) & 0xFFFFFFFF
    message = struct.pack(">I", crc) + bytes(body)
    return _I64.pack(offset) + _I32.pack(len(message)) + message


def build_message_set(
    records: Sequence[tuple[bytes | None, bytes | None, int]],
    *,
    magic: int,
    base_offset: int = 0,
    codec: Codec | int = Codec.NONE,
    log_append_time: int | None = None,
) -> bytes:
    """Encode (key, value, timestamp) records as a legacy message set.

    Uncompressed: one entry per record. Compressed: one wrapper holding them all,
    with relative inner offsets for magic 1 as Kafka 0.10 writes them.
    """
    if int(codec) == 0:
        return b"".join(
            encode_message(base_offset + i, magic, k, v, ts if magic else NO_TIMESTAMP)
            for i, (k, v, ts) in enumerate(records)
        )
    inner = b"".join(
        encode_message(
            i if magic == 1 else base_offset + i, magic, k, v, ts if magic else NO_TIMESTAMP
        )
        for i, (k, v, ts) in enumerate(records)
    )
    wrapper_ts = NO_TIMESTAMP
    attrs = int(codec) & CODEC_MASK
    if magic == 1:
        wrapper_ts = max((ts for _, _, ts in records), default=NO_TIMESTAMP)
        if log_append_time is not None:
            wrapper_ts = log_append_time
            attrs |= TIMESTAMP_TYPE_MASK
    return encode_message(
        base_offset + len(records) - 1, magic, None, compress(codec, inner), wrapper_ts, attrs
    )
