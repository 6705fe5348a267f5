"""The admin APIs against a real `kt broker`, driven by real Kafka admin clients
(confluent-kafka / librdkafka and kafka-python) and, for every version of every
admin API, by kt's own protocol codec."""

from __future__ import annotations

import socket
import time
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer
from confluent_kafka import TopicPartition as CTP
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
    NewTopic,
)

from kt.protocol import ClientConnection, apis

pytestmark = [pytest.mark.integration, pytest.mark.timeout(60)]


# --- helpers -------------------------------------------------------------------------


def admin(broker: Any) -> AdminClient:
    return AdminClient({"bootstrap.servers": broker.bootstrap})


def error_of(future: Any) -> KafkaError | None:
    try:
        future.result(timeout=10)
    except KafkaException as exc:
        return exc.args[0]
    return None


def create(a: AdminClient, *topics: NewTopic, **kw: Any) -> dict[str, KafkaError | None]:
    return {t: error_of(f) for t, f in a.create_topics(list(topics), **kw).items()}


def topic_names(a: AdminClient) -> set[str]:
    return set(a.list_topics(timeout=10).topics)


def produce(broker: Any, topic: str, n: int, partition: int = 0) -> None:
    p = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 0})
    for i in range(n):
        p.produce(topic, value=f"v{i}".encode(), key=f"k{i}".encode(), partition=partition)
        p.flush(10)  # one batch per record
    assert p.flush(10) == 0


def consume_offsets(broker: Any, topic: str, expect: int) -> list[int]:
    c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": f"g{time.monotonic()}",
                  "auto.offset.reset": "earliest", "enable.auto.commit": False})  # fmt: skip
    c.assign([CTP(topic, 0, -2)])  # OFFSET_BEGINNING
    out: list[int] = []
    deadline = time.monotonic() + 15
    while len(out) < expect and time.monotonic() < deadline:
        msg = c.poll(0.5)
        if msg is not None and msg.error() is None:
            out.append(msg.offset())
    c.close()
    return out


def call(broker: Any, api: Any, version: int, **body: Any) -> Any:
    """One request with kt's codec on a fresh connection; the decoded response body."""
    conn = ClientConnection("kt-test")
    _, data = conn.send_request(api.key, version, api.request(**body))
    with socket.create_connection(("127.0.0.1", broker.port), timeout=10) as s:
        s.sendall(data)
        while True:
            chunk = s.recv(65536)
            assert chunk, "broker closed the connection"
            got = conn.receive_data(chunk)
            if got:
                return got[0].body


# --- CreateTopics / DeleteTopics / CreatePartitions ------------------------------------


def test_confluent_create_topics(kt_broker: Any) -> None:
    a = admin(kt_broker)
    errs = create(
        a,
        NewTopic("plain", 3, 1),
        NewTopic("withcfg", 1, 1, config={"retention.ms": "1000", "cleanup.policy": "compact"}),
        NewTopic("defaults"),  # num_partitions / replication_factor -1: broker defaults
    )
    assert errs == {"plain": None, "withcfg": None, "defaults": None}
    md = a.list_topics(timeout=10).topics
    assert len(md["plain"].partitions) == 3 and len(md["defaults"].partitions) == 1

    # validate_only checks but creates nothing
    assert create(a, NewTopic("dry", 2, 1), validate_only=True) == {"dry": None}
    assert "dry" not in topic_names(a)
    errs = create(a, NewTopic("plain", 1, 1), validate_only=True)
    assert errs["plain"].code() == KafkaError.TOPIC_ALREADY_EXISTS

    errs = create(
        a,
        NewTopic("plain", 1, 1),
        NewTopic("badkey", 1, 1, config={"no.such.key": "1"}),
        NewTopic("badvalue", 1, 1, config={"retention.ms": "soon"}),
        NewTopic("badrange", 1, 1, config={"min.cleanable.dirty.ratio": "2"}),
        NewTopic("bad/name", 1, 1),
        NewTopic("rf3", 1, 3),
        NewTopic("manual", 2, replica_assignment=[[1], [1]]),
        NewTopic("otherbroker", 1, replica_assignment=[[7]]),
    )
    assert errs["plain"].code() == KafkaError.TOPIC_ALREADY_EXISTS
    assert errs["plain"].str() == "Topic 'plain' already exists."
    assert errs["badkey"].code() == KafkaError.INVALID_CONFIG
    assert "Unknown topic config name: no.such.key" in errs["badkey"].str()
    assert errs["badvalue"].code() == KafkaError.INVALID_CONFIG
    assert "Not a number of type LONG" in errs["badvalue"].str()
    assert errs["badrange"].code() == KafkaError.INVALID_CONFIG
    assert errs["bad/name"].code() == KafkaError.TOPIC_EXCEPTION
    assert errs["rf3"].code() == KafkaError.INVALID_REPLICATION_FACTOR
    assert errs["manual"] is None
    assert errs["otherbroker"].code() == KafkaError.INVALID_REPLICA_ASSIGNMENT
    assert len(a.list_topics(timeout=10).topics["manual"].partitions) == 2
    assert {"badkey", "badvalue", "badrange", "rf3", "otherbroker"}.isdisjoint(topic_names(a))


