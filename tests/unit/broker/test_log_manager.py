"""LogManager with several log directories: validation, identity, loading threads,
placement and directory failure (without a running broker)."""

from __future__ import annotations

import re
import threading
from pathlib import Path

import pytest

from kt.broker.log_manager import LogManager
from kt.storage.checkpoint import TopicPartition
from kt.storage.errors import StorageError
from kt.storage.log import PartitionLog
from kt.storage.log_config import LogConfig
from kt.storage.meta_properties import read_meta_properties

TID = bytes(range(16))


class Halted(Exception):
    pass


def halt(message: str) -> None:
    raise Halted(message)


def manager(dirs: list[Path]) -> LogManager:
    return LogManager(dirs, 1, LogConfig(), halt=halt)


def opened(dirs: list[Path], threads: int = 2) -> LogManager:
    lm = manager(dirs)
    lm.lock_and_validate(None)
    lm.load_logs({}, threads)
    return lm


def test_duplicate_and_nested_dirs_are_refused(tmp_path: Path) -> None:
    with pytest.raises(StorageError, match="duplicate log directory"):
        manager([tmp_path / "a", tmp_path / "b" / ".." / "a"])
    with pytest.raises(StorageError, match="is inside log directory"):
        manager([tmp_path / "a", tmp_path / "a" / "inner"])


def test_identity_per_dir(tmp_path: Path) -> None:
    dirs = [tmp_path / n for n in "abc"]
    lm = opened(dirs)
    metas = [read_meta_properties(d / "meta.properties") for d in dirs]
    assert {m.cluster_id for m in metas} == {lm.cluster_id}
    assert {m.node_id for m in metas} == {1} and {m.version for m in metas} == {1}
    assert len({m.directory_id for m in metas}) == 3
    assert lm.directory_ids == {d: m.directory_id for d, m in zip(dirs, metas, strict=True)}
    lm.shutdown()
    # A restart keeps the ids.
    again = opened(dirs)
    assert again.directory_ids == lm.directory_ids
    again.shutdown()


def test_mismatched_identity_is_fatal(tmp_path: Path) -> None:
    dirs = [tmp_path / "a", tmp_path / "b"]
    opened(dirs).shutdown()
    other = LogManager(dirs, 2, LogConfig(), halt=halt)
    with pytest.raises(StorageError, match="node id 1 but this broker is node 2"):
        other.lock_and_validate(None)
    # The locks were given back.
    opened(dirs).shutdown()


def test_corrupt_meta_takes_that_dir_offline(tmp_path: Path) -> None:
    dirs = [tmp_path / "a", tmp_path / "b", tmp_path / "c"]
    opened(dirs).shutdown()
    (dirs[1] / "meta.properties").write_text("version=9\n")
    lm = opened(dirs)
    assert list(lm.offline_dirs) == [dirs[1]]
    assert "cannot read meta.properties" in lm.offline_dirs[dirs[1]]
    assert lm.live_dirs == [dirs[0], dirs[2]]
    lm.shutdown()
    # The first directory holds the metadata: the broker cannot run without it.
    (dirs[0] / "meta.properties").write_text("version=9\n")
    with pytest.raises(StorageError, match="metadata log dir"):
        opened(dirs)
    (dirs[2] / "meta.properties").write_text("version=9\n")
    with pytest.raises(StorageError, match="none of the log dirs"):
        opened(dirs)


