"""DescribeConfigs, AlterConfigs and IncrementalAlterConfigs.

Topic resources (type 2) have Kafka's full topic config key set (see
kt.broker.topic_configs): an override is DYNAMIC_TOPIC_CONFIG, a value inherited
from a server key set in the config file or with --override is
STATIC_BROKER_CONFIG, anything else DEFAULT_CONFIG. Alterations are validated
as a whole, then persisted in the cluster metadata and applied live to the
topic's partition logs.

Broker resources (type 4, named by the node id, or "" for the cluster-wide
dynamic defaults) are described from the server config; every broker config is
read-only because kt has no dynamic broker configs: altering one is answered
with INVALID_REQUEST saying so. Broker loggers (type 8) are described from
Python's logging levels and are read-only too.
"""

from __future__ import annotations

import logging
from collections import Counter
from typing import Any

from kt.broker.config import DEFAULTS
from kt.broker.config_manager import DEFAULT_BROKER
from kt.broker.handlers import RequestContext, handles
from kt.broker.metadata_store import topic_name_problem
from kt.broker.replication.quota import DYNAMIC_BROKER_CONFIGS
from kt.broker.topic_admin import TopicError
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

TOPIC = 2
BROKER = 4
BROKER_LOGGER = 8

SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3
_OP_NAMES = {SET: "SET", DELETE: "DELETE", APPEND: "APPEND", SUBTRACT: "SUBTRACT"}

NO_DYNAMIC_BROKER_CONFIGS = (
    "kt supports only the replication throttle rates as dynamic broker configs; set the "
    "others in server.properties or with --override and restart the broker"
)


class ResourceError(Exception):
    """A resource answered with an error code and message."""

    def __init__(self, code: ErrorCode, message: str | None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


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
            if res.resource_type == TOPIC:
                # As Kafka's brokers: a topic's config as ZooKeeper holds it now.
                await ctx.broker.refresh_topic_configs(res.resource_name)
            entries = _describe(ctx, res.resource_type, res.resource_name)
        except ResourceError as exc:
            out.update(error_code=exc.code, error_message=exc.message)
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
    broker = ctx.broker
    if rtype == TOPIC:
        info = _topic(ctx, name)
        return describe_topic(info.configs, broker.config_given())
    if rtype == BROKER:
        if not name:
            return []  # no dynamic cluster-wide defaults exist
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
    info = ctx.broker.metadata.topics.get(name)
    if info is None:
        raise ResourceError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"Topic '{name}' does not exist.")
    return info


def _check_broker_id(ctx: RequestContext, name: str, allow_empty: bool = True) -> None:
    try:
        node = int(name)
    except ValueError:
        raise ResourceError(
            ErrorCode.INVALID_REQUEST, f"Broker id must be an integer, but it is: {name}"
        ) from None
    if node != ctx.broker.node_id:
        expected = f"{ctx.broker.node_id} or empty string" if allow_empty else ctx.broker.node_id
        raise ResourceError(
            ErrorCode.INVALID_REQUEST,
            f"Unexpected broker id, expected {expected}, but received {name}",
        )


def _sensitive(key: str) -> bool:
    return "password" in key or key.endswith(".jaas.config") or "secret" in key


def _guess_type(key: str, value: str) -> ConfigType:
    if value in ("true", "false"):
        return ConfigType.BOOLEAN
    try:
        int(value)
    except ValueError:
        return ConfigType.LIST if key.endswith(("listeners", ".dirs")) else ConfigType.STRING
    return ConfigType.LONG if key.endswith((".ms", ".bytes")) else ConfigType.INT


