"""Broker configuration with Apache Kafka's server.properties key names.

`kt broker start` with no arguments is the embedded default: one broker, data in
./kt-data, listener 127.0.0.1:9092, topics auto-created. `--config FILE` reads a
Kafka server.properties; `--override key=value` wins over both.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path

from kt.broker import dynamic_config as dyn
from kt.broker.connection_quotas import ConfigValueError, parse_overrides
from kt.broker.security import support
from kt.broker.security.authorizer import make_authorizer
from kt.broker.security.broker_security import check_listener_security
from kt.broker.security.inter_broker import inter_broker_security
from kt.broker.security.listener_security import SecurityConfigError
from kt.broker.security.listeners import ListenerConfigError, Listeners, resolve_listeners
from kt.client.security import SecurityConfig
from kt.storage.errors import CorruptCheckpointError
from kt.storage.log_config import LONG_MAX, LogConfig
from kt.storage.meta_properties import parse_properties as java_properties

DEFAULTS: dict[str, str] = {
    "node.id": "1",
    "log.dirs": "./kt-data",
    "listeners": "PLAINTEXT://127.0.0.1:9092",
    "num.partitions": "1",
    "default.replication.factor": "1",
    "auto.create.topics.enable": "true",
    "socket.request.max.bytes": str(100 * 1024 * 1024),
    "connections.max.idle.ms": str(10 * 60 * 1000),
    # Kafka's ConnectionQuotas (kt/broker/connection_quotas.py): unlimited by default.
    "max.connections": str(2**31 - 1),
    "max.connections.per.ip": str(2**31 - 1),
    "max.connections.per.ip.overrides": "",
    "offsets.topic.num.partitions": "50",
    # Capped by the live brokers when the topic is created (kt/broker/broker.py).
    "offsets.topic.replication.factor": "3",
    "offsets.retention.minutes": str(7 * 24 * 60),
    "group.initial.rebalance.delay.ms": "3000",
    "group.min.session.timeout.ms": "6000",
    "group.max.session.timeout.ms": "1800000",
    "group.max.size": str(2**31 - 1),
    "transaction.max.timeout.ms": "900000",
    # How long a WriteTxnMarkers append waits for the ISR (Kafka's request.timeout.ms).
    "request.timeout.ms": "30000",
    # The transaction coordinator (Kafka's defaults).
    "transaction.state.log.num.partitions": "50",
    "transaction.state.log.replication.factor": "3",
    "transaction.state.log.min.isr": "2",
    "transaction.abort.timed.out.transaction.cleanup.interval.ms": "10000",
    "transaction.remove.expired.transaction.cleanup.interval.ms": "3600000",
    "transactional.id.expiration.ms": "604800000",
    # Partition leaders verify a transaction's first batch with its coordinator
    # (KIP-890 part 1; Kafka 3.6+'s default; dynamically updatable).
    "transaction.partition.verification.enable": "true",
    "delete.topic.enable": "true",
    "log.flush.offset.checkpoint.interval.ms": "60000",
    "log.flush.start.offset.checkpoint.interval.ms": "60000",
    "replica.high.watermark.checkpoint.interval.ms": "5000",
    "log.retention.check.interval.ms": "300000",
    "log.initial.task.delay.ms": "30000",
    "num.recovery.threads.per.data.dir": "2",
    # Cluster membership (zookeeper.connect unset: the single-node in-process store).
    "zookeeper.session.timeout.ms": "18000",
    "replica.lag.time.max.ms": "30000",
    "replica.fetch.wait.max.ms": "500",
    # Incremental fetch sessions (KIP-227) the broker keeps, followers' and consumers'.
    "max.incremental.fetch.session.cache.slots": "1000",
    "replica.fetch.min.bytes": "1",
    "replica.fetch.max.bytes": "1048576",
    # The replication throttles' rate measure (Kafka's ReplicationQuotaManager).
    "replication.quota.window.num": "11",
    "replication.quota.window.size.seconds": "1",
    "replica.fetch.response.max.bytes": "10485760",
    "replica.fetch.backoff.ms": "1000",
    "replica.socket.timeout.ms": "30000",
    "controlled.shutdown.enable": "true",
    "controlled.shutdown.max.retries": "3",
    "controlled.shutdown.retry.backoff.ms": "5000",
    "unclean.leader.election.enable": "false",
    # The controller's periodic preferred-leader elections (Kafka's defaults).
    "auto.leader.rebalance.enable": "true",
    "leader.imbalance.per.broker.percentage": "10",
    "leader.imbalance.check.interval.seconds": "300",
}

#: Kafka's defaults of the settings kt reads that it does not list among its own
#: defaults above (which is what DescribeConfigs reports as the broker's): with
#: DEFAULTS, the one place a default lives. Services read every setting through
#: `BrokerConfig.get_int` / `get_bool` / `get_float`, never with a default of their own.
KAFKA_DEFAULTS: dict[str, str] = {
    "offsets.retention.check.interval.ms": "600000",
    "offset.metadata.max.bytes": "4096",
    "offsets.commit.timeout.ms": "5000",
    "offsets.topic.segment.bytes": str(100 * 1024 * 1024),
    "transaction.state.log.segment.bytes": str(100 * 1024 * 1024),
    "log.cleaner.enable": "true",
    "log.cleaner.threads": "1",
    "log.cleaner.dedupe.buffer.size": str(128 * 1024 * 1024),
    "log.cleaner.io.buffer.load.factor": "0.9",
    "log.cleaner.backoff.ms": "15000",
}

# Keys a broker accepts but kt does not act on yet are still validated as known, so a
# typo does not pass silently; anything else is reported as unknown (a warning).
_KNOWN_PREFIXES = ("log.", "num.", "socket.", "offsets.", "group.", "transaction", "replica.",
                   "zookeeper.", "ssl.", "sasl.", "security.", "controller.", "process.",
                   "metadata.", "queued.", "background.", "message.", "compression.",
                   "unclean.", "min.insync", "inter.broker", "auto.", "delete.", "default.",
                   "broker.", "node.", "listener", "advertised.", "cluster.", "connections.",
                   "fetch.", "producer.", "quota.", "reserved.", "request.", "share.",
                   "authorizer.", "super.", "control.", "alter.", "create.", "leader.",
                   "max.connections", "max.incremental", "connection.failed.",
                   "principal.", "allow.everyone")  # fmt: skip


class ConfigError(ValueError):
    """An invalid broker setting (reported as one line, exit 2)."""


@dataclass(frozen=True, slots=True)
class Listener:
    """One listener: name, host, port and the security protocol its name maps to."""

    name: str
    host: str
    port: int
    protocol: str = "PLAINTEXT"


@dataclass(frozen=True, slots=True)
class BrokerConfig:
    """Resolved broker settings, immutable once loaded: a change of the dynamic
    broker configs makes a new one (`with_dynamic`), which the composition root
    (kt.broker.broker) holds and hands on as settings snapshots."""

    props: Mapping[str, str]
    node_id: int
    log_dirs: list[Path]
    listeners: list[Listener]
    advertised: list[Listener]
    log_config: LogConfig
    unknown_keys: list[str] = field(default_factory=list)
    #: The resolved listener settings (protocols, inter-broker listener).
    listener_settings: Listeners | None = None
    #: The security of this broker's connections to its peers (a cluster member's
    #: inter-broker listener as a client); None on the single node, which makes none.
    inter_broker_client: SecurityConfig | None = None
    # The dynamic layers (/config/brokers/<default> and /config/brokers/<id>) as this
    # broker applies them (unusable entries dropped); see with_dynamic.
    dynamic_defaults: Mapping[str, str] = field(default_factory=dict)
    dynamic_own: Mapping[str, str] = field(default_factory=dict)

    def value(self, key: str) -> str:
        """A setting as given, else its default (DEFAULTS, else Kafka's in
        KAFKA_DEFAULTS); KeyError for a key with neither."""
        found = self.props.get(key)
        return found if found is not None else KAFKA_DEFAULTS[key]

    def get_int(self, key: str) -> int:
        """An integer setting (ConfigError when malformed)."""
        return _int(key, self.value(key))

    def get_float(self, key: str) -> float:
        """A decimal setting (ConfigError when malformed)."""
        raw = self.value(key)
        try:
            return float(raw)
        except ValueError:
            raise ConfigError(f"{key}={raw!r} is not a number") from None

    def get_bool(self, key: str) -> bool:
        """A boolean setting."""
        raw = self.value(key)
        value = raw.strip().lower()
        if value not in ("true", "false"):
            raise ConfigError(f"{key}={raw!r} is not true or false")
        return value == "true"

    def given(self) -> dict[str, str]:
        """Settings set explicitly (config file or overrides), not kt's defaults."""
        return {k: v for k, v in self.props.items() if DEFAULTS.get(k) != v}

    def with_dynamic(self, defaults: Mapping[str, str], own: Mapping[str, str]) -> BrokerConfig:
        """This config with new dynamic layers (unusable entries dropped, as Kafka
        does); this one is unchanged."""
        return replace(
            self,
            dynamic_defaults=dyn.usable(defaults, False, "default cluster"),
            dynamic_own=dyn.usable(own, True, f"broker {self.node_id}"),
        )

    def changed_keys(self, other: BrokerConfig) -> set[str]:
        """The keys whose effective value differs between this config and `other`."""
        before, after = self.effective_props(), other.effective_props()
        return {k for k in before.keys() | after.keys() if before.get(k) != after.get(k)}

    def effective_props(self) -> dict[str, str]:
        """Every setting with the dynamic layers applied: this broker's dynamic config
        over the cluster default over the static config over the built-in defaults
        (a key set in a layer hides its synonyms below, e.g. log.retention.hours)."""
        props = dict(DEFAULTS)
        dyn.overlay(props, self.given())
        dyn.overlay(props, self.dynamic_defaults)
        dyn.overlay(props, self.dynamic_own)
        return props

    def effective_log_config(self) -> LogConfig:
        """The log defaults topics inherit, with the dynamic layers applied."""
        return LogConfig.from_properties(log_properties(self.effective_props()))

    def _dynamic_long(self, key: str) -> int:
        value = self.dynamic_own.get(key, self.dynamic_defaults.get(key))
        if value is None:
            value = self.props.get(key)
        return LONG_MAX if value is None else int(dyn.parse_value(key, value))

    @property
    def leader_replication_throttled_rate(self) -> int:
        """leader.replication.throttled.rate in bytes/s (Long.MaxValue: unlimited)."""
        return self._dynamic_long(dyn.LEADER_RATE)

    @property
    def follower_replication_throttled_rate(self) -> int:
        """follower.replication.throttled.rate in bytes/s (Long.MaxValue: unlimited)."""
        return self._dynamic_long(dyn.FOLLOWER_RATE)

    @property
    def replica_alter_log_dirs_io_max_bytes_per_second(self) -> int:
        """replica.alter.log.dirs.io.max.bytes.per.second, the rate of log-dir moves
        (AlterReplicaLogDirs), in bytes/s; Long.MaxValue (Kafka's default) means
        unlimited. Read it each time: it changes at runtime."""
        return self._dynamic_long(dyn.ALTER_LOG_DIRS_RATE)

    @property
    def unclean_leader_election_enable(self) -> bool:
        """The cluster-wide unclean.leader.election.enable default, dynamic layers applied."""
        return self.effective_log_config().unclean_leader_election_enable

    @property
    def transaction_partition_verification_enable(self) -> bool:
        """transaction.partition.verification.enable with the dynamic layers applied."""
        key = dyn.VERIFICATION_KEY
        value = self.dynamic_own.get(key, self.dynamic_defaults.get(key))
        if value is None:
            return self.get_bool(key)
        return dyn.parse_value(key, value) == "true"

    @property
    def zookeeper_connect(self) -> str | None:
        """zookeeper.connect, when this broker is a member of a ZooKeeper cluster."""
        value = self.props.get("zookeeper.connect", "").strip()
        return value or None

    @property
    def zookeeper_connection_timeout_ms(self) -> int:
        """How long to wait for ZooKeeper at start (Kafka: the session timeout unless
        zookeeper.connection.timeout.ms is set)."""
        key = "zookeeper.connection.timeout.ms"
        return (
            self.get_int(key) if key in self.props else self.get_int("zookeeper.session.timeout.ms")
        )

    @property
    def rack(self) -> str | None:
        """broker.rack, if set."""
        return self.props.get("broker.rack") or None

    @property
    def cluster_id(self) -> str | None:
        """The configured cluster id, if any (else meta.properties decides)."""
        return self.props.get("cluster.id")


