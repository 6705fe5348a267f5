"""The `kt` root: usage-error hints, the command list in `kt --help`, summaries, plurals."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from click.testing import CliRunner

from kt import cli as cli_module
from kt.cli import cli, main
from kt.tools.console import plural

REPO = Path(__file__).resolve().parents[3]


def run_main(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str]:
    with pytest.raises(SystemExit) as exited:
        main(list(args))
    code = exited.value.code
    return (code if isinstance(code, int) else 0), capsys.readouterr().err


@pytest.mark.parametrize(
    ("args", "where"),
    [
        (["dump-log-segments", "--files"], "kt dump-log-segments"),
        (["dump-segment", "--files"], "kt dump-segment"),
        (["consume", "x", "-o"], "kt consume"),
        (["checkpoint", "edit", "F", "--set"], "kt checkpoint edit"),
        (["index", "verify", "--bogus"], "kt index verify"),
        (["nope"], "kt"),
    ],
)
def test_usage_error_points_at_the_subcommand_help(
    capsys: pytest.CaptureFixture[str], args: list[str], where: str
) -> None:
    """Issue 9 #5: a missing option value named `kt --help`, not the subcommand's."""
    code, err = run_main(capsys, *args)
    assert code == 2
    [line] = err.splitlines()
    assert line.startswith("kt: error: ") and line.endswith(f"(see '{where} --help')"), line


def test_root_help_lists_aliases_and_whole_summaries() -> None:
    """Issue 9 #6: summaries are not cut mid-sentence; the README's dump-segment is listed."""
    out = CliRunner().invoke(cli, ["--help"], terminal_width=80).output
    assert not re.search(r"\.\.\.$", out.split("Commands:")[1], re.M), out
    assert re.search(r"^  dump-segment +Alias of dump-log-segments\.$", out, re.M), out
    index = CliRunner().invoke(cli, ["index", "--help"], terminal_width=80).output
    assert "  verify   Check every index against its log.\n" in index


def test_man_pages_have_whole_names_and_required_paths() -> None:
    names = {}
    for page in sorted((REPO / "man").glob("*.1")):
        lines = page.read_text(encoding="utf-8").splitlines()
        names[page.name] = lines[lines.index(".SH NAME") + 1]
    assert not [n for n, line in names.items() if line.endswith("...")]
    assert names["kt.1"].startswith("kt \\- Kafka administration")
    for cmd in ("verify", "rebuild"):
        text = (REPO / "man" / f"kt-index-{cmd}.1").read_text(encoding="utf-8")
        assert "Text; required; any number." in text


def test_plural() -> None:
    assert [plural(n, "batch") for n in (0, 1, 2)] == ["0 batches", "1 batch", "2 batches"]
    assert plural(1, "entry", "entries") == "1 entry"
    assert plural(3, "entry") == "3 entries"
    assert plural(1, "warning") == "1 warning"


def test_counts_are_singular_for_one(tmp_path: Path) -> None:
    """'1 batches', '1 entries', '1 warnings' read wrong."""
    ckpt = tmp_path / "recovery-point-offset-checkpoint"
    ckpt.write_text("0\n1\nt 0 5\n")
    shown = CliRunner().invoke(cli, ["checkpoint", "show", str(ckpt)])
    assert "version 0, 1 entry)" in shown.output
    inspected = CliRunner().invoke(cli, ["log-dirs", "inspect", str(tmp_path)])
    assert "recovery-point-offset-checkpoint: 1 entry" in inspected.output
    assert inspected.output.splitlines()[-1].endswith(
        "0 partitions (0 unhealthy), 0 problems, 2 warnings"
    )
    (tmp_path / "meta.properties").write_text("version=0\nbroker.id=0\n")
    (tmp_path / "notes.txt").write_text("x")
    ckpt.write_text("0\n0\n")
    again = CliRunner().invoke(cli, ["log-dirs", "inspect", str(tmp_path)])
    assert again.output.splitlines()[-1].endswith("0 problems, 1 warning"), again.output
    assert cli_module.ALIASES == {"dump-segment": "dump-log-segments"}


@pytest.mark.parametrize(
    "args",
    [
        ["transactions", "find-hanging", "--topic", "t", "--partition", "-3"],
        ["transactions", "describe-producers", "--topic", "t", "--partition", "-1"],
        ["transactions", "abort", "--topic", "t", "--partition", "-1", "--start-offset", "0"],
    ],
)
def test_a_negative_partition_is_a_usage_error_before_any_connection(
    capsys: pytest.CaptureFixture[str], args: list[str]
) -> None:
    # Port 1 on loopback: were it dialled, the error would be a connection one (exit 1).
    code, err = run_main(capsys, *args, "--bootstrap-server", "127.0.0.1:1")
    assert code == 2, err
    assert "--partition" in err and len(err.strip().splitlines()) == 1
