"""Broker benchmark over loopback with a C client (confluent-kafka / librdkafka).

Run by hand (not a test):  .venv/bin/python bench/broker_bench.py [--mib 256]

Prints, for 1 KiB records:
- the ceiling: a plain TCP receiver that writes what it gets to a file, no Kafka
  logic, fed by the same sender pattern (measured in the same run);
- produce throughput, 1 and 8 partitions, acks=1 and acks=all;
- consume throughput (kcat reading everything back to /dev/null);
- end-to-end latency p50/p99 at a steady 20 MB/s (produce timestamp → consume).
"""

from __future__ import annotations

import argparse
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

from broker_harness import BrokerProcess, free_port  # noqa: E402

RECORD = 1024


def ceiling(total: int) -> float:
    """MB/s of a plain TCP receiver writing to a file, fed in 1 MiB writes."""
    port = free_port()
    out = tempfile.NamedTemporaryFile(delete=False)  # noqa: SIM115
    code = (
        "import socket,sys\n"
        f"s=socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)\n"
        f"s.bind(('127.0.0.1',{port})); s.listen(1); c,_=s.accept()\n"
        f"f=open({out.name!r},'wb')\n"
        "while True:\n"
        "    b=c.recv(1<<20)\n"
        "    if not b: break\n"
        "    f.write(b)\n"
        "f.flush(); c.sendall(b'k')\n"
    )
    proc = subprocess.Popen([sys.executable, "-c", code])
    time.sleep(0.3)
    chunk = os.urandom(1 << 20)
    start = time.perf_counter()
    with socket.create_connection(("127.0.0.1", port)) as s:
        sent = 0
        while sent < total:
            s.sendall(chunk)
            sent += len(chunk)
        s.shutdown(socket.SHUT_WR)
        s.recv(1)
    elapsed = time.perf_counter() - start
    proc.wait()
    os.unlink(out.name)
    return total / elapsed / 1e6


