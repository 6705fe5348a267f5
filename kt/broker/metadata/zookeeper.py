"""ZooKeeperStore: the CoordinationStore interface over a real ZooKeeper, through kazoo.

kazoo runs its connection and its callbacks on threads of its own. Every operation
here uses kazoo's `*_async` form and hands the result to an asyncio future with
`call_soon_threadsafe`, so the event loop never blocks on ZooKeeper; watch callbacks
and session events reach the loop the same way.

The connect string is Kafka's `zookeeper.connect`: `host:port[,host:port...][/chroot]`.
As Kafka does, a missing chroot is created on start.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any

from kazoo import exceptions as kx
from kazoo.client import KazooClient, KazooState
from kazoo.protocol.states import EventType, WatchedEvent, ZnodeStat
from kazoo.retry import KazooRetry

from .store import (
    ANY_VERSION,
    BadVersionError,
    Check,
    ChildrenCallback,
    CoordinationStore,
    Create,
    DataCallback,
    Delete,
    NoChildrenForEphemeralsError,
    NodeExistsError,
    NoNodeError,
    NotEmptyError,
    Op,
    RolledBackError,
    RuntimeInconsistencyError,
    SessionCallback,
    SessionEvent,
    SessionExpiredError,
    SetData,
    Stat,
    StoreError,
    StoreUnavailableError,
    TransactionFailedError,
    Watch,
    validate_path,
)

log = logging.getLogger(__name__)


class _UntilConnected(logging.Filter):
    """Drops kazoo's chatter (each refused connect, each retry) below ERROR until the
    first session is established: a broker that cannot reach ZooKeeper at start says
    so in one line when `zookeeper.connection.timeout.ms` runs out. Once connected,
    kazoo's reconnect messages are kept: they are what an operator reads in an outage."""

    def __init__(self) -> None:
        super().__init__()
        self.connected = False

    def filter(self, record: logging.LogRecord) -> bool:
        return self.connected or record.levelno >= logging.ERROR


DEFAULT_SESSION_TIMEOUT_MS = 18000  # Kafka's zookeeper.session.timeout.ms

_ERRORS: dict[type[Exception], type[StoreError]] = {
    kx.NoNodeError: NoNodeError,
    kx.NodeExistsError: NodeExistsError,
    kx.BadVersionError: BadVersionError,
    kx.NotEmptyError: NotEmptyError,
    kx.NoChildrenForEphemeralsError: NoChildrenForEphemeralsError,
    kx.RolledBackError: RolledBackError,
    kx.RuntimeInconsistency: RuntimeInconsistencyError,
    kx.SessionExpiredError: SessionExpiredError,
    kx.ConnectionLoss: StoreUnavailableError,
    kx.ConnectionClosedError: StoreUnavailableError,
    kx.SessionMovedError: StoreUnavailableError,
    kx.OperationTimeoutError: StoreUnavailableError,
}


def _map_error(e: BaseException, path: str = "") -> BaseException:
    for kind, ours in _ERRORS.items():
        if isinstance(e, kind):
            return ours(path or str(e) or kind.__name__)
    if isinstance(e, kx.KazooException):
        return StoreError(f"ZooKeeper error {type(e).__name__}: {e} {path}".rstrip())
    return e


def _stat(s: ZnodeStat) -> Stat:
    return Stat(s.version, s.czxid, s.ephemeralOwner, s.numChildren, s.mzxid)


def split_connect(connect: str) -> tuple[str, str]:
    """(hosts, chroot) of a `zookeeper.connect` string; chroot '' when absent."""
    hosts, sep, chroot = connect.partition("/")
    chroot = "/" + chroot.rstrip("/") if sep and chroot.strip("/") else ""
    if not hosts:
        raise ValueError(f"zookeeper.connect {connect!r} names no host")
    return hosts, chroot


