"""The broker's network layer on any asyncio event loop (issue 19, §3).

With uvloop installed, `kt broker start` ran on it and reset every connection:
`connection_made` asserted `isinstance(transport, asyncio.Transport)`, which uvloop's
transports are not. Transports are now checked for the methods used; and uvloop has
no `loop.sendfile` (it raises NotImplementedError), so fetched records are copied
in chunks there. Each test runs on asyncio's loop and, when installed, uvloop.
"""

from __future__ import annotations

import asyncio
import os
import socket
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from kt.broker import network
from kt.broker.dispatcher import RequestDispatcher
from kt.broker.network import NetworkServer, _Connection
from kt.broker.services import HandlerServices
from kt.protocol.headers import RequestHeader
from kt.protocol.regions import ExternalRecords


def _uvloop_factory() -> Callable[[], asyncio.AbstractEventLoop]:
    uvloop = pytest.importorskip("uvloop")
    return uvloop.new_event_loop  # type: ignore[no-any-return]


LOOPS = {
    "asyncio": lambda: asyncio.new_event_loop,
    "uvloop": _uvloop_factory,
}


@pytest.fixture(params=sorted(LOOPS))
def run(request: pytest.FixtureRequest) -> Callable[[Any], Any]:
    factory = LOOPS[request.param]()

    def runner(coro: Any) -> Any:
        with asyncio.Runner(loop_factory=factory) as r:
            return r.run(coro)

    return runner


class DuckTransport:
    """A stream transport that is no asyncio.Transport (as uvloop's are not)."""

    def __init__(self) -> None:
        self.closed = False
        self.written = bytearray()

    def write(self, data: bytes) -> None:
        self.written += data

    def pause_reading(self) -> None: ...
    def resume_reading(self) -> None: ...

    def is_closing(self) -> bool:
        return self.closed

    def close(self) -> None:
        self.closed = True

    def abort(self) -> None:
        self.closed = True

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return ("127.0.0.1", 40000) if name == "peername" else default


class Half:
    """Not a stream transport: it cannot write."""

    def __init__(self) -> None:
        self.closed = False

    def close(self) -> None:
        self.closed = True


def test_a_transport_is_accepted_by_what_it_can_do(run: Callable[[Any], Any]) -> None:
    async def go() -> None:
        server = NetworkServer(RequestDispatcher(HandlerServices.only(), {}), 1 << 20, 60_000)
        conn = _Connection(server)
        t = DuckTransport()
        assert not isinstance(t, asyncio.Transport)
        conn.connection_made(t)  # type: ignore[arg-type]
        assert conn.admitted and conn.task is not None and conn in server.connections
        assert conn.host == "127.0.0.1"
        conn.eof_received()
        await conn.task
        assert t.closed  # the processor closed it at the end of the stream
        conn.connection_lost(None)

        half = Half()
        other = _Connection(server)
        other.connection_made(half)  # type: ignore[arg-type]
        assert half.closed and other.closed and not other.admitted and other.task is None

    run(go())


