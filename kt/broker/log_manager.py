"""The log manager: the broker's log directories and every partition log in them.

Per log directory it holds the `.lock`, checks or writes `meta.properties`, and
keeps the offset checkpoints (`recovery-point-offset-checkpoint`,
`log-start-offset-checkpoint`, `replication-offset-checkpoint`). A clean shutdown
leaves `.kafka_cleanshutdown`; its absence at startup means the logs above their
recovery points are recovered (validated, indexes rebuilt, torn tails cut).
New partitions go to the live directory holding the fewest.

Several directories (JBOD) work as in Kafka: each has its own lock, identity
(`directory.id`), checkpoints and marker, is loaded by its own pool of
`num.recovery.threads.per.data.dir` threads, and fails alone: an I/O error in a
directory takes it offline with all its partitions while the others keep
serving; the broker halts only when the last one (or the metadata directory, the
first) fails.

Moves between directories (AlterReplicaLogDirs, see kt.broker.replication.
alter_log_dirs) add a *future* log per moving partition: `<topic>-<p>.<id>-future`
in the destination directory, kept in `future_logs`, checkpointed with its
directory's logs and loaded as a future again after a restart (the copy
resumes). A future log with no current log anywhere is what a crash in the
middle of the swap leaves (kt.broker.log_dir_swap): it is complete and becomes
the current log. `preferred_dirs` remembers where a partition this broker does
not host yet should be created.
"""

from __future__ import annotations

import contextlib
import errno
import logging
import os
import shutil
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import NoReturn

from kt.storage.atomic import atomic_write, fsync_dir
from kt.storage.checkpoint import TopicPartition, read_offset_checkpoint, write_offset_checkpoint
from kt.storage.errors import LogDirLockedError, StorageError
from kt.storage.log import PartitionLog
from kt.storage.log_config import LogConfig
from kt.storage.log_files import (
    CLEAN_SHUTDOWN_FILE_NAME,
    LOG_START_OFFSET_CHECKPOINT_FILE,
    META_PROPERTIES_FILE_NAME,
    RECOVERY_POINT_CHECKPOINT_FILE,
    REPLICATION_CHECKPOINT_FILE,
    LogDirLock,
    parse_partition_dir_name,
)
from kt.storage.meta_properties import MetaProperties, read_meta_properties, write_meta_properties
from kt.storage.partition_metadata import (
    PartitionMetadata,
    read_partition_metadata,
    uuid_to_str,
    write_partition_metadata,
)

log = logging.getLogger("kt.broker.log_manager")

_Checkpoints = dict[str, dict[TopicPartition, int]]

PARTITION_METADATA_FILE = "partition.metadata"


