"""A/B broker benchmark: the broker at two git revisions, measured in the same run.

Run by hand (not a test):
    .venv/bin/python bench/ab_bench.py --before 079b1ec --after HEAD [--rounds 3] [--mib 64]

Each revision is checked out (`git worktree add --detach`) into a temporary
directory and its brokers run with that directory first on PYTHONPATH; the client
side (kcat, librdkafka in C) is the same for both, and both brokers run on
asyncio's own event loop. Rounds alternate the order
(A B, B A, A B, ...) so that drift in the machine's load, which other people share,
hits both sides alike. Per round and revision, for 1 KiB records:

- produce: kcat producing --mib MiB to a 1-partition topic of a single broker,
  acks=1 (MB/s);
- consume: kcat reading them back to /dev/null (MB/s);
- RF=3 acks=all: a local ZooKeeper and 3 brokers (`LocalCluster`), kcat producing
  --mib MiB to a 1-partition topic with replication factor 3, acks=all (MB/s).

It prints every round's figures, then per measure and revision the median and the
spread (min..max), the after/before ratio of the medians, and the machine's load
average at the start and the end. The worktrees are removed at the end.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))
sys.path.insert(0, str(ROOT / "tests"))

from broker_bench import RECORD, consume, produce  # noqa: E402
from broker_harness import BrokerProcess, free_port  # noqa: E402

from kt.tools.local_cluster import LocalCluster  # noqa: E402

MEASURES = ("produce acks=1", "consume", "RF=3 acks=all")


@contextlib.contextmanager
def checkout(rev: str, parent: Path) -> Iterator[tuple[Path, str]]:
    """A detached worktree of `rev` under `parent`: (its directory, its short hash)."""
    sha = subprocess.run(
        ["git", "-C", str(ROOT), "rev-parse", "--short", rev],
        check=True, capture_output=True, text=True,
    ).stdout.strip()  # fmt: skip
    where = parent / sha
    subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "--detach", str(where), sha],
                   check=True, capture_output=True)  # fmt: skip
    try:
        yield where, sha
    finally:
        subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(where)],
                       check=False, capture_output=True)  # fmt: skip


@contextlib.contextmanager
def running(code: Path) -> Iterator[None]:
    """Children started meanwhile import kt from `code` (checked, not assumed)."""
    old = os.environ.get("PYTHONPATH")
    # Both sides on asyncio's own loop (today's default): revisions before dbb4f11
    # run on uvloop whenever it imports, and fail there; a `uvloop` that does not
    # import makes them take asyncio's.
    shim = code.parent / "no-uvloop"
    shim.mkdir(exist_ok=True)
    (shim / "uvloop.py").write_text("raise ImportError('uvloop disabled by ab_bench')\n")
    os.environ["PYTHONPATH"] = f"{code}{os.pathsep}{shim}"
    os.environ.pop("KT_EVENT_LOOP", None)
    try:
        probe = [sys.executable, "-c", "import kt; print(kt.__file__)"]
        # From a neutral directory: `python -c` and `-m` put the current one first.
        where = subprocess.run(probe, check=True, capture_output=True, text=True,
                               cwd=code.parent).stdout.strip()  # fmt: skip
        if not where.startswith(str(code)):
            raise SystemExit(f"brokers would import kt from {where}, not from {code}")
        yield
    finally:
        if old is None:
            os.environ.pop("PYTHONPATH", None)
        else:
            os.environ["PYTHONPATH"] = old


def wait(what: str, check: object, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():  # type: ignore[operator]
        if time.monotonic() > deadline:
            raise SystemExit(f"timed out waiting for {what}")
        time.sleep(0.1)


def create_topic(bootstrap: str, topic: str, rf: int, brokers: list[str]) -> None:
    """A 1-partition topic; returns once every replica is in the ISR as every
    broker's metadata says (kcat may ask any of them)."""
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, 1, rf)])[topic].result()
    for b in brokers:
        one = AdminClient({"bootstrap.servers": b})

        def ready(one: AdminClient = one) -> bool:
            md = one.list_topics(topic, timeout=5).topics.get(topic)
            return (
                md is not None
                and md.error is None
                and md.partitions[0].leader >= 0
                and len(md.partitions[0].isrs) == rf
            )

        wait(f"{topic} on {b}", ready)


