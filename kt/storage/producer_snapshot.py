"""Producer-state snapshots (``<offset>.snapshot``), schema ``ProducerSnapshot`` v1.

Layout (big-endian): Version int16 (= 1) at 0, Crc uint32 at 2 — CRC-32C of the
bytes from offset 6 to the end of the file — then the entry count int32 at 6 and
that many 46-byte entries: ProducerId int64, Epoch int16, LastSequence int32,
LastOffset int64, OffsetDelta int32, Timestamp int64, CoordinatorEpoch int32,
CurrentTxnFirstOffset int64 (-1: no ongoing transaction).

The file name is the offset the snapshot was taken at (the log end offset then),
20 digits. Kafka writes the entries of a hash map, so their order carries no
meaning; kt keeps the order it reads.
"""

from __future__ import annotations

import os
import struct
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

import crc32c

from kt.storage.atomic import atomic_write
from kt.storage.errors import CorruptSnapshotError
from kt.storage.log_files import (
    PRODUCER_SNAPSHOT_FILE_SUFFIX,
    offset_file_prefix,
    parse_segment_file_name,
)

PRODUCER_SNAPSHOT_VERSION = 1
CRC_OFFSET = 2
PRODUCER_ENTRIES_OFFSET = 6  # the CRC covers the bytes from here to EOF
HEADER_SIZE = 10  # version, crc, entry count
ENTRY_SIZE = 46
NO_TXN_FIRST_OFFSET = -1

_HEADER = struct.Struct(">hIi")
_ENTRY = struct.Struct(">qhiqiqiq")


class ProducerSnapshotEntry(NamedTuple):
    """The state of one producer at snapshot time."""

    producer_id: int
    epoch: int
    last_sequence: int
    last_offset: int
    offset_delta: int
    timestamp: int
    coordinator_epoch: int
    current_txn_first_offset: int = NO_TXN_FIRST_OFFSET


@dataclass(frozen=True, slots=True)
class ProducerSnapshot:
    """A decoded snapshot file."""

    offset: int | None  # from the file name; None when the name is not <20 digits>.snapshot
    entries: list[ProducerSnapshotEntry]
    crc: int


def snapshot_file_name(offset: int) -> str:
    """``<offset, 20 digits>.snapshot``."""
    return offset_file_prefix(offset) + PRODUCER_SNAPSHOT_FILE_SUFFIX


def parse_producer_snapshot(
    data: bytes, path: str | None = None
) -> tuple[list[ProducerSnapshotEntry], int]:
    """Decode and validate snapshot bytes; returns (entries, crc).

    Raises CorruptSnapshotError, as Kafka's ``readSnapshot`` would, for an unknown
    version, a truncated or over-long body, or a CRC mismatch.
    """
    if len(data) < 2:
        raise CorruptSnapshotError(
            f"too short for a snapshot: {len(data)} bytes (the header alone is {HEADER_SIZE})",
            path=path,
        )
    (version,) = struct.unpack_from(">h", data, 0)
    if version != PRODUCER_SNAPSHOT_VERSION:
        raise CorruptSnapshotError(
            f"unknown snapshot version {version} (expected {PRODUCER_SNAPSHOT_VERSION})",
            path=path,
            position=0,
        )
    if len(data) < HEADER_SIZE:
        raise CorruptSnapshotError(
            f"truncated header: {len(data)} bytes, need {HEADER_SIZE}",
            path=path,
            position=len(data),
        )
    _, stored_crc, count = _HEADER.unpack_from(data, 0)
    if count < 0:
        raise CorruptSnapshotError(
            f"negative producer entry count {count}", path=path, position=PRODUCER_ENTRIES_OFFSET
        )
    body = len(data) - HEADER_SIZE
    expected = count * ENTRY_SIZE
    if body < expected:
        raise CorruptSnapshotError(
            f"truncated: {count} entries need {expected} bytes after the header, found {body}",
            path=path,
            position=len(data),
        )
    if body > expected:
        raise CorruptSnapshotError(
            f"{body - expected} unexpected bytes after the {count} entries",
            path=path,
            position=HEADER_SIZE + expected,
        )
    computed = crc32c.crc32c(data[PRODUCER_ENTRIES_OFFSET:])
    if computed != stored_crc:
        raise CorruptSnapshotError(
            f"CRC mismatch: stored {stored_crc:#010x}, computed {computed:#010x}",
            path=path,
            position=CRC_OFFSET,
        )
    entries = [ProducerSnapshotEntry(*f) for f in _ENTRY.iter_unpack(data[HEADER_SIZE:])]
    return entries, stored_crc


def read_producer_snapshot(path: str | os.PathLike[str]) -> ProducerSnapshot:
    """Read and validate a snapshot file."""
    data = Path(path).read_bytes()
    entries, crc = parse_producer_snapshot(data, str(path))
    parsed = parse_segment_file_name(Path(path).name)
    offset = parsed.base_offset if parsed is not None and parsed.kind == "snapshot" else None
    return ProducerSnapshot(offset, entries, crc)


def encode_producer_snapshot(entries: Iterable[ProducerSnapshotEntry]) -> bytes:
    """The bytes of a snapshot holding ``entries``, with its CRC."""
    items = list(entries)
    body = struct.pack(">i", len(items)) + b"".join(_ENTRY.pack(*e) for e in items)
    return struct.pack(">hI", PRODUCER_SNAPSHOT_VERSION, crc32c.crc32c(body)) + body


def write_producer_snapshot(
    path: str | os.PathLike[str], entries: Iterable[ProducerSnapshotEntry]
) -> None:
    """Write a snapshot atomically (name it with :func:`snapshot_file_name`)."""
    atomic_write(path, encode_producer_snapshot(entries))
