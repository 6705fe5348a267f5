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
from typing import Any

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
    except StorageError as exc:
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
@click.option(
    "--json",
    "as_json",
    is_flag=True,
    help="NDJSON for scripts: one object per entry of ls and find ({path, name, type}), "
    "per file of cat ({path, value}), per tree of tree ({path, tree}).",
)
@click.argument("command", nargs=-1)
@console.handle_errors
def shell(
    paths: tuple[Path, ...], as_of: str | None, as_json: bool, command: tuple[str, ...]
) -> None:
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
      kt metadata shell -s meta --json ls /image/topics/byName
    """
    from kt.tools.metadata_shell import Shell, interactive

    files = check_paths(paths)
    stop = parse_as_of(as_of) if as_of is not None else None
    result = load(files, stop)
    tree = result.image.to_tree(version=__version__)
    if not command:
        sh = Shell(
            tree, out=click.echo, err=lambda line: click.echo(line, err=True), as_json=as_json
        )
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
    sh = Shell(
        tree,
        out=click.echo,
        err=lambda line: click.echo(f"kt: error: {line}", err=True),
        as_json=as_json,
    )
    try:
        ok = sh.run(shlex.join(command))
    except SystemExit:
        ok = True
    if not ok:
        sys.exit(console.EXIT_PROBLEM)


# --- timeline ---------------------------------------------------------------------


def _timeline_sources(paths: list[Path]) -> tuple[Path | None, list[Path]]:
    """A baseline snapshot (only when the log no longer starts at 0) and the logs."""
    from kt.storage.metadata_log import metadata_files, snapshot_id
    from kt.storage.metadata_replay import is_snapshot_file, partition_dir, timeline_baseline

    logs: list[Path] = []
    snaps: list[Path] = []
    for p in paths:
        if p.is_dir():
            dl, ds = metadata_files(partition_dir(p))
            logs.extend(dl)
            snaps.extend(ds)
        elif is_snapshot_file(p):
            snaps.append(p)
        else:
            logs.append(p)
    logs.sort(key=lambda p: int(p.stem) if p.stem.isdigit() else 0)
    if not logs:
        # Only snapshots: the newest one's records are the story.
        ends = [(sid.end_offset if (sid := snapshot_id(s)) else -1, s) for s in snaps]
        return None, [max(ends)[1]] if ends else []
    start = int(logs[0].stem) if logs[0].stem.isdigit() else 0
    baseline = timeline_baseline(logs[0].parent, start)
    if start > 0 and baseline is None:
        console.warn(
            f"the log starts at offset {start} and no snapshot ends at or before it: "
            "the timeline starts from an empty cluster"
        )
    return baseline, logs


@metadata.command("timeline")
@click.argument("paths", nargs=-1, required=True, type=click.Path(path_type=Path))
@click.option(
    "--topic",
    "topics",
    multiple=True,
    metavar="NAME",
    help="Only events of this topic (repeatable).",
)
@click.option(
    "--partition",
    "partitions",
    multiple=True,
    type=click.IntRange(min=0),
    metavar="N",
    help="Only events of this partition number (repeatable; with --topic: of that topic).",
)
@click.option(
    "--broker",
    "brokers",
    multiple=True,
    type=int,
    metavar="ID",
    help="Only events about or involving this broker or controller (repeatable): its "
    "registration and fencing, leadership it gained or lost, ISRs it joined or left.",
)
@click.option(
    "--since", metavar="OFFSET|TIME", help="Only events at or after this offset or ISO-8601 time."
)
@click.option(
    "--until", metavar="OFFSET|TIME", help="Only events at or before this offset or ISO-8601 time."
)
@click.option(
    "--kind",
    "kinds",
    multiple=True,
    metavar="KIND[,KIND...]",
    help="Only these kinds of events (repeatable, comma-separated), e.g. "
    "leader_changed,isr_changed; see the list below.",
)
@click.option(
    "--summary", is_flag=True, help="Per-partition and per-broker accounts instead of the events."
)
@click.option(
    "--json", "as_json", is_flag=True, help="NDJSON: one object per event (or the summary object)."
)
@console.handle_errors
def timeline_cmd(
    paths: tuple[Path, ...],
    topics: tuple[str, ...],
    partitions: tuple[int, ...],
    brokers: tuple[int, ...],
    since: str | None,
    until: str | None,
    kinds: tuple[str, ...],
    summary: bool,
    as_json: bool,
) -> None:
    """Tell what the cluster did, in order, from its metadata log.

    PATHS: a metadata log dir, __cluster_metadata-0, or .log segments (and a snapshot
    to start from when the log no longer begins at offset 0). Each event names its
    offset, time, Raft epoch and subject, and says what changed from what: brokers
    registered, fenced, unfenced, in controlled shutdown, unregistered; metadata
    quorum leader changes (LEADER_CHANGE); topics and partitions created and deleted;
    leader changes with the leader epoch and why (offline, unclean election, previous
    leader fenced, preferred leader, reassignment); ISR, ELR and replica changes;
    configs (password-like values redacted); quotas; ACLs; SCRAM users (never their
    keys); features (metadata.version upgrades); producer-id blocks.

    --summary folds the events into accounts, e.g.
    "partition orders-1: 2 leader changes, offline 03:12:07-03:12:19 (12 s), last leader 3".

    Exit 0, or 1 when records did not decode (they appear as decode_error events).

    \b
    Examples:
      kt metadata timeline /var/lib/kafka/meta --topic orders --partition 3
      kt metadata timeline meta --since 2026-01-30T03:00Z --until 2026-01-30T03:30Z
      kt metadata timeline meta --broker 2 --kind broker_fenced,broker_unfenced,leader_changed
      kt metadata timeline meta --summary
      kt metadata timeline meta --json | jq 'select(.kind=="leader_changed")'

    \b
    Kinds: quorum_leader broker_registered broker_fenced broker_unfenced
      broker_controlled_shutdown broker_unregistered controller_registered
      controller_unregistered topic_created topic_deleted partition_created
      leader_changed isr_changed elr_changed replicas_changed config_set
      config_deleted quota_set quota_removed acl_created acl_deleted scram_user_set
      scram_user_deleted delegation_token_created delegation_token_removed
      feature_changed producer_ids_allocated zk_migration_state
      metadata_transaction_aborted decode_error
    """
    from kt.storage.metadata_image import MetadataImage
    from kt.storage.metadata_log import read_entries
    from kt.storage.metadata_replay import replay_files
    from kt.storage.metadata_timeline import EVENT_KINDS, TimelineBuilder, summarize

    files = check_paths(paths)
    wanted_kinds = {k.strip() for spec in kinds for k in spec.split(",") if k.strip()}
    unknown = wanted_kinds - set(EVENT_KINDS)
    if unknown:
        console.usage_error(f"--kind: unknown kind {sorted(unknown)[0]!r} (see --help)")
    lo = parse_as_of(since, "--since") if since is not None else None
    hi = parse_as_of(until, "--until") if until is not None else None
    baseline, logs = _timeline_sources(files)
    image = replay_files(baseline, [], None).image if baseline is not None else MetadataImage()
    start = image.provenance.offset + 1 if baseline is not None else 0
    builder = TimelineBuilder(image)

    def keep(e: Any) -> bool:
        if lo is not None and (
            (lo.offset is not None and e.offset < lo.offset)
            or (lo.time is not None and e.timestamp < lo.time)
        ):
            return False
        if hi is not None and (
            (hi.offset is not None and e.offset > hi.offset)
            or (hi.time is not None and e.timestamp > hi.time)
        ):
            return False
        if wanted_kinds and e.kind not in wanted_kinds:
            return False
        if topics and e.topic not in topics:
            return False
        if partitions and e.partition not in partitions:
            return False
        if not brokers:
            return True
        involved = {e.broker, e.controller, *e.brokers}
        return bool(involved & set(brokers))

    shown: list[Any] = []
    errors = 0
    try:
        for log in logs:
            for entry in read_entries(log):
                if 0 <= entry.offset < start:
                    continue
                if hi is not None and hi.offset is not None and entry.offset > hi.offset:
                    break
                for e in builder.feed(entry):
                    errors += e.kind == "decode_error"
                    if keep(e):
                        if summary:
                            shown.append(e)
                        else:
                            _print_event(e, as_json)
    except StorageError as exc:
        console.fail(str(exc))
    if summary:
        _print_summary(summarize(shown), as_json)
    sys.stdout.flush()
    if errors:
        console.warn(f"{console.plural(errors, 'record')} did not decode (decode_error events)")
        sys.exit(console.EXIT_PROBLEM)


def _print_event(e: Any, as_json: bool) -> None:
    if as_json:
        console.emit_json(
            {
                "type": "event",
                "offset": e.offset,
                "timestamp": e.timestamp,
                "time": format_time(e.timestamp),
                "epoch": e.epoch,
                "kind": e.kind,
                "subject": e.subject,
                "topic": e.topic,
                "partition": e.partition,
                "broker": e.broker,
                "controller": e.controller,
                "brokers": list(e.brokers),
                "message": e.message,
                "details": e.details,
            }
        )
        return
    click.echo(
        f"{format_time(e.timestamp)}  {e.offset:>7}  e{e.epoch:<3} {e.subject:<18} {e.message}"
    )


def _clock(ms: int, same_day: bool) -> str:
    text = format_time(ms)
    return text[11:19] if same_day else text


def _span(iv: Any, until: int, same_day: bool) -> str:
    if iv.end is None:
        secs = iv.duration(until) / 1000
        return f"{_clock(iv.start, same_day)}- (still at the end, {secs:g} s so far)"
    return (
        f"{_clock(iv.start, same_day)}-{_clock(iv.end, same_day)} ({iv.duration(until) / 1000:g} s)"
    )


GROUP_AFTER = 3  # partitions with one story print on one line beyond this many


def _print_summary(s: Any, as_json: bool) -> None:
    end = s.last_time if s.last_time is not None else 0
    same_day = s.first_time is not None and format_time(s.first_time)[:10] == format_time(end)[:10]
    parts = sorted(
        s.partitions.values(),
        key=lambda p: (
            -sum(iv.duration(end) for iv in p.offline),
            -p.leader_changes,
            -p.isr_changes,
            p.topic,
            p.partition,
        ),
    )
    if as_json:

        def iv_json(iv: Any) -> dict[str, Any]:
            return {
                "start": iv.start,
                "start_offset": iv.start_offset,
                "end": iv.end,
                "end_offset": iv.end_offset,
                "duration_ms": iv.duration(end),
            }

        console.emit_json(
            {
                "type": "summary",
                "first_offset": s.first_offset,
                "last_offset": s.last_offset,
                "first_time": s.first_time,
                "last_time": s.last_time,
                "events": s.events,
                "quorum_leaders": [
                    {"time": t, "epoch": ep, "leader": ld} for t, ep, ld in s.quorum_leaders
                ],
                "partitions": [
                    {
                        "topic": p.topic,
                        "partition": p.partition,
                        "leader_changes": p.leader_changes,
                        "isr_changes": p.isr_changes,
                        "isr_shrinks": p.isr_shrinks,
                        "unclean_elections": p.unclean_elections,
                        "last_leader": p.last_leader,
                        "last_leader_epoch": p.last_leader_epoch,
                        "offline": [iv_json(iv) for iv in p.offline],
                        "offline_ms": sum(iv.duration(end) for iv in p.offline),
                        "leaders": {str(k): v for k, v in sorted(p.leaders.items())},
                    }
                    for p in parts
                ],
                "brokers": [
                    {
                        "broker": b.broker,
                        "registrations": b.registrations,
                        "fenced": [iv_json(iv) for iv in b.fenced],
                        "fenced_ms": sum(iv.duration(end) for iv in b.fenced),
                        "leaderships_gained": b.leaderships_gained,
                        "leaderships_lost": b.leaderships_lost,
                        "controlled_shutdowns": b.controlled_shutdowns,
                    }
                    for _, b in sorted(s.brokers.items())
                ],
            }
        )
        return
    if s.events == 0:
        click.echo("no events")
        return
    day = f" on {format_time(s.first_time)[:10]}" if same_day and s.first_time is not None else ""
    click.echo(
        f"{console.plural(s.events, 'event')}, offsets {s.first_offset}..{s.last_offset}, "
        f"{_clock(s.first_time, same_day)}..{_clock(end, same_day)}{day} (UTC)"
    )
    if s.quorum_leaders:
        leaders = ", ".join(
            f"{ld} (epoch {ep}, {_clock(t, same_day)})" for t, ep, ld in s.quorum_leaders
        )
        click.echo(f"metadata quorum leaders: {leaders}")
    groups: dict[str, list[str]] = {}
    for p in parts:
        bits = [console.plural(p.leader_changes, "leader change")]
        if p.isr_changes:
            bits.append(
                f"{console.plural(p.isr_changes, 'ISR change')} ({p.isr_shrinks} shrinking)"
            )
        if p.unclean_elections:
            bits.append(console.plural(p.unclean_elections, "unclean election"))
        for iv in p.offline:
            bits.append(f"offline {_span(iv, end, same_day)}")
        if p.last_leader is not None:
            last = "none (offline)" if p.last_leader < 0 else str(p.last_leader)
            bits.append(f"last leader {last} (epoch {p.last_leader_epoch})")
        text = ", ".join(bits)
        groups.setdefault(text, []).append(f"{p.topic}-{p.partition}")
    # Partitions with the very same story (a whole broker's going offline together)
    # make one line, so the 3 that differ are not lost among 50 that do not.
    for text, names in groups.items():
        if len(names) <= GROUP_AFTER:
            for name in names:
                click.echo(f"partition {name}: {text}")
        else:
            shown = ", ".join(names[:3])
            click.echo(f"{len(names)} partitions ({shown} and {len(names) - 3} more): {text}")
    for _, b in sorted(s.brokers.items()):
        bits = []
        if b.registrations:
            bits.append(console.plural(b.registrations, "registration"))
        for iv in b.fenced:
            bits.append(f"fenced {_span(iv, end, same_day)}")
        if b.controlled_shutdowns:
            bits.append(console.plural(b.controlled_shutdowns, "controlled shutdown"))
        if b.unregistered is not None:
            bits.append(f"unregistered {_clock(b.unregistered, same_day)}")
        bits.append(f"leaderships gained {b.leaderships_gained}, lost {b.leaderships_lost}")
        click.echo(f"broker {b.broker}: {', '.join(bits)}")
