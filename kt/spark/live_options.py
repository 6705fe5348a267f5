"""Options of the "kt" live-topic source and sink, parsed and checked the way
Spark's built-in Kafka source reads its own.

Pure: no Spark, no network. Option names are case-insensitive, as in Spark.
Offset JSON uses Spark's layout, {"topic": {"0": 23, "1": -2}}, with -2 for
earliest and -1 for latest; timestamps are milliseconds since the epoch.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal

#: ListOffsets sentinels, as in Spark's offset JSON
EARLIEST = -2
LATEST = -1

#: offsets per Spark partition when neither maxRecordsPerPartition nor
#: minPartitions says otherwise: one task per topic-partition unless its range is big
DEFAULT_SPLIT = 1_000_000

OffsetKind = Literal["earliest", "latest", "offsets", "timestamp", "timestamps"]
TopicPartition = tuple[str, int]


class OptionError(ValueError):
    """A bad or conflicting option (Spark reports these as IllegalArgumentException)."""


@dataclass(frozen=True)
class Subscription:
    """Which topic-partitions to read: exactly one of subscribe, subscribePattern, assign."""

    kind: Literal["subscribe", "subscribePattern", "assign"]
    topics: tuple[str, ...] = ()
    pattern: str = ""
    assigned: tuple[TopicPartition, ...] = ()

    def matches(self, topic: str) -> bool:
        """Whether `topic` is one this subscription reads (assign: any listed topic)."""
        if self.kind == "subscribePattern":
            return re.fullmatch(self.pattern, topic) is not None
        if self.kind == "assign":
            return any(t == topic for t, _ in self.assigned)
        return topic in self.topics


@dataclass(frozen=True)
class OffsetSpec:
    """Where reading starts or ends: earliest, latest, per-partition offsets, one
    timestamp for every partition, or per-partition timestamps. Partitions the
    JSON forms leave out take `default` ("earliest" or "latest")."""

    kind: OffsetKind
    per_partition: Mapping[TopicPartition, int] = field(default_factory=dict)
    timestamp: int = 0
    default: Literal["earliest", "latest"] = "earliest"


@dataclass(frozen=True)
class ReadOptions:
    """Everything a reader (batch or streaming) needs, already validated."""

    bootstrap: str
    subscription: Subscription
    starting: OffsetSpec
    ending: OffsetSpec
    include_headers: bool = False
    fail_on_data_loss: bool = True
    max_offsets_per_trigger: int | None = None
    min_partitions: int | None = None
    max_records_per_partition: int | None = None
    #: what a starting timestamp with no record at or after it means: error or latest
    timestamp_strategy: Literal["error", "latest"] = "error"
    client_id: str = "kt-spark"
    request_timeout: float = 30.0
    fetch_max_bytes: int = 8 * 1024 * 1024
    #: client security properties (kafka.security.protocol, kafka.ssl.*, kafka.sasl.*)
    security: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class WriteOptions:
    """What a writer needs: where to connect and the topic that overrides the column."""

    bootstrap: str
    topic: str | None = None
    client_id: str = "kt-spark"
    request_timeout: float = 30.0
    #: records per produce request (per partition) before it is sent
    batch_records: int = 10_000
    #: well under the broker's default max.message.bytes (1 MiB)
    batch_bytes: int = 512 * 1024
    codec: str = "none"
    #: client security properties (kafka.security.protocol, kafka.ssl.*, kafka.sasl.*)
    security: Mapping[str, str] = field(default_factory=dict)


def _lower(options: Mapping[str, str]) -> dict[str, str]:
    return {str(k).lower(): str(v) for k, v in options.items() if v is not None}


def _security(opts: dict[str, str]) -> dict[str, str]:
    """The `kafka.`-prefixed security properties, as Spark's Kafka source passes them
    to its clients (kafka.security.protocol, kafka.ssl.*, kafka.sasl.*); checked here
    so a bad one fails the query at planning, not in a task."""
    from kt.client.security import SECURITY_KEYS, SecurityConfig, SecurityConfigError

    props = {k[len("kafka."):]: v for k, v in opts.items()
             if k.startswith("kafka.") and k[len("kafka."):] in SECURITY_KEYS}  # fmt: skip
    unknown = sorted(
        k
        for k in opts
        if k.startswith(("kafka.ssl.", "kafka.sasl.")) and k[6:] not in SECURITY_KEYS
    )
    if unknown:
        raise OptionError(f"option '{unknown[0]}' is not supported by the kt source")
    try:
        SecurityConfig.from_properties(props)
    except SecurityConfigError as exc:
        raise OptionError(f"kafka.{exc}") from None
    return props


def _bootstrap(opts: dict[str, str]) -> str:
    servers = opts.get("kafka.bootstrap.servers") or opts.get("bootstrap.servers")
    if not servers:
        raise OptionError("option 'kafka.bootstrap.servers' must be specified (host:port,...)")
    return servers


def _int(opts: dict[str, str], name: str, *, minimum: int = 1) -> int | None:
    text = opts.get(name.lower())
    if text is None:
        return None
    try:
        value = int(text)
    except ValueError:
        raise OptionError(f"option '{name}' must be an integer, got {text!r}") from None
    if value < minimum:
        raise OptionError(f"option '{name}' must be at least {minimum}, got {value}")
    return value


def _bool(opts: dict[str, str], name: str, default: bool) -> bool:
    text = opts.get(name.lower())
    if text is None:
        return default
    if text.strip().lower() in ("true", "false"):
        return text.strip().lower() == "true"
    raise OptionError(f"option '{name}' must be true or false, got {text!r}")


def _timeout(opts: dict[str, str]) -> float:
    ms = _int(opts, "kafka.request.timeout.ms")
    return 30.0 if ms is None else ms / 1000


def parse_subscription(opts: Mapping[str, str]) -> Subscription:
    """The one of subscribe / subscribePattern / assign that is given."""
    low = _lower(opts)
    given = [k for k in ("subscribe", "subscribepattern", "assign") if k in low]
    if len(given) != 1:
        raise OptionError(
            "exactly one of the options 'subscribe', 'subscribePattern' or 'assign' "
            f"must be specified, got {len(given)}"
        )
    kind = given[0]
    text = low[kind].strip()
    if kind == "subscribe":
        topics = tuple(dict.fromkeys(t.strip() for t in text.split(",") if t.strip()))
        if not topics:
            raise OptionError("no topics to subscribe to in option 'subscribe'")
        return Subscription("subscribe", topics=topics)
    if kind == "subscribepattern":
        if not text:
            raise OptionError("option 'subscribePattern' is empty")
        try:
            re.compile(text)
        except re.error as exc:
            raise OptionError(f"option 'subscribePattern' is not a valid regex: {exc}") from None
        return Subscription("subscribePattern", pattern=text)
    try:
        data = json.loads(text)
    except json.JSONDecodeError:
        data = None
    if not isinstance(data, dict) or not all(
        isinstance(v, list) and all(isinstance(p, int) for p in v) for v in data.values()
    ):
        raise OptionError(
            f'option \'assign\' must be JSON like {{"topicA":[0,1],"topicB":[2,4]}}, got {text!r}'
        )
    assigned = tuple(sorted({(str(t), int(p)) for t, ps in data.items() for p in ps}))
    if not assigned:
        raise OptionError("option 'assign' names no partitions")
    return Subscription("assign", assigned=assigned)


def _partition_json(text: str, name: str) -> dict[TopicPartition, int]:
    try:
        data = json.loads(text)
    except json.JSONDecodeError:
        data = None
    ok = isinstance(data, dict) and all(
        isinstance(v, dict)
        and all(isinstance(o, int) and not isinstance(o, bool) for o in v.values())
        for v in data.values()
    )
    if not ok:
        raise OptionError(
            f"option '{name}' must be earliest, latest or JSON like "
            f'{{"topicA":{{"0":23,"1":-2}}}}, got {text!r}'
        )
    out: dict[TopicPartition, int] = {}
    assert isinstance(data, dict)
    for topic, parts in data.items():
        for p, v in parts.items():
            try:
                out[(str(topic), int(p))] = int(v)
            except ValueError:
                raise OptionError(f"option '{name}': bad partition number {p!r}") from None
    return out


def parse_offset_spec(
    opts: Mapping[str, str],
    which: Literal["starting", "ending"],
    default: Literal["earliest", "latest"],
) -> OffsetSpec | None:
    """The starting or ending position; None when no option about it is given.

    Precedence as in Spark: {which}Timestamp, then {which}OffsetsByTimestamp,
    then {which}Offsets.
    """
    low = _lower(opts)
    ts = low.get(f"{which}timestamp")
    if ts is not None:
        try:
            value = int(ts)
        except ValueError:
            raise OptionError(
                f"option '{which}Timestamp' must be milliseconds since the epoch, got {ts!r}"
            ) from None
        return OffsetSpec("timestamp", timestamp=value, default=default)
    by_ts = low.get(f"{which}offsetsbytimestamp")
    if by_ts is not None:
        return OffsetSpec(
            "timestamps",
            _partition_json(by_ts, f"{which}OffsetsByTimestamp"),
            default=default,
        )
    text = low.get(f"{which}offsets")
    if text is None:
        return None
    word = text.strip().lower()
    if word in ("earliest", "latest"):
        return OffsetSpec(word, default=default)  # type: ignore[arg-type]
    return OffsetSpec("offsets", _partition_json(text, f"{which}Offsets"), default=default)


def _common(opts: dict[str, str]) -> dict[str, object]:
    isolation = opts.get("kafka.isolation.level", "read_uncommitted").lower()
    if isolation != "read_uncommitted":
        raise OptionError(
            "kafka.isolation.level=read_committed is not supported by the kt source yet"
        )
    return {
        "client_id": opts.get("kafka.client.id", "kt-spark"),
        "request_timeout": _timeout(opts),
        "security": _security(opts),
    }


def parse_read_options(options: Mapping[str, str], *, streaming: bool) -> ReadOptions:
    """Validate a reader's options with Spark's Kafka rules for batch or streaming."""
    opts = _lower(options)
    bootstrap = _bootstrap(opts)
    subscription = parse_subscription(opts)
    starting = parse_offset_spec(opts, "starting", "earliest")
    ending = parse_offset_spec(opts, "ending", "latest")
    if streaming:
        if ending is not None:
            raise OptionError("ending offsets/timestamps are not valid in streaming queries")
        starting = starting or OffsetSpec("latest", default="earliest")
        ending = OffsetSpec("latest")
    else:
        starting = starting or OffsetSpec("earliest")
        ending = ending or OffsetSpec("latest", default="latest")
        if starting.kind == "latest":
            raise OptionError("starting offset can't be latest for batch queries on Kafka")
        if starting.kind == "offsets" and LATEST in starting.per_partition.values():
            bad = [f"{t}-{p}" for (t, p), o in starting.per_partition.items() if o == LATEST]
            raise OptionError(
                f"startingOffsets for {', '.join(bad)} can't be latest (-1) for batch queries"
            )
        if ending.kind == "earliest":
            raise OptionError("ending offset can't be earliest for batch queries on Kafka")
        if ending.kind == "offsets" and EARLIEST in ending.per_partition.values():
            bad = [f"{t}-{p}" for (t, p), o in ending.per_partition.items() if o == EARLIEST]
            raise OptionError(
                f"endingOffsets for {', '.join(bad)} can't be earliest (-2) for batch queries"
            )
    strategy = opts.get("startingoffsetsbytimestampstrategy", "error").strip().lower()
    if strategy not in ("error", "latest"):
        raise OptionError(
            f"option 'startingOffsetsByTimestampStrategy' must be error or latest, got {strategy!r}"
        )
    fetch_bytes = _int(opts, "kafka.max.partition.fetch.bytes")
    return ReadOptions(
        bootstrap=bootstrap,
        subscription=subscription,
        starting=starting,
        ending=ending,
        include_headers=_bool(opts, "includeHeaders", False),
        fail_on_data_loss=_bool(opts, "failOnDataLoss", True),
        max_offsets_per_trigger=_int(opts, "maxOffsetsPerTrigger"),
        min_partitions=_int(opts, "minPartitions"),
        max_records_per_partition=_int(opts, "maxRecordsPerPartition"),
        timestamp_strategy=strategy,  # type: ignore[arg-type]
        fetch_max_bytes=fetch_bytes or 8 * 1024 * 1024,
        **_common(opts),  # type: ignore[arg-type]
    )


def parse_write_options(options: Mapping[str, str]) -> WriteOptions:
    """Validate a writer's options."""
    opts = _lower(options)
    codec = opts.get("kafka.compression.type", "none").strip().lower()
    if codec not in ("none", "gzip", "snappy", "lz4", "zstd"):
        raise OptionError(
            f"kafka.compression.type must be none, gzip, snappy, lz4 or zstd, got {codec!r}"
        )
    common = _common(opts)
    return WriteOptions(
        bootstrap=_bootstrap(opts),
        topic=opts.get("topic") or None,
        client_id=str(common["client_id"]),
        request_timeout=float(common["request_timeout"]),  # type: ignore[arg-type]
        batch_bytes=_int(opts, "kafka.batch.size") or 512 * 1024,
        codec=codec,
        security=common["security"],  # type: ignore[arg-type]
    )