class LogManager:
    """Opens, creates, checkpoints and deletes the partition logs of this broker."""

    def __init__(
        self,
        log_dirs: list[Path],
        node_id: int,
        default_config: LogConfig,
        *,
        halt: Callable[[str], None] | None = None,
        failure_listener: Callable[[Path, BaseException], None] | None = None,
    ) -> None:
        self.log_dirs = [Path(d).resolve() for d in log_dirs]
        check_log_dirs(self.log_dirs)
        self.node_id = node_id
        self.default_config = default_config
        self.logs: dict[TopicPartition, PartitionLog] = {}
        self.dir_of: dict[TopicPartition, Path] = {}
        self._locks: dict[Path, LogDirLock] = {}
        self.cluster_id: str | None = None
        self.had_clean_shutdown: dict[Path, bool] = {}
        self.directory_ids: dict[Path, str] = {}
        # Directories out of service until restart, with why (Kafka's offline dirs).
        self.offline_dirs: dict[Path, str] = {}
        # Logs of offline directories: never touched again, closed (without a flush)
        # at shutdown. Keeping them open means a fetch still holding one of their
        # descriptors can never send from a reused descriptor number.
        self.offline_logs: dict[TopicPartition, tuple[Path, PartitionLog]] = {}
        # Kafka's LogDirFailureChannel: any thread reports an I/O error in a
        # directory; the broker takes it offline on its own thread (see
        # report_dir_failure / handle_dir_failure).
        self.failure_listener = failure_listener
        self._reported: set[Path] = set()
        self._failure_lock = threading.Lock()
        self.halt = halt or _halt
        # Renamed `-delete` partition directories and when they may go (see delete).
        self._dirs_to_delete: list[tuple[int, Path]] = []
        # Logs replaced by a move between directories, closed when their renamed
        # `-delete` directory goes (a fetch may still be sending from their files).
        self._logs_to_close: dict[Path, PartitionLog] = {}
        # Future logs of partitions moving to another directory (Kafka's futureLogs).
        self.future_logs: dict[TopicPartition, PartitionLog] = {}
        self.future_dir_of: dict[TopicPartition, Path] = {}
        # Where to create a partition not hosted yet (Kafka's preferredLogDirs).
        self.preferred_dirs: dict[TopicPartition, Path] = {}

    @property
    def metadata_dir(self) -> Path:
        """The directory holding the cluster metadata (Kafka's metadata.log.dir
        defaults to the first of log.dirs, as here)."""
        return self.log_dirs[0]

    @property
    def live_dirs(self) -> list[Path]:
        """The directories in service, in log.dirs order."""
        return [d for d in self.log_dirs if d not in self.offline_dirs]

    # --- startup ---------------------------------------------------------

    def lock_and_validate(self, cluster_id: str | None) -> str:
        """Create missing directories, take every `.lock`, and check or write
        `meta.properties` (the same cluster and node id everywhere, a distinct
        directory.id each). Returns the cluster id in use.

        As Kafka's createAndValidateLogDirs / lockLogDirs: a directory that cannot
        be created, is not a readable and writable directory, cannot be locked for
        an I/O reason, or whose meta.properties cannot be read or written is taken
        offline; the broker refuses to start when none is left, when the metadata
        directory (the first) is offline, when a `.lock` is held by another
        process, or when the identities disagree.
        """
        metas: dict[Path, MetaProperties] = {}
        for d in self.log_dirs:
            try:
                d.mkdir(parents=True, exist_ok=True)
                if not d.is_dir():
                    raise NotADirectoryError(errno.ENOTDIR, "not a directory", str(d))
                if not os.access(d, os.R_OK | os.W_OK | os.X_OK):
                    raise PermissionError(errno.EACCES, "not readable and writable", str(d))
                lock = LogDirLock(d)
                lock.acquire()
            except LogDirLockedError:
                self.release_locks()
                raise
            except OSError as exc:
                self._offline_at_startup(d, f"cannot create or validate it: {_os_reason(exc)}")
                continue
            self._locks[d] = lock
            meta_path = d / META_PROPERTIES_FILE_NAME
            try:
                if meta_path.exists():
                    metas[d] = read_meta_properties(meta_path)
            except (OSError, StorageError) as exc:
                self._offline_at_startup(d, f"cannot read meta.properties: {_reason(exc)}")
        for d, meta in metas.items():
            if meta.node_id is not None and meta.node_id != self.node_id:
                self._fatal(
                    f"meta.properties says node id {meta.node_id} but this broker is node "
                    f"{self.node_id}",
                    d,
                )
            if meta.cluster_id:
                if cluster_id is not None and meta.cluster_id != cluster_id:
                    self._fatal(
                        f"meta.properties says cluster {meta.cluster_id}, not {cluster_id}", d
                    )
                cluster_id = meta.cluster_id
        seen_ids: dict[str, Path] = {}
        for d, meta in metas.items():
            if meta.directory_id is None:
                continue
            if meta.directory_id in seen_ids:
                self._fatal(
                    f"duplicate directory.id {meta.directory_id} (also in "
                    f"{seen_ids[meta.directory_id]}): a copied log directory? Remove "
                    "directory.id from one of them",
                    d,
                )
            seen_ids[meta.directory_id] = d
            self.directory_ids[d] = meta.directory_id
        if cluster_id is None:
            from kt.broker.config import new_cluster_id

            cluster_id = new_cluster_id()
        for d in self.live_dirs:
            old = metas.get(d)
            if old is not None and (old.version == 0 or old.directory_id is not None):
                continue  # version 0 (a ZooKeeper-era directory) has no directory.id
            directory_id = _new_directory_id(set(seen_ids))
            new_meta = MetaProperties(
                1, self.node_id, cluster_id, directory_id, dict(old.extra) if old else {}
            )
            try:
                write_meta_properties(d / META_PROPERTIES_FILE_NAME, new_meta)
            except OSError as exc:
                self._offline_at_startup(d, f"cannot write meta.properties: {_os_reason(exc)}")
                continue
            seen_ids[directory_id] = d
            self.directory_ids[d] = directory_id
        if not self.live_dirs:
            reasons = "; ".join(f"{d}: {why}" for d, why in self.offline_dirs.items())
            self._fatal(
                f"none of the log dirs {', '.join(map(str, self.log_dirs))} can be created "
                f"or validated ({reasons})"
            )
        if self.metadata_dir in self.offline_dirs:
            self._fatal(
                f"the metadata log dir (the first of log.dirs) is offline: "
                f"{self.offline_dirs[self.metadata_dir]}",
                self.metadata_dir,
            )
        self.cluster_id = cluster_id
        return cluster_id

    def _offline_at_startup(self, d: Path, why: str) -> None:
        log.error("log directory %s is offline: %s", d, why)
        self.offline_dirs[d] = why
        lock = self._locks.pop(d, None)
        if lock is not None:
            lock.release()

    def _fatal(self, message: str, d: Path | None = None) -> NoReturn:
        self.release_locks()
        raise StorageError(message, path=None if d is None else str(d))

    def load_logs(self, topic_configs: dict[str, dict[str, str]], threads: int = 2) -> None:
        """Open every partition directory of the live directories, recovering after
        an unclean shutdown: `threads` loader threads per directory, as Kafka's
        num.recovery.threads.per.data.dir.

        A directory's clean-shutdown marker is read and deleted before its logs
        load (KAFKA-10471: a crash while loading is then unclean next time). An I/O
        error while loading a directory takes it offline; corrupt checkpoints are
        ignored with an error line (recovery starts from zero, as in Kafka).
        """
        began = time.monotonic()
        pools: list[ThreadPoolExecutor] = []
        pending: list[tuple[Path, bool, Future[tuple[TopicPartition, Path, PartitionLog]]]] = []
        try:
            prepared: dict[Path, tuple[list[tuple[Path, TopicPartition, bool]], _Checkpoints]] = {}
            for d in self.live_dirs:
                try:
                    prepared[d] = self._prepare_dir(d)
                except OSError as exc:
                    self._offline_at_startup(d, f"cannot load it: {_os_reason(exc)}")
            self._resolve_futures(prepared)
            for d, (jobs, plan) in prepared.items():
                if d in self.offline_dirs:
                    continue
                if jobs and not self.had_clean_shutdown[d]:
                    log.warning(
                        "%s: no clean-shutdown marker (the broker did not stop cleanly): "
                        "recovering %s above their recovery points",
                        d, _count(len(jobs), "partition"),
                    )  # fmt: skip
                pool = ThreadPoolExecutor(
                    max_workers=max(1, threads), thread_name_prefix=f"log-recovery-{d}"
                )
                pools.append(pool)
                for child, tp, is_future in jobs:
                    pending.append(
                        (d, is_future,
                         pool.submit(self._open_log, d, child, tp, plan, topic_configs))
                    )  # fmt: skip
            loaded: dict[Path, list[tuple[TopicPartition, PartitionLog, bool]]] = {}
            for d, is_future, fut in pending:
                try:
                    tp, _, plog = fut.result()
                except OSError as exc:
                    if d not in self.offline_dirs:
                        self._offline_at_startup(d, f"cannot load it: {_os_reason(exc)}")
                    continue
                loaded.setdefault(d, []).append((tp, plog, is_future))
        finally:
            for pool in pools:
                pool.shutdown(wait=True)
        for d, items in loaded.items():
            for tp, plog, is_future in items:
                if d in self.offline_dirs:
                    _close_quietly(plog)
                    continue
                if is_future:
                    self.future_logs[tp] = plog
                    self.future_dir_of[tp] = d
                    log.info("%s: future log in %s loaded (the move resumes)", tp, d)
                    continue
                self.logs[tp] = plog
                self.dir_of[tp] = d
                _log_recovery(tp, d, plog)
        for tp in [tp for tp in self.future_logs if tp not in self.logs]:
            # Its current log was in a directory that failed while loading.
            _close_quietly(self.future_logs.pop(tp))
            log.error("%s: future log in %s left alone: its current log is offline",
                      tp, self.future_dir_of.pop(tp))  # fmt: skip
        _log_recovery_total(self.logs.values(), time.monotonic() - began)
        if not self.live_dirs:
            self.halt(
                f"Shutdown broker because all log dirs in {', '.join(map(str, self.log_dirs))} "
                "have failed"
            )

    def _resolve_futures(
        self, prepared: dict[Path, tuple[list[tuple[Path, TopicPartition, bool]], _Checkpoints]]
    ) -> None:
        """Decide what each `-future` directory found at startup is.

        Beside a current log of its partition it is a move in progress: loaded as
        the future log (the copy resumes). With no current log anywhere it is what
        a crash inside the swap left after its commit step (the current renamed
        `-delete`; kt.broker.log_dir_swap): complete and flushed, so it is renamed
        live now (step 3 of the swap). Not while a directory is offline (the
        current may be in it): then it is left on disk, unloaded. A second future
        of one partition, or one in its current's directory, is left alone too.
        """
        current: set[TopicPartition] = set()
        for jobs, _ in prepared.values():
            current |= {tp for _, tp, is_future in jobs if not is_future}
        seen: set[TopicPartition] = set()
        for d, (jobs, _) in prepared.items():
            keep: list[tuple[Path, TopicPartition, bool]] = []
            for path, tp, is_future in jobs:
                if not is_future:
                    keep.append((path, tp, is_future))
                    continue
                if tp in seen or any(
                    p.name == f"{tp.topic}-{tp.partition}" and not f for p, _, f in jobs
                ):
                    log.error("%s: ignoring the extra future log %s", tp, path)
                    continue
                seen.add(tp)
                if tp in current:
                    keep.append((path, tp, True))
                elif self.offline_dirs:
                    log.error(
                        "%s: future log %s has no current log, but log dirs are offline "
                        "(the current may be there): left on disk, not loaded", tp, path,
                    )  # fmt: skip
                else:
                    live = d / f"{tp.topic}-{tp.partition}"
                    os.replace(path, live)
                    fsync_dir(d)
                    log.warning("%s: completed an interrupted move: %s is now %s",
                                tp, path.name, live)  # fmt: skip
                    keep.append((live, tp, False))
            jobs[:] = keep

    def _prepare_dir(self, d: Path) -> tuple[list[tuple[Path, TopicPartition, bool]], _Checkpoints]:
        """The partition directories to load (with whether each is a future log)
        and the dir's checkpoints; removes the clean-shutdown marker (remembered in
        had_clean_shutdown)."""
        marker = d / CLEAN_SHUTDOWN_FILE_NAME
        self.had_clean_shutdown[d] = marker.exists()
        if self.had_clean_shutdown[d]:
            marker.unlink()
            fsync_dir(d)
        jobs: list[tuple[Path, TopicPartition, bool]] = []
        for child in sorted(d.iterdir()):
            if child.name in SKIPPED_DIR_NAMES:
                continue
            parsed = parse_partition_dir_name(child.name)
            if parsed is None or not child.is_dir():
                continue
            if parsed.state == "delete":
                # A deletion that did not finish before the broker stopped.
                shutil.rmtree(child, ignore_errors=True)
                continue
            if parsed.state not in (None, "future"):
                continue
            tp = TopicPartition(parsed.topic, parsed.partition)
            jobs.append((child, tp, parsed.state == "future"))
        plan = {
            name: self._read_checkpoint(d, name)
            for name in (
                RECOVERY_POINT_CHECKPOINT_FILE,
                LOG_START_OFFSET_CHECKPOINT_FILE,
                REPLICATION_CHECKPOINT_FILE,
            )
        }
        return jobs, plan

    def _open_log(
        self,
        d: Path,
        path: Path,
        tp: TopicPartition,
        checkpoints: dict[str, dict[TopicPartition, int]],
        topic_configs: dict[str, dict[str, str]],
    ) -> tuple[TopicPartition, Path, PartitionLog]:
        cfg = self.default_config.with_overrides(topic_configs.get(tp.topic, {}))
        plog = PartitionLog.open(
            path,
            cfg,
            log_start_offset=checkpoints[LOG_START_OFFSET_CHECKPOINT_FILE].get(tp, 0),
            recovery_point=checkpoints[RECOVERY_POINT_CHECKPOINT_FILE].get(tp, 0),
            had_clean_shutdown=self.had_clean_shutdown[d],
        )
        plog.update_high_watermark(
            checkpoints[REPLICATION_CHECKPOINT_FILE].get(tp, plog.log_end_offset)
        )
        return tp, d, plog

    def _read_checkpoint(self, d: Path, name: str) -> dict[TopicPartition, int]:
        """An offset checkpoint of `d`; {} when absent or corrupt (I/O errors raise)."""
        path = d / name
        try:
            return read_offset_checkpoint(path, allow_empty=True)
        except FileNotFoundError:
            return {}
        except StorageError as exc:
            # As Kafka's loadLogs: a corrupt recovery-point or log-start checkpoint
            # is reset (recovery from 0, start at the first segment), with an error.
            log.error("ignoring corrupt checkpoint: %s", exc)
            return {}

    # --- partitions --------------------------------------------------------

    def get(self, tp: TopicPartition) -> PartitionLog | None:
        """The log of a partition hosted here."""
        return self.logs.get(tp)

    def create(
        self, tp: TopicPartition, topic_id: bytes, overrides: dict[str, str]
    ) -> PartitionLog:
        """Create (or open, if it exists) a partition log in the live directory
        holding the fewest partitions (ties: log.dirs order), as Kafka's
        nextLogDirs. An I/O error takes the chosen directory offline and raises."""
        existing = self.logs.get(tp)
        if existing is not None:
            return existing
        live = self.live_dirs
        if not live:
            raise StorageError(
                f"cannot create the log of {tp.topic}-{tp.partition}: no log dir is online"
            )
        counts = {d: 0 for d in live}
        for d in self.dir_of.values():
            if d in counts:
                counts[d] += 1
        d = min(live, key=lambda x: (counts[x], self.log_dirs.index(x)))
        preferred = self.preferred_dirs.pop(tp, None)
        if preferred is not None and preferred in live:
            d = preferred  # an AlterReplicaLogDirs that came before the replica
        try:
            path = d / f"{tp.topic}-{tp.partition}"
            created = not path.exists()
            path.mkdir(parents=True, exist_ok=True)
            if created:
                fsync_dir(d)
            meta_path = path / PARTITION_METADATA_FILE
            if not meta_path.exists():
                write_partition_metadata(meta_path, PartitionMetadata(uuid_to_str(topic_id)))
            cfg = self.default_config.with_overrides(overrides)
            plog = PartitionLog.open(path, cfg, had_clean_shutdown=True)
        except OSError as exc:
            self.report_dir_failure(d, exc)
            raise
        self.offline_logs.pop(tp, None)
        self.logs[tp] = plog
        self.dir_of[tp] = d
        return plog

    def maybe_update_preferred_dir(self, tp: TopicPartition, d: Path) -> None:
        """Remember `d` as where `tp` goes when created here, unless its current or
        future log is there already (Kafka's maybeUpdatePreferredLogDir)."""
        if self.dir_of.get(tp) != d and self.future_dir_of.get(tp) != d:
            self.preferred_dirs[tp] = d

    def create_future(self, tp: TopicPartition, d: Path) -> PartitionLog:
        """An empty future log of `tp` in directory `d` (`<topic>-<p>.<id>-future`),
        with the current log's config and topic id. An I/O error takes `d` offline
        and raises."""
        current = self.logs.get(tp)
        if current is None:
            raise StorageError(f"{tp.topic}-{tp.partition} has no current log to move")
        if self.dir_of.get(tp) == d or tp in self.future_logs:
            raise StorageError(f"{tp.topic}-{tp.partition} cannot get a future log in {d}")
        path = d / future_dir_name(tp)
        try:
            path.mkdir()
            fsync_dir(d)
            stored = self.topic_id_on_disk(tp)
            if stored is not None:
                write_partition_metadata(path / PARTITION_METADATA_FILE, PartitionMetadata(stored))
            plog = PartitionLog.open(path, current.config, had_clean_shutdown=True)
        except OSError as exc:
            self.report_dir_failure(d, exc)
            raise
        self.future_logs[tp] = plog
        self.future_dir_of[tp] = d
        self.preferred_dirs.pop(tp, None)
        return plog

    def delete_future(self, tp: TopicPartition, *, now_ms: int | None = None) -> None:
        """Drop the future log of `tp` (a cancelled or abandoned move): renamed
        `-delete` at once, removed after file.delete.delay.ms."""
        plog = self.future_logs.pop(tp, None)
        d = self.future_dir_of.pop(tp, None)
        if plog is None or d is None:
            return
        plog.close()
        self._schedule_delete(d, tp, plog.dir, now_ms)

    def _schedule_delete(self, d: Path, tp: TopicPartition, path: Path, now_ms: int | None) -> Path:
        doomed = d / f"{tp.topic}-{tp.partition}.{uuid.uuid4().hex}-delete"
        os.replace(path, doomed)
        fsync_dir(d)
        now = int(time.time() * 1000) if now_ms is None else now_ms
        self._dirs_to_delete.append((now + self.default_config.file_delete_delay_ms, doomed))
        return doomed

    def retire_replaced(self, tp: TopicPartition, doomed: Path, old: PartitionLog) -> None:
        """A current log replaced by its future (the swap renamed its directory to
        `doomed`): its files stay open until the directory is removed, after
        file.delete.delay.ms, so fetches still sending from them finish."""
        now = int(time.time() * 1000)
        self._dirs_to_delete.append((now + self.default_config.file_delete_delay_ms, doomed))
        self._logs_to_close[doomed] = old

    def topic_id_on_disk(self, tp: TopicPartition) -> str | None:
        """The topic id stored in a partition's partition.metadata, if any."""
        d = self.dir_of.get(tp)
        if d is None:
            return None
        path = d / f"{tp.topic}-{tp.partition}" / PARTITION_METADATA_FILE
        if not path.exists():
            return None
        return read_partition_metadata(path).topic_id

    def delete(self, tp: TopicPartition, *, now_ms: int | None = None) -> None:
        """Close a partition log and delete its directory, as Kafka's asyncDelete: at
        once renamed `<topic>-<p>.<uuid>-delete` (so a crash never resurrects it; a
        restart removes leftovers), removed after the broker's file.delete.delay.ms
        by `take_expired_deletions` + `remove_dirs` (the broker's background task).

        Where kt differs: Kafka keeps the log's files open until the directory goes;
        kt closes them at once (the partition is offline from here on anyway)."""
        # The future first: a future without a current log is taken at startup for
        # a finished move, so the current must never go first.
        self.delete_future(tp, now_ms=now_ms)
        plog = self.logs.pop(tp, None)
        d = self.dir_of.pop(tp, None)
        if plog is None or d is None:
            return
        plog.close()
        self._schedule_delete(d, tp, plog.dir, now_ms)

    def take_expired_deletions(self, now_ms: int | None = None) -> list[Path]:
        """The `-delete` directories whose delay has passed, no longer queued (the
        caller removes them, e.g. with `remove_dirs` from a worker thread)."""
        now = int(time.time() * 1000) if now_ms is None else now_ms
        due = [p for deadline, p in self._dirs_to_delete if deadline <= now]
        self._dirs_to_delete = [(t, p) for t, p in self._dirs_to_delete if t > now]
        for p in due:
            old = self._logs_to_close.pop(p, None)
            if old is not None:
                _close_quietly(old)
        return due

    @property
    def pending_dir_deletions(self) -> list[Path]:
        """The `-delete` directories still waiting for their delay."""
        return [p for _, p in self._dirs_to_delete]

    @staticmethod
    def remove_dirs(paths: list[Path]) -> None:
        """Remove directories recursively (safe from a worker thread)."""
        for path in paths:
            shutil.rmtree(path, ignore_errors=True)

    def reconfigure_defaults(
        self, default_config: LogConfig, topic_configs: Callable[[str], dict[str, str]]
    ) -> None:
        """New broker-wide log defaults (a dynamic broker config changed): every open
        log gets them under its topic's own overrides (Kafka's DynamicLogConfig)."""
        self.default_config = default_config
        for logs in (self.logs, self.future_logs):
            for tp, plog in logs.items():
                plog.config = default_config.with_overrides(topic_configs(tp.topic))

    def update_config(self, topic: str, overrides: dict[str, str]) -> None:
        """Apply a topic's new config overrides to its open logs."""
        cfg = self.default_config.with_overrides(overrides)
        for logs in (self.logs, self.future_logs):
            for tp, plog in logs.items():
                if tp.topic == topic:
                    plog.config = cfg

    # --- directory failure ---------------------------------------------------

    def dir_of_path(self, path: str | os.PathLike[str]) -> Path | None:
        """The log directory a path lies in, if any."""
        p = Path(os.path.abspath(path))
        for d in self.log_dirs:
            if p == d or d in p.parents:
                return d
        return None

    def report_dir_failure(self, d: Path, exc: BaseException) -> None:
        """An I/O error in directory `d`, from any thread (Kafka's
        LogDirFailureChannel.maybeAddOfflineLogDir): reported once per directory to
        `failure_listener` (the broker), or handled here when there is none."""
        with self._failure_lock:
            if d in self._reported or d in self.offline_dirs:
                return
            self._reported.add(d)
        listener = self.failure_listener
        if listener is not None:
            listener(d, exc)
        else:
            self.handle_dir_failure(d, exc)

    def handle_dir_failure(self, d: Path, exc: BaseException | str) -> list[TopicPartition]:
        """Take directory `d` offline until restart (Kafka's handleLogDirFailure):
        its logs leave the registry (their partitions are offline from now on), its
        checkpoints are no longer written, its `.lock` is released. Returns the
        partitions that went offline. Halts the broker when `d` was the last live
        directory or holds the cluster metadata. Call on the broker's thread."""
        if d in self.offline_dirs:
            return []
        why = exc if isinstance(exc, str) else _reason(exc)
        self.offline_dirs[d] = why
        with self._failure_lock:
            self._reported.add(d)
        gone = sorted(tp for tp, where in self.dir_of.items() if where == d)
        for tp in gone:
            plog = self.logs.pop(tp)
            del self.dir_of[tp]
            self.offline_logs[tp] = (d, plog)
        for tp in [tp for tp, where in self.future_dir_of.items() if where == d]:
            # A move into the failed directory is abandoned (its copier stops).
            del self.future_dir_of[tp]
            _close_quietly(self.future_logs.pop(tp))
        lock = self._locks.pop(d, None)
        if lock is not None:
            lock.release()
        log.error(
            "log directory %s failed and is offline until restart (%d partitions offline): %s",
            d,
            len(gone),
            why,
        )
        if not self.live_dirs:
            self.halt(
                f"Shutdown broker because all log dirs in {', '.join(map(str, self.log_dirs))} "
                f"have failed (last: {d}: {why})"
            )
        elif d == self.metadata_dir:
            self.halt(f"Shutdown broker because the metadata log dir {d} has failed: {why}")
        return gone

    # --- checkpoints and shutdown -----------------------------------------

    def _by_dir(self) -> Iterator[tuple[Path, dict[TopicPartition, PartitionLog]]]:
        # Future logs are checkpointed in their directory under their partition, as
        # in Kafka (a directory never holds both logs of one partition).
        for d in self.live_dirs:
            yield d, self.logs_in(d)

    def logs_in(self, d: Path) -> dict[TopicPartition, PartitionLog]:
        """The current and future logs in directory `d`."""
        out = {tp: lg for tp, lg in self.logs.items() if self.dir_of.get(tp) == d}
        out.update(
            {tp: lg for tp, lg in self.future_logs.items() if self.future_dir_of.get(tp) == d}
        )
        return out

    # Each checkpoint is collected (a quick read of in-memory offsets, on the caller's
    # thread) and then written (temp file, fsyncs, rename: slow), so the broker can
    # write from a worker thread without stalling the event loop. Offline
    # directories get no checkpoints.
    CheckpointPlan = list[tuple[Path, dict[TopicPartition, int]]]

    def recovery_point_plan(self) -> CheckpointPlan:
        """recovery-point-offset-checkpoint contents per live directory."""
        return [self.recovery_point_plan_for(d, logs) for d, logs in self._by_dir()]

    def log_start_offset_plan(self) -> CheckpointPlan:
        """log-start-offset-checkpoint contents (logs starting above their first segment)."""
        return [self.log_start_offset_plan_for(d, logs) for d, logs in self._by_dir()]

    def high_watermark_plan(self) -> CheckpointPlan:
        """replication-offset-checkpoint contents (the high watermarks)."""
        return [self.high_watermark_plan_for(d, logs) for d, logs in self._by_dir()]

    def write_plan(self, plan: CheckpointPlan) -> None:
        """Write collected checkpoints atomically (safe from a worker thread). An
        I/O error is reported as a failure of that directory, not raised (Kafka's
        CheckpointFileWithFailureHandler); directories gone offline are skipped."""
        for path, entries in plan:
            d = path.parent
            if d in self.offline_dirs:
                continue
            try:
                write_offset_checkpoint(path, entries)
            except OSError as exc:
                self.report_dir_failure(d, exc)

    def checkpoint_recovery_points(self) -> None:
        """Write recovery-point-offset-checkpoint in every live directory."""
        self.write_plan(self.recovery_point_plan())

    def checkpoint_log_start_offsets(self) -> None:
        """Write log-start-offset-checkpoint in every live directory."""
        self.write_plan(self.log_start_offset_plan())

    def checkpoint_high_watermarks(self) -> None:
        """Write replication-offset-checkpoint in every live directory."""
        self.write_plan(self.high_watermark_plan())

    def flush_all(self) -> None:
        """fsync every log up to its end (advancing the recovery points)."""
        for tp, plog in list(self.logs.items()):
            try:
                plog.flush()
            except OSError as exc:
                d = self.dir_of.get(tp)
                if d is not None:
                    self.report_dir_failure(d, exc)

    def shutdown(self) -> None:
        """Per live directory: close (flush) its logs, write its checkpoints and the
        clean-shutdown marker. A directory failing here gets no marker (its logs are
        recovered at the next start); offline directories' logs are closed without
        a flush. Then unlock."""
        for d, logs in list(self._by_dir()):
            try:
                for plog in logs.values():
                    plog.close()
                for path, entries in (
                    self.recovery_point_plan_for(d, logs),
                    self.log_start_offset_plan_for(d, logs),
                    self.high_watermark_plan_for(d, logs),
                ):
                    write_offset_checkpoint(path, entries)
                atomic_write(d / CLEAN_SHUTDOWN_FILE_NAME, b"")
            except OSError as exc:
                log.error("log directory %s failed at shutdown, no clean-shutdown marker: %s",
                          d, _reason(exc))  # fmt: skip
        for _d, plog in self.offline_logs.values():
            _close_quietly(plog)
        for plog in self._logs_to_close.values():
            _close_quietly(plog)
        self._logs_to_close.clear()
        self.release_locks()

    @staticmethod
    def recovery_point_plan_for(
        d: Path, logs: dict[TopicPartition, PartitionLog]
    ) -> tuple[Path, dict[TopicPartition, int]]:
        """One directory's recovery-point-offset-checkpoint."""
        return d / RECOVERY_POINT_CHECKPOINT_FILE, {
            tp: lg.recovery_point for tp, lg in sorted(logs.items())
        }

    @staticmethod
    def log_start_offset_plan_for(
        d: Path, logs: dict[TopicPartition, PartitionLog]
    ) -> tuple[Path, dict[TopicPartition, int]]:
        """One directory's log-start-offset-checkpoint."""
        return d / LOG_START_OFFSET_CHECKPOINT_FILE, {
            tp: lg.log_start_offset
            for tp, lg in sorted(logs.items())
            if lg.log_start_offset > lg.segments[0].base_offset
        }

    @staticmethod
    def high_watermark_plan_for(
        d: Path, logs: dict[TopicPartition, PartitionLog]
    ) -> tuple[Path, dict[TopicPartition, int]]:
        """One directory's replication-offset-checkpoint."""
        return d / REPLICATION_CHECKPOINT_FILE, {
            tp: lg.high_watermark for tp, lg in sorted(logs.items())
        }

    def release_locks(self) -> None:
        """Give up every directory lock."""
        for lock in self._locks.values():
            lock.release()
        self._locks.clear()


