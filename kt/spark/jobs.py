"""The Spark jobs behind `kt analyze` and `kt export`, over the `kt-segments` source.

Each job takes a SparkSession (see `session`) and returns DataFrames or plain rows;
the commands in kt/tools render them. Everything a job reads goes through
`kt-segments` (the storage core's decoder); the compaction estimate runs the storage
core's own `cleaner.estimate` once per partition directory, in Spark tasks, so it is
exactly what `kt compaction estimate` prints.
"""

from __future__ import annotations

import os
import re
import sys
import tempfile
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kt.spark import require_pyspark

# Quiet Spark's JVM logging (the progress bar and errors stay; org.apache.spark set as
# the root keeps Spark from announcing its shell log level): a log4j2 config file
# written once per process and handed to the driver JVM.
_LOG4J = """\
rootLogger.level = error
rootLogger.appenderRef.stderr.ref = stderr
appender.console.type = Console
appender.console.name = stderr
appender.console.target = SYSTEM_ERR
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = %d{HH:mm:ss} %p %c{1}: %m%n%ex
logger.spark.name = org.apache.spark
logger.spark.level = error
logger.hadoop.name = org.apache.hadoop
logger.hadoop.level = error
logger.sparkproject.name = org.sparkproject
logger.sparkproject.level = error
"""


def _log4j_file() -> str:
    path = Path(tempfile.gettempdir()) / f"kt-spark-log4j2-{os.getuid()}.properties"
    if not path.exists() or path.read_text() != _LOG4J:
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(_LOG4J)
        os.replace(tmp, path)
    return str(path)


def session(
    master: str = "local[*]",
    conf: dict[str, str] | None = None,
    app_name: str = "kt",
    progress: bool | None = None,
) -> Any:
    """A SparkSession with the kt sources registered; quiet logs, console progress on
    a terminal (stderr) unless `progress` says otherwise."""
    require_pyspark()
    from pyspark.sql import SparkSession

    from kt.spark import register

    # The Python workers must be this interpreter (the one that has kt installed).
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    conf = dict(conf or {})
    if progress is None:
        progress = sys.stderr.isatty()
    java_opts = f"-Dlog4j2.configurationFile=file:{_log4j_file()}"
    extra = conf.get("spark.driver.extraJavaOptions")
    conf["spark.driver.extraJavaOptions"] = f"{extra} {java_opts}" if extra else java_opts
    defaults = {
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "true" if progress else "false",
        "spark.sql.shuffle.partitions": "16",
        "spark.sql.session.timeZone": "UTC",
    }
    for k, v in defaults.items():
        conf.setdefault(k, v)
    builder = SparkSession.builder.master(master).appName(app_name)
    for k, v in conf.items():
        builder = builder.config(k, v)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    register(spark)
    return spark


@dataclass(slots=True)
class Scan:
    """What to read: the `kt-segments` options shared by every job."""

    paths: list[str]
    topic: str | None = None
    topic_pattern: str | None = None
    start_offset: int | None = None
    end_offset: int | None = None
    start_time: int | None = None
    end_time: int | None = None
    resync: bool = True
    max_bytes_per_partition: int | None = None
    extra: dict[str, str] = field(default_factory=dict)

    def options(self, level: str = "record") -> dict[str, str]:
        """The source options of this scan."""
        opts = {"level": level, "resync": "true" if self.resync else "false"}
        for name, value in (
            ("topic", self.topic),
            ("topicPattern", self.topic_pattern),
            ("startingOffset", self.start_offset),
            ("endingOffset", self.end_offset),
            ("startingTimestamp", self.start_time),
            ("endingTimestamp", self.end_time),
            ("maxBytesPerPartition", self.max_bytes_per_partition),
        ):
            if value is not None:
                opts[name] = str(value)
        opts.update(self.extra)
        return opts


def read(spark: Any, scan: Scan, level: str = "record") -> Any:
    """The `kt-segments` DataFrame of a scan."""
    return spark.read.format("kt-segments").options(**scan.options(level)).load(scan.paths)


# --- kt analyze topics -----------------------------------------------------------

TOPIC_COLUMNS = [
    "topic",
    "partition",
    "records",
    "control_records",
    "bytes",
    "batches",
    "codecs",
    "first_offset",
    "last_offset",
    "first_timestamp",
    "last_timestamp",
    "producers",
    "distinct_keys",
    "tombstones",
    "crc_failures",
    "damaged_regions",
    "compaction_records_dropped",
    "compaction_bytes_dropped",
]


@dataclass(frozen=True, slots=True)
class CompactionParams:
    """The topic settings and time `kt compaction estimate` takes."""

    now_ms: int
    delete_retention_ms: int
    min_compaction_lag_ms: int = 0


