"""The `kt` command-line root: registers every command group of kt/tools.

Commands are imported lazily so `kt --help` and shell completion stay fast and a
command's heavy dependencies (PySpark, Textual) load only when it runs.
"""

from __future__ import annotations

import importlib
import sys

import click

from kt import __version__
from kt.tools.console import first_sentence

# name -> "module:attribute". One line per command or command group; aliases point
# at the same object. Keep sorted by name.
COMMANDS: dict[str, str] = {
    "acl": "kt.tools.acl_cmd:acl",
    "analyze": "kt.tools.analyze_cmd:analyze",
    "broker": "kt.tools.broker_cmd:broker",
    "checkpoint": "kt.tools.checkpoint_cmd:checkpoint",
    "cluster": "kt.tools.cluster_cmd:cluster",
    "compaction": "kt.tools.compaction_cmd:compaction",
    "compat": "kt.tools.compat_cmd:compat",
    "configs": "kt.tools.configs_cmd:configs",
    "consume": "kt.tools.consume_cmd:consume",
    "dump-log-segments": "kt.tools.dump_log:dump_log_segments",
    "dump-segment": "kt.tools.dump_log:dump_log_segments",
    "export": "kt.tools.export_cmd:export",
    "group": "kt.tools.group_cmd:group",
    "index": "kt.tools.index_cmd:index",
    "leader-election": "kt.tools.leader_election_cmd:leader_election",
    "log-dirs": "kt.tools.log_dirs_cmd:log_dirs",
    "metadata": "kt.tools.metadata_cmd:metadata",
    "produce": "kt.tools.produce_cmd:produce",
    "profile": "kt.tools.profile_cmd:profile",
    "reassign-partitions": "kt.tools.reassign_cmd:reassign_partitions",
    "replica": "kt.tools.replica_cmd:replica",
    "topic": "kt.tools.topic_cmd:topic",
    "transactions": "kt.tools.transactions_cmd:transactions",
    "tui": "kt.tools.tui_cmd:tui",
    "user": "kt.tools.user_cmd:user",
}

# Aliases are listed in help once, under their main name.
ALIASES: dict[str, str] = {"dump-segment": "dump-log-segments"}


class LazyGroup(click.Group):
    """A click group that imports each subcommand's module on first use."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(name for name in COMMANDS if name not in ALIASES)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        target = COMMANDS.get(cmd_name)
        if target is None:
            return None
        module_name, attr = target.split(":")
        try:
            module = importlib.import_module(module_name)
        except ModuleNotFoundError as exc:
            # A command whose module is not there yet (or whose optional extra is
            # missing) must not break every other command.
            if exc.name and (exc.name == module_name or module_name.startswith(exc.name + ".")):
                return None
            raise
        command: click.Command = getattr(module, attr)
        _whole_summaries(command)
        return command

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        """The Commands section, with each alias on a row of its own after its target."""
        rows = []
        for name in self.list_commands(ctx):
            command = self.get_command(ctx, name)
            if command is None or command.hidden:
                continue
            rows.append((name, command.get_short_help_str()))
            rows += [(a, f"Alias of {name}.") for a, target in ALIASES.items() if target == name]
        if rows:
            with formatter.section("Commands"):
                formatter.write_dl(rows)


def _whole_summaries(command: click.Command) -> None:
    """Give `command` and its subcommands their whole first sentence as short help.

    click cuts a summary to the terminal width with "..." mid-sentence; a complete
    sentence wrapped over two lines reads better in `kt --help` and `kt GROUP --help`.
    """
    if command.short_help is None and command.help:
        command.short_help = first_sentence(command.help)
    if isinstance(command, click.Group):
        for sub in command.commands.values():
            _whole_summaries(sub)


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, "-V", "--version", prog_name="kt")
def cli() -> None:
    """Kafka administration and forensics, with a Kafka-compatible broker.

    Offline commands read a broker's log directory (ours or Apache Kafka's);
    online commands talk to any Kafka-compatible broker.

    Exit codes: 0 ok, 1 problems found or the operation failed, 2 usage error.
    """


def _command_path(args: list[str]) -> str:
    """The path of the deepest command `args` name ("kt checkpoint edit"), walking the
    command groups by name; options and anything after the command are ignored."""
    path = ["kt"]
    command: click.Command = cli
    for token in args:
        if not isinstance(command, click.Group):
            break
        if token.startswith("-"):
            continue
        sub = command.get_command(click.Context(command), token)
        if sub is None:
            break
        path.append(token)
        command = sub
    return " ".join(path)


def main(args: list[str] | None = None) -> None:
    """Console-script entry point (`args` defaults to the process's arguments).

    Usage errors (a missing argument, an unknown option, a bad value) are one line on
    stderr with a hint and exit code 2, like every other kt error, instead of click's
    three-line usage block.
    """
    if args is None:
        args = sys.argv[1:]
        # Run as kafka-topics.sh (a link or copy named after one of Kafka's tools).
        program = sys.argv[0].rsplit("/", 1)[-1]
        if program.startswith("kafka-"):
            args = ["compat", "run", program, *args]
    if args and args[0].startswith("kafka-"):
        # `kt kafka-topics ...`: Kafka's tool names as kt's commands.
        args = ["compat", "run", *args]
    try:
        code = cli.main(args, prog_name="kt", standalone_mode=False)
    except click.UsageError as exc:
        # click's parser raises some errors (an option missing its value) without a
        # context: name the subcommand the arguments reached, not the root.
        where = exc.ctx.command_path if exc.ctx is not None else _command_path(args)
        click.echo(f"kt: error: {exc.format_message()} (see '{where} --help')", err=True)
        sys.exit(exc.exit_code)
    except click.ClickException as exc:
        exc.show()
        sys.exit(exc.exit_code)
    except click.Abort:
        click.echo("kt: aborted", err=True)
        sys.exit(130)
    sys.exit(code if isinstance(code, int) else 0)


if __name__ == "__main__":  # pragma: no cover
    main()
