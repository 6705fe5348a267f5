"""Keystores and truststores replaced without a restart (Kafka's KIP-226): a TLS
listener's context can be swapped for new connections while old ones keep theirs.

`ReloadableContext` installs an SNI callback on the context the listener was bound
with: for each new handshake it hands over the newest context (the callback runs
whether or not the client sends SNI). `reconfigured` builds the new context from the
listener's settings with the dynamic layer applied, and checks it as Kafka's
SslFactory does: the new certificate's subject DN must equal the old one's unless
`ssl.allow.dn.changes=true`, and its subject alternative names must include the old
ones unless `ssl.allow.san.changes=true`. Only the listener-prefixed keystore and
truststore keys are dynamic, as in Kafka.
"""

from __future__ import annotations

import socket
import ssl
from collections.abc import Mapping

from cryptography import x509

from kt.broker.security.listeners import LISTENER_PREFIX, ListenerConfig
from kt.broker.security.tls import TlsConfigError, client_context, load_keystore, server_context

#: Kafka's SslConfigs.RECONFIGURABLE_CONFIGS (dynamic per listener only).
RECONFIGURABLE = frozenset({
    "ssl.keystore.type", "ssl.keystore.location", "ssl.keystore.password", "ssl.key.password",
    "ssl.truststore.type", "ssl.truststore.location", "ssl.truststore.password",
    "ssl.keystore.certificate.chain", "ssl.keystore.key", "ssl.truststore.certificates",
})  # fmt: skip


def is_reconfigurable(key: str) -> bool:
    """Whether `key` is a listener-prefixed keystore/truststore key (dynamic)."""
    if not key.startswith(LISTENER_PREFIX):
        return False
    return key[len(LISTENER_PREFIX) :].partition(".")[2] in RECONFIGURABLE


class ReloadableContext:
    """The context new connections of one listener get (see the module doc)."""

    def __init__(self, base: ssl.SSLContext, lc: ListenerConfig) -> None:
        self.base = base
        self.current = base
        self.settings = _snapshot(lc)
        base.sni_callback = self._select

    def _select(self, obj: ssl.SSLObject, name: str | None, ctx: ssl.SSLContext) -> None:
        if self.current is not ctx:
            obj.context = self.current

    def reconfigured(self, lc: ListenerConfig) -> ssl.SSLContext | None:
        """The new context when the keystore/truststore settings changed (None when
        they did not); TlsConfigError when it cannot be used."""
        if _snapshot(lc) == self.settings:
            return None
        new = server_context(lc)
        _check_compatible(lc, self.settings, new)
        return new

    def install(self, lc: ListenerConfig, ctx: ssl.SSLContext) -> None:
        """New connections use `ctx` from now on."""
        self.current = ctx
        self.settings = _snapshot(lc)


