"""Metadata: brokers, the controller, topics and their partitions' leaders and replicas."""

from __future__ import annotations

import uuid
from typing import Any

from kt.broker.broker import CONSUMER_OFFSETS
from kt.broker.handlers import RequestContext, handles
from kt.broker.metadata_store import INTERNAL_TOPICS, topic_name_problem
from kt.protocol import ErrorCode, Struct, apis
from kt.storage.checkpoint import TopicPartition


@handles(apis.METADATA.key, (0, 12))
async def metadata(ctx: RequestContext, request: Struct) -> Any:
    """Describe the requested topics (all when the list is null; none when empty).

    Unknown topics are created when auto-creation is on and the request allows it
    (v4+ carries allow_auto_topic_creation; older versions always allow).
    """
    broker = ctx.broker
    store = broker.metadata
    requested = request.topics
    allow_create = ctx.version < 4 or request.allow_auto_topic_creation
    if requested is None or (ctx.version == 0 and not requested):
        # v0 used an empty list for "all topics".
        names = sorted(store.topics)
        wanted: list[tuple[str | None, bytes | None]] = [(n, None) for n in names]
    else:
        wanted = []
        for t in requested:
            tid = getattr(t, "topic_id", None)
            wanted.append((t.name, tid.bytes if tid is not None and tid.int else None))
    topics = []
    for name, topic_id in wanted:
        if name is None and topic_id is not None:
            info = store.by_id(topic_id)
            if info is None:
                unknown = uuid.UUID(bytes=topic_id)
                topics.append({"error_code": ErrorCode.UNKNOWN_TOPIC_ID, "name": None,
                               "topic_id": unknown, "partitions": []})  # fmt: skip
                continue
            name = info.name
        assert name is not None
        info = store.topics.get(name)
        if info is None:
            problem = topic_name_problem(name)
            if problem:
                topics.append({"error_code": ErrorCode.INVALID_TOPIC_EXCEPTION, "name": name,
                               "partitions": []})  # fmt: skip
                continue
            if allow_create and name in INTERNAL_TOPICS:
                # Made by its coordinator with its own partition count and configs (as
                # Kafka does), never as a plain topic with num.partitions.
                if name == CONSUMER_OFFSETS:
                    broker.group_coordinator.ensure_topic()
                    info = store.topics.get(name)
            elif allow_create:
                info = broker.maybe_auto_create(name)
            if info is None:
                topics.append({"error_code": ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                               "name": name, "partitions": []})  # fmt: skip
                continue
        partitions = []
        for p in range(info.partitions):
            part = broker.replica_manager.get(TopicPartition(name, p))
            replicas = info.assignment.get(p, [broker.node_id])
            if part is None or part.offline:
                # This broker's replica is offline (its log dir failed). As a KRaft
                # controller records it: no leader, the ISR keeps its last member,
                # the replica listed offline; clients see LEADER_NOT_AVAILABLE.
                partitions.append({"error_code": ErrorCode.LEADER_NOT_AVAILABLE,
                                   "partition_index": p, "leader_id": -1,
                                   "leader_epoch": part.leader_epoch if part else -1,
                                   "replica_nodes": replicas, "isr_nodes": replicas,
                                   "offline_replicas": replicas})  # fmt: skip
                continue
            partitions.append(
                {
                    "error_code": ErrorCode.NONE,
                    "partition_index": p,
                    "leader_id": part.leader_id,
                    "leader_epoch": part.leader_epoch,
                    "replica_nodes": part.replicas,
                    "isr_nodes": part.isr,
                    "offline_replicas": [],
                }
            )
        topics.append(
            {
                "error_code": ErrorCode.NONE,
                "name": name,
                "topic_id": uuid.UUID(bytes=info.topic_id),
                "is_internal": info.internal,
                "partitions": partitions,
            }
        )
    return apis.METADATA.response(
        throttle_time_ms=0,
        brokers=[
            {"node_id": broker.node_id, "host": lst.host, "port": lst.port, "rack": None}
            for lst in broker.advertised_listeners()
        ][:1],
        cluster_id=broker.cluster_id,
        controller_id=broker.node_id,
        topics=topics,
    )
