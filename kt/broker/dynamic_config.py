"""Dynamic broker configs (Kafka's KIP-226 DynamicBrokerConfig, ZooKeeper mode), pure.

A broker's config has four layers, highest precedence first:

1. DYNAMIC_BROKER_CONFIG: this broker's `/config/brokers/<id>`;
2. DYNAMIC_DEFAULT_BROKER_CONFIG: the cluster-wide `/config/brokers/<default>`;
3. STATIC_BROKER_CONFIG: server.properties and `--override`;
4. DEFAULT_CONFIG: the built-in defaults.

Setting a key in a higher layer also hides its synonyms below (Kafka's
overrideProps): a dynamic `log.retention.ms` wins over a static
`log.retention.hours`.

Kafka accepts only its dynamically updatable keys (`AllDynamicConfigs` plus the
replication quotas) and refuses the rest of its own keys with "Cannot update
these configs dynamically"; names outside Kafka's namespace are custom configs,
stored and shown but unused. kt applies a subset of Kafka's dynamic keys live
(`KT_DYNAMIC`): the log defaults topics inherit, the replication throttles, the
log-dir move rate and transaction.partition.verification.enable; the Kafka-dynamic
keys kt cannot apply to a running broker (thread pools, listeners, SSL, ...) are
refused with the same message.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from dataclasses import fields

from kt.broker.errors import InvalidRequestError
from kt.broker.security.keystore_reload import is_reconfigurable
from kt.broker.topic_configs import TOPIC_CONFIGS, InvalidConfig, parse, to_string
from kt.storage.log_config import LONG_MAX, LogConfig

log = logging.getLogger("kt.broker.dynamic_config")

#: The ZooKeeper entity name of the cluster-wide defaults.
DEFAULT_ENTITY = "<default>"

LEADER_RATE = "leader.replication.throttled.rate"
FOLLOWER_RATE = "follower.replication.throttled.rate"
ALTER_LOG_DIRS_RATE = "replica.alter.log.dirs.io.max.bytes.per.second"
#: Kafka's DynamicConfig.Broker quotas: LONG, at least 0, default Long.MaxValue.
QUOTA_KEYS = (LEADER_RATE, FOLLOWER_RATE, ALTER_LOG_DIRS_RATE)
#: Whether partition leaders verify transactional produce with the coordinator (KIP-890).
VERIFICATION_KEY = "transaction.partition.verification.enable"

# Key prefixes of Kafka's broker config namespace: a key under one of them is one of
# Kafka's (possibly not dynamic), anything else is a custom config.
KAFKA_KEY_PREFIXES = ("log.", "num.", "socket.", "offsets.", "group.", "transaction", "replica.",
                      "zookeeper.", "ssl.", "sasl.", "security.", "controller.", "process.",
                      "metadata.", "queued.", "background.", "message.", "compression.",
                      "unclean.", "min.insync", "inter.broker", "auto.", "delete.", "default.",
                      "broker.", "node.", "listener", "advertised.", "cluster.", "connections.",
                      "fetch.", "producer.", "quota.", "reserved.", "request.", "share.",
                      "authorizer.", "super.", "control.", "alter.", "create.", "leader.",
                      "follower.", "max.", "metric", "password.", "principal.", "remote.",
                      "kafka.", "client.", "sasl", "early.start", "eligible.", "telemetry.",
                      "unstable.", "config.", "initial.", "migration.", "replication.")  # fmt: skip

_LOG_FIELDS = {f.name.replace("_", ".") for f in fields(LogConfig)}

#: Broker key -> the topic key it is the cluster-wide default of, for every topic key
#: the partition logs apply (Kafka's DynamicLogConfig: the first synonym of each,
#: message.format.version excluded).
LOG_KEYS: dict[str, str] = {
    spec.synonyms[0][0]: name
    for name, spec in TOPIC_CONFIGS.items()
    if spec.synonyms and name in _LOG_FIELDS
}

#: The dynamic keys kt applies to a running broker.
KT_DYNAMIC: frozenset[str] = frozenset(LOG_KEYS) | frozenset(QUOTA_KEYS) | {VERIFICATION_KEY}

_SSL_RECONFIGURABLE = frozenset({
    "ssl.keystore.type", "ssl.keystore.location", "ssl.keystore.password", "ssl.key.password",
    "ssl.truststore.type", "ssl.truststore.location", "ssl.truststore.password",
    "ssl.keystore.certificate.chain", "ssl.keystore.key", "ssl.truststore.certificates",
})  # fmt: skip
_LISTENER_RECONFIGURABLE = _SSL_RECONFIGURABLE | frozenset({
    "advertised.listeners", "listeners", "listener.security.protocol.map",
    "principal.builder.class", "ssl.protocol", "ssl.provider", "ssl.cipher.suites",
    "ssl.enabled.protocols", "ssl.keymanager.algorithm", "ssl.trustmanager.algorithm",
    "ssl.endpoint.identification.algorithm", "ssl.secure.random.implementation",
    "ssl.client.auth", "ssl.engine.factory.class", "sasl.mechanism.inter.broker.protocol",
    "sasl.jaas.config", "sasl.enabled.mechanisms", "sasl.kerberos.service.name",
    "sasl.kerberos.kinit.cmd", "sasl.kerberos.ticket.renew.window.factor",
    "sasl.kerberos.ticket.renew.jitter", "sasl.kerberos.min.time.before.relogin",
    "sasl.kerberos.principal.to.local.rules", "sasl.login.refresh.window.factor",
    "sasl.login.refresh.window.jitter", "sasl.login.refresh.min.period.seconds",
    "sasl.login.refresh.buffer.seconds", "connections.max.reauth.ms",
    "max.connections", "max.connection.creation.rate", "num.network.threads",
})  # fmt: skip
_CLUSTER_LEVEL_LISTENER = frozenset({"max.connections", "max.connection.creation.rate",
                                     "num.network.threads"})  # fmt: skip
#: Kafka 3.8's AllDynamicConfigs: what DescribeConfigs reports as not read-only.
KAFKA_ALL_DYNAMIC: frozenset[str] = (
    frozenset(LOG_KEYS)
    | {"compression.type", "compression.gzip.level", "compression.lz4.level",
       "compression.zstd.level", "log.message.timestamp.difference.max.ms",
       "log.message.downconversion.enable", "log.local.retention.ms",
       "log.local.retention.bytes",
       # LogCleaner
       "log.cleaner.threads", "log.cleaner.dedupe.buffer.size",
       "log.cleaner.io.buffer.load.factor", "log.cleaner.io.buffer.size",
       "log.cleaner.io.max.bytes.per.second", "log.cleaner.backoff.ms",
       # thread pools
       "num.io.threads", "num.replica.fetchers", "num.recovery.threads.per.data.dir",
       "background.threads", "metric.reporters",
       # SocketServer
       "max.connections.per.ip", "max.connections.per.ip.overrides",
       # producer state, remote log
       "producer.id.expiration.ms", "transaction.partition.verification.enable",
       "remote.log.index.file.cache.total.size.bytes", "remote.fetch.max.wait.ms",
       "remote.log.manager.copy.max.bytes.per.second",
       "remote.log.manager.fetch.max.bytes.per.second"}
    | _LISTENER_RECONFIGURABLE
)  # fmt: skip
#: Kafka's per-broker-only configs (refused at the cluster-default level).
PER_BROKER_ONLY: frozenset[str] = _LISTENER_RECONFIGURABLE - _CLUSTER_LEVEL_LISTENER

#: Keys naming the same setting in other units, highest precedence first (Kafka's
#: DynamicBrokerConfig.brokerConfigSynonyms).
_SYNONYM_GROUPS: tuple[tuple[str, ...], ...] = (
    ("log.roll.ms", "log.roll.hours"),
    ("log.roll.jitter.ms", "log.roll.jitter.hours"),
    ("log.flush.interval.ms", "log.flush.scheduler.interval.ms"),
    ("log.retention.ms", "log.retention.minutes", "log.retention.hours"),
)


def broker_synonyms(name: str) -> list[str]:
    """`name` and the keys that set the same thing, highest precedence first."""
    for group in _SYNONYM_GROUPS:
        if name in group:
            # log.flush.scheduler.interval.ms only defaults log.flush.interval.ms.
            return list(group) if name != "log.flush.scheduler.interval.ms" else [name]
    if name.startswith("listener.name."):
        base = name.split(".", 3)[3] if name.count(".") >= 3 else name
        return [name, base]
    return [name]


def is_kafka_key(name: str) -> bool:
    """Whether `name` lies in Kafka's broker config namespace (else: a custom config)."""
    return name.startswith(KAFKA_KEY_PREFIXES)