class SwappableClientContext(ssl.SSLContext):
    """The TLS context of the broker's own connections to its peers (replica
    fetchers, the controller's channel, transaction markers), whose keystore and
    truststore follow the inter-broker listener's dynamic configs as Kafka rebuilds
    the inter-broker channel builder's SslFactory: each new connection is wrapped by
    the context current at the time (`swap` installs a new one); connections already
    open keep theirs. asyncio's loop and uvloop both start a client's TLS with
    `wrap_bio`, which is delegated."""

    current: ssl.SSLContext
    settings: dict[str, str | None]

    def __new__(cls, current: ssl.SSLContext, lc: ListenerConfig) -> SwappableClientContext:
        return super().__new__(cls, ssl.PROTOCOL_TLS_CLIENT)

    def __init__(self, current: ssl.SSLContext, lc: ListenerConfig) -> None:
        self.current = current
        self.settings = _snapshot(lc)
        # what callers read off the context describes the current one
        self.check_hostname = current.check_hostname

    def wrap_bio(
        self,
        incoming: ssl.MemoryBIO,
        outgoing: ssl.MemoryBIO,
        server_side: bool = False,
        server_hostname: str | bytes | None = None,
        session: ssl.SSLSession | None = None,
    ) -> ssl.SSLObject:
        return self.current.wrap_bio(incoming, outgoing, server_side, server_hostname, session)

    def wrap_socket(
        self,
        sock: socket.socket,
        server_side: bool = False,
        do_handshake_on_connect: bool = True,
        suppress_ragged_eofs: bool = True,
        server_hostname: str | bytes | None = None,
        session: ssl.SSLSession | None = None,
    ) -> ssl.SSLSocket:
        return self.current.wrap_socket(sock, server_side, do_handshake_on_connect,
                                        suppress_ragged_eofs, server_hostname, session)  # fmt: skip

    def reconfigured(self, lc: ListenerConfig) -> ssl.SSLContext | None:
        """The new client context when the listener's keystore/truststore settings
        changed (None when they did not); TlsConfigError when it cannot be used."""
        if _snapshot(lc) == self.settings:
            return None
        return client_context(lc)

    def swap(self, lc: ListenerConfig, ctx: ssl.SSLContext) -> None:
        """New connections use `ctx` from now on."""
        self.current = ctx
        self.settings = _snapshot(lc)


def _snapshot(lc: ListenerConfig) -> dict[str, str | None]:
    return {k: lc.get(k) for k in sorted(RECONFIGURABLE)}


def _leaf(lc: ListenerConfig) -> x509.Certificate | None:
    material = load_keystore(lc)
    if material is None:
        return None
    return x509.load_pem_x509_certificate(material.chain_pem)


def _sans(cert: x509.Certificate) -> set[str]:
    try:
        ext = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName)
    except x509.ExtensionNotFound:
        return set()
    return {str(v) for v in ext.value}


def _check_compatible(lc: ListenerConfig, old: Mapping[str, str | None],
                      new_ctx: ssl.SSLContext) -> None:  # fmt: skip
    old_lc = ListenerConfig({**lc.props, **{lc.prefix + k: v for k, v in old.items()
                                            if v is not None}}, lc.name, lc.protocol)  # fmt: skip
    before, after = _leaf(old_lc), _leaf(lc)
    if before is None or after is None:
        if (before is None) != (after is None):
            raise TlsConfigError("Cannot add or remove the SSL keystore of an existing listener.")
        return
    allow_dn = (lc.get("ssl.allow.dn.changes", "false") or "").strip().lower() == "true"
    allow_san = (lc.get("ssl.allow.san.changes", "false") or "").strip().lower() == "true"
    if not allow_dn and before.subject != after.subject:
        raise TlsConfigError(
            "Keystore DistinguishedName does not match: "
            f"existing={before.subject.rfc4514_string()}, new={after.subject.rfc4514_string()}"
        )
    missing = _sans(before) - _sans(after)
    if not allow_san and missing:
        raise TlsConfigError(f"Keystore SubjectAltNames do not match: missing {sorted(missing)}")


def validate_change(
    old_props: Mapping[str, str], new_props: Mapping[str, str], lcs: list[ListenerConfig]
) -> None:
    """Check a change of dynamic configs before it is stored: every TLS listener whose
    keystore or truststore settings change must get a usable, compatible context
    (TlsConfigError naming the listener, Kafka's "Validation of dynamic config update
    of SSLFactory failed")."""
    for lc in lcs:
        old = ListenerConfig(old_props, lc.name, lc.protocol)
        new = ListenerConfig(new_props, lc.name, lc.protocol)
        before = _snapshot(old)
        if _snapshot(new) == before:
            continue
        try:
            ctx = server_context(new)
            _check_compatible(new, before, ctx)
        except TlsConfigError as exc:
            raise TlsConfigError(
                f"Validation of dynamic config update of SSLFactory failed (listener "
                f"{lc.name}): {exc}"
            ) from None
