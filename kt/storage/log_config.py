"""Per-log configuration with Kafka's topic-level key names and defaults.

Broker-wide defaults come from `log.*` server keys of the same meaning (for
example `log.segment.bytes` → `segment.bytes`); `from_properties` accepts both.
"""

from __future__ import annotations

import random
from collections.abc import Mapping
from dataclasses import dataclass, fields, replace

from kt.storage.errors import StorageError

LONG_MAX = 2**63 - 1
INT_MAX = 2**31 - 1
# Kafka's LegacyRecord.RECORD_OVERHEAD_V0: the smallest segment.bytes it accepts.
MIN_SEGMENT_BYTES = 14


@dataclass(frozen=True, slots=True)
class LogConfig:
    """Settings of one partition log. Field names are Kafka's keys with '_' for '.'."""

    segment_bytes: int = 1024 * 1024 * 1024
    segment_ms: int = 7 * 24 * 60 * 60 * 1000
    segment_jitter_ms: int = 0
    segment_index_bytes: int = 10 * 1024 * 1024
    index_interval_bytes: int = 4096
    max_message_bytes: int = 1024 * 1024 + 12
    message_timestamp_type: str = "CreateTime"
    flush_messages: int = LONG_MAX
    flush_ms: int = LONG_MAX
    retention_ms: int = 7 * 24 * 60 * 60 * 1000
    retention_bytes: int = -1
    cleanup_policy: str = "delete"
    delete_retention_ms: int = 24 * 60 * 60 * 1000
    min_compaction_lag_ms: int = 0
    max_compaction_lag_ms: int = LONG_MAX
    min_cleanable_dirty_ratio: float = 0.5
    file_delete_delay_ms: int = 60_000
    min_insync_replicas: int = 1
    unclean_leader_election_enable: bool = False
    preallocate: bool = False
    # KIP-937 (Kafka 3.6); Kafka 4.0 lowered the "after" default to one hour (KIP-1030).
    message_timestamp_before_max_ms: int = LONG_MAX
    message_timestamp_after_max_ms: int = 60 * 60 * 1000

    def __post_init__(self) -> None:
        for name, (lo, hi) in _RANGES.items():
            value = getattr(self, name)
            if not lo <= value <= hi:
                key = name.replace("_", ".")
                if hi == LONG_MAX or (hi == INT_MAX and lo > 0):
                    what = f"at least {lo}" + ("" if hi == LONG_MAX else f" and at most {hi}")
                else:
                    what = f"between {lo} and {hi}"
                raise StorageError(f"invalid value {value!r} for {key}: must be {what}")
        if self.message_timestamp_type not in ("CreateTime", "LogAppendTime"):
            raise StorageError(
                f"invalid value {self.message_timestamp_type!r} for message.timestamp.type "
                "(CreateTime or LogAppendTime)"
            )
        policies = self.cleanup_policy.split(",")
        if not policies or any(p.strip() not in ("delete", "compact") for p in policies):
            raise StorageError(
                f"invalid value {self.cleanup_policy!r} for cleanup.policy (delete, compact)"
            )

    def random_segment_jitter(self, rng: random.Random | None = None) -> int:
        """A segment's roll jitter, as Kafka's randomSegmentJitter: uniform in
        [0, min(segment.jitter.ms, segment.ms)), 0 when no jitter is configured."""
        if self.segment_jitter_ms == 0:
            return 0
        source = rng if rng is not None else random
        return source.randrange(min(self.segment_jitter_ms, self.segment_ms))

    @property
    def log_append_time(self) -> bool:
        """True when the broker stamps its own clock on every batch."""
        return self.message_timestamp_type == "LogAppendTime"

    @property
    def compact(self) -> bool:
        """True when `cleanup.policy` includes compact."""
        return "compact" in self.cleanup_policy.split(",")

    @property
    def delete(self) -> bool:
        """True when `cleanup.policy` includes delete."""
        return "delete" in self.cleanup_policy.split(",")

    def with_overrides(self, props: Mapping[str, str]) -> LogConfig:
        """A copy with Kafka-named keys from `props` applied (unknown keys ignored)."""
        changes: dict[str, object] = {}
        by_key = {f.name.replace("_", "."): f for f in fields(self)}
        for raw_key, raw_value in props.items():
            key = raw_key[4:] if raw_key.startswith("log.") else raw_key
            key = _BROKER_ALIASES.get(raw_key, key)
            f = by_key.get(key)
            if f is None:
                continue
            changes[f.name] = _convert(raw_key, raw_value, f.type)
        return replace(self, **changes)  # type: ignore[arg-type]

    @classmethod
    def from_properties(cls, props: Mapping[str, str]) -> LogConfig:
        """A config from Kafka-named properties over the defaults."""
        return cls().with_overrides(props)

    def to_properties(self) -> dict[str, str]:
        """Every setting under its Kafka topic-level key."""
        out = {}
        for f in fields(self):
            v = getattr(self, f.name)
            out[f.name.replace("_", ".")] = str(v).lower() if isinstance(v, bool) else str(v)
        return out


