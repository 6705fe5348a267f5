"""Handlers get only the services they use: a handler's unit test builds just those
(`HandlerServices.only`), and a handler reaching for one it was not given fails
loudly, naming it. Here the controller-side handlers, on a broker whose controller
is elsewhere, answer NOT_CONTROLLER with nothing but a cluster view."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import Any

import pytest

from kt.broker.handlers import HANDLERS, RequestContext, load_all
from kt.broker.services import HandlerServices
from kt.protocol import ErrorCode, Struct, apis
from kt.protocol.headers import decode_request, encode_request


def _handle(services: HandlerServices, api: Any, version: int, body: Any) -> Any:
    load_all()
    frame = encode_request(api.key, version, 1, body, "t", size_prefix=False)
    header, request = decode_request(bytearray(frame))
    assert isinstance(request, Struct)
    ctx = RequestContext(services, header, "127.0.0.1", 1)
    return asyncio.run(HANDLERS[api.key](ctx, request))


ELSEWHERE = SimpleNamespace(active_controller=lambda: None)


def test_reassignments_need_only_the_cluster() -> None:
    services = HandlerServices.only(cluster=ELSEWHERE)
    listed = _handle(services, apis.LIST_PARTITION_REASSIGNMENTS, 0, {"timeout_ms": 1000})
    assert listed.error_code == ErrorCode.NOT_CONTROLLER
    altered = _handle(
        services, apis.ALTER_PARTITION_REASSIGNMENTS, 0, {"timeout_ms": 1000, "topics": []}
    )
    assert altered.error_code == ErrorCode.NOT_CONTROLLER


def test_controller_requests_need_only_the_cluster() -> None:
    services = HandlerServices.only(cluster=ELSEWHERE)
    resp = _handle(services, apis.CONTROLLED_SHUTDOWN, 3, {"broker_id": 2, "broker_epoch": 5})
    assert resp.error_code == ErrorCode.NOT_CONTROLLER and resp.remaining_partitions == []
    resp = _handle(services, apis.ALTER_PARTITION, 3, {"broker_id": 2, "broker_epoch": 5})
    assert resp.error_code == ErrorCode.NOT_CONTROLLER


def test_a_service_not_given_is_named_when_used() -> None:
    services = HandlerServices.only()
    with pytest.raises(AssertionError, match=r"services\.cluster\.active_controller"):
        _handle(services, apis.LIST_PARTITION_REASSIGNMENTS, 0, {"timeout_ms": 1000})


def test_only_knows_the_services() -> None:
    with pytest.raises(TypeError, match="broker"):
        HandlerServices.only(broker=object())
