"""Reading the local cluster's process logs for `kt cluster logs`: the last lines
of a file, and following several files at once as they grow (as `tail -f` does,
polling, so it works on any filesystem and across a process's restarts, which
append to the same file)."""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

#: how often --follow looks for new lines
POLL_INTERVAL = 0.2
#: the marker `kt cluster` writes into a process's log (kt.tools.local_cluster.log_marker)
MARKER = "--- kt cluster: "
#: how much of a log's end `ended_on_its_own` reads
_TAIL_BYTES = 64 * 1024


@dataclass(frozen=True)
class LogSource:
    """One process's log: the name lines are prefixed with, and its file."""

    name: str
    path: Path


def tail_lines(path: Path, count: int | None) -> tuple[list[str], int]:
    """The last `count` complete lines of the file (all when None) and the offset
    after them, where following continues; ([], 0) when the file does not exist.
    A last line without its newline yet is left for following to print whole."""
    try:
        with open(path, "rb") as f:
            data = f.read()
    except FileNotFoundError:
        return [], 0
    end = data.rfind(b"\n") + 1
    lines = data[:end].decode(errors="replace").splitlines()
    if count is not None:
        lines = list(deque(lines, maxlen=count)) if count else []
    return lines, end


def follow_logs(
    sources: Sequence[LogSource],
    offsets: Mapping[Path, int],
    emit: Callable[[LogSource, str], None],
    *,
    until: Callable[[], bool] = lambda: False,
) -> None:
    """Print every complete line appended to the sources after `offsets`, as it
    comes, until `until()` is true (or KeyboardInterrupt). A file that shrank
    (truncated or replaced) is read again from its start; one that does not exist
    yet is waited for."""
    pos = {s.path: offsets.get(s.path, 0) for s in sources}
    while not until():
        for s in sources:
            try:
                size = s.path.stat().st_size
            except FileNotFoundError:
                continue
            if size < pos[s.path]:
                pos[s.path] = 0
            if size == pos[s.path]:
                continue
            with open(s.path, "rb") as f:
                f.seek(pos[s.path])
                data = f.read(size - pos[s.path])
            end = data.rfind(b"\n") + 1
            for line in data[:end].decode(errors="replace").splitlines():
                emit(s, line)
            pos[s.path] += end
        time.sleep(POLL_INTERVAL)


def ended_on_its_own(path: Path) -> str | None:
    """For a process that is not running: its log's last line when the process ended
    without `kt cluster` stopping or killing it (the last marker in its log is a
    start, and the lines after it are the process's own), else None. The line is
    where a reader would look first for why (an error, a traceback's last line)."""
    try:
        with open(path, "rb") as f:
            f.seek(max(0, f.seek(0, 2) - _TAIL_BYTES))
            lines = f.read().decode(errors="replace").splitlines()
    except OSError:
        return None
    marks = [line for line in lines if MARKER in line]
    if not marks or MARKER + "starting " not in marks[-1]:
        return None
    last = next((line.strip() for line in reversed(lines) if line.strip()), "")
    return last if MARKER not in last else "(nothing after its start)"
