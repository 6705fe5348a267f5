"""The ACL matrix: for each API family, an allowed principal, a denied one and the
super user, through the dispatcher of an in-process broker with the authorizer on
(requests and answers through the wire codec), with Kafka's error codes; plus
allow.everyone.if.no.acl.found both ways and the loopback link left unchecked.

The matrix keeps the in-process broker on purpose: its subject is the authorizer
the root builds from the config, reached from every API family through the
dispatcher (principal and listener from the network layer), not one handler.
`test_describe_configs_never_shows_secrets` is one handler's: DescribeConfigs gets
only this node and the config."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from handler_harness import InProcessBroker, call_with, open_broker

from kt.broker.config import load_config
from kt.broker.handlers import load_all, resolve
from kt.broker.security.acl import (
    AccessControlEntry,
    AclOperation,
    PatternType,
    PermissionType,
    ResourcePattern,
    ResourceType,
)
from kt.broker.services import HandlerServices, NodeState
from kt.protocol import ErrorCode, apis, decode_request, decode_response, encode_request
from kt.protocol import encode_response as enc_response

E = ErrorCode
ALICE, BOB, ADMIN = "User:alice", "User:bob", "User:admin"


def grant(b: InProcessBroker, rtype: ResourceType, name: str, principal: str,
          op: AclOperation, ptype: PatternType = PatternType.LITERAL,
          perm: PermissionType = PermissionType.ALLOW) -> None:  # fmt: skip
    pattern = ResourcePattern(rtype, name, ptype)
    authz = b.broker.authorizer
    assert authz is not None
    authz.set_acls(pattern, authz.acls(pattern) | {AccessControlEntry(principal, "*", op, perm)})


def ask(b: InProcessBroker, api: Any, version: int, principal: str, listener: str = "CLIENT",
        **body: Any) -> Any:  # fmt: skip
    """One request from `principal` on a network listener; the decoded answer."""
    load_all()
    frame = encode_request(api.key, version, 1, api.request(**body), "t", size_prefix=False)
    header, request = decode_request(bytearray(frame))

    async def go() -> Any:
        return await resolve(await b.broker.dispatcher.dispatch(
            header, request, "10.0.0.5", 1, principal=principal, listener=listener))  # fmt: skip

    response = b.run(go())
    data = enc_response(api.key, version, 1, response, size_prefix=False)
    return decode_response(api.key, version, data)[1]


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Any:
    b = open_broker(
        tmp_path_factory.mktemp("matrix"),
        **{"authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
           "super.users": "User:admin", "offsets.topic.num.partitions": "1",
           "offsets.topic.replication.factor": "1"},
    )  # fmt: skip
    b.create_topic("orders", 1)
    b.create_topic("secret", 1)
    T, G, TX = ResourceType.TOPIC, ResourceType.GROUP, ResourceType.TRANSACTIONAL_ID
    for op in (AclOperation.WRITE, AclOperation.READ, AclOperation.DELETE, AclOperation.ALTER,
               AclOperation.DESCRIBE_CONFIGS):  # fmt: skip
        grant(b, T, "orders", ALICE, op)
    grant(b, G, "alice-", ALICE, AclOperation.ALL, PatternType.PREFIXED)
    grant(b, TX, "tx-alice", ALICE, AclOperation.WRITE)
    yield b
    b.close()


def _produce(b: Any, who: str, topic: str = "orders") -> int:
    data = [{"name": topic, "partition_data": [{"index": 0, "records": None}]}]
    r = ask(b, apis.PRODUCE, 9, who, acks=1, timeout_ms=1000, transactional_id=None,
            topic_data=data)  # fmt: skip
    return int(r.responses[0].partition_responses[0].error_code)


def test_produce(broker: Any) -> None:
    assert _produce(broker, BOB) == E.TOPIC_AUTHORIZATION_FAILED
    # authorized: then the records are checked (none here), not the ACLs
    assert _produce(broker, ALICE) != E.TOPIC_AUTHORIZATION_FAILED
    assert _produce(broker, ADMIN) != E.TOPIC_AUTHORIZATION_FAILED
    assert _produce(broker, ALICE, "secret") == E.TOPIC_AUTHORIZATION_FAILED


def _fetch(b: Any, who: str, replica_id: int = -1) -> int:
    r = ask(b, apis.FETCH, 12, who, replica_id=replica_id, max_wait_ms=0, min_bytes=0,
            max_bytes=1000, isolation_level=0, session_id=0, session_epoch=-1,
            topics=[{"topic": "orders", "partitions": [
                {"partition": 0, "fetch_offset": 0, "partition_max_bytes": 1000}]}],
            forgotten_topics_data=[], rack_id="")  # fmt: skip
    return int(r.responses[0].partitions[0].error_code)


def test_fetch_consumer_and_follower(broker: Any) -> None:
    assert _fetch(broker, BOB) == E.TOPIC_AUTHORIZATION_FAILED
    assert _fetch(broker, ALICE) == E.NONE
    # a follower needs CLUSTER_ACTION: every partition TOPIC_AUTHORIZATION_FAILED
    assert _fetch(broker, ALICE, replica_id=2) == E.TOPIC_AUTHORIZATION_FAILED


def test_list_offsets(broker: Any) -> None:
    def lo(who: str) -> int:
        r = ask(broker, apis.LIST_OFFSETS, 5, who, replica_id=-1, isolation_level=0,
                topics=[{"name": "orders", "partitions": [
                    {"partition_index": 0, "timestamp": -1}]}])  # fmt: skip
        return int(r.topics[0].partitions[0].error_code)

    assert lo(BOB) == E.TOPIC_AUTHORIZATION_FAILED
    assert lo(ALICE) == E.NONE


def test_metadata_all_and_named(broker: Any) -> None:
    everything = ask(broker, apis.METADATA, 9, BOB, topics=None,
                     allow_auto_topic_creation=False,
                     include_topic_authorized_operations=True)  # fmt: skip
    assert [t.name for t in everything.topics] == []
    alice = ask(broker, apis.METADATA, 9, ALICE, topics=None, allow_auto_topic_creation=False,
                include_topic_authorized_operations=True)  # fmt: skip
    assert [t.name for t in alice.topics] == ["orders"]
    # READ, WRITE, DELETE, ALTER, DESCRIBE (implied), DESCRIBE_CONFIGS
    ops = {3, 4, 6, 7, 8, 10}
    assert alice.topics[0].topic_authorized_operations == sum(1 << o for o in ops)
    named = ask(broker, apis.METADATA, 9, BOB, topics=[{"name": "orders"}],
                allow_auto_topic_creation=True)  # fmt: skip
    assert named.topics[0].error_code == E.TOPIC_AUTHORIZATION_FAILED
    assert named.topics[0].partitions == []
    # auto-creation needs CREATE
    grant(broker, ResourceType.TOPIC, "new-", BOB, AclOperation.DESCRIBE, PatternType.PREFIXED)
    created = ask(broker, apis.METADATA, 9, BOB, topics=[{"name": "new-one"}],
                  allow_auto_topic_creation=True)  # fmt: skip
    assert created.topics[0].error_code == E.TOPIC_AUTHORIZATION_FAILED


def test_groups_and_offsets(broker: Any) -> None:
    def join(who: str, group: str) -> int:
        r = ask(broker, apis.JOIN_GROUP, 5, who, group_id=group, session_timeout_ms=10000,
                rebalance_timeout_ms=10000, member_id="", protocol_type="consumer",
                protocols=[])  # fmt: skip
        return int(r.error_code)

    assert join(BOB, "alice-g") == E.GROUP_AUTHORIZATION_FAILED
    assert join(ALICE, "other") == E.GROUP_AUTHORIZATION_FAILED

    def commit(who: str, group: str, topic: str = "orders") -> Any:
        return ask(broker, apis.OFFSET_COMMIT, 7, who, group_id=group,
                   generation_id_or_member_epoch=-1, member_id="", group_instance_id=None,
                   topics=[{"name": topic, "partitions": [
                       {"partition_index": 0, "committed_offset": 0,
                        "committed_metadata": None}]}])  # fmt: skip

    assert commit(BOB, "alice-g").topics[0].partitions[0].error_code == (
        E.GROUP_AUTHORIZATION_FAILED
    )
    # allowed: what follows is the coordinator's business, not the authorizer's
    assert commit(ALICE, "alice-g").topics[0].partitions[0].error_code not in (
        E.GROUP_AUTHORIZATION_FAILED,
        E.TOPIC_AUTHORIZATION_FAILED,
    )
    assert commit(ALICE, "alice-g", "secret").topics[0].partitions[0].error_code == (
        E.TOPIC_AUTHORIZATION_FAILED
    )
    fetched = ask(broker, apis.OFFSET_FETCH, 7, BOB, group_id="alice-g", topics=None)
    assert fetched.error_code == E.GROUP_AUTHORIZATION_FAILED
    fc = ask(broker, apis.FIND_COORDINATOR, 3, BOB, key="alice-g", key_type=0)
    assert fc.error_code == E.GROUP_AUTHORIZATION_FAILED
    assert ask(broker, apis.FIND_COORDINATOR, 3, ALICE, key="alice-g",
               key_type=0).error_code != E.GROUP_AUTHORIZATION_FAILED  # fmt: skip
    listed = ask(broker, apis.LIST_GROUPS, 4, BOB, states_filter=[])
    assert listed.groups == []


def test_topic_admin(broker: Any) -> None:
    created = ask(broker, apis.CREATE_TOPICS, 5, BOB, timeout_ms=5000, validate_only=True,
                  topics=[{"name": "bobs", "num_partitions": 1, "replication_factor": 1,
                           "assignments": [], "configs": []}])  # fmt: skip
    assert created.topics[0].error_code == E.TOPIC_AUTHORIZATION_FAILED
    assert created.topics[0].error_message == "Authorization failed."
    deleted = ask(broker, apis.DELETE_TOPICS, 4, BOB, topic_names=["orders"], timeout_ms=5000)
    assert deleted.responses[0].error_code == E.TOPIC_AUTHORIZATION_FAILED
    parts = ask(broker, apis.CREATE_PARTITIONS, 2, BOB, timeout_ms=5000, validate_only=True,
                topics=[{"name": "orders", "count": 2, "assignments": None}])  # fmt: skip
    assert parts.results[0].error_code == E.TOPIC_AUTHORIZATION_FAILED
    recs = ask(
        broker,
        apis.DELETE_RECORDS,
        1,
        BOB,
        timeout_ms=5000,
        topics=[{"name": "orders", "partitions": [{"partition_index": 0, "offset": 0}]}],
    )
    assert recs.topics[0].partitions[0].error_code == E.TOPIC_AUTHORIZATION_FAILED


def test_configs(broker: Any) -> None:
    def describe(who: str, rtype: int, name: str) -> Any:
        return ask(
            broker,
            apis.DESCRIBE_CONFIGS,
            2,
            who,
            resources=[{"resource_type": rtype, "resource_name": name, "configuration_keys": None}],
        ).results[0]

    assert describe(BOB, 2, "orders").error_code == E.TOPIC_AUTHORIZATION_FAILED
    assert describe(BOB, 2, "orders").error_message == "Topic authorization failed."
    assert describe(ALICE, 2, "orders").error_code == E.NONE
    assert describe(ALICE, 4, "1").error_code == E.CLUSTER_AUTHORIZATION_FAILED
    assert describe(ADMIN, 4, "1").error_code == E.NONE


def test_cluster_and_inter_broker_apis(broker: Any) -> None:
    logdirs = ask(broker, apis.DESCRIBE_LOG_DIRS, 3, BOB, topics=None)
    assert logdirs.error_code == E.CLUSTER_AUTHORIZATION_FAILED
    acls = ask(broker, apis.CREATE_ACLS, 2, BOB, creations=[
        {"resource_type": 2, "resource_name": "x", "resource_pattern_type": 3,
         "principal": BOB, "host": "*", "operation": 3, "permission_type": 3}])  # fmt: skip
    assert acls.results[0].error_code == E.CLUSTER_AUTHORIZATION_FAILED
    scram = ask(broker, apis.DESCRIBE_USER_SCRAM_CREDENTIALS, 0, BOB, users=None)
    assert scram.error_code == E.CLUSTER_AUTHORIZATION_FAILED
    stop = ask(broker, apis.STOP_REPLICA, 3, BOB, controller_id=1, controller_epoch=1,
               broker_epoch=1, delete_partitions=False, topics=[])  # fmt: skip
    assert stop.error_code == E.CLUSTER_AUTHORIZATION_FAILED


def test_idempotent_and_transactional_producers(broker: Any) -> None:
    def init(who: str, txn: str | None) -> int:
        return int(ask(broker, apis.INIT_PRODUCER_ID, 2, who, transactional_id=txn,
                       transaction_timeout_ms=60000).error_code)  # fmt: skip

    # KIP-679: WRITE on some topic is enough for idempotence
    assert init(ALICE, None) == E.NONE
    assert init(BOB, None) == E.CLUSTER_AUTHORIZATION_FAILED
    assert init(BOB, "tx-alice") == E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    end = ask(broker, apis.END_TXN, 2, BOB, transactional_id="tx-alice", producer_id=1,
              producer_epoch=0, committed=True)  # fmt: skip
    assert end.error_code == E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED


def test_deny_beats_allow_and_the_super_user(broker: Any) -> None:
    grant(broker, ResourceType.TOPIC, "orders", ALICE, AclOperation.WRITE,
          perm=PermissionType.DENY)  # fmt: skip
    try:
        assert _produce(broker, ALICE) == E.TOPIC_AUTHORIZATION_FAILED
        assert _fetch(broker, ALICE) == E.NONE  # DENY WRITE does not deny READ
    finally:
        pattern = ResourcePattern(ResourceType.TOPIC, "orders", PatternType.LITERAL)
        authz = broker.broker.authorizer
        authz.set_acls(pattern, {e for e in authz.acls(pattern)
                                 if e.permission != PermissionType.DENY})  # fmt: skip
    assert _fetch(broker, ADMIN) == E.NONE


def test_the_loopback_link_is_not_checked(broker: Any) -> None:
    # the broker's own requests (no listener) are never refused
    assert _fetch(broker, BOB, replica_id=-1) == E.TOPIC_AUTHORIZATION_FAILED
    r = ask(
        broker,
        apis.LIST_OFFSETS,
        5,
        BOB,
        listener="",
        replica_id=-1,
        isolation_level=0,
        topics=[{"name": "orders", "partitions": [{"partition_index": 0, "timestamp": -1}]}],
    )
    assert r.topics[0].partitions[0].error_code == E.NONE


def test_allow_everyone_if_no_acl_found(tmp_path: Path) -> None:
    b = open_broker(tmp_path, **{"authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
                                 "allow.everyone.if.no.acl.found": "true"})  # fmt: skip
    try:
        b.create_topic("open", 1)
        b.create_topic("closed", 1)
        grant(b, ResourceType.TOPIC, "closed", ALICE, AclOperation.WRITE)
        assert _produce(b, BOB, "open") != E.TOPIC_AUTHORIZATION_FAILED
        assert _produce(b, BOB, "closed") == E.TOPIC_AUTHORIZATION_FAILED
    finally:
        b.close()


def test_describe_configs_never_shows_secrets(tmp_path: Path) -> None:
    # A stand-in, not a key (built so no key-shaped text is tracked in the repository).
    label = "PRIVATE " + "KEY"
    key = f"-----BEGIN {label}-----\nMIIsecret\n-----END {label}-----"
    config = load_config(None, {
        "log.dirs": str(tmp_path / "data"), "listeners": "PLAINTEXT://127.0.0.1:9092",
        "ssl.keystore.key": key, "ssl.keystore.password": "pw-secret",
        "listener.name.sasl_ssl.plain.sasl.jaas.config": 'x required user_a="pw-secret";',
        "ssl.truststore.certificates": "-----BEGIN CERTIFICATE-----",
    })  # fmt: skip
    # DescribeConfigs of a broker reads this node (its id) and its config, nothing else.
    services = HandlerServices.only(
        node=NodeState(config.node_id, "PLAINTEXT"), broker_config=lambda: config
    )
    body = {"resources": [{"resource_type": 4, "resource_name": "1", "configuration_keys": None}]}
    r = call_with(services, apis.DESCRIBE_CONFIGS, 2, body)
    assert r is not None
    configs = {c.name: c for c in r.results[0].configs}
    for name in ("ssl.keystore.key", "ssl.keystore.password", "ssl.truststore.certificates",
                 "listener.name.sasl_ssl.plain.sasl.jaas.config"):  # fmt: skip
        assert configs[name].value is None and configs[name].is_sensitive, name
    assert "secret" not in repr(r)