def split_ranges(
    ranges: list[tuple[str, int, int, int]],
    *,
    min_partitions: int | None,
    max_records: int | None,
) -> list[tuple[str, int, int, int]]:
    """Cut (topic, partition, from, until) ranges into Spark partitions.

    Each range becomes pieces of at most `max_records` offsets (DEFAULT_SPLIT when
    not given); then, while there are fewer pieces than `min_partitions`, the
    biggest pieces are halved. Empty ranges are dropped. Order: by topic-partition,
    then offset, so every piece of a partition is read in order.
    """
    limit = max_records or DEFAULT_SPLIT
    pieces: list[tuple[str, int, int, int]] = []
    for topic, part, lo, hi in ranges:
        start = lo
        while start < hi:
            end = min(hi, start + limit)
            pieces.append((topic, part, start, end))
            start = end
    if min_partitions:
        while len(pieces) < min_partitions:
            biggest = max(pieces, key=lambda r: r[3] - r[2], default=None)
            if biggest is None or biggest[3] - biggest[2] < 2:
                break
            pieces.remove(biggest)
            mid = biggest[2] + (biggest[3] - biggest[2]) // 2
            pieces += [
                (biggest[0], biggest[1], biggest[2], mid),
                (biggest[0], biggest[1], mid, biggest[3]),
            ]
    return sorted(pieces, key=lambda r: (r[0], r[1], r[2]))