def parse_properties(text: str, path: str | None = None) -> dict[str, str]:
    """A server.properties file's settings: Java properties syntax (the storage core's
    reader, escapes and continuations included), values trimmed as Kafka's ConfigDef
    trims them; a ConfigError (naming `path`) for text that does not parse."""
    try:
        props = java_properties(text, path)
    except CorruptCheckpointError as exc:
        raise ConfigError(str(exc)) from None
    return {key: value.strip() for key, value in props.items()}


def load_config(
    config_file: str | Path | None = None, overrides: Mapping[str, str] | None = None
) -> BrokerConfig:
    """Resolve defaults, a server.properties file and overrides into a BrokerConfig."""
    file_props: dict[str, str] = {}
    if config_file is not None:
        try:
            text = Path(config_file).read_text(encoding="utf-8")
        except OSError as exc:
            raise ConfigError(f"cannot read {config_file}: {exc.strerror or exc}") from None
        file_props = parse_properties(text, str(config_file))
    given = {**file_props, **(overrides or {})}
    props = {**DEFAULTS, **given}
    # broker.id is the ZooKeeper-era name of node.id; take whichever was given.
    if "broker.id" in given and "node.id" not in given:
        props["node.id"] = given["broker.id"]
    node_id = _int("node.id", props["node.id"])
    if node_id < 0:
        raise ConfigError(f"node.id must be >= 0, got {node_id}")
    dirs_value = props.get("log.dirs") or props.get("log.dir") or DEFAULTS["log.dirs"]
    if "log.dir" in given and "log.dirs" not in given:
        dirs_value = given["log.dir"]
    log_dirs = [Path(d.strip()) for d in dirs_value.split(",") if d.strip()]
    if not log_dirs:
        raise ConfigError("log.dirs is empty")
    if len({d.resolve() for d in log_dirs}) != len(log_dirs):
        raise ConfigError(f"log.dirs lists a directory twice: {dirs_value}")
    try:
        resolved = resolve_listeners(props)
    except ListenerConfigError as exc:
        raise ConfigError(str(exc)) from None
    listeners = [Listener(ep.name, ep.host, ep.port, ep.protocol) for ep in resolved.listeners]
    advertised = (
        [Listener(ep.name, ep.host, ep.port, ep.protocol) for ep in resolved.advertised]
        if resolved.advertised_given
        else [_advertise(lst) for lst in listeners]
    )
    # Security asked for but not implemented is refused, never served in plaintext.
    refusal = support.unsupported(props, given, resolved)
    if refusal is not None:
        raise ConfigError(refusal)
    try:
        check_listener_security(props, resolved.listeners)
        make_authorizer(props)
        inter_broker_client = (
            inter_broker_security(props, resolved)
            if props.get("zookeeper.connect", "").strip()
            else None
        )
    except (SecurityConfigError, ValueError) as exc:
        raise ConfigError(str(exc)) from None
    log_props = log_properties(props)
    try:
        log_config = LogConfig.from_properties(log_props)
    except Exception as exc:  # StorageError from a malformed value
        raise ConfigError(str(exc)) from None
    unknown = sorted(k for k in given if not k.startswith(_KNOWN_PREFIXES))
    cfg = BrokerConfig(props, node_id, log_dirs, listeners, advertised, log_config, unknown,
                       listener_settings=resolved,
                       inter_broker_client=inter_broker_client)  # fmt: skip
    for key in ("num.partitions", "socket.request.max.bytes", "offsets.topic.num.partitions",
                "transaction.state.log.num.partitions", "max.connections",
                "max.connections.per.ip"):  # fmt: skip
        if cfg.get_int(key) <= 0:
            raise ConfigError(f"{key} must be > 0")
    if cfg.get_int("max.incremental.fetch.session.cache.slots") < 0:
        # 0 is allowed: no fetch sessions, every fetch is answered in full
        raise ConfigError("max.incremental.fetch.session.cache.slots must be >= 0")
    try:
        parse_overrides(cfg.props.get("max.connections.per.ip.overrides", ""))
    except ConfigValueError as exc:
        raise ConfigError(str(exc)) from None
    _validate_types(cfg)
    return cfg


