"""Zig-zag varints and varlongs: round trips, boundaries, exact bytes, errors."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kafka.record.util import decode_varint, encode_varint, size_of_varint
from strategies import INT32_MAX, INT32_MIN, INT64_MAX, INT64_MIN, int32s, int64s

from kt.storage.errors import CorruptRecordError
from kt.storage.varint import read_varint, read_varlong, varint_size, write_varint

BOUNDARIES_32 = [0, 1, -1, 63, -64, 64, -65, 8191, -8192, 8192, INT32_MAX, INT32_MIN]
BOUNDARIES_32 += [INT32_MAX - 1, INT32_MIN + 1]
BOUNDARIES_64 = [*BOUNDARIES_32, 2**31, -(2**31) - 1, INT64_MAX, INT64_MIN]
BOUNDARIES_64 += [INT64_MAX - 1, INT64_MIN + 1, 2**62, -(2**62) - 1]


def encode(value: int) -> bytes:
    out = bytearray()
    write_varint(out, value)
    return bytes(out)


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (0, b"\x00"),
        (-1, b"\x01"),
        (1, b"\x02"),
        (-2, b"\x03"),
        (63, b"\x7e"),
        (-64, b"\x7f"),
        (64, b"\x80\x01"),
        (300, b"\xd8\x04"),
        (INT32_MAX, b"\xfe\xff\xff\xff\x0f"),
        (INT32_MIN, b"\xff\xff\xff\xff\x0f"),
        (INT64_MAX, b"\xfe" + b"\xff" * 8 + b"\x01"),
        (INT64_MIN, b"\xff" * 9 + b"\x01"),
    ],
)
def test_known_encodings(value: int, expected: bytes) -> None:
    assert encode(value) == expected
    assert varint_size(value) == len(expected)
    assert read_varlong(expected, 0) == (value, len(expected))
    if INT32_MIN <= value <= INT32_MAX:
        assert read_varint(expected, 0) == (value, len(expected))


@pytest.mark.parametrize("value", BOUNDARIES_32)
def test_varint_boundaries_fit_five_bytes(value: int) -> None:
    data = encode(value)
    assert len(data) <= 5
    assert read_varint(data, 0) == (value, len(data))


@pytest.mark.parametrize("value", BOUNDARIES_64)
def test_varlong_boundaries_fit_ten_bytes(value: int) -> None:
    data = encode(value)
    assert len(data) <= 10
    assert varint_size(value) == len(data)
    assert read_varlong(data, 0) == (value, len(data))


@settings(max_examples=200, deadline=None)
@given(int32s)
def test_varint_round_trip(value: int) -> None:
    data = encode(value)
    assert varint_size(value) == len(data) <= 5
    assert read_varint(data, 0) == (value, len(data))
    assert read_varint(memoryview(b"\xaa" + data + b"\xbb"), 1) == (value, len(data) + 1)


@settings(max_examples=200, deadline=None)
@given(int64s)
def test_varlong_round_trip(value: int) -> None:
    data = encode(value)
    assert varint_size(value) == len(data) <= 10
    assert read_varlong(bytearray(b"\xaa\xbb" + data), 2) == (value, len(data) + 2)


@settings(max_examples=100, deadline=None)
@given(st.lists(int64s, max_size=20))
def test_concatenated_varlongs_decode_in_sequence(values: list[int]) -> None:
    out = bytearray()
    for v in values:
        write_varint(out, v)
    pos = 0
    decoded = []
    while pos < len(out):
        v, pos = read_varlong(out, pos)
        decoded.append(v)
    assert decoded == values


@settings(max_examples=200, deadline=None)
@given(int64s)
def test_matches_kafka_python(value: int) -> None:
    """kafka-python's varint code is an independent implementation of the same format."""
    theirs = bytearray()
    encode_varint(value, theirs.append)
    assert encode(value) == bytes(theirs)
    assert size_of_varint(value) == varint_size(value)
    assert decode_varint(encode(value), 0) == read_varlong(bytes(theirs), 0)


@pytest.mark.parametrize("data", [b"", b"\x80", b"\xff\xff", b"\x80\x80\x80\x80"])
def test_truncated_varint_is_corrupt(data: bytes) -> None:
    with pytest.raises(CorruptRecordError, match="past the end"):
        read_varint(data, 0)
    with pytest.raises(CorruptRecordError, match="past the end"):
        read_varlong(data, 0)


def test_position_past_the_end_is_corrupt() -> None:
    with pytest.raises(CorruptRecordError):
        read_varint(b"\x02", 1)


def test_too_long_varint_is_corrupt() -> None:
    with pytest.raises(CorruptRecordError, match="longer than 5"):
        read_varint(b"\x80" * 5 + b"\x00", 0)
    with pytest.raises(CorruptRecordError, match="longer than 10"):
        read_varlong(b"\x80" * 10 + b"\x00", 0)
    # The same 6 bytes are a legal varlong.
    assert read_varlong(b"\x80" * 5 + b"\x01", 0) == (2**34, 6)


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=12), st.integers(0, 12))
def test_garbage_raises_only_corrupt_record_error(data: bytes, pos: int) -> None:
    for reader in (read_varint, read_varlong):
        try:
            value, end = reader(data, pos)
        except CorruptRecordError:
            continue
        assert pos < end <= len(data)
        assert isinstance(value, int)
