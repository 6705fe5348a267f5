"""Starting real `kt broker` processes for tests: free ports, temp dirs, clean stops.

Tests talk to brokers the way users do: a separate process started with the
`kt` entry point, reached over loopback by real Kafka clients.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

KT = str(Path(sys.executable).with_name("kt"))


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def check_event_loop(log_text: str) -> None:
    """When KT_EVENT_LOOP names a loop (CI runs the broker tests on both), fail
    unless the broker's log says it runs on that one: a test set meant for uvloop
    must not pass on asyncio's loop unnoticed."""
    wanted = os.environ.get("KT_EVENT_LOOP", "").strip().lower()
    if wanted in ("asyncio", "uvloop") and f"event loop: {wanted}" not in log_text:
        raise RuntimeError(f"KT_EVENT_LOOP={wanted}, but the broker's log says otherwise")


@dataclass
class BrokerProcess:
    """A running `kt broker start` and how to reach it."""

    data_dir: Path
    port: int
    overrides: dict[str, str] = field(default_factory=dict)
    proc: subprocess.Popen[bytes] | None = None
    log_path: Path | None = None

    @property
    def bootstrap(self) -> str:
        """host:port for clients."""
        return f"127.0.0.1:{self.port}"

    def start(self, timeout: float = 20.0) -> BrokerProcess:
        """Start the broker and wait until it prints its ready line."""
        props = {
            "log.dirs": str(self.data_dir),
            "listeners": f"PLAINTEXT://127.0.0.1:{self.port}",
            "group.initial.rebalance.delay.ms": "0",
            **self.overrides,
        }
        args = [KT, "broker", "start"]
        for k, v in props.items():
            args += ["--override", f"{k}={v}"]
        self.log_path = self.data_dir.parent / f"broker-{self.port}.log"
        log = open(self.log_path, "ab")  # noqa: SIM115 - owned by the process
        self.proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=log)
        assert self.proc.stdout is not None
        deadline = time.monotonic() + timeout
        os.set_blocking(self.proc.stdout.fileno(), False)
        buf = b""
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"broker exited {self.proc.returncode}: {self.log()}")
            chunk = self.proc.stdout.read()
            if chunk:
                buf += chunk
                if b"kt broker ready" in buf:
                    try:
                        check_event_loop(self.log())
                    except RuntimeError:
                        self.kill()
                        raise
                    return self
            time.sleep(0.02)
        self.kill()
        raise RuntimeError(f"broker did not start in {timeout}s: {self.log()}")

    def log(self) -> str:
        """The broker's stderr so far."""
        return self.log_path.read_text(errors="replace") if self.log_path else ""

    def stop(self, timeout: float = 20.0) -> int:
        """SIGTERM and wait (a clean shutdown); returns the exit code."""
        if self.proc is None or self.proc.poll() is not None:
            return self.proc.returncode if self.proc else 0
        self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            raise RuntimeError(f"broker did not stop in {timeout}s: {self.log()}") from None

    def kill(self) -> None:
        """SIGKILL: no flush, no checkpoints, no clean-shutdown marker."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()

    def restart(self) -> BrokerProcess:
        """Stop cleanly and start again on the same port and data."""
        self.stop()
        return self.start()


class RawConnection:
    """One blocking connection speaking kt.protocol to a broker, for tests that need
    exact control over a request's fields (versions, session ids, epochs)."""

    def __init__(self, bootstrap: str) -> None:
        from kt.protocol import ClientConnection

        host, port = bootstrap.rsplit(":", 1)
        self.sock = socket.create_connection((host, int(port)), timeout=15)
        self.conn = ClientConnection()

    def call(self, api_key: int, version: int, body: dict[str, object]) -> Any:
        """Send one request and return the decoded response body."""
        _, data = self.conn.send_request(api_key, version, body)
        self.sock.sendall(data)
        for _ in range(10_000):
            chunk = self.sock.recv(1 << 20)
            assert chunk, "connection closed"
            responses = self.conn.receive_data(chunk)
            if responses:
                return responses[0].body
        raise AssertionError("no response")

    def close(self) -> None:
        """Close the socket."""
        self.sock.close()
