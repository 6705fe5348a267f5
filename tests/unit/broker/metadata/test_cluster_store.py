"""ClusterStore (Kafka's KafkaZkClient operations) on both stores.

The zookeeper variant runs against the real server (integration): the same znodes,
the same conditional writes and the same failures as over the in-process store.
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import Any

import pytest

from kt.broker.metadata import znodes as z
from kt.broker.metadata.cluster_store import (
    BrokerIdInUseError,
    ClusterStore,
    ControllerMovedError,
    TopicAlreadyMarkedForDeletionError,
    TopicExistsError,
)
from kt.broker.metadata.in_process import InProcessStore
from kt.broker.metadata.store import BadVersionError, NodeExistsError, NoNodeError

TID = bytes(range(16))


def run(coro: Coroutine[Any, Any, Any]) -> Any:
    """Run a test's coroutine on a fresh loop; a hang fails instead of blocking."""
    return asyncio.run(asyncio.wait_for(coro, 60))


def reg(broker_id: int, port: int = 9092) -> z.BrokerRegistration:
    return z.BrokerRegistration(
        broker_id, (z.Endpoint("PLAINTEXT", "127.0.0.1", port),), 1700000000000
    )


def test_persistent_paths(sessions: Any) -> None:
    async def body() -> None:
        async with sessions(1) as [s]:
            cs = ClusterStore(s)
            await cs.ensure_persistent_paths()
            await cs.ensure_persistent_paths()  # idempotent
            for path in z.PERSISTENT_PATHS:
                assert await s.exists(path) is not None, path

    run(body())


def test_register_broker(sessions: Any) -> None:
    async def body() -> None:
        async with sessions(2) as [s1, s2]:
            cs1, cs2 = ClusterStore(s1), ClusterStore(s2)
            await cs1.ensure_persistent_paths()
            epoch = await cs1.register_broker(reg(1))
            data, stat = await s1.get("/brokers/ids/1")
            assert data == z.encode_broker(reg(1))
            assert (stat.czxid, stat.version, stat.ephemeral_owner) == (epoch, 1, s1.session_id)
            # Our own session's node (a retried registration) is fine and keeps the epoch.
            assert await cs1.register_broker(reg(1, 9999)) == epoch
            with pytest.raises(BrokerIdInUseError, match="broker id 1 is already registered"):
                await cs2.register_broker(reg(1))
            epoch2 = await cs2.register_broker(reg(2))
            brokers = await cs1.get_brokers()
            assert sorted(brokers) == [1, 2]
            assert brokers[1].epoch == epoch and brokers[2].epoch == epoch2 > epoch
            assert brokers[1].registration.endpoints[0].port == 9999
            await s1.close()
            await asyncio.sleep(0.2)
            assert await cs2.get_broker_ids() == [2]
            # The id is free again; the new registration has a larger epoch (bounce).
            assert await cs2.register_broker(reg(1)) > epoch2

    run(body())


def test_controller_election_and_fencing(sessions: Any) -> None:
    async def body() -> None:
        async with sessions(2) as [s1, s2]:
            cs1, cs2 = ClusterStore(s1), ClusterStore(s2)
            await cs1.ensure_persistent_paths()
            assert await cs1.get_controller() is None
            won = await cs1.try_elect_controller(1)
            assert won == (1, 1)  # /controller_epoch created as 0 (zkVersion 0), then 1
            assert await cs2.try_elect_controller(2) is None
            assert await cs2.get_controller() == 1
            assert await cs2.get_controller_epoch() == (1, 1)
            data, stat = await s2.get("/controller")
            assert stat.ephemeral_owner == s1.session_id
            assert data.startswith(b'{"version":2,"brokerid":1,"timestamp":"')

            # The old controller goes away; the next one gets epoch 2 and fences it out.
            await s1.close()
            await asyncio.sleep(0.2)
            assert await cs2.try_elect_controller(2) == (2, 2)
            await cs2.ensure_persistent_paths()
            await cs2.create_topic("t", TID, {0: [2]})
            with pytest.raises(ControllerMovedError):
                await cs2.set_topic_assignment("t", z.TopicAssignment({0: [2, 3]}, TID), 1)
            await cs2.set_topic_assignment("t", z.TopicAssignment({0: [2, 3]}, TID), 2)
            assert (await cs2.get_topic_assignments())["t"].partitions == {0: [2, 3]}
            await cs2.resign_controller(2)
            assert await cs2.get_controller() is None

    run(body())


