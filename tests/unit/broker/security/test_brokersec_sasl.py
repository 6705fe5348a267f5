"""SASL server mechanisms: the JAAS syntax, PLAIN and SCRAM with Kafka's messages,
the RFC 7677 vector, an independent client (kafka-python's), the CVE-2024-56128 nonce
check, and SCRAM credentials in Kafka's ZooKeeper format."""

from __future__ import annotations

import base64
import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kafka.net.sasl.scram import ScramClient

from kt.broker.security import scram
from kt.broker.security.jaas import JaasConfigError, parse_jaas, single_module
from kt.broker.security.sasl import (
    IllegalSaslStateError,
    PlainServer,
    SaslAuthenticationError,
    SaslError,
    client_message,
    plain_users,
)

# --- JAAS ------------------------------------------------------------------------------


def test_jaas_as_kafka_documents_it() -> None:
    mod = single_module(
        "org.apache.kafka.common.security.plain.PlainLoginModule required\n"
        '    username="admin" password="admin-secret" user_admin="admin-secret"\n'
        "    user_alice='al\\\"ice' /* a comment */ user_bob=bare-word_$1; // trailing"
    )
    assert mod.name == "org.apache.kafka.common.security.plain.PlainLoginModule"
    assert mod.flag == "required"
    assert plain_users(mod.options) == {"admin": "admin-secret", "alice": 'al"ice',
                                        "bob": "bare-word_$1"}  # fmt: skip
    assert "admin-secret" not in repr(mod)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('a.B required x="1"', "JAAS config entry not terminated by semi-colon"),
        ("a.B required x=8192;", "Value not specified for key 'x' in JAAS config"),
        ("a.B required x=;", "Value not specified for key 'x' in JAAS config"),
        ("a.B mandatory;", "Invalid login module control flag 'mandatory' in JAAS config"),
        ("a.B required; c.D optional;", "JAAS config property contains 2 login modules"),
        ("", "JAAS config property contains 0 login modules, should be 1 module"),
    ],
)
def test_jaas_errors_are_kafkas(text: str, message: str) -> None:
    with pytest.raises(JaasConfigError) as info:
        single_module(text)
    assert str(info.value) == message or message in str(info.value)


def test_jaas_flags_any_case_and_several_modules() -> None:
    mods = parse_jaas('A REQUIRED; B Optional k="v";')
    assert [(m.name, m.flag, m.options) for m in mods] == [
        ("A", "required", {}), ("B", "optional", {"k": "v"})]  # fmt: skip


# --- PLAIN -----------------------------------------------------------------------------

USERS = {"alice": "alice-secret", "admin": "admin-secret"}


def test_plain_success_and_principal() -> None:
    server = PlainServer(USERS)
    assert server.evaluate(b"\0alice\0alice-secret") == b""
    assert server.complete and server.authorization_id == "alice"
    with pytest.raises(IllegalSaslStateError):
        server.evaluate(b"\0alice\0alice-secret")


@pytest.mark.parametrize(
    ("token", "message"),
    [
        (b"alice\0alice-secret", "Invalid SASL/PLAIN response: expected 3 tokens, got 2"),
        (b"a\0b\0c\0d", "Invalid SASL/PLAIN response: expected 3 tokens, got 4"),
        (b"\0\0pw", "Authentication failed: username not specified"),
        (b"\0alice\0", "Authentication failed: password not specified"),
        (b"\0alice\0wrong", "Authentication failed: Invalid username or password"),
        (b"\0mallory\0alice-secret", "Authentication failed: Invalid username or password"),
        (b"admin\0alice\0alice-secret",
         "Authentication failed: Client requested an authorization id that is different "
         "from username"),
    ],
)  # fmt: skip
def test_plain_failures_reach_the_client_verbatim(token: bytes, message: str) -> None:
    server = PlainServer(USERS)
    with pytest.raises(SaslAuthenticationError) as info:
        server.evaluate(token)
    assert client_message(info.value, "PLAIN") == message
    assert not server.complete


def test_plain_authzid_equal_to_the_user_is_fine() -> None:
    server = PlainServer(USERS)
    server.evaluate(b"alice\0alice\0alice-secret")
    assert server.authorization_id == "alice"


def test_generic_message_hides_the_reason() -> None:
    exc = SaslError("Authentication failed: Invalid user credentials")
    assert client_message(exc, "SCRAM-SHA-256") == (
        "Authentication failed during authentication due to invalid credentials with SASL "
        "mechanism SCRAM-SHA-256"
    )
    assert "re-authentication due" in client_message(exc, "PLAIN", reauthenticating=True)


# --- SCRAM -----------------------------------------------------------------------------

SHA256 = scram.MECHANISMS["SCRAM-SHA-256"]
SHA512 = scram.MECHANISMS["SCRAM-SHA-512"]


