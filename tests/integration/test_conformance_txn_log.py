"""`__transaction_state` as a kt broker writes it, read by code that is not kt's:
kafka-python's record code splits the segment into records, and kafka-python's
schema-driven struct codec decodes their keys and values from Kafka's own
TransactionLogKey / TransactionLogValue specs. Every field must agree with kt's
decoder (the one `kt dump-log-segments --transaction-log-decoder` uses) and with the
transactions the client ran.

The specs are Apache's text (tests/kafka_specs.py says where they are read from); the
module name puts it under CI's conformance guard, which fails a run that skipped it.
"""

from __future__ import annotations

import io
import struct
from pathlib import Path
from typing import Any

import pytest
from kafka_specs import load_spec

from kt.broker.groups.offsets_log import partition_for
from kt.protocol.coordinator_records import TransactionState, decode_transaction_log_record

pytestmark = pytest.mark.integration

ck = pytest.importorskip("confluent_kafka")
TXN_ID = "tx-xcheck"


def kafka_python_records(segment: Path) -> list[tuple[bytes, bytes | None]]:
    """(key, value) of every record, split by kafka-python's MemoryRecords."""
    from kafka.record import MemoryRecords

    records = MemoryRecords(segment.read_bytes())
    out: list[tuple[bytes, bytes | None]] = []
    while records.has_next():
        batch = records.next_batch()
        out += [(bytes(r.key), None if r.value is None else bytes(r.value)) for r in batch]
    return out


def struct_codec(spec_name: str) -> Any:
    """kafka-python's StructField for one of Kafka's data specs."""
    from kafka.protocol.schemas import StructField

    spec = load_spec(spec_name)
    _tagged_versions_as_versions(spec.get("fields", []))
    return StructField(spec)


def _tagged_versions_as_versions(fields: list[dict[str, Any]]) -> None:
    # A tagged field may omit "versions" (Kafka's generator then takes its
    # taggedVersions); kafka-python's codec wants it spelled out.
    for field in fields:
        if "versions" not in field and "taggedVersions" in field:
            field["versions"] = field["taggedVersions"]
        _tagged_versions_as_versions(field.get("fields", []))


def decode(codec: Any, data: bytes, flexible_from: int | None) -> tuple[int, dict[str, Any]]:
    """A coordinator record: an int16 version, then the struct at that version."""
    (version,) = struct.unpack(">h", data[:2])
    flexible = flexible_from is not None and version >= flexible_from
    body = io.BytesIO(data[2:])
    decoded = codec.decode(body, version=version, compact=flexible, tagged=flexible)
    assert body.read() == b"", f"bytes left after a v{version} record"
    return version, decoded


def test_transaction_log_decodes_with_kafka_python_and_kafka_specs(kt_broker: Any) -> None:
    bs = kt_broker.bootstrap
    from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

    admin = AdminClient({"bootstrap.servers": bs})
    admin.create_topics([NewTopic("x", 2, 1)])["x"].result(30)
    p = ck.Producer({"bootstrap.servers": bs, "transactional.id": TXN_ID,
                     "transaction.timeout.ms": 45000})  # fmt: skip
    p.init_transactions(30)
    p.begin_transaction()
    p.produce("x", b"c", partition=0)
    p.produce("x", b"c", partition=1)
    p.commit_transaction(30)
    p.begin_transaction()
    p.produce("x", b"a", partition=1)
    p.flush(30)  # sent, so the partition is in the transaction the abort ends
    p.abort_transaction(30)
    kt_broker.stop()

    part = kt_broker.data_dir / f"__transaction_state-{partition_for(TXN_ID, 50)}"
    pairs = kafka_python_records(part / "00000000000000000000.log")
    key_codec, value_codec = struct_codec("TransactionLogKey"), struct_codec("TransactionLogValue")
    ours = [decode_transaction_log_record(k, v) for k, v in pairs]
    states = []
    for (key, value), kt_record in zip(pairs, ours, strict=True):
        _, k = decode(key_codec, key, None)
        assert k["transactional_id"] == kt_record.transactional_id == TXN_ID
        assert value is not None and kt_record.value is not None
        version, v = decode(value_codec, value, 1)
        kv = kt_record.value
        assert version == kv.version
        assert (v["producer_id"], v["producer_epoch"]) == (kv.producer_id, kv.producer_epoch)
        assert v["transaction_timeout_ms"] == kv.transaction_timeout_ms == 45000
        assert v["transaction_status"] == kv.state
        theirs = v["transaction_partitions"]
        parts = None if theirs is None else [(t["topic"], list(t["partition_ids"])) for t in theirs]
        assert parts == kv.partitions
        assert v["transaction_last_update_timestamp_ms"] == kv.last_update_timestamp_ms
        assert v["transaction_start_timestamp_ms"] == kv.start_timestamp_ms
        states.append(TransactionState(kv.state).name)
    assert states == ["EMPTY", "ONGOING", "PREPARE_COMMIT", "COMPLETE_COMMIT",
                      "ONGOING", "PREPARE_ABORT", "COMPLETE_ABORT"]  # fmt: skip
    ongoing = ours[1].value
    assert ongoing is not None and ongoing.partitions == [("x", [0, 1])]
