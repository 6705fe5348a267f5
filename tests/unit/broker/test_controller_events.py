"""The controller's event logic over an in-memory ZooKeeper view and a recording channel.

These pin Kafka's rules (facts sheet §2): elections on failover, broker failure and
return, unclean elections only where the topic allows them, the ISR never emptied,
controlled shutdown, AlterPartition's checks, topic deletion waiting for every
replica, and a deposed controller's writes refused.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable
from typing import Any

import pytest

from kt.broker.controller.channel import ControllerChannel
from kt.broker.controller.controller import (
    BadVersionError,
    ControllerMovedError,
    IsrChange,
    KafkaController,
)
from kt.broker.controller.requests import BrokerEndpointInfo, TopicReplicas
from kt.cluster.election import LeaderAndIsr
from kt.protocol import ErrorCode, apis
from kt.protocol.codec import Api
from kt.storage.checkpoint import TopicPartition

TP = TopicPartition


class FakeZk:
    """The znodes the controller reads and writes, with ZooKeeper's fencing rules."""

    def __init__(self) -> None:
        self.controller: int | None = None
        self.epoch = 0
        self.epoch_version = 0
        self.brokers: dict[int, BrokerEndpointInfo] = {}
        self.topics: dict[str, TopicReplicas] = {}
        self.states: dict[TopicPartition, LeaderAndIsr] = {}
        self.configs: dict[str, dict[str, str]] = {}
        self.marked: set[str] = set()
        self.child_watches: dict[str, list[Callable[[list[str]], None]]] = {}
        self.data_watches: dict[str, list[Callable[[bytes | None], None]]] = {}
        self._czxid = 100
        self.writes: list[tuple[str, TopicReplicas]] = []  # /brokers/topics/T writes
        self.log_dir_events_: dict[str, int] = {}  # /log_dir_event_notification

    # --- test controls ---
    def add_broker(self, broker_id: int, *, fire: bool = True) -> None:
        self._czxid += 1
        self.brokers[broker_id] = BrokerEndpointInfo(
            broker_id, self._czxid, (("PLAINTEXT", "127.0.0.1", 9000 + broker_id),)
        )
        if fire:
            self.fire_children("/brokers/ids")

    def remove_broker(self, broker_id: int) -> None:
        del self.brokers[broker_id]
        self.fire_children("/brokers/ids")

    def add_topic(self, name: str, assignment: dict[int, list[int]]) -> None:
        self.topics[name] = TopicReplicas(bytes(range(16)), assignment)
        self.fire_children("/brokers/topics")

    def children(self, path: str) -> list[str]:
        if path == "/brokers/ids":
            return [str(b) for b in sorted(self.brokers)]
        if path == "/brokers/topics":
            return sorted(self.topics)
        if path == "/admin/delete_topics":
            return sorted(self.marked)
        return []

    def fire_children(self, path: str) -> None:
        for cb in self.child_watches.get(path, []):
            asyncio.get_running_loop().call_soon(cb, self.children(path))

    def steal_controller(self, other: int) -> None:
        """Another broker won: /controller changed and the epoch moved on."""
        self.controller = other
        self.epoch += 1
        self.epoch_version += 1
        for cb in self.data_watches.get("/controller", []):
            asyncio.get_running_loop().call_soon(cb, b"x")

    def _fence(self, version: int) -> None:
        if version != self.epoch_version:
            raise ControllerMovedError()

    # --- ControllerZk ---
    async def try_elect_controller(self, broker_id: int) -> tuple[int, int] | None:
        if self.controller is not None:
            return None
        self.controller = broker_id
        self.epoch += 1
        self.epoch_version += 1
        return self.epoch, self.epoch_version

    async def get_controller(self) -> int | None:
        return self.controller

    async def resign_controller(self, broker_id: int) -> None:
        if self.controller == broker_id:
            self.controller = None

    async def get_brokers(self) -> dict[int, BrokerEndpointInfo]:
        return dict(self.brokers)

    async def get_topics(self) -> list[str]:
        return sorted(self.topics)

    async def get_topic(self, topic: str) -> TopicReplicas | None:
        t = self.topics.get(topic)
        if t is None:
            return None
        return TopicReplicas(
            t.topic_id,
            {p: list(r) for p, r in t.partitions.items()},
            {p: list(r) for p, r in t.adding.items() if r},
            {p: list(r) for p, r in t.removing.items() if r},
        )

    async def set_topic(self, topic: str, replicas: TopicReplicas, epoch_zk_version: int) -> None:
        self._fence(epoch_zk_version)
        self.writes.append((topic, replicas))
        self.topics[topic] = TopicReplicas(
            replicas.topic_id,
            {p: list(r) for p, r in replicas.partitions.items()},
            {p: list(r) for p, r in replicas.adding.items() if r},
            {p: list(r) for p, r in replicas.removing.items() if r},
        )
        for cb in self.data_watches.get(f"/brokers/topics/{topic}", []):
            asyncio.get_running_loop().call_soon(cb, b"x")

    async def get_partition_states(
        self, tps: Iterable[TopicPartition]
    ) -> dict[TopicPartition, LeaderAndIsr]:
        return {tp: self.states[tp] for tp in tps if tp in self.states}

    async def create_partition_states(
        self, states: dict[TopicPartition, LeaderAndIsr], epoch_zk_version: int
    ) -> dict[TopicPartition, LeaderAndIsr]:
        self._fence(epoch_zk_version)
        out = {}
        for tp, s in states.items():
            out[tp] = self.states[tp] = _with_version(s, 0)
        return out

    async def update_partition_states(
        self, states: dict[TopicPartition, LeaderAndIsr], epoch_zk_version: int
    ) -> dict[TopicPartition, LeaderAndIsr | BadVersionError]:
        self._fence(epoch_zk_version)
        out: dict[TopicPartition, LeaderAndIsr | BadVersionError] = {}
        for tp, s in states.items():
            current = self.states[tp]
            if current.zk_version != s.zk_version:
                out[tp] = BadVersionError()
            else:
                out[tp] = self.states[tp] = _with_version(s, s.zk_version + 1)
        return out

    async def topic_config(self, topic: str) -> dict[str, str]:
        return dict(self.configs.get(topic, {}))

    async def topics_marked_for_deletion(self) -> list[str]:
        return sorted(self.marked)

    async def delete_topic(self, topic: str, epoch_zk_version: int) -> None:
        self._fence(epoch_zk_version)
        self.topics.pop(topic, None)
        self.marked.discard(topic)
        for tp in [tp for tp in self.states if tp.topic == topic]:
            del self.states[tp]

    async def unmark_topic_for_deletion(self, topic: str) -> None:
        self.marked.discard(topic)

    async def log_dir_events(self) -> dict[str, int]:
        return dict(self.log_dir_events_)

    async def delete_log_dir_events(self, names: list[str], epoch_zk_version: int) -> None:
        self._fence(epoch_zk_version)
        for n in names:
            self.log_dir_events_.pop(n, None)

    def announce_log_dir_failure(self, broker_id: int) -> None:
        self.log_dir_events_[f"log_dir_event_{len(self.log_dir_events_):010d}"] = broker_id
        self.fire_children("/log_dir_event_notification")

    def watch_children(self, path: str, callback: Callable[[list[str]], None]) -> Any:
        watches = self.child_watches.setdefault(path, [])
        watches.append(callback)
        asyncio.get_running_loop().call_soon(callback, self.children(path))
        return _Cancel(watches, callback)

    def watch_data(self, path: str, callback: Callable[[bytes | None], None]) -> Any:
        watches = self.data_watches.setdefault(path, [])
        watches.append(callback)
        return _Cancel(watches, callback)


