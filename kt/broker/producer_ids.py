"""Producer ids for idempotent (and, later, transactional) producers.

Ids are reserved from the cluster metadata a block at a time (the block's end is
persisted before any id of it is handed out), so a restart never hands out an id
twice, as Kafka's ProducerIdManager does with its ZooKeeper blocks.
"""

from __future__ import annotations

from kt.broker.metadata_store import MetadataStore

#: Ids reserved per metadata write (Kafka's PRODUCER_ID_BLOCK_SIZE).
BLOCK = 1000


class ProducerIdManager:
    """Hands out producer ids, and remembers each idempotent producer's current epoch."""

    def __init__(self, store: MetadataStore) -> None:
        self.store = store
        self.next_id = -1
        self.block_end = -1
        # producer id -> current epoch, for epoch bumps of idempotent producers (KIP-360)
        self.epochs: dict[int, int] = {}

    def allocate(self) -> int:
        """A fresh producer id."""
        if self.next_id < 0 or self.next_id >= self.block_end:
            start = self.store.next_producer_id_block
            self.store.next_producer_id_block = start + BLOCK
            self.store.save()
            self.next_id, self.block_end = start, start + BLOCK
        pid = self.next_id
        self.next_id += 1
        return pid
