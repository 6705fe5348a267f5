"""Moves between two log directories of one broker, without a running broker: the
copier (offsets, epochs, truncations, retention), the swap's crash-safe steps (a
crash after each, then a restart), and the future log across restarts."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from kt.broker.log_dir_swap import STEPS, replace_current_with_future
from kt.broker.log_manager import LogManager
from kt.broker.partition import Partition, PartitionState
from kt.broker.replica_manager import ReplicaManager
from kt.broker.replication.alter_log_dirs import copy_chunk, future_replica, truncate_diverged
from kt.storage import record_batch as v2
from kt.storage.checkpoint import TopicPartition
from kt.storage.log import PartitionLog
from kt.storage.log_config import LogConfig

TID = bytes(range(16))
TP = TopicPartition("t", 0)
PID = 4242
# Producer state expires by the batches' timestamps: they must be recent.
NOW = int(time.time() * 1000)


class Crash(Exception):
    """A simulated crash at a swap step."""


def _halt(message: str) -> None:
    raise AssertionError(message)


def start(dirs: list[Path]) -> tuple[LogManager, ReplicaManager]:
    """A 'broker' over `dirs`: load every log and host its partitions."""
    logs = LogManager(dirs, 1, LogConfig(segment_bytes=4096), halt=_halt)
    logs.lock_and_validate(None)
    logs.load_logs({}, 1)
    rm = ReplicaManager(1, logs)
    for tp, plog in logs.logs.items():
        rm.create_partition(tp, TID, plog)
    return logs, rm


def crash(logs: LogManager) -> None:
    """Stop without a clean shutdown: nothing flushed or checkpointed, locks freed."""
    logs.release_locks()


def produce(rm: ReplicaManager, first_seq: int, count: int, size: int = 200) -> int:
    """`count` idempotent batches of one record; returns the next sequence."""
    for i in range(count):
        seq = first_seq + i
        batch = v2.build_batch(
            [v2.RecordSpec(b"k", f"{seq:06d}".encode() + b"x" * size, timestamp=NOW)],
            producer_id=PID, producer_epoch=0, base_sequence=seq,
        )  # fmt: skip
        rm.append_records(TP.topic, TP.partition, batch, now_ms=NOW)
    return first_seq + count


def batches(plog: PartitionLog) -> list[tuple[int, int, bytes]]:
    """(base offset, leader epoch, bytes) of every batch: what a copy must keep."""
    out = []
    for b in plog.iter_batches():
        assert b.header is not None
        out.append((b.header.base_offset, b.header.partition_leader_epoch, bytes(b.data)))
    return out


def copy_all(part: Partition, future: PartitionLog, chunk: int = 1000) -> None:
    """Copy `part`'s log into its future log until caught up, as the copier does."""
    replica = future_replica(part, future)
    current = part.log
    for _ in range(10_000):
        if future.log_end_offset == current.log_end_offset and not truncate_diverged(
            current, replica
        ):
            return
        copy_chunk(current, replica, chunk)
    raise AssertionError("the copy never caught up")


@pytest.fixture
def dirs(tmp_path: Path) -> list[Path]:
    return [tmp_path / "a", tmp_path / "b"]


def hosted(dirs: list[Path]) -> tuple[LogManager, ReplicaManager]:
    logs, rm = start(dirs)
    logs.preferred_dirs[TP] = dirs[0]
    rm.create_partition(TP, TID, logs.create(TP, TID, {}))
    assert logs.dir_of[TP] == dirs[0]
    return logs, rm


