"""Spark benchmark: `kt-segments` throughput beside single-process dump, 1 vs 2 cores.

Run by hand (not a test):  .venv/bin/python bench/spark_bench.py [--size-mib 2048]

Data: two partitions of 1 KiB records in 16-record uncompressed v2 batches, half the
size each, with the indexes Kafka's recovery writes (cached under bench/out/spark-*;
a cached 1 GiB `storage_bench.py` segment is hard-linked instead when present).

Measures, each in its own process:
- `kt dump-log-segments --deep-iteration --json` over both segments → records/s
- `kt-segments` read to Spark's noop sink on local[1] and local[2] → records/s
  (the action alone, and with the session start), and the 1 → 2 core scaling.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from kt.storage.index_check import apply_rebuild, plan_rebuild  # noqa: E402
from kt.storage.record_batch import RecordSpec, build_batch  # noqa: E402

KT = str(Path(sys.executable).with_name("kt"))
RECORD_SIZE = 1024
PER_BATCH = 16


def generate(log: Path, size: int) -> None:
    """A segment of about `size` bytes, with its indexes."""
    log.parent.mkdir(parents=True, exist_ok=True)
    value = os.urandom(RECORD_SIZE)
    offset, written, ts = 0, 0, 1_700_000_000_000
    with open(log, "wb") as f:
        while written < size:
            specs = [
                RecordSpec(b"key-%08d" % (offset + i), value, timestamp=ts + offset + i)
                for i in range(PER_BATCH)
            ]
            data = build_batch(specs, base_offset=offset, partition_leader_epoch=0)
            f.write(data)
            written += len(data)
            offset += PER_BATCH
    apply_rebuild(plan_rebuild(log))


def prepare(size_mib: int) -> Path:
    root = ROOT / "bench" / "out" / f"spark-{size_mib}m"
    half = size_mib * 1024 * 1024 // 2
    cached = ROOT / "bench" / "out" / f"bench-{size_mib // 2}m-0"
    for p in range(2):
        d = root / f"bench-{p}"
        log = d / "00000000000000000000.log"
        if log.exists():
            continue
        if (cached / log.name).exists():
            d.mkdir(parents=True, exist_ok=True)
            for name in (log.name, "00000000000000000000.index", "00000000000000000000.timeindex"):
                if (cached / name).exists():
                    os.link(cached / name, d / name)
        else:
            print(f"generating {log} ({half >> 20} MiB)...", file=sys.stderr)
            generate(log, half)
    return root


def count_records(root: Path) -> int:
    from kt.storage.file_records import FileRecords, LogBatch

    n = 0
    for log in sorted(root.glob("*/*.log")):
        with open(log, "rb") as f:
            for h in FileRecords(f).headers():
                if not isinstance(h, LogBatch) and getattr(h, "header", None) is not None:
                    n += h.header.record_count
    return n


SPARK_RUN = """
import json, sys, time
t0 = time.time()
from kt.spark.jobs import session
spark = session(sys.argv[1], {"spark.sql.shuffle.partitions": "2"}, progress=False)
t1 = time.time()
df = spark.read.format("kt-segments").options(maxBytesPerPartition=sys.argv[3]).load(sys.argv[2])
df.write.format("noop").mode("overwrite").save()
t2 = time.time()
print(json.dumps({"session": t1 - t0, "action": t2 - t1}))
spark.stop()
"""


def run_spark(master: str, root: Path, split: int) -> dict[str, float]:
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable}
    out = subprocess.run(
        [sys.executable, "-c", SPARK_RUN, master, str(root), str(split)],
        capture_output=True,
        text=True,
        env=env,
        check=True,
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--size-mib", type=int, default=2048)
    ap.add_argument("--split-mib", type=int, default=128)
    args = ap.parse_args()
    root = prepare(args.size_mib)
    records = count_records(root)
    size = sum(p.stat().st_size for p in root.glob("*/*.log"))
    print(f"data: {size / 2**30:.2f} GiB, {records} records, 2 partitions")
    for log in root.glob("*/*.log"):  # warm the page cache for everyone alike
        with open(log, "rb") as f:
            while f.read(1 << 24):
                pass
    logs = ",".join(str(p) for p in sorted(root.glob("*/*.log")))
    t = time.time()
    with open(os.devnull, "w") as devnull:
        subprocess.run(
            [KT, "dump-log-segments", "--deep-iteration", "--json", "--files", logs],
            stdout=devnull,
            check=False,
        )
    dump = time.time() - t
    print(
        f"kt dump-log-segments --deep-iteration --json: {dump:.1f} s, {records / dump:,.0f} rec/s"
    )
    results = {}
    for master in ("local[1]", "local[2]"):
        r = run_spark(master, root, args.split_mib * 1024 * 1024)
        results[master] = r
        rate = records / r["action"]
        total = r["session"] + r["action"]
        print(
            f"kt-segments {master}: action {r['action']:.1f} s ({rate:,.0f} rec/s), "
            f"with session start {total:.1f} s"
        )
    scale = results["local[1]"]["action"] / results["local[2]"]["action"]
    print(f"scaling local[1] -> local[2]: {scale:.2f}x")


if __name__ == "__main__":
    main()
