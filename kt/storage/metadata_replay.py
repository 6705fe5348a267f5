"""Replaying a KRaft metadata directory (or chosen files) into a `MetadataImage`.

Sources: a snapshot (`<end offset>-<epoch>.checkpoint`, or `bootstrap.checkpoint`),
log segments, or both: the newest snapshot at or before the point asked for and
then the log records after it, as a KRaft node loads its metadata at start.
`as_of` stops the replay at an offset (inclusive) or at a time (the last record
written at or before it). Records that do not decode are collected, not fatal.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from kt.storage.metadata_image import MetadataImage, Provenance
from kt.storage.metadata_log import (
    BOOTSTRAP_FILE,
    METADATA_PARTITION_DIR,
    MetadataEntry,
    metadata_files,
    read_entries,
    snapshot_id,
)


@dataclass(frozen=True)
class AsOf:
    """Where to stop: an offset (inclusive) or a time in ms (inclusive); None: the end."""

    offset: int | None = None
    time: int | None = None

    def before(self, e: MetadataEntry) -> bool:
        """Whether entry `e` lies within the replay."""
        if self.offset is not None and e.offset > self.offset:
            return False
        return not (self.time is not None and e.timestamp > self.time)


@dataclass
class ReplayResult:
    """The image and how it was built."""

    image: MetadataImage
    snapshot: Path | None = None
    logs: list[Path] = field(default_factory=list)
    errors: list[tuple[str, int, str]] = field(default_factory=list)  # file, offset, reason
    records: int = 0
    stopped_early: bool = False  # the as-of point came before the end of the sources


def is_snapshot_file(path: Path) -> bool:
    """Whether `path` names a snapshot (or bootstrap) file rather than a log segment."""
    return path.name == BOOTSTRAP_FILE or path.name.endswith(".checkpoint")


def partition_dir(path: Path) -> Path:
    """`__cluster_metadata-0` given itself or the metadata log dir holding it."""
    inner = path / METADATA_PARTITION_DIR
    return inner if inner.is_dir() else path


def _snapshot_timestamp(path: Path) -> int:
    """LastContainedLogTimestamp from a snapshot's header (-1 when it has none)."""
    for e in read_entries(path):
        if e.control_type == 3 and e.control is not None:
            return int(e.control["LastContainedLogTimestamp"])
        break
    return -1


def choose_sources(path: Path, as_of: AsOf) -> tuple[Path | None, list[Path]]:
    """The snapshot to start from and the log segments to replay after it."""
    d = partition_dir(path)
    logs, snaps = metadata_files(d)
    chosen: Path | None = None
    for snap in snaps:
        sid = snapshot_id(snap)
        assert sid is not None
        if as_of.offset is not None and sid.end_offset - 1 > as_of.offset:
            continue
        if as_of.time is not None and _snapshot_timestamp(snap) > as_of.time:
            continue
        chosen = snap  # sorted by end offset: the last that fits is the newest
    if chosen is None and not logs:
        boot = d.parent / BOOTSTRAP_FILE if d.name == METADATA_PARTITION_DIR else d / BOOTSTRAP_FILE
        if boot.is_file():
            return boot, []
    if chosen is not None:
        sid = snapshot_id(chosen)
        assert sid is not None
        # Segments that may hold records at or after the snapshot's end.
        keep: list[Path] = []
        for i, log in enumerate(logs):
            next_base = int(logs[i + 1].stem) if i + 1 < len(logs) else None
            if next_base is None or next_base > sid.end_offset:
                keep.append(log)
        logs = keep
    return chosen, logs


def replay_files(
    snapshot: Path | None, logs: list[Path], as_of: AsOf | None = None
) -> ReplayResult:
    """Replay `snapshot` (if any), then `logs` in order, up to `as_of`."""
    stop = as_of or AsOf()
    image = MetadataImage()
    result = ReplayResult(image, snapshot, list(logs))
    start = 0
    if snapshot is not None:
        sid = snapshot_id(snapshot)
        end = sid.end_offset if sid is not None else 0
        epoch = sid.epoch if sid is not None else 0
        ts = -1
        for e in read_entries(snapshot):
            if e.error is not None:
                result.errors.append((str(snapshot), e.offset, e.error))
                continue
            if e.control_type == 3 and e.control is not None:
                ts = int(e.control["LastContainedLogTimestamp"])
            if e.record is not None:
                r = e.record
                image.apply_data(r.api_key, r.version, r.data, end - 1, ts, epoch)
                result.records += 1
        image.provenance = Provenance(end - 1, epoch, ts)
        start = end
    for log in logs:
        for e in read_entries(log):
            if e.offset >= 0 and e.offset < start:
                continue
            if not stop.before(e):
                result.stopped_early = True
                return result
            if e.error is not None:
                result.errors.append((str(log), e.offset, e.error))
                if e.offset < 0:
                    break  # damage: the rest of this file cannot be read
                continue
            image.apply(e)
            if e.record is not None:
                result.records += 1
    return result


def replay_path(path: Path, as_of: AsOf | None = None) -> ReplayResult:
    """Replay a metadata directory, or a single snapshot or log file, up to `as_of`."""
    stop = as_of or AsOf()
    if path.is_dir():
        snapshot, logs = choose_sources(path, stop)
        return replay_files(snapshot, logs, stop)
    if is_snapshot_file(path):
        return replay_files(path, [], stop)
    return replay_files(None, [path], stop)


def replay_paths(paths: list[Path], as_of: AsOf | None = None) -> ReplayResult:
    """Replay the given files: snapshots first (the newest), then logs by base offset."""
    if len(paths) == 1:
        return replay_path(paths[0], as_of)
    snaps = [p for p in paths if is_snapshot_file(p)]
    logs = sorted(
        (p for p in paths if not is_snapshot_file(p)),
        key=lambda p: int(p.stem) if p.stem.isdigit() else 0,
    )

    def end(p: Path) -> int:
        sid = snapshot_id(p)
        return -1 if sid is None else sid.end_offset

    snap = max(snaps, key=end, default=None)
    return replay_files(snap, logs, as_of)


def timeline_baseline(partition: Path, first_offset: int) -> Path | None:
    """The snapshot a history starting at `first_offset` builds on (None from offset 0).

    The newest snapshot ending at or before the log's first offset: the state of the
    cluster just before the first record still in the log.
    """
    if first_offset <= 0:
        return None
    _logs, snaps = metadata_files(partition)
    best: Path | None = None
    for snap in snaps:
        sid = snapshot_id(snap)
        if sid is not None and sid.end_offset <= first_offset:
            best = snap
    return best
