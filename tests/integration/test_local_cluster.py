"""LocalZooKeeper / LocalCluster and `kt cluster up|down|status|describe`, `kt topic
describe` on a real ZooKeeper with real `kt broker start` processes.

Tests marked `cluster` need brokers that join through `zookeeper.connect`. They skip,
saying why, only while `kt broker start` refuses or ignores zookeeper.connect (the
`three_brokers` fixture detects it: LocalCluster raises ClusterModeUnsupportedError
when no broker registers under /brokers/ids); once the broker has cluster mode they
run with no change.
"""

from __future__ import annotations

import gc
import json
import os
import queue
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from kt.cli import cli
from kt.tools.local_cluster import (
    ClusterError,
    ClusterModeUnsupportedError,
    LocalCluster,
    LocalZooKeeper,
    four_letter_word,
    port_in_use,
)

pytestmark = pytest.mark.integration


def kt(*args: str) -> Result:
    return CliRunner().invoke(cli, list(args))


def test_zookeeper_standalone(tmp_path: Path) -> None:
    zk = LocalZooKeeper(tmp_path / "zk").start()
    try:
        assert four_letter_word(zk.port, "ruok") == "imok"
        assert "Mode: standalone" in four_letter_word(zk.port, "srvr")
        assert "clientPortAddress=127.0.0.1" in zk.config_path.read_text()
    finally:
        zk.stop()
    assert not zk.running
    # The kernel may let the port go a moment after the process (a busy machine once
    # saw it still bound right after the stop): wait for it, do not race it.
    deadline = time.monotonic() + 10
    while port_in_use(zk.port) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not port_in_use(zk.port)


def test_cluster_describe_reads_the_controller_epoch(tmp_path: Path) -> None:
    from broker_harness import BrokerProcess, free_port
    from kazoo.client import KazooClient

    with LocalZooKeeper(tmp_path / "zk") as zk:
        client = KazooClient(hosts=zk.address)
        client.start(timeout=10)
        try:
            client.create("/kt/controller_epoch", b"7", makepath=True)
        finally:
            client.stop()
            client.close()
        b = BrokerProcess(tmp_path / "data", free_port()).start()
        try:
            r = CliRunner().invoke(cli, ["cluster", "describe", "-b", b.bootstrap,
                                         "--zookeeper", f"{zk.address}/kt"])  # fmt: skip
            assert r.exit_code == 0, r.stderr
            assert r.stdout.splitlines()[1:3] == ["Controller: 1", "Controller epoch: 7"]
            r = CliRunner().invoke(cli, ["cluster", "describe", "-b", b.bootstrap, "--json",
                                         "--zookeeper", f"{zk.address}/none"])  # fmt: skip
            assert r.exit_code == 0 and json.loads(r.stdout)["controller_epoch"] is None
        finally:
            b.kill()
    assert not zk.running


def test_cluster_processes_without_registration(tmp_path: Path) -> None:
    """Start, pause, stop, kill, restart and reload brokers: process management only, so
    it runs on today's single-node broker too (no registration check)."""
    c = LocalCluster.create(tmp_path / "c", 2, racks=["r1", "r2"])
    c.start(verify_registration=False)
    try:
        state = json.loads(c.state_path.read_text())
        assert [b["rack"] for b in state["brokers"]] == ["r1", "r2"]
        assert state["zookeeper_connect"] == c.zookeeper_address
        assert c.bootstrap_servers == ",".join(b.bootstrap for b in c.brokers)
        with pytest.raises(ClusterError, match="already running"):
            LocalCluster.create(tmp_path / "c", 1).start(verify_registration=False)

        c.pause_broker(1)
        assert c.broker(1).running
        c.resume_broker(1)
        c.stop_broker(1)  # SIGTERM: a clean shutdown
        assert not c.broker(1).running
        assert (c.broker(1).data_dir / ".kafka_cleanshutdown").exists()
        old_pid = c.broker(2).pid
        c.restart_broker(2, kill=True)
        assert c.broker(2).running and c.broker(2).pid != old_pid
        c.start_broker(1)
        assert c.broker(1).running

        again = LocalCluster.load(tmp_path / "c")  # as `kt cluster down` finds it
        assert [b.pid for b in again.brokers] == [b.pid for b in c.brokers]
        assert again.stop() == []
        assert not c.running
    finally:
        c.stop(kill=True)


