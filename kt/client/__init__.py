"""kt's asyncio Kafka client: the one library every online kt command (and the TUI
and the Spark source) uses to talk to a broker.

Typical use::

    async with KafkaClient("localhost:9092") as client:
        await client.create_topics([NewTopic("orders", 3, 1)])
        await client.produce("orders", 0, [RecordSpec(b"k", b"v")], codec=Codec.LZ4)
        got = await client.fetch({("orders", 0): 0})
        end = await client.list_offsets([("orders", 0)], LATEST)

It sits on both cores: the protocol core for the wire, the storage core for the
record format (batches are built and decoded by `kt.storage.record_batch`, the
one implementation of it), so it lives beside them rather than inside either.

The pieces: `core` (connections with per-connection ApiVersions negotiation and
pipelining, metadata cache, leader/coordinator routing, retries with backoff,
timeouts), `records` (produce, fetch, list offsets), `admin` (topics,
partitions, configs, cluster, log dirs) and `groups` (group administration and
`GroupMember`, the join/sync/heartbeat/commit loop with the range assignor).

Errors: `KafkaError` (a broker's error code, `.code` an ErrorCode, `.retriable`;
subclasses `UnsupportedApiError`, a broker without an API kt needs, and
`ControllerUnknownError`, metadata naming a controller that is not a broker),
`KafkaConnectionError` (unreachable or broken connection), `KafkaTimeoutError`.
"""

from __future__ import annotations

from kt.client.admin import (
    ELECTION_PREFERRED,
    ELECTION_UNCLEAN,
    OP_APPEND,
    OP_DELETE,
    OP_SET,
    OP_SUBTRACT,
    RESOURCE_BROKER,
    RESOURCE_BROKER_LOGGER,
    RESOURCE_TOPIC,
    AdminMixin,
    ClusterDescription,
    ConfigEntry,
    LogDirInfo,
    LogDirPartition,
    NewTopic,
    PartitionReassignment,
)
from kt.client.core import (
    BrokerConnection,
    BrokerInfo,
    ClusterMetadata,
    ControllerUnknownError,
    KafkaAuthenticationError,
    KafkaConnectionError,
    KafkaError,
    KafkaTimeoutError,
    PartitionInfo,
    TopicInfo,
    UnsupportedApiError,
    parse_bootstrap,
)
from kt.client.groups import (
    INACTIVE_STATES,
    CommittedOffset,
    GroupDescription,
    GroupListing,
    GroupMember,
    GroupsMixin,
    MemberDescription,
    range_assign,
)
from kt.client.records import (
    EARLIEST,
    LATEST,
    Codec,
    ConsumerRecord,
    FetchResult,
    ProduceResult,
    RecordsMixin,
    RecordSpec,
    TopicPartition,
    decode_records,
)
from kt.client.security import SecurityConfig, SecurityConfigError


class KafkaClient(RecordsMixin, AdminMixin, GroupsMixin):
    """An asyncio Kafka client: `async with KafkaClient("host:9092") as c: ...`.

    Options: `client_id`, `request_timeout` (seconds per request),
    `connect_timeout` (seconds to reach a bootstrap server, all attempts
    included), `retries` and `retry_backoff` / `max_retry_backoff` (seconds) for
    retriable errors, `security` (a `SecurityConfig`: TLS and SASL; PLAINTEXT
    when None).
    """

    async def __aenter__(self) -> KafkaClient:
        await self.start()
        return self


__all__ = [
    "EARLIEST",
    "ELECTION_PREFERRED",
    "ELECTION_UNCLEAN",
    "INACTIVE_STATES",
    "LATEST",
    "OP_APPEND",
    "OP_DELETE",
    "OP_SET",
    "OP_SUBTRACT",
    "RESOURCE_BROKER",
    "RESOURCE_BROKER_LOGGER",
    "RESOURCE_TOPIC",
    "BrokerConnection",
    "BrokerInfo",
    "ClusterDescription",
    "ClusterMetadata",
    "Codec",
    "CommittedOffset",
    "ConfigEntry",
    "ConsumerRecord",
    "ControllerUnknownError",
    "FetchResult",
    "GroupDescription",
    "GroupListing",
    "GroupMember",
    "KafkaAuthenticationError",
    "KafkaClient",
    "KafkaConnectionError",
    "KafkaError",
    "KafkaTimeoutError",
    "LogDirInfo",
    "LogDirPartition",
    "MemberDescription",
    "NewTopic",
    "PartitionInfo",
    "PartitionReassignment",
    "ProduceResult",
    "RecordSpec",
    "SecurityConfig",
    "SecurityConfigError",
    "TopicInfo",
    "TopicPartition",
    "UnsupportedApiError",
    "decode_records",
    "parse_bootstrap",
    "range_assign",
]
