"""atomic_write and backup_copy: all-or-nothing replacement, no temp files left behind."""

from __future__ import annotations

import os
import stat
from datetime import UTC, datetime
from pathlib import Path

import pytest

from kt.storage import atomic
from kt.storage.atomic import atomic_write, backup_copy


def test_atomic_write_creates_and_replaces(tmp_path: Path) -> None:
    target = tmp_path / "f"
    atomic_write(target, b"one")
    assert target.read_bytes() == b"one"
    os.chmod(target, 0o640)
    atomic_write(target, b"two")
    assert target.read_bytes() == b"two"
    assert stat.S_IMODE(target.stat().st_mode) == 0o640  # permissions survive
    assert sorted(p.name for p in tmp_path.iterdir()) == ["f"]


@pytest.mark.parametrize("failing", ["fsync", "replace", "write"])
def test_atomic_write_failure_leaves_original_and_no_temp(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, failing: str
) -> None:
    target = tmp_path / "checkpoint"
    target.write_bytes(b"original")
    before = target.stat().st_mtime_ns

    def boom(*args: object, **kwargs: object) -> None:
        raise OSError(28, "No space left on device")

    if failing == "write":
        monkeypatch.setattr(atomic.os, "fchmod", boom)
    else:
        monkeypatch.setattr(atomic.os, failing, boom)
    with pytest.raises(OSError, match="No space"):
        atomic_write(target, b"new content")
    assert target.read_bytes() == b"original"
    assert target.stat().st_mtime_ns == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["checkpoint"]


def test_backup_copy_is_timestamped_and_unique(tmp_path: Path) -> None:
    target = tmp_path / "recovery-point-offset-checkpoint"
    target.write_bytes(b"0\n0\n")
    now = datetime(2026, 11, 22, 10, 15, 0, tzinfo=UTC)
    first = backup_copy(target, now=now)
    second = backup_copy(target, now=now)
    assert first.name == "recovery-point-offset-checkpoint.bak-20261122T101500Z"
    assert second.name == "recovery-point-offset-checkpoint.bak-20261122T101500Z-1"
    assert first.read_bytes() == second.read_bytes() == b"0\n0\n"
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(atomic.TEMP_SUFFIX)]
