"""Transactions on a real single-node broker, the partition side: transactional
batches from kt's client, ended by WriteTxnMarkers as a coordinator sends them, then
read by real consumers. READ_COMMITTED consumers (librdkafka, kafka-python) see
exactly the committed records, READ_UNCOMMITTED ones everything; the control
batches on disk parse with kafka-python's record code, and `kt dump-log-segments`
shows the markers and the `.txnindex`.

The interleaving (offsets):

    0 p0 (plain)   1-2 A: a1 a2   3 B: b1   4 A: a3   5 ABORT(B)   6 COMMIT(A)
    7 p1 (plain)   8 C: c1        9 ABORT(C)
"""

from __future__ import annotations

import asyncio
import subprocess
from pathlib import Path
from typing import Any

import pytest
from broker_harness import KT
from txn_helpers import (
    TXN_ID,
    HandTxnProducer,
    consume_confluent,
    consume_kafka_python,
    list_offset,
    plain,
    produce_raw,
)

from kt.client import KafkaClient, NewTopic
from kt.protocol import ErrorCode
from kt.storage import record_batch as v2
from kt.storage.txn_index import AbortedTxn, read_txn_index

pytestmark = pytest.mark.integration

TOPIC = "txn"
COMMITTED = [b"p0", b"a1", b"a2", b"a3", b"p1"]
EVERYTHING = [b"p0", b"a1", b"a2", b"b1", b"a3", b"p1", b"c1"]


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Any:
    from broker_harness import BrokerProcess, free_port

    # The transactions are written by hand without a coordinator (WriteTxnMarkers sent
    # as one would): Kafka's transaction.partition.verification.enable=false.
    b = BrokerProcess(tmp_path_factory.mktemp("txn") / "data", free_port(),
                      {"transaction.partition.verification.enable": "false"}).start()  # fmt: skip
    pids: dict[str, int] = {}
    offsets: dict[str, int] = {}

    async def scenario() -> None:
        async with KafkaClient(b.bootstrap) as client:
            errs = await client.create_topics([NewTopic(TOPIC, 1, 1)])
            assert errs == {TOPIC: None}
            a, bb, c = (HandTxnProducer(client, TOPIC) for _ in range(3))
            for name, p in (("A", a), ("B", bb), ("C", c)):
                await p.init()
                pids[name] = p.producer_id
            await plain(client, TOPIC, 0, [b"p0"])
            offsets["A"] = await a.send(0, [b"a1", b"a2"])
            offsets["B"] = await bb.send(0, [b"b1"])
            await a.send(0, [b"a3"])
            await bb.end([0], commit=False)
            # A is still open: read_committed ends at its first offset.
            offsets["lso_open"] = await list_offset(client, TOPIC, 0, committed=True)
            offsets["hw_open"] = await list_offset(client, TOPIC, 0, committed=False)
            await a.end([0], commit=True, coordinator_epoch=3)
            await plain(client, TOPIC, 0, [b"p1"])
            offsets["C"] = await c.send(0, [b"c1"])
            await c.end([0], commit=False)
            offsets["lso"] = await list_offset(client, TOPIC, 0, committed=True)
            offsets["hw"] = await list_offset(client, TOPIC, 0, committed=False)

    asyncio.run(scenario())
    b.pids, b.offsets = pids, offsets
    yield b
    b.kill()


def test_last_stable_offset_follows_open_transactions(broker: Any) -> None:
    assert broker.offsets["A"] == 1 and broker.offsets["B"] == 3 and broker.offsets["C"] == 8
    assert (broker.offsets["lso_open"], broker.offsets["hw_open"]) == (1, 6)
    assert broker.offsets["lso"] == broker.offsets["hw"] == 10


@pytest.mark.parametrize("consume", [consume_confluent, consume_kafka_python])
def test_read_committed_consumers_see_exactly_the_committed_records(
    broker: Any, consume: Any
) -> None:
    assert consume(broker.bootstrap, TOPIC, "read_committed", len(COMMITTED)) == COMMITTED


@pytest.mark.parametrize("consume", [consume_confluent, consume_kafka_python])
def test_read_uncommitted_consumers_see_everything(broker: Any, consume: Any) -> None:
    assert consume(broker.bootstrap, TOPIC, "read_uncommitted", len(EVERYTHING)) == EVERYTHING


def _partition_dir(broker: Any) -> Path:
    return Path(broker.data_dir) / f"{TOPIC}-0"


def test_control_batches_parse_with_kafka_python(broker: Any) -> None:
    from kafka.record import MemoryRecords

    data = (_partition_dir(broker) / "00000000000000000000.log").read_bytes()
    records = MemoryRecords(data)
    markers = []
    while True:
        batch = records.next_batch()
        if batch is None:
            break
        batch.validate_crc()
        if batch.is_control_batch:
            assert batch.is_transactional
            (rec,) = list(batch)
            markers.append((batch.base_offset, batch.producer_id, bytes(rec.key), bytes(rec.value)))
    ctrl = {v2.CONTROL_ABORT: "ABORT", v2.CONTROL_COMMIT: "COMMIT"}
    got = [
        (off, pid, ctrl[v2.parse_control_key(k)[1]], v2.parse_end_txn_marker(v)[1])
        for off, pid, k, v in markers
    ]
    pids = broker.pids
    assert got == [
        (5, pids["B"], "ABORT", 0),
        (6, pids["A"], "COMMIT", 3),
        (9, pids["C"], "ABORT", 0),
    ]


def test_txnindex_holds_the_aborted_transactions(broker: Any) -> None:
    pids = broker.pids
    entries = read_txn_index(_partition_dir(broker) / "00000000000000000000.txnindex")
    # B aborted while A (first offset 1) was open: its LSO is 1; C aborted alone.
    assert entries == [AbortedTxn(pids["B"], 3, 5, 1), AbortedTxn(pids["C"], 8, 9, 10)]


def test_dump_log_segments_shows_markers_and_txnindex(broker: Any) -> None:
    d = _partition_dir(broker)
    log_dump = subprocess.run(
        [KT, "dump-log-segments", "--deep-iteration",
         "--files", str(d / "00000000000000000000.log")],
        capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    markers = [line for line in log_dump.splitlines() if "endTxnMarker" in line]
    assert len(markers) == 3, log_dump
    assert "endTxnMarker: ABORT coordinatorEpoch: 0" in markers[0]
    assert "endTxnMarker: COMMIT coordinatorEpoch: 3" in markers[1]
    txn_dump = subprocess.run(
        [KT, "dump-log-segments",
         "--files", str(d / "00000000000000000000.txnindex")],
        capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    assert f"producerId: {broker.pids['B']}" in txn_dump, txn_dump
    assert "firstOffset: 8" in txn_dump and "lastStableOffset: 10" in txn_dump


def test_transactional_batches_need_a_transactional_id(broker: Any) -> None:
    async def attempt() -> int:
        async with KafkaClient(broker.bootstrap) as client:
            p = HandTxnProducer(client, TOPIC)
            await p.init()
            data = v2.build_batch(
                [v2.RecordSpec(b"k", b"x")], producer_id=p.producer_id, producer_epoch=0,
                base_sequence=0, is_transactional=True,
            )  # fmt: skip
            try:
                await produce_raw(client, TOPIC, 0, data, None)
            except AssertionError as exc:
                return int(str(exc).split("error_code=")[1].split(",")[0].rstrip(")"))
            await produce_raw(client, TOPIC, 0, data, TXN_ID)
            return 0

    assert asyncio.run(attempt()) == ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
