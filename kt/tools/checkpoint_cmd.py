"""`kt checkpoint`: show and edit Kafka's offset and leader-epoch checkpoint files.

Works on recovery-point-offset-checkpoint, replication-offset-checkpoint,
log-start-offset-checkpoint, cleaner-offset-checkpoint (per log directory) and
leader-epoch-checkpoint (per partition directory), written by kt or Apache Kafka.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import click

from kt.storage.atomic import BACKUP_INFIX, atomic_write, backup_copy
from kt.storage.checkpoint import (
    TopicPartition,
    decode_text,
    empty_checkpoint_note,
    encode_offset_checkpoint,
    java_lines,
    java_split,
    offset_entry_problem,
    parse_java_int,
    parse_offset_checkpoint,
    salvage_offset_checkpoint,
)
from kt.storage.errors import CorruptCheckpointError, StorageError
from kt.storage.leader_epoch import (
    EpochEntry,
    encode_leader_epoch_checkpoint,
    leader_epoch_problems,
    parse_leader_epoch_checkpoint,
    salvage_leader_epoch_checkpoint,
)
from kt.storage.log_files import (
    LEADER_EPOCH_CHECKPOINT_FILE,
    OFFSET_CHECKPOINT_FILES,
    PathKind,
    classify_path,
    is_log_dir_locked,
)
from kt.storage.quorum_state import QUORUM_STATE_FILE, QuorumState, parse_quorum_state
from kt.tools import console

OFFSET = "offset"
EPOCH = "leader-epoch"
QUORUM = "quorum-state"
GENERIC_OFFSET_KIND = "offset-checkpoint"


@dataclass
class _Target:
    path: Path
    kind: str  # the file's checkpoint name, e.g. "recovery-point-offset-checkpoint"
    fmt: str  # OFFSET or EPOCH
    data: bytes


def _kind_from_name(name: str) -> tuple[str, str] | None:
    # Backups made by `edit` keep the original name before ".bak-", so they can be
    # shown and compared like the original.
    if BACKUP_INFIX in name:
        name = name.split(BACKUP_INFIX, 1)[0]
    if name in OFFSET_CHECKPOINT_FILES:
        return name, OFFSET
    if name == LEADER_EPOCH_CHECKPOINT_FILE:
        return name, EPOCH
    if name == QUORUM_STATE_FILE:
        return name, QUORUM
    return None


def _sniff(data: bytes) -> str | None:
    """OFFSET or EPOCH from the content of a file with an unknown name, else None."""
    try:
        lines = java_lines(decode_text(data, None))
    except CorruptCheckpointError:
        return None
    if len(lines) < 2 or parse_java_int(lines[0]) is None or parse_java_int(lines[1]) is None:
        return None
    if len(lines) == 2:
        return OFFSET
    fields = len(java_split(lines[2]))
    return {3: OFFSET, 2: EPOCH}.get(fields)


def _load(path: Path) -> _Target:
    if not path.exists():
        console.usage_error(f"{path}: no such file or directory")
    if path.is_dir():
        console.usage_error(f"{path}: is a directory, not a checkpoint file")
    named = _kind_from_name(path.name)
    if named is None:
        kind = classify_path(path)
        if kind not in (PathKind.OTHER, PathKind.OFFSET_CHECKPOINT):
            console.usage_error(f"{path}: not a checkpoint file (it is a {kind.value} file)")
    data = path.read_bytes()
    if named is not None:
        return _Target(path, named[0], named[1], data)
    fmt = _sniff(data)
    if fmt is None:
        console.usage_error(
            f"{path}: not a checkpoint file (the name is not a known checkpoint and the "
            "content is not 'version, count, entries')"
        )
    return _Target(
        path, GENERIC_OFFSET_KIND if fmt == OFFSET else LEADER_EPOCH_CHECKPOINT_FILE, fmt, data
    )


def _parse(target: _Target) -> list[Any]:
    """Strict parse, except that a file without entries reads as no entries with a
    warning, as Kafka reads it (and `kt log-dirs inspect` judges it); StorageError
    propagates."""
    note = empty_checkpoint_note(target.data)
    if note is not None:
        console.warn(f"{target.path}: {note}")
    if target.fmt == OFFSET:
        entries = parse_offset_checkpoint(target.data, str(target.path), allow_empty=True)
        return list(entries.items())
    return parse_leader_epoch_checkpoint(target.data, str(target.path), allow_empty=True)


CHECKPOINT_HELP = """Show and edit checkpoint files of a Kafka log directory.

