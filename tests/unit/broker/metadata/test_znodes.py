"""Kafka's znode payloads, byte for byte (facts sheet §1), and their decoders."""

from __future__ import annotations

import uuid

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kt.broker.metadata import znodes as z


def test_paths() -> None:
    assert z.broker_path(3) == "/brokers/ids/3"
    assert z.topic_path("t") == "/brokers/topics/t"
    assert z.partition_state_path("t", 2) == "/brokers/topics/t/partitions/2/state"
    assert z.delete_topic_path("t") == "/admin/delete_topics/t"
    assert z.config_entity_path("brokers", z.DEFAULT_ENTITY) == "/config/brokers/<default>"
    assert z.CONFIG_CHANGE_PREFIX == "/config/changes/config_change_"
    assert z.ISR_CHANGE_PREFIX == "/isr_change_notification/isr_change_"
    assert set(z.PERSISTENT_PATHS) == {
        "/consumers",
        "/brokers/ids",
        "/brokers/topics",
        "/config/changes",
        "/admin/delete_topics",
        "/brokers/seqid",
        "/isr_change_notification",
        "/latest_producer_id_block",
        "/log_dir_event_notification",
        "/config/topics",
        "/config/clients",
        "/config/users",
        "/config/brokers",
        "/config/ips",
    }


def test_broker_registration_v5() -> None:
    reg = z.BrokerRegistration(
        1,
        (z.Endpoint("PLAINTEXT", "h", 9092), z.Endpoint("SSL", "h", 9093, "SSL")),
        1700000000000,
        rack="r1",
        features={"f": (1, 3)},
    )
    assert z.encode_broker(reg) == (
        b'{"version":5,"host":"h","port":9092,'
        b'"endpoints":["PLAINTEXT://h:9092","SSL://h:9093"],'
        b'"listener_security_protocol_map":{"PLAINTEXT":"PLAINTEXT","SSL":"SSL"},'
        b'"jmx_port":-1,"timestamp":"1700000000000","rack":"r1",'
        b'"features":{"f":{"min_version":1,"max_version":3}}}'
    )
    assert z.decode_broker(1, z.encode_broker(reg)) == reg


def test_broker_registration_without_rack_or_plaintext() -> None:
    reg = z.BrokerRegistration(2, (z.Endpoint("INTERNAL", "::1", 9094, "SSL"),), 5)
    assert z.encode_broker(reg) == (
        b'{"version":5,"host":null,"port":-1,"endpoints":["INTERNAL://[::1]:9094"],'
        b'"listener_security_protocol_map":{"INTERNAL":"SSL"},"jmx_port":-1,'
        b'"timestamp":"5","features":{}}'
    )
    decoded = z.decode_broker(2, z.encode_broker(reg))
    assert decoded == reg and decoded.endpoint("INTERNAL") == reg.endpoints[0]


def test_broker_registration_written_by_kafka_2x() -> None:
    data = (
        b'{"listener_security_protocol_map":{"PLAINTEXT":"PLAINTEXT"},"endpoints":'
        b'["PLAINTEXT://kafka-1:9092"],"jmx_port":-1,"host":"kafka-1",'
        b'"timestamp":"1600000000000","port":9092,"version":4}'
    )
    reg = z.decode_broker(7, data)
    assert reg.version == 4 and reg.rack is None and reg.features == {}
    assert reg.endpoints == (z.Endpoint("PLAINTEXT", "kafka-1", 9092),)
    with pytest.raises(z.ZnodeFormatError):
        z.decode_broker(7, b'{"version":4,"endpoints":["nonsense"]}')


def test_topic_ids_are_url_safe_base64_without_padding() -> None:
    raw = bytes.fromhex("fbff3e57c5f64c4e9bd6de2b3b1e3fa1")
    text = z.uuid_to_string(raw)
    assert text == "-_8-V8X2TE6b1t4rOx4_oQ" and len(text) == 22
    assert z.uuid_from_string(text) == raw
    with pytest.raises(z.ZnodeFormatError):
        z.uuid_from_string("short")


@given(st.binary(min_size=16, max_size=16))
def test_uuid_round_trip(raw: bytes) -> None:
    assert z.uuid_from_string(z.uuid_to_string(raw)) == raw


