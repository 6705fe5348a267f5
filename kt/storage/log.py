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

import itertools
import os
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from kt.storage import record_batch as v2
from kt.storage.errors import (
    CorruptRecordError,
    OffsetOutOfRangeError,
    StorageError,
)
from kt.storage.file_records import LogBatch
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
from kt.storage.segment import BatchInfo, LogSegment, RecoveryResult

LEADER_EPOCH_CHECKPOINT = "leader-epoch-checkpoint"


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
    """What loading a log found and fixed, for logs and forensics."""

    recovered_segments: list[int] = field(default_factory=list)
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
    ) -> None:
        self.dir = directory
        self.config = config
        self._segments = segments
        self.log_start_offset = log_start_offset
        self.recovery_point = recovery_point
        self.leader_epoch_cache = leader_epoch_cache
        self.load_report = load_report
        self.log_end_offset = segments[-1].read_next_offset()
        self.high_watermark = max(log_start_offset, min(recovery_point, self.log_end_offset))
        self.unflushed_messages = 0
        self.last_flush_ms = int(time.time() * 1000)

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
    ) -> PartitionLog:
        """Load (creating if needed) the log in `directory`, recovering if needed."""
        cfg = config or LogConfig()
        d = Path(directory)
        d.mkdir(parents=True, exist_ok=True)
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
        except BaseException:
            for seg in segments:
                seg.close()
            raise
        start = max(log_start_offset, segments[0].base_offset)
        epoch_path = d / LEADER_EPOCH_CHECKPOINT
        cache = LeaderEpochCache.load(epoch_path)
        log = cls(d, cfg, segments, start, recovery_point, cache, report)
        cache.truncate_from_end(log.log_end_offset)
        cache.truncate_from_start(log.log_start_offset)
        log.recovery_point = min(max(recovery_point, start), log.log_end_offset)
        if had_clean_shutdown:
            log.recovery_point = log.log_end_offset
        # After recovery the point stays put: what recovery read and truncated is not
        # fsynced yet, and only a flush may advance it (as Kafka's LogLoader).
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
        data: bytes | bytearray,
        leader_epoch: int,
        *,
        now_ms: int | None = None,
    ) -> AppendResult:
        """Append producer batches: validate, assign offsets, stamp epoch (and
        LogAppendTime when configured), roll if needed, write.

        `data` holds one or more v2 batches. Raises CorruptRecordError for
        invalid ones (nothing is written then).
        """
        now = int(time.time() * 1000) if now_ms is None else now_ms
        buf = bytearray(data)
        infos = self.validate_batches(buf)
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
            last = offset + header.last_offset_delta
            patched.append(BatchInfo(last, batch_max_ts, size))
            if batch_max_ts > max_ts:
                max_ts, max_ts_offset = batch_max_ts, last
            offset = last + 1
            pos += size
        first = self.log_end_offset
        self._append(buf, patched, leader_epoch, first, now)
        return AppendResult(
            first_offset=first,
            last_offset=offset - 1,
            max_timestamp=max_ts,
            offset_of_max_timestamp=max_ts_offset,
            log_append_time=append_time,
            log_start_offset=self.log_start_offset,
            batches=len(patched),
            bytes=len(buf),
        )

    def append_as_follower(self, data: bytes | bytearray) -> AppendResult:
        """Append batches that already carry their offsets and epochs (replication)."""
        buf = bytes(data)
        headers = self.validate_batches(buf)
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
        self._append(buf, infos, epoch, first, int(time.time() * 1000))
        for h in headers:
            if h.partition_leader_epoch >= 0:
                self.leader_epoch_cache.assign(h.partition_leader_epoch, h.base_offset)
        last = infos[-1].last_offset if infos else self.log_end_offset - 1
        max_ts = max((i.max_timestamp for i in infos), default=v2.NO_TIMESTAMP)
        return AppendResult(
            first, last, max_ts, last, -1, self.log_start_offset, len(infos), len(buf)
        )

    def validate_batches(self, data: bytes | bytearray | memoryview) -> list[v2.BatchHeader]:
        """Frame, size-check and CRC-check concatenated v2 batches (no decoding)."""
        headers = []
        pos = 0
        view = memoryview(data)
        end = len(view)
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
            if size > self.config.max_message_bytes:
                raise RecordTooLargeError(
                    f"batch of {size} bytes exceeds max.message.bytes "
                    f"{self.config.max_message_bytes}",
                    position=pos,
                )
            if v2.compute_crc(view[pos : pos + size]) != header.crc:
                raise CorruptRecordError("record batch CRC mismatch", position=pos)
            if header.record_count <= 0 or header.last_offset_delta != header.record_count - 1:
                raise InvalidRecordError(
                    f"record count {header.record_count} does not match last offset delta "
                    f"{header.last_offset_delta}",
                    position=pos,
                )
            headers.append(header)
            pos += size
        return headers

    def _append(
        self,
        buf: bytes | bytearray,
        infos: list[BatchInfo],
        leader_epoch: int,
        first_offset: int,
        now: int,
    ) -> None:
        if not infos:
            return
        size = len(buf)
        if size > self.config.segment_bytes:
            raise RecordTooLargeError(
                f"{size} bytes of batches exceed segment.bytes {self.config.segment_bytes}"
            )
        max_ts = max(i.max_timestamp for i in infos)
        segment = self._maybe_roll(size, max_ts, infos[-1].last_offset, first_offset, now)
        if leader_epoch >= 0:
            self.leader_epoch_cache.assign(leader_epoch, first_offset)
        segment.append(buf, infos)
        self.log_end_offset = infos[-1].last_offset + 1
        self.unflushed_messages += infos[-1].last_offset - first_offset + 1
        if self.unflushed_messages >= self.config.flush_messages:
            self.flush()

    # --- rolling ---------------------------------------------------------

    def _maybe_roll(
        self, size: int, max_ts: int, max_offset: int, first_offset: int, now: int
    ) -> LogSegment:
        seg = self.active_segment
        if seg.should_roll(
            max_segment_bytes=self.config.segment_bytes,
            max_segment_ms=self.config.segment_ms,
            jitter_ms=self.config.segment_jitter_ms,
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
        """Seal the active segment and start a new one at the log end offset."""
        new_base = max(expected_next_offset or 0, self.log_end_offset)
        active = self.active_segment
        if active.base_offset == new_base:
            if active.size == 0:
                # KAFKA-6388: an empty active segment that "needs" a roll (e.g. a full
                # zero-capacity index) is recreated in place rather than duplicated.
                return active
            raise StorageError(f"trying to roll a new segment at existing offset {new_base}")
        active.on_become_inactive()
        seg = LogSegment.open(
            self.dir,
            new_base,
            index_interval_bytes=self.config.index_interval_bytes,
            max_index_size=self.config.segment_index_bytes,
            create=True,
            now_ms=now_ms,
        )
        self._segments.append(seg)
        return seg

    # --- reading ---------------------------------------------------------

    def read(
        self,
        start_offset: int,
        max_bytes: int,
        *,
        upper_bound: int | None = None,
        min_one_message: bool = True,
    ) -> FetchSlice | None:
        """Whole batches from `start_offset`, at most `max_bytes` (unless
        `min_one_message`), below `upper_bound` (default LEO; the broker passes the
        high watermark or last stable offset). None when there is nothing yet.

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
        while idx < len(self._segments):
            seg = self._segments[idx]
            max_position = None
            if bound < leo:
                # Stop at the batch holding `bound` if it lies in this segment.
                loc = seg.translate_offset(bound)
                if loc is not None:
                    max_position = loc.position
            got = seg.read(start_offset, max_bytes, max_position, min_one_message)
            if got is not None:
                # The segment holds `start_offset`: an empty read (the first batch is
                # over `max_bytes`) must not skip ahead to a later segment's batches.
                return FetchSlice(seg, got[0], got[1], start_offset) if got[1] > 0 else None
            idx += 1
        return None

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

    def fetch_offset_by_timestamp(self, timestamp: int) -> tuple[int, int] | None:
        """(offset, timestamp) of the first record with timestamp >= `timestamp`."""
        for seg in self._segments:
            if seg.largest_timestamp >= timestamp and seg.max_timestamp_so_far >= 0:
                found = seg.find_offset_by_timestamp(timestamp, self.log_start_offset)
                if found is not None:
                    return found
        return None

    def max_timestamp_and_offset(self) -> tuple[int, int]:
        """(largest timestamp, its batch's last offset) over the whole log."""
        best = (v2.NO_TIMESTAMP, -1)
        for seg in self._segments:
            if seg.max_timestamp_so_far > best[0]:
                best = (seg.max_timestamp_so_far, seg.offset_of_max_timestamp_so_far)
        return best

    # --- truncation and log start ----------------------------------------

    def truncate_to(self, offset: int) -> bool:
        """Remove everything at or after `offset` (a follower diverged). True if anything went."""
        if offset >= self.log_end_offset:
            return False
        if offset < self.log_start_offset:
            offset = self.log_start_offset
        keep = [s for s in self._segments if s.base_offset < offset] or self._segments[:1]
        for seg in self._segments[len(keep) :]:
            _delete_segment_files(seg)
        self._segments = keep
        self.active_segment.truncate_to(offset)
        self.log_end_offset = self.active_segment.read_next_offset()
        if self.active_segment.base_offset > self.log_end_offset:
            self.log_end_offset = self.active_segment.base_offset
        self.high_watermark = min(self.high_watermark, self.log_end_offset)
        self.recovery_point = min(self.recovery_point, self.log_end_offset)
        self.leader_epoch_cache.truncate_from_end(self.log_end_offset)
        return True

    def truncate_fully_and_start_at(self, offset: int) -> None:
        """Delete every segment and restart the log empty at `offset`."""
        for seg in self._segments:
            _delete_segment_files(seg)
        self._segments = [
            LogSegment.open(
                self.dir,
                offset,
                index_interval_bytes=self.config.index_interval_bytes,
                max_index_size=self.config.segment_index_bytes,
                create=True,
            )
        ]
        self.log_start_offset = self.log_end_offset = self.high_watermark = offset
        self.recovery_point = offset
        self.leader_epoch_cache.clear()

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
        return True

    # --- durability -------------------------------------------------------

    def flush(self, up_to_offset: int | None = None) -> None:
        """fsync segments holding unflushed data and advance the recovery point."""
        target = self.log_end_offset if up_to_offset is None else up_to_offset
        if target <= self.recovery_point:
            return
        for seg in self._segments:
            nxt = self._segments.index(seg) + 1
            seg_end = self._segments[nxt].base_offset if nxt < len(self._segments) else None
            if seg_end is None or seg_end > self.recovery_point:
                seg.flush()
        self.leader_epoch_cache.flush()
        self.recovery_point = target
        self.unflushed_messages = 0
        self.last_flush_ms = int(time.time() * 1000)

    def close(self) -> None:
        """Flush and close every segment."""
        self.flush()
        for seg in self._segments:
            seg.close()


class RecordTooLargeError(CorruptRecordError):
    """A batch larger than max.message.bytes (Kafka's MESSAGE_TOO_LARGE)."""


class InvalidRecordError(CorruptRecordError):
    """A well-framed batch whose fields contradict each other (INVALID_RECORD)."""


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
            for item in FileRecords(fd).batches(0):
                if isinstance(item, LogBatch):
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
    if rec.truncated_bytes:
        report.truncated_bytes += rec.truncated_bytes
        report.truncation_reasons.append(
            f"{segment_file_name(base, '.log')}: {rec.truncated_bytes} bytes: {rec.reason}"
        )


def _recover_from(
    segments: list[LogSegment], recovery_point: int, report: LoadReport
) -> list[LogSegment]:
    """Recover every segment that may hold unflushed data; drop what follows a
    truncation (later segments cannot be trusted once an earlier one was torn)."""
    start = 0
    for i, seg in enumerate(segments):
        if seg.base_offset <= recovery_point:
            start = i
    for i in range(start, len(segments)):
        seg = segments[i]
        if seg.base_offset in report.recovered_segments:
            rec = RecoveryResult(0, None, seg.size)
        else:
            rec = seg.recover()
            _note_recovery(report, seg.base_offset, rec)
        if rec.truncated_bytes > 0 and i + 1 < len(segments):
            for later in segments[i + 1 :]:
                _delete_segment_files(later)
                report.deleted_files.append(later.log_path.name)
            return segments[: i + 1]
    return segments


def _delete_segment_files(seg: LogSegment) -> None:
    paths = seg.file_paths()
    seg.close()
    for p in paths:
        p.unlink(missing_ok=True)
