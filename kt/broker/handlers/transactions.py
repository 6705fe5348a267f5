"""Transaction APIs: AddPartitionsToTxn, AddOffsetsToTxn, EndTxn, DescribeTransactions
and ListTransactions, served by the transaction coordinator
(`kt.broker.transactions`). TxnOffsetCommit is the group coordinator's
(`kt.broker.handlers.offsets`).

As Kafka 3.x's KafkaApis: AddPartitionsToTxn refuses the whole request when a
partition does not exist (UNKNOWN_TOPIC_OR_PARTITION for it,
OPERATION_NOT_ATTEMPTED for the others); v4+ carries several transactions (the
broker-to-broker form, KIP-890), each added, or with `verify_only` only checked.
PRODUCER_FENCED is INVALID_PRODUCER_EPOCH for clients older than KIP-588.
"""

from __future__ import annotations

from typing import Any

from kt.broker.authorization import authorize, require, require_cluster
from kt.broker.handlers import RequestContext, handles
from kt.broker.metadata_store import CONSUMER_OFFSETS, INTERNAL_TOPICS
from kt.broker.security.acl import AclOperation, ResourceType
from kt.broker.transactions.coordinator import TransactionCoordinator
from kt.protocol import ErrorCode, Struct, apis

E = ErrorCode
TopicPartitionT = tuple[str, int]


def _coordinator(ctx: RequestContext) -> TransactionCoordinator:
    return ctx.services.transactions.coordinator


def _fenced_for(version: int, fenced_since: int, error: ErrorCode) -> ErrorCode:
    """PRODUCER_FENCED as a client of this version knows it (KIP-588)."""
    if error == E.PRODUCER_FENCED and version < fenced_since:
        return E.INVALID_PRODUCER_EPOCH
    return error


def _topic_results(errors: dict[TopicPartitionT, ErrorCode]) -> list[dict[str, Any]]:
    by_topic: dict[str, list[dict[str, Any]]] = {}
    for (topic, p), code in errors.items():
        by_topic.setdefault(topic, []).append({"partition_index": p, "partition_error_code": code})
    return [{"name": t, "results_by_partition": ps} for t, ps in by_topic.items()]


