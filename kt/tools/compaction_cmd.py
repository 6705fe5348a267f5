"""`kt compaction estimate`: what compacting a partition would keep and drop, offline."""

from __future__ import annotations

import time
from datetime import UTC, datetime
from pathlib import Path

import click

from kt.storage.cleaner import estimate as estimate_cleaning
from kt.storage.errors import StorageError
from kt.storage.log_config import LogConfig
from kt.tools.console import emit_json, fail, handle_errors, plural, usage_error
from kt.tools.dump_log import parse_time

DEFAULT_DELETE_RETENTION_MS = LogConfig().delete_retention_ms


@click.group()
def compaction() -> None:
    """Log compaction (cleanup.policy=compact): predict what the log cleaner does.

    Works offline on a partition directory, ours or Apache Kafka's.
    """


@compaction.command()
@click.argument("path", type=click.Path(path_type=Path))
@click.option("--json", "as_json", is_flag=True, help="One JSON object.")
@click.option(
    "--now",
    "now_text",
    metavar="TIME",
    help="The cleaning time: milliseconds since the epoch or ISO-8601 (default: now). "
    "Decides which tombstones' delete horizons have passed.",
)
@click.option(
    "--delete-retention-ms",
    type=click.IntRange(min=0),
    default=DEFAULT_DELETE_RETENTION_MS,
    show_default=True,
    help="The topic's delete.retention.ms: how long tombstones stay after the first "
    "cleaning that keeps them.",
)
@click.option(
    "--min-compaction-lag-ms",
    type=click.IntRange(min=0),
    default=0,
    show_default=True,
    help="The topic's min.compaction.lag.ms: segments with newer records are not cleaned.",
)
@handle_errors
def estimate(
    path: Path,
    as_json: bool,
    now_text: str | None,
    delete_retention_ms: int,
    min_compaction_lag_ms: int,
) -> None:
    """Count what one cleaning of the partition directory PATH would keep and drop.

    Records and bytes, superseded records, tombstones kept and expired, records
    without a key (invalid in a compacted log, dropped), and the exact number of
    distinct keys.

    It runs the broker's own cleaning round (the same keep/drop decisions) without
    writing anything: everything below the active (last) segment is cleaned, as the
    broker's first cleaning of the log does with the high watermark at the log end.
    Nothing is read past the segments' valid data; the directory is never modified.

    \b
    Examples:
      kt compaction estimate /var/lib/kafka/data/__consumer_offsets-7
      kt compaction estimate --json --now 2026-01-01T00:00:00Z users-0 | jq .records_dropped
    """
    if not path.exists():
        usage_error(f"{path}: no such file or directory")
    if not path.is_dir():
        usage_error(f"{path}: not a partition directory")
    now = parse_time(now_text, "--now") if now_text is not None else int(time.time() * 1000)
    config = LogConfig(
        cleanup_policy="compact",
        delete_retention_ms=delete_retention_ms,
        min_compaction_lag_ms=min_compaction_lag_ms,
    )
    try:
        result = estimate_cleaning(path, config=config, now_ms=now)
    except StorageError as exc:
        if "no segments" in str(exc):
            usage_error(f"{path}: no segments (not a partition directory)")
        fail(str(exc))
    stats = result.stats
    plan = result.plan
    info = {
        "path": str(path),
        "now_ms": now,
        "delete_retention_ms": delete_retention_ms,
        "cleanable_start_offset": plan.log_start_offset,
        "cleanable_end_offset": result.end_offset,
        "active_segment_base_offset": plan.segments[-1].base_offset,
        **stats.to_dict(),
    }
    if as_json:
        emit_json(info)
        return
    click.echo(f"Partition {path}")
    click.echo(
        f"cleanable offsets [{plan.log_start_offset}, {result.end_offset}) in "
        f"{plural(stats.segments, 'segment')} (the active segment at "
        f"{plan.segments[-1].base_offset} is never cleaned)"
    )
    click.echo(
        f"records: {stats.records_read} read, {stats.records_kept} kept, "
        f"{stats.records_dropped} dropped"
    )
    click.echo(
        f"bytes: {stats.bytes_read} read, {stats.bytes_kept} kept, {stats.bytes_dropped} dropped"
    )
    click.echo(
        f"dropped: {stats.superseded_dropped} superseded, {stats.tombstones_dropped} expired "
        f"tombstones, {stats.keyless_dropped} without a key, {stats.discarded_dropped} "
        "aborted or expired markers"
    )
    horizon = ""
    if stats.max_delete_horizon_ms is not None:
        when = datetime.fromtimestamp(stats.max_delete_horizon_ms / 1000, UTC)
        horizon = f" (the last is dropped by a cleaning after {when.isoformat()})"
    click.echo(f"tombstones kept: {stats.tombstones_kept}{horizon}")
    click.echo(f"distinct keys: {stats.distinct_keys}")
