"""Generated completions and man pages: freshness of the committed copies, and docgen itself.

The first test regenerates everything from the real `kt` tree and compares it with the
committed `completions/` and `man/`; the rest exercise `kt.tools.docgen` on a small
synthetic click tree (nested group, choices, flags, aliases, roff escaping) and run
the generated completion scripts in real shells where those are installed.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import click
import pytest

from kt.tools import docgen

REPO_ROOT = Path(__file__).resolve().parents[2]

BASH = shutil.which("bash")
ZSH = shutil.which("zsh")
FISH = shutil.which("fish")
GROFF = shutil.which("groff")


# --------------------------------------------------------------------------- freshness


def test_committed_docs_are_fresh(tmp_path: Path) -> None:
    assert docgen.main(["--out", str(tmp_path)]) == 0
    generated = docgen.owned_files(tmp_path)
    assert "man/kt.1" in generated
    assert "completions/kt.bash" in generated
    files = {rel: (tmp_path / rel).read_text(encoding="utf-8") for rel in generated}
    stale = docgen.stale_files(REPO_ROOT, files)
    assert not stale, (
        "generated docs are stale (missing, different or obsolete): "
        + ", ".join(stale)
        + "; run scripts/gen-docs"
    )


def test_generation_is_deterministic() -> None:
    assert docgen.render_all(docgen.kt_tree()) == docgen.render_all(docgen.kt_tree())


def test_every_available_kt_command_is_documented() -> None:
    from kt import cli

    root = docgen.kt_tree()
    ctx = click.Context(cli.cli, info_name="kt")
    available = {n for n in cli.COMMANDS if cli.cli.get_command(ctx, n) is not None}
    documented = {s.name for s in root.subcommands} | set(root.aliases)
    assert documented == available
    assert set(root.aliases) == {a for a in cli.ALIASES if a in available}


# --------------------------------------------------------------------------- a synthetic tree


DEMO_ALIASES = {"dump-segment": "dump-log-segments"}


class AliasingGroup(click.Group):
    """Like kt's lazy group: an alias is one more name resolving to the same command."""

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        return super().get_command(ctx, DEMO_ALIASES.get(cmd_name, cmd_name))


def make_demo() -> click.Group:
    """A small tree with everything docgen must handle."""

    @click.group(cls=AliasingGroup, context_settings={"help_option_names": ["-h", "--help"]})
    @click.version_option("1.0", "-V", "--version", prog_name="demo")
    def demo() -> None:
        """demo: a tool that does things.

        Second paragraph with a backslash \\ and 'quotes'.
        .leading dot, and -dashes- everywhere.

        \b
        Preformatted:
          .dot    stays
          'quote  line
        """

    @demo.group()
    def index() -> None:
        """Check and rebuild index files."""

    @index.command()
    @click.option(
        "-f",
        "--format",
        "fmt",
        type=click.Choice(["json", "text"]),
        default="text",
        help="Output format.",
    )
    @click.option("--strict/--no-strict", default=True, help="Fail on warnings.")
    @click.option("-v", "--verbose", count=True, help="More output.")
    @click.option("--out-dir", type=click.Path(file_okay=False), help="Where to write.")
    @click.option("--limit", type=click.IntRange(0, 10), default=5, help="At most this many.")
    @click.option("-x", "--exclude", multiple=True, help="Skip these: [globs].")
    @click.option("--secret", hidden=True)
    @click.argument("paths", nargs=-1, type=click.Path(), required=True)
    def verify(**_: object) -> None:
        """Verify index files against their log segment.

        Reports every entry \u2014 like \u201cthis\u201d \u2014 whose offset is wrong.
        """

    @index.command(hidden=True)
    def internal() -> None:
        """Not for users."""

    @demo.command("dump-log-segments")
    @click.option("--files", type=click.Path(), multiple=True, required=True, help="Segments.")
    @click.option("--deep-iteration", is_flag=True, help="Decode every record.")
    @click.option("--logs", metavar="FILE[,FILE...]", help="Paths by name only.")
    @click.option("--data-dir", metavar="DIR", help="Also a path, by name.")
    @click.argument("mode", type=click.Choice(["fast", "slow mode"]))
    @click.argument("target", type=click.Path(file_okay=False), required=False)
    def dump(**_: object) -> None:
        """Dump log segments."""

    return demo


@pytest.fixture(scope="module")
def demo_tree() -> docgen.CommandDoc:
    return docgen.load_tree(make_demo(), "demo", DEMO_ALIASES)


