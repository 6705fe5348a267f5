"""`kt checkpoint show` and `kt checkpoint edit`."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from kt.cli import cli

REPO = Path(__file__).resolve().parents[3]
KT = REPO / ".venv" / "bin" / "kt"


def run(*args: str) -> Result:
    return CliRunner().invoke(cli, ["checkpoint", *args])


def snapshot_dir(d: Path) -> dict[str, tuple[bytes, int]]:
    """Every file's bytes and mtime: proves nothing was written."""
    return {p.name: (p.read_bytes(), p.stat().st_mtime_ns) for p in d.iterdir() if p.is_file()}


def one_error_line(result: Result, code: int) -> str:
    assert result.exit_code == code, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("kt: error: "), result.stderr
    assert "Traceback" not in result.output
    return lines[0]


@pytest.fixture
def logdir(fixture_copy) -> Path:  # type: ignore[no-untyped-def]
    d: Path = fixture_copy("logdir-3.x")
    for p in d.iterdir():
        p.chmod(0o644)
    return d


@pytest.fixture
def partition(fixture_copy) -> Path:  # type: ignore[no-untyped-def]
    d: Path = fixture_copy("test-0")
    for p in d.iterdir():
        p.chmod(0o644)
    return d


# --- show -------------------------------------------------------------------------


def test_show_plain_and_json(logdir: Path) -> None:
    result = run("show", str(logdir / "replication-offset-checkpoint"))
    assert result.exit_code == 0
    assert "replication-offset-checkpoint, version 0, 1 entry" in result.stdout
    assert "tesot" in result.stdout
    result = run("show", "--json", str(logdir / "recovery-point-offset-checkpoint"))
    doc = json.loads(result.stdout)
    assert doc["kind"] == "recovery-point-offset-checkpoint" and doc["version"] == 0
    assert len(doc["entries"]) == 57
    assert doc["entries"][0] == {"topic": "__consumer_offsets", "partition": 22, "offset": 0}


def test_show_leader_epoch_and_sniffed_names(partition: Path, tmp_path: Path) -> None:
    doc = json.loads(run("show", "--json", str(partition / "leader-epoch-checkpoint")).stdout)
    assert doc == {
        "file": str(partition / "leader-epoch-checkpoint"),
        "kind": "leader-epoch-checkpoint",
        "version": 0,
        "entries": [{"epoch": 0, "start_offset": 0}],
    }
    other = tmp_path / "copy-of-something"
    other.write_bytes(b"0\n1\nt 3 9\n")
    assert json.loads(run("show", "--json", str(other)).stdout)["kind"] == "offset-checkpoint"
    other.write_bytes(b"0\n1\n4 9\n")
    assert json.loads(run("show", "--json", str(other)).stdout)["kind"] == "leader-epoch-checkpoint"


@pytest.mark.parametrize(
    ("name", "content", "code", "message"),
    [
        ("recovery-point-offset-checkpoint", b"0\n2\na 0 1\n", 1, "line 2 says 2 entries"),
        ("recovery-point-offset-checkpoint", b"0\n1\na 0 1\ngarbage appended", 1, "line 4"),
        ("log-start-offset-checkpoint", b"7\n0\n", 1, "unsupported version 7"),
        ("cleaner-offset-checkpoint", b"\x00" * 64, 1, "malformed version"),
        ("leader-epoch-checkpoint", b"0\n1\nx y\n", 1, "line 3"),
        ("00000000000000000000.index", b"\x00" * 8, 2, "not a checkpoint file"),
        ("partition.metadata", b"version: 0\n", 2, "not a checkpoint file"),
        ("random.bin", b"\x89PNG\x00\x01", 2, "not a checkpoint file"),
    ],
)
def test_show_damaged_or_wrong_kind(
    tmp_path: Path, name: str, content: bytes, code: int, message: str
) -> None:
    path = tmp_path / name
    path.write_bytes(content)
    before = snapshot_dir(tmp_path)
    line = one_error_line(run("show", str(path)), code)
    assert message in line and str(path) in line
    assert snapshot_dir(tmp_path) == before


@pytest.mark.parametrize("content", [b"", b"0\n"])
@pytest.mark.parametrize("name", ["recovery-point-offset-checkpoint", "leader-epoch-checkpoint"])
def test_checkpoint_without_entries_is_a_warning_everywhere(
    tmp_path: Path, name: str, content: bytes
) -> None:
    """Issue 9 #3: Kafka reads an empty checkpoint as no entries; `checkpoint show`
    and `log-dirs inspect` give the same verdict: no entries, a warning."""
    d = tmp_path / "logs"
    (d / "t-0").mkdir(parents=True)
    path = d / name if name != "leader-epoch-checkpoint" else d / "t-0" / name
    path.write_bytes(content)
    shown = run("show", str(path))
    assert shown.exit_code == 0, shown.output
    [warning] = shown.stderr.splitlines()
    assert warning.startswith(f"kt: warning: {path}: ") and "no entries" in warning
    assert "0 entries" in shown.stdout
    inspected = CliRunner().invoke(cli, ["log-dirs", "inspect", str(d)])
    assert inspected.exit_code == 0, inspected.output
    assert f"WARNING {path}: " in inspected.output
    assert "PROBLEM" not in inspected.output


