"""Shared plumbing of the online commands: the connection options (--bootstrap-server,
--timeout, --command-config, -X, -F, --profile, -v; see `connect_settings`), running
a coroutine with a connected `KafkaClient`, and turning client errors into kt's
one-line errors and exit codes.
"""

from __future__ import annotations

import asyncio
import functools
import re
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, TypeVar

import click
from click.core import ParameterSource

from kt.client import (
    KafkaClient,
    KafkaConnectionError,
    KafkaError,
    KafkaTimeoutError,
    SecurityConfig,
    SecurityConfigError,
    parse_bootstrap,
)
from kt.client.security import SECURITY_KEYS
from kt.tools.connect_settings import DEFAULT_BOOTSTRAP as DEFAULT_BOOTSTRAP
from kt.tools.connect_settings import ConnectSettings, SettingsError, resolve
from kt.tools.console import fail, usage_error, warn

T = TypeVar("T")
F = TypeVar("F", bound=Callable[..., Any])

#: at most this long to reach a bootstrap server, however long --timeout is
MAX_CONNECT_TIMEOUT = 10.0


@dataclass
class Wire:
    """Where and how to reach the cluster (from the common options)."""

    bootstrap: str
    timeout: float
    client_id: str = "kt"
    #: client security properties (security.protocol, ssl.*, sasl.*)
    properties: dict[str, str] = field(default_factory=dict)

    def security(self) -> SecurityConfig:
        """The TLS/SASL settings; a bad one is a usage error (exit 2)."""
        try:
            return SecurityConfig.from_properties(self.properties)
        except SecurityConfigError as exc:
            usage_error(str(exc))

    def client(self, security: SecurityConfig | None = None) -> KafkaClient:
        """A new, not yet started client."""
        return KafkaClient(
            self.bootstrap,
            client_id=self.client_id,
            request_timeout=self.timeout,
            connect_timeout=min(self.timeout, MAX_CONNECT_TIMEOUT),
            security=security if security is not None else self.security(),
        )

    def run(self, func: Callable[[KafkaClient], Awaitable[T]]) -> T:
        """Connect, run `func(client)`, close; client errors become one error line
        and exit 1 (a malformed bootstrap list or a bad security setting: exit 2)."""
        try:
            parse_bootstrap(self.bootstrap)
        except ValueError as exc:
            usage_error(f"--bootstrap-server: {exc}")
        self.security()  # a bad setting is a usage error before anything starts

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
        except SecurityConfigError as exc:
            # found at connection time (an OIDC token endpoint refusing, ...)
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


def _source(name: str) -> ParameterSource | None:
    ctx = click.get_current_context(silent=True)
    return ctx.get_parameter_source(name) if ctx is not None else None


def settings_from_options(
    *,
    bootstrap: str | None,
    command_config: str | None,
    properties_file: str | None,
    x_items: tuple[str, ...] | list[str],
    profile: str | None,
    verbose: bool,
) -> ConnectSettings:
    """The merged connection settings of a command's options (usage error if bad)."""
    from_env = _source("bootstrap") == ParameterSource.ENVIRONMENT
    try:
        settings = resolve(
            bootstrap_flag=None if from_env else bootstrap,
            bootstrap_env=bootstrap if from_env else None,
            command_config=command_config,
            properties_file=properties_file,
            x_items=x_items,
            profile_name=profile,
        )
    except SettingsError as exc:
        usage_error(str(exc))
    for w in settings.warnings:
        warn(w)
    if verbose:
        for note in settings.notes:
            click.echo(f"kt: {note}", err=True)
        protocol = settings.properties.get("security.protocol", "PLAINTEXT").upper()
        click.echo(
            f"kt: bootstrap servers {settings.bootstrap} (from {settings.source}), "
            f"security.protocol={protocol}",
            err=True,
        )
    return settings


def wire_from_settings(settings: ConnectSettings, timeout: float, timeout_given: bool) -> Wire:
    """A Wire for the settings; client.id and the timeouts from the properties."""
    props = settings.properties
    wire = Wire(settings.bootstrap, timeout, props.get("client.id") or "kt",
                settings.security_properties())  # fmt: skip
    timeouts = [int(props[k]) for k in ("request.timeout.ms", "default.api.timeout.ms")
                if k in props]  # fmt: skip
    if timeouts and not timeout_given:
        # the larger of the two, as an admin call may take that long
        wire.timeout = max(timeouts) / 1000
    return wire


def connection_options(func: F) -> F:
    """--bootstrap-server/-b, --command-config, -X, -F, --profile (the connection
    options `kt tui` shares with `wire_options`); adds the `settings` keyword."""
    shares_verbose = any(getattr(p, "name", None) == "verbose"
                         for p in getattr(func, "__click_params__", []))  # fmt: skip

    @click.option(
        "--bootstrap-server",
        "-b",
        "bootstrap",
        envvar="KT_BOOTSTRAP_SERVER",
        default=None,
        metavar="HOST:PORT[,...]",
        help="Brokers to bootstrap from (env KT_BOOTSTRAP_SERVER; else the profile, "
        "else ./kt-cluster's local cluster, else localhost:9092).",
    )
    @click.option(
        "--command-config",
        metavar="FILE",
        help="Kafka client properties: bootstrap.servers, client.id, security.protocol, "
        "ssl.*, sasl.* (incl. sasl.jaas.config), request.timeout.ms.",
    )
    @click.option("-F", "properties_file", metavar="FILE",
                  help="Client properties file (as kcat -F).")  # fmt: skip
    @click.option("-X", "x_items", multiple=True, metavar="KEY=VALUE",
                  help="Client property, repeatable (as kcat -X), e.g. "
                  "-X security.protocol=SASL_SSL.")  # fmt: skip
    @click.option("--profile", envvar="KT_PROFILE", metavar="NAME",
                  help="Connection profile (kt profile; env KT_PROFILE).")  # fmt: skip
    @functools.wraps(func)
    def wrapper(*args: Any, bootstrap: str | None, command_config: str | None,
                properties_file: str | None, x_items: tuple[str, ...], profile: str | None,
                **kwargs: Any) -> Any:  # fmt: skip
        verbose = bool(kwargs.get("verbose")) if shares_verbose else kwargs.pop("wire_verbose")
        settings = settings_from_options(
            bootstrap=bootstrap,
            command_config=command_config,
            properties_file=properties_file,
            x_items=x_items,
            profile=profile,
            verbose=verbose,
        )
        return func(*args, settings=settings, **kwargs)

    if not shares_verbose:
        wrapper = click.option(
            "--verbose", "-v", "wire_verbose", is_flag=True,
            help="Say on stderr which cluster and settings are used.",
        )(wrapper)  # fmt: skip
    return wrapper  # type: ignore[return-value]


def wire_options(func: F) -> F:
    """The connection options and --timeout; the command receives `wire: Wire`."""

    @connection_options
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
    def wrapper(*args: Any, settings: ConnectSettings, timeout: float, **kwargs: Any) -> Any:
        given = _source("timeout") in (ParameterSource.COMMANDLINE, ParameterSource.ENVIRONMENT)
        return func(*args, wire=wire_from_settings(settings, timeout, given), **kwargs)

    return wrapper  # type: ignore[return-value]


__all__ = ["DEFAULT_BOOTSTRAP", "SECURITY_KEYS", "Wire", "wire_options"]


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
