"""The purgatory: delayed produce and fetch against fake partitions (and one real)."""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass
from pathlib import Path

from replication_helpers import TP, batch, new_partition, state

from kt.broker.errors import (
    BrokerError,
    NotEnoughReplicasAfterAppendError,
    NotLeaderOrFollowerError,
    RequestTimedOutError,
    error_code_for,
)
from kt.broker.partition import Partition
from kt.broker.purgatory import (
    DelayedFetch,
    DelayedOperationPurgatory,
    DelayedProduce,
    FetchPartitionStatus,
)
from kt.protocol import ErrorCode
from kt.storage.checkpoint import TopicPartition


@dataclass
class FakePartition:
    """Offsets only; each offset is one byte."""

    high_watermark: int = 0
    log_end_offset: int = 0
    leader_epoch: int = 0
    min_isr_broken: bool = False
    leader: bool = True

    def last_stable_offset(self) -> int:
        return self.high_watermark

    def available_bytes(self, fetch_offset: int, upper_bound: int, max_bytes: int) -> int:
        return min(upper_bound - fetch_offset, max_bytes)

    def is_offset_committed(self, required: int) -> tuple[bool, BrokerError | None]:
        if not self.leader:
            return True, NotLeaderOrFollowerError("moved")
        if self.high_watermark < required:
            return False, None
        if self.min_isr_broken:
            return True, NotEnoughReplicasAfterAppendError("shrunk")
        return True, None


def run(coro_fn):  # type: ignore[no-untyped-def]
    return asyncio.run(coro_fn())


def test_produce_completes_when_every_hw_passes() -> None:
    async def main() -> None:
        parts = {"a": FakePartition(), "b": FakePartition()}
        purg: DelayedOperationPurgatory[str] = DelayedOperationPurgatory("produce")
        op: DelayedProduce[str] = DelayedProduce(5000, {"a": 3, "b": 2}, parts.__getitem__)
        assert not purg.try_complete_else_watch(op, ["a", "b"])
        assert purg.watched("a") == 1 and len(purg) == 1
        parts["a"].high_watermark = 3
        assert purg.check_and_complete("a") == 0
        parts["b"].high_watermark = 1
        assert purg.check_and_complete("b") == 0
        parts["b"].high_watermark = 2
        assert purg.check_and_complete("b") == 1
        await asyncio.wait_for(op.wait(), 1)
        assert op.result == {"a": None, "b": None} and not op.expired
        assert len(purg) == 0 and purg.watched("a") == 0
        assert purg.check_and_complete("a") == 0

    run(main)


def test_produce_already_replicated_completes_at_once() -> None:
    async def main() -> None:
        purg: DelayedOperationPurgatory[str] = DelayedOperationPurgatory("produce")
        part = FakePartition(high_watermark=5)
        op: DelayedProduce[str] = DelayedProduce(5000, {"a": 5}, lambda k: part)
        assert purg.try_complete_else_watch(op, ["a"])
        await op.wait()
        assert op.result == {"a": None} and len(purg) == 0

    run(main)


def test_produce_errors_and_timeout() -> None:
    async def main() -> None:
        parts = {"a": FakePartition(), "b": FakePartition(), "c": FakePartition()}

        def lookup(k: str) -> FakePartition:
            if k == "gone":
                raise NotLeaderOrFollowerError("no such partition here")
            return parts[k]

        purg: DelayedOperationPurgatory[str] = DelayedOperationPurgatory("produce")
        offsets = {"a": 1, "b": 1, "c": 1, "gone": 1}
        op: DelayedProduce[str] = DelayedProduce(50, offsets, lookup)
        assert not purg.try_complete_else_watch(op, offsets)
        parts["a"].high_watermark, parts["a"].min_isr_broken = 1, True
        parts["b"].leader = False
        purg.check_and_complete("a")
        purg.check_and_complete("b")
        assert not op.completed
        t0 = time.monotonic()
        await asyncio.wait_for(op.wait(), 2)
        assert time.monotonic() - t0 >= 0.04 and op.expired
        codes = {k: error_code_for(e) if e is not None else None for k, e in op.result.items()}
        assert codes == {
            "a": ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND,
            "b": ErrorCode.NOT_LEADER_OR_FOLLOWER,
            "c": ErrorCode.REQUEST_TIMED_OUT,
            "gone": ErrorCode.NOT_LEADER_OR_FOLLOWER,
        }
        assert isinstance(op.result["c"], RequestTimedOutError)
        assert len(purg) == 0

    run(main)


