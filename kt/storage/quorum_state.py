"""KRaft's `quorum-state` file: who leads the metadata quorum, in which epoch, who voted.

`__cluster_metadata-0/quorum-state` holds one line of JSON: the QuorumStateData
fields of its data version plus `"data_version"` (0 or 1), written atomically by
Kafka's FileQuorumStateStore. Version 0 (kraft.version 0) has clusterId,
leaderId, leaderEpoch, votedId, appliedOffset and currentVoters; version 1
(KIP-853, dynamic quorums) has leaderId, leaderEpoch, votedId and
votedDirectoryId. As in Kafka, every field of the version must be present.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kt.storage.errors import CorruptCheckpointError
from kt.storage.metadata_codec import ZERO_UUID, uuid_bytes
from kt.storage.metadata_schema import QUORUM_STATE, in_range

QUORUM_STATE_FILE = "quorum-state"
_INT32 = (-(2**31), 2**31 - 1)


@dataclass(frozen=True)
class QuorumState:
    """The parsed file. Fields absent from the data version are None."""

    data_version: int
    leader_id: int
    leader_epoch: int
    voted_id: int
    cluster_id: str | None = None
    applied_offset: int | None = None
    current_voters: list[int] | None = None
    voted_directory_id: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)  # fields kt does not know

    @property
    def has_leader(self) -> bool:
        """Whether the file names a leader (-1: none known when it was written)."""
        return self.leader_id >= 0

    @property
    def has_voted(self) -> bool:
        """Whether this replica voted in the epoch (-1: it did not)."""
        return self.voted_id >= 0

    def as_json(self) -> dict[str, Any]:
        """The file's fields under Kafka's names, plus data_version, in Kafka's order."""
        out: dict[str, Any] = {}
        if self.data_version == 0:
            out["clusterId"] = self.cluster_id
        out["leaderId"] = self.leader_id
        out["leaderEpoch"] = self.leader_epoch
        out["votedId"] = self.voted_id
        if self.data_version >= 1:
            out["votedDirectoryId"] = self.voted_directory_id
        if self.data_version == 0:
            out["appliedOffset"] = self.applied_offset
            out["currentVoters"] = (
                None
                if self.current_voters is None
                else [{"voterId": v} for v in self.current_voters]
            )
        out["data_version"] = self.data_version
        return out


def _int(obj: dict[str, Any], name: str, path: str, lo: int, hi: int) -> int:
    value = obj[name]
    if not isinstance(value, int) or isinstance(value, bool) or not lo <= value <= hi:
        raise CorruptCheckpointError(f"{name} {value!r} is not an integer in [{lo}, {hi}]", path)
    return value


def parse_quorum_state(data: bytes, path: str | None = None) -> QuorumState:
    """Parse the bytes of a quorum-state file; CorruptCheckpointError when it is invalid."""
    where = path or QUORUM_STATE_FILE
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise CorruptCheckpointError(f"not UTF-8 text: {exc}", where) from None
    lines = [ln for ln in text.splitlines() if ln.strip()]
    if len(lines) != 1:
        raise CorruptCheckpointError(
            f"expected one line of JSON, found {len(lines)} non-empty lines", where
        )
    try:
        obj = json.loads(lines[0])
    except ValueError as exc:
        raise CorruptCheckpointError(f"not JSON: {exc}", where) from None
    if not isinstance(obj, dict):
        raise CorruptCheckpointError("the JSON is not an object", where)
    if "data_version" not in obj:
        raise CorruptCheckpointError("no data_version field", where)
    version = obj["data_version"]
    if (
        not isinstance(version, int)
        or isinstance(version, bool)
        or not in_range(version, QUORUM_STATE.valid)
    ):
        raise CorruptCheckpointError(
            f"data_version {version!r} is not one kt knows (0 or 1)", where
        )
    known = {"data_version"}
    for f in QUORUM_STATE.fields:
        if in_range(version, f.versions):
            known.add(f.json_name)
            if f.json_name not in obj:
                raise CorruptCheckpointError(
                    f"QuorumStateData: unable to locate field '{f.json_name}', which is "
                    f"mandatory in version {version}",
                    where,
                )
    leader = _int(obj, "leaderId", where, *_INT32)
    epoch = _int(obj, "leaderEpoch", where, *_INT32)
    voted = _int(obj, "votedId", where, *_INT32)
    extra = {k: v for k, v in obj.items() if k not in known}
    if version == 0:
        cluster = obj["clusterId"]
        if not isinstance(cluster, str):
            raise CorruptCheckpointError(f"clusterId {cluster!r} is not a string", where)
        applied = _int(obj, "appliedOffset", where, -(2**63), 2**63 - 1)
        raw_voters = obj["currentVoters"]
        voters: list[int] | None = None
        if raw_voters is not None:
            if not isinstance(raw_voters, list):
                raise CorruptCheckpointError("currentVoters is not a list", where)
            voters = []
            for v in raw_voters:
                if not isinstance(v, dict) or "voterId" not in v:
                    raise CorruptCheckpointError(f"currentVoters entry {v!r} has no voterId", where)
                voters.append(_int(v, "voterId", where, *_INT32))
        return QuorumState(0, leader, epoch, voted, cluster, applied, voters, extra=extra)
    directory = obj["votedDirectoryId"]
    if not isinstance(directory, str):
        raise CorruptCheckpointError(f"votedDirectoryId {directory!r} is not a string", where)
    try:
        uuid_bytes(directory)
    except ValueError as exc:
        raise CorruptCheckpointError(f"votedDirectoryId: {exc}", where) from None
    return QuorumState(1, leader, epoch, voted, voted_directory_id=directory, extra=extra)


def read_quorum_state(path: str | Path) -> QuorumState:
    """Read and parse a quorum-state file."""
    p = Path(path)
    return parse_quorum_state(p.read_bytes(), str(p))


def encode_quorum_state(state: QuorumState) -> bytes:
    """The file's bytes as Kafka writes them (one line of compact JSON, no newline)."""
    return json.dumps(state.as_json(), separators=(",", ":")).encode("utf-8")


__all__ = [
    "QUORUM_STATE_FILE",
    "ZERO_UUID",
    "QuorumState",
    "encode_quorum_state",
    "parse_quorum_state",
    "read_quorum_state",
]
