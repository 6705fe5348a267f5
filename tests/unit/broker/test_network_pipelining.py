"""The network layer's pipelined produce responses, against handlers the test drives.

An acks=all Produce answers with a DeferredResponse once its records are appended;
the connection's next Produce requests are handled meanwhile and the responses
still leave in request order. These tests replace the handler table, so each
deferred response completes exactly when the test says.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

from kt.broker.dispatcher import RequestDispatcher
from kt.broker.handlers import DeferredResponse, Handler, RequestContext
from kt.broker.network import MAX_DEFERRED, CloseConnection, NetworkServer
from kt.broker.services import HandlerServices
from kt.protocol import ClientConnection, ErrorCode, Response, Struct, apis

PRODUCE, API_VERSIONS = apis.PRODUCE.key, apis.API_VERSIONS.key


class Script:
    """Fake handlers: every call is logged by correlation id; a Produce whose
    correlation id is in `deferred` answers with a DeferredResponse completed by
    `release(cid)`, one in `errors` answers at once with that error code, one in
    `closes` raises CloseConnection, one in `fails` has its deferred result raise."""

    def __init__(self) -> None:
        self.calls: list[int] = []
        self.deferred: set[int] = set()
        self.errors: dict[int, int] = {}
        self.closes: set[int] = set()
        self.fails: set[int] = set()
        self.gates: dict[int, asyncio.Future[None]] = {}
        self.finished: list[int] = []
        self.cancelled: list[int] = []

    def release(self, cid: int) -> None:
        gate = self.gates[cid]
        if not gate.done():  # (cancelled with the connection's writer)
            gate.set_result(None)

    def table(self) -> dict[int, Handler]:
        async def produce(ctx: RequestContext, _req: Struct) -> Any:
            cid = ctx.header.correlation_id
            self.calls.append(cid)
            if cid in self.closes:
                raise CloseConnection("told to")
            code = self.errors.get(cid, ErrorCode.NONE)
            body = _produce_response(cid, code)
            if cid not in self.deferred:
                return body
            gate = self.gates[cid] = asyncio.get_running_loop().create_future()

            async def finish() -> Any:
                try:
                    await gate
                except asyncio.CancelledError:
                    self.cancelled.append(cid)
                    raise
                self.finished.append(cid)
                if cid in self.fails:
                    raise RuntimeError("a bug in a deferred response")
                return body

            return DeferredResponse(finish)

        async def api_versions(ctx: RequestContext, _req: Struct) -> Any:
            self.calls.append(ctx.header.correlation_id)
            return apis.API_VERSIONS.response(error_code=0, api_keys=[])

        return {PRODUCE: produce, API_VERSIONS: api_versions}


def _produce_response(cid: int, code: int) -> Any:
    # The correlation id as the base offset, so a test can tell responses apart.
    part = {"index": 0, "error_code": code, "base_offset": cid, "log_append_time_ms": -1,
            "log_start_offset": 0}  # fmt: skip
    return apis.PRODUCE.response(
        responses=[{"name": "t", "partition_responses": [part]}], throttle_time_ms=0
    )


class Client:
    """A raw connection: pipelined requests out, decoded responses in."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader, self.writer = reader, writer
        self.conn = ClientConnection()
        self.got: list[Response] = []

    def produce(self) -> int:
        body = {"acks": -1, "timeout_ms": 30000, "topic_data": [
            {"name": "t", "partition_data": [{"index": 0, "records": b""}]}]}  # fmt: skip
        cid, data = self.conn.send_request(PRODUCE, 9, body)
        self.writer.write(data)
        return cid

    def api_versions(self) -> int:
        cid, data = self.conn.send_request(
            API_VERSIONS, 3, {"client_software_name": "t", "client_software_version": "1"}
        )
        self.writer.write(data)
        return cid

    async def receive(self, count: int, timeout: float = 5.0) -> list[Response]:
        """Read until `count` responses in all (raises on an out-of-order one)."""
        async with asyncio.timeout(timeout):
            while len(self.got) < count:
                chunk = await self.reader.read(1 << 16)
                assert chunk, f"connection closed after {len(self.got)} responses"
                self.got += self.conn.receive_data(chunk)
        return self.got

    async def closed(self, timeout: float = 5.0) -> bool:
        """Read to the end: True when the server closed the connection."""
        async with asyncio.timeout(timeout):
            while chunk := await self.reader.read(1 << 16):
                self.got += self.conn.receive_data(chunk)
        return True


def _run(test: Callable[[Script, NetworkServer, Client], Awaitable[None]]) -> None:
    async def main() -> None:
        script = Script()
        dispatcher = RequestDispatcher(HandlerServices.only(), script.table())
        server = NetworkServer(dispatcher, 1 << 20, 600_000)
        port = await server.start("127.0.0.1", 0)
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        try:
            await test(script, server, Client(reader, writer))
        finally:
            writer.close()
            await server.stop()

    asyncio.run(main())


async def _settle() -> None:
    # Let the server handle what was sent (a few loop turns; no timing involved).
    for _ in range(50):
        await asyncio.sleep(0)


async def _until(cond: Callable[[], bool], timeout: float = 5.0) -> None:
    async with asyncio.timeout(timeout):
        while not cond():
            await asyncio.sleep(0.001)


