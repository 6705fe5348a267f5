"""Partition: leadership changes, the leader's HW and ISR rules, the follower side."""

from __future__ import annotations

import asyncio
import time
import uuid
from pathlib import Path

import pytest
from replication_helpers import batch, log_bytes, new_partition, state

from kt.broker.errors import (
    NotEnoughReplicasAfterAppendError,
    NotEnoughReplicasError,
    NotLeaderOrFollowerError,
    ProducerError,
    error_code_for,
)
from kt.broker.partition import Partition, whole_batches
from kt.protocol import ErrorCode, apis
from kt.storage.checkpoint import TopicPartition
from kt.storage.log import PartitionLog

T = int(time.time() * 1000)


def leader_of_three(tmp_path: Path, min_isr: int = 1) -> Partition:
    p = new_partition(tmp_path, 1, min_isr=min_isr)
    assert p.make_leader(state(1, 1, [1, 2, 3]), now_ms=T)
    return p


def test_single_node_partition_leads_and_hw_follows_leo(tmp_path: Path) -> None:
    log = PartitionLog.open(tmp_path / "t-0")
    p = Partition(TopicPartition("t", 0), b"\0" * 16, log, 1, 0, [1], [1])
    assert p.is_leader and p.remote_replicas == {}
    p.append_records(batch(3))
    assert p.log_end_offset == 3 and p.high_watermark == 3
    # Even a min.insync.replicas above the replication factor lets the HW move.
    log2 = PartitionLog.open(tmp_path / "u-0")
    object.__setattr__(log2.config, "min_insync_replicas", 2)
    p2 = Partition(TopicPartition("u", 0), b"\0" * 16, log2, 1, 0, [1], [1])
    p2.append_records(batch(2))
    assert p2.high_watermark == 2


def test_make_leader_records_epoch_start_and_resets_followers(tmp_path: Path) -> None:
    p = new_partition(tmp_path, 1)
    assert not p.is_leader
    assert p.make_leader(state(1, 0, [1, 2, 3]), now_ms=T)
    p.append_records(batch(2))
    assert p.make_leader(state(1, 1, [1, 2], [1, 2, 3], pe=4), now_ms=T + 5)
    assert p.log.leader_epoch_cache.entries[-1] == (1, 2)
    assert p.leader_epoch_start_offset == 2 and p.partition_epoch == 4
    assert set(p.remote_replicas) == {2, 3}
    # Still the leader: in-sync followers count as caught up now, others never.
    assert p.remote_replicas[2].last_caught_up_time_ms == T + 5
    assert p.remote_replicas[3].last_caught_up_time_ms == 0
    assert p.remote_replicas[2].last_fetch_leader_log_end_offset == 2
    # Stale or repeated epochs change nothing.
    assert not p.make_leader(state(1, 1, [1]), now_ms=T)
    assert not p.make_follower(state(2, 0, [2]))
    assert p.isr == [1, 2] and p.is_leader


def test_make_follower_drops_remote_states(tmp_path: Path) -> None:
    p = leader_of_three(tmp_path)
    assert p.make_follower(state(2, 2, [2, 3], [1, 2, 3]))
    assert not p.is_leader and p.leader_id == 2 and p.leader_epoch == 2
    assert p.remote_replicas == {} and p.leader_epoch_start_offset is None
    with pytest.raises(NotLeaderOrFollowerError):
        p.append_records(batch())
    assert isinstance(p.check_enough_replicas_for_append(1), NotLeaderOrFollowerError)


def test_hw_is_min_leo_of_isr_and_never_goes_back(tmp_path: Path) -> None:
    p = leader_of_three(tmp_path)
    p.append_records(batch(5))
    assert p.high_watermark == 0
    assert not p.update_follower_fetch_state(2, 0, T + 1, 5) or p.high_watermark == 0
    assert p.update_follower_fetch_state(2, 3, T + 2, 5) is False  # 3 still waits
    assert p.high_watermark == 0
    assert p.update_follower_fetch_state(3, 4, T + 3, 5)
    assert p.high_watermark == 3
    p.update_follower_fetch_state(2, 5, T + 4, 5)
    p.update_follower_fetch_state(3, 5, T + 4, 5)
    assert p.high_watermark == 5
    # A follower that comes back lower (restarted, truncated) cannot pull it back.
    p.update_follower_fetch_state(2, 1, T + 5, 5)
    assert p.high_watermark == 5
    with pytest.raises(NotLeaderOrFollowerError):
        p.update_follower_fetch_state(9, 1, T, 5)