class _Cancel:
    def __init__(self, watches: list[Any], callback: Any) -> None:
        self.watches, self.callback = watches, callback

    def cancel(self) -> None:
        if self.callback in self.watches:
            self.watches.remove(self.callback)


def _with_version(s: LeaderAndIsr, version: int) -> LeaderAndIsr:
    return LeaderAndIsr(s.leader, s.leader_epoch, s.isr, s.controller_epoch, version,
                               s.leader_recovery_state)  # fmt: skip


class Recorder:
    """Every request the controller sent, per broker; answers with no errors."""

    def __init__(self) -> None:
        self.sent: list[tuple[int, str, dict[str, Any]]] = []
        self.down: set[int] = set()
        # broker -> partitions on a failed log dir there (LeaderAndIsr answers
        # KAFKA_STORAGE_ERROR for them)
        self.failed: dict[int, set[TopicPartition]] = {}

    def link(self, broker_id: int) -> Any:
        recorder = self

        class Link:
            async def send(self, api: Api, body: Any) -> Any:
                if broker_id in recorder.down:
                    raise ConnectionError("down")
                _check_encodes(api, body)
                recorder.sent.append((broker_id, api.name, body))
                if api is apis.STOP_REPLICA:
                    return apis.STOP_REPLICA.response(error_code=0, partition_errors=[])
                if api is apis.LEADER_AND_ISR:
                    return recorder.leader_and_isr_answer(broker_id, body)
                return api.response(error_code=0)

            async def close(self) -> None:
                pass

        return Link()

    def leader_and_isr_answer(self, broker_id: int, body: dict[str, Any]) -> Any:
        # as a v5+ broker answers: by topic id
        failed = self.failed.get(broker_id, set())
        topics = []
        for t in body["topic_states"]:
            errs = [
                {"partition_index": p["partition_index"],
                 "error_code": ErrorCode.KAFKA_STORAGE_ERROR
                 if TopicPartition(t["topic_name"], p["partition_index"]) in failed else 0}
                for p in t["partition_states"]
            ]  # fmt: skip
            topics.append({"topic_id": t["topic_id"], "partition_errors": errs})
        api, version = apis.LEADER_AND_ISR, apis.LEADER_AND_ISR.max_version
        # through the wire format, as a real link hands it over
        raw = api.response.encode(api.response(error_code=0, topics=topics), version)
        return api.response.decode(raw, version)

    def of(self, api: str, broker_id: int | None = None) -> list[dict[str, Any]]:
        return [b for bid, name, b in self.sent
                if name == api and (broker_id is None or bid == broker_id)]  # fmt: skip

    def leaders_told(self, broker_id: int) -> dict[tuple[str, int], int]:
        out = {}
        for body in self.of("LeaderAndIsr", broker_id):
            for t in body["topic_states"]:
                for p in t["partition_states"]:
                    out[(t["topic_name"], p["partition_index"])] = p["leader"]
        return out


