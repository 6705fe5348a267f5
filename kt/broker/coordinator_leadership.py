"""One leadership dispatcher for the internal topics' coordinators.

Kafka's coordinators (groups on `__consumer_offsets`, transactions on
`__transaction_state`) load a partition's state when this broker becomes its
leader and unload it when it stops leading or hosting it. The replica manager
tells of both (its leadership and stop listeners); this dispatcher is the one
listener that splits those changes by internal topic and hands each coordinator
the partition numbers it owns. A new coordinator registers its topic here.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from kt.broker.partition import Partition
    from kt.storage.checkpoint import TopicPartition

PartitionsCallback = Callable[[list[int]], None]


@dataclass(frozen=True, slots=True)
class _Coordinator:
    elected: PartitionsCallback
    resigned: PartitionsCallback
    stopped: PartitionsCallback


class CoordinatorLeadership:
    """Routes leadership changes of internal topics' partitions to their coordinators."""

    def __init__(self) -> None:
        self._by_topic: dict[str, _Coordinator] = {}

    def register(
        self,
        topic: str,
        *,
        elected: PartitionsCallback,
        resigned: PartitionsCallback,
        stopped: PartitionsCallback | None = None,
    ) -> None:
        """Tell `elected` / `resigned` of `topic`'s partitions this broker starts or
        stops leading, and `stopped` (default: `resigned`) of replicas stopped here."""
        if topic in self._by_topic:
            raise ValueError(f"{topic} already has a coordinator")
        self._by_topic[topic] = _Coordinator(elected, resigned, stopped or resigned)

    def on_leadership(self, leaders: list[Partition], followers: list[Partition], _: Any) -> None:
        """A LeaderAndIsr made `leaders` leaders and `followers` followers here. A
        partition is in both lists only across two requests; here each lists the
        change this request made: resignations first, then elections."""
        for topic, coordinator in self._by_topic.items():
            resigned = [p.tp.partition for p in followers if p.tp.topic == topic]
            elected = [p.tp.partition for p in leaders if p.tp.topic == topic]
            if resigned:
                coordinator.resigned(resigned)
            if elected:
                coordinator.elected(elected)

    def on_stopped(self, tps: list[TopicPartition]) -> None:
        """A StopReplica stopped these replicas here."""
        for topic, coordinator in self._by_topic.items():
            stopped = [tp.partition for tp in tps if tp.topic == topic]
            if stopped:
                coordinator.stopped(stopped)
