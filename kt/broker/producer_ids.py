"""Producer ids for idempotent (and, later, transactional) producers.

Ids are reserved a block of 1000 at a time in `/latest_producer_id_block` (Kafka's
ProducerIdManager in ZooKeeper mode): a conditional write claims the block after
the last one any broker took, so ids are unique across the cluster and a restart
never hands out an id twice. The single-node broker uses the same znode in its
in-process store.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from kt.broker.metadata.znodes import ProducerIdBlock

BlockSource = Callable[[], Awaitable[ProducerIdBlock]]


class ProducerIdManager:
    """Hands out producer ids, unique across the cluster."""

    def __init__(self) -> None:
        self._source: BlockSource | None = None
        self.next_id = -1
        self.block_end = -1

    def attach(self, source: BlockSource) -> None:
        """Where blocks come from (the cluster store, once the broker joined)."""
        self._source = source

    async def allocate(self) -> int:
        """A fresh producer id (a new block is claimed when this one is used up)."""
        if self.next_id < 0 or self.next_id > self.block_end:
            if self._source is None:
                raise RuntimeError("producer ids are not available before the broker joined")
            block = await self._source()
            self.next_id, self.block_end = block.start, block.end
        pid = self.next_id
        self.next_id += 1
        return pid
