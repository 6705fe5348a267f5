"""__consumer_offsets / __transaction_state records and the consumer protocol blobs."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kt.protocol.consumer_protocol import (
    Assignment,
    Subscription,
    decode_assignment,
    decode_subscription,
    encode_assignment,
    encode_subscription,
)
from kt.protocol.coordinator_records import (
    GroupMember,
    GroupMetadataRecord,
    GroupMetadataValue,
    OffsetCommitRecord,
    OffsetCommitValue,
    TransactionLogRecord,
    TransactionLogValue,
    TransactionState,
    decode_consumer_offsets_record,
    decode_transaction_log_record,
    encode_consumer_offsets_record,
    encode_transaction_log_record,
)
from kt.protocol.errors import DecodeError
from kt.protocol.primitives import read_varint, read_varlong


def read_v2_records(path: Path) -> list[tuple[int, bytes | None, bytes | None]]:
    """(offset, key, value) of every record in an uncompressed magic-2 log segment.

    Deliberately minimal and test-local: the real batch reader lives in kt.storage.
    """
    data = memoryview(path.read_bytes())
    out: list[tuple[int, bytes | None, bytes | None]] = []
    pos = 0
    while pos + 12 <= len(data):
        base_offset, length = struct.unpack_from(">qi", data, pos)
        end = pos + 12 + length
        assert data[pos + 16] == 2, "magic 2 expected"
        (attributes,) = struct.unpack_from(">h", data, pos + 21)
        assert attributes & 0x7 == 0, "uncompressed batches expected"
        (count,) = struct.unpack_from(">i", data, pos + 57)
        rpos = pos + 61
        for _ in range(count):
            _, rpos = read_varint(data, rpos)  # record length
            rpos += 1  # attributes
            _, rpos = read_varlong(data, rpos)  # timestamp delta
            delta, rpos = read_varint(data, rpos)
            klen, rpos = read_varint(data, rpos)
            key = None if klen < 0 else bytes(data[rpos : rpos + klen])
            rpos += max(klen, 0)
            vlen, rpos = read_varint(data, rpos)
            value = None if vlen < 0 else bytes(data[rpos : rpos + vlen])
            rpos += max(vlen, 0)
            nheaders, rpos = read_varint(data, rpos)
            assert nheaders == 0
            out.append((base_offset + delta, key, value))
        pos = end
    return out


def test_real_consumer_offsets_segment(fixtures_dir: Path) -> None:
    records = read_v2_records(fixtures_dir / "__consumer_offsets-16" / "00000000000000000000.log")
    assert len(records) >= 60
    commits = groups = 0
    for _, key, value in records:
        assert key is not None
        rec = decode_consumer_offsets_record(key, value)
        # Re-encoding with the same versions must give Kafka's exact bytes.
        assert encode_consumer_offsets_record(rec) == (key, value)
        if isinstance(rec, OffsetCommitRecord):
            commits += 1
            assert rec.partition >= 0 and rec.topic
            if rec.value is not None:
                assert rec.value.offset >= 0
                assert rec.value.commit_timestamp > 1_500_000_000_000
        else:
            groups += 1
            if rec.value is not None and rec.value.protocol_type == "consumer":
                for m in rec.value.members:
                    sub = m.decoded_subscription()
                    assert sub.topics
                    m.decoded_assignment()
    assert commits and groups


def _offset_commit(kv: int, vv: int) -> OffsetCommitRecord:
    return OffsetCommitRecord(
        "g",
        "t",
        3,
        OffsetCommitValue(
            offset=42,
            metadata="meta",
            commit_timestamp=1_700_000_000_000,
            leader_epoch=7 if vv >= 3 else -1,
            expire_timestamp=1_800_000_000_000 if vv == 1 else -1,
            version=vv,
        ),
        key_version=kv,
    )


@pytest.mark.parametrize("kv", [0, 1])
@pytest.mark.parametrize("vv", [0, 1, 2, 3, 4])
def test_offset_commit_roundtrip(kv: int, vv: int) -> None:
    rec = _offset_commit(kv, vv)
    key, value = encode_consumer_offsets_record(rec)
    assert decode_consumer_offsets_record(key, value) == rec
    tomb = OffsetCommitRecord("g", "t", 3, None, key_version=kv)
    key, value = encode_consumer_offsets_record(tomb)
    assert value is None
    back = decode_consumer_offsets_record(key, None)
    assert back == tomb and back.tombstone


@pytest.mark.parametrize("vv", [0, 1, 2, 3, 4])
def test_group_metadata_roundtrip(vv: int) -> None:
    sub = encode_subscription(Subscription(topics=["t"], owned_partitions=[("t", [0])]))
    asg = encode_assignment(Assignment(partitions=[("t", [0, 1])]))
    member = GroupMember(
        member_id="m-1",
        client_id="c",
        client_host="/10.0.0.1",
        session_timeout=45000,
        subscription=sub,
        assignment=asg,
        rebalance_timeout=300000 if vv >= 1 else -1,
        group_instance_id="i" if vv >= 3 else None,
    )
    value = GroupMetadataValue(
        protocol_type="consumer",
        generation=5,
        protocol="range",
        leader="m-1",
        members=[member],
        current_state_timestamp=123 if vv >= 2 else -1,
        version=vv,
    )
    rec = GroupMetadataRecord("grp", value)
    key, data = encode_consumer_offsets_record(rec)
    back = decode_consumer_offsets_record(key, data)
    assert back == rec
    assert isinstance(back, GroupMetadataRecord) and back.value is not None
    assert back.value.members[0].decoded_assignment().partitions == [("t", [0, 1])]
    assert decode_consumer_offsets_record(key, None) == GroupMetadataRecord("grp", None)


@pytest.mark.parametrize("vv", [0, 1])
def test_transaction_log_roundtrip(vv: int) -> None:
    value = TransactionLogValue(
        producer_id=1000,
        producer_epoch=2,
        transaction_timeout_ms=60000,
        state=TransactionState.ONGOING,
        partitions=[("t", [0, 2])],
        last_update_timestamp_ms=5,
        start_timestamp_ms=4,
        previous_producer_id=999 if vv else -1,
        next_producer_id=-1,
        client_transaction_version=2 if vv else 0,
        version=vv,
    )
    rec = TransactionLogRecord("tx-1", value)
    key, data = encode_transaction_log_record(rec)
    back = decode_transaction_log_record(key, data)
    assert back == rec
    assert back.value is not None and back.value.state_name == "ONGOING"
    empty = TransactionLogRecord(
        "tx-2", TransactionLogValue(1, 0, 1000, 0, None, 1, -1, version=vv)
    )
    assert decode_transaction_log_record(*encode_transaction_log_record(empty)) == empty
    assert decode_transaction_log_record(key, None).tombstone


def test_unknown_versions_raise_decode_error() -> None:
    with pytest.raises(DecodeError, match="unknown"):
        decode_consumer_offsets_record(b"\x00\x03\x00\x01g", None)
    key, _ = encode_consumer_offsets_record(_offset_commit(1, 3))
    with pytest.raises(DecodeError, match="unknown"):
        decode_consumer_offsets_record(key, b"\x00\x09" + b"\x00" * 30)
    with pytest.raises(DecodeError, match="unknown"):
        decode_transaction_log_record(b"\x00\x01\x00\x01x", None)


def test_consumer_protocol_versions_and_forward_compatibility() -> None:
    for v in range(4):
        sub = Subscription(
            topics=["a", "b"],
            user_data=b"u",
            owned_partitions=[("a", [1])] if v >= 1 else [],
            generation_id=3 if v >= 2 else -1,
            rack_id="r1" if v >= 3 else None,
            version=v,
        )
        assert decode_subscription(encode_subscription(sub)) == sub
        asg = Assignment(partitions=[("a", [0])], user_data=None, version=v)
        assert decode_assignment(encode_assignment(asg)) == asg
    # A newer version (with extra trailing fields) is read as the newest we know.
    newer = b"\x00\x07" + encode_subscription(Subscription(topics=["a"]), 3)[2:] + b"extra"
    sub = decode_subscription(newer)
    assert sub.version == 7 and sub.topics == ["a"]
    assert decode_assignment(b"").partitions == []


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=80), st.none() | st.binary(max_size=200))
def test_record_decoders_raise_only_decode_error(key: bytes, value: bytes | None) -> None:
    for decode in (decode_consumer_offsets_record, decode_transaction_log_record):
        try:
            decode(key, value)
        except DecodeError:
            pass
    for blob in (key, value or b""):
        for dec in (decode_subscription, decode_assignment):
            try:
                dec(blob)
            except DecodeError:
                pass
