"""A replica fetcher following a real `kt broker` over the wire (BrokerEndpoint).

The broker runs alone (it leads the partition); the test plays broker 2: a local
follower Partition in a temp dir fetches with Fetch as a replica (v12+, replica id
or ReplicaState, topic ids) and ends up with the broker's segment bytes exactly.
ListOffsets gives the leader's log start and end.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from replication_helpers import log_bytes, new_partition, state

from kt.broker.replication import BrokerEndpoint, FetcherConfig, ReplicaFetcher
from kt.client import Codec, KafkaClient, RecordSpec
from kt.storage.checkpoint import TopicPartition

pytestmark = pytest.mark.integration


def test_follower_copies_a_real_broker_log(tmp_path: Path) -> None:
    from broker_harness import BrokerProcess, free_port

    broker = BrokerProcess(tmp_path / "leader", free_port()).start()
    try:
        followed = asyncio.run(_follow(broker.bootstrap, broker.port, tmp_path))
        segment = tmp_path / "leader" / "rep-0" / "00000000000000000000.log"
        assert followed == segment.read_bytes()
    finally:
        broker.kill()


async def _follow(bootstrap: str, port: int, tmp_path: Path) -> bytes:
    """Produce 5 batches (some compressed), follow them as broker 2; our log's bytes."""
    async with KafkaClient(bootstrap) as client:
        for i in range(5):
            recs = [RecordSpec(b"k%d" % j, b"value-%d-%d" % (i, j)) for j in range(4)]
            await client.produce("rep", 0, recs, codec=Codec.GZIP if i % 2 else Codec.NONE)
        info = await client.topic("rep", refresh=True)
        meta = info.partitions[0]
    follower = new_partition(tmp_path / "follower", 2, tp=TopicPartition("rep", 0))
    follower.topic_id = info.topic_id.bytes
    assert follower.make_follower(state(meta.leader, meta.leader_epoch, [meta.leader],
                                        [meta.leader, 2]))  # fmt: skip
    endpoint = BrokerEndpoint(meta.leader, "127.0.0.1", port, local_broker_id=2)
    fetcher = ReplicaFetcher(meta.leader, endpoint, 2, FetcherConfig(max_bytes=200, wait_max_ms=50))
    fetcher.add_partitions([follower])
    for _ in range(100):
        await fetcher.fetch_once()
        if follower.log_end_offset == 20 and follower.high_watermark == 20:
            break
    assert follower.log_end_offset == 20 and follower.high_watermark == 20
    tp = TopicPartition("rep", 0)
    assert await endpoint.earliest_offset(tp, meta.leader_epoch) == 0
    assert await endpoint.latest_offset(tp, meta.leader_epoch) == 20
    await fetcher.stop()
    return log_bytes(follower)