def test_rfc7677_vector() -> None:
    salt = base64.b64decode("W22ZaJ0SNY7soEsUEjb6gQ==")
    cred = scram.make_credential(SHA256, "pencil", 4096, salt)
    server = scram.ScramServer(SHA256, {"user": cred}.get,
                               nonce=lambda: "%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0")  # fmt: skip
    first = server.evaluate(b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO")
    assert first == (
        b"r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096"
    )
    final = server.evaluate(
        b"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,"
        b"p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ="
    )
    assert final == b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="
    assert server.complete and server.authorization_id == "user"
    assert server.credential_expiry_ms is None


def _exchange(mech: scram.ScramMechanism, store: dict[str, scram.ScramCredential],
              user: str, password: str) -> scram.ScramServer:  # fmt: skip
    client = ScramClient(user, password, mech.name)
    server = scram.ScramServer(mech, store.get)
    client.process_server_first_message(server.evaluate(client.first_message()))
    client.process_server_final_message(server.evaluate(client.final_message()))
    return server


@pytest.mark.parametrize("mech", [SHA256, SHA512], ids=lambda m: m.name)
def test_an_independent_client_authenticates(mech: scram.ScramMechanism) -> None:
    store = {"alice": scram.make_credential(mech, "alice-secret", 8192)}
    assert _exchange(mech, store, "alice", "alice-secret").authorization_id == "alice"


@pytest.mark.parametrize("mech", [SHA256, SHA512], ids=lambda m: m.name)
def test_wrong_password_and_unknown_user_fail_alike_for_the_client(
    mech: scram.ScramMechanism,
) -> None:
    store = {"alice": scram.make_credential(mech, "alice-secret")}
    with pytest.raises(SaslError) as wrong:
        _exchange(mech, store, "alice", "nope")
    with pytest.raises(SaslError) as unknown:
        _exchange(mech, store, "bob", "alice-secret")
    assert str(wrong.value) == "Invalid client credentials"
    assert str(unknown.value) == "Authentication failed: Invalid user credentials"
    assert not isinstance(wrong.value, SaslAuthenticationError)
    assert client_message(wrong.value, mech.name) == client_message(unknown.value, mech.name)


def _first(server: scram.ScramServer, user: str = "alice") -> str:
    return server.evaluate(f"n,,n={user},r=abc".encode()).decode()


def test_final_nonce_must_be_the_servers_cve_2024_56128() -> None:
    cred = scram.make_credential(SHA256, "pw")
    server = scram.ScramServer(SHA256, {"alice": cred}.get, nonce=lambda: "SRV")
    assert _first(server).startswith("r=abcSRV,")
    with pytest.raises(SaslError, match=r"Invalid client nonce in the final client message\."):
        server.evaluate(b"c=biws,r=abc,p=AAAA")
    assert not server.complete
    with pytest.raises(IllegalSaslStateError):
        server.evaluate(b"c=biws,r=abcSRV,p=AAAA")


def test_old_librdkafka_doubled_nonce_is_tolerated() -> None:
    # librdkafka before PR #4895 sent client-nonce + combined nonce; Kafka's endsWith
    # accepts it, and the proof is then computed over what it sent
    mech, password = SHA256, "pw"
    cred = scram.make_credential(mech, password, 4096, b"salt")
    server = scram.ScramServer(mech, {"alice": cred}.get, nonce=lambda: "SRV")
    server_first = _first(server)
    without = "c=biws,r=abcabcSRV"
    auth = f"n=alice,r=abc,{server_first},{without}".encode()
    salted = scram.salted_password(mech, password, b"salt", 4096)
    import hashlib
    import hmac

    client_key = hmac.new(salted, b"Client Key", "sha256").digest()
    stored = hashlib.sha256(client_key).digest()
    sig = hmac.new(stored, auth, "sha256").digest()
    proof = base64.b64encode(bytes(a ^ b for a, b in zip(client_key, sig, strict=True)))
    answer = server.evaluate(f"{without},p={proof.decode()}".encode())
    assert answer.startswith(b"v=") and server.complete


@pytest.mark.parametrize(
    ("first", "error", "to_client"),
    [
        (b"y,,n=alice,r=abc", "Invalid SCRAM client first message format", False),
        (b"n,,n=al=ice,r=abc", "Invalid SCRAM client first message format", False),
        (b"n,a=bob,n=alice,r=abc",
         "Authentication failed: Client requested an authorization id that is different "
         "from username", True),
        (b"n,,n=alice,r=abc,tokenauth=true", "Token Authentication failed", False),
    ],
)  # fmt: skip
def test_first_message_failures(first: bytes, error: str, to_client: bool) -> None:
    server = scram.ScramServer(SHA256, {"alice": scram.make_credential(SHA256, "pw")}.get)
    with pytest.raises(SaslError) as info:
        server.evaluate(first)
    assert error in str(info.value)
    assert isinstance(info.value, SaslAuthenticationError) is to_client


def test_escaped_names_and_ignored_extensions() -> None:
    store = {"a,b=c": scram.make_credential(SHA256, "pw")}
    server = scram.ScramServer(SHA256, store.get)
    assert server.evaluate(b"n,,n=a=2Cb=3Dc,r=xyz,foo=bar").startswith(b"r=xyz")
    assert server.extensions == {"foo": "bar"}


def test_too_few_stored_iterations_fail_with_kafkas_message() -> None:
    cred = scram.make_credential(SHA512, "pw", 1000)
    server = scram.ScramServer(SHA512, {"alice": cred}.get)
    with pytest.raises(SaslError, match="Iterations 1000 is less than the minimum 4096 for "
                                        "SCRAM_SHA_512"):  # fmt: skip
        _first(server)


def test_server_nonce_is_base36_of_130_bits() -> None:
    nonces = {scram.server_nonce() for _ in range(50)}
    assert len(nonces) == 50
    assert all(set(n) <= set("0123456789abcdefghijklmnopqrstuvwxyz") for n in nonces)
    assert all(len(n) <= 26 for n in nonces)


# --- credentials as Kafka stores them ---------------------------------------------------


def test_credential_string_and_znode_format() -> None:
    cred = scram.make_credential(SHA256, "alice-secret", 8192, b"0123456789")
    text = scram.credential_to_string(cred)
    assert text.startswith("salt=MDEyMzQ1Njc4OQ==,stored_key=") and text.endswith(
        ",iterations=8192"
    )
    assert scram.credential_from_string(text) == cred
    data = scram.encode_user_config({"SCRAM-SHA-256": text, "producer_byte_rate": "1024"})
    doc = json.loads(data)
    assert doc == {"version": 1, "config": {"SCRAM-SHA-256": text, "producer_byte_rate": "1024"}}
    config = scram.decode_user_config(data)
    assert scram.credentials_of(config) == {"SCRAM-SHA-256": cred}
    assert scram.decode_user_config(b"") == {}


@pytest.mark.parametrize(
    "text",
    ["salt=AA==,stored_key=AA==,server_key=AA==", "salt=AA==,stored_key=AA==,server_key=AA==,"
     "iterations=x", "salt=AA==,stored_key=AA==,server_key=AA==,iterations=1,extra=1",
     "salt=!!,stored_key=AA==,server_key=AA==,iterations=4096"],
)  # fmt: skip
def test_malformed_credentials_are_refused_without_echoing_secrets(text: str) -> None:
    with pytest.raises(ValueError, match="Credentials not valid") as info:
        scram.credential_from_string(text)
    assert "AA==" not in str(info.value)


def test_a_credential_kafka_wrote_authenticates() -> None:
    # the salt Kafka's ZK path uses is the UTF-8 of a base-36 string; stored and server
    # keys computed independently here from RFC 5802's definitions
    salt = b"1a2b3c4d5e6f"
    cred = scram.make_credential(SHA512, "secret", 4096, salt)
    znode = scram.encode_user_config({"SCRAM-SHA-512": scram.credential_to_string(cred)})
    store = scram.credentials_of(scram.decode_user_config(znode))
    assert _exchange(SHA512, {"svc": store["SCRAM-SHA-512"]}, "svc", "secret").complete


@pytest.mark.parametrize(
    ("user", "node"),
    [("alice", "alice"), ("a b", "a%20b"), ("a*b", "a%2Ab"), ("CN=x,O=y", "CN%3Dx%2CO%3Dy"),
     ("é~", "%C3%A9%7E"), ("a.b-c_d", "a.b-c_d")],
)  # fmt: skip
def test_sanitized_user_paths(user: str, node: str) -> None:
    assert scram.user_config_path(user) == f"/config/users/{node}"
    assert scram.desanitize(node) == user
    assert json.loads(scram.change_notification(user)) == {
        "version": 2, "entity_path": f"users/{node}"}  # fmt: skip


@settings(max_examples=30, deadline=None)
@given(st.text(min_size=1, max_size=20))
def test_sanitize_round_trips(user: str) -> None:
    node = scram.sanitize(user)
    assert "/" not in node and scram.desanitize(node) == user


@settings(max_examples=25, deadline=None)
@given(st.binary(max_size=64))
def test_garbage_tokens_fail_cleanly(token: bytes) -> None:
    server = scram.ScramServer(SHA256, {"alice": scram.make_credential(SHA256, "pw")}.get)
    try:
        server.evaluate(token)
    except SaslError:
        return
    with pytest.raises(SaslError):
        server.evaluate(token)
