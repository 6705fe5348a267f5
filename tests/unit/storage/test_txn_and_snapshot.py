"""Transaction index and producer-state snapshots: layouts, fixtures, damage, round trips."""

from __future__ import annotations

import struct
from pathlib import Path

import crc32c
import pytest
from hypothesis import given
from hypothesis import strategies as st

from kt.storage.errors import CorruptIndexError, CorruptSnapshotError
from kt.storage.producer_snapshot import (
    ProducerSnapshotEntry,
    encode_producer_snapshot,
    parse_producer_snapshot,
    read_producer_snapshot,
    snapshot_file_name,
    write_producer_snapshot,
)
from kt.storage.txn_index import (
    AbortedTxn,
    TransactionIndex,
    collect_aborted,
    encode_txn_index,
    parse_txn_index,
    read_txn_index,
    txn_index_problems,
)

i64 = st.integers(-(2**63), 2**63 - 1)
i32 = st.integers(-(2**31), 2**31 - 1)
i16 = st.integers(-(2**15), 2**15 - 1)

# --- transaction index -------------------------------------------------------------


def test_aborted_txn_layout() -> None:
    t = AbortedTxn(producer_id=7, first_offset=10, last_offset=20, last_stable_offset=15)
    assert t.encode() == struct.pack(">hqqqq", 0, 7, 10, 20, 15)
    assert len(t.encode()) == 34


def test_txn_index_damage() -> None:
    data = encode_txn_index([AbortedTxn(1, 0, 5, 3), AbortedTxn(2, 6, 9, 7)])
    assert parse_txn_index(data) == [AbortedTxn(1, 0, 5, 3), AbortedTxn(2, 6, 9, 7)]
    with pytest.raises(CorruptIndexError, match="trailing bytes") as exc:
        parse_txn_index(data[:-1])
    assert exc.value.position == 34
    with pytest.raises(CorruptIndexError, match="trailing"):
        parse_txn_index(data + b"junk")
    with pytest.raises(CorruptIndexError, match="version 1"):
        parse_txn_index(b"\x00\x01" + data[2:])
    assert parse_txn_index(b"") == []
    assert txn_index_problems([AbortedTxn(1, 0, 5, 3)], start_offset=10)
    assert txn_index_problems([AbortedTxn(1, 0, 5, 3), AbortedTxn(1, 0, 5, 3)])


def test_transaction_index_append_truncate_collect(tmp_path: Path) -> None:
    path = tmp_path / "00000000000000000000.txnindex"
    idx = TransactionIndex(0, path)
    assert not path.exists()  # created lazily, like Kafka
    txns = [AbortedTxn(1, 0, 10, 11), AbortedTxn(2, 5, 20, 21), AbortedTxn(3, 25, 30, 40)]
    for t in txns:
        idx.append(t)
    with pytest.raises(CorruptIndexError, match="must increase"):
        idx.append(AbortedTxn(4, 1, 30, 31))
    idx.flush()
    assert read_txn_index(path) == txns

    # overlapping [fetch, upper); complete once an entry's LSO >= upper bound
    r = idx.collect_aborted(12, 22)
    assert r.aborted == [txns[1]] and r.is_complete  # txns[2] has LSO 40 >= 22
    r = idx.collect_aborted(0, 21)
    assert r.aborted == txns[:2] and r.is_complete
    r = collect_aborted(txns, 31, 100)  # past every entry, none reaches the bound
    assert r.aborted == [] and not r.is_complete

    idx.truncate_to(20)  # drops the entries whose last offset >= 20
    assert idx.entries == txns[:1]
    idx.append(AbortedTxn(5, 12, 15, 16))
    idx.close()
    reopened = TransactionIndex.open(path, 0)
    assert reopened.entries == [txns[0], AbortedTxn(5, 12, 15, 16)]
    reopened.write()
    assert path.read_bytes() == encode_txn_index(reopened.entries)


