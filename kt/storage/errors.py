"""Exceptions raised by the storage core.

Every problem found in on-disk data is a StorageError subclass carrying the path
and, where it applies, the byte position, so tools can print one precise line.
"""

from __future__ import annotations


class StorageError(Exception):
    """Base class of every error the storage core raises on purpose."""

    def __init__(self, message: str, path: str | None = None, position: int | None = None):
        super().__init__(message)
        self.message = message
        self.path = path
        self.position = position

    def __str__(self) -> str:
        where = ""
        if self.path is not None:
            where = f"{self.path}: "
        if self.position is not None:
            where += f"at position {self.position}: "
        return f"{where}{self.message}"


class CorruptRecordError(StorageError):
    """A record batch or message failed validation (CRC, sizes, magic, decoding)."""


class CorruptIndexError(StorageError):
    """An offset, time or transaction index is inconsistent or malformed."""


class CorruptSnapshotError(StorageError):
    """A producer-state snapshot is malformed or fails its CRC."""


class CorruptCheckpointError(StorageError):
    """A checkpoint or metadata text file (offsets, leader epochs, meta.properties,
    partition.metadata) does not parse."""


class UnsupportedFormatError(StorageError):
    """Well-formed data in a format or codec this build does not handle."""


class WrongFileKindError(StorageError):
    """A path is not a kind of file the operation reads (e.g. a .txt given as a segment)."""


class LogDirLockedError(StorageError):
    """The log directory's .lock is held by another process (a running broker)."""


class OffsetOutOfRangeError(StorageError):
    """A read asked for an offset outside [log start offset, log end offset]."""


class LogSegmentOffsetOverflowError(StorageError):
    """An offset cannot be stored relative to its segment's base offset (int32)."""