def _check_encodes(api: Api, body: dict[str, Any]) -> None:
    """The body survives encoding at the newest version, and every field name the
    controller used exists in the schema (a misspelt one would be silently dropped)."""
    version = api.max_version
    decoded = api.request.decode(api.request.encode(api.request(**body), version), version)

    def walk(given: Any, got: Any, path: str) -> None:
        if isinstance(given, dict):
            for key, value in given.items():
                assert hasattr(got, key), f"{api.name}: no field {path}{key}"
                walk(value, getattr(got, key), f"{path}{key}.")
        elif isinstance(given, list) and given and isinstance(given[0], dict):
            assert len(given) == len(got)
            for a, b in zip(given, got):
                walk(a, b, path)

    walk(body, decoded, "")


async def settle() -> None:
    for _ in range(50):
        await asyncio.sleep(0)


def run(coro_fn: Callable[[], Any]) -> None:
    asyncio.run(asyncio.wait_for(coro_fn(), 10))


async def started(zk: FakeZk, broker_id: int = 1, **kw: Any) -> tuple[KafkaController, Recorder]:
    rec = Recorder()
    c = KafkaController(broker_id, zk, lambda: ControllerChannel(rec.link, backoff_s=0.001), **kw)
    await c.startup()
    await settle()
    return c, rec


def three_brokers() -> FakeZk:
    zk = FakeZk()
    for b in (1, 2, 3):
        zk.add_broker(b, fire=False)
    return zk


def test_failover_elects_new_partitions_first_live_replica_leads():
    async def go() -> None:
        zk = three_brokers()
        zk.topics["t"] = TopicReplicas(bytes(16), {0: [2, 3, 1], 1: [3, 1, 2]})
        c, rec = await started(zk)
        assert c.active and zk.controller == 1 and c.view.epoch == 1
        assert zk.states[TP("t", 0)].leader == 2
        assert zk.states[TP("t", 0)].isr == (2, 3, 1)
        assert zk.states[TP("t", 1)].leader == 3
        # every replica told its role; every broker got the full metadata
        for b in (1, 2, 3):
            assert rec.leaders_told(b) == {("t", 0): 2, ("t", 1): 3}
            assert rec.of("UpdateMetadata", b)
        await c.shutdown()

    run(go)


def test_only_one_controller():
    async def go() -> None:
        zk = three_brokers()
        a, _ = await started(zk, 1)
        b, _ = await started(zk, 2)
        assert a.active and not b.active
        await a.shutdown()
        await b.shutdown()

    run(go)


def test_new_topic_gets_leaders_and_isr():
    async def go() -> None:
        zk = three_brokers()
        c, rec = await started(zk)
        zk.add_topic("new", {0: [1, 2, 3], 1: [2, 3, 1], 2: [3, 1, 2]})
        await settle()
        assert [zk.states[TP("new", p)].leader for p in range(3)] == [1, 2, 3]
        body = rec.of("LeaderAndIsr", 2)[-1]
        assert all(p["is_new"] for t in body["topic_states"] for p in t["partition_states"])
        await c.shutdown()

    run(go)


def test_leader_failure_elects_next_in_sync_replica_and_shrinks_isr():
    async def go() -> None:
        zk = three_brokers()
        zk.topics["t"] = TopicReplicas(bytes(16), {0: [2, 3, 1]})
        c, rec = await started(zk)
        before = zk.states[TP("t", 0)]
        zk.remove_broker(2)
        await settle()
        after = zk.states[TP("t", 0)]
        assert after.leader == 3
        assert after.isr == (3, 1)
        assert after.leader_epoch == before.leader_epoch + 1
        assert rec.leaders_told(3)[("t", 0)] == 3
        await c.shutdown()

    run(go)


def test_follower_failure_shrinks_isr_and_bumps_epoch():
    async def go() -> None:
        zk = three_brokers()
        zk.topics["t"] = TopicReplicas(bytes(16), {0: [1, 2, 3]})
        c, _ = await started(zk)
        zk.remove_broker(3)
        await settle()
        s = zk.states[TP("t", 0)]
        assert (s.leader, s.isr, s.leader_epoch) == (1, (1, 2), 1)
        await c.shutdown()

    run(go)


def test_isr_never_emptied_and_partition_goes_offline_without_unclean():
    async def go() -> None:
        zk = three_brokers()
        zk.topics["t"] = TopicReplicas(bytes(16), {0: [2, 3]})
        c, _ = await started(zk)
        # 3 falls out of the ISR first, then the leader 2 dies: nobody in sync is left.
        zk.states[TP("t", 0)] = LeaderAndIsr(2, 5, (2,), 1, zk.states[TP("t", 0)].zk_version)
        c.view.leadership[TP("t", 0)] = zk.states[TP("t", 0)]
        zk.remove_broker(2)
        await settle()
        s = zk.states[TP("t", 0)]
        assert s.leader == -1
        assert s.isr == (2,)  # the last member stays
        await c.shutdown()

    run(go)


def test_unclean_election_only_when_the_topic_allows_it():
    async def go() -> None:
        zk = three_brokers()
        zk.topics["t"] = TopicReplicas(bytes(16), {0: [2, 3]})
        zk.configs["t"] = {"unclean.leader.election.enable": "true"}
        c, _ = await started(zk)
        zk.states[TP("t", 0)] = LeaderAndIsr(2, 5, (2,), 1, zk.states[TP("t", 0)].zk_version)
        c.view.leadership[TP("t", 0)] = zk.states[TP("t", 0)]
        zk.remove_broker(2)
        await settle()
        s = zk.states[TP("t", 0)]
        assert (s.leader, s.isr, s.leader_epoch) == (3, (3,), 6)
        await c.shutdown()

    run(go)


