"""The replica fetcher against a fake leader endpoint backed by real leader partitions.

The fake speaks the wire format (requests and responses are encoded and decoded
in the version under test) and answers as Kafka's leader does: epoch checks,
DivergingEpoch, OFFSET_OUT_OF_RANGE, records up to its LEO.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
from replication_helpers import TP, batch, log_bytes, new_partition, state

from kt.broker.partition import NotLeaderOrFollowerError, Partition
from kt.broker.replication import FetcherConfig, ReplicaFetcher, ReplicaFetcherManager
from kt.protocol import ErrorCode, Struct, apis
from kt.storage.checkpoint import TopicPartition
from kt.storage.errors import OffsetOutOfRangeError
from kt.storage.record_batch import RecordSpec, build_batch


class FakeLeader:
    """A LeaderEndpoint answering from real Partitions of the leader broker."""

    def __init__(self, parts: dict[TopicPartition, Partition], version: int = 15) -> None:
        self.parts = parts
        self.version = version
        self.requests: list[Any] = []
        self.fail_next = 0
        self.closed = False
        self.idle_wait = 0.0
        self.names = {uuid.UUID(bytes=p.topic_id): tp.topic for tp, p in parts.items()}

    async def fetch(self, request: Struct) -> Any:
        if self.fail_next:
            self.fail_next -= 1
            raise ConnectionError("leader unreachable")
        v = self.version
        req = apis.FETCH.request.decode(apis.FETCH.request.encode(request, v), v)
        self.requests.append(req)
        replica = req.replica_state.replica_id if v >= 15 else req.replica_id
        topics = []
        total = 0
        for t in req.topics:
            parts = []
            name = t.topic if v < 13 else self.names.get(t.topic_id, "")
            for p in t.partitions:
                entry, size = self._one(TopicPartition(name, p.partition), replica, p)
                total += size
                parts.append(entry)
            topics.append({"topic": t.topic, "topic_id": t.topic_id, "partitions": parts})
        if total == 0 and self.idle_wait:
            await asyncio.sleep(self.idle_wait)  # a long poll with nothing to send
        resp = apis.FETCH.response(throttle_time_ms=0, error_code=0, responses=topics)
        return apis.FETCH.response.decode(apis.FETCH.response.encode(resp, v), v)

    def _one(self, tp: TopicPartition, replica: int, p: Any) -> tuple[dict[str, Any], int]:
        entry: dict[str, Any] = {"partition_index": tp.partition, "error_code": 0,
                                 "high_watermark": -1, "records": b""}  # fmt: skip
        part = self.parts.get(tp)
        if part is None:
            entry["error_code"] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            return entry, 0
        if p.current_leader_epoch < part.leader_epoch:
            entry["error_code"] = ErrorCode.FENCED_LEADER_EPOCH
            return entry, 0
        if p.current_leader_epoch > part.leader_epoch:
            entry["error_code"] = ErrorCode.UNKNOWN_LEADER_EPOCH
            return entry, 0
        try:
            got = part.read_for_follower(
                replica, p.fetch_offset, p.last_fetched_epoch, p.partition_max_bytes,
                p.log_start_offset,
            )  # fmt: skip
        except OffsetOutOfRangeError:
            entry["error_code"] = ErrorCode.OFFSET_OUT_OF_RANGE
            return entry, 0
        except NotLeaderOrFollowerError:
            entry["error_code"] = ErrorCode.NOT_LEADER_OR_FOLLOWER
            return entry, 0
        entry.update(high_watermark=got.high_watermark, log_start_offset=got.log_start_offset)
        if got.diverging_epoch is not None:
            entry["diverging_epoch"] = {
                "epoch": got.diverging_epoch[0],
                "end_offset": got.diverging_epoch[1],
            }
        if got.data is not None:
            entry["records"] = got.data.read_bytes()
        return entry, len(entry["records"])

    async def earliest_offset(self, tp: TopicPartition, current_leader_epoch: int) -> int:
        return self.parts[tp].log_start_offset

    async def latest_offset(self, tp: TopicPartition, current_leader_epoch: int) -> int:
        return self.parts[tp].log_end_offset

    async def close(self) -> None:
        self.closed = True


def run(coro: Any) -> Any:
    return asyncio.run(coro)


async def catch_up(fetcher: ReplicaFetcher, rounds: int = 50) -> int:
    """Fetch until a round brings nothing new; returns the rounds made."""
    for n in range(rounds):
        before = {tp: (p.log_end_offset, p.high_watermark) for tp, p in fetcher.partitions.items()}
        await fetcher.fetch_once()
        after = {tp: (p.log_end_offset, p.high_watermark) for tp, p in fetcher.partitions.items()}
        if after == before:
            return n
    raise AssertionError("did not catch up")


def pair(tmp_path: Path, epoch: int = 1, **kw: Any) -> tuple[Partition, Partition]:
    leader = new_partition(tmp_path, 1, **kw)
    follower = new_partition(tmp_path, 2, **kw)
    leader.make_leader(state(1, epoch, [1, 2]))
    follower.make_follower(state(1, epoch, [1, 2]))
    return leader, follower


@pytest.mark.parametrize("version", [12, 13, 15])
def test_follower_catches_up_byte_identical(tmp_path: Path, version: int) -> None:
    async def main() -> None:
        # Small fetches: responses end inside batches and take several rounds.
        leader, follower = pair(tmp_path, segment_bytes=600)
        for i in range(6):
            leader.append_records(batch(3, pid=5, epoch=0, seq=3 * i, tag=b"x" * 40))
        leader.append_records(batch(2))
        endpoint = FakeLeader({TP: leader}, version)
        cfg = FetcherConfig(max_bytes=300)
        fetcher = ReplicaFetcher(1, endpoint, 2, cfg, broker_epoch=77)
        fetcher.add_partitions([follower])
        rounds = await catch_up(fetcher)
        assert rounds > 3
        assert log_bytes(follower) == log_bytes(leader)
        assert len(follower.log.segments) > 1
        assert follower.log.leader_epoch_cache.entries == leader.log.leader_epoch_cache.entries
        # The leader's HW follows the follower's fetches; the follower takes it.
        assert leader.high_watermark == leader.log_end_offset == 20
        assert follower.high_watermark == 20
        assert leader.remote_replicas[2].log_end_offset == 20
        req = endpoint.requests[-1]
        p = req.topics[0].partitions[0]
        assert (p.fetch_offset, p.last_fetched_epoch, p.current_leader_epoch) == (20, 1, 1)
        if version >= 15:
            assert (req.replica_state.replica_id, req.replica_state.replica_epoch) == (2, 77)
        else:
            assert req.replica_id == 2
        # The producer's state came along: after failover a retry is a duplicate.
        follower.make_leader(state(2, 2, [2]))
        again = follower.append_records(batch(3, pid=5, epoch=0, seq=15, tag=b"x" * 40))
        assert again.batches == 0 and again.first_offset == 15

    run(main())


def test_divergent_suffix_is_truncated(tmp_path: Path) -> None:
    async def main() -> None:
        b1, b2 = pair(tmp_path)
        b1.append_records(batch(3, tag=b"agreed"))
        fetcher = ReplicaFetcher(1, FakeLeader({TP: b1}), 2, FetcherConfig())
        fetcher.add_partitions([b2])
        await catch_up(fetcher)
        # Broker 1 writes 2 more in epoch 1 that never reach broker 2, then fails;
        # broker 2 leads epoch 2 and writes 3 different records.
        b1.append_records(batch(2, tag=b"lost"))
        assert b2.make_leader(state(2, 2, [2], [1, 2]))
        b2.append_records(batch(3, tag=b"new"))
        assert b1.make_follower(state(2, 2, [2], [1, 2]))
        assert (b1.log_end_offset, b2.log_end_offset) == (5, 6)
        back = ReplicaFetcher(2, FakeLeader({TP: b2}), 1, FetcherConfig())
        back.add_partitions([b1])
        await back.fetch_once()  # DivergingEpoch(1, 3): truncate the lost records
        assert b1.log_end_offset == 3
        assert b1.log.leader_epoch_cache.entries == [(1, 0)]
        await catch_up(back)
        assert log_bytes(b1) == log_bytes(b2)
        assert b1.log.leader_epoch_cache.entries == [(1, 0), (2, 3)]
        assert b1.high_watermark == b2.high_watermark == 6

    run(main())


def test_truncation_to_an_epoch_the_follower_never_had(tmp_path: Path) -> None:
    async def main() -> None:
        b1, b2 = pair(tmp_path)
        b1.append_records(batch(2, tag=b"agreed"))
        fetcher = ReplicaFetcher(1, FakeLeader({TP: b1}), 2, FetcherConfig())
        fetcher.add_partitions([b2])
        await catch_up(fetcher)
        # b2 leads epoch 2 briefly (writes 2), then b1 leads epoch 3 (writes 1).
        b2.make_leader(state(2, 2, [2], [1, 2]))
        b2.append_records(batch(2, tag=b"epoch2"))
        b1.make_follower(state(2, 2, [2], [1, 2]))
        b1.make_leader(state(1, 3, [1], [1, 2]))
        b1.append_records(batch(1, tag=b"epoch3"))
        b2.make_follower(state(1, 3, [1], [1, 2]))
        back = ReplicaFetcher(1, FakeLeader({TP: b1}), 2, FetcherConfig())
        back.add_partitions([b2])
        await catch_up(back)
        assert log_bytes(b2) == log_bytes(b1) and b2.log_end_offset == 3
        assert b2.log.leader_epoch_cache.entries == [(1, 0), (3, 2)]

    run(main())


def test_out_of_range_below_leader_start_restarts_there(tmp_path: Path) -> None:
    async def main() -> None:
        leader = new_partition(tmp_path, 1)
        leader.make_leader(state(1, 1, [1], [1, 2]))
        for _ in range(5):
            leader.append_records(batch(2))
        assert leader.high_watermark == 10
        leader.log.maybe_increment_log_start_offset(6)
        follower = new_partition(tmp_path, 2)
        follower.make_follower(state(1, 1, [1], [1, 2]))
        fetcher = ReplicaFetcher(1, FakeLeader({TP: leader}), 2, FetcherConfig())
        fetcher.add_partitions([follower])
        await catch_up(fetcher)
        assert follower.log_start_offset == 6 and follower.log_end_offset == 10
        assert log_bytes(follower) == b"".join(
            bytes(b.data) for b in leader.log.iter_batches() if b.base_offset >= 6
        )

    run(main())


def test_out_of_range_above_leader_end_truncates(tmp_path: Path) -> None:
    async def main() -> None:
        leader = new_partition(tmp_path, 1)
        leader.make_leader(state(1, 1, [1], [1, 2]))
        leader.append_records(batch(3))
        follower = new_partition(tmp_path, 2)
        follower.make_follower(state(1, 1, [1], [1, 2]))
        # Older data without leader epochs (a pre-epoch log): no LastFetchedEpoch.
        for i in range(5):
            follower.log.append_as_follower(build_batch([RecordSpec(b"k", b"old")], base_offset=i))
        assert follower.last_fetched_epoch() == -1 and follower.log_end_offset == 5
        fetcher = ReplicaFetcher(1, FakeLeader({TP: leader}), 2, FetcherConfig())
        fetcher.add_partitions([follower])
        await fetcher.fetch_once()
        assert follower.log_end_offset == 3

    run(main())


def test_fenced_drops_and_other_errors_back_off(tmp_path: Path) -> None:
    async def main() -> None:
        leader, follower = pair(tmp_path)
        other_tp = TopicPartition("gone", 0)
        other = new_partition(tmp_path, 2, tp=other_tp)
        other.make_follower(state(1, 1, [1, 2]))
        endpoint = FakeLeader({TP: leader})
        fetcher = ReplicaFetcher(1, endpoint, 2, FetcherConfig(backoff_ms=60_000))
        fetcher.add_partitions([follower, other])
        # The leader moved on to epoch 2 and our LeaderAndIsr has not come yet.
        leader.make_leader(state(1, 2, [1, 2]))
        await fetcher.fetch_once()
        assert set(fetcher.partitions) == {other_tp}  # fenced: dropped
        # UNKNOWN_TOPIC_OR_PARTITION: kept, but backing off.
        assert fetcher.build_request() is None
        # The next LeaderAndIsr re-adds it.
        follower.make_follower(state(1, 2, [1, 2]))
        fetcher.add_partitions([follower])
        built = fetcher.build_request()
        assert built is not None and set(built[1]) == {TP}

    run(main())


def test_unreachable_leader_backs_off(tmp_path: Path) -> None:
    async def main() -> None:
        leader, follower = pair(tmp_path)
        leader.append_records(batch(2))
        endpoint = FakeLeader({TP: leader})
        endpoint.fail_next = 1
        fetcher = ReplicaFetcher(1, endpoint, 2, FetcherConfig(backoff_ms=50))
        fetcher.add_partitions([follower])
        assert not await fetcher.fetch_once()
        assert fetcher.build_request() is None
        fetcher.start()
        deadline = time.monotonic() + 5
        while follower.log_end_offset < 2 and time.monotonic() < deadline:
            await asyncio.sleep(0.01)
        await fetcher.stop()
        assert follower.log_end_offset == 2 and endpoint.closed

    run(main())


def test_manager_runs_one_fetcher_per_leader(tmp_path: Path) -> None:
    async def main() -> None:
        tp_b = TopicPartition("t", 1)
        l1 = new_partition(tmp_path, 1)
        l3 = new_partition(tmp_path, 3, tp=tp_b)
        f_a = new_partition(tmp_path, 2)
        f_b = new_partition(tmp_path, 2, tp=tp_b)
        l1.make_leader(state(1, 1, [1, 2]))
        l3.make_leader(state(3, 1, [3, 2]))
        f_a.make_follower(state(1, 1, [1, 2]))
        f_b.make_follower(state(3, 1, [3, 2]))
        endpoints = {1: FakeLeader({TP: l1}), 3: FakeLeader({tp_b: l3})}
        for e in endpoints.values():
            e.idle_wait = 0.01
        manager = ReplicaFetcherManager(2, endpoints.__getitem__, FetcherConfig(backoff_ms=20))
        manager.add_partitions([f_a, f_b])
        assert set(manager.fetchers) == {1, 3}
        assert manager.source_of(TP) == 1 and manager.source_of(tp_b) == 3
        l1.append_records(batch(4))
        l3.append_records(batch(2))

        async def until(cond: Any) -> None:
            deadline = time.monotonic() + 5
            while not cond() and time.monotonic() < deadline:
                await asyncio.sleep(0.01)
            assert cond()

        await until(lambda: f_a.high_watermark == 4 and f_b.high_watermark == 2)
        assert l1.high_watermark == 4 and l3.high_watermark == 2
        # Leadership of t-1 moves to broker 1: the partition moves fetchers.
        l3.make_follower(state(1, 2, [1, 2, 3], [1, 2, 3]))
        endpoints[1].parts[tp_b] = l3  # (stand-in: broker 1 now serves t-1 from this log)
        l3.local_broker_id = 1
        l3.make_leader(state(1, 3, [1, 2], [1, 2, 3]))
        f_b.make_follower(state(1, 3, [1, 2], [1, 2, 3]))
        manager.add_partitions([f_b])
        assert manager.source_of(tp_b) == 1
        l3.append_records(batch(1))
        await until(lambda: f_b.log_end_offset == 3)
        await manager.shutdown_idle_fetchers()
        assert set(manager.fetchers) == {1}
        assert manager.remove_partitions([TP]) == [f_a]
        await manager.shutdown()
        assert manager.fetchers == {} and endpoints[1].closed

    run(main())


def test_leader_log_start_inside_a_batch(tmp_path: Path) -> None:
    async def main() -> None:
        leader = new_partition(tmp_path, 1)
        leader.make_leader(state(1, 1, [1], [1, 2]))
        for _ in range(4):
            leader.append_records(batch(2))
        # DeleteRecords up to 5: the log starts inside the batch 4-5.
        leader.log.maybe_increment_log_start_offset(5)
        follower = new_partition(tmp_path, 2)
        follower.make_follower(state(1, 1, [1], [1, 2]))
        fetcher = ReplicaFetcher(1, FakeLeader({TP: leader}), 2, FetcherConfig())
        fetcher.add_partitions([follower])
        await catch_up(fetcher)
        assert follower.log_end_offset == 8 and follower.high_watermark == 8
        assert follower.log_start_offset == 5
        assert log_bytes(follower) == b"".join(
            bytes(b.data) for b in leader.log.iter_batches() if b.base_offset >= 4
        )

    run(main())


def test_idle_fetcher_of_a_dead_leader_is_retired(tmp_path: Path) -> None:
    """Kafka's shutdownIdleFetcherThreads after a LeaderAndIsr: the fetcher of a
    leader that lost its last partition here stops at once (no more retries against
    a dead broker), and following that broker again asks for a fresh endpoint (its
    address may have changed while it was away)."""

    async def main() -> None:
        old = new_partition(tmp_path / "1", 1)
        new = new_partition(tmp_path / "3", 3)
        follower = new_partition(tmp_path / "2", 2)
        old.make_leader(state(1, 1, [1, 2, 3], [1, 2, 3]))
        follower.make_follower(state(1, 1, [1, 2, 3], [1, 2, 3]))
        dead = FakeLeader({TP: old})
        dead.fail_next = 10**6  # broker 1 was SIGKILLed: every fetch fails
        made: list[int] = []
        endpoints: dict[int, FakeLeader] = {1: dead, 3: FakeLeader({TP: new})}

        def endpoint_for(broker: int) -> FakeLeader:
            made.append(broker)
            return endpoints[broker]

        manager = ReplicaFetcherManager(2, endpoint_for, FetcherConfig(backoff_ms=10))
        manager.add_partitions([follower])
        await asyncio.sleep(0.05)
        assert dead.requests == [] and manager.source_of(TP) == 1
        # The controller elects broker 3: the follower moves to it.
        new.make_leader(state(3, 2, [3, 2], [1, 2, 3]))
        follower.make_follower(state(3, 2, [3, 2], [1, 2, 3]))
        manager.add_partitions([follower])
        assert manager.retire_idle_fetchers() == [1]
        assert set(manager.fetchers) == {3} and manager.source_of(TP) == 3
        await manager.shutdown_idle_fetchers()  # waits for the retired one to stop
        assert dead.closed
        new.append_records(batch(2))
        deadline = time.monotonic() + 5
        while follower.log_end_offset < 2 and time.monotonic() < deadline:
            await asyncio.sleep(0.01)
        assert follower.log_end_offset == 2
        # Broker 1 is back and leads again: a new fetcher, a new endpoint.
        revived = FakeLeader({TP: old})
        endpoints[1] = revived
        old.local_broker_id = 1
        follower.make_follower(state(1, 3, [1, 2, 3], [1, 2, 3]))
        manager.add_partitions([follower])
        assert manager.retire_idle_fetchers() == [3]
        assert manager.fetchers[1].endpoint is revived and made == [1, 3, 1]
        await manager.shutdown()
        assert endpoints[3].closed and revived.closed

    run(main())


def test_a_leader_back_at_another_address_gets_a_new_fetcher(tmp_path: Path) -> None:
    """Kafka's addFetcherForPartitions: a fetcher made for a source broker's old
    address is replaced when the metadata names a new one; the partitions it still
    fetched move to the new fetcher (none is left unfetched)."""

    async def main() -> None:
        leader = new_partition(tmp_path / "1", 1)
        follower = new_partition(tmp_path / "2", 2)
        leader.make_leader(state(1, 1, [1, 2], [1, 2]))
        follower.make_follower(state(1, 1, [1, 2], [1, 2]))
        addresses = {1: ("127.0.0.1", 9001)}
        endpoints = {9001: FakeLeader({TP: leader})}

        def endpoint_for(broker: int) -> FakeLeader:
            return endpoints[addresses[broker][1]]

        manager = ReplicaFetcherManager(
            2, endpoint_for, FetcherConfig(backoff_ms=10), address_for=addresses.get
        )
        manager.add_partitions([follower])
        first = manager.fetchers[1]
        # same address: the fetcher is reused
        manager.add_partitions([follower])
        assert manager.fetchers[1] is first
        # broker 1 restarted on another port: a new fetcher there, the old one stops
        addresses[1] = ("127.0.0.1", 9002)
        endpoints[9002] = FakeLeader({TP: leader})
        follower.make_follower(state(1, 2, [1, 2], [1, 2]))
        manager.add_partitions([follower])
        assert manager.fetchers[1] is not first
        assert manager.fetchers[1].endpoint is endpoints[9002] and manager.source_of(TP) == 1
        await manager.shutdown()
        assert endpoints[9001].closed and endpoints[9002].closed

    run(main())
