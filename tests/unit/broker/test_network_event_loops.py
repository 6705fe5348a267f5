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


def test_tls_listener_logs_a_failed_handshake_and_serves_with_nagle_off(
    run: Callable[[Any], Any], tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """kt runs the TLS handshake of each connection itself: a failure is counted
    and logged once at INFO with the peer's address (the loops' own TLS servers
    drop it), a good client is served, and accepted sockets have TCP_NODELAY (as
    loop.create_server's do; without it consumers read at half speed)."""
    import ssl

    security, ca_file = _tls_listener(tmp_path)

    async def go() -> tuple[int, list[int]]:
        loop = asyncio.get_running_loop()
        server = NetworkServer(RequestDispatcher(HandlerServices.only(), {}), 1 << 20, 60_000)
        port = await server.start("127.0.0.1", 0, security=security)

        def garbage() -> bytes:
            with socket.create_connection(("127.0.0.1", port), timeout=30) as sock:
                sock.sendall(b"\x16\x03\x01\x00\x05garbage" * 10)
                return sock.recv(100)

        assert await loop.run_in_executor(None, garbage) == b""
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
    assert lines == [
        "Failed authentication with /127.0.0.1 (SSL handshake failed: "
        + lines[0].split("SSL handshake failed: ", 1)[1]
    ]
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
