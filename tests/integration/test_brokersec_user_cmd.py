"""`kt user scram add|describe|delete` against a real broker: the credential it
creates authenticates a real SCRAM client (confluent-kafka), describe shows the
mechanism and iterations only, delete takes effect, bad input is one error line."""

from __future__ import annotations

import json
import subprocess
import time
from typing import Any

import pytest
from broker_harness import KT, BrokerProcess, free_port

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Any:
    tmp = tmp_path_factory.mktemp("usercmd")
    port, sasl = free_port(), free_port()
    b = BrokerProcess(tmp / "data", port, {
        "listeners": f"PLAINTEXT://127.0.0.1:{port},SASL_PLAINTEXT://127.0.0.1:{sasl}",
        "sasl.enabled.mechanisms": "SCRAM-SHA-512,SCRAM-SHA-256",
        "connection.failed.authentication.delay.ms": "0",
    }).start(timeout=60)  # fmt: skip
    b.sasl_port = sasl  # type: ignore[attr-defined]
    yield b
    assert b.stop() == 0


def kt(*args: str, stdin: str = "") -> subprocess.CompletedProcess[str]:
    return subprocess.run([KT, *args], input=stdin, capture_output=True, text=True, timeout=120)


def _can_login(b: Any, user: str, password: str, mech: str = "SCRAM-SHA-512") -> bool:
    from confluent_kafka import KafkaException, Producer

    errors: list[str] = []
    p = Producer({"bootstrap.servers": f"127.0.0.1:{b.sasl_port}",
                  "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": mech,
                  "sasl.username": user, "sasl.password": password,
                  "error_cb": lambda e: errors.append(str(e))})  # fmt: skip
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if errors:
            return False
        try:
            if p.list_topics(timeout=2).brokers:
                return True
        except KafkaException:
            continue
    return False


def test_add_describe_login_delete(broker: Any) -> None:
    boot = ["-b", broker.bootstrap]
    r = kt("user", "scram", "add", "alice", "--iterations", "8192", "--password-file", "-",
           *boot, stdin="alice-secret\n")  # fmt: skip
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "Completed updating config for user alice."
    assert "alice-secret" not in r.stdout + r.stderr
    r = kt("user", "scram", "add", "alice", "--mechanism", "SCRAM-SHA-256", *boot,
           stdin="other-secret\n")  # fmt: skip
    assert r.returncode == 0, r.stderr
    r = kt("user", "scram", "describe", "alice", *boot)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == (
        "SCRAM credential configs for user-principal 'alice' are "
        "SCRAM-SHA-256=iterations=4096, SCRAM-SHA-512=iterations=8192"
    )
    r = kt("user", "scram", "describe", "--json", *boot)
    assert json.loads(r.stdout) == {"alice": [
        {"mechanism": "SCRAM-SHA-256", "iterations": 4096},
        {"mechanism": "SCRAM-SHA-512", "iterations": 8192}]}  # fmt: skip
    assert _can_login(broker, "alice", "alice-secret")
    assert _can_login(broker, "alice", "other-secret", "SCRAM-SHA-256")
    assert not _can_login(broker, "alice", "wrong")
    r = kt("user", "scram", "delete", "alice", "--mechanism", "SCRAM-SHA-512", *boot)
    assert r.returncode == 0, r.stderr
    assert not _can_login(broker, "alice", "alice-secret")


def test_refusals_are_one_line(broker: Any) -> None:
    boot = ["-b", broker.bootstrap]
    r = kt("user", "scram", "delete", "nobody", *boot)
    assert r.returncode == 1
    assert r.stderr.strip() == (
        "kt: error: user nobody: RESOURCE_NOT_FOUND: Attempt to delete a user credential "
        "that does not exist"
    )
    r = kt("user", "scram", "describe", "nobody", *boot)
    assert r.returncode == 1 and "Attempt to describe a user credential that does not exist" in (
        r.stderr)  # fmt: skip
    r = kt("user", "scram", "add", "bob", "--iterations", "100", *boot, stdin="pw\n")
    assert r.returncode == 2 and r.stderr.startswith("kt: error: --iterations must be")
    r = kt("user", "scram", "add", "bob", *boot, stdin="\n")
    assert r.returncode == 2 and "the password is empty" in r.stderr


