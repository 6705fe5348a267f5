"""The KRaft metadata log and its snapshots as a stream of decoded entries, and their writer.

`__cluster_metadata-0/*.log`, snapshots (`<20-digit end offset>-<10-digit
epoch>.checkpoint`) and `bootstrap.checkpoint` are all ordinary v2 batch files:
data batches of framed metadata records and control batches (LeaderChange,
SnapshotHeader/Footer, KRaftVersion, Voters). `read_entries` yields one
`MetadataEntry` per record with its offset, time and Raft epoch, the decoded
record or control message, or the reason it does not decode; damage in the file
is an entry too, so replay and timelines can say where they stopped trusting it.

The writer builds such files the way Kafka's `RecordsSnapshotWriter` and
`BatchFileWriter` do; kt's tests use it for fixtures, and `kt metadata` could
emit snapshots with it.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kt.storage import record_batch as v2
from kt.storage.errors import CorruptRecordError, StorageError
from kt.storage.file_records import Damage, FileRecords
from kt.storage.metadata_codec import (
    MetadataParseError,
    MetadataRecord,
    decode_control,
    decode_metadata_record,
    encode_message,
    encode_metadata_record,
)
from kt.storage.metadata_schema import CONTROL_RECORDS, MessageSchema

METADATA_PARTITION_DIR = "__cluster_metadata-0"
BOOTSTRAP_FILE = "bootstrap.checkpoint"
QUORUM_STATE_FILE = "quorum-state"
SNAPSHOT_NAME = re.compile(r"^(\d{20})-(\d{10})\.checkpoint$")
CONTROL_LEADER_CHANGE = 2
CONTROL_SNAPSHOT_HEADER = 3
CONTROL_SNAPSHOT_FOOTER = 4
CONTROL_KRAFT_VERSION = 5
CONTROL_KRAFT_VOTERS = 6


@dataclass(slots=True)
class MetadataEntry:
    """One record of a metadata log or snapshot file (or a damaged region in it)."""

    offset: int
    timestamp: int
    epoch: int  # the batch's partitionLeaderEpoch: the Raft epoch that wrote it
    record: MetadataRecord | None = None
    control_type: int | None = None  # a control record's type id
    control_schema: MessageSchema | None = None
    control: dict[str, Any] | None = None
    error: str | None = None  # why the record (or region) does not decode
    position: int = 0  # of its batch in the file

    @property
    def is_control(self) -> bool:
        """Whether this is a control record."""
        return self.control_type is not None


@dataclass(frozen=True, slots=True)
class SnapshotId:
    """A snapshot's end offset (exclusive) and epoch, from its file name."""

    end_offset: int
    epoch: int


def snapshot_id(path: str | os.PathLike[str]) -> SnapshotId | None:
    """The id of a `<offset>-<epoch>.checkpoint` file, None for any other name."""
    m = SNAPSHOT_NAME.match(os.path.basename(os.fspath(path)))
    return SnapshotId(int(m[1]), int(m[2])) if m else None


def snapshot_file_name(end_offset: int, epoch: int) -> str:
    """Kafka's name for a snapshot file."""
    return f"{end_offset:020d}-{epoch:010d}.checkpoint"


def read_entries(path: str | os.PathLike[str]) -> Iterator[MetadataEntry]:
    """Every record of a metadata log segment, snapshot or bootstrap file, in order.

    A record that does not decode is an entry with `error` (and so is a region of
    the file that is not a valid batch: reading stops there).
    """
    with open(path, "rb") as f:
        fr = FileRecords(f)
        for item in fr.batches(0, fr.size):
            if isinstance(item, Damage):
                yield MetadataEntry(-1, -1, -1, error=item.reason, position=item.position)
                return
            h = item.header
            if h is None:
                yield MetadataEntry(
                    item.last_offset,
                    -1,
                    -1,
                    error=f"a legacy (magic {item.magic}) message in a metadata log",
                    position=item.position,
                )
                continue
            if not item.is_valid():
                yield MetadataEntry(
                    h.base_offset,
                    h.max_timestamp,
                    h.partition_leader_epoch,
                    error=f"the batch at position {item.position} fails its CRC check",
                    position=item.position,
                )
                continue
            epoch = h.partition_leader_epoch
            try:
                tuples = list(v2.iter_record_tuples(h, item.data))
            except StorageError as exc:
                yield MetadataEntry(
                    h.base_offset, h.max_timestamp, epoch, error=exc.message, position=item.position
                )
                continue
            for off, ts, k, val, _hdrs, _seq in tuples:
                yield entry_from_record(off, ts, epoch, h.is_control, k, val, item.position)


