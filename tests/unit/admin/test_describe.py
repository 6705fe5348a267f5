"""kt.admin.describe: the group, partition and broker views `kt group|cluster describe`
and the TUI's sampler both build, from hand-made answers (deterministic)."""

from __future__ import annotations

from kt.admin.describe import (
    GroupMember,
    broker_loads,
    controller_warning,
    group_description,
    log_dir_usage,
    min_insync_replicas,
    offline,
    preferred_leader,
    replica_sizes,
    under_min_isr,
    under_replicated,
)
from kt.client import LogDirInfo, LogDirPartition, PartitionInfo
from kt.protocol.errors import ErrorCode


def member(mid: str, *tps: tuple[str, int]) -> GroupMember:
    return GroupMember(mid, f"client-{mid}", f"/10.0.0.{len(mid)}", None, tuple(tps))


def test_group_rows_cover_committed_and_owned_partitions_with_owner_and_lag() -> None:
    a, b = member("a", ("t", 0), ("t", 1)), member("b", ("u", 0))
    g = group_description(
        "g", "Stable", "consumer", "range", [b, a],
        committed={("t", 0): 4, ("t", 2): 7, ("gone", 0): 3, ("u", 0): -1},
        ends={("t", 0): 10, ("t", 1): 5, ("t", 2): 6, ("u", 0): 9},
        coordinator=2,
    )  # fmt: skip
    rows = [(r.topic, r.partition, r.committed, r.log_end_offset, r.consumer) for r in g.lags]
    assert rows == [
        ("gone", 0, 3, -1, None),  # a deleted topic's offset: no log end
        ("t", 0, 4, 10, "a"),
        ("t", 1, -1, 5, "a"),  # owned, nothing committed yet
        ("t", 2, 7, 6, None),  # truncated below the commit
        ("u", 0, -1, 9, "b"),
    ]
    assert [r.known for r in g.lags] == [False, True, False, True, False]
    assert [r.lag for r in g.lags] == [0, 6, 0, 0, 0]  # unknown and negative count as 0
    assert g.total_lag == 6
    # Members keep DescribeGroups' order (the CLI prints them so); lookups by id.
    assert [m.member_id for m in g.members] == ["b", "a"]
    assert g.member("a") is a and g.member(None) is None and g.member("zz") is None
    assert g.coordinator == 2 and g.exists


def test_a_group_exists_unless_dead_with_no_members_and_no_offsets() -> None:
    def g(state: str, committed: dict[tuple[str, int], int], *members: GroupMember) -> bool:
        return group_description("g", state, "", "", members, committed, {}).exists

    assert not g("Dead", {})
    assert not g("", {})
    assert g("Dead", {("t", 0): 1})  # offsets outlive the members
    assert g("Empty", {})
    assert g("Dead", {}, member("m"))


def test_partition_state_and_min_isr() -> None:
    p = PartitionInfo("t", 0, leader=2, leader_epoch=1, replicas=[1, 2, 3], isr=[2, 3])
    assert under_replicated(p) and not offline(p) and preferred_leader(p) == 1
    q = PartitionInfo("t", 1, leader=-1, leader_epoch=1, replicas=[], isr=[])
    assert offline(q) and not under_replicated(q) and preferred_leader(q) == -1
    assert min_insync_replicas([("retention.ms", "1"), ("min.insync.replicas", "2")]) == 2
    assert min_insync_replicas([("min.insync.replicas", None)]) == 1
    assert min_insync_replicas([("min.insync.replicas", "")]) == 1
    assert min_insync_replicas([("min.insync.replicas", "two")]) == 1
    assert min_insync_replicas([]) == 1


