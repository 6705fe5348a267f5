"""Asking transaction coordinators whether partitions are in a transaction (KIP-890
part 1): the partition leader's side, Kafka's AddPartitionsToTxnManager.

A produce whose transactional batches open a transaction on some partitions asks
`TxnVerifier.verify` about them; the answer is the error of each partition that
is *not* verified (an empty map: all verified). Questions are batched per
coordinator broker into one verify-only AddPartitionsToTxn (v4+), one request in
flight per broker, the others queued meanwhile; a transactional id queued twice
keeps the newer question (the older one is answered NETWORK_EXCEPTION at the same
epoch, INVALID_PRODUCER_EPOCH at an older one, as Kafka). The coordinator is the
leader of the id's `__transaction_state` partition as the metadata cache knows it
(COORDINATOR_NOT_AVAILABLE while there is none). When that is this broker, the
request takes the loopback link: encoded, handled by the same AddPartitionsToTxn
handler and decoded, without a socket.

`produce_error` turns a coordinator's answer into the error a producer of the
given Produce version gets (Kafka 3.8's ReplicaManager.appendRecords).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from kt.broker.controller.channel import BrokerLink
from kt.broker.controller.links import LinkPool
from kt.broker.errors import (
    BrokerError,
    InvalidTxnStateError,
    NotEnoughReplicasError,
    broker_error,
)
from kt.client.core import KafkaError
from kt.protocol import ErrorCode, Struct, apis
from kt.protocol.errors import error_for_code

log = logging.getLogger("kt.broker.transactions.verifier")

E = ErrorCode
TopicPartitionT = tuple[str, int]
Unverified = dict[TopicPartitionT, ErrorCode]

#: Coordinator answers an older producer cannot act on: turned into
#: NOT_ENOUGH_REPLICAS, which every producer retries without a metadata refresh.
_RETRIABLE = frozenset({E.NETWORK_EXCEPTION, E.COORDINATOR_LOAD_IN_PROGRESS,
                        E.COORDINATOR_NOT_AVAILABLE, E.NOT_COORDINATOR,
                        E.CONCURRENT_TRANSACTIONS})  # fmt: skip
#: The first Produce version whose clients know TRANSACTION_ABORTABLE.
ABORTABLE_PRODUCE_VERSION = 11


def produce_error(code: ErrorCode, produce_version: int) -> BrokerError:
    """The typed error a producer gets for a partition its coordinator did not
    verify; the custom messages are Kafka's (the others carry none)."""
    if code == E.TRANSACTION_ABORTABLE and produce_version < ABORTABLE_PRODUCE_VERSION:
        code = E.INVALID_TXN_STATE
    if code == E.INVALID_TXN_STATE:
        return InvalidTxnStateError("Partition was not added to the transaction")
    if code in _RETRIABLE:
        return NotEnoughReplicasError(
            "Unable to verify the partition has been added to the transaction. "
            f"Underlying error: {code.name}"
        )
    try:
        return broker_error(code, "")
    except ValueError:
        # A code no broker error names: the client sees UNKNOWN_SERVER_ERROR.
        log.warning("transaction verification answered %s", code.name)
        return BrokerError("")


@dataclass(slots=True)
class _Question:
    producer_id: int
    epoch: int
    partitions: list[TopicPartitionT]
    answer: asyncio.Future[Unverified]


def _answer(q: _Question, unverified: Unverified) -> None:
    if not q.answer.done():
        q.answer.set_result(unverified)


