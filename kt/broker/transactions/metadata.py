"""One transactional id's state and its state machine (Kafka's TransactionMetadata).

A transactional id moves Empty -> Ongoing -> PrepareCommit/PrepareAbort ->
CompleteCommit/CompleteAbort (-> Ongoing again, or Empty on InitProducerId), with
PrepareEpochFence while a new producer fences an ongoing transaction and Dead
when the id expires. Every change is *prepared* first (`prepare_*` returns a
`TxnTransit` and marks the state pending, so concurrent requests answer
CONCURRENT_TRANSACTIONS), written to `__transaction_state`, and only then
*completed* (`complete_transition`) or, when the write failed, dropped
(`abort_transition`). Nothing here does I/O.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field

from kt.broker.errors import IllegalTransition
from kt.protocol.coordinator_records import TransactionLogValue
from kt.protocol.coordinator_records import TransactionState as LogState

NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
MAX_EPOCH = 2**15 - 1


class TxnState(enum.Enum):
    """Transaction states, named as Kafka names them in DescribeTransactions."""

    EMPTY = "Empty"
    ONGOING = "Ongoing"
    PREPARE_COMMIT = "PrepareCommit"
    PREPARE_ABORT = "PrepareAbort"
    COMPLETE_COMMIT = "CompleteCommit"
    COMPLETE_ABORT = "CompleteAbort"
    DEAD = "Dead"
    PREPARE_EPOCH_FENCE = "PrepareEpochFence"

    @property
    def log_state(self) -> LogState:
        """The status byte `__transaction_state` stores."""
        return LogState[self.name]

    @classmethod
    def from_log(cls, status: int) -> TxnState:
        """The state of a stored status byte (ValueError if unknown)."""
        return cls[LogState(status).name]


S = TxnState

# Kafka's TransactionState.validPreviousStates.
_VALID_PREVIOUS: dict[TxnState, frozenset[TxnState]] = {
    S.EMPTY: frozenset({S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT}),
    S.ONGOING: frozenset({S.ONGOING, S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT}),
    S.PREPARE_COMMIT: frozenset({S.ONGOING}),
    S.PREPARE_ABORT: frozenset({S.ONGOING, S.PREPARE_EPOCH_FENCE}),
    S.COMPLETE_COMMIT: frozenset({S.PREPARE_COMMIT}),
    S.COMPLETE_ABORT: frozenset({S.PREPARE_ABORT}),
    S.DEAD: frozenset({S.EMPTY, S.COMPLETE_ABORT, S.COMPLETE_COMMIT}),
    S.PREPARE_EPOCH_FENCE: frozenset({S.ONGOING}),
}

#: States in which a transactional id may expire (no transaction in progress).
EXPIRABLE = frozenset({S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT})


def is_epoch_exhausted(epoch: int) -> bool:
    """Kafka keeps the last epoch for fencing: an epoch of 32766 or more is used up."""
    return epoch >= MAX_EPOCH - 1


TopicPartitionT = tuple[str, int]


@dataclass(frozen=True, slots=True)
class TxnTransit:
    """A prepared state change, as written to the log (Kafka's TxnTransitMetadata)."""

    producer_id: int
    last_producer_id: int
    producer_epoch: int
    last_producer_epoch: int
    timeout_ms: int
    state: TxnState
    partitions: frozenset[TopicPartitionT]
    start_ms: int
    last_update_ms: int

    def log_value(self) -> TransactionLogValue:
        """The `__transaction_state` value (version 0, as Kafka 3.x writes it):
        partitions are null while Empty, sorted by topic otherwise."""
        parts: list[tuple[str, list[int]]] | None = None
        if self.state is not S.EMPTY:
            by_topic: dict[str, list[int]] = {}
            for topic, p in sorted(self.partitions):
                by_topic.setdefault(topic, []).append(p)
            parts = list(by_topic.items())
        return TransactionLogValue(
            producer_id=self.producer_id,
            producer_epoch=self.producer_epoch,
            transaction_timeout_ms=self.timeout_ms,
            state=int(self.state.log_state),
            partitions=parts,
            last_update_timestamp_ms=self.last_update_ms,
            start_timestamp_ms=self.start_ms,
            version=0,
        )


@dataclass(slots=True)
class TransactionMetadata:
    """The coordinator's view of one transactional id."""

    transactional_id: str
    producer_id: int
    last_producer_id: int
    producer_epoch: int
    last_producer_epoch: int
    timeout_ms: int
    state: TxnState
    partitions: set[TopicPartitionT] = field(default_factory=set)
    start_ms: int = -1
    last_update_ms: int = -1
    pending: TxnState | None = None
    # A fence whose write failed is not bumped again (the epoch never reached a client).
    failed_epoch_fence: bool = False

    @classmethod
    def from_log(cls, transactional_id: str, value: TransactionLogValue) -> TransactionMetadata:
        """A transactional id as loaded from its newest `__transaction_state` record."""
        return cls(
            transactional_id=transactional_id,
            producer_id=value.producer_id,
            last_producer_id=value.previous_producer_id,
            producer_epoch=value.producer_epoch,
            last_producer_epoch=NO_PRODUCER_EPOCH,
            timeout_ms=value.transaction_timeout_ms,
            state=TxnState.from_log(value.state),
            partitions={(t, p) for t, ps in (value.partitions or []) for p in ps},
            start_ms=value.start_timestamp_ms,
            last_update_ms=value.last_update_timestamp_ms,
        )

    @property
    def pending_transition(self) -> bool:
        """A prepared change is being written."""
        return self.pending is not None

    @property
    def epoch_exhausted(self) -> bool:
        """The producer epoch cannot be bumped any further."""
        return is_epoch_exhausted(self.producer_epoch)

    # --- preparing ---------------------------------------------------------------

    def _prepare(
        self,
        state: TxnState,
        *,
        producer_id: int | None = None,
        last_producer_id: int | None = None,
        epoch: int | None = None,
        last_epoch: int | None = None,
        timeout_ms: int | None = None,
        partitions: frozenset[TopicPartitionT] | None = None,
        start_ms: int | None = None,
        now: int,
    ) -> TxnTransit:
        if self.pending is not None:
            raise IllegalTransition(
                f"{self.transactional_id}: {self.pending.value} is pending, cannot prepare "
                f"{state.value}"
            )
        if self.state not in _VALID_PREVIOUS[state]:
            raise IllegalTransition(
                f"{self.transactional_id}: {self.state.value} -> {state.value} is not allowed"
            )
        self.pending = state
        return TxnTransit(
            producer_id=self.producer_id if producer_id is None else producer_id,
            last_producer_id=(
                self.last_producer_id if last_producer_id is None else last_producer_id
            ),
            producer_epoch=self.producer_epoch if epoch is None else epoch,
            last_producer_epoch=self.last_producer_epoch if last_epoch is None else last_epoch,
            timeout_ms=self.timeout_ms if timeout_ms is None else timeout_ms,
            state=state,
            partitions=frozenset(self.partitions) if partitions is None else partitions,
            start_ms=self.start_ms if start_ms is None else start_ms,
            last_update_ms=now,
        )

    def prepare_increment_epoch(
        self, timeout_ms: int, expected_epoch: int | None, now: int
    ) -> TxnTransit | None:
        """InitProducerId on the same producer id: the epoch bumped (Empty). With an
        expected epoch (KIP-360) a retry of a bump that succeeded keeps the epoch;
        any other epoch is fenced (None)."""
        if self.epoch_exhausted:
            raise IllegalTransition(f"{self.transactional_id}: the epoch is exhausted")
        bumped = self.producer_epoch + 1
        if expected_epoch is None:
            epoch, last = bumped, NO_PRODUCER_EPOCH
        elif self.producer_epoch == NO_PRODUCER_EPOCH or expected_epoch == self.producer_epoch:
            epoch, last = bumped, self.producer_epoch
        elif expected_epoch == self.last_producer_epoch:
            epoch, last = self.producer_epoch, self.last_producer_epoch
        else:
            return None
        return self._prepare(S.EMPTY, epoch=epoch, last_epoch=last, timeout_ms=timeout_ms,
                             partitions=frozenset(), start_ms=-1, now=now)  # fmt: skip

    def prepare_producer_id_rotation(
        self, new_producer_id: int, timeout_ms: int, now: int, record_last_epoch: bool
    ) -> TxnTransit:
        """The epoch is exhausted: a new producer id at epoch 0 (Empty)."""
        return self._prepare(
            S.EMPTY,
            producer_id=new_producer_id,
            last_producer_id=self.producer_id,
            epoch=0,
            last_epoch=self.producer_epoch if record_last_epoch else NO_PRODUCER_EPOCH,
            timeout_ms=timeout_ms,
            partitions=frozenset(),
            start_ms=-1,
            now=now,
        )

    def prepare_fence_epoch(self, now: int) -> TxnTransit:
        """An ongoing transaction must be aborted by the coordinator (a new producer
        took the id, or it timed out): the epoch is bumped so that the markers fence
        the old producer (once only, if an earlier fence failed to be written)."""
        if self.producer_epoch >= MAX_EPOCH:
            raise IllegalTransition(f"{self.transactional_id}: cannot fence epoch {MAX_EPOCH}")
        epoch = self.producer_epoch if self.failed_epoch_fence else self.producer_epoch + 1
        return self._prepare(S.PREPARE_EPOCH_FENCE, epoch=epoch, last_epoch=NO_PRODUCER_EPOCH,
                             start_ms=self.start_ms, now=now)  # fmt: skip

    def prepare_add_partitions(self, added: set[TopicPartitionT], now: int) -> TxnTransit:
        """Partitions join the transaction (Ongoing; a new transaction starts now)."""
        start = now if self.state in EXPIRABLE else self.start_ms
        return self._prepare(S.ONGOING, partitions=frozenset(self.partitions | added),
                             start_ms=start, now=now)  # fmt: skip

    def prepare_abort_or_commit(self, state: TxnState, now: int) -> TxnTransit:
        """EndTxn (or a coordinator abort): PrepareCommit or PrepareAbort."""
        return self._prepare(state, now=now)

    def prepare_complete(self, now: int) -> TxnTransit:
        """Every marker is written: CompleteCommit or CompleteAbort, no partitions."""
        state = S.COMPLETE_COMMIT if self.state is S.PREPARE_COMMIT else S.COMPLETE_ABORT
        self.failed_epoch_fence = False
        return self._prepare(state, partitions=frozenset(), now=now)

    def prepare_dead(self, now: int) -> TxnTransit:
        """The id expired: a tombstone is written."""
        return self._prepare(S.DEAD, partitions=frozenset(), now=now)

    # --- completing --------------------------------------------------------------

    def complete_transition(self, transit: TxnTransit) -> None:
        """The prepared change is in the log: take it on."""
        if self.pending is not transit.state:
            raise IllegalTransition(
                f"{self.transactional_id}: completing {transit.state.value} but "
                f"{self.pending.value if self.pending else 'nothing'} is pending"
            )
        self.pending = None
        self.producer_id = transit.producer_id
        self.last_producer_id = transit.last_producer_id
        self.producer_epoch = transit.producer_epoch
        self.last_producer_epoch = transit.last_producer_epoch
        self.timeout_ms = transit.timeout_ms
        self.state = transit.state
        self.partitions = set(transit.partitions)
        self.start_ms = transit.start_ms
        self.last_update_ms = transit.last_update_ms

    def abort_transition(self) -> None:
        """The prepared change was not written: forget it."""
        self.pending = None

    def take_fenced_epoch(self, epoch: int) -> None:
        """A prepared epoch fence goes on as an abort (Kafka's endTransaction with a
        PrepareEpochFence pending): the bumped epoch becomes current in memory, so
        that the PrepareAbort written next carries it."""
        if self.pending is not S.PREPARE_EPOCH_FENCE:
            raise IllegalTransition(f"{self.transactional_id}: no epoch fence is pending")
        self.pending = None
        self.producer_epoch = epoch
        self.last_producer_epoch = NO_PRODUCER_EPOCH
