"""The broker's log cleaner: compaction of `cleanup.policy=compact` logs in the
background (Kafka's LogCleaner, CleanerThread and LogCleanerManager).

`log.cleaner.threads` cleaner loops run as asyncio tasks, each with its own worker
thread and offset map (`log.cleaner.dedupe.buffer.size` split between them). A loop:

1. on the event loop: picks the dirtiest eligible log (`kt.storage.cleaner.CleanPlan`:
   dirty ratio above `min.cleanable.dirty.ratio`, or due by `max.compaction.lag.ms`;
   failing those, a log whose tombstones' delete horizon has passed), claims it with
   the log's maintenance guard (`try_begin_maintenance("compaction")`, which
   retention and truncation respect) and opens its segment files;
2. in its worker thread: maps the dirty keys and writes the `.cleaned` segments
   (reading sealed segments through its own descriptors; appends and fetches go on);
3. back on the event loop, with no await in between: checks the replaced segments
   are unchanged and swaps the cleaned ones in (`PartitionLog.replace_segments`),
   then writes `cleaner-offset-checkpoint` (the new first dirty offset) from the
   worker thread;
4. sleeps `log.cleaner.backoff.ms` when nothing was eligible.

All PartitionLog state is touched on the event loop only; the worker never mutates
a live segment. A partition whose cleaning throws is marked uncleanable (logged,
listed by `describe()`) and skipped until the broker restarts; a failure during the
swap is a storage error and takes the partition offline like any other.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from kt.storage.checkpoint import TopicPartition, read_offset_checkpoint, write_offset_checkpoint
from kt.storage.cleaner import (
    Cleaner,
    CleaningAbortedError,
    CleanPlan,
    CleanStats,
    commit,
    discard,
    plan_cleaning,
)
from kt.storage.errors import StorageError
from kt.storage.log_files import CLEANER_CHECKPOINT_FILE
from kt.storage.offset_map import capacity_for

if TYPE_CHECKING:
    from kt.broker.log_manager import LogManager
    from kt.broker.partition import Partition
    from kt.broker.replica_manager import ReplicaManager

log = logging.getLogger("kt.broker.log_cleaner")

MAINTENANCE_KIND = "compaction"


@dataclass(frozen=True, slots=True)
class CleanerSettings:
    """The `log.cleaner.*` settings (Kafka's defaults)."""

    enabled: bool = True
    threads: int = 1
    dedupe_buffer_size: int = 128 * 1024 * 1024
    load_factor: float = 0.9
    backoff_ms: int = 15_000


@dataclass(slots=True)
class Uncleanable:
    """A partition the cleaner gave up on until restart, and why."""

    log_dir: str
    reason: str
    since_ms: int


class LogCleaner:
    """The cleaner threads of one broker: the partitions it hosts (`replicas`), the
    log directories they live in (`logs`), and the `log.cleaner.*` settings."""

    def __init__(
        self, settings: CleanerSettings, replicas: ReplicaManager, logs: LogManager
    ) -> None:
        self.replicas = replicas
        self.logs = logs
        self.enabled = settings.enabled
        self.threads = max(1, settings.threads)
        self.dedupe_buffer_size = settings.dedupe_buffer_size
        self.load_factor = settings.load_factor
        self.backoff_s = settings.backoff_ms / 1000
        self.map_capacity = capacity_for(
            max(1, self.dedupe_buffer_size // self.threads), self.load_factor
        )
        self.checkpoints: dict[TopicPartition, int] = {}
        self.in_progress: set[TopicPartition] = set()
        self.uncleanable: dict[TopicPartition, Uncleanable] = {}
        # Latest delete horizon left in each log by its last cleaning (Kafka's
        # latestDeleteHorizon): a log is re-cleaned once it passes, to drop tombstones.
        self.delete_horizons: dict[TopicPartition, int] = {}
        self.last_stats: dict[TopicPartition, CleanStats] = {}
        self.rounds = 0
        self._abort = threading.Event()
        self._stopping: asyncio.Event | None = None
        self._tasks: list[asyncio.Task[None]] = []
        self._executors: list[ThreadPoolExecutor] = []
        self._checkpoint_lock = threading.Lock()

    # --- lifecycle ---------------------------------------------------------

    async def start(self) -> None:
        """Read the cleaner checkpoints and start the cleaner loops."""
        if not self.enabled:
            log.warning("log.cleaner.enable=false: compacted topics will not be cleaned")
            return
        self._load_checkpoints()
        self._abort.clear()
        self._stopping = asyncio.Event()
        loop = asyncio.get_running_loop()
        for i in range(self.threads):
            executor = ThreadPoolExecutor(1, thread_name_prefix=f"kt-log-cleaner-thread-{i}")
            self._executors.append(executor)
            self._tasks.append(loop.create_task(self._run(i, executor)))

    async def stop(self) -> None:
        """Abort running cleanings (their `.cleaned` files are removed) and stop."""
        self._abort.set()
        if self._stopping is not None:
            self._stopping.set()
        for task in self._tasks:
            try:
                await task
            except (asyncio.CancelledError, Exception):
                log.exception("cleaner loop failed while stopping")
        self._tasks.clear()
        for executor in self._executors:
            executor.shutdown(wait=True)
        self._executors.clear()

    async def _run(self, index: int, executor: ThreadPoolExecutor) -> None:
        cleaner = Cleaner(self.map_capacity, self._abort)
        stopping = self._stopping
        assert stopping is not None
        while not stopping.is_set():
            try:
                cleaned = await self.clean_filthiest(cleaner, executor)
            except Exception:
                log.exception("log cleaner thread %d: unexpected error", index)
                cleaned = False
            if not cleaned and not stopping.is_set():
                try:
                    await asyncio.wait_for(stopping.wait(), self.backoff_s)
                except TimeoutError:
                    pass

    # --- one round -----------------------------------------------------------

    async def clean_filthiest(
        self, cleaner: Cleaner, executor: ThreadPoolExecutor | None = None
    ) -> bool:
        """Clean the dirtiest eligible log once; False when none was eligible."""
        now = int(time.time() * 1000)
        chosen = self._grab_filthiest(now)
        if chosen is None:
            return False
        tp, part, plan = chosen
        plog = part.log
        loop = asyncio.get_running_loop()
        try:
            plan.open()
            try:
                result = await loop.run_in_executor(executor, cleaner.clean, plan)
            finally:
                plan.close()
            gone = self.replicas.get(tp) is not part
            if gone or part.offline or self._abort.is_set():
                discard(result)
                return True
            try:
                swapped = commit(plog, result)
            except Exception as exc:
                self._mark_uncleanable(tp, exc)
                self.replicas.on_storage_error(part, exc)
                return True
            if not swapped:
                log.info("%s: the log changed during cleaning; will retry", tp)
                return True
            stats = result.stats
            self.rounds += 1
            self.last_stats[tp] = stats
            self.checkpoints[tp] = result.end_offset
            horizon = stats.max_delete_horizon_ms
            if horizon is not None and horizon > now:
                self.delete_horizons[tp] = horizon
            else:
                self.delete_horizons.pop(tp, None)
            log.info(
                "cleaned %s: %d of %d records (%d of %d bytes) kept in %d segments up to "
                "offset %d, %d superseded, %d tombstones dropped, %d without key",
                tp, stats.records_kept, stats.records_read, stats.bytes_kept,
                stats.bytes_read, stats.segments, result.end_offset,
                stats.superseded_dropped, stats.tombstones_dropped, stats.keyless_dropped,
            )  # fmt: skip
            d = self.logs.dir_of.get(tp)
            if d is not None:
                entries = self._checkpoint_entries(d)
                await loop.run_in_executor(executor, self._write_checkpoint, d, entries)
        except CleaningAbortedError:
            log.info("%s: cleaning aborted", tp)
        except Exception as exc:
            if self.replicas.get(tp) is part and not part.offline:
                self._mark_uncleanable(tp, exc)
        finally:
            self.in_progress.discard(tp)
            plog.end_maintenance(MAINTENANCE_KIND)
        return True

    def _grab_filthiest(self, now: int) -> tuple[TopicPartition, Partition, CleanPlan] | None:
        """Kafka's grabFilthiestCompactedLog: the eligible log with the highest dirty
        ratio, else one whose tombstones are due for removal; claimed before return."""
        best: tuple[float, TopicPartition, Partition, CleanPlan] | None = None
        for part in self.replicas:
            tp = part.tp
            plog = part.log
            if (
                part.offline
                or not plog.config.compact
                or tp in self.in_progress
                or tp in self.uncleanable
                or plog.maintenance is not None
            ):
                continue
            try:
                plan = plan_cleaning(
                    plog,
                    first_dirty_offset=self.checkpoints.get(tp),
                    now_ms=now,
                    last_stable_offset=part.last_stable_offset(),
                )
            except (OSError, StorageError) as exc:
                self._mark_uncleanable(tp, exc)
                continue
            if plan.eligible:
                score = 1.0 + plan.cleanable_ratio
            elif self.delete_horizons.get(tp, now + 1) <= now:
                score = 0.0
            else:
                continue
            if best is None or score > best[0]:
                best = (score, tp, part, plan)
        if best is None:
            return None
        _score, tp, part, plan = best
        if not part.log.try_begin_maintenance(MAINTENANCE_KIND):
            return None
        self.in_progress.add(tp)
        return tp, part, plan

    def _mark_uncleanable(self, tp: TopicPartition, exc: BaseException) -> None:
        d = self.logs.dir_of.get(tp)
        self.uncleanable[tp] = Uncleanable(
            str(d) if d is not None else "", f"{type(exc).__name__}: {exc}", int(time.time() * 1000)
        )
        log.error("cleaning %s failed, marking it uncleanable until restart: %s", tp, exc)

    # --- checkpoints -------------------------------------------------------------

    def _load_checkpoints(self) -> None:
        for d in self.logs.log_dirs:
            path = Path(d) / CLEANER_CHECKPOINT_FILE
            if not path.exists():
                continue
            try:
                self.checkpoints.update(read_offset_checkpoint(path, allow_empty=True))
            except (OSError, StorageError) as exc:
                # Kafka resets each partition's cleaning to its log start then.
                log.error("ignoring unreadable cleaner checkpoint: %s", exc)

    def _checkpoint_entries(self, d: Path) -> dict[TopicPartition, int]:
        dir_of = self.logs.dir_of
        return {
            tp: offset
            for tp, offset in sorted(self.checkpoints.items())
            if dir_of.get(tp) == d and tp in self.replicas
        }

    def _write_checkpoint(self, d: Path, entries: dict[TopicPartition, int]) -> None:
        with self._checkpoint_lock:
            write_offset_checkpoint(Path(d) / CLEANER_CHECKPOINT_FILE, entries)

    # --- reporting ------------------------------------------------------------------

    def uncleanable_partitions(self) -> dict[str, list[TopicPartition]]:
        """Uncleanable partitions by log directory (for `kt log-dirs describe`)."""
        out: dict[str, list[TopicPartition]] = {}
        for tp, info in sorted(self.uncleanable.items()):
            out.setdefault(info.log_dir, []).append(tp)
        return out

    def describe(self) -> dict[str, object]:
        """The cleaner's state, JSON-ready."""
        return {
            "enabled": self.enabled,
            "threads": self.threads,
            "map_capacity": self.map_capacity,
            "rounds": self.rounds,
            "in_progress": [str(tp) for tp in sorted(self.in_progress)],
            "uncleanable": {
                str(tp): {"log_dir": u.log_dir, "reason": u.reason, "since_ms": u.since_ms}
                for tp, u in sorted(self.uncleanable.items())
            },
            "checkpoints": {str(tp): o for tp, o in sorted(self.checkpoints.items())},
        }
