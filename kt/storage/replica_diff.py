"""Offline comparison of the replicas of a partition: where they diverge, and what an
unclean leader election lost.

Given the log directories of several brokers (or partition directories of one
partition), each partition directory is a *replica*. `read_replica` reads one
without changing anything: every batch's header (base and last offset, partition
leader epoch, stored CRC, record count, timestamps, file and position; records are
never decoded, but each batch's CRC is checked so a damaged one is not trusted),
the `leader-epoch-checkpoint`, and the high watermark and log start offset its log
directory's `replication-offset-checkpoint` and `log-start-offset-checkpoint`
recorded. Damage (a torn tail, a CRC failure, an unreadable checkpoint) is a
problem of that replica; the replica is compared up to the damage, where Kafka's
recovery would truncate it.

`compare_partition` is pure. It picks the *reference*, the log that survives: the
replica with the highest latest leader epoch (the current leader's log), ties going
to the longer log, then to the order given. Each other replica is compared with it
batch by batch over the offsets both still hold (from the higher log start
offset): two batches are the same when base offset, last offset, partition leader
epoch and CRC agree. The first offset where they do not is the divergence point;
a replica whose log is a prefix of the reference's only lags.

A divergence matters (`committed`) when it lies below the high watermark the
diverging replica itself recorded: that replica had acknowledged those batches as
committed, and the reference's log does not have them — after an unclean election,
acknowledged records are gone from the leader and still on that replica. Every
batch a replica has that the reference does not is listed, grouped into offset
ranges with their epochs, record counts, timestamps and where they are on disk.
A divergence at or above that high watermark is an uncommitted tail Kafka
truncates (normal after a leader change), and with an unknown high watermark the
divergence is treated as committed (it cannot be shown harmless).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from kt.storage.checkpoint import TopicPartition, read_offset_checkpoint
from kt.storage.errors import StorageError, WrongFileKindError
from kt.storage.file_records import Damage, FileRecords
from kt.storage.leader_epoch import EpochEntry, LeaderEpochCache, read_leader_epoch_checkpoint
from kt.storage.log_files import (
    LEADER_EPOCH_CHECKPOINT_FILE,
    LOG_START_OFFSET_CHECKPOINT_FILE,
    META_PROPERTIES_FILE_NAME,
    REPLICATION_CHECKPOINT_FILE,
    PathKind,
    classify_path,
    list_segments,
    parse_partition_dir_name,
)
from kt.storage.meta_properties import read_meta_properties

__all__ = [
    "BatchSummary",
    "OffsetRange",
    "PartitionDiff",
    "Replica",
    "ReplicaComparison",
    "compare_partition",
    "find_replicas",
    "group_ranges",
    "read_replica",
    "replica_dir_kind",
]

# Kafka's KRaft metadata log and tiered storage's cache are not partition logs.
_NOT_PARTITIONS = frozenset({"__cluster_metadata-0", "remote-log-index-cache"})
_LEGACY_CODEC_MASK = 0x07


@dataclass(frozen=True, slots=True)
class BatchSummary:
    """What the comparison knows of one batch: its identity and where it is."""

    base_offset: int
    last_offset: int
    epoch: int  # partition leader epoch; -1 for legacy batches
    crc: int  # as stored in the batch
    records: int | None  # None: a compressed legacy wrapper (unknown without decoding)
    first_timestamp: int
    max_timestamp: int
    file: str
    position: int
    size: int

    @property
    def key(self) -> tuple[int, int, int, int]:
        """What two replicas' batches must share to be the same batch."""
        return (self.base_offset, self.last_offset, self.epoch, self.crc)


