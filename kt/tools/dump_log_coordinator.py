"""`--offsets-decoder` and `--transaction-log-decoder`: Kafka's renderings of the
records of `__consumer_offsets` and `__transaction_state`.

Offsets: Kafka's `OffsetsMessageParser` prints the key as
`{"type":"<key version>","data":{...}}` and the value as
`{"version":"<value version>","data":{...}}`, the data written by the generated
JSON converters: camelCase field names in schema order, only the fields of that
version, bytes as base64. In group metadata of protocol type "consumer" each
member's subscription and assignment are decoded into the consumer protocol's
JSON (left as base64 when they do not decode). A tombstone's payload is
`<DELETE>`; a record that does not decode has the key
`Error at offset N, skipping. <reason>` (or `Unknown record type N at offset O,
skipping.`) and no payload.

Transaction log: Kafka's `TransactionLog.formatRecordKeyAndValue`:
`transaction_metadata::transactionalId=<id>` and
`producerId:P,producerEpoch:E,state=S,partitions=[t-0,...],txnLastUpdateTimestamp=T,txnTimeoutMs=M`
(or `<DELETE>`).

The parsers return text for text mode and (JSON fragment, quoted encoding name)
pairs for `--json`, where the offsets key and value are embedded JSON objects.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Callable
from typing import Any

from kt.protocol.coordinator_records import (
    GroupMetadataRecord,
    GroupMetadataValue,
    OffsetCommitRecord,
    decode_consumer_offsets_record,
    decode_transaction_log_record,
)
from kt.protocol.errors import DecodeError
from kt.tools.dump_log_context import jstr

# Scala's TransactionState case objects, as Kafka's formatter prints them.
_TXN_STATE_NAMES = {
    0: "Empty",
    1: "Ongoing",
    2: "PrepareCommit",
    3: "PrepareAbort",
    4: "CompleteCommit",
    5: "CompleteAbort",
    6: "Dead",
    7: "PrepareEpochFence",
}


def _b64(data: bytes | None) -> str | None:
    return None if data is None else base64.b64encode(bytes(data)).decode("ascii")


def _dumps(obj: Any) -> str:
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False)


def _subscription_json(data: bytes) -> Any:
    from kt.protocol.consumer_protocol import decode_subscription

    try:
        s = decode_subscription(data)
    except DecodeError:
        return _b64(data)
    if s.version < 0:
        # Kafka fails to read the version of empty bytes and keeps them.
        return _b64(data)
    out: dict[str, Any] = {"topics": list(s.topics), "userData": _b64(s.user_data)}
    if s.version >= 1:
        out["ownedPartitions"] = [
            {"topic": t, "partitions": list(ps)} for t, ps in s.owned_partitions
        ]
    if s.version >= 2:
        out["generationId"] = s.generation_id
    if s.version >= 3:
        out["rackId"] = s.rack_id
    return out


def _assignment_json(data: bytes) -> Any:
    from kt.protocol.consumer_protocol import decode_assignment

    try:
        a = decode_assignment(data)
    except DecodeError:
        return _b64(data)
    if a.version < 0:
        return _b64(data)
    return {
        "assignedPartitions": [{"topic": t, "partitions": list(ps)} for t, ps in a.partitions],
        "userData": _b64(a.user_data),
    }


def _group_value_json(g: GroupMetadataValue) -> dict[str, Any]:
    v = g.version
    consumer = g.protocol_type == "consumer"
    out: dict[str, Any] = {
        "protocolType": g.protocol_type,
        "generation": g.generation,
        "protocol": g.protocol,
        "leader": g.leader,
    }
    if v >= 2:
        out["currentStateTimestamp"] = g.current_state_timestamp
    members = []
    for m in g.members:
        mj: dict[str, Any] = {"memberId": m.member_id}
        if v >= 3:
            mj["groupInstanceId"] = m.group_instance_id
        mj["clientId"] = m.client_id
        mj["clientHost"] = m.client_host
        if v >= 1:
            mj["rebalanceTimeout"] = m.rebalance_timeout
        mj["sessionTimeout"] = m.session_timeout
        mj["subscription"] = (
            _subscription_json(m.subscription) if consumer else _b64(m.subscription)
        )
        mj["assignment"] = _assignment_json(m.assignment) if consumer else _b64(m.assignment)
        members.append(mj)
    out["members"] = members
    return out


def offsets_key_value(
    offset: int, key: bytes | None, value: bytes | None
) -> tuple[Any | str, Any | str | None, bool]:
    """(key, value, decoded): JSON-able objects when decoded, else Kafka's error text."""
    if key is None:
        return (
            f"Failed to decode message at offset {offset} using offset topic decoder "
            "(message had a missing key)",
            None,
            False,
        )
    try:
        rec = decode_consumer_offsets_record(key, value)
    except DecodeError as exc:
        msg = str(exc)
        if msg.startswith("unknown __consumer_offsets key version"):
            kv = int.from_bytes(key[:2], "big", signed=True)
            return f"Unknown record type {kv} at offset {offset}, skipping.", None, False
        return f"Error at offset {offset}, skipping. {msg}", None, False
    if isinstance(rec, OffsetCommitRecord):
        kj = {
            "type": str(rec.key_version),
            "data": {"group": rec.group, "topic": rec.topic, "partition": rec.partition},
        }
        if rec.value is None:
            return kj, "<DELETE>", True
        ov = rec.value
        data: dict[str, Any] = {"offset": ov.offset}
        if ov.version >= 3:
            data["leaderEpoch"] = ov.leader_epoch
        data["metadata"] = ov.metadata
        data["commitTimestamp"] = ov.commit_timestamp
        if ov.version == 1:
            data["expireTimestamp"] = ov.expire_timestamp
        return kj, {"version": str(ov.version), "data": data}, True
    assert isinstance(rec, GroupMetadataRecord)
    kj = {"type": str(rec.key_version), "data": {"group": rec.group}}
    if rec.value is None:
        return kj, "<DELETE>", True
    return kj, {"version": str(rec.value.version), "data": _group_value_json(rec.value)}, True