@pytest.fixture(scope="module")
def demo_out(tmp_path_factory: pytest.TempPathFactory, demo_tree: docgen.CommandDoc) -> Path:
    out = tmp_path_factory.mktemp("demo-docs")
    docgen.write_all(out, docgen.render_all(demo_tree), "demo")
    # Something to complete file and directory names against.
    (out / "work" / "segments").mkdir(parents=True)
    (out / "work" / "segment.log").write_text("")
    return out


def test_tree_model(demo_tree: docgen.CommandDoc) -> None:
    assert [c.path for c in demo_tree.walk()] == [
        ("demo",),
        ("demo", "dump-log-segments"),
        ("demo", "index"),
        ("demo", "index", "verify"),  # the hidden "internal" command is left out
    ]
    assert demo_tree.aliases == {"dump-segment": "dump-log-segments"}
    verify = demo_tree.subcommands[1].subcommands[0]
    opts = {o.names[-1]: o for o in verify.options}
    assert "--secret" not in opts
    assert opts["--format"].choices == ("json", "text")
    assert opts["--format"].kind == docgen.KIND_CHOICE
    assert opts["--format"].default == "text"
    assert opts["--strict"].secondary == ("--no-strict",)
    assert opts["--strict"].nargs == 0 and opts["--strict"].default == "--strict"
    assert opts["--verbose"].nargs == 0 and opts["--verbose"].default is None
    assert opts["--out-dir"].kind == docgen.KIND_DIR
    assert opts["--exclude"].multiple
    assert opts["--help"].names == ("-h", "--help")
    assert verify.arguments[0].kind == docgen.KIND_FILE and verify.arguments[0].nargs == -1
    assert verify.usage == ("[OPTIONS]", "PATHS...")
    # Plain strings whose metavar names a path complete as paths.
    dump = {o.names[-1]: o for o in demo_tree.subcommands[0].options}
    assert dump["--logs"].kind == docgen.KIND_FILE
    assert dump["--data-dir"].kind == docgen.KIND_DIR
    assert dump["--deep-iteration"].kind == docgen.KIND_NONE


def test_first_sentence() -> None:
    assert docgen.first_sentence("Verify files. Then more.\n\nOther.") == "Verify files."
    assert docgen.first_sentence("Compare a vs. b quickly. More.") == "Compare a vs. b quickly."
    assert docgen.first_sentence("Drop them, e.g. --all. More.") == "Drop them, e.g. --all."
    assert docgen.first_sentence("\b\nkeep\n  this") == "keep this"
    assert docgen.first_sentence("x " * 100, limit=20).endswith("...")
    assert len(docgen.first_sentence("x " * 100, limit=20)) <= 20


# --------------------------------------------------------------------------- man pages


@pytest.mark.parametrize(
    ("text", "roff"),
    [
        ("a-b", "a\\-b"),
        ("back\\slash", "back\\eslash"),
        ("it's `x`", "it\\(aqs \\(gax\\(ga"),
        ("caf\u00e9 \u2014", "caf\\[u00E9] \\[u2014]"),
        ("tab\there", "tab here"),
    ],
)
def test_roff_escape(text: str, roff: str) -> None:
    assert docgen.roff_escape(text) == roff


def test_roff_line_protects_control_characters() -> None:
    assert docgen.roff_line(".SH not a request") == "\\&.SH not a request"
    assert docgen.roff_line("'also not") == "\\(aqalso not"
    assert docgen.roff_line("fine. text") == "fine. text"