def _estimate_partition(item: tuple[str, CompactionParams]) -> dict[str, Any]:
    """Runs in a Spark task: the storage core's cleaning estimate of one directory."""
    from kt.storage.cleaner import estimate
    from kt.storage.log_config import LogConfig

    path, params = item
    config = LogConfig(
        cleanup_policy="compact",
        delete_retention_ms=params.delete_retention_ms,
        min_compaction_lag_ms=params.min_compaction_lag_ms,
    )
    try:
        result = estimate(path, config=config, now_ms=params.now_ms)
    except Exception as exc:  # reported in the row, never fails the job
        return {"path": path, "error": str(exc)}
    out = result.stats.to_dict()
    out["path"] = path
    out["cleanable_end_offset"] = result.end_offset
    return out


def whole_partition_dirs(scan: Scan) -> dict[tuple[str | None, int | None], str]:
    """Partition directories whose every live segment the scan covers (only these get
    a compaction estimate: it is a property of the whole log), by (topic, partition)."""
    from kt.spark.segments_source import find_segments, parse_options
    from kt.storage.log_files import list_segments

    opts = parse_options({"paths": ",".join(scan.paths), **scan.options()})
    by_dir: dict[Path, set[str]] = {}
    keys: dict[Path, tuple[str | None, int | None]] = {}
    for seg in find_segments(opts):
        d = Path(seg.path).parent
        by_dir.setdefault(d, set()).add(seg.path)
        keys[d] = (seg.topic, seg.partition)
    out = {}
    for d, covered in by_dir.items():
        live = {str(s.log) for s in list_segments(d) if s.log is not None}
        if live == covered and keys[d][0] is not None:
            out[keys[d]] = str(d)
    return out


def analyze_topics(
    spark: Any, scan: Scan, compaction: CompactionParams | None
) -> list[dict[str, Any]]:
    """Per topic and partition: counts, offsets, timestamps, producers, keys,
    tombstones, damage, and (for whole partition directories) the compaction estimate."""
    from pyspark.sql import functions as F

    batches = read(spark, scan, "batch")
    b = batches.groupBy("topic", "partition").agg(
        F.count(F.when(F.col("error").isNull(), 1)).alias("batches"),
        F.coalesce(F.sum("size"), F.lit(0)).alias("bytes"),
        F.array_sort(F.collect_set("codec")).alias("codecs"),
        F.count(F.when(~F.col("crc_valid"), 1)).alias("crc_failures"),
        F.count(F.when(F.col("error").isNotNull(), 1)).alias("damaged_regions"),
    )
    recs = read(spark, scan, "record").where(F.col("error").isNull())
    data = ~F.col("is_control")
    r = recs.groupBy("topic", "partition").agg(
        F.count(F.when(data, 1)).alias("records"),
        F.count(F.when(F.col("is_control"), 1)).alias("control_records"),
        F.min("offset").alias("first_offset"),
        F.max("offset").alias("last_offset"),
        F.min(F.when(F.col("timestamp") >= 0, F.col("timestamp"))).alias("first_timestamp"),
        F.max("timestamp").alias("last_timestamp"),
        F.count_distinct(F.when(F.col("producer_id") >= 0, F.col("producer_id"))).alias(
            "producers"
        ),
        F.count_distinct(F.when(data, F.col("key"))).alias("distinct_keys"),
        F.count(F.when(data & F.col("key").isNotNull() & F.col("value").isNull(), 1)).alias(
            "tombstones"
        ),
    )
    joined = b.join(r, ["topic", "partition"], "full_outer")
    rows = [row.asDict() for row in joined.collect()]
    estimates: dict[tuple[str | None, int | None], dict[str, Any]] = {}
    if compaction is not None:
        dirs = whole_partition_dirs(scan)
        if dirs:
            items = [(path, compaction) for path in dirs.values()]
            rdd = spark.sparkContext.parallelize(items, len(items))
            by_path = {e["path"]: e for e in rdd.map(_estimate_partition).collect()}
            estimates = {key: by_path[path] for key, path in dirs.items()}
    out = []
    for row in rows:
        est = estimates.get((row["topic"], row["partition"]))
        row["compaction"] = est
        ok = est is not None and "error" not in est
        row["compaction_records_dropped"] = est["records_dropped"] if ok else None
        row["compaction_bytes_dropped"] = est["bytes_dropped"] if ok else None
        for k in ("records", "control_records", "producers", "distinct_keys", "tombstones"):
            row[k] = row.get(k) or 0
        out.append({k: row.get(k) for k in [*TOPIC_COLUMNS, "compaction"]})
    out.sort(key=lambda r: (r["topic"] or "", r["partition"] if r["partition"] is not None else -1))
    return out


# --- kt analyze anomalies ----------------------------------------------------------