def is_kafka_dynamic(name: str) -> bool:
    """Whether Kafka 3.8 lets `name` change at runtime (listener-prefixed keys too)."""
    return name in KAFKA_ALL_DYNAMIC or name in QUOTA_KEYS or name.startswith("listener.name.")


def _per_broker_only(name: str) -> bool:
    if name.startswith("listener.name."):
        return broker_synonyms(name)[-1] not in _CLUSTER_LEVEL_LISTENER
    return name in PER_BROKER_ONLY


def scala_set(names: Iterable[str]) -> str:
    """A set of names as Kafka's messages print a Scala Set (`Set(a, b)`; Scala's
    HashSet beyond four elements)."""
    items = sorted(set(names))
    return ("Set(" if len(items) <= 4 else "HashSet(") + ", ".join(items) + ")"


def parse_value(name: str, value: str) -> str:
    """A kt-dynamic key's value checked with Kafka's type and range (InvalidConfig
    with ConfigDef's message otherwise), returned as Kafka prints it."""
    text = value.strip()
    if name == VERIFICATION_KEY:
        # ConfigDef's BOOLEAN: true or false, any case.
        if text.lower() not in ("true", "false"):
            raise InvalidConfig(
                f"Invalid value {value} for configuration {name}: "
                "Expected value to be either true or false"
            )
        return text.lower()
    if name in QUOTA_KEYS:
        try:
            number = int(text, 10)
        except ValueError:
            number = None
        if number is None or not -(2**63) <= number <= LONG_MAX:
            raise InvalidConfig(
                f"Invalid value {value} for configuration {name}: Not a number of type LONG"
            )
        if number < 0:
            raise InvalidConfig(
                f"Invalid value {value} for configuration {name}: Value must be at least 0"
            )
        return str(number)
    topic_key = LOG_KEYS[name]
    try:
        return to_string(topic_key, parse(topic_key, value))
    except InvalidConfig as exc:
        # The topic table words it for the topic key; Kafka names the broker key.
        prefix = f" for configuration {topic_key}:"
        raise InvalidConfig(str(exc).replace(prefix, f" for configuration {name}:", 1)) from None


