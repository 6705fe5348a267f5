"""kt's client over TLS against a TLS implementation that is not kt's: Debian's stunnel4
terminating TLS in front of a plaintext `kt broker`, with certificates made in the
test. Commands run as users run them (the `kt` executable): their output, their
one-line errors and their exit codes."""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from broker_harness import KT, BrokerProcess, free_port
from tls_harness import PASSWORD, STUNNEL, Stunnel

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(STUNNEL is None, reason="stunnel4 not installed (scripts/setup does)"),
]


@pytest.fixture(scope="module")
def tls_cluster(tmp_path_factory: pytest.TempPathFactory, tls_pki: Path) -> Iterator[dict]:
    """A plaintext kt broker advertising localhost:<main TLS port>, and stunnel with
    services: main (server cert for localhost), mtls (client certificate required),
    wronghost (certificate for other.example), expired, stranger (another CA)."""
    tmp = tmp_path_factory.mktemp("tls")
    ports = {n: free_port() for n in ("main", "mtls", "wronghost", "expired", "stranger")}
    broker = BrokerProcess(
        tmp / "data",
        free_port(),
        overrides={
            "advertised.listeners": f"PLAINTEXT://localhost:{ports['main']}",
            "num.partitions": "1",
        },
    ).start()
    pki = tls_pki
    stunnel = Stunnel(
        tmp,
        broker.port,
        {
            "main": (ports["main"], pki / "server.pem", pki / "server.key", False),
            "mtls": (ports["mtls"], pki / "server.pem", pki / "server.key", True),
            "wronghost": (ports["wronghost"], pki / "wrong.pem", pki / "wrong.key", False),
            "expired": (ports["expired"], pki / "expired.pem", pki / "expired.key", False),
            "stranger": (ports["stranger"], pki / "stranger.pem", pki / "stranger.key", False),
        },
        pki / "ca.pem",
    )
    try:
        stunnel.start()
        yield {"broker": broker, "stunnel": stunnel, "pki": pki, "ports": ports}
    finally:
        stunnel.stop()
        broker.stop()


def kt(
    *args: str, stdin: str | None = None, timeout: float = 120
) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("KT_BOOTSTRAP")}
    return subprocess.run([KT, *args], input=stdin, capture_output=True, text=True,
                          timeout=timeout, env=env)  # fmt: skip


def ssl_args(pki: Path, *extra: str) -> list[str]:
    return ["-X", "security.protocol=SSL", "-X", f"ssl.ca.location={pki / 'ca.pem'}", *extra]


def one_error_line(r: subprocess.CompletedProcess[str]) -> str:
    assert r.returncode == 1, (r.returncode, r.stderr)
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("kt: error: "), r.stderr
    assert "Traceback" not in r.stderr
    return lines[0]


def test_commands_work_over_tls_with_a_ca_file(tls_cluster: dict) -> None:
    pki, port = tls_cluster["pki"], tls_cluster["ports"]["main"]
    b = ["-b", f"localhost:{port}", *ssl_args(pki)]
    r = kt("topic", "create", "--topic", "tls-orders", "--partitions", "2", *b)
    assert r.returncode == 0, r.stderr
    r = kt("produce", "tls-orders", "-p", "0", *b, stdin="one\ntwo\nthree\n")
    assert r.returncode == 0, r.stderr
    r = kt("consume", "tls-orders", "-p", "0", "-o", "beginning", "-c", "3", *b)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["one", "two", "three"]
    r = kt("topic", "list", *b)
    assert r.returncode == 0 and "tls-orders" in r.stdout.split(), r.stderr
    r = kt("group", "list", *b)
    assert r.returncode == 0, r.stderr


def test_command_config_file_and_pkcs12_truststore(tls_cluster: dict, tmp_path: Path) -> None:
    pki, port = tls_cluster["pki"], tls_cluster["ports"]["main"]
    props = tmp_path / "client.properties"
    props.write_text(
        f"bootstrap.servers=localhost:{port}\nsecurity.protocol=SSL\n"
        f"ssl.truststore.location={pki / 'truststore.p12'}\nssl.truststore.type=PKCS12\n"
        f"ssl.truststore.password={PASSWORD}\n"
        "acks=all\nclient.dns.lookup=use_all_dns_ips\n"  # producer keys: ignored
    )
    r = kt("cluster", "describe", "--command-config", str(props))
    assert r.returncode == 0, r.stderr
    r = kt("topic", "list", "-F", str(props))  # kcat's -F reads the same file
    assert r.returncode == 0, r.stderr


