"""The broker's network layer: asyncio connections speaking the Kafka protocol.

Per connection, the protocol receives frames in place (the sans-IO
`FrameReceiver`: a large produce request is read once, straight into its own
buffer, and its record batches are patched and written from there) and one
processor task handles them strictly in order, so
responses leave in request order even when a client pipelines; a long-polling
fetch holds back the requests behind it, as in Kafka (which mutes the channel).

One exception, for throughput: an acks=all Produce whose records are appended but
not yet replicated gives a `DeferredResponse`, and the connection's next Produce
requests are handled (appended, in order) while it waits; a writer task sends the
responses in request order as they become ready. Up to `MAX_DEFERRED` responses
wait per connection (then reading stops); any other request waits until every
response before it has been sent, so it sees the state Kafka would show it.
A frame larger than `socket.request.max.bytes` or one that does not decode closes
that connection only. Connections idle for `connections.max.idle.ms` are closed.
Fetched records go from the segment file to the socket with sendfile, except
small ones (`COPY_RECORDS_MAX`), which are copied so the frame leaves in one write.

Any asyncio event loop will do (asyncio's own, uvloop): transports are checked for
the methods used, not for their class, and on a loop without `loop.sendfile`
(uvloop) fetched records are copied in chunks, as asyncio's fallback does.
"""

from __future__ import annotations

import asyncio
import collections
import itertools
import logging
import os
import re
import socket
import ssl
import struct
import time
from dataclasses import dataclass
from typing import IO, Any, cast

from kt.broker import handlers
from kt.broker.connection_quotas import ConnectionQuotas
from kt.broker.dispatcher import RequestDispatcher
from kt.broker.error_responses import error_response
from kt.broker.errors import CloseConnection
from kt.broker.handlers import DeferredResponse
from kt.broker.security.authenticator import SaslAuthenticator, Step
from kt.broker.security.listener_security import ListenerSecurity
from kt.broker.security.principal import ANONYMOUS, PrincipalMappingError, ssl_principal
from kt.protocol import (
    DecodeError,
    ErrorCode,
    Request,
    RequestHeader,
    apis,
    decode_request,
    encode_response,
)
from kt.protocol.framing import FrameReceiver

log = logging.getLogger("kt.broker.network")

_conn_ids = itertools.count(1)


@dataclass(frozen=True, slots=True)
class _RawToken:
    """A frame after a SaslHandshake v0: a raw SASL token, not a Kafka request."""

    data: bytes


class _FdFile:
    """The minimal file object loop.sendfile needs, over a borrowed descriptor.

    The position is our own (the descriptor is shared, so its offset is never used):
    native sendfile passes explicit offsets, and asyncio's fallback (taken when
    os.sendfile fails before sending anything, e.g. on a connection the peer just
    dropped) seeks here and reads with `readinto`, which preads at that position."""

    def __init__(self, fd: int) -> None:
        self._fd = fd
        self._pos = 0

    def fileno(self) -> int:
        return self._fd

    def seek(self, offset: int, whence: int = 0) -> int:
        if whence != os.SEEK_SET:
            raise ValueError("only absolute seeks")
        self._pos = offset
        return offset

    def readinto(self, buf: memoryview) -> int:
        n = os.preadv(self._fd, [buf], self._pos)
        self._pos += n
        return n


#: What the broker calls on a connection's transport (asyncio.Transport's interface).
_TRANSPORT_METHODS = (
    "write", "pause_reading", "resume_reading", "is_closing", "close", "abort",
    "get_extra_info",
)  # fmt: skip


def _is_stream_transport(transport: object) -> bool:
    """True when `transport` offers every method of a stream transport we use."""
    return all(callable(getattr(transport, m, None)) for m in _TRANSPORT_METHODS)


