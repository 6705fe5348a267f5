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
from typing import Any

from kt.broker import faults
from kt.broker.config import BrokerConfig, Listener
from kt.broker.controller.controller import KafkaController
from kt.broker.controller.links import PeerLinks
from kt.broker.coordinator_leadership import CoordinatorLeadership
from kt.broker.dispatcher import RequestDispatcher
from kt.broker.fetch_sessions import FetchSessionCache
from kt.broker.groups import CoordinatorSettings, GroupCoordinator
from kt.broker.groups.offsets_log import LogRecordStore
from kt.broker.log_cleaner import LogCleaner
from kt.broker.log_manager import LogManager
from kt.broker.membership import ClusterMembership, MembershipError
from kt.broker.metadata.cache import MetadataCache
from kt.broker.metadata.store import CoordinationStore
from kt.broker.metadata.topics import TopicsView
from kt.broker.metadata_store import CONSUMER_OFFSETS, TRANSACTION_STATE
from kt.broker.partition import Partition
from kt.broker.producer_ids import ProducerIdManager
from kt.broker.replica_manager import ReplicaManager
from kt.broker.replication.alter_log_dirs import ReplicaAlterLogDirsManager
from kt.broker.replication.quota import ReplicationThrottles
from kt.broker.services import HandlerServices, NodeState
from kt.broker.topic_admin import TopicAdmin
from kt.broker.topic_config_sync import TopicConfigs
from kt.broker.topic_creation import TopicCreator
from kt.broker.transactions.coordinator import TxnSettings
from kt.broker.transactions.service import TransactionService
from kt.broker.transactions.state_log import TransactionLogStore
from kt.storage.log_config import LONG_MAX, LogConfig
from kt.storage.partition_metadata import random_uuid, uuid_from_str
from kt.storage.retention import RetentionPlan, RetentionResult

log = logging.getLogger("kt.broker")


