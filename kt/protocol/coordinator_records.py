"""Typed records of the internal topics `__consumer_offsets` and `__transaction_state`.

Both topics are compacted key/value logs. In `__consumer_offsets` the key's int16
version says what the record is: 0 or 1 an offset commit (group, topic,
partition), 2 a group's metadata; the value carries its own version. A record
with a null value is a tombstone (offset deleted / group removed). Newer Kafka
versions write further key versions for the KIP-848 consumer-group records; those
are reported as DecodeError("unknown ...") so a dump tool can print them as such.

`__transaction_state` keys are the transactional id (key version 0), values the
transaction's state.

Decoders raise only DecodeError; encoders are what the broker's coordinators use
to write the same bytes Kafka does.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import IntEnum

from kt.protocol.codec import DataSchema
from kt.protocol.consumer_protocol import (
    Assignment,
    Subscription,
    decode_assignment,
    decode_subscription,
)
from kt.protocol.data import (
    GROUP_METADATA_KEY,
    GROUP_METADATA_VALUE,
    OFFSET_COMMIT_KEY,
    OFFSET_COMMIT_VALUE,
    TRANSACTION_LOG_KEY,
    TRANSACTION_LOG_VALUE,
)
from kt.protocol.errors import DecodeError
from kt.protocol.primitives import read_int16
from kt.protocol.schema import Struct

Data = bytes | bytearray | memoryview

# --- __consumer_offsets ----------------------------------------------------------


@dataclass
class OffsetCommitValue:
    """A committed offset. `expire_timestamp` exists only in value version 1."""

    offset: int
    metadata: str = ""
    commit_timestamp: int = -1
    leader_epoch: int = -1
    expire_timestamp: int = -1
    version: int = 3


@dataclass
class OffsetCommitRecord:
    """An offset-commit record; `value` None is a tombstone (offset deleted)."""

    group: str
    topic: str
    partition: int
    value: OffsetCommitValue | None
    key_version: int = 1

    @property
    def tombstone(self) -> bool:
        """Whether this record deletes the committed offset."""
        return self.value is None


@dataclass
class GroupMember:
    """One member as stored in the group metadata record."""

    member_id: str
    client_id: str
    client_host: str
    session_timeout: int
    subscription: bytes
    assignment: bytes
    rebalance_timeout: int = -1
    group_instance_id: str | None = None

    def decoded_subscription(self) -> Subscription:
        """The subscription bytes decoded as the consumer protocol (DecodeError if not)."""
        return decode_subscription(self.subscription)

    def decoded_assignment(self) -> Assignment:
        """The assignment bytes decoded as the consumer protocol (DecodeError if not)."""
        return decode_assignment(self.assignment)


@dataclass
class GroupMetadataValue:
    """A group's state: protocol, generation, leader and members."""

    protocol_type: str
    generation: int
    protocol: str | None
    leader: str | None
    members: list[GroupMember] = field(default_factory=list)
    current_state_timestamp: int = -1
    version: int = 3


@dataclass
class GroupMetadataRecord:
    """A group-metadata record; `value` None is a tombstone (group removed)."""

    group: str
    value: GroupMetadataValue | None
    key_version: int = 2

    @property
    def tombstone(self) -> bool:
        """Whether this record deletes the group."""
        return self.value is None


ConsumerOffsetsRecord = OffsetCommitRecord | GroupMetadataRecord


def _key_version(key: Data) -> int:
    buf = key if isinstance(key, memoryview) else memoryview(key)
    return int(read_int16(buf, 0)[0])


