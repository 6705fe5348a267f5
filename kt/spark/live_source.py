"""The "kt" data source: live Kafka topics over the wire protocol, with the columns
and options of Spark's built-in Kafka source, so a job ports by changing the
format name::

    df = (spark.read.format("kt")
          .option("kafka.bootstrap.servers", "localhost:9092")
          .option("subscribe", "orders")
          .load())

Reading (batch and streaming) yields key, value (binary), topic, partition,
offset, timestamp, timestampType, and headers with includeHeaders=true.
Writing takes value (required), key, headers, partition and topic (a column,
or the "topic" option, which wins) and produces with acks=all.

Delivery: the streaming reader's offsets are Spark's offset JSON
({"topic": {"0": 23}}), checkpointed by Spark, so a query with an idempotent
or transactional sink (the file sinks) is exactly-once end to end. The writers
are at-least-once, like Spark's Kafka sink: a produced batch is visible at once,
so a task that fails after producing and is retried, or a micro-batch replayed
after a crash, writes its records again; commit() and abort() have nothing to
publish or undo.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    DataSourceStreamReader,
    DataSourceStreamWriter,
    DataSourceWriter,
    InputPartition,
    WriterCommitMessage,
)
from pyspark.sql.pandas.types import to_arrow_schema
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxRows,
    SupportsTriggerAvailableNow,
)
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    DataType,
    IntegerType,
    LongType,
    ShortType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from kt.client import EARLIEST, LATEST
from kt.spark.live_kafka import (
    DataLossError,
    Producer,
    RangeRead,
    SyncClient,
    as_bytes,
    discover,
    headers_of,
    list_offsets,
    read_client,
    read_range,
    resolve,
)
from kt.spark.live_options import (
    OptionError,
    ReadOptions,
    TopicPartition,
    WriteOptions,
    offsets_from_json,
    offsets_json,
    parse_read_options,
    parse_write_options,
    rate_limit,
    split_ranges,
)

HEADERS_TYPE = ArrayType(
    StructType([StructField("key", StringType()), StructField("value", BinaryType())])
)


def kafka_schema(include_headers: bool) -> StructType:
    """The columns of Spark's Kafka source (headers only with includeHeaders)."""
    fields = [
        StructField("key", BinaryType()),
        StructField("value", BinaryType()),
        StructField("topic", StringType()),
        StructField("partition", IntegerType()),
        StructField("offset", LongType()),
        StructField("timestamp", TimestampType()),
        StructField("timestampType", IntegerType()),
    ]
    if include_headers:
        fields.append(StructField("headers", HEADERS_TYPE))
    return StructType(fields)


class KafkaRange(InputPartition):
    """One Spark partition: offsets [start, end) of one topic-partition."""

    def __init__(self, topic: str, partition: int, start: int, end: int) -> None:
        super().__init__((topic, partition, start, end))
        self.topic = topic
        self.partition = partition
        self.start = start
        self.end = end


def _ranges(opts: ReadOptions, spans: Sequence[tuple[str, int, int, int]]) -> list[InputPartition]:
    pieces = split_ranges(
        list(spans),
        min_partitions=opts.min_partitions,
        max_records=opts.max_records_per_partition,
    )
    return [KafkaRange(*p) for p in pieces]


def _read(opts: ReadOptions, schema: StructType, partition: InputPartition) -> Iterator[Any]:
    if not isinstance(partition, KafkaRange):
        # Spark asks for one empty partition when planning found nothing to read.
        return iter(())
    arrow_schema = to_arrow_schema(schema, timezone="UTC")
    rng = RangeRead(partition.topic, partition.partition, partition.start, partition.end)
    return read_range(opts, rng, arrow_schema)


