"""The per-connection SASL state machine (Kafka's SaslServerAuthenticator) and the
per-listener security built from a broker's settings."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest
from kafka.net.sasl.scram import ScramClient

from kt.broker.security import oauthbearer, scram
from kt.broker.security.authenticator import SaslAuthenticator, State, Step
from kt.broker.security.listener_security import SecurityConfigError, build_listener_security
from kt.broker.security.listeners import EndPoint
from kt.protocol import ErrorCode, apis

JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required '
        'username="admin" password="admin-secret" user_alice="alice-secret";')  # fmt: skip
S512 = scram.MECHANISMS["SCRAM-SHA-512"]
CREDS = {"bob": scram.make_credential(S512, "bob-secret")}


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def settings(**extra: str) -> Any:
    props = {"listeners": "SASL_PLAINTEXT://:9092",
             "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-512,OAUTHBEARER",
             "listener.name.sasl_plaintext.plain.sasl.jaas.config": JAAS} | extra  # fmt: skip
    ep = EndPoint("SASL_PLAINTEXT", "", 9092, "SASL_PLAINTEXT")
    sec = build_listener_security(props, ep, lambda mech: CREDS.get)
    assert sec.sasl is not None and sec.ssl_context is None
    return sec.sasl


def auth(clock: Clock | None = None, **extra: str) -> SaslAuthenticator:
    return SaslAuthenticator(settings(**extra), "10.0.0.5", clock or Clock())


def hs(a: SaslAuthenticator, mech: str, version: int = 1) -> Step:
    return a.on_request(apis.SASL_HANDSHAKE.key, version, SimpleNamespace(mechanism=mech))


def sa(a: SaslAuthenticator, token: bytes, version: int = 2) -> Step:
    return a.on_request(apis.SASL_AUTHENTICATE.key, version, SimpleNamespace(auth_bytes=token))


def test_plain_over_handshake_v1() -> None:
    a = auth()
    assert a.on_request(apis.API_VERSIONS.key, 3, None).forward
    step = hs(a, "PLAIN")
    assert step.response.error_code == 0  # type: ignore[attr-defined]
    assert step.response.mechanisms == ["PLAIN", "SCRAM-SHA-512", "OAUTHBEARER"]  # type: ignore[attr-defined]
    step = sa(a, b"\0alice\0alice-secret")
    assert step.response.error_code == 0 and not step.close  # type: ignore[attr-defined]
    assert a.complete and a.principal == "User:alice" and a.session_expiry is None
    assert a.on_request(apis.METADATA.key, 12, None).forward


def test_wrong_password_is_answered_after_the_delay_and_closed() -> None:
    a = auth(**{"connection.failed.authentication.delay.ms": "250"})
    hs(a, "PLAIN")
    step = sa(a, b"\0alice\0nope")
    assert step.close and step.delay_s == 0.25
    assert step.response.error_code == ErrorCode.SASL_AUTHENTICATION_FAILED  # type: ignore[attr-defined]
    assert step.response.error_message == "Authentication failed: Invalid username or password"  # type: ignore[attr-defined]
    assert step.log == ("Failed authentication with /10.0.0.5 (Authentication failed: "
                        "Invalid username or password)")  # fmt: skip
    assert a.on_request(apis.METADATA.key, 12, None).close


def test_a_request_before_authentication_is_not_served() -> None:
    a = auth()
    step = a.on_request(apis.METADATA.key, 12, None)
    assert step.close and not step.forward and step.response is None and step.delay_s == 0.1
    assert "Unexpected Kafka request of type METADATA during SASL handshake." in (step.log or "")
    b = auth()
    hs(b, "PLAIN")
    step = b.on_request(apis.PRODUCE.key, 9, None)
    assert step.close and step.error_code == ErrorCode.ILLEGAL_SASL_STATE
    c = auth()
    c.on_request(apis.API_VERSIONS.key, 3, None)
    assert c.on_request(apis.API_VERSIONS.key, 3, None).close  # only once


def test_unknown_mechanism() -> None:
    a = auth()
    step = hs(a, "GSSAPI")
    assert step.close and step.delay_s == 0.1
    assert step.response.error_code == ErrorCode.UNSUPPORTED_SASL_MECHANISM  # type: ignore[attr-defined]
    assert a.state == State.FAILED


def test_scram_with_a_real_client_and_generic_failure_message() -> None:
    a = auth()
    hs(a, "SCRAM-SHA-512")
    client = ScramClient("bob", "bob-secret", "SCRAM-SHA-512")
    first = sa(a, client.first_message())
    client.process_server_first_message(first.response.auth_bytes)  # type: ignore[attr-defined]
    final = sa(a, client.final_message())
    client.process_server_final_message(final.response.auth_bytes)  # type: ignore[attr-defined]
    assert a.principal == "User:bob"
    b = auth()
    hs(b, "SCRAM-SHA-512")
    step = sa(b, b"n,,n=mallory,r=abc")
    assert step.response.error_message == (  # type: ignore[attr-defined]
        "Authentication failed during authentication due to invalid credentials with SASL "
        "mechanism SCRAM-SHA-512")  # fmt: skip


def test_handshake_v0_raw_tokens() -> None:
    a = auth()
    hs(a, "PLAIN", version=0)
    assert a.expects_raw
    # Kafka answers a successful PLAIN token with an empty frame (the client waits
    # for it): SaslServerAuthenticator sends PlainSaslServer's empty response
    assert a.on_raw_frame(b"\0alice\0alice-secret") == Step(raw=b"")
    assert a.complete and a.principal == "User:alice"
    b = auth()
    hs(b, "PLAIN", version=0)
    step = b.on_raw_frame(b"\0alice\0bad")
    assert step.close and step.response is None and step.raw is None


def test_reauthentication_and_expiry() -> None:
    clock = Clock()
    a = auth(clock, **{"listener.name.sasl_plaintext.plain.connections.max.reauth.ms": "5000"})
    hs(a, "PLAIN")
    step = sa(a, b"\0alice\0alice-secret")
    assert step.response.session_lifetime_ms == 5000  # type: ignore[attr-defined]
    clock.now += 4
    assert hs(a, "PLAIN").response.error_code == 0  # type: ignore[attr-defined]
    assert not a.complete
    step = sa(a, b"\0alice\0alice-secret")
    assert a.complete and a.session_expiry == clock.now + 5
    # not again within a second: the handshake goes to the handlers (ILLEGAL_SASL_STATE)
    assert hs(a, "PLAIN").forward
    clock.now += 6
    step = a.on_request(apis.FETCH.key, 12, None)
    assert step.close and step.response is None  # expired: closed without an answer


def test_reauthentication_cannot_change_principal_or_mechanism() -> None:
    clock = Clock()
    two_users = JAAS.replace(";", ' user_bob="bob-pw";')
    extra = {"connections.max.reauth.ms": "5000",
             "listener.name.sasl_plaintext.plain.sasl.jaas.config": two_users}  # fmt: skip
    a = auth(clock, **extra)
    hs(a, "PLAIN")
    sa(a, b"\0alice\0alice-secret")
    clock.now += 2
    hs(a, "PLAIN")
    step = sa(a, b"\0bob\0bob-pw")
    assert step.close
    assert step.response.error_message == (  # type: ignore[attr-defined]
        "Cannot change principals during re-authentication from User.alice: User.bob"
    )
    assert step.log is not None and step.log.startswith("Failed re-authentication with")
    b = auth(clock, **extra)
    hs(b, "PLAIN")
    sa(b, b"\0alice\0alice-secret")
    clock.now += 2
    step = hs(b, "SCRAM-SHA-512")
    assert step.close and "not supported for re-authentication of mechanism 'PLAIN'" in (
        step.log or "")  # fmt: skip


def test_oauthbearer_session_ends_with_the_token() -> None:
    import time

    clock = Clock()  # the session's monotonic clock, unrelated to the token's dates
    wall = time.time()
    a = SaslAuthenticator(settings(), "10.0.0.5", clock, wall_clock=lambda: wall)
    hs(a, "OAUTHBEARER")
    token = oauthbearer.unsecured_token({"sub": "svc", "exp": wall + 30})
    step = sa(a, oauthbearer.initial_response(token))
    assert a.principal == "User:svc"
    assert 29_000 <= step.response.session_lifetime_ms <= 30_000  # type: ignore[attr-defined]
    clock.now += 31
    assert a.on_request(apis.METADATA.key, 12, None).close


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        ({"sasl.enabled.mechanisms": "GSSAPI"}, "gssapi.sasl.jaas.config is not set"),
        ({"listener.name.sasl_plaintext.plain.sasl.jaas.config": "x.Y required;"},
         "PLAIN's users are read from"),
        ({"listener.name.sasl_plaintext.plain.sasl.jaas.config": "broken"},
         "listener.name.sasl_plaintext.plain.sasl.jaas.config"),
        ({"listener.name.sasl_plaintext.scram-sha-512.sasl.server.callback.handler.class": "a.B"},
         "custom Java callback handlers"),
        ({"connections.max.reauth.ms": "soon"}, "connections.max.reauth.ms"),
        ({"listener.name.sasl_plaintext.oauthbearer.sasl.server.callback.handler.class":
          "org.apache.kafka.common.security.oauthbearer.OAuthBearerValidatorCallbackHandler"},
         "sasl.oauthbearer.jwks.endpoint.url must be set"),
        ({"principal.builder.class": "a.B"}, "principal.builder.class"),
    ],
)  # fmt: skip
def test_settings_that_cannot_work_name_the_key(extra: dict[str, str], message: str) -> None:
    with pytest.raises(SecurityConfigError) as info:
        settings(**extra)
    assert message in str(info.value)


def test_plain_without_users_names_the_key() -> None:
    ep = EndPoint("SASL_PLAINTEXT", "", 9092, "SASL_PLAINTEXT")
    with pytest.raises(SecurityConfigError, match=r"plain\.sasl\.jaas\.config is not set"):
        build_listener_security({"sasl.enabled.mechanisms": "PLAIN"}, ep)


def test_receive_size_and_the_sasl_ssl_client_auth_warning(
    caplog: pytest.LogCaptureFixture,
) -> None:
    assert settings(**{"sasl.server.max.receive.size": "1000"}).max_receive_size == 1000
    assert settings().max_receive_size == 524288
    ep = EndPoint("SASL_SSL", "", 9094, "SASL_SSL")
    props = {"sasl.enabled.mechanisms": "PLAIN", "ssl.client.auth": "required",
             "listener.name.sasl_ssl.plain.sasl.jaas.config": JAAS}  # fmt: skip
    with pytest.raises(SecurityConfigError, match="has no keystore"):
        build_listener_security(props, ep)
    assert "'ssl.client.auth' is applied only to SSL listeners" in caplog.text
