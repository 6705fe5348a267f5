"""The consumer ("consumer" protocol type) subscription and assignment blobs.

Consumers put a versioned `ConsumerProtocolSubscription` into JoinGroup's protocol
metadata and the leader hands out `ConsumerProtocolAssignment`s through SyncGroup;
the group coordinator stores both, opaque, in the group metadata record. These
helpers turn the bytes into typed values and back.

Like Kafka's own ConsumerProtocol, a version newer than we know is read as the
newest we know (newer versions only append fields), and empty bytes - what the
coordinator stores for a member that has no assignment yet - decode as empty.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from kt.protocol.data import CONSUMER_PROTOCOL_ASSIGNMENT, CONSUMER_PROTOCOL_SUBSCRIPTION
from kt.protocol.errors import DecodeError

TopicPartitions = list[tuple[str, list[int]]]


@dataclass
class Subscription:
    """What a consumer asks for: topics, plus (v1+) the partitions it already owns."""

    topics: list[str]
    user_data: bytes | None = None
    owned_partitions: TopicPartitions = field(default_factory=list)
    generation_id: int = -1
    rack_id: str | None = None
    version: int = 3


@dataclass
class Assignment:
    """What the group leader gives a member: partitions per topic."""

    partitions: TopicPartitions = field(default_factory=list)
    user_data: bytes | None = None
    version: int = 3


def decode_subscription(data: bytes | bytearray | memoryview) -> Subscription:
    """Decode a consumer subscription blob; raises DecodeError if malformed."""
    if len(data) == 0:
        return Subscription(topics=[], version=-1)
    version, s = CONSUMER_PROTOCOL_SUBSCRIPTION.decode_versioned(data, clamp=True)
    if version < 0:
        raise DecodeError(f"negative consumer subscription version {version}")
    return Subscription(
        topics=list(s.topics),
        user_data=s.user_data,
        owned_partitions=[(tp.topic, list(tp.partitions)) for tp in s.owned_partitions],
        generation_id=s.generation_id,
        rack_id=s.rack_id,
        version=version,
    )


def encode_subscription(sub: Subscription, version: int | None = None) -> bytes:
    """Encode a subscription in `version` (default: `sub.version`)."""
    v = sub.version if version is None else version
    body = CONSUMER_PROTOCOL_SUBSCRIPTION(
        topics=sub.topics,
        user_data=sub.user_data,
        owned_partitions=[{"topic": t, "partitions": ps} for t, ps in sub.owned_partitions],
        generation_id=sub.generation_id,
        rack_id=sub.rack_id,
    )
    return CONSUMER_PROTOCOL_SUBSCRIPTION.encode_versioned(body, v)


def decode_assignment(data: bytes | bytearray | memoryview) -> Assignment:
    """Decode a consumer assignment blob; raises DecodeError if malformed."""
    if len(data) == 0:
        return Assignment(version=-1)
    version, a = CONSUMER_PROTOCOL_ASSIGNMENT.decode_versioned(data, clamp=True)
    if version < 0:
        raise DecodeError(f"negative consumer assignment version {version}")
    return Assignment(
        partitions=[(tp.topic, list(tp.partitions)) for tp in a.assigned_partitions],
        user_data=a.user_data,
        version=version,
    )


def encode_assignment(assignment: Assignment, version: int | None = None) -> bytes:
    """Encode an assignment in `version` (default: `assignment.version`)."""
    v = assignment.version if version is None else version
    body = CONSUMER_PROTOCOL_ASSIGNMENT(
        assigned_partitions=[{"topic": t, "partitions": ps} for t, ps in assignment.partitions],
        user_data=assignment.user_data,
    )
    return CONSUMER_PROTOCOL_ASSIGNMENT.encode_versioned(body, v)
