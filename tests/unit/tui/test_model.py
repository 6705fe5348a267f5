"""The TUI's data model with hand-built snapshots: derived properties, History's rates,
lag trends and lag in seconds. Deterministic: times are given, never measured."""

from __future__ import annotations

import pytest

from kt.tui.model import (
    BrokerInfo,
    ClusterSnapshot,
    GroupInfo,
    GroupPartitionLag,
    History,
    PartitionInfo,
    TopicInfo,
)


def part(
    topic: str = "t",
    partition: int = 0,
    *,
    end: int = 0,
    start: int = 0,
    size: int = 0,
    leader: int = 1,
    replicas: tuple[int, ...] = (1,),
    isr: tuple[int, ...] | None = None,
) -> PartitionInfo:
    return PartitionInfo(
        topic=topic,
        partition=partition,
        leader=leader,
        leader_epoch=0,
        replicas=replicas,
        isr=replicas if isr is None else isr,
        offline_replicas=(),
        log_start_offset=start,
        log_end_offset=end,
        size_bytes=size,
    )


def topic(name: str, *parts: PartitionInfo, min_isr: int = 1) -> TopicInfo:
    return TopicInfo(
        name=name,
        topic_id="00000000-0000-0000-0000-000000000000",
        internal=False,
        partitions=parts,
        replication_factor=max((len(p.replicas) for p in parts), default=0),
        min_insync_replicas=min_isr,
    )


def group(gid: str, *lags: tuple[str, int, int, int], state: str = "Stable") -> GroupInfo:
    return GroupInfo(
        group_id=gid,
        state=state,
        protocol_type="consumer",
        protocol="range",
        members=(),
        lags=tuple(GroupPartitionLag(t, p, c, e, None) for t, p, c, e in lags),
    )


def snap(
    at: float,
    topics: tuple[TopicInfo, ...] = (),
    groups: tuple[GroupInfo, ...] = (),
    error: str | None = None,
) -> ClusterSnapshot:
    return ClusterSnapshot(
        taken_at=at,
        wall_time=1_700_000_000 + at,
        bootstrap="localhost:9092",
        cluster_id="c",
        controller_id=1,
        brokers=(BrokerInfo(1, "localhost", 9092, None, True, 1, 0, 0),),
        topics=topics,
        groups=groups,
        log_dirs=(),
        refresh_seconds=0.01,
        error=error,
    )


def failed(at: float) -> ClusterSnapshot:
    return snap(at, error="no broker reachable")


# --- the value objects -------------------------------------------------------------


def test_partition_flags() -> None:
    ok = part(leader=1, replicas=(1, 2, 3))
    assert ok.preferred_leader == 1
    assert not ok.under_replicated and not ok.offline and not ok.leader_not_preferred
    moved = part(leader=2, replicas=(1, 2, 3), isr=(2, 3))
    assert moved.under_replicated and moved.leader_not_preferred
    gone = part(leader=-1, replicas=(1, 2), isr=())
    assert gone.offline and not gone.leader_not_preferred
    assert part(replicas=()).preferred_leader == -1


def test_a_partition_being_moved_is_not_under_replicated_while_new_replicas_catch_up() -> None:
    from dataclasses import replace

    moving = replace(
        part(leader=1, replicas=(4, 5, 6, 1, 2, 3), isr=(1, 2, 3)), adding_replicas=(4, 5, 6)
    )
    assert not moving.under_replicated
    assert replace(moving, isr=(1, 2)).under_replicated
    snap_topic = topic("t", moving, min_isr=2)
    assert snap_topic.under_replicated == 0 and snap_topic.under_min_isr == 0
    # and no broker counts it as under-replicated either
    loads = snap(0.0, topics=(snap_topic,)).broker_loads()
    assert set(loads) == {1, 2, 3, 4, 5, 6}
    assert all(load.under_replicated == 0 for load in loads.values())


def test_topic_aggregates_skip_unknowns() -> None:
    t = topic(
        "t",
        part(partition=0, end=10, size=100, replicas=(1, 2), isr=(1,)),
        part(partition=1, end=-1, size=-1, replicas=(1, 2)),
        part(partition=2, end=5, size=50, leader=-1, replicas=(1, 2), isr=()),
        min_isr=2,
    )
    assert t.end_offsets_sum == 15
    assert t.size_bytes == 150
    assert t.under_replicated == 2
    assert t.under_min_isr == 2
    assert t.offline == 1


