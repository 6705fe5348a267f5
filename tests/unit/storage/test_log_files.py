"""Kafka file naming, path classification and the .lock directory lock."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from kt.storage.errors import LogDirLockedError, WrongFileKindError
from kt.storage.log_files import (
    LogDirLock,
    PartitionDirName,
    PathKind,
    SegmentFileName,
    classify_path,
    is_log_dir_locked,
    list_segments,
    offset_from_file_name,
    parse_partition_dir_name,
    parse_segment_file_name,
    segment_file_name,
)


def test_segment_file_names() -> None:
    assert segment_file_name(0, ".log") == "00000000000000000000.log"
    assert segment_file_name(147001, "timeindex") == "00000000000000147001.timeindex"
    assert segment_file_name(5, ".index", ".swap") == "00000000000000000005.index.swap"
    assert parse_segment_file_name("00000000000000147001.txnindex.deleted") == SegmentFileName(
        147001, "txnindex", ".deleted"
    )
    assert parse_segment_file_name("00000000000000000009.snapshot") == SegmentFileName(
        9, "snapshot", None
    )
    for bad in ("0000000000000000000.log", "00000000000000000000.logx", "x.log", ".lock"):
        assert parse_segment_file_name(bad) is None
    assert offset_from_file_name("/a/00000000000000000042.log.cleaned") == 42
    with pytest.raises(WrongFileKindError):
        offset_from_file_name("/a/leader-epoch-checkpoint")
    with pytest.raises(ValueError):
        segment_file_name(-1, ".log")


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("orders-0", PartitionDirName("orders", 0)),
        ("my-topic-12", PartitionDirName("my-topic", 12)),
        ("__consumer_offsets-49", PartitionDirName("__consumer_offsets", 49)),
        (
            "orders-3.0f1e2d3c4b5a69788796a5b4c3d2e1f0-delete",
            PartitionDirName("orders", 3, "delete", "0f1e2d3c4b5a69788796a5b4c3d2e1f0"),
        ),
        ("a.b-1.abcdef-future", PartitionDirName("a.b", 1, "future", "abcdef")),
        ("t-2.abc-stray", PartitionDirName("t", 2, "stray", "abc")),
        ("orders", None),
        ("orders-x", None),
        ("-1", None),
        ("orders-0-delete", None),  # no .<uuid>: Kafka's DeleteDirPattern does not match
        ("", None),
    ],
)
def test_partition_dir_names(name: str, expected: PartitionDirName | None) -> None:
    assert parse_partition_dir_name(name) == expected


def test_list_segments_and_classify(tmp_path: Path, fixtures_dir: Path) -> None:
    part = tmp_path / "orders-0"
    part.mkdir()
    for name in (
        "00000000000000000000.log",
        "00000000000000000000.index",
        "00000000000000000000.timeindex",
        "00000000000000000100.log",
        "00000000000000000100.index.swap",
        "00000000000000000100.snapshot",
        "00000000000000000050.index",  # orphan index
        "leader-epoch-checkpoint",
    ):
        (part / name).write_bytes(b"")
    segs = list_segments(part)
    assert [s.base_offset for s in segs] == [0, 50, 100]
    assert segs[0].log is not None and segs[0].timeindex is not None and segs[0].txnindex is None
    assert segs[1].log is None and segs[1].index is not None
    assert [p.name for p in segs[2].transient] == ["00000000000000000100.index.swap"]

    assert classify_path(tmp_path / "missing") is PathKind.MISSING
    assert classify_path(part) is PathKind.PARTITION_DIR
    assert classify_path(tmp_path) is PathKind.LOG_DIR
    assert classify_path(part / "00000000000000000000.log") is PathKind.SEGMENT_LOG
    assert classify_path(part / "00000000000000000100.index.swap") is PathKind.OFFSET_INDEX
    assert classify_path(part / "leader-epoch-checkpoint") is PathKind.LEADER_EPOCH_CHECKPOINT
    assert classify_path(fixtures_dir / "logdir-3.x") is PathKind.LOG_DIR
    assert (
        classify_path(fixtures_dir / "logdir-3.x" / "cleaner-offset-checkpoint")
        is PathKind.OFFSET_CHECKPOINT
    )
    assert (
        classify_path(fixtures_dir / "logdir-3.x" / "meta.properties") is PathKind.META_PROPERTIES
    )
    assert (
        classify_path(fixtures_dir / "test-0" / "partition.metadata") is PathKind.PARTITION_METADATA
    )
    assert classify_path(fixtures_dir / "README.md") is PathKind.OTHER


HOLD_KT_LOCK = """
import sys
from kt.storage.log_files import LogDirLock
with LogDirLock(sys.argv[1]):
    print("locked", flush=True)
    sys.stdin.read()
"""

# What a JVM does: FileChannel.tryLock is a POSIX record lock, not flock.
HOLD_POSIX_LOCK = """
import fcntl, os, sys
fd = os.open(os.path.join(sys.argv[1], ".lock"), os.O_RDWR | os.O_CREAT)
fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
print("locked", flush=True)
sys.stdin.read()
"""


def hold_lock(script: str, log_dir: Path) -> Iterator[subprocess.Popen[str]]:
    child = subprocess.Popen(
        [sys.executable, "-c", script, str(log_dir)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert child.stdout is not None
        assert child.stdout.readline().strip() == "locked"
        yield child
    finally:
        assert child.stdin is not None
        child.stdin.close()
        child.wait(timeout=10)


@pytest.mark.parametrize("script", [HOLD_KT_LOCK, HOLD_POSIX_LOCK], ids=["kt", "jvm-style"])
def test_lock_held_by_another_process(tmp_path: Path, script: str) -> None:
    for _ in hold_lock(script, tmp_path):
        assert is_log_dir_locked(tmp_path)
        with pytest.raises(LogDirLockedError, match="another process"), LogDirLock(tmp_path):
            pass
    assert not is_log_dir_locked(tmp_path)
    with LogDirLock(tmp_path) as lock:
        assert lock.held
        assert is_log_dir_locked(tmp_path)  # same process: known without probing
        with pytest.raises(LogDirLockedError):
            LogDirLock(tmp_path).acquire()
    assert not lock.held
    assert not is_log_dir_locked(tmp_path)


def test_probe_is_read_only(tmp_path: Path) -> None:
    assert not is_log_dir_locked(tmp_path)
    assert list(tmp_path.iterdir()) == []  # a missing .lock is not created
