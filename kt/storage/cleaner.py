"""Log compaction: Apache Kafka's log cleaner (Cleaner, LogToClean, the retain rules).

A compacted log keeps, for every key, only the record at its highest offset (plus
tombstones for `delete.retention.ms`). One cleaning round of a log:

1. *Plan* (`plan_cleaning`, on the thread that owns the log): the clean section
   ends at the first dirty offset (the `cleaner-offset-checkpoint` entry); the
   cleanable section runs to the first uncleanable offset, the smallest of the last
   stable offset, the active segment's base and the first segment younger than
   `min.compaction.lag.ms`, rounded down to a segment boundary (kt cleans whole
   segments only). Its dirtiness is cleanable / (clean + cleanable) bytes;
   `max.compaction.lag.ms` makes a log due regardless.
2. *Map* (`Cleaner.clean`, any thread): the offset map learns every key of the
   dirty section and its latest offset; when the map's budget is exhausted the
   round covers only the prefix mapped so far and the next round continues.
3. *Recopy*: the segments from the log's start to the end of the mapped range are
   grouped (each group's logs at most `segment.bytes`, its indexes at most
   `segment.index.bytes`, offsets within an int32 of the base) and each group is
   rewritten into one `.cleaned` segment with `filter_batch` deciding, batch by
   batch, what stays. Offsets never change: a rebuilt batch keeps its base offset,
   last offset delta, producer id, epoch and base sequence.
4. *Swap* (`commit`, on the owner thread): `PartitionLog.replace_segments` renames
   `.cleaned` to `.swap`, retires the old segments as `.deleted` and renames the
   swap live; the log loader finishes or discards an interrupted swap.

`filter_batch` (with `record_decision`) is the one place that decides keep or drop;
`estimate` runs the very same round without writing, so `kt compaction estimate`
agrees exactly with what the broker's cleaner then does.

Transactions follow Kafka: aborted transactional records are dropped, a
transaction's COMMIT/ABORT marker is kept until none of its records remain and
then for `delete.retention.ms` more (the delete horizon stamped in its batch), the
last batch of each producer is kept even when emptied (sequence continuity), and so
is the last batch of the round.
"""

from __future__ import annotations

import enum
import os
import struct
import threading
import time
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import TYPE_CHECKING

from kt.storage import record_batch as v2
from kt.storage.errors import CorruptRecordError, StorageError
from kt.storage.file_records import Damage, FileRecords, LogBatch
from kt.storage.index_check import TxnTracker
from kt.storage.log_config import LONG_MAX, LogConfig
from kt.storage.log_files import (
    CLEANED_FILE_SUFFIX,
    CLEANER_CHECKPOINT_FILE,
    parse_segment_file_name,
    segment_file_name,
)
from kt.storage.offset_index import OFFSET_INDEX_ENTRY_SIZE
from kt.storage.offset_map import OffsetMap
from kt.storage.segment import BatchInfo, LogSegment
from kt.storage.txn_index import AbortedTxn

if TYPE_CHECKING:
    from kt.storage.log import PartitionLog

__all__ = [
    "CLEANER_CHECKPOINT_FILE",
    "CleanPlan",
    "CleanResult",
    "CleanStats",
    "Cleaner",
    "CleaningAbortedError",
    "Decision",
    "clean_log",
    "commit",
    "discard",
    "estimate",
    "filter_batch",
    "plan_cleaning",
    "record_decision",
]

INT32_MAX = 2**31 - 1
TIME_INDEX_ENTRY_SIZE = 12
# Rebuilt batches are written to the cleaned segment in chunks of about this size.
WRITE_CHUNK = 1024 * 1024
_MAX_TS = struct.Struct(">q")


class CleaningAbortedError(StorageError):
    """The round was stopped (broker shutdown, partition deleted) before its swap."""


# --- planning -----------------------------------------------------------------


