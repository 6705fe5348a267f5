"""Partition: one partition hosted by this broker, as leader or follower (Kafka's Partition).

The leader serves produce and fetch, tracks each follower's progress from its
fetches (:class:`ReplicaState`, Kafka's Replica), moves the high watermark to
the smallest log end offset of the in-sync replicas, and proposes ISR changes
(one AlterPartition in flight at a time; the replica manager sends it and
reports the outcome). A follower appends the leader's batches as they are,
truncates when its log diverged, and takes its high watermark from the leader.

Rules follow Kafka 3.8 (facts sheet §3):

* HW = min LEO over the leader and the remote replicas in the *maximal* ISR
  (committed ISR plus a pending expansion) or caught up; it never goes back, and
  does not advance while the ISR is smaller than the effective min.insync.replicas
  (min(min.insync.replicas, replication factor), Kafka 3.7+).
* A follower is out of sync when it is not at the leader's LEO and has not
  caught up for more than ``replica.lag.time.max.ms``; it may rejoin when its LEO
  is >= HW and >= the start offset of the leader's current epoch.
* acks=all: NOT_ENOUGH_REPLICAS before the append when ISR < min.insync.replicas;
  NOT_ENOUGH_REPLICAS_AFTER_APPEND when the HW reached the offset but the ISR had
  shrunk below the minimum.

A partition built directly with ``replicas=[me]`` and ``isr=[me]`` (the
single-node default) leads alone: its high watermark follows the log end
offset as soon as an append is written. Its epoch (taken from the leader-epoch
cache at load) is provisional: the first LeaderAndIsr applies even at the same
epoch, since only epochs a controller stated make later requests stale.

Everything runs on the broker's asyncio loop: no locks.
"""

from __future__ import annotations

import asyncio
import struct
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from kt.broker import timeline
from kt.broker.errors import (
    BrokerError,
    InvalidTxnStateError,
    NotEnoughReplicasAfterAppendError,
    NotEnoughReplicasError,
    NotLeaderOrFollowerError,
    OutOfOrderSequenceError,
    ProducerError,
    broker_error,
)
from kt.broker.transactions.verification import VerificationGuard, VerificationStates
from kt.storage import record_batch as v2
from kt.storage.checkpoint import TopicPartition
from kt.storage.errors import OffsetOutOfRangeError
from kt.storage.file_records import LogBatch
from kt.storage.leader_epoch import UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
from kt.storage.log import AppendOrigin, AppendResult, FetchSlice, PartitionLog
from kt.storage.producer_state import CheckOutcome, ProducerStateManager
from kt.storage.txn_index import AbortedTxn

UNKNOWN_OFFSET = -1
DEFAULT_REPLICA_LAG_TIME_MAX_MS = 30_000


class LeaderAndIsrState(Protocol):
    """What make_leader/make_follower read from a LeaderAndIsr partition state (the
    protocol's struct has these fields; :class:`PartitionState` is a plain one)."""

    @property
    def leader(self) -> int: ...
    @property
    def leader_epoch(self) -> int: ...
    @property
    def isr(self) -> Sequence[int]: ...
    @property
    def partition_epoch(self) -> int: ...
    @property
    def replicas(self) -> Sequence[int]: ...
    @property
    def adding_replicas(self) -> Sequence[int]: ...
    @property
    def removing_replicas(self) -> Sequence[int]: ...


@dataclass(frozen=True, slots=True)
class PartitionState:
    """A LeaderAndIsr partition state built in Python (single-node mode, tests)."""

    leader: int
    leader_epoch: int
    isr: Sequence[int]
    partition_epoch: int
    replicas: Sequence[int]
    adding_replicas: Sequence[int] = ()
    removing_replicas: Sequence[int] = ()


@dataclass(slots=True)
class ReplicaState:
    """The leader's view of one follower (Kafka's Replica), fed by its fetches."""

    replica_id: int
    log_end_offset: int = UNKNOWN_OFFSET
    log_start_offset: int = UNKNOWN_OFFSET
    # When the follower was last known to be at the leader's LEO.
    last_caught_up_time_ms: int = 0
    # The leader's LEO and the time at the follower's previous fetch.
    last_fetch_leader_log_end_offset: int = UNKNOWN_OFFSET
    last_fetch_time_ms: int = 0

    def is_caught_up(self, leader_end_offset: int, now_ms: int, lag_max_ms: int) -> bool:
        """At the leader's LEO, or caught up within the last ``lag_max_ms``."""
        return (
            self.log_end_offset == leader_end_offset
            or now_ms - self.last_caught_up_time_ms <= lag_max_ms
        )

    def reset(self, now_ms: int, leader_end_offset: int, new_leader: bool, in_sync: bool) -> None:
        """On a new leader epoch (Kafka's resetReplicaState): in-sync followers count
        as caught up now, others as never, so an out-of-ISR follower cannot hold the
        HW back; a brand-new leader knows nothing of the follower's log yet."""
        self.last_caught_up_time_ms = now_ms if in_sync else 0
        if new_leader:
            self.log_end_offset = UNKNOWN_OFFSET
            self.log_start_offset = UNKNOWN_OFFSET
            self.last_fetch_leader_log_end_offset = UNKNOWN_OFFSET
            self.last_fetch_time_ms = 0
        else:
            self.last_fetch_leader_log_end_offset = leader_end_offset
            self.last_fetch_time_ms = now_ms

    def update_fetch_state(
        self, fetch_offset: int, log_start_offset: int, fetch_time_ms: int, leader_end_offset: int
    ) -> None:
        """Record a fetch (Kafka's updateFetchStateOrThrow). A fetch at the leader's
        LEO means caught up now; a fetch at or past the LEO the leader had at the
        previous fetch means the follower was caught up at that previous fetch."""
        if fetch_offset >= leader_end_offset:
            self.last_caught_up_time_ms = max(self.last_caught_up_time_ms, fetch_time_ms)
        elif fetch_offset >= self.last_fetch_leader_log_end_offset:
            self.last_caught_up_time_ms = max(self.last_caught_up_time_ms, self.last_fetch_time_ms)
        self.log_end_offset = fetch_offset
        self.log_start_offset = log_start_offset
        self.last_fetch_leader_log_end_offset = max(
            leader_end_offset, self.last_fetch_leader_log_end_offset
        )
        self.last_fetch_time_ms = fetch_time_ms