def _validate_types(cfg: BrokerConfig) -> None:
    """Every setting with a default is checked now, as its default's type (boolean,
    integer, decimal), not when a service first reads it (a traceback then)."""
    for key, default in {**KAFKA_DEFAULTS, **DEFAULTS}.items():
        if default in ("true", "false"):
            cfg.get_bool(key)
        elif re.fullmatch(r"-?\d+", default):
            cfg.get_int(key)
        elif re.fullmatch(r"-?\d+\.\d+", default):
            cfg.get_float(key)


def log_properties(props: Mapping[str, str]) -> dict[str, str]:
    """Broker `log.*` keys as LogConfig understands them, hours/minutes resolved."""
    out = dict(props)
    for unit_key, ms_key, factor in (
        ("log.retention.hours", "log.retention.ms", 3_600_000),
        ("log.retention.minutes", "log.retention.ms", 60_000),
        ("log.roll.hours", "log.roll.ms", 3_600_000),
    ):
        if unit_key in props and ms_key not in props:
            out[ms_key] = str(_int(unit_key, props[unit_key]) * factor)
    return out


def _advertise(listener: Listener) -> Listener:
    host = listener.host
    if host in ("", "0.0.0.0", "::"):
        import socket

        host = socket.getfqdn()
    return Listener(listener.name, host, listener.port, listener.protocol)


def _int(key: str, value: str) -> int:
    try:
        return int(str(value).strip())
    except ValueError:
        raise ConfigError(f"{key}={value!r} is not an integer") from None


def new_cluster_id() -> str:
    """A Kafka-style cluster id: a random UUID in URL-safe base64 without padding."""
    import base64

    return base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode()
