"""A thread-safe history recorder: events in the order they happened, each written at
once as a JSON line so a crashed run still leaves its history behind."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path
from typing import Any, TextIO


class History:
    """Append-only list of events; `record` numbers and timestamps them."""

    def __init__(self, path: Path | None = None) -> None:
        self.events: list[dict[str, Any]] = []
        self._lock = threading.Lock()
        self._t0 = time.monotonic()
        self._out: TextIO | None = open(path, "w") if path else None  # noqa: SIM115

    def record(self, proc: str, f: str, type_: str, **fields: Any) -> dict[str, Any]:
        """Append one event; returns it (with its index `i` and time `t`)."""
        with self._lock:
            ev = {
                "i": len(self.events),
                "t": round(time.monotonic() - self._t0, 4),
                "proc": proc,
                "f": f,
                "type": type_,
                **fields,
            }
            self.events.append(ev)
            if self._out is not None:
                self._out.write(json.dumps(ev) + "\n")
                self._out.flush()
            return ev

    def close(self) -> None:
        """Close the JSON lines file."""
        with self._lock:
            if self._out is not None:
                self._out.close()
                self._out = None


def load(path: Path) -> list[dict[str, Any]]:
    """A history back from its JSON lines file."""
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
