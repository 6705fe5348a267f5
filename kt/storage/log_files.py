"""Kafka's log-directory file naming, path classification and the ``.lock`` file.

Names follow Kafka's ``LogFileUtils`` / ``LocalLog``: segment files are named by
their base offset zero-padded to 20 digits; transient files add ``.deleted``
(awaiting async delete), ``.cleaned`` (compaction output) or ``.swap`` (being
swapped in); partition directories are ``<topic>-<partition>``, plus
``<topic>-<partition>.<uuid>-delete`` (queued for deletion), ``...-future``
(intra-broker move target) and ``...-stray``.

The directory lock mirrors Kafka's ``FileLock``: a ``.lock`` file in each log
directory, locked exclusively while a broker runs. Java's ``FileChannel.tryLock``
takes a POSIX (fcntl) record lock, while a BSD ``flock`` is a separate lock on
Linux, so kt takes and tests both: a kt broker is then seen by Apache Kafka and by
kt tools, and a running Apache Kafka broker is seen by kt tools.
"""

from __future__ import annotations

import contextlib
import enum
import errno
import fcntl
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType

from kt.storage.errors import LogDirLockedError, StorageError, WrongFileKindError

OFFSET_DIGITS = 20

LOG_FILE_SUFFIX = ".log"
INDEX_FILE_SUFFIX = ".index"
TIME_INDEX_FILE_SUFFIX = ".timeindex"
TXN_INDEX_FILE_SUFFIX = ".txnindex"
PRODUCER_SNAPSHOT_FILE_SUFFIX = ".snapshot"

DELETED_FILE_SUFFIX = ".deleted"
CLEANED_FILE_SUFFIX = ".cleaned"
SWAP_FILE_SUFFIX = ".swap"
STATE_SUFFIXES = (DELETED_FILE_SUFFIX, CLEANED_FILE_SUFFIX, SWAP_FILE_SUFFIX)

DELETE_DIR_SUFFIX = "-delete"
FUTURE_DIR_SUFFIX = "-future"
STRAY_DIR_SUFFIX = "-stray"

LOCK_FILE_NAME = ".lock"
CLEAN_SHUTDOWN_FILE_NAME = ".kafka_cleanshutdown"
META_PROPERTIES_FILE_NAME = "meta.properties"
RECOVERY_POINT_CHECKPOINT_FILE = "recovery-point-offset-checkpoint"
REPLICATION_CHECKPOINT_FILE = "replication-offset-checkpoint"
LOG_START_OFFSET_CHECKPOINT_FILE = "log-start-offset-checkpoint"
CLEANER_CHECKPOINT_FILE = "cleaner-offset-checkpoint"
OFFSET_CHECKPOINT_FILES = (
    RECOVERY_POINT_CHECKPOINT_FILE,
    REPLICATION_CHECKPOINT_FILE,
    LOG_START_OFFSET_CHECKPOINT_FILE,
    CLEANER_CHECKPOINT_FILE,
)
LEADER_EPOCH_CHECKPOINT_FILE = "leader-epoch-checkpoint"
PARTITION_METADATA_FILE = "partition.metadata"

_KIND_BY_SUFFIX = {
    LOG_FILE_SUFFIX: "log",
    INDEX_FILE_SUFFIX: "index",
    TIME_INDEX_FILE_SUFFIX: "timeindex",
    TXN_INDEX_FILE_SUFFIX: "txnindex",
    PRODUCER_SNAPSHOT_FILE_SUFFIX: "snapshot",
}
_SUFFIX_BY_KIND = {kind: suffix for suffix, kind in _KIND_BY_SUFFIX.items()}
SEGMENT_FILE_KINDS = tuple(_SUFFIX_BY_KIND)

_SEGMENT_NAME = re.compile(
    r"^(?P<offset>[0-9]{20})(?P<suffix>\.log|\.index|\.timeindex|\.txnindex|\.snapshot)"
    r"(?P<state>\.deleted|\.cleaned|\.swap)?$"
)
# Kafka's DeleteDirPattern / FutureDirPattern / StrayDirPattern: "^(\S+)-(\S+)\.(\S+)<suffix>".
_SUFFIXED_DIR = re.compile(r"^(\S+)-(\S+)\.(\S+)(-delete|-future|-stray)$")


