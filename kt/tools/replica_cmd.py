"""`kt replica diff DIR...`: compare the replicas of each partition offline, from the
log directories of several brokers (the comparison lives in kt.storage.replica_diff)."""

from __future__ import annotations

import os
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import click

from kt.storage.checkpoint import TopicPartition
from kt.storage.errors import WrongFileKindError
from kt.storage.log_files import PathKind, classify_path
from kt.storage.replica_diff import (
    BatchSummary,
    OffsetRange,
    PartitionDiff,
    Replica,
    ReplicaComparison,
    compare_partition,
    find_replicas,
    replica_dir_kind,
)
from kt.tools.console import EXIT_PROBLEM, emit_json, handle_errors, render_table, usage_error


@click.group("replica")
def replica() -> None:
    """Offline forensics across the replicas of a partition.

    \b
    Examples:
      kt replica diff /data/broker1 /data/broker2 /data/broker3
      kt replica diff /b1/orders-0 /b2/orders-0 --reference /b2/orders-0
    """


def _same(a: Path, b: Path) -> bool:
    return os.path.realpath(a) == os.path.realpath(b)


def _ts(ms: int) -> str:
    if ms < 0:
        return "-"
    try:
        return datetime.fromtimestamp(ms / 1000, UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")[:-4] + "Z"
    except (OverflowError, OSError, ValueError):
        return str(ms)


def _name(r: Replica) -> str:
    return f"broker {r.broker_id} ({r.label})" if r.broker_id is not None else r.label


def _opt(value: int | None) -> str:
    return "-" if value is None else str(value)


def _records(n: int | None) -> str:
    return "? records" if n is None else f"{n} record{'s' if n != 1 else ''}"


def _epochs(epochs: tuple[int, ...]) -> str:
    return ("epoch " if len(epochs) == 1 else "epochs ") + ",".join(map(str, epochs))


def _range_text(r: OffsetRange) -> str:
    where = ", ".join(f"{Path(f).name} bytes {a}..{b}" for f, a, b in r.locations)
    offsets = (
        f"offset {r.first_offset}"
        if r.first_offset == r.last_offset
        else f"offsets {r.first_offset}..{r.last_offset}"
    )
    return (
        f"{offsets} ({_records(r.records)} in {r.batches} "
        f"batch{'es' if r.batches != 1 else ''}, {_epochs(r.epochs)}, "
        f"{_ts(r.min_timestamp)}..{_ts(r.max_timestamp)}) in {where}"
    )


def _verdict_line(d: PartitionDiff) -> str:
    tp = str(d.tp)
    if d.reference is None:
        return f"{tp}: SINGLE REPLICA on {_name(d.replicas[0].replica)}: nothing to compare"
    ref = d.reference
    others = [c for c in d.replicas if not c.is_reference]
    n = len(d.replicas)
    verdict = d.verdict
    if verdict == "identical":
        held = (
            f"offsets {ref.log_start_offset}..{ref.log_end_offset - 1}"
            if ref.log_end_offset > ref.log_start_offset
            else "empty"
        )
        line = f"{tp}: IDENTICAL on {n} replicas ({held}, log end {ref.log_end_offset})"
    elif verdict == "lagging":
        behind = ", ".join(
            f"{_name(c.replica)} {ref.log_end_offset - c.replica.log_end_offset} behind"
            for c in others
            if c.state == "lagging"
        )
        line = f"{tp}: OK, followers lag the reference {_name(ref)}: {behind}"
    elif verdict == "diverged-uncommitted":
        line = (
            f"{tp}: DIVERGED ABOVE THE HIGH WATERMARK at offset {d.diverges_at}: uncommitted "
            f"tails differ from the reference {_name(ref)} (Kafka truncates them)"
        )
    else:
        lost = [c for c in others if c.acknowledged_lost]
        holders = ", ".join(_name(c.replica) for c in lost)
        ranges = sorted({rng for c in lost for rng in c.acknowledged_lost})
        shown = ", ".join(f"{a}..{b}" for a, b in ranges)
        line = f"{tp}: DIVERGED BELOW THE HIGH WATERMARK at offset {d.diverges_at}: "
        if ranges:
            line += (
                f"acknowledged offsets {shown} are not in the reference {_name(ref)}; "
                f"still on {holders}"
            )
        else:
            line += f"committed batches differ from the reference {_name(ref)}"
    if d.damaged:
        line += "; DAMAGED replicas"
    return line


def _render(diffs: list[PartitionDiff]) -> None:
    for d in diffs:
        click.echo(_verdict_line(d))
        rows = []
        for c in d.replicas:
            r = c.replica
            rows.append(
                [
                    _name(r),
                    r.log_start_offset,
                    r.log_end_offset,
                    _opt(r.high_watermark),
                    _opt(r.latest_epoch if r.latest_epoch >= 0 else None),
                    _opt(c.diverges_at),
                    c.state + (" (committed)" if c.committed else ""),
                ]
            )
        if d.reference is not None:
            render_table(
                ["REPLICA", "LOG-START", "LOG-END", "HW", "EPOCH", "DIVERGES-AT", "STATE"], rows
            )
        for c in d.replicas:
            _render_details(c, d.reference)
        for note in d.notes:
            click.echo(f"  note: {note}")
    if len(diffs) > 1:
        bad = sum(1 for d in diffs if not d.ok)
        click.echo(f"{len(diffs)} partitions, {bad} with problems")


def _render_details(c: ReplicaComparison, ref: Replica | None) -> None:
    r = c.replica
    name = _name(r)
    epochs = " ".join(f"{e.epoch}@{e.start_offset}" for e in r.leader_epochs or []) or "-"
    if r.leader_epochs is None:
        epochs = "no leader-epoch-checkpoint"
    click.echo(f"  {name}: {r.path}; leader epochs {epochs}")
    for problem in r.problems:
        click.echo(f"    DAMAGED {problem}")
    if c.is_reference or ref is None:
        return
    if c.diverges_at is not None:
        hw = r.high_watermark
        lost = ", ".join(f"{a}..{b}" for a, b in c.acknowledged_lost)
        if c.committed and hw is None:
            why = "and no high watermark was recorded: counted as committed"
        elif c.committed and lost:
            why = (
                f"below its high watermark {hw}: acknowledged offsets {lost} are not in "
                "the reference"
            )
        elif c.committed:
            why = f"below its high watermark {hw}: committed batches differ"
        else:
            why = f"at or above its high watermark {hw}: an uncommitted tail"
        click.echo(f"    diverges from the reference at offset {c.diverges_at}, {why}")
    for rng in c.extra_ranges:
        click.echo(f"    only here: {_range_text(rng)}")
    for rng in c.missing_ranges:
        click.echo(f"    only on the reference: {_range_text(rng)}")
    if c.state == "lagging":
        n = ref.log_end_offset - r.log_end_offset
        click.echo(f"    lags the reference by {n} offset{'s' if n != 1 else ''}")
    if c.epoch_truncation_offset is not None:
        click.echo(
            f"    Kafka's leader-epoch truncation would cut this log at offset "
            f"{c.epoch_truncation_offset}"
        )
    if c.epoch_history_differs_at is not None:
        click.echo(
            f"    leader-epoch history differs from the reference's from epoch "
            f"{c.epoch_history_differs_at}"
        )


def _batch_json(b: BatchSummary) -> dict[str, Any]:
    return {
        "base_offset": b.base_offset,
        "last_offset": b.last_offset,
        "partition_leader_epoch": b.epoch,
        "crc": b.crc,
        "records": b.records,
        "first_timestamp": b.first_timestamp,
        "max_timestamp": b.max_timestamp,
        "file": b.file,
        "position": b.position,
        "size": b.size,
    }


def _range_json(r: OffsetRange) -> dict[str, Any]:
    return {
        "first_offset": r.first_offset,
        "last_offset": r.last_offset,
        "batches": r.batches,
        "records": r.records,
        "epochs": list(r.epochs),
        "min_timestamp": r.min_timestamp,
        "max_timestamp": r.max_timestamp,
        "locations": [{"file": f, "start": a, "end": b} for f, a, b in r.locations],
    }


def _diff_json(d: PartitionDiff) -> dict[str, Any]:
    return {
        "topic": d.tp.topic,
        "partition": d.tp.partition,
        "verdict": d.verdict,
        "ok": d.ok,
        "damaged": d.damaged,
        "reference": d.reference.path if d.reference is not None else None,
        "diverges_at": d.diverges_at,
        "common_high_watermark": d.common_high_watermark,
        "replicas": [
            {
                "dir": c.replica.label,
                "path": c.replica.path,
                "broker_id": c.replica.broker_id,
                "state": c.state,
                "log_start_offset": c.replica.log_start_offset,
                "log_end_offset": c.replica.log_end_offset,
                "high_watermark": c.replica.high_watermark,
                "latest_leader_epoch": c.replica.latest_epoch,
                "leader_epochs": None
                if c.replica.leader_epochs is None
                else [[e.epoch, e.start_offset] for e in c.replica.leader_epochs],
                "batches": len(c.replica.batches),
                "compared_from": None if c.is_reference else c.compared_from,
                "diverges_at": c.diverges_at,
                "committed": c.committed,
                "acknowledged_lost": [list(r) for r in c.acknowledged_lost],
                "only_here": [_range_json(r) for r in c.extra_ranges],
                "only_here_batches": [_batch_json(b) for b in c.extra],
                "only_on_reference": [_range_json(r) for r in c.missing_ranges],
                "epoch_truncation_offset": c.epoch_truncation_offset,
                "epoch_history_differs_at": c.epoch_history_differs_at,
                "problems": c.replica.problems,
            }
            for c in d.replicas
        ],
        "notes": d.notes,
    }


@replica.command()
@click.argument("dirs", nargs=-1, required=True, type=click.Path(path_type=Path))
@click.option(
    "--reference",
    type=click.Path(path_type=Path),
    metavar="BROKER_DIR",
    help="Compare with this DIR's replicas (default: the highest latest leader epoch, "
    "i.e. the current leader's log).",
)
@click.option("--json", "as_json", is_flag=True, help="One JSON document.")
@handle_errors
def diff(dirs: tuple[Path, ...], reference: Path | None, as_json: bool) -> None:
    """Compare the replicas of each partition, with no broker running.

    Each DIR is a broker's log directory (every partition in it is a replica) or a
    partition directory. Per partition: log start and end offsets, the high watermark
    each replica's replication-offset-checkpoint recorded, the leader-epoch
    checkpoints, the first offset where the replicas diverge (batch by batch: base and
    last offset, partition leader epoch and CRC; records are never decoded) and,
    for each replica, the batches it has that the reference does not (offset ranges,
    record counts, epochs, timestamps, segment file and bytes): what an unclean
    leader election lost and where it still is.

    The reference is the replica with the highest latest leader epoch (ties: the
    longer log, then the DIR given first); --reference chooses one.

    Exit 1 when a replica diverges below the high watermark it recorded (acknowledged
    records differ: they are gone from the reference), or a replica is damaged (it is
    compared up to the damage). Exit 0 when replicas are identical, only lag, or
    differ only above the high watermark (an uncommitted tail, reported as a note).
    Exit 2 for a DIR that is not a log or partition directory.

    \b
    Examples:
      kt replica diff /data/broker1 /data/broker2 /data/broker3
      kt replica diff --json b1/orders-0 b2/orders-0 | jq '.partitions[].verdict'
      kt replica diff --reference /data/broker2 /data/broker1 /data/broker2
    """
    for i, d in enumerate(dirs):
        if classify_path(d) is PathKind.MISSING:
            usage_error(f"{d}: no such file or directory")
        if replica_dir_kind(d) is None:
            usage_error(f"{d}: not a log directory or a partition directory")
        if any(_same(d, e) for e in dirs[:i]):
            usage_error(f"{d}: given twice")
    if len(dirs) < 2:
        usage_error("give at least two directories to compare")
    if reference is not None and not any(_same(reference, d) for d in dirs):
        usage_error(f"--reference {reference}: not one of the DIRs compared")
    try:
        replicas = find_replicas(list(dirs))
    except WrongFileKindError as exc:
        usage_error(str(exc))
    by_tp: dict[TopicPartition, list[Replica]] = {}
    for r in replicas:
        by_tp.setdefault(r.tp, []).append(r)
    if not any(len(rs) > 1 for rs in by_tp.values()):
        usage_error("no partition is in more than one of the given directories")
    diffs = []
    for tp in sorted(by_tp):
        rs = by_tp[tp]
        ref = None
        if reference is not None:
            ref = next(
                (
                    r
                    for r in rs
                    if _same(Path(r.label), reference) or _same(Path(r.path), reference)
                ),
                None,
            )
        diff = compare_partition(rs, ref)
        if reference is not None and ref is None and len(rs) > 1:
            diff.notes.append(
                f"{reference} has no replica of {tp}: the reference was chosen by leader epoch"
            )
        diffs.append(diff)
    if as_json:
        emit_json({"ok": all(d.ok for d in diffs), "partitions": [_diff_json(d) for d in diffs]})
    else:
        _render(diffs)
    if not all(d.ok for d in diffs):
        raise SystemExit(EXIT_PROBLEM)
