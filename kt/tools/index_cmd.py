"""`kt index verify|rebuild`: check segment indexes against their logs, and regenerate them."""

from __future__ import annotations

from pathlib import Path

import click

from kt.storage.errors import StorageError
from kt.storage.index_check import (
    IndexProblem,
    apply_rebuild,
    find_segment_logs,
    log_dir_of,
    plan_rebuild,
    verify_segment,
)
from kt.storage.log_files import is_log_dir_locked, list_segments
from kt.storage.segment import DEFAULT_INDEX_INTERVAL_BYTES
from kt.tools.console import (
    EXIT_PROBLEM,
    emit_json,
    fail,
    handle_errors,
    plural,
    usage_error,
)


@click.group()
def index() -> None:
    """Check and repair offset, time and transaction indexes (.index, .timeindex, .txnindex).

    Works offline on any Kafka log directory, ours or Apache Kafka's.
    """


def _segments(paths: tuple[str, ...]) -> list[Path]:
    try:
        return find_segment_logs(paths)
    except StorageError as exc:
        usage_error(str(exc))


@index.command()
@click.argument("paths", nargs=-1, required=True, metavar="PATH...")
@click.option("--json", "as_json", is_flag=True, help="One JSON object per segment (NDJSON).")
@click.option("--quiet", "-q", is_flag=True, help="Print only the problems.")
@handle_errors
def verify(paths: tuple[str, ...], as_json: bool, quiet: bool) -> None:
    """Check every index against its log.

    Like the broker's sanity check and kafka-dump-log.sh --verify-index-only, but
    reporting every problem.

    PATH may be a segment file (.log or one of its indexes), a partition
    directory or a whole log directory. Problems found: an offset-index entry that
    would make a lookup miss records (pointing into the middle of a batch, at a
    batch that starts after the indexed offset, or after a record at or beyond
    it), an indexed offset beyond the log, offsets or timestamps that do not
    increase, a file size that is not a whole number of entries, an entry beyond
    the end of the log, and an invalid log tail. Exit 1 when any problem is found.

    Not problems: a missing .index or .timeindex is a WARNING (Kafka rebuilds it
    when it loads the segment); an offset-index entry whose offset is past the
    last offset of the batch it points at, while no later record lies before it,
    is a NOTE (Kafka writes such entries for multi-batch appends, as followers do;
    lookups through them are correct; --verify-index-only of dump-log-segments
    lists them as mismatches, like Kafka's).

    \b
    Examples:
      kt index verify /var/lib/kafka/data
      kt index verify /var/lib/kafka/data/orders-3
      kt index verify --json 00000000000000000000.index | jq .
    """
    logs = _segments(paths)
    bad = warned = 0
    for log in logs:
        try:
            check = verify_segment(log)
        except StorageError as exc:
            fail(str(exc))
        if not check.ok:
            bad += 1
        if check.warnings:
            warned += 1
        if as_json:
            emit_json(
                {
                    "segment": str(log),
                    "ok": check.ok,
                    "batches": check.batches,
                    "offset_index_entries": check.offset_entries,
                    "time_index_entries": check.time_entries,
                    "txn_index_entries": check.txn_entries,
                    "problems": [_finding_json(p) for p in check.problems],
                    "warnings": [_finding_json(p) for p in check.warnings],
                    "notes": [_finding_json(p) for p in check.notes],
                }
            )
            continue
        if check.ok:
            if not quiet:
                click.echo(
                    f"OK {log} ({plural(check.batches, 'batch')}, {check.offset_entries} "
                    f"offset, {check.time_entries} time, {check.txn_entries} txn index "
                    f"{'entry' if check.txn_entries == 1 else 'entries'})"
                )
        else:
            click.echo(f"PROBLEMS {log}")
            for p in check.problems:
                click.echo(f"  {p}")
        if quiet:
            continue
        for p in check.warnings:
            click.echo(f"  WARNING {p}")
        if check.notes:
            first = check.notes[0]
            click.echo(
                f"  NOTE {plural(len(check.notes), 'offset-index entry', 'offset-index entries')}"
                f" of multi-batch appends (as followers write them; lookups are correct), "
                f"the first: {first}"
            )
    if not as_json and not quiet:
        click.echo(
            f"{plural(len(logs), 'segment')} checked, {bad} with problems, {warned} with warnings"
        )
    if bad:
        raise SystemExit(EXIT_PROBLEM)


