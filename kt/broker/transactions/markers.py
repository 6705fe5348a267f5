"""Transaction markers: WriteTxnMarkers to every partition of a finished transaction.

Kafka's TransactionMarkerChannelManager. Once PrepareCommit/PrepareAbort is in the
log, the coordinator must get a COMMIT/ABORT marker written to each partition the
transaction touched, on whichever broker leads it now (this one too). A marker
that fails for a retriable reason (the leader moved, the broker is down, the
write timed out, not enough replicas) is sent again to the then current leader
until it is written; a partition whose topic is gone is dropped; an answer that
the coordinator is fenced (a newer coordinator epoch wrote markers for this
producer) stops the attempt, as does the coordinator losing the partition.

How a request reaches a broker is a `MarkerSender` (real connections in the
broker, a fake in unit tests).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from kt.protocol import ErrorCode

log = logging.getLogger("kt.broker.transactions")

E = ErrorCode

TopicPartitionT = tuple[str, int]

#: The leader is unknown for now (no leader, or the broker is not alive): retry.
NO_LEADER = -1

# Kafka's TransactionMarkerRequestCompletionHandler: errors that are retried.
RETRIABLE = frozenset({
    E.UNKNOWN_TOPIC_OR_PARTITION, E.NOT_LEADER_OR_FOLLOWER, E.NOT_ENOUGH_REPLICAS,
    E.NOT_ENOUGH_REPLICAS_AFTER_APPEND, E.REQUEST_TIMED_OUT, E.KAFKA_STORAGE_ERROR,
    E.COORDINATOR_LOAD_IN_PROGRESS, E.NETWORK_EXCEPTION,
})  # fmt: skip
# The partition's producer state has seen a newer coordinator (or epoch): stop.
FENCED = frozenset({E.INVALID_PRODUCER_EPOCH, E.TRANSACTION_COORDINATOR_FENCED})
# The partition cannot hold markers; Kafka logs and drops it.
DROPPED = frozenset({E.UNSUPPORTED_FOR_MESSAGE_FORMAT, E.UNSUPPORTED_VERSION})


@dataclass(frozen=True, slots=True)
class TxnMarker:
    """One WriteTxnMarkers entry: a producer's transaction result for partitions."""

    producer_id: int
    producer_epoch: int
    committed: bool
    coordinator_epoch: int
    partitions: tuple[TopicPartitionT, ...]


class MarkerSender(Protocol):
    """Where markers go: leader lookup and one request to one broker."""

    def leader_of(self, topic: str, partition: int) -> int | None:
        """The partition's live leader, NO_LEADER while there is none, None when the
        partition does not exist (any more)."""
        ...

    async def send(self, broker_id: int, marker: TxnMarker) -> dict[TopicPartitionT, int]:
        """Send one marker request; the error code per partition. Raises OSError
        (ConnectionError, TimeoutError) when no answer came."""
        ...


class MarkersFenced(Exception):
    """A partition refused the markers as coming from a stale coordinator."""


async def write_markers(
    sender: MarkerSender,
    marker: TxnMarker,
    *,
    still_current: Callable[[], bool],
    backoff_s: float = 0.1,
) -> bool:
    """Write `marker` to every partition it names, retrying until each is written.

    Returns True when all are written (or dropped), False when `still_current()`
    turned false (the coordinator resigned or was re-elected); raises MarkersFenced
    when a partition answered that this coordinator is fenced."""
    remaining = set(marker.partitions)
    attempt = 0
    while remaining:
        if not still_current():
            return False
        by_leader: dict[int, list[TopicPartitionT]] = {}
        for tp in sorted(remaining):
            leader = sender.leader_of(*tp)
            if leader is None:
                log.info("%s-%d no longer exists: no marker for producer %d", tp[0], tp[1],
                         marker.producer_id)  # fmt: skip
                remaining.discard(tp)
            elif leader != NO_LEADER:
                by_leader.setdefault(leader, []).append(tp)
        sends = [
            _send_one(sender, broker, TxnMarker(marker.producer_id, marker.producer_epoch,
                      marker.committed, marker.coordinator_epoch, tuple(tps)))
            for broker, tps in by_leader.items()
        ]  # fmt: skip
        for answer in await asyncio.gather(*sends):
            for tp, code in answer.items():
                if code == E.NONE or code in DROPPED:
                    if code != E.NONE:
                        log.warning("%s-%d cannot take markers (%s): dropped", tp[0], tp[1],
                                    ErrorCode(code).name)  # fmt: skip
                    remaining.discard(tp)
                elif code in FENCED:
                    raise MarkersFenced(f"{tp[0]}-{tp[1]}: {ErrorCode(code).name}")
                elif code not in RETRIABLE:
                    log.warning("marker for producer %d on %s-%d failed: %s; retrying",
                                marker.producer_id, tp[0], tp[1], _name(code))  # fmt: skip
        if remaining:
            attempt += 1
            await asyncio.sleep(min(backoff_s * attempt, 1.0))
    return True


async def _send_one(
    sender: MarkerSender, broker: int, marker: TxnMarker
) -> dict[TopicPartitionT, int]:
    try:
        answer = await sender.send(broker, marker)
    except (TimeoutError, OSError) as exc:
        log.debug("markers to broker %d not answered: %r", broker, exc)
        return dict.fromkeys(marker.partitions, int(E.NETWORK_EXCEPTION))
    # A partition the answer leaves out was not written.
    return {tp: answer.get(tp, int(E.UNKNOWN_SERVER_ERROR)) for tp in marker.partitions}


def _name(code: int) -> str:
    try:
        return ErrorCode(code).name
    except ValueError:
        return str(code)