def test_returning_broker_brings_offline_partition_back_and_learns_its_role():
    async def go() -> None:
        zk = three_brokers()
        zk.topics["t"] = TopicReplicas(bytes(16), {0: [2]})
        c, rec = await started(zk)
        zk.remove_broker(2)
        await settle()
        assert zk.states[TP("t", 0)].leader == -1
        zk.add_broker(2)
        await settle()
        assert zk.states[TP("t", 0)].leader == 2
        assert rec.leaders_told(2)[("t", 0)] == 2
        await c.shutdown()

    run(go)


def _offline_told(rec: Recorder, broker_id: int) -> dict[tuple[str, int], list[int]]:
    """The offline replicas of each partition in the last UpdateMetadata that named it."""
    out = {}
    for body in rec.of("UpdateMetadata", broker_id):
        for t in body["topic_states"]:
            for p in t["partition_states"]:
                out[(t["topic_name"], p["partition_index"])] = p["offline_replicas"]
    return out


def test_returning_broker_is_no_longer_an_offline_replica_anywhere():
    # A returning broker's partitions whose leadership does not change (and whose ISR
    # has not grown back yet) must lose it from their offline replicas on every
    # broker at once, as Kafka's OnlineReplica transition sends UpdateMetadata for
    # them to all live brokers.
    async def go() -> None:
        zk = three_brokers()
        zk.topics["t"] = TopicReplicas(bytes(16), {0: [1, 2, 3]})
        c, rec = await started(zk)
        zk.remove_broker(3)
        await settle()
        assert _offline_told(rec, 2)[("t", 0)] == [3]
        zk.add_broker(3)
        await settle()
        for b in (1, 2, 3):
            assert _offline_told(rec, b)[("t", 0)] == [], b
        await c.shutdown()

    run(go)


def test_bounced_broker_is_a_failure_then_a_startup():
    async def go() -> None:
        zk = three_brokers()
        zk.topics["t"] = TopicReplicas(bytes(16), {0: [2, 3, 1]})
        c, _ = await started(zk)
        zk.add_broker(2)  # same id, new session (new czxid), before the old one vanished
        await settle()
        s = zk.states[TP("t", 0)]
        assert s.leader == 3  # leadership left the old incarnation
        assert c.view.live[2].epoch == zk.brokers[2].epoch
        await c.shutdown()

    run(go)


def test_controlled_shutdown_moves_leadership_and_answers_remaining():
    async def go() -> None:
        zk = three_brokers()
        zk.topics["t"] = TopicReplicas(bytes(16), {0: [1, 2, 3], 1: [2, 1, 3]})
        zk.topics["single"] = TopicReplicas(bytes(16), {0: [1]})
        c, rec = await started(zk)
        error, remaining = await c.controlled_shutdown(1, zk.brokers[1].epoch)
        assert error == ErrorCode.NONE
        assert remaining == []  # RF=1 partitions are not counted
        assert zk.states[TP("t", 0)].leader == 2
        assert 1 not in zk.states[TP("t", 0)].isr
        assert 1 not in zk.states[TP("t", 1)].isr
        assert zk.states[TP("single", 0)].leader == 1
        stops = rec.of("StopReplica", 1)
        assert stops and not stops[-1]["delete_partitions"]
        await c.shutdown()

    run(go)


def test_controlled_shutdown_with_stale_broker_epoch_is_refused():
    async def go() -> None:
        zk = three_brokers()
        c, _ = await started(zk)
        error, _ = await c.controlled_shutdown(1, zk.brokers[1].epoch - 1)
        assert error == ErrorCode.STALE_BROKER_EPOCH
        await c.shutdown()

    run(go)


def test_alter_partition_checks_and_writes():
    async def go() -> None:
        zk = three_brokers()
        zk.topics["t"] = TopicReplicas(bytes(16), {0: [1, 2, 3]})
        c, _ = await started(zk)
        s = zk.states[TP("t", 0)]
        epoch = zk.brokers[1].epoch

        async def alter(**kw: Any) -> Any:
            change = IsrChange(
                TP("t", 0),
                kw.get("leader_epoch", s.leader_epoch),
                kw.get("isr", (1, 2)),
                kw.get("partition_epoch", s.zk_version),
            )
            top, answers = await c.alter_partition(kw.get("broker", 1), kw.get("epoch", epoch),
                                                   [change])  # fmt: skip
            return top, answers.get(TP("t", 0))

        assert (await alter(epoch=epoch - 1))[0] == ErrorCode.STALE_BROKER_EPOCH
        assert (await alter(leader_epoch=s.leader_epoch - 1))[1].error == (
            ErrorCode.FENCED_LEADER_EPOCH
        )
        assert (await alter(partition_epoch=s.zk_version - 1))[1].error == (
            ErrorCode.INVALID_UPDATE_VERSION
        )
        assert (await alter(broker=2, epoch=zk.brokers[2].epoch))[1].error == (
            ErrorCode.INVALID_REQUEST
        )
        top, ok = await alter()
        assert top == ErrorCode.NONE and ok.error == ErrorCode.NONE
        assert ok.state.isr == (1, 2) and ok.state.zk_version == s.zk_version + 1
        assert zk.states[TP("t", 0)].isr == (1, 2)
        assert zk.states[TP("t", 0)].leader_epoch == s.leader_epoch  # ISR changes keep it
        # the old partition epoch is now stale
        assert (await alter(isr=(1, 2, 3)))[1].error == ErrorCode.INVALID_UPDATE_VERSION
        # a dead replica cannot join
        zk.remove_broker(3)
        await settle()
        s2 = zk.states[TP("t", 0)]
        _, bad = await alter(isr=(1, 2, 3), leader_epoch=s2.leader_epoch,
                             partition_epoch=s2.zk_version)  # fmt: skip
        assert bad.error == ErrorCode.INELIGIBLE_REPLICA
        await c.shutdown()

    run(go)


