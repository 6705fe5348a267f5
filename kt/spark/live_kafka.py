"""The wire side of the "kt" Spark source: kt's asyncio client driven from the
synchronous code Spark calls (discovering partitions, resolving offsets, reading
an offset range as Arrow batches, producing rows).

Every `SyncClient` owns a private event loop: Spark calls readers and writers
from plain threads of Python workers, one task at a time, so each task (or the
driver-side stream reader) runs its own loop rather than sharing one.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Coroutine, Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

import pyarrow as pa

from kt.client import (
    EARLIEST,
    LATEST,
    Codec,
    ConsumerRecord,
    KafkaClient,
    KafkaError,
    RecordSpec,
    SecurityConfig,
)
from kt.protocol.errors import ErrorCode
from kt.spark.live_options import (
    OffsetSpec,
    ReadOptions,
    Subscription,
    TopicPartition,
    WriteOptions,
)

T = TypeVar("T")

#: how long read() keeps asking for offsets that the planner saw but a fetch does not return
_EMPTY_FETCH_PATIENCE = 10.0

CODECS = {
    "none": Codec.NONE,
    "gzip": Codec.GZIP,
    "snappy": Codec.SNAPPY,
    "lz4": Codec.LZ4,
    "zstd": Codec.ZSTD,
}


class DataLossError(RuntimeError):
    """Offsets the query needs are gone (deleted by retention, truncated, topic
    deleted). Raised only with failOnDataLoss=true, as Spark's Kafka source does."""


class SyncClient:
    """A KafkaClient with its own event loop, for synchronous callers."""

    def __init__(
        self,
        bootstrap: str,
        *,
        client_id: str,
        request_timeout: float,
        security: Mapping[str, str] | None = None,
    ) -> None:
        self.loop = asyncio.new_event_loop()
        self.client = KafkaClient(
            bootstrap,
            client_id=client_id,
            request_timeout=request_timeout,
            security=SecurityConfig.from_properties(security or {}),
        )
        try:
            self.run(self.client.start())
        except BaseException:
            self.loop.close()
            raise

    def run(self, coro: Coroutine[Any, Any, T]) -> T:
        """Run `coro` on this client's loop and return its result."""
        return self.loop.run_until_complete(coro)

    def close(self) -> None:
        """Close the connections and the loop."""
        if self.loop.is_closed():
            return
        try:
            self.run(self.client.close())
        finally:
            self.loop.close()

    def __enter__(self) -> SyncClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def read_client(opts: ReadOptions | WriteOptions) -> SyncClient:
    """A SyncClient configured from the source's options."""
    return SyncClient(
        opts.bootstrap,
        client_id=opts.client_id,
        request_timeout=opts.request_timeout,
        security=opts.security,
    )


# --- planning -------------------------------------------------------------------------


def discover(sc: SyncClient, sub: Subscription) -> list[TopicPartition]:
    """The topic-partitions the subscription covers right now (fresh metadata).

    Topics named by `subscribe` that do not exist yet are left out (they are
    picked up once they appear); `assign` partitions are taken as given.
    """
    if sub.kind == "assign":
        return sorted(sub.assigned)
    if sub.kind == "subscribePattern":
        topics = sc.run(sc.client.list_topics(include_internal=False))
    else:
        got = sc.run(sc.client.fetch_topic_metadata(sub.topics))
        topics = {n: t for n, t in got.items() if t.error == ErrorCode.NONE}
    return sorted(
        (name, p) for name, info in topics.items() if sub.matches(name) for p in info.partitions
    )


def list_offsets(
    sc: SyncClient, tps: Iterable[TopicPartition], when: int
) -> dict[TopicPartition, int]:
    """Offsets of `tps` for EARLIEST, LATEST or a timestamp (NO_OFFSET -1 when none)."""
    wanted = list(tps)
    if not wanted:
        return {}
    got = sc.run(sc.client.list_offsets(wanted, when))
    return {tp: got[tp][0] for tp in wanted}


def resolve(
    sc: SyncClient,
    spec: OffsetSpec,
    tps: list[TopicPartition],
    *,
    ending: bool,
    timestamp_strategy: str = "error",
) -> dict[TopicPartition, int]:
    """Concrete offsets of `tps` for a starting or ending position.

    A timestamp maps to the first offset whose timestamp is at or after it; when
    no record is that recent an ending position is the latest offset and a
    starting one is an error (or latest with timestampStrategy "latest").
    """
    cache: dict[int, dict[TopicPartition, int]] = {}

    def sentinel(which: int) -> dict[TopicPartition, int]:
        if which not in cache:
            cache[which] = list_offsets(sc, tps, which)
        return cache[which]

    if spec.kind in ("earliest", "latest"):
        return sentinel(EARLIEST if spec.kind == "earliest" else LATEST)
    default = EARLIEST if spec.default == "earliest" else LATEST
    out: dict[TopicPartition, int] = {}
    if spec.kind == "offsets":
        for tp in tps:
            want = spec.per_partition.get(tp, default)
            out[tp] = sentinel(want)[tp] if want in (EARLIEST, LATEST) else want
        return out
    by_time: dict[int, list[TopicPartition]] = {}
    for tp in tps:
        if spec.kind == "timestamp":
            by_time.setdefault(spec.timestamp, []).append(tp)
        elif tp in spec.per_partition:
            by_time.setdefault(spec.per_partition[tp], []).append(tp)
        else:
            out[tp] = sentinel(default)[tp]
    for ts, group in by_time.items():
        for tp, off in list_offsets(sc, group, ts).items():
            if off >= 0:
                out[tp] = off
            elif ending or timestamp_strategy == "latest":
                out[tp] = sentinel(LATEST)[tp]
            else:
                raise ValueError(
                    f"no record of {tp[0]}-{tp[1]} has a timestamp at or after {ts}: "
                    "set startingOffsetsByTimestampStrategy=latest to start at the end"
                )
    return out


