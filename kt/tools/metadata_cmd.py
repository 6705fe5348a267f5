"""`kt metadata`: forensics of a KRaft cluster's metadata log and snapshots.

`kt metadata shell` replays the metadata (a snapshot, a log, or the newest snapshot
and the log after it) into the cluster image and browses it like Apache Kafka's
kafka-metadata-shell.sh (its 3.5+ tree), interactively or one command at a time
for scripts. `kt metadata timeline` tells what the cluster did, in order, with
filters and a per-partition summary; Kafka's tools have nothing like it.
"""

from __future__ import annotations

import shlex
import sys
from datetime import UTC, datetime
from pathlib import Path

import click

from kt import __version__
from kt.storage.errors import StorageError
from kt.storage.metadata_image import format_time
from kt.storage.metadata_replay import AsOf, ReplayResult, replay_paths
from kt.tools import console

METADATA_HELP = """KRaft metadata forensics: browse the cluster as of any offset, tell its history.

\b
Works offline on a KRaft node's metadata log directory (the one holding
__cluster_metadata-0 and bootstrap.checkpoint), on __cluster_metadata-0 itself,
or on chosen .log and .checkpoint files. Dump the raw records with
`kt dump-log-segments --cluster-metadata-decoder`.

\b
Examples:
  kt metadata shell --snapshot /var/lib/kafka/meta ls /image/topics/byName
  kt metadata shell --snapshot /var/lib/kafka/meta --as-of 2026-01-30T03:12:10Z \\
      cat /image/topics/byName/orders/1
  kt metadata timeline /var/lib/kafka/meta --topic orders --since 2026-01-30T03:00Z
  kt metadata timeline /var/lib/kafka/meta --summary
"""


@click.group("metadata", help=METADATA_HELP)
def metadata() -> None:
    """KRaft metadata forensics."""


def parse_as_of(text: str, option: str = "--as-of") -> AsOf:
    """An offset (digits) or an ISO-8601 time (UTC unless a zone is given)."""
    value = text.strip()
    if value.isdigit():
        return AsOf(offset=int(value))
    return AsOf(time=parse_iso(value, option))


def parse_iso(value: str, option: str) -> int:
    """Milliseconds since the epoch of an ISO-8601 time (UTC unless a zone is given)."""
    try:
        dt = datetime.fromisoformat(value.strip())
    except ValueError:
        console.usage_error(
            f"{option} {value!r}: expected an offset (digits) or an ISO-8601 time, "
            "e.g. 2026-01-30T03:12:07Z"
        )
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=UTC)
    return int(dt.timestamp() * 1000)


def check_paths(paths: tuple[Path, ...]) -> list[Path]:
    """The paths given, each existing (usage error otherwise)."""
    if not paths:
        console.usage_error("give the metadata to read with --snapshot PATH")
    for p in paths:
        if not p.exists():
            console.usage_error(f"{p}: no such file or directory")
        if p.is_file() and not (p.name.endswith((".log", ".checkpoint"))):
            console.usage_error(f"{p}: not a metadata log segment (.log) or snapshot (.checkpoint)")
    return list(paths)


def load(paths: list[Path], as_of: AsOf | None) -> ReplayResult:
    """Replay the metadata, warning about records that do not decode."""
    try:
        result = replay_paths(paths, as_of)
    except (OSError, StorageError) as exc:
        console.fail(str(exc))
    if result.errors:
        f, off, why = result.errors[0]
        console.warn(
            f"{console.plural(len(result.errors), 'record')} could not be decoded and "
            f"were skipped (first: {f} offset {off}: {why})"
        )
    return result


def describe_source(result: ReplayResult) -> str:
    """Where the image comes from, in one line."""
    p = result.image.provenance
    parts = []
    if result.snapshot is not None:
        parts.append(f"snapshot {result.snapshot.name}")
    if result.logs:
        parts.append(console.plural(len(result.logs), "log segment"))
    return (
        f"image at offset {p.offset}, epoch {p.epoch}, time {format_time(p.timestamp)} "
        f"({' + '.join(parts) or 'nothing'}, {console.plural(result.records, 'record')})"
    )


@metadata.command("shell")
@click.option(
    "--snapshot",
    "-s",
    "paths",
    multiple=True,
    type=click.Path(path_type=Path),
    metavar="PATH",
    help="What to read (repeatable): a metadata log dir or __cluster_metadata-0 (the "
    "newest fitting snapshot, then the log after it), a snapshot .checkpoint, "
    "bootstrap.checkpoint, or .log segments.",
)
@click.option(
    "--as-of",
    "as_of",
    metavar="OFFSET|TIME",
    help="Replay only up to this offset (inclusive) or ISO-8601 time, e.g. 1200 or "
    "2026-01-30T03:12:10Z.",
)
@click.argument("command", nargs=-1)
@console.handle_errors
def shell(paths: tuple[Path, ...], as_of: str | None, command: tuple[str, ...]) -> None:
    """Browse the cluster's metadata image like kafka-metadata-shell.sh.

    Without COMMAND an interactive shell starts (ls, cd, cat, find, tree, pwd,
    history, help, exit; tab completes paths). With COMMAND it runs that one
    command and exits: 0 when it worked, 1 when it failed (e.g. no such path).

    \b
    The tree (kafka-metadata-shell 3.5+):
      /image/provenance                       offset, epoch and time of the image
      /image/features/<name>                  finalized feature levels
      /image/cluster/brokers/<id>             registrations, fencing, endpoints
      /image/cluster/controllers/<id>
      /image/topics/byName/<topic>/{name,id,<partition>}
      /image/topics/byId/<uuid>/...
      /image/configs/<TYPE>:<name>/<key>       e.g. TOPIC:orders, BROKER:1, BROKER:
      /image/clientQuotas, /image/producerIds, /image/acls/byId/<uuid>,
      /image/scram/<mechanism>/<user>, /image/delegationToken/<id>
    SCRAM keys and password-like config values print as [redacted].

    \b
    Examples:
      kt metadata shell --snapshot /var/lib/kafka/meta
      kt metadata shell -s meta/__cluster_metadata-0 tree /image/cluster
      kt metadata shell -s meta --as-of 4200 cat /image/topics/byName/orders/3
      kt metadata shell -s 00000000000000004929-0000000001.checkpoint find /image/topics
    """
    from kt.tools.metadata_shell import Shell, interactive

    files = check_paths(paths)
    stop = parse_as_of(as_of) if as_of is not None else None
    result = load(files, stop)
    tree = result.image.to_tree(version=__version__)
    if not command:
        sh = Shell(tree, out=click.echo, err=lambda line: click.echo(line, err=True))
        if not sys.stdin.isatty():
            # Commands piped in, one per line (a script's here-document).
            ok = True
            for line in sys.stdin:
                try:
                    ok = sh.run(line.strip()) and ok
                except SystemExit:
                    break
            sys.exit(console.EXIT_OK if ok else console.EXIT_PROBLEM)
        sys.exit(interactive(sh, f"kt metadata shell: {describe_source(result)}. Type help."))
    sh = Shell(tree, out=click.echo, err=lambda line: click.echo(f"kt: error: {line}", err=True))
    try:
        ok = sh.run(shlex.join(command))
    except SystemExit:
        ok = True
    if not ok:
        sys.exit(console.EXIT_PROBLEM)