def test_man_pages(demo_out: Path) -> None:
    pages = sorted(p.name for p in (demo_out / "man").iterdir())
    # One page per command path; aliases and hidden commands get none.
    assert pages == ["demo-dump-log-segments.1", "demo-index-verify.1", "demo-index.1", "demo.1"]

    root = (demo_out / "man" / "demo.1").read_text()
    assert '.TH DEMO 1 "" "demo" "demo manual"' in root
    assert "demo \\- demo: a tool that does things." in root
    assert "backslash \\e and \\(aqquotes\\(aq" in root
    assert "\\&.leading dot, and \\-dashes\\- everywhere." in root
    # click's \b block stays preformatted, indentation included.
    assert ".nf\nPreformatted:\n  .dot    stays\n  \\(aqquote  line\n.fi" in root
    assert "\\fBdump\\-log\\-segments\\fR, \\fBdump\\-segment\\fR" in root
    for section in ("NAME", "SYNOPSIS", "DESCRIPTION", "COMMANDS", "OPTIONS", "EXIT STATUS"):
        assert f".SH {section}\n" in root
    assert ".BR demo\\-index (1)" in root

    verify = (demo_out / "man" / "demo-index-verify.1").read_text()
    assert "\\fBdemo index verify\\fR [\\fIOPTIONS\\fR] \\fIPATHS\\fR..." in verify
    assert "\\fB\\-f\\fR, \\fB\\-\\-format\\fR \\fI[json|text]\\fR" in verify
    assert "Choices: \\fBjson\\fR, \\fBtext\\fR." in verify
    assert "Default: \\fBtext\\fR." in verify
    assert "\\fB\\-\\-strict\\fR / \\fB\\-\\-no\\-strict\\fR" in verify
    assert "Default: \\fB\\-\\-strict\\fR." in verify
    assert "Type: integer range (0<=x<=10)." in verify
    assert "Type: directory." in verify
    assert "May be given more than once." in verify
    assert "secret" not in verify
    assert "\\[u201C]this\\[u201D]" in verify
    assert ".SH EXIT STATUS\n.TP\n\\fB0\\fR\n" in verify
    assert "\\fB2\\fR\nUsage error" in verify
    assert verify.rstrip().endswith(".BR demo (1),\n.BR demo\\-index (1)")

    dump = (demo_out / "man" / "demo-dump-log-segments.1").read_text()
    assert "Also available as \\fBdemo dump\\-segment\\fR." in dump
    assert "Required." in dump
    assert "One of \\fBfast\\fR, \\fBslow mode\\fR; required." in dump


def _groff_warnings(page: Path) -> str:
    result = subprocess.run(
        [GROFF or "groff", "-man", "-Tutf8", "-ww", "-z", str(page)],
        capture_output=True,
        text=True,
        check=False,
    )
    return result.stderr + ("" if result.returncode == 0 else f"exit {result.returncode}")


@pytest.mark.skipif(GROFF is None, reason="groff is not installed")
def test_man_pages_render_without_warnings(demo_out: Path, tmp_path: Path) -> None:
    docgen.write_all(tmp_path, docgen.render_all(docgen.kt_tree()))
    pages = sorted((demo_out / "man").glob("*.1")) + sorted((tmp_path / "man").glob("*.1"))
    problems = {p.name: w for p in pages if (w := _groff_warnings(p))}
    assert not problems


# --------------------------------------------------------------------------- bash


def bash_complete(script: Path, cwd: Path, *words: str) -> list[str]:
    """Candidates of the generated bash function for `words` (the last one is the cursor)."""
    func = "_" + words[0]
    quoted = " ".join("'" + w.replace("'", "'\\''") + "'" for w in words)
    program = (
        f"source '{script}' || exit 99\n"
        f"COMP_WORDS=({quoted}); COMP_CWORD=$((${{#COMP_WORDS[@]}} - 1))\n"
        f'{func}; printf "%s\\n" "${{COMPREPLY[@]}}"\n'
    )
    result = subprocess.run(
        [BASH or "bash", "--norc", "--noprofile", "-c", program],
        cwd=cwd,
        capture_output=True,
        text=True,
        check=True,
    )
    return sorted(line for line in result.stdout.splitlines() if line)


HELP = ["--help", "-h"]
WORK_FILES = ["work/segment.log", "work/segments"]


@pytest.mark.skipif(BASH is None, reason="bash is not installed")
@pytest.mark.parametrize(
    ("words", "expected"),
    [
        (["demo", ""], ["dump-log-segments", "dump-segment", "index"]),
        (["demo", "du"], ["dump-log-segments", "dump-segment"]),
        (["demo", "-"], ["--version", "-V", *HELP]),
        (["demo", "index", ""], ["verify"]),
        (["demo", "index", "--help", ""], ["verify"]),
        (["demo", "index", "verify", "--f"], ["--format"]),
        (["demo", "index", "verify", "--no"], ["--no-strict"]),
        (["demo", "index", "verify", "--format", ""], ["json", "text"]),
        (["demo", "index", "verify", "-f", "j"], ["json"]),
        (["demo", "index", "verify", "--format", "=", ""], ["json", "text"]),
        (["demo", "index", "verify", "--format", "=", "t"], ["text"]),
        (["demo", "index", "verify", "--format=t"], ["--format=text"]),
        (["demo", "index", "verify", "--out-dir", "work/"], ["work/segments"]),
        (["demo", "index", "verify", "--limit", ""], []),
        (
            ["demo", "index", "verify", "-v", "--limit", "3", "work/s"],
            WORK_FILES,
        ),
        (
            ["demo", "index", "verify", "--format", "json", "work/segment.log", "work/s"],
            WORK_FILES,
        ),
        # An alias completes like its target, options and arguments included.
        (["demo", "dump-segment", "--de"], ["--deep-iteration"]),
        (["demo", "dump-segment", "--files", "work/segm"], ["work/segment.log", "work/segments"]),
        (["demo", "dump-segment", ""], ["fast", "slow\\ mode"]),
        (["demo", "dump-segment", "--deep-iteration", "s"], ["slow\\ mode"]),
        (["demo", "dump-log-segments", "fast", "work/"], ["work/segments"]),
        (["demo", "dump-log-segments", "--logs", "work/"], WORK_FILES),
        (["demo", "dump-log-segments", "--data-dir", "work/"], ["work/segments"]),
        (["demo", "dump-log-segments", "--", "-"], []),
        (["demo", "nosuch", ""], []),
    ],
)
def test_bash_completion(demo_out: Path, words: list[str], expected: list[str]) -> None:
    script = demo_out / "completions" / "demo.bash"
    assert bash_complete(script, demo_out, *words) == sorted(expected)