# --- reading --------------------------------------------------------------------------


@dataclass
class RangeRead:
    """One Spark partition's work: offsets [start, end) of a topic-partition."""

    topic: str
    partition: int
    start: int
    end: int


def read_range(
    opts: ReadOptions, rng: RangeRead, arrow_schema: pa.Schema
) -> Iterator[pa.RecordBatch]:
    """Fetch offsets [start, end) of one partition and yield them as Arrow batches
    with `arrow_schema` (Spark's Kafka columns, headers last when included).

    Gaps (compaction, transaction markers) are skipped. Offsets below the log
    start, or a log that ends before `end`, are data loss: an error with
    failOnDataLoss, else the readable part is returned.
    """
    if rng.start >= rng.end:
        return
    tp = (rng.topic, rng.partition)
    with read_client(opts) as sc:
        pos = rng.start
        waited_since: float | None = None
        while pos < rng.end:
            res = sc.run(
                sc.client.fetch(
                    {tp: pos},
                    max_wait_ms=200,
                    max_bytes=opts.fetch_max_bytes,
                    partition_max_bytes=opts.fetch_max_bytes,
                )
            )[tp]
            if res.error == ErrorCode.OFFSET_OUT_OF_RANGE:
                lo = list_offsets(sc, [tp], EARLIEST)[tp]
                hi = list_offsets(sc, [tp], LATEST)[tp]
                if pos < lo:
                    _data_loss(
                        opts,
                        f"offsets {pos}..{min(lo, rng.end) - 1} of {tp[0]}-{tp[1]} "
                        f"are gone (the log now starts at {lo})",
                    )
                    pos = lo
                    continue
                _data_loss(opts, f"{tp[0]}-{tp[1]} ends at {hi}, before the planned end {rng.end}")
                return
            if res.error != ErrorCode.NONE:
                if res.error.retriable:
                    time.sleep(0.1)
                    continue
                if res.error in (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.UNKNOWN_TOPIC_ID):
                    _data_loss(opts, f"{tp[0]}-{tp[1]} no longer exists")
                    return
                raise KafkaError(res.error, f"fetch {tp[0]}-{tp[1]} at {pos}")
            records = [r for r in res.records if pos <= r.offset < rng.end]
            if records:
                yield records_to_batch(records, arrow_schema)
            if res.next_offset > pos:
                pos = res.next_offset
                waited_since = None
                continue
            # Nothing at `pos`: normal only while the log has not reached it yet.
            if res.high_watermark >= 0 and res.high_watermark <= pos:
                now = time.monotonic()
                waited_since = waited_since or now
                if now - waited_since > _EMPTY_FETCH_PATIENCE:
                    _data_loss(
                        opts,
                        f"{tp[0]}-{tp[1]} ends at {res.high_watermark}, before the planned end "
                        f"{rng.end}",
                    )
                    return
            else:
                raise KafkaError(
                    ErrorCode.UNKNOWN_SERVER_ERROR,
                    f"fetch {tp[0]}-{tp[1]} at {pos}",
                    f"the broker returned nothing at offset {pos} below its high watermark "
                    f"{res.high_watermark} (raise kafka.max.partition.fetch.bytes?)",
                )


def _data_loss(opts: ReadOptions, what: str) -> None:
    if opts.fail_on_data_loss:
        raise DataLossError(
            f"{what}. Some data may have been lost; set failOnDataLoss=false to skip it"
        )


def records_to_batch(records: list[ConsumerRecord], schema: pa.Schema) -> pa.RecordBatch:
    """Spark's Kafka columns for `records` as one Arrow batch of `schema`."""
    types = schema.types
    cols: list[Any] = [
        pa.array([r.key for r in records], types[0]),
        pa.array([r.value for r in records], types[1]),
        pa.array([r.topic for r in records], types[2]),
        pa.array([r.partition for r in records], types[3]),
        pa.array([r.offset for r in records], types[4]),
        pa.array([r.timestamp * 1000 for r in records], types[5]),
        pa.array([r.timestamp_type for r in records], types[6]),
    ]
    if len(types) > 7:
        cols.append(
            pa.array([[{"key": k, "value": v} for k, v in r.headers] for r in records], types[7])
        )
    return pa.RecordBatch.from_arrays(cols, schema=schema)