class TxnVerifier:
    """Batches verify-only AddPartitionsToTxn requests to coordinator brokers."""

    def __init__(
        self,
        coordinator_of: Callable[[str], int | None],
        link_for: Callable[[int], BrokerLink],
        *,
        timeout_s: float = 30.0,
    ) -> None:
        self._coordinator_of = coordinator_of
        self.timeout_s = timeout_s
        self._links = LinkPool(link_for)
        # Broker id -> transactional id -> the question waiting for the next request.
        self._queued: dict[int, dict[str, _Question]] = {}
        self._senders: dict[int, asyncio.Task[None]] = {}

    async def verify(
        self,
        transactional_id: str,
        producer_id: int,
        epoch: int,
        partitions: Iterable[TopicPartitionT],
    ) -> Unverified:
        """The partitions the coordinator did not verify, each with its answer."""
        wanted = list(dict.fromkeys(partitions))
        node = self._coordinator_of(transactional_id)
        if node is None:
            # No `__transaction_state` (or no live leader for the id's partition):
            # the transaction cannot have been started.
            return dict.fromkeys(wanted, E.COORDINATOR_NOT_AVAILABLE)
        queue = self._queued.setdefault(node, {})
        old = queue.get(transactional_id)
        if old is not None:
            if old.epoch > epoch:
                return dict.fromkeys(wanted, E.INVALID_PRODUCER_EPOCH)
            error = E.INVALID_PRODUCER_EPOCH if old.epoch < epoch else E.NETWORK_EXCEPTION
            _answer(old, dict.fromkeys(old.partitions, error))
        q = _Question(producer_id, epoch, wanted, asyncio.get_running_loop().create_future())
        queue[transactional_id] = q
        sender = self._senders.get(node)
        if sender is None or sender.done():
            self._senders[node] = asyncio.get_running_loop().create_task(self._drain(node))
        return await q.answer

    async def _drain(self, node: int) -> None:
        # One request in flight per broker; what queued meanwhile goes in the next.
        while self._queued.get(node):
            batch = self._queued.pop(node)
            try:
                answers = await self._send(node, batch)
            except asyncio.CancelledError:
                for q in batch.values():
                    _answer(q, dict.fromkeys(q.partitions, E.NETWORK_EXCEPTION))
                raise
            for tid, q in batch.items():
                # An id the answer leaves out was not verified.
                missing = dict.fromkeys(q.partitions, E.NETWORK_EXCEPTION)
                _answer(q, answers.get(tid, missing))

    async def _send(self, node: int, batch: dict[str, _Question]) -> dict[str, Unverified]:
        body = {"transactions": [_transaction(tid, q) for tid, q in batch.items()]}
        link = self._links.get(node)
        try:
            response = await asyncio.wait_for(link.send(apis.ADD_PARTITIONS_TO_TXN, body),
                                              self.timeout_s)  # fmt: skip
        except KafkaError as exc:
            if exc.code == E.UNSUPPORTED_VERSION:
                # A coordinator that cannot verify: go on unverified, as Kafka does.
                log.warning("broker %d cannot verify transactions: %s", node, exc)
                return {tid: {} for tid in batch}
            await self._links.drop(node)
            return _all(batch, E.NETWORK_EXCEPTION)
        except Exception as exc:
            # Disconnected or timed out: retriable for the producer.
            log.warning("verify-only AddPartitionsToTxn to broker %d failed: %r", node, exc)
            await self._links.drop(node)
            return _all(batch, E.NETWORK_EXCEPTION)
        return _read_response(response, batch)

    async def close(self) -> None:
        """Stop sending (waiting questions are answered NETWORK_EXCEPTION) and close
        every connection."""
        tasks = list(self._senders.values())
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        self._senders.clear()
        for queue in self._queued.values():
            for q in queue.values():
                _answer(q, dict.fromkeys(q.partitions, E.NETWORK_EXCEPTION))
        self._queued.clear()
        await self._links.close()


def _transaction(tid: str, q: _Question) -> dict[str, Any]:
    by_topic: dict[str, list[int]] = {}
    for topic, p in q.partitions:
        by_topic.setdefault(topic, []).append(p)
    return {"transactional_id": tid, "producer_id": q.producer_id, "producer_epoch": q.epoch,
            "verify_only": True,
            "topics": [{"name": t, "partitions": ps} for t, ps in by_topic.items()]}  # fmt: skip


def _all(batch: dict[str, _Question], error: ErrorCode) -> dict[str, Unverified]:
    return {tid: dict.fromkeys(q.partitions, error) for tid, q in batch.items()}


def _read_response(response: Struct, batch: dict[str, _Question]) -> dict[str, Unverified]:
    """Each transaction's unverified partitions (Kafka's AddPartitionsToTxnHandler)."""
    if response.error_code != E.NONE:
        # The producer must not see CLUSTER_AUTHORIZATION_FAILED: the verification
        # simply did not happen.
        code = error_for_code(response.error_code)
        return _all(batch, E.INVALID_TXN_STATE if code == E.CLUSTER_AUTHORIZATION_FAILED else code)
    out: dict[str, Unverified] = {}
    for txn in response.results_by_transaction:
        unverified: Unverified = {}
        for topic in txn.topic_results:
            for p in topic.results_by_partition:
                code = error_for_code(p.partition_error_code)
                if code == E.NONE:
                    continue
                # Producers expect INVALID_PRODUCER_EPOCH here, not PRODUCER_FENCED.
                unverified[(topic.name, p.partition_index)] = (
                    E.INVALID_PRODUCER_EPOCH if code == E.PRODUCER_FENCED else code
                )
        out[txn.transactional_id] = unverified
    return out
