"""A three-broker kt cluster through a real ZooKeeper: the znodes it writes (read back
with kazoo, compared with Kafka's JSON shapes), start-up refusals (duplicate broker id,
ZooKeeper down), and what Metadata and `kt topic` show (issue 10 §6, items 1 and 2).
"""

from __future__ import annotations

import base64
import re
import subprocess
import time
from pathlib import Path

import pytest
from cluster_harness import (
    create_topic,
    kt,
    live_bootstrap,
    partition_state,
    registered,
    wait_for,
    zk_client,
    zk_get,
    zk_json,
)

from kt.tools.local_cluster import LocalCluster, free_port, kt_command

pytestmark = [pytest.mark.integration, pytest.mark.cluster]


def test_zookeeper_layout_matches_kafka(cluster: LocalCluster) -> None:
    create_topic(cluster, "layout", "--partitions", "2", "--replication-factor", "3",
                 "--config", "min.insync.replicas=2")  # fmt: skip
    assert registered(cluster) == [1, 2, 3]
    for b in cluster.brokers:
        doc = zk_json(cluster, f"/brokers/ids/{b.broker_id}")
        assert doc["version"] == 5
        assert doc["host"] == "127.0.0.1" and doc["port"] == b.port
        assert doc["endpoints"] == [f"PLAINTEXT://127.0.0.1:{b.port}"]
        assert doc["listener_security_protocol_map"] == {"PLAINTEXT": "PLAINTEXT"}
        assert doc["jmx_port"] == -1
        assert isinstance(doc["timestamp"], str) and doc["timestamp"].isdigit()
        assert doc["rack"] == b.rack
        assert isinstance(doc["features"], dict)
    with zk_client(cluster) as zk:
        for b in cluster.brokers:  # registrations are ephemeral, owned by the broker
            assert zk.exists(f"/brokers/ids/{b.broker_id}").ephemeralOwner != 0
        ctl = zk.exists("/controller")
        assert ctl is not None and ctl.ephemeralOwner != 0
        assert zk.exists("/cluster/id").ephemeralOwner == 0

    topic = zk_json(cluster, "/brokers/topics/layout")
    assert topic["version"] == 3
    assert set(topic) == {"version", "partitions", "adding_replicas", "removing_replicas",
                          "topic_id"}  # fmt: skip
    assert topic["adding_replicas"] == {} and topic["removing_replicas"] == {}
    assert sorted(topic["partitions"]) == ["0", "1"]
    assert all(sorted(r) == [1, 2, 3] for r in topic["partitions"].values())
    assert len(base64.urlsafe_b64decode(topic["topic_id"] + "==")) == 16

    epoch = int(zk_get(cluster, "/controller_epoch"))  # plain integer text, not JSON
    assert epoch >= 1
    for p in (0, 1):
        state = partition_state(cluster, "layout", p)
        assert set(state) == {"controller_epoch", "leader", "version", "leader_epoch", "isr"}
        assert state["version"] == 1 and state["leader"] in topic["partitions"][str(p)]
        assert state["leader"] == topic["partitions"][str(p)][0]  # preferred leader
        assert sorted(state["isr"]) == [1, 2, 3]
        assert 1 <= state["controller_epoch"] <= epoch and state["leader_epoch"] >= 0

    ctl = zk_json(cluster, "/controller")
    assert ctl["version"] == 2 and ctl["brokerid"] in (1, 2, 3)
    assert isinstance(ctl["timestamp"], str) and ctl["timestamp"].isdigit()
    assert ctl.get("kraftControllerEpoch", -1) == -1

    cid = zk_json(cluster, "/cluster/id")
    assert cid["version"] == "1"  # a string in Kafka's ClusterIdZNode
    assert len(cid["id"]) == 22
    assert zk_json(cluster, "/config/topics/layout") == {
        "version": 1,
        "config": {"min.insync.replicas": "2"},
    }


def _broker_process(
    tmp: Path, zookeeper_connect: str, broker_id: int, **extra: str
) -> subprocess.Popen[bytes]:
    port = free_port()
    props = {
        "broker.id": str(broker_id),
        "log.dirs": str(tmp / "data"),
        "listeners": f"PLAINTEXT://127.0.0.1:{port}",
        "zookeeper.connect": zookeeper_connect,
        **extra,
    }
    args = [*kt_command(), "broker", "start"]
    for k, v in props.items():
        args += ["--override", f"{k}={v}"]
    return subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def _error_lines(stderr: bytes) -> list[str]:
    """The broker logs on stderr as it goes; a refusal ends it with one `kt: error:`
    line (the console convention) and no traceback."""
    text = stderr.decode(errors="replace")
    assert "Traceback" not in text, text[-3000:]
    lines = [ln for ln in text.splitlines() if ln.strip()]
    assert lines and lines[-1].startswith("kt: error: "), lines[-5:]
    return [ln for ln in lines if ln.startswith("kt: error: ")]


def test_duplicate_broker_id_is_refused(cluster: LocalCluster, tmp_path: Path) -> None:
    before = zk_json(cluster, "/brokers/ids/2")
    proc = _broker_process(tmp_path, cluster.zookeeper_connect, 2,
                           **{"zookeeper.session.timeout.ms": "6000"})  # fmt: skip
    try:
        out, err = proc.communicate(timeout=60)
    finally:
        proc.kill()
    assert proc.returncode not in (0, None)
    assert b"kt broker ready" not in out
    lines = _error_lines(err)
    assert len(lines) == 1, lines
    assert re.search(r"\b2\b", lines[0]) and re.search(r"regist|in use|exist", lines[0], re.I)
    assert zk_json(cluster, "/brokers/ids/2") == before  # the live broker keeps its znode
    assert registered(cluster) == [1, 2, 3]