def test_topic_deletion_waits_for_every_replica():
    async def go() -> None:
        zk = three_brokers()
        zk.topics["t"] = TopicReplicas(bytes(16), {0: [1, 2], 1: [2, 3]})
        c, rec = await started(zk)
        rec.down.add(3)  # broker 3 does not answer yet
        zk.marked.add("t")
        zk.fire_children("/admin/delete_topics")
        await settle()
        assert "t" in zk.topics  # 3 has not acknowledged
        for b in (1, 2):
            body = rec.of("StopReplica", b)[-1]
            assert body["delete_partitions"]
        rec.down.clear()
        for _ in range(20):
            await asyncio.sleep(0.01)
        assert "t" not in zk.topics and "t" not in zk.marked
        assert TP("t", 0) not in zk.states
        await c.shutdown()

    run(go)


def test_deposed_controller_resigns_when_its_write_is_fenced():
    async def go() -> None:
        zk = three_brokers()
        zk.topics["t"] = TopicReplicas(bytes(16), {0: [1, 2, 3]})
        c, _ = await started(zk)
        zk.controller = 2  # another broker won behind our back (we were paused)
        zk.epoch_version += 1
        zk.remove_broker(3)
        await settle()
        assert not c.active  # the fenced write made it resign
        assert zk.states[TP("t", 0)].isr == (1, 2, 3)  # and nothing was written
        await c.shutdown()

    run(go)


def test_alter_partition_fenced_write_answers_not_controller_and_resigns():
    # A leader's AlterPartition reaches a controller deposed behind its back (it was
    # paused): the fenced write is answered NOT_CONTROLLER (the leader retries with
    # the new controller) and the deposed controller resigns; neither an unhandled
    # error for the request nor a controller that keeps believing it is active.
    async def go() -> None:
        zk = three_brokers()
        zk.topics["t"] = TopicReplicas(bytes(16), {0: [1, 2, 3]})
        c, _ = await started(zk)
        s = zk.states[TP("t", 0)]
        zk.controller = 2
        zk.epoch_version += 1  # no watch fired yet
        change = IsrChange(TP("t", 0), s.leader_epoch, (1, 2), s.zk_version)
        top, answers = await c.alter_partition(1, zk.brokers[1].epoch, [change])
        assert (top, answers) == (ErrorCode.NOT_CONTROLLER, {})
        await settle()
        assert not c.active
        assert zk.states[TP("t", 0)].isr == (1, 2, 3)
        await c.shutdown()

    run(go)


def test_failed_log_dir_moves_leadership_and_shrinks_isrs():
    # Kafka's log dir failure in ZooKeeper mode: broker 2 announces a failed dir,
    # the controller sends it LeaderAndIsr for everything it hosts, and the
    # partitions answered KAFKA_STORAGE_ERROR go offline there: the one 2 led gets
    # another leader from the rest of its ISR, the one it followed drops it from the
    # ISR, one on its healthy dir is untouched, and UpdateMetadata names 2 offline.
    async def go() -> None:
        zk = three_brokers()
        zk.topics["t"] = TopicReplicas(bytes(range(16)), {0: [2, 1, 3], 1: [1, 2, 3], 2: [2, 3, 1]})
        c, rec = await started(zk)
        assert zk.states[TP("t", 0)].leader == 2
        rec.failed[2] = {TP("t", 0), TP("t", 1)}
        zk.announce_log_dir_failure(2)
        for _ in range(10):
            await settle()
        s0, s1, s2 = (zk.states[TP("t", p)] for p in range(3))
        assert s0.leader == 1 and 2 not in s0.isr
        assert s1.leader == 1 and s1.isr == (1, 3)
        assert s2.leader == 2 and s2.isr == (2, 3, 1)
        assert zk.log_dir_events_ == {}
        offline = {}
        for body in rec.of("UpdateMetadata", 3):
            for t in body["topic_states"]:
                for p in t["partition_states"]:
                    offline[p["partition_index"]] = p["offline_replicas"]
        assert offline[0] == [2] and offline[1] == [2] and offline[2] == []
        # an offline replica may not rejoin the ISR (it cannot catch up)
        s1 = zk.states[TP("t", 1)]
        top, ans = await c.alter_partition(
            1,
            zk.brokers[1].epoch,
            [IsrChange(TP("t", 1), s1.leader_epoch, (1, 2, 3), s1.zk_version)],
        )
        assert top == ErrorCode.NONE and ans[TP("t", 1)].error == ErrorCode.INELIGIBLE_REPLICA
        # once 2 registered again (restarted: its dirs are back), it may rejoin
        rec.failed.clear()
        zk.remove_broker(2)
        await settle()
        zk.add_broker(2)
        for _ in range(10):
            await settle()
        s1 = zk.states[TP("t", 1)]
        change = IsrChange(TP("t", 1), s1.leader_epoch, (*s1.isr, 2), s1.zk_version)
        top, ans = await c.alter_partition(1, zk.brokers[1].epoch, [change])
        assert ans[TP("t", 1)].error == ErrorCode.NONE
        await c.shutdown()

    run(go)


