"""Kafka wire primitives: readers and writers for every scalar and length-prefixed type.

Readers take `(buf, pos)` - a memoryview (or any buffer) and an offset - and return
`(value, new_pos)`; they never copy more than the value itself and raise only
`DecodeError`. Writers append to a bytearray. The schema codec (`codec.py`) picks
one reader/writer per field and version when it compiles a plan, so nothing here
looks at versions or schemas.

`records` fields are deliberately opaque: the reader returns a memoryview slice of
the frame, so produce and fetch move record batches without copying or parsing.
Their writers also take an `ExternalRecords` placeholder, whose bytes the transport
sends itself (see regions.py).
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from typing import Any
from uuid import UUID

from kt.protocol.errors import DecodeError, EncodeError
from kt.protocol.regions import ExternalRecords, mark

Reader = Callable[[memoryview, int], tuple[Any, int]]
Writer = Callable[[bytearray, Any], None]

INT8 = struct.Struct(">b")
INT16 = struct.Struct(">h")
INT32 = struct.Struct(">i")
INT64 = struct.Struct(">q")
UINT16 = struct.Struct(">H")
UINT32 = struct.Struct(">I")
FLOAT64 = struct.Struct(">d")
BOOL = struct.Struct(">?")

ZERO_UUID = UUID(int=0)

#: struct format characters of the fixed-width types, so the codec can fuse runs
#: of consecutive fixed-width fields into one struct.Struct call.
FIXED_FORMATS: dict[str, str] = {
    "int8": "b",
    "int16": "h",
    "int32": "i",
    "int64": "q",
    "uint16": "H",
    "uint32": "I",
    "float64": "d",
    "bool": "?",
}


def _fixed_reader(s: struct.Struct, name: str) -> Reader:
    size = s.size
    unpack_from = s.unpack_from

    def read(buf: memoryview, pos: int) -> tuple[Any, int]:
        try:
            return unpack_from(buf, pos)[0], pos + size
        except struct.error:
            raise DecodeError(f"truncated {name} at offset {pos}") from None

    return read


def _fixed_writer(s: struct.Struct) -> Writer:
    pack = s.pack

    def write(out: bytearray, value: Any) -> None:
        out += pack(value)

    return write


read_int8 = _fixed_reader(INT8, "int8")
read_int16 = _fixed_reader(INT16, "int16")
read_int32 = _fixed_reader(INT32, "int32")
read_int64 = _fixed_reader(INT64, "int64")
read_uint16 = _fixed_reader(UINT16, "uint16")
read_uint32 = _fixed_reader(UINT32, "uint32")
read_float64 = _fixed_reader(FLOAT64, "float64")
read_bool = _fixed_reader(BOOL, "bool")
write_int8 = _fixed_writer(INT8)
write_int16 = _fixed_writer(INT16)
write_int32 = _fixed_writer(INT32)
write_int64 = _fixed_writer(INT64)
write_uint16 = _fixed_writer(UINT16)
write_uint32 = _fixed_writer(UINT32)
write_float64 = _fixed_writer(FLOAT64)


def write_bool(out: bytearray, value: Any) -> None:
    """Append a boolean as one byte, 1 or 0."""
    out.append(1 if value else 0)


def read_uuid(buf: memoryview, pos: int) -> tuple[UUID, int]:
    """Read a 16-byte UUID."""
    end = pos + 16
    if end > len(buf):
        raise DecodeError(f"truncated uuid at offset {pos}")
    return UUID(bytes=bytes(buf[pos:end])), end


def write_uuid(out: bytearray, value: UUID) -> None:
    """Append a UUID as its 16 raw bytes."""
    out += value.bytes


# --- varints -------------------------------------------------------------------


def read_uvarint(buf: memoryview, pos: int) -> tuple[int, int]:
    """Read an unsigned varint of at most 5 bytes (Kafka's uint32 varint)."""
    try:
        b = buf[pos]
        if b < 0x80:
            return b, pos + 1
        result = b & 0x7F
        shift = 7
        pos += 1
        while True:
            b = buf[pos]
            pos += 1
            result |= (b & 0x7F) << shift
            if b < 0x80:
                return result & 0xFFFFFFFF, pos
            shift += 7
            if shift > 28:
                raise DecodeError(f"unsigned varint longer than 5 bytes at offset {pos}")
    except IndexError:
        raise DecodeError(f"truncated varint at offset {pos}") from None


def write_uvarint(out: bytearray, value: int) -> None:
    """Append an unsigned varint (value must be in 0..2**32-1)."""
    if value < 0x80:
        if value < 0:
            raise EncodeError(f"unsigned varint cannot hold {value}")
        out.append(value)
        return
    if value > 0xFFFFFFFF:
        raise EncodeError(f"unsigned varint cannot hold {value}")
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)


