"""LocalCluster without processes: layout, ports, racks, state file, the java check."""

from __future__ import annotations

import json
import os
import socket
from pathlib import Path

import pytest
from click.testing import CliRunner

from kt.cli import cli
from kt.tools import local_cluster
from kt.tools.cluster_logs import LogSource, ended_on_its_own, follow_logs, tail_lines
from kt.tools.local_cluster import ClusterError, LocalCluster, check_java
from kt.tools.local_cluster_cmd import down_hints


def test_create_gives_ids_ports_racks_and_dirs(tmp_path: Path) -> None:
    c = LocalCluster.create(tmp_path, 4, racks=["a", "b"], port_base=19092, chroot="/kt/")
    assert [(b.broker_id, b.port, b.rack) for b in c.brokers] == [
        (1, 19092, "a"),
        (2, 19093, "b"),
        (3, 19094, "a"),
        (4, 19095, "b"),
    ]
    assert c.bootstrap_servers == "127.0.0.1:19092,127.0.0.1:19093,127.0.0.1:19094,127.0.0.1:19095"
    assert c.broker(3).data_dir == tmp_path / "broker-3" / "data"
    assert c.chroot == "/kt"
    args = c._broker_args(c.broker(2))
    assert "broker.id=2" in args and "broker.rack=b" in args
    assert f"zookeeper.connect={c.zookeeper_address}/kt" in args
    with pytest.raises(ClusterError, match="no broker 9"):
        c.broker(9)
    with pytest.raises(ClusterError, match="chroot"):
        LocalCluster.create(tmp_path, 1, chroot="kt")


def test_state_round_trip(tmp_path: Path) -> None:
    c = LocalCluster.create(tmp_path, 2, racks=["r1"], overrides={"num.partitions": "3"})
    c.save()
    again = LocalCluster.load(tmp_path)
    assert again.bootstrap_servers == c.bootstrap_servers
    # a cluster of two gets internal-topic factors it can meet
    assert again.overrides == {
        "num.partitions": "3",
        "offsets.topic.replication.factor": "2",
        "transaction.state.log.replication.factor": "2",
        "transaction.state.log.min.isr": "1",
    }
    mine = LocalCluster.create(tmp_path, 5, overrides={"offsets.topic.replication.factor": "4"})
    assert mine.overrides == {"offsets.topic.replication.factor": "4"}
    assert not again.running  # pids 0: nothing runs
    with pytest.raises(ClusterError, match="no cluster here"):
        LocalCluster.load(tmp_path / "elsewhere")


def test_zookeeper_tick_follows_the_brokers_session_timeout(tmp_path: Path) -> None:
    """ZooKeeper expires sessions in tickTime buckets: the tick is a sixtieth of the
    brokers' zookeeper.session.timeout.ms (Kafka's 18 s by default), 100 ms to 2 s."""
    cases = {None: 300, "6000": 100, "60000": 1000, "500": 100, "300000": 2000}
    for i, (session, tick) in enumerate(cases.items()):
        overrides = {} if session is None else {"zookeeper.session.timeout.ms": session}
        c = LocalCluster.create(tmp_path / str(i), 1, overrides=overrides)
        assert c.zookeeper is not None
        assert f"tickTime={tick}\n" in c.zookeeper.config_text()
        # clients asking for long sessions still get them (ZooKeeper's cap is 20 ticks)
        assert "maxSessionTimeout=40000\n" in c.zookeeper.config_text()
        c.save()
        again = LocalCluster.load(tmp_path / str(i)).zookeeper
        assert again is not None and again.tick_time_ms == tick


