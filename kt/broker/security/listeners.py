"""Listeners as Kafka 3.8 resolves them (ZooKeeper mode).

`listeners` and `advertised.listeners` are `NAME://host:port` lists; each NAME
(upper-cased) gets its security protocol from `listener.security.protocol.map`
(default: each protocol mapped to itself). The inter-broker listener is
`inter.broker.listener.name`, else the listener named after
`security.inter.broker.protocol` (default PLAINTEXT); it must be advertised.

Settings may be given per listener under `listener.name.<name lower-case>.`: a
prefixed key wins over the unprefixed one (Kafka's `valuesWithPrefixOverride`), and
the keys Kafka reads per SASL mechanism (`sasl.jaas.config`,
`connections.max.reauth.ms`, the callback-handler classes) take the form
`listener.name.<name>.<mechanism lower-case>.<key>` only (`connections.max.reauth.ms`
excepted: it falls back to the unprefixed key). `ListenerConfig` answers those
look-ups for one listener.

Every validation error is a `ListenerConfigError` whose message names the key, with
Kafka's wording where Kafka has one.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

#: Kafka's SecurityProtocol names (the enum order).
SECURITY_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
#: Protocols that run TLS / SASL on the connection.
TLS_PROTOCOLS = frozenset({"SSL", "SASL_SSL"})
SASL_PROTOCOLS = frozenset({"SASL_PLAINTEXT", "SASL_SSL"})

#: Kafka's EndPoint parse expression (matched against the whole entry).
_ENDPOINT = re.compile(r"(.*)://\[?([0-9a-zA-Z\-%._:]*)\]?:(-?[0-9]+)")

#: Keys Kafka reads in the `<mechanism>.<key>` form (DynamicBrokerConfig's
#: ListenerMechanismConfigs); only `connections.max.reauth.ms` falls back unprefixed.
MECHANISM_KEYS = frozenset({
    "sasl.jaas.config", "sasl.login.callback.handler.class", "sasl.login.class",
    "sasl.server.callback.handler.class", "connections.max.reauth.ms",
})  # fmt: skip

LISTENER_PREFIX = "listener.name."


class ListenerConfigError(ValueError):
    """A listener setting Kafka would refuse; the message names the key."""


@dataclass(frozen=True, slots=True)
class EndPoint:
    """One listener endpoint: its (upper-case) name, host ("" = all interfaces),
    port and the security protocol its name maps to."""

    name: str
    host: str
    port: int
    protocol: str

    def __str__(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{self.name}://{host}:{self.port}"


def listener_prefix(name: str) -> str:
    """Kafka's ListenerName.configPrefix: `listener.name.<name lower-case>.`."""
    return f"{LISTENER_PREFIX}{name.lower()}."


def parse_protocol_map(value: str, key: str = "listener.security.protocol.map") -> dict[str, str]:
    """`NAME:PROTOCOL,...` with names upper-cased and protocols checked against
    Kafka's SecurityProtocol (case-insensitively, as `forName` does)."""
    out: dict[str, str] = {}
    for entry in value.split(","):
        entry = entry.strip()
        if not entry:
            continue
        name, sep, protocol = entry.partition(":")
        name, protocol = name.strip().upper(), protocol.strip().upper()
        if not sep or not name or not protocol:
            raise ListenerConfigError(f"{key}: {entry!r} is not NAME:PROTOCOL")
        if protocol not in SECURITY_PROTOCOLS:
            raise ListenerConfigError(
                f"{key}: unknown security protocol {protocol!r} for listener {name} "
                f"(one of {', '.join(SECURITY_PROTOCOLS)})"
            )
        if name in out and out[name] != protocol:
            raise ListenerConfigError(f"{key}: listener {name} is mapped twice")
        out[name] = protocol
    return out


