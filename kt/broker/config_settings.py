"""Every frozen settings object the composition root hands a service, built from the
BrokerConfig.

This module and the root (kt.broker.broker, kt.broker.server) are the only readers
of the `BrokerConfig` under kt/broker besides kt.broker.config itself
(`tests/unit/test_layering.py` keeps it so): each service receives the few
settings it reads, typed and frozen, so what it depends on is visible in its
constructor and nothing it holds changes under it. Settings that change at run
time (the dynamic broker configs) are rebuilt from the new config by
`Broker.reconfigure` and handed to the services that follow them.
"""

from __future__ import annotations

from dataclasses import replace

from kt.broker.cluster_services import ClusterSettings
from kt.broker.config import BrokerConfig
from kt.broker.controller.controller import ControllerSettings
from kt.broker.groups.coordinator import CoordinatorSettings
from kt.broker.log_cleaner import CleanerSettings
from kt.broker.membership import MembershipSettings
from kt.broker.replication.fetcher import FetcherConfig
from kt.broker.replication.quota import FOLLOWER_RATE, LEADER_RATE, ThrottleRates, parse_rate
from kt.broker.services import HandlerSettings
from kt.broker.settings import (
    DynamicSettings,
    InternalTopicSettings,
    MaintenanceSettings,
    TopicCreationSettings,
)
from kt.broker.transactions.coordinator import TxnSettings


def topic_creation_settings(config: BrokerConfig) -> TopicCreationSettings:
    """What the TopicCreator reads."""
    return TopicCreationSettings(
        auto_create_topics_enable=config.get_bool("auto.create.topics.enable"),
        num_partitions=config.get_int("num.partitions"),
        default_replication_factor=config.get_int("default.replication.factor"),
        in_cluster=config.zookeeper_connect is not None,
    )