def validate_change(props: Mapping[str, str], per_broker: bool) -> None:
    """Kafka's DynamicBrokerConfig.validateConfigs for a complete new set of dynamic
    configs of one entity (a broker, or the cluster default when not `per_broker`),
    in Kafka's order; raises InvalidRequestError with Kafka's message (ZooKeeper-mode
    brokers answer INVALID_REQUEST, KAFKA-13609)."""
    non_dynamic = [k for k in props if is_kafka_key(k) and not is_kafka_dynamic(k)]
    if non_dynamic:
        raise InvalidRequestError(
            f"Cannot update these configs dynamically: {scala_set(non_dynamic)}"
        )
    base_security = [k for k in props if k in _SSL_RECONFIGURABLE]
    if base_security:
        raise InvalidRequestError(
            "These security configs can be dynamically updated only per-listener using the "
            f"listener prefix: {scala_set(base_security)}"
        )
    for key, value in props.items():
        if key in KT_DYNAMIC:
            try:
                parse_value(key, value)
            except InvalidConfig as exc:
                raise InvalidRequestError(str(exc)) from None
    if not per_broker:
        only = [k for k in props if _per_broker_only(k)]
        if only:
            raise InvalidRequestError(
                "Cannot update these configs at default cluster level, broker id must be "
                f"specified: {scala_set(only)}"
            )
    unsupported = [
        k for k in props if is_kafka_key(k) and k not in KT_DYNAMIC and not is_reconfigurable(k)
    ]
    if unsupported:
        raise InvalidRequestError(
            f"Cannot update these configs dynamically: {scala_set(unsupported)} (kt applies "
            "only these broker configs at runtime: the log.* topic defaults, message.max.bytes, "
            "min.insync.replicas, unclean.leader.election.enable, "
            "transaction.partition.verification.enable, the replication and log-dir "
            "move rates and the listener-prefixed keystore and truststore settings)"
        )


def usable(props: Mapping[str, str], per_broker: bool, what: str) -> dict[str, str]:
    """The stored dynamic configs a broker applies (Kafka's fromPersistentProps):
    keys that cannot be dynamic, per-broker keys at the default level and invalid
    values are dropped with an error in the log; custom keys are kept."""
    out: dict[str, str] = {}
    dropped: list[str] = []
    for key, value in props.items():
        if is_kafka_key(key) and key not in KT_DYNAMIC and not is_reconfigurable(key):
            dropped.append(key)
            continue
        if not per_broker and _per_broker_only(key):
            dropped.append(key)
            continue
        if key in KT_DYNAMIC:
            try:
                parse_value(key, value)
            except InvalidConfig:
                dropped.append(key)
                continue
        out[key] = value
    if dropped:
        log.error("dynamic %s configs ignored (not dynamic or invalid): %s", what, sorted(dropped))
    return out


def overlay(props: dict[str, str], override: Mapping[str, str]) -> None:
    """Apply a higher layer to `props`: each key set there hides its synonyms below
    (Kafka's overrideProps)."""
    for key, value in override.items():
        for synonym in broker_synonyms(key):
            props.pop(synonym, None)
        props[key] = value
