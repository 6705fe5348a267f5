"""A secured `kt broker` with real clients: SASL_SSL (SCRAM-SHA-512, SCRAM-SHA-256,
PLAIN), SSL with mutual TLS and SASL_PLAINTEXT listeners beside a PLAINTEXT one;
SCRAM users created with confluent-kafka's admin client (AlterUserScramCredentials);
produce and consume with a group through confluent-kafka, kafka-python, aiokafka and
kcat; and the refusals: a wrong password, an unknown user, a disabled mechanism, a
request before authentication, plaintext bytes on the TLS port, an oversized
token. Each refusal is clean (logged, nothing served) and the broker keeps serving."""

from __future__ import annotations

import asyncio
import base64
import json
import os
import shutil
import socket
import ssl
import struct
import subprocess
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
from broker_harness import BrokerProcess, free_port
from brokersec_certs import CA

pytestmark = pytest.mark.integration

JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required '
        'username="admin" password="admin-secret" user_admin="admin-secret" '
        'user_carol="carol-secret";')  # fmt: skip


class Secured:
    """The broker and what clients need to reach it."""

    def __init__(self, broker: BrokerProcess, ports: dict[str, int], files: dict[str, Path]):
        self.broker = broker
        self.ports = ports
        self.files = files

    def addr(self, listener: str) -> str:
        return f"127.0.0.1:{self.ports[listener]}"


@pytest.fixture(scope="module")
def secured(tmp_path_factory: pytest.TempPathFactory) -> Any:
    tmp = tmp_path_factory.mktemp("secured")
    ca = CA()
    server = ca.issue("CN=broker1,OU=kafka,O=kt", ("localhost", "127.0.0.1"))
    client = ca.issue("CN=dave,OU=ServiceUsers,O=kt")
    sfiles = ca.write(tmp, "server", server)
    cfiles = ca.write(tmp, "client", client)
    other = CA("CN=another-ca")  # signs a certificate the broker must refuse
    (tmp / "other").mkdir()
    ofiles = other.write(tmp / "other", "stranger", other.issue("CN=mallory,OU=ServiceUsers"))
    ports = {n: free_port() for n in ("PLAINTEXT", "SASL_SSL", "SSL", "SASL_PLAINTEXT")}
    overrides = {
        "listeners": ",".join(f"{n}://127.0.0.1:{p}" for n, p in ports.items()),
        "sasl.enabled.mechanisms": "SCRAM-SHA-512,SCRAM-SHA-256,PLAIN",
        "listener.name.sasl_plaintext.sasl.enabled.mechanisms": "PLAIN,OAUTHBEARER",
        "listener.name.sasl_plaintext.oauthbearer.sasl.jaas.config": (
            "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required;"
        ),
        # sessions of 4 s: clients must re-authenticate (KIP-368)
        "listener.name.sasl_plaintext.plain.connections.max.reauth.ms": "4000",
        "listener.name.sasl_ssl.plain.sasl.jaas.config": JAAS,
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": JAAS,
        "ssl.keystore.type": "PKCS12",
        "ssl.keystore.location": str(sfiles["p12"]),
        "ssl.keystore.password": "pw",
        "ssl.truststore.type": "PEM",
        "ssl.truststore.location": str(sfiles["ca"]),
        "listener.name.ssl.ssl.client.auth": "required",
        "ssl.principal.mapping.rules": "RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/,DEFAULT",
        "connection.failed.authentication.delay.ms": "300",
        "num.partitions": "2",
        "offsets.topic.num.partitions": "2",
        "offsets.topic.replication.factor": "1",
    }
    broker = BrokerProcess(tmp / "data", ports["PLAINTEXT"], overrides).start(timeout=60)
    yield Secured(broker, ports, {**{f"c_{k}": v for k, v in cfiles.items()},
                                   "ca": sfiles["ca"], "stranger": ofiles["pem"]})  # fmt: skip
    assert broker.stop() == 0