def test_kafka_python_topics_and_partitions(kt_broker: Any) -> None:
    from kafka.admin import KafkaAdminClient
    from kafka.admin import NewPartitions as KNewPartitions
    from kafka.admin import NewTopic as KNewTopic
    from kafka.errors import (
        InvalidPartitionsError,
        TopicAlreadyExistsError,
        UnknownTopicOrPartitionError,
    )

    a = KafkaAdminClient(bootstrap_servers=kt_broker.bootstrap, request_timeout_ms=10000)
    try:
        a.create_topics([KNewTopic("kp", 2, 1, topic_configs={"segment.ms": "60000"})])
        assert "kp" in a.list_topics()
        with pytest.raises(TopicAlreadyExistsError):
            a.create_topics([KNewTopic("kp", 2, 1)])
        a.create_topics([KNewTopic("kp-dry", 1, 1)], validate_only=True)
        assert "kp-dry" not in a.list_topics()

        a.create_partitions({"kp": KNewPartitions(4)})
        (desc,) = a.describe_topics(["kp"])
        assert len(desc["partitions"]) == 4
        with pytest.raises(InvalidPartitionsError):
            a.create_partitions({"kp": KNewPartitions(3)})
        a.create_partitions({"kp": KNewPartitions(6)}, validate_only=True)
        (desc,) = a.describe_topics(["kp"])
        assert len(desc["partitions"]) == 4

        a.delete_topics(["kp"])
        assert "kp" not in a.list_topics()
        with pytest.raises(UnknownTopicOrPartitionError):
            a.delete_topics(["kp"])
    finally:
        a.close()


def test_delete_topic_renames_then_removes_dir(broker_factory: Any) -> None:
    # A delay the test cannot outlast, so the renamed directories are there when it
    # looks however busy the machine; the removal after a delay is checked below on a
    # broker with a short one, by waiting for the end state.
    kt_broker = broker_factory(**{"log.segment.delete.delay.ms": "600000"})
    a = admin(kt_broker)
    assert create(a, NewTopic("doomed", 2, 1)) == {"doomed": None}
    produce(kt_broker, "doomed", 3)
    data = kt_broker.data_dir
    assert (data / "doomed-0").is_dir() and (data / "doomed-1").is_dir()
    fs = a.delete_topics(["doomed", "never-was"])
    assert error_of(fs["doomed"]) is None
    assert error_of(fs["never-was"]).code() == KafkaError.UNKNOWN_TOPIC_OR_PART
    assert "doomed" not in topic_names(a)
    # Renamed at once to <topic>-<p>.<uuid>-delete, removed after the delay.
    doomed = sorted(p.name for p in data.iterdir() if p.name.startswith("doomed"))
    assert len(doomed) == 2 and all(n.endswith("-delete") for n in doomed), doomed
    quick = broker_factory(**{"log.segment.delete.delay.ms": "100"})
    qa = admin(quick)  # kept: a destroyed client fails its pending futures
    assert create(qa, NewTopic("doomed", 2, 1)) == {"doomed": None}
    produce(quick, "doomed", 3)
    assert error_of(qa.delete_topics(["doomed"])["doomed"]) is None
    deadline = time.monotonic() + 15
    while [p for p in quick.data_dir.iterdir() if p.name.startswith("doomed")]:
        assert time.monotonic() < deadline, "deleted topic directories were never removed"
        time.sleep(0.2)
    quick.stop()

    # A deletion interrupted after the rename is finished at the next start.
    kt_broker.stop()
    leftover = data / "gone-0.0123456789abcdef0123456789abcdef-delete"
    leftover.mkdir()
    (leftover / "00000000000000000000.log").write_bytes(b"")
    kt_broker.start()
    assert not leftover.exists()
    # so are those whose delay had not run out
    assert not [p for p in data.iterdir() if p.name.startswith("doomed")]
    a = admin(kt_broker)
    assert "doomed" not in topic_names(a)


