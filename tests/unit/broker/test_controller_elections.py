"""ElectLeaders and the auto leader rebalance in the controller (facts sheet §2,
KIP-460), over the FakeZk + Recorder harness of test_controller_events."""

from __future__ import annotations

import asyncio
from dataclasses import replace

from test_controller_events import FakeZk, run, settle, started, three_brokers

from kt.broker.controller.controller import ControllerSettings, KafkaController
from kt.broker.controller.requests import TopicReplicas
from kt.cluster.election import ElectionType, LeaderRecoveryState
from kt.protocol import ErrorCode
from kt.storage.checkpoint import TopicPartition as TP

PREFERRED, UNCLEAN = ElectionType.PREFERRED, ElectionType.UNCLEAN


def set_state(zk: FakeZk, c: KafkaController, tp: TP, leader: int, isr: tuple[int, ...]) -> None:
    """Put a partition in a given state, as if earlier events had led there."""
    old = zk.states[tp]
    zk.states[tp] = replace(old, leader=leader, isr=isr, leader_epoch=old.leader_epoch + 1)
    c.view.leadership[tp] = zk.states[tp]


def test_preferred_election_moves_leadership_to_the_first_replica():
    async def go() -> None:
        zk = three_brokers()
        zk.topics["t"] = TopicReplicas(bytes(16), {0: [1, 2, 3]})
        c, rec = await started(zk)
        set_state(zk, c, TP("t", 0), 2, (2, 3, 1))
        before = zk.states[TP("t", 0)]
        top, results = await c.elect_leaders(PREFERRED, [TP("t", 0)])
        assert top == ErrorCode.NONE
        assert results == {TP("t", 0): (ErrorCode.NONE, None)}
        after = zk.states[TP("t", 0)]
        assert (after.leader, after.isr) == (1, (2, 3, 1))  # the ISR stays
        assert after.leader_epoch == before.leader_epoch + 1
        for b in (1, 2, 3):
            assert rec.leaders_told(b)[("t", 0)] == 1
        await c.shutdown()

    run(go)


def test_preferred_election_not_needed_and_not_available():
    async def go() -> None:
        zk = three_brokers()
        zk.topics["t"] = TopicReplicas(bytes(16), {0: [1, 2], 1: [3, 1]})
        c, _ = await started(zk)
        # t-1's preferred replica 3 fell out of the ISR.
        set_state(zk, c, TP("t", 1), 1, (1,))
        versions = {tp: s.zk_version for tp, s in zk.states.items()}
        top, results = await c.elect_leaders(PREFERRED, [TP("t", 0), TP("t", 1)])
        assert top == ErrorCode.NONE
        assert results[TP("t", 0)] == (ErrorCode.ELECTION_NOT_NEEDED, None)
        assert results[TP("t", 1)] == (
            ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE,
            "Failed to elect leader for partition t-1 under strategy "
            "PreferredReplicaPartitionLeaderElectionStrategy",
        )
        assert {tp: s.zk_version for tp, s in zk.states.items()} == versions  # nothing written
        await c.shutdown()

    run(go)


def test_unclean_election_elects_an_out_of_sync_replica_even_when_the_topic_forbids_it():
    async def go() -> None:
        zk = three_brokers()
        zk.topics["t"] = TopicReplicas(bytes(16), {0: [2, 3]})
        zk.configs["t"] = {"unclean.leader.election.enable": "false"}
        c, rec = await started(zk)
        set_state(zk, c, TP("t", 0), 2, (2,))
        zk.remove_broker(2)
        await settle()
        assert zk.states[TP("t", 0)].leader == -1  # offline: 3 is out of sync
        top, results = await c.elect_leaders(UNCLEAN, [TP("t", 0)])
        assert (top, results) == (ErrorCode.NONE, {TP("t", 0): (ErrorCode.NONE, None)})
        s = zk.states[TP("t", 0)]
        assert (s.leader, s.isr) == (3, (3,))
        assert s.leader_recovery_state is LeaderRecoveryState.RECOVERING
        assert rec.leaders_told(3)[("t", 0)] == 3
        await c.shutdown()

    run(go)