def maintenance_settings(config: BrokerConfig) -> MaintenanceSettings:
    """What the periodic log maintenance reads."""
    return MaintenanceSettings(
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


def dynamic_settings(config: BrokerConfig) -> DynamicSettings:
    """The settings that follow the config's current dynamic layers."""
    return DynamicSettings(
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


def throttle_rates(config: BrokerConfig) -> ThrottleRates:
    """The replication throttles' rates: the dynamic layers only (this broker's
    value over the cluster default's), as Kafka's quota managers read them."""
    layers = {**config.dynamic_defaults, **config.dynamic_own}
    return ThrottleRates(parse_rate(layers.get(LEADER_RATE)), parse_rate(layers.get(FOLLOWER_RATE)))


def consumer_offsets_topic(config: BrokerConfig) -> InternalTopicSettings:
    """How `__consumer_offsets` is created (the offsets.topic.* settings)."""
    return InternalTopicSettings(
        num_partitions=config.get_int("offsets.topic.num.partitions"),
        replication_factor=config.get_int("offsets.topic.replication.factor"),
        replication_factor_key="offsets.topic.replication.factor",
        segment_bytes=config.get_int("offsets.topic.segment.bytes"),
        min_insync_replicas=None,
        in_cluster=config.zookeeper_connect is not None,
    )


def transaction_state_topic(config: BrokerConfig) -> InternalTopicSettings:
    """How `__transaction_state` is created (the transaction.state.log.* settings)."""
    return InternalTopicSettings(
        num_partitions=config.get_int("transaction.state.log.num.partitions"),
        replication_factor=config.get_int("transaction.state.log.replication.factor"),
        replication_factor_key="transaction.state.log.replication.factor",
        segment_bytes=config.get_int("transaction.state.log.segment.bytes"),
        min_insync_replicas=config.get_int("transaction.state.log.min.isr"),
        in_cluster=config.zookeeper_connect is not None,
    )


def coordinator_settings(config: BrokerConfig) -> CoordinatorSettings:
    """What the group coordinator reads (its defaults are Kafka's)."""
    num = config.get_int
    return CoordinatorSettings(
        initial_rebalance_delay_ms=num("group.initial.rebalance.delay.ms"),
        min_session_timeout_ms=num("group.min.session.timeout.ms"),
        max_session_timeout_ms=num("group.max.session.timeout.ms"),
        max_group_size=num("group.max.size"),
        offsets_retention_ms=num("offsets.retention.minutes") * 60_000,
        retention_check_interval_ms=num("offsets.retention.check.interval.ms"),
        offset_metadata_max_bytes=num("offset.metadata.max.bytes"),
        offsets_commit_timeout_ms=num("offsets.commit.timeout.ms"),
    )


def txn_settings(config: BrokerConfig) -> TxnSettings:
    """What the transaction coordinator reads."""
    g = config.get_int
    return TxnSettings(
        max_timeout_ms=g("transaction.max.timeout.ms"),
        abort_interval_ms=g("transaction.abort.timed.out.transaction.cleanup.interval.ms"),
        expiration_ms=g("transactional.id.expiration.ms"),
        expiration_interval_ms=g("transaction.remove.expired.transaction.cleanup.interval.ms"),
        write_timeout_ms=g("request.timeout.ms"),
    )


def cleaner_settings(config: BrokerConfig) -> CleanerSettings:
    """What the log cleaner reads."""
    return CleanerSettings(
        enabled=config.get_bool("log.cleaner.enable"),
        threads=config.get_int("log.cleaner.threads"),
        dedupe_buffer_size=config.get_int("log.cleaner.dedupe.buffer.size"),
        load_factor=config.get_float("log.cleaner.io.buffer.load.factor"),
        backoff_ms=config.get_int("log.cleaner.backoff.ms"),
    )


def fetcher_config(config: BrokerConfig) -> FetcherConfig:
    """What the replica fetchers read."""
    g = config.get_int
    return FetcherConfig(
        max_bytes=g("replica.fetch.max.bytes"),
        response_max_bytes=g("replica.fetch.response.max.bytes"),
        wait_max_ms=g("replica.fetch.wait.max.ms"),
        min_bytes=g("replica.fetch.min.bytes"),
        backoff_ms=g("replica.fetch.backoff.ms"),
        socket_timeout_ms=g("replica.socket.timeout.ms"),
    )


def controller_settings(config: BrokerConfig, listener: str) -> ControllerSettings:
    """What the controller reads; `listener` is the inter-broker listener."""
    return ControllerSettings(
        unclean_leader_election_default=config.unclean_leader_election_enable,
        listener=listener,
        auto_leader_rebalance=config.get_bool("auto.leader.rebalance.enable"),
        leader_imbalance_percentage=config.get_int("leader.imbalance.per.broker.percentage"),
        # Kafka requires at least 1 second; a smaller value would spin the timer.
        leader_imbalance_check_interval_s=max(
            1, config.get_int("leader.imbalance.check.interval.seconds")
        ),
    )


def reconfigured_controller(
    settings: ControllerSettings, dynamic: DynamicSettings
) -> ControllerSettings:
    """The controller's settings with the dynamic unclean-election default."""
    return replace(settings, unclean_leader_election_default=dynamic.unclean_leader_election_enable)


def cluster_settings(config: BrokerConfig, listener: str) -> ClusterSettings:
    """What the cluster services read (`listener`: the inter-broker listener)."""
    return ClusterSettings(
        controller=controller_settings(config, listener),
        fetcher=fetcher_config(config),
        inter_broker=config.inter_broker_client,
    )


def membership_settings(config: BrokerConfig) -> MembershipSettings:
    """What the cluster membership reads."""
    return MembershipSettings(
        connection_timeout_ms=config.zookeeper_connection_timeout_ms,
        session_timeout_ms=config.get_int("zookeeper.session.timeout.ms"),
        rack=config.rack,
        controlled_shutdown_enable=config.get_bool("controlled.shutdown.enable"),
        controlled_shutdown_max_retries=config.get_int("controlled.shutdown.max.retries"),
        controlled_shutdown_retry_backoff_ms=config.get_int("controlled.shutdown.retry.backoff.ms"),
    )


def handler_settings(config: BrokerConfig) -> HandlerSettings:
    """What the request handlers read of the static settings."""
    return HandlerSettings(
        auto_create_topics_enable=config.get_bool("auto.create.topics.enable"),
        num_partitions=config.get_int("num.partitions"),
        default_replication_factor=config.get_int("default.replication.factor"),
        delete_topic_enable=config.get_bool("delete.topic.enable"),
        request_timeout_ms=config.get_int("request.timeout.ms"),
    )
