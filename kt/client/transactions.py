"""Transaction administration over the wire, as Kafka's Admin client does it:
ListTransactions (every broker), DescribeTransactions (the id's coordinator),
DescribeProducers (the partition's leader, or a chosen broker) and aborting a
transaction by writing an ABORT marker to one partition (Admin.abortTransaction:
WriteTxnMarkers to the partition's leader). Functions over a connected client.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from kt.client.core import ClientCore, KafkaError, check
from kt.protocol import ErrorCode, Struct, apis

KEY_TYPE_TRANSACTION = 1


@dataclass(frozen=True, slots=True)
class TransactionListing:
    """One ListTransactions entry, with the broker (coordinator) that listed it."""

    transactional_id: str
    coordinator: int
    producer_id: int
    state: str


@dataclass(frozen=True, slots=True)
class TransactionDescription:
    """DescribeTransactions' view of one transactional id."""

    coordinator: int
    transactional_id: str
    producer_id: int
    producer_epoch: int
    state: str
    timeout_ms: int
    start_ms: int  # -1: no transaction running
    partitions: tuple[tuple[str, int], ...]


@dataclass(frozen=True, slots=True)
class ProducerState:
    """One active producer of a partition (DescribeProducers)."""

    producer_id: int
    producer_epoch: int
    last_sequence: int
    last_timestamp: int
    coordinator_epoch: int
    current_txn_start_offset: int  # -1: no open transaction


async def list_transactions(
    client: ClientCore,
    *,
    states: Iterable[str] = (),
    producer_ids: Iterable[int] = (),
    duration_ms: int = -1,
) -> list[TransactionListing]:
    """Every transaction every broker coordinates (filtered as ListTransactions
    filters); raises KafkaError when a broker refuses."""
    await client.refresh_metadata([])
    body = apis.LIST_TRANSACTIONS.request(
        state_filters=list(states), producer_id_filters=list(producer_ids),
        duration_filter=duration_ms,
    )  # fmt: skip
    out: list[TransactionListing] = []
    for node in sorted(client.metadata.brokers):

        async def attempt(node: int = node) -> Struct:
            # COORDINATOR_LOAD_IN_PROGRESS (a partition loading) is retried.
            resp = await client.send(apis.LIST_TRANSACTIONS, body, node)
            check(resp.error_code, f"ListTransactions on broker {node}")
            return resp

        resp = await client.retrying(attempt)
        out += [TransactionListing(t.transactional_id, node, t.producer_id, t.transaction_state)
                for t in resp.transaction_states]  # fmt: skip
    return out


async def describe_transaction(client: ClientCore, transactional_id: str) -> TransactionDescription:
    """The id's state at its coordinator; KafkaError TRANSACTIONAL_ID_NOT_FOUND if
    unknown."""
    body = apis.DESCRIBE_TRANSACTIONS.request(transactional_ids=[transactional_id])
    resp = await client.send_to_coordinator(
        transactional_id, apis.DESCRIBE_TRANSACTIONS, body,
        lambda r: int(r.transaction_states[0].error_code), key_type=KEY_TYPE_TRANSACTION,
    )  # fmt: skip
    s = resp.transaction_states[0]
    check(s.error_code, f"transactional id {transactional_id!r}")
    node = await client.coordinator(transactional_id, KEY_TYPE_TRANSACTION)
    parts = tuple(sorted((t.topic, p) for t in s.topics for p in t.partitions))
    return TransactionDescription(node, transactional_id, s.producer_id, s.producer_epoch,
                                  s.transaction_state, s.transaction_timeout_ms,
                                  s.transaction_start_time_ms, parts)  # fmt: skip


async def describe_producers(
    client: ClientCore, partitions: Iterable[tuple[str, int]], broker_id: int | None = None
) -> dict[tuple[str, int], list[ProducerState]]:
    """Active producers of each partition, from its leader (or `broker_id`'s
    replica); raises KafkaError for a partition that fails."""
    by_node: dict[int, list[tuple[str, int]]] = {}
    for topic, p in partitions:
        node = broker_id if broker_id is not None else await client.leader_for(topic, p)
        by_node.setdefault(node, []).append((topic, p))
    out: dict[tuple[str, int], list[ProducerState]] = {}
    for node, tps in by_node.items():
        topics: dict[str, list[int]] = {}
        for topic, p in tps:
            topics.setdefault(topic, []).append(p)
        body = apis.DESCRIBE_PRODUCERS.request(
            topics=[{"name": t, "partition_indexes": ps} for t, ps in topics.items()]
        )
        resp = await client.send(apis.DESCRIBE_PRODUCERS, body, node)
        for t in resp.topics:
            for p in t.partitions:
                check(p.error_code, f"partition {t.name}-{p.partition_index}", p.error_message)
                out[(t.name, p.partition_index)] = [
                    ProducerState(a.producer_id, a.producer_epoch, a.last_sequence,
                                  a.last_timestamp, a.coordinator_epoch,
                                  a.current_txn_start_offset)
                    for a in p.active_producers
                ]  # fmt: skip
    return out


async def abort_transaction(
    client: ClientCore,
    topic: str,
    partition: int,
    producer_id: int,
    producer_epoch: int,
    coordinator_epoch: int,
) -> None:
    """Write an ABORT marker for the producer's open transaction on one partition
    (Kafka's Admin.abortTransaction); raises KafkaError when the leader refuses."""
    node = await client.leader_for(topic, partition)
    body = apis.WRITE_TXN_MARKERS.request(markers=[{
        "producer_id": producer_id, "producer_epoch": producer_epoch,
        "transaction_result": False, "coordinator_epoch": coordinator_epoch,
        "topics": [{"name": topic, "partition_indexes": [partition]}],
    }])  # fmt: skip
    resp = await client.send(apis.WRITE_TXN_MARKERS, body, node)
    for m in resp.markers:
        for t in m.topics:
            for p in t.partitions:
                check(p.error_code, f"abort on {t.name}-{p.partition_index}")
    if not resp.markers:
        raise KafkaError(ErrorCode.UNKNOWN_SERVER_ERROR, f"abort on {topic}-{partition}")
