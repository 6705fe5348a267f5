"""The asyncio client against a fake broker built on the sans-IO ServerConnection:
version negotiation, pipelining, timeouts, retries, routing, record decoding."""

from __future__ import annotations

import asyncio
import gc
import logging
import time
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from kt.client import (
    LATEST,
    KafkaClient,
    KafkaConnectionError,
    KafkaError,
    KafkaTimeoutError,
    RecordSpec,
    decode_records,
    parse_bootstrap,
    range_assign,
)
from kt.protocol import apis
from kt.protocol.connection import ServerConnection
from kt.protocol.errors import ErrorCode
from kt.protocol.headers import RequestHeader, encode_response
from kt.storage.compression import Codec
from kt.storage.record_batch import build_batch, build_end_txn_marker

Handler = Callable[[RequestHeader, Any], Awaitable[Any]]
TOPIC_ID = uuid.UUID(int=0x1234)


class FakeBroker:
    """A one-node broker answering with whatever the test's handlers return."""

    def __init__(self, versions: dict[int, tuple[int, int]] | None = None) -> None:
        self.versions = versions or {
            apis.API_VERSIONS.key: (0, 4),
            apis.METADATA.key: (0, 12),
            apis.PRODUCE.key: (3, 11),
            apis.FETCH.key: (4, 16),
            apis.LIST_OFFSETS.key: (1, 8),
        }
        self.handlers: dict[int, Handler] = {}
        self.seen: list[tuple[int, int]] = []
        self.max_in_flight = 0
        self.server: asyncio.Server | None = None
        self.port = 0
        self.partitions = 2
        self.leader_errors: list[int] = []

    async def start(self) -> FakeBroker:
        self.server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        self.port = self.server.sockets[0].getsockname()[1]
        return self

    async def stop(self) -> None:
        assert self.server is not None
        self.server.close()
        await self.server.wait_closed()

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        conn = ServerConnection()
        queue: asyncio.Queue[asyncio.Future[bytes | None]] = asyncio.Queue()

        async def write_in_order() -> None:
            while True:
                fut = await queue.get()
                data = await fut
                if data is not None:
                    writer.write(data)
                    await writer.drain()

        writer_task = asyncio.create_task(write_in_order())
        pending = 0
        try:
            while data := await reader.read(65536):
                for req in conn.receive_data(data):
                    h = req.header
                    self.seen.append((h.api_key, h.api_version))
                    pending += 1
                    self.max_in_flight = max(self.max_in_flight, pending)

                    async def answer(req: Any = req) -> bytes | None:
                        nonlocal pending
                        try:
                            return await self._answer(conn, req)
                        finally:
                            pending -= 1

                    queue.put_nowait(asyncio.ensure_future(answer()))
        finally:
            writer_task.cancel()
            writer.close()

    async def _answer(self, conn: ServerConnection, req: Any) -> bytes | None:
        h = req.header
        if h.api_key == apis.API_VERSIONS.key:
            lo, hi = self.versions[apis.API_VERSIONS.key]
            if h.api_version > hi:
                # What Kafka does: a v0 error response listing what it supports.
                body = apis.API_VERSIONS.response(
                    error_code=ErrorCode.UNSUPPORTED_VERSION,
                    api_keys=[{"api_key": apis.API_VERSIONS.key, "min_version": lo,
                               "max_version": hi}],
                )  # fmt: skip
                return encode_response(h.api_key, 0, h.correlation_id, body)
            body = apis.API_VERSIONS.response(
                api_keys=[
                    {"api_key": k, "min_version": a, "max_version": b}
                    for k, (a, b) in self.versions.items()
                ]
            )
            return conn.send_response(req, body)
        handler = self.handlers.get(h.api_key)
        if handler is None and h.api_key == apis.METADATA.key:
            handler = self._metadata
        assert handler is not None, f"no handler for api {h.api_key}"
        reply = await handler(h, req.body)
        if reply is None:
            return None
        return conn.send_response(req, reply)

    async def _metadata(self, h: RequestHeader, body: Any) -> Any:
        leader = 1
        if self.leader_errors:
            leader = -1 if self.leader_errors.pop(0) else 1
        topics = []
        for t in body.topics or [{"name": "t"}]:
            name = t.name if not isinstance(t, dict) else t["name"]
            if name != "t":
                topics.append({"error_code": ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "name": name})
                continue
            topics.append(
                {
                    "name": "t",
                    "topic_id": TOPIC_ID,
                    "partitions": [
                        {
                            "partition_index": p,
                            "leader_id": leader,
                            "replica_nodes": [1],
                            "isr_nodes": [1],
                            "error_code": 0 if leader >= 0 else ErrorCode.LEADER_NOT_AVAILABLE,
                        }
                        for p in range(self.partitions)
                    ],
                }
            )
        return apis.METADATA.response(
            brokers=[{"node_id": 1, "host": "127.0.0.1", "port": self.port}],
            cluster_id="fake",
            controller_id=1,
            topics=topics,
        )