class _Connection(asyncio.BufferedProtocol):
    """One client connection: frames are received in place (see FrameReceiver) and
    queued; a processor task answers them in order."""

    def __init__(
        self,
        server: NetworkServer,
        security: ListenerSecurity | None = None,
        *,
        preadmitted: bool = False,
    ) -> None:
        self.server = server
        self.conn_id = next(_conn_ids)
        self.receiver = FrameReceiver(server.max_request_size)
        self.queue: asyncio.Queue[Request | _RawToken | None] = asyncio.Queue()
        # The listener's security; who the peer is (TLS certificate or SASL), and
        # the SASL exchange that must complete before any other request is served.
        self.security = security
        self.listener = security.endpoint.name if security is not None else ""
        self.principal = ANONYMOUS
        self.auth: SaslAuthenticator | None = None
        self.transport: asyncio.Transport | None = None
        self.host = "unknown"
        self.closed = False
        self.reading_paused = False
        self.can_write = asyncio.Event()
        self.can_write.set()
        self.last_activity = 0.0
        self.task: asyncio.Task[None] | None = None
        # Responses not sent yet, in request order (only while one is deferred),
        # and the task sending them; `deferred` counts the DeferredResponses among them.
        self.responses: collections.deque[tuple[RequestHeader, Any]] = collections.deque()
        self.deferred = 0
        self.writer_task: asyncio.Task[None] | None = None
        # Set whenever the writer sent a response or stopped.
        self.written = asyncio.Event()
        self.admitted = False  # counted by the server's ConnectionQuotas
        # Admitted by a TLS listener at the accept, before the handshake: this
        # connection releases the count once it is made (see _TlsListener).
        self.preadmitted = preadmitted

    # --- asyncio protocol callbacks ---
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # Any loop's stream transport will do (uvloop's are not asyncio.Transport
        # instances): what matters is that it has the methods used here.
        if not _is_stream_transport(transport):
            log.error(
                "closing a connection: its transport (%s) lacks the stream transport "
                "methods (%s)", type(transport).__name__, ", ".join(_TRANSPORT_METHODS),
            )  # fmt: skip
            self.closed = True
            transport.close()
            return
        self.transport = cast(asyncio.Transport, transport)
        peer = transport.get_extra_info("peername")
        self.host = peer[0] if isinstance(peer, tuple) else "unknown"
        refused = None if self.preadmitted else self.server.quotas.admit(self.host)
        self.preadmitted = False
        if refused is not None:
            # Kafka's TooManyConnectionsException: closed right after the accept
            log.info("rejected a connection from %s: %s", self.host, refused)
            self.closed = True
            self.transport.abort()
            return
        self.admitted = True
        if self.security is not None and not self._identify(self.transport):
            return
        loop = asyncio.get_running_loop()
        self.last_activity = loop.time()
        self.task = loop.create_task(self.server._run(self))
        self.server.connections.add(self)

    def _identify(self, transport: asyncio.Transport) -> bool:
        """The principal of a TLS client certificate (SSL listeners), the SASL
        exchange (SASL listeners); False when the connection was refused."""
        sec = self.security
        assert sec is not None
        if sec.sasl is not None:
            self.auth = SaslAuthenticator(sec.sasl, self.host, time.monotonic)
        elif sec.ssl_context is not None:
            ssl_object = transport.get_extra_info("ssl_object")
            der = ssl_object.getpeercert(binary_form=True) if ssl_object is not None else None
            try:
                self.principal = ssl_principal(der, sec.mapper)
            except PrincipalMappingError as exc:
                log.info("Failed authentication with /%s (%s)", self.host, exc)
                self.closed = True
                transport.abort()
                return False
        return True

    def get_buffer(self, sizehint: int) -> memoryview:
        return self.receiver.get_buffer()

    def buffer_updated(self, nbytes: int) -> None:
        self.last_activity = asyncio.get_running_loop().time()
        try:
            for frame in self.receiver.buffer_updated(nbytes):
                auth = self.auth
                if auth is not None and not auth.complete:
                    if len(frame) > auth.settings.max_receive_size:
                        log.info(
                            "Failed authentication with /%s (Failing SASL authentication due "
                            "to invalid receive size)", self.host,
                        )  # fmt: skip
                        self.close()
                        return
                    if auth.expects_raw:
                        self.queue.put_nowait(_RawToken(bytes(frame)))
                        continue
                header, body = decode_request(frame)
                if (auth is not None and body is None and apis.api_for_key(header.api_key) is None
                        and auth.start_raw_gssapi()):  # fmt: skip
                    # Kafka 0.9's GSSAPI clients send their first Kerberos token with
                    # no handshake; it is no Kafka request (a DER tag, not an API key)
                    self.queue.put_nowait(_RawToken(bytes(frame)))
                    continue
                self.queue.put_nowait(Request(header, body))
        except DecodeError as exc:
            log.warning("closing connection %d from %s: %s", self.conn_id, self.host, exc)
            self.close()
            return
        if self.queue.qsize() >= _MAX_QUEUED and self.transport is not None:
            # Backpressure: stop reading until the processor catches up.
            self.transport.pause_reading()
            self.reading_paused = True

    def eof_received(self) -> bool:
        self.queue.put_nowait(None)
        return False

    def connection_lost(self, exc: Exception | None) -> None:
        if self.admitted:
            self.admitted = False
            self.server.quotas.release(self.host)
        self.closed = True
        self.queue.put_nowait(None)
        self.can_write.set()
        self.server.connections.discard(self)

    def pause_writing(self) -> None:
        self.can_write.clear()

    def resume_writing(self) -> None:
        self.can_write.set()

    # --- used by the processor ---
    def close(self) -> None:
        if self.transport is not None and not self.transport.is_closing():
            self.transport.close()

    def write(self, data: bytes | bytearray | memoryview) -> None:
        if self.closed or self.transport is None:
            raise ConnectionResetError("connection closed")
        self.transport.write(data)

    async def drain(self) -> None:
        await self.can_write.wait()
        if self.closed:
            raise ConnectionResetError("connection closed")