# Kafka's validators for the numeric keys: (lowest, highest) accepted values.
_RANGES: dict[str, tuple[float, float]] = {
    "segment_bytes": (MIN_SEGMENT_BYTES, INT_MAX),
    "segment_ms": (1, LONG_MAX),
    "segment_jitter_ms": (0, LONG_MAX),
    "segment_index_bytes": (4, INT_MAX),
    "index_interval_bytes": (0, INT_MAX),
    "max_message_bytes": (0, INT_MAX),
    "flush_messages": (1, LONG_MAX),
    "flush_ms": (0, LONG_MAX),
    "retention_ms": (-1, LONG_MAX),
    "retention_bytes": (-(2**63), LONG_MAX),
    "delete_retention_ms": (0, LONG_MAX),
    "min_compaction_lag_ms": (0, LONG_MAX),
    "max_compaction_lag_ms": (1, LONG_MAX),
    "min_cleanable_dirty_ratio": (0.0, 1.0),
    "file_delete_delay_ms": (0, LONG_MAX),
    "min_insync_replicas": (1, INT_MAX),
    "message_timestamp_before_max_ms": (0, LONG_MAX),
    "message_timestamp_after_max_ms": (0, LONG_MAX),
}

# Broker keys whose topic-level name is not simply the key without `log.`.
_BROKER_ALIASES = {
    "log.roll.ms": "segment.ms",
    "log.roll.jitter.ms": "segment.jitter.ms",
    "log.index.size.max.bytes": "segment.index.bytes",
    "log.flush.interval.messages": "flush.messages",
    "log.flush.interval.ms": "flush.ms",
    "log.retention.ms": "retention.ms",
    "log.retention.bytes": "retention.bytes",
    "log.cleaner.delete.retention.ms": "delete.retention.ms",
    "log.cleaner.min.compaction.lag.ms": "min.compaction.lag.ms",
    "log.cleaner.max.compaction.lag.ms": "max.compaction.lag.ms",
    "log.cleaner.min.cleanable.ratio": "min.cleanable.dirty.ratio",
    "log.segment.delete.delay.ms": "file.delete.delay.ms",
    "log.message.timestamp.type": "message.timestamp.type",
    "message.max.bytes": "max.message.bytes",
}


def _convert(key: str, value: str, typ: object) -> object:
    text = str(value).strip()
    try:
        if typ in (bool, "bool"):
            if text.lower() not in ("true", "false"):
                raise ValueError(text)
            return text.lower() == "true"
        if typ in (int, "int"):
            return int(text)
        if typ in (float, "float"):
            return float(text)
    except ValueError:
        raise StorageError(f"invalid value {value!r} for {key}") from None
    if key.endswith("message.timestamp.type") and text not in ("CreateTime", "LogAppendTime"):
        raise StorageError(f"invalid value {value!r} for {key} (CreateTime or LogAppendTime)")
    return text
