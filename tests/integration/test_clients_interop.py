"""Real clients against a kt broker: every codec, keys, headers, null and empty values.

Five clients produce and consume: confluent-kafka (librdkafka 2.x), aiokafka,
kafka-python, kcat (Debian's librdkafka) and kafkajs (node, tests/js). Each
producer writes one topic per codec; its own client reads every codec back and
each other client reads one of them (rotating, so every consumer decodes every
codec from some other producer). Whatever the consumer, the keys, values,
headers, offsets and timestamps must be identical, byte for byte, and the batches
on disk must carry the codec the producer asked for.

Consumers use manual partition assignment (no consumer group): groups are tested
with the group coordinator. The kafkajs group test runs once the broker
advertises the group APIs.
"""

from __future__ import annotations

import asyncio
import base64
import json
import os
import random
import shutil
import struct
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.integration

CODECS = ("none", "gzip", "snappy", "lz4", "zstd")
CODEC_IDS = {"none": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}
JS_DIR = Path(__file__).resolve().parent.parent / "js"
N = 24
DEADLINE_S = 20.0


@dataclass(frozen=True, slots=True)
class Rec:
    """One record as a client sees it; offset and timestamp are -1 before producing."""

    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes], ...] = ()
    offset: int = -1
    timestamp: int = -1

    def content(self) -> tuple[object, ...]:
        return (self.key, self.value, self.headers)


# --- the broker ---------------------------------------------------------------


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory):
    from broker_harness import BrokerProcess, free_port

    b = BrokerProcess(tmp_path_factory.mktemp("interop") / "data", free_port()).start()
    yield b
    b.kill()


def advertised_apis(bootstrap: str) -> dict[int, tuple[int, int]]:
    """The broker's ApiVersions answer: api key -> (min, max)."""
    import socket

    from kt.protocol import ClientConnection, apis

    conn = ClientConnection()
    _, data = conn.send_request(
        apis.API_VERSIONS.key,
        3,
        {"client_software_name": "kt-tests", "client_software_version": "0"},
    )
    host, port = bootstrap.rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=10) as sock:
        sock.sendall(data)
        for _ in range(100):
            responses = conn.receive_data(sock.recv(65536))
            if responses:
                return {
                    k.api_key: (k.min_version, k.max_version) for k in responses[0].body.api_keys
                }
    raise AssertionError("no ApiVersions response")


def expected_codecs(bootstrap: str, producer: str, codec: str) -> set[int]:
    """The codec the batches of `producer` must carry on disk.

    librdkafka (confluent-kafka, kcat) compresses with LZ4 only when the broker
    advertises FindCoordinator (its "LZ4 feature" probe); without the group
    coordinator it sends LZ4 batches uncompressed, and says so in its debug log.
    """
    if (
        codec == "lz4"
        and producer in ("confluent", "kcat")
        and 10 not in advertised_apis(bootstrap)
    ):
        return {CODEC_IDS["none"]}
    return {CODEC_IDS[codec]}


def stored_codecs(data_dir: Path, topic: str, partition: int = 0) -> set[int]:
    """The codec ids of every batch in a partition's segments, read from disk."""
    codecs = set()
    for seg in sorted((data_dir / f"{topic}-{partition}").glob("*.log")):
        data = seg.read_bytes()
        pos = 0
        while pos + 61 <= len(data):
            (length,) = struct.unpack_from(">i", data, pos + 8)
            (attributes,) = struct.unpack_from(">h", data, pos + 21)
            codecs.add(attributes & 7)
            pos += 12 + length
    return codecs


# --- records each producer sends --------------------------------------------------

# kcat reads keys and values from stdin between delimiters; no record contains them.
KCAT_KEY_DELIM = b"\x1f\x1e"
KCAT_MSG_DELIM = b"\x1d\x1c"


def _blob(rng: random.Random, n: int) -> bytes:
    return bytes(b for b in rng.randbytes(n * 2) if b not in (0x1C, 0x1D, 0x1E, 0x1F))[:n]


