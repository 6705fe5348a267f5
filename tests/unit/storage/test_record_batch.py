"""Record batch v2: exact bytes, CRC coverage, in-place patching, round trips, fuzzing."""

from __future__ import annotations

import struct

import crc32c
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from strategies import (
    INT32_MAX,
    codecs,
    int16s,
    int32s,
    int64s,
    record_specs,
    timestamps,
)

from kt.storage import record_batch as v2
from kt.storage.compression import Codec
from kt.storage.errors import CorruptRecordError, UnsupportedFormatError
from kt.storage.record_batch import RecordSpec, build_batch, iter_records, parse_header


def decode(batch: bytes | bytearray) -> tuple[v2.BatchHeader, list[v2.Record]]:
    header = v2.validate_batch(batch)
    return header, list(iter_records(header, batch))


def fix_crc(batch: bytearray) -> None:
    struct.pack_into(">I", batch, 17, crc32c.crc32c(bytes(batch[21:])))


# --- exact bytes ---------------------------------------------------------------


def test_header_layout_matches_the_documented_offsets() -> None:
    batch = build_batch(
        [RecordSpec(b"k", b"v", timestamp=1_700_000_000_123)],
        base_offset=0x0102030405060708,
        partition_leader_epoch=7,
        producer_id=0x1122334455,
        producer_epoch=3,
        base_sequence=42,
        is_transactional=True,
        codec=Codec.NONE,
    )
    expected = bytearray(61)
    struct.pack_into(">q", expected, 0, 0x0102030405060708)
    struct.pack_into(">i", expected, 8, len(batch) - 12)
    struct.pack_into(">i", expected, 12, 7)
    struct.pack_into(">b", expected, 16, 2)
    struct.pack_into(">I", expected, 17, crc32c.crc32c(batch[21:]))
    struct.pack_into(">h", expected, 21, 0x10)
    struct.pack_into(">i", expected, 23, 0)
    struct.pack_into(">q", expected, 27, 1_700_000_000_123)
    struct.pack_into(">q", expected, 35, 1_700_000_000_123)
    struct.pack_into(">q", expected, 43, 0x1122334455)
    struct.pack_into(">h", expected, 51, 3)
    struct.pack_into(">i", expected, 53, 42)
    struct.pack_into(">i", expected, 57, 1)
    assert batch[:61] == bytes(expected)
    # The record: length, attributes, tsDelta, offsetDelta, key, value, no headers.
    assert batch[61:] == bytes([0x10, 0, 0, 0, 0x02]) + b"k" + b"\x02v\x00"


def test_record_encoding_with_headers_and_nulls() -> None:
    batch = build_batch(
        [
            RecordSpec(None, b"", timestamp=100),
            RecordSpec(b"", None, [("h", b"x"), ("n", None)], timestamp=99, offset_delta=5),
        ]
    )
    first = bytes([0, 0, 0, 0x01, 0x00, 0x00])  # attrs, ts 0, off 0, null key, empty value, 0 hdrs
    second = bytes([0, 0x01, 0x0A, 0x00, 0x01, 0x04, 0x02]) + b"h" + b"\x02x" + b"\x02n\x01"
    assert batch[61:] == bytes([len(first) * 2]) + first + bytes([len(second) * 2]) + second
    header = parse_header(batch)
    assert (header.base_timestamp, header.max_timestamp, header.last_offset_delta) == (100, 100, 5)


def test_empty_batch() -> None:
    batch = build_batch([], base_offset=10)
    header, records = decode(batch)
    assert len(batch) == v2.HEADER_SIZE
    assert header.batch_length == v2.MIN_BATCH_LENGTH
    assert (header.record_count, header.base_timestamp, header.max_timestamp) == (0, -1, -1)
    assert records == []


