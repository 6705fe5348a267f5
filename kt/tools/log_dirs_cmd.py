"""`kt log-dirs describe`: brokers' log directories and partition sizes, over the
wire; `kt log-dirs inspect`: one log directory read offline, with a health verdict."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import click

from kt.client import KafkaClient, LogDirInfo
from kt.protocol.errors import ErrorCode
from kt.storage.atomic import TEMP_SUFFIX
from kt.storage.checkpoint import TopicPartition, read_offset_checkpoint
from kt.storage.errors import StorageError
from kt.storage.file_records import BatchHead, Damage, FileRecords, LogBatch
from kt.storage.index_check import verify_segment
from kt.storage.leader_epoch import leader_epoch_problems, read_leader_epoch_checkpoint
from kt.storage.log_files import (
    CLEAN_SHUTDOWN_FILE_NAME,
    CLEANER_CHECKPOINT_FILE,
    LEADER_EPOCH_CHECKPOINT_FILE,
    LOCK_FILE_NAME,
    LOG_START_OFFSET_CHECKPOINT_FILE,
    META_PROPERTIES_FILE_NAME,
    OFFSET_CHECKPOINT_FILES,
    PARTITION_METADATA_FILE,
    RECOVERY_POINT_CHECKPOINT_FILE,
    REPLICATION_CHECKPOINT_FILE,
    SWAP_FILE_SUFFIX,
    PathKind,
    SegmentFiles,
    classify_path,
    is_log_dir_locked,
    list_segments,
    parse_partition_dir_name,
    parse_segment_file_name,
)
from kt.storage.meta_properties import MetaProperties, read_meta_properties
from kt.storage.partition_metadata import read_partition_metadata
from kt.tools.console import (
    EXIT_PROBLEM,
    emit_json,
    handle_errors,
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
    """Per broker and log directory: each partition's size, offset lag and whether
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

# Files a log directory may hold besides partition directories (kt's cluster
# metadata included).
_LOG_DIR_FILES = frozenset(
    {
        META_PROPERTIES_FILE_NAME,
        LOCK_FILE_NAME,
        CLEAN_SHUTDOWN_FILE_NAME,
        *OFFSET_CHECKPOINT_FILES,
        "kt-cluster-metadata.json",
    }
)
_PARTITION_FILES = frozenset({LEADER_EPOCH_CHECKPOINT_FILE, PARTITION_METADATA_FILE})
# Kafka's KRaft metadata log and tiered storage's cache are not partition logs.
_NOT_PARTITIONS = frozenset({"__cluster_metadata-0", "remote-log-index-cache"})


@dataclass(slots=True)
class Finding:
    """One problem (makes the verdict unhealthy) or warning, with the path it is about."""

    path: str
    message: str

    def __str__(self) -> str:
        return f"{self.path}: {self.message}"


@dataclass(slots=True)
class SegmentReport:
    """One segment as read from its files."""

    base_offset: int
    file: str
    size: int
    batches: int = 0
    first_offset: int | None = None
    last_offset: int | None = None
    next_offset: int = 0
    index_bytes: int | None = None
    timeindex_bytes: int | None = None
    txnindex_bytes: int | None = None
    invalid_position: int | None = None
    invalid_bytes: int = 0
    invalid_reason: str | None = None


@dataclass(slots=True)
class PartitionReport:
    """One partition directory: segments, checkpoint entries and the verdict."""

    name: str
    topic: str
    partition: int
    path: str
    segments: list[SegmentReport] = field(default_factory=list)
    log_end_offset: int = 0
    log_start_offset: int = 0
    checkpoints: dict[str, int | None] = field(default_factory=dict)
    leader_epochs: int | None = None
    topic_id: str | None = None
    snapshots: int = 0
    leftovers: list[str] = field(default_factory=list)
    stray_files: list[str] = field(default_factory=list)
    problems: list[Finding] = field(default_factory=list)
    warnings: list[Finding] = field(default_factory=list)

    @property
    def healthy(self) -> bool:
        """No problem found (warnings allowed)."""
        return not self.problems


