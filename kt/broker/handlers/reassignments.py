"""AlterPartitionReassignments (45) and ListPartitionReassignments (46), KIP-455.

Only the active controller acts; any other broker answers NOT_CONTROLLER, and the
admin client looks the controller up again and retries (as Kafka's clients do).
The work runs in the controller's event task (kt.broker.controller.reassignment).
"""

from __future__ import annotations

from typing import Any

from kt.broker.authorization import require_cluster
from kt.broker.handlers import RequestContext, handles
from kt.broker.security.acl import AclOperation
from kt.protocol import ErrorCode, Struct, apis
from kt.storage.checkpoint import TopicPartition


@handles(apis.ALTER_PARTITION_REASSIGNMENTS.key, (0, 0))
async def alter_partition_reassignments(ctx: RequestContext, request: Struct) -> Any:
    """Start, change or cancel (replicas = null) partitions' reassignments."""
    require_cluster(ctx, AclOperation.ALTER)
    controller = ctx.services.cluster.active_controller()
    requested: dict[TopicPartition, list[int] | None] = {}
    for t in request.topics:
        for p in t.partitions:
            replicas = None if p.replicas is None else list(p.replicas)
            requested[TopicPartition(t.name, p.partition_index)] = replicas
    results = None
    if controller is not None:
        results = await controller.alter_partition_reassignments(requested)
    if results is None:
        return apis.ALTER_PARTITION_REASSIGNMENTS.response(
            throttle_time_ms=0, error_code=ErrorCode.NOT_CONTROLLER, error_message=None,
            responses=[],
        )  # fmt: skip
    responses = []
    for t in request.topics:
        parts = []
        for p in t.partitions:
            r = results[TopicPartition(t.name, p.partition_index)]
            parts.append({"partition_index": p.partition_index, "error_code": r.error,
                          "error_message": r.message})  # fmt: skip
        responses.append({"name": t.name, "partitions": parts})
    return apis.ALTER_PARTITION_REASSIGNMENTS.response(
        throttle_time_ms=0, error_code=ErrorCode.NONE, error_message=None, responses=responses
    )


@handles(apis.LIST_PARTITION_REASSIGNMENTS.key, (0, 0))
async def list_partition_reassignments(ctx: RequestContext, request: Struct) -> Any:
    """The reassignments in progress (of the listed partitions, or all)."""
    require_cluster(ctx, AclOperation.DESCRIBE)
    controller = ctx.services.cluster.active_controller()
    tps = None
    if request.topics is not None:
        tps = [TopicPartition(t.name, i) for t in request.topics for i in t.partition_indexes]
    found = None
    if controller is not None:
        found = await controller.list_partition_reassignments(tps)
    if found is None:
        return apis.LIST_PARTITION_REASSIGNMENTS.response(
            throttle_time_ms=0, error_code=ErrorCode.NOT_CONTROLLER, error_message=None,
            topics=[],
        )  # fmt: skip
    by_topic: dict[str, list[dict[str, Any]]] = {}
    for tp, a in sorted(found.items()):
        by_topic.setdefault(tp.topic, []).append(
            {"partition_index": tp.partition, "replicas": list(a.replicas),
             "adding_replicas": list(a.adding), "removing_replicas": list(a.removing)}
        )  # fmt: skip
    return apis.LIST_PARTITION_REASSIGNMENTS.response(
        throttle_time_ms=0, error_code=ErrorCode.NONE, error_message=None,
        topics=[{"name": n, "partitions": ps} for n, ps in by_topic.items()],
    )  # fmt: skip
