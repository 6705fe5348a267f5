"""DeleteRecords: move partitions' log start offsets forward.

As in Kafka, offset -1 means the high watermark, an offset above the high
watermark (or below -1) is OFFSET_OUT_OF_RANGE, an offset at or below the current
log start changes nothing, and topics whose cleanup.policy lacks "delete" refuse
with POLICY_VIOLATION. The reply carries the new low watermark (the log start
offset). The log start offsets are checkpointed before the reply, so a restart
keeps them; segments wholly below the new start are left to retention.
"""

from __future__ import annotations

import logging
from typing import Any

from kt.broker.authorization import authorize
from kt.broker.errors import BrokerError, error_code_for
from kt.broker.handlers import RequestContext, handles
from kt.broker.security.acl import AclOperation, ResourceType
from kt.protocol import ErrorCode, Struct, apis
from kt.storage.errors import OffsetOutOfRangeError

log = logging.getLogger("kt.broker.records")


@handles(apis.DELETE_RECORDS.key, (0, 2))
async def delete_records(ctx: RequestContext, request: Struct) -> Any:
    """Delete the records before each requested offset."""
    s = ctx.services
    moved = False
    topics = []
    for topic in request.topics:
        parts = []
        deletable = authorize(ctx, AclOperation.DELETE, ResourceType.TOPIC, topic.name)
        for p in topic.partitions:
            if not deletable:
                parts.append({"partition_index": p.partition_index, "low_watermark": -1,
                              "error_code": ErrorCode.TOPIC_AUTHORIZATION_FAILED})  # fmt: skip
                continue
            code, low = _delete_before(ctx, topic.name, p.partition_index, p.offset)
            moved = moved or code == ErrorCode.NONE
            parts.append({"partition_index": p.partition_index, "low_watermark": low,
                          "error_code": code})  # fmt: skip
        topics.append({"name": topic.name, "partitions": parts})
    if moved:
        try:
            s.logs.checkpoint_log_start_offsets()
        except OSError as exc:
            log.error("cannot checkpoint log start offsets: %s", exc)
    return apis.DELETE_RECORDS.response(throttle_time_ms=0, topics=topics)


def _delete_before(ctx: RequestContext, topic: str, index: int, offset: int) -> tuple[int, int]:
    try:
        low = ctx.services.replicas.delete_records(topic, index, offset)
    except (BrokerError, OffsetOutOfRangeError) as exc:
        return error_code_for(exc), -1
    return ErrorCode.NONE, low