def _read_zigzag(buf: memoryview, pos: int, max_shift: int, kind: str) -> tuple[int, int]:
    start = pos
    result = 0
    shift = 0
    try:
        while True:
            b = buf[pos]
            pos += 1
            result |= (b & 0x7F) << shift
            if b < 0x80:
                break
            shift += 7
            if shift > max_shift:
                raise DecodeError(f"{kind} too long at offset {start}")
    except IndexError:
        raise DecodeError(f"truncated {kind} at offset {start}") from None
    # Java ignores bits beyond the width; masking keeps us bit-compatible with it.
    result &= 0xFFFFFFFF if max_shift == 28 else 0xFFFFFFFFFFFFFFFF
    return (result >> 1) ^ -(result & 1), pos


def read_varint(buf: memoryview, pos: int) -> tuple[int, int]:
    """Read a zigzag-encoded signed 32-bit varint (at most 5 bytes)."""
    return _read_zigzag(buf, pos, 28, "varint")


def read_varlong(buf: memoryview, pos: int) -> tuple[int, int]:
    """Read a zigzag-encoded signed 64-bit varlong (at most 10 bytes)."""
    return _read_zigzag(buf, pos, 63, "varlong")


def _write_zigzag(out: bytearray, value: int, bits: int) -> None:
    lo = -(1 << (bits - 1))
    if not lo <= value < -lo:
        raise EncodeError(f"{value} does not fit a {bits}-bit varint")
    v = ((value << 1) ^ (value >> (bits - 1))) & ((1 << bits) - 1)
    while v >= 0x80:
        out.append((v & 0x7F) | 0x80)
        v >>= 7
    out.append(v)


def write_varint(out: bytearray, value: int) -> None:
    """Append a zigzag-encoded signed 32-bit varint."""
    _write_zigzag(out, value, 32)


def write_varlong(out: bytearray, value: int) -> None:
    """Append a zigzag-encoded signed 64-bit varlong."""
    _write_zigzag(out, value, 64)


# --- length prefixes -----------------------------------------------------------
# Classic encodings use a signed int16 (strings) or int32 (bytes, arrays) length
# with -1 for null; compact ones use an unsigned varint holding length + 1, with 0
# for null. Every reader below returns -1 for null so callers share one check.


def _read_len16(buf: memoryview, pos: int) -> tuple[int, int]:
    try:
        return INT16.unpack_from(buf, pos)[0], pos + 2
    except struct.error:
        raise DecodeError(f"truncated length at offset {pos}") from None


def _read_len32(buf: memoryview, pos: int) -> tuple[int, int]:
    try:
        return INT32.unpack_from(buf, pos)[0], pos + 4
    except struct.error:
        raise DecodeError(f"truncated length at offset {pos}") from None


def _read_compact_len(buf: memoryview, pos: int) -> tuple[int, int]:
    n, pos = read_uvarint(buf, pos)
    return n - 1, pos


def _check_len(n: int, pos: int, buf: memoryview, nullable: bool) -> bool:
    """Validate a decoded length; True means the value is null."""
    if n < 0:
        if n == -1 and nullable:
            return True
        if n == -1:
            raise DecodeError(f"null in a non-nullable field at offset {pos}")
        raise DecodeError(f"negative length {n} at offset {pos}")
    if pos + n > len(buf):
        raise DecodeError(f"length {n} at offset {pos} runs past the end of the data")
    return False


LenReader = Callable[[memoryview, int], tuple[int, int]]


def _string_reader(read_len: LenReader, nullable: bool) -> Reader:
    def read(buf: memoryview, pos: int) -> tuple[Any, int]:
        n, pos = read_len(buf, pos)
        if _check_len(n, pos, buf, nullable):
            return None, pos
        end = pos + n
        try:
            return str(buf[pos:end], "utf-8"), end
        except UnicodeDecodeError:
            raise DecodeError(f"invalid UTF-8 in string at offset {pos}") from None

    return read


