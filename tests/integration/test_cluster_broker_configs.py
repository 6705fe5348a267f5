"""Dynamic broker configs in a 3-broker ZooKeeper cluster.

A per-broker config and the cluster-wide default are stored as Kafka stores them
(`/config/brokers/<id>`, `/config/brokers/<default>`, a `config_change_N`
notification), byte for byte; every broker concerned applies them (its
DescribeConfigs and its topics' inherited values show them); a per-broker change
must be sent to that broker; a restarted broker reads them back from ZooKeeper.
"""

from __future__ import annotations

import socket
import time
from collections.abc import Callable
from typing import Any

import pytest
from cluster_harness import zk_client, zk_get
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
    NewTopic,
)

from kt.protocol import ClientConnection, apis
from kt.tools.local_cluster import LocalCluster

pytestmark = [pytest.mark.integration, pytest.mark.cluster, pytest.mark.timeout(180)]


def call(port: int, api: Any, version: int, **body: Any) -> Any:
    """One request to the broker on `port`; the decoded response body."""
    conn = ClientConnection("kt-test")
    _, data = conn.send_request(api.key, version, api.request(**body))
    with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
        s.sendall(data)
        while True:
            chunk = s.recv(65536)
            assert chunk, "broker closed the connection"
            got = conn.receive_data(chunk)
            if got:
                return got[0].body


def legacy_alter(port: int, name: str, configs: dict[str, str]) -> tuple[int, str | None]:
    body = call(port, apis.ALTER_CONFIGS, 2, validate_only=False,
                resources=[{"resource_type": 4, "resource_name": name,
                            "configs": [{"name": k, "value": v}
                                        for k, v in configs.items()]}])  # fmt: skip
    return body.responses[0].error_code, body.responses[0].error_message


def described(port: int, name: str) -> dict[str, tuple[str | None, int]]:
    body = call(port, apis.DESCRIBE_CONFIGS, 4, include_synonyms=True,
                include_documentation=False,
                resources=[{"resource_type": 4, "resource_name": name,
                            "configuration_keys": None}])  # fmt: skip
    (r,) = body.results
    assert r.error_code == 0, r.error_message
    return {c.name: (c.value, c.config_source) for c in r.configs}


def wait_until(check: Callable[[], Any], timeout: float = 20.0) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        got = check()
        if got or time.monotonic() > deadline:
            return got
        time.sleep(0.2)


def last_notification(c: LocalCluster) -> bytes | None:
    with zk_client(c) as zk:
        children = sorted(zk.get_children("/config/changes"))
        return bytes(zk.get(f"/config/changes/{children[-1]}")[0]) if children else None


def test_broker_configs_are_stored_as_kafka_and_applied_by_every_broker(
    cluster: LocalCluster,
) -> None:
    c = cluster
    port = {b.broker_id: b.port for b in c.brokers}
    a = AdminClient({"bootstrap.servers": c.bootstrap_servers})
    rate = "follower.replication.throttled.rate"
    try:
        # per broker: librdkafka sends broker 2's resource to broker 2
        res = ConfigResource("broker", "2", incremental_configs=[
            ConfigEntry(rate, "1000", incremental_operation=AlterConfigOpType.SET)])  # fmt: skip
        a.incremental_alter_configs([res])[res].result(timeout=15)
        assert zk_get(c, "/config/brokers/2") == (
            b'{"version":1,"config":{"follower.replication.throttled.rate":"1000"}}'
        )
        assert last_notification(c) == b'{"version":2,"entity_path":"brokers/2"}'
        assert wait_until(lambda: described(port[2], "2").get(rate) == ("1000", 2))
        # another broker refuses broker 2's resource, as Kafka does
        assert legacy_alter(port[1], "2", {rate: "5"}) == (
            42, "Unexpected broker id, expected 1, but received 2")  # fmt: skip

        # the cluster-wide default, sent to broker 1, reaches every broker
        assert legacy_alter(port[1], "", {"log.retention.ms": "86400000"}) == (0, None)
        assert zk_get(c, "/config/brokers/<default>") == (
            b'{"version":1,"config":{"log.retention.ms":"86400000"}}'
        )
        assert last_notification(c) == b'{"version":2,"entity_path":"brokers/<default>"}'
        for b in (1, 2, 3):
            assert wait_until(
                lambda b=b: described(port[b], "").get("log.retention.ms") == ("86400000", 3)
            ), f"broker {b} did not apply the default"
            mine = described(port[b], str(b))
            assert mine["log.retention.ms"] == ("86400000", 3)
            # only broker 2 has the per-broker rate
            assert (rate in mine) == (b == 2)

        # a topic without its own retention inherits the dynamic default
        a.create_topics([NewTopic("dyn-inherit", 3, 3)])["dyn-inherit"].result(timeout=30)
        tres = ConfigResource("topic", "dyn-inherit")
        t = a.describe_configs([tres])[tres].result(timeout=15)
        assert t["retention.ms"].value == "86400000"
        assert t["retention.ms"].source == ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG.value

        # a restarted broker reads both from ZooKeeper
        c.restart_broker(2)
        got = described(c.broker(2).port, "2")
        assert got[rate] == ("1000", 2) and got["log.retention.ms"] == ("86400000", 3)
    finally:
        # restore: no dynamic broker configs
        for p, name in ((port[2], "2"), (port[1], "")):
            wait_until(lambda p=p, name=name: legacy_alter(p, name, {}) == (0, None))
        a.delete_topics(["dyn-inherit"])
    assert zk_get(c, "/config/brokers/<default>") == b'{"version":1,"config":{}}'
    for b in (1, 2, 3):
        assert wait_until(lambda b=b: described(port[b], "") == {})


def test_unclean_election_default_turned_on_elects_offline_partitions(
    cluster: LocalCluster,
) -> None:
    """As Kafka's controller on UncleanLeaderElectionEnable: a partition left with only
    an out-of-sync replica alive gets it as leader once the cluster-wide default allows
    unclean elections, without any broker change."""
    from cluster_harness import (
        create_topic,
        partition_state,
        wait_controller,
        wait_for,
        wait_for_isr,
        wait_unregistered,
        wait_zk_leader,
    )

    c = cluster
    topic = "dyn-unclean"
    ctl = wait_controller(c)
    lead, follow = (b for b in (1, 2, 3) if b != ctl)
    create_topic(c, topic, "--replica-assignment", f"{lead}:{follow}")
    wait_for_isr(c, topic, 0, [lead, follow])
    c.stop_broker(follow, kill=True)
    wait_for_isr(c, topic, 0, [lead])
    c.stop_broker(lead, kill=True)
    wait_unregistered(c, lead)
    wait_for(lambda: partition_state(c, topic, 0)["leader"] == -1, "the partition offline")
    c.start_broker(follow)
    try:
        # the default forbids it: the out-of-sync replica does not lead
        time.sleep(2)
        assert partition_state(c, topic, 0)["leader"] == -1
        port = c.broker(ctl).port
        assert legacy_alter(port, "", {"unclean.leader.election.enable": "true"}) == (0, None)
        assert wait_zk_leader(c, topic, 0) == follow
        assert partition_state(c, topic, 0)["isr"] == [follow]
    finally:
        wait_until(lambda: legacy_alter(c.broker(ctl).port, "", {}) == (0, None))
        AdminClient({"bootstrap.servers": c.bootstrap_servers}).delete_topics([topic])