def _scram_users(secured: Secured) -> None:
    from confluent_kafka.admin import (
        AdminClient,
        ScramCredentialInfo,
        ScramMechanism,
        UserScramCredentialUpsertion,
    )

    admin = AdminClient({"bootstrap.servers": secured.addr("PLAINTEXT")})
    ups = [
        UserScramCredentialUpsertion("alice", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512,
                                                                  8192), b"alice-secret"),
        UserScramCredentialUpsertion("bob", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256,
                                                                4096), b"bob-secret"),
    ]  # fmt: skip
    for fut in admin.alter_user_scram_credentials(ups).values():
        fut.result(30)
    futures = admin.describe_user_scram_credentials(["alice", "bob"])
    described = {user: fut.result(30) for user, fut in futures.items()}
    assert described["alice"].scram_credential_infos[0].iterations == 8192
    assert described["bob"].scram_credential_infos[0].mechanism == ScramMechanism.SCRAM_SHA_256


@pytest.fixture(scope="module")
def users(secured: Secured) -> Secured:
    _scram_users(secured)
    return secured


def _ssl_conf(s: Secured) -> dict[str, str]:
    return {"ssl.ca.location": str(s.files["ca"])}


def _roundtrip_confluent(conf: dict[str, str], topic: str, n: int = 50) -> list[bytes]:
    from confluent_kafka import Consumer, Producer

    p = Producer({**conf, "acks": "all", "enable.idempotence": True})
    for i in range(n):
        p.produce(topic, value=f"v{i}".encode(), key=str(i % 3).encode())
    assert p.flush(60) == 0
    c = Consumer({**conf, "group.id": f"g-{topic}", "auto.offset.reset": "earliest",
                  "enable.auto.commit": False})  # fmt: skip
    c.subscribe([topic])
    got: list[bytes] = []
    deadline = time.monotonic() + 90
    while len(got) < n and time.monotonic() < deadline:
        m = c.poll(1.0)
        if m is not None and m.error() is None:
            got.append(m.value())
    c.commit(asynchronous=False)
    c.close()
    return got


def test_confluent_scram_sha_512_over_sasl_ssl(users: Secured) -> None:
    conf = {"bootstrap.servers": users.addr("SASL_SSL"), "security.protocol": "SASL_SSL",
            "sasl.mechanism": "SCRAM-SHA-512", "sasl.username": "alice",
            "sasl.password": "alice-secret", **_ssl_conf(users)}  # fmt: skip
    got = _roundtrip_confluent(conf, "sec-scram512")
    assert sorted(got) == sorted(f"v{i}".encode() for i in range(50))


def test_confluent_mutual_tls_principal(users: Secured) -> None:
    conf = {"bootstrap.servers": users.addr("SSL"), "security.protocol": "SSL",
            "ssl.certificate.location": str(users.files["c_chain"]),
            "ssl.key.location": str(users.files["c_key"]), **_ssl_conf(users)}  # fmt: skip
    assert len(_roundtrip_confluent(conf, "sec-mtls", 20)) == 20


def test_kafka_python_plain_over_sasl_ssl(users: Secured) -> None:
    from kafka import KafkaConsumer, KafkaProducer

    ctx = ssl.create_default_context(cafile=str(users.files["ca"]))
    common: dict[str, Any] = {
        "bootstrap_servers": users.addr("SASL_SSL"), "security_protocol": "SASL_SSL",
        "sasl_mechanism": "PLAIN", "sasl_plain_username": "carol",
        "sasl_plain_password": "carol-secret", "ssl_context": ctx,
    }  # fmt: skip
    p = KafkaProducer(**common, acks="all")
    for i in range(30):
        p.send("sec-kpy", f"k{i}".encode())
    p.flush(60)
    p.close()
    c = KafkaConsumer("sec-kpy", group_id="g-kpy", auto_offset_reset="earliest",
                      consumer_timeout_ms=30000, **common)  # fmt: skip
    got = []
    for m in c:
        got.append(m.value)
        if len(got) == 30:
            break
    c.close()
    assert len(got) == 30