@pytest.mark.parametrize("codec", list(Codec), ids=lambda c: c.label)
def test_attributes_bits(codec: Codec) -> None:
    cases = [
        ({}, 0),
        ({"timestamp_type": v2.LOG_APPEND_TIME, "log_append_time": 5}, 0x08),
        ({"is_transactional": True, "producer_id": 1, "producer_epoch": 0}, 0x10),
        ({"is_control": True}, 0x20),
        ({"delete_horizon_ms": 1234}, 0x40),
    ]
    for kwargs, bits in cases:
        batch = build_batch([RecordSpec(b"k", b"v")], codec=codec, **kwargs)  # type: ignore[arg-type]
        (attributes,) = struct.unpack_from(">h", batch, 21)
        assert attributes == bits | codec.value
        header = parse_header(batch)
        assert header.codec is codec
        assert header.timestamp_type == (1 if bits == 0x08 else 0)
        assert header.is_transactional == (bits == 0x10)
        assert header.is_control == (bits == 0x20)
        assert header.delete_horizon_ms == (1234 if bits == 0x40 else None)


# --- CRC coverage and in-place patching ---------------------------------------


BATCH = build_batch(
    [RecordSpec(b"key%d" % i, b"value%d" % i, [("h", b"v")], timestamp=1000 + i) for i in range(5)],
    base_offset=100,
    producer_id=9,
    producer_epoch=1,
    base_sequence=0,
)


def test_crc_is_crc32c_over_attributes_to_end() -> None:
    (stored,) = struct.unpack_from(">I", BATCH, 17)
    assert stored == crc32c.crc32c(BATCH[21:]) == v2.compute_crc(BATCH)
    assert v2.is_crc_valid(BATCH)


def test_crc_covers_exactly_the_bytes_from_the_attributes() -> None:
    for pos in range(len(BATCH)):
        if 17 <= pos < 21:
            continue  # the CRC itself
        damaged = bytearray(BATCH)
        damaged[pos] ^= 0x01
        assert v2.is_crc_valid(damaged) == (pos < 17), pos


@pytest.mark.parametrize("prefix", [0, 7])
def test_patching_base_offset_and_leader_epoch_keeps_the_crc(prefix: int) -> None:
    buf = bytearray(b"\xee" * prefix + BATCH + b"\xee" * 3)
    v2.set_base_offset(buf, 2**40 + 5, prefix)
    v2.set_partition_leader_epoch(buf, 17, prefix)
    patched = bytes(buf[prefix : prefix + len(BATCH)])
    assert buf[:prefix] == b"\xee" * prefix and buf[-3:] == b"\xee\xee\xee"
    assert patched[21:] == BATCH[21:]
    header, records = decode(patched)
    assert (header.base_offset, header.partition_leader_epoch) == (2**40 + 5, 17)
    assert [r.offset for r in records] == [2**40 + 5 + i for i in range(5)]


@pytest.mark.parametrize("prefix", [0, 5])
@pytest.mark.parametrize("codec", list(Codec), ids=lambda c: c.label)
def test_set_log_append_time_recomputes_the_crc(prefix: int, codec: Codec) -> None:
    batch = build_batch([RecordSpec(b"a", b"b", timestamp=1000 + i) for i in range(3)], codec=codec)
    buf = bytearray(b"\x00" * prefix + batch + b"\xff" * 4)
    v2.set_log_append_time(buf, 555_000, prefix, None if prefix == 0 else len(batch))
    patched = bytes(buf[prefix : prefix + len(batch)])
    assert buf[prefix + len(batch) :] == b"\xff" * 4
    header, records = decode(patched)
    assert header.timestamp_type == v2.LOG_APPEND_TIME
    assert header.codec is codec
    assert header.max_timestamp == 555_000
    assert header.base_timestamp == 1000  # the create times stay in the records
    assert [r.timestamp for r in records] == [555_000] * 3


def test_validate_batch_reasons() -> None:
    with pytest.raises(CorruptRecordError, match="needs 61 bytes"):
        v2.validate_batch(BATCH[:60])
    wrong_magic = bytearray(BATCH)
    wrong_magic[16] = 1
    with pytest.raises(CorruptRecordError, match="magic 1 is not 2"):
        v2.validate_batch(wrong_magic)
    short = bytearray(BATCH)
    struct.pack_into(">i", short, 8, 48)
    with pytest.raises(CorruptRecordError, match="below the minimum 49"):
        v2.validate_batch(short)
    with pytest.raises(CorruptRecordError, match="does not match"):
        v2.validate_batch(BATCH + b"\x00")
    flipped = bytearray(BATCH)
    flipped[-1] ^= 0x40
    with pytest.raises(CorruptRecordError, match="CRC mismatch") as info:
        v2.validate_batch(flipped, position=1234)
    assert info.value.position == 1234


