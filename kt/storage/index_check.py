"""Checking a segment's indexes against its log, and rebuilding them from it.

Verification does what Kafka's index sanity check and `DumpLogSegments
--verify-index-only` do, and more. An offset-index entry must keep lookups right:
it points at the start of a batch whose base offset is at most the indexed offset,
and no record at or after the indexed offset lies before that position. An entry
whose offset is not its batch's last offset but keeps that invariant is a *note*,
not a problem: Kafka writes one whenever it appends several batches at once (a
follower's append), with the last offset of the whole append and the position of
its first batch. Every time-index entry must name a batch whose largest timestamp
is the indexed one; offsets and timestamps must increase; sizes must be whole
entries; nothing may point past the end of the log. A missing `.index` or
`.timeindex` is a *warning*: Kafka rebuilds it when it loads the segment.

Rebuilding computes exactly the entries Kafka's recovery writes (the same
`index.interval.bytes` rule), plus the transaction index from the log's
COMMIT/ABORT markers, and replaces the files atomically.
"""

from __future__ import annotations

import bisect
import os
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from kt.storage import record_batch as v2
from kt.storage.atomic import atomic_write
from kt.storage.errors import CorruptIndexError, CorruptRecordError, WrongFileKindError
from kt.storage.file_records import Damage, FileRecords, LogBatch
from kt.storage.log_files import (
    PathKind,
    classify_path,
    list_segments,
    parse_partition_dir_name,
    parse_segment_file_name,
    segment_file_name,
)
from kt.storage.offset_index import OffsetPosition, encode_offset_index, read_offset_index
from kt.storage.segment import DEFAULT_INDEX_INTERVAL_BYTES, scan_log
from kt.storage.time_index import TimestampOffset, encode_time_index, read_time_index
from kt.storage.txn_index import AbortedTxn, encode_txn_index, read_txn_index, txn_index_problems

MISSING_INDEX = "missing (Kafka rebuilds it when it loads the segment)"


@dataclass(frozen=True, slots=True)
class IndexProblem:
    """One inconsistency between an index and its log."""

    path: Path
    kind: str  # offset-index, time-index, txn-index, log
    message: str
    entry: int | None = None
    index_offset: int | None = None
    log_offset: int | None = None

    def __str__(self) -> str:
        at = f" entry {self.entry}:" if self.entry is not None else ""
        return f"{self.path}:{at} {self.message}"


@dataclass(slots=True)
class SegmentCheck:
    """The verdict on one segment.

    `problems` make it bad; `warnings` (a missing index file) and `notes` (entries
    Kafka writes for multi-batch appends) are reported but leave it ok.
    """

    log_path: Path
    problems: list[IndexProblem] = field(default_factory=list)
    warnings: list[IndexProblem] = field(default_factory=list)
    notes: list[IndexProblem] = field(default_factory=list)
    offset_entries: int = 0
    time_entries: int = 0
    txn_entries: int = 0
    batches: int = 0

    @property
    def ok(self) -> bool:
        """True when no problem was found."""
        return not self.problems


def find_segment_logs(paths: Iterable[str | os.PathLike[str]]) -> list[Path]:
    """Expand segment files, partition directories and log directories into `.log` paths.

    An index path stands for its segment. Raises WrongFileKindError for paths that
    are none of these, FileNotFoundError for missing ones.
    """
    out: list[Path] = []
    for raw in paths:
        p = Path(raw)
        kind = classify_path(p)
        if kind is PathKind.MISSING:
            raise FileNotFoundError(2, "No such file or directory", str(p))
        if p.is_dir() and parse_segment_file_name(p.name) is not None:
            raise WrongFileKindError("is a directory", path=str(p))
        if kind in (
            PathKind.SEGMENT_LOG,
            PathKind.OFFSET_INDEX,
            PathKind.TIME_INDEX,
            PathKind.TXN_INDEX,
        ):
            parsed = parse_segment_file_name(p.name)
            assert parsed is not None
            log = p.parent / segment_file_name(parsed.base_offset, ".log", parsed.state)
            if not log.exists():
                raise WrongFileKindError(f"no log file {log.name} beside the index", path=str(p))
            out.append(log)
        elif kind is PathKind.PARTITION_DIR:
            out.extend(_logs_in_partition(p))
        elif kind is PathKind.LOG_DIR:
            for child in sorted(p.iterdir()):
                if child.is_dir() and parse_partition_dir_name(child.name) is not None:
                    out.extend(_logs_in_partition(child))
        elif p.is_dir() and _logs_in_partition(p):
            # Segments copied somewhere for an investigation: a directory of
            # segment files counts as a partition directory whatever its name.
            out.extend(_logs_in_partition(p))
        else:
            raise WrongFileKindError(
                "not a segment file, partition directory or log directory", path=str(p)
            )
    seen: set[Path] = set()
    unique = []
    for p in out:
        if p not in seen:
            seen.add(p)
            unique.append(p)
    return unique


