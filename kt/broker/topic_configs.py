"""Kafka's topic-level config keys: types, defaults, validators and broker synonyms.

One table serves CreateTopics (validating the configs of new topics),
DescribeConfigs (every key with its value, source and synonyms) and
AlterConfigs / IncrementalAlterConfigs (validating the new override set).
The key set is Apache Kafka 4.0's plus `message.format.version`, which Kafka
3.x still accepts (validated as a version, then ignored with a warning since the
inter-broker protocol is 3.0 or later; KIP-724 removed it in 4.0). Values are
validated with Kafka's rules and error texts (ConfigDef's "Invalid value X for
configuration K: ..."), then once more by the storage layer's `LogConfig`, which
is what the partition logs actually run with.
"""

from __future__ import annotations

import enum
import math
from collections.abc import Mapping
from dataclasses import dataclass

from kt.storage.log_config import LogConfig

LONG_MAX = 2**63 - 1
LONG_MIN = -(2**63)
INT_MAX = 2**31 - 1
INT_MIN = -(2**31)


class ConfigType(enum.IntEnum):
    """DescribeConfigs' config_type (v3+)."""

    UNKNOWN = 0
    BOOLEAN = 1
    STRING = 2
    INT = 3
    SHORT = 4
    LONG = 5
    DOUBLE = 6
    LIST = 7
    CLASS = 8
    PASSWORD = 9


class ConfigSource(enum.IntEnum):
    """Where a described value comes from (DescribeConfigs v1+ config_source)."""

    UNKNOWN = 0
    DYNAMIC_TOPIC_CONFIG = 1
    DYNAMIC_BROKER_CONFIG = 2
    DYNAMIC_DEFAULT_BROKER_CONFIG = 3
    STATIC_BROKER_CONFIG = 4
    DEFAULT_CONFIG = 5
    DYNAMIC_BROKER_LOGGER_CONFIG = 6


class InvalidConfig(ValueError):
    """A topic config set Kafka would refuse with INVALID_CONFIG."""


@dataclass(frozen=True, slots=True)
class TopicConfigKey:
    """One topic config key."""

    name: str
    type: ConfigType
    default: str
    doc: str
    # Broker keys that set the cluster-wide default, highest precedence first, with
    # the factor that turns their unit into the topic key's (hours -> ms, ...).
    synonyms: tuple[tuple[str, int], ...] = ()
    low: float | None = None
    high: float | None = None
    choices: tuple[str, ...] = ()
    # gzip's level also accepts -1 (the library default) outside its range.
    also: tuple[int, ...] = ()


#: Deprecated in Kafka 3.x, removed in 4.0: accepted (validated) and ignored.
MESSAGE_FORMAT_VERSION = "message.format.version"
MESSAGE_FORMAT_VERSION_DEFAULT = "3.0-IV1"
#: Kafka 3.8's MetadataVersion releases with their last IV number (None: the release
#: has no IV suffix); `message.format.version` must name one of them.
_METADATA_RELEASES: dict[str, int | None] = {
    "0.8.0": None, "0.8.1": None, "0.8.2": None, "0.9.0": None,
    "0.10.0": 1, "0.10.1": 2, "0.10.2": 0, "0.11.0": 2,
    "1.0": 0, "1.1": 0, "2.0": 1, "2.1": 2, "2.2": 1, "2.3": 1, "2.4": 1, "2.5": 0,
    "2.6": 0, "2.7": 2, "2.8": 1, "3.0": 1, "3.1": 0, "3.2": 0, "3.3": 3, "3.4": 0,
    "3.5": 2, "3.6": 2, "3.7": 4, "3.8": 0,
}  # fmt: skip


def metadata_version_problem(text: str) -> str | None:
    """Why `text` is not a Kafka 3.8 MetadataVersion (fromVersionString: a release,
    a release-IVn, or either with a hotfix number after it), or None."""
    parts = text.split(".")
    segments = 3 if text.startswith("0.") else 2
    key = text if segments >= len(parts) else ".".join(parts[:segments])
    release, _, iv = key.partition("-")
    if release in _METADATA_RELEASES:
        last = _METADATA_RELEASES[release]
        if not iv or (last is not None and iv in {f"IV{n}" for n in range(last + 1)}):
            return None
    return f"Version {text} is not a valid version"


def record_format_before_v2(text: str) -> bool:
    """Whether a valid message.format.version predates the v2 record format (0.11.0),
    the case Kafka warns about."""
    parts = text.split(".")
    return parts[0] == "0" and len(parts) > 1 and parts[1].split("-")[0] in ("8", "9", "10")


_HOUR = 3_600_000
_MINUTE = 60_000
_D = LogConfig()