def test_copy_keeps_offsets_epochs_and_follows_truncation(dirs: list[Path]) -> None:
    logs, rm = hosted(dirs)
    part = rm.get(TP)
    assert part is not None
    seq = produce(rm, 0, 30)
    part.make_leader(PartitionState(1, 3, [1], 1, [1]))
    seq = produce(rm, seq, 30)
    future = logs.create_future(TP, dirs[1])
    assert future.dir.parent == dirs[1] and future.dir.name.endswith("-future")
    copy_all(part, future)
    assert batches(future) == batches(part.log)
    assert future.leader_epoch_cache.entries == part.log.leader_epoch_cache.entries
    # The current log is truncated (a new leader) and rewritten in a later epoch:
    # the future is cut where they diverge and copies the new records.
    part.truncate_to(40)
    part.make_leader(PartitionState(1, 5, [1], 2, [1]))
    produce(rm, 40, 20, size=150)  # the producer resends from there, other bytes
    assert future.log_end_offset == part.log.log_end_offset  # same end, other data
    copy_all(part, future)
    assert batches(future) == batches(part.log)
    logs.delete(TP)
    assert not logs.future_logs and not list(dirs[1].glob("t-0*-future"))


def test_copy_restarts_at_the_log_start_when_retention_passed_it(dirs: list[Path]) -> None:
    logs, rm = hosted(dirs)
    part = rm.get(TP)
    assert part is not None
    produce(rm, 0, 80)
    future = logs.create_future(TP, dirs[1])
    copy_chunk(part.log, future_replica(part, future), 1000)
    assert 0 < future.log_end_offset < 40
    rm.delete_records(TP.topic, TP.partition, 40)
    copy_all(part, future)
    assert future.log_start_offset == 40
    assert batches(future) == batches(part.log)


def test_swap_serves_the_moved_log_with_its_state(dirs: list[Path]) -> None:
    logs, rm = hosted(dirs)
    part = rm.get(TP)
    assert part is not None
    seq = produce(rm, 0, 50)
    rm.delete_records(TP.topic, TP.partition, 5)
    # A new leader epoch with nothing written in it yet: only the cache knows it.
    part.make_leader(PartitionState(1, 7, [1], 1, [1]))
    old = part.log
    epochs = old.leader_epoch_cache.entries
    assert epochs[-1] == (7, old.log_end_offset)
    future = logs.create_future(TP, dirs[1])
    copy_all(part, future)
    expected = batches(old)
    steps: list[str] = []
    new = replace_current_with_future(logs, part, on_step=steps.append)
    assert steps == list(STEPS)
    assert part.log is new and logs.get(TP) is new and logs.dir_of[TP] == dirs[1]
    assert new.dir == dirs[1] / "t-0" and not logs.future_logs
    assert batches(new) == expected
    assert (new.log_start_offset, new.high_watermark) == (5, old.high_watermark)
    assert new.leader_epoch_cache.entries == epochs
    assert not (dirs[0] / "t-0").exists()
    assert len(list(dirs[0].glob("t-0.*-delete"))) == 1
    # Producer state came along: the next sequence is accepted, a duplicate is not new.
    produce(rm, seq, 1)
    end = new.log_end_offset
    produce(rm, seq, 1)
    assert new.log_end_offset == end
    moved = batches(new)[len(expected) :]
    # The replaced log's directory goes after file.delete.delay.ms.
    LogManager.remove_dirs(logs.take_expired_deletions(now_ms=2**62))
    assert not list(dirs[0].glob("t-0*"))
    rm.close()
    logs.shutdown()
    logs, rm = start(dirs)
    assert logs.dir_of[TP] == dirs[1] and batches(logs.logs[TP]) == [*expected, *moved]
    rm.close()
    logs.shutdown()


