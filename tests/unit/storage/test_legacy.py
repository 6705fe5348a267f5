"""Legacy message sets, magic 0 and 1: exact bytes, CRC-32, wrappers, fuzzing."""

from __future__ import annotations

import struct
import zlib

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from strategies import codecs, legacy_records, nullable_payloads, timestamps

from kt.storage import legacy
from kt.storage.compression import Codec, compress, decompress
from kt.storage.errors import CorruptRecordError, UnsupportedFormatError


def parse_all(data: bytes) -> list[legacy.LegacyMessage]:
    out = []
    pos = 0
    while pos < len(data):
        msg = legacy.parse_message(data, pos)
        out.append(msg)
        pos += msg.size_in_bytes
    return out


def flatten(data: bytes) -> list[legacy.LegacyMessage]:
    return [inner for msg in parse_all(data) for inner in legacy.iter_inner(msg)]


# --- exact bytes ---------------------------------------------------------------


def test_magic_0_layout() -> None:
    entry = legacy.encode_message(5, 0, b"key", None, timestamp=999)
    body = struct.pack(">bbi3si", 0, 0, 3, b"key", -1)
    crc = zlib.crc32(body)
    assert entry == struct.pack(">qiI", 5, 4 + len(body), crc) + body
    assert len(entry) == legacy.LOG_OVERHEAD + legacy.MESSAGE_OVERHEAD_V0 + 3


def test_magic_1_layout() -> None:
    entry = legacy.encode_message(2**40, 1, None, b"value", timestamp=1_500_000_000_000)
    body = struct.pack(">bbqii5s", 1, 0, 1_500_000_000_000, -1, 5, b"value")
    crc = zlib.crc32(body)
    assert entry == struct.pack(">qiI", 2**40, 4 + len(body), crc) + body
    assert len(entry) == legacy.LOG_OVERHEAD + legacy.MESSAGE_OVERHEAD_V1 + 5


@pytest.mark.parametrize("magic", [0, 1])
def test_crc32_covers_magic_to_end(magic: int) -> None:
    entry = legacy.encode_message(7, magic, b"k", b"value", timestamp=123)
    msg = legacy.parse_message(entry)
    assert msg.crc == msg.computed_crc == zlib.crc32(entry[16:])
    assert msg.is_valid
    for pos in range(len(entry)):
        if pos == 16:
            continue  # the magic byte: changing it changes the layout (see below)
        damaged = bytearray(entry)
        damaged[pos] ^= 0x01
        try:
            parsed = legacy.parse_message(bytes(damaged))
        except CorruptRecordError:
            assert 8 <= pos < 12 or pos >= 18  # a size or length field stops framing
            continue
        # Offset and size are outside the CRC; the CRC field and everything after it
        # are compared or covered.
        assert parsed.is_valid == (pos < 12), pos


def test_crc32_covers_the_magic_byte() -> None:
    # A magic-0 entry whose bytes also frame as magic 1: the key's length and first
    # four bytes become the timestamp, the rest a 1-byte key and a null value.
    entry = bytearray(legacy.encode_message(7, 0, b"\x00" * 7 + b"\x01Z", None))
    assert legacy.parse_message(bytes(entry)).is_valid
    entry[16] = 1
    relabelled = legacy.parse_message(bytes(entry))
    assert (relabelled.timestamp, relabelled.key, relabelled.value) == (9 << 32, b"Z", None)
    assert not relabelled.is_valid


def test_parse_message_fields() -> None:
    entry = legacy.encode_message(3, 1, b"", b"v", timestamp=42, attributes=0x08)
    msg = legacy.parse_message(b"\x00" * 5 + entry, 5)
    assert (msg.offset, msg.magic, msg.attributes, msg.timestamp) == (3, 1, 0x08, 42)
    assert (msg.key, msg.value, msg.key_size, msg.value_size) == (b"", b"v", 0, 1)
    assert msg.timestamp_type == 1
    assert msg.codec is Codec.NONE
    assert msg.size_in_bytes == len(entry)
    m0 = legacy.parse_message(legacy.encode_message(0, 0, None, None, attributes=0x08))
    assert (m0.timestamp, m0.timestamp_type, m0.key_size, m0.value_size) == (-1, 0, -1, -1)


