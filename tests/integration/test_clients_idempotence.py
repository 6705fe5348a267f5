"""Idempotent producers that retry: every record lands exactly once, in order.

A proxy between the clients and the broker forwards every request but, now and
then, swallows the responses after a Produce request and cuts the connection, the
way a network failure after the broker appended looks to a client. The producers
retry the batches whose answer never came; the broker recognises the retries by
producer id and sequence and answers with the original offsets instead of
appending again. The broker advertises the proxy, so every connection goes through it.
"""

from __future__ import annotations

import socket
import struct
import threading
import time

import pytest

pytestmark = pytest.mark.integration

PRODUCE = 0


class CuttingProxy:
    """A TCP proxy on 127.0.0.1 that cuts a connection after every `every`-th Produce
    request (at most `max_cuts` times), dropping the responses still to come."""

    def __init__(self, target_port: int, every: int, max_cuts: int) -> None:
        self.target_port = target_port
        self.every = every
        self.max_cuts = max_cuts
        self.cuts = 0
        self.produce_requests = 0
        self._lock = threading.Lock()
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = self._listener.getsockname()[1]
        self._closing = False
        self._socks: list[socket.socket] = []
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while not self._closing:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            try:
                upstream = socket.create_connection(("127.0.0.1", self.target_port), timeout=5)
            except OSError:
                client.close()
                continue
            upstream.settimeout(None)
            self._socks += [client, upstream]
            state = {"doomed": False}
            threading.Thread(target=self._up, args=(client, upstream, state), daemon=True).start()
            threading.Thread(target=self._down, args=(upstream, client, state), daemon=True).start()

    def _should_cut(self) -> bool:
        with self._lock:
            self.produce_requests += 1
            if self.cuts < self.max_cuts and self.produce_requests % self.every == 0:
                self.cuts += 1
                return True
            return False

    def _up(self, client: socket.socket, upstream: socket.socket, state: dict[str, bool]) -> None:
        """Client to broker, frame by frame (to see the API keys)."""
        buf = b""
        try:
            while True:
                chunk = client.recv(65536)
                if not chunk:
                    break
                buf += chunk
                while len(buf) >= 4:
                    (size,) = struct.unpack_from(">i", buf, 0)
                    if len(buf) < 4 + size:
                        break
                    frame, buf = buf[: 4 + size], buf[4 + size :]
                    (api_key,) = struct.unpack_from(">h", frame, 4)
                    cut = api_key == PRODUCE and self._should_cut()
                    if cut:
                        state["doomed"] = True  # before the broker can answer
                    upstream.sendall(frame)
                    if cut:
                        time.sleep(0.1)  # the broker appends, its answer is dropped
                        raise ConnectionAbortedError
        except OSError:
            pass
        finally:
            for s in (client, upstream):
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
                s.close()

    def _down(self, upstream: socket.socket, client: socket.socket, state: dict[str, bool]) -> None:
        try:
            while True:
                chunk = upstream.recv(65536)
                if not chunk or state["doomed"]:
                    break
                client.sendall(chunk)
        except OSError:
            pass
        finally:
            try:
                client.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def close(self) -> None:
        self._closing = True
        self._listener.close()
        for s in self._socks:
            try:
                s.close()
            except OSError:
                pass


@pytest.fixture
def proxied_broker(tmp_path):
    """A broker that advertises a cutting proxy in front of it."""
    from broker_harness import BrokerProcess, free_port

    port = free_port()
    proxy = CuttingProxy(port, every=9, max_cuts=4)
    broker = BrokerProcess(
        tmp_path / "data",
        port,
        {"advertised.listeners": f"PLAINTEXT://127.0.0.1:{proxy.port}", "num.partitions": "3"},
    ).start()
    yield broker, proxy
    proxy.close()
    broker.kill()


def _read_values(
    bootstrap: str, topic: str, partitions: int, expect: int
) -> dict[int, list[bytes]]:
    from kafka import KafkaConsumer, TopicPartition

    consumer = KafkaConsumer(
        bootstrap_servers=bootstrap, group_id=None, enable_auto_commit=False, fetch_max_wait_ms=100
    )
    tps = [TopicPartition(topic, p) for p in range(partitions)]
    consumer.assign(tps)
    consumer.seek_to_beginning()
    ends = consumer.end_offsets(tps)
    out: dict[int, list[bytes]] = {p: [] for p in range(partitions)}
    deadline = time.monotonic() + 20
    try:
        while sum(map(len, out.values())) < sum(ends.values()) and time.monotonic() < deadline:
            for tp, msgs in consumer.poll(timeout_ms=500).items():
                out[tp.partition] += [m.value for m in msgs]
    finally:
        consumer.close()
    assert sum(ends.values()) == expect, f"log end offsets {ends}, {expect} records sent"
    return out