def test_election_race_has_one_winner(sessions: Any) -> None:
    async def body() -> None:
        async with sessions(3) as stores:
            results = await asyncio.gather(
                *(ClusterStore(s).try_elect_controller(i) for i, s in enumerate(stores))
            )
            winners = [r for r in results if r is not None]
            assert winners == [(1, 1)]
            winner = results.index((1, 1))
            assert await ClusterStore(stores[0]).get_controller() == winner

    run(body())


def test_topics_and_partition_states(sessions: Any) -> None:
    async def body() -> None:
        async with sessions(1) as [s]:
            cs = ClusterStore(s)
            await cs.ensure_persistent_paths()
            _, zkv = await cs.try_elect_controller(1) or (0, 0)
            await cs.create_topic("t", TID, {0: [1, 2], 1: [2, 1]}, {"retention.ms": "5"})
            with pytest.raises(TopicExistsError):
                await cs.create_topic("t", TID, {0: [1]})
            assert (await s.get("/config/topics/t"))[0] == (
                b'{"version":1,"config":{"retention.ms":"5"}}'
            )
            assert await cs.get_all_topics() == ["t"]
            topic = (await cs.get_topic_assignments(["t", "missing"]))["t"]
            assert topic == z.TopicAssignment({0: [1, 2], 1: [2, 1]}, TID)

            states = {
                ("t", 0): z.PartitionState(1, 0, [1, 2], 1),
                ("t", 1): z.PartitionState(2, 0, [2, 1], 1),
            }
            created = await cs.create_partition_states(states, zkv)
            assert created[("t", 0)] == z.PartitionState(1, 0, [1, 2], 1, 0, 0)
            again = await cs.create_partition_states({("t", 0): states[("t", 0)]}, zkv)
            assert isinstance(again[("t", 0)], NodeExistsError)
            read = await cs.get_partition_states([("t", 0), ("t", 1), ("t", 9)])
            assert sorted(read) == [("t", 0), ("t", 1)]
            assert read[("t", 1)].partition_epoch == 0

            # Conditional on the partition epoch: the stale write is refused alone.
            shrink = z.PartitionState(1, 1, [1], 1, partition_epoch=0)
            stale = z.PartitionState(2, 1, [2], 1, partition_epoch=7)
            written = await cs.set_partition_states({("t", 0): shrink, ("t", 1): stale}, zkv)
            assert written[("t", 0)] == z.PartitionState(1, 1, [1], 1, 0, 1)
            assert isinstance(written[("t", 1)], BadVersionError)
            missing = await cs.set_partition_states({("x", 0): shrink}, zkv)
            assert isinstance(missing[("x", 0)], NoNodeError)
            with pytest.raises(ControllerMovedError):
                await cs.set_partition_states({("t", 0): shrink}, zkv + 5)

    run(body())


def test_topic_deletion(sessions: Any) -> None:
    async def body() -> None:
        async with sessions(1) as [s]:
            cs = ClusterStore(s)
            await cs.ensure_persistent_paths()
            _, zkv = await cs.try_elect_controller(1) or (0, 0)
            await cs.create_topic("t", TID, {0: [1]}, {"a": "b"})
            await cs.create_partition_states({("t", 0): z.PartitionState(1, 0, [1], 1)}, zkv)
            await cs.mark_topic_for_deletion("t")
            with pytest.raises(TopicAlreadyMarkedForDeletionError):
                await cs.mark_topic_for_deletion("t")
            assert await cs.topics_marked_for_deletion() == ["t"]
            with pytest.raises(ControllerMovedError):
                await cs.delete_topic_znodes("t", zkv + 1)
            assert await cs.get_all_topics() == ["t"]
            await cs.delete_topic_znodes("t", zkv)
            assert await cs.get_all_topics() == []
            assert await cs.topics_marked_for_deletion() == []
            assert await s.exists("/config/topics/t") is None
            await cs.delete_topic_znodes("t", zkv)  # nothing left: no error

    run(body())