# --- building and reading message sets ------------------------------------------


@settings(max_examples=150, deadline=None)
@given(
    records=legacy_records,
    magic=st.sampled_from([0, 1]),
    codec=codecs,
    base_offset=st.integers(0, 2**50),
    log_append_time=st.none() | timestamps,
)
def test_message_set_round_trip(
    records: list[tuple[bytes | None, bytes | None, int]],
    magic: int,
    codec: Codec,
    base_offset: int,
    log_append_time: int | None,
) -> None:
    data = legacy.build_message_set(
        records, magic=magic, base_offset=base_offset, codec=codec, log_append_time=log_append_time
    )
    entries = parse_all(data)
    assert all(e.is_valid and e.magic == magic for e in entries)
    if codec is Codec.NONE:
        assert len(entries) == len(records)
    else:
        assert len(entries) == 1
        assert entries[0].codec is codec
        assert entries[0].key is None
        assert entries[0].offset == base_offset + len(records) - 1
    messages = flatten(data)
    assert [m.offset for m in messages] == [base_offset + i for i in range(len(records))]
    assert [(m.key, m.value) for m in messages] == [(k, v) for k, v, _ in records]
    assert all(m.is_valid and m.codec_id == 0 for m in messages)
    appended = magic == 1 and codec is not Codec.NONE and log_append_time is not None
    expected_ts: list[int | None]
    if magic == 0:
        expected_ts = [-1] * len(records)
    elif appended:
        expected_ts = [log_append_time] * len(records)
    else:
        expected_ts = [ts for _, _, ts in records]
    assert [m.timestamp for m in messages] == expected_ts
    assert all(m.timestamp_type == (1 if appended else 0) for m in messages)


@pytest.mark.parametrize("codec", [Codec.GZIP, Codec.SNAPPY, Codec.LZ4], ids=lambda c: c.label)
def test_inner_offsets_are_relative_for_magic_1_and_absolute_for_magic_0(codec: Codec) -> None:
    records = [(b"k%d" % i, b"v", 10 + i) for i in range(4)]
    for magic, expected in [(1, [0, 1, 2, 3]), (0, [100, 101, 102, 103])]:
        data = legacy.build_message_set(records, magic=magic, base_offset=100, codec=codec)
        (wrapper,) = parse_all(data)
        assert wrapper.offset == 103
        assert wrapper.value is not None
        inner = parse_all(decompress(codec, wrapper.value, magic))
        assert [m.offset for m in inner] == expected
        assert [m.offset for m in legacy.iter_inner(wrapper)] == [100, 101, 102, 103]


def test_magic_1_wrapper_timestamps() -> None:
    records = [(None, b"a", 50), (None, b"b", 70), (None, b"c", 60)]
    (create,) = parse_all(legacy.build_message_set(records, magic=1, codec=Codec.GZIP))
    assert (create.timestamp, create.timestamp_type) == (70, 0)
    assert [m.timestamp for m in legacy.iter_inner(create)] == [50, 70, 60]
    data = legacy.build_message_set(records, magic=1, codec=Codec.GZIP, log_append_time=999)
    (appended,) = parse_all(data)
    assert (appended.timestamp, appended.timestamp_type) == (999, 1)
    inner = list(legacy.iter_inner(appended))
    assert [(m.timestamp, m.timestamp_type) for m in inner] == [(999, 1)] * 3


def test_plain_message_iterates_as_itself() -> None:
    msg = legacy.parse_message(legacy.encode_message(9, 1, b"k", b"v", 5))
    assert list(legacy.iter_inner(msg)) == [msg]


def wrapper_of(inner: bytes, magic: int = 1, codec: Codec = Codec.GZIP) -> legacy.LegacyMessage:
    entry = legacy.encode_message(10, magic, None, compress(codec, inner), 0, int(codec))
    return legacy.parse_message(entry)


