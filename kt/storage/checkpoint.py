"""Offset checkpoint files of a log directory, in Kafka's ``CheckpointFile`` text format.

``recovery-point-offset-checkpoint``, ``replication-offset-checkpoint`` (high
watermarks), ``log-start-offset-checkpoint`` and ``cleaner-offset-checkpoint``
share one format::

    0                 <- version
    2                 <- number of entries
    orders 0 1234     <- topic partition offset
    orders 1 99

Kafka writes "\\n" line endings with a newline after every line, UTF-8. Its
reader (``CheckpointReadBuffer``) splits lines like Java's ``readLine`` ("\\n",
"\\r\\n" or "\\r"), splits entries on whitespace, and returns no entries for an
empty file or one that stops after the version line. kt's parser is strict by
default (an empty file is an error) and reports the line number of every problem;
``allow_empty=True`` gives Kafka's leniency for those two cases. The generic line
machinery here is shared with ``leader_epoch``.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Generic, TypeVar

from kt.storage.atomic import atomic_write
from kt.storage.errors import CorruptCheckpointError

CHECKPOINT_VERSION = 0
INT32_MIN, INT32_MAX = -(2**31), 2**31 - 1
INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1

# Java's \s: the separators CheckpointFile's formatters split entries on.
_JAVA_WS = re.compile(r"[ \t\n\x0b\f\r]+")
_JAVA_INT = re.compile(r"[+-]?[0-9]+")
_LINE_BREAK = re.compile(r"\r\n|\r|\n")

T = TypeVar("T")


@dataclass(frozen=True, order=True, slots=True)
class TopicPartition:
    """A topic and a partition number."""

    topic: str
    partition: int

    def __str__(self) -> str:
        return f"{self.topic}-{self.partition}"


def java_lines(text: str) -> list[str]:
    """Split like repeated ``BufferedReader.readLine``: a final terminator adds no empty line."""
    if not text:
        return []
    lines = _LINE_BREAK.split(text)
    if lines[-1] == "":
        lines.pop()
    return lines


def java_split(line: str) -> list[str]:
    """``Pattern.compile("\\\\s+").split(line)``: a leading separator yields an empty
    first field, trailing separators are dropped."""
    parts = _JAVA_WS.split(line)
    while parts and parts[-1] == "":
        parts.pop()
    return parts


def parse_java_int(token: str, lo: int = INT32_MIN, hi: int = INT32_MAX) -> int | None:
    """``Integer.parseInt``/``Long.parseLong`` of ASCII digits; None when it would throw."""
    if not _JAVA_INT.fullmatch(token):
        return None
    value = int(token)
    return value if lo <= value <= hi else None


def decode_text(data: bytes | str, path: str | None) -> str:
    """UTF-8 text of a checkpoint-like file (CorruptCheckpointError for binary junk)."""
    if isinstance(data, str):
        return data
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise CorruptCheckpointError(
            f"not UTF-8 text (invalid byte at position {exc.start}): not a checkpoint file?",
            path=path,
            position=exc.start,
        ) from None


class CheckpointProblems:
    """Raise the first problem (strict) or collect them all (salvage)."""

    def __init__(
        self, path: str | None, strict: bool, found: Iterable[CorruptCheckpointError] = ()
    ) -> None:
        self.path = path
        self.strict = strict
        self.found: list[CorruptCheckpointError] = list(found)

    def report(self, message: str) -> None:
        err = CorruptCheckpointError(message, path=self.path)
        if self.strict:
            raise err
        self.found.append(err)


@dataclass(frozen=True, slots=True)
class CheckpointLines(Generic[T]):
    """Entries of a checkpoint file with the line each came from."""

    version: int
    entries: list[tuple[int, T]]  # (1-based line number, entry)
    problems: list[CorruptCheckpointError]


def parse_checkpoint_lines(
    data: bytes | str,
    path: str | None,
    parse_entry: Callable[[list[str]], T | str],
    entry_syntax: str,
    *,
    strict: bool = True,
    allow_empty: bool = False,
) -> CheckpointLines[T]:
    """Parse the version/count header and the entry lines of a ``CheckpointFile``.

    ``parse_entry`` turns a line's whitespace-split fields into an entry or returns
    an error message. Semantic checks (duplicates, ordering) are the caller's.
    """
    problems = CheckpointProblems(path, strict)
    lines = java_lines(decode_text(data, path))
    if not lines:
        if not allow_empty:
            problems.report("empty file (Kafka reads an empty checkpoint as having no entries)")
        return CheckpointLines(CHECKPOINT_VERSION, [], problems.found)
    version = parse_java_int(lines[0])
    if version is None:
        problems.report(f"line 1: malformed version {lines[0]!r}: not a checkpoint file?")
        return CheckpointLines(CHECKPOINT_VERSION, [], problems.found)
    if version != CHECKPOINT_VERSION:
        problems.report(f"line 1: unsupported version {version} (expected {CHECKPOINT_VERSION})")
        return CheckpointLines(version, [], problems.found)
    if len(lines) < 2:
        if not allow_empty:
            problems.report("line 2: missing entry count (file ends after the version)")
        return CheckpointLines(version, [], problems.found)
    count = parse_java_int(lines[1])
    if count is None or count < 0:
        problems.report(f"line 2: malformed entry count {lines[1]!r}")
    entries: list[tuple[int, T]] = []
    for lineno, line in enumerate(lines[2:], start=3):
        result = parse_entry(java_split(line))
        if isinstance(result, str):
            problems.report(f"line {lineno}: {result} in {line!r} (expected '{entry_syntax}')")
            continue
        entries.append((lineno, result))
    found_lines = len(lines) - 2
    if count is not None and count >= 0 and count != found_lines:
        says = f"{count} {'entry' if count == 1 else 'entries'}"
        problems.report(f"line 2 says {says} but the file has {found_lines} entry lines")
    return CheckpointLines(version, entries, problems.found)


def empty_checkpoint_note(data: bytes | str) -> str | None:
    """Why a checkpoint reads as having no entries although it has no entry count,
    or None. Kafka reads an empty file, or one that stops after the version line,
    as no entries: kt reports it as a warning, never as corruption."""
    try:
        lines = java_lines(decode_text(data, None))
    except CorruptCheckpointError:
        return None
    if not lines:
        return "empty file (Kafka reads it as having no entries)"
    if len(lines) == 1 and parse_java_int(lines[0]) == CHECKPOINT_VERSION:
        return "no entry count after the version line (Kafka reads it as having no entries)"
    return None


def encode_checkpoint_lines(lines: Iterable[str]) -> bytes:
    """Version, count and entry lines exactly as Kafka's ``CheckpointWriteBuffer`` writes them."""
    items = list(lines)
    out = [str(CHECKPOINT_VERSION), str(len(items)), *items]
    return "".join(f"{line}\n" for line in out).encode("utf-8")