# Kafka's KRaft metadata log and tiered storage's index cache live beside the
# partitions but are not partition logs.
SKIPPED_DIR_NAMES = frozenset({"__cluster_metadata-0", "remote-log-index-cache"})


def future_dir_name(tp: TopicPartition) -> str:
    """`<topic>-<partition>.<uniqueId>-future`, Kafka's UnifiedLog.logFutureDirName."""
    return f"{tp.topic}-{tp.partition}.{uuid.uuid4().hex}-future"


def check_log_dirs(dirs: list[Path]) -> None:
    """Refuse a log.dirs listing a directory twice (as Kafka) or one directory
    inside another (kt: the outer would see the inner as a partition directory)."""
    seen: dict[str, Path] = {}
    for d in dirs:
        real = os.path.realpath(d)
        if real in seen:
            raise StorageError(f"duplicate log directory: {d} and {seen[real]} are the same")
        seen[real] = d
    reals = sorted(seen)
    for a in reals:
        for b in reals:
            if a != b and b.startswith(a.rstrip(os.sep) + os.sep):
                raise StorageError(
                    f"log directory {seen[b]} is inside log directory {seen[a]}; log.dirs "
                    "must not be nested"
                )


def _new_directory_id(taken: set[str]) -> str:
    # Kafka reserves the ids whose first 8 bytes are zero (UNASSIGNED, LOST, ...)
    # and requires directory ids to be unique.
    while True:
        raw = uuid.uuid4().bytes
        if raw[:8] == bytes(8):
            continue
        directory_id = uuid_to_str(raw)
        if directory_id not in taken:
            return directory_id


