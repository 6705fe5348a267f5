"""`kt compat run|install|list`: Kafka's `bin/` tools, their command lines unchanged.

`kt compat run kafka-topics --bootstrap-server B --list` (or `kt kafka-topics ...`, or
a program named `kafka-topics.sh` that runs kt) runs the kt command that implements
the tool; `kt compat install DIR` writes DIR/bin/ of scripts named after Kafka's
tools, so `KAFKA_PATH=DIR` or a PATH entry makes a runbook written for Kafka's tools
use kt. The translation lives in `kt.tools.compat_tools`.
"""

from __future__ import annotations

import os
import shlex
import sys
from pathlib import Path

import click

from kt.storage.atomic import atomic_write
from kt.tools.compat_args import Arity
from kt.tools.compat_tools import NOT_COVERED, TOOLS, run_tool, tool_name
from kt.tools.console import handle_errors, usage_error


@click.group()
def compat() -> None:
    """Run Kafka's bin/ tools (kafka-topics.sh, ...) with their command lines.

    \b
    Examples:
      kt compat run kafka-topics --bootstrap-server 127.0.0.1:9092 --list
      kt compat install /opt/kt-kafka
      kt compat list kafka-topics

    `kt kafka-topics ...` is short for `kt compat run kafka-topics ...`. Output and
    exit codes are Kafka's (0 ok, 1 failed or bad usage); an option of Kafka's
    without an implementation here is one error naming it (docs/runbooks.md).
    """


@compat.command(
    context_settings={
        "ignore_unknown_options": True,
        "allow_interspersed_args": False,
    }
)
@click.argument("tool")
@click.argument("args", nargs=-1, type=click.UNPROCESSED)
def run(tool: str, args: tuple[str, ...]) -> None:
    """Run Kafka's tool TOOL (kafka-topics or kafka-topics.sh) with Kafka's ARGS."""
    sys.exit(run_tool(tool, list(args)))


def _script(tool: str) -> str:
    # The interpreter that runs kt now, so the scripts work outside any venv too.
    python = shlex.quote(sys.executable)
    path = os.environ.get("PYTHONPATH")
    env = f"PYTHONPATH={shlex.quote(path)}${{PYTHONPATH:+:$PYTHONPATH}} " if path else ""
    return (
        "#!/bin/sh\n"
        f"# {tool}.sh run by kt (written by `kt compat install`)\n"
        f'{env}exec {python} -m kt compat run {tool} "$@"\n'
    )


@compat.command()
@click.argument("directory", type=click.Path(file_okay=False, path_type=Path))
@handle_errors
def install(directory: Path) -> None:
    """Write DIRECTORY/bin/ with kafka-*.sh scripts (and names without .sh) that run kt.

    Point KAFKA_PATH at DIRECTORY, or put DIRECTORY/bin on PATH. Existing scripts of
    the same names are replaced; nothing else in the directory is touched.
    """
    bin_dir = directory / "bin"
    bin_dir.mkdir(parents=True, exist_ok=True)
    # The tools not covered get scripts too: a runbook calling one is told so in one
    # line (exit 1) rather than by the shell's "not found".
    names = sorted([*TOOLS, *NOT_COVERED])
    for name in names:
        for file_name in (f"{name}.sh", name):
            target = bin_dir / file_name
            atomic_write(target, _script(name).encode())
            target.chmod(0o755)
    others = f", {len(NOT_COVERED)} saying they are not" if NOT_COVERED else ""
    click.echo(f"Wrote {2 * len(names)} scripts to {bin_dir} ({len(TOOLS)} tools covered{others})")


@compat.command("list")
@click.argument("tool", required=False)
def list_tools(tool: str | None) -> None:
    """Which of Kafka's tools kt runs, and with TOOL its options (those kt refuses too)."""
    if tool is None:
        for name in sorted(TOOLS):
            click.echo(f"{name:28}covered ({TOOLS[name].kt_command})")
        for name in sorted(NOT_COVERED):
            click.echo(f"{name:28}not covered: {NOT_COVERED[name]}")
        return
    t = TOOLS.get(tool_name(tool))
    if t is None:
        usage_error(f"{tool}: {NOT_COVERED.get(tool_name(tool), 'not a tool kt covers')}")
    for name, arity in sorted(t.spec.supported.items()):
        if name in t.spec.refused:
            continue
        click.echo(f"--{name}{'' if arity is Arity.FLAG else ' VALUE'}\tsupported")
    for name, why in sorted(t.spec.refused.items()):
        click.echo(f"--{name}\trefused: {why}")
    for name, why in sorted(t.spec.unsupported.items()):
        click.echo(f"--{name}\tnot supported{': ' + why if why else ''}")
