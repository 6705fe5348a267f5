"""Which transactional ids this broker coordinates, and their persistence.

Kafka's TransactionStateManager. The coordinator of a transactional id is the
leader of its `__transaction_state` partition; the coordinator epoch of the ids
there is the partition's leader epoch. Becoming leader loads the partition (its
ids answer COORDINATOR_LOAD_IN_PROGRESS meanwhile), losing it unloads them (they
answer NOT_COORDINATOR); an election with a newer epoch reloads. Every state
change is appended as the partition's leader and takes effect only once
replicated (acks=all); a write finishing after the coordinator lost or re-won the
partition is not applied (the newer coordinator epoch owns the id).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from kt.broker.coordinator_log import partition_for
from kt.broker.errors import AppendError
from kt.broker.transactions.metadata import TransactionMetadata, TxnTransit
from kt.broker.transactions.state_log import TxnRecordStore, replay, transit_record
from kt.protocol import ErrorCode

log = logging.getLogger("kt.broker.transactions")

E = ErrorCode

# Kafka's appendTransactionToLog: what a failed write tells the caller.
_APPEND_ERRORS = {
    E.UNKNOWN_TOPIC_OR_PARTITION: E.COORDINATOR_NOT_AVAILABLE,
    E.NOT_ENOUGH_REPLICAS: E.COORDINATOR_NOT_AVAILABLE,
    E.NOT_ENOUGH_REPLICAS_AFTER_APPEND: E.COORDINATOR_NOT_AVAILABLE,
    E.REQUEST_TIMED_OUT: E.COORDINATOR_NOT_AVAILABLE,
    E.NOT_LEADER_OR_FOLLOWER: E.NOT_COORDINATOR,
    E.KAFKA_STORAGE_ERROR: E.NOT_COORDINATOR,
    E.MESSAGE_TOO_LARGE: E.UNKNOWN_SERVER_ERROR,
    E.RECORD_LIST_TOO_LARGE: E.UNKNOWN_SERVER_ERROR,
}


def now_ms() -> int:
    """Wall-clock milliseconds."""
    return int(time.time() * 1000)


@dataclass(slots=True)
class TxnPartition:
    """One loaded `__transaction_state` partition: its coordinator epoch and ids."""

    coordinator_epoch: int
    txns: dict[str, TransactionMetadata] = field(default_factory=dict)


LoadedCallback = Callable[[int, int, list[TransactionMetadata]], None]


class TransactionStateManager:
    """The transactional ids of the partitions led here."""

    def __init__(self, store: TxnRecordStore, *, write_timeout_ms: int = 30_000) -> None:
        self.store = store
        self.write_timeout_ms = write_timeout_ms
        self.owned: dict[int, TxnPartition] = {}
        # Partition -> the epoch being loaded.
        self.loading: dict[int, int] = {}
        self._loads: dict[int, asyncio.Task[None]] = {}
        self._partitions: int | None = None
        self._stopped = False
        # Told (partition, coordinator epoch, ids) once a partition is loaded, so the
        # coordinator finishes the transactions that were completing.
        self.on_loaded: LoadedCallback | None = None
        # Told the partitions that were unloaded (their marker tasks stop).
        self.on_unloaded: Callable[[list[int]], None] | None = None

    # --- ownership -----------------------------------------------------------------

    def partition_count(self) -> int:
        """Partitions of `__transaction_state` (cached once the topic exists)."""
        if self._partitions is None:
            count = self.store.partition_count()
            if not self.store.exists():
                return count
            self._partitions = count
        return self._partitions

    def partition_for(self, transactional_id: str) -> int:
        """The `__transaction_state` partition of a transactional id."""
        return partition_for(transactional_id, self.partition_count())

    def on_election(self, partitions: Iterable[int]) -> None:
        """This broker leads `partitions` now: load them (again, if the epoch grew)."""
        if self._stopped:
            return
        self._partitions = None
        loop = asyncio.get_running_loop()
        for p in partitions:
            epoch = self.store.leader_epoch(p)
            owned = self.owned.get(p)
            if (owned is not None and owned.coordinator_epoch >= epoch) or (
                self.loading.get(p, -2) >= epoch
            ):
                continue
            self._unload([p])
            self.loading[p] = epoch
            self._loads[p] = loop.create_task(self._load(p, epoch))

    def on_resignation(self, partitions: Iterable[int]) -> None:
        """This broker no longer leads `partitions`: forget their ids."""
        self._unload(list(partitions))

    def _unload(self, partitions: list[int]) -> None:
        gone = []
        for p in partitions:
            task = self._loads.pop(p, None)
            if task is not None:
                task.cancel()
            self.loading.pop(p, None)
            dropped = self.owned.pop(p, None)
            if dropped is not None:
                gone.append(p)
                log.info("resigned as transaction coordinator of __transaction_state-%d "
                         "(%d ids)", p, len(dropped.txns))  # fmt: skip
        if gone and self.on_unloaded is not None:
            self.on_unloaded(gone)

    async def _load(self, p: int, epoch: int) -> None:
        try:
            await asyncio.sleep(0)  # the LeaderAndIsr that elected us completes first
            if self.loading.get(p) != epoch:
                return
            started = now_ms()
            try:
                txns, skipped = replay(self.store.read(p))
            except Exception:
                log.exception("cannot load __transaction_state-%d", p)
                self.loading.pop(p, None)
                return
            self.loading.pop(p, None)
            self.owned[p] = TxnPartition(epoch, txns)
            log.info("loaded %d transactional ids from __transaction_state-%d (epoch %d) "
                     "in %d ms%s", len(txns), p, epoch, now_ms() - started,
                     f", {skipped} records not understood" if skipped else "")  # fmt: skip
            if self.on_loaded is not None:
                self.on_loaded(p, epoch, list(txns.values()))
        finally:
            if self._loads.get(p) is asyncio.current_task():
                del self._loads[p]

    async def wait_loaded(self) -> None:
        """Until no partition is loading."""
        while self._loads:
            await asyncio.gather(*list(self._loads.values()), return_exceptions=True)

    async def stop(self) -> None:
        """Unload everything; nothing loads after this."""
        self._stopped = True
        self._unload(sorted(set(self.owned) | set(self.loading)))

    # --- lookups -------------------------------------------------------------------

    def get(self, transactional_id: str) -> tuple[ErrorCode, int, TransactionMetadata | None]:
        """(error, coordinator epoch, metadata or None when unknown): NOT_COORDINATOR
        unless this broker leads the id's partition, COORDINATOR_LOAD_IN_PROGRESS
        while it loads."""
        p = self.partition_for(transactional_id)
        if p in self.loading:
            return E.COORDINATOR_LOAD_IN_PROGRESS, -1, None
        owned = self.owned.get(p)
        if owned is None:
            return E.NOT_COORDINATOR, -1, None
        return E.NONE, owned.coordinator_epoch, owned.txns.get(transactional_id)

    def put_if_absent(self, metadata: TransactionMetadata) -> TransactionMetadata:
        """Add a new id (to a partition led here); the existing one if it is there."""
        owned = self.owned[self.partition_for(metadata.transactional_id)]
        return owned.txns.setdefault(metadata.transactional_id, metadata)

    def is_current(self, transactional_id: str, coordinator_epoch: int) -> bool:
        """Whether this broker still coordinates the id with this epoch."""
        owned = self.owned.get(self.partition_for(transactional_id))
        return owned is not None and owned.coordinator_epoch == coordinator_epoch

    def all_loaded(self) -> Iterable[tuple[int, TransactionMetadata]]:
        """(coordinator epoch, metadata) of every id loaded here."""
        for owned in list(self.owned.values()):
            for txn in list(owned.txns.values()):
                yield owned.coordinator_epoch, txn

    def remove(self, transactional_id: str, metadata: TransactionMetadata) -> None:
        """Forget an id (it expired), unless it was replaced meanwhile."""
        owned = self.owned.get(self.partition_for(transactional_id))
        if owned is not None and owned.txns.get(transactional_id) is metadata:
            del owned.txns[transactional_id]

    # --- writes --------------------------------------------------------------------

    async def append(
        self, metadata: TransactionMetadata, coordinator_epoch: int, transit: TxnTransit
    ) -> ErrorCode:
        """Write a prepared change and wait until it is replicated; on success the
        metadata takes it on, otherwise the prepared change is dropped. Returns the
        coordinator error (NONE, NOT_COORDINATOR, COORDINATOR_NOT_AVAILABLE, ...)."""
        tid = metadata.transactional_id
        p = self.partition_for(tid)
        try:
            position = self.store.append(p, [transit_record(tid, transit)])
            await self.store.wait_committed(p, position, self.write_timeout_ms)
            error = E.NONE
        except AppendError as exc:
            error = _APPEND_ERRORS.get(exc.code, exc.code)
            log.warning("cannot write %s of transactional id %s: %s", transit.state.value, tid,
                        exc.code.name)  # fmt: skip
        except asyncio.CancelledError:
            metadata.abort_transition()
            raise
        if error == E.NONE and not self.is_current(tid, coordinator_epoch):
            # Written, but by a coordinator that since lost (or re-won) the partition:
            # the loaded state of the new epoch is what counts.
            error = E.NOT_COORDINATOR
        if error == E.NONE:
            metadata.complete_transition(transit)
        else:
            metadata.abort_transition()
        return error
