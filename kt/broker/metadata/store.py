"""CoordinationStore: the znode model of ZooKeeper as an async interface.

Two implementations exist: `InProcessStore` (single-node mode: znodes in memory,
persistent ones in a JSON file) and `ZooKeeperStore` (a real ensemble, over kazoo).
Everything above them (`ClusterStore`, the controller) speaks only this interface, so
single-node and cluster mode run the same code.

Semantics follow ZooKeeper's: every node has a data `version` bumped by each setData,
a `czxid` (the transaction id that created it, increasing across the whole tree), an
`ephemeral_owner` (the session id that owns an ephemeral node, else 0). Sequential
creates append a 10-digit counter taken from the parent. `multi` applies all of its
operations or none. Watches are persistent and their callbacks run on the asyncio loop.
"""

from __future__ import annotations

import enum
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass

ANY_VERSION = -1


@dataclass(frozen=True, slots=True)
class Stat:
    """The part of a znode's ZooKeeper Stat that kt uses."""

    version: int
    czxid: int
    ephemeral_owner: int
    num_children: int
    mzxid: int = 0


class SessionEvent(enum.Enum):
    """A change of the store's session, delivered to `on_session_event` callbacks.

    SUSPENDED: the connection is lost; the session (and its ephemeral nodes) may live.
    RECONNECTED: connected again. If an EXPIRED came before, this is a *new* session
    (`session_id` has changed) and ephemeral nodes must be created again.
    EXPIRED: the session is gone, and with it its ephemeral nodes and watches.
    """

    SUSPENDED = "suspended"
    RECONNECTED = "reconnected"
    EXPIRED = "expired"


# --- errors -------------------------------------------------------------------------


class StoreError(Exception):
    """Base class of the coordination store's errors."""


class NoNodeError(StoreError):
    """The znode (or, for a create, its parent) does not exist."""


class NodeExistsError(StoreError):
    """A create found the znode already there."""


class BadVersionError(StoreError):
    """A conditional write or check found another version."""


class NotEmptyError(StoreError):
    """A non-recursive delete of a znode that has children."""


class NoChildrenForEphemeralsError(StoreError):
    """A create under an ephemeral znode (ZooKeeper forbids it)."""


class StoreUnavailableError(StoreError):
    """The store cannot be reached (connection timeout or connection lost)."""


class SessionExpiredError(StoreError):
    """The session expired: its ephemeral nodes and watches are gone."""


class RolledBackError(StoreError):
    """Result of a multi operation that would have succeeded but was rolled back."""


class RuntimeInconsistencyError(StoreError):
    """Result of a multi operation after the failed one (never attempted)."""


class TransactionFailedError(StoreError):
    """A multi failed and nothing was applied.

    `results` has one entry per operation: the error of the failing operation,
    `RolledBackError` before it and `RuntimeInconsistencyError` after it, as
    ZooKeeper reports them.
    """

    def __init__(self, results: list[StoreError]) -> None:
        self.results = results
        failed = self.failure
        super().__init__(f"transaction failed: {type(failed).__name__}: {failed}")

    @property
    def failure(self) -> StoreError:
        """The error of the operation that made the transaction fail."""
        for r in self.results:
            if not isinstance(r, (RolledBackError, RuntimeInconsistencyError)):
                return r
        return self.results[0] if self.results else StoreError("empty transaction")


# --- multi operations ---------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Create:
    """Create `path`; the result is the created path (sequential: with its counter)."""

    path: str
    data: bytes = b""
    ephemeral: bool = False
    sequential: bool = False


@dataclass(frozen=True, slots=True)
class SetData:
    """Set `path`'s data if its version is `version` (-1: any); the result is a Stat."""

    path: str
    data: bytes
    version: int = ANY_VERSION


@dataclass(frozen=True, slots=True)
class Check:
    """Fail the transaction unless `path` has version `version`; the result is True."""

    path: str
    version: int


