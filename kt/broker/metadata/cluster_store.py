"""ClusterStore: Kafka's KafkaZkClient operations over any CoordinationStore.

The broker and the controller read and write the cluster's state only through this
class. It knows which znodes an operation touches and which writes are conditional;
the payloads' JSON lives in `znodes.py`, the store semantics in `store.py`.

Controller writes are fenced as Kafka fences them: every one is a multi beginning with
`check(/controller_epoch, epoch_zk_version)`, so a controller that lost its election
cannot write anything (`ControllerMovedError`). Methods taking `epoch_zk_version` skip
the check when it is -1 (ANY_VERSION), as Kafka's admin paths do.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from . import znodes
from .store import (
    ANY_VERSION,
    BadVersionError,
    Check,
    CoordinationStore,
    Create,
    Delete,
    NodeExistsError,
    NoNodeError,
    Op,
    SetData,
    Stat,
    StoreError,
    TransactionFailedError,
)
from .znodes import BrokerRegistration, PartitionState, ProducerIdBlock, TopicAssignment

TopicPartition = tuple[str, int]


class BrokerIdInUseError(StoreError):
    """Another live session holds /brokers/ids/N."""


class ControllerMovedError(StoreError):
    """The /controller_epoch check failed: another controller was elected since."""


class TopicExistsError(StoreError):
    """/brokers/topics/T already exists."""


class TopicAlreadyMarkedForDeletionError(StoreError):
    """/admin/delete_topics/T already exists."""


@dataclass(frozen=True, slots=True)
class LiveBroker:
    """A registered broker and its epoch (the czxid of its ephemeral znode)."""

    registration: BrokerRegistration
    epoch: int

    @property
    def broker_id(self) -> int:
        """The broker's id."""
        return self.registration.broker_id


def _now_ms() -> int:
    return int(time.time() * 1000)