def entry_from_record(
    off: int, ts: int, epoch: int, control: bool, k: bytes | None, val: bytes | None, pos: int = 0
) -> MetadataEntry:
    """The entry of one record of a metadata log (decoded; `error` set when it does not)."""
    e = MetadataEntry(off, ts, epoch, position=pos)
    try:
        if control:
            _v, type_id = v2.parse_control_key(k)
            e.control_type = type_id
            if type_id in CONTROL_RECORDS:
                e.control_schema, e.control = decode_control(type_id, val)
        else:
            e.record = decode_metadata_record(val)
    except (MetadataParseError, CorruptRecordError) as exc:
        e.error = exc.message
    return e


def metadata_files(directory: str | os.PathLike[str]) -> tuple[list[Path], list[Path]]:
    """(.log segments by base offset, snapshots by end offset) of a metadata partition dir."""
    d = Path(directory)
    logs = sorted(
        (p for p in d.iterdir() if p.suffix == ".log" and p.stem.isdigit()),
        key=lambda p: int(p.stem),
    )
    snaps = sorted(
        (p for p in d.iterdir() if snapshot_id(p) is not None),
        key=lambda p: (snapshot_id(p) or SnapshotId(0, 0)).end_offset,
    )
    return logs, snaps


# --- writing ---------------------------------------------------------------------


@dataclass
class MetadataBatchWriter:
    """Builds metadata log / snapshot bytes batch by batch, assigning offsets."""

    next_offset: int = 0
    epoch: int = 0
    out: bytearray = field(default_factory=bytearray)

    def records(self, records: Iterable[tuple[int, int, dict[str, Any]]], timestamp: int) -> bytes:
        """Append a data batch of (apiKey, version, data) records; return its bytes."""
        specs = [
            v2.RecordSpec(None, encode_metadata_record(k, ver, d), timestamp=timestamp)
            for k, ver, d in records
        ]
        return self._append(specs, control=False)

    def raw(self, values: Iterable[bytes], timestamp: int) -> bytes:
        """Append a data batch of raw record values (e.g. deliberately damaged ones)."""
        specs = [v2.RecordSpec(None, val, timestamp=timestamp) for val in values]
        return self._append(specs, control=False)

    def control(self, items: Iterable[tuple[int, dict[str, Any]]], timestamp: int) -> bytes:
        """Append a control batch of (control type, data) records (types 2-6)."""
        specs = [
            v2.RecordSpec(
                type_id.to_bytes(4, "big"),  # version 0 (int16), then the type (int16)
                encode_message(CONTROL_RECORDS[type_id][0], 0, data),
                timestamp=timestamp,
            )
            for type_id, data in items
        ]
        return self._append(specs, control=True)

    def _append(self, specs: list[v2.RecordSpec], control: bool) -> bytes:
        batch = v2.build_batch(
            specs,
            base_offset=self.next_offset,
            partition_leader_epoch=self.epoch,
            is_control=control,
        )
        self.next_offset += len(specs)
        self.out += batch
        return batch


def build_snapshot(
    records: Iterable[tuple[int, int, dict[str, Any]]],
    *,
    last_contained_timestamp: int = 0,
    timestamp: int = 0,
    epoch: int = 0,
    batch_size: int = 100,
    voters: dict[str, Any] | None = None,
) -> bytes:
    """A snapshot file: SnapshotHeader (+ KRaftVersion/Voters), data batches, footer.

    Snapshot batches start at offset 0 as Kafka's RecordsSnapshotWriter writes them.
    """
    w = MetadataBatchWriter(0, epoch)
    header: list[tuple[int, dict[str, Any]]] = [
        (
            CONTROL_SNAPSHOT_HEADER,
            {"Version": 0, "LastContainedLogTimestamp": last_contained_timestamp},
        )
    ]
    if voters is not None:
        header.append((CONTROL_KRAFT_VERSION, {"Version": 0, "KRaftVersion": 1}))
        header.append((CONTROL_KRAFT_VOTERS, voters))
    w.control(header, timestamp)
    pending = list(records)
    for i in range(0, len(pending), batch_size):
        w.records(pending[i : i + batch_size], timestamp)
    w.control([(CONTROL_SNAPSHOT_FOOTER, {"Version": 0})], timestamp)
    return bytes(w.out)