@given(st.lists(st.tuples(i64, i64, i64, i64), max_size=30))
def test_txn_index_round_trip(rows: list[tuple[int, int, int, int]]) -> None:
    entries = [AbortedTxn(*r) for r in rows]
    assert parse_txn_index(encode_txn_index(entries)) == entries


# --- producer snapshots ------------------------------------------------------------

SNAPSHOTS = [
    "tenitems-0/00000000000000000009.snapshot",
    "quickstart-events-0/00000000000000000003.snapshot",
    "test-0/00000000000000000109.snapshot",
    "__consumer_offsets-16/00000000000000000022.snapshot",
]


@pytest.mark.parametrize("rel", SNAPSHOTS)
def test_real_snapshots_round_trip(fixtures_dir: Path, rel: str) -> None:
    path = fixtures_dir / rel
    snap = read_producer_snapshot(path)
    assert snap.offset == int(path.name.split(".")[0])
    assert encode_producer_snapshot(snap.entries) == path.read_bytes()


def test_real_snapshot_content(fixtures_dir: Path) -> None:
    snap = read_producer_snapshot(fixtures_dir / SNAPSHOTS[1])
    assert snap.entries == [
        ProducerSnapshotEntry(
            producer_id=0,
            epoch=0,
            last_sequence=2,
            last_offset=2,
            offset_delta=0,
            timestamp=0x0186_41D5_BE32,
            coordinator_epoch=-1,
            current_txn_first_offset=-1,
        )
    ]
    assert len(read_producer_snapshot(fixtures_dir / SNAPSHOTS[0]).entries) == 3


def test_snapshot_layout() -> None:
    entry = ProducerSnapshotEntry(1, 2, 3, 4, 5, 6, 7, 8)
    body = struct.pack(">i", 1) + struct.pack(">qhiqiqiq", 1, 2, 3, 4, 5, 6, 7, 8)
    expected = struct.pack(">hI", 1, crc32c.crc32c(body)) + body
    assert encode_producer_snapshot([entry]) == expected
    assert len(expected) == 10 + 46
    assert snapshot_file_name(9) == "00000000000000000009.snapshot"


@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        (lambda d: d[:-1], "truncated"),
        (lambda d: d[:5], "truncated header"),
        (lambda d: b"", "too short"),
        (lambda d: d + b"\x00garbage", "unexpected bytes"),
        (lambda d: d[:20] + bytes([d[20] ^ 0x10]) + d[21:], "CRC mismatch"),
        (lambda d: d[:3] + bytes([d[3] ^ 0x01]) + d[4:], "CRC mismatch"),
        (lambda d: b"\x00\x02" + d[2:], "unknown snapshot version 2"),
        (lambda d: d[:6] + struct.pack(">i", -1) + d[10:], "negative"),
    ],
)
def test_damaged_snapshots(fixtures_dir: Path, mutate: object, message: str) -> None:
    data = (fixtures_dir / SNAPSHOTS[0]).read_bytes()
    with pytest.raises(CorruptSnapshotError, match=message):
        parse_producer_snapshot(mutate(data), "x.snapshot")  # type: ignore[operator]


entries_st = st.lists(
    st.builds(ProducerSnapshotEntry, i64, i16, i32, i64, i32, i64, i32, i64), max_size=20
)


@given(entries_st)
def test_snapshot_round_trip(entries: list[ProducerSnapshotEntry]) -> None:
    data = encode_producer_snapshot(entries)
    assert parse_producer_snapshot(data)[0] == entries


def test_write_snapshot(tmp_path: Path) -> None:
    path = tmp_path / snapshot_file_name(42)
    write_producer_snapshot(path, [ProducerSnapshotEntry(1, 0, 5, 41, 2, 1000, -1)])
    snap = read_producer_snapshot(path)
    assert snap.offset == 42 and snap.entries[0].current_txn_first_offset == -1
