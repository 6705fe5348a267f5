"""Fetch: record batches from partition logs, with long polling.

The response's records are slices of segment files, handed to the network layer
(sendfile, or one copied write when small); nothing is decoded. A fetch waits up to
`max_wait_ms` until `min_bytes` are available and answers as soon as an append
makes them so. `max_bytes` and each partition's `partition_max_bytes` bound the
response, except that the first batch of the first partition with data is always
returned whole (so a consumer can never get stuck behind a batch larger than its
limits); a later partition whose first batch does not fit gets nothing, never part
of it. Versions below 4 are answered with UNSUPPORTED_VERSION, as Apache Kafka 4.0
does.

From v7 a fetcher may keep an incremental fetch session (KIP-227,
`kt.broker.fetch_sessions`): its requests then name only partitions that changed
and its responses carry only partitions with something new, while every partition
the session caches is still read (a follower's progress is recorded on each).
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

from kt.broker import timeline
from kt.broker.authorization import authorize, authorize_cluster
from kt.broker.errors import BrokerError, UnsupportedVersionError, error_code_for
from kt.broker.fetch_sessions import (
    FINAL_EPOCH,
    INVALID_SESSION_ID,
    FetchContext,
    FetchPartition,
)
from kt.broker.handlers import RequestContext, handles
from kt.broker.handlers.readiness import unknown_topic_id
from kt.broker.partition import Partition
from kt.broker.security.acl import AclOperation, ResourceType
from kt.protocol import ErrorCode, Struct, apis
from kt.protocol.regions import ExternalRecords
from kt.storage.errors import OffsetOutOfRangeError

MIN_VERSION = 4
READ_COMMITTED = 1


@handles(apis.FETCH.key, (0, 16))
async def fetch(ctx: RequestContext, request: Struct) -> Any:
    """Read from each requested partition (or the session's), waiting for data
    when asked to."""
    s = ctx.services
    version = ctx.version
    if version < MIN_VERSION:
        raise UnsupportedVersionError(f"Fetch v{version} is not supported (v{MIN_VERSION}+ is)")
    deadline = time.monotonic() + max(0, request.max_wait_ms) / 1000
    fctx = _session_context(ctx, request)
    if fctx.kind == "error":
        return apis.FETCH.response(
            throttle_time_ms=0, error_code=fctx.error, session_id=0, responses=[]
        )
    # Authorization verdicts, decided (and logged) once per request: READ on each
    # topic for a consumer, CLUSTER_ACTION for a follower (its partitions get
    # TOPIC_AUTHORIZATION_FAILED otherwise, as in Kafka).
    verdicts: dict[str, bool] = {}
    while True:
        results, total, parts = _read_all(ctx, request, fctx.partitions, verdicts)
        remaining = deadline - time.monotonic()
        if total >= request.min_bytes or remaining <= 0 or not parts or _answer_now(results):
            break
        # The partitions' shared futures: asyncio.wait leaves them as they are.
        arrived = {p.data_arrived() for p in parts}
        await asyncio.wait(arrived, timeout=remaining, return_when=asyncio.FIRST_COMPLETED)
        if s.node.stopping:
            break
    error, session_id, results = s.fetch_sessions.finish(fctx, results, _now_ms())
    return apis.FETCH.response(
        throttle_time_ms=0,
        error_code=error,
        session_id=session_id,
        responses=_by_topic(results, fctx.uses_topic_ids),
    )


def _now_ms() -> int:
    return int(time.time() * 1000)


def _session_context(ctx: RequestContext, request: Struct) -> FetchContext:
    """The request's partitions, resolved, and its fetch session (v7+; older
    requests are sessionless)."""
    version = ctx.version
    uses_ids = version >= 13
    requested: list[FetchPartition] = []
    for topic in request.topics:
        # By id, the name is looked up at each read (_read_all), not here as well.
        if uses_ids:
            name, topic_id, key_topic = None, topic.topic_id, topic.topic_id.bytes
        else:
            name, topic_id, key_topic = topic.topic, None, topic.topic
        for p in topic.partitions:
            requested.append(
                FetchPartition(
                    key=(key_topic, p.partition),
                    topic=name,
                    topic_id=topic_id,
                    partition=p.partition,
                    fetch_offset=p.fetch_offset,
                    partition_max_bytes=p.partition_max_bytes,
                    current_leader_epoch=p.current_leader_epoch if version >= 9 else -1,
                    last_fetched_epoch=p.last_fetched_epoch if version >= 12 else -1,
                    log_start_offset=p.log_start_offset if version >= 5 else -1,
                )
            )
    if version < 7:
        session_id, epoch, forgotten = INVALID_SESSION_ID, FINAL_EPOCH, []
    else:
        session_id, epoch = request.session_id, request.session_epoch
        forgotten = [
            (t.topic_id.bytes if uses_ids else t.topic, index)
            for t in request.forgotten_topics_data
            for index in t.partitions
        ]
    return ctx.services.fetch_sessions.new_context(
        session_id,
        epoch,
        requested,
        forgotten,
        privileged=_replica_id(request, version) >= 0,
        uses_topic_ids=uses_ids,
        now_ms=_now_ms(),
    )


def _replica_id(request: Struct, version: int) -> int:
    # A follower fetching as a replica (KIP-903 moved the id into ReplicaState).
    return int(request.replica_state.replica_id if version >= 15 else request.replica_id)


def _by_topic(
    results: list[tuple[FetchPartition, dict[str, Any]]], uses_ids: bool
) -> list[dict[str, Any]]:
    """The response's topics: each topic's partitions together, topics in the order
    they first appear."""
    topics: dict[bytes | str, dict[str, Any]] = {}
    for part, entry in results:
        topic = topics.get(part.key[0])
        if topic is None:
            label = {"topic_id": part.topic_id} if uses_ids else {"topic": part.topic}
            topic = topics[part.key[0]] = {**label, "partitions": []}
        topic["partitions"].append(entry)
    return list(topics.values())


def _answer_now(results: list[tuple[FetchPartition, dict[str, Any]]]) -> bool:
    """An error or a diverging epoch (a follower must truncate) ends the wait, as in
    Kafka's fetchMessages."""
    return any(
        entry["error_code"] != ErrorCode.NONE or "diverging_epoch" in entry for _, entry in results
    )


