"""DescribeLogDirs and AlterReplicaLogDirs: this broker's log directories.

DescribeLogDirs lists each log directory with the size of every partition in
it, as Kafka: a replica being moved here shows as a *future* replica
(is_future_key) whose offset_lag is how far it is behind the current log's end;
a current replica's lag is max(0, high watermark - log end offset). v4 adds the
file system's total and usable bytes. An offline directory (failed at startup or
since), or one that cannot be examined, is reported with KAFKA_STORAGE_ERROR and
no partitions; offline partitions are left out.

AlterReplicaLogDirs (v0-2) moves replicas between this broker's directories
(kt.broker.replication.alter_log_dirs has the rules and error codes); the
answer comes once each move started, not when it is done.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from kt.broker.authorization import require_cluster
from kt.broker.errors import BrokerError, error_code_for
from kt.broker.handlers import RequestContext, handles
from kt.broker.security.acl import AclOperation
from kt.protocol import ErrorCode, Struct, apis
from kt.storage.checkpoint import TopicPartition


@handles(apis.DESCRIBE_LOG_DIRS.key, (0, 4))
async def describe_log_dirs(ctx: RequestContext, request: Struct) -> Any:
    """Describe every log dir, with all partitions or the requested ones."""
    require_cluster(ctx, AclOperation.DESCRIBE)
    s = ctx.services
    wanted: set[TopicPartition] | None = None
    if request.topics is not None:
        wanted = {TopicPartition(t.topic, p) for t in request.topics for p in t.partitions}
    results = []
    for d in s.logs.log_dirs:
        results.append(_describe_dir(ctx, d, wanted))
    return apis.DESCRIBE_LOG_DIRS.response(
        throttle_time_ms=0, error_code=ErrorCode.NONE, results=results
    )


def _describe_dir(ctx: RequestContext, d: Path, wanted: set[TopicPartition] | None) -> Any:
    s = ctx.services
    out: dict[str, Any] = {"error_code": ErrorCode.NONE, "log_dir": str(d), "topics": [],
                           "total_bytes": -1, "usable_bytes": -1}  # fmt: skip
    if d in s.logs.offline_dirs:
        # Kafka: "Log directory ... is offline" -> KAFKA_STORAGE_ERROR, no sizes.
        out["error_code"] = ErrorCode.KAFKA_STORAGE_ERROR
        return out
    try:
        if not d.is_dir():
            raise OSError(f"{d} is not a directory")
        st = os.statvfs(d)
    except OSError as exc:
        out["error_code"] = error_code_for(exc)
        return out
    out["total_bytes"] = st.f_blocks * st.f_frsize
    out["usable_bytes"] = st.f_bavail * st.f_frsize
    by_topic: dict[str, list[dict[str, Any]]] = {}
    logs = s.logs
    for tp, plog in sorted(logs.logs_in(d).items()):
        if wanted is not None and tp not in wanted:
            continue
        part = s.replicas.get(tp)
        if part is not None and part.offline:
            continue
        is_future = logs.future_dir_of.get(tp) == d
        current = logs.get(tp)
        try:
            size = plog.size
        except OSError:
            continue
        # Kafka's getLogEndOffsetLag.
        if current is None:
            lag = -1
        elif is_future:
            lag = current.log_end_offset - plog.log_end_offset
        else:
            lag = max(current.high_watermark - current.log_end_offset, 0)
        by_topic.setdefault(tp.topic, []).append(
            {
                "partition_index": tp.partition,
                "partition_size": size,
                "offset_lag": lag,
                "is_future_key": is_future,
            }
        )
    out["topics"] = [{"name": t, "partitions": ps} for t, ps in sorted(by_topic.items())]
    return out


@handles(apis.ALTER_REPLICA_LOG_DIRS.key, (0, 2))
async def alter_replica_log_dirs(ctx: RequestContext, request: Struct) -> Any:
    """Move each named replica to its log directory; one error code per partition."""
    require_cluster(ctx, AclOperation.ALTER)
    rm = ctx.services.replicas
    moves: dict[TopicPartition, str] = {}
    for entry in request.dirs:
        for t in entry.topics:
            for p in t.partitions:
                moves[TopicPartition(t.name, p)] = entry.path
    codes: dict[str, list[dict[str, int]]] = {}
    for tp, path in moves.items():
        try:
            await rm.alter_replica_log_dir(tp, path)
            code = ErrorCode.NONE
        except BrokerError as exc:
            code = error_code_for(exc)
        codes.setdefault(tp.topic, []).append({"partition_index": tp.partition, "error_code": code})
    return apis.ALTER_REPLICA_LOG_DIRS.response(
        throttle_time_ms=0,
        results=[{"topic_name": t, "partitions": ps} for t, ps in codes.items()],
    )