def test_hw_waits_for_caught_up_follower_outside_isr(tmp_path: Path) -> None:
    p = new_partition(tmp_path, 1)
    p.make_leader(state(1, 1, [1, 2], [1, 2, 3]), now_ms=T)
    p.append_records(batch(4), now_ms=T)
    p.update_follower_fetch_state(2, 4, T + 1, 4)
    # 3 is out of the ISR and never caught up: it does not hold the HW.
    assert p.high_watermark == 4
    p.append_records(batch(2), now_ms=T + 2)
    # 3 fetches at the LEO, is caught up and about to join: the HW waits for it too.
    p.update_follower_fetch_state(3, 6, T + 3, 6)
    p.append_records(batch(1), now_ms=T + 4)
    p.update_follower_fetch_state(2, 7, T + 5, 7)
    assert p.high_watermark == 6
    # The pending expansion counts as ISR as well.
    assert p.isr_expand_candidate(3) == [1, 2, 3]
    assert p.maximal_isr == {1, 2, 3}


def test_hw_does_not_wait_for_caught_up_follower_that_cannot_join(tmp_path: Path) -> None:
    # A follower caught up when it stopped (controlled shutdown: out of the ISR, gone
    # from the metadata) must not hold the HW for replica.lag.time.max.ms.
    p = new_partition(tmp_path, 1)
    p.make_leader(state(1, 1, [1, 2], [1, 2, 3]), now_ms=T)
    p.append_records(batch(4), now_ms=T)
    p.update_follower_fetch_state(3, 4, T + 1, 4)
    p.update_follower_fetch_state(2, 4, T + 1, 4)
    alive = {1, 2}
    p.replica_eligible = alive.__contains__
    p.append_records(batch(2), now_ms=T + 2)
    p.update_follower_fetch_state(2, 6, T + 3, 6)
    assert p.high_watermark == 6
    # back and eligible again: caught up, it is waited for as before
    alive.add(3)
    p.update_follower_fetch_state(3, 6, T + 4, 6)
    p.append_records(batch(1), now_ms=T + 5)
    p.update_follower_fetch_state(2, 7, T + 6, 7)
    assert p.high_watermark == 6


def test_hw_does_not_advance_under_min_isr(tmp_path: Path) -> None:
    p = new_partition(tmp_path, 1, min_isr=2)
    p.make_leader(state(1, 1, [1], [1, 2]), now_ms=T)
    p.append_records(batch(3))
    assert p.is_under_min_isr() and p.high_watermark == 0
    # acks=all is refused before the append; acks=1 is not.
    err = p.check_enough_replicas_for_append(-1)
    assert isinstance(err, NotEnoughReplicasError)
    assert error_code_for(err) == ErrorCode.NOT_ENOUGH_REPLICAS
    assert p.check_enough_replicas_for_append(1) is None
    assert p.check_enough_replicas_for_append(-1, min_isr=1) is None
    # The follower catches up and joins: the HW moves.
    p.update_follower_fetch_state(2, 3, T + 1, 3)
    assert p.high_watermark == 0
    assert p.isr_expand_candidate(2) == [1, 2]
    assert p.on_isr_committed([1, 2], 1)
    assert p.high_watermark == 3 and p.pending_isr is None


def test_last_caught_up_time_rule(tmp_path: Path) -> None:
    p = leader_of_three(tmp_path)
    rs = p.remote_replicas[2]
    p.append_records(batch(10))
    p.update_follower_fetch_state(2, 0, T + 100, 10)
    # Behind the LEO and behind the previous fetch's LEO: unchanged (reset time).
    assert rs.last_caught_up_time_ms == T
    p.update_follower_fetch_state(2, 10, T + 200, 10)
    assert rs.last_caught_up_time_ms == T + 200
    p.append_records(batch(5))
    # At the LEO the leader had at the previous fetch: caught up as of that fetch.
    p.update_follower_fetch_state(2, 10, T + 300, 15)
    assert rs.last_caught_up_time_ms == T + 200
    p.update_follower_fetch_state(2, 15, T + 400, 20)
    assert rs.last_caught_up_time_ms == T + 300
    assert rs.last_fetch_leader_log_end_offset == 20 and rs.last_fetch_time_ms == T + 400


