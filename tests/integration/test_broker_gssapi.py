"""SASL/GSSAPI on kt's own broker against a real MIT KDC (Debian's krb5-kdc): the
broker accepts with its keytab (`listener.name.<l>.gssapi.sasl.jaas.config`), kt's
commands (keytab from librdkafka's keys), kafka-python (the gssapi module with a
`kinit` ticket cache) and kcat (Debian's librdkafka with Cyrus SASL) produce and
consume over SASL_PLAINTEXT and SASL_SSL; the principal goes through
`sasl.kerberos.principal.to.local.rules` into the ACLs; kt's client re-authenticates
(KIP-368) with a new Kerberos context; a broker with a stale keytab refuses with
Kafka's message, an unknown principal gets no ticket. confluent-kafka is left out:
the librdkafka in its wheel is built without GSSAPI ("No provider for SASL mechanism
GSSAPI", builtin PLAIN SASL_SCRAM OAUTHBEARER)."""

from __future__ import annotations

import asyncio
import os
import shutil
import socket
import struct
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from broker_harness import KT, BrokerProcess, free_port
from kdc_harness import AVAILABLE, KADMIN_LOCAL, REALM, Kdc

pytest.importorskip("gssapi", reason="the gssapi binding is not installed")

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(not AVAILABLE, reason="krb5-kdc is not installed"),
]

KRB5 = "com.sun.security.auth.module.Krb5LoginModule"


def jaas(keytab: Path, principal: str) -> str:
    return (
        f'{KRB5} required useKeyTab=true storeKey=true keyTab="{keytab}" principal="{principal}";'
    )


def secured(tmp: Path, kdc: Kdc, pki: Path, service: str, keytab: Path) -> BrokerProcess:
    tmp.mkdir(parents=True, exist_ok=True)
    keystore = tmp / "server-keystore.pem"
    keystore.write_text((pki / "server.key").read_text() + (pki / "server.pem").read_text())
    plain, sp, ss, ra = free_port(), free_port(), free_port(), free_port()
    principal = f"{service}/localhost@{REALM}"
    overrides = {
        "listeners": f"PLAINTEXT://127.0.0.1:{plain},SASL_PLAINTEXT://localhost:{sp},"
        f"SASL_SSL://localhost:{ss},REAUTH://localhost:{ra}",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SASL_PLAINTEXT:SASL_PLAINTEXT,"
        "SASL_SSL:SASL_SSL,REAUTH:SASL_PLAINTEXT",
        # a listener whose Kerberos sessions last 3 s (KIP-368)
        "listener.name.reauth.gssapi.sasl.jaas.config": jaas(keytab, principal),
        "listener.name.reauth.gssapi.connections.max.reauth.ms": "3000",
        "sasl.enabled.mechanisms": "GSSAPI",
        "sasl.kerberos.service.name": service,
        "listener.name.sasl_plaintext.gssapi.sasl.jaas.config": jaas(keytab, principal),
        "listener.name.sasl_ssl.gssapi.sasl.jaas.config": jaas(keytab, principal),
        # bob is known as robert here; everyone else of the default realm by name
        "sasl.kerberos.principal.to.local.rules": rf"RULE:[1:$1@$0](bob@{REALM})s/bob@.*/robert/,"
        "DEFAULT",
        "ssl.keystore.type": "PEM",
        "ssl.keystore.location": str(keystore),
        "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
        # the PLAINTEXT listener is the tests' own (ACL set-up), anonymous
        "super.users": "User:ANONYMOUS",
        "num.partitions": "1",
        "offsets.topic.num.partitions": "1",
        "offsets.topic.replication.factor": "1",
        "connection.failed.authentication.delay.ms": "0",
    }
    b = BrokerProcess(tmp / "data", plain, overrides).start(timeout=90)
    b.ports = {"SASL_PLAINTEXT": sp, "SASL_SSL": ss, "REAUTH": ra}  # type: ignore[attr-defined]
    return b


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory, tls_pki: Path) -> Iterator[dict[str, Any]]:
    tmp = tmp_path_factory.mktemp("brokergss")
    k = Kdc(tmp / "kdc").start()
    saved = {key: os.environ.get(key) for key in k.env}
    os.environ.update(k.env)  # the brokers, kt and the gssapi library in this process
    brokers: list[BrokerProcess] = []
    try:
        keytabs = {p: k.add(p) for p in ("kafka/localhost", "alice", "bob", "kafka2/localhost")}
        # kafka2's keytab goes stale: the KDC's key changes after it was written
        subprocess.run([KADMIN_LOCAL, "-r", REALM, "-q", "cpw -randkey kafka2/localhost"],
                       env={**os.environ}, check=True, capture_output=True, timeout=60)  # fmt: skip
        good = secured(tmp / "b1", k, tls_pki, "kafka", keytabs["kafka/localhost"])
        brokers.append(good)
        stale = secured(tmp / "b2", k, tls_pki, "kafka2", keytabs["kafka2/localhost"])
        brokers.append(stale)
        _acls(good)
        yield {"broker": good, "stale": stale, "keytabs": keytabs, "pki": tls_pki, "kdc": k}
    finally:
        for b in brokers:
            b.stop()
        k.stop()
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def _acls(b: BrokerProcess) -> None:
    from confluent_kafka.admin import (
        AclBinding,
        AclOperation,
        AclPermissionType,
        AdminClient,
        NewTopic,
        ResourcePatternType,
        ResourceType,
    )

    a = AdminClient({"bootstrap.servers": b.bootstrap})
    for fut in a.create_topics([NewTopic(t, 1) for t in ("krb", "bobs")]).values():
        fut.result(60)

    def allow(rtype: str, name: str, who: str, op: str) -> Any:
        return AclBinding(ResourceType[rtype], name, ResourcePatternType.LITERAL, who, "*",
                          AclOperation[op], AclPermissionType.ALLOW)  # fmt: skip

    wanted = [
        allow("TOPIC", "krb", "User:alice", "ALL"),
        allow("GROUP", "krb-g", "User:alice", "READ"),
        allow("TOPIC", "bobs", "User:robert", "WRITE"),
    ]
    for fut in a.create_acls(wanted).values():
        assert fut.result(60) is None


