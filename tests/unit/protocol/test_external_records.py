"""ExternalRecords placeholders and encode_response_parts (zero-copy fetch).

A response whose `records` fields hold placeholders, encoded in parts and joined
with the placeholders' bytes, must be exactly the response encoded with those
bytes inline - and decode with ours and kafka-python's decoders.
"""

from __future__ import annotations

import os
import socket
from pathlib import Path
from typing import Any
from uuid import UUID

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from protocol_strategies import message_values

from kt.protocol import (
    ExternalRecords,
    ServerConnection,
    apis,
    encode_response_parts,
    join_parts,
)
from kt.protocol import primitives as p
from kt.protocol.errors import EncodeError
from kt.protocol.framing import FrameDecoder
from kt.protocol.headers import (
    RequestHeader,
    decode_response,
    decode_response_header,
    encode_response,
)
from kt.protocol.regions import collecting, parts_size, split

kp_consumer = pytest.importorskip("kafka.protocol.consumer")

FETCH = apis.FETCH
FETCH_VERSIONS = [4, 11, 12, 16]

#: one partition's records: None, inline bytes, or ("ext", bytes) for a placeholder
_external = st.tuples(st.just("ext"), st.binary(max_size=40))
_records = st.one_of(st.none(), st.binary(max_size=40), _external, _external)
_partition = st.fixed_dictionaries(
    {
        "partition_index": st.integers(0, 2**31 - 1),
        "error_code": st.integers(-1, 100),
        "high_watermark": st.integers(-1, 2**63 - 1),
        "aborted": st.none() | st.lists(st.integers(0, 2**62), max_size=2),
        "diverging": st.booleans(),
        "records": _records,
    }
)
_layout = st.lists(st.lists(_partition, max_size=4), min_size=0, max_size=3)
#: a plain partition for the hand-written cases
_SPEC: dict[str, Any] = {
    "partition_index": 0,
    "error_code": 0,
    "high_watermark": 0,
    "aborted": None,
    "diverging": False,
}


def build(layout: list[list[dict[str, Any]]], external: bool) -> tuple[Any, list[ExternalRecords]]:
    """A Fetch response for `layout`, with placeholders (external) or their bytes inline.

    Returns it with the placeholders in wire order; each placeholder's `source` is
    its bytes, standing in for the broker's (fd, position).
    """
    placeholders: list[ExternalRecords] = []
    topics = []
    for t, parts in enumerate(layout):
        partitions = []
        for spec in parts:
            rec = spec["records"]
            if isinstance(rec, tuple):
                data = rec[1]
                if external:
                    ext = ExternalRecords(len(data), data)
                    placeholders.append(ext)
                    rec = ext
                else:
                    rec = data
            aborted = spec["aborted"]
            partitions.append(
                {
                    "partition_index": spec["partition_index"],
                    "error_code": spec["error_code"],
                    "high_watermark": spec["high_watermark"],
                    "last_stable_offset": 7,
                    "aborted_transactions": None
                    if aborted is None
                    else [{"producer_id": a, "first_offset": a + 1} for a in aborted],
                    # a tagged field written after records in flexible versions
                    "diverging_epoch": {"epoch": 3, "end_offset": 9}
                    if spec["diverging"]
                    else {"epoch": -1, "end_offset": -1},
                    "records": rec,
                }
            )
        topics.append({"topic": f"t{t}", "topic_id": UUID(int=t + 1), "partitions": partitions})
    return FETCH.response(throttle_time_ms=5, session_id=1, responses=topics), placeholders


def resolve(ext: ExternalRecords) -> bytes:
    data: bytes = ext.source
    return data


def check_parts(parts: list[Any], placeholders: list[ExternalRecords]) -> None:
    """Placeholders appear in order, as the very objects given; no empty chunk."""
    got = [x for x in parts if isinstance(x, ExternalRecords)]
    assert len(got) == len(placeholders)
    assert all(a is b for a, b in zip(got, placeholders))
    for x in parts:
        assert isinstance(x, ExternalRecords) or (type(x) is bytes and x)


@pytest.mark.parametrize("version", FETCH_VERSIONS)
def test_fetch_parts_join_to_encode_response(version: int) -> None:
    @settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck))
    @given(_layout, st.integers(0, 2**31 - 1))
    def check(layout: list[list[dict[str, Any]]], corr: int) -> None:
        body_ext, placeholders = build(layout, external=True)
        body_inline, _ = build(layout, external=False)
        expected = encode_response(FETCH.key, version, corr, body_inline)

        parts = encode_response_parts(FETCH.key, version, corr, body_ext)
        check_parts(parts, placeholders)
        if not placeholders:
            assert parts == [expected]
        assert parts_size(parts) == len(expected)
        wire = join_parts(parts, resolve)
        assert wire == expected

        unprefixed = encode_response_parts(FETCH.key, version, corr, body_ext, size_prefix=False)
        assert join_parts(unprefixed, resolve) == expected[4:]

        header, decoded = decode_response(FETCH.key, version, wire[4:])
        assert header.correlation_id == corr
        records_in = [q["records"] for t in body_inline.responses for q in t["partitions"]]
        records_out = [q.records for t in decoded.responses for q in t.partitions]
        assert [None if r is None else bytes(r) for r in records_out] == records_in

        if version <= kp_consumer.FetchResponse.max_version:
            _, pos = decode_response_header(FETCH.key, version, wire[4:])
            theirs = kp_consumer.FetchResponse.decode(wire[4 + pos :], version=version)
            assert theirs.encode() == wire[4 + pos :]
            assert _kp_records(theirs) == records_in

    check()


