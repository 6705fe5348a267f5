"""LocalCluster without processes: layout, ports, racks, state file, the java check."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from kt.cli import cli
from kt.tools import local_cluster
from kt.tools.local_cluster import ClusterError, LocalCluster, check_java


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
