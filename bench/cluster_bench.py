"""Cluster benchmark: a local ZooKeeper + 3 kt brokers (`LocalCluster`), one run.

Run by hand (not a test):  .venv/bin/python bench/cluster_bench.py [--quick]

Prints, for 1 KiB records, each figure beside a baseline measured in the same run:
- produce MB/s with kcat (librdkafka, C), RF=3 acks=all against RF=1 acks=1 on the
  same 3-broker cluster (rows alternate so drift in the machine's load hits both),
  with the brokers' and kcat's CPU seconds per GB (they share the machine's cores);
- end-to-end latency p50/p99 at a steady 20 MB/s, RF=3 acks=all, against RF=1 acks=1
  at the same rate (timestamps in the payload, producer and consumer in separate
  processes), with the rate each run achieved;
- failover: SIGKILL of the partition leader to the first acknowledged produce after
  it (an idempotent acks=all producer sending every 5 ms), p50/p99 over --kills kills,
  split into ZooKeeper noticing (the broker's ephemeral node gone), the controller
  electing (the partition state's leader changed) and the client's first ack; the
  killed broker is restarted and back in the ISR before the next kill; afterwards
  every acknowledged record is checked to be in the log exactly once;
- follower catch-up: a follower stopped, N MiB written, the follower started; MB/s
  until it is back in the ISR and until its log holds the leader's bytes, against
  kcat consuming the same N MiB from the leader.

It also measures the page cache's write cost (bench/replication_floor.py's probe) at
its start and end: on this project's VMs it swings several-fold minute to minute and
every figure above moves with it.

`--failover-only` runs only the failover part; with `--timeline` the brokers log
their kt.timeline marks (KT_DEBUG_LOGGERS=kt.timeline) and the run ends with the
per-step breakdown of each kill (bench/failover_timeline.py); `--client-debug`
adds librdkafka's debug lines (debug=broker,topic,metadata,msg) for the client's
steps (it slows the client: use it for a few kills, not for the figure).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))

from broker_bench import _LATENCY_READER, RECORD, consume, produce  # noqa: E402
from failover_timeline import (  # noqa: E402
    CLIENT_DEBUG,
    ClientLog,
    add_flags,
    as_kill,
    read_marks,
    report,
    steps_of,
)
from replication_floor import page_cache_probe  # noqa: E402

from kt.tools.local_cluster import LocalCluster  # noqa: E402

SESSION_TIMEOUT_MS = 6000
MIN_ISR = "2"


def pct(samples: list[float], q: float) -> float:
    """The q-quantile as broker_bench takes it (sorted, nearest rank below)."""
    s = sorted(samples)
    return s[max(0, int(len(s) * q + 0.5) - 1)] if s else float("nan")


class Zk:
    """A kazoo client on the cluster's chroot: partition states and live brokers."""

    def __init__(self, connect: str) -> None:
        from kazoo.client import KazooClient

        self.zk = KazooClient(hosts=connect, timeout=10.0)
        self.zk.start(timeout=10.0)

    def state(self, topic: str, partition: int = 0) -> dict[str, Any] | None:
        path = f"/brokers/topics/{topic}/partitions/{partition}/state"
        if not self.zk.exists(path):
            return None
        return json.loads(self.zk.get(path)[0])  # type: ignore[no-any-return]

    def live(self) -> set[int]:
        return {int(c) for c in self.zk.get_children("/brokers/ids")}

    def wait(self, what: str, cond: Any, timeout: float = 120.0, every: float = 0.02) -> float:
        """Poll `cond()` until true; the monotonic time it was seen true."""
        deadline = time.monotonic() + timeout
        while True:
            if cond():
                return time.monotonic()
            if time.monotonic() > deadline:
                raise SystemExit(f"timed out after {timeout:g}s waiting for {what}")
            time.sleep(every)

    def close(self) -> None:
        self.zk.stop()
        self.zk.close()


