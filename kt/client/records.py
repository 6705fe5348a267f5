"""Client helpers for records: produce batches, fetch and decode them, list offsets.

Batches are built and decoded with the storage core's record codec
(`kt.storage.record_batch`), the one implementation of the v2 format in kt;
legacy (magic 0/1) message sets in fetch responses are decoded with
`kt.storage.legacy`.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from kt.client.core import ClientCore, KafkaError, gather_or_cancel
from kt.protocol import apis
from kt.protocol.errors import ErrorCode, error_for_code
from kt.storage import legacy
from kt.storage.compression import Codec
from kt.storage.errors import StorageError
from kt.storage.record_batch import (
    CONTROL_MASK,
    HEADER_SIZE,
    LOG_APPEND_TIME,
    LOG_OVERHEAD,
    MAGIC_V2,
    TIMESTAMP_TYPE_MASK,
    RecordSpec,
    build_batch,
    iter_record_tuples,
    parse_header,
)

#: ListOffsets timestamps with special meaning
LATEST = -1
EARLIEST = -2
#: the offset a timestamp lookup returns when no record is that recent
NO_OFFSET = -1

TopicPartition = tuple[str, int]

__all__ = [
    "EARLIEST",
    "LATEST",
    "Codec",
    "ConsumerRecord",
    "FetchResult",
    "ProduceResult",
    "RecordSpec",
    "RecordsMixin",
    "TopicPartition",
    "decode_records",
]


@dataclass(slots=True)
class ConsumerRecord:
    """One record read from a partition."""

    topic: str
    partition: int
    offset: int
    timestamp: int
    #: 0 CreateTime, 1 LogAppendTime, -1 none (magic 0)
    timestamp_type: int
    key: bytes | None
    value: bytes | None
    headers: list[tuple[str, bytes | None]] = field(default_factory=list)
    leader_epoch: int = -1


@dataclass
class FetchResult:
    """What a Fetch returned for one partition."""

    topic: str
    partition: int
    error: ErrorCode
    high_watermark: int
    log_start_offset: int
    last_stable_offset: int
    records: list[ConsumerRecord]
    #: where to fetch next: after the last batch returned (control batches included)
    next_offset: int


@dataclass
class ProduceResult:
    """Where a produced batch landed."""

    topic: str
    partition: int
    base_offset: int
    log_append_time: int = -1


def decode_records(
    topic: str, partition: int, data: bytes | bytearray | memoryview | None, fetch_offset: int
) -> tuple[list[ConsumerRecord], int]:
    """Decode a fetch response's records bytes; returns (records, next fetch offset).

    Records before `fetch_offset` (a compressed batch is returned whole) and
    control records are skipped; a truncated last batch (the broker cuts at the
    size limit) is ignored. Raises StorageError on a corrupt batch.
    """
    out: list[ConsumerRecord] = []
    next_offset = fetch_offset
    if not data:
        return out, next_offset
    buf = memoryview(data)
    pos, end = 0, len(buf)
    while end - pos >= LOG_OVERHEAD + 5:
        size = int.from_bytes(buf[pos + 8 : pos + 12], "big", signed=True)
        whole = LOG_OVERHEAD + size
        if size <= 0 or end - pos < whole:
            break
        magic = buf[pos + 16]
        if magic == MAGIC_V2:
            if whole < HEADER_SIZE:
                raise StorageError(f"record batch at {pos} is shorter than its header")
            header = parse_header(buf, pos)
            batch = buf[pos : pos + whole]
            if not header.attributes & CONTROL_MASK:
                ts_type = 1 if header.attributes & TIMESTAMP_TYPE_MASK else 0
                for offset, ts, key, value, headers, _seq in iter_record_tuples(header, batch):
                    if offset < fetch_offset:
                        continue
                    if ts_type == LOG_APPEND_TIME:
                        ts = header.max_timestamp
                    out.append(
                        ConsumerRecord(
                            topic,
                            partition,
                            offset,
                            ts,
                            ts_type,
                            key,
                            value,
                            list(headers),
                            header.partition_leader_epoch,
                        )
                    )
            next_offset = max(next_offset, header.next_offset)
        else:
            msg = legacy.parse_message(buf, pos)
            for inner in legacy.iter_inner(msg):
                if inner.offset < fetch_offset:
                    continue
                ts_type = -1 if inner.magic == 0 else inner.timestamp_type
                out.append(
                    ConsumerRecord(
                        topic,
                        partition,
                        inner.offset,
                        inner.timestamp,
                        ts_type,
                        inner.key,
                        inner.value,
                    )
                )
                next_offset = max(next_offset, inner.offset + 1)
        pos += whole
    return out, next_offset


class RecordsMixin(ClientCore):
    """Produce, Fetch and ListOffsets, routed to partition leaders."""

    async def produce(
        self,
        topic: str,
        partition: int,
        records: Sequence[RecordSpec],
        *,
        acks: int = -1,
        codec: Codec | int = Codec.NONE,
        timeout_ms: int = 30000,
        timestamp: int | None = None,
        auto_create: bool = True,
    ) -> ProduceResult:
        """Write `records` as one batch to `topic`-`partition`'s leader.

        Records without a timestamp get `timestamp` (default: now). With acks=0
        the broker does not answer and the result's base_offset is -1. Retries
        retriable errors (NOT_LEADER after a metadata refresh...): without an
        idempotent producer a retried batch may be written twice, as with any
        non-idempotent Kafka producer. With `auto_create` an unknown topic is
        created when the broker auto-creates topics; otherwise KafkaError
        UNKNOWN_TOPIC_OR_PARTITION is raised at once.
        """
        await self.topic(topic, auto_create=auto_create)
        now = int(time.time() * 1000) if timestamp is None else timestamp
        batch = build_batch(records, codec=codec, base_timestamp=now)
        body = apis.PRODUCE.request(
            transactional_id=None,
            acks=acks,
            timeout_ms=timeout_ms,
            topic_data=[
                {"name": topic, "partition_data": [{"index": partition, "records": batch}]}
            ],
        )

        async def attempt() -> ProduceResult:
            node = await self.leader_for(topic, partition)
            conn = await self.connection(node)
            if acks == 0:
                await conn.send_only(apis.PRODUCE, body)
                return ProduceResult(topic, partition, -1)
            resp = await conn.request(apis.PRODUCE, body)
            for t in resp.responses:
                for p in t.partition_responses:
                    ctx = f"produce to {topic}-{partition}"
                    if p.error_code:
                        raise KafkaError(p.error_code, ctx, getattr(p, "error_message", None))
                    return ProduceResult(topic, partition, p.base_offset, p.log_append_time_ms)
            raise KafkaError(ErrorCode.UNKNOWN_SERVER_ERROR, f"produce to {topic}-{partition}")

        return await self.retrying(attempt)

    async def fetch(
        self,
        offsets: dict[TopicPartition, int],
        *,
        max_wait_ms: int = 500,
        min_bytes: int = 1,
        max_bytes: int = 50 * 1024 * 1024,
        partition_max_bytes: int = 1024 * 1024,
        isolation_level: int = 0,
    ) -> dict[TopicPartition, FetchResult]:
        """Fetch from each partition at its offset, one request per leader (sent
        concurrently). Partition-level errors are returned, not raised, except that
        leadership errors refresh the metadata for the next call."""
        by_leader: dict[int, list[TopicPartition]] = {}
        results: dict[TopicPartition, FetchResult] = {}
        for tp in offsets:
            try:
                node = await self.leader_for(*tp)
            except KafkaError as exc:
                results[tp] = FetchResult(tp[0], tp[1], exc.code, -1, -1, -1, [], offsets[tp])
                continue
            by_leader.setdefault(node, []).append(tp)

        async def one(node: int, tps: list[TopicPartition]) -> None:
            topics: dict[str, list[int]] = {}
            for t, p in tps:
                topics.setdefault(t, []).append(p)
            body = apis.FETCH.request(
                replica_id=-1,
                max_wait_ms=max_wait_ms,
                min_bytes=min_bytes,
                max_bytes=max_bytes,
                isolation_level=isolation_level,
                session_id=0,
                session_epoch=-1,
                topics=[
                    {
                        "topic": t,
                        "topic_id": self.metadata.topics[t].topic_id,
                        "partitions": [
                            {
                                "partition": p,
                                "fetch_offset": offsets[(t, p)],
                                "partition_max_bytes": partition_max_bytes,
                            }
                            for p in ps
                        ],
                    }
                    for t, ps in topics.items()
                ],
            )
            timeout = self.request_timeout + max_wait_ms / 1000
            resp = await self.send(apis.FETCH, body, node, timeout=timeout)
            check_top = getattr(resp, "error_code", 0)
            if check_top:
                raise KafkaError(check_top, "fetch")
            for rt in resp.responses:
                name = rt.topic if rt.topic else self.topic_name(rt.topic_id)
                if name is None:
                    continue
                for rp in rt.partitions:
                    tp = (name, rp.partition_index)
                    if tp not in offsets:
                        continue
                    err = error_for_code(rp.error_code)
                    recs: list[ConsumerRecord] = []
                    nxt = offsets[tp]
                    if err == ErrorCode.NONE:
                        recs, nxt = decode_records(name, rp.partition_index, rp.records, nxt)
                    results[tp] = FetchResult(
                        name,
                        rp.partition_index,
                        err,
                        rp.high_watermark,
                        rp.log_start_offset,
                        rp.last_stable_offset,
                        recs,
                        nxt,
                    )

        await gather_or_cancel(*(one(n, tps) for n, tps in by_leader.items()))
        if any(_is_leadership_error(r.error) for r in results.values()):
            await self.refresh_metadata({t for t, _ in offsets})
        return results

    async def list_offsets(
        self, partitions: Iterable[TopicPartition], timestamp: int = LATEST
    ) -> dict[TopicPartition, tuple[int, int]]:
        """(offset, timestamp) per partition for `timestamp`: LATEST (the log end
        offset), EARLIEST (the log start offset) or a time in ms (the first offset
        whose timestamp is at or after it; NO_OFFSET (-1) when there is none).
        Raises KafkaError for a partition error after retries."""
        wanted = list(dict.fromkeys(partitions))

        async def attempt() -> dict[TopicPartition, tuple[int, int]]:
            by_leader: dict[int, list[TopicPartition]] = {}
            for tp in wanted:
                by_leader.setdefault(await self.leader_for(*tp), []).append(tp)
            out: dict[TopicPartition, tuple[int, int]] = {}

            async def one(node: int, tps: list[TopicPartition]) -> None:
                topics: dict[str, list[int]] = {}
                for t, p in tps:
                    topics.setdefault(t, []).append(p)
                body = apis.LIST_OFFSETS.request(
                    replica_id=-1,
                    isolation_level=0,
                    timeout_ms=int(self.request_timeout * 1000),
                    topics=[
                        {
                            "name": t,
                            "partitions": [
                                {"partition_index": p, "timestamp": timestamp} for p in ps
                            ],
                        }
                        for t, ps in topics.items()
                    ],
                )
                resp = await self.send(apis.LIST_OFFSETS, body, node)
                for rt in resp.topics:
                    for rp in rt.partitions:
                        if rp.error_code:
                            raise KafkaError(
                                rp.error_code, f"list offsets of {rt.name}-{rp.partition_index}"
                            )
                        off = rp.offset
                        if rp.old_style_offsets and off == -1:
                            off = rp.old_style_offsets[0]
                        out[(rt.name, rp.partition_index)] = (off, rp.timestamp)

            await gather_or_cancel(*(one(n, tps) for n, tps in by_leader.items()))
            return out

        return await self.retrying(attempt)

    async def offsets_for_topic(self, topic: str, timestamp: int = LATEST) -> dict[int, int]:
        """partition -> offset for every partition of `topic` (see list_offsets)."""
        parts = await self.partitions_for(topic)
        got = await self.list_offsets([(topic, p) for p in parts], timestamp)
        return {p: got[(topic, p)][0] for p in parts}


def _is_leadership_error(err: ErrorCode) -> bool:
    return err in (
        ErrorCode.NOT_LEADER_OR_FOLLOWER,
        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
        ErrorCode.LEADER_NOT_AVAILABLE,
        ErrorCode.FENCED_LEADER_EPOCH,
        ErrorCode.UNKNOWN_TOPIC_ID,
    )
