"""A broker's log directory fails under load in a 3-broker cluster: it fills up (a
real small tmpfs, writes fail with ENOSPC) or returns I/O errors.

How each is made:

- `disk-full`: a 4 MiB tmpfs is mounted on broker 1's second log directory
  (`mount -t tmpfs`: the test runs as root in a container that allows it; where it
  cannot mount, the test fails with the mount's own error rather than skipping).
  A filler file then takes all the space left, so the broker's next append that
  needs a new page gets ENOSPC from the kernel: nothing is simulated.
- `eio`: this container has no device-mapper (no /dev/mapper/control, so no
  `error` target), so I/O errors are *simulated* by kt's documented test-only hook
  (`kt.broker.faults`: with KT_TEST_FAULT_EIO_FILE set at start, writes, reads and
  fsyncs under a listed directory raise OSError(EIO)).

Either way the broker must do what Kafka does: take the directory offline (its
partitions answer KAFKA_STORAGE_ERROR), announce it to the controller, which elects
another leader for the partition broker 1 led there; the workload keeps being
acknowledged, and the checker finds nothing acknowledged lost.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import time
from pathlib import Path

import pytest
from zk_harness import zookeeper_available

from kt.broker import faults
from kt.tools.local_cluster import LocalBroker, LocalCluster

from .campaign import (
    BROKER_PROPS,
    PARTITIONS,
    TOPIC,
    Workload,
    ZkView,
    _brokers_run_this_kt,
    final_read,
)
from .checker import check, format_table
from .history import History

pytestmark = [pytest.mark.integration, pytest.mark.cluster]

#: p0 and p2 are followed by broker 1, p1 is led by it (its preferred leader); with
#: log.dirs = healthy,faulty (new partitions go to the dir holding fewest, ties in
#: order), broker 1 places p0 on healthy, p1 on faulty, p2 on healthy
ASSIGNMENT = [[2, 3, 1], [1, 2, 3], [3, 1, 2]]


class TwoDirCluster(LocalCluster):
    """Broker 1 has a second log directory, `faulty`."""

    faulty: Path

    def _broker_args(self, b: LocalBroker) -> list[str]:
        args = super()._broker_args(b)
        if b.broker_id == 1:
            args += ["--override", f"log.dirs={b.data_dir},{self.faulty}"]
        return args


def _create_topic(bootstrap: str) -> None:
    from kafka.admin import KafkaAdminClient, NewTopic

    admin = KafkaAdminClient(bootstrap_servers=bootstrap.split(","), request_timeout_ms=30000)
    try:
        assignment = dict(enumerate(ASSIGNMENT))
        topic = NewTopic(TOPIC, -1, -1, assignment, {"min.insync.replicas": "2"})
        admin.create_topics([topic], timeout_ms=30000)
    finally:
        admin.close()


def _fill(directory: Path) -> None:
    """Take every free byte of the filesystem of `directory` (ENOSPC ends it)."""
    fd = os.open(directory / "filler", os.O_WRONLY | os.O_CREAT, 0o644)
    try:
        for size in (65536, 4096, 1):  # big writes, then the last partial pages
            with contextlib.suppress(OSError):
                while os.write(fd, b"\0" * size):
                    pass
    finally:
        os.close(fd)


@pytest.mark.timeout(240)
@pytest.mark.skipif(not zookeeper_available(), reason="needs Debian's zookeeper and java")
@pytest.mark.parametrize("fault", ["disk-full", "eio"])
def test_failed_log_dir_moves_leadership_and_loses_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fault: str
) -> None:
    _brokers_run_this_kt()
    faulty = tmp_path / "faulty"
    faulty.mkdir()
    control = tmp_path / "eio-dirs"
    mounted = False
    if fault == "disk-full":
        subprocess.run(
            ["mount", "-t", "tmpfs", "-o", "size=4m", "tmpfs", str(faulty)],
            check=True, capture_output=True, text=True,
        )  # fmt: skip
        mounted = True
    else:
        control.write_text("")
        monkeypatch.setenv(faults.ENV_VAR, str(control))
    history = History(tmp_path / "history.jsonl")
    cluster = TwoDirCluster.create(tmp_path / "c", 3, overrides=BROKER_PROPS)
    cluster.faulty = faulty
    workload: Workload | None = None
    zk: ZkView | None = None
    try:
        cluster.start(timeout=90)
        zk = ZkView(cluster.zookeeper_connect)
        _create_topic(cluster.bootstrap_servers)
        # CreateTopics answers once the assignment is written; the replicas are
        # created when the controller's LeaderAndIsr reaches the brokers
        deadline = time.monotonic() + 30
        while not (faulty / f"{TOPIC}-1").is_dir() and time.monotonic() < deadline:
            time.sleep(0.1)
        assert (faulty / f"{TOPIC}-1").is_dir(), sorted(p.name for p in faulty.iterdir())
        workload = Workload(history, cluster.bootstrap_servers)
        workload.start()
        deadline = time.monotonic() + 30
        while _acked(history) < 50 and time.monotonic() < deadline:
            time.sleep(0.2)
        state = zk.partition_state(1) or {}
        assert state.get("leader") == 1, state
        history.record("nemesis", "start", "info", fault=fault, broker=1)
        if fault == "disk-full":
            _fill(faulty)
        else:
            control.write_text(f"{faulty}\n")
        # leadership of p1 moves to another ISR member, and broker 1 leaves its ISR
        deadline = time.monotonic() + 40
        while time.monotonic() < deadline:
            state = zk.partition_state(1) or {}
            if state.get("leader") not in (1, -1, None) and 1 not in state.get("isr", [1]):
                break
            time.sleep(0.25)
        log1 = cluster.broker(1).log_path.read_text(errors="replace")
        assert state.get("leader") in (2, 3) and 1 not in state["isr"], (state, log1[-3000:])
        assert "failed and is offline" in log1
        if fault == "disk-full":
            # the kernel's ENOSPC, or the short write that precedes it on a full page
            assert "No space left on device" in log1 or "short write" in log1, log1[-3000:]
        history.record("nemesis", "stop", "info", fault=fault, broker=1)
        acked_at_fault = _acked(history)
        deadline = time.monotonic() + 30  # the workload goes on: acknowledgements
        while _acked(history) < acked_at_fault + 100 and time.monotonic() < deadline:
            time.sleep(0.2)
        assert _acked(history) >= acked_at_fault + 100, "acknowledgements stopped"
        assert cluster.broker(1).running  # one dir left: the broker serves on
        workload.join()
        assert final_read(history, cluster.bootstrap_servers)
    finally:
        if workload is not None:
            workload.stop.set()
        if zk is not None:
            zk.close()
        cluster.stop(kill=True)
        history.close()
        if mounted:
            subprocess.run(["umount", "-l", str(faulty)], check=False)
    assert not workload.errors, workload.errors
    verdict = check(history.events)
    table = format_table(verdict)
    print(table)
    assert verdict.acknowledged > 0
    assert verdict.valid, table + "\n" + "\n".join(a.message for a in verdict.anomalies[:10])


def _acked(history: History) -> int:
    return sum(1 for e in history.events if e["f"] == "send" and e["type"] == "ok")


assert len(ASSIGNMENT) == PARTITIONS