@dataclass(slots=True)
class Replica:
    """One replica (partition directory) as read from disk."""

    label: str  # the DIR it was given as (a log dir, or the partition dir itself)
    path: str  # the partition directory
    tp: TopicPartition
    broker_id: int | None = None
    batches: list[BatchSummary] = field(default_factory=list)
    log_start_offset: int = 0
    log_end_offset: int = 0
    high_watermark: int | None = None
    leader_epochs: list[EpochEntry] | None = None  # None: no readable checkpoint
    problems: list[str] = field(default_factory=list)

    @property
    def latest_epoch(self) -> int:
        """The replica's latest leader epoch: its checkpoint's last entry, else its last
        batch's epoch (-1 when neither says)."""
        epochs = [e.epoch for e in self.leader_epochs or []]
        epochs += [b.epoch for b in self.batches[-1:]]
        return max(epochs, default=-1)


@dataclass(frozen=True, slots=True)
class OffsetRange:
    """Consecutive batches (no offset gap between them), summarised."""

    first_offset: int
    last_offset: int
    batches: int
    records: int | None  # None when a legacy wrapper's count is unknown
    epochs: tuple[int, ...]
    min_timestamp: int
    max_timestamp: int
    # (file, first byte, end byte) of the batches, per segment file.
    locations: tuple[tuple[str, int, int], ...]


@dataclass(slots=True)
class ReplicaComparison:
    """One replica against the reference."""

    replica: Replica
    is_reference: bool
    compared_from: int = 0
    diverges_at: int | None = None
    # Batches this replica has that the reference does not (from the divergence on).
    extra: list[BatchSummary] = field(default_factory=list)
    # Batches the reference has from the divergence (or this replica's end) on that
    # this replica does not.
    missing: list[BatchSummary] = field(default_factory=list)
    # Where Kafka's leader-epoch truncation would cut this log (OffsetsForLeaderEpoch
    # with this replica's latest epoch against the reference's epochs); None: no cut.
    epoch_truncation_offset: int | None = None
    # The epoch of the first leader-epoch checkpoint entry that differs from the reference's.
    epoch_history_differs_at: int | None = None
    committed: bool = False  # the divergence is below this replica's high watermark

    @property
    def state(self) -> str:
        """reference, identical, lagging (a prefix of the reference), ahead (the
        reference is a prefix of it) or diverged (conflicting batches)."""
        if self.is_reference:
            return "reference"
        if self.diverges_at is None:
            return "lagging" if self.missing else "identical"
        return "diverged" if self.missing else "ahead"

    @property
    def extra_ranges(self) -> list[OffsetRange]:
        """`extra` grouped into ranges."""
        return group_ranges(self.extra)

    @property
    def acknowledged_lost(self) -> list[tuple[int, int]]:
        """The offset ranges of `extra` below this replica's high watermark (all of them
        when it recorded none): records it acknowledged that the reference lacks."""
        if not self.committed:
            return []
        hw = self.replica.high_watermark
        out: list[tuple[int, int]] = []
        for r in self.extra_ranges:
            last = r.last_offset if hw is None else min(r.last_offset, hw - 1)
            if r.first_offset <= last:
                out.append((r.first_offset, last))
        return out

    @property
    def missing_ranges(self) -> list[OffsetRange]:
        """`missing` grouped into ranges."""
        return group_ranges(self.missing)


@dataclass(slots=True)
class PartitionDiff:
    """The replicas of one partition compared."""

    tp: TopicPartition
    replicas: list[ReplicaComparison]
    reference: Replica | None  # None: a single replica, nothing compared
    notes: list[str] = field(default_factory=list)

    @property
    def diverges_at(self) -> int | None:
        """The first offset where any replica diverges from the reference."""
        points = [c.diverges_at for c in self.replicas if c.diverges_at is not None]
        return min(points, default=None)

    @property
    def common_high_watermark(self) -> int | None:
        """The lowest recorded high watermark (None when a replica recorded none)."""
        hws = [c.replica.high_watermark for c in self.replicas]
        if not hws or any(h is None for h in hws):
            return None
        return min(h for h in hws if h is not None)

    @property
    def committed_divergence(self) -> bool:
        """Acknowledged data differs: some replica diverges below its high watermark."""
        return any(c.committed for c in self.replicas)

    @property
    def damaged(self) -> bool:
        """Some replica could not be read whole."""
        return any(c.replica.problems for c in self.replicas)

    @property
    def verdict(self) -> str:
        """single, identical, lagging, diverged-uncommitted or diverged-committed."""
        if self.reference is None:
            return "single"
        states = {c.state for c in self.replicas}
        if self.committed_divergence:
            return "diverged-committed"
        if states & {"diverged", "ahead"}:
            return "diverged-uncommitted"
        if "lagging" in states:
            return "lagging"
        return "identical"

    @property
    def ok(self) -> bool:
        """No committed divergence and no damage."""
        return not self.committed_divergence and not self.damaged