@dataclass(slots=True)
class SegmentSnapshot:
    """What a cleaning needs of one segment, captured on the log's owner thread.

    The worker reads through its own descriptor (`open`), sized as captured: the
    owner may append to the active segment or retire segments meanwhile.
    """

    base_offset: int
    path: Path
    size: int
    offset_index_bytes: int
    time_index_bytes: int
    largest_timestamp: int
    segment: LogSegment | None = None
    fd: int = -1

    def records(self) -> FileRecords:
        """A reader over the captured bytes."""
        if self.fd < 0:
            raise StorageError("segment snapshot is not open", path=str(self.path))
        return FileRecords(self.fd, self.size)


@dataclass(slots=True)
class CleanPlan:
    """One log's clean/cleanable split (Kafka's LogToClean) and what a round reads."""

    directory: Path
    config: LogConfig
    segments: list[SegmentSnapshot]  # every segment, in offset order; the last is active
    log_start_offset: int
    first_dirty_offset: int
    first_uncleanable_offset: int
    clean_bytes: int
    cleanable_bytes: int
    max_compaction_delay_ms: int
    now_ms: int

    @property
    def cleanable_ratio(self) -> float:
        """cleanable / (clean + cleanable) bytes; 0 for nothing to clean."""
        total = self.clean_bytes + self.cleanable_bytes
        return self.cleanable_bytes / total if total else 0.0

    @property
    def needs_compaction_now(self) -> bool:
        """True when a dirty record waited longer than max.compaction.lag.ms."""
        return self.max_compaction_delay_ms > 0

    @property
    def eligible(self) -> bool:
        """Kafka's filter: due by max lag with something to clean, or dirty enough."""
        return (
            self.needs_compaction_now and self.cleanable_bytes > 0
        ) or self.cleanable_ratio > self.config.min_cleanable_dirty_ratio

    def open(self) -> None:
        """Open a descriptor per segment (on the owner thread, while the paths hold)."""
        try:
            for snap in self.segments:
                if snap.fd < 0:
                    snap.fd = os.open(snap.path, os.O_RDONLY)
        except BaseException:
            self.close()
            raise

    def close(self) -> None:
        """Close the descriptors `open` took."""
        for snap in self.segments:
            if snap.fd >= 0:
                os.close(snap.fd)
                snap.fd = -1


def plan_cleaning(
    log: PartitionLog,
    *,
    first_dirty_offset: int | None = None,
    now_ms: int | None = None,
    last_stable_offset: int | None = None,
) -> CleanPlan:
    """The clean/cleanable split of `log` (call on the thread that owns the log).

    `first_dirty_offset` is the log's cleaner checkpoint (None or out of range: the
    log start, as Kafka resets a bad checkpoint); `last_stable_offset` defaults to
    the high watermark (kt has no transactions yet).
    """
    now = _now(now_ms)
    snaps = []
    for seg in log.segments:
        snaps.append(
            SegmentSnapshot(
                seg.base_offset,
                seg.log_path,
                seg.size,
                len(seg.offset_index) * OFFSET_INDEX_ENTRY_SIZE,
                len(seg.time_index) * TIME_INDEX_ENTRY_SIZE,
                seg.largest_timestamp,
                seg,
            )
        )
    lso = log.high_watermark if last_stable_offset is None else last_stable_offset
    return _plan(
        log.dir,
        log.config,
        snaps,
        log.log_start_offset,
        log.log_end_offset,
        first_dirty_offset,
        lso,
        now,
    )


def _plan(
    directory: Path,
    config: LogConfig,
    snaps: list[SegmentSnapshot],
    log_start: int,
    log_end: int,
    first_dirty: int | None,
    lso: int,
    now: int,
) -> CleanPlan:
    if first_dirty is None or first_dirty < log_start or first_dirty > log_end:
        first_dirty = log_start
    active = snaps[-1]
    bound = min(lso, active.base_offset)
    if config.min_compaction_lag_ms > 0:
        for snap in snaps[:-1]:
            if snap.largest_timestamp > now - config.min_compaction_lag_ms:
                bound = min(bound, snap.base_offset)
                break
    # Whole segments only: the segment holding the bound is not cleanable.
    first_uncleanable = snaps[0].base_offset
    for snap in snaps:
        if snap.base_offset <= bound:
            first_uncleanable = snap.base_offset
    first_dirty = min(first_dirty, first_uncleanable)
    clean_bytes = cleanable_bytes = 0
    earliest_dirty_ts = LONG_MAX
    for i, snap in enumerate(snaps[:-1]):
        upper = snaps[i + 1].base_offset
        if upper <= first_dirty:
            clean_bytes += snap.size
        elif snap.base_offset < first_uncleanable:
            cleanable_bytes += snap.size
        if upper > first_dirty and config.max_compaction_lag_ms < LONG_MAX:
            ts = _first_batch_timestamp(snap)
            if ts > 0:
                earliest_dirty_ts = min(earliest_dirty_ts, ts)
    delay = 0
    if config.max_compaction_lag_ms < LONG_MAX:
        clean_until = now - config.max_compaction_lag_ms
        if earliest_dirty_ts < clean_until:
            delay = clean_until - earliest_dirty_ts
    return CleanPlan(
        directory,
        config,
        snaps,
        log_start,
        first_dirty,
        first_uncleanable,
        clean_bytes,
        cleanable_bytes,
        delay,
        now,
    )


