"""Broker behaviour real clients see where kt used to differ from Kafka 3.8
(confluent-kafka / librdkafka against a real `kt broker`)."""

from __future__ import annotations

import time
from typing import Any

import pytest
from confluent_kafka import (
    ConsumerGroupTopicPartitions,
    ConsumerGroupType,
    KafkaError,
    Producer,
    TopicCollection,
)
from confluent_kafka import TopicPartition as CTP
from confluent_kafka.admin import (
    AclOperation,
    AdminClient,
    NewTopic,
    OffsetSpec,
)

pytestmark = [pytest.mark.integration, pytest.mark.timeout(60)]


def admin(broker: Any) -> AdminClient:
    return AdminClient({"bootstrap.servers": broker.bootstrap})


def create(broker: Any, name: str, **configs: str) -> None:
    a = admin(broker)  # kept alive until its answer: a destroyed client fails its futures
    a.create_topics([NewTopic(name, 1, 1, config=configs)])[name].result(timeout=10)


def send(broker: Any, topic: str, messages: list[tuple[bytes | None, bytes, int]]) -> list[Any]:
    """Produce in one batch; each message's delivery error (None when written)."""
    p = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 200,
                  "enable.idempotence": False, "retries": 0})  # fmt: skip
    errors: list[Any] = []
    for key, value, ts in messages:
        p.produce(topic, value, key, partition=0, timestamp=ts,
                  on_delivery=lambda err, msg: errors.append(err))  # fmt: skip
    assert p.flush(15) == 0
    return errors


def test_compacted_topic_refuses_records_without_key(kt_broker: Any) -> None:
    create(kt_broker, "compacted", **{"cleanup.policy": "compact"})
    now = int(time.time() * 1000)
    errors = send(kt_broker, "compacted", [(b"k", b"v", now), (None, b"v", now)])
    # The whole batch is refused.
    assert [e.code() if e else None for e in errors] == [KafkaError.INVALID_RECORD] * 2
    assert send(kt_broker, "compacted", [(b"k", b"v", now)]) == [None]


def test_batch_larger_than_a_segment(kt_broker: Any) -> None:
    create(kt_broker, "tiny-segments", **{"segment.bytes": "1024"})
    errors = send(kt_broker, "tiny-segments", [(b"k", b"x" * 2000, int(time.time() * 1000))])
    assert [e.code() for e in errors] == [KafkaError.RECORD_LIST_TOO_LARGE]


def test_max_timestamp_offset_is_the_records(kt_broker: Any) -> None:
    create(kt_broker, "stamps")
    now = int(time.time() * 1000)
    assert send(kt_broker, "stamps", [(b"a", b"", now - 3000), (b"b", b"", now - 1000),
                                      (b"c", b"", now - 2000)]) == [None] * 3  # fmt: skip
    tp = CTP("stamps", 0)
    a = admin(kt_broker)
    got = a.list_offsets({tp: OffsetSpec.max_timestamp()})[tp].result(timeout=10)
    assert (got.offset, got.timestamp) == (1, now - 1000)


def test_message_format_version_is_accepted(kt_broker: Any) -> None:
    create(kt_broker, "old-format", **{"message.format.version": "2.8"})
    assert "old-format" in admin(kt_broker).list_topics(timeout=10).topics


def test_list_groups_by_type(kt_broker: Any) -> None:
    create(kt_broker, "t")
    a = admin(kt_broker)
    offsets = ConsumerGroupTopicPartitions("billing", [CTP("t", 0, 0)])
    a.alter_consumer_group_offsets([offsets])["billing"].result(timeout=10)

    def listed(*types: ConsumerGroupType) -> list[tuple[str, ConsumerGroupType]]:
        result = a.list_consumer_groups(types=set(types)).result(timeout=10)
        return [(g.group_id, g.type) for g in result.valid]

    assert listed() == [("billing", ConsumerGroupType.CLASSIC)]
    assert listed(ConsumerGroupType.CLASSIC) == [("billing", ConsumerGroupType.CLASSIC)]
    assert listed(ConsumerGroupType.CONSUMER) == []


def test_authorized_operations_without_authorizer(kt_broker: Any) -> None:
    create(kt_broker, "t")
    a = admin(kt_broker)
    topics = a.describe_topics(TopicCollection(["t"]), include_authorized_operations=True)
    ops = set(topics["t"].result(timeout=10).authorized_operations)
    assert ops == {AclOperation.READ, AclOperation.WRITE, AclOperation.CREATE,
                   AclOperation.DELETE, AclOperation.ALTER, AclOperation.DESCRIBE,
                   AclOperation.DESCRIBE_CONFIGS, AclOperation.ALTER_CONFIGS}  # fmt: skip
    cluster = a.describe_cluster(include_authorized_operations=True).result(timeout=10)
    assert set(cluster.authorized_operations) == {
        AclOperation.CREATE, AclOperation.ALTER, AclOperation.DESCRIBE,
        AclOperation.CLUSTER_ACTION, AclOperation.DESCRIBE_CONFIGS,
        AclOperation.ALTER_CONFIGS, AclOperation.IDEMPOTENT_WRITE,
    }  # fmt: skip
