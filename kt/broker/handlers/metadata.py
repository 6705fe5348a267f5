"""Metadata: brokers, the controller, topics and their partitions' leaders and replicas."""

from __future__ import annotations

import uuid
from typing import Any

from kt.broker import timeline
from kt.broker.authorization import (
    OPERATIONS_NOT_REQUESTED,
    authorize,
    authorize_cluster,
    operations,
)
from kt.broker.handlers import RequestContext, handles
from kt.broker.handlers.readiness import NOT_READY_TOPIC
from kt.broker.metadata.cache import PartitionView
from kt.broker.metadata_store import CONSUMER_OFFSETS, INTERNAL_TOPICS, topic_name_problem
from kt.broker.security.acl import CLUSTER_NAME, AclOperation, ResourceType
from kt.protocol import ErrorCode, Struct, apis
from kt.storage.checkpoint import TopicPartition


@handles(apis.METADATA.key, (0, 12))
async def metadata(ctx: RequestContext, request: Struct) -> Any:
    """Describe the requested topics (all when the list is null; none when empty).

    Unknown topics are created when auto-creation is on and the request allows it
    (v4+ carries allow_auto_topic_creation; older versions always allow).

    v8+ clients may ask for the authorized operations of each topic (and, v8-10, of
    the cluster); without an authorizer all operations applicable to the resource,
    as Kafka's KafkaApis answers. Topics named by an unknown topic id get none.

    Before this broker received the controller's view it answers `not_ready`.
    """
    s = ctx.services
    store = s.topics
    cache = store.cache
    if not cache.ready:
        return not_ready(ctx, request)
    requested = request.topics
    allow_create = ctx.version < 4 or request.allow_auto_topic_creation
    want_topic_ops = ctx.version >= 8 and bool(request.include_topic_authorized_operations)
    cluster_ops = OPERATIONS_NOT_REQUESTED
    if ctx.version >= 8 and ctx.version <= 10 and request.include_cluster_authorized_operations:
        cluster_ops = (
            operations(ctx, ResourceType.CLUSTER, CLUSTER_NAME)
            if authorize_cluster(ctx, AclOperation.DESCRIBE)
            else 0
        )
    all_topics = requested is None or (ctx.version == 0 and not requested)

    def ops(name: str) -> int:
        if not want_topic_ops:
            return OPERATIONS_NOT_REQUESTED
        return operations(ctx, ResourceType.TOPIC, name)

    if all_topics:
        # v0 used an empty list for "all topics".
        names = sorted(store.topics)
        wanted: list[tuple[str | None, bytes | None]] = [(n, None) for n in names]
    else:
        wanted = []
        for t in requested:
            tid = getattr(t, "topic_id", None)
            wanted.append((t.name, tid.bytes if tid is not None and tid.int else None))
    topics: list[dict[str, Any]] = []
    for name, topic_id in wanted:
        if name is None and topic_id is not None:
            info = store.by_id(topic_id)
            if info is None:
                unknown = uuid.UUID(bytes=topic_id)
                topics.append({"error_code": ErrorCode.UNKNOWN_TOPIC_ID, "name": None,
                               "topic_id": unknown, "partitions": []})  # fmt: skip
                continue
            if not authorize(ctx, AclOperation.DESCRIBE, ResourceType.TOPIC, info.name):
                denied = uuid.UUID(bytes=topic_id)
                topics.append({"error_code": ErrorCode.TOPIC_AUTHORIZATION_FAILED, "name": None,
                               "topic_id": denied, "partitions": []})  # fmt: skip
                continue
            name = info.name
        elif name is not None and not authorize(
            ctx, AclOperation.DESCRIBE, ResourceType.TOPIC, name, log_if_denied=not all_topics
        ):
            # an all-topics answer leaves it out; asked by name, the topic is refused
            if not all_topics:
                topics.append({"error_code": ErrorCode.TOPIC_AUTHORIZATION_FAILED, "name": name,
                               "topic_id": uuid.UUID(int=0), "is_internal": False,
                               "partitions": []})  # fmt: skip
            continue
        assert name is not None
        topic_ops = ops(name)
        info = store.topics.get(name)
        if (
            info is None
            and allow_create
            and name not in INTERNAL_TOPICS
            and topic_name_problem(name) is None
            and s.settings.auto_create_topics_enable
            and not _may_create(ctx, name)
        ):
            topics.append({"error_code": ErrorCode.TOPIC_AUTHORIZATION_FAILED, "name": name,
                           "partitions": [], "topic_authorized_operations": topic_ops})  # fmt: skip
            continue
        if info is None:
            problem = topic_name_problem(name)
            if problem:
                topics.append({"error_code": ErrorCode.INVALID_TOPIC_EXCEPTION, "name": name,
                               "partitions": [],
                               "topic_authorized_operations": topic_ops})  # fmt: skip
                continue
            if allow_create and name in INTERNAL_TOPICS:
                # Made by its coordinator with its own partition count and configs (as
                # Kafka does), never as a plain topic with num.partitions.
                if name == CONSUMER_OFFSETS:
                    await s.groups.ensure_topic()
                    info = store.topics.get(name)
            elif allow_create:
                info = await s.topic_creation.maybe_auto_create(name)
            if info is None:
                topics.append({"error_code": ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                               "name": name, "partitions": [],
                               "topic_authorized_operations": topic_ops})  # fmt: skip
                continue
        partitions = [
            _partition(ctx, name, p, view)
            for p, view in sorted(s.topics.cache.partitions(name).items())
        ]
        topics.append(
            {
                "error_code": ErrorCode.NONE,
                "name": name,
                "topic_id": uuid.UUID(bytes=info.topic_id),
                "is_internal": info.internal,
                "partitions": partitions,
                "topic_authorized_operations": topic_ops,
            }
        )
    return apis.METADATA.response(
        throttle_time_ms=0,
        brokers=live_brokers(ctx),
        cluster_id=s.node.cluster_id,
        controller_id=cache.controller_id if cache.controller_id is not None else -1,
        topics=topics,
        cluster_authorized_operations=cluster_ops,
    )


