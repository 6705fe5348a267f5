"""Byte-level checks of the inter-broker APIs against encodings worked out by hand.

kafka-python has no structures for these APIs, so the expected bytes below are
computed from the JSON specs' field order and the flexible-version encoding rules
(compact arrays/strings: length + 1 as an unsigned varint; a tagged-field section,
here usually empty = 0x00, closing every struct).
"""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from kt.protocol import apis
from kt.protocol.headers import decode_request, encode_request

TOPIC_ID = uuid.UUID("0123456789abcdef0123456789abcdef")


def i8(v: int) -> bytes:
    return v.to_bytes(1, "big", signed=True)


def i16(v: int) -> bytes:
    return v.to_bytes(2, "big", signed=True)


def i32(v: int) -> bytes:
    return v.to_bytes(4, "big", signed=True)


def i64(v: int) -> bytes:
    return v.to_bytes(8, "big", signed=True)


def cstr(s: str) -> bytes:
    """A compact (non-null) string whose length fits one varint byte."""
    return bytes([len(s) + 1]) + s.encode()


def carr32(*values: int) -> bytes:
    """A compact array of int32 (short enough for a one-byte length)."""
    return bytes([len(values) + 1]) + b"".join(i32(v) for v in values)


def assert_has(actual: Any, expected: Any) -> None:
    """`actual` (a to_dict()) holds every value of `expected`; fields the version
    lacks come back as their defaults and are not compared."""
    if isinstance(expected, dict):
        for key, value in expected.items():
            assert_has(actual[key], value)
    elif isinstance(expected, list):
        assert len(actual) == len(expected)
        for a, e in zip(actual, expected):
            assert_has(a, e)
    else:
        assert actual == expected


NO_TAGS = b"\x00"
TRUE, FALSE = b"\x01", b"\x00"


def framed_v2(api_key: int, version: int, corr: int, client_id: str, body: bytes) -> bytes:
    """A request frame with header v2: classic client_id, then an empty tag section."""
    header = i16(api_key) + i16(version) + i32(corr) + i16(len(client_id)) + client_id.encode()
    frame = header + NO_TAGS + body
    return i32(len(frame)) + frame


# -- ControlledShutdown: v0 is the one request with header v0 (no client_id) -----------


def test_controlled_shutdown_v0_uses_request_header_v0() -> None:
    wire = encode_request(7, 0, 9, {"broker_id": 3}, "ignored")
    assert wire == i32(12) + i16(7) + i16(0) + i32(9) + i32(3)
    header, body = decode_request(wire[4:])
    assert (header.api_key, header.api_version, header.correlation_id) == (7, 0, 9)
    assert header.header_version == 0 and header.client_id is None
    assert body == apis.CONTROLLED_SHUTDOWN.request(broker_id=3)


def test_controlled_shutdown_v1_and_v3_use_the_standard_headers() -> None:
    v1 = encode_request(7, 1, 9, {"broker_id": 3}, "kt")
    assert v1 == i32(16) + i16(7) + i16(1) + i32(9) + i16(2) + b"kt" + i32(3)
    header, body = decode_request(v1[4:])
    assert header.header_version == 1 and header.client_id == "kt"
    assert body is not None and body.broker_id == 3 and body.broker_epoch == -1

    v3 = encode_request(7, 3, 9, {"broker_id": 3, "broker_epoch": 77}, "kt")
    assert v3 == framed_v2(7, 3, 9, "kt", i32(3) + i64(77) + NO_TAGS)
    header, body = decode_request(v3[4:])
    assert header.header_version == 2 and header.client_id == "kt"
    assert body is not None and body.broker_epoch == 77


def test_controlled_shutdown_v0_header_decoding_does_not_eat_the_body() -> None:
    # A v0 body that happens to start like a length-prefixed client_id must still
    # be read as the body: broker_id 0x00020000 is not a 2-byte string "\0\0".
    header, body = decode_request(i16(7) + i16(0) + i32(1) + i32(0x00020000))
    assert header.client_id is None
    assert body is not None and body.broker_id == 0x00020000


# -- realistic flexible messages ------------------------------------------------------


