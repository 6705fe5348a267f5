"""LogManager with several log directories: validation, identity, loading threads,
placement and directory failure (without a running broker)."""

from __future__ import annotations

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