class Broker:
    """One broker: builds its services (see the module docstring) and runs its
    periodic log maintenance. The services are explicit attributes."""

    def __init__(self, config: BrokerConfig, store: CoordinationStore) -> None:
        self.config = config
        self.node_id = config.node_id
        # Test-only I/O fault injection; does nothing unless its variable is set.
        faults.install_from_env()
        self.node = node = NodeState(config.node_id, config.listeners[0].name)
        self.logs = logs = LogManager(config.log_dirs, config.node_id, config.log_config)
        self.logs.failure_listener = self._dir_failure_from_any_thread
        self._loop: asyncio.AbstractEventLoop | None = None
        # What the controller said; topics as the controller described them (plus
        # their configs).
        cache = MetadataCache()
        self.metadata = topics = TopicsView(cache)
        # The membership is built below: the closures here reach it once it exists.
        self.topic_configs = TopicConfigs(
            config,
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
            txn_verification_enabled=config.transaction_partition_verification_enable,
        )
        # Incremental fetch sessions (KIP-227) of followers and consumers.
        self.fetch_sessions = FetchSessionCache(
            config.get_int("max.incremental.fetch.session.cache.slots")
        )
        self.started_ms = int(time.time() * 1000)
        self._tasks: list[asyncio.Task[None]] = []
        self._replication_tasks: list[asyncio.Task[None]] = []
        self._on_topic_deleted: list[Callable[[str], None]] = []
        # Listeners as bound (port 0 resolved), set by the server once listening.
        self.bound_listeners: list[Listener] = []
        self.producer_ids = ProducerIdManager()
        self.topic_creator = creator = TopicCreator(config, topics, lambda: self.membership.admin())
        # Links to any broker (itself through the dispatcher, built last).
        peers = PeerLinks(config.node_id, node.listener_name, cache, lambda: self.dispatcher)
        # One listener routes leadership of internal topics to their coordinators.
        leadership = CoordinatorLeadership()
        rm.leadership_listeners.append(leadership.on_leadership)
        rm.stop_listeners.append(leadership.on_stopped)
        # Loads __consumer_offsets when the server starts it.
        self.group_coordinator = groups = GroupCoordinator(
            CoordinatorSettings.from_config(config),
            LogRecordStore(rm, topics, config, creator),
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
            TxnSettings.from_config(config),
            TransactionLogStore(rm, topics, config, creator),
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
        self.log_cleaner = LogCleaner(config.props, rm, logs)
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
        rm.log_dir_mover = self.log_dir_mover
        # This broker as a member of its cluster (the single node: of its own).
        self.membership = ClusterMembership(
            store,
            config=config,
            node=node,
            replicas=rm,
            topics=topics,
            topic_configs=self.topic_configs,
            producer_ids=self.producer_ids,
            throttles=self.replication_throttles,
            peers=peers,
            advertised_listeners=self.advertised_listeners,
            apply_dynamic_configs=self.reconfigure,
        )
        self.services = HandlerServices(
            node=node,
            config=config,
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
        rate = self.config.replica_alter_log_dirs_io_max_bytes_per_second
        return None if rate >= LONG_MAX else float(rate)

    def reconfigure(self, defaults: dict[str, str], own: dict[str, str]) -> None:
        """The dynamic broker configs (/config/brokers/<default>, /config/brokers/<id>)
        were read or changed: apply them live (Kafka's BrokerConfigHandler). The one
        place dynamic settings reach the services."""
        changed = self.config.apply_dynamic(defaults, own)
        cfg = self.config
        self.replication_throttles.apply_broker_configs(cfg.dynamic_defaults, cfg.dynamic_own)
        self.replica_manager.txn_verification_enabled = (
            cfg.transaction_partition_verification_enable
        )
        if changed:
            self.logs.reconfigure_defaults(cfg.effective_log_config(), self.topic_configs.of)
        controller = self.membership.joined_controller()
        if controller is not None:
            unclean = cfg.unclean_leader_election_enable
            if unclean and not controller.settings.unclean_leader_election_default:
                controller.enable_default_unclean_leader_election()
            controller.settings.unclean_leader_election_default = unclean
        if changed:
            log.info("dynamic broker configs changed: %s", sorted(changed))

    # --- topics ----------------------------------------------------------

    def topic_log_config(self, name: str) -> LogConfig:
        """The effective log config of a topic."""
        return self.logs.default_config.with_overrides(self.topic_configs.of(name))

    def topic_deleted(self, name: str) -> None:
        """Run the deletion callbacks (the controller deleted the topic's replicas)."""
        self.metadata.drop_configs(name)
        for callback in self._on_topic_deleted:
            callback(name)

    # --- background tasks ------------------------------------------------

    def start_background_tasks(self) -> None:
        """Periodic checkpoints (recovery points, log start offsets, high watermarks),
        written from a worker thread so their fsyncs never stall the event loop."""
        loop = asyncio.get_running_loop()
        self._loop = loop
        cfg = self.config
        for interval_key, plan in (
            ("log.flush.offset.checkpoint.interval.ms", self.logs.recovery_point_plan),
            ("log.flush.start.offset.checkpoint.interval.ms", self.logs.log_start_offset_plan),
            ("replica.high.watermark.checkpoint.interval.ms", self.logs.high_watermark_plan),
        ):
            self._tasks.append(
                loop.create_task(
                    _every_in_thread(cfg.get_int(interval_key) / 1000, plan, self.logs.write_plan)
                )
            )
        self._tasks.append(loop.create_task(_every(1.0, self._flush_by_time)))
        self._tasks.append(
            loop.create_task(
                _every_in_thread(1.0, self.logs.take_expired_deletions, self.logs.remove_dirs)
            )
        )
        self._tasks.append(loop.create_task(_retention_schedule(self)))
        # Moves between log dirs interrupted by the last stop resume.
        self.log_dir_mover.start()

    def _flush_by_time(self) -> None:
        """Each second: fsync rolled segments (advancing recovery points), flush logs
        past their flush.ms, and unlink segment files whose deletion delay expired."""
        now = int(time.time() * 1000)
        for part in self.replica_manager:
            if part.offline:
                continue
            plog = part.log
            try:
                plog.flush_rolled()
                if now - plog.last_flush_ms >= plog.config.flush_ms:
                    plog.flush()
                plog.delete_expired_files(now)
            except OSError as exc:
                self.replica_manager.on_storage_error(part, exc)

    async def run_retention(self, now_ms: int | None = None) -> list[RetentionResult]:
        """One retention pass over every partition (Kafka's LogManager.cleanupLogs):
        see `PartitionLog.delete_old_segments` for the rules.

        Per partition it claims the log (`try_begin_maintenance("retention")`; a log
        the cleaner holds is skipped until the next pass), plans (the log start
        offsets move, in memory), then — when any moved — writes the
        log-start-offset checkpoint synchronously (from a worker thread, but before
        going on), and only then renames the segments `.deleted`; producer snapshots
        below the new log starts are deleted. A restart, even after kill -9, thus
        never re-exposes deleted data.

        Where kt differs from Kafka: Kafka's retention task skips compacted logs and
        the cleaner threads run their deleteOldSegments; kt runs every log's here,
        under the same per-partition claim the cleaner takes.
        """
        now = int(time.time() * 1000) if now_ms is None else now_ms
        claimed: list[Partition] = []
        plans: list[tuple[Partition, RetentionPlan]] = []
        results: list[RetentionResult] = []
        try:
            for part in self.replica_manager:
                if part.offline or not part.log.try_begin_maintenance("retention"):
                    continue
                claimed.append(part)
                try:
                    plan = part.log.plan_retention(now)
                except OSError as exc:
                    self.replica_manager.on_storage_error(part, exc)
                    continue
                if plan.future_timestamps:
                    log.warning(
                        "%s: time retention blocked by segments with future timestamps "
                        "(base offset, largest timestamp): %s; now is %d",
                        part.tp, plan.future_timestamps, now,
                    )  # fmt: skip
                if plan.rolled and part.producer_state is not None:
                    # As on any roll: a snapshot at the new segment's base.
                    part.producer_state.take_snapshot(part.log.log_end_offset)
                if not plan.empty:
                    plans.append((part, plan))
            if any(plan.log_start_moved for _, plan in plans):
                checkpoint = self.logs.log_start_offset_plan()
                await asyncio.get_running_loop().run_in_executor(
                    None, self.logs.write_plan, checkpoint
                )
            for part, plan in plans:
                if (
                    self.replica_manager.get(part.tp) is not part
                    or part.offline
                    or self.logs.get(part.tp) is not part.log
                ):
                    continue  # deleted or failed while the checkpoint was written
                try:
                    result = part.log.apply_retention(plan)
                    psm = part.producer_state
                    if psm is not None and result.deleted:
                        psm.on_log_start_offset_incremented(result.log_start_offset)
                        psm.delete_snapshots_below(result.log_start_offset)
                except OSError as exc:
                    self.replica_manager.on_storage_error(part, exc)
                    continue
                results.append(result)
                log.info(
                    "%s: retention deleted %d segments (%d bytes; %s), log start offset %d",
                    part.tp, result.deleted_segments, result.deleted_bytes,
                    ", ".join(sorted({d.reason.value for d in result.deleted})),
                    result.log_start_offset,
                )  # fmt: skip
        finally:
            for part in claimed:
                part.log.end_maintenance("retention")
        return results

    def start_replication_tasks(self) -> None:
        """Kafka's isr-expiration task: every replica.lag.time.max.ms / 2, led
        partitions drop followers that stopped catching up."""
        lag = self.config.get_int("replica.lag.time.max.ms")
        rm = self.replica_manager
        self._replication_tasks.append(
            asyncio.get_running_loop().create_task(
                _every(lag / 2000, lambda: rm.maybe_shrink_isrs(int(time.time() * 1000), lag))
            )
        )

    async def stop_replication_tasks(self) -> None:
        """Stop the replication tasks."""
        for t in self._replication_tasks:
            t.cancel()
        for t in self._replication_tasks:
            try:
                await t
            except (asyncio.CancelledError, Exception):
                pass
        self._replication_tasks.clear()

    async def stop_background_tasks(self) -> None:
        """Cancel the periodic tasks and the copiers of moves between log dirs
        (their future logs stay, and resume at the next start)."""
        await self.log_dir_mover.stop()
        for t in self._tasks:
            t.cancel()
        for t in self._tasks:
            try:
                await t
            except (asyncio.CancelledError, Exception):
                pass
        self._tasks.clear()


async def _retention_schedule(broker: Broker) -> None:
    """Retention passes: the first after log.initial.task.delay.ms, then every
    log.retention.check.interval.ms (Kafka's kafka-log-retention task)."""
    cfg = broker.config
    await asyncio.sleep(cfg.get_int("log.initial.task.delay.ms") / 1000)
    while True:
        try:
            await broker.run_retention()
        except Exception:
            log.exception("retention pass failed")
        await asyncio.sleep(cfg.get_int("log.retention.check.interval.ms") / 1000)


async def _every_in_thread(
    seconds: float, collect: Callable[[], Any], write: Callable[[Any], None]
) -> None:
    """Every `seconds`: `collect()` on the loop, then `write(result)` in a thread."""
    loop = asyncio.get_running_loop()
    while True:
        await asyncio.sleep(seconds)
        try:
            await loop.run_in_executor(None, write, collect())
        except Exception:
            log.exception("background task %s failed", getattr(write, "__name__", write))


async def _every(seconds: float, job: Callable[[], None]) -> None:
    while True:
        await asyncio.sleep(seconds)
        try:
            job()
        except Exception:
            log.exception("background task %s failed", getattr(job, "__name__", job))


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