def records_for(client: str, codec: str) -> list[Rec]:
    """What `client` sends to its `codec` topic: binary keys and values (sizes from 0 to
    a few KB, compressible and not), null keys and values, empty ones, headers."""
    rng = random.Random(f"{client}-{codec}")
    out = []
    for i in range(N):
        key = None if i % 5 == 1 else b"key-%d-" % i + _blob(rng, rng.randint(0, 40))
        if i % 7 == 3:
            value: bytes | None = None
        elif i % 7 == 5 and client != "kcat":  # kcat -Z sends empty values as null
            value = b""
        else:
            # Some random bytes, then enough repetition that every codec shrinks it.
            value = _blob(rng, rng.choice((1, 30, 300))) + b"x" * rng.randint(100, 3000)
        if client == "kcat":  # -H sets the same headers on every message
            headers: tuple[tuple[str, bytes], ...] = (("src", b"kcat"), ("codec", codec.encode()))
        elif i % 4 == 0:
            headers = ()
        else:
            headers = (("src", client.encode()), ("i", b"%d" % i), ("codec", codec.encode()))
        out.append(Rec(key, value, headers))
    return out


# --- producers: send records, return their offsets ----------------------------------


def produce_confluent(bootstrap: str, topic: str, records: list[Rec], codec: str) -> list[int]:
    from confluent_kafka import Producer

    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "compression.type": codec,
            "linger.ms": 20,
            "batch.num.messages": 7,  # several batches, some with many records
            "acks": "all",
            "enable.idempotence": True,
        }
    )
    offsets: dict[int, int] = {}
    errors: list[object] = []

    def report(i: int) -> Callable[[Any, Any], None]:
        def cb(err: Any, msg: Any) -> None:
            if err is not None:
                errors.append(err)
            else:
                offsets[i] = msg.offset()

        return cb

    for i, r in enumerate(records):
        producer.produce(
            topic,
            key=r.key,
            value=r.value,
            headers=list(r.headers) or None,
            partition=0,
            on_delivery=report(i),
        )
        producer.poll(0)
    assert producer.flush(DEADLINE_S) == 0
    assert not errors, errors
    return [offsets[i] for i in range(len(records))]


def produce_aiokafka(bootstrap: str, topic: str, records: list[Rec], codec: str) -> list[int]:
    from aiokafka import AIOKafkaProducer

    async def run() -> list[int]:
        producer = AIOKafkaProducer(
            bootstrap_servers=bootstrap,
            compression_type=None if codec == "none" else codec,
            linger_ms=20,
            max_batch_size=4096,
            acks="all",
            enable_idempotence=True,
        )
        await producer.start()
        try:
            futures = [
                await producer.send(
                    topic, key=r.key, value=r.value, headers=list(r.headers), partition=0
                )
                for r in records
            ]
            metas = await asyncio.wait_for(asyncio.gather(*futures), DEADLINE_S)
        finally:
            await producer.stop()
        return [m.offset for m in metas]

    return asyncio.run(run())


def produce_kafka_python(bootstrap: str, topic: str, records: list[Rec], codec: str) -> list[int]:
    from kafka import KafkaProducer

    producer = KafkaProducer(
        bootstrap_servers=bootstrap,
        compression_type=None if codec == "none" else codec,
        linger_ms=20,
        batch_size=4096,
        acks="all",
    )
    try:
        futures = [
            producer.send(topic, key=r.key, value=r.value, headers=list(r.headers), partition=0)
            for r in records
        ]
        producer.flush(DEADLINE_S)
        return [f.get(timeout=DEADLINE_S).offset for f in futures]
    finally:
        producer.close(timeout=5)


def produce_kcat(bootstrap: str, topic: str, records: list[Rec], codec: str) -> list[int]:
    data = b"".join(
        (r.key or b"") + KCAT_KEY_DELIM + (r.value or b"") + KCAT_MSG_DELIM for r in records
    )
    args = ["kcat", "-b", bootstrap, "-t", topic, "-p", "0", "-P", "-Z", "-z", codec,
            "-K", "\\x1f\\x1e", "-D", "\\x1d\\x1c",
            "-X", "linger.ms=20", "-X", "batch.num.messages=7"]  # fmt: skip
    for name, value in records[0].headers:
        args += ["-H", f"{name}={value.decode()}"]
    subprocess.run(args, input=data, check=True, timeout=DEADLINE_S, capture_output=True)
    return []  # kcat does not report offsets; the consumers check them


