"""KRaft metadata directories in `kt checkpoint show`, `kt log-dirs inspect`, `kt index`."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner
from kraft_fixtures import incident_log

from kt.cli import cli
from kt.storage.metadata_log import build_snapshot

V0 = (
    '{"clusterId":"","leaderId":1,"leaderEpoch":3,"votedId":-1,"appliedOffset":0,'
    '"currentVoters":[{"voterId":1},{"voterId":2},{"voterId":3}],"data_version":0}'
)
V1 = (
    '{"leaderId":-1,"leaderEpoch":2,"votedId":1,'
    '"votedDirectoryId":"AAECAwQFBgcICQoLDA0ODw","data_version":1}'
)


def kt(*args: str | Path) -> tuple[int, str, str]:
    r = CliRunner().invoke(cli, [str(a) for a in args])
    if r.exception is not None and not isinstance(r.exception, SystemExit):
        raise r.exception
    assert "Traceback" not in r.stdout + r.stderr
    return r.exit_code, r.stdout, r.stderr


def kraft_dir(tmp_path: Path, quorum: str = V0) -> Path:
    info = incident_log(tmp_path)
    (info.directory / "quorum-state").write_text(quorum)
    (tmp_path / "bootstrap.checkpoint").write_bytes(
        build_snapshot([(12, 0, {"Name": "metadata.version", "FeatureLevel": 20})])
    )
    (tmp_path / "meta.properties").write_text(
        "version=1\ncluster.id=MkU3OEVBNTcwNTJENDM2Qk\nnode.id=1\n"
    )
    return tmp_path


def test_checkpoint_show_quorum_state_v0_and_v1(tmp_path: Path) -> None:
    qs = tmp_path / "quorum-state"
    qs.write_text(V0)
    code, out, _ = kt("checkpoint", "show", qs)
    assert code == 0
    assert "(quorum-state, data version 0)" in out
    assert "leaderEpoch    3" in out and "currentVoters  1,2,3" in out
    assert "votedId        -1 (not voted in this epoch)" in out
    qs.write_text(V1)
    code, out, _ = kt("checkpoint", "show", "--json", qs)
    assert code == 0
    doc = json.loads(out)
    assert doc["kind"] == "quorum-state" and doc["version"] == 1
    assert doc["state"] == json.loads(V1)


def test_checkpoint_corrupt_quorum_state_and_edit(tmp_path: Path) -> None:
    qs = tmp_path / "quorum-state"
    qs.write_text('{"leaderId":1}')
    code, _, err = kt("checkpoint", "show", qs)
    assert code == 1 and err.startswith("kt: error: ") and "data_version" in err
    code, _, err = kt("checkpoint", "edit", qs, "--set", "1=2")
    assert code == 2 and "only shows it" in err


def test_log_dirs_inspect_reports_kraft_metadata(tmp_path: Path) -> None:
    d = kraft_dir(tmp_path)
    code, out, err = kt("log-dirs", "inspect", "--verify-indexes", d)
    assert code == 0, out + err
    assert "KRaft metadata:" in out
    assert "bootstrap.checkpoint: metadata.version 20" in out
    assert "log: 2 segments" in out and "offsets 0..44 (end, exclusive)" in out
    assert "epoch 2" in out
    assert "snapshot 00000000000000000030-0000000001.checkpoint: end offset 30, epoch 1" in out
    assert "quorum-state (v0): leader 1, epoch 3, voted for none, voters 1,2,3" in out
    code, out, _ = kt("log-dirs", "inspect", "--json", d)
    k = json.loads(out)["kraft_metadata"]
    assert (k["log_start_offset"], k["log_end_offset"], k["segments"]) == (0, 44, 2)
    assert k["quorum_state"]["leaderId"] == 1
    assert k["bootstrap_metadata_version"] == 20
    assert [s["end_offset"] for s in k["snapshots"]] == [30]


def test_log_dirs_inspect_flags_kraft_damage(tmp_path: Path) -> None:
    d = kraft_dir(tmp_path, quorum="{broken")
    snap = next((d / "__cluster_metadata-0").glob("*.checkpoint"))
    snap.write_bytes(snap.read_bytes()[:-30])  # a torn snapshot: no footer
    code, out, _ = kt("log-dirs", "inspect", "--verify-indexes", d)
    assert code == 1
    assert "PROBLEM" in out and "corrupt quorum-state" in out
    assert "invalid snapshot" in out


def test_index_verify_and_rebuild_on_the_metadata_partition(tmp_path: Path) -> None:
    d = kraft_dir(tmp_path) / "__cluster_metadata-0"
    code, out, _ = kt("index", "rebuild", d)
    assert code == 0 and "00000000000000000000.index" in out
    code, out, _ = kt("index", "verify", d)
    assert code == 0 and "2 segments checked, 0 with problems" in out
    # A wrong time index entry is found.
    ti = next(d.glob("*.timeindex"))
    raw = bytearray(ti.read_bytes())
    raw[0:8] = (1).to_bytes(8, "big")
    raw[12:20] = (0).to_bytes(8, "big")
    ti.write_bytes(bytes(raw))
    code, out, _ = kt("index", "verify", d)
    assert code == 1
