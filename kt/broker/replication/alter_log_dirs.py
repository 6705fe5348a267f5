"""Moves between this broker's log directories (Kafka's AlterReplicaLogDirs and its
ReplicaAlterLogDirsThread).

`alter(tp, dir)` starts a move: a *future* log of the partition is created in
the destination directory (`<topic>-<p>.<id>-future`) and a copier task copies
the current log into it batch by batch, with the same offsets and leader epochs
(follower appends), from the future's log end to the current's. Produce and
fetch keep using the current log all along; what is written meanwhile is copied
too. Once the future is at the current log's end the swap
(kt.broker.log_dir_swap) makes it the partition's log, in the same step on the
event loop, so no write can fall between the last copy and the swap.

The copier follows the current log as a follower follows its leader: when the
current log was truncated (this broker follows a new leader) the future is cut
where their leader epochs diverge; when retention or DeleteRecords moved the
current log's start past the future's end, the future restarts there.

Its copy rate is limited by `replica.alter.log.dirs.io.max.bytes.per.second`
(read at every chunk, so a new value applies at once), measured as Kafka's
replication quotas are (kt.broker.replication.quota).

As in Kafka: a destination that is not one of log.dirs is LOG_DIR_NOT_FOUND; an
offline destination or partition, or any offline directory when a future log
would be created, KAFKA_STORAGE_ERROR; a partition not hosted here is
REPLICA_NOT_AVAILABLE, and its destination is remembered for when it is created
(kt.broker.log_manager's preferred_dirs). A request for another directory while
a move runs cancels it (its future log is deleted) and starts the new one; a
request for the current directory just cancels it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import time
from collections.abc import Callable
from pathlib import Path

from kt.broker.errors import (
    InvalidTopicError,
    KafkaStorageError,
    LogDirNotFoundError,
    ReplicaNotAvailableError,
)
from kt.broker.log_dir_swap import SwapError, replace_current_with_future
from kt.broker.log_manager import LogManager
from kt.broker.partition import Partition, whole_batches
from kt.broker.replica_manager import NO_LEADER, ReplicaManager
from kt.broker.replication.quota import ReplicationQuota
from kt.storage.checkpoint import TopicPartition
from kt.storage.errors import OffsetOutOfRangeError, StorageError
from kt.storage.leader_epoch import UNDEFINED_EPOCH
from kt.storage.log import PartitionLog

log = logging.getLogger("kt.broker.alter_log_dirs")

#: bytes read from the current log per copy step (Kafka's replica.fetch.max.bytes)
CHUNK_BYTES = 1024 * 1024
#: copied bytes after which the future is flushed from a worker thread before the
#: swap, so the swap's own (loop-blocking) flush covers only a short tail
FLUSH_AHEAD_BYTES = 4 * 1024 * 1024
#: how long the copier waits when throttled or when it cannot swap yet
BACKOFF_S = 0.05
# Kafka's limit on a partition directory's name (KAFKA-4893).
MAX_DIR_NAME = 255


def future_replica(part: Partition, future: PartitionLog) -> Partition:
    """The future log as a replica with no role (Kafka keeps it in the Partition as
    its futureLog): its appends go through the follower path, so it keeps its own
    producer state and `.txnindex` entries as a follower's log does."""
    replica = Partition(
        part.tp, part.topic_id, future, NO_LEADER, -1, local_broker_id=part.local_broker_id
    )
    replica.load_producer_state()
    return replica


def truncate_diverged(current: PartitionLog, future: Partition) -> bool:
    """Cut the future log where it stopped being a prefix of the current log, as
    a follower truncates to its leader (by leader epoch). True when it cut."""
    flog = future.log
    leo = flog.log_end_offset
    latest = flog.leader_epoch_cache.latest_epoch
    if latest is None:
        target = min(leo, current.log_end_offset)
    else:
        epoch, end = current.leader_epoch_cache.end_offset_for(latest, current.log_end_offset)
        if epoch == UNDEFINED_EPOCH:
            target = min(leo, current.log_end_offset)
        elif epoch == latest:
            target = min(end, leo)
        else:
            _, own_end = flog.leader_epoch_cache.end_offset_for(epoch, leo)
            target = min(end, own_end)
    if target >= leo:
        return False
    if target < flog.segments[0].base_offset or target < current.log_start_offset:
        future.truncate_fully_and_start_at(current.log_start_offset)
    else:
        future.truncate_to(target)
    return True