def test_mutual_tls_with_pem_key_encrypted_key_and_pkcs12_keystore(tls_cluster: dict) -> None:
    pki, port = tls_cluster["pki"], tls_cluster["ports"]["mtls"]
    b = ["-b", f"localhost:{port}"]
    variants = [
        ["-X", f"ssl.certificate.location={pki / 'client.pem'}",
         "-X", f"ssl.key.location={pki / 'client.key'}"],
        ["-X", f"ssl.certificate.location={pki / 'client.pem'}",
         "-X", f"ssl.key.location={pki / 'client-encrypted.key'}",
         "-X", f"ssl.key.password={PASSWORD}"],
        ["-X", f"ssl.keystore.location={pki / 'client.p12'}", "-X", "ssl.keystore.type=PKCS12",
         "-X", f"ssl.keystore.password={PASSWORD}"],
    ]  # fmt: skip
    for extra in variants:
        r = kt("topic", "list", *b, *ssl_args(pki, *extra))
        assert r.returncode == 0, (extra, r.stderr)
    # inline PEM (Kafka's ssl.keystore.certificate.chain / ssl.keystore.key and
    # ssl.truststore.certificates)
    inline = ["-X", "security.protocol=SSL",
              "-X", f"ssl.truststore.certificates={(pki / 'ca.pem').read_text()}",
              "-X", f"ssl.keystore.certificate.chain={(pki / 'client.pem').read_text()}",
              "-X", f"ssl.keystore.key={(pki / 'client.key').read_text()}"]  # fmt: skip
    r = kt("topic", "list", *b, *inline)
    assert r.returncode == 0, r.stderr
    # without a client certificate the terminator refuses us
    line = one_error_line(kt("topic", "list", *b, *ssl_args(pki)))
    assert "requires a client certificate" in line or "closed the connection" in line, line


def test_wrong_key_password_is_a_usage_error(tls_cluster: dict) -> None:
    pki = tls_cluster["pki"]
    r = kt("topic", "list", "-b", "localhost:1", *ssl_args(
        pki, "-X", f"ssl.certificate.location={pki / 'client.pem'}",
        "-X", f"ssl.key.location={pki / 'client-encrypted.key'}",
        "-X", "ssl.key.password=wrong"))  # fmt: skip
    assert r.returncode == 2, r.stderr
    assert r.stderr.strip() == (
        "kt: error: ssl.key.password: cannot decrypt the private key of ssl.certificate.location"
    )


@pytest.mark.parametrize(
    ("service", "host", "expected"),
    [
        ("stranger", "localhost",
         "TLS: the broker's certificate (CN=localhost,O=kt tests, issued by CN=some other "
         "CA,O=kt tests) is not trusted: unable to get local issuer certificate; trusted CAs "
         "come from ssl.ca.location"),
        ("wronghost", "localhost",
         "TLS: hostname mismatch: the broker's certificate (CN=other.example,O=kt tests, issued "
         "by CN=kt test CA,O=kt tests) is for DNS:other.example, not localhost"),
        ("expired", "localhost",
         "TLS: the broker's certificate (CN=localhost,O=kt tests, issued by CN=kt test CA,"
         "O=kt tests) expired on "),
    ],
)  # fmt: skip
def test_certificate_errors_say_whose_and_what(
    tls_cluster: dict, service: str, host: str, expected: str
) -> None:
    pki, port = tls_cluster["pki"], tls_cluster["ports"][service]
    t0 = time.monotonic()
    line = one_error_line(kt("topic", "list", "-b", f"{host}:{port}", *ssl_args(pki)))
    assert line.startswith(f"kt: error: {host}:{port}: {expected}"), line
    # refused at once: no retrying until the connect timeout (10 s)
    assert time.monotonic() - t0 < 9


def test_hostname_check_can_be_turned_off_as_in_kafka(tls_cluster: dict) -> None:
    pki, port = tls_cluster["pki"], tls_cluster["ports"]["wronghost"]
    r = kt("topic", "list", "-b", f"localhost:{port}",
           *ssl_args(pki, "-X", "ssl.endpoint.identification.algorithm="))  # fmt: skip
    assert r.returncode == 0, r.stderr