@pytest.mark.skipif(BASH is None, reason="bash is not installed")
def test_bash_completion_of_real_kt(tmp_path: Path) -> None:
    root = docgen.kt_tree()
    docgen.write_all(tmp_path, docgen.render_all(root))
    script = tmp_path / "completions" / "kt.bash"
    expected = sorted([*(s.name for s in root.subcommands), *root.aliases])
    assert bash_complete(script, tmp_path, "kt", "") == expected
    assert bash_complete(script, tmp_path, "kt", "--v") == ["--version"]
    # Every command path completes its subcommands and its options.
    for cmd in root.walk():
        words = list(cmd.path)
        subs = sorted([*(s.name for s in cmd.subcommands), *cmd.aliases])
        if subs:
            assert bash_complete(script, tmp_path, *words, "") == subs, words
        assert "--help" in bash_complete(script, tmp_path, *words, "--"), words


# --------------------------------------------------------------------------- zsh and fish


@pytest.mark.skipif(ZSH is None, reason="zsh is not installed")
def test_zsh_scripts_parse(demo_out: Path, tmp_path: Path) -> None:
    docgen.write_all(tmp_path, docgen.render_all(docgen.kt_tree()))
    for script in (demo_out / "completions" / "_demo", tmp_path / "completions" / "_kt"):
        result = subprocess.run([ZSH or "zsh", "-n", str(script)], capture_output=True, text=True)
        assert result.returncode == 0, result.stderr


# Drives an interactive zsh in a pseudo-terminal: types the line, presses Tab, and
# waits until the completion widget has finished. compadd is wrapped to log every
# candidate offered.
ZSH_INIT = r"""
PS1='> '
fpath=($COMPDIR $fpath)
autoload -Uz compinit && compinit -u -D
compadd() {
    local -a hits
    builtin compadd -O hits "$@"
    print -rl -- $hits >>$HITS
    builtin compadd "$@"
}
complete-and-mark() {
    zle complete-word
    zle -I
    print -r -- COMPLETION-DONE
}
zle -N complete-and-mark
bindkey '^I' complete-and-mark
print -r -- INIT-DONE
"""

ZSH_DRIVER = r"""
zmodload zsh/zpty
zpty z env COMPDIR=$1 HITS=$2 zsh -f -i
zpty -w z "source ${(q)3}"
zpty -r z line '*INIT-DONE*'
zpty -w -n z "$4"$'	'
zpty -r z line '*COMPLETION-DONE*'
zpty -d z
"""


@pytest.mark.skipif(ZSH is None, reason="zsh is not installed")
@pytest.mark.parametrize(
    ("line", "expected", "absent"),
    [
        ("demo ", {"dump-log-segments", "dump-segment", "index"}, set()),
        ("demo index verify --format ", {"json", "text"}, set()),
        ("demo index verify --ver", {"--verbose"}, set()),
        ("demo dump-segment ", {"fast", "slow mode"}, set()),
        # Directories only (_files also offers the path's leading components).
        ("demo dump-segment fast work/", {"segments"}, {"segment.log"}),
    ],
)
def test_zsh_completion(
    demo_out: Path, tmp_path: Path, line: str, expected: set[str], absent: set[str]
) -> None:
    driver, init, hits = tmp_path / "driver.zsh", tmp_path / "init.zsh", tmp_path / "hits"
    driver.write_text(ZSH_DRIVER)
    init.write_text(ZSH_INIT)
    hits.touch()
    completions = str(demo_out / "completions")
    subprocess.run(
        [ZSH or "zsh", "-f", str(driver), completions, str(hits), str(init), line],
        cwd=demo_out,
        check=True,
        timeout=60,
        capture_output=True,
    )
    offered = {h for h in hits.read_text().splitlines() if h}
    if absent:
        assert expected <= offered and not absent & offered, offered
    else:
        assert offered == expected


