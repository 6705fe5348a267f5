"""Framing and the sans-IO client/server connection objects."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kt.protocol import apis
from kt.protocol.connection import ClientConnection, ServerConnection
from kt.protocol.errors import CorrelationIdMismatch, DecodeError, FrameSizeError
from kt.protocol.framing import FrameDecoder, frame
from kt.protocol.headers import RequestHeader, encode_request


@settings(max_examples=50, deadline=None)
@given(st.lists(st.binary(max_size=40), max_size=6), st.lists(st.integers(1, 50), min_size=1))
def test_frames_survive_any_chunking(payloads: list[bytes], cuts: list[int]) -> None:
    stream = b"".join(frame(pl) for pl in payloads)
    dec = FrameDecoder()
    got: list[bytes] = []
    pos = 0
    i = 0
    while pos < len(stream):
        step = cuts[i % len(cuts)]
        got.extend(dec.feed(stream[pos : pos + step]))
        pos += step
        i += 1
    assert got == payloads
    assert dec.buffered == 0


def test_frame_size_limits() -> None:
    dec = FrameDecoder(max_frame_size=10)
    assert dec.feed(frame(b"x" * 10)) == [b"x" * 10]
    with pytest.raises(FrameSizeError):
        FrameDecoder(max_frame_size=10).feed(b"\x00\x00\x00\x0b")
    with pytest.raises(FrameSizeError):
        FrameDecoder().feed(b"\xff\xff\xff\xff")
    assert issubclass(FrameSizeError, DecodeError)
    # An incomplete prefix is just buffered; the size is judged once it is complete,
    # before any of the payload has to arrive.
    dec = FrameDecoder(max_frame_size=100)
    assert dec.feed(b"\x7f\xff") == []
    with pytest.raises(FrameSizeError):
        dec.feed(b"\xff\xff")


def test_client_server_conversation() -> None:
    client = ClientConnection("tester")
    server = ServerConnection()
    c1, out1 = client.send_request(18, 3, {"client_software_name": "kt"})
    c2, out2 = client.send_request(3, 12, apis.METADATA.request(topics=None))
    assert client.in_flight == 2
    reqs = server.receive_data(out1[:5]) + server.receive_data(out1[5:] + out2)
    assert [r.header.correlation_id for r in reqs] == [c1, c2]
    assert reqs[0].header.client_id == "tester"
    assert reqs[1].body is not None and reqs[1].body.topics is None
    replies = server.send_response(reqs[0], {"api_keys": [{"api_key": 18, "max_version": 4}]})
    replies += server.send_response(reqs[1].header, {"cluster_id": "abc"})
    resps = client.receive_data(replies)
    assert [r.correlation_id for r in resps] == [c1, c2]
    assert resps[0].body.api_keys[0].max_version == 4
    assert resps[1].body.cluster_id == "abc"
    assert client.in_flight == 0


def test_produce_acks_zero_expects_no_response() -> None:
    client = ClientConnection()
    client.send_request(0, 9, {"acks": 0, "timeout_ms": 1000})
    assert client.in_flight == 0
    client.send_request(0, 9, {"acks": -1, "timeout_ms": 1000})
    assert client.in_flight == 1


def test_out_of_order_response_is_refused() -> None:
    client = ClientConnection()
    client.send_request(12, 4, {"group_id": "g", "member_id": "m"})
    bogus = ServerConnection().send_response(
        _header(api_key=12, version=4, correlation_id=99), {"error_code": 0}
    )
    with pytest.raises(CorrelationIdMismatch):
        client.receive_data(bogus)


def test_server_reports_unsupported_versions() -> None:
    server = ServerConnection()
    ok = encode_request(18, 0, 1, {})
    newer = bytearray(ok)
    newer[6:8] = (42).to_bytes(2, "big")  # ApiVersions v42
    (req,) = server.receive_data(bytes(newer))
    assert req.body is None and req.header.api_version == 42
    # The broker answers with a v0 error, which any client can parse.
    reply = server.send_response(_header(18, 0, req.header.correlation_id), {"error_code": 35})
    assert reply == bytes.fromhex("0000000a 00000001 0023 00000000")


def _header(api_key: int, version: int, correlation_id: int) -> RequestHeader:
    return RequestHeader(api_key, version, correlation_id)
