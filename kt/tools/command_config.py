"""`--command-config FILE`: Kafka's admin-client properties file for a kt command.

Kafka's tools (kafka-reassign-partitions.sh and others) pass such a file to their
AdminClient. kt reads the settings it can honour and refuses the rest with one
clear line (exit 2) rather than connecting without, say, the TLS or SASL settings
the file asks for:

- `bootstrap.servers`: used unless --bootstrap-server (or KT_BOOTSTRAP_SERVER) is
  given, which wins, as Kafka's tools put --bootstrap-server over the file's;
- `client.id`;
- `request.timeout.ms` and `default.api.timeout.ms`: the per-request timeout unless
  --timeout is given (the larger of the two, as an admin call may take that long);
- `security.protocol`: PLAINTEXT only (kt's client speaks nothing else).
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import click
from click.core import ParameterSource

from kt.storage.errors import CorruptCheckpointError
from kt.storage.meta_properties import parse_properties
from kt.tools.console import usage_error
from kt.tools.wire import Wire

SUPPORTED = (
    "bootstrap.servers",
    "client.id",
    "request.timeout.ms",
    "default.api.timeout.ms",
    "security.protocol",
)


def read_command_config(path: str) -> dict[str, str]:
    """The file's properties, each checked; a usage error (exit 2) for a missing
    file, an unsupported property or a bad value."""
    p = Path(path)
    if not p.is_file():
        usage_error(f"--command-config: {path}: no such file")
    try:
        # values trimmed, as Kafka's ConfigDef trims an admin client's settings
        props = {k: v.strip() for k, v in parse_properties(p.read_text()).items()}
    except (OSError, UnicodeDecodeError, CorruptCheckpointError) as exc:
        usage_error(f"--command-config: {path}: {exc}")
    for key, value in props.items():
        if key not in SUPPORTED:
            usage_error(
                f"--command-config: {path}: unsupported property {key} (kt supports "
                f"{', '.join(SUPPORTED)}; security.protocol=PLAINTEXT only)"
            )
        if key == "security.protocol" and value.upper() != "PLAINTEXT":
            usage_error(
                f"--command-config: {path}: security.protocol={value} is not supported "
                "(kt connects with PLAINTEXT only)"
            )
        if key.endswith(".ms") and not (value.isdigit() and int(value) > 0):
            usage_error(f"--command-config: {path}: {key}={value}: not a positive integer")
        if key in ("bootstrap.servers", "client.id") and not value:
            usage_error(f"--command-config: {path}: {key} is empty")
    return props


def _given(name: str) -> bool:
    """Whether the current command's option `name` came from the user (command line
    or environment), not its default."""
    source = click.get_current_context().get_parameter_source(name)
    return source in (ParameterSource.COMMANDLINE, ParameterSource.ENVIRONMENT)


def apply_command_config(wire: Wire, path: str | None) -> Wire:
    """`wire` with the file's settings where the command line left defaults."""
    if path is None:
        return wire
    props = read_command_config(path)
    out = wire
    if "bootstrap.servers" in props and not _given("bootstrap"):
        out = replace(out, bootstrap=props["bootstrap.servers"])
    if "client.id" in props:
        out = replace(out, client_id=props["client.id"])
    timeouts = [int(props[k]) for k in ("request.timeout.ms", "default.api.timeout.ms")
                if k in props]  # fmt: skip
    if timeouts and not _given("timeout"):
        out = replace(out, timeout=max(timeouts) / 1000)
    return out