def _first_batch_timestamp(snap: SegmentSnapshot) -> int:
    seg = snap.segment
    records = seg.records if seg is not None else snap.records()
    for head in records.headers(0):
        return head.max_timestamp if not isinstance(head, Damage) else -1
    return -1


# --- the keep/drop decision ---------------------------------------------------


class Decision(enum.Enum):
    """What happens to one record."""

    KEEP = "keep"
    DROP_SUPERSEDED = "superseded"
    DROP_TOMBSTONE = "tombstone expired"
    DROP_NO_KEY = "no key"
    DROP_DISCARDED_BATCH = "aborted or expired marker"


def record_decision(
    offset: int,
    key: bytes | None,
    value: bytes | None,
    delete_horizon_ms: int | None,
    offset_map: OffsetMap,
    map_end_offset: int,
    now_ms: int,
) -> Decision:
    """Kafka's shouldRetainRecord for a data record of a batch that is not discarded.

    Past the mapped range everything stays (the round did not deduplicate it); a
    record without a key is invalid in a compacted log; otherwise only the key's
    latest record stays, and a tombstone only until its batch's delete horizon.
    """
    if offset >= map_end_offset:
        return Decision.KEEP
    if key is None:
        return Decision.DROP_NO_KEY
    if offset < offset_map.get(key):
        return Decision.DROP_SUPERSEDED
    if value is not None:
        return Decision.KEEP
    if delete_horizon_ms is None or now_ms < delete_horizon_ms:
        return Decision.KEEP
    return Decision.DROP_TOMBSTONE


@dataclass(slots=True)
class CleanStats:
    """What a round read, kept and dropped (the cleaner's log line, the estimate)."""

    segments: int = 0
    batches_read: int = 0
    records_read: int = 0
    bytes_read: int = 0
    batches_kept: int = 0
    records_kept: int = 0
    bytes_kept: int = 0
    empty_batches_kept: int = 0
    superseded_dropped: int = 0
    tombstones_kept: int = 0
    tombstones_dropped: int = 0
    keyless_dropped: int = 0
    discarded_dropped: int = 0
    legacy_batches_kept: int = 0
    distinct_keys: int = 0
    map_full: bool = False
    # The largest delete horizon left in the cleaned segments (None: no tombstones).
    max_delete_horizon_ms: int | None = None

    @property
    def records_dropped(self) -> int:
        """Records read and not written."""
        return self.records_read - self.records_kept

    @property
    def bytes_dropped(self) -> int:
        """Bytes read minus bytes written (rebuilt batches may differ in size)."""
        return self.bytes_read - self.bytes_kept

    def to_dict(self) -> dict[str, object]:
        """A JSON-ready view."""
        out: dict[str, object] = {f.name: getattr(self, f.name) for f in fields(self)}
        out["records_dropped"] = self.records_dropped
        out["bytes_dropped"] = self.bytes_dropped
        return out


