"""The client security of a cluster member's connections to its peers, built from
the inter-broker listener's settings as Kafka's broker reads them."""

from __future__ import annotations

from pathlib import Path

import pytest
from brokersec_certs import CA

from kt.broker.config import ConfigError, load_config
from kt.broker.security.inter_broker import inter_broker_security
from kt.broker.security.listener_security import SecurityConfigError
from kt.broker.security.listeners import resolve_listeners

JAAS_KEY = "listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config"
SCRAM_JAAS = ('org.apache.kafka.common.security.scram.ScramLoginModule required '
              'username="broker" password="broker-secret";')  # fmt: skip


def _props(tmp_path: Path, **extra: str) -> dict[str, str]:
    ca = CA()
    files = ca.write(tmp_path, "b1", ca.issue("CN=b1", ("127.0.0.1",)))
    props = {
        "listeners": "SASL_SSL://127.0.0.1:9094,PLAINTEXT://127.0.0.1:9092",
        "inter.broker.listener.name": "SASL_SSL",
        "sasl.enabled.mechanisms": "SCRAM-SHA-512",
        "sasl.mechanism.inter.broker.protocol": "SCRAM-SHA-512",
        "listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config": SCRAM_JAAS,
        "ssl.keystore.type": "PEM",
        "ssl.keystore.location": str(files["pem"]),
        "ssl.truststore.type": "PEM",
        "ssl.truststore.location": str(files["ca"]),
        "zookeeper.connect": "127.0.0.1:2181",
    }
    props.update({k.replace("_", "."): v for k, v in extra.items()})
    return props


def test_sasl_ssl_scram_with_the_brokers_own_credentials(tmp_path: Path) -> None:
    props = _props(tmp_path)
    cfg = inter_broker_security(props, resolve_listeners(props))
    assert cfg.protocol == "SASL_SSL" and cfg.uses_tls and cfg.uses_sasl
    assert cfg.mechanism == "SCRAM-SHA-512"
    assert cfg.username == "broker" and cfg.password == "broker-secret"
    assert cfg.ssl_context is not None and cfg.check_hostname
    assert cfg.client_certificate
    assert "broker-secret" not in repr(cfg)


def test_hostname_verification_off_only_when_asked(tmp_path: Path) -> None:
    props = _props(tmp_path)
    props["listener.name.sasl_ssl.ssl.endpoint.identification.algorithm"] = ""
    cfg = inter_broker_security(props, resolve_listeners(props))
    assert cfg.ssl_context is not None and not cfg.check_hostname


def test_a_plaintext_inter_broker_listener_stays_plaintext(tmp_path: Path) -> None:
    props = _props(tmp_path, inter_broker_listener_name="PLAINTEXT")
    cfg = inter_broker_security(props, resolve_listeners(props))
    assert cfg.protocol == "PLAINTEXT" and cfg.ssl_context is None and cfg.mechanism is None


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (
            {"listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config": None},
            "listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config is not set",
        ),
        (
            {JAAS_KEY: "org.apache.kafka.common.security.scram.ScramLoginModule required;"},
            "the broker's own inter-broker credentials",
        ),
    ],
)
def test_unusable_credentials_are_refused_naming_the_key(
    tmp_path: Path, change: dict[str, str | None], message: str
) -> None:
    props = _props(tmp_path)
    for k, v in change.items():
        if v is None:
            props.pop(k)
        else:
            props[k] = v
    with pytest.raises(SecurityConfigError, match=message):
        inter_broker_security(props, resolve_listeners(props))


def test_a_cluster_member_loads_with_a_secured_inter_broker_listener(tmp_path: Path) -> None:
    props = _props(tmp_path)
    props["log.dirs"] = str(tmp_path / "data")
    cfg = load_config(None, props)
    assert cfg.inter_broker_client is not None
    assert cfg.inter_broker_client.protocol == "SASL_SSL"
    # the single node makes no such connections: nothing is built for it
    props.pop("zookeeper.connect")
    assert load_config(None, props).inter_broker_client is None
    props["zookeeper.connect"] = "127.0.0.1:2181"
    props["listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config"] = (
        'org.apache.kafka.common.security.plain.PlainLoginModule required username="a" '
        'password="b";'
    )
    with pytest.raises(ConfigError):
        load_config(None, props)


