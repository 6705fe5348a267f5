"""Test-only fault injection: file I/O under chosen directories fails with EIO.

Nothing here runs unless the environment variable ``KT_TEST_FAULT_EIO_FILE``
names a control file when the broker starts. Each non-blank line of that file is
a directory; while it is listed, ``os.pwrite``, ``os.write``, ``os.pread``,
``os.fsync``, ``os.fdatasync`` and ``os.ftruncate`` on a file descriptor whose
path lies under it raise ``OSError(EIO)``, as a failed disk would. The file is
re-read whenever its modification time changes, so a test can fail a directory
while the broker runs (root ignores file modes, so ``chmod`` cannot simulate a
failed disk).

The hooks resolve each descriptor through ``/proc/self/fd`` (Linux), which is slow
and why this is for tests only.
"""

from __future__ import annotations

import errno
import os
import threading
from collections.abc import Callable
from typing import Any

ENV_VAR = "KT_TEST_FAULT_EIO_FILE"

_HOOKED = ("pwrite", "write", "pread", "fsync", "fdatasync", "ftruncate")


class _EioDirs:
    """The directories currently failing, read from the control file."""

    def __init__(self, control: str) -> None:
        self.control = control
        self._lock = threading.Lock()
        self._mtime: int | None = None
        self._dirs: tuple[str, ...] = ()

    def dirs(self) -> tuple[str, ...]:
        try:
            mtime = os.stat(self.control).st_mtime_ns
        except OSError:
            return ()
        with self._lock:
            if mtime != self._mtime:
                try:
                    with open(self.control, encoding="utf-8") as fh:
                        lines = fh.read().splitlines()
                except OSError:
                    lines = []
                self._dirs = tuple(os.path.realpath(line.strip()) for line in lines if line.strip())
                self._mtime = mtime
            return self._dirs

    def failing(self, fd: int) -> str | None:
        dirs = self.dirs()
        if not dirs:
            return None
        try:
            path = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            return None
        for d in dirs:
            if path == d or path.startswith(d + os.sep):
                return path
        return None


_installed: _EioDirs | None = None


def install_from_env() -> bool:
    """Install the hooks when ``KT_TEST_FAULT_EIO_FILE`` is set; True if installed."""
    global _installed
    control = os.environ.get(ENV_VAR)
    if not control or _installed is not None:
        return _installed is not None
    state = _EioDirs(control)
    for name in _HOOKED:
        setattr(os, name, _wrap(getattr(os, name), name, state))
    _installed = state
    return True


def _wrap(real: Callable[..., Any], name: str, state: _EioDirs) -> Callable[..., Any]:
    def hooked(fd: int, *args: Any) -> Any:
        path = state.failing(fd)
        if path is not None:
            raise OSError(errno.EIO, f"injected I/O error ({name})", path)
        return real(fd, *args)

    hooked.__name__ = name
    hooked.__doc__ = f"os.{name}, failing with EIO under the directories of {ENV_VAR}."
    return hooked