# --- reading --------------------------------------------------------------------


def _message(exc: BaseException) -> str:
    message = getattr(exc, "message", None)
    return message if isinstance(message, str) and message else str(exc)


def _read_batches(rep: Replica) -> None:
    """Every batch of every segment, up to the first damage (where recovery cuts)."""
    for group in list_segments(rep.path):
        if group.log is None:
            continue
        with open(group.log, "rb") as fh:
            records = FileRecords(fh)
            next_offset = group.base_offset
            for item in records.batches(validate=True):
                if isinstance(item, Damage):
                    where = f"{group.log}: at position {item.position}"
                    rep.problems.append(
                        f"{where}: {item.reason}; compared up to offset {next_offset} "
                        "(recovery would truncate the log here)"
                    )
                    return
                if item.header is not None:
                    h = item.header
                    summary = BatchSummary(
                        h.base_offset, h.last_offset, h.partition_leader_epoch, h.crc,
                        h.record_count, h.base_timestamp, h.max_timestamp, str(group.log),
                        item.position, item.size_in_bytes,
                    )  # fmt: skip
                else:
                    # A legacy entry carries its last offset; its first is where the
                    # previous one ended (decompressing a wrapper is not needed).
                    compressed = item.data[17] & _LEGACY_CODEC_MASK
                    summary = BatchSummary(
                        min(next_offset, item.last_offset), item.last_offset, -1,
                        item.stored_crc, None if compressed else 1, item.max_timestamp,
                        item.max_timestamp, str(group.log), item.position, item.size_in_bytes,
                    )  # fmt: skip
                if rep.batches and summary.base_offset <= rep.batches[-1].last_offset:
                    rep.problems.append(
                        f"{group.log}: at position {item.position}: batch at offset "
                        f"{summary.base_offset} overlaps the previous batch, which ends at "
                        f"{rep.batches[-1].last_offset}; compared up to offset "
                        f"{rep.batches[-1].last_offset + 1}"
                    )
                    return
                rep.batches.append(summary)
                next_offset = summary.last_offset + 1


def _dir_checkpoint(log_dir: Path, name: str, tp: TopicPartition, rep: Replica) -> int | None:
    path = log_dir / name
    if not path.is_file():
        return None
    try:
        return read_offset_checkpoint(path, allow_empty=True).get(tp)
    except (StorageError, OSError) as exc:
        rep.problems.append(f"{path}: unreadable: {_message(exc)}")
        return None


