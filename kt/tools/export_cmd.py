"""`kt export`: the records of log segments as a dataset (Parquet, JSON or CSV) on Spark."""

from __future__ import annotations

import tempfile
from typing import TYPE_CHECKING, Any

import click

from kt.tools.console import emit_json, handle_errors, plural
from kt.tools.spark_job import (
    SparkArgs,
    decode_option,
    format_option,
    json_option,
    make_scan,
    mode_option,
    run_job,
    spark_options,
    to_option,
    write_dataset,
)

if TYPE_CHECKING:
    from kt.spark.jobs import Scan


@click.command()
@spark_options
@to_option("The output directory (a Spark dataset).", required=True)
@format_option("parquet keeps keys and values as binary; json and csv decode them (--decode).")
@decode_option(
    ["base64", "utf8", "hex"],
    "Keys, values and header values in json/csv: base64 (exact), utf8, or hex.",
)
@mode_option("When DIR exists: fail, replace it, or add to it.")
@click.option(
    "--partition-by",
    type=click.Choice(["none", "topic", "topic,partition"]),
    default="none",
    show_default=True,
    help="Lay the dataset out in topic=/partition= directories.",
)
@click.option(
    "--resync",
    is_flag=True,
    help="Skip damaged regions (exported as rows with an error) instead of failing.",
)
@json_option("The summary as one JSON object.")
@handle_errors
def export(
    spark_args: SparkArgs,
    to: str,
    fmt: str,
    decode: str,
    mode: str,
    partition_by: str,
    resync: bool,
    as_json: bool,
) -> None:
    """Export the records of log segments as a dataset for SQL.

    PATHS are log directories, partition directories, segment files or globs. One
    row per record with the `kt-segments` columns (topic, partition, offset,
    timestamp, key, value, headers, producer fields, batch fields, segment,
    position, crc_valid, error).

    A damaged segment fails the export (exit 1) unless --resync.

    \b
    Examples:
      kt export /var/lib/kafka/data --to /tmp/kafka.parquet
      kt export --topic orders --start-time 2026-01-01T00:00:00Z --format json \\
          --decode utf8 --to /tmp/orders /var/lib/kafka/data
      spark-sql -e "SELECT topic, count(*) FROM parquet.\\`/tmp/kafka.parquet\\` GROUP BY 1"
    """
    from kt.spark.jobs import read
    from kt.spark.segments_source import read_counters

    scan = make_scan(spark_args, resync=resync)
    cols = [] if partition_by == "none" else partition_by.split(",")

    def job(spark: Any, scan: Scan) -> None:
        write_dataset(read(spark, scan, "record"), to, fmt, mode, decode=decode, partition_by=cols)

    with tempfile.TemporaryDirectory(prefix="kt-export-") as metrics:
        scan.extra["metricsDir"] = metrics
        run_job(spark_args, scan, "kt export", job)
        counters = read_counters(metrics)
    summary = {
        "to": to,
        "format": fmt,
        "rows": counters.get("rows", 0),
        "damaged_regions": counters.get("damaged_regions", 0),
        "bytes_read": counters.get("bytes_read", 0),
        "batches": counters.get("batches_scanned", 0),
    }
    if as_json:
        emit_json(summary)
    else:
        click.echo(
            f"exported {plural(summary['rows'], 'row')} ({plural(summary['batches'], 'batch')}, "
            f"{plural(summary['bytes_read'], 'byte')} read) to {to} as {fmt}"
        )
