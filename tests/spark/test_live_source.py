"""The "kt" Spark source and sink against a live `kt broker`.

Batch reads must return what kafka-python consumes between the same offsets (or
timestamps); a streaming query must deliver every record exactly once to a file
sink across a restart from its checkpoint, and pick up partitions added while it
runs; what the writer produces must read back with kafka-python.
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from kt.spark.live_options import (
    OptionError,
    offsets_json,
    parse_read_options,
    parse_write_options,
    rate_limit,
    split_ranges,
)

pytestmark = pytest.mark.integration

# Recent enough that time-based retention leaves the records alone.
T0 = (int(time.time()) - 3600) * 1000


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory):
    """One `kt broker` for the module (each test uses its own topics)."""
    from broker_harness import BrokerProcess, free_port

    b = BrokerProcess(tmp_path_factory.mktemp("live") / "data", free_port()).start()
    yield b
    b.kill()


def create_topic(bootstrap: str, name: str, partitions: int) -> None:
    from kt.client import KafkaClient, NewTopic

    async def go() -> None:
        async with KafkaClient(bootstrap) as c:
            errors = await c.create_topics([NewTopic(name, partitions, 1)])
            assert errors[name] is None, errors

    asyncio.run(go())


def grow_topic(bootstrap: str, name: str, partitions: int) -> None:
    from kt.client import KafkaClient

    async def go() -> None:
        async with KafkaClient(bootstrap) as c:
            errors = await c.create_partitions({name: partitions})
            assert errors[name] is None, errors

    asyncio.run(go())


def kt_produce(bootstrap: str, topic: str, partition: int, values: list[bytes]) -> None:
    from kt.client import KafkaClient, RecordSpec

    async def go() -> None:
        async with KafkaClient(bootstrap) as c:
            await c.produce(topic, partition, [RecordSpec(None, v) for v in values])

    asyncio.run(go())


def consume(bootstrap: str, ranges: dict[tuple[str, int], tuple[int, int]]) -> list[tuple]:
    """(topic, partition, offset, key, value, ts, ts_type, headers) read by kafka-python."""
    from kafka import KafkaConsumer, TopicPartition

    consumer = KafkaConsumer(
        bootstrap_servers=bootstrap, enable_auto_commit=False, consumer_timeout_ms=3000
    )
    out: list[tuple] = []
    try:
        for (topic, part), (lo, hi) in ranges.items():
            if lo >= hi:
                continue
            tp = TopicPartition(topic, part)
            consumer.assign([tp])
            consumer.seek(tp, lo)
            for m in consumer:
                if m.offset >= hi:
                    break
                out.append(
                    (
                        m.topic,
                        m.partition,
                        m.offset,
                        m.key,
                        m.value,
                        m.timestamp,
                        m.timestamp_type,
                        [(k, v) for k, v in m.headers],
                    )
                )
                if m.offset == hi - 1:
                    break
    finally:
        consumer.close()
    return sorted(out, key=lambda r: (r[0], r[1], r[2]))


def spark_rows(df: Any) -> list[tuple]:
    """The same tuples from a DataFrame of the kt source (with headers)."""
    rows = df.selectExpr(
        "topic",
        "partition",
        "offset",
        "key",
        "value",
        "unix_millis(timestamp) AS ts",
        "timestampType",
        "headers",
    ).collect()
    out = [
        (
            r.topic,
            r.partition,
            r.offset,
            None if r.key is None else bytes(r.key),
            None if r.value is None else bytes(r.value),
            r.ts,
            r.timestampType,
            [(h.key, None if h.value is None else bytes(h.value)) for h in r.headers],
        )
        for r in rows
    ]
    return sorted(out, key=lambda r: (r[0], r[1], r[2]))


@pytest.fixture(scope="module")
def orders(broker) -> str:
    """Topic "orders", 3 partitions, 3 x 40 records by kafka-python: keys, null keys,
    null values, headers (some empty), create times T0 + 1s * i."""
    from kafka import KafkaProducer

    create_topic(broker.bootstrap, "orders", 3)
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap, acks="all", linger_ms=20)
    try:
        for i in range(40):
            for p in range(3):
                key = None if i % 5 == 0 else b"k%d" % i
                value = None if i % 7 == 3 and key else b"v%d-%d" % (p, i)
                headers = [("n", b"%d" % i)] + ([("empty", b"")] if i % 4 == 0 else [])
                producer.send(
                    "orders",
                    key=key,
                    value=value,
                    partition=p,
                    headers=headers,
                    timestamp_ms=T0 + 1000 * i + p,
                )
            if i % 10 == 9:
                producer.flush(10)
        producer.flush(10)
    finally:
        producer.close(timeout=5)
    return "orders"


def reader(spark: Any, broker: Any, **options: str) -> Any:
    r = spark.read.format("kt").option("kafka.bootstrap.servers", broker.bootstrap)
    for k, v in options.items():
        r = r.option(k, v)
    return r.load()


# --- options (no Spark, no broker) ----------------------------------------------------


def test_options_follow_sparks_kafka_rules() -> None:
    base = {"kafka.bootstrap.servers": "h:9092"}
    with pytest.raises(OptionError, match="exactly one"):
        parse_read_options(base, streaming=False)
    with pytest.raises(OptionError, match="exactly one"):
        parse_read_options({**base, "subscribe": "a", "assign": '{"a":[0]}'}, streaming=False)
    with pytest.raises(OptionError, match="bootstrap"):
        parse_read_options({"subscribe": "a"}, streaming=False)
    with pytest.raises(OptionError, match="can't be latest"):
        parse_read_options({**base, "subscribe": "a", "startingOffsets": "latest"}, streaming=False)
    with pytest.raises(OptionError, match="can't be earliest"):
        parse_read_options(
            {**base, "subscribe": "a", "endingOffsets": '{"a":{"0":-2}}'}, streaming=False
        )
    with pytest.raises(OptionError, match="not valid in streaming"):
        parse_read_options({**base, "subscribe": "a", "endingOffsets": "latest"}, streaming=True)
    o = parse_read_options(
        {
            "bootstrap.servers": "h:9092",
            "SUBSCRIBEPATTERN": "or.*",
            "startingOffsets": "earliest",
            "startingTimestamp": "123",
            "includeHeaders": "true",
        },
        streaming=True,
    )
    assert o.subscription.matches("orders") and not o.subscription.matches("xorders")
    assert o.starting.kind == "timestamp" and o.starting.timestamp == 123  # timestamp wins
    assert o.include_headers
    o = parse_read_options({**base, "assign": '{"b":[1,0],"a":[2]}'}, streaming=True)
    assert o.subscription.assigned == (("a", 2), ("b", 0), ("b", 1))
    assert o.starting.kind == "latest"  # streaming default
    with pytest.raises(OptionError, match="topic option required"):
        from pyspark.sql.types import BinaryType, StructField, StructType

        from kt.spark.live_source import _columns

        _columns(StructType([StructField("value", BinaryType())]), parse_write_options(base))


def test_planning_helpers() -> None:
    assert split_ranges([("t", 0, 0, 10), ("t", 1, 5, 5)], min_partitions=None, max_records=4) == [
        ("t", 0, 0, 4),
        ("t", 0, 4, 8),
        ("t", 0, 8, 10),
    ]
    assert len(split_ranges([("t", 0, 0, 10)], min_partitions=4, max_records=None)) == 4
    start = {("t", 0): 0, ("t", 1): 100, ("t", 2): 7}
    latest = {("t", 0): 300, ("t", 1): 200, ("t", 2): 7}
    capped = rate_limit(start, latest, 40)
    assert capped == {("t", 0): 30, ("t", 1): 110, ("t", 2): 7}
    assert rate_limit(start, latest, 10_000) == latest
    assert offsets_json({("b", 10): 1, ("b", 2): 3, ("a", 0): 5}) == {
        "a": {"0": 5},
        "b": {"2": 3, "10": 1},
    }


# --- batch reads -----------------------------------------------------------------------


def test_batch_read_between_offsets(spark, broker, orders) -> None:
    starting = {"orders": {"0": 5, "1": -2, "2": 12}}
    ending = {"orders": {"0": 33, "1": -1, "2": 13}}
    df = reader(
        spark,
        broker,
        subscribe=orders,
        startingOffsets=json.dumps(starting),
        endingOffsets=json.dumps(ending),
        includeHeaders="true",
        maxRecordsPerPartition="9",
    )
    assert df.columns == [
        "key",
        "value",
        "topic",
        "partition",
        "offset",
        "timestamp",
        "timestampType",
        "headers",
    ]
    got = spark_rows(df)
    want = consume(
        broker.bootstrap, {("orders", 0): (5, 33), ("orders", 1): (0, 40), ("orders", 2): (12, 13)}
    )
    assert len(want) == 28 + 40 + 1
    assert got == want
    assert any(r[3] is None for r in got) and any(r[4] is None for r in got)
    assert any(("empty", b"") in r[7] for r in got)
    # maxRecordsPerPartition=9 cut the ranges into Spark partitions
    assert df.rdd.getNumPartitions() == 4 + 5 + 1

    # defaults (earliest..latest), assign, and no headers column without includeHeaders
    plain = reader(spark, broker, assign='{"orders":[1]}')
    assert "headers" not in plain.columns
    assert plain.count() == 40
    assert reader(spark, broker, subscribePattern="ord.*").count() == 120


def test_batch_read_between_timestamps(spark, broker, orders) -> None:
    from kafka import KafkaConsumer, TopicPartition

    lo_ts, hi_ts = T0 + 10_500, T0 + 25_000
    tps = [TopicPartition("orders", p) for p in range(3)]
    c = KafkaConsumer(bootstrap_servers=broker.bootstrap)
    try:
        lo = c.offsets_for_times({tp: lo_ts for tp in tps})
        hi = c.offsets_for_times({tp: hi_ts for tp in tps})
    finally:
        c.close()
    ranges = {(tp.topic, tp.partition): (lo[tp].offset, hi[tp].offset) for tp in tps}
    want = consume(broker.bootstrap, ranges)
    assert want and all(lo_ts <= r[5] < hi_ts for r in want)

    df = reader(
        spark,
        broker,
        subscribe=orders,
        startingTimestamp=str(lo_ts),
        endingTimestamp=str(hi_ts),
        includeHeaders="true",
    )
    assert spark_rows(df) == want

    # the per-partition forms; a partition left out reads from earliest / to latest
    df = reader(
        spark,
        broker,
        subscribe=orders,
        startingOffsetsByTimestamp=json.dumps({"orders": {"0": lo_ts, "2": lo_ts}}),
        endingOffsetsByTimestamp=json.dumps({"orders": {"0": hi_ts, "1": hi_ts}}),
        includeHeaders="true",
    )
    ranges[("orders", 1)] = (0, ranges[("orders", 1)][1])
    ranges[("orders", 2)] = (ranges[("orders", 2)][0], 40)
    assert spark_rows(df) == consume(broker.bootstrap, ranges)

    # no record at or after a starting timestamp: an error, or the end with "latest"
    late = str(T0 + 10**9)
    with pytest.raises(Exception, match="startingOffsetsByTimestampStrategy"):
        reader(spark, broker, subscribe=orders, startingTimestamp=late).collect()
    empty = reader(
        spark,
        broker,
        subscribe=orders,
        startingTimestamp=late,
        startingOffsetsByTimestampStrategy="latest",
    )
    assert empty.count() == 0


# --- streaming ------------------------------------------------------------------------


# A deadline, not a speed check: a quiet machine gets there in seconds, but Spark's
# first micro-batches (JVM warm-up, query planning) took over a minute on a 2-core
# machine with a load average of 15.
SPARK_DEADLINE_S = 180.0


def _wait(cond: Any, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.2)


def test_stream_exactly_once_across_restart(spark, broker, tmp_path: Path) -> None:
    from kafka import KafkaProducer

    create_topic(broker.bootstrap, "events", 2)
    total = 600
    done, resume = threading.Event(), threading.Event()

    def produce() -> None:
        producer = KafkaProducer(bootstrap_servers=broker.bootstrap, acks="all", linger_ms=5)
        try:
            for i in range(total):
                if i == total // 2:
                    # the second half goes to the restarted query
                    resume.wait(60)
                producer.send("events", key=b"%d" % (i % 13), value=b"e%05d" % i)
                if i % 20 == 19:
                    producer.flush(10)
                    time.sleep(0.1)
            producer.flush(10)
        finally:
            producer.close(timeout=5)
            done.set()

    out, checkpoint = tmp_path / "out", tmp_path / "checkpoint"

    def start() -> Any:
        stream = (
            spark.readStream.format("kt")
            .option("kafka.bootstrap.servers", broker.bootstrap)
            .option("subscribe", "events")
            .option("startingOffsets", "earliest")
            .option("maxOffsetsPerTrigger", "70")
            .load()
            .selectExpr("CAST(value AS STRING) AS value", "partition", "offset")
        )
        return (
            stream.writeStream.format("parquet")
            .option("path", str(out))
            .option("checkpointLocation", str(checkpoint))
            .trigger(processingTime="300 milliseconds")
            .start()
        )

    def written() -> list[str]:
        if not (out / "_spark_metadata").is_dir():
            return []
        df = spark.read.schema("value string, partition int, offset long").parquet(str(out))
        return [r.value for r in df.select("value").collect()]

    thread = threading.Thread(target=produce, daemon=True)
    thread.start()
    query = start()
    try:
        _wait(lambda: len(written()) >= 100, SPARK_DEADLINE_S, "the first micro-batches")
    finally:
        query.stop()
    first_run = len(written())
    assert 100 <= first_run <= total // 2, "stopped mid-way"

    resume.set()
    query = start()
    try:
        _wait(done.is_set, SPARK_DEADLINE_S, "the producer")
        query.processAllAvailable()
        _wait(lambda: len(written()) >= total, SPARK_DEADLINE_S, "every record")
    finally:
        query.stop()
    values = written()
    assert len(values) == total
    assert sorted(values) == [f"e{i:05d}" for i in range(total)]
    # maxOffsetsPerTrigger held: no micro-batch read more than 70 offsets
    for progress in query.recentProgress:
        assert progress["numInputRows"] <= 70


def test_stream_picks_up_new_partitions_and_topics(spark, broker) -> None:
    create_topic(broker.bootstrap, "grow-a", 1)
    kt_produce(broker.bootstrap, "grow-a", 0, [b"a0-%d" % i for i in range(5)])
    query = (
        spark.readStream.format("kt")
        .option("kafka.bootstrap.servers", broker.bootstrap)
        .option("subscribePattern", "grow-.*")
        .option("startingOffsets", "earliest")
        .load()
        .selectExpr("topic", "partition", "CAST(value AS STRING) AS value")
        .writeStream.format("memory")
        .queryName("grown")
        .start()
    )

    def seen() -> set[tuple[str, int, str]]:
        return {(r.topic, r.partition, r.value) for r in spark.table("grown").collect()}

    try:
        query.processAllAvailable()
        assert {v for _, _, v in seen()} == {f"a0-{i}" for i in range(5)}
        # a partition added to the topic, and a new topic matching the pattern:
        # both read from their earliest offset
        grow_topic(broker.bootstrap, "grow-a", 2)
        kt_produce(broker.bootstrap, "grow-a", 1, [b"a1-%d" % i for i in range(4)])
        create_topic(broker.bootstrap, "grow-b", 1)
        kt_produce(broker.bootstrap, "grow-b", 0, [b"b0-%d" % i for i in range(3)])
        _wait(lambda: len(seen()) >= 12, 60, "the new partitions' records")
        query.processAllAvailable()
    finally:
        query.stop()
    got = seen()
    assert {(t, p) for t, p, _ in got} == {("grow-a", 0), ("grow-a", 1), ("grow-b", 0)}
    assert len(got) == 12
    assert ("grow-a", 1, "a1-0") in got and ("grow-b", 0, "b0-2") in got


# --- writing --------------------------------------------------------------------------


def test_batch_writer_round_trip(spark, broker) -> None:
    from kafka import KafkaConsumer
    from pyspark.sql.types import (
        ArrayType,
        BinaryType,
        IntegerType,
        StringType,
        StructField,
        StructType,
    )

    from kt.client.partitioner import partition_for_key

    create_topic(broker.bootstrap, "written", 3)
    create_topic(broker.bootstrap, "keyed", 4)
    header = StructType([StructField("key", StringType()), StructField("value", BinaryType())])
    schema = StructType(
        [
            StructField("topic", StringType()),
            StructField("partition", IntegerType()),
            StructField("key", StringType()),
            StructField("value", BinaryType()),
            StructField("headers", ArrayType(header)),
            StructField("extra", StringType()),
        ]
    )
    rows = [
        (
            "written",
            i % 3,
            None if i % 6 == 0 else f"key-{i}",
            None if i == 7 else b"value-%d" % i,
            [("i", b"%d" % i), ("null", None)] if i % 2 else [],
            "ignored",
        )
        for i in range(30)
    ]
    spark.createDataFrame(rows, schema).repartition(3).write.format("kt").option(
        "kafka.bootstrap.servers", broker.bootstrap
    ).mode("append").save()

    got = consume(broker.bootstrap, {("written", p): (0, 10) for p in range(3)})
    assert len(got) == 30
    by_value = {r[4]: r for r in got}
    for i, (_, part, key, value, headers, _) in enumerate(rows):
        r = by_value[value]
        assert r[1] == part, i
        assert r[3] == (None if key is None else key.encode())
        assert r[7] == [(k, v) for k, v in headers]
    # within a partition, the rows of one Spark task keep their order
    for p in range(3):
        offsets = [r[2] for r in got if r[1] == p]
        assert offsets == list(range(10))

    # the topic option (no topic column), keyed records partitioned like the Java producer,
    # the same rows read back with the kt source
    keyed = spark.createDataFrame(
        [(f"k{i}", f"v{i}") for i in range(40)], "key string, value string"
    )
    keyed.write.format("kt").option("kafka.bootstrap.servers", broker.bootstrap).option(
        "topic", "keyed"
    ).mode("append").save()
    back = reader(spark, broker, subscribe="keyed").selectExpr(
        "CAST(key AS STRING) k", "CAST(value AS STRING) v", "partition"
    )
    rows_back = back.collect()
    assert sorted((r.k, r.v) for r in rows_back) == sorted((f"k{i}", f"v{i}") for i in range(40))
    for r in rows_back:
        assert r.partition == partition_for_key(r.k.encode(), 4)
    c = KafkaConsumer(bootstrap_servers=broker.bootstrap)
    try:
        assert len(c.partitions_for_topic("keyed")) == 4
    finally:
        c.close()

    with pytest.raises(Exception, match="overwrite"):
        keyed.write.format("kt").option("kafka.bootstrap.servers", broker.bootstrap).option(
            "topic", "keyed"
        ).mode("overwrite").save()


def test_stream_writer_available_now(spark, broker, orders, tmp_path: Path) -> None:
    """Topic to topic with writeStream.format("kt") under Trigger.AvailableNow."""
    create_topic(broker.bootstrap, "copied", 3)
    query = (
        spark.readStream.format("kt")
        .option("kafka.bootstrap.servers", broker.bootstrap)
        .option("subscribe", orders)
        .option("startingOffsets", "earliest")
        .option("includeHeaders", "true")
        .option("maxOffsetsPerTrigger", "50")
        .load()
        .selectExpr("key", "value", "headers", "partition")
        .writeStream.format("kt")
        .option("kafka.bootstrap.servers", broker.bootstrap)
        .option("topic", "copied")
        .option("checkpointLocation", str(tmp_path / "cp"))
        .trigger(availableNow=True)
        .start()
    )
    assert query.awaitTermination(90)
    assert query.exception() is None
    src = [
        (*r[3:5], r[7])
        for r in consume(broker.bootstrap, {("orders", p): (0, 40) for p in range(3)})
    ]
    dst = [
        (*r[3:5], r[7])
        for r in consume(broker.bootstrap, {("copied", p): (0, 40) for p in range(3)})
    ]
    assert sorted(src, key=repr) == sorted(dst, key=repr)
