"""Leader election: Kafka's five strategies, ISR removal and ElectLeaders outcomes."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from kt.cluster.election import (
    NO_LEADER,
    Elected,
    ElectionType,
    LeaderAndIsr,
    LeaderRecoveryState,
    Strategy,
    controlled_shutdown_election,
    elect_leaders,
    failure_message,
    new_partition_election,
    offline_election,
    preferred_election,
    reassign_election,
    remove_replicas_from_isr,
)
from kt.protocol import ErrorCode


def state(leader: int, isr: tuple[int, ...], epoch: int = 5, zk: int = 7) -> LeaderAndIsr:
    return LeaderAndIsr(leader, epoch, isr, controller_epoch=1, zk_version=zk)


# --- the strategies, example by example --------------------------------------


def test_offline_picks_first_live_in_sync_replica_in_assignment_order() -> None:
    # 3 is first in the ISR but 2 comes first in the assignment.
    assert offline_election([1, 2, 3], [3, 2], {2, 3}, unclean_allowed=False) == Elected(2, (3, 2))


def test_offline_new_isr_is_isr_intersect_live() -> None:
    assert offline_election([1, 2, 3], [1, 2, 3], {2}, unclean_allowed=False) == Elected(2, (2,))


def test_offline_without_live_isr_member_fails_when_clean() -> None:
    assert offline_election([1, 2, 3], [1], {2, 3}, unclean_allowed=False) is None


def test_offline_unclean_takes_first_live_replica_alone() -> None:
    elected = offline_election([1, 2, 3], [1], {3, 2}, unclean_allowed=True)
    assert elected == Elected(2, (2,), unclean=True)


def test_offline_unclean_still_prefers_in_sync_replica() -> None:
    assert offline_election([1, 2, 3], [3], {2, 3}, unclean_allowed=True) == Elected(3, (3,))


def test_offline_nothing_live() -> None:
    assert offline_election([1, 2], [1, 2], set(), unclean_allowed=True) is None


def test_reassign_uses_target_replicas_and_keeps_isr() -> None:
    # Target 4,5,6 from 1,2,3: RS = 4,5,6,1,2,3, all caught up.
    isr = [1, 2, 3, 4, 5, 6]
    assert reassign_election([4, 5, 6], isr, set(range(1, 7))) == Elected(4, tuple(isr))
    assert reassign_election([4, 5, 6], isr, {1, 2, 3, 5, 6}) == Elected(5, tuple(isr))
    assert reassign_election([4, 5], [1, 2, 3], {1, 2, 3, 4, 5}) is None


def test_preferred_only_the_head() -> None:
    assert preferred_election([1, 2], [2, 1], {1, 2}) == Elected(1, (2, 1))
    assert preferred_election([1, 2], [2], {1, 2}) is None  # not in sync
    assert preferred_election([1, 2], [2, 1], {2}) is None  # not live
    assert preferred_election([], [2, 1], {2}) is None


def test_controlled_shutdown_skips_stopping_brokers_and_drops_them_from_isr() -> None:
    elected = controlled_shutdown_election([1, 2, 3], [1, 2, 3], {1, 2, 3}, {1})
    assert elected == Elected(2, (2, 3))
    assert controlled_shutdown_election([1, 2], [1], {1, 2}, {1}) is None


def test_new_partition_all_live_replicas_in_isr() -> None:
    assert new_partition_election([3, 1, 2], {1, 2}) == Elected(1, (1, 2))
    assert new_partition_election([3], {1}) is None


# --- states -------------------------------------------------------------------


def test_initial_state() -> None:
    s = LeaderAndIsr.initial(Elected(1, (1, 2)), controller_epoch=4)
    assert s == LeaderAndIsr(1, 0, (1, 2), 4, 0)
    assert s.leader_recovery_state is LeaderRecoveryState.RECOVERED


def test_elect_bumps_epoch_keeps_zk_version_and_stamps_controller_epoch() -> None:
    s = state(1, (1, 2)).elect(Elected(2, (2,)), controller_epoch=9)
    assert (s.leader, s.leader_epoch, s.isr, s.controller_epoch, s.zk_version) == (
        2,
        6,
        (2,),
        9,
        7,
    )
    assert s.with_zk_version(8).zk_version == 8


def test_unclean_election_is_recovering() -> None:
    s = state(1, (1,)).elect(Elected(2, (2,), unclean=True), controller_epoch=1)
    assert s.leader_recovery_state is LeaderRecoveryState.RECOVERING


def test_remove_follower_from_isr() -> None:
    s = remove_replicas_from_isr(state(1, (1, 2, 3)), [2], controller_epoch=3)
    assert s == LeaderAndIsr(1, 6, (1, 3), 3, 7)


def test_remove_leader_from_isr_leaves_no_leader() -> None:
    s = remove_replicas_from_isr(state(1, (1, 2)), [1], controller_epoch=1)
    assert s is not None and (s.leader, s.isr) == (NO_LEADER, (2,))


def test_last_isr_member_stays() -> None:
    s = remove_replicas_from_isr(state(1, (1,)), [1], controller_epoch=1)
    assert s is not None and (s.leader, s.isr, s.leader_epoch) == (NO_LEADER, (1,), 6)
    # Removing everyone keeps the last one removed, as Kafka's one-by-one removal does.
    s = remove_replicas_from_isr(state(1, (1, 2, 3)), [1, 2, 3], controller_epoch=1)
    assert s is not None and s.isr == (3,)


def test_remove_replica_not_in_isr_writes_nothing() -> None:
    assert remove_replicas_from_isr(state(1, (1, 2)), [3], controller_epoch=1) is None


# --- ElectLeaders ---------------------------------------------------------------


def test_elect_leaders_preferred() -> None:
    ok = elect_leaders(ElectionType.PREFERRED, "t-0", [1, 2], state(2, (1, 2)), {1, 2})
    assert ok.error is ErrorCode.NONE and ok.elected == Elected(1, (1, 2))
    same = elect_leaders(ElectionType.PREFERRED, "t-0", [1, 2], state(1, (1, 2)), {1, 2})
    assert same.error is ErrorCode.ELECTION_NOT_NEEDED
    down = elect_leaders(ElectionType.PREFERRED, "t-0", [1, 2], state(2, (1, 2)), {2})
    assert down.error is ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE
    assert down.message == (
        "Failed to elect leader for partition t-0 under strategy "
        "PreferredReplicaPartitionLeaderElectionStrategy"
    )


def test_elect_leaders_unclean() -> None:
    live_leader = elect_leaders(ElectionType.UNCLEAN, "t-0", [1, 2], state(1, (1,)), {1, 2})
    assert live_leader.error is ErrorCode.ELECTION_NOT_NEEDED
    ok = elect_leaders(ElectionType.UNCLEAN, "t-0", [1, 2], state(NO_LEADER, (1,)), {2})
    assert ok.error is ErrorCode.NONE and ok.elected == Elected(2, (2,), unclean=True)
    dead_leader = elect_leaders(ElectionType.UNCLEAN, "t-0", [1, 2], state(1, (1,)), {2})
    assert dead_leader.elected == Elected(2, (2,), unclean=True)
    none = elect_leaders(ElectionType.UNCLEAN, "t-0", [1, 2], state(NO_LEADER, (1,)), set())
    assert none.error is ErrorCode.ELIGIBLE_LEADERS_NOT_AVAILABLE
    assert none.message is not None and none.message.endswith(
        "OfflinePartitionLeaderElectionStrategy(true)"
    )


def test_failure_messages() -> None:
    assert failure_message("a-1", Strategy.OFFLINE) == (
        "Failed to elect leader for partition a-1 under strategy "
        "OfflinePartitionLeaderElectionStrategy(false)"
    )
    assert failure_message("a-1", Strategy.CONTROLLED_SHUTDOWN).endswith(
        "ControlledShutdownPartitionLeaderElectionStrategy"
    )


# --- properties -------------------------------------------------------------------

BROKERS = st.integers(min_value=0, max_value=7)


@st.composite
def partitions(draw: st.DrawFn) -> tuple[list[int], list[int], set[int], set[int]]:
    """(assignment, isr ⊆ assignment non-empty, live brokers, shutting-down brokers)."""
    assignment = draw(st.lists(BROKERS, min_size=1, max_size=5, unique=True))
    isr = draw(st.lists(st.sampled_from(assignment), min_size=1, unique=True))
    live = draw(st.sets(BROKERS))
    shutting_down = draw(st.sets(st.sampled_from(assignment)))
    return assignment, isr, live, shutting_down


@given(partitions(), st.booleans())
def test_offline_leader_is_an_eligible_replica(
    p: tuple[list[int], list[int], set[int], set[int]], unclean: bool
) -> None:
    assignment, isr, live, _ = p
    elected = offline_election(assignment, isr, live, unclean_allowed=unclean)
    if elected is None:
        assert not (set(assignment) & live & set(isr))
        assert not unclean or not (set(assignment) & live)
        return
    assert elected.leader in assignment and elected.leader in live
    assert elected.leader in elected.isr and set(elected.isr) <= live
    if not elected.unclean:
        assert elected.leader in isr and set(elected.isr) <= set(isr)
    else:
        assert unclean and not (set(assignment) & live & set(isr))


@given(partitions())
def test_other_strategies_pick_live_in_sync_replicas(
    p: tuple[list[int], list[int], set[int], set[int]],
) -> None:
    assignment, isr, live, shutting_down = p
    for elected in (
        reassign_election(assignment, isr, live),
        preferred_election(assignment, isr, live),
        controlled_shutdown_election(assignment, isr, live, shutting_down),
    ):
        if elected is not None:
            assert elected.leader in assignment and elected.leader in live
            assert elected.leader in isr and not elected.unclean
    cs = controlled_shutdown_election(assignment, isr, live, shutting_down)
    if cs is not None:
        assert cs.leader not in shutting_down and not set(cs.isr) & shutting_down
    new = new_partition_election(assignment, live)
    if new is not None:
        assert new.leader == new.isr[0] and set(new.isr) == set(assignment) & live


@given(partitions(), st.lists(BROKERS, max_size=6), st.integers(min_value=0, max_value=100))
def test_isr_removal_never_empties_and_bumps_epoch(
    p: tuple[list[int], list[int], set[int], set[int]], gone: list[int], epoch: int
) -> None:
    _, isr, _, _ = p
    before = LeaderAndIsr(isr[0], epoch, tuple(isr), 1, 3)
    after = remove_replicas_from_isr(before, gone, controller_epoch=2)
    if after is None:
        assert not set(gone) & set(isr)
        return
    assert after.isr and set(after.isr) <= set(isr)
    assert after.leader_epoch == epoch + 1 and after.zk_version == 3
    assert after.leader in (before.leader, NO_LEADER)
    assert (after.leader == NO_LEADER) == (before.leader in gone)
    if len(set(isr) - set(gone)) > 0:
        assert set(after.isr) == set(isr) - set(gone)


@given(partitions(), st.lists(st.tuples(st.sets(BROKERS), st.booleans()), max_size=8))
def test_leader_epoch_strictly_increases_across_failures_and_elections(
    p: tuple[list[int], list[int], set[int], set[int]],
    events: list[tuple[set[int], bool]],
) -> None:
    """Brokers come and go; the controller removes the dead from the ISR and elects
    offline partitions. Every change of leader comes with a larger leader epoch."""
    assignment, isr, _, _ = p
    current = LeaderAndIsr.initial(Elected(isr[0], tuple(isr)), controller_epoch=1)
    for live, unclean in events:
        dead = [r for r in assignment if r not in live]
        shrunk = remove_replicas_from_isr(current, dead, controller_epoch=1)
        if shrunk is not None:
            assert shrunk.leader_epoch > current.leader_epoch and shrunk.isr
            current = shrunk
        if current.leader == NO_LEADER:
            elected = offline_election(assignment, current.isr, live, unclean_allowed=unclean)
            if elected is not None:
                nxt = current.elect(elected, controller_epoch=1)
                assert nxt.leader_epoch > current.leader_epoch
                assert nxt.leader in live and nxt.leader in assignment
                current = nxt
        assert current.isr
