"""Produce: append record batches to partition logs.

The hot path never decodes records: the storage core frames and CRC-checks the
batch from its header, patches base offset and leader epoch in place and appends
the bytes (only compacted topics decode records, to refuse those without a key).
As in Kafka, each partition takes exactly one v2 batch, and a topic is never
created by a produce (the producer's Metadata request does that). Versions below
3 (message format v0/v1) are answered with UNSUPPORTED_VERSION, as Apache Kafka
4.0 does. With acks=0 there is no answer; a failure closes the connection
instead, as in Kafka, so the producer notices.

With `transaction.partition.verification.enable` (KIP-890 part 1), transactional
batches that would open a transaction on their partition are verified with the
transaction coordinator first (`_verify_transactional`); the connection's next
request waits meanwhile, as Kafka keeps the channel muted.
"""

from __future__ import annotations

import struct
import time
from typing import Any

from kt.broker import timeline
from kt.broker.authorization import authorize
from kt.broker.errors import (
    BrokerError,
    CloseConnection,
    InvalidProducerIdMappingError,
    InvalidRecordError,
    TransactionalIdAuthorizationFailedError,
    error_code_for,
)
from kt.broker.handlers import DeferredResponse, RequestContext, handles
from kt.broker.handlers.readiness import unknown_partition
from kt.broker.metadata_store import INTERNAL_TOPICS
from kt.broker.replica_manager import replication_errors
from kt.broker.security.acl import AclOperation, ResourceType
from kt.broker.transactions.verification import VerificationGuard
from kt.broker.transactions.verifier import produce_error
from kt.protocol import ErrorCode, Struct, apis
from kt.storage import record_batch as v2
from kt.storage.checkpoint import TopicPartition
from kt.storage.compression import Codec
from kt.storage.errors import StorageError
from kt.storage.log import RecordValidationError

MIN_VERSION = 3
VALID_ACKS = (-1, 0, 1)
_LENGTH = struct.Struct(">i")
_ATTRIBUTES = struct.Struct(">h")
# Where every message format keeps its batch length and magic byte.
_LENGTH_AT = 8
_MAGIC_AT = 16


