"""The sans-IO SASL client: SCRAM against the RFCs' own test vectors, PLAIN and
OAUTHBEARER messages, and the Kafka exchange (SaslHandshake v0/v1, SaslAuthenticate,
failures) driven by a peer written here that plays the broker's part."""

from __future__ import annotations

import base64
import hashlib
import hmac

import pytest

from kt.protocol.apis import SASL_AUTHENTICATE, SASL_HANDSHAKE
from kt.protocol.connection import RAW_TOKEN, ClientConnection
from kt.protocol.sasl import (
    OAuthBearerMechanism,
    PlainMechanism,
    SaslError,
    SaslExchange,
    ScramMechanism,
    jwt_claims,
    scram_keys,
    scram_salted_password,
    unsecured_jwt,
)


def test_scram_sha1_rfc5802_vector() -> None:
    # RFC 5802 section 5: user "user", password "pencil"
    m = ScramMechanism("SCRAM-SHA-1", "user", "pencil", nonce="fyko+d2lbbFgONRv9qkxdawL")
    assert m.initial() == b"n,,n=user,r=fyko+d2lbbFgONRv9qkxdawL"
    final = m.respond(b"r=fyko+d2lbbFgONRv9qkxdawL3rfcNHYJY1ZVvWVs7j,s=QSXCR+Q6sek8bf92,i=4096")
    assert final == (
        b"c=biws,r=fyko+d2lbbFgONRv9qkxdawL3rfcNHYJY1ZVvWVs7j,p=v0X8v3Bz2T0CJGbJQyF0X+HI4Ts="
    )
    assert m.respond(b"v=rmF9pqV8S7suAoZWja4dJRkFsKQ=") is None
    assert m.complete