# --- writing --------------------------------------------------------------------------


@dataclass
class WriteStats:
    """What one write task produced."""

    records: int = 0
    partitions: int = 0


class Producer:
    """Buffers rows per topic-partition and produces them with acks=all.

    Keyed records without a partition go where the Java producer's default
    partitioner sends them (murmur2 of the key); unkeyed ones stick to one
    partition per flush round and move on round-robin, like the sticky
    partitioner. `flush` waits for every acknowledgement.
    """

    def __init__(self, sc: SyncClient, opts: WriteOptions) -> None:
        self.sc = sc
        self.opts = opts
        self.codec = CODECS[opts.codec]
        self.buffers: dict[TopicPartition, list[RecordSpec]] = {}
        self.buffered_bytes = 0
        self.buffered_records = 0
        self.partition_counts: dict[str, int] = {}
        self.sticky: dict[str, int] = {}
        self.stats = WriteStats()
        self.touched: set[TopicPartition] = set()

    def _count(self, topic: str) -> int:
        n = self.partition_counts.get(topic)
        if n is None:
            info = self.sc.run(self.sc.client.topic(topic, auto_create=True))
            n = self.partition_counts[topic] = len(info.partitions)
        return n

    def add(
        self,
        topic: str,
        partition: int | None,
        key: bytes | None,
        value: bytes | None,
        headers: list[tuple[str, bytes | None]],
    ) -> None:
        """Buffer one record; flushes when the buffers are full."""
        if partition is None:
            from kt.client.partitioner import partition_for_key

            count = self._count(topic)
            if key is not None:
                partition = partition_for_key(key, count)
            else:
                partition = self.sticky.setdefault(topic, random.randrange(count))
        self.buffers.setdefault((topic, partition), []).append(RecordSpec(key, value, headers))
        self.buffered_records += 1
        self.buffered_bytes += _record_size(self.buffers[(topic, partition)][-1])
        if (
            self.buffered_records >= self.opts.batch_records * 4
            or self.buffered_bytes >= self.opts.batch_bytes * 4
        ):
            self.flush()

    def flush(self) -> None:
        """Produce everything buffered, one request per partition chunk, all
        partitions concurrently; return when every batch is acknowledged."""
        if not self.buffers:
            return
        buffers, self.buffers = self.buffers, {}
        self.buffered_records = self.buffered_bytes = 0
        client = self.sc.client
        opts = self.opts

        async def one_partition(tp: TopicPartition, specs: list[RecordSpec]) -> None:
            # Chunks of one partition go in order, one at a time, to keep the order.
            chunk: list[RecordSpec] = []
            size = 0
            for spec in specs:
                n = _record_size(spec)
                if chunk and (len(chunk) >= opts.batch_records or size + n > opts.batch_bytes):
                    await client.produce(tp[0], tp[1], chunk, acks=-1, codec=self.codec)
                    chunk, size = [], 0
                chunk.append(spec)
                size += n
            if chunk:
                await client.produce(tp[0], tp[1], chunk, acks=-1, codec=self.codec)

        async def all_partitions() -> None:
            await asyncio.gather(*(one_partition(tp, s) for tp, s in buffers.items()))

        self.sc.run(all_partitions())
        for tp, specs in buffers.items():
            self.stats.records += len(specs)
            self.touched.add(tp)
        self.stats.partitions = len(self.touched)
        # The sticky partition of unkeyed records moves on after each round.
        for topic, p in list(self.sticky.items()):
            self.sticky[topic] = (p + 1) % self._count(topic)


def _record_size(spec: RecordSpec) -> int:
    """About what `spec` takes in a batch (varints and attributes counted high)."""
    size = 24 + len(spec.key or b"") + len(spec.value or b"")
    return size + sum(8 + len(k) + len(v or b"") for k, v in spec.headers)


def as_bytes(value: Any, column: str) -> bytes | None:
    """A key/value/header value as bytes: binary as is, strings as UTF-8."""
    if value is None or isinstance(value, bytes):
        return value
    if isinstance(value, str):
        return value.encode()
    if isinstance(value, (bytearray, memoryview)):
        return bytes(value)
    raise TypeError(f"column {column!r} must be binary or string, got {type(value).__name__}")


def headers_of(value: Any) -> list[tuple[str, bytes | None]]:
    """A headers cell (array<struct<key string, value binary>>) as kt header pairs."""
    if not value:
        return []
    out: list[tuple[str, bytes | None]] = []
    for h in value:
        if isinstance(h, Mapping):
            k, v = h.get("key"), h.get("value")
        else:
            k, v = h[0], h[1]
        if k is None:
            raise ValueError("a header key is null")
        out.append((str(k), as_bytes(v, "headers.value")))
    return out
