"""Per-partition idempotent-producer state, as Kafka's ProducerStateManager keeps it.

For every producer id that wrote to the partition Kafka remembers its epoch, the
metadata of its last five batches (sequence range, offsets, timestamp), the epoch
of the last transaction coordinator that wrote a marker for it, the first offset
of its open transaction and the timestamp of its last write. The leader checks
each produce against it before writing:

* a batch whose epoch and sequence range equal one of the last five is a retry:
  nothing is written and the client gets the original offsets back;
* an epoch below the current one is fenced (INVALID_PRODUCER_EPOCH);
* a new epoch must start at sequence 0, and within an epoch each batch must
  start right after the previous one (sequences wrap from Int.MaxValue to 0),
  else OUT_OF_ORDER_SEQUENCE_NUMBER. A producer id the partition has no state
  for is accepted at any sequence (Kafka's behaviour since KIP-360, 2.5: state
  lost to retention or DeleteRecords no longer fails a producer with
  UNKNOWN_PRODUCER_ID).

The state survives restarts through ``<offset>.snapshot`` files (one entry per
producer, holding only its last batch) plus a replay of the log after the
snapshot. Offsets: the *map end offset* is the log offset the state reflects
(everything below it has been applied); a snapshot is named after it.

Not thread-safe: the broker serialises calls per partition, as for PartitionLog.
"""

from __future__ import annotations

import contextlib
import enum
import os
import time
from collections import deque
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType

from kt.storage import record_batch as v2
from kt.storage.errors import CorruptRecordError, CorruptSnapshotError
from kt.storage.file_records import LogBatch
from kt.storage.log_files import parse_segment_file_name
from kt.storage.producer_snapshot import (
    NO_TXN_FIRST_OFFSET,
    ProducerSnapshotEntry,
    read_producer_snapshot,
    snapshot_file_name,
    write_producer_snapshot,
)

NUM_BATCHES_TO_RETAIN = 5
DEFAULT_PRODUCER_ID_EXPIRATION_MS = 86_400_000  # producer.id.expiration.ms
INT32_MAX = 2**31 - 1

# Kafka error codes the checks answer with (kt.storage does not import kt.protocol).
NONE = 0
OUT_OF_ORDER_SEQUENCE_NUMBER = 45
INVALID_PRODUCER_EPOCH = 47
INVALID_TXN_STATE = 48
TRANSACTION_COORDINATOR_FENCED = 52
INVALID_RECORD = 87


def decrement_sequence(sequence: int, decrement: int) -> int:
    """Kafka's DefaultRecordBatch.decrementSequence: the inverse of the wrapping increment."""
    if sequence < decrement:
        return INT32_MAX - (decrement - sequence) + 1
    return sequence - decrement


def in_sequence(last_seq: int, next_seq: int) -> bool:
    """True when `next_seq` directly follows `last_seq` (Int.MaxValue wraps to 0)."""
    return next_seq == last_seq + 1 or (next_seq == 0 and last_seq == INT32_MAX)


@dataclass(frozen=True, slots=True)
class BatchMetadata:
    """What Kafka keeps of one appended batch: enough to recognise a retry of it."""

    last_seq: int
    last_offset: int
    offset_delta: int  # last offset - first offset of the batch
    timestamp: int  # the batch's max timestamp as written

    @property
    def first_seq(self) -> int:
        """Sequence of the batch's first record."""
        return decrement_sequence(self.last_seq, self.offset_delta)

    @property
    def first_offset(self) -> int:
        """Offset of the batch's first record."""
        return self.last_offset - self.offset_delta