#: Fetch responses whose records total at most this are sent as one copied write
#: rather than with sendfile. sendfile saves copying the records, but on asyncio it
#: costs the frame three writes (head, records, tail), a wait for the transport's
#: buffer to empty and two epoll changes (reading is paused around it): for the
#: few KiB a follower or consumer fetches per round at low latency that is several
#: times the cost of copying them. Bulk reads (catch-up, consumers behind) stay
#: zero-copy.
COPY_RECORDS_MAX = 64 * 1024


def _pread_exactly(fd: int, position: int, length: int) -> bytes:
    """`length` bytes of a segment at `position`. A segment cut shorter meanwhile
    (truncated or deleted) cannot finish the frame already sized: the connection is
    closed rather than sent a corrupt frame."""
    data = os.pread(fd, length, position)
    if len(data) != length:
        raise ConnectionResetError(f"records changed while being sent: {len(data)} of {length}")
    return data


#: Bytes read and written at a time when records are copied instead of sent with
#: sendfile (asyncio's own fallback reads 256 KiB at a time too).
_COPY_CHUNK = 256 * 1024


async def _copy_records(writer: _Connection, fd: int, position: int, length: int) -> None:
    """Send `length` bytes of a segment from `position` by reading and writing them
    in chunks, waiting for the transport between chunks: the fallback for loops
    without sendfile, which holds one chunk in memory rather than a whole fetch."""
    end = position + length
    while position < end:
        n = min(_COPY_CHUNK, end - position)
        writer.write(_pread_exactly(fd, position, n))
        position += n
        if position < end:
            await writer.drain()


def _as_file(fd: int) -> IO[bytes]:
    # loop.sendfile and its fallback use fileno(), seek() and readinto() (see _FdFile).
    return cast("IO[bytes]", _FdFile(fd))


# Requests read ahead of the one being processed before reading pauses.
_MAX_QUEUED = 32
#: Deferred responses (acks=all produces waiting for replication) per connection
#: before the connection's next request waits. Java producers keep 5 in flight;
#: librdkafka without idempotence up to a million, and with linger.ms=0 at 20 MB/s
#: it sends ~1,600 small requests a second: every request appended before a
#: follower's fetch completes in that one replication round, so the cap must cover
#: a round's worth of requests (at 8, requests queued behind it for 200 ms+). A
#: deferred response holds only its purgatory entry, not the request's bytes.
MAX_DEFERRED = 256
# The requests handled while earlier responses are deferred: Produce only (its
# appends keep their order); anything else sees the state after those responses.
_PIPELINED = frozenset({apis.PRODUCE.key})


