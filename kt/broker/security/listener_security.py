"""Everything one listener needs to secure its connections, built and checked once at
start-up from the broker's settings: its TLS context, its SASL mechanisms with their
servers (PLAIN users from the JAAS config, SCRAM from the credential cache,
OAUTHBEARER's validator), the principal mapping rules and the re-authentication and
failure-delay settings. A setting that cannot work is a `SecurityConfigError` naming
it, so the broker refuses to start rather than serve the listener less securely than
configured.
"""

from __future__ import annotations

import logging
import ssl
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from kt.broker.security import kerberos, oauthbearer, scram
from kt.broker.security.authenticator import SaslSettings
from kt.broker.security.jaas import JaasConfigError, LoginModule, single_module
from kt.broker.security.keystore_reload import ReloadableContext
from kt.broker.security.listeners import (
    SASL_PROTOCOLS,
    TLS_PROTOCOLS,
    EndPoint,
    ListenerConfig,
)
from kt.broker.security.principal import PrincipalMappingError, SslPrincipalMapper
from kt.broker.security.sasl import PLAIN, PLAIN_LOGIN_MODULE, PlainServer, SaslServer, plain_users
from kt.broker.security.tls import TlsConfigError, server_context

log = logging.getLogger("kt.broker.security")

#: Mechanisms the broker implements.
MECHANISMS = (PLAIN, "SCRAM-SHA-256", "SCRAM-SHA-512", oauthbearer.OAUTHBEARER, kerberos.GSSAPI)
_JWKS_HANDLERS = frozenset({
    "org.apache.kafka.common.security.oauthbearer.OAuthBearerValidatorCallbackHandler",
    "org.apache.kafka.common.security.oauthbearer.secured.OAuthBearerValidatorCallbackHandler",
})  # fmt: skip
_UNSECURED_HANDLER = (
    "org.apache.kafka.common.security.oauthbearer.internals.unsecured."
    "OAuthBearerUnsecuredValidatorCallbackHandler"
)

ScramLookup = Callable[[str], Callable[[str], scram.ScramCredential | None]]


class SecurityConfigError(ValueError):
    """A security setting the broker cannot honour (names the key)."""


@dataclass(frozen=True, slots=True)
class ListenerSecurity:
    """One listener's security, ready for its connections."""

    endpoint: EndPoint
    config: ListenerConfig
    ssl_context: ssl.SSLContext | None
    sasl: SaslSettings | None
    mapper: SslPrincipalMapper
    #: The JWKS caches to refresh (OAUTHBEARER with KIP-768 validation).
    jwks: tuple[oauthbearer.JwksCache, ...] = ()
    #: Where a replaced keystore reaches new connections (TLS listeners).
    reloadable: ReloadableContext | None = None

    @property
    def protocol(self) -> str:
        """The listener's security protocol."""
        return self.endpoint.protocol


def _int(lc: ListenerConfig, key: str, value: str | None, default: int) -> int:
    if value is None or not value.strip():
        return default
    try:
        return int(value.strip())
    except ValueError:
        raise SecurityConfigError(f"{key}={value!r} is not an integer") from None


def _jaas(lc: ListenerConfig, mechanism: str) -> LoginModule | None:
    key = f"{lc.prefix}{mechanism.lower()}.sasl.jaas.config"
    text = lc.mechanism_get(mechanism, "sasl.jaas.config")
    if text is None:
        return None
    try:
        return single_module(text)
    except JaasConfigError as exc:
        raise SecurityConfigError(f"{key}: {exc}") from None


