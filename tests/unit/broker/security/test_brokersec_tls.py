"""TLS contexts from Kafka's ssl.* keys (PEM files, inline PEM, PKCS12, truststores,
client auth, protocols, ciphers) checked with real in-memory handshakes, and the
principal from a certificate through ssl.principal.mapping.rules."""

from __future__ import annotations

import ssl
from pathlib import Path

import pytest
from brokersec_certs import CA, handshake

from kt.broker.security.listeners import ListenerConfig
from kt.broker.security.principal import (
    ANONYMOUS,
    PrincipalMappingError,
    SslPrincipalMapper,
    certificate_dn,
    ssl_principal,
)
from kt.broker.security.tls import (
    TlsConfigError,
    client_context,
    openssl_cipher_name,
    server_context,
)


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> dict[str, object]:
    tmp = tmp_path_factory.mktemp("pki")
    ca = CA()
    server = ca.issue("CN=broker1,OU=kafka,O=kt", ("localhost", "127.0.0.1"))
    client = ca.issue("CN=alice,OU=ServiceUsers,O=kt")
    return {"ca": ca, "server": server, "client": client,
            "s": ca.write(tmp, "server", server), "c": ca.write(tmp, "client", client)}  # fmt: skip


def lc(props: dict[str, str], protocol: str = "SSL", name: str = "SSL") -> ListenerConfig:
    return ListenerConfig(props, name, protocol)


def _client(pki: dict[str, object], cert: bool = False) -> ssl.SSLContext:
    c: dict[str, Path] = pki["c"]  # type: ignore[assignment]
    props = {"ssl.truststore.type": "PEM", "ssl.truststore.location": str(c["ca"])}
    if cert:
        props |= {"ssl.keystore.type": "PEM", "ssl.keystore.location": str(c["pem"])}
    return client_context(lc(props))


def test_pem_file_keystore_and_anonymous_client(pki: dict[str, object]) -> None:
    s: dict[str, Path] = pki["s"]  # type: ignore[assignment]
    ctx = server_context(lc({"ssl.keystore.type": "PEM", "ssl.keystore.location": str(s["pem"])}))
    srv, cli = handshake(ctx, _client(pki))
    assert srv.getpeercert(binary_form=True) is None
    assert ssl_principal(None, SslPrincipalMapper()) == ANONYMOUS
    assert cli.version() == "TLSv1.3"


def test_inline_encrypted_pem_and_required_client_auth(pki: dict[str, object]) -> None:
    server = pki["server"]
    props = {
        "ssl.keystore.type": "PEM",
        "ssl.keystore.key": server.key_pem(b"kpw").decode(),  # type: ignore[attr-defined]
        "ssl.keystore.certificate.chain": server.chain_pem().decode(),  # type: ignore[attr-defined]
        "ssl.key.password": "kpw",
        "ssl.truststore.type": "PEM",
        "ssl.truststore.certificates": pki["ca"].pem().decode(),  # type: ignore[attr-defined]
        "ssl.client.auth": "required",
    }
    ctx = server_context(lc(props))
    srv, _ = handshake(ctx, _client(pki, cert=True))
    der = srv.getpeercert(binary_form=True)
    assert der is not None
    assert certificate_dn(der) == "CN=alice,OU=ServiceUsers,O=kt"
    mapper = SslPrincipalMapper("RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/,DEFAULT")
    assert ssl_principal(der, mapper) == "User:alice"
    with pytest.raises(ssl.SSLError):
        handshake(ctx, _client(pki))


