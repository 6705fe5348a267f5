"""kafka-python's `kafka.record` as an independent oracle for kt's record formats.

Both directions, every codec and every magic: batches kafka-python builds decode in
kt to the same records, and batches kt builds decode in kafka-python, CRCs valid.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kafka import codec as kcodec
from kafka.errors import UnsupportedCodecError
from kafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder
from kafka.record.legacy_records import LegacyRecordBatch, LegacyRecordBatchBuilder
from kafka.record.memory_records import MemoryRecords, MemoryRecordsBuilder
from strategies import INT32_MAX, XxhashShim, headers, nullable_payloads, record_specs, timestamps

from kt.storage import legacy
from kt.storage import record_batch as v2
from kt.storage.compression import Codec
from kt.storage.file_records import Damage, FileRecords, LogBatch
from kt.storage.record_batch import RecordSpec, build_batch

LEGACY_CODECS = [Codec.NONE, Codec.GZIP, Codec.SNAPPY, Codec.LZ4]
label = lambda c: c.label  # noqa: E731

# Compressible values over 64 KiB, so lz4 (64 KiB blocks) and snappy (32 KiB) need
# several blocks for one record.
LARGE = b"".join(b"%08d|" % i + bytes([65 + i % 26]) * (i % 13) for i in range(12000))
assert len(LARGE) > 2 * 64 * 1024

# (offset delta, timestamp, key, value, headers)
Row = tuple[int, int, bytes | None, bytes | None, list[tuple[str, bytes | None]]]

ROWS: list[Row] = [
    (0, 1_700_000_000_000, b"key-0", b"value-0", []),
    (1, 1_700_000_000_005, None, b"null key", [("h1", b"v1")]),
    (2, 1_699_999_999_000, b"tombstone", None, [("h", None), ("h", b""), ("\u00fcnicode", b"x")]),
    (3, 1_700_000_000_100, b"", b"", []),
    (4, 1_700_000_000_101, b"big", LARGE, [("size", b"large")]),
    (5, 1_700_000_000_102, None, None, []),
    *[(i, 1_700_000_001_000 + i, b"k%d" % i, b"v" * (i % 50), []) for i in range(6, 300)],
    (310, 1_700_000_002_000, b"after a gap", LARGE[:70_000], []),
]


@pytest.fixture
def old_kafka_lz4(monkeypatch: pytest.MonkeyPatch) -> None:
    """kafka-python's pre-0.10 lz4 framing (magic 0) needs `xxhash`; lend it ours."""
    if kcodec.xxhash is None:
        monkeypatch.setattr(kcodec, "xxhash", XxhashShim)


def kt_records_via_file(tmp_path: Path, data: bytes) -> list[LogBatch]:
    path = tmp_path / "00000000000000000000.log"
    path.write_bytes(data)
    with open(path, "rb") as f:
        items = list(FileRecords(f).batches(validate=True))
    assert not [i for i in items if isinstance(i, Damage)]
    return [i for i in items if isinstance(i, LogBatch)]


def their_batches(data: bytes | bytearray) -> list[Any]:
    batches = list(MemoryRecords(bytes(data)))
    for batch in batches:
        assert batch.validate_crc()
    return batches


def as_tuple(r: Any) -> tuple[int, int, bytes | None, bytes | None, list[Any]]:
    return (r.offset, r.timestamp, r.key, r.value, list(r.headers))


# --- kafka-python writes, kt reads: v2 -----------------------------------------------


def build_theirs_v2(
    rows: Sequence[Row],
    codec: Codec,
    *,
    producer: tuple[int, int, int] = (-1, -1, -1),
    transactional: bool = False,
) -> bytearray:
    pid, epoch, seq = producer
    builder = DefaultRecordBatchBuilder(
        magic=2,
        compression_type=int(codec),
        is_transactional=transactional,
        producer_id=pid,
        producer_epoch=epoch,
        base_sequence=seq,
        batch_size=1 << 30,
    )
    for delta, ts, key, value, hdrs in rows:
        assert builder.append(delta, ts, key, value, hdrs) is not None
    built: bytearray = builder.build()
    return built