def read_replica(partition_dir: Path, label: str, log_dir: Path | None = None) -> Replica:
    """Read one replica; `log_dir` holds its checkpoints and meta.properties (None: the
    partition directory's parent, if it has them). Damage is recorded, never raised."""
    parsed = parse_partition_dir_name(partition_dir.name)
    if parsed is None:
        raise WrongFileKindError("not a partition directory", path=str(partition_dir))
    tp = TopicPartition(parsed.topic, parsed.partition)
    rep = Replica(label, str(partition_dir), tp)
    parent = log_dir if log_dir is not None else partition_dir.parent
    meta = parent / META_PROPERTIES_FILE_NAME
    if meta.is_file():
        try:
            rep.broker_id = read_meta_properties(meta).node_id
        except (StorageError, OSError) as exc:
            rep.problems.append(f"{meta}: unreadable: {_message(exc)}")
    try:
        _read_batches(rep)
    except OSError as exc:
        rep.problems.append(f"{exc.filename or partition_dir}: {exc.strerror or exc}")
    segments = [g for g in list_segments(partition_dir) if g.log is not None]
    first_base = segments[0].base_offset if segments else 0
    rep.log_end_offset = rep.batches[-1].last_offset + 1 if rep.batches else first_base
    rep.high_watermark = _dir_checkpoint(parent, REPLICATION_CHECKPOINT_FILE, tp, rep)
    start = _dir_checkpoint(parent, LOG_START_OFFSET_CHECKPOINT_FILE, tp, rep)
    rep.log_start_offset = min(max(first_base, start or 0), rep.log_end_offset)
    epoch_path = partition_dir / LEADER_EPOCH_CHECKPOINT_FILE
    if epoch_path.is_file():
        try:
            rep.leader_epochs = read_leader_epoch_checkpoint(epoch_path)
        except (StorageError, OSError) as exc:
            rep.problems.append(f"{epoch_path}: unreadable: {_message(exc)}")
    return rep


def _partition_children(path: Path) -> list[str]:
    """Names of the live partition directories in `path`."""
    out = []
    for child in sorted(os.listdir(path)):
        parsed = parse_partition_dir_name(child)
        if parsed is None or parsed.state is not None or child in _NOT_PARTITIONS:
            continue
        if (path / child).is_dir():
            out.append(child)
    return out


def replica_dir_kind(path: Path) -> PathKind | None:
    """LOG_DIR or PARTITION_DIR for a directory `find_replicas` reads, else None.

    A log directory whose own name looks like a partition's (``/data/kafka-1``) is a
    log directory when it holds partition directories or a log directory's files.
    """
    kind = classify_path(path)
    if not path.is_dir() or kind not in (PathKind.LOG_DIR, PathKind.PARTITION_DIR):
        return None
    if kind is PathKind.PARTITION_DIR:
        markers = (META_PROPERTIES_FILE_NAME, REPLICATION_CHECKPOINT_FILE)
        if _partition_children(path) or any((path / m).is_file() for m in markers):
            return PathKind.LOG_DIR
    return kind


def find_replicas(paths: Sequence[Path]) -> list[Replica]:
    """Read every replica under `paths`: each a log directory (all its partitions) or a
    partition directory. Raises WrongFileKindError for any other path."""
    replicas: list[Replica] = []
    for path in paths:
        if not path.exists():
            raise WrongFileKindError("no such file or directory", path=str(path))
        kind = replica_dir_kind(path)
        if kind is PathKind.PARTITION_DIR:
            replicas.append(read_replica(path, str(path)))
        elif kind is PathKind.LOG_DIR:
            for child in _partition_children(path):
                replicas.append(read_replica(path / child, str(path), log_dir=path))
        else:
            raise WrongFileKindError("not a log directory or a partition directory", path=str(path))
    return replicas


# --- comparing (pure) -------------------------------------------------------------


def group_ranges(batches: Sequence[BatchSummary]) -> list[OffsetRange]:
    """Group batches (ascending) into ranges of consecutive offsets."""
    groups: list[list[BatchSummary]] = []
    for b in batches:
        if groups and b.base_offset == groups[-1][-1].last_offset + 1:
            groups[-1].append(b)
        else:
            groups.append([b])
    out: list[OffsetRange] = []
    for g in groups:
        counts = [b.records for b in g]
        records = None if any(c is None for c in counts) else sum(c or 0 for c in counts)
        locations: list[tuple[str, int, int]] = []
        for b in g:
            if locations and locations[-1][0] == b.file and locations[-1][2] == b.position:
                locations[-1] = (b.file, locations[-1][1], b.position + b.size)
            else:
                locations.append((b.file, b.position, b.position + b.size))
        out.append(
            OffsetRange(
                g[0].base_offset,
                g[-1].last_offset,
                len(g),
                records,
                tuple(sorted({b.epoch for b in g})),
                min(b.first_timestamp for b in g),
                max(b.max_timestamp for b in g),
                tuple(locations),
            )
        )
    return out