class _TxnState:
    """Kafka's CleanedTransactionMetadata: which batches belong to aborted transactions,
    and whether a marker's transaction still has records."""

    def __init__(self, aborted: list[AbortedTxn]) -> None:
        self._pending = deque(sorted(aborted, key=lambda t: t.first_offset))
        # producer id -> (aborted txn, whether a batch of it was seen this round)
        self._ongoing_aborted: dict[int, tuple[AbortedTxn, bool]] = {}
        self._ongoing_committed: set[int] = set()
        self.index_entries: list[AbortedTxn] = []

    def _consume_up_to(self, offset: int) -> None:
        while self._pending and self._pending[0].first_offset <= offset:
            txn = self._pending.popleft()
            self._ongoing_aborted.setdefault(txn.producer_id, (txn, False))

    def on_batch(self, header: v2.BatchHeader) -> bool:
        """A data batch: True when it belongs to an aborted transaction."""
        self._consume_up_to(header.last_offset)
        if not header.is_transactional:
            return False
        entry = self._ongoing_aborted.get(header.producer_id)
        if entry is not None:
            self._ongoing_aborted[header.producer_id] = (entry[0], True)
            return True
        self._ongoing_committed.add(header.producer_id)
        return False

    def on_control(self, header: v2.BatchHeader, records: list[v2.RecordTuple]) -> bool:
        """A control batch: True when its transaction has no records left."""
        self._consume_up_to(header.last_offset)
        if not records:
            return True  # an emptied control batch was cleaned before
        try:
            _version, control_type = v2.parse_control_key(records[0][2])
        except CorruptRecordError:
            return False
        pid = header.producer_id
        if control_type == v2.CONTROL_ABORT:
            entry = self._ongoing_aborted.pop(pid, None)
            if entry is not None and entry[1]:
                self.index_entries.append(entry[0])
                return False
            return True
        if control_type == v2.CONTROL_COMMIT:
            if pid in self._ongoing_committed:
                self._ongoing_committed.discard(pid)
                return False
            return True
        return False


@dataclass(slots=True)
class _Round:
    """Everything `filter_batch` consults, fixed for one round."""

    offset_map: OffsetMap
    map_end_offset: int
    now_ms: int
    delete_retention_ms: int
    txn: _TxnState
    # producer id -> last offset of its last data batch in the log
    last_data_offset: dict[int, int]
    # producer id -> epoch of its last marker, for producers with no data batch left
    marker_only_epoch: dict[int, int]


def filter_batch(batch: LogBatch, rnd: _Round, stats: CleanStats) -> bytes | None:
    """The bytes a batch becomes in the cleaned segment, or None when it goes.

    Kafka's checkBatchRetention + MemoryRecords.filterTo: the batch-level verdict
    (aborted data and expired markers are discarded; the last batch of an active
    producer and the last batch of the round stay even when emptied), then
    `record_decision` per record. A batch keeping all its records is copied as is
    unless a delete horizon must be stamped (first cleaning that keeps one of its
    tombstones, or a marker whose transaction is empty); otherwise it is rebuilt.
    """
    header = batch.header
    stats.batches_read += 1
    stats.bytes_read += batch.size_in_bytes
    if header is None:
        # Legacy (magic 0/1) entries are copied untouched: kt writes only v2.
        stats.legacy_batches_kept += 1
        stats.batches_kept += 1
        stats.bytes_kept += batch.size_in_bytes
        return bytes(batch.data)
    records = list(v2.iter_record_tuples(header, batch.data))
    stats.records_read += len(records)
    horizon = header.delete_horizon_ms
    if header.is_control:
        can_discard = rnd.txn.on_control(header, records)
        discard_records = can_discard and horizon is not None and horizon <= rnd.now_ms
    else:
        can_discard = rnd.txn.on_batch(header)
        discard_records = can_discard
    pid = header.producer_id
    last_of_producer = pid >= 0 and (
        rnd.last_data_offset.get(pid) == header.last_offset
        if pid in rnd.last_data_offset
        else header.is_control and rnd.marker_only_epoch.get(pid) == header.producer_epoch
    )
    retain_empty = last_of_producer or header.next_offset == rnd.map_end_offset
    if discard_records and not retain_empty:
        stats.discarded_dropped += len(records)
        return None
    kept: list[v2.RecordTuple] = []
    tombstones = 0
    for rec in records:
        offset, _ts, key, value, _headers, _seq = rec
        if discard_records:
            stats.discarded_dropped += 1
            continue
        if header.is_control:
            kept.append(rec)
            continue
        decision = record_decision(
            offset, key, value, horizon, rnd.offset_map, rnd.map_end_offset, rnd.now_ms
        )
        if decision is Decision.KEEP:
            kept.append(rec)
            if value is None:
                tombstones += 1
        elif decision is Decision.DROP_SUPERSEDED:
            stats.superseded_dropped += 1
        elif decision is Decision.DROP_TOMBSTONE:
            stats.tombstones_dropped += 1
        else:
            stats.keyless_dropped += 1
    stats.tombstones_kept += tombstones
    marker_for_empty_txn = can_discard and header.is_control
    needs_horizon = (tombstones > 0 or marker_for_empty_txn) and horizon is None
    if kept:
        if len(kept) == len(records) and not needs_horizon:
            out = bytes(batch.data)
        else:
            new_horizon = rnd.now_ms + rnd.delete_retention_ms if needs_horizon else horizon
            out = _rebuild(header, kept, new_horizon)
            horizon = new_horizon
        if (
            horizon is not None
            and (tombstones > 0 or header.is_control)
            and (stats.max_delete_horizon_ms is None or horizon > stats.max_delete_horizon_ms)
        ):
            stats.max_delete_horizon_ms = horizon
    elif retain_empty:
        out = _empty_batch(header)
        stats.empty_batches_kept += 1
    else:
        return None
    stats.batches_kept += 1
    stats.records_kept += len(kept)
    stats.bytes_kept += len(out)
    return out