def test_missing_java_is_one_line(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr(local_cluster.shutil, "which", lambda name: None)
    with pytest.raises(ClusterError, match="scripts/setup"):
        check_java()
    r = CliRunner().invoke(cli, ["cluster", "up", "--dir", str(tmp_path)])
    assert r.exit_code == 1
    assert r.stderr == "kt: error: java not found: scripts/setup installs it (Debian's zookeeper)\n"


def test_missing_jar(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr(local_cluster, "ZOOKEEPER_JAR", tmp_path / "nope.jar")
    with pytest.raises(ClusterError, match=r"nope\.jar not found: scripts/setup installs it"):
        check_java()


def test_ports_racks_and_overrides_are_kept_for_the_next_up(tmp_path: Path) -> None:
    """A re-created cluster gets each process's recorded port back while it is free;
    one that another process holds moves to a free port, said in `notes`."""
    first = LocalCluster.create(tmp_path, 3, racks=["x", "y"], overrides={"num.partitions": "2"})
    assert first.zookeeper is not None
    first.zookeeper.port = local_cluster.free_port()
    first.save()
    before = LocalCluster.load(tmp_path)
    assert before.racks == ["x", "y"] and before.user_overrides == {"num.partitions": "2"}
    again = LocalCluster.create(tmp_path, 3, previous=before)
    assert [b.port for b in again.brokers] == [b.port for b in first.brokers]
    assert again.zookeeper_address == first.zookeeper_address and again.notes == []

    with socket.socket() as holder:
        holder.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        holder.bind(("127.0.0.1", first.broker(2).port))
        holder.listen()
        moved = LocalCluster.create(tmp_path, 4, previous=before)
    ports = [b.port for b in moved.brokers]
    assert ports[0] == first.broker(1).port and ports[2] == first.broker(3).port
    assert ports[1] != first.broker(2).port and len(set(ports)) == 4
    assert moved.zookeeper is not None and moved.zookeeper.port not in ports
    assert moved.notes == [
        f"broker 2's port 127.0.0.1:{first.broker(2).port} is taken by another process: "
        f"broker 2 listens on 127.0.0.1:{ports[1]} now"
    ]
    # an explicit --port-base wins over the recorded ports
    based = LocalCluster.create(tmp_path, 2, port_base=19092, previous=before)
    assert [b.port for b in based.brokers] == [19092, 19093]


def test_status_hints_say_how_to_start_what_is_down(tmp_path: Path) -> None:
    c = LocalCluster.create(tmp_path, 2)
    c.save()  # pids 0: nothing runs
    assert down_hints(c, tmp_path) == [
        f"nothing runs: start the cluster with: kt cluster up --dir {tmp_path}"
    ]
    assert [p["state"] for p in c.status()] == ["stopped"] * 3
    r = CliRunner().invoke(cli, ["cluster", "status", "--dir", str(tmp_path)])
    assert (
        r.exit_code == 1
        and r.stderr
        == f"kt: nothing runs: start the cluster with: kt cluster up --dir {tmp_path}\n"
    )


def test_log_tail_and_follow(tmp_path: Path) -> None:
    log = tmp_path / "broker.log"
    log.write_bytes(b"one\ntwo\nthree\npart")
    assert tail_lines(log, None) == (["one", "two", "three"], 14)
    assert tail_lines(log, 2) == (["two", "three"], 14)
    assert tail_lines(log, 0) == ([], 14)
    assert tail_lines(tmp_path / "none.log", 5) == ([], 0)

    later = tmp_path / "later.log"  # a log that appears while following
    sources = [LogSource("b1", log), LogSource("b2", later)]
    got: list[tuple[str, str]] = []
    steps = iter(range(10))

    def until() -> bool:
        step = next(steps)
        if step == 1:
            with open(log, "ab") as f:
                f.write(b"ial\nfour\n")
            later.write_text("hello\n")
        if step == 3:
            log.write_text("rotated\n")  # shorter than what was read: read again
        return step >= 5

    follow_logs(sources, {log: 14}, lambda s, line: got.append((s.name, line)), until=until)
    assert got == [("b1", "partial"), ("b1", "four"), ("b2", "hello"), ("b1", "rotated")]


def test_a_process_that_ended_on_its_own_is_told_apart(tmp_path: Path) -> None:
    """kt cluster marks what it does in a process's log: a log whose last mark is a
    start belongs to a process that ended by itself, and its last line is shown."""
    log = tmp_path / "broker.log"
    assert ended_on_its_own(log) is None  # no log at all
    local_cluster.log_marker(log, "starting broker 1 on 127.0.0.1:1")
    assert ended_on_its_own(log) == "(nothing after its start)"
    with open(log, "a") as f:
        f.write("INFO started\nkt: error: log directory /x is not writable\n\n")
    assert ended_on_its_own(log) == "kt: error: log directory /x is not writable"
    local_cluster.log_marker(log, "killing broker 1 (pid 7, SIGKILL)")
    assert ended_on_its_own(log) is None  # kt cluster killed it
    assert (
        log.read_text()
        .splitlines()[-1]
        .endswith(" --- kt cluster: killing broker 1 (pid 7, SIGKILL) ---")
    )

    c = LocalCluster.create(tmp_path / "c", 2)
    c.save()
    local_cluster.log_marker(c.broker(2).log_path, "starting broker 2 on 127.0.0.1:1")
    with open(c.broker(2).log_path, "a") as f:
        f.write("Traceback ...\nMemoryError\n")
    assert c.zookeeper is not None
    c.zookeeper.pid, c.zookeeper.start_time = os.getpid(), None  # "running"
    c.broker(1).pid = os.getpid()
    w = f" --dir {tmp_path / 'c'}"
    assert down_hints(c, tmp_path / "c") == [
        "broker 2 exited, not stopped by kt cluster; its last log line: MemoryError",
        f"broker 2 is down (its log: kt cluster logs --broker 2{w}); "
        f"start it with: kt cluster start --broker 2{w}",
    ]


def test_a_cluster_json_of_an_earlier_kt_is_read(tmp_path: Path) -> None:
    """Files written before racks and user_overrides were recorded: the racks come
    from the brokers, the operator's overrides are the recorded ones less kt's own
    defaults (so a next `up` with fewer brokers gets defaults it can meet)."""
    c = LocalCluster.create(tmp_path, 3, racks=["a", "b", "c"], overrides={"num.partitions": "4"})
    c.save()
    doc = json.loads(c.state_path.read_text())
    del doc["racks"], doc["user_overrides"]
    c.state_path.write_text(json.dumps(doc))
    old = LocalCluster.load(tmp_path)
    assert old.racks == ["a", "b", "c"]
    assert old.user_overrides == {"num.partitions": "4"}
    assert LocalCluster.create(tmp_path, 1, overrides=old.user_overrides).overrides == {
        "offsets.topic.replication.factor": "1",
        "transaction.state.log.replication.factor": "1",
        "transaction.state.log.min.isr": "1",
        "num.partitions": "4",
    }