@dataclass(slots=True)
class ProducerStateEntry:
    """The state of one producer id (Kafka's ProducerStateEntry)."""

    producer_id: int
    producer_epoch: int = v2.NO_PRODUCER_EPOCH
    coordinator_epoch: int = -1
    last_timestamp: int = v2.NO_TIMESTAMP
    current_txn_first_offset: int | None = None
    # Oldest first; at most NUM_BATCHES_TO_RETAIN, all of the current epoch.
    batches: deque[BatchMetadata] = field(default_factory=deque)

    @property
    def is_empty(self) -> bool:
        """True when no batch of the current epoch is remembered."""
        return not self.batches

    @property
    def first_seq(self) -> int:
        """First sequence of the oldest remembered batch, -1 when none."""
        return self.batches[0].first_seq if self.batches else v2.NO_SEQUENCE

    @property
    def last_seq(self) -> int:
        """Last sequence written, -1 when no batch is remembered."""
        return self.batches[-1].last_seq if self.batches else v2.NO_SEQUENCE

    @property
    def last_data_offset(self) -> int:
        """Last offset written, -1 when no batch is remembered."""
        return self.batches[-1].last_offset if self.batches else -1

    @property
    def last_offset_delta(self) -> int:
        """Offset delta of the last batch, 0 when none."""
        return self.batches[-1].offset_delta if self.batches else 0

    def find_duplicate(self, epoch: int, first_seq: int, last_seq: int) -> BatchMetadata | None:
        """The remembered batch with exactly this epoch and sequence range, if any."""
        if epoch != self.producer_epoch:
            return None
        for batch in self.batches:
            if batch.first_seq == first_seq and batch.last_seq == last_seq:
                return batch
        return None

    def maybe_update_epoch(self, epoch: int) -> bool:
        """Move to `epoch`, forgetting the batches of the old one; True if it changed."""
        if epoch == self.producer_epoch:
            return False
        self.batches.clear()
        self.producer_epoch = epoch
        return True

    def add_batch(
        self, epoch: int, last_seq: int, last_offset: int, offset_delta: int, timestamp: int
    ) -> None:
        """Remember an appended batch, dropping the oldest beyond five."""
        self.maybe_update_epoch(epoch)
        if len(self.batches) == NUM_BATCHES_TO_RETAIN:
            self.batches.popleft()
        self.batches.append(BatchMetadata(last_seq, last_offset, offset_delta, timestamp))
        self.last_timestamp = timestamp

    def copy(self) -> ProducerStateEntry:
        """An independent copy."""
        return ProducerStateEntry(
            self.producer_id,
            self.producer_epoch,
            self.coordinator_epoch,
            self.last_timestamp,
            self.current_txn_first_offset,
            deque(self.batches),
        )

    def to_snapshot_entry(self) -> ProducerSnapshotEntry:
        """The snapshot entry Kafka writes: the last batch only."""
        return ProducerSnapshotEntry(
            self.producer_id,
            self.producer_epoch,
            self.last_seq,
            self.last_data_offset,
            self.last_offset_delta,
            self.last_timestamp,
            self.coordinator_epoch,
            NO_TXN_FIRST_OFFSET
            if self.current_txn_first_offset is None
            else self.current_txn_first_offset,
        )

    @classmethod
    def from_snapshot_entry(cls, e: ProducerSnapshotEntry) -> ProducerStateEntry:
        """Kafka's readSnapshot: a negative last offset means no batch is remembered."""
        batches: deque[BatchMetadata] = deque()
        if e.last_offset >= 0:
            batches.append(
                BatchMetadata(e.last_sequence, e.last_offset, e.offset_delta, e.timestamp)
            )
        return cls(
            e.producer_id,
            e.epoch,
            e.coordinator_epoch,
            e.timestamp,
            e.current_txn_first_offset if e.current_txn_first_offset >= 0 else None,
            batches,
        )


@dataclass(frozen=True, slots=True)
class CompletedTxn:
    """A transaction a COMMIT/ABORT marker closed (Kafka's CompletedTxn): its first
    data offset, the marker's offset, and whether it was aborted."""

    producer_id: int
    first_offset: int
    last_offset: int
    is_aborted: bool


@dataclass(frozen=True, slots=True)
class ProducerDescription:
    """One active producer as DescribeProducers reports it."""

    producer_id: int
    producer_epoch: int
    last_sequence: int
    last_timestamp: int
    coordinator_epoch: int
    current_txn_start_offset: int  # -1 without an open transaction


