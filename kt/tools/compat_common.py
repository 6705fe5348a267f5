"""What every Kafka tool shim shares: running a kt command in this process with
Kafka's exit codes, the connection options (--bootstrap-server, --command-config),
and joptsimple-style checks (one action, no bare words, options passed through).
"""

from __future__ import annotations

import contextlib
import io
from collections.abc import Callable
from dataclasses import dataclass

import click

from kt.tools.compat_args import Arity, CompatUsageError, Parsed
from kt.tools.compat_configs import warn_unknown
from kt.tools.connect_settings import SettingsError, read_properties_file, resolve
from kt.tools.wire import Wire, wire_from_settings

F, V, O = Arity.FLAG, Arity.VALUE, Arity.OPTIONAL  # noqa: E741 - the three arities
EXIT_OK, EXIT_FAILED = 0, 1

# Options every admin tool has.
COMMON = {"bootstrap-server": V, "command-config": V, "help": F, "version": F}


def run_kt(
    argv: list[str],
    *,
    quiet: bool = False,
    on_error: Callable[[str], None] | None = None,
    show_errors: bool = True,
) -> tuple[int, str]:
    """Run `kt ARGV` in this process; returns its exit code (kt's 2 for a usage error
    becomes Kafka's 1) and, when `quiet`, what it printed on stdout (else printed).
    `on_error` also gets the message of a failure (kt's error line is printed too,
    unless `show_errors` is False: then the caller reports it)."""
    from kt.cli import cli

    out = io.StringIO()
    code = EXIT_OK
    failure: str | None = None
    with contextlib.redirect_stdout(out) if quiet else contextlib.nullcontext():
        try:
            result = cli.main(argv, prog_name="kt", standalone_mode=False)
            code = result if isinstance(result, int) else EXIT_OK
        except click.UsageError as exc:
            where = exc.ctx.command_path if exc.ctx is not None else "kt"
            click.echo(f"kt: error: {exc.format_message()} (see '{where} --help')", err=True)
            code = EXIT_FAILED
        except click.ClickException as exc:
            if show_errors:
                exc.show()
            code = exc.exit_code
            failure = exc.format_message()
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else EXIT_FAILED
    if failure is not None and on_error is not None:
        on_error(failure)  # after stdout is restored
    return (EXIT_FAILED if code == 2 else code), out.getvalue()


@dataclass(frozen=True)
class Connection:
    """--bootstrap-server and --command-config, passed on to kt's own options (which
    read the properties file as Kafka's tools do: bootstrap.servers under an explicit
    --bootstrap-server, client.id, timeouts, TLS and SASL settings)."""

    bootstrap: str | None
    command_config: str | None
    timeout: float | None = None

    def argv(self) -> list[str]:
        """kt's options for it."""
        out = ["-b", self.bootstrap] if self.bootstrap else []
        out += ["--command-config", self.command_config] if self.command_config else []
        return out + (["--timeout", f"{self.timeout:g}"] if self.timeout is not None else [])

    def wire(self) -> Wire:
        """A Wire for the client-level tools, from the same settings."""
        try:
            settings = resolve(
                bootstrap_flag=self.bootstrap,
                bootstrap_env=None,
                command_config=self.command_config,
                properties_file=None,
                x_items=[],
                profile_name=None,
            )
        except SettingsError as exc:
            raise CompatUsageError(str(exc)) from None
        for w in settings.warnings:
            click.echo(f"kt: warning: {w}", err=True)
        return wire_from_settings(settings, self.timeout or 30.0, self.timeout is not None)


def connection(tool: str, p: Parsed, *, option: str = "bootstrap-server") -> Connection:
    """The cluster to reach: --bootstrap-server and/or --command-config (whose
    bootstrap.servers serves when the option is not given); Kafka's tools need one."""
    bootstrap = p.value(option)
    config = p.value("command-config")
    if not bootstrap and not config:
        raise CompatUsageError(f"--{option} must be specified")
    if config:
        warn_config_file(config, "admin")
    return Connection(bootstrap, config)


def read_config_file(path: str, option: str) -> dict[str, str]:
    """A tool's properties file (--producer.config ...): one error line if unreadable."""
    try:
        return read_properties_file(path, f"--{option}")
    except SettingsError as exc:
        raise CompatUsageError(str(exc)) from None


def warn_config_file(path: str, kind: str) -> None:
    """Kafka's WARN for each name in the file its `kind` client would not know (a file
    kt cannot read is reported by the kt command that reads it)."""
    try:
        props = read_properties_file(path, "--command-config")
    except SettingsError:
        return
    warn_unknown(props, kind)


def one_action(p: Parsed, actions: list[str]) -> str:
    """The one action flag given (Kafka's tools refuse none or several)."""
    given = [a for a in actions if p.has(a)]
    if len(given) != 1:
        listed = ", ".join(f"--{a}" for a in actions[:-1]) + f" or --{actions[-1]}"
        raise CompatUsageError(f"Command must include exactly one action: {listed}")
    return given[0]


def refuse_positional(p: Parsed) -> None:
    """Kafka's option-only tools take no bare words."""
    if p.positional:
        raise CompatUsageError(f"Found non-option arguments: {' '.join(p.positional)}")


def passthrough(p: Parsed, names: list[str]) -> list[str]:
    """`--name value` / `--name` for each of `names` given, in kt's spelling (same)."""
    out: list[str] = []
    for name in names:
        for value in p.options.get(name, []):
            out += [f"--{name}"] if value is None else [f"--{name}", value]
    return out
