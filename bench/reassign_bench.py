"""Reassignment benchmark: a local ZooKeeper + 3 kt brokers (`LocalCluster`), one run.

Run by hand (not a test):  .venv/bin/python bench/reassign_bench.py [--quick]

Prints, for 1 KiB records, each figure beside a baseline measured in the same run on
the same cluster:
- the unthrottled copy rate of `kt reassign-partitions --execute` (N MiB in P
  partitions on broker 1 moving to broker 2: time from --execute until the
  controller lists no reassignment, i.e. the new replicas are in the ISR and the old
  ones deleted) against kcat (librdkafka) producing the same N MiB to the same
  cluster (RF=1 acks=1, the cluster's raw produce rate) and reading them back;
- the time from --execute to completion for the N MiB (1 GiB by default).

Rounds alternate produce and move (broker 1 -> 2, then the next topic) so drift in
the machine's load hits both; medians are reported. The machine is shared: the load
average is printed at the start and the end.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))

from broker_bench import RECORD, consume, produce  # noqa: E402

from kt.tools.local_cluster import LocalCluster  # noqa: E402


def kt(*args: str) -> tuple[int, str, str]:
    """A kt command in-process; (exit code, stdout, stderr)."""
    from click.testing import CliRunner

    from kt.cli import cli

    r = CliRunner().invoke(cli, list(args))
    return r.exit_code, r.stdout, r.stderr


def wait(what: str, cond: object, timeout: float = 600.0, every: float = 0.05) -> float:
    """Poll `cond()` until true; the monotonic time it was seen true."""
    deadline = time.monotonic() + timeout
    while True:
        if cond():  # type: ignore[operator]
            return time.monotonic()
        if time.monotonic() > deadline:
            raise SystemExit(f"timed out after {timeout:g}s waiting for {what}")
        time.sleep(every)


def replica_bytes(cluster: LocalCluster, broker: int, topic: str, partitions: int) -> int:
    """The bytes of the topic's segment files in a broker's log dir."""
    d = cluster.broker(broker).data_dir
    return sum(f.stat().st_size for p in range(partitions)
               for f in (d / f"{topic}-{p}").glob("*.log"))  # fmt: skip


def one_round(cluster: LocalCluster, r: int, total: int, partitions: int) -> dict[str, float]:
    """Produce `total` bytes to a fresh topic on broker 1, read them back, then move
    every partition to broker 2 (unthrottled); the figures."""
    boot = cluster.bootstrap_servers
    topic = f"move-{r}"
    assignment = ",".join(["1"] * partitions)
    code, _, err = kt("topic", "create", "-b", boot, "--topic", topic,
                      "--replica-assignment", assignment)  # fmt: skip
    assert code == 0, err

    def known() -> bool:
        code, out, _ = kt("topic", "describe", "-b", boot, "--topic", topic)
        return code == 0 and out.count("Leader: 1") == partitions

    wait(f"{topic}'s leaders", known, every=0.2)
    os.sync()
    produced = produce(boot, topic, total, "1")
    consumed = consume(boot, topic, total // RECORD)
    size = replica_bytes(cluster, 1, topic, partitions)
    plan = Path(cluster.directory) / f"{topic}.json"
    plan.write_text(
        json.dumps(
            {
                "version": 1,
                "partitions": [
                    {"topic": topic, "partition": p, "replicas": [2]} for p in range(partitions)
                ],
            }
        )
    )
    os.sync()

    def listed_none() -> bool:
        code, out, _ = kt("reassign-partitions", "--list", "-b", boot)
        return code == 0 and out == "No partition reassignments found.\n"

    t0 = time.monotonic()
    code, _, err = kt("reassign-partitions", "--execute", "-b", boot,
                      "--reassignment-json-file", str(plan))  # fmt: skip
    assert code == 0, err
    done = wait("the reassignment", listed_none, every=0.05)
    took = done - t0
    assert replica_bytes(cluster, 2, topic, partitions) == size, "the copy is not whole"
    # free the disk for the next round
    kt("topic", "delete", "-b", boot, "--topic", topic)
    return {"produce": produced, "consume": consumed, "copy": size / took / 1e6,
            "took": took, "bytes": size}  # fmt: skip


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--mib", type=int, default=1024, help="MiB moved per round (default 1024)")
    ap.add_argument("--partitions", type=int, default=4, help="partitions moved (default 4)")
    ap.add_argument("--rounds", type=int, default=3, help="rounds (default 3)")
    ap.add_argument("--quick", action="store_true", help="small sizes for a smoke run")
    args = ap.parse_args()
    if args.quick:
        args.mib, args.rounds = 64, 1
    load0 = os.getloadavg()
    t_start = time.monotonic()
    print(f"kt reassignment bench: 3 brokers, {args.mib} MiB in {args.partitions} partitions "
          f"moved broker 1 -> 2 unthrottled, {args.rounds} rounds; {os.cpu_count()} cores, "
          f"load average {load0[0]:.1f} at the start", flush=True)  # fmt: skip
    rows = []
    with tempfile.TemporaryDirectory(prefix="kt-reassign-bench-") as tmp:
        overrides = {"zookeeper.session.timeout.ms": "6000", "file.delete.delay.ms": "1000"}
        cluster = LocalCluster.create(tmp, 3, overrides=overrides)
        cluster.start()
        try:
            for r in range(args.rounds):
                row = one_round(cluster, r, args.mib << 20, args.partitions)
                rows.append(row)
                print(f"  round {r + 1}: produce {row['produce']:.0f} MB/s, consume "
                      f"{row['consume']:.0f} MB/s, copy {row['copy']:.0f} MB/s "
                      f"({row['bytes'] / 1e6:.0f} MB in {row['took']:.1f} s), load average "
                      f"{os.getloadavg()[0]:.1f}", flush=True)  # fmt: skip
        finally:
            cluster.stop(kill=True)
    load1 = os.getloadavg()

    def med(key: str) -> float:
        return statistics.median(r[key] for r in rows)

    def line(measure: str, figure: str, baseline: str = "", note: str = "") -> None:
        print(f"{measure:44} {figure:>14} {baseline:>30}  {note}")

    print()
    line("measure (median)", "figure", "baseline (same run)")
    line("reassignment copy rate, unthrottled", f"{med('copy'):.0f} MB/s",
         f"kcat produce RF=1 acks=1: {med('produce'):.0f} MB/s",
         f"ratio {med('copy') / med('produce'):.2f}")  # fmt: skip
    line("", "", f"kcat consume: {med('consume'):.0f} MB/s",
         f"ratio {med('copy') / med('consume'):.2f}")  # fmt: skip
    line(f"--execute to completion, {args.mib} MiB", f"{med('took'):.1f} s",
         f"{args.mib} MiB at the produce rate: "
         f"{med('bytes') / med('produce') / 1e6:.1f} s")  # fmt: skip
    took = time.monotonic() - t_start
    print(f"(load average {load0[0]:.1f} -> {load1[0]:.1f} on {os.cpu_count()} cores; "
          f"run took {took:.0f} s; python {sys.version.split()[0]})")  # fmt: skip


if __name__ == "__main__":
    main()