def offset_file_prefix(offset: int) -> str:
    """The 20-digit zero-padded file name prefix of ``offset`` (filenamePrefixFromOffset)."""
    if offset < 0:
        raise ValueError(f"offset must not be negative: {offset}")
    return f"{offset:0{OFFSET_DIGITS}d}"


def segment_file_name(base_offset: int, suffix: str, state: str | None = None) -> str:
    """A segment-family file name, e.g. ``segment_file_name(5, ".index")``.

    ``suffix`` is a file suffix (``.log``) or a kind (``log``); ``state`` optionally
    appends ``.deleted``, ``.cleaned`` or ``.swap``.
    """
    if not suffix.startswith("."):
        if suffix not in _SUFFIX_BY_KIND:
            raise ValueError(f"unknown segment file kind: {suffix}")
        suffix = _SUFFIX_BY_KIND[suffix]
    if state is not None and state not in STATE_SUFFIXES:
        raise ValueError(f"unknown state suffix: {state}")
    return offset_file_prefix(base_offset) + suffix + (state or "")


@dataclass(frozen=True, slots=True)
class SegmentFileName:
    """A parsed segment-family file name."""

    base_offset: int
    kind: str  # one of SEGMENT_FILE_KINDS: log, index, timeindex, txnindex, snapshot
    state: str | None  # None, ".deleted", ".cleaned" or ".swap"


def parse_segment_file_name(name: str) -> SegmentFileName | None:
    """Parse ``00000000000000000042.index.swap`` etc.; None for any other name."""
    m = _SEGMENT_NAME.match(name)
    if m is None:
        return None
    return SegmentFileName(int(m["offset"]), _KIND_BY_SUFFIX[m["suffix"]], m["state"])


def offset_from_file_name(path: str | os.PathLike[str]) -> int:
    """The base offset encoded in a segment-family file name (raises WrongFileKindError)."""
    name = Path(path).name
    parsed = parse_segment_file_name(name)
    if parsed is None:
        raise WrongFileKindError(
            "not a segment file name (expected 20 digits and .log/.index/.timeindex/"
            ".txnindex/.snapshot)",
            path=str(path),
        )
    return parsed.base_offset


@dataclass(frozen=True, slots=True)
class PartitionDirName:
    """A parsed partition directory name."""

    topic: str
    partition: int
    state: str | None = None  # None, "delete", "future" or "stray"
    unique_id: str | None = None  # the hex UUID of a -delete/-future/-stray dir


def parse_partition_dir_name(name: str) -> PartitionDirName | None:
    """Parse a partition directory name as Kafka's ``UnifiedLog.parseTopicPartitionName``.

    Returns None when the name is not a partition directory. Note that Kafka
    truncates long topic names in ``-delete`` directory names, so the topic of a
    deletion directory may be a prefix of the real topic name.
    """
    if not name or "-" not in name:
        return None
    state: str | None = None
    unique_id: str | None = None
    base = name
    for suffix in (DELETE_DIR_SUFFIX, FUTURE_DIR_SUFFIX, STRAY_DIR_SUFFIX):
        if name.endswith(suffix):
            m = _SUFFIXED_DIR.match(name)
            if m is None:
                return None
            state = suffix[1:]
            dot = name.rindex(".")
            base = name[:dot]
            unique_id = name[dot + 1 : -len(suffix)]
            break
    dash = base.rfind("-")
    topic, part = base[:dash], base[dash + 1 :]
    if not topic or not part or not re.fullmatch(r"[+-]?[0-9]+", part):
        return None
    partition = int(part)
    if partition < 0 or partition > 2**31 - 1:
        return None
    return PartitionDirName(topic, partition, state, unique_id)


def partition_dir_name(topic: str, partition: int) -> str:
    """``<topic>-<partition>``, the directory of a live partition."""
    return f"{topic}-{partition}"


