"""Unclean leader election (issue 10 §6, item 6): an out-of-sync replica is elected
because the topic allows it (unclean.leader.election.enable=true on this topic only);
the old leader comes back with a divergent tail, truncates it to the new leader's log,
and afterwards the replicas' segment files are byte-identical.
"""

from __future__ import annotations

import pytest
from cluster_harness import (
    consume_all,
    create_topic,
    kt,
    live_bootstrap,
    partition_state,
    wait_controller,
    wait_for,
    wait_for_isr,
    wait_unregistered,
    wait_zk_leader,
    zk_json,
)

from kt.tools.local_cluster import LocalCluster

pytestmark = [pytest.mark.integration, pytest.mark.cluster]


def _produce(cluster: LocalCluster, topic: str, values: list[bytes], acks: int | str = 1) -> None:
    from kafka import KafkaProducer

    p = KafkaProducer(bootstrap_servers=live_bootstrap(cluster), acks=acks, retries=5,
                      request_timeout_ms=15000, metadata_max_age_ms=2000)  # fmt: skip
    try:
        for v in values:
            p.send(topic, value=v, partition=0).get(timeout=30)
    finally:
        p.close(timeout=5)


def test_divergent_follower_truncates_to_the_unclean_leader(cluster: LocalCluster) -> None:
    topic = "unclean6"
    # leader and follower are not the controller: no controller failover on the way
    ctl = wait_controller(cluster)
    lead, follow = (b for b in (1, 2, 3) if b != ctl)
    create_topic(cluster, topic, "--replica-assignment", f"{lead}:{follow}",
                 "--config", "unclean.leader.election.enable=true",
                 "--config", "min.insync.replicas=1")  # fmt: skip
    assert zk_json(cluster, f"/config/topics/{topic}")["config"] == {
        "unclean.leader.election.enable": "true",
        "min.insync.replicas": "1",
    }
    common = [b"common-%d" % i for i in range(10)]
    wait_for_isr(cluster, topic, 0, [lead, follow])
    _produce(cluster, topic, common, acks="all")  # acknowledged once both replicas have it

    # the follower dies; the leader goes on alone and writes a tail only it has
    cluster.stop_broker(follow, kill=True)
    wait_for_isr(cluster, topic, 0, [lead])
    tail = [b"lost-%d" % i for i in range(7)]
    _produce(cluster, topic, tail)
    epoch_before = partition_state(cluster, topic, 0)["leader_epoch"]

    # the leader dies too: the partition is offline (ISR [1], nobody live in it)
    cluster.stop_broker(lead, kill=True)
    wait_unregistered(cluster, lead)
    wait_for(lambda: partition_state(cluster, topic, 0)["leader"] == -1, "the partition offline")

    # the out-of-sync follower returns and is elected uncleanly
    cluster.start_broker(follow)
    assert wait_zk_leader(cluster, topic, 0) == follow
    state = partition_state(cluster, topic, 0)
    assert state["isr"] == [follow] and state["leader_epoch"] > epoch_before
    newer = [b"new-%d" % i for i in range(12)]  # more than the lost tail: same offsets
    _produce(cluster, topic, newer)

    # the old leader returns with its divergent tail, truncates, catches up
    cluster.start_broker(lead)
    wait_for_isr(cluster, topic, 0, [lead, follow])
    records = consume_all(live_bootstrap(cluster), topic, 0, len(common) + len(newer))
    assert [v for _, _, v in records] == common + newer  # the unclean election's price

    # both replicas hold the same log, byte for byte (read once both are stopped)
    cluster.stop_broker(lead)
    cluster.stop_broker(follow)
    logs = {}
    for b in (lead, follow):
        d = cluster.broker(b).data_dir / f"{topic}-0"
        logs[b] = {f.name: f.read_bytes() for f in sorted(d.glob("*.log"))}
        assert logs[b], f"no segments in {d}"
    assert sorted(logs[lead]) == sorted(logs[follow])
    for name in logs[lead]:
        assert logs[lead][name] == logs[follow][name], f"{name} differs between the replicas"

    # the returned replica took the new leader's epoch history up to its log end (the
    # leader may hold a later epoch with no records yet: the follower's controlled
    # shutdown took it out of the ISR, which bumps the leader epoch)
    def epochs(b: int) -> list[tuple[int, int]]:
        path = cluster.broker(b).data_dir / f"{topic}-0" / "leader-epoch-checkpoint"
        lines = path.read_text().split("\n")
        count = int(lines[1])
        return [(int(e), int(o)) for e, o in (ln.split() for ln in lines[2 : 2 + count])]

    end = len(common) + len(newer)
    assert epochs(lead) == [(e, o) for e, o in epochs(follow) if o < end]
    assert epochs(lead)[-1][0] == state["leader_epoch"]  # the unclean leader's epoch
    # and kt dump-log-segments reads the same batches from both
    dumps = [
        kt("dump-log-segments", "--files", str(cluster.broker(b).data_dir / f"{topic}-0" / n))
        for b in (lead, follow)
        for n in sorted(logs[lead])[:1]
    ]
    assert all(d.exit_code == 0 for d in dumps), [d.stderr for d in dumps]
    assert dumps[0].stdout.splitlines()[1:] == dumps[1].stdout.splitlines()[1:]