def choose_reference(replicas: Sequence[Replica]) -> Replica:
    """The replica with the highest latest leader epoch; ties: the longer log, then
    the first given."""
    best = replicas[0]
    for r in replicas[1:]:
        if (r.latest_epoch, r.log_end_offset) > (best.latest_epoch, best.log_end_offset):
            best = r
    return best


def _epoch_truncation(rep: Replica, ref: Replica) -> int | None:
    """Where Kafka's OffsetsForLeaderEpoch truncation would cut `rep`, following `ref`."""
    ref_epochs = ref.leader_epochs
    if ref_epochs is None or rep.latest_epoch < 0:
        return None
    cache = LeaderEpochCache(None, ref_epochs)
    _epoch, end = cache.end_offset_for(rep.latest_epoch, ref.log_end_offset)
    if end < 0 or end >= rep.log_end_offset:
        return None
    return end


def _epoch_history_difference(rep: Replica, ref: Replica) -> int | None:
    """The epoch of the first leader-epoch entry that differs from the reference's."""
    if rep.leader_epochs is None or ref.leader_epochs is None:
        return None
    for mine, theirs in zip(rep.leader_epochs, ref.leader_epochs, strict=False):
        if mine != theirs:
            return min(mine.epoch, theirs.epoch)
    return None


def _compare(rep: Replica, ref: Replica) -> ReplicaComparison:
    start = max(rep.log_start_offset, ref.log_start_offset)
    mine = [b for b in rep.batches if b.last_offset >= start]
    theirs = [b for b in ref.batches if b.last_offset >= start]
    i = 0
    while i < len(mine) and i < len(theirs) and mine[i].key == theirs[i].key:
        i += 1
    c = ReplicaComparison(rep, False, compared_from=start)
    if i < len(mine):
        at = mine[i].base_offset
        if i < len(theirs):
            at = min(at, theirs[i].base_offset)
        c.diverges_at = max(at, start)
        theirs_keys = {b.key for b in theirs[i:]}
        mine_keys = {b.key for b in mine[i:]}
        c.extra = [b for b in mine[i:] if b.key not in theirs_keys]
        c.missing = [b for b in theirs[i:] if b.key not in mine_keys]
        hw = rep.high_watermark
        c.committed = hw is None or c.diverges_at < hw
    else:
        c.missing = theirs[i:]
    c.epoch_truncation_offset = _epoch_truncation(rep, ref)
    c.epoch_history_differs_at = _epoch_history_difference(rep, ref)
    return c


def compare_partition(
    replicas: Sequence[Replica], reference: Replica | None = None
) -> PartitionDiff:
    """Compare the replicas of one partition with the reference (chosen by epoch when
    None). Reads nothing: works on what `read_replica` found."""
    if not replicas:
        raise ValueError("no replicas to compare")
    tp = replicas[0].tp
    if len(replicas) == 1:
        only = ReplicaComparison(replicas[0], True)
        return PartitionDiff(tp, [only], None, ["only one replica: nothing to compare"])
    ref = reference if reference is not None else choose_reference(replicas)
    comparisons = [ReplicaComparison(r, True) if r is ref else _compare(r, ref) for r in replicas]
    diff = PartitionDiff(tp, comparisons, ref)
    starts = {r.log_start_offset for r in replicas}
    if len(starts) > 1:
        diff.notes.append(
            f"log start offsets differ ({min(starts)}..{max(starts)}: retention or "
            f"DeleteRecords on some replicas); compared from offset {max(starts)}"
        )
    for c in comparisons:
        if c.replica.high_watermark is None and c.diverges_at is not None:
            diff.notes.append(
                f"{c.replica.label}: no high watermark recorded (no replication-offset-"
                "checkpoint entry): any divergence counts as committed"
            )
    return diff