class _ZkWatch(Watch):
    """A persistent watch built from ZooKeeper's one-shot ones (re-armed on each fire)."""

    def __init__(self, path: str, children: ChildrenCallback | None, data: DataCallback | None):
        super().__init__()
        self.path = path
        self.on_children = children
        self.on_data = data
        # One callable per watch: kazoo keeps watchers in a set, so re-arming the same
        # callable never registers it twice.
        self.watcher: Callable[[WatchedEvent], None] = lambda ev: None


class ZooKeeperStore(CoordinationStore):
    """A CoordinationStore backed by a ZooKeeper ensemble (see the module doc)."""

    def __init__(self, connect: str, *, session_timeout_ms: int = DEFAULT_SESSION_TIMEOUT_MS):
        """`connect`: Kafka's `zookeeper.connect`; the session timeout as Kafka's config."""
        self.connect = connect
        self.hosts, self.chroot = split_connect(connect)
        self.session_timeout_s = session_timeout_ms / 1000
        self._client: KazooClient | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._listeners: list[SessionCallback] = []
        self._watches: list[_ZkWatch] = []
        self._session_id = 0
        self._closing = False

    # -- lifecycle -----------------------------------------------------------------

    @property
    def session_id(self) -> int:
        """The current ZooKeeper session id (0 before the first connection)."""
        return self._session_id

    @property
    def client(self) -> KazooClient:
        """The kazoo client (tests use it to reach the session); RuntimeError if not started."""
        if self._client is None:
            raise RuntimeError("ZooKeeperStore is not started")
        return self._client

    async def start(self, timeout_s: float = 10.0) -> None:
        """Connect within `timeout_s` and create the chroot if missing.

        StoreUnavailableError (naming the address) when no server answers in time.
        """
        self._loop = asyncio.get_running_loop()
        self._closing = False
        # Reconnect quickly after an outage: fault tests and failovers wait on it.
        retry = KazooRetry(max_tries=-1, delay=0.1, backoff=1.5, max_delay=1.0)
        # One unregistered logger per store (the manager would keep each forever),
        # its records handed on to this module's logger and so to the root's handlers.
        kazoo_log = logging.Logger(f"{__name__}.kazoo")
        kazoo_log.parent = log
        quiet = _UntilConnected()
        kazoo_log.addFilter(quiet)
        client = KazooClient(
            hosts=self.hosts,
            timeout=self.session_timeout_s,
            connection_retry=retry,
            logger=kazoo_log,
        )
        self._client = client
        try:
            await asyncio.to_thread(client.start, timeout_s)
        except client.handler.timeout_exception:
            self._client = None
            raise StoreUnavailableError(
                f"cannot connect to ZooKeeper at {self.connect} within {timeout_s:g} s"
            ) from None
        quiet.connected = True
        self._session_id = client.client_id[0]
        if self.chroot:
            # Created without the chroot in effect, then switched on, as Kafka does.
            try:
                await asyncio.to_thread(client.ensure_path, self.chroot)
            except kx.KazooException as e:
                self._client = None
                await asyncio.to_thread(_stop_client, client)
                raise StoreUnavailableError(
                    f"cannot create the chroot {self.chroot} on ZooKeeper at {self.hosts}: "
                    f"{type(e).__name__}"
                ) from e
            client.chroot = self.chroot
        client.add_listener(self._on_state)

    async def close(self) -> None:
        """End the session (its ephemeral nodes go at once) and stop kazoo's threads."""
        self._closing = True
        for w in self._watches:
            w.cancel()
        client, self._client = self._client, None
        if client is not None:
            await asyncio.to_thread(_stop_client, client)

    def _on_state(self, state: str) -> None:
        # Runs on kazoo's connection thread: only hand over to the loop.
        if self._closing or self._loop is None:
            return
        if state == KazooState.LOST:
            self._post(self._emit, SessionEvent.EXPIRED, False)
        elif state == KazooState.SUSPENDED:
            self._post(self._emit, SessionEvent.SUSPENDED, False)
        elif state == KazooState.CONNECTED:
            client = self._client
            if client is not None and client.client_id:
                self._session_id = client.client_id[0]
            self._post(self._emit, SessionEvent.RECONNECTED, True)

    def _emit(self, event: SessionEvent, connected: bool) -> None:
        if connected:
            # kazoo drops its watchers when the connection is lost: re-read and re-arm
            # every watch (this also delivers what changed while we were away).
            for w in self._watches:
                if not w.cancelled:
                    self._arm(w)
        for cb in list(self._listeners):
            cb(event)

    def on_session_event(self, callback: SessionCallback) -> None:
        """Call `callback(event)` on the loop for every session event."""
        self._listeners.append(callback)

    def _post(self, fn: Callable[..., None], *args: Any) -> None:
        loop = self._loop
        if loop is None or loop.is_closed():
            return
        try:
            loop.call_soon_threadsafe(fn, *args)
        except RuntimeError:
            pass  # the loop closed meanwhile: nobody is left to tell

    # -- bridging --------------------------------------------------------------------

    async def _ready(self) -> KazooClient:
        # kazoo queues requests while it reconnects; waiting here bounds that wait by
        # the session timeout and turns a long outage into StoreUnavailableError.
        client = self._client
        if client is None:
            raise StoreUnavailableError(f"not connected to ZooKeeper at {self.connect}")
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.session_timeout_s
        while not client.connected:
            if self._closing or loop.time() > deadline:
                raise StoreUnavailableError(
                    f"ZooKeeper at {self.connect} unreachable for {self.session_timeout_s:g} s"
                )
            await asyncio.sleep(0.05)
        return client

    async def _await(self, result: Any, path: str = "") -> Any:
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[Any] = loop.create_future()

        def settle(ar: Any) -> None:
            if fut.done():
                return
            if ar.successful():
                fut.set_result(ar.value)
            else:
                fut.set_exception(_map_error(ar.exception, path))

        def done(ar: Any) -> None:  # on kazoo's callback thread
            try:
                loop.call_soon_threadsafe(settle, ar)
            except RuntimeError:
                pass

        result.rawlink(done)
        return await fut

    async def _read(self, start: Callable[[KazooClient], Any], path: str) -> Any:
        # Reads are safe to repeat: retry a lost connection until the session's timeout.
        while True:
            client = await self._ready()
            try:
                return await self._await(start(client), path)
            except StoreUnavailableError:
                if self._closing:
                    raise
                await asyncio.sleep(0.05)  # lost in flight: _ready waits for the reconnect

    # -- operations ----------------------------------------------------------------

    async def create(
        self,
        path: str,
        data: bytes = b"",
        *,
        ephemeral: bool = False,
        sequential: bool = False,
        make_parents: bool = False,
    ) -> str:
        """Create a znode (see CoordinationStore.create)."""
        validate_path(path)
        client = await self._ready()
        created = await self._await(
            client.create_async(
                path, data, ephemeral=ephemeral, sequence=sequential, makepath=make_parents
            ),
            path,
        )
        return str(created)

    async def get(self, path: str) -> tuple[bytes, Stat]:
        """A znode's data and stat (see CoordinationStore.get)."""
        validate_path(path)
        data, stat = await self._read(lambda c: c.get_async(path), path)
        return data or b"", _stat(stat)

    async def exists(self, path: str) -> Stat | None:
        """A znode's stat or None (see CoordinationStore.exists)."""
        validate_path(path)
        stat = await self._read(lambda c: c.exists_async(path), path)
        return None if stat is None else _stat(stat)

    async def set(self, path: str, data: bytes, version: int = ANY_VERSION) -> Stat:
        """Conditionally replace a znode's data (see CoordinationStore.set)."""
        validate_path(path)
        client = await self._ready()
        return _stat(await self._await(client.set_async(path, data, version), path))

    async def delete(
        self, path: str, version: int = ANY_VERSION, *, recursive: bool = False
    ) -> None:
        """Delete a znode; `recursive` deletes its subtree first (not atomically)."""
        validate_path(path)
        if recursive:
            try:
                names = await self.children(path)
            except NoNodeError:
                names = []
            for name in names:
                try:
                    await self.delete(f"{path.rstrip('/')}/{name}", recursive=True)
                except NoNodeError:
                    pass  # deleted meanwhile
        client = await self._ready()
        await self._await(client.delete_async(path, version), path)

    async def children(self, path: str) -> list[str]:
        """The sorted names of a znode's children."""
        validate_path(path)
        names = await self._read(lambda c: c.get_children_async(path), path)
        return sorted(names)

    async def multi(self, ops: list[Op]) -> list[object]:
        """Apply `ops` atomically (ZooKeeper's multi); TransactionFailedError."""
        client = await self._ready()
        txn = client.transaction()
        for op in ops:
            validate_path(op.path)
            if isinstance(op, Create):
                txn.create(op.path, op.data, ephemeral=op.ephemeral, sequence=op.sequential)
            elif isinstance(op, SetData):
                txn.set_data(op.path, op.data, op.version)
            elif isinstance(op, Check):
                txn.check(op.path, op.version)
            else:
                assert isinstance(op, Delete)
                txn.delete(op.path, op.version)
        raw = await self._await(txn.commit_async())
        failed = any(isinstance(r, Exception) for r in raw)
        if failed:
            errors: list[StoreError] = []
            for op, r in zip(ops, raw, strict=False):
                mapped = _map_error(r, op.path) if isinstance(r, Exception) else None
                errors.append(mapped if isinstance(mapped, StoreError) else StoreError(str(r)))
            raise TransactionFailedError(errors)
        return [_stat(r) if isinstance(r, ZnodeStat) else r for r in raw]

    # -- watches -------------------------------------------------------------------

    def watch_children(self, path: str, callback: ChildrenCallback) -> Watch:
        """Persistent children watch; callbacks run on the loop (see the interface)."""
        return self._register(_ZkWatch(path, callback, None))

    def watch_data(self, path: str, callback: DataCallback) -> Watch:
        """Persistent data watch; callbacks run on the loop (see the interface)."""
        return self._register(_ZkWatch(path, None, callback))

    def _register(self, w: _ZkWatch) -> _ZkWatch:
        validate_path(w.path)

        def watcher(event: WatchedEvent) -> None:  # on kazoo's callback thread
            # NONE events mean kazoo dropped its watchers (connection lost); the
            # reconnect re-arms them all.
            if event.type != EventType.NONE and not w.cancelled:
                self._post(self._arm, w)

        w.watcher = watcher
        self._watches = [x for x in self._watches if not x.cancelled]
        self._watches.append(w)
        self._arm(w)
        return w

    def _arm(self, w: _ZkWatch) -> None:
        """Read the watched value with a one-shot watch set, then deliver it."""
        client = self._client
        if client is None or w.cancelled:
            return
        if w.on_children is not None:
            ar = client.get_children_async(w.path, watch=w.watcher)
        else:
            ar = client.get_async(w.path, watch=w.watcher)
        ar.rawlink(lambda r: self._post(self._on_read, w, r))

    def _on_read(self, w: _ZkWatch, ar: Any) -> None:
        if w.cancelled:
            return
        if ar.successful():
            if w.on_children is not None:
                w.on_children(sorted(ar.value))
            elif w.on_data is not None:
                data, stat = ar.value
                w.on_data(data or b"", _stat(stat))
            return
        if isinstance(ar.exception, kx.NoNodeError):
            # Watch for the node's creation; a missing node has no data, no children.
            client = self._client
            if client is None:
                return
            ex = client.exists_async(w.path, watch=w.watcher)
            ex.rawlink(lambda r: self._post(self._on_absent, w, r))
            return
        # Connection trouble: the reconnect re-arms every watch.
        log.debug("watch read of %s failed: %r", w.path, ar.exception)

    def _on_absent(self, w: _ZkWatch, ar: Any) -> None:
        if w.cancelled or not ar.successful():
            return
        if ar.value is not None:
            self._arm(w)  # created between our read and the exists: read it
            return
        if w.on_children is not None:
            w.on_children([])
        elif w.on_data is not None:
            w.on_data(None, None)


def _stop_client(client: KazooClient) -> None:
    try:
        client.stop()
    finally:
        client.close()
