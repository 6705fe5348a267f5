"""Index verification and rebuilding against real Kafka files and crafted damage."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest

from kt.storage.errors import WrongFileKindError
from kt.storage.index_check import (
    apply_rebuild,
    find_segment_logs,
    plan_rebuild,
    verify_segment,
)
from kt.storage.log_files import segment_file_name
from kt.storage.offset_index import OffsetPosition
from kt.storage.record_batch import RecordSpec, build_batch, build_end_txn_marker
from kt.storage.segment import batch_infos
from kt.storage.time_index import TimestampOffset
from kt.storage.txn_index import AbortedTxn, read_txn_index

REAL_PARTITIONS = [
    "test-0",
    "tenitems-0",
    "quickstart-events-0",
    "some-topic-0",
    "__consumer_offsets-16",
    "logdir-0.10",
]


def test_every_real_kafka_segment_verifies_clean(fixtures_dir: Path) -> None:
    logs = find_segment_logs([fixtures_dir / p for p in REAL_PARTITIONS])
    assert len(logs) == 8
    checks = {log.parent.name: verify_segment(log) for log in logs}
    assert all(c.ok for c in checks.values()), {k: c.problems for k, c in checks.items()}
    test0 = checks["test-0"]
    assert (test0.batches, test0.offset_entries, test0.time_entries) == (109, 45, 46)
    assert checks["quickstart-events-0"].time_entries == 1


def test_rebuild_reproduces_kafkas_indexes_byte_for_byte(fixture_copy) -> None:  # type: ignore[no-untyped-def]
    d: Path = fixture_copy("test-0")
    for p in d.iterdir():
        p.chmod(0o644)
    log = d / "00000000000000000000.log"
    index, timeindex = log.with_suffix(".index"), log.with_suffix(".timeindex")
    kafka = index.read_bytes(), timeindex.read_bytes()
    assert len(kafka[0]) == 360 and len(kafka[1]) == 552

    # Kafka's files are exactly what a rebuild would write: nothing to change.
    assert plan_rebuild(log).changed == []

    index.unlink()
    timeindex.unlink()
    plan = plan_rebuild(log)
    assert plan.changed == [index.name, timeindex.name]
    assert plan.files[index.name][0] is None
    assert (plan.invalid_bytes, plan.valid_bytes) == (0, log.stat().st_size)
    assert not index.exists()  # planning writes nothing
    written = apply_rebuild(plan)
    assert sorted(written) == sorted([index, timeindex])
    assert (index.read_bytes(), timeindex.read_bytes()) == kafka
    assert not [p for p in d.iterdir() if p.name.startswith(".")]  # no temp files left
    assert apply_rebuild(plan_rebuild(log)) == []


# --- crafted segments ------------------------------------------------------------------------


def write_segment(
    d: Path, base: int = 0, n: int = 20
) -> tuple[Path, list[tuple[int, int, int, int]]]:
    """A segment of `n` batches of 3 records with rising timestamps, indexed by a
    rebuild with index.interval.bytes 200. Returns the .log path and (position,
    size, last offset, max timestamp) per batch."""
    d.mkdir(parents=True, exist_ok=True)
    data = b"".join(
        build_batch(
            [RecordSpec(b"k", b"v" * 30, timestamp=1_000 + 10 * (3 * i + j)) for j in range(3)],
            base_offset=base + 3 * i,
        )
        for i in range(n)
    )
    log = d / segment_file_name(base, ".log")
    log.write_bytes(data)
    apply_rebuild(plan_rebuild(log, index_interval_bytes=200))
    out, pos = [], 0
    for info in batch_infos(data):
        out.append((pos, info.size, info.last_offset, info.max_timestamp))
        pos += info.size
    return log, out


def put_offset_index(log: Path, base: int, entries: list[tuple[int, int]]) -> Path:
    path = log.with_suffix(".index")
    path.write_bytes(b"".join(struct.pack(">ii", o - base, p) for o, p in entries))
    return path


def put_time_index(log: Path, base: int, entries: list[tuple[int, int]]) -> Path:
    path = log.with_suffix(".timeindex")
    path.write_bytes(b"".join(struct.pack(">qi", t, o - base) for t, o in entries))
    return path


def messages(log: Path) -> list[str]:
    return [f"{p.kind}: {p}" for p in verify_segment(log).problems]


@pytest.fixture
def seg(tmp_path: Path) -> tuple[Path, list[tuple[int, int, int, int]]]:
    log, batches = write_segment(tmp_path / "t-0", base=100)
    check = verify_segment(log)
    assert check.ok and check.offset_entries >= 4 and check.time_entries >= 4
    return log, batches


def test_entry_pointing_into_a_batch(seg) -> None:  # type: ignore[no-untyped-def]
    log, b = seg
    path = put_offset_index(log, 100, [(b[1][2], b[1][0]), (b[3][2], b[3][0] + 5)])
    assert messages(log) == [
        f"offset-index: {path}: entry 1: offset {b[3][2]} points at position "
        f"{b[3][0] + 5}, inside the batch at position {b[3][0]}"
    ]


def test_indexed_offset_inside_its_batch_is_a_note(seg) -> None:  # type: ignore[no-untyped-def]
    """An offset inside the batch it points at keeps lookups right: a note, not a problem."""
    log, b = seg
    path = put_offset_index(log, 100, [(b[2][2] - 1, b[2][0])])
    check = verify_segment(log)
    assert check.ok and not check.warnings
    assert [str(n) for n in check.notes] == [
        f"{path}: entry 0: index offset {b[2][2] - 1} points at the batch at position "
        f"{b[2][0]} (offsets {b[2][2] - 2}..{b[2][2]}): an entry for a multi-batch append, "
        "as followers write; lookups are correct"
    ]


def test_indexed_offset_below_its_batch_is_a_problem(seg) -> None:  # type: ignore[no-untyped-def]
    """An entry naming an offset of an earlier batch would make lookups skip records."""
    log, b = seg
    path = put_offset_index(log, 100, [(b[1][2], b[2][0])])
    problems = verify_segment(log).problems
    assert [str(p) for p in problems] == [
        f"{path}: entry 0: index offset {b[1][2]} but the batch at position {b[2][0]} "
        f"starts at log offset {b[2][2] - 2} (a lookup of offset {b[1][2]} would start "
        "after it)"
    ]
    assert (problems[0].index_offset, problems[0].log_offset) == (b[1][2], b[2][2] - 2)


def test_indexed_offset_beyond_the_last_offset_is_a_problem(seg) -> None:  # type: ignore[no-untyped-def]
    log, b = seg
    path = put_offset_index(log, 100, [(b[-1][2] + 5, b[-1][0])])
    assert messages(log) == [
        f"offset-index: {path}: entry 0: index offset {b[-1][2] + 5} is beyond the last "
        f"offset of the log ({b[-1][2]})"
    ]


def test_missing_indexes_are_warnings(seg) -> None:  # type: ignore[no-untyped-def]
    """Kafka rebuilds a missing .index/.timeindex on load: report it, but not as damage."""
    log, _ = seg
    log.with_suffix(".index").unlink()
    log.with_suffix(".timeindex").unlink()
    check = verify_segment(log)
    assert check.ok
    assert [str(w) for w in check.warnings] == [
        f"{log.with_suffix('.index')}: missing (Kafka rebuilds it when it loads the segment)",
        f"{log.with_suffix('.timeindex')}: missing (Kafka rebuilds it when it loads the segment)",
    ]


def test_real_consumer_offsets_segment_without_indexes_warns(fixtures_dir: Path) -> None:
    log = fixtures_dir / "__consumer_offsets-16" / "00000000000000000000.log"
    check = verify_segment(log)
    assert check.ok and [w.kind for w in check.warnings] == ["offset-index", "time-index"]


def test_follower_multi_batch_appends_verify_with_notes(tmp_path: Path) -> None:
    """Section 4: a follower appends several batches at once and Kafka indexes the
    append with its last offset and its first batch's position."""
    from kt.storage.log import PartitionLog
    from kt.storage.log_config import LogConfig

    d = tmp_path / "t-0"
    plog = PartitionLog.open(d, LogConfig(index_interval_bytes=1))
    appends, offset = [], 0
    for n_batches in (3, 1, 4, 2):
        chunk = []
        for _ in range(n_batches):
            recs = [RecordSpec(b"k", b"v" * 20, timestamp=1_000 + offset + j) for j in range(2)]
            chunk.append(build_batch(recs, base_offset=offset, partition_leader_epoch=0))
            offset += 2
        appends.append(chunk)
        plog.append_as_follower(b"".join(chunk))
    plog.close()
    log = d / segment_file_name(0, ".log")
    assert verify_segment(log).ok  # whatever kt itself wrote is valid
    # The entries Kafka writes for these appends: (last offset of the append,
    # position of its first batch).
    entries, pos = [], 0
    for chunk in appends:
        last = batch_infos(b"".join(chunk))[-1].last_offset
        entries.append((last, pos))
        pos += sum(len(b) for b in chunk)
    put_offset_index(log, 0, entries)
    check = verify_segment(log)
    assert check.ok, check.problems
    assert [n.entry for n in check.notes] == [0, 2, 3]  # the multi-batch appends
    # Lookups through these entries find every offset.
    from kt.storage.file_records import FileRecords, LogBatch
    from kt.storage.offset_index import read_offset_index

    view = read_offset_index(log.with_suffix(".index"), 0)
    with open(log, "rb") as f:
        records = FileRecords(f)
        for target in range(offset):
            start = max((e for e in view if e.offset <= target), default=OffsetPosition(0, 0))
            found = [
                b
                for b in records.batches(start.position)
                if isinstance(b, LogBatch) and b.last_offset >= target
            ]
            assert found and found[0].base_offset <= target
    # kt's own log engine loads such an index and reads every offset through it.
    again = PartitionLog.open(d, LogConfig(index_interval_bytes=1), had_clean_shutdown=True)
    try:
        assert again.load_report.rebuilt_indexes == []  # the sanity check accepts it
        with open(log, "rb") as f:
            records = FileRecords(f)
            for target in range(offset):
                got = again.read(target, 1)
                assert got is not None
                batch = next(iter(records.batches(got.position)))
                assert isinstance(batch, LogBatch)
                assert batch.base_offset <= target <= batch.last_offset
    finally:
        again.close()


