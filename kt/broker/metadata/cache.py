"""MetadataCache: what the controller last told this broker about the cluster.

Kafka's ZooKeeper-mode brokers answer Metadata, DescribeCluster and
FindCoordinator from a cache that the controller fills with UpdateMetadata: the
live brokers with their endpoints and racks, the controller's id, and for every
partition its leader, leader epoch, replicas, ISR and offline replicas. The cache
never reads ZooKeeper itself, so every broker answers from the same controller-made
view, and a broker that missed an update is merely behind (clients retry on the
errors that a stale view produces).

An update replaces the live-broker list as a whole and the states of the
partitions it names; a partition whose leader is `LEADER_DURING_DELETE` (-2) is
being deleted and leaves the cache (Kafka's LeaderAndIsr.LeaderDuringDelete).

Until the first update the cache is not `ready`: a broker that just started (a
restart waits for its previous ZooKeeper session to expire before it registers,
and only then does the controller send it the cluster) knows no brokers and no
topics, and an empty cache must not be mistaken for an empty cluster. Handlers
answer clients with retriable errors meanwhile (`kt.broker.handlers.readiness`,
docs/design/restart-metadata.md). The controller's first UpdateMetadata to a
broker that joins, and every one after a controller failover, names every
partition, so one update is a complete view.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Protocol, TypeVar

NO_LEADER = -1
LEADER_DURING_DELETE = -2


class _Listening(Protocol):
    @property
    def listener(self) -> str: ...


_E = TypeVar("_E", bound=_Listening)


def endpoint_on(endpoints: Sequence[_E], listener: str) -> _E | None:
    """Where to reach a broker with these endpoints from `listener`'s side: that
    listener's endpoint, else its first one (a broker registered with other
    names); None when it has none. The one rule for "the endpoint of broker N"
    (clients, links, coordinators, the controller's address), whether the
    endpoints come from the metadata cache or a broker's registration."""
    for ep in endpoints:
        if ep.listener == listener:
            return ep
    return endpoints[0] if endpoints else None


@dataclass(frozen=True, slots=True)
class Endpoint:
    """One listener of a broker: its name (e.g. PLAINTEXT), host and port."""

    listener: str
    host: str
    port: int


@dataclass(frozen=True, slots=True)
class LiveBroker:
    """A broker the controller counts as alive."""

    broker_id: int
    endpoints: tuple[Endpoint, ...]
    rack: str | None = None

    def endpoint(self, listener: str | None = None) -> Endpoint | None:
        """The endpoint of `listener` (the first one when None)."""
        for ep in self.endpoints:
            if listener is None or ep.listener == listener:
                return ep
        return None

    def endpoint_for(self, listener: str) -> Endpoint | None:
        """Where to reach this broker from `listener`'s side (`endpoint_on`)."""
        return endpoint_on(self.endpoints, listener)


@dataclass(frozen=True, slots=True)
class PartitionView:
    """A partition as the controller described it."""

    leader: int
    leader_epoch: int
    isr: tuple[int, ...]
    replicas: tuple[int, ...]
    zk_version: int = 0
    offline_replicas: tuple[int, ...] = ()
    controller_epoch: int = 0


@dataclass(slots=True)
class _Topic:
    topic_id: bytes | None
    partitions: dict[int, PartitionView] = field(default_factory=dict)


class MetadataCache:
    """The cluster as the latest UpdateMetadata described it."""

    def __init__(self) -> None:
        self.controller_id: int | None = None
        self.controller_epoch = -1
        # Bumped by every update, so derived views know when to rebuild.
        self.version = 0
        self._brokers: dict[int, LiveBroker] = {}
        self._topics: dict[str, _Topic] = {}
        # Topic id -> name, rebuilt on the first lookup after an update (every
        # Fetch v13+ resolves its topics by id).
        self._by_id: dict[bytes, str] = {}
        self._by_id_version = -1
        self._ready = False

    # --- updates -----------------------------------------------------------

    def update(
        self,
        *,
        controller_id: int | None,
        controller_epoch: int,
        brokers: Iterable[LiveBroker],
        partitions: Iterable[tuple[str, bytes | None, int, PartitionView]],
    ) -> list[tuple[str, int]]:
        """Apply one UpdateMetadata: the live brokers as given, and the states of
        the (topic, topic id, partition, state) entries. Returns the partitions
        that were deleted (leader -2)."""
        self.controller_id = controller_id
        self.controller_epoch = max(self.controller_epoch, controller_epoch)
        self.version += 1
        self._ready = True
        self._brokers = {b.broker_id: b for b in brokers}
        deleted: list[tuple[str, int]] = []
        for topic, topic_id, index, view in partitions:
            if view.leader == LEADER_DURING_DELETE:
                t = self._topics.get(topic)
                if t is not None and t.partitions.pop(index, None) is not None:
                    deleted.append((topic, index))
                    if not t.partitions:
                        del self._topics[topic]
                continue
            t = self._topics.get(topic)
            if t is None:
                t = self._topics[topic] = _Topic(topic_id)
            elif topic_id is not None and any(topic_id):
                t.topic_id = topic_id
            t.partitions[index] = view
        return deleted

    @property
    def ready(self) -> bool:
        """True once an UpdateMetadata was applied: from then on a topic the cache
        lacks is one the controller does not know (not merely one not heard of yet).
        It stays true for the process's life; a later view may be stale, never empty."""
        return self._ready

    # --- brokers -----------------------------------------------------------

    def alive_brokers(self) -> list[LiveBroker]:
        """The live brokers, by id."""
        return [self._brokers[b] for b in sorted(self._brokers)]

    def broker(self, broker_id: int) -> LiveBroker | None:
        """A live broker by id."""
        return self._brokers.get(broker_id)

    def is_alive(self, broker_id: int) -> bool:
        """True when the controller counts `broker_id` as alive."""
        return broker_id in self._brokers

    # --- topics and partitions ---------------------------------------------

    def topics(self) -> list[str]:
        """Every topic the cache knows, sorted."""
        return sorted(self._topics)

    def contains(self, topic: str) -> bool:
        """True when `topic` has at least one partition in the cache."""
        return topic in self._topics

    def topic_id(self, topic: str) -> bytes | None:
        """The topic's id, if known."""
        t = self._topics.get(topic)
        return t.topic_id if t is not None else None

    def topic_by_id(self, topic_id: bytes) -> str | None:
        """The name of the topic with this id, if known."""
        if self._by_id_version != self.version:
            self._by_id = {bytes(t.topic_id): n for n, t in self._topics.items() if t.topic_id}
            self._by_id_version = self.version
        return self._by_id.get(bytes(topic_id))

    def partitions(self, topic: str) -> dict[int, PartitionView]:
        """The topic's partitions by index (empty when unknown)."""
        t = self._topics.get(topic)
        return dict(t.partitions) if t is not None else {}

    def partition(self, topic: str, index: int) -> PartitionView | None:
        """One partition's state, if known."""
        t = self._topics.get(topic)
        return t.partitions.get(index) if t is not None else None

    def num_partitions(self, topic: str) -> int | None:
        """How many partitions the topic has (None when unknown)."""
        t = self._topics.get(topic)
        return len(t.partitions) if t is not None else None

    def leader_endpoint(
        self, topic: str, index: int, listener: str | None = None
    ) -> Endpoint | None:
        """Where the partition's leader listens, when it has a live leader."""
        view = self.partition(topic, index)
        if view is None or view.leader < 0:
            return None
        b = self._brokers.get(view.leader)
        return b.endpoint(listener) if b is not None else None