class KafkaBatchReader(DataSourceReader):
    """Batch read: offsets resolved once, at planning, from startingOffsets /
    startingTimestamp to endingOffsets / endingTimestamp."""

    def __init__(self, opts: ReadOptions, schema: StructType) -> None:
        self.opts = opts
        self.schema = schema

    def partitions(self) -> Sequence[InputPartition]:
        """One range per topic-partition, cut further when big (see split_ranges)."""
        opts = self.opts
        with read_client(opts) as sc:
            tps = discover(sc, opts.subscription)
            start = resolve(
                sc, opts.starting, tps, ending=False, timestamp_strategy=opts.timestamp_strategy
            )
            end = resolve(sc, opts.ending, tps, ending=True)
        spans = []
        for tp in tps:
            lo, hi = start[tp], end[tp]
            if lo > hi:
                raise OptionError(
                    f"the starting offset {lo} of {tp[0]}-{tp[1]} is after its ending offset {hi}"
                )
            spans.append((tp[0], tp[1], lo, hi))
        return _ranges(opts, spans)

    def read(self, partition: InputPartition) -> Iterator[Any]:
        """Fetch the range with kt's client as Arrow batches."""
        return _read(self.opts, self.schema, partition)


class KafkaStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """Streaming read. Offsets are Spark's offset JSON, one entry per topic-partition.

    Each micro-batch refreshes the metadata: partitions that appeared since (a
    topic grown with CreatePartitions, a new topic matching subscribePattern) are
    read from their earliest offset. maxOffsetsPerTrigger caps the offsets of a
    micro-batch, shared among partitions in proportion to their backlog.
    """

    def __init__(self, opts: ReadOptions, schema: StructType) -> None:
        self.opts = opts
        self.schema = schema
        self._client: SyncClient | None = None
        self._latest: dict[TopicPartition, int] | None = None
        self._available_now: dict[TopicPartition, int] | None = None

    def __getstate__(self) -> dict[str, Any]:
        # Executors get the reader pickled; the driver's connections stay behind.
        state = dict(self.__dict__)
        state["_client"] = None
        return state

    def _sc(self) -> SyncClient:
        if self._client is None:
            self._client = read_client(self.opts)
        return self._client

    def initialOffset(self) -> dict[str, Any]:
        """The startingOffsets / startingTimestamp of every current partition."""
        sc = self._sc()
        tps = discover(sc, self.opts.subscription)
        start = resolve(
            sc,
            self.opts.starting,
            tps,
            ending=False,
            timestamp_strategy=self.opts.timestamp_strategy,
        )
        return offsets_json(start)

    def _with_new_partitions(
        self, start: dict[TopicPartition, int]
    ) -> tuple[dict[TopicPartition, int], list[TopicPartition]]:
        """`start` for every current partition (new ones at earliest); the current list."""
        sc = self._sc()
        tps = discover(sc, self.opts.subscription)
        current = set(tps)
        gone = [tp for tp in start if tp not in current]
        if gone and self.opts.fail_on_data_loss:
            names = ", ".join(f"{t}-{p}" for t, p in gone)
            raise DataLossError(
                f"partitions {names} are gone (topic deleted?). Some data may have been lost; "
                "set failOnDataLoss=false to go on without them"
            )
        new = [tp for tp in tps if tp not in start]
        full = {tp: start[tp] for tp in tps if tp in start}
        full.update(list_offsets(sc, new, EARLIEST))
        return full, tps

    def latestOffset(self, start: dict[str, Any], limit: ReadLimit) -> dict[str, Any]:
        """The end of the next micro-batch: the log end offsets, capped by the read
        limit (maxOffsetsPerTrigger) and, under Trigger.AvailableNow, by what was
        there when the query started."""
        begin, tps = self._with_new_partitions(offsets_from_json(start))
        latest = list_offsets(self._sc(), tps, LATEST)
        self._latest = dict(latest)
        if self._available_now is not None:
            cap = self._available_now
            latest = {tp: min(o, cap.get(tp, begin[tp])) for tp, o in latest.items()}
        # A partition whose log start moved past our position keeps its position:
        # read() reports (or skips) the loss when it gets there.
        latest = {tp: max(o, begin[tp]) for tp, o in latest.items()}
        if isinstance(limit, ReadMaxRows):
            latest = rate_limit(begin, latest, limit.max_rows)
        return offsets_json(latest)

    def getDefaultReadLimit(self) -> ReadLimit:
        """maxOffsetsPerTrigger as a row limit, else everything available."""
        n = self.opts.max_offsets_per_trigger
        return ReadAllAvailable() if n is None else ReadMaxRows(n)

    def reportLatestOffset(self) -> dict[str, Any] | None:
        """The log end offsets seen by the last latestOffset call."""
        return None if self._latest is None else offsets_json(self._latest)

    def prepareForTriggerAvailableNow(self) -> None:
        """Trigger.AvailableNow: read up to today's log end offsets, then stop."""
        sc = self._sc()
        tps = discover(sc, self.opts.subscription)
        self._available_now = list_offsets(sc, tps, LATEST)

    def partitions(self, start: dict[str, Any], end: dict[str, Any]) -> Sequence[InputPartition]:
        """Ranges between two offset JSONs; partitions absent from `start` are new
        and begin at their earliest offset."""
        s = offsets_from_json(start)
        e = offsets_from_json(end)
        new = [tp for tp in e if tp not in s]
        if new:
            s.update(list_offsets(self._sc(), new, EARLIEST))
        spans = []
        for tp, hi in sorted(e.items()):
            lo = s[tp]
            if lo > hi:
                if self.opts.fail_on_data_loss:
                    raise DataLossError(
                        f"{tp[0]}-{tp[1]}: offset went back from {lo} to {hi} (topic recreated?). "
                        "Some data may have been lost; set failOnDataLoss=false to go on"
                    )
                continue
            spans.append((tp[0], tp[1], lo, hi))
        return _ranges(self.opts, spans)

    def read(self, partition: InputPartition) -> Iterator[Any]:
        """Fetch the range with kt's client as Arrow batches."""
        return _read(self.opts, self.schema, partition)

    def commit(self, end: dict[str, Any]) -> None:
        """Nothing to do: offsets live in Spark's checkpoint, not in a consumer group
        (as with Spark's Kafka source)."""

    def stop(self) -> None:
        """Close the driver-side connections."""
        if self._client is not None:
            self._client.close()
            self._client = None


