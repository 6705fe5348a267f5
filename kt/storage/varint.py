"""Zig-zag variable-length integers as used inside v2 records (protobuf style).

Varints hold 32-bit values in at most 5 bytes, varlongs 64-bit values in at most
10; both zig-zag encode so small negative numbers stay short (-1 is one byte).
"""

from __future__ import annotations

from kt.storage.errors import CorruptRecordError


def read_varint(buf: bytes | bytearray | memoryview, pos: int) -> tuple[int, int]:
    """Decode a zig-zag varint (at most 5 bytes) at `pos`; return (value, new pos)."""
    return _read(buf, pos, 5)


def read_varlong(buf: bytes | bytearray | memoryview, pos: int) -> tuple[int, int]:
    """Decode a zig-zag varlong (at most 10 bytes) at `pos`; return (value, new pos)."""
    return _read(buf, pos, 10)


def _read(buf: bytes | bytearray | memoryview, pos: int, max_bytes: int) -> tuple[int, int]:
    raw = 0
    shift = 0
    for i in range(max_bytes):
        try:
            b = buf[pos + i]
        except IndexError:
            raise CorruptRecordError("varint runs past the end of the data") from None
        raw |= (b & 0x7F) << shift
        if b < 0x80:
            return (raw >> 1) ^ -(raw & 1), pos + i + 1
        shift += 7
    raise CorruptRecordError(f"varint longer than {max_bytes} bytes")


def write_varint(out: bytearray, value: int) -> None:
    """Append the zig-zag encoding of `value` (a varint or varlong) to `out`."""
    raw = (value << 1) ^ (value >> 63)
    raw &= 0xFFFFFFFFFFFFFFFF
    while raw >= 0x80:
        out.append((raw & 0x7F) | 0x80)
        raw >>= 7
    out.append(raw)


def varint_size(value: int) -> int:
    """Bytes the zig-zag encoding of `value` takes."""
    raw = ((value << 1) ^ (value >> 63)) & 0xFFFFFFFFFFFFFFFF
    size = 1
    while raw >= 0x80:
        raw >>= 7
        size += 1
    return size
