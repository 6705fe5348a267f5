"""OffsetForLeaderEpoch: the end offset of a leader epoch (KIP-101 / KIP-320).

Consumers use it to detect log truncation after a leader change. The answer is
the ReplicaManager's (the partition's `end_offset_for_epoch`, over its leader
epoch cache): the log end offset for the current
epoch, the start of the next epoch for an older one, and -1/-1 for an undefined
or unknown-future epoch. A current_leader_epoch (v2+) older than ours is
FENCED_LEADER_EPOCH, a newer one UNKNOWN_LEADER_EPOCH.

The partition's current epoch counts even before anything was written in it:
Kafka records it in the cache when the replica becomes leader, kt on the first
append, so an epoch newer than every cached one is treated as if it started at
the log end offset.
"""

from __future__ import annotations

from typing import Any

from kt.broker.authorization import authorize, authorize_cluster
from kt.broker.errors import BrokerError, error_code_for
from kt.broker.handlers import RequestContext, handles
from kt.broker.security.acl import AclOperation, ResourceType
from kt.protocol import ErrorCode, Struct, apis

UNDEFINED_EPOCH = -1
UNDEFINED_OFFSET = -1


@handles(apis.OFFSET_FOR_LEADER_EPOCH.key, (0, 4))
async def offset_for_leader_epoch(ctx: RequestContext, request: Struct) -> Any:
    """Answer each partition's epoch with (epoch, end offset)."""
    replicas = ctx.services.replicas
    check_current = ctx.version >= 2
    topics = []
    # KIP-320: CLUSTER_ACTION (followers), else DESCRIBE on each topic (consumers)
    cluster = authorize_cluster(ctx, AclOperation.CLUSTER_ACTION, log_if_denied=False)
    for topic in request.topics:
        parts = []
        described = cluster or authorize(ctx, AclOperation.DESCRIBE, ResourceType.TOPIC,
                                         topic.topic)  # fmt: skip
        for p in topic.partitions:
            entry: dict[str, Any] = {"partition": p.partition, "error_code": ErrorCode.NONE,
                                     "leader_epoch": UNDEFINED_EPOCH,
                                     "end_offset": UNDEFINED_OFFSET}  # fmt: skip
            if not described:
                entry["error_code"] = ErrorCode.TOPIC_AUTHORIZATION_FAILED
                parts.append(entry)
                continue
            current = p.current_leader_epoch if check_current else -1
            try:
                epoch, offset = replicas.last_offset_for_leader_epoch(
                    topic.topic, p.partition, p.leader_epoch, current_leader_epoch=current
                )
            except BrokerError as exc:
                entry["error_code"] = error_code_for(exc)
            else:
                entry.update(leader_epoch=epoch, end_offset=offset)
            parts.append(entry)
        topics.append({"topic": topic.topic, "partitions": parts})
    return apis.OFFSET_FOR_LEADER_EPOCH.response(throttle_time_ms=0, topics=topics)
