"""`kt reassign-partitions --execute --throttle R --clear-throttles-when-done` on the
shared 3-broker cluster, as a real process: it returns 0 once the move completed
with the topic and broker throttle configs gone; SIGTERM while a slow throttled move
runs stops the wait (exit 143) and leaves the throttles for --verify / --cancel."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from kt.cli import cli
from kt.tools.local_cluster import LocalCluster

pytestmark = [pytest.mark.integration, pytest.mark.cluster]


def on(c: LocalCluster, *args: str) -> Result:
    return CliRunner().invoke(cli, [*args, "-b", c.bootstrap_servers])


def wait_for(check: Callable[[], bool], timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.3)


def throttle_configs(c: LocalCluster, topic: str) -> str:
    """Every throttle config left on the topic and the three brokers."""
    found = []
    for kind, name in [("topics", topic), ("brokers", "1"), ("brokers", "2"), ("brokers", "3")]:
        r = on(c, "configs", "describe", "--entity-type", kind, "--entity-name", name)
        assert r.exit_code == 0, r.stderr
        found += [f"{name}: {x.strip()}" for x in r.stdout.splitlines() if "throttled" in x]
    return "\n".join(found)


def replicas(c: LocalCluster, topic: str) -> list[int]:
    r = on(c, "topic", "describe", "--topic", topic, "--json")
    assert r.exit_code == 0, r.stderr
    return list(json.loads(r.stdout.splitlines()[0])["partitions"][0]["replicas"])


def setup_topic(c: LocalCluster, topic: str, records: int) -> None:
    from confluent_kafka import Producer

    r = on(c, "topic", "create", "--topic", topic, "--replica-assignment", "1")
    assert r.exit_code == 0, r.stderr
    p = Producer({"bootstrap.servers": c.bootstrap_servers, "acks": "all"})
    for i in range(records):
        p.produce(topic, b"x" * 1000, key=str(i).encode())
    assert p.flush(30) == 0


def kt_process(c: LocalCluster, *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "kt.cli", "reassign-partitions", "-b", c.bootstrap_servers, *args],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
    )  # fmt: skip


def test_throttles_cleared_when_the_move_completes(cluster: LocalCluster, tmp_path: Path) -> None:
    c = cluster
    setup_topic(c, "ctd", 50)
    plan = tmp_path / "ctd.json"
    plan.write_text('{"version":1,"partitions":[{"topic":"ctd","partition":0,"replicas":[2]}]}')
    proc = kt_process(c, "--execute", "--reassignment-json-file", str(plan),
                      "--throttle", "10000000", "--clear-throttles-when-done",
                      "--interval", "0.3")  # fmt: skip
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, (out, err)
    lines = out.splitlines()
    assert "The inter-broker throttle limit was set to 10000000 B/s" in lines
    assert "Successfully started partition reassignment for ctd-0" in lines
    assert lines[-4:] == [
        "Status of partition reassignment:",
        "Reassignment of partition ctd-0 is completed.",
        "Clearing broker-level throttles on brokers 1,2,3",
        "Clearing topic-level throttles on topic ctd",
    ]
    assert replicas(c, "ctd") == [2]
    assert throttle_configs(c, "ctd") == ""


def test_sigterm_stops_the_wait_and_leaves_the_throttles(
    cluster: LocalCluster, tmp_path: Path
) -> None:
    c = cluster
    # ~300 kB at 1 kB/s: the quota lets ~200 kB through at once, the rest takes
    # about 100 s, far longer than this test waits
    setup_topic(c, "cts", 300)
    plan = tmp_path / "cts.json"
    plan.write_text('{"version":1,"partitions":[{"topic":"cts","partition":0,"replicas":[2]}]}')
    proc = kt_process(c, "--execute", "--reassignment-json-file", str(plan),
                      "--throttle", "1000", "--clear-throttles-when-done",
                      "--interval", "0.3")  # fmt: skip
    try:
        assert proc.stdout is not None
        while True:
            line = proc.stdout.readline()
            assert line, proc.stderr.read() if proc.stderr else ""
            if line.startswith("Waiting for the reassignment to complete"):
                break
        time.sleep(1.0)  # a sample or two
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=30)
    finally:
        proc.kill()
    assert proc.returncode == 143, (out, err)
    assert err.strip().splitlines() == [
        "kt: error: stopped waiting (SIGTERM); the throttles stay in place: run kt "
        f"reassign-partitions --verify --reassignment-json-file {plan} once the "
        "reassignment completes"
    ]
    left = throttle_configs(c, "cts")
    assert "cts: leader.replication.throttled.replicas" in left, left
    assert "2: follower.replication.throttled.rate" in left, left

    # --cancel puts things back and clears the throttles
    r = on(c, "reassign-partitions", "--cancel", "--reassignment-json-file", str(plan))
    assert r.exit_code == 0, r.stderr
    wait_for(lambda: replicas(c, "cts") == [1])
    assert throttle_configs(c, "cts") == ""
