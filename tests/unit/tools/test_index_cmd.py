"""`kt index verify` and `kt index rebuild`."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from kt.cli import cli

REPO = Path(__file__).resolve().parents[3]
KT = REPO / ".venv" / "bin" / "kt"
SEG = "00000000000000000000"


def run(*args: str) -> Result:
    return CliRunner().invoke(cli, ["index", *args])


def one_error_line(result: Result, code: int) -> str:
    assert result.exit_code == code, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("kt: error: "), result.stderr
    assert "Traceback" not in result.output
    return lines[0]


def state(d: Path) -> dict[str, tuple[bytes, int, int]]:
    """Every file's bytes, mtime and inode (an atomic replace changes the inode)."""
    return {
        p.name: (p.read_bytes(), p.stat().st_mtime_ns, p.stat().st_ino)
        for p in sorted(d.iterdir())
        if p.is_file()
    }


@pytest.fixture
def logdir(tmp_path: Path, fixtures_dir: Path) -> Path:
    """A log directory holding writable copies of real Kafka partitions."""
    d = tmp_path / "kafka-logs"
    d.mkdir()
    (d / "meta.properties").write_text("version=0\nbroker.id=0\n")
    for name in ("test-0", "tenitems-0", "some-topic-0"):
        shutil.copytree(fixtures_dir / name, d / name)
        for p in (d / name).iterdir():
            p.chmod(0o644)
    return d


# --- verify ---------------------------------------------------------------------------------


def test_verify_real_kafka_files(logdir: Path) -> None:
    result = run("verify", str(logdir))
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert lines[0] == (
        f"OK {logdir / 'some-topic-0' / (SEG + '.log')} (9 batches, 0 offset, 0 time, 0 txn "
        "index entries)"
    )
    assert f"OK {logdir / 'test-0' / (SEG + '.log')} (109 batches, 45 offset, 46 time" in (
        result.stdout
    )
    assert lines[-1] == "3 segments checked, 0 with problems, 2 with warnings"
    quiet = run("verify", "-q", str(logdir / "test-0"))
    assert (quiet.exit_code, quiet.stdout) == (0, "")


def test_verify_damaged_copy_exit_1_with_problem_lines(logdir: Path) -> None:
    index = logdir / "test-0" / f"{SEG}.index"
    data = bytearray(index.read_bytes())
    data[12:16] = (int.from_bytes(data[12:16], "big") + 3).to_bytes(4, "big")  # entry 1's position
    index.write_bytes(bytes(data))
    result = run("verify", str(logdir))
    assert result.exit_code == 1
    lines = result.stdout.splitlines()
    i = lines.index(f"PROBLEMS {logdir / 'test-0' / (SEG + '.log')}")
    assert lines[i + 1].startswith(f"  {index}: entry 1: offset ")
    assert "inside the batch at position" in lines[i + 1]
    assert lines[-1] == "3 segments checked, 1 with problems, 2 with warnings"
    quiet = run("verify", "--quiet", str(logdir))
    assert quiet.exit_code == 1
    assert quiet.stdout.splitlines() == lines[i : i + 2]


def test_verify_json_is_ndjson(logdir: Path) -> None:
    timeindex = logdir / "tenitems-0" / f"{SEG}.timeindex"
    timeindex.write_bytes(timeindex.read_bytes() + b"\x00\x01")
    result = run("verify", "--json", str(logdir))
    assert result.exit_code == 1
    docs = [json.loads(line) for line in result.stdout.splitlines()]
    assert [Path(d["segment"]).parent.name for d in docs] == [
        "some-topic-0",
        "tenitems-0",
        "test-0",
    ]
    keys = {
        "segment",
        "ok",
        "batches",
        "offset_index_entries",
        "time_index_entries",
        "txn_index_entries",
        "problems",
        "warnings",
        "notes",
    }
    assert all(set(d) == keys for d in docs)
    good = docs[2]
    assert (good["ok"], good["batches"], good["offset_index_entries"]) == (True, 109, 45)
    assert good["problems"] == []
    bad = docs[1]
    assert bad["ok"] is False
    assert bad["problems"] == [
        {
            "file": str(timeindex),
            "index": "time-index",
            "entry": None,
            "index_offset": None,
            "log_offset": None,
            "message": "size 14 is not a multiple of 12 (2 trailing bytes: a torn last entry)",
        }
    ]


