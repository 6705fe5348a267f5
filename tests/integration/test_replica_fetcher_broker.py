"""Replication between real `kt broker` processes: a follower's log is the leader's,
byte for byte.

Two brokers and a real ZooKeeper; a topic with replication factor 2 gets batches
(some compressed) with acks=all, so they are on both replicas when acknowledged.
After a clean stop the follower's segment file equals the leader's: the fetcher
appended the leader's batches as they were (offsets, epochs, CRCs), as Kafka's
followers do.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest

from kt.client import Codec, KafkaClient, NewTopic, RecordSpec
from kt.tools.local_cluster import LocalCluster

pytestmark = [pytest.mark.integration, pytest.mark.cluster]


def test_follower_log_is_byte_identical_to_the_leader(tmp_path: Path) -> None:
    c = LocalCluster.create(tmp_path / "c", 2, overrides={"zookeeper.session.timeout.ms": "6000"})
    c.start(register_timeout=15.0)
    try:
        leader = asyncio.run(_produce(c.bootstrap_servers))
    finally:
        c.stop(timeout=30.0)
    logs = {b.broker_id: b.data_dir / "rep-0" / "00000000000000000000.log" for b in c.brokers}
    follower = next(b for b in logs if b != leader)
    assert logs[leader].stat().st_size > 0
    assert logs[follower].read_bytes() == logs[leader].read_bytes()


async def _produce(bootstrap: str) -> int:
    """Create rep (RF 2), produce 5 batches with acks=all; the leader's id."""
    async with KafkaClient(bootstrap) as client:
        errors = await client.create_topics(
            [NewTopic("rep", 1, 2, configs={"min.insync.replicas": "2"})]
        )
        assert errors == {"rep": None}
        deadline = time.monotonic() + 30
        while True:
            md = await client.fetch_topic_metadata(["rep"])
            part = md["rep"].partitions.get(0)
            if part is not None and part.leader >= 0 and len(part.isr) == 2:
                break
            assert time.monotonic() < deadline, "no leader with a full ISR"
            await asyncio.sleep(0.2)
        for i in range(5):
            recs = [RecordSpec(b"k%d" % j, b"value-%d-%d" % (i, j)) for j in range(4)]
            codec = Codec.GZIP if i % 2 else Codec.NONE
            await client.produce("rep", 0, recs, acks=-1, codec=codec)
        return int(part.leader)
