"""KIP-890 part 1's pieces, alone: the verification state of a partition (guards,
lowest sequences, expiry), the checks a leader's append makes with it, the
batching verifier that asks coordinators, and the produce error mapping."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

import pytest
from replication_helpers import new_partition, state

from kt.broker.errors import (
    BrokerError,
    InvalidProducerEpochError,
    InvalidProducerIdMappingError,
    InvalidTxnStateError,
    NotEnoughReplicasError,
    ProducerError,
    TransactionAbortableError,
    error_code_for,
)
from kt.broker.partition import Partition
from kt.broker.transactions.verification import VerificationGuard, VerificationStates
from kt.broker.transactions.verifier import TxnVerifier, produce_error
from kt.client.core import KafkaError
from kt.protocol import ErrorCode, Struct, apis
from kt.protocol.codec import Api
from kt.storage import record_batch as v2

E = ErrorCode
T = int(time.time() * 1000)
PID = 900


# --- VerificationStates -------------------------------------------------------------


def test_a_producer_keeps_one_guard_until_cleared() -> None:
    states = VerificationStates()
    g1 = states.start(PID, 5, 0, now_ms=T)
    # A retry, or another in-flight batch, joins the verification in progress.
    assert states.start(PID, 7, 0, now_ms=T) is g1
    assert states.verified(PID, g1)
    assert not states.verified(PID, VerificationGuard())
    assert not states.verified(PID, None)
    states.clear(PID)
    assert not states.verified(PID, g1)
    g2 = states.start(PID, 0, 0, now_ms=T)
    assert g2 is not g1 and states.verified(PID, g2) and not states.verified(PID, g1)


def test_the_lowest_sequence_of_the_newest_epoch_is_kept() -> None:
    states = VerificationStates()
    states.start(PID, 5, 1, now_ms=T)
    states.start(PID, 3, 1, now_ms=T)
    states.start(PID, 9, 1, now_ms=T)
    entry = states.entry(PID)
    assert entry is not None and (entry.lowest_sequence, entry.epoch) == (3, 1)
    states.start(PID, 0, 0, now_ms=T)  # an older epoch changes nothing
    assert (entry.lowest_sequence, entry.epoch) == (3, 1)
    states.start(PID, 8, 2, now_ms=T)  # a newer epoch starts over
    assert (entry.lowest_sequence, entry.epoch) == (8, 2)


def test_entries_expire_after_the_producer_id_expiration() -> None:
    states = VerificationStates(expiration_ms=1000)
    old = states.start(PID, 0, 0, now_ms=T)
    states.start(PID + 1, 0, 0, now_ms=T + 500)
    assert states.expire(T + 999) == 0
    assert states.expire(T + 1000) == 1
    assert states.entry(PID) is None and states.entry(PID + 1) is not None
    # A later start gets a fresh guard: the expired one verifies nothing.
    assert states.start(PID, 0, 0, now_ms=T + 1000) is not old


# --- the leader's append ------------------------------------------------------------


def txn(seq: int, *, pid: int = PID, epoch: int = 0, values: int = 1) -> bytes:
    recs = [v2.RecordSpec(b"k", b"v%d" % i, timestamp=T) for i in range(values)]
    return v2.build_batch(
        recs, producer_id=pid, producer_epoch=epoch, base_sequence=seq, is_transactional=True
    )


def leader(tmp_path: Path) -> Partition:
    p = new_partition(tmp_path, 1)
    assert p.make_leader(state(1, 0, [1]), now_ms=T)
    return p


def refused(p: Partition, data: bytes, **kw: Any) -> int:
    with pytest.raises(ProducerError) as exc:
        p.append_records(data, now_ms=T, **kw)
    return error_code_for(exc.value)


def test_a_transaction_opens_only_with_the_guard_of_its_verification(tmp_path: Path) -> None:
    p = leader(tmp_path)
    assert refused(p, txn(0), require_verification=True) == E.INVALID_TXN_STATE
    assert refused(p, txn(0), verification_guard=VerificationGuard(),
                   require_verification=True) == E.INVALID_TXN_STATE  # fmt: skip
    assert p.log.log_end_offset == 0
    guard = p.maybe_start_txn_verification(PID, 0, 0, now_ms=T)
    assert guard is not None
    p.append_records(txn(0), now_ms=T, verification_guard=guard, require_verification=True)
    assert p.has_ongoing_transaction(PID)
    # Written: the verification is over, and the open transaction needs none.
    assert p.txn_verification.entry(PID) is None
    assert p.maybe_start_txn_verification(PID, 1, 0, now_ms=T) is None
    p.append_records(txn(1), now_ms=T, require_verification=True)
    assert p.log.log_end_offset == 2


def test_a_verification_outrun_by_a_marker_lets_no_batch_in(tmp_path: Path) -> None:
    """The hanging-transaction race: the batch is verified while its transaction is
    still open, but the abort marker is written before the batch. The marker clears
    the verification, so the late batch cannot open a transaction nobody ends."""
    p = leader(tmp_path)
    first = p.maybe_start_txn_verification(PID, 0, 0, now_ms=T)
    p.append_records(txn(0), now_ms=T, verification_guard=first, require_verification=True)
    p.append_txn_marker(PID, 0, 0, commit=False, now_ms=T)
    late = p.maybe_start_txn_verification(PID, 1, 0, now_ms=T)
    assert late is not None  # no transaction open now: verify
    # ... the coordinator says yes (the old transaction), then its marker lands:
    p.append_txn_marker(PID, 0, 0, commit=False, now_ms=T)
    end = p.log.log_end_offset
    assert refused(p, txn(1), verification_guard=late,
                   require_verification=True) == E.INVALID_TXN_STATE  # fmt: skip
    assert p.log.log_end_offset == end and not p.has_ongoing_transaction(PID)
    assert p.last_stable_offset() == end


def test_no_later_sequence_overtakes_the_lowest_unverified_one(tmp_path: Path) -> None:
    p = leader(tmp_path)
    g = p.maybe_start_txn_verification(PID, 0, 0, now_ms=T)
    # Batch 1 (seq 1) was verified too, but seq 0 is still being retried.
    assert p.maybe_start_txn_verification(PID, 1, 0, now_ms=T) is g
    assert refused(p, txn(1), verification_guard=g,
                   require_verification=True) == E.OUT_OF_ORDER_SEQUENCE_NUMBER  # fmt: skip
    p.append_records(txn(0), now_ms=T, verification_guard=g, require_verification=True)
    p.append_records(txn(1), now_ms=T, require_verification=True)
    assert p.log.log_end_offset == 2


def test_an_older_epoch_is_fenced_before_the_sequence_check(tmp_path: Path) -> None:
    p = leader(tmp_path)
    g = p.maybe_start_txn_verification(PID, 0, 1, now_ms=T)
    p.append_records(txn(0, epoch=1), now_ms=T, verification_guard=g, require_verification=True)
    p.append_txn_marker(PID, 1, 0, commit=True, now_ms=T)
    g2 = p.maybe_start_txn_verification(PID, 4, 0, now_ms=T)
    assert refused(p, txn(4, epoch=0), verification_guard=g2,
                   require_verification=True) == E.INVALID_PRODUCER_EPOCH  # fmt: skip


def test_without_verification_required_batches_go_in_as_before(tmp_path: Path) -> None:
    p = leader(tmp_path)
    p.append_records(txn(0), now_ms=T)
    assert p.has_ongoing_transaction(PID)


def test_only_a_leader_starts_a_verification(tmp_path: Path) -> None:
    p = new_partition(tmp_path, 2)
    assert p.make_follower(state(1, 1, [1, 2]))
    from kt.broker.errors import NotLeaderOrFollowerError

    with pytest.raises(NotLeaderOrFollowerError):
        p.maybe_start_txn_verification(PID, 0, 0, now_ms=T)


# --- produce_error ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("code", "version", "expected", "cls", "message"),
    [
        (E.INVALID_TXN_STATE, 9, E.INVALID_TXN_STATE, InvalidTxnStateError,
         "Partition was not added to the transaction"),
        (E.TRANSACTION_ABORTABLE, 10, E.INVALID_TXN_STATE, InvalidTxnStateError,
         "Partition was not added to the transaction"),
        (E.TRANSACTION_ABORTABLE, 11, E.TRANSACTION_ABORTABLE, TransactionAbortableError, ""),
        (E.CONCURRENT_TRANSACTIONS, 11, E.NOT_ENOUGH_REPLICAS, NotEnoughReplicasError,
         "Unable to verify the partition has been added to the transaction. "
         "Underlying error: CONCURRENT_TRANSACTIONS"),
        (E.NETWORK_EXCEPTION, 3, E.NOT_ENOUGH_REPLICAS, NotEnoughReplicasError,
         "Unable to verify the partition has been added to the transaction. "
         "Underlying error: NETWORK_EXCEPTION"),
        (E.NOT_COORDINATOR, 9, E.NOT_ENOUGH_REPLICAS, NotEnoughReplicasError,
         "Unable to verify the partition has been added to the transaction. "
         "Underlying error: NOT_COORDINATOR"),
        (E.INVALID_PRODUCER_EPOCH, 9, E.INVALID_PRODUCER_EPOCH, InvalidProducerEpochError, ""),
        (E.INVALID_PRODUCER_ID_MAPPING, 9, E.INVALID_PRODUCER_ID_MAPPING,
         InvalidProducerIdMappingError, ""),
        (E.GROUP_AUTHORIZATION_FAILED, 9, E.UNKNOWN_SERVER_ERROR, BrokerError, ""),
    ],
)  # fmt: skip
def test_produce_error_maps_as_kafka_3_8(
    code: ErrorCode, version: int, expected: ErrorCode, cls: type, message: str
) -> None:
    err = produce_error(code, version)
    assert type(err) is cls
    assert error_code_for(err) == expected
    assert err.message == message


# --- TxnVerifier --------------------------------------------------------------------


class FakeLink:
    """A coordinator answering from a table, one request at a time, recorded."""

    def __init__(self, answers: dict[tuple[str, str, int], int] | None = None) -> None:
        self.answers = answers or {}
        self.sent: list[list[tuple[str, int, int, list[tuple[str, int]]]]] = []
        self.gate: asyncio.Event | None = None
        self.fail: Exception | None = None
        self.top_error = 0
        self.closed = 0

    async def send(self, api: Api, body: Any) -> Struct:
        assert api is apis.ADD_PARTITIONS_TO_TXN
        txns = body["transactions"]
        assert all(t["verify_only"] for t in txns)
        self.sent.append([(t["transactional_id"], t["producer_id"], t["producer_epoch"],
                           [(tp["name"], p) for tp in t["topics"] for p in tp["partitions"]])
                          for t in txns])  # fmt: skip
        if self.gate is not None:
            await self.gate.wait()
        if self.fail is not None:
            raise self.fail
        results = [{"transactional_id": t["transactional_id"], "topic_results": [
            {"name": tp["name"], "results_by_partition": [
                {"partition_index": p,
                 "partition_error_code": self.answers.get((t["transactional_id"], tp["name"], p),
                                                          0)}
                for p in tp["partitions"]]} for tp in t["topics"]]} for t in txns]  # fmt: skip
        body = apis.ADD_PARTITIONS_TO_TXN.response(
            throttle_time_ms=0, error_code=self.top_error, results_by_transaction=results
        )
        from kt.protocol.headers import decode_response, encode_response

        data = encode_response(api.key, 4, 1, body, size_prefix=False)
        return decode_response(api.key, 4, data)[1]

    async def close(self) -> None:
        self.closed += 1


def verifier(link: FakeLink, coordinator: int | None = 2) -> TxnVerifier:
    return TxnVerifier(lambda tid: coordinator, lambda node: link, timeout_s=5)


def test_verify_answers_only_the_unverified_partitions() -> None:
    link = FakeLink({("a", "t", 1): E.INVALID_TXN_STATE, ("a", "t", 2): E.PRODUCER_FENCED})

    async def run() -> Any:
        return await verifier(link).verify("a", 7, 3, [("t", 0), ("t", 1), ("t", 2)])

    assert asyncio.run(run()) == {("t", 1): E.INVALID_TXN_STATE,
                                  ("t", 2): E.INVALID_PRODUCER_EPOCH}  # fmt: skip
    assert link.sent == [[("a", 7, 3, [("t", 0), ("t", 1), ("t", 2)])]]


def test_questions_queued_while_one_is_out_go_in_one_request() -> None:
    link = FakeLink({("c", "t", 0): E.INVALID_TXN_STATE})

    async def run() -> list[Any]:
        v = verifier(link)
        link.gate = asyncio.Event()
        first = asyncio.ensure_future(v.verify("a", 1, 0, [("t", 0)]))
        await asyncio.sleep(0)
        queued = [asyncio.ensure_future(v.verify(tid, n, 0, [("t", 0)]))
                  for n, tid in ((2, "b"), (3, "c"))]  # fmt: skip
        await asyncio.sleep(0.01)
        assert len(link.sent) == 1  # one in flight per broker
        link.gate.set()
        return await asyncio.gather(first, *queued)

    assert asyncio.run(run()) == [{}, {}, {("t", 0): E.INVALID_TXN_STATE}]
    assert [[t[0] for t in req] for req in link.sent] == [["a"], ["b", "c"]]


def test_a_second_question_for_one_id_replaces_the_queued_one() -> None:
    link = FakeLink()

    async def run() -> list[Any]:
        v = verifier(link)
        link.gate = asyncio.Event()
        busy = asyncio.ensure_future(v.verify("x", 1, 0, [("t", 9)]))
        await asyncio.sleep(0)
        same = asyncio.ensure_future(v.verify("a", 1, 5, [("t", 0)]))
        await asyncio.sleep(0)
        retry = asyncio.ensure_future(v.verify("a", 1, 5, [("t", 0)]))
        await asyncio.sleep(0)
        newer = asyncio.ensure_future(v.verify("a", 1, 6, [("t", 0)]))
        await asyncio.sleep(0)
        older = await v.verify("a", 1, 4, [("t", 0)])
        link.gate.set()
        return [older, *await asyncio.gather(same, retry, newer, busy)]

    older, same, retry, newer, busy = asyncio.run(run())
    assert older == {("t", 0): E.INVALID_PRODUCER_EPOCH}  # fenced by the queued epoch 6
    assert same == {("t", 0): E.NETWORK_EXCEPTION}  # the client retried
    assert retry == {("t", 0): E.INVALID_PRODUCER_EPOCH}  # a newer epoch came
    assert newer == {} and busy == {}
    assert [[(t[0], t[2]) for t in req] for req in link.sent] == [[("x", 0)], [("a", 6)]]


def test_no_coordinator_is_coordinator_not_available() -> None:
    link = FakeLink()

    async def run() -> Any:
        return await verifier(link, coordinator=None).verify("a", 1, 0, [("t", 0)])

    assert asyncio.run(run()) == {("t", 0): E.COORDINATOR_NOT_AVAILABLE}
    assert link.sent == []


def test_failures_are_network_exceptions_and_drop_the_link() -> None:
    link = FakeLink()
    link.fail = ConnectionError("reset")

    async def run() -> Any:
        return await verifier(link).verify("a", 1, 0, [("t", 0)])

    assert asyncio.run(run()) == {("t", 0): E.NETWORK_EXCEPTION}
    assert link.closed == 1


def test_a_coordinator_without_verification_lets_the_batch_through() -> None:
    link = FakeLink()
    link.fail = KafkaError(E.UNSUPPORTED_VERSION, "broker 2")

    async def run() -> Any:
        return await verifier(link).verify("a", 1, 0, [("t", 0)])

    assert asyncio.run(run()) == {}


def test_a_top_level_error_applies_to_all_and_hides_cluster_authorization() -> None:
    link = FakeLink()
    link.top_error = E.CLUSTER_AUTHORIZATION_FAILED

    async def run() -> Any:
        return await verifier(link).verify("a", 1, 0, [("t", 0), ("u", 1)])

    assert asyncio.run(run()) == {("t", 0): E.INVALID_TXN_STATE, ("u", 1): E.INVALID_TXN_STATE}