def _rebuild(header: v2.BatchHeader, kept: list[v2.RecordTuple], horizon: int | None) -> bytes:
    """A batch holding `kept` with the original's offsets and producer fields."""
    log_append = header.timestamp_type == v2.LOG_APPEND_TIME
    specs = [
        v2.RecordSpec(key, value, headers, ts, offset - header.base_offset)
        for offset, ts, key, value, headers, _seq in kept
    ]
    return v2.build_batch(
        specs,
        base_offset=header.base_offset,
        codec=header.codec_id,
        timestamp_type=header.timestamp_type,
        log_append_time=header.max_timestamp if log_append else None,
        producer_id=header.producer_id,
        producer_epoch=header.producer_epoch,
        base_sequence=header.base_sequence,
        partition_leader_epoch=header.partition_leader_epoch,
        is_transactional=header.is_transactional,
        is_control=header.is_control,
        delete_horizon_ms=horizon,
        last_offset_delta=header.last_offset_delta,
    )


def _empty_batch(header: v2.BatchHeader) -> bytes:
    """Kafka's writeEmptyHeader: no records, the original offsets, producer fields and
    max timestamp, uncompressed."""
    data = bytearray(
        v2.build_batch(
            [],
            base_offset=header.base_offset,
            timestamp_type=header.timestamp_type,
            base_timestamp=header.max_timestamp,
            producer_id=header.producer_id,
            producer_epoch=header.producer_epoch,
            base_sequence=header.base_sequence,
            partition_leader_epoch=header.partition_leader_epoch,
            is_transactional=header.is_transactional,
            is_control=header.is_control,
            last_offset_delta=header.last_offset_delta,
        )
    )
    _MAX_TS.pack_into(data, 35, header.max_timestamp)
    struct.pack_into(">I", data, v2.CRC_OFFSET, v2.compute_crc(data))
    return bytes(data)


# --- the round ------------------------------------------------------------------


@dataclass(slots=True)
class CleanedGroup:
    """Old segments and the cleaned segment replacing them (None in a dry run)."""

    old: list[SegmentSnapshot]
    new: LogSegment | None


@dataclass(slots=True)
class CleanResult:
    """A finished round: groups ready to swap, stats, and the new first dirty offset."""

    plan: CleanPlan
    groups: list[CleanedGroup] = field(default_factory=list)
    stats: CleanStats = field(default_factory=CleanStats)
    end_offset: int = 0


