"""Transactions driven by hand with kt's client, for the broker's data-plane tests:
transactional v2 batches (producer id from InitProducerId without a transactional
id), ended with WriteTxnMarkers sent to the partition's leader the way a
transaction coordinator does; a transactional id driven through its real
coordinator (`CoordinatedTxn`) for forged produce requests; and readers that check
what consumers got."""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field
from typing import Any

from kt.client import KafkaClient
from kt.protocol import ErrorCode, apis
from kt.storage import record_batch as v2

TXN_ID = "kt-data-plane-test"


@dataclass
class HandTxnProducer:
    """One producer id writing transactional batches to partitions of a topic."""

    client: KafkaClient
    topic: str
    producer_id: int = -1
    epoch: int = 0
    sequences: dict[int, int] = field(default_factory=dict)

    async def init(self) -> None:
        """Get a producer id (InitProducerId without a transactional id)."""
        resp = await self.client.send(
            apis.INIT_PRODUCER_ID,
            apis.INIT_PRODUCER_ID.request(transactional_id=None, transaction_timeout_ms=60000),
        )
        assert resp.error_code == ErrorCode.NONE, resp
        self.producer_id, self.epoch = resp.producer_id, resp.producer_epoch

    async def send(self, partition: int, values: list[bytes]) -> int:
        """A transactional batch of `values`; returns its base offset."""
        seq = self.sequences.get(partition, 0)
        now = int(time.time() * 1000)
        data = v2.build_batch(
            [v2.RecordSpec(b"k", v, timestamp=now) for v in values],
            producer_id=self.producer_id,
            producer_epoch=self.epoch,
            base_sequence=seq,
            is_transactional=True,
        )
        self.sequences[partition] = seq + len(values)
        return await produce_raw(self.client, self.topic, partition, data, TXN_ID)

    async def end(self, partitions: list[int], commit: bool, coordinator_epoch: int = 0) -> None:
        """WriteTxnMarkers to each partition's leader; asserts every one succeeded."""
        await end_txn(
            self.client, self.topic, self.producer_id, self.epoch, partitions, commit,
            coordinator_epoch,
        )  # fmt: skip


async def produce_raw(
    client: KafkaClient, topic: str, partition: int, data: bytes, txn_id: str | None = None
) -> int:
    """One batch, acks=all, to the partition's leader; returns its base offset."""
    leader = (await client.topic(topic, refresh=True)).partitions[partition].leader
    resp = await client.send(
        apis.PRODUCE,
        apis.PRODUCE.request(
            transactional_id=txn_id,
            acks=-1,
            timeout_ms=30000,
            topic_data=[{"name": topic, "partition_data": [{"index": partition, "records": data}]}],
        ),
        leader,
    )
    p = resp.responses[0].partition_responses[0]
    assert p.error_code == ErrorCode.NONE, p
    return int(p.base_offset)


async def plain(client: KafkaClient, topic: str, partition: int, values: list[bytes]) -> int:
    """A non-transactional batch; returns its base offset."""
    now = int(time.time() * 1000)
    data = v2.build_batch([v2.RecordSpec(b"k", v, timestamp=now) for v in values])
    return await produce_raw(client, topic, partition, data)


async def end_txn(
    client: KafkaClient,
    topic: str,
    producer_id: int,
    epoch: int,
    partitions: list[int],
    commit: bool,
    coordinator_epoch: int = 0,
) -> None:
    """WriteTxnMarkers (v1) to each partition's leader, as a coordinator sends them."""
    meta = await client.topic(topic, refresh=True)
    by_leader: dict[int, list[int]] = {}
    for p in partitions:
        by_leader.setdefault(meta.partitions[p].leader, []).append(p)
    for leader, parts in by_leader.items():
        resp = await client.send(
            apis.WRITE_TXN_MARKERS,
            apis.WRITE_TXN_MARKERS.request(
                markers=[
                    {
                        "producer_id": producer_id,
                        "producer_epoch": epoch,
                        "transaction_result": commit,
                        "coordinator_epoch": coordinator_epoch,
                        "topics": [{"name": topic, "partition_indexes": parts}],
                    }
                ]
            ),
            leader,
        )
        codes = [p.error_code for m in resp.markers for t in m.topics for p in t.partitions]
        assert codes == [ErrorCode.NONE] * len(parts), resp