def kt(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("KT_BOOTSTRAP")}
    # KRB5CCNAME is shared with kafka-python's `kinit` (alice): kt's keytab logins
    # keep their tickets apart, so bob's keytab works whatever that cache holds
    return subprocess.run([KT, *args], input=stdin, capture_output=True, text=True,
                          timeout=180, env=env)  # fmt: skip


def conn(env: dict[str, Any], protocol: str, user: str, broker: str = "broker",
         service: str = "kafka") -> list[str]:  # fmt: skip
    port = env[broker].ports[protocol]
    args = ["-b", f"localhost:{port}", "-X", f"security.protocol={protocol}",
            "-X", "sasl.mechanism=GSSAPI", "-X", f"sasl.kerberos.service.name={service}",
            "-X", f"sasl.kerberos.keytab={env['keytabs'].get(user, env['keytabs']['alice'])}",
            "-X", f"sasl.kerberos.principal={user}"]  # fmt: skip
    if protocol == "SASL_SSL":
        args[2:2] = ["-X", f"ssl.ca.location={env['pki'] / 'ca.pem'}"]
    return args


@pytest.mark.parametrize("protocol", ["SASL_PLAINTEXT", "SASL_SSL"])
def test_kt_produces_and_consumes_as_a_kerberos_principal(env: dict[str, Any],
                                                          protocol: str) -> None:  # fmt: skip
    c = conn(env, protocol, "alice")
    r = kt("produce", "krb", "-K", ":", *c, stdin=f"{protocol}:one\n{protocol}:two\n")
    assert r.returncode == 0, r.stderr
    r = kt("consume", "krb", "-G", "krb-g", "-o", "beginning", "-K", ":", "-e", *c)
    assert r.returncode == 0, r.stderr
    assert f"{protocol}:one" in r.stdout.splitlines(), r.stdout


def test_acls_apply_to_the_mapped_principal(env: dict[str, Any]) -> None:
    # bob@KT.TEST is User:robert: he may write "bobs" and nothing else. The default
    # credentials cache holds alice's ticket meanwhile: a keytab login is not confused
    _kinit(env, "alice")
    c = conn(env, "SASL_PLAINTEXT", "bob")
    r = kt("produce", "bobs", *c, stdin="hello\n")
    assert r.returncode == 0, r.stderr
    r = kt("produce", "krb", *c, stdin="nope\n")
    assert r.returncode == 1
    assert "TOPIC_AUTHORIZATION_FAILED" in r.stderr or "not authorized" in r.stderr.lower(), (
        r.stderr
    )
    log = env["broker"].log()
    assert "Principal = User:robert is Denied Operation = " in log, log[-3000:]
    assert "resource = Topic:LITERAL:krb" in log


def _kinit(env: dict[str, Any], user: str) -> None:
    subprocess.run(["kinit", "-kt", str(env["keytabs"][user]), user], check=True,
                   env={**os.environ}, capture_output=True, timeout=60)  # fmt: skip


