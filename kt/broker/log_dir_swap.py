"""The swap that ends a move between log directories: the caught-up future log
becomes the partition's log (Kafka's Partition.maybeReplaceCurrentWithFutureReplica
and LogManager.replaceCurrentWithFutureLog), crash-safe at every step.

Called on the broker's event loop with the future log at the current log's end
(same offsets, same epochs), so no append can come between the steps:

1. **prepared** — the future is aligned with the current (log start offset, high
   watermark, leader-epoch entries), the producer-state snapshots are copied
   into it (one taken at the log end first; its `.txnindex` files were kept by
   the copy), it is flushed, and its directory's
   recovery-point and log-start checkpoints are written with it. A crash now
   restarts with the move still in progress (the copy resumes).
2. **committed** — the current directory is renamed `<topic>-<p>.<id>-delete`
   and its parent fsynced. From here the future is the partition's only log: a
   restart finds a future with no current log, and finishes the swap (step 3)
   before loading (`LogManager._resolve_futures`); the `-delete` directory is
   removed at startup.
3. **renamed** — the future directory is renamed `<topic>-<p>` and its parent
   fsynced.
4. **serving** — the renamed log is reopened from its new path and the
   partition serves it (its producer state, unchanged, now uses the snapshot
   files there); the
   old log's files stay open until its `-delete` directory goes, after
   file.delete.delay.ms, so fetches still sending from them finish.

`on_step(name)` is called after each step ("prepared", "committed", "renamed",
"serving"); tests raise from it to simulate a crash there.

Where kt differs from Kafka: Kafka renames the future live before renaming the
current away, so a crash between the two leaves two live directories of one
partition and the broker refuses to start; kt renames the current first and
treats a lone future as complete (step 1 made it so).
"""

from __future__ import annotations

import logging
import os
import shutil
import uuid
from collections.abc import Callable
from pathlib import Path

from kt.broker.log_manager import LogManager
from kt.broker.partition import Partition
from kt.storage.atomic import fsync_dir
from kt.storage.checkpoint import TopicPartition, write_offset_checkpoint
from kt.storage.log import PartitionLog
from kt.storage.log_files import LOG_START_OFFSET_CHECKPOINT_FILE, RECOVERY_POINT_CHECKPOINT_FILE
from kt.storage.producer_snapshot import snapshot_file_name

log = logging.getLogger("kt.broker.log_dir_swap")

STEPS = ("prepared", "committed", "renamed", "serving")

# Far in the future: every removed segment's deletion delay has passed.
_FOREVER_MS = 2**62


class SwapError(Exception):
    """A step of the swap failed: `directory` is the one whose I/O failed and
    `committed` whether the future had already become the only log."""

    def __init__(self, message: str, directory: Path, committed: bool) -> None:
        super().__init__(message)
        self.directory = directory
        self.committed = committed


