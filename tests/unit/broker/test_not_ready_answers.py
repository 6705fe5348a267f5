"""A broker that has not received the controller's view of the cluster yet (issue 19
§1): every request that needs the metadata gets a retriable error, never "unknown
topic", and nothing is created meanwhile.

The broker here is a restarted single node stopped short of joining its cluster
(`ClusterMembership.join` held back): its logs are open and its partitions hosted
without a role, its metadata cache is empty, as a cluster member's is while it
waits for its previous ZooKeeper session to expire. Joining afterwards (its own
controller's first view) makes the same requests succeed.

These keep the in-process broker on purpose: the subject is a restart (logs
reopened, partitions hosted without a role, the membership held back, then the
join and the controller's first view) across every request family, not one
handler.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from handler_harness import InProcessBroker, call, open_broker

from kt.broker import server
from kt.broker.membership import ClusterMembership
from kt.protocol import ErrorCode, apis
from kt.storage import record_batch as v2

E = ErrorCode
TOPIC = "t"


def _batch() -> bytes:
    return bytes(v2.build_batch([v2.RecordSpec(b"k", b"v", timestamp=1000)]))


def _produce(b: InProcessBroker, topic: str, version: int = 9) -> Any:
    data = [{"name": topic, "partition_data": [{"index": 0, "records": _batch()}]}]
    resp = call(b, apis.PRODUCE, version, {"acks": -1, "timeout_ms": 1000, "topic_data": data})
    assert resp is not None
    return resp.responses[0].partition_responses[0].error_code


class Restarted:
    """The restarted broker, and how to let it join."""

    def __init__(self, broker: InProcessBroker, join: Any) -> None:
        self.b = broker
        self._join = join

    def join(self) -> None:
        """Join for real: the single node's controller sends the first view."""
        running = self.b.running
        assert running.membership is not None
        self.b.run(self._join(running.membership))
        running._joined = True
        self.b.run(server._wait_until_ready(self.b.broker))


@pytest.fixture
def restarted(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Restarted]:
    first = open_broker(tmp_path)
    try:
        first.create_topic(TOPIC, 1)
        assert _produce(first, TOPIC) == E.NONE
        # __consumer_offsets exists too: it must not be created again
        got = call(first, apis.FIND_COORDINATOR, 3, {"key": "g", "key_type": 0})
        assert got is not None and got.error_code == E.NONE
    finally:
        first.close()
    join = ClusterMembership.join

    async def held_back(self: ClusterMembership) -> None:
        return None

    async def no_wait(broker: Any) -> None:
        return None

    monkeypatch.setattr(ClusterMembership, "join", held_back)
    monkeypatch.setattr(server, "_wait_until_ready", no_wait)
    b = InProcessBroker(tmp_path)
    monkeypatch.undo()
    try:
        assert b.broker.metadata.cache.alive_brokers() == []  # no view yet
        yield Restarted(b, join)
    finally:
        b.close()


def _topics_in_store(b: InProcessBroker) -> list[str]:
    membership = b.running.membership
    assert membership is not None
    return sorted(b.run(membership.cluster.get_all_topics()))


# --- Metadata --------------------------------------------------------------------------


def test_metadata_v7_and_later_names_no_brokers_and_no_topics(restarted: Restarted) -> None:
    # librdkafka retries exactly this answer and applies nothing of it; the Java client
    # ignores any answer without brokers.
    for version in (7, 9, 12):
        for topics in (None, [{"name": TOPIC}]):
            got = call(restarted.b, apis.METADATA, version, {"topics": topics})
            assert got is not None
            assert list(got.brokers) == [] and list(got.topics) == []
            assert got.controller_id == -1


def test_metadata_before_v7_answers_each_topic_leader_not_available(
    restarted: Restarted,
) -> None:
    body = {"topics": [{"name": TOPIC}, {"name": "fresh"}], "allow_auto_topic_creation": True}
    for version in (1, 4, 6):
        got = call(restarted.b, apis.METADATA, version, body)
        assert got is not None and list(got.brokers) == []
        assert [(t.name, t.error_code, len(t.partitions)) for t in got.topics] == [
            (TOPIC, E.LEADER_NOT_AVAILABLE, 0), ("fresh", E.LEADER_NOT_AVAILABLE, 0)
        ]  # fmt: skip
    # v0's empty list asks for every topic: none listed
    got = call(restarted.b, apis.METADATA, 0, {"topics": []})
    assert got is not None and list(got.topics) == [] and list(got.brokers) == []


def test_metadata_never_auto_creates_before_the_first_view(restarted: Restarted) -> None:
    b = restarted.b
    assert b.broker.topic_creator.auto_create_enabled()
    for version in (1, 4, 12):
        body = {"topics": [{"name": "fresh"}], "allow_auto_topic_creation": True}
        call(b, apis.METADATA, version, body)
    assert "fresh" not in _topics_in_store(b)
    restarted.join()
    # once the view arrived, auto-creation works as before
    got = call(b, apis.METADATA, 12, {"topics": [{"name": "fresh"}]})
    assert got is not None and got.topics[0].error_code == E.NONE
    assert "fresh" in _topics_in_store(b)