@dataclass(slots=True)
class SegmentFiles:
    """The files of one segment in a partition directory, by kind (live files only)."""

    base_offset: int
    log: Path | None = None
    index: Path | None = None
    timeindex: Path | None = None
    txnindex: Path | None = None
    snapshot: Path | None = None
    # Files of this base offset carrying .deleted/.cleaned/.swap.
    transient: list[Path] = field(default_factory=list)


def list_segments(partition_dir: str | os.PathLike[str]) -> list[SegmentFiles]:
    """Segment-family files of a partition directory grouped by base offset, ascending.

    Groups without a ``.log`` are included (orphan indexes, lone snapshots, leftovers
    of compaction) so forensic tools can report them; the log engine skips them.
    """
    groups: dict[int, SegmentFiles] = {}
    for entry in os.scandir(partition_dir):
        parsed = parse_segment_file_name(entry.name)
        if parsed is None or not entry.is_file(follow_symlinks=False):
            continue
        group = groups.setdefault(parsed.base_offset, SegmentFiles(parsed.base_offset))
        path = Path(entry.path)
        if parsed.state is not None:
            group.transient.append(path)
        else:
            setattr(group, parsed.kind, path)
    for group in groups.values():
        group.transient.sort()
    return [groups[k] for k in sorted(groups)]


class PathKind(enum.Enum):
    """What a path in (or near) a Kafka log directory is."""

    MISSING = "missing"
    LOG_DIR = "log-dir"
    PARTITION_DIR = "partition-dir"
    SEGMENT_LOG = "segment-log"
    OFFSET_INDEX = "offset-index"
    TIME_INDEX = "time-index"
    TXN_INDEX = "txn-index"
    PRODUCER_SNAPSHOT = "producer-snapshot"
    OFFSET_CHECKPOINT = "offset-checkpoint"
    LEADER_EPOCH_CHECKPOINT = "leader-epoch-checkpoint"
    PARTITION_METADATA = "partition-metadata"
    META_PROPERTIES = "meta.properties"
    LOCK_FILE = "lock-file"
    CLEAN_SHUTDOWN_MARKER = "clean-shutdown-marker"
    OTHER = "other"


_SEGMENT_KIND_TO_PATH_KIND = {
    "log": PathKind.SEGMENT_LOG,
    "index": PathKind.OFFSET_INDEX,
    "timeindex": PathKind.TIME_INDEX,
    "txnindex": PathKind.TXN_INDEX,
    "snapshot": PathKind.PRODUCER_SNAPSHOT,
}
_LOG_DIR_MARKERS = (
    META_PROPERTIES_FILE_NAME,
    LOCK_FILE_NAME,
    CLEAN_SHUTDOWN_FILE_NAME,
    *OFFSET_CHECKPOINT_FILES,
)

SEGMENT_FILE_PATH_KINDS = frozenset(_SEGMENT_KIND_TO_PATH_KIND.values())
INDEX_PATH_KINDS = frozenset({PathKind.OFFSET_INDEX, PathKind.TIME_INDEX, PathKind.TXN_INDEX})


def classify_path(path: str | os.PathLike[str]) -> PathKind:
    """Classify a path by its name and, for directories, what they contain.

    Segment files keep their kind when they carry a state suffix (``.deleted`` etc.);
    use :func:`parse_segment_file_name` to see the state. Reads nothing but names.
    """
    p = Path(path)
    if not p.exists():
        return PathKind.MISSING
    name = p.name
    if p.is_dir():
        if parse_partition_dir_name(name) is not None:
            return PathKind.PARTITION_DIR
        try:
            children = os.listdir(p)
        except OSError:
            return PathKind.OTHER
        if any(c in _LOG_DIR_MARKERS for c in children):
            return PathKind.LOG_DIR
        for c in children:
            if parse_partition_dir_name(c) is not None and (p / c).is_dir():
                return PathKind.LOG_DIR
        return PathKind.OTHER
    parsed = parse_segment_file_name(name)
    if parsed is not None:
        return _SEGMENT_KIND_TO_PATH_KIND[parsed.kind]
    if name in OFFSET_CHECKPOINT_FILES:
        return PathKind.OFFSET_CHECKPOINT
    by_name = {
        LEADER_EPOCH_CHECKPOINT_FILE: PathKind.LEADER_EPOCH_CHECKPOINT,
        PARTITION_METADATA_FILE: PathKind.PARTITION_METADATA,
        META_PROPERTIES_FILE_NAME: PathKind.META_PROPERTIES,
        LOCK_FILE_NAME: PathKind.LOCK_FILE,
        CLEAN_SHUTDOWN_FILE_NAME: PathKind.CLEAN_SHUTDOWN_MARKER,
    }
    return by_name.get(name, PathKind.OTHER)