def test_plaintext_client_on_a_tls_port_is_told_quickly(tls_cluster: dict) -> None:
    port = tls_cluster["ports"]["main"]
    t0 = time.monotonic()
    line = one_error_line(kt("topic", "list", "-b", f"localhost:{port}"))
    assert line == (
        f"kt: error: localhost:{port}: the broker speaks TLS on this port but the client does "
        "not (use security.protocol=SSL or SASL_SSL)"
    ) or line.endswith("it is a TLS listener (use security.protocol=SSL or SASL_SSL)"), line
    assert time.monotonic() - t0 < 9


def test_tls_client_on_a_plaintext_port_is_told_quickly(tls_cluster: dict) -> None:
    pki, port = tls_cluster["pki"], tls_cluster["broker"].port
    t0 = time.monotonic()
    line = one_error_line(kt("topic", "list", "-b", f"127.0.0.1:{port}", *ssl_args(pki)))
    assert f"kt: error: 127.0.0.1:{port}: TLS handshake failed" in line, line
    assert "security.protocol=PLAINTEXT or SASL_PLAINTEXT" in line, line
    assert time.monotonic() - t0 < 9


def test_profile_carries_the_tls_settings(
    tls_cluster: dict, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pki, port = tls_cluster["pki"], tls_cluster["ports"]["main"]
    monkeypatch.setenv("KT_CONFIG", str(tmp_path / "profiles.json"))
    r = kt("profile", "create", "tls", "-b", f"localhost:{port}", *ssl_args(pki))
    assert r.returncode == 0, r.stderr
    r = kt("topic", "list", "-v")
    assert r.returncode == 0, r.stderr
    assert f"bootstrap servers localhost:{port} (from profile 'tls'), security.protocol=SSL" in (
        r.stderr
    )
    # a flag wins over the profile
    r = kt("topic", "list", "-X", "security.protocol=PLAINTEXT", "-b", f"localhost:{port}")
    assert r.returncode == 1, r.stderr


def test_reassign_transactions_and_leader_election_over_tls(tls_cluster: dict) -> None:
    pki, port = tls_cluster["pki"], tls_cluster["ports"]["main"]
    b = ["-b", f"localhost:{port}", *ssl_args(pki)]
    r = kt("reassign-partitions", "--list", *b)
    assert r.returncode == 0, r.stderr
    r = kt("transactions", "list", *b)
    assert r.returncode == 0, r.stderr
    r = kt("configs", "describe", "--entity-type", "brokers", "--entity-name", "0", *b)
    assert r.returncode in (0, 1) and "TLS" not in r.stderr, r.stderr


def test_tui_sampler_refreshes_over_tls(tls_cluster: dict) -> None:
    import asyncio

    from kt.client import SecurityConfig
    from kt.tui.sampler import ClusterSampler

    pki, port = tls_cluster["pki"], tls_cluster["ports"]["main"]
    security = SecurityConfig.from_properties(
        {"security.protocol": "SSL", "ssl.ca.location": str(pki / "ca.pem")}
    )
    sampler = ClusterSampler(f"localhost:{port}", request_timeout=20, security=security,
                             isolate=False)  # fmt: skip

    async def go() -> object:
        try:
            return await sampler.sample()
        finally:
            await sampler.close()

    snap = asyncio.run(go())
    assert getattr(snap, "error", None) in (None, ""), snap
    assert len(getattr(snap, "brokers", [])) == 1, snap


def test_spark_source_options_carry_the_security_settings(tls_cluster: dict) -> None:
    from kt.spark.live_kafka import read_client
    from kt.spark.live_options import OptionError, parse_read_options

    pki, port = tls_cluster["pki"], tls_cluster["ports"]["main"]
    opts = {
        "kafka.bootstrap.servers": f"localhost:{port}",
        "subscribe": "tls-orders",
        "kafka.security.protocol": "SSL",
        "kafka.ssl.ca.location": str(pki / "ca.pem"),
    }
    parsed = parse_read_options(opts, streaming=False)
    assert parsed.security == {"security.protocol": "SSL", "ssl.ca.location": str(pki / "ca.pem")}
    with read_client(parsed) as sc:
        assert sc.client.metadata.brokers
    with pytest.raises(OptionError, match=r"kafka\.ssl\.ca\.location: .*no such file"):
        parse_read_options({**opts, "kafka.ssl.ca.location": "/none.pem"}, streaming=False)
    with pytest.raises(OptionError, match=r"kafka\.sasl\.login\.class"):
        parse_read_options({**opts, "kafka.sasl.login.class": "x"}, streaming=False)
