"""DescribeProducers (KIP-664): the active idempotent/transactional producers of
partitions, from each partition's producer state."""

from __future__ import annotations

from typing import Any

from kt.broker.authorization import authorize
from kt.broker.errors import BrokerError, UnknownTopicOrPartitionError, error_code_for
from kt.broker.handlers import RequestContext, handles
from kt.broker.security.acl import AclOperation, ResourceType
from kt.protocol import ErrorCode, Struct, apis


@handles(apis.DESCRIBE_PRODUCERS.key, (0, 0))
async def describe_producers(ctx: RequestContext, request: Struct) -> Any:
    """Each requested partition's active producers."""
    replicas = ctx.services.replicas
    topics = []
    for topic in request.topics:
        parts = []
        readable = authorize(ctx, AclOperation.READ, ResourceType.TOPIC, topic.name)
        for index in topic.partition_indexes:
            entry: dict[str, Any] = {"partition_index": index, "error_code": ErrorCode.NONE,
                                     "error_message": None, "active_producers": []}  # fmt: skip
            if not readable:
                entry["error_code"] = ErrorCode.TOPIC_AUTHORIZATION_FAILED
                parts.append(entry)
                continue
            try:
                part = replicas.get_partition_or_error(topic.name, index)
            except UnknownTopicOrPartitionError as exc:
                # Kafka's handler answers its metadata miss with the exception's default
                # message; the replica manager's errors carry none.
                entry["error_code"] = error_code_for(exc)
                entry["error_message"] = "This server does not host this topic-partition."
                parts.append(entry)
                continue
            except BrokerError as exc:
                entry["error_code"] = error_code_for(exc)
                parts.append(entry)
                continue
            if part.producer_state is not None:
                entry["active_producers"] = [
                    {"producer_id": d.producer_id, "producer_epoch": d.producer_epoch,
                     "last_sequence": d.last_sequence, "last_timestamp": d.last_timestamp,
                     "coordinator_epoch": d.coordinator_epoch,
                     "current_txn_start_offset": d.current_txn_start_offset}
                    for d in part.producer_state.describe_producers()
                ]  # fmt: skip
            parts.append(entry)
        topics.append({"name": topic.name, "partitions": parts})
    return apis.DESCRIBE_PRODUCERS.response(throttle_time_ms=0, topics=topics)
