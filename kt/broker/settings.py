"""Frozen settings objects the composition root builds from the BrokerConfig.

A service receives the few settings it reads as one of these, built once from the
validated config (`kt.broker.config.load_config`), rather than the config itself:
what a service depends on is then visible in its constructor, and nothing it holds
changes under it. Settings a running broker changes (the dynamic broker configs,
`/config/brokers/<default>` and `/config/brokers/<id>`) are a `DynamicSettings`
snapshot that `Broker.reconfigure` replaces whole; services that follow them read
it through a callable, never a mutable shared object.
"""

from __future__ import annotations

from dataclasses import dataclass

from kt.broker.config import BrokerConfig


@dataclass(frozen=True, slots=True)
class TopicCreationSettings:
    """What the TopicCreator reads (auto-created and internal topics)."""

    auto_create_topics_enable: bool
    num_partitions: int
    default_replication_factor: int
    #: A member of a ZooKeeper cluster (zookeeper.connect set); else the single node,
    #: whose internal topics have one replica whatever their setting says.
    in_cluster: bool

    @classmethod
    def from_config(cls, config: BrokerConfig) -> TopicCreationSettings:
        """The settings from the broker's config."""
        return cls(
            auto_create_topics_enable=config.get_bool("auto.create.topics.enable"),
            num_partitions=config.get_int("num.partitions"),
            default_replication_factor=config.get_int("default.replication.factor"),
            in_cluster=config.zookeeper_connect is not None,
        )


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

    @classmethod
    def from_config(cls, config: BrokerConfig) -> MaintenanceSettings:
        """The settings from the broker's config."""
        return cls(
            recovery_point_checkpoint_interval_ms=config.get_int(
                "log.flush.offset.checkpoint.interval.ms"
            ),
            log_start_offset_checkpoint_interval_ms=config.get_int(
                "log.flush.start.offset.checkpoint.interval.ms"
            ),
            high_watermark_checkpoint_interval_ms=config.get_int(
                "replica.high.watermark.checkpoint.interval.ms"
            ),
            replica_lag_time_max_ms=config.get_int("replica.lag.time.max.ms"),
            initial_task_delay_ms=config.get_int("log.initial.task.delay.ms"),
            retention_check_interval_ms=config.get_int("log.retention.check.interval.ms"),
        )


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

    @classmethod
    def from_config(cls, config: BrokerConfig) -> DynamicSettings:
        """The settings from the config's current dynamic layers."""
        return cls(
            leader_replication_throttled_rate=config.leader_replication_throttled_rate,
            follower_replication_throttled_rate=config.follower_replication_throttled_rate,
            replica_alter_log_dirs_io_max_bytes_per_second=(
                config.replica_alter_log_dirs_io_max_bytes_per_second
            ),
            unclean_leader_election_enable=config.unclean_leader_election_enable,
            transaction_partition_verification_enable=(
                config.transaction_partition_verification_enable
            ),
        )


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

    @classmethod
    def consumer_offsets(cls, config: BrokerConfig) -> InternalTopicSettings:
        """`__consumer_offsets`' settings from the broker's config."""
        return cls(
            num_partitions=config.get_int("offsets.topic.num.partitions"),
            replication_factor=config.get_int("offsets.topic.replication.factor"),
            replication_factor_key="offsets.topic.replication.factor",
            segment_bytes=config.get_int("offsets.topic.segment.bytes"),
            min_insync_replicas=None,
            in_cluster=config.zookeeper_connect is not None,
        )

    @classmethod
    def transaction_state(cls, config: BrokerConfig) -> InternalTopicSettings:
        """`__transaction_state`'s settings from the broker's config."""
        return cls(
            num_partitions=config.get_int("transaction.state.log.num.partitions"),
            replication_factor=config.get_int("transaction.state.log.replication.factor"),
            replication_factor_key="transaction.state.log.replication.factor",
            segment_bytes=config.get_int("transaction.state.log.segment.bytes"),
            min_insync_replicas=config.get_int("transaction.state.log.min.isr"),
            in_cluster=config.zookeeper_connect is not None,
        )
