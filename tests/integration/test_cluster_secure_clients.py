"""Issue 21, §5: every client of the project's set -- confluent-kafka, kafka-python,
aiokafka, kcat, kafkajs -- produces (acks=all, idempotent where the client can) and
consumes with a group over SASL_SSL/SCRAM-SHA-512, SASL_SSL/PLAIN and SSL with mutual
TLS, on one three-broker cluster whose inter-broker listener is SASL_SSL (SCRAM), while
the partition leader is SIGKILLed once mid-run -- every client's producer runs across
the kill -- and nothing acknowledged is lost.

The cluster is `kt cluster up --secure`'s (CA, broker certificates, the brokers' SCRAM
credential in ZooKeeper, ACL authorizer), with two additions per broker: PLAIN enabled
on the SASL_SSL listener, and a second listener, SSL with `ssl.client.auth=required`,
whose client certificate (signed by the cluster's CA) maps to a principal through
`ssl.principal.mapping.rules`. The clients' principals are super users: ACLs are not
what this module tests.
"""

from __future__ import annotations

import asyncio
import base64
import datetime as dt
import json
import os
import shutil
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from broker_harness import check_event_loop
from cluster_harness import (
    LEAN_OVERRIDES,
    read_all_confluent,
    wait_for_isr,
    wait_zk_leader,
    zk_get,
)

from kt.tools import local_cluster_security as sec
from kt.tools.local_cluster import LOOPBACK, LocalCluster, free_port

pytestmark = [pytest.mark.integration, pytest.mark.cluster]

TOPIC = "secured-all"
MODES = ("scram", "plain", "mtls")
N = 40  # records per producer (each runs across the kill)
DEADLINE_S = 150.0
PLAIN_USER, PLAIN_PASSWORD = "carol", "carol-secret"
MTLS_USER = "dave"
JS_DIR = Path(__file__).resolve().parent.parent / "js"


@dataclass
class Secured:
    """The running cluster and what a client needs to reach it in each mode."""

    cluster: LocalCluster
    ssl_ports: dict[int, int]
    ca: Path
    cert: Path
    key: Path
    admin_password: str

    def bootstrap(self, mode: str) -> str:
        if mode == "mtls":
            return ",".join(f"{LOOPBACK}:{self.ssl_ports[b.broker_id]}"
                            for b in self.cluster.brokers)  # fmt: skip
        return self.cluster.bootstrap_servers

    def user(self, mode: str) -> tuple[str, str]:
        return ("admin", self.admin_password) if mode == "scram" else (PLAIN_USER, PLAIN_PASSWORD)