def _k(
    name: str,
    typ: ConfigType,
    default: object,
    doc: str,
    synonyms: tuple[str | tuple[str, int], ...] = (),
    **kw: object,
) -> TopicConfigKey:
    syn = tuple((s, 1) if isinstance(s, str) else s for s in synonyms)
    text = str(default).lower() if isinstance(default, bool) else str(default)
    return TopicConfigKey(name, typ, text, doc, syn, **kw)  # type: ignore[arg-type]


B = ConfigType.BOOLEAN
S = ConfigType.STRING
INT = ConfigType.INT
L = ConfigType.LONG
D = ConfigType.DOUBLE
LS = ConfigType.LIST

TOPIC_CONFIGS: dict[str, TopicConfigKey] = {
    k.name: k
    for k in (
        _k("cleanup.policy", LS, _D.cleanup_policy,
           "How old segments are removed: delete (by time and size), compact (keep the "
           "last record per key), or both.",
           ("log.cleanup.policy",), choices=("compact", "delete")),
        _k("compression.gzip.level", INT, -1, "The level used when compression.type is gzip.",
           ("compression.gzip.level",), low=1, high=9, also=(-1,)),
        _k("compression.lz4.level", INT, 9, "The level used when compression.type is lz4.",
           ("compression.lz4.level",), low=1, high=17),
        _k("compression.type", S, "producer",
           "The compression of stored batches; 'producer' keeps the producer's codec.",
           ("compression.type",),
           choices=("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer")),
        _k("compression.zstd.level", INT, 3, "The level used when compression.type is zstd.",
           ("compression.zstd.level",), low=-131072, high=22),
        _k("delete.retention.ms", L, _D.delete_retention_ms,
           "How long tombstones stay readable in a compacted topic.",
           ("log.cleaner.delete.retention.ms",), low=0),
        _k("file.delete.delay.ms", L, _D.file_delete_delay_ms,
           "How long a deleted segment's files are kept before they are unlinked.",
           ("log.segment.delete.delay.ms",), low=0),
        _k("flush.messages", L, _D.flush_messages,
           "fsync the log after this many messages.", ("log.flush.interval.messages",),
           low=1),
        _k("flush.ms", L, _D.flush_ms, "fsync the log after this many milliseconds.",
           ("log.flush.interval.ms", "log.flush.scheduler.interval.ms"), low=0),
        _k("follower.replication.throttled.replicas", LS, "",
           "Replicas (partition:broker, or *) whose follower replication is throttled."),
        _k("index.interval.bytes", INT, _D.index_interval_bytes,
           "Bytes of records between two offset index entries.",
           ("log.index.interval.bytes",), low=0),
        _k("leader.replication.throttled.replicas", LS, "",
           "Replicas (partition:broker, or *) whose leader replication is throttled."),
        _k("local.retention.bytes", L, -2,
           "Bytes kept locally with tiered storage (-2: retention.bytes).",
           ("log.local.retention.bytes",), low=-2),
        _k("local.retention.ms", L, -2,
           "Milliseconds kept locally with tiered storage (-2: retention.ms).",
           ("log.local.retention.ms",), low=-2),
        _k("max.compaction.lag.ms", L, _D.max_compaction_lag_ms,
           "The longest a record stays ineligible for compaction.",
           ("log.cleaner.max.compaction.lag.ms",), low=1),
        _k("max.message.bytes", INT, _D.max_message_bytes,
           "The largest record batch the topic accepts.", ("message.max.bytes",), low=0),
        _k("message.format.version", S, MESSAGE_FORMAT_VERSION_DEFAULT,
           "Deprecated and ignored (the v2 record format is always used).",
           ("log.message.format.version",)),
        _k("message.timestamp.after.max.ms", L, _D.message_timestamp_after_max_ms,
           "How far in the future a CreateTime timestamp may be.",
           ("log.message.timestamp.after.max.ms",), low=0),
        _k("message.timestamp.before.max.ms", L, _D.message_timestamp_before_max_ms,
           "How far in the past a CreateTime timestamp may be.",
           ("log.message.timestamp.before.max.ms",), low=0),
        _k("message.timestamp.type", S, _D.message_timestamp_type,
           "CreateTime (the producer's timestamps) or LogAppendTime (the broker's clock).",
           ("log.message.timestamp.type",), choices=("CreateTime", "LogAppendTime")),
        _k("min.cleanable.dirty.ratio", D, _D.min_cleanable_dirty_ratio,
           "The dirty fraction of the log above which the cleaner compacts it.",
           ("log.cleaner.min.cleanable.ratio",), low=0, high=1),
        _k("min.compaction.lag.ms", L, _D.min_compaction_lag_ms,
           "The least time a record stays uncompacted.",
           ("log.cleaner.min.compaction.lag.ms",), low=0),
        _k("min.insync.replicas", INT, _D.min_insync_replicas,
           "In-sync replicas an acks=all write needs.", ("min.insync.replicas",), low=1),
        _k("preallocate", B, _D.preallocate, "Preallocate segment files on creation.",
           ("log.preallocate",)),
        _k("remote.log.copy.disable", B, False,
           "Stop copying segments to tiered storage (the tiered data stays readable)."),
        _k("remote.log.delete.on.disable", B, False,
           "Delete the tiered data when tiered storage is turned off for the topic."),
        _k("remote.storage.enable", B, False, "Keep old segments in tiered storage."),
        _k("retention.bytes", L, _D.retention_bytes,
           "The size a partition may grow to before old segments go (-1: no limit).",
           ("log.retention.bytes",)),
        _k("retention.ms", L, _D.retention_ms,
           "How long records are kept (-1: forever).",
           ("log.retention.ms", ("log.retention.minutes", _MINUTE),
            ("log.retention.hours", _HOUR)), low=-1),
        _k("segment.bytes", INT, _D.segment_bytes, "The size of one segment file.",
           ("log.segment.bytes",), low=14),
        _k("segment.index.bytes", INT, _D.segment_index_bytes,
           "The size of a segment's offset and time indexes.",
           ("log.index.size.max.bytes",), low=4),
        _k("segment.jitter.ms", L, _D.segment_jitter_ms,
           "The largest random jitter subtracted from segment.ms.",
           ("log.roll.jitter.ms", ("log.roll.jitter.hours", _HOUR)), low=0),
        _k("segment.ms", L, _D.segment_ms,
           "Roll a new segment after this long even if the active one is not full.",
           ("log.roll.ms", ("log.roll.hours", _HOUR)), low=1),
        _k("unclean.leader.election.enable", B, _D.unclean_leader_election_enable,
           "Let an out-of-sync replica become leader (losing data) as a last resort.",
           ("unclean.leader.election.enable",)),
    )
}  # fmt: skip