# --- writing --------------------------------------------------------------------------


@dataclass
class KafkaCommitMessage(WriterCommitMessage):
    """What a write task produced (already acknowledged by the brokers)."""

    records: int
    partitions: int


_BYTES_OR_TEXT = (BinaryType, StringType)


def _columns(schema: StructType, opts: WriteOptions) -> dict[str, int]:
    """Indexes of the key/value/topic/partition/headers columns; checks their types
    as Spark's Kafka sink does. Other columns are ignored."""
    found: dict[str, tuple[int, DataType]] = {}
    for i, f in enumerate(schema.fields):
        name = f.name.lower()
        if name in ("key", "value", "topic", "partition", "headers"):
            found[name] = (i, f.dataType)
    if "value" not in found:
        raise OptionError("required attribute 'value' not found")
    for name in ("key", "value"):
        if name in found and not isinstance(found[name][1], _BYTES_OR_TEXT):
            raise OptionError(f"{name} attribute type must be a string or binary")
    if "topic" in found and not isinstance(found["topic"][1], StringType):
        raise OptionError("topic attribute type must be a string")
    if "topic" not in found and opts.topic is None:
        raise OptionError(
            "topic option required when no 'topic' attribute is present. Use the topic "
            "option for setting a topic."
        )
    if "partition" in found and not isinstance(
        found["partition"][1], (IntegerType, ShortType, LongType)
    ):
        raise OptionError("partition attribute type must be an int")
    if "headers" in found:
        t = found["headers"][1]
        ok = (
            isinstance(t, ArrayType)
            and isinstance(t.elementType, StructType)
            and [f.name for f in t.elementType.fields] == ["key", "value"]
            and isinstance(t.elementType.fields[0].dataType, StringType)
            and isinstance(t.elementType.fields[1].dataType, BinaryType)
        )
        if not ok:
            raise OptionError(
                "headers attribute type must be array<struct<key:string,value:binary>>"
            )
    return {name: i for name, (i, _) in found.items()}