class Cleaner:
    """Runs cleaning rounds with one offset map (one per cleaner thread).

    `map_capacity` is the map's entry budget (see offset_map.capacity_for; None:
    unbounded). `abort` is checked between batches: setting it makes a running
    round raise CleaningAbortedError and remove its `.cleaned` files.
    """

    def __init__(
        self, map_capacity: int | None = None, abort: threading.Event | None = None
    ) -> None:
        self.offset_map = OffsetMap(map_capacity)
        self.abort = abort or threading.Event()

    def clean(self, plan: CleanPlan, *, dry_run: bool = False) -> CleanResult:
        """One round over an opened plan: map the dirty section, recopy, and leave
        the `.cleaned` segments for `commit` (nothing is written with `dry_run`)."""
        result = CleanResult(plan)
        try:
            self._clean(plan, result, dry_run)
        except BaseException:
            discard(result)
            raise
        return result

    def _check_abort(self) -> None:
        if self.abort.is_set():
            raise CleaningAbortedError("cleaning aborted")

    def _clean(self, plan: CleanPlan, result: CleanResult, dry_run: bool) -> None:
        stats = result.stats
        omap = self.offset_map
        omap.clear()
        last_data, marker_only, aborted = self._scan_producers(plan)
        end = self._build_map(plan, aborted, stats)
        stats.distinct_keys = len(omap)
        result.end_offset = end
        rnd = _Round(
            omap,
            end,
            plan.now_ms,
            plan.config.delete_retention_ms,
            _TxnState(aborted),
            last_data,
            marker_only,
        )
        for group in _group_segments(plan, end):
            self._check_abort()
            new = None if dry_run else _create_cleaned(plan, group[0].base_offset)
            result.groups.append(CleanedGroup(group, new))
            self._clean_group(group, new, rnd, stats)

    def _scan_producers(
        self, plan: CleanPlan
    ) -> tuple[dict[int, int], dict[int, int], list[AbortedTxn]]:
        """Each producer's last data batch and the aborted transactions, from the
        headers of the whole log (only control batches are read whole)."""
        last_data: dict[int, int] = {}
        last_marker_epoch: dict[int, int] = {}
        tracker = TxnTracker()
        for snap in plan.segments:
            records = snap.records()
            for head in records.headers(0):
                if isinstance(head, Damage):
                    break
                h = head.header
                if h is None or h.producer_id < 0:
                    continue
                if not h.is_control:
                    last_data[h.producer_id] = h.last_offset
                    if h.is_transactional:
                        tracker.begin(h.producer_id, h.base_offset)
                    continue
                last_marker_epoch[h.producer_id] = h.producer_epoch
                if h.is_transactional:
                    for item in records.batches(head.position, head.next_position):
                        if isinstance(item, LogBatch):
                            tracker.feed(item)
            self._check_abort()
        marker_only = {p: e for p, e in last_marker_epoch.items() if p not in last_data}
        return last_data, marker_only, tracker.aborted

    def _build_map(self, plan: CleanPlan, aborted: list[AbortedTxn], stats: CleanStats) -> int:
        """Pass 1: map the dirty section's keys; returns the end of the mapped range."""
        omap = self.offset_map
        start, upper = plan.first_dirty_offset, plan.first_uncleanable_offset
        txn = _TxnState(aborted)
        for snap in plan.segments[:-1]:
            if snap.base_offset >= upper:
                break
            for item in snap.records().batches(0, validate=True):
                if isinstance(item, Damage):
                    raise CorruptRecordError(
                        f"cannot clean: {item.reason}", path=str(snap.path), position=item.position
                    )
                header = item.header
                if item.last_offset < start or header is None:
                    continue
                if header.is_control:
                    txn.on_control(header, list(v2.iter_record_tuples(header, item.data)))
                    continue
                if txn.on_batch(header):
                    continue
                keyed = [
                    (key, offset)
                    for offset, _ts, key, _v, _h, _s in v2.iter_record_tuples(header, item.data)
                    if key is not None and offset >= start
                ]
                if not omap.room_for(len(keyed)):
                    if len(omap) == 0:
                        raise StorageError(
                            f"log.cleaner.dedupe.buffer.size is too small for a batch of "
                            f"{len(keyed)} keys at offset {header.base_offset}",
                            path=str(snap.path),
                        )
                    stats.map_full = True
                    return header.base_offset
                for key, offset in keyed:
                    omap.put(key, offset)
            self._check_abort()
        return upper

    def _clean_group(
        self,
        group: list[SegmentSnapshot],
        new: LogSegment | None,
        rnd: _Round,
        stats: CleanStats,
    ) -> None:
        """Pass 2 for one group: recopy what `filter_batch` keeps into `new`."""
        buf = bytearray()
        infos: list[BatchInfo] = []
        for snap in group:
            stats.segments += 1
            for n, item in enumerate(snap.records().batches(0, validate=True)):
                if isinstance(item, Damage):
                    raise CorruptRecordError(
                        f"cannot clean: {item.reason}", path=str(snap.path), position=item.position
                    )
                if n % 256 == 255:
                    self._check_abort()
                out = filter_batch(item, rnd, stats)
                if out is None or new is None:
                    continue
                head = v2.parse_header(out) if item.header is not None else None
                last = head.last_offset if head is not None else item.last_offset
                max_ts = head.max_timestamp if head is not None else item.max_timestamp
                infos.append(BatchInfo(last, max_ts, len(out)))
                buf += out
                if len(buf) >= WRITE_CHUNK:
                    new.append(buf, infos)
                    buf, infos = bytearray(), []
        if new is not None:
            if infos:
                new.append(buf, infos)
            for txn in rnd.txn.index_entries:
                new.append_aborted_txn(txn)
            new.on_become_inactive()
            new.flush()
        rnd.txn.index_entries = []