def decode_consumer_offsets_record(key: Data, value: Data | None) -> ConsumerOffsetsRecord:
    """Decode one `__consumer_offsets` record from its key and value bytes.

    Raises DecodeError for malformed bytes and for key or value versions we do not
    know (the message then starts with "unknown").
    """
    kv = _key_version(key)
    if kv in (0, 1):
        _, k = OFFSET_COMMIT_KEY.decode_versioned(key)
        ov: OffsetCommitValue | None = None
        if value is not None:
            vv, v = _decode_value(OFFSET_COMMIT_VALUE, value, "offset commit")
            ov = OffsetCommitValue(
                offset=v.offset,
                metadata=v.metadata,
                commit_timestamp=v.commit_timestamp,
                leader_epoch=v.leader_epoch,
                expire_timestamp=v.expire_timestamp,
                version=vv,
            )
        return OffsetCommitRecord(k.group, k.topic, k.partition, ov, key_version=kv)
    if kv == 2:
        _, k = GROUP_METADATA_KEY.decode_versioned(key)
        gv: GroupMetadataValue | None = None
        if value is not None:
            vv, v = _decode_value(GROUP_METADATA_VALUE, value, "group metadata")
            gv = GroupMetadataValue(
                protocol_type=v.protocol_type,
                generation=v.generation,
                protocol=v.protocol,
                leader=v.leader,
                current_state_timestamp=v.current_state_timestamp,
                members=[
                    GroupMember(
                        member_id=m.member_id,
                        group_instance_id=m.group_instance_id,
                        client_id=m.client_id,
                        client_host=m.client_host,
                        rebalance_timeout=m.rebalance_timeout,
                        session_timeout=m.session_timeout,
                        subscription=m.subscription,
                        assignment=m.assignment,
                    )
                    for m in v.members
                ],
                version=vv,
            )
        return GroupMetadataRecord(k.group, gv, key_version=kv)
    raise DecodeError(f"unknown __consumer_offsets key version {kv}")


def _decode_value(schema: DataSchema, value: Data, what: str) -> tuple[int, Struct]:
    try:
        return schema.decode_versioned(value)
    except DecodeError as exc:
        if _key_version(value) not in schema.versions:
            raise DecodeError(f"unknown {what} value version {_key_version(value)}") from exc
        raise


def encode_offset_commit(record: OffsetCommitRecord) -> tuple[bytes, bytes | None]:
    """The (key, value) bytes of an offset-commit record (value None: tombstone)."""
    key = OFFSET_COMMIT_KEY.encode_versioned(
        {"group": record.group, "topic": record.topic, "partition": record.partition},
        record.key_version,
    )
    if record.value is None:
        return key, None
    v = record.value
    value = OFFSET_COMMIT_VALUE.encode_versioned(
        {
            "offset": v.offset,
            "leader_epoch": v.leader_epoch,
            "metadata": v.metadata,
            "commit_timestamp": v.commit_timestamp,
            "expire_timestamp": v.expire_timestamp,
        },
        v.version,
    )
    return key, value


def encode_group_metadata(record: GroupMetadataRecord) -> tuple[bytes, bytes | None]:
    """The (key, value) bytes of a group-metadata record (value None: tombstone)."""
    key = GROUP_METADATA_KEY.encode_versioned({"group": record.group}, record.key_version)
    if record.value is None:
        return key, None
    g = record.value
    members = [
        {
            "member_id": m.member_id,
            "group_instance_id": m.group_instance_id,
            "client_id": m.client_id,
            "client_host": m.client_host,
            "rebalance_timeout": m.rebalance_timeout,
            "session_timeout": m.session_timeout,
            "subscription": m.subscription,
            "assignment": m.assignment,
        }
        for m in g.members
    ]
    value = GROUP_METADATA_VALUE.encode_versioned(
        {
            "protocol_type": g.protocol_type,
            "generation": g.generation,
            "protocol": g.protocol,
            "leader": g.leader,
            "current_state_timestamp": g.current_state_timestamp,
            "members": members,
        },
        g.version,
    )
    return key, value


def encode_consumer_offsets_record(record: ConsumerOffsetsRecord) -> tuple[bytes, bytes | None]:
    """The (key, value) bytes of either kind of `__consumer_offsets` record."""
    if isinstance(record, OffsetCommitRecord):
        return encode_offset_commit(record)
    return encode_group_metadata(record)