def _client_certificate(files: sec.SecureFiles, out: Path) -> tuple[Path, Path]:
    """A client certificate for CN=dave,OU=ServiceUsers signed by the cluster's CA."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    ca_cert = x509.load_pem_x509_certificate(files.ca_cert.read_bytes())
    ca_key = serialization.load_pem_private_key(files.ca_key.read_bytes(), None)
    key = ec.generate_private_key(ec.SECP256R1())
    # most significant first: its RFC 2253 form is CN=dave,OU=ServiceUsers,O=kt
    name = x509.Name([x509.NameAttribute(NameOID.ORGANIZATION_NAME, "kt"),
                      x509.NameAttribute(NameOID.ORGANIZATIONAL_UNIT_NAME, "ServiceUsers"),
                      x509.NameAttribute(NameOID.COMMON_NAME, MTLS_USER)])  # fmt: skip
    now = dt.datetime.now(dt.UTC)
    cert = (
        x509.CertificateBuilder().subject_name(name).issuer_name(ca_cert.subject)
        .public_key(key.public_key()).serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5))
        .not_valid_after(now + dt.timedelta(days=2))
        .add_extension(x509.ExtendedKeyUsage([x509.oid.ExtendedKeyUsageOID.CLIENT_AUTH]),
                       critical=False)
        .sign(ca_key, hashes.SHA256())  # type: ignore[arg-type]
    )  # fmt: skip
    cert_path, key_path = out / "client.pem", out / "client.key"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(key.private_bytes(serialization.Encoding.PEM,
                                           serialization.PrivateFormat.PKCS8,
                                           serialization.NoEncryption()))  # fmt: skip
    os.chmod(key_path, 0o600)
    return cert_path, key_path


@pytest.fixture(scope="module")
def secured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Secured]:
    tmp = tmp_path_factory.mktemp("secure-clients")
    overrides = {
        **LEAN_OVERRIDES,
        "listener.security.protocol.map": "SASL_SSL:SASL_SSL,SSL:SSL",
        "sasl.enabled.mechanisms": "SCRAM-SHA-512,PLAIN",
        "listener.name.sasl_ssl.plain.sasl.jaas.config": (
            "org.apache.kafka.common.security.plain.PlainLoginModule required "
            f'user_{PLAIN_USER}="{PLAIN_PASSWORD}";'
        ),
        "listener.name.ssl.ssl.client.auth": "required",
        "ssl.principal.mapping.rules": "RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/,DEFAULT",
        "super.users": f"User:admin;User:{PLAIN_USER};User:{MTLS_USER}",
    }
    c = LocalCluster.create(tmp / "cluster", 3, overrides=overrides, secure=True)
    ssl_ports = {b.broker_id: free_port() for b in c.brokers}
    # the cluster's CA is made before the brokers start, so the client certificate
    # can be signed by it (prepare keeps what it made for the start to use)
    files = sec.prepare(c.directory, [b.broker_id for b in c.brokers], c.bootstrap_servers,
                        host=LOOPBACK)  # fmt: skip
    cert, key = _client_certificate(files, tmp)
    base_args = c._broker_args

    def with_ssl_listener(b: Any) -> list[str]:
        # the later --override wins: each broker gets its own SSL port besides SASL_SSL
        listeners = f"SASL_SSL://{b.bootstrap},SSL://{LOOPBACK}:{ssl_ports[b.broker_id]}"
        return [*base_args(b), "--override", f"listeners={listeners}"]

    c._broker_args = with_ssl_listener  # type: ignore[method-assign]
    c.start(timeout=120.0, register_timeout=60.0)
    try:
        for b in c.brokers:
            check_event_loop(b.log_path.read_text(errors="replace"))
        password = sec.admin_password(files)
        yield Secured(c, ssl_ports, files.ca_cert, cert, key, password)
    finally:
        c.stop(kill=True)


# --- each client's settings per mode -------------------------------------------------------


def _confluent(s: Secured, mode: str) -> dict[str, Any]:
    conf: dict[str, Any] = {"bootstrap.servers": s.bootstrap(mode), "ssl.ca.location": str(s.ca)}
    if mode == "mtls":
        return {**conf, "security.protocol": "SSL", "ssl.certificate.location": str(s.cert),
                "ssl.key.location": str(s.key)}  # fmt: skip
    user, password = s.user(mode)
    return {**conf, "security.protocol": "SASL_SSL", "sasl.username": user,
            "sasl.password": password,
            "sasl.mechanism": "SCRAM-SHA-512" if mode == "scram" else "PLAIN"}  # fmt: skip


def _kafka_python(s: Secured, mode: str) -> dict[str, Any]:
    conf: dict[str, Any] = {"bootstrap_servers": s.bootstrap(mode).split(","),
                            "ssl_cafile": str(s.ca)}  # fmt: skip
    if mode == "mtls":
        return {**conf, "security_protocol": "SSL", "ssl_certfile": str(s.cert),
                "ssl_keyfile": str(s.key)}  # fmt: skip
    user, password = s.user(mode)
    return {**conf, "security_protocol": "SASL_SSL", "sasl_plain_username": user,
            "sasl_plain_password": password,
            "sasl_mechanism": "SCRAM-SHA-512" if mode == "scram" else "PLAIN"}  # fmt: skip


def _aiokafka(s: Secured, mode: str) -> dict[str, Any]:
    from aiokafka.helpers import create_ssl_context

    if mode == "mtls":
        ctx = create_ssl_context(cafile=str(s.ca), certfile=str(s.cert), keyfile=str(s.key))
        return {"bootstrap_servers": s.bootstrap(mode), "security_protocol": "SSL",
                "ssl_context": ctx}  # fmt: skip
    user, password = s.user(mode)
    return {"bootstrap_servers": s.bootstrap(mode), "security_protocol": "SASL_SSL",
            "ssl_context": create_ssl_context(cafile=str(s.ca)),
            "sasl_mechanism": "SCRAM-SHA-512" if mode == "scram" else "PLAIN",
            "sasl_plain_username": user, "sasl_plain_password": password}  # fmt: skip


def _kcat(s: Secured, mode: str) -> list[str]:
    return [a for k, v in _confluent(s, mode).items() if k != "bootstrap.servers"
            for a in ("-X", f"{k}={v}")]  # fmt: skip


def _kafkajs_security(s: Secured, mode: str) -> dict[str, Any]:
    out: dict[str, Any] = {"brokers": s.bootstrap(mode).split(",")}
    if mode == "mtls":
        return {**out, "ssl": {"ca": str(s.ca), "cert": str(s.cert), "key": str(s.key)}}
    user, password = s.user(mode)
    mechanism = "scram-sha-512" if mode == "scram" else "plain"
    return {**out, "ssl": {"ca": str(s.ca)},
            "sasl": {"mechanism": mechanism, "username": user, "password": password}}  # fmt: skip


def _kafkajs(command: str, spec: dict[str, Any]) -> dict[str, Any]:
    """Run tests/js/kt-client.js COMMAND with the spec; its JSON result."""
    proc = subprocess.run(["node", str(JS_DIR / "kt-client.js"), command],
                          input=json.dumps(spec).encode(), capture_output=True, timeout=180,
                          env={**os.environ, "KAFKAJS_NO_PARTITIONER_WARNING": "1"})  # fmt: skip
    lines = proc.stdout.decode().strip().splitlines()
    result: dict[str, Any] = json.loads(lines[-1]) if lines else {"error": "no output"}
    if proc.returncode != 0 or "error" in result:
        raise AssertionError(f"kafkajs {command} failed: {result}\n{proc.stderr.decode()[-3000:]}")
    return result


def _need_node() -> None:
    if shutil.which("node") is None or not (JS_DIR / "node_modules" / "kafkajs").is_dir():
        if os.environ.get("CI"):
            pytest.fail("node or tests/js/node_modules is missing: scripts/setup installs them")
        pytest.skip("kafkajs is not installed: run scripts/setup (npm ci in tests/js)")


# --- producers ----------------------------------------------------------------------------


class Midway:
    """Where a producer stops half way until the leader has been killed, so every
    producer has records acknowledged before the kill and sends the rest across it."""

    def __init__(self, killed: threading.Event, resume_file: Path) -> None:
        self.event = threading.Event()  # set when half way
        self.killed = killed
        self.resume_file = resume_file  # exists once killed (for kafkajs in node)

    def reached(self) -> None:
        self.event.set()
        self.killed.wait(DEADLINE_S)


class Acked:
    """What the brokers acknowledged, from every producer."""

    def __init__(self) -> None:
        self.values: set[bytes] = set()
        self.sent: set[bytes] = set()
        self.lock = threading.Lock()

    def add(self, value: bytes) -> None:
        with self.lock:
            self.values.add(value)


def _produce_confluent(s: Secured, mode: str, acked: Acked, half: Midway) -> None:
    from confluent_kafka import Producer

    p = Producer({**_confluent(s, mode), "enable.idempotence": True, "acks": "all",
                  "linger.ms": 5, "message.timeout.ms": 120000})  # fmt: skip

    def done(err: Any, msg: Any) -> None:
        if err is None:
            acked.add(msg.value())

    for i in range(N):
        if i == N // 2:
            p.flush(60)
            half.reached()
        p.produce(TOPIC, f"ck-{mode}-{i}".encode(), partition=0, on_delivery=done)
        p.poll(0)
        time.sleep(0.05)
    p.flush(150)


def _produce_kafka_python(s: Secured, mode: str, acked: Acked, half: Midway) -> None:
    from kafka import KafkaProducer

    p = KafkaProducer(**_kafka_python(s, mode), acks="all", enable_idempotence=True,
                      retries=2**31 - 1, request_timeout_ms=30000,
                      delivery_timeout_ms=120000, linger_ms=5)  # fmt: skip
    futures = []
    for i in range(N):
        if i == N // 2:
            p.flush(60)
            half.reached()
        value = f"kp-{mode}-{i}".encode()
        futures.append((value, p.send(TOPIC, value, partition=0)))
        time.sleep(0.05)
    for value, f in futures:
        try:
            f.get(timeout=150)
        except Exception:
            continue  # not acknowledged: may be lost
        acked.add(value)
    p.close(timeout=30)


def _produce_aiokafka(s: Secured, mode: str, acked: Acked, half: Midway) -> None:
    from aiokafka import AIOKafkaProducer

    async def main() -> None:
        p = AIOKafkaProducer(**_aiokafka(s, mode), acks="all", enable_idempotence=True,
                             request_timeout_ms=30000)  # fmt: skip
        await p.start()
        try:
            for i in range(N):
                if i == N // 2:
                    await asyncio.to_thread(half.reached)
                value = f"ai-{mode}-{i}".encode()
                try:
                    await asyncio.wait_for(p.send_and_wait(TOPIC, value, partition=0), 150)
                except Exception:
                    continue  # not acknowledged: may be lost
                acked.add(value)
                await asyncio.sleep(0.05)
        finally:
            await p.stop()

    asyncio.run(main())


def _produce_kcat(s: Secured, mode: str, acked: Acked, half: Midway) -> None:
    """kcat -P fed one record every 50 ms through its stdin, so it is producing when
    the leader dies; kcat exits 0 only when every record was acknowledged."""
    values = [f"kc-{mode}-{i}".encode() for i in range(N)]
    with tempfile.TemporaryFile() as err:
        proc = subprocess.Popen(["kcat", "-b", s.bootstrap(mode), *_kcat(s, mode), "-P",
                                 "-t", TOPIC, "-p", "0", "-X", "acks=all",
                                 "-X", "enable.idempotence=true", "-X", "linger.ms=5",
                                 "-X", "message.timeout.ms=120000"],
                                stdin=subprocess.PIPE, stderr=err)  # fmt: skip
        assert proc.stdin is not None
        try:
            for i, v in enumerate(values):
                if i == N // 2:
                    half.reached()
                proc.stdin.write(v + b"\n")
                proc.stdin.flush()
                time.sleep(0.05)
            proc.stdin.close()
            proc.wait(timeout=180)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        err.seek(0)
        assert proc.returncode == 0, err.read().decode()[-2000:]
    for v in values:
        acked.add(v)


def _produce_kafkajs(s: Secured, mode: str, acked: Acked, half: Midway) -> None:
    """kafkajs's idempotent producer sending one record per request every 50 ms;
    each acknowledged record counts (one that failed after its retries may be lost)."""
    values = [f"js-{mode}-{i}".encode() for i in range(N)]
    spec = {**_kafkajs_security(s, mode), "topic": TOPIC, "idempotent": True,
            "stream": True, "delayMs": 50, "pauseAt": N // 2,
            "resumeFile": str(half.resume_file),
            "retry": {"retries": 30, "initialRetryTime": 200, "maxRetryTime": 3000},
            "batches": [[{"key": None, "value": base64.b64encode(v).decode(), "partition": 0}]
                        for v in values]}  # fmt: skip
    proc = subprocess.Popen(["node", str(JS_DIR / "kt-client.js"), "produce"],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE,
                            env={**os.environ, "KAFKAJS_NO_PARTITIONER_WARNING": "1"})  # fmt: skip
    assert proc.stdin is not None and proc.stdout is not None
    try:
        proc.stdin.write(json.dumps(spec).encode())
        proc.stdin.close()
        last: dict[str, Any] = {}
        for line in proc.stdout:
            last = json.loads(line)
            if last.get("progress", 0) >= N // 2:
                half.event.set()  # node waits for resume_file itself
        proc.wait(timeout=180)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    stderr = proc.stderr.read().decode() if proc.stderr is not None else ""
    if proc.returncode != 0 or "batches" not in last:
        raise AssertionError(f"kafkajs produce failed: {last}\n{stderr[-3000:]}")
    for v, result in zip(values, last["batches"], strict=True):
        if isinstance(result, list) and all(r["errorCode"] == 0 for r in result):
            acked.add(v)


# --- consumers (each in its own group) ----------------------------------------------------


def _consume_confluent(s: Secured, mode: str, want: set[bytes], total: int) -> set[bytes]:
    return read_all_confluent({**_confluent(s, mode), "group.id": f"g-confluent-{mode}"},
                              TOPIC, want, DEADLINE_S)  # fmt: skip


def _consume_kafka_python(s: Secured, mode: str, want: set[bytes], total: int) -> set[bytes]:
    from kafka import KafkaConsumer

    got: set[bytes] = set()
    cons = KafkaConsumer(TOPIC, **_kafka_python(s, mode), group_id=f"g-kafka-python-{mode}",
                         auto_offset_reset="earliest", enable_auto_commit=False)  # fmt: skip
    deadline = time.monotonic() + DEADLINE_S
    try:
        while not want <= got and time.monotonic() < deadline:
            for records in cons.poll(timeout_ms=1000).values():
                got.update(r.value for r in records)
        cons.commit()
    finally:
        cons.close()
    return got


def _consume_aiokafka(s: Secured, mode: str, want: set[bytes], total: int) -> set[bytes]:
    from aiokafka import AIOKafkaConsumer

    async def main() -> set[bytes]:
        got: set[bytes] = set()
        c = AIOKafkaConsumer(TOPIC, **_aiokafka(s, mode), group_id=f"g-aiokafka-{mode}",
                             auto_offset_reset="earliest", enable_auto_commit=False)  # fmt: skip
        await c.start()
        deadline = time.monotonic() + DEADLINE_S
        try:
            while not want <= got and time.monotonic() < deadline:
                batch = await c.getmany(timeout_ms=1000)
                got.update(r.value for records in batch.values() for r in records)
            await c.commit()
        finally:
            await c.stop()
        return got

    return asyncio.run(main())


def _consume_kcat(s: Secured, mode: str, want: set[bytes], total: int) -> set[bytes]:
    # -G: a balanced consumer group; -c: exit after that many records
    proc = subprocess.run(["kcat", "-b", s.bootstrap(mode), *_kcat(s, mode),
                           "-X", "auto.offset.reset=earliest", "-G", f"g-kcat-{mode}", TOPIC,
                           "-c", str(total), "-q", "-f", "%s\n"],
                          capture_output=True, timeout=DEADLINE_S)  # fmt: skip
    assert proc.returncode == 0, proc.stderr.decode()[-2000:]
    return set(proc.stdout.split())


def _consume_kafkajs(s: Secured, mode: str, want: set[bytes], total: int) -> set[bytes]:
    consumed = _kafkajs("group-consume", {**_kafkajs_security(s, mode), "topic": TOPIC,
                                          "groupId": f"g-kafkajs-{mode}", "count": total,
                                          "timeoutMs": int(DEADLINE_S * 1000)})  # fmt: skip
    return {base64.b64decode(m["value"]) for m in consumed["messages"]}


def _log_size(s: Secured) -> int:
    """How many records the partition holds (no control records: no transactions)."""
    from confluent_kafka import Consumer, TopicPartition

    cons = Consumer({**_confluent(s, "scram"), "group.id": "g-watermarks"})
    try:
        low, high = cons.get_watermark_offsets(TopicPartition(TOPIC, 0), timeout=60)
    finally:
        cons.close()
    assert low == 0
    return int(high)


CONSUMERS: dict[str, Callable[[Secured, str, set[bytes], int], set[bytes]]] = {
    "confluent-kafka": _consume_confluent,
    "kafka-python": _consume_kafka_python,
    "aiokafka": _consume_aiokafka,
    "kcat": _consume_kcat,
    "kafkajs": _consume_kafkajs,
}


# --- the tests ----------------------------------------------------------------------------


def test_listeners_are_registered(secured: Secured) -> None:
    """Every broker registered both listeners; the inter-broker one is SASL_SSL."""
    c = secured.cluster
    for b in c.brokers:
        reg = json.loads(zk_get(c, f"/brokers/ids/{b.broker_id}") or b"{}")
        assert reg["endpoints"] == [
            f"SASL_SSL://{b.bootstrap}",
            f"SSL://{LOOPBACK}:{secured.ssl_ports[b.broker_id]}",
        ]
        assert reg["listener_security_protocol_map"] == {"SASL_SSL": "SASL_SSL", "SSL": "SSL"}


@pytest.fixture(scope="module")
def produced(secured: Secured) -> tuple[Acked, int]:
    """Produce with every client in every mode (fifteen producers at once); kill the
    partition leader while each waits half way, then they send the rest; then it comes
    back and catches up. Returns what was acknowledged and the killed broker."""
    from confluent_kafka.admin import AdminClient, NewTopic

    _need_node()
    c = secured.cluster
    admin = AdminClient(_confluent(secured, "scram"))
    fut = admin.create_topics([NewTopic(TOPIC, 1, 3, config={"min.insync.replicas": "2"})])[TOPIC]
    fut.result(timeout=60)
    # the followers replicate over SASL_SSL: the ISR fills only if they can
    wait_for_isr(c, TOPIC, 0, [1, 2, 3], timeout=DEADLINE_S)
    leader = wait_zk_leader(c, TOPIC, 0)

    acked = Acked()
    errors: list[BaseException] = []
    killed = threading.Event()
    resume_file = c.directory / "leader-killed"
    halves: list[Midway] = []
    threads = []
    for fn in (_produce_confluent, _produce_kafka_python, _produce_aiokafka, _produce_kcat,
               _produce_kafkajs):  # fmt: skip
        for mode in MODES:
            half = Midway(killed, resume_file)
            halves.append(half)

            def run(fn: Any = fn, mode: str = mode, half: Midway = half) -> None:
                try:
                    fn(secured, mode, acked, half)
                except BaseException as exc:  # reported by the test, not lost in a thread
                    errors.append(exc)
                    half.event.set()

            threads.append(threading.Thread(target=run, name=f"{fn.__name__}-{mode}"))
    for t in threads:
        t.start()
    try:
        for half in halves:
            assert half.event.wait(DEADLINE_S), "a producer did not get half way"
        assert not errors, errors
        # mid-run: every producer is waiting half way, its connections open
        alive = {t.name for t in threads if t.is_alive()}
        assert len(alive) == len(threads), sorted({t.name for t in threads} - alive)
        c.stop_broker(leader, kill=True)
    finally:
        resume_file.touch()
        killed.set()
    for t in threads:
        t.join(DEADLINE_S + 60)
        assert not t.is_alive(), t.name
    assert not errors, errors
    assert wait_zk_leader(c, TOPIC, 0, not_in=[leader]) != leader
    # the producers got (nearly) everything through the leader change
    assert len(acked.values) >= 15 * N * 0.9, len(acked.values)
    for prefix in ("ck", "kp", "ai", "kc", "js"):  # every client got through it
        for mode in MODES:
            got = sum(v.startswith(f"{prefix}-{mode}-".encode()) for v in acked.values)
            assert got >= N * 0.75, (prefix, mode, got)
    # the killed broker comes back and catches up from the new leader over SASL_SSL
    c.start_broker(leader, timeout=DEADLINE_S)
    wait_for_isr(c, TOPIC, 0, [1, 2, 3], timeout=DEADLINE_S)
    return acked, leader


ALL_SENT = {f"{k}-{mode}-{i}".encode() for k in ("ck", "kp", "ai", "kc", "js")
            for mode in MODES for i in range(N)}  # fmt: skip


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("client", list(CONSUMERS))
def test_nothing_acknowledged_is_lost(
    secured: Secured, produced: tuple[Acked, int], client: str, mode: str
) -> None:
    """Each client reads, in its own group in this mode, everything acknowledged."""
    acked, _ = produced
    want = set(acked.values)
    # kcat and kafkajs stop after a count: the whole log (records written but not
    # acknowledged may be in it too), so the acknowledged ones are all among them
    got = CONSUMERS[client](secured, mode, want, _log_size(secured))
    assert not want - got, f"{client}/{mode}: acknowledged but not read: {sorted(want - got)[:10]}"
    # nothing foreign
    assert got <= ALL_SENT, sorted(got - ALL_SENT)[:10]