def _finding_json(p: IndexProblem) -> dict[str, object]:
    return {
        "file": str(p.path),
        "index": p.kind,
        "entry": p.entry,
        "index_offset": p.index_offset,
        "log_offset": p.log_offset,
        "message": p.message,
    }


@index.command()
@click.argument("paths", nargs=-1, required=True, metavar="PATH...")
@click.option("--dry-run", is_flag=True, help="Show what would change; write nothing.")
@click.option(
    "--force",
    is_flag=True,
    help="Rebuild even while a running broker holds the log directory's .lock.",
)
@click.option(
    "--index-interval-bytes",
    type=click.IntRange(min=1),
    default=DEFAULT_INDEX_INTERVAL_BYTES,
    show_default=True,
    help="Bytes of log between index entries (the topic's index.interval.bytes).",
)
@click.option("--json", "as_json", is_flag=True, help="One JSON object per segment (NDJSON).")
@handle_errors
def rebuild(
    paths: tuple[str, ...], dry_run: bool, force: bool, index_interval_bytes: int, as_json: bool
) -> None:
    """Regenerate the indexes of segments from their .log files.

    Writes .index and .timeindex (and .txnindex from the COMMIT/ABORT markers)
    exactly as the broker's recovery would.

    Each changed file is replaced atomically (temp file, fsync, rename, fsync the
    directory); unchanged files are left alone. The .log is never modified: an
    invalid tail is reported and indexed up to its start. Refuses while a running
    broker holds the log directory's .lock, unless --force.

    \b
    Examples:
      kt index rebuild --dry-run /var/lib/kafka/data/orders-3
      kt index rebuild /var/lib/kafka/data/orders-3/00000000000000120000.log
    """
    logs = _segments(paths)
    if not force and not dry_run:
        for log_dir in sorted({log_dir_of(log) for log in logs}):
            if is_log_dir_locked(log_dir):
                fail(
                    f"{log_dir} is locked by a running broker (its .lock is held); stop the "
                    "broker or pass --force"
                )
    for log in logs:
        prior = [
            s.log
            for s in list_segments(log.parent)
            if s.log is not None and s.base_offset < _base(log)
        ]
        plan = plan_rebuild(log, index_interval_bytes=index_interval_bytes, prior_segments=prior)
        written = [] if dry_run else apply_rebuild(plan)
        if as_json:
            emit_json(
                {
                    "segment": str(log),
                    "dry_run": dry_run,
                    "changed": plan.changed,
                    "written": [str(p) for p in written],
                    "offset_index_entries": len(plan.offset_entries),
                    "time_index_entries": len(plan.time_entries),
                    "txn_index_entries": len(plan.txn_entries),
                    "invalid_bytes": plan.invalid_bytes,
                    "invalid_reason": plan.invalid_reason,
                }
            )
            continue
        if plan.changed:
            for name in plan.changed:
                old, new = plan.files[name]
                if old is None:
                    verb = "would create" if dry_run else "created"
                    click.echo(f"{log.parent / name}: {verb} ({len(new)} bytes)")
                else:
                    verb = "would rewrite" if dry_run else "rewrote"
                    click.echo(
                        f"{log.parent / name}: {verb} ({len(old)} bytes -> {len(new)} bytes)"
                    )
        else:
            click.echo(f"{log}: indexes already match the log")
        if plan.invalid_bytes:
            click.echo(
                f"{log}: {plan.invalid_bytes} invalid bytes from position {plan.valid_bytes} "
                f"({plan.invalid_reason}); indexed up to there, the log was not changed",
                err=True,
            )


def _base(log: Path) -> int:
    return int(log.name.split(".")[0])
