"""Request/response headers and whole-message encoding and decoding.

A request frame is a request header (v1: api_key, api_version, correlation_id,
client_id; v2 adds a tagged-field section; v0, used only by ControlledShutdown v0,
lacks the client_id) followed by the body; a response frame is a response header
(v0: correlation_id; v1 adds tagged fields) and the body.
Flexible API versions use the newer header versions, except that ApiVersions
responses always use header v0 so that any client can read them.

`encode_*` return bytes ready to write to a socket, 4-byte size prefix included
(pass `size_prefix=False` to leave it out); `encode_response_parts` returns them in
parts around ExternalRecords placeholders (see regions.py). `decode_*` take one
frame *without* the prefix, as `FrameDecoder` yields them.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field
from typing import Any

from kt.protocol import primitives as p
from kt.protocol import regions
from kt.protocol.apis import API_VERSIONS, APIS_BY_KEY
from kt.protocol.codec import Api
from kt.protocol.errors import DecodeError, EncodeError, UnsupportedVersionError
from kt.protocol.schema import Struct

_API_VERSIONS_KEY = API_VERSIONS.key
_HEADER_PREFIX = struct.Struct(">hhi")


@dataclass(slots=True)
class RequestHeader:
    """The header of a request (any version; `header_version` says which)."""

    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None = None
    header_version: int = 1
    #: tagged fields of header v2 as (tag, raw bytes); none are defined today
    tagged_fields: list[tuple[int, bytes]] = field(default_factory=list)

    @property
    def api(self) -> Api | None:
        """The Api for `api_key`, or None when we do not implement it."""
        return APIS_BY_KEY.get(self.api_key)

    @property
    def supported(self) -> bool:
        """Whether we implement this API key and version (so the body was decoded)."""
        api = self.api
        return api is not None and self.api_version in api.versions


@dataclass(slots=True)
class ResponseHeader:
    """The header of a response."""

    correlation_id: int
    header_version: int = 0
    tagged_fields: list[tuple[int, bytes]] = field(default_factory=list)


def _api(api_key: int, api_version: int) -> Api:
    api = APIS_BY_KEY.get(api_key)
    if api is None:
        raise UnsupportedVersionError(f"unknown API key {api_key}")
    if api_version not in api.versions:
        raise UnsupportedVersionError(f"{api.name} has no version {api_version}")
    return api


def _start(size_prefix: bool) -> bytearray:
    return bytearray(4) if size_prefix else bytearray()


def _finish(out: bytearray, size_prefix: bool) -> bytes:
    if size_prefix:
        p.INT32.pack_into(out, 0, len(out) - 4)
    return bytes(out)


def encode_request(
    api_key: int,
    api_version: int,
    correlation_id: int,
    body: Any,
    client_id: str | None = "kt",
    *,
    size_prefix: bool = True,
) -> bytes:
    """Encode a request (header chosen from the API version) and its body.

    `body` is the API's request object or a dict of its fields. `client_id` is
    left out when the header version has none (ControlledShutdown v0). Raises
    UnsupportedVersionError for an API/version we do not know, EncodeError for a
    body that does not fit the version.
    """
    api = _api(api_key, api_version)
    out = _start(size_prefix)
    hv = api.request_header_version(api_version)
    out += p.INT16.pack(api_key) + p.INT16.pack(api_version) + p.INT32.pack(correlation_id)
    if hv >= 1:
        # client_id stays a classic nullable string even in header v2 (Kafka keeps
        # it readable by brokers that cannot parse the rest of a newer header).
        p.write_nullable_string(out, client_id)
    if hv >= 2:
        out.append(0)
    api.request.encode_into(out, body, api_version)
    return _finish(out, size_prefix)


def decode_request_header(frame: bytes | bytearray | memoryview) -> tuple[RequestHeader, int]:
    """Decode just the request header; returns it and the body's offset.

    For an API key we do not know the header version cannot be known, so the
    client_id (and any tagged fields) are read only on a best-effort basis: the
    api_key, api_version and correlation_id, which are all a broker needs to answer
    or close, always come through.
    """
    buf = frame if isinstance(frame, memoryview) else memoryview(frame)
    if len(buf) < 8:
        raise DecodeError(f"request frame of {len(buf)} bytes is too short for a header")
    api_key, api_version, correlation_id = _HEADER_PREFIX.unpack_from(buf, 0)
    header = RequestHeader(api_key, api_version, correlation_id)
    api = APIS_BY_KEY.get(api_key)
    known = api is not None and api_version in api.versions
    if api is not None and api.request_header_version(api_version) == 0:
        header.header_version = 0
        return header, 8
    try:
        header.client_id, pos = p.read_nullable_string(buf, 8)
        if api is not None and api.request_header_version(api_version) >= 2:
            header.header_version = 2
            tags, pos = p.read_tagged_fields(buf, pos)
            header.tagged_fields = [(t, bytes(v)) for t, v in tags]
    except DecodeError:
        if known:
            raise
        pos = len(buf)
    return header, pos


def decode_request(frame: bytes | bytearray | memoryview) -> tuple[RequestHeader, Struct | None]:
    """Decode a request frame into (header, body).

    When we do not implement the API key or version, the body is None and
    `header.supported` is False: the broker then answers UNSUPPORTED_VERSION (for
    ApiVersions) or closes the connection. Anything malformed raises DecodeError.
    """
    buf = frame if isinstance(frame, memoryview) else memoryview(frame)
    header, pos = decode_request_header(buf)
    api = APIS_BY_KEY.get(header.api_key)
    if api is None or header.api_version not in api.versions:
        return header, None
    body, _ = api.request.decode_from(buf, pos, header.api_version)
    return header, body


def encode_response(
    api_key: int,
    api_version: int,
    correlation_id: int,
    body: Any,
    *,
    size_prefix: bool = True,
) -> bytes:
    """Encode a response with the header version Kafka uses for this API version."""
    api = _api(api_key, api_version)
    out = _start(size_prefix)
    out += p.INT32.pack(correlation_id)
    if api.response_header_version(api_version) >= 1:
        out.append(0)
    api.response.encode_into(out, body, api_version)
    return _finish(out, size_prefix)


def encode_response_parts(
    api_key: int,
    api_version: int,
    correlation_id: int,
    body: Any,
    *,
    size_prefix: bool = True,
) -> list[regions.Part]:
    """Encode a response whose `records` fields may hold ExternalRecords placeholders.

    Returns the frame as parts in wire order: bytes chunks and the placeholders,
    whose bytes the transport sends itself (e.g. `os.sendfile`); the size prefix
    counts them. Without placeholders the result is `[encode_response(...)]`.
    """
    api = _api(api_key, api_version)
    out = _start(size_prefix)
    out += p.INT32.pack(correlation_id)
    if api.response_header_version(api_version) >= 1:
        out.append(0)
    response = api.response
    marks = regions.encode_collecting(lambda buf: response.encode_into(buf, body, api_version), out)
    if not marks:
        return [_finish(out, size_prefix)]
    if size_prefix:
        size = len(out) - 4 + sum(ext.length for _, ext in marks)
        if size > 0x7FFFFFFF:
            raise EncodeError(f"response of {size} bytes does not fit a frame")
        p.INT32.pack_into(out, 0, size)
    return regions.split(out, marks)


def decode_response_header(
    api_key: int, api_version: int, frame: bytes | bytearray | memoryview
) -> tuple[ResponseHeader, int]:
    """Decode the response header of a frame; returns it and the body's offset."""
    api = _api(api_key, api_version)
    buf = frame if isinstance(frame, memoryview) else memoryview(frame)
    correlation_id, pos = p.read_int32(buf, 0)
    header = ResponseHeader(correlation_id)
    if api.response_header_version(api_version) >= 1:
        header.header_version = 1
        tags, pos = p.read_tagged_fields(buf, pos)
        header.tagged_fields = [(t, bytes(v)) for t, v in tags]
    return header, pos


def decode_response(
    api_key: int, api_version: int, frame: bytes | bytearray | memoryview
) -> tuple[ResponseHeader, Struct]:
    """Decode a response frame of the given API and version into (header, body).

    ApiVersions gets Kafka's fallback: a broker that does not support the version
    we asked for answers in version 0, so a body that does not parse in the
    requested version is read again as version 0.
    """
    buf = frame if isinstance(frame, memoryview) else memoryview(frame)
    api = _api(api_key, api_version)
    header, pos = decode_response_header(api_key, api_version, buf)
    try:
        body, _ = api.response.decode_from(buf, pos, api_version)
    except DecodeError:
        if api_key != _API_VERSIONS_KEY or api_version == 0:
            raise
        body, _ = api.response.decode_from(buf, pos, 0)
    return header, body


def peek_correlation_id(frame: bytes | bytearray | memoryview) -> int:
    """The correlation id at the start of a response frame."""
    buf = frame if isinstance(frame, memoryview) else memoryview(frame)
    return int(p.read_int32(buf, 0)[0])
