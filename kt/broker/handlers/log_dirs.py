"""DescribeLogDirs: each log directory with the size of every partition in it.

Offset lag is always 0 and no partition is a "future" replica (kt never moves
replicas between directories). v4 adds the file system's total and usable
bytes. An offline directory (failed at startup or since), or one that cannot be
examined, is reported with KAFKA_STORAGE_ERROR and no partitions; offline
partitions are left out.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from kt.broker.handlers import RequestContext, handles
from kt.protocol import ErrorCode, Struct, apis
from kt.storage.checkpoint import TopicPartition


@handles(apis.DESCRIBE_LOG_DIRS.key, (0, 4))
async def describe_log_dirs(ctx: RequestContext, request: Struct) -> Any:
    """Describe every log dir, with all partitions or the requested ones."""
    broker = ctx.broker
    wanted: set[TopicPartition] | None = None
    if request.topics is not None:
        wanted = {TopicPartition(t.topic, p) for t in request.topics for p in t.partitions}
    results = []
    for d in broker.logs.log_dirs:
        results.append(_describe_dir(ctx, d, wanted))
    return apis.DESCRIBE_LOG_DIRS.response(
        throttle_time_ms=0, error_code=ErrorCode.NONE, results=results
    )


def _describe_dir(ctx: RequestContext, d: Path, wanted: set[TopicPartition] | None) -> Any:
    broker = ctx.broker
    out: dict[str, Any] = {"error_code": ErrorCode.NONE, "log_dir": str(d), "topics": [],
                           "total_bytes": -1, "usable_bytes": -1}  # fmt: skip
    if d in broker.logs.offline_dirs:
        # Kafka: "Log directory ... is offline" -> KAFKA_STORAGE_ERROR, no sizes.
        out["error_code"] = ErrorCode.KAFKA_STORAGE_ERROR
        return out
    try:
        if not d.is_dir():
            raise OSError(f"{d} is not a directory")
        st = os.statvfs(d)
    except OSError:
        out["error_code"] = ErrorCode.KAFKA_STORAGE_ERROR
        return out
    out["total_bytes"] = st.f_blocks * st.f_frsize
    out["usable_bytes"] = st.f_bavail * st.f_frsize
    by_topic: dict[str, list[dict[str, Any]]] = {}
    for tp, plog in sorted(broker.logs.logs.items()):
        if broker.logs.dir_of.get(tp) != d or (wanted is not None and tp not in wanted):
            continue
        part = broker.replica_manager.get(tp)
        if part is not None and part.offline:
            continue
        try:
            size = plog.size
        except OSError:
            continue
        by_topic.setdefault(tp.topic, []).append(
            {
                "partition_index": tp.partition,
                "partition_size": size,
                "offset_lag": 0,
                "is_future_key": False,
            }
        )
    out["topics"] = [{"name": t, "partitions": ps} for t, ps in sorted(by_topic.items())]
    return out
