"""Inter-broker (controller) requests from something that is not the controller are
refused with Kafka's error codes, logged, and never applied.

Kafka fences controller requests by epochs, not by who claims to send them: a
LeaderAndIsr / UpdateMetadata / StopReplica whose controller epoch is older than the
broker's latest is answered STALE_CONTROLLER_EPOCH (ReplicaManager), one whose
broker epoch is older than the broker's registration is answered STALE_BROKER_EPOCH
(KafkaApis.isBrokerEpochStale). The controller id is not checked by Kafka (an
unknown id with the current epoch would be obeyed there too), so the "unknown
controller" requests here carry an unknown id *and* an old epoch. Each is sent with
kt's own client to a follower of a live topic, built to do harm if applied (make
the follower lead, point metadata at it, delete its replica).
"""

from __future__ import annotations

import asyncio
import base64
import uuid
from typing import Any

import pytest
from cluster_harness import controller_epoch, create_topic, partition_state, zk_client, zk_json

from kt.broker.controller.requests import (
    BrokerEndpointInfo,
    TopicReplicas,
    leader_and_isr,
    stop_replica,
    update_metadata,
)
from kt.client import KafkaClient
from kt.cluster.election import LeaderAndIsr
from kt.protocol import ErrorCode, apis
from kt.storage.checkpoint import TopicPartition
from kt.storage.record_batch import RecordSpec, build_batch
from kt.tools.local_cluster import LocalCluster

pytestmark = [pytest.mark.integration, pytest.mark.cluster]

TOPIC = "fenced-control"
UNKNOWN_CONTROLLER = 4242


def _broker_epochs(cluster: LocalCluster) -> dict[int, int]:
    """/brokers/ids/N's czxid (the broker epoch) per broker."""
    with zk_client(cluster) as zk:
        return {
            int(b): zk.get(f"/brokers/ids/{b}")[1].czxid for b in zk.get_children("/brokers/ids")
        }


def _topic(cluster: LocalCluster) -> TopicReplicas:
    doc = zk_json(cluster, f"/brokers/topics/{TOPIC}")
    raw = base64.urlsafe_b64decode(doc["topic_id"] + "=" * (-len(doc["topic_id"]) % 4))
    return TopicReplicas(raw, {int(p): r for p, r in doc["partitions"].items()})


def _endpoint(cluster: LocalCluster, broker_id: int, epoch: int) -> BrokerEndpointInfo:
    b = cluster.broker(broker_id)
    return BrokerEndpointInfo(broker_id, epoch, (("PLAINTEXT", "127.0.0.1", b.port),))


async def _produce_code(c: KafkaClient, node: int) -> int:
    body = apis.PRODUCE.request(
        transactional_id=None, acks=1, timeout_ms=5000,
        topic_data=[{"name": TOPIC, "partition_data": [
            {"index": 0, "records": build_batch([RecordSpec(b"k", b"v")])}]}],
    )  # fmt: skip
    resp = await c.send(apis.PRODUCE, body, node)
    return int(resp.responses[0].partition_responses[0].error_code)


async def _metadata_leader(c: KafkaClient, node: int) -> int:
    body = apis.METADATA.request(
        topics=[{"name": TOPIC, "topic_id": uuid.UUID(int=0)}],
        allow_auto_topic_creation=False,
        include_cluster_authorized_operations=False,
        include_topic_authorized_operations=False,
    )
    resp = await c.send(apis.METADATA, body, node)
    return int(resp.topics[0].partitions[0].leader_id)


