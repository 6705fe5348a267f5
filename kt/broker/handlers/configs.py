"""DescribeConfigs, AlterConfigs and IncrementalAlterConfigs.

Topic resources (type 2) have Kafka's full topic config key set (see
kt.broker.topic_configs): an override is DYNAMIC_TOPIC_CONFIG, a value inherited
from a server key set in the config file or with --override is
STATIC_BROKER_CONFIG, anything else DEFAULT_CONFIG. Alterations are validated
as a whole, then persisted in the cluster metadata and applied live to the
topic's partition logs.

Broker resources (type 4) are named by the node id (that broker's config, every
key with its source: DYNAMIC_BROKER_CONFIG, DYNAMIC_DEFAULT_BROKER_CONFIG,
STATIC_BROKER_CONFIG or DEFAULT_CONFIG) or "" (the cluster-wide dynamic defaults
alone). A node id must be the id of the broker the request was sent to, as in
Kafka. Alterations are checked as Kafka 3.x's ConfigAdminManager preprocesses
them (INVALID_REQUEST for a refused key or value), then written to
/config/brokers/<id> or /config/brokers/<default> with a change notification;
every broker concerned applies them live (kt.broker.dynamic_config). Broker
loggers (type 8) are described from Python's logging levels and are read-only.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Mapping
from typing import Any

from kt.broker import dynamic_config as dyn
from kt.broker.authorization import authorize, authorize_cluster
from kt.broker.config import DEFAULTS, log_properties
from kt.broker.errors import (
    BrokerError,
    InvalidRequestError,
    ResourceError,
    TopicError,
    error_code_for,
)
from kt.broker.handlers import RequestContext, handles
from kt.broker.handlers.readiness import NOT_READY_TOPIC, not_ready_message, ready
from kt.broker.metadata_store import topic_name_problem
from kt.broker.security.acl import AclOperation, ResourceType
from kt.broker.security.keystore_reload import is_reconfigurable
from kt.broker.security.keystore_reload import validate_change as validate_keystore_change
from kt.broker.security.listeners import TLS_PROTOCOLS, ListenerConfig
from kt.broker.security.tls import TlsConfigError
from kt.broker.topic_configs import (
    LIST_KEYS,
    TOPIC_CONFIGS,
    ConfigSource,
    ConfigType,
    DescribedConfig,
    InvalidConfig,
    describe_topic,
    list_parts,
    validate_topic_configs,
)
from kt.protocol import ErrorCode, Struct, apis
from kt.storage.log_config import LogConfig

log = logging.getLogger("kt.broker.handlers.configs")

TOPIC = 2
BROKER = 4
BROKER_LOGGER = 8

SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3
_OP_NAMES = {SET: "SET", DELETE: "DELETE", APPEND: "APPEND", SUBTRACT: "SUBTRACT"}


# --- DescribeConfigs --------------------------------------------------------------


@handles(apis.DESCRIBE_CONFIGS.key, (0, 4))
async def describe_configs(ctx: RequestContext, request: Struct) -> Any:
    """Describe each resource's configs (all, or the requested keys)."""
    version = ctx.version
    synonyms = version >= 1 and bool(request.include_synonyms)
    docs = version >= 3 and bool(request.include_documentation)
    results = []
    for res in request.resources:
        out: dict[str, Any] = {"error_code": ErrorCode.NONE, "error_message": None,
                               "resource_type": res.resource_type,
                               "resource_name": res.resource_name, "configs": []}  # fmt: skip
        try:
            _authorize_configs(ctx, res.resource_type, res.resource_name,
                               AclOperation.DESCRIBE_CONFIGS)  # fmt: skip
            if res.resource_type == TOPIC:
                # As Kafka's brokers: a topic's config as ZooKeeper holds it now.
                await ctx.services.topic_configs.refresh(res.resource_name)
            entries = _describe(ctx, res.resource_type, res.resource_name)
        except ResourceError as exc:
            out.update(error_code=error_code_for(exc), error_message=exc.message)
            results.append(out)
            continue
        keys = res.configuration_keys
        if keys:
            wanted = set(keys)
            entries = [e for e in entries if e.name in wanted]
        out["configs"] = [_entry(e, synonyms, docs) for e in entries]
        results.append(out)
    return apis.DESCRIBE_CONFIGS.response(throttle_time_ms=0, results=results)


