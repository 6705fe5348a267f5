"""`kt export`: the records of log segments as a dataset (Parquet, JSON or CSV) on Spark."""

from __future__ import annotations

import tempfile

import click

from kt.tools.analyze_cmd import make_scan, spark_options, spark_session
from kt.tools.console import emit_json, handle_errors


@click.command()
@spark_options
@click.option(
    "--to", "to", required=True, metavar="DIR", help="The output directory (a Spark dataset)."
)
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["parquet", "json", "csv"]),
    default="parquet",
    show_default=True,
    help="parquet keeps keys and values as binary; json and csv decode them (--decode).",
)
@click.option(
    "--decode",
    type=click.Choice(["base64", "utf8", "hex"]),
    default="base64",
    show_default=True,
    help="Keys, values and header values in json/csv: base64 (exact), utf8, or hex.",
)
@click.option(
    "--mode",
    type=click.Choice(["error", "overwrite", "append"]),
    default="error",
    show_default=True,
    help="When DIR exists: fail, replace it, or add to it.",
)
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
@click.option("--json", "as_json", is_flag=True, help="The summary as one JSON object.")
@handle_errors
def export(
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
    to: str,
    fmt: str,
    decode: str,
    mode: str,
    partition_by: str,
    resync: bool,
    as_json: bool,
) -> None:
    """Export the records of PATHS (log directories, partition directories, segment
    files or globs) as a dataset for SQL: one row per record with the `kt-segments`
    columns (topic, partition, offset, timestamp, key, value, headers, producer
    fields, batch fields, segment, position, crc_valid, error).

    A damaged segment fails the export (exit 1) unless --resync.

    \b
    Examples:
      kt export /var/lib/kafka/data --to /tmp/kafka.parquet
      kt export --topic orders --start-time 2026-01-01T00:00:00Z --format json \\
          --decode utf8 --to /tmp/orders /var/lib/kafka/data
      spark-sql -e "SELECT topic, count(*) FROM parquet.\\`/tmp/kafka.parquet\\` GROUP BY 1"
    """
    from kt.spark.jobs import read, write
    from kt.spark.segments_source import read_counters

    scan = make_scan(
        paths, topic, topic_regex, start_offset, end_offset, start_time, end_time,
        max_bytes_per_partition, resync=resync,
    )  # fmt: skip
    with tempfile.TemporaryDirectory(prefix="kt-export-") as metrics:
        scan.extra["metricsDir"] = metrics
        with spark_session(master, confs, "kt export") as spark:
            df = read(spark, scan, "record")
            cols = [] if partition_by == "none" else partition_by.split(",")
            write(
                df,
                to,
                fmt,
                mode="errorifexists" if mode == "error" else mode,
                decode=decode,
                partition_by=cols,
            )
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
            f"exported {summary['rows']} rows ({summary['batches']} batches, "
            f"{summary['bytes_read']} bytes read) to {to} as {fmt}"
        )
