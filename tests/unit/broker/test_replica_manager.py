"""The ReplicaManager's partition resolution and operations, and the error-code table
(without a running broker)."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from kt.broker import errors
from kt.broker.errors import error_code_for
from kt.broker.log_manager import LogManager
from kt.broker.metadata.cache import LiveBroker, PartitionView
from kt.broker.replica_manager import ReplicaManager
from kt.protocol import ErrorCode
from kt.storage import errors as storage_errors
from kt.storage import log as storage_log
from kt.storage import record_batch as v2
from kt.storage.checkpoint import TopicPartition
from kt.storage.log_config import LogConfig

TID = bytes(range(16))


def _halt(message: str) -> None:
    raise AssertionError(message)


@pytest.fixture
def rm(tmp_path: Path) -> Iterator[ReplicaManager]:
    logs = LogManager([tmp_path / "a", tmp_path / "b"], 1, LogConfig(), halt=_halt)
    logs.lock_and_validate(None)
    logs.load_logs({}, 1)
    manager = ReplicaManager(1, logs)
    for p in range(2):
        tp = TopicPartition("t", p)
        manager.create_partition(tp, TID, logs.create(tp, TID, {}))
    # The controller's view, as a running broker has it: "t" with the two partitions.
    view = PartitionView(leader=1, leader_epoch=0, isr=(1,), replicas=(1,))
    manager.metadata_cache.update(
        controller_id=1, controller_epoch=1, brokers=[LiveBroker(1, ())],
        partitions=[("t", TID, p, view) for p in range(2)],
    )  # fmt: skip
    yield manager
    manager.close()
    logs.shutdown()


def _batch(*values: bytes, key: bytes | None = b"k") -> bytes:
    return v2.build_batch([v2.RecordSpec(key, v, timestamp=1000) for v in values])


def test_error_codes_follow_the_class_hierarchy() -> None:
    assert error_code_for(errors.NotLeaderOrFollowerError()) == ErrorCode.NOT_LEADER_OR_FOLLOWER
    assert error_code_for(storage_log.RecordTooLargeError("x")) == ErrorCode.MESSAGE_TOO_LARGE
    assert error_code_for(storage_log.InvalidRecordError("x")) == ErrorCode.INVALID_RECORD
    # Unlisted subclasses inherit their base's code.
    assert error_code_for(storage_errors.CorruptRecordError("x")) == ErrorCode.CORRUPT_MESSAGE
    assert error_code_for(storage_errors.CorruptIndexError("x")) == ErrorCode.KAFKA_STORAGE_ERROR
    assert error_code_for(FileNotFoundError()) == ErrorCode.KAFKA_STORAGE_ERROR

    class Special(errors.NotEnoughReplicasError):
        pass

    assert error_code_for(Special()) == ErrorCode.NOT_ENOUGH_REPLICAS
    assert (
        error_code_for(storage_log.RecordBatchTooLargeError("x")) == ErrorCode.RECORD_LIST_TOO_LARGE
    )
    assert error_code_for(ValueError()) == ErrorCode.UNKNOWN_SERVER_ERROR


def test_producer_state_codes_map_to_typed_errors() -> None:
    for code, cls in (
        (ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER, errors.OutOfOrderSequenceError),
        (ErrorCode.INVALID_PRODUCER_EPOCH, errors.InvalidProducerEpochError),
        (ErrorCode.UNKNOWN_PRODUCER_ID, errors.UnknownProducerIdError),
        (ErrorCode.INVALID_TXN_STATE, errors.InvalidTxnStateError),
        (ErrorCode.INVALID_RECORD, errors.InvalidRecordError),
    ):
        exc = errors.broker_error(code, "why")
        assert type(exc) is cls and exc.message == "why" and error_code_for(exc) == code


def test_get_partition_or_error(rm: ReplicaManager) -> None:
    assert rm.get_partition_or_error("t", 1).tp == TopicPartition("t", 1)
    with pytest.raises(errors.UnknownTopicOrPartitionError, match="t-2"):
        rm.get_partition_or_error("t", 2)
    with pytest.raises(errors.UnknownTopicOrPartitionError):
        rm.get_partition_or_error("other", 0)
    part = rm.get_partition_or_error("t", 0)
    part.leader_id = 2  # another broker leads it (a follower replica here)
    with pytest.raises(errors.NotLeaderOrFollowerError, match="on broker 1"):
        rm.get_partition_or_error("t", 0)
    assert rm.get_partition_or_error("t", 0, require_leader=False) is part
    part.offline = True
    with pytest.raises(errors.KafkaStorageError, match="offline log directory"):
        rm.get_partition_or_error("t", 0, require_leader=False)


def test_a_partition_not_hosted_here_is_unknown_only_when_the_cluster_lacks_it(
    rm: ReplicaManager,
) -> None:
    # The controller's view names "u"-0 (led by broker 2): not hosted here, so
    # NOT_LEADER_OR_FOLLOWER (clients refresh their metadata), as Kafka answers.
    view = PartitionView(leader=2, leader_epoch=0, isr=(2,), replicas=(2,))
    rm.metadata_cache.update(controller_id=1, controller_epoch=1,
                             brokers=[LiveBroker(1, ()), LiveBroker(2, ())],
                             partitions=[("u", TID, 0, view)])  # fmt: skip
    with pytest.raises(errors.NotLeaderOrFollowerError, match="not hosted on broker 1"):
        rm.get_partition_or_error("u", 0)
    with pytest.raises(errors.UnknownTopicOrPartitionError):
        rm.get_partition_or_error("u", 1)


def test_before_any_view_of_the_cluster_nothing_is_unknown(tmp_path: Path) -> None:
    # A broker just started: no UpdateMetadata yet, so it cannot tell a partition
    # that does not exist from one it has not heard of.
    logs = LogManager([tmp_path / "a"], 1, LogConfig(), halt=_halt)
    logs.lock_and_validate(None)
    logs.load_logs({}, 1)
    manager = ReplicaManager(1, logs)
    try:
        assert not manager.metadata_cache.ready
        for call in (
            lambda: manager.get_partition_or_error("t", 0),
            lambda: manager.append_records("t", 0, _batch(b"a"), now_ms=1000),
            lambda: manager.delete_records("t", 0, 0),
            lambda: manager.fetch_offset_for_timestamp("t", 0, -1),
        ):
            with pytest.raises(errors.NotLeaderOrFollowerError, match="no metadata yet"):
                call()
        manager.update_metadata(1, 1, 0, [LiveBroker(1, ())], [])
        assert manager.metadata_cache.ready
        with pytest.raises(errors.UnknownTopicOrPartitionError):
            manager.get_partition_or_error("t", 0)
    finally:
        manager.close()
        logs.shutdown()


def test_leader_epoch_check(rm: ReplicaManager) -> None:
    part = rm.get_partition_or_error("t", 0)
    part.leader_epoch = 3
    rm.check_current_leader_epoch(part, -1)
    rm.check_current_leader_epoch(part, 3)
    with pytest.raises(errors.FencedLeaderEpochError):
        rm.check_current_leader_epoch(part, 2)
    with pytest.raises(errors.UnknownLeaderEpochError):
        rm.check_current_leader_epoch(part, 4)


def test_append_and_read(rm: ReplicaManager) -> None:
    result = rm.append_records("t", 0, _batch(b"a", b"b"), now_ms=1000)
    assert (result.first_offset, result.last_offset) == (0, 1)
    part = rm.get_partition_or_error("t", 0)
    sl = rm.read(part, 0, 1 << 20, upper_bound=part.high_watermark, min_one_message=True)
    assert sl is not None and sl.length > 0
    with pytest.raises(storage_errors.OffsetOutOfRangeError):
        rm.read(part, 5, 100, upper_bound=part.high_watermark, min_one_message=True)


def test_append_refusals(rm: ReplicaManager) -> None:
    with pytest.raises(errors.InvalidTopicError, match="internal topic"):
        rm.append_records("__consumer_offsets", 0, _batch(b"a"), now_ms=1000)
    with pytest.raises(errors.UnknownTopicOrPartitionError):
        rm.append_records("t", 9, _batch(b"a"), now_ms=1000)
    with pytest.raises(errors.InvalidRecordError):
        rm.append_records("t", 0, b"", now_ms=1000)
    # A refused batch does not take the partition offline; a corrupt one neither.
    bad = bytearray(_batch(b"a"))
    bad[-1] ^= 0xFF
    with pytest.raises(storage_errors.CorruptRecordError):
        rm.append_records("t", 0, bad, now_ms=1000)
    assert not rm.get_partition_or_error("t", 0).offline


def test_delete_records(rm: ReplicaManager) -> None:
    rm.append_records("t", 0, _batch(b"a", b"b", b"c"), now_ms=1000)
    assert rm.delete_records("t", 0, 2) == 2
    assert rm.delete_records("t", 0, 1) == 2  # never backwards
    assert rm.delete_records("t", 0, -1) == 3  # -1: the high watermark
    with pytest.raises(storage_errors.OffsetOutOfRangeError):
        rm.delete_records("t", 0, 4)
    with pytest.raises(errors.UnknownTopicOrPartitionError):
        rm.delete_records("t", 5, 0)


def test_storage_failure_takes_the_directory_offline(rm: ReplicaManager) -> None:
    # The partition outside the metadata directory (whose failure halts the broker).
    (part,) = [p for p in rm if rm.logs.dir_of[p.tp] != rm.logs.metadata_dir]
    d = rm.logs.dir_of[part.tp]
    rm.on_storage_error(part, OSError(5, "Input/output error"))
    assert part.offline and d in rm.logs.offline_dirs
    with pytest.raises(errors.KafkaStorageError):
        rm.append_records("t", part.tp.partition, _batch(b"a"), now_ms=1000)


def test_remove_partition(rm: ReplicaManager) -> None:
    part = rm.remove_partition(TopicPartition("t", 1))
    assert part is not None and part.offline
    assert TopicPartition("t", 1) not in rm and len(rm) == 1
    assert [p.tp for p in rm] == [TopicPartition("t", 0)]


def test_partition_refusals_become_typed_errors(rm: ReplicaManager) -> None:
    part = rm.get_partition_or_error("t", 0)
    # The partition itself says it does not lead (e.g. a LeaderAndIsr raced the check).
    part.local_broker_id = 7
    with pytest.raises(errors.NotLeaderOrFollowerError):
        rm.append_records("t", 0, _batch(b"a"), now_ms=1000)


def test_last_offset_for_leader_epoch_counts_the_uncached_current_epoch(
    rm: ReplicaManager,
) -> None:
    empty = rm.get_partition_or_error("t", 1)
    assert rm.last_offset_for_leader_epoch("t", 1, 0) == (0, 0)
    assert rm.last_offset_for_leader_epoch("t", 1, 1) == (-1, -1)
    assert rm.last_offset_for_leader_epoch("t", 1, -1) == (-1, -1)
    part = rm.get_partition_or_error("t", 0)
    rm.append_records("t", 0, _batch(*[b"x"] * 10), now_ms=1000)
    part.leader_epoch = 2
    rm.append_records("t", 0, _batch(*[b"y"] * 5), now_ms=1000)
    assert rm.last_offset_for_leader_epoch("t", 0, 2) == (2, 15)
    assert rm.last_offset_for_leader_epoch("t", 0, 1) == (0, 10)
    assert rm.last_offset_for_leader_epoch("t", 0, 3) == (-1, -1)
    part.leader_epoch = 4  # a new epoch nothing was written in yet
    assert rm.last_offset_for_leader_epoch("t", 0, 4) == (4, 15)
    assert rm.last_offset_for_leader_epoch("t", 0, 3) == (2, 15)
    assert rm.last_offset_for_leader_epoch("t", 0, 1) == (0, 10)
    with pytest.raises(errors.FencedLeaderEpochError):
        rm.last_offset_for_leader_epoch("t", 0, 1, current_leader_epoch=3)
    assert empty.leader_epoch == 0


def test_fetch_offset_for_timestamp(rm: ReplicaManager) -> None:
    rm.append_records("t", 0, _batch(b"a", b"b"), now_ms=1000)  # timestamps 1000
    assert rm.fetch_offset_for_timestamp("t", 0, -2) == (0, -1, 0)  # earliest
    assert rm.fetch_offset_for_timestamp("t", 0, -1) == (2, -1, 0)  # latest
    assert rm.fetch_offset_for_timestamp("t", 0, 999) == (0, 1000, 0)
    assert rm.fetch_offset_for_timestamp("t", 0, 1001) == (-1, -1, -1)
    part = rm.get_partition_or_error("t", 0)
    part.leader_id = 2
    with pytest.raises(errors.NotLeaderOrFollowerError):
        rm.fetch_offset_for_timestamp("t", 0, -2)
    # The debugging replica id may ask a follower.
    assert rm.fetch_offset_for_timestamp("t", 0, -2, require_leader=False)[0] == 0


def test_a_refused_ineligible_follower_waits_for_new_metadata(rm: ReplicaManager) -> None:
    """The controller refuses to add a shutting-down follower to the ISR
    (INELIGIBLE_REPLICA): its leader does not propose it again after every fetch,
    only once the metadata changed (Kafka's leaders re-check eligibility then)."""
    from replication_helpers import state

    from kt.broker.alter_partition import IsrProposal, IsrResult

    part = rm.get(TopicPartition("t", 0))
    assert part is not None
    assert part.make_leader(state(1, 5, [1], [1, 2]), now_ms=1000)
    proposals: list[IsrProposal] = []

    def submit(p: IsrProposal, answer: object) -> bool:
        proposals.append(p)
        answer(IsrResult(ErrorCode.INELIGIBLE_REPLICA))  # type: ignore[operator]
        return True

    rm.submit_isr_change = submit
    for now in (1001, 1002, 1003):
        part.update_follower_fetch_state(2, 0, now, 0)
        rm.maybe_expand_isr(part, 2)
    assert [p.new_isr for p in proposals] == [(1, 2)]
    rm.metadata_cache.version += 1  # an UpdateMetadata arrived
    part.update_follower_fetch_state(2, 0, 1004, 0)
    rm.maybe_expand_isr(part, 2)
    assert len(proposals) == 2 and part.isr == [1]


def _assign(rm: ReplicaManager, placement: dict[TopicPartition, tuple[int, ...]]) -> None:
    from kt.broker.metadata.cache import PartitionView

    rm.metadata_cache.update(
        controller_id=2, controller_epoch=1, brokers=[],
        partitions=[(tp.topic, TID, tp.partition, PartitionView(r[0], 1, r, r))
                    for tp, r in placement.items()],
    )  # fmt: skip


def _state(tp: TopicPartition, replicas: tuple[int, ...]) -> Any:
    from kt.broker.replica_manager import PartitionStateChange

    return PartitionStateChange(tp=tp, topic_id=TID, controller_epoch=1, leader=replicas[0],
                                leader_epoch=5, isr=replicas, partition_epoch=1,
                                replicas=replicas)  # fmt: skip


def test_full_leader_and_isr_deletes_replicas_assigned_elsewhere(rm: ReplicaManager) -> None:
    """A replica a reassignment removed while this broker was down: the full
    LeaderAndIsr at its return leaves it out and the metadata places it elsewhere."""
    t0, t1, u0 = TopicPartition("t", 0), TopicPartition("t", 1), TopicPartition("u", 0)
    rm.create_partition(u0, TID, rm.logs.create(u0, TID, {}))  # a topic nobody knows
    _assign(rm, {t0: (1, 2), t1: (2, 3)})
    stopped: list[TopicPartition] = []
    rm.stop_listeners.append(stopped.extend)
    # An incremental request never deletes anything.
    err, _ = asyncio.run(rm.become_leader_or_follower(2, 1, -1, [_state(t0, (1, 2))], {}))
    assert err == ErrorCode.NONE and t1 in rm and rm.logs.get(t1) is not None
    err, results = asyncio.run(
        rm.become_leader_or_follower(2, 1, -1, [_state(t0, (1, 2))], {}, full=True)
    )
    assert err == ErrorCode.NONE and results == {t0: ErrorCode.NONE}
    assert t1 not in rm and rm.logs.get(t1) is None and stopped == [t1]
    assert t0 in rm and u0 in rm and rm.logs.get(u0) is not None


def test_refused_full_leader_and_isr_deletes_nothing(rm: ReplicaManager) -> None:
    t1 = TopicPartition("t", 1)
    _assign(rm, {t1: (2, 3)})
    rm.controller_epoch = 7
    err, _ = asyncio.run(rm.become_leader_or_follower(2, 1, -1, [], {}, full=True))
    assert err == ErrorCode.STALE_CONTROLLER_EPOCH and t1 in rm