def test_show_missing_and_directory(tmp_path: Path) -> None:
    assert "no such file" in one_error_line(run("show", str(tmp_path / "nope")), 2)
    assert "is a directory" in one_error_line(run("show", str(tmp_path)), 2)


@pytest.mark.skipif(
    os.geteuid() == 0, reason="root can read a chmod 000 file, so it is not unreadable"
)
def test_show_unreadable(tmp_path: Path) -> None:
    path = tmp_path / "recovery-point-offset-checkpoint"
    path.write_bytes(b"0\n0\n")
    path.chmod(0)
    assert "permission denied" in one_error_line(run("show", str(path)), 1)


# --- edit -------------------------------------------------------------------------


def test_edit_sets_deletes_and_backs_up(logdir: Path) -> None:
    path = logdir / "replication-offset-checkpoint"
    result = run("edit", str(path), "--set", "tesot:0=42", "--set", "odd:name:7=5")
    assert result.exit_code == 0, result.output
    assert result.stdout.splitlines() == ["changed  tesot 0 0 -> 42", "added    odd:name 7 5"]
    assert path.read_bytes() == b"0\n2\ntesot 0 42\nodd:name 7 5\n"
    backups = sorted(logdir.glob("replication-offset-checkpoint.bak-*"))
    assert len(backups) == 1 and backups[0].read_bytes() == b"0\n1\ntesot 0 0\n"
    assert "backup: " in result.stderr

    result = run("edit", str(path), "--delete", "odd:name:7")
    assert result.exit_code == 0 and result.stdout.strip() == "removed  odd:name 7 5"
    assert path.read_bytes() == b"0\n1\ntesot 0 42\n"
    assert len(list(logdir.glob("replication-offset-checkpoint.bak-*"))) == 2
    assert not [p for p in logdir.iterdir() if "tmp" in p.name]


def test_edit_dry_run_writes_nothing(logdir: Path) -> None:
    before = snapshot_dir(logdir)
    result = run(
        "edit", str(logdir / "recovery-point-offset-checkpoint"), "--set", "orders:0=9", "--dry-run"
    )
    assert result.exit_code == 0
    assert result.stdout.strip() == "changed  orders 0 0 -> 9"
    assert "dry run" in result.stderr
    assert snapshot_dir(logdir) == before


def test_edit_leader_epoch(partition: Path) -> None:
    path = partition / "leader-epoch-checkpoint"
    assert run("edit", str(path), "--set", "2=50", "--set", "4=90").exit_code == 0
    assert path.read_bytes() == b"0\n3\n0 0\n2 50\n4 90\n"
    result = run("edit", str(path), "--truncate-from", "2")
    assert result.stdout.splitlines() == ["removed  2 50", "removed  4 90"]
    assert path.read_bytes() == b"0\n1\n0 0\n"


@pytest.mark.parametrize(
    ("file", "args", "code", "message"),
    [
        ("replication-offset-checkpoint", [], 2, "nothing to do"),
        ("replication-offset-checkpoint", ["--set", "tesot0=1"], 2, "expected TOPIC:PARTITION"),
        (
            "replication-offset-checkpoint",
            ["--set", "tesot:0"],
            2,
            "expected TOPIC:PARTITION=OFFSET",
        ),
        ("replication-offset-checkpoint", ["--set", "tesot:0=-1"], 2, "not a non-negative integer"),
        ("replication-offset-checkpoint", ["--delete", "nope:0"], 2, "no such entry"),
        (
            "replication-offset-checkpoint",
            ["--truncate-from", "1"],
            2,
            "leader-epoch checkpoints only",
        ),
        ("replication-offset-checkpoint", ["--set", "a b:0=1"], 1, "whitespace"),
        ("replication-offset-checkpoint", ["--set", "t:0=1", "--delete", "t:0"], 2, "both"),
        ("missing-file", ["--set", "t:0=1"], 2, "no such file"),
    ],
)
def test_edit_refusals_write_nothing(
    logdir: Path, file: str, args: list[str], code: int, message: str
) -> None:
    before = snapshot_dir(logdir)
    line = one_error_line(run("edit", str(logdir / file), *args), code)
    assert message in line
    assert snapshot_dir(logdir) == before


def test_edit_invalid_result_refused(partition: Path) -> None:
    before = snapshot_dir(partition)
    line = one_error_line(
        run("edit", str(partition / "leader-epoch-checkpoint"), "--set", "3=0", "--set", "1=10"), 1
    )
    assert "invalid file" in line
    assert snapshot_dir(partition) == before