# --- __transaction_state ---------------------------------------------------------


class TransactionState(IntEnum):
    """The transaction status byte of the transaction log."""

    EMPTY = 0
    ONGOING = 1
    PREPARE_COMMIT = 2
    PREPARE_ABORT = 3
    COMPLETE_COMMIT = 4
    COMPLETE_ABORT = 5
    DEAD = 6
    PREPARE_EPOCH_FENCE = 7


@dataclass
class TransactionLogValue:
    """A transactional id's state. `partitions` None is what Kafka writes when Empty."""

    producer_id: int
    producer_epoch: int
    transaction_timeout_ms: int
    state: int
    partitions: list[tuple[str, list[int]]] | None
    last_update_timestamp_ms: int
    start_timestamp_ms: int
    previous_producer_id: int = -1
    next_producer_id: int = -1
    client_transaction_version: int = 0
    version: int = 0

    @property
    def state_name(self) -> str:
        """The state as Kafka names it (e.g. "PREPARE_COMMIT"), or "UNKNOWN(n)"."""
        try:
            return TransactionState(self.state).name
        except ValueError:
            return f"UNKNOWN({self.state})"


@dataclass
class TransactionLogRecord:
    """A transaction-log record; `value` None is a tombstone (id expired)."""

    transactional_id: str
    value: TransactionLogValue | None
    key_version: int = 0

    @property
    def tombstone(self) -> bool:
        """Whether this record removes the transactional id."""
        return self.value is None


def decode_transaction_log_record(key: Data, value: Data | None) -> TransactionLogRecord:
    """Decode one `__transaction_state` record; DecodeError if malformed or unknown."""
    kv = _key_version(key)
    if kv not in TRANSACTION_LOG_KEY.versions:
        raise DecodeError(f"unknown __transaction_state key version {kv}")
    _, k = TRANSACTION_LOG_KEY.decode_versioned(key)
    tv: TransactionLogValue | None = None
    if value is not None:
        vv, v = _decode_value(TRANSACTION_LOG_VALUE, value, "transaction log")
        parts = v.transaction_partitions
        tv = TransactionLogValue(
            producer_id=v.producer_id,
            producer_epoch=v.producer_epoch,
            transaction_timeout_ms=v.transaction_timeout_ms,
            state=v.transaction_status,
            partitions=None if parts is None else [(p.topic, list(p.partition_ids)) for p in parts],
            last_update_timestamp_ms=v.transaction_last_update_timestamp_ms,
            start_timestamp_ms=v.transaction_start_timestamp_ms,
            previous_producer_id=v.previous_producer_id,
            next_producer_id=v.next_producer_id,
            client_transaction_version=v.client_transaction_version,
            version=vv,
        )
    return TransactionLogRecord(k.transactional_id, tv, key_version=kv)


def encode_transaction_log_record(record: TransactionLogRecord) -> tuple[bytes, bytes | None]:
    """The (key, value) bytes of a transaction-log record (value None: tombstone)."""
    key = TRANSACTION_LOG_KEY.encode_versioned(
        {"transactional_id": record.transactional_id}, record.key_version
    )
    if record.value is None:
        return key, None
    t = record.value
    parts = None
    if t.partitions is not None:
        parts = [{"topic": topic, "partition_ids": ids} for topic, ids in t.partitions]
    value = TRANSACTION_LOG_VALUE.encode_versioned(
        {
            "producer_id": t.producer_id,
            "previous_producer_id": t.previous_producer_id,
            "next_producer_id": t.next_producer_id,
            "producer_epoch": t.producer_epoch,
            "transaction_timeout_ms": t.transaction_timeout_ms,
            "transaction_status": t.state,
            "transaction_partitions": parts,
            "transaction_last_update_timestamp_ms": t.last_update_timestamp_ms,
            "transaction_start_timestamp_ms": t.start_timestamp_ms,
            "client_transaction_version": t.client_transaction_version,
        },
        t.version,
    )
    return key, value