def test_kafka_configs_scram_form(broker: Any) -> None:
    """kafka-configs.sh's --entity-type users form: add (iterations given and
    defaulted), describe (mechanisms and iterations only), delete; the credentials
    authenticate a real SCRAM client, and describe runs over SASL as that user."""
    boot = ["-b", broker.bootstrap]
    r = kt("configs", "alter", "--entity-type", "users", "--entity-name", "carol",
           "--add-config", "SCRAM-SHA-256=[iterations=8192,password=carol-secret],"
           "SCRAM-SHA-512=[password=carol-512]", *boot)  # fmt: skip
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "Completed updating config for user carol."
    assert _can_login(broker, "carol", "carol-secret", "SCRAM-SHA-256")
    assert _can_login(broker, "carol", "carol-512", "SCRAM-SHA-512")
    sasl = ["-b", f"127.0.0.1:{broker.sasl_port}", "-X", "security.protocol=SASL_PLAINTEXT",
            "-X", "sasl.mechanism=SCRAM-SHA-512", "-X", "sasl.username=carol",
            "-X", "sasl.password=carol-512"]  # fmt: skip
    r = kt("configs", "describe", "--entity-type", "users", "--entity-name", "carol", *sasl)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == (
        "SCRAM credential configs for user-principal 'carol' are "
        "SCRAM-SHA-256=iterations=8192, SCRAM-SHA-512=iterations=4096"
    )
    assert "secret" not in r.stdout and "512'" not in r.stdout
    r = kt("configs", "describe", "--entity-type", "users", "--json", *boot)
    assert json.loads(r.stdout)["carol"] == [
        {"mechanism": "SCRAM-SHA-256", "iterations": 8192},
        {"mechanism": "SCRAM-SHA-512", "iterations": 4096}]  # fmt: skip
    r = kt("configs", "alter", "--entity-type", "users", "--entity-name", "carol",
           "--delete-config", "SCRAM-SHA-256", *boot)  # fmt: skip
    assert r.returncode == 0, r.stderr
    assert not _can_login(broker, "carol", "carol-secret", "SCRAM-SHA-256")
    r = kt("configs", "describe", "--entity-type", "users", "--entity-name", "carol", *boot)
    assert r.stdout.strip().endswith("are SCRAM-SHA-512=iterations=4096")


@pytest.mark.parametrize(
    ("args", "code", "message"),
    [
        (["--add-config", "SCRAM-SHA-256=[iterations=100,password=hunter2]"], 2,
         "kt: error: --add-config: SCRAM-SHA-256: iterations must be 4096 to 16384, got 100"),
        (["--add-config", "SCRAM-SHA-256=[iterations=8192]"], 2,
         "kt: error: --add-config: SCRAM-SHA-256: password is required"),
        (["--add-config", "SCRAM-SHA-256=[pasword=hunter2]"], 2,
         "kt: error: --add-config: SCRAM-SHA-256: expected [iterations=N,password=SECRET] "
         "(iterations optional)"),
        (["--add-config", "producer_byte_rate=1024"], 2,
         "kt: error: --add-config: producer_byte_rate: kt alters only SCRAM credentials of "
         "users (SCRAM-SHA-256, SCRAM-SHA-512), not quotas"),
        (["--delete-config", "SCRAM-SHA-1"], 2,
         "kt: error: --delete-config: SCRAM-SHA-1: not a SCRAM mechanism "
         "(SCRAM-SHA-256, SCRAM-SHA-512)"),
        (["--delete-config", "SCRAM-SHA-256"], 1,
         "kt: error: user nobody: RESOURCE_NOT_FOUND: Attempt to delete a user credential "
         "that does not exist"),
    ],
)  # fmt: skip
def test_kafka_configs_scram_form_refusals(
    broker: Any, args: list[str], code: int, message: str
) -> None:
    r = kt("configs", "alter", "--entity-type", "users", "--entity-name", "nobody", *args,
           "-b", broker.bootstrap)  # fmt: skip
    assert (r.returncode, r.stderr.strip()) == (code, message)
    assert "hunter2" not in r.stderr + r.stdout


