"""KIP-890 part 1 on a real single-node broker (`kt broker` process, which is also
the transaction coordinator): confluent-kafka's transactional producer commits and
aborts with verification on (the default); a transactional Produce forged with
kt's client for a partition the producer did not add to its transaction, or sent
late after the transaction was aborted, is refused with INVALID_TXN_STATE and
nothing is appended, so the last stable offset is not held; with
`transaction.partition.verification.enable=false` (static, or set dynamically) the
same batch is appended as before."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from txn_helpers import CoordinatedTxn, list_offset

from kt.client import KafkaClient
from kt.protocol import ErrorCode, apis

pytestmark = pytest.mark.integration

KEY = "transaction.partition.verification.enable"


def create(bootstrap: str, topic: str, partitions: int = 2) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, partitions, 1)])[topic].result(30)


def read_committed(bootstrap: str, topic: str, partitions: int, expect: int) -> list[bytes]:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"r-{time.monotonic_ns()}",
                  "auto.offset.reset": "earliest", "enable.auto.commit": False,
                  "isolation.level": "read_committed"})  # fmt: skip
    c.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    got: list[bytes] = []
    deadline = time.monotonic() + 15
    try:
        while time.monotonic() < deadline and len(got) < expect:
            m = c.poll(0.5)
            if m is not None and m.error() is None:
                got.append(m.value())
        end = time.monotonic() + 1.5  # anything more would be wrong
        while time.monotonic() < end:
            m = c.poll(0.3)
            if m is not None and m.error() is None:
                got.append(m.value())
    finally:
        c.close()
    return got


def test_confluent_kafka_commits_and_aborts_with_verification_on(kt_broker: Any) -> None:
    bs = kt_broker.bootstrap
    create(bs, "v-client")
    p = Producer({"bootstrap.servers": bs, "transactional.id": "v-client-tx"})
    p.init_transactions(30)
    for commit, tag in ((True, b"c1"), (False, b"a1"), (True, b"c2")):
        p.begin_transaction()
        for part in (0, 1):
            p.produce("v-client", value=tag + b"-%d" % part, partition=part)
        if commit:
            p.commit_transaction(30)
        else:
            p.abort_transaction(30)
    got = read_committed(bs, "v-client", 2, expect=4)
    assert sorted(got) == [b"c1-0", b"c1-1", b"c2-0", b"c2-1"]


def test_a_batch_outside_the_transaction_is_refused_and_nothing_appended(kt_broker: Any) -> None:
    bs = kt_broker.bootstrap
    create(bs, "v-raw")

    async def scenario() -> None:
        async with KafkaClient(bs) as client:
            txn = CoordinatedTxn(client, "v-raw-tx", "v-raw")
            await txn.init()
            await txn.add([1])
            # Partition 0 was never added to the transaction.
            for version in (3, 9, 11):
                p = await txn.produce(0, [b"stray"], version=version)
                assert p.error_code == ErrorCode.INVALID_TXN_STATE, (version, p)
                assert p.base_offset == -1
                if version >= 8:
                    assert p.error_message == "Partition was not added to the transaction"
            assert await list_offset(client, "v-raw", 0, committed=False) == 0
            ok = await txn.produce(1, [b"in"])
            assert ok.error_code == ErrorCode.NONE and ok.base_offset == 0
            await txn.end(commit=True)
            # A late retry after the transaction was aborted: no transaction to join.
            await txn.add([1])
            first = await txn.produce(1, [b"aborted"])
            assert first.error_code == ErrorCode.NONE
            await txn.end(commit=False)
            end = await list_offset(client, "v-raw", 1, committed=False)
            late = await txn.produce(1, [b"late"])
            assert late.error_code == ErrorCode.INVALID_TXN_STATE, late
            assert await list_offset(client, "v-raw", 1, committed=False) == end
            # Nothing is left open: the last stable offset is the high watermark.
            assert await list_offset(client, "v-raw", 1, committed=True) == end

    asyncio.run(scenario())
    assert read_committed(bs, "v-raw", 2, expect=1) == [b"in"]


def test_with_verification_off_the_batch_is_appended_as_before(broker_factory: Any) -> None:
    b = broker_factory(**{KEY: "false"})
    create(b.bootstrap, "v-off")

    async def scenario() -> None:
        async with KafkaClient(b.bootstrap) as client:
            txn = CoordinatedTxn(client, "v-off-tx", "v-off")
            await txn.init()
            await txn.add([1])
            p = await txn.produce(0, [b"stray"])
            assert p.error_code == ErrorCode.NONE and p.base_offset == 0
            # The stray batch opened a transaction the coordinator does not know: it
            # holds the last stable offset (what verification prevents).
            assert await list_offset(client, "v-off", 0, committed=False) == 1
            assert await list_offset(client, "v-off", 0, committed=True) == 0

    asyncio.run(scenario())


async def alter_broker_default(client: KafkaClient, configs: dict[str, str]) -> None:
    """AlterConfigs of the cluster-wide broker default (resource name "")."""
    entries = [{"name": k, "value": v} for k, v in configs.items()]
    resp: Any = await client.send(apis.ALTER_CONFIGS, apis.ALTER_CONFIGS.request(
        validate_only=False,
        resources=[{"resource_type": 4, "resource_name": "", "configs": entries}]))  # fmt: skip
    assert resp.responses[0].error_code == ErrorCode.NONE, resp


def test_the_setting_is_dynamic(kt_broker: Any) -> None:
    bs = kt_broker.bootstrap
    create(bs, "v-dyn")

    async def scenario() -> None:
        async with KafkaClient(bs) as client:
            txn = CoordinatedTxn(client, "v-dyn-tx", "v-dyn")
            await txn.init()
            await txn.add([1])
            refused = await txn.produce(0, [b"x"])
            assert refused.error_code == ErrorCode.INVALID_TXN_STATE
            await alter_broker_default(client, {KEY: "false"})
            resp: Any = await client.send(apis.DESCRIBE_CONFIGS, apis.DESCRIBE_CONFIGS.request(
                include_synonyms=False, include_documentation=False,
                resources=[{"resource_type": 4, "resource_name": "1",
                            "configuration_keys": [KEY]}]))  # fmt: skip
            (entry,) = resp.results[0].configs
            assert (entry.value, entry.read_only) == ("false", False)
            appended = await txn.produce(0, [b"x"])
            assert appended.error_code == ErrorCode.NONE, appended
            await alter_broker_default(client, {})
            again = await txn.produce(1, [b"y"])  # verified (partition 1 was added)
            assert again.error_code == ErrorCode.NONE, again

    asyncio.run(scenario())