def transaction_key_value(key: bytes | None, value: bytes | None) -> tuple[str, str | None]:
    """Kafka's TransactionLog.formatRecordKeyAndValue text (errors as text in the key)."""
    if key is None:
        return "Failed to decode message using transaction log decoder (missing key)", None
    try:
        rec = decode_transaction_log_record(key, value)
    except DecodeError as exc:
        msg = str(exc)
        if msg.startswith("unknown __transaction_state key version"):
            return f"unknown::version={int.from_bytes(key[:2], 'big', signed=True)}", None
        return f"Error decoding transaction log record: {msg}", None
    k = f"transaction_metadata::transactionalId={rec.transactional_id}"
    t = rec.value
    if t is None:
        return k, "<DELETE>"
    parts: list[str] = []
    if t.state != 0 and t.partitions:
        parts = [f"{topic}-{p}" for topic, ids in t.partitions for p in ids]
    state = _TXN_STATE_NAMES.get(t.state, f"Unknown({t.state})")
    v = (
        f"producerId:{t.producer_id},producerEpoch:{t.producer_epoch},state={state},"
        f"partitions=[{','.join(parts)}],txnLastUpdateTimestamp={t.last_update_timestamp_ms},"
        f"txnTimeoutMs={t.transaction_timeout_ms}"
    )
    return k, v


Parser = Callable[[int, bytes | None, bytes | None], tuple[Any, Any]]


def record_parser(offsets: bool, as_json: bool) -> Parser:
    """A (offset, key, value) -> (key, value) renderer for the chosen decoder.

    Text mode: strings or None (None: Kafka prints no key/payload part). JSON mode:
    (fragment, '"encoding"') pairs or None.
    """
    if offsets:
        if as_json:

            def offsets_json(off: int, k: bytes | None, v: bytes | None) -> tuple[Any, Any]:
                kj, vj, ok = offsets_key_value(off, k, v)
                if not ok:
                    return (jstr(str(kj)), '"text"'), None
                if vj == "<DELETE>":
                    return (_dumps(kj), '"json"'), None
                return (_dumps(kj), '"json"'), (_dumps(vj), '"json"')

            return offsets_json

        def offsets_text(off: int, k: bytes | None, v: bytes | None) -> tuple[Any, Any]:
            kj, vj, ok = offsets_key_value(off, k, v)
            if not ok:
                return kj, None
            return _dumps(kj), vj if isinstance(vj, str) else _dumps(vj)

        return offsets_text

    if as_json:

        def txn_json(off: int, k: bytes | None, v: bytes | None) -> tuple[Any, Any]:
            ks, vs = transaction_key_value(k, v)
            if vs is None or vs == "<DELETE>":
                return (jstr(ks), '"text"'), None
            return (jstr(ks), '"text"'), (jstr(vs), '"text"')

        return txn_json

    def txn_text(off: int, k: bytes | None, v: bytes | None) -> tuple[Any, Any]:
        return transaction_key_value(k, v)

    return txn_text
