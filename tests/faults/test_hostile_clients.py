"""Hostile clients against a 3-broker cluster while the workload runs.

Three rounds of, against every broker at once:

- malformed frames (garbage bodies, negative and oversized size prefixes, a header
  cut short), requests with versions nobody serves (ApiVersions v99 gets Kafka's v0
  UNSUPPORTED_VERSION answer, Metadata v99 a closed connection);
- frames announced just under `socket.request.max.bytes` and never sent;
- a client opening thousands of connections (`max.connections.per.ip` is set, as an
  operator would: the excess is refused);
- slow readers: connections pipelining large fetches and never reading a byte.

The brokers must keep serving the others (the workload keeps being acknowledged,
and its history checks out) with bounded memory: each broker's RSS
(/proc/<pid>/status) is sampled before, during and after. The bounds: the peak stays
within PEAK_MB of the baseline (announced frames alone would have taken 50 x 64 MiB
per broker before receive buffers grew with the bytes received), and the third
round ends within LEAK_MB of the second: freed memory stays with the allocator
after the first rounds (RSS does not drop back), but a leak of the 64 KiB receive
buffer of each of the ~600 connections, or of the announced frames' buffers, grows
by more every round.
"""

from __future__ import annotations

import contextlib
import random
import socket
import struct
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from zk_harness import zookeeper_available

from kt.protocol import apis
from kt.protocol.headers import encode_request
from kt.tools.local_cluster import LocalCluster

from .campaign import (
    BROKER_PROPS,
    PARTITIONS,
    TOPIC,
    Workload,
    _brokers_run_this_kt,
    _create_topic,
    final_read,
)
from .checker import check, format_table
from .history import History

pytestmark = [pytest.mark.integration, pytest.mark.cluster]

PER_IP = 600
FLOOD = 1000  # connections the flooding client tries, per broker
ANNOUNCED = 50  # connections announcing a near-limit frame, per broker
SLOW_READERS = 10  # per broker, each pipelining FETCHES fetches
FETCHES = 20
PEAK_MB = 250
LEAK_MB = 25


def rss_mb(pid: int) -> float:
    """VmRSS of a process, in MiB."""
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    raise RuntimeError(f"no VmRSS for {pid}")


class Sampler:
    """Samples every broker's RSS in a thread; `peak` per broker since `reset`."""

    def __init__(self, pids: dict[int, int]) -> None:
        self.pids = pids
        self.peak = dict.fromkeys(pids, 0.0)
        self._stop = threading.Event()
        self._t = threading.Thread(target=self._run, daemon=True)
        self._t.start()

    def _run(self) -> None:
        while not self._stop.wait(0.1):
            for b, pid in self.pids.items():
                with contextlib.suppress(OSError, RuntimeError):
                    self.peak[b] = max(self.peak[b], rss_mb(pid))

    def close(self) -> None:
        self._stop.set()
        self._t.join(2)


def _connect(port: int) -> socket.socket | None:
    try:
        return socket.create_connection(("127.0.0.1", port), timeout=3)
    except OSError:
        return None


def _closed_by_peer(s: socket.socket) -> bool:
    s.settimeout(5)
    try:
        return s.recv(65536) == b""
    except (ConnectionResetError, BrokenPipeError):
        return True
    except TimeoutError:
        return False


def malformed(port: int, rng: random.Random) -> list[str]:
    """Bad frames of every kind; returns what the broker failed to close."""
    problems = []
    frames = {
        "garbage body": struct.pack(">i", 64) + rng.randbytes(64),
        "negative size": struct.pack(">i", -5) + b"x" * 8,
        "oversized size": struct.pack(">i", 2**31 - 1) + b"x" * 8,
        "short header": struct.pack(">i", 3) + b"\x00\x03\x00",
        "unknown api": struct.pack(">ihhi", 8, 999, 0, 1),
        "metadata v99": struct.pack(">ihhih", 10, apis.METADATA.key, 99, 7, -1),
    }
    for what, data in frames.items():
        s = _connect(port)
        if s is None:
            problems.append(f"{what}: cannot connect")
            continue
        with s:
            with contextlib.suppress(OSError):
                s.sendall(data)
            if not _closed_by_peer(s):
                problems.append(f"{what}: connection left open")
    # ApiVersions v99: Kafka answers in v0 with UNSUPPORTED_VERSION (35)
    s = _connect(port)
    if s is not None:
        with s:
            s.sendall(struct.pack(">ihhih", 10, apis.API_VERSIONS.key, 99, 8, -1))
            s.settimeout(5)
            head = s.recv(10)
            if len(head) < 10 or struct.unpack(">iih", head)[1:] != (8, 35):
                problems.append(f"ApiVersions v99: answered {head!r}")
    return problems


def announce_big(port: int, max_bytes: int) -> list[socket.socket]:
    """Connections that announce a frame just under the limit and send 1 KiB of it."""
    out = []
    for _ in range(ANNOUNCED):
        s = _connect(port)
        if s is not None:
            with contextlib.suppress(OSError):
                s.sendall(struct.pack(">i", max_bytes - 16) + b"\0" * 1024)
            out.append(s)
    return out


def flood(port: int) -> list[socket.socket]:
    """As many connections as the broker accepts, up to FLOOD; held open."""
    out = []
    for _ in range(FLOOD):
        s = _connect(port)
        if s is not None:
            out.append(s)
    return out