def create_topic(cluster: LocalCluster, zk: Zk, topic: str, rf: int) -> dict[str, Any]:
    """Create a 1-partition topic and wait until every replica is in the ISR and every
    broker's metadata knows the leader (kcat asks any broker)."""
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
    admin.create_topics(
        [NewTopic(topic, 1, rf, config={"min.insync.replicas": MIN_ISR if rf > 1 else "1"})]
    )[topic].result()

    def full() -> bool:
        st = zk.state(topic)
        return st is not None and st["leader"] >= 0 and len(st["isr"]) == rf

    zk.wait(f"{topic}'s ISR", full)
    state = zk.state(topic)
    assert state is not None
    for b in cluster.brokers:
        one = AdminClient({"bootstrap.servers": b.bootstrap})

        def known(one: Any = one) -> bool:
            md = one.list_topics(topic, timeout=5).topics.get(topic)
            return md is not None and md.error is None and md.partitions[0].leader >= 0

        zk.wait(f"broker {b.broker_id}'s metadata for {topic}", known, every=0.1)
    return state


def cpu_seconds(pid: int | None) -> float:
    """User + system CPU seconds of a running process (0 when unknown)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def brokers_cpu(cluster: LocalCluster) -> dict[int, float]:
    return {b.broker_id: cpu_seconds(b.pid) for b in cluster.brokers}


# --- 1. produce ----------------------------------------------------------------------------


def children_cpu() -> float:
    """User + system CPU seconds of this process's waited-for children (kcat)."""
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def produce_rows(
    cluster: LocalCluster,
    zk: Zk,
    total: int,
    rounds: int,
    cpu: dict[int, list[float]],
    kcat_cpu: dict[int, list[float]],
) -> tuple[float, float]:
    """Alternate RF=1 acks=1 and RF=3 acks=all runs; medians (MB/s). `cpu[rf]` gets
    the brokers' CPU seconds (all three together) per run, `kcat_cpu[rf]` kcat's: on
    a machine the brokers and the load generator share, both come out of one budget."""
    rf1: list[float] = []
    rf3: list[float] = []
    for r in range(rounds):
        for rf, acks, out in ((1, "1", rf1), (3, "all", rf3)):
            topic = f"produce-rf{rf}-{r}"
            st = create_topic(cluster, zk, topic, rf)
            os.sync()
            before, kcat_before = brokers_cpu(cluster), children_cpu()
            started = time.perf_counter()
            mb = produce(cluster.bootstrap_servers, topic, total, acks)
            wall = time.perf_counter() - started
            after, kcat_used = brokers_cpu(cluster), children_cpu() - kcat_before
            used = {i: after[i] - before[i] for i in after}
            cpu[rf].append(sum(used.values()))
            kcat_cpu[rf].append(kcat_used)
            out.append(mb)
            name = f"produce RF={rf} acks={acks} (round {r + 1}, leader {st['leader']})"
            shares = ", ".join(f"{i}: {used[i]:.1f}" for i in sorted(used))
            cores = (sum(used.values()) + kcat_used) / wall
            print(f"  {name:58} {mb:7.0f} MB/s  broker CPU s {shares}; kcat {kcat_used:.1f}; "
                  f"{cores:.1f} cores busy", flush=True)  # fmt: skip
    return statistics.median(rf1), statistics.median(rf3)


# --- 2. latency ----------------------------------------------------------------------------