def test_broker_loads_count_what_each_broker_leads_hosts_and_prefers() -> None:
    parts = [
        PartitionInfo("t", 0, 1, 0, [1, 2, 3], [1, 2, 3]),
        PartitionInfo("t", 1, 2, 0, [3, 2, 1], [2, 3], offline_replicas=[1]),
        PartitionInfo("t", 2, -1, 0, [3, 4], []),
    ]
    loads = broker_loads(parts, [3, 1, 2, 5])
    assert list(loads) == [1, 2, 3, 4, 5]  # sorted; 4 only named as a replica, 5 idle
    one, two, three, four = loads[1], loads[2], loads[3], loads[4]
    assert (one.leaders, one.replicas, one.out_of_sync, one.offline_replicas) == (1, 2, 1, 1)
    assert (one.under_replicated, one.under_replicated_led) == (1, 0)
    assert (two.leaders, two.under_replicated_led, two.preferred) == (1, 1, 0)
    assert (three.preferred, three.preferred_not_led, three.imbalance_percent) == (2, 2, 100.0)
    assert (three.offline, four.offline, four.out_of_sync) == (1, 1, 1)
    assert loads[5].imbalance_percent == 0.0 and loads[5].replicas == 0


def test_replicas_a_reassignment_is_adding_are_not_yet_part_of_the_factor() -> None:
    # Moving [1, 2, 3] to [4, 5, 6]: replicas [4, 5, 6, 1, 2, 3], adding 4, 5, 6, the old
    # three in sync. Kafka counts the factor as 3: not under-replicated while 4-6 catch up.
    moving = PartitionInfo("t", 0, 1, 3, [4, 5, 6, 1, 2, 3], [1, 2, 3])
    assert under_replicated(moving)  # without knowing the reassignment
    assert not under_replicated(moving, adding=(4, 5, 6))
    assert under_replicated(PartitionInfo("t", 0, 1, 3, [4, 5, 6, 1, 2, 3], [1, 2]), (4, 5, 6))
    # an adding replica the partition no longer lists (the move finished) does not count
    assert under_replicated(PartitionInfo("t", 0, 1, 3, [4, 5], [4]), adding=(6,))
    loads = broker_loads([moving], [1, 2, 3], adding=lambda p: (4, 5, 6))
    assert loads[1].under_replicated == 0 and loads[1].under_replicated_led == 0


def test_under_min_isr_counts_partitions_without_a_leader() -> None:
    assert under_min_isr(PartitionInfo("t", 0, 1, 0, [1, 2, 3], [1]), 2)
    assert not under_min_isr(PartitionInfo("t", 0, 1, 0, [1, 2, 3], [1, 2]), 2)
    # no leader: under min ISR whatever the ISR says (kafka-topics.sh's definition)
    assert under_min_isr(PartitionInfo("t", 0, -1, 0, [1, 2, 3], [1, 2, 3]), 2)


def test_a_controller_missing_from_the_brokers_is_one_line() -> None:
    assert controller_warning(1, [1, 2]) is None
    assert controller_warning(-1, [1, 2]) is None  # no controller known: nothing to flag
    assert controller_warning(0, [3, 1, 2]) == (
        "controller 0 is not among the listed brokers (1,2,3)"
    )
    assert controller_warning(7, []) == "controller 7 is not among the listed brokers (none)"


def test_log_dir_usage_and_replica_sizes_leave_future_replicas_out() -> None:
    dirs = [
        LogDirInfo(2, "/b", ErrorCode.NONE, [
            LogDirPartition("t", 0, 100, 0, False),
            LogDirPartition("t", 1, 40, 0, True),  # moving in from /a: not yet the replica
        ], 1000, 500),
        LogDirInfo(2, "/a", ErrorCode.NONE, [LogDirPartition("t", 1, 70, 0, False)]),
        LogDirInfo(1, "/z", ErrorCode.KAFKA_STORAGE_ERROR, []),
    ]  # fmt: skip
    assert replica_sizes(dirs) == {("t", 0, 2): 100, ("t", 1, 2): 70}
    usage = log_dir_usage(dirs)
    assert [(u.broker, u.path, u.error) for u in usage] == [
        (1, "/z", "KAFKA_STORAGE_ERROR"),
        (2, "/a", None),
        (2, "/b", None),
    ]
    assert [(u.size_bytes, u.partitions) for u in usage] == [(0, 0), (70, 1), (100, 1)]
    assert (usage[2].total_bytes, usage[2].usable_bytes, usage[1].total_bytes) == (1000, 500, -1)