def test_gssapi_between_brokers_with_the_brokers_keytab(tmp_path: Path) -> None:
    """sasl.mechanism.inter.broker.protocol=GSSAPI: the broker logs in with the
    keytab and principal of its listener's Krb5LoginModule entry and asks tickets
    for sasl.kerberos.service.name; without a service name it does not start."""
    keytab = tmp_path / "broker.keytab"
    keytab.write_bytes(b"\x05\x02")  # an empty keytab: only its presence is checked here
    props = _props(tmp_path)
    props.update({
        "sasl.enabled.mechanisms": "GSSAPI",
        "sasl.mechanism.inter.broker.protocol": "GSSAPI",
        "listener.name.sasl_ssl.gssapi.sasl.jaas.config": (
            "com.sun.security.auth.module.Krb5LoginModule required useKeyTab=true "
            f'storeKey=true keyTab="{keytab}" principal="kafka/broker1@EXAMPLE.COM";'
        ),
        "sasl.kerberos.service.name": "kafka",
    })  # fmt: skip
    cfg = inter_broker_security(props, resolve_listeners(props))
    assert cfg.mechanism == "GSSAPI" and cfg.uses_tls
    assert cfg.kerberos is not None
    assert (cfg.kerberos.service, cfg.kerberos.principal, cfg.kerberos.keytab) == (
        "kafka", "kafka/broker1@EXAMPLE.COM", str(keytab))  # fmt: skip
    props.pop("sasl.kerberos.service.name")
    with pytest.raises(SecurityConfigError, match=r"sasl\.kerberos\.service\.name"):
        inter_broker_security(props, resolve_listeners(props))


def test_gssapi_between_brokers_takes_the_service_from_the_jaas_entry(tmp_path: Path) -> None:
    """serviceName="kafka" in the listener's Krb5LoginModule entry is enough, as in
    Kafka (KerberosLogin.getServiceName), kt's client and kt's listener; the two set
    to different values are refused as Kafka refuses them; neither set is refused."""
    keytab = tmp_path / "broker.keytab"
    keytab.write_bytes(b"\x05\x02")  # an empty keytab: only its presence is checked here
    key = "listener.name.sasl_ssl.gssapi.sasl.jaas.config"
    props = _props(tmp_path)
    props.update({
        "sasl.enabled.mechanisms": "GSSAPI",
        "sasl.mechanism.inter.broker.protocol": "GSSAPI",
        key: (
            "com.sun.security.auth.module.Krb5LoginModule required useKeyTab=true "
            f'storeKey=true keyTab="{keytab}" principal="kafka/broker1@EXAMPLE.COM" '
            'serviceName="kafka";'
        ),
    })  # fmt: skip
    cfg = inter_broker_security(props, resolve_listeners(props))
    assert cfg.kerberos is not None and cfg.kerberos.service == "kafka"

    props["sasl.kerberos.service.name"] = "kafka"  # the same: no conflict
    cfg = inter_broker_security(props, resolve_listeners(props))
    assert cfg.kerberos is not None and cfg.kerberos.service == "kafka"

    props["sasl.kerberos.service.name"] = "other"
    with pytest.raises(SecurityConfigError, match="Conflicting serviceName values"):
        inter_broker_security(props, resolve_listeners(props))

    props.pop("sasl.kerberos.service.name")
    props[key] = props[key].replace(' serviceName="kafka"', "")
    with pytest.raises(SecurityConfigError, match=r"sasl\.kerberos\.service\.name or serviceName"):
        inter_broker_security(props, resolve_listeners(props))