def latency(
    bootstrap: str, topic: str, acks: str, rate_mb: float, seconds: float, linger_ms: int = 0
) -> tuple[float, float, float, int, int]:
    """p50/p99 ms produce -> consume at a steady rate (broker_bench's method, with
    `acks`), the achieved rate (MB/s), records sent and records received. When the
    producer's queue fills (the broker is behind) it waits: the achieved rate drops. The consumer
    sees a record once the high watermark passes it: with RF=3 that includes the
    followers' fetch."""
    from confluent_kafka import Producer

    # As before each produce row: the page cache's dirty pages from earlier parts
    # (GBs of them after the produce rows) are written back first, so the kernel's
    # writeback of those does not throttle this run's appends.
    os.sync()
    reader = subprocess.Popen(
        [sys.executable, "-c", _LATENCY_READER, bootstrap, topic, "3"],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert reader.stdout is not None
    reader.stdout.readline()
    time.sleep(1.0)
    p = Producer({"bootstrap.servers": bootstrap, "acks": acks, "linger.ms": linger_ms,
                  "enable.idempotence": False})  # fmt: skip
    per_sec = int(rate_mb * 1e6 / RECORD)
    pad = os.urandom(RECORD - 8)
    # The steady state: the producer has its metadata and connection before the clock
    # starts (otherwise the first ~0.2 s of records wait for them and set the p99).
    p.produce(topic, time.time_ns().to_bytes(8, "big") + pad, partition=0)
    p.flush(30)
    start = time.perf_counter()
    sent = 0
    while time.perf_counter() - start < seconds:
        due = int((time.perf_counter() - start) * per_sec)
        while sent < due:
            try:
                p.produce(topic, time.time_ns().to_bytes(8, "big") + pad, partition=0)
            except BufferError:  # librdkafka's queue is full: the broker is behind
                p.poll(0.001)
                continue
            sent += 1
        p.poll(0)
        time.sleep(0.0005)
    elapsed = time.perf_counter() - start
    p.flush(60)
    out, _ = reader.communicate(timeout=120)
    samples = [int(x) / 1e6 for x in out.split()]
    return (
        statistics.median(samples) if samples else float("nan"),
        pct(samples, 0.99),
        sent * RECORD / elapsed / 1e6,
        sent,
        len(samples),
    )


def round_trips(bootstrap: str, topic: str, acks: str, n: int) -> tuple[float, float]:
    """p50/p99 ms of one 1 KiB record produced alone and waited for, `n` times: the
    cost of one produce request, which bounds how many a connection completes per
    second (a broker answers a connection's requests one at a time, in order)."""
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": bootstrap, "acks": acks, "linger.ms": 0,
                  "enable.idempotence": False})  # fmt: skip
    value = os.urandom(RECORD)
    p.produce(topic, value, partition=0)
    p.flush(30)
    out = []
    for _ in range(n):
        start = time.perf_counter()
        p.produce(topic, value, partition=0)
        p.flush(30)
        out.append((time.perf_counter() - start) * 1000)
    return statistics.median(out), pct(out, 0.99)


# --- 3. failover ---------------------------------------------------------------------------


class Events:
    """Kazoo watches on /brokers/ids and the partition state, timestamped on arrival."""

    def __init__(self, zk: Zk, topic: str) -> None:
        self.lock = threading.Lock()
        self.ids: list[tuple[float, set[int]]] = []
        self.leaders: list[tuple[float, int]] = []
        zk.zk.ChildrenWatch("/brokers/ids", self._ids)
        zk.zk.DataWatch(f"/brokers/topics/{topic}/partitions/0/state", self._state)

    def _ids(self, children: list[str]) -> None:
        with self.lock:
            self.ids.append((time.monotonic(), {int(c) for c in children}))

    def _state(self, data: bytes | None, _stat: Any) -> None:
        if data:
            with self.lock:
                self.leaders.append((time.monotonic(), json.loads(data)["leader"]))

    def gone(self, broker: int, after: float) -> float | None:
        with self.lock:
            return next((t for t, ids in self.ids if t >= after and broker not in ids), None)

    def new_leader(self, old: int, after: float) -> float | None:
        with self.lock:
            return next((t for t, ld in self.leaders if t >= after and ld not in (old, -1)), None)