def read_chunk(current: PartitionLog, start: int, max_bytes: int) -> bytes | None:
    """The whole batches of the current log from offset `start` (the future's
    end), at most `max_bytes` but at least one batch; None when there are none.
    Raises OffsetOutOfRangeError when the current log no longer has `start` (its
    start moved past it): the future then restarts at the current log's start."""
    got = current.read(start, max_bytes, min_one_message=True)
    if got is None:
        return None
    data = whole_batches(got.read_bytes())
    return bytes(data) if len(data) else None


def copy_chunk(current: PartitionLog, future: Partition, max_bytes: int) -> int:
    """One copy step without a broker around it (tests, tools): follow truncations,
    then append the next chunk of the current log to the future. Bytes copied."""
    truncate_diverged(current, future)
    try:
        data = read_chunk(current, future.log.log_end_offset, max_bytes)
    except OffsetOutOfRangeError:
        future.truncate_fully_and_start_at(current.log_start_offset)
        return 0
    if data is None:
        return 0
    future.append_records_as_follower(data)
    return len(data)


class ReplicaAlterLogDirsManager:
    """The moves between log directories of one broker: requests and copiers."""

    def __init__(
        self,
        replica_manager: ReplicaManager,
        logs: LogManager,
        rate: Callable[[], float | None],
        *,
        chunk_bytes: int = CHUNK_BYTES,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.replica_manager = replica_manager
        self.logs = logs
        # Read before every chunk: the throttle as configured right now.
        self.rate = rate
        self.chunk_bytes = chunk_bytes
        self.quota = ReplicationQuota(clock=clock)
        self._tasks: dict[TopicPartition, asyncio.Task[None]] = {}
        # Test hook: called with each swap step's name (see kt.broker.log_dir_swap).
        self.on_swap_step: Callable[[str], None] | None = None

    # --- requests -------------------------------------------------------------

    def log_dir(self, path: str) -> Path:
        """The log directory `path` names (absolute, as DescribeLogDirs reports
        it); LogDirNotFoundError when it is not one of log.dirs."""
        if os.path.isabs(path):
            for candidate in (Path(os.path.abspath(path)), Path(path).resolve()):
                if candidate in self.logs.log_dirs:
                    return candidate
        raise LogDirNotFoundError(f"Log dir {path} is not found in the config.")

    async def alter(self, tp: TopicPartition, path: str) -> None:
        """Move `tp`'s replica to log directory `path` (Kafka's
        ReplicaManager.alterReplicaLogDirs for one partition); raises the typed
        errors above. Returns once the move started (or nothing was to do)."""
        if len(f"{tp.topic}-{tp.partition}.{'0' * 32}-future") > MAX_DIR_NAME:
            raise InvalidTopicError("The topic name is too long.")
        d = self.log_dir(path)
        if d in self.logs.offline_dirs:
            raise KafkaStorageError(f"Log directory {path} is offline")
        part = self.replica_manager.get(tp)
        if part is not None and part.offline:
            raise KafkaStorageError(f"Partition {_name(tp)} is offline")
        if tp in self.logs.future_logs and self.logs.future_dir_of[tp] != d:
            await self.cancel(tp)
        self.logs.maybe_update_preferred_dir(tp, d)
        if part is None or self.logs.get(tp) is None:
            raise ReplicaNotAvailableError(
                f"Replica {self.replica_manager.node_id} is not available for partition {_name(tp)}"
            )
        if self.logs.dir_of[tp] == d or tp in self.logs.future_logs:
            return
        if self.logs.offline_dirs:
            # Kafka creates no future log while a directory is offline: the partition
            # might have a log there too.
            raise KafkaStorageError(
                f"Can not create the future log for {_name(tp)} because log directories "
                f"{','.join(map(str, self.logs.offline_dirs))} are offline"
            )
        try:
            future = self.logs.create_future(tp, d)
        except (OSError, StorageError) as exc:
            raise KafkaStorageError(f"Cannot create the future log of {_name(tp)}: {exc}") from exc
        log.info("%s: moving from %s to %s", _name(tp), self.logs.dir_of[tp], d)
        self._spawn(tp, future)

    async def cancel(self, tp: TopicPartition) -> None:
        """Stop `tp`'s move and delete its future log."""
        task = self._tasks.pop(tp, None)
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        try:
            self.logs.delete_future(tp)
        except OSError as exc:
            log.error("%s: cannot delete the cancelled move's future log: %s", _name(tp), exc)
        log.info("%s: move between log dirs cancelled", _name(tp))

    def moving(self) -> dict[TopicPartition, Path]:
        """Partitions being moved and their destination directories."""
        return dict(self.logs.future_dir_of)

    # --- lifecycle ------------------------------------------------------------

    def start(self) -> None:
        """Resume the moves whose future logs were found at startup."""
        for tp, future in list(self.logs.future_logs.items()):
            if self.replica_manager.get(tp) is not None and tp not in self._tasks:
                self._spawn(tp, future)

    async def stop(self) -> None:
        """Stop every copier (their future logs stay: the moves resume at restart)."""
        tasks = list(self._tasks.values())
        self._tasks.clear()
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task

    def _spawn(self, tp: TopicPartition, future: PartitionLog) -> None:
        task = asyncio.get_running_loop().create_task(
            self._run(tp, future), name=f"alter-log-dirs-{_name(tp)}"
        )
        self._tasks[tp] = task

    # --- the copier -----------------------------------------------------------

    async def _run(self, tp: TopicPartition, future: PartitionLog) -> None:
        dst = self.logs.future_dir_of[tp]
        unflushed = 0
        replica: Partition | None = None
        try:
            while True:
                part = self.replica_manager.get(tp)
                if part is None or part.offline or self.logs.future_logs.get(tp) is not future:
                    return  # deleted, offline, or the destination failed
                if replica is None:
                    replica = future_replica(part, future)
                current = part.log
                if future.log_end_offset == current.log_end_offset:
                    try:
                        if truncate_diverged(current, replica):
                            continue
                        if unflushed > FLUSH_AHEAD_BYTES:
                            await _in_thread(future.flush)
                            unflushed = 0
                            continue
                    except OSError as exc:
                        if self.logs.future_logs.get(tp) is future:
                            self.replica_manager.fail_log_dir(dst, exc)
                        # else the future was dropped (deleted, its directory failed)
                        # while it was being flushed: nothing more to do
                        return
                    if self._try_swap(part, future):
                        return
                    await asyncio.sleep(BACKOFF_S)
                    continue
                unflushed += await self._copy_step(part, replica)
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("%s: the move between log dirs failed", _name(tp))
        finally:
            if self._tasks.get(tp) is asyncio.current_task():
                del self._tasks[tp]

    async def _copy_step(self, part: Partition, replica: Partition) -> int:
        """Copy one chunk into the future replica (or wait when throttled); the
        bytes copied."""
        current = part.log
        dst = self.logs.future_dir_of[part.tp]
        try:
            truncate_diverged(current, replica)
        except OSError as exc:
            self.replica_manager.fail_log_dir(dst, exc)
            return 0
        self.quota.rate = self.rate()
        if self.quota.is_exceeded():
            await asyncio.sleep(BACKOFF_S)
            return 0
        restart = False
        try:
            data = read_chunk(current, replica.log.log_end_offset, self.chunk_bytes)
        except OffsetOutOfRangeError:
            data, restart = None, True
        except (OSError, StorageError) as exc:
            # Reading the current log failed: its partition (or directory) fails.
            self.replica_manager.on_storage_error(part, exc)
            return 0
        try:
            if restart:
                replica.truncate_fully_and_start_at(current.log_start_offset)
            if data is not None:
                replica.append_records_as_follower(data)
        except OSError as exc:
            self.replica_manager.fail_log_dir(dst, exc)
            return 0
        if data is None:
            await asyncio.sleep(0)
            return 0
        self.quota.record(len(data))
        # Let requests run between chunks: the copy shares the event loop.
        await asyncio.sleep(0)
        return len(data)

    def _try_swap(self, part: Partition, future: PartitionLog) -> bool:
        """Swap the caught-up future in, unless retention or the cleaner holds the
        current log right now (then False: try again shortly)."""
        current = part.log
        if not current.try_begin_maintenance("log-dir-move"):
            return False
        try:
            replace_current_with_future(self.logs, part, on_step=self.on_swap_step)
        except SwapError as exc:
            log.error("%s: the swap of the moved log failed: %s", _name(part.tp), exc)
            if exc.committed:
                # The future is the only log now, half swapped: serve nothing until a
                # restart finishes the swap.
                self.replica_manager.on_storage_error(part, StorageError(str(exc)))
            self.replica_manager.fail_log_dir(exc.directory, exc)
            return True
        finally:
            current.end_maintenance("log-dir-move")
        part.notify()
        return True


async def _in_thread(job: Callable[[], None]) -> None:
    """Run `job` in a worker thread; a cancellation waits for it to finish (the
    job owns the future log meanwhile)."""
    fut = asyncio.get_running_loop().run_in_executor(None, job)
    try:
        await asyncio.shield(fut)
    except asyncio.CancelledError:
        with contextlib.suppress(Exception):
            await fut
        raise


def _name(tp: TopicPartition) -> str:
    return f"{tp.topic}-{tp.partition}"


__all__ = [
    "ReplicaAlterLogDirsManager",
    "copy_chunk",
    "future_replica",
    "read_chunk",
    "truncate_diverged",
]