def test_leader_and_isr_v7_bytes() -> None:
    request = {
        "controller_id": 1,
        "is_kraft_controller": False,
        "controller_epoch": 5,
        "broker_epoch": 42,
        "type": 0,
        "topic_states": [
            {
                "topic_name": "orders",
                "topic_id": TOPIC_ID,
                "partition_states": [
                    {
                        "partition_index": 0,
                        "controller_epoch": 5,
                        "leader": 1,
                        "leader_epoch": 3,
                        "isr": [1, 2],
                        "partition_epoch": 7,
                        "replicas": [1, 2],
                        "adding_replicas": [],
                        "removing_replicas": [],
                        "is_new": True,
                        "leader_recovery_state": 0,
                    }
                ],
            }
        ],
        "live_leaders": [{"broker_id": 1, "host_name": "b1", "port": 9092}],
    }
    partition = (
        i32(0) + i32(5) + i32(1) + i32(3) + carr32(1, 2) + i32(7) + carr32(1, 2)
        + carr32() + carr32() + TRUE + i8(0) + NO_TAGS
    )  # fmt: skip
    topic = cstr("orders") + TOPIC_ID.bytes + b"\x02" + partition + NO_TAGS
    leader = i32(1) + cstr("b1") + i32(9092) + NO_TAGS
    body = (
        i32(1) + FALSE + i32(5) + i64(42) + i8(0)
        + b"\x02" + topic
        + b"\x02" + leader
        + NO_TAGS
    )  # fmt: skip
    assert apis.LEADER_AND_ISR.request.encode(request, 7) == body
    wire = encode_request(4, 7, 21, request, "ctl")
    assert wire == framed_v2(4, 7, 21, "ctl", body)
    header, decoded = decode_request(wire[4:])
    assert header.header_version == 2 and decoded is not None
    assert_has(decoded.to_dict(), request)
    assert decoded.ungrouped_partition_states == []  # v0-1 only
    assert decoded.topic_states[0].partition_states[0].isr == [1, 2]

    response = {
        "error_code": 0,
        "topics": [
            {
                "topic_id": TOPIC_ID,
                "partition_errors": [{"partition_index": 0, "error_code": 0}],
            }
        ],
    }
    rbody = (
        i16(0) + b"\x02" + TOPIC_ID.bytes + b"\x02" + i32(0) + i16(0) + NO_TAGS + NO_TAGS
        + NO_TAGS
    )  # fmt: skip
    assert apis.LEADER_AND_ISR.response.encode(response, 7) == rbody
    back = apis.LEADER_AND_ISR.response.decode(rbody, 7).to_dict()
    # topic_name exists only up to v4 (the common struct is shared with v0-4)
    assert back["topics"][0]["partition_errors"][0]["topic_name"] == ""
    assert back["topics"][0]["topic_id"] == TOPIC_ID


def test_leader_and_isr_v0_uses_ungrouped_partition_states() -> None:
    state = {
        "topic_name": "t",
        "partition_index": 2,
        "controller_epoch": 1,
        "leader": 0,
        "leader_epoch": 4,
        "isr": [0],
        "partition_epoch": 9,
        "replicas": [0],
    }
    request = {"controller_id": 0, "controller_epoch": 1, "ungrouped_partition_states": [state]}
    body = (
        i32(0) + i32(1)
        + i32(1) + i16(1) + b"t" + i32(2) + i32(1) + i32(0) + i32(4)
        + i32(1) + i32(0) + i32(9) + i32(1) + i32(0)
        + i32(0)  # no live leaders
    )  # fmt: skip
    assert apis.LEADER_AND_ISR.request.encode(request, 0) == body


def test_update_metadata_v8_bytes_with_tagged_type() -> None:
    request = {
        "controller_id": 1,
        "is_kraft_controller": False,
        "type": 1,  # tagged (tag 0) in v8: written because it is not the default 0
        "controller_epoch": 5,
        "broker_epoch": 42,
        "topic_states": [
            {
                "topic_name": "orders",
                "topic_id": TOPIC_ID,
                "partition_states": [
                    {
                        "partition_index": 0,
                        "controller_epoch": 5,
                        "leader": 1,
                        "leader_epoch": 3,
                        "isr": [1, 2],
                        "zk_version": 7,
                        "replicas": [1, 2],
                        "offline_replicas": [],
                    }
                ],
            }
        ],
        "live_brokers": [
            {
                "id": 1,
                "endpoints": [
                    {"port": 9092, "host": "b1", "listener": "PLAINTEXT", "security_protocol": 0}
                ],
                "rack": None,
            }
        ],
    }
    partition = (
        i32(0) + i32(5) + i32(1) + i32(3) + carr32(1, 2) + i32(7) + carr32(1, 2) + carr32()
        + NO_TAGS
    )  # fmt: skip
    topic = cstr("orders") + TOPIC_ID.bytes + b"\x02" + partition + NO_TAGS
    endpoint = i32(9092) + cstr("b1") + cstr("PLAINTEXT") + i16(0) + NO_TAGS
    broker = i32(1) + b"\x02" + endpoint + b"\x00" + NO_TAGS  # rack: compact null
    tags = b"\x01" + b"\x00" + b"\x01" + i8(1)  # one tag: tag 0, size 1, value 1
    body = (
        i32(1) + FALSE + i32(5) + i64(42)
        + b"\x02" + topic
        + b"\x02" + broker
        + tags
    )  # fmt: skip
    assert apis.UPDATE_METADATA.request.encode(request, 8) == body
    decoded = apis.UPDATE_METADATA.request.decode(body, 8)
    assert_has(decoded.to_dict(), request)
    assert decoded.live_brokers[0].v0_host == ""  # v0 only

    # With the default type the tag section stays empty.
    request["type"] = 0
    assert apis.UPDATE_METADATA.request.encode(request, 8) == body[: -len(tags)] + NO_TAGS
    # Before v8 there is neither is_kraft_controller (byte 4) nor type.
    v7 = body[:4] + body[5 : -len(tags)] + NO_TAGS
    assert apis.UPDATE_METADATA.request.encode(request, 7) == v7