def _os_reason(exc: OSError) -> str:
    return exc.strerror or str(exc)


def _reason(exc: BaseException) -> str:
    if isinstance(exc, OSError) and exc.strerror:
        where = f"{exc.filename}: " if exc.filename else ""
        return f"{where}{exc.strerror}"
    return str(exc)


def _log_recovery(tp: TopicPartition, d: Path, plog: PartitionLog) -> None:
    """One line for a partition whose segments were recovered (as Kafka logs which
    logs it recovered and from where); nothing for a log loaded as it was."""
    report = plog.load_report
    if not report.recovered_segments:
        return
    since = (
        f"from recovery point {report.recovery_point}"
        if report.recovery_point is not None
        else "(missing or corrupt index files)"
    )
    log.info(
        "%s in %s: recovered %s %s (first segment %d): %d bytes re-validated, "
        "%d bytes truncated, log end offset %d, in %.3fs",
        tp, d, _count(len(report.recovered_segments), "segment"), since,
        report.recovered_segments[0],
        report.recovered_bytes, report.truncated_bytes, plog.log_end_offset,
        report.elapsed_s,
    )  # fmt: skip
    if report.truncated_bytes:
        log.warning("%s: recovery truncated %s", tp, "; ".join(report.truncation_reasons))


def _log_recovery_total(logs: Iterable[PartitionLog], elapsed_s: float) -> None:
    """The sum over all partitions of what recovery did, when it did anything."""
    reports = [plog.load_report for plog in logs if plog.load_report.recovered_segments]
    if not reports:
        return
    log.info(
        "log recovery: %s recovered, %d bytes re-validated, %d bytes truncated, "
        "in %.3fs (all logs loaded)",
        _count(len(reports), "partition"), sum(r.recovered_bytes for r in reports),
        sum(r.truncated_bytes for r in reports), elapsed_s,
    )  # fmt: skip


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"


def _close_quietly(plog: PartitionLog) -> None:
    """Close a log's files without flushing (its directory has failed)."""
    for seg in plog.segments:
        with contextlib.suppress(Exception):
            seg.close()


def _halt(message: str) -> NoReturn:
    """Kafka's Exit.halt(1): one fatal line, then exit at once (no clean shutdown,
    so no clean-shutdown marker anywhere)."""
    log.critical("%s", message)
    for handler in logging.getLogger("kt").handlers + logging.getLogger().handlers:
        with contextlib.suppress(Exception):
            handler.flush()
    os._exit(1)
