"""Offline inspection of one log directory (kt's or Apache Kafka's, any version),
with a health verdict per partition and for the directory.

`inspect_log_dir` reads, and never writes: meta.properties, the clean-shutdown
marker and lock, the directory's offset checkpoints, every partition directory
(its segments read batch header by batch header, the leader-epoch checkpoint,
partition.metadata, producer snapshots, leftover `.deleted`/`.cleaned`/`.swap`
files and stray files) and the `-delete`/`-future`/`-stray` directories.

What it finds is a `Finding`, sorted into *problems* (the verdict is unhealthy:
something a broker would have to repair, discard or refuse) and *warnings*
(unusual but harmless, or cleaned up by a broker at load). `kt log-dirs inspect`
renders the report; the rules live here.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from kt.storage.atomic import TEMP_SUFFIX
from kt.storage.checkpoint import (
    TopicPartition,
    empty_checkpoint_note,
    parse_offset_checkpoint,
)
from kt.storage.errors import StorageError
from kt.storage.file_records import BatchHead, Damage, FileRecords, LogBatch
from kt.storage.index_check import MISSING_INDEX, verify_segment
from kt.storage.leader_epoch import leader_epoch_problems, parse_leader_epoch_checkpoint
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
    SegmentFiles,
    is_log_dir_locked,
    list_segments,
    parse_partition_dir_name,
    parse_segment_file_name,
)
from kt.storage.meta_properties import MetaProperties, read_meta_properties
from kt.storage.metadata_dir import MetadataDirReport, inspect_metadata_dir
from kt.storage.metadata_log import BOOTSTRAP_FILE
from kt.storage.partition_metadata import read_partition_metadata

__all__ = [
    "CheckpointReport",
    "Finding",
    "LogDirReport",
    "PartitionReport",
    "SegmentReport",
    "inspect_log_dir",
]

# Files a log directory may hold besides partition directories (kt's cluster
# metadata included).
_LOG_DIR_FILES = frozenset(
    {
        META_PROPERTIES_FILE_NAME,
        LOCK_FILE_NAME,
        CLEAN_SHUTDOWN_FILE_NAME,
        *OFFSET_CHECKPOINT_FILES,
        "kt-cluster-metadata.json",
        BOOTSTRAP_FILE,  # KRaft's metadata log dir
    }
)
_PARTITION_FILES = frozenset({LEADER_EPOCH_CHECKPOINT_FILE, PARTITION_METADATA_FILE})
# Kafka's KRaft metadata log and tiered storage's cache are not partition logs.
_NOT_PARTITIONS = frozenset({"__cluster_metadata-0", "remote-log-index-cache"})
_LEFTOVER_DIRS = {
    "delete": "a deleted partition not yet removed (a broker removes it)",
    "future": "an unfinished intra-broker move",
    "stray": "a replica the cluster no longer assigns here",
}
# How each per-directory checkpoint's entry is named in findings.
_CHECKPOINT_LABELS = {
    RECOVERY_POINT_CHECKPOINT_FILE: "recovery point",
    LOG_START_OFFSET_CHECKPOINT_FILE: "log start offset",
    REPLICATION_CHECKPOINT_FILE: "high watermark",
    CLEANER_CHECKPOINT_FILE: "cleaner offset",
}


@dataclass(slots=True)
class Finding:
    """One problem (makes the verdict unhealthy) or warning, with the path it is about."""

    path: str
    message: str

    def __str__(self) -> str:
        return f"{self.path}: {self.message}"


@dataclass(slots=True)
class SegmentReport:
    """One segment as read from its files.

    Offsets come from the batch headers; `next_offset` is the base offset while the
    segment holds no whole batch. An invalid tail (a torn write, garbage) is the
    `invalid_*` fields: where it starts, how many bytes it spans and why.
    """

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
    # Per checkpoint file name, this partition's entry (None: no entry).
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
    """Everything `inspect_log_dir` found in one log directory."""

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
    # KRaft's metadata (__cluster_metadata-0, bootstrap.checkpoint) when the dir holds it.
    kraft: MetadataDirReport | None = None

    @property
    def healthy(self) -> bool:
        """No problem in the directory nor in any partition."""
        return not self.problems and all(p.healthy for p in self.partitions)

    def all_problems(self) -> list[Finding]:
        """The directory's problems, then each partition's, in partition order."""
        return self.problems + [f for p in self.partitions for f in p.problems]

    def all_warnings(self) -> list[Finding]:
        """The directory's warnings, then each partition's, in partition order."""
        return self.warnings + [f for p in self.partitions for f in p.warnings]


def inspect_log_dir(path: Path, *, verify_indexes: bool = False) -> LogDirReport:
    """Read the log directory `path` without changing anything and judge its health.

    `path` must be an existing directory (callers check its kind first). With
    `verify_indexes` every index is checked against its log and every batch's CRC
    (reads all the data). Unreadable files become findings, not exceptions.
    """
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
            report.meta_error = _message(exc)
            report.problems.append(
                Finding(str(meta_path), f"unreadable meta.properties: {report.meta_error}")
            )
    else:
        report.warnings.append(
            Finding(str(meta_path), "missing (a broker writes it on first start)")
        )
    for name in OFFSET_CHECKPOINT_FILES:
        report.checkpoints[name] = _read_dir_checkpoint(path / name, report)
    report.kraft = inspect_metadata_dir(path, verify=verify_indexes)
    if report.kraft is not None:
        for mf in report.kraft.findings:
            (report.problems if mf.problem else report.warnings).append(
                Finding(mf.path, mf.message)
            )
    found: set[TopicPartition] = set()
    for child in sorted(path.iterdir(), key=lambda p: p.name):
        if child.is_dir():
            parsed = parse_partition_dir_name(child.name)
            if child.name in _NOT_PARTITIONS:
                continue
            if parsed is None:
                report.stray_files.append(child.name + "/")
                report.warnings.append(
                    Finding(str(child), "unexpected directory (not a partition directory)")
                )
                continue
            if parsed.state is not None:
                report.leftover_dirs.append(child.name)
                report.warnings.append(Finding(str(child), _LEFTOVER_DIRS[parsed.state]))
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


def _message(exc: BaseException) -> str:
    """A storage error's message, else the exception's text."""
    message = getattr(exc, "message", None)
    return message if isinstance(message, str) and message else str(exc)


def _read_dir_checkpoint(path: Path, report: LogDirReport) -> CheckpointReport:
    if not path.exists():
        return CheckpointReport(False)
    try:
        data = path.read_bytes()
        entries = parse_offset_checkpoint(data, str(path), allow_empty=True)
        note = empty_checkpoint_note(data)
        if note is not None:
            report.warnings.append(Finding(str(path), note))
        return CheckpointReport(True, entries)
    except (StorageError, OSError) as exc:
        message = _message(exc)
        report.problems.append(Finding(str(path), f"corrupt checkpoint: {message}"))
        return CheckpointReport(True, {}, message)


def _inspect_partition(
    d: Path,
    tp: TopicPartition,
    checkpoints: dict[str, CheckpointReport],
    verify_indexes: bool,
) -> PartitionReport:
    rep = PartitionReport(d.name, tp.topic, tp.partition, str(d))
    _sort_partition_files(d, rep)
    _read_segments(d, rep, verify_indexes)
    _check_checkpoints(d, tp, checkpoints, rep)
    if not rep.segments:
        rep.warnings.append(Finding(str(d), "no segments (a broker starts it empty)"))
    _check_leader_epochs(d, rep)
    meta_path = d / PARTITION_METADATA_FILE
    if meta_path.exists():
        try:
            rep.topic_id = read_partition_metadata(meta_path).topic_id
        except (StorageError, OSError) as exc:
            rep.problems.append(Finding(str(meta_path), f"corrupt: {_message(exc)}"))
    return rep


def _sort_partition_files(d: Path, rep: PartitionReport) -> None:
    """Leftover segment files, producer snapshots and stray files of a partition."""
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
        if entry in _PARTITION_FILES:
            continue
        rep.stray_files.append(entry)
        rep.warnings.append(Finding(str(d / entry), "unexpected file"))


def _read_segments(d: Path, rep: PartitionReport, verify_indexes: bool) -> None:
    """Read every segment; check their offsets line up; set the log's start and end."""
    prev_next: int | None = None
    for group in list_segments(d):
        if group.log is None:
            orphans = [p for p in (group.index, group.timeindex, group.txnindex) if p is not None]
            for p in orphans:
                rep.warnings.append(Finding(str(p), "index without its .log (deleted at load)"))
            continue
        seg = _inspect_segment(group, group.log)
        rep.segments.append(seg)
        for missing, suffix in ((group.index, ".index"), (group.timeindex, ".timeindex")):
            if missing is None:
                rep.warnings.append(Finding(str(group.log.with_suffix(suffix)), MISSING_INDEX))
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
            _verify_indexes(seg, rep)
    if rep.segments:
        rep.log_end_offset = rep.segments[-1].next_offset
        rep.log_start_offset = rep.segments[0].base_offset


