"""Event loops: the kt broker on asyncio's own loop against uvloop, in one run.

Run by hand (not a test):  .venv/bin/python bench/event_loop_bench.py [--quick]
(uvloop must be importable; KT_EVENT_LOOP picks each broker's loop.)

Prints, for 1 KiB records, with kcat (librdkafka, C) as the load so the figures are
the broker's, each loop's figure beside the other's:
- single broker: produce MB/s (1 partition, acks=1) and consume MB/s (kcat reading
  everything back to /dev/null), with the broker's CPU seconds per GB moved;
- round trips: p50/p99 ms of one 1 KiB record produced alone and waited for, acks=1
  (the per-request cost, where a loop's own overhead shows most);
- 3-broker cluster (ZooKeeper, `LocalCluster`): produce MB/s with RF=3 acks=all
  (min.insync.replicas=2), with the three brokers' CPU seconds per GB.

Both loops' brokers (two single brokers, two clusters) run for the whole run, idle
while the other is measured, and the rows alternate loops (asyncio, uvloop,
asyncio, ...) so drift in the machine's load hits both; each figure is the median
of --rounds runs. The machine's other load is not controlled: on a shared machine
compare the two columns of one run, not figures of different runs.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import statistics
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))
sys.path.insert(0, str(ROOT / "tests"))

from broker_bench import RECORD, consume, produce  # noqa: E402
from broker_harness import BrokerProcess, free_port  # noqa: E402
from cluster_bench import Zk, brokers_cpu, cpu_seconds, create_topic, round_trips  # noqa: E402

from kt.tools.local_cluster import LocalCluster  # noqa: E402

LOOPS = ("asyncio", "uvloop")


@contextlib.contextmanager
def event_loop(name: str) -> Iterator[None]:
    """Processes started inside run on loop `name` (KT_EVENT_LOOP is inherited)."""
    old = os.environ.get("KT_EVENT_LOOP")
    os.environ["KT_EVENT_LOOP"] = name
    try:
        yield
    finally:
        if old is None:
            del os.environ["KT_EVENT_LOOP"]
        else:
            os.environ["KT_EVENT_LOOP"] = old


def check_loop(log_text: str, name: str) -> None:
    """Stop when a broker does not say it runs on `name` (a silent fallback would
    make the comparison meaningless)."""
    if f"event loop: {name}" not in log_text:
        raise SystemExit(f"a broker meant to run on {name} does not say so in its log")


def create(bootstrap: str, topic: str, partitions: int = 1) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, partitions, 1)])[topic].result()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--mib", type=int, default=128, help="MiB per produce run (default 128)")
    ap.add_argument("--rounds", type=int, default=3, help="runs per loop and row (default 3)")
    ap.add_argument("--round-trips", type=int, default=500, help="lone produces (default 500)")
    ap.add_argument("--quick", action="store_true", help="small sizes for a smoke run")
    args = ap.parse_args()
    if args.quick:
        args.mib, args.rounds, args.round_trips = 16, 1, 50
    try:
        import uvloop
    except ImportError:
        raise SystemExit("uvloop is not installed: pip install uvloop") from None
    total = args.mib << 20
    n = total // RECORD
    print(f"kt broker on asyncio vs uvloop {uvloop.__version__}; {args.mib} MiB of 1 KiB "
          f"records per run, median of {args.rounds}; python {sys.version.split()[0]}, "
          f"{os.cpu_count()} cores", flush=True)  # fmt: skip
    rows: dict[str, dict[str, list[float]]] = {}

    def add(row: str, loop: str, value: float) -> None:
        rows.setdefault(row, {name: [] for name in LOOPS})[loop].append(value)

    with tempfile.TemporaryDirectory(prefix="kt-loop-bench-") as tmp:
        # --- single broker ---------------------------------------------------------------
        brokers: dict[str, BrokerProcess] = {}
        try:
            for loop in LOOPS:
                with event_loop(loop):
                    b = BrokerProcess(Path(tmp) / f"single-{loop}" / "data", free_port(),
                                      {"log.segment.bytes": str(256 << 20)})  # fmt: skip
                    b.data_dir.parent.mkdir(parents=True)
                    brokers[loop] = b.start()
                check_loop(b.log(), loop)
            for r in range(args.rounds):
                for loop in LOOPS if r % 2 == 0 else LOOPS[::-1]:
                    b = brokers[loop]
                    assert b.proc is not None
                    topic = f"p-{r}"
                    create(b.bootstrap, topic)
                    os.sync()
                    before = cpu_seconds(b.proc.pid)
                    mb = produce(b.bootstrap, topic, total, "1")
                    used = cpu_seconds(b.proc.pid) - before
                    add("produce 1 partition acks=1, MB/s", loop, mb)
                    add("  broker CPU s per GB produced", loop, used / (total / 1e9))
                    before = cpu_seconds(b.proc.pid)
                    mb = consume(b.bootstrap, topic, n)
                    used = cpu_seconds(b.proc.pid) - before
                    add("consume 1 partition, MB/s", loop, mb)
                    add("  broker CPU s per GB consumed", loop, used / (total / 1e9))
                    print(f"  round {r + 1} {loop:8} done", flush=True)
            for loop in LOOPS:
                b = brokers[loop]
                create(b.bootstrap, "rt")
                p50, p99 = round_trips(b.bootstrap, "rt", "1", args.round_trips)
                add("lone produce acks=1, p50 ms", loop, p50)
                add("lone produce acks=1, p99 ms", loop, p99)
        finally:
            for b in brokers.values():
                b.stop()

        # --- 3-broker cluster, RF=3 acks=all --------------------------------------------
        clusters: dict[str, LocalCluster] = {}
        zks: dict[str, Zk] = {}
        try:
            for loop in LOOPS:
                with event_loop(loop):
                    c = LocalCluster.create(Path(tmp) / f"cluster-{loop}", 3)
                    clusters[loop] = c
                    c.start()
                zks[loop] = Zk(c.zookeeper_connect)
                for broker in c.brokers:
                    check_loop(Path(broker.log_path).read_text(errors="replace"), loop)
            for r in range(args.rounds):
                for loop in LOOPS if r % 2 == 0 else LOOPS[::-1]:
                    c = clusters[loop]
                    topic = f"rf3-{r}"
                    create_topic(c, zks[loop], topic, 3)
                    os.sync()
                    before = brokers_cpu(c)
                    mb = produce(c.bootstrap_servers, topic, total, "all")
                    after = brokers_cpu(c)
                    add("produce RF=3 acks=all, MB/s", loop, mb)
                    used = sum(after[i] - before[i] for i in after)
                    add("  3 brokers' CPU s per GB produced", loop, used / (total / 1e9))
                    print(f"  cluster round {r + 1} {loop:8} done", flush=True)
        finally:
            for z in zks.values():
                z.close()
            for c in clusters.values():
                c.stop(kill=True)

    print(f"\n{'measure':38} {'asyncio':>14} {'uvloop':>14} {'uvloop/asyncio':>15}")
    for row, by_loop in rows.items():
        a, u = (statistics.median(by_loop[loop]) for loop in LOOPS)
        print(f"{row:38} {a:14.2f} {u:14.2f} {u / a if a else float('nan'):15.2f}")
        runs = "; ".join(
            f"{loop} " + ", ".join(f"{v:.2f}" if v < 10 else f"{v:.1f}" for v in by_loop[loop])
            for loop in LOOPS
        )
        print(f"{'':38} ({runs})")


if __name__ == "__main__":
    main()