def test_delete_topics_v6_by_id_and_internal(kt_broker: Any) -> None:
    import uuid

    body = call(kt_broker, apis.CREATE_TOPICS, 7, topics=[
        {"name": "byid", "num_partitions": 1, "replication_factor": 1, "assignments": [],
         "configs": []}], timeout_ms=5000)  # fmt: skip
    (t,) = body.topics
    assert t.error_code == 0 and t.topic_id.int != 0 and t.num_partitions == 1
    assert {c.name for c in t.configs} >= {"retention.ms", "cleanup.policy"}
    unknown = uuid.uuid4()
    body = call(kt_broker, apis.DELETE_TOPICS, 6, timeout_ms=5000,
                topics=[{"name": None, "topic_id": t.topic_id},
                        {"name": None, "topic_id": unknown}])  # fmt: skip
    by_id = {r.topic_id: r for r in body.responses}
    assert by_id[t.topic_id].error_code == 0 and by_id[t.topic_id].name == "byid"
    assert by_id[unknown].error_code == 100  # UNKNOWN_TOPIC_ID
    assert "byid" not in topic_names(admin(kt_broker))


# --- configs -------------------------------------------------------------------------


def describe(a: AdminClient, res: ConfigResource) -> dict[str, Any]:
    return a.describe_configs([res])[res].result(timeout=10)


