"""Whole frames checked against bytes computed by hand from the protocol guide."""

from __future__ import annotations

from kt.protocol import apis
from kt.protocol.errors import ErrorCode, error_for_code, error_for_name
from kt.protocol.headers import decode_request, decode_response, encode_request, encode_response


def h(s: str) -> bytes:
    return bytes.fromhex(s.replace(" ", ""))


def test_api_versions_v0_request() -> None:
    data = encode_request(18, 0, 1, {}, "kt")
    # size 12 | api_key 18 | version 0 | correlation 1 | client_id "kt" | empty body
    assert data == h("0000000c 0012 0000 00000001 0002 6b74")
    header, body = decode_request(data[4:])
    assert header.header_version == 1 and body == apis.API_VERSIONS.request()


def test_api_versions_v3_request() -> None:
    body = {"client_software_name": "kt", "client_software_version": "0.1"}
    data = encode_request(18, 3, 7, body, "kt")
    expected = (
        "0012 0003 00000007 0002 6b74"  # header v2: client_id stays int16-prefixed
        "00"  # header tagged fields
        "03 6b74"  # compact string "kt"
        "04 302e31"  # compact string "0.1"
        "00"  # body tagged fields
    )
    assert data[4:] == h(expected)
    assert data[:4] == len(h(expected)).to_bytes(4, "big")


def test_metadata_v0_request() -> None:
    req = apis.METADATA.request(topics=[{"name": "a"}, {"name": "bc"}])
    data = encode_request(3, 0, 0, req, "x")
    expected = "0003 0000 00000000 0001 78  00000002 0001 61 0002 6263"
    assert data[4:] == h(expected)
    _, body = decode_request(data[4:])
    assert body is not None
    assert [t.name for t in body.topics] == ["a", "bc"]


def test_metadata_v1_null_topics_means_all() -> None:
    data = encode_request(3, 1, 0, apis.METADATA.request(topics=None), None)
    assert data[4:] == h("0003 0001 00000000 ffff ffffffff")


def test_api_versions_v3_response_uses_header_v0() -> None:
    resp = apis.API_VERSIONS.response(
        error_code=0, api_keys=[{"api_key": 18, "min_version": 0, "max_version": 4}]
    )
    data = encode_response(18, 3, 5, resp)
    expected = (
        "00000005"  # header v0: no tagged-field byte, even for a flexible version
        "0000"  # error_code
        "02 0012 0000 0004 00"  # compact array of one ApiVersion + its tags
        "00000000"  # throttle_time_ms
        "00"  # tags
    )
    assert data[4:] == h(expected)
    header, body = decode_response(18, 3, data[4:])
    assert header.header_version == 0
    assert body.api_keys[0].max_version == 4


def test_api_versions_falls_back_to_v0_body() -> None:
    """A broker that does not know our version answers with a v0 error body."""
    v0 = encode_response(18, 0, 9, {"error_code": 35, "api_keys": [{"api_key": 18}]})
    header, body = decode_response(18, 3, v0[4:])
    assert header.correlation_id == 9
    assert body.error_code == ErrorCode.UNSUPPORTED_VERSION


def test_metadata_v9_response_uses_header_v1() -> None:
    data = encode_response(3, 9, 1, apis.METADATA.response())
    assert data[4:9] == h("00000001 00")
    # throttle 0, brokers [], cluster_id null, controller -1, topics [], cluster ops, tags
    assert data[9:] == h("00000000 01 00 ffffffff 01 80000000 00")


def test_produce_v9_with_tagged_current_leader() -> None:
    resp = apis.PRODUCE.response(
        responses=[
            {
                "name": "t",
                "partition_responses": [
                    {"index": 0, "error_code": 6, "base_offset": -1, "current_leader": {}}
                ],
            }
        ]
    )
    plain = apis.PRODUCE.response.encode(resp, 10)
    leader = apis.PRODUCE.response.cls.Responses.PartitionResponses.CurrentLeader
    resp.responses[0]["partition_responses"][0]["current_leader"] = leader(
        leader_id=2, leader_epoch=5
    )
    tagged = apis.PRODUCE.response.encode(resp, 10)
    # The tagged section grows by: tag 0, size 9, int32 2, int32 5, struct tags 0.
    assert len(tagged) - len(plain) == 1 + 1 + 9
    assert h("01 00 09 00000002 00000005 00") in tagged
    back = apis.PRODUCE.response.decode(tagged, 10)
    assert back.responses[0].partition_responses[0].current_leader.leader_id == 2


def test_error_codes() -> None:
    assert error_for_code(0) is ErrorCode.NONE
    assert error_for_code(-1) is ErrorCode.UNKNOWN_SERVER_ERROR
    assert error_for_code(6).name == "NOT_LEADER_OR_FOLLOWER"
    assert error_for_code(6).retriable
    assert not error_for_code(35).retriable
    assert error_for_code(9999) is ErrorCode.UNKNOWN_SERVER_ERROR
    assert error_for_name("unsupported_version") == 35
    assert ErrorCode.REBOOTSTRAP_REQUIRED == 129
    codes = [int(e) for e in ErrorCode]
    assert codes == list(range(-1, max(codes) + 1)), "no gaps in the code table"
    assert all(e.message for e in ErrorCode)