def test_aiokafka_scram_sha_256_over_sasl_ssl(users: Secured) -> None:
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
    from aiokafka.helpers import create_ssl_context

    async def main() -> int:
        common: dict[str, Any] = {
            "bootstrap_servers": users.addr("SASL_SSL"), "security_protocol": "SASL_SSL",
            "sasl_mechanism": "SCRAM-SHA-256", "sasl_plain_username": "bob",
            "sasl_plain_password": "bob-secret",
            "ssl_context": create_ssl_context(cafile=str(users.files["ca"])),
        }  # fmt: skip
        p = AIOKafkaProducer(**common)
        await p.start()
        try:
            for i in range(20):
                await p.send_and_wait("sec-aio", f"a{i}".encode())
        finally:
            await p.stop()
        c = AIOKafkaConsumer("sec-aio", group_id="g-aio", auto_offset_reset="earliest",
                             **common)  # fmt: skip
        await c.start()
        got = 0
        try:
            while got < 20:
                batch = await asyncio.wait_for(c.getmany(timeout_ms=1000), 60)
                got += sum(len(v) for v in batch.values())
        finally:
            await c.stop()
        return got

    assert asyncio.run(main()) == 20


def test_kcat_over_sasl_plaintext_and_mtls(users: Secured) -> None:
    topic = "sec-kcat"
    sasl = ["-X", "security.protocol=SASL_PLAINTEXT", "-X", "sasl.mechanism=PLAIN",
            "-X", "sasl.username=carol", "-X", "sasl.password=carol-secret"]  # fmt: skip
    subprocess.run(["kcat", "-b", users.addr("SASL_PLAINTEXT"), *sasl, "-P", "-t", topic],
                   input=b"one\ntwo\nthree\n", check=True, timeout=60)  # fmt: skip
    mtls = ["-X", "security.protocol=SSL", "-X", f"ssl.ca.location={users.files['ca']}",
            "-X", f"ssl.certificate.location={users.files['c_chain']}",
            "-X", f"ssl.key.location={users.files['c_key']}"]  # fmt: skip
    out = subprocess.run(["kcat", "-b", users.addr("SSL"), *mtls, "-C", "-t", topic, "-e",
                          "-o", "beginning", "-q"], capture_output=True, timeout=60)  # fmt: skip
    assert out.returncode == 0, out.stderr
    assert sorted(out.stdout.split()) == [b"one", b"three", b"two"]


# --- kafkajs ----------------------------------------------------------------------------

JS_DIR = Path(__file__).resolve().parent.parent / "js"


def _kafkajs(command: str, spec: dict[str, Any]) -> dict[str, Any]:
    """Run tests/js/kt-client.js COMMAND with the spec; its JSON result."""
    if shutil.which("node") is None or not (JS_DIR / "node_modules" / "kafkajs").is_dir():
        if os.environ.get("CI"):
            pytest.fail("node or tests/js/node_modules is missing: scripts/setup installs them")
        pytest.skip("kafkajs is not installed: run scripts/setup (npm ci in tests/js)")
    proc = subprocess.run(
        ["node", str(JS_DIR / "kt-client.js"), command],
        input=json.dumps(spec).encode(),
        capture_output=True,
        timeout=120,
        env={**os.environ, "KAFKAJS_NO_PARTITIONER_WARNING": "1"},
    )
    lines = proc.stdout.decode().strip().splitlines()
    result: dict[str, Any] = json.loads(lines[-1]) if lines else {"error": "no output"}
    if proc.returncode != 0 or "error" in result:
        raise AssertionError(f"kafkajs {command} failed: {result}\n{proc.stderr.decode()[-3000:]}")
    return result


def _roundtrip_kafkajs(security: dict[str, Any], topic: str, n: int = 30) -> list[bytes]:
    """Produce n records with kafkajs (idempotent, acks=all), then read them back with a
    kafkajs consumer in a group (JoinGroup, SyncGroup, heartbeats, OffsetCommit)."""
    values = [f"js{i}".encode() for i in range(n)]
    batch = [{"key": base64.b64encode(str(i % 3).encode()).decode(),
              "value": base64.b64encode(v).decode(), "partition": i % 2}
             for i, v in enumerate(values)]  # fmt: skip
    produced = _kafkajs("produce", {**security, "topic": topic, "idempotent": True,
                                    "batches": [batch[:5], batch[5:]]})  # fmt: skip
    assert all(r["errorCode"] == 0 for b in produced["batches"] for r in b), produced
    consumed = _kafkajs("group-consume", {**security, "topic": topic, "groupId": f"g-{topic}",
                                          "count": n, "timeoutMs": 60000})  # fmt: skip
    return [base64.b64decode(m["value"]) for m in consumed["messages"]]