def test_controller_change_watch_makes_it_resign():
    async def go() -> None:
        zk = three_brokers()
        c, _ = await started(zk)
        zk.steal_controller(2)
        await settle()
        assert not c.active and c.channel is None
        await c.shutdown()

    run(go)


@pytest.mark.parametrize("dead", [[2], [2, 3]])
def test_leadership_never_on_a_dead_broker(dead: list[int]):
    async def go() -> None:
        zk = three_brokers()
        zk.topics["t"] = TopicReplicas(bytes(16), {p: [1 + (p + i) % 3 for i in range(3)]
                                                   for p in range(6)})  # fmt: skip
        c, _ = await started(zk)
        for b in dead:
            zk.remove_broker(b)
            await settle()
        for tp, s in zk.states.items():
            assert s.leader not in dead, tp
            assert s.isr, tp
        await c.shutdown()

    run(go)


# --- partition reassignment (facts sheet §2, Reassignment) ---------------------------


async def _alter(c: KafkaController, tp: TopicPartition, replicas: list[int] | None) -> Any:
    result = await c.alter_partition_reassignments({tp: replicas})
    assert result is not None
    return result[tp]


async def _join_isr(
    c: KafkaController, zk: FakeZk, tp: TopicPartition, isr: tuple[int, ...]
) -> Any:
    """The leader's AlterPartition bringing followers into the ISR."""
    s = zk.states[tp]
    _, answers = await c.alter_partition(
        s.leader, zk.brokers[s.leader].epoch, [IsrChange(tp, s.leader_epoch, isr, s.zk_version)]
    )
    await settle()
    return answers[tp]


async def _move_off_dead_broker_2(c: KafkaController, zk: FakeZk, tp: TopicPartition) -> None:
    """Broker 2 dies, then `tp` is reassigned from [1, 2] to [1, 3] and 3 joins the
    ISR: the reassignment completes while 2 is down (no StopReplica reaches it)."""
    zk.remove_broker(2)
    await settle()
    await _alter(c, tp, [1, 3])
    await settle()
    await _join_isr(c, zk, tp, (1, 3))


def _four_brokers() -> FakeZk:
    zk = three_brokers()
    zk.add_broker(4, fire=False)
    return zk


def test_reassignment_phases_u_a_b():
    async def go() -> None:
        zk = _four_brokers()
        zk.topics["t"] = TopicReplicas(bytes(16), {0: [1, 2], 1: [2, 3]})
        c, rec = await started(zk)
        tp = TP("t", 0)
        epoch0 = zk.states[tp].leader_epoch
        rec.sent.clear()
        assert (await _alter(c, tp, [3, 4])).error == ErrorCode.NONE
        await settle()
        # U: RS = TRS ++ ORS, AR, RR written to ZooKeeper (before memory)
        t = zk.topics["t"]
        assert t.partitions[0] == [3, 4, 1, 2]
        assert t.adding[0] == [3, 4] and t.removing[0] == [1, 2]
        assert zk.writes[0][1].partitions[0] == [3, 4, 1, 2]
        # A: leader epoch bumped, LeaderAndIsr to every replica of RS (new ones too)
        assert zk.states[tp].leader_epoch == epoch0 + 1
        for b in (1, 2, 3, 4):
            assert ("t", 0) in rec.leaders_told(b)
        listed = await c.list_partition_reassignments(None)
        assert listed is not None and listed[tp].replicas == (3, 4, 1, 2)
        assert listed[tp].adding == (3, 4) and listed[tp].removing == (1, 2)
        # not complete while only 3 joined
        await _join_isr(c, zk, tp, (1, 2, 3))
        assert zk.topics["t"].adding[0] == [3, 4]
        rec.sent.clear()
        # B: the whole target in sync -> leader moves into TRS, RR stopped and deleted,
        # RS = TRS written last with no adding/removing
        await _join_isr(c, zk, tp, (1, 2, 3, 4))
        s = zk.states[tp]
        assert s.leader == 3 and s.isr == (3, 4)
        t = zk.topics["t"]
        assert t.partitions[0] == [3, 4] and not t.adding and not t.removing
        assert t.partitions[1] == [2, 3]  # other partitions untouched
        for b in (1, 2):
            stops = rec.of("StopReplica", b)
            assert [x["delete_partitions"] for x in stops] == [False, True]
        assert not rec.of("StopReplica", 3) and not rec.of("StopReplica", 4)
        assert await c.list_partition_reassignments(None) == {}
        assert c.view.topics["t"].partitions[0] == [3, 4]
        await c.shutdown()

    run(go)