def test_wrapper_errors() -> None:
    nested = legacy.build_message_set([(None, b"x", 1)], magic=1, codec=Codec.GZIP)
    with pytest.raises(CorruptRecordError, match="nested"):
        list(legacy.iter_inner(wrapper_of(nested)))
    null_value = legacy.parse_message(legacy.encode_message(0, 1, None, None, 0, 1))
    with pytest.raises(CorruptRecordError, match="null value"):
        list(legacy.iter_inner(null_value))
    with pytest.raises(CorruptRecordError, match="ends inside"):
        list(legacy.iter_inner(wrapper_of(legacy.encode_message(0, 1, None, b"x", 0) + b"\x00")))
    assert list(legacy.iter_inner(wrapper_of(b""))) == []
    bad_codec = legacy.parse_message(legacy.encode_message(0, 1, None, b"x", 0, 6))
    with pytest.raises(UnsupportedFormatError):
        list(legacy.iter_inner(bad_codec))


# --- damaged entries --------------------------------------------------------------


GOOD = legacy.encode_message(1, 1, b"key", b"value", 77)


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (GOOD[:25], "shorter than its minimum"),
        (GOOD[:16] + b"\x02" + GOOD[17:], "invalid legacy magic 2"),
        (GOOD[:8] + struct.pack(">i", 21) + GOOD[12:], "less than the minimum 22"),
        (GOOD[:8] + struct.pack(">i", -5) + GOOD[12:], "less than the minimum"),
        (GOOD[:-1], "truncated"),
        (GOOD[:8] + struct.pack(">i", len(GOOD) - 11) + GOOD[12:] + b"\x00", "after its value"),
        (GOOD[:26] + struct.pack(">i", -2) + GOOD[30:], "negative length -2"),
        (GOOD[:26] + struct.pack(">i", 1000) + GOOD[30:], "runs past the message"),
    ],
)
def test_parse_message_rejects(data: bytes, message: str) -> None:
    with pytest.raises(CorruptRecordError, match=message):
        legacy.parse_message(data)


WRAPPERS = [
    legacy.build_message_set(
        [(b"k%d" % i, b"value" * i, 1000 + i) for i in range(5)], magic=magic, codec=codec
    )
    for magic in (0, 1)
    for codec in Codec
]


@settings(max_examples=200, deadline=None)
@given(
    st.sampled_from(WRAPPERS),
    st.lists(st.tuples(st.integers(0, 10**6), st.integers(1, 255)), min_size=1, max_size=4),
    st.booleans(),
)
def test_mutated_entries_raise_only_storage_errors(
    base: bytes, flips: list[tuple[int, int]], fix_crc: bool
) -> None:
    data = bytearray(base)
    for where, mask in flips:
        data[where % len(data)] ^= mask
    if fix_crc and len(data) > 16:
        struct.pack_into(">I", data, 12, zlib.crc32(data[16:]))
    try:
        for msg in parse_all(bytes(data)):
            for inner in legacy.iter_inner(msg):
                assert inner.codec_id == 0
    except (CorruptRecordError, UnsupportedFormatError):
        pass


@settings(max_examples=200, deadline=None)
@given(
    st.binary(max_size=80),
    st.integers(0, 7),
    st.sampled_from([0, 1]),
    nullable_payloads,
)
def test_garbage_wrappers_raise_only_storage_errors(
    payload: bytes, codec_id: int, magic: int, key: bytes | None
) -> None:
    for data in (payload, GOOD[:12] + payload):
        try:
            legacy.parse_message(data)
        except CorruptRecordError:
            pass
    msg = legacy.parse_message(legacy.encode_message(3, magic, key, payload, 0, codec_id))
    try:
        list(legacy.iter_inner(msg))
    except (CorruptRecordError, UnsupportedFormatError):
        pass


def test_min_message_size() -> None:
    assert legacy.min_message_size(0) == 14
    assert legacy.min_message_size(1) == 22
