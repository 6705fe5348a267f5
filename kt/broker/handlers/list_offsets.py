"""ListOffsets: earliest, latest, max-timestamp and by-timestamp offset lookups."""

from __future__ import annotations

from typing import Any

from kt.broker.errors import BrokerError, error_code_for
from kt.broker.handlers import RequestContext, handles
from kt.broker.partition import Partition
from kt.protocol import ErrorCode, Struct, apis

LATEST = -1
EARLIEST = -2
MAX_TIMESTAMP = -3
EARLIEST_LOCAL = -4
LATEST_TIERED = -5
READ_COMMITTED = 1


@handles(apis.LIST_OFFSETS.key, (0, 8))
async def list_offsets(ctx: RequestContext, request: Struct) -> Any:
    """Answer each partition's timestamp query with an offset (and its timestamp/epoch)."""
    replicas = ctx.broker.replica_manager
    committed = ctx.version >= 2 and request.isolation_level == READ_COMMITTED
    topics = []
    for topic in request.topics:
        parts = []
        for p in topic.partitions:
            entry: dict[str, Any] = {"partition_index": p.partition_index,
                                     "error_code": ErrorCode.NONE}  # fmt: skip
            try:
                part = replicas.get_partition_or_error(topic.name, p.partition_index)
                if ctx.version >= 4:
                    replicas.check_current_leader_epoch(part, p.current_leader_epoch)
            except BrokerError as exc:
                entry["error_code"] = error_code_for(exc)
            else:
                offset, timestamp, epoch = lookup(part, p.timestamp, committed)
                entry.update(offset=offset, timestamp=timestamp, leader_epoch=epoch)
                if ctx.version == 0:
                    entry["old_style_offsets"] = [offset] if offset >= 0 else []
            parts.append(entry)
        topics.append({"name": topic.name, "partitions": parts})
    return apis.LIST_OFFSETS.response(throttle_time_ms=0, topics=topics)


def lookup(part: Partition, timestamp: int, committed: bool = False) -> tuple[int, int, int]:
    """(offset, timestamp, leader epoch) for a ListOffsets query; offset -1 when none."""
    log = part.log
    upper = part.last_stable_offset() if committed else part.high_watermark
    if timestamp in (EARLIEST, EARLIEST_LOCAL):
        off = log.log_start_offset
        return off, -1, _epoch_for(part, off)
    if timestamp in (LATEST, LATEST_TIERED):
        return upper, -1, _epoch_for(part, upper)
    if timestamp == MAX_TIMESTAMP:
        # The record holding the largest timestamp, with its batch's epoch (Kafka 3.8).
        found = log.max_timestamp_and_offset()
        if found is None or found[1] >= upper:
            return -1, -1, -1
        ts, off, epoch = found
        return off, ts, epoch
    found = log.fetch_offset_by_timestamp(timestamp)
    if found is None or found[0] >= upper:
        return -1, -1, -1
    return found[0], found[1], _epoch_for(part, found[0])


def _epoch_for(part: Partition, offset: int) -> int:
    epoch = part.log.leader_epoch_cache.epoch_for_offset(offset)
    return part.leader_epoch if epoch is None else epoch