def failover(
    cluster: LocalCluster, zk: Zk, kills: int, client_log: ClientLog | None = None
) -> list[dict[str, Any]]:
    """SIGKILL the leader `kills` times; per kill the seconds to ZooKeeper noticing, to
    the new leader in ZooKeeper, and to the first acknowledged produce (and, for the
    timeline, the monotonic times of the kill and the ack, the killed and the new
    leader). With `client_log` the producer logs librdkafka's debug lines there."""
    from confluent_kafka import Producer

    topic = "failover"
    create_topic(cluster, zk, topic, 3)
    events = Events(zk, topic)
    acked: list[int] = []
    conf = {"bootstrap.servers": cluster.bootstrap_servers, "acks": "all",
            "enable.idempotence": True, "linger.ms": 0,
            "message.timeout.ms": 120000}  # fmt: skip
    if client_log is not None:
        conf.update(debug=CLIENT_DEBUG, logger=client_log.logger)
    p = Producer(conf)
    seq = 0
    results: list[dict[str, Any]] = []

    def send(seq: int, sent_at: float, ok: list[float]) -> None:
        def cb(err: Any, _msg: Any) -> None:
            if err is None:
                acked.append(seq)
                if sent_at >= kill_at:
                    ok.append(time.monotonic())

        p.produce(topic, b"%d" % seq, partition=0, on_delivery=cb)

    for k in range(kills):
        st = zk.state(topic)
        assert st is not None
        leader = st["leader"]
        warm: list[float] = []
        kill_at = float("inf")
        send(seq, 0.0, warm)
        seq += 1
        p.flush(30)
        b = cluster.broker(leader)
        kill_at = time.monotonic()
        os.kill(b.pid, 9)  # type: ignore[arg-type]
        ok: list[float] = []
        while not ok:
            send(seq, time.monotonic(), ok)
            seq += 1
            p.poll(0.005)
            if time.monotonic() - kill_at > 120:
                raise SystemExit(f"kill {k + 1}: no produce acknowledged within 120 s")
        ack_at = ok[0]
        p.flush(60)
        cluster.stop_broker(leader, kill=True)  # reaped
        gone = events.gone(leader, kill_at)
        elected = events.new_leader(leader, kill_at)
        after = zk.state(topic)
        row = {
            "ack": ack_at - kill_at,
            "gone": (gone - kill_at) if gone else float("nan"),
            "elected": (elected - kill_at) if elected else float("nan"),
            "kill_at": kill_at,
            "ack_at": ack_at,
            "killed": leader,
            "leader": after["leader"] if after else -1,
        }
        results.append(row)
        cluster.start_broker(leader)

        def rejoined(leader: int = leader) -> bool:
            s = zk.state(topic)
            return s is not None and leader in s["isr"]

        back = zk.wait(f"broker {leader} back in the ISR", rejoined) - kill_at
        print(f"  kill {k + 1:2} (leader {leader}): zk noticed {row['gone']:5.2f} s, "
              f"elected {row['elected']:5.2f} s, first ack {row['ack']:5.2f} s, "
              f"back in ISR {back:5.1f} s", flush=True)  # fmt: skip
    p.flush(60)
    # every acknowledged record in the log, exactly once
    got = subprocess.run(
        ["kcat", "-C", "-b", cluster.bootstrap_servers, "-t", topic, "-o", "beginning", "-e",
         "-q", "-f", "%s\\n"],
        capture_output=True, text=True, check=True, timeout=120,
    ).stdout.split()  # fmt: skip
    values = [int(v) for v in got]
    lost = set(acked) - set(values)
    dups = len(values) - len(set(values))
    print(f"  {len(acked)} acknowledged records: {len(lost)} lost, {dups} duplicates "
          f"({len(values)} in the log)", flush=True)  # fmt: skip
    return results


# --- 4. catch-up ---------------------------------------------------------------------------


def log_bytes(cluster: LocalCluster, broker: int, topic: str) -> int:
    d = cluster.broker(broker).data_dir / f"{topic}-0"
    return sum(f.stat().st_size for f in d.glob("*.log")) if d.exists() else 0