def test_users_created_in_zookeeper_before_the_first_broker(zookeeper: str, tmp_path: Any) -> None:
    """`kt user scram add --zookeeper` writes /config/users/<user> (Kafka's format,
    with a change notification) under a chroot that does not exist yet; a broker
    started on that ZooKeeper then authenticates the user, and a user added while it
    runs is picked up through the notification."""
    from kazoo.client import KazooClient

    r = kt("user", "scram", "add", "admin", "--iterations", "8192", "--zookeeper", zookeeper,
           "--password-file", "-", stdin="admin-secret\n")  # fmt: skip
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "Completed updating config for user admin."
    hosts, chroot = zookeeper.split("/", 1)
    zk = KazooClient(hosts=hosts)
    zk.start(timeout=30)
    try:
        data, _ = zk.get(f"/{chroot}/config/users/admin")
        doc = json.loads(data)
        assert doc["version"] == 1 and list(doc["config"]) == ["SCRAM-SHA-512"]
        fields = dict(p.split("=", 1) for p in doc["config"]["SCRAM-SHA-512"].split(","))
        assert set(fields) == {"salt", "stored_key", "server_key", "iterations"}
        assert fields["iterations"] == "8192"
        changes = zk.get_children(f"/{chroot}/config/changes")
        assert len(changes) == 1 and changes[0].startswith("config_change_")
        note = json.loads(zk.get(f"/{chroot}/config/changes/{changes[0]}")[0])
        assert note == {"version": 2, "entity_path": "users/admin"}
    finally:
        zk.stop()
        zk.close()
    assert "admin-secret" not in data.decode()
    r = kt("user", "scram", "describe", "--zookeeper", zookeeper)
    assert r.stdout.strip() == (
        "SCRAM credential configs for user-principal 'admin' are SCRAM-SHA-512=iterations=8192"
    )
    port, sasl = free_port(), free_port()
    b = BrokerProcess(tmp_path / "data", port, {
        "broker.id": "1", "zookeeper.connect": zookeeper,
        "listeners": f"PLAINTEXT://127.0.0.1:{port},SASL_PLAINTEXT://127.0.0.1:{sasl}",
        "sasl.enabled.mechanisms": "SCRAM-SHA-512,SCRAM-SHA-256",
        "connection.failed.authentication.delay.ms": "0",
    }).start(timeout=90)  # fmt: skip
    b.sasl_port = sasl  # type: ignore[attr-defined]
    try:
        assert _can_login(b, "admin", "admin-secret")
        assert not _can_login(b, "admin", "wrong")
        # added while the broker runs: the change notification makes it reload
        r = kt("user", "scram", "add", "late", "--mechanism", "SCRAM-SHA-256", "--zookeeper",
               zookeeper, stdin="late-secret\n")  # fmt: skip
        assert r.returncode == 0, r.stderr
        deadline = time.monotonic() + 60
        while not _can_login(b, "late", "late-secret", "SCRAM-SHA-256"):
            assert time.monotonic() < deadline, "the broker never saw the new user"
        r = kt("user", "scram", "delete", "late", "--mechanism", "SCRAM-SHA-256",
               "--zookeeper", zookeeper)  # fmt: skip
        assert r.returncode == 0, r.stderr
        r = kt("user", "scram", "delete", "late", "--mechanism", "SCRAM-SHA-256",
               "--zookeeper", zookeeper)  # fmt: skip
        assert (r.returncode, r.stderr.strip()) == (1, (
            "kt: error: user late: RESOURCE_NOT_FOUND: Attempt to delete a user credential "
            "that does not exist"))  # fmt: skip
    finally:
        assert b.stop() == 0


def test_zookeeper_unreachable_is_one_line() -> None:
    r = kt("user", "scram", "add", "x", "--zookeeper", f"127.0.0.1:{free_port()}",
           "--timeout", "2", stdin="pw\n")  # fmt: skip
    assert r.returncode == 1
    assert r.stderr.strip().startswith("kt: error: cannot connect to ZooKeeper at 127.0.0.1:")
    assert "Traceback" not in r.stderr
