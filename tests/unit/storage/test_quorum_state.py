"""KRaft's quorum-state file, data versions 0 and 1, and what makes one corrupt."""

from __future__ import annotations

import json

import pytest

from kt.storage.errors import CorruptCheckpointError
from kt.storage.quorum_state import encode_quorum_state, parse_quorum_state

V0 = (
    b'{"clusterId":"","leaderId":1,"leaderEpoch":1,"votedId":-1,"appliedOffset":0,'
    b'"currentVoters":[{"voterId":1}],"data_version":0}'
)
V1 = (
    b'{"leaderId":-1,"leaderEpoch":2,"votedId":1,'
    b'"votedDirectoryId":"AAECAwQFBgcICQoLDA0ODw","data_version":1}'
)


def test_version_0() -> None:
    s = parse_quorum_state(V0)
    assert (s.data_version, s.leader_id, s.leader_epoch, s.voted_id) == (0, 1, 1, -1)
    assert s.cluster_id == "" and s.applied_offset == 0 and s.current_voters == [1]
    assert s.has_leader and not s.has_voted
    assert encode_quorum_state(s) == V0  # Kafka's field order, compact


def test_version_1() -> None:
    s = parse_quorum_state(V1 + b"\n")
    assert (s.data_version, s.leader_id, s.leader_epoch, s.voted_id) == (1, -1, 2, 1)
    assert s.voted_directory_id == "AAECAwQFBgcICQoLDA0ODw"
    assert s.current_voters is None and s.cluster_id is None
    assert not s.has_leader and s.has_voted
    assert encode_quorum_state(s) == V1


def test_null_voters_and_unknown_fields() -> None:
    obj = json.loads(V0)
    obj["currentVoters"] = None
    obj["futureField"] = 3
    s = parse_quorum_state(json.dumps(obj).encode())
    assert s.current_voters is None and s.extra == {"futureField": 3}


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (b"", "expected one line of JSON, found 0"),
        (V0 + b"\n" + V0, "expected one line of JSON, found 2"),
        (b"{not json", "not JSON"),
        (b"[1]", "not an object"),
        (V0.replace(b',"data_version":0', b""), "no data_version"),
        (V0.replace(b'"data_version":0', b'"data_version":2'), "data_version 2"),
        (V0.replace(b'"clusterId":"",', b""), "unable to locate field 'clusterId'"),
        (V1.replace(b'"votedDirectoryId":"AAECAwQFBgcICQoLDA0ODw",', b""),
         "unable to locate field 'votedDirectoryId', which is mandatory in version 1"),
        (V0.replace(b'"leaderId":1', b'"leaderId":"1"'), "leaderId '1' is not an integer"),
        (V1.replace(b"AAECAwQFBgcICQoLDA0ODw", b"xx"), "votedDirectoryId"),
        (b"\xff\xfe", "not UTF-8"),
    ],
)  # fmt: skip
def test_corrupt_files(data: bytes, message: str) -> None:
    with pytest.raises(CorruptCheckpointError, match=message):
        parse_quorum_state(data, "quorum-state")