def test_offset_index_entry_beyond_the_end_of_the_log(seg) -> None:  # type: ignore[no-untyped-def]
    log, b = seg
    size = log.stat().st_size
    path = put_offset_index(log, 100, [(b[2][2], b[2][0]), (500, size + 100)])
    assert messages(log) == [
        f"offset-index: {path}: entry 1: position {size + 100} is beyond the end of the log "
        f"({size} bytes)"
    ]


def test_non_increasing_offsets_and_torn_size(seg) -> None:  # type: ignore[no-untyped-def]
    log, b = seg
    path = put_offset_index(log, 100, [(b[4][2], b[4][0]), (b[2][2], b[2][0])])
    assert messages(log)[0] == (
        f"offset-index: {path}: entry 1: offset {b[2][2]} is not greater than the previous "
        f"entry's {b[4][2]}"
    )
    path.write_bytes(path.read_bytes()[:8] + b"\x00\x00\x00\x09\x00")
    assert messages(log) == [
        f"offset-index: {path}: size 13 is not a multiple of 8 (5 trailing bytes: a torn "
        "last entry)"
    ]


def test_time_index_problems(seg) -> None:  # type: ignore[no-untyped-def]
    log, b = seg
    path = put_time_index(log, 100, [(b[2][3], b[2][2]), (b[5][3] + 1, b[5][2])])
    assert messages(log) == [
        f"time-index: {path}: entry 1: index timestamp {b[5][3] + 1} but the batch ending at "
        f"offset {b[5][2]} has largest timestamp {b[5][3]}"
    ]
    put_time_index(log, 100, [(b[5][3], b[5][2]), (b[2][3], b[2][2])])
    got = messages(log)
    assert (
        f"time-index: {path}: entry 1: timestamp {b[2][3]} is not greater than the previous "
        f"entry's {b[5][3]}" in got
    )
    assert (
        f"time-index: {path}: entry 1: offset {b[2][2]} is less than the previous entry's {b[5][2]}"
        in got
    )
    put_time_index(log, 100, [(b[2][3], b[2][2] - 1), (99_999, 900)])
    assert messages(log) == [
        f"time-index: {path}: entry 0: indexed offset {b[2][2] - 1} is not the last offset of "
        "any batch",
        f"time-index: {path}: entry 1: indexed offset 900 is beyond the end of the log",
    ]
    path.write_bytes(path.read_bytes() + b"\x01\x02")
    assert (
        f"time-index: {path}: size 26 is not a multiple of 12 (2 trailing bytes: a torn last entry)"
        in messages(log)
    )