class CheckOutcome(enum.Enum):
    """What the leader does with a produce request."""

    OK = "ok"  # append it
    DUPLICATE = "duplicate"  # a retry: write nothing, answer with the original offsets
    INVALID_PRODUCER_EPOCH = "invalid_producer_epoch"
    OUT_OF_ORDER_SEQUENCE = "out_of_order_sequence"
    INVALID_TXN_STATE = "invalid_txn_state"
    INVALID_RECORD = "invalid_record"
    COORDINATOR_FENCED = "coordinator_fenced"


_ERROR_CODES = {
    CheckOutcome.OK: NONE,
    CheckOutcome.DUPLICATE: NONE,
    CheckOutcome.INVALID_PRODUCER_EPOCH: INVALID_PRODUCER_EPOCH,
    CheckOutcome.OUT_OF_ORDER_SEQUENCE: OUT_OF_ORDER_SEQUENCE_NUMBER,
    CheckOutcome.INVALID_TXN_STATE: INVALID_TXN_STATE,
    CheckOutcome.INVALID_RECORD: INVALID_RECORD,
    CheckOutcome.COORDINATOR_FENCED: TRANSACTION_COORDINATOR_FENCED,
}


@dataclass(frozen=True, slots=True)
class CheckResult:
    """The verdict on a produce request's batches.

    For DUPLICATE, Kafka answers the produce with the original batch's first offset
    as base offset and its max timestamp as log append time (even on CreateTime
    topics), and writes nothing.
    """

    outcome: CheckOutcome
    message: str = ""
    duplicate: BatchMetadata | None = None
    batch_index: int = -1  # the batch that decided a non-OK outcome

    @property
    def ok(self) -> bool:
        """True when the batches should be appended."""
        return self.outcome is CheckOutcome.OK

    @property
    def error_code(self) -> int:
        """Kafka's error code for the partition's produce response (0 for OK and DUPLICATE)."""
        return _ERROR_CODES[self.outcome]

    @property
    def base_offset(self) -> int:
        """DUPLICATE: the original batch's first offset."""
        return self._dup().first_offset

    @property
    def last_offset(self) -> int:
        """DUPLICATE: the original batch's last offset."""
        return self._dup().last_offset

    @property
    def timestamp(self) -> int:
        """DUPLICATE: the original batch's max timestamp."""
        return self._dup().timestamp

    def _dup(self) -> BatchMetadata:
        if self.duplicate is None:
            raise ValueError(f"not a duplicate: {self.outcome.value}")
        return self.duplicate


_OK = CheckResult(CheckOutcome.OK)


