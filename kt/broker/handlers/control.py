"""The controller's requests to a broker: LeaderAndIsr, UpdateMetadata, StopReplica.

Each turns the request into typed changes for the ReplicaManager (which checks the
controller and broker epochs, so a deposed controller or one that still believes
in this broker's previous incarnation is refused) and its answer into the
response. Only the versions a ZooKeeper-mode Kafka 3.8 controller sends are
served; their older shapes decode the same (the schemas default absent fields).
"""

from __future__ import annotations

from typing import Any

from kt.broker.authorization import require_cluster
from kt.broker.controller.requests import TYPE_FULL
from kt.broker.handlers import RequestContext, handles
from kt.broker.metadata.cache import Endpoint, LiveBroker, PartitionView
from kt.broker.replica_manager import PartitionStateChange, StopReplicaChange
from kt.broker.security.acl import AclOperation
from kt.protocol import Struct, apis
from kt.storage.checkpoint import TopicPartition

_NO_ID = bytes(16)


def _topic_id(value: Any) -> bytes:
    return value.bytes if value is not None else _NO_ID


@handles(apis.LEADER_AND_ISR.key, (0, 7))
async def leader_and_isr(ctx: RequestContext, request: Struct) -> Any:
    """Become leader or follower of the partitions listed."""
    require_cluster(ctx, AclOperation.CLUSTER_ACTION)
    changes: list[PartitionStateChange] = []
    topic_ids: dict[str, bytes] = {}
    groups = (
        [(None, request.ungrouped_partition_states)]
        if ctx.version < 2
        else [(t, t.partition_states) for t in request.topic_states]
    )
    for topic, states in groups:
        for s in states:
            name = topic.topic_name if topic is not None else s.topic_name
            tid = _topic_id(topic.topic_id) if topic is not None else _NO_ID
            topic_ids[name] = tid
            changes.append(
                PartitionStateChange(
                    tp=TopicPartition(name, s.partition_index),
                    topic_id=tid,
                    controller_epoch=s.controller_epoch,
                    leader=s.leader,
                    leader_epoch=s.leader_epoch,
                    isr=tuple(s.isr),
                    partition_epoch=s.partition_epoch,
                    replicas=tuple(s.replicas),
                    adding=tuple(s.adding_replicas),
                    removing=tuple(s.removing_replicas),
                    is_new=s.is_new,
                    leader_recovery_state=s.leader_recovery_state,
                )
            )
    leaders = {b.broker_id: (b.host_name, b.port) for b in request.live_leaders}
    # v5+ says whether it names every partition this broker should host (FULL).
    full = ctx.version >= 5 and request.type == TYPE_FULL
    error, results = await ctx.services.replicas.become_leader_or_follower(
        request.controller_id,
        request.controller_epoch,
        request.broker_epoch,
        changes,
        leaders,
        full=full,
    )
    if ctx.version < 5:
        errors = [
            {"topic_name": tp.topic, "partition_index": tp.partition, "error_code": code}
            for tp, code in results.items()
        ]
        return apis.LEADER_AND_ISR.response(error_code=error, partition_errors=errors)
    by_topic: dict[str, list[dict[str, Any]]] = {}
    for tp, code in results.items():
        by_topic.setdefault(tp.topic, []).append(
            {"partition_index": tp.partition, "error_code": code}
        )
    topics = [
        {"topic_id": _uuid(topic_ids.get(name, _NO_ID)), "partition_errors": errs}
        for name, errs in by_topic.items()
    ]
    return apis.LEADER_AND_ISR.response(error_code=error, topics=topics)


def _uuid(raw: bytes) -> Any:
    import uuid

    return uuid.UUID(bytes=raw)


@handles(apis.UPDATE_METADATA.key, (0, 8))
async def update_metadata(ctx: RequestContext, request: Struct) -> Any:
    """Refresh this broker's metadata cache from the controller's view."""
    require_cluster(ctx, AclOperation.CLUSTER_ACTION)
    brokers = []
    for b in request.live_brokers:
        if ctx.version == 0:
            eps: tuple[Endpoint, ...] = (Endpoint("PLAINTEXT", b.v0_host, b.v0_port),)
        else:
            eps = tuple(
                Endpoint(e.listener or _protocol_name(e.security_protocol), e.host, e.port)
                for e in b.endpoints
            )
        brokers.append(LiveBroker(b.id, eps, b.rack))
    partitions: list[tuple[str, bytes | None, int, PartitionView]] = []
    groups = (
        [(None, request.ungrouped_partition_states)]
        if ctx.version < 5
        else [(t, t.partition_states) for t in request.topic_states]
    )
    for topic, states in groups:
        for s in states:
            name = topic.topic_name if topic is not None else s.topic_name
            tid = _topic_id(topic.topic_id) if topic is not None else None
            view = PartitionView(
                leader=s.leader,
                leader_epoch=s.leader_epoch,
                isr=tuple(s.isr),
                replicas=tuple(s.replicas),
                zk_version=s.zk_version,
                offline_replicas=tuple(s.offline_replicas),
                controller_epoch=s.controller_epoch,
            )
            partitions.append((name, tid, s.partition_index, view))
    error = ctx.services.replicas.update_metadata(
        request.controller_id, request.controller_epoch, request.broker_epoch, brokers, partitions
    )
    return apis.UPDATE_METADATA.response(error_code=error)


def _protocol_name(security_protocol: int) -> str:
    return {0: "PLAINTEXT", 1: "SSL", 2: "SASL_PLAINTEXT", 3: "SASL_SSL"}.get(
        security_protocol, "PLAINTEXT"
    )


@handles(apis.STOP_REPLICA.key, (0, 4))
async def stop_replica(ctx: RequestContext, request: Struct) -> Any:
    """Stop replicating the partitions listed (and delete them when asked)."""
    require_cluster(ctx, AclOperation.CLUSTER_ACTION)
    changes: list[StopReplicaChange] = []
    if ctx.version == 0:
        for p in request.ungrouped_partitions:
            changes.append(StopReplicaChange(TopicPartition(p.topic_name, p.partition_index),
                                             -2, request.delete_partitions))  # fmt: skip
    elif ctx.version <= 2:
        for t in request.topics:
            for index in t.partition_indexes:
                changes.append(StopReplicaChange(TopicPartition(t.name, index), -2,
                                                 request.delete_partitions))  # fmt: skip
    else:
        for t in request.topic_states:
            for s in t.partition_states:
                changes.append(StopReplicaChange(TopicPartition(t.topic_name, s.partition_index),
                                                 s.leader_epoch, s.delete_partition))  # fmt: skip
    error, results = await ctx.services.replicas.stop_replicas(
        request.controller_id, request.controller_epoch, request.broker_epoch, changes
    )
    errors = [
        {"topic_name": tp.topic, "partition_index": tp.partition, "error_code": code}
        for tp, code in results.items()
    ]
    return apis.STOP_REPLICA.response(error_code=error, partition_errors=errors)
