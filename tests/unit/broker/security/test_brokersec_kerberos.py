"""Kafka's Kerberos principal mapping (`sasl.kerberos.principal.to.local.rules`, the
cases of Kafka's KerberosRuleTest/KerberosNameTest) and the RFC 4752 server exchange
of GssapiServer over a scripted GSS-API context."""

from __future__ import annotations

from pathlib import Path

import pytest

from kt.broker.config import ConfigError, load_config
from kt.broker.security.kerberos import (
    GssapiServer,
    KerberosConfigError,
    KerberosName,
    KerberosShortNamer,
    NoMatchingRule,
)
from kt.broker.security.sasl import SaslError

REALM = "EXAMPLE.COM"


def short(rules: str, name: str) -> str:
    return KerberosShortNamer(rules, REALM).short_name(KerberosName.parse(name))


def test_parse_names() -> None:
    assert KerberosName.parse("kafka/host.example.com@EXAMPLE.COM") == KerberosName(
        "kafka", "host.example.com", "EXAMPLE.COM")  # fmt: skip
    assert KerberosName.parse("alice@EXAMPLE.COM") == KerberosName("alice", None, "EXAMPLE.COM")
    assert KerberosName.parse("alice") == KerberosName("alice", None, None)
    assert str(KerberosName.parse("kafka/h@R")) == "kafka/h@R"


def test_default_strips_the_default_realm_only() -> None:
    assert short("DEFAULT", "alice@EXAMPLE.COM") == "alice"
    assert short("DEFAULT", "kafka/broker1@EXAMPLE.COM") == "kafka"
    assert short("DEFAULT", "alice") == "alice"
    with pytest.raises(NoMatchingRule, match=r"No rules apply to alice@OTHER\.COM, rules \["):
        short("DEFAULT", "alice@OTHER.COM")


def test_rules_as_kafka_documents_them() -> None:
    rules = "RULE:[1:$1@$0](.*@MYDOMAIN.COM)s/@.*//,DEFAULT"
    assert short(rules, "bob@MYDOMAIN.COM") == "bob"
    assert short(rules, "carol@EXAMPLE.COM") == "carol"
    # two components: the format picks the host, the substitution rewrites it
    rules = r"RULE:[2:$1;$2](kafka;.*)s/kafka;(.*)\.example\.com/broker-$1/"
    assert short(rules, "kafka/b1.example.com@EXAMPLE.COM") == "broker-b1"
    # the component count must match: a one-part name falls through to nothing
    with pytest.raises(NoMatchingRule):
        short(rules, "kafka@EXAMPLE.COM")


def test_case_global_and_non_simple_results() -> None:
    assert short("RULE:[1:$1]/L", "Alice@EXAMPLE.COM") == "alice"
    assert short("RULE:[1:$1]/U", "alice@EXAMPLE.COM") == "ALICE"
    with pytest.raises(NoMatchingRule):  # the match must cover the whole formatted name
        short("RULE:[1:$1](a.*)s/a/x/g", "banana@EXAMPLE.COM")
    assert short("RULE:[1:$1](b.*)s/a/x/g", "banana@EXAMPLE.COM") == "bxnxnx"
    assert short("RULE:[1:$1](b.*)s/a/x/", "banana@EXAMPLE.COM") == "bxnana"
    with pytest.raises(NoMatchingRule, match=r"Non-simple name alice@EXAMPLE\.COM"):
        short("RULE:[1:$1@$0]", "alice@EXAMPLE.COM")


@pytest.mark.parametrize("rules", ["RULE:[1:$1", "NOTARULE", "RULE:[1:$1](a(b)s/x/y/"])
def test_invalid_rules_are_refused(rules: str) -> None:
    with pytest.raises(KerberosConfigError, match="Invalid rule"):
        KerberosShortNamer(rules, REALM)


class FakeContext:
    """A GSS context that completes after one token and 'wraps' by prefixing."""

    def __init__(self, initiator: str) -> None:
        self.complete = False
        self.initiator = initiator
        self.wrapped: list[bytes] = []

    def step(self, token: bytes) -> bytes:
        assert token == b"AP-REQ"
        self.complete = True
        return b"AP-REP"

    def wrap(self, data: bytes) -> bytes:
        self.wrapped.append(data)
        return b"W" + data

    def unwrap(self, data: bytes) -> bytes:
        assert data.startswith(b"W")
        return data[1:]


def test_rfc4752_exchange_maps_the_authenticated_principal() -> None:
    ctx = FakeContext("alice@EXAMPLE.COM")
    server = GssapiServer(ctx, KerberosShortNamer("DEFAULT", REALM))
    assert server.evaluate(b"AP-REQ") == b"AP-REP"
    assert not server.complete
    # the offer: no security layer only, max buffer 0
    assert server.evaluate(b"") == b"W\x01\x00\x00\x00"
    # the client's choice names another authorization id: Kafka ignores it
    assert server.evaluate(b"W\x01\x00\x00\x00mallory") == b""
    assert server.complete and server.authorization_id == "alice"


