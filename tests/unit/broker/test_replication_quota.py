"""Replication throttles (KIP-73): the windowed rate, the throttled-replica lists, who
is throttled (listed, out of the ISR, quota exceeded), and the two dynamic broker
configs set through IncrementalAlterConfigs and applied live from /config/brokers.

The throttle logic is tested alone; the three tests that start the in-process broker
do so on purpose: the root sizing the throttles from the config, and the dynamic
configs' flow (IncrementalAlterConfigs, the coordination store, the config manager,
the root's reconfigure, DescribeConfigs)."""

from __future__ import annotations

import asyncio
from pathlib import Path

from handler_harness import call, open_broker

from kt.broker.config import load_config
from kt.broker.config_settings import throttle_rates
from kt.broker.replication.quota import (
    ReplicationQuota,
    ReplicationThrottles,
    ThrottleRates,
    throttled_partitions,
)
from kt.protocol import ErrorCode, apis
from kt.storage.checkpoint import TopicPartition


class Clock:
    def __init__(self) -> None:
        self.t = 1000.0

    def __call__(self) -> float:
        return self.t


def test_rate_over_windows_counts_at_least_ten_windows():
    clock = Clock()
    q = ReplicationQuota(1000, clock=clock)
    assert not q.is_exceeded()
    q.record(5000)  # one burst: 5000 B over (at least) 10 windows = 500 B/s
    assert q.measured() == 500 and not q.is_exceeded()
    clock.t += 1
    q.record(6000)
    assert q.measured() == 1100 and q.is_exceeded()
    clock.t += 12  # everything slid out of the 11 windows
    assert q.measured() == 0 and not q.is_exceeded()
    assert not ReplicationQuota(None, clock=clock).is_exceeded()


def test_broker_settings_size_the_windows(tmp_path: Path) -> None:
    """replication.quota.window.num / .size.seconds, as Kafka's: with 2 windows the
    elapsed time counts at least one window, so the first burst allowed is one
    window's worth."""
    b = open_broker(tmp_path, **{"replication.quota.window.num": "2",
                                 "replication.quota.window.size.seconds": "3"})  # fmt: skip
    try:
        q = b.replication_throttles.leader
        assert (q.windows, q.window_s) == (2, 3.0)
        q.rate = 1000
        q.record(2900)  # 2900 B over (at least) one window of 3 s
        assert not q.is_exceeded()
        q.record(200)
        assert q.is_exceeded()
    finally:
        b.close()


def test_throttled_replica_lists():
    assert throttled_partitions("0:1,1:2,2:1", 1) == frozenset({0, 2})
    assert throttled_partitions(" 0:1 , 3:1", 1) == frozenset({0, 3})
    assert throttled_partitions("*", 7) is None
    assert throttled_partitions("junk,0:x,5:2", 2) == frozenset({5})


def rates(defaults: dict[str, str], own: dict[str, str]) -> ThrottleRates:
    """The rates the root hands the throttles for these dynamic layers."""
    return throttle_rates(
        load_config(None, {"log.dirs": "/nonexistent"}).with_dynamic(defaults, own)
    )


def test_only_listed_replicas_out_of_the_isr_are_throttled_when_exceeded():
    configs = {"t": {"leader.replication.throttled.replicas": "0:1",
                     "follower.replication.throttled.replicas": "*"}}  # fmt: skip
    th = ReplicationThrottles(1, lambda topic: configs.get(topic, {}))
    tp0, tp1 = TopicPartition("t", 0), TopicPartition("t", 1)
    assert not th.leader_throttled(tp0)  # no rate set: nothing is throttled
    th.reconfigure(rates({"leader.replication.throttled.rate": "10"},
                         {"follower.replication.throttled.rate": "20"}))  # fmt: skip
    assert th.leader.rate == 10 and th.follower.rate == 20
    assert th.leader_throttled(tp0) and not th.leader_throttled(tp1)
    assert th.follower_throttled(tp1)
    th.leader.record(1_000_000)
    assert th.should_leader_throttle(tp0, replica_in_isr=False)
    assert not th.should_leader_throttle(tp0, replica_in_isr=True)
    assert not th.should_leader_throttle(tp1, replica_in_isr=False)
    # the broker's own value wins over <default>; an empty one is no throttle
    th.reconfigure(rates({"leader.replication.throttled.rate": "10"},
                         {"leader.replication.throttled.rate": "99"}))  # fmt: skip
    assert th.leader.rate == 99 and th.follower.rate is None


def test_throttle_rates_are_dynamic_broker_configs(tmp_path: Path) -> None:
    b = open_broker(tmp_path)
    try:
        node = str(b.broker.node_id)

        def alter(name: str, key: str, value: str | None, op: int = 0) -> int:
            body = {"validate_only": False, "resources": [
                {"resource_type": 4, "resource_name": name,
                 "configs": [{"name": key, "config_operation": op, "value": value}]}]}  # fmt: skip
            resp = call(b, apis.INCREMENTAL_ALTER_CONFIGS, 1, body)
            assert resp is not None
            return int(resp.responses[0].error_code)

        assert alter(node, "leader.replication.throttled.rate", "1000") == ErrorCode.NONE
        assert alter("", "follower.replication.throttled.rate", "2000") == ErrorCode.NONE
        assert alter(node, "num.partitions", "5") == ErrorCode.INVALID_REQUEST
        # a bad value: ZooKeeper-mode Kafka answers INVALID_REQUEST (KAFKA-13609)
        assert alter(node, "leader.replication.throttled.rate", "fast") == (
            ErrorCode.INVALID_REQUEST
        )
        th = b.broker.replication_throttles
        for _ in range(100):
            if th.leader.rate == 1000 and th.follower.rate == 2000:
                break
            b.run(asyncio.sleep(0.01))
        assert th.leader.rate == 1000 and th.follower.rate == 2000
        assert alter(node, "leader.replication.throttled.rate", None, op=1) == ErrorCode.NONE
        for _ in range(100):
            if th.leader.rate is None:
                break
            b.run(asyncio.sleep(0.01))
        assert th.leader.rate is None and th.follower.rate == 2000
    finally:
        b.close()


def test_dynamic_rates_are_described_with_their_source(tmp_path: Path) -> None:
    b = open_broker(tmp_path)
    try:
        b.broker.reconfigure(
            {"follower.replication.throttled.rate": "5"}, {"leader.replication.throttled.rate": "7"}
        )
        body = {"include_synonyms": False, "include_documentation": False, "resources": [
            {"resource_type": 4, "resource_name": str(b.broker.node_id),
             "configuration_keys": ["leader.replication.throttled.rate",
                                    "follower.replication.throttled.rate"]}]}  # fmt: skip
        resp = call(b, apis.DESCRIBE_CONFIGS, 4, body)
        assert resp is not None
        got = {c.name: (c.value, c.config_source, c.read_only) for c in resp.results[0].configs}
        # read_only as Kafka says it: the quotas are not in its AllDynamicConfigs
        assert got == {
            "leader.replication.throttled.rate": ("7", 2, True),
            "follower.replication.throttled.rate": ("5", 3, True),
        }
    finally:
        b.close()
