"""The frozen settings objects the composition root builds from the config, and the
one step (Broker.reconfigure) that replaces the dynamic ones (that test starts the
in-process broker on purpose: its subject is the root and the services it wires)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
from handler_harness import InProcessBroker

from kt.broker.config import load_config
from kt.broker.settings import (
    DynamicSettings,
    InternalTopicSettings,
    MaintenanceSettings,
    TopicCreationSettings,
)
from kt.storage.log_config import LONG_MAX


def test_static_settings_come_from_the_config_and_are_frozen() -> None:
    cfg = load_config(None, {
        "log.dirs": "/nonexistent", "num.partitions": "7", "default.replication.factor": "2",
        "auto.create.topics.enable": "false", "replica.lag.time.max.ms": "1234",
        "log.retention.check.interval.ms": "999",
    })  # fmt: skip
    creation = TopicCreationSettings.from_config(cfg)
    assert creation == TopicCreationSettings(
        auto_create_topics_enable=False,
        num_partitions=7,
        default_replication_factor=2,
        in_cluster=False,
    )
    maintenance = MaintenanceSettings.from_config(cfg)
    assert maintenance.replica_lag_time_max_ms == 1234
    assert maintenance.retention_check_interval_ms == 999
    with pytest.raises(dataclasses.FrozenInstanceError):
        creation.num_partitions = 1  # type: ignore[misc]
    in_zk = load_config(None, {"log.dirs": "/x", "zookeeper.connect": "127.0.0.1:2181"})
    assert TopicCreationSettings.from_config(in_zk).in_cluster


def test_dynamic_settings_follow_the_dynamic_layers() -> None:
    cfg = load_config(None, {"log.dirs": "/nonexistent"})
    before = DynamicSettings.from_config(cfg)
    assert before.replica_alter_log_dirs_io_max_bytes_per_second == LONG_MAX
    assert before.transaction_partition_verification_enable
    cfg.apply_dynamic(
        {"replica.alter.log.dirs.io.max.bytes.per.second": "1000"},
        {"transaction.partition.verification.enable": "false"},
    )
    after = DynamicSettings.from_config(cfg)
    assert after.replica_alter_log_dirs_io_max_bytes_per_second == 1000
    assert not after.transaction_partition_verification_enable
    # The earlier snapshot did not change under whoever holds it.
    assert before.replica_alter_log_dirs_io_max_bytes_per_second == LONG_MAX


def test_reconfigure_replaces_the_snapshot_the_services_read(tmp_path: Path) -> None:
    b = InProcessBroker(tmp_path)
    try:
        first = b.broker.dynamic
        assert b.broker.alter_log_dirs_rate() is None
        assert b.broker.replica_manager.txn_verification_enabled
        b.broker.reconfigure(
            {"replica.alter.log.dirs.io.max.bytes.per.second": "2048"},
            {"transaction.partition.verification.enable": "false"},
        )
        assert b.broker.dynamic is not first
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
    offsets = InternalTopicSettings.consumer_offsets(cfg)
    assert (offsets.num_partitions, offsets.replication_factor) == (5, 2)
    assert offsets.replication_factor_key == "offsets.topic.replication.factor"
    assert offsets.min_insync_replicas is None and offsets.in_cluster
    txn = InternalTopicSettings.transaction_state(cfg)
    assert (txn.num_partitions, txn.min_insync_replicas) == (3, 2)
    assert txn.replication_factor_key == "transaction.state.log.replication.factor"