# --- offset checkpoints ---------------------------------------------------------


def _parse_offset_entry(fields: list[str]) -> tuple[TopicPartition, int] | str:
    if len(fields) != 3 or not fields[0]:
        return f"expected 3 fields, found {len([f for f in fields if f])}"
    partition = parse_java_int(fields[1])
    if partition is None:
        return f"partition {fields[1]!r} is not an int32"
    offset = parse_java_int(fields[2], INT64_MIN, INT64_MAX)
    if offset is None:
        return f"offset {fields[2]!r} is not an int64"
    if partition < 0:
        return f"negative partition {partition}"
    if offset < 0:
        return f"negative offset {offset}"
    return TopicPartition(fields[0], partition), offset


def _offset_checkpoint(
    data: bytes | str, path: str | None, strict: bool, allow_empty: bool
) -> tuple[dict[TopicPartition, int], list[CorruptCheckpointError]]:
    parsed = parse_checkpoint_lines(
        data,
        path,
        _parse_offset_entry,
        "topic partition offset",
        strict=strict,
        allow_empty=allow_empty,
    )
    problems = CheckpointProblems(path, strict, parsed.problems)
    result: dict[TopicPartition, int] = {}
    first_line: dict[TopicPartition, int] = {}
    for lineno, (tp, offset) in parsed.entries:
        if tp in first_line:
            problems.report(
                f"line {lineno}: duplicate entry for {tp.topic} {tp.partition} "
                f"(first on line {first_line[tp]})"
            )
        else:
            first_line[tp] = lineno
        result[tp] = offset  # Kafka builds a map: the last line wins
    return result, problems.found


def parse_offset_checkpoint(
    data: bytes | str, path: str | None = None, *, allow_empty: bool = False
) -> dict[TopicPartition, int]:
    """Entries of an offset checkpoint, in file order; CorruptCheckpointError on any problem:
    wrong version, count mismatch, malformed line, negative partition or offset, duplicate."""
    entries, _ = _offset_checkpoint(data, path, strict=True, allow_empty=allow_empty)
    return entries


def salvage_offset_checkpoint(
    data: bytes | str, path: str | None = None
) -> tuple[dict[TopicPartition, int], list[CorruptCheckpointError]]:
    """Every entry that parses (duplicates: last wins, as in Kafka) and every problem found."""
    return _offset_checkpoint(data, path, strict=False, allow_empty=True)


def read_offset_checkpoint(
    path: str | os.PathLike[str], *, allow_empty: bool = False
) -> dict[TopicPartition, int]:
    """Read an offset checkpoint file strictly (see :func:`parse_offset_checkpoint`)."""
    return parse_offset_checkpoint(Path(path).read_bytes(), str(path), allow_empty=allow_empty)


def offset_entry_problem(tp: TopicPartition, offset: int) -> str | None:
    """Why (tp, offset) cannot be written to a checkpoint, or None if it can."""
    if not tp.topic or java_split(tp.topic) != [tp.topic]:
        return f"topic {tp.topic!r} is empty or contains whitespace"
    if not 0 <= tp.partition <= INT32_MAX:
        return f"partition {tp.partition} is not an int32 >= 0"
    if not 0 <= offset <= INT64_MAX:
        return f"offset {offset} is not an int64 >= 0"
    return None


def encode_offset_checkpoint(entries: Mapping[TopicPartition, int]) -> bytes:
    """Kafka's bytes for an offset checkpoint of ``entries`` (in the mapping's order)."""
    for tp, offset in entries.items():
        problem = offset_entry_problem(tp, offset)
        if problem is not None:
            raise ValueError(problem)
    return encode_checkpoint_lines(f"{tp.topic} {tp.partition} {o}" for tp, o in entries.items())


def write_offset_checkpoint(
    path: str | os.PathLike[str], entries: Mapping[TopicPartition, int]
) -> None:
    """Write an offset checkpoint atomically."""
    atomic_write(path, encode_offset_checkpoint(entries))