def test_lag_is_zero_when_unknown_and_never_negative() -> None:
    assert GroupPartitionLag("t", 0, 4, 10, None).lag == 6
    assert GroupPartitionLag("t", 0, -1, 10, None).lag == 0
    assert GroupPartitionLag("t", 0, 4, -1, None).lag == 0
    # A log truncated below the committed offset: no negative lag.
    assert GroupPartitionLag("t", 0, 12, 10, None).lag == 0
    assert group("g", ("t", 0, 4, 10), ("t", 1, 0, 3), ("t", 2, -1, 9)).total_lag == 9


def test_snapshot_lookups() -> None:
    s = snap(0, (topic("a", part("a")), topic("b", part("b"), part("b", 1))), (group("g"),))
    assert s.topic("b") is not None and s.topic("zz") is None
    assert s.group("g") is not None and s.group("h") is None
    assert [(p.topic, p.partition) for p in s.partitions] == [("a", 0), ("b", 0), ("b", 1)]


# --- History -----------------------------------------------------------------------


def test_history_keeps_capacity_and_latest_ok() -> None:
    h = History(capacity=3)
    assert h.latest is None and h.latest_ok is None
    for i in range(5):
        h.add(snap(float(i)))
    assert [s.taken_at for s in h.snapshots()] == [2.0, 3.0, 4.0]
    h.add(failed(5.0))
    assert h.latest is not None and h.latest.error is not None
    assert h.latest_ok is not None and h.latest_ok.taken_at == 4.0


def test_topic_and_cluster_produce_rates() -> None:
    h = History()
    h.add(snap(0.0, (topic("a", part("a", end=0)), topic("b", part("b", end=100)))))
    h.add(snap(2.0, (topic("a", part("a", end=200)), topic("b", part("b", end=100)))))
    h.add(snap(4.0, (topic("a", part("a", end=300)), topic("b", part("b", end=500)))))
    assert h.topic_rate_series("a") == [100.0, 50.0]
    assert h.topic_rate_series("b") == [0.0, 200.0]
    assert h.topic_rate_series("missing") == []
    assert h.produce_rate_series() == [100.0, 250.0]


def test_rates_skip_failed_refreshes_and_span_the_gap() -> None:
    h = History()
    h.add(snap(0.0, (topic("a", part("a", end=0)),)))
    h.add(failed(1.0))
    h.add(failed(2.0))
    h.add(snap(4.0, (topic("a", part("a", end=400)),)))
    # The outage is bridged: one rate over the 4 s between the two good snapshots.
    assert h.topic_rate_series("a") == [100.0]
    assert h.produce_rate_series() == [100.0]


def test_rates_never_negative() -> None:
    # A topic deleted and recreated: its end offsets fall.
    h = History()
    h.add(snap(0.0, (topic("a", part("a", end=1000, size=4096)),)))
    h.add(snap(1.0, (topic("a", part("a", end=10, size=100)),)))
    assert h.topic_rate_series("a") == [0.0]
    assert h.produce_rate_series() == [0.0]
    assert h.bytes_rate_series() == [0.0]


def test_topic_rate_skips_snapshots_without_the_topic() -> None:
    h = History()
    h.add(snap(0.0))
    h.add(snap(1.0, (topic("a", part("a", end=50)),)))
    h.add(snap(2.0, (topic("a", part("a", end=150)),)))
    assert h.topic_rate_series("a") == [100.0]


def test_bytes_rate() -> None:
    h = History()
    h.add(snap(0.0, (topic("a", part("a", size=1000), part("a", 1, size=-1)),)))
    h.add(snap(0.5, (topic("a", part("a", size=3000), part("a", 1, size=500)),)))
    assert h.bytes_rate_series() == [5000.0]


def test_same_instant_snapshots_give_no_rate() -> None:
    h = History()
    h.add(snap(1.0, (topic("a", part("a", end=0)),)))
    h.add(snap(1.0, (topic("a", part("a", end=10)),)))
    assert h.topic_rate_series("a") == []
    assert h.produce_rate_series() == []
    assert h.consume_rate_series() == []


