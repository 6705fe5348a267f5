"""``partition.metadata``: binds a partition directory to its topic id (KIP-516).

Kafka writes exactly ``version: 0\\ntopic_id: <id>`` — no trailing newline — where
the id is a Kafka ``Uuid``: 16 bytes in URL-safe base64 without padding (22
characters). Kafka's reader splits each line on ``":\\s+"``, accepts any version
>= 0 for downgrade compatibility, and rejects the all-zero id. kt reads version
0 only (there is no other) and reports anything else precisely.

The Uuid helpers here are Kafka's ``Uuid.toString`` / ``Uuid.fromString``.
"""

from __future__ import annotations

import base64
import binascii
import os
import re
import uuid as _uuid
from dataclasses import dataclass
from pathlib import Path

from kt.storage.atomic import atomic_write
from kt.storage.checkpoint import decode_text, java_lines, parse_java_int
from kt.storage.errors import CorruptCheckpointError, UnsupportedFormatError

PARTITION_METADATA_VERSION = 0
ZERO_UUID = b"\x00" * 16
METADATA_TOPIC_ID = (1).to_bytes(16, "big")  # reserved for __cluster_metadata

_KEY_VALUE = re.compile(r":[ \t\n\x0b\f\r]+")


def uuid_to_str(raw: bytes) -> str:
    """Kafka's string form of a 16-byte Uuid: URL-safe base64, no padding."""
    if len(raw) != 16:
        raise ValueError(f"a Uuid is 16 bytes, got {len(raw)}")
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode("ascii")


def uuid_from_str(text: str) -> bytes:
    """Parse a Kafka Uuid string (ValueError when it is not 16 bytes of base64url)."""
    if len(text) > 24:
        raise ValueError(f"{text[:24]!r}... is too long to be a base64 Uuid")
    if not re.fullmatch(r"[A-Za-z0-9_-]*={0,2}", text):
        raise ValueError(f"{text!r} is not URL-safe base64")
    padded = text.rstrip("=")
    padded += "=" * (-len(padded) % 4)
    try:
        raw = base64.urlsafe_b64decode(padded)
    except (binascii.Error, ValueError) as exc:
        raise ValueError(f"{text!r} is not valid base64: {exc}") from None
    if len(raw) != 16:
        raise ValueError(f"{text!r} decodes to {len(raw)} bytes, not the 16 of a Uuid")
    return raw


def random_uuid() -> bytes:
    """A random Kafka Uuid (never the zero or the metadata-topic id, nor starting with '-')."""
    while True:
        raw = _uuid.uuid4().bytes
        # Kafka's Uuid.randomUuid also avoids ids whose string starts with '-'
        # (they look like command-line options).
        if raw not in (ZERO_UUID, METADATA_TOPIC_ID) and not uuid_to_str(raw).startswith("-"):
            return raw


@dataclass(frozen=True, slots=True)
class PartitionMetadata:
    """The content of a partition.metadata file."""

    topic_id: str  # Kafka's base64 string form
    version: int = PARTITION_METADATA_VERSION

    @property
    def topic_id_bytes(self) -> bytes:
        """The 16 raw bytes of the topic id."""
        return uuid_from_str(self.topic_id)


def parse_partition_metadata(data: bytes | str, path: str | None = None) -> PartitionMetadata:
    """Parse partition.metadata; CorruptCheckpointError (or UnsupportedFormatError for a
    well-formed version other than 0)."""
    lines = java_lines(decode_text(data, path))
    if not lines:
        raise CorruptCheckpointError(
            "empty file (expected 'version: 0' and 'topic_id: ...')", path=path
        )
    fields = _KEY_VALUE.split(lines[0])
    if len(fields) != 2 or fields[0] != "version":
        raise CorruptCheckpointError(
            f"line 1: malformed {lines[0]!r} (expected 'version: 0')", path=path
        )
    version = parse_java_int(fields[1])
    if version is None:
        raise CorruptCheckpointError(f"line 1: malformed version {fields[1]!r}", path=path)
    if version != PARTITION_METADATA_VERSION:
        raise UnsupportedFormatError(
            f"line 1: partition metadata version {version} (kt reads version 0)", path=path
        )
    if len(lines) < 2:
        raise CorruptCheckpointError("line 2: missing 'topic_id: ...'", path=path)
    if len(lines) > 2:
        raise CorruptCheckpointError(f"line 3: unexpected extra line {lines[2]!r}", path=path)
    fields = _KEY_VALUE.split(lines[1])
    if len(fields) != 2 or fields[0] != "topic_id":
        raise CorruptCheckpointError(
            f"line 2: malformed {lines[1]!r} (expected 'topic_id: <id>')", path=path
        )
    try:
        raw = uuid_from_str(fields[1])
    except ValueError as exc:
        raise CorruptCheckpointError(f"line 2: invalid topic id: {exc}", path=path) from None
    if raw == ZERO_UUID:
        raise CorruptCheckpointError("line 2: the topic id is the all-zero Uuid", path=path)
    return PartitionMetadata(fields[1], version)


def read_partition_metadata(path: str | os.PathLike[str]) -> PartitionMetadata:
    """Read and validate a partition.metadata file."""
    return parse_partition_metadata(Path(path).read_bytes(), str(path))


def encode_partition_metadata(meta: PartitionMetadata) -> bytes:
    """Kafka's exact bytes for ``meta`` (no trailing newline)."""
    raw = uuid_from_str(meta.topic_id)
    if raw == ZERO_UUID:
        raise ValueError("the topic id must not be the all-zero Uuid")
    return f"version: {meta.version}\ntopic_id: {uuid_to_str(raw)}".encode("ascii")


def write_partition_metadata(path: str | os.PathLike[str], meta: PartitionMetadata) -> None:
    """Write partition.metadata atomically."""
    atomic_write(path, encode_partition_metadata(meta))
