"""`kt analyze topics|anomalies|keys`: forensic analyses of log segments on Spark.

The commands read through the `kt-segments` PySpark source (kt/spark) and print a
table, NDJSON (`--json`) or write files (`--to DIR`). PySpark is an optional extra:
without it they stop with one error line and exit 1.
"""

from __future__ import annotations

import base64
import re
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

import click

from kt.tools.console import emit_json, fail, handle_errors, render_table, usage_error

F = TypeVar("F", bound=Callable[..., Any])

DEFAULT_DELETE_RETENTION_MS = 24 * 60 * 60 * 1000


def _parse_time(value: str | None, option: str) -> int | None:
    if value is None:
        return None
    from kt.tools.dump_log import parse_time

    return parse_time(value, option)


def spark_options(func: F) -> F:
    """The options every Spark command takes: where to run, and what to read."""
    decorators = [
        click.argument("paths", nargs=-1, required=True),
        click.option(
            "--master",
            default="local[*]",
            show_default=True,
            help="Spark master URL: local[N], spark://host:port, yarn, ...",
        ),
        click.option(
            "--conf",
            "confs",
            multiple=True,
            metavar="KEY=VALUE",
            help="A Spark configuration property (repeatable).",
        ),
        click.option("--topic", metavar="GLOB", help="Only topics matching these globs (a,b*)."),
        click.option("--topic-regex", metavar="REGEX", help="Only topics matching this regex."),
        click.option(
            "--start-offset", type=click.IntRange(min=0), help="First offset (inclusive)."
        ),
        click.option("--end-offset", type=click.IntRange(min=0), help="Last offset (exclusive)."),
        click.option(
            "--start-time", metavar="TIME", help="Earliest timestamp, ms or ISO-8601 (inclusive)."
        ),
        click.option(
            "--end-time", metavar="TIME", help="Latest timestamp, ms or ISO-8601 (exclusive)."
        ),
        click.option(
            "--max-bytes-per-partition",
            type=click.IntRange(min=1),
            help="Split segments larger than this into several Spark tasks (default 128 MiB).",
        ),
    ]
    for deco in reversed(decorators):
        func = deco(func)
    return func


def output_options(func: F) -> F:
    """--json / --to DIR --format F --mode M."""
    decorators = [
        click.option("--json", "as_json", is_flag=True, help="NDJSON, one object per row."),
        click.option(
            "--to",
            "to",
            metavar="DIR",
            help="Write the result as a dataset in DIR instead of printing it.",
        ),
        click.option(
            "--format",
            "fmt",
            type=click.Choice(["parquet", "json", "csv"]),
            default="parquet",
            show_default=True,
            help="The format of --to.",
        ),
        click.option(
            "--mode",
            type=click.Choice(["error", "overwrite", "append"]),
            default="error",
            show_default=True,
            help="When --to exists: fail, replace it, or add to it.",
        ),
    ]
    for deco in reversed(decorators):
        func = deco(func)
    return func


def parse_confs(confs: tuple[str, ...]) -> dict[str, str]:
    """`--conf k=v` values as a dict (usage error when malformed)."""
    out = {}
    for c in confs:
        key, sep, value = c.partition("=")
        if not sep or not key.strip():
            usage_error(f"--conf: {c!r} is not KEY=VALUE")
        out[key.strip()] = value
    return out


def make_scan(
    paths: tuple[str, ...],
    topic: str | None,
    topic_regex: str | None,
    start_offset: int | None,
    end_offset: int | None,
    start_time: str | None,
    end_time: str | None,
    max_bytes_per_partition: int | None,
    resync: bool = True,
) -> Any:
    """Check the paths (usage errors before Spark starts) and build the job's Scan."""
    from kt.spark import SparkMissingError, require_pyspark

    try:
        require_pyspark()
    except SparkMissingError as exc:
        fail(str(exc))
    from kt.spark.jobs import Scan
    from kt.spark.segments_source import expand_paths
    from kt.storage.errors import WrongFileKindError

    split = [p.strip() for raw in paths for p in raw.split(",") if p.strip()]
    if not split:
        usage_error("no path given")
    if topic_regex is not None:
        try:
            re.compile(topic_regex)
        except re.error as exc:
            usage_error(f"--topic-regex: {exc}")
    try:
        logs = expand_paths(split)
    except WrongFileKindError as exc:
        usage_error(str(exc))
    if not logs:
        usage_error(f"no segment files under {', '.join(split)}")
    return Scan(
        split,
        topic=topic,
        topic_pattern=topic_regex,
        start_offset=start_offset,
        end_offset=end_offset,
        start_time=_parse_time(start_time, "--start-time"),
        end_time=_parse_time(end_time, "--end-time"),
        resync=resync,
        max_bytes_per_partition=max_bytes_per_partition,
    )