async def list_offset(
    client: KafkaClient, topic: str, partition: int, committed: bool, node: int | None = None
) -> int:
    """ListOffsets LATEST at the given isolation level, from the leader or (as the
    debugging replica id -2, which may read a follower) from broker `node`."""
    leader = (await client.topic(topic, refresh=True)).partitions[partition].leader
    resp: Any = await client.send(
        apis.LIST_OFFSETS,
        apis.LIST_OFFSETS.request(
            replica_id=-1 if node is None else -2,
            isolation_level=1 if committed else 0,
            topics=[
                {"name": topic, "partitions": [{"partition_index": partition, "timestamp": -1}]}
            ],
        ),
        leader if node is None else node,
    )
    p = resp.topics[0].partitions[0]
    assert p.error_code == ErrorCode.NONE, p
    return int(p.offset)


def consume_confluent(bootstrap: str, topic: str, isolation: str, expect: int) -> list[bytes]:
    """Values read by a confluent-kafka (librdkafka) consumer from the beginning,
    until `expect` values came or nothing more comes."""
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"txn-{isolation}-{time.monotonic_ns()}",
            "isolation.level": isolation,
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
        }
    )
    try:
        c.assign([TopicPartition(topic, 0, 0)])
        got: list[bytes] = []
        idle_until = time.monotonic() + 15
        while len(got) < expect and time.monotonic() < idle_until:
            msg = c.poll(0.5)
            if msg is None:
                continue
            assert msg.error() is None, msg.error()
            got.append(msg.value())
            idle_until = time.monotonic() + 5
        # A little longer: anything beyond `expect` would be a wrong extra record.
        end = time.monotonic() + 1.5
        while time.monotonic() < end:
            msg = c.poll(0.3)
            if msg is not None and msg.error() is None:
                got.append(msg.value())
        return got
    finally:
        c.close()


def consume_kafka_python(bootstrap: str, topic: str, isolation: str, expect: int) -> list[bytes]:
    """Values read by a kafka-python consumer from the beginning (as above)."""
    from kafka import KafkaConsumer, TopicPartition

    c = KafkaConsumer(
        bootstrap_servers=bootstrap,
        isolation_level=isolation,
        enable_auto_commit=False,
        auto_offset_reset="earliest",
    )
    try:
        tp = TopicPartition(topic, 0)
        c.assign([tp])
        c.seek(tp, 0)
        got: list[bytes] = []
        idle_until = time.monotonic() + 15
        while len(got) < expect and time.monotonic() < idle_until:
            for records in c.poll(timeout_ms=500).values():
                got.extend(r.value for r in records)
                idle_until = time.monotonic() + 5
        end = time.monotonic() + 1.5
        while time.monotonic() < end:
            for records in c.poll(timeout_ms=300).values():
                got.extend(r.value for r in records)
        return got
    finally:
        c.close()