@pytest.mark.parametrize("codec", list(Codec), ids=label)
@pytest.mark.parametrize(
    ("producer", "transactional"),
    [((-1, -1, -1), False), ((123456789012, 7, 1000), False), ((42, 3, INT32_MAX - 100), True)],
    ids=["plain", "idempotent", "transactional-wrapping"],
)
def test_kafka_python_v2_batches_decode_in_kt(
    tmp_path: Path, codec: Codec, producer: tuple[int, int, int], transactional: bool
) -> None:
    batch = build_theirs_v2(ROWS, codec, producer=producer, transactional=transactional)
    v2.set_base_offset(batch, 5000)
    v2.set_partition_leader_epoch(batch, 9)
    header = v2.validate_batch(batch)
    assert header.codec is codec  # compressible, so kafka-python kept the codec
    assert (header.producer_id, header.producer_epoch, header.base_sequence) == producer
    assert header.is_transactional == transactional
    assert (header.base_offset, header.partition_leader_epoch) == (5000, 9)
    assert header.last_offset_delta == 310
    assert header.record_count == len(ROWS)
    assert header.base_timestamp == ROWS[0][1]
    assert header.max_timestamp == max(r[1] for r in ROWS)

    (logged,) = kt_records_via_file(tmp_path, bytes(batch) * 1)
    assert logged.is_valid()
    for records in (list(v2.iter_records(header, batch)), list(logged.records())):
        assert [(r.offset, r.timestamp, r.key, r.value, r.headers) for r in records] == [
            (5000 + d, ts, k, v, h) for d, ts, k, v, h in ROWS
        ]
        pid, _, seq = producer
        expected_seq = [v2.increment_sequence(seq, d) if pid >= 0 else -1 for d, *_ in ROWS]
        assert [r.sequence for r in records] == expected_seq
    if transactional:
        assert records[-1].sequence < records[0].sequence  # wrapped past Int.MaxValue
        assert header.last_sequence == v2.increment_sequence(producer[2], 310)
    (theirs,) = their_batches(batch)
    assert [as_tuple(r) for r in theirs] == [as_tuple(r) for r in records]


@pytest.mark.parametrize("codec", list(Codec), ids=label)
def test_kafka_python_memory_records_of_many_batches_decode_in_kt(
    tmp_path: Path, codec: Codec
) -> None:
    data = b""
    expected = []
    offset = 0
    for n in (1, 7, 30):
        builder = MemoryRecordsBuilder(2, int(codec), 1 << 20, offset=offset)
        for i in range(n):
            value = (b"payload %d " % i) * 10
            builder.append(2_000_000 + i, None if i % 3 else b"k%d" % i, value, [("i", b"%d" % i)])
            expected.append((offset + i, 2_000_000 + i, None if i % 3 else b"k%d" % i, value))
        builder.close()
        data += bytes(builder.buffer())
        offset += n
    batches = kt_records_via_file(tmp_path, data)
    assert len(batches) == 3
    got = [(r.offset, r.timestamp, r.key, r.value) for b in batches for r in b.records()]
    assert got == expected


# --- kafka-python writes, kt reads: legacy ----------------------------------------------


def build_theirs_legacy(
    magic: int, codec: Codec, rows: Sequence[tuple[bytes | None, bytes | None, int]]
) -> bytearray:
    builder = LegacyRecordBatchBuilder(magic=magic, compression_type=int(codec), batch_size=1 << 30)
    for i, (key, value, ts) in enumerate(rows):
        assert builder.append(i, ts, key, value) is not None
    built: bytearray = builder.build()
    return built


LEGACY_ROWS = [
    (b"key", b"value", 1_500_000_000_000),
    (None, b"null key", 1_500_000_000_001),
    (b"tombstone", None, 1_499_999_999_000),
    (b"", b"", 1_500_000_000_002),
    (b"large", LARGE, 1_500_000_000_003),
    *[(b"k%d" % i, b"v" * i, 1_500_000_001_000 + i) for i in range(40)],
]