def test_configs_and_change_notifications(sessions: Any) -> None:
    async def body() -> None:
        async with sessions(1) as [s]:
            cs = ClusterStore(s)
            await cs.ensure_persistent_paths()
            assert await cs.get_entity_config("topics", "t") == {}
            first = await cs.set_topic_config("t", {"retention.ms": "1"})
            second = await cs.set_entity_config("brokers", "<default>", {"x": "y"})
            assert first == "/config/changes/config_change_0000000000"
            assert second == "/config/changes/config_change_0000000001"
            assert await cs.get_entity_config("topics", "t") == {"retention.ms": "1"}
            await cs.set_topic_config("t", {"retention.ms": "2"})
            assert await cs.get_all_entity_configs("topics") == {"t": {"retention.ms": "2"}}
            names = await cs.config_change_notifications()
            assert len(names) == 3
            assert await cs.read_config_change(names[1]) == ("brokers", "<default>")
            assert (await s.get(first))[0] == b'{"version":2,"entity_path":"topics/t"}'

    run(body())


def test_cluster_id_first_creator_wins(sessions: Any) -> None:
    async def body() -> None:
        async with sessions(2) as [s1, s2]:
            ids = await asyncio.gather(
                ClusterStore(s1).get_or_create_cluster_id("A" * 22),
                ClusterStore(s2).get_or_create_cluster_id("B" * 22),
            )
            assert ids[0] == ids[1] and ids[0] in ("A" * 22, "B" * 22)
            assert (await s1.get("/cluster/id"))[0] == z.encode_cluster_id(ids[0])

    run(body())


def test_producer_id_blocks_never_overlap(sessions: Any) -> None:
    async def body() -> None:
        async with sessions(2) as [s1, s2]:
            await ClusterStore(s1).ensure_persistent_paths()
            blocks = await asyncio.gather(
                *(ClusterStore(s).allocate_producer_id_block(i) for i, s in [(1, s1), (2, s2)] * 3)
            )
            starts = sorted(b.start for b in blocks)
            assert starts == [0, 1000, 2000, 3000, 4000, 5000]
            assert all(b.end == b.start + 999 for b in blocks)
            data, _ = await s1.get("/latest_producer_id_block")
            last = z.decode_producer_id_block(data)
            assert last is not None and last.end == 5999

    run(body())


def test_isr_change_and_admin_triggers(sessions: Any) -> None:
    async def body() -> None:
        async with sessions(1) as [s]:
            cs = ClusterStore(s)
            await cs.ensure_persistent_paths()
            _, zkv = await cs.try_elect_controller(1) or (0, 0)
            path = await cs.register_isr_change([("t", 0), ("t", 1)])
            assert path == "/isr_change_notification/isr_change_0000000000"
            names = await cs.isr_change_notifications()
            assert names == ["isr_change_0000000000"]
            assert await cs.read_isr_change(names[0]) == [("t", 0), ("t", 1)]
            await cs.delete_isr_change_notifications([*names, "isr_change_0000000042"], zkv)
            assert await cs.isr_change_notifications() == []

            await cs.register_log_dir_event(3)
            (event,) = await cs.log_dir_event_notifications()
            assert await cs.read_log_dir_event(event) == 3
            await cs.delete_log_dir_event_notifications([event], zkv)

            assert await cs.get_preferred_replica_election() is None
            await s.create(z.PREFERRED_REPLICA_ELECTION, z.encode_partitions([("t", 0)]))
            assert await cs.get_preferred_replica_election() == [("t", 0)]
            await cs.delete_preferred_replica_election(zkv)
            assert await cs.get_preferred_replica_election() is None

            await s.create(z.REASSIGN_PARTITIONS, z.encode_reassignment({("t", 0): [1, 2]}))
            assert await cs.get_legacy_reassignment() == {("t", 0): [1, 2]}
            await cs.set_legacy_reassignment({("u", 1): [3]}, zkv)
            assert await cs.get_legacy_reassignment() == {("u", 1): [3]}
            await cs.set_legacy_reassignment({}, zkv)
            assert await cs.get_legacy_reassignment() is None

    run(body())