def test_isr_shrink_one_update_in_flight(tmp_path: Path) -> None:
    p = leader_of_three(tmp_path)
    p.append_records(batch(3))
    p.update_follower_fetch_state(2, 3, T + 10, 3)
    assert p.isr_shrink_candidates(T + 1000, 30_000) is None
    # 3 never fetched since T and is behind: out after the lag.
    assert p.isr_shrink_candidates(T + 30_001, 30_000) == [1, 2]
    assert p.pending_isr == [1, 2]
    assert p.isr_shrink_candidates(T + 60_000, 30_000) is None  # in flight
    assert p.isr_expand_candidate(3) is None
    # Pending shrink: the HW still waits for the old ISR.
    assert p.high_watermark == 0
    assert not p.on_isr_committed([1, 2], 0, leader_epoch=0)  # another epoch
    assert p.on_isr_committed([1, 2], 1, leader_epoch=1, now_ms=T + 60_000)
    assert p.isr == [1, 2] and p.partition_epoch == 1 and p.high_watermark == 3
    assert not p.on_isr_committed([1], 0)  # older partition epoch
    # A refused proposal can be made again.
    p.update_follower_fetch_state(3, 3, T + 70_000, 3)
    assert p.isr_expand_candidate(3) == [1, 2, 3]
    p.abandon_pending_isr()
    assert p.isr_expand_candidate(3) == [1, 2, 3]


def test_expand_needs_epoch_start_and_hw(tmp_path: Path) -> None:
    p = new_partition(tmp_path, 1)
    p.make_leader(state(1, 0, [1]), now_ms=T)
    p.append_records(batch(4))
    p.make_leader(state(1, 1, [1], [1, 2]), now_ms=T)
    assert p.leader_epoch_start_offset == 4 and p.high_watermark == 4
    p.update_follower_fetch_state(2, 3, T + 1, 4)
    assert p.isr_expand_candidate(2) is None  # below HW and epoch start
    p.update_follower_fetch_state(2, 4, T + 2, 4)
    assert p.isr_expand_candidate(2) == [1, 2]


def test_is_offset_committed(tmp_path: Path) -> None:
    p = new_partition(tmp_path, 1, min_isr=2)
    p.make_leader(state(1, 1, [1, 2, 3]), now_ms=T)
    p.append_records(batch(2))
    assert p.is_offset_committed(2) == (False, None)
    p.update_follower_fetch_state(2, 2, T + 1, 2)
    p.update_follower_fetch_state(3, 2, T + 1, 2)
    assert p.is_offset_committed(2) == (True, None)
    # Committed, but the ISR shrank below the minimum meanwhile.
    p.append_records(batch(1))
    assert p.isr_shrink_candidates(T + 100_000, 10) == [1]
    p.on_isr_committed([1], 1, now_ms=T + 100_000)
    done, err = p.is_offset_committed(2)
    assert done and isinstance(err, NotEnoughReplicasAfterAppendError)
    p.make_follower(state(2, 2, [2, 3], [1, 2, 3]))
    done, err = p.is_offset_committed(2)
    assert done and isinstance(err, NotLeaderOrFollowerError)


