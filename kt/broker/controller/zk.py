"""The controller's view of ZooKeeper: `ControllerZk` over a `ClusterStore`.

The controller speaks in its own terms (LeaderAndIsr with its zk version,
TopicPartition, live brokers with endpoints); the ClusterStore speaks Kafka's
znodes. This adapter converts between them and turns the store's fencing
failures into the controller's exceptions, so the controller's logic is the same
over ZooKeeper and over the single-node in-process store.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from kt.broker.controller.requests import BrokerEndpointInfo, TopicReplicas
from kt.broker.metadata import cluster_store as cs
from kt.broker.metadata import store as st
from kt.broker.metadata import znodes
from kt.cluster.election import LeaderAndIsr, LeaderRecoveryState
from kt.storage.checkpoint import TopicPartition


def to_leader_and_isr(state: znodes.PartitionState) -> LeaderAndIsr:
    """A state znode as the controller holds it."""
    return LeaderAndIsr(
        state.leader,
        state.leader_epoch,
        tuple(state.isr),
        state.controller_epoch,
        state.partition_epoch,
        LeaderRecoveryState(state.leader_recovery_state),
    )


def to_partition_state(lead: LeaderAndIsr) -> znodes.PartitionState:
    """The controller's state as a znode payload (partition_epoch = expected version)."""
    return znodes.PartitionState(
        leader=lead.leader,
        leader_epoch=lead.leader_epoch,
        isr=list(lead.isr),
        controller_epoch=lead.controller_epoch,
        leader_recovery_state=int(lead.leader_recovery_state),
        partition_epoch=lead.zk_version,
    )


def to_endpoint_info(broker: cs.LiveBroker) -> BrokerEndpointInfo:
    """A registration as the controller needs it for its requests."""
    reg = broker.registration
    return BrokerEndpointInfo(
        reg.broker_id,
        broker.epoch,
        tuple((e.listener, e.host, e.port) for e in reg.endpoints),
        reg.rack,
        tuple((e.listener, e.security_protocol) for e in reg.endpoints),
    )