def _bytes_reader(read_len: LenReader, nullable: bool, copy: bool) -> Reader:
    def read(buf: memoryview, pos: int) -> tuple[Any, int]:
        n, pos = read_len(buf, pos)
        if _check_len(n, pos, buf, nullable):
            return None, pos
        end = pos + n
        # bytes fields are small (group metadata, SASL tokens) and callers keep them,
        # so they are copied; records stay a view of the frame (see module doc).
        return (bytes(buf[pos:end]) if copy else buf[pos:end]), end

    return read


read_string = _string_reader(_read_len16, False)
read_nullable_string = _string_reader(_read_len16, True)
read_compact_string = _string_reader(_read_compact_len, False)
read_compact_nullable_string = _string_reader(_read_compact_len, True)
read_bytes = _bytes_reader(_read_len32, False, True)
read_nullable_bytes = _bytes_reader(_read_len32, True, True)
read_compact_bytes = _bytes_reader(_read_compact_len, False, True)
read_compact_nullable_bytes = _bytes_reader(_read_compact_len, True, True)
read_records = _bytes_reader(_read_len32, True, False)
read_compact_records = _bytes_reader(_read_compact_len, True, False)


def _null_check(value: Any, nullable: bool) -> bool:
    if value is None:
        if not nullable:
            raise EncodeError("null given for a non-nullable field")
        return True
    return False


def _string_writer(compact: bool, nullable: bool) -> Writer:
    def write(out: bytearray, value: Any) -> None:
        if _null_check(value, nullable):
            if compact:
                out.append(0)
            else:
                out += b"\xff\xff"
            return
        data = value.encode("utf-8")
        if compact:
            write_uvarint(out, len(data) + 1)
        else:
            if len(data) > 0x7FFF:
                raise EncodeError(f"string of {len(data)} bytes is too long for an int16 length")
            out += INT16.pack(len(data))
        out += data

    return write


def _bytes_writer(compact: bool, nullable: bool) -> Writer:
    def write(out: bytearray, value: Any) -> None:
        if _null_check(value, nullable):
            if compact:
                out.append(0)
            else:
                out += b"\xff\xff\xff\xff"
            return
        n = len(value) if not isinstance(value, memoryview) else value.nbytes
        if compact:
            write_uvarint(out, n + 1)
        else:
            out += INT32.pack(n)
        out += value

    return write


write_string = _string_writer(False, False)
write_nullable_string = _string_writer(False, True)
write_compact_string = _string_writer(True, False)
write_compact_nullable_string = _string_writer(True, True)
write_bytes = _bytes_writer(False, False)
write_nullable_bytes = _bytes_writer(False, True)
write_compact_bytes = _bytes_writer(True, False)
write_compact_nullable_bytes = _bytes_writer(True, True)


def _records_writer(compact: bool, nullable: bool) -> Writer:
    """Like the bytes writer, but also takes an ExternalRecords placeholder (see
    regions.py): its length prefix is written and its bytes are left to the transport."""

    def write(out: bytearray, value: Any) -> None:
        if _null_check(value, nullable):
            if compact:
                out.append(0)
            else:
                out += b"\xff\xff\xff\xff"
            return
        try:
            n = len(value) if not isinstance(value, memoryview) else value.nbytes
        except TypeError:
            # Only a value without len() gets here, so bytes pay nothing for this.
            if not isinstance(value, ExternalRecords):
                raise
            if compact:
                write_uvarint(out, value.length + 1)
            else:
                out += INT32.pack(value.length)
            mark(out, value)
            return
        if compact:
            write_uvarint(out, n + 1)
        else:
            out += INT32.pack(n)
        out += value

    return write


write_records = _records_writer(False, True)
write_compact_records = _records_writer(True, True)


# --- arrays --------------------------------------------------------------------


