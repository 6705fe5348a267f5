"""KIP-890 part 1 on the shared three-broker cluster, with the transaction
coordinator on another broker than the partition leader (the leader asks it over
the inter-broker link): confluent-kafka's transactional producer commits and
aborts; a transactional Produce forged with kt's client for a partition the
producer never added is refused with INVALID_TXN_STATE and written nowhere; with
the cluster-wide dynamic default set to false, the same batch is appended.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from cluster_harness import create_topic, live_bootstrap, wait_for, wait_metadata_leader
from confluent_kafka import Producer
from txn_helpers import (
    CoordinatedTxn,
    consume_confluent,
    end_txn,
    list_offset,
    set_verification_default,
)

from kt.client import KafkaClient
from kt.protocol import ErrorCode
from kt.tools.local_cluster import LocalCluster

pytestmark = [pytest.mark.integration, pytest.mark.cluster, pytest.mark.timeout(300)]

TOPIC = "kip890-verified"


async def remote_coordinated_id(client: KafkaClient, prefix: str, not_on: int) -> tuple[str, int]:
    """A transactional id whose coordinator is not broker `not_on`."""
    for i in range(200):
        tid = f"{prefix}-{i}"
        node = await client.coordinator(tid, 1)
        if node != not_on:
            return tid, node
    raise AssertionError(f"every id is coordinated by broker {not_on}")


def test_verification_across_brokers(cluster: LocalCluster) -> None:
    create_topic(cluster, TOPIC, "--partitions", "1", "--replication-factor", "3")
    leader = wait_metadata_leader(cluster, TOPIC, 0)
    bootstrap = live_bootstrap(cluster)
    ids = [b.broker_id for b in cluster.brokers]

    async def ids_elsewhere() -> tuple[str, str]:
        async with KafkaClient(bootstrap) as client:
            client_tid, node1 = await remote_coordinated_id(client, "kip890-client", leader)
            raw_tid, node2 = await remote_coordinated_id(client, "kip890-raw", leader)
            assert leader not in (node1, node2)
            return client_tid, raw_tid

    client_tid, raw_tid = asyncio.run(ids_elsewhere())

    # (a) A real transactional client: its first batch of each transaction is
    # verified with the remote coordinator, after its AddPartitionsToTxn.
    p = Producer({"bootstrap.servers": bootstrap, "transactional.id": client_tid})
    p.init_transactions(60)
    for commit, value in ((True, b"c1"), (False, b"a1"), (True, b"c2")):
        p.begin_transaction()
        p.produce(TOPIC, value=value, partition=0)
        if commit:
            p.commit_transaction(60)
        else:
            p.abort_transaction(60)
    assert consume_confluent(bootstrap, TOPIC, "read_committed", 2) == [b"c1", b"c2"]

    async def forged() -> dict[str, Any]:
        out: dict[str, Any] = {}
        async with KafkaClient(bootstrap) as client:
            txn = CoordinatedTxn(client, raw_tid, TOPIC)
            await txn.init()
            out["pid"], out["epoch"] = txn.producer_id, txn.epoch
            before = await list_offset(client, TOPIC, 0, committed=False)
            # (b) Never added to the transaction: refused, nothing written.
            out["refused"] = await txn.produce(0, [b"stray"])
            out["after_refusal"] = await list_offset(client, TOPIC, 0, committed=False)
            out["before"] = before
            # (c) Verification off cluster-wide: appended as before.
            await set_verification_default(client, ids, False)
            try:
                out["appended"] = await txn.produce(0, [b"stray"])
                out["lso"] = await list_offset(client, TOPIC, 0, committed=True)
                out["hw"] = await list_offset(client, TOPIC, 0, committed=False)
            finally:
                await set_verification_default(client, ids, None)
        return out

    got = asyncio.run(forged())
    assert got["refused"].error_code == ErrorCode.INVALID_TXN_STATE, got["refused"]
    assert got["refused"].error_message == "Partition was not added to the transaction"
    assert got["after_refusal"] == got["before"]
    assert got["appended"].error_code == ErrorCode.NONE, got["appended"]
    assert got["appended"].base_offset == got["before"]
    # The stray batch opened a transaction its coordinator does not know about.
    assert got["hw"] == got["before"] + 1 and got["lso"] == got["before"]

    async def replicas_end() -> set[int]:
        async with KafkaClient(bootstrap) as client:
            return {await list_offset(client, TOPIC, 0, committed=False, node=n) for n in ids}

    # Every replica ends up with the same log: the refused batch went nowhere.
    wait_for(lambda: asyncio.run(replicas_end()) == {got["hw"]} or None,
             "every replica at the leader's high watermark")  # fmt: skip

    async def abort_stray() -> None:
        # End the stray transaction (its coordinator never will) so the shared
        # cluster keeps no open transaction.
        async with KafkaClient(bootstrap) as client:
            await end_txn(client, TOPIC, got["pid"], got["epoch"], [0], commit=False)
            assert await list_offset(client, TOPIC, 0, committed=True) == got["hw"] + 1

    asyncio.run(abort_stray())