@handles(apis.PRODUCE.key, (0, 11))
async def produce(ctx: RequestContext, request: Struct) -> Any:
    """Append each partition's batches; acks=0 gets no response at all."""
    version = ctx.version
    if version >= MIN_VERSION and request.transactional_id is None and _has_transactional(request):
        # Kafka's KafkaApis: transactional batches need a transactional id (the one
        # an authorizer would check); the whole request is refused (the dispatcher
        # answers every partition, or closes an acks=0 producer's connection).
        raise TransactionalIdAuthorizationFailedError()
    txn_id = request.transactional_id if version >= MIN_VERSION else None
    if (
        txn_id is not None
        and _has_transactional(request)
        and not authorize(ctx, AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, txn_id)
    ):
        raise TransactionalIdAuthorizationFailedError()
    # WRITE on each topic, checked before the topic's existence (as KafkaApis)
    counts: dict[str, int] = {}
    for topic in request.topic_data:
        counts[topic.name] = counts.get(topic.name, 0) + 1
    writable = {
        name for name, n in counts.items()
        if authorize(ctx, AclOperation.WRITE, ResourceType.TOPIC, name, ref_count=n)
    }  # fmt: skip
    responses = []
    # The partitions whose records passed the request checks, in request order.
    accepted: list[tuple[TopicPartition, Any, dict[str, Any]]] = []
    for topic in request.topic_data:
        parts = []
        for pdata in topic.partition_data:
            out: dict[str, Any] = {"index": pdata.index, "error_code": ErrorCode.NONE,
                                   "base_offset": -1, "log_append_time_ms": -1,
                                   "log_start_offset": -1}  # fmt: skip
            problem = (
                _request_problem(ctx, topic.name, pdata.index, pdata.records, version,
                                 request.acks)
                if topic.name in writable or version < MIN_VERSION
                else ErrorCode.TOPIC_AUTHORIZATION_FAILED
            )  # fmt: skip
            if problem is not None:
                out["error_code"] = problem
            else:
                accepted.append((TopicPartition(topic.name, pdata.index), pdata.records, out))
            parts.append(out)
        responses.append({"name": topic.name, "partition_responses": parts})
    guards: dict[TopicPartition, VerificationGuard] = {}
    refused: dict[TopicPartition, tuple[BrokerError, str | None]] = {}
    replicas = ctx.services.replicas
    if request.transactional_id is not None and replicas.txn_verification_enabled and accepted:
        # InvalidProducerIdMappingError (several producer ids) refuses the whole
        # request: the dispatcher answers it, as Kafka's getErrorResponse.
        guards, refused = await _verify_transactional(ctx, request.transactional_id,
                                                      accepted, version)  # fmt: skip
    # acks=all: the offset each appended partition's high watermark must reach.
    required: dict[TopicPartition, tuple[int, dict[str, Any]]] = {}
    for tp, records, out in accepted:
        if tp in refused:
            error, message = refused[tp]
            out["error_code"] = error_code_for(error)
            if message:
                out["error_message"] = message
            continue
        next_offset = _append_one(ctx, tp, records, request.acks, out, guards.get(tp))
        if next_offset is not None and request.acks == -1:
            required[tp] = (next_offset, out)
    if timeline.armed():
        for t in responses:
            for part in t["partition_responses"]:
                timeline.once(f"{t['name']}-{part['index']}", "leader_produce",
                              error=part["error_code"], acks=request.acks)  # fmt: skip
    if request.acks == 0:
        failed = [
            (t["name"], p["index"], int(p["error_code"]))
            for t in responses
            for p in t["partition_responses"]
            if p["error_code"] != ErrorCode.NONE
        ]
        if failed:
            raise CloseConnection(f"acks=0 produce failed: {failed[:5]}")
        return None
    if not required:
        return apis.PRODUCE.response(responses=responses, throttle_time_ms=0)
    # Kafka's DelayedProduce: answered when the ISR has every write, or at the
    # request's timeout (the records stay written either way). The appends are done:
    # while this waits, the connection's next Produce is appended (the network layer
    # still answers in request order).
    replicas = ctx.services.replicas
    op = replicas.watch_replication(
        {tp: offset for tp, (offset, _) in required.items()}, request.timeout_ms
    )

    def answer() -> Any:
        for tp, error in replication_errors(op).items():
            if error is not None:
                required[tp][1]["error_code"] = error_code_for(error)
            elif timeline.armed():
                timeline.once(f"{tp.topic}-{tp.partition}", "leader_produce_acked")
        return apis.PRODUCE.response(responses=responses, throttle_time_ms=0)

    if op.completed:
        return answer()

    async def finish() -> Any:
        await op.wait()
        return answer()

    return DeferredResponse(finish)


def _has_transactional(request: Struct) -> bool:
    """Whether any partition's first batch is transactional (Kafka's
    ProduceRequest.hasTransactionalRecords reads the batch headers' flags)."""
    for topic in request.topic_data:
        for pdata in topic.partition_data:
            records = pdata.records
            if records is None or len(records) < v2.ATTRIBUTES_OFFSET + 2:
                continue
            (attributes,) = _ATTRIBUTES.unpack_from(memoryview(records), v2.ATTRIBUTES_OFFSET)
            if attributes & v2.TRANSACTIONAL_MASK and records[_MAGIC_AT] == v2.MAGIC_V2:
                return True
    return False


def _request_problem(
    ctx: RequestContext, topic: str, index: int, records: Any, version: int, acks: int
) -> ErrorCode | None:
    """Kafka's KafkaApis checks of one partition's data, before any append."""
    if version < MIN_VERSION:
        return ErrorCode.UNSUPPORTED_VERSION
    if topic in INTERNAL_TOPICS:
        # kt refuses clients' writes to internal topics before anything else, even
        # when the topic does not exist yet (Kafka: UNKNOWN_TOPIC_OR_PARTITION then).
        return ErrorCode.INVALID_TOPIC_EXCEPTION
    # As Kafka's KafkaApis: a partition the metadata does not know is refused (Produce
    # never creates topics; the producer's Metadata request does), then the request's
    # records are checked, all with a null error message.
    info = ctx.services.topics.topics.get(topic)
    if info is None or not 0 <= index < info.partitions:
        # (Not known yet, on a broker that just started: a retriable error instead.)
        return unknown_partition(ctx)
    problem = records_problem(records, version)
    if problem is not None:
        return problem
    if acks not in VALID_ACKS:
        # Kafka's ReplicaManager.appendRecords writes nothing then.
        return ErrorCode.INVALID_REQUIRED_ACKS
    return None


