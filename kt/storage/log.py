"""The partition log: an ordered set of segments the broker appends to and reads from.

Mirrors Kafka's UnifiedLog/LocalLog split in one class: it owns the segments and
the offsets that bound them — log start offset, recovery point, log end offset
(LEO) and high watermark — and the leader-epoch cache. Invariant:

    log_start_offset <= high_watermark <= log_end_offset

The append path never decodes records: it frames and CRC-checks the batches,
patches base offset and leader epoch in place (outside the CRC) and writes the
bytes. Loading resolves leftovers of interrupted compaction and deletion
(`.cleaned`, `.swap`, `.deleted`) and, after an unclean shutdown, recovers every
segment from the recovery point on.

Not thread-safe: the broker serialises calls per partition.
"""

from __future__ import annotations

import enum
import itertools
import os
import random
import struct
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from kt.storage import record_batch as v2
from kt.storage.atomic import fsync_dir
from kt.storage.errors import (
    CorruptRecordError,
    OffsetOutOfRangeError,
    StorageError,
)
from kt.storage.file_records import Damage, LogBatch
from kt.storage.index_check import TxnTracker
from kt.storage.leader_epoch import LeaderEpochCache
from kt.storage.log_config import LogConfig
from kt.storage.log_files import (
    CLEANED_FILE_SUFFIX as CLEANED_SUFFIX,
)
from kt.storage.log_files import (
    DELETED_FILE_SUFFIX as DELETED_SUFFIX,
)
from kt.storage.log_files import (
    SWAP_FILE_SUFFIX as SWAP_SUFFIX,
)
from kt.storage.log_files import (
    parse_segment_file_name,
    segment_file_name,
)
from kt.storage.retention import (
    RetentionPlan,
    RetentionResult,
    select_deletable,
)
from kt.storage.segment import BatchInfo, LogSegment, RecoveryResult
from kt.storage.txn_index import AbortedTxn

LEADER_EPOCH_CHECKPOINT = "leader-epoch-checkpoint"
# Codec ids 0-4 are none, gzip, snappy, lz4 and zstd; 5-7 are not defined.
MAX_CODEC_ID = 4


class AppendOrigin(enum.Enum):
    """Who wrote the batches, which decides how they are validated (Kafka's AppendOrigin).

    CLIENT appends get every producer-facing check; COORDINATOR appends (transaction
    markers, group and transaction coordinator records) may carry control batches;
    REPLICATION appends are copies of a leader's log and are checked only for
    framing, CRC, magic and offset order (compacted batches whose offset delta
    exceeds their record count, and empty batches kept for producer state, are valid).
    """

    CLIENT = "client"
    COORDINATOR = "coordinator"
    REPLICATION = "replication"


@dataclass(slots=True)
class AppendResult:
    """What an append wrote: offsets, timestamps, and where."""

    first_offset: int
    last_offset: int
    max_timestamp: int
    offset_of_max_timestamp: int
    log_append_time: int
    log_start_offset: int
    batches: int
    bytes: int
    # The append rolled a new segment first (its callers snapshot producer state then).
    rolled: bool = False


@dataclass(frozen=True, slots=True)
class FetchSlice:
    """Bytes of one segment to send for a fetch (zero-copy with sendfile)."""

    segment: LogSegment
    position: int
    length: int
    first_offset: int

    def read_bytes(self) -> bytes:
        """The slice's bytes (for callers that cannot sendfile)."""
        return self.segment.records.read(self.position, self.length)


@dataclass(slots=True)
class LoadReport:
    """What loading a log found and fixed, for logs and forensics.

    `recovery_point` is the checkpointed offset recovery started from after an
    unclean shutdown (None after a clean one); `recovered_bytes` counts the bytes
    of the recovered segments read and re-validated, truncated ones included.
    """

    recovered_segments: list[int] = field(default_factory=list)
    recovery_point: int | None = None
    recovered_bytes: int = 0
    elapsed_s: float = 0.0
    truncated_bytes: int = 0
    truncation_reasons: list[str] = field(default_factory=list)
    deleted_files: list[str] = field(default_factory=list)
    swapped_in: list[str] = field(default_factory=list)
    rebuilt_indexes: list[int] = field(default_factory=list)