def _kp_records(resp: Any) -> list[bytes | None]:
    """The records of every partition of a kafka-python FetchResponse, in order."""
    out: list[bytes | None] = []
    for topic in resp.to_dict(json=False)["responses"]:
        for part in topic["partitions"]:
            rec = part["records"]
            out.append(None if rec is None else bytes(rec))
    return out


@pytest.mark.parametrize("version", [0, 3, 8, 9, 11])
def test_produce_response_without_placeholders_is_encode_response(version: int) -> None:
    produce = apis.PRODUCE

    @settings(max_examples=15, deadline=None, suppress_health_check=list(HealthCheck))
    @given(message_values(produce.response, version), st.integers(0, 2**31 - 1))
    def check(body: Any, corr: int) -> None:
        parts = encode_response_parts(produce.key, version, corr, body)
        assert parts == [encode_response(produce.key, version, corr, body)]
        assert type(parts[0]) is bytes

    check()


def test_sendfile_end_to_end(tmp_path: Path) -> None:
    """The broker's path: placeholders carry (fd, position), sent with os.sendfile."""
    segment = tmp_path / "00000000000000000000.log"
    batches = [b"A" * 300, b"B" * 17, b"C" * 1000]
    segment.write_bytes(b"".join(batches))
    positions = [0, 300, 317]
    conn = ServerConnection()
    request = RequestHeader(api_key=FETCH.key, api_version=12, correlation_id=42)
    sender, receiver = socket.socketpair()
    fd = os.open(segment, os.O_RDONLY)
    try:
        body = FETCH.response(
            responses=[
                {
                    "topic": "orders",
                    "partitions": [
                        {"partition_index": i, "records": ExternalRecords(len(b), (fd, pos))}
                        for i, (b, pos) in enumerate(zip(batches, positions))
                    ]
                    + [{"partition_index": 9, "records": None}],
                }
            ]
        )
        for part in conn.send_response_parts(request, body):
            if isinstance(part, ExternalRecords):
                src_fd, offset = part.source
                left = part.length
                while left:
                    n = os.sendfile(sender.fileno(), src_fd, offset, left)
                    offset += n
                    left -= n
            else:
                sender.sendall(part)
        sender.shutdown(socket.SHUT_WR)
        received = bytearray()
        while chunk := receiver.recv(65536):
            received += chunk
    finally:
        os.close(fd)
        sender.close()
        receiver.close()
    (frame,) = FrameDecoder().feed(received)
    header, decoded = decode_response(FETCH.key, 12, frame)
    assert header.correlation_id == 42
    records = [q.records for q in decoded.responses[0].partitions]
    assert [None if r is None else bytes(r) for r in records] == [*batches, None]


@pytest.mark.parametrize(
    ("compact", "nullable"), [(False, False), (False, True), (True, False), (True, True)]
)
def test_records_writers_leave_a_gap(compact: bool, nullable: bool) -> None:
    write = p.WRITERS[("records", compact, nullable)]
    a, b = ExternalRecords(200, "a"), ExternalRecords(0, "b")
    out = bytearray(b"hd")
    with collecting(out) as marks:
        write(out, a)
        write(out, b)
        write(out, b"xyz")
        write(out, ExternalRecords(5, "c"))

    def prefix(n: int) -> bytes:
        return bytes([n + 1]) if compact else p.INT32.pack(n)

    head = b"hd\xc9\x01" if compact else b"hd\x00\x00\x00\xc8"  # length 200
    assert bytes(out[: len(head)]) == head
    parts = split(out, marks)
    last = parts[5]
    assert parts[1] is a and parts[3] is b
    assert isinstance(last, ExternalRecords) and last.source == "c"
    assert parts[2] == prefix(0)
    assert parts[4] == prefix(3) + b"xyz" + prefix(5)
    assert len(parts) == 6  # nothing empty after the trailing placeholder


def test_placeholder_outside_parts_encoding_is_an_error() -> None:
    body, _ = build([[{**_SPEC, "records": ("ext", b"abc")}]], external=True)
    with pytest.raises(EncodeError, match="encode_response_parts"):
        encode_response(FETCH.key, 12, 1, body)


def test_placeholder_in_a_bytes_field_is_an_error() -> None:
    body = apis.SYNC_GROUP.response(assignment=ExternalRecords(3, None))
    with pytest.raises(EncodeError):
        encode_response_parts(apis.SYNC_GROUP.key, 3, 1, body)


def test_placeholder_in_a_separate_buffer_is_an_error() -> None:
    """A tagged field's payload is built apart and copied: the gap would be lost."""
    out = bytearray()
    with collecting(out), pytest.raises(EncodeError, match="tagged"):
        p.write_compact_records(bytearray(), ExternalRecords(1, None))


def test_collector_does_not_leak_after_a_failed_encoding() -> None:
    bad = FETCH.response(responses=[{"topic": 5, "partitions": []}])
    with pytest.raises(EncodeError):
        encode_response_parts(FETCH.key, 4, 1, bad)
    with pytest.raises(EncodeError, match="encode_response_parts"):
        p.write_records(bytearray(), ExternalRecords(1, None))


def test_invalid_placeholders() -> None:
    with pytest.raises(ValueError):
        ExternalRecords(-1, None)
    with pytest.raises(ValueError):
        ExternalRecords(2**31, None)
    with pytest.raises(EncodeError, match="announced 3 bytes, got 2"):
        join_parts([b"x", ExternalRecords(3, None)], lambda e: b"ab")


def test_frame_too_large() -> None:
    body = FETCH.response(
        responses=[
            {
                "topic": "t",
                "partitions": [
                    {"partition_index": i, "records": ExternalRecords(2**30, None)}
                    for i in range(2)
                ],
            }
        ]
    )
    with pytest.raises(EncodeError, match="does not fit"):
        encode_response_parts(FETCH.key, 4, 1, body)
