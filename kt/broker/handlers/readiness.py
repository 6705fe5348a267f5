"""What a broker answers before it has a view of the cluster.

A broker learns the cluster (live brokers, topics, leaders) from the controller's
UpdateMetadata, kept in its MetadataCache. Between opening its listener and that
first update its cache is empty: after a restart that is seconds, since the new
process registers only once its previous ZooKeeper session expired, and only then
does the controller send it the cluster (the single node's own controller answers
at once, but the window exists there too). An empty cache is not an empty cluster,
so until `MetadataCache.ready` no answer may call a topic unknown: librdkafka takes
UNKNOWN_TOPIC_OR_PARTITION for the truth once a topic's metadata has been stable
for `topic.metadata.propagation.max.ms`, and fails every queued message of the
topic with "Unknown topic". Instead every request that needs the metadata gets an
error each client retries after refreshing its metadata (elsewhere, as often as
not), and nothing is created meanwhile:

- Metadata: no brokers; for v7+ no topics, for v0-6 each named topic with
  LEADER_NOT_AVAILABLE (`kt.broker.handlers.metadata.not_ready` says why); never
  auto-creation.
- Produce, Fetch, ListOffsets, OffsetForLeaderEpoch, DeleteRecords,
  DescribeProducers: NOT_LEADER_OR_FOLLOWER for a partition not hosted here
  (`ReplicaManager.get_partition_or_error`; hosted ones have no role yet: the same).
- FindCoordinator: COORDINATOR_NOT_AVAILABLE, and `__consumer_offsets` /
  `__transaction_state` are not created.
- OffsetCommit, TxnOffsetCommit, OffsetDelete, AddPartitionsToTxn: no partition is
  called unknown; the coordinator answers (NOT_COORDINATOR: it owns nothing yet).
- ListGroups: COORDINATOR_NOT_AVAILABLE.
- DescribeCluster, and DescribeConfigs / AlterConfigs / IncrementalAlterConfigs of
  a topic: LEADER_NOT_AVAILABLE.
- CreateTopics, DeleteTopics, CreatePartitions: NOT_CONTROLLER
  (`ClusterMembership.admin`).

NOT_LEADER_OR_FOLLOWER is what Kafka's ReplicaManager answers for a partition its
metadata knows but this broker does not host; librdkafka, the Java client,
kafka-python, aiokafka and kafkajs all refresh their metadata and retry on it.
COORDINATOR_NOT_AVAILABLE and NOT_COORDINATOR send clients back to
FindCoordinator; NOT_CONTROLLER sends admin clients to look for the controller
again; LEADER_NOT_AVAILABLE is retriable (an InvalidMetadataException) in the Java
client.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kt.protocol import ErrorCode

if TYPE_CHECKING:
    from kt.broker.handlers import RequestContext

#: a partition (or topic id) this broker cannot place yet
NOT_READY_PARTITION = ErrorCode.NOT_LEADER_OR_FOLLOWER
#: a topic-level question this broker cannot answer yet
NOT_READY_TOPIC = ErrorCode.LEADER_NOT_AVAILABLE
#: a coordinator question this broker cannot answer yet
NOT_READY_COORDINATOR = ErrorCode.COORDINATOR_NOT_AVAILABLE


def ready(ctx: RequestContext) -> bool:
    """True once this broker received the controller's view of the cluster."""
    return ctx.services.topics.cache.ready


def not_ready_message(ctx: RequestContext) -> str:
    """The error message of a not-ready answer, for APIs that carry one."""
    return (
        f"broker {ctx.services.node.node_id} has not received the cluster's metadata from the "
        "controller yet (it is starting); retry"
    )


def unknown_partition(ctx: RequestContext) -> ErrorCode:
    """The error for a partition the metadata lacks: UNKNOWN_TOPIC_OR_PARTITION only
    once this broker has the controller's view, NOT_READY_PARTITION before."""
    return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION if ready(ctx) else NOT_READY_PARTITION


def unknown_topic_id(ctx: RequestContext) -> ErrorCode:
    """The error for a topic id the metadata lacks (as `unknown_partition`)."""
    return ErrorCode.UNKNOWN_TOPIC_ID if ready(ctx) else NOT_READY_PARTITION