def test_kafkajs_scram_sha_512_over_sasl_ssl(users: Secured) -> None:
    security = {"brokers": [users.addr("SASL_SSL")], "ssl": {"ca": str(users.files["ca"])},
                "sasl": {"mechanism": "scram-sha-512", "username": "alice",
                         "password": "alice-secret"}}  # fmt: skip
    got = _roundtrip_kafkajs(security, "sec-js-scram")
    assert sorted(got) == sorted(f"js{i}".encode() for i in range(30))


def test_kafkajs_plain_over_sasl_ssl(users: Secured) -> None:
    security = {"brokers": [users.addr("SASL_SSL")], "ssl": {"ca": str(users.files["ca"])},
                "sasl": {"mechanism": "plain", "username": "carol",
                         "password": "carol-secret"}}  # fmt: skip
    got = _roundtrip_kafkajs(security, "sec-js-plain", 20)
    assert sorted(got) == sorted(f"js{i}".encode() for i in range(20))


def test_kafkajs_mutual_tls(users: Secured) -> None:
    security = {"brokers": [users.addr("SSL")],
                "ssl": {"ca": str(users.files["ca"]), "cert": str(users.files["c_chain"]),
                        "key": str(users.files["c_key"])}}  # fmt: skip
    got = _roundtrip_kafkajs(security, "sec-js-mtls", 20)
    assert sorted(got) == sorted(f"js{i}".encode() for i in range(20))


def test_kafkajs_wrong_scram_password_is_refused(users: Secured) -> None:
    security = {"brokers": [users.addr("SASL_SSL")], "ssl": {"ca": str(users.files["ca"])},
                "sasl": {"mechanism": "scram-sha-512", "username": "alice",
                         "password": "not-it"}}  # fmt: skip
    with pytest.raises(AssertionError, match="SASL"):
        _kafkajs("produce", {**security, "topic": "sec-js-refused", "batches": [[
            {"key": None, "value": base64.b64encode(b"x").decode()}]]})  # fmt: skip


# --- refusals ---------------------------------------------------------------------------


def _admin_error(conf: dict[str, str]) -> str:
    """The first authentication error librdkafka reports for these settings."""
    from confluent_kafka import Producer

    errors: list[str] = []
    p = Producer({**conf, "error_cb": lambda err: errors.append(str(err))})
    deadline = time.monotonic() + 30
    while not any("SASL" in e or "uthentication" in e for e in errors):
        assert time.monotonic() < deadline, errors
        p.poll(0.2)
    return next(e for e in errors if "SASL" in e or "uthentication" in e)


@pytest.mark.parametrize(
    ("user", "password", "mech", "message"),
    [
        ("alice", "wrong", "SCRAM-SHA-512",
         "Authentication failed during authentication due to invalid credentials with SASL "
         "mechanism SCRAM-SHA-512"),
        ("nobody", "x", "SCRAM-SHA-512",
         "Authentication failed during authentication due to invalid credentials"),
        ("carol", "wrong", "PLAIN", "Authentication failed: Invalid username or password"),
    ],
)  # fmt: skip
def test_bad_credentials_are_refused_with_kafkas_message(
    users: Secured, user: str, password: str, mech: str, message: str
) -> None:
    conf = {"bootstrap.servers": users.addr("SASL_SSL"), "security.protocol": "SASL_SSL",
            "sasl.mechanism": mech, "sasl.username": user, "sasl.password": password,
            **_ssl_conf(users)}  # fmt: skip
    started = time.monotonic()
    err = _admin_error(conf)
    assert message in err, err
    assert time.monotonic() - started >= 0.3  # the failure delay
    deadline = time.monotonic() + 20
    while "Failed authentication with /127.0.0.1" not in users.broker.log():
        assert time.monotonic() < deadline, users.broker.log()[-2000:]
        time.sleep(0.1)
    assert password not in users.broker.log().replace("password", "") or password == "x"


