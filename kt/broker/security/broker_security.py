"""The broker's security as the server wires it: every listener's `ListenerSecurity`
(built before binding, so a bad keystore stops the start), the SCRAM credential cache
that follows the coordination store, and the JWKS key sets kept fresh off the loop.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterable, Mapping

from kt.broker.metadata.store import CoordinationStore
from kt.broker.security import scram
from kt.broker.security.acl_store import AclCache, CoordinationAclStore
from kt.broker.security.authorizer import AclAuthorizer
from kt.broker.security.credentials import CredentialCache, ScramCredentialStore
from kt.broker.security.listener_security import ListenerSecurity, build_listener_security
from kt.broker.security.listeners import EndPoint, ListenerConfig
from kt.broker.security.oauthbearer import JwksCache
from kt.broker.security.tls import TlsConfigError

log = logging.getLogger("kt.broker.security")


def check_listener_security(props: Mapping[str, str], endpoints: Iterable[EndPoint]) -> None:
    """Build every listener's security once, for its errors only (SecurityConfigError
    naming the key): a broker with settings that cannot work does not start."""
    for ep in endpoints:
        build_listener_security(props, ep, lambda mech: lambda user: None)


class BrokerSecurity:
    """Every listener's security and the stores behind it."""

    def __init__(self, props: Mapping[str, str], endpoints: Iterable[EndPoint]) -> None:
        self._cache: CredentialCache | None = None
        self._acls: AclCache | None = None
        self.listeners: dict[str, ListenerSecurity] = {
            ep.name: build_listener_security(props, ep, self._scram_lookup) for ep in endpoints
        }
        self._tasks: list[asyncio.Task[None]] = []

    def _scram_lookup(self, mechanism: str) -> Callable[[str], scram.ScramCredential | None]:
        # the cache starts after the store connects; connections come later still
        def find(user: str) -> scram.ScramCredential | None:
            if self._cache is None:
                return None
            return self._cache.lookup(mechanism)(user)

        return find

    def listener(self, name: str) -> ListenerSecurity | None:
        """The security of listener `name` (None for an unknown name)."""
        return self.listeners.get(name)

    @property
    def scram_mechanisms(self) -> frozenset[str]:
        """The SCRAM mechanisms enabled on some listener."""
        return frozenset(
            m
            for sec in self.listeners.values()
            if sec.sasl is not None
            for m in sec.sasl.mechanisms
            if m in scram.MECHANISMS
        )

    async def start(
        self, store: CoordinationStore, authorizer: AclAuthorizer | None = None
    ) -> None:
        """Load the ACLs into the authorizer, the SCRAM credentials and the JWKS key
        sets, and follow them."""
        if authorizer is not None:
            acls = AclCache(authorizer, CoordinationAclStore(store))
            await acls.start()
            self._acls = acls
        if self.scram_mechanisms:
            cache = CredentialCache(ScramCredentialStore(store), self.scram_mechanisms)
            await cache.start()
            self._cache = cache
        loop = asyncio.get_running_loop()
        for sec in self.listeners.values():
            for jwks in sec.jwks:
                try:
                    await loop.run_in_executor(None, jwks.load)
                except (OSError, ValueError) as exc:
                    # Kafka retries; tokens are refused until the keys arrive
                    log.warning("cannot load the JWKS from %s: %s", jwks.url, exc)
                self._tasks.append(loop.create_task(self._refresh(jwks)))

    async def _refresh(self, jwks: JwksCache) -> None:
        loop = asyncio.get_running_loop()
        while True:
            await asyncio.sleep(1.0)
            if jwks.due():
                try:
                    await loop.run_in_executor(None, jwks.load)
                except (OSError, ValueError) as exc:
                    log.warning("cannot refresh the JWKS from %s: %s", jwks.url, exc)
                    await asyncio.sleep(10.0)

    def reload_tls(self, props: Mapping[str, str]) -> None:
        """Dynamic configs changed: TLS listeners whose keystore or truststore changed
        serve new connections with the new one (KIP-226); a setting that cannot be
        used is logged and the old one kept (AlterConfigs validated it already)."""
        for name, sec in self.listeners.items():
            if sec.reloadable is None:
                continue
            lc = ListenerConfig(props, name, sec.endpoint.protocol)
            try:
                new = sec.reloadable.reconfigured(lc)
            except TlsConfigError as exc:
                log.error("listener %s keeps its keystore: %s", name, exc)
                continue
            if new is not None:
                sec.reloadable.install(lc, new)
                log.info("listener %s: the new keystore/truststore serves new connections", name)

    def close(self) -> None:
        """Stop following the stores."""
        if self._cache is not None:
            self._cache.close()
        if self._acls is not None:
            self._acls.close()
        for task in self._tasks:
            task.cancel()
