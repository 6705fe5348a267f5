"""The topic config table: key set, parsing, Kafka's validation messages, describing,
and the IncrementalAlterConfigs / OffsetForLeaderEpoch helpers."""

from __future__ import annotations

import pytest

from kt.broker.errors import ResourceError
from kt.broker.handlers.configs import APPEND, DELETE, SET, SUBTRACT, _apply_ops
from kt.broker.topic_configs import (
    TOPIC_CONFIGS,
    ConfigSource,
    ConfigType,
    InvalidConfig,
    describe_topic,
    normalize,
    parse,
    validate_topic_configs,
)
from kt.storage.log_config import LogConfig

KAFKA_4_TOPIC_KEYS = {
    "cleanup.policy", "compression.gzip.level", "compression.lz4.level", "compression.type",
    "compression.zstd.level", "delete.retention.ms", "file.delete.delay.ms", "flush.messages",
    "flush.ms", "follower.replication.throttled.replicas", "index.interval.bytes",
    "leader.replication.throttled.replicas", "local.retention.bytes", "local.retention.ms",
    "max.compaction.lag.ms", "max.message.bytes", "message.timestamp.after.max.ms",
    "message.timestamp.before.max.ms", "message.timestamp.type", "min.cleanable.dirty.ratio",
    "min.compaction.lag.ms", "min.insync.replicas", "preallocate", "remote.log.copy.disable",
    "remote.log.delete.on.disable", "remote.storage.enable", "retention.bytes", "retention.ms",
    "segment.bytes", "segment.index.bytes", "segment.jitter.ms", "segment.ms",
    "unclean.leader.election.enable",
}  # fmt: skip


def test_key_set_is_kafkas() -> None:
    # Kafka 4.0's keys, plus the one of 3.x's deprecated keys that kt accepts and ignores.
    assert set(TOPIC_CONFIGS) == KAFKA_4_TOPIC_KEYS | {"message.format.version"}


def test_defaults_parse_and_match_the_storage_layer() -> None:
    storage = LogConfig().to_properties()
    for name, spec in TOPIC_CONFIGS.items():
        parse(name, spec.default)  # every default passes its own validator
        if name in storage:
            assert normalize(name, spec.default) == normalize(name, storage[name]), name


@pytest.mark.parametrize(
    ("key", "value", "message"),
    [
        ("retention.ms", "soon", "Invalid value soon for configuration retention.ms: "
                                 "Not a number of type LONG"),
        ("retention.ms", "-2", "Value must be at least -1"),
        ("segment.bytes", "13", "Value must be at least 14"),
        ("segment.bytes", str(2**31), "Not a number of type INT"),
        ("min.cleanable.dirty.ratio", "1.5", "Value must be no more than 1.0"),
        ("min.cleanable.dirty.ratio", "x", "Not a number of type DOUBLE"),
        ("preallocate", "yes", "Expected value to be either true or false"),
        ("compression.type", "brotli", "String must be one of: uncompressed, zstd, lz4, "
                                       "snappy, gzip, producer"),
        ("cleanup.policy", "delete,shred",
         "Invalid value shred for configuration cleanup.policy: String must be one of: "
         "compact, delete"),
        ("message.timestamp.type", "Now", "String must be one of: CreateTime, LogAppendTime"),
        ("compression.gzip.level", "0", "Value must be at least 1"),
        ("compression.zstd.level", "23", "Value must be no more than 22"),
    ],
)  # fmt: skip
def test_bad_values(key: str, value: str, message: str) -> None:
    with pytest.raises(InvalidConfig, match=message.replace(".", r"\.")):
        validate_topic_configs({key: value})


def test_good_values_are_normalized() -> None:
    out = validate_topic_configs({"retention.ms": " 1000 ", "cleanup.policy": "compact , delete",
                                  "preallocate": "TRUE", "compression.gzip.level": "-1",
                                  "min.cleanable.dirty.ratio": "1"})  # fmt: skip
    assert out == {"retention.ms": "1000", "cleanup.policy": "compact,delete",
                   "preallocate": "true", "compression.gzip.level": "-1",
                   "min.cleanable.dirty.ratio": "1.0"}  # fmt: skip


def test_set_level_errors() -> None:
    with pytest.raises(InvalidConfig, match=r"Unknown topic config name: log\.retention\.ms"):
        validate_topic_configs({"log.retention.ms": "5"})
    with pytest.raises(InvalidConfig, match="Null value not supported for topic configs: a,b"):
        validate_topic_configs({"a": None, "b": None})
    with pytest.raises(InvalidConfig, match=r"min.compaction.lag.ms \(10\) > max.compaction"):
        validate_topic_configs({"min.compaction.lag.ms": "10", "max.compaction.lag.ms": "5"})
    with pytest.raises(InvalidConfig, match="Tiered Storage"):
        validate_topic_configs({"remote.storage.enable": "true"})
    assert validate_topic_configs({}) == {}


def test_describe_sources_and_synonyms() -> None:
    given = {"log.retention.hours": "24", "log.segment.bytes": "2048"}
    entries = {e.name: e for e in describe_topic({"segment.bytes": "4096"}, given)}
    assert set(entries) == KAFKA_4_TOPIC_KEYS | {"message.format.version"}
    mfv = entries["message.format.version"]  # Kafka 3.8's default, never used
    assert (mfv.value, mfv.source) == ("3.0-IV1", ConfigSource.DEFAULT_CONFIG)
    seg = entries["segment.bytes"]
    assert (seg.value, seg.source) == ("4096", ConfigSource.DYNAMIC_TOPIC_CONFIG)
    assert [(n, s) for n, _, s in seg.synonyms] == [
        ("segment.bytes", ConfigSource.DYNAMIC_TOPIC_CONFIG),
        ("log.segment.bytes", ConfigSource.STATIC_BROKER_CONFIG),
        ("log.segment.bytes", ConfigSource.DEFAULT_CONFIG),
    ]
    ret = entries["retention.ms"]
    assert (ret.value, ret.source) == (str(24 * 3_600_000), ConfigSource.STATIC_BROKER_CONFIG)
    assert ret.synonyms[0] == ("log.retention.hours", "24", ConfigSource.STATIC_BROKER_CONFIG)
    pol = entries["cleanup.policy"]
    assert (pol.value, pol.source, pol.config_type) == ("delete", ConfigSource.DEFAULT_CONFIG,
                                                        ConfigType.LIST)  # fmt: skip
    assert entries["remote.storage.enable"].synonyms == ()
    assert all(e.documentation for e in entries.values())


def test_incremental_ops() -> None:
    cur = {"retention.ms": "5", "cleanup.policy": "compact"}
    assert _apply_ops(cur, [("retention.ms", DELETE, None)]) == {"cleanup.policy": "compact"}
    assert _apply_ops(cur, [("segment.ms", SET, "9")])["segment.ms"] == "9"
    assert _apply_ops(cur, [("cleanup.policy", APPEND, "delete,compact")])["cleanup.policy"] \
        == "compact,delete"  # fmt: skip
    assert _apply_ops({}, [("cleanup.policy", APPEND, "compact")])["cleanup.policy"] \
        == "delete,compact"  # appends to the default  # fmt: skip
    assert _apply_ops(cur, [("cleanup.policy", SUBTRACT, "compact")])["cleanup.policy"] == ""
    with pytest.raises(ResourceError, match=r"Can't APPEND to key retention\.ms because its type"):
        _apply_ops(cur, [("retention.ms", APPEND, "1")])