def _logs_in_partition(d: Path) -> list[Path]:
    # list_segments skips directories; one named like a segment file here would
    # otherwise vanish silently from a check the user asked for.
    for child in sorted(d.iterdir()):
        parsed = parse_segment_file_name(child.name)
        if parsed is not None and parsed.state is None and child.is_dir():
            raise WrongFileKindError("is a directory", path=str(child))
    return [s.log for s in list_segments(d) if s.log is not None]


def log_dir_of(segment_log: Path) -> Path:
    """The log directory (the `.lock` holder) a segment file lives in."""
    return segment_log.resolve().parent.parent


@dataclass(slots=True)
class _Lite:
    position: int
    base_offset: int
    last_offset: int
    max_timestamp: int
    size: int


def _lite_batches(records: FileRecords) -> tuple[list[_Lite], Damage | None]:
    out: list[_Lite] = []
    damage = None
    for item in records.batches(0, validate=True):
        if isinstance(item, Damage):
            damage = item
            break
        out.append(
            _Lite(
                item.position,
                item.base_offset,
                item.last_offset,
                item.max_timestamp,
                item.size_in_bytes,
            )
        )
    return out, damage


def verify_segment(
    log_path: str | os.PathLike[str], *, check_timestamps: bool = True
) -> SegmentCheck:
    """Check one segment's offset, time and transaction indexes against its log."""
    log = Path(log_path)
    parsed = parse_segment_file_name(log.name)
    if parsed is None or parsed.kind != "log":
        raise WrongFileKindError("not a segment .log file", path=str(log))
    base = parsed.base_offset
    state = parsed.state
    result = SegmentCheck(log)
    with open(log, "rb") as f:
        records = FileRecords(f)
        batches, damage = _lite_batches(records)
        log_size = records.size
    result.batches = len(batches)
    if damage is not None:
        result.problems.append(
            IndexProblem(log, "log", f"invalid data at position {damage.position}: {damage.reason}")
        )
    by_last_offset = {b.last_offset: b for b in batches}

    index_path = log.with_name(segment_file_name(base, ".index", state))
    if index_path.exists():
        _check_offset_index(index_path, base, batches, log_size, result)
    else:
        result.warnings.append(IndexProblem(index_path, "offset-index", MISSING_INDEX))
    time_path = log.with_name(segment_file_name(base, ".timeindex", state))
    if time_path.exists():
        _check_time_index(
            time_path, base, by_last_offset, batches, log_size, result, check_timestamps
        )
    else:
        result.warnings.append(IndexProblem(time_path, "time-index", MISSING_INDEX))
    txn_path = log.with_name(segment_file_name(base, ".txnindex", state))
    if txn_path.exists():
        try:
            entries = read_txn_index(txn_path)
            result.txn_entries = len(entries)
            for msg in txn_index_problems(entries, base):
                result.problems.append(IndexProblem(txn_path, "txn-index", msg))
        except CorruptIndexError as exc:
            result.problems.append(IndexProblem(txn_path, "txn-index", exc.message))
    return result