\b
Offset checkpoints (one per log directory): recovery-point-offset-checkpoint,
replication-offset-checkpoint, log-start-offset-checkpoint,
cleaner-offset-checkpoint. Leader-epoch checkpoints: <partition dir>/leader-epoch-checkpoint.
KRaft's __cluster_metadata-0/quorum-state (data versions 0 and 1): show only.

\b
Examples:
  kt checkpoint show /var/kafka-logs/recovery-point-offset-checkpoint
  kt checkpoint show --json /var/kafka-logs/orders-0/leader-epoch-checkpoint
  kt checkpoint show /var/kraft/metadata/__cluster_metadata-0/quorum-state
  kt checkpoint edit /var/kafka-logs/log-start-offset-checkpoint --set orders:0=1500 --dry-run
"""


@click.group("checkpoint", help=CHECKPOINT_HELP)
def checkpoint() -> None:
    """Show and edit checkpoint files."""


@checkpoint.command("show")
@click.argument("file", type=click.Path(path_type=Path))
@click.option(
    "--json",
    "as_json",
    is_flag=True,
    help="One JSON document instead of a table. Example: kt checkpoint show --json "
    "/var/kafka-logs/replication-offset-checkpoint | jq '.entries[0]'",
)
@console.handle_errors
def show(file: Path, as_json: bool) -> None:
    """Print the entries of a checkpoint FILE.

    The kind is taken from the file name (or, for other names, from the content).
    Exit 1 when the file is corrupt, 2 when it is missing or not a checkpoint. An
    empty file (or one ending after the version line) has no entries, with a
    warning: Kafka reads it that way.

    \b
    Examples:
      kt checkpoint show /var/kafka-logs/recovery-point-offset-checkpoint
      kt checkpoint show /var/kafka-logs/orders-0/leader-epoch-checkpoint --json
    """
    target = _load(file)
    if target.fmt == QUORUM:
        try:
            state = parse_quorum_state(target.data, str(file))
        except StorageError as exc:
            console.fail(str(exc))
        _show_quorum_state(file, state, as_json)
        return
    try:
        entries = _parse(target)
    except StorageError as exc:
        console.fail(str(exc))
    if target.fmt == OFFSET:
        rows = [(tp.topic, tp.partition, off) for tp, off in entries]
        if as_json:
            console.emit_json(
                {
                    "file": str(file),
                    "kind": target.kind,
                    "version": 0,
                    "entries": [{"topic": t, "partition": p, "offset": o} for t, p, o in rows],
                }
            )
        else:
            count = console.plural(len(rows), "entry", "entries")
            title = f"{file} ({target.kind}, version 0, {count})"
            console.render_table(["topic", "partition", "offset"], rows, title=title)
        return
    epochs: list[EpochEntry] = entries
    if as_json:
        console.emit_json(
            {
                "file": str(file),
                "kind": target.kind,
                "version": 0,
                "entries": [{"epoch": e.epoch, "start_offset": e.start_offset} for e in epochs],
            }
        )
    else:
        count = console.plural(len(epochs), "entry", "entries")
        title = f"{file} ({target.kind}, version 0, {count})"
        console.render_table(["epoch", "start_offset"], epochs, title=title)


def _show_quorum_state(file: Path, state: QuorumState, as_json: bool) -> None:
    """KRaft's quorum-state: the fields, and what they mean for someone on call."""
    fields = state.as_json()
    if as_json:
        console.emit_json(
            {"file": str(file), "kind": QUORUM, "version": state.data_version, "state": fields}
        )
        return
    rows: list[tuple[str, str]] = []
    for name, value in fields.items():
        if name == "data_version":
            continue
        if name == "currentVoters":
            text = "null" if value is None else ",".join(str(v["voterId"]) for v in value)
        elif name == "leaderId" and value < 0:
            text = f"{value} (no leader known)"
        elif name == "votedId" and value < 0:
            text = f"{value} (not voted in this epoch)"
        else:
            text = str(value)
        rows.append((name, text))
    for name, value in state.extra.items():
        rows.append((f"{name} (unknown field)", str(value)))
    title = f"{file} ({QUORUM}, data version {state.data_version})"
    console.render_table(["field", "value"], rows, title=title)


def _parse_int(text: str, what: str, spec: str, opt: str) -> int:
    value = parse_java_int(text.strip(), 0, 2**63 - 1)
    if value is None:
        console.usage_error(f"{opt} {spec!r}: {what} {text!r} is not a non-negative integer")
    return value