def parse_endpoints(value: str, key: str, protocol_map: Mapping[str, str]) -> list[EndPoint]:
    """A `listeners`-style list: `NAME://host:port` entries, an empty host meaning the
    default interface, IPv6 hosts in brackets."""
    out: list[EndPoint] = []
    for entry in value.split(","):
        entry = entry.strip()
        if not entry:
            continue
        m = _ENDPOINT.fullmatch(entry)
        if m is None or not m.group(1):
            raise ListenerConfigError(f"{key}: Unable to parse {entry} to a broker endpoint")
        name, host, port = m.group(1).upper(), m.group(2), int(m.group(3))
        if not 0 <= port <= 65535:
            raise ListenerConfigError(f"{key}: port {port} of {entry} is out of range")
        protocol = protocol_map.get(name)
        if protocol is None:
            raise ListenerConfigError(f"{key}: No security protocol defined for listener {name}")
        out.append(EndPoint(name, host, port, protocol))
    return out


@dataclass(frozen=True, slots=True)
class Listeners:
    """The resolved listener settings of one broker."""

    listeners: tuple[EndPoint, ...]
    advertised: tuple[EndPoint, ...]
    #: Whether advertised.listeners was set (else it is `listeners`, wildcards to fill).
    advertised_given: bool
    protocol_map: Mapping[str, str]
    inter_broker_listener: str
    inter_broker_protocol: str

    def by_name(self, name: str) -> EndPoint:
        """The bound listener called `name` (KeyError when there is none)."""
        for ep in self.listeners:
            if ep.name == name:
                return ep
        raise KeyError(name)

    @property
    def protocols(self) -> frozenset[str]:
        """The security protocols the bound listeners use."""
        return frozenset(ep.protocol for ep in self.listeners)


def resolve_listeners(props: Mapping[str, str]) -> Listeners:
    """Resolve and validate `listeners`, `advertised.listeners`,
    `listener.security.protocol.map` and the inter-broker listener from `props` (a
    broker's settings; absent keys take Kafka's defaults)."""
    map_value = props.get("listener.security.protocol.map", "").strip()
    protocol_map = (
        parse_protocol_map(map_value) if map_value else {p: p for p in SECURITY_PROTOCOLS}
    )
    listeners = parse_endpoints(props.get("listeners", "PLAINTEXT://:9092"), "listeners",
                                protocol_map)  # fmt: skip
    if not listeners:
        raise ListenerConfigError("listeners is empty")
    names = [ep.name for ep in listeners]
    if len(set(names)) != len(names):
        raise ListenerConfigError(
            f"listeners: Each listener must have a different name, listeners: "
            f"{props.get('listeners')}"
        )
    ports = [ep.port for ep in listeners if ep.port != 0]
    if len(set(ports)) != len(ports):
        raise ListenerConfigError(
            f"listeners: Each listener must have a different port, listeners: "
            f"{props.get('listeners')}"
        )
    adv_value = props.get("advertised.listeners", "").strip()
    if adv_value:
        advertised = parse_endpoints(adv_value, "advertised.listeners", protocol_map)
        adv_names = [ep.name for ep in advertised]
        if len(set(adv_names)) != len(adv_names):
            raise ListenerConfigError(
                f"advertised.listeners: Each listener must have a different name, "
                f"listeners: {adv_value}"
            )
        unknown = sorted(set(adv_names) - set(names))
        if unknown:
            raise ListenerConfigError(
                "advertised.listeners listener names must be equal to or a subset of the "
                f"ones defined in listeners. Found {','.join(adv_names)}. The valid options "
                f"based on the current configuration are {','.join(names)}"
            )
    else:
        advertised = list(listeners)
    if any(ep.host == "0.0.0.0" for ep in advertised):
        raise ListenerConfigError(
            "advertised.listeners cannot use the nonroutable meta-address 0.0.0.0. "
            "Use a routable IP address."
        )
    ib_name, ib_protocol = _inter_broker(props, protocol_map)
    if ib_name not in {ep.name for ep in advertised}:
        raise ListenerConfigError(
            "inter.broker.listener.name must be a listener name defined in "
            f"advertised.listeners. The valid options based on currently configured "
            f"listeners are {','.join(ep.name for ep in advertised)}"
        )
    cfg = Listeners(tuple(listeners), tuple(advertised), bool(adv_value), dict(protocol_map),
                    ib_name, ib_protocol)  # fmt: skip
    if ib_protocol in SASL_PROTOCOLS:
        lc = ListenerConfig(props, ib_name, ib_protocol)
        mech = props.get("sasl.mechanism.inter.broker.protocol", "GSSAPI").strip()
        if mech not in lc.enabled_mechanisms():
            raise ListenerConfigError(
                "sasl.mechanism.inter.broker.protocol must be included in "
                "sasl.enabled.mechanisms when SASL is used for inter-broker communication"
            )
    return cfg