@dataclass(frozen=True, slots=True)
class FollowerRead:
    """What the leader answers a follower's fetch of one partition with."""

    high_watermark: int
    log_start_offset: int
    # (epoch, end offset) when the follower's log diverged from ours; no data then.
    diverging_epoch: tuple[int, int] | None
    data: FetchSlice | None


def _now_ms() -> int:
    return int(time.time() * 1000)


def _peek_headers(data: bytes | bytearray | memoryview) -> list[v2.BatchHeader]:
    """The v2 headers of concatenated batches, read without any validation (the log
    validates the bytes itself; this only feeds the producer-state check)."""
    out = []
    pos = 0
    end = len(data)
    while end - pos >= v2.HEADER_SIZE:
        header = v2.parse_header(data, pos)
        out.append(header)
        (length,) = struct.unpack_from(">i", data, pos + 8)
        if length < v2.MIN_BATCH_LENGTH:
            break
        pos += length + v2.LOG_OVERHEAD
    return out


def whole_batches(data: bytes | bytearray | memoryview) -> memoryview:
    """`data` without a trailing partial batch: a fetch slice may end inside a batch
    (Kafka's reads are bounded by bytes, not batches) and that part is re-fetched."""
    view = memoryview(data)
    pos = 0
    end = len(view)
    while end - pos >= v2.LOG_OVERHEAD:
        (length,) = struct.unpack_from(">i", view, pos + 8)
        if length < v2.MIN_BATCH_LENGTH or pos + v2.LOG_OVERHEAD + length > end:
            break
        pos += v2.LOG_OVERHEAD + length
    return view[:pos]