def test_after_the_first_view_the_topic_is_there(restarted: Restarted) -> None:
    restarted.join()
    body = {"topics": [{"name": TOPIC}, {"name": "nope"}], "allow_auto_topic_creation": False}
    got = call(restarted.b, apis.METADATA, 12, body)
    assert got is not None and [b.node_id for b in got.brokers] == [1]
    # now a topic the cache lacks is one the cluster lacks
    assert [(t.name, t.error_code, len(t.partitions)) for t in got.topics] == [
        (TOPIC, E.NONE, 1), ("nope", E.UNKNOWN_TOPIC_OR_PARTITION, 0)
    ]  # fmt: skip


# --- partition requests ------------------------------------------------------------------


def test_produce_is_not_leader_or_follower(restarted: Restarted) -> None:
    b = restarted.b
    # hosted here (no role yet), and not hosted here
    assert _produce(b, TOPIC) == E.NOT_LEADER_OR_FOLLOWER
    assert _produce(b, "elsewhere") == E.NOT_LEADER_OR_FOLLOWER
    restarted.join()
    assert _produce(b, TOPIC) == E.NONE
    assert _produce(b, "elsewhere") == E.UNKNOWN_TOPIC_OR_PARTITION


def _fetch_partition(topic: str, topic_id: uuid.UUID | None = None) -> dict[str, Any]:
    return {"topic": topic, "topic_id": topic_id or uuid.UUID(int=0),
            "partitions": [{"partition": 0, "fetch_offset": 1, "partition_max_bytes": 1 << 20,
                            "current_leader_epoch": -1, "last_fetched_epoch": -1,
                            "log_start_offset": -1}]}  # fmt: skip


def test_fetch_is_not_leader_or_follower(restarted: Restarted) -> None:
    b = restarted.b
    # by name (v12) and by id (v13+: the id on disk, which the empty cache cannot map)
    topic_id = uuid.UUID(bytes=b.broker.replica_manager.get(_tp()).topic_id)  # type: ignore[union-attr]
    body = {"max_wait_ms": 0, "min_bytes": 0, "session_epoch": -1,
            "topics": [_fetch_partition(TOPIC, topic_id)]}  # fmt: skip
    for version in (12, 13):
        got = call(b, apis.FETCH, version, body)
        assert got is not None
        assert got.responses[0].partitions[0].error_code == E.NOT_LEADER_OR_FOLLOWER
    restarted.join()
    for version in (12, 13):
        got = call(b, apis.FETCH, version, body)
        assert got is not None and got.responses[0].partitions[0].error_code == E.NONE


def _tp() -> Any:
    from kt.storage.checkpoint import TopicPartition

    return TopicPartition(TOPIC, 0)


def test_list_offsets_and_leader_epochs_are_not_leader_or_follower(restarted: Restarted) -> None:
    b = restarted.b
    for topic in (TOPIC, "elsewhere"):
        got = call(b, apis.LIST_OFFSETS, 7, {"replica_id": -1, "topics": [
            {"name": topic, "partitions": [{"partition_index": 0, "timestamp": -1}]}]})  # fmt: skip
        assert got is not None
        assert got.topics[0].partitions[0].error_code == E.NOT_LEADER_OR_FOLLOWER
        got = call(b, apis.OFFSET_FOR_LEADER_EPOCH, 4, {"replica_id": -1, "topics": [
            {"topic": topic, "partitions": [{"partition": 0, "leader_epoch": 0,
                                             "current_leader_epoch": -1}]}]})  # fmt: skip
        assert got is not None
        assert got.topics[0].partitions[0].error_code == E.NOT_LEADER_OR_FOLLOWER
        got = call(b, apis.DELETE_RECORDS, 2, {"timeout_ms": 1000, "topics": [
            {"name": topic, "partitions": [{"partition_index": 0, "offset": 0}]}]})  # fmt: skip
        assert got is not None
        assert got.topics[0].partitions[0].error_code == E.NOT_LEADER_OR_FOLLOWER
        got = call(b, apis.DESCRIBE_PRODUCERS, 0,
                   {"topics": [{"name": topic, "partition_indexes": [0]}]})  # fmt: skip
        assert got is not None
        assert got.topics[0].partitions[0].error_code == E.NOT_LEADER_OR_FOLLOWER


# --- coordinators ------------------------------------------------------------------------