def run(coro_fn: Callable[[FakeBroker], Awaitable[Any]], broker: FakeBroker | None = None) -> Any:
    async def main() -> Any:
        b = await (broker or FakeBroker()).start()
        try:
            return await coro_fn(b)
        finally:
            await b.stop()

    return asyncio.run(main())


def test_parse_bootstrap() -> None:
    assert parse_bootstrap("a:1,b, [::1]:3") == [("a", 1), ("b", 9092), ("::1", 3)]
    assert parse_bootstrap(["x:5"]) == [("x", 5)]
    for bad in ("", "a:b", "a:0", ","):
        with pytest.raises(ValueError):
            parse_bootstrap(bad)


def test_negotiates_the_highest_common_version_and_loads_metadata() -> None:
    async def go(b: FakeBroker) -> None:
        b.versions[apis.METADATA.key] = (0, 7)
        async with KafkaClient(b.bootstrap) as c:
            assert c.metadata.cluster_id == "fake"
            assert c.metadata.brokers[1].port == b.port
            conn = await c.any_connection()
            assert conn.version_for(apis.METADATA) == 7
            assert conn.version_for(apis.FETCH) == 16
            assert not conn.supports(apis.CREATE_TOPICS)
            with pytest.raises(KafkaError) as err:
                conn.version_for(apis.CREATE_TOPICS)
            assert err.value.code == ErrorCode.UNSUPPORTED_VERSION
        assert (apis.METADATA.key, 7) in b.seen

    run(go)


def test_api_versions_falls_back_to_v0_for_old_brokers() -> None:
    async def go(b: FakeBroker) -> None:
        b.versions[apis.API_VERSIONS.key] = (0, 2)
        async with KafkaClient(b.bootstrap) as c:
            assert c.metadata.cluster_id == "fake"
        assert (apis.API_VERSIONS.key, 0) in b.seen

    run(go)


def test_requests_are_pipelined_on_one_connection() -> None:
    async def go(b: FakeBroker) -> None:
        async def slow_offsets(h: RequestHeader, body: Any) -> Any:
            await asyncio.sleep(0.05)
            return apis.LIST_OFFSETS.response(
                topics=[
                    {
                        "name": t.name,
                        "partitions": [
                            {"partition_index": p.partition_index, "offset": 100 + h.correlation_id}
                            for p in t.partitions
                        ],
                    }
                    for t in body.topics
                ]
            )

        b.handlers[apis.LIST_OFFSETS.key] = slow_offsets
        async with KafkaClient(b.bootstrap) as c:
            conn = await c.connection(1)
            bodies = [
                apis.LIST_OFFSETS.request(
                    replica_id=-1,
                    topics=[{"name": "t", "partitions": [{"partition_index": 0, "timestamp": -1}]}],
                )
                for _ in range(5)
            ]
            resps = await asyncio.gather(*(conn.request(apis.LIST_OFFSETS, x) for x in bodies))
            offsets = [r.topics[0].partitions[0].offset for r in resps]
            assert offsets == sorted(offsets) and len(set(offsets)) == 5
            # concurrent, not 5 x 50 ms one after the other: counted by the broker, as
            # the time taken depends on how busy the machine is
            assert b.max_in_flight == 5

    run(go)