def catch_up(cluster: LocalCluster, zk: Zk, total: int) -> dict[str, float]:
    topic = "catchup"
    st = create_topic(cluster, zk, topic, 3)
    leader = st["leader"]
    follower = next(r for r in st["isr"] if r != leader)
    cluster.stop_broker(follower)  # SIGTERM: a controlled shutdown

    def out_of_isr() -> bool:
        s = zk.state(topic)
        return s is not None and follower not in s["isr"]

    zk.wait(f"broker {follower} out of the ISR", out_of_isr)
    # the live brokers only: kcat would spend its time reconnecting to the stopped one
    live = ",".join(b.bootstrap for b in cluster.brokers if b.broker_id != follower)
    os.sync()
    written = produce(live, topic, total, "all")
    base = consume(live, topic, total // RECORD)
    target = log_bytes(cluster, leader, topic)
    os.sync()
    t0 = time.monotonic()
    cluster.start_broker(follower)
    ready = time.monotonic()

    def in_isr() -> bool:
        s = zk.state(topic)
        return s is not None and follower in s["isr"]

    same: list[float] = []

    def both() -> bool:
        if not same and log_bytes(cluster, follower, topic) >= target:
            same.append(time.monotonic())
        return bool(same) and in_isr()

    back = zk.wait(f"broker {follower} back in the ISR", both, every=0.01)
    size = total // RECORD * RECORD
    return {  # seconds and MB/s from the start command (the broker's start included)
        "follower": follower,
        "leader": leader,
        "produce": written,
        "consume": base,
        "start": ready - t0,
        "isr": back - t0,
        "leo": same[0] - t0,
        "mb_isr": size / (back - t0) / 1e6,
        "mb_leo": size / (same[0] - t0) / 1e6,
        "bytes": target,
    }


@contextlib.contextmanager
def bench_cluster(prefix: str) -> Iterator[tuple[LocalCluster, Zk]]:
    """ZooKeeper and 3 brokers in a temporary directory (the bench's session timeout),
    with a ZooKeeper client on them; all killed afterwards."""
    with tempfile.TemporaryDirectory(prefix=prefix) as tmp:
        cluster = LocalCluster.create(
            tmp, 3, overrides={"zookeeper.session.timeout.ms": str(SESSION_TIMEOUT_MS)}
        )
        cluster.start()
        zk = Zk(cluster.zookeeper_connect)
        try:
            yield cluster, zk
        finally:
            zk.close()
            cluster.stop(kill=True)


def failover_main(kills: int, timeline: bool, client_debug: bool) -> None:
    """Only the failover part: `kills` leader kills, the figures, and with `timeline`
    the per-step breakdown from the brokers' marks."""
    if timeline:
        os.environ["KT_DEBUG_LOGGERS"] = "kt.timeline"  # inherited by the brokers
    load0 = os.getloadavg()
    print(f"kt failover bench: 3 brokers, zookeeper.session.timeout.ms={SESSION_TIMEOUT_MS}, "
          f"{kills} leader kills; load average {load0[0]:.1f} at the start",
          flush=True)  # fmt: skip
    client = ClientLog() if client_debug else None
    with bench_cluster("kt-failover-bench-") as (cluster, zk):
        fo = failover(cluster, zk, kills, client)
        marks = read_marks({b.broker_id: b.log_path for b in cluster.brokers})
        if client is not None:
            keep = Path(tempfile.gettempdir()) / "kt-failover-client-debug.log"
            keep.write_text("".join(f"{t:.6f} {s}\n" for t, s in client.lines))
            print(f"  librdkafka debug lines: {keep}")
    load1 = os.getloadavg()
    acks = [r["ack"] for r in fo]
    gone = [r["gone"] for r in fo]
    kt_share = [r["ack"] - r["gone"] for r in fo]
    budget = SESSION_TIMEOUT_MS / 1000 + 2
    print(f"failover p50 / p99 ({len(acks)} kills): {statistics.median(acks):.2f} / "
          f"{pct(acks, 0.99):.2f} s (target p99 < {budget:.1f} s)")  # fmt: skip
    print(f"  ZooKeeper noticed: {statistics.median(gone):.2f} / {pct(gone, 0.99):.2f} s; "
          f"first ack after that: {statistics.median(kt_share):.2f} / "
          f"{pct(kt_share, 0.99):.2f} s")  # fmt: skip
    if timeline:
        ids = [b.broker_id for b in cluster.brokers]
        rows = []
        for r in fo:
            steps = {"ZooKeeper: dead broker's node gone": r["gone"]}
            steps.update(steps_of(marks, as_kill(r, ids), client))
            add_flags(steps, r["gone"])
            rows.append(steps)
        anchor = "controller: new leader written to ZK"
        print("per step (first occurrence after the kill):")
        for line in report(rows, anchor):
            print(line)
    print(f"(load average {load0[0]:.1f} -> {load1[0]:.1f} on {os.cpu_count()} cores)")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--mib", type=int, default=128, help="MiB per produce run (default 128)")
    ap.add_argument("--rounds", type=int, default=3, help="produce rounds per row (default 3)")
    ap.add_argument("--seconds", type=float, default=15.0, help="latency run length (default 15)")
    ap.add_argument("--rate", type=float, default=20.0, help="latency load, MB/s (default 20)")
    ap.add_argument("--round-trips", type=int, default=300, help="lone produces (default 300)")
    ap.add_argument("--kills", type=int, default=20, help="leader kills (default 20)")
    ap.add_argument("--catchup-mib", type=int, default=128, help="MiB a follower misses (128)")
    ap.add_argument("--quick", action="store_true", help="small sizes for a smoke run")
    ap.add_argument("--failover-only", action="store_true", help="run only the failover part")
    ap.add_argument(
        "--timeline",
        action="store_true",
        help="brokers log kt.timeline marks; print the per-step breakdown",
    )
    ap.add_argument(
        "--client-debug",
        action="store_true",
        help="with --timeline: librdkafka debug lines for the client's steps",
    )
    args = ap.parse_args()
    if args.failover_only:
        failover_main(args.kills, args.timeline, args.client_debug)
        return
    if args.quick:
        args.mib, args.rounds, args.seconds, args.kills, args.catchup_mib = 8, 1, 3.0, 2, 8
        args.round_trips = 20
    load0 = os.getloadavg()
    t_start = time.monotonic()
    print(f"kt cluster bench: 3 brokers, zookeeper.session.timeout.ms={SESSION_TIMEOUT_MS}, "
          f"min.insync.replicas={MIN_ISR} on RF=3 topics; {os.cpu_count()} cores, "
          f"load average {load0[0]:.1f} at the start", flush=True)  # fmt: skip
    with bench_cluster("kt-cluster-bench-") as (cluster, zk):
        probe0 = page_cache_probe(cluster.directory)
        print(f"page-cache writes: {probe0[0]:.0f} MB/s, {probe0[1]:.2f} CPU s per GB",
              flush=True)  # fmt: skip
        print("1. produce (kcat, 1 KiB records)", flush=True)
        cpu: dict[int, list[float]] = {1: [], 3: []}
        kcat_cpu: dict[int, list[float]] = {1: [], 3: []}
        rf1, rf3 = produce_rows(cluster, zk, args.mib << 20, args.rounds, cpu, kcat_cpu)
        print("2. end-to-end latency", flush=True)
        create_topic(cluster, zk, "lat-rf1", 1)
        create_topic(cluster, zk, "lat-rf3", 3)
        lat1 = latency(cluster.bootstrap_servers, "lat-rf1", "1", args.rate, args.seconds)
        lat3 = latency(cluster.bootstrap_servers, "lat-rf3", "all", args.rate, args.seconds)
        # the same at a quarter of the load: is the latency the load's or the path's?
        create_topic(cluster, zk, "lat-rf3-low", 3)
        low = latency(cluster.bootstrap_servers, "lat-rf3-low", "all", args.rate / 4, args.seconds)
        # and with linger.ms=5, as a producer tuned for throughput runs
        create_topic(cluster, zk, "lat-rf3-linger", 3)
        lingered = latency(
            cluster.bootstrap_servers, "lat-rf3-linger", "all", args.rate, args.seconds, 5
        )
        rt1 = round_trips(cluster.bootstrap_servers, "lat-rf1", "1", args.round_trips)
        rt3 = round_trips(cluster.bootstrap_servers, "lat-rf3", "all", args.round_trips)
        for name, lat in (("RF=1 acks=1", lat1), ("RF=3 acks=all", lat3),
                          ("RF=3 acks=all, a quarter of the rate", low),
                          ("RF=3 acks=all, linger.ms=5", lingered)):  # fmt: skip
            print(f"  {name}: p50 {lat[0]:.1f} ms, p99 {lat[1]:.1f} ms at {lat[2]:.1f} MB/s "
                  f"({lat[3]} sent, {lat[4]} consumed)", flush=True)  # fmt: skip
        print(f"  one record alone, p50 / p99: RF=1 acks=1 {rt1[0]:.1f} / {rt1[1]:.1f} ms, "
              f"RF=3 acks=all {rt3[0]:.1f} / {rt3[1]:.1f} ms", flush=True)  # fmt: skip
        print(f"3. failover ({args.kills} leader kills)", flush=True)
        fo = failover(cluster, zk, args.kills)
        print(f"4. follower catch-up ({args.catchup_mib} MiB)", flush=True)
        cu = catch_up(cluster, zk, args.catchup_mib << 20)
        probe1 = page_cache_probe(cluster.directory)
    load1 = os.getloadavg()
    acks = [r["ack"] for r in fo]
    gone = [r["gone"] for r in fo]
    elected = [r["elected"] for r in fo]
    budget = SESSION_TIMEOUT_MS / 1000 + 2

    def row(measure: str, figure: str, baseline: str = "", note: str = "") -> None:
        print(f"{measure:46} {figure:>24} {baseline:>26}  {note}")

    print()
    row("measure", "figure", "baseline (same run)")
    row("produce, kcat, RF=3 acks=all (median)", f"{rf3:.0f} MB/s",
        f"RF=1 acks=1: {rf1:.0f} MB/s", f"ratio {rf3 / rf1:.2f} (target >= 0.5)")  # fmt: skip
    per_gb = {rf: statistics.median(v) / ((args.mib << 20) / 1e9) for rf, v in cpu.items()}
    row("  brokers' CPU seconds per GB produced", f"{per_gb[3]:.1f} s",
        f"RF=1 acks=1: {per_gb[1]:.1f} s", f"ratio {per_gb[3] / per_gb[1]:.2f}")  # fmt: skip
    kcat_gb = {rf: statistics.median(v) / ((args.mib << 20) / 1e9) for rf, v in kcat_cpu.items()}
    row("  kcat's CPU seconds per GB produced", f"{kcat_gb[3]:.1f} s",
        f"RF=1 acks=1: {kcat_gb[1]:.1f} s", "the load generator shares the cores")  # fmt: skip
    row("end-to-end p50 / p99, RF=3 acks=all", f"{lat3[0]:.1f} / {lat3[1]:.1f} ms",
        f"RF=1 acks=1: {lat1[0]:.1f} / {lat1[1]:.1f} ms",
        f"at {lat3[2]:.1f} vs {lat1[2]:.1f} MB/s (target p99 <= 20 ms)")  # fmt: skip
    row("  the same at a quarter of the rate", f"{low[0]:.1f} / {low[1]:.1f} ms", "",
        f"at {low[2]:.1f} MB/s")  # fmt: skip
    row("  the same with linger.ms=5", f"{lingered[0]:.1f} / {lingered[1]:.1f} ms", "",
        f"at {lingered[2]:.1f} MB/s")  # fmt: skip
    row("one record produced alone, p50 / p99", f"{rt3[0]:.1f} / {rt3[1]:.1f} ms",
        f"RF=1 acks=1: {rt1[0]:.1f} / {rt1[1]:.1f} ms", "RF=3 acks=all")  # fmt: skip
    row(f"failover p50 / p99 ({len(acks)} kills)",
        f"{statistics.median(acks):.2f} / {pct(acks, 0.99):.2f} s",
        f"session timeout: {SESSION_TIMEOUT_MS / 1000:.1f} s",
        f"target p99 < {budget:.1f} s")  # fmt: skip
    row("  ZooKeeper noticed the death", f"{statistics.median(gone):.2f} / {pct(gone, 0.99):.2f} s")
    row("  new leader written to ZooKeeper",
        f"{statistics.median(elected):.2f} / {pct(elected, 0.99):.2f} s")  # fmt: skip
    kt_share = [r["ack"] - r["gone"] for r in fo]
    row("  first ack after ZooKeeper noticed", f"{statistics.median(kt_share):.2f} / "
        f"{pct(kt_share, 0.99):.2f} s", "", "election, LeaderAndIsr, client retry")  # fmt: skip
    row(f"follower catch-up, {args.catchup_mib} MiB, to ISR", f"{cu['mb_isr']:.0f} MB/s",
        f"kcat consume: {cu['consume']:.0f} MB/s",
        f"{cu['isr']:.1f} s from start (to ready: {cu['start']:.1f} s)")  # fmt: skip
    row("  to the leader's log bytes", f"{cu['mb_leo']:.0f} MB/s",
        f"produce: {cu['produce']:.0f} MB/s")  # fmt: skip
    row("page-cache writes, 256 MiB to a new file",
        f"{probe0[0]:.0f} / {probe1[0]:.0f} MB/s", "at the start / the end",
        f"{probe0[1]:.2f} / {probe1[1]:.2f} CPU s per GB (the machine's state)")  # fmt: skip
    took = time.monotonic() - t_start
    print(f"(load average {load0[0]:.1f} -> {load1[0]:.1f} on {os.cpu_count()} cores; "
          f"run took {took:.0f} s; python {sys.version.split()[0]})")  # fmt: skip


if __name__ == "__main__":
    main()
