"""Kerberos for SASL/GSSAPI through the `gssapi` binding of MIT krb5 (optional:
`pip install gssapi`, which builds against libkrb5-dev).

Kafka's client settings: `sasl.kerberos.service.name` (the broker's service, usually
`kafka`; the target is `<service>/<broker host as dialled>`), and the login either
from the JAAS line `com.sun.security.auth.module.Krb5LoginModule required
useKeyTab=true keyTab="/etc/kt/alice.keytab" principal="alice@EXAMPLE.COM";` or
librdkafka's `sasl.kerberos.keytab` / `sasl.kerberos.principal`; without a keytab,
the credentials cache (`kinit`) is used. KRB5_CONFIG / KRB5CCNAME apply as usual.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

from kt.protocol.sasl import GssapiMechanism, SaslError


class KerberosError(Exception):
    """No usable Kerberos credentials, or the binding is missing; one line."""


@dataclass(frozen=True)
class KerberosLogin:
    """Who logs in, and to which service."""

    service: str
    principal: str | None = None
    keytab: str | None = None


def _gssapi() -> Any:
    try:
        import gssapi
    except ImportError:
        raise KerberosError(
            "sasl.mechanism=GSSAPI needs the gssapi package (pip install gssapi; "
            "it builds against libkrb5-dev)"
        ) from None
    return gssapi


class _Context:
    """A `GssContext` over gssapi.SecurityContext; GSS errors become SaslErrors."""

    def __init__(self, ctx: Any, errors: type[Exception]) -> None:
        self._ctx = ctx
        self._errors = errors

    @property
    def complete(self) -> bool:
        return bool(self._ctx.complete)

    def _call(self, what: str, fn: Any, *args: Any) -> Any:
        try:
            return fn(*args)
        except self._errors as exc:
            detail = " ".join(str(exc).split())
            raise SaslError(f"GSSAPI: {what} failed: {detail}") from None

    def step(self, token: bytes | None) -> bytes | None:
        out = self._call("the security context", self._ctx.step, token)
        return bytes(out) if out else None

    def wrap(self, data: bytes) -> bytes:
        return bytes(self._call("wrap", self._ctx.wrap, data, False).message)

    def unwrap(self, data: bytes) -> bytes:
        return bytes(self._call("unwrap", self._ctx.unwrap, data).message)


_CCACHES: dict[tuple[str | None, str | None], str] = {}


def _ccache(login: KerberosLogin) -> str:
    """The in-memory credentials cache of a keytab login (one per principal and keytab
    in this process, so connections share their tickets)."""
    key = (login.principal, login.keytab)
    if key not in _CCACHES:
        _CCACHES[key] = f"MEMORY:kt-{os.getpid()}-{len(_CCACHES)}"
    return _CCACHES[key]


def mechanism(login: KerberosLogin, host: str) -> GssapiMechanism:
    """A GSSAPI mechanism for a connection to `host`: acquires credentials (from the
    keytab, else the cache) and starts the security context with mutual auth."""
    gssapi = _gssapi()
    target = gssapi.Name(f"{login.service}@{host}", gssapi.NameType.hostbased_service)
    try:
        name = (gssapi.Name(login.principal, gssapi.NameType.kerberos_principal)
                if login.principal else None)  # fmt: skip
        # with a keytab, tickets go to a credentials cache of this login's own (in
        # memory): the user's default cache may hold another principal's tickets, and
        # MIT krb5 refuses to mix them ("Principal in credential cache does not match")
        store = ({"client_keytab": login.keytab, "ccache": _ccache(login)}
                 if login.keytab else None)  # fmt: skip
        creds = gssapi.Credentials(name=name, usage="initiate", store=store)
        principal = str(creds.name)
        ctx = gssapi.SecurityContext(
            name=target,
            creds=creds,
            usage="initiate",
            flags=gssapi.RequirementFlag.mutual_authentication | gssapi.RequirementFlag.integrity,
        )
        # the first step asks the KDC for the service ticket: its errors are the
        # ones users meet (no ticket, unknown service principal, KDC unreachable)
        first = ctx.step(None)
        mech = GssapiMechanism(_Context(ctx, gssapi.exceptions.GSSError), user=principal,
                               authzid=principal, first_token=bytes(first or b""))  # fmt: skip
    except gssapi.exceptions.GSSError as exc:
        who = login.principal or "the credentials cache"
        detail = " ".join(str(exc).split())
        raise KerberosError(
            f"GSSAPI: cannot get a Kerberos ticket for {login.service}/{host} as {who}: {detail}"
        ) from None
    return mech
