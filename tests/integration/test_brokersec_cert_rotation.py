"""Certificate rotation without a restart (KIP-226) in a real broker: `kt configs
alter` sets listener.name.ssl.ssl.keystore.location, new TLS connections get the new
certificate while the broker keeps serving; an incompatible keystore is refused."""

from __future__ import annotations

import socket
import ssl
import subprocess
import time
from typing import Any

import pytest
from broker_harness import KT, BrokerProcess, free_port
from brokersec_certs import CA
from cryptography import x509

pytestmark = pytest.mark.integration


def _served_serial(port: int, cafile: str) -> int:
    ctx = ssl.create_default_context(cafile=cafile)
    with socket.create_connection(("127.0.0.1", port), timeout=10) as raw, ctx.wrap_socket(
        raw, server_hostname="localhost"
    ) as tls:  # fmt: skip
        der = tls.getpeercert(binary_form=True)
    assert der is not None
    return x509.load_der_x509_certificate(der).serial_number


def test_keystore_rotation(tmp_path: Any) -> None:
    ca = CA()
    old = ca.write(tmp_path, "old", ca.issue("CN=broker1", ("localhost", "127.0.0.1")))
    new_cert = ca.issue("CN=broker1", ("localhost", "127.0.0.1"))
    new = ca.write(tmp_path, "new", new_cert)
    other = ca.write(tmp_path, "other", ca.issue("CN=someone-else", ("localhost", "127.0.0.1")))
    port, tls_port = free_port(), free_port()
    b = BrokerProcess(tmp_path / "data", port, {
        "listeners": f"PLAINTEXT://127.0.0.1:{port},SSL://127.0.0.1:{tls_port}",
        "listener.name.ssl.ssl.keystore.type": "PEM",
        "listener.name.ssl.ssl.keystore.location": str(old["pem"]),
    }).start(timeout=60)  # fmt: skip
    try:
        cafile = str(old["ca"])
        before = _served_serial(tls_port, cafile)

        def alter(location: str) -> subprocess.CompletedProcess[str]:
            return subprocess.run(
                [KT, "configs", "alter", "--entity-type", "brokers", "--entity-name", "1",
                 "--add-config", f"listener.name.ssl.ssl.keystore.location={location}",
                 "-b", b.bootstrap], capture_output=True, text=True, timeout=60)  # fmt: skip

        refused = alter(str(other["pem"]))
        assert refused.returncode == 1
        assert "Keystore DistinguishedName does not match" in refused.stderr
        r = alter(str(new["pem"]))
        assert r.returncode == 0, r.stderr
        deadline = time.monotonic() + 30
        while _served_serial(tls_port, cafile) != new_cert.cert.serial_number:
            assert time.monotonic() < deadline, b.log()[-2000:]
            time.sleep(0.2)
        assert before != new_cert.cert.serial_number
        assert "the new keystore/truststore serves new connections" in b.log()
    finally:
        assert b.stop() == 0
