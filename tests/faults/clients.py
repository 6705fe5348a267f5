"""Client threads of the campaign's workloads: each runs one client loop, recording
into the history; a crash is kept as a harness error (not an anomaly)."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from .history import History

ClientLoop = Callable[[str, float], None]


@dataclass
class ClientThreads:
    """The threads of one workload, stopped together."""

    history: History
    bootstrap: str
    stop: threading.Event = field(default_factory=threading.Event)
    threads: list[threading.Thread] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)

    def run_loops(self, loops: Iterable[tuple[str, ClientLoop]], rate: float) -> None:
        """Start one daemon thread per (process name, loop)."""
        for name, fn in loops:
            t = threading.Thread(target=self._guard, args=(name, fn, rate), daemon=True)
            t.start()
            self.threads.append(t)

    def _guard(self, name: str, fn: ClientLoop, rate: float) -> None:
        try:
            fn(name, rate)
        except Exception as exc:  # a client crash is a harness problem, not an anomaly
            self.errors.append(f"{name}: {type(exc).__name__}: {exc}")

    def join_all(self, timeout: float) -> None:
        """Tell the loops to stop and wait for each (up to `timeout` apiece)."""
        self.stop.set()
        for t in self.threads:
            t.join(timeout)