def _entry(e: DescribedConfig, synonyms: bool, docs: bool) -> dict[str, Any]:
    return {
        "name": e.name,
        "value": e.value,
        "read_only": e.read_only,
        "is_default": e.source == ConfigSource.DEFAULT_CONFIG,
        "config_source": int(e.source),
        "is_sensitive": e.is_sensitive,
        "synonyms": [{"name": n, "value": v, "source": int(s)} for n, v, s in e.synonyms]
        if synonyms
        else [],
        "config_type": int(e.config_type),
        "documentation": e.documentation if docs else None,
    }


def _describe(ctx: RequestContext, rtype: int, name: str) -> list[DescribedConfig]:
    s = ctx.services
    if rtype == TOPIC:
        info = _topic(ctx, name)
        cfg = s.broker_config()
        return describe_topic(info.configs, cfg.given(), cfg.dynamic_defaults, cfg.dynamic_own)
    if rtype == BROKER:
        if not name:
            return _describe_broker_defaults(ctx)
        _check_broker_id(ctx, name)
        return _describe_broker(ctx)
    if rtype == BROKER_LOGGER:
        if not name:
            raise ResourceError(ErrorCode.INVALID_REQUEST, "Broker id must not be empty")
        _check_broker_id(ctx, name, allow_empty=False)
        return _describe_loggers()
    raise ResourceError(ErrorCode.INVALID_REQUEST, f"Unsupported resource type: {rtype}")


def _topic(ctx: RequestContext, name: str) -> Any:
    problem = topic_name_problem(name)
    if problem:
        raise ResourceError(ErrorCode.INVALID_TOPIC_EXCEPTION, problem)
    info = ctx.services.topics.topics.get(name)
    if info is None:
        if not ready(ctx):
            raise ResourceError(NOT_READY_TOPIC, not_ready_message(ctx))
        raise ResourceError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"Topic '{name}' does not exist.")
    return info


def _check_broker_id(ctx: RequestContext, name: str, allow_empty: bool = True) -> None:
    try:
        node = int(name)
    except ValueError:
        raise ResourceError(
            ErrorCode.INVALID_REQUEST, f"Broker id must be an integer, but it is: {name}"
        ) from None
    if node != ctx.services.node.node_id:
        expected = (
            f"{ctx.services.node.node_id} or empty string"
            if allow_empty
            else ctx.services.node.node_id
        )
        raise ResourceError(
            ErrorCode.INVALID_REQUEST,
            f"Unexpected broker id, expected {expected}, but received {name}",
        )


#: Kafka's PASSWORD-typed keys that hold key material inline (a private key, or
#: certificates a deployment may treat as secret): never shown, like passwords.
_KEY_MATERIAL = ("ssl.keystore.key", "ssl.keystore.certificate.chain",
                 "ssl.truststore.certificates")  # fmt: skip


def _sensitive(key: str) -> bool:
    return (
        "password" in key
        or key.endswith(".jaas.config")
        or "secret" in key
        or key.endswith(_KEY_MATERIAL)
    )


def _guess_type(key: str, value: str) -> ConfigType:
    if value in ("true", "false"):
        return ConfigType.BOOLEAN
    try:
        int(value)
    except ValueError:
        return ConfigType.LIST if key.endswith(("listeners", ".dirs")) else ConfigType.STRING
    return ConfigType.LONG if key.endswith((".ms", ".bytes")) else ConfigType.INT