class ProducerStateManager:
    """The producer state of one partition and its snapshot files in `directory`."""

    def __init__(
        self,
        directory: str | os.PathLike[str],
        *,
        producer_id_expiration_ms: int = DEFAULT_PRODUCER_ID_EXPIRATION_MS,
    ) -> None:
        self.dir = Path(directory)
        self.producer_id_expiration_ms = producer_id_expiration_ms
        self._producers: dict[int, ProducerStateEntry] = {}
        # Transactions whose marker is written but maybe not yet replicated (Kafka's
        # unreplicatedTxns): they hold the first unstable offset until the high
        # watermark passes their marker, so a read_committed consumer never sees a
        # transaction's records before its outcome is safe from a leader change.
        self._unreplicated: list[CompletedTxn] = []
        self._map_end_offset = 0
        self._last_snap_offset = 0
        self._snapshots: dict[int, Path] = self._scan_snapshots()

    def relocate(self, directory: str | os.PathLike[str]) -> None:
        """The partition's log moved to `directory` with copies of its snapshot files
        (a move between log directories): the in-memory state stays as it is, the
        snapshot files are those found there from now on."""
        self.dir = Path(directory)
        self._snapshots = self._scan_snapshots()

    # --- introspection -----------------------------------------------------

    @property
    def map_end_offset(self) -> int:
        """The log offset the state reflects: every batch below it has been applied."""
        return self._map_end_offset

    @property
    def producers(self) -> Mapping[int, ProducerStateEntry]:
        """Active producers by id (a read-only view; do not mutate the entries)."""
        return MappingProxyType(self._producers)

    def last_entry(self, producer_id: int) -> ProducerStateEntry | None:
        """The state of one producer id, if any."""
        return self._producers.get(producer_id)

    def describe_producers(self) -> list[ProducerDescription]:
        """Every active producer as DescribeProducers reports it, by producer id."""
        return [
            ProducerDescription(
                pid,
                e.producer_epoch,
                e.last_seq,
                e.last_timestamp,
                e.coordinator_epoch,
                -1 if e.current_txn_first_offset is None else e.current_txn_first_offset,
            )
            for pid, e in sorted(self._producers.items())
        ]

    def snapshot_entries(self) -> list[ProducerSnapshotEntry]:
        """What a snapshot taken now would hold, by producer id."""
        return [e.to_snapshot_entry() for _, e in sorted(self._producers.items())]

    # --- transactions ----------------------------------------------------------

    def ongoing_txns(self) -> dict[int, int]:
        """Open transactions: producer id -> the first offset of its transaction."""
        return {
            pid: e.current_txn_first_offset
            for pid, e in self._producers.items()
            if e.current_txn_first_offset is not None
        }

    def first_unstable_offset(self, high_watermark: int) -> int | None:
        """The smallest first offset of the open transactions and of the completed
        ones whose marker is not below `high_watermark` yet; None when there is none
        (Kafka's firstUnstableOffset). Completed transactions whose marker the high
        watermark passed are forgotten here."""
        self._unreplicated = [t for t in self._unreplicated if t.last_offset >= high_watermark]
        firsts = [t.first_offset for t in self._unreplicated]
        firsts.extend(self.ongoing_txns().values())
        return min(firsts, default=None)

    def last_stable_offset(self, completed: CompletedTxn) -> int:
        """The last stable offset right after `completed` ends, as its `.txnindex`
        entry records it: the first offset of the earliest other open transaction,
        else the offset after the marker (Kafka's lastStableOffset(CompletedTxn))."""
        others = [o for p, o in self.ongoing_txns().items() if p != completed.producer_id]
        return min(others) if others else completed.last_offset + 1

    def check_end_txn_marker(
        self, producer_id: int, producer_epoch: int, coordinator_epoch: int
    ) -> CheckResult:
        """Validate a COMMIT/ABORT marker the transaction coordinator asks the leader
        to write (Kafka's ProducerAppendInfo.appendEndTxnMarker, COORDINATOR origin):
        an epoch below the producer's is INVALID_PRODUCER_EPOCH, a coordinator epoch
        below the last marker's TRANSACTION_COORDINATOR_FENCED. Changes nothing."""
        entry = self._producers.get(producer_id)
        if entry is None:
            return _OK
        if producer_epoch < entry.producer_epoch:
            return CheckResult(
                CheckOutcome.INVALID_PRODUCER_EPOCH,
                f"epoch of producer {producer_id} is {producer_epoch}, which is smaller "
                f"than the last seen epoch {entry.producer_epoch}",
            )
        if entry.coordinator_epoch > coordinator_epoch:
            return CheckResult(
                CheckOutcome.COORDINATOR_FENCED,
                f"invalid coordinator epoch for producerId {producer_id}: "
                f"{coordinator_epoch} (zombie), {entry.coordinator_epoch} (current)",
            )
        return _OK

    # --- the produce path ----------------------------------------------------

    def check(self, header: v2.BatchHeader) -> CheckResult:
        """Decide what to do with one batch from a client (see :meth:`check_batches`)."""
        return self.check_batches([header])

    def check_batches(self, headers: Sequence[v2.BatchHeader]) -> CheckResult:
        """Validate a produce request's batches for one partition against the state,
        as Kafka's LogValidator and UnifiedLog.analyzeAndValidateProducerState do for
        a client append. Changes nothing.

        Batches are checked in order, each against the state as the earlier ones of
        the request would leave it. The first duplicate (compared with the state
        before the request) or error decides the whole request.
        """
        for i, h in enumerate(headers):
            # LogValidator's client-side rules, which run before the producer checks.
            if h.is_control:
                return CheckResult(
                    CheckOutcome.INVALID_RECORD,
                    "clients are not allowed to write control records",
                    batch_index=i,
                )
            if h.producer_id >= 0 and h.base_sequence < 0:
                return CheckResult(
                    CheckOutcome.INVALID_RECORD,
                    f"invalid sequence number {h.base_sequence} in record batch with "
                    f"producerId {h.producer_id}",
                    batch_index=i,
                )
        pending: dict[int, tuple[ProducerStateEntry, ProducerStateEntry]] = {}
        for i, h in enumerate(headers):
            if h.producer_id < 0:
                continue
            current = self._producers.get(h.producer_id)
            if current is not None:
                dup = current.find_duplicate(h.producer_epoch, h.base_sequence, h.last_sequence)
                if dup is not None:
                    return CheckResult(
                        CheckOutcome.DUPLICATE,
                        f"duplicate of the batch at offsets {dup.first_offset}..{dup.last_offset}",
                        duplicate=dup,
                        batch_index=i,
                    )
            if h.producer_id not in pending:
                base = current or ProducerStateEntry(h.producer_id)
                updated = base.copy()
                updated.batches.clear()
                pending[h.producer_id] = (base, updated)
            base, updated = pending[h.producer_id]
            verdict = _check_data_batch(base, updated, h)
            if verdict is not None:
                return CheckResult(verdict[0], verdict[1], batch_index=i)
            # Offsets are not known before the append; later checks only need sequences.
            updated.add_batch(h.producer_epoch, h.last_sequence, -1, h.last_offset_delta, -1)
            if updated.current_txn_first_offset is None and h.is_transactional:
                updated.current_txn_first_offset = 0
        return _OK

    def update(
        self, header: v2.BatchHeader, first_offset: int, last_offset: int, max_timestamp: int
    ) -> None:
        """Apply one appended data batch (after :meth:`check` said OK and the append
        succeeded), with the offsets and max timestamp it was written with.

        Moves the map end offset to ``last_offset + 1``. Batches without a producer
        id only do that.
        """
        if header.producer_id >= 0 and not header.is_control:
            self._apply_data_batch(
                header.producer_id,
                header.producer_epoch,
                header.last_sequence,
                first_offset,
                last_offset,
                max_timestamp,
                header.is_transactional,
            )
        self.update_map_end_offset(max(self._map_end_offset, last_offset + 1))

    def on_append(
        self,
        headers: Sequence[v2.BatchHeader],
        first_offset: int,
        log_append_time: int = v2.NO_TIMESTAMP,
    ) -> None:
        """Apply a whole successful leader append: `headers` as checked, `first_offset`
        and `log_append_time` from PartitionLog's AppendResult (-1: CreateTime, each
        batch keeps its own max timestamp)."""
        offset = first_offset
        for h in headers:
            last = offset + h.last_offset_delta
            ts = log_append_time if log_append_time >= 0 else h.max_timestamp
            self.update(h, offset, last, ts)
            offset = last + 1

    def apply_end_txn_marker(
        self,
        producer_id: int,
        producer_epoch: int,
        coordinator_epoch: int,
        offset: int,
        timestamp: int,
        *,
        commit: bool = True,
    ) -> CompletedTxn | None:
        """Apply a COMMIT/ABORT marker written at `offset` (no validation); returns
        the transaction it closed, None when none was open (an empty transaction:
        nothing for the `.txnindex` and the last stable offset)."""
        entry = self._entry(producer_id)
        first = entry.current_txn_first_offset
        entry.maybe_update_epoch(producer_epoch)
        entry.coordinator_epoch = coordinator_epoch
        entry.current_txn_first_offset = None
        entry.last_timestamp = timestamp
        self.update_map_end_offset(max(self._map_end_offset, offset + 1))
        if first is None:
            return None
        completed = CompletedTxn(producer_id, first, offset, not commit)
        self._unreplicated.append(completed)
        return completed

    def update_map_end_offset(self, offset: int) -> None:
        """Declare the state current up to `offset` (exclusive), e.g. after appends of
        batches without producer ids."""
        self._map_end_offset = offset

    # --- rebuilding --------------------------------------------------------

    def replay(self, batch: LogBatch) -> tuple[CompletedTxn, int] | None:
        """Apply a batch read back from the log or copied from the leader, without
        validation (Kafka's REPLICATION origin). A control batch closes the producer's
        transaction: returned then with the last stable offset its `.txnindex`
        entry would record (the caller writes it when the batch is new to the log)."""
        header = batch.header
        done = None
        if header is not None and header.producer_id >= 0:
            if header.is_control:
                done = self._replay_control(header, batch.data)
            else:
                self._apply_data_batch(
                    header.producer_id,
                    header.producer_epoch,
                    header.last_sequence,
                    header.base_offset,
                    header.last_offset,
                    header.max_timestamp,
                    header.is_transactional,
                )
        self._map_end_offset = max(self._map_end_offset, batch.next_offset)
        return done

    def replay_all(self, batches: Iterable[LogBatch], end_offset: int | None = None) -> None:
        """Replay `batches` (stopping at the first one at or after `end_offset`), then
        declare the state current up to `end_offset` when given."""
        for batch in batches:
            if end_offset is not None and batch.base_offset >= end_offset:
                break
            self.replay(batch)
        if end_offset is not None:
            self._map_end_offset = end_offset

    def load(self, log_start_offset: int, log_end_offset: int, *, now_ms: int | None = None) -> int:
        """Start from disk: drop the in-memory state, delete snapshots above the log
        end offset or at/below the log start offset (as Kafka's truncateAndReload),
        load the newest readable snapshot — deleting corrupt ones and falling back to
        older — skipping expired producers, and return the offset to replay the log
        from (feed ``PartitionLog.iter_batches(offset)`` to :meth:`replay`)."""
        self._clear()
        self._delete_out_of_range_snapshots(log_start_offset, log_end_offset)
        self._load_from_snapshot(log_start_offset, _now(now_ms))
        return max(self._map_end_offset, log_start_offset)

    def truncate_and_reload(
        self, log_start_offset: int, log_end_offset: int, *, now_ms: int | None = None
    ) -> int:
        """After the log was truncated (or its start moved): Kafka's truncateAndReload.
        Reloads from the newest snapshot in range unless the state already ends at
        `log_end_offset`; returns the offset to replay from."""
        self._delete_out_of_range_snapshots(log_start_offset, log_end_offset)
        if log_end_offset != self._map_end_offset:
            self._clear()
            self._load_from_snapshot(log_start_offset, _now(now_ms))
        else:
            self.on_log_start_offset_incremented(log_start_offset)
        return max(self._map_end_offset, log_start_offset)

    def truncate_fully_and_start_at(self, offset: int) -> None:
        """Forget everything and delete every snapshot (the log restarts empty)."""
        self._clear()
        for snap in list(self._snapshots):
            self._delete_snapshot(snap)
        self._last_snap_offset = 0
        self._map_end_offset = offset

    # --- snapshots ---------------------------------------------------------

    def take_snapshot(self, offset: int | None = None) -> Path | None:
        """Write ``<map end offset>.snapshot`` atomically unless a snapshot at or past
        it exists already; returns the path written. With `offset`, the map end
        offset is set to it first (the state must then reflect exactly the log below
        it, as when Kafka snapshots at a segment roll)."""
        if offset is not None:
            self._map_end_offset = offset
        if self._map_end_offset <= self._last_snap_offset:
            return None
        path = self.dir / snapshot_file_name(self._map_end_offset)
        write_producer_snapshot(path, self.snapshot_entries())
        self._snapshots[self._map_end_offset] = path
        self._last_snap_offset = self._map_end_offset
        return path

    def snapshot_offsets(self) -> list[int]:
        """Offsets of the snapshot files known, oldest first."""
        return sorted(self._snapshots)

    def latest_snapshot_offset(self) -> int | None:
        """The newest snapshot's offset."""
        return max(self._snapshots, default=None)

    def oldest_snapshot_offset(self) -> int | None:
        """The oldest snapshot's offset."""
        return min(self._snapshots, default=None)

    def delete_snapshots_below(self, offset: int) -> None:
        """Delete snapshots at offsets below `offset` (Kafka's deleteSnapshotsBefore;
        retention calls it with the new log start offset)."""
        for snap in [o for o in self._snapshots if o < offset]:
            self._delete_snapshot(snap)

    def remove_stray_snapshots(self, segment_base_offsets: Iterable[int]) -> None:
        """Delete snapshots that match no segment base offset, except the newest such
        one when it lies past the last segment's base offset (the clean-shutdown
        snapshot at the log end): Kafka's LogLoader does this before loading."""
        bases = set(segment_base_offsets)
        self._snapshots = self._scan_snapshots()
        strays = [o for o in sorted(self._snapshots) if o not in bases]
        keep = strays[-1] if strays and (not bases or strays[-1] > max(bases)) else None
        for o in strays:
            if o != keep:
                self._delete_snapshot(o)

    # --- housekeeping ------------------------------------------------------

    def remove_expired(
        self, now_ms: int | None = None, producer_id_expiration_ms: int | None = None
    ) -> list[int]:
        """Forget producers idle for the expiration time or longer and without an
        open transaction (Kafka's removeExpiredProducers); returns their ids."""
        now = _now(now_ms)
        limit = (
            self.producer_id_expiration_ms
            if producer_id_expiration_ms is None
            else producer_id_expiration_ms
        )
        gone = [pid for pid, e in self._producers.items() if _expired(e, now, limit)]
        for pid in gone:
            del self._producers[pid]
        return gone

    def on_log_start_offset_incremented(self, log_start_offset: int) -> None:
        """The log start moved (retention, DeleteRecords). As Kafka, producer entries
        stay in memory; only the bookkeeping offsets move, and completed transactions
        wholly below the new start are forgotten."""
        self._unreplicated = [t for t in self._unreplicated if t.last_offset >= log_start_offset]
        self._map_end_offset = max(self._map_end_offset, log_start_offset)
        latest = self.latest_snapshot_offset()
        self._last_snap_offset = log_start_offset if latest is None else latest

    # --- internals ---------------------------------------------------------

    def _entry(self, producer_id: int) -> ProducerStateEntry:
        entry = self._producers.get(producer_id)
        if entry is None:
            entry = self._producers[producer_id] = ProducerStateEntry(producer_id)
        return entry

    def _apply_data_batch(
        self,
        producer_id: int,
        epoch: int,
        last_seq: int,
        first_offset: int,
        last_offset: int,
        timestamp: int,
        transactional: bool,
    ) -> None:
        entry = self._entry(producer_id)
        entry.add_batch(epoch, last_seq, last_offset, last_offset - first_offset, timestamp)
        if transactional and entry.current_txn_first_offset is None:
            entry.current_txn_first_offset = first_offset

    def _replay_control(
        self, header: v2.BatchHeader, data: bytes | memoryview
    ) -> tuple[CompletedTxn, int] | None:
        # An empty control batch: the cleaner removed its transaction entirely.
        for rec in v2.iter_records(header, data):
            _, type_id = v2.parse_control_key(rec.key)
            if type_id not in (v2.CONTROL_ABORT, v2.CONTROL_COMMIT):
                return None
            try:
                _, coordinator_epoch = v2.parse_end_txn_marker(rec.value)
            except CorruptRecordError:
                return None
            entry = self._producers.get(header.producer_id)
            pending = None if entry is None else entry.current_txn_first_offset
            lso = 0
            if pending is not None:
                # Computed before the transaction leaves the open ones.
                lso = self.last_stable_offset(
                    CompletedTxn(header.producer_id, pending, header.base_offset, False)
                )
            completed = self.apply_end_txn_marker(
                header.producer_id,
                header.producer_epoch,
                coordinator_epoch,
                header.base_offset,
                rec.timestamp,
                commit=type_id == v2.CONTROL_COMMIT,
            )
            return None if completed is None else (completed, lso)
        return None

    def _clear(self) -> None:
        self._producers.clear()
        self._unreplicated.clear()

    def _scan_snapshots(self) -> dict[int, Path]:
        found: dict[int, Path] = {}
        with contextlib.suppress(FileNotFoundError):
            for entry in os.scandir(self.dir):
                parsed = parse_segment_file_name(entry.name)
                if parsed is not None and parsed.kind == "snapshot" and parsed.state is None:
                    found[parsed.base_offset] = Path(entry.path)
        return found

    def _delete_snapshot(self, offset: int) -> None:
        path = self._snapshots.pop(offset, None)
        if path is not None:
            path.unlink(missing_ok=True)

    def _delete_out_of_range_snapshots(self, log_start_offset: int, log_end_offset: int) -> None:
        for snap in [o for o in self._snapshots if o > log_end_offset or o <= log_start_offset]:
            self._delete_snapshot(snap)

    def _load_from_snapshot(self, log_start_offset: int, now: int) -> None:
        while self._snapshots:
            offset = max(self._snapshots)
            try:
                snap = read_producer_snapshot(self._snapshots[offset])
            except (CorruptSnapshotError, FileNotFoundError):
                # Kafka logs it, deletes the file and tries the next older snapshot.
                self._delete_snapshot(offset)
                continue
            for e in snap.entries:
                entry = ProducerStateEntry.from_snapshot_entry(e)
                if not _expired(entry, now, self.producer_id_expiration_ms):
                    self._producers[entry.producer_id] = entry
            self._last_snap_offset = self._map_end_offset = offset
            return
        self._last_snap_offset = self._map_end_offset = log_start_offset


