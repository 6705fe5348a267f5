"""Request handlers behaving as Kafka 3.8's broker (through the wire codec): Produce's
batch and topic rules, ListOffsets MAX_TIMESTAMP, ListGroups v5, the deprecated
message.format.version and authorized operations in Metadata.

Each handler gets only the services it reads (`handler_harness.ReplicasOnly`: a
replica manager leading the topics, its topics view, this node): Produce the replica
manager and the topics view, ListOffsets the replica manager, ListGroups a group
coordinator alone (records in memory) and the topics view, Metadata this node, the
topics view and the replica manager. Any other service fails loudly when touched
(Produce never reaches a topic creator: it has none).

Two tests keep the in-process broker, being about more than one handler:
`test_metadata_creates_what_produce_refused` (Produce refusing, then Metadata
auto-creating through the topic creator, the controller and the replica manager)
and `test_message_format_version_is_accepted_and_ignored` (topic creation and
config changes through the topic admin and the controller, then a Produce)."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from handler_harness import ReplicasOnly, call, group_coordinator, open_broker

from kt.broker.authorization import CLUSTER_OPERATIONS, OPERATIONS_NOT_REQUESTED
from kt.broker.errors import TopicError
from kt.broker.services import HandlerServices
from kt.protocol import ErrorCode, apis
from kt.storage import record_batch as v2
from kt.storage.compression import Codec

# READ, WRITE, CREATE, DELETE, ALTER, DESCRIBE, DESCRIBE_CONFIGS, ALTER_CONFIGS (Kafka's
# AclOperation codes 3-8, 10, 11), written out to check the table.
ALL_TOPIC_OPERATIONS = 0b110111111000


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[ReplicasOnly]:
    b = ReplicasOnly(tmp_path)
    yield b
    b.close()


@pytest.fixture
def whole_broker(tmp_path: Path) -> Iterator[Any]:
    b = open_broker(tmp_path)
    yield b
    b.close()


def produce_services(b: ReplicasOnly) -> HandlerServices:
    """What Produce reads (no transactional batches here: no transaction service)."""
    return b.only(topics=b.topics)


def batch(*records: tuple[bytes | None, bytes], timestamps: list[int] | None = None,
          codec: Codec = Codec.NONE) -> bytes:  # fmt: skip
    stamps = timestamps or [1_000 + i for i in range(len(records))]
    specs = [v2.RecordSpec(k, v, timestamp=ts) for (k, v), ts in zip(records, stamps)]
    return bytes(v2.build_batch(specs, codec=codec, base_timestamp=min(stamps)))


def produce(broker: Any, topic: str, records: bytes, version: int = 9, acks: int = -1) -> Any:
    data = [{"name": topic, "partition_data": [{"index": 0, "records": records}]}]
    body = {"acks": acks, "timeout_ms": 1000, "topic_data": data}
    if isinstance(broker, ReplicasOnly):
        resp = broker.call(apis.PRODUCE, version, body, produce_services(broker))
    else:
        resp = call(broker, apis.PRODUCE, version, body)
    assert resp is not None
    return resp.responses[0].partition_responses[0]


def log_end(broker: Any, topic: str) -> int:
    part = broker.replica_manager.get_partition_or_error(topic, 0)
    return part.log_end_offset


# --- Produce -------------------------------------------------------------------------


def test_batch_larger_than_segment_bytes_is_record_list_too_large(broker: ReplicasOnly) -> None:
    broker.add_topic("small", 1, configs={"segment.bytes": "1024"})
    big = batch((b"k", b"x" * 2000))
    assert produce(broker, "small", big).error_code == ErrorCode.RECORD_LIST_TOO_LARGE
    # max.message.bytes is checked first (per batch), as in Kafka.
    limits = {"segment.bytes": "1024", "max.message.bytes": "1500"}
    broker.add_topic("smaller", 1, configs=limits)
    assert produce(broker, "smaller", big).error_code == ErrorCode.MESSAGE_TOO_LARGE
    assert log_end(broker, "small") == log_end(broker, "smaller") == 0


def test_one_batch_per_partition(broker: ReplicasOnly) -> None:
    broker.add_topic("t", 1)
    one = batch((b"k", b"v"))
    got = produce(broker, "t", one + one)
    assert got.error_code == ErrorCode.INVALID_RECORD and got.error_message is None
    assert log_end(broker, "t") == 0
    assert produce(broker, "t", b"").error_code == ErrorCode.INVALID_RECORD
    assert produce(broker, "t", one).error_code == ErrorCode.NONE


def test_invalid_acks_write_nothing(broker: ReplicasOnly) -> None:
    broker.add_topic("t", 1)
    assert produce(broker, "t", batch((b"k", b"v")), acks=2).error_code == (
        ErrorCode.INVALID_REQUIRED_ACKS
    )
    assert log_end(broker, "t") == 0
    got = produce(broker, "nobody", batch((b"k", b"v")), acks=2)
    assert got.error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


def test_acks_all_needs_min_insync_replicas(broker: ReplicasOnly) -> None:
    # One broker: an ISR of one is below min.insync.replicas=2 (Kafka does not cap it
    # at the replication factor for this check).
    broker.add_topic("t", 1, configs={"min.insync.replicas": "2"})
    assert produce(broker, "t", batch((b"k", b"v"))).error_code == ErrorCode.NOT_ENOUGH_REPLICAS
    assert log_end(broker, "t") == 0
    assert produce(broker, "t", batch((b"k", b"v")), acks=1).error_code == ErrorCode.NONE


def test_zstd_needs_produce_v7(broker: ReplicasOnly) -> None:
    broker.add_topic("t", 1)
    zstd = batch((b"k", b"v"), codec=Codec.ZSTD)
    got = produce(broker, "t", zstd, version=6)
    assert got.error_code == ErrorCode.UNSUPPORTED_COMPRESSION_TYPE
    assert produce(broker, "t", zstd, version=7).error_code == ErrorCode.NONE


def test_produce_never_creates_topics(broker: ReplicasOnly) -> None:
    # Topics are auto-created (by Metadata), yet Produce has no topic creator to reach.
    assert broker.config.get_bool("auto.create.topics.enable")
    got = produce(broker, "nobody", batch((b"k", b"v")))
    assert got.error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    assert "nobody" not in broker.topics.topics
    # A partition the topic does not have, likewise.
    broker.add_topic("t", 1)
    data = [{"name": "t", "partition_data": [{"index": 3, "records": b"x"}]}]
    body = {"acks": 1, "timeout_ms": 1000, "topic_data": data}
    resp = broker.call(apis.PRODUCE, 9, body, produce_services(broker))
    assert resp is not None
    got = resp.responses[0].partition_responses[0]
    assert got.error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


def test_metadata_creates_what_produce_refused(whole_broker: Any) -> None:
    # The whole broker: Produce refuses, then Metadata auto-creates (topic creator,
    # controller, replica manager).
    broker = whole_broker
    assert broker.topic_creator.auto_create_enabled()
    got = produce(broker, "nobody", batch((b"k", b"v")))
    assert got.error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    assert "nobody" not in broker.metadata.topics
    # The Metadata request still creates them.
    meta = call(broker, apis.METADATA, 9, {"topics": [{"name": "nobody"}]})
    assert meta is not None and meta.topics[0].error_code == ErrorCode.NONE


@pytest.mark.parametrize("codec", [Codec.NONE, Codec.GZIP])
def test_compacted_topic_refuses_records_without_key(broker: ReplicasOnly, codec: Codec) -> None:
    broker.add_topic("c", 1, configs={"cleanup.policy": "compact"})
    got = produce(broker, "c", batch((b"k", b"1"), (None, b"2"), (None, b"3"), codec=codec))
    assert got.error_code == ErrorCode.INVALID_RECORD
    why = "Compacted topic cannot accept message without key in topic partition c-0."
    assert [(e.batch_index, e.batch_index_error_message) for e in got.record_errors] == [
        (1, why), (2, why)
    ]  # fmt: skip
    assert got.error_message == (
        "One or more records have been rejected due to 2 record errors in total, and only "
        "showing the first three errors at most: "
        f"[RecordError(batchIndex=1, message='{why}'), RecordError(batchIndex=2, message='{why}')]"
    )
    assert log_end(broker, "c") == 0
    # Before v8 there is no room for the records' errors: the code alone.
    got = produce(broker, "c", batch((None, b"x")), version=7)
    assert got.error_code == ErrorCode.INVALID_RECORD
    assert produce(broker, "c", batch((b"k", b"v"))).error_code == ErrorCode.NONE
    broker.add_topic("plain", 1)
    assert produce(broker, "plain", batch((None, b"v"))).error_code == ErrorCode.NONE


# --- topic configs ---------------------------------------------------------------------


def test_message_format_version_is_accepted_and_ignored(
    whole_broker: Any, caplog: pytest.LogCaptureFixture
) -> None:
    broker = whole_broker
    with caplog.at_level(logging.WARNING, logger="kt.broker"):
        broker.create_topic("new", 1, configs={"message.format.version": "3.0"})
        assert not caplog.records
        broker.create_topic("old", 1, configs={"message.format.version": "0.10.2-IV0"})
    assert broker.metadata.topics["old"].configs == {"message.format.version": "0.10.2-IV0"}
    assert "Topic configuration message.format.version with value `0.10.2-IV0` is ignored " \
        "for `old`" in caplog.text  # fmt: skip
    for ok in ("2.8-IV1", "2.8.1", "0.11.0", "3.8", "1.0-IV0"):
        broker.alter_topic_configs("new", {"message.format.version": ok})
    with pytest.raises(TopicError) as info:
        broker.create_topic("bad", 1, configs={"message.format.version": "9.9"})
    assert info.value.code == ErrorCode.INVALID_CONFIG
    assert info.value.message == (
        "Invalid value 9.9 for configuration message.format.version: "
        "Version 9.9 is not a valid version"
    )
    with pytest.raises(TopicError):
        broker.create_topic("bad", 1, configs={"message.format.version": "2.8-IV2"})
    # The v2 format is used whatever it says: records written normally.
    assert produce(broker, "old", batch((b"k", b"v"))).error_code == ErrorCode.NONE


# --- ListOffsets -------------------------------------------------------------------------


def list_offsets(broker: ReplicasOnly, topic: str, timestamp: int) -> Any:
    body = {"replica_id": -1, "isolation_level": 0,
            "topics": [{"name": topic, "partitions": [{"partition_index": 0,
                                                       "timestamp": timestamp}]}]}  # fmt: skip
    resp = broker.call(apis.LIST_OFFSETS, 8, body)  # the replica manager only
    assert resp is not None
    return resp.topics[0].partitions[0]


def test_max_timestamp_is_the_offset_of_the_record(broker: ReplicasOnly) -> None:
    broker.add_topic("t", 1)
    empty = list_offsets(broker, "t", -3)
    assert (empty.offset, empty.timestamp, empty.leader_epoch) == (-1, -1, -1)
    produce(broker, "t", batch((b"a", b""), (b"b", b""), (b"c", b""), timestamps=[10, 30, 20]))
    produce(broker, "t", batch((b"d", b""), (b"e", b""), timestamps=[5, 30]))
    got = list_offsets(broker, "t", -3)  # MAX_TIMESTAMP
    # The first record with the largest timestamp (offset 1), not its batch's last (2).
    assert (got.offset, got.timestamp, got.leader_epoch) == (1, 30, 0)
    produce(broker, "t", batch((b"f", b""), (b"g", b""), (b"h", b""), timestamps=[40, 50, 45],
                               codec=Codec.GZIP))  # fmt: skip
    got = list_offsets(broker, "t", -3)
    assert (got.offset, got.timestamp) == (6, 50)


def test_max_timestamp_on_log_append_time_topics(broker: ReplicasOnly) -> None:
    broker.add_topic("lat", 1, configs={"message.timestamp.type": "LogAppendTime"})
    produce(broker, "lat", batch((b"a", b""), (b"b", b"")))
    got = list_offsets(broker, "lat", -3)
    assert got.offset == 0 and got.timestamp > 1_000_000


# --- ListGroups ----------------------------------------------------------------------------


def test_list_groups_v5_reports_and_filters_types(broker: ReplicasOnly) -> None:
    coord = broker.run(group_coordinator())

    async def simple_group() -> None:
        # As a client would: FindCoordinator makes the offsets' store ready first.
        await coord.ensure_topic()
        assert await coord.commit_offsets("g1", -1, "", None, {}) == ErrorCode.NONE

    broker.run(simple_group())
    assert apis.LIST_GROUPS.max_version >= 5
    from kt.broker.handlers import SERVED

    assert SERVED[apis.LIST_GROUPS.key] == (0, 5)
    # ListGroups reads the group coordinator and (whether this broker has the
    # controller's view yet) the topics view.
    services = HandlerServices.only(groups=coord, topics=broker.topics)

    def listed(types: list[str]) -> list[tuple[str, str]]:
        body = {"states_filter": [], "types_filter": types}
        resp = broker.call(apis.LIST_GROUPS, 5, body, services)
        assert resp is not None and resp.error_code == ErrorCode.NONE
        return [(g.group_id, g.group_type) for g in resp.groups]

    try:
        assert listed([]) == [("g1", "classic")]
        assert listed(["Classic"]) == [("g1", "classic")]
        assert listed(["consumer"]) == []
        assert listed(["consumer", "classic"]) == [("g1", "classic")]
    finally:
        broker.run(coord.stop())


# --- authorized operations ---------------------------------------------------------------


def test_metadata_authorized_operations(broker: ReplicasOnly) -> None:
    broker.add_topic("t", 1)
    # Metadata reads this node, the topics view and the replica manager (offline
    # replicas); no authorizer: every operation applicable.
    services = broker.only(node=broker.node, topics=broker.topics)

    def metadata(version: int, body: dict[str, Any]) -> Any:
        return broker.call(apis.METADATA, version, body, services)

    assert sum(1 << c for c in (3, 4, 5, 6, 7, 8, 10, 11)) == ALL_TOPIC_OPERATIONS
    asked = metadata(10, {
        "topics": [{"name": "t"}, {"name": "nope"}], "allow_auto_topic_creation": False,
        "include_cluster_authorized_operations": True,
        "include_topic_authorized_operations": True,
    })  # fmt: skip
    assert asked is not None
    assert [t.topic_authorized_operations for t in asked.topics] == [ALL_TOPIC_OPERATIONS] * 2
    assert asked.cluster_authorized_operations == CLUSTER_OPERATIONS == 0b1111110100000
    plain = metadata(10, {"topics": [{"name": "t"}]})
    assert plain is not None
    assert plain.topics[0].topic_authorized_operations == OPERATIONS_NOT_REQUESTED
    assert plain.cluster_authorized_operations == OPERATIONS_NOT_REQUESTED
    v12 = metadata(12, {"topics": [{"name": "t"}], "include_topic_authorized_operations": True})
    assert v12 is not None and v12.topics[0].topic_authorized_operations == ALL_TOPIC_OPERATIONS