def test_find_coordinator_is_not_available_and_creates_nothing(restarted: Restarted) -> None:
    b = restarted.b
    before = _topics_in_store(b)
    got = call(b, apis.FIND_COORDINATOR, 3, {"key": "g", "key_type": 0})
    assert got is not None and got.error_code == E.COORDINATOR_NOT_AVAILABLE
    assert got.error_message and "has not received the cluster's metadata" in got.error_message
    got = call(b, apis.FIND_COORDINATOR, 4, {"key_type": 1, "coordinator_keys": ["tx"]})
    assert got is not None and got.coordinators[0].error_code == E.COORDINATOR_NOT_AVAILABLE
    assert _topics_in_store(b) == before  # no __transaction_state either
    restarted.join()
    got = call(b, apis.FIND_COORDINATOR, 3, {"key": "g", "key_type": 0})
    assert got is not None and got.error_code == E.NONE and got.node_id == 1


def _commit_partitions(topic: str) -> list[dict[str, Any]]:
    return [{"name": topic, "partitions": [
        {"partition_index": 0, "committed_offset": 1, "committed_metadata": ""}]}]  # fmt: skip


def test_offset_commits_are_not_coordinator_never_unknown(restarted: Restarted) -> None:
    b = restarted.b
    for topic in (TOPIC, "elsewhere"):
        got = call(b, apis.OFFSET_COMMIT, 8, {"group_id": "g", "topics": _commit_partitions(topic)})
        assert got is not None
        assert got.topics[0].partitions[0].error_code == E.NOT_COORDINATOR
        got = call(b, apis.TXN_OFFSET_COMMIT, 3, {
            "transactional_id": "tx", "group_id": "g", "producer_id": 1, "producer_epoch": 0,
            "topics": _commit_partitions(topic)})  # fmt: skip
        assert got is not None
        assert got.topics[0].partitions[0].error_code == E.NOT_COORDINATOR
        got = call(b, apis.OFFSET_DELETE, 0, {"group_id": "g", "topics": [
            {"name": topic, "partitions": [{"partition_index": 0}]}]})  # fmt: skip
        assert got is not None and got.error_code == E.NOT_COORDINATOR


def test_add_partitions_to_txn_is_not_coordinator_never_unknown(restarted: Restarted) -> None:
    got = call(restarted.b, apis.ADD_PARTITIONS_TO_TXN, 3, {
        "v3_and_below_transactional_id": "tx", "v3_and_below_producer_id": 1,
        "v3_and_below_producer_epoch": 0,
        "v3_and_below_topics": [{"name": TOPIC, "partitions": [0]}]})  # fmt: skip
    assert got is not None
    codes = {p.partition_error_code for t in got.results_by_topic_v3_and_below
             for p in t.results_by_partition}  # fmt: skip
    assert codes == {E.NOT_COORDINATOR}


def test_list_groups_is_coordinator_not_available(restarted: Restarted) -> None:
    got = call(restarted.b, apis.LIST_GROUPS, 4, {})
    assert got is not None and got.error_code == E.COORDINATOR_NOT_AVAILABLE
    restarted.join()
    got = call(restarted.b, apis.LIST_GROUPS, 4, {})
    assert got is not None and got.error_code == E.NONE


# --- cluster, configs and admin ------------------------------------------------------------


def test_describe_cluster_and_configs_are_leader_not_available(restarted: Restarted) -> None:
    b = restarted.b
    got = call(b, apis.DESCRIBE_CLUSTER, 0, {})
    assert got is not None and got.error_code == E.LEADER_NOT_AVAILABLE
    assert list(got.brokers) == []
    got = call(b, apis.DESCRIBE_CONFIGS, 4, {"resources": [
        {"resource_type": 2, "resource_name": TOPIC, "configuration_keys": None}]})  # fmt: skip
    assert got is not None and got.results[0].error_code == E.LEADER_NOT_AVAILABLE
    restarted.join()
    got = call(b, apis.DESCRIBE_CLUSTER, 0, {})
    assert got is not None and got.error_code == E.NONE and len(got.brokers) == 1


def test_topic_changes_are_not_controller(restarted: Restarted) -> None:
    b = restarted.b
    got = call(b, apis.CREATE_TOPICS, 7, {"timeout_ms": 1000, "topics": [
        {"name": "new", "num_partitions": 1, "replication_factor": 1, "assignments": [],
         "configs": []}]})  # fmt: skip
    assert got is not None and got.topics[0].error_code == E.NOT_CONTROLLER
    got = call(b, apis.DELETE_TOPICS, 5, {"timeout_ms": 1000, "topic_names": [TOPIC]})
    assert got is not None and got.responses[0].error_code == E.NOT_CONTROLLER
    got = call(b, apis.CREATE_PARTITIONS, 3, {"timeout_ms": 1000, "topics": [
        {"name": TOPIC, "count": 2, "assignments": None}]})  # fmt: skip
    assert got is not None and got.results[0].error_code == E.NOT_CONTROLLER
    assert "new" not in _topics_in_store(b)
    assert TOPIC in _topics_in_store(b)