async def _add_one(
    ctx: RequestContext, tid: str, pid: int, epoch: int, topics: Any, verify_only: bool
) -> dict[TopicPartitionT, ErrorCode]:
    wanted = list(dict.fromkeys((t.name, p) for t in topics for p in t.partitions))
    coord = _coordinator(ctx)
    if verify_only:
        return coord.verify_partitions(tid, pid, epoch, wanted)
    if not authorize(ctx, AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, tid):
        return dict.fromkeys(wanted, E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
    writable = {
        t: t in INTERNAL_TOPICS or authorize(ctx, AclOperation.WRITE, ResourceType.TOPIC, t)
        for t in dict.fromkeys(t for t, _ in wanted)
    }
    cache = ctx.services.topics.cache
    denied = {tp for tp in wanted if not writable[tp[0]]}
    # Before this broker has the controller's view nothing is missing: the
    # coordinator answers (NOT_COORDINATOR, as it owns no transactions yet).
    missing = {tp for tp in wanted if cache.partition(*tp) is None} if cache.ready else set()
    if missing or denied:
        # the failing partitions say why; the others were not attempted
        return {tp: E.TOPIC_AUTHORIZATION_FAILED if tp in denied
                else E.UNKNOWN_TOPIC_OR_PARTITION if tp in missing
                else E.OPERATION_NOT_ATTEMPTED for tp in wanted}  # fmt: skip
    error = await coord.add_partitions(tid, pid, epoch, wanted)
    return dict.fromkeys(wanted, _fenced_for(ctx.version, 2, error))


@handles(apis.ADD_PARTITIONS_TO_TXN.key, (0, 4))
async def add_partitions_to_txn(ctx: RequestContext, request: Struct) -> Any:
    """Add partitions to a producer's transaction (v4+: several transactions)."""
    if ctx.version < 4:
        errors = await _add_one(ctx, request.v3_and_below_transactional_id,
                                request.v3_and_below_producer_id,
                                request.v3_and_below_producer_epoch,
                                request.v3_and_below_topics, False)  # fmt: skip
        return apis.ADD_PARTITIONS_TO_TXN.response(
            throttle_time_ms=0, results_by_topic_v3_and_below=_topic_results(errors)
        )
    # v4+: brokers verifying their produce requests
    require_cluster(ctx, AclOperation.CLUSTER_ACTION)
    results = []
    for txn in request.transactions:
        errors = await _add_one(ctx, txn.transactional_id, txn.producer_id, txn.producer_epoch,
                                txn.topics, txn.verify_only)  # fmt: skip
        results.append({"transactional_id": txn.transactional_id,
                        "topic_results": _topic_results(errors)})  # fmt: skip
    return apis.ADD_PARTITIONS_TO_TXN.response(
        throttle_time_ms=0, error_code=E.NONE, results_by_transaction=results
    )


@handles(apis.ADD_OFFSETS_TO_TXN.key, (0, 3))
async def add_offsets_to_txn(ctx: RequestContext, request: Struct) -> Any:
    """Add the group's `__consumer_offsets` partition to the transaction, so its
    TxnOffsetCommit is committed or aborted with it."""
    require(ctx, AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, request.transactional_id,
            E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)  # fmt: skip
    require(ctx, AclOperation.READ, ResourceType.GROUP, request.group_id,
            E.GROUP_AUTHORIZATION_FAILED)  # fmt: skip
    partition = ctx.services.groups.partition_for(request.group_id)
    error = await _coordinator(ctx).add_partitions(
        request.transactional_id, request.producer_id, request.producer_epoch,
        [(CONSUMER_OFFSETS, partition)],
    )  # fmt: skip
    return apis.ADD_OFFSETS_TO_TXN.response(
        throttle_time_ms=0, error_code=_fenced_for(ctx.version, 2, error)
    )


@handles(apis.END_TXN.key, (0, 3))
async def end_txn(ctx: RequestContext, request: Struct) -> Any:
    """Commit or abort the producer's transaction."""
    require(ctx, AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, request.transactional_id,
            E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)  # fmt: skip
    error = await _coordinator(ctx).end_txn(
        request.transactional_id, request.producer_id, request.producer_epoch, request.committed
    )
    return apis.END_TXN.response(throttle_time_ms=0, error_code=_fenced_for(ctx.version, 2, error))


@handles(apis.DESCRIBE_TRANSACTIONS.key, (0, 0))
async def describe_transactions(ctx: RequestContext, request: Struct) -> Any:
    """The state of each transactional id coordinated here."""
    coord = _coordinator(ctx)
    states = []
    for tid in request.transactional_ids:
        if not authorize(ctx, AclOperation.DESCRIBE, ResourceType.TRANSACTIONAL_ID, tid):
            states.append({"error_code": E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
                           "transactional_id": tid, "transaction_state": "",
                           "transaction_timeout_ms": 0, "transaction_start_time_ms": -1,
                           "producer_id": -1, "producer_epoch": -1, "topics": []})  # fmt: skip
            continue
        error, d = coord.describe(tid)
        entry: dict[str, Any] = {"error_code": error, "transactional_id": tid,
                                 "transaction_state": "", "transaction_timeout_ms": 0,
                                 "transaction_start_time_ms": -1, "producer_id": -1,
                                 "producer_epoch": -1, "topics": []}  # fmt: skip
        if d is not None:
            by_topic: dict[str, list[int]] = {}
            for topic, p in d.partitions:
                if authorize(ctx, AclOperation.DESCRIBE, ResourceType.TOPIC, topic,
                             log_if_denied=False):  # fmt: skip
                    by_topic.setdefault(topic, []).append(p)
            entry.update(
                transaction_state=d.state,
                transaction_timeout_ms=d.timeout_ms,
                transaction_start_time_ms=d.start_ms,
                producer_id=d.producer_id,
                producer_epoch=d.producer_epoch,
                topics=[{"topic": t, "partitions": ps} for t, ps in by_topic.items()],
            )
        states.append(entry)
    return apis.DESCRIBE_TRANSACTIONS.response(throttle_time_ms=0, transaction_states=states)


@handles(apis.LIST_TRANSACTIONS.key, (0, 1))
async def list_transactions(ctx: RequestContext, request: Struct) -> Any:
    """The transactions coordinated here, filtered by state, producer id and (v1)
    running time."""
    duration = request.duration_filter if ctx.version >= 1 else -1
    error, unknown, found = _coordinator(ctx).list_transactions(
        list(request.state_filters), list(request.producer_id_filters), duration
    )
    return apis.LIST_TRANSACTIONS.response(
        throttle_time_ms=0,
        error_code=error,
        unknown_state_filters=unknown,
        transaction_states=[
            {"transactional_id": d.transactional_id, "producer_id": d.producer_id,
             "transaction_state": d.state}
            for d in found
            if authorize(ctx, AclOperation.DESCRIBE, ResourceType.TRANSACTIONAL_ID,
                         d.transactional_id, log_if_denied=False)
        ],
    )  # fmt: skip
