"""Streaming `.log` files: chunk boundaries, mixed formats, damage, real Kafka segments."""

from __future__ import annotations

import os
import struct
import tempfile
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from unittest import mock

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from strategies import codecs, legacy_records, record_specs

from kt.storage import file_records, legacy
from kt.storage import record_batch as v2
from kt.storage.compression import Codec
from kt.storage.file_records import Damage, FileRecords, LogBatch, open_file_records
from kt.storage.record_batch import RecordSpec, build_batch


def read_items(path: Path, **kwargs: object) -> list[LogBatch | Damage]:
    records, f = open_file_records(path)
    with f:
        return list(records.batches(**kwargs))  # type: ignore[arg-type]


def only_batches(items: list[LogBatch | Damage]) -> list[LogBatch]:
    assert all(isinstance(i, LogBatch) for i in items), [i for i in items if isinstance(i, Damage)]
    return [i for i in items if isinstance(i, LogBatch)]


def write(path: Path, *chunks: bytes | bytearray) -> Path:
    path.write_bytes(b"".join(chunks))
    return path


def v2_batch(base_offset: int, n: int = 3, codec: Codec = Codec.NONE, **kw: object) -> bytes:
    specs = [RecordSpec(b"k%d" % i, b"v" * (i + 1) * 20, timestamp=1000 + i) for i in range(n)]
    return build_batch(specs, base_offset=base_offset, codec=codec, **kw)  # type: ignore[arg-type]


def legacy_set(base_offset: int, magic: int, codec: Codec = Codec.NONE, n: int = 2) -> bytes:
    records = [(b"k", b"value-%d" % i, 500 + i) for i in range(n)]
    return legacy.build_message_set(records, magic=magic, base_offset=base_offset, codec=codec)


def split_entries(data: bytes) -> list[bytes]:
    out, pos = [], 0
    while pos < len(data):
        (size,) = struct.unpack_from(">i", data, pos + 8)
        out.append(data[pos : pos + 12 + size])
        pos += 12 + size
    return out


# A file of every kind of batch kt writes, in offset order.
MIXED = [
    v2_batch(0, 3),
    *split_entries(legacy_set(3, 0)),
    legacy_set(5, 1, Codec.GZIP, 3),
    v2_batch(8, 4, Codec.SNAPPY, producer_id=5, producer_epoch=1, base_sequence=0),
    legacy_set(12, 0, Codec.LZ4, 2),
    v2.build_end_txn_marker(commit=True, producer_id=5, producer_epoch=1, coordinator_epoch=0,
                            base_offset=14),
    *split_entries(legacy_set(15, 1)),
    v2_batch(17, 200, Codec.ZSTD),
    v2_batch(217, 1, Codec.LZ4, delete_horizon_ms=99),
    v2_batch(218, 2, Codec.GZIP),
]  # fmt: skip
MIXED_MAGICS = [2, 0, 0, 1, 2, 0, 2, 1, 1, 2, 2, 2]


@pytest.fixture
def mixed_file(tmp_path: Path) -> Path:
    return write(tmp_path / "00000000000000000000.log", *MIXED)


def test_mixed_file_yields_exactly_the_batches_written(mixed_file: Path) -> None:
    batches = only_batches(read_items(mixed_file, validate=True))
    assert [bytes(b.data) for b in batches] == MIXED
    assert [b.magic for b in batches] == MIXED_MAGICS
    positions = [0]
    for entry in MIXED[:-1]:
        positions.append(positions[-1] + len(entry))
    assert [b.position for b in batches] == positions
    assert all(b.next_position == p + len(e) for b, p, e in zip(batches, positions, MIXED))
    assert all(b.is_valid() for b in batches)
    offsets = [r.offset for b in batches for r in b.records()]
    assert offsets == list(range(220))
    assert [b.base_offset for b in batches] == [0, 3, 4, 5, 8, 12, 14, 15, 16, 17, 217, 218]
    assert batches[3].last_offset == 7 and batches[3].count is None
    assert batches[4].count == 4 and batches[4].last_sequence == 3
    assert batches[6].is_control and batches[6].is_transactional
    assert batches[10].delete_horizon_ms == 99
    assert [b.codec.label for b in batches] == [
        "none", "none", "none", "gzip", "snappy", "lz4", "none", "none", "none", "zstd", "lz4",
        "gzip",
    ]  # fmt: skip


