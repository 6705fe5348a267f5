"""Transactions benchmark on one `kt broker` over loopback, confluent-kafka (librdkafka).

Run by hand (not a test):  .venv/bin/python bench/txn_bench.py [--quick]

Prints, for 1 KiB records on a 1-partition topic:
- produce throughput (records/s, MB/s; median of 3 rounds) of a transactional
  producer committing every N records, for several N, beside the baseline measured
  in the same run: a plain idempotent producer (enable.idempotence, acks=all) with
  the same settings; and the smallest N again with the brokers'
  transaction.partition.verification.enable turned off (dynamically, for that row
  only), so the cost of KIP-890's verification shows beside it. Each producer is
  its own process; rounds go through every producer in turn (each round starting one
  later) so drift in the machine's load hits all of them;
- end-to-end latency p50/p99 (the record's intended send time, stamped in its value,
  to a consumer receiving it) while one producer sends at a steady rate committing
  every T ms, read at the same time from the same stream by a READ_COMMITTED and a
  READ_UNCOMMITTED consumer (the difference is the wait for the commit), beside a
  plain idempotent stream at the same rate.

The machine is shared: its load average is printed at the start and the end.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

from broker_bench import _LATENCY_READER  # noqa: E402
from broker_harness import BrokerProcess, free_port  # noqa: E402

RECORD = 1024

# librdkafka settings shared by every producer here, transactional or not, so the
# only difference between a row and its baseline is the transactions.
PRODUCER_CONF = {
    "acks": "all",
    "enable.idempotence": True,
    "linger.ms": 5,
    "batch.size": 1 << 20,
    "queue.buffering.max.kbytes": 262144,
    "queue.buffering.max.messages": 1_000_000,
}

# A producer in its own process: argv = bootstrap, topic, records, commit_every
# (0: idempotent, no transactions), txn_id, conf. One warm-up record (metadata,
# producer id) goes before the clock starts; the clock stops when every record is
# acknowledged (flush) or the last transaction committed. Prints the seconds.
_PRODUCER = """
import json, sys, time
from confluent_kafka import Producer
topic, n, every, txn_id = sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), sys.argv[5]
conf = {**json.loads(sys.argv[6]), "bootstrap.servers": sys.argv[1]}
if every:
    conf["transactional.id"] = txn_id
p = Producer(conf)
value = b"x" * 1024
if every:
    p.init_transactions(30)
    p.begin_transaction(); p.produce(topic, value, partition=0); p.commit_transaction(30)
else:
    p.produce(topic, value, partition=0); p.flush(30)
produce = p.produce
start = time.perf_counter()
if every:
    sent = 0
    while sent < n:
        p.begin_transaction()
        end = min(n, sent + every)
        while sent < end:
            try:
                produce(topic, value, partition=0)
                sent += 1
            except BufferError:
                p.poll(0.001)
        p.commit_transaction(60)
else:
    for _ in range(n):
        while True:
            try:
                produce(topic, value, partition=0)
                break
            except BufferError:
                p.poll(0.001)
    p.flush(60)
print(time.perf_counter() - start, flush=True)
"""


def produce_run(bootstrap: str, topic: str, records: int, every: int, txn_id: str) -> float:
    """Records/s of one producer process (every=0: idempotent, else commit every N)."""
    out = subprocess.run(
        [sys.executable, "-c", _PRODUCER, bootstrap, topic, str(records), str(every),
         txn_id, json.dumps(PRODUCER_CONF)],
        check=True, capture_output=True, text=True, timeout=900,
    )  # fmt: skip
    return records / float(out.stdout.split()[-1])


# A consumer in its own process: argv = bootstrap, topic, isolation level, idle seconds.
def _percentiles(out: str) -> tuple[float, float, int]:
    """p50 and p99 in ms of the reader's samples, and how many there were."""
    samples = sorted(int(x) / 1e6 for x in out.split())
    if not samples:
        return float("nan"), float("nan"), 0
    return statistics.median(samples), samples[max(0, int(len(samples) * 0.99) - 1)], len(samples)