def test_describe_and_alter_topic_configs(kt_broker: Any) -> None:
    a = admin(kt_broker)
    assert create(a, NewTopic("cfg", 1, 1, config={"retention.ms": "1000"})) == {"cfg": None}
    res = ConfigResource("topic", "cfg")
    cfg = describe(a, res)
    for key in ("cleanup.policy", "compression.type", "delete.retention.ms", "file.delete.delay.ms",
                "flush.messages", "flush.ms", "index.interval.bytes", "max.compaction.lag.ms",
                "max.message.bytes", "message.timestamp.type", "message.timestamp.before.max.ms",
                "message.timestamp.after.max.ms", "min.cleanable.dirty.ratio",
                "min.compaction.lag.ms", "min.insync.replicas", "preallocate",
                "retention.bytes", "retention.ms", "segment.bytes", "segment.index.bytes",
                "segment.jitter.ms", "segment.ms", "unclean.leader.election.enable"):  # fmt: skip
        assert key in cfg, key
    assert cfg["retention.ms"].value == "1000"
    assert cfg["retention.ms"].source == ConfigSource.DYNAMIC_TOPIC_CONFIG.value
    assert cfg["cleanup.policy"].value == "delete"
    assert cfg["cleanup.policy"].source == ConfigSource.DEFAULT_CONFIG.value
    assert cfg["max.message.bytes"].value == "1048588"
    assert not cfg["segment.bytes"].is_read_only and not cfg["segment.bytes"].is_sensitive
    assert list(cfg["retention.ms"].synonyms)[:1] == ["retention.ms"]

    # incremental: SET, APPEND to a list, DELETE an override
    ops = [
        ConfigEntry("segment.bytes", "1024", incremental_operation=AlterConfigOpType.SET),
        ConfigEntry("cleanup.policy", "compact", incremental_operation=AlterConfigOpType.APPEND),
        ConfigEntry("retention.ms", None, incremental_operation=AlterConfigOpType.DELETE),
    ]
    assert error_of(a.incremental_alter_configs([ConfigResource("topic", "cfg",
                    incremental_configs=ops)])[res]) is None  # fmt: skip
    cfg = describe(a, res)
    assert cfg["segment.bytes"].value == "1024"
    assert cfg["cleanup.policy"].value == "delete,compact"
    assert cfg["retention.ms"].source == ConfigSource.DEFAULT_CONFIG.value
    sub = [
        ConfigEntry("cleanup.policy", "compact", incremental_operation=AlterConfigOpType.SUBTRACT)
    ]
    assert error_of(a.incremental_alter_configs([ConfigResource("topic", "cfg",
                    incremental_configs=sub)])[res]) is None  # fmt: skip
    assert describe(a, res)["cleanup.policy"].value == "delete"

    # the new segment.bytes is live: appends roll 1 KiB segments
    produce(kt_broker, "cfg", 40)
    logs = list((kt_broker.data_dir / "cfg-0").glob("*.log"))
    assert len(logs) > 1

    # errors: bad value, APPEND to a non-list, unknown key, unknown topic; validate_only
    bad = [
        ConfigResource("topic", "cfg", incremental_configs=[
            ConfigEntry("retention.ms", "-7", incremental_operation=AlterConfigOpType.SET)]),
    ]  # fmt: skip
    err = error_of(a.incremental_alter_configs(bad)[bad[0]])
    assert err.code() == KafkaError.INVALID_CONFIG and "at least -1" in err.str()
    bad = [
        ConfigResource(
            "topic",
            "cfg",
            incremental_configs=[
                ConfigEntry("retention.ms", "5", incremental_operation=AlterConfigOpType.APPEND)
            ],
        )
    ]
    err = error_of(a.incremental_alter_configs(bad)[bad[0]])
    assert err.code() == KafkaError.INVALID_CONFIG and "not LIST" in err.str()
    missing = ConfigResource("topic", "nope", set_config={"retention.ms": "5"})
    err = error_of(a.alter_configs([missing])[missing])
    assert err.code() == KafkaError.UNKNOWN_TOPIC_OR_PART
    dry = ConfigResource("topic", "cfg", set_config={"retention.ms": "5"})
    assert error_of(a.alter_configs([dry], validate_only=True)[dry]) is None
    assert describe(a, res)["retention.ms"].source == ConfigSource.DEFAULT_CONFIG.value

    # legacy AlterConfigs replaces every override
    legacy = ConfigResource("topic", "cfg", set_config={"retention.bytes": "123456"})
    assert error_of(a.alter_configs([legacy])[legacy]) is None
    cfg = describe(a, res)
    assert cfg["retention.bytes"].value == "123456"
    assert cfg["segment.bytes"].source == ConfigSource.DEFAULT_CONFIG.value

    # overrides survive a restart
    kt_broker.restart()
    a = admin(kt_broker)
    cfg = describe(a, res)
    assert cfg["retention.bytes"].value == "123456"
    assert cfg["retention.bytes"].source == ConfigSource.DYNAMIC_TOPIC_CONFIG.value


def test_broker_configs(broker_factory: Any) -> None:
    b = broker_factory(**{"log.retention.hours": "24", "num.partitions": "2"})
    a = admin(b)
    res = ConfigResource("broker", "1")
    cfg = describe(a, res)
    assert cfg["num.partitions"].value == "2"
    assert cfg["num.partitions"].source == ConfigSource.STATIC_BROKER_CONFIG.value
    assert cfg["num.partitions"].is_read_only
    assert cfg["log.segment.bytes"].source == ConfigSource.DEFAULT_CONFIG.value
    # a topic inherits the server's log.retention.hours
    assert create(a, NewTopic("inherits", 1, 1)) == {"inherits": None}
    t = describe(a, ConfigResource("topic", "inherits"))
    assert t["retention.ms"].value == str(24 * 3_600_000)
    assert t["retention.ms"].source == ConfigSource.STATIC_BROKER_CONFIG.value
    # no dynamic broker configs
    change = ConfigResource("broker", "1", set_config={"num.partitions": "5"})
    err = error_of(a.alter_configs([change])[change])
    assert err.code() == KafkaError.INVALID_REQUEST
    body = call(b, apis.DESCRIBE_CONFIGS, 4, include_synonyms=False, include_documentation=False,
                resources=[{"resource_type": 4, "resource_name": "9",
                            "configuration_keys": None}])  # fmt: skip
    assert body.results[0].error_code == 42  # INVALID_REQUEST: not this broker