def test_legacy_batch_fields(mixed_file: Path) -> None:
    batches = only_batches(read_items(mixed_file))
    wrapper = batches[3]
    assert (wrapper.magic, wrapper.codec, wrapper.timestamp_type_name) == (
        1,
        Codec.GZIP,
        "CreateTime",
    )
    assert (wrapper.base_offset, wrapper.last_offset, wrapper.next_offset) == (5, 7, 8)
    assert (wrapper.producer_id, wrapper.base_sequence, wrapper.partition_leader_epoch) == (-1,) * 3
    assert wrapper.max_timestamp == 502
    assert wrapper.stored_crc == wrapper.computed_crc()
    assert [m.offset for m in wrapper.legacy_messages()] == [5, 6, 7]
    assert [(r.timestamp, r.value, r.sequence) for r in wrapper.records()] == [
        (500, b"value-0", -1),
        (501, b"value-1", -1),
        (502, b"value-2", -1),
    ]
    assert batches[1].timestamp_type_name == "NoTimestampType"
    assert batches[1].max_timestamp == -1


@settings(max_examples=60, deadline=None)
@given(
    chunk=st.integers(17, 3000),
    start_index=st.integers(0, len(MIXED)),
    end_index=st.integers(0, len(MIXED)),
)
def test_any_chunk_size_and_window(chunk: int, start_index: int, end_index: int) -> None:
    if end_index < start_index:
        start_index, end_index = end_index, start_index
    bounds = [0]
    for entry in MIXED:
        bounds.append(bounds[-1] + len(entry))
    with tempfile.TemporaryFile() as f, mock.patch.object(file_records, "CHUNK_SIZE", chunk):
        f.write(b"".join(MIXED))
        f.flush()
        reader = FileRecords(f)
        got = list(reader.batches(bounds[start_index], bounds[end_index], validate=True))
    assert [bytes(b.data) for b in only_batches(got)] == MIXED[start_index:end_index]


@st.composite
def mixed_batches(draw: st.DrawFn) -> list[bytes]:
    out: list[bytes] = []
    offset = 0
    for _ in range(draw(st.integers(0, 8))):
        if draw(st.booleans()):
            specs = draw(record_specs(max_records=5))
            batch = build_batch(specs, base_offset=offset, codec=draw(codecs))
            offset = v2.parse_header(batch).next_offset
            out.append(batch)
        else:
            records = draw(legacy_records.filter(bool))
            magic = draw(st.sampled_from([0, 1]))
            codec = draw(st.sampled_from([Codec.NONE, Codec.GZIP, Codec.SNAPPY, Codec.LZ4]))
            data = legacy.build_message_set(records, magic=magic, base_offset=offset, codec=codec)
            out.extend(split_entries(data))
            offset += len(records)
    return out


@settings(max_examples=80, deadline=None)
@given(batches=mixed_batches(), chunk=st.integers(17, 600))
def test_random_files_with_random_chunk_sizes(batches: list[bytes], chunk: int) -> None:
    with tempfile.TemporaryFile() as f, mock.patch.object(file_records, "CHUNK_SIZE", chunk):
        f.write(b"".join(batches))
        f.flush()
        got = only_batches(list(FileRecords(f).batches(validate=True)))
        assert [bytes(b.data) for b in got] == batches
        records = [r for b in got for r in b.records()]
    offsets = [r.offset for r in records]
    assert offsets == sorted(offsets) and len(set(offsets)) == len(offsets)


