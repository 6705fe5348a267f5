"""The client's SASL over real sockets against a broker-side peer (tests/sasl_peer.py):
PLAIN and SCRAM with SaslAuthenticate and with raw v0 tokens, OAUTHBEARER with an OIDC
token endpoint started here, re-authentication before the session ends (KIP-368),
and the one-line errors and exit codes of the commands."""

from __future__ import annotations

import asyncio
import base64
import json
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, HTTPServer
from typing import Any

import pytest
from click.testing import CliRunner
from sasl_peer import PeerConfig, SaslPeer

from kt.cli import cli
from kt.client import KafkaAuthenticationError, KafkaClient, SecurityConfig
from kt.client.security import OidcTokenProvider, SecurityConfigError, parse_jaas
from kt.protocol.sasl import jwt_claims, unsecured_jwt


@pytest.fixture
def peer(request: pytest.FixtureRequest) -> Iterator[SaslPeer]:
    cfg = getattr(request, "param", None) or PeerConfig()
    p = SaslPeer(cfg).start()
    yield p
    p.stop()


def sec(**props: str) -> SecurityConfig:
    return SecurityConfig.from_properties({k.replace("_", "."): v for k, v in props.items()})


async def _start(peer: SaslPeer, security: SecurityConfig) -> KafkaClient:
    client = KafkaClient(peer.bootstrap, security=security, connect_timeout=5, request_timeout=5)
    await client.start()
    return client


def _connect_once(peer: SaslPeer, security: SecurityConfig) -> None:
    async def go() -> None:
        client = await _start(peer, security)
        await client.close()

    asyncio.run(go())


@pytest.mark.parametrize(
    "props",
    [
        {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN",
         "sasl.username": "alice", "sasl.password": "alice-secret"},
        {"security.protocol": "SASL_PLAINTEXT", "sasl.jaas.config":
         'org.apache.kafka.common.security.plain.PlainLoginModule required '
         'username="alice" password="alice-secret";'},
        {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "SCRAM-SHA-256",
         "sasl.jaas.config": "org.apache.kafka.common.security.scram.ScramLoginModule "
         "required username='alice' password='alice-secret';"},
    ],
)  # fmt: skip
def test_plain_and_scram_authenticate(peer: SaslPeer, props: dict[str, str]) -> None:
    async def go() -> None:
        client = await _start(peer, SecurityConfig.from_properties(props))
        assert client.metadata.cluster_id == "peer"
        await client.close()

    asyncio.run(go())
    assert peer.authenticated == ["alice"]


@pytest.mark.parametrize(
    "peer",
    [PeerConfig(mechanisms=["SCRAM-SHA-512"], authenticate_api=False)],
    indirect=True,
)
def test_old_broker_raw_tokens_after_handshake_v0(peer: SaslPeer) -> None:
    async def go() -> None:
        cfg = sec(security_protocol="SASL_PLAINTEXT", sasl_mechanism="SCRAM-SHA-512",
                  sasl_username="alice", sasl_password="alice-secret")  # fmt: skip
        client = await _start(peer, cfg)
        await client.close()

    asyncio.run(go())
    assert peer.authenticated == ["alice"]


def test_wrong_password_is_fatal_and_names_mechanism_and_user(peer: SaslPeer) -> None:
    async def go() -> None:
        t0 = time.monotonic()
        with pytest.raises(KafkaAuthenticationError) as err:
            await _start(peer, sec(security_protocol="SASL_PLAINTEXT",
                                   sasl_mechanism="SCRAM-SHA-256",
                                   sasl_username="alice", sasl_password="nope"))  # fmt: skip
        assert time.monotonic() - t0 < 4  # not retried until the connect timeout
        assert str(err.value) == (
            f"{peer.bootstrap}: SASL authentication failed (SCRAM-SHA-256 as user alice): "
            "Authentication failed during authentication due to invalid credentials with "
            "SASL mechanism SCRAM-SHA-256"
        )

    asyncio.run(go())


@pytest.mark.parametrize("peer", [PeerConfig(session_lifetime_ms=400)], indirect=True)
def test_reauthenticates_before_the_session_lifetime_runs_out(peer: SaslPeer) -> None:
    async def go() -> None:
        client = await _start(peer, sec(security_protocol="SASL_PLAINTEXT",
                                        sasl_mechanism="PLAIN", sasl_username="alice",
                                        sasl_password="alice-secret"))  # fmt: skip
        deadline = time.monotonic() + 30
        # a long-lived connection in use: requests keep flowing; the client slips a
        # re-authentication in before each session's end (the peer counts them)
        while len(peer.handshakes) < 3:
            assert time.monotonic() < deadline, peer.handshakes
            await client.refresh_metadata()
            await asyncio.sleep(0.05)
        assert client.metadata.cluster_id == "peer"
        await client.close()

    asyncio.run(go())
    assert peer.handshakes[:3] == ["PLAIN"] * 3 and peer.authenticated[:3] == ["alice"] * 3