@dataclass
class CoordinatedTxn:
    """A transactional id driven by hand through its coordinator (FindCoordinator,
    InitProducerId, AddPartitionsToTxn, EndTxn) with kt's client, so tests can forge
    the Produce requests a buggy or late producer would send."""

    client: KafkaClient
    transactional_id: str
    topic: str
    producer_id: int = -1
    epoch: int = -1
    sequences: dict[int, int] = field(default_factory=dict)

    async def _to_coordinator(
        self, api: Any, body: Any, *, retry_on: set[int], version: int | None = None
    ) -> Any:
        deadline = time.monotonic() + 60
        while True:
            node = await self.client.coordinator(self.transactional_id, 1, refresh=True)
            resp = await self.client.send(api, body, node, version=version)
            if resp.error_code not in retry_on or time.monotonic() > deadline:
                return resp
            await asyncio.sleep(0.2)

    async def init(self) -> None:
        """A producer id and epoch for the transactional id."""
        resp = await self._to_coordinator(
            apis.INIT_PRODUCER_ID,
            apis.INIT_PRODUCER_ID.request(
                transactional_id=self.transactional_id, transaction_timeout_ms=60000
            ),
            retry_on={
                ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
                ErrorCode.NOT_COORDINATOR,
                ErrorCode.COORDINATOR_NOT_AVAILABLE,
                ErrorCode.CONCURRENT_TRANSACTIONS,
            },
        )
        assert resp.error_code == ErrorCode.NONE, resp
        self.producer_id, self.epoch = resp.producer_id, resp.producer_epoch
        self.sequences.clear()

    async def add(self, partitions: list[int]) -> None:
        """AddPartitionsToTxn (the client form, v3)."""
        resp = await self._to_coordinator(
            apis.ADD_PARTITIONS_TO_TXN,
            apis.ADD_PARTITIONS_TO_TXN.request(
                v3_and_below_transactional_id=self.transactional_id,
                v3_and_below_producer_id=self.producer_id,
                v3_and_below_producer_epoch=self.epoch,
                v3_and_below_topics=[{"name": self.topic, "partitions": partitions}],
            ),
            retry_on=set(),
            version=3,
        )
        codes = {
            r.partition_error_code
            for t in resp.results_by_topic_v3_and_below
            for r in t.results_by_partition
        }
        assert codes == {ErrorCode.NONE}, resp

    async def end(self, commit: bool) -> None:
        """EndTxn, then wait until the coordinator completed it (markers written)."""
        body = apis.END_TXN.request(
            transactional_id=self.transactional_id,
            producer_id=self.producer_id,
            producer_epoch=self.epoch,
            committed=commit,
        )
        resp = await self._to_coordinator(apis.END_TXN, body, retry_on=set())
        assert resp.error_code == ErrorCode.NONE, resp
        want = "CompleteCommit" if commit else "CompleteAbort"
        deadline = time.monotonic() + 30
        while True:
            node = await self.client.coordinator(self.transactional_id, 1)
            d = await self.client.send(
                apis.DESCRIBE_TRANSACTIONS,
                apis.DESCRIBE_TRANSACTIONS.request(transactional_ids=[self.transactional_id]),
                node,
            )
            state = d.transaction_states[0].transaction_state
            if state == want:
                return
            assert time.monotonic() < deadline, f"transaction still {state}"
            await asyncio.sleep(0.1)

    async def produce(self, partition: int, values: list[bytes], version: int | None = None) -> Any:
        """One transactional batch with the next sequence to the partition's leader,
        acks=all; the partition's response entry, whatever it says."""
        seq = self.sequences.get(partition, 0)
        now = int(time.time() * 1000)
        data = v2.build_batch(
            [v2.RecordSpec(b"k", v, timestamp=now) for v in values],
            producer_id=self.producer_id,
            producer_epoch=self.epoch,
            base_sequence=seq,
            is_transactional=True,
        )
        leader = (await self.client.topic(self.topic, refresh=True)).partitions[partition].leader
        resp = await self.client.send(
            apis.PRODUCE,
            apis.PRODUCE.request(
                transactional_id=self.transactional_id,
                acks=-1,
                timeout_ms=30000,
                topic_data=[
                    {"name": self.topic, "partition_data": [{"index": partition, "records": data}]}
                ],
            ),
            leader,
            version=version,
        )
        p = resp.responses[0].partition_responses[0]
        if p.error_code == ErrorCode.NONE:
            self.sequences[partition] = seq + len(values)
        return p


VERIFICATION_KEY = "transaction.partition.verification.enable"


async def set_verification_default(
    client: KafkaClient, brokers: list[int], enabled: bool | None
) -> None:
    """Set (None: remove) the cluster-wide dynamic default of
    transaction.partition.verification.enable with AlterConfigs, then wait until
    every broker in `brokers` applies it."""
    configs = [] if enabled is None else [{"name": VERIFICATION_KEY, "value": str(enabled).lower()}]
    resp = await client.send(
        apis.ALTER_CONFIGS,
        apis.ALTER_CONFIGS.request(
            validate_only=False,
            resources=[{"resource_type": 4, "resource_name": "", "configs": configs}],
        ),
    )
    assert resp.responses[0].error_code == ErrorCode.NONE, resp
    want = "true" if enabled is None else str(enabled).lower()
    deadline = time.monotonic() + 30
    for node in brokers:
        while True:
            d = await client.send(
                apis.DESCRIBE_CONFIGS,
                apis.DESCRIBE_CONFIGS.request(
                    include_synonyms=False,
                    include_documentation=False,
                    resources=[{"resource_type": 4, "resource_name": str(node),
                                "configuration_keys": [VERIFICATION_KEY]}],
                ),
                node,
            )  # fmt: skip
            (entry,) = d.results[0].configs
            if entry.value == want:
                break
            assert time.monotonic() < deadline, f"broker {node} still has {entry.value}"
            await asyncio.sleep(0.2)