def test_zookeeper_down_at_start_fails_in_one_line(tmp_path: Path) -> None:
    dead = f"127.0.0.1:{free_port()}/kt"
    started = time.monotonic()
    proc = _broker_process(tmp_path, dead, 1, **{"zookeeper.connection.timeout.ms": "3000"})
    try:
        out, err = proc.communicate(timeout=60)
    finally:
        proc.kill()
    elapsed = time.monotonic() - started
    assert proc.returncode not in (0, None)
    assert b"kt broker ready" not in out
    lines = _error_lines(err)
    assert len(lines) == 1, lines
    assert "zookeeper" in lines[0].lower() and dead.split("/")[0] in lines[0]
    # and nothing before it: no retry chatter from the ZooKeeper client
    assert [ln for ln in err.decode().splitlines() if ln.strip()] == lines
    assert elapsed >= 3.0  # it waited zookeeper.connection.timeout.ms first


def test_metadata_shows_brokers_racks_and_the_controller(cluster: LocalCluster) -> None:
    from kafka.admin import KafkaAdminClient

    admin = KafkaAdminClient(bootstrap_servers=cluster.bootstrap_servers)
    try:
        described = admin.describe_cluster()
    finally:
        admin.close()
    brokers = sorted((b["broker_id"], b["port"], b["rack"]) for b in described["brokers"])
    assert brokers == [(b.broker_id, b.port, b.rack) for b in cluster.brokers]
    ctl = zk_json(cluster, "/controller")["brokerid"]
    assert described["controller_id"] == ctl
    assert described["cluster_id"] == zk_json(cluster, "/cluster/id")["id"]

    from cluster_harness import metadata

    for b in cluster.brokers:  # every broker tells the same story
        md = metadata(b.bootstrap)
        assert md.controller_id == ctl
        assert sorted(md.brokers) == [1, 2, 3]


def test_topic_create_and_describe(cluster: LocalCluster) -> None:
    create_topic(cluster, "rf3", "--partitions", "3", "--replication-factor", "3",
                 "--config", "min.insync.replicas=2")  # fmt: skip
    create_topic(cluster, "manual", "--replica-assignment", "3:1,1:2,2:3")
    assignment = zk_json(cluster, "/brokers/topics/manual")["partitions"]
    assert assignment == {"0": [3, 1], "1": [1, 2], "2": [2, 3]}
    rf3 = zk_json(cluster, "/brokers/topics/rf3")["partitions"]
    # rack-aware: three racks, RF 3, so every partition has one replica per rack; the
    # leaders (first replicas) are spread over the brokers
    assert all(sorted(r) == [1, 2, 3] for r in rf3.values())
    assert sorted(r[0] for r in rf3.values()) == [1, 2, 3]

    r = kt("topic", "describe", "-b", live_bootstrap(cluster), "--topic", "manual")
    assert r.exit_code == 0, r.stderr
    lines = r.stdout.splitlines()
    assert re.fullmatch(
        r"Topic: manual\tTopicId: \S{22}\tPartitionCount: 3\tReplicationFactor: 2\tConfigs: ",
        lines[0],
    ), lines[0]
    assert lines[1:] == [
        "\tTopic: manual\tPartition: 0\tLeader: 3\tReplicas: 3,1\tIsr: 3,1"
        "\tElr: N/A\tLastKnownElr: N/A",
        "\tTopic: manual\tPartition: 1\tLeader: 1\tReplicas: 1,2\tIsr: 1,2"
        "\tElr: N/A\tLastKnownElr: N/A",
        "\tTopic: manual\tPartition: 2\tLeader: 2\tReplicas: 2,3\tIsr: 2,3"
        "\tElr: N/A\tLastKnownElr: N/A",
    ]
    r = kt("topic", "describe", "-b", live_bootstrap(cluster), "--topic", "rf3")
    assert r.exit_code == 0, r.stderr
    head = r.stdout.splitlines()[0]
    assert "\tPartitionCount: 3\tReplicationFactor: 3\t" in head
    # Kafka's kafka-topics --describe shows the topic's overrides on the first line
    assert head.endswith("\tConfigs: min.insync.replicas=2"), head

    bad = kt("topic", "create", "-b", live_bootstrap(cluster), "--topic", "toomany",
             "--replication-factor", "4")  # fmt: skip
    assert bad.exit_code == 1 and "replication factor" in bad.stderr.lower(), bad.stderr


def test_every_broker_serves_the_topic_config_overrides(cluster: LocalCluster) -> None:
    """DescribeConfigs answered by each broker in turn shows the topic's override (each
    broker must also apply it: min.insync.replicas is enforced by whichever leads)."""
    import asyncio

    from kt.client import KafkaClient

    create_topic(cluster, "cfg", "--partitions", "1", "--replication-factor", "3",
                 "--config", "min.insync.replicas=2")  # fmt: skip

    async def describe(bootstrap: str) -> tuple[str, int]:
        client = KafkaClient(bootstrap)
        try:
            entries = await client.describe_configs(2, "cfg", include_synonyms=False)
        finally:
            await client.close()
        [e] = [e for e in entries if e.name == "min.insync.replicas"]
        return e.value, e.source

    for b in cluster.brokers:
        # config changes reach the other brokers through /config/changes: soon, not at once
        wait_for(lambda b=b: asyncio.run(describe(b.bootstrap)) == ("2", 1),
                 f"broker {b.broker_id} to describe min.insync.replicas=2 "
                 f"(DYNAMIC_TOPIC_CONFIG) for topic cfg", timeout=30)  # fmt: skip