def test_alter_partition_v3_bytes() -> None:
    request = {
        "broker_id": 2,
        "broker_epoch": 42,
        "topics": [
            {
                "topic_id": TOPIC_ID,
                "partitions": [
                    {
                        "partition_index": 0,
                        "leader_epoch": 3,
                        "new_isr_with_epochs": [
                            {"broker_id": 1, "broker_epoch": 10},
                            {"broker_id": 2, "broker_epoch": 11},
                        ],
                        "leader_recovery_state": 0,
                        "partition_epoch": 7,
                    }
                ],
            }
        ],
    }
    isr = b"\x03" + i32(1) + i64(10) + NO_TAGS + i32(2) + i64(11) + NO_TAGS
    partition = i32(0) + i32(3) + isr + i8(0) + i32(7) + NO_TAGS
    body = i32(2) + i64(42) + b"\x02" + TOPIC_ID.bytes + b"\x02" + partition + NO_TAGS + NO_TAGS
    assert apis.ALTER_PARTITION.request.encode(request, 3) == body
    wire = encode_request(56, 3, 5, request, "b2")
    assert wire == framed_v2(56, 3, 5, "b2", body)
    _, decoded = decode_request(wire[4:])
    assert decoded is not None
    part = decoded.topics[0].partitions[0]
    assert [(e.broker_id, e.broker_epoch) for e in part.new_isr_with_epochs] == [(1, 10), (2, 11)]

    response = {
        "throttle_time_ms": 0,
        "error_code": 0,
        "topics": [
            {
                "topic_id": TOPIC_ID,
                "partitions": [
                    {
                        "partition_index": 0,
                        "error_code": 0,
                        "leader_id": 1,
                        "leader_epoch": 3,
                        "isr": [1, 2],
                        "leader_recovery_state": 0,
                        "partition_epoch": 8,
                    }
                ],
            }
        ],
    }
    rpart = i32(0) + i16(0) + i32(1) + i32(3) + carr32(1, 2) + i8(0) + i32(8) + NO_TAGS
    rbody = i32(0) + i16(0) + b"\x02" + TOPIC_ID.bytes + b"\x02" + rpart + NO_TAGS + NO_TAGS
    assert apis.ALTER_PARTITION.response.encode(response, 3) == rbody
    assert_has(apis.ALTER_PARTITION.response.decode(rbody, 3).to_dict(), response)


@pytest.mark.parametrize("version", [0, 1, 2])
def test_alter_partition_before_v3_sends_a_plain_isr(version: int) -> None:
    topic = {"topic_name": "t", "topic_id": TOPIC_ID}
    partition = {"partition_index": 0, "leader_epoch": 3, "new_isr": [1, 2], "partition_epoch": 7}
    request = {"broker_id": 2, "broker_epoch": 42, "topics": [{**topic, "partitions": [partition]}]}
    data = apis.ALTER_PARTITION.request.encode(request, version)
    back = apis.ALTER_PARTITION.request.decode(data, version)
    assert back.topics[0].partitions[0].new_isr == [1, 2]
    assert back.topics[0].partitions[0].new_isr_with_epochs == []
    if version < 2:
        assert back.topics[0].topic_name == "t"
    else:
        assert back.topics[0].topic_id == TOPIC_ID
