"""The one error path: a handler raises, the dispatcher answers with the request
kind's error response and the code from the one table; an unexpected exception is
answered UNKNOWN_SERVER_ERROR, logged once with the request header, and the
connection stays open; an acks=0 Produce that fails closes it (no response could
tell the producer)."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import pytest

from kt.broker.dispatcher import RequestDispatcher
from kt.broker.error_responses import error_response
from kt.broker.errors import NotLeaderOrFollowerError, TopicError, error_code_for
from kt.broker.handlers import SERVED, Handler, RequestContext, load_all
from kt.broker.network import NetworkServer
from kt.broker.services import HandlerServices
from kt.protocol import ClientConnection, ErrorCode, Response, Struct, apis, encode_response
from kt.protocol.headers import decode_request, encode_request


def _raising(exc: Exception) -> Handler:
    async def handler(ctx: RequestContext, request: Struct) -> Any:
        raise exc

    return handler


async def _served(table: dict[int, Handler]) -> tuple[NetworkServer, int]:
    server = NetworkServer(RequestDispatcher(HandlerServices.only(), table), 1 << 20, 600_000)
    return server, await server.start("127.0.0.1", 0)


class _Client:
    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader, self.writer, self.conn = reader, writer, ClientConnection()

    async def call(self, api: Any, version: int, body: Any) -> Response | None:
        """One request and its response (None: the server closed the connection)."""
        _, data = self.conn.send_request(api.key, version, body)
        self.writer.write(data)
        async with asyncio.timeout(10):
            while True:
                chunk = await self.reader.read(1 << 16)
                if not chunk:
                    return None
                got = self.conn.receive_data(chunk)
                if got:
                    return got[0]


def _run(table: dict[int, Handler], test: Any) -> None:
    async def main() -> None:
        server, port = await _served(table)
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        try:
            await test(_Client(reader, writer))
        finally:
            writer.close()
            await server.stop()

    asyncio.run(main())


LIST_OFFSETS_BODY = {
    "replica_id": -1,
    "topics": [{"name": "t", "partitions": [{"partition_index": 3, "timestamp": -1}]}],
}


def test_an_unexpected_error_is_answered_and_logged_once(
    caplog: pytest.LogCaptureFixture,
) -> None:
    table = {
        apis.LIST_OFFSETS.key: _raising(RuntimeError("a bug")),
        apis.API_VERSIONS.key: _raising(RuntimeError("never")),
    }

    async def test(client: _Client) -> None:
        resp = await client.call(apis.LIST_OFFSETS, 7, LIST_OFFSETS_BODY)
        assert resp is not None
        (topic,) = resp.body.topics
        assert topic.name == "t"
        (part,) = topic.partitions
        assert (part.partition_index, part.error_code) == (3, ErrorCode.UNKNOWN_SERVER_ERROR)
        # the connection is still open: the next request is answered too
        again = await client.call(apis.LIST_OFFSETS, 7, LIST_OFFSETS_BODY)
        assert again is not None and again.correlation_id == resp.correlation_id + 1

    with caplog.at_level(logging.DEBUG, logger="kt.broker"):
        _run(table, test)
    errors = [r for r in caplog.records if r.levelno >= logging.ERROR]
    assert len(errors) == 2  # once per request, nothing else
    text = errors[0].getMessage()
    assert "ListOffsets v7" in text and "correlation id" in text and "UNKNOWN_SERVER_ERROR" in text
    assert errors[0].exc_info is not None and "a bug" in str(errors[0].exc_info[1])
    assert not any("closing connection" in r.getMessage() for r in caplog.records)


def test_a_typed_error_gets_its_code_for_every_item_asked_about() -> None:
    table = {apis.LIST_OFFSETS.key: _raising(NotLeaderOrFollowerError("not here"))}

    async def test(client: _Client) -> None:
        resp = await client.call(apis.LIST_OFFSETS, 7, LIST_OFFSETS_BODY)
        assert resp is not None
        assert resp.body.topics[0].partitions[0].error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER

    _run(table, test)


def test_a_top_level_error_code_and_message() -> None:
    table = {apis.CREATE_TOPICS.key: _raising(TopicError(ErrorCode.NOT_CONTROLLER, "not yet"))}
    body = {"topics": [{"name": "a", "num_partitions": 1, "replication_factor": 1,
                        "assignments": [], "configs": []}], "timeout_ms": 1000}  # fmt: skip

    async def test(client: _Client) -> None:
        resp = await client.call(apis.CREATE_TOPICS, 5, body)
        assert resp is not None
        (topic,) = resp.body.topics
        assert (topic.name, topic.error_code, topic.error_message) == (
            "a",
            ErrorCode.NOT_CONTROLLER,
            "not yet",
        )

    _run(table, test)


def test_a_failed_acks_0_produce_closes_the_connection() -> None:
    table = {apis.PRODUCE.key: _raising(RuntimeError("a bug"))}
    body = {"acks": 0, "timeout_ms": 1000, "topic_data": [
        {"name": "t", "partition_data": [{"index": 0, "records": b""}]}]}  # fmt: skip

    async def test(client: _Client) -> None:
        assert await client.call(apis.PRODUCE, 9, body) is None

    _run(table, test)


def test_every_served_request_has_an_error_response() -> None:
    # Built from a decoded request and encodable in every served version.
    load_all()
    for key, (lo, hi) in sorted(SERVED.items()):
        api = apis.APIS_BY_KEY[key]
        for version in range(max(lo, api.min_version), hi + 1):
            frame = encode_request(key, version, 1, api.request(), "t", size_prefix=False)
            _, request = decode_request(bytearray(frame))
            assert request is not None
            resp = error_response(key, version, request, ErrorCode.UNKNOWN_SERVER_ERROR, None)
            encode_response(key, version, 1, resp)


def test_the_table_reads_coded_errors() -> None:
    assert error_code_for(TopicError(ErrorCode.TOPIC_ALREADY_EXISTS, "x")) == (
        ErrorCode.TOPIC_ALREADY_EXISTS
    )
    assert error_code_for(RuntimeError()) == ErrorCode.UNKNOWN_SERVER_ERROR


def _decoded(api: Any, version: int, body: Any) -> Struct:
    frame = encode_request(api.key, version, 1, body, "t", size_prefix=False)
    _, request = decode_request(bytearray(frame))
    assert request is not None
    return request


def test_produce_and_fetch_errors_name_each_partition() -> None:
    code = ErrorCode.KAFKA_STORAGE_ERROR
    produce = _decoded(apis.PRODUCE, 9, {"acks": -1, "timeout_ms": 1, "topic_data": [
        {"name": "t", "partition_data": [{"index": 2, "records": b""}]}]})  # fmt: skip
    resp = error_response(apis.PRODUCE.key, 9, produce, code, None)
    part = resp.responses[0].partition_responses[0]
    assert (resp.responses[0].name, part.index, part.error_code) == ("t", 2, code)
    fetch = _decoded(apis.FETCH, 12, {"replica_id": -1, "max_wait_ms": 1, "min_bytes": 1,
        "topics": [{"topic": "t", "partitions": [{"partition": 4, "fetch_offset": 0,
                                                   "partition_max_bytes": 1}]}]})  # fmt: skip
    resp = error_response(apis.FETCH.key, 12, fetch, code, None)
    part = resp.responses[0].partitions[0]
    assert (resp.responses[0].topic, part.partition_index, part.error_code) == ("t", 4, code)
    encode_response(apis.FETCH.key, 12, 1, resp)
