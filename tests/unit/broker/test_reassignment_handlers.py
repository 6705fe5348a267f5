"""AlterPartitionReassignments / ListPartitionReassignments through their handlers on
a single-node broker (its own controller): Kafka's per-partition errors, a reassignment
to the replicas already there, and NOT_CONTROLLER from a broker that is not it.

`test_not_controller` builds only what the handlers read (the membership's active
controller: none). The other two keep the in-process broker on purpose: the answers
are the joined controller's (its reassignment state machine over its store and the
replicas it moves), a flow across services."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from handler_harness import InProcessBroker, call, call_with, open_broker

from kt.broker.services import HandlerServices
from kt.protocol import ErrorCode, apis


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[InProcessBroker]:
    b = open_broker(tmp_path)
    yield b
    b.close()


def alter(b: InProcessBroker, topic: str, partition: int, replicas: list[int] | None) -> Any:
    body = {"timeout_ms": 1000, "topics": [{"name": topic, "partitions": [
        {"partition_index": partition, "replicas": replicas}]}]}  # fmt: skip
    resp = call(b, apis.ALTER_PARTITION_REASSIGNMENTS, 0, body)
    assert resp is not None
    return resp


def test_errors_and_a_no_op_reassignment(broker: InProcessBroker) -> None:
    broker.create_topic("t", 1)
    node = broker.broker.node_id
    resp = alter(broker, "t", 0, [node, node])
    p = resp.responses[0].partitions[0]
    assert p.error_code == ErrorCode.INVALID_REPLICA_ASSIGNMENT
    assert p.error_message.startswith("Duplicate replica ids")
    assert alter(broker, "t", 0, [node + 5]).responses[0].partitions[0].error_code == (
        ErrorCode.INVALID_REPLICA_ASSIGNMENT
    )
    assert alter(broker, "t", 3, [node]).responses[0].partitions[0].error_code == (
        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    )
    assert alter(broker, "t", 0, None).responses[0].partitions[0].error_code == (
        ErrorCode.NO_REASSIGNMENT_IN_PROGRESS
    )
    # to where it already is: accepted, completes at once, nothing listed
    assert alter(broker, "t", 0, [node]).responses[0].partitions[0].error_code == 0
    listed = call(broker, apis.LIST_PARTITION_REASSIGNMENTS, 0, {"timeout_ms": 1000,
                                                                  "topics": None})  # fmt: skip
    assert listed is not None and listed.error_code == 0 and listed.topics == []


def test_not_controller() -> None:
    # The handlers read only the membership's active controller: a broker that is
    # not the controller (None) answers NOT_CONTROLLER, with no broker behind it.
    services = HandlerServices.only(cluster=SimpleNamespace(active_controller=lambda: None))
    body = {"timeout_ms": 1000, "topics": [{"name": "t", "partitions": [
        {"partition_index": 0, "replicas": [1]}]}]}  # fmt: skip
    resp = call_with(services, apis.ALTER_PARTITION_REASSIGNMENTS, 0, body)
    assert resp is not None and resp.error_code == ErrorCode.NOT_CONTROLLER
    listed = call_with(services, apis.LIST_PARTITION_REASSIGNMENTS, 0, {"timeout_ms": 1000})
    assert listed is not None and listed.error_code == ErrorCode.NOT_CONTROLLER


def test_an_inactive_controller_answers_not_controller(broker: InProcessBroker) -> None:
    # The joined controller that lost the election refuses (returns None) too.
    controller = broker.broker.controller
    assert controller is not None
    controller.active = False
    try:
        resp = alter(broker, "t", 0, [1])
        assert resp.error_code == ErrorCode.NOT_CONTROLLER
        listed = call(broker, apis.LIST_PARTITION_REASSIGNMENTS, 0, {"timeout_ms": 1000})
        assert listed is not None and listed.error_code == ErrorCode.NOT_CONTROLLER
    finally:
        controller.active = True