def test_unclean_election_not_needed_and_no_eligible_leader():
    async def go() -> None:
        zk = three_brokers()
        zk.topics["t"] = TopicReplicas(bytes(16), {0: [1, 2], 1: [3]})
        c, _ = await started(zk)
        zk.remove_broker(3)
        await settle()
        _, results = await c.elect_leaders(UNCLEAN, [TP("t", 0), TP("t", 1)])
        assert results[TP("t", 0)] == (ErrorCode.ELECTION_NOT_NEEDED, None)
        assert results[TP("t", 1)] == (
            ErrorCode.ELIGIBLE_LEADERS_NOT_AVAILABLE,
            "Failed to elect leader for partition t-1 under strategy "
            "OfflinePartitionLeaderElectionStrategy(true)",
        )
        await c.shutdown()

    run(go)


def test_unknown_partitions_and_topics_being_deleted():
    async def go() -> None:
        zk = three_brokers()
        zk.topics["t"] = TopicReplicas(bytes(16), {0: [1]})
        zk.topics["gone"] = TopicReplicas(bytes(16), {0: [1]})
        c, rec = await started(zk)
        rec.down.add(1)  # the StopReplica never completes: the deletion stays queued
        zk.marked.add("gone")
        zk.fire_children("/admin/delete_topics")
        await settle()
        _, results = await c.elect_leaders(PREFERRED, [TP("t", 7), TP("nope", 0), TP("gone", 0)])
        assert results[TP("t", 7)] == (
            ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
            "The partition does not exist.",
        )
        assert results[TP("nope", 0)][0] == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        assert results[TP("gone", 0)][0] == ErrorCode.INVALID_TOPIC_EXCEPTION
        await c.shutdown()

    run(go)


def test_all_partitions_leaves_out_those_needing_no_election():
    async def go() -> None:
        zk = three_brokers()
        zk.topics["t"] = TopicReplicas(bytes(16), {0: [1, 2], 1: [2, 1], 2: [3, 1]})
        c, _ = await started(zk)
        set_state(zk, c, TP("t", 0), 2, (1, 2))
        set_state(zk, c, TP("t", 2), 1, (1,))
        top, results = await c.elect_leaders(PREFERRED, None)
        assert top == ErrorCode.NONE
        assert set(results) == {TP("t", 0), TP("t", 2)}  # t-1 is led by 2 already
        assert results[TP("t", 0)] == (ErrorCode.NONE, None)
        assert results[TP("t", 2)][0] == ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE
        assert zk.states[TP("t", 0)].leader == 1
        await c.shutdown()

    run(go)


def test_an_inactive_controller_answers_not_controller():
    async def go() -> None:
        zk = three_brokers()
        a, _ = await started(zk, 1)
        b, _ = await started(zk, 2)
        assert await b.elect_leaders(PREFERRED, None) == (ErrorCode.NOT_CONTROLLER, {})
        await a.shutdown()
        await b.shutdown()

    run(go)


# --- auto leader rebalance ---------------------------------------------------------


def test_rebalance_only_beyond_the_imbalance_percentage_and_only_in_sync_preferred():
    async def go() -> None:
        zk = three_brokers()
        # Broker 1 is the preferred replica of 10 partitions.
        zk.topics["t"] = TopicReplicas(bytes(16), {p: [1, 2] for p in range(10)})
        c, _ = await started(zk, settings=ControllerSettings(auto_leader_rebalance=False))
        set_state(zk, c, TP("t", 0), 2, (1, 2))
        # 1 of 10 not led by 1: 10% does not exceed 10%.
        assert await c.call(c.auto_rebalance) == []
        assert zk.states[TP("t", 0)].leader == 2
        # 3 of 10 (30%), but 1 is out of t-2's ISR: only t-0 and t-1 move back.
        set_state(zk, c, TP("t", 1), 2, (2, 1))
        set_state(zk, c, TP("t", 2), 2, (2,))
        assert await c.call(c.auto_rebalance) == [TP("t", 0), TP("t", 1)]
        assert [zk.states[TP("t", p)].leader for p in range(3)] == [1, 1, 2]
        await c.shutdown()

    run(go)


def test_rebalance_skips_a_preferred_replica_that_is_shutting_down():
    async def go() -> None:
        zk = three_brokers()
        zk.topics["t"] = TopicReplicas(bytes(16), {0: [1, 2], 1: [1, 2]})
        c, _ = await started(zk, settings=ControllerSettings(auto_leader_rebalance=False))
        set_state(zk, c, TP("t", 0), 2, (1, 2))
        c.view.shutting_down.add(1)
        assert await c.call(c.auto_rebalance) == []
        await c.shutdown()

    run(go)