def test_records_are_copied_on_a_loop_without_sendfile(
    run: Callable[[Any], Any], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Large enough for the sendfile path (COPY_RECORDS_MAX) and several copy chunks.
    data = os.urandom(3 * network._COPY_CHUNK + 12345)
    path = tmp_path / "segment.log"
    path.write_bytes(b"x" * 100 + data)
    fd = os.open(path, os.O_RDONLY)
    parts = [b"head", ExternalRecords(len(data), (fd, 100)), b"tail"]
    monkeypatch.setattr("kt.protocol.headers.encode_response_parts", lambda *a: parts)

    async def go() -> tuple[bytes, bool]:
        loop = asyncio.get_running_loop()
        if type(loop).sendfile is asyncio.AbstractEventLoop.sendfile:
            pass  # uvloop: no sendfile of its own, the real case
        else:

            async def no_sendfile(*args: object, **kwargs: object) -> int:
                raise NotImplementedError

            monkeypatch.setattr(loop, "sendfile", no_sendfile)
        server = NetworkServer(RequestDispatcher(HandlerServices.only(), {}), 1 << 20, 60_000)
        a, b = socket.socketpair()
        transport, conn = await loop.create_connection(lambda: _Connection(server), sock=a)
        b.setblocking(True)

        def drain_b() -> bytes:
            got = bytearray()
            while chunk := b.recv(65536):
                got += chunk
            return bytes(got)

        reader = loop.run_in_executor(None, drain_b)
        header = RequestHeader(1, 12, 7, "t")
        await server._send(conn, header, object())
        await server._send(conn, header, object())  # the second knows: no sendfile
        transport.close()
        got = await reader
        b.close()
        await server.stop()
        return got, server.native_sendfile

    try:
        got, native = run(go())
    finally:
        os.close(fd)
    frame = b"head" + data + b"tail"
    assert got == frame + frame
    assert native is False


def _tls_listener(tmp: Path) -> tuple[Any, Path]:
    """An SSL listener's security (a PEM keystore of a throwaway CA) and the CA file."""
    from brokersec_certs import CA

    from kt.broker.security.listener_security import build_listener_security
    from kt.broker.security.listeners import EndPoint

    ca = CA()
    files = ca.write(tmp, "server", ca.issue("CN=broker1", ("localhost", "127.0.0.1")))
    props = {"ssl.keystore.type": "PEM", "ssl.keystore.location": str(files["pem"])}
    return build_listener_security(props, EndPoint("SSL", "127.0.0.1", 0, "SSL")), files["ca"]


#: What a client sends in place of a TLS handshake, and the reason the failure
#: must be logged with (OpenSSL's own words).
_NOT_TLS = {
    # a TLS record header of a handshake whose message is garbage
    "garbage": (b"\x16\x03\x01\x00\x05garbage" * 10, "unexpected message"),
    # a plaintext Kafka ApiVersions v0 request on the TLS port
    "plaintext": (
        b"\x00\x00\x00\x0e\x00\x12\x00\x00\x00\x00\x00\x01\x00\x04kcat",
        "wrong version number",
    ),
}


@pytest.mark.parametrize("sent", sorted(_NOT_TLS))
def test_tls_listener_logs_a_failed_handshake_and_serves_with_nagle_off(
    run: Callable[[Any], Any], tmp_path: Path, caplog: pytest.LogCaptureFixture, sent: str
) -> None:
    """kt runs the TLS handshake of each connection itself: a failure is counted
    and logged once at INFO with the peer's address and OpenSSL's reason (the loops'
    own TLS servers drop it), a good client is served, and accepted sockets have
    TCP_NODELAY (as loop.create_server's do; without it consumers read at half
    speed)."""
    import ssl

    security, ca_file = _tls_listener(tmp_path)
    payload, reason = _NOT_TLS[sent]

    async def go() -> tuple[int, list[int]]:
        loop = asyncio.get_running_loop()
        server = NetworkServer(RequestDispatcher(HandlerServices.only(), {}), 1 << 20, 60_000)
        port = await server.start("127.0.0.1", 0, security=security)

        def not_tls() -> bytes:
            with socket.create_connection(("127.0.0.1", port), timeout=30) as sock:
                sock.sendall(payload)
                return sock.recv(100)

        assert await loop.run_in_executor(None, not_tls) == b""
        ctx = ssl.create_default_context(cafile=str(ca_file))
        _reader, writer = await asyncio.open_connection(
            "127.0.0.1", port, ssl=ctx, server_hostname="localhost"
        )
        async with asyncio.timeout(30):
            while not server.connections:  # connection_made runs after the handshake
                await asyncio.sleep(0.01)
        nodelay = [
            c.transport.get_extra_info("socket").getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY)
            for c in server.connections
            if c.transport is not None
        ]
        writer.close()
        failed = server.failed_tls_handshakes
        await server.stop()
        return failed, nodelay

    with caplog.at_level("INFO", logger="kt.broker.network"):
        failed, nodelay = run(go())
    assert failed == 1
    assert nodelay and all(nodelay)
    lines = [r.getMessage() for r in caplog.records if "SSL handshake failed" in r.getMessage()]
    assert len(lines) == 1, lines
    assert lines[0] == f"Failed authentication with /127.0.0.1 (SSL handshake failed: {reason})"
    assert all(r.exc_info is None for r in caplog.records)


def test_a_tls_listener_on_localhost_listens_on_each_of_its_addresses(
    run: Callable[[Any], Any], tmp_path: Path
) -> None:
    """As loop.create_server binds a name: every address "localhost" resolves to
    (127.0.0.1, and ::1 where the machine has IPv6) on one port."""
    security, _ = _tls_listener(tmp_path)
    addresses = {
        info[4][0]
        for info in socket.getaddrinfo("localhost", 0, socket.AF_UNSPEC, socket.SOCK_STREAM)
    }

    async def go() -> set[str]:
        server = NetworkServer(RequestDispatcher(HandlerServices.only(), {}), 1 << 20, 60_000)
        port = await server.start("localhost", 0, security=security)
        reached = set()
        for address in addresses:
            _reader, writer = await asyncio.open_connection(address, port)
            reached.add(address)
            writer.close()
        await server.stop()
        return reached

    assert run(go()) == addresses
    assert "127.0.0.1" in addresses


