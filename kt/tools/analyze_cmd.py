"""`kt analyze topics|anomalies|keys`: forensic analyses of log segments on Spark.

The commands read through the `kt-segments` PySpark source (kt/spark) and print a
table, NDJSON (`--json`) or write files (`--to DIR`); the options and the session
they share are in `kt.tools.spark_job`. PySpark is an optional extra: without it
they stop with one error line and exit 1.
"""

from __future__ import annotations

import base64
import re
import time
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, TypeVar

import click

from kt.tools.console import handle_errors, usage_error
from kt.tools.spark_job import (
    OutputArgs,
    SparkArgs,
    decode_option,
    make_scan,
    output_options,
    parse_time_option,
    run_job,
    spark_options,
)

if TYPE_CHECKING:
    from kt.spark.jobs import Scan

F = TypeVar("F", bound=Callable[..., Any])

DEFAULT_DELETE_RETENTION_MS = 24 * 60 * 60 * 1000


def render_bytes(value: Any, decode: str) -> str | None:
    """A key or value for display: utf8 (invalid bytes escaped), hex or base64."""
    if value is None:
        return None
    data = bytes(value)
    if decode == "hex":
        return data.hex()
    if decode == "base64":
        return base64.b64encode(data).decode("ascii")
    return data.decode("utf-8", errors="backslashreplace")


def _common(func: F) -> F:
    return handle_errors(output_options(spark_options(func)))


@click.group()
def analyze() -> None:
    """Forensic analyses of log segments on Spark (needs `pip install 'kt[spark]'`).

    PATHS are log directories, partition directories, segment files or globs. The
    work runs on Spark (`--master`, default all local cores); progress shows on a
    terminal. Exit 1 when PySpark or Java is missing or the job fails.
    """


@analyze.command()
@_common
@click.option(
    "--now",
    "now_text",
    metavar="TIME",
    help="The time of the compaction estimate, ms or ISO-8601 (default: now).",
)
@click.option(
    "--delete-retention-ms",
    type=click.IntRange(min=0),
    default=DEFAULT_DELETE_RETENTION_MS,
    show_default=True,
    help="delete.retention.ms for the compaction estimate.",
)
@click.option(
    "--min-compaction-lag-ms",
    type=click.IntRange(min=0),
    default=0,
    show_default=True,
    help="min.compaction.lag.ms for the compaction estimate.",
)
def topics(
    spark_args: SparkArgs,
    output: OutputArgs,
    now_text: str | None,
    delete_retention_ms: int,
    min_compaction_lag_ms: int,
) -> None:
    """Statistics per topic and partition.

    Records, bytes, batches, codecs, first and last offset and timestamp,
    producers, distinct keys, tombstones, CRC failures, damaged regions, and the
    compaction estimate: the records and bytes one cleaning would drop, exactly
    what `kt compaction estimate` says (given for partition directories read whole).

    \b
    Examples:
      kt analyze topics /var/lib/kafka/data
      kt analyze topics --master 'local[8]' --json --topic 'orders*' /var/lib/kafka/data
      kt analyze topics --to /tmp/topics --format csv /var/lib/kafka/data
    """
    from kt.spark.jobs import CompactionParams, analyze_topics

    scan = make_scan(spark_args)
    now = parse_time_option(now_text, "--now") or int(time.time() * 1000)
    # The estimate is a property of the whole log: not given for a range.
    params = (
        None
        if spark_args.ranged
        else CompactionParams(now, delete_retention_ms, min_compaction_lag_ms)
    )

    def job(spark: Any, scan: Scan) -> list[dict[str, Any]] | None:
        rows = analyze_topics(spark, scan, params)
        if output.to is None:
            return rows
        output.write(spark.createDataFrame(_topic_records(rows), schema=_topic_schema()))
        return None

    rows = run_job(spark_args, scan, "kt analyze topics", job)
    if rows is not None:
        output.show(rows, _TOPIC_HEADERS, _topic_cells)


_TOPIC_HEADERS = [
    "topic", "partition", "records", "bytes", "batches", "codecs", "offsets",
    "timestamps", "producers", "keys", "tombstones", "crc_bad", "damaged",
    "compaction_drops",
]  # fmt: skip