def build_listener_security(
    props: Mapping[str, str], endpoint: EndPoint, scram_lookup: ScramLookup | None = None
) -> ListenerSecurity:
    """The security of `endpoint` from the broker's settings. `scram_lookup(mechanism)`
    gives the credential look-up SCRAM servers use (the broker's CredentialCache)."""
    lc = ListenerConfig(props, endpoint.name, endpoint.protocol)
    rules = lc.get("ssl.principal.mapping.rules", "DEFAULT")
    try:
        mapper = SslPrincipalMapper(rules)
    except PrincipalMappingError as exc:
        raise SecurityConfigError(f"ssl.principal.mapping.rules: {exc}") from None
    for key in ("principal.builder.class", "ssl.engine.factory.class"):
        if lc.get(key):
            raise SecurityConfigError(f"{key}: custom Java classes cannot run in kt's broker")
    if (endpoint.protocol == "SASL_SSL" and lc.get("ssl.client.auth")
            and not lc.is_prefixed("ssl.client.auth")):  # fmt: skip
        log.warning(
            "Broker configuration 'ssl.client.auth' is applied only to SSL listeners. "
            "Listener-prefixed configuration can be used to enable SSL client authentication "
            "for SASL_SSL listeners. In future releases, broker-wide option without listener "
            "prefix may be applied to SASL_SSL listeners as well. All configuration options "
            "intended for specific listeners should be listener-prefixed."
        )
    ctx = None
    if endpoint.protocol in TLS_PROTOCOLS:
        try:
            ctx = server_context(lc)
        except TlsConfigError as exc:
            raise SecurityConfigError(f"listener {endpoint.name}: {exc}") from None
    sasl = None
    jwks: list[oauthbearer.JwksCache] = []
    if endpoint.protocol in SASL_PROTOCOLS:
        sasl = _sasl(lc, scram_lookup, jwks)
    reloadable = ReloadableContext(ctx, lc) if ctx is not None else None
    return ListenerSecurity(endpoint, lc, ctx, sasl, mapper, tuple(jwks), reloadable)


def _sasl(lc: ListenerConfig, scram_lookup: ScramLookup | None,
          jwks: list[oauthbearer.JwksCache]) -> SaslSettings:  # fmt: skip
    enabled = lc.enabled_mechanisms()
    enabled_key = f"{lc.prefix}sasl.enabled.mechanisms"
    if not enabled:
        raise SecurityConfigError(f"{enabled_key}: no SASL mechanism enabled on listener {lc.name}")
    servers: dict[str, Callable[[], SaslServer]] = {}
    reauth: dict[str, int] = {}
    for mech in enabled:
        if mech not in MECHANISMS:
            raise SecurityConfigError(
                f"sasl.enabled.mechanisms (listener {lc.name}): {mech} is not implemented by "
                f"kt's broker (it implements {', '.join(MECHANISMS)})"
            )
        handler = lc.mechanism_get(mech, "sasl.server.callback.handler.class")
        if handler and not (mech == oauthbearer.OAUTHBEARER
                            and handler in _JWKS_HANDLERS | {_UNSECURED_HANDLER}):  # fmt: skip
            raise SecurityConfigError(
                f"{lc.prefix}{mech.lower()}.sasl.server.callback.handler.class={handler}: "
                "custom Java callback handlers cannot run in kt's broker"
            )
        module = _jaas(lc, mech)
        if mech == PLAIN:
            servers[mech] = _plain(lc, module)
        elif mech == kerberos.GSSAPI:
            servers[mech] = _gssapi(lc, module)
        elif mech.startswith("SCRAM-"):
            if scram_lookup is None:
                raise SecurityConfigError(f"{mech} on listener {lc.name} needs a credential store")
            servers[mech] = _scram_factory(scram.MECHANISMS[mech], scram_lookup(mech))
        else:
            validator = _oauth_validator(lc, module, handler, jwks)
            servers[mech] = _oauth_factory(validator)
        key = f"{lc.prefix}{mech.lower()}.connections.max.reauth.ms"
        reauth[mech] = _int(lc, key, lc.mechanism_get(mech, "connections.max.reauth.ms"), 0)
    delay = _int(lc, "connection.failed.authentication.delay.ms",
                 lc.get("connection.failed.authentication.delay.ms"), 100)  # fmt: skip
    max_receive = _int(lc, "sasl.server.max.receive.size", lc.get("sasl.server.max.receive.size"),
                       524288)  # fmt: skip
    return SaslSettings(tuple(enabled), servers, reauth, delay, max_receive)


def _scram_factory(
    mech: scram.ScramMechanism, lookup: Callable[[str], scram.ScramCredential | None]
) -> Callable[[], SaslServer]:
    return lambda: scram.ScramServer(mech, lookup)


def _oauth_factory(validator: oauthbearer.TokenValidator) -> Callable[[], SaslServer]:
    return lambda: oauthbearer.OAuthBearerServer(validator)


def _plain(lc: ListenerConfig, module: LoginModule | None) -> Callable[[], SaslServer]:
    key = f"{lc.prefix}plain.sasl.jaas.config"
    if module is None:
        raise SecurityConfigError(
            f"{key} is not set: PLAIN needs its users, e.g. {PLAIN_LOGIN_MODULE} required "
            'user_alice="alice-secret";'
        )
    if module.name != PLAIN_LOGIN_MODULE:
        raise SecurityConfigError(f"{key}: PLAIN's users are read from {PLAIN_LOGIN_MODULE}")
    users = plain_users(module.options)
    return lambda: PlainServer(users)