LIST_KEYS = frozenset(k.name for k in TOPIC_CONFIGS.values() if k.type is ConfigType.LIST)


def _bad(key: str, value: object, why: str) -> InvalidConfig:
    return InvalidConfig(f"Invalid value {value} for configuration {key}: {why}")


def parse(key: str, value: str) -> object:
    """The typed value of `key`=`value` as Kafka's ConfigDef parses it, validated
    (InvalidConfig with Kafka's message otherwise)."""
    spec = TOPIC_CONFIGS[key]
    text = value.strip()
    typ = spec.type
    parsed: object
    if typ is ConfigType.BOOLEAN:
        if text.lower() not in ("true", "false"):
            raise _bad(key, value, "Expected value to be either true or false")
        return text.lower() == "true"
    if typ in (ConfigType.INT, ConfigType.LONG):
        lo, hi = (INT_MIN, INT_MAX) if typ is ConfigType.INT else (LONG_MIN, LONG_MAX)
        try:
            parsed = int(text, 10)
        except ValueError:
            parsed = None
        if parsed is None or not lo <= parsed <= hi:
            raise _bad(key, value, f"Not a number of type {typ.name}")
    elif typ is ConfigType.DOUBLE:
        try:
            parsed = float(text)
        except ValueError:
            raise _bad(key, value, "Not a number of type DOUBLE") from None
        if math.isnan(parsed):
            raise _bad(key, value, "Not a number of type DOUBLE")
    elif typ is ConfigType.LIST:
        items = [] if not text else [p.strip() for p in text.split(",")]
        for item in items:
            if spec.choices and item not in spec.choices:
                raise _bad(key, item, "String must be one of: " + ", ".join(spec.choices))
        return items
    else:
        if key == MESSAGE_FORMAT_VERSION:
            problem = metadata_version_problem(text)
            if problem is not None:
                raise _bad(key, text, problem)
        if spec.choices and text not in spec.choices:
            raise _bad(key, text, "String must be one of: " + ", ".join(spec.choices))
        return text
    assert isinstance(parsed, int | float)
    if parsed in spec.also:
        return parsed
    if spec.low is not None and parsed < spec.low:
        raise _bad(key, value, f"Value must be at least {_show(spec.low, typ)}")
    if spec.high is not None and parsed > spec.high:
        raise _bad(key, value, f"Value must be no more than {_show(spec.high, typ)}")
    return parsed


def _show(bound: float, typ: ConfigType) -> str:
    if typ is ConfigType.DOUBLE:
        return repr(float(bound))
    return str(int(bound))


