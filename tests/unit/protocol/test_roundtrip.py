"""Hypothesis round trips over every API, version and side, and every data schema.

encode -> decode must give back an equal object, and re-encoding the decoded
object must give identical bytes (so defaults and tagged fields are stable).
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from protocol_strategies import message_values

from kt.protocol.apis import ALL_APIS
from kt.protocol.codec import MessageSchema
from kt.protocol.data import ALL_DATA_SCHEMAS
from kt.protocol.headers import decode_request, decode_response, encode_request, encode_response

CASES = [
    pytest.param(ms, v, id=f"{ms.name}-v{v}")
    for api in ALL_APIS
    for ms in (api.request, api.response)
    for v in range(api.min_version, api.max_version + 1)
]
DATA_CASES = [
    pytest.param(ds, v, id=f"{ds.name}-v{v}")
    for ds in ALL_DATA_SCHEMAS
    for v in range(ds.versions.lo, (ds.versions.hi or 0) + 1)
]

FAST = settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@pytest.mark.parametrize(("ms", "version"), CASES)
def test_message_roundtrip(ms: MessageSchema, version: int) -> None:
    @FAST
    @given(message_values(ms, version))
    def check(obj: Any) -> None:
        data = ms.encode(obj, version)
        back = ms.decode(data, version)
        assert back == obj
        assert ms.encode(back, version) == data

    check()


@pytest.mark.parametrize(("ds", "version"), DATA_CASES)
def test_data_schema_roundtrip(ds: Any, version: int) -> None:
    @FAST
    @given(message_values(ds, version))
    def check(obj: Any) -> None:
        data = ds.encode_versioned(obj, version)
        v, back = ds.decode_versioned(data)
        assert v == version
        assert back == obj

    check()


@pytest.mark.parametrize("api", ALL_APIS, ids=lambda a: a.name)
def test_full_frame_roundtrip(api: Any) -> None:
    """Header + body through encode_request/decode_request and the response pair."""

    @settings(max_examples=15, deadline=None)
    @given(
        st.data(),
        st.integers(api.min_version, api.max_version),
        st.integers(-(2**31), 2**31 - 1),
        st.none() | st.text(max_size=10),
    )
    def check(data: st.DataObject, version: int, corr: int, client_id: str | None) -> None:
        req = data.draw(message_values(api.request, version))
        frame = encode_request(api.key, version, corr, req, client_id)
        header, body = decode_request(frame[4:])
        assert (header.api_key, header.api_version, header.correlation_id) == (
            api.key,
            version,
            corr,
        )
        # Header v0 (ControlledShutdown v0 only) carries no client_id.
        has_client_id = api.request_header_version(version) >= 1
        assert header.client_id == (client_id if has_client_id else None)
        assert body == req
        resp = data.draw(message_values(api.response, version))
        frame = encode_response(api.key, version, corr, resp)
        rheader, rbody = decode_response(api.key, version, frame[4:])
        assert rheader.correlation_id == corr
        assert rbody == resp

    check()


def test_unknown_tagged_fields_survive_a_roundtrip() -> None:
    from kt.protocol.apis import API_VERSIONS

    ms = API_VERSIONS.response
    data = bytearray(ms.encode(ms(error_code=0), 3))
    # Replace the empty tag section (last byte) with one unknown tag 9 = b"xy".
    data[-1:] = b"\x01\x09\x02xy"
    obj = ms.decode(bytes(data), 3)
    assert obj.__dict__["_unknown_tagged"] == [(9, b"xy")]
    assert ms.encode(obj, 3) == bytes(data)
