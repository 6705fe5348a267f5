"""Frozen settings objects (those not defined beside their service).

A service receives the few settings it reads as one of these (or as a settings
class beside it), built once from the validated config by the composition root's
builders (`kt.broker.config_settings`), never the config itself: what a service
depends on is then visible in its constructor, and nothing it holds changes under
it. Settings a running broker changes (the dynamic broker configs,
`/config/brokers/<default>` and `/config/brokers/<id>`) are a `DynamicSettings`
snapshot that `Broker.reconfigure` rebuilds whole; services that follow them get
the new values through their own `reconfigure` methods or read the snapshot
through a callable, never a mutable shared object.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class TopicCreationSettings:
    """What the TopicCreator reads (auto-created and internal topics)."""

    auto_create_topics_enable: bool
    num_partitions: int
    default_replication_factor: int
    #: A member of a ZooKeeper cluster (zookeeper.connect set); else the single node,
    #: whose internal topics have one replica whatever their setting says.
    in_cluster: bool


@dataclass(frozen=True, slots=True)
class MaintenanceSettings:
    """What the periodic log maintenance reads (checkpoints, retention passes, ISR
    expiration)."""

    recovery_point_checkpoint_interval_ms: int
    log_start_offset_checkpoint_interval_ms: int
    high_watermark_checkpoint_interval_ms: int
    replica_lag_time_max_ms: int
    initial_task_delay_ms: int
    retention_check_interval_ms: int


@dataclass(frozen=True, slots=True)
class DynamicSettings:
    """The settings a running broker takes from its dynamic broker configs, with
    the layers applied (this broker's over the cluster default over the static
    config); rates in bytes/s, Long.MaxValue meaning unlimited."""

    leader_replication_throttled_rate: int
    follower_replication_throttled_rate: int
    replica_alter_log_dirs_io_max_bytes_per_second: int
    unclean_leader_election_enable: bool
    transaction_partition_verification_enable: bool


@dataclass(frozen=True, slots=True)
class InternalTopicSettings:
    """How a coordinator's internal topic is created (kt.broker.coordinator_log):
    `__consumer_offsets` from the offsets.topic.* settings, `__transaction_state`
    from the transaction.state.log.* ones."""

    num_partitions: int
    replication_factor: int
    #: The setting the replication factor came from (named in a refusal's log line).
    replication_factor_key: str
    segment_bytes: int
    #: min.insync.replicas of the topic (None: the broker's default applies).
    min_insync_replicas: int | None
    #: A member of a ZooKeeper cluster (else the single node: one replica).
    in_cluster: bool