def test_mechanism_not_enabled(users: Secured) -> None:
    conf = {"bootstrap.servers": users.addr("SASL_PLAINTEXT"),
            "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "SCRAM-SHA-256",
            "sasl.username": "bob", "sasl.password": "bob-secret"}  # fmt: skip
    err = _admin_error(conf)
    assert "SCRAM-SHA-256" in err and "PLAIN" in err, err


def _frame(api_key: int, version: int, body: bytes = b"", client: bytes = b"t") -> bytes:
    header = struct.pack(">hhih", api_key, version, 7, len(client)) + client
    payload = header + body
    return struct.pack(">i", len(payload)) + payload


def _closed_without_answer(sock: socket.socket) -> bool:
    sock.settimeout(20)
    try:
        return sock.recv(4096) == b""
    except ConnectionResetError:
        return True


def test_requests_before_authentication_are_not_served(users: Secured) -> None:
    # Metadata v1 (no topics: null array) on the SASL port before any handshake
    with socket.create_connection(("127.0.0.1", users.ports["SASL_PLAINTEXT"])) as sock:
        sock.sendall(_frame(3, 1, struct.pack(">i", -1)))
        assert _closed_without_answer(sock)
    deadline = time.monotonic() + 20
    line = "Unexpected Kafka request of type METADATA during SASL handshake."
    while line not in users.broker.log():
        assert time.monotonic() < deadline
        time.sleep(0.1)


HANDSHAKE_FAILED = "Failed authentication with /127.0.0.1 (SSL handshake failed: "


def _handshake_failures(secured: Secured) -> list[str]:
    return [ln for ln in secured.broker.log().splitlines() if HANDSHAKE_FAILED in ln]


def _one_more_handshake_failure(secured: Secured, before: int, reason: str) -> None:
    """Wait for the one log line a refused TLS handshake gets (INFO, with the
    client's address and why), and check there is exactly one."""
    deadline = time.monotonic() + 30
    while len(lines := _handshake_failures(secured)) <= before:
        assert time.monotonic() < deadline, "the failed handshake was not logged"
        time.sleep(0.05)
    assert len(lines) == before + 1, lines[before:]
    assert reason in lines[-1] and " INFO " in f" {lines[-1]} ", lines[-1]


def _mtls_refused(secured: Secured, cert: Path | None) -> None:
    """A TLS client with `cert` (or none) is refused by the mTLS listener."""
    ctx = ssl.create_default_context(cafile=str(secured.files["ca"]))
    if cert is not None:
        ctx.load_cert_chain(str(cert))
    errors = (ssl.SSLError, ConnectionResetError, BrokenPipeError)
    with (
        socket.create_connection(("127.0.0.1", secured.ports["SSL"]), timeout=30) as raw,
        pytest.raises(errors),
        ctx.wrap_socket(raw, server_hostname="localhost") as tls,
    ):
        tls.sendall(_frame(18, 0))
        if tls.recv(4) == b"":
            raise ConnectionResetError


def test_plaintext_on_the_tls_port_and_garbage_handshakes(users: Secured) -> None:
    before = len(_handshake_failures(users))
    with socket.create_connection(("127.0.0.1", users.ports["SASL_SSL"])) as sock:
        sock.sendall(_frame(18, 0))  # an ApiVersions request, not a ClientHello
        assert _closed_without_answer(sock)
    _one_more_handshake_failure(users, before, "wrong version number")
    with socket.create_connection(("127.0.0.1", users.ports["SSL"])) as sock:
        sock.sendall(b"\x16\x03\x01\x00\x05garbage" * 10)
        assert _closed_without_answer(sock)
    _one_more_handshake_failure(users, before + 1, "")
    # an mTLS listener refuses a client without a certificate, and one whose
    # certificate another CA signed
    _mtls_refused(users, None)
    _one_more_handshake_failure(users, before + 2, "certificate")
    _mtls_refused(users, users.files["stranger"])
    _one_more_handshake_failure(users, before + 3, "certificate verify failed")
    assert "Traceback" not in users.broker.log()
    # and the broker still serves
    from confluent_kafka.admin import AdminClient

    md = AdminClient({"bootstrap.servers": users.addr("PLAINTEXT")}).list_topics(timeout=15)
    assert md.brokers