def test_fetch_consumer_waits_for_hw_follower_for_leo() -> None:
    async def main() -> None:
        part = FakePartition()
        purg: DelayedOperationPurgatory[str] = DelayedOperationPurgatory("fetch")
        status = {"a": FetchPartitionStatus(0, 100)}
        consumer: DelayedFetch[str] = DelayedFetch(5000, 3, status, lambda k: part)
        follower: DelayedFetch[str] = DelayedFetch(
            5000, 3, status, lambda k: part, from_follower=True
        )
        assert not purg.try_complete_else_watch(consumer, ["a"])
        assert not purg.try_complete_else_watch(follower, ["a"])
        part.log_end_offset = 2
        assert purg.check_and_complete("a") == 0
        part.log_end_offset = 3
        assert purg.check_and_complete("a") == 1
        assert follower.completed and follower.satisfied and not consumer.completed
        part.high_watermark = 3
        assert purg.check_and_complete("a") == 1
        await asyncio.wait_for(consumer.wait(), 1)
        assert consumer.satisfied and len(purg) == 0

    run(main)


def test_fetch_times_out_and_completes_on_errors() -> None:
    async def main() -> None:
        part = FakePartition(high_watermark=10, log_end_offset=10)
        purg: DelayedOperationPurgatory[str] = DelayedOperationPurgatory("fetch")
        lookup = {"a": part}.__getitem__
        # Nothing new at the HW: waits until max_wait.
        op: DelayedFetch[str] = DelayedFetch(30, 1, {"a": FetchPartitionStatus(10, 100)}, lookup)
        assert not purg.try_complete_else_watch(op, ["a"])
        await asyncio.wait_for(op.wait(), 2)
        assert op.expired and not op.satisfied
        # Partition max bytes bound the count.
        op2: DelayedFetch[str] = DelayedFetch(5000, 5, {"a": FetchPartitionStatus(6, 2)}, lookup)
        assert not purg.try_complete_else_watch(op2, ["a"])
        # Truncated below the fetch offset: answer now.
        part.high_watermark = part.log_end_offset = 5
        assert purg.check_and_complete("a") == 1 and op2.satisfied
        # A new leader epoch: answer now (with the epoch error).
        op3: DelayedFetch[str] = DelayedFetch(
            5000, 5, {"a": FetchPartitionStatus(5, 100, current_leader_epoch=0)}, lookup
        )
        assert not purg.try_complete_else_watch(op3, ["a"])
        part.leader_epoch = 1
        assert purg.check_and_complete("a") == 1
        # A partition gone: answer now.
        op4: DelayedFetch[str] = DelayedFetch(
            5000, 5, {"x": FetchPartitionStatus(0, 100)}, {}.__getitem__
        )
        assert purg.try_complete_else_watch(op4, ["x"])
        # No wait at all.
        op5: DelayedFetch[str] = DelayedFetch(0, 5, {"a": FetchPartitionStatus(5, 100)}, lookup)
        assert purg.try_complete_else_watch(op5, ["a"]) and op5.expired

    run(main)


def test_expire_all() -> None:
    async def main() -> None:
        purg: DelayedOperationPurgatory[str] = DelayedOperationPurgatory("produce")
        part = FakePartition()
        ops = [DelayedProduce(60_000, {"a": 1}, lambda k: part) for _ in range(3)]
        for op in ops:
            purg.try_complete_else_watch(op, ["a"])
        purg.expire_all()
        assert all(op.expired for op in ops) and len(purg) == 0

    run(main)


def test_real_partition_listener_completes_acks_all(tmp_path: Path) -> None:
    async def main() -> None:
        part = new_partition(tmp_path, 1)
        now = int(time.time() * 1000)
        part.make_leader(state(1, 1, [1, 2]), now_ms=now)
        purg: DelayedOperationPurgatory[TopicPartition] = DelayedOperationPurgatory("produce")
        part.offsets_listener = lambda p: purg.check_and_complete(p.tp)
        parts: dict[TopicPartition, Partition] = {TP: part}
        res = part.append_records(batch(3))
        op: DelayedProduce[TopicPartition] = DelayedProduce(
            5000, {TP: res.last_offset + 1}, parts.__getitem__
        )
        assert not purg.try_complete_else_watch(op, [TP])
        fetch: DelayedFetch[TopicPartition] = DelayedFetch(
            5000, 1, {TP: FetchPartitionStatus(0, 1 << 20)}, parts.__getitem__
        )
        assert not purg.try_complete_else_watch(fetch, [TP])
        # The follower fetches everything: the HW moves, both complete.
        part.update_follower_fetch_state(2, 3, now + 1, 3)
        await asyncio.wait_for(op.wait(), 1)
        assert op.result == {TP: None} and fetch.satisfied

    run(main)
