"""Shared state of one `kt dump-log-segments` run: options, output and end reports.

The per-file dumpers (`dump_log_records`, `dump_log_indexes`) write through a
`DumpContext`: data lines to stdout, Kafka's diagnostics to stderr, and the
problems Kafka reports at the end of a run (index mismatches, time-index errors,
non-consecutive offsets) are collected here and printed by `finish` in Kafka's
order and wording. In `--json` mode every item, problems included, is one NDJSON
object on stdout instead.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from kt.tools.console import EXIT_OK, EXIT_PROBLEM, EXIT_USAGE

# Kafka's Int.MaxValue default of --max-bytes.
INT_MAX = 2**31 - 1

_encode_str: Callable[[str], str] = json.encoder.encode_basestring


def jstr(s: str) -> str:
    """A JSON string literal (non-ASCII kept as is, like `ensure_ascii=False`)."""
    return _encode_str(s)


def jbool(b: bool) -> str:
    """A JSON boolean literal."""
    return "true" if b else "false"


def jopt(v: int | None) -> str:
    """A JSON integer or null."""
    return "null" if v is None else str(v)


def java_abs_path(path: str) -> str:
    """Java's File.getAbsolutePath: cwd-joined, not normalised (Kafka's report keys)."""
    return path if os.path.isabs(path) else os.path.join(os.getcwd(), path)


@dataclass
class DumpOptions:
    """The parsed command-line options of one run."""

    deep: bool = False
    print_data: bool = False
    skip_record_metadata: bool = False
    index_sanity_only: bool = False
    verify_index_only: bool = False
    max_bytes: int = INT_MAX
    max_message_size: int = 5 * 1024 * 1024
    offsets_decoder: bool = False
    transaction_log_decoder: bool = False
    cluster_metadata_decoder: bool = False
    decode: str = "utf8"
    json: bool = False
    resync: bool = False
    start_offset: int | None = None
    end_offset: int | None = None
    start_time: int | None = None
    end_time: int | None = None

    @property
    def has_range(self) -> bool:
        """True when any offset or time filter is set."""
        return (
            self.start_offset is not None
            or self.end_offset is not None
            or self.start_time is not None
            or self.end_time is not None
        )


@dataclass
class DumpContext:
    """Output channel, collected end-of-run reports and the exit status."""

    opts: DumpOptions
    out: Callable[[str], Any] = field(default_factory=lambda: sys.stdout.write)
    status: int = EXIT_OK
    # Kafka's end reports, keyed by absolute path, in first-seen order.
    index_mismatches: dict[str, list[tuple[int, int]]] = field(default_factory=dict)
    time_mismatches: dict[str, list[tuple[int, int]]] = field(default_factory=dict)
    time_unordered: dict[str, list[tuple[int, int]]] = field(default_factory=dict)
    time_not_found: dict[str, list[tuple[int, int]]] = field(default_factory=dict)
    non_consecutive: dict[str, list[tuple[int, int]]] = field(default_factory=dict)
    # The path as given for each absolute path (JSON objects carry the given path).
    given: dict[str, str] = field(default_factory=dict)

    # --- status ---
    def problem(self) -> None:
        """Remember that something wrong was found (exit 1)."""
        if self.status == EXIT_OK:
            self.status = EXIT_PROBLEM

    def usage(self) -> None:
        """Remember a usage-class failure (exit 2), e.g. a file of an unknown kind."""
        self.status = EXIT_USAGE

    # --- output ---
    def err(self, line: str) -> None:
        """One line on stderr (stdout is flushed first so the two interleave sensibly)."""
        sys.stdout.flush()
        sys.stderr.write(line + "\n")
        sys.stderr.flush()

    def emit(self, obj: dict[str, Any]) -> None:
        """One NDJSON object (for the rarer objects; hot paths format their own)."""
        self.out(json.dumps(obj, separators=(",", ":"), ensure_ascii=False) + "\n")

    def damage(self, path: str, position: int, length: int, reason: str, note: str = "") -> None:
        """Report a damaged region (text: one stderr line; JSON: a damage object)."""
        self.problem()
        if self.opts.json:
            self.emit(
                {
                    "type": "damage",
                    "file": path,
                    "position": position,
                    "length": length,
                    "reason": reason,
                }
            )
        else:
            self.err(f"kt: damage in {path} at position {position}: {reason}{note}")

    def report(self, path: str, kind: str, message: str, **fields: Any) -> None:
        """Report a problem that is not a damaged byte range (text: stderr; JSON: object)."""
        self.problem()
        if self.opts.json:
            self.emit({"type": "problem", "kind": kind, "file": path, "message": message, **fields})
        else:
            self.err(f"kt: {path}: {message}")

    def _add(
        self, table: dict[str, list[tuple[int, int]]], path: str, pair: tuple[int, int]
    ) -> None:
        key = java_abs_path(path)
        self.given.setdefault(key, path)
        table.setdefault(key, []).append(pair)
        self.problem()

    def index_mismatch(self, path: str, index_offset: int, log_offset: int) -> None:
        """An offset-index entry whose batch has another last offset."""
        self._add(self.index_mismatches, path, (index_offset, log_offset))

    def time_mismatch(self, path: str, index_ts: int, log_ts: int) -> None:
        """A time-index entry whose batch has another max timestamp."""
        self._add(self.time_mismatches, path, (index_ts, log_ts))

    def time_out_of_order(self, path: str, index_ts: int, prev_ts: int) -> None:
        """A time-index timestamp not greater than the previous entry's."""
        self._add(self.time_unordered, path, (index_ts, prev_ts))

    def time_offset_not_found(self, path: str, index_offset: int, log_offset: int) -> None:
        """A time-index offset that is not the last offset of a batch."""
        self._add(self.time_not_found, path, (index_offset, log_offset))

    def offsets_not_consecutive(self, path: str, first: int, second: int) -> None:
        """Deep iteration found `second` right after `first`."""
        self._add(self.non_consecutive, path, (first, second))

    # --- the end reports, in Kafka's order and wording ---
    def finish(self) -> None:
        """Print the collected reports (stderr, or problem objects with --json)."""
        if self.opts.json:
            self._finish_json()
            return
        lines: list[str] = []
        for name, pairs in self.index_mismatches.items():
            lines.append(f"Mismatches in :{name}")
            # Kafka prepends to an immutable list, so it prints the newest first.
            lines.extend(f"  Index offset: {a}, log offset: {b}" for a, b in reversed(pairs))
        for name, pairs in self.time_mismatches.items():
            lines.append(f"Found timestamp mismatch in :{name}")
            lines.extend(f"  Index timestamp: {a}, log timestamp: {b}" for a, b in pairs)
        for name, pairs in self.time_unordered.items():
            lines.append(f"Found out of order timestamp in :{name}")
            lines.extend(
                f"  Index timestamp: {a}, Previously indexed timestamp: {b}" for a, b in pairs
            )
        for pairs in self.time_not_found.values():
            lines.append("The following indexed offsets are not found in the log.")
            lines.extend(f"Indexed offset: {a}, found log offset: {b}" for a, b in pairs)
        for name, pairs in self.non_consecutive.items():
            lines.append(f"Non-consecutive offsets in {name}")
            lines.extend(f"  {a} is followed by {b}" for a, b in reversed(pairs))
        if lines:
            sys.stdout.flush()
            sys.stderr.write("\n".join(lines) + "\n")
            sys.stderr.flush()

    def _finish_json(self) -> None:
        # In discovery order (the text report keeps Kafka's newest-first quirk).
        specs: list[tuple[dict[str, list[tuple[int, int]]], str, str, str]] = [
            (self.index_mismatches, "index_offset_mismatch", "index_offset", "log_offset"),
            (self.time_mismatches, "time_index_timestamp_mismatch", "index_timestamp",
             "log_timestamp"),
            (self.time_unordered, "time_index_out_of_order", "index_timestamp",
             "previous_index_timestamp"),
            (self.time_not_found, "indexed_offset_not_found", "index_offset", "log_offset"),
            (self.non_consecutive, "non_consecutive_offsets", "offset", "next_offset"),
        ]  # fmt: skip
        for table, kind, a_name, b_name in specs:
            for name, pairs in table.items():
                for a, b in pairs:
                    self.out(
                        f'{{"type":"problem","kind":"{kind}","file":{jstr(self.given[name])},'
                        f'"{a_name}":{a},"{b_name}":{b}}}\n'
                    )