@pytest.mark.parametrize("codec", LEGACY_CODECS, ids=label)
@pytest.mark.parametrize("magic", [0, 1])
def test_kafka_python_legacy_sets_decode_in_kt(
    tmp_path: Path, magic: int, codec: Codec, old_kafka_lz4: None
) -> None:
    data = build_theirs_legacy(magic, codec, LEGACY_ROWS)
    n = len(LEGACY_ROWS)
    if codec is not Codec.NONE:
        # kafka-python leaves the wrapper's offset to the broker, which stores the last
        # inner offset there (outside the CRC).
        struct.pack_into(">q", data, 0, n - 1 if magic == 1 else 0)
    batches = kt_records_via_file(tmp_path, bytes(data))
    assert len(batches) == (n if codec is Codec.NONE else 1)
    assert all(b.magic == magic and b.codec is codec for b in batches)
    records = [r for b in batches for r in b.records()]
    expected_ts = [ts if magic == 1 else -1 for _, _, ts in LEGACY_ROWS]
    assert [(r.offset, r.timestamp, r.key, r.value) for r in records] == [
        (i, ts, k, v) for i, ((k, v, _), ts) in enumerate(zip(LEGACY_ROWS, expected_ts))
    ]
    for b in batches:
        assert all(m.is_valid for m in b.legacy_messages())
    theirs = [r for batch in their_batches(data) for r in batch]
    assert [(r.offset, r.key, r.value) for r in theirs] == [
        (r.offset, r.key, r.value) for r in records
    ]
    assert [r.timestamp for r in theirs] == [ts if magic == 1 else None for ts in expected_ts]


def test_kafka_python_magic_0_lz4_uses_the_broken_checksum(old_kafka_lz4: None) -> None:
    data = build_theirs_legacy(0, Codec.LZ4, LEGACY_ROWS[:3])
    wrapper = legacy.parse_message(bytes(data))
    assert wrapper.value is not None
    frame = wrapper.value
    from strategies import xxh32

    assert frame[6] == (xxh32(frame[:6]) >> 8) & 0xFF  # checksum over the magic too
    assert [m.value for m in legacy.iter_inner(wrapper)] == [v for _, v, _ in LEGACY_ROWS[:3]]


@pytest.mark.parametrize("magic", [0, 1])
def test_kafka_python_has_no_legacy_zstd(magic: int) -> None:
    """Kafka allows zstd only with magic 2; kafka-python refuses it for 0 and 1."""
    builder = LegacyRecordBatchBuilder(magic=magic, compression_type=4, batch_size=1024)
    builder.append(0, 1, b"k", b"v")
    with pytest.raises(UnsupportedCodecError):
        builder.build()


# --- kt writes, kafka-python reads ---------------------------------------------------


def kt_rows() -> list[RecordSpec]:
    return [RecordSpec(k, v, h, timestamp=ts, offset_delta=d) for d, ts, k, v, h in ROWS]


@pytest.mark.parametrize("codec", list(Codec), ids=label)
@pytest.mark.parametrize("log_append_time", [None, 1_800_000_000_000])
@pytest.mark.parametrize("producer", [(-1, -1, -1), (99, 2, INT32_MAX - 10)])
def test_kt_v2_batches_decode_in_kafka_python(
    codec: Codec, log_append_time: int | None, producer: tuple[int, int, int]
) -> None:
    pid, epoch, seq = producer
    batch = bytearray(
        build_batch(
            kt_rows(),
            base_offset=1234,
            codec=codec,
            producer_id=pid,
            producer_epoch=epoch,
            base_sequence=seq,
            partition_leader_epoch=4,
            is_transactional=pid >= 0,
        )
    )
    if log_append_time is not None:
        v2.set_log_append_time(batch, log_append_time)
    (theirs,) = their_batches(batch)
    assert isinstance(theirs, DefaultRecordBatch)
    assert (theirs.base_offset, theirs.leader_epoch, theirs.magic) == (1234, 4, 2)
    assert theirs.compression_type == int(codec)
    assert theirs.timestamp_type == (0 if log_append_time is None else 1)
    assert (theirs.producer_id, theirs.producer_epoch, theirs.base_sequence) == producer
    assert theirs.is_transactional == (pid >= 0)
    assert not theirs.is_control_batch
    assert theirs.last_offset_delta == 310 and theirs.records_count == len(ROWS)
    assert theirs.first_timestamp == ROWS[0][1]
    assert theirs.max_timestamp == (log_append_time or max(r[1] for r in ROWS))
    if pid >= 0:
        assert theirs.last_sequence == v2.increment_sequence(seq, 310)
    got = [as_tuple(r) for r in theirs]
    stamp = (lambda ts: log_append_time) if log_append_time else (lambda ts: ts)
    assert got == [(1234 + d, stamp(ts), k, v, h) for d, ts, k, v, h in ROWS]