def test_scram_sha256_rfc7677_vector() -> None:
    # RFC 7677 section 3
    m = ScramMechanism("SCRAM-SHA-256", "user", "pencil", nonce="rOprNGfwEbeRWgbNEkqO")
    assert m.initial() == b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO"
    server_first = (
        b"r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096"
    )
    assert m.respond(server_first) == (
        b"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,"
        b"p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ="
    )
    assert m.respond(b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4=") is None
    assert m.complete


def test_scram_refuses_a_wrong_server_signature_and_a_foreign_nonce() -> None:
    m = ScramMechanism("SCRAM-SHA-256", "user", "pencil", nonce="abc")
    m.initial()
    m.respond(b"r=abcdef,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096")
    with pytest.raises(SaslError, match="signature is wrong"):
        m.respond(b"v=" + base64.b64encode(b"x" * 32))
    m = ScramMechanism("SCRAM-SHA-512", "user", "pencil", nonce="abc")
    m.initial()
    with pytest.raises(SaslError, match="nonce"):
        m.respond(b"r=zzzdef,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096")


def test_scram_escapes_names_and_sends_extensions() -> None:
    m = ScramMechanism("SCRAM-SHA-512", "a=b,c", "p", nonce="n", extensions={"tokenauth": "true"})
    assert m.initial() == b"n,,n=a=3Db=2Cc,r=n,tokenauth=true"


def test_scram_keys_are_kafkas_stored_and_server_keys() -> None:
    salted = scram_salted_password("sha256", "pencil", b"salt", 4096)
    assert salted == hashlib.pbkdf2_hmac("sha256", b"pencil", b"salt", 4096)
    client_key, stored, server = scram_keys("sha256", salted)
    assert stored == hashlib.sha256(hmac.digest(salted, b"Client Key", "sha256")).digest()
    assert client_key == hmac.digest(salted, b"Client Key", "sha256")
    assert server == hmac.digest(salted, b"Server Key", "sha256")


def test_plain_and_oauthbearer_messages() -> None:
    assert PlainMechanism("alice", "s3cret").initial() == b"\0alice\0s3cret"
    o = OAuthBearerMechanism("tok.en.", extensions={"logicalCluster": "lkc-1"})
    assert o.initial() == b"n,,\x01auth=Bearer tok.en.\x01logicalCluster=lkc-1\x01\x01"
    assert o.respond(b"") is None and o.complete
    o = OAuthBearerMechanism("t")
    o.initial()
    assert o.respond(b'{"status":"invalid_token"}') == b"\x01"
    assert o.server_error == '{"status":"invalid_token"}'


def test_unsecured_jwt_has_kafkas_shape() -> None:
    tok = unsecured_jwt({"sub": "alice"}, now=1000.0, lifetime=60)
    header, _claims, sig = tok.split(".")
    assert sig == "" and base64.urlsafe_b64decode(header + "==") == b'{"alg":"none"}'
    assert jwt_claims(tok) == {"iat": 1000, "exp": 1060, "sub": "alice"}
    with pytest.raises(ValueError):
        unsecured_jwt({}, now=0)


# --- the exchange, against a broker-side peer -------------------------------------------


class ScramBroker:
    """The broker's side of SCRAM-SHA-256 for one user, as RFC 5802 describes it."""

    def __init__(self, user: str, password: str, iterations: int = 4096) -> None:
        self.user, self.salt, self.iterations = user, b"kafka-salt", iterations
        salted = scram_salted_password("sha256", password, self.salt, iterations)
        _ck, self.stored_key, self.server_key = scram_keys("sha256", salted)

    def first(self, client_first: bytes) -> bytes:
        self.client_first_bare = client_first.decode()[3:]
        attrs = dict(p.split("=", 1) for p in self.client_first_bare.split(","))
        self.nonce = attrs["r"] + "srv"
        self.server_first = (
            f"r={self.nonce},s={base64.b64encode(self.salt).decode()},i={self.iterations}"
        )
        return self.server_first.encode()

    def final(self, client_final: bytes) -> bytes | None:
        text = client_final.decode()
        without_proof, _, proof = text.rpartition(",p=")
        auth = f"{self.client_first_bare},{self.server_first},{without_proof}".encode()
        sig = hmac.digest(self.stored_key, auth, "sha256")
        client_key = bytes(a ^ b for a, b in zip(base64.b64decode(proof), sig))
        if hashlib.sha256(client_key).digest() != self.stored_key:
            return None
        return b"v=" + base64.b64encode(hmac.digest(self.server_key, auth, "sha256"))


def _drive_v1(ex: SaslExchange, broker: ScramBroker, lifetime: int = 0) -> list[str]:
    """Run the exchange through real encoded requests and responses (v1 framing)."""
    seen = []
    conn = ClientConnection("kt")
    tokens = iter([broker.first, broker.final])
    while not ex.done:
        step = ex.step()
        assert step is not None and step.api is not None
        _cid, _data = conn.send_request(step.api.key, step.version, step.body)
        seen.append(step.api.name)
        if step.api is SASL_HANDSHAKE:
            resp = SASL_HANDSHAKE.response(error_code=0, mechanisms=["PLAIN", "SCRAM-SHA-256"])
            ex.handshake_response(resp)
            continue
        answer = next(tokens)(bytes(step.body.auth_bytes))
        if answer is None:
            resp = SASL_AUTHENTICATE.response(
                error_code=58,
                error_message="Authentication failed during authentication "
                "due to invalid credentials with SASL mechanism SCRAM-SHA-256",
                auth_bytes=b"",
            )
            ex.authenticate_response(resp)
        else:
            ex.authenticate_response(SASL_AUTHENTICATE.response(
                error_code=0, auth_bytes=answer, session_lifetime_ms=lifetime))  # fmt: skip
    return seen


def test_exchange_v1_scram_succeeds_and_reports_the_session_lifetime() -> None:
    ex = SaslExchange(ScramMechanism("SCRAM-SHA-256", "alice", "pw"), (0, 1), (0, 2))
    seen = _drive_v1(ex, ScramBroker("alice", "pw"), lifetime=60000)
    assert seen == ["SaslHandshake", "SaslAuthenticate", "SaslAuthenticate"]
    assert ex.done and ex.session_lifetime_ms == 60000 and ex.handshake_version == 1


def test_exchange_v1_wrong_password_names_mechanism_and_user() -> None:
    ex = SaslExchange(ScramMechanism("SCRAM-SHA-256", "alice", "bad"), (0, 1), (0, 2))
    with pytest.raises(SaslError) as err:
        _drive_v1(ex, ScramBroker("alice", "pw"))
    assert str(err.value).startswith(
        "SASL authentication failed (SCRAM-SHA-256 as user alice): Authentication failed"
    )


def test_exchange_mechanism_not_enabled_lists_the_brokers() -> None:
    ex = SaslExchange(PlainMechanism("a", "b"), (0, 1), (0, 2))
    ex.step()
    with pytest.raises(SaslError) as err:
        ex.handshake_response(SASL_HANDSHAKE.response(
            error_code=33, mechanisms=["SCRAM-SHA-512", "OAUTHBEARER"]))  # fmt: skip
    assert str(err.value) == (
        "SASL mechanism PLAIN is not enabled on the broker (it offers: SCRAM-SHA-512, OAUTHBEARER)"
    )
    assert err.value.kind == "mechanism" and err.value.offered == ["SCRAM-SHA-512", "OAUTHBEARER"]


def test_exchange_without_sasl_handshake_says_it_is_no_sasl_listener() -> None:
    with pytest.raises(SaslError, match="not a SASL listener"):
        SaslExchange(PlainMechanism("a", "b"), None, None)


def test_exchange_v0_uses_raw_tokens() -> None:
    # an old broker: SaslHandshake v0 only, no SaslAuthenticate
    broker = ScramBroker("alice", "pw")
    ex = SaslExchange(ScramMechanism("SCRAM-SHA-256", "alice", "pw"), (0, 0), None)
    step = ex.step()
    assert step is not None and step.api is SASL_HANDSHAKE and step.version == 0
    ex.handshake_response(SASL_HANDSHAKE.response(error_code=0, mechanisms=["SCRAM-SHA-256"]))
    conn = ClientConnection("kt")
    for answer in (broker.first, broker.final):
        step = ex.step()
        assert step is not None and step.api is None
        wire = conn.send_raw(step.raw)
        assert wire[4:] == step.raw and int.from_bytes(wire[:4], "big") == len(step.raw)
        reply = answer(step.raw)
        assert reply is not None
        (resp,) = conn.receive_data(len(reply).to_bytes(4, "big") + reply)
        assert resp.api_key == RAW_TOKEN and resp.raw == reply
        ex.raw_response(bytes(resp.body.auth_bytes))
    assert ex.done


def test_exchange_v0_close_is_an_authentication_failure() -> None:
    ex = SaslExchange(PlainMechanism("bob", "x"), (0, 0), None)
    ex.step()
    ex.handshake_response(SASL_HANDSHAKE.response(error_code=0, mechanisms=["PLAIN"]))
    ex.step()
    with pytest.raises(SaslError, match=r"\(PLAIN as user bob\): the broker closed"):
        ex.raw_closed()


def test_exchange_oauthbearer_error_challenge_reports_the_json() -> None:
    ex = SaslExchange(OAuthBearerMechanism("t", user="svc"), (0, 1), (0, 2))
    ex.step()
    ex.handshake_response(SASL_HANDSHAKE.response(error_code=0, mechanisms=["OAUTHBEARER"]))
    ex.step()
    with pytest.raises(SaslError, match=r'OAUTHBEARER as user svc.*"status":"invalid_token"'):
        ex.authenticate_response(SASL_AUTHENTICATE.response(
            error_code=0, auth_bytes=b'{"status":"invalid_token"}'))  # fmt: skip


def test_reauthentication_message_says_so() -> None:
    ex = SaslExchange(PlainMechanism("bob", "x"), (0, 1), (0, 2), reauth=True)
    ex.step()
    ex.handshake_response(SASL_HANDSHAKE.response(error_code=0, mechanisms=["PLAIN"]))
    ex.step()
    with pytest.raises(SaslError, match="SASL re-authentication failed"):
        ex.authenticate_response(SASL_AUTHENTICATE.response(
            error_code=58, error_message="Authentication failed: Invalid username or password",
            auth_bytes=b""))  # fmt: skip
