"""kt's commands against kt's own secured broker (TLS and SASL on its listeners):
Confluent-Cloud-style SASL_SSL + PLAIN, MSK-style SASL_SSL + SCRAM, Aiven-style mutual
TLS, OAUTHBEARER (unsecured JWTs, development), re-authentication before the broker's
session lifetime ends, and each refusal as one line with exit code 1. SCRAM users are
created with confluent-kafka's admin client (AlterUserScramCredentials), the way an
operator would."""

from __future__ import annotations

import asyncio
import os
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest
from broker_harness import KT
from tls_harness import PASSWORD

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def broker(secured_broker: dict[str, Any]) -> dict[str, Any]:
    """The shared secured broker (tests/integration/conftest.py)."""
    return secured_broker


def kt(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("KT_BOOTSTRAP")}
    return subprocess.run([KT, *args], input=stdin, capture_output=True, text=True,
                          timeout=180, env=env)  # fmt: skip


def props_file(tmp: Path, name: str, text: str) -> str:
    p = tmp / name
    p.write_text(text)
    return str(p)


def one_error_line(r: subprocess.CompletedProcess[str]) -> str:
    assert r.returncode == 1, (r.returncode, r.stdout, r.stderr)
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("kt: error: "), r.stderr
    return lines[0]


def roundtrip(topic: str, conn: list[str]) -> None:
    r = kt("topic", "create", topic, *conn)
    assert r.returncode == 0, r.stderr
    r = kt("produce", topic, "-K", ":", *conn, stdin="k1:one\nk2:two\n")
    assert r.returncode == 0, r.stderr
    r = kt("consume", topic, "-G", f"{topic}-g", "-o", "beginning", "-c", "2", "-K", ":", *conn)
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines() == ["k1:one", "k2:two"]
    r = kt("group", "describe", "--group", f"{topic}-g", *conn)
    assert r.returncode == 0, r.stderr
    r = kt("cluster", "describe", *conn)
    assert r.returncode == 0, r.stderr


def test_confluent_cloud_style_sasl_ssl_plain(broker: dict[str, Any]) -> None:
    port, pki = broker["ports"]["SASL_SSL"], broker["pki"]
    f = props_file(broker["tmp"], "cloud.properties",
                   f"bootstrap.servers=localhost:{port}\nsecurity.protocol=SASL_SSL\n"
                   f"ssl.ca.location={pki / 'ca.pem'}\nsasl.mechanism=PLAIN\n"
                   "sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule "
                   "required username='carol' password='carol-secret';\n"
                   "session.timeout.ms=45000\nacks=all\n")  # fmt: skip
    roundtrip("cloud-orders", ["--command-config", f])


@pytest.mark.parametrize(("mech", "user"), [("SCRAM-SHA-512", "alice"), ("SCRAM-SHA-256", "bob")])
def test_msk_style_sasl_ssl_scram(broker: dict[str, Any], mech: str, user: str) -> None:
    port, pki = broker["ports"]["SASL_SSL"], broker["pki"]
    conn = ["-b", f"localhost:{port}", "-X", "security.protocol=SASL_SSL",
            "-X", f"ssl.ca.location={pki / 'ca.pem'}", "-X", f"sasl.mechanism={mech}",
            "-X", f"sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule "
            f'required username="{user}" password="{user}-secret";']  # fmt: skip
    roundtrip(f"msk-{user}", conn)


def test_aiven_style_mutual_tls(broker: dict[str, Any]) -> None:
    port, pki = broker["ports"]["SSL"], broker["pki"]
    conn = ["-b", f"localhost:{port}", "-X", "security.protocol=SSL",
            "-X", f"ssl.ca.location={pki / 'ca.pem'}",
            "-X", f"ssl.keystore.location={pki / 'client.p12'}",
            "-X", f"ssl.keystore.password={PASSWORD}"]  # fmt: skip
    roundtrip("aiven-orders", conn)
    line = one_error_line(kt("topic", "list", "-b", f"localhost:{port}",
                             "-X", "security.protocol=SSL",
                             "-X", f"ssl.ca.location={pki / 'ca.pem'}"))  # fmt: skip
    assert (
        line
        == (
            f"kt: error: localhost:{port}: TLS: the broker closed the connection after the "
            "handshake without answering: it requires a client certificate (mutual TLS): set "
            "ssl.certificate.location and ssl.key.location, or ssl.keystore.location"
        )
        or "TLS: the broker requires a client certificate" in line
    ), line


def test_oauthbearer_unsecured_jwt(broker: dict[str, Any]) -> None:
    port = broker["ports"]["SASL_PLAINTEXT"]
    r = kt("topic", "list", "-b", f"localhost:{port}", "-X", "security.protocol=SASL_PLAINTEXT",
           "-X", "sasl.mechanism=OAUTHBEARER",
           "-X", "sasl.oauthbearer.config=principal=dev")  # fmt: skip
    assert r.returncode == 0, r.stderr


