"""The Broker: wires configuration, logs, partitions, coordinators and the network.

Everything runs on one asyncio event loop; partition operations are synchronous
file I/O on page-cached files, so no locks are needed between requests.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kt.broker import faults
from kt.broker.config import DEFAULTS, BrokerConfig, Listener
from kt.broker.groups import GroupCoordinator
from kt.broker.log_cleaner import LogCleaner
from kt.broker.log_manager import LogManager
from kt.broker.metadata_store import MetadataStore, TopicInfo, topic_name_problem
from kt.broker.partition import Partition
from kt.broker.producer_ids import ProducerIdManager
from kt.broker.replica_manager import ReplicaManager
from kt.broker.topic_configs import validate_topic_configs
from kt.protocol import ErrorCode
from kt.storage.checkpoint import TopicPartition
from kt.storage.log_config import LogConfig
from kt.storage.partition_metadata import random_uuid, uuid_from_str
from kt.storage.retention import RetentionPlan, RetentionResult

log = logging.getLogger("kt.broker")

CONSUMER_OFFSETS = "__consumer_offsets"


@dataclass(slots=True)
class TopicError(Exception):
    """A topic operation refused with a Kafka error code."""

    code: ErrorCode
    message: str


class Broker:
    """One broker: its topics, replica manager, coordinators and background tasks.

    The services are explicit attributes, built here and started/stopped by the
    server (`kt.broker.server`) in a fixed order.
    """

    def __init__(self, config: BrokerConfig) -> None:
        self.config = config
        self.node_id = config.node_id
        # Test-only I/O fault injection; does nothing unless its variable is set.
        faults.install_from_env()
        self.logs = LogManager(config.log_dirs, config.node_id, config.log_config)
        self.logs.failure_listener = self._dir_failure_from_any_thread
        self._loop: asyncio.AbstractEventLoop | None = None
        self.metadata = MetadataStore.load(self.logs.log_dirs[0])
        # Owns the hosted partitions; every request resolves its partitions through it.
        self.replica_manager = ReplicaManager(config.node_id, self.logs)
        self.cluster_id = ""
        self.started_ms = int(time.time() * 1000)
        self._tasks: list[asyncio.Task[None]] = []
        self._on_topic_deleted: list[Callable[[str], None]] = []
        self.stopping = False
        # Listeners as bound (port 0 resolved), set by the server once listening.
        self.bound_listeners: list[Listener] = []
        self.producer_ids = ProducerIdManager(self.metadata)
        # Loads __consumer_offsets when the server starts it.
        self.group_coordinator = GroupCoordinator.for_broker(self)
        self.log_cleaner = LogCleaner(self)

    # --- lifecycle -------------------------------------------------------

    def open(self) -> None:
        """Lock the log dirs, load every partition (recovering if needed)."""
        self.cluster_id = self.logs.lock_and_validate(
            self.config.cluster_id or self.metadata.cluster_id
        )
        if self.metadata.cluster_id != self.cluster_id:
            self.metadata.cluster_id = self.cluster_id
            self.metadata.save()
        configs = {name: t.configs for name, t in self.metadata.topics.items()}
        self.logs.load_logs(configs, self.config.get_int("num.recovery.threads.per.data.dir"))
        for tp, plog in self.logs.logs.items():
            info = self.metadata.topics.get(tp.topic)
            if info is None:
                info = self._adopt_topic_from_disk(tp)
            self.replica_manager.create_partition(tp, info.topic_id, plog)
        # Partitions the metadata knows but whose directory is missing are recreated.
        for info in self.metadata.topics.values():
            for p in range(info.partitions):
                tp = TopicPartition(info.name, p)
                if tp in self.replica_manager:
                    continue
                if self.logs.offline_dirs:
                    # Kafka's getOrCreateLog(isNew=false): the log may be in an offline
                    # directory, so it is not recreated empty elsewhere.
                    log.error(
                        "no log for %s-%d: not recreated while log dirs %s are offline",
                        tp.topic, tp.partition, ", ".join(map(str, self.logs.offline_dirs)),
                    )  # fmt: skip
                    continue
                self._create_partition(info, p)

    def _adopt_topic_from_disk(self, tp: TopicPartition) -> TopicInfo:
        """A partition directory without metadata (e.g. a copied Kafka log dir)."""
        stored = self.logs.topic_id_on_disk(tp)
        topic_id = uuid_from_str(stored) if stored else random_uuid()
        count = 1 + max(t.partition for t in self.logs.logs if t.topic == tp.topic)
        info = TopicInfo(
            tp.topic, topic_id, count, 1, {}, {p: [self.node_id] for p in range(count)}
        )
        self.metadata.add(info)
        return info

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
            out.append(Listener(adv.name, adv.host, bound.port))
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

    def config_given(self) -> dict[str, str]:
        """Server settings set explicitly (config file or overrides), not kt's defaults."""
        return {k: v for k, v in self.config.props.items() if DEFAULTS.get(k) != v}

    # --- topics ----------------------------------------------------------

    def topic_log_config(self, name: str) -> LogConfig:
        """The effective log config of a topic."""
        info = self.metadata.topics.get(name)
        return self.config.log_config.with_overrides(info.configs if info else {})

    def create_topic(
        self,
        name: str,
        partitions: int,
        replication_factor: int = 1,
        configs: dict[str, str] | None = None,
        *,
        validate_only: bool = False,
        assignment: dict[int, list[int]] | None = None,
    ) -> TopicInfo:
        """Create a topic (TopicError on a bad name, count, factor, assignment or
        config), with Kafka's error codes and messages."""
        problem = topic_name_problem(name)
        if problem:
            raise TopicError(ErrorCode.INVALID_TOPIC_EXCEPTION, problem)
        if name in self.metadata.topics:
            raise TopicError(ErrorCode.TOPIC_ALREADY_EXISTS, f"Topic '{name}' already exists.")
        collides = self.colliding_topic(name)
        if collides is not None:
            raise TopicError(
                ErrorCode.INVALID_TOPIC_EXCEPTION,
                f"Topic '{name}' collides with existing topic: {collides}",
            )
        if assignment is None:
            if partitions <= 0:
                raise TopicError(
                    ErrorCode.INVALID_PARTITIONS,
                    "Number of partitions was set to an invalid non-positive value.",
                )
            if replication_factor <= 0:
                raise TopicError(
                    ErrorCode.INVALID_REPLICATION_FACTOR,
                    "Replication factor must be larger than 0, or -1 to use the default value.",
                )
            if replication_factor > 1:
                raise TopicError(
                    ErrorCode.INVALID_REPLICATION_FACTOR,
                    f"Unable to replicate the partition {replication_factor} time(s): The "
                    f"target replication factor of {replication_factor} cannot be reached "
                    "because only 1 broker(s) are registered.",
                )
            assignment = {p: [self.node_id] for p in range(partitions)}
        else:
            partitions = len(assignment)
            replication_factor = len(next(iter(assignment.values()), [self.node_id]))
        try:
            configs = validate_topic_configs(configs or {})
        except ValueError as exc:
            raise TopicError(ErrorCode.INVALID_CONFIG, str(exc)) from None
        info = TopicInfo(
            name,
            random_uuid(),
            partitions,
            replication_factor,
            configs,
            {p: list(r) for p, r in assignment.items()},
        )
        if validate_only:
            return info
        self.metadata.add(info)
        for p in range(partitions):
            self._create_partition(info, p)
        log.info("created topic %s with %d partitions", name, partitions)
        return info

    def colliding_topic(self, name: str) -> str | None:
        """An existing topic whose name differs from `name` only in '.' versus '_'
        (their metric names would collide, so Kafka refuses the pair)."""
        if "." not in name and "_" not in name:
            return None
        unified = name.replace(".", "_")
        for other in self.metadata.topics:
            if other != name and other.replace(".", "_") == unified:
                return other
        return None

    def _create_partition(self, info: TopicInfo, p: int) -> Partition:
        tp = TopicPartition(info.name, p)
        plog = self.logs.create(tp, info.topic_id, info.configs)
        return self.replica_manager.create_partition(tp, info.topic_id, plog)

    def add_partitions(
        self,
        name: str,
        total: int,
        *,
        validate_only: bool = False,
        assignments: list[list[int]] | None = None,
    ) -> None:
        """Grow a topic to `total` partitions (optionally with the new partitions'
        replica lists)."""
        info = self.metadata.topics.get(name)
        if info is None:
            raise TopicError(
                ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"Topic '{name}' does not exist."
            )
        if total == info.partitions:
            raise TopicError(
                ErrorCode.INVALID_PARTITIONS, f"Topic already has {total} partition(s)."
            )
        if total < info.partitions:
            raise TopicError(
                ErrorCode.INVALID_PARTITIONS,
                f"The topic {name} currently has {info.partitions} partition(s); {total} "
                "would not be an increase.",
            )
        additional = total - info.partitions
        if assignments is not None:
            if len(assignments) != additional:
                raise TopicError(
                    ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                    f"Attempted to add {additional} additional partition(s), but only "
                    f"{len(assignments)} assignment(s) were specified.",
                )
            for replicas in assignments:
                problem = self.replica_assignment_problem(replicas, info.replication_factor)
                if problem:
                    raise TopicError(ErrorCode.INVALID_REPLICA_ASSIGNMENT, problem)
        if validate_only:
            return
        old = info.partitions
        info.partitions = total
        for p in range(old, total):
            info.assignment[p] = [self.node_id]
        self.metadata.save()
        for p in range(old, total):
            self._create_partition(info, p)

    def replica_assignment_problem(self, replicas: list[int], expected: int | None) -> str | None:
        """Why a manual replica list is unusable here (Kafka's messages), or None."""
        if not replicas:
            return "The manual partition assignment includes an empty replica list."
        seen: set[int] = set()
        for broker_id in sorted(replicas):
            if broker_id != self.node_id:
                return (
                    f"The manual partition assignment includes broker {broker_id}, but no "
                    "such broker is registered."
                )
            if broker_id in seen:
                return (
                    f"The manual partition assignment includes the broker {broker_id} more "
                    "than once."
                )
            seen.add(broker_id)
        if expected is not None and len(replicas) != expected:
            return (
                f"The manual partition assignment includes a partition with {len(replicas)} "
                f"replica(s), but this is not consistent with previous partitions, which "
                f"have {expected} replica(s)."
            )
        return None

    def delete_topic(self, name: str) -> None:
        """Delete a topic and its partitions' data."""
        info = self.metadata.topics.get(name)
        if info is None:
            raise TopicError(
                ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"Topic '{name}' does not exist."
            )
        if info.internal:
            raise TopicError(ErrorCode.INVALID_REQUEST, f"Topic '{name}' is internal.")
        self.metadata.remove(name)
        for p in range(info.partitions):
            tp = TopicPartition(name, p)
            self.replica_manager.remove_partition(tp)
            self.logs.delete(tp)
        for callback in self._on_topic_deleted:
            callback(name)

    def on_topic_deleted(self, callback: Callable[[str], None]) -> None:
        """Register a callback run after a topic is deleted (coordinators clean up)."""
        self._on_topic_deleted.append(callback)

    def alter_topic_configs(self, name: str, configs: dict[str, str]) -> None:
        """Replace a topic's config overrides (validated) and apply them to its logs."""
        info = self.metadata.topics.get(name)
        if info is None:
            raise TopicError(
                ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"Topic '{name}' does not exist."
            )
        try:
            configs = validate_topic_configs(configs)
        except ValueError as exc:
            raise TopicError(ErrorCode.INVALID_CONFIG, str(exc)) from None
        info.configs = dict(configs)
        self.metadata.save()
        self.logs.update_config(name, info.configs)

    def auto_create_enabled(self) -> bool:
        """True when producers and metadata requests may create topics."""
        return self.config.get_bool("auto.create.topics.enable")

    def maybe_auto_create(self, name: str) -> TopicInfo | None:
        """Create `name` with the default partition count if auto-creation is on."""
        if name in self.metadata.topics:
            return self.metadata.topics[name]
        if not self.auto_create_enabled() or topic_name_problem(name):
            return None
        try:
            return self.create_topic(name, self.config.get_int("num.partitions"))
        except TopicError:
            return None

    def ensure_internal_topic(
        self, name: str, partitions: int, configs: dict[str, str]
    ) -> TopicInfo:
        """Create an internal topic (e.g. __consumer_offsets) on first use."""
        info = self.metadata.topics.get(name)
        if info is not None:
            return info
        info = TopicInfo(name, random_uuid(), partitions, 1, dict(configs),
                         {p: [self.node_id] for p in range(partitions)})  # fmt: skip
        self.metadata.add(info)
        for p in range(partitions):
            self._create_partition(info, p)
        return info

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

    async def stop_background_tasks(self) -> None:
        """Cancel the periodic tasks."""
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