def _check_exactly_once_in_order(got: dict[int, list[bytes]], total: int) -> None:
    values = [v for vs in got.values() for v in vs]
    assert len(values) == total, f"{len(values)} records for {total} sent"
    assert len(set(values)) == total, "duplicates in the log"
    for vs in got.values():  # within a partition, the send order
        seq = [int(v.split(b"-")[1]) for v in vs]
        assert seq == sorted(seq)


def test_confluent_idempotent_retries_leave_no_duplicates(proxied_broker) -> None:
    """librdkafka with five batches in flight per connection, over three partitions."""
    from confluent_kafka import Producer

    broker, proxy = proxied_broker
    total, parts, topic = 6000, 3, "idem-confluent"
    producer = Producer(
        {
            "bootstrap.servers": f"127.0.0.1:{proxy.port}",
            "enable.idempotence": True,
            "max.in.flight.requests.per.connection": 5,
            "linger.ms": 2,
            "batch.num.messages": 40,
            "retry.backoff.ms": 20,
            "compression.type": "zstd",
        }
    )
    errors: list[object] = []
    delivered = [0]

    def cb(err: object, _msg: object) -> None:
        if err is not None:
            errors.append(err)
        else:
            delivered[0] += 1

    for i in range(total):
        producer.produce(
            topic, value=b"v-%d" % i, key=b"k%d" % (i % 17), partition=i % parts, on_delivery=cb
        )
        if i % 500 == 0:
            producer.poll(0)
    assert producer.flush(60) == 0
    assert not errors, errors[:5]
    assert delivered[0] == total
    assert proxy.cuts >= 2, f"only {proxy.cuts} connections were cut"
    got = _read_values(broker.bootstrap, topic, parts, total)
    _check_exactly_once_in_order(got, total)


def test_kafka_python_default_idempotent_retries_leave_no_duplicates(proxied_broker) -> None:
    from kafka import KafkaProducer

    broker, proxy = proxied_broker
    total, topic = 3000, "idem-kafka-python"
    producer = KafkaProducer(
        bootstrap_servers=f"127.0.0.1:{proxy.port}",
        linger_ms=2,
        batch_size=2048,
        retry_backoff_ms=20,
        max_in_flight_requests_per_connection=5,
    )
    assert producer.config["enable_idempotence"], "kafka-python >= 2.1 is idempotent by default"
    try:
        futures = [producer.send(topic, value=b"v-%d" % i, partition=0) for i in range(total)]
        producer.flush(60)
        offsets = [f.get(timeout=30).offset for f in futures]
    finally:
        producer.close(timeout=5)
    assert offsets == list(range(total))
    assert proxy.cuts >= 2, f"only {proxy.cuts} connections were cut"
    got = _read_values(broker.bootstrap, topic, 3, total)
    _check_exactly_once_in_order(got, total)


def test_init_producer_id_always_hands_out_a_fresh_id(kt_broker) -> None:
    """An idempotent producer's KIP-360 "bump" (InitProducerId v3+ with its id and
    epoch) gets a new id at epoch 0, as from Kafka: never an epoch that only the
    broker which handed out the old id could vouch for."""
    import asyncio

    from kt.client import KafkaClient
    from kt.protocol import ErrorCode, apis

    async def go() -> list[tuple[int, int, int]]:
        client = KafkaClient(kt_broker.bootstrap)
        await client.start()
        try:
            out = []
            pid, epoch = -1, -1
            for _ in range(3):
                body = apis.INIT_PRODUCER_ID.request(
                    transactional_id=None, transaction_timeout_ms=60000,
                    producer_id=pid, producer_epoch=epoch,
                )  # fmt: skip
                resp = await client.send(apis.INIT_PRODUCER_ID, body)
                out.append((resp.error_code, resp.producer_id, resp.producer_epoch))
                pid, epoch = resp.producer_id, resp.producer_epoch
            # an id this broker never handed out is not refused either
            body = apis.INIT_PRODUCER_ID.request(
                transactional_id=None, transaction_timeout_ms=60000,
                producer_id=pid + 10**9, producer_epoch=7,
            )  # fmt: skip
            resp = await client.send(apis.INIT_PRODUCER_ID, body)
            out.append((resp.error_code, resp.producer_id, resp.producer_epoch))
            return out
        finally:
            await client.close()

    got = asyncio.run(go())
    assert [e for e, _, _ in got] == [ErrorCode.NONE] * 4
    assert [ep for _, _, ep in got] == [0] * 4
    ids = [p for _, p, _ in got]
    assert len(set(ids)) == 4 and all(p >= 0 for p in ids)
