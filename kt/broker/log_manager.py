"""The log manager: the broker's log directories and every partition log in them.

Per log directory it holds the `.lock`, checks or writes `meta.properties`, and
keeps the offset checkpoints (`recovery-point-offset-checkpoint`,
`log-start-offset-checkpoint`, `replication-offset-checkpoint`). A clean shutdown
leaves `.kafka_cleanshutdown`; its absence at startup means the logs above their
recovery points are recovered (validated, indexes rebuilt, torn tails cut).
New partitions go to the directory holding the fewest.
"""

from __future__ import annotations

import logging
import os
import shutil
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from kt.storage.atomic import atomic_write, fsync_dir
from kt.storage.checkpoint import TopicPartition, read_offset_checkpoint, write_offset_checkpoint
from kt.storage.errors import StorageError
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

PARTITION_METADATA_FILE = "partition.metadata"


class LogManager:
    """Opens, creates, checkpoints and deletes the partition logs of this broker."""

    def __init__(self, log_dirs: list[Path], node_id: int, default_config: LogConfig) -> None:
        self.log_dirs = [Path(d).resolve() for d in log_dirs]
        self.node_id = node_id
        self.default_config = default_config
        self.logs: dict[TopicPartition, PartitionLog] = {}
        self.dir_of: dict[TopicPartition, Path] = {}
        self._locks: list[LogDirLock] = []
        self.cluster_id: str | None = None
        self.had_clean_shutdown: dict[Path, bool] = {}

    # --- startup ---------------------------------------------------------

    def lock_and_validate(self, cluster_id: str | None) -> str:
        """Create missing directories, take every `.lock`, and check or write
        `meta.properties` (the same cluster and node id everywhere). Returns the
        cluster id in use."""
        metas: dict[Path, MetaProperties] = {}
        for d in self.log_dirs:
            d.mkdir(parents=True, exist_ok=True)
            lock = LogDirLock(d)
            lock.acquire()
            self._locks.append(lock)
            meta_path = d / META_PROPERTIES_FILE_NAME
            if meta_path.exists():
                metas[d] = read_meta_properties(meta_path)
        for d, meta in metas.items():
            if meta.node_id is not None and meta.node_id != self.node_id:
                raise StorageError(
                    f"meta.properties says node id {meta.node_id} but this broker is node "
                    f"{self.node_id}",
                    path=str(d),
                )
            if meta.cluster_id:
                if cluster_id is not None and meta.cluster_id != cluster_id:
                    raise StorageError(
                        f"meta.properties says cluster {meta.cluster_id}, not {cluster_id}",
                        path=str(d),
                    )
                cluster_id = meta.cluster_id
        if cluster_id is None:
            from kt.broker.config import new_cluster_id

            cluster_id = new_cluster_id()
        for d in self.log_dirs:
            if d not in metas:
                directory_id = uuid_to_str(uuid.uuid4().bytes)
                write_meta_properties(
                    d / META_PROPERTIES_FILE_NAME,
                    MetaProperties(1, self.node_id, cluster_id, directory_id),
                )
        self.cluster_id = cluster_id
        return cluster_id

    def load_logs(self, topic_configs: dict[str, dict[str, str]], threads: int = 2) -> None:
        """Open every partition directory, recovering after an unclean shutdown."""
        jobs: list[tuple[Path, Path, TopicPartition]] = []
        for d in self.log_dirs:
            marker = d / CLEAN_SHUTDOWN_FILE_NAME
            self.had_clean_shutdown[d] = marker.exists()
            for child in sorted(d.iterdir()):
                parsed = parse_partition_dir_name(child.name)
                if parsed is None or not child.is_dir():
                    continue
                if parsed.state == "delete":
                    # A deletion that did not finish before the broker stopped.
                    shutil.rmtree(child, ignore_errors=True)
                    continue
                if parsed.state is not None:
                    continue
                jobs.append((d, child, TopicPartition(parsed.topic, parsed.partition)))
        recovery = {
            d: self._read_checkpoint(d, RECOVERY_POINT_CHECKPOINT_FILE) for d in self.log_dirs
        }
        starts = {
            d: self._read_checkpoint(d, LOG_START_OFFSET_CHECKPOINT_FILE) for d in self.log_dirs
        }
        hws = {d: self._read_checkpoint(d, REPLICATION_CHECKPOINT_FILE) for d in self.log_dirs}

        def open_one(
            job: tuple[Path, Path, TopicPartition],
        ) -> tuple[TopicPartition, Path, PartitionLog]:
            d, path, tp = job
            cfg = self.default_config.with_overrides(topic_configs.get(tp.topic, {}))
            plog = PartitionLog.open(
                path,
                cfg,
                log_start_offset=starts[d].get(tp, 0),
                recovery_point=recovery[d].get(tp, 0),
                had_clean_shutdown=self.had_clean_shutdown[d],
            )
            plog.update_high_watermark(hws[d].get(tp, plog.log_end_offset))
            return tp, d, plog

        with ThreadPoolExecutor(max_workers=max(1, threads)) as pool:
            for tp, d, plog in pool.map(open_one, jobs):
                self.logs[tp] = plog
                self.dir_of[tp] = d
                report = plog.load_report
                if report.truncated_bytes:
                    log.warning(
                        "%s: recovery truncated %s", tp, "; ".join(report.truncation_reasons)
                    )
        # The marker is removed once the logs are open: from now on a crash is unclean.
        for d in self.log_dirs:
            marker = d / CLEAN_SHUTDOWN_FILE_NAME
            if marker.exists():
                marker.unlink()
                fsync_dir(d)

    def _read_checkpoint(self, d: Path, name: str) -> dict[TopicPartition, int]:
        path = d / name
        if not path.exists():
            return {}
        try:
            return read_offset_checkpoint(path, allow_empty=True)
        except StorageError as exc:
            # Kafka fails the directory here; we start from zero, which only costs
            # recovery time (recovery point) or re-reads (HW), and say so.
            log.error("ignoring unreadable checkpoint: %s", exc)
            return {}

    # --- partitions --------------------------------------------------------

    def get(self, tp: TopicPartition) -> PartitionLog | None:
        """The log of a partition hosted here."""
        return self.logs.get(tp)

    def create(
        self, tp: TopicPartition, topic_id: bytes, overrides: dict[str, str]
    ) -> PartitionLog:
        """Create (or open, if it exists) a partition log in the least-loaded directory."""
        existing = self.logs.get(tp)
        if existing is not None:
            return existing
        counts = {d: 0 for d in self.log_dirs}
        for d in self.dir_of.values():
            counts[d] = counts.get(d, 0) + 1
        d = min(self.log_dirs, key=lambda x: (counts[x], self.log_dirs.index(x)))
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
        self.logs[tp] = plog
        self.dir_of[tp] = d
        return plog

    def topic_id_on_disk(self, tp: TopicPartition) -> str | None:
        """The topic id stored in a partition's partition.metadata, if any."""
        d = self.dir_of.get(tp)
        if d is None:
            return None
        path = d / f"{tp.topic}-{tp.partition}" / PARTITION_METADATA_FILE
        if not path.exists():
            return None
        return read_partition_metadata(path).topic_id

    def delete(self, tp: TopicPartition) -> None:
        """Close a partition log and delete its directory: first renamed
        `<topic>-<p>.<uuid>-delete` (so a crash never resurrects it), then removed."""
        plog = self.logs.pop(tp, None)
        d = self.dir_of.pop(tp, None)
        if plog is None or d is None:
            return
        plog.close()
        path = plog.dir
        doomed = d / f"{tp.topic}-{tp.partition}.{uuid.uuid4().hex}-delete"
        os.replace(path, doomed)
        fsync_dir(d)
        shutil.rmtree(doomed, ignore_errors=True)

    def update_config(self, topic: str, overrides: dict[str, str]) -> None:
        """Apply a topic's new config overrides to its open logs."""
        cfg = self.default_config.with_overrides(overrides)
        for tp, plog in self.logs.items():
            if tp.topic == topic:
                plog.config = cfg

    # --- checkpoints and shutdown -----------------------------------------

    def _by_dir(self) -> Iterator[tuple[Path, dict[TopicPartition, PartitionLog]]]:
        for d in self.log_dirs:
            yield d, {tp: lg for tp, lg in self.logs.items() if self.dir_of.get(tp) == d}

    # Each checkpoint is collected (a quick read of in-memory offsets, on the caller's
    # thread) and then written (temp file, fsyncs, rename: slow), so the broker can
    # write from a worker thread without stalling the event loop.
    CheckpointPlan = list[tuple[Path, dict[TopicPartition, int]]]

    def recovery_point_plan(self) -> CheckpointPlan:
        """recovery-point-offset-checkpoint contents per directory."""
        return [
            (
                d / RECOVERY_POINT_CHECKPOINT_FILE,
                {tp: lg.recovery_point for tp, lg in sorted(logs.items())},
            )
            for d, logs in self._by_dir()
        ]

    def log_start_offset_plan(self) -> CheckpointPlan:
        """log-start-offset-checkpoint contents (logs starting above their first segment)."""
        return [
            (
                d / LOG_START_OFFSET_CHECKPOINT_FILE,
                {
                    tp: lg.log_start_offset
                    for tp, lg in sorted(logs.items())
                    if lg.log_start_offset > lg.segments[0].base_offset
                },
            )
            for d, logs in self._by_dir()
        ]

    def high_watermark_plan(self) -> CheckpointPlan:
        """replication-offset-checkpoint contents (the high watermarks)."""
        return [
            (
                d / REPLICATION_CHECKPOINT_FILE,
                {tp: lg.high_watermark for tp, lg in sorted(logs.items())},
            )
            for d, logs in self._by_dir()
        ]

    @staticmethod
    def write_plan(plan: CheckpointPlan) -> None:
        """Write collected checkpoints atomically (safe from a worker thread)."""
        for path, entries in plan:
            write_offset_checkpoint(path, entries)

    def checkpoint_recovery_points(self) -> None:
        """Write recovery-point-offset-checkpoint in every directory."""
        self.write_plan(self.recovery_point_plan())

    def checkpoint_log_start_offsets(self) -> None:
        """Write log-start-offset-checkpoint in every directory."""
        self.write_plan(self.log_start_offset_plan())

    def checkpoint_high_watermarks(self) -> None:
        """Write replication-offset-checkpoint in every directory."""
        self.write_plan(self.high_watermark_plan())

    def flush_all(self) -> None:
        """fsync every log up to its end (advancing the recovery points)."""
        for plog in self.logs.values():
            plog.flush()

    def shutdown(self) -> None:
        """Flush, checkpoint, close every log, leave the clean-shutdown marker, unlock."""
        for plog in self.logs.values():
            plog.close()
        self.checkpoint_recovery_points()
        self.checkpoint_log_start_offsets()
        self.checkpoint_high_watermarks()
        for d in self.log_dirs:
            atomic_write(d / CLEAN_SHUTDOWN_FILE_NAME, b"")
        self.release_locks()

    def release_locks(self) -> None:
        """Give up every directory lock."""
        for lock in self._locks:
            lock.release()
        self._locks.clear()