def test_refusals_are_one_line(broker: dict[str, Any]) -> None:
    ports, pki = broker["ports"], broker["pki"]
    ssl = ["-X", f"ssl.ca.location={pki / 'ca.pem'}"]
    line = one_error_line(kt(
        "topic", "list", "-b", f"localhost:{ports['SASL_SSL']}", "-X", "security.protocol=SASL_SSL",
        *ssl, "-X", "sasl.mechanism=PLAIN", "-X", "sasl.username=carol",
        "-X", "sasl.password=wrong"))  # fmt: skip
    assert line == (
        f"kt: error: localhost:{ports['SASL_SSL']}: SASL authentication failed (PLAIN as user "
        "carol): Authentication failed: Invalid username or password"
    )
    line = one_error_line(kt(
        "topic", "list", "-b", f"localhost:{ports['SASL_SSL']}", "-X", "security.protocol=SASL_SSL",
        *ssl, "-X", "sasl.mechanism=OAUTHBEARER",
        "-X", "sasl.oauthbearer.config=principal=x"))  # fmt: skip
    assert line == (
        f"kt: error: localhost:{ports['SASL_SSL']}: SASL mechanism OAUTHBEARER is not enabled on "
        "the broker (it offers: SCRAM-SHA-512, SCRAM-SHA-256, PLAIN)"
    )
    t0 = time.monotonic()
    line = one_error_line(kt("topic", "list", "-b", f"localhost:{ports['SASL_PLAINTEXT']}"))
    assert line == (
        f"kt: error: localhost:{ports['SASL_PLAINTEXT']}: the broker requires SASL "
        "authentication (a SASL listener; it offers PLAIN, OAUTHBEARER): set "
        "security.protocol=SASL_PLAINTEXT and sasl.mechanism"
    )
    line = one_error_line(kt("topic", "list", "-b", f"localhost:{ports['SSL']}"))
    assert "speaks TLS on this port but the client does not" in line or (
        "it is a TLS listener" in line
    ), line
    line = one_error_line(kt("topic", "list", "-b", f"localhost:{ports['PLAINTEXT']}",
                             "-X", "security.protocol=SSL", *ssl))  # fmt: skip
    assert "TLS handshake failed" in line, line
    assert time.monotonic() - t0 < 60  # five refusals, none waiting out a timeout


def test_reauthenticates_on_a_long_lived_connection(broker: dict[str, Any]) -> None:
    from kt.client import KafkaClient, SecurityConfig

    port = broker["ports"]["SASL_PLAINTEXT"]
    security = SecurityConfig.from_properties({
        "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN",
        "sasl.username": "carol", "sasl.password": "carol-secret"})  # fmt: skip

    async def go() -> tuple[int, int]:
        async with KafkaClient(f"localhost:{port}", security=security) as client:
            conn = await client.any_connection()
            assert 0 < conn.session_lifetime_ms <= 3000
            first = id(conn)
            deadline = time.monotonic() + 60
            requests = 0
            # the broker closes a connection whose session ran out at its next
            # request; kt re-authenticates before that, so the same connection lives on
            while conn.reauthentications < 2:
                assert time.monotonic() < deadline
                # several requests at once: those arriving during a re-authentication
                # must wait for it (the broker closes on anything else meanwhile)
                await asyncio.gather(*(client.refresh_metadata() for _ in range(4)))
                requests += 4
                await asyncio.sleep(0.05)
            assert id(await client.any_connection()) == first and conn.connected
            return conn.reauthentications, requests

    reauths, requests = asyncio.run(go())
    assert reauths >= 2 and requests > 10


def test_tui_sampler_and_spark_source_over_sasl_ssl(broker: dict[str, Any]) -> None:
    from kt.client import SecurityConfig
    from kt.spark.live_kafka import read_client
    from kt.spark.live_options import parse_read_options
    from kt.tui.sampler import ClusterSampler

    port, pki = broker["ports"]["SASL_SSL"], broker["pki"]
    props = {"security.protocol": "SASL_SSL", "ssl.ca.location": str(pki / "ca.pem"),
             "sasl.mechanism": "SCRAM-SHA-512", "sasl.username": "alice",
             "sasl.password": "alice-secret"}  # fmt: skip
    sampler = ClusterSampler(f"localhost:{port}", request_timeout=30, isolate=False,
                             security=SecurityConfig.from_properties(props))  # fmt: skip

    async def go() -> Any:
        try:
            return await sampler.sample()
        finally:
            await sampler.close()

    snap = asyncio.run(go())
    assert snap.error is None and len(snap.brokers) == 1, snap.error
    opts = {"kafka.bootstrap.servers": f"localhost:{port}", "subscribe": "msk-alice",
            **{f"kafka.{k}": v for k, v in props.items()}}  # fmt: skip
    with read_client(parse_read_options(opts, streaming=False)) as sc:
        assert sc.client.metadata.brokers


def test_tui_refuses_a_bad_security_setting_before_starting() -> None:
    r = kt("tui", "-X", "security.protocol=SASL_SSL")
    assert r.returncode == 2 and "needs sasl.mechanism" in r.stderr, r.stderr
