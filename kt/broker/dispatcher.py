"""The request dispatcher: one decoded request in, its response body out.

The network layer (for client and broker connections) and the loopback link (the
controller's and coordinators' requests to their own broker) both answer through
it, so every request meets the same context and the same error path.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from kt.broker import handlers
from kt.broker.handlers import Handler, RequestContext, resolve

if TYPE_CHECKING:
    from kt.broker.services import HandlerServices
    from kt.protocol import RequestHeader, Struct


class RequestDispatcher:
    """Runs the handler of a request's API key with the broker's services."""

    def __init__(
        self, services: HandlerServices, handler_table: Mapping[int, Handler] | None = None
    ) -> None:
        self.services = services
        if handler_table is None:
            handlers.load_all()
            handler_table = handlers.HANDLERS
        # The request handlers by API key (tests pass their own).
        self.handlers = handler_table

    def serves(self, api_key: int) -> bool:
        """Whether a handler is registered for the API key."""
        return api_key in self.handlers

    async def dispatch(
        self, header: RequestHeader, body: Struct, client_host: str, connection_id: int
    ) -> Any:
        """The handler's result for the request (a body, a DeferredResponse, or None
        for no response)."""
        handler = self.handlers[header.api_key]
        return await handler(
            RequestContext(self.services, header, client_host, connection_id), body
        )

    async def answer(
        self, header: RequestHeader, body: Struct, client_host: str, connection_id: int
    ) -> Any:
        """The response body for the request, a deferred one awaited (for callers that
        answer one request at a time: the loopback link)."""
        return await resolve(await self.dispatch(header, body, client_host, connection_id))