def slow_readers(port: int) -> list[socket.socket]:
    """Connections that never read, each pipelining large fetches of every partition."""
    out = []
    body = {
        "replica_id": -1, "max_wait_ms": 100, "min_bytes": 1, "max_bytes": 50 << 20,
        "isolation_level": 0,
        "topics": [{"topic": TOPIC, "partitions": [
            {"partition": p, "fetch_offset": 0, "partition_max_bytes": 10 << 20}
            for p in range(PARTITIONS)]}],
    }  # fmt: skip
    for _ in range(SLOW_READERS):
        s = _connect(port)
        if s is None:
            continue
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        with contextlib.suppress(OSError):
            for cid in range(FETCHES):
                s.sendall(encode_request(apis.FETCH.key, 4, cid, body, "slow-reader"))
        out.append(s)
    return out


@contextlib.contextmanager
def hostile_round(
    ports: list[int], max_bytes: int, rng: random.Random, problems: list[str]
) -> Iterator[dict[str, int]]:
    """Everything hostile at once against every broker; yields counts, closes all after."""
    held: list[socket.socket] = []
    counts = {"flood-accepted": 0, "slow": 0, "announced": 0}
    try:
        for port in ports:
            problems += [f"broker :{port}: {p}" for p in malformed(port, rng)]
            held += announce_big(port, max_bytes)
            counts["announced"] += ANNOUNCED
            slow = slow_readers(port)
            counts["slow"] += len(slow)
            held += slow
            flooded = flood(port)
            # accepted then closed by the broker over the limit: still open are ours
            time.sleep(0.5)
            alive = [s for s in flooded if not _peer_gone(s)]
            counts["flood-accepted"] += len(alive)
            held += flooded
        yield counts
    finally:
        for s in held:
            with contextlib.suppress(OSError):
                s.close()


def _peer_gone(s: socket.socket) -> bool:
    s.setblocking(False)
    try:
        return s.recv(1) == b""
    except BlockingIOError:
        return False
    except OSError:
        return True
    finally:
        s.setblocking(True)


def _acked(history: History) -> int:
    return sum(1 for e in history.events if e["f"] == "send" and e["type"] == "ok")


def _wait(cond: Callable[[], bool], timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while not cond() and time.monotonic() < deadline:
        time.sleep(0.2)
    return cond()


@pytest.mark.timeout(300)
@pytest.mark.skipif(not zookeeper_available(), reason="needs Debian's zookeeper and java")
def test_hostile_clients_do_not_stop_the_workload_or_grow_memory(tmp_path: Path) -> None:
    _brokers_run_this_kt()
    max_bytes = 64 << 20
    props = {**BROKER_PROPS, "max.connections.per.ip": str(PER_IP),
             "socket.request.max.bytes": str(max_bytes)}  # fmt: skip
    history = History(tmp_path / "history.jsonl")
    cluster = LocalCluster.create(tmp_path / "c", 3, overrides=props)
    rng = random.Random(12)
    workload: Workload | None = None
    sampler: Sampler | None = None
    problems: list[str] = []
    report: list[str] = []
    try:
        cluster.start(timeout=90)
        _create_topic(cluster.bootstrap_servers)
        workload = Workload(history, cluster.bootstrap_servers)
        workload.start()
        assert _wait(lambda: _acked(history) >= 200, 60), "the workload did not start"
        pids = {b.broker_id: b.pid for b in cluster.brokers}
        baseline = {b: rss_mb(pid) for b, pid in pids.items()}
        ports = [b.port for b in cluster.brokers]
        sampler = Sampler(pids)
        after: list[dict[int, float]] = []
        for n in (1, 2, 3):
            acked_before = _acked(history)
            with hostile_round(ports, max_bytes, rng, problems) as counts:
                # while everything hostile is held open, the workload goes on
                ok = _wait(lambda a=acked_before: _acked(history) >= a + 100, 40)
                report.append(
                    f"round {n}: {counts}, workload acked {_acked(history) - acked_before}"
                )
                assert ok, f"round {n}: acknowledgements stopped ({report[-1]})"
                assert all(b.running for b in cluster.brokers)
                # the per-address limit held (the workload's connections count too)
                assert 0 < counts["flood-accepted"] <= PER_IP * len(ports), report[-1]
            time.sleep(5)  # connections closed: buffers released
            after.append({b: rss_mb(pid) for b, pid in pids.items()})
            report.append(f"round {n}: RSS after {after[-1]}")
        peak = dict(sampler.peak)
        report.append(f"RSS MiB baseline {baseline}, peak {peak}")
        print("\n".join(report))
        workload.join()
        assert final_read(history, cluster.bootstrap_servers)
    finally:
        if sampler is not None:
            sampler.close()
        if workload is not None:
            workload.stop.set()
        cluster.stop(kill=True)
        history.close()
    assert not problems, problems
    for b in baseline:
        assert peak[b] - baseline[b] < PEAK_MB, report
        # the allocator keeps what the first rounds needed; a leak keeps growing
        assert after[2][b] - after[1][b] < LEAK_MB, report
    assert not workload.errors, workload.errors
    verdict = check(history.events)
    assert verdict.valid, format_table(verdict)
