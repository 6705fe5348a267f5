"""ListOffsets: earliest, latest, max-timestamp and by-timestamp offset lookups,
answered by the ReplicaManager.

As Kafka, only the debugging replica id (-2) may read a partition this broker
does not lead; consumers (-1) and followers need the leader."""

from __future__ import annotations

from typing import Any

from kt.broker.authorization import authorize
from kt.broker.errors import BrokerError, error_code_for
from kt.broker.handlers import RequestContext, handles
from kt.broker.security.acl import AclOperation, ResourceType
from kt.protocol import ErrorCode, Struct, apis

READ_COMMITTED = 1
DEBUGGING_REPLICA_ID = -2


@handles(apis.LIST_OFFSETS.key, (0, 8))
async def list_offsets(ctx: RequestContext, request: Struct) -> Any:
    """Answer each partition's timestamp query with an offset (and its timestamp/epoch)."""
    replicas = ctx.services.replicas
    committed = ctx.version >= 2 and request.isolation_level == READ_COMMITTED
    topics = []
    for topic in request.topics:
        parts = []
        described = authorize(ctx, AclOperation.DESCRIBE, ResourceType.TOPIC, topic.name)
        for p in topic.partitions:
            entry: dict[str, Any] = {"partition_index": p.partition_index,
                                     "error_code": ErrorCode.NONE}  # fmt: skip
            if not described:
                entry["error_code"] = ErrorCode.TOPIC_AUTHORIZATION_FAILED
                entry.update(offset=-1, timestamp=-1)
                parts.append(entry)
                continue
            try:
                offset, timestamp, epoch = replicas.fetch_offset_for_timestamp(
                    topic.name,
                    p.partition_index,
                    p.timestamp,
                    current_leader_epoch=p.current_leader_epoch if ctx.version >= 4 else -1,
                    read_committed=committed,
                    require_leader=request.replica_id != DEBUGGING_REPLICA_ID,
                )
            except BrokerError as exc:
                entry["error_code"] = error_code_for(exc)
            else:
                entry.update(offset=offset, timestamp=timestamp, leader_epoch=epoch)
                if ctx.version == 0:
                    entry["old_style_offsets"] = [offset] if offset >= 0 else []
            parts.append(entry)
        topics.append({"name": topic.name, "partitions": parts})
    return apis.LIST_OFFSETS.response(throttle_time_ms=0, topics=topics)
