"""The transaction coordinator on the shared three-broker cluster: a transaction's
coordinator or one of its partitions' leaders is killed (SIGKILL) mid-transaction,
and the transaction still completes or aborts as a whole: a new coordinator loads
`__transaction_state` (replicated, factor 3), markers follow the partitions' new
leaders, and READ_COMMITTED consumers see all of the transaction's records or none.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest
from cluster_harness import (
    SESSION_TIMEOUT_S,
    consume_all,
    create_topic,
    live_bootstrap,
    wait_for,
    wait_metadata_leader,
)

from kt.client import KafkaClient
from kt.client.transactions import describe_transaction
from kt.tools.local_cluster import LocalCluster

pytestmark = [pytest.mark.integration, pytest.mark.cluster]

ck = pytest.importorskip("confluent_kafka")
PARTITIONS = 3


def coordinator_of(cluster: LocalCluster, txn_id: str) -> Any:
    async def ask() -> Any:
        async with KafkaClient(live_bootstrap(cluster)) as client:
            return await describe_transaction(client, txn_id)

    return asyncio.run(ask())


def producer(cluster: LocalCluster, txn_id: str) -> Any:
    p = ck.Producer({
        "bootstrap.servers": live_bootstrap(cluster), "transactional.id": txn_id,
        "transaction.timeout.ms": 60000, "topic.metadata.refresh.interval.ms": 1000,
    })  # fmt: skip
    p.init_transactions(60)
    return p


def end_with_retries(p: Any, commit: bool, deadline_s: float = 90.0) -> None:
    """commit/abort_transaction, retrying what librdkafka calls retriable (the
    coordinator moving), within a bound."""
    deadline = time.monotonic() + deadline_s
    while True:
        try:
            if commit:
                p.commit_transaction(30)
            else:
                p.abort_transaction(30)
            return
        except ck.KafkaException as exc:
            err = exc.args[0]
            if not err.retriable() or time.monotonic() > deadline:
                raise


def values(cluster: LocalCluster, topic: str) -> list[bytes]:
    out: list[bytes] = []
    for p in range(PARTITIONS):
        out += [v for _, _, v in consume_all(live_bootstrap(cluster), topic, p, 0, timeout=30)
                if v is not None]  # fmt: skip
    return sorted(out)


def run_transaction(cluster: LocalCluster, topic: str, txn_id: str, victim: str,
                    commit: bool) -> list[bytes]:  # fmt: skip
    create_topic(cluster, topic, "--partitions", str(PARTITIONS), "--replication-factor", "3")
    p = producer(cluster, txn_id)
    p.begin_transaction()
    for i in range(PARTITIONS):
        p.produce(topic, value=b"before-%d" % i, partition=i)
    p.commit_transaction(60)
    coord = coordinator_of(cluster, txn_id).coordinator
    p.begin_transaction()
    sent = [b"txn-%d-%d" % (i, n) for i in range(PARTITIONS) for n in range(3)]
    for v in sent:
        p.produce(topic, value=v, partition=int(v.split(b"-")[1]))
    p.flush(60)
    if victim == "coordinator":
        killed = coord
    else:
        # A partition leader that is not the coordinator.
        leaders = {wait_metadata_leader(cluster, topic, i) for i in range(PARTITIONS)}
        killed = next(iter(sorted(leaders - {coord}) or sorted(leaders)))
    cluster.stop_broker(killed, kill=True)
    end_with_retries(p, commit)
    # The coordinator's view settles: CompleteCommit / CompleteAbort (another broker's
    # view once the old coordinator is gone).
    final = "CompleteCommit" if commit else "CompleteAbort"
    wait_for(lambda: coordinator_of(cluster, txn_id).state == final,
             f"{txn_id} to reach {final}", timeout=SESSION_TIMEOUT_S * 10)  # fmt: skip
    if victim == "coordinator":
        assert coordinator_of(cluster, txn_id).coordinator != killed
    got = values(cluster, topic)
    before = [b"before-%d" % i for i in range(PARTITIONS)]
    expected = sorted(before + (sent if commit else []))
    assert got == expected, f"killed broker {killed} (coordinator {coord})"
    p.flush(10)
    return got


def test_coordinator_killed_mid_transaction_commits_it_whole(cluster: LocalCluster) -> None:
    run_transaction(cluster, "ctx-coord-commit", "ctx-coord-commit", "coordinator", True)


def test_coordinator_killed_mid_transaction_aborts_it_whole(cluster: LocalCluster) -> None:
    run_transaction(cluster, "ctx-coord-abort", "ctx-coord-abort", "coordinator", False)


def test_partition_leader_killed_mid_transaction_commits_it_whole(cluster: LocalCluster) -> None:
    run_transaction(cluster, "ctx-leader-commit", "ctx-leader-commit", "leader", True)