def test_request_timeout_then_the_connection_still_works() -> None:
    async def go(b: FakeBroker) -> None:
        delays = [0.4, 0.0]

        async def offsets(h: RequestHeader, body: Any) -> Any:
            await asyncio.sleep(delays.pop(0))
            return apis.LIST_OFFSETS.response(
                topics=[{"name": "t", "partitions": [{"partition_index": 0, "offset": 7}]}]
            )

        b.handlers[apis.LIST_OFFSETS.key] = offsets
        async with KafkaClient(b.bootstrap, request_timeout=0.1, retries=0) as c:
            with pytest.raises(KafkaTimeoutError):
                await c.list_offsets([("t", 0)], LATEST)
            c.request_timeout = 2.0
            for conn in c._conns.values():
                conn.request_timeout = 2.0
            # The late answer to the first request is dropped; this one is matched.
            assert await c.list_offsets([("t", 0)], LATEST) == {("t", 0): (7, -1)}

    run(go)


def test_retriable_errors_are_retried_after_a_metadata_refresh() -> None:
    async def go(b: FakeBroker) -> None:
        answers = [ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.NONE]
        produced: list[bytes] = []

        async def produce(h: RequestHeader, body: Any) -> Any:
            code = answers.pop(0)
            if not code:
                produced.append(bytes(body.topic_data[0].partition_data[0].records))
            return apis.PRODUCE.response(
                responses=[
                    {
                        "name": "t",
                        "partition_responses": [
                            {"index": 1, "error_code": code, "base_offset": 42 if not code else -1}
                        ],
                    }
                ]
            )

        b.handlers[apis.PRODUCE.key] = produce
        async with KafkaClient(b.bootstrap, retry_backoff=0.01) as c:
            metadata_calls = sum(1 for k, _ in b.seen if k == apis.METADATA.key)
            res = await c.produce("t", 1, [RecordSpec(b"k", b"v")], codec=Codec.GZIP)
            assert res.base_offset == 42
            assert sum(1 for k, _ in b.seen if k == apis.METADATA.key) > metadata_calls
        recs, _ = decode_records("t", 1, produced[0], 0)
        assert [(r.key, r.value) for r in recs] == [(b"k", b"v")]

    run(go)


def test_leader_not_available_is_waited_out() -> None:
    async def go(b: FakeBroker) -> None:
        async def offsets(h: RequestHeader, body: Any) -> Any:
            return apis.LIST_OFFSETS.response(
                topics=[{"name": "t", "partitions": [{"partition_index": 0, "offset": 3}]}]
            )

        b.handlers[apis.LIST_OFFSETS.key] = offsets
        async with KafkaClient(b.bootstrap, retry_backoff=0.01) as c:
            b.leader_errors = [1, 1]
            await c.refresh_metadata()
            assert await c.list_offsets([("t", 0)]) == {("t", 0): (3, -1)}

    run(go)


def test_a_metadata_answer_without_brokers_is_asked_again() -> None:
    # A broker that has no view of its cluster yet (one just started) names no brokers
    # and no topics: the client asks again instead of calling the topic unknown.
    async def go(b: FakeBroker) -> None:
        starting = [2]

        async def metadata(h: RequestHeader, body: Any) -> Any:
            if starting[0]:
                starting[0] -= 1
                return apis.METADATA.response(brokers=[], controller_id=-1, topics=[])
            return await b._metadata(h, body)

        async with KafkaClient(b.bootstrap, retry_backoff=0.01) as c:
            b.handlers[apis.METADATA.key] = metadata
            info = await c.topic("t", refresh=True)
            assert sorted(info.partitions) == [0, 1]
            assert c.metadata.brokers[1].port == b.port
            assert starting == [0]

    run(go)