def _may_read(ctx: RequestContext, name: str, replica_id: int, verdicts: dict[str, bool]) -> bool:
    key = "\0follower" if replica_id >= 0 else name
    verdict = verdicts.get(key)
    if verdict is None:
        if replica_id >= 0:
            verdict = authorize_cluster(ctx, AclOperation.CLUSTER_ACTION)
        else:
            verdict = authorize(ctx, AclOperation.READ, ResourceType.TOPIC, name)
        verdicts[key] = verdict
    return verdict


def _read_all(
    ctx: RequestContext,
    request: Struct,
    partitions: list[FetchPartition],
    verdicts: dict[str, bool] | None = None,
) -> tuple[list[tuple[FetchPartition, dict[str, Any]]], int, list[Partition]]:
    s = ctx.services
    replicas = s.replicas
    version = ctx.version
    budget = request.max_bytes if version >= 3 else 2**31 - 1
    committed = version >= 4 and request.isolation_level == READ_COMMITTED
    replica_id = _replica_id(request, version)
    uses_ids = version >= 13
    total = 0
    first_data = True
    results: list[tuple[FetchPartition, dict[str, Any]]] = []
    watched: list[Partition] = []
    for p in partitions:
        entry: dict[str, Any] = {
            "partition_index": p.partition,
            "error_code": ErrorCode.NONE,
            "high_watermark": -1,
            "last_stable_offset": -1,
            "log_start_offset": -1,
            "aborted_transactions": None,
            "records": b"",
        }
        results.append((p, entry))
        name = p.topic
        if uses_ids and isinstance(p.key[0], bytes):
            # On every read: a session's cached partition outlives its topic
            # (deleted, or recreated under the same name with a new id).
            info = s.topics.by_id(p.key[0])
            name = info.name if info else None
        if name is None:
            # (Not known yet, on a broker that just started: a retriable error instead.)
            entry["error_code"] = unknown_topic_id(ctx)
            continue
        if not _may_read(ctx, name, replica_id, verdicts if verdicts is not None else {}):
            entry["error_code"] = ErrorCode.TOPIC_AUTHORIZATION_FAILED
            continue
        try:
            part = replicas.get_partition_or_error(name, p.partition)
            if version >= 9:
                replicas.check_current_leader_epoch(part, p.current_leader_epoch)
        except BrokerError as exc:
            entry["error_code"] = error_code_for(exc)
            continue
        if replica_id >= 0:
            limit = min(p.partition_max_bytes, budget)
            sent = _read_for_follower(ctx, part, replica_id, p, entry, limit, first_data)
            watched.append(part)
            if sent:
                total += sent
                budget -= sent
                first_data = False
            continue
        hw = part.high_watermark
        lso = part.last_stable_offset()
        entry.update(high_watermark=hw, last_stable_offset=lso,
                     log_start_offset=part.log_start_offset)  # fmt: skip
        if committed:
            entry["aborted_transactions"] = []
        upper = lso if committed else hw
        limit = min(p.partition_max_bytes, budget)
        if limit <= 0 and not first_data:
            watched.append(part)
            continue
        try:
            sl = replicas.read(
                part, p.fetch_offset, max(limit, 0), upper_bound=upper,
                min_one_message=first_data,
            )  # fmt: skip
        except (BrokerError, OffsetOutOfRangeError) as exc:
            entry["error_code"] = error_code_for(exc)
            continue
        watched.append(part)
        if sl is None or sl.length == 0:
            continue
        if committed:
            # The aborted transactions among these records: the consumer drops them.
            try:
                aborted = replicas.aborted_transactions(part, p.fetch_offset, upper)
            except BrokerError as exc:
                entry["error_code"] = error_code_for(exc)
                continue
            entry["aborted_transactions"] = [
                {"producer_id": t.producer_id, "first_offset": t.first_offset} for t in aborted
            ]
        entry["records"] = ExternalRecords(sl.length, (sl.segment.fd, sl.position))
        total += sl.length
        budget -= sl.length
        first_data = False
    return results, total, watched