def _check_offset_index(
    path: Path,
    base: int,
    batches: list[_Lite],
    log_size: int,
    result: SegmentCheck,
) -> None:
    view = read_offset_index(path, base)
    result.offset_entries = len(view)
    for msg in view.problems():
        result.problems.append(IndexProblem(path, "offset-index", msg))
    positions = [b.position for b in batches]
    # before[j]: the largest offset in batches[:j], the records a lookup starting at
    # batches[j] skips (offsets need not increase in a damaged log).
    before: list[int | None] = [None]
    for b in batches:
        prev = before[-1]
        before.append(b.last_offset if prev is None else max(prev, b.last_offset))
    log_last = before[-1]

    def problem(i: int, offset: int, message: str, log_offset: int | None = None) -> None:
        result.problems.append(IndexProblem(path, "offset-index", message, i, offset, log_offset))

    for i, entry in enumerate(view):
        if entry.offset < base:
            problem(i, entry.offset, f"offset {entry.offset} is below the base offset {base}")
            continue
        if entry.position >= log_size:
            problem(
                i,
                entry.offset,
                f"position {entry.position} is beyond the end of the log ({log_size} bytes)",
            )
            continue
        j = bisect.bisect_left(positions, entry.position)
        if j == len(positions) or positions[j] != entry.position:
            inside = batches[j - 1] if j > 0 else None
            where = (
                f"inside the batch at position {inside.position}"
                if inside is not None and entry.position < inside.position + inside.size
                else "not at a batch boundary"
            )
            problem(
                i,
                entry.offset,
                f"offset {entry.offset} points at position {entry.position}, {where}",
            )
            continue
        batch = batches[j]
        skipped = before[j]
        if batch.last_offset == entry.offset and (skipped is None or skipped < entry.offset):
            continue
        if entry.offset < batch.base_offset:
            problem(
                i,
                entry.offset,
                f"index offset {entry.offset} but the batch at position {entry.position} "
                f"starts at log offset {batch.base_offset} (a lookup of offset "
                f"{entry.offset} would start after it)",
                batch.base_offset,
            )
        elif skipped is not None and skipped >= entry.offset:
            problem(
                i,
                entry.offset,
                f"index offset {entry.offset} at position {entry.position}, but offset "
                f"{skipped} lies before that position (a lookup would skip it)",
                skipped,
            )
        elif log_last is not None and entry.offset > log_last:
            problem(
                i,
                entry.offset,
                f"index offset {entry.offset} is beyond the last offset of the log ({log_last})",
                log_last,
            )
        else:
            # Kafka's entry for a multi-batch append (a follower's): the append's last
            # offset with its first batch's position. Lookups stay correct.
            result.notes.append(
                IndexProblem(
                    path,
                    "offset-index",
                    f"index offset {entry.offset} points at the batch at position "
                    f"{entry.position} (offsets {batch.base_offset}..{batch.last_offset}): "
                    "an entry for a multi-batch append, as followers write; lookups are "
                    "correct",
                    i,
                    entry.offset,
                    batch.last_offset,
                )
            )


def _check_time_index(
    path: Path,
    base: int,
    by_last_offset: dict[int, _Lite],
    batches: list[_Lite],
    log_size: int,
    result: SegmentCheck,
    check_timestamps: bool,
) -> None:
    view = read_time_index(path, base)
    result.time_entries = len(view)
    for msg in view.problems():
        result.problems.append(IndexProblem(path, "time-index", msg))
    last_offset = batches[-1].last_offset if batches else None
    for i, entry in enumerate(view):
        batch = by_last_offset.get(entry.offset)
        if batch is None:
            beyond = last_offset is None or entry.offset > last_offset
            what = "beyond the end of the log" if beyond else "not the last offset of any batch"
            result.problems.append(
                IndexProblem(
                    path,
                    "time-index",
                    f"indexed offset {entry.offset} is {what}",
                    i,
                    entry.offset,
                )
            )
            continue
        if check_timestamps and batch.max_timestamp != entry.timestamp:
            result.problems.append(
                IndexProblem(
                    path,
                    "time-index",
                    f"index timestamp {entry.timestamp} but the batch ending at offset "
                    f"{entry.offset} has largest timestamp {batch.max_timestamp}",
                    i,
                    entry.offset,
                )
            )


# --- rebuilding ---------------------------------------------------------------