def array_reader(elem: Reader, compact: bool, nullable: bool) -> Reader:
    """A reader for an array (classic int32 count or compact varint count+1) of `elem`."""
    read_len = _read_compact_len if compact else _read_len32

    def read(buf: memoryview, pos: int) -> tuple[Any, int]:
        n, pos = read_len(buf, pos)
        if n < 0:
            if n == -1 and nullable:
                return None, pos
            raise DecodeError(f"invalid array length {n} at offset {pos}")
        # Every element takes at least one byte on the wire in practice; the check
        # stops a forged count from making us loop (or allocate) billions of times.
        if n > len(buf) - pos:
            raise DecodeError(f"array of {n} elements at offset {pos} exceeds the data")
        items: list[Any] = []
        append = items.append
        for _ in range(n):
            v, pos = elem(buf, pos)
            append(v)
        return items, pos

    return read


def array_writer(elem: Writer, compact: bool, nullable: bool) -> Writer:
    """A writer for an array of `elem` (see array_reader)."""

    def write(out: bytearray, value: Any) -> None:
        if _null_check(value, nullable):
            if compact:
                out.append(0)
            else:
                out += b"\xff\xff\xff\xff"
            return
        if compact:
            write_uvarint(out, len(value) + 1)
        else:
            out += INT32.pack(len(value))
        for v in value:
            elem(out, v)

    return write


# --- tagged fields -------------------------------------------------------------


def read_tagged_fields(buf: memoryview, pos: int) -> tuple[list[tuple[int, memoryview]], int]:
    """Read a tagged-field section into [(tag, raw payload view)] without interpreting it."""
    count, pos = read_uvarint(buf, pos)
    fields: list[tuple[int, memoryview]] = []
    for _ in range(count):
        tag, pos = read_uvarint(buf, pos)
        size, pos = read_uvarint(buf, pos)
        end = pos + size
        if end > len(buf):
            raise DecodeError(f"tagged field {tag} at offset {pos} runs past the end of the data")
        fields.append((tag, buf[pos:end]))
        pos = end
    return fields, pos


def write_tagged_fields(out: bytearray, fields: list[tuple[int, bytes | bytearray]]) -> None:
    """Write a tagged-field section from (tag, payload) pairs, sorted by tag as Kafka requires."""
    write_uvarint(out, len(fields))
    for tag, payload in sorted(fields, key=lambda f: f[0]):
        write_uvarint(out, tag)
        write_uvarint(out, len(payload))
        out += payload


#: Readers and writers of the length-prefixed types, keyed by (type, compact, nullable).
READERS: dict[tuple[str, bool, bool], Reader] = {
    ("string", False, False): read_string,
    ("string", False, True): read_nullable_string,
    ("string", True, False): read_compact_string,
    ("string", True, True): read_compact_nullable_string,
    ("bytes", False, False): read_bytes,
    ("bytes", False, True): read_nullable_bytes,
    ("bytes", True, False): read_compact_bytes,
    ("bytes", True, True): read_compact_nullable_bytes,
    ("records", False, False): _bytes_reader(_read_len32, False, False),
    ("records", False, True): read_records,
    ("records", True, False): _bytes_reader(_read_compact_len, False, False),
    ("records", True, True): read_compact_records,
}

WRITERS: dict[tuple[str, bool, bool], Writer] = {
    ("string", False, False): write_string,
    ("string", False, True): write_nullable_string,
    ("string", True, False): write_compact_string,
    ("string", True, True): write_compact_nullable_string,
    ("bytes", False, False): write_bytes,
    ("bytes", False, True): write_nullable_bytes,
    ("bytes", True, False): write_compact_bytes,
    ("bytes", True, True): write_compact_nullable_bytes,
    ("records", False, False): _records_writer(False, False),
    ("records", False, True): write_records,
    ("records", True, False): _records_writer(True, False),
    ("records", True, True): write_compact_records,
}

FIXED_READERS: dict[str, Reader] = {
    "int8": read_int8,
    "int16": read_int16,
    "int32": read_int32,
    "int64": read_int64,
    "uint16": read_uint16,
    "uint32": read_uint32,
    "float64": read_float64,
    "bool": read_bool,
    "uuid": read_uuid,
}

FIXED_WRITERS: dict[str, Writer] = {
    "int8": write_int8,
    "int16": write_int16,
    "int32": write_int32,
    "int64": write_int64,
    "uint16": write_uint16,
    "uint32": write_uint32,
    "float64": write_float64,
    "bool": write_bool,
    "uuid": write_uuid,
}
