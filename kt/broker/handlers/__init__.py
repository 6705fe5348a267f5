"""Request handlers: one module per API family, registered by API key.

A handler is `async def handle(ctx: RequestContext, request: Struct) -> Struct`:
it gets the decoded request body and returns the response body (a Struct of the
API's response class or a dict). The network layer encodes it in the request's
version, so handlers only fill fields; fields a version lacks are dropped. A
handler whose work is done but whose answer must wait (an acks=all Produce
waiting for replication) may return a :class:`DeferredResponse` instead: the
network layer sends it in its turn, in request order, and meanwhile handles the
connection's next Produce requests.

`SERVED` lists, per API key, the version range advertised in ApiVersions. Like
Apache Kafka 4.0, Produce and Fetch are advertised from version 0 (librdkafka
before 2.11 enables compression and the v2 format only when the advertised range
includes the old versions) but versions below 3 / 4 are answered with
UNSUPPORTED_VERSION.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from kt.protocol import RequestHeader, Struct

if TYPE_CHECKING:
    from kt.broker.metadata.cache import Endpoint, LiveBroker
    from kt.broker.services import HandlerServices

Handler = Callable[["RequestContext", Struct], Awaitable[Any]]


@dataclass(slots=True)
class RequestContext:
    """What a handler knows about the request besides its body: the services it
    may use (never the broker itself), the request header, and the connection.

    Security hooks in here without touching the handlers' signatures: the network
    layer, once it authenticates connections, fills a `principal` and the
    `listener` the connection arrived on (two new fields with defaults for
    unauthenticated PLAINTEXT, so existing callers stay valid), and the
    composition root adds an `authorizer` to `HandlerServices`; a handler then
    asks `ctx.services.authorizer.authorize(ctx.principal, operation, resource)`
    and raises the authorization error, which the dispatcher answers like any
    other (kt.broker.dispatcher).
    """

    services: HandlerServices
    header: RequestHeader
    client_host: str
    connection_id: int
    #: Who sent the request: `User:<name>` from SASL or the TLS certificate, else
    #: `User:ANONYMOUS`.
    principal: str = "User:ANONYMOUS"
    #: The listener the connection arrived on ("" for the loopback link).
    listener: str = ""

    @property
    def version(self) -> int:
        """The request's API version."""
        return self.header.api_version

    @property
    def client_id(self) -> str:
        """The client id from the request header ('' when null)."""
        return self.header.client_id or ""

    def endpoint_of(self, broker: LiveBroker) -> Endpoint | None:
        """Where this request's client reaches `broker`: its endpoint on the listener
        the connection came in on (None: it has none there, and Kafka leaves such a
        broker out), or, for the loopback link, the one rule of
        `LiveBroker.endpoint_for` on this broker's inter-broker listener. Metadata,
        DescribeCluster and FindCoordinator all answer with it."""
        if self.listener:
            return broker.endpoint(self.listener)
        return broker.endpoint_for(self.services.node.listener_name)


class DeferredResponse:
    """A response that is not ready yet: `finish()` awaits and returns the body.
    Nothing runs until it is awaited (so an abandoned one leaves nothing behind)."""

    __slots__ = ("_finish",)

    def __init__(self, finish: Callable[[], Awaitable[Any]]) -> None:
        self._finish = finish

    async def result(self) -> Any:
        """The response body, once ready."""
        return await self._finish()


async def resolve(response: Any) -> Any:
    """The response body of a handler's result, waiting out a DeferredResponse (for
    callers that answer one request at a time, without the network layer)."""
    if isinstance(response, DeferredResponse):
        return await response.result()
    return response


# api key -> (min version, max version) advertised in ApiVersions.
SERVED: dict[int, tuple[int, int]] = {}
HANDLERS: dict[int, Handler] = {}


def handles(api_key: int, versions: tuple[int, int]) -> Callable[[Handler], Handler]:
    """Register a handler for `api_key`, advertised over `versions` (inclusive)."""

    def register(func: Handler) -> Handler:
        SERVED[api_key] = versions
        HANDLERS[api_key] = func
        return func

    return register


def load_all() -> None:
    """Import every handler module so they register themselves."""
    import importlib
    import pkgutil

    for info in pkgutil.iter_modules(__path__):
        importlib.import_module(f"{__name__}.{info.name}")
