"""WriteTxnMarkers: the transaction coordinator ends a transaction on the partitions
this broker leads (Kafka's KafkaApis.handleWriteTxnMarkersRequest).

Each marker's partitions get a COMMIT or ABORT control batch, appended through the
ReplicaManager as leader and answered once the ISR has it (acks=all, waiting at
most `request.timeout.ms`). Answers are grouped by producer id, as Kafka's
response map is (two markers of one producer share one entry).
"""

from __future__ import annotations

from typing import Any

from kt.broker.authorization import authorize_cluster, require_cluster
from kt.broker.handlers import RequestContext, handles
from kt.broker.replica_manager import TxnMarker
from kt.broker.security.acl import AclOperation
from kt.protocol import ErrorCode, Struct, apis
from kt.storage.checkpoint import TopicPartition


@handles(apis.WRITE_TXN_MARKERS.key, (0, 1))
async def write_txn_markers(ctx: RequestContext, request: Struct) -> Any:
    """Write every marker and answer each partition's outcome."""
    if not authorize_cluster(ctx, AclOperation.ALTER, log_if_denied=False):
        require_cluster(ctx, AclOperation.CLUSTER_ACTION)
    markers = [
        TxnMarker(
            producer_id=m.producer_id,
            producer_epoch=m.producer_epoch,
            coordinator_epoch=m.coordinator_epoch,
            commit=bool(m.transaction_result),
            partitions=tuple(
                TopicPartition(t.name, index) for t in m.topics for index in t.partition_indexes
            ),
        )
        for m in request.markers
    ]
    timeout_ms = ctx.services.settings.request_timeout_ms
    results = await ctx.services.replicas.write_txn_markers(markers, timeout_ms)
    by_producer: dict[int, dict[str, dict[int, ErrorCode]]] = {}
    for marker, errors in zip(markers, results, strict=True):
        topics = by_producer.setdefault(marker.producer_id, {})
        for tp, code in errors.items():
            topics.setdefault(tp.topic, {})[tp.partition] = code
    return apis.WRITE_TXN_MARKERS.response(
        markers=[
            {
                "producer_id": pid,
                "topics": [
                    {
                        "name": name,
                        "partitions": [
                            {"partition_index": index, "error_code": code}
                            for index, code in parts.items()
                        ],
                    }
                    for name, parts in topics.items()
                ],
            }
            for pid, topics in by_producer.items()
        ]
    )
