"""Produce: append record batches to partition logs.

The hot path never decodes records: the storage core frames and CRC-checks the
batches from their headers, patches base offset and leader epoch in place and
appends the bytes. Versions below 3 (message format v0/v1) are answered with
UNSUPPORTED_VERSION, as Apache Kafka 4.0 does. With acks=0 there is no answer; a
failure closes the connection instead, as in Kafka, so the producer notices.
"""

from __future__ import annotations

import time
from typing import Any

from kt.broker.errors import BrokerError, InvalidRecordError, error_code_for
from kt.broker.handlers import RequestContext, handles
from kt.protocol import ErrorCode, Struct, apis
from kt.storage.errors import StorageError

MIN_VERSION = 3


@handles(apis.PRODUCE.key, (0, 11))
async def produce(ctx: RequestContext, request: Struct) -> Any:
    """Append each partition's batches; acks=0 gets no response at all."""
    version = ctx.version
    responses = []
    for topic in request.topic_data:
        parts = []
        for pdata in topic.partition_data:
            parts.append(_append_one(ctx, topic.name, pdata.index, pdata.records, version))
        responses.append({"name": topic.name, "partition_responses": parts})
    if request.acks == 0:
        failed = [
            (t["name"], p["index"], int(p["error_code"]))
            for t in responses
            for p in t["partition_responses"]
            if p["error_code"] != ErrorCode.NONE
        ]
        if failed:
            from kt.broker.network import CloseConnection

            raise CloseConnection(f"acks=0 produce failed: {failed[:5]}")
        return None
    if request.acks not in (-1, 1):
        for t in responses:
            for p in t["partition_responses"]:
                p.update(error_code=ErrorCode.INVALID_REQUIRED_ACKS, base_offset=-1)
    # acks=-1 waits for the ISR; on one broker the append is already in the ISR.
    return apis.PRODUCE.response(responses=responses, throttle_time_ms=0)


def _append_one(
    ctx: RequestContext, topic: str, index: int, records: Any, version: int
) -> dict[str, Any]:
    broker = ctx.broker
    out: dict[str, Any] = {"index": index, "base_offset": -1, "log_append_time_ms": -1,
                           "log_start_offset": -1}  # fmt: skip
    if version < MIN_VERSION:
        out["error_code"] = ErrorCode.UNSUPPORTED_VERSION
        return out
    # As Kafka: Produce never creates topics (only Metadata requests do).
    try:
        result = broker.replica_manager.append_records(
            topic, index, records, now_ms=int(time.time() * 1000)
        )
    except (BrokerError, StorageError, OSError) as exc:
        out["error_code"] = error_code_for(exc)
        # Kafka sends a message only for refused records; the rest is a null message.
        if isinstance(exc, (InvalidRecordError, StorageError)) and exc.message:
            out["error_message"] = exc.message
        return out
    out.update(
        error_code=ErrorCode.NONE,
        base_offset=result.first_offset,
        log_append_time_ms=result.log_append_time,
        log_start_offset=result.log_start_offset,
    )
    return out
