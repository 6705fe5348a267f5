"""`kt reassign-partitions` on a 3-broker ZooKeeper cluster: replicas move from
{1,2} to {2,3} while acks=all producers run, --verify polls to completion, every
acknowledged record stays readable, and --cancel restores the original replicas.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

from kt.cli import cli
from kt.tools.local_cluster import ClusterModeUnsupportedError, LocalCluster

pytestmark = [pytest.mark.integration, pytest.mark.cluster]


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    c = LocalCluster.create(
        tmp_path_factory.mktemp("reassign") / "c",
        3,
        overrides={
            "group.initial.rebalance.delay.ms": "0",
            "replica.lag.time.max.ms": "3000",
            "zookeeper.session.timeout.ms": "6000",
        },
    )
    try:
        c.start(register_timeout=10.0)
    except ClusterModeUnsupportedError as exc:
        pytest.skip(f"kt broker start has no cluster mode yet: {exc}")
    yield c
    c.stop(kill=True)


def on(c: LocalCluster, *args: str) -> Result:
    return CliRunner().invoke(cli, [*args, "-b", c.bootstrap_servers])


def on23(c: LocalCluster, *args: str) -> Result:
    """Through brokers 2 and 3 only (broker 1 is paused)."""
    boot = ",".join(c.broker(b).bootstrap for b in (2, 3))
    return CliRunner().invoke(cli, [*args, "-b", boot])


def wait_for(check: Callable[[], bool], timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.3)


def replicas_of(
    c: LocalCluster, topic: str, run: Callable[..., Result] | None = None
) -> dict[int, list[int]]:
    out = (run or on)(c, "topic", "describe", "--topic", topic).stdout
    got = {}
    for line in out.splitlines():
        if "\tPartition: " in line:
            p = int(line.split("Partition: ")[1].split("\t")[0])
            got[p] = [int(x) for x in line.split("Replicas: ")[1].split("\t")[0].split(",")]
    return got


def describe(c: LocalCluster) -> dict[str, Any]:
    r = CliRunner().invoke(cli, ["cluster", "describe", "--json", "-b", c.bootstrap_servers,
                                 "--zookeeper", c.zookeeper_connect])  # fmt: skip
    doc: dict[str, Any] = json.loads(r.stdout)
    return doc


def controller_of(c: LocalCluster) -> int:
    controller: int = describe(c)["controller"]
    return controller


def all_live(c: LocalCluster) -> bool:
    return [b["id"] for b in describe(c)["brokers"] if b["live"]] == [1, 2, 3]


class Producer(threading.Thread):
    """Produces numbered records with acks=all until stopped; keeps the acked ones."""

    def __init__(self, bootstrap: str, topic: str) -> None:
        super().__init__(daemon=True)
        from confluent_kafka import Producer as P

        self.p = P({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5,
                    "enable.idempotence": False, "message.timeout.ms": 30000})  # fmt: skip
        self.topic, self.acked, self.stop = topic, set(), threading.Event()

    def run(self) -> None:
        n = 0

        def done(err: object, msg: object) -> None:
            if err is None:
                self.acked.add(msg.value().decode())  # type: ignore[attr-defined]

        while not self.stop.is_set():
            self.p.produce(self.topic, f"r{n}".encode(), on_delivery=done)
            n += 1
            self.p.poll(0.002)
        self.p.flush(30)


def read_all(bootstrap: str, topic: str, count: int) -> set[str]:
    from confluent_kafka import Consumer

    con = Consumer({"bootstrap.servers": bootstrap, "group.id": f"verify-{time.time()}",
                    "auto.offset.reset": "earliest", "enable.auto.commit": False})  # fmt: skip
    con.subscribe([topic])
    seen: set[str] = set()
    deadline = time.monotonic() + 60
    try:
        while len(seen) < count and time.monotonic() < deadline:
            m = con.poll(0.5)
            if m is not None and m.error() is None:
                seen.add(m.value().decode())
    finally:
        con.close()
    return seen


def test_move_verify_and_cancel(cluster: LocalCluster, tmp_path: Path) -> None:
    c = cluster
    r = on(c, "topic", "create", "--topic", "mv", "--replica-assignment", "1:2,2:1",
           "--config", "min.insync.replicas=1")  # fmt: skip
    assert r.exit_code == 0, r.stderr
    wait_for(lambda: replicas_of(c, "mv") == {0: [1, 2], 1: [2, 1]})
    producer = Producer(c.bootstrap_servers, "mv")
    producer.start()
    time.sleep(2)

    # a malformed plan: one error line, exit 2, nothing started
    bad = tmp_path / "bad.json"
    bad.write_text('{"version":1,"partitions":[{"topic":"mv","partition":0,"replicas":[2,9]}]}')
    r = on(c, "reassign-partitions", "--execute", "--reassignment-json-file", str(bad))
    assert r.exit_code == 2 and "non-existent brokerIDs: 9" in r.stderr
    assert on(c, "reassign-partitions", "--list").stdout == "No partition reassignments found.\n"

    topics = tmp_path / "topics.json"
    topics.write_text(json.dumps({"topics": [{"topic": "mv"}], "version": 1}))
    r = on(c, "reassign-partitions", "--generate", "--topics-to-move-json-file", str(topics),
           "--broker-list", "2,3", "--minimal-movement")  # fmt: skip
    assert r.exit_code == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[0] == "Current partition replica assignment"
    assert lines[3] == "Proposed partition reassignment configuration"
    plan = json.loads(lines[4])
    assert [p["replicas"] for p in plan["partitions"]] == [[2, 3], [2, 3]]
    plan_file = tmp_path / "plan.json"
    plan_file.write_text(lines[4])

    r = on(c, "reassign-partitions", "--execute", "--reassignment-json-file", str(plan_file),
           "--throttle", "50000000")  # fmt: skip
    assert r.exit_code == 0, r.stderr
    out = r.stdout.splitlines()
    assert out[5:7] == [
        "Warning: You must run --verify periodically, until the reassignment completes, to "
        "ensure the throttle is removed.",
        "The inter-broker throttle limit was set to 50000000 B/s",
    ]
    configs = on(c, "configs", "describe", "--entity-type", "topics", "--entity-name", "mv")
    assert "leader.replication.throttled.replicas=0:1,0:2,1:2,1:1" in configs.stdout.replace(
        " ", ""
    ), configs.stdout
    assert out[0] == "Current partition replica assignment"
    assert json.loads(out[2])["partitions"][0]["replicas"] == [1, 2]
    assert out[4] == "Save this to use as the --reassignment-json-file option during rollback"
    assert out[-1] == "Successfully started partition reassignments for mv-0,mv-1"
    rollback = tmp_path / "rollback.json"
    rollback.write_text(out[2])

    def verified() -> bool:
        r = on(c, "reassign-partitions", "--verify", "--reassignment-json-file", str(plan_file))
        assert r.exit_code == 0, r.stderr
        assert r.stdout.startswith("Status of partition reassignment:\n")
        return "is still in progress." not in r.stdout

    wait_for(verified)
    r = on(c, "reassign-partitions", "--verify", "--reassignment-json-file", str(plan_file))
    assert r.stdout.splitlines()[1:] == [
        "Reassignment of partition mv-0 is completed.",
        "Reassignment of partition mv-1 is completed.",
        "Clearing broker-level throttles on brokers 1,2,3",
        "Clearing topic-level throttles on topic mv",
    ]
    configs = on(c, "configs", "describe", "--entity-type", "topics", "--entity-name", "mv")
    assert "throttled" not in configs.stdout
    producer.stop.set()
    producer.join(60)
    assert replicas_of(c, "mv") == {0: [2, 3], 1: [2, 3]}
    assert producer.acked
    assert producer.acked <= read_all(c.bootstrap_servers, "mv", len(producer.acked))

    # cancel: with broker 1 paused, moving back to {1,2} cannot finish; --cancel
    # restores {2,3}
    if controller_of(c) == 1:  # pausing the controller would stall the cancel
        c.restart_broker(1)
        wait_for(lambda: all_live(c) and controller_of(c) != 1)
        time.sleep(1)  # every broker's metadata lists broker 1 again
    c.pause_broker(1)
    try:
        r = on23(c, "reassign-partitions", "--execute", "--reassignment-json-file", str(rollback))
        assert r.exit_code == 0, r.stderr
        listed = on23(c, "reassign-partitions", "--list").stdout.splitlines()
        assert listed[0] == "Current partition reassignments:"
        assert "mv-0: replicas: 1,2,3. adding: 1. removing: 3." in listed
        # --preserve-throttles: clearing them would ask the paused broker too
        r = on23(c, "reassign-partitions", "--cancel", "--reassignment-json-file", str(rollback),
                 "--preserve-throttles")  # fmt: skip
        assert r.exit_code == 0, r.stderr
        assert r.stdout.startswith("Successfully cancelled partition reassignment")
        wait_for(lambda: replicas_of(c, "mv", on23) == {0: [2, 3], 1: [2, 3]})
        r = on23(c, "reassign-partitions", "--cancel", "--reassignment-json-file", str(rollback),
                 "--preserve-throttles")  # fmt: skip
        assert r.stdout == "None of the specified partition reassignments are active.\n"
    finally:
        c.resume_broker(1)
    wait_for(lambda: all_live(c))

    # --cancel clears the plan's throttles as Kafka's does, even with nothing to cancel
    r = on(c, "reassign-partitions", "--execute", "--reassignment-json-file", str(rollback),
           "--throttle", "1000")  # fmt: skip
    assert r.exit_code == 0, r.stderr
    r = on(c, "reassign-partitions", "--cancel", "--reassignment-json-file", str(rollback))
    assert r.exit_code == 0, r.stderr
    assert r.stdout.splitlines()[-2:] == [
        "Clearing broker-level throttles on brokers 1,2,3",
        "Clearing topic-level throttles on topic mv",
    ]
    wait_for(lambda: replicas_of(c, "mv") == {0: [2, 3], 1: [2, 3]})
    configs = on(c, "configs", "describe", "--entity-type", "topics", "--entity-name", "mv")
    assert "throttled" not in configs.stdout
    for b in ("1", "2", "3"):
        configs = on(c, "configs", "describe", "--entity-type", "brokers", "--entity-name", b)
        assert "throttled.rate" not in configs.stdout, configs.stdout


def test_throttled_reassignment_copies_at_the_throttled_rate(
    cluster: LocalCluster, tmp_path: Path
) -> None:
    """~300 kB at 20 kB/s: the quota's 10-window floor lets ~200 kB through at once,
    the rest takes seconds; unthrottled it would take well under one."""
    from confluent_kafka import Producer as P

    c = cluster
    r = on(c, "topic", "create", "--topic", "slow", "--replica-assignment", "1")
    assert r.exit_code == 0, r.stderr
    p = P({"bootstrap.servers": c.bootstrap_servers, "acks": "all"})
    for i in range(300):
        p.produce("slow", b"x" * 1000, key=str(i).encode())
    assert p.flush(30) == 0
    plan = tmp_path / "slow.json"
    plan.write_text('{"version":1,"partitions":[{"topic":"slow","partition":0,"replicas":[2]}]}')
    started = time.monotonic()
    r = on(c, "reassign-partitions", "--execute", "--reassignment-json-file", str(plan),
           "--throttle", "20000")  # fmt: skip
    assert r.exit_code == 0, r.stderr

    def done() -> bool:
        r = on(c, "reassign-partitions", "--verify", "--reassignment-json-file", str(plan),
               "--preserve-throttles")  # fmt: skip
        return "is completed." in r.stdout

    wait_for(done, timeout=60)
    elapsed = time.monotonic() - started
    assert elapsed >= 3.0, f"a throttled copy took only {elapsed:.1f}s"
    r = on(c, "reassign-partitions", "--verify", "--reassignment-json-file", str(plan))
    assert "Clearing topic-level throttles on topic slow" in r.stdout
