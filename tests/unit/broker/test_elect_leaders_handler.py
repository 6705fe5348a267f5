"""The ElectLeaders handler in process, through the wire codec: versions, the
controller's result codes on the single node, and a non-controller broker forwarding
to the controller.

The forwarding test builds only what the handler reads (`HandlerServices.only`:
this node, the topics view, the replica manager, a cluster whose controller is
elsewhere), an unknown election type nothing at all. The others keep the in-process
broker on purpose: their answers are the active controller's elections (the
controller with its store and view, its LeaderAndIsr sent back to this broker's
replica manager over the loopback link), a flow across services, not one handler's
logic."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from handler_harness import InProcessBroker, call, call_with, open_broker

from kt.broker.services import HandlerServices
from kt.protocol import ErrorCode, apis, decode_response, encode_response


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[InProcessBroker]:
    b = open_broker(tmp_path, **{"auto.leader.rebalance.enable": "false"})
    b.create_topic("t", 2)
    yield b
    b.close()


def elect(b: InProcessBroker | None, version: int, parts: list[tuple[str, int]] | None,
          election_type: int = 0, services: HandlerServices | None = None) -> Any:  # fmt: skip
    topics: dict[str, list[int]] = {}
    for t, p in parts or []:
        topics.setdefault(t, []).append(p)
    body = apis.ELECT_LEADERS.request(
        election_type=election_type,
        topic_partitions=None
        if parts is None
        else [{"topic": t, "partitions": ps} for t, ps in topics.items()],
        timeout_ms=5000,
    )
    if b is None:
        assert services is not None
        return call_with(services, apis.ELECT_LEADERS, version, body)
    return call(b, apis.ELECT_LEADERS, version, body, services)


def results(resp: Any) -> dict[tuple[str, int], tuple[int, str | None]]:
    return {
        (r.topic, p.partition_id): (p.error_code, p.error_message)
        for r in resp.replica_election_results
        for p in r.partition_result
    }


def test_v0_preferred_not_needed(broker: InProcessBroker) -> None:
    resp = elect(broker, 0, [("t", 0), ("t", 1)])
    assert results(resp) == {
        ("t", 0): (ErrorCode.ELECTION_NOT_NEEDED, None),
        ("t", 1): (ErrorCode.ELECTION_NOT_NEEDED, None),
    }


def test_all_partitions_answers_only_those_that_needed_an_election(
    broker: InProcessBroker,
) -> None:
    resp = elect(broker, 2, None)
    assert (resp.error_code, results(resp)) == (ErrorCode.NONE, {})


def test_preferred_replica_not_live_and_unknown_partition(broker: InProcessBroker) -> None:
    # Broker 2 (the preferred replica) does not exist: broker 1 leads.
    broker.create_topic("p", 1, assignment={0: [2, 1]})
    resp = elect(broker, 1, [("p", 0), ("t", 5)])
    assert results(resp) == {
        ("p", 0): (
            ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE,
            "Failed to elect leader for partition p-0 under strategy "
            "PreferredReplicaPartitionLeaderElectionStrategy",
        ),
        ("t", 5): (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "The partition does not exist."),
    }
    # Unclean: broker 1 leads and is live, nothing to do.
    assert results(elect(broker, 2, [("p", 0)], 1)) == {
        ("p", 0): (ErrorCode.ELECTION_NOT_NEEDED, None)
    }


def test_unknown_election_type() -> None:
    # Refused before anything is asked of the controller: no service at all.
    resp = elect(None, 2, [("t", 0)], 7, services=HandlerServices.only())
    assert resp.error_code == ErrorCode.INVALID_REQUEST
    assert results(resp) == {("t", 0): (ErrorCode.INVALID_REQUEST, None)}


class FakeLink:
    """The membership's controller link, answering for a remote controller."""

    def __init__(self) -> None:
        self.sent: list[Any] = []

    async def send(self, api: Any, body: Any, *, timeout_s: float | None = None) -> Any:
        self.sent.append(body)
        # As the wire would give it: a decoded response.
        response = api.response(
            error_code=0,
            replica_election_results=[
                {"topic": "t", "partition_result": [
                    {"partition_id": 0, "error_code": ErrorCode.ELECTION_NOT_NEEDED,
                     "error_message": None}]}
            ],
        )  # fmt: skip
        data = encode_response(api.key, 2, 1, response, size_prefix=False)
        return decode_response(api.key, 2, data)[1]

    async def controller_moved(self) -> None:
        pass


def test_a_broker_that_is_not_the_controller_forwards(broker: InProcessBroker) -> None:
    # The handler gets only what it uses: this node, the topics it knows, the replica
    # manager (to wait for metadata), and a cluster whose controller is elsewhere.
    b = broker.broker
    fake = FakeLink()
    cluster = SimpleNamespace(active_controller=lambda: None, active_controller_link=lambda: fake)
    services = HandlerServices.only(
        node=b.node, topics=b.metadata, replicas=b.replica_manager, cluster=cluster
    )
    try:
        # Our cache still names us as controller: forwarding would come back here.
        resp = elect(broker, 2, [("t", 0)], services=services)
        assert resp.error_code == ErrorCode.NOT_CONTROLLER and fake.sent == []
        b.metadata.cache.controller_id = 2
        resp = elect(broker, 2, [("t", 0)], 1, services=services)
        assert resp.error_code == ErrorCode.NONE
        assert results(resp) == {("t", 0): (ErrorCode.ELECTION_NOT_NEEDED, None)}
        assert fake.sent == [
            {
                "election_type": 1,
                "topic_partitions": [{"topic": "t", "partitions": [0]}],
                "timeout_ms": 5000,
            }
        ]
    finally:
        b.metadata.cache.controller_id = b.node_id
