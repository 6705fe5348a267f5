"""The transaction coordinator of a broker: built from its config and wired to the
replica manager's leadership changes (as the group coordinator is); and the
broker's partition-leader side of transactions, the `TxnVerifier` that asks
coordinators to verify a transactional produce (KIP-890)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kt.broker.groups.offsets_log import partition_for
from kt.broker.transactions.coordinator import TransactionCoordinator, TxnSettings
from kt.broker.transactions.sender import BrokerMarkerSender, broker_link
from kt.broker.transactions.state_log import TRANSACTION_STATE, TransactionLogStore
from kt.broker.transactions.state_manager import TransactionStateManager
from kt.broker.transactions.verifier import TxnVerifier
from kt.storage.checkpoint import TopicPartition

if TYPE_CHECKING:
    from kt.broker.broker import Broker
    from kt.broker.partition import Partition


class TransactionService:
    """Owns the broker's transaction coordinator, its log, its marker sender and the
    produce verifier."""

    def __init__(self, broker: Broker) -> None:
        settings = TxnSettings.from_config(broker.config)
        self.store = TransactionLogStore(broker)
        self.state = TransactionStateManager(self.store, write_timeout_ms=settings.write_timeout_ms)
        self.sender = BrokerMarkerSender(broker, timeout_s=settings.write_timeout_ms / 1000)
        self.coordinator = TransactionCoordinator(
            self.state, self.sender, broker.producer_ids.allocate, settings
        )
        # Verify-only AddPartitionsToTxn to the coordinators, for produce.
        self.verifier = TxnVerifier(
            lambda tid: coordinator_of(broker, tid),
            lambda node: broker_link(broker, node, f"broker-{broker.node_id}-txn-verification"),
            timeout_s=settings.write_timeout_ms / 1000,
        )
        self._started = False
        state = self.state

        def on_leadership(leaders: list[Partition], followers: list[Partition], _: Any) -> None:
            if not self._started:
                return
            resigned = [p.tp.partition for p in followers if p.tp.topic == TRANSACTION_STATE]
            elected = [p.tp.partition for p in leaders if p.tp.topic == TRANSACTION_STATE]
            if resigned:
                state.on_resignation(resigned)
            if elected:
                state.on_election(elected)

        def on_stopped(tps: list[TopicPartition]) -> None:
            stopped = [tp.partition for tp in tps if tp.topic == TRANSACTION_STATE]
            if stopped:
                state.on_resignation(stopped)

        broker.replica_manager.leadership_listeners.append(on_leadership)
        broker.replica_manager.stop_listeners.append(on_stopped)

    async def start(self) -> None:
        """Load the partitions led now; later changes come through the listeners."""
        self._started = True
        self.state.on_election(self.store.led_partitions())
        await self.state.wait_loaded()
        self.coordinator.start_background_tasks()

    async def ensure_topic(self) -> None:
        """Create `__transaction_state` on first use (FindCoordinator); after creating
        it, wait for the partitions led here to load."""
        existed = self.store.exists()
        await self.store.ensure()
        if not existed and self.store.exists():
            self.state.on_election(self.store.led_partitions())
            await self.state.wait_loaded()

    async def stop(self) -> None:
        """Stop the coordinator and close the marker connections."""
        self._started = False
        await self.verifier.close()
        await self.coordinator.stop()
        await self.sender.close()


def coordinator_of(broker: Broker, transactional_id: str) -> int | None:
    """The live broker leading the `__transaction_state` partition of the id, as the
    metadata cache knows it (Kafka's AddPartitionsToTxnManager.getTransactionCoordinator);
    None while the topic does not exist or the partition has no live leader."""
    cache = broker.metadata.cache
    count = cache.num_partitions(TRANSACTION_STATE)
    if not count:
        return None
    view = cache.partition(TRANSACTION_STATE, partition_for(transactional_id, count))
    if view is None or view.leader < 0 or cache.broker(view.leader) is None:
        return None
    return view.leader