def test_oversized_token_before_authentication(users: Secured) -> None:
    with socket.create_connection(("127.0.0.1", users.ports["SASL_PLAINTEXT"])) as sock:
        sock.sendall(struct.pack(">i", 600_000) + uuid.uuid4().bytes * 37_500)
        assert _closed_without_answer(sock)


def _rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise AssertionError(f"no VmRSS for {pid}")


def _failed_plain_login(port: int) -> None:
    """SaslHandshake PLAIN, then SaslAuthenticate with a wrong password; the broker
    answers with the failure (after its delay) and closes the connection."""
    mech = b"PLAIN"
    token = b"\0carol\0not-carols"
    with socket.create_connection(("127.0.0.1", port), timeout=30) as sock:
        sock.sendall(_frame(17, 1, struct.pack(">h", len(mech)) + mech))
        sock.settimeout(30)
        head = _recv_exactly(sock, 4)
        body = _recv_exactly(sock, struct.unpack(">i", head)[0])
        assert struct.unpack(">h", body[4:6])[0] == 0  # handshake accepted
        sock.sendall(_frame(36, 0, struct.pack(">i", len(token)) + token))
        head = _recv_exactly(sock, 4)
        body = _recv_exactly(sock, struct.unpack(">i", head)[0])
        assert struct.unpack(">h", body[4:6])[0] == 58  # SASL_AUTHENTICATION_FAILED
        assert _closed_without_answer(sock)


def _garbage_tls(port: int) -> None:
    with socket.create_connection(("127.0.0.1", port), timeout=30) as sock:
        sock.sendall(b"\x16\x03\x01\x00\x05garbage" * 10)
        assert _closed_without_answer(sock)


def _plaintext_on_tls(port: int) -> None:
    with socket.create_connection(("127.0.0.1", port), timeout=30) as sock:
        sock.sendall(_frame(18, 0))
        assert _closed_without_answer(sock)


def _oversized_token(port: int) -> None:
    with socket.create_connection(("127.0.0.1", port), timeout=30) as sock:
        sock.sendall(struct.pack(">i", 600_000) + uuid.uuid4().bytes * 37_500)
        assert _closed_without_answer(sock)


def test_failed_authentications_do_not_grow_the_broker(users: Secured) -> None:
    """Hundreds of failed authentications (wrong PLAIN password, garbage TLS,
    plaintext Kafka on the TLS port, a client certificate from another CA, an
    oversized token): after a warm-up the broker's resident memory stays flat
    (nothing kept per refused connection), each failed handshake is logged, and the
    broker still serves."""
    from concurrent.futures import ThreadPoolExecutor

    assert users.broker.proc is not None
    pid = users.broker.proc.pid
    stranger = users.files["stranger"]
    attempts = [(_failed_plain_login, users.ports["SASL_PLAINTEXT"]),
                (_garbage_tls, users.ports["SSL"]),
                (_plaintext_on_tls, users.ports["SASL_SSL"]),
                (lambda _port: _mtls_refused(users, stranger), users.ports["SSL"]),
                (_oversized_token, users.ports["SASL_PLAINTEXT"])]  # fmt: skip
    logged = len(_handshake_failures(users))

    def round_of(n: int) -> None:
        # in parallel: each PLAIN refusal waits out connection.failed.authentication.delay.ms
        with ThreadPoolExecutor(8) as pool:
            for f in [pool.submit(fn, port) for i in range(n) for fn, port in attempts]:
                f.result(timeout=120)

    round_of(30)  # warm-up: caches, allocator arenas, thread pools
    before = _rss_kib(pid)
    round_of(70)  # 350 more failed authentications
    after = _rss_kib(pid)
    # a leak of even 20 KiB per refused connection would show as > 6 MiB here
    assert after - before < 6 * 1024, (before, after)
    deadline = time.monotonic() + 30
    while len(_handshake_failures(users)) < logged + 3 * 100:
        assert time.monotonic() < deadline, "not every failed handshake was logged"
        time.sleep(0.1)
    from confluent_kafka.admin import AdminClient

    md = AdminClient({"bootstrap.servers": users.addr("PLAINTEXT")}).list_topics(timeout=15)
    assert md.brokers
    assert users.broker.proc.poll() is None


