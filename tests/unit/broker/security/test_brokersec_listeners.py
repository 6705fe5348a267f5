"""Listener resolution as Kafka 3.8 does it, and the start-up refusal of security
settings the broker does not implement (never silently served in plaintext)."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kt.broker.config import ConfigError, load_config
from kt.broker.security.listeners import (
    EndPoint,
    ListenerConfig,
    ListenerConfigError,
    parse_endpoints,
    parse_protocol_map,
    resolve_listeners,
)

DEFAULT_MAP = {p: p for p in ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")}


def test_defaults_are_kafkas() -> None:
    res = resolve_listeners({})
    assert res.listeners == (EndPoint("PLAINTEXT", "", 9092, "PLAINTEXT"),)
    assert res.advertised == res.listeners and not res.advertised_given
    assert (res.inter_broker_listener, res.inter_broker_protocol) == ("PLAINTEXT", "PLAINTEXT")


def test_several_listeners_with_a_map_and_an_inter_broker_name() -> None:
    res = resolve_listeners({
        "listeners": "client://:9092,REPLICATION://10.0.0.1:9093,ext://[::1]:9094",
        "advertised.listeners": "CLIENT://h1:9092,REPLICATION://h1:9093",
        "listener.security.protocol.map": "CLIENT:sasl_ssl,REPLICATION:SSL,EXT:PLAINTEXT",
        "inter.broker.listener.name": "replication",
    })  # fmt: skip
    assert [str(ep) for ep in res.listeners] == [
        "CLIENT://:9092", "REPLICATION://10.0.0.1:9093", "EXT://[::1]:9094"]  # fmt: skip
    assert res.by_name("EXT").host == "::1"
    assert [ep.protocol for ep in res.listeners] == ["SASL_SSL", "SSL", "PLAINTEXT"]
    assert res.inter_broker_listener == "REPLICATION"
    assert res.inter_broker_protocol == "SSL"
    assert res.protocols == {"SASL_SSL", "SSL", "PLAINTEXT"}


@pytest.mark.parametrize(
    ("props", "message"),
    [
        ({"listeners": "CLIENT://:9092"},
         "listeners: No security protocol defined for listener CLIENT"),
        ({"listeners": "PLAINTEXT:9092"},
         "listeners: Unable to parse PLAINTEXT:9092 to a broker endpoint"),
        ({"listeners": "PLAINTEXT://h:70000"}, "listeners: port 70000"),
        ({"listeners": "PLAINTEXT://:9092,plaintext://:9093"},
         "Each listener must have a different name"),
        ({"listeners": "PLAINTEXT://:9092,SSL://:9092"},
         "Each listener must have a different port"),
        ({"listeners": "PLAINTEXT://:9092", "advertised.listeners": "SSL://h:9093"},
         "advertised.listeners listener names must be equal to or a subset"),
        ({"listeners": "PLAINTEXT://:9092", "advertised.listeners": "PLAINTEXT://0.0.0.0:9092"},
         "advertised.listeners cannot use the nonroutable meta-address 0.0.0.0"),
        ({"listener.security.protocol.map": "A:TLS", "listeners": "A://:1"},
         "listener.security.protocol.map: unknown security protocol 'TLS'"),
        ({"listener.security.protocol.map": "A", "listeners": "A://:1"},
         "listener.security.protocol.map: 'A' is not NAME:PROTOCOL"),
        ({"inter.broker.listener.name": "X", "security.inter.broker.protocol": "SSL"},
         "Only one of inter.broker.listener.name and security.inter.broker.protocol"),
        ({"inter.broker.listener.name": "X"},
         "Listener with name X defined in inter.broker.listener.name not found"),
        ({"listeners": "SSL://:9093"},
         "inter.broker.listener.name must be a listener name defined in advertised.listeners"),
        ({"security.inter.broker.protocol": "TLS"}, "security.inter.broker.protocol: unknown"),
        ({"listeners": "SASL_SSL://:9093", "security.inter.broker.protocol": "SASL_SSL",
          "sasl.enabled.mechanisms": "PLAIN"},
         "sasl.mechanism.inter.broker.protocol must be included in sasl.enabled.mechanisms"),
    ],
)  # fmt: skip
def test_invalid_settings_are_refused_naming_the_key(props: dict[str, str], message: str) -> None:
    with pytest.raises(ListenerConfigError, match=None) as info:
        resolve_listeners(props)
    assert message in str(info.value)


def test_inter_broker_sasl_mechanism_per_listener() -> None:
    props = {
        "listeners": "SASL_SSL://:9093",
        "security.inter.broker.protocol": "SASL_SSL",
        "listener.name.sasl_ssl.sasl.enabled.mechanisms": "SCRAM-SHA-512,PLAIN",
        "sasl.mechanism.inter.broker.protocol": "SCRAM-SHA-512",
    }
    assert resolve_listeners(props).inter_broker_listener == "SASL_SSL"


def test_listener_prefixed_settings_win_and_mechanism_keys_have_no_fallback() -> None:
    props = {
        "ssl.keystore.location": "/all.p12",
        "listener.name.internal.ssl.keystore.location": "/internal.p12",
        "sasl.jaas.config": "ignored by brokers",
        "listener.name.internal.plain.sasl.jaas.config": "jaas",
        "connections.max.reauth.ms": "5000",
        "listener.name.internal.oauthbearer.connections.max.reauth.ms": "7000",
    }
    lc = ListenerConfig(props, "INTERNAL", "SASL_SSL")
    assert lc.prefix == "listener.name.internal."
    assert lc.get("ssl.keystore.location") == "/internal.p12"
    assert ListenerConfig(props, "OTHER", "SSL").get("ssl.keystore.location") == "/all.p12"
    assert lc.mechanism_get("PLAIN", "sasl.jaas.config") == "jaas"
    assert lc.mechanism_get("SCRAM-SHA-256", "sasl.jaas.config") is None
    assert lc.mechanism_get("OAUTHBEARER", "connections.max.reauth.ms") == "7000"
    assert lc.mechanism_get("PLAIN", "connections.max.reauth.ms") == "5000"
    assert lc.enabled_mechanisms() == ["GSSAPI"]


def test_ssl_client_auth_on_sasl_ssl_needs_the_listener_prefix() -> None:
    props = {"ssl.client.auth": "required"}
    assert ListenerConfig(props, "SSL", "SSL").ssl_client_auth() == "required"
    assert ListenerConfig(props, "SASL_SSL", "SASL_SSL").ssl_client_auth() == "none"
    props["listener.name.sasl_ssl.ssl.client.auth"] = "requested"
    assert ListenerConfig(props, "SASL_SSL", "SASL_SSL").ssl_client_auth() == "requested"
    with pytest.raises(ListenerConfigError, match=r"ssl\.client\.auth"):
        ListenerConfig({"ssl.client.auth": "REQUIRED"}, "SSL", "SSL").ssl_client_auth()


_names = st.from_regex(r"[A-Z][A-Z0-9_]{0,8}", fullmatch=True)


@given(st.lists(st.tuples(_names, st.sampled_from(sorted(DEFAULT_MAP)),
                          st.integers(1, 65535)), min_size=1, max_size=5,
                unique_by=(lambda t: t[0], lambda t: t[2])))  # fmt: skip
def test_rendered_endpoints_parse_back(entries: list[tuple[str, str, int]]) -> None:
    pmap = parse_protocol_map(",".join(f"{n}:{p}" for n, p, _ in entries))
    text = ",".join(
        f"{n.lower()}://host-{i}.example:{port}" for i, (n, _, port) in enumerate(entries)
    )
    eps = parse_endpoints(text, "listeners", pmap)
    assert [(e.name, e.protocol, e.port) for e in eps] == entries
    assert parse_endpoints(",".join(map(str, eps)), "listeners", pmap) == eps


# --- the broker's start-up refusal ---------------------------------------------------


def _load(tmp_path: Path, **overrides: str) -> None:
    load_config(overrides={"log.dirs": str(tmp_path / "d"), **overrides})


@pytest.mark.parametrize(
    ("overrides", "named"),
    [
        # Kafka's own rule: the inter-broker listener must exist
        ({"listeners": "SASL_SSL://127.0.0.1:9094"}, "inter.broker.listener.name must be"),
        ({"authorizer.class.name": "com.example.MyAuthorizer"},
         "authorizer.class.name=com.example.MyAuthorizer: kt's broker has the ACL authorizer"),
        ({"authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
          "super.users": "admin"}, "super.users: expected a string in format"),
        ({"super.users": "User:admin"},
         "super.users is set but authorizer.class.name is not"),
        ({"allow.everyone.if.no.acl.found": "true"}, "allow.everyone.if.no.acl.found"),
        ({"delegation.token.secret.key": "k"}, "delegation.token.secret.key"),
        # a cluster member logs in to its peers with its own credentials: the
        # inter-broker mechanism's JAAS entry needs username and password
        ({"listeners": "SASL_PLAINTEXT://127.0.0.1:9093",
          "security.inter.broker.protocol": "SASL_PLAINTEXT",
          "zookeeper.connect": "127.0.0.1:2181", "sasl.enabled.mechanisms": "PLAIN",
          "sasl.mechanism.inter.broker.protocol": "PLAIN",
          "listener.name.sasl_plaintext.plain.sasl.jaas.config":
              "org.apache.kafka.common.security.plain.PlainLoginModule required "
              'user_admin="admin-secret";'},
         "the broker's own inter-broker credentials"),
        # security that cannot work is refused, naming the key
        ({"listeners": "SSL://127.0.0.1:9093", "security.inter.broker.protocol": "SSL"},
         "has no keystore"),
        ({"listeners": "SASL_PLAINTEXT://127.0.0.1:9093",
          "security.inter.broker.protocol": "SASL_PLAINTEXT"},
         "listener.name.sasl_plaintext.gssapi.sasl.jaas.config is not set: GSSAPI needs"),
        ({"listeners": "SASL_PLAINTEXT://127.0.0.1:9093",
          "security.inter.broker.protocol": "SASL_PLAINTEXT",
          "sasl.enabled.mechanisms": "PLAIN", "sasl.mechanism.inter.broker.protocol": "PLAIN"},
         "listener.name.sasl_plaintext.plain.sasl.jaas.config is not set"),
        ({"principal.builder.class": "x.Y"}, "principal.builder.class"),
    ],
)  # fmt: skip
def test_unimplemented_security_is_a_start_up_error(
    tmp_path: Path, overrides: dict[str, str], named: str
) -> None:
    with pytest.raises(ConfigError) as info:
        _load(tmp_path, **overrides)
    assert named in str(info.value)


def test_plaintext_settings_still_start(tmp_path: Path) -> None:
    cfg = load_config(overrides={
        "log.dirs": str(tmp_path / "d"),
        "listeners": "INTERNAL://127.0.0.1:0,EXTERNAL://127.0.0.1:0",
        "listener.security.protocol.map": "INTERNAL:PLAINTEXT,EXTERNAL:PLAINTEXT",
        "inter.broker.listener.name": "INTERNAL",
        "authorizer.class.name": "",
        "listener.name.external.max.connections": "10",
    })  # fmt: skip
    assert [(lst.name, lst.protocol) for lst in cfg.listeners] == [
        ("INTERNAL", "PLAINTEXT"), ("EXTERNAL", "PLAINTEXT")]  # fmt: skip
    assert cfg.listener_settings is not None
    assert cfg.listener_settings.inter_broker_listener == "INTERNAL"