def _js(command: str, spec: dict[str, Any]) -> dict[str, Any]:
    proc = subprocess.run(
        ["node", str(JS_DIR / "kt-client.js"), command],
        input=json.dumps(spec).encode(),
        capture_output=True,
        timeout=60,
        env={**os.environ, "KAFKAJS_NO_PARTITIONER_WARNING": "1"},
    )
    lines = proc.stdout.decode().strip().splitlines()
    result = json.loads(lines[-1]) if lines else {"error": "no output"}
    if proc.returncode != 0 or "error" in result:
        raise AssertionError(f"kafkajs {command} failed: {result}\n{proc.stderr.decode()[-3000:]}")
    return result


def _b64(b: bytes | None) -> str | None:
    return None if b is None else base64.b64encode(b).decode()


def _unb64(s: str | None) -> bytes | None:
    return None if s is None else base64.b64decode(s)


def produce_kafkajs(bootstrap: str, topic: str, records: list[Rec], codec: str) -> list[int]:
    messages = [
        {"key": _b64(r.key), "value": _b64(r.value), "headers": {k: _b64(v) for k, v in r.headers}}
        for r in records
    ]
    # Three sends: batches of different sizes, sequences continuing across them.
    batches = [messages[:1], messages[1:10], messages[10:]]
    result = _js(
        "produce",
        {
            "brokers": [bootstrap],
            "topic": topic,
            "compression": codec,
            "idempotent": True,
            "batches": batches,
        },
    )
    offsets = []
    for batch, meta in zip(batches, result["batches"]):
        base = int(meta[0]["baseOffset"])
        offsets += range(base, base + len(batch))
    return offsets


# --- consumers: read `count` records from offset 0 of partition 0 ---------------------


def consume_confluent(bootstrap: str, topic: str, count: int) -> list[Rec]:
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "kt-interop-unused",  # required by the client; never joined
            "enable.auto.commit": False,
            "fetch.wait.max.ms": 100,
        }
    )
    consumer.assign([TopicPartition(topic, 0, 0)])
    out: list[Rec] = []
    deadline = time.monotonic() + DEADLINE_S
    try:
        while len(out) < count and time.monotonic() < deadline:
            for m in consumer.consume(num_messages=count - len(out), timeout=0.5):
                assert m.error() is None, m.error()
                out.append(
                    Rec(m.key(), m.value(), tuple(m.headers() or ()), m.offset(), m.timestamp()[1])
                )
    finally:
        consumer.close()
    return out


def consume_aiokafka(bootstrap: str, topic: str, count: int) -> list[Rec]:
    from aiokafka import AIOKafkaConsumer, TopicPartition

    async def run() -> list[Rec]:
        consumer = AIOKafkaConsumer(
            bootstrap_servers=bootstrap,
            group_id=None,
            enable_auto_commit=False,
            fetch_max_wait_ms=100,
        )
        await consumer.start()
        tp = TopicPartition(topic, 0)
        out: list[Rec] = []
        try:
            consumer.assign([tp])
            await consumer.seek_to_beginning(tp)
            deadline = time.monotonic() + DEADLINE_S
            while len(out) < count and time.monotonic() < deadline:
                batch = await consumer.getmany(tp, timeout_ms=500)
                for m in batch.get(tp, []):
                    out.append(Rec(m.key, m.value, tuple(m.headers), m.offset, m.timestamp))
        finally:
            await consumer.stop()
        return out

    return asyncio.run(run())


def consume_kafka_python(bootstrap: str, topic: str, count: int) -> list[Rec]:
    from kafka import KafkaConsumer, TopicPartition

    consumer = KafkaConsumer(
        bootstrap_servers=bootstrap, group_id=None, enable_auto_commit=False, fetch_max_wait_ms=100
    )
    tp = TopicPartition(topic, 0)
    out: list[Rec] = []
    try:
        consumer.assign([tp])
        consumer.seek_to_beginning(tp)
        deadline = time.monotonic() + DEADLINE_S
        while len(out) < count and time.monotonic() < deadline:
            for m in consumer.poll(timeout_ms=500).get(tp, []):
                out.append(Rec(m.key, m.value, tuple(m.headers), m.offset, m.timestamp))
    finally:
        consumer.close()
    return out