class PartitionLog:
    """One partition's log on disk."""

    def __init__(
        self,
        directory: Path,
        config: LogConfig,
        segments: list[LogSegment],
        log_start_offset: int,
        recovery_point: int,
        leader_epoch_cache: LeaderEpochCache,
        load_report: LoadReport,
        rng: random.Random | None = None,
    ) -> None:
        self.dir = directory
        self.config = config
        self._segments = segments
        self.log_start_offset = log_start_offset
        self.recovery_point = recovery_point
        self.leader_epoch_cache = leader_epoch_cache
        self.load_report = load_report
        self.log_end_offset = segments[-1].read_next_offset()
        # Kafka starts the high watermark at the log start offset; the broker sets it
        # from replication-offset-checkpoint with update_high_watermark.
        self.high_watermark = log_start_offset
        self.unflushed_messages = 0
        self.last_flush_ms = int(time.time() * 1000)
        self._rng = rng or random.Random()
        # Segments removed from the log whose files wait (renamed `.deleted`) for
        # file.delete.delay.ms before being closed: a fetch may still send from them.
        self._pending_deletes: list[tuple[int, LogSegment]] = []
        # (bound offset, segment base, position) of the last read's upper bound.
        self._bound_cache: tuple[int, int, int | None] | None = None
        self._epochs_flushed = leader_epoch_cache.entries
        # The base offset of the newest rolled segment not yet flushed (see flush_rolled).
        self.pending_roll_flush: int | None = None
        # Who maintains the log right now (retention, compaction, ...), see
        # try_begin_maintenance; a lock because the cleaner may run in a thread.
        self._maintenance_lock = threading.Lock()
        self._maintenance: str | None = None
        for seg in segments:
            seg.roll_jitter_ms = config.random_segment_jitter(self._rng)

    # --- loading ---------------------------------------------------------

    @classmethod
    def open(
        cls,
        directory: str | os.PathLike[str],
        config: LogConfig | None = None,
        *,
        log_start_offset: int = 0,
        recovery_point: int = 0,
        had_clean_shutdown: bool = False,
        now_ms: int | None = None,
        rng: random.Random | None = None,
    ) -> PartitionLog:
        """Load (creating if needed) the log in `directory`, recovering if needed.

        `rng` is the random source of the per-segment roll jitter (tests inject one).
        """
        began = time.monotonic()
        cfg = config or LogConfig()
        d = Path(directory)
        created_dir = not d.exists()
        d.mkdir(parents=True, exist_ok=True)
        if created_dir:
            fsync_dir(d.parent)
        report = LoadReport()
        _remove_temporary_files(d, report)
        segments: list[LogSegment] = []
        try:
            for base in sorted(_live_log_offsets(d)):
                seg, rec = LogSegment.open_or_recover(
                    d,
                    base,
                    index_interval_bytes=cfg.index_interval_bytes,
                    max_index_size=cfg.segment_index_bytes,
                    max_batch_size=None,
                )
                if rec is not None:
                    report.rebuilt_indexes.append(base)
                    _note_recovery(report, base, rec)
                segments.append(seg)
            _delete_orphan_indexes(d, {s.base_offset for s in segments}, report)
            if not had_clean_shutdown:
                report.recovery_point = recovery_point
                segments = _recover_from(segments, recovery_point, report)
            if segments:
                leo = segments[-1].read_next_offset()
                if log_start_offset > leo:
                    # A checkpointed start beyond the data (segments deleted by hand):
                    # Kafka discards the segments and starts empty at the checkpoint.
                    for seg in segments:
                        _delete_segment_files(seg)
                    segments = []
            if not segments:
                segments = [
                    LogSegment.open(
                        d,
                        log_start_offset,
                        index_interval_bytes=cfg.index_interval_bytes,
                        max_index_size=cfg.segment_index_bytes,
                        create=True,
                        now_ms=now_ms,
                    )
                ]
                fsync_dir(d)
        except BaseException:
            for seg in segments:
                seg.close()
            raise
        start = max(log_start_offset, segments[0].base_offset)
        epoch_path = d / LEADER_EPOCH_CHECKPOINT
        cache = LeaderEpochCache.load(epoch_path)
        log = cls(d, cfg, segments, start, recovery_point, cache, report, rng)
        cache.truncate_from_end(log.log_end_offset)
        cache.truncate_from_start(log.log_start_offset)
        log._epochs_flushed = cache.entries  # the cache writes itself on every change
        log.recovery_point = min(max(recovery_point, start), log.log_end_offset)
        if had_clean_shutdown:
            log.recovery_point = log.log_end_offset
        # After recovery the point stays put: what recovery read and truncated is not
        # fsynced yet, and only a flush may advance it (as Kafka's LogLoader).
        report.elapsed_s = time.monotonic() - began
        return log

    # --- offsets ---------------------------------------------------------

    @property
    def segments(self) -> list[LogSegment]:
        """Segments in offset order (do not mutate)."""
        return self._segments

    @property
    def active_segment(self) -> LogSegment:
        """The segment taking appends."""
        return self._segments[-1]

    @property
    def size(self) -> int:
        """Bytes in all segments."""
        return sum(s.size for s in self._segments)

    def update_high_watermark(self, offset: int) -> int:
        """Set the high watermark, clamped to [log start, LEO]; return it."""
        self.high_watermark = min(max(offset, self.log_start_offset), self.log_end_offset)
        return self.high_watermark

    # --- appending -------------------------------------------------------

    def append_as_leader(
        self,
        data: bytes | bytearray | memoryview,
        leader_epoch: int,
        *,
        now_ms: int | None = None,
        origin: AppendOrigin = AppendOrigin.CLIENT,
    ) -> AppendResult:
        """Append producer batches: validate, assign offsets, stamp epoch (and
        LogAppendTime when configured), roll if needed, write.

        `data` holds one or more v2 batches. A writable buffer (a bytearray or a
        writable memoryview, e.g. a slice of the request frame) is patched in place
        and written as is — no copy on the produce path; the caller hands it over.
        Raises CorruptRecordError (or one of its subclasses below, which map to
        Kafka error codes) for invalid ones; nothing is written then. `origin` is
        CLIENT for produce requests and COORDINATOR for the broker's own writes
        (transaction markers).
        """
        if origin is AppendOrigin.REPLICATION:
            raise ValueError("replicated batches go through append_as_follower")
        now = int(time.time() * 1000) if now_ms is None else now_ms
        buf: bytearray | memoryview
        if isinstance(data, bytearray) or (isinstance(data, memoryview) and not data.readonly):
            buf = data
        else:
            buf = bytearray(data)
        infos = self.validate_batches(buf, origin=origin, now_ms=now)
        offset = self.log_end_offset
        append_time = now if self.config.log_append_time else v2.NO_TIMESTAMP
        pos = 0
        patched: list[BatchInfo] = []
        max_ts = v2.NO_TIMESTAMP
        max_ts_offset = offset
        for header in infos:
            size = header.size_in_bytes
            v2.set_base_offset(buf, offset, pos)
            v2.set_partition_leader_epoch(buf, leader_epoch, pos)
            batch_max_ts = header.max_timestamp
            if self.config.log_append_time:
                v2.set_log_append_time(buf, now, pos, size)
                batch_max_ts = now
            elif header.timestamp_type == v2.LOG_APPEND_TIME:
                # A client may not choose LogAppendTime on a CreateTime topic: Kafka
                # rewrites the attributes (setMaxTimestamp(CREATE_TIME, ...)).
                _set_create_time(buf, pos, size, header.attributes)
            last = offset + header.last_offset_delta
            patched.append(BatchInfo(last, batch_max_ts, size))
            if batch_max_ts > max_ts:
                max_ts, max_ts_offset = batch_max_ts, last
            offset = last + 1
            pos += size
        first = self.log_end_offset
        rolled = self._append(buf, patched, leader_epoch, first, now)
        return AppendResult(
            first_offset=first,
            last_offset=offset - 1,
            max_timestamp=max_ts,
            offset_of_max_timestamp=max_ts_offset,
            log_append_time=append_time,
            log_start_offset=self.log_start_offset,
            batches=len(patched),
            bytes=len(buf),
            rolled=rolled,
        )

    def append_as_follower(self, data: bytes | bytearray) -> AppendResult:
        """Append batches that already carry their offsets and epochs (replication)."""
        buf = bytes(data)
        headers = self.validate_batches(buf, origin=AppendOrigin.REPLICATION)
        if headers and headers[0].base_offset < self.log_end_offset:
            raise CorruptRecordError(
                f"batch at offset {headers[0].base_offset} is below the log end offset "
                f"{self.log_end_offset}"
            )
        for prev, h in itertools.pairwise(headers):
            if h.base_offset <= prev.last_offset:
                # Kafka's OffsetsOutOfOrderException: refuse before writing anything.
                raise CorruptRecordError(
                    f"out of order offsets: batch at offset {h.base_offset} follows one "
                    f"ending at {prev.last_offset}"
                )
        infos = [BatchInfo(h.last_offset, h.max_timestamp, h.size_in_bytes) for h in headers]
        epoch = headers[0].partition_leader_epoch if headers else -1
        first = headers[0].base_offset if headers else self.log_end_offset
        rolled = self._append(buf, infos, epoch, first, int(time.time() * 1000))
        for h in headers:
            if h.partition_leader_epoch >= 0:
                self.leader_epoch_cache.assign(h.partition_leader_epoch, h.base_offset)
        self._epochs_flushed = self.leader_epoch_cache.entries  # assign persists changes
        last = infos[-1].last_offset if infos else self.log_end_offset - 1
        max_ts = max((i.max_timestamp for i in infos), default=v2.NO_TIMESTAMP)
        return AppendResult(
            first, last, max_ts, last, -1, self.log_start_offset, len(infos), len(buf), rolled
        )

    def validate_batches(
        self,
        data: bytes | bytearray | memoryview,
        *,
        origin: AppendOrigin = AppendOrigin.CLIENT,
        now_ms: int | None = None,
    ) -> list[v2.BatchHeader]:
        """Frame, CRC- and header-check concatenated v2 batches (no record decoding).

        Every origin: framing, magic 2 and CRC. Leader appends (CLIENT,
        COORDINATOR) also: max.message.bytes, a known codec, and on CreateTime
        topics message.timestamp.before/after.max.ms against the header's base and
        max timestamps. CLIENT appends also: record count matching the offset
        delta, no control batches, a sequence for every producer id, and on
        compacted topics a key for every record.
        """
        headers = []
        pos = 0
        view = memoryview(data)
        end = len(view)
        leader = origin is not AppendOrigin.REPLICATION
        client = origin is AppendOrigin.CLIENT
        check_time = leader and not self.config.log_append_time
        now = int(time.time() * 1000) if now_ms is None else now_ms
        if end == 0:
            raise CorruptRecordError("no record batches")
        while pos < end:
            if end - pos < v2.HEADER_SIZE:
                raise CorruptRecordError("truncated record batch header", position=pos)
            header = v2.parse_header(view, pos)
            size = header.size_in_bytes
            if header.magic != v2.MAGIC_V2:
                raise CorruptRecordError(f"unsupported magic {header.magic}", position=pos)
            if header.batch_length < v2.MIN_BATCH_LENGTH or pos + size > end:
                raise CorruptRecordError("record batch size is invalid", position=pos)
            if leader and size > self.config.max_message_bytes:
                raise RecordTooLargeError(
                    f"batch of {size} bytes exceeds max.message.bytes "
                    f"{self.config.max_message_bytes}",
                    position=pos,
                )
            if v2.compute_crc(view[pos : pos + size]) != header.crc:
                raise CorruptRecordError("record batch CRC mismatch", position=pos)
            if header.last_offset_delta < 0:
                raise CorruptRecordError(
                    f"negative last offset delta {header.last_offset_delta}", position=pos
                )
            if client:
                _check_client_batch(header, pos)
            if leader and header.codec_id > MAX_CODEC_ID:
                raise UnsupportedCompressionError(
                    f"unknown compression codec id {header.codec_id}", position=pos
                )
            if check_time:
                self._check_timestamps(header, now, pos)
            if client and self.config.compact:
                self._check_keys(header, view[pos : pos + size], pos)
            headers.append(header)
            pos += size
        return headers

    def _check_keys(self, header: v2.BatchHeader, batch: memoryview, pos: int) -> None:
        """Kafka's LogValidator.validateKey: a compacted topic refuses records without a
        key, naming each in the error. The only check that decodes records (and
        decompresses them), so it runs on compacted topics only, for producers' writes
        (Kafka checks the coordinators' too, which always have keys)."""
        errors = [
            RecordError(
                i,
                "Compacted topic cannot accept message without key in topic partition "
                f"{self.dir.name}.",
            )
            for i, (_off, _ts, key, _v, _h, _seq) in enumerate(v2.iter_record_tuples(header, batch))
            if key is None
        ]
        if errors:
            raise RecordValidationError(errors, position=pos)

    def _check_timestamps(self, header: v2.BatchHeader, now: int, pos: int) -> None:
        before = self.config.message_timestamp_before_max_ms
        after = self.config.message_timestamp_after_max_ms
        stamps = [header.max_timestamp]
        if not header.has_delete_horizon:
            stamps.append(header.base_timestamp)
        for ts in stamps:
            if ts == v2.NO_TIMESTAMP:
                continue
            if now - ts > before:
                raise InvalidTimestampError(
                    f"timestamp {ts} is more than message.timestamp.before.max.ms {before} "
                    f"before the broker time {now}",
                    position=pos,
                )
            if ts - now > after:
                raise InvalidTimestampError(
                    f"timestamp {ts} is more than message.timestamp.after.max.ms {after} "
                    f"after the broker time {now}",
                    position=pos,
                )

    def _append(
        self,
        buf: bytes | bytearray | memoryview,
        infos: list[BatchInfo],
        leader_epoch: int,
        first_offset: int,
        now: int,
    ) -> bool:
        """Write batches whose offsets are assigned; True if a new segment was rolled."""
        if not infos:
            return False
        size = len(buf)
        if size > self.config.segment_bytes:
            raise RecordBatchTooLargeError(
                f"Message batch size is {size} bytes in append to partition {self.dir.name}, "
                f"which exceeds the maximum configured segment size of "
                f"{self.config.segment_bytes}."
            )
        max_ts = max(i.max_timestamp for i in infos)
        before = self.active_segment
        segment = self._maybe_roll(size, max_ts, infos[-1].last_offset, first_offset, now)
        if leader_epoch >= 0 and self.leader_epoch_cache.assign(leader_epoch, first_offset):
            self._epochs_flushed = self.leader_epoch_cache.entries  # assign persisted it
        segment.append(buf, infos)
        self.log_end_offset = infos[-1].last_offset + 1
        self.unflushed_messages += infos[-1].last_offset - first_offset + 1
        if self.unflushed_messages >= self.config.flush_messages:
            self.flush()
        return segment is not before

    # --- rolling ---------------------------------------------------------

    def _maybe_roll(
        self, size: int, max_ts: int, max_offset: int, first_offset: int, now: int
    ) -> LogSegment:
        seg = self.active_segment
        if seg.should_roll(
            max_segment_bytes=self.config.segment_bytes,
            max_segment_ms=self.config.segment_ms,
            jitter_ms=seg.roll_jitter_ms,
            messages_size=size,
            max_timestamp_in_messages=max_ts,
            max_offset_in_messages=max_offset,
            now_ms=now,
        ):
            return self.roll(first_offset, now_ms=now)
        return seg

    def roll(
        self, expected_next_offset: int | None = None, *, now_ms: int | None = None
    ) -> LogSegment:
        """Seal the active segment and start a new one at the log end offset.

        The sealed segment is not fsynced here (the append path must not wait for
        the disk): `pending_roll_flush` records that the log should be flushed up to
        the new segment's base, which `flush_rolled` does (Kafka schedules the same
        flush asynchronously on roll). The directory is fsynced so the new file exists
        after a crash.
        """
        new_base = max(expected_next_offset or 0, self.log_end_offset)
        active = self.active_segment
        if active.base_offset == new_base:
            if active.size == 0:
                # KAFKA-6388: an empty active segment that "needs" a roll (e.g. a full
                # zero-capacity index) is recreated in place rather than duplicated.
                return active
            raise StorageError(f"trying to roll a new segment at existing offset {new_base}")
        active.on_become_inactive()
        seg = self._new_segment(new_base, now_ms)
        self._segments.append(seg)
        self.pending_roll_flush = new_base
        return seg

    def _new_segment(self, base: int, now_ms: int | None = None) -> LogSegment:
        seg = LogSegment.open(
            self.dir,
            base,
            index_interval_bytes=self.config.index_interval_bytes,
            max_index_size=self.config.segment_index_bytes,
            create=True,
            now_ms=now_ms,
        )
        seg.roll_jitter_ms = self.config.random_segment_jitter(self._rng)
        fsync_dir(self.dir)
        return seg

    def flush_rolled(self) -> bool:
        """Flush up to the newest rolled segment's base if a roll left it unflushed
        (the broker calls this from its scheduler). True when it flushed."""
        target = self.pending_roll_flush
        if target is None:
            return False
        self.pending_roll_flush = None
        if target > self.recovery_point:
            self.flush(target)
            return True
        return False

    # --- reading ---------------------------------------------------------

    def read(
        self,
        start_offset: int,
        max_bytes: int,
        *,
        upper_bound: int | None = None,
        min_one_message: bool = True,
    ) -> FetchSlice | None:
        """Bytes from the batch holding `start_offset`, sized as Kafka does: at most
        `max_bytes` (raised to the first batch's size with `min_one_message`), never
        reaching the batch holding `upper_bound` (default LEO; the broker passes the
        high watermark or last stable offset). The slice may end inside a later
        batch, as Kafka's; a first batch over `max_bytes` without `min_one_message`
        gives None (Kafka's fetch sends no incomplete first batch). None when there
        is nothing yet.

        Raises OffsetOutOfRangeError outside [log start, LEO].
        """
        leo = self.log_end_offset
        bound = leo if upper_bound is None else min(upper_bound, leo)
        if start_offset > leo or start_offset < self.log_start_offset:
            raise OffsetOutOfRangeError(
                f"offset {start_offset} is outside [{self.log_start_offset}, {leo}]"
            )
        if start_offset >= bound:
            return None
        idx = self._floor_segment_index(start_offset)
        bound_base, bound_position = (None, None) if bound >= leo else self._bound_position(bound)
        while idx < len(self._segments):
            seg = self._segments[idx]
            max_position = bound_position if seg.base_offset == bound_base else None
            got = seg.read(start_offset, max_bytes, max_position, min_one_message)
            if got is not None:
                # The segment holds `start_offset`: an empty read (the first batch is
                # over `max_bytes`) must not skip ahead to a later segment's batches.
                return FetchSlice(seg, got[0], got[1], start_offset) if got[1] > 0 else None
            if seg.base_offset == bound_base:
                return None  # the batch holding the bound starts at or before the data
            idx += 1
        return None

    def _bound_position(self, bound: int) -> tuple[int, int | None]:
        """(segment base, position) of the batch holding `bound`, cached: fetches ask
        for the same high watermark many times, and positions below the log end
        never move until a truncation (which drops the cache)."""
        cached = self._bound_cache
        if cached is not None and cached[0] == bound:
            return cached[1], cached[2]
        seg = self._segments[self._floor_segment_index(bound)]
        loc = seg.translate_offset(bound)
        position = loc.position if loc is not None else None
        self._bound_cache = (bound, seg.base_offset, position)
        return seg.base_offset, position

    def _floor_segment_index(self, offset: int) -> int:
        lo, hi = 0, len(self._segments) - 1
        ans = 0
        while lo <= hi:
            mid = (lo + hi) // 2
            if self._segments[mid].base_offset <= offset:
                ans = mid
                lo = mid + 1
            else:
                hi = mid - 1
        return ans

    def iter_batches(self, start_offset: int | None = None) -> Iterator[LogBatch]:
        """Every valid batch from `start_offset` (default: log start) to the end."""
        start = self.log_start_offset if start_offset is None else start_offset
        idx = self._floor_segment_index(start)
        for seg in self._segments[idx:]:
            pos = seg.offset_index.lookup(start).position if seg.base_offset <= start else 0
            for item in seg.iter_batches(pos):
                if not isinstance(item, LogBatch):
                    break
                if item.last_offset >= start:
                    yield item

    # --- transactions ------------------------------------------------------

    def record_aborted_txn(self, txn: AbortedTxn) -> None:
        """Add an aborted transaction to the `.txnindex` of the active segment, the one
        holding its ABORT marker just appended (Kafka's segment.updateTxnIndex)."""
        self.active_segment.append_aborted_txn(txn)

    def collect_aborted_txns(self, start_offset: int, upper_bound_offset: int) -> list[AbortedTxn]:
        """Aborted transactions overlapping [start_offset, upper_bound_offset), for a
        READ_COMMITTED fetch (Kafka's collectAbortedTransactions): the `.txnindex`
        files from the segment holding `start_offset` on, until an entry's last
        stable offset reaches the bound (a marker may sit segments after its data)."""
        found: list[AbortedTxn] = []
        for seg in self._segments[self._floor_segment_index(start_offset) :]:
            result = seg.txn_index.collect_aborted(start_offset, upper_bound_offset)
            found.extend(result.aborted)
            if result.is_complete:
                break
        return found

    def next_segment_base(self, offset: int) -> int:
        """The base offset of the segment after the one holding `offset`, or the log
        end offset when that is the active one (an upper bound of what one read from
        `offset` returns)."""
        idx = self._floor_segment_index(offset) + 1
        return self._segments[idx].base_offset if idx < len(self._segments) else self.log_end_offset

    def fetch_offset_by_timestamp(self, timestamp: int) -> tuple[int, int] | None:
        """(offset, timestamp) of the first record with timestamp >= `timestamp`."""
        for seg in self._segments:
            if seg.largest_timestamp >= timestamp and seg.max_timestamp_so_far >= 0:
                found = seg.find_offset_by_timestamp(timestamp, self.log_start_offset)
                if found is not None:
                    return found
        return None

    def max_timestamp_and_offset(self) -> tuple[int, int, int] | None:
        """(largest timestamp, offset of the first record carrying it, its batch's leader
        epoch or -1) over the whole log; None when no batch has it (an empty log).

        As Kafka 3.8's ListOffsets MAX_TIMESTAMP (KAFKA-16310): the first segment with
        the largest timestamp, the first batch there (from the offset index's position
        of the segment's max-timestamp offset) whose max timestamp it is, and in that
        batch the first record with that timestamp. Records of a LogAppendTime batch
        all carry its time, so that is its first record. A legacy entry counts as
        its last offset (magic 1; Kafka has no answer for magic 0).
        """
        if not self._segments:
            return None
        seg = self._segments[0]
        for other in self._segments[1:]:
            if other.max_timestamp_so_far > seg.max_timestamp_so_far:
                seg = other
        largest = seg.max_timestamp_so_far
        position = seg.offset_index.lookup(seg.offset_of_max_timestamp_so_far).position
        for item in seg.iter_batches(position):
            if not isinstance(item, LogBatch):
                break
            if item.max_timestamp != largest:
                continue
            header = item.header
            if header is None:
                return (largest, item.last_offset, -1) if item.magic >= 1 else None
            epoch = header.partition_leader_epoch if header.partition_leader_epoch >= 0 else -1
            if header.timestamp_type == v2.LOG_APPEND_TIME:
                return largest, header.base_offset, epoch
            for offset, timestamp, *_ in v2.iter_record_tuples(header, item.data):
                if timestamp == largest:
                    return largest, offset, epoch
            return None
        return None

    # --- truncation and log start ----------------------------------------

    def truncate_to(self, offset: int, *, now_ms: int | None = None) -> bool:
        """Remove everything at or after `offset` (a follower diverged). True if anything went.

        As Kafka's UnifiedLog.truncateTo: below the first segment the log restarts
        empty at `offset`; otherwise segments based above `offset` go, the one holding
        it is cut (staying active, even when emptied at its base), and the log start
        offset drops to `offset` if it was above. Removed segments are deleted after
        file.delete.delay.ms (see `delete_expired_files`).
        """
        if offset < 0:
            raise ValueError(f"cannot truncate to negative offset {offset}")
        if offset >= self.log_end_offset:
            # Nothing to cut from the log, but (as Kafka) the epoch cache may end with
            # an epoch started at the log end that wrote nothing (this broker led
            # briefly): it must go, or a follower keeps claiming that epoch, the
            # leader keeps answering "diverged", and the follower never catches up.
            self.leader_epoch_cache.truncate_from_end(self.log_end_offset)  # persists itself
            self._epochs_flushed = self.leader_epoch_cache.entries
            return False
        if self._segments[0].base_offset > offset:
            self.truncate_fully_and_start_at(offset, now_ms=now_ms)
            return True
        self._bound_cache = None
        keep = [s for s in self._segments if s.base_offset <= offset]
        gone = self._segments[len(keep) :]
        self._segments = keep
        self._delete_later(gone, now_ms)
        self.active_segment.truncate_to(offset)
        self.log_end_offset = max(
            self.active_segment.read_next_offset(), self.active_segment.base_offset
        )
        self.log_start_offset = min(self.log_start_offset, offset)
        self.high_watermark = min(self.high_watermark, self.log_end_offset)
        self.recovery_point = min(self.recovery_point, self.log_end_offset)
        if self.pending_roll_flush is not None and self.pending_roll_flush > self.log_end_offset:
            self.pending_roll_flush = None
        self.leader_epoch_cache.truncate_from_end(self.log_end_offset)
        self._epochs_flushed = self.leader_epoch_cache.entries
        return True

    def truncate_fully_and_start_at(self, offset: int, *, now_ms: int | None = None) -> None:
        """Delete every segment and restart the log empty at `offset`."""
        self._bound_cache = None
        gone = self._segments
        self._segments = []
        self._delete_later(gone, now_ms)
        self._segments = [self._new_segment(offset, now_ms)]
        self.log_start_offset = self.log_end_offset = self.high_watermark = offset
        self.recovery_point = offset
        self.pending_roll_flush = None
        self.leader_epoch_cache.clear()
        self._epochs_flushed = self.leader_epoch_cache.entries

    def maybe_increment_log_start_offset(self, new_start: int) -> bool:
        """Move the log start offset forward (DeleteRecords); never past the high
        watermark. True when it moved."""
        if new_start > self.high_watermark:
            raise OffsetOutOfRangeError(
                f"cannot move the log start offset to {new_start}, beyond the high "
                f"watermark {self.high_watermark}"
            )
        if new_start <= self.log_start_offset:
            return False
        self.log_start_offset = new_start
        self.leader_epoch_cache.truncate_from_start(new_start)
        self._epochs_flushed = self.leader_epoch_cache.entries
        return True

    # --- maintenance guard --------------------------------------------------

    def try_begin_maintenance(self, kind: str) -> bool:
        """Claim the log for one maintenance job (`kind`: "retention", "compaction",
        "truncation", "deletion", ...); False if another job holds it. Never blocks.

        Kafka keeps a per-partition state machine in LogCleanerManager (InProgress,
        Paused) so retention, truncation, partition deletion and compaction never
        touch the same log at once. kt's equivalent is this cooperative claim: a job
        that rewrites or removes segments claims the log first, skips the log when
        the claim fails (it will come round again), and calls `end_maintenance(kind)`
        in a `finally`. Retention holds it across its whole pass, including the
        log-start-offset checkpoint between `plan_retention` and `apply_retention`;
        the log cleaner should hold it from choosing segments to swapping them in.
        Thread-safe (the cleaner may run in a worker thread); the other PartitionLog
        methods are not, so a thread holding the claim must still leave appends and
        reads to the event loop and touch only the segments it owns (sealed ones).
        """
        with self._maintenance_lock:
            if self._maintenance is not None:
                return False
            self._maintenance = kind
            return True

    def end_maintenance(self, kind: str) -> None:
        """Release the claim taken by `try_begin_maintenance(kind)`."""
        with self._maintenance_lock:
            if self._maintenance != kind:
                raise StorageError(
                    f"{self.dir}: ending {kind!r} maintenance, but {self._maintenance!r} holds it"
                )
            self._maintenance = None

    @property
    def maintenance(self) -> str | None:
        """The maintenance job holding the log, if any."""
        return self._maintenance

    # --- retention -----------------------------------------------------------

    def delete_old_segments(
        self,
        now_ms: int | None = None,
        *,
        persist_log_start: Callable[[RetentionPlan], None] | None = None,
    ) -> RetentionResult:
        """One retention pass (Kafka's UnifiedLog.deleteOldSegments): drop the oldest
        segments breaching the log start offset, `retention.bytes` or `retention.ms`
        (the last two only with cleanup.policy delete); see `kt.storage.retention`.

        In order: the log start offset moves to the first kept segment's base (a new
        empty active segment is rolled first when every segment goes); when it moved,
        `persist_log_start(plan)` is called — the broker writes its
        log-start-offset checkpoint there, so a crash before the files are renamed
        cannot re-expose the data; then the segments leave the log, their files are
        renamed `.deleted` at once and unlinked `file.delete.delay.ms` later by
        `delete_expired_files`. The same as `plan_retention` + `apply_retention`.

        Where kt differs from Kafka: the caller (not this method) owns the
        maintenance claim and the producer state (snapshots below the new log start
        are the broker's to delete); and Kafka writes no checkpoint here, relying on
        the rename alone, while kt checkpoints first.
        """
        plan = self.plan_retention(now_ms)
        if plan.log_start_moved and persist_log_start is not None:
            persist_log_start(plan)
        return self.apply_retention(plan, now_ms)

    def plan_retention(self, now_ms: int | None = None) -> RetentionPlan:
        """First half of a retention pass: select the segments to delete, roll a new
        active segment if they are all of them, and advance the log start offset
        (truncating the leader-epoch cache from the start). No file is renamed yet:
        checkpoint the log start offset (`plan.log_start_moved`), then call
        `apply_retention(plan)`. Reads below the new start fail from now on."""
        now = int(time.time() * 1000) if now_ms is None else now_ms
        old_start = self.log_start_offset
        chosen = select_deletable(
            self._segments,
            config=self.config,
            log_start_offset=self.log_start_offset,
            log_end_offset=self.log_end_offset,
            high_watermark=self.high_watermark,
            now_ms=now,
        )
        doomed = self._segments[: chosen.count]
        selected = chosen.selected
        rolled = False
        if doomed and len(doomed) == len(self._segments):
            # Never leave the log without a segment: roll first (Kafka's deleteSegments).
            # The selected active segment is non-empty and wholly below the high
            # watermark, so the new one starts at the log end offset.
            new_active = self.roll(now_ms=now)
            rolled = True
            if new_active is doomed[-1]:  # an empty active segment is never selected
                doomed, selected = doomed[:-1], selected[:-1]
        new_start = self._segments[len(doomed)].base_offset if doomed else old_start
        if new_start > self.log_start_offset:
            self.maybe_increment_log_start_offset(new_start)
        return RetentionPlan(
            segments=list(doomed),
            selected=list(selected),
            old_log_start_offset=old_start,
            new_log_start_offset=self.log_start_offset,
            rolled=rolled,
            future_timestamps=chosen.future_timestamps,
        )

    def apply_retention(self, plan: RetentionPlan, now_ms: int | None = None) -> RetentionResult:
        """Second half of a retention pass: take the planned segments out of the log,
        rename their files `.deleted` (fsyncing the directory) and schedule their
        unlink after `file.delete.delay.ms`.

        Only segments still at the head of the log and wholly below the current log
        start offset go: whatever changed the log since `plan_retention` (a
        truncation lowering the log start, say) keeps them.
        """
        gone = []
        for seg in plan.segments:
            if len(self._segments) < 2 or self._segments[0] is not seg:
                break
            if self._segments[1].base_offset > self.log_start_offset:
                break
            gone.append(self._segments.pop(0))
        if gone:
            self._bound_cache = None
            self._delete_later(gone, now_ms)
        return RetentionResult(
            deleted=plan.selected[: len(gone)],
            old_log_start_offset=plan.old_log_start_offset,
            log_start_offset=self.log_start_offset,
            rolled=plan.rolled,
            future_timestamps=plan.future_timestamps,
        )

    # --- deleting segments ------------------------------------------------

    def _delete_later(self, segments: list[LogSegment], now_ms: int | None) -> None:
        """Kafka's asynchronous segment deletion: rename the files `.deleted` now,
        close and unlink them after file.delete.delay.ms. A fetch that captured a
        FetchSlice keeps sending from the still-open file meanwhile."""
        if not segments:
            return
        now = int(time.time() * 1000) if now_ms is None else now_ms
        deadline = now + self.config.file_delete_delay_ms
        for seg in segments:
            seg.rename_suffix(DELETED_SUFFIX)
            self._pending_deletes.append((deadline, seg))
        fsync_dir(self.dir)

    def delete_expired_files(self, now_ms: int | None = None) -> int:
        """Close and unlink removed segments whose delay has passed (the broker calls
        this periodically). Returns how many segments went."""
        now = int(time.time() * 1000) if now_ms is None else now_ms
        due = [seg for deadline, seg in self._pending_deletes if deadline <= now]
        self._pending_deletes = [(d, s) for d, s in self._pending_deletes if d > now]
        for seg in due:
            _delete_segment_files(seg)
        return len(due)

    def replace_segments(
        self,
        new_segments: list[LogSegment],
        old_segments: list[LogSegment],
        *,
        now_ms: int | None = None,
        on_step: Callable[[str], None] | None = None,
    ) -> None:
        """Swap `.cleaned` segments in for the run of segments they replace (Kafka's
        LocalLog.replaceSegments), crash-safe at every step:

        1. the new segments' files are renamed `.cleaned` -> `.swap` (highest base
           first) and the directory fsynced: from here the loader completes the swap;
        2. the log serves the new segments instead of the old ones;
        3. the old segments are renamed `.deleted` (unlinked after
           file.delete.delay.ms, so fetches holding them finish);
        4. the `.swap` files are renamed live and the directory fsynced.

        `old_segments` must be consecutive segments of this log, not the active one;
        the new segments must lie within their offset range. `on_step` is called
        with "swap", "deleted" and "live" after each step (fault-injection tests).
        """
        if not new_segments or not old_segments:
            raise ValueError("replace_segments needs new and old segments")
        segs = self._segments
        first = next((i for i, s in enumerate(segs) if s is old_segments[0]), None)
        count = len(old_segments)
        if first is None or any(
            first + k >= len(segs) or segs[first + k] is not seg
            for k, seg in enumerate(old_segments)
        ):
            raise StorageError("segments to replace are not consecutive segments of the log")
        if first + count >= len(segs):
            raise StorageError("the active segment cannot be replaced")
        new = sorted(new_segments, key=lambda s: s.base_offset)
        low, high = old_segments[0].base_offset, segs[first + count].base_offset
        if new[0].base_offset < low or new[-1].base_offset >= high:
            raise StorageError(f"replacement segments must lie within offsets [{low}, {high})")
        for seg in reversed(new):
            seg.rename_suffix(SWAP_SUFFIX)
        fsync_dir(self.dir)
        if on_step is not None:
            on_step("swap")
        self._segments = segs[:first] + new + segs[first + count :]
        self._bound_cache = None
        self._delete_later(list(old_segments), now_ms)
        if on_step is not None:
            on_step("deleted")
        for seg in new:
            seg.rename_suffix("")
        fsync_dir(self.dir)
        if on_step is not None:
            on_step("live")

    @property
    def pending_deletes(self) -> int:
        """Removed segments whose files still wait for deletion."""
        return len(self._pending_deletes)

    # --- durability -------------------------------------------------------

    def flush(self, up_to_offset: int | None = None) -> None:
        """fsync segments holding unflushed data below `up_to_offset` (default LEO)
        and advance the recovery point to it.

        As Kafka's LocalLog.flush, the directory is fsynced too when a flushed
        segment starts at or above the old recovery point (it may be new).
        """
        target = self.log_end_offset if up_to_offset is None else up_to_offset
        target = min(target, self.log_end_offset)
        old = self.recovery_point
        if target <= old:
            return
        new_segment = False
        for seg in self._segments[self._floor_segment_index(old) :]:
            if seg.base_offset >= target:
                break
            seg.flush()
            if seg.base_offset >= old:
                new_segment = True
        if new_segment:
            fsync_dir(self.dir)
        # The cache persists its own changes; write only what changed behind our back.
        entries = self.leader_epoch_cache.entries
        if entries != self._epochs_flushed:
            self.leader_epoch_cache.flush()
            self._epochs_flushed = entries
        self.recovery_point = target
        if target >= self.log_end_offset:
            self.unflushed_messages = 0
        self.last_flush_ms = int(time.time() * 1000)

    def close(self) -> None:
        """Flush and close every segment; removed segments go now."""
        self.flush()
        for seg in self._segments:
            seg.close()
        for _deadline, seg in self._pending_deletes:
            _delete_segment_files(seg)
        self._pending_deletes = []