# --- sequences -----------------------------------------------------------------


@pytest.mark.parametrize(
    ("sequence", "increment", "expected"),
    [
        (0, 0, 0),
        (5, 3, 8),
        (INT32_MAX, 0, INT32_MAX),
        (INT32_MAX, 1, 0),
        (INT32_MAX - 1, 3, 1),
        (INT32_MAX - 4, 4, INT32_MAX),
        (INT32_MAX - 4, 5, 0),
    ],
)
def test_increment_sequence_wraps_at_int_max(sequence: int, increment: int, expected: int) -> None:
    assert v2.increment_sequence(sequence, increment) == expected


def test_record_sequences_wrap_around() -> None:
    batch = build_batch(
        [RecordSpec(b"k", b"v") for _ in range(4)],
        producer_id=1,
        producer_epoch=0,
        base_sequence=INT32_MAX - 1,
    )
    header, records = decode(batch)
    assert [r.sequence for r in records] == [INT32_MAX - 1, INT32_MAX, 0, 1]
    assert header.last_sequence == 1


def test_no_sequence_without_a_producer() -> None:
    header, records = decode(build_batch([RecordSpec(b"k", b"v")] * 2))
    assert not header.has_producer_id
    assert header.last_sequence == -1
    assert [r.sequence for r in records] == [-1, -1]


# --- control batches -------------------------------------------------------------


@pytest.mark.parametrize("commit", [True, False])
def test_end_txn_marker(commit: bool) -> None:
    batch = v2.build_end_txn_marker(
        commit=commit,
        producer_id=77,
        producer_epoch=4,
        coordinator_epoch=12,
        base_offset=300,
        timestamp=1_600_000_000_000,
        partition_leader_epoch=2,
    )
    header, records = decode(batch)
    assert header.is_control and header.is_transactional
    assert (header.producer_id, header.producer_epoch, header.base_sequence) == (77, 4, -1)
    assert (header.base_offset, header.partition_leader_epoch) == (300, 2)
    assert header.record_count == 1
    (rec,) = records
    assert rec.key == struct.pack(">hh", 0, 1 if commit else 0)
    assert rec.value == struct.pack(">hi", 0, 12)
    assert rec.timestamp == 1_600_000_000_000
    version, type_id = v2.parse_control_key(rec.key)
    assert (version, v2.control_type_name(type_id)) == (0, "COMMIT" if commit else "ABORT")
    assert v2.parse_end_txn_marker(rec.value) == (0, 12)


def test_control_record_parsing_errors() -> None:
    assert v2.control_type_name(99) == "UNKNOWN"
    assert v2.control_type_name(2) == "LEADER_CHANGE"
    for bad in (None, b"\x00\x00\x00"):
        with pytest.raises(CorruptRecordError):
            v2.parse_control_key(bad)
    for bad in (None, b"\x00" * 5):
        with pytest.raises(CorruptRecordError):
            v2.parse_end_txn_marker(bad)


def test_timestamp_type_names() -> None:
    assert v2.timestamp_type_name(0, 1) == "NoTimestampType"
    assert v2.timestamp_type_name(1, 0) == "CreateTime"
    assert v2.timestamp_type_name(2, 1) == "LogAppendTime"


# --- round trips -----------------------------------------------------------------


