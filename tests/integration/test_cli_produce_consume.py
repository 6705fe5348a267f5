"""kt produce / kt consume against a real kt broker, and interoperability with kcat
and kafka-python in both directions: keys, headers, null values, every codec."""

from __future__ import annotations

import base64
import json
import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

from kt.cli import cli

pytestmark = pytest.mark.integration
CODECS = ("none", "gzip", "snappy", "lz4", "zstd")
needs_kcat = pytest.mark.skipif(shutil.which("kcat") is None, reason="kcat not installed")


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    from broker_harness import BrokerProcess, free_port

    b = BrokerProcess(tmp_path_factory.mktemp("pc") / "data", free_port()).start()
    yield b
    b.kill()


def kt(broker: Any, *args: str, input: bytes | None = None) -> Result:
    return CliRunner().invoke(cli, [*args, "-b", broker.bootstrap], input=input)


def ok(result: Result) -> Result:
    assert result.exit_code == 0, (result.stdout, result.stderr)
    return result


def kcat(broker: Any, *args: str, input: bytes | None = None) -> bytes:
    return subprocess.run(["kcat", "-b", broker.bootstrap, *args], input=input,
                          capture_output=True, check=True, timeout=30).stdout  # fmt: skip


def kafka_python_read(broker: Any, topic: str) -> list[Any]:
    from kafka import KafkaConsumer

    consumer = KafkaConsumer(topic, bootstrap_servers=broker.bootstrap,
                             auto_offset_reset="earliest", enable_auto_commit=False,
                             consumer_timeout_ms=1500)  # fmt: skip
    got = sorted(consumer, key=lambda m: (m.partition, m.offset))
    consumer.close()
    return got


@needs_kcat
@pytest.mark.parametrize("codec", CODECS)
def test_kt_produce_read_by_kcat_and_kafka_python(broker: Any, codec: str) -> None:
    topic = f"ktp-{codec}"
    ok(kt(broker, "topic", "create", "--topic", topic, "--partitions", "1"))
    lines = b"k1:v1\nk2:\n:v3\nk4:v:4\n"
    r = ok(kt(broker, "produce", topic, "-K:", "-H", "src=kt", "-H", "n=1", "-Z", "-z", codec,
              "--json", input=lines))  # fmt: skip
    assert json.loads(r.stdout)["records"] == 4
    out = kcat(broker, "-C", "-t", topic, "-e", "-Z", "-f", "%k|%s|%h|%o\n")
    assert out.decode().splitlines() == [
        "k1|v1|src=kt,n=1|0", "k2|NULL|src=kt,n=1|1", "NULL|v3|src=kt,n=1|2",
        "k4|v:4|src=kt,n=1|3",
    ]  # fmt: skip
    got = kafka_python_read(broker, topic)
    assert [(m.key, m.value) for m in got] == [
        (b"k1", b"v1"), (b"k2", None), (None, b"v3"), (b"k4", b"v:4"),
    ]  # fmt: skip
    assert got[0].headers == [("src", b"kt"), ("n", b"1")]


@needs_kcat
@pytest.mark.parametrize("codec", CODECS)
def test_kcat_produce_read_by_kt(broker: Any, codec: str) -> None:
    topic = f"kcp-{codec}"
    ok(kt(broker, "topic", "create", "--topic", topic, "--partitions", "1"))
    kcat(broker, "-P", "-t", topic, "-K:", "-z", codec, "-H", "h1=x", "-Z",
         input=b"a:1\nb:\nc:3\n")  # fmt: skip
    out = ok(kt(broker, "consume", topic, "-e", "--json")).stdout.splitlines()
    recs = [json.loads(line) for line in out]
    assert [(r["key"], r["value"], r["offset"]) for r in recs] == [
        ("a", "1", 0),
        ("b", None, 1),
        ("c", "3", 2),
    ]
    assert recs[0]["headers"] == [{"key": "h1", "value": "x"}]
    assert recs[0]["topic"] == topic and recs[0]["timestamp_type"] == "CreateTime"


def test_kafka_python_produce_read_by_kt(broker: Any) -> None:
    from kafka import KafkaProducer

    for codec in ("gzip", "lz4", "zstd", None):
        topic = f"kpp-{codec}"
        p = KafkaProducer(bootstrap_servers=broker.bootstrap, compression_type=codec)
        p.send(topic, key=b"k", value=b"v", headers=[("a", b"1"), ("e", b"")])
        p.send(topic, key=b"tomb", value=None)
        p.send(topic, value=b"\xff\xfebin")
        p.flush()
        p.close()
        lines = ok(kt(broker, "consume", topic, "-e", "-Z", "-f",
                      "%p/%o %K:%k %S:%s [%h]%%\\n")).stdout_bytes.splitlines()  # fmt: skip
        assert lines == [b"0/0 1:k 1:v [a=1,e=]%", b"0/1 4:tomb -1:NULL []%",
                         b"0/2 -1:NULL 5:\xff\xfebin []%"]  # fmt: skip
        js = [json.loads(x) for x in ok(kt(broker, "consume", topic, "-e", "--json")).stdout
              .splitlines()]  # fmt: skip
        assert js[2]["value"] == base64.b64encode(b"\xff\xfebin").decode()
        assert js[2]["value_encoding"] == "base64" and "key_encoding" not in js[2]
        assert js[0]["headers"][1] == {"key": "e", "value": ""}
        hexed = json.loads(ok(kt(broker, "consume", topic, "-e", "-c", "1", "--json",
                                 "--binary-encoding", "hex")).stdout)  # fmt: skip
        assert hexed["key"] == "6b" and hexed["key_encoding"] == "hex"