_SOURCE_ERROR = re.compile(r"kt-segments: [^\n]*")


def spark_error_line(exc: BaseException) -> str:
    """One line for a failed Spark job: the source's own message when it has one."""
    text = str(exc)
    m = _SOURCE_ERROR.search(text)
    if m:
        return m.group(0).strip()
    if "JAVA_GATEWAY_EXITED" in text or "Java gateway process exited" in text:
        return "could not start Spark: is a Java 17+ runtime installed and on PATH?"
    first = next((line.strip() for line in text.splitlines() if line.strip()), repr(exc))
    return f"Spark job failed: {first[:500]}"


@contextmanager
def spark_session(master: str, confs: tuple[str, ...], app: str) -> Iterator[Any]:
    """A session for one command; any Spark failure becomes one error line (exit 1)."""
    from kt.spark.jobs import session

    conf = parse_confs(confs)
    spark = None
    try:
        try:
            spark = session(master, conf, app)
        except Exception as exc:
            fail(spark_error_line(exc))
        try:
            yield spark
        except click.ClickException:
            raise
        except (BrokenPipeError, KeyboardInterrupt):
            raise
        except Exception as exc:
            fail(spark_error_line(exc))
    finally:
        if spark is not None:
            spark.stop()


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


def write_result(df: Any, to: str, fmt: str, mode: str) -> None:
    """Write a result DataFrame and say where."""
    from kt.spark.jobs import write

    write(df, to, fmt, mode="errorifexists" if mode == "error" else mode)
    click.echo(f"wrote {to} ({fmt})", err=True)


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
    paths: tuple[str, ...],
    master: str,
    confs: tuple[str, ...],
    topic: str | None,
    topic_regex: str | None,
    start_offset: int | None,
    end_offset: int | None,
    start_time: str | None,
    end_time: str | None,
    max_bytes_per_partition: int | None,
    as_json: bool,
    to: str | None,
    fmt: str,
    mode: str,
    now_text: str | None,
    delete_retention_ms: int,
    min_compaction_lag_ms: int,
) -> None:
    """Per topic and partition: records, bytes, batches, codecs, first and last offset
    and timestamp, producers, distinct keys, tombstones, CRC failures, damaged regions,
    and the compaction estimate: the records and bytes one cleaning would drop, exactly
    what `kt compaction estimate` says (given for partition directories read whole).

    \b
    Examples:
      kt analyze topics /var/lib/kafka/data
      kt analyze topics --master 'local[8]' --json --topic 'orders*' /var/lib/kafka/data
      kt analyze topics --to /tmp/topics --format csv /var/lib/kafka/data
    """
    from kt.spark.jobs import TOPIC_COLUMNS, CompactionParams, analyze_topics

    scan = make_scan(
        paths, topic, topic_regex, start_offset, end_offset, start_time, end_time,
        max_bytes_per_partition,
    )  # fmt: skip
    now = _parse_time(now_text, "--now") or int(time.time() * 1000)
    ranged = any(v is not None for v in (start_offset, end_offset, start_time, end_time))
    # The estimate is a property of the whole log: not given for a range.
    params = None if ranged else CompactionParams(now, delete_retention_ms, min_compaction_lag_ms)
    with spark_session(master, confs, "kt analyze topics") as spark:
        rows = analyze_topics(spark, scan, params)
        if to is not None:
            flat = [{k: r[k] for k in TOPIC_COLUMNS} for r in rows]
            for r in flat:
                r["codecs"] = ",".join(r["codecs"] or [])
            df = spark.createDataFrame(flat, schema=_topic_schema())
            write_result(df, to, fmt, mode)
            return
    if as_json:
        for r in rows:
            emit_json(r)
        return
    headers = [
        "topic", "partition", "records", "bytes", "batches", "codecs", "offsets",
        "timestamps", "producers", "keys", "tombstones", "crc_bad", "damaged",
        "compaction_drops",
    ]  # fmt: skip
    table = []
    for r in rows:
        drops = (
            f"{r['compaction_records_dropped']} rec / {r['compaction_bytes_dropped']} B"
            if r["compaction_records_dropped"] is not None
            else "-"
        )
        table.append(
            [
                r["topic"], r["partition"], r["records"], r["bytes"], r["batches"],
                ",".join(r["codecs"] or []), f"{r['first_offset']}..{r['last_offset']}",
                f"{r['first_timestamp']}..{r['last_timestamp']}", r["producers"],
                r["distinct_keys"], r["tombstones"], r["crc_failures"], r["damaged_regions"],
                drops,
            ]
        )  # fmt: skip
    render_table(headers, table)


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
    paths: tuple[str, ...],
    master: str,
    confs: tuple[str, ...],
    topic: str | None,
    topic_regex: str | None,
    start_offset: int | None,
    end_offset: int | None,
    start_time: str | None,
    end_time: str | None,
    max_bytes_per_partition: int | None,
    as_json: bool,
    to: str | None,
    fmt: str,
    mode: str,
    now_text: str | None,
    future_tolerance_ms: int,
) -> None:
    """Everything suspicious in the segments: damaged regions and CRC mismatches,
    offset gaps and overlaps (across segments too), timestamps out of order or in the
    future, producer sequences written twice (what an idempotence bug leaves behind),
    transaction markers without their transaction and transactions without a marker.

    One row per anomaly: kind, topic, partition, segment, position, offset, detail.
    Exit 1 when any is found. Some are expected in compacted topics (offset gaps,
    markers whose data was cleaned away); read them in context.

    \b
    Examples:
      kt analyze anomalies /var/lib/kafka/data
      kt analyze anomalies --json /var/lib/kafka/data | jq -c 'select(.kind=="crc-mismatch")'
    """
    from kt.spark.jobs import ANOMALY_COLUMNS, analyze_anomalies

    scan = make_scan(
        paths, topic, topic_regex, start_offset, end_offset, start_time, end_time,
        max_bytes_per_partition,
    )  # fmt: skip
    now = _parse_time(now_text, "--now") or int(time.time() * 1000)
    found = 0
    with spark_session(master, confs, "kt analyze anomalies") as spark:
        df = analyze_anomalies(spark, scan, now, future_tolerance_ms)
        if to is not None:
            df = df.cache()
            found = df.count()
            write_result(df, to, fmt, mode)
        else:
            rows = [r.asDict() for r in df.toLocalIterator()]
            found = len(rows)
            if as_json:
                for r in rows:
                    emit_json(r)
            else:
                render_table(ANOMALY_COLUMNS, ([r[c] for c in ANOMALY_COLUMNS] for r in rows))
    if found:
        raise SystemExit(1)