@pytest.mark.parametrize("protocol", ["SASL_PLAINTEXT", "SASL_SSL"])
def test_kafka_python_with_a_ticket_cache(env: dict[str, Any], protocol: str) -> None:
    from kafka import KafkaConsumer, KafkaProducer

    _kinit(env, "alice")
    common: dict[str, Any] = {
        "bootstrap_servers": f"localhost:{env['broker'].ports[protocol]}",
        "security_protocol": protocol,
        "sasl_mechanism": "GSSAPI",
        "sasl_kerberos_service_name": "kafka",
    }
    if protocol == "SASL_SSL":
        common["ssl_cafile"] = str(env["pki"] / "ca.pem")
    p = KafkaProducer(**common, acks="all")
    value = f"kafka-python over {protocol}".encode()
    p.send("krb", value).get(timeout=60)
    p.close()
    consumer = KafkaConsumer("krb", **common, group_id="krb-g", auto_offset_reset="earliest",
                             consumer_timeout_ms=20000)  # fmt: skip
    seen = [m.value for m in consumer]
    consumer.close()
    assert value in seen


def test_a_stale_broker_keytab_is_kafkas_failure(env: dict[str, Any]) -> None:
    c = conn(env, "SASL_PLAINTEXT", "alice", broker="stale", service="kafka2")
    r = kt("topic", "list", *c)
    assert r.returncode == 1
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1, r.stderr
    assert ("Authentication failed during authentication due to invalid credentials with "
            "SASL mechanism GSSAPI") in lines[0], lines[0]  # fmt: skip
    assert "Failed authentication with /" in env["stale"].log()


def test_unknown_principal_gets_no_ticket(env: dict[str, Any]) -> None:
    r = kt("topic", "list", *conn(env, "SASL_PLAINTEXT", "mallory"))
    assert r.returncode == 1
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("kt: error: "), r.stderr
    assert "mallory" in lines[0], lines[0]


def test_kcat_with_librdkafkas_kerberos_keys(env: dict[str, Any], tmp_path: Path) -> None:
    """kcat (Debian's librdkafka, GSSAPI through Cyrus SASL and its kinit command):
    produce over SASL_PLAINTEXT, read back over SASL_SSL."""
    if not shutil.which("kcat"):
        pytest.skip("kcat is not installed")
    ports = env["broker"].ports
    base = ["-X", "sasl.mechanisms=GSSAPI", "-X", "sasl.kerberos.service.name=kafka",
            "-X", f"sasl.kerberos.keytab={env['keytabs']['alice']}",
            "-X", "sasl.kerberos.principal=alice"]  # fmt: skip
    own = {**os.environ, "KRB5CCNAME": f"FILE:{tmp_path / 'kcat-ccache'}"}
    r = subprocess.run(["kcat", "-P", "-b", f"localhost:{ports['SASL_PLAINTEXT']}", "-t", "krb",
                        "-X", "security.protocol=SASL_PLAINTEXT", *base],
                       input="from kcat\n", capture_output=True, text=True, timeout=120,
                       env=own)  # fmt: skip
    assert r.returncode == 0, r.stderr
    r = subprocess.run(["kcat", "-C", "-b", f"localhost:{ports['SASL_SSL']}", "-t", "krb",
                        "-o", "beginning", "-e", "-X", "security.protocol=SASL_SSL",
                        "-X", f"ssl.ca.location={env['pki'] / 'ca.pem'}", *base],
                       capture_output=True, text=True, timeout=120, env=own)  # fmt: skip
    assert r.returncode == 0, r.stderr
    assert "from kcat" in r.stdout.splitlines(), (r.stdout, r.stderr)


def test_kt_reauthenticates_with_kerberos_before_the_session_ends(env: dict[str, Any]) -> None:
    from kt.client import KafkaClient, SecurityConfig

    security = SecurityConfig.from_properties({
        "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "GSSAPI",
        "sasl.kerberos.service.name": "kafka",
        "sasl.kerberos.keytab": str(env["keytabs"]["alice"]),
        "sasl.kerberos.principal": "alice"})  # fmt: skip

    async def go() -> int:
        port = env["broker"].ports["REAUTH"]
        async with KafkaClient(f"localhost:{port}", security=security) as client:
            conn = await client.any_connection()
            assert 0 < conn.session_lifetime_ms <= 3000
            first = id(conn)
            deadline = time.monotonic() + 90
            # the broker closes a connection whose session ran out at its next request;
            # kt re-authenticates (a new Kerberos context) first, so it lives on
            while conn.reauthentications < 2:
                assert time.monotonic() < deadline
                await asyncio.gather(*(client.refresh_metadata() for _ in range(3)))
                await asyncio.sleep(0.05)
            assert id(await client.any_connection()) == first and conn.connected
            return int(conn.reauthentications)

    assert asyncio.run(go()) >= 2