def test_pkcs12_keystore_and_truststore_requested_auth(pki: dict[str, object]) -> None:
    s: dict[str, Path] = pki["s"]  # type: ignore[assignment]
    ca = pki["ca"]
    tmp = s["p12"].parent
    trust = tmp / "trust.p12"
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.serialization import pkcs12

    trust.write_bytes(pkcs12.serialize_key_and_certificates(
        None, None, None, [ca.cert],  # type: ignore[attr-defined]
        serialization.BestAvailableEncryption(b"tpw")))  # fmt: skip
    props = {"ssl.keystore.type": "PKCS12", "ssl.keystore.location": str(s["p12"]),
             "ssl.keystore.password": "pw", "ssl.truststore.type": "PKCS12",
             "ssl.truststore.location": str(trust), "ssl.truststore.password": "tpw",
             "ssl.client.auth": "requested"}  # fmt: skip
    ctx = server_context(lc(props))
    srv, _ = handshake(ctx, _client(pki))
    assert srv.getpeercert(binary_form=True) is None  # accepted without: ANONYMOUS
    srv, _ = handshake(ctx, _client(pki, cert=True))
    assert srv.getpeercert(binary_form=True) is not None


def test_client_verifies_the_broker_hostname(pki: dict[str, object]) -> None:
    s: dict[str, Path] = pki["s"]  # type: ignore[assignment]
    ctx = server_context(lc({"ssl.keystore.type": "PEM", "ssl.keystore.location": str(s["pem"])}))
    with pytest.raises(ssl.SSLCertVerificationError):
        handshake(ctx, _client(pki), server_hostname="other.example")
    c: dict[str, Path] = pki["c"]  # type: ignore[assignment]
    lax = client_context(lc({"ssl.truststore.type": "PEM", "ssl.truststore.location": str(c["ca"]),
                             "ssl.endpoint.identification.algorithm": ""}))  # fmt: skip
    handshake(ctx, lax, server_hostname="other.example")


def test_protocols_and_ciphers(pki: dict[str, object]) -> None:
    s: dict[str, Path] = pki["s"]  # type: ignore[assignment]
    base = {"ssl.keystore.type": "PEM", "ssl.keystore.location": str(s["pem"])}
    tls12 = server_context(lc(base | {"ssl.enabled.protocols": "TLSv1.2"}))
    _, cli = handshake(tls12, _client(pki))
    assert cli.version() == "TLSv1.2"
    # Java's names work; only TLS 1.2 suites given: TLS 1.3 is off
    one = server_context(lc(base | {
        "ssl.cipher.suites": "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256"}))  # fmt: skip
    _, cli = handshake(one, _client(pki))
    assert cli.version() == "TLSv1.2"
    assert cli.cipher()[0] == "ECDHE-ECDSA-AES128-GCM-SHA256"  # type: ignore[index]
    with pytest.raises(TlsConfigError, match=r"ssl\.enabled\.protocols"):
        server_context(lc(base | {"ssl.enabled.protocols": "SSLv3"}))
    with pytest.raises(TlsConfigError, match=r"ssl\.cipher\.suites: TLS_FOO_WITH_BAR"):
        server_context(lc(base | {"ssl.cipher.suites": "TLS_FOO_WITH_BAR"}))


@pytest.mark.parametrize(
    ("java", "openssl"),
    [("TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384", "ECDHE-RSA-AES256-GCM-SHA384"),
     ("TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256", "ECDHE-ECDSA-CHACHA20-POLY1305"),
     ("TLS_RSA_WITH_AES_128_CBC_SHA", "AES128-SHA"),
     ("TLS_DHE_RSA_WITH_AES_128_CBC_SHA256", "DHE-RSA-AES128-SHA256"),
     ("TLS_AES_128_GCM_SHA256", "TLS_AES_128_GCM_SHA256"),
     ("ECDHE-RSA-AES128-GCM-SHA256", "ECDHE-RSA-AES128-GCM-SHA256")],
)  # fmt: skip
def test_cipher_names(java: str, openssl: str) -> None:
    assert openssl_cipher_name(java) == openssl


