"""The documentation cannot drift from the commands: every `kt ...` command line in a
fenced shell code block of README.md, HACKING.md and docs/**/*.md (pages added later
included: they are globbed) must parse against the real click tree, and every
relative link in them must point at a file, and a heading, that exists.

A command line is found the way a shell reads one: `\\` continuations joined, quotes
spanning lines followed, `$ ` prompts and `# comments` dropped, pipelines and lists
(`|`, `&&`, `;`, ...) split, environment assignments and redirections set aside. Its
words are then walked down the click tree with click's own parser, without running
anything: each subcommand must exist, each option must exist for that command and get
the value it needs, no extra positional argument may be left over, and values of
types that need no outside world (choices, numbers, booleans, dates) must convert.
Output shown in a block belongs in a `text` block (or any other language the check
skips), not in an untagged or `sh` one. The `kt ...` examples in the commands' own
--help texts are checked the same way.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass
from pathlib import Path

import click
import pytest

from kt.cli import cli

ROOT = Path(__file__).resolve().parents[2]

#: code-block languages whose lines are read as shell commands ("" = untagged)
SHELL_LANGUAGES = {"", "sh", "bash", "shell", "console", "zsh", "fish"}
#: words between the control operators that end one simple command
OPERATORS = {"|", "||", "&", "&&", ";", ";;", "(", ")", "|&"}
REDIRECTIONS = {">", ">>", "<", "<<", "<<<", ">&", "<&", "&>", ">|"}
#: wrappers that run the command that follows them
WRAPPERS = {"nohup", "time", "sudo", "exec", "command", "env"}
#: click types whose conversion reads nothing outside the value itself
PURE_TYPES = (
    click.Choice,
    click.types.IntParamType,
    click.types.FloatParamType,
    click.types.BoolParamType,
    click.DateTime,
)
ASSIGNMENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*=")


def doc_pages() -> list[Path]:
    """Every Markdown page the checks cover, found afresh on every run."""
    pages = [ROOT / "README.md", ROOT / "HACKING.md", *sorted((ROOT / "docs").rglob("*.md"))]
    return [page for page in pages if page.is_file()]


@dataclass(frozen=True)
class CodeBlock:
    """A fenced code block: its language tag, first line number and lines."""

    page: Path
    language: str
    line: int
    lines: tuple[str, ...]


def code_blocks(page: Path) -> list[CodeBlock]:
    """The fenced code blocks of a Markdown page (``` or ~~~, indented too)."""
    blocks: list[CodeBlock] = []
    fence: str | None = None
    language, start, body = "", 0, []
    indent = 0
    for number, raw in enumerate(page.read_text(encoding="utf-8").splitlines(), 1):
        stripped = raw.lstrip()
        if fence is None:
            match = re.match(r"(`{3,}|~{3,})\s*([\w+-]*)", stripped)
            if match:
                fence, language, start, body = match.group(1), match.group(2), number, []
                indent = len(raw) - len(stripped)
            continue
        if stripped.startswith(fence) and not stripped[len(fence) :].strip():
            blocks.append(CodeBlock(page, language.lower(), start, tuple(body)))
            fence = None
            continue
        # a block inside a list item is indented; its lines lose that indent
        body.append(raw[indent:] if raw[:indent].isspace() else raw.lstrip())
    return blocks


def _words(text: str) -> list[str]:
    """Shell words and operators of `text`; ValueError while a quote is open."""
    lexer = shlex.shlex(text, posix=True, punctuation_chars=";&|()<>")
    lexer.whitespace_split = True
    lexer.commenters = "#"
    return list(lexer)


def shell_commands(block: CodeBlock) -> list[tuple[int, list[str]]]:
    """Each simple command of a shell block, as (line number, words), with prompts,
    comments, continuations, pipelines, environment assignments, wrappers and
    redirections dealt with as a shell would."""
    lines = list(block.lines)
    if block.language == "console":
        # a console transcript: only prompted lines are commands, the rest is output
        lines = [line if line.startswith("$ ") else "" for line in lines]
    commands: list[tuple[int, list[str]]] = []
    buffer, first = "", 0
    for offset, line in enumerate(lines):
        number = block.line + 1 + offset
        if not buffer:
            first = number
            line = line[2:] if line.startswith("$ ") else line
        if line.endswith("\\"):
            buffer += line[:-1] + " "
            continue
        buffer += line
        try:
            words = _words(buffer)
        except ValueError:  # a quote still open: the command goes on
            buffer += "\n"
            continue
        buffer = ""
        for simple in _split(words):
            commands.append((first, simple))
    if buffer.strip():
        commands.append((first, ["<unterminated>", buffer]))
    return commands