@pytest.mark.skipif(FISH is None, reason="fish is not installed")
def test_fish_scripts_parse(demo_out: Path, tmp_path: Path) -> None:
    docgen.write_all(tmp_path, docgen.render_all(docgen.kt_tree()))
    for script in (demo_out / "completions" / "demo.fish", tmp_path / "completions" / "kt.fish"):
        result = subprocess.run(
            [FISH or "fish", "--no-execute", str(script)], capture_output=True, text=True
        )
        assert result.returncode == 0, result.stderr


@pytest.mark.skipif(FISH is None, reason="fish is not installed")
@pytest.mark.parametrize(
    ("line", "expected"),
    [
        ("demo ", ["dump-log-segments", "dump-segment", "index"]),
        ("demo index ", ["verify"]),
        ("demo index verify --format ", ["json", "text"]),
        ("demo index verify --ver", ["--verbose"]),
        ("demo index verify --out-dir work/", ["work/segments/"]),
        ("demo dump-segment --de", ["--deep-iteration"]),
        ("demo dump-segment --files work/segm", ["work/segment.log", "work/segments/"]),
    ],
)
def test_fish_completion(demo_out: Path, line: str, expected: list[str]) -> None:
    script = demo_out / "completions" / "demo.fish"
    result = subprocess.run(
        [FISH or "fish", "--no-config", "-c", f"source {script}; complete -C '{line}'"],
        cwd=demo_out,
        capture_output=True,
        text=True,
        check=True,
    )
    assert sorted(line.split("\t")[0] for line in result.stdout.splitlines()) == expected


# --------------------------------------------------------------------------- failures


def test_a_command_that_fails_to_import_fails_loudly() -> None:
    class Broken(click.Group):
        def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
            if name == "bad":
                raise ImportError("No module named 'some_dependency'")
            return super().get_command(ctx, name)

        def list_commands(self, ctx: click.Context) -> list[str]:
            return ["bad", *super().list_commands(ctx)]

    @click.group(cls=Broken)
    def tool() -> None:
        """A tool."""

    @tool.command()
    def good() -> None:
        """Fine."""

    with pytest.raises(docgen.DocgenError, match=r"'tool bad'.*some_dependency"):
        docgen.load_tree(tool, "tool")


def test_main_reports_a_broken_command(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    def broken() -> docgen.CommandDoc:
        raise docgen.DocgenError("cannot load command 'kt x': boom")

    assert docgen.main(["--out", str(tmp_path)], tree=broken) == 1
    assert "boom" in capsys.readouterr().err
    assert not (tmp_path / "man").exists()


def test_kt_lazy_group_missing_module_is_skipped_but_broken_ones_fail(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from kt import cli

    commands = dict(cli.COMMANDS)
    commands["zz-not-yet"] = "kt.tools.zz_not_written_yet:command"
    monkeypatch.setattr(cli, "COMMANDS", commands)
    root = docgen.kt_tree()
    assert "zz-not-yet" not in {s.name for s in root.subcommands}

    # A module that exists but whose own import fails.
    (tmp_path / "zz_broken_cmd.py").write_text("import zz_no_such_dependency\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(cli, "COMMANDS", {**commands, "zz-broken": "zz_broken_cmd:command"})
    with pytest.raises(docgen.DocgenError, match=r"zz-broken.*zz_no_such_dependency"):
        docgen.kt_tree()

    # A module without the registered attribute.
    monkeypatch.setattr(cli, "COMMANDS", {**commands, "zz-typo": "kt.tools.console:nope"})
    with pytest.raises(docgen.DocgenError, match="zz-typo"):
        docgen.kt_tree()
    sys.modules.pop("zz_broken_cmd", None)


def test_write_all_removes_stale_files_only(tmp_path: Path, demo_tree: docgen.CommandDoc) -> None:
    (tmp_path / "man").mkdir()
    (tmp_path / "completions").mkdir()
    (tmp_path / "man" / "demo-removed-command.1").write_text("old")
    (tmp_path / "man" / "README").write_text("keep me")
    (tmp_path / "completions" / "demo.bash").write_text("old")
    files = docgen.render_all(demo_tree)
    changed = docgen.write_all(tmp_path, files, "demo")
    assert "man/demo-removed-command.1" in changed
    assert "completions/demo.bash" in changed
    assert not (tmp_path / "man" / "demo-removed-command.1").exists()
    assert (tmp_path / "man" / "README").read_text() == "keep me"
    assert docgen.stale_files(tmp_path, files, "demo") == []
    assert docgen.write_all(tmp_path, files, "demo") == []