def test_a_security_layer_or_unmapped_principal_fails() -> None:
    server = GssapiServer(FakeContext("alice@EXAMPLE.COM"), KerberosShortNamer("DEFAULT", REALM))
    server.evaluate(b"AP-REQ")
    server.evaluate(b"")
    with pytest.raises(SaslError, match="security layer 0x04"):
        server.evaluate(b"W\x04\x00\x10\x00")
    server = GssapiServer(FakeContext("eve@OTHER.COM"), KerberosShortNamer("DEFAULT", REALM))
    server.evaluate(b"AP-REQ")
    server.evaluate(b"")
    with pytest.raises(SaslError, match=r"Failed to set name for 'eve@OTHER\.COM'"):
        server.evaluate(b"W\x01\x00\x00\x00")
    assert not server.complete


# --- the broker's settings -------------------------------------------------------------------

_KRB5 = "com.sun.security.auth.module.Krb5LoginModule"
_GOOD = f'{_KRB5} required useKeyTab=true keyTab="/nonexistent.keytab" principal="kafka/h@R";'


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        ({}, "listener.name.sasl_plaintext.gssapi.sasl.jaas.config is not set"),
        ({"jaas": "org.apache.kafka.common.security.plain.PlainLoginModule required;"},
         "the broker's Kerberos login is read from com.sun.security.auth.module"),
        ({"jaas": f'{_KRB5} required keyTab="/k" principal="kafka/h@R";'},
         "set useKeyTab=true, keyTab and principal"),
        ({"jaas": f'{_KRB5} required useKeyTab=true principal="kafka/h@R";'},
         "set useKeyTab=true, keyTab and principal"),
        ({"jaas": _GOOD, "sasl.kerberos.service.name": ""},
         "No serviceName defined in either JAAS or Kafka config"),
        ({"jaas": _GOOD.replace(";", ' serviceName="other";'),
          "sasl.kerberos.service.name": "kafka"},
         "Conflicting serviceName values found in JAAS and Kafka configs"),
        ({"jaas": _GOOD, "sasl.kerberos.principal.to.local.rules": "RULE:[1:$1"},
         "Invalid rule: RULE:[1:$1"),
        ({"jaas": _GOOD}, "cannot use the keys of kafka/h@R in keytab /nonexistent.keytab"),
    ],
)  # fmt: skip
def test_broker_settings_that_cannot_work_are_start_up_errors(
    tmp_path: Path, extra: dict[str, str], message: str
) -> None:
    pytest.importorskip("gssapi")
    overrides = {
        "log.dirs": str(tmp_path / "d"),
        "listeners": "PLAINTEXT://127.0.0.1:9092,SASL_PLAINTEXT://127.0.0.1:9093",
        "sasl.enabled.mechanisms": "GSSAPI",
        "sasl.kerberos.service.name": "kafka",
    }
    for key, value in extra.items():
        if key == "jaas":
            overrides["listener.name.sasl_plaintext.gssapi.sasl.jaas.config"] = value
        elif value:
            overrides[key] = value
        else:
            overrides.pop(key)
    with pytest.raises(ConfigError) as info:
        load_config(overrides=overrides)
    assert message in str(info.value)
    assert "\n" not in str(info.value)


def test_a_raw_first_token_starts_gssapi_only_when_enabled_and_first() -> None:
    """Kafka 0.9's clients: a first frame that is no request is a GSSAPI token."""
    from kt.broker.security.authenticator import SaslAuthenticator, SaslSettings, State
    from kt.protocol import apis

    namer = KerberosShortNamer("DEFAULT", REALM)
    gss = SaslSettings(("GSSAPI",), {"GSSAPI": lambda: GssapiServer(FakeContext("a@EXAMPLE.COM"),
                                                                   namer)}, {})  # fmt: skip
    a = SaslAuthenticator(gss, "127.0.0.1", lambda: 0.0)
    assert a.start_raw_gssapi() and a.expects_raw
    assert a.on_raw_frame(b"AP-REQ").raw == b"AP-REP"
    assert a.on_raw_frame(b"").raw == b"W\x01\x00\x00\x00"
    assert a.on_raw_frame(b"W\x01\x00\x00\x00").raw is None
    assert a.complete and a.principal == "User:a"
    # not after the connection's first request, and not without GSSAPI
    b = SaslAuthenticator(gss, "127.0.0.1", lambda: 0.0)
    b.on_request(apis.API_VERSIONS.key, 0, None)
    assert not b.start_raw_gssapi() and b.state == State.HANDSHAKE
    plain = SaslSettings(("PLAIN",), {}, {})
    assert not SaslAuthenticator(plain, "127.0.0.1", lambda: 0.0).start_raw_gssapi()
