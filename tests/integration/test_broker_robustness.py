"""Bad input against a live broker: it answers with an error or closes that one
connection, and goes on serving everyone else.

Raw sockets send malformed, truncated, oversized and random frames, unknown API
keys and versions the broker does not serve. Each time the connection gets an
error response or is closed (never a hang), the broker process stays up, and a
kafka-python producer running alongside the whole time keeps succeeding. At the
end the broker stops cleanly and `kt index verify` finds its data directory clean.
Pipelined requests on one connection are answered in order.
"""

from __future__ import annotations

import socket
import struct
import subprocess
import threading
import time
import uuid

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kt.protocol import ClientConnection, ErrorCode, decode_response, encode_request

pytestmark = pytest.mark.integration

MAX_REQUEST = 1 << 20  # socket.request.max.bytes for this broker
CLOSE_TIMEOUT = 5.0


class Canary:
    """A kafka-python producer sending one record every 20 ms in the background, for
    at most five minutes, counting successes and keeping the failures."""

    def __init__(self, bootstrap: str) -> None:
        from kafka import KafkaProducer

        self.producer = KafkaProducer(
            bootstrap_servers=bootstrap, linger_ms=0, request_timeout_ms=5000
        )
        self.ok = 0
        self.errors: list[BaseException] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        deadline = time.monotonic() + 300
        i = 0
        while not self._stop.is_set() and time.monotonic() < deadline:
            try:
                self.producer.send("canary", value=b"%d" % i, partition=0).get(timeout=10)
                self.ok += 1
            except Exception as exc:
                self.errors.append(exc)
            i += 1
            self._stop.wait(0.02)

    def assert_progress(self, timeout: float = 5.0) -> None:
        """No failure so far, and at least two more successes from now on."""
        start = self.ok
        deadline = time.monotonic() + timeout
        while self.ok < start + 2 and time.monotonic() < deadline and not self.errors:
            time.sleep(0.02)
        assert not self.errors, f"the concurrent producer failed: {self.errors[:3]}"
        assert self.ok >= start + 2, "the concurrent producer made no progress"

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(15)
        self.producer.close(timeout=5)


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory):
    """A broker with a 1 MiB request limit and a canary producer; on teardown the
    canary must have kept succeeding, the broker must stop cleanly, and its data
    directory must verify clean."""
    from broker_harness import KT, BrokerProcess, free_port

    broker = BrokerProcess(
        tmp_path_factory.mktemp("robust") / "data",
        free_port(),
        {"socket.request.max.bytes": str(MAX_REQUEST)},
    ).start()
    canary = Canary(broker.bootstrap)
    try:
        canary.assert_progress(timeout=15)
        yield broker, canary
        canary.assert_progress()
    finally:
        canary.stop()
        alive = broker.proc is not None and broker.proc.poll() is None
        code = broker.stop() if alive else None
    assert alive, f"the broker died: {broker.log()[-3000:]}"
    assert code == 0, broker.log()[-3000:]
    result = subprocess.run(
        [KT, "index", "verify", "-q", str(broker.data_dir)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stdout + result.stderr


def _connect(broker) -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", broker.port), timeout=CLOSE_TIMEOUT)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return sock


def _read_frames_until_close(sock: socket.socket, timeout: float = CLOSE_TIMEOUT) -> list[bytes]:
    """Every response frame until the broker closes; fails if it neither answers nor
    closes within `timeout` (after we stop sending)."""
    sock.settimeout(timeout)
    buf = b""
    deadline = time.monotonic() + timeout
    while True:
        if time.monotonic() > deadline:
            raise AssertionError(f"the broker neither answered nor closed in {timeout}s")
        try:
            chunk = sock.recv(65536)
        except (ConnectionResetError, BrokenPipeError):
            break
        except TimeoutError:
            raise AssertionError(f"the broker neither answered nor closed in {timeout}s") from None
        if not chunk:
            break
        buf += chunk
    frames = []
    while len(buf) >= 4:
        (size,) = struct.unpack_from(">i", buf, 0)
        assert size >= 4 and len(buf) >= 4 + size, "a response frame was cut short"
        frames.append(buf[4 : 4 + size])
        buf = buf[4 + size :]
    assert not buf, "trailing bytes after the last response frame"
    return frames


def _read_one_frame(sock: socket.socket, timeout: float = CLOSE_TIMEOUT) -> bytes | None:
    """One response frame, or None when the connection was closed."""
    sock.settimeout(timeout)
    buf = b""
    while len(buf) < 4 or len(buf) < 4 + struct.unpack_from(">i", buf, 0)[0]:
        try:
            chunk = sock.recv(65536)
        except (ConnectionResetError, BrokenPipeError):
            return None
        if not chunk:
            return None
        buf += chunk
    return buf[4:]


def _closed(sock: socket.socket, timeout: float = CLOSE_TIMEOUT) -> bool:
    """True when the broker closes the connection within `timeout`, sending nothing."""
    sock.settimeout(timeout)
    try:
        return sock.recv(65536) == b""
    except (ConnectionResetError, BrokenPipeError):
        return True
    except TimeoutError:
        return False


def _frame(body: bytes) -> bytes:
    return struct.pack(">i", len(body)) + body


def _header(api_key: int, version: int, correlation_id: int = 7, client_id: bytes = b"t") -> bytes:
    return struct.pack(">hhih", api_key, version, correlation_id, len(client_id)) + client_id


# --- malformed, truncated, oversized -------------------------------------------------


@pytest.mark.parametrize(
    "payload",
    [
        pytest.param(_frame(b"\x00"), id="frame-shorter-than-a-header"),
        pytest.param(_frame(_header(3, 12) + b"\x00" + b"\xff" * 9), id="metadata-garbage-body"),
        pytest.param(_frame(_header(0, 9) + b"\x00\x01"), id="produce-body-cut-short"),
        pytest.param(_frame(_header(1, 12) + b"\x7f" * 64), id="fetch-absurd-lengths"),
        pytest.param(_frame(struct.pack(">hhih", 3, 1, 1, 30000) + b"ab"), id="client-id-overruns"),
        pytest.param(struct.pack(">i", -5) + b"abcd", id="negative-frame-size"),
        pytest.param(struct.pack(">i", 0), id="zero-frame-size"),
    ],
)
def test_malformed_frame_closes_that_connection(served, payload: bytes) -> None:
    broker, canary = served
    sock = _connect(broker)
    try:
        sock.sendall(payload)
        frames = _read_frames_until_close(sock)
    finally:
        sock.close()
    # Kafka closes on a request it cannot parse; an error response would also do.
    for f in frames:
        assert struct.unpack_from(">i", f, 0)[0] == 7, "a response must carry the correlation id"
    canary.assert_progress()


def test_truncated_frame_then_eof(served) -> None:
    """Half a request then EOF: the broker drops the connection, nothing else."""
    broker, canary = served
    full = encode_request(
        3,
        12,
        1,
        {
            "topics": None,
            "allow_auto_topic_creation": False,
            "include_topic_authorized_operations": False,
        },
    )
    for cut in (1, 3, 4, 6, len(full) // 2, len(full) - 1):
        sock = _connect(broker)
        try:
            sock.sendall(full[:cut])
            sock.shutdown(socket.SHUT_WR)
            assert _read_frames_until_close(sock) == []
        finally:
            sock.close()
    canary.assert_progress()


def test_truncated_frame_waits_for_the_rest(served) -> None:
    """A request arriving in pieces, slowly, is answered once whole."""
    broker, canary = served
    conn = ClientConnection()
    _, data = conn.send_request(
        18, 3, {"client_software_name": "slow", "client_software_version": "1"}
    )
    sock = _connect(broker)
    try:
        for i in range(0, len(data), 5):
            sock.sendall(data[i : i + 5])
            time.sleep(0.01)
        frame = _read_one_frame(sock)
        assert frame is not None
        (resp,) = conn.receive_data(_frame(frame))
        assert resp.body.error_code == 0
    finally:
        sock.close()
    canary.assert_progress()


def test_oversized_frame_closes_without_reading_it(served) -> None:
    broker, canary = served
    sock = _connect(broker)
    try:
        sock.sendall(struct.pack(">i", MAX_REQUEST + 1) + _header(3, 12))
        start = time.monotonic()
        assert _closed(sock), "a frame over socket.request.max.bytes must close the connection"
        assert time.monotonic() - start < 2
    finally:
        sock.close()
    # A huge declared size: closed too, no attempt to buffer 2 GB.
    sock = _connect(broker)
    try:
        sock.sendall(struct.pack(">i", 0x7FFFFFFF) + b"\x00" * 100)
        assert _closed(sock)
    finally:
        sock.close()
    # Right at the limit is still read (and then refused as garbage or answered).
    sock = _connect(broker)
    try:
        body = _header(18, 0) + b"\x00" * (MAX_REQUEST - 10)
        sock.sendall(_frame(body))
        frames = _read_frames_until_close(sock, timeout=10)
        assert len(frames) <= 1
    finally:
        sock.close()
    canary.assert_progress()


# --- APIs and versions the broker does not serve -------------------------------------


@pytest.mark.parametrize("api_key,version", [(999, 0), (-1, 0), (32767, 3), (3, 999)])
def test_unknown_api_key_or_version_closes(served, api_key: int, version: int) -> None:
    """Kafka closes the connection on an API key it does not know, or a version
    outside the range it advertised (other than ApiVersions)."""
    broker, canary = served
    sock = _connect(broker)
    try:
        sock.sendall(_frame(_header(api_key, version) + b"\x00" * 16))
        frames = _read_frames_until_close(sock)
        assert frames == [] or all(struct.unpack_from(">i", f, 0)[0] == 7 for f in frames)
    finally:
        sock.close()
    canary.assert_progress()


@pytest.mark.parametrize("version", [5, 17, 200, 32767])
def test_unsupported_api_versions_version_gets_v0_error_with_ranges(served, version: int) -> None:
    """A client newer than the broker asks ApiVersions in a version the broker does
    not know: the answer is ApiVersions v0 with UNSUPPORTED_VERSION and the ranges,
    and the connection stays open so the client can retry in a version we serve."""
    broker, canary = served
    sock = _connect(broker)
    try:
        # A newer client's request body (flexible header, tagged fields): unreadable
        # to us by definition, so only the header prefix can be relied on.
        sock.sendall(_frame(_header(18, version, 41, b"future") + b"\x00\x07future\x021\x00"))
        frame = _read_one_frame(sock)
        assert frame is not None, "the broker closed instead of answering"
        header, body = decode_response(18, 0, frame)
        assert header.correlation_id == 41
        assert body.error_code == ErrorCode.UNSUPPORTED_VERSION
        ranges = {k.api_key: (k.min_version, k.max_version) for k in body.api_keys}
        assert ranges[18][0] == 0 and ranges[18][1] >= 3
        assert 0 in ranges and 1 in ranges and 3 in ranges
        # Retry, same connection, in the highest version advertised.
        conn = ClientConnection(first_correlation_id=42)
        _, data = conn.send_request(
            18, ranges[18][1], {"client_software_name": "future", "client_software_version": "1"}
        )
        sock.sendall(data)
        retry = _read_one_frame(sock)
        assert retry is not None
        (resp,) = conn.receive_data(_frame(retry))
        assert resp.body.error_code == 0
    finally:
        sock.close()
    canary.assert_progress()


def _v2_batch() -> bytes:
    from kt.storage.record_batch import RecordSpec, build_batch

    return bytes(build_batch([RecordSpec(key=None, value=b"old", timestamp=1)], base_offset=0))


def test_produce_v2_and_fetch_v3_get_unsupported_version(served) -> None:
    """Produce below v3 and Fetch below v4 (message formats v0/v1) are answered with
    UNSUPPORTED_VERSION per partition, in the request's version, as Kafka 4 does."""
    broker, canary = served
    conn = ClientConnection()
    sock = _connect(broker)
    try:
        for version in (0, 1, 2):
            _, data = conn.send_request(
                0,
                version,
                {
                    "acks": 1,
                    "timeout_ms": 1000,
                    "topic_data": [
                        {
                            "name": "old-clients",
                            "partition_data": [{"index": 0, "records": _v2_batch()}],
                        }
                    ],
                },
            )
            sock.sendall(data)
            (resp,) = conn.receive_data(_frame(_read_one_frame(sock) or b""))
            (part,) = resp.body.responses[0].partition_responses
            assert part.error_code == ErrorCode.UNSUPPORTED_VERSION, (version, part)
        for version in (0, 1, 2, 3):
            _, data = conn.send_request(
                1,
                version,
                {
                    "replica_id": -1,
                    "max_wait_ms": 0,
                    "min_bytes": 1,
                    "max_bytes": 1 << 20,
                    "topics": [
                        {
                            "topic": "canary",
                            "partitions": [
                                {"partition": 0, "fetch_offset": 0, "partition_max_bytes": 1 << 20}
                            ],
                        }
                    ],
                },
            )
            sock.sendall(data)
            (resp,) = conn.receive_data(_frame(_read_one_frame(sock) or b""))
            (part,) = resp.body.responses[0].partitions
            assert part.error_code == ErrorCode.UNSUPPORTED_VERSION, (version, part)
            assert not part.records
    finally:
        sock.close()
    # Nothing was written by the old-format produce requests.
    assert not list((broker.data_dir / "old-clients-0").glob("*.log")) or all(
        p.stat().st_size == 0 for p in (broker.data_dir / "old-clients-0").glob("*.log")
    )
    canary.assert_progress()


# --- random bytes ---------------------------------------------------------------------

KNOWN = [(0, 9), (1, 12), (2, 7), (3, 12), (18, 3), (22, 4), (10, 4), (11, 9), (19, 7)]


@st.composite
def _garbage(draw: st.DrawFn) -> bytes:
    kind = draw(st.sampled_from(["raw", "framed", "known-header"]))
    if kind == "raw":
        return draw(st.binary(min_size=1, max_size=300))
    if kind == "framed":
        return _frame(draw(st.binary(min_size=0, max_size=300)))
    api_key, version = draw(st.sampled_from(KNOWN))
    flexible_body = draw(st.binary(min_size=0, max_size=200))
    return _frame(_header(api_key, version, 7) + b"\x00" + flexible_body)


@settings(
    max_examples=60,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(data=_garbage())
def test_random_bytes(served, data: bytes) -> None:
    """Any bytes followed by EOF: responses (well-framed, for our correlation id) or
    a close, within a bound; the broker survives."""
    broker, _ = served
    sock = _connect(broker)
    try:
        sock.sendall(data)
        sock.shutdown(socket.SHUT_WR)
        _read_frames_until_close(sock)
    finally:
        sock.close()
    assert broker.proc.poll() is None, broker.log()[-3000:]


def test_broker_still_serves_after_the_random_bytes(served) -> None:
    _, canary = served
    canary.assert_progress()


# --- pipelining -----------------------------------------------------------------------


def test_pipelined_requests_come_back_in_order(served) -> None:
    """Fifty requests of six APIs in one write, a long-polling fetch among them and a
    produce with acks=0 (no response): the answers come in request order, and the
    quick requests behind the waiting fetch are not answered before it."""
    broker, canary = served
    conn = ClientConnection()
    topic, idle = "pipelined", "pipelined-idle"
    wire = b""
    expected = []

    def add(api_key: int, version: int, body: dict[str, object], answered: bool = True) -> None:
        nonlocal wire
        cid, data = conn.send_request(api_key, version, body)
        wire += data
        if answered:
            expected.append((cid, api_key))

    add(
        3,
        12,
        {
            "topics": [{"name": t, "topic_id": uuid.UUID(int=0)} for t in (topic, idle)],
            "allow_auto_topic_creation": True,
            "include_topic_authorized_operations": False,
        },
    )
    send_first = wire
    wire = b""
    for i in range(48):
        match i % 6:
            case 0:
                add(18, 3, {"client_software_name": "p", "client_software_version": "1"})
            case 1:
                add(
                    0,
                    9,
                    {
                        "acks": 1,
                        "timeout_ms": 1000,
                        "topic_data": [
                            {
                                "name": topic,
                                "partition_data": [{"index": 0, "records": _v2_batch()}],
                            }
                        ],
                    },
                )
            case 2:
                add(
                    2,
                    7,
                    {
                        "replica_id": -1,
                        "isolation_level": 0,
                        "topics": [
                            {"name": topic, "partitions": [{"partition_index": 0, "timestamp": -1}]}
                        ],
                    },
                )
            case 3:  # long poll at the end of an empty topic: waits its 300 ms
                add(
                    1,
                    12,
                    {
                        "replica_id": -1,
                        "max_wait_ms": 300,
                        "min_bytes": 1,
                        "max_bytes": 1 << 20,
                        "isolation_level": 0,
                        "topics": [
                            {
                                "topic": idle,
                                "partitions": [
                                    {
                                        "partition": 0,
                                        "fetch_offset": 0,
                                        "partition_max_bytes": 1 << 20,
                                    }
                                ],
                            }
                        ],
                    },
                )
            case 4:
                add(
                    0,
                    9,
                    {
                        "acks": 0,
                        "timeout_ms": 1000,
                        "topic_data": [
                            {
                                "name": topic,
                                "partition_data": [{"index": 0, "records": _v2_batch()}],
                            }
                        ],
                    },
                    answered=False,
                )
            case 5:
                add(
                    3,
                    12,
                    {
                        "topics": None,
                        "allow_auto_topic_creation": False,
                        "include_topic_authorized_operations": False,
                    },
                )
    sock = _connect(broker)
    got = []
    try:
        sock.sendall(send_first)  # create the topic first
        got += conn.receive_data(_frame(_read_one_frame(sock) or b""))
        start = time.monotonic()
        sock.sendall(wire)
        sock.settimeout(15)
        deadline = time.monotonic() + 20
        while len(got) < len(expected) and time.monotonic() < deadline:
            chunk = sock.recv(1 << 20)
            assert chunk, "connection closed mid-pipeline"
            got += conn.receive_data(chunk)  # raises on an out-of-order correlation id
        elapsed = time.monotonic() - start
    finally:
        sock.close()
    assert [(r.correlation_id, r.api_key) for r in got] == expected
    # Eight fetches waited 300 ms each, one after another.
    assert elapsed >= 8 * 0.3 * 0.9, elapsed
    produced = [r for r in got if r.api_key == 0]
    offsets = [r.body.responses[0].partition_responses[0].base_offset for r in produced]
    assert offsets == sorted(offsets) and len(set(offsets)) == len(offsets)
    canary.assert_progress()


def test_failed_acks_0_produce_closes_the_connection(served) -> None:
    """Kafka never answers acks=0, so a failure closes the connection (the producer
    then refreshes its metadata); a successful acks=0 produce leaves it open."""
    broker, canary = served
    batch = _v2_batch()
    corrupt = bytearray(batch)
    corrupt[-1] ^= 0xFF  # CRC mismatch
    # A produce never creates its topic (Kafka's rule): the metadata request does, as
    # a producer's first one.
    conn = ClientConnection()
    _, data = conn.send_request(3, 9, {"topics": [{"name": "acks0"}],
                                       "allow_auto_topic_creation": True})  # fmt: skip
    sock = _connect(broker)
    try:
        sock.sendall(data)
        assert _read_one_frame(sock) is not None
    finally:
        sock.close()
    cases = [
        ("acks0", 0, batch, False),
        ("acks0", 5, batch, True),  # no such partition
        ("acks0", 0, bytes(corrupt), True),
        ("__consumer_offsets", 0, batch, True),
    ]
    for topic, partition, records, closes in cases:
        conn = ClientConnection()
        sock = _connect(broker)
        try:
            _, data = conn.send_request(0, 9, {
                "acks": 0, "timeout_ms": 1000,
                "topic_data": [{"name": topic, "partition_data": [
                    {"index": partition, "records": records}]}],
            })  # fmt: skip
            _, probe = conn.send_request(
                18, 3, {"client_software_name": "p", "client_software_version": "1"}
            )
            sock.sendall(data + probe)
            frame = _read_one_frame(sock)
            if closes:
                assert frame is None, (topic, partition, "the connection should be closed")
            else:
                assert frame is not None, (topic, partition, "the connection was closed")
                (resp,) = conn.receive_data(_frame(frame))
                assert resp.api_key == 18
        finally:
            sock.close()
    canary.assert_progress()