def test_describe_cluster_asks_a_starting_broker_again() -> None:
    async def go(b: FakeBroker) -> None:
        b.versions[apis.DESCRIBE_CLUSTER.key] = (0, 1)
        answers = [ErrorCode.LEADER_NOT_AVAILABLE, ErrorCode.NONE]

        async def describe(h: RequestHeader, body: Any) -> Any:
            code = answers.pop(0)
            brokers = [] if code else [{"broker_id": 1, "host": "127.0.0.1", "port": b.port}]
            return apis.DESCRIBE_CLUSTER.response(error_code=code, cluster_id="fake",
                                                  controller_id=1, brokers=brokers)  # fmt: skip

        b.handlers[apis.DESCRIBE_CLUSTER.key] = describe
        async with KafkaClient(b.bootstrap, retry_backoff=0.01) as c:
            got = await c.describe_cluster()
            assert [n.node_id for n in got.brokers] == [1] and answers == []

    run(go)


def test_non_retriable_errors_fail_at_once() -> None:
    async def go(b: FakeBroker) -> None:
        calls = 0

        async def produce(h: RequestHeader, body: Any) -> Any:
            nonlocal calls
            calls += 1
            return apis.PRODUCE.response(
                responses=[
                    {
                        "name": "t",
                        "partition_responses": [
                            {"index": 0, "error_code": ErrorCode.MESSAGE_TOO_LARGE}
                        ],
                    }
                ]
            )

        b.handlers[apis.PRODUCE.key] = produce
        async with KafkaClient(b.bootstrap) as c:
            with pytest.raises(KafkaError) as err:
                await c.produce("t", 0, [RecordSpec(None, b"x")])
            assert err.value.code == ErrorCode.MESSAGE_TOO_LARGE and not err.value.retriable
            assert calls == 1
            with pytest.raises(KafkaError) as err:
                await c.partitions_for("missing")
            assert err.value.code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION

    run(go)


def test_acks_zero_gets_no_response() -> None:
    async def go(b: FakeBroker) -> None:
        got: list[int] = []

        async def produce(h: RequestHeader, body: Any) -> Any:
            got.append(body.acks)
            return None

        b.handlers[apis.PRODUCE.key] = produce
        async with KafkaClient(b.bootstrap) as c:
            res = await c.produce("t", 0, [RecordSpec(None, b"x")], acks=0)
            assert res.base_offset == -1
            await c.refresh_metadata()  # the connection is still in step
        assert got == [0]

    run(go)


def test_fetch_by_topic_id_decodes_records() -> None:
    async def go(b: FakeBroker) -> None:
        batch1 = build_batch([RecordSpec(b"a", b"1"), RecordSpec(b"b", None, [("h", b"x")])],
                             base_offset=5, codec=Codec.LZ4, base_timestamp=1000)  # fmt: skip
        marker = build_end_txn_marker(commit=True, coordinator_epoch=0, producer_id=1,
                                      producer_epoch=0, base_offset=7,
                                      timestamp=1000)  # fmt: skip

        async def fetch(h: RequestHeader, body: Any) -> Any:
            assert h.api_version == 16 and body.topics[0].topic_id == TOPIC_ID
            return apis.FETCH.response(
                responses=[
                    {
                        "topic_id": TOPIC_ID,
                        "partitions": [
                            {
                                "partition_index": 0,
                                "high_watermark": 9,
                                "records": batch1 + marker + batch1[:30],
                            }
                        ],
                    }
                ]
            )

        b.handlers[apis.FETCH.key] = fetch
        async with KafkaClient(b.bootstrap) as c:
            got = await c.fetch({("t", 0): 6})
        r = got[("t", 0)]
        assert r.error == ErrorCode.NONE and r.high_watermark == 9
        assert [(x.offset, x.key, x.value, x.headers) for x in r.records] == [
            (6, b"b", None, [("h", b"x")])
        ]
        assert r.next_offset == 8  # past the control batch, not into the cut one

    run(go)