def test_invalid_log_tail_is_reported_and_rebuild_indexes_up_to_it(seg) -> None:  # type: ignore[no-untyped-def]
    log, _ = seg
    good = log.stat().st_size
    before = {p.name: p.read_bytes() for p in log.parent.iterdir()}
    with open(log, "ab") as f:
        f.write(b"\x00" * 10 + b"\xff" * 30)
    problems = verify_segment(log).problems
    assert [(p.kind, p.message) for p in problems] == [
        ("log", f"invalid data at position {good}: invalid magic byte 255")
    ]
    plan = plan_rebuild(log, index_interval_bytes=200)
    assert (plan.valid_bytes, plan.invalid_bytes) == (good, 40)
    assert plan.invalid_reason == "invalid magic byte 255"
    assert plan.changed == []  # the valid prefix is indexed exactly as before
    assert apply_rebuild(plan) == []
    assert {p.name: p.read_bytes() for p in log.parent.iterdir() if p != log} == {
        k: v for k, v in before.items() if k != log.name
    }


def test_rebuild_repairs_every_damage(seg) -> None:  # type: ignore[no-untyped-def]
    log, b = seg
    index, timeindex = log.with_suffix(".index"), log.with_suffix(".timeindex")
    good = index.read_bytes(), timeindex.read_bytes()
    put_offset_index(log, 100, [(b[3][2], b[3][0] + 5), (b[1][2], 7)])
    put_time_index(log, 100, [(5, 900)])
    plan = plan_rebuild(log, index_interval_bytes=200)
    assert plan.changed == [index.name, timeindex.name]
    apply_rebuild(plan)
    assert (index.read_bytes(), timeindex.read_bytes()) == good
    assert verify_segment(log).ok


