"""Planning a reset of a consumer group's committed offsets, as
`kafka-consumer-groups.sh --reset-offsets` does: shared by `kt group reset-offsets`
and the TUI's reset action, so both move the same partitions to the same offsets.

A target says where each partition goes (the log start or end, the committed offset,
an offset, the first offset at or after a time, or a shift of the committed offset);
the new offset is clamped to the partition's log start and end, as Kafka clamps it.
Kafka resets only inactive groups (no members: Empty or Dead); each caller refuses
an active one in its own words, before or after planning.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from kt.client import EARLIEST, INACTIVE_STATES, LATEST, KafkaClient
from kt.client.groups import CommittedOffset

TopicPartition = tuple[str, int]

#: every reset target; `offset`, `timestamp` and `shift` need a value
TARGETS = ("earliest", "latest", "current", "offset", "timestamp", "shift")
_NEEDS_VALUE = frozenset({"offset", "timestamp", "shift"})


@dataclass(frozen=True, slots=True)
class ResetTarget:
    """Where a reset moves each partition: `kind` is one of TARGETS; `value` is the
    offset (`offset`), the time in ms since the epoch (`timestamp`: the first offset
    at or after it, else the log end) or the shift (`shift`: added to the committed
    offset, or to the log end when nothing is committed)."""

    kind: str
    value: int | None = None

    def __post_init__(self) -> None:
        if self.kind not in TARGETS:
            raise ValueError(f"reset target must be one of {', '.join(TARGETS)}, not {self.kind!r}")
        if self.kind in _NEEDS_VALUE and self.value is None:
            raise ValueError(f"a reset to {self.kind} needs a value")

    def new_offset(self, current: int, start: int, end: int, at_time: int = -1) -> int:
        """The offset this target gives a partition whose committed offset is
        `current` (-1: none) and whose log spans `start`..`end`; `at_time` is the
        first offset at or after the target's time (-1: none), for `timestamp`."""
        if self.kind == "earliest":
            new = start
        elif self.kind == "latest":
            new = end
        elif self.kind == "current":
            new = current if current >= 0 else end
        elif self.kind == "offset":
            assert self.value is not None
            new = self.value
        elif self.kind == "timestamp":
            new = at_time if at_time >= 0 else end
        else:
            assert self.value is not None
            new = (current if current >= 0 else end) + self.value
        return min(max(new, start), end)


@dataclass(frozen=True, slots=True)
class ResetPlan:
    """What a reset would commit: the group, its state and member count, and per
    partition the committed offset (-1 none) and the new one."""

    group_id: str
    state: str
    members: int
    moves: tuple[tuple[str, int, int, int], ...]  # topic, partition, current, new

    @property
    def inactive(self) -> bool:
        """Whether Kafka lets the group's offsets be reset (no members)."""
        return is_inactive(self.state)

    def offsets(self) -> dict[TopicPartition, int]:
        """The offsets to commit."""
        return {(t, p): new for t, p, _, new in self.moves}


def is_inactive(state: str) -> bool:
    """Whether a group in `state` may have its offsets reset (Empty or Dead)."""
    return state in INACTIVE_STATES


async def plan_moves(
    client: KafkaClient,
    target: ResetTarget,
    partitions: Sequence[TopicPartition],
    committed: Mapping[TopicPartition, CommittedOffset],
) -> tuple[tuple[str, int, int, int], ...]:
    """(topic, partition, current, new) for each of `partitions`, in their order,
    asking the partitions' log start and end offsets (and the offsets at the target's
    time) of their leaders."""
    if not partitions:
        return ()
    tps = list(partitions)
    lookups = [client.list_offsets(tps, EARLIEST), client.list_offsets(tps, LATEST)]
    if target.kind == "timestamp":
        assert target.value is not None
        lookups.append(client.list_offsets(tps, target.value))
    got = await asyncio.gather(*lookups)
    starts, ends = got[0], got[1]
    moves = []
    for tp in tps:
        cur = committed[tp].offset if tp in committed else -1
        at_time = got[2][tp][0] if target.kind == "timestamp" else -1
        new = target.new_offset(cur, starts[tp][0], ends[tp][0], at_time)
        moves.append((tp[0], tp[1], cur, new))
    return tuple(moves)
