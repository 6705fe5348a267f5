"""Calling request handlers in process: a Broker opened on a temp dir, requests and
responses passed through the wire codec (so version rules apply as on the wire)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from kt.broker.broker import Broker
from kt.broker.config import load_config
from kt.broker.handlers import HANDLERS, RequestContext, load_all
from kt.protocol import Struct, decode_request, decode_response, encode_request, encode_response


def open_broker(tmp_path: Path, **overrides: str) -> Broker:
    """A broker on `tmp_path` (not listening; close it with `broker.close()`)."""
    props = {"log.dirs": str(tmp_path / "data"), "listeners": "PLAINTEXT://127.0.0.1:9092"}
    broker = Broker(load_config(None, {**props, **overrides}))
    broker.open()
    return broker


def call(broker: Broker, api: Any, version: int, body: Any) -> Struct | None:
    """One request through its handler: the decoded response body (None: no response)."""
    load_all()
    frame = encode_request(api.key, version, 1, body, "kt-test", size_prefix=False)
    header, request = decode_request(bytearray(frame))
    assert request is not None
    ctx = RequestContext(broker, header, "127.0.0.1", 1)
    response = asyncio.run(HANDLERS[api.key](ctx, request))
    if response is None:
        return None
    data = encode_response(api.key, version, 1, response, size_prefix=False)
    return decode_response(api.key, version, data)[1]
