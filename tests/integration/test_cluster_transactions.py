"""Transactions' partition side on the shared three-broker cluster: markers written by
WriteTxnMarkers replicate, the followers rebuild the leader's `.txnindex` and last
stable offset from the replicated batches, and after the leader is killed the new
leader still holds the open transaction (the LSO stays at its first offset), ends
it when told, and READ_COMMITTED consumers read exactly the committed records.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from cluster_harness import (
    SESSION_TIMEOUT_S,
    create_topic,
    live_bootstrap,
    wait_for,
    wait_metadata_leader,
)
from txn_helpers import (
    HandTxnProducer,
    consume_confluent,
    list_offset,
    plain,
    set_verification_default,
)

from kt.client import KafkaClient
from kt.storage.txn_index import AbortedTxn, read_txn_index
from kt.tools.local_cluster import LocalCluster

pytestmark = [pytest.mark.integration, pytest.mark.cluster]

TOPIC = "txn-replicated"


def txn_entries(cluster: LocalCluster, broker_id: int) -> list[AbortedTxn]:
    d = cluster.broker(broker_id).data_dir / f"{TOPIC}-0"
    return [t for f in sorted(d.glob("*.txnindex")) for t in read_txn_index(Path(f))]


def lsos(cluster: LocalCluster, ids: list[int]) -> dict[int, int]:
    async def ask() -> dict[int, int]:
        async with KafkaClient(live_bootstrap(cluster)) as client:
            return {n: await list_offset(client, TOPIC, 0, True, node=n) for n in ids}

    return asyncio.run(ask())


def verification(cluster: LocalCluster, enabled: bool | None) -> None:
    async def run() -> None:
        async with KafkaClient(live_bootstrap(cluster)) as client:
            ids = [b.broker_id for b in cluster.brokers]
            await set_verification_default(client, ids, enabled)

    asyncio.run(run())


def test_markers_replicate_and_survive_a_leader_failover(cluster: LocalCluster) -> None:
    # The transactions are written by hand without a coordinator: verification
    # (KIP-890) off, cluster-wide, for this test.
    verification(cluster, False)
    try:
        markers_replicate_and_survive_a_leader_failover(cluster)
    finally:
        from cluster_harness import heal

        heal(cluster)
        verification(cluster, None)


def markers_replicate_and_survive_a_leader_failover(cluster: LocalCluster) -> None:
    create_topic(cluster, TOPIC, "--partitions", "1", "--replication-factor", "3")
    pids: dict[str, int] = {}

    async def before_failover() -> None:
        async with KafkaClient(live_bootstrap(cluster)) as client:
            a, b, c = (HandTxnProducer(client, TOPIC) for _ in range(3))
            for name, p in (("A", a), ("B", b), ("C", c)):
                await p.init()
                pids[name] = p.producer_id
            await plain(client, TOPIC, 0, [b"p0"])  # 0
            await a.send(0, [b"a1", b"a2"])  # 1-2
            await b.send(0, [b"b1"])  # 3
            await b.end([0], commit=False)  # 4
            await a.end([0], commit=True)  # 5
            await c.send(0, [b"c1"])  # 6, left open
            await plain(client, TOPIC, 0, [b"p1"])  # 7

    asyncio.run(before_failover())
    expected = [AbortedTxn(pids["B"], 3, 4, 1)]
    ids = [b.broker_id for b in cluster.brokers]
    # Every replica: the same .txnindex, and the LSO at C's first offset.
    wait_for(
        lambda: all(txn_entries(cluster, n) == expected for n in ids) or None,
        "every replica's .txnindex to hold B's aborted transaction",
    )
    wait_for(lambda: set(lsos(cluster, ids).values()) == {6} or None, "LSO 6 on every replica")

    leader = wait_metadata_leader(cluster, TOPIC, 0)
    cluster.stop_broker(leader, kill=True)
    new = wait_metadata_leader(cluster, TOPIC, 0, not_in=[leader], timeout=SESSION_TIMEOUT_S + 25)
    # The new leader rebuilt C's open transaction from the replicated batches.
    assert lsos(cluster, [new]) == {new: 6}

    async def after_failover() -> None:
        async with KafkaClient(live_bootstrap(cluster)) as client:
            c = HandTxnProducer(client, TOPIC, producer_id=pids["C"])
            await c.end([0], commit=True)  # 8
            d = HandTxnProducer(client, TOPIC)
            await d.init()
            await d.send(0, [b"d1"])  # 9
            await d.end([0], commit=False)  # 10

    asyncio.run(after_failover())
    running = [n for n in ids if n != leader]
    wait_for(lambda: set(lsos(cluster, running).values()) == {11} or None, "LSO 11")
    committed = [b"p0", b"a1", b"a2", b"c1", b"p1"]
    got = consume_confluent(live_bootstrap(cluster), TOPIC, "read_committed", len(committed))
    assert got == committed
    everything = [b"p0", b"a1", b"a2", b"b1", b"c1", b"p1", b"d1"]
    got = consume_confluent(live_bootstrap(cluster), TOPIC, "read_uncommitted", len(everything))
    assert got == everything
