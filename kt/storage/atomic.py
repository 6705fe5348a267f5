"""Crash-safe file replacement, the way Kafka's ``Utils.atomicMoveWithFallback`` does it.

A reader of the target path sees either the complete old bytes or the complete new
bytes, never a mix: the new content is written to a temporary file in the same
directory (so the rename cannot cross file systems), fsync'd, renamed over the
target, and the directory is fsync'd so the rename itself survives a power cut.
"""

from __future__ import annotations

import contextlib
import os
import stat
import tempfile
from datetime import UTC, datetime
from pathlib import Path

# Temporary files carry this marker so a forensic tool (or a human) can tell a
# leftover of an interrupted kt write from data. Kafka's own temp files end in
# ".tmp" as well (CheckpointFile, PropertiesUtils).
TEMP_SUFFIX = ".kt-tmp"

BACKUP_INFIX = ".bak-"
_DEFAULT_NEW_FILE_MODE = 0o644


def fsync_dir(directory: str | os.PathLike[str]) -> None:
    """fsync a directory so that a rename or create inside it is durable."""
    fd = os.open(directory, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _target_mode(path: Path) -> int:
    # Keep the permissions of the file being replaced; mkstemp's 0600 would
    # otherwise silently make a broker-readable file private to us.
    try:
        return stat.S_IMODE(os.stat(path).st_mode)
    except FileNotFoundError:
        umask = os.umask(0)
        os.umask(umask)
        return _DEFAULT_NEW_FILE_MODE & ~umask


def atomic_write(path: str | os.PathLike[str], data: bytes) -> None:
    """Replace ``path`` with ``data`` atomically and durably.

    On any failure the temporary file is removed, the original file is left
    untouched and the exception propagates.
    """
    target = Path(path)
    directory = target.parent if str(target.parent) else Path(".")
    mode = _target_mode(target)
    fd, tmp_name = tempfile.mkstemp(prefix=f".{target.name}.", suffix=TEMP_SUFFIX, dir=directory)
    tmp = Path(tmp_name)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fchmod(fh.fileno(), mode)
            os.fsync(fh.fileno())
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise
    fsync_dir(directory)


def backup_name(path: str | os.PathLike[str], now: datetime | None = None) -> Path:
    """The timestamped backup path for ``path``, e.g. ``x.bak-20261122T101500Z``.

    A numeric suffix is added when a backup of the same second already exists, so
    two edits in quick succession never overwrite the older backup.
    """
    target = Path(path)
    stamp = (now or datetime.now(UTC)).astimezone(UTC).strftime("%Y%m%dT%H%M%SZ")
    candidate = target.with_name(f"{target.name}{BACKUP_INFIX}{stamp}")
    n = 1
    while candidate.exists():
        candidate = target.with_name(f"{target.name}{BACKUP_INFIX}{stamp}-{n}")
        n += 1
    return candidate


def backup_copy(path: str | os.PathLike[str], now: datetime | None = None) -> Path:
    """Copy ``path`` to a timestamped sibling (written atomically); return the copy's path."""
    source = Path(path)
    data = source.read_bytes()
    dest = backup_name(source, now)
    atomic_write(dest, data)
    # Match the original's permissions; atomic_write used the default for new files.
    os.chmod(dest, stat.S_IMODE(os.stat(source).st_mode))
    return dest