def rate_limit(
    start: Mapping[TopicPartition, int],
    latest: Mapping[TopicPartition, int],
    limit: int,
) -> dict[TopicPartition, int]:
    """End offsets that move at most `limit` offsets past `start` in all, shared out
    in proportion to each partition's backlog (as Spark's maxOffsetsPerTrigger).

    Partitions with no backlog keep their latest offset. Every partition with a
    backlog advances by at least one offset when the share rounds to zero, so a
    small limit over many partitions still makes progress.
    """
    backlog = {tp: max(0, latest[tp] - start.get(tp, latest[tp])) for tp in latest}
    total = sum(backlog.values())
    if total <= limit:
        return dict(latest)
    out: dict[TopicPartition, int] = {}
    for tp, end in latest.items():
        lag = backlog[tp]
        if lag == 0:
            out[tp] = end
            continue
        share = int(limit * lag / total)
        out[tp] = start[tp] + min(lag, max(1, share))
    return out


def offsets_json(offsets: Mapping[TopicPartition, int]) -> dict[str, dict[str, int]]:
    """Spark's offset layout, {"topic": {"0": 23}}, sorted by topic then partition."""
    out: dict[str, dict[str, int]] = {}
    for (t, p), o in sorted(offsets.items()):
        out.setdefault(t, {})[str(p)] = o
    return out


def offsets_from_json(data: Mapping[str, Mapping[str, int]]) -> dict[TopicPartition, int]:
    """The inverse of offsets_json."""
    return {(t, int(p)): int(o) for t, parts in data.items() for p, o in parts.items()}
