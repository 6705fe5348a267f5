"""Which security settings kt's broker acts on, and a refusal for every other one.

A broker that silently ignores a security setting is worse than one that refuses to
start: a `SASL_SSL` listener served in plaintext, or an `authorizer.class.name` that
authorizes nothing, looks secured and is not. So any setting asking for security
the broker does not implement yet is a start-up error naming the setting: today
delegation tokens; `super.users` without an authorizer is refused too. TLS and SASL
settings that cannot work (a missing keystore or keytab) are refused by
`listener_security`, an unknown `authorizer.class.name` by the authorizer.
"""

from __future__ import annotations

from collections.abc import Mapping

from kt.broker.security.listeners import LISTENER_PREFIX, Listeners

#: Security protocols a listener may use today.
IMPLEMENTED_PROTOCOLS: frozenset[str] = frozenset({"PLAINTEXT", "SSL", "SASL_PLAINTEXT",
                                                    "SASL_SSL"})  # fmt: skip
#: Key prefixes whose settings ask for what is not implemented yet (delegation tokens).
_SECURITY_PREFIXES = ("delegation.token.",)
#: Single keys that ask for what is not implemented yet.
_SECURITY_KEYS: frozenset[str] = frozenset()


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
    if not props.get("authorizer.class.name", "").strip():
        for key in ("super.users", "allow.everyone.if.no.acl.found"):
            if given.get(key, "").strip():
                # Kafka ignores them without an authorizer; say so rather than pretend
                return f"{key} is set but authorizer.class.name is not: nothing would be authorized"
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
        key = key[len(LISTENER_PREFIX) :].partition(".")[2]
    return key.startswith(_SECURITY_PREFIXES) or key in _SECURITY_KEYS