@dataclass(slots=True)
class CheckpointReport:
    """One per-directory offset checkpoint file."""

    present: bool
    entries: dict[TopicPartition, int] = field(default_factory=dict)
    error: str | None = None


@dataclass(slots=True)
class LogDirReport:
    """Everything `inspect` found in one log directory."""

    path: str
    locked: bool = False
    clean_shutdown: bool = False
    meta: MetaProperties | None = None
    meta_error: str | None = None
    checkpoints: dict[str, CheckpointReport] = field(default_factory=dict)
    partitions: list[PartitionReport] = field(default_factory=list)
    leftover_dirs: list[str] = field(default_factory=list)
    stray_files: list[str] = field(default_factory=list)
    problems: list[Finding] = field(default_factory=list)
    warnings: list[Finding] = field(default_factory=list)

    @property
    def healthy(self) -> bool:
        """No problem in the directory nor in any partition."""
        return not self.problems and all(p.healthy for p in self.partitions)


def inspect_log_dir(path: Path, *, verify_indexes: bool = False) -> LogDirReport:
    """Read a log directory without changing anything and judge its health."""
    report = LogDirReport(str(path))
    report.locked = is_log_dir_locked(path)
    if report.locked:
        report.warnings.append(
            Finding(str(path), "locked by a running broker: files may change while read")
        )
    report.clean_shutdown = (path / CLEAN_SHUTDOWN_FILE_NAME).exists()
    meta_path = path / META_PROPERTIES_FILE_NAME
    if meta_path.exists():
        try:
            report.meta = read_meta_properties(meta_path)
        except (StorageError, OSError) as exc:
            report.meta_error = getattr(exc, "message", None) or str(exc)
            report.problems.append(
                Finding(str(meta_path), f"unreadable meta.properties: {report.meta_error}")
            )
    else:
        report.warnings.append(
            Finding(str(meta_path), "missing (a broker writes it on first start)")
        )
    for name in OFFSET_CHECKPOINT_FILES:
        report.checkpoints[name] = _read_dir_checkpoint(path / name, report)
    found: set[TopicPartition] = set()
    for child in sorted(path.iterdir(), key=lambda p: p.name):
        if child.is_dir():
            parsed = parse_partition_dir_name(child.name)
            if child.name in _NOT_PARTITIONS:
                continue
            if parsed is None:
                report.stray_files.append(child.name + "/")
                continue
            if parsed.state is not None:
                report.leftover_dirs.append(child.name)
                what = {
                    "delete": "a deleted partition not yet removed (a broker removes it)",
                    "future": "an unfinished intra-broker move",
                    "stray": "a replica the cluster no longer assigns here",
                }[parsed.state]
                report.warnings.append(Finding(str(child), what))
                continue
            tp = TopicPartition(parsed.topic, parsed.partition)
            found.add(tp)
            report.partitions.append(
                _inspect_partition(child, tp, report.checkpoints, verify_indexes)
            )
        elif child.name not in _LOG_DIR_FILES:
            report.stray_files.append(child.name)
            if child.name.endswith((TEMP_SUFFIX, ".tmp")):
                report.warnings.append(
                    Finding(str(child), "temporary file of an interrupted write")
                )
            else:
                report.warnings.append(Finding(str(child), "unexpected file"))
    for name, ckpt in report.checkpoints.items():
        orphans = sorted(tp for tp in ckpt.entries if tp not in found)
        if orphans:
            shown = ", ".join(f"{tp.topic}-{tp.partition}" for tp in orphans[:5])
            more = f" and {len(orphans) - 5} more" if len(orphans) > 5 else ""
            report.warnings.append(
                Finding(
                    str(path / name),
                    f"{len(orphans)} entries for partitions not in this directory "
                    f"({shown}{more}); a broker ignores them",
                )
            )
    return report


def _read_dir_checkpoint(path: Path, report: LogDirReport) -> CheckpointReport:
    if not path.exists():
        return CheckpointReport(False)
    try:
        return CheckpointReport(True, read_offset_checkpoint(path, allow_empty=True))
    except (StorageError, OSError) as exc:
        message = getattr(exc, "message", None) or str(exc)
        report.problems.append(Finding(str(path), f"corrupt checkpoint: {message}"))
        return CheckpointReport(True, {}, message)