def _check_data_batch(
    current: ProducerStateEntry, updated: ProducerStateEntry, h: v2.BatchHeader
) -> tuple[CheckOutcome, str] | None:
    """Kafka's ProducerAppendInfo checks for a client data batch: epoch, sequence,
    then transaction state. `current` is the state before the request, `updated`
    the state after the request's earlier batches (no batches until one is added)."""
    pid, epoch, first_seq = h.producer_id, h.producer_epoch, h.base_sequence
    if epoch < updated.producer_epoch:
        return (
            CheckOutcome.INVALID_PRODUCER_EPOCH,
            f"epoch of producer {pid} is {epoch}, which is smaller than the last seen "
            f"epoch {updated.producer_epoch}",
        )
    if epoch != updated.producer_epoch:
        # A new epoch starts at 0, except for a producer the partition knows nothing of.
        if first_seq != 0 and updated.producer_epoch != v2.NO_PRODUCER_EPOCH:
            return (
                CheckOutcome.OUT_OF_ORDER_SEQUENCE,
                f"invalid sequence number for new epoch of producer {pid}: {epoch} (request "
                f"epoch), {first_seq} (seq. number), {updated.producer_epoch} (current epoch)",
            )
    else:
        if not updated.is_empty:
            last_seq = updated.last_seq
        elif epoch == current.producer_epoch:
            last_seq = current.last_seq
        else:
            last_seq = v2.NO_SEQUENCE
        # No known epoch (state lost to retention or DeleteRecords): any sequence goes.
        if current.producer_epoch != v2.NO_PRODUCER_EPOCH and not in_sequence(last_seq, first_seq):
            return (
                CheckOutcome.OUT_OF_ORDER_SEQUENCE,
                f"out of order sequence number for producer {pid}: {first_seq} (incoming "
                f"seq. number), {last_seq} (current end sequence number)",
            )
    if updated.current_txn_first_offset is not None and not h.is_transactional:
        return (
            CheckOutcome.INVALID_TXN_STATE,
            f"expected transactional write from producer {pid}",
        )
    return None


def _expired(entry: ProducerStateEntry, now: int, expiration_ms: int) -> bool:
    return entry.current_txn_first_offset is None and now - entry.last_timestamp >= expiration_ms


def _now(now_ms: int | None) -> int:
    return int(time.time() * 1000) if now_ms is None else now_ms