def test_reads_batches_larger_than_the_chunk(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(file_records, "CHUNK_SIZE", 64)
    big = v2_batch(0, 50)
    path = write(tmp_path / "big.log", big, v2_batch(50, 1), big)
    assert [len(b.data) for b in only_batches(read_items(path, validate=True))] == [
        len(big),
        len(v2_batch(50, 1)),
        len(big),
    ]


def test_read_helper(mixed_file: Path) -> None:
    reader, f = open_file_records(mixed_file)
    with f:
        assert reader.read(0, 12) == MIXED[0][:12]
        assert reader.read(reader.size - 2, 10) == MIXED[-1][-2:]


# --- damage --------------------------------------------------------------------


def damaged_file(tmp_path: Path, *chunks: bytes | bytearray) -> Path:
    return write(tmp_path / "damaged.log", *chunks)


def test_empty_file(tmp_path: Path) -> None:
    path = damaged_file(tmp_path)
    assert read_items(path, validate=True) == []
    assert read_items(path, validate=True, resync=True) == []


@pytest.mark.parametrize("cut", [1, 11, 16, 17, 40, 61, -1])
@pytest.mark.parametrize("resync", [False, True])
def test_truncated_tail(tmp_path: Path, cut: int, resync: bool) -> None:
    last = v2_batch(3, 5, Codec.GZIP)
    path = damaged_file(tmp_path, v2_batch(0), last[:cut])
    items = read_items(path, validate=True, resync=resync)
    *good, damage = items
    assert len(only_batches(good)) == 1
    assert isinstance(damage, Damage)
    tail = cut if cut > 0 else len(last) + cut
    assert (damage.position, damage.length, damage.at_end) == (len(v2_batch(0)), tail, True)
    if last[:tail].count(0) == tail:  # a cut inside the leading zeros of the base offset
        assert damage.reason.startswith("zero-filled")
    else:
        assert ("too few" if tail < 17 else "truncated") in damage.reason


@pytest.mark.parametrize("resync", [False, True])
def test_crc_mismatch_in_the_payload(tmp_path: Path, resync: bool) -> None:
    middle = bytearray(v2_batch(3, 3, Codec.SNAPPY))
    middle[-5] ^= 0x10
    path = damaged_file(tmp_path, v2_batch(0), middle, v2_batch(6), legacy_set(7, 1))
    items = read_items(path, validate=True, resync=resync)
    assert isinstance(items[1], Damage)
    assert items[1].position == len(v2_batch(0))
    assert "CRC-32C mismatch" in items[1].reason
    assert not items[1].at_end
    if resync:
        assert items[1].length == len(middle)
        assert [b.base_offset for b in only_batches([items[0], *items[2:]])] == [0, 6, 7, 8]
    else:
        assert len(items) == 2
    # Without validation the damaged batch is returned and reports its own CRC.
    unchecked = only_batches(read_items(path))
    assert [b.is_valid() for b in unchecked] == [True, False, True, True, True]


def test_legacy_crc_mismatch(tmp_path: Path) -> None:
    bad = bytearray(legacy_set(0, 0, n=1))
    bad[-1] ^= 0xFF
    path = damaged_file(tmp_path, bytes(bad), legacy_set(1, 1))
    first, *rest = read_items(path, validate=True, resync=True)
    assert isinstance(first, Damage) and "CRC-32 mismatch" in first.reason
    assert [b.base_offset for b in only_batches(rest)] == [1, 2]


@pytest.mark.parametrize("size", [0x7FFFFFF0, 0x30, -1, -(2**31)])
def test_bad_size_field_mid_file_resyncs(tmp_path: Path, size: int) -> None:
    batches = [v2_batch(i * 3, 3, codec) for i, codec in enumerate(Codec)]
    damaged = bytearray(batches[1])
    struct.pack_into(">i", damaged, 8, size)
    path = damaged_file(tmp_path, batches[0], damaged, *batches[2:])
    items = read_items(path, validate=True, resync=True)
    assert isinstance(items[1], Damage)
    assert items[1].position == len(batches[0])
    assert items[1].length == len(damaged)
    assert not items[1].at_end
    assert [bytes(b.data) for b in only_batches([items[0], *items[2:]])] == [
        batches[0],
        *batches[2:],
    ]
    stopped = read_items(path, validate=True)
    assert len(stopped) == 2 and isinstance(stopped[1], Damage)


def test_flipped_bit_in_a_size_field_is_caught_by_framing_or_crc(tmp_path: Path) -> None:
    batches = [v2_batch(i * 3, 3) for i in range(4)]
    for bit in range(31):
        damaged = bytearray(batches[1])
        damaged[8 + (3 - bit // 8)] ^= 1 << (bit % 8)
        path = damaged_file(tmp_path, batches[0], damaged, *batches[2:])
        items = read_items(path, validate=True, resync=True)
        assert isinstance(items[1], Damage), bit
        # Every batch after the damage comes back, whatever the reason given.
        assert [bytes(b.data) for b in items if isinstance(b, LogBatch)][-2:] == batches[2:]


@pytest.mark.parametrize("resync", [False, True])
def test_garbage_appended(tmp_path: Path, resync: bool) -> None:
    garbage = bytes(range(1, 200))
    path = damaged_file(tmp_path, v2_batch(0), legacy_set(3, 1), garbage)
    items = read_items(path, validate=True, resync=resync)
    assert len(only_batches(items[:-1])) == 3
    damage = items[-1]
    assert isinstance(damage, Damage)
    assert damage.position == len(v2_batch(0)) + len(legacy_set(3, 1))
    if resync:
        assert (damage.length, damage.at_end) == (len(garbage), True)


@pytest.mark.parametrize("resync", [False, True])
@pytest.mark.parametrize("zeros", [5, 17, 4096])
def test_zero_filled_tail(tmp_path: Path, resync: bool, zeros: int) -> None:
    path = damaged_file(tmp_path, v2_batch(0), v2_batch(3), b"\x00" * zeros)
    *good, damage = read_items(path, validate=True, resync=resync)
    assert len(only_batches(good)) == 2
    assert isinstance(damage, Damage)
    assert damage.reason.startswith("zero-filled")
    assert (damage.position, damage.length, damage.at_end) == (2 * len(v2_batch(0)), zeros, True)


def test_zeros_followed_by_data_are_not_a_preallocated_tail(tmp_path: Path) -> None:
    path = damaged_file(tmp_path, v2_batch(0), b"\x00" * 100, v2_batch(3))
    items = read_items(path, validate=True, resync=True)
    assert isinstance(items[1], Damage) and not items[1].reason.startswith("zero-filled")
    assert (items[1].length, items[1].at_end) == (100, False)
    assert bytes(only_batches([items[2]])[0].data) == v2_batch(3)


@pytest.mark.parametrize("magic", [3, 0x7F, 0xFF])
def test_invalid_magic(tmp_path: Path, magic: int) -> None:
    bad = bytearray(v2_batch(3))
    bad[16] = magic
    path = damaged_file(tmp_path, v2_batch(0), bad, v2_batch(6))
    items = read_items(path, validate=True)
    assert isinstance(items[1], Damage) and f"invalid magic byte {magic}" in items[1].reason
    assert len(items) == 2
    resynced = read_items(path, validate=True, resync=True)
    assert [b.base_offset for b in resynced if isinstance(b, LogBatch)] == [0, 6]


@pytest.mark.parametrize("magic", [0, 1, 2])
def test_sizes_below_the_minimum(tmp_path: Path, magic: int) -> None:
    bad = bytearray(v2_batch(3) if magic == 2 else legacy_set(3, magic, n=1))
    minimum = {0: 14, 1: 22, 2: 49}[magic]
    for size in (minimum - 1, 0, -1, -(2**31)):
        struct.pack_into(">i", bad, 8, size)
        path = damaged_file(tmp_path, v2_batch(0), bad)
        items = read_items(path, validate=True)
        assert isinstance(items[1], Damage)
        assert "less than the minimum" in items[1].reason


def test_batch_bigger_than_max_batch_size(tmp_path: Path) -> None:
    small, big = v2_batch(0, 1), v2_batch(1, 40)
    path = damaged_file(tmp_path, small, big, small)
    limit = len(big) - 1
    items = read_items(path, validate=True, max_batch_size=limit)
    assert isinstance(items[1], Damage) and "larger than the maximum" in items[1].reason
    assert len(items) == 2
    resynced = read_items(path, max_batch_size=limit, resync=True)
    assert [type(i) for i in resynced] == [LogBatch, Damage, LogBatch]
    assert len(only_batches(read_items(path, max_batch_size=len(big)))) == 3


def test_negative_record_count_with_valid_crc_is_damage(tmp_path: Path) -> None:
    bad = bytearray(v2_batch(3))
    struct.pack_into(">i", bad, 57, -1)
    struct.pack_into(">I", bad, 17, v2.compute_crc(bad))
    path = damaged_file(tmp_path, bad)
    (damage,) = read_items(path, validate=True)
    assert isinstance(damage, Damage) and "negative" in damage.reason


def test_file_records_takes_a_descriptor_and_a_size(mixed_file: Path) -> None:
    fd = os.open(mixed_file, os.O_RDONLY)
    try:
        reader = FileRecords(fd, size=len(MIXED[0]))
        assert [bytes(b.data) for b in only_batches(list(reader.batches()))] == MIXED[:1]
    finally:
        os.close(fd)


@settings(max_examples=100, deadline=None)
@given(
    flips=st.lists(st.tuples(st.integers(0, 10**6), st.integers(1, 255)), min_size=1, max_size=3),
    cut=st.integers(0, 10**6),
    resync=st.booleans(),
    chunk=st.integers(17, 4096),
)
def test_damaged_files_never_raise(
    flips: list[tuple[int, int]], cut: int, resync: bool, chunk: int
) -> None:
    data = bytearray(b"".join(MIXED))
    for where, mask in flips:
        data[where % len(data)] ^= mask
    del data[len(data) - cut % 200 :]
    with tempfile.TemporaryFile() as f, mock.patch.object(file_records, "CHUNK_SIZE", chunk):
        f.write(data)
        f.flush()
        items = list(FileRecords(f).batches(validate=True, resync=resync))
        covered = 0
        for item in items:
            # Batches and damage tile the file in order, with no gaps or overlaps.
            assert item.position == covered
            if isinstance(item, LogBatch):
                covered = item.next_position
                assert item.is_valid()
                list(item.records())  # a batch whose CRC checks out decodes
            else:
                covered = item.position + item.length
        if resync or not items or isinstance(items[-1], LogBatch) or items[-1].at_end:
            assert covered == len(data)
        else:
            assert items[-1].length == 0  # stopped at damage of unknown extent


# --- real Kafka segments ----------------------------------------------------------

REAL = {
    # file: (batches, records, {(magic, codec): count})
    "test-0/00000000000000000000.log": (109, 109, {(2, "gzip"): 103, (2, "none"): 6}),
    "some-topic-0/00000000000000000000.log": (9, 9, {(2, "snappy"): 9}),
    "tenitems-0/00000000000000000000.log": (9, 9, {(2, "none"): 9}),
    "quickstart-events-0/00000000000000000000.log": (3, 3, {(2, "none"): 3}),
    "__consumer_offsets-16/00000000000000000000.log": (69, 69, {(2, "none"): 69}),
    "logdir-0.10/foo-0/00000000000000000000.log": (204, 204, {(1, "none"): 204}),
    "logdir-0.10/topic1-0/00000000000000000000.log": (5, 5, {(1, "none"): 5}),
    "logdir-0.10/__consumer_offsets-40/00000000000000000000.log": (860, 860, {(1, "none"): 860}),
}


def real_batches(fixtures_dir: Path, rel: str, **kwargs: object) -> Iterator[LogBatch]:
    yield from only_batches(read_items(fixtures_dir / rel, validate=True, **kwargs))


def test_every_real_log_is_listed(fixtures_dir: Path) -> None:
    found = {str(p.relative_to(fixtures_dir)) for p in fixtures_dir.rglob("*.log")}
    assert found == set(REAL)


@pytest.mark.parametrize("rel", sorted(REAL))
def test_real_logs_decode_completely(fixtures_dir: Path, rel: str) -> None:
    n_batches, n_records, kinds = REAL[rel]
    batches = list(real_batches(fixtures_dir, rel))
    assert len(batches) == n_batches
    assert batches[-1].next_position == (fixtures_dir / rel).stat().st_size
    assert Counter((b.magic, b.codec.label) for b in batches) == kinds
    assert all(b.is_valid() for b in batches)
    records = [r for b in batches for r in b.records()]
    assert len(records) == n_records
    assert [r.offset for r in records] == list(range(n_records))
    for b in batches:
        if b.magic == 2:
            assert b.header is not None
            v2.validate_batch(b.data)
            assert b.count == len(list(b.records()))
        else:
            assert all(m.is_valid for m in b.legacy_messages())
    with mock.patch.object(file_records, "CHUNK_SIZE", 1000):
        again = list(real_batches(fixtures_dir, rel, resync=True))
    assert [bytes(b.data) for b in again] == [bytes(b.data) for b in batches]


def test_idempotent_producer_fields(fixtures_dir: Path) -> None:
    tenitems = list(real_batches(fixtures_dir, "tenitems-0/00000000000000000000.log"))
    assert {b.producer_id for b in tenitems} == {2, 3, 4}
    assert all(b.producer_epoch == 0 and not b.is_transactional for b in tenitems)
    by_producer: dict[int, list[int]] = {}
    for b in tenitems:
        assert b.base_sequence == b.last_sequence
        by_producer.setdefault(b.producer_id, []).append(b.base_sequence)
    assert all(seqs == list(range(len(seqs))) for seqs in by_producer.values())
    quick = list(real_batches(fixtures_dir, "quickstart-events-0/00000000000000000000.log"))
    assert [(b.producer_id, b.producer_epoch, b.base_sequence) for b in quick] == [
        (0, 0, 0),
        (0, 0, 1),
        (0, 0, 2),
    ]
    assert [r.sequence for b in quick for r in b.records()] == [0, 1, 2]


def test_magic_1_real_log_timestamps(fixtures_dir: Path) -> None:
    batches = list(real_batches(fixtures_dir, "logdir-0.10/foo-0/00000000000000000000.log"))
    assert all(b.timestamp_type_name == "CreateTime" for b in batches)
    stamps = [r.timestamp for b in batches for r in b.records()]
    assert all(ts > 1_400_000_000_000 for ts in stamps)