def test_broker_sequence_id(sessions: Any) -> None:
    async def body() -> None:
        async with sessions(1) as [s]:
            cs = ClusterStore(s)
            await cs.ensure_persistent_paths()
            assert [await cs.generate_broker_sequence_id() for _ in range(3)] == [1, 2, 3]

    run(body())


async def expire(store: Any) -> None:
    """End `store`'s session the way a ZooKeeper ensemble would (store goes on, new id)."""
    if isinstance(store, InProcessStore):
        await store.expire()
        return
    from kazoo.client import KazooClient

    def kill(hosts: str, session: tuple[int, bytes]) -> None:
        # A second client attached to the session closes it server-side.
        other = KazooClient(hosts=hosts, client_id=session, timeout=6)
        other.start(10)
        other.stop()
        other.close()

    await asyncio.to_thread(kill, store.hosts, store.client.client_id)


def test_controller_failover_on_session_expiry(sessions: Any) -> None:
    async def body() -> None:
        async with sessions(2) as [s1, s2]:
            old, new = ClusterStore(s1), ClusterStore(s2)
            await old.ensure_persistent_paths()
            await old.create_topic("t", TID, {0: [1, 2]})
            won = await old.try_elect_controller(1)
            assert won is not None
            old_zkv = won[1]
            events: list[Any] = []
            s1.on_session_event(events.append)

            # Broker 2 watches /controller and runs for election when it disappears.
            elected: asyncio.Future[tuple[int, int]] = asyncio.get_running_loop().create_future()

            async def run_for_election() -> None:
                result = await new.try_elect_controller(2)
                if result is not None and not elected.done():
                    elected.set_result(result)

            tasks: list[asyncio.Task[None]] = []

            def on_controller(data: bytes | None, stat: Any) -> None:
                if data is None:
                    tasks.append(asyncio.ensure_future(run_for_election()))

            s2.watch_data(z.CONTROLLER, on_controller)
            await expire(s1)
            assert await asyncio.wait_for(elected, 20) == (2, old_zkv + 1)
            assert await new.get_controller() == 2
            # The deposed controller's writes are fenced off, even from its new session.
            with pytest.raises(ControllerMovedError):
                await old.set_topic_assignment("t", z.TopicAssignment({0: [1]}, TID), old_zkv)
            assert (await new.get_topic_assignments())["t"].partitions == {0: [1, 2]}
            assert await old.try_elect_controller(1) is None

    run(body())


def test_a_topic_created_by_two_brokers_at_once_exists_for_the_loser(sessions: Any) -> None:
    """Two brokers creating the same topic (two first consumers asking for
    __consumer_offsets): the one whose config check came before the other's write
    gets TopicExistsError, not a failed multi (it used to fail its FindCoordinator)."""

    async def body() -> None:
        async with sessions(2) as [s1, s2]:
            a, b = ClusterStore(s1), ClusterStore(s2)
            await a.ensure_persistent_paths()
            real = s2.exists
            checks: list[str] = []

            async def stale_exists(path: str) -> Any:
                checks.append(path)
                if len(checks) == 1:  # b looked before a wrote
                    await a.create_topic("t", TID, {0: [1]}, {"x": "1"})
                    return None
                return await real(path)

            s2.exists = stale_exists  # type: ignore[method-assign]
            with pytest.raises(TopicExistsError):
                await b.create_topic("t", TID, {0: [2]}, {"x": "2"})
            assert len(checks) == 2  # it looked again, then lost on the topic znode
            assert (await a.get_topic_assignments(["t"]))["t"].partitions == {0: [1]}

    run(body())
