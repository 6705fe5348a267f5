"""The broker answers real clients: kafka-python and kcat produce and consume."""

from __future__ import annotations

import shutil
import subprocess

import pytest

pytestmark = pytest.mark.integration


def test_kafka_python_round_trip_every_codec(kt_broker) -> None:
    from kafka import KafkaConsumer, KafkaProducer

    for codec in ("gzip", "snappy", "lz4", "zstd", None):
        topic = f"rt-{codec or 'none'}"
        producer = KafkaProducer(bootstrap_servers=kt_broker.bootstrap, compression_type=codec)
        sent = [(b"k%d" % i, b"v%d" % i if i % 3 else None) for i in range(50)]
        for k, v in sent:
            producer.send(topic, key=k, value=v, headers=[("h", k)])
        producer.flush()
        producer.close()
        consumer = KafkaConsumer(
            topic,
            bootstrap_servers=kt_broker.bootstrap,
            auto_offset_reset="earliest",
            enable_auto_commit=False,
            consumer_timeout_ms=5000,
        )
        got = []
        for m in consumer:
            got.append((m.key, m.value, m.headers, m.offset))
            if len(got) == len(sent):
                break
        consumer.close()
        assert [(k, v) for k, v, _, _ in got] == sent
        assert [o for *_, o in got] == list(range(50))
        assert all(h == [("h", k)] for k, _, h, _ in got)


@pytest.mark.skipif(shutil.which("kcat") is None, reason="kcat is installed by scripts/setup")
def test_kcat_produce_consume_and_metadata(kt_broker) -> None:
    lines = "".join(f"key{i}:value{i}\n" for i in range(20))
    subprocess.run(
        ["kcat", "-b", kt_broker.bootstrap, "-t", "kc", "-P", "-K:", "-z", "lz4"],
        input=lines.encode(), check=True, timeout=30,
    )  # fmt: skip
    out = subprocess.run(
        ["kcat", "-b", kt_broker.bootstrap, "-t", "kc", "-C", "-e", "-f", "%k=%s@%o\n"],
        capture_output=True, check=True, timeout=30,
    ).stdout.decode()  # fmt: skip
    assert out.splitlines() == [f"key{i}=value{i}@{i}" for i in range(20)]
    meta = subprocess.run(["kcat", "-b", kt_broker.bootstrap, "-L"], capture_output=True,
                          check=True, timeout=30).stdout.decode()  # fmt: skip
    assert 'topic "kc" with 1 partitions' in meta


def test_idempotent_producer_state_survives_restart(kt_broker) -> None:
    """kafka-python producers are idempotent by default: sequences are checked and
    the state is rebuilt after a restart, so producing goes on without errors."""
    from kafka import KafkaConsumer, KafkaProducer

    producer = KafkaProducer(bootstrap_servers=kt_broker.bootstrap, enable_idempotence=True)
    for i in range(30):
        producer.send("idem", value=b"a%d" % i)
    producer.flush()
    producer.close()
    kt_broker.restart()
    producer = KafkaProducer(bootstrap_servers=kt_broker.bootstrap, enable_idempotence=True)
    for i in range(30):
        producer.send("idem", value=b"b%d" % i).get(timeout=10)
    producer.close()
    consumer = KafkaConsumer("idem", bootstrap_servers=kt_broker.bootstrap,
                             auto_offset_reset="earliest", consumer_timeout_ms=5000)  # fmt: skip
    values = []
    for m in consumer:
        values.append(m.value)
        if len(values) == 60:
            break
    consumer.close()
    assert values == [b"a%d" % i for i in range(30)] + [b"b%d" % i for i in range(30)]
    snapshots = sorted(p.name for p in (kt_broker.data_dir / "idem-0").glob("*.snapshot"))
    assert snapshots, "a clean shutdown leaves a producer snapshot"
