"""kt.storage.log_dir_inspect: one log directory read offline, with a verdict.

Log directories are built with the storage core itself (PartitionLog, the
checkpoint and meta.properties writers); real Kafka directories are read from
copies of the fixtures. The command's rendering is tested in
tests/unit/tools/test_log_dirs_inspect.py.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pytest

from kt.storage.checkpoint import TopicPartition, write_offset_checkpoint
from kt.storage.log import PartitionLog
from kt.storage.log_config import LogConfig
from kt.storage.log_dir_inspect import Finding, inspect_log_dir
from kt.storage.log_files import (
    CLEAN_SHUTDOWN_FILE_NAME,
    LOG_START_OFFSET_CHECKPOINT_FILE,
    META_PROPERTIES_FILE_NAME,
    OFFSET_CHECKPOINT_FILES,
    RECOVERY_POINT_CHECKPOINT_FILE,
    REPLICATION_CHECKPOINT_FILE,
    segment_file_name,
)
from kt.storage.meta_properties import MetaProperties, write_meta_properties
from kt.storage.record_batch import RecordSpec, build_batch

SEG0 = segment_file_name(0, ".log")


def batches(first: int, count: int, per_batch: int = 4) -> bytes:
    """`count` batches of `per_batch` records starting at offset `first`."""
    out = b""
    for i in range(count):
        base = first + i * per_batch
        specs = [RecordSpec(b"k%d" % (base + j), b"v" * 100, timestamp=1_000 + base + j)
                 for j in range(per_batch)]  # fmt: skip
        out += build_batch(specs, base_offset=base, partition_leader_epoch=0)
    return out


def make_partition(log_dir: Path, name: str, *, segments: int = 1, batches_each: int = 3) -> int:
    """A partition of `segments` segments of `batches_each` 4-record batches; its LEO."""
    log = PartitionLog.open(log_dir / name, LogConfig())
    for s in range(segments):
        if s:
            log.roll()
        log.append_as_follower(batches(log.log_end_offset, batches_each))
    leo = log.log_end_offset
    log.close()
    return leo


@pytest.fixture
def log_dir(tmp_path: Path) -> Path:
    """A healthy kt-style log dir: meta.properties, checkpoints, a clean-shutdown
    marker and two partitions (orders-0 with two segments, orders-1 with one)."""
    d = tmp_path / "data"
    d.mkdir()
    write_meta_properties(
        d / META_PROPERTIES_FILE_NAME, MetaProperties(1, node_id=3, cluster_id="c1")
    )
    ends = {
        TopicPartition("orders", 0): make_partition(d, "orders-0", segments=2),
        TopicPartition("orders", 1): make_partition(d, "orders-1"),
    }
    for name in (RECOVERY_POINT_CHECKPOINT_FILE, REPLICATION_CHECKPOINT_FILE):
        write_offset_checkpoint(d / name, ends)
    write_offset_checkpoint(d / LOG_START_OFFSET_CHECKPOINT_FILE, dict.fromkeys(ends, 0))
    (d / CLEAN_SHUTDOWN_FILE_NAME).write_bytes(b"")
    return d


def snapshot(d: Path) -> dict[str, tuple[int, int]]:
    return {
        str(p.relative_to(d)): (p.stat().st_size, p.stat().st_mtime_ns)
        for p in sorted(d.rglob("*"))
    }


def test_healthy_dir(log_dir: Path) -> None:
    before = snapshot(log_dir)
    rep = inspect_log_dir(log_dir)
    assert snapshot(log_dir) == before  # nothing written
    assert rep.healthy and rep.all_problems() == [] and rep.all_warnings() == []
    assert rep.meta is not None and rep.meta.node_id == 3 and rep.meta.cluster_id == "c1"
    assert rep.clean_shutdown and not rep.locked
    assert list(rep.checkpoints) == list(OFFSET_CHECKPOINT_FILES)
    assert rep.checkpoints[RECOVERY_POINT_CHECKPOINT_FILE].present
    assert len(rep.checkpoints[RECOVERY_POINT_CHECKPOINT_FILE].entries) == 2
    assert [p.name for p in rep.partitions] == ["orders-0", "orders-1"]
    p0 = rep.partitions[0]
    assert (p0.topic, p0.partition) == ("orders", 0)
    assert [s.base_offset for s in p0.segments] == [0, 12]
    first = p0.segments[0]
    assert (first.batches, first.first_offset, first.last_offset, first.next_offset) == (
        3, 0, 11, 12,
    )  # fmt: skip
    assert first.size == os.path.getsize(log_dir / "orders-0" / SEG0)
    assert first.index_bytes is not None and first.invalid_reason is None
    assert (p0.log_start_offset, p0.log_end_offset) == (0, 24)
    assert p0.checkpoints[RECOVERY_POINT_CHECKPOINT_FILE] == 24
    assert p0.leader_epochs == 1


def test_missing_meta_is_a_warning(log_dir: Path) -> None:
    (log_dir / META_PROPERTIES_FILE_NAME).unlink()
    rep = inspect_log_dir(log_dir)
    assert rep.healthy and rep.meta is None and rep.meta_error is None
    assert [f.message for f in rep.warnings] == ["missing (a broker writes it on first start)"]


def test_checkpoint_beyond_log_end(log_dir: Path) -> None:
    ckpt = log_dir / LOG_START_OFFSET_CHECKPOINT_FILE
    write_offset_checkpoint(ckpt, {TopicPartition("orders", 1): 99})
    rep = inspect_log_dir(log_dir)
    assert not rep.healthy
    p0, p1 = rep.partitions
    assert p0.healthy and not p1.healthy
    assert p1.problems == [
        Finding(
            str(ckpt),
            "log start offset of orders-1 is 99, beyond the log end offset 12; a broker "
            "would delete every segment and restart the log empty at the checkpoint",
        )
    ]
    # The checkpointed start still counts as the log's start.
    assert p1.log_start_offset == 99


def test_torn_tail(log_dir: Path) -> None:
    seg = log_dir / "orders-1" / SEG0
    size = seg.stat().st_size
    os.truncate(seg, size - 7)
    rep = inspect_log_dir(log_dir)
    p1 = rep.partitions[1]
    s = p1.segments[0]
    assert s.batches == 2 and s.next_offset == 8 and s.invalid_reason is not None
    assert s.invalid_position is not None and s.invalid_bytes == size - 7 - s.invalid_position
    messages = [f.message for f in p1.problems]
    assert messages[0].startswith("invalid log tail: ")
    assert messages[0].endswith("(recovery truncates it)")
    # Both checkpoints now point beyond the shortened log.
    assert "recovery point of orders-1 is 12, beyond the log end offset 8" in messages
    assert "high watermark of orders-1 is 12, beyond the log end offset 8" in messages


def test_overlapping_segments(log_dir: Path) -> None:
    part = log_dir / "orders-0"
    second = part / segment_file_name(12, ".log")
    overlap = part / segment_file_name(10, ".log")
    second.rename(overlap)
    for suffix in (".index", ".timeindex"):
        (part / segment_file_name(12, suffix)).unlink()
    rep = inspect_log_dir(log_dir)
    p0 = rep.partitions[0]
    assert [f.message for f in p0.problems if f.path == str(overlap)] == [
        "base offset 10 overlaps the previous segment, which ends at offset 11"
    ]


def test_leftovers_and_strays(log_dir: Path) -> None:
    part = log_dir / "orders-0"
    (part / (SEG0 + ".swap")).write_bytes(b"")
    (part / (segment_file_name(0, ".index") + ".deleted")).write_bytes(b"")
    (part / "notes.txt").write_text("hi")
    (log_dir / "gone-0.0123456789abcdef0123456789abcdef-delete").mkdir()
    (log_dir / "moving-0.0123456789abcdef0123456789abcdef-future").mkdir()
    (log_dir / "random-dir").mkdir()
    (log_dir / "x.tmp").write_text("")
    (log_dir / "README").write_text("")
    rep = inspect_log_dir(log_dir)
    p0 = rep.partitions[0]
    assert p0.leftovers == [segment_file_name(0, ".index") + ".deleted", SEG0 + ".swap"]
    assert p0.stray_files == ["notes.txt"]
    assert [f.path for f in p0.problems] == [str(part / (SEG0 + ".swap"))]
    assert rep.leftover_dirs == [
        "gone-0.0123456789abcdef0123456789abcdef-delete",
        "moving-0.0123456789abcdef0123456789abcdef-future",
    ]
    assert rep.stray_files == ["README", "random-dir/", "x.tmp"]
    by_path = {f.path: f.message for f in rep.warnings}
    assert by_path[str(log_dir / "x.tmp")] == "temporary file of an interrupted write"
    assert by_path[str(log_dir / "README")] == "unexpected file"
    assert "unfinished intra-broker move" in by_path[
        str(log_dir / "moving-0.0123456789abcdef0123456789abcdef-future")
    ]  # fmt: skip
    assert not rep.healthy  # the .swap file
    assert rep.all_problems() == p0.problems


def test_checkpoint_entries_without_partitions(log_dir: Path) -> None:
    ckpt = log_dir / REPLICATION_CHECKPOINT_FILE
    write_offset_checkpoint(ckpt, {TopicPartition("old", i): 1 for i in range(7)})
    rep = inspect_log_dir(log_dir)
    assert rep.healthy
    assert [str(f) for f in rep.warnings] == [
        f"{ckpt}: 7 entries for partitions not in this directory (old-0, old-1, old-2, "
        "old-3, old-4 and 2 more); a broker ignores them"
    ]


def test_corrupt_files_are_findings(log_dir: Path) -> None:
    (log_dir / RECOVERY_POINT_CHECKPOINT_FILE).write_text("0\n5\norders 0 1\n")
    (log_dir / "orders-1" / "partition.metadata").write_text("nonsense\n")
    rep = inspect_log_dir(log_dir)
    ckpt = rep.checkpoints[RECOVERY_POINT_CHECKPOINT_FILE]
    assert ckpt.present and ckpt.error is not None and ckpt.entries == {}
    assert rep.problems[0].message.startswith("corrupt checkpoint: ")
    assert rep.partitions[1].problems[0].message.startswith("corrupt: ")
    assert rep.partitions[0].checkpoints[RECOVERY_POINT_CHECKPOINT_FILE] is None


def test_empty_partition_is_a_warning(log_dir: Path) -> None:
    (log_dir / "empty-0").mkdir()
    rep = inspect_log_dir(log_dir)
    empty = next(p for p in rep.partitions if p.name == "empty-0")
    assert empty.healthy and empty.segments == []
    assert [f.message for f in empty.warnings] == ["no segments (a broker starts it empty)"]


def test_verify_indexes(log_dir: Path) -> None:
    index = log_dir / "orders-0" / segment_file_name(0, ".index")
    assert inspect_log_dir(log_dir, verify_indexes=True).healthy
    index.write_bytes(b"\x00" * 5)  # not a whole entry
    assert inspect_log_dir(log_dir).healthy  # opt-in
    rep = inspect_log_dir(log_dir, verify_indexes=True)
    assert any(f.path == str(index) for f in rep.partitions[0].problems)


def test_real_kafka_010_legacy_dir(fixture_copy: Callable[[str], Path]) -> None:
    d = fixture_copy("logdir-0.10")
    for p in [d, *d.rglob("*")]:
        p.chmod(0o755 if p.is_dir() else 0o644)
    rep = inspect_log_dir(d, verify_indexes=True)
    assert rep.healthy, rep.all_problems()
    foo = next(p for p in rep.partitions if p.name == "foo-0")
    # Legacy wrappers carry their last inner offset: the first offset is read inside.
    assert foo.segments[0].first_offset == 0 and foo.log_end_offset == 204