def _check_client_batch(header: v2.BatchHeader, pos: int) -> None:
    """Kafka's LogValidator checks for batches from producers (origin CLIENT)."""
    if header.record_count <= 0 or header.last_offset_delta != header.record_count - 1:
        raise InvalidRecordError(
            f"record count {header.record_count} does not match last offset delta "
            f"{header.last_offset_delta}",
            position=pos,
        )
    if header.is_control:
        raise InvalidRecordError("clients may not write control batches", position=pos)
    if header.producer_id >= 0 and header.base_sequence < 0:
        raise InvalidRecordError(
            f"invalid sequence number {header.base_sequence} for producer id {header.producer_id}",
            position=pos,
        )


_ATTRS = struct.Struct(">h")


def _set_create_time(buf: bytearray | memoryview, pos: int, size: int, attributes: int) -> None:
    """Clear the LogAppendTime bit of the batch at `pos` and fix its CRC."""
    _ATTRS.pack_into(buf, pos + v2.ATTRIBUTES_OFFSET, attributes & ~v2.TIMESTAMP_TYPE_MASK)
    crc = v2.compute_crc(memoryview(buf)[pos : pos + size])
    struct.pack_into(">I", buf, pos + v2.CRC_OFFSET, crc)


class RecordTooLargeError(CorruptRecordError):
    """A batch larger than max.message.bytes (Kafka's MESSAGE_TOO_LARGE)."""