def _gssapi(lc: ListenerConfig, module: LoginModule | None) -> Callable[[], SaslServer]:
    key = f"{lc.prefix}gssapi.sasl.jaas.config"
    example = (
        f"{kerberos.KRB5_LOGIN_MODULE} required useKeyTab=true storeKey=true "
        'keyTab="/etc/kt/kafka.keytab" principal="kafka/broker1.example.com@EXAMPLE.COM";'
    )
    if module is None:
        raise SecurityConfigError(
            f"{key} is not set: GSSAPI needs the broker's keytab and principal, e.g. {example}"
        )
    if module.name != kerberos.KRB5_LOGIN_MODULE:
        raise SecurityConfigError(
            f"{key}: the broker's Kerberos login is read from {kerberos.KRB5_LOGIN_MODULE}"
        )
    opts = module.options
    keytab, principal = opts.get("keyTab"), opts.get("principal")
    if opts.get("useKeyTab", "false").lower() != "true" or not keytab or not principal:
        raise SecurityConfigError(
            f"{key}: the broker accepts Kerberos tickets with the keys of a keytab: set "
            f"useKeyTab=true, keyTab and principal, e.g. {example}"
        )
    service = lc.get("sasl.kerberos.service.name")
    jaas_service = opts.get("serviceName")
    if service and jaas_service and service != jaas_service:
        raise SecurityConfigError(
            f"Conflicting serviceName values found in JAAS and Kafka configs value in JAAS "
            f"file {jaas_service}, value in Kafka config {service}"
        )
    if not (service or jaas_service):
        raise SecurityConfigError("No serviceName defined in either JAAS or Kafka config "
                                  "(set sasl.kerberos.service.name, usually kafka)")  # fmt: skip
    try:
        rules = lc.get("sasl.kerberos.principal.to.local.rules", "DEFAULT") or "DEFAULT"
        namer = kerberos.KerberosShortNamer(rules, kerberos.default_realm())
        acceptor = kerberos.Acceptor(principal, keytab)
    except kerberos.KerberosConfigError as exc:
        raise SecurityConfigError(f"listener {lc.name} GSSAPI: {exc}") from None
    return lambda: kerberos.GssapiServer(acceptor.context(), namer)


def _oauth_validator(lc: ListenerConfig, module: LoginModule | None, handler: str | None,
                     jwks: list[oauthbearer.JwksCache]) -> oauthbearer.TokenValidator:  # fmt: skip
    if handler in _JWKS_HANDLERS:

        def get(key: str) -> str | None:
            # Kafka's ConfigurationUtils: oauthbearer.<key>, then <key>, listener first
            value = lc.mechanism_get(oauthbearer.OAUTHBEARER, key)
            return value if value is not None else lc.get(key)

        url = get("sasl.oauthbearer.jwks.endpoint.url")
        if not url:
            raise SecurityConfigError(
                "sasl.oauthbearer.jwks.endpoint.url must be set for "
                "OAuthBearerValidatorCallbackHandler"
            )
        refresh = _int(lc, "sasl.oauthbearer.jwks.endpoint.refresh.ms",
                       get("sasl.oauthbearer.jwks.endpoint.refresh.ms"), 3_600_000)  # fmt: skip
        try:
            cache = oauthbearer.JwksCache(url, refresh)
        except ValueError as exc:
            raise SecurityConfigError(str(exc)) from None
        jwks.append(cache)
        audience = tuple(a.strip() for a in (get("sasl.oauthbearer.expected.audience") or "")
                         .split(",") if a.strip())  # fmt: skip
        return oauthbearer.JwksValidator(
            cache,
            audience,
            get("sasl.oauthbearer.expected.issuer") or None,
            _int(lc, "sasl.oauthbearer.clock.skew.seconds",
                 get("sasl.oauthbearer.clock.skew.seconds"), 30),
            get("sasl.oauthbearer.sub.claim.name") or "sub",
            get("sasl.oauthbearer.scope.claim.name") or "scope",
        )  # fmt: skip
    options = module.options if module is not None else {}
    try:
        return oauthbearer.UnsecuredValidator.from_options(options)
    except ValueError as exc:
        raise SecurityConfigError(f"{lc.prefix}oauthbearer.sasl.jaas.config: {exc}") from None