def _topic_cells(r: Mapping[str, Any]) -> list[Any]:
    drops = (
        f"{r['compaction_records_dropped']} rec / {r['compaction_bytes_dropped']} B"
        if r["compaction_records_dropped"] is not None
        else "-"
    )
    return [
        r["topic"], r["partition"], r["records"], r["bytes"], r["batches"],
        ",".join(r["codecs"] or []), f"{r['first_offset']}..{r['last_offset']}",
        f"{r['first_timestamp']}..{r['last_timestamp']}", r["producers"],
        r["distinct_keys"], r["tombstones"], r["crc_failures"], r["damaged_regions"],
        drops,
    ]  # fmt: skip


def _topic_records(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The rows as the flat records of the `--to` dataset (codecs joined by commas)."""
    from kt.spark.jobs import TOPIC_COLUMNS

    flat = [{k: r[k] for k in TOPIC_COLUMNS} for r in rows]
    for r in flat:
        r["codecs"] = ",".join(r["codecs"] or [])
    return flat


def _topic_schema() -> Any:
    from pyspark.sql.types import (
        IntegerType,
        LongType,
        StringType,
        StructField,
        StructType,
    )

    from kt.spark.jobs import TOPIC_COLUMNS

    types = {"topic": StringType(), "partition": IntegerType(), "codecs": StringType()}
    return StructType([StructField(c, types.get(c, LongType())) for c in TOPIC_COLUMNS])


@analyze.command()
@_common
@click.option(
    "--now",
    "now_text",
    metavar="TIME",
    help="What counts as the future: ms or ISO-8601 (default: now).",
)
@click.option(
    "--future-tolerance-ms",
    type=click.IntRange(min=0),
    default=60_000,
    show_default=True,
    help="Timestamps up to this far after --now are not reported.",
)
def anomalies(
    spark_args: SparkArgs,
    output: OutputArgs,
    now_text: str | None,
    future_tolerance_ms: int,
) -> None:
    """Everything suspicious in the segments.

    Damaged regions and CRC mismatches, offset gaps and overlaps (across segments
    too), timestamps out of order or in the future, producer sequences written twice
    (what an idempotence bug leaves behind), transaction markers without their
    transaction and transactions without a marker.

    One row per anomaly: kind, topic, partition, segment, position, offset, detail.
    Exit 1 when any is found. Some are expected in compacted topics (offset gaps,
    markers whose data was cleaned away); read them in context.

    \b
    Examples:
      kt analyze anomalies /var/lib/kafka/data
      kt analyze anomalies --json /var/lib/kafka/data | jq -c 'select(.kind=="crc-mismatch")'
    """
    from kt.spark.jobs import ANOMALY_COLUMNS, analyze_anomalies

    scan = make_scan(spark_args)
    now = parse_time_option(now_text, "--now") or int(time.time() * 1000)

    def job(spark: Any, scan: Scan) -> int:
        df = analyze_anomalies(spark, scan, now, future_tolerance_ms)
        if output.to is not None:
            df = df.cache()
            found: int = df.count()
            output.write(df)
            return found
        rows = [r.asDict() for r in df.toLocalIterator()]
        output.show(rows, ANOMALY_COLUMNS)
        return len(rows)

    if run_job(spark_args, scan, "kt analyze anomalies", job):
        raise SystemExit(1)


@analyze.command()
@_common
@click.option("--key", "key_text", metavar="KEY", help="The key (its UTF-8 bytes).")
@click.option("--key-hex", metavar="HEX", help="The key as hex bytes.")
@click.option(
    "--key-regex", metavar="REGEX", help="Keys matching this regex (on the key as UTF-8)."
)
@decode_option(
    ["utf8", "hex", "base64"],
    "How keys, values and header values are shown (utf8 escapes invalid bytes).",
)
def keys(
    spark_args: SparkArgs,
    output: OutputArgs,
    key_text: str | None,
    key_hex: str | None,
    key_regex: str | None,
    decode: str,
) -> None:
    """The history of one key: its records across all partitions and segments.

    Every record of the key (or of the keys matching a regex), in topic, partition
    and offset order.

    \b
    Examples:
      kt analyze keys --key user-42 /var/lib/kafka/data
      kt analyze keys --key-regex '^user-4[0-9]$' --topic users --json /var/lib/kafka/data
    """
    from kt.spark.jobs import KEY_COLUMNS, analyze_keys

    chosen = [k for k in (key_text, key_hex, key_regex) if k is not None]
    if len(chosen) != 1:
        usage_error("give exactly one of --key, --key-hex, --key-regex")
    key: bytes | None = None
    if key_text is not None:
        key = key_text.encode("utf-8")
    elif key_hex is not None:
        try:
            key = bytes.fromhex(key_hex)
        except ValueError:
            usage_error(f"--key-hex: {key_hex!r} is not hex")
    if key_regex is not None:
        try:
            re.compile(key_regex)
        except re.error as exc:
            usage_error(f"--key-regex: {exc}")
    scan = make_scan(spark_args)

    def job(spark: Any, scan: Scan) -> None:
        df = analyze_keys(spark, scan, key, key_regex)
        if output.to is not None:
            output.write(df)
            return
        rows = (_key_record(row.asDict(recursive=True), decode) for row in df.toLocalIterator())
        output.show(rows, [c for c in KEY_COLUMNS if c != "headers"])

    run_job(spark_args, scan, "kt analyze keys", job)


def _key_record(r: dict[str, Any], decode: str) -> dict[str, Any]:
    """A record of `kt analyze keys` with its bytes rendered as `--decode` says."""
    r["key"] = render_bytes(r["key"], decode)
    r["value"] = render_bytes(r["value"], decode)
    r["headers"] = [
        {"key": h["key"], "value": render_bytes(h["value"], decode)} for h in r["headers"] or []
    ]
    return r


@analyze.command()
@_common
@click.option(
    "--report",
    type=click.Choice(["leaders", "offline", "unavailable", "events"]),
    default="leaders",
    show_default=True,
    help="leaders: leaderships gained/lost and fencings per cluster, hour and broker; "
    "offline: every interval a partition had no leader; unavailable: unavailable "
    "partition-seconds per cluster and hour; events: every timeline event.",
)
def metadata(spark_args: SparkArgs, output: OutputArgs, report: str) -> None:
    """KRaft metadata logs of many clusters: leader churn and unavailability.

    PATHS are KRaft metadata log dirs (or their __cluster_metadata-0), one or more per
    cluster; each is replayed in Spark tasks by the same code as `kt metadata
    timeline`, so the events are the ones it tells. Clusters are named by the
    cluster.id of the meta.properties beside __cluster_metadata-0. --start-time/
    --end-time and --start-offset/--end-offset limit the events counted (the logs are
    still replayed whole, since every event depends on what came before).

    \b
    Examples:
      kt analyze metadata /data/cluster-a/meta /data/cluster-b/meta
      kt analyze metadata --report unavailable --json /data/*/meta
      kt analyze metadata --report offline --start-time 2026-01-30T03:00Z /data/a/meta
      kt analyze metadata --report events --to /tmp/events --format parquet /data/*/meta
    """
    from kt.spark.metadata_jobs import COLUMNS, analyze_metadata

    if spark_args.topic is not None or spark_args.topic_regex is not None:
        usage_error("--topic/--topic-regex do not apply: the metadata job reads __cluster_metadata")
    scan = make_scan(spark_args)

    def job(spark: Any, scan: Scan) -> list[dict[str, Any]] | None:
        rows = analyze_metadata(spark, scan, report)
        if output.to is None:
            return rows
        output.write(spark.createDataFrame(rows, schema=_metadata_schema(COLUMNS[report])))
        return None

    rows = run_job(spark_args, scan, f"kt analyze metadata ({report})", job)
    if rows is not None:
        output.show(rows, COLUMNS[report])


def _metadata_schema(columns: list[str]) -> Any:
    from pyspark.sql.types import (
        BooleanType,
        DoubleType,
        IntegerType,
        LongType,
        StringType,
        StructField,
        StructType,
    )

    ints = {"partition", "broker", "leader", "previous_leader", "epoch", "partitions_offline",
            "leaderships_gained", "leaderships_lost", "fenced"}  # fmt: skip
    longs = {"offset", "timestamp", "start", "end", "start_offset", "end_offset"}
    types: dict[str, Any] = {"seconds": DoubleType(), "partition_seconds": DoubleType(),
                             "still_offline": BooleanType()}  # fmt: skip
    return StructType(
        [
            StructField(
                c,
                types.get(
                    c, IntegerType() if c in ints else LongType() if c in longs else StringType()
                ),
            )
            for c in columns
        ]
    )
