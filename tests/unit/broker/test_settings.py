"""The frozen settings objects the composition root builds from the config, and the
one step (Broker.reconfigure) that replaces the dynamic ones (that test starts the
in-process broker on purpose: its subject is the root and the services it wires)."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest
from handler_harness import InProcessBroker

from kt.broker.config import load_config
from kt.broker.config_settings import (
    consumer_offsets_topic,
    dynamic_settings,
    handler_settings,
    maintenance_settings,
    membership_settings,
    topic_creation_settings,
    transaction_state_topic,
)
from kt.broker.controller.channel import ControllerChannel
from kt.broker.controller.controller import KafkaController
from kt.broker.settings import TopicCreationSettings
from kt.storage.log_config import LONG_MAX


def test_static_settings_come_from_the_config_and_are_frozen() -> None:
    cfg = load_config(None, {
        "log.dirs": "/nonexistent", "num.partitions": "7", "default.replication.factor": "2",
        "auto.create.topics.enable": "false", "replica.lag.time.max.ms": "1234",
        "log.retention.check.interval.ms": "999",
    })  # fmt: skip
    creation = topic_creation_settings(cfg)
    assert creation == TopicCreationSettings(
        auto_create_topics_enable=False,
        num_partitions=7,
        default_replication_factor=2,
        in_cluster=False,
    )
    maintenance = maintenance_settings(cfg)
    assert maintenance.replica_lag_time_max_ms == 1234
    assert maintenance.retention_check_interval_ms == 999
    with pytest.raises(dataclasses.FrozenInstanceError):
        creation.num_partitions = 1  # type: ignore[misc]
    in_zk = load_config(None, {"log.dirs": "/x", "zookeeper.connect": "127.0.0.1:2181"})
    assert topic_creation_settings(in_zk).in_cluster


def test_handler_and_membership_settings_come_from_the_config() -> None:
    cfg = load_config(None, {
        "log.dirs": "/nonexistent", "num.partitions": "3", "delete.topic.enable": "false",
        "request.timeout.ms": "4321", "zookeeper.session.timeout.ms": "7000",
        "controlled.shutdown.max.retries": "5", "broker.rack": "r1",
    })  # fmt: skip
    handlers = handler_settings(cfg)
    assert (handlers.num_partitions, handlers.default_replication_factor) == (3, 1)
    assert not handlers.delete_topic_enable and handlers.auto_create_topics_enable
    assert handlers.request_timeout_ms == 4321
    member = membership_settings(cfg)
    # zookeeper.connection.timeout.ms unset: the session timeout, as Kafka
    assert (member.connection_timeout_ms, member.session_timeout_ms) == (7000, 7000)
    assert (member.rack, member.controlled_shutdown_max_retries) == ("r1", 5)
    assert member.controlled_shutdown_enable


def test_the_broker_config_is_immutable() -> None:
    cfg = load_config(None, {"log.dirs": "/nonexistent"})
    with pytest.raises(dataclasses.FrozenInstanceError):
        cfg.dynamic_own = {"x": "1"}  # type: ignore[misc]
    newer = cfg.with_dynamic({}, {"transaction.partition.verification.enable": "false"})
    assert newer is not cfg and cfg.dynamic_own == {}
    assert cfg.changed_keys(newer) == {"transaction.partition.verification.enable"}


def test_dynamic_settings_follow_the_dynamic_layers() -> None:
    cfg = load_config(None, {"log.dirs": "/nonexistent"})
    before = dynamic_settings(cfg)
    assert before.replica_alter_log_dirs_io_max_bytes_per_second == LONG_MAX
    assert before.transaction_partition_verification_enable
    cfg = cfg.with_dynamic(
        {"replica.alter.log.dirs.io.max.bytes.per.second": "1000"},
        {"transaction.partition.verification.enable": "false"},
    )
    after = dynamic_settings(cfg)
    assert after.replica_alter_log_dirs_io_max_bytes_per_second == 1000
    assert not after.transaction_partition_verification_enable
    # The earlier snapshot did not change under whoever holds it.
    assert before.replica_alter_log_dirs_io_max_bytes_per_second == LONG_MAX


def test_reconfigure_replaces_the_snapshot_the_services_read(tmp_path: Path) -> None:
    b = InProcessBroker(tmp_path)
    try:
        first, loaded = b.broker.dynamic, b.broker.config
        assert b.broker.alter_log_dirs_rate() is None
        assert b.broker.replica_manager.txn_verification_enabled
        b.broker.reconfigure(
            {"replica.alter.log.dirs.io.max.bytes.per.second": "2048"},
            {"transaction.partition.verification.enable": "false"},
        )
        assert b.broker.dynamic is not first
        # a new config, which handlers read; the loaded one is unchanged
        assert b.broker.config is not loaded and loaded.dynamic_defaults == {}
        assert b.broker.services.broker_config() is b.broker.config
        assert b.broker.config.dynamic_own == {"transaction.partition.verification.enable": "false"}
        assert b.broker.alter_log_dirs_rate() == 2048.0
        assert not b.broker.replica_manager.txn_verification_enabled
        b.broker.reconfigure({}, {})
        assert b.broker.alter_log_dirs_rate() is None
        assert b.broker.replica_manager.txn_verification_enabled
    finally:
        b.close()


def test_internal_topic_settings_per_topic() -> None:
    cfg = load_config(None, {
        "log.dirs": "/nonexistent", "offsets.topic.num.partitions": "5",
        "offsets.topic.replication.factor": "2", "transaction.state.log.num.partitions": "3",
        "transaction.state.log.min.isr": "2", "zookeeper.connect": "127.0.0.1:2181",
    })  # fmt: skip
    offsets = consumer_offsets_topic(cfg)
    assert (offsets.num_partitions, offsets.replication_factor) == (5, 2)
    assert offsets.replication_factor_key == "offsets.topic.replication.factor"
    assert offsets.min_insync_replicas is None and offsets.in_cluster
    txn = transaction_state_topic(cfg)
    assert (txn.num_partitions, txn.min_insync_replicas) == (3, 2)
    assert txn.replication_factor_key == "transaction.state.log.replication.factor"


def test_the_controller_takes_new_settings_whole() -> None:
    # Frozen settings: a dynamic change arrives as a new snapshot through reconfigure,
    # and turning the unclean-election default on queues Kafka's
    # UncleanLeaderElectionEnable event (once; turning it off queues nothing).
    zk: Any = None
    controller = KafkaController(1, zk, lambda: ControllerChannel(lambda broker_id: zk))
    off = controller.settings
    with pytest.raises(dataclasses.FrozenInstanceError):
        off.unclean_leader_election_default = True  # type: ignore[misc]
    on = dataclasses.replace(off, unclean_leader_election_default=True)
    controller.reconfigure(on)
    assert controller.settings is on
    assert controller._events.qsize() == 1
    controller.reconfigure(dataclasses.replace(on))
    controller.reconfigure(off)
    assert controller.settings is off and controller._events.qsize() == 1