@analyze.command()
@_common
@click.option("--key", "key_text", metavar="KEY", help="The key (its UTF-8 bytes).")
@click.option("--key-hex", metavar="HEX", help="The key as hex bytes.")
@click.option(
    "--key-regex", metavar="REGEX", help="Keys matching this regex (on the key as UTF-8)."
)
@click.option(
    "--decode",
    type=click.Choice(["utf8", "hex", "base64"]),
    default="utf8",
    show_default=True,
    help="How keys, values and header values are shown (utf8 escapes invalid bytes).",
)
def keys(
    paths: tuple[str, ...],
    master: str,
    confs: tuple[str, ...],
    topic: str | None,
    topic_regex: str | None,
    start_offset: int | None,
    end_offset: int | None,
    start_time: str | None,
    end_time: str | None,
    max_bytes_per_partition: int | None,
    as_json: bool,
    to: str | None,
    fmt: str,
    mode: str,
    key_text: str | None,
    key_hex: str | None,
    key_regex: str | None,
    decode: str,
) -> None:
    """Every record of one key (or of the keys matching a regex) across all partitions
    and segments, in topic, partition and offset order: the history of an entity.

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
    scan = make_scan(
        paths, topic, topic_regex, start_offset, end_offset, start_time, end_time,
        max_bytes_per_partition,
    )  # fmt: skip
    with spark_session(master, confs, "kt analyze keys") as spark:
        df = analyze_keys(spark, scan, key, key_regex)
        if to is not None:
            write_result(df, to, fmt, mode)
            return
        for_table = []
        for row in df.toLocalIterator():
            r = row.asDict(recursive=True)
            r["key"] = render_bytes(r["key"], decode)
            r["value"] = render_bytes(r["value"], decode)
            r["headers"] = [
                {"key": h["key"], "value": render_bytes(h["value"], decode)}
                for h in r["headers"] or []
            ]
            if as_json:
                emit_json(r)
            else:
                for_table.append(r)
    if not as_json:
        cols = [c for c in KEY_COLUMNS if c != "headers"]
        render_table(cols, ([r[c] for c in cols] for r in for_table))