def test_unreachable_bootstrap_fails_within_the_connect_timeout() -> None:
    async def go() -> None:
        srv = await asyncio.start_server(lambda r, w: None, "127.0.0.1", 0)
        port = srv.sockets[0].getsockname()[1]
        srv.close()
        await srv.wait_closed()
        start = time.monotonic()
        with pytest.raises(KafkaConnectionError) as err:
            await KafkaClient(f"127.0.0.1:{port}", connect_timeout=0.5).start()
        assert time.monotonic() - start < 2.0
        assert f"127.0.0.1:{port}" in str(err.value)

    asyncio.run(go())


async def _closed_port() -> int:
    srv = await asyncio.start_server(lambda r, w: None, "127.0.0.1", 0)
    port: int = srv.sockets[0].getsockname()[1]
    srv.close()
    await srv.wait_closed()
    return port


def test_refused_on_every_bootstrap_server_fails_at_once() -> None:
    """Issue 9 #7: nothing listening anywhere: no 10 s wait for `connection refused`."""

    async def go() -> None:
        ports = [await _closed_port(), await _closed_port()]
        start = time.monotonic()
        with pytest.raises(KafkaConnectionError) as err:
            await KafkaClient(
                ",".join(f"127.0.0.1:{p}" for p in ports), connect_timeout=10.0
            ).start()
        assert time.monotonic() - start < 1.0
        assert str(err.value) == (
            f"cannot connect to any bootstrap server (127.0.0.1:{ports[0]}: connection "
            f"refused; 127.0.0.1:{ports[1]}: connection refused)"
        )

    asyncio.run(go())


def test_refused_across_several_addresses_of_a_name_counts_as_refused() -> None:
    """asyncio joins the errors of a multi-address name into one errno-less OSError."""
    from kt.client.core import _connection_refused

    both = OSError(
        "Multiple exceptions: [Errno 111] Connect call failed ('::1', 9092, 0, 0), "
        "[Errno 111] Connect call failed ('127.0.0.1', 9092)"
    )
    assert _connection_refused(both)
    assert _connection_refused(ConnectionRefusedError(111, "Connection refused"))
    mixed = OSError("Multiple exceptions: [Errno 111] a, [Errno 101] Network is unreachable")
    assert not _connection_refused(mixed)
    assert not _connection_refused(OSError(113, "No route to host"))


def test_a_server_that_is_not_refused_keeps_the_bounded_wait() -> None:
    """A server that accepts and then hangs up may be starting: retried until the timeout."""

    async def go() -> None:
        async def hang_up(r: asyncio.StreamReader, w: asyncio.StreamWriter) -> None:
            w.close()

        srv = await asyncio.start_server(hang_up, "127.0.0.1", 0)
        port = srv.sockets[0].getsockname()[1]
        refused = await _closed_port()
        start = time.monotonic()
        with pytest.raises(KafkaConnectionError):
            await KafkaClient(f"127.0.0.1:{refused},127.0.0.1:{port}", connect_timeout=0.8).start()
        assert time.monotonic() - start >= 0.5
        srv.close()
        await srv.wait_closed()

    asyncio.run(go())


def test_broken_connection_fails_requests_in_flight() -> None:
    async def go(b: FakeBroker) -> None:
        async def hang(h: RequestHeader, body: Any) -> Any:
            await asyncio.sleep(10)

        b.handlers[apis.LIST_OFFSETS.key] = hang
        async with KafkaClient(b.bootstrap, retries=0) as c:
            conn = await c.connection(1)
            task = asyncio.create_task(
                conn.request(apis.LIST_OFFSETS, apis.LIST_OFFSETS.request(replica_id=-1))
            )
            await asyncio.sleep(0.05)
            await conn.close()
            with pytest.raises(KafkaConnectionError):
                await task

    run(go)