def _broker_defaults() -> tuple[dict[str, str], dict[str, ConfigType]]:
    """The DEFAULT_CONFIG layer (kt's server defaults and the broker synonyms of the
    topic configs with Kafka's defaults) and the types known for broker keys.

    Where a setting has synonyms in other units Kafka's default sits on the last
    one (log.retention.hours=168, log.roll.hours=168, ...) and the others have no
    default, so they are described with a null value unless set."""
    values = dict(DEFAULTS)
    types: dict[str, ConfigType] = {key: ConfigType.LONG for key in dyn.QUOTA_KEYS}
    for spec in TOPIC_CONFIGS.values():
        if not spec.synonyms:
            continue
        types[spec.synonyms[0][0]] = spec.type
        for key, unit in spec.synonyms:
            types.setdefault(key, ConfigType.INT if unit != 1 else spec.type)
        key, factor = spec.synonyms[-1]
        default = spec.default if factor == 1 else str(int(spec.default) // factor)
        values.setdefault(key, default)
    return values, types


def _broker_entry(
    name: str,
    layers: list[tuple[Mapping[str, str], ConfigSource]],
    types: dict[str, ConfigType],
    value: str | None = None,
) -> DescribedConfig:
    """One broker config as Kafka's ConfigHelper.createBrokerConfigEntry describes it:
    its synonyms source by source (highest precedence first), from the first one
    with its own name on; the first is the source. Keys of no known type are custom
    configs, which Kafka reports as sensitive."""
    known = name in types or name in DEFAULTS or dyn.is_kafka_key(name)
    sensitive = _sensitive(name) or not known
    synonyms: list[tuple[str, str | None, ConfigSource]] = []
    for layer, source in layers:
        for key in dyn.broker_synonyms(name):
            if key in layer:
                synonyms.append((key, None if sensitive else layer[key], source))
    while synonyms and synonyms[0][0] != name:
        synonyms.pop(0)
    if value is None and synonyms:
        value = next(layer[name] for layer, src in layers if src == synonyms[0][2])
    if sensitive:
        value = None
    if not known:
        config_type = ConfigType.UNKNOWN
    elif sensitive:
        config_type = ConfigType.PASSWORD
    else:
        config_type = types.get(name) or _guess_type(name, value or "")
    return DescribedConfig(
        name,
        value,
        synonyms[0][2] if synonyms else ConfigSource.DEFAULT_CONFIG,
        read_only=not (name in dyn.KAFKA_ALL_DYNAMIC or name.startswith("listener.name.")),
        is_sensitive=sensitive,
        synonyms=tuple(synonyms),
        config_type=config_type,
    )


def _describe_broker(ctx: RequestContext) -> list[DescribedConfig]:
    """This broker's config: every key kt knows or has a value for, each with its
    effective value and where it comes from."""
    cfg = ctx.services.broker_config()
    defaults, types = _broker_defaults()
    layers = [
        (cfg.dynamic_own, ConfigSource.DYNAMIC_BROKER_CONFIG),
        (cfg.dynamic_defaults, ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG),
        (cfg.given(), ConfigSource.STATIC_BROKER_CONFIG),
        (defaults, ConfigSource.DEFAULT_CONFIG),
    ]
    names = set(types).union(*(layer for layer, _ in layers))
    names -= {k for k in dyn.QUOTA_KEYS if not any(k in layer for layer, _ in layers)}
    return [_broker_entry(name, layers, types) for name in sorted(names)]


def _describe_broker_defaults(ctx: RequestContext) -> list[DescribedConfig]:
    """The cluster-wide dynamic defaults alone, as this broker applies them (Kafka
    describes the "" resource from currentDynamicDefaultConfigs)."""
    cfg = ctx.services.broker_config()
    _, types = _broker_defaults()
    layers = [(cfg.dynamic_defaults, ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG)]
    return [
        _broker_entry(name, layers, types, cfg.dynamic_defaults[name])
        for name in sorted(cfg.dynamic_defaults)
    ]


def _describe_loggers() -> list[DescribedConfig]:
    kt_loggers = [n for n in logging.root.manager.loggerDict if n == "kt" or n.startswith("kt.")]
    names = ["root", *sorted(kt_loggers)]
    out = []
    for n in names:
        logger = logging.getLogger() if n == "root" else logging.getLogger(n)
        level = logging.getLevelName(logger.getEffectiveLevel())
        out.append(
            DescribedConfig(
                n,
                "WARN" if level == "WARNING" else level,
                ConfigSource.DYNAMIC_BROKER_LOGGER_CONFIG,
                read_only=True,
                config_type=ConfigType.STRING,
            )
        )
    return out


# --- AlterConfigs and IncrementalAlterConfigs ----------------------------------------


def _authorize_configs(ctx: RequestContext, rtype: int, name: str, op: AclOperation) -> None:
    """DESCRIBE_CONFIGS / ALTER_CONFIGS on the topic, or on the cluster for broker,
    broker-logger and client-metrics resources; refused with the default text."""
    if rtype == TOPIC:
        if not authorize(ctx, op, ResourceType.TOPIC, name):
            raise ResourceError(ErrorCode.TOPIC_AUTHORIZATION_FAILED, "Topic authorization failed.")
    elif not authorize_cluster(ctx, op):
        raise ResourceError(ErrorCode.CLUSTER_AUTHORIZATION_FAILED, "Cluster authorization failed.")


def _duplicates(resources: Any) -> set[tuple[int, str]]:
    counts = Counter((r.resource_type, r.resource_name) for r in resources)
    return {k for k, n in counts.items() if n > 1}


@handles(apis.ALTER_CONFIGS.key, (0, 2))
async def alter_configs(ctx: RequestContext, request: Struct) -> Any:
    """Replace each resource's overrides with the given set (the legacy API)."""
    dups = _duplicates(request.resources)
    validate_only = bool(request.validate_only)
    responses = []
    for res in request.resources:
        code, message = ErrorCode.NONE, None
        try:
            if (res.resource_type, res.resource_name) in dups:
                raise ResourceError(ErrorCode.INVALID_REQUEST, DUPLICATE_RESOURCE)
            _authorize_configs(ctx, res.resource_type, res.resource_name,
                               AclOperation.ALTER_CONFIGS)  # fmt: skip
            if res.resource_type == BROKER:
                await _alter_broker_legacy(ctx, res, validate_only)
            else:
                new = {c.name: c.value for c in res.configs}
                await _alter(ctx, res.resource_type, res.resource_name, new, validate_only)
        except ResourceError as exc:
            code, message = error_code_for(exc), exc.message
        responses.append({"error_code": code, "error_message": message,
                          "resource_type": res.resource_type,
                          "resource_name": res.resource_name})  # fmt: skip
    return apis.ALTER_CONFIGS.response(throttle_time_ms=0, responses=responses)


@handles(apis.INCREMENTAL_ALTER_CONFIGS.key, (0, 1))
async def incremental_alter_configs(ctx: RequestContext, request: Struct) -> Any:
    """Apply SET / DELETE / APPEND / SUBTRACT operations to each resource's overrides."""
    dups = _duplicates(request.resources)
    validate_only = bool(request.validate_only)
    responses = []
    for res in request.resources:
        code, message = ErrorCode.NONE, None
        try:
            if (res.resource_type, res.resource_name) in dups:
                raise ResourceError(ErrorCode.INVALID_REQUEST, DUPLICATE_RESOURCE)
            _authorize_configs(ctx, res.resource_type, res.resource_name,
                               AclOperation.ALTER_CONFIGS)  # fmt: skip
            keys = Counter(c.name for c in res.configs)
            if any(n > 1 for n in keys.values()):
                raise ResourceError(ErrorCode.INVALID_REQUEST, "Error due to duplicate config keys")
            if res.resource_type == BROKER:
                await _alter_broker_incremental(ctx, res, validate_only)
                responses.append({"error_code": code, "error_message": message,
                                  "resource_type": res.resource_type,
                                  "resource_name": res.resource_name})  # fmt: skip
                continue
            for c in res.configs:
                if c.config_operation not in _OP_NAMES:
                    raise ResourceError(
                        ErrorCode.INVALID_REQUEST,
                        f"Unknown config operation {c.config_operation} for {c.name}",
                    )
            ops = [(c.name, c.config_operation, c.value) for c in res.configs]
            if res.resource_type == TOPIC:
                await ctx.services.topic_configs.refresh(res.resource_name)
                info = _topic(ctx, res.resource_name)
                new = _apply_ops(dict(info.configs), ops)
            else:
                new = {name: value for name, _, value in ops} if ops else {}
            await _alter(
                ctx, res.resource_type, res.resource_name, new, validate_only, incremental=True
            )
        except ResourceError as exc:
            code, message = error_code_for(exc), exc.message
        responses.append({"error_code": code, "error_message": message,
                          "resource_type": res.resource_type,
                          "resource_name": res.resource_name})  # fmt: skip
    return apis.INCREMENTAL_ALTER_CONFIGS.response(throttle_time_ms=0, responses=responses)


# --- broker resources ----------------------------------------------------------------

#: Kafka 3.x's answer to a resource named twice in one request.
DUPLICATE_RESOURCE = "Each resource must appear at most once."
#: Kafka's LIST-typed broker keys (APPEND / SUBTRACT are allowed on these only).
_BROKER_LIST_KEYS = frozenset({
    "log.cleanup.policy", "listeners", "advertised.listeners", "metric.reporters",
    "ssl.cipher.suites", "ssl.enabled.protocols", "sasl.enabled.mechanisms", "log.dirs",
})  # fmt: skip


async def _alter_broker_legacy(ctx: RequestContext, res: Any, validate_only: bool) -> None:
    """AlterConfigs on a broker: the given set replaces the entity's dynamic configs."""
    nulls = [c.name for c in res.configs if c.value is None]
    if nulls:
        raise ResourceError(
            ErrorCode.INVALID_REQUEST, "Null value not supported for : " + ", ".join(nulls)
        )
    name = res.resource_name
    _check_alter_broker_id(ctx, name)
    await _change_broker(ctx, name, {c.name: c.value for c in res.configs}, validate_only)


async def _alter_broker_incremental(ctx: RequestContext, res: Any, validate_only: bool) -> None:
    """IncrementalAlterConfigs on a broker (Kafka's ConfigAdminManager.preprocess and
    prepareIncrementalConfigs over the stored dynamic configs)."""
    nulls = [c.name for c in res.configs if c.config_operation != DELETE and c.value is None]
    if nulls:
        raise ResourceError(
            ErrorCode.INVALID_REQUEST, "Null value not supported for : " + ", ".join(nulls)
        )
    name = res.resource_name
    _check_alter_broker_id(ctx, name)
    stored = await _stored_broker_configs(ctx, name)
    current = dyn.usable(stored, bool(name), "stored")
    for c in res.configs:
        if c.config_operation not in _OP_NAMES:
            raise ResourceError(
                ErrorCode.INVALID_REQUEST, f"Unknown operations type {c.config_operation}"
            )
    for c in res.configs:
        op, key = c.config_operation, c.name
        if op == SET:
            current[key] = c.value
        elif op == DELETE:
            current.pop(key, None)
        else:
            if not (dyn.is_kafka_key(key) or key in DEFAULTS):
                # Kafka looks the key's type up in KafkaConfig's table and fails on a
                # key it does not have (an unexpected error there).
                raise ResourceError(ErrorCode.UNKNOWN_SERVER_ERROR, None)
            if key not in _BROKER_LIST_KEYS:
                verb = "append" if op == APPEND else "subtract"
                raise ResourceError(
                    ErrorCode.INVALID_CONFIG,
                    f"Config value {verb} is not allowed for config key: {key}",
                )
            default = TOPIC_CONFIGS[dyn.LOG_KEYS[key]].default if key in dyn.LOG_KEYS else ""
            old = current.get(key, default)
            items = old.split(",") if old else []
            given = (c.value or "").split(",")
            if op == APPEND:
                items += [v for v in given if v not in items]
            else:
                items = [v for v in items if v not in given]
            current[key] = ",".join(items)
    await _change_broker(ctx, name, current, validate_only)


def _check_alter_broker_id(ctx: RequestContext, name: str) -> None:
    """A node id names the broker the request was sent to (Kafka's
    validateResourceNameIsCurrentNodeId); "" is the cluster default."""
    if not name:
        return
    try:
        node = int(name)
    except ValueError:
        raise ResourceError(
            ErrorCode.INVALID_REQUEST, f"Node id must be an integer, but it is: {name}"
        ) from None
    if node != ctx.services.node.node_id:
        raise ResourceError(
            ErrorCode.INVALID_REQUEST,
            f"Unexpected broker id, expected {ctx.services.node.node_id}, but received {name}",
        )


async def _stored_broker_configs(ctx: RequestContext, name: str) -> dict[str, str]:
    """A broker's (or with an empty name, the cluster default's) dynamic configs."""
    return await ctx.services.cluster.cluster_store.get_entity_config(
        "brokers", name or dyn.DEFAULT_ENTITY
    )


async def _change_broker(
    ctx: RequestContext, name: str, new: dict[str, str], validate_only: bool
) -> None:
    """Validate an entity's complete new dynamic config set, then (unless validating
    only) store it with a change notification every broker follows."""
    try:
        dyn.validate_change(new, per_broker=bool(name))
        _check_effective(ctx, name, new)
    except BrokerError as exc:
        raise ResourceError(error_code_for(exc), str(exc)) from None
    if validate_only:
        return
    await ctx.services.cluster.cluster_store.set_entity_config(
        "brokers", name or dyn.DEFAULT_ENTITY, new
    )
    log.info(
        "updated dynamic configs of %s: %s",
        f"broker {name}" if name else "the cluster default", sorted(new),
    )  # fmt: skip


def _check_effective(ctx: RequestContext, name: str, new: dict[str, str]) -> None:
    """The broker config the change would give this broker must be valid as a whole
    (Kafka's processReconfiguration, e.g. min > max compaction lag)."""
    cfg = ctx.services.broker_config()
    props = dict(DEFAULTS)
    dyn.overlay(props, cfg.given())
    dyn.overlay(props, cfg.dynamic_defaults if name else new)
    dyn.overlay(props, new if name else cfg.dynamic_own)
    if name and any(is_reconfigurable(k) for k in new):
        # a replaced keystore must load and keep the listener's identity (KIP-226)
        endpoints = cfg.listener_settings.listeners if cfg.listener_settings else ()
        tls = [
            ListenerConfig(cfg.props, ep.name, ep.protocol)
            for ep in endpoints
            if ep.protocol in TLS_PROTOCOLS
        ]
        try:
            validate_keystore_change({**cfg.props, **cfg.dynamic_own}, {**cfg.props, **new}, tls)
        except TlsConfigError as exc:
            raise InvalidRequestError(str(exc)) from None
    log_props = {k: v for k, v in props.items() if k in dyn.LOG_KEYS or k.startswith("log.")}
    try:
        LogConfig.from_properties(log_properties(log_props))
    except Exception as exc:
        raise InvalidRequestError(
            f"Invalid value {exc} for configuration Invalid dynamic configuration"
        ) from None


def _apply_ops(
    current: dict[str, str], ops: list[tuple[str, int, str | None]]
) -> dict[str, str | None]:
    """The override set after the operations (Kafka's incrementalAlterConfigResource)."""
    new: dict[str, str | None] = dict(current)
    for name, op, value in ops:
        if op == SET:
            if value is None:
                new.pop(name, None)
            else:
                new[name] = value
        elif op == DELETE:
            new.pop(name, None)
        else:
            if name not in LIST_KEYS:
                raise ResourceError(
                    ErrorCode.INVALID_CONFIG,
                    f"Can't {_OP_NAMES[op]} to key {name} because its type is not LIST.",
                )
            parts = list_parts(name, new.get(name))
            for item in (value or "").split(","):
                item = item.strip()
                if op == APPEND:
                    if item and item not in parts:
                        parts.append(item)
                elif item in parts:
                    parts.remove(item)
            new[name] = ",".join(parts)
    return new


async def _alter(
    ctx: RequestContext,
    rtype: int,
    name: str,
    configs: dict[str, str | None],
    validate_only: bool,
    *,
    incremental: bool = False,
) -> None:
    s = ctx.services
    if rtype == TOPIC:
        _topic(ctx, name)
        try:
            clean = validate_topic_configs(configs)
        except InvalidConfig as exc:
            raise ResourceError(ErrorCode.INVALID_CONFIG, str(exc)) from None
        if validate_only:
            return
        try:
            await s.cluster.admin().alter_topic_configs(name, clean)
        except TopicError as exc:
            raise ResourceError(error_code_for(exc), exc.message) from None
        return
    if rtype == BROKER_LOGGER and incremental:
        raise ResourceError(
            ErrorCode.INVALID_REQUEST,
            "kt does not support changing broker log levels at runtime",
        )
    raise ResourceError(ErrorCode.INVALID_REQUEST, f"Unsupported resource type: {rtype}")