def record_file(total: int) -> Path:
    """A file of `total // 1024` newline-terminated 1 KiB records (kcat -P input)."""
    path = Path(tempfile.gettempdir()) / f"kt-bench-records-{total}.txt"
    if not path.exists() or path.stat().st_size != total // RECORD * RECORD:
        alphabet = b"abcdefghijklmnopqrstuvwxyz0123456789"
        line = bytes(alphabet[b % len(alphabet)] for b in os.urandom(RECORD - 1)) + b"\n"
        with open(path, "wb") as f:
            for _ in range(total // RECORD):
                f.write(line)
    return path


def produce(bootstrap: str, topic: str, total: int, acks: str) -> float:
    """MB/s of kcat (librdkafka, C) producing `total` bytes of 1 KiB records from a
    file, with large batches; a C producer so the figure is the broker's."""
    path = record_file(total)
    n = total // RECORD
    start = time.perf_counter()
    subprocess.run(
        ["kcat", "-P", "-b", bootstrap, "-t", topic, "-l", str(path),
         "-X", f"acks={acks}", "-X", "linger.ms=5", "-X", "batch.size=1048576",
         "-X", "queue.buffering.max.kbytes=1048576", "-X", "enable.idempotence=false"],
        check=True, timeout=600,
    )  # fmt: skip
    return n * RECORD / (time.perf_counter() - start) / 1e6


def consume(bootstrap: str, topic: str, expect: int) -> float:
    """MB/s of kcat (librdkafka, C) reading `expect` records from the start to /dev/null.

    A C consumer, so the figure is the broker's rather than a Python client's."""
    start = time.perf_counter()
    with open(os.devnull, "wb") as devnull:
        subprocess.run(
            ["kcat", "-C", "-b", bootstrap, "-t", topic, "-o", "beginning", "-e", "-q",
             "-c", str(expect), "-X", "fetch.max.bytes=52428800",
             "-X", "max.partition.fetch.bytes=10485760"],
            stdout=devnull, check=True, timeout=600,
        )  # fmt: skip
    return expect * RECORD / (time.perf_counter() - start) / 1e6


_LATENCY_READER = """
import sys, time
from confluent_kafka import Consumer, TopicPartition
# argv: bootstrap, topic, [idle seconds before stopping, default 2], [isolation level]
isolation = sys.argv[4] if len(sys.argv) > 4 else "read_uncommitted"
c = Consumer({"bootstrap.servers": sys.argv[1], "group.id": "lat-" + isolation,
              "fetch.wait.max.ms": 100, "fetch.min.bytes": 1, "enable.auto.commit": False,
              "isolation.level": isolation})
c.assign([TopicPartition(sys.argv[2], 0, -1)])
print("ready", flush=True)
# Seconds without a record after the last one before the reader stops.
idle_s = float(sys.argv[3]) if len(sys.argv) > 3 else 2.0
out = []
idle_since = None
while True:
    m = c.poll(0.1)
    if m is None or m.error():
        if out and idle_since is None:
            idle_since = time.monotonic()
        if idle_since is not None and time.monotonic() - idle_since > idle_s:
            break
        continue
    idle_since = None
    out.append(time.time_ns() - int.from_bytes(m.value()[:8], "big"))
c.close()
sys.stdout.write("\\n".join(str(x) for x in out) + "\\n")
"""


def latency(bootstrap: str, topic: str, rate_mb: float, seconds: float) -> tuple[float, float]:
    """p50/p99 ms from produce to consume at a steady rate; the consumer runs in its
    own process so the two clients do not share a GIL."""
    from confluent_kafka import Producer

    reader = subprocess.Popen(
        [sys.executable, "-c", _LATENCY_READER, bootstrap, topic],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert reader.stdout is not None
    reader.stdout.readline()
    time.sleep(1.0)
    p = Producer({"bootstrap.servers": bootstrap, "acks": "1", "linger.ms": 0,
                  "enable.idempotence": False})  # fmt: skip
    per_sec = int(rate_mb * 1e6 / RECORD)
    pad = os.urandom(RECORD - 8)
    start = time.perf_counter()
    sent = 0
    while time.perf_counter() - start < seconds:
        due = int((time.perf_counter() - start) * per_sec)
        while sent < due:
            p.produce(topic, time.time_ns().to_bytes(8, "big") + pad, partition=0)
            sent += 1
        p.poll(0)
        time.sleep(0.0005)
    p.flush(30)
    out, _ = reader.communicate(timeout=60)
    samples = sorted(int(x) / 1e6 for x in out.split())
    if not samples:
        return float("nan"), float("nan")
    return statistics.median(samples), samples[max(0, int(len(samples) * 0.99) - 1)]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--mib", type=int, default=256, help="bytes produced per run (default 256)")
    args = ap.parse_args()
    total = args.mib << 20
    # Dirty page-cache writeback throttles every writer alike, so each produce figure
    # is set beside a ceiling measured right before it, each run starting with the
    # page cache synced.
    print(f"{'measure':44} {'figure':>11} {'ceiling':>11} {'ratio':>6}")
    ceilings: list[float] = []
    with tempfile.TemporaryDirectory() as tmp:
        b = BrokerProcess(Path(tmp) / "data", free_port(),
                          {"log.segment.bytes": str(256 << 20)}).start()  # fmt: skip
        try:
            from confluent_kafka.admin import AdminClient, NewTopic

            admin = AdminClient({"bootstrap.servers": b.bootstrap})
            for parts in (1, 8):
                for acks in ("1", "all"):
                    topic = f"bench-{parts}-{acks}"
                    admin.create_topics([NewTopic(topic, parts, 1)])[topic].result()
                    os.sync()
                    top = ceiling(total)
                    ceilings.append(top)
                    os.sync()
                    mb = produce(b.bootstrap, topic, total, acks)
                    name = f"produce {parts} partition(s), acks={acks}"
                    print(f"{name:44} {mb:6.0f} MB/s {top:6.0f} MB/s {mb / top:6.0%}")
            top = statistics.median(ceilings)
            for parts in (1, 8):
                topic = f"bench-{parts}-1"
                mb = consume(b.bootstrap, topic, total // RECORD)
                name = f"consume {parts} partition(s)"
                print(f"{name:44} {mb:6.0f} MB/s {top:6.0f} MB/s {mb / top:6.0%}")
            admin.create_topics([NewTopic("lat", 1, 1)])["lat"].result()
            p50, p99 = latency(b.bootstrap, "lat", 20.0, 10.0)
            print(f"{'end-to-end latency at 20 MB/s, p50 / p99':44} {p50:.1f} / {p99:.1f} ms")
        finally:
            b.stop()
    print(f"(ceiling: plain TCP receiver writing a file, median {statistics.median(ceilings):.0f} "
          f"MB/s; python {sys.version.split()[0]}, {os.cpu_count()} cores)")  # fmt: skip


if __name__ == "__main__":
    main()