def to_string(key: str, value: object) -> str:
    """A parsed value as Kafka prints it (ConfigDef.convertToString)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list):
        return ",".join(value)
    if isinstance(value, float):
        return repr(value)
    return str(value)


def normalize(key: str, value: str) -> str:
    """`value` parsed and printed back (e.g. ' 100 ' -> '100')."""
    return to_string(key, parse(key, value))


def validate_topic_configs(configs: Mapping[str, str | None]) -> dict[str, str]:
    """Check a topic's complete override set as Kafka's LogConfig.validate does:
    null values, unknown names, each value, then cross-key rules. Returns the
    overrides with normalized values; raises InvalidConfig."""
    nulls = [k for k, v in configs.items() if v is None]
    if nulls:
        raise InvalidConfig("Null value not supported for topic configs: " + ",".join(nulls))
    for name in configs:
        if name not in TOPIC_CONFIGS:
            raise InvalidConfig(f"Unknown topic config name: {name}")
    out: dict[str, str] = {}
    parsed: dict[str, object] = {}
    for name, value in configs.items():
        assert value is not None
        parsed[name] = parse(name, value)
        out[name] = to_string(name, parsed[name])
    min_lag = int(parsed.get("min.compaction.lag.ms", _D.min_compaction_lag_ms))  # type: ignore[call-overload]
    max_lag = int(parsed.get("max.compaction.lag.ms", _D.max_compaction_lag_ms))  # type: ignore[call-overload]
    if min_lag > max_lag:
        raise InvalidConfig(
            f"conflict topic config setting min.compaction.lag.ms ({min_lag}) > "
            f"max.compaction.lag.ms ({max_lag})"
        )
    if parsed.get("remote.storage.enable") is True:
        raise InvalidConfig(
            "Tiered Storage functionality is disabled in the broker. Topic cannot be "
            "configured with remote log storage."
        )
    if "cleanup.policy" in parsed and not parsed["cleanup.policy"]:
        raise _bad("cleanup.policy", configs["cleanup.policy"],
                   "String must be one of: compact, delete")  # fmt: skip
    # The storage layer has the last word: its LogConfig is what the logs run with.
    try:
        LogConfig().with_overrides(out)
    except Exception as exc:
        raise InvalidConfig(str(exc)) from None
    return out


def list_parts(key: str, current: str | None) -> list[str]:
    """A LIST key's current items (its default when not overridden), for
    IncrementalAlterConfigs APPEND / SUBTRACT."""
    value = TOPIC_CONFIGS[key].default if current is None else current
    return [p.strip() for p in value.split(",") if p.strip()]


# --- describing ---------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class DescribedConfig:
    """One config entry as DescribeConfigs reports it."""

    name: str
    value: str | None
    source: ConfigSource
    read_only: bool = False
    is_sensitive: bool = False
    synonyms: tuple[tuple[str, str | None, ConfigSource], ...] = ()
    config_type: ConfigType = ConfigType.UNKNOWN
    documentation: str | None = None


def describe_topic(
    overrides: Mapping[str, str],
    broker_given: Mapping[str, str],
    dynamic_defaults: Mapping[str, str] | None = None,
    dynamic_own: Mapping[str, str] | None = None,
) -> list[DescribedConfig]:
    """Every topic config key of a topic: its override, else the broker's setting of
    a synonym (log.* etc.: this broker's dynamic config, the cluster-wide dynamic
    default, the static config, highest first), else Kafka's default; synonyms
    highest precedence first."""
    layers = (
        (dynamic_own or {}, ConfigSource.DYNAMIC_BROKER_CONFIG),
        (dynamic_defaults or {}, ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG),
        (broker_given, ConfigSource.STATIC_BROKER_CONFIG),
    )
    out = []
    for name in sorted(TOPIC_CONFIGS):
        spec = TOPIC_CONFIGS[name]
        synonyms: list[tuple[str, str | None, ConfigSource]] = []
        value: str | None = None
        if name in overrides:
            value = _display(name, overrides[name])
            synonyms.append((name, value, ConfigSource.DYNAMIC_TOPIC_CONFIG))
        for layer, source in layers:
            for key, factor in spec.synonyms:
                if key in layer:
                    synonyms.append((key, layer[key], source))
                    if value is None:
                        value = _scaled(name, layer[key], factor)
        if spec.synonyms:
            primary, factor = spec.synonyms[0]
            default = spec.default if factor == 1 else str(int(spec.default) // factor)
            synonyms.append((primary, default, ConfigSource.DEFAULT_CONFIG))
        if value is None:
            value = spec.default
        out.append(
            DescribedConfig(
                name,
                value,
                synonyms[0][2] if synonyms else ConfigSource.DEFAULT_CONFIG,
                synonyms=tuple(synonyms),
                config_type=spec.type,
                documentation=spec.doc,
            )
        )
    return out


def _display(name: str, raw: str) -> str:
    try:
        return normalize(name, raw)
    except InvalidConfig:
        return raw


def _scaled(name: str, raw: str, factor: int) -> str:
    if factor == 1:
        return _display(name, raw)
    try:
        return str(int(raw.strip()) * factor)
    except ValueError:
        return raw