def _parse_kcat(out: bytes) -> list[Rec]:
    """Parse kcat's `-f 'K%K:%k S%S:%s O%o T%T H%h\\n'`: lengths make binary safe."""
    recs = []
    pos = 0

    def field(tag: bytes, end: bytes) -> bytes:
        nonlocal pos
        assert out[pos : pos + len(tag)] == tag, out[pos : pos + 40]
        stop = out.index(end, pos + len(tag))
        value = out[pos + len(tag) : stop]
        pos = stop + len(end)
        return value

    def sized(tag: bytes) -> bytes | None:
        nonlocal pos
        n = int(field(tag, b":"))
        if n < 0:
            return None
        value = out[pos : pos + n]
        pos += n
        return value

    while pos < len(out):
        key = sized(b"K")
        value = sized(b" S")
        offset = int(field(b" O", b" "))
        ts = int(field(b"T", b" "))
        raw_headers = field(b"H", b"\n").decode()
        headers = tuple(
            (h.split("=", 1)[0], h.split("=", 1)[1].encode()) for h in raw_headers.split(",") if h
        )
        recs.append(Rec(key, value, headers, offset, ts))
    return recs


def consume_kcat(bootstrap: str, topic: str, count: int) -> list[Rec]:
    args = ["kcat", "-b", bootstrap, "-t", topic, "-p", "0", "-C", "-o", "beginning",
            "-c", str(count), "-e", "-f", "K%K:%k S%S:%s O%o T%T H%h\n"]  # fmt: skip
    proc = subprocess.run(args, capture_output=True, check=True, timeout=DEADLINE_S)
    return _parse_kcat(proc.stdout)


def consume_kafkajs(bootstrap: str, topic: str, count: int) -> list[Rec]:
    result = _js(
        "fetch",
        {
            "brokers": [bootstrap],
            "topic": topic,
            "partition": 0,
            "count": count,
            "timeoutMs": DEADLINE_S * 1000,
        },
    )
    return [
        Rec(
            _unb64(m["key"]),
            _unb64(m["value"]),
            tuple((k, _unb64(v)) for k, v in m["headers"].items()),
            int(m["offset"]),
            int(m["timestamp"]),
        )
        for m in result["messages"]
    ]


# --- which clients can run here ---------------------------------------------------------


def _kafkajs_ready() -> str | None:
    if shutil.which("node") is None:
        return "node is not installed"
    if not (JS_DIR / "node_modules" / "kafkajs").is_dir():
        if os.environ.get("CI"):
            pytest.fail("tests/js/node_modules is missing: scripts/setup runs npm ci there")
        return "kafkajs is not installed: run scripts/setup (npm ci in tests/js)"
    return None


def _missing(client: str) -> str | None:
    if client == "kcat" and shutil.which("kcat") is None:
        return "kcat is installed by scripts/setup"
    if client == "kafkajs":
        return _kafkajs_ready()
    return None


PRODUCERS = {
    "confluent": produce_confluent,
    "aiokafka": produce_aiokafka,
    "kafka_python": produce_kafka_python,
    "kcat": produce_kcat,
    "kafkajs": produce_kafkajs,
}
CONSUMERS = {
    "confluent": consume_confluent,
    "aiokafka": consume_aiokafka,
    "kafka_python": consume_kafka_python,
    "kcat": consume_kcat,
    "kafkajs": consume_kafkajs,
}
CLIENTS = list(PRODUCERS)