def test_rebuilt_entries_follow_the_interval_rule(tmp_path: Path) -> None:
    log, b = write_segment(tmp_path / "t-0", n=12)
    size = b[0][1]
    assert all(x[1] == size for x in b)
    plan = plan_rebuild(log, index_interval_bytes=2 * size)
    # More than 2*size since the last entry before batches 3, 6, 9.
    assert plan.offset_entries == [OffsetPosition(b[i][2], b[i][0]) for i in (3, 6, 9)]
    assert plan.time_entries == [
        *(TimestampOffset(b[i][3], b[i][2]) for i in (3, 6, 9)),
        TimestampOffset(b[11][3], b[11][2]),  # the sealed segment's largest timestamp
    ]


def test_find_segment_logs_paths(tmp_path: Path, fixtures_dir: Path) -> None:
    log, _ = write_segment(tmp_path / "any name at all", n=2)
    assert find_segment_logs([log.parent]) == [log]
    assert find_segment_logs([log.with_suffix(".timeindex"), log]) == [log]
    with pytest.raises(FileNotFoundError):
        find_segment_logs([tmp_path / "missing"])
    (tmp_path / "notes.txt").write_text("x")
    with pytest.raises(WrongFileKindError):
        find_segment_logs([tmp_path / "notes.txt"])
    with pytest.raises(WrongFileKindError):
        find_segment_logs([fixtures_dir / "test-0" / "00000000000000000109.snapshot"])
    lone = tmp_path / "lone"
    lone.mkdir()
    (lone / "00000000000000000005.index").write_bytes(b"")
    with pytest.raises(WrongFileKindError, match="no log file"):
        find_segment_logs([lone / "00000000000000000005.index"])


# --- transaction index ---------------------------------------------------------------------------

P1, P2 = 1001, 2002


