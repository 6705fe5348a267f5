"""CreateTopics, DeleteTopics and CreatePartitions: the topic admin APIs.

Semantics and error texts follow Apache Kafka's controller: -1 partitions or
replication factor means the broker default (num.partitions,
default.replication.factor); a manual assignment requires both to be -1 and may
only name this broker; configs are validated against Kafka's topic config table
(kt.broker.topic_configs); validate_only checks everything and creates nothing.
Duplicate names in one request are INVALID_REQUEST for every copy.
"""

from __future__ import annotations

import uuid
from collections import Counter
from typing import Any

from kt.broker.authorization import authorize, authorize_cluster
from kt.broker.errors import TopicError, error_code_for
from kt.broker.handlers import RequestContext, handles
from kt.broker.handlers.readiness import not_ready_message, ready
from kt.broker.security.acl import AclOperation, ResourceType
from kt.broker.topic_configs import describe_topic
from kt.protocol import ErrorCode, Struct, apis

_ZERO_UUID = uuid.UUID(int=0)


@handles(apis.CREATE_TOPICS.key, (0, 7))
async def create_topics(ctx: RequestContext, request: Struct) -> Any:
    """Create (or with validate_only, check) each requested topic."""
    s = ctx.services
    validate_only = ctx.version >= 1 and bool(request.validate_only)
    counts = Counter(t.name for t in request.topics)
    results = []
    # CREATE on the cluster covers every topic; else CREATE on each topic
    cluster_create = authorize_cluster(ctx, AclOperation.CREATE, log_if_denied=False)
    for topic in request.topics:
        result: dict[str, Any] = {"name": topic.name, "topic_id": _ZERO_UUID,
                                  "error_code": ErrorCode.NONE, "error_message": None,
                                  "num_partitions": -1, "replication_factor": -1,
                                  "configs": None}  # fmt: skip
        if counts[topic.name] > 1:
            result.update(error_code=ErrorCode.INVALID_REQUEST,
                          error_message="Duplicate topic name.")  # fmt: skip
            results.append(result)
            continue
        if not cluster_create and not authorize(
            ctx, AclOperation.CREATE, ResourceType.TOPIC, topic.name
        ):
            result.update(error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED,
                          error_message="Authorization failed.")  # fmt: skip
            results.append(result)
            continue
        try:
            info = await _create_one(ctx, topic, validate_only, request.timeout_ms)
        except TopicError as exc:
            result.update(error_code=error_code_for(exc), error_message=exc.message)
            results.append(result)
            continue
        if not authorize(ctx, AclOperation.DESCRIBE_CONFIGS, ResourceType.TOPIC, topic.name,
                         log_if_denied=False):  # fmt: skip
            # created, but its configs are not shown
            result.update(
                topic_id=uuid.UUID(bytes=info.topic_id) if not validate_only else _ZERO_UUID,
                topic_config_error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED,
            )
            results.append(result)
            continue
        result.update(
            topic_id=uuid.UUID(bytes=info.topic_id) if not validate_only else _ZERO_UUID,
            num_partitions=info.partitions,
            replication_factor=info.replication_factor,
            configs=[
                {
                    "name": c.name,
                    "value": c.value,
                    "read_only": c.read_only,
                    "config_source": int(c.source),
                    "is_sensitive": c.is_sensitive,
                }
                for c in describe_topic(info.configs, s.broker_config().given())
            ],
        )
        results.append(result)
    return apis.CREATE_TOPICS.response(throttle_time_ms=0, topics=results)


async def _create_one(
    ctx: RequestContext, topic: Struct, validate_only: bool, timeout_ms: int
) -> Any:
    s = ctx.services
    if topic.name in ("__cluster_metadata",):
        raise TopicError(
            ErrorCode.INVALID_REQUEST,
            f"Creation of internal topic {topic.name} is prohibited.",
        )
    configs: dict[str, str | None] = {c.name: c.value for c in topic.configs}
    nulls = [k for k, v in configs.items() if v is None]
    if nulls:
        raise TopicError(
            ErrorCode.INVALID_CONFIG,
            "Null value not supported for topic configs: " + ",".join(nulls),
        )
    clean = {k: v for k, v in configs.items() if v is not None}
    assignment: dict[int, list[int]] | None = None
    partitions = topic.num_partitions
    factor = topic.replication_factor
    if topic.assignments:
        assignment = _manual_assignment(ctx, topic)
    else:
        if factor < -1 or factor == 0:
            raise TopicError(
                ErrorCode.INVALID_REPLICATION_FACTOR,
                "Replication factor must be larger than 0, or -1 to use the default value.",
            )
        if partitions < -1 or partitions == 0:
            raise TopicError(
                ErrorCode.INVALID_PARTITIONS,
                "Number of partitions was set to an invalid non-positive value.",
            )
        if partitions == -1:
            partitions = s.settings.num_partitions
        if factor == -1:
            factor = s.settings.default_replication_factor
    return await s.cluster.admin().create_topic(
        topic.name,
        partitions,
        factor,
        clean,
        validate_only=validate_only,
        assignment=assignment,
        timeout_s=max(0, timeout_ms) / 1000,
    )