def _verify_indexes(seg: SegmentReport, rep: PartitionReport) -> None:
    try:
        check = verify_segment(Path(seg.file))
    except StorageError as exc:
        rep.problems.append(Finding(seg.file, f"cannot verify indexes: {exc.message}"))
        return
    for problem in check.problems:
        if problem.kind == "log" and seg.invalid_reason is not None:
            continue  # the torn tail is reported already
        rep.problems.append(Finding(str(problem.path), problem.message))


def _check_checkpoints(
    d: Path,
    tp: TopicPartition,
    checkpoints: dict[str, CheckpointReport],
    rep: PartitionReport,
) -> None:
    """Take the partition's checkpoint entries; those beyond the log's end are problems."""
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
                    f"{_CHECKPOINT_LABELS[name]} of {d.name} is {value}, beyond the log end "
                    f"offset {rep.log_end_offset}{consequence}",
                )
            )
    start = rep.checkpoints.get(LOG_START_OFFSET_CHECKPOINT_FILE)
    if start is not None:
        rep.log_start_offset = max(rep.log_start_offset, start)


def _check_leader_epochs(d: Path, rep: PartitionReport) -> None:
    epoch_path = d / LEADER_EPOCH_CHECKPOINT_FILE
    if not epoch_path.exists():
        return
    try:
        data = epoch_path.read_bytes()
        entries = parse_leader_epoch_checkpoint(data, str(epoch_path), allow_empty=True)
    except (StorageError, OSError) as exc:
        rep.problems.append(Finding(str(epoch_path), f"corrupt: {_message(exc)}"))
        return
    note = empty_checkpoint_note(data)
    if note is not None:
        rep.warnings.append(Finding(str(epoch_path), note))
    rep.leader_epochs = len(entries)
    for msg in leader_epoch_problems(entries):
        rep.problems.append(Finding(str(epoch_path), msg))
    if entries and rep.segments and entries[-1].start_offset > rep.log_end_offset:
        rep.problems.append(
            Finding(
                str(epoch_path),
                f"epoch {entries[-1].epoch} starts at offset {entries[-1].start_offset}, "
                f"beyond the log end offset {rep.log_end_offset}",
            )
        )


def _inspect_segment(group: SegmentFiles, log: Path) -> SegmentReport:
    seg = SegmentReport(group.base_offset, str(log), 0, next_offset=group.base_offset)
    if group.index is not None:
        seg.index_bytes = group.index.stat().st_size
    if group.timeindex is not None:
        seg.timeindex_bytes = group.timeindex.stat().st_size
    if group.txnindex is not None:
        seg.txnindex_bytes = group.txnindex.stat().st_size
    with open(log, "rb") as fh:
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
