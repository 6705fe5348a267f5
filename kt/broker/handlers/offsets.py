"""Offset APIs: OffsetCommit, TxnOffsetCommit, OffsetFetch and OffsetDelete, served
by the group coordinator.

Partitions of unknown topics are refused per partition (UNKNOWN_TOPIC_OR_PARTITION)
and metadata over `offset.metadata.max.bytes` with OFFSET_METADATA_TOO_LARGE; the
rest of a commit is written in one batch, all or nothing, and answered once it is
replicated (the request waits; the connection's later requests wait behind it).
A TxnOffsetCommit's offsets take effect when its transaction commits; until then
an OffsetFetch asking for stable offsets gets UNSTABLE_OFFSET_COMMIT for them.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from kt.broker.authorization import authorize, require
from kt.broker.groups.group import OffsetEntry, now_ms
from kt.broker.handlers import RequestContext, handles
from kt.broker.handlers.groups import coordinator
from kt.broker.security.acl import AclOperation, ResourceType
from kt.protocol import ErrorCode, Struct, apis

NO_METADATA = ""


Partition = tuple[str, int]


def _offsets_to_write(
    ctx: RequestContext,
    topics: Any,
    errors: dict[Partition, ErrorCode],
    *,
    with_leader_epoch: bool,
    expire_timestamp: Callable[[Any, int], int],
) -> tuple[dict[Partition, OffsetEntry], list[tuple[str, list[Partition]]]]:
    """The partitions of an OffsetCommit / TxnOffsetCommit worth writing (their
    refusals go to `errors`: unknown partition, metadata too large) and the
    request's order of topics and partitions. `expire_timestamp(partition, now)`
    gives an entry's explicit expiry (-1: none)."""
    coord = coordinator(ctx)
    now = now_ms()
    max_meta = coord.settings.offset_metadata_max_bytes
    valid: dict[Partition, OffsetEntry] = {}
    order: list[tuple[str, list[Partition]]] = []
    readable: dict[str, bool] = {}
    for topic in topics:
        tps = []
        if topic.name not in readable:
            # READ on each topic (after READ on the group, checked by the caller)
            readable[topic.name] = authorize(ctx, AclOperation.READ, ResourceType.TOPIC,
                                             topic.name)  # fmt: skip
        for p in topic.partitions:
            tp = (topic.name, p.partition_index)
            tps.append(tp)
            metadata = p.committed_metadata if p.committed_metadata is not None else NO_METADATA
            if not readable[topic.name]:
                errors[tp] = ErrorCode.TOPIC_AUTHORIZATION_FAILED
            elif coord.partition_exists is not None and not coord.partition_exists(*tp):
                errors[tp] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            elif len(metadata.encode("utf-8")) > max_meta:
                errors[tp] = ErrorCode.OFFSET_METADATA_TOO_LARGE
            else:
                valid[tp] = OffsetEntry(
                    offset=p.committed_offset,
                    leader_epoch=p.committed_leader_epoch if with_leader_epoch else -1,
                    metadata=metadata,
                    commit_timestamp=now,
                    expire_timestamp=expire_timestamp(p, now),
                )
        order.append((topic.name, tps))
    return valid, order


def _partition_errors(
    order: list[tuple[str, list[Partition]]], errors: dict[Partition, ErrorCode]
) -> list[dict[str, Any]]:
    """The per-partition answer of a commit, in the request's order."""
    return [
        {
            "name": name,
            "partitions": [{"partition_index": p, "error_code": errors[(name, p)]} for _, p in tps],
        }
        for name, tps in order
    ]