def test_topic_v3() -> None:
    tid = uuid.UUID(int=1).bytes
    topic = z.TopicAssignment({1: [2, 3], 0: [1, 2, 3]}, tid, {0: [3]}, {0: [4]})
    assert z.encode_topic(topic) == (
        b'{"version":3,"partitions":{"0":[1,2,3],"1":[2,3]},'
        b'"adding_replicas":{"0":[3]},"removing_replicas":{"0":[4]},'
        b'"topic_id":"AAAAAAAAAAAAAAAAAAAAAQ"}'
    )
    assert z.decode_topic("t", z.encode_topic(topic)) == topic
    empty = z.encode_topic(z.TopicAssignment({0: [1]}, tid, {0: []}, {}))
    assert b'"adding_replicas":{},"removing_replicas":{}' in empty
    old = z.decode_topic("t", b'{"version":1,"partitions":{"0":[5]}}')
    assert old == z.TopicAssignment({0: [5]})


def test_partition_state() -> None:
    state = z.PartitionState(1, 7, [1, 2, 3], 5)
    assert z.encode_partition_state(state) == (
        b'{"controller_epoch":5,"leader":1,"version":1,"leader_epoch":7,"isr":[1,2,3]}'
    )
    recovering = z.PartitionState(1, 8, [1], 5, z.LEADER_RECOVERING)
    assert z.encode_partition_state(recovering).endswith(b',"leader_recovery_state":1}')
    decoded = z.decode_partition_state(z.encode_partition_state(state), 4)
    assert decoded == z.PartitionState(1, 7, [1, 2, 3], 5, 0, 4)


def test_controller_and_epoch() -> None:
    assert z.encode_controller(1, 1700000000000) == (
        b'{"version":2,"brokerid":1,"timestamp":"1700000000000","kraftControllerEpoch":-1}'
    )
    assert z.decode_controller(z.encode_controller(3, 1)) == 3
    assert z.decode_controller(b'{"version":1,"brokerid":4,"timestamp":"1"}') == 4
    assert z.encode_controller_epoch(5) == b"5"
    assert z.decode_controller_epoch(b"12") == 12
    with pytest.raises(z.ZnodeFormatError):
        z.decode_controller_epoch(b"{}")


def test_configs_and_changes() -> None:
    assert z.encode_entity_config({"retention.ms": "1000"}) == (
        b'{"version":1,"config":{"retention.ms":"1000"}}'
    )
    assert z.decode_entity_config(z.encode_entity_config({"a": "b"})) == {"a": "b"}
    assert z.decode_entity_config(b"") == {}
    assert z.encode_config_change("topics", "t") == b'{"version":2,"entity_path":"topics/t"}'
    assert z.decode_config_change(b'{"version":2,"entity_path":"users/a/clients/b"}') == (
        "users",
        "a/clients/b",
    )


def test_cluster_id_has_a_string_version() -> None:
    assert z.encode_cluster_id("abc") == b'{"version":"1","id":"abc"}'
    assert z.decode_cluster_id(b'{"version":"1","id":"abc"}') == "abc"


def test_producer_id_block_has_string_offsets() -> None:
    block = z.ProducerIdBlock(2, 1000, 1999)
    assert z.encode_producer_id_block(block) == (
        b'{"version":1,"broker":2,"block_start":"1000","block_end":"1999"}'
    )
    assert z.decode_producer_id_block(z.encode_producer_id_block(block)) == block
    assert z.decode_producer_id_block(b"") is None


def test_partition_lists() -> None:
    data = z.encode_partitions([("t", 0), ("u", 1)])
    assert data == (
        b'{"version":1,"partitions":[{"topic":"t","partition":0},{"topic":"u","partition":1}]}'
    )
    assert z.decode_partitions(data) == [("t", 0), ("u", 1)]
    reassign = z.encode_reassignment({("t", 0): [1, 2]})
    assert reassign == b'{"version":1,"partitions":[{"topic":"t","partition":0,"replicas":[1,2]}]}'
    assert z.decode_reassignment(reassign) == {("t", 0): [1, 2]}
    assert z.encode_log_dir_event(3) == b'{"version":1,"broker":3,"event":1}'
    assert z.decode_log_dir_event(z.encode_log_dir_event(3)) == 3


def test_feature() -> None:
    data = z.encode_feature({"metadata.version": 7})
    assert (
        data == b'{"version":2,"status":1,"features":{"metadata.version":{"max_version_level":7}}}'
    )
    assert z.decode_feature(data) == (1, {"metadata.version": 7})


def test_non_ascii_is_written_as_utf8_like_jackson() -> None:
    assert z.encode_entity_config({"k": "é"}) == '{"version":1,"config":{"k":"é"}}'.encode()


@pytest.mark.parametrize("bad", [b"", b"not json", b"[1]", b"\xff"])
def test_garbage_is_a_format_error(bad: bytes) -> None:
    with pytest.raises(z.ZnodeFormatError):
        z.decode_topic("t", bad)