def _inter_broker(props: Mapping[str, str], protocol_map: Mapping[str, str]) -> tuple[str, str]:
    name = props.get("inter.broker.listener.name", "").strip().upper()
    protocol_given = props.get("security.inter.broker.protocol", "").strip()
    if name:
        if protocol_given:
            raise ListenerConfigError(
                "Only one of inter.broker.listener.name and security.inter.broker.protocol "
                "should be set."
            )
        if name not in protocol_map:
            raise ListenerConfigError(
                f"Listener with name {name} defined in inter.broker.listener.name not found "
                "in listener.security.protocol.map."
            )
        return name, protocol_map[name]
    protocol = (protocol_given or "PLAINTEXT").upper()
    if protocol not in SECURITY_PROTOCOLS:
        raise ListenerConfigError(
            f"security.inter.broker.protocol: unknown security protocol {protocol!r} "
            f"(one of {', '.join(SECURITY_PROTOCOLS)})"
        )
    # ListenerName.forSecurityProtocol: the listener named after the protocol
    return protocol, protocol


@dataclass(frozen=True, slots=True)
class ListenerConfig:
    """The settings one listener's channel reads: `listener.name.<l>.<key>` over
    `<key>`, and the mechanism-prefixed forms."""

    props: Mapping[str, str]
    name: str
    protocol: str

    @property
    def prefix(self) -> str:
        """This listener's key prefix."""
        return listener_prefix(self.name)

    def get(self, key: str, default: str | None = None) -> str | None:
        """`key` for this listener: the listener-prefixed value wins."""
        value = self.props.get(self.prefix + key)
        if value is not None:
            return value
        return self.props.get(key, default)

    def is_prefixed(self, key: str) -> bool:
        """Whether `key` is set with this listener's prefix."""
        return self.prefix + key in self.props

    def mechanism_get(self, mechanism: str, key: str) -> str | None:
        """A per-mechanism key (`listener.name.<l>.<mech>.<key>`). Only
        `connections.max.reauth.ms` falls back to the unprefixed key; the others have
        no fallback in Kafka (an unprefixed `sasl.jaas.config` is ignored by brokers)."""
        value = self.props.get(f"{self.prefix}{mechanism.lower()}.{key}")
        if value is not None or key != "connections.max.reauth.ms":
            return value
        return self.get(key)

    def enabled_mechanisms(self) -> list[str]:
        """`sasl.enabled.mechanisms` for this listener (Kafka's default: GSSAPI)."""
        value = self.get("sasl.enabled.mechanisms", "GSSAPI") or ""
        return [m.strip() for m in value.split(",") if m.strip()]

    def ssl_client_auth(self) -> str:
        """`ssl.client.auth` as Kafka applies it: on SASL_SSL listeners only the
        listener-prefixed value counts (else `none`); values are case-sensitive."""
        if self.protocol == "SASL_SSL" and not self.is_prefixed("ssl.client.auth"):
            return "none"
        value = (self.get("ssl.client.auth", "none") or "none").strip()
        if value not in ("required", "requested", "none"):
            raise ListenerConfigError(
                f"Invalid value {value} for configuration ssl.client.auth: "
                "String must be one of: required, requested, none"
            )
        return value
