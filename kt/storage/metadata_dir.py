"""What a KRaft metadata log directory holds, read offline (for `kt log-dirs inspect`).

A KRaft node's `metadata.log.dir` holds `bootstrap.checkpoint` (written by
`kafka-storage format`: the initial metadata.version and other records) and the
`__cluster_metadata-0` partition: its `.log` segments with `.index`/`.timeindex`,
snapshots `<end offset>-<epoch>.checkpoint`, `quorum-state`, `leader-epoch-checkpoint`
and `partition.metadata`. `inspect_metadata_dir` reports the log's start and end
offsets and last write, the snapshots, the quorum state and the bootstrap
metadata.version, with findings in the same problem/warning terms as the rest of
a log directory's inspection.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from kt.storage.errors import StorageError
from kt.storage.file_records import Damage, FileRecords
from kt.storage.metadata_log import (
    BOOTSTRAP_FILE,
    METADATA_PARTITION_DIR,
    QUORUM_STATE_FILE,
    metadata_files,
    read_entries,
    snapshot_id,
)
from kt.storage.quorum_state import QuorumState, read_quorum_state


@dataclass(slots=True)
class MetadataFinding:
    """A problem or warning about a file of the metadata directory."""

    path: str
    message: str
    problem: bool


@dataclass(slots=True)
class SnapshotReport:
    """One snapshot file."""

    file: str
    end_offset: int
    epoch: int
    size: int
    records: int | None = None  # counted when the snapshot was read (verify)
    error: str | None = None


@dataclass(slots=True)
class MetadataDirReport:
    """The KRaft metadata found in a log directory."""

    partition_dir: str | None
    segments: int = 0
    size: int = 0
    log_start_offset: int | None = None
    log_end_offset: int | None = None
    last_batch_epoch: int | None = None
    last_batch_timestamp: int | None = None
    snapshots: list[SnapshotReport] = field(default_factory=list)
    quorum_state: QuorumState | None = None
    quorum_state_error: str | None = None
    bootstrap_metadata_version: int | None = None
    bootstrap_error: str | None = None
    findings: list[MetadataFinding] = field(default_factory=list)

    @property
    def latest_snapshot(self) -> SnapshotReport | None:
        """The snapshot with the highest end offset."""
        return max(self.snapshots, key=lambda s: s.end_offset, default=None)


def inspect_metadata_dir(log_dir: Path, *, verify: bool = False) -> MetadataDirReport | None:
    """The KRaft metadata of `log_dir`, or None when it holds none.

    With `verify`, snapshots are read whole (header, records, footer checked).
    """
    part = log_dir / METADATA_PARTITION_DIR
    boot = log_dir / BOOTSTRAP_FILE
    if not part.is_dir() and not boot.is_file():
        return None
    rep = MetadataDirReport(str(part) if part.is_dir() else None)
    if boot.is_file():
        _read_bootstrap(boot, rep)
    if part.is_dir():
        _read_partition(part, rep, verify)
    return rep


def _read_bootstrap(path: Path, rep: MetadataDirReport) -> None:
    try:
        for e in read_entries(path):
            if e.error is not None:
                rep.bootstrap_error = e.error
                rep.findings.append(MetadataFinding(str(path), f"corrupt: {e.error}", True))
                return
            r = e.record
            if r is not None and r.api_key == 12 and r.data["Name"] == "metadata.version":
                rep.bootstrap_metadata_version = r.data["FeatureLevel"]
    except OSError as exc:
        rep.bootstrap_error = str(exc)
        rep.findings.append(MetadataFinding(str(path), f"unreadable: {exc}", True))


def _read_partition(part: Path, rep: MetadataDirReport, verify: bool) -> None:
    logs, snaps = metadata_files(part)
    rep.segments = len(logs)
    for log in logs:
        size = log.stat().st_size
        rep.size += size
        if rep.log_start_offset is None:
            rep.log_start_offset = int(log.stem)
        try:
            with open(log, "rb") as f:
                fr = FileRecords(f)
                for head in fr.headers(0, fr.size):
                    if isinstance(head, Damage):
                        rep.findings.append(
                            MetadataFinding(
                                str(log),
                                f"invalid bytes from position {head.position}: {head.reason}",
                                True,
                            )
                        )
                        break
                    rep.log_end_offset = head.next_offset
                    if head.header is not None:
                        rep.last_batch_epoch = head.header.partition_leader_epoch
                    rep.last_batch_timestamp = head.max_timestamp
        except (OSError, StorageError) as exc:
            rep.findings.append(MetadataFinding(str(log), f"unreadable: {exc}", True))
    if rep.log_end_offset is None and rep.log_start_offset is not None:
        rep.log_end_offset = rep.log_start_offset
    for snap in snaps:
        sid = snapshot_id(snap)
        assert sid is not None
        s = SnapshotReport(str(snap), sid.end_offset, sid.epoch, snap.stat().st_size)
        if verify:
            _verify_snapshot(snap, s, rep)
        rep.snapshots.append(s)
    for leftover in sorted(part.glob("*.checkpoint.part")):
        rep.findings.append(
            MetadataFinding(str(leftover), "a partial snapshot (Kafka deletes it at start)", False)
        )
    latest = rep.latest_snapshot
    if (
        latest is not None
        and rep.log_end_offset is not None
        and latest.end_offset > rep.log_end_offset
        and rep.segments
    ):
        rep.findings.append(
            MetadataFinding(
                latest.file,
                f"snapshot ends at offset {latest.end_offset}, beyond the log's end "
                f"{rep.log_end_offset}",
                False,
            )
        )
    qs = part / QUORUM_STATE_FILE
    if qs.is_file():
        try:
            rep.quorum_state = read_quorum_state(qs)
        except (OSError, StorageError) as exc:
            rep.quorum_state_error = getattr(exc, "message", str(exc))
            rep.findings.append(
                MetadataFinding(str(qs), f"corrupt quorum-state: {rep.quorum_state_error}", True)
            )
    else:
        rep.findings.append(
            MetadataFinding(str(qs), "missing (a KRaft node writes it on first start)", False)
        )


def _verify_snapshot(path: Path, s: SnapshotReport, rep: MetadataDirReport) -> None:
    count = 0
    first: int | None = None
    last: int | None = None
    for i, e in enumerate(read_entries(path)):
        if e.error is not None:
            s.error = f"offset {e.offset}: {e.error}"
            break
        if i == 0:
            first = e.control_type
        last = e.control_type
        if not e.is_control:
            count += 1
    s.records = count
    if s.error is None and first != 3:
        s.error = "does not start with a SnapshotHeader"
    elif s.error is None and last != 4:
        s.error = "does not end with a SnapshotFooter (incomplete)"
    if s.error is not None:
        rep.findings.append(MetadataFinding(s.file, f"invalid snapshot: {s.error}", True))