def test_keystore_errors_name_the_setting(pki: dict[str, object], tmp_path: Path) -> None:
    s: dict[str, Path] = pki["s"]  # type: ignore[assignment]
    server = pki["server"]
    key = server.key_pem().decode()  # type: ignore[attr-defined]
    chain = server.chain_pem().decode()  # type: ignore[attr-defined]
    cases = [
        ({}, "has no keystore"),
        ({"ssl.keystore.location": str(s["p12"])}, "ssl.keystore.type=JKS: kt reads PKCS12"),
        ({"ssl.keystore.type": "PKCS12", "ssl.keystore.location": str(s["p12"])},
         "SSL key store is specified, but key store password is not specified."),
        ({"ssl.keystore.type": "PKCS12", "ssl.keystore.location": str(s["p12"]),
          "ssl.keystore.password": "wrong"}, "ssl.keystore.password is wrong"),
        ({"ssl.keystore.type": "PKCS12", "ssl.keystore.key": key},
         "SSL private key can be specified only for PEM, but key store type is PKCS12."),
        ({"ssl.keystore.type": "PEM", "ssl.keystore.key": key},
         "SSL private key is specified, but certificate chain is not specified."),
        ({"ssl.keystore.type": "PEM", "ssl.keystore.key": key,
          "ssl.keystore.certificate.chain": chain, "ssl.keystore.location": "/x"},
         "Both SSL key store location and separate private key are specified."),
        ({"ssl.keystore.type": "PEM", "ssl.keystore.key": key + key,
          "ssl.keystore.certificate.chain": chain}, "Expected one private key, but found 2"),
        ({"ssl.keystore.type": "PEM", "ssl.keystore.location": str(s["pem"]),
          "ssl.keystore.password": "x"},
         "SSL key store password cannot be specified with PEM format"),
        ({"ssl.keystore.type": "PEM", "ssl.keystore.location": str(tmp_path / "nope")},
         "ssl.keystore.location="),
        ({"ssl.keystore.type": "PEM", "ssl.keystore.location": str(s["pem"]),
          "ssl.client.auth": "required"}, "needs a truststore"),
    ]  # fmt: skip
    for props, message in cases:
        with pytest.raises(TlsConfigError) as info:
            server_context(lc(props))
        assert message in str(info.value), props
        assert "PRIVATE KEY" not in str(info.value)


def test_a_key_not_matching_its_certificate(pki: dict[str, object]) -> None:
    server, client = pki["server"], pki["client"]
    props = {"ssl.keystore.type": "PEM",
             "ssl.keystore.key": client.key_pem().decode(),  # type: ignore[attr-defined]
             "ssl.keystore.certificate.chain": server.chain_pem().decode()}  # type: ignore[attr-defined]  # fmt: skip
    with pytest.raises(TlsConfigError, match="does not match"):
        server_context(lc(props))


# --- ssl.principal.mapping.rules ---------------------------------------------------------

DOC_RULES = (
    "RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/,\n"
    "RULE:^CN=(.*?),OU=(.*?),O=(.*?),L=(.*?),ST=(.*?),C=(.*?)$/$1@$2/L,\n"
    "RULE:^.*[Cc][Nn]=([a-zA-Z0-9.]*).*$/$1/L,\n"
    "DEFAULT"
)


@pytest.mark.parametrize(
    ("dn", "name"),
    [
        ("CN=serviceuser,OU=ServiceUsers,O=Unknown,L=Unknown,ST=Unknown,C=Unknown", "serviceuser"),
        ("CN=adminUser,OU=Admin,O=Unknown,L=Unknown,ST=Unknown,C=Unknown", "adminuser@admin"),
        ("OU=x,CN=Mixed.Case,O=y", "mixed.case"),
        ("O=no-common-name", "O=no-common-name"),
    ],
)
def test_kafkas_documented_rules(dn: str, name: str) -> None:
    assert SslPrincipalMapper(DOC_RULES).name(dn) == name


def test_rules_upper_escaped_slash_and_no_match() -> None:
    m = SslPrincipalMapper(r"RULE:^CN=([^,]*)\/x,.*$/$1/U")
    assert m.name("CN=a/x,O=b") == "A"
    with pytest.raises(PrincipalMappingError, match="No rules apply to CN=b,O=c"):
        m.name("CN=b,O=c")
    assert SslPrincipalMapper("RULE:^CN=(.*)$/$1-$2/").name("CN=z") == "z-$2"
    assert SslPrincipalMapper(None).name("CN=z") == "CN=z"
    with pytest.raises(PrincipalMappingError, match="Invalid rule"):
        SslPrincipalMapper("RULE:^CN=(.*$/$1/")