def test_kafka_python_configs(kt_broker: Any) -> None:
    from kafka.admin import ConfigResource as KRes
    from kafka.admin import ConfigResourceType, KafkaAdminClient
    from kafka.admin import NewTopic as KNewTopic

    a = KafkaAdminClient(bootstrap_servers=kt_broker.bootstrap, request_timeout_ms=10000)
    try:
        a.create_topics([KNewTopic("kpc", 1, 1)])
        a.alter_configs([KRes(ConfigResourceType.TOPIC, "kpc", configs={"retention.ms": "5000"})])
        out = a.describe_configs([KRes(ConfigResourceType.TOPIC, "kpc")], config_filter="all")
        text = repr(out)
        assert "retention.ms" in text and "5000" in text and "segment.bytes" in text
    finally:
        a.close()


# --- DeleteRecords -------------------------------------------------------------------


def test_delete_records_moves_log_start(kt_broker: Any) -> None:
    a = admin(kt_broker)
    assert create(a, NewTopic("dr", 1, 1)) == {"dr": None}
    produce(kt_broker, "dr", 10)
    fs = a.delete_records([CTP("dr", 0, 4)])
    (f,) = fs.values()
    assert f.result(timeout=10).low_watermark == 4
    assert consume_offsets(kt_broker, "dr", 6) == [4, 5, 6, 7, 8, 9]
    # an offset at or below the log start changes nothing; beyond the HW is an error
    (f,) = a.delete_records([CTP("dr", 0, 2)]).values()
    assert f.result(timeout=10).low_watermark == 4
    (f,) = a.delete_records([CTP("dr", 0, 11)]).values()
    assert error_of(f).code() == KafkaError.OFFSET_OUT_OF_RANGE

    kt_broker.kill()  # even without a clean shutdown: the checkpoint was written at once
    kt_broker.start()
    assert consume_offsets(kt_broker, "dr", 6) == [4, 5, 6, 7, 8, 9]
    a = admin(kt_broker)
    (f,) = a.delete_records([CTP("dr", 0, -1)]).values()  # -1: the HW
    assert f.result(timeout=10).low_watermark == 10


def test_kafka_python_delete_records_and_log_dirs(kt_broker: Any) -> None:
    from kafka import TopicPartition as KTP
    from kafka.admin import KafkaAdminClient
    from kafka.admin import NewTopic as KNewTopic

    a = KafkaAdminClient(bootstrap_servers=kt_broker.bootstrap, request_timeout_ms=10000)
    try:
        a.create_topics([KNewTopic("kpd", 2, 1)])
        produce(kt_broker, "kpd", 5)
        out = a.delete_records({KTP("kpd", 0): 3})
        assert out[KTP("kpd", 0)]["low_watermark"] == 3
        dirs = a.describe_log_dirs()
        text = repr(dirs)
        assert str(Path(kt_broker.data_dir).resolve()) in text and "kpd" in text
    finally:
        a.close()


# --- DescribeCluster, DescribeLogDirs, OffsetForLeaderEpoch, DescribeProducers ------------