class RecordBatchTooLargeError(CorruptRecordError):
    """An append larger than segment.bytes, which no segment could hold (Kafka's
    RecordBatchTooLargeException, RECORD_LIST_TOO_LARGE)."""


class InvalidRecordError(CorruptRecordError):
    """A well-framed batch whose fields contradict each other or that a client may
    not write (INVALID_RECORD)."""


@dataclass(frozen=True, slots=True)
class RecordError:
    """One rejected record: its index in the batch and why (Produce v8+ record_errors)."""

    batch_index: int
    message: str | None

    def __str__(self) -> str:
        # Java's ProduceResponse.RecordError.toString, which Kafka's message embeds.
        message = "null" if self.message is None else f"'{self.message}'"
        return f"RecordError(batchIndex={self.batch_index}, message={message})"


class RecordValidationError(InvalidRecordError):
    """A batch refused because of some of its records (Kafka's RecordValidationException
    around an InvalidRecordException): `record_errors` names them, the message is
    Kafka's summary of the first three."""

    def __init__(self, record_errors: list[RecordError], position: int | None = None) -> None:
        shown = ", ".join(str(e) for e in record_errors[:3])
        super().__init__(
            f"One or more records have been rejected due to {len(record_errors)} record "
            f"errors in total, and only showing the first three errors at most: [{shown}]",
            position=position,
        )
        self.record_errors = record_errors


