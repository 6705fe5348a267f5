"""The transaction coordinator: InitProducerId, AddPartitionsToTxn, EndTxn and the
transaction admin APIs, as Apache Kafka 3.x's TransactionCoordinator serves them.

- InitProducerId with a transactional id hands out a producer id (a new id, or
  the id's own with the epoch bumped; a new id once the epoch is exhausted). An
  ongoing transaction of the previous producer is aborted first (its epoch is
  fenced, the client is answered CONCURRENT_TRANSACTIONS and retries); KIP-360
  clients pass their id and epoch, and a retry of a bump that succeeded is
  answered with the same epoch.
- AddPartitionsToTxn / AddOffsetsToTxn move the id to Ongoing with the
  partitions (the group's `__consumer_offsets` partition for offsets).
- EndTxn writes PrepareCommit/PrepareAbort and answers; the markers are then
  written to every partition (`markers.write_markers`) and CompleteCommit /
  CompleteAbort follows. Until then the id answers CONCURRENT_TRANSACTIONS.
- Transactions running past their timeout are aborted by the coordinator (with a
  fenced epoch), ids idle past `transactional.id.expiration.ms` are removed.

Every state change is written to `__transaction_state` and replicated before it
takes effect (`state_manager.TransactionStateManager.append`).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass

from kt.broker.errors import IllegalTransition
from kt.broker.transactions.markers import MarkerSender, MarkersFenced, TxnMarker, write_markers
from kt.broker.transactions.metadata import (
    EXPIRABLE,
    NO_PRODUCER_EPOCH,
    NO_PRODUCER_ID,
    TransactionMetadata,
    TxnState,
    TxnTransit,
    is_epoch_exhausted,
)
from kt.broker.transactions.state_manager import TransactionStateManager, now_ms
from kt.protocol import ErrorCode

log = logging.getLogger("kt.broker.transactions")

E = ErrorCode
S = TxnState

TopicPartitionT = tuple[str, int]
ProducerIdSource = Callable[[], Awaitable[int]]


@dataclass(slots=True)
class TxnSettings:
    """The broker settings the coordinator uses (Kafka's names and defaults)."""

    max_timeout_ms: int = 900_000
    abort_interval_ms: int = 10_000
    expiration_ms: int = 604_800_000
    expiration_interval_ms: int = 3_600_000
    write_timeout_ms: int = 30_000


@dataclass(frozen=True, slots=True)
class InitResult:
    """InitProducerId's answer."""

    error: ErrorCode
    producer_id: int = NO_PRODUCER_ID
    producer_epoch: int = NO_PRODUCER_EPOCH


@dataclass(frozen=True, slots=True)
class TxnDescription:
    """One transaction as DescribeTransactions / ListTransactions report it."""

    transactional_id: str
    state: str
    timeout_ms: int
    start_ms: int
    producer_id: int
    producer_epoch: int
    partitions: tuple[TopicPartitionT, ...]


def _describe(txn: TransactionMetadata) -> TxnDescription:
    return TxnDescription(txn.transactional_id, txn.state.value, txn.timeout_ms, txn.start_ms,
                          txn.producer_id, txn.producer_epoch,
                          tuple(sorted(txn.partitions)))  # fmt: skip


def _valid_producer_id(txn: TransactionMetadata, pid: int, epoch: int) -> bool:
    """Kafka's isValidProducerId for a KIP-360 InitProducerId: a just-created id, the
    current producer id, or a retry of a rotation away from an exhausted epoch."""
    return (
        txn.producer_epoch == NO_PRODUCER_EPOCH
        or pid == txn.producer_id
        or (pid == txn.last_producer_id and is_epoch_exhausted(epoch))
    )


class TransactionCoordinator:
    """The transactional ids this broker coordinates and the operations on them."""

    def __init__(
        self,
        state: TransactionStateManager,
        sender: MarkerSender,
        producer_ids: ProducerIdSource,
        settings: TxnSettings | None = None,
    ) -> None:
        self.state = state
        self.sender = sender
        self.producer_ids = producer_ids
        self.settings = settings or TxnSettings()
        self.marker_backoff_s = 0.1
        # Transactional id -> the task writing its markers and completing it.
        self._completions: dict[str, asyncio.Task[None]] = {}
        self._tasks: list[asyncio.Task[None]] = []
        self._aborts: set[asyncio.Task[ErrorCode]] = set()
        state.on_loaded = self._on_loaded
        state.on_unloaded = self._on_unloaded

    # --- lifecycle -----------------------------------------------------------------

    def start_background_tasks(self) -> None:
        """Abort timed-out transactions and remove expired ids periodically."""
        loop = asyncio.get_running_loop()
        s = self.settings
        self._tasks.append(loop.create_task(self._every(s.abort_interval_ms,
                                                        self.abort_timed_out)))  # fmt: skip
        self._tasks.append(loop.create_task(self._every(s.expiration_interval_ms,
                                                        self.expire_ids)))  # fmt: skip

    async def stop(self) -> None:
        """Stop the background work and unload every id."""
        tasks = self._tasks + list(self._completions.values()) + list(self._aborts)
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        self._tasks.clear()
        self._completions.clear()
        await self.state.stop()

    @staticmethod
    async def _every(interval_ms: int, job: Callable[[], Awaitable[int]]) -> None:
        while True:
            await asyncio.sleep(interval_ms / 1000)
            try:
                await job()
            except Exception:
                log.exception("transaction coordinator task failed")

    def _on_loaded(self, partition: int, epoch: int, txns: list[TransactionMetadata]) -> None:
        # Transactions that were completing when the previous coordinator stopped:
        # their markers are (re)written by this one, with its epoch.
        for txn in txns:
            if txn.state in (S.PREPARE_COMMIT, S.PREPARE_ABORT):
                self._start_completion(txn, epoch)

    def _on_unloaded(self, partitions: list[int]) -> None:
        gone = set(partitions)
        for tid, task in list(self._completions.items()):
            if self.state.partition_for(tid) in gone:
                task.cancel()
                del self._completions[tid]

    # --- InitProducerId ------------------------------------------------------------

    async def init_producer_id(
        self, transactional_id: str, timeout_ms: int, expected: tuple[int, int] | None
    ) -> InitResult:
        """A producer id and epoch for a transactional producer (see the module doc)."""
        if transactional_id == "":
            return InitResult(E.INVALID_REQUEST)
        if not 0 < timeout_ms <= self.settings.max_timeout_ms:
            return InitResult(E.INVALID_TRANSACTION_TIMEOUT)
        error, cepoch, txn = self.state.get(transactional_id)
        if error != E.NONE:
            return InitResult(error)
        if txn is None:
            try:
                pid = await self.producer_ids()
            except Exception as exc:
                log.warning("cannot hand out a producer id: %s", exc)
                return InitResult(E.COORDINATOR_LOAD_IN_PROGRESS)
            error, cepoch, txn = self.state.get(transactional_id)
            if error != E.NONE:
                return InitResult(error)
            if txn is None:
                txn = self.state.put_if_absent(TransactionMetadata(
                    transactional_id, pid, NO_PRODUCER_ID, NO_PRODUCER_EPOCH,
                    NO_PRODUCER_EPOCH, timeout_ms, S.EMPTY, last_update_ms=now_ms(),
                ))  # fmt: skip
        new_pid: int | None = None
        while True:
            step = self._prepare_init(txn, timeout_ms, expected, new_pid)
            if not isinstance(step, bool):
                break
            # The epoch is exhausted: a new producer id first, then check again.
            try:
                new_pid = await self.producer_ids()
            except Exception as exc:
                log.warning("cannot hand out a producer id: %s", exc)
                return InitResult(E.COORDINATOR_LOAD_IN_PROGRESS)
            error, cepoch, current = self.state.get(transactional_id)
            if error != E.NONE:
                return InitResult(error)
            if current is not txn:
                return InitResult(E.CONCURRENT_TRANSACTIONS)
        if isinstance(step, ErrorCode):
            return InitResult(step)
        if step.state is S.PREPARE_EPOCH_FENCE:
            # Abort the old producer's transaction; the client retries meanwhile.
            error = await self._end(transactional_id, step.producer_id, step.producer_epoch,
                                    committed=False, from_client=False)  # fmt: skip
            return InitResult(error if error != E.NONE else E.CONCURRENT_TRANSACTIONS)
        error = await self.state.append(txn, cepoch, step)
        if error != E.NONE:
            return InitResult(error)
        return InitResult(E.NONE, txn.producer_id, txn.producer_epoch)

    def _prepare_init(
        self,
        txn: TransactionMetadata,
        timeout_ms: int,
        expected: tuple[int, int] | None,
        new_pid: int | None,
    ) -> ErrorCode | TxnTransit | bool:
        """Kafka's prepareInitProducerIdTransit: an error, the change to write, or
        True when a new producer id is needed first."""
        if txn.pending_transition:
            return E.CONCURRENT_TRANSACTIONS
        if expected is not None and not _valid_producer_id(txn, *expected):
            return E.PRODUCER_FENCED
        now = now_ms()
        if txn.state in (S.PREPARE_ABORT, S.PREPARE_COMMIT):
            return E.CONCURRENT_TRANSACTIONS
        if txn.state in (S.EMPTY, S.COMPLETE_ABORT, S.COMPLETE_COMMIT):
            if txn.epoch_exhausted and (expected is None or expected[1] == txn.producer_epoch):
                if new_pid is None:
                    return True
                return txn.prepare_producer_id_rotation(new_pid, timeout_ms, now,
                                                        expected is not None)  # fmt: skip
            expected_epoch = expected[1] if expected else None
            transit = txn.prepare_increment_epoch(timeout_ms, expected_epoch, now)
            return E.PRODUCER_FENCED if transit is None else transit
        if txn.state is S.ONGOING:
            return txn.prepare_fence_epoch(now)
        log.error("transactional id %s is %s: no InitProducerId possible",
                  txn.transactional_id, txn.state.value)  # fmt: skip
        return E.UNKNOWN_SERVER_ERROR

    # --- AddPartitionsToTxn / AddOffsetsToTxn ------------------------------------------

    def _check_producer(
        self, transactional_id: str, producer_id: int, epoch: int
    ) -> tuple[ErrorCode, int, TransactionMetadata | None]:
        if not transactional_id:
            return E.INVALID_REQUEST, -1, None
        error, cepoch, txn = self.state.get(transactional_id)
        if error != E.NONE:
            return error, -1, None
        if txn is None or txn.producer_id != producer_id:
            return E.INVALID_PRODUCER_ID_MAPPING, -1, None
        if txn.producer_epoch != epoch:
            return E.PRODUCER_FENCED, -1, None
        return E.NONE, cepoch, txn

    async def add_partitions(
        self, transactional_id: str, producer_id: int, epoch: int,
        partitions: Iterable[TopicPartitionT],
    ) -> ErrorCode:  # fmt: skip
        """Add partitions to the producer's transaction (starting one if none runs)."""
        error, cepoch, txn = self._check_producer(transactional_id, producer_id, epoch)
        if txn is None:
            return error
        added = set(partitions)
        if txn.pending_transition or txn.state in (S.PREPARE_COMMIT, S.PREPARE_ABORT):
            return E.CONCURRENT_TRANSACTIONS
        if txn.state is S.ONGOING and added <= txn.partitions:
            return E.NONE
        try:
            transit = txn.prepare_add_partitions(added, now_ms())
        except IllegalTransition as exc:
            log.error("%s", exc)
            return E.UNKNOWN_SERVER_ERROR
        return await self.state.append(txn, cepoch, transit)

    def verify_partitions(
        self, transactional_id: str, producer_id: int, epoch: int,
        partitions: Iterable[TopicPartitionT],
    ) -> dict[TopicPartitionT, ErrorCode]:  # fmt: skip
        """AddPartitionsToTxn v4+ verify_only (a partition leader asking, KIP-890):
        NONE for partitions in the transaction, INVALID_TXN_STATE for others."""
        wanted = list(partitions)
        error, _, txn = self._check_producer(transactional_id, producer_id, epoch)
        if txn is None:
            return dict.fromkeys(wanted, error)
        if txn.state in (S.PREPARE_COMMIT, S.PREPARE_ABORT):
            return dict.fromkeys(wanted, E.CONCURRENT_TRANSACTIONS)
        return {tp: E.NONE if tp in txn.partitions else E.INVALID_TXN_STATE for tp in wanted}

    # --- EndTxn --------------------------------------------------------------------

    async def end_txn(
        self, transactional_id: str, producer_id: int, epoch: int, committed: bool
    ) -> ErrorCode:
        """Commit or abort: answered once PrepareCommit/PrepareAbort is written."""
        if not transactional_id:
            return E.INVALID_REQUEST
        return await self._end(transactional_id, producer_id, epoch, committed, from_client=True)

    async def _end(
        self, tid: str, producer_id: int, epoch: int, committed: bool, *, from_client: bool
    ) -> ErrorCode:
        error, cepoch, txn = self.state.get(tid)
        if error != E.NONE:
            return error
        if txn is None or txn.producer_id != producer_id:
            return E.INVALID_PRODUCER_ID_MAPPING
        # Clients must match the epoch; the coordinator's own aborts carry a bumped one.
        if (from_client and epoch != txn.producer_epoch) or epoch < txn.producer_epoch:
            return E.PRODUCER_FENCED
        fencing = txn.pending is S.PREPARE_EPOCH_FENCE
        if txn.pending_transition and not (fencing and not committed and not from_client):
            return E.CONCURRENT_TRANSACTIONS
        state = txn.state
        if state is S.COMPLETE_COMMIT:
            return E.NONE if committed else E.INVALID_TXN_STATE
        if state is S.COMPLETE_ABORT:
            return E.NONE if not committed else E.INVALID_TXN_STATE
        if state is S.PREPARE_COMMIT:
            return E.CONCURRENT_TRANSACTIONS if committed else E.INVALID_TXN_STATE
        if state is S.PREPARE_ABORT:
            return E.CONCURRENT_TRANSACTIONS if not committed else E.INVALID_TXN_STATE
        if state is S.EMPTY:
            return E.INVALID_TXN_STATE
        if state is not S.ONGOING:
            log.error("transactional id %s is %s: cannot end it", tid, state.value)
            return E.UNKNOWN_SERVER_ERROR
        if fencing:
            txn.take_fenced_epoch(epoch)
        transit = txn.prepare_abort_or_commit(S.PREPARE_COMMIT if committed else S.PREPARE_ABORT,
                                              now_ms())  # fmt: skip
        error = await self.state.append(txn, cepoch, transit)
        if error != E.NONE:
            if fencing:
                txn.failed_epoch_fence = True
            return error
        self._start_completion(txn, cepoch)
        return E.NONE

    def _start_completion(self, txn: TransactionMetadata, coordinator_epoch: int) -> None:
        tid = txn.transactional_id
        old = self._completions.pop(tid, None)
        if old is not None:
            old.cancel()
        task = asyncio.get_running_loop().create_task(self._complete(txn, coordinator_epoch))
        self._completions[tid] = task

        def done(t: asyncio.Task[None]) -> None:
            if self._completions.get(tid) is t:
                del self._completions[tid]

        task.add_done_callback(done)

    async def _complete(self, txn: TransactionMetadata, coordinator_epoch: int) -> None:
        """Write the markers, then CompleteCommit/CompleteAbort (retried while the log
        is unavailable; given up when the coordinator moved)."""
        tid = txn.transactional_id
        committed = txn.state is S.PREPARE_COMMIT
        marker = TxnMarker(txn.producer_id, txn.producer_epoch, committed, coordinator_epoch,
                           tuple(sorted(txn.partitions)))  # fmt: skip

        def current() -> bool:
            return self.state.is_current(tid, coordinator_epoch)

        try:
            if not await write_markers(self.sender, marker, still_current=current,
                                       backoff_s=self.marker_backoff_s):  # fmt: skip
                return
        except MarkersFenced as exc:
            log.warning("transaction of %s: markers refused, this coordinator is fenced (%s)",
                        tid, exc)  # fmt: skip
            return
        attempt = 0
        while current():
            if txn.pending_transition:
                await asyncio.sleep(self.marker_backoff_s)
                continue
            error = await self.state.append(txn, coordinator_epoch, txn.prepare_complete(now_ms()))
            if error == E.NONE:
                log.debug("transaction of %s completed: %s", tid, txn.state.value)
                return
            if error != E.COORDINATOR_NOT_AVAILABLE:
                log.warning("cannot complete the transaction of %s: %s", tid, error.name)
                return
            attempt += 1
            await asyncio.sleep(min(self.marker_backoff_s * attempt, 1.0))

    # --- timeouts and expiry --------------------------------------------------------

    async def abort_timed_out(self, now: int | None = None) -> int:
        """Abort (with a fenced epoch) every Ongoing transaction past its timeout;
        returns how many were started."""
        now = now_ms() if now is None else now
        started = 0
        for _, txn in self.state.all_loaded():
            if txn.state is not S.ONGOING or txn.pending_transition:
                continue
            if txn.start_ms + txn.timeout_ms >= now:
                continue
            log.info("aborting the transaction of %s (producer %d, epoch %d): it ran past its "
                     "timeout of %d ms", txn.transactional_id, txn.producer_id,
                     txn.producer_epoch, txn.timeout_ms)  # fmt: skip
            try:
                transit = txn.prepare_fence_epoch(now)
            except IllegalTransition as exc:
                log.error("%s", exc)
                continue
            task = asyncio.get_running_loop().create_task(
                self._end(txn.transactional_id, transit.producer_id, transit.producer_epoch,
                          committed=False, from_client=False)
            )  # fmt: skip
            self._aborts.add(task)
            task.add_done_callback(self._aborts.discard)
            started += 1
        if self._aborts:
            await asyncio.gather(*list(self._aborts), return_exceptions=True)
        return started

    async def expire_ids(self, now: int | None = None) -> int:
        """Remove ids idle (no transaction) for `transactional.id.expiration.ms`: a
        tombstone each; returns how many were removed."""
        now = now_ms() if now is None else now
        removed = 0
        for cepoch, txn in list(self.state.all_loaded()):
            if txn.state not in EXPIRABLE or txn.pending_transition:
                continue
            if txn.last_update_ms + self.settings.expiration_ms > now:
                continue
            error = await self.state.append(txn, cepoch, txn.prepare_dead(now))
            if error == E.NONE:
                self.state.remove(txn.transactional_id, txn)
                removed += 1
        if removed:
            log.info("removed %d expired transactional ids", removed)
        return removed

    # --- admin -----------------------------------------------------------------------

    def describe(self, transactional_id: str) -> tuple[ErrorCode, TxnDescription | None]:
        """DescribeTransactions for one id (TRANSACTIONAL_ID_NOT_FOUND if unknown)."""
        error, _, txn = self.state.get(transactional_id)
        if error != E.NONE:
            return error, None
        if txn is None:
            return E.TRANSACTIONAL_ID_NOT_FOUND, None
        return E.NONE, _describe(txn)

    def list_transactions(
        self, states: list[str], producer_ids: list[int], duration_ms: int = -1,
        now: int | None = None,
    ) -> tuple[ErrorCode, list[str], list[TxnDescription]]:  # fmt: skip
        """ListTransactions: (error, unknown state filters, matching transactions)."""
        if self.state.loading:
            return E.COORDINATOR_LOAD_IN_PROGRESS, [], []
        known = {s.value: s for s in TxnState}
        wanted = {known[name] for name in states if name in known}
        unknown = [name for name in states if name not in known]
        pids = set(producer_ids)
        now = now_ms() if now is None else now
        out = []
        for _, txn in self.state.all_loaded():
            if txn.state is S.DEAD:
                continue
            if pids and txn.producer_id not in pids:
                continue
            if wanted and txn.state not in wanted:
                continue
            if duration_ms >= 0 and now - txn.start_ms <= duration_ms:
                continue
            out.append(_describe(txn))
        return E.NONE, unknown, sorted(out, key=lambda d: d.transactional_id)