# --- OAUTHBEARER ------------------------------------------------------------------------


class TokenEndpoint:
    """An OAuth 2 token endpoint (client-credentials grant) for one client."""

    def __init__(self, lifetime: float) -> None:
        self.lifetime = lifetime
        self.issued: list[str] = []
        self.requests: list[dict[str, Any]] = []
        endpoint = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length", "0"))
                form = self.rfile.read(length).decode()
                auth = self.headers.get("Authorization", "")
                endpoint.requests.append({"form": form, "auth": auth})
                if auth != "Basic " + base64.b64encode(b"kt-app:app-secret").decode():
                    self.send_response(401)
                    self.end_headers()
                    self.wfile.write(b'{"error":"invalid_client"}')
                    return
                tok = unsecured_jwt({"sub": "kt-app", "n": len(endpoint.issued)},
                                    now=time.time(), lifetime=endpoint.lifetime)  # fmt: skip
                endpoint.issued.append(tok)
                body = json.dumps({"access_token": tok, "token_type": "bearer",
                                   "expires_in": endpoint.lifetime}).encode()  # fmt: skip
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = HTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_port}/token"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def test_oidc_client_credentials_token_is_used_and_refreshed() -> None:
    endpoint = TokenEndpoint(lifetime=1.5)

    def check(token: str) -> str | None:
        claims = jwt_claims(token)
        ok = token in endpoint.issued and claims.get("exp", 0) > time.time()
        return str(claims["sub"]) if ok else None

    peer = SaslPeer(PeerConfig(mechanisms=["OAUTHBEARER"], token_check=check)).start()
    props = {
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": "OAUTHBEARER",
        "sasl.oauthbearer.method": "oidc",
        "sasl.oauthbearer.token.endpoint.url": endpoint.url,
        "sasl.oauthbearer.client.id": "kt-app",
        "sasl.oauthbearer.client.secret": "app-secret",
        "sasl.oauthbearer.scope": "kafka",
    }
    try:
        security = SecurityConfig.from_properties(props)

        async def go() -> None:
            client = await _start(peer, security)
            await client.close()
            # the next connection after 80% of the token's life gets a new token
            deadline = time.monotonic() + 30
            while len(endpoint.issued) < 2:
                assert time.monotonic() < deadline
                client = await _start(peer, security)
                await client.close()
                await asyncio.sleep(0.1)

        asyncio.run(go())
        assert peer.authenticated[0] == "kt-app" and peer.tokens[-1] == endpoint.issued[-1]
        assert endpoint.requests[0]["form"] == "grant_type=client_credentials&scope=kafka"

        # a wrong secret: the token endpoint's refusal, in one line
        bad = SecurityConfig.from_properties({**props, "sasl.oauthbearer.client.secret": "x"})
        with pytest.raises(KafkaAuthenticationError, match="HTTP 401 for client kt-app"):
            _connect_once(peer, bad)
    finally:
        peer.stop()
        endpoint.stop()


def test_unsecured_jwt_and_a_refused_token() -> None:
    peer = SaslPeer(PeerConfig(mechanisms=["OAUTHBEARER"],
                               token_check=lambda t: jwt_claims(t).get("sub"))).start()  # fmt: skip
    try:
        cfg = sec(security_protocol="SASL_PLAINTEXT", sasl_mechanism="OAUTHBEARER",
                  sasl_oauthbearer_config="principal=dev-user")  # fmt: skip
        _connect_once(peer, cfg)
        assert peer.authenticated == ["dev-user"]
        jaas = SecurityConfig.from_properties({
            "security.protocol": "SASL_PLAINTEXT",
            "sasl.jaas.config": "org.apache.kafka.common.security.oauthbearer."
            'OAuthBearerLoginModule required unsecuredLoginStringClaim_sub="jaas-user";',
        })  # fmt: skip
        _connect_once(peer, jaas)
        assert peer.authenticated == ["dev-user", "jaas-user"]
        refused = sec(security_protocol="SASL_PLAINTEXT", sasl_mechanism="OAUTHBEARER",
                      sasl_oauthbearer_token="not-a-jwt")  # fmt: skip
        with pytest.raises(KafkaAuthenticationError, match="invalid_token"):
            _connect_once(peer, refused)
    finally:
        peer.stop()


# --- the commands -----------------------------------------------------------------------


def _kt(*args: str) -> Any:
    return CliRunner().invoke(cli, list(args), env={"KT_BOOTSTRAP_SERVER": None})