def test_follower_copies_leader_batches_and_producer_state(tmp_path: Path) -> None:
    leader = new_partition(tmp_path, 1)
    follower = new_partition(tmp_path, 2)
    leader.make_leader(state(1, 3, [1, 2]), now_ms=T)
    follower.make_follower(state(1, 3, [1, 2]))
    leader.append_records(batch(2, pid=7, epoch=0, seq=0))
    leader.append_records(batch(3, pid=7, epoch=0, seq=2))
    data = leader.log.read(0, 1 << 20)
    assert data is not None
    raw = data.read_bytes()
    # A trailing partial batch is left for the next fetch.
    follower.append_records_as_follower(raw + raw[:20])
    assert log_bytes(follower) == log_bytes(leader)
    assert follower.log_end_offset == 5 and follower.last_fetched_epoch() == 3
    assert follower.update_follower_high_watermark(4) and follower.high_watermark == 4
    assert not follower.update_follower_high_watermark(2)
    assert follower.update_follower_high_watermark(99) and follower.high_watermark == 5
    # Failover: the follower leads, and a producer retry is still recognised.
    follower.make_leader(state(2, 4, [2]), now_ms=T)
    again = follower.append_records(batch(3, pid=7, epoch=0, seq=2))
    assert (again.first_offset, again.last_offset, again.batches) == (2, 4, 0)
    with pytest.raises(ProducerError):
        follower.append_records(batch(1, pid=7, epoch=0, seq=9))


def test_truncate_resets_log_epochs_and_producer_state(tmp_path: Path) -> None:
    p = new_partition(tmp_path, 1)
    p.make_leader(state(1, 1, [1]), now_ms=T)
    p.append_records(batch(2, pid=7, epoch=0, seq=0))
    p.make_leader(state(1, 2, [1]), now_ms=T)
    p.append_records(batch(2, pid=7, epoch=0, seq=2))
    p.make_follower(state(2, 3, [2]))
    assert p.log.leader_epoch_cache.entries == [(1, 0), (2, 2)]
    assert p.truncate_to(2) and p.log_end_offset == 2
    assert p.log.leader_epoch_cache.entries == [(1, 0)]
    assert not p.truncate_to(5)
    # The producer's state is back at sequence 1: seq 2 is the next one again.
    assert p.producer_state is not None
    entry = p.producer_state.last_entry(7)
    assert entry is not None and entry.last_seq == 1
    p.truncate_fully_and_start_at(10)
    assert p.log_start_offset == p.log_end_offset == 10
    assert p.producer_state.last_entry(7) is None and p.last_fetched_epoch() == -1


def test_end_offset_for_epoch_and_divergence(tmp_path: Path) -> None:
    p = new_partition(tmp_path, 1)
    p.make_leader(state(1, 1, [1, 2]), now_ms=T)
    p.append_records(batch(3))
    p.make_leader(state(1, 3, [1, 2]), now_ms=T)
    p.append_records(batch(2))
    assert p.end_offset_for_epoch(1) == (1, 3)
    assert p.end_offset_for_epoch(2) == (1, 3)
    assert p.end_offset_for_epoch(3) == (3, 5)
    assert p.end_offset_for_epoch(4) == (-1, -1)
    assert p.end_offset_for_epoch(-1) == (-1, -1)
    # A follower that wrote offsets 3.. in epoch 2 (which we never had) diverged.
    assert p.diverging_epoch(5, 2) == (1, 3)
    assert p.diverging_epoch(4, 1) == (1, 3)
    assert p.diverging_epoch(3, 1) is None
    assert p.diverging_epoch(5, 3) is None
    assert p.diverging_epoch(0, -1) is None


def test_end_offset_for_current_epoch_not_yet_cached(tmp_path: Path) -> None:
    # A directly built leader records its epoch at its first append only.
    log = PartitionLog.open(tmp_path / "t-0")
    p = Partition(TopicPartition("t", 0), b"\0" * 16, log, 1, 0, [1], [1])
    p.append_records(batch(2))
    p.leader_epoch = 5
    assert p.end_offset_for_epoch(5) == (5, 2)
    assert p.end_offset_for_epoch(3) == (0, 2)
    assert p.end_offset_for_epoch(6) == (-1, -1)


def test_whole_batches() -> None:
    one, two = batch(1), batch(2)
    assert bytes(whole_batches(one + two)) == one + two
    assert bytes(whole_batches(one + two[:-1])) == one
    assert bytes(whole_batches(one[:10])) == b""