def _topic_partition(text: str, spec: str, opt: str) -> TopicPartition:
    # Split on the LAST ':' so a topic name containing ':' still works.
    topic, sep, part = text.rpartition(":")
    if not sep or not topic:
        console.usage_error(f"{opt} {spec!r}: expected TOPIC:PARTITION")
    partition = _parse_int(part, "partition", spec, opt)
    if partition > 2**31 - 1:
        console.usage_error(f"{opt} {spec!r}: partition {partition} does not fit an int32")
    return TopicPartition(topic, partition)


def _diff_lines(old: list[tuple[str, Any]], new: list[tuple[str, Any]]) -> list[str]:
    """added/changed/removed lines between two (key text, value) lists."""
    before = dict(old)
    after = dict(new)
    out: list[str] = []
    for key, value in new:
        if key not in before:
            out.append(f"added    {key} {value}")
        elif before[key] != value:
            out.append(f"changed  {key} {before[key]} -> {value}")
    for key, value in old:
        if key not in after:
            out.append(f"removed  {key} {value}")
    return out


def _held_lock_dir(target: _Target) -> Path | None:
    # An offset checkpoint sits in the log dir; a leader-epoch checkpoint in a
    # partition dir, one level below the log dir's .lock.
    here = target.path.resolve().parent
    candidates = [here, here.parent] if target.fmt == EPOCH else [here]
    for d in candidates:
        if is_log_dir_locked(d):
            return d
    return None


