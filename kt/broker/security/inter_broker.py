"""The security of a broker's own connections to the other brokers of its cluster.

A cluster member connects to its peers (replica fetchers, the controller's
LeaderAndIsr/UpdateMetadata/StopReplica, AlterPartition and ControlledShutdown to
the controller, transaction markers) through the inter-broker listener, as a client
of that listener with the settings Kafka's broker uses there:

- TLS (`SSL`, `SASL_SSL`): the listener's truststore (else the system's CAs), its
  keystore as the client certificate, its protocols and cipher suites, and the peer's
  host name checked against its certificate unless
  `ssl.endpoint.identification.algorithm` is empty (`tls.client_context`);
- SASL (`SASL_PLAINTEXT`, `SASL_SSL`): the mechanism `sasl.mechanism.inter.broker.protocol`
  with the broker's own credentials, the `username`/`password` options of the
  listener's `listener.name.<l>.<mechanism>.sasl.jaas.config` (for OAUTHBEARER the
  unsecured login options; for GSSAPI the keytab and principal of its
  Krb5LoginModule entry, with `sasl.kerberos.service.name` or the entry's
  `serviceName`), as Kafka's broker logs
  itself in.

Everything is built and checked at start-up, so a broker whose peers it could not
reach securely refuses to start rather than failing on its first replica fetch.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Mapping

from kt.broker.security.jaas import JaasConfigError, single_module
from kt.broker.security.keystore_reload import SwappableClientContext
from kt.broker.security.listener_security import SecurityConfigError
from kt.broker.security.listeners import (
    SASL_PROTOCOLS,
    TLS_PROTOCOLS,
    ListenerConfig,
    Listeners,
)
from kt.broker.security.tls import TlsConfigError, client_context
from kt.client.security import SecurityConfig
from kt.client.security import SecurityConfigError as ClientSecurityError

log = logging.getLogger("kt.broker.security")

#: Kafka's default for `sasl.mechanism.inter.broker.protocol`.
DEFAULT_MECHANISM = "GSSAPI"


def inter_broker_security(props: Mapping[str, str], listeners: Listeners) -> SecurityConfig:
    """The client security of this broker's connections to its peers, from the
    inter-broker listener's settings; `SecurityConfigError` naming the key when they
    cannot work."""
    protocol = listeners.inter_broker_protocol
    lc = ListenerConfig(props, listeners.inter_broker_listener, protocol)
    cfg = _sasl(props, lc) if protocol in SASL_PROTOCOLS else SecurityConfig()
    if protocol in TLS_PROTOCOLS:
        try:
            ctx = client_context(lc)
        except TlsConfigError as exc:
            raise SecurityConfigError(f"inter-broker listener {lc.name}: {exc}") from None
        has_cert = any(
            lc.get(k)
            for k in ("ssl.keystore.location", "ssl.keystore.key", "ssl.keystore.certificate.chain")
        )
        cfg = dataclasses.replace(
            cfg,
            # follows the listener's dynamic keystore/truststore (reload_client_tls)
            ssl_context=SwappableClientContext(ctx, lc),
            check_hostname=ctx.check_hostname,
            trust_source=f"the truststore of the inter-broker listener {lc.name}",
            client_certificate=has_cert,
        )
    return dataclasses.replace(cfg, protocol=protocol)


def reload_client_tls(
    props: Mapping[str, str], listeners: Listeners, cfg: SecurityConfig | None
) -> bool:
    """Dynamic configs changed (KIP-226): when the inter-broker listener's keystore
    or truststore settings changed, this broker's new connections to its peers use
    the new ones, as Kafka reconfigures the inter-broker channel builder. True when
    they changed; a setting that cannot be used is logged and the old one kept."""
    if cfg is None or not isinstance(cfg.ssl_context, SwappableClientContext):
        return False
    lc = ListenerConfig(props, listeners.inter_broker_listener, listeners.inter_broker_protocol)
    try:
        new = cfg.ssl_context.reconfigured(lc)
    except TlsConfigError as exc:
        log.error("inter-broker connections keep their keystore/truststore: %s", exc)
        return False
    if new is None:
        return False
    cfg.ssl_context.swap(lc, new)
    log.info("inter-broker listener %s: new connections to the other brokers use the new "
             "keystore/truststore", lc.name)  # fmt: skip
    return True


def _sasl(props: Mapping[str, str], lc: ListenerConfig) -> SecurityConfig:
    mechanism = (
        (props.get("sasl.mechanism.inter.broker.protocol") or DEFAULT_MECHANISM).strip().upper()
    )
    key = f"{lc.prefix}{mechanism.lower()}.sasl.jaas.config"
    jaas = lc.mechanism_get(mechanism, "sasl.jaas.config")
    if not jaas or not jaas.strip():
        raise SecurityConfigError(
            f"{key} is not set: the broker logs in to the inter-broker listener "
            f"{lc.name} with {mechanism} using that entry's username and password"
        )
    client = {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": mechanism,
              "sasl.jaas.config": jaas}  # fmt: skip
    if mechanism == "GSSAPI":
        # the broker logs in with the keytab and principal of its Krb5LoginModule
        # entry and asks tickets for <service>/<peer's advertised host>, as Kafka.
        # The service comes from sasl.kerberos.service.name or the entry's
        # serviceName option (Kafka's KerberosLogin.getServiceName accepts either,
        # as kt's client and listener do); both set and different is refused there.
        service = (
            lc.mechanism_get("GSSAPI", "sasl.kerberos.service.name")
            or lc.get("sasl.kerberos.service.name")
            or ""
        ).strip()
        try:
            jaas_service = (single_module(jaas).options.get("serviceName") or "").strip()
        except JaasConfigError as exc:
            raise SecurityConfigError(f"{key}: {exc}") from None
        if service and jaas_service and service != jaas_service:
            raise SecurityConfigError(
                f"Conflicting serviceName values found in JAAS and Kafka configs value in "
                f"JAAS file {jaas_service}, value in Kafka config {service}"
            )
        if not (service or jaas_service):
            raise SecurityConfigError(
                "sasl.mechanism.inter.broker.protocol=GSSAPI needs sasl.kerberos.service.name "
                f"or serviceName in {key} (the service of the brokers' Kerberos principals, "
                "usually kafka)"
            )
        client["sasl.kerberos.service.name"] = service or jaas_service
    try:
        # the client library reads the login module's options as a Kafka client does
        return SecurityConfig.from_properties(client)
    except ClientSecurityError as exc:
        raise SecurityConfigError(
            f"{key}: the broker's own inter-broker credentials: {exc}"
        ) from None