def _group_segments(plan: CleanPlan, end: int) -> list[list[SegmentSnapshot]]:
    """Kafka's groupSegmentsBySize over the segments holding offsets below `end`."""
    segs = [s for s in plan.segments[:-1] if s.base_offset < end]
    max_size = plan.config.segment_bytes
    max_index = plan.config.segment_index_bytes
    groups: list[list[SegmentSnapshot]] = []
    i = 0
    while i < len(segs):
        group = [segs[i]]
        log_size = segs[i].size
        index_size = segs[i].offset_index_bytes
        time_size = segs[i].time_index_bytes
        i += 1
        while i < len(segs):
            nxt = segs[i]
            upper = segs[i + 1].base_offset if i + 1 < len(segs) else end
            if (
                log_size + nxt.size > max_size
                or index_size + nxt.offset_index_bytes > max_index
                or time_size + nxt.time_index_bytes > max_index
                or (nxt.size > 0 and upper - 1 - group[0].base_offset > INT32_MAX)
            ):
                break
            group.append(nxt)
            log_size += nxt.size
            index_size += nxt.offset_index_bytes
            time_size += nxt.time_index_bytes
            i += 1
        groups.append(group)
    return groups


def _create_cleaned(plan: CleanPlan, base: int) -> LogSegment:
    for ext in (".log", ".index", ".timeindex", ".txnindex"):
        (plan.directory / segment_file_name(base, ext, CLEANED_FILE_SUFFIX)).unlink(missing_ok=True)
    return LogSegment.open(
        plan.directory,
        base,
        index_interval_bytes=plan.config.index_interval_bytes,
        max_index_size=plan.config.segment_index_bytes,
        create=True,
        suffix=CLEANED_FILE_SUFFIX,
    )


def discard(result: CleanResult) -> None:
    """Close and remove the `.cleaned` segments of a round that will not be swapped in."""
    for group in result.groups:
        seg = group.new
        if seg is None or seg.suffix != CLEANED_FILE_SUFFIX:
            continue
        paths = seg.file_paths()
        seg.close()
        for p in paths:
            p.unlink(missing_ok=True)
        group.new = None


# --- swapping in --------------------------------------------------------------------


def still_current(log: PartitionLog, result: CleanResult) -> bool:
    """True when every replaced segment is still in `log`, unchanged and not active."""
    live = log.segments
    for group in result.groups:
        for snap in group.old:
            seg = snap.segment
            if seg is None or seg is live[-1] or seg.size != snap.size:
                return False
            if not any(s is seg for s in live):
                return False
    return True


