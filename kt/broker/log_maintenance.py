"""Log maintenance: the broker's periodic work on its logs.

Checkpoints (recovery points, log start offsets, high watermarks) written from a
worker thread so their fsyncs never stall the event loop; each second, rolled
segments flushed, logs past their flush.ms flushed and segment files whose deletion
delay expired unlinked; retention passes (Kafka's kafka-log-retention task); the
ISR expiration task of the partitions led here; and the copiers of moves between
log directories, resumed at start.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from kt.broker.log_manager import LogManager
    from kt.broker.partition import Partition
    from kt.broker.replica_manager import ReplicaManager
    from kt.broker.replication.alter_log_dirs import ReplicaAlterLogDirsManager
    from kt.broker.settings import MaintenanceSettings
    from kt.storage.retention import RetentionPlan, RetentionResult

log = logging.getLogger("kt.broker")


class LogMaintenance:
    """The periodic tasks over one broker's logs (see the module docstring)."""

    def __init__(
        self,
        settings: MaintenanceSettings,
        logs: LogManager,
        replicas: ReplicaManager,
        log_dir_mover: ReplicaAlterLogDirsManager,
    ) -> None:
        self.settings = settings
        self.logs = logs
        self.replicas = replicas
        self.log_dir_mover = log_dir_mover
        self._tasks: list[asyncio.Task[None]] = []
        self._replication_tasks: list[asyncio.Task[None]] = []

    def start_background_tasks(self) -> None:
        """Periodic checkpoints (recovery points, log start offsets, high watermarks),
        written from a worker thread so their fsyncs never stall the event loop."""
        loop = asyncio.get_running_loop()
        cfg = self.settings
        for interval_ms, plan in (
            (cfg.recovery_point_checkpoint_interval_ms, self.logs.recovery_point_plan),
            (cfg.log_start_offset_checkpoint_interval_ms, self.logs.log_start_offset_plan),
            (cfg.high_watermark_checkpoint_interval_ms, self.logs.high_watermark_plan),
        ):
            self._tasks.append(
                loop.create_task(_every_in_thread(interval_ms / 1000, plan, self.logs.write_plan))
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
        for part in self.replicas:
            if part.offline:
                continue
            plog = part.log
            try:
                plog.flush_rolled()
                if now - plog.last_flush_ms >= plog.config.flush_ms:
                    plog.flush()
                plog.delete_expired_files(now)
            except OSError as exc:
                self.replicas.on_storage_error(part, exc)

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
            for part in self.replicas:
                if part.offline or not part.log.try_begin_maintenance("retention"):
                    continue
                claimed.append(part)
                try:
                    plan = part.log.plan_retention(now)
                except OSError as exc:
                    self.replicas.on_storage_error(part, exc)
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
                    self.replicas.get(part.tp) is not part
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
                    self.replicas.on_storage_error(part, exc)
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
        lag = self.settings.replica_lag_time_max_ms
        rm = self.replicas
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


async def _retention_schedule(maintenance: LogMaintenance) -> None:
    """Retention passes: the first after log.initial.task.delay.ms, then every
    log.retention.check.interval.ms (Kafka's kafka-log-retention task)."""
    cfg = maintenance.settings
    await asyncio.sleep(cfg.initial_task_delay_ms / 1000)
    while True:
        try:
            await maintenance.run_retention()
        except Exception:
            log.exception("retention pass failed")
        await asyncio.sleep(cfg.retention_check_interval_ms / 1000)


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
