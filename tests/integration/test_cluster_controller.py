"""Controller failover on a three-broker kt cluster (issue 10 §6, item 4): the controller
SIGKILLed, then the controller frozen (SIGSTOP) past its ZooKeeper session and thawed.
"""

from __future__ import annotations

import pytest
from cluster_harness import (
    SESSION_TIMEOUT_S,
    consume_all,
    controller_epoch,
    controller_id,
    create_topic,
    metadata,
    wait_controller,
    wait_for,
    wait_for_isr,
    wait_registered,
    wait_unregistered,
    zk_client,
)

from kt.tools.local_cluster import LocalCluster

pytestmark = [pytest.mark.integration, pytest.mark.cluster]

FAILOVER_BOUND_S = SESSION_TIMEOUT_S + 25.0


def _partition_states(cluster: LocalCluster) -> dict[str, tuple[dict, int]]:
    """Every partition state znode: path -> (JSON, mzxid)."""
    import json

    out = {}
    with zk_client(cluster) as zk:
        for t in zk.get_children("/brokers/topics"):
            try:
                parts = zk.get_children(f"/brokers/topics/{t}/partitions")
            except Exception:
                continue
            for p in parts:
                path = f"/brokers/topics/{t}/partitions/{p}/state"
                data, stat = zk.get(path)
                out[path] = (json.loads(data), stat.mzxid)
    return out


def _works(cluster: LocalCluster, topic: str) -> None:
    """A new RF=3 topic gets leaders, takes acks=all writes and serves them."""
    from confluent_kafka import Producer

    create_topic(cluster, topic, "--partitions", "1", "--replication-factor", "3")
    p = Producer({"bootstrap.servers": cluster.bootstrap_servers, "acks": "all",
                  "enable.idempotence": True, "message.timeout.ms": 60000})  # fmt: skip
    for i in range(20):
        p.produce(topic, value=b"%d" % i, partition=0)
    assert p.flush(70) == 0
    got = consume_all(cluster.bootstrap_servers, topic, 0, 20)
    assert [v for _, _, v in got] == [b"%d" % i for i in range(20)]


def test_killed_controller_is_replaced_with_the_next_epoch(cluster: LocalCluster) -> None:
    old = wait_controller(cluster)
    x, y = (b for b in (1, 2, 3) if b != old)
    # the controller is also a follower here: it must leave the ISR when it dies
    create_topic(cluster, "ctl-follows", "--replica-assignment", f"{x}:{old}:{y}")
    epoch = controller_epoch(cluster)
    cluster.stop_broker(old, kill=True)
    new = wait_controller(cluster, not_in=[old], timeout=FAILOVER_BOUND_S)
    assert new != old
    assert controller_epoch(cluster) == epoch + 1
    wait_for_isr(cluster, "ctl-follows", 0, [x, y])
    wait_unregistered(cluster, old, timeout=5)  # its session is gone, so is its znode
    for b in cluster.brokers:
        if b.running:
            wait_for(lambda b=b: metadata(b.bootstrap).controller_id == new,
                     f"broker {b.broker_id} to name controller {new}")  # fmt: skip
    cluster.start_broker(old)
    wait_registered(cluster, old)
    assert controller_id(cluster) == new  # a returning broker does not take over
    wait_for_isr(cluster, "ctl-follows", 0, [x, old, y])  # and it catches up
    _works(cluster, "after-kill")


def test_paused_controller_steps_down_and_is_fenced(cluster: LocalCluster) -> None:
    old = wait_controller(cluster)
    epoch = controller_epoch(cluster)
    cluster.pause_broker(old)
    try:
        new = wait_controller(cluster, not_in=[old], timeout=FAILOVER_BOUND_S)
        assert controller_epoch(cluster) == epoch + 1
        wait_unregistered(cluster, old, timeout=5)
        before = _partition_states(cluster)
    finally:
        cluster.resume_broker(old)
    # thawed: its session expired, so it registers again and must not act as controller
    wait_registered(cluster, old, timeout=FAILOVER_BOUND_S)
    for b in cluster.brokers:
        wait_for(lambda b=b: metadata(b.bootstrap).controller_id == new,
                 f"broker {b.broker_id} to name controller {new}")  # fmt: skip
    assert controller_id(cluster) == new
    assert controller_epoch(cluster) == epoch + 1
    _works(cluster, "after-pause")
    # nothing the stale controller wrote got through: every partition state changed
    # since it was thawed carries the new controller's epoch
    after = _partition_states(cluster)
    for path, (state, mzxid) in after.items():
        if path not in before or before[path][1] != mzxid:
            assert state["controller_epoch"] == epoch + 1, (path, state)
    # and the old controller still serves as a broker: it leads nothing stale and the
    # cluster agrees on leaders (Metadata from it matches ZooKeeper)
    md = metadata(cluster.broker(old).bootstrap, "after-pause")
    with zk_client(cluster) as zk:
        import json

        zk_state = json.loads(zk.get("/brokers/topics/after-pause/partitions/0/state")[0])
    wait_for(lambda: metadata(cluster.broker(old).bootstrap, "after-pause")
             .topics["after-pause"].partitions[0].leader == zk_state["leader"],
             "the thawed broker's Metadata to match ZooKeeper")  # fmt: skip
    assert md.controller_id == new
