"""WriteTxnMarkers in process, through the wire codec: markers end transactions on the
partitions' logs (producer state, `.txnindex`, last stable offset) and each partition
gets Kafka's error for what it refused.

The handler reads only the replica manager and the config: the tests give it
those (`ReplicasOnly`, `HandlerServices.only`), no broker."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from handler_harness import ReplicasOnly

from kt.protocol import ErrorCode, apis
from kt.storage import record_batch as v2
from kt.storage.checkpoint import TopicPartition
from kt.storage.txn_index import AbortedTxn

PID = 4000
TP0 = TopicPartition("t", 0)


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[ReplicasOnly]:
    # Transactional batches are appended directly, without a coordinator: as with
    # Kafka's transaction.partition.verification.enable=false (KIP-890's checks
    # have their own tests, test_txn_verification*.py).
    b = ReplicasOnly(
        tmp_path,
        {"t": 2, "__consumer_offsets": 4},
        **{"transaction.partition.verification.enable": "false"},
    )
    yield b
    b.close()


def txn_batch(n: int, seq: int, *, pid: int = PID, epoch: int = 0) -> bytes:
    now = int(time.time() * 1000)
    recs = [v2.RecordSpec(b"k%d" % i, b"v%d" % i, timestamp=now) for i in range(n)]
    return v2.build_batch(
        recs, producer_id=pid, producer_epoch=epoch, base_sequence=seq, is_transactional=True
    )


def produce(b: ReplicasOnly, data: bytes, partition: int = 0) -> int:
    result = b.replica_manager.append_records(
        "t", partition, data, now_ms=int(time.time() * 1000), acks=-1
    )
    return int(result.first_offset)


def markers(
    b: ReplicasOnly,
    version: int,
    *entries: tuple[int, int, bool, int, dict[str, list[int]]],
) -> dict[tuple[int, str, int], int]:
    body = apis.WRITE_TXN_MARKERS.request(
        markers=[
            {
                "producer_id": pid,
                "producer_epoch": epoch,
                "transaction_result": commit,
                "coordinator_epoch": coord,
                "topics": [{"name": t, "partition_indexes": ps} for t, ps in topics.items()],
            }
            for pid, epoch, commit, coord, topics in entries
        ]
    )
    resp: Any = b.call(apis.WRITE_TXN_MARKERS, version, body)
    return {
        (m.producer_id, t.name, p.partition_index): p.error_code
        for m in resp.markers
        for t in m.topics
        for p in t.partitions
    }


@pytest.mark.parametrize("version", [0, 1])
def test_commit_marker_ends_the_transaction_and_moves_the_lso(
    broker: ReplicasOnly, version: int
) -> None:
    part = broker.replica_manager.get(TP0)
    assert part is not None
    produce(broker, v2.build_batch([v2.RecordSpec(b"a", b"plain")]))
    first = produce(broker, txn_batch(3, 0))
    produce(broker, txn_batch(2, 3))
    assert part.high_watermark == 6
    assert part.last_stable_offset() == first == 1
    assert [d.current_txn_start_offset for d in part.producer_state.describe_producers()] == [1]

    got = markers(broker, version, (PID, 0, True, 5, {"t": [0]}))
    assert got == {(PID, "t", 0): ErrorCode.NONE}
    assert part.log_end_offset == 7 and part.last_stable_offset() == 7
    entry = part.producer_state.last_entry(PID)
    assert entry is not None and entry.coordinator_epoch == 5
    assert entry.current_txn_first_offset is None
    # The marker is a control batch: COMMIT, coordinator epoch 5, producer id/epoch.
    last = list(part.log.iter_batches(6))[-1]
    assert last.header is not None and last.header.is_control and last.header.is_transactional
    assert (last.header.producer_id, last.header.producer_epoch) == (PID, 0)
    rec = next(iter(last.records()))
    assert v2.parse_control_key(rec.key) == (0, v2.CONTROL_COMMIT)
    assert v2.parse_end_txn_marker(rec.value) == (0, 5)
    # Committed: nothing in the .txnindex.
    assert all(len(s.txn_index) == 0 for s in part.log.segments)


def test_abort_marker_indexes_the_transaction(broker: ReplicasOnly) -> None:
    part = broker.replica_manager.get(TP0)
    assert part is not None
    first = produce(broker, txn_batch(2, 0))
    other = produce(broker, txn_batch(1, 0, pid=PID + 1))
    produce(broker, txn_batch(1, 2))
    got = markers(broker, 1, (PID, 0, False, 0, {"t": [0]}))
    assert got == {(PID, "t", 0): ErrorCode.NONE}
    # The other producer's transaction is still open: it bounds the LSO and is the
    # last stable offset recorded with the aborted transaction.
    assert part.log.segments[-1].txn_index.entries == [AbortedTxn(PID, first, 4, other)]
    assert part.last_stable_offset() == other
    # A read_committed fetch of [0, LSO) gets records 0-1 of the aborted transaction.
    assert part.aborted_transactions(0, other) == [AbortedTxn(PID, first, 4, other)]
    assert part.aborted_transactions(5, 100) == []
    markers(broker, 1, (PID + 1, 0, True, 0, {"t": [0]}))
    assert part.last_stable_offset() == part.log_end_offset == 6


def test_marker_without_transaction_is_written_but_not_indexed(broker: ReplicasOnly) -> None:
    part = broker.replica_manager.get(TP0)
    assert part is not None
    got = markers(broker, 1, (PID, 3, False, 1, {"t": [0]}))
    assert got == {(PID, "t", 0): ErrorCode.NONE}
    assert part.log_end_offset == 1 and part.last_stable_offset() == 1
    assert all(len(s.txn_index) == 0 for s in part.log.segments)
    entry = part.producer_state.last_entry(PID)
    assert entry is not None and (entry.producer_epoch, entry.coordinator_epoch) == (3, 1)


def test_partition_errors(broker: ReplicasOnly) -> None:
    produce(broker, txn_batch(1, 0, epoch=2))
    markers(broker, 1, (PID, 2, False, 4, {"t": [0]}))
    got = markers(
        broker,
        1,
        (PID, 1, True, 4, {"t": [0]}),  # an older producer epoch
        (PID + 1, 0, True, 0, {"t": [7], "nope": [0]}),
    )
    assert got == {
        (PID, "t", 0): ErrorCode.INVALID_PRODUCER_EPOCH,
        (PID + 1, "t", 7): ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
        (PID + 1, "nope", 0): ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
    }
    # An older coordinator epoch is a zombie coordinator.
    assert markers(broker, 1, (PID, 2, True, 3, {"t": [0]})) == {
        (PID, "t", 0): ErrorCode.TRANSACTION_COORDINATOR_FENCED
    }
    # Nothing refused was written.
    part = broker.replica_manager.get(TP0)
    assert part is not None and part.log_end_offset == 2


def test_markers_of_one_producer_share_an_entry(broker: ReplicasOnly) -> None:
    produce(broker, txn_batch(1, 0), partition=0)
    produce(broker, txn_batch(1, 1), partition=1)
    body = apis.WRITE_TXN_MARKERS.request(
        markers=[
            {"producer_id": PID, "producer_epoch": 0, "transaction_result": True,
             "coordinator_epoch": 0, "topics": [{"name": "t", "partition_indexes": [0]}]},
            {"producer_id": PID, "producer_epoch": 0, "transaction_result": True,
             "coordinator_epoch": 0, "topics": [{"name": "t", "partition_indexes": [1]}]},
        ]
    )  # fmt: skip
    resp: Any = broker.call(apis.WRITE_TXN_MARKERS, 1, body)
    assert [m.producer_id for m in resp.markers] == [PID]
    assert sorted(p.partition_index for p in resp.markers[0].topics[0].partitions) == [0, 1]


def test_not_leader(broker: ReplicasOnly) -> None:
    part = broker.replica_manager.get(TP0)
    assert part is not None
    part.leader_id = broker.node_id + 1
    try:
        assert markers(broker, 1, (PID, 0, True, 0, {"t": [0]})) == {
            (PID, "t", 0): ErrorCode.NOT_LEADER_OR_FOLLOWER
        }
    finally:
        part.leader_id = broker.node_id


def test_offsets_partitions_tell_the_listeners(broker: ReplicasOnly) -> None:
    heard: list[tuple[TopicPartition, int, bool]] = []
    broker.replica_manager.offsets_txn_listeners.append(
        lambda tp, pid, commit: heard.append((tp, pid, commit))
    )
    produce(broker, txn_batch(1, 0))
    got = markers(broker, 1, (PID, 0, True, 0, {"__consumer_offsets": [3], "t": [0]}))
    assert set(got.values()) == {ErrorCode.NONE}
    assert heard == [(TopicPartition("__consumer_offsets", 3), PID, True)]

    def broken(tp: TopicPartition, pid: int, commit: bool) -> None:
        raise RuntimeError("boom")

    broker.replica_manager.offsets_txn_listeners[:] = [broken]
    got = markers(broker, 1, (PID, 0, False, 0, {"__consumer_offsets": [3]}))
    assert got == {(PID, "__consumer_offsets", 3): ErrorCode.UNKNOWN_SERVER_ERROR}