class InvalidTimestampError(CorruptRecordError):
    """A CreateTime timestamp outside message.timestamp.before/after.max.ms of the
    broker's clock (INVALID_TIMESTAMP)."""


class UnsupportedCompressionError(CorruptRecordError):
    """A batch whose codec id is not one Kafka defines (UNSUPPORTED_COMPRESSION_TYPE)."""


# --- loading helpers ------------------------------------------------------


def _live_log_offsets(d: Path) -> list[int]:
    out = []
    for entry in os.scandir(d):
        parsed = parse_segment_file_name(entry.name)
        if parsed is not None and parsed.kind == "log" and parsed.state is None:
            out.append(parsed.base_offset)
    return out


def _remove_temporary_files(d: Path, report: LoadReport) -> None:
    """Kafka's first loading pass: drop `.deleted` and `.cleaned` files, resolve swaps.

    A `.swap` at or above the smallest `.cleaned` offset comes from a compaction
    that did not finish writing (KAFKA-6264) and is dropped; the others replace
    the live segments they overlap and become live.
    """
    swaps: list[Path] = []
    cleaned_min: int | None = None
    for entry in sorted(os.scandir(d), key=lambda e: e.name):
        parsed = parse_segment_file_name(entry.name)
        if parsed is None:
            continue
        if parsed.state == DELETED_SUFFIX:
            os.unlink(entry.path)
            report.deleted_files.append(entry.name)
        elif parsed.state == CLEANED_SUFFIX:
            cleaned_min = (
                parsed.base_offset if cleaned_min is None else min(cleaned_min, parsed.base_offset)
            )
            os.unlink(entry.path)
            report.deleted_files.append(entry.name)
        elif parsed.state == SWAP_SUFFIX:
            swaps.append(Path(entry.path))
    valid_swaps = []
    for path in swaps:
        parsed = parse_segment_file_name(path.name)
        assert parsed is not None
        if cleaned_min is not None and parsed.base_offset >= cleaned_min:
            path.unlink()
            report.deleted_files.append(path.name)
        else:
            valid_swaps.append(path)
    swap_logs = [p for p in valid_swaps if p.name.endswith(".log" + SWAP_SUFFIX)]
    for log_swap in swap_logs:
        base = parse_segment_file_name(log_swap.name)
        assert base is not None
        # The swap segment covers [base, its next offset): remove the old segments
        # inside that range before renaming the swap in.
        fd = os.open(log_swap, os.O_RDONLY)
        try:
            from kt.storage.file_records import FileRecords

            end = base.base_offset
            for item in FileRecords(fd).headers(0):
                if isinstance(item, Damage):
                    break
                end = item.next_offset
        finally:
            os.close(fd)
        for other in _live_log_offsets(d):
            if base.base_offset <= other < end:
                for ext in (".log", ".index", ".timeindex", ".txnindex"):
                    victim = d / segment_file_name(other, ext)
                    if victim.exists():
                        victim.unlink()
                        report.deleted_files.append(victim.name)
    for path in valid_swaps:
        live = path.with_name(path.name[: -len(SWAP_SUFFIX)])
        os.replace(path, live)
        report.swapped_in.append(live.name)
    if valid_swaps:
        fsync_dir(d)