@checkpoint.command("edit")
@click.argument("file", type=click.Path(path_type=Path))
@click.option(
    "--set",
    "sets",
    multiple=True,
    metavar="SPEC",
    help="Add or change an entry. Offset checkpoints: TOPIC:PARTITION=OFFSET (the topic "
    "is split off at the last ':'), e.g. --set orders:0=1500. Leader-epoch checkpoint: "
    "EPOCH=START_OFFSET, e.g. --set 7=120. Repeatable.",
)
@click.option(
    "--delete",
    "deletes",
    multiple=True,
    metavar="KEY",
    help="Remove an entry. Offset checkpoints: TOPIC:PARTITION, e.g. --delete orders:3. "
    "Leader-epoch checkpoint: EPOCH, e.g. --delete 7. Repeatable.",
)
@click.option(
    "--truncate-from",
    "truncate_from",
    type=int,
    metavar="EPOCH",
    help="Leader-epoch checkpoint only: remove EPOCH and every later epoch, "
    "e.g. --truncate-from 5.",
)
@click.option(
    "--dry-run",
    is_flag=True,
    help="Show the changes, write nothing. "
    "Example: kt checkpoint edit FILE --set orders:0=0 --dry-run",
)
@click.option(
    "--force",
    is_flag=True,
    help="Edit even while a broker holds the log directory's .lock, or salvage the valid "
    "entries of a corrupt file. Example: kt checkpoint edit FILE --delete orders:0 --force",
)
@console.handle_errors
def edit(
    file: Path,
    sets: tuple[str, ...],
    deletes: tuple[str, ...],
    truncate_from: int | None,
    dry_run: bool,
    force: bool,
) -> None:
    """Change entries of a checkpoint FILE, keeping a timestamped backup.

    The file is validated before and after the edit; the changes are printed on
    stdout. Refuses (exit 1) while a running broker holds the log directory's
    .lock, and refuses to edit a corrupt file, unless --force.

    \b
    Examples:
      kt checkpoint edit /var/kafka-logs/recovery-point-offset-checkpoint --set orders:0=0
      kt checkpoint edit /var/kafka-logs/cleaner-offset-checkpoint --delete orders:2
      kt checkpoint edit /var/kafka-logs/orders-0/leader-epoch-checkpoint --truncate-from 5
      kt checkpoint edit /var/kafka-logs/orders-0/leader-epoch-checkpoint --set 6=900 --dry-run
    """
    if not (sets or deletes or truncate_from is not None):
        console.usage_error("nothing to do: give --set, --delete or --truncate-from")
    target = _load(file)
    if target.fmt == QUORUM:
        console.usage_error(
            f"{file}: quorum-state is the Raft replica's own vote and epoch; kt only shows it"
        )
    if target.fmt == OFFSET and truncate_from is not None:
        console.usage_error("--truncate-from applies to leader-epoch checkpoints only")

    # Parse every argument before touching anything.
    offset_sets: list[tuple[TopicPartition, int]] = []
    offset_deletes: list[TopicPartition] = []
    epoch_sets: list[EpochEntry] = []
    epoch_deletes: list[int] = []
    for spec in sets:
        key, sep, value = spec.rpartition("=")
        if not sep or not key:
            console.usage_error(
                f"--set {spec!r}: expected "
                + ("TOPIC:PARTITION=OFFSET" if target.fmt == OFFSET else "EPOCH=START_OFFSET")
            )
        if target.fmt == OFFSET:
            offset_sets.append(
                (_topic_partition(key, spec, "--set"), _parse_int(value, "offset", spec, "--set"))
            )
        else:
            epoch = _parse_int(key, "epoch", spec, "--set")
            epoch_sets.append(EpochEntry(epoch, _parse_int(value, "start offset", spec, "--set")))
    for spec in deletes:
        if target.fmt == OFFSET:
            offset_deletes.append(_topic_partition(spec, spec, "--delete"))
        else:
            epoch_deletes.append(_parse_int(spec, "epoch", spec, "--delete"))
    both = {tp for tp, _ in offset_sets} & set(offset_deletes)
    both_epochs = {e.epoch for e in epoch_sets} & set(epoch_deletes)
    if both or both_epochs:
        console.usage_error("the same entry is given to both --set and --delete")
    if truncate_from is not None and truncate_from < 0:
        console.usage_error(f"--truncate-from {truncate_from}: epochs are >= 0")

    locked = _held_lock_dir(target)
    if locked is not None:
        message = f"{locked}: the log directory is locked by a running broker (.lock is held)"
        if not force:
            console.fail(f"{message}; stop the broker first, or use --force")
        console.warn(f"{message}; editing anyway (--force)")

    try:
        old = _parse(target)
    except StorageError as exc:
        if not force:
            console.fail(
                f"{exc}; refusing to edit a corrupt file (--force keeps the entries that parse)"
            )
        salvaged: list[Any]
        if target.fmt == OFFSET:
            entries, problems = salvage_offset_checkpoint(target.data, str(file))
            salvaged = list(entries.items())
        else:
            salvaged, problems = salvage_leader_epoch_checkpoint(target.data, str(file))
        for found in problems:
            console.warn(f"{found} (dropped or repaired by --force)")
        old = salvaged

    if target.fmt == OFFSET:
        new_offsets = dict(old)
        for tp in offset_deletes:
            if tp not in new_offsets:
                console.usage_error(f"--delete {tp.topic}:{tp.partition}: no such entry in {file}")
            del new_offsets[tp]
        for tp, offset in offset_sets:
            new_offsets[tp] = offset
        for tp, offset in new_offsets.items():
            bad = offset_entry_problem(tp, offset)
            if bad is not None:
                console.fail(f"the edit would produce an invalid file: {bad}")
        new_data = encode_offset_checkpoint(new_offsets)
        diff = _diff_lines(
            [(f"{tp.topic} {tp.partition}", o) for tp, o in old],
            [(f"{tp.topic} {tp.partition}", o) for tp, o in new_offsets.items()],
        )
    else:
        by_epoch = {e.epoch: e.start_offset for e in old}
        for epoch in epoch_deletes:
            if epoch not in by_epoch:
                console.usage_error(f"--delete {epoch}: no such epoch in {file}")
            del by_epoch[epoch]
        if truncate_from is not None:
            by_epoch = {e: o for e, o in by_epoch.items() if e < truncate_from}
        for entry in epoch_sets:
            by_epoch[entry.epoch] = entry.start_offset
        new_epochs = [EpochEntry(e, by_epoch[e]) for e in sorted(by_epoch)]
        problems_after = leader_epoch_problems(new_epochs)
        if problems_after:
            console.fail(f"the edit would produce an invalid file: {problems_after[0]}")
        new_data = encode_leader_epoch_checkpoint(new_epochs)
        diff = _diff_lines(
            [(str(e.epoch), e.start_offset) for e in old],
            [(str(e.epoch), e.start_offset) for e in new_epochs],
        )

    for line in diff:
        click.echo(line)
    if new_data == target.data:
        click.echo("no changes", err=True)
        return
    if not diff:
        click.echo("no entry changes; the file will be rewritten in canonical form", err=True)
    if dry_run:
        click.echo("dry run: nothing written", err=True)
        return
    backup = backup_copy(file)
    click.echo(f"backup: {backup}", err=True)
    atomic_write(file, new_data)
    click.echo(f"wrote {file}", err=True)