def test_cli_authentication_failed_is_one_line_exit_1(peer: SaslPeer) -> None:
    r = _kt("topic", "list", "-b", peer.bootstrap, "-X", "security.protocol=SASL_PLAINTEXT",
            "-X", "sasl.mechanism=PLAIN", "-X", "sasl.username=alice",
            "-X", "sasl.password=wrong")  # fmt: skip
    assert r.exit_code == 1
    assert r.stderr == (
        f"kt: error: {peer.bootstrap}: SASL authentication failed (PLAIN as user alice): "
        "Authentication failed: Invalid username or password\n"
    )
    assert "wrong" not in r.stderr  # never the password


def test_cli_mechanism_not_enabled_lists_the_brokers(peer: SaslPeer) -> None:
    r = _kt("topic", "list", "-b", peer.bootstrap, "-X", "security.protocol=SASL_PLAINTEXT",
            "-X", "sasl.mechanism=SCRAM-SHA-512", "-X", "sasl.username=alice",
            "-X", "sasl.password=alice-secret")  # fmt: skip
    assert r.exit_code == 1
    assert r.stderr == (
        f"kt: error: {peer.bootstrap}: SASL mechanism SCRAM-SHA-512 is not enabled on the "
        "broker (it offers: PLAIN, SCRAM-SHA-256)\n"
    )


def test_cli_plaintext_client_on_a_sasl_listener_says_so(peer: SaslPeer) -> None:
    r = _kt("topic", "list", "-b", peer.bootstrap, "--timeout", "3")
    assert r.exit_code == 1 and len(r.stderr.splitlines()) == 1, r.stderr
    assert r.stderr == (
        f"kt: error: {peer.bootstrap}: the broker requires SASL authentication (a SASL "
        "listener; it offers PLAIN, SCRAM-SHA-256): set security.protocol=SASL_PLAINTEXT "
        "and sasl.mechanism\n"
    )


def test_jaas_parsing_as_kafka_reads_it() -> None:
    module, opts = parse_jaas(
        "org.apache.kafka.common.security.scram.ScramLoginModule required\n"
        '  username="a\\"b" password=\'p;w\' /* comment */ tokenauth=true;'
    )
    assert module.endswith("ScramLoginModule")
    assert opts == {"username": 'a"b', "password": "p;w", "tokenauth": "true"}
    for bad, message in [
        ("x.PlainLoginModule required username=\"a\"", "not terminated by semi-colon"),
        ("x.PlainLoginModule maybe;", "unknown control flag"),
        ("x.PlainLoginModule required username=;", "value not specified for key 'username'"),
        ("a.PlainLoginModule required; b.PlainLoginModule required;", "exactly one"),
    ]:  # fmt: skip
        with pytest.raises(SecurityConfigError, match=message):
            parse_jaas(bad)


def test_settings_errors_name_the_key() -> None:
    for props, message in [
        ({"security.protocol": "SASL_SSL"}, "needs sasl.mechanism"),
        ({"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "GSSAPI"}, "GSSAPI"),
        ({"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN",
          "sasl.username": "u"}, "needs a password"),
        ({"security.protocol": "SASL_PLAINTEXT", "sasl.jaas.config":
          "x.ScramLoginModule required username=u password=p;"}, "SCRAM-SHA-256 or"),
        ({"security.protocol": "SSL", "ssl.ca.location": "/nonexistent/ca.pem"},
         "ssl.ca.location: /nonexistent/ca.pem: no such file"),
        ({"security.protocol": "SSL", "ssl.endpoint.identification.algorithm": "ldap"},
         "expected https or empty"),
        ({"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN",
          "sasl.username": "u", "sasl.password": "${env:KT_TEST_UNSET_PASSWORD}"},
         "environment variable KT_TEST_UNSET_PASSWORD is not set"),
    ]:  # fmt: skip
        with pytest.raises(SecurityConfigError, match=message):
            SecurityConfig.from_properties(props)


def test_secrets_from_env_and_file(tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KT_TEST_PW", "from-env")
    (tmp_path / "pw").write_text("from-file\n")
    (tmp_path / "creds.properties").write_text("password=from-props\n")
    props_file = tmp_path / "creds.properties"
    for value, expected in [("${env:KT_TEST_PW}", "from-env"),
                            (f"${{file:{tmp_path / 'pw'}}}", "from-file"),
                            (f"${{file:{props_file}:password}}", "from-props")]:  # fmt: skip
        cfg = sec(security_protocol="SASL_PLAINTEXT", sasl_mechanism="PLAIN",
                  sasl_username="u", sasl_password=value)  # fmt: skip
        assert cfg.password == expected


def test_oidc_provider_needs_an_endpoint_that_answers() -> None:
    provider = OidcTokenProvider("http://127.0.0.1:1/token", "c", "s", timeout=2)
    with pytest.raises(SecurityConfigError, match="OAUTHBEARER token endpoint"):
        asyncio.run(provider.token())