def test_the_rebalance_timer_restores_preferred_leaders_after_a_bounce():
    async def go() -> None:
        zk = three_brokers()
        zk.topics["t"] = TopicReplicas(bytes(16), {0: [1, 2, 3], 1: [2, 3, 1], 2: [3, 1, 2]})
        settings = ControllerSettings(
            leader_imbalance_first_check_s=0.05, leader_imbalance_check_interval_s=0.05
        )
        c, _ = await started(zk, 3, settings=settings)
        zk.remove_broker(1)
        await settle()
        assert zk.states[TP("t", 0)].leader == 2
        zk.add_broker(1)
        await settle()
        # Broker 1 caught up and is back in the ISR (its leader's AlterPartition).
        set_state(zk, c, TP("t", 0), 2, (2, 3, 1))
        for _ in range(100):
            if zk.states[TP("t", 0)].leader == 1:
                break
            await asyncio.sleep(0.02)
        assert [zk.states[TP("t", p)].leader for p in range(3)] == [1, 2, 3]
        await c.shutdown()

    run(go)


def test_no_rebalance_timer_when_disabled():
    async def go() -> None:
        zk = three_brokers()
        zk.topics["t"] = TopicReplicas(bytes(16), {0: [1, 2]})
        settings = ControllerSettings(
            auto_leader_rebalance=False,
            leader_imbalance_first_check_s=0.01,
            leader_imbalance_check_interval_s=0.01,
        )
        c, _ = await started(zk, 3, settings=settings)
        set_state(zk, c, TP("t", 0), 2, (1, 2))
        await asyncio.sleep(0.1)
        assert zk.states[TP("t", 0)].leader == 2
        await c.shutdown()

    run(go)


def test_rebalance_waits_while_any_partition_is_being_reassigned():
    """Kafka's checkAndTriggerAutoLeaderRebalance elects nothing while
    partitionsBeingReassigned is non-empty, even for partitions not moving."""

    async def go() -> None:
        zk = three_brokers()
        zk.add_broker(4, fire=False)
        zk.topics["t"] = TopicReplicas(bytes(16), {0: [1, 2], 1: [1, 2], 2: [2, 3]})
        c, _ = await started(zk, settings=ControllerSettings(auto_leader_rebalance=False))
        set_state(zk, c, TP("t", 0), 2, (1, 2))
        set_state(zk, c, TP("t", 1), 2, (1, 2))
        # t-2 moves to {2,4}: 4 is not in sync yet, so the reassignment stays open.
        result = await c.alter_partition_reassignments({TP("t", 2): [2, 4]})
        assert result is not None and result[TP("t", 2)].error == ErrorCode.NONE
        await settle()
        assert await c.call(c.auto_rebalance) == []
        assert [zk.states[TP("t", p)].leader for p in (0, 1)] == [2, 2]
        # Cancelled: nothing is being reassigned any more, the rebalance runs.
        await c.alter_partition_reassignments({TP("t", 2): None})
        await settle()
        assert await c.call(c.auto_rebalance) == [TP("t", 0), TP("t", 1)]
        await c.shutdown()

    run(go)


def test_preferred_election_of_a_partition_being_reassigned_uses_the_target_head():
    """As Kafka's processReplicaLeaderElection: no skipping; the preferred replica is
    the head of RS = TRS ++ ORS, which can lead only once it is in the ISR."""

    async def go() -> None:
        zk = three_brokers()
        zk.add_broker(4, fire=False)
        zk.topics["t"] = TopicReplicas(bytes(16), {0: [1, 2]})
        c, _ = await started(zk, settings=ControllerSettings(auto_leader_rebalance=False))
        tp = TP("t", 0)
        await c.alter_partition_reassignments({tp: [4, 3, 1]})
        await settle()
        assert c.view.replicas(tp) == [4, 3, 1, 2]
        _, results = await c.elect_leaders(PREFERRED, [tp])
        assert results[tp][0] == ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE
        assert zk.states[tp].leader == 1
        await c.shutdown()

    run(go)
