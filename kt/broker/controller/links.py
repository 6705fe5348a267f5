"""How the controller's requests reach a broker: over TCP, or to its own broker.

`NetworkLink` keeps one connection (the client library's BrokerConnection) to a
broker's inter-broker listener and reconnects after a failure; `LinkPool` keeps one
link per broker for a sender that talks to several (markers, verifications). `LoopbackLink`
delivers to the controller's own broker without a socket but through the same
codec and handlers a remote broker runs: the request is encoded, decoded, handled
and the response encoded and decoded again, so the single-node broker exercises
exactly the bytes and code paths of a cluster member.
"""

from __future__ import annotations

import contextlib
import itertools
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

from kt.broker.controller.channel import BrokerLink, LinkFactory
from kt.client.core import BrokerConnection
from kt.client.security import SecurityConfig
from kt.protocol import Struct
from kt.protocol.codec import Api
from kt.protocol.headers import decode_request, decode_response, encode_request, encode_response

if TYPE_CHECKING:
    from kt.broker.metadata.cache import MetadataCache
    from kt.protocol import RequestHeader


class Dispatch(Protocol):
    """Answers one decoded request as the broker's network layer would
    (kt.broker.dispatcher.Dispatch)."""

    async def answer(
        self, header: RequestHeader, body: Struct, client_host: str, connection_id: int
    ) -> Any:
        """The response body for the request (a deferred one awaited)."""
        ...


_correlation = itertools.count(1)


class NetworkLink:
    """A reconnecting connection to one broker."""

    def __init__(
        self,
        address: Callable[[], tuple[str, int] | None],
        *,
        broker_id: int,
        client_id: str,
        security: SecurityConfig | None = None,
    ) -> None:
        self._address = address
        self._broker_id = broker_id
        self._client_id = client_id
        # the inter-broker listener's TLS/SASL, as a client of that listener
        self._security = security
        self._conn: BrokerConnection | None = None

    async def send(self, api: Api, body: Any) -> Struct:
        """Send and await the response (connecting first if needed)."""
        if self._conn is None or not self._conn.connected:
            addr = self._address()
            if addr is None:
                raise ConnectionError(f"broker {self._broker_id} has no known endpoint")
            conn = BrokerConnection(addr[0], addr[1], node_id=self._broker_id,
                                    client_id=self._client_id,
                                    security=self._security)  # fmt: skip
            await conn.connect()
            self._conn = conn
        return await self._conn.request(api, body)

    async def close(self) -> None:
        """Drop the connection."""
        if self._conn is not None:
            await self._conn.close()
            self._conn = None


class LoopbackLink:
    """The controller's requests to its own broker, through the codec, no socket."""

    def __init__(self, dispatcher: Dispatch, *, client_id: str) -> None:
        self._dispatcher = dispatcher
        self._client_id = client_id

    async def send(self, api: Api, body: Any) -> Struct:
        """Encode, handle as a received request would be, and decode the answer."""
        version = api.max_version
        cid = next(_correlation)
        frame = encode_request(api.key, version, cid, body, self._client_id, size_prefix=False)
        header, request = decode_request(frame)
        assert request is not None
        response = await self._dispatcher.answer(header, request, "loopback", 0)
        data = encode_response(api.key, version, cid, response, size_prefix=False)
        _, decoded = decode_response(api.key, version, data)
        return decoded

    async def close(self) -> None:
        """Nothing to close."""


class LinkPool:
    """One link per broker, made on first use by `make(broker_id)`."""

    def __init__(self, make: LinkFactory) -> None:
        self._make = make
        self._links: dict[int, BrokerLink] = {}

    def get(self, broker_id: int) -> BrokerLink:
        """The broker's link (made now if it has none)."""
        link = self._links.get(broker_id)
        if link is None:
            link = self._links[broker_id] = self._make(broker_id)
        return link

    async def drop(self, broker_id: int) -> None:
        """Close and forget the broker's link (after a failure: the next `get`
        makes a fresh one); closing errors are of no interest then."""
        link = self._links.pop(broker_id, None)
        if link is not None:
            with contextlib.suppress(Exception):
                await link.close()

    async def close(self) -> None:
        """Drop every link."""
        for broker_id in list(self._links):
            await self.drop(broker_id)


class PeerLinks:
    """Links from this broker to any broker of the cluster, itself included: through
    the codec without a socket to itself (`LoopbackLink`), over a reconnecting
    connection to the others, addressed from the metadata cache on this broker's
    listener (`LiveBroker.endpoint_for`). Coordinators and the marker sender make
    their links here; `dispatcher` returns the broker's request dispatcher (built
    after the services that hold this object)."""

    def __init__(
        self,
        node_id: int,
        listener_name: str,
        cache: MetadataCache,
        dispatcher: Callable[[], Dispatch],
        security: SecurityConfig | None = None,
    ) -> None:
        self.node_id = node_id
        self.security = security
        self._listener = listener_name
        self._cache = cache
        self._dispatcher = dispatcher

    def address(self, broker_id: int) -> tuple[str, int] | None:
        """Where broker `broker_id` listens, as the metadata cache knows it."""
        info = self._cache.broker(broker_id)
        ep = info.endpoint_for(self._listener) if info is not None else None
        return (ep.host, ep.port) if ep is not None else None

    def link(self, broker_id: int, client_id: str) -> BrokerLink:
        """A new link to `broker_id` (the caller owns and closes it)."""
        if broker_id == self.node_id:
            return LoopbackLink(self._dispatcher(), client_id=client_id)
        return NetworkLink(
            lambda: self.address(broker_id), broker_id=broker_id, client_id=client_id,
            security=self.security,
        )  # fmt: skip