def _read_for_follower(
    ctx: RequestContext,
    part: Partition,
    replica_id: int,
    p: FetchPartition,
    entry: dict[str, Any],
    limit: int,
    first: bool,
) -> int:
    """A follower's fetch of one partition (up to our LEO, not the HW): its progress
    is recorded (the HW may move, waiting acks=all produces complete), a diverging
    log is told where to truncate, and a caught-up follower is proposed back into
    the ISR. Returns the bytes sent."""
    replicas = ctx.services.replicas
    last_epoch = p.last_fetched_epoch
    start = p.log_start_offset
    try:
        read = part.read_for_follower(
            replica_id, p.fetch_offset, last_epoch, max(limit, 1 if first else 0), start
        )
    except (BrokerError, OffsetOutOfRangeError) as exc:
        entry["error_code"] = error_code_for(exc)
        return 0
    entry.update(high_watermark=read.high_watermark, last_stable_offset=part.last_stable_offset(),
                 log_start_offset=read.log_start_offset)  # fmt: skip
    if timeline.armed():
        timeline.once(f"{part.tp.topic}-{part.tp.partition}", "leader_follower_fetch",
                      replica=replica_id, offset=p.fetch_offset, leo=part.log_end_offset,
                      diverging=read.diverging_epoch is not None)  # fmt: skip
    if read.diverging_epoch is not None:
        epoch, end = read.diverging_epoch
        entry["diverging_epoch"] = {"epoch": epoch, "end_offset": end}
        return 0
    replicas.maybe_expand_isr(part, replica_id)
    sl = read.data
    if sl is None or sl.length == 0 or (limit <= 0 and not first):
        return 0
    throttles = ctx.services.throttles
    if throttles.leader_throttled(part.tp):
        # KIP-73: a listed replica outside the ISR gets no data while the leader's
        # replication quota is exceeded; what it does get counts against the quota.
        if throttles.should_leader_throttle(part.tp, replica_id in part.isr):
            return 0
        throttles.leader.record(int(sl.length))
    entry["records"] = ExternalRecords(sl.length, (sl.segment.fd, sl.position))
    return int(sl.length)