def _write_rows(
    opts: WriteOptions, cols: dict[str, int], rows: Iterator[Any]
) -> KafkaCommitMessage:
    ki, vi = cols.get("key"), cols["value"]
    ti, pi, hi = cols.get("topic"), cols.get("partition"), cols.get("headers")
    with read_client(opts) as sc:
        producer = Producer(sc, opts)
        for row in rows:
            topic = opts.topic if opts.topic is not None else row[ti]
            if topic is None:
                raise ValueError("null topic present in the data. Use the topic option")
            producer.add(
                topic,
                None if pi is None else row[pi],
                None if ki is None else as_bytes(row[ki], "key"),
                as_bytes(row[vi], "value"),
                [] if hi is None else headers_of(row[hi]),
            )
        producer.flush()
    return KafkaCommitMessage(producer.stats.records, producer.stats.partitions)


class KafkaBatchWriter(DataSourceWriter):
    """df.write.format("kt"): each task produces its rows, acks=all, before it ends.

    At-least-once: records are visible as soon as a task produces them; a retried
    task writes them again and abort() cannot take them back.
    """

    def __init__(self, opts: WriteOptions, cols: dict[str, int]) -> None:
        self.opts = opts
        self.cols = cols

    def write(self, iterator: Iterator[Any]) -> KafkaCommitMessage:
        """Produce the task's rows; returns once the brokers acknowledged them all."""
        return _write_rows(self.opts, self.cols, iterator)

    def commit(self, messages: list[WriterCommitMessage | None]) -> None:
        """Nothing to publish: the records are already in the topics."""

    def abort(self, messages: list[WriterCommitMessage | None]) -> None:
        """Nothing can be undone: records produced by tasks that finished stay."""


class KafkaStreamWriter(DataSourceStreamWriter):
    """writeStream.format("kt"): each micro-batch's tasks produce their rows.

    At-least-once: a micro-batch replayed after a failure produces its records
    again (Spark's Kafka sink behaves the same).
    """

    def __init__(self, opts: WriteOptions, cols: dict[str, int]) -> None:
        self.opts = opts
        self.cols = cols

    def write(self, iterator: Iterator[Any]) -> KafkaCommitMessage:
        """Produce the task's rows; returns once the brokers acknowledged them all."""
        return _write_rows(self.opts, self.cols, iterator)

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        """Nothing to publish: the records are already in the topics."""

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        """Nothing can be undone; the replayed batch will produce its records again."""


class KafkaDataSource(DataSource):
    """format("kt"): live topics with Spark's Kafka source columns and options."""

    @classmethod
    def name(cls) -> str:
        """The short name: spark.read.format("kt")."""
        return "kt"

    def schema(self) -> StructType:
        """Spark's Kafka columns; headers with includeHeaders=true."""
        value = str(self.options.get("includeHeaders", "false")).strip().lower()
        return kafka_schema(value == "true")

    def reader(self, schema: StructType) -> DataSourceReader:
        """The batch reader."""
        return KafkaBatchReader(parse_read_options(self.options, streaming=False), schema)

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        """The micro-batch reader."""
        return KafkaStreamReader(parse_read_options(self.options, streaming=True), schema)

    def writer(self, schema: StructType, overwrite: bool) -> DataSourceWriter:
        """The batch writer (append only: a topic cannot be overwritten)."""
        if overwrite:
            raise OptionError("save mode overwrite is not allowed for Kafka; use append")
        opts = parse_write_options(self.options)
        return KafkaBatchWriter(opts, _columns(schema, opts))

    def streamWriter(self, schema: StructType, overwrite: bool) -> DataSourceStreamWriter:
        """The micro-batch writer."""
        opts = parse_write_options(self.options)
        return KafkaStreamWriter(opts, _columns(schema, opts))


__all__ = ["KafkaDataSource", "kafka_schema"]