@settings(max_examples=150, deadline=None)
@given(
    specs=record_specs(),
    codec=codecs,
    base_offset=st.integers(0, 2**62),
    leader_epoch=int32s,
    producer_id=int64s,
    producer_epoch=int16s,
    base_sequence=st.integers(-1, INT32_MAX),
    transactional=st.booleans(),
    control=st.booleans(),
    base_timestamp=st.none() | timestamps,
    horizon=st.none() | timestamps,
    log_append=st.none() | timestamps,
    extra_delta=st.integers(0, 5),
)
def test_build_then_parse(
    specs: list[RecordSpec],
    codec: Codec,
    base_offset: int,
    leader_epoch: int,
    producer_id: int,
    producer_epoch: int,
    base_sequence: int,
    transactional: bool,
    control: bool,
    base_timestamp: int | None,
    horizon: int | None,
    log_append: int | None,
    extra_delta: int,
) -> None:
    last_delta = max(
        [i if s.offset_delta is None else s.offset_delta for i, s in enumerate(specs)], default=0
    )
    batch = build_batch(
        specs,
        base_offset=base_offset,
        codec=codec,
        base_timestamp=base_timestamp,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        base_sequence=base_sequence,
        partition_leader_epoch=leader_epoch,
        is_transactional=transactional,
        is_control=control,
        delete_horizon_ms=horizon,
        last_offset_delta=last_delta + extra_delta,
    )
    if log_append is not None:
        patched = bytearray(batch)
        v2.set_log_append_time(patched, log_append)
        batch = bytes(patched)
    header, records = decode(batch)

    assert header.size_in_bytes == len(batch)
    assert (header.base_offset, header.partition_leader_epoch) == (base_offset, leader_epoch)
    assert (header.magic, header.codec) == (2, codec)
    assert (header.producer_id, header.producer_epoch) == (producer_id, producer_epoch)
    assert header.base_sequence == base_sequence
    assert header.is_transactional == transactional
    assert header.is_control == control
    assert header.delete_horizon_ms == horizon
    assert header.record_count == len(specs)
    assert header.last_offset_delta == last_delta + extra_delta
    assert header.next_offset == base_offset + last_delta + extra_delta + 1
    assert header.timestamp_type == (v2.LOG_APPEND_TIME if log_append is not None else 0)

    # Without a base timestamp the batch takes the first record timestamp given.
    first = next((s.timestamp for s in specs if s.timestamp is not None), None)
    batch_ts = horizon if horizon is not None else base_timestamp
    if batch_ts is None:
        batch_ts = first if first is not None else (0 if specs else -1)
    assert header.base_timestamp == batch_ts
    create_times = [batch_ts if s.timestamp is None else s.timestamp for s in specs]
    if log_append is not None:
        assert header.max_timestamp == log_append
    else:
        assert header.max_timestamp == max(create_times, default=-1)

    assert len(records) == len(specs)
    for i, (spec, rec) in enumerate(zip(specs, records)):
        delta = i if spec.offset_delta is None else spec.offset_delta
        assert rec.offset == base_offset + delta
        assert rec.key == spec.key and rec.value == spec.value
        assert rec.headers == list(spec.headers)
        assert rec.timestamp == (log_append if log_append is not None else create_times[i])
        if base_sequence >= 0:
            assert rec.sequence == v2.increment_sequence(base_sequence, delta)
        else:
            assert rec.sequence == -1
    # Re-encoding what was decoded gives the same records section (uncompressed).
    if codec is Codec.NONE and log_append is None:
        body = bytearray()
        for rec in records:
            delta = rec.offset - base_offset
            v2.encode_record(
                body, delta, rec.timestamp - header.base_timestamp, rec.key, rec.value, rec.headers
            )
        assert bytes(body) == bytes(batch[v2.HEADER_SIZE :])


# --- damaged record sections -------------------------------------------------------

FUZZ_BASES = [
    build_batch(
        [
            RecordSpec(b"k" * i, b"v" * (i * 50), [(f"h{i}", b"x")] * (i % 3), timestamp=10 + i)
            for i in range(6)
        ],
        codec=codec,
        producer_id=3,
        producer_epoch=0,
        base_sequence=5,
    )
    for codec in Codec
]


def decode_unchecked(batch: bytes | bytearray) -> None:
    """What a reader that skipped (or fixed up) the CRC would do with the batch."""
    header = parse_header(batch)
    for _ in iter_records(header, batch):
        pass