def test_edit_corrupt_needs_force(logdir: Path) -> None:
    path = logdir / "cleaner-offset-checkpoint"
    path.write_bytes(b"0\n3\na 0 1\nbroken line here\n")
    before = snapshot_dir(logdir)
    line = one_error_line(run("edit", str(path), "--set", "a:1=2"), 1)
    assert "refusing to edit a corrupt file" in line
    assert snapshot_dir(logdir) == before
    result = run("edit", str(path), "--set", "a:1=2", "--force")
    assert result.exit_code == 0
    assert "warning" in result.stderr
    assert path.read_bytes() == b"0\n2\na 0 1\na 1 2\n"


HOLD_LOCK = """
import sys
from kt.storage.log_files import LogDirLock
with LogDirLock(sys.argv[1]):
    print("locked", flush=True)
    sys.stdin.read()
"""


@pytest.fixture
def locked(logdir: Path, partition: Path) -> Iterator[None]:
    # The partition copy lives inside tmp_path, beside logdir; lock its parent too by
    # moving it into the log dir, where a leader-epoch checkpoint really lives.
    shutil.move(partition, logdir / "test-0")
    child = subprocess.Popen(
        [sys.executable, "-c", HOLD_LOCK, str(logdir)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert child.stdout is not None and child.stdin is not None
    assert child.stdout.readline().strip() == "locked"
    yield
    child.stdin.close()
    child.wait(timeout=10)


@pytest.mark.usefixtures("locked")
def test_edit_refused_while_broker_holds_lock(logdir: Path) -> None:
    before = snapshot_dir(logdir)
    line = one_error_line(
        run("edit", str(logdir / "replication-offset-checkpoint"), "--set", "tesot:0=1"), 1
    )
    assert "locked by a running broker" in line
    epoch_file = logdir / "test-0" / "leader-epoch-checkpoint"
    epoch_before = epoch_file.read_bytes()
    assert "locked" in one_error_line(run("edit", str(epoch_file), "--set", "1=5"), 1)
    assert snapshot_dir(logdir) == before and epoch_file.read_bytes() == epoch_before
    # show is read-only and works while the broker runs
    assert run("show", str(logdir / "replication-offset-checkpoint")).exit_code == 0
    result = run(
        "edit", str(logdir / "replication-offset-checkpoint"), "--set", "tesot:0=1", "--force"
    )
    assert result.exit_code == 0 and "warning" in result.stderr


def test_help_has_examples() -> None:
    for args in (["--help"], ["show", "--help"], ["edit", "--help"]):
        result = run(*args)
        assert result.exit_code == 0 and "Example" in result.stdout
    edit_help = run("edit", "--help").stdout
    for example in (
        "--set orders:0=1500",
        "--set 7=120",
        "--delete orders:3",
        "--truncate-from 5",
        "--dry-run",
        "--force",
    ):
        assert example in edit_help


def test_real_process_exit_codes(tmp_path: Path, logdir: Path) -> None:
    missing = subprocess.run(
        [str(KT), "checkpoint", "show", str(tmp_path / "nope")], capture_output=True, text=True
    )
    assert missing.returncode == 2
    assert missing.stderr.startswith("kt: error: ") and missing.stderr.count("\n") == 1
    corrupt = logdir / "log-start-offset-checkpoint"
    corrupt.write_bytes(b"0\n5\n")
    bad = subprocess.run(
        [str(KT), "checkpoint", "show", str(corrupt)], capture_output=True, text=True
    )
    assert bad.returncode == 1 and "Traceback" not in bad.stderr
    assert "line 2 says 5 entries" in bad.stderr and bad.stdout == ""
    ok = subprocess.run(
        [str(KT), "checkpoint", "show", str(logdir / "replication-offset-checkpoint")],
        capture_output=True,
        text=True,
    )
    assert ok.returncode == 0 and "tesot" in ok.stdout


def test_usage_errors_are_one_line_with_exit_2() -> None:
    """A missing argument, a bad value or an unknown command: one `kt: error:` line
    naming the command's --help, exit 2, no usage block, no traceback."""
    import subprocess
    import sys
    from pathlib import Path

    kt = str(Path(sys.executable).with_name("kt"))
    for args, needle in (
        (["checkpoint", "show"], "Missing argument"),
        (["index", "rebuild", "--index-interval-bytes", "x", "p"], "--index-interval-bytes"),
        (["no-such-command"], "No such command"),
    ):
        proc = subprocess.run([kt, *args], capture_output=True, text=True, timeout=60)
        assert proc.returncode == 2, (args, proc.stderr)
        assert proc.stdout == ""
        lines = proc.stderr.splitlines()
        assert len(lines) == 1 and lines[0].startswith("kt: error: ") and needle in lines[0]
        assert "--help" in lines[0] and "Traceback" not in proc.stderr
