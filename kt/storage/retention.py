"""Retention: which of a partition log's oldest segments may go, as Kafka 4.4 decides.

Kafka's `UnifiedLog.deleteOldSegments` runs up to three passes, each over the
segments left by the previous one, oldest first, stopping at the first segment it
keeps:

1. log start offset breach (every policy, so compact-only logs too): a segment
   goes when the next segment's base offset is at or below the log start offset,
   i.e. it holds nothing readable any more (after DeleteRecords, say);
2. `retention.bytes` breach (policy `delete`, -1 = unlimited): while the log is
   larger than the limit, a segment goes if removing it still leaves at least
   `retention.bytes` (so a log of exactly the limit keeps everything);
3. `retention.ms` breach (policy `delete`, -1 = unlimited): a segment goes when
   `now - largest timestamp > retention.ms` (strictly; at exactly the limit it
   stays). The largest timestamp is the segment's largest record timestamp, or
   its file's modification time when it has none. A largest timestamp in the
   future makes the segment "never old enough": it blocks time retention, and
   it is reported (`future_timestamps`) so the broker can warn, as Kafka does.

Every pass obeys two guards (Kafka's `deletableSegments`): a segment is deletable
only if the high watermark is at or above its upper bound (the next segment's base,
or the log end offset for the active segment), so nothing at or above the high
watermark ever goes; and the last segment is never deletable while empty. The
active segment *can* be selected (non-empty, wholly below the high watermark,
breached); the log then rolls a new empty active segment first, so it never
ends up without one — the selected segments are always sealed when deleted.

This module is pure: it decides, on anything shaped like a segment. Applying the
decision — advancing the log start offset, renaming files `.deleted`, unlinking
them after `file.delete.delay.ms` — is `PartitionLog.plan_retention` /
`apply_retention` / `delete_old_segments`.
"""

from __future__ import annotations

import enum
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Protocol

from kt.storage.log_config import LogConfig
from kt.storage.segment import LogSegment


class RetentionReason(enum.Enum):
    """Why a segment was selected (Kafka's LogStartOffsetBreach, RetentionSizeBreach,
    RetentionMsBreach)."""

    LOG_START_OFFSET = "log-start-offset"
    RETENTION_BYTES = "retention.bytes"
    RETENTION_MS = "retention.ms"


class SegmentLike(Protocol):
    """What retention reads of a segment (LogSegment has all three)."""

    @property
    def base_offset(self) -> int: ...

    @property
    def size(self) -> int: ...

    @property
    def largest_timestamp(self) -> int: ...


@dataclass(frozen=True, slots=True)
class DeletedSegment:
    """One segment retention selected: its offsets [base, next), bytes and why."""

    base_offset: int
    next_offset: int
    size: int
    largest_timestamp: int
    reason: RetentionReason


@dataclass(slots=True)
class RetentionSelection:
    """The oldest `count` segments may go; `future_timestamps` lists (base offset,
    largest timestamp) of segments whose timestamp is past `now` (they block time
    retention)."""

    selected: list[DeletedSegment] = field(default_factory=list)
    future_timestamps: list[tuple[int, int]] = field(default_factory=list)

    @property
    def count(self) -> int:
        """How many of the oldest segments were selected."""
        return len(self.selected)


def select_deletable(
    segments: Sequence[SegmentLike],
    *,
    config: LogConfig,
    log_start_offset: int,
    log_end_offset: int,
    high_watermark: int,
    now_ms: int,
) -> RetentionSelection:
    """Which of the oldest `segments` (in offset order) retention removes now.

    The three passes run in Kafka's order (log start offset, size, time), each
    continuing where the previous stopped; see the module docstring for the rules.
    """
    out = RetentionSelection()
    n = len(segments)
    i = 0

    def upper_bound(k: int) -> int:
        return segments[k + 1].base_offset if k + 1 < n else log_end_offset

    def run(reason: RetentionReason, predicate: _Predicate) -> None:
        nonlocal i
        while i < n:
            seg = segments[i]
            nxt = segments[i + 1] if i + 1 < n else None
            upper = upper_bound(i)
            # Kafka's order: the high-watermark guard, then the predicate (which may
            # have side effects), then the empty-last-segment guard.
            if high_watermark < upper:
                return
            if not predicate(seg, nxt):
                return
            if nxt is None and seg.size == 0:
                return
            out.selected.append(
                DeletedSegment(seg.base_offset, upper, seg.size, seg.largest_timestamp, reason)
            )
            i += 1

    run(
        RetentionReason.LOG_START_OFFSET,
        lambda seg, nxt: nxt is not None and nxt.base_offset <= log_start_offset,
    )
    if not config.delete:
        return out

    if config.retention_bytes >= 0:
        remaining = sum(s.size for s in segments[i:])
        if remaining >= config.retention_bytes:
            excess = [remaining - config.retention_bytes]

            def over_size(seg: SegmentLike, nxt: SegmentLike | None) -> bool:
                if excess[0] - seg.size >= 0:
                    excess[0] -= seg.size
                    return True
                return False

            run(RetentionReason.RETENTION_BYTES, over_size)

    if config.retention_ms >= 0:
        limit = config.retention_ms

        def too_old(seg: SegmentLike, nxt: SegmentLike | None) -> bool:
            largest = seg.largest_timestamp
            if largest > now_ms:
                out.future_timestamps.append((seg.base_offset, largest))
            return now_ms - largest > limit

        run(RetentionReason.RETENTION_MS, too_old)
    return out


class _Predicate(Protocol):
    def __call__(self, seg: SegmentLike, nxt: SegmentLike | None, /) -> bool: ...


@dataclass(slots=True)
class RetentionPlan:
    """A retention pass decided and half done (`PartitionLog.plan_retention`): the log
    start offset already advanced past `segments` (and, if they were all of them, a new
    active segment rolled), their files not yet touched. Persist the log start offset,
    then `PartitionLog.apply_retention(plan)`."""

    segments: list[LogSegment]
    selected: list[DeletedSegment]
    old_log_start_offset: int
    new_log_start_offset: int
    rolled: bool
    future_timestamps: list[tuple[int, int]]

    @property
    def log_start_moved(self) -> bool:
        """True when the log start offset advanced (checkpoint it before applying)."""
        return self.new_log_start_offset > self.old_log_start_offset

    @property
    def empty(self) -> bool:
        """True when no segment is to go."""
        return not self.selected


@dataclass(slots=True)
class RetentionResult:
    """What a retention pass did to one log."""

    deleted: list[DeletedSegment] = field(default_factory=list)
    old_log_start_offset: int = 0
    log_start_offset: int = 0
    rolled: bool = False
    future_timestamps: list[tuple[int, int]] = field(default_factory=list)

    @property
    def deleted_segments(self) -> int:
        """How many segments were removed from the log (renamed `.deleted`)."""
        return len(self.deleted)

    @property
    def deleted_bytes(self) -> int:
        """Bytes of the removed segments."""
        return sum(d.size for d in self.deleted)

    @property
    def log_start_moved(self) -> bool:
        """True when the log start offset advanced."""
        return self.log_start_offset > self.old_log_start_offset