#: How long a TLS client has, once it has sent its first byte, to complete its
#: handshake before it is disconnected and the failure logged. Kafka has no
#: handshake timeout (connections.max.idle.ms closes a stalled one), but here a
#: handshake under way holds the TLS transport's 256 KiB read buffer (asyncio's and
#: uvloop's SSLProtocol allocate it up front; Kafka's ~16 KiB packet buffers are far
#: smaller), so a slow or stalled handshake is bounded at 10 s rather than the
#: 10 min of connections.max.idle.ms. Before the first byte no TLS state exists and
#: a silent connection waits as long as connections.max.idle.ms allows, as in Kafka.
TLS_HANDSHAKE_TIMEOUT_S = 10.0

_SSL_NOISE = re.compile(r"^\[[A-Z0-9_]+: [A-Z0-9_]+\] | \(_ssl\.c:\d+\)$")


def _ssl_reason(exc: BaseException) -> str:
    """The cause of a failed handshake in a few words ("wrong version number",
    "certificate verify failed: unable to get local issuer certificate")."""
    if isinstance(exc, ssl.SSLCertVerificationError) and exc.verify_message:
        return f"certificate verify failed: {exc.verify_message}"
    if isinstance(exc, ssl.SSLError):
        text = exc.strerror if isinstance(exc.strerror, str) else str(exc)
        return _SSL_NOISE.sub("", text) or type(exc).__name__
    if isinstance(exc, ConnectionAbortedError | TimeoutError):
        return f"no handshake within {TLS_HANDSHAKE_TIMEOUT_S:g} s"
    return str(exc) or type(exc).__name__


def _forget_traceback(exc: BaseException) -> None:
    """Drop a failed handshake's traceback. On Python before 3.11.8/3.12.2
    asyncio's SSLProtocol keeps the exception in a local of the frame its
    traceback holds (CPython gh-109534): a reference cycle that keeps the
    connection's 256 KiB TLS buffers until a full garbage collection, so hostile
    handshakes grew the broker by tens of MiB. Without the traceback there is no
    cycle and they are freed at once."""
    exc.__traceback__ = None


def _listening_sockets(host: str, port: int) -> list[socket.socket]:
    """Non-blocking listening TCP sockets on every address `host` resolves to (every
    interface when empty; "localhost" is 127.0.0.1 and ::1), as loop.create_server
    binds them; with port 0 they share the port the first one got."""
    infos = socket.getaddrinfo(host or None, port, socket.AF_UNSPEC, socket.SOCK_STREAM,
                               0, socket.AI_PASSIVE)  # fmt: skip
    socks: list[socket.socket] = []
    seen: set[tuple[int, Any]] = set()
    try:
        for family, kind, proto, _, addr in infos:
            if (family, addr) in seen:
                continue
            seen.add((family, addr))
            sock = socket.socket(family, kind, proto)
            socks.append(sock)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            if family == socket.AF_INET6:
                # IPv4 has its own socket (as asyncio's servers do)
                sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
            if port == 0 and len(socks) > 1:
                addr = (addr[0], socks[0].getsockname()[1], *addr[2:])
            sock.bind(addr)
            sock.listen(100)
            sock.setblocking(False)
    except OSError:
        for sock in socks:
            sock.close()
        raise
    return socks