def _split(words: list[str]) -> list[list[str]]:
    """Simple commands of a list of words: split at operators, assignments before the
    command, wrappers and redirections (with their targets) left out."""
    result: list[list[str]] = []
    current: list[str] = []
    skip_next = False
    for word in [*words, ";"]:
        if skip_next:
            skip_next = False
            continue
        if word in OPERATORS:
            if current:
                result.append(current)
            current = []
            continue
        if word in REDIRECTIONS:
            if current and current[-1].isdigit():  # 2>/dev/null: the fd number
                current.pop()
            skip_next = True
            continue
        if not current and (ASSIGNMENT.match(word) or word in WRAPPERS):
            continue
        current.append(word)
    return result


def kt_commands() -> list[tuple[str, list[str]]]:
    """(where, arguments after `kt`) of every kt command line in the pages."""
    found = []
    for page in doc_pages():
        for block in code_blocks(page):
            if block.language not in SHELL_LANGUAGES:
                continue
            for number, words in shell_commands(block):
                if words and (words[0] == "kt" or words[0].endswith("/kt")):
                    where = f"{page.relative_to(ROOT)}:{number}: {shlex.join(words)}"
                    found.append((where, words[1:]))
    return found


def _context(command: click.Command, name: str, parent: click.Context | None) -> click.Context:
    """A context as click makes one, with the command's context settings: click
    caches each command's help option from the first context it sees, so a context
    without `help_option_names` would take `-h` from every command (and from the man
    pages and completions generated in the same process)."""
    return click.Context(command, info_name=name, parent=parent, **command.context_settings)


def parse_problems(args: list[str]) -> list[str]:
    """Why `kt ARGS` would not parse (an empty list when it would), walking the click
    tree with click's own parser and running nothing."""
    command: click.Command = cli
    parent: click.Context | None = None
    name = "kt"
    while True:
        # click's parser alone: nothing is converted, called back or run here
        ctx = _context(command, name, parent)
        parser = command.make_parser(ctx)
        try:
            opts, rest, _order = parser.parse_args(args=list(args))
        except click.UsageError as exc:
            return [f"{ctx.command_path}: {exc.format_message()}"]
        problems = _value_problems(command, ctx, opts)
        if isinstance(command, click.Group):
            if not rest:
                return problems  # `kt topic`: the group itself (prints its help)
            sub = command.get_command(ctx, rest[0])
            if sub is None:
                return [*problems, f"{ctx.command_path}: no such command {rest[0]!r}"]
            command, parent, name, args = sub, ctx, rest[0], rest[1:]
            continue
        if rest and not ctx.allow_extra_args:
            problems.append(f"{ctx.command_path}: unexpected extra arguments {rest}")
        return problems


def _value_problems(command: click.Command, ctx: click.Context, opts: dict) -> list[str]:
    """Values given to parameters of pure types that do not convert."""
    problems = []
    for param in command.get_params(ctx):
        if param.name not in opts or not isinstance(param.type, PURE_TYPES):
            continue
        value = opts[param.name]
        if value is None or type(value).__name__ == "Sentinel":
            continue
        try:
            param.type_cast_value(ctx, value)
        except click.BadParameter as exc:
            problems.append(f"{ctx.command_path} {param.opts[0]}: {exc.format_message()}")
    return problems


COMMANDS = kt_commands()


def test_the_docs_have_commands_to_check() -> None:
    # the extraction itself: the README's tour alone has dozens
    assert len(COMMANDS) > 100
    assert any(where.startswith("README.md") for where, _ in COMMANDS)
    assert len(EXAMPLES) > 50


@pytest.mark.parametrize(("where", "args"), COMMANDS, ids=[w for w, _ in COMMANDS])
def test_each_documented_command_parses(where: str, args: list[str]) -> None:
    problems = parse_problems(args)
    assert not problems, f"{where}\n  " + "\n  ".join(problems)


