"""ACL authorization in a real `kt broker` (authorizer.class.name=AclAuthorizer) with
real clients: ACLs created, listed and deleted through confluent-kafka's admin client
(stored in Kafka's ZooKeeper layout), an allowed principal producing and consuming
with a group, a denied one refused per API with Kafka's error codes, Metadata not
leaking unauthorized topics, prefixed ACLs, DENY over ALLOW, the super user, and
Kafka's authorizer log line."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest
from broker_harness import BrokerProcess, free_port

pytestmark = pytest.mark.integration

JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required '
        'user_admin="admin-pw" user_alice="alice-pw" user_bob="bob-pw";')  # fmt: skip


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Any:
    tmp = tmp_path_factory.mktemp("acls")
    port, sasl = free_port(), free_port()
    overrides = {
        "listeners": f"PLAINTEXT://127.0.0.1:{port},SASL_PLAINTEXT://127.0.0.1:{sasl}",
        "sasl.enabled.mechanisms": "PLAIN",
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": JAAS,
        "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
        # the PLAINTEXT listener (tests' bootstrap) is the broker's own, anonymous
        "super.users": "User:admin;User:ANONYMOUS",
        "num.partitions": "1",
        "offsets.topic.num.partitions": "1",
        "offsets.topic.replication.factor": "1",
        "connection.failed.authentication.delay.ms": "0",
    }
    b = BrokerProcess(tmp / "data", port, overrides).start(timeout=60)
    b.sasl_port = sasl  # type: ignore[attr-defined]
    yield b
    assert b.stop() == 0


def conf(b: Any, user: str) -> dict[str, Any]:
    return {
        "bootstrap.servers": f"127.0.0.1:{b.sasl_port}",
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": "PLAIN",
        "sasl.username": user,
        "sasl.password": f"{user}-pw",
    }


def admin(b: Any, user: str = "admin") -> Any:
    from confluent_kafka.admin import AdminClient

    return AdminClient(conf(b, user))


def binding(rtype: str, name: str, principal: str, op: str, perm: str = "ALLOW",
            pattern: str = "LITERAL") -> Any:  # fmt: skip
    from confluent_kafka.admin import (
        AclBinding,
        AclOperation,
        AclPermissionType,
        ResourcePatternType,
        ResourceType,
    )

    return AclBinding(ResourceType[rtype], name, ResourcePatternType[pattern], principal, "*",
                      AclOperation[op], AclPermissionType[perm])  # fmt: skip


@pytest.fixture(scope="module")
def acls(broker: Any) -> Any:
    from confluent_kafka.admin import NewTopic

    a = admin(broker)
    for fut in a.create_topics([NewTopic(t, 1) for t in ("orders", "secret", "pay-eu")]).values():
        fut.result(30)
    wanted = [
        binding("TOPIC", "orders", "User:alice", "WRITE"),
        binding("TOPIC", "orders", "User:alice", "READ"),
        binding("GROUP", "alice-", "User:alice", "READ", pattern="PREFIXED"),
        binding("TOPIC", "pay-", "User:alice", "ALL", pattern="PREFIXED"),
        binding("TOPIC", "pay-eu", "User:alice", "WRITE", perm="DENY"),
    ]
    for fut in a.create_acls(wanted).values():
        assert fut.result(30) is None
    return wanted


def test_acls_are_stored_as_kafka_stores_them(broker: Any, acls: Any) -> None:
    doc = json.loads((Path(broker.data_dir) / "kt-metadata.json").read_text())
    text = json.dumps(doc)
    assert "/kafka-acl/Topic/orders" in text
    assert "/kafka-acl-extended/prefixed/Group/alice-" in text
    assert "/kafka-acl-changes" in text


def test_describe_and_delete_acls(broker: Any, acls: Any) -> None:
    from confluent_kafka.admin import (
        AclBindingFilter,
        AclOperation,
        AclPermissionType,
        ResourcePatternType,
        ResourceType,
    )

    a = admin(broker)
    everything = AclBindingFilter(ResourceType.ANY, None, ResourcePatternType.ANY, None, None,
                                  AclOperation.ANY, AclPermissionType.ANY)  # fmt: skip
    listed = a.describe_acls(everything).result(30)
    assert len(listed) == len(acls)
    extra = binding("TOPIC", "tmp", "User:bob", "READ")
    a.create_acls([extra])[extra].result(30)
    gone_filter = AclBindingFilter(ResourceType.TOPIC, "tmp", ResourcePatternType.LITERAL, None,
                                   None, AclOperation.ANY, AclPermissionType.ANY)  # fmt: skip
    deleted = a.delete_acls([gone_filter])[gone_filter].result(30)
    assert [d.name for d in deleted] == ["tmp"]
    assert len(a.describe_acls(everything).result(30)) == len(acls)
    # non-admins may not describe ACLs (kafka-python reports the broker's error)
    from kafka import KafkaAdminClient
    from kafka.admin import ACLFilter, ACLResourcePatternType, ResourcePatternFilter
    from kafka.admin import ACLOperation as KOp
    from kafka.admin import ACLPermissionType as KPerm
    from kafka.admin import ResourceType as KType
    from kafka.errors import ClusterAuthorizationFailedError

    bob = KafkaAdminClient(
        bootstrap_servers=f"127.0.0.1:{broker.sasl_port}", security_protocol="SASL_PLAINTEXT",
        sasl_mechanism="PLAIN", sasl_plain_username="bob", sasl_plain_password="bob-pw",
    )  # fmt: skip
    anything = ResourcePatternFilter(KType.ANY, None, ACLResourcePatternType.ANY)
    kfilter = ACLFilter(principal=None, host="*", operation=KOp.ANY, permission_type=KPerm.ANY,
                        resource_pattern=anything)  # fmt: skip
    with pytest.raises(ClusterAuthorizationFailedError, match="Request DescribeAcls is not"):
        bob.describe_acls(kfilter)
    bob.close()


def _produce(b: Any, user: str, topic: str) -> str | None:
    from confluent_kafka import KafkaError, Producer

    errors: list[KafkaError] = []
    p = Producer({**conf(b, user), "enable.idempotence": False, "message.timeout.ms": 10000})
    p.produce(topic, b"v", on_delivery=lambda err, msg: errors.append(err))
    p.flush(30)
    err = errors[0] if errors else None
    return None if err is None else err.name()


def test_allowed_principal_produces_and_consumes_with_a_group(broker: Any, acls: Any) -> None:
    from confluent_kafka import Consumer

    assert _produce(broker, "alice", "orders") is None
    c = Consumer({**conf(broker, "alice"), "group.id": "alice-g",
                  "auto.offset.reset": "earliest"})  # fmt: skip
    c.subscribe(["orders"])
    deadline = time.monotonic() + 60
    got = None
    while got is None and time.monotonic() < deadline:
        m = c.poll(1.0)
        if m is not None and m.error() is None:
            got = m.value()
    c.commit(asynchronous=False)
    c.close()
    assert got == b"v"


def test_denied_principal_is_refused_per_api(broker: Any, acls: Any) -> None:
    # bob may not even describe the topic: his producer learns it from Metadata
    assert _produce(broker, "bob", "orders") == "TOPIC_AUTHORIZATION_FAILED"
    # DENY beats the prefixed ALL: alice's Produce itself is refused
    assert _produce(broker, "alice", "pay-eu") == "TOPIC_AUTHORIZATION_FAILED"
    assert _produce(broker, "alice", "secret") == "TOPIC_AUTHORIZATION_FAILED"
    lines = [
        "Principal = User:bob is Denied Operation = Describe from host = 127.0.0.1 on "
        "resource = Topic:LITERAL:orders for request = Metadata with resourceRefCount = 1",
        "Principal = User:alice is Denied Operation = Write from host = 127.0.0.1 on "
        "resource = Topic:LITERAL:pay-eu for request = Produce with resourceRefCount = 1",
    ]
    deadline = time.monotonic() + 20
    while not all(line in broker.log() for line in lines):
        assert time.monotonic() < deadline, broker.log()[-3000:]
        time.sleep(0.1)
    assert "kafka.authorizer.logger" in broker.log()


def test_metadata_does_not_leak_topics(broker: Any, acls: Any) -> None:
    bob = admin(broker, "bob").list_topics(timeout=15)
    assert set(bob.topics) == set()
    alice = admin(broker, "alice").list_topics(timeout=15)
    assert {"orders", "pay-eu"} <= set(alice.topics)
    assert "secret" not in alice.topics
    named = admin(broker, "bob").list_topics(topic="secret", timeout=15)
    assert named.topics["secret"].error.name() == "TOPIC_AUTHORIZATION_FAILED"


def test_group_authorization(broker: Any, acls: Any) -> None:
    from confluent_kafka import Consumer, KafkaException

    errors: list[str] = []
    c = Consumer({**conf(broker, "alice"), "group.id": "other-group",
                  "auto.offset.reset": "earliest",
                  "error_cb": lambda e: errors.append(e.name())})  # fmt: skip
    c.subscribe(["orders"])
    deadline = time.monotonic() + 30
    while "GROUP_AUTHORIZATION_FAILED" not in errors and time.monotonic() < deadline:
        try:
            m = c.poll(0.5)
        except KafkaException as exc:
            errors.append(exc.args[0].name())
            continue
        if m is not None and m.error() is not None:
            errors.append(m.error().name())
    c.close()
    assert "GROUP_AUTHORIZATION_FAILED" in errors


def test_super_user_and_cluster_operations(broker: Any, acls: Any) -> None:
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import NewTopic

    bob = admin(broker, "bob")
    fut = bob.create_topics([NewTopic("bob-topic", 1)])["bob-topic"]
    with pytest.raises(KafkaException, match="TOPIC_AUTHORIZATION_FAILED"):
        fut.result(30)
    boss = admin(broker, "admin")
    boss.create_topics([NewTopic("admin-topic", 1)])["admin-topic"].result(30)


# --- kt acl -------------------------------------------------------------------------------


def kt_acl(b: Any, *args: str, stdin: str = "") -> Any:
    import subprocess

    from broker_harness import KT

    return subprocess.run([KT, "acl", "-b", b.bootstrap, *args], input=stdin,
                          capture_output=True, text=True, timeout=120)  # fmt: skip


def test_kt_acl_add_list_remove_with_kafka_acls_output(broker: Any, acls: Any) -> None:
    r = kt_acl(broker, "--add", "--allow-principal", "User:carol", "--operation", "read",
               "--operation", "Describe", "--topic", "ledger")  # fmt: skip
    assert r.returncode == 0, r.stderr
    pattern = "ResourcePattern(resourceType=TOPIC, name=ledger, patternType=LITERAL)"
    read = "(principal=User:carol, host=*, operation=READ, permissionType=ALLOW)"
    describe = "(principal=User:carol, host=*, operation=DESCRIBE, permissionType=ALLOW)"
    # kafka-acls.sh's bytes: a space before the first tab, one after the last ACL
    assert r.stdout == (
        f"Adding ACLs for resource `{pattern}`: \n \t{read}\n\t{describe} \n\n"
        f"Current ACLs for resource `{pattern}`: \n \t{read}\n\t{describe} \n\n"
    )
    listed = kt_acl(broker, "--list", "--topic", "ledger", "--json")
    assert json.loads(listed.stdout) == [{
        "resource": {"resourceType": "TOPIC", "name": "ledger", "patternType": "LITERAL"},
        "acls": [{"principal": "User:carol", "host": "*", "operation": "Read",
                  "permissionType": "ALLOW"},
                 {"principal": "User:carol", "host": "*", "operation": "Describe",
                  "permissionType": "ALLOW"}]}]  # fmt: skip
    r = kt_acl(broker, "--add", "--allow-principal", "User:carol", "--producer", "--topic",
               "ledger", "--idempotent")  # fmt: skip
    assert r.returncode == 0, r.stderr
    assert "operation=IDEMPOTENT_WRITE" in r.stdout and "operation=CREATE" in r.stdout
    r = kt_acl(broker, "--remove", "--topic", "ledger", stdin="n\n")
    assert r.returncode == 0 and "Are you sure you want to delete all ACLs" in r.stdout
    assert kt_acl(broker, "--list", "--topic", "ledger", "--json").stdout.strip() != "[]"
    r = kt_acl(broker, "--remove", "--force", "--topic", "ledger")
    assert r.returncode == 0, r.stderr
    assert kt_acl(broker, "--list", "--topic", "ledger", "--json").stdout.strip() == "[]"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ((), "Command must include exactly one action: --list, --add, --remove."),
        (("--add", "--topic", "t"), "You must specify one of: --allow-principal, --deny-principal"),
        (("--add", "--allow-principal", "User:x"), "You must provide at least one resource"),
        (("--add", "--allow-principal", "User:x", "--group", "g", "--operation", "Write"),
         "ResourceType GROUP only supports operations"),
        (("--add", "--allow-principal", "User:x", "--topic", "t", "--resource-pattern-type",
          "any"), "A '--resource-pattern-type' value of 'ANY' is not valid when adding acls."),
        (("--add", "--allow-principal", "x", "--topic", "t"),
         "expected a string in format principalType:principalName"),
        (("--add", "--allow-principal", "User:x", "--topic", "t", "--operation",
          "IDEMPOTENT_WRITE"), "--operation: unknown operation"),
    ],
)  # fmt: skip
def test_kt_acl_usage_errors(broker: Any, args: tuple[str, ...], message: str) -> None:
    r = kt_acl(broker, *args)
    assert r.returncode == 2
    assert r.stderr.startswith("kt: error: ") and message in r.stderr, r.stderr


def test_kt_acl_check_explains_the_decision(broker: Any, acls: Any) -> None:
    import subprocess

    from broker_harness import KT

    def check(*args: str) -> Any:
        return subprocess.run([KT, "acl", "check", "-b", broker.bootstrap, *args],
                              capture_output=True, text=True, timeout=120)  # fmt: skip

    r = check("--principal", "User:alice", "--operation", "Describe", "--topic", "orders")
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("ALLOWED: User:alice Describe on TOPIC orders from host *")
    assert "because an ALLOW ACL matches" in r.stdout
    r = check("--principal", "User:alice", "--operation", "Write", "--topic", "pay-eu", "--json")
    assert r.returncode == 1
    verdict = json.loads(r.stdout)
    assert verdict["allowed"] is False
    assert verdict["decidedBy"]["acl"]["permissionType"] == "DENY"
    assert verdict["decidedBy"]["resource"]["name"] == "pay-eu"
    r = check("--principal", "User:bob", "--operation", "Read", "--topic", "nothing-here")
    assert r.returncode == 1
    assert "allow.everyone.if.no.acl.found=false decides" in r.stdout
    r = check("--principal", "User:alice", "--operation", "Read", "--group", "alice-x")
    assert r.returncode == 0 and "patternType=PREFIXED" in r.stdout
    r = check("--principal", "User:alice", "--operation", "Read")
    assert r.returncode == 2 and "name exactly one resource" in r.stderr
