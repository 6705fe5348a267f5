"""Shared plumbing of the online commands: --bootstrap-server / --timeout options,
running a coroutine with a connected `KafkaClient`, and turning client errors
into kt's one-line errors and exit codes.
"""

from __future__ import annotations

import asyncio
import functools
import re
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from typing import Any, TypeVar

import click

from kt.client import (
    KafkaClient,
    KafkaConnectionError,
    KafkaError,
    KafkaTimeoutError,
    parse_bootstrap,
)
from kt.tools.console import fail, usage_error

T = TypeVar("T")
F = TypeVar("F", bound=Callable[..., Any])

DEFAULT_BOOTSTRAP = "localhost:9092"
#: at most this long to reach a bootstrap server, however long --timeout is
MAX_CONNECT_TIMEOUT = 10.0


@dataclass
class Wire:
    """Where and how to reach the cluster (from the common options)."""

    bootstrap: str
    timeout: float
    client_id: str = "kt"

    def client(self) -> KafkaClient:
        """A new, not yet started client."""
        return KafkaClient(
            self.bootstrap,
            client_id=self.client_id,
            request_timeout=self.timeout,
            connect_timeout=min(self.timeout, MAX_CONNECT_TIMEOUT),
        )

    def run(self, func: Callable[[KafkaClient], Awaitable[T]]) -> T:
        """Connect, run `func(client)`, close; client errors become one error line
        and exit 1 (a malformed bootstrap list: exit 2)."""
        try:
            parse_bootstrap(self.bootstrap)
        except ValueError as exc:
            usage_error(f"--bootstrap-server: {exc}")

        async def main() -> T:
            client = self.client()
            try:
                await client.start()
                return await func(client)
            finally:
                await client.close()
                await _settle_tasks()

        try:
            return asyncio.run(main())
        except KafkaConnectionError as exc:
            fail(str(exc))
        except KafkaTimeoutError as exc:
            fail(str(exc))
        except KafkaError as exc:
            fail(str(exc))


async def _settle_tasks() -> None:
    """Cancel and wait for the tasks a failed command left behind (a request to one
    broker still running when another's failed), so none is reported as destroyed
    while pending, or as an unhandled exception during asyncio.run's shutdown; their
    errors are the failed command's, already reported once."""
    me = asyncio.current_task()
    left = [t for t in asyncio.all_tasks() if t is not me and not t.done()]
    for t in left:
        t.cancel()
    if left:
        await asyncio.wait(left)
        for t in left:
            if not t.cancelled():
                t.exception()


def wire_options(func: F) -> F:
    """Add --bootstrap-server/-b and --timeout; the command receives `wire: Wire`."""

    @click.option(
        "--bootstrap-server",
        "-b",
        "bootstrap",
        envvar="KT_BOOTSTRAP_SERVER",
        default=DEFAULT_BOOTSTRAP,
        show_default=True,
        metavar="HOST:PORT[,...]",
        help="Brokers to bootstrap from (env KT_BOOTSTRAP_SERVER).",
    )
    @click.option(
        "--timeout",
        type=click.FloatRange(min=0.1),
        default=30.0,
        show_default=True,
        metavar="SECONDS",
        help=f"Per-request timeout; reaching the cluster takes at most "
        f"min(this, {MAX_CONNECT_TIMEOUT:g}) seconds.",
    )
    @functools.wraps(func)
    def wrapper(*args: Any, bootstrap: str, timeout: float, **kwargs: Any) -> Any:
        return func(*args, wire=Wire(bootstrap, timeout), **kwargs)

    return wrapper  # type: ignore[return-value]


def parse_kv(text: str, option: str) -> tuple[str, str]:
    """'k=v' -> (k, v); a usage error without '='."""
    key, sep, value = text.partition("=")
    if not sep or not key:
        usage_error(f"{option}: expected NAME=VALUE, got {text!r}")
    return key, value


_REGEX_CHARS = re.compile(r"[*?\[\]()|+^$\\{}]")


def match_names(pattern: str, names: Iterable[str]) -> list[str]:
    """Names equal to `pattern`, or, when it looks like a regex (or a comma list),
    the names it fully matches; sorted."""
    names = list(names)
    if "," in pattern:
        out: set[str] = set()
        for part in pattern.split(","):
            if part:
                out.update(match_names(part, names))
        return sorted(out)
    if pattern in names:
        return [pattern]
    if not _REGEX_CHARS.search(pattern):
        return []
    try:
        rx = re.compile(pattern)
    except re.error as exc:
        usage_error(f"invalid topic pattern {pattern!r}: {exc}")
    return sorted(n for n in names if rx.fullmatch(n))


def unescape(text: str) -> str:
    r"""Turn \n \t \r \0 \\ (as typed on a command line) into the characters."""
    out = []
    i = 0
    while i < len(text):
        c = text[i]
        if c == "\\" and i + 1 < len(text):
            nxt = text[i + 1]
            mapped = {"n": "\n", "t": "\t", "r": "\r", "0": "\0", "\\": "\\"}.get(nxt)
            if mapped is not None:
                out.append(mapped)
                i += 2
                continue
        out.append(c)
        i += 1
    return "".join(out)