@pytest.mark.parametrize("step", STEPS)
def test_a_crash_at_each_swap_step_recovers_one_whole_copy(dirs: list[Path], step: str) -> None:
    logs, rm = hosted(dirs)
    part = rm.get(TP)
    assert part is not None
    seq = produce(rm, 0, 60)
    future = logs.create_future(TP, dirs[1])
    copy_all(part, future)
    expected = batches(part.log)
    hw = part.log.high_watermark

    def at(name: str) -> None:
        if name == step:
            raise Crash(name)

    with pytest.raises(Crash):
        replace_current_with_future(logs, part, on_step=at)
    crash(logs)

    logs, rm = start(dirs)
    # One live directory of the partition, in the old dir before the commit step and
    # in the new one from it on; no leftovers but a resumable future before it.
    live = [d for d in dirs if (d / "t-0").is_dir()]
    committed = STEPS.index(step) >= STEPS.index("committed")
    assert live == [dirs[1] if committed else dirs[0]]
    assert not list(dirs[0].glob("t-0.*-delete")) and not list(dirs[1].glob("t-0.*-delete"))
    futures = list(dirs[1].glob("t-0.*-future"))
    assert len(futures) == (0 if committed else 1)
    plog = logs.logs[TP]
    assert batches(plog) == expected
    assert plog.high_watermark == hw
    # Producer state is whole: a retry of the last batch is a duplicate.
    restarted = rm.get(TP)
    assert restarted is not None and restarted.producer_state is not None
    entry = restarted.producer_state.last_entry(PID)
    assert entry is not None and entry.last_seq == seq - 1
    if not committed:
        # The move resumes from the future log found at startup and completes.
        assert TP in logs.future_logs
        part = rm.get(TP)
        assert part is not None
        copy_all(part, logs.future_logs[TP])
        replace_current_with_future(logs, part)
        assert logs.dir_of[TP] == dirs[1] and batches(part.log) == expected
    rm.close()
    logs.shutdown()


def test_a_lone_future_is_left_alone_while_a_dir_is_offline(dirs: list[Path]) -> None:
    logs, rm = hosted(dirs)
    part = rm.get(TP)
    assert part is not None
    produce(rm, 0, 10)
    future = logs.create_future(TP, dirs[1])
    copy_all(part, future)
    with pytest.raises(Crash):
        replace_current_with_future(logs, part, on_step=lambda s: _raise(s == "committed"))
    crash(logs)
    third = dirs[0].parent / "c"
    third.write_text("not a directory")  # offline at startup
    logs, rm = start([*dirs, third])
    assert third in logs.offline_dirs
    assert TP not in logs.logs and TP not in logs.future_logs
    assert len(list(dirs[1].glob("t-0.*-future"))) == 1  # kept on disk for later
    logs.shutdown()


def test_preferred_dir_is_used_at_creation(dirs: list[Path]) -> None:
    logs, _ = start(dirs)
    logs.maybe_update_preferred_dir(TP, dirs[1])
    assert logs.create(TP, TID, {}).dir.parent == dirs[1]
    assert TP not in logs.preferred_dirs
    logs.shutdown()


def _raise(yes: bool) -> None:
    if yes:
        raise Crash()


def test_transactions_move_with_their_index_and_open_state(dirs: list[Path]) -> None:
    logs, rm = hosted(dirs)
    # Transactions written without a coordinator (verification off, as Kafka allows).
    rm.reconfigure(txn_verification_enabled=False)
    part = rm.get(TP)
    assert part is not None

    def txn(pid: int, seq: int, count: int) -> None:
        for i in range(count):
            batch = v2.build_batch(
                [v2.RecordSpec(b"k", b"t" * 300, timestamp=NOW)], producer_id=pid,
                producer_epoch=0, base_sequence=seq + i, is_transactional=True,
            )  # fmt: skip
            rm.append_records(TP.topic, TP.partition, batch, now_ms=NOW)

    txn(7, 0, 20)  # aborted below
    produce(rm, 0, 10)
    part.append_txn_marker(7, 0, 1, commit=False, now_ms=NOW)
    txn(8, 0, 20)  # committed
    part.append_txn_marker(8, 0, 1, commit=True, now_ms=NOW)
    txn(9, 0, 5)  # still open: holds the last stable offset
    old = part.log
    aborted = old.collect_aborted_txns(0, old.log_end_offset)
    lso = part.last_stable_offset()
    assert len(aborted) == 1 and lso < old.log_end_offset
    future = logs.create_future(TP, dirs[1])
    copy_all(part, future)
    assert future.collect_aborted_txns(0, future.log_end_offset) == aborted
    replace_current_with_future(logs, part)
    assert part.log.collect_aborted_txns(0, part.log.log_end_offset) == aborted
    assert part.last_stable_offset() == lso
    part.append_txn_marker(9, 0, 1, commit=True, now_ms=NOW)
    assert part.last_stable_offset() == part.log.log_end_offset
    rm.close()
    logs.shutdown()