@dataclass(slots=True)
class RebuildPlan:
    """What rebuilding one segment's indexes writes, next to what is there now."""

    log_path: Path
    offset_entries: list[OffsetPosition]
    time_entries: list[TimestampOffset]
    txn_entries: list[AbortedTxn]
    valid_bytes: int
    invalid_bytes: int
    invalid_reason: str | None
    files: dict[str, tuple[bytes | None, bytes]] = field(default_factory=dict)

    @property
    def changed(self) -> list[str]:
        """Names of the index files whose content would change."""
        return sorted(name for name, (old, new) in self.files.items() if old != new)


def plan_rebuild(
    log_path: str | os.PathLike[str],
    *,
    index_interval_bytes: int = DEFAULT_INDEX_INTERVAL_BYTES,
    prior_segments: Iterable[Path] = (),
) -> RebuildPlan:
    """Compute a segment's indexes from its log without writing anything.

    `prior_segments` are the partition's earlier `.log` files, read shallowly to
    learn transactions still open when this segment starts (for `.txnindex`).
    """
    log = Path(log_path)
    parsed = parse_segment_file_name(log.name)
    if parsed is None or parsed.kind != "log":
        raise WrongFileKindError("not a segment .log file", path=str(log))
    base = parsed.base_offset
    tracker = TxnTracker()
    for prior in prior_segments:
        with open(prior, "rb") as pf:
            for item in FileRecords(pf).batches(0, validate=True):
                if isinstance(item, Damage):
                    break
                tracker.feed(item)
    tracker.aborted.clear()
    with open(log, "rb") as f:
        scan = scan_log(FileRecords(f), base, index_interval_bytes, on_batch=tracker.feed)
    txns = tracker.aborted
    plan = RebuildPlan(
        log,
        scan.offset_entries,
        scan.time_entries,
        txns,
        scan.valid_bytes,
        scan.invalid_bytes,
        scan.reason,
    )
    new_files = {
        segment_file_name(base, ".index", parsed.state): encode_offset_index(
            base, scan.offset_entries
        ),
        segment_file_name(base, ".timeindex", parsed.state): encode_time_index(
            base, scan.time_entries
        ),
    }
    txn_name = segment_file_name(base, ".txnindex", parsed.state)
    if txns or (log.parent / txn_name).exists():
        new_files[txn_name] = encode_txn_index(txns)
    for name, content in new_files.items():
        existing = log.parent / name
        old = existing.read_bytes() if existing.exists() else None
        plan.files[name] = (old, content)
    return plan


def apply_rebuild(plan: RebuildPlan) -> list[Path]:
    """Write the plan's changed index files atomically; return what was written."""
    written = []
    for name in plan.changed:
        path = plan.log_path.parent / name
        atomic_write(path, plan.files[name][1])
        written.append(path)
    return written


class TxnTracker:
    """Follows transactions through a partition's batches, recording aborted ones
    the way Kafka's producer state does for the `.txnindex`.

    The last stable offset of an aborted transaction is the first offset of the
    earliest other transaction still open, or the marker's offset + 1 when none is.
    """

    def __init__(self) -> None:
        self.ongoing: dict[int, int] = {}  # producer id -> first offset of its open txn
        self.aborted: list[AbortedTxn] = []

    def begin(self, producer_id: int, offset: int) -> None:
        """Account for a transactional data batch at `offset` (header-only callers)."""
        self.ongoing.setdefault(producer_id, offset)

    def feed(self, batch: LogBatch) -> None:
        """Account for one batch (called in offset order)."""
        header = batch.header
        if header is None or not header.is_transactional:
            return
        pid = header.producer_id
        if not header.is_control:
            self.begin(pid, header.base_offset)
            return
        try:
            records = list(batch.records())
        except CorruptRecordError:
            return
        for rec in records:
            try:
                _version, control_type = v2.parse_control_key(rec.key)
            except CorruptRecordError:
                continue
            if control_type not in (v2.CONTROL_ABORT, v2.CONTROL_COMMIT):
                continue
            first = self.ongoing.pop(pid, None)
            if control_type == v2.CONTROL_ABORT:
                others = [o for p, o in self.ongoing.items() if p != pid]
                lso = min(others) if others else rec.offset + 1
                self.aborted.append(
                    AbortedTxn(pid, rec.offset if first is None else first, rec.offset, lso)
                )