def txn_data(pid: int, offset: int, n: int = 1, seq: int = 0) -> bytes:
    return build_batch(
        [RecordSpec(b"k", b"txn", timestamp=offset) for _ in range(n)],
        base_offset=offset,
        producer_id=pid,
        producer_epoch=0,
        base_sequence=seq,
        is_transactional=True,
    )


def marker(pid: int, offset: int, *, commit: bool) -> bytes:
    return build_end_txn_marker(
        commit=commit,
        producer_id=pid,
        producer_epoch=0,
        coordinator_epoch=3,
        base_offset=offset,
        timestamp=offset,
    )


def interleaved() -> list[bytes]:
    return [
        txn_data(P1, 0, 2),  # P1 opens at 0
        txn_data(P2, 2),  # P2 opens at 2
        build_batch([RecordSpec(b"plain", b"x", timestamp=3)], base_offset=3),
        txn_data(P1, 4, seq=2),
        marker(P1, 5, commit=False),  # P1 aborts [0, 5]; P2 still open at 2
        marker(P2, 6, commit=True),
        txn_data(P2, 7, seq=1),  # P2 opens at 7
        txn_data(P1, 8, 2, seq=3),  # P1 opens at 8
        marker(P2, 10, commit=False),  # P2 aborts [7, 10]; P1 open at 8
        marker(P1, 11, commit=False),  # P1 aborts [8, 11]; nothing open
        marker(P2, 12, commit=False),  # an abort with no data: [12, 12]
    ]


EXPECTED_ABORTS = [
    AbortedTxn(P1, 0, 5, 2),
    AbortedTxn(P2, 7, 10, 8),
    AbortedTxn(P1, 8, 11, 12),
    AbortedTxn(P2, 12, 12, 13),
]


def test_txn_index_rebuilt_from_markers(tmp_path: Path) -> None:
    d = tmp_path / "txn-0"
    d.mkdir()
    log = d / segment_file_name(0, ".log")
    log.write_bytes(b"".join(interleaved()))
    plan = plan_rebuild(log)
    assert plan.txn_entries == EXPECTED_ABORTS
    txn = log.with_suffix(".txnindex")
    assert txn.name in plan.changed
    apply_rebuild(plan)
    assert read_txn_index(txn) == EXPECTED_ABORTS
    assert txn.stat().st_size == 4 * 34
    check = verify_segment(log)
    assert check.ok and check.txn_entries == 4


def test_txn_index_across_segments_uses_prior_segments(tmp_path: Path) -> None:
    """A transaction open when a segment starts takes its first offset from an
    earlier segment."""
    d = tmp_path / "txn-0"
    d.mkdir()
    batches = interleaved()
    first = d / segment_file_name(0, ".log")
    first.write_bytes(b"".join(batches[:8]))  # offsets 0..9: P1 and P2 open at the end
    second = d / segment_file_name(10, ".log")
    second.write_bytes(b"".join(batches[8:]))
    assert plan_rebuild(first).txn_entries == EXPECTED_ABORTS[:1]
    alone = plan_rebuild(second)
    assert alone.txn_entries == [
        AbortedTxn(P2, 10, 10, 11),
        AbortedTxn(P1, 11, 11, 12),
        AbortedTxn(P2, 12, 12, 13),
    ]
    assert plan_rebuild(second, prior_segments=[first]).txn_entries == EXPECTED_ABORTS[1:]


def test_txn_index_problems_reported(tmp_path: Path) -> None:
    d = tmp_path / "txn-0"
    d.mkdir()
    log = d / segment_file_name(0, ".log")
    log.write_bytes(b"".join(interleaved()))
    txn = log.with_suffix(".txnindex")
    txn.write_bytes(AbortedTxn(P1, 8, 11, 12).encode() + AbortedTxn(P2, 7, 10, 8).encode())
    assert messages(log) == [
        f"txn-index: {txn}: entry 1: last offset 10 is not greater than the previous entry's 11"
    ]
    txn.write_bytes(AbortedTxn(P1, 0, 5, 2).encode()[:20])
    assert "trailing bytes" in messages(log)[0]
    apply_rebuild(plan_rebuild(log))
    assert read_txn_index(txn) == EXPECTED_ABORTS