def commit(log: PartitionLog, result: CleanResult, *, now_ms: int | None = None) -> bool:
    """Swap a round's cleaned segments into `log` (on the log's owner thread).

    False, with the cleaned files removed, when the log changed under the round
    (segments retired or truncated meanwhile). Exceptions from the swap itself are
    storage failures: the loader completes or discards the swap at the next start.
    """
    if not still_current(log, result):
        discard(result)
        return False
    for i, group in enumerate(result.groups):
        new = group.new
        if new is None:
            continue
        old = [s.segment for s in group.old if s.segment is not None]
        try:
            log.replace_segments([new], old, now_ms=now_ms)
        except BaseException:
            for later in result.groups[i + 1 :]:
                discard(CleanResult(result.plan, [later]))
            raise
        group.new = None
    return True


def clean_log(
    log: PartitionLog,
    *,
    first_dirty_offset: int | None = None,
    now_ms: int | None = None,
    map_capacity: int | None = None,
) -> CleanResult:
    """Plan, clean and swap one round of `log` synchronously (tools and tests; the
    broker splits these across its loop and a cleaner thread)."""
    plan = plan_cleaning(log, first_dirty_offset=first_dirty_offset, now_ms=now_ms)
    plan.open()
    try:
        result = Cleaner(map_capacity).clean(plan)
    finally:
        plan.close()
    commit(log, result, now_ms=now_ms)
    return result


# --- offline estimate -------------------------------------------------------------


def estimate(
    partition_dir: str | os.PathLike[str],
    *,
    config: LogConfig | None = None,
    now_ms: int | None = None,
) -> CleanResult:
    """What one full cleaning of a partition directory would keep and drop, without
    writing anything: the same round the broker runs on a log whose checkpoint is at
    its start, with the high watermark at the log end and an unbounded map.

    Reads only the live `.log` files (the last one is taken as the active segment).
    """
    d = Path(partition_dir)
    cfg = config or LogConfig(cleanup_policy="compact")
    bases = []
    for entry in os.scandir(d):
        parsed = parse_segment_file_name(entry.name)
        if parsed is not None and parsed.kind == "log" and parsed.state is None:
            bases.append(parsed.base_offset)
    if not bases:
        raise StorageError("no segments in the partition directory", path=str(d))
    snaps = [
        SegmentSnapshot(b, d / segment_file_name(b, ".log"), 0, 0, 0, -1) for b in sorted(bases)
    ]
    plan = CleanPlan(d, cfg, snaps, snaps[0].base_offset, 0, 0, 0, 0, 0, _now(now_ms))
    plan.open()
    try:
        log_end = snaps[0].base_offset
        for snap in snaps:
            snap.size = os.fstat(snap.fd).st_size
            largest, next_offset = _scan_segment(snap)
            snap.largest_timestamp = (
                largest if largest >= 0 else int(os.stat(snap.path).st_mtime * 1000)
            )
            snap.offset_index_bytes = _file_size(d / segment_file_name(snap.base_offset, ".index"))
            snap.time_index_bytes = _file_size(
                d / segment_file_name(snap.base_offset, ".timeindex")
            )
            log_end = max(log_end, next_offset)
        real = _plan(d, cfg, snaps, snaps[0].base_offset, log_end, None, log_end, plan.now_ms)
        return Cleaner(None).clean(real, dry_run=True)
    finally:
        plan.close()


def _scan_segment(snap: SegmentSnapshot) -> tuple[int, int]:
    """(largest timestamp, next offset) of a segment from its headers."""
    largest = -1
    next_offset = snap.base_offset
    for head in snap.records().headers(0):
        if isinstance(head, Damage):
            break
        largest = max(largest, head.max_timestamp)
        next_offset = head.next_offset
    return largest, next_offset


def _file_size(path: Path) -> int:
    try:
        return path.stat().st_size
    except FileNotFoundError:
        return 0


def _now(now_ms: int | None) -> int:
    return int(time.time() * 1000) if now_ms is None else now_ms


def iter_live_records(log: PartitionLog) -> Iterator[v2.RecordTuple]:
    """Every data record of `log` in offset order (tests and tools)."""
    for batch in log.iter_batches():
        header = batch.header
        if header is None or header.is_control:
            continue
        yield from v2.iter_record_tuples(header, batch.data)