@dataclass(slots=True)
class Partition:
    """One partition hosted by this broker, with its log."""

    tp: TopicPartition
    topic_id: bytes
    log: PartitionLog
    leader_id: int
    leader_epoch: int = 0
    replicas: list[int] = field(default_factory=list)
    # The committed ISR as the controller (or an AlterPartition answer) stated it.
    # Followers keep the controller's ISR here for information only.
    isr: list[int] = field(default_factory=list)
    offline: bool = False
    # Idempotent producers' sequences and epochs (None for internal topics' logs).
    producer_state: ProducerStateManager | None = None
    # This broker's id; defaults to leader_id (a directly built partition leads).
    local_broker_id: int = -1
    # Whether leader/epoch/ISR came from a controller (LeaderAndIsr), not from disk.
    controller_assigned: bool = False
    # The ISR's version (the partition state znode's zkVersion).
    partition_epoch: int = 0
    adding_replicas: list[int] = field(default_factory=list)
    removing_replicas: list[int] = field(default_factory=list)
    # The ISR proposed to the controller and not answered yet (one in flight at most).
    pending_isr: list[int] | None = None
    # The first offset of the current leader epoch (leaders only).
    leader_epoch_start_offset: int | None = None
    replica_lag_time_max_ms: int = DEFAULT_REPLICA_LAG_TIME_MAX_MS
    # The leader's view of each follower; empty on followers.
    remote_replicas: dict[int, ReplicaState] = field(default_factory=dict)
    # Called after the LEO or HW moved (the replica manager completes delayed
    # produces and fetches from it).
    offsets_listener: Callable[[Partition], None] | None = None
    #: whether a follower may join the ISR (alive per the metadata; Kafka's
    #: isReplicaIsrEligible); None: every follower may
    replica_eligible: Callable[[int], bool] | None = None
    # Producers' transaction verifications in progress (KIP-890; leaders only).
    txn_verification: VerificationStates = field(default_factory=VerificationStates)
    # Resolved and replaced on every append, so waiting fetches wake up (long polling).
    _data_arrived: asyncio.Future[None] | None = None

    def __post_init__(self) -> None:
        if self.local_broker_id < 0:
            self.local_broker_id = self.leader_id
        if self.is_leader:
            for r in self.replicas:
                if r != self.local_broker_id:
                    self.remote_replicas.setdefault(r, ReplicaState(r))

    # --- offsets ------------------------------------------------------------

    @property
    def high_watermark(self) -> int:
        """Offsets below it are committed (visible to consumers)."""
        return self.log.high_watermark

    @property
    def log_start_offset(self) -> int:
        """The first offset still in the log."""
        return self.log.log_start_offset

    @property
    def log_end_offset(self) -> int:
        """The offset the next record will get."""
        return self.log.log_end_offset

    def last_stable_offset(self) -> int:
        """The upper bound for read_committed consumers: the high watermark, or the
        first offset of the earliest transaction still open (or whose marker is not
        replicated yet) when that is lower, never below the log start (Kafka's
        UnifiedLog.lastStableOffset). Followers compute it the same way from the
        state they rebuilt from the leader's batches."""
        hw = self.log.high_watermark
        psm = self.producer_state
        first_unstable = None if psm is None else psm.first_unstable_offset(hw)
        if first_unstable is None:
            return hw
        return min(max(first_unstable, self.log.log_start_offset), hw)

    def aborted_transactions(self, fetch_offset: int, upper_bound: int) -> list[AbortedTxn]:
        """The aborted transactions a READ_COMMITTED fetch from `fetch_offset` must
        report (their records are to be dropped): those overlapping the records one
        read can return, i.e. below `upper_bound` (the LSO) and the end of the
        segment holding `fetch_offset`."""
        bound = min(upper_bound, self.log.next_segment_base(fetch_offset))
        return self.log.collect_aborted_txns(fetch_offset, bound)

    @property
    def is_leader(self) -> bool:
        """Whether this broker leads the partition."""
        return self.leader_id == self.local_broker_id

    @property
    def maximal_isr(self) -> set[int]:
        """The committed ISR plus a pending expansion: what the HW must wait for while
        an AlterPartition is in flight (a pending shrink still waits for the old ISR)."""
        out = set(self.isr)
        if self.pending_isr is not None:
            out.update(self.pending_isr)
        return out

    def _effective_min_isr(self) -> int:
        # A min.insync.replicas above the replication factor could never be met.
        return min(self.log.config.min_insync_replicas, len(self.remote_replicas) + 1)

    def is_under_min_isr(self) -> bool:
        """Leader with fewer in-sync replicas than the effective minimum."""
        return self.is_leader and len(self.isr) < self._effective_min_isr()

    # --- leadership ---------------------------------------------------------

    def make_leader(self, state: LeaderAndIsrState, now_ms: int | None = None) -> bool:
        """Become (or stay) leader as a LeaderAndIsr says. Returns False, changing
        nothing, for a leader epoch not newer than ours (a stale request).

        The new epoch starts at our LEO and is recorded in the leader-epoch cache at
        once, so a follower holding entries of a later epoch than any we wrote can
        still find where to truncate. Follower states are reset for the new epoch.
        """
        if self._is_stale(state):
            return False
        now = _now_ms() if now_ms is None else now_ms
        new_leader = not self.is_leader
        self._set_assignment(state)
        self.isr = list(state.isr)
        self.pending_isr = None
        followers = [r for r in self.replicas if r != self.local_broker_id]
        for r in list(self.remote_replicas):
            if r not in followers:
                del self.remote_replicas[r]
        for r in followers:
            if new_leader:
                # A former follower's states are stale (or absent): start afresh.
                self.remote_replicas[r] = ReplicaState(r)
            else:
                self.remote_replicas.setdefault(r, ReplicaState(r))
        start = self.log.log_end_offset
        self.log.leader_epoch_cache.assign(state.leader_epoch, start)
        in_sync = set(state.isr)
        for rs in self.remote_replicas.values():
            rs.reset(now, start, new_leader, rs.replica_id in in_sync)
        self.leader_id = self.local_broker_id
        self.leader_epoch = state.leader_epoch
        self.leader_epoch_start_offset = start
        self.partition_epoch = state.partition_epoch
        # The ISR may be down to us alone: the HW can move now.
        self.maybe_increment_high_watermark(now_ms=now)
        return True

    def make_follower(self, state: LeaderAndIsrState) -> bool:
        """Follow `state.leader` from `state.leader_epoch`. Returns False, changing
        nothing, for a leader epoch not newer than ours. The caller restarts the
        fetcher when True (even when only the epoch changed)."""
        if self._is_stale(state):
            return False
        self._set_assignment(state)
        self.isr = list(state.isr)
        self.pending_isr = None
        self.remote_replicas.clear()
        self.leader_id = state.leader
        self.leader_epoch = state.leader_epoch
        self.leader_epoch_start_offset = None
        self.partition_epoch = state.partition_epoch
        # Produces waiting for this partition as leader can no longer complete.
        self.notify()
        return True

    def _is_stale(self, state: LeaderAndIsrState) -> bool:
        # Kafka compares with the epoch of the last LeaderAndIsr; before the first one
        # (a fresh Partition object in Kafka, epoch -1) any state is news, even if it
        # repeats the epoch the log was last written in.
        return self.controller_assigned and state.leader_epoch <= self.leader_epoch

    def _set_assignment(self, state: LeaderAndIsrState) -> None:
        self.controller_assigned = True
        self.replicas = list(state.replicas)
        self.adding_replicas = list(state.adding_replicas)
        self.removing_replicas = list(state.removing_replicas)

    # --- leader: appends ----------------------------------------------------

    def check_enough_replicas_for_append(
        self, acks: int, min_isr: int | None = None
    ) -> BrokerError | None:
        """The refusal of a produce before anything is written: NOT_LEADER_OR_FOLLOWER
        when we do not lead, NOT_ENOUGH_REPLICAS for acks=all below min.insync.replicas
        (the topic's configured value: Kafka does not cap it here)."""
        if not self.is_leader:
            return NotLeaderOrFollowerError(
                f"broker {self.local_broker_id} is not the leader of {self.tp}"
            )
        minimum = self.log.config.min_insync_replicas if min_isr is None else min_isr
        if acks == -1 and len(self.isr) < minimum:
            return NotEnoughReplicasError(
                f"the ISR {sorted(self.isr)} of {self.tp} is smaller than "
                f"min.insync.replicas {minimum}"
            )
        return None

    def has_ongoing_transaction(self, producer_id: int) -> bool:
        """Whether the producer has a transaction open on this partition."""
        psm = self.producer_state
        entry = psm.last_entry(producer_id) if psm is not None else None
        return entry is not None and entry.current_txn_first_offset is not None

    def maybe_start_txn_verification(
        self, producer_id: int, sequence: int, epoch: int, now_ms: int | None = None
    ) -> VerificationGuard | None:
        """The guard a transactional batch must carry to its append when it has to be
        verified with the coordinator first (the producer has no transaction open
        here); None when it need not be (Kafka's maybeStartTransactionVerification).
        Raises NotLeaderOrFollowerError when we do not lead."""
        if not self.is_leader:
            raise NotLeaderOrFollowerError(
                f"broker {self.local_broker_id} is not the leader of {self.tp}"
            )
        if self.producer_state is None or self.has_ongoing_transaction(producer_id):
            return None
        now = _now_ms() if now_ms is None else now_ms
        return self.txn_verification.start(producer_id, sequence, epoch, now)

    def _verification_refusal(
        self,
        headers: Sequence[v2.BatchHeader],
        guard: VerificationGuard | None,
        required: bool,
        verdict: CheckOutcome,
    ) -> ProducerError | None:
        """Kafka's analyzeAndValidateProducerState checks of the verification state:
        with verification required, a transactional batch opening a transaction must
        carry the guard its verification left (else INVALID_TXN_STATE); while a
        producer's verification is open, no batch above its lowest unverified
        sequence goes first (OUT_OF_ORDER_SEQUENCE_NUMBER)."""
        states = self.txn_verification
        for h in headers:
            if h.producer_id < 0:
                continue
            if (
                required
                and h.is_transactional
                and not self.has_ongoing_transaction(h.producer_id)
                and not states.verified(h.producer_id, guard)
            ):
                return InvalidTxnStateError("Record was not part of an ongoing transaction")
            entry = states.entry(h.producer_id)
            if (
                entry is not None
                and verdict is not CheckOutcome.INVALID_PRODUCER_EPOCH
                and h.base_sequence > entry.lowest_sequence
            ):
                return OutOfOrderSequenceError(
                    f"Out of order sequence number for producer {h.producer_id} in partition "
                    f"{self.tp.topic}-{self.tp.partition}: {h.base_sequence} (incoming seq. "
                    f"number), {entry.lowest_sequence} (earliest seen sequence)",
                )
        return None

    def _end_verifications(self, headers: Sequence[v2.BatchHeader]) -> None:
        # A transactional batch or marker written: the transaction has its first
        # offset or is over, and any verification of the producer is stale.
        if len(self.txn_verification):
            for h in headers:
                if h.is_transactional:
                    self.txn_verification.clear(h.producer_id)

    def append_records(
        self,
        data: bytes | bytearray | memoryview,
        now_ms: int | None = None,
        *,
        verification_guard: VerificationGuard | None = None,
        require_verification: bool = False,
        origin: AppendOrigin = AppendOrigin.CLIENT,
    ) -> AppendResult:
        """Append producer batches as leader and advance the high watermark if the
        ISR allows. A coordinator's batch (`origin` COORDINATOR: offsets, group and
        transaction state) skips the producer checks: its transactional batches
        open their producer's transaction, as Kafka's coordinator appends do.
        Idempotent producers' retries of any of their last five batches
        are answered with the original offsets and write nothing. With
        `require_verification` (transaction.partition.verification.enable), a
        transactional batch opening a transaction is refused unless it carries the
        guard of its finished verification. Raises the storage core's errors for
        invalid batches, a ProducerError (kt.broker.errors) for sequence, epoch or transaction
        violations, NotLeaderOrFollowerError when we do not lead."""
        if not self.is_leader:
            raise NotLeaderOrFollowerError(
                f"broker {self.local_broker_id} is not the leader of {self.tp}"
            )
        if origin is AppendOrigin.COORDINATOR:
            return self._append_as_coordinator(data, now_ms)
        psm = self.producer_state
        headers = _peek_headers(data) if psm is not None else []
        if psm is not None and any(h.producer_id >= 0 for h in headers):
            verdict = psm.check_batches(headers)
            if verdict.outcome is CheckOutcome.DUPLICATE:
                return AppendResult(
                    first_offset=verdict.base_offset,
                    last_offset=verdict.last_offset,
                    max_timestamp=verdict.timestamp,
                    offset_of_max_timestamp=verdict.last_offset,
                    log_append_time=verdict.timestamp
                    if self.log.config.log_append_time
                    else v2.NO_TIMESTAMP,
                    log_start_offset=self.log.log_start_offset,
                    batches=0,
                    bytes=0,
                )
            if verdict.outcome is not CheckOutcome.INVALID_RECORD:
                refusal = self._verification_refusal(
                    headers, verification_guard, require_verification, verdict.outcome
                )
                if refusal is not None:
                    raise refusal
            if not verdict.ok:
                raise broker_error(verdict.error_code, verdict.message)
        result = self.log.append_as_leader(data, self.leader_epoch, now_ms=now_ms)
        if psm is not None:
            psm.on_append(headers, result.first_offset, result.log_append_time)
            self._end_verifications(headers)
            if result.rolled:
                # A roll: snapshot so a restart replays only the new segment.
                psm.take_snapshot(self.log.log_end_offset)
        if not self.maybe_increment_high_watermark(now_ms=now_ms):
            # Followers long-poll on the LEO even when the HW stays.
            self.wake_fetches()
        return result

    def _append_as_coordinator(
        self, data: bytes | bytearray | memoryview, now_ms: int | None
    ) -> AppendResult:
        result = self.log.append_as_leader(
            data, self.leader_epoch, now_ms=now_ms, origin=AppendOrigin.COORDINATOR
        )
        psm = self.producer_state
        if psm is not None:
            producers = [h for h in _peek_headers(data) if h.producer_id >= 0]
            if producers:
                # The partition's producer state opens the transaction, as for a
                # producer's own batch: its marker closes it and the LSO waits for it.
                psm.on_append(producers, result.first_offset, result.log_append_time)
        if not self.maybe_increment_high_watermark(now_ms=now_ms):
            self.notify()  # followers long-poll on the log end offset
        return result

    def append_txn_marker(
        self,
        producer_id: int,
        producer_epoch: int,
        coordinator_epoch: int,
        commit: bool,
        now_ms: int | None = None,
    ) -> AppendResult:
        """Write a COMMIT/ABORT marker for `producer_id` as leader (WriteTxnMarkers;
        Kafka's appendRecordsToLeader with COORDINATOR origin). The producer's open
        transaction ends here: an aborted one gets its `.txnindex` entry (first
        offset, the marker's offset, the last stable offset right after it), and the
        last stable offset may move once the marker is replicated. Raises
        NotLeaderOrFollowerError, InvalidProducerEpochError (for an
        older producer epoch), TransactionCoordinatorFencedError (for an older coordinator
        epoch), and the storage core's errors."""
        if not self.is_leader:
            raise NotLeaderOrFollowerError(
                f"broker {self.local_broker_id} is not the leader of {self.tp}"
            )
        now = _now_ms() if now_ms is None else now_ms
        psm = self.producer_state
        if psm is not None:
            verdict = psm.check_end_txn_marker(producer_id, producer_epoch, coordinator_epoch)
            if not verdict.ok:
                raise broker_error(verdict.error_code, verdict.message)
        marker = v2.build_end_txn_marker(
            commit=commit,
            producer_id=producer_id,
            producer_epoch=producer_epoch,
            coordinator_epoch=coordinator_epoch,
            timestamp=now,
        )
        result = self.log.append_as_leader(
            bytearray(marker), self.leader_epoch, now_ms=now, origin=AppendOrigin.COORDINATOR
        )
        self.txn_verification.clear(producer_id)
        if psm is not None:
            completed = psm.apply_end_txn_marker(
                producer_id,
                producer_epoch,
                coordinator_epoch,
                result.first_offset,
                result.max_timestamp,
                commit=commit,
            )
            if completed is not None and completed.is_aborted:
                lso = psm.last_stable_offset(completed)
                self.log.record_aborted_txn(
                    AbortedTxn(producer_id, completed.first_offset, completed.last_offset, lso)
                )
            if result.rolled:
                psm.take_snapshot(self.log.log_end_offset)
        if not self.maybe_increment_high_watermark(now_ms=now):
            self.wake_fetches()
        return result

    def is_offset_committed(self, required_offset: int) -> tuple[bool, BrokerError | None]:
        """For a waiting acks=all produce whose last offset is ``required_offset - 1``:
        (done, error) as Kafka's checkEnoughReplicasReachOffset. Done with no error
        once the HW reached it; done with NOT_ENOUGH_REPLICAS_AFTER_APPEND when it did
        but the ISR is below the minimum; done with NOT_LEADER_OR_FOLLOWER when we
        lost the leadership; else not done."""
        if not self.is_leader or self.offline:
            return True, NotLeaderOrFollowerError(
                f"broker {self.local_broker_id} is no longer the leader of {self.tp}"
            )
        if self.log.high_watermark < required_offset:
            return False, None
        if len(self.maximal_isr) < self._effective_min_isr():
            return True, NotEnoughReplicasAfterAppendError(
                f"the ISR {sorted(self.isr)} of {self.tp} shrank below min.insync.replicas"
            )
        return True, None

    # --- leader: followers' progress and the high watermark ---------------

    def update_follower_fetch_state(
        self,
        replica_id: int,
        fetch_offset: int,
        fetch_time_ms: int,
        leader_end_offset: int,
        log_start_offset: int = UNKNOWN_OFFSET,
    ) -> bool:
        """Record a follower's fetch at ``fetch_offset`` (its LEO) made at
        ``fetch_time_ms`` when our LEO was ``leader_end_offset``; returns whether the
        HW moved. Raises NotLeaderOrFollowerError for a replica not assigned here.
        The caller then asks :meth:`isr_expand_candidate`."""
        rs = self.remote_replicas.get(replica_id) if self.is_leader else None
        if rs is None:
            raise NotLeaderOrFollowerError(
                f"replica {replica_id} is not a follower of {self.tp} led by {self.local_broker_id}"
            )
        rs.update_fetch_state(fetch_offset, log_start_offset, fetch_time_ms, leader_end_offset)
        # As Kafka's maybeIncrementLeaderHW after every follower fetch: the HW can
        # move even when this follower's LEO did not (another replica left the
        # maximal ISR since, e.g. a refused expansion was abandoned).
        return self.maybe_increment_high_watermark(now_ms=fetch_time_ms)

    def maybe_increment_high_watermark(self, *, now_ms: int | None = None) -> bool:
        """Move the HW up to the smallest LEO among the leader and the followers that
        count (in the maximal ISR, or caught up: they are about to join); never back,
        not while the ISR is under the effective min.insync.replicas. Returns whether
        it moved (waiters are notified then)."""
        if not self.is_leader or self.offline or self.is_under_min_isr():
            return False
        leo = self.log.log_end_offset
        now = _now_ms() if now_ms is None else now_ms
        maximal = self.maximal_isr
        eligible = self.replica_eligible
        new_hw = leo
        for rs in self.remote_replicas.values():
            # A caught-up follower outside the ISR is waited for only while it can
            # join (Kafka's shouldWaitForReplicaToJoinIsr): one that just stopped
            # would otherwise hold the HW for replica.lag.time.max.ms.
            if rs.log_end_offset < new_hw and (
                rs.replica_id in maximal
                or (
                    rs.is_caught_up(leo, now, self.replica_lag_time_max_ms)
                    and (eligible is None or eligible(rs.replica_id))
                )
            ):
                new_hw = rs.log_end_offset
        if new_hw <= self.log.high_watermark:
            return False
        self.log.update_high_watermark(new_hw)
        if timeline.armed():
            timeline.once(f"{self.tp.topic}-{self.tp.partition}", "leader_hw", hw=new_hw)
        self.notify()
        return True

    def maybe_advance_high_watermark(self) -> None:
        """After an append made outside :meth:`append_records` (the group coordinator's):
        move the HW if the ISR allows and wake waiters either way (followers wait on
        the LEO)."""
        if not self.maybe_increment_high_watermark():
            self.wake_fetches()

    def isr_shrink_candidates(self, now_ms: int, lag_max_ms: int | None = None) -> list[int] | None:
        """The ISR without its out-of-sync followers, proposed (and then pending) when
        any is; None when nothing to do, not leader, or an update is in flight."""
        if not self.is_leader or self.pending_isr is not None:
            return None
        lag = self.replica_lag_time_max_ms if lag_max_ms is None else lag_max_ms
        leo = self.log.log_end_offset
        out: set[int] = set()
        for r in self.isr:
            if r == self.local_broker_id:
                continue
            rs = self.remote_replicas.get(r)
            if rs is None or not rs.is_caught_up(leo, now_ms, lag):
                out.add(r)
        if not out:
            return None
        self.pending_isr = [r for r in self.isr if r not in out]
        return list(self.pending_isr)

    def isr_expand_candidate(self, replica_id: int) -> list[int] | None:
        """The ISR plus `replica_id`, proposed (and then pending) when the follower
        is in sync again: its LEO >= HW and >= the start of our epoch (so it holds
        every record of this epoch a consumer may have seen). None otherwise."""
        if not self.is_leader or self.pending_isr is not None or replica_id in self.isr:
            return None
        rs = self.remote_replicas.get(replica_id)
        if rs is None or self.leader_epoch_start_offset is None:
            return None
        if (
            rs.log_end_offset < self.log.high_watermark
            or rs.log_end_offset < self.leader_epoch_start_offset
        ):
            return None
        self.pending_isr = [*self.isr, replica_id]
        return list(self.pending_isr)

    def on_isr_committed(
        self,
        new_isr: Sequence[int],
        partition_epoch: int,
        leader_epoch: int | None = None,
        *,
        now_ms: int | None = None,
    ) -> bool:
        """The controller accepted an ISR (AlterPartition answer): make it the
        committed one. Ignored (False) when we no longer lead, the answer is for
        another leader epoch, or its partition epoch is older than ours."""
        if not self.is_leader:
            return False
        if leader_epoch is not None and leader_epoch != self.leader_epoch:
            return False
        if partition_epoch < self.partition_epoch:
            return False
        self.isr = list(new_isr)
        self.partition_epoch = partition_epoch
        self.pending_isr = None
        # A shrink may let the HW move; waiting produces are checked either way (an
        # ISR below the minimum fails them).
        if not self.maybe_increment_high_watermark(now_ms=now_ms):
            self.notify()
        return True

    def abandon_pending_isr(self) -> None:
        """The proposed ISR was refused or lost: back to the committed one, so the
        next check may propose again. A refused expansion stops holding the HW back
        (the maximal ISR shrank): the HW may move now, and waiting produces are
        checked either way."""
        self.pending_isr = None
        if not self.maybe_increment_high_watermark():
            self.notify()

    # --- leader: serving followers -------------------------------------------

    def diverging_epoch(self, fetch_offset: int, last_fetched_epoch: int) -> tuple[int, int] | None:
        """(epoch, end offset) when a follower that last fetched ``last_fetched_epoch``
        and is at ``fetch_offset`` holds records we do not (Fetch v12+ DivergingEpoch)."""
        if last_fetched_epoch < 0:
            return None
        epoch, end = self.end_offset_for_epoch(last_fetched_epoch)
        if epoch < last_fetched_epoch or end < fetch_offset:
            return epoch, end
        return None

    def read_for_follower(
        self,
        replica_id: int,
        fetch_offset: int,
        last_fetched_epoch: int,
        max_bytes: int,
        follower_log_start_offset: int = UNKNOWN_OFFSET,
        now_ms: int | None = None,
    ) -> FollowerRead:
        """A follower's fetch of this partition, as the leader answers it: the
        divergence if any (then no data and no state update), else records up to
        our LEO and the follower's progress recorded. Raises
        NotLeaderOrFollowerError, and the storage core's OffsetOutOfRangeError."""
        if not self.is_leader:
            raise NotLeaderOrFollowerError(f"broker {self.local_broker_id} does not lead {self.tp}")
        if last_fetched_epoch >= 0:
            # As Kafka: an epoch we cannot place, or an offset below our log start,
            # is out of range (the follower then resets from our start or end).
            epoch, end = self.end_offset_for_epoch(last_fetched_epoch)
            if epoch == UNDEFINED_EPOCH or end == UNDEFINED_EPOCH_OFFSET:
                raise OffsetOutOfRangeError(
                    f"cannot find the end offset of epoch {last_fetched_epoch} in {self.tp}"
                )
            if fetch_offset < self.log.log_start_offset:
                raise OffsetOutOfRangeError(
                    f"fetch offset {fetch_offset} is below the log start offset "
                    f"{self.log.log_start_offset} of {self.tp}"
                )
            if epoch < last_fetched_epoch or end < fetch_offset:
                return FollowerRead(self.high_watermark, self.log_start_offset, (epoch, end), None)
        leo = self.log.log_end_offset
        data = self.log.read(fetch_offset, max_bytes, min_one_message=True)
        now = _now_ms() if now_ms is None else now_ms
        self.update_follower_fetch_state(
            replica_id, fetch_offset, now, leo, follower_log_start_offset
        )
        return FollowerRead(self.high_watermark, self.log_start_offset, None, data)

    def available_bytes(self, fetch_offset: int, upper_bound: int, max_bytes: int) -> int:
        """Bytes a fetch from `fetch_offset` would return below `upper_bound`, counted
        up to `max_bytes` (a delayed fetch's progress). Raises the storage core's
        OffsetOutOfRangeError."""
        sl = self.log.read(fetch_offset, max_bytes, upper_bound=upper_bound)
        return 0 if sl is None else min(sl.length, max_bytes)

    # --- follower -----------------------------------------------------------

    def append_records_as_follower(self, data: bytes | bytearray | memoryview) -> AppendResult:
        """Append the leader's batches as they are (offsets and epochs kept; a
        trailing partial batch is dropped) and apply them to the producer state, so
        idempotent producers keep their sequences if we become leader."""
        whole = whole_batches(data)
        # Usually the slice is all whole batches: keep the bytes we were given.
        buf = data if isinstance(data, bytes) and len(whole) == len(data) else bytes(whole)
        whole.release()
        headers = _peek_headers(buf)
        leo = self.log.log_end_offset
        if (
            headers
            and headers[0].base_offset < leo == self.log.log_start_offset
            and headers[0].last_offset >= leo
        ):
            # Our empty log starts inside the leader's first batch (DeleteRecords moved
            # its log start mid-batch): restart at the batch, as Kafka's follower does.
            self.truncate_fully_and_start_at(headers[0].base_offset)
        result = self.log.append_as_follower(buf)
        psm = self.producer_state
        self._end_verifications(headers)
        if psm is not None and result.batches:
            view = memoryview(buf)
            pos = 0
            for header in headers:
                size = header.size_in_bytes
                done = psm.replay(LogBatch(pos, view[pos : pos + size], header, None))
                if done is not None and done[0].is_aborted:
                    # The leader's `.txnindex` entry, rebuilt: same transaction, same LSO.
                    txn, lso = done
                    self.log.record_aborted_txn(
                        AbortedTxn(txn.producer_id, txn.first_offset, txn.last_offset, lso)
                    )
                pos += size
            if result.rolled:
                psm.take_snapshot(self.log.log_end_offset)
        self.wake_fetches()
        return result

    def truncate_to(self, offset: int) -> bool:
        """Drop everything at or after `offset` (the log diverged from the leader's):
        the log, the leader-epoch cache and the producer state. True if anything went."""
        if not self.log.truncate_to(offset):
            return False
        self._reload_producer_state()
        return True

    def truncate_fully_and_start_at(self, offset: int) -> None:
        """Empty the log and restart it at `offset` (the leader's log starts above ours)."""
        self.log.truncate_fully_and_start_at(offset)
        if self.producer_state is not None:
            self.producer_state.truncate_fully_and_start_at(offset)

    def update_follower_log_start_offset(self, leader_log_start_offset: int) -> bool:
        """Follow the leader's log start offset (retention, DeleteRecords), up to our
        HW; returns whether ours moved. Old segments go with the next retention run."""
        target = min(leader_log_start_offset, self.log.high_watermark)
        if target <= self.log.log_start_offset:
            return False
        self.log.maybe_increment_log_start_offset(target)
        if self.producer_state is not None:
            self.producer_state.on_log_start_offset_incremented(target)
        return True

    def _reload_producer_state(self) -> None:
        psm = self.producer_state
        if psm is None:
            return
        start = psm.truncate_and_reload(self.log.log_start_offset, self.log.log_end_offset)
        psm.replay_all(self.log.iter_batches(start), self.log.log_end_offset)

    def update_follower_high_watermark(self, leader_hw: int) -> bool:
        """Take the leader's HW, capped at our LEO; never back (truncation lowers it).
        Returns whether it moved."""
        new_hw = min(leader_hw, self.log.log_end_offset)
        if new_hw <= self.log.high_watermark:
            return False
        self.log.update_high_watermark(new_hw)
        self.notify()
        return True

    def last_fetched_epoch(self) -> int:
        """The epoch of the newest entry in our leader-epoch cache (-1: none), sent
        as Fetch's LastFetchedEpoch."""
        latest = self.log.leader_epoch_cache.latest_epoch
        return UNDEFINED_EPOCH if latest is None else latest

    def end_offset_for_epoch(self, epoch: int) -> tuple[int, int]:
        """OffsetForLeaderEpoch: (the largest epoch <= `epoch` we know, the start of
        the next one or our LEO); (-1, -1) for an undefined or future epoch.

        A leader counts its current epoch as started at its LEO even when the cache
        does not have it yet (a directly built partition records it at its first
        append)."""
        cache = self.log.leader_epoch_cache
        leo = self.log.log_end_offset
        if epoch == UNDEFINED_EPOCH:
            return UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
        latest = cache.latest_epoch
        if not self.is_leader or (latest is not None and latest >= self.leader_epoch):
            return cache.end_offset_for(epoch, leo)
        if epoch == self.leader_epoch:
            return epoch, leo
        if epoch > self.leader_epoch:
            return UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
        if latest is None:
            return epoch, leo
        found, end = cache.end_offset_for(epoch, leo)
        if end == UNDEFINED_EPOCH_OFFSET:
            # Above every cached epoch: the next one is the virtual current one at the LEO.
            return latest, leo
        return found, end

    # --- lifecycle ----------------------------------------------------------

    def load_producer_state(self) -> None:
        """Rebuild idempotence state: the newest snapshot, then the log after it."""
        psm = ProducerStateManager(self.log.dir)
        start = psm.load(self.log.log_start_offset, self.log.log_end_offset)
        for batch in self.log.iter_batches(start):
            psm.replay(batch)
        psm.update_map_end_offset(self.log.log_end_offset)
        self.producer_state = psm

    def close(self) -> None:
        """Snapshot producer state (so the next start replays nothing) and close the log."""
        if self.producer_state is not None and not self.offline:
            self.producer_state.take_snapshot(self.log.log_end_offset)

    def notify(self) -> None:
        """Wake fetches waiting for data on this partition, and the listener (the
        HW, the ISR or the role changed: waiting acks=all produces may complete)."""
        self.wake_fetches()
        if self.offsets_listener is not None:
            self.offsets_listener(self)

    def wake_fetches(self) -> None:
        """Wake fetches waiting for data: the log grew but the HW did not move.
        Waiting produces are not checked, as Kafka checks only its fetch purgatory
        when an append leaves the HW: none of them can complete (they wait for the
        HW, the role or the ISR), and checking all of them on every append made a
        leader's CPU grow with the square of the requests in flight."""
        arrived = self._data_arrived
        self._data_arrived = None
        if arrived is not None and not arrived.done():
            arrived.set_result(None)

    def data_arrived(self) -> asyncio.Future[None]:
        """A future resolved at the next append or HW move (one per generation,
        shared by every waiting fetch: wait on it with asyncio.wait, which never
        cancels it). A future, not an Event: a waiter wakes one loop turn sooner."""
        if self._data_arrived is None:
            self._data_arrived = asyncio.get_running_loop().create_future()
        return self._data_arrived