def _delete_orphan_indexes(d: Path, live: set[int], report: LoadReport) -> None:
    for entry in os.scandir(d):
        parsed = parse_segment_file_name(entry.name)
        if (
            parsed is not None
            and parsed.state is None
            and parsed.kind in ("index", "timeindex", "txnindex")
            and parsed.base_offset not in live
        ):
            os.unlink(entry.path)
            report.deleted_files.append(entry.name)


def _note_recovery(report: LoadReport, base: int, rec: RecoveryResult) -> None:
    report.recovered_segments.append(base)
    report.recovered_bytes += rec.valid_bytes + rec.truncated_bytes
    if rec.truncated_bytes:
        report.truncated_bytes += rec.truncated_bytes
        report.truncation_reasons.append(
            f"{segment_file_name(base, '.log')}: {rec.truncated_bytes} bytes: {rec.reason}"
        )


def _recover_from(
    segments: list[LogSegment], recovery_point: int, report: LoadReport
) -> list[LogSegment]:
    """Recover every segment that may hold unflushed data; drop what follows a
    truncation (later segments cannot be trusted once an earlier one was torn).

    The recovered segments' `.txnindex` files are rebuilt from their batches, with
    the transactions still open at the first one's base learnt from the headers of
    the segments before it (Kafka rebuilds them from its producer state).
    """
    start = 0
    for i, seg in enumerate(segments):
        if seg.base_offset <= recovery_point:
            start = i
    tracker = _open_transactions_before(segments[:start])
    for i in range(start, len(segments)):
        seg = segments[i]
        already = seg.base_offset in report.recovered_segments
        rec = seg.recover(txn_tracker=tracker)
        if not already:
            _note_recovery(report, seg.base_offset, rec)
        if rec.truncated_bytes > 0 and i + 1 < len(segments):
            for later in segments[i + 1 :]:
                _delete_segment_files(later)
                report.deleted_files.append(later.log_path.name)
            return segments[: i + 1]
    return segments


def _open_transactions_before(segments: list[LogSegment]) -> TxnTracker:
    """A TxnTracker holding the transactions open after `segments`, read from batch
    headers (only the small control batches are read whole)."""
    tracker = TxnTracker()
    for seg in segments:
        records = seg.records
        for head in records.headers(0):
            if isinstance(head, Damage):
                break
            h = head.header
            if h is None or not h.is_transactional:
                continue
            if not h.is_control:
                tracker.begin(h.producer_id, h.base_offset)
                continue
            for item in records.batches(head.position, head.next_position):
                if isinstance(item, LogBatch):
                    tracker.feed(item)
    tracker.aborted.clear()
    return tracker


def _delete_segment_files(seg: LogSegment) -> None:
    paths = seg.file_paths()
    seg.close()
    for p in paths:
        p.unlink(missing_ok=True)
