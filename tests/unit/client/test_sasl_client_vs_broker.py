"""kt's SASL client against kt's broker-side SASL (kt/broker/security, written apart
from the client from Kafka's behaviour), through the real codec: every request and
response is encoded by one side's connection object and decoded by the other's.
PLAIN, SCRAM-SHA-256/512, OAUTHBEARER (unsecured JWTs), the failures' messages, the
mechanism list, raw v0 tokens, and KIP-368 re-authentication."""

from __future__ import annotations

import time
from typing import Any

import pytest

from kt.broker.security import scram
from kt.broker.security.authenticator import SaslAuthenticator
from kt.broker.security.listener_security import build_listener_security
from kt.broker.security.listeners import EndPoint
from kt.client.security import SecurityConfig
from kt.protocol import apis
from kt.protocol.connection import ClientConnection, ServerConnection
from kt.protocol.sasl import SaslError, SaslExchange, unsecured_jwt

JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required '
        'username="admin" password="admin-secret" user_alice="alice-secret";')  # fmt: skip
CREDS = {
    ("bob", "SCRAM-SHA-512"): scram.make_credential(scram.MECHANISMS["SCRAM-SHA-512"], "bob-pw"),
    ("bob", "SCRAM-SHA-256"): scram.make_credential(scram.MECHANISMS["SCRAM-SHA-256"], "bob-pw"),
}


def broker(**extra: str) -> SaslAuthenticator:
    props = {"listeners": "SASL_PLAINTEXT://:9092",
             "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512,OAUTHBEARER",
             "listener.name.sasl_plaintext.plain.sasl.jaas.config": JAAS} | extra  # fmt: skip
    ep = EndPoint("SASL_PLAINTEXT", "", 9092, "SASL_PLAINTEXT")
    sec = build_listener_security(props, ep, lambda mech: lambda u: CREDS.get((u, mech)))
    assert sec.sasl is not None
    return SaslAuthenticator(sec.sasl, "127.0.0.1", time.time)


async def _mechanism(props: dict[str, str]) -> Any:
    return await SecurityConfig.from_properties(
        {"security.protocol": "SASL_PLAINTEXT", **props}
    ).mechanism_for_connection("localhost")


def run(props: dict[str, str], server: SaslAuthenticator, *, v0: bool = False,
        reauth: bool = False) -> SaslExchange:  # fmt: skip
    """Drive the client's exchange against the broker's authenticator over the codec."""
    import asyncio

    mech = asyncio.run(_mechanism(props))
    ex = SaslExchange(mech, (0, 0 if v0 else 1), None if v0 else (0, 2), reauth=reauth)
    client, srv = ClientConnection("kt"), ServerConnection()
    for _ in range(20):
        if ex.done:
            return ex
        step = ex.step()
        assert step is not None
        if step.api is None:  # a raw token after handshake v0
            data = client.send_raw(step.raw)
            answer = server.on_raw_frame(data[4:])
            if answer.close:
                ex.raw_closed()
            assert answer.raw is not None, "the broker sent no raw answer"
            (resp,) = client.receive_data(len(answer.raw).to_bytes(4, "big") + answer.raw)
            ex.raw_response(bytes(resp.body.auth_bytes))
            continue
        _cid, data = client.send_request(step.api.key, step.version, step.body)
        (req,) = srv.receive_data(data)
        answer = server.on_request(req.header.api_key, req.header.api_version, req.body)
        assert answer.response is not None, answer
        (resp,) = client.receive_data(srv.send_response(req, answer.response))
        if step.api is apis.SASL_HANDSHAKE:
            ex.handshake_response(resp.body)
        else:
            ex.authenticate_response(resp.body)
    raise AssertionError("exchange did not end")


@pytest.mark.parametrize(
    "props",
    [
        {"sasl.mechanism": "PLAIN", "sasl.username": "alice", "sasl.password": "alice-secret"},
        {"sasl.jaas.config": JAAS.replace('username="admin" password="admin-secret" ', "")
         .replace('user_alice="alice-secret"', 'username="alice" password="alice-secret"')},
        {"sasl.mechanism": "SCRAM-SHA-256", "sasl.username": "bob", "sasl.password": "bob-pw"},
        {"sasl.mechanism": "SCRAM-SHA-512", "sasl.username": "bob", "sasl.password": "bob-pw"},
        {"sasl.mechanism": "OAUTHBEARER", "sasl.oauthbearer.config": "principal=carol"},
    ],
)  # fmt: skip
def test_client_authenticates_with_the_broker(props: dict[str, str]) -> None:
    server = broker()
    run(props, server)
    assert server.complete and server.principal in ("User:alice", "User:bob", "User:carol")


def test_wrong_credentials_get_kafkas_messages() -> None:
    with pytest.raises(SaslError) as err:
        run({"sasl.mechanism": "PLAIN", "sasl.username": "alice", "sasl.password": "x"}, broker())
    assert str(err.value) == ("SASL authentication failed (PLAIN as user alice): "
                              "Authentication failed: Invalid username or password")  # fmt: skip
    with pytest.raises(SaslError) as err:
        run({"sasl.mechanism": "SCRAM-SHA-512", "sasl.username": "bob", "sasl.password": "x"},
            broker())  # fmt: skip
    assert str(err.value) == (
        "SASL authentication failed (SCRAM-SHA-512 as user bob): Authentication failed during "
        "authentication due to invalid credentials with SASL mechanism SCRAM-SHA-512"
    )


def test_mechanism_not_enabled_lists_the_brokers() -> None:
    server = broker(**{"sasl.enabled.mechanisms": "SCRAM-SHA-512"})
    with pytest.raises(SaslError) as err:
        run({"sasl.mechanism": "SCRAM-SHA-256", "sasl.username": "bob", "sasl.password": "bob-pw"},
            server)  # fmt: skip
    assert str(err.value) == (
        "SASL mechanism SCRAM-SHA-256 is not enabled on the broker (it offers: SCRAM-SHA-512)"
    )


def test_expired_token_is_refused_with_the_json_status() -> None:
    token = unsecured_jwt({"sub": "carol"}, now=time.time() - 7200, lifetime=60)
    with pytest.raises(SaslError, match='"status":"invalid_token"'):
        run({"sasl.mechanism": "OAUTHBEARER", "sasl.oauthbearer.token": token}, broker())


def test_raw_tokens_after_a_v0_handshake() -> None:
    server = broker()
    run({"sasl.mechanism": "SCRAM-SHA-256", "sasl.username": "bob", "sasl.password": "bob-pw"},
        server, v0=True)  # fmt: skip
    assert server.complete


def test_session_lifetime_and_reauthentication() -> None:
    server = broker(**{"listener.name.sasl_plaintext.plain.connections.max.reauth.ms": "60000"})
    props = {"sasl.mechanism": "PLAIN", "sasl.username": "alice", "sasl.password": "alice-secret"}
    ex = run(props, server)
    assert 0 < ex.session_lifetime_ms <= 60000
    # the broker takes a re-authentication only a second after the last one began
    server._reauth_started -= 2
    ex = run(props, server, reauth=True)
    assert ex.done and server.complete