@pytest.mark.parametrize("cmd", ["verify", "rebuild"])
def test_usage_errors_exit_2_with_one_line(tmp_path: Path, cmd: str) -> None:
    line = one_error_line(run(cmd, str(tmp_path / "nope")), 2)
    assert str(tmp_path / "nope") in line and "no such file" in line
    (tmp_path / "notes.txt").write_text("hello")
    line = one_error_line(run(cmd, str(tmp_path / "notes.txt")), 2)
    assert "not a segment file, partition directory or log directory" in line
    # PATH is required (click's check; `kt` prints it as one line, see test_cli_root).
    missing = run(cmd)
    assert missing.exit_code == 2 and "Missing argument 'PATH...'" in missing.output


def test_real_subprocess(logdir: Path) -> None:
    ok = subprocess.run(
        [str(KT), "index", "verify", "--json", str(logdir / "test-0" / f"{SEG}.index")],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert ok.returncode == 0, ok.stderr
    (doc,) = [json.loads(line) for line in ok.stdout.splitlines()]
    assert doc["segment"] == str(logdir / "test-0" / f"{SEG}.log") and doc["ok"]
    missing = subprocess.run(
        [str(KT), "index", "verify", str(logdir / "missing-0")],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert missing.returncode == 2
    assert missing.stderr.startswith("kt: error: ") and len(missing.stderr.splitlines()) == 1


def test_missing_indexes_are_warnings_and_rebuild_would_create_them(
    tmp_path: Path, fixtures_dir: Path
) -> None:
    """Issue 9 #1: __consumer_offsets-16 has no .index/.timeindex."""
    part = fixtures_dir / "__consumer_offsets-16"
    result = run("verify", str(part))
    assert result.exit_code == 0, result.output
    assert result.stdout.splitlines() == [
        f"OK {part / (SEG + '.log')} (69 batches, 0 offset, 0 time, 0 txn index entries)",
        f"  WARNING {part / (SEG + '.index')}: missing (Kafka rebuilds it when it loads the "
        "segment)",
        f"  WARNING {part / (SEG + '.timeindex')}: missing (Kafka rebuilds it when it loads "
        "the segment)",
        "1 segment checked, 0 with problems, 1 with warnings",
    ]
    assert run("verify", "-q", str(part)).stdout == ""
    (doc,) = map(json.loads, run("verify", "--json", str(part)).stdout.splitlines())
    assert doc["ok"] and [w["index"] for w in doc["warnings"]] == ["offset-index", "time-index"]
    dry = run("rebuild", "--dry-run", str(part))
    assert dry.stdout.splitlines() == [
        f"{part / (SEG + '.index')}: would create (24 bytes)",
        f"{part / (SEG + '.timeindex')}: would create (48 bytes)",
    ]
    copy = tmp_path / "__consumer_offsets-16"
    shutil.copytree(part, copy)
    copy.chmod(0o755)
    done = run("rebuild", str(copy))
    assert done.stdout.splitlines()[0] == f"{copy / (SEG + '.index')}: created (24 bytes)"


@pytest.mark.parametrize("cmd", [("verify",), ("rebuild", "--dry-run"), ("rebuild",)])
def test_directory_named_like_a_segment_is_a_usage_error(
    tmp_path: Path, cmd: tuple[str, ...]
) -> None:
    """Issue 9 #2: not skipped silently; 'is a directory', exit 2, like dump-log-segments."""
    odd = tmp_path / "t-0" / f"{SEG}.log"
    odd.mkdir(parents=True)
    for target in (odd, odd.parent, tmp_path):
        line = one_error_line(run(*cmd, str(target)), 2)
        assert line == f"kt: error: {odd}: is a directory"


def test_follower_style_entries_are_notes_not_problems(tmp_path: Path) -> None:
    """Section 4: an entry for a multi-batch append is a note in `index verify`, while
    `dump-log-segments --verify-index-only` still lists it as a mismatch like Kafka."""
    from kt.storage.record_batch import RecordSpec, build_batch

    d = tmp_path / "t-0"
    d.mkdir()
    batches = [build_batch([RecordSpec(b"k", b"v" * 10)] * 2, base_offset=2 * i) for i in range(4)]
    (d / f"{SEG}.log").write_bytes(b"".join(batches))
    # One append of batches 0-1, one of 2-3: (last offset of the append, first position).
    entries = [(3, 0), (7, len(batches[0]) + len(batches[1]))]
    (d / f"{SEG}.index").write_bytes(b"".join(o.to_bytes(4, "big") + p.to_bytes(4, "big")
                                              for o, p in entries))  # fmt: skip
    (d / f"{SEG}.timeindex").write_bytes(b"")
    result = run("verify", str(d))
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert lines[1].startswith("  NOTE 2 offset-index entries of multi-batch appends")
    assert lines[-1] == "1 segment checked, 0 with problems, 0 with warnings"
    (doc,) = map(json.loads, run("verify", "--json", str(d)).stdout.splitlines())
    assert doc["ok"] and [n["index_offset"] for n in doc["notes"]] == [3, 7]
    dumped = CliRunner().invoke(
        cli, ["dump-log-segments", "--verify-index-only", "--files", str(d / f"{SEG}.index")]
    )
    assert "Mismatches in :" in dumped.output and "Index offset: 3, log offset: 1" in dumped.output


# --- rebuild ----------------------------------------------------------------------------------


def damage(partition: Path) -> None:
    (partition / f"{SEG}.timeindex").unlink()
    index = partition / f"{SEG}.index"
    index.write_bytes(index.read_bytes()[:-5])


def test_rebuild_dry_run_writes_nothing(logdir: Path) -> None:
    part = logdir / "test-0"
    damage(part)
    before = state(part)
    result = run("rebuild", "--dry-run", str(part))
    assert result.exit_code == 0, result.output
    assert result.stdout.splitlines() == [
        f"{part / (SEG + '.index')}: would rewrite (355 bytes -> 360 bytes)",
        f"{part / (SEG + '.timeindex')}: would create (552 bytes)",
    ]
    assert state(part) == before
    as_json = run("rebuild", "--dry-run", "--json", str(part))
    (doc,) = [json.loads(line) for line in as_json.stdout.splitlines()]
    assert doc["dry_run"] is True and doc["written"] == []
    assert doc["changed"] == [f"{SEG}.index", f"{SEG}.timeindex"]
    assert (doc["offset_index_entries"], doc["time_index_entries"]) == (45, 46)
    assert state(part) == before


def test_rebuild_rewrites_only_changed_files_atomically(logdir: Path, fixtures_dir: Path) -> None:
    part = logdir / "test-0"
    damage(part)
    before = state(part)
    result = run("rebuild", "--json", str(logdir))
    assert result.exit_code == 0, result.output
    docs = {Path(d["segment"]).parent.name: d for d in map(json.loads, result.stdout.splitlines())}
    assert docs["test-0"]["written"] == [str(part / f"{SEG}.index"), str(part / f"{SEG}.timeindex")]
    after = state(part)
    for name in (f"{SEG}.index", f"{SEG}.timeindex"):
        assert after[name][0] == (fixtures_dir / "test-0" / name).read_bytes()
    # The damaged index was replaced by a new file (rename), not rewritten in place.
    assert after[f"{SEG}.index"][2] != before[f"{SEG}.index"][2]
    for name, value in before.items():
        if name != f"{SEG}.index":
            assert after[name] == value  # untouched: same bytes, mtime and inode
    assert not [p for p in part.iterdir() if p.name.startswith(".")]  # no temp files
    # tenitems-0 lacks an .index (Kafka left it out): one is written; nothing else.
    assert docs["tenitems-0"]["changed"] == [f"{SEG}.index"]
    again = run("rebuild", str(logdir))
    assert again.exit_code == 0
    assert again.stdout.count("indexes already match the log") == 3
    assert run("verify", str(logdir)).exit_code == 0


def test_rebuild_reports_invalid_tail_without_touching_the_log(logdir: Path) -> None:
    part = logdir / "test-0"
    log = part / f"{SEG}.log"
    size = log.stat().st_size
    with open(log, "ab") as f:
        f.write(b"\x07" * 100)
    result = run("rebuild", str(part))
    assert result.exit_code == 0
    assert result.stdout == f"{log}: indexes already match the log\n"
    assert f"100 invalid bytes from position {size}" in result.stderr
    assert log.stat().st_size == size + 100


@pytest.fixture
def locked(logdir: Path) -> Iterator[subprocess.Popen[str]]:
    """A child process holding the log directory's lock, as a running broker would."""
    code = textwrap.dedent(
        f"""
        import sys
        from kt.storage.log_files import LogDirLock
        with LogDirLock({str(logdir)!r}):
            print("locked", flush=True)
            sys.stdin.read()
        """
    )
    child = subprocess.Popen(
        [sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    assert child.stdout is not None and child.stdout.readline() == "locked\n"
    yield child
    assert child.stdin is not None
    child.stdin.close()
    child.wait(timeout=30)


def test_rebuild_refuses_while_locked_unless_forced(logdir: Path, locked) -> None:  # type: ignore[no-untyped-def]
    part = logdir / "test-0"
    damage(part)
    before = state(part)
    line = one_error_line(run("rebuild", str(part)), 1)
    assert f"{logdir} is locked by a running broker" in line and "--force" in line
    assert state(part) == before
    # Verifying and dry runs only read: allowed while locked.
    assert run("verify", str(logdir / "tenitems-0")).exit_code == 0
    assert run("rebuild", "--dry-run", str(part)).exit_code == 0
    assert state(part) == before
    forced = run("rebuild", "--force", str(part))
    assert forced.exit_code == 0, forced.output
    assert run("verify", str(part)).exit_code == 0
    assert locked.poll() is None  # the lock holder was left alone


def test_directory_of_segments_with_any_name(tmp_path: Path, fixtures_dir: Path) -> None:
    d = tmp_path / "copied for the incident"
    d.mkdir()
    shutil.copy(fixtures_dir / "test-0" / f"{SEG}.log", d)
    result = run("verify", str(d))
    assert result.exit_code == 0
    assert f"OK {d / (SEG + '.log')} (109 batches, 0 offset, 0 time" in result.stdout
    result = run("rebuild", str(d))
    assert result.exit_code == 0, result.output
    for name in (f"{SEG}.index", f"{SEG}.timeindex"):
        assert (d / name).read_bytes() == (fixtures_dir / "test-0" / name).read_bytes()


def test_rebuild_index_interval_bytes_option(logdir: Path) -> None:
    part = logdir / "test-0"
    result = run("rebuild", "--dry-run", "--json", "--index-interval-bytes", "100000", str(part))
    (doc,) = [json.loads(line) for line in result.stdout.splitlines()]
    assert doc["offset_index_entries"] == 2  # 231498 bytes: entries past 100000 and 200000
    # click's own option check: exit 2 (its usage text, not kt's one-line error).
    bad = run("rebuild", "--index-interval-bytes", "0", str(part))
    assert bad.exit_code == 2 and "Traceback" not in bad.output
