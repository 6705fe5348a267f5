"""Dynamic broker configs: Kafka's checks and their order, the layering with synonyms,
stored entries a broker ignores, and the typed accessors on BrokerConfig."""

from __future__ import annotations

import pytest

from kt.broker import dynamic_config as dyn
from kt.broker.config import load_config
from kt.broker.errors import InvalidRequestError
from kt.storage.log_config import LONG_MAX


@pytest.mark.parametrize(
    ("props", "per_broker", "message"),
    [
        ({"log.retention.hours": "1"}, True,
         "Cannot update these configs dynamically: Set(log.retention.hours)"),
        ({"num.partitions": "1", "log.dirs": "/x", "node.id": "3", "broker.id": "3",
          "listeners": "PLAINTEXT://:1", "offsets.retention.minutes": "1"}, True,
         "Cannot update these configs dynamically: HashSet(broker.id, log.dirs, node.id, "
         "num.partitions, offsets.retention.minutes)"),
        # static broker settings kt reads at startup only, as Kafka does
        ({"replication.quota.window.num": "2"}, True,
         "Cannot update these configs dynamically: Set(replication.quota.window.num)"),
        ({"ssl.keystore.location": "/k"}, True,
         "These security configs can be dynamically updated only per-listener using the "
         "listener prefix: Set(ssl.keystore.location)"),
        ({"log.segment.bytes": "13"}, True,
         "Invalid value 13 for configuration log.segment.bytes: Value must be at least 14"),
        ({"leader.replication.throttled.rate": "-1"}, False,
         "Invalid value -1 for configuration leader.replication.throttled.rate: Value must "
         "be at least 0"),
        ({"log.cleanup.policy": "shred"}, False,
         "Invalid value shred for configuration log.cleanup.policy: String must be one of: "
         "compact, delete"),
        ({"listeners": "PLAINTEXT://:1"}, False,
         "Cannot update these configs at default cluster level, broker id must be specified: "
         "Set(listeners)"),
        ({"listener.name.plaintext.ssl.keystore.location": "/k"}, False,
         "Cannot update these configs at default cluster level, broker id must be specified: "
         "Set(listener.name.plaintext.ssl.keystore.location)"),
    ],
)  # fmt: skip
def test_refusals_in_kafkas_order(props: dict[str, str], per_broker: bool, message: str) -> None:
    with pytest.raises(InvalidRequestError) as exc:
        dyn.validate_change(props, per_broker)
    assert str(exc.value) == message


def test_kafka_dynamic_keys_kt_cannot_apply_are_refused_with_a_note() -> None:
    for key in ("num.io.threads", "log.cleaner.threads", "compression.type", "listeners"):
        with pytest.raises(InvalidRequestError) as exc:
            dyn.validate_change({key: "1"}, per_broker=True)
        assert str(exc.value).startswith(f"Cannot update these configs dynamically: Set({key}) (")


def test_accepted_changes() -> None:
    dyn.validate_change({k: v for k, v in {
        "log.retention.ms": "1000", "message.max.bytes": "2048", "min.insync.replicas": "2",
        "unclean.leader.election.enable": "true", "log.cleanup.policy": "compact,delete",
        "follower.replication.throttled.rate": "100",
        "replica.alter.log.dirs.io.max.bytes.per.second": "5", "my.custom.thing": "x",
    }.items()}, per_broker=False)  # fmt: skip
    assert dyn.LOG_KEYS["log.retention.ms"] == "retention.ms"
    assert dyn.LOG_KEYS["message.max.bytes"] == "max.message.bytes"
    assert "log.message.format.version" not in dyn.KT_DYNAMIC


def test_overlay_hides_synonyms_below() -> None:
    props = {"log.retention.hours": "24", "log.roll.hours": "1"}
    dyn.overlay(props, {"log.retention.ms": "5"})
    assert props == {"log.roll.hours": "1", "log.retention.ms": "5"}
    dyn.overlay(props, {"log.retention.minutes": "2"})
    assert props == {"log.roll.hours": "1", "log.retention.minutes": "2"}


def test_stored_entries_a_broker_cannot_use_are_dropped() -> None:
    stored = {"num.partitions": "3", "log.retention.ms": "x", "listeners": "P://:1",
              "message.max.bytes": "100", "custom": "y"}  # fmt: skip
    assert dyn.usable(stored, False, "default") == {"message.max.bytes": "100", "custom": "y"}


def test_precedence_and_typed_accessors() -> None:
    cfg = load_config(overrides={"log.retention.hours": "24", "log.segment.bytes": "2048"})
    assert cfg.effective_log_config().retention_ms == 24 * 3_600_000
    assert cfg.replica_alter_log_dirs_io_max_bytes_per_second == LONG_MAX  # unlimited
    assert not cfg.unclean_leader_election_enable
    static = cfg
    cfg = cfg.with_dynamic(
        {"log.retention.ms": "1000", "replica.alter.log.dirs.io.max.bytes.per.second": "7",
         "unclean.leader.election.enable": "true"},
        {"log.retention.ms": "2000", "log.segment.bytes": "4096", "num.io.threads": "9"},
    )  # fmt: skip
    # a new config: the one loaded is unchanged (immutable)
    assert static.dynamic_defaults == {} and not static.unclean_leader_election_enable
    assert static.changed_keys(cfg) == {
        "log.retention.ms", "log.retention.hours", "log.segment.bytes",
        "replica.alter.log.dirs.io.max.bytes.per.second", "unclean.leader.election.enable",
    }  # fmt: skip
    log_cfg = cfg.effective_log_config()
    assert (log_cfg.retention_ms, log_cfg.segment_bytes) == (2000, 4096)
    assert cfg.replica_alter_log_dirs_io_max_bytes_per_second == 7
    assert cfg.unclean_leader_election_enable
    assert "num.io.threads" not in cfg.dynamic_own  # not applicable: ignored
    # the per-broker value goes: the cluster default shows through
    cfg = cfg.with_dynamic(cfg.dynamic_defaults, {})
    assert cfg.effective_log_config().retention_ms == 1000
    assert cfg.effective_log_config().segment_bytes == 2048
    cfg = cfg.with_dynamic({}, {})
    assert cfg.effective_log_config().retention_ms == 24 * 3_600_000