def _offsets(got: list[Response]) -> list[int]:
    return [r.body.responses[0].partition_responses[0].base_offset for r in got]


def test_deferred_produces_are_handled_ahead_and_answered_in_order() -> None:
    async def test(script: Script, _server: NetworkServer, client: Client) -> None:
        cids = [client.produce() for _ in range(3)]
        script.deferred.update(cids)
        await _until(lambda: len(script.calls) == 3)
        # All three were handled (appended) before any was answered.
        assert script.calls == cids and not client.got
        script.release(cids[2])
        script.release(cids[1])
        await _settle()
        assert not client.got  # the first still waits, so nothing may leave
        script.release(cids[0])
        got = await client.receive(3)
        assert [r.correlation_id for r in got] == cids
        assert _offsets(got) == cids

    _run(test)


def test_a_failed_produce_among_deferred_ones_keeps_its_place() -> None:
    async def test(script: Script, _server: NetworkServer, client: Client) -> None:
        cids = [client.produce() for _ in range(4)]
        script.deferred.update({cids[0], cids[2]})
        script.errors[cids[1]] = ErrorCode.NOT_LEADER_OR_FOLLOWER
        script.errors[cids[3]] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        await _until(lambda: len(script.calls) == 4)
        script.release(cids[2])
        await _settle()
        assert not client.got
        script.release(cids[0])
        got = await client.receive(4)
        assert [r.correlation_id for r in got] == cids
        codes = [r.body.responses[0].partition_responses[0].error_code for r in got]
        assert codes == [
            0,
            ErrorCode.NOT_LEADER_OR_FOLLOWER,
            0,
            ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
        ]

    _run(test)


def test_other_requests_wait_for_the_deferred_responses_before_them() -> None:
    async def test(script: Script, _server: NetworkServer, client: Client) -> None:
        first = client.produce()
        script.deferred.add(first)
        probe = client.api_versions()
        after = client.produce()
        await _until(lambda: script.calls == [first])
        await _settle()
        # ApiVersions is not handled while the produce before it waits.
        assert script.calls == [first] and not client.got
        script.release(first)
        got = await client.receive(3)
        assert [r.correlation_id for r in got] == [first, probe, after]
        assert script.calls == [first, probe, after]

    _run(test)


def test_at_most_max_deferred_responses_wait_per_connection() -> None:
    async def test(script: Script, _server: NetworkServer, client: Client) -> None:
        cids = [client.produce() for _ in range(MAX_DEFERRED + 2)]
        script.deferred.update(cids)
        await _until(lambda: len(script.calls) == MAX_DEFERRED)
        await _settle()
        assert script.calls == cids[:MAX_DEFERRED]
        script.release(cids[0])
        await _until(lambda: len(script.calls) == MAX_DEFERRED + 1)
        await _settle()
        assert script.calls == cids[: MAX_DEFERRED + 1]
        for cid in cids[1:]:
            if cid not in script.gates:
                await _until(lambda cid=cid: cid in script.gates)
            script.release(cid)
        got = await client.receive(len(cids))
        assert [r.correlation_id for r in got] == cids

    _run(test)


def test_close_connection_sends_the_earlier_responses_first() -> None:
    async def test(script: Script, _server: NetworkServer, client: Client) -> None:
        first, closing, never = client.produce(), client.produce(), client.produce()
        script.deferred.add(first)
        script.closes.add(closing)
        await _until(lambda: script.calls == [first, closing])
        script.release(first)
        assert await client.closed()
        assert [r.correlation_id for r in client.got] == [first]
        assert never not in script.calls

    _run(test)


def test_a_deferred_response_that_fails_is_answered_in_its_turn() -> None:
    # The dispatcher answers a failing deferred response UNKNOWN_SERVER_ERROR (per
    # partition, as Kafka's error response), in order, and the connection goes on.
    async def test(script: Script, _server: NetworkServer, client: Client) -> None:
        cids = [client.produce() for _ in range(3)]
        script.deferred.update(cids)
        script.fails.add(cids[1])
        await _until(lambda: len(script.calls) == 3)
        for cid in cids:
            script.release(cid)
        got = await client.receive(3)
        assert [r.correlation_id for r in got] == cids
        codes = [r.body.responses[0].partition_responses[0].error_code for r in got]
        assert codes == [ErrorCode.NONE, ErrorCode.UNKNOWN_SERVER_ERROR, ErrorCode.NONE]
        client.api_versions()
        assert len(await client.receive(4)) == 4

    _run(test)


def test_a_connection_closed_with_responses_pending_is_cleaned_up() -> None:
    async def test(script: Script, server: NetworkServer, client: Client) -> None:
        cids = [client.produce() for _ in range(3)]
        script.deferred.update(cids)
        await _until(lambda: len(script.calls) == 3)
        (conn,) = server.connections
        writer_task = conn.writer_task
        assert writer_task is not None and len(conn.responses) == 3
        client.writer.close()
        await _until(lambda: not server.connections and conn.task is not None and conn.task.done())
        # The writer stopped waiting for the first response, nothing is left queued,
        # and the others were never awaited (nothing runs for them).
        assert writer_task.done() and conn.writer_task is None and not conn.responses
        assert script.cancelled == [cids[0]] and not script.finished
        for cid in cids:
            script.release(cid)
        await _settle()
        assert not script.finished

    _run(test)