def test_a_connection_that_cannot_be_set_up_does_not_stop_the_tls_listener(
    run: Callable[[Any], Any],
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """An error while setting up one accepted connection (here the connection quota
    raising) closes that socket and is logged; the listener goes on accepting (the
    error used to end its accepting task: the port stayed open, nothing answered)."""
    import ssl

    security, ca_file = _tls_listener(tmp_path)

    async def go() -> tuple[bytes, int]:
        loop = asyncio.get_running_loop()
        server = NetworkServer(RequestDispatcher(HandlerServices.only(), {}), 1 << 20, 60_000)
        admit = server.quotas.admit
        calls = []

        def failing_once(host: str) -> str | None:
            calls.append(host)
            if len(calls) == 1:
                raise RuntimeError("injected")
            return admit(host)

        monkeypatch.setattr(server.quotas, "admit", failing_once)
        port = await server.start("127.0.0.1", 0, security=security)

        def first() -> bytes:
            with socket.create_connection(("127.0.0.1", port), timeout=30) as sock:
                return sock.recv(100)  # b"": closed by the broker

        closed = await loop.run_in_executor(None, first)
        ctx = ssl.create_default_context(cafile=str(ca_file))
        async with asyncio.timeout(30):
            _reader, writer = await asyncio.open_connection(
                "127.0.0.1", port, ssl=ctx, server_hostname="localhost"
            )
            while not server.connections:
                await asyncio.sleep(0.01)
        served = len(server.connections)
        writer.close()
        await server.stop()
        return closed, served

    with caplog.at_level("WARNING", logger="kt.broker.network"):
        closed, served = run(go())
    assert closed == b""
    assert served == 1
    warnings = [r for r in caplog.records if "cannot serve a connection" in r.getMessage()]
    assert len(warnings) == 1 and warnings[0].exc_info is not None
    assert "injected" in str(warnings[0].exc_info[1])


def test_a_silent_tls_client_is_no_failed_authentication(
    run: Callable[[Any], Any],
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A client that connects and sends nothing (a TCP health check) is closed after
    connections.max.idle.ms, logged at DEBUG and not counted; one that starts a
    handshake and stalls is a failed authentication (INFO, counted)."""
    monkeypatch.setattr(network, "TLS_HANDSHAKE_TIMEOUT_S", 0.5)
    security, _ = _tls_listener(tmp_path)

    async def go() -> tuple[int, int]:
        loop = asyncio.get_running_loop()
        # connections.max.idle.ms=300: how long a silent client is kept
        server = NetworkServer(RequestDispatcher(HandlerServices.only(), {}), 1 << 20, 300)
        port = await server.start("127.0.0.1", 0, security=security)

        def client(send: bytes) -> bytes:
            with socket.create_connection(("127.0.0.1", port), timeout=30) as sock:
                sock.sendall(send)
                return sock.recv(100)  # b"" once the broker closes it

        assert await loop.run_in_executor(None, client, b"") == b""
        silent = server.failed_tls_handshakes
        # the first 5 bytes of a record header: the handshake never completes
        assert await loop.run_in_executor(None, client, b"\x16\x03\x01\x02\x00") == b""
        stalled = server.failed_tls_handshakes
        await server.stop()
        return silent, stalled

    with caplog.at_level("DEBUG", logger="kt.broker.network"):
        silent, stalled = run(go())
    assert (silent, stalled) == (0, 1)
    info = [r.getMessage() for r in caplog.records if r.levelname == "INFO"]
    assert info == [
        "Failed authentication with /127.0.0.1 (SSL handshake failed: no handshake within 0.5 s)"
    ]
    debug = [r.getMessage() for r in caplog.records if r.levelname == "DEBUG"]
    assert any("nothing received within connections.max.idle.ms" in m for m in debug), debug


def test_tls_listener_closes_its_sockets_once_no_longer_watched(
    run: Callable[[Any], Any], tmp_path: Path
) -> None:
    """On stop the listening sockets are closed after their accepting tasks ended,
    not while the loop still watches them (asyncio's selector would hold a closed
    descriptor, whose number a new socket can get)."""
    security, _ = _tls_listener(tmp_path)

    async def go() -> list[bool]:
        loop = asyncio.get_running_loop()
        server = NetworkServer(RequestDispatcher(HandlerServices.only(), {}), 1 << 20, 60_000)
        await server.start("127.0.0.1", 0, security=security)
        await asyncio.sleep(0)  # the accepting task waits in sock_accept
        listener = server.tls_listeners[0]
        watched: list[bool] = []

        class Spy:
            def __init__(self, sock: socket.socket) -> None:
                self.sock = sock

            def close(self) -> None:
                watched.append(loop.remove_reader(self.sock.fileno()))
                self.sock.close()

        listener.socks = [Spy(s) for s in listener.socks]  # type: ignore[misc]
        await server.stop()
        return watched

    watched = run(go())
    assert watched and not any(watched)