def test_consume_rate_and_group_lag_series() -> None:
    h = History()
    h.add(snap(0.0, groups=(group("g", ("t", 0, 0, 100), ("t", 1, 0, 100)),)))
    h.add(snap(1.0, groups=(group("g", ("t", 0, 50, 150), ("t", 1, 30, 100)),)))
    h.add(failed(2.0))
    h.add(snap(3.0, groups=(group("g", ("t", 0, 150, 150), ("t", 1, 50, 120)),)))
    assert h.consume_rate_series() == [80.0, 60.0]
    assert h.group_lag_series("g") == [200, 170, 70]
    assert h.group_lag_series("other") == []


def test_group_consume_rate_and_lag_seconds() -> None:
    h = History()
    for i in range(6):
        committed = 100 * i
        end = 1000 + 50 * i
        h.add(snap(float(i), groups=(group("g", ("t", 0, committed, end)),)))
    # 500 records committed in 5 s.
    assert h.group_consume_rate("g") == pytest.approx(100.0)
    # Lag now 1250 - 500 = 750 at 100 records/s.
    assert h.group_lag_seconds("g") == pytest.approx(7.5)
    # Over the last 3 snapshots only: still 100/s.
    assert h.group_consume_rate("g", window=3) == pytest.approx(100.0)


def test_group_consume_rate_window_uses_recent_snapshots() -> None:
    h = History()
    commits = [0, 0, 0, 0, 100, 300]
    for i, c in enumerate(commits):
        h.add(snap(float(i), groups=(group("g", ("t", 0, c, 1000)),)))
    assert h.group_consume_rate("g", window=2) == pytest.approx(200.0)
    assert h.group_consume_rate("g", window=6) == pytest.approx(60.0)


def test_lag_seconds_edge_cases() -> None:
    h = History()
    assert h.group_lag_seconds("g") is None  # nothing known
    h.add(snap(0.0, groups=(group("g", ("t", 0, 10, 100)),)))
    assert h.group_consume_rate("g") == 0.0  # one snapshot: no rate
    assert h.group_lag_seconds("g") is None
    h.add(snap(1.0, groups=(group("g", ("t", 0, 10, 200)),)))
    # Lagging and not consuming: it will never catch up.
    assert h.group_lag_seconds("g") is None
    h.add(snap(2.0, groups=(group("g", ("t", 0, 200, 200)),)))
    assert h.group_lag_seconds("g") == 0.0  # caught up
    h.add(failed(3.0))
    # A failed refresh does not hide the last known state.
    assert h.group_lag_seconds("g") == 0.0
    assert h.group_lag_seconds("missing") is None


def test_group_that_appears_later() -> None:
    h = History()
    h.add(snap(0.0))
    h.add(snap(1.0, groups=(group("g", ("t", 0, 0, 100)),)))
    h.add(snap(3.0, groups=(group("g", ("t", 0, 40, 100)),)))
    assert h.group_consume_rate("g") == pytest.approx(20.0)
    assert h.group_lag_seconds("g") == pytest.approx(3.0)
    assert h.group_lag_series("g") == [100, 60]


def test_broker_loads_count_leaders_replicas_and_unhealthy_partitions() -> None:
    s = snap(
        0,
        (
            topic(
                "t",
                part("t", 0, leader=1, replicas=(1, 2, 3)),
                part("t", 1, leader=2, replicas=(2, 3, 1), isr=(2, 3)),
                part("t", 2, leader=-1, replicas=(3, 4), isr=()),
            ),
        ),
    )
    loads = s.broker_loads()
    assert sorted(loads) == [1, 2, 3, 4]  # 4 is only named as a replica
    assert (loads[1].leaders, loads[1].replicas, loads[1].out_of_sync) == (1, 2, 1)
    assert (loads[1].under_replicated, loads[1].offline) == (1, 0)
    assert (loads[2].leaders, loads[2].replicas, loads[2].under_replicated) == (1, 2, 1)
    assert (loads[3].leaders, loads[3].replicas, loads[3].offline) == (0, 3, 1)
    assert (loads[4].replicas, loads[4].out_of_sync, loads[4].offline) == (1, 1, 1)
