"""Requests brokers send to the controller: ControlledShutdown and AlterPartition.

Any broker receives them; only the active controller acts (the others answer
NOT_CONTROLLER and the sender looks the controller up again). The work happens
in the controller's event task, so these requests are ordered with the
controller's own reactions to ZooKeeper.
"""

from __future__ import annotations

import uuid
from typing import Any

from kt.broker.controller.controller import IsrChange
from kt.broker.handlers import RequestContext, handles
from kt.protocol import ErrorCode, Struct, apis
from kt.storage.checkpoint import TopicPartition


@handles(apis.CONTROLLED_SHUTDOWN.key, (0, 3))
async def controlled_shutdown(ctx: RequestContext, request: Struct) -> Any:
    """Move leadership away from the broker that is shutting down."""
    controller = ctx.broker.controller
    if controller is None or not controller.active:
        return apis.CONTROLLED_SHUTDOWN.response(
            error_code=ErrorCode.NOT_CONTROLLER, remaining_partitions=[]
        )
    epoch = request.broker_epoch if ctx.version >= 2 else -1
    error, remaining = await controller.controlled_shutdown(request.broker_id, epoch)
    return apis.CONTROLLED_SHUTDOWN.response(
        error_code=error,
        remaining_partitions=[
            {"topic_name": tp.topic, "partition_index": tp.partition} for tp in remaining
        ],
    )


@handles(apis.ALTER_PARTITION.key, (0, 3))
async def alter_partition(ctx: RequestContext, request: Struct) -> Any:
    """Validate and write a leader's ISR changes."""
    controller = ctx.broker.controller
    if controller is None or not controller.active:
        return apis.ALTER_PARTITION.response(error_code=ErrorCode.NOT_CONTROLLER, topics=[])
    by_id = {t.topic_id: name for name, t in controller.view.topics.items()}
    changes: list[IsrChange] = []
    order: list[tuple[Any, str, list[int]]] = []
    for t in request.topics:
        if ctx.version >= 2:
            name = by_id.get(t.topic_id.bytes if t.topic_id is not None else b"", "")
        else:
            name = t.topic_name
        indexes = []
        for p in t.partitions:
            isr = (
                [b.broker_id for b in p.new_isr_with_epochs]
                if ctx.version >= 3
                else list(p.new_isr)
            )
            changes.append(
                IsrChange(
                    TopicPartition(name, p.partition_index),
                    p.leader_epoch,
                    tuple(isr),
                    p.partition_epoch,
                    p.leader_recovery_state,
                )
            )
            indexes.append(p.partition_index)
        order.append((t, name, indexes))
    error, answers = await controller.alter_partition(
        request.broker_id, request.broker_epoch, changes
    )
    topics = []
    for t, name, indexes in order:
        parts = []
        for index in indexes:
            answer = answers.get(TopicPartition(name, index))
            entry: dict[str, Any] = {"partition_index": index}
            if answer is None:
                entry["error_code"] = error or ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            elif answer.state is None:
                entry["error_code"] = answer.error
            else:
                s = answer.state
                entry.update(error_code=ErrorCode.NONE, leader_id=s.leader,
                             leader_epoch=s.leader_epoch, isr=list(s.isr),
                             leader_recovery_state=s.leader_recovery_state,
                             partition_epoch=s.zk_version)  # fmt: skip
            parts.append(entry)
        topic_id = t.topic_id if ctx.version >= 2 else uuid.UUID(int=0)
        topics.append({"topic_name": name, "topic_id": topic_id, "partitions": parts})
    return apis.ALTER_PARTITION.response(error_code=error, topics=topics)
