"""Which security settings kt's broker acts on, and a refusal for every other one.

A broker that silently ignores a security setting is worse than one that refuses to
start: a `SASL_SSL` listener served in plaintext, or an `authorizer.class.name` that
authorizes nothing, looks secured and is not. So any setting asking for security
the broker does not implement yet is a start-up error naming the setting.
`IMPLEMENTED_PROTOCOLS` grows as the network layer learns TLS and SASL; the key
checks shrink with it.
"""

from __future__ import annotations

from collections.abc import Mapping

from kt.broker.security.listeners import LISTENER_PREFIX, Listeners

#: Security protocols a listener may use today.
IMPLEMENTED_PROTOCOLS: frozenset[str] = frozenset({"PLAINTEXT"})

#: Key prefixes whose settings only matter to TLS, SASL or authorization.
_SECURITY_PREFIXES = ("ssl.", "sasl.", "authorizer.")
#: Single keys that ask for authentication or authorization.
_SECURITY_KEYS = frozenset({
    "super.users", "allow.everyone.if.no.acl.found", "principal.builder.class",
    "connections.max.reauth.ms", "connection.failed.authentication.delay.ms",
    "delegation.token.secret.key", "delegation.token.master.key",
})  # fmt: skip
#: Per-listener keys that are not security settings (the listener's own socket).
_PLAIN_LISTENER_KEYS = ("max.connections", "max.connection.creation.rate")


def unsupported(
    props: Mapping[str, str], given: Mapping[str, str], listeners: Listeners
) -> str | None:
    """The first reason, naming the setting, why a broker with these settings would
    not be as secure as configured; None when everything asked for is implemented.
    `props` are all settings, `given` those set explicitly (not kt's defaults)."""
    for ep in listeners.listeners:
        if ep.protocol not in IMPLEMENTED_PROTOCOLS:
            return (
                f"listeners: {ep} uses security protocol {ep.protocol}, which kt's broker "
                "does not implement yet (it would serve plaintext there); use PLAINTEXT"
            )
    if listeners.inter_broker_protocol not in IMPLEMENTED_PROTOCOLS:
        return (
            f"the inter-broker listener {listeners.inter_broker_listener} uses "
            f"{listeners.inter_broker_protocol}, which kt's broker does not implement yet"
        )
    authorizer = props.get("authorizer.class.name", "").strip()
    if authorizer:
        return (
            f"authorizer.class.name={authorizer}: kt's broker has no authorizer yet "
            "(every request would be allowed); remove the setting"
        )
    for key in sorted(given):
        if given[key].strip() and _is_security_key(key):
            return (
                f"{key}: a security setting kt's broker does not implement yet "
                "(it would be ignored); remove it"
            )
    return None


def _is_security_key(key: str) -> bool:
    if key.startswith(LISTENER_PREFIX):
        # listener.name.<l>.<key>: what matters is the key after the listener
        rest = key[len(LISTENER_PREFIX) :].partition(".")[2]
        return not rest.startswith(_PLAIN_LISTENER_KEYS)
    return key.startswith(_SECURITY_PREFIXES) or key in _SECURITY_KEYS