def _inspect_partition(
    d: Path,
    tp: TopicPartition,
    checkpoints: dict[str, CheckpointReport],
    verify_indexes: bool,
) -> PartitionReport:
    rep = PartitionReport(d.name, tp.topic, tp.partition, str(d))
    groups = list_segments(d)
    known = {LEADER_EPOCH_CHECKPOINT_FILE, PARTITION_METADATA_FILE}
    for entry in sorted(os.listdir(d)):
        parsed = parse_segment_file_name(entry)
        if parsed is not None:
            if parsed.state is not None:
                rep.leftovers.append(entry)
                if parsed.state == SWAP_FILE_SUFFIX:
                    rep.problems.append(
                        Finding(
                            str(d / entry),
                            "leftover .swap file: a compaction or split was interrupted "
                            "between renames (a broker finishes or drops it at load)",
                        )
                    )
                else:
                    rep.warnings.append(
                        Finding(str(d / entry), f"leftover {parsed.state} file (deleted at load)")
                    )
            elif parsed.kind == "snapshot":
                rep.snapshots += 1
            continue
        if entry in known:
            continue
        rep.stray_files.append(entry)
        rep.warnings.append(Finding(str(d / entry), "unexpected file"))
    prev_next: int | None = None
    for group in groups:
        if group.log is None:
            orphans = [p for p in (group.index, group.timeindex, group.txnindex) if p is not None]
            for p in orphans:
                rep.warnings.append(Finding(str(p), "index without its .log (deleted at load)"))
            continue
        seg = _inspect_segment(group)
        rep.segments.append(seg)
        if seg.first_offset is not None and seg.first_offset < seg.base_offset:
            rep.problems.append(
                Finding(
                    seg.file,
                    f"first batch starts at offset {seg.first_offset}, below the segment's "
                    f"base offset {seg.base_offset}",
                )
            )
        if prev_next is not None and seg.base_offset < prev_next:
            rep.problems.append(
                Finding(
                    seg.file,
                    f"base offset {seg.base_offset} overlaps the previous segment, which "
                    f"ends at offset {prev_next - 1}",
                )
            )
        if seg.invalid_reason is not None:
            rep.problems.append(
                Finding(
                    seg.file,
                    f"invalid log tail: {seg.invalid_bytes} bytes from position "
                    f"{seg.invalid_position}: {seg.invalid_reason} (recovery truncates it)",
                )
            )
        if seg.batches:
            prev_next = seg.next_offset
        if verify_indexes:
            try:
                check = verify_segment(Path(seg.file))
            except StorageError as exc:
                rep.problems.append(Finding(seg.file, f"cannot verify indexes: {exc.message}"))
            else:
                for problem in check.problems:
                    if problem.kind == "log" and seg.invalid_reason is not None:
                        continue  # the torn tail is reported above already
                    rep.problems.append(Finding(str(problem.path), problem.message))
    if rep.segments:
        last = rep.segments[-1]
        rep.log_end_offset = last.next_offset
        rep.log_start_offset = rep.segments[0].base_offset
    labels = {
        RECOVERY_POINT_CHECKPOINT_FILE: "recovery point",
        LOG_START_OFFSET_CHECKPOINT_FILE: "log start offset",
        REPLICATION_CHECKPOINT_FILE: "high watermark",
        CLEANER_CHECKPOINT_FILE: "cleaner offset",
    }
    for name, ckpt in checkpoints.items():
        value = ckpt.entries.get(tp)
        rep.checkpoints[name] = value
        if value is None or not rep.segments:
            continue
        if value > rep.log_end_offset:
            consequence = {
                LOG_START_OFFSET_CHECKPOINT_FILE: "; a broker would delete every segment "
                "and restart the log empty at the checkpoint",
            }.get(name, "")
            rep.problems.append(
                Finding(
                    str(d.parent / name),
                    f"{labels[name]} of {d.name} is {value}, beyond the log end offset "
                    f"{rep.log_end_offset}{consequence}",
                )
            )
    start = rep.checkpoints.get(LOG_START_OFFSET_CHECKPOINT_FILE)
    if start is not None:
        rep.log_start_offset = max(rep.log_start_offset, start)
    if not rep.segments:
        rep.warnings.append(Finding(str(d), "no segments (a broker starts it empty)"))
    epoch_path = d / LEADER_EPOCH_CHECKPOINT_FILE
    if epoch_path.exists():
        try:
            entries = read_leader_epoch_checkpoint(epoch_path)
            rep.leader_epochs = len(entries)
            for msg in leader_epoch_problems(entries):
                rep.problems.append(Finding(str(epoch_path), msg))
            if entries and rep.segments and entries[-1].start_offset > rep.log_end_offset:
                rep.problems.append(
                    Finding(
                        str(epoch_path),
                        f"epoch {entries[-1].epoch} starts at offset "
                        f"{entries[-1].start_offset}, beyond the log end offset "
                        f"{rep.log_end_offset}",
                    )
                )
        except (StorageError, OSError) as exc:
            rep.problems.append(
                Finding(str(epoch_path), f"corrupt: {getattr(exc, 'message', None) or exc}")
            )
    meta_path = d / PARTITION_METADATA_FILE
    if meta_path.exists():
        try:
            rep.topic_id = read_partition_metadata(meta_path).topic_id
        except (StorageError, OSError) as exc:
            rep.problems.append(
                Finding(str(meta_path), f"corrupt: {getattr(exc, 'message', None) or exc}")
            )
    return rep