ANOMALY_COLUMNS = ["kind", "topic", "partition", "segment", "position", "offset", "detail"]

ANOMALY_KINDS = {
    "damaged-region": "bytes that hold no valid batch (torn write, corruption)",
    "crc-mismatch": "a batch whose stored CRC does not match its bytes",
    "offset-overlap": "a batch starting at or below the previous batch's last offset",
    "offset-gap": "offsets missing between the last batch of a segment and the next segment",
    "segment-base-mismatch": "a segment's first batch starts below the base offset in its name",
    "timestamp-out-of-order": "a record older than the record before it",
    "timestamp-in-future": "a record timestamp later than now (plus the tolerance)",
    "duplicate-sequence": "a producer's sequence numbers written more than once",
    "marker-without-transaction": "a COMMIT/ABORT marker with no transactional data before it",
    "open-transaction": "transactional data with no marker after it (a hanging transaction)",
}


def analyze_anomalies(spark: Any, scan: Scan, now_ms: int, future_tolerance_ms: int) -> Any:
    """A DataFrame of ANOMALY_COLUMNS, one row per anomaly, in partition and offset order."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    def shape(df: Any, kind: str, offset: Any, detail: Any) -> Any:
        return df.select(
            F.lit(kind).alias("kind"),
            "topic",
            "partition",
            "segment",
            "position",
            offset.cast("long").alias("offset"),
            detail.alias("detail"),
        )

    batches = read(spark, scan, "batch").cache()
    parts: list[Any] = []
    parts.append(
        shape(
            batches.where(F.col("error").isNotNull()),
            "damaged-region",
            F.lit(None),
            F.format_string("%d bytes: %s", F.col("error_bytes"), F.col("error")),
        )
    )
    good = batches.where(F.col("error").isNull())
    parts.append(
        shape(
            good.where(~F.col("crc_valid")),
            "crc-mismatch",
            F.col("base_offset"),
            F.format_string(
                "batch of %d bytes, offsets %d..%d", "size", "base_offset", "last_offset"
            ),
        )
    )
    by_part = Window.partitionBy("topic", "partition").orderBy("segment", "position")
    seq = (
        good.withColumn("prev_last", F.lag("last_offset").over(by_part))
        .withColumn("prev_segment", F.lag("segment").over(by_part))
        .withColumn(
            "seg_row", F.row_number().over(by_part.partitionBy("topic", "partition", "segment"))
        )
    )
    parts.append(
        shape(
            seq.where(F.col("base_offset") <= F.col("prev_last")),
            "offset-overlap",
            F.col("base_offset"),
            F.format_string(
                "batch %d..%d starts at or below the previous batch's last offset %d",
                "base_offset",
                "last_offset",
                "prev_last",
            ),
        )
    )
    parts.append(
        shape(
            seq.where(
                (F.col("segment") != F.col("prev_segment"))
                & (F.col("base_offset") > F.col("prev_last") + 1)
            ),
            "offset-gap",
            F.col("prev_last") + 1,
            F.format_string(
                "offsets %d..%d missing between segments %s and %s",
                F.col("prev_last") + 1,
                F.col("base_offset") - 1,
                "prev_segment",
                "segment",
            ),
        )
    )
    seg_base = F.substring("segment", 1, 20).cast("long")
    parts.append(
        shape(
            seq.where((F.col("seg_row") == 1) & (F.col("base_offset") < seg_base)),
            "segment-base-mismatch",
            F.col("base_offset"),
            F.format_string("first batch at offset %d, below the segment's base", "base_offset"),
        )
    )
    txn = good.where(F.col("is_transactional") & (F.col("producer_id") >= 0))
    by_pid = Window.partitionBy("topic", "partition", "producer_id").orderBy("segment", "position")
    txn = txn.withColumn("prev_control", F.lag("is_control").over(by_pid)).withColumn(
        "next_exists", F.lead("position").over(by_pid).isNotNull()
    )
    parts.append(
        shape(
            txn.where(
                F.col("is_control") & (F.col("prev_control").isNull() | F.col("prev_control"))
            ),
            "marker-without-transaction",
            F.col("base_offset"),
            F.format_string("producer %d epoch %d", "producer_id", "producer_epoch"),
        )
    )
    parts.append(
        shape(
            txn.where(~F.col("is_control") & ~F.col("next_exists")),
            "open-transaction",
            F.col("base_offset"),
            F.format_string(
                "producer %d epoch %d: no COMMIT/ABORT after offset %d",
                "producer_id",
                "producer_epoch",
                "last_offset",
            ),
        )
    )
    recs = read(spark, scan, "record").where(F.col("error").isNull() & ~F.col("is_control"))
    by_offset = Window.partitionBy("topic", "partition").orderBy("offset")
    ts = recs.where(F.col("timestamp") >= 0).withColumn(
        "prev_ts", F.lag("timestamp").over(by_offset)
    )
    parts.append(
        shape(
            ts.where(F.col("timestamp") < F.col("prev_ts")),
            "timestamp-out-of-order",
            F.col("offset"),
            F.format_string(
                "timestamp %d is %d ms before the previous record's %d",
                "timestamp",
                F.col("prev_ts") - F.col("timestamp"),
                "prev_ts",
            ),
        )
    )
    parts.append(
        shape(
            recs.where(F.col("timestamp") > F.lit(now_ms + future_tolerance_ms)),
            "timestamp-in-future",
            F.col("offset"),
            F.format_string(
                "timestamp %d is %d ms after now", "timestamp", F.col("timestamp") - F.lit(now_ms)
            ),
        )
    )
    seqs = recs.where((F.col("producer_id") >= 0) & (F.col("sequence") >= 0))
    dup = (
        seqs.groupBy("topic", "partition", "producer_id", "producer_epoch", "sequence")
        .agg(
            F.count("*").alias("n"),
            F.sort_array(F.collect_list("offset")).alias("offsets"),
            F.min("segment").alias("segment"),
            F.min("position").alias("position"),
        )
        .where(F.col("n") > 1)
        .groupBy("topic", "partition", "producer_id", "producer_epoch")
        .agg(
            F.count("*").alias("dups"),
            F.min("sequence").alias("lo"),
            F.max("sequence").alias("hi"),
            F.min_by("offsets", "sequence").alias("first"),
            F.min("segment").alias("segment"),
            F.min("position").alias("position"),
        )
    )
    parts.append(
        shape(
            dup,
            "duplicate-sequence",
            F.element_at("first", 2),
            F.format_string(
                "producer %d epoch %d: %d sequences written more than once (%d..%d); "
                "sequence %d at offsets %s",
                "producer_id",
                "producer_epoch",
                "dups",
                "lo",
                "hi",
                "lo",
                F.array_join(F.col("first").cast("array<string>"), ","),
            ),
        )
    )
    result = parts[0]
    for p in parts[1:]:
        result = result.unionByName(p)
    return result.orderBy("topic", "partition", F.coalesce("offset", F.lit(-1)), "kind")


# --- kt analyze keys ----------------------------------------------------------------

KEY_COLUMNS = [
    "topic",
    "partition",
    "offset",
    "timestamp",
    "key",
    "value",
    "headers",
    "is_control",
    "segment",
    "position",
]


def analyze_keys(spark: Any, scan: Scan, key: bytes | None, key_regex: str | None) -> Any:
    """Every record of a key (or of keys matching a regex, on the key as UTF-8) in
    topic, partition and offset order."""
    from pyspark.sql import functions as F

    recs = read(spark, scan, "record").where(F.col("error").isNull())
    if key is not None:
        recs = recs.where(F.col("key") == F.lit(bytearray(key)))
    if key_regex is not None:
        re.compile(key_regex)
        recs = recs.where(F.col("key").cast("string").rlike(key_regex))
    return recs.select(*KEY_COLUMNS).orderBy("topic", "partition", "offset")


# --- kt export ----------------------------------------------------------------------

EXPORT_FORMATS = ("parquet", "json", "csv")


def decode_column(col: Any, decode: str) -> Any:
    """A binary column as text: utf8, hex or base64."""
    from pyspark.sql import functions as F

    if decode == "utf8":
        return col.cast("string")
    if decode == "hex":
        return F.lower(F.hex(col))
    return F.base64(col)


def textual(df: Any, decode: str) -> Any:
    """The record columns as text (JSON/CSV): binary decoded, headers as JSON."""
    from pyspark.sql import functions as F

    out = df
    for name in ("key", "value"):
        if name in df.columns:
            out = out.withColumn(name, decode_column(F.col(name), decode))
    if "headers" in df.columns:
        out = out.withColumn(
            "headers",
            F.to_json(
                F.transform(
                    "headers",
                    lambda h: F.struct(
                        h["key"].alias("key"), decode_column(h["value"], decode).alias("value")
                    ),
                )
            ),
        )
    return out


def write(
    df: Any,
    to: str,
    fmt: str,
    *,
    mode: str = "errorifexists",
    decode: str = "base64",
    partition_by: Iterable[str] = (),
) -> None:
    """Write a DataFrame as parquet (binary kept), JSON or CSV (binary decoded)."""
    if fmt != "parquet":
        df = textual(df, decode)
    writer = df.write.mode(mode)
    cols = list(partition_by)
    if cols:
        writer = writer.partitionBy(*cols)
    if fmt == "csv":
        writer = writer.option("header", "true")
    writer.format(fmt).save(to)