def latency(
    bootstrap: str, topic: str, rate_mb: float, seconds: float, commit_ms: int, txn_id: str
) -> dict[str, tuple[float, float, int]]:
    """p50/p99 ms (and sample counts) of a READ_COMMITTED and a READ_UNCOMMITTED reader
    on one stream sent at a steady rate, committing every `commit_ms` (0: idempotent
    producer, no transactions).

    Each record carries its intended send time (start + i / rate), not the time
    produce() was called, so records held up behind a blocking commit_transaction()
    count the wait."""
    from confluent_kafka import Producer

    readers = {
        iso: subprocess.Popen(
            [sys.executable, "-c", _LATENCY_READER, bootstrap, topic, "3.0", iso],
            stdout=subprocess.PIPE,
            text=True,
        )
        for iso in ("read_committed", "read_uncommitted")
    }
    for r in readers.values():
        assert r.stdout is not None
        r.stdout.readline()
    conf: dict[str, object] = {**PRODUCER_CONF, "bootstrap.servers": bootstrap, "linger.ms": 0}
    if commit_ms:
        conf["transactional.id"] = txn_id
    p = Producer(conf)
    if commit_ms:
        p.init_transactions(30)
    time.sleep(1.0)  # the readers' first fetch is in flight
    per_sec = rate_mb * 1e6 / RECORD
    pad = os.urandom(RECORD - 8)
    start = time.perf_counter()
    start_ns = time.time_ns()
    sent = 0
    next_commit = commit_ms / 1000
    if commit_ms:
        p.begin_transaction()
    while (now := time.perf_counter() - start) < seconds:
        due = int(now * per_sec)
        while sent < due:
            stamp = start_ns + int(sent / per_sec * 1e9)
            p.produce(topic, stamp.to_bytes(8, "big") + pad, partition=0)
            sent += 1
        if commit_ms and now >= next_commit:
            p.commit_transaction(30)
            p.begin_transaction()
            next_commit += commit_ms / 1000
        p.poll(0)
        time.sleep(0.0005)
    if commit_ms:
        p.commit_transaction(30)
    p.flush(30)
    del p  # closes its connections before the next run's producer starts
    result = {}
    for iso, r in readers.items():
        out, _ = r.communicate(timeout=120)
        result[iso] = _percentiles(out)
    return result


def set_verification(bootstrap: str, brokers: list[int], enabled: bool) -> None:
    """transaction.partition.verification.enable as the cluster-wide dynamic default
    (removed when true, Kafka's default), applied by every broker before returning."""
    import asyncio

    from txn_helpers import set_verification_default

    from kt.client import KafkaClient

    async def run() -> None:
        async with KafkaClient(bootstrap) as client:
            await set_verification_default(client, brokers, None if enabled else False)

    asyncio.run(run())


def measure(
    bootstrap: str, topic: Callable[[str], str], args: argparse.Namespace, brokers: list[int]
) -> None:
    """Both tables against one broker or cluster; `topic(name)` creates a 1-partition
    topic and returns its name once clients can use it."""
    total = (args.mib << 20) // RECORD
    # (label, commit every N or 0, records per run, topic, verification on)
    runs = [("idempotent, no transactions (baseline)", 0, total, topic("tp-idem"), True)]
    every = [int(x) for x in args.every.split(",")]
    for n in every:
        records = min(total, n * args.max_commits)
        runs.append((f"transactional, commit every {n}", n, records, topic(f"tp-txn-{n}"), True))
    n = min(every)
    runs.append((f"transactional, commit every {n}, no verif.", n, min(total, n * args.max_commits),
                 topic(f"tp-txn-{n}-noverify"), False))  # fmt: skip
    rates: dict[str, list[float]] = {label: [] for label, *_ in runs}
    verifying = True
    for r in range(args.rounds):
        # Each round starts one later in the list: whichever run follows the biggest
        # writer meets its page-cache writeback, so that is not always the baseline.
        for label, n, records, name, verify in runs[r % len(runs) :] + runs[: r % len(runs)]:
            if verify != verifying:
                set_verification(bootstrap, brokers, verify)
                verifying = verify
            os.sync()
            rates[label].append(produce_run(bootstrap, name, records, n, f"tp-{n}-{r}"))
    if not verifying:
        set_verification(bootstrap, brokers, True)
    base = statistics.median(rates[runs[0][0]])
    print(f"\n{'produce, 1 KiB records, acks=all':42} {'records':>9} {'records/s':>10} "
          f"{'MB/s':>7} {'vs base':>8}  rounds (records/s)")  # fmt: skip
    for label, _, records, _, _ in runs:
        rate = statistics.median(rates[label])
        each = " / ".join(f"{x:,.0f}" for x in rates[label])
        print(f"{label:42} {records:>9,} {rate:>10,.0f} {rate * RECORD / 1e6:>7.1f} "
              f"{rate / base:>8.0%}  {each}", flush=True)  # fmt: skip

    print(f"\nend-to-end latency at {args.rate:g} MB/s ({args.seconds:g} s each), "
          "p50 / p99 ms (samples)")  # fmt: skip
    print(f"{'stream':42} {'read_committed':>28} {'read_uncommitted':>28}")
    for ms in [0, *(int(x) for x in args.commit_ms.split(","))]:
        label = f"transactional, commit every {ms} ms" if ms else "idempotent (baseline)"
        res = latency(bootstrap, topic(f"lat-{ms}"), args.rate, args.seconds, ms, f"lat-{ms}")
        cells = [f"{p50:.1f} / {p99:.1f} ({n:,})" for p50, p99, n in res.values()]
        print(f"{label:42} {cells[0]:>28} {cells[1]:>28}", flush=True)


