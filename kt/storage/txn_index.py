"""Kafka's transaction index (``.txnindex``): the aborted transactions of a segment.

Each entry is an ``AbortedTxn`` of 34 bytes, big-endian: version int16 (0),
producerId int64, firstOffset int64, lastOffset int64, lastStableOffset int64.
Unlike the offset and time indexes it is never preallocated: the file holds
exactly the entries, appended in increasing ``lastOffset`` order, and is created
only when a segment records its first abort. Semantics follow Kafka's
``TransactionIndex`` (append, truncateTo, collectAbortedTxns, sanityCheck).
"""

from __future__ import annotations

import os
import struct
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import IO, NamedTuple

from kt.storage.atomic import atomic_write
from kt.storage.errors import CorruptIndexError

ABORTED_TXN_VERSION = 0
ABORTED_TXN_SIZE = 34

_ENTRY = struct.Struct(">hqqqq")


class AbortedTxn(NamedTuple):
    """One aborted transaction: its producer and offset range, and the LSO when it ended."""

    producer_id: int
    first_offset: int
    last_offset: int
    last_stable_offset: int
    version: int = ABORTED_TXN_VERSION

    def encode(self) -> bytes:
        """The 34 bytes of this entry."""
        return _ENTRY.pack(
            self.version,
            self.producer_id,
            self.first_offset,
            self.last_offset,
            self.last_stable_offset,
        )


@dataclass(frozen=True, slots=True)
class TxnIndexSearchResult:
    """Aborted transactions overlapping a fetch range; ``is_complete`` says the scan can stop
    (no later segment can hold more) — Kafka's ``TxnIndexSearchResult``."""

    aborted: list[AbortedTxn]
    is_complete: bool


def parse_txn_index(data: bytes, path: str | None = None) -> list[AbortedTxn]:
    """Decode a transaction index; CorruptIndexError on a torn entry or unknown version."""
    if len(data) % ABORTED_TXN_SIZE:
        whole = len(data) - len(data) % ABORTED_TXN_SIZE
        raise CorruptIndexError(
            f"unexpected end of transaction index: {len(data) % ABORTED_TXN_SIZE} trailing "
            f"bytes after {whole // ABORTED_TXN_SIZE} entries (size {len(data)} is not a "
            f"multiple of {ABORTED_TXN_SIZE})",
            path=path,
            position=whole,
        )
    out: list[AbortedTxn] = []
    for i, (version, pid, first, last, lso) in enumerate(_ENTRY.iter_unpack(data)):
        if version != ABORTED_TXN_VERSION:
            raise CorruptIndexError(
                f"unexpected aborted transaction version {version} (expected "
                f"{ABORTED_TXN_VERSION}); a zero-filled or foreign file?",
                path=path,
                position=i * ABORTED_TXN_SIZE,
            )
        out.append(AbortedTxn(pid, first, last, lso, version))
    return out


def txn_index_problems(entries: Iterable[AbortedTxn], start_offset: int | None = None) -> list[str]:
    """Rule violations: lastOffset below the segment start (Kafka's ``sanityCheck``),
    non-increasing lastOffset, or firstOffset > lastOffset."""
    out: list[str] = []
    prev: AbortedTxn | None = None
    for i, t in enumerate(entries):
        if start_offset is not None and t.last_offset < start_offset:
            out.append(
                f"entry {i}: last offset {t.last_offset} is less than the segment's start "
                f"offset {start_offset}"
            )
        if t.first_offset > t.last_offset:
            out.append(f"entry {i}: first offset {t.first_offset} > last offset {t.last_offset}")
        if prev is not None and t.last_offset <= prev.last_offset:
            out.append(
                f"entry {i}: last offset {t.last_offset} is not greater than the previous "
                f"entry's {prev.last_offset}"
            )
        prev = t
    return out


def read_txn_index(path: str | os.PathLike[str]) -> list[AbortedTxn]:
    """Read every entry of a transaction index file."""
    return parse_txn_index(Path(path).read_bytes(), str(path))


def encode_txn_index(entries: Iterable[AbortedTxn]) -> bytes:
    """The bytes of a transaction index holding ``entries``."""
    return b"".join(t.encode() for t in entries)


def write_txn_index(path: str | os.PathLike[str], entries: Iterable[AbortedTxn]) -> None:
    """Write a transaction index atomically."""
    atomic_write(path, encode_txn_index(entries))