def test_the_server_mechanism_against_mit_krb5_directly(
    env: dict[str, Any], tmp_path: Path
) -> None:
    """GssapiServer with the broker's keytab and MIT krb5's initiator in this process:
    the exchange completes with the authenticated name (not the authorization id the
    client claims); garbage and a replayed AP-REQ are SaslErrors, never crashes."""
    import gssapi

    from kt.broker.security.kerberos import Acceptor, GssapiServer, KerberosShortNamer
    from kt.broker.security.sasl import SaslError

    acceptor = Acceptor(f"kafka/localhost@{REALM}", str(env["keytabs"]["kafka/localhost"]))
    namer = KerberosShortNamer("DEFAULT", REALM)
    creds = gssapi.Credentials(
        name=gssapi.Name("alice", gssapi.NameType.kerberos_principal), usage="initiate",
        store={"client_keytab": str(env["keytabs"]["alice"]),
               "ccache": f"FILE:{tmp_path / 'direct-ccache'}"})  # fmt: skip
    target = gssapi.Name("kafka@localhost", gssapi.NameType.hostbased_service)
    client = gssapi.SecurityContext(name=target, creds=creds, usage="initiate",
                                    flags=gssapi.RequirementFlag.mutual_authentication)  # fmt: skip
    server = GssapiServer(acceptor.context(), namer)
    ap_req = bytes(client.step(None))
    ap_rep = server.evaluate(ap_req)
    client.step(ap_rep)
    assert client.complete and not server.complete
    offer = bytes(client.unwrap(server.evaluate(b"")).message)
    assert offer == b"\x01\x00\x00\x00"
    choice = client.wrap(b"\x01\x00\x00\x00bob@" + REALM.encode(), False).message
    assert server.evaluate(bytes(choice)) == b""
    assert server.complete and server.authorization_id == "alice"
    # the same AP-REQ again is a replay; garbage is not a token
    with pytest.raises(SaslError):
        GssapiServer(acceptor.context(), namer).evaluate(ap_req)
    with pytest.raises(SaslError):
        GssapiServer(acceptor.context(), namer).evaluate(b"\x60garbage" * 100)


def _frame(sock: socket.socket) -> bytes:
    def exactly(n: int) -> bytes:
        buf = b""
        while len(buf) < n:
            chunk = sock.recv(n - len(buf))
            if not chunk:
                raise ConnectionError("closed by the broker")
            buf += chunk
        return buf

    (size,) = struct.unpack(">i", exactly(4))
    return exactly(size)


def test_kafka_0_9_raw_gssapi_without_a_handshake(env: dict[str, Any], tmp_path: Path) -> None:
    """Kafka 0.9's clients send the Kerberos token as the first frame, with no
    SaslHandshake: the broker takes it as GSSAPI (raw tokens both ways), then serves
    Kafka requests on the connection."""
    import gssapi

    creds = gssapi.Credentials(
        name=gssapi.Name("alice", gssapi.NameType.kerberos_principal), usage="initiate",
        store={"client_keytab": str(env["keytabs"]["alice"]),
               "ccache": f"FILE:{tmp_path / 'raw-ccache'}"})  # fmt: skip
    target = gssapi.Name("kafka@localhost", gssapi.NameType.hostbased_service)
    ctx = gssapi.SecurityContext(name=target, creds=creds, usage="initiate",
                                 flags=gssapi.RequirementFlag.mutual_authentication)  # fmt: skip
    port = env["broker"].ports["SASL_PLAINTEXT"]
    with socket.create_connection(("localhost", port), timeout=60) as sock:

        def send(data: bytes) -> None:
            sock.sendall(struct.pack(">i", len(data)) + data)

        send(bytes(ctx.step(None)))
        ctx.step(_frame(sock))  # the AP-REP
        assert ctx.complete
        send(b"")
        offer = bytes(ctx.unwrap(_frame(sock)).message)
        assert offer[0] == 1
        send(bytes(ctx.wrap(b"\x01\x00\x00\x00", False).message))
        # authenticated: ApiVersions v0 (key 18, correlation id 7, no client id)
        send(struct.pack(">hhih", 18, 0, 7, -1))
        answer = _frame(sock)
        assert struct.unpack(">ih", answer[:6]) == (7, 0)
    # a first frame that is neither a request nor a Kerberos token: refused, closed
    with socket.create_connection(("localhost", port), timeout=60) as sock:
        junk = b"\x60" + b"garbage!" * 4
        sock.sendall(struct.pack(">i", len(junk)) + junk)
        with pytest.raises(ConnectionError):
            _frame(sock)