def test_reassignment_target_already_in_sync_completes_at_once():
    async def go() -> None:
        zk = three_brokers()
        zk.topics["t"] = TopicReplicas(bytes(16), {0: [1, 2, 3]})
        c, rec = await started(zk)
        tp = TP("t", 0)
        assert (await _alter(c, tp, [2, 3])).error == ErrorCode.NONE
        await settle()
        assert zk.topics["t"].partitions[0] == [2, 3] and not zk.topics["t"].removing
        assert zk.states[tp].leader == 2 and zk.states[tp].isr == (2, 3)
        assert [x["delete_partitions"] for x in rec.of("StopReplica", 1)] == [False, True]
        await c.shutdown()

    run(go)


def test_reassignment_errors():
    async def go() -> None:
        zk = _four_brokers()
        zk.topics["t"] = TopicReplicas(bytes(16), {0: [1, 2]})
        zk.brokers.pop(4)
        c, _ = await started(zk)
        tp = TP("t", 0)
        for bad, text in (
            ([], "Empty replica list specified in partition reassignment."),
            ([1, 1], "Duplicate replica ids in partition reassignment replica list: "
                     "ArrayBuffer(1, 1)"),
            ([1, -1], "Invalid broker id in replica list: ArrayBuffer(1, -1)"),
            ([1, 4], "Replica assignment has brokers that are not alive. Replica list: "
                     "ArrayBuffer(4), live broker list: Set(1, 2, 3)"),
        ):  # fmt: skip
            r = await _alter(c, tp, bad)
            assert (r.error, r.message) == (ErrorCode.INVALID_REPLICA_ASSIGNMENT, text)
        assert (await _alter(c, TP("t", 7), [1])).error == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        assert (await _alter(c, TP("x", 0), [1])).error == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        assert (await _alter(c, tp, None)).error == ErrorCode.NO_REASSIGNMENT_IN_PROGRESS
        assert zk.writes == []  # nothing started
        await c.shutdown()

    run(go)


def test_cancel_restores_the_original_replicas():
    async def go() -> None:
        zk = _four_brokers()
        zk.topics["t"] = TopicReplicas(bytes(16), {0: [1, 2]})
        c, rec = await started(zk)
        tp = TP("t", 0)
        await _alter(c, tp, [3, 4])
        await settle()
        await _join_isr(c, zk, tp, (1, 2, 3))  # 3 caught up, 4 not yet
        rec.sent.clear()
        assert (await _alter(c, tp, None)).error == ErrorCode.NONE
        await settle()
        t = zk.topics["t"]
        assert t.partitions[0] == [1, 2] and not t.adding and not t.removing
        assert set(zk.states[tp].isr) == {1, 2} and zk.states[tp].leader == 1
        for b in (3, 4):  # the adding replicas are stopped and deleted
            assert [x["delete_partitions"] for x in rec.of("StopReplica", b)] == [False, True]
        assert await c.list_partition_reassignments(None) == {}
        assert (await _alter(c, tp, None)).error == ErrorCode.NO_REASSIGNMENT_IN_PROGRESS
        await c.shutdown()

    run(go)


def test_superseding_reassignment_stops_adding_replicas_no_longer_needed():
    async def go() -> None:
        zk = _four_brokers()
        zk.topics["t"] = TopicReplicas(bytes(16), {0: [1, 2]})
        c, rec = await started(zk)
        tp = TP("t", 0)
        await _alter(c, tp, [1, 3])
        await settle()
        rec.sent.clear()
        await _alter(c, tp, [1, 4])
        await settle()
        t = zk.topics["t"]
        assert t.partitions[0] == [1, 4, 2] and t.adding[0] == [4] and t.removing[0] == [2]
        assert [x["delete_partitions"] for x in rec.of("StopReplica", 3)] == [False, True]
        await c.shutdown()

    run(go)


def test_new_controller_resumes_a_reassignment_from_zookeeper():
    async def go() -> None:
        zk = _four_brokers()
        zk.topics["t"] = TopicReplicas(bytes(16), {0: [1, 2]})
        a, _ = await started(zk, 1)
        tp = TP("t", 0)
        await _alter(a, tp, [3, 4])
        await settle()
        # the controller dies mid-reassignment; broker 2 takes over
        await a.shutdown()
        zk.controller = None
        b, rec = await started(zk, 2)
        assert b.active
        listed = await b.list_partition_reassignments([tp])
        assert listed is not None and listed[tp].adding == (3, 4)
        assert ("t", 0) in rec.leaders_told(3) and ("t", 0) in rec.leaders_told(4)
        await _join_isr(b, zk, tp, (1, 2, 3, 4))
        assert zk.topics["t"].partitions[0] == [3, 4] and not zk.topics["t"].adding
        assert zk.states[tp].leader == 3 and zk.states[tp].isr == (3, 4)
        await b.shutdown()

    run(go)


def test_topic_being_reassigned_is_deleted_only_after_it_completes():
    async def go() -> None:
        zk = _four_brokers()
        zk.topics["t"] = TopicReplicas(bytes(16), {0: [1, 2]})
        c, rec = await started(zk)
        tp = TP("t", 0)
        await _alter(c, tp, [3, 4])
        await settle()
        zk.marked.add("t")
        zk.fire_children("/admin/delete_topics")
        await settle()
        assert "t" in zk.topics
        assert not [x for x in rec.of("StopReplica") if x["delete_partitions"]
                    and any(t["topic_name"] == "t" for t in x.get("topics", []))]  # fmt: skip
        # a deleting topic cannot be reassigned again
        assert (await _alter(c, tp, [1, 2])).error == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        await _join_isr(c, zk, tp, (1, 2, 3, 4))
        for _ in range(20):
            await asyncio.sleep(0.01)
        assert "t" not in zk.topics
        await c.shutdown()

    run(go)