def on_broker(args: argparse.Namespace) -> None:
    """One `kt broker` process, RF=1 topics."""
    from confluent_kafka.admin import AdminClient, NewTopic

    print("one kt broker, RF=1 topics", flush=True)
    with tempfile.TemporaryDirectory() as tmp:
        b = BrokerProcess(Path(tmp) / "data", free_port(),
                          {"log.segment.bytes": str(256 << 20)}).start()  # fmt: skip
        admins = [AdminClient({"bootstrap.servers": b.bootstrap})]

        def topic(name: str) -> str:
            admins[0].create_topics([NewTopic(name, 1, 1)])[name].result(30)
            return name

        try:
            measure(b.bootstrap, topic, args, [1])
        finally:
            admins.clear()  # its connections close before the broker goes
            b.stop()


def on_cluster(args: argparse.Namespace) -> None:
    """A local ZooKeeper and 3 kt brokers as `kt cluster up --brokers 3` starts them;
    RF=3 topics with min.insync.replicas=2 (`__transaction_state` has Kafka's RF=3,
    min ISR 2 by default)."""
    sys.path.insert(0, str(ROOT / "bench"))
    from cluster_bench import SESSION_TIMEOUT_MS, Zk, create_topic

    from kt.tools.local_cluster import LocalCluster

    print("local ZooKeeper + 3 kt brokers, RF=3 topics, min.insync.replicas=2", flush=True)
    with tempfile.TemporaryDirectory(prefix="kt-txn-bench-") as tmp:
        cluster = LocalCluster.create(
            tmp, 3, overrides={"zookeeper.session.timeout.ms": str(SESSION_TIMEOUT_MS)}
        )
        cluster.start()
        zk = Zk(cluster.zookeeper_connect)

        def topic(name: str) -> str:
            create_topic(cluster, zk, name, 3)
            return name

        try:
            measure(cluster.bootstrap_servers, topic, args,
                    [b.broker_id for b in cluster.brokers])  # fmt: skip
        finally:
            zk.close()
            cluster.stop()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    add = ap.add_argument
    add("--mib", type=int, default=128, help="MiB per throughput run (default 128)")
    add(
        "--max-commits",
        type=int,
        default=2000,
        help="transactions per run at most: N x this records for small N (default 2000)",
    )
    add("--every", default="10,100,1000,10000", help="commit every N records, comma-separated")
    add("--rounds", type=int, default=3, help="throughput rounds (default 3)")
    add("--rate", type=float, default=10.0, help="latency runs' MB/s (default 10)")
    add("--seconds", type=float, default=15.0, help="latency run length (default 15)")
    add("--commit-ms", default="10,100,1000", help="latency runs' commit intervals in ms")
    add("--cluster", action="store_true", help="on a local 3-broker cluster instead of one broker")
    add("--quick", action="store_true", help="small sizes for a smoke run")
    args = ap.parse_args()
    if args.quick:
        args.mib, args.max_commits, args.rounds = 8, 100, 1
        args.every, args.seconds, args.commit_ms = "10,1000", 3.0, "100"
    print(f"load average at start: {'/'.join(f'{x:.2f}' for x in os.getloadavg())}")
    (on_cluster if args.cluster else on_broker)(args)
    print(f"\nload average at end: {'/'.join(f'{x:.2f}' for x in os.getloadavg())}; "
          f"python {sys.version.split()[0]}, {os.cpu_count()} cores")  # fmt: skip


if __name__ == "__main__":
    main()