def help_examples() -> list[tuple[str, list[str]]]:
    """(where, arguments after `kt`) of every `kt ...` example line in the commands'
    own help texts (their Examples sections), which --help and the man pages show."""
    found = []

    def walk(command: click.Command, ctx: click.Context) -> None:
        for line in [*(command.help or "").splitlines(), *(command.epilog or "").splitlines()]:
            if line.strip().startswith("kt "):
                block = CodeBlock(ROOT, "sh", 0, (line.strip(),))
                found.extend(
                    (f"{ctx.command_path} --help: {shlex.join(words)}", words[1:])
                    for _, words in shell_commands(block)
                    if words and words[0] == "kt"
                )
        if isinstance(command, click.Group):
            for name in command.list_commands(ctx):
                sub = command.get_command(ctx, name)
                if sub is not None:
                    walk(sub, _context(sub, name, ctx))

    walk(cli, _context(cli, "kt", None))
    return found


EXAMPLES = help_examples()


@pytest.mark.parametrize(("where", "args"), EXAMPLES, ids=[w for w, _ in EXAMPLES])
def test_each_help_example_parses(where: str, args: list[str]) -> None:
    problems = parse_problems(args)
    assert not problems, f"{where}\n  " + "\n  ".join(problems)


def test_the_checker_sees_drift() -> None:
    assert parse_problems(["topic", "describe", "--topic", "orders"]) == []
    assert parse_problems(["dump-segment", "--deep-iteration", "--files", "x.log"]) == []
    assert parse_problems(["topic", "describe", "--no-such-option"])
    assert parse_problems(["topic", "no-such-command"])
    assert parse_problems(["no-such-command"])
    assert parse_problems(["topic", "describe", "--topic"])  # the option's value missing
    assert parse_problems(["leader-election", "--election-type", "sideways"])
    assert parse_problems(["topic", "list", "stray"])  # list takes no argument


def test_the_extraction_reads_shell_as_a_shell_does() -> None:
    block = CodeBlock(
        ROOT / "x.md",
        "sh",
        1,
        (
            "# a comment: kt topic --bogus",
            "$ kt topic list   # and a trailing comment",
            "printf 'a\\n' | KT_X=1 kt produce orders -K: 2>/dev/null && kt topic list",
            "kt reassign-partitions --execute \\",
            "    --reassignment-json-file plan.json",
            'echo \'{"a":',
            " 1}' > f.json; nohup kt consume orders -e > out.txt",
        ),
    )
    commands = [words for _, words in shell_commands(block)]
    assert commands == [
        ["kt", "topic", "list"],
        ["printf", "a\\n"],
        ["kt", "produce", "orders", "-K:"],
        ["kt", "topic", "list"],
        ["kt", "reassign-partitions", "--execute", "--reassignment-json-file", "plan.json"],
        ["echo", '{"a":\n 1}'],
        ["kt", "consume", "orders", "-e"],
    ]


def _slug(heading: str) -> str:
    """GitHub's anchor for a heading: the text without markup, lower case, punctuation
    dropped, spaces as hyphens."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading)
    text = text.replace("`", "").replace("*", "").strip().lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def _anchors(page: Path) -> set[str]:
    anchors: set[str] = set()
    seen: dict[str, int] = {}
    fence = False
    for line in page.read_text(encoding="utf-8").splitlines():
        if re.match(r"\s*(```|~~~)", line):
            fence = not fence
        if fence or not (match := re.match(r"#{1,6}\s+(.*?)\s*#*\s*$", line)):
            continue
        slug = _slug(match.group(1))
        count = seen.get(slug, 0)
        seen[slug] = count + 1
        anchors.add(slug if count == 0 else f"{slug}-{count}")
    return anchors


def _links(page: Path) -> list[tuple[int, str]]:
    """(line, target) of every inline Markdown link and image outside code."""
    links = []
    fence = False
    for number, line in enumerate(page.read_text(encoding="utf-8").splitlines(), 1):
        if re.match(r"\s*(```|~~~)", line):
            fence = not fence
            continue
        if fence:
            continue
        prose = re.sub(r"`[^`]*`", "", line)
        links += [(number, target) for target in re.findall(r"\]\(([^)\s]+)\)", prose)]
    return links


@pytest.mark.parametrize("page", doc_pages(), ids=lambda p: str(p.relative_to(ROOT)))
def test_relative_links_resolve(page: Path) -> None:
    broken = []
    for number, target in _links(page):
        if re.match(r"[a-z]+:", target):  # https:, mailto:
            continue
        path_part, _, anchor = target.partition("#")
        dest = (page.parent / path_part).resolve() if path_part else page
        if not dest.exists():
            broken.append(f"{number}: {target} (no such file)")
        elif anchor and dest.suffix == ".md" and anchor not in _anchors(dest):
            broken.append(f"{number}: {target} (no such heading)")
    assert not broken, f"{page.relative_to(ROOT)}:\n  " + "\n  ".join(broken)
