"""Transactions end to end with real clients against a single `kt broker`: commit
and abort, offsets sent to the transaction (consume-transform-produce), zombie
fencing, a hanging producer aborted by the coordinator's timeout, and what
READ_COMMITTED consumers see. confluent-kafka (librdkafka) here; kafka-python and
kafkajs in test_transactions_other_clients.py."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from typing import Any

import pytest

pytestmark = pytest.mark.integration

ck = pytest.importorskip("confluent_kafka")
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402


def create(bootstrap: str, topic: str, partitions: int = 2) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})  # kept alive until the result
    admin.create_topics([NewTopic(topic, partitions, 1)])[topic].result(30)


def producer(bootstrap: str, txn_id: str, **extra: Any) -> Any:
    p = Producer({"bootstrap.servers": bootstrap, "transactional.id": txn_id, **extra})
    p.init_transactions(30)
    return p


def read_all(
    bootstrap: str, topic: str, partitions: int, *, committed: bool = True, expect: int = -1,
    wait_s: float = 10.0,
) -> list[bytes]:  # fmt: skip
    """Every value readable from the topic (until `expect` arrived, or `wait_s`
    passed without news)."""
    c = Consumer({
        "bootstrap.servers": bootstrap, "group.id": f"reader-{time.monotonic_ns()}",
        "auto.offset.reset": "earliest", "enable.auto.commit": False,
        "isolation.level": "read_committed" if committed else "read_uncommitted",
    })  # fmt: skip
    c.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    got: list[bytes] = []
    deadline = time.monotonic() + wait_s
    try:
        while time.monotonic() < deadline and len(got) != expect:
            m = c.poll(0.2)
            if m is None or m.error():
                continue
            got.append(m.value())
            deadline = max(deadline, time.monotonic() + 2.0)
    finally:
        c.close()
    return sorted(got)


def test_commit_and_abort_read_committed(kt_broker) -> None:
    bs = kt_broker.bootstrap
    create(bs, "t")
    p = producer(bs, "tx-commit")
    p.begin_transaction()
    for i in range(6):
        p.produce("t", value=b"c%d" % i, partition=i % 2)
    p.commit_transaction(30)
    p.begin_transaction()
    for i in range(4):
        p.produce("t", value=b"a%d" % i, partition=i % 2)
    p.flush(30)
    p.abort_transaction(30)
    p.begin_transaction()
    p.produce("t", value=b"c-last", partition=0)
    p.commit_transaction(30)
    committed = [b"c%d" % i for i in range(6)] + [b"c-last"]
    assert read_all(bs, "t", 2, expect=7) == sorted(committed)
    everything = read_all(bs, "t", 2, committed=False, expect=11)
    assert everything == sorted(committed + [b"a%d" % i for i in range(4)])
    # Every state change is in __transaction_state, in Kafka's format.
    from kt.broker.groups.offsets_log import partition_for

    kt_broker.stop()
    part = kt_broker.data_dir / f"__transaction_state-{partition_for('tx-commit', 50)}"
    dump = kt("dump-log-segments", "--transaction-log-decoder", "--files",
              str(part / "00000000000000000000.log"))  # fmt: skip
    assert dump.returncode == 0, dump
    payloads = [line for line in dump.stdout.splitlines() if "transactionalId=tx-commit" in line]
    states = [line.split("state=")[1].split(",")[0] for line in payloads]
    assert states == ["Empty", "Ongoing", "PrepareCommit", "CompleteCommit", "Ongoing",
                      "PrepareAbort", "CompleteAbort", "Ongoing", "PrepareCommit",
                      "CompleteCommit"]  # fmt: skip
    assert "partitions=[t-0,t-1]" in payloads[1] and "txnTimeoutMs=60000" in payloads[1]


def test_second_producer_fences_the_first(kt_broker) -> None:
    bs = kt_broker.bootstrap
    create(bs, "z")
    zombie = producer(bs, "tx-fence")
    zombie.begin_transaction()
    zombie.produce("z", value=b"zombie", partition=0)
    zombie.flush(30)
    # The new instance takes the id: the zombie's open transaction is aborted.
    fresh = producer(bs, "tx-fence")
    with pytest.raises(KafkaException) as info:
        zombie.produce("z", value=b"zombie-2", partition=0)
        zombie.commit_transaction(30)
    err = info.value.args[0]
    assert err.fatal() or err.txn_requires_abort(), err
    assert err.code() in (ck.KafkaError._FENCED, ck.KafkaError.PRODUCER_FENCED,
                          ck.KafkaError.INVALID_PRODUCER_EPOCH), err  # fmt: skip
    fresh.begin_transaction()
    fresh.produce("z", value=b"fresh", partition=0)
    fresh.commit_transaction(30)
    assert read_all(bs, "z", 2, expect=1) == [b"fresh"]


def test_send_offsets_to_transaction_commits_offsets_with_the_output(kt_broker) -> None:
    bs = kt_broker.bootstrap
    create(bs, "in", 1)
    create(bs, "out", 1)
    feed = Producer({"bootstrap.servers": bs})
    for i in range(10):
        feed.produce("in", value=b"%d" % i, partition=0)
    feed.flush(30)
    group = "ctp"
    consumer = Consumer({
        "bootstrap.servers": bs, "group.id": group, "auto.offset.reset": "earliest",
        "enable.auto.commit": False, "isolation.level": "read_committed",
    })  # fmt: skip
    consumer.subscribe(["in"])
    p = producer(bs, "tx-ctp")

    def committed_offset() -> int:
        # A plain reader (require_stable off) sees only what took effect.
        probe = Consumer({"bootstrap.servers": bs, "group.id": group,
                          "isolation.level": "read_uncommitted"})  # fmt: skip
        try:
            return int(probe.committed([TopicPartition("in", 0)], 10)[0].offset)
        finally:
            probe.close()

    def transform(batch_size: int, commit: bool) -> None:
        msgs: list[Any] = []
        deadline = time.monotonic() + 30
        while len(msgs) < batch_size and time.monotonic() < deadline:
            m = consumer.poll(0.5)
            if m is not None and not m.error():
                msgs.append(m)
        assert len(msgs) == batch_size
        p.begin_transaction()
        for m in msgs:
            p.produce("out", value=b"x" + m.value(), partition=0)
        p.send_offsets_to_transaction(
            [TopicPartition("in", 0, msgs[-1].offset() + 1)], consumer.consumer_group_metadata()
        )
        assert committed_offset() < msgs[-1].offset() + 1  # not before the commit
        if commit:
            p.commit_transaction(30)
        else:
            p.abort_transaction(30)

    transform(4, commit=True)
    assert committed_offset() == 4
    transform(3, commit=False)
    assert committed_offset() == 4  # the aborted transaction's offsets are dropped
    # The consumer rewinds to the committed offset, as after a crash.
    consumer.close()
    consumer = Consumer({
        "bootstrap.servers": bs, "group.id": group, "auto.offset.reset": "earliest",
        "enable.auto.commit": False, "isolation.level": "read_committed",
    })  # fmt: skip
    consumer.subscribe(["in"])
    transform(6, commit=True)
    assert committed_offset() == 10
    consumer.close()
    out = read_all(bs, "out", 1, expect=10)
    assert out == sorted(b"x%d" % i for i in range(10))


HANGING = textwrap.dedent("""
    import sys
    from confluent_kafka import Producer
    p = Producer({"bootstrap.servers": sys.argv[1], "transactional.id": "tx-hang",
                  "transaction.timeout.ms": sys.argv[2]})
    p.init_transactions(30)
    p.begin_transaction()
    p.produce("h", value=b"hanging", partition=0)
    p.flush(30)
    print("open", flush=True)
    sys.stdin.read()