def test_closing_with_abandoned_requests_leaves_no_unretrieved_exception(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A request whose caller was cancelled (quitting `kt tui` while a screen tails)
    must not make asyncio report "Future exception was never retrieved" when the
    connection closes; a caller still waiting gets the error."""

    async def go(b: FakeBroker) -> None:
        async def hang(h: RequestHeader, body: Any) -> Any:
            await asyncio.sleep(10)

        b.handlers[apis.LIST_OFFSETS.key] = hang
        loop = asyncio.get_running_loop()
        reported: list[dict[str, Any]] = []
        loop.set_exception_handler(lambda _loop, context: reported.append(context))
        try:
            async with KafkaClient(b.bootstrap, retries=0) as c:
                conn = await c.connection(1)
                body = apis.LIST_OFFSETS.request(replica_id=-1)
                abandoned = asyncio.create_task(conn.request(apis.LIST_OFFSETS, body))
                waiting = asyncio.create_task(conn.request(apis.LIST_OFFSETS, body))
                await asyncio.sleep(0.05)
                abandoned.cancel()
                await asyncio.gather(abandoned, return_exceptions=True)
            with pytest.raises(KafkaConnectionError):
                await waiting
            del abandoned, waiting, conn, c
            gc.collect()  # unretrieved exceptions are reported when their future dies
            await asyncio.sleep(0)
        finally:
            loop.set_exception_handler(None)
        messages = [str(ctx.get("message")) for ctx in reported]
        assert not [m for m in messages if "never retrieved" in m], messages

    with caplog.at_level(logging.ERROR, logger="asyncio"):
        run(go)
    assert "never retrieved" not in caplog.text


def test_range_assignor_matches_kafka() -> None:
    subs = {"m1": ["a", "b"], "m2": ["a"], "m0": ["a", "b"]}
    got = range_assign(subs, {"a": [0, 1, 2, 3, 4], "b": [0, 1]})
    assert got == {
        "m0": [("a", 0), ("a", 1), ("b", 0)],
        "m1": [("a", 2), ("a", 3), ("b", 1)],
        "m2": [("a", 4)],
    }
    assert range_assign({"x": ["none"]}, {}) == {"x": []}


def test_list_partition_reassignments() -> None:
    async def go(b: FakeBroker) -> None:
        async def listing(h: RequestHeader, body: Any) -> Any:
            assert body.topics is None
            return apis.LIST_PARTITION_REASSIGNMENTS.response(
                topics=[
                    {
                        "name": "t",
                        "partitions": [
                            {
                                "partition_index": 1,
                                "replicas": [1, 2, 3, 4],
                                "adding_replicas": [4],
                                "removing_replicas": [1],
                            }
                        ],
                    }
                ]
            )

        async with KafkaClient(b.bootstrap) as c:
            assert await c.list_partition_reassignments() == {}  # not offered: none known
        b.versions[apis.LIST_PARTITION_REASSIGNMENTS.key] = (0, 0)
        b.handlers[apis.LIST_PARTITION_REASSIGNMENTS.key] = listing
        async with KafkaClient(b.bootstrap) as c:
            got = await c.list_partition_reassignments()
        r = got[("t", 1)]
        assert (r.replicas, r.adding_replicas, r.removing_replicas) == ([1, 2, 3, 4], [4], [1])

    run(go)


def test_close_does_not_swallow_the_callers_cancellation() -> None:
    """Found by the fault campaign (tests/faults): the controller cancelled a broker's
    request sender while it was closing its connection; close() suppressed the
    CancelledError meant for the sender (awaiting the cancelled reader), the sender
    kept retrying forever, and the controller's event loop waited on it for good."""
    from kt.client.core import BrokerConnection

    async def t() -> None:
        conn = BrokerConnection("127.0.0.1", 1, node_id=1)

        async def slow_to_stop() -> None:
            try:
                await asyncio.sleep(10)
            except asyncio.CancelledError:
                await asyncio.sleep(0.2)  # a reader still finishing when close() waits

        conn._read_task = asyncio.create_task(slow_to_stop())
        await asyncio.sleep(0)
        closer = asyncio.create_task(conn.close())
        await asyncio.sleep(0.05)
        closer.cancel()
        with pytest.raises(asyncio.CancelledError):
            await closer

    asyncio.run(t())
