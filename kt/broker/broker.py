"""The Broker: the composition root. It builds every service of one broker, each
with exactly what it uses, and wires them; nothing else constructs a service or
receives the broker (`tests/unit/test_layering.py` keeps it so).

Everything runs on one asyncio event loop; partition operations are synchronous
file I/O on page-cached files, so no locks are needed between requests. The
server (`kt.broker.server`) starts and stops the services in a fixed order;
docs/design/composition-root.md describes the wiring.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

from kt.broker import config_settings as cs
from kt.broker import faults
from kt.broker.cluster_services import build_cluster_services
from kt.broker.config import BrokerConfig, Listener
from kt.broker.controller.controller import KafkaController
from kt.broker.controller.links import PeerLinks
from kt.broker.coordinator_leadership import CoordinatorLeadership
from kt.broker.dispatcher import RequestDispatcher
from kt.broker.fetch_sessions import FetchSessionCache
from kt.broker.groups import GroupCoordinator
from kt.broker.groups.offsets_log import LogRecordStore
from kt.broker.log_cleaner import LogCleaner
from kt.broker.log_maintenance import LogMaintenance
from kt.broker.log_manager import LogManager
from kt.broker.membership import ClusterMembership, MembershipError
from kt.broker.metadata.cache import MetadataCache
from kt.broker.metadata.store import CoordinationStore
from kt.broker.metadata.topics import TopicsView
from kt.broker.metadata_store import CONSUMER_OFFSETS, TRANSACTION_STATE
from kt.broker.producer_ids import ProducerIdManager
from kt.broker.replica_manager import ReplicaManager
from kt.broker.replication.alter_log_dirs import ReplicaAlterLogDirsManager
from kt.broker.replication.quota import ReplicationThrottles
from kt.broker.security.authorizer import make_authorizer
from kt.broker.services import HandlerServices, NodeState
from kt.broker.topic_admin import TopicAdmin
from kt.broker.topic_config_sync import TopicConfigs
from kt.broker.topic_creation import TopicCreator
from kt.broker.transactions.service import TransactionService
from kt.broker.transactions.state_log import TransactionLogStore
from kt.storage.log_config import LONG_MAX, LogConfig
from kt.storage.partition_metadata import random_uuid, uuid_from_str
from kt.storage.retention import RetentionResult

log = logging.getLogger("kt.broker")


class Broker:
    """One broker: builds its services (see the module docstring) and runs its
    periodic log maintenance. The services are explicit attributes."""

    def __init__(self, config: BrokerConfig, store: CoordinationStore) -> None:
        # The config as last reconfigured (an immutable BrokerConfig: reconfigure()
        # replaces it); only this root reads it, services get settings built from it.
        self.config = config
        self.node_id = config.node_id
        # Test-only I/O fault injection; does nothing unless its variable is set.
        faults.install_from_env()
        # The dynamic settings as last applied; reconfigure() replaces the snapshot.
        self.dynamic = cs.dynamic_settings(config)
        # Peers are reached (and reach this broker) through the inter-broker listener.
        ib = config.listener_settings
        self.node = node = NodeState(
            config.node_id, ib.inter_broker_listener if ib else config.listeners[0].name
        )
        self.logs = logs = LogManager(
            config.log_dirs,
            config.node_id,
            config.log_config,
            failure_listener=self._dir_failure_from_any_thread,
        )
        self._loop: asyncio.AbstractEventLoop | None = None
        # Told when the controller deleted a topic (see topic_deleted).
        self._on_topic_deleted: list[Callable[[str], None]] = []
        # What the controller said; topics as the controller described them (plus
        # their configs).
        cache = MetadataCache()
        self.metadata = topics = TopicsView(cache)
        # The membership is built below: the closures here reach it once it exists.
        self.topic_configs = TopicConfigs(
            topics,
            logs,
            lambda name: self.membership.cluster.get_entity_config("topics", name),
        )
        # Owns the hosted partitions; every request resolves its partitions through it.
        self.replica_manager = rm = ReplicaManager(
            config.node_id,
            logs,
            cache=cache,
            broker_epoch=lambda: node.broker_epoch,
            topic_configs=self.topic_configs.of,
            fetch_topic_configs=_once_per_topic(self.topic_configs.refresh),
            submit_isr_change=lambda p, cb: self.membership.submit_isr_change(p, cb),
            replica_lag_time_max_ms=config.get_int("replica.lag.time.max.ms"),
            txn_verification_enabled=self.dynamic.transaction_partition_verification_enable,
            topic_deleted=self.topic_deleted,
            # The mover (built below) needs the replica manager, and this it.
            move_replica=lambda tp, path: self.log_dir_mover.alter(tp, path),
        )
        # Incremental fetch sessions (KIP-227) of followers and consumers.
        self.fetch_sessions = FetchSessionCache(
            config.get_int("max.incremental.fetch.session.cache.slots")
        )
        self.started_ms = int(time.time() * 1000)
        # Listeners as bound (port 0 resolved), set by the server once listening.
        self.bound_listeners: list[Listener] = []
        self.producer_ids = ProducerIdManager()
        self.topic_creator = creator = TopicCreator(
            cs.topic_creation_settings(config), topics, lambda: self.membership.admin()
        )
        # Links to any broker (itself through the dispatcher, built last).
        peers = PeerLinks(config.node_id, node.listener_name, cache, lambda: self.dispatcher,
                          security=config.inter_broker_client)  # fmt: skip
        # One listener routes leadership of internal topics to their coordinators.
        leadership = CoordinatorLeadership()
        rm.leadership_listeners.append(leadership.on_leadership)
        rm.stop_listeners.append(leadership.on_stopped)
        # Loads __consumer_offsets when the server starts it.
        self.group_coordinator = groups = GroupCoordinator(
            cs.coordinator_settings(config),
            LogRecordStore(rm, topics, cs.consumer_offsets_topic(config), creator),
            # As Kafka's KafkaApis: the controller's view decides, not this broker's
            # replicas (a committed topic need not be hosted here). Before this
            # broker has a view (just started) nothing is called unknown: the group
            # checks answer instead (NOT_COORDINATOR, as it coordinates nothing yet).
            partition_exists=lambda t, p: not cache.ready or cache.partition(t, p) is not None,
        )
        leadership.register(
            CONSUMER_OFFSETS, elected=groups.on_election, resigned=groups.on_resignation
        )
        self._on_topic_deleted.append(groups.on_topic_deleted)
        # A transaction marker replicated on a __consumer_offsets partition.
        rm.offsets_txn_listeners.append(
            lambda tp, producer_id, committed: groups.complete_txn(
                producer_id, [tp.partition], committed
            )
        )
        # Loads __transaction_state when the server starts it.
        self.transactions = txns = TransactionService(
            cs.txn_settings(config),
            TransactionLogStore(rm, topics, cs.transaction_state_topic(config), creator),
            cache,
            peers,
            self.producer_ids.allocate,
        )
        leadership.register(
            TRANSACTION_STATE,
            elected=txns.on_election,
            resigned=txns.on_resignation,
            stopped=txns.on_stopped,
        )
        self.log_cleaner = LogCleaner(cs.cleaner_settings(config), rm, logs)
        # Replication throttles (KIP-73): rates from dynamic broker configs, throttled
        # replicas from the topics' configs as this broker knows them.
        self.replication_throttles = ReplicationThrottles(
            config.node_id,
            self.topic_configs.of,
            windows=max(2, config.get_int("replication.quota.window.num")),
            window_s=max(1, config.get_int("replication.quota.window.size.seconds")),
        )
        # Moves between this broker's log directories (AlterReplicaLogDirs).
        self.log_dir_mover = ReplicaAlterLogDirsManager(rm, logs, self.alter_log_dirs_rate)
        self.maintenance = LogMaintenance(
            cs.maintenance_settings(config), logs, rm, self.log_dir_mover
        )
        # This broker as a member of its cluster (the single node: of its own).
        cluster_services = build_cluster_services(
            store,
            settings=cs.cluster_settings(config, node.listener_name),
            node=node,
            replicas=rm,
            topics=topics,
            topic_configs=self.topic_configs,
            throttles=self.replication_throttles,
            peers=peers,
            advertised_listeners=self.advertised_listeners,
            apply_dynamic_configs=self.reconfigure,
        )
        self.membership = ClusterMembership(
            store,
            cluster_services,
            settings=cs.membership_settings(config),
            node=node,
            replicas=rm,
            topics=topics,
            producer_ids=self.producer_ids,
            advertised_listeners=self.advertised_listeners,
        )
        # The ACL authorizer when `authorizer.class.name` asks for one (its ACLs are
        # loaded and followed by the server, kt.broker.security.broker_security).
        self.authorizer = make_authorizer(config.props)
        # Called with the new config after every change of the dynamic configs (the
        # server's TLS reload).
        self.reconfigure_hooks: list[Callable[[BrokerConfig], None]] = []
        self.services = HandlerServices(
            node=node,
            settings=cs.handler_settings(config),
            broker_config=lambda: self.config,
            replicas=rm,
            topics=topics,
            logs=logs,
            fetch_sessions=self.fetch_sessions,
            throttles=self.replication_throttles,
            groups=groups,
            transactions=txns,
            allocate_producer_id=self.producer_ids.allocate,
            topic_creation=creator,
            topic_configs=self.topic_configs,
            cluster=self.membership,
            authorizer=self.authorizer,
        )
        # Answers every request, from the network and from the loopback links.
        self.dispatcher = RequestDispatcher(self.services)
        self._locked = False

    # --- the node's state (read by tests and the server) ------------------------

    @property
    def cluster_id(self) -> str:
        """The cluster id in use (once the log directories are locked)."""
        return self.node.cluster_id

    @property
    def broker_epoch(self) -> int:
        """The registration's epoch (-1 until registered)."""
        return self.node.broker_epoch

    @property
    def stopping(self) -> bool:
        """Set at shutdown: long polls answer at once."""
        return self.node.stopping

    @stopping.setter
    def stopping(self, value: bool) -> None:
        self.node.stopping = value

    @property
    def listener_name(self) -> str:
        """The listener brokers and clients reach us on (kt uses the first one)."""
        return self.node.listener_name

    @property
    def admin(self) -> TopicAdmin:
        """Topic changes (through the coordination store), once the broker joined."""
        return self.membership.admin()

    @property
    def controller(self) -> KafkaController | None:
        """This broker's controller once it joined (active or not)."""
        return self.membership.joined_controller()

    # --- lifecycle -------------------------------------------------------

    def lock_dirs(self, cluster_id: str) -> str:
        """Create and lock the log directories and check (or write) meta.properties
        against `cluster_id`; returns the cluster id in use. Fatal errors (no usable
        directory, a held lock, another cluster's directory) raise."""
        if not self._locked:
            self.node.cluster_id = self.logs.lock_and_validate(cluster_id)
            self._locked = True
        return self.cluster_id

    def open(self, cluster_id: str, topic_configs: dict[str, dict[str, str]]) -> None:
        """Lock the log dirs (unless `lock_dirs` did; meta.properties must name the
        cluster id the coordination store holds), load every partition log
        (recovering if needed) and host each as a replica with no role yet: the
        controller's LeaderAndIsr makes it leader or follower."""
        if self.lock_dirs(cluster_id) != cluster_id:
            raise MembershipError(
                f"the log directories belong to cluster {self.cluster_id}, but the "
                f"coordination store holds cluster {cluster_id}"
            )
        for name, configs in topic_configs.items():
            self.metadata.set_configs(name, configs)
        self.logs.load_logs(topic_configs, self.config.get_int("num.recovery.threads.per.data.dir"))
        for tp, plog in self.logs.logs.items():
            stored = self.logs.topic_id_on_disk(tp)
            topic_id = uuid_from_str(stored) if stored else bytes(16)
            self.replica_manager.host(tp, topic_id, plog)

    def orphan_partitions(self) -> dict[str, tuple[bytes, int]]:
        """Topics whose logs are here but which the cluster does not know (e.g. a
        copied Kafka log dir): name -> (topic id on disk, partition count)."""
        out: dict[str, tuple[bytes, int]] = {}
        for part in self.replica_manager:
            tp = part.tp
            count = max(out.get(tp.topic, (b"", 0))[1], tp.partition + 1)
            out[tp.topic] = (part.topic_id if any(part.topic_id) else random_uuid(), count)
        return out

    def close(self) -> None:
        """Clean shutdown: producer snapshots, flush, checkpoints, the clean-shutdown
        marker, unlock."""
        self.replica_manager.close()
        self.logs.shutdown()

    def advertised_listeners(self) -> list[Listener]:
        """What clients are told to connect to: advertised.listeners if set, else the
        bound listeners (wildcard hosts advertised as this host's name)."""
        if self.config.props.get("advertised.listeners"):
            return self.config.advertised
        out = []
        for bound, adv in zip(self.bound_listeners, self.config.advertised):
            out.append(Listener(adv.name, adv.host, bound.port, adv.protocol))
        return out or self.config.advertised

    def _dir_failure_from_any_thread(self, d: Path, exc: BaseException) -> None:
        # Checkpoints are written from worker threads: hand the failure to the loop.
        loop = self._loop
        try:
            running: asyncio.AbstractEventLoop | None = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if loop is not None and running is not loop and not loop.is_closed():
            loop.call_soon_threadsafe(self.replica_manager.fail_log_dir, d, exc)
        else:
            self.replica_manager.fail_log_dir(d, exc)

    def alter_log_dirs_rate(self) -> float | None:
        """The copy rate of moves between log directories in effect now (bytes/s,
        None: unlimited): replica.alter.log.dirs.io.max.bytes.per.second from the
        effective config (this broker's dynamic value, the cluster default, the
        static one; Kafka's default Long.MaxValue is no limit). Read before every
        chunk copied, so a change applies at once."""
        rate = self.dynamic.replica_alter_log_dirs_io_max_bytes_per_second
        return None if rate >= LONG_MAX else float(rate)

    def reconfigure(self, defaults: dict[str, str], own: dict[str, str]) -> None:
        """The dynamic broker configs (/config/brokers/<default>, /config/brokers/<id>)
        were read or changed: apply them live (Kafka's BrokerConfigHandler). The one
        place dynamic settings reach the services."""
        before = self.config
        self.config = cfg = before.with_dynamic(defaults, own)
        changed = before.changed_keys(cfg)
        self.dynamic = now = cs.dynamic_settings(cfg)
        self.replication_throttles.reconfigure(cs.throttle_rates(cfg))
        self.replica_manager.reconfigure(
            txn_verification_enabled=now.transaction_partition_verification_enable
        )
        if changed:
            self.logs.reconfigure_defaults(cfg.effective_log_config(), self.topic_configs.of)
        controller = self.membership.joined_controller()
        if controller is not None:
            controller.reconfigure(cs.reconfigured_controller(controller.settings, now))
        if changed:
            log.info("dynamic broker configs changed: %s", sorted(changed))
        for hook in self.reconfigure_hooks:
            hook(cfg)

    # --- topics ----------------------------------------------------------

    def topic_log_config(self, name: str) -> LogConfig:
        """The effective log config of a topic."""
        return self.logs.default_config.with_overrides(self.topic_configs.of(name))

    def topic_deleted(self, name: str) -> None:
        """The controller deleted the topic (an UpdateMetadata dropped its partitions):
        forget its config overrides, and the group coordinator drops every group's
        offsets of it (Kafka's GroupCoordinator.onPartitionsDeleted)."""
        self.metadata.drop_configs(name)
        for callback in self._on_topic_deleted:
            callback(name)

    # --- log maintenance (kt.broker.log_maintenance) ---------------------

    def start_background_tasks(self) -> None:
        """Start the periodic log maintenance (and remember the loop, for failures
        found off it)."""
        self._loop = asyncio.get_running_loop()
        self.maintenance.start_background_tasks()

    async def run_retention(self, now_ms: int | None = None) -> list[RetentionResult]:
        """One retention pass over every partition (see LogMaintenance)."""
        return await self.maintenance.run_retention(now_ms)

    def start_replication_tasks(self) -> None:
        """Start the ISR expiration task."""
        self.maintenance.start_replication_tasks()

    async def stop_replication_tasks(self) -> None:
        """Stop the ISR expiration task."""
        await self.maintenance.stop_replication_tasks()

    async def stop_background_tasks(self) -> None:
        """Stop the periodic log maintenance."""
        await self.maintenance.stop_background_tasks()


def _once_per_topic(
    refresh: Callable[[str], Awaitable[dict[str, str]]],
) -> Callable[[str], Awaitable[object]]:
    """`refresh` for the first replica of each topic a LeaderAndIsr creates here:
    later ones find the overrides current (the config manager follows changes)."""
    known: set[str] = set()

    async def fetch(topic: str) -> object:
        if topic not in known:
            known.add(topic)
            await refresh(topic)
        return None

    return fetch