@handles(apis.OFFSET_COMMIT.key, (0, 8))
async def offset_commit(ctx: RequestContext, request: Struct) -> Any:
    """Commit offsets for a group member (or a group without members, generation -1)."""
    version = ctx.version
    require(ctx, AclOperation.READ, ResourceType.GROUP, request.group_id,
            ErrorCode.GROUP_AUTHORIZATION_FAILED)  # fmt: skip
    coord = coordinator(ctx)
    retention = request.retention_time_ms if 2 <= version <= 4 else -1

    def expire(p: Any, now: int) -> int:
        if retention >= 0:
            return now + retention
        if version == 1 and p.commit_timestamp != -1:
            # v1 clients chose the commit time; retention counts from it.
            return int(p.commit_timestamp) + coord.settings.offsets_retention_ms
        return -1

    errors: dict[Partition, ErrorCode] = {}
    valid, order = _offsets_to_write(
        ctx, request.topics, errors, with_leader_epoch=version >= 6, expire_timestamp=expire
    )
    group_error = coord.check_group(request.group_id)
    if group_error == ErrorCode.NONE:
        group_error = await coord.commit_offsets(
            request.group_id,
            request.generation_id_or_member_epoch if version >= 1 else -1,
            (request.member_id or "") if version >= 1 else "",
            request.group_instance_id if version >= 7 else None,
            valid,
        )
    for tp in valid:
        errors[tp] = group_error
    if group_error == ErrorCode.INVALID_GROUP_ID:
        errors = dict.fromkeys(errors, group_error)
    return apis.OFFSET_COMMIT.response(throttle_time_ms=0, topics=_partition_errors(order, errors))


@handles(apis.TXN_OFFSET_COMMIT.key, (0, 3))
async def txn_offset_commit(ctx: RequestContext, request: Struct) -> Any:
    """Offsets committed as part of a producer's transaction (send_offsets_to_transaction)."""
    version = ctx.version
    require(ctx, AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, request.transactional_id,
            ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)  # fmt: skip
    require(ctx, AclOperation.READ, ResourceType.GROUP, request.group_id,
            ErrorCode.GROUP_AUTHORIZATION_FAILED)  # fmt: skip
    coord = coordinator(ctx)
    errors: dict[Partition, ErrorCode] = {}
    valid, order = _offsets_to_write(
        ctx, request.topics, errors, with_leader_epoch=version >= 2, expire_timestamp=_no_expiry
    )
    group_error = coord.check_group(request.group_id)
    if group_error == ErrorCode.NONE:
        group_error = await coord.commit_txn_offsets(
            request.group_id,
            (request.producer_id, request.producer_epoch),
            request.generation_id if version >= 3 else -1,
            (request.member_id or "") if version >= 3 else "",
            request.group_instance_id if version >= 3 else None,
            valid,
        )
    for tp in valid:
        errors[tp] = group_error
    return apis.TXN_OFFSET_COMMIT.response(
        throttle_time_ms=0, topics=_partition_errors(order, errors)
    )


def _no_expiry(_partition: Any, _now: int) -> int:
    return -1