class _TlsListener:
    """A TLS listener. kt accepts its connections and runs each TLS handshake
    itself (loop.connect_accepted_socket) rather than letting the loop's server do
    it (create_server(ssl=...)): a handshake that fails there is dropped silently
    (asyncio logs it at DEBUG without the peer, uvloop not at all), and an
    operator must see plaintext on a TLS port, a handshake of garbage or a
    certificate from the wrong CA. Works alike on asyncio's loop and uvloop."""

    def __init__(
        self, net: NetworkServer, socks: list[socket.socket], security: ListenerSecurity
    ) -> None:
        self.net = net
        self.socks = socks
        self.security = security
        self.port: int = socks[0].getsockname()[1]
        self.accepting: list[asyncio.Task[None]] = []
        #: handshakes under way (their connections are not served yet)
        self.handshakes: set[asyncio.Task[None]] = set()

    def start_serving(self) -> None:
        """Start accepting (once)."""
        if not self.accepting:
            loop = asyncio.get_running_loop()
            self.accepting = [loop.create_task(self._accept(s)) for s in self.socks]

    async def _accept(self, listening: socket.socket) -> None:
        loop = asyncio.get_running_loop()
        while True:
            try:
                sock, addr = await loop.sock_accept(listening)
            except OSError as exc:
                # e.g. out of descriptors: wait a moment rather than spin, as
                # asyncio's own server does
                log.warning("cannot accept a connection on port %d: %s", self.port, exc)
                await asyncio.sleep(1.0)
                continue
            host = addr[0] if isinstance(addr, tuple) else "unknown"
            try:
                self._admit(loop, sock, host)
            except Exception:
                # one socket that cannot be set up (a peer already gone, a quota
                # error) must not end this task: the listener would stop accepting
                # for good, silently
                log.warning("cannot serve a connection from %s on port %d", host, self.port,
                            exc_info=True)  # fmt: skip
                sock.close()

    def _admit(self, loop: asyncio.AbstractEventLoop, sock: socket.socket, host: str) -> None:
        """Start the handshake of an accepted connection unless a quota refuses it."""
        # Nagle off, as on every connection loop.create_server accepts (asyncio
        # sets it itself only when the socket's proto says TCP): without it TLS
        # fetch responses wait for ACKs and consumers read at half speed.
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        refused = self.net.quotas.admit(host)
        if refused is not None:
            log.info("rejected a connection from %s: %s", host, refused)
            sock.close()
            return
        try:
            task = loop.create_task(self._handshake(sock, host))
        except BaseException:
            self.net.quotas.release(host)
            raise
        self.handshakes.add(task)
        task.add_done_callback(self.handshakes.discard)

    async def _first_byte(self, sock: socket.socket) -> bool:
        """Wait until the client sends something or hangs up; False when it stayed
        silent for connections.max.idle.ms (no limit when that is not positive)."""
        loop = asyncio.get_running_loop()
        ready: asyncio.Future[None] = loop.create_future()

        def readable() -> None:
            if not ready.done():
                ready.set_result(None)

        fd = sock.fileno()
        loop.add_reader(fd, readable)
        try:
            idle = self.net.idle_s
            async with asyncio.timeout(idle if idle > 0 else None):
                await ready
        except TimeoutError:
            return False
        finally:
            # before the TLS transport registers the descriptor itself
            loop.remove_reader(fd)
        return True

    async def _handshake(self, sock: socket.socket, host: str) -> None:
        """The server side of one TLS handshake; the connection is served (its
        connection_made called) once it succeeds. A failure is an authentication
        failure, logged as Kafka's Selector logs it (INFO, the client's address, no
        traceback) and counted; a peer that hangs up before completing one is no
        failure (port probes, health checks): DEBUG, as in Kafka; nor is one that
        sends nothing until connections.max.idle.ms closes it (TCP health checks)."""
        loop = asyncio.get_running_loop()
        conn = _Connection(self.net, self.security, preadmitted=True)
        try:
            if not await self._first_byte(sock):
                log.debug("connection from %s closed: nothing received within "
                          "connections.max.idle.ms", host)  # fmt: skip
                return
            await loop.connect_accepted_socket(
                lambda: conn, sock, ssl=self.security.ssl_context,
                ssl_handshake_timeout=TLS_HANDSHAKE_TIMEOUT_S,
            )  # fmt: skip
        except (ssl.SSLError, ConnectionAbortedError, TimeoutError) as exc:
            # ConnectionAbortedError: the handshake timed out
            self.net.failed_tls_handshakes += 1
            log.info("Failed authentication with /%s (SSL handshake failed: %s)",
                     host, _ssl_reason(exc))  # fmt: skip
            _forget_traceback(exc)
        except OSError as exc:
            log.debug("connection from %s closed during the TLS handshake: %s", host, exc)
            _forget_traceback(exc)
        finally:
            # still ours unless connection_made took the count over
            if conn.preadmitted:
                conn.preadmitted = False
                self.net.quotas.release(host)
                sock.close()

    def close(self) -> None:
        """Stop accepting; abandon the handshakes under way. The listening sockets
        are closed by `wait_closed` (or at once when never served)."""
        for task in [*self.accepting, *self.handshakes]:
            task.cancel()
        if not self.accepting:
            self._close_sockets()

    def _close_sockets(self) -> None:
        for sock in self.socks:
            sock.close()

    async def wait_closed(self) -> None:
        """Wait until the accepting tasks and the handshakes have ended, then close
        the listening sockets: a cancelled sock_accept removes its reader only when
        its task ends, and asyncio's selector must not hold a closed descriptor
        (a new socket could get its number)."""
        tasks = [*self.accepting, *self.handshakes]
        if tasks:
            await asyncio.gather(*tasks, return_exceptions=True)
        self._close_sockets()