def _may_create(ctx: RequestContext, name: str) -> bool:
    """Auto-creation needs CREATE on the cluster or on the topic (Kafka's order)."""
    return authorize_cluster(ctx, AclOperation.CREATE, log_if_denied=False) or authorize(
        ctx, AclOperation.CREATE, ResourceType.TOPIC, name
    )


def not_ready(ctx: RequestContext, request: Struct) -> Any:
    """The answer of a broker with no view of the cluster yet (see
    `kt.broker.handlers.readiness`): one every client takes as "ask again" and from
    which none learns anything, rather than an empty cluster.

    - No brokers. The Java client ignores an answer without brokers ("the startup
      phase of a broker", NetworkClient), and so do kafka-python and aiokafka.
      librdkafka (2.10+) decommissions every broker it learned that an answer does
      not list, closing its connections and failing the requests in flight there, so
      listing only ourselves would be worse than listing nobody.
    - v7+ (librdkafka 2.x, the Java client, kafka-python): no topics either.
      librdkafka retries an answer with neither brokers nor topics and applies
      nothing of it ("No brokers or topics in metadata: should retry", since 0.9.2);
      given topics, it would apply them (and the broker list).
    - v0-6 (kafkajs; librdkafka before 2.10 and older Java clients): each named topic
      with LEADER_NOT_AVAILABLE and no partitions. kafkajs throws on the first topic
      error before it reads the brokers and retries LEADER_NOT_AVAILABLE, whereas an
      answer without topic errors replaces its broker list (by nothing: it would
      disconnect from every broker). librdkafka ignores a topic answered
      LEADER_NOT_AVAILABLE with no partitions ("temporary error"), and before 2.10
      leaves its brokers alone when none are listed.

    Never UNKNOWN_TOPIC_OR_PARTITION, and never auto-creation: this broker cannot
    know whether the topic exists."""
    topics: list[dict[str, Any]] = []
    if ctx.version < 7 and request.topics:  # v0's empty list asks for every topic
        topics = [
            {"error_code": NOT_READY_TOPIC, "name": t.name, "is_internal": False,
             "partitions": [], "topic_authorized_operations": OPERATIONS_NOT_REQUESTED}
            for t in request.topics
        ]  # fmt: skip
    return apis.METADATA.response(
        throttle_time_ms=0,
        brokers=[],
        cluster_id=ctx.services.node.cluster_id,
        controller_id=-1,
        topics=topics,
        cluster_authorized_operations=OPERATIONS_NOT_REQUESTED,
    )


def live_brokers(ctx: RequestContext) -> list[dict[str, Any]]:
    """The live brokers as clients see them: each one's endpoint on our listener."""
    out = []
    for b in ctx.services.topics.cache.alive_brokers():
        # the listener the client came in on (Kafka omits brokers without it)
        ep = ctx.endpoint_of(b)
        if ep is not None:
            out.append({"node_id": b.broker_id, "host": ep.host, "port": ep.port,
                        "rack": b.rack})  # fmt: skip
    return out


def _partition(ctx: RequestContext, name: str, p: int, view: PartitionView) -> dict[str, Any]:
    """One partition as the controller described it. A partition without a live
    leader is LEADER_NOT_AVAILABLE; one whose leader lacks the client's listener is
    LISTENER_NOT_FOUND (v6+). When this broker leads it but its replica sits in
    a failed log directory, it is reported the same way, with our replica offline."""
    cache = ctx.services.topics.cache
    offline = list(view.offline_replicas)
    leader = view.leader
    local = ctx.services.replicas.get(TopicPartition(name, p))
    if leader == ctx.services.node.node_id and (local is None or local.offline):
        leader = -1
        if ctx.services.node.node_id not in offline:
            offline.append(ctx.services.node.node_id)
    error = (
        ErrorCode.NONE
        if leader >= 0 and cache.is_alive(leader)
        else (ErrorCode.LEADER_NOT_AVAILABLE)
    )
    if error == ErrorCode.NONE and ctx.listener:
        live = cache.broker(leader)
        if live is not None and live.endpoint(ctx.listener) is None:
            # The leader has no endpoint on the listener this client uses (brokers
            # configured with different listeners): Kafka's MetadataCache answers
            # LISTENER_NOT_FOUND from v6 (LEADER_NOT_AVAILABLE before), no leader.
            error = (
                ErrorCode.LISTENER_NOT_FOUND if ctx.version >= 6 else ErrorCode.LEADER_NOT_AVAILABLE
            )
    # When a client could first learn of a new leader from this broker.
    if timeline.enabled():
        timeline.changed(f"metadata:{name}-{p}", leader if error == ErrorCode.NONE else -1,
                         "metadata_answer")  # fmt: skip
    return {
        "error_code": error,
        "partition_index": p,
        "leader_id": leader if error == ErrorCode.NONE else -1,
        "leader_epoch": view.leader_epoch,
        "replica_nodes": list(view.replicas),
        "isr_nodes": list(view.isr),
        "offline_replicas": offline,
    }