def test_consume_offsets_partitions_count(broker: Any) -> None:
    topic = "offs"
    ok(kt(broker, "topic", "create", "--topic", topic, "--partitions", "2"))
    ok(kt(broker, "produce", topic, "-p", "1", input=b"".join(b"m%d\n" % i for i in range(10))))
    time.sleep(0.01)
    mid = int(time.time() * 1000)
    time.sleep(0.01)
    ok(kt(broker, "produce", topic, "-p", "1", input=b"late1\nlate2\n"))

    def values(*args: str) -> list[str]:
        return ok(kt(broker, "consume", topic, "-e", *args)).stdout.splitlines()

    assert values("-p", "1", "-o", "-3") == ["m9", "late1", "late2"]
    assert values("-p", "1", "-o", "8", "-c", "2") == ["m8", "m9"]
    assert values("-p", "1", "-o", f"s@{mid}") == ["late1", "late2"]
    assert values("-p", "1", "-o", "beginning", "-o", f"e@{mid}") == [f"m{i}" for i in range(10)]
    assert values("-p", "0") == []
    assert values("-o", "end") == []
    assert values("-p", "1", "-o", "-100", "-c", "1") == ["m0"]
    assert len(values()) == 12
    keyed = ok(kt(broker, "consume", topic, "-e", "-p", "1", "-c", "1", "-K", "=", "-D",
                  "|")).stdout  # fmt: skip
    assert keyed == "=m0|"


def test_produce_files_whole_and_keyed_partitioning(broker: Any, tmp_path: Path) -> None:
    from kafka.partitioner.default import murmur2

    from kt.client.partitioner import murmur2 as ours

    for key in (b"", b"a", b"ab", b"abc", b"abcd", b"hello world", bytes(range(200))):
        assert ours(key) & 0xFFFFFFFF == murmur2(key) & 0xFFFFFFFF
    topic = "files"
    ok(kt(broker, "topic", "create", "--topic", topic, "--partitions", "4"))
    f = tmp_path / "in.txt"
    f.write_bytes(b"x1;x2;x3")
    blob = tmp_path / "blob.bin"
    blob.write_bytes(bytes(range(256)) * 10)
    ok(kt(broker, "produce", topic, "--file", str(f), "-D", ";", "-k", "same"))
    ok(kt(broker, "produce", topic, "--file", str(blob), "--whole", "-p", "3"))
    out = [json.loads(x) for x in ok(kt(broker, "consume", topic, "-e", "--json")).stdout
           .splitlines()]  # fmt: skip
    xs = [r for r in out if r["key"] == "same"]
    expected = (murmur2(b"same") & 0x7FFFFFFF) % 4
    assert [r["value"] for r in xs] == ["x1", "x2", "x3"]
    assert {r["partition"] for r in xs} == {expected}
    (whole,) = [r for r in out if r["partition"] == 3 and r["key"] is None]
    assert base64.b64decode(whole["value"]) == bytes(range(256)) * 10


def test_produce_consume_errors(broker: Any) -> None:
    def err(r: Result, code: int) -> None:
        assert r.exit_code == code, (r.stdout, r.stderr)
        assert r.stderr.count("\n") == 1 and r.stderr.startswith("kt: error: ")

    err(kt(broker, "consume", "no-such-topic", "-e"), 1)
    err(kt(broker, "consume", "offs", "-o", "sideways"), 2)
    err(kt(broker, "consume", "offs", "-o", "stored"), 2)
    err(kt(broker, "consume", "offs", "-p", "9", "-e"), 1)
    err(kt(broker, "consume", "offs", "--json", "-f", "%s"), 2)
    err(kt(broker, "produce", "offs", "-p", "9", input=b"x\n"), 1)
    err(kt(broker, "produce", "offs", "-H", "novalue", input=b"x\n"), 2)
    assert kt(broker, "produce", "offs", "-z", "brotli", input=b"x").exit_code == 2


def test_consume_output_is_piped_promptly(broker: Any) -> None:
    """`kt consume | head`: head gets the first records, kt ends quietly (EPIPE)."""
    from broker_harness import KT

    pad = b"." * 100
    ok(kt(broker, "produce", "pipe", input=b"".join(b"r%d%s\n" % (i, pad) for i in range(20000))))
    p1 = subprocess.Popen([KT, "consume", "pipe", "-e", "-b", broker.bootstrap],
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE)  # fmt: skip
    p2 = subprocess.run(["head", "-n", "3"], stdin=p1.stdout, capture_output=True, timeout=30)
    assert p1.stdout is not None
    p1.stdout.close()
    assert p1.wait(timeout=30) == 0
    assert p2.stdout == b"r0%s\nr1%s\nr2%s\n" % (pad, pad, pad)
    assert b"Traceback" not in p1.stderr.read()  # type: ignore[union-attr]
