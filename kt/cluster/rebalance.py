"""The auto leader rebalance's decision, as pure functions (Kafka's
checkAndTriggerAutoLeaderRebalance).

Every `leader.imbalance.check.interval.seconds` the controller measures, per
preferred replica (the head of a partition's assignment), how many of the partitions
it should lead another broker leads. When that fraction exceeds
`leader.imbalance.per.broker.percentage` it runs preferred elections for those
partitions, but only where the preferred replica can win one (live, not shutting
down, in the ISR), so the periodic task never produces failed elections.

The controller uses these over its ControllerContext; the TUI and tools reuse them.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass

from kt.cluster.election import LeaderAndIsr
from kt.storage.checkpoint import TopicPartition


@dataclass(frozen=True, slots=True)
class LeaderImbalance:
    """The partitions whose preferred replica is one broker, and those among them
    that another broker leads (the auto rebalance's measure)."""

    broker_id: int
    preferred: tuple[TopicPartition, ...]
    not_led: tuple[TopicPartition, ...]

    @property
    def ratio(self) -> float:
        """The fraction of `preferred` not led by the broker."""
        return len(self.not_led) / len(self.preferred) if self.preferred else 0.0


def preferred_replica_imbalance(
    partitions: Iterable[TopicPartition],
    replicas: Callable[[TopicPartition], Sequence[int]],
    leadership: Mapping[TopicPartition, LeaderAndIsr],
    excluded_topics: Collection[str] = (),
) -> dict[int, LeaderImbalance]:
    """Per preferred replica (assignment head): its partitions, and those another
    broker leads. Topics in `excluded_topics` (queued for deletion) are left out; a
    partition without a known leadership counts as preferred but not as "not led",
    as in Kafka (it has nothing to move)."""
    preferred: dict[int, list[TopicPartition]] = {}
    not_led: dict[int, list[TopicPartition]] = {}
    for tp in partitions:
        assigned = replicas(tp)
        if not assigned or tp.topic in excluded_topics:
            continue
        head = assigned[0]
        preferred.setdefault(head, []).append(tp)
        state = leadership.get(tp)
        if state is not None and state.leader != head:
            not_led.setdefault(head, []).append(tp)
    return {
        b: LeaderImbalance(b, tuple(tps), tuple(not_led.get(b, ())))
        for b, tps in sorted(preferred.items())
    }


def rebalance_candidates(
    imbalance: Mapping[int, LeaderImbalance],
    leadership: Mapping[TopicPartition, LeaderAndIsr],
    online: Collection[int],
    imbalance_percentage: int,
) -> list[TopicPartition]:
    """The partitions to move back to their preferred replica: for each broker whose
    imbalance ratio exceeds `imbalance_percentage`, its partitions led elsewhere
    where it is online (live, not shutting down) and in the ISR."""
    out: list[TopicPartition] = []
    for broker_id, measure in imbalance.items():
        if measure.ratio <= imbalance_percentage / 100 or broker_id not in online:
            continue
        out.extend(tp for tp in measure.not_led if broker_id in leadership[tp].isr)
    return out