def test_describe_cluster(kt_broker: Any) -> None:
    from kafka.admin import KafkaAdminClient

    # librdkafka answers describe_cluster from Metadata, kafka-python uses DescribeCluster
    a = admin(kt_broker)
    d = a.describe_cluster().result(timeout=10)
    assert d.cluster_id and d.controller.id == 1
    assert [(n.id, n.host, n.port) for n in d.nodes] == [(1, "127.0.0.1", kt_broker.port)]
    k = KafkaAdminClient(bootstrap_servers=kt_broker.bootstrap, request_timeout_ms=10000)
    try:
        info = k.describe_cluster()
    finally:
        k.close()
    assert info["cluster_id"] == d.cluster_id and info["controller_id"] == 1
    assert [(b["broker_id"], b["port"]) for b in info["brokers"]] == [(1, kt_broker.port)]
    body = call(kt_broker, apis.DESCRIBE_CLUSTER, 1, include_cluster_authorized_operations=True)
    assert body.cluster_authorized_operations == 8096  # the 7 cluster operations
    body = call(kt_broker, apis.DESCRIBE_CLUSTER, 1, include_cluster_authorized_operations=False,
                endpoint_type=2)  # fmt: skip
    assert body.error_code == 114  # MISMATCHED_ENDPOINT_TYPE


def test_describe_log_dirs_versions(kt_broker: Any) -> None:
    assert create(admin(kt_broker), NewTopic("ld", 2, 1)) == {"ld": None}
    produce(kt_broker, "ld", 3)
    for v in range(5):
        body = call(kt_broker, apis.DESCRIBE_LOG_DIRS, v, topics=None)
        (r,) = body.results
        assert r.error_code == 0 and r.log_dir == str(Path(kt_broker.data_dir).resolve())
        sizes = {(t.name, p.partition_index): p.partition_size for t in r.topics
                 for p in t.partitions}  # fmt: skip
        assert sizes[("ld", 0)] > 0 and sizes[("ld", 1)] == 0
        if v >= 4:
            assert r.total_bytes > 0 and 0 <= r.usable_bytes <= r.total_bytes
    body = call(kt_broker, apis.DESCRIBE_LOG_DIRS, 4, topics=[{"topic": "ld", "partitions": [1]}])
    assert [(t.name, [p.partition_index for p in t.partitions]) for t in body.results[0].topics] \
        == [("ld", [1])]  # fmt: skip


def test_offset_for_leader_epoch(kt_broker: Any) -> None:
    assert create(admin(kt_broker), NewTopic("ep", 1, 1)) == {"ep": None}
    body = call(kt_broker, apis.OFFSET_FOR_LEADER_EPOCH, 4, replica_id=-1, topics=[
        {"topic": "ep", "partitions": [{"partition": 0, "current_leader_epoch": 0,
                                        "leader_epoch": 0}]}])  # fmt: skip
    (p,) = body.topics[0].partitions
    assert (p.error_code, p.leader_epoch, p.end_offset) == (0, 0, 0)  # empty, epoch 0
    produce(kt_broker, "ep", 4)
    for v in range(5):
        body = call(kt_broker, apis.OFFSET_FOR_LEADER_EPOCH, v, replica_id=-1, topics=[
            {"topic": "ep", "partitions": [
                {"partition": 0, "current_leader_epoch": -1, "leader_epoch": 0},
                {"partition": 0, "current_leader_epoch": -1, "leader_epoch": -1},
                {"partition": 0, "current_leader_epoch": -1, "leader_epoch": 5},
                {"partition": 9, "current_leader_epoch": -1, "leader_epoch": 0}]}])  # fmt: skip
        cur, undefined, future, missing = body.topics[0].partitions
        assert cur.error_code == 0 and cur.end_offset == 4
        assert undefined.end_offset == -1 and future.end_offset == -1
        assert missing.error_code == 3  # UNKNOWN_TOPIC_OR_PARTITION
    body = call(kt_broker, apis.OFFSET_FOR_LEADER_EPOCH, 3, replica_id=-1, topics=[
        {"topic": "ep", "partitions": [
            {"partition": 0, "current_leader_epoch": 3, "leader_epoch": 0}]}])  # fmt: skip
    assert body.topics[0].partitions[0].error_code == 75  # UNKNOWN_LEADER_EPOCH


