"""`kt log-dirs describe`: brokers' log directories and partition sizes, over the
wire; `kt log-dirs inspect`: one log directory read offline, with a health verdict."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import click

from kt.client import KafkaClient, LogDirInfo
from kt.protocol.errors import ErrorCode
from kt.storage.checkpoint import TopicPartition
from kt.storage.log_dir_inspect import Finding, LogDirReport, inspect_log_dir
from kt.storage.log_files import (
    RECOVERY_POINT_CHECKPOINT_FILE,
    REPLICATION_CHECKPOINT_FILE,
    PathKind,
    classify_path,
)
from kt.tools.console import (
    EXIT_PROBLEM,
    emit_json,
    handle_errors,
    plural,
    render_table,
    usage_error,
)
from kt.tools.wire import Wire, wire_options


@click.group("log-dirs")
def log_dirs() -> None:
    """Describe brokers' log directories (like kafka-log-dirs.sh), or inspect one
    offline.

    \b
    Examples:
      kt log-dirs describe
      kt log-dirs inspect /var/lib/kafka/data
      kt log-dirs describe --broker-list 1,2 --topic-list orders
      kt log-dirs describe --json | jq '.brokers[].logDirs[].partitions | length'
    """


def _ints(text: str | None, option: str) -> list[int] | None:
    if text is None:
        return None
    try:
        return [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        usage_error(f"{option}: expected comma-separated broker ids, got {text!r}")


@log_dirs.command()
@wire_options
@click.option("--broker-list", metavar="ID,...", help="Only these brokers (default: all).")
@click.option("--topic-list", metavar="TOPIC,...", help="Only these topics' partitions.")
@click.option(
    "--json", "as_json", is_flag=True, help="kafka-log-dirs.sh's JSON document (version 1)."
)
@handle_errors
def describe(wire: Wire, broker_list: str | None, topic_list: str | None, as_json: bool) -> None:
    """Describe brokers' log directories and the partitions in them.

    Per broker and log directory: each partition's size, offset lag and whether
    it is a future replica; offline directories are reported with their error.

    Plain output is a table BROKER LOG-DIR TOPIC PARTITION SIZE OFFSET-LAG
    IS-FUTURE, with one row per directory (TOPIC '-') for empty or offline
    directories (ERROR column). Exit 1 when a directory is offline.
    """
    brokers = _ints(broker_list, "--broker-list")
    topics = [t for t in topic_list.split(",") if t] if topic_list else None

    async def go(c: KafkaClient) -> list[LogDirInfo]:
        wanted = None
        if topics is not None:
            wanted = {t: await c.partitions_for(t) for t in topics}
        return await c.describe_log_dirs(brokers, wanted)

    dirs = wire.run(go)
    offline = [d for d in dirs if d.error != ErrorCode.NONE]
    if as_json:
        by_broker: dict[int, list[LogDirInfo]] = {}
        for d in dirs:
            by_broker.setdefault(d.broker, []).append(d)
        emit_json(
            {
                "version": 1,
                "brokers": [
                    {
                        "broker": b,
                        "logDirs": [
                            {
                                "logDir": d.path,
                                "error": None if d.error == ErrorCode.NONE else d.error.name,
                                "totalBytes": d.total_bytes,
                                "usableBytes": d.usable_bytes,
                                "partitions": [
                                    {
                                        "partition": f"{p.topic}-{p.partition}",
                                        "size": p.size,
                                        "offsetLag": p.offset_lag,
                                        "isFuture": p.is_future,
                                    }
                                    for p in d.partitions
                                ],
                            }
                            for d in ds
                        ],
                    }
                    for b, ds in sorted(by_broker.items())
                ],
            }
        )
    else:
        rows = []
        for d in dirs:
            err = "-" if d.error == ErrorCode.NONE else d.error.name
            if not d.partitions:
                rows.append([d.broker, d.path, "-", "-", "-", "-", "-", err])
            for p in d.partitions:
                rows.append(
                    [d.broker, d.path, p.topic, p.partition, p.size, p.offset_lag,
                     str(p.is_future).lower(), err]
                )  # fmt: skip
        render_table(
            ["BROKER", "LOG-DIR", "TOPIC", "PARTITION", "SIZE", "OFFSET-LAG", "IS-FUTURE", "ERROR"],
            rows,
        )
    if offline:
        raise SystemExit(1)


# --- kt log-dirs inspect (offline) ---------------------------------------------


def _report_json(rep: LogDirReport) -> dict[str, Any]:
    def tp_map(entries: dict[TopicPartition, int]) -> dict[str, int]:
        return {f"{tp.topic}-{tp.partition}": o for tp, o in sorted(entries.items())}

    def findings(items: list[Finding]) -> list[dict[str, str]]:
        return [{"path": f.path, "message": f.message} for f in items]

    meta = None
    if rep.meta is not None:
        meta = {
            "version": rep.meta.version,
            "node_id": rep.meta.node_id,
            "cluster_id": rep.meta.cluster_id,
            "directory_id": rep.meta.directory_id,
        }
    return {
        "log_dir": rep.path,
        "healthy": rep.healthy,
        "locked": rep.locked,
        "clean_shutdown": rep.clean_shutdown,
        "meta_properties": meta,
        "meta_properties_error": rep.meta_error,
        "checkpoints": {
            name: {"present": c.present, "error": c.error, "entries": tp_map(c.entries)}
            for name, c in rep.checkpoints.items()
        },
        "partitions": [
            {
                "name": p.name,
                "topic": p.topic,
                "partition": p.partition,
                "path": p.path,
                "healthy": p.healthy,
                "log_start_offset": p.log_start_offset,
                "log_end_offset": p.log_end_offset,
                "size": sum(s.size for s in p.segments),
                "checkpoints": p.checkpoints,
                "leader_epoch_entries": p.leader_epochs,
                "topic_id": p.topic_id,
                "producer_snapshots": p.snapshots,
                "segments": [
                    {
                        "base_offset": s.base_offset,
                        "file": s.file,
                        "size": s.size,
                        "batches": s.batches,
                        "first_offset": s.first_offset,
                        "last_offset": s.last_offset,
                        "next_offset": s.next_offset,
                        "index_bytes": s.index_bytes,
                        "timeindex_bytes": s.timeindex_bytes,
                        "txnindex_bytes": s.txnindex_bytes,
                        "invalid_tail": None
                        if s.invalid_reason is None
                        else {
                            "position": s.invalid_position,
                            "bytes": s.invalid_bytes,
                            "reason": s.invalid_reason,
                        },
                    }
                    for s in p.segments
                ],
                "leftover_files": p.leftovers,
                "stray_files": p.stray_files,
                "problems": findings(p.problems),
                "warnings": findings(p.warnings),
            }
            for p in rep.partitions
        ],
        "kraft_metadata": _kraft_json(rep),
        "leftover_dirs": rep.leftover_dirs,
        "stray_files": rep.stray_files,
        "problems": findings(rep.problems),
        "warnings": findings(rep.warnings),
    }


def _kraft_json(rep: LogDirReport) -> dict[str, Any] | None:
    k = rep.kraft
    if k is None:
        return None
    return {
        "partition_dir": k.partition_dir,
        "segments": k.segments,
        "size": k.size,
        "log_start_offset": k.log_start_offset,
        "log_end_offset": k.log_end_offset,
        "last_batch_epoch": k.last_batch_epoch,
        "last_batch_timestamp": k.last_batch_timestamp,
        "snapshots": [
            {"file": s.file, "end_offset": s.end_offset, "epoch": s.epoch, "size": s.size,
             "records": s.records, "error": s.error}
            for s in k.snapshots
        ],
        "quorum_state": None if k.quorum_state is None else k.quorum_state.as_json(),
        "quorum_state_error": k.quorum_state_error,
        "bootstrap_metadata_version": k.bootstrap_metadata_version,
    }  # fmt: skip


def _render_kraft(rep: LogDirReport) -> None:
    k = rep.kraft
    if k is None:
        return
    click.echo("  KRaft metadata:")
    if k.bootstrap_metadata_version is not None:
        click.echo(f"    bootstrap.checkpoint: metadata.version {k.bootstrap_metadata_version}")
    if k.partition_dir is None:
        click.echo("    __cluster_metadata-0: absent")
        return
    last = ""
    if k.last_batch_timestamp is not None and k.last_batch_timestamp >= 0:
        when = datetime.fromtimestamp(k.last_batch_timestamp / 1000, UTC)
        stamp = when.isoformat(timespec="milliseconds").replace("+00:00", "Z")
        last = f", last batch {stamp} epoch {k.last_batch_epoch}"
    click.echo(
        f"    log: {plural(k.segments, 'segment')}, {plural(k.size, 'byte')}, offsets "
        f"{_opt(k.log_start_offset)}..{_opt(k.log_end_offset)} (end, exclusive){last}"
    )
    for s in k.snapshots:
        extra = "" if s.records is None else f", {plural(s.records, 'record')}"
        bad = f", INVALID: {s.error}" if s.error else ""
        click.echo(
            f"    snapshot {Path(s.file).name}: end offset {s.end_offset}, epoch {s.epoch}, "
            f"{plural(s.size, 'byte')}{extra}{bad}"
        )
    q = k.quorum_state
    if q is not None:
        voters = ""
        if q.current_voters is not None:
            voters = f", voters {','.join(map(str, q.current_voters))}"
        leader = str(q.leader_id) if q.has_leader else "none known"
        voted = str(q.voted_id) if q.has_voted else "none"
        click.echo(
            f"    quorum-state (v{q.data_version}): leader {leader}, epoch {q.leader_epoch}, "
            f"voted for {voted}{voters}"
        )
    elif k.quorum_state_error is not None:
        click.echo(f"    quorum-state: corrupt ({k.quorum_state_error})")


def _opt(value: int | None) -> str:
    return "-" if value is None else str(value)


def _render(rep: LogDirReport) -> None:
    click.echo(f"log dir {rep.path}")
    if rep.meta is not None:
        m = rep.meta
        click.echo(
            f"  meta.properties: version {m.version}, node id {_opt(m.node_id)}, cluster id "
            f"{m.cluster_id or '-'}, directory id {m.directory_id or '-'}"
        )
    elif rep.meta_error is not None:
        click.echo(f"  meta.properties: unreadable ({rep.meta_error})")
    else:
        click.echo("  meta.properties: missing")
    click.echo(
        f"  clean-shutdown marker: {'present' if rep.clean_shutdown else 'absent'}; "
        f"lock: {'held by a running broker' if rep.locked else 'free'}"
    )
    for name, c in rep.checkpoints.items():
        state = (
            "absent"
            if not c.present
            else f"corrupt ({c.error})"
            if c.error
            else plural(len(c.entries), "entry", "entries")
        )
        click.echo(f"  {name}: {state}")
    _render_kraft(rep)
    rows = []
    for p in rep.partitions:
        ck = p.checkpoints
        rows.append(
            [
                p.name,
                len(p.segments),
                sum(s.size for s in p.segments),
                p.log_start_offset,
                p.log_end_offset,
                _opt(ck.get(RECOVERY_POINT_CHECKPOINT_FILE)),
                _opt(ck.get(REPLICATION_CHECKPOINT_FILE)),
                "ok" if p.healthy else "UNHEALTHY",
            ]
        )
    if rows:
        render_table(
            ["PARTITION", "SEGMENTS", "SIZE", "LOG-START", "LOG-END", "RECOVERY-POINT", "HW",
             "VERDICT"],
            rows,
        )  # fmt: skip
    for p in rep.partitions:
        for seg in p.segments:
            click.echo(
                f"  {p.name} {Path(seg.file).name}: {plural(seg.size, 'byte')}, "
                f"{plural(seg.batches, 'batch')}, "
                f"offsets {_opt(seg.first_offset)}..{_opt(seg.last_offset)}, next "
                f"{seg.next_offset}"
            )
    problems = rep.all_problems()
    warnings = rep.all_warnings()
    for f in problems:
        click.echo(f"PROBLEM {f}")
    for f in warnings:
        click.echo(f"WARNING {f}")
    bad = sum(1 for p in rep.partitions if not p.healthy)
    click.echo(
        f"{'HEALTHY' if rep.healthy else 'UNHEALTHY'}: {plural(len(rep.partitions), 'partition')} "
        f"({bad} unhealthy), {plural(len(problems), 'problem')}, "
        f"{plural(len(warnings), 'warning')}"
    )


@log_dirs.command()
@click.argument("path", type=click.Path(path_type=Path))
@click.option(
    "--verify-indexes",
    is_flag=True,
    help="Also check every index against its log and every batch's CRC (reads all data).",
)
@click.option("--json", "as_json", is_flag=True, help="One JSON document.")
@handle_errors
def inspect(path: Path, verify_indexes: bool, as_json: bool) -> None:
    """Inspect a log directory offline (no broker needed; nothing is written).

    PATH is a log directory of kt or Apache Kafka (any version). Per partition: its
    segments (size, first/last/next offset from the segment files), the recovery
    point, log start offset and high watermark from the directory's checkpoints,
    the leader-epoch checkpoint and partition.metadata, leftover .deleted/.cleaned/
    .swap files and stray files; per directory: meta.properties, the clean-shutdown
    marker, the checkpoint files, -delete/-future/-stray directories. Each
    partition and the directory get a verdict.

    Problems (exit 1): checkpoint offsets beyond a log's end, corrupt checkpoints,
    meta.properties, leader-epoch checkpoint or partition.metadata, an invalid log
    tail (a torn write), overlapping segments, a leftover .swap file, and with
    --verify-indexes any index inconsistency or CRC failure. Everything else is a
    warning.

    \b
    Examples:
      kt log-dirs inspect /var/lib/kafka/data
      kt log-dirs inspect --verify-indexes /var/lib/kafka/data
      kt log-dirs inspect --json /var/lib/kafka/data | jq '.partitions[] | select(.healthy|not)'
    """
    kind = classify_path(path)
    if kind is PathKind.MISSING:
        usage_error(f"{path}: no such file or directory")
    if not path.is_dir() or kind is PathKind.PARTITION_DIR:
        usage_error(f"{path}: not a log directory (give the directory holding the partitions)")
    rep = inspect_log_dir(path, verify_indexes=verify_indexes)
    if as_json:
        emit_json(_report_json(rep))
    else:
        _render(rep)
    if not rep.healthy:
        raise SystemExit(EXIT_PROBLEM)
