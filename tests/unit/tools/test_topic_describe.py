"""`kt topic describe`'s rendering on hand-made metadata: Kafka 3.8's exact lines and
the partition filters' definitions (kafka-topics.sh --describe)."""

from __future__ import annotations

import uuid

from kt.client import ConfigEntry, PartitionInfo, PartitionReassignment, TopicInfo
from kt.tools.topic_cmd import PartitionFilter, describe_topic, parse_replica_assignment

ELR = "\tElr: N/A\tLastKnownElr: N/A"
TID = uuid.UUID("6d0e9f1c-0b5a-4b8e-9f3e-1a2b3c4d5e6f")
LIVE = {1, 2, 3}


def part(p: int, leader: int, replicas: list[int], isr: list[int]) -> PartitionInfo:
    return PartitionInfo("t", p, leader, 5, replicas, isr)


def topic(*parts: PartitionInfo) -> TopicInfo:
    return TopicInfo("t", TID, False, {p.partition: p for p in parts})


CONFIGS = [
    ConfigEntry("min.insync.replicas", "2", 1),
    ConfigEntry("retention.ms", "604800000", 5, is_default=True),
    ConfigEntry("cleanup.policy", "compact", 1),
]
T = topic(
    part(0, 1, [1, 2, 3], [1, 2, 3]),  # healthy
    part(1, 2, [2, 3, 1], [2, 3]),  # under-replicated, at min ISR
    part(2, -1, [3, 1, 2], [3]),  # no leader: unavailable, under min ISR
    part(3, 4, [4, 1, 2], [4, 1, 2]),  # led by broker 4, which is not live
)


def lines(flt: PartitionFilter | None = None) -> list[str]:
    got, _ = describe_topic(T, CONFIGS, LIVE, {}, flt or PartitionFilter())
    return got


def test_kafka_lines() -> None:
    assert lines() == [
        "Topic: t\tTopicId: bQ6fHAtaS46fPhorPE1ebw\tPartitionCount: 4\tReplicationFactor: 3"
        "\tConfigs: min.insync.replicas=2,cleanup.policy=compact",
        "\tTopic: t\tPartition: 0\tLeader: 1\tReplicas: 1,2,3\tIsr: 1,2,3" + ELR,
        "\tTopic: t\tPartition: 1\tLeader: 2\tReplicas: 2,3,1\tIsr: 2,3" + ELR,
        "\tTopic: t\tPartition: 2\tLeader: none\tReplicas: 3,1,2\tIsr: 3" + ELR,
        "\tTopic: t\tPartition: 3\tLeader: 4\tReplicas: 4,1,2\tIsr: 4,1,2" + ELR,
    ]


def _partitions(flt: PartitionFilter) -> list[int]:
    out = []
    for line in lines(flt):
        assert line.startswith("\tTopic: t\tPartition: ")  # never a topic line
        out.append(int(line.split("\t")[2].split(": ")[1]))
    return out


def test_filters() -> None:
    assert _partitions(PartitionFilter(under_replicated=True)) == [1, 2]
    assert _partitions(PartitionFilter(under_min_isr=True)) == [2]
    assert _partitions(PartitionFilter(at_min_isr=True)) == [1]
    assert _partitions(PartitionFilter(unavailable=True)) == [2, 3]
    assert _partitions(PartitionFilter(under_replicated=True, unavailable=True)) == [1, 2, 3]
    healthy = topic(part(0, 1, [1, 2, 3], [1, 2, 3]))
    got, doc = describe_topic(healthy, CONFIGS, LIVE, {}, PartitionFilter(under_replicated=True))
    assert got == [] and doc is None


def test_min_isr_defaults_to_one_without_configs() -> None:
    got, doc = describe_topic(T, [], LIVE, {}, PartitionFilter(at_min_isr=True))
    assert [ln.split("\t")[2] for ln in got] == ["Partition: 2"]
    assert doc is not None and doc["min_insync_replicas"] == 1


def test_reassignment_fields_and_replication_factor() -> None:
    moving = topic(part(0, 1, [1, 2, 3, 4], [1, 2, 3]))
    ra = {("t", 0): PartitionReassignment("t", 0, [1, 2, 3, 4], [4], [1])}
    got, doc = describe_topic(moving, [], LIVE, ra, PartitionFilter())
    assert "\tReplicationFactor: 3\t" in got[0]  # the replica being added does not count
    assert got[1] == (
        "\tTopic: t\tPartition: 0\tLeader: 1\tReplicas: 1,2,3,4\tIsr: 1,2,3"
        "\tAdding Replicas: 4\tRemoving Replicas: 1\tElr: N/A\tLastKnownElr: N/A"
    )
    # ISR 3 of RF 3: not under-replicated while the new replica catches up
    assert describe_topic(moving, [], LIVE, ra, PartitionFilter(under_replicated=True))[0] == []
    assert doc is not None and doc["partitions"][0]["adding_replicas"] == [4]


def test_topics_with_overrides_and_json() -> None:
    got, doc = describe_topic(T, CONFIGS, LIVE, {}, PartitionFilter(), topics_with_overrides=True)
    assert len(got) == 1 and got[0].startswith("Topic: t\t")
    assert doc is not None and doc["partitions"] == []
    plain = topic(part(0, 1, [1], [1]))
    assert describe_topic(plain, [], LIVE, {}, PartitionFilter(), topics_with_overrides=True) == (
        [],
        None,
    )
    _, doc = describe_topic(T, CONFIGS, LIVE, {}, PartitionFilter(unavailable=True))
    assert doc is not None
    assert doc["configs"] == {"min.insync.replicas": "2", "cleanup.policy": "compact"}
    assert [(p["partition"], p["leader"]) for p in doc["partitions"]] == [(2, -1), (3, 4)]


def test_replica_assignment_syntax() -> None:
    assert parse_replica_assignment("1:2:3,2:3:1") == {0: [1, 2, 3], 1: [2, 3, 1]}