def test_describe_producers(kt_broker: Any) -> None:
    assert create(admin(kt_broker), NewTopic("idem", 1, 1)) == {"idem": None}
    p = Producer({"bootstrap.servers": kt_broker.bootstrap, "enable.idempotence": True})
    for _ in range(3):
        p.produce("idem", value=b"x", partition=0)
    assert p.flush(10) == 0
    body = call(kt_broker, apis.DESCRIBE_PRODUCERS, 0, topics=[
        {"name": "idem", "partition_indexes": [0, 7]}])  # fmt: skip
    ok, missing = body.topics[0].partitions
    assert ok.error_code == 0 and len(ok.active_producers) == 1
    (prod,) = ok.active_producers
    assert prod.producer_id >= 0 and prod.last_sequence == 2
    assert missing.error_code == 3


# --- every version of every admin API -------------------------------------------------


def test_every_version_answers(kt_broker: Any) -> None:
    for v in range(8):
        name = f"v{v}"
        body = call(kt_broker, apis.CREATE_TOPICS, v, timeout_ms=5000, validate_only=False,
                    topics=[{"name": name, "num_partitions": 1, "replication_factor": 1,
                             "assignments": [], "configs": [{"name": "retention.ms",
                                                             "value": "60000"}]}])  # fmt: skip
        assert body.topics[0].error_code == 0, (v, body)
    for v in range(5):
        body = call(kt_broker, apis.DESCRIBE_CONFIGS, v, include_synonyms=True,
                    include_documentation=True, resources=[
                        {"resource_type": 2, "resource_name": "v0",
                         "configuration_keys": ["retention.ms", "segment.ms"]},
                        {"resource_type": 2, "resource_name": "missing",
                         "configuration_keys": None}])  # fmt: skip
        ok, missing = body.results
        assert ok.error_code == 0 and {c.name for c in ok.configs} == {"retention.ms", "segment.ms"}
        ret = next(c for c in ok.configs if c.name == "retention.ms")
        assert ret.value == "60000" and not ret.read_only
        if v == 0:
            assert ret.is_default is False
        else:
            assert ret.config_source == 1 and ret.synonyms[0].name == "retention.ms"
        if v >= 3:
            assert ret.config_type == 5 and ret.documentation
        assert missing.error_code == 3
    for v in range(3):
        body = call(kt_broker, apis.ALTER_CONFIGS, v, validate_only=False, resources=[
            {"resource_type": 2, "resource_name": "v1",
             "configs": [{"name": "segment.ms", "value": "100000"}]}])  # fmt: skip
        assert body.responses[0].error_code == 0
    for v in range(2):
        body = call(
            kt_broker,
            apis.INCREMENTAL_ALTER_CONFIGS,
            v,
            validate_only=False,
            resources=[
                {
                    "resource_type": 2,
                    "resource_name": "v2",
                    "configs": [
                        {"name": "segment.ms", "config_operation": 0, "value": "100000"},
                        {"name": "segment.ms", "config_operation": 1, "value": None},
                    ],
                }
            ],
        )
        assert body.responses[0].error_code == 42  # duplicate keys: INVALID_REQUEST
    for v in range(4):
        body = call(
            kt_broker,
            apis.CREATE_PARTITIONS,
            v,
            timeout_ms=5000,
            validate_only=False,
            topics=[{"name": f"v{v}", "count": 2, "assignments": None}],
        )
        assert body.results[0].error_code == 0
    for v in range(3):
        body = call(
            kt_broker,
            apis.DELETE_RECORDS,
            v,
            timeout_ms=5000,
            topics=[{"name": "v3", "partitions": [{"partition_index": 0, "offset": -1}]}],
        )
        assert body.topics[0].partitions[0].error_code == 0
    for v in range(2):
        body = call(
            kt_broker, apis.DESCRIBE_CLUSTER, v, include_cluster_authorized_operations=False
        )
        assert body.error_code == 0 and body.controller_id == 1
    for v in range(7):
        body = call(kt_broker, apis.DELETE_TOPICS, v, timeout_ms=5000,
                    topic_names=[f"v{v}"], topics=[{"name": f"v{v}"}])  # fmt: skip
        assert body.responses[0].error_code == 0, (v, body)