class ClusterStore:
    """Kafka's ZooKeeper operations (KafkaZkClient) over a CoordinationStore."""

    def __init__(self, store: CoordinationStore) -> None:
        self.store = store

    # -- setup -----------------------------------------------------------------------

    async def ensure_persistent_paths(self) -> None:
        """Create ZkData.PersistentZkPaths where missing (every broker does at startup)."""
        for path in znodes.PERSISTENT_PATHS:
            await self.store.ensure_path(path)

    async def controller_multi(self, ops: list[Op], epoch_zk_version: int) -> list[object]:
        """Run `ops` fenced by `/controller_epoch`'s zkVersion (ANY_VERSION: unfenced).

        ControllerMovedError when the fence fails; otherwise the TransactionFailedError
        of `ops` (its results without the check's) propagates.
        """
        if epoch_zk_version == ANY_VERSION:
            return await self.store.multi(ops)
        try:
            results = await self.store.multi(
                [Check(znodes.CONTROLLER_EPOCH, epoch_zk_version), *ops]
            )
        except TransactionFailedError as e:
            first = e.results[0]
            if isinstance(first, (BadVersionError, NoNodeError)):
                raise ControllerMovedError(
                    f"controller epoch zkVersion is no longer {epoch_zk_version}"
                ) from None
            raise TransactionFailedError(e.results[1:]) from None
        return results[1:]

    # -- brokers ---------------------------------------------------------------------

    async def register_broker(self, reg: BrokerRegistration) -> int:
        """Create /brokers/ids/N for this session and return the broker epoch (czxid).

        Kafka's checked ephemeral create: a multi of create(empty, EPHEMERAL) and
        setData(payload, version 0). A node left by *our* session (a retry after a lost
        response) is ours; one of another live session is BrokerIdInUseError.
        """
        path = znodes.broker_path(reg.broker_id)
        data = znodes.encode_broker(reg)
        while True:
            try:
                results = await self.store.multi(
                    [Create(path, b"", ephemeral=True), SetData(path, data, 0)]
                )
            except TransactionFailedError as e:
                if not isinstance(e.failure, NodeExistsError):
                    raise e.failure from e
                existing = await self.store.exists(path)
                if existing is None:
                    continue  # the old session's node just expired: try again
                if existing.ephemeral_owner != self.store.session_id:
                    raise BrokerIdInUseError(
                        f"broker id {reg.broker_id} is already registered by another "
                        f"live broker (session 0x{existing.ephemeral_owner:x}); "
                        "is another broker running with the same broker.id?"
                    ) from None
                await self.store.set(path, data)
                return existing.czxid
            stat = results[1]
            assert isinstance(stat, Stat)
            return stat.czxid

    async def get_broker(self, broker_id: int) -> LiveBroker | None:
        """The registration of one live broker, or None."""
        try:
            data, stat = await self.store.get(znodes.broker_path(broker_id))
        except NoNodeError:
            return None
        return LiveBroker(znodes.decode_broker(broker_id, data), stat.czxid)

    async def get_broker_ids(self) -> list[int]:
        """The ids of the live brokers, ascending."""
        names = await self.store.children(znodes.BROKER_IDS)
        return sorted(int(n) for n in names if n.isdigit())

    async def get_brokers(self) -> dict[int, LiveBroker]:
        """Every live broker's registration and epoch."""
        ids = await self.get_broker_ids()
        found = await asyncio.gather(*(self.get_broker(i) for i in ids))
        return {b.broker_id: b for b in found if b is not None}

    async def generate_broker_sequence_id(self) -> int:
        """The next auto-generated broker id base: /brokers/seqid's new zkVersion.

        Kafka adds `reserved.broker.max.id` (1000) to it.
        """
        await self.store.ensure_path(znodes.BROKER_SEQID)
        stat = await self.store.set(znodes.BROKER_SEQID, b"")
        return stat.version

    # -- controller ------------------------------------------------------------------

    async def get_controller(self) -> int | None:
        """The id of the active controller, or None while there is none."""
        try:
            data, _ = await self.store.get(znodes.CONTROLLER)
        except NoNodeError:
            return None
        return znodes.decode_controller(data)

    async def get_controller_epoch(self) -> tuple[int, int] | None:
        """(controller epoch, its zkVersion), or None before the first election."""
        try:
            data, stat = await self.store.get(znodes.CONTROLLER_EPOCH)
        except NoNodeError:
            return None
        return znodes.decode_controller_epoch(data), stat.version

    async def _read_or_create_controller_epoch(self) -> tuple[int, int]:
        while True:
            current = await self.get_controller_epoch()
            if current is not None:
                return current
            try:
                # Created as 0 with zkVersion 0, so the first controller gets epoch 1.
                await self.store.create(znodes.CONTROLLER_EPOCH, znodes.encode_controller_epoch(0))
                return 0, 0
            except NodeExistsError:
                continue

    async def try_elect_controller(self, broker_id: int) -> tuple[int, int] | None:
        """Try to become the controller: (epoch, epoch zkVersion) when won, else None.

        Kafka's registerControllerAndIncrementControllerEpoch: the multi
        [create(/controller, EPHEMERAL), setData(/controller_epoch, epoch+1, version)].
        On NODEEXISTS or BADVERSION the znodes are re-read: we won only if /controller
        names us and the epoch is the one we wrote (a retried request).
        """
        if await self.get_controller() is not None:
            return None
        epoch, version = await self._read_or_create_controller_epoch()
        new_epoch = epoch + 1
        try:
            results = await self.store.multi(
                [
                    Create(
                        znodes.CONTROLLER,
                        znodes.encode_controller(broker_id, _now_ms()),
                        ephemeral=True,
                    ),
                    SetData(
                        znodes.CONTROLLER_EPOCH,
                        znodes.encode_controller_epoch(new_epoch),
                        version,
                    ),
                ]
            )
        except TransactionFailedError as e:
            if not isinstance(e.failure, (NodeExistsError, BadVersionError)):
                raise e.failure from e
            if await self.get_controller() != broker_id:
                return None
            current = await self.get_controller_epoch()
            if current is None or current[0] != new_epoch:
                return None
            return current
        stat = results[1]
        assert isinstance(stat, Stat)
        return new_epoch, stat.version

    async def resign_controller(self, epoch_zk_version: int) -> None:
        """Delete /controller if we still hold the epoch (a fenced delete)."""
        try:
            await self.controller_multi([Delete(znodes.CONTROLLER)], epoch_zk_version)
        except TransactionFailedError as e:
            if not isinstance(e.failure, NoNodeError):
                raise e.failure from e

    # -- topics ----------------------------------------------------------------------

    async def get_all_topics(self) -> list[str]:
        """The names under /brokers/topics, sorted."""
        try:
            return await self.store.children(znodes.BROKER_TOPICS)
        except NoNodeError:
            return []

    async def create_topic(
        self,
        name: str,
        topic_id: bytes,
        assignment: Mapping[int, list[int]],
        configs: Mapping[str, str] | None = None,
    ) -> None:
        """Write /config/topics/T and /brokers/topics/T atomically; TopicExistsError.

        Kafka's AdminZkClient.createTopicWithAssignment writes the config first so the
        controller finds it when the topic znode appears; one multi does both here.
        """
        config_path = znodes.config_entity_path("topics", name)
        config_data = znodes.encode_entity_config(configs or {})
        topic = TopicAssignment(dict(assignment), topic_id)
        for _ in range(3):
            config_op: Op = (
                SetData(config_path, config_data)
                if await self.store.exists(config_path) is not None
                else Create(config_path, config_data)
            )
            try:
                await self.store.multi(
                    [config_op, Create(znodes.topic_path(name), znodes.encode_topic(topic))]
                )
                return
            except TransactionFailedError as e:
                if isinstance(e.results[1], NodeExistsError):
                    raise TopicExistsError(f"topic '{name}' already exists") from None
                if isinstance(config_op, Create) and isinstance(e.results[0], NodeExistsError):
                    # Another broker created the config between our check and our
                    # write (two first consumers creating __consumer_offsets at once):
                    # again, with SetData (Kafka's setOrCreateEntityConfigs retries
                    # the same way); the topic's own create then says who won.
                    continue
                raise e.failure from e
        raise TopicExistsError(f"topic '{name}' is being created by another broker")

    async def get_topic_assignment(self, name: str) -> TopicAssignment | None:
        """One topic's assignment and id, or None."""
        try:
            data, _ = await self.store.get(znodes.topic_path(name))
        except NoNodeError:
            return None
        return znodes.decode_topic(name, data)

    async def get_topic_assignments(
        self, names: Iterable[str] | None = None
    ) -> dict[str, TopicAssignment]:
        """The assignments of `names` (None: all topics); missing topics are left out."""
        wanted = list(names) if names is not None else await self.get_all_topics()
        found = await asyncio.gather(*(self.get_topic_assignment(n) for n in wanted))
        return {n: a for n, a in zip(wanted, found, strict=True) if a is not None}

    async def set_topic_assignment(
        self, name: str, topic: TopicAssignment, epoch_zk_version: int = ANY_VERSION
    ) -> None:
        """Replace /brokers/topics/T (reassignment, new partitions); NoNodeError."""
        try:
            await self.controller_multi(
                [SetData(znodes.topic_path(name), znodes.encode_topic(topic))], epoch_zk_version
            )
        except TransactionFailedError as e:
            raise e.failure from e

    # -- partition states ------------------------------------------------------------

    async def get_partition_state(self, topic: str, partition: int) -> PartitionState | None:
        """A partition's leader/ISR state with its partition epoch (zkVersion), or None."""
        try:
            data, stat = await self.store.get(znodes.partition_state_path(topic, partition))
        except NoNodeError:
            return None
        return znodes.decode_partition_state(data, stat.version)

    async def get_partition_states(
        self, partitions: Iterable[TopicPartition]
    ) -> dict[TopicPartition, PartitionState]:
        """The states of `partitions`; those without a state znode are left out."""
        wanted = list(partitions)
        found = await asyncio.gather(*(self.get_partition_state(t, p) for t, p in wanted))
        return {tp: s for tp, s in zip(wanted, found, strict=True) if s is not None}

    async def create_partition_states(
        self, states: Mapping[TopicPartition, PartitionState], epoch_zk_version: int
    ) -> dict[TopicPartition, PartitionState | StoreError]:
        """Create partitions/P and partitions/P/state for new partitions (fenced).

        Per partition: the state with partition_epoch 0, or the error (NodeExistsError
        when a state already exists). ControllerMovedError fails the whole call.
        """

        async def one(tp: TopicPartition, state: PartitionState) -> PartitionState | StoreError:
            topic, partition = tp
            await self.store.ensure_path(znodes.topic_partitions_path(topic))
            ops: list[Op] = []
            if await self.store.exists(znodes.partition_path(topic, partition)) is None:
                ops.append(Create(znodes.partition_path(topic, partition)))
            path = znodes.partition_state_path(topic, partition)
            ops.append(Create(path, znodes.encode_partition_state(state)))
            try:
                await self.controller_multi(ops, epoch_zk_version)
            except TransactionFailedError as e:
                return e.failure
            return _with_epoch(state, 0)

        items = list(states.items())
        results = await asyncio.gather(*(one(tp, s) for tp, s in items))
        return dict(zip((tp for tp, _ in items), results, strict=True))

    async def set_partition_states(
        self, states: Mapping[TopicPartition, PartitionState], epoch_zk_version: int
    ) -> dict[TopicPartition, PartitionState | StoreError]:
        """Write partition states, each conditional on its `partition_epoch` (fenced).

        Kafka's updateLeaderAndIsr: per partition, the new state whose partition_epoch
        is the new zkVersion, or the error (BadVersionError: re-read and retry;
        NoNodeError). ControllerMovedError fails the whole call.
        """

        async def one(tp: TopicPartition, state: PartitionState) -> PartitionState | StoreError:
            path = znodes.partition_state_path(*tp)
            data = znodes.encode_partition_state(state)
            try:
                results = await self.controller_multi(
                    [SetData(path, data, state.partition_epoch)], epoch_zk_version
                )
            except TransactionFailedError as e:
                return e.failure
            stat = results[0]
            assert isinstance(stat, Stat)
            return _with_epoch(state, stat.version)

        items = list(states.items())
        results = await asyncio.gather(*(one(tp, s) for tp, s in items))
        return dict(zip((tp for tp, _ in items), results, strict=True))

    # -- topic deletion --------------------------------------------------------------

    async def mark_topic_for_deletion(self, name: str) -> None:
        """Create /admin/delete_topics/T; TopicAlreadyMarkedForDeletionError."""
        try:
            await self.store.create(znodes.delete_topic_path(name), b"", make_parents=True)
        except NodeExistsError:
            raise TopicAlreadyMarkedForDeletionError(
                f"topic '{name}' is already marked for deletion"
            ) from None

    async def topics_marked_for_deletion(self) -> list[str]:
        """The children of /admin/delete_topics."""
        try:
            return await self.store.children(znodes.DELETE_TOPICS)
        except NoNodeError:
            return []

    async def delete_topic_znodes(self, name: str, epoch_zk_version: int) -> None:
        """Remove a deleted topic: its subtree, its config and its deletion marker.

        One fenced multi, deepest znodes first; absent pieces are skipped.
        """
        ops: list[Op] = []
        root = znodes.topic_path(name)
        for path in reversed(await self._subtree(root)):
            ops.append(Delete(path))
        for path in (znodes.config_entity_path("topics", name), znodes.delete_topic_path(name)):
            if await self.store.exists(path) is not None:
                ops.append(Delete(path))
        if not ops:
            return
        try:
            await self.controller_multi(ops, epoch_zk_version)
        except TransactionFailedError as e:
            raise e.failure from e

    async def _subtree(self, root: str) -> list[str]:
        """`root` and its descendants, parents before children ([] if absent)."""
        try:
            names = await self.store.children(root)
        except NoNodeError:
            return []
        out = [root]
        for name in names:
            out += await self._subtree(f"{root}/{name}")
        return out

    # -- configs ---------------------------------------------------------------------

    async def get_entity_config(self, entity_type: str, name: str) -> dict[str, str]:
        """The overrides of /config/<type>/<name> ({} when there are none)."""
        try:
            data, _ = await self.store.get(znodes.config_entity_path(entity_type, name))
        except NoNodeError:
            return {}
        return znodes.decode_entity_config(data)

    async def get_all_entity_configs(self, entity_type: str) -> dict[str, dict[str, str]]:
        """name -> overrides for every entity of a type."""
        try:
            names = await self.store.children(f"{znodes.CONFIG}/{entity_type}")
        except NoNodeError:
            return {}
        found = await asyncio.gather(*(self.get_entity_config(entity_type, n) for n in names))
        return dict(zip(names, found, strict=True))

    async def set_entity_config(
        self, entity_type: str, name: str, config: Mapping[str, str]
    ) -> str:
        """Replace an entity's overrides and announce it; returns the notification path.

        Kafka's AdminZkClient.changeEntityConfig: set (or create) /config/<type>/<name>,
        then a sequential /config/changes/config_change_ naming the entity; one multi.
        """
        path = znodes.config_entity_path(entity_type, name)
        data = znodes.encode_entity_config(config)
        await self.store.ensure_path(znodes.CONFIG_CHANGES)
        await self.store.ensure_path(f"{znodes.CONFIG}/{entity_type}")
        while True:
            write: Op = SetData(path, data) if await self.store.exists(path) else Create(path, data)
            notify = Create(
                znodes.CONFIG_CHANGE_PREFIX,
                znodes.encode_config_change(entity_type, name),
                sequential=True,
            )
            try:
                results = await self.store.multi([write, notify])
            except TransactionFailedError as e:
                if isinstance(e.results[0], (NodeExistsError, NoNodeError)):
                    continue  # created or deleted concurrently: choose again
                raise e.failure from e
            created = results[1]
            assert isinstance(created, str)
            return created

    async def set_topic_config(self, name: str, config: Mapping[str, str]) -> str:
        """Replace a topic's config overrides and announce the change."""
        return await self.set_entity_config("topics", name, config)

    async def config_change_notifications(self) -> list[str]:
        """The names of the pending config change notifications, oldest first."""
        try:
            return await self.store.children(znodes.CONFIG_CHANGES)
        except NoNodeError:
            return []

    async def read_config_change(self, name: str) -> tuple[str, str] | None:
        """(entity type, entity name) of one notification, or None when purged."""
        try:
            data, _ = await self.store.get(f"{znodes.CONFIG_CHANGES}/{name}")
        except NoNodeError:
            return None
        return znodes.decode_config_change(data)

    # -- cluster id and producer ids -------------------------------------------------

    async def get_cluster_id(self) -> str | None:
        """The cluster id, or None before the first broker started."""
        try:
            data, _ = await self.store.get(znodes.CLUSTER_ID)
        except NoNodeError:
            return None
        return znodes.decode_cluster_id(data)

    async def get_or_create_cluster_id(self, candidate: str) -> str:
        """Kafka's createOrGetClusterId: the first broker's candidate wins."""
        while True:
            existing = await self.get_cluster_id()
            if existing is not None:
                return existing
            try:
                await self.store.create(
                    znodes.CLUSTER_ID, znodes.encode_cluster_id(candidate), make_parents=True
                )
                return candidate
            except NodeExistsError:
                continue

    async def allocate_producer_id_block(self, broker_id: int) -> ProducerIdBlock:
        """Reserve the next 1000 producer ids for `broker_id`.

        Kafka's ProducerIdManager.getNewProducerIdBlock: read the last block, write the
        next one conditionally on the znode's version, and loop on BADVERSION.
        """
        path = znodes.PRODUCER_ID_BLOCK
        size = znodes.PRODUCER_ID_BLOCK_SIZE
        while True:
            try:
                data, stat = await self.store.get(path)
            except NoNodeError:
                await self.store.ensure_path(path)
                continue
            last = znodes.decode_producer_id_block(data)
            start = 0 if last is None else last.end + 1
            if start > 2**63 - 1 - size:
                raise StoreError("producer ids are exhausted")
            block = ProducerIdBlock(broker_id, start, start + size - 1)
            try:
                await self.store.set(path, znodes.encode_producer_id_block(block), stat.version)
            except BadVersionError:
                continue
            return block

    # -- notifications and admin triggers --------------------------------------------

    async def register_isr_change(self, partitions: Iterable[TopicPartition]) -> str:
        """Create an /isr_change_notification/isr_change_ sequential znode."""
        return await self.store.create(
            znodes.ISR_CHANGE_PREFIX,
            znodes.encode_partitions(partitions),
            sequential=True,
            make_parents=True,
        )

    async def isr_change_notifications(self) -> list[str]:
        """The names of pending ISR change notifications, oldest first."""
        try:
            return await self.store.children(znodes.ISR_CHANGE_NOTIFICATION)
        except NoNodeError:
            return []

    async def read_isr_change(self, name: str) -> list[TopicPartition]:
        """The partitions of one ISR change notification ([] when already deleted)."""
        try:
            data, _ = await self.store.get(f"{znodes.ISR_CHANGE_NOTIFICATION}/{name}")
        except NoNodeError:
            return []
        return znodes.decode_partitions(data)

    async def delete_isr_change_notifications(
        self, names: Iterable[str], epoch_zk_version: int
    ) -> None:
        """Delete processed ISR change notifications (fenced; absent ones are fine)."""
        await self._delete_children(znodes.ISR_CHANGE_NOTIFICATION, names, epoch_zk_version)

    async def register_log_dir_event(self, broker_id: int) -> str:
        """Announce a failed log dir of `broker_id` to the controller."""
        return await self.store.create(
            znodes.LOG_DIR_EVENT_PREFIX,
            znodes.encode_log_dir_event(broker_id),
            sequential=True,
            make_parents=True,
        )

    async def log_dir_event_notifications(self) -> list[str]:
        """The names of pending log dir event notifications, oldest first."""
        try:
            return await self.store.children(znodes.LOG_DIR_EVENT_NOTIFICATION)
        except NoNodeError:
            return []

    async def read_log_dir_event(self, name: str) -> int | None:
        """The broker id of one log dir event notification, or None when deleted."""
        try:
            data, _ = await self.store.get(f"{znodes.LOG_DIR_EVENT_NOTIFICATION}/{name}")
        except NoNodeError:
            return None
        return znodes.decode_log_dir_event(data)

    async def delete_log_dir_event_notifications(
        self, names: Iterable[str], epoch_zk_version: int
    ) -> None:
        """Delete processed log dir event notifications (fenced)."""
        await self._delete_children(znodes.LOG_DIR_EVENT_NOTIFICATION, names, epoch_zk_version)

    async def _delete_children(
        self, parent: str, names: Iterable[str], epoch_zk_version: int
    ) -> None:
        for name in names:
            try:
                await self.controller_multi([Delete(f"{parent}/{name}")], epoch_zk_version)
            except TransactionFailedError as e:
                if not isinstance(e.failure, NoNodeError):
                    raise e.failure from e

    async def get_preferred_replica_election(self) -> list[TopicPartition] | None:
        """The partitions of /admin/preferred_replica_election, or None when absent."""
        try:
            data, _ = await self.store.get(znodes.PREFERRED_REPLICA_ELECTION)
        except NoNodeError:
            return None
        return znodes.decode_partitions(data)

    async def delete_preferred_replica_election(self, epoch_zk_version: int) -> None:
        """Remove the processed preferred-election trigger (fenced)."""
        await self._delete_fenced(znodes.PREFERRED_REPLICA_ELECTION, epoch_zk_version)

    async def get_legacy_reassignment(self) -> dict[TopicPartition, list[int]] | None:
        """The targets in /admin/reassign_partitions, or None when absent."""
        try:
            data, _ = await self.store.get(znodes.REASSIGN_PARTITIONS)
        except NoNodeError:
            return None
        return znodes.decode_reassignment(data)

    async def set_legacy_reassignment(
        self, reassignment: Mapping[TopicPartition, list[int]], epoch_zk_version: int
    ) -> None:
        """Rewrite /admin/reassign_partitions, deleting it when empty (fenced)."""
        if not reassignment:
            await self._delete_fenced(znodes.REASSIGN_PARTITIONS, epoch_zk_version)
            return
        try:
            await self.controller_multi(
                [SetData(znodes.REASSIGN_PARTITIONS, znodes.encode_reassignment(reassignment))],
                epoch_zk_version,
            )
        except TransactionFailedError as e:
            raise e.failure from e

    async def _delete_fenced(self, path: str, epoch_zk_version: int) -> None:
        try:
            await self.controller_multi([Delete(path)], epoch_zk_version)
        except TransactionFailedError as e:
            if not isinstance(e.failure, NoNodeError):
                raise e.failure from e


def _with_epoch(state: PartitionState, partition_epoch: int) -> PartitionState:
    return PartitionState(
        state.leader,
        state.leader_epoch,
        list(state.isr),
        state.controller_epoch,
        state.leader_recovery_state,
        partition_epoch,
    )