class ZkControllerStore:
    """ControllerZk over a ClusterStore (ZooKeeper or the in-process store)."""

    def __init__(self, cluster: cs.ClusterStore) -> None:
        self.cluster = cluster

    async def try_elect_controller(self, broker_id: int) -> tuple[int, int] | None:
        """Win /controller, or None."""
        return await self.cluster.try_elect_controller(broker_id)

    async def get_controller(self) -> int | None:
        """The id in /controller."""
        return await self.cluster.get_controller()

    async def resign_controller(self, broker_id: int) -> None:
        """Delete /controller if it is still ours."""
        if await self.cluster.get_controller() != broker_id:
            return
        epoch = await self.cluster.get_controller_epoch()
        if epoch is not None:
            try:
                await self.cluster.resign_controller(epoch[1])
            except cs.ControllerMovedError:
                pass

    async def get_brokers(self) -> dict[int, BrokerEndpointInfo]:
        """Every registered broker."""
        return {b: to_endpoint_info(x) for b, x in (await self.cluster.get_brokers()).items()}

    async def get_topics(self) -> list[str]:
        """Children of /brokers/topics."""
        return await self.cluster.get_all_topics()

    async def get_topic(self, topic: str) -> TopicReplicas | None:
        """/brokers/topics/T."""
        a = await self.cluster.get_topic_assignment(topic)
        if a is None:
            return None
        return TopicReplicas(
            a.topic_id or bytes(16),
            {p: list(r) for p, r in a.partitions.items()},
            {p: list(r) for p, r in a.adding_replicas.items()},
            {p: list(r) for p, r in a.removing_replicas.items()},
        )

    async def set_topic(self, topic: str, replicas: TopicReplicas, epoch_zk_version: int) -> None:
        """Replace /brokers/topics/T (a reassignment's RS, AR and RR), fenced."""
        a = znodes.TopicAssignment(
            {p: list(r) for p, r in replicas.partitions.items()},
            replicas.topic_id,
            {p: list(r) for p, r in replicas.adding.items() if r},
            {p: list(r) for p, r in replicas.removing.items() if r},
        )
        await self.cluster.set_topic_assignment(topic, a, epoch_zk_version)

    async def get_partition_states(
        self, tps: Iterable[TopicPartition]
    ) -> dict[TopicPartition, LeaderAndIsr]:
        """The existing state znodes among `tps`."""
        wanted = {(tp.topic, tp.partition): tp for tp in tps}
        found = await self.cluster.get_partition_states(wanted)
        return {wanted[k]: to_leader_and_isr(s) for k, s in found.items()}

    async def create_partition_states(
        self, states: dict[TopicPartition, LeaderAndIsr], epoch_zk_version: int
    ) -> dict[TopicPartition, LeaderAndIsr]:
        """Create state znodes; a partition whose state exists already (a previous
        controller created it) keeps the existing state."""
        payload = {(tp.topic, tp.partition): to_partition_state(s) for tp, s in states.items()}
        results = await self.cluster.create_partition_states(payload, epoch_zk_version)
        out: dict[TopicPartition, LeaderAndIsr] = {}
        existing: list[TopicPartition] = []
        for (topic, p), res in results.items():
            tp = TopicPartition(topic, p)
            if isinstance(res, znodes.PartitionState):
                out[tp] = to_leader_and_isr(res)
            else:
                existing.append(tp)
        if existing:
            out.update(await self.get_partition_states(existing))
        return out

    async def update_partition_states(
        self, states: dict[TopicPartition, LeaderAndIsr], epoch_zk_version: int
    ) -> dict[TopicPartition, LeaderAndIsr | st.BadVersionError]:
        """Conditional writes; BadVersionError per partition that lost a race."""
        payload = {(tp.topic, tp.partition): to_partition_state(s) for tp, s in states.items()}
        results = await self.cluster.set_partition_states(payload, epoch_zk_version)
        out: dict[TopicPartition, LeaderAndIsr | st.BadVersionError] = {}
        for (topic, p), res in results.items():
            tp = TopicPartition(topic, p)
            if isinstance(res, znodes.PartitionState):
                out[tp] = to_leader_and_isr(res)
            elif isinstance(res, cs.ControllerMovedError):
                raise res
            else:
                out[tp] = (
                    res if isinstance(res, st.BadVersionError) else st.BadVersionError(str(res))
                )
        return out

    async def topic_config(self, topic: str) -> dict[str, str]:
        """/config/topics/T."""
        return await self.cluster.get_entity_config("topics", topic)

    async def topics_marked_for_deletion(self) -> list[str]:
        """Children of /admin/delete_topics."""
        return await self.cluster.topics_marked_for_deletion()

    async def delete_topic(self, topic: str, epoch_zk_version: int) -> None:
        """Remove the topic's znodes and its marker."""
        await self.cluster.delete_topic_znodes(topic, epoch_zk_version)

    async def unmark_topic_for_deletion(self, topic: str) -> None:
        """Drop a marker of a topic that does not exist."""
        try:
            await self.cluster.store.delete(znodes.delete_topic_path(topic))
        except st.NoNodeError:
            pass

    async def log_dir_events(self) -> dict[str, int]:
        """Pending log dir event notifications: name -> the broker that sent it."""
        out: dict[str, int] = {}
        for name in await self.cluster.log_dir_event_notifications():
            broker = await self.cluster.read_log_dir_event(name)
            if broker is not None:
                out[name] = broker
        return out

    async def delete_log_dir_events(self, names: list[str], epoch_zk_version: int) -> None:
        """Delete processed notifications (fenced)."""
        await self.cluster.delete_log_dir_event_notifications(names, epoch_zk_version)

    def watch_children(self, path: str, callback: Callable[[list[str]], None]) -> st.Watch:
        """Persistent child watch on the loop."""
        return self.cluster.store.watch_children(path, callback)

    def watch_data(self, path: str, callback: Callable[[bytes | None], None]) -> st.Watch:
        """Persistent data watch on the loop."""
        return self.cluster.store.watch_data(path, lambda data, _stat: callback(data))
