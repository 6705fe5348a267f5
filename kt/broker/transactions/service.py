"""The transaction coordinator of a broker: its state manager over the
`__transaction_state` log, its marker sender and the producer-id source, plus the
broker's partition-leader side of transactions, the `TxnVerifier` that asks
coordinators to verify a transactional produce (KIP-890).

Leadership changes of `__transaction_state` partitions reach it through the
broker's one internal-topic leadership dispatcher (`on_election` /
`on_resignation`, kt.broker.coordinator_leadership)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

from kt.broker.coordinator_log import partition_for
from kt.broker.metadata_store import TRANSACTION_STATE
from kt.broker.transactions.coordinator import TransactionCoordinator, TxnSettings
from kt.broker.transactions.sender import BrokerMarkerSender
from kt.broker.transactions.state_log import TransactionLogStore
from kt.broker.transactions.state_manager import TransactionStateManager
from kt.broker.transactions.verifier import TxnVerifier

if TYPE_CHECKING:
    from kt.broker.controller.links import PeerLinks
    from kt.broker.metadata.cache import MetadataCache


class TransactionService:
    """Owns the broker's transaction coordinator, its log, its marker sender and the
    produce verifier."""

    def __init__(
        self,
        settings: TxnSettings,
        store: TransactionLogStore,
        cache: MetadataCache,
        peers: PeerLinks,
        allocate_producer_id: Callable[[], Awaitable[int]],
    ) -> None:
        self.store = store
        self.state = TransactionStateManager(store, write_timeout_ms=settings.write_timeout_ms)
        self.sender = BrokerMarkerSender(cache, peers, timeout_s=settings.write_timeout_ms / 1000)
        self.coordinator = TransactionCoordinator(
            self.state, self.sender, allocate_producer_id, settings
        )
        # Verify-only AddPartitionsToTxn to the coordinators, for produce.
        client_id = f"broker-{peers.node_id}-txn-verification"
        self.verifier = TxnVerifier(
            lambda tid: coordinator_of(cache, tid),
            lambda node: peers.link(node, client_id),
            timeout_s=settings.write_timeout_ms / 1000,
        )
        self._started = False

    def on_election(self, partitions: list[int]) -> None:
        """`__transaction_state` partitions became led here: load them (once started)."""
        if self._started:
            self.state.on_election(partitions)

    def on_resignation(self, partitions: list[int]) -> None:
        """`__transaction_state` partitions are no longer led here (once started)."""
        if self._started:
            self.state.on_resignation(partitions)

    def on_stopped(self, partitions: list[int]) -> None:
        """`__transaction_state` replicas stopped here (StopReplica): unload them."""
        self.state.on_resignation(partitions)

    async def start(self) -> None:
        """Load the partitions led now; later changes come through the dispatcher."""
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


def coordinator_of(cache: MetadataCache, transactional_id: str) -> int | None:
    """The live broker leading the `__transaction_state` partition of the id, as the
    metadata cache knows it (Kafka's AddPartitionsToTxnManager.getTransactionCoordinator);
    None while the topic does not exist or the partition has no live leader."""
    count = cache.num_partitions(TRANSACTION_STATE)
    if not count:
        return None
    view = cache.partition(TRANSACTION_STATE, partition_for(transactional_id, count))
    if view is None or view.leader < 0 or cache.broker(view.leader) is None:
        return None
    return view.leader
