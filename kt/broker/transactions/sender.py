"""WriteTxnMarkers over the wire: the broker's `MarkerSender`.

Markers go to the partition's leader as the metadata cache knows it: through the
codec without a socket when that is this broker (as the controller's channel
reaches its own broker), over one reconnecting connection per other broker
otherwise. A request not answered within `request.timeout.ms` drops the
connection, and the caller retries.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from kt.broker.controller.links import LinkPool
from kt.broker.transactions.markers import NO_LEADER, TxnMarker
from kt.protocol import apis

if TYPE_CHECKING:
    from kt.broker.controller.links import PeerLinks
    from kt.broker.metadata.cache import MetadataCache

TopicPartitionT = tuple[str, int]


class BrokerMarkerSender:
    """Sends markers from a broker to partition leaders (itself included)."""

    def __init__(self, cache: MetadataCache, peers: PeerLinks, *, timeout_s: float = 30.0) -> None:
        self.cache = cache
        self.timeout_s = timeout_s
        client_id = f"broker-{peers.node_id}-txn-markers"
        self._links = LinkPool(lambda broker_id: peers.link(broker_id, client_id))

    def leader_of(self, topic: str, partition: int) -> int | None:
        """The live leader from the metadata cache (NO_LEADER while none; None when
        the partition is unknown)."""
        cache = self.cache
        view = cache.partition(topic, partition)
        if view is None:
            return None
        if view.leader < 0 or cache.broker(view.leader) is None:
            return NO_LEADER
        return view.leader

    async def send(self, broker_id: int, marker: TxnMarker) -> dict[TopicPartitionT, int]:
        """One WriteTxnMarkers request; the error per partition."""
        by_topic: dict[str, list[int]] = {}
        for topic, p in marker.partitions:
            by_topic.setdefault(topic, []).append(p)
        body = {
            "markers": [
                {
                    "producer_id": marker.producer_id,
                    "producer_epoch": marker.producer_epoch,
                    "transaction_result": marker.committed,
                    "topics": [{"name": t, "partition_indexes": ps} for t, ps in by_topic.items()],
                    "coordinator_epoch": marker.coordinator_epoch,
                }
            ]
        }
        link = self._links.get(broker_id)
        try:
            response = await asyncio.wait_for(link.send(apis.WRITE_TXN_MARKERS, body),
                                              self.timeout_s)  # fmt: skip
        except TimeoutError:
            await self._links.drop(broker_id)
            raise
        except OSError:
            await self._links.drop(broker_id)
            raise
        except Exception as exc:
            # A broker that does not serve the API, or an undecodable answer.
            await self._links.drop(broker_id)
            raise ConnectionError(f"WriteTxnMarkers to broker {broker_id} failed: {exc!r}") from exc
        out: dict[TopicPartitionT, int] = {}
        for m in response.markers:
            if m.producer_id != marker.producer_id:
                continue
            for t in m.topics:
                for p in t.partitions:
                    out[(t.name, p.partition_index)] = p.error_code
        return out

    async def close(self) -> None:
        """Close every connection."""
        await self._links.close()