def replace_current_with_future(
    logs: LogManager,
    part: Partition,
    *,
    on_step: Callable[[str], None] | None = None,
) -> PartitionLog:
    """Swap the caught-up future log of `part` in for its current log (the steps
    above) and return the new log. Raises SwapError when a step's I/O fails;
    ValueError when the future is not at the current log's end."""
    tp = part.tp
    current = part.log
    future = logs.future_logs[tp]
    src_dir, dst_dir = logs.dir_of[tp], logs.future_dir_of[tp]
    if future.log_end_offset != current.log_end_offset:
        raise ValueError(
            f"{tp.topic}-{tp.partition}: the future log ends at {future.log_end_offset}, "
            f"the current at {current.log_end_offset}"
        )
    try:
        _prepare(logs, part, future, dst_dir)
    except OSError as exc:
        raise SwapError(f"preparing the future log failed: {exc}", _dir_of(exc, src_dir, dst_dir),
                        committed=False) from exc  # fmt: skip
    _step(on_step, "prepared")

    doomed = src_dir / f"{tp.topic}-{tp.partition}.{uuid.uuid4().hex}-delete"
    try:
        os.replace(current.dir, doomed)
    except OSError as exc:
        raise SwapError(f"renaming {current.dir} failed: {exc}", src_dir, committed=False) from exc
    try:
        fsync_dir(src_dir)
    except OSError as exc:
        # Renamed but maybe not durably: either way round a restart is consistent.
        raise SwapError(f"fsync of {src_dir} failed: {exc}", src_dir, committed=True) from exc
    _step(on_step, "committed")

    live = dst_dir / f"{tp.topic}-{tp.partition}"
    try:
        future.close()  # flushed in step 1: closes the files, writes nothing
        os.replace(future.dir, live)
        fsync_dir(dst_dir)
    except OSError as exc:
        raise SwapError(f"renaming {future.dir} failed: {exc}", dst_dir, committed=True) from exc
    _step(on_step, "renamed")

    try:
        new = PartitionLog.open(
            live, future.config, log_start_offset=future.log_start_offset,
            recovery_point=future.log_end_offset, had_clean_shutdown=True,
        )  # fmt: skip
    except OSError as exc:
        raise SwapError(f"reopening {live} failed: {exc}", dst_dir, committed=True) from exc
    new.update_high_watermark(current.high_watermark)
    for entry in current.leader_epoch_cache.entries:
        # Loading drops epochs starting at the log end (nothing written in them yet,
        # e.g. this broker just became leader); the partition is still in them.
        if entry.start_offset >= new.log_end_offset:
            new.leader_epoch_cache.assign(entry.epoch, entry.start_offset)
    del logs.future_logs[tp]
    del logs.future_dir_of[tp]
    logs.logs[tp] = new
    logs.dir_of[tp] = dst_dir
    logs.retire_replaced(tp, doomed, current)
    part.log = new
    if part.producer_state is not None:
        # The same state (open and unreplicated transactions included), with the
        # snapshots copied in step 1.
        part.producer_state.relocate(live)
    _step(on_step, "serving")
    log.info("%s: moved from %s to %s (log end offset %d)", _name(tp), src_dir, dst_dir,
             new.log_end_offset)  # fmt: skip
    return new


def _prepare(logs: LogManager, part: Partition, future: PartitionLog, dst_dir: Path) -> None:
    """Step 1: make the future log an exact, durable copy of the current one."""
    current = part.log
    future.update_high_watermark(current.high_watermark)
    if current.log_start_offset > future.log_start_offset:
        future.maybe_increment_log_start_offset(current.log_start_offset)
    cache = future.leader_epoch_cache
    wanted = current.leader_epoch_cache.entries
    if cache.entries != wanted:
        # E.g. an epoch a new leader started at the log end, with nothing written yet.
        cache.clear()
        for entry in wanted:
            cache.assign(entry.epoch, entry.start_offset)
    # Segments a truncation removed: their files go now (the directory is renamed next).
    future.delete_expired_files(_FOREVER_MS)
    psm = part.producer_state
    if psm is not None:
        psm.take_snapshot(current.log_end_offset)
        for offset in psm.snapshot_offsets():
            if offset <= current.log_end_offset:
                src = current.dir / snapshot_file_name(offset)
                if src.exists():
                    shutil.copyfile(src, future.dir / src.name)
    future.flush()
    for f in future.dir.iterdir():
        if f.suffix == ".snapshot":
            _fsync_file(f)
    fsync_dir(future.dir)
    in_dir = logs.logs_in(dst_dir)
    write_offset_checkpoint(
        dst_dir / RECOVERY_POINT_CHECKPOINT_FILE,
        {tp: lg.recovery_point for tp, lg in sorted(in_dir.items())},
    )
    write_offset_checkpoint(
        dst_dir / LOG_START_OFFSET_CHECKPOINT_FILE,
        {
            tp: lg.log_start_offset
            for tp, lg in sorted(in_dir.items())
            if lg.log_start_offset > lg.segments[0].base_offset
        },
    )


def _fsync_file(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _dir_of(exc: OSError, src_dir: Path, dst_dir: Path) -> Path:
    """The directory an I/O error happened in (the destination when unknown)."""
    name = exc.filename
    if isinstance(name, str) and Path(name).is_relative_to(src_dir):
        return src_dir
    return dst_dir


def _step(on_step: Callable[[str], None] | None, name: str) -> None:
    if on_step is not None:
        on_step(name)


def _name(tp: TopicPartition) -> str:
    return f"{tp.topic}-{tp.partition}"
