"""`kt log-dirs inspect`: a log directory read offline, with a health verdict."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from kt.cli import cli

SEG = "00000000000000000000"


def run(*args: str) -> Result:
    return CliRunner().invoke(cli, ["log-dirs", "inspect", *args])


def writable_copy(src: Path, dst: Path) -> Path:
    shutil.copytree(src, dst)
    for p in [dst, *dst.rglob("*")]:
        p.chmod(0o755 if p.is_dir() else 0o644)
    return dst


@pytest.fixture
def kafka3_dir(tmp_path: Path, fixtures_dir: Path) -> Path:
    """logdir-3.x with the partitions its checkpoints name (test-0, tenitems-0,
    quickstart-events-0) put back in."""
    d = writable_copy(fixtures_dir / "logdir-3.x", tmp_path / "logdir-3.x")
    for name in ("test-0", "tenitems-0", "quickstart-events-0"):
        writable_copy(fixtures_dir / name, d / name)
    return d


def problems(result: Result) -> list[str]:
    return [line for line in result.output.splitlines() if line.startswith("PROBLEM ")]


def test_real_kafka_3x_dir_is_healthy(kafka3_dir: Path) -> None:
    result = run(str(kafka3_dir))
    assert result.exit_code == 0, result.output
    out = result.output
    assert "meta.properties: version 0, node id 1, cluster id bhKx9kzDTW6IYAX6MriLZQ" in out
    assert (
        "test-0 00000000000000000000.log: 231498 bytes, 109 batches, offsets 0..108, next 109"
        in out
    )
    assert "recovery-point-offset-checkpoint: 57 entries" in out
    assert "clean-shutdown marker: absent" in out
    assert problems(result) == []
    # Checkpoint entries of partitions not in the directory are only a warning.
    assert "entries for partitions not in this directory" in out
    assert out.rstrip().splitlines()[-1].startswith("HEALTHY: 3 partitions (0 unhealthy)")


def test_real_kafka_010_dir_is_healthy_with_verify_indexes(
    tmp_path: Path, fixtures_dir: Path
) -> None:
    d = writable_copy(fixtures_dir / "logdir-0.10", tmp_path / "logdir-0.10")
    result = run("--verify-indexes", "--json", str(d))
    assert result.exit_code == 0, result.output
    doc = json.loads(result.output)
    assert doc["healthy"] is True
    assert doc["meta_properties"] == {"version": 0, "node_id": 0, "cluster_id": None,
                                      "directory_id": None}  # fmt: skip
    by_name = {p["name"]: p for p in doc["partitions"]}
    assert set(by_name) == {"__consumer_offsets-40", "foo-0", "topic1-0"}
    foo = by_name["foo-0"]
    assert foo["log_end_offset"] == 204
    assert foo["checkpoints"]["replication-offset-checkpoint"] == 204
    assert foo["checkpoints"]["recovery-point-offset-checkpoint"] == 0
    assert foo["segments"][0]["first_offset"] == 0
    assert foo["segments"][0]["invalid_tail"] is None


def test_json_schema(kafka3_dir: Path) -> None:
    result = run("--json", str(kafka3_dir))
    assert result.exit_code == 0, result.output
    doc = json.loads(result.output)
    assert set(doc) == {
        "log_dir", "healthy", "locked", "clean_shutdown", "meta_properties",
        "meta_properties_error", "checkpoints", "partitions", "leftover_dirs",
        "stray_files", "problems", "warnings", "kraft_metadata",
    }  # fmt: skip
    assert set(doc["checkpoints"]) == {
        "recovery-point-offset-checkpoint", "replication-offset-checkpoint",
        "log-start-offset-checkpoint", "cleaner-offset-checkpoint",
    }  # fmt: skip
    assert doc["checkpoints"]["recovery-point-offset-checkpoint"]["entries"]["test-0"] == 109
    part = next(p for p in doc["partitions"] if p["name"] == "test-0")
    assert set(part) == {
        "name", "topic", "partition", "path", "healthy", "log_start_offset",
        "log_end_offset", "size", "checkpoints", "leader_epoch_entries", "topic_id",
        "producer_snapshots", "segments", "leftover_files", "stray_files", "problems",
        "warnings",
    }  # fmt: skip
    seg = part["segments"][0]
    assert seg["base_offset"] == 0 and seg["next_offset"] == 109 and seg["batches"] == 109
    assert seg["index_bytes"] == 45 * 8 and seg["timeindex_bytes"] == 46 * 12
    assert part["producer_snapshots"] == 1 and part["topic_id"]


def test_checkpoint_beyond_log_end(kafka3_dir: Path) -> None:
    ckpt = kafka3_dir / "log-start-offset-checkpoint"
    ckpt.write_text("0\n1\ntest 0 500\n")
    hw = kafka3_dir / "replication-offset-checkpoint"
    hw.write_text("0\n1\ntenitems 0 10\n")
    result = run(str(kafka3_dir))
    assert result.exit_code == 1, result.output
    assert problems(result) == [
        f"PROBLEM {hw}: high watermark of tenitems-0 is 10, beyond the log end offset 9",
        f"PROBLEM {ckpt}: log start offset of test-0 is 500, beyond the log end offset 109; "
        "a broker would delete every segment and restart the log empty at the checkpoint",
    ]
    assert "UNHEALTHY" in result.output
    doc = json.loads(run("--json", str(kafka3_dir)).output)
    verdicts = {p["name"]: p["healthy"] for p in doc["partitions"]}
    assert verdicts == {"test-0": False, "tenitems-0": False, "quickstart-events-0": True}


def test_torn_tail(kafka3_dir: Path) -> None:
    log = kafka3_dir / "tenitems-0" / f"{SEG}.log"
    size = log.stat().st_size
    with open(log, "r+b") as fh:
        fh.truncate(size - 10)
    result = run(str(kafka3_dir))
    assert result.exit_code == 1
    line, recovery = problems(result)
    assert line.startswith(f"PROBLEM {log}: invalid log tail: ")
    assert "is truncated" in line and "(recovery truncates it)" in line
    # The checkpointed recovery point (9) now lies beyond the torn log's end.
    assert recovery == (
        f"PROBLEM {kafka3_dir / 'recovery-point-offset-checkpoint'}: recovery point of "
        "tenitems-0 is 9, beyond the log end offset 8"
    )
    # The offsets stop at the last whole batch.
    assert "tenitems-0 00000000000000000000.log:" in result.output
    assert "offsets 0..7, next 8" in result.output


def test_leftover_swap_and_other_leftovers(kafka3_dir: Path) -> None:
    part = kafka3_dir / "quickstart-events-0"
    swap = part / f"{SEG}.log.swap"
    shutil.copy(part / f"{SEG}.log", swap)
    (part / f"{SEG}.index.deleted").write_bytes(b"")
    (kafka3_dir / "old-0.0123456789abcdef0123456789abcdef-delete").mkdir()
    (part / "notes.txt").write_text("hi")
    result = run("--json", str(kafka3_dir))
    assert result.exit_code == 1
    doc = json.loads(result.output)
    p = next(p for p in doc["partitions"] if p["name"] == "quickstart-events-0")
    assert p["leftover_files"] == [f"{SEG}.index.deleted", f"{SEG}.log.swap"]
    assert p["stray_files"] == ["notes.txt"]
    assert [f["path"] for f in p["problems"]] == [str(swap)]
    assert "leftover .swap file" in p["problems"][0]["message"]
    assert doc["leftover_dirs"] == ["old-0.0123456789abcdef0123456789abcdef-delete"]
    warned = {f["path"] for f in p["warnings"]}
    assert str(part / "notes.txt") in warned and str(part / f"{SEG}.index.deleted") in warned


def test_corrupt_meta_properties(kafka3_dir: Path) -> None:
    meta = kafka3_dir / "meta.properties"
    meta.write_text("version=7\nnode.id=1\n")
    result = run(str(kafka3_dir))
    assert result.exit_code == 1
    [line] = problems(result)
    assert line.startswith(f"PROBLEM {meta}: unreadable meta.properties: ")
    assert "version 7" in line


def test_corrupt_checkpoint(kafka3_dir: Path) -> None:
    ckpt = kafka3_dir / "recovery-point-offset-checkpoint"
    ckpt.write_text("0\n2\ntest 0 109\n")
    result = run(str(kafka3_dir))
    assert result.exit_code == 1
    [line] = problems(result)
    assert line.startswith(f"PROBLEM {ckpt}: corrupt checkpoint: ")


def test_verify_indexes_is_opt_in(kafka3_dir: Path) -> None:
    index = kafka3_dir / "test-0" / f"{SEG}.index"
    data = bytearray(index.read_bytes())
    data[12:16] = (999_999).to_bytes(4, "big")  # entry 1 points past the log
    index.write_bytes(bytes(data))
    assert run(str(kafka3_dir)).exit_code == 0
    result = run("--verify-indexes", str(kafka3_dir))
    assert result.exit_code == 1
    assert any(str(index) in line for line in problems(result)), result.output


def test_usage_errors(tmp_path: Path, kafka3_dir: Path) -> None:
    assert run(str(tmp_path / "nope")).exit_code == 2
    assert run(str(kafka3_dir / "test-0")).exit_code == 2
    assert run(str(kafka3_dir / "meta.properties")).exit_code == 2


def test_missing_indexes_are_warnings(kafka3_dir: Path) -> None:
    """Issue 9 #1: a missing .index/.timeindex is reported (Kafka rebuilds it on load)."""
    for name in (f"{SEG}.index", f"{SEG}.timeindex"):
        (kafka3_dir / "test-0" / name).unlink()
    for args in ([], ["--verify-indexes"]):
        result = run(*args, str(kafka3_dir))
        assert result.exit_code == 0, result.output
        for name in (f"{SEG}.index", f"{SEG}.timeindex"):
            line = f"WARNING {kafka3_dir / 'test-0' / name}: missing (Kafka rebuilds it"
            assert sum(line in x for x in result.output.splitlines()) == 1, result.output


def test_stray_directory_is_a_warning(kafka3_dir: Path) -> None:
    """Issue 9 #4: a stray directory is reported like a stray file, not only in --json."""
    (kafka3_dir / "backup").mkdir()
    (kafka3_dir / "notes.txt").write_text("x")
    result = run(str(kafka3_dir))
    assert result.exit_code == 0, result.output
    assert f"WARNING {kafka3_dir / 'backup'}: unexpected directory" in result.output
    assert f"WARNING {kafka3_dir / 'notes.txt'}: unexpected file" in result.output
    doc = json.loads(run("--json", str(kafka3_dir)).stdout)
    assert doc["stray_files"] == ["backup/", "notes.txt"]
    assert str(kafka3_dir / "backup") in {w["path"] for w in doc["warnings"]}