def _fetch_group(
    ctx: RequestContext, group_id: str, topics: Any, require_stable: bool
) -> tuple[ErrorCode, list[dict[str, Any]]]:
    """(group error, topics) of one group's OffsetFetch answer: DESCRIBE on the group,
    then on each topic (asked-for topics are refused, an all-topics answer drops
    the ones not described)."""
    coord = coordinator(ctx)
    if not authorize(ctx, AclOperation.DESCRIBE, ResourceType.GROUP, group_id):
        return ErrorCode.GROUP_AUTHORIZATION_FAILED, []
    wanted = None
    if topics is not None:
        wanted = [(t.name, p) for t in topics for p in t.partition_indexes]
    error, found = coord.fetch_offsets(group_id, wanted)
    unstable: set[tuple[str, int]] = set()
    if require_stable and error == ErrorCode.NONE:
        unstable = coord.unstable_partitions(group_id, [(t, p) for t, p, _ in found])
    by_topic: dict[str, list[dict[str, Any]]] = {}
    if error != ErrorCode.NONE:
        if wanted is None or ctx.version >= 2:
            return error, []
        # v0-1 have no group-level error: each partition carries it.
        found = [(t, p, None) for t, p in wanted]
    described: dict[str, bool] = {}
    for topic, partition, entry in found:
        if topic not in described:
            described[topic] = authorize(ctx, AclOperation.DESCRIBE, ResourceType.TOPIC, topic,
                                         log_if_denied=wanted is not None)  # fmt: skip
        if not described[topic]:
            if wanted is not None:
                by_topic.setdefault(topic, []).append(
                    {"partition_index": partition, "committed_offset": -1,
                     "committed_leader_epoch": -1, "metadata": NO_METADATA,
                     "error_code": ErrorCode.TOPIC_AUTHORIZATION_FAILED}
                )  # fmt: skip
            continue
        if (topic, partition) in unstable:
            # Kafka answers no offset, and the error, for a partition still in flight.
            by_topic.setdefault(topic, []).append(
                {"partition_index": partition, "committed_offset": -1,
                 "committed_leader_epoch": -1, "metadata": NO_METADATA,
                 "error_code": ErrorCode.UNSTABLE_OFFSET_COMMIT}
            )  # fmt: skip
            continue
        by_topic.setdefault(topic, []).append(
            {
                "partition_index": partition,
                "committed_offset": entry.offset if entry else -1,
                "committed_leader_epoch": entry.leader_epoch if entry else -1,
                "metadata": entry.metadata if entry else NO_METADATA,
                "error_code": error,
            }
        )
    return error, [{"name": t, "partitions": ps} for t, ps in by_topic.items()]


@handles(apis.OFFSET_FETCH.key, (0, 8))
async def offset_fetch(ctx: RequestContext, request: Struct) -> Any:
    """Committed offsets of a group (v8: of several); null topics ask for all."""
    require_stable = ctx.version >= 7 and request.require_stable
    if ctx.version >= 8:
        groups = []
        for g in request.groups:
            error, topics = _fetch_group(ctx, g.group_id, g.topics, require_stable)
            groups.append({"group_id": g.group_id, "topics": topics, "error_code": error})
        return apis.OFFSET_FETCH.response(throttle_time_ms=0, groups=groups)
    topics_req = request.topics
    if ctx.version < 2 and topics_req is None:
        topics_req = []
    error, topics = _fetch_group(ctx, request.group_id, topics_req, require_stable)
    return apis.OFFSET_FETCH.response(throttle_time_ms=0, topics=topics, error_code=error)


@handles(apis.OFFSET_DELETE.key, (0, 0))
async def offset_delete(ctx: RequestContext, request: Struct) -> Any:
    """Delete a group's offsets of partitions none of its active members consumes."""
    require(ctx, AclOperation.DELETE, ResourceType.GROUP, request.group_id,
            ErrorCode.GROUP_AUTHORIZATION_FAILED)  # fmt: skip
    coord = coordinator(ctx)
    errors: dict[tuple[str, int], ErrorCode] = {}
    wanted: list[tuple[str, int]] = []
    for topic in request.topics:
        readable = authorize(ctx, AclOperation.READ, ResourceType.TOPIC, topic.name)
        for p in topic.partitions:
            tp = (topic.name, p.partition_index)
            if not readable:
                errors[tp] = ErrorCode.TOPIC_AUTHORIZATION_FAILED
            elif coord.partition_exists is not None and not coord.partition_exists(*tp):
                errors[tp] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            else:
                wanted.append(tp)
    top, results = coord.delete_offsets(request.group_id, wanted)
    if top != ErrorCode.NONE:
        return apis.OFFSET_DELETE.response(error_code=top, throttle_time_ms=0, topics=[])
    errors.update(results)
    return apis.OFFSET_DELETE.response(
        error_code=ErrorCode.NONE,
        throttle_time_ms=0,
        topics=[
            {
                "name": topic.name,
                "partitions": [
                    {"partition_index": p.partition_index,
                     "error_code": errors[(topic.name, p.partition_index)]}
                    for p in topic.partitions
                ],
            }
            for topic in request.topics
        ],
    )  # fmt: skip
