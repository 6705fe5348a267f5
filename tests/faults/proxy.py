"""Loopback TCP proxies the fault harness controls, one per link.

All proxies run on one asyncio loop in a daemon thread (the machine is small: no
thread per connection). Each `Link` listens on 127.0.0.1:<port> and forwards to
127.0.0.1:<target>; its mode decides what passes:

- `open`: bytes flow both ways;
- `blackhole`: connections stay up but nothing is forwarded (bytes wait in the
  buffers, as a network dropping packets makes TCP retransmit), new connections are
  accepted and hang; healing lets the queued bytes through;
- `refuse`: existing connections are reset and new ones closed at once (a host that
  answers with RST).

On top of its mode a link can refuse chosen *sources* only (`deny`): the ProxySet's
`identify` callable names the process behind each accepted connection (from the
peer's port), and connections from a denied source are reset while everyone else's
pass. That cuts the link between two brokers while clients still reach both.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

LOOPBACK = "127.0.0.1"
MODES = ("open", "blackhole", "refuse")


@dataclass
class Link:
    """One proxied link: listen_port -> target_port, both on loopback."""

    name: str
    target_port: int
    listen_port: int = 0
    mode: str = "open"
    #: sources (as `ProxySet.identify` names them) whose connections are refused
    denied: frozenset[str] = frozenset()
    _open: asyncio.Event | None = None
    _writers: set[asyncio.StreamWriter] = field(default_factory=set)
    #: accepted client connection -> its source (None: unknown)
    _sources: dict[asyncio.StreamWriter, str | None] = field(default_factory=dict)
    _server: asyncio.base_events.Server | None = None


#: a connection's source not looked up yet (see ProxySet._serve)
UNRESOLVED = "?unresolved"


class ProxySet:
    """Proxies on a private event loop; `set_mode` is safe from any thread."""

    def __init__(self, identify: Callable[[int], str | None] | None = None) -> None:
        self.links: dict[str, Link] = {}
        #: peer port of an accepted connection -> the name of the process that made it
        self.identify = identify
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._thread.start()

    def _call(self, coro):  # type: ignore[no-untyped-def]
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result(10)

    def add(self, name: str, target_port: int, listen_port: int = 0) -> Link:
        """Start a proxy named `name` to 127.0.0.1:target_port; returns its Link."""
        link = Link(name, target_port, listen_port)
        self._call(self._start(link))
        self.links[name] = link
        return link

    async def _start(self, link: Link) -> None:
        link._open = asyncio.Event()
        link._open.set()

        async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            await self._serve(link, reader, writer)

        sock = socket.socket()
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((LOOPBACK, link.listen_port))
        link.listen_port = sock.getsockname()[1]
        link._server = await asyncio.start_server(handle, sock=sock)

    async def _serve(
        self, link: Link, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        if link.mode == "refuse":
            _reset(writer)
            return
        # Who opened it is only needed while this link denies someone: looking it up
        # (/proc scans) for every connection stalled the proxies' loop in reconnect
        # storms on a loaded machine. Otherwise it is looked up when a deny comes.
        source: str | None = UNRESOLVED
        if self.identify is not None and link.denied:
            source = await self._identify(writer)
        if source is not None and source in link.denied:
            _reset(writer)
            return
        assert link._open is not None
        link._writers.add(writer)
        link._sources[writer] = source
        try:
            # blackholed: the client's connect succeeded, but nothing reaches the target
            await link._open.wait()
            if link.mode == "refuse":
                return
            try:
                up_r, up_w = await asyncio.open_connection(LOOPBACK, link.target_port)
            except OSError:
                return
            link._writers.add(up_w)
            try:
                await asyncio.gather(self._pump(link, reader, up_w), self._pump(link, up_r, writer))
            finally:
                link._writers.discard(up_w)
                _close(up_w)
        finally:
            link._writers.discard(writer)
            link._sources.pop(writer, None)
            _close(writer)

    async def _pump(self, link: Link, src: asyncio.StreamReader, dst: asyncio.StreamWriter) -> None:
        assert link._open is not None
        try:
            while True:
                data = await src.read(65536)
                if not data:
                    break
                # hold the bytes while blackholed; they pass once healed
                await link._open.wait()
                dst.write(data)
                await dst.drain()
        except (OSError, asyncio.IncompleteReadError):
            pass
        finally:
            _close(dst)

    def set_mode(self, name: str, mode: str) -> None:
        """Switch a link to open, blackhole or refuse."""
        if mode not in MODES:
            raise ValueError(f"unknown proxy mode {mode!r}")
        link = self.links[name]
        self._call(self._set_mode(link, mode))

    async def _set_mode(self, link: Link, mode: str) -> None:
        assert link._open is not None
        link.mode = mode
        if mode == "open":
            link._open.set()
            return
        link._open.clear()
        if mode == "refuse":
            for w in list(link._writers):
                _reset(w)
            link._writers.clear()

    def deny(self, name: str, sources: Iterable[str]) -> None:
        """Refuse connections from `sources` on link `name` (resetting those it already
        carries); an empty `sources` lets everyone through again."""
        link = self.links[name]
        self._call(self._deny(link, frozenset(sources)))

    async def _identify(self, writer: asyncio.StreamWriter) -> str | None:
        """The source of an accepted connection, looked up off the loop."""
        peer = writer.get_extra_info("peername")
        if self.identify is None or not peer:
            return None
        return await asyncio.to_thread(self.identify, peer[1])

    async def _deny(self, link: Link, sources: frozenset[str]) -> None:
        link.denied = sources
        for w, src in list(link._sources.items()):
            if src == UNRESOLVED and sources:
                src = await self._identify(w)
                if w not in link._sources:
                    continue  # closed meanwhile
                link._sources[w] = src
            if src is not None and src in sources:
                _reset(w)
                link._writers.discard(w)
                link._sources.pop(w, None)

    def heal(self) -> None:
        """Every link open again, nobody denied."""
        for name in self.links:
            self.set_mode(name, "open")
            if self.links[name].denied:
                self.deny(name, ())

    def close(self) -> None:
        """Stop every proxy and the loop."""

        async def shut() -> None:
            for link in self.links.values():
                if link._server is not None:
                    link._server.close()
                for w in list(link._writers):
                    _reset(w)

        with contextlib.suppress(Exception):
            self._call(shut())
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(5)


def socket_owner(
    port: int,
    pids: dict[int, str],
    tables: tuple[str, ...] = ("/proc/net/tcp", "/proc/net/tcp6"),
) -> str | None:
    """The name (from `pids`: pid -> name) of the process owning the loopback TCP
    socket bound to local `port`, found through /proc/net/tcp and the processes' fd
    tables (Linux); None when none of them owns it."""
    inode = None
    want = f"0100007F:{port:04X}"
    for table in tables:
        with contextlib.suppress(OSError), open(table) as fh:
            for line in fh.readlines()[1:]:
                cols = line.split()
                local = cols[1]
                # inode 0: a closed connection in TIME_WAIT that used the same port
                # before; the live socket is further down the table
                if cols[9] != "0" and (
                    local == want or (local.endswith(f":{port:04X}") and "0000FFFF7F" in local)
                ):
                    inode = cols[9]
                    break
        if inode:
            break
    if not inode:
        return None
    target = f"socket:[{inode}]"
    for pid, name in pids.items():
        fd_dir = f"/proc/{pid}/fd"
        with contextlib.suppress(OSError):
            for fd in os.listdir(fd_dir):
                with contextlib.suppress(OSError):
                    if os.readlink(f"{fd_dir}/{fd}") == target:
                        return name
    return None


def _close(w: asyncio.StreamWriter) -> None:
    with contextlib.suppress(Exception):
        w.close()


def _reset(w: asyncio.StreamWriter) -> None:
    # SO_LINGER 0: close() sends RST, as a refused/reset connection would
    sock = w.get_extra_info("socket")
    with contextlib.suppress(Exception):
        if sock is not None:
            sock.setsockopt(
                socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00"
            )
    _close(w)