def single_broker(total: int, tmp: Path) -> tuple[float, float]:
    """(produce acks=1 MB/s, consume MB/s) on a fresh single broker."""
    b = BrokerProcess(tmp / "single", free_port(),
                      {"log.segment.bytes": str(256 << 20)}).start(timeout=60)  # fmt: skip
    try:
        create_topic(b.bootstrap, "ab", 1, [b.bootstrap])
        os.sync()
        mb_produce = produce(b.bootstrap, "ab", total, "1")
        mb_consume = consume(b.bootstrap, "ab", total // RECORD)
        return mb_produce, mb_consume
    finally:
        b.stop()


def replicated(total: int, tmp: Path) -> float:
    """RF=3 acks=all produce MB/s on a fresh 3-broker cluster."""
    cluster = LocalCluster.create(tmp / "cluster", 3,
                                  overrides={"log.segment.bytes": str(256 << 20)})  # fmt: skip
    cluster.start(timeout=120, register_timeout=60)
    try:
        create_topic(cluster.bootstrap_servers, "ab3", 3,
                     [b.bootstrap for b in cluster.brokers])  # fmt: skip
        os.sync()
        return produce(cluster.bootstrap_servers, "ab3", total, "all")
    finally:
        cluster.stop(kill=True)


def one_side(code: Path, total: int) -> dict[str, float]:
    with running(code), tempfile.TemporaryDirectory(prefix="kt-ab-") as t:
        tmp = Path(t)
        p, c = single_broker(total, tmp)
        return {"produce acks=1": p, "consume": c, "RF=3 acks=all": replicated(total, tmp)}


def load() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--before", default="079b1ec", help="revision A (default 079b1ec)")
    ap.add_argument("--after", default="HEAD", help="revision B (default HEAD)")
    ap.add_argument("--rounds", type=int, default=3, help="rounds of A and B (default 3)")
    ap.add_argument("--mib", type=int, default=64, help="MiB per measure (default 64)")
    args = ap.parse_args()
    total = args.mib << 20
    print(f"start {time.strftime('%Y-%m-%d %H:%M:%S UTC', time.gmtime())}, "
          f"load average {load()}, {os.cpu_count()} cores", flush=True)  # fmt: skip
    with tempfile.TemporaryDirectory(prefix="kt-ab-src-") as src, contextlib.ExitStack() as stack:
        a_dir, a = stack.enter_context(checkout(args.before, Path(src)))
        b_dir, b = stack.enter_context(checkout(args.after, Path(src)))
        sides = {a: a_dir, b: b_dir}
        # The brokers inherit the working directory: not this checkout's.
        os.chdir(src)
        results: dict[str, dict[str, list[float]]] = {s: {m: [] for m in MEASURES} for s in sides}
        for r in range(args.rounds):
            order = [a, b] if r % 2 == 0 else [b, a]
            for side in order:
                got = one_side(sides[side], total)
                for m, v in got.items():
                    results[side][m].append(v)
                figures = "  ".join(f"{m} {v:6.1f}" for m, v in got.items())
                print(f"round {r + 1} {side}: {figures} MB/s (load {load()})", flush=True)
    print(f"end {time.strftime('%Y-%m-%d %H:%M:%S UTC', time.gmtime())}, load average {load()}")
    print(f"{'measure':18} {'rev':9} {'median':>8} {'min..max':>16}")
    for m in MEASURES:
        for side in (a, b):
            v = results[side][m]
            print(f"{m:18} {side:9} {statistics.median(v):8.1f} "
                  f"{min(v):7.1f}..{max(v):<7.1f}")  # fmt: skip
        ratio = statistics.median(results[b][m]) / statistics.median(results[a][m])
        print(f"{m:18} {'B/A':9} {ratio:8.2f}")


if __name__ == "__main__":
    main()
