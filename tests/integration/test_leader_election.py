"""Leader elections end to end: `kt leader-election` and ElectLeaders from
confluent-kafka against the single-node broker; on a 3-broker ZooKeeper cluster, a
preferred election (also sent to a broker that is not the controller, which forwards
it) restores the preferred leaders after a bounce, and the auto leader rebalance does
it by itself."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

from kt.cli import cli
from kt.client import KafkaClient
from kt.protocol import ErrorCode, apis

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    from broker_harness import BrokerProcess, free_port

    b = BrokerProcess(tmp_path_factory.mktemp("elect") / "data", free_port()).start()
    r = CliRunner().invoke(cli, ["topic", "create", "--topic", "el", "--partitions", "2",
                                 "-b", b.bootstrap])  # fmt: skip
    assert r.exit_code == 0, r.stderr
    yield b
    b.kill()


def kt(bootstrap: str, *args: str) -> Result:
    return CliRunner().invoke(cli, [*args, "-b", bootstrap])


def test_preferred_leader_already_elected(broker: Any) -> None:
    r = kt(broker.bootstrap, "leader-election", "--election-type", "preferred",
           "--topic", "el", "--partition", "0")  # fmt: skip
    assert (r.exit_code, r.stdout) == (0, "Valid replica already elected for partitions el-0\n")
    r = kt(broker.bootstrap, "leader-election", "--election-type", "unclean",
           "--topic", "el", "--partition", "1")  # fmt: skip
    assert (r.exit_code, r.stdout) == (0, "Valid replica already elected for partitions el-1\n")


def test_all_partitions_lists_nothing_when_every_leader_is_preferred(broker: Any) -> None:
    r = kt(broker.bootstrap, "leader-election", "--election-type", "preferred",
           "--all-topic-partitions")  # fmt: skip
    assert (r.exit_code, r.stdout) == (0, "")
    r = kt(broker.bootstrap, "topic", "describe", "--under-preferred-replica-partitions")
    assert (r.exit_code, r.stdout) == (0, "")


def test_unknown_partition_fails(broker: Any, tmp_path: Path) -> None:
    f = tmp_path / "e.json"
    f.write_text(json.dumps({"partitions": [{"topic": "el", "partition": 9},
                                            {"topic": "el", "partition": 0}]}))  # fmt: skip
    r = kt(broker.bootstrap, "leader-election", "--election-type", "preferred",
           "--path-to-json-file", str(f))  # fmt: skip
    assert r.exit_code == 1
    assert r.stdout.splitlines() == [
        "Valid replica already elected for partitions el-0",
        "Error completing leader election (PREFERRED) for partition: el-9: "
        "org.apache.kafka.common.errors.UnknownTopicOrPartitionException: "
        "The partition does not exist.",
    ]
    assert r.stderr == "kt: error: 1 replica(s) could not be elected\n"


def test_confluent_kafka_elect_leaders(broker: Any) -> None:
    from confluent_kafka import ElectionType, TopicPartition
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    fut = admin.elect_leaders(ElectionType.PREFERRED, [TopicPartition("el", 0)])
    results = fut.result(timeout=30)
    assert [(tp.topic, tp.partition) for tp in results] == [("el", 0)]
    err = next(iter(results.values()))
    assert err is not None and err.code() == ErrorCode.ELECTION_NOT_NEEDED


# --- three brokers -------------------------------------------------------------------


def cluster(tmp_path: Path, **overrides: str) -> Any:
    from kt.tools.local_cluster import ClusterModeUnsupportedError, LocalCluster

    c = LocalCluster.create(
        tmp_path / "c",
        3,
        overrides={
            "group.initial.rebalance.delay.ms": "0",
            "replica.lag.time.max.ms": "3000",
            "zookeeper.session.timeout.ms": "6000",
            **overrides,
        },
    )
    try:
        c.start(register_timeout=10.0)
    except ClusterModeUnsupportedError as exc:
        pytest.skip(f"kt broker start has no cluster mode yet: {exc}")
    return c


def wait_for(check: Callable[[], bool], timeout: float = 45.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.3)


def leaders(c: Any) -> dict[int, int]:
    r = kt(c.bootstrap_servers, "topic", "describe", "--topic", "pl", "--json")
    if r.exit_code != 0:  # e.g. a broker going away mid-request: ask again
        return {}
    return {p["partition"]: p["leader"] for p in json.loads(r.stdout)["partitions"]}


def isr_full(c: Any) -> bool:
    r = kt(c.bootstrap_servers, "topic", "describe", "--topic", "pl", "--json")
    return r.exit_code == 0 and all(len(p["isr"]) == 3 for p in json.loads(r.stdout)["partitions"])


def create_pl(c: Any) -> None:
    """Topic `pl`: broker N is the preferred leader of partition N-1; one record in
    each partition."""
    r = kt(c.bootstrap_servers, "topic", "create", "--topic", "pl",
           "--replica-assignment", "1:2:3,2:3:1,3:1:2")  # fmt: skip
    assert r.exit_code == 0, r.stderr
    wait_for(lambda: leaders(c) == {0: 1, 1: 2, 2: 3})
    # A record in each partition, acknowledged by all three replicas: the followers
    # replicate before the bounce, as in a real cluster.
    for p in range(3):
        r = CliRunner().invoke(cli, ["produce", "pl", "-p", str(p), "--acks", "all",
                                     "-b", c.bootstrap_servers], input=f"r{p}\n")  # fmt: skip
        assert r.exit_code == 0, r.stderr


def bounce_broker_1(c: Any) -> None:
    """Stop broker 1 cleanly (its leadership moves away, it leaves the ISRs) and start
    it again; wait until it is back in every ISR. That is replication's job, not the
    elections': while the restarted broker does not rejoin, the test is an expected
    failure saying so (it runs in full once it does)."""
    c.stop_broker(1)
    wait_for(lambda: leaders(c).get(0) in (2, 3))
    c.start_broker(1)
    try:
        wait_for(lambda: isr_full(c), timeout=25.0)
    except AssertionError:
        pytest.xfail("the restarted broker 1 did not rejoin the ISRs within 25s (replication)")


@pytest.mark.cluster
def test_preferred_election_restores_preferred_leaders_after_a_bounce(tmp_path: Path) -> None:
    c = cluster(tmp_path, **{"auto.leader.rebalance.enable": "false"})
    try:
        create_pl(c)

        # Sent to a broker that is not the controller, it is forwarded to the controller.
        async def via_follower(partitions: list[int]) -> dict[int, int]:
            client = KafkaClient(c.bootstrap_servers)
            await client.start()
            try:
                controller = await client.controller()
                other = next(n for n in (1, 2, 3) if n != controller)
                body = apis.ELECT_LEADERS.request(
                    election_type=0,
                    topic_partitions=[{"topic": "pl", "partitions": partitions}],
                    timeout_ms=30000,
                )
                resp = await client.send(apis.ELECT_LEADERS, body, other)
            finally:
                await client.close()
            assert resp.error_code == ErrorCode.NONE
            results = resp.replica_election_results[0].partition_result
            return {p.partition_id: p.error_code for p in results}

        assert asyncio.run(via_follower([1, 9])) == {
            1: ErrorCode.ELECTION_NOT_NEEDED,
            9: ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
        }

        bounce_broker_1(c)
        wait_for(lambda: leaders(c).get(0) in (2, 3))  # no auto rebalance: it stays
        under = kt(c.bootstrap_servers, "topic", "describe", "--under-preferred-replica-partitions")
        assert under.stdout.startswith("\tTopic: pl\tPartition: 0\tLeader: ")
        d = json.loads(kt(c.bootstrap_servers, "cluster", "describe", "--json").stdout)
        b1 = next(b for b in d["brokers"] if b["id"] == 1)
        assert b1["leader_imbalance_percent"] > 0

        assert asyncio.run(via_follower([0, 1])) == {
            0: ErrorCode.NONE,
            1: ErrorCode.ELECTION_NOT_NEEDED,
        }
        assert leaders(c) == {0: 1, 1: 2, 2: 3}
        r = kt(c.bootstrap_servers, "leader-election", "--election-type", "preferred",
               "--all-topic-partitions")  # fmt: skip
        assert (r.exit_code, r.stdout) == (0, "")
    finally:
        c.stop(kill=True)


@pytest.mark.cluster
def test_auto_leader_rebalance_restores_preferred_leaders(tmp_path: Path) -> None:
    c = cluster(tmp_path, **{"leader.imbalance.check.interval.seconds": "1"})
    try:
        create_pl(c)
        bounce_broker_1(c)
        wait_for(lambda: leaders(c) == {0: 1, 1: 2, 2: 3})
    finally:
        c.stop(kill=True)