def _manual_assignment(ctx: RequestContext, topic: Struct) -> dict[int, list[int]]:
    if topic.replication_factor != -1:
        raise TopicError(
            ErrorCode.INVALID_REQUEST,
            "A manual partition assignment was specified, but replication factor was not "
            "set to -1.",
        )
    if topic.num_partitions != -1:
        raise TopicError(
            ErrorCode.INVALID_REQUEST,
            "A manual partition assignment was specified, but numPartitions was not set to -1.",
        )
    out: dict[int, list[int]] = {}
    factor: int | None = None
    for a in topic.assignments:
        if a.partition_index in out:
            raise TopicError(
                ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                f"Found multiple manual partition assignments for partition {a.partition_index}",
            )
        problem = ctx.services.cluster.admin().replica_assignment_problem(
            list(a.broker_ids), factor
        )
        if problem:
            raise TopicError(ErrorCode.INVALID_REPLICA_ASSIGNMENT, problem)
        factor = len(a.broker_ids)
        out[a.partition_index] = list(a.broker_ids)
    if sorted(out) != list(range(len(out))):
        raise TopicError(
            ErrorCode.INVALID_REPLICA_ASSIGNMENT,
            "partitions should be a consecutive 0-based integer sequence",
        )
    return out


@handles(apis.DELETE_TOPICS.key, (0, 6))
async def delete_topics(ctx: RequestContext, request: Struct) -> Any:
    """Delete topics by name (v0-5 topic_names, v6 topics) or by id (v6)."""
    s = ctx.services
    version = ctx.version
    responses: list[dict[str, Any]] = []

    def respond(name: str | None, tid: uuid.UUID, code: ErrorCode, msg: str | None) -> None:
        responses.append({"name": name, "topic_id": tid, "error_code": code,
                          "error_message": msg})  # fmt: skip

    if version >= 6:
        wanted = [(t.name, t.topic_id or _ZERO_UUID) for t in request.topics]
    else:
        wanted = [(n, _ZERO_UUID) for n in request.topic_names]
    if not s.settings.delete_topic_enable:
        code = ErrorCode.TOPIC_DELETION_DISABLED if version >= 3 else ErrorCode.INVALID_REQUEST
        for name, tid in wanted:
            respond(name, tid, code, "Topic deletion is disabled.")
        return apis.DELETE_TOPICS.response(throttle_time_ms=0, responses=responses)
    names = Counter(n for n, tid in wanted if n is not None and tid == _ZERO_UUID)
    ids = Counter(tid for n, tid in wanted if n is None and tid != _ZERO_UUID)
    for name, tid in wanted:
        if name is None and tid == _ZERO_UUID:
            respond(None, tid, ErrorCode.INVALID_REQUEST,
                    "Neither topic name nor id were specified.")  # fmt: skip
            continue
        if name is not None and tid != _ZERO_UUID:
            respond(name, tid, ErrorCode.INVALID_REQUEST,
                    "You may not specify both topic name and topic id.")  # fmt: skip
            continue
        if name is not None and names[name] > 1:
            respond(name, tid, ErrorCode.INVALID_REQUEST, "Duplicate topic name.")
            continue
        if name is None and ids[tid] > 1:
            respond(None, tid, ErrorCode.INVALID_REQUEST, "Duplicate topic id.")
            continue
        if not ready(ctx):
            # No view of the cluster yet: the topic may well exist (admin clients
            # look for the controller again and retry).
            respond(name, tid, ErrorCode.NOT_CONTROLLER, not_ready_message(ctx))
            continue
        by_id = name is None
        if name is None:
            info = s.topics.by_id(tid.bytes)
            if info is None:
                respond(None, tid, ErrorCode.UNKNOWN_TOPIC_ID,
                        "This server does not host this topic ID.")  # fmt: skip
                continue
            name = info.name
            if not authorize(ctx, AclOperation.DESCRIBE, ResourceType.TOPIC, name):
                respond(None, tid, ErrorCode.TOPIC_AUTHORIZATION_FAILED, None)
                continue
        if not authorize(ctx, AclOperation.DELETE, ResourceType.TOPIC, name):
            respond(None if by_id else name, tid, ErrorCode.TOPIC_AUTHORIZATION_FAILED, None)
            continue
        info = s.topics.topics.get(name)
        if info is None:
            respond(name, tid, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                    "This server does not host this topic-partition.")  # fmt: skip
            continue
        topic_id = uuid.UUID(bytes=info.topic_id)
        try:
            await s.cluster.admin().delete_topic(name, timeout_s=max(0, request.timeout_ms) / 1000)
        except TopicError as exc:
            respond(name, topic_id, error_code_for(exc), exc.message)
            continue
        respond(name, topic_id, ErrorCode.NONE, None)
    return apis.DELETE_TOPICS.response(throttle_time_ms=0, responses=responses)


@handles(apis.CREATE_PARTITIONS.key, (0, 3))
async def create_partitions(ctx: RequestContext, request: Struct) -> Any:
    """Grow topics to the requested partition counts."""
    s = ctx.services
    counts = Counter(t.name for t in request.topics)
    results = []
    for topic in request.topics:
        code, message = ErrorCode.NONE, None
        if counts[topic.name] > 1:
            code, message = ErrorCode.INVALID_REQUEST, "Duplicate topic name."
        elif not authorize(ctx, AclOperation.ALTER, ResourceType.TOPIC, topic.name):
            code = ErrorCode.TOPIC_AUTHORIZATION_FAILED
            message = "The topic authorization is failed."
        else:
            assignments = (
                None
                if topic.assignments is None
                else [list(a.broker_ids) for a in topic.assignments]
            )
            try:
                await s.cluster.admin().add_partitions(
                    topic.name,
                    topic.count,
                    validate_only=bool(request.validate_only),
                    assignments=assignments,
                    timeout_s=max(0, request.timeout_ms) / 1000,
                )
            except TopicError as exc:
                code, message = error_code_for(exc), exc.message
        results.append({"name": topic.name, "error_code": code, "error_message": message})
    return apis.CREATE_PARTITIONS.response(throttle_time_ms=0, results=results)