def _describe_broker(ctx: RequestContext) -> list[DescribedConfig]:
    """The server config: every key kt has a value for, plus the broker-side
    synonyms of the topic configs with their defaults."""
    broker = ctx.broker
    given = broker.config_given()
    values: dict[str, tuple[str, ConfigSource]] = {}
    for key, value in broker.config.props.items():
        src = ConfigSource.STATIC_BROKER_CONFIG if key in given else ConfigSource.DEFAULT_CONFIG
        values[key] = (value, src)
    types: dict[str, ConfigType] = {}
    for spec in TOPIC_CONFIGS.values():
        if not spec.synonyms:
            continue
        primary, factor = spec.synonyms[0]
        types[primary] = spec.type
        for key, unit in spec.synonyms:
            types.setdefault(key, ConfigType.INT if unit != 1 else spec.type)
        if primary not in values:
            default = spec.default if factor == 1 else str(int(spec.default) // factor)
            values[primary] = (default, ConfigSource.DEFAULT_CONFIG)
    throttles = broker.replication_throttles
    for key in DYNAMIC_BROKER_CONFIGS:
        if key in throttles.dynamic_own:
            values[key] = (throttles.dynamic_own[key], ConfigSource.DYNAMIC_BROKER_CONFIG)
        elif key in throttles.dynamic_defaults:
            values[key] = (
                throttles.dynamic_defaults[key],
                ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG,
            )
    out = []
    for key in sorted(values):
        value, src = values[key]
        sensitive = _sensitive(key)
        shown = None if sensitive else value
        syn: list[tuple[str, str | None, ConfigSource]] = [(key, shown, src)]
        if src == ConfigSource.STATIC_BROKER_CONFIG and key in DEFAULTS:
            syn.append((key, DEFAULTS[key], ConfigSource.DEFAULT_CONFIG))
        out.append(
            DescribedConfig(
                key,
                shown,
                src,
                read_only=key not in DYNAMIC_BROKER_CONFIGS,
                is_sensitive=sensitive,
                synonyms=tuple(syn),
                config_type=ConfigType.PASSWORD
                if sensitive
                else types.get(key, _guess_type(key, value)),
                documentation=None,
            )
        )
    return out


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


def _duplicates(resources: Any) -> set[tuple[int, str]]:
    counts = Counter((r.resource_type, r.resource_name) for r in resources)
    return {k for k, n in counts.items() if n > 1}


@handles(apis.ALTER_CONFIGS.key, (0, 2))
async def alter_configs(ctx: RequestContext, request: Struct) -> Any:
    """Replace each resource's overrides with the given set (the legacy API)."""
    dups = _duplicates(request.resources)
    responses = []
    for res in request.resources:
        code, message = ErrorCode.NONE, None
        try:
            if (res.resource_type, res.resource_name) in dups:
                raise ResourceError(ErrorCode.INVALID_REQUEST, "Duplicate resource.")
            new = {c.name: c.value for c in res.configs}
            await _alter(
                ctx, res.resource_type, res.resource_name, new, bool(request.validate_only)
            )
        except ResourceError as exc:
            code, message = exc.code, exc.message
        responses.append({"error_code": code, "error_message": message,
                          "resource_type": res.resource_type,
                          "resource_name": res.resource_name})  # fmt: skip
    return apis.ALTER_CONFIGS.response(throttle_time_ms=0, responses=responses)


@handles(apis.INCREMENTAL_ALTER_CONFIGS.key, (0, 1))
async def incremental_alter_configs(ctx: RequestContext, request: Struct) -> Any:
    """Apply SET / DELETE / APPEND / SUBTRACT operations to each resource's overrides."""
    dups = _duplicates(request.resources)
    responses = []
    for res in request.resources:
        code, message = ErrorCode.NONE, None
        try:
            if (res.resource_type, res.resource_name) in dups:
                raise ResourceError(ErrorCode.INVALID_REQUEST, "Duplicate resource.")
            keys = Counter(c.name for c in res.configs)
            if any(n > 1 for n in keys.values()):
                raise ResourceError(ErrorCode.INVALID_REQUEST, "Error due to duplicate config keys")
            for c in res.configs:
                if c.config_operation not in _OP_NAMES:
                    raise ResourceError(
                        ErrorCode.INVALID_REQUEST,
                        f"Unknown config operation {c.config_operation} for {c.name}",
                    )
            ops = [(c.name, c.config_operation, c.value) for c in res.configs]
            if res.resource_type == TOPIC:
                await ctx.broker.refresh_topic_configs(res.resource_name)
                info = _topic(ctx, res.resource_name)
                new = _apply_ops(dict(info.configs), ops)
            elif res.resource_type == BROKER:
                current = await _dynamic_broker_configs(ctx, res.resource_name)
                new = _apply_ops(current, ops)
            else:
                new = {name: value for name, _, value in ops} if ops else {}
            await _alter(
                ctx, res.resource_type, res.resource_name, new,
                bool(request.validate_only), incremental=True,
            )  # fmt: skip
        except ResourceError as exc:
            code, message = exc.code, exc.message
        responses.append({"error_code": code, "error_message": message,
                          "resource_type": res.resource_type,
                          "resource_name": res.resource_name})  # fmt: skip
    return apis.INCREMENTAL_ALTER_CONFIGS.response(throttle_time_ms=0, responses=responses)


async def _dynamic_broker_configs(ctx: RequestContext, name: str) -> dict[str, str]:
    """A broker's (or with an empty name, the cluster default's) dynamic configs."""
    membership = ctx.broker.membership
    if membership is None:
        return {}
    return await membership.cluster.get_entity_config("brokers", name or DEFAULT_BROKER)


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
    broker = ctx.broker
    if rtype == TOPIC:
        _topic(ctx, name)
        try:
            clean = validate_topic_configs(configs)
        except InvalidConfig as exc:
            raise ResourceError(ErrorCode.INVALID_CONFIG, str(exc)) from None
        if validate_only:
            return
        try:
            await broker.admin.alter_topic_configs(name, clean)
        except TopicError as exc:
            raise ResourceError(exc.code, exc.message) from None
        return
    if rtype == BROKER:
        if name:
            _check_broker_id(ctx, name)
        other = sorted(k for k in configs if k not in DYNAMIC_BROKER_CONFIGS)
        if other:
            keys = ", ".join(other)
            raise ResourceError(
                ErrorCode.INVALID_REQUEST,
                f"Cannot update these configs dynamically: {keys} ({NO_DYNAMIC_BROKER_CONFIGS})",
            )
        clean = {k: v for k, v in configs.items() if v is not None}
        for k, v in clean.items():
            if not v.strip().isdigit():
                raise ResourceError(
                    ErrorCode.INVALID_CONFIG,
                    f"Invalid value {v} for configuration {k}: Not a number of type LONG",
                )
        if validate_only:
            return
        membership = broker.membership
        if membership is None:
            raise ResourceError(ErrorCode.INVALID_REQUEST, NO_DYNAMIC_BROKER_CONFIGS)
        # /config/brokers/<id> or <default>, with a change notification every broker
        # follows (its ConfigManager applies the throttle rates live).
        await membership.cluster.set_entity_config("brokers", name or DEFAULT_BROKER, clean)
        return
    if rtype == BROKER_LOGGER and incremental:
        raise ResourceError(
            ErrorCode.INVALID_REQUEST,
            "kt does not support changing broker log levels at runtime",
        )
    raise ResourceError(ErrorCode.INVALID_REQUEST, f"Unsupported resource type: {rtype}")