@settings(max_examples=200, deadline=None)
@given(
    st.sampled_from(FUZZ_BASES),
    st.lists(st.tuples(st.integers(21, 10**6), st.integers(1, 255)), min_size=1, max_size=4),
    st.booleans(),
)
def test_mutated_batches_raise_only_corrupt_record_errors(
    base: bytes, flips: list[tuple[int, int]], recompute_crc: bool
) -> None:
    batch = bytearray(base)
    for where, mask in flips:
        batch[21 + where % (len(batch) - 21)] ^= mask
    if recompute_crc:
        fix_crc(batch)
    try:
        decode(batch)
    except (CorruptRecordError, UnsupportedFormatError):
        pass
    try:
        decode_unchecked(batch)
    except (CorruptRecordError, UnsupportedFormatError):
        pass


@settings(max_examples=150, deadline=None)
@given(st.sampled_from(FUZZ_BASES), st.integers(0, 10**6), st.binary(max_size=30))
def test_truncated_or_extended_batches_raise_only_corrupt_record_errors(
    base: bytes, cut: int, tail: bytes
) -> None:
    batch = bytearray(base[: v2.HEADER_SIZE + cut % (len(base) - v2.HEADER_SIZE)] + tail)
    struct.pack_into(">i", batch, 8, len(batch) - 12)
    fix_crc(batch)
    if len(batch) == len(base):
        # The tail replaced exactly the bytes cut: that can be another valid batch
        # (say, a header value 'x' becoming '\x00'), so only a change of length must fail.
        try:
            decode(batch)
        except CorruptRecordError:
            pass
        return
    with pytest.raises(CorruptRecordError):
        decode(batch)


@settings(max_examples=150, deadline=None)
@given(
    st.sampled_from(FUZZ_BASES[:1]),
    st.integers(-(2**31), 2**31 - 1),
    st.binary(max_size=40),
)
def test_garbled_record_sections_raise_only_corrupt_record_errors(
    base: bytes, count: int, body: bytes
) -> None:
    batch = bytearray(base[: v2.HEADER_SIZE] + body)
    struct.pack_into(">i", batch, 8, len(batch) - 12)
    struct.pack_into(">i", batch, 57, count % 8 if count >= 0 else count)
    fix_crc(batch)
    try:
        decode(batch)
    except CorruptRecordError:
        pass


def test_record_count_disagreeing_with_the_records_is_corrupt() -> None:
    base = bytearray(FUZZ_BASES[0])
    for count, message in [(5, "bytes after the last"), (7, "truncated"), (-1, "negative")]:
        batch = bytearray(base)
        struct.pack_into(">i", batch, 57, count)
        fix_crc(batch)
        with pytest.raises(CorruptRecordError, match=message):
            decode(batch)


def test_bad_header_key_utf8_is_corrupt() -> None:
    batch = bytearray(build_batch([RecordSpec(b"k", b"v", [("\u00e9", b"x")])]))
    pos = bytes(batch).index("\u00e9".encode())
    batch[pos] = 0xFF
    fix_crc(batch)
    with pytest.raises(CorruptRecordError, match="UTF-8"):
        decode(batch)


def test_unknown_codec_in_attributes_is_unsupported() -> None:
    batch = bytearray(FUZZ_BASES[0])
    struct.pack_into(">h", batch, 21, 6)
    fix_crc(batch)
    header = v2.validate_batch(batch)
    assert header.codec_id == 6
    with pytest.raises(UnsupportedFormatError):
        list(iter_records(header, batch))


@pytest.mark.parametrize("codec_id", range(8))
def test_header_only_batches_need_no_decompression(codec_id: int) -> None:
    """Kafka never decompresses a record-less batch, so an empty records section is
    fine whatever codec the attributes name; with a record count it is truncated."""
    batch = bytearray(build_batch([], base_offset=4))
    struct.pack_into(">h", batch, 21, codec_id)
    fix_crc(batch)
    assert decode(batch)[1] == []
    struct.pack_into(">i", batch, 57, 1)
    fix_crc(batch)
    with pytest.raises(CorruptRecordError, match="truncated"):
        decode(batch)
