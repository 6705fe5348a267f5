"""h11-style connection state machines for both ends of a Kafka connection, no I/O.

`ClientConnection` turns request objects into bytes to send and received bytes
into responses, matching each response to its request by correlation id (Kafka
answers strictly in order, so a mismatch is a protocol violation). It knows that
Produce with acks=0 gets no response. For SASL after a v0 handshake (brokers older
than SaslAuthenticate), `send_raw` frames a bare token and its answer comes back
as a `Response` with `raw` set and no header.

`ServerConnection` turns received bytes into (header, body) requests and encodes
responses with the right header for the request they answer.

The caller owns the socket: feed what you read to `receive_data`, write what the
`send_*` methods return (`send_response_parts`: bytes chunks and ExternalRecords
placeholders whose bytes the caller sends from their source).
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from typing import Any

from kt.protocol.apis import PRODUCE, SASL_AUTHENTICATE
from kt.protocol.errors import CorrelationIdMismatch
from kt.protocol.framing import DEFAULT_MAX_FRAME_SIZE, FrameDecoder
from kt.protocol.framing import frame as framed
from kt.protocol.headers import (
    RequestHeader,
    ResponseHeader,
    decode_request,
    decode_response,
    encode_request,
    encode_response,
    encode_response_parts,
    peek_correlation_id,
)
from kt.protocol.regions import Part
from kt.protocol.schema import Struct


@dataclass(slots=True)
class Response:
    """A decoded response and the request it answers."""

    api_key: int
    api_version: int
    header: ResponseHeader
    body: Struct
    #: a raw SASL token (the answer to `send_raw`; api_key is then RAW_TOKEN and
    #: `body` a SaslAuthenticate v0 response carrying it)
    raw: bytes | None = None

    @property
    def correlation_id(self) -> int:
        """The correlation id shared with the request."""
        return self.header.correlation_id


@dataclass(slots=True)
class Request:
    """A received request; `body` is None when we do not support its API/version."""

    header: RequestHeader
    body: Struct | None


#: api_key of the in-flight entry (and Response) of a raw SASL token
RAW_TOKEN = -1


class ClientConnection:
    """The client side of one connection."""

    def __init__(
        self,
        client_id: str | None = "kt",
        *,
        max_frame_size: int = DEFAULT_MAX_FRAME_SIZE,
        first_correlation_id: int = 0,
    ) -> None:
        self.client_id = client_id
        self._frames = FrameDecoder(max_frame_size)
        self._next_id = first_correlation_id
        self._in_flight: deque[tuple[int, int, int]] = deque()

    @property
    def in_flight(self) -> int:
        """Requests sent whose response has not arrived yet."""
        return len(self._in_flight)

    def send_request(
        self,
        api_key: int,
        api_version: int,
        body: Any,
        *,
        expect_response: bool | None = None,
    ) -> tuple[int, bytes]:
        """Encode a request; returns (correlation_id, bytes to send).

        `expect_response` defaults to True except for Produce with acks=0, to which
        Kafka never answers.
        """
        correlation_id = self._next_id
        # Correlation ids are int32 on the wire; wrap rather than overflow.
        self._next_id = (self._next_id + 1) & 0x7FFFFFFF
        data = encode_request(api_key, api_version, correlation_id, body, self.client_id)
        if expect_response is None:
            acks = body.get("acks") if isinstance(body, dict) else getattr(body, "acks", None)
            expect_response = not (api_key == PRODUCE.key and acks == 0)
        if expect_response:
            self._in_flight.append((correlation_id, api_key, api_version))
        return correlation_id, data

    def send_raw(self, token: bytes) -> bytes:
        """Frame a raw SASL token (v0 handshake); its answer is a raw frame too."""
        self._in_flight.append((RAW_TOKEN, RAW_TOKEN, 0))
        return framed(token)

    def receive_data(self, data: bytes | bytearray | memoryview) -> list[Response]:
        """Feed received bytes; returns the responses they complete, in order.

        Raises DecodeError (FrameSizeError, CorrelationIdMismatch) on protocol
        violations; the connection is then unusable.
        """
        out: list[Response] = []
        for frame in self._frames.feed(data):
            if not self._in_flight:
                raise CorrelationIdMismatch("response received with no request in flight")
            expected, api_key, api_version = self._in_flight[0]
            if api_key == RAW_TOKEN:
                self._in_flight.popleft()
                # shaped as a SaslAuthenticate v0 answer, so callers read one shape
                body = SASL_AUTHENTICATE.response(error_code=0, auth_bytes=frame)
                out.append(Response(RAW_TOKEN, 0, ResponseHeader(RAW_TOKEN), body, frame))
                continue
            got = peek_correlation_id(frame)
            if got != expected:
                raise CorrelationIdMismatch(
                    f"response has correlation id {got}, expected {expected}"
                )
            self._in_flight.popleft()
            header, body = decode_response(api_key, api_version, frame)
            out.append(Response(api_key, api_version, header, body))
        return out


class ServerConnection:
    """The broker side of one connection."""

    def __init__(self, *, max_frame_size: int = DEFAULT_MAX_FRAME_SIZE) -> None:
        self._frames = FrameDecoder(max_frame_size)

    def receive_data(self, data: bytes | bytearray | memoryview) -> list[Request]:
        """Feed received bytes; returns the requests they complete, in order.

        Raises DecodeError (or FrameSizeError) for malformed input: close then.
        """
        return [Request(*decode_request(f)) for f in self._frames.feed(data)]

    def send_response(self, request: RequestHeader | Request, body: Any) -> bytes:
        """Encode `body` as the response to `request`; returns the bytes to send."""
        header = request.header if isinstance(request, Request) else request
        return encode_response(header.api_key, header.api_version, header.correlation_id, body)

    def send_response_parts(self, request: RequestHeader | Request, body: Any) -> list[Part]:
        """Like send_response, for a body holding ExternalRecords placeholders: returns
        the frame as bytes chunks and placeholders, to be written in order."""
        header = request.header if isinstance(request, Request) else request
        return encode_response_parts(
            header.api_key, header.api_version, header.correlation_id, body
        )