def _inspect_segment(group: SegmentFiles) -> SegmentReport:
    assert group.log is not None
    seg = SegmentReport(group.base_offset, str(group.log), 0, next_offset=group.base_offset)
    for attr in ("index", "timeindex", "txnindex"):
        p = getattr(group, attr)
        if p is not None:
            setattr(seg, f"{attr}_bytes", p.stat().st_size)
    with open(group.log, "rb") as fh:
        records = FileRecords(fh)
        seg.size = records.size
        first = True
        for item in records.headers(0):
            if isinstance(item, Damage):
                seg.invalid_position = item.position
                seg.invalid_bytes = records.size - item.position
                seg.invalid_reason = item.reason
                break
            if first:
                seg.first_offset = _first_offset(records, item)
                first = False
            seg.batches += 1
            seg.last_offset = item.last_offset
            seg.next_offset = item.next_offset
    return seg


def _first_offset(records: FileRecords, head: BatchHead) -> int:
    if head.header is not None:
        return int(head.header.base_offset)
    # A legacy wrapper's offset is its last inner offset: read the entry for the first.
    for item in records.batches(head.position, head.next_position):
        if isinstance(item, LogBatch):
            return int(item.base_offset)
    return head.offset


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
        "leftover_dirs": rep.leftover_dirs,
        "stray_files": rep.stray_files,
        "problems": findings(rep.problems),
        "warnings": findings(rep.warnings),
    }


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
            else f"{len(c.entries)} entries"
        )
        click.echo(f"  {name}: {state}")
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
                f"  {p.name} {Path(seg.file).name}: {seg.size} bytes, {seg.batches} batches, "
                f"offsets {_opt(seg.first_offset)}..{_opt(seg.last_offset)}, next "
                f"{seg.next_offset}"
            )
    problems = rep.problems + [f for p in rep.partitions for f in p.problems]
    warnings = rep.warnings + [f for p in rep.partitions for f in p.warnings]
    for f in problems:
        click.echo(f"PROBLEM {f}")
    for f in warnings:
        click.echo(f"WARNING {f}")
    bad = sum(1 for p in rep.partitions if not p.healthy)
    click.echo(
        f"{'HEALTHY' if rep.healthy else 'UNHEALTHY'}: {len(rep.partitions)} partitions "
        f"({bad} unhealthy), {len(problems)} problems, {len(warnings)} warnings"
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