def test_loading_uses_threads_per_dir_and_consumes_the_marker(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    dirs = [tmp_path / "a", tmp_path / "b"]
    lm = opened(dirs)
    for p in range(6):
        lm.create(TopicPartition("t", p), TID, {})
    lm.shutdown()
    assert all((d / ".kafka_cleanshutdown").exists() for d in dirs)
    seen: dict[str, Path] = {}
    real_open = PartitionLog.open

    def spy(directory, *args, **kwargs):  # type: ignore[no-untyped-def]
        # The marker is gone before any log loads (a crash now is unclean).
        assert not (Path(directory).parent / ".kafka_cleanshutdown").exists()
        assert kwargs["had_clean_shutdown"] is True
        seen[threading.current_thread().name] = Path(directory).parent
        return real_open(directory, *args, **kwargs)

    monkeypatch.setattr(PartitionLog, "open", spy)
    again = opened(dirs, threads=3)
    assert set(seen.values()) == set(dirs)
    for name, d in seen.items():
        assert name.startswith(f"log-recovery-{d}")
    assert len(again.logs) == 6
    assert again.had_clean_shutdown == {dirs[0]: True, dirs[1]: True}
    again.shutdown()


def test_placement_and_dir_failure(tmp_path: Path) -> None:
    dirs = [tmp_path / n for n in "abc"]
    lm = opened(dirs)
    for p in range(6):
        lm.create(TopicPartition("t", p), TID, {})
    assert [lm.dir_of[TopicPartition("t", p)] for p in range(6)] == dirs + dirs
    lm.checkpoint_recovery_points()
    gone = lm.handle_dir_failure(dirs[1], OSError(5, "Input/output error"))
    assert gone == [TopicPartition("t", 1), TopicPartition("t", 4)]
    assert set(lm.offline_logs) == set(gone) and not set(lm.logs) & set(gone)
    assert [path.parent for path, _ in lm.recovery_point_plan()] == [dirs[0], dirs[2]]
    # New partitions avoid the offline directory.
    lm.create(TopicPartition("u", 0), TID, {})
    assert lm.dir_of[TopicPartition("u", 0)] in (dirs[0], dirs[2])
    assert lm.handle_dir_failure(dirs[1], "again") == []  # once only
    with pytest.raises(Halted, match=r"the metadata log dir .* has failed"):
        lm.handle_dir_failure(dirs[0], "disk gone")


def test_last_dir_failing_halts(tmp_path: Path) -> None:
    dirs = [tmp_path / "a", tmp_path / "b"]
    lm = opened(dirs)
    lm.handle_dir_failure(dirs[1], "gone")
    with pytest.raises(Halted, match=r"all log dirs in .* have failed"):
        lm.handle_dir_failure(dirs[0], "gone")


def test_checkpoint_write_failure_is_reported_once(tmp_path: Path) -> None:
    dirs = [tmp_path / "a", tmp_path / "b"]
    lm = opened(dirs)
    lm.create(TopicPartition("t", 0), TID, {})
    lm.create(TopicPartition("t", 1), TID, {})
    reported: list[tuple[Path, BaseException]] = []
    lm.failure_listener = lambda d, exc: reported.append((d, exc))
    # A directory where the checkpoint file should be: the rename fails.
    (dirs[1] / "replication-offset-checkpoint").mkdir()
    lm.checkpoint_high_watermarks()
    lm.checkpoint_high_watermarks()
    assert [d for d, _ in reported] == [dirs[1]]
    assert isinstance(reported[0][1], OSError)
    assert (dirs[0] / "replication-offset-checkpoint").is_file()


def test_shutdown_skips_offline_dirs(tmp_path: Path) -> None:
    dirs = [tmp_path / "a", tmp_path / "b"]
    lm = opened(dirs)
    lm.create(TopicPartition("t", 0), TID, {})
    lm.create(TopicPartition("t", 1), TID, {})
    lm.handle_dir_failure(dirs[1], "gone")
    lm.shutdown()
    assert (dirs[0] / ".kafka_cleanshutdown").exists()
    assert not (dirs[1] / ".kafka_cleanshutdown").exists()
    assert not (dirs[1] / "recovery-point-offset-checkpoint").exists()


def test_recovery_after_a_crash_is_logged(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """Issue 9 #8: after kill -9 the restarted broker says which logs it recovered,
    from where, how many bytes it re-validated and truncated, and how long it took."""
    import logging

    from kt.broker.log_manager import _close_quietly
    from kt.storage.log_files import segment_file_name
    from kt.storage.record_batch import RecordSpec, build_batch

    dirs = [tmp_path / "a"]
    lm = opened(dirs)
    crashed, clean = TopicPartition("t", 0), TopicPartition("t", 1)
    for tp in (crashed, clean):
        plog = lm.create(tp, TID, {})
        for i in range(3):
            plog.append_as_follower(build_batch([RecordSpec(b"k", b"v" * 50)], base_offset=i))
    lm.flush_all()
    lm.checkpoint_recovery_points()
    lm.logs[crashed].append_as_follower(build_batch([RecordSpec(b"k", b"v")], base_offset=3))
    # A kill -9: no flush, no checkpoints, no marker; and a torn write at the tail.
    for plog in lm.logs.values():
        _close_quietly(plog)
    lm.release_locks()
    seg = dirs[0] / "t-0" / segment_file_name(0, ".log")
    size = seg.stat().st_size
    with open(seg, "ab") as f:
        f.write(b"\x00\x00\x00\x00\x00\x00\x00\x04\x00\x00\x00\x30torn")
    with caplog.at_level(logging.INFO, logger="kt.broker.log_manager"):
        again = opened(dirs)
    lines = [r.getMessage() for r in caplog.records]
    assert any(
        line.startswith(f"{dirs[0]}: no clean-shutdown marker") and "2 partitions" in line
        for line in lines
    ), lines
    [one] = [line for line in lines if line.startswith(f"t-0 in {dirs[0]}: recovered")]
    assert "1 segment from recovery point 3 (first segment 0)" in one
    assert f"{size + 16} bytes re-validated, 16 bytes truncated, log end offset 4" in one
    assert re.search(r"in \d+\.\d{3}s$", one)
    # As Kafka, the segment holding the recovery point is re-read even when nothing
    # was appended after it.
    [other] = [line for line in lines if line.startswith(f"t-1 in {dirs[0]}: recovered")]
    assert "0 bytes truncated, log end offset 3" in other
    [total] = [line for line in lines if line.startswith("log recovery: ")]
    assert total.startswith("log recovery: 2 partitions recovered, ")
    assert "16 bytes truncated" in total
    assert again.logs[crashed].log_end_offset == 4
    again.shutdown()
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="kt.broker.log_manager"):
        opened(dirs).shutdown()
    assert not [r for r in caplog.records if "recover" in r.getMessage()]  # a clean restart