@pytest.mark.timeout(180)
def test_control_requests_from_a_non_controller_are_refused(cluster: LocalCluster) -> None:
    create_topic(cluster, TOPIC, "--partitions", "1", "--replication-factor", "3")
    state = partition_state(cluster, TOPIC, 0)
    assert state is not None
    leader = state["leader"]
    target = next(b.broker_id for b in cluster.brokers if b.broker_id != leader)
    epoch = controller_epoch(cluster)
    assert epoch is not None and epoch >= 1
    epochs = _broker_epochs(cluster)
    topic = _topic(cluster)
    tp = TopicPartition(TOPIC, 0)
    bootstrap = ",".join(b.bootstrap for b in cluster.brokers)
    # what a forged controller wants: the follower leads alone, at a newer leader epoch
    coup = LeaderAndIsr(target, state["leader_epoch"] + 10, (target,), epoch, state["version"])
    me = _endpoint(cluster, target, epochs[target])

    def lai(controller_epoch: int, broker_epoch: int, controller_id: int) -> dict[str, Any]:
        return leader_and_isr(
            controller_id=controller_id, controller_epoch=controller_epoch,
            broker_epoch=broker_epoch, partitions=[(tp, coup, topic, False)],
            live_leaders=[me],
        )  # fmt: skip

    def um(controller_epoch: int, broker_epoch: int, controller_id: int) -> dict[str, Any]:
        return update_metadata(
            controller_id=controller_id, controller_epoch=controller_epoch,
            broker_epoch=broker_epoch, partitions=[(tp, coup, topic)], live_brokers=[me],
        )  # fmt: skip

    def sr(controller_epoch: int, broker_epoch: int, controller_id: int) -> dict[str, Any]:
        return stop_replica(
            controller_id=controller_id, controller_epoch=controller_epoch,
            broker_epoch=broker_epoch, partitions={tp: -2}, delete=True,
        )  # fmt: skip

    cases = [
        # (what, api, body builder, controller epoch, broker epoch, controller id, error)
        ("stale controller epoch", apis.LEADER_AND_ISR, lai, epoch - 1, epochs[target], leader,
         ErrorCode.STALE_CONTROLLER_EPOCH),
        ("unknown controller", apis.LEADER_AND_ISR, lai, epoch - 1, epochs[target],
         UNKNOWN_CONTROLLER, ErrorCode.STALE_CONTROLLER_EPOCH),
        ("stale broker epoch", apis.LEADER_AND_ISR, lai, epoch, epochs[target] - 1, leader,
         ErrorCode.STALE_BROKER_EPOCH),
        ("stale controller epoch", apis.UPDATE_METADATA, um, epoch - 1, epochs[target], leader,
         ErrorCode.STALE_CONTROLLER_EPOCH),
        ("unknown controller", apis.UPDATE_METADATA, um, epoch - 1, epochs[target],
         UNKNOWN_CONTROLLER, ErrorCode.STALE_CONTROLLER_EPOCH),
        ("stale broker epoch", apis.UPDATE_METADATA, um, epoch, epochs[target] - 1, leader,
         ErrorCode.STALE_BROKER_EPOCH),
        ("stale controller epoch", apis.STOP_REPLICA, sr, epoch - 1, epochs[target], leader,
         ErrorCode.STALE_CONTROLLER_EPOCH),
        ("unknown controller", apis.STOP_REPLICA, sr, epoch - 1, epochs[target],
         UNKNOWN_CONTROLLER, ErrorCode.STALE_CONTROLLER_EPOCH),
        ("stale broker epoch", apis.STOP_REPLICA, sr, epoch, epochs[target] - 1, leader,
         ErrorCode.STALE_BROKER_EPOCH),
    ]  # fmt: skip
    log_path = cluster.broker(target).log_path
    log_start = log_path.stat().st_size

    async def go() -> list[tuple[str, int]]:
        out = []
        async with KafkaClient(bootstrap) as c:
            for what, api, build, ce, be, cid, _ in cases:
                resp = await c.send(api, build(ce, be, cid), target)
                out.append((f"{api.name} {what}", int(resp.error_code)))
            # nothing was applied: the follower does not lead, its metadata still
            # names the real leader, and its replica is still there
            out.append(("produce to the follower", await _produce_code(c, target)))
            out.append(("leader in its metadata", await _metadata_leader(c, target)))
        return out

    got = asyncio.run(go())
    want = [(f"{api.name} {what}", err) for what, api, _, _, _, _, err in cases]
    want += [
        ("produce to the follower", ErrorCode.NOT_LEADER_OR_FOLLOWER),
        ("leader in its metadata", leader),
    ]
    assert got == want
    after = partition_state(cluster, TOPIC, 0)
    assert after is not None and after["leader"] == leader
    assert set(after["isr"]) == set(state["isr"])
    assert (cluster.broker(target).data_dir / f"{TOPIC}-0").is_dir()
    # every refusal is logged by the broker that refused it
    with open(log_path, encoding="utf-8", errors="replace") as f:
        f.seek(log_start)
        new_lines = f.read().splitlines()
    for api in ("LeaderAndIsr", "UpdateMetadata", "StopReplica"):
        refused = [line for line in new_lines if "refusing" in line and api in line]
        assert len(refused) == 3, (api, new_lines[-20:])
    assert any(str(UNKNOWN_CONTROLLER) in line for line in new_lines)
