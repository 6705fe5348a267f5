"""The wire-protocol core: a sans-IO codec driven by schema data, and a client library.

Typical use (broker side)::

    from kt.protocol import ServerConnection, apis
    conn = ServerConnection()
    for req in conn.receive_data(chunk):          # bytes read from the socket
        if req.body is None:                      # API/version we do not support
            ...
        elif req.header.api_key == apis.METADATA.key:
            reply = apis.METADATA.response(brokers=[...], topics=[...])
            sock.send(conn.send_response(req, reply))

Client side: `ClientConnection.send_request(api_key, version, body)` returns the bytes
to send; `receive_data` returns decoded `Response`s. Lower level: `encode_request`,
`decode_request`, `encode_response`, `decode_response`, `FrameDecoder`.

Zero-copy fetch: put `ExternalRecords(length, source)` in a response's `records`
fields and send with `send_response_parts`, which returns bytes chunks and those
placeholders in wire order; the transport sends each placeholder's bytes from its
`source` (e.g. `os.sendfile`).
"""

from kt.protocol import apis
from kt.protocol.apis import ALL_APIS, APIS_BY_KEY, APIS_BY_NAME, api_for_key
from kt.protocol.codec import Api, DataSchema, MessageSchema
from kt.protocol.connection import ClientConnection, Request, Response, ServerConnection
from kt.protocol.errors import (
    CorrelationIdMismatch,
    DecodeError,
    EncodeError,
    ErrorCode,
    FrameSizeError,
    ProtocolError,
    UnsupportedVersionError,
    error_for_code,
    error_for_name,
)
from kt.protocol.framing import DEFAULT_MAX_FRAME_SIZE, FrameDecoder, frame
from kt.protocol.headers import (
    RequestHeader,
    ResponseHeader,
    decode_request,
    decode_request_header,
    decode_response,
    encode_request,
    encode_response,
    encode_response_parts,
)
from kt.protocol.regions import ExternalRecords, join_parts
from kt.protocol.schema import Struct

__all__ = [
    "ALL_APIS",
    "APIS_BY_KEY",
    "APIS_BY_NAME",
    "DEFAULT_MAX_FRAME_SIZE",
    "Api",
    "ClientConnection",
    "CorrelationIdMismatch",
    "DataSchema",
    "DecodeError",
    "EncodeError",
    "ErrorCode",
    "ExternalRecords",
    "FrameDecoder",
    "FrameSizeError",
    "MessageSchema",
    "ProtocolError",
    "Request",
    "RequestHeader",
    "Response",
    "ResponseHeader",
    "ServerConnection",
    "Struct",
    "UnsupportedVersionError",
    "api_for_key",
    "apis",
    "decode_request",
    "decode_request_header",
    "decode_response",
    "encode_request",
    "encode_response",
    "encode_response_parts",
    "error_for_code",
    "error_for_name",
    "frame",
    "join_parts",
]