def test_metadata_answers_with_the_listener_the_client_used(users: Secured) -> None:
    from confluent_kafka.admin import AdminClient

    conf = {"bootstrap.servers": users.addr("SASL_PLAINTEXT"),
            "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN",
            "sasl.username": "carol", "sasl.password": "carol-secret"}  # fmt: skip
    md = AdminClient(conf).list_topics(timeout=15)
    assert [b.port for b in md.brokers.values()] == [users.ports["SASL_PLAINTEXT"]]


def test_oauthbearer_unsecured_jwt(users: Secured) -> None:
    conf = {"bootstrap.servers": users.addr("SASL_PLAINTEXT"),
            "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "OAUTHBEARER",
            "enable.sasl.oauthbearer.unsecure.jwt": True,
            "sasl.oauthbearer.config": "principal=erin lifeSeconds=600"}  # fmt: skip
    assert len(_roundtrip_confluent(conf, "sec-oauth", 10)) == 10


def test_clients_reauthenticate_when_the_session_ends(users: Secured) -> None:
    """PLAIN sessions on SASL_PLAINTEXT last 4 s: librdkafka re-authenticates on the
    same connection and keeps producing; nothing is disconnected as expired."""
    from confluent_kafka import Producer

    conf = {"bootstrap.servers": users.addr("SASL_PLAINTEXT"),
            "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN",
            "sasl.username": "carol", "sasl.password": "carol-secret"}  # fmt: skip
    p = Producer(conf)
    sent = 0
    deadline = time.monotonic() + 12
    while time.monotonic() < deadline:
        p.produce("sec-reauth", b"x")
        sent += 1
        p.poll(0.2)
    assert p.flush(30) == 0
    assert "Disconnecting expired channel" not in users.broker.log()


def test_an_expired_session_is_closed_without_an_answer(users: Secured) -> None:
    """A client that cannot re-authenticate (SaslHandshake v0 + raw token, then
    silence past the session) is disconnected at its next request."""
    with socket.create_connection(("127.0.0.1", users.ports["SASL_PLAINTEXT"])) as sock:
        sock.settimeout(20)
        sock.sendall(_frame(17, 0, struct.pack(">h", 5) + b"PLAIN"))
        size = struct.unpack(">i", _recv_exactly(sock, 4))[0]
        _recv_exactly(sock, size)
        token = b"\0carol\0carol-secret"
        sock.sendall(struct.pack(">i", len(token)) + token)
        # authenticated: Kafka answers PLAIN's raw token with an empty frame, which
        # v0 clients (librdkafka without SaslAuthenticate) wait for
        assert _recv_exactly(sock, 4) == b"\0\0\0\0"
        # then Metadata v1 is served
        sock.sendall(_frame(3, 1, struct.pack(">i", -1)))
        size = struct.unpack(">i", _recv_exactly(sock, 4))[0]
        assert len(_recv_exactly(sock, size)) == size
        time.sleep(4.5)  # the session (4 s) ends; the next request is not served
        sock.sendall(_frame(3, 1, struct.pack(">i", -1)))
        assert _closed_without_answer(sock)


def _recv_exactly(sock: socket.socket, n: int) -> bytes:
    out = b""
    while len(out) < n:
        chunk = sock.recv(n - len(out))
        if not chunk:
            raise ConnectionResetError("closed")
        out += chunk
    return out
