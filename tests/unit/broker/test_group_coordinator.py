"""The classic group state machine, driven directly with an in-memory record store."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from kt.broker.groups import CoordinatorSettings, GroupCoordinator, GroupState
from kt.broker.groups.coordinator import JoinRequest, JoinResult, SyncResult
from kt.broker.groups.group import OffsetEntry
from kt.broker.groups.offsets_log import MemoryRecordStore, partition_for, replay
from kt.protocol import ErrorCode as E
from kt.protocol.consumer_protocol import Subscription, encode_subscription

GID = "grp"


def run(test: Callable[[], Awaitable[None]]) -> None:
    asyncio.run(test())


async def make(**overrides: Any) -> tuple[GroupCoordinator, MemoryRecordStore]:
    """A started coordinator leading every partition of its in-memory store."""
    settings = CoordinatorSettings(
        **{"initial_rebalance_delay_ms": 0, "min_session_timeout_ms": 10, **overrides}
    )
    store = MemoryRecordStore(partitions=5)
    coord = GroupCoordinator(settings, store)
    await coord.start()
    return coord, store


def sub(*topics: str) -> bytes:
    return encode_subscription(Subscription(topics=list(topics)))


def request(
    member_id: str = "",
    *,
    instance: str | None = None,
    session: int = 10_000,
    rebalance: int = 10_000,
    protocols: list[tuple[str, bytes]] | None = None,
    protocol_type: str = "consumer",
    client: str = "c",
) -> JoinRequest:
    return JoinRequest(
        group_id=GID,
        member_id=member_id,
        group_instance_id=instance,
        client_id=client,
        client_host="/127.0.0.1",
        session_timeout_ms=session,
        rebalance_timeout_ms=rebalance,
        protocol_type=protocol_type,
        protocols=protocols if protocols is not None else [("range", sub("t"))],
    )


async def wait(fut: asyncio.Future[Any], timeout: float = 2.0) -> Any:
    return await asyncio.wait_for(asyncio.shield(fut), timeout)


async def join_new(coord: GroupCoordinator, **kw: Any) -> asyncio.Future[JoinResult]:
    """MEMBER_ID_REQUIRED, then the join with the id: the parked future."""
    first = await wait(coord.join_group(request(**kw)))
    assert first.error == E.MEMBER_ID_REQUIRED
    assert first.member_id.startswith(kw.get("client", "c") + "-")
    return coord.join_group(request(first.member_id, **kw))


async def sync(
    coord: GroupCoordinator, res: JoinResult, assignments: dict[str, bytes] | None = None
) -> asyncio.Future[SyncResult]:
    return coord.sync_group(GID, res.generation, res.member_id, None, "consumer", res.protocol_name,
                            assignments or {})  # fmt: skip


async def stable_group_of_two(coord: GroupCoordinator) -> tuple[JoinResult, JoinResult]:
    a = await wait(await join_new(coord))
    assert a.generation == 1 and a.leader == a.member_id
    assert (await wait(await sync(coord, a, {a.member_id: b"A"}))).assignment == b"A"
    b_fut = await join_new(coord, client="d")
    assert coord.heartbeat(GID, a.member_id, None, 1) == E.REBALANCE_IN_PROGRESS
    a2_fut = coord.join_group(request(a.member_id))
    a2, b = await wait(a2_fut), await wait(b_fut)
    assert a2.generation == b.generation == 2
    assert a2.leader == a.member_id and len(a2.members) == 2 and b.members == []
    follower = await sync(coord, b)
    assert not follower.done(), "followers wait for the leader's assignment"
    leader = await sync(coord, a2, {a.member_id: b"A2", b.member_id: b"B2"})
    assert (await wait(leader)).assignment == b"A2"
    assert (await wait(follower)).assignment == b"B2"
    assert coord.groups[GID].state is GroupState.STABLE
    return a2, b


def test_join_sync_and_rebalance_on_a_new_member() -> None:
    async def t() -> None:
        coord, store = await make()
        a, b = await stable_group_of_two(coord)
        assert coord.heartbeat(GID, a.member_id, None, 2) == E.NONE
        assert coord.heartbeat(GID, b.member_id, None, 1) == E.ILLEGAL_GENERATION
        assert coord.heartbeat(GID, "nobody", None, 2) == E.UNKNOWN_MEMBER_ID
        assert coord.heartbeat("other", a.member_id, None, 2) == E.UNKNOWN_MEMBER_ID
        # The assignment was persisted before it was handed out.
        loaded = replay(store.read(partition_for(GID, 5)))
        value = loaded.groups[GID]
        assert value.generation == 2 and value.protocol == "range"
        assert {m.member_id: m.assignment for m in value.members} == {
            a.member_id: b"A2",
            b.member_id: b"B2",
        }
        await coord.stop()

    run(t)


def test_validation_errors() -> None:
    async def t() -> None:
        coord, _ = await make(max_session_timeout_ms=60_000)
        r = await wait(coord.join_group(request(session=5)))
        assert r.error == E.INVALID_SESSION_TIMEOUT
        r = await wait(coord.join_group(request(session=100_000)))
        assert r.error == E.INVALID_SESSION_TIMEOUT
        r = await wait(coord.join_group(request("ghost")))
        assert r.error == E.UNKNOWN_MEMBER_ID
        bad = request()
        bad.group_id = ""
        assert (await wait(coord.join_group(bad))).error == E.INVALID_GROUP_ID
        a = await wait(await join_new(coord))
        other = request(protocols=[("roundrobin", b"")])
        assert (await wait(coord.join_group(other))).error == E.INCONSISTENT_GROUP_PROTOCOL
        other = request(protocol_type="connect")
        assert (await wait(coord.join_group(other))).error == E.INCONSISTENT_GROUP_PROTOCOL
        s = await wait(coord.sync_group(GID, 99, a.member_id, None, None, None, {}))
        assert s.error == E.ILLEGAL_GENERATION
        s = await wait(coord.sync_group(GID, 1, a.member_id, None, "connect", None, {}))
        assert s.error == E.INCONSISTENT_GROUP_PROTOCOL
        await coord.stop()

    run(t)


def test_protocol_with_most_votes_among_common_ones() -> None:
    async def t() -> None:
        coord, _ = await make(initial_rebalance_delay_ms=50)
        p1 = [("range", b""), ("roundrobin", b""), ("sticky", b"")]
        p2 = [("sticky", b""), ("roundrobin", b"")]
        p3 = [("roundrobin", b""), ("sticky", b"")]
        futs = [
            await join_new(coord, protocols=p, client=f"c{i}") for i, p in enumerate([p1, p2, p3])
        ]
        results = [await wait(f) for f in futs]
        # The initial delay gathered all three into generation 1.
        assert {r.generation for r in results} == {1}
        # "range" is not common; roundrobin gets 2 votes (c0 prefers it among
        # the common ones, c2 too) against sticky's 1.
        assert {r.protocol_name for r in results} == {"roundrobin"}
        await coord.stop()

    run(t)


def test_session_timeout_expires_a_member_and_rebalances() -> None:
    async def t() -> None:
        coord, _ = await make()
        a, b = await stable_group_of_two(coord)
        # b stops heartbeating; a keeps going.
        coord.groups[GID].members[b.member_id].session_timeout_ms = 50
        coord.heartbeat(GID, b.member_id, None, 2)  # reschedule with the short timeout
        await asyncio.sleep(0.1)
        assert b.member_id not in coord.groups[GID].members
        assert coord.groups[GID].state is GroupState.PREPARING_REBALANCE
        assert coord.heartbeat(GID, a.member_id, None, 2) == E.REBALANCE_IN_PROGRESS
        r = await wait(coord.join_group(request(a.member_id)))
        assert r.generation == 3 and [m[0] for m in r.members] == [a.member_id]
        await coord.stop()

    run(t)


def test_leader_rejoin_then_a_newcomer_waits_for_the_silent_leader() -> None:
    # The broker's side of a kafka-python flake: the leader assigns nothing (no topic
    # metadata yet), rejoins alone when its metadata arrives, syncs, then goes silent;
    # a newcomer's JoinGroup waits for it to rejoin until its session expires.
    async def t() -> None:
        coord, _ = await make()
        a = await wait(await join_new(coord, session=200))
        assert (await wait(await sync(coord, a, {a.member_id: b""}))).error == E.NONE
        group = coord.groups[GID]
        assert group.state is GroupState.STABLE
        # The leader rejoining a Stable group, same metadata: a rebalance that
        # completes at once (it is the only member), then Stable after its SyncGroup.
        a2 = await wait(coord.join_group(request(a.member_id, session=200)))
        assert a2.generation == 2 and a2.leader == a.member_id and len(a2.members) == 1
        assert group.state is GroupState.COMPLETING_REBALANCE
        assert coord.heartbeat(GID, a.member_id, None, 2) == E.NONE
        assert (await wait(await sync(coord, a2, {a.member_id: b"A"}))).assignment == b"A"
        assert group.state is GroupState.STABLE
        b_fut = await join_new(coord, client="d")
        assert group.state is GroupState.PREPARING_REBALANCE
        # A live leader learns of the rebalance from its next heartbeat ...
        assert coord.heartbeat(GID, a.member_id, None, 2) == E.REBALANCE_IN_PROGRESS
        await asyncio.sleep(0.05)
        assert not b_fut.done()
        # ... a silent one is dropped when its session expires, and the newcomer leads.
        b = await wait(b_fut)
        assert b.generation == 3 and b.leader == b.member_id
        assert [m[0] for m in b.members] == [b.member_id]
        await coord.stop()

    run(t)


def test_rebalance_timeout_removes_members_that_do_not_rejoin() -> None:
    async def t() -> None:
        coord, _ = await make()
        a, b = await stable_group_of_two(coord)
        group = coord.groups[GID]
        for m in group.members.values():
            m.rebalance_timeout_ms = 100
        # a rejoins with new metadata (a rebalance); b never does.
        rejoin = request(a.member_id, rebalance=100, protocols=[("range", sub("t", "u"))])
        fut = coord.join_group(rejoin)
        coord.heartbeat(GID, b.member_id, None, 2)
        assert not fut.done()
        r = await wait(fut)
        assert r.generation == 3 and [m[0] for m in r.members] == [a.member_id]
        assert b.member_id not in group.members
        await coord.stop()

    run(t)


def test_sync_timeout_removes_members_that_do_not_sync() -> None:
    async def t() -> None:
        coord, _ = await make()
        a = await wait(await join_new(coord, rebalance=80))
        assert coord.groups[GID].state is GroupState.COMPLETING_REBALANCE
        await asyncio.sleep(0.15)
        group = coord.groups[GID]
        assert a.member_id not in group.members
        await asyncio.sleep(0.01)
        assert group.state is GroupState.EMPTY
        await coord.stop()

    run(t)


def test_leave_group_and_delete_groups() -> None:
    async def t() -> None:
        coord, store = await make()
        a, b = await stable_group_of_two(coord)
        assert coord.delete_groups([GID, "nope"]) == {
            GID: E.NON_EMPTY_GROUP,
            "nope": E.GROUP_ID_NOT_FOUND,
        }
        top, errs = coord.leave_group(GID, [(b.member_id, None), ("ghost", None)])
        assert top == E.NONE and errs == [E.NONE, E.UNKNOWN_MEMBER_ID]
        assert coord.groups[GID].state is GroupState.PREPARING_REBALANCE
        top, errs = coord.leave_group(GID, [(a.member_id, None)])
        assert errs == [E.NONE]
        group = coord.groups[GID]
        assert group.state is GroupState.EMPTY and group.generation == 3
        assert coord.list_groups() == [(GID, "consumer", "Empty")]
        assert coord.list_groups(["stable"]) == []
        assert (
            await coord.commit_offsets(GID, -1, "", None, {("t", 0): OffsetEntry(5, -1, "", 1)})
            == E.NONE
        )
        assert coord.delete_groups([GID]) == {GID: E.NONE}
        assert GID not in coord.groups
        assert coord.describe_group(GID).state == "Dead"
        loaded = replay(store.read(partition_for(GID, 5)))
        assert GID not in loaded.groups and not loaded.offsets
        assert coord.leave_group(GID, [(a.member_id, None)])[0] == E.UNKNOWN_MEMBER_ID
        await coord.stop()

    run(t)


def test_static_member_rejoin_takes_over_without_rebalance() -> None:
    async def t() -> None:
        coord, _ = await make()
        a = await wait(coord.join_group(request(instance="i-a")))
        assert a.error == E.NONE and a.member_id.startswith("i-a-")
        await wait(await sync(coord, a, {a.member_id: b"A"}))
        b_fut = coord.join_group(request(instance="i-b"))
        a = await wait(coord.join_group(request(a.member_id, instance="i-a")))
        b = await wait(b_fut)
        assert a.generation == 2
        s = await sync(coord, a, {a.member_id: b"A", b.member_id: b"B"})
        await wait(await sync(coord, b))
        await wait(s)
        # i-b restarts: new member id, same generation, its old assignment.
        b2 = await wait(coord.join_group(request(instance="i-b")))
        assert b2.error == E.NONE and b2.generation == 2 and b2.member_id != b.member_id
        assert coord.groups[GID].state is GroupState.STABLE
        assert (await wait(await sync(coord, b2))).assignment == b"B"
        # The old incarnation is fenced.
        assert coord.heartbeat(GID, b.member_id, "i-b", 2) == E.FENCED_INSTANCE_ID
        assert coord.heartbeat(GID, b2.member_id, "i-b", 2) == E.NONE
        # The leader restarting (v9) keeps leading without computing an assignment.
        a2 = await wait(coord.join_group(request(instance="i-a")))
        assert a2.leader == a2.member_id and a2.skip_assignment and len(a2.members) == 2
        assert coord.groups[GID].generation == 2
        # Removal by instance id (admin).
        _, errs = coord.leave_group(GID, [("", "i-b"), ("", "i-zz")])
        assert errs == [E.NONE, E.UNKNOWN_MEMBER_ID]
        await coord.stop()

    run(t)


def test_offset_commit_rules() -> None:
    async def t() -> None:
        coord, store = await make()
        off = {("t", 0): OffsetEntry(10, 3, "m", 1000)}
        # No group: simple commit allowed, a generation is not.
        assert await coord.commit_offsets("simple", 5, "m", None, off) == E.ILLEGAL_GENERATION
        assert await coord.commit_offsets("simple", -1, "", None, off) == E.NONE
        err, found = coord.fetch_offsets("simple", [("t", 0), ("t", 1)])
        assert err == E.NONE and found[0][2] == off[("t", 0)] and found[1][2] is None
        assert coord.fetch_offsets("simple", None)[1] == [("t", 0, off[("t", 0)])]
        a = await wait(await join_new(coord))
        # CompletingRebalance: the member must sync first.
        assert await coord.commit_offsets(GID, 1, a.member_id, None, off) == E.REBALANCE_IN_PROGRESS
        await wait(await sync(coord, a, {}))
        assert await coord.commit_offsets(GID, 1, a.member_id, None, off) == E.NONE
        assert await coord.commit_offsets(GID, 0, a.member_id, None, off) == E.ILLEGAL_GENERATION
        assert await coord.commit_offsets(GID, 1, "x", None, off) == E.UNKNOWN_MEMBER_ID
        assert await coord.commit_offsets(GID, -1, "", None, off) == E.UNKNOWN_MEMBER_ID
        # OffsetDelete: the member subscribes to "t".
        top, errs = coord.delete_offsets(GID, [("t", 0), ("u", 0)])
        assert top == E.NONE
        assert errs == {("t", 0): E.GROUP_SUBSCRIBED_TO_TOPIC, ("u", 0): E.NONE}
        assert coord.delete_offsets("missing", [("t", 0)])[0] == E.GROUP_ID_NOT_FOUND
        # A failing append commits nothing; an I/O error is a storage error, which
        # Kafka answers NOT_COORDINATOR (the partition is going offline here).
        store.fail = True
        changed = {("t", 0): OffsetEntry(99, 3, "", 2000)}
        assert await coord.commit_offsets(GID, 1, a.member_id, None, changed) == E.NOT_COORDINATOR
        assert coord.fetch_offsets(GID, [("t", 0)])[1][0][2] == off[("t", 0)]
        await coord.stop()

    run(t)


def test_state_is_reloaded_from_the_log() -> None:
    async def t() -> None:
        coord, store = await make()
        a, _ = await stable_group_of_two(coord)
        await coord.commit_offsets(GID, 2, a.member_id, None, {("t", 0): OffsetEntry(7, 1, "x", 5)})
        await coord.commit_offsets(GID, 2, a.member_id, None, {("t", 0): OffsetEntry(8, 1, "y", 6)})
        await coord.commit_offsets("simple", -1, "", None, {("u", 1): OffsetEntry(3, -1, "", 5)})
        coord.delete_offsets("simple", [("u", 1)])
        await coord.stop()
        again = GroupCoordinator(coord.settings, store)
        await again.start()
        group = again.groups[GID]
        # Members must rejoin: the group comes back Empty with its generation.
        assert group.state is GroupState.EMPTY and group.generation == 2 and not group.members
        assert group.protocol_type == "consumer"
        assert group.offsets == {("t", 0): OffsetEntry(8, 1, "y", 6)}
        assert "simple" not in again.groups, "its only offset was deleted"
        assert again.heartbeat(GID, a.member_id, None, 2) == E.UNKNOWN_MEMBER_ID
        r = await wait(await join_new(again))
        assert r.generation == 3
        await again.stop()

    run(t)


def test_offsets_expire_for_empty_groups_and_deleted_topics() -> None:
    async def t() -> None:
        coord, store = await make(offsets_retention_ms=1000)
        await coord.commit_offsets("simple", -1, "", None, {
            ("t", 0): OffsetEntry(1, -1, "", 10_000),
            ("t", 1): OffsetEntry(2, -1, "", 10_500),
            ("u", 0): OffsetEntry(3, -1, "", 10_000, expire_timestamp=10_200),
        })  # fmt: skip
        assert coord.expire_offsets(now=10_300) == 1  # the explicit expire timestamp
        assert coord.expire_offsets(now=11_000) == 1  # ("t", 0): committed 1 s ago
        assert set(coord.groups["simple"].offsets) == {("t", 1)}
        coord.on_topic_deleted("t")
        assert "simple" not in coord.groups, "an empty group without offsets is removed"
        loaded = replay(store.read(partition_for("simple", 5)))
        assert not loaded.offsets and "simple" not in loaded.groups
        await coord.stop()

    run(t)


@pytest.mark.parametrize("delay", [0, 60])
def test_initial_rebalance_delay(delay: int) -> None:
    async def t() -> None:
        coord, _ = await make(initial_rebalance_delay_ms=delay)
        f1 = await join_new(coord, client="x")
        await asyncio.sleep(0.01)
        f2 = await join_new(coord, client="y")
        r1 = await wait(f1)
        if delay:
            r2 = await wait(f2)
            assert r1.generation == r2.generation == 1
        else:
            assert r1.generation == 1 and len(r1.members) == 1
            assert not f2.done()  # waits for the rebalance its arrival started
        await coord.stop()

    run(t)


def test_commit_errors_are_kafkas() -> None:
    from kt.broker.errors import NotLeaderOrFollowerError, UnknownTopicOrPartitionError
    from kt.broker.groups.coordinator import commit_error
    from kt.storage.log import RecordBatchTooLargeError, RecordTooLargeError

    assert commit_error(RecordTooLargeError("big")) == E.INVALID_COMMIT_OFFSET_SIZE
    assert commit_error(RecordBatchTooLargeError("big")) == E.INVALID_COMMIT_OFFSET_SIZE
    assert commit_error(UnknownTopicOrPartitionError()) == E.COORDINATOR_NOT_AVAILABLE
    assert commit_error(NotLeaderOrFollowerError()) == E.NOT_COORDINATOR
    assert commit_error(OSError("disk")) == E.NOT_COORDINATOR