@pytest.mark.parametrize("commit", [True, False])
def test_kt_end_txn_markers_decode_in_kafka_python(commit: bool) -> None:
    batch = v2.build_end_txn_marker(
        commit=commit, producer_id=8, producer_epoch=1, coordinator_epoch=5, base_offset=77
    )
    (theirs,) = their_batches(batch)
    assert theirs.is_control_batch and theirs.is_transactional
    (marker,) = list(theirs)
    assert (marker.offset, marker.version, marker.type) == (77, 0, 1 if commit else 0)
    assert marker.commit == commit and marker.abort != commit
    assert marker.value == struct.pack(">hi", 0, 5)


def test_kt_delete_horizon_batch_decodes_in_kafka_python() -> None:
    batch = build_batch(
        [RecordSpec(b"k", None, timestamp=5000), RecordSpec(b"j", b"v", timestamp=5100)],
        delete_horizon_ms=4000,
    )
    (theirs,) = their_batches(batch)
    assert theirs.attributes & 0x40
    assert theirs.first_timestamp == 4000
    assert [(r.timestamp, r.key, r.value) for r in theirs] == [
        (5000, b"k", None),
        (5100, b"j", b"v"),
    ]


@pytest.mark.parametrize("codec", LEGACY_CODECS, ids=label)
@pytest.mark.parametrize("magic", [0, 1])
@pytest.mark.parametrize("log_append_time", [None, 1_600_000_000_000])
def test_kt_legacy_sets_decode_in_kafka_python(
    magic: int, codec: Codec, log_append_time: int | None, old_kafka_lz4: None
) -> None:
    """For magic 0 lz4 kt writes a standard frame; kafka-python's magic-0 decoder
    recomputes the header checksum first, so it reads either framing (see
    test_compression for what an 0.8/0.9 broker would make of it)."""
    data = legacy.build_message_set(
        LEGACY_ROWS, magic=magic, base_offset=900, codec=codec, log_append_time=log_append_time
    )
    batches = their_batches(data)
    assert all(isinstance(b, LegacyRecordBatch) and b.magic == magic for b in batches)
    assert all(b.compression_type == int(codec) for b in batches)
    records = [r for b in batches for r in b]
    assert all(r.validate_crc() for r in records)
    appended = magic == 1 and codec is not Codec.NONE and log_append_time is not None
    expected = [
        (
            900 + i,
            None if magic == 0 else (log_append_time if appended else ts),
            k,
            v,
        )
        for i, (k, v, ts) in enumerate(LEGACY_ROWS)
    ]
    assert [(r.offset, r.timestamp, r.key, r.value) for r in records] == expected
    assert {r.timestamp_type for r in records} == ({None} if magic == 0 else {int(appended)})


@pytest.mark.parametrize("magic", [0, 1])
def test_kt_legacy_zstd_is_unreadable_by_kafka_python(magic: int) -> None:
    """kt's builder does not refuse zstd below magic 2, but Kafka never writes that and
    kafka-python cannot read it; kt reads its own output back."""
    data = legacy.build_message_set([(b"k", b"v", 1)], magic=magic, codec=Codec.ZSTD)
    (wrapper,) = their_batches(data)
    with pytest.raises((UnsupportedCodecError, UnboundLocalError)):
        list(wrapper)
    assert [m.value for m in legacy.iter_inner(legacy.parse_message(data))] == [b"v"]


# --- property: both directions over random records ---------------------------------


@settings(max_examples=60, deadline=None)
@given(
    rows=st.lists(
        st.tuples(timestamps, nullable_payloads, nullable_payloads, headers), max_size=10
    ),
    codec=st.sampled_from(list(Codec)),
    base_offset=st.integers(0, 2**60),
)
def test_random_kafka_python_v2_batches_decode_in_kt(
    rows: list[tuple[int, bytes | None, bytes | None, list[tuple[str, bytes | None]]]],
    codec: Codec,
    base_offset: int,
) -> None:
    if not rows:
        return
    batch = build_theirs_v2([(i, ts, k, v, h) for i, (ts, k, v, h) in enumerate(rows)], codec)
    v2.set_base_offset(batch, base_offset)
    header = v2.validate_batch(batch)
    got = [
        (r.offset, r.timestamp, r.key, r.value, r.headers) for r in v2.iter_records(header, batch)
    ]
    assert got == [(base_offset + i, ts, k, v, h) for i, (ts, k, v, h) in enumerate(rows)]