@pytest.mark.parametrize("producer", CLIENTS)
def test_every_codec_round_trips_through_every_client(broker, producer: str) -> None:
    """`producer` writes one topic per codec; it reads them all back itself, and each
    other available client reads one (a different codec per producer)."""
    if reason := _missing(producer):
        pytest.skip(reason)
    consumers = [c for c in CLIENTS if not _missing(c)]
    p_index = CLIENTS.index(producer)
    for codec in CODECS:
        topic = f"interop-{producer}-{codec}"
        sent = records_for(producer, codec)
        offsets = PRODUCERS[producer](broker.bootstrap, topic, sent, codec)
        if offsets:
            assert offsets == list(range(N)), f"{producer}/{codec}: offsets {offsets}"
        # Clients send a batch uncompressed when compressing would not shrink it.
        stored = stored_codecs(broker.data_dir, topic)
        want = expected_codecs(broker.bootstrap, producer, codec)
        assert want <= stored <= want | {0}, f"{producer}/{codec}: codecs on disk {stored}"

        readers = [producer] + [
            c
            for c in consumers
            if c != producer and CODECS[(p_index + CLIENTS.index(c)) % len(CODECS)] == codec
        ]
        reference: list[Rec] | None = None
        for consumer in readers:
            if consumer not in consumers:
                continue
            got = CONSUMERS[consumer](broker.bootstrap, topic, N)
            where = f"produced by {producer} ({codec}), consumed by {consumer}"
            assert [r.offset for r in got] == list(range(N)), where
            for want, have in zip(sent, got, strict=True):
                assert have.content() == want.content(), f"{where}, offset {have.offset}"
            assert all(r.timestamp > 0 for r in got), where
            if reference is None:
                reference = got
            else:  # timestamps too: every client sees the same record
                assert got == reference, where


def test_kafkajs_consumer_group(broker) -> None:
    """kafkajs's consumer.run needs a consumer group: runs once the coordinator exists."""
    if reason := _kafkajs_ready():
        pytest.skip(reason)
    versions = advertised_apis(broker.bootstrap)
    # FindCoordinator, JoinGroup, Heartbeat, SyncGroup, OffsetCommit/Fetch
    if not all(key in versions for key in (10, 11, 12, 14, 8, 9)):
        pytest.skip("the broker does not serve the group APIs yet (group coordinator)")
    topic = "interop-kafkajs-group"
    sent = records_for("kafkajs", "group")
    produce_kafkajs(broker.bootstrap, topic, sent, "gzip")
    result = _js(
        "group-consume",
        {
            "brokers": [broker.bootstrap],
            "topic": topic,
            "groupId": "kt-kafkajs-group",
            "count": N,
            "timeoutMs": 30000,
        },
    )
    got = sorted(result["messages"], key=lambda m: int(m["offset"]))
    assert [int(m["offset"]) for m in got] == list(range(N))
    assert [(_unb64(m["key"]), _unb64(m["value"])) for m in got] == [(r.key, r.value) for r in sent]


def test_internal_topic_is_never_auto_created_as_a_plain_topic(broker_factory) -> None:
    """A produce to __consumer_offsets is refused and creates nothing; a metadata
    request for it (kcat -L -t, a console consumer) gets the internal topic made by
    the group coordinator, with offsets.topic.num.partitions partitions, never a
    plain topic with num.partitions."""
    import socket

    from kt.protocol import ClientConnection, ErrorCode
    from kt.storage.record_batch import RecordSpec, build_batch

    broker = broker_factory(**{"offsets.topic.num.partitions": "4", "num.partitions": "1"})
    conn = ClientConnection()
    batch = bytes(build_batch([RecordSpec(key=None, value=b"x", timestamp=1)], base_offset=0))
    _, data = conn.send_request(0, 9, {
        "acks": 1, "timeout_ms": 1000,
        "topic_data": [{"name": "__consumer_offsets",
                        "partition_data": [{"index": 0, "records": batch}]}],
    })  # fmt: skip
    with socket.create_connection(("127.0.0.1", broker.port), timeout=10) as sock:
        sock.sendall(data)
        responses: list[Any] = []
        for _ in range(100):
            responses = conn.receive_data(sock.recv(65536))
            if responses:
                break
    (part,) = responses[0].body.responses[0].partition_responses
    assert part.error_code == ErrorCode.INVALID_TOPIC_EXCEPTION
    assert not list(broker.data_dir.glob("__consumer_offsets-*"))

    if shutil.which("kcat") is None:
        return
    meta = subprocess.run(
        ["kcat", "-b", broker.bootstrap, "-L", "-t", "__consumer_offsets"],
        capture_output=True, text=True, timeout=20, check=True,
    ).stdout  # fmt: skip
    if 10 in advertised_apis(broker.bootstrap):  # FindCoordinator: the group coordinator
        assert 'topic "__consumer_offsets" with 4 partitions' in meta, meta
    else:
        assert "with 1 partitions" not in meta, meta