def test_cli_up_status_down(tmp_path: Path) -> None:
    d = str(tmp_path / "cli")
    r = kt("cluster", "up", "--dir", d, "--brokers", "2", "--racks", "r1,r2",
           "--no-registration-check")  # fmt: skip
    try:
        assert r.exit_code == 0, r.stderr
        c = LocalCluster.load(d)
        assert r.stdout.splitlines() == [
            f"Cluster up in {c.directory}: 2 broker(s)",
            f"Bootstrap servers: {c.bootstrap_servers}",
            f"ZooKeeper: {c.zookeeper_address}",
            f"Logs: kt cluster logs --dir {d} (each broker's in its directory)",
            f"Stop it with: kt cluster down --dir {d}",
        ]
        # up on a running cluster changes nothing and says so
        again = kt("cluster", "up", "--dir", d, "--no-registration-check")
        assert again.exit_code == 0, again.stderr
        assert again.stdout.splitlines()[1:3] == [
            "Already running: ZooKeeper, broker 1, broker 2",
            "Started: nothing (all was running)",
        ]
        st = kt("cluster", "status", "--dir", d, "--json")
        procs = json.loads(st.stdout)
        assert st.exit_code == 0 and [p["role"] for p in procs] == ["zookeeper", "broker", "broker"]
        assert [p["rack"] for p in procs[1:]] == ["r1", "r2"] and all(p["running"] for p in procs)
        # a cluster of two gets an offsets topic it can create (replication factor 2)
        from confluent_kafka.admin import AdminClient

        admins = [AdminClient({"bootstrap.servers": c.bootstrap_servers})]

        def coordinator() -> int | None:
            # librdkafka's admin gives up after two COORDINATOR_NOT_AVAILABLE answers
            # (the offsets topic is still loading) and then waits out its timeout:
            # ask again rather than wait once
            try:
                f = admins[0].describe_consumer_groups(["g2"], request_timeout=10)["g2"]
                return int(f.result(timeout=20).coordinator.id)
            except Exception:
                return None

        try:
            wait_for(lambda: coordinator() in (1, 2), timeout=120)
        finally:
            # destroyed while its brokers still run: librdkafka aborted the whole
            # test process once when its handle outlived them (SIGABRT during `down`)
            admins.clear()
            gc.collect()
    finally:
        down = kt("cluster", "down", "--dir", d)
    assert down.exit_code == 0, down.stderr
    assert down.stdout.splitlines()[-1].startswith("Stopped ZooKeeper (127.0.0.1:")
    assert kt("cluster", "status", "--dir", d).exit_code == 1
    assert kt("cluster", "down", "--dir", str(tmp_path / "none")).exit_code == 1
    assert kt("cluster", "up", "--racks", "a,,b").exit_code == 2


def test_up_reports_a_broker_without_cluster_mode_in_one_line(tmp_path: Path) -> None:
    """`kt cluster up` either starts a registered cluster or says in one line why not."""
    d = str(tmp_path / "one")
    r = kt("cluster", "up", "--dir", d, "--brokers", "1", "--timeout", "30")
    try:
        if r.exit_code == 0:
            assert "Bootstrap servers: 127.0.0.1:" in r.stdout
        else:
            assert r.exit_code == 1 and len(r.stderr.strip().splitlines()) == 1
            assert "zookeeper" in r.stderr.lower()
    finally:
        kt("cluster", "down", "--dir", d, "--kill")
    assert not LocalCluster.load(d).running


# --- cluster mode ------------------------------------------------------------------------


