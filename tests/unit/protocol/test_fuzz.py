"""Decoder fuzzing: arbitrary and mutated bytes may only raise DecodeError."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from protocol_strategies import message_values

from kt.protocol.apis import ALL_APIS
from kt.protocol.errors import DecodeError
from kt.protocol.headers import decode_request, decode_response, encode_request, encode_response

FUZZ = settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))


def mutate(data: bytes, draw: Any) -> bytes:
    """Flip, truncate, duplicate or splice bytes of a valid encoding."""
    b = bytearray(data)
    for _ in range(draw(st.integers(1, 3))):
        op = draw(st.sampled_from(["flip", "truncate", "insert", "set"]))
        if not b:
            break
        i = draw(st.integers(0, len(b) - 1))
        if op == "flip":
            b[i] ^= 1 << draw(st.integers(0, 7))
        elif op == "truncate":
            del b[i:]
        elif op == "insert":
            b[i:i] = draw(st.binary(min_size=1, max_size=4))
        else:
            b[i] = draw(st.sampled_from([0x00, 0x7F, 0x80, 0xFF]))
    return bytes(b)


@FUZZ
@given(st.binary(max_size=200))
def test_random_request_frames(data: bytes) -> None:
    try:
        decode_request(data)
    except DecodeError:
        pass


@FUZZ
@given(
    st.sampled_from(ALL_APIS).flatmap(
        lambda a: st.tuples(st.just(a), st.integers(a.min_version, a.max_version))
    ),
    st.binary(max_size=120),
)
def test_random_response_frames(api_version: Any, data: bytes) -> None:
    api, version = api_version
    try:
        decode_response(api.key, version, data)
    except DecodeError:
        pass


@pytest.mark.parametrize("api", ALL_APIS, ids=lambda a: a.name)
def test_mutated_frames(api: Any) -> None:
    @FUZZ
    @given(st.data(), st.integers(api.min_version, api.max_version))
    def check(data: st.DataObject, version: int) -> None:
        req = data.draw(message_values(api.request, version))
        frame = encode_request(api.key, version, 1, req, "c", size_prefix=False)
        try:
            decode_request(mutate(frame, data.draw))
        except DecodeError:
            pass
        resp = data.draw(message_values(api.response, version))
        frame = encode_response(api.key, version, 1, resp, size_prefix=False)
        try:
            decode_response(api.key, version, mutate(frame, data.draw))
        except DecodeError:
            pass

    check()


def test_unknown_api_key_and_version_are_reported_not_raised() -> None:
    # api_key 999, version 0, correlation 5, client_id "x"
    header, body = decode_request(bytes.fromhex("03e7 0000 00000005 0001 78 deadbeef"))
    assert body is None and not header.supported
    assert (header.api_key, header.correlation_id, header.client_id) == (999, 5, "x")
    # Metadata v99: header and correlation id survive, body is not decoded.
    header, body = decode_request(bytes.fromhex("0003 0063 00000006 ffff 00 0102"))
    assert body is None and header.correlation_id == 6 and header.header_version == 2
    # Unknown key whose client_id is garbage: still answerable.
    header, body = decode_request(bytes.fromhex("03e7 0000 00000007 7fff"))
    assert body is None and header.correlation_id == 7
    with pytest.raises(DecodeError):
        decode_request(b"\x00\x03\x00")