def test_appends_wake_fetches_and_hw_moves_the_listener(tmp_path: Path) -> None:
    # The listener (the produce purgatory) hears HW moves only: an append that leaves
    # the HW cannot complete a waiting acks=all produce. Fetches waiting for data
    # (followers long-polling on the LEO) wake on the append itself.
    async def run() -> None:
        p = leader_of_three(tmp_path)
        heard: list[tuple[int, int]] = []
        p.offsets_listener = lambda part: heard.append((part.log_end_offset, part.high_watermark))
        waiting = p.data_arrived()
        p.append_records(batch(2))
        assert waiting.done()
        assert heard == []
        waiting = p.data_arrived()
        p.update_follower_fetch_state(2, 2, T + 1, 2)  # the HW waits for follower 3
        assert heard == [] and not waiting.done()
        p.update_follower_fetch_state(3, 2, T + 1, 2)
        assert heard == [(2, 2)] and waiting.done()

    asyncio.run(run())


def test_first_leader_and_isr_applies_even_at_the_loaded_epoch(tmp_path: Path) -> None:
    # Loaded from disk as leader at the cache's epoch 3; the controller says broker 2
    # leads epoch 3 (we followed in it before a restart): that is news.
    log = PartitionLog.open(tmp_path / "t-0")
    p = Partition(TopicPartition("t", 0), b"\0" * 16, log, 1, 3, [1], [1])
    assert p.make_follower(state(2, 3, [2, 1], [2, 1]))
    assert not p.is_leader and p.leader_id == 2
    assert not p.make_follower(state(2, 3, [2], [2, 1]))
    assert not p.make_leader(state(1, 3, [1], [2, 1]))
    assert p.make_leader(state(1, 4, [1], [2, 1]))


def test_make_leader_from_a_decoded_leader_and_isr_state(tmp_path: Path) -> None:
    ps_fields = dict(partition_index=0, controller_epoch=1, leader=1, leader_epoch=2,
                     isr=[1, 2], partition_epoch=7, replicas=[1, 2, 3], adding_replicas=[3],
                     removing_replicas=[])  # fmt: skip
    topic = {"topic_name": "t", "topic_id": uuid.UUID(int=1), "partition_states": [ps_fields]}
    req = apis.LEADER_AND_ISR.request(
        controller_id=9, controller_epoch=1, broker_epoch=5, type=0, topic_states=[topic],
        live_leaders=[],
    )  # fmt: skip
    decoded = apis.LEADER_AND_ISR.request.decode(apis.LEADER_AND_ISR.request.encode(req, 7), 7)
    ps = decoded.topic_states[0].partition_states[0]
    p = new_partition(tmp_path, 1)
    assert p.make_leader(ps)
    assert (p.leader_epoch, p.partition_epoch, p.isr, p.replicas) == (2, 7, [1, 2], [1, 2, 3])
    assert p.adding_replicas == [3] and set(p.remote_replicas) == {2, 3}


def test_refused_expansion_releases_the_high_watermark(tmp_path: Path) -> None:
    """Found by the cluster tests (SIGTERM under an acks=all producer): a stopping
    broker still fetching is proposed back into the ISR; while that proposal is
    pending the HW waits for it; the controller refuses it (INELIGIBLE_REPLICA).
    The HW must move then, with no further change in any follower's LEO, or the
    waiting produce (and its connection) never completes."""
    p = leader_of_three(tmp_path, min_isr=2)
    assert p.on_isr_committed([1, 2], 1, leader_epoch=p.leader_epoch, now_ms=T)
    p.append_records(batch(1))
    p.update_follower_fetch_state(2, 1, T + 10, 1)
    p.update_follower_fetch_state(3, 1, T + 20, 1)  # the stopping broker, caught up
    assert p.isr_expand_candidate(3) == [1, 2, 3]  # proposed back into the ISR
    p.append_records(batch(1))
    p.update_follower_fetch_state(2, 2, T + 30, 2)  # 2 has everything, 3 does not
    assert p.high_watermark == 1  # held back by the pending member
    assert p.is_offset_committed(2) == (False, None)
    p.abandon_pending_isr()  # the controller refused it; the stopping broker left
    # Caught up a moment ago, 3 still counts (Kafka's rule) until the lag passes;
    # then 2's next fetch, at the same offset, must move the HW.
    p.update_follower_fetch_state(2, 2, T + 30 + 30_001, 2)
    assert p.high_watermark == 2
    assert p.is_offset_committed(2) == (True, None)