# --- the directory lock -------------------------------------------------------

# Real paths of log dirs whose .lock this process holds. POSIX record locks are
# per process and are dropped when *any* descriptor of the file is closed, so a
# probe from the same process must not open and close the lock file.
_HELD_BY_THIS_PROCESS: set[str] = set()


def _lock_key(log_dir: str | os.PathLike[str]) -> str:
    return os.path.realpath(log_dir)


_LOCK_BUSY = (errno.EAGAIN, errno.EACCES, errno.EWOULDBLOCK)


class LogDirLock:
    """Exclusive, non-blocking lock of a log directory's ``.lock`` (a broker's claim).

    Use as a context manager or call :meth:`acquire` / :meth:`release`. Raises
    LogDirLockedError when another process (kt or Apache Kafka) holds the lock.
    """

    def __init__(self, log_dir: str | os.PathLike[str]) -> None:
        self.log_dir = Path(log_dir)
        self.path = self.log_dir / LOCK_FILE_NAME
        self._fd: int | None = None

    @property
    def held(self) -> bool:
        """True while this object holds the lock."""
        return self._fd is not None

    def acquire(self) -> None:
        """Take the lock or raise LogDirLockedError immediately."""
        if self._fd is not None:
            return
        key = _lock_key(self.log_dir)
        if key in _HELD_BY_THIS_PROCESS:
            raise LogDirLockedError(
                "log directory is already locked by this process", path=str(self.log_dir)
            )
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            os.close(fd)
            if exc.errno in _LOCK_BUSY:
                raise LogDirLockedError(
                    f"{LOCK_FILE_NAME} is held by another process: a broker (kt or Apache "
                    "Kafka) is using this log directory",
                    path=str(self.log_dir),
                ) from exc
            raise
        self._fd = fd
        _HELD_BY_THIS_PROCESS.add(key)

    def release(self) -> None:
        """Release the lock (the ``.lock`` file stays, as with Kafka)."""
        if self._fd is None:
            return
        fd, self._fd = self._fd, None
        _HELD_BY_THIS_PROCESS.discard(_lock_key(self.log_dir))
        with contextlib.suppress(OSError):
            fcntl.lockf(fd, fcntl.LOCK_UN)
            fcntl.flock(fd, fcntl.LOCK_UN)
        os.close(fd)

    def __enter__(self) -> LogDirLock:
        self.acquire()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.release()


def is_log_dir_locked(log_dir: str | os.PathLike[str]) -> bool:
    """True when a running process holds ``log_dir/.lock`` (flock or POSIX lock).

    Read-only: a missing ``.lock`` means unlocked and nothing is created. The probe
    takes a shared non-blocking lock and releases it at once.
    """
    if _lock_key(log_dir) in _HELD_BY_THIS_PROCESS:
        return True
    path = Path(log_dir) / LOCK_FILE_NAME
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except FileNotFoundError:
        return False
    except IsADirectoryError as exc:
        raise StorageError(f"{LOCK_FILE_NAME} is a directory", path=str(path)) from exc
    try:
        for lock in (fcntl.flock, fcntl.lockf):
            try:
                lock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
            except OSError as exc:
                if exc.errno in _LOCK_BUSY:
                    return True
                raise
            lock(fd, fcntl.LOCK_UN)
        return False
    finally:
        os.close(fd)
