"""The loopback proxies: open forwards, blackhole holds bytes until healed, refuse
resets connections."""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from .proxy import ProxySet, socket_owner


@pytest.fixture
def echo_port() -> Iterator[int]:
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(8)
    stop = threading.Event()

    def serve() -> None:
        srv.settimeout(0.2)
        while not stop.is_set():
            try:
                conn, _ = srv.accept()
            except OSError:
                continue

            def echo(c: socket.socket = conn) -> None:
                with c, contextlib.suppress(OSError):  # the proxy may reset us
                    while data := c.recv(4096):
                        c.sendall(data)

            threading.Thread(target=echo, daemon=True).start()

    t = threading.Thread(target=serve, daemon=True)
    t.start()
    yield srv.getsockname()[1]
    stop.set()
    t.join(2)
    srv.close()


@pytest.fixture
def proxies() -> Iterator[ProxySet]:
    ps = ProxySet()
    yield ps
    ps.close()


def roundtrip(port: int, payload: bytes, timeout: float = 2.0) -> bytes:
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
        s.sendall(payload)
        return s.recv(4096)


def closed_at_once(port: int) -> bool:
    """True when a new connection is closed or reset before any answer (the reset may
    come during the connect itself)."""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=2) as s:
            s.sendall(b"z")
            return s.recv(10) == b""
    except (ConnectionResetError, BrokenPipeError):
        return True


def test_open_forwards(echo_port: int, proxies: ProxySet) -> None:
    link = proxies.add("x", echo_port)
    assert roundtrip(link.listen_port, b"hello") == b"hello"


def test_blackhole_holds_until_healed(echo_port: int, proxies: ProxySet) -> None:
    link = proxies.add("x", echo_port)
    with socket.create_connection(("127.0.0.1", link.listen_port), timeout=2) as s:
        s.sendall(b"a")
        assert s.recv(10) == b"a"
        proxies.set_mode("x", "blackhole")
        s.sendall(b"b")
        s.settimeout(0.5)
        with pytest.raises(TimeoutError):
            s.recv(10)
        proxies.set_mode("x", "open")
        s.settimeout(2)
        assert s.recv(10) == b"b"  # held, not lost: TCP retransmits across a short cut


def test_refuse_resets_existing_and_new_connections(echo_port: int, proxies: ProxySet) -> None:
    link = proxies.add("x", echo_port)
    with socket.create_connection(("127.0.0.1", link.listen_port), timeout=2) as s:
        s.sendall(b"a")
        assert s.recv(10) == b"a"
        proxies.set_mode("x", "refuse")
        try:
            got = s.recv(10)
        except ConnectionResetError:
            got = b""
        assert got == b""
    assert closed_at_once(link.listen_port)
    proxies.heal()
    assert roundtrip(link.listen_port, b"again") == b"again"


def test_deny_cuts_one_source_only(echo_port: int) -> None:
    # sockets of this process are "self"; a child process is unknown and passes
    ps = ProxySet(identify=lambda port: socket_owner(port, {os.getpid(): "self"}))
    try:
        link = ps.add("x", echo_port)
        with socket.create_connection(("127.0.0.1", link.listen_port), timeout=2) as s:
            s.sendall(b"a")
            assert s.recv(10) == b"a"
            ps.deny("x", {"self"})
            try:
                got = s.recv(10)
            except ConnectionResetError:
                got = b""
            assert got == b""
        assert closed_at_once(link.listen_port)
        child = subprocess.run(
            [sys.executable, "-c", CHILD_ROUNDTRIP, str(link.listen_port)],
            capture_output=True,
            text=True,
            timeout=20,
        )
        assert child.stdout.strip() == "other", child.stderr
        ps.heal()
        assert roundtrip(link.listen_port, b"again") == b"again"
    finally:
        ps.close()


CHILD_ROUNDTRIP = """
import socket, sys
with socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=5) as s:
    s.sendall(b"other")
    print(s.recv(10).decode())
"""


def test_socket_owner_skips_a_closed_connection_on_the_same_port(
    echo_port: int, tmp_path: Path
) -> None:
    """A port reused while its previous connection lingers in TIME_WAIT (a row with
    inode 0 in /proc/net/tcp, possibly listed first) still finds the live socket's
    owner: busy runs reuse ports."""
    with socket.create_connection(("127.0.0.1", echo_port), timeout=2) as live:
        port = live.getsockname()[1]
        with open("/proc/net/tcp") as fh:
            lines = fh.readlines()
        # the live row (earlier connections on this port may linger in TIME_WAIT)
        (row,) = [ln for ln in lines[1:]
                  if ln.split()[1] == f"0100007F:{port:04X}" and ln.split()[9] != "0"]  # fmt: skip
        cols = row.split()
        stale = cols.copy()
        stale[3], stale[9] = "06", "0"  # TIME_WAIT, no inode
        table = tmp_path / "tcp"
        table.write_text(lines[0] + " ".join(stale) + "\n" + row)
        assert socket_owner(port, {os.getpid(): "self"}, (str(table),)) == "self"
