"""Storage-core benchmark: dumping, deep iteration and index rebuild on one big segment.

Run by hand (not a test):  .venv/bin/python bench/storage_bench.py [--size-mib 1024]

It generates a segment of 1 KiB records in ~16 KiB uncompressed batches (cached
under bench/out/), then measures, each as a separate process so peak RSS is the
command's own:

- shallow dump (batch lines only)                      → MB/s
- deep iteration, text and --json, to /dev/null        → records/s
- kt index rebuild                                     → seconds
- peak RSS of each                                     → MB

and, as the baseline in the same run, kafka-python's record reader decoding the
same file batch by batch, beside kt's decoder doing the same work in-process.
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from kt.storage.file_records import FileRecords, LogBatch  # noqa: E402
from kt.storage.record_batch import RecordSpec, build_batch  # noqa: E402

KT = str(Path(sys.executable).with_name("kt"))
RECORD_SIZE = 1024
RECORDS_PER_BATCH = 16


def generate(path: Path, size: int, text: bool = False) -> tuple[int, int]:
    """Write a segment of about `size` bytes; return (batches, records). Values are
    random bytes, or random printable ASCII with `text`."""
    value = os.urandom(RECORD_SIZE)
    if text:
        alphabet = b"abcdefghijklmnopqrstuvwxyz0123456789"
        value = bytes(alphabet[b % len(alphabet)] for b in value)
    batches = records = 0
    offset = 0
    ts = 1_700_000_000_000
    with open(path, "wb") as f:
        written = 0
        while written < size:
            specs = [
                RecordSpec(b"key-%08d" % (offset + i), value, timestamp=ts + offset + i)
                for i in range(RECORDS_PER_BATCH)
            ]
            data = build_batch(specs, base_offset=offset, partition_leader_epoch=0)
            f.write(data)
            written += len(data)
            offset += RECORDS_PER_BATCH
            batches += 1
            records += RECORDS_PER_BATCH
    return batches, records


def run(cmd: list[str]) -> tuple[float, float]:
    """Run a command with stdout to /dev/null; return (seconds, peak RSS MiB)."""
    # wait4 gives the child's own rusage, so earlier children do not skew max RSS.
    start = time.perf_counter()
    with open(os.devnull, "wb") as devnull:
        proc = subprocess.Popen(cmd, stdout=devnull, stderr=subprocess.PIPE)
        _, status, usage = os.wait4(proc.pid, 0)
    elapsed = time.perf_counter() - start
    code = os.waitstatus_to_exitcode(status)
    if code not in (0,):
        err = proc.stderr.read().decode() if proc.stderr else ""
        raise SystemExit(f"{' '.join(cmd)} exited {code}: {err[:500]}")
    return elapsed, usage.ru_maxrss / 1024


def kafka_python_decode(path: Path) -> tuple[float, int]:
    """kafka-python's DefaultRecordBatch decoding every record of the file."""
    from kafka.record.default_records import DefaultRecordBatch

    n = 0
    start = time.perf_counter()
    with open(path, "rb") as f:
        fr = FileRecords(f)
        for item in fr.batches(0):
            assert isinstance(item, LogBatch)
            for rec in DefaultRecordBatch(bytes(item.data)):
                n += 1
                _ = rec.value
    return time.perf_counter() - start, n


def kt_decode(path: Path) -> tuple[float, int]:
    """kt's decoder doing the same work in-process."""
    n = 0
    start = time.perf_counter()
    with open(path, "rb") as f:
        fr = FileRecords(f)
        for item in fr.batches(0):
            assert isinstance(item, LogBatch)
            for rec in item.records():
                n += 1
                _ = rec.value
    return time.perf_counter() - start, n


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--size-mib", type=int, default=1024, help="segment size (default 1024)")
    ap.add_argument("--out", type=Path, default=ROOT / "bench" / "out")
    args = ap.parse_args()
    part = args.out / f"bench-{args.size_mib}m-0"
    seg = part / "00000000000000000000.log"
    size = args.size_mib * 1024 * 1024
    if not seg.exists() or seg.stat().st_size < size:
        shutil.rmtree(part, ignore_errors=True)
        part.mkdir(parents=True)
        t = time.perf_counter()
        b, r = generate(seg, size)
        print(f"generated {seg} ({b} batches, {r} records) in {time.perf_counter() - t:.1f}s")
    text_part = args.out / f"bench-{args.size_mib}m-text-0"
    text_seg = text_part / "00000000000000000000.log"
    if not text_seg.exists() or text_seg.stat().st_size < size:
        shutil.rmtree(text_part, ignore_errors=True)
        text_part.mkdir(parents=True)
        generate(text_seg, size, text=True)
    actual = seg.stat().st_size
    mb = actual / 1e6
    # Count records once (and warm the page cache) with kt's decoder.
    _, records = kt_decode(seg)
    print(f"segment: {actual / 2**20:.0f} MiB, {records} records of {RECORD_SIZE} B")
    print(f"{'measure':44} {'figure':>16} {'peak RSS':>10}")

    def row(name: str, figure: str, rss: float | None = None) -> None:
        rss_s = f"{rss:.0f} MB" if rss is not None else ""
        print(f"{name:44} {figure:>16} {rss_s:>10}")

    t, rss = run([KT, "dump-log-segments", "--files", str(seg)])
    row("kt dump-log-segments (shallow)", f"{mb / t:.0f} MB/s", rss)
    t, rss = run([KT, "dump-log-segments", "--deep-iteration", "--files", str(seg)])
    row("kt dump-log-segments --deep-iteration", f"{records / t / 1e3:.0f}k rec/s", rss)
    t, rss = run([KT, "dump-log-segments", "--deep-iteration", "--json", "--files", str(seg)])
    row("... --deep-iteration --json (binary values: hex)", f"{records / t / 1e3:.0f}k rec/s", rss)
    t, rss = run([KT, "dump-log-segments", "--deep-iteration", "--json", "--files", str(text_seg)])
    row("... --deep-iteration --json (ASCII text values)", f"{records / t / 1e3:.0f}k rec/s", rss)
    for p in part.glob("*index"):
        p.unlink()
    t, rss = run([KT, "index", "rebuild", str(part)])
    row("kt index rebuild", f"{t:.2f} s", rss)
    t, n = kt_decode(seg)
    row("kt decoder in-process (records only)", f"{n / t / 1e3:.0f}k rec/s")
    t, n = kafka_python_decode(seg)
    row("baseline: kafka-python reader in-process", f"{n / t / 1e3:.0f}k rec/s")
    print(
        f"(python {sys.version.split()[0]}, {os.cpu_count()} cores, max RSS self "
        f"{resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MB)"
    )


if __name__ == "__main__":
    main()