@pytest.fixture(scope="module")
def three_brokers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    c = LocalCluster.create(
        tmp_path_factory.mktemp("cluster") / "c",
        3,
        racks=["r1", "r2", "r3"],
        overrides={
            "group.initial.rebalance.delay.ms": "0",
            "offsets.topic.replication.factor": "3",
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


def wait_for(check: Callable[[], bool], timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.2)


def on(c: LocalCluster, *args: str) -> Result:
    return CliRunner().invoke(cli, [*args, "-b", c.bootstrap_servers])


@pytest.mark.cluster
def test_cluster_describe_three_brokers(three_brokers: LocalCluster) -> None:
    c = three_brokers
    r = CliRunner().invoke(cli, ["cluster", "describe", "--json", "-b", c.bootstrap_servers,
                                 "--zookeeper", c.zookeeper_connect])  # fmt: skip
    assert r.exit_code == 0, r.stderr
    d = json.loads(r.stdout)
    assert [(b["id"], b["rack"], b["live"]) for b in d["brokers"]] == [
        (1, "r1", True),
        (2, "r2", True),
        (3, "r3", True),
    ]
    assert d["controller"] in (1, 2, 3) and d["controller_epoch"] >= 1
    assert [b["controller"] for b in d["brokers"]].count(True) == 1


@pytest.mark.cluster
def test_topic_describe_replicated_and_filters(three_brokers: LocalCluster) -> None:
    c = three_brokers
    r = on(c, "topic", "create", "--topic", "rf3", "--partitions", "3",
           "--replication-factor", "3", "--config", "min.insync.replicas=2")  # fmt: skip
    assert r.exit_code == 0, r.stderr
    r = on(c, "topic", "create", "--topic", "manual", "--replica-assignment", "1:2:3,2:3:1")
    assert r.exit_code == 0, r.stderr

    def isr_full() -> bool:
        out = on(c, "topic", "describe", "--topic", "rf3,manual").stdout
        return (
            "Leader: none" not in out
            and out.count("Isr: ") == 5
            and all(
                len(line.split("Isr: ")[1].split("\t")[0].split(",")) == 3
                for line in out.splitlines()
                if "Isr: " in line
            )
        )

    wait_for(isr_full)
    lines = on(c, "topic", "describe", "--topic", "manual").stdout.splitlines()
    assert "\tPartitionCount: 2\tReplicationFactor: 3\tConfigs: " in lines[0]
    assert lines[1].startswith("\tTopic: manual\tPartition: 0\tLeader: 1\tReplicas: 1,2,3\tIsr: ")
    assert lines[2].startswith("\tTopic: manual\tPartition: 1\tLeader: 2\tReplicas: 2,3,1\tIsr: ")
    assert "Configs: min.insync.replicas=2" in on(c, "topic", "describe", "--topic", "rf3").stdout

    c.stop_broker(3)  # controlled shutdown: leadership moves, ISR shrinks
    try:
        wait_for(lambda: bool(on(c, "topic", "describe", "--topic", "rf3",
                                 "--under-replicated-partitions").stdout))  # fmt: skip
        under = on(c, "topic", "describe", "--topic", "rf3", "--under-replicated-partitions")
        assert all(
            line.startswith("\tTopic: rf3\tPartition: ") for line in under.stdout.splitlines()
        )
        at_min = on(c, "topic", "describe", "--topic", "rf3", "--at-min-isr-partitions")
        assert len(at_min.stdout.splitlines()) == 3
        assert on(c, "topic", "describe", "--topic", "rf3", "--unavailable-partitions").stdout == ""
        d = json.loads(on(c, "cluster", "describe", "--json").stdout)
        assert [b["id"] for b in d["brokers"] if not b["live"]] == [3]
    finally:
        c.start_broker(3)
    wait_for(lambda: on(c, "topic", "describe", "--topic", "rf3",
                        "--under-replicated-partitions").stdout == "")  # fmt: skip


@pytest.mark.cluster
def test_offsets_topic_waits_for_its_replication_factor(three_brokers: LocalCluster) -> None:
    """__consumer_offsets is not created with fewer replicas than
    offsets.topic.replication.factor while a broker is down (Kafka since 0.11):
    FindCoordinator answers COORDINATOR_NOT_AVAILABLE until all three are back, and
    then the topic has three replicas per partition."""
    import asyncio

    from kt.client import KafkaClient
    from kt.protocol import ErrorCode, apis

    c = three_brokers

    async def find() -> int:
        client = KafkaClient(c.bootstrap_servers)
        await client.start()
        try:
            body = apis.FIND_COORDINATOR.request(key="g-rf", key_type=0, coordinator_keys=["g-rf"])
            resp = await client.send(apis.FIND_COORDINATOR, body)
            return int(resp.coordinators[0].error_code if resp.coordinators else resp.error_code)
        finally:
            await client.close()

    def offsets_assignment() -> dict[str, list[int]] | None:
        r = kt("topic", "describe", "--topic", "__consumer_offsets", "--json",
               "-b", c.bootstrap_servers)  # fmt: skip
        if r.exit_code != 0:
            return None
        doc = json.loads(r.stdout.splitlines()[0])
        return {str(p["partition"]): p["replicas"] for p in doc["partitions"]}

    assert offsets_assignment() is None, "another test created __consumer_offsets first"
    c.stop_broker(3)
    try:
        assert asyncio.run(find()) == ErrorCode.COORDINATOR_NOT_AVAILABLE
        assert offsets_assignment() is None
    finally:
        c.start_broker(3)
    c.wait_registered(30.0)
    wait_for(lambda: asyncio.run(find()) == ErrorCode.NONE)
    assignment = offsets_assignment()
    assert assignment and all(sorted(r) == [1, 2, 3] for r in assignment.values())


# --- practising failures on a local cluster (issue 19, section 4) ------------------------

#: a short ZooKeeper session: a SIGKILLed broker's registration expires in seconds
QUICK = ("--override", "zookeeper.session.timeout.ms=6000")


def ok(result: Result) -> Result:
    assert result.exit_code == 0, (result.stdout, result.stderr)
    return result


def state(d: str) -> dict[str, str]:
    procs = json.loads(kt("cluster", "status", "--dir", d, "--json").stdout)
    return {("zookeeper" if p["id"] is None else f"broker {p['id']}"): p["state"] for p in procs}


def gone(pid: int) -> bool:
    return not Path(f"/proc/{pid}").exists() or Path(f"/proc/{pid}/stat").read_text().split(")")[
        -1
    ].split()[0] in ("Z", "X")


@pytest.mark.cluster
def test_stop_kill_status_start_restart_a_broker(tmp_path: Path) -> None:
    """`kt cluster stop --broker N [--kill]`, `status` naming what is down and how to
    start it, `start`/`restart --broker N`, and `up` on a partly-running cluster
    starting what is down: with real ZooKeeper, real brokers and a real SIGKILL."""
    d = str(tmp_path / "c")
    ok(kt("cluster", "up", "--dir", d, "--brokers", "2", *QUICK))
    try:
        c = LocalCluster.load(d)
        b1, b2 = c.broker(1), c.broker(2)
        assert state(d) == {"zookeeper": "running", "broker 1": "running", "broker 2": "running"}

        # a crash: SIGKILL, so no controlled shutdown and no clean-shutdown marker
        r = ok(kt("cluster", "stop", "--dir", d, "--broker", "2", "--kill"))
        assert r.stdout == f"Killed broker 2 ({b2.bootstrap})\n"
        assert gone(b2.pid)
        assert not (b2.data_dir / ".kafka_cleanshutdown").exists()
        assert (
            b2.log_path.read_text()
            .splitlines()[-1]
            .endswith(f"--- kt cluster: killing broker 2 (pid {b2.pid}, SIGKILL) ---")
        )
        st = kt("cluster", "status", "--dir", d)
        assert st.exit_code == 1
        row = next(
            line for line in st.stdout.splitlines() if line.startswith("broker") and " 2 " in line
        )
        assert row.split()[-2:] == ["-", "stopped"]
        assert st.stderr == (
            f"kt: broker 2 is down (its log: kt cluster logs --broker 2 --dir {d}); "
            f"start it with: kt cluster start --broker 2 --dir {d}\n"
        )
        assert state(d)["broker 2"] == "stopped"

        r = ok(kt("cluster", "start", "--dir", d, "--broker", "2"))
        assert r.stdout == f"Started broker 2 ({b2.bootstrap})\n"
        assert c.registered_brokers() == [1, 2]
        st = kt("cluster", "status", "--dir", d)
        assert st.exit_code == 0 and st.stderr == ""
        r = ok(kt("cluster", "start", "--dir", d, "--broker", "2"))
        assert r.stdout == f"Broker 2 ({b2.bootstrap}) was already running\n"

        # a clean stop: SIGTERM, a controlled shutdown that leaves its marker
        r = ok(kt("cluster", "stop", "--dir", d, "--broker", "1"))
        assert r.stdout == f"Stopped broker 1 ({b1.bootstrap})\n"
        assert (b1.data_dir / ".kafka_cleanshutdown").exists()
        assert ok(kt("cluster", "stop", "--dir", d, "--broker", "1")).stdout == (
            f"Broker 1 ({b1.bootstrap}) was not running\n"
        )
        # up on a partly-running cluster starts what is down, on its port
        r = ok(kt("cluster", "up", "--dir", d))
        assert r.stdout.splitlines()[:3] == [
            f"Cluster up in {c.directory}: 2 broker(s)",
            "Already running: ZooKeeper, broker 2",
            "Started: broker 1",
        ]
        assert f"Bootstrap servers: {b1.bootstrap},{b2.bootstrap}" in r.stdout
        assert state(d)["broker 1"] == "running"
        # ... but not with other settings than the running cluster's
        r = kt("cluster", "up", "--dir", d, "--brokers", "3")
        assert r.exit_code == 1 and r.stderr.startswith(
            f"kt: error: a cluster runs in {c.directory} with other settings (--brokers 3, it has 2"
        )

        old = LocalCluster.load(d).broker(2).pid
        r = ok(kt("cluster", "restart", "--dir", d, "--broker", "2", "--kill"))
        assert r.stdout == (
            f"Killed broker 2 ({b2.bootstrap})\nStarted broker 2 ({b2.bootstrap})\n"
        )
        new = LocalCluster.load(d).broker(2)
        assert gone(old) and new.running and new.pid != old and new.port == b2.port

        # a broker that dies by itself (here a SIGKILL kt cluster did not send): status
        # tells it apart from one kt cluster stopped, and shows its last log line
        os.kill(new.pid, signal.SIGKILL)
        wait_for(lambda: gone(new.pid))
        last = new.log_path.read_text().splitlines()[-1]
        st = kt("cluster", "status", "--dir", d)
        assert st.exit_code == 1
        assert st.stderr.splitlines() == [
            f"kt: broker 2 exited, not stopped by kt cluster; its last log line: {last.strip()}",
            f"kt: broker 2 is down (its log: kt cluster logs --broker 2 --dir {d}); "
            f"start it with: kt cluster start --broker 2 --dir {d}",
        ]
        ok(kt("cluster", "start", "--dir", d, "--broker", "2"))

        # SIGSTOP: a frozen broker still runs, and status says it is paused
        c = LocalCluster.load(d)
        c.pause_broker(1)  # signals are delivered asynchronously: wait for the state
        try:
            wait_for(lambda: state(d)["broker 1"] == "paused")
        finally:
            c.resume_broker(1)
        wait_for(lambda: state(d)["broker 1"] == "running")

        # ZooKeeper too can go away and come back
        assert ok(kt("cluster", "stop", "--dir", d, "--zookeeper")).stdout.startswith(
            "Stopped ZooKeeper ("
        )
        st = kt("cluster", "status", "--dir", d)
        assert st.exit_code == 1 and f"start it with: kt cluster start --zookeeper --dir {d}" in (
            st.stderr
        )
        r = ok(kt("cluster", "start", "--dir", d))
        assert r.stdout.splitlines() == [
            f"Broker 1 ({b1.bootstrap}) was already running",
            f"Broker 2 ({b2.bootstrap}) was already running",
            f"Started ZooKeeper ({c.zookeeper_address})",
        ]
        assert state(d) == {"zookeeper": "running", "broker 1": "running", "broker 2": "running"}

        # usage errors: one line, exit 2
        for args in (
            ("stop",),
            ("restart",),
            ("start", "--broker", "9"),
            ("logs", "--broker", "9"),
        ):
            r = kt("cluster", *args, "--dir", d)
            assert r.exit_code == 2 and r.stderr.count("\n") == 1, (args, r.stderr)
            assert r.stderr.startswith("kt: error: ")
    finally:
        ok(kt("cluster", "down", "--dir", d, "--kill"))
    assert not LocalCluster.load(d).running


def listener(port: int) -> socket.socket:
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind(("127.0.0.1", port))
    s.listen()
    return s


@pytest.mark.cluster
def test_ports_are_kept_in_cluster_json_and_moved_when_taken(tmp_path: Path) -> None:
    """The addresses `kt cluster up` printed stay right at the next `up` (kept in
    cluster.json); a port another process took meanwhile moves, with a warning, and
    the new one is kept from then on."""
    d = str(tmp_path / "c")
    r = ok(kt("cluster", "up", "--dir", d, "--brokers", "2", "--racks", "ra,rb", *QUICK))
    first = LocalCluster.load(d)
    try:
        ok(kt("cluster", "down", "--dir", d))
        again = ok(kt("cluster", "up", "--dir", d))  # no options: the last run's
        assert again.stdout.splitlines()[1:3] == r.stdout.splitlines()[1:3]
        assert again.stderr == ""
        c = LocalCluster.load(d)
        assert [b.port for b in c.brokers] == [b.port for b in first.brokers]
        assert c.zookeeper_address == first.zookeeper_address
        assert [b.rack for b in c.brokers] == ["ra", "rb"]
        assert c.overrides["zookeeper.session.timeout.ms"] == "6000"
        ok(kt("cluster", "down", "--dir", d))

        taken = first.broker(1).port
        with listener(taken):
            moved = ok(kt("cluster", "up", "--dir", d))
        c = LocalCluster.load(d)
        new = c.broker(1).port
        assert new != taken and c.broker(2).port == first.broker(2).port
        assert moved.stderr == (
            f"kt: warning: broker 1's port 127.0.0.1:{taken} is taken by another process: "
            f"broker 1 listens on 127.0.0.1:{new} now\n"
        )
        assert f"Bootstrap servers: 127.0.0.1:{new},{first.broker(2).bootstrap}" in moved.stdout
        assert c.registered_brokers() == [1, 2]
        ok(kt("cluster", "down", "--dir", d))
        ok(kt("cluster", "up", "--dir", d))
        assert LocalCluster.load(d).broker(1).port == new  # the new port is kept
    finally:
        ok(kt("cluster", "down", "--dir", d, "--kill"))


@pytest.mark.cluster
def test_logs_per_broker_and_follow(tmp_path: Path) -> None:
    """Each broker logs to its own directory; `kt cluster logs` prints one log as it
    is, several with a prefix per line, the last N lines with -n, and with -f
    follows a broker through a SIGKILL and its restart until Ctrl-C (exit 0)."""
    d = str(tmp_path / "c")
    ok(kt("cluster", "up", "--dir", d, "--brokers", "2", *QUICK))
    follower = None
    try:
        c = LocalCluster.load(d)
        for b in c.brokers:
            assert b.log_path == c.directory / f"broker-{b.broker_id}" / "broker.log"
            assert f"kt broker ready: {b.bootstrap}" in b.log_path.read_text()
        one = ok(kt("cluster", "logs", "--dir", d, "--broker", "2")).stdout
        assert one == c.broker(2).log_path.read_text()
        assert "kt broker 2 started" in one and "kt broker 1 started" not in one
        last = ok(kt("cluster", "logs", "--dir", d, "--broker", "1", "-n", "2")).stdout
        assert last.splitlines() == c.broker(1).log_path.read_text().splitlines()[-2:]
        both = ok(kt("cluster", "logs", "--dir", d)).stdout.splitlines()
        names = {line.split(" | ", 1)[0] for line in both}
        assert names == {"zookeeper", "broker-1 ", "broker-2 "}
        assert f"broker-2  | kt broker ready: {c.broker(2).bootstrap}" in both
        zk = ok(kt("cluster", "logs", "--dir", d, "--zookeeper")).stdout
        assert "binding to port" in zk.lower() or "clientPort" in zk

        follower = subprocess.Popen(
            [sys.executable, "-m", "kt.cli", "cluster", "logs", "--dir", d, "--broker", "2", "-f"],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )  # fmt: skip
        assert follower.stdout is not None
        # a thread reads, so a follower that prints nothing fails the deadline, not hangs
        out: queue.Queue[str] = queue.Queue()
        stream = follower.stdout
        threading.Thread(target=lambda: [out.put(line) for line in stream], daemon=True).start()

        def read_until_ready() -> list[str]:
            lines: list[str] = []
            deadline = time.monotonic() + 60
            while not lines or not lines[-1].startswith("kt broker ready"):
                try:
                    lines.append(out.get(timeout=max(0.1, deadline - time.monotonic())).rstrip())
                except queue.Empty:
                    raise AssertionError(
                        f"no ready line from kt cluster logs -f: {lines}"
                    ) from None
            return lines

        first = read_until_ready()  # what was there: now it follows
        assert first == one.splitlines()[: len(first)]
        ok(kt("cluster", "restart", "--dir", d, "--broker", "2", "--kill"))
        seen = read_until_ready()
        # broker 2 may log more before the kill; then the kill, the start, the ready line
        kill = next(i for i, line in enumerate(seen) if "--- kt cluster: killing broker 2" in line)
        assert seen[kill].endswith(", SIGKILL) ---")
        assert any("--- kt cluster: starting broker 2 on " in line for line in seen[kill:])
        follower.send_signal(signal.SIGINT)
        assert follower.wait(timeout=30) == 0
        assert follower.stderr is not None and follower.stderr.read() == ""
    finally:
        if follower is not None and follower.poll() is None:
            follower.kill()
        ok(kt("cluster", "down", "--dir", d, "--kill"))
