"""The request dispatcher: one decoded request in, its response body out.

The network layer (for client and broker connections) and the loopback link (the
controller's and coordinators' requests to their own broker) both answer through
it, so every request meets the same context and the same error path:

- a handler raises, the dispatcher answers: the exception's Kafka code comes from
  the one table (`kt.broker.errors.error_code_for`) and the response from the
  request kind's error response (`kt.broker.error_responses`);
- an unexpected exception (no code in the table) is answered UNKNOWN_SERVER_ERROR
  and logged once, with the request's header (API, version, correlation id,
  client id; never the body) and the traceback; the connection stays open;
- `CloseConnection` closes the connection instead (a failed acks=0 Produce, which
  no response could report), and so does any error of an acks=0 Produce.

Kafka does the same in `KafkaApis.handle` (`requestHelper.handleError`).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from kt.broker import handlers
from kt.broker.error_responses import error_response
from kt.broker.errors import CloseConnection, error_code_for
from kt.broker.handlers import DeferredResponse, Handler, RequestContext, resolve
from kt.protocol import ErrorCode, apis

if TYPE_CHECKING:
    from kt.broker.services import HandlerServices
    from kt.protocol import RequestHeader, Struct

log = logging.getLogger("kt.broker.dispatcher")


class RequestDispatcher:
    """Runs the handler of a request's API key with the broker's services and turns
    what it raises into the request's error response."""

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
        self,
        header: RequestHeader,
        body: Struct,
        client_host: str,
        connection_id: int,
        *,
        principal: str = "User:ANONYMOUS",
        listener: str = "",
    ) -> Any:
        """The handler's result for the request (a body, a DeferredResponse, or None
        for no response); an exception becomes the request's error response.
        `principal` and `listener` are the connection's (see RequestContext)."""
        handler = self.handlers[header.api_key]
        ctx = RequestContext(self.services, header, client_host, connection_id, principal, listener)
        try:
            result = await handler(ctx, body)
        except CloseConnection:
            raise
        except Exception as exc:
            return self.answer_error(header, body, exc, client_host)
        if isinstance(result, DeferredResponse):
            deferred = result

            async def finish() -> Any:
                try:
                    return await deferred.result()
                except CloseConnection:
                    raise
                except Exception as exc:
                    return self.answer_error(header, body, exc, client_host)

            return DeferredResponse(finish)
        return result

    async def answer(
        self, header: RequestHeader, body: Struct, client_host: str, connection_id: int
    ) -> Any:
        """The response body for the request, a deferred one awaited (for callers that
        answer one request at a time: the loopback link)."""
        return await resolve(await self.dispatch(header, body, client_host, connection_id))

    def answer_error(
        self, header: RequestHeader, body: Struct, exc: Exception, client_host: str
    ) -> Any:
        """The error response for `exc` raised while handling the request (see the
        module docstring); raises CloseConnection where no response may be sent."""
        code = error_code_for(exc)
        if header.api_key == apis.PRODUCE.key and getattr(body, "acks", None) == 0:
            raise CloseConnection(f"acks=0 produce failed: {code.name}") from exc
        if code == ErrorCode.UNKNOWN_SERVER_ERROR:
            log.error(
                "unexpected error handling %s v%d (correlation id %d, client id %r, from %s); "
                "answered UNKNOWN_SERVER_ERROR",
                _api_name(header.api_key), header.api_version, header.correlation_id,
                header.client_id, client_host, exc_info=exc,
            )  # fmt: skip
            message: str | None = None
        else:
            message = getattr(exc, "message", None) or str(exc) or None
            log.debug(
                "%s v%d (correlation id %d) answered %s: %s",
                _api_name(header.api_key), header.api_version, header.correlation_id,
                code.name, message,
            )  # fmt: skip
        return error_response(header.api_key, header.api_version, body, code, message)


def _api_name(key: int) -> str:
    api = apis.APIS_BY_KEY.get(key)
    return api.name if api is not None else f"API {key}"
