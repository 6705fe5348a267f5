"""Shared output conventions for every kt command.

- Data goes to stdout; diagnostics and errors go to stderr.
- Rich tables when stdout is a terminal, plain stable text when piped, NDJSON/JSON
  with `--json`.
- Errors are one line on stderr, never a traceback, with the documented exit code:
  0 ok, 1 problems found or the operation failed, 2 usage error.
"""

from __future__ import annotations

import functools
import inspect
import json
import sys
from collections.abc import Callable, Iterable, Sequence
from contextvars import ContextVar
from typing import Any, NoReturn, TypeVar

import click

EXIT_OK = 0
EXIT_PROBLEM = 1
EXIT_USAGE = 2

F = TypeVar("F", bound=Callable[..., Any])


class CommandError(click.ClickException):
    """A failure reported as one line on stderr with a chosen exit code."""

    def __init__(self, message: str, exit_code: int = EXIT_PROBLEM) -> None:
        super().__init__(message)
        self.exit_code = exit_code

    def show(self, file: Any = None) -> None:
        click.echo(f"kt: error: {self.format_message()}", err=True)


def fail(message: str, exit_code: int = EXIT_PROBLEM) -> NoReturn:
    """Stop the command with one error line and `exit_code`."""
    raise CommandError(message, exit_code)


def usage_error(message: str) -> NoReturn:
    """Stop the command with one error line and exit code 2."""
    raise CommandError(message, EXIT_USAGE)


def warn(message: str) -> None:
    """One warning line on stderr."""
    click.echo(f"kt: warning: {message}", err=True)


_ABBREVIATIONS = frozenset({"e.g.", "i.e.", "cf.", "vs.", "approx."})


def first_sentence(text: str, limit: int | None = None) -> str:
    """The first sentence of the first paragraph of a help text, whitespace collapsed.

    With `limit`, a longer sentence is cut at a word and ends in "..."; without,
    it is whole (command summaries: a cut one reads as a broken sentence).
    """
    text = inspect.cleandoc(text).partition("\f")[0]
    words = text.partition("\n\n")[0].split()
    if words and words[0] == "\b":
        words = words[1:]
    for i, word in enumerate(words):
        # A period ends the sentence unless it is an abbreviation or a lowercase word
        # follows ("a vs. b").
        if word.lstrip("(").lower() in _ABBREVIATIONS:
            continue
        if word.endswith(".") and (i == len(words) - 1 or not words[i + 1][:1].islower()):
            words = words[: i + 1]
            break
    sentence = " ".join(words)
    if limit is not None and len(sentence) > limit:
        cut = sentence[: limit - 3].rsplit(" ", 1)[0]
        sentence = cut.rstrip(",;:") + "..."
    return sentence


def plural(count: int, noun: str, plural_form: str | None = None) -> str:
    """`count` and `noun`, the noun in the plural unless count is 1: "1 batch", "2 batches"."""
    if count == 1:
        return f"{count} {noun}"
    if plural_form is None:
        plural_form = noun + ("es" if noun.endswith(("s", "x", "ch", "sh")) else "s")
        if noun.endswith("y") and noun[-2:-1] not in "aeiou":
            plural_form = noun[:-1] + "ies"
    return f"{count} {plural_form}"


def handle_errors(func: F) -> F:
    """Turn expected failures inside a command into one error line and an exit code.

    OSError (missing file, permission denied, disk full) becomes exit 1 with the
    path and the reason; a broken pipe (`kt ... | head`) exits quietly. Anything
    else is a bug and keeps its traceback.
    """

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return func(*args, **kwargs)
        except BrokenPipeError:
            _silence_stdout()
            sys.exit(EXIT_OK)
        except FileNotFoundError as exc:
            raise CommandError(
                f"{exc.filename or exc}: no such file or directory", EXIT_USAGE
            ) from exc
        except IsADirectoryError as exc:
            raise CommandError(f"{exc.filename}: is a directory", EXIT_USAGE) from exc
        except PermissionError as exc:
            raise CommandError(f"{exc.filename or exc}: permission denied", EXIT_PROBLEM) from exc
        except OSError as exc:
            where = f"{exc.filename}: " if exc.filename else ""
            raise CommandError(f"{where}{exc.strerror or exc}", EXIT_PROBLEM) from exc

    return wrapper  # type: ignore[return-value]


def _silence_stdout() -> None:
    # After EPIPE, Python would complain again while flushing stdout at exit.
    try:
        import os

        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except OSError:
        pass


def stdout_is_terminal() -> bool:
    """True when stdout is an interactive terminal (rich output), False when piped."""
    return sys.stdout.isatty()


def emit_json(obj: Any) -> None:
    """Write one JSON document (or one NDJSON line) to stdout."""
    sys.stdout.write(json.dumps(obj, separators=(",", ":"), ensure_ascii=False) + "\n")


#: Set by `kt compat` while it runs a kt command for one of Kafka's tools: tables are
#: then printed as Kafka's tools' prettyPrintTable prints them (each cell padded to
#: its column's widest, a tab after every cell, the header first).
KAFKA_TABLES: ContextVar[bool] = ContextVar("KAFKA_TABLES", default=False)


def kafka_table(headers: Sequence[str], rows: Iterable[Sequence[Any]]) -> str:
    """ToolsUtils/TransactionsCommand.prettyPrintTable's text ("None" for a missing value)."""
    cells = [[str(h) for h in headers]] + [["None" if v is None else str(v) for v in r]
                                          for r in rows]  # fmt: skip
    widths = [max(len(r[i]) for r in cells) for i in range(len(headers))]
    return "".join("".join(c.ljust(w) + "\t" for c, w in zip(r, widths, strict=True)) + "\n"
                   for r in cells)  # fmt: skip


def render_table(
    headers: Sequence[str], rows: Iterable[Sequence[Any]], title: str | None = None
) -> None:
    """A table: rich on a terminal, tab-free aligned plain text when piped (Kafka's
    layout under `kt compat`, see KAFKA_TABLES)."""
    rows = [list(r) for r in rows]
    if KAFKA_TABLES.get():
        click.echo(kafka_table(headers, rows), nl=False)
        return
    if stdout_is_terminal():
        from rich.console import Console
        from rich.table import Table

        table = Table(title=title)
        for h in headers:
            table.add_column(h)
        for r in rows:
            table.add_row(*("" if v is None else str(v) for v in r))
        Console().print(table)
    else:
        from tabulate import tabulate

        if title:
            click.echo(title)
        click.echo(tabulate(rows, headers=list(headers), tablefmt="plain", disable_numparse=True))
