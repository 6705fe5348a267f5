"""Per-log configuration with Kafka's topic-level key names and defaults.

Broker-wide defaults come from `log.*` server keys of the same meaning (for
example `log.segment.bytes` → `segment.bytes`); `from_properties` accepts both.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields, replace

from kt.storage.errors import StorageError

LONG_MAX = 2**63 - 1


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