async def _verify_transactional(
    ctx: RequestContext,
    transactional_id: str,
    accepted: list[tuple[TopicPartition, Any, dict[str, Any]]],
    version: int,
) -> tuple[
    dict[TopicPartition, VerificationGuard], dict[TopicPartition, tuple[BrokerError, str | None]]
]:
    """KIP-890 part 1 (Kafka's ReplicaManager.appendRecords with verification on):
    the transactional batches opening a transaction on their partition are verified
    with the transaction coordinator before they are appended. Returns the guard of
    each verified partition and the error of each refused one (with the message
    Kafka sends for it, if any). Raises
    InvalidProducerIdMappingError when the batches carry several producer ids."""
    replicas = ctx.services.replicas
    guards: dict[TopicPartition, VerificationGuard] = {}
    refused: dict[TopicPartition, tuple[BrokerError, str | None]] = {}
    producers: set[int] = set()
    asker: tuple[int, int] | None = None
    for tp, records, _ in accepted:
        header = v2.parse_header(records, 0)
        if not header.is_transactional or header.producer_id < 0:
            continue
        producers.add(header.producer_id)
        try:
            guard = replicas.maybe_start_txn_verification(
                tp.topic, tp.partition, header.producer_id, header.base_sequence,
                header.producer_epoch,
            )  # fmt: skip
        except BrokerError as exc:
            refused[tp] = (exc, None)
            continue
        if guard is not None:
            guards[tp] = guard
            asker = asker or (header.producer_id, header.producer_epoch)
    if len(producers) > 1:
        raise InvalidProducerIdMappingError(
            "Transactional records contained more than one producer ID"
        )
    if asker is None:
        return guards, refused
    unverified = await ctx.services.transactions.verifier.verify(
        transactional_id, asker[0], asker[1], [(tp.topic, tp.partition) for tp in guards]
    )
    for (topic, index), code in unverified.items():
        tp = TopicPartition(topic, index)
        if guards.pop(tp, None) is not None:
            error = produce_error(code, version)
            refused[tp] = (error, error.message or None)
    return guards, refused


def _append_one(
    ctx: RequestContext,
    tp: TopicPartition,
    records: Any,
    acks: int,
    out: dict[str, Any],
    guard: VerificationGuard | None,
) -> int | None:
    """One partition's append, filling its response entry; the offset after the last
    record written (None when nothing was written)."""
    try:
        result = ctx.services.replicas.append_records(
            tp.topic, tp.partition, records, now_ms=int(time.time() * 1000), acks=acks,
            verification_guard=guard,
        )  # fmt: skip
    except (BrokerError, StorageError, OSError) as exc:
        out["error_code"] = error_code_for(exc)
        # Kafka sends a message only for refused records; the rest is a null message.
        if isinstance(exc, (InvalidRecordError, StorageError)) and exc.message:
            out["error_message"] = exc.message
        if isinstance(exc, RecordValidationError):
            out["record_errors"] = [
                {"batch_index": e.batch_index, "batch_index_error_message": e.message}
                for e in exc.record_errors
            ]
        return None
    out.update(
        error_code=ErrorCode.NONE,
        base_offset=result.first_offset,
        log_append_time_ms=result.log_append_time,
        log_start_offset=result.log_start_offset,
    )
    return result.last_offset + 1


def records_problem(records: Any, version: int) -> ErrorCode | None:
    """Kafka's ProduceRequest.validateRecords for v3+: exactly one record batch per
    partition, of magic 2, and no zstd before v7. Only complete batches count (a
    truncated tail is the log's to refuse)."""
    if records is None:
        return ErrorCode.INVALID_RECORD
    view = memoryview(records)
    end = len(view)
    pos = count = 0
    magic = codec = -1
    while end - pos >= v2.LOG_OVERHEAD:
        (length,) = _LENGTH.unpack_from(view, pos + _LENGTH_AT)
        if length < 0 or end - pos < v2.LOG_OVERHEAD + length:
            break
        if count == 0 and length >= v2.ATTRIBUTES_OFFSET + 2 - v2.LOG_OVERHEAD:
            magic = view[pos + _MAGIC_AT]
            codec = _ATTRIBUTES.unpack_from(view, pos + v2.ATTRIBUTES_OFFSET)[0] & v2.CODEC_MASK
        count += 1
        pos += v2.LOG_OVERHEAD + length
    if count == 0 or magic != v2.MAGIC_V2 or count > 1:
        return ErrorCode.INVALID_RECORD
    if version < 7 and codec == Codec.ZSTD:
        return ErrorCode.UNSUPPORTED_COMPRESSION_TYPE
    return None