@settings(max_examples=60, deadline=None)
@given(specs=record_specs(), codec=st.sampled_from(list(Codec)), base_offset=st.integers(0, 2**60))
def test_random_kt_v2_batches_decode_in_kafka_python(
    specs: list[RecordSpec], codec: Codec, base_offset: int
) -> None:
    if not specs and codec is Codec.SNAPPY:
        # kt's snappy of nothing is the bare 16-byte xerial header, which Java's
        # SnappyInputStream reads as empty; kafka-python only detects xerial framing
        # with more than 16 bytes and then fails on it as raw snappy.
        return
    batch = build_batch(specs, base_offset=base_offset, codec=codec)
    header = v2.validate_batch(batch)
    ours = [as_tuple(r) for r in v2.iter_records(header, batch)]
    (theirs,) = their_batches(batch)
    assert [as_tuple(r) for r in theirs] == ours
    assert len(ours) == len(specs)


@settings(max_examples=60, deadline=None)
@given(
    rows=st.lists(
        st.tuples(nullable_payloads, nullable_payloads, timestamps), min_size=1, max_size=8
    ),
    magic=st.sampled_from([0, 1]),
    codec=st.sampled_from(LEGACY_CODECS[:3]),
)
def test_random_legacy_sets_agree_both_ways(
    rows: list[tuple[bytes | None, bytes | None, int]], magic: int, codec: Codec
) -> None:
    ours = legacy.build_message_set(rows, magic=magic, codec=codec, base_offset=10)
    theirs_data = build_theirs_legacy(magic, codec, rows)
    if codec is not Codec.NONE and magic == 1:
        struct.pack_into(">q", theirs_data, 0, len(rows) - 1)
    for data, base in ((ours, 10), (bytes(theirs_data), 0)):
        kt_view = [
            (m.offset, m.key, m.value)
            for entry in split_entries(data)
            for m in legacy.iter_inner(legacy.parse_message(entry))
        ]
        kp_view = [(r.offset, r.key, r.value) for b in their_batches(data) for r in b]
        assert kt_view == kp_view == [(base + i, k, v) for i, (k, v, _) in enumerate(rows)]


def split_entries(data: bytes) -> list[bytes]:
    out, pos = [], 0
    while pos < len(data):
        (size,) = struct.unpack_from(">i", data, pos + 8)
        out.append(data[pos : pos + 12 + size])
        pos += 12 + size
    return out


# --- real Kafka files ------------------------------------------------------------


def real_logs(fixtures_dir: Path) -> list[Path]:
    return sorted(fixtures_dir.rglob("*.log"))


def test_kafka_python_agrees_on_every_real_log(fixtures_dir: Path) -> None:
    logs = real_logs(fixtures_dir)
    assert len(logs) == 8
    for path in logs:
        data = path.read_bytes()
        with open(path, "rb") as f:
            ours = [b for b in FileRecords(f).batches(validate=True)]
        assert all(isinstance(b, LogBatch) for b in ours), path
        theirs = their_batches(data)
        assert len(theirs) == len(ours), path
        for mine, other in zip(ours, theirs):
            assert isinstance(mine, LogBatch)
            assert mine.magic == other.magic
            assert mine.codec_id == other.compression_type
            if mine.magic == 2:
                assert (mine.producer_id, mine.producer_epoch, mine.base_sequence) == (
                    other.producer_id,
                    other.producer_epoch,
                    other.base_sequence,
                )
                assert mine.max_timestamp == other.max_timestamp
                assert mine.partition_leader_epoch == other.leader_epoch
            theirs_records = [as_tuple(r) for r in other]
            ours_records = [as_tuple(r) for r in mine.records()]
            if mine.magic == 0:
                theirs_records = [(o, -1, k, v, h) for o, _, k, v, h in theirs_records]
            assert ours_records == theirs_records, path
