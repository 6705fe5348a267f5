"""The ``leader-epoch-checkpoint`` file and the leader-epoch cache built on it.

The file is a ``CheckpointFile`` (see ``checkpoint``) whose entries are
``epoch startOffset``: the first offset written in each leader epoch. kt's
parser also checks what a healthy cache always satisfies: epochs strictly
increasing, start offsets non-decreasing, nothing negative.

:class:`LeaderEpochCache` follows Kafka's ``LeaderEpochFileCache``: ``assign`` is
append-only (a new entry evicts trailing entries it would make non-monotonic),
``end_offset_for`` answers OffsetsForLeaderEpoch, and the two truncations follow
log truncation and log-start-offset increments. Each change is persisted.
"""

from __future__ import annotations

import bisect
import os
from collections.abc import Iterable
from pathlib import Path
from typing import NamedTuple

from kt.storage.atomic import atomic_write
from kt.storage.checkpoint import (
    INT32_MAX,
    INT64_MAX,
    INT64_MIN,
    CheckpointProblems,
    encode_checkpoint_lines,
    parse_checkpoint_lines,
    parse_java_int,
)
from kt.storage.errors import CorruptCheckpointError

UNDEFINED_EPOCH = -1
UNDEFINED_EPOCH_OFFSET = -1


class EpochEntry(NamedTuple):
    """A leader epoch and the first offset written in it."""

    epoch: int
    start_offset: int


def _parse_epoch_entry(fields: list[str]) -> EpochEntry | str:
    if len(fields) != 2 or not fields[0]:
        return f"expected 2 fields, found {len([f for f in fields if f])}"
    epoch = parse_java_int(fields[0])
    if epoch is None:
        return f"epoch {fields[0]!r} is not an int32"
    start = parse_java_int(fields[1], INT64_MIN, INT64_MAX)
    if start is None:
        return f"start offset {fields[1]!r} is not an int64"
    if epoch < 0:
        return f"negative epoch {epoch}"
    if start < 0:
        return f"negative start offset {start}"
    return EpochEntry(epoch, start)


def _leader_epochs(
    data: bytes | str, path: str | None, strict: bool, allow_empty: bool
) -> tuple[list[EpochEntry], list[CorruptCheckpointError]]:
    parsed = parse_checkpoint_lines(
        data, path, _parse_epoch_entry, "epoch startOffset", strict=strict, allow_empty=allow_empty
    )
    problems = CheckpointProblems(path, strict, parsed.problems)
    out: list[EpochEntry] = []
    prev: EpochEntry | None = None
    for lineno, e in parsed.entries:
        if prev is not None:
            if e.epoch <= prev.epoch:
                problems.report(
                    f"line {lineno}: epoch {e.epoch} is not greater than the previous epoch "
                    f"{prev.epoch}"
                )
            elif e.start_offset < prev.start_offset:
                problems.report(
                    f"line {lineno}: start offset {e.start_offset} of epoch {e.epoch} is less "
                    f"than epoch {prev.epoch}'s {prev.start_offset}"
                )
        out.append(e)
        prev = e
    return out, problems.found


def parse_leader_epoch_checkpoint(
    data: bytes | str, path: str | None = None, *, allow_empty: bool = False
) -> list[EpochEntry]:
    """Entries of a leader-epoch checkpoint; CorruptCheckpointError on any problem."""
    entries, _ = _leader_epochs(data, path, strict=True, allow_empty=allow_empty)
    return entries


def salvage_leader_epoch_checkpoint(
    data: bytes | str, path: str | None = None
) -> tuple[list[EpochEntry], list[CorruptCheckpointError]]:
    """Every entry line that parses, in file order, and every problem found."""
    return _leader_epochs(data, path, strict=False, allow_empty=True)


def read_leader_epoch_checkpoint(
    path: str | os.PathLike[str], *, allow_empty: bool = False
) -> list[EpochEntry]:
    """Read a leader-epoch checkpoint file strictly."""
    return parse_leader_epoch_checkpoint(
        Path(path).read_bytes(), str(path), allow_empty=allow_empty
    )


def leader_epoch_problems(entries: Iterable[EpochEntry]) -> list[str]:
    """Why ``entries`` would not make a valid checkpoint (empty list: they would)."""
    out: list[str] = []
    prev: EpochEntry | None = None
    for e in entries:
        if not 0 <= e.epoch <= INT32_MAX:
            out.append(f"epoch {e.epoch} is not an int32 >= 0")
        if not 0 <= e.start_offset <= INT64_MAX:
            out.append(f"start offset {e.start_offset} of epoch {e.epoch} is not an int64 >= 0")
        if prev is not None:
            if e.epoch <= prev.epoch:
                out.append(f"epoch {e.epoch} follows epoch {prev.epoch}: epochs must increase")
            elif e.start_offset < prev.start_offset:
                out.append(
                    f"start offset {e.start_offset} of epoch {e.epoch} is less than epoch "
                    f"{prev.epoch}'s {prev.start_offset}"
                )
        prev = e
    return out


def encode_leader_epoch_checkpoint(entries: Iterable[EpochEntry]) -> bytes:
    """Kafka's bytes for a leader-epoch checkpoint (ValueError for invalid entries)."""
    items = list(entries)
    problems = leader_epoch_problems(items)
    if problems:
        raise ValueError(problems[0])
    return encode_checkpoint_lines(f"{e.epoch} {e.start_offset}" for e in items)


