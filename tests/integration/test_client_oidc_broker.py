"""OAUTHBEARER the production way (KIP-768) end to end: an OIDC token endpoint started
here issues RS256 tokens (client-credentials grant), kt's broker validates them
against the JWKS, and kt's client fetches a token, authenticates, and before the
session ends (the token's `exp`) fetches a fresh one and re-authenticates."""

from __future__ import annotations

import asyncio
import base64
import json
import os
import subprocess
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path
from typing import Any

import pytest
from broker_harness import KT, BrokerProcess, free_port

jwt = pytest.importorskip("jwt")

from cryptography.hazmat.primitives.asymmetric import rsa  # noqa: E402

pytestmark = pytest.mark.integration

ISSUER = "https://idp.kt.test"
LIFETIME = 8  # seconds: short, so the test sees a refresh and a re-authentication


class Idp:
    """A token endpoint (client-credentials grant) signing RS256 JWTs, and its JWKS."""

    def __init__(self, tmp: Path) -> None:
        self.key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        jwk = json.loads(jwt.algorithms.RSAAlgorithm.to_jwk(self.key.public_key()))
        jwk |= {"kid": "k1", "use": "sig", "alg": "RS256"}
        self.jwks = tmp / "jwks.json"
        self.jwks.write_text(json.dumps({"keys": [jwk]}))
        self.issued: list[str] = []
        idp = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                self.rfile.read(int(self.headers.get("Content-Length", "0")))
                good = "Basic " + base64.b64encode(b"kt-svc:svc-secret").decode()
                if self.headers.get("Authorization") != good:
                    self.send_response(401)
                    self.end_headers()
                    self.wfile.write(b'{"error":"invalid_client"}')
                    return
                now = time.time()
                tok = jwt.encode({"sub": "kt-svc", "iat": now, "exp": now + LIFETIME,
                                  "aud": "kafka", "iss": ISSUER, "scope": "kafka"},
                                 idp.key, "RS256", headers={"kid": "k1"})  # fmt: skip
                idp.issued.append(tok)
                body = json.dumps({"access_token": tok, "token_type": "Bearer",
                                   "expires_in": LIFETIME}).encode()  # fmt: skip
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = HTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_port}/oauth2/token"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture(scope="module")
def oidc(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    tmp = tmp_path_factory.mktemp("oidc")
    idp = Idp(tmp)
    ports = {"PLAINTEXT": free_port(), "SASL_PLAINTEXT": free_port()}
    prefix = "listener.name.sasl_plaintext.oauthbearer."
    overrides = {
        "listeners": ",".join(f"{n}://localhost:{p}" for n, p in ports.items()),
        "sasl.enabled.mechanisms": "OAUTHBEARER",
        prefix + "sasl.jaas.config":
            "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required;",
        prefix + "sasl.server.callback.handler.class":
            "org.apache.kafka.common.security.oauthbearer.OAuthBearerValidatorCallbackHandler",
        "sasl.oauthbearer.jwks.endpoint.url": idp.jwks.as_uri(),
        "sasl.oauthbearer.expected.audience": "kafka",
        "sasl.oauthbearer.expected.issuer": ISSUER,
        "offsets.topic.replication.factor": "1",
    }  # fmt: skip
    broker = BrokerProcess(tmp / "data", ports["PLAINTEXT"], overrides).start(timeout=60)
    props = {
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": "OAUTHBEARER",
        "sasl.oauthbearer.method": "oidc",
        "sasl.oauthbearer.token.endpoint.url": idp.url,
        "sasl.oauthbearer.client.id": "kt-svc",
        "sasl.oauthbearer.client.secret": "svc-secret",
        "sasl.oauthbearer.scope": "kafka",
    }
    try:
        yield {"idp": idp, "bootstrap": f"localhost:{ports['SASL_PLAINTEXT']}", "props": props}
    finally:
        broker.stop()
        idp.stop()


def test_commands_with_oidc_client_credentials(oidc: dict[str, Any], tmp_path: Path) -> None:
    f = tmp_path / "oidc.properties"
    f.write_text("".join(f"{k}={v}\n" for k, v in oidc["props"].items()))
    env = {k: v for k, v in os.environ.items() if not k.startswith("KT_BOOTSTRAP")}
    r = subprocess.run([KT, "topic", "create", "oidc-orders", "-b", oidc["bootstrap"],
                        "--command-config", str(f)], capture_output=True, text=True,
                       timeout=120, env=env)  # fmt: skip
    assert r.returncode == 0, r.stderr
    bad = tmp_path / "bad.properties"
    bad.write_text(f.read_text().replace("svc-secret", "nope"))
    r = subprocess.run([KT, "topic", "list", "-b", oidc["bootstrap"],
                        "--command-config", str(bad)],
                       capture_output=True, text=True, timeout=120, env=env)  # fmt: skip
    assert r.returncode == 1 and len(r.stderr.splitlines()) == 1, r.stderr
    assert f"OAUTHBEARER token endpoint {oidc['idp'].url}: HTTP 401 for client kt-svc" in r.stderr
    assert "nope" not in r.stderr


def test_token_refreshed_and_session_reauthenticated(oidc: dict[str, Any]) -> None:
    from kt.client import KafkaClient, SecurityConfig

    security = SecurityConfig.from_properties(oidc["props"])
    issued_before = len(oidc["idp"].issued)

    async def go() -> int:
        async with KafkaClient(oidc["bootstrap"], security=security) as client:
            conn = await client.any_connection()
            # the broker's session ends with the token: exp - now, at most LIFETIME s
            assert 0 < conn.session_lifetime_ms <= LIFETIME * 1000
            deadline = time.monotonic() + 90
            while conn.reauthentications < 2:
                assert time.monotonic() < deadline
                await client.refresh_metadata()
                await asyncio.sleep(0.2)
            assert conn.connected and await client.any_connection() is conn
            return conn.reauthentications

    assert asyncio.run(go()) >= 2
    # each re-authentication presented a token fetched afresh
    assert len(oidc["idp"].issued) - issued_before >= 3