class NetworkServer:
    """Listens on the configured listeners and serves connections."""

    def __init__(
        self,
        dispatcher: RequestDispatcher,
        max_request_size: int,
        idle_ms: int,
        quotas: ConnectionQuotas | None = None,
    ) -> None:
        # Answers each decoded request (handlers, services, the error path).
        self.dispatcher = dispatcher
        self.quotas = quotas if quotas is not None else ConnectionQuotas()
        self.max_request_size = max_request_size
        self.idle_s = idle_ms / 1000
        self.servers: list[asyncio.AbstractServer] = []
        self.tls_listeners: list[_TlsListener] = []
        self.connections: set[_Connection] = set()
        self._reaper: asyncio.Task[None] | None = None
        #: False once the loop said it has no sendfile (NotImplementedError)
        self.native_sendfile = True
        #: TLS handshakes that failed: authentication failures, each logged
        self.failed_tls_handshakes = 0
        handlers.load_all()

    async def start(
        self,
        host: str,
        port: int,
        *,
        serving: bool = True,
        security: ListenerSecurity | None = None,
    ) -> int:
        """Listen on host:port; return the bound port (useful with port 0). With
        `serving=False` the socket is bound (the port is ours) but connections are
        accepted only after `serve()`. `security`: the listener's TLS context and
        SASL settings (None: plaintext, anonymous)."""
        loop = asyncio.get_running_loop()
        if self._reaper is None:
            self._reaper = loop.create_task(self._reap_idle())
        if security is not None and security.ssl_context is not None:
            listener = _TlsListener(self, _listening_sockets(host, port), security)
            self.tls_listeners.append(listener)
            if serving:
                listener.start_serving()
            return listener.port
        server = await loop.create_server(
            lambda: _Connection(self, security), host or None, port, reuse_address=True,
            start_serving=serving,
        )  # fmt: skip
        self.servers.append(server)
        bound: int = server.sockets[0].getsockname()[1]
        return bound

    async def serve(self) -> None:
        """Start accepting on every bound listener."""
        for server in self.servers:
            await server.start_serving()
        for listener in self.tls_listeners:
            listener.start_serving()

    async def stop(self) -> None:
        """Stop listening and close every connection."""
        for s in self.servers:
            s.close()
        for tls in self.tls_listeners:
            tls.close()
        if self._reaper is not None:
            self._reaper.cancel()
        conns = list(self.connections)
        for c in conns:
            c.close()
        tasks = [c.task for c in conns if c.task is not None]
        for t in tasks:
            t.cancel()
        if tasks:
            await asyncio.gather(*tasks, return_exceptions=True)
        for s in self.servers:
            await s.wait_closed()
        for tls in self.tls_listeners:
            await tls.wait_closed()

    async def _reap_idle(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            await asyncio.sleep(min(self.idle_s / 2, 30.0))
            now = loop.time()
            for c in list(self.connections):
                if now - c.last_activity > self.idle_s and c.queue.empty() and not c.responses:
                    log.debug("connection %d from %s idle, closing", c.conn_id, c.host)
                    c.close()

    async def _run(self, conn: _Connection) -> None:
        try:
            await self._process_requests(conn)
        except asyncio.CancelledError:
            pass
        finally:
            # The processor also stops on a request it will not serve (unknown API
            # or version, CloseConnection; a handler's error is answered by the
            # dispatcher): close the connection at once. Responses
            # still deferred are dropped; their produces stay in the purgatory until
            # they complete or expire, as the appends are done either way.
            conn.close()
            writer = conn.writer_task
            if writer is not None:
                writer.cancel()
                await asyncio.gather(writer, return_exceptions=True)
            conn.responses.clear()

    async def _process_requests(self, conn: _Connection) -> None:
        host, conn_id, writer = conn.host, conn.conn_id, conn
        while True:
            req = await conn.queue.get()
            if req is None:
                return
            if conn.reading_paused and conn.queue.qsize() < _MAX_QUEUED // 2:
                conn.reading_paused = False
                if conn.transport is not None and not conn.closed:
                    conn.transport.resume_reading()
            if isinstance(req, _RawToken):
                assert conn.auth is not None
                if not await self._apply_raw(conn, conn.auth.on_raw_frame(req.data)):
                    return
                continue
            header = req.header
            auth = conn.auth
            if auth is not None:
                if not auth.complete and req.body is None:
                    # Kafka: an unsupported version before authentication is a close
                    log.info("closing connection %d from %s: API %s v%s before "
                             "authentication", conn_id, host, header.api_key,
                             header.api_version)  # fmt: skip
                    return
                step = auth.on_request(header.api_key, header.api_version, req.body)
                if auth.complete and auth.principal is not None:
                    conn.principal = auth.principal
                if not step.forward:
                    if not await self._written(conn, 0):
                        return
                    if not await self._apply(conn, req, step):
                        return
                    continue
            # Anything but a Produce is handled as Kafka would: once every earlier
            # response is out.
            pipelined = header.api_key in _PIPELINED
            if conn.responses and not pipelined and not await self._written(conn, 0):
                return
            if req.body is None:
                if header.api_key == apis.API_VERSIONS.key:
                    # An ApiVersions version we do not know: answer in v0 with the error
                    # and our ranges, so the client retries with a version we serve.
                    writer.write(
                        encode_response(18, 0, header.correlation_id, _api_versions_v0_error())
                    )
                    await writer.drain()
                    continue
                log.warning(
                    "closing connection %d from %s: unsupported API %s v%s",
                    conn_id, host, header.api_key, header.api_version,
                )  # fmt: skip
                await self._written(conn, 0)
                return
            if not self.dispatcher.serves(header.api_key):
                log.warning("closing connection %d: no handler for API %d", conn_id, header.api_key)
                return
            try:
                body = await self.dispatcher.dispatch(
                    header, req.body, host, conn_id, principal=conn.principal,
                    listener=conn.listener,
                )  # fmt: skip
            except CloseConnection as exc:
                log.info("closing connection %d from %s: %s", conn_id, host, exc)
                # The responses before this request still go out first.
                await self._written(conn, 0)
                return
            except Exception:
                # The dispatcher answers what handlers raise: this is a failure to
                # build the error response itself.
                log.exception("error handling %s v%d", header.api_key, header.api_version)
                await self._written(conn, 0)
                return
            if body is None:  # e.g. Produce with acks=0: no response at all
                continue
            if isinstance(body, DeferredResponse) or conn.responses:
                self._defer(conn, header, body)
                if not await self._written(conn, MAX_DEFERRED - 1, deferred=True):
                    return
                continue
            try:
                await self._send(writer, header, body)
            except ConnectionError:
                return
            except Exception:
                log.exception(
                    "cannot send the response to %s v%d", header.api_key, header.api_version
                )
                return

    async def _apply(self, conn: _Connection, req: Request, step: Step) -> bool:
        """Carry out an authentication step for a request; False to close."""
        if step.delay_s:
            # Kafka's connection.failed.authentication.delay.ms: slow down guessing
            await asyncio.sleep(step.delay_s)
        if step.log:
            log.info("%s", step.log)
        header = req.header
        try:
            if step.response is not None:
                await self._send(conn, header, step.response)
            elif step.error_code is not None and req.body is not None:
                response = error_response(header.api_key, header.api_version, req.body,
                                          ErrorCode(step.error_code), None)  # fmt: skip
                await self._send(conn, header, response)
        except ConnectionError:
            return False
        return not step.close

    async def _apply_raw(self, conn: _Connection, step: Step) -> bool:
        """Carry out a step of a v0 (raw token) exchange; False to close."""
        if step.delay_s:
            await asyncio.sleep(step.delay_s)
        if step.log:
            log.info("%s", step.log)
        if step.raw is not None:
            try:
                conn.write(struct.pack(">i", len(step.raw)) + step.raw)
                await conn.drain()
            except ConnectionError:
                return False
        if conn.auth is not None and conn.auth.complete and conn.auth.principal is not None:
            conn.principal = conn.auth.principal
        return not step.close

    def _defer(self, conn: _Connection, header: RequestHeader, body: Any) -> None:
        """Queue a response behind the deferred ones; the writer sends it in turn."""
        conn.responses.append((header, body))
        if isinstance(body, DeferredResponse):
            conn.deferred += 1
        if conn.writer_task is None:
            conn.writer_task = asyncio.get_running_loop().create_task(self._write_responses(conn))

    async def _written(self, conn: _Connection, at_most: int, *, deferred: bool = False) -> bool:
        """Wait until at most `at_most` responses (deferred ones only, with
        `deferred`) wait to be sent; False when the writer stopped without sending
        them all (the connection is closing)."""
        while (conn.deferred if deferred else len(conn.responses)) > at_most:
            if conn.writer_task is None or conn.closed:
                return False
            conn.written.clear()
            await conn.written.wait()
        return True

    async def _write_responses(self, conn: _Connection) -> None:
        """Send the queued responses in request order, each once it is ready."""
        try:
            while conn.responses:
                header, body = conn.responses[0]
                if isinstance(body, DeferredResponse):
                    body = await body.result()
                    conn.deferred -= 1
                await self._send(conn, header, body)
                conn.responses.popleft()
                conn.written.set()
        except ConnectionError:
            conn.close()
        except asyncio.CancelledError:
            raise
        except Exception:
            header = conn.responses[0][0]
            log.exception("cannot answer %s v%d", header.api_key, header.api_version)
            conn.close()
        finally:
            conn.writer_task = None
            conn.written.set()

    async def _send(self, writer: _Connection, h: RequestHeader, body: Any) -> None:
        from kt.protocol.headers import encode_response_parts
        from kt.protocol.regions import ExternalRecords

        parts = encode_response_parts(h.api_key, h.api_version, h.correlation_id, body)
        if len(parts) == 1 and isinstance(parts[0], bytes | bytearray):
            writer.write(parts[0])
            await writer.drain()
            return
        external = sum(p.length for p in parts if isinstance(p, ExternalRecords))
        if external <= COPY_RECORDS_MAX:
            # Small records: copied, and the frame leaves in one write.
            writer.write(
                b"".join(
                    _pread_exactly(p.source[0], p.source[1], p.length)
                    if isinstance(p, ExternalRecords)
                    else p
                    for p in parts
                )
            )
            await writer.drain()
            return
        loop = asyncio.get_running_loop()
        for part in parts:
            if isinstance(part, ExternalRecords):
                if part.length == 0:
                    continue  # loop.sendfile would read a count of 0 as "to the end"
                fd, position = part.source
                await writer.drain()
                if self.native_sendfile:
                    try:
                        assert writer.transport is not None
                        await loop.sendfile(writer.transport, _as_file(fd), position, part.length)
                        continue
                    except NotImplementedError:
                        # A loop without sendfile (uvloop) raises before sending
                        # anything: copy from now on, as asyncio's own fallback does.
                        log.info("this event loop has no sendfile: fetched records are copied")
                        self.native_sendfile = False
                    except RuntimeError:
                        # the transport cannot sendfile now (e.g. closing); copy
                        pass
                await _copy_records(writer, fd, position, part.length)
            else:
                writer.write(part)
        await writer.drain()


def _api_versions_v0_error() -> Any:
    return apis.API_VERSIONS.response(
        error_code=ErrorCode.UNSUPPORTED_VERSION,
        api_keys=[
            {"api_key": k, "min_version": lo, "max_version": hi}
            for k, (lo, hi) in sorted(handlers.SERVED.items())
        ],
    )
