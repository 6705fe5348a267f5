"""Requests for the controller: ControlledShutdown, AlterPartition, ElectLeaders.

Any broker receives them; only the active controller acts. For the inter-broker
ones the others answer NOT_CONTROLLER and the sender looks the controller up again;
ElectLeaders comes from admin clients, which may send it to any broker, so a broker
that is not the controller forwards it (Kafka's broker hands it to its controller).
The work happens in the controller's event task, so these requests are ordered with
the controller's own reactions to ZooKeeper.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from typing import Any

from kt.broker.authorization import require_cluster
from kt.broker.controller.controller import IsrChange
from kt.broker.controller_link import ControllerUnavailableError
from kt.broker.handlers import RequestContext, handles
from kt.broker.security.acl import AclOperation
from kt.cluster.election import ElectionType
from kt.protocol import ErrorCode, Struct, apis
from kt.storage.checkpoint import TopicPartition

log = logging.getLogger("kt.broker.handlers")

# partition -> (error code, message)
ElectionResults = dict[TopicPartition, tuple[int, str | None]]


@handles(apis.CONTROLLED_SHUTDOWN.key, (0, 3))
async def controlled_shutdown(ctx: RequestContext, request: Struct) -> Any:
    """Move leadership away from the broker that is shutting down."""
    require_cluster(ctx, AclOperation.CLUSTER_ACTION)
    controller = ctx.services.cluster.active_controller()
    if controller is None:
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
    require_cluster(ctx, AclOperation.CLUSTER_ACTION)
    controller = ctx.services.cluster.active_controller()
    if controller is None:
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


@handles(apis.ELECT_LEADERS.key, (0, 2))
async def elect_leaders(ctx: RequestContext, request: Struct) -> Any:
    """Preferred (v0+) or unclean (v1+, KIP-460) leader elections, run by the
    controller; answered once this broker's metadata shows the new leaders (or at
    the request's timeout), as Kafka's DelayedElectLeader does."""
    require_cluster(ctx, AclOperation.ALTER)
    raw_type = request.election_type if ctx.version >= 1 else ElectionType.PREFERRED
    requested = (
        None
        if request.topic_partitions is None
        else [TopicPartition(t.topic, p) for t in request.topic_partitions for p in t.partitions]
    )
    timeout_s = max(request.timeout_ms, 0) / 1000 or 60.0
    deadline = time.monotonic() + timeout_s
    top: int
    results: ElectionResults
    if raw_type not in (ElectionType.PREFERRED, ElectionType.UNCLEAN):
        top, results = ErrorCode.INVALID_REQUEST, {}
    else:
        election_type = ElectionType(raw_type)
        try:
            top, results = await asyncio.wait_for(
                _elect(ctx, election_type, requested, request.timeout_ms), timeout_s
            )
        except (TimeoutError, ControllerUnavailableError) as exc:
            log.warning("ElectLeaders: %s", exc or "no answer from the controller in time")
            top, results = ErrorCode.REQUEST_TIMED_OUT, {}
        if top == ErrorCode.NONE:
            await _wait_for_leaders(ctx, election_type, results, deadline)
    if top != ErrorCode.NONE and requested is not None:
        # v0 has no top-level error: every partition carries it.
        results = {tp: (top, None) for tp in requested}
    by_topic: dict[str, list[dict[str, Any]]] = {}
    for tp, (code, message) in results.items():
        by_topic.setdefault(tp.topic, []).append(
            {"partition_id": tp.partition, "error_code": code, "error_message": message}
        )
    return apis.ELECT_LEADERS.response(
        error_code=top,
        replica_election_results=[
            {"topic": topic, "partition_result": parts} for topic, parts in by_topic.items()
        ],
    )


async def _elect(
    ctx: RequestContext,
    election_type: ElectionType,
    requested: list[TopicPartition] | None,
    timeout_ms: int,
) -> tuple[int, ElectionResults]:
    """The controller's answer: from our own controller when it is active, else
    through the controller link."""
    s = ctx.services
    controller = s.cluster.active_controller()
    if controller is not None:
        return await controller.elect_leaders(election_type, requested)
    link = s.cluster.active_controller_link()
    if link is None or s.topics.cache.controller_id == s.node.node_id:
        # Not joined yet, or our cache still names us while we are not controller
        # (forwarding would come back here).
        return ErrorCode.NOT_CONTROLLER, {}
    topics: dict[str, list[int]] = {}
    for tp in requested or []:
        topics.setdefault(tp.topic, []).append(tp.partition)
    body = {
        "election_type": int(election_type),
        "topic_partitions": None
        if requested is None
        else [{"topic": t, "partitions": ps} for t, ps in topics.items()],
        "timeout_ms": timeout_ms,
    }
    resp = await link.send(apis.ELECT_LEADERS, body, timeout_s=max(timeout_ms, 1) / 1000)
    results: ElectionResults = {
        TopicPartition(r.topic, p.partition_id): (p.error_code, p.error_message)
        for r in resp.replica_election_results
        for p in r.partition_result
    }
    top = getattr(resp, "error_code", ErrorCode.NONE)
    if top == ErrorCode.NOT_CONTROLLER:
        await link.controller_moved()
    return top, results


async def _wait_for_leaders(
    ctx: RequestContext,
    election_type: ElectionType,
    results: ElectionResults,
    deadline: float,
) -> None:
    """Until this broker's metadata cache shows every elected partition with a
    leader of the requested kind (its preferred replica, or any leader for unclean);
    partitions still waiting at the deadline are answered REQUEST_TIMED_OUT."""
    s = ctx.services
    cache = s.topics.cache

    def done(tp: TopicPartition) -> bool:
        p = cache.partition(tp.topic, tp.partition)
        if p is None or p.leader < 0:
            return False
        return election_type is ElectionType.UNCLEAN or (
            bool(p.replicas) and p.leader == p.replicas[0]
        )

    pending = [tp for tp, (code, _) in results.items() if code == ErrorCode.NONE]
    while pending:
        pending = [tp for tp in pending if not done(tp)]
        remaining = deadline - time.monotonic()
        if not pending or remaining <= 0:
            break
        await s.replicas.metadata_changed(min(remaining, 0.5))
    for tp in pending:
        results[tp] = (ErrorCode.REQUEST_TIMED_OUT, "Timed out waiting for the new leader")
