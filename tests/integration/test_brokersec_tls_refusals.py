"""Failed TLS handshakes on a `kt broker`'s TLS listeners, on asyncio's loop and on
uvloop: plaintext Kafka bytes on the TLS port, a handshake of garbage, a client
certificate from another CA and a client without a certificate on a listener with
`ssl.client.auth=required`. Each is refused, logged once as Kafka's Selector logs
it (`Failed authentication with /127.0.0.1 (SSL handshake failed...)`, INFO, no
traceback), a peer that connects and hangs up is not logged as a failure, the
broker keeps serving, and hundreds of refusals leave its memory flat."""

from __future__ import annotations

import os
import socket
import ssl
import struct
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from broker_harness import BrokerProcess, free_port
from brokersec_certs import CA

pytestmark = pytest.mark.integration

FAILED = "Failed authentication with /127.0.0.1 (SSL handshake failed"


class TlsBroker:
    """A broker with an SSL (mTLS required) listener and the client files."""

    def __init__(self, broker: BrokerProcess, ssl_port: int, files: dict[str, Path]) -> None:
        self.broker = broker
        self.ssl_port = ssl_port
        self.files = files


@pytest.fixture(scope="module", params=["asyncio", "uvloop"])
def tls_broker(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[TlsBroker]:
    loop_name: str = request.param
    tmp = tmp_path_factory.mktemp(f"tls-{loop_name}")
    ca, other = CA(), CA("CN=another-ca")
    sfiles = ca.write(tmp, "server", ca.issue("CN=broker1", ("localhost", "127.0.0.1")))
    good = ca.write(tmp, "good", ca.issue("CN=dave"))
    (tmp / "other").mkdir()
    bad = other.write(tmp / "other", "bad", other.issue("CN=mallory"))
    plain, tls = free_port(), free_port()
    overrides = {
        "listeners": f"PLAINTEXT://127.0.0.1:{plain},SSL://127.0.0.1:{tls}",
        "ssl.keystore.type": "PEM",
        "ssl.keystore.location": str(sfiles["pem"]),
        "ssl.truststore.type": "PEM",
        "ssl.truststore.location": str(sfiles["ca"]),
        "ssl.client.auth": "required",
        "num.partitions": "1",
    }
    saved = os.environ.get("KT_EVENT_LOOP")
    os.environ["KT_EVENT_LOOP"] = loop_name  # the broker inherits it at start
    try:
        broker = BrokerProcess(tmp / "data", plain, overrides).start(timeout=60)
    finally:
        if saved is None:
            del os.environ["KT_EVENT_LOOP"]
        else:
            os.environ["KT_EVENT_LOOP"] = saved
    assert f"event loop: {loop_name}" in broker.log()
    files = {"ca": sfiles["ca"], "good": good["pem"], "bad": bad["pem"]}
    yield TlsBroker(broker, tls, files)
    assert broker.stop() == 0
    assert "Traceback" not in broker.log()


def _api_versions() -> bytes:
    client = b"t"
    body = struct.pack(">hhih", 18, 0, 1, len(client)) + client
    return struct.pack(">i", len(body)) + body


def _closed_without_answer(sock: socket.socket) -> bool:
    sock.settimeout(30)
    try:
        return sock.recv(4096) == b""
    except (ConnectionResetError, ssl.SSLError):
        return True


def _plaintext_frame(b: TlsBroker) -> None:
    with socket.create_connection(("127.0.0.1", b.ssl_port), timeout=30) as sock:
        sock.sendall(_api_versions())
        assert _closed_without_answer(sock)


def _garbage(b: TlsBroker) -> None:
    with socket.create_connection(("127.0.0.1", b.ssl_port), timeout=30) as sock:
        sock.sendall(b"\x16\x03\x01\x00\x05garbage" * 10)
        assert _closed_without_answer(sock)


def _tls_client(b: TlsBroker, cert: str | None) -> bool:
    """A TLS client (with `cert`'s key pair, or none) asks ApiVersions; True when
    the broker answered."""
    ctx = ssl.create_default_context(cafile=str(b.files["ca"]))
    if cert is not None:
        ctx.load_cert_chain(str(b.files[cert]))
    try:
        with (
            socket.create_connection(("127.0.0.1", b.ssl_port), timeout=30) as raw,
            ctx.wrap_socket(raw, server_hostname="localhost") as sock,
        ):
            sock.sendall(_api_versions())
            head = sock.recv(4)
            return len(head) == 4
    except (ssl.SSLError, ConnectionResetError, BrokenPipeError):
        return False


def _other_ca(b: TlsBroker) -> None:
    assert not _tls_client(b, "bad")


def _no_cert(b: TlsBroker) -> None:
    assert not _tls_client(b, None)


def _count(b: TlsBroker) -> int:
    return b.broker.log().count(FAILED)


def _wait_count(b: TlsBroker, n: int) -> None:
    deadline = time.monotonic() + 30
    while _count(b) < n:
        assert time.monotonic() < deadline, b.broker.log()[-3000:]
        time.sleep(0.05)


@pytest.mark.parametrize(
    ("attempt", "reason"),
    [
        (_plaintext_frame, "wrong version number"),
        (_garbage, ""),
        (_other_ca, "certificate verify failed"),
        (_no_cert, "certificate"),
    ],
    ids=["plaintext-kafka-frame", "garbage", "cert-from-another-ca", "no-client-cert"],
)
def test_a_failed_handshake_is_logged_once_with_the_address(
    tls_broker: TlsBroker, attempt: Callable[[TlsBroker], None], reason: str
) -> None:
    before = _count(tls_broker)
    attempt(tls_broker)
    _wait_count(tls_broker, before + 1)
    assert _tls_client(tls_broker, "good")  # still serving, over TLS too
    lines = [ln for ln in tls_broker.broker.log().splitlines() if FAILED in ln]
    assert len(lines) == before + 1  # exactly one line for the refusal
    assert reason in lines[-1], lines[-1]
    assert "INFO" in lines[-1] or "info" in lines[-1].lower()
    assert "Traceback" not in tls_broker.broker.log()


def test_a_peer_that_hangs_up_is_no_authentication_failure(tls_broker: TlsBroker) -> None:
    before = _count(tls_broker)
    for _ in range(5):
        socket.create_connection(("127.0.0.1", tls_broker.ssl_port), timeout=30).close()
    _garbage(tls_broker)  # a marker: its line comes after the hang-ups were handled
    _wait_count(tls_broker, before + 1)
    assert _count(tls_broker) == before + 1


def _rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise AssertionError(f"no VmRSS for {pid}")


def test_hundreds_of_failed_handshakes_keep_memory_flat(tls_broker: TlsBroker) -> None:
    proc = tls_broker.broker.proc
    assert proc is not None
    attempts = [_plaintext_frame, _garbage, _other_ca, _no_cert]

    def round_of(n: int) -> None:
        with ThreadPoolExecutor(8) as pool:
            futures = [pool.submit(fn, tls_broker) for _ in range(n) for fn in attempts]
            for f in futures:
                f.result(timeout=120)

    start = _count(tls_broker)
    round_of(25)  # warm-up
    before = _rss_kib(proc.pid)
    round_of(60)  # 240 more
    _wait_count(tls_broker, start + 340)
    after = _rss_kib(proc.pid)
    assert after - before < 6 * 1024, (before, after)
    assert _count(tls_broker) == start + 340
    assert _tls_client(tls_broker, "good")
    assert proc.poll() is None