def write_leader_epoch_checkpoint(
    path: str | os.PathLike[str], entries: Iterable[EpochEntry]
) -> None:
    """Write a leader-epoch checkpoint atomically."""
    atomic_write(path, encode_leader_epoch_checkpoint(entries))


class LeaderEpochCache:
    """Epoch → start offset, persisted to a leader-epoch-checkpoint (if a path is given).

    Not thread-safe: the broker calls it under the partition's lock.
    """

    def __init__(
        self, path: str | os.PathLike[str] | None = None, entries: Iterable[EpochEntry] = ()
    ) -> None:
        self.path = Path(path) if path is not None else None
        self._entries: list[EpochEntry] = []
        for e in entries:
            self._assign(e)

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> LeaderEpochCache:
        """Load from a checkpoint file; a missing or empty file gives an empty cache.

        Entries are replayed through ``assign`` as Kafka does, so a file with
        non-monotonic entries loads to a consistent cache rather than failing.
        """
        p = Path(path)
        if not p.exists():
            return cls(p)
        # Syntax errors are fatal (Kafka fails the log dir); ordering is repaired by assign.
        parsed = parse_checkpoint_lines(
            p.read_bytes(), str(p), _parse_epoch_entry, "epoch startOffset", allow_empty=True
        )
        return cls(p, (e for _, e in parsed.entries))

    @property
    def entries(self) -> list[EpochEntry]:
        """A copy of the entries, ascending."""
        return list(self._entries)

    def __len__(self) -> int:
        return len(self._entries)

    @property
    def latest_entry(self) -> EpochEntry | None:
        """The newest entry, or None."""
        return self._entries[-1] if self._entries else None

    @property
    def latest_epoch(self) -> int | None:
        """The newest epoch, or None."""
        return self._entries[-1].epoch if self._entries else None

    @property
    def earliest_entry(self) -> EpochEntry | None:
        """The oldest entry, or None."""
        return self._entries[0] if self._entries else None

    def _needs_update(self, entry: EpochEntry) -> bool:
        latest = self.latest_entry
        return (
            latest is None
            or entry.epoch != latest.epoch
            or entry.start_offset < latest.start_offset
        )

    def _assign(self, entry: EpochEntry) -> bool:
        if entry.epoch < 0 or entry.start_offset < 0:
            raise ValueError(f"invalid leader epoch entry {entry}")
        if not self._needs_update(entry):
            return False
        # Drop trailing entries the new one makes non-monotonic (Kafka's
        # maybeTruncateNonMonotonicEntries): same-or-later epochs, or same-or-later offsets.
        while self._entries and (
            self._entries[-1].epoch >= entry.epoch
            or self._entries[-1].start_offset >= entry.start_offset
        ):
            self._entries.pop()
        self._entries.append(entry)
        return True

    def assign(self, epoch: int, start_offset: int) -> bool:
        """Record that ``epoch`` starts at ``start_offset``; returns whether anything changed.

        Re-assigning the latest epoch at a later offset is a no-op; a new entry
        removes trailing entries whose epoch or start offset is >= its own.
        """
        changed = self._assign(EpochEntry(epoch, start_offset))
        if changed:
            self.flush()
        return changed

    def end_offset_for(self, requested_epoch: int, log_end_offset: int) -> tuple[int, int]:
        """(epoch, end offset) for OffsetsForLeaderEpoch, as Kafka's ``endOffsetFor``.

        - undefined epoch (-1), or an epoch above every known one: (-1, -1);
        - the latest epoch: (epoch, log_end_offset);
        - otherwise the start offset of the next higher epoch, paired with the
          greatest known epoch <= requested (or the requested epoch itself when it
          is below every known epoch).
        """
        if requested_epoch == UNDEFINED_EPOCH:
            return UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
        if self._entries and self._entries[-1].epoch == requested_epoch:
            return requested_epoch, log_end_offset
        i = bisect.bisect_right(self._entries, requested_epoch, key=lambda e: e.epoch)
        if i == len(self._entries):
            return UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
        higher = self._entries[i]
        if i == 0:
            return requested_epoch, higher.start_offset
        return self._entries[i - 1].epoch, higher.start_offset

    def epoch_for_offset(self, offset: int) -> int | None:
        """The epoch the record at ``offset`` was written in, or None if before every entry."""
        i = bisect.bisect_right(self._entries, offset, key=lambda e: e.start_offset)
        return None if i == 0 else self._entries[i - 1].epoch

    def truncate_from_end(self, end_offset: int) -> None:
        """Drop entries starting at or after ``end_offset`` (the log was truncated there)."""
        if end_offset < 0 or not self._entries or self._entries[-1].start_offset < end_offset:
            return
        while self._entries and self._entries[-1].start_offset >= end_offset:
            self._entries.pop()
        self.flush()

    def truncate_from_start(self, start_offset: int) -> None:
        """Forget epochs wholly below a new log start offset.

        Entries starting at or before ``start_offset`` are removed and the last of
        them is re-added starting at ``start_offset``, as Kafka does.
        """
        if start_offset < 0:
            return
        removed: EpochEntry | None = None
        while self._entries and self._entries[0].start_offset <= start_offset:
            removed = self._entries.pop(0)
        if removed is None:
            return
        self._entries.insert(0, EpochEntry(removed.epoch, start_offset))
        self.flush()

    def clear(self) -> None:
        """Remove every entry."""
        self._entries.clear()
        self.flush()

    def flush(self) -> None:
        """Persist the entries to the checkpoint file (no-op without a path)."""
        if self.path is not None:
            write_leader_epoch_checkpoint(self.path, self._entries)