@dataclass(frozen=True, slots=True)
class Delete:
    """Delete `path` (no children) if its version is `version`; the result is True."""

    path: str
    version: int = ANY_VERSION


Op = Create | SetData | Check | Delete

ChildrenCallback = Callable[[list[str]], None]
DataCallback = Callable[[bytes | None, Stat | None], None]
SessionCallback = Callable[[SessionEvent], None]


class Watch:
    """A registered persistent watch; `cancel()` stops further callbacks."""

    def __init__(self) -> None:
        self.cancelled = False

    def cancel(self) -> None:
        """Stop calling this watch's callback."""
        self.cancelled = True


# --- the interface ------------------------------------------------------------------


class CoordinationStore(ABC):
    """The znode interface shared by the in-process store and ZooKeeper.

    All methods but the watch registrations are coroutines and must be called on the
    event loop the store was started on; none of them blocks that loop.
    """

    @property
    @abstractmethod
    def session_id(self) -> int:
        """The current session's id (the `ephemeral_owner` of our ephemeral nodes)."""

    @abstractmethod
    async def start(self, timeout_s: float) -> None:
        """Connect (or load); StoreUnavailableError if not possible within `timeout_s`."""

    @abstractmethod
    async def close(self) -> None:
        """End the session: our ephemeral nodes disappear, watches stop."""

    @abstractmethod
    async def create(
        self,
        path: str,
        data: bytes = b"",
        *,
        ephemeral: bool = False,
        sequential: bool = False,
        make_parents: bool = False,
    ) -> str:
        """Create a znode and return its path; NodeExistsError, NoNodeError (parent)."""

    @abstractmethod
    async def get(self, path: str) -> tuple[bytes, Stat]:
        """A znode's data and stat; NoNodeError."""

    @abstractmethod
    async def exists(self, path: str) -> Stat | None:
        """A znode's stat, or None when it does not exist."""

    @abstractmethod
    async def set(self, path: str, data: bytes, version: int = ANY_VERSION) -> Stat:
        """Replace a znode's data if its version matches; BadVersionError, NoNodeError."""

    @abstractmethod
    async def delete(
        self, path: str, version: int = ANY_VERSION, *, recursive: bool = False
    ) -> None:
        """Delete a znode (recursive: with its subtree); NoNodeError, NotEmptyError."""

    @abstractmethod
    async def children(self, path: str) -> list[str]:
        """The names of a znode's children, sorted; NoNodeError."""

    @abstractmethod
    async def multi(self, ops: list[Op]) -> list[object]:
        """Apply all `ops` atomically and return their results; TransactionFailedError."""

    @abstractmethod
    def watch_children(self, path: str, callback: ChildrenCallback) -> Watch:
        """Call `callback(children)` now and after every change of `path`'s children.

        A missing znode counts as no children; the watch continues if it appears.
        """

    @abstractmethod
    def watch_data(self, path: str, callback: DataCallback) -> Watch:
        """Call `callback(data, stat)` now and after every change (None, None: deleted)."""

    @abstractmethod
    def on_session_event(self, callback: SessionCallback) -> None:
        """Call `callback(event)` on the loop for every SessionEvent."""

    async def ensure_path(self, path: str) -> None:
        """Create `path` and its missing parents as empty persistent znodes."""
        if await self.exists(path) is not None:
            return
        try:
            await self.create(path, b"", make_parents=True)
        except NodeExistsError:
            pass  # created concurrently: the goal is reached either way


def parent_of(path: str) -> str:
    """The parent path of a znode path ('/' for top-level nodes)."""
    head = path.rsplit("/", 1)[0]
    return head or "/"


def validate_path(path: str) -> None:
    """Raise ValueError for a path ZooKeeper would refuse."""
    if not path.startswith("/") or (path != "/" and path.endswith("/")) or "//" in path:
        raise ValueError(f"invalid znode path {path!r}")
    if any(part in (".", "..") for part in path.split("/")):
        raise ValueError(f"invalid znode path {path!r}")
