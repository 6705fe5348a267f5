"""KIP-890 part 1 through the handlers of an in-process broker (which is also the
transaction coordinator: the verification goes over the loopback link, through
the AddPartitionsToTxn handler): a transactional Produce for a partition the
producer did not add to its transaction is refused with Kafka's error and writes
nothing; an added one is appended; the produce version decides how coordinator
errors reach the producer; with `transaction.partition.verification.enable=false`
(static or dynamic) the batch is appended as before.

These keep the in-process broker on purpose: the subject is a flow across services
(Produce, the transaction coordinator over the loopback link, AddPartitionsToTxn,
the replica manager's verification guards, a dynamic config through the root's
reconfigure), not one handler."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from handler_harness import InProcessBroker, call, open_broker

from kt.protocol import ErrorCode, apis
from kt.storage import record_batch as v2

TXN_ID = "verify-me"
TOPIC = "t"


def make_broker(tmp_path: Path, **overrides: str) -> InProcessBroker:
    b = open_broker(tmp_path, **{"transaction.state.log.num.partitions": "1", **overrides})
    b.create_topic(TOPIC, 2)
    return b


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[InProcessBroker]:
    b = make_broker(tmp_path)
    yield b
    b.close()


def init_producer(b: InProcessBroker, tid: str = TXN_ID) -> tuple[int, int]:
    """FindCoordinator (creates `__transaction_state`), then InitProducerId."""
    found: Any = call(b, apis.FIND_COORDINATOR, 3,
                      apis.FIND_COORDINATOR.request(key=tid, key_type=1))  # fmt: skip
    assert found.error_code == ErrorCode.NONE, found
    resp: Any = call(b, apis.INIT_PRODUCER_ID, 4, apis.INIT_PRODUCER_ID.request(
        transactional_id=tid, transaction_timeout_ms=60_000))  # fmt: skip
    assert resp.error_code == ErrorCode.NONE, resp
    return int(resp.producer_id), int(resp.producer_epoch)


def add_partitions(b: InProcessBroker, pid: int, epoch: int, partitions: list[int]) -> None:
    resp: Any = call(b, apis.ADD_PARTITIONS_TO_TXN, 3, apis.ADD_PARTITIONS_TO_TXN.request(
        v3_and_below_transactional_id=TXN_ID, v3_and_below_producer_id=pid,
        v3_and_below_producer_epoch=epoch,
        v3_and_below_topics=[{"name": TOPIC, "partitions": partitions}]))  # fmt: skip
    codes = {r.partition_error_code for t in resp.results_by_topic_v3_and_below
             for r in t.results_by_partition}  # fmt: skip
    assert codes == {ErrorCode.NONE}, resp


def txn_batch(pid: int, epoch: int, seq: int = 0, value: bytes = b"v") -> bytes:
    now = int(time.time() * 1000)
    return v2.build_batch([v2.RecordSpec(b"k", value, timestamp=now)], producer_id=pid,
                          producer_epoch=epoch, base_sequence=seq,
                          is_transactional=True)  # fmt: skip


def produce(
    b: InProcessBroker, data: bytes, partition: int = 0, version: int = 9, tid: str = TXN_ID
) -> Any:
    resp: Any = call(b, apis.PRODUCE, version, apis.PRODUCE.request(
        transactional_id=tid, acks=-1, timeout_ms=5000,
        topic_data=[{"name": TOPIC,
                     "partition_data": [{"index": partition, "records": data}]}]))  # fmt: skip
    return resp.responses[0].partition_responses[0]


def log_end(b: InProcessBroker, partition: int = 0) -> int:
    part = b.replica_manager.get_partition_or_error(TOPIC, partition)
    return int(part.log.log_end_offset)


def test_a_partition_not_in_the_transaction_is_refused_and_nothing_written(
    broker: InProcessBroker,
) -> None:
    pid, epoch = init_producer(broker)
    add_partitions(broker, pid, epoch, [1])
    p = produce(broker, txn_batch(pid, epoch), partition=0)
    assert p.error_code == ErrorCode.INVALID_TXN_STATE
    assert p.error_message == "Partition was not added to the transaction"
    assert p.base_offset == -1
    assert log_end(broker, 0) == 0
    part = broker.replica_manager.get_partition_or_error(TOPIC, 0)
    assert not part.has_ongoing_transaction(pid)
    # The added partition is verified and appended.
    ok = produce(broker, txn_batch(pid, epoch), partition=1)
    assert ok.error_code == ErrorCode.NONE and ok.base_offset == 0
    assert log_end(broker, 1) == 1


def test_the_first_batch_is_verified_the_next_ones_are_not(broker: InProcessBroker) -> None:
    pid, epoch = init_producer(broker)
    add_partitions(broker, pid, epoch, [0])
    asked: list[list[tuple[str, int]]] = []
    verifier = broker.transactions.verifier
    real = verifier.verify

    async def counting(tid: str, p: int, e: int, tps: Any) -> Any:
        asked.append(list(tps))
        return await real(tid, p, e, tps)

    verifier.verify = counting  # type: ignore[method-assign]
    for seq in range(3):
        r = produce(broker, txn_batch(pid, epoch, seq=seq), partition=0)
        assert r.error_code == ErrorCode.NONE, r
    # Only the batch that opened the transaction asked the coordinator.
    assert asked == [[(TOPIC, 0)]]
    part = broker.replica_manager.get_partition_or_error(TOPIC, 0)
    assert part.has_ongoing_transaction(pid) and len(part.txn_verification) == 0


def test_unknown_producer_and_fenced_epoch_answers(broker: InProcessBroker) -> None:
    pid, epoch = init_producer(broker)
    add_partitions(broker, pid, epoch, [0])
    wrong_pid = produce(broker, txn_batch(pid + 1000, 0), partition=0)
    assert wrong_pid.error_code == ErrorCode.INVALID_PRODUCER_ID_MAPPING
    assert wrong_pid.error_message is None
    # PRODUCER_FENCED from the coordinator reaches producers as INVALID_PRODUCER_EPOCH.
    old_epoch = produce(broker, txn_batch(pid, epoch - 1 if epoch else epoch + 1), partition=1)
    assert old_epoch.error_code == ErrorCode.INVALID_PRODUCER_EPOCH
    assert log_end(broker, 0) == 0 and log_end(broker, 1) == 0


def test_other_transactional_id_is_refused(broker: InProcessBroker) -> None:
    pid, epoch = init_producer(broker)
    add_partitions(broker, pid, epoch, [0])
    r = produce(broker, txn_batch(pid, epoch), partition=0, tid="someone-else")
    # The coordinator does not know that id.
    assert r.error_code == ErrorCode.INVALID_PRODUCER_ID_MAPPING
    assert log_end(broker, 0) == 0


def test_no_coordinator_yet_is_retriable_not_enough_replicas(tmp_path: Path) -> None:
    """Without `__transaction_state` no transaction can have started: Kafka answers
    COORDINATOR_NOT_AVAILABLE, which producers see as NOT_ENOUGH_REPLICAS."""
    b = make_broker(tmp_path)
    try:
        r = produce(b, txn_batch(77, 0), partition=0)
        assert r.error_code == ErrorCode.NOT_ENOUGH_REPLICAS
        assert r.error_message == (
            "Unable to verify the partition has been added to the transaction. "
            "Underlying error: COORDINATOR_NOT_AVAILABLE"
        )
        assert log_end(b, 0) == 0
    finally:
        b.close()


def test_several_producer_ids_refuse_the_whole_request(broker: InProcessBroker) -> None:
    pid, epoch = init_producer(broker)
    add_partitions(broker, pid, epoch, [0, 1])
    resp: Any = call(broker, apis.PRODUCE, 9, apis.PRODUCE.request(
        transactional_id=TXN_ID, acks=-1, timeout_ms=5000,
        topic_data=[{"name": TOPIC, "partition_data": [
            {"index": 0, "records": txn_batch(pid, epoch)},
            {"index": 1, "records": txn_batch(pid + 1, epoch)}]}]))  # fmt: skip
    codes = [p.error_code for p in resp.responses[0].partition_responses]
    assert codes == [ErrorCode.INVALID_PRODUCER_ID_MAPPING] * 2
    assert log_end(broker, 0) == 0 and log_end(broker, 1) == 0


@pytest.mark.parametrize("version", [3, 8, 10, 11])
def test_concurrent_transactions_is_not_enough_replicas_for_every_version(
    broker: InProcessBroker, version: int
) -> None:
    """A transaction being committed (PrepareCommit) answers CONCURRENT_TRANSACTIONS;
    Kafka 3.x (transactions v1) turns it into the retriable NOT_ENOUGH_REPLICAS."""
    pid, epoch = init_producer(broker)
    add_partitions(broker, pid, epoch, [0])
    coordinator = broker.transactions.coordinator
    _, _, txn = coordinator.state.get(TXN_ID)
    assert txn is not None
    from kt.broker.transactions.metadata import TxnState

    txn.state = TxnState.PREPARE_COMMIT  # as between EndTxn and the markers
    try:
        r = produce(broker, txn_batch(pid, epoch), partition=0, version=version)
    finally:
        txn.state = TxnState.ONGOING
    assert r.error_code == ErrorCode.NOT_ENOUGH_REPLICAS
    if version >= 8:  # Produce has error_message from v8 on
        assert r.error_message.endswith("Underlying error: CONCURRENT_TRANSACTIONS")
    assert log_end(broker, 0) == 0


def test_verification_off_appends_as_before(tmp_path: Path) -> None:
    b = make_broker(tmp_path, **{"transaction.partition.verification.enable": "false"})
    try:
        assert b.replica_manager.txn_verification_enabled is False
        r = produce(b, txn_batch(4242, 0), partition=0)
        assert r.error_code == ErrorCode.NONE and r.base_offset == 0
        part = b.replica_manager.get_partition_or_error(TOPIC, 0)
        assert part.has_ongoing_transaction(4242)
    finally:
        b.close()


def test_dynamic_config_turns_verification_off_and_on(broker: InProcessBroker) -> None:
    key = "transaction.partition.verification.enable"
    broker.broker.reconfigure({key: "false"}, {})
    assert broker.replica_manager.txn_verification_enabled is False
    r = produce(broker, txn_batch(5151, 0), partition=0)
    assert r.error_code == ErrorCode.NONE
    # This broker's own value wins over the cluster default.
    broker.broker.reconfigure({key: "false"}, {key: "TRUE"})
    assert broker.replica_manager.txn_verification_enabled is True
    r = produce(broker, txn_batch(6161, 0), partition=1)
    assert r.error_code == ErrorCode.NOT_ENOUGH_REPLICAS  # no coordinator topic yet
    broker.broker.reconfigure({}, {})
    assert broker.replica_manager.txn_verification_enabled is True