class TransactionIndex:
    """The transaction index of one segment, as the log engine maintains it.

    In memory, optionally bound to an append-only file that is created lazily on
    the first append (Kafka only creates ``.txnindex`` files that have entries).
    """

    def __init__(self, start_offset: int, path: str | os.PathLike[str] | None = None) -> None:
        self.start_offset = start_offset
        self.path = Path(path) if path is not None else None
        self._entries: list[AbortedTxn] = []
        self._fh: IO[bytes] | None = None

    @classmethod
    def open(cls, path: str | os.PathLike[str], start_offset: int) -> TransactionIndex:
        """Load an existing file (or nothing if missing); later appends go to it."""
        index = cls(start_offset, path)
        p = Path(path)
        if p.exists():
            index._entries = read_txn_index(p)
            problems = txn_index_problems(index._entries)
            if problems:
                raise CorruptIndexError(problems[0], path=str(p))
        return index

    def __len__(self) -> int:
        return len(self._entries)

    @property
    def entries(self) -> list[AbortedTxn]:
        """A copy of the entries, in file order."""
        return list(self._entries)

    @property
    def last_offset(self) -> int | None:
        """The last entry's lastOffset, or None when empty."""
        return self._entries[-1].last_offset if self._entries else None

    def append(self, txn: AbortedTxn) -> None:
        """Append an aborted transaction; its lastOffset must exceed the previous one."""
        last = self.last_offset
        if last is not None and txn.last_offset <= last:
            raise CorruptIndexError(
                f"the last offset of appended transactions must increase: {txn.last_offset} "
                f"is not greater than the current last offset {last}",
                path=str(self.path) if self.path else None,
            )
        self._entries.append(txn)
        if self.path is not None:
            if self._fh is None:
                self._fh = open(self.path, "ab")  # noqa: SIM115 - kept open across calls
            self._fh.write(txn.encode())
            # Into the OS at once, as Kafka's channel write (not fsynced): a reader of
            # the file (kt dump-log-segments on a live broker) sees the entry.
            self._fh.flush()

    def truncate_to(self, offset: int) -> None:
        """Remove the entries from the first whose lastOffset >= ``offset`` onward."""
        for i, t in enumerate(self._entries):
            if t.last_offset >= offset:
                del self._entries[i:]
                if self.path is not None and self.path.exists():
                    if self._fh is not None:
                        self._fh.flush()
                    os.truncate(self.path, i * ABORTED_TXN_SIZE)
                return

    def reset(self) -> None:
        """Remove every entry."""
        self._entries.clear()
        if self.path is not None and self.path.exists():
            if self._fh is not None:
                self._fh.flush()
            os.truncate(self.path, 0)

    def collect_aborted(self, fetch_offset: int, upper_bound_offset: int) -> TxnIndexSearchResult:
        """Aborted transactions overlapping [fetch_offset, upper_bound_offset).

        As Kafka's ``collectAbortedTxns``: an entry overlaps when its lastOffset >=
        fetch_offset and its firstOffset < upper bound; the scan is complete (no
        need to look at the next segment) at the first entry whose lastStableOffset
        >= upper bound.
        """
        return collect_aborted(self._entries, fetch_offset, upper_bound_offset)

    def to_bytes(self) -> bytes:
        """The file content."""
        return encode_txn_index(self._entries)

    def write(self, path: str | os.PathLike[str] | None = None) -> None:
        """Write all entries atomically (to ``path`` or the bound file)."""
        target = Path(path) if path is not None else self.path
        if target is None:
            raise ValueError("no path to write the transaction index to")
        if self._fh is not None and target == self.path:
            self._fh.close()
            self._fh = None
        atomic_write(target, self.to_bytes())

    def flush(self) -> None:
        """Make appended entries durable."""
        if self._fh is not None:
            self._fh.flush()
            os.fsync(self._fh.fileno())

    def close(self) -> None:
        """Flush and close the backing file."""
        if self._fh is not None:
            self.flush()
            self._fh.close()
            self._fh = None


def collect_aborted(
    entries: Iterable[AbortedTxn], fetch_offset: int, upper_bound_offset: int
) -> TxnIndexSearchResult:
    """Kafka's ``collectAbortedTxns`` over any sequence of entries (see TransactionIndex)."""
    found: list[AbortedTxn] = []
    for t in entries:
        if t.last_offset >= fetch_offset and t.first_offset < upper_bound_offset:
            found.append(t)
        if t.last_stable_offset >= upper_bound_offset:
            return TxnIndexSearchResult(found, True)
    return TxnIndexSearchResult(found, False)
