"""Wire primitives: boundary values, compact encodings, nulls, and malformed input."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any
from uuid import UUID

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kt.protocol import primitives as p
from kt.protocol.errors import DecodeError, EncodeError


def roundtrip(write: Callable[[bytearray, Any], None], read: p.Reader, value: Any) -> bytes:
    out = bytearray()
    write(out, value)
    got, end = read(memoryview(bytes(out)), 0)
    assert end == len(out)
    assert got == value
    return bytes(out)


@pytest.mark.parametrize(
    ("value", "encoded"),
    [
        (0, b"\x00"),
        (1, b"\x01"),
        (127, b"\x7f"),
        (128, b"\x80\x01"),
        (300, b"\xac\x02"),
        (16383, b"\xff\x7f"),
        (16384, b"\x80\x80\x01"),
        (2**32 - 1, b"\xff\xff\xff\xff\x0f"),
    ],
)
def test_uvarint_boundaries(value: int, encoded: bytes) -> None:
    assert roundtrip(p.write_uvarint, p.read_uvarint, value) == encoded


@pytest.mark.parametrize(
    ("value", "encoded"),
    [
        (0, b"\x00"),
        (-1, b"\x01"),
        (1, b"\x02"),
        (-64, b"\x7f"),
        (64, b"\x80\x01"),
        (2**31 - 1, b"\xfe\xff\xff\xff\x0f"),
        (-(2**31), b"\xff\xff\xff\xff\x0f"),
    ],
)
def test_varint_zigzag_boundaries(value: int, encoded: bytes) -> None:
    assert roundtrip(p.write_varint, p.read_varint, value) == encoded


@pytest.mark.parametrize("value", [0, -1, 1, 2**63 - 1, -(2**63), 2**31, -(2**31) - 1])
def test_varlong_boundaries(value: int) -> None:
    data = roundtrip(p.write_varlong, p.read_varlong, value)
    assert len(data) <= 10


@given(st.integers(-(2**31), 2**31 - 1))
def test_varint_roundtrip(v: int) -> None:
    roundtrip(p.write_varint, p.read_varint, v)


@given(st.integers(-(2**63), 2**63 - 1))
def test_varlong_roundtrip(v: int) -> None:
    roundtrip(p.write_varlong, p.read_varlong, v)


@given(st.integers(0, 2**32 - 1))
def test_uvarint_roundtrip(v: int) -> None:
    roundtrip(p.write_uvarint, p.read_uvarint, v)


def test_varint_out_of_range_refused() -> None:
    with pytest.raises(EncodeError):
        p.write_varint(bytearray(), 2**31)
    with pytest.raises(EncodeError):
        p.write_uvarint(bytearray(), -1)
    with pytest.raises(EncodeError):
        p.write_uvarint(bytearray(), 2**32)


@pytest.mark.parametrize(
    ("reader", "data"),
    [
        (p.read_uvarint, b""),
        (p.read_uvarint, b"\x80"),
        (p.read_uvarint, b"\x80\x80\x80\x80\x80\x01"),  # longer than 5 bytes
        (p.read_varint, b"\xff\xff\xff\xff\xff\x01"),
        (p.read_varlong, b"\xff" * 10 + b"\x01"),
        (p.read_int32, b"\x00\x00\x01"),
        (p.read_uuid, b"\x00" * 15),
        (p.read_string, b"\x00\x05abc"),  # length beyond the buffer
        (p.read_string, b"\xff\xff"),  # null in a non-nullable string
        (p.read_nullable_string, b"\xff\xfe"),  # negative length other than -1
        (p.read_string, b"\x00\x02\xc3\x28"),  # invalid UTF-8
        (p.read_compact_string, b"\x00"),  # compact null, non-nullable
        (p.read_compact_string, b"\x05ab"),
        (p.read_bytes, b"\xff\xff\xff\xfe"),
        (p.read_nullable_bytes, b"\x00\x00\x00\x09abc"),
        (p.read_compact_bytes, b"\x00"),
        (p.read_records, b"\x7f\xff\xff\xff"),
        (p.read_tagged_fields, b"\x01\x00\x05ab"),
    ],
)
def test_malformed_input_raises_decode_error(reader: p.Reader, data: bytes) -> None:
    with pytest.raises(DecodeError):
        reader(memoryview(data), 0)


def test_array_count_beyond_data_refused() -> None:
    read = p.array_reader(p.read_int32, False, True)
    with pytest.raises(DecodeError):
        read(memoryview(b"\x7f\xff\xff\xff"), 0)
    with pytest.raises(DecodeError):
        read(memoryview(b"\xff\xff\xff\xfe"), 0)
    compact = p.array_reader(p.read_int32, True, False)
    with pytest.raises(DecodeError):
        compact(memoryview(b"\x00"), 0)  # null, not nullable


def test_nulls_and_empties() -> None:
    assert roundtrip(p.write_nullable_string, p.read_nullable_string, None) == b"\xff\xff"
    assert roundtrip(p.write_nullable_string, p.read_nullable_string, "") == b"\x00\x00"
    assert roundtrip(p.write_compact_nullable_string, p.read_compact_nullable_string, None) == (
        b"\x00"
    )
    assert roundtrip(p.write_compact_string, p.read_compact_string, "") == b"\x01"
    assert roundtrip(p.write_nullable_bytes, p.read_nullable_bytes, None) == b"\xff" * 4
    assert roundtrip(p.write_compact_nullable_bytes, p.read_compact_nullable_bytes, None) == (
        b"\x00"
    )
    arr_w = p.array_writer(p.write_int32, True, True)
    arr_r = p.array_reader(p.read_int32, True, True)
    assert roundtrip(arr_w, arr_r, None) == b"\x00"
    assert roundtrip(arr_w, arr_r, []) == b"\x01"
    assert roundtrip(arr_w, arr_r, [1, -1]) == b"\x03\x00\x00\x00\x01\xff\xff\xff\xff"
    with pytest.raises(EncodeError):
        p.write_string(bytearray(), None)


def test_string_too_long_for_int16_length() -> None:
    with pytest.raises(EncodeError):
        p.write_string(bytearray(), "x" * 40000)
    roundtrip(p.write_compact_string, p.read_compact_string, "x" * 40000)


@given(st.none() | st.text())
def test_strings_roundtrip(s: str | None) -> None:
    roundtrip(p.write_nullable_string, p.read_nullable_string, s)
    roundtrip(p.write_compact_nullable_string, p.read_compact_nullable_string, s)


@given(st.none() | st.binary(max_size=300))
def test_bytes_roundtrip(b: bytes | None) -> None:
    roundtrip(p.write_nullable_bytes, p.read_nullable_bytes, b)
    roundtrip(p.write_compact_nullable_bytes, p.read_compact_nullable_bytes, b)


def test_records_are_a_zero_copy_view() -> None:
    frame = memoryview(b"\x00\x00\x00\x03abcZ")
    value, end = p.read_records(frame, 0)
    assert isinstance(value, memoryview)
    assert value.obj is frame.obj
    assert bytes(value) == b"abc" and end == 7
    out = bytearray()
    p.write_records(out, value)
    assert bytes(out) == b"\x00\x00\x00\x03abc"


@settings(max_examples=50)
@given(st.uuids())
def test_uuid_roundtrip(u: UUID) -> None:
    assert len(roundtrip(p.write_uuid, p.read_uuid, u)) == 16


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("int8", -128),
        ("int16", 32767),
        ("int32", -(2**31)),
        ("int64", 2**63 - 1),
        ("uint16", 65535),
        ("uint32", 2**32 - 1),
        ("float64", -1.5),
        ("bool", True),
    ],
)
def test_fixed_width_roundtrip(name: str, value: Any) -> None:
    roundtrip(p.FIXED_WRITERS[name], p.FIXED_READERS[name], value)


def test_tagged_fields_section() -> None:
    out = bytearray()
    p.write_tagged_fields(out, [(5, b"xy"), (1, b"")])
    assert bytes(out) == b"\x02\x01\x00\x05\x02xy"
    fields, end = p.read_tagged_fields(memoryview(bytes(out)), 0)
    assert [(t, bytes(v)) for t, v in fields] == [(1, b""), (5, b"xy")]
    assert end == len(out)