def test_returning_target_broker_gets_its_replica_and_the_reassignment_completes():
    async def go() -> None:
        zk = _four_brokers()
        zk.topics["t"] = TopicReplicas(bytes(16), {0: [1, 2]})
        c, rec = await started(zk)
        tp = TP("t", 0)
        await _alter(c, tp, [1, 4])
        await settle()
        zk.remove_broker(4)  # the adding replica's broker dies
        await settle()
        assert (await c.list_partition_reassignments([tp]))[tp].adding == (4,)
        rec.sent.clear()
        zk.add_broker(4)
        await settle()
        assert ("t", 0) in rec.leaders_told(4)  # resumed: told to create its replica
        await _join_isr(c, zk, tp, (1, 2, 4))
        assert zk.topics["t"].partitions[0] == [1, 4] and zk.states[tp].isr == (1, 4)
        assert zk.states[tp].leader == 1  # the leader stays when it is in the target
        await c.shutdown()

    run(go)


def test_removed_replica_dead_at_completion_learns_it_is_stray_when_it_returns():
    """Broker 2's replica is removed while 2 is down (no StopReplica can reach it):
    when it comes back its LeaderAndIsr is full (KIP-516 type 2) and leaves t-0
    out, after an UpdateMetadata placing t-0 on 1 and 3, so the broker deletes it."""

    async def go() -> None:
        zk = three_brokers()
        zk.topics["t"] = TopicReplicas(bytes(16), {0: [1, 2], 1: [2, 1]})
        c, rec = await started(zk)
        tp = TP("t", 0)
        await _move_off_dead_broker_2(c, zk, tp)
        assert zk.topics["t"].partitions[0] == [1, 3] and not zk.topics["t"].removing
        assert not rec.of("StopReplica", 2)
        rec.sent.clear()
        zk.add_broker(2)
        await settle()
        lisr = rec.of("LeaderAndIsr", 2)
        assert [b["type"] for b in lisr] == [2]
        assert set(rec.leaders_told(2)) == {("t", 1)}
        told = rec.sent.index(next(x for x in rec.sent if x[:2] == (2, "LeaderAndIsr")))
        placed = [
            p["replicas"]
            for bid, name, body in rec.sent[:told]
            if (bid, name) == (2, "UpdateMetadata")
            for t in body["topic_states"]
            for p in t["partition_states"]
            if (t["topic_name"], p["partition_index"]) == ("t", 0)
        ]
        assert placed and placed[-1] == [1, 3]
        await c.shutdown()

    run(go)


def test_returning_broker_that_hosts_nothing_gets_an_empty_full_leader_and_isr():
    """The same, when the removed replica was the broker's only one: a full LeaderAndIsr
    with no partitions still goes to it (otherwise the stray stayed for good and the
    broker waited for a role that never came)."""

    async def go() -> None:
        zk = three_brokers()
        zk.topics["t"] = TopicReplicas(bytes(16), {0: [1, 2]})
        c, rec = await started(zk)
        tp = TP("t", 0)
        await _move_off_dead_broker_2(c, zk, tp)
        rec.sent.clear()
        zk.add_broker(2)
        await settle()
        lisr = rec.of("LeaderAndIsr", 2)
        assert [b["type"] for b in lisr] == [2]
        assert lisr[0]["topic_states"] == [] and rec.leaders_told(2) == {}
        # the brokers that host something get no such empty request
        assert all(b["topic_states"] for b in rec.of("LeaderAndIsr", 1) + rec.of("LeaderAndIsr", 3))
        await c.shutdown()

    run(go)


def test_failover_takes_dead_brokers_out_of_the_isrs():
    """A broker died while no controller watched (e.g. with the old controller): the
    new controller removes its replicas from the ISRs, even where it only followed."""

    async def go() -> None:
        zk = three_brokers()
        zk.topics["t"] = TopicReplicas(bytes(16), {0: [1, 2, 3]})
        zk.states[TP("t", 0)] = LeaderAndIsr(2, 4, (2, 1, 3), 1, 7)
        del zk.brokers[3]
        c, rec = await started(zk)
        s = zk.states[TP("t", 0)]
        assert (s.leader, s.isr, s.leader_epoch) == (2, (2, 1), 5)
        assert rec.leaders_told(2)[("t", 0)] == 2
        await c.shutdown()

    run(go)


def test_an_event_queued_before_resigning_does_not_run_after_it(caplog: Any):
    """A broker change queued just before the controller resigned (another broker
    took /controller) must not run on the emptied view of the old term: it used to
    fail on the closed channel with a logged traceback."""

    async def go() -> None:
        zk = three_brokers()
        c, rec = await started(zk)
        sent = len(rec.sent)
        zk.steal_controller(2)  # queues the controller change (it resigns)...
        zk.remove_broker(3)  # ...then a broker change from the same, ending term
        await settle()
        assert not c.active and c.channel is None
        assert len(rec.sent) == sent
        await c.shutdown()

    with caplog.at_level("ERROR"):
        run(go)
    assert "event failed" not in caplog.text