""")


def test_hanging_transaction_blocks_the_lso_until_the_coordinator_aborts_it(
    broker_factory,
) -> None:
    broker = broker_factory(**{
        "transaction.abort.timed.out.transaction.cleanup.interval.ms": "500",
    })  # fmt: skip
    bs = broker.bootstrap
    create(bs, "h", 1)
    timeout_ms = 25000  # room for the CLI calls below on a loaded machine
    proc = subprocess.Popen([sys.executable, "-c", HANGING, bs, str(timeout_ms)],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE)  # fmt: skip
    try:
        assert proc.stdout is not None
        assert proc.stdout.readline().strip() == b"open"
        opened = time.monotonic()
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        # The coordinator still tracks it (and will abort it): listed Ongoing, and not
        # "hanging" in kafka-transactions.sh's sense.
        listed = kt_json("transactions", "list", "-b", bs)
        assert {"transactionalId": "tx-hang", "transactionState": "Ongoing"}.items() <= next(
            t for t in listed if t["transactionalId"] == "tx-hang"
        ).items()
        (desc,) = kt_json("transactions", "describe", "-b", bs, "--transactional-id", "tx-hang")
        assert desc["topicPartitions"] == ["h-0"] and desc["transactionTimeoutMs"] == timeout_ms
        (prod,) = kt_json("transactions", "describe-producers", "-b", bs, "--topic", "h",
                          "--partition", "0")  # fmt: skip
        assert prod["currentTransactionStartOffset"] == 0
        hanging = kt("transactions", "find-hanging", "-b", bs, "--topic", "h",
                     "--max-transaction-timeout", "0", "--json")  # fmt: skip
        assert hanging.returncode == 0 and hanging.stdout == "", hanging
        # Its coordinator still tracks it (as Kafka's tool, not "hanging"), but
        # --include-tracked reports it, and when the coordinator will abort it.
        tracked = kt("transactions", "find-hanging", "-b", bs, "--topic", "h",
                     "--max-transaction-timeout", "0", "--include-tracked", "--json")  # fmt: skip
        assert tracked.returncode == 1, tracked
        (row,) = [json.loads(line) for line in tracked.stdout.splitlines()]
        assert (row["topic"], row["partition"], row["trackedByCoordinator"]) == ("h", 0, True)
        assert row["currentTransactionStartOffset"] == 0
        aborts_in_s = row["coordinatorAbortsAtMs"] / 1000 - time.time()
        assert 0 < aborts_in_s <= timeout_ms / 1000
        table = kt("transactions", "find-hanging", "-b", bs, "--topic", "h",
                   "--max-transaction-timeout", "0", "--include-tracked")  # fmt: skip
        assert table.returncode == 1 and "Coordinator" in table.stdout.splitlines()[0], table
        assert "aborts in " in table.stdout.splitlines()[-1], table
        # Committed records after the hanging one are held back by the LSO.
        p = producer(bs, "tx-other")
        p.begin_transaction()
        p.produce("h", value=b"after", partition=0)
        p.commit_transaction(30)
        assert read_all(bs, "h", 1, wait_s=2.0) == []
        assert time.monotonic() - opened < timeout_ms / 1000, "too slow to observe the block"
        # The coordinator aborts it once its timeout passed: the rest becomes readable.
        assert read_all(bs, "h", 1, expect=1, wait_s=30.0) == [b"after"]
        assert time.monotonic() - opened >= timeout_ms / 1000 - 1
    finally:
        if proc.poll() is None:
            proc.kill()


def kt(*args: str) -> subprocess.CompletedProcess[str]:
    from broker_harness import KT

    return subprocess.run([KT, *args], capture_output=True, text=True, timeout=60)


def kt_json(*args: str) -> list[dict[str, Any]]:
    done = kt(*args, "--json")
    assert done.returncode == 0, done
    return [json.loads(line) for line in done.stdout.splitlines()]


def test_find_and_abort_a_transaction_no_coordinator_knows(broker_factory) -> None:
    """A transactional batch whose producer id no transactional id holds (as after a
    lost coordinator state, or a client bug) hangs for good: find-hanging reports it
    and abort ends it, which frees the LSO. (Verification, KIP-890, refuses such a
    batch; with it off, as before Kafka 3.6, it gets in.)"""
    from txn_helpers import HandTxnProducer

    from kt.client import KafkaClient

    bs = broker_factory(**{"transaction.partition.verification.enable": "false"}).bootstrap
    create(bs, "g", 1)

    async def open_ghost() -> tuple[int, int]:
        async with KafkaClient(bs) as client:
            ghost = HandTxnProducer(client, "g")
            await ghost.init()
            start = await ghost.send(0, [b"ghost"])
            return ghost.producer_id, start

    ghost_pid, start = asyncio.run(open_ghost())
    p = producer(bs, "tx-after")
    p.begin_transaction()
    p.produce("g", value=b"after", partition=0)
    p.commit_transaction(30)
    assert read_all(bs, "g", 1, wait_s=2.0) == []  # held back by the ghost
    # Younger than the default 15 minutes: not a candidate yet.
    young = kt("transactions", "find-hanging", "-b", bs, "--topic", "g")
    assert young.returncode == 0, young
    found = kt("transactions", "find-hanging", "-b", bs, "--topic", "g", "--partition", "0",
               "--max-transaction-timeout", "0", "--json")  # fmt: skip
    assert found.returncode == 1, found
    (row,) = [json.loads(line) for line in found.stdout.splitlines()]
    assert (row["topic"], row["partition"], row["producerId"]) == ("g", 0, ghost_pid)
    assert row["currentTransactionStartOffset"] == start
    both = kt("transactions", "find-hanging", "-b", bs, "--topic", "g", "--include-tracked",
              "--max-transaction-timeout", "0", "--json")  # fmt: skip
    (row,) = [json.loads(line) for line in both.stdout.splitlines()]
    assert row["trackedByCoordinator"] is False and row["coordinatorAbortsAtMs"] is None
    table = kt("transactions", "find-hanging", "-b", bs, "--broker-id", "1",
               "--max-transaction-timeout", "0")  # fmt: skip
    assert table.returncode == 1 and str(ghost_pid) in table.stdout, table
    assert "Duration(min)" in table.stdout.splitlines()[0]
    wrong = kt("transactions", "abort", "-b", bs, "--topic", "g", "--partition", "0",
               "--start-offset", str(start + 100))  # fmt: skip
    assert wrong.returncode == 1 and "Could not find any open transactions" in wrong.stderr
    aborted = kt("transactions", "abort", "-b", bs, "--topic", "g", "--partition", "0",
                 "--start-offset", str(start))  # fmt: skip
    assert aborted.returncode == 0, aborted
    assert read_all(bs, "g", 1, expect=1) == [b"after"]
    after = kt("transactions", "find-hanging", "-b", bs, "--topic", "g",
               "--max-transaction-timeout", "0")  # fmt: skip
    assert after.returncode == 0, after
    usage = kt("transactions", "find-hanging", "-b", bs)
    assert usage.returncode == 2 and "--topic or --broker-id" in usage.stderr


def test_transaction_apis_answer_as_kafka(kt_broker) -> None:
    """Raw requests: InitProducerId timeout checks, AddPartitionsToTxn's per-partition
    refusal of unknown topics (v3) and its batched verify-only form (v4),
    INVALID_PRODUCER_EPOCH for clients older than KIP-588."""
    from kt.client import KafkaClient
    from kt.protocol import ErrorCode as E
    from kt.protocol import apis

    bs = kt_broker.bootstrap
    create(bs, "r", 1)

    async def go() -> None:
        async with KafkaClient(bs) as c:
            node = await c.coordinator("raw", 1)

            async def init(timeout_ms: int, version: int = 4) -> Any:
                body = apis.INIT_PRODUCER_ID.request(transactional_id="raw",
                                                     transaction_timeout_ms=timeout_ms)  # fmt: skip
                return await c.send(apis.INIT_PRODUCER_ID, body, node, version=version)

            assert (await init(0)).error_code == E.INVALID_TRANSACTION_TIMEOUT
            assert (await init(900_001)).error_code == E.INVALID_TRANSACTION_TIMEOUT
            r = await init(60_000)
            assert r.error_code == E.NONE and r.producer_epoch == 0
            pid = r.producer_id

            def add_v3(topics: list[tuple[str, list[int]]], epoch: int = 0) -> Any:
                return apis.ADD_PARTITIONS_TO_TXN.request(
                    v3_and_below_transactional_id="raw", v3_and_below_producer_id=pid,
                    v3_and_below_producer_epoch=epoch,
                    v3_and_below_topics=[{"name": t, "partitions": ps} for t, ps in topics],
                )  # fmt: skip

            resp = await c.send(apis.ADD_PARTITIONS_TO_TXN,
                                add_v3([("r", [0]), ("nope", [0])]), node, version=3)  # fmt: skip
            codes = {(t.name, p.partition_index): p.partition_error_code
                     for t in resp.results_by_topic_v3_and_below
                     for p in t.results_by_partition}  # fmt: skip
            assert codes == {("r", 0): E.OPERATION_NOT_ATTEMPTED,
                             ("nope", 0): E.UNKNOWN_TOPIC_OR_PARTITION}  # fmt: skip
            resp = await c.send(apis.ADD_PARTITIONS_TO_TXN, add_v3([("r", [0])]), node, version=3)
            assert resp.results_by_topic_v3_and_below[0].results_by_partition[0] \
                .partition_error_code == E.NONE  # fmt: skip
            # A stale epoch: PRODUCER_FENCED for v2+, INVALID_PRODUCER_EPOCH before.
            for version, code in ((3, E.PRODUCER_FENCED), (1, E.INVALID_PRODUCER_EPOCH)):
                resp = await c.send(apis.ADD_PARTITIONS_TO_TXN, add_v3([("r", [0])], epoch=7),
                                    node, version=version)  # fmt: skip
                assert resp.results_by_topic_v3_and_below[0].results_by_partition[0] \
                    .partition_error_code == code  # fmt: skip
            verify = apis.ADD_PARTITIONS_TO_TXN.request(transactions=[{
                "transactional_id": "raw", "producer_id": pid, "producer_epoch": 0,
                "verify_only": True,
                "topics": [{"name": "r", "partitions": [0, 1]}],
            }])  # fmt: skip
            resp = await c.send(apis.ADD_PARTITIONS_TO_TXN, verify, node, version=4)
            assert resp.error_code == E.NONE
            (txn,) = resp.results_by_transaction
            got = {p.partition_index: p.partition_error_code
                   for t in txn.topic_results for p in t.results_by_partition}  # fmt: skip
            assert got == {0: E.NONE, 1: E.INVALID_TXN_STATE}
            end = apis.END_TXN.request(transactional_id="raw", producer_id=pid,
                                       producer_epoch=0, committed=False)  # fmt: skip
            assert (await c.send(apis.END_TXN, end, node, version=3)).error_code == E.NONE

    asyncio.run(go())
