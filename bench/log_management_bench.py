"""Log-management benchmark: the log cleaner, broker startup with many partitions,
and produce throughput while the cleaner works.

Run by hand (not a test):  .venv/bin/python bench/log_management_bench.py
[--clean-mib 1024] [--startup-gib 10] [--partitions 1000] [--produce-mib 128]
[--rounds 4] [--only cleaner|startup|produce] [--keep]

1. Cleaner: a compacted partition of `--clean-mib` MiB (1 KiB records in batches of
   16, 64 MiB segments, keys drawn at random from a set a tenth the record count, so
   ~10% of the records are the latest of their key), cleaned in-process with
   `kt.storage.cleaner.clean_log` → MB/s of input. Baseline, same run, same bytes,
   page cache warm: plain sequential reads (1 MiB `os.read`), and
   `FileRecords.batches` (framing parsed, records not decoded).
2. Startup: `--partitions` partitions (100 topics x 10 made through the broker with
   CreateTopics) filled offline with the storage core to `--startup-gib` GiB in
   total, then `kt broker start` timed to its "kt broker ready" line after a clean
   shutdown and after `kill -9` (recovery from the recovery points; the bytes it
   re-validates are counted from the checkpoint and the segments). Baselines: the
   same broker with the same partitions empty, and a plain read of the same bytes.
   The disk's free space is checked first; with less than 25 GiB free the data set
   is scaled down (a line says so).
3. Produce while cleaning: kcat producing `--produce-mib` MiB of 1 KiB records to a
   1-partition topic (as bench/broker_bench.py) while the broker's cleaner cleans
   the partition of step 1, then the same on the same broker once the cleaner is
   idle (the baseline).

Everything is generated under bench/out/log-management/ and removed at the end
(unless --keep).
"""

from __future__ import annotations

import argparse
import os
import random
import re
import shutil
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT / "bench"))

from broker_bench import RECORD, produce, record_file  # noqa: E402
from broker_harness import BrokerProcess, free_port  # noqa: E402

from kt.storage.checkpoint import (  # noqa: E402
    TopicPartition,
    read_offset_checkpoint,
    write_offset_checkpoint,
)
from kt.storage.cleaner import clean_log  # noqa: E402
from kt.storage.file_records import FileRecords, LogBatch  # noqa: E402
from kt.storage.log import PartitionLog  # noqa: E402
from kt.storage.log_config import LogConfig  # noqa: E402
from kt.storage.log_files import (  # noqa: E402
    CLEANER_CHECKPOINT_FILE,
    RECOVERY_POINT_CHECKPOINT_FILE,
    REPLICATION_CHECKPOINT_FILE,
    list_segments,
    parse_segment_file_name,
)
from kt.storage.offset_map import capacity_for  # noqa: E402
from kt.storage.record_batch import RecordSpec, build_batch, set_base_offset  # noqa: E402

OUT = ROOT / "bench" / "out" / "log-management"
RECORDS_PER_BATCH = 16
VALUE = RECORD - 16  # a 1 KiB record: ~16 bytes of key and framing, the rest value
SEGMENT = 64 << 20
CHUNK = 1 << 20
TS = 1_700_000_000_000
GiB = 1 << 30
NEEDED_FREE = 25 * GiB
STARTUP_TIMEOUT = 900.0


# --- generating data -------------------------------------------------------------


def generate_compacted(d: Path, size: int, seed: int = 1) -> tuple[int, int]:
    """A compacted partition of about `size` bytes in `d`; returns (records, keys).

    Keys are drawn uniformly from records/10 keys, so almost every key occurs (the
    latest values are ~10% of the records) and live records are spread over the log.
    """
    records = size // RECORD
    keys = max(1, records // 10)
    rng = random.Random(seed)
    value = os.urandom(VALUE)
    log = PartitionLog.open(d, LogConfig(segment_bytes=SEGMENT, cleanup_policy="compact"))
    chunk = bytearray()
    offset = 0
    while offset < records:
        n = min(RECORDS_PER_BATCH, records - offset)
        specs = [
            RecordSpec(b"key-%010d" % rng.randrange(keys), value, timestamp=TS + offset + i)
            for i in range(n)
        ]
        chunk += build_batch(specs, base_offset=offset, partition_leader_epoch=0)
        offset += n
        if len(chunk) >= CHUNK:
            log.append_as_follower(chunk)
            chunk = bytearray()
    if chunk:
        log.append_as_follower(chunk)
    # Seal the last segment: the active segment is never cleaned.
    log.roll()
    log.close()
    return records, keys


def fill_partition(d: Path, size: int, template: bytes) -> int:
    """Append about `size` bytes of copies of `template` (one batch, offsets patched)
    to the log in `d`; returns its log end offset."""
    log = PartitionLog.open(d, LogConfig(), had_clean_shutdown=True)
    per_chunk = max(1, CHUNK // len(template))
    batch_records = RECORDS_PER_BATCH
    written = 0
    offset = log.log_end_offset
    while written < size:
        n = min(per_chunk, max(1, (size - written) // len(template)))
        chunk = bytearray(template * n)
        for i in range(n):
            set_base_offset(chunk, offset + i * batch_records, i * len(template))
        log.append_as_follower(chunk)
        offset += n * batch_records
        written += len(chunk)
    leo = log.log_end_offset
    log.close()
    return leo


def log_files(d: Path) -> list[Path]:
    """The live `.log` files under `d`, in offset order per directory."""
    out = []
    for p in sorted(d.rglob("*.log")):
        parsed = parse_segment_file_name(p.name)
        if parsed is not None and parsed.state is None:
            out.append(p)
    return out


def plain_read(files: list[Path]) -> tuple[int, float]:
    """(bytes, seconds) of reading `files` sequentially in 1 MiB reads."""
    total = 0
    start = time.perf_counter()
    for p in files:
        fd = os.open(p, os.O_RDONLY)
        try:
            while b := os.read(fd, CHUNK):
                total += len(b)
        finally:
            os.close(fd)
    return total, time.perf_counter() - start


def batches_read(files: list[Path]) -> tuple[int, float]:
    """(bytes, seconds) of iterating `FileRecords.batches` over `files`."""
    total = 0
    start = time.perf_counter()
    for p in files:
        with open(p, "rb") as fh:
            for item in FileRecords(fh).batches():
                if isinstance(item, LogBatch):
                    total += item.size_in_bytes
    return total, time.perf_counter() - start


def records_read(files: list[Path]) -> tuple[int, float]:
    """(bytes, seconds) of decoding every record (key and value) of `files` once: the
    least work a cleaner round does, which reads each key to map it."""
    total = 0
    start = time.perf_counter()
    for p in files:
        with open(p, "rb") as fh:
            for item in FileRecords(fh).batches():
                if isinstance(item, LogBatch):
                    for rec in item.records():
                        _ = rec.key, rec.value
                    total += item.size_in_bytes
    return total, time.perf_counter() - start


def mb_s(n: int, seconds: float) -> float:
    return n / seconds / 1e6


# --- 1. the cleaner ------------------------------------------------------------------


def bench_cleaner(pristine: Path, size: int) -> None:
    print(f"\n## cleaner: {size >> 20} MiB compacted partition, 1 KiB records, 10% live keys")
    start = time.perf_counter()
    records, keys = generate_compacted(pristine, size)
    took = time.perf_counter() - start
    print(f"(generated {records:,} records over {keys:,} keys in {took:.1f} s)")
    work = pristine.parent / "clean-work" / pristine.name
    shutil.copytree(pristine, work)
    files = log_files(work)
    nbytes, secs = plain_read(files)
    nbytes, secs = plain_read(files)  # the second pass is from a warm page cache
    plain = mb_s(nbytes, secs)
    bbytes, bsecs = batches_read(files)
    batched = mb_s(bbytes, bsecs)
    rbytes, rsecs = records_read(files)
    decoded = mb_s(rbytes, rsecs)
    log = PartitionLog.open(work, LogConfig(segment_bytes=SEGMENT, cleanup_policy="compact"),
                            had_clean_shutdown=True)  # fmt: skip
    log.update_high_watermark(log.log_end_offset)
    start = time.perf_counter()
    # The broker's default map: log.cleaner.dedupe.buffer.size 128 MiB, load factor 0.9.
    result = clean_log(log, map_capacity=capacity_for(128 << 20, 0.9))
    secs = time.perf_counter() - start
    s = result.stats
    log.close()
    cleaned = mb_s(s.bytes_read, secs)
    print(f"{'measure':52} {'figure':>12}")
    print(f"{'clean_log (map + recopy + swap), MB/s of input':52} {cleaned:7.0f} MB/s"
          f"   ({s.bytes_read / 1e6:.0f} MB in {secs:.2f} s, {s.segments} segments)")  # fmt: skip
    print(f"{'  records kept':52} {s.records_kept:>12,} of {s.records_read:,} "
          f"({s.records_kept / s.records_read:.1%}), {s.bytes_kept / 1e6:.0f} MB "
          "written")  # fmt: skip
    print(f"{'  map full (a second round needed)':52} {s.map_full!s:>12}")
    print(f"{'baseline: plain sequential read, 1 MiB reads':52} {plain:7.0f} MB/s")
    print(f"{'baseline: FileRecords.batches (no record decoding)':52} {batched:7.0f} MB/s")
    print(f"{'baseline: every record decoded once (key and value)':52} {decoded:7.0f} MB/s")
    print(f"(cleaner at {cleaned / decoded:.0%} of decoding every record once; it decodes "
          f"them twice, to map and to recopy; {cleaned / plain:.1%} of plain reads)")  # fmt: skip
    shutil.rmtree(work.parent)


# --- 2. startup with many partitions --------------------------------------------------


def timed_start(b: BrokerProcess) -> float:
    start = time.perf_counter()
    b.start(timeout=STARTUP_TIMEOUT)
    return time.perf_counter() - start


def timed_stop(b: BrokerProcess) -> float:
    start = time.perf_counter()
    code = b.stop(timeout=STARTUP_TIMEOUT)
    if code != 0:
        raise SystemExit(f"broker exited {code}: {b.log()[-2000:]}")
    return time.perf_counter() - start


def revalidated_bytes(data: Path) -> tuple[int, int]:
    """(bytes, segments) a broker recovers after an unclean shutdown given the
    directory's recovery-point checkpoint: every segment from the one holding a
    partition's recovery point on."""
    points = read_offset_checkpoint(data / RECOVERY_POINT_CHECKPOINT_FILE, allow_empty=True)
    total = segs = 0
    for child in data.iterdir():
        m = re.fullmatch(r"(.+)-(\d+)", child.name)
        if not child.is_dir() or m is None:
            continue
        point = points.get(TopicPartition(m.group(1), int(m.group(2))), 0)
        groups = [g for g in list_segments(child) if g.log is not None]
        first = 0
        for i, g in enumerate(groups):
            if g.base_offset <= point:
                first = i
        for g in groups[first:]:
            assert g.log is not None
            total += g.log.stat().st_size
            segs += 1
    return total, segs


def bench_startup(root: Path, total: int, partitions: int) -> None:
    topics = max(1, partitions // 10)
    per_topic = partitions // topics
    partitions = topics * per_topic
    print(f"\n## startup: {partitions} partitions ({topics} topics x {per_topic}), "
          f"{total / GiB:.1f} GiB")  # fmt: skip
    data = root / "data"
    data.mkdir(parents=True)
    b = BrokerProcess(data, free_port())
    from confluent_kafka.admin import AdminClient, NewTopic

    empty_first = timed_start(b)
    admin = AdminClient({"bootstrap.servers": b.bootstrap})
    names = [f"t{i:03d}" for i in range(topics)]
    for fut in admin.create_topics(
        [NewTopic(n, per_topic, 1) for n in names], operation_timeout=60
    ).values():
        fut.result()
    del admin  # its connection would log the broker's stops
    timed_stop(b)
    empty = [timed_start(b)]
    timed_stop(b)
    # Fill every partition offline: one 16-record batch of 1 KiB records, repeated.
    template = build_batch(
        [RecordSpec(b"k%05d" % i, os.urandom(VALUE), timestamp=TS + i)
         for i in range(RECORDS_PER_BATCH)],
        partition_leader_epoch=0,
    )  # fmt: skip
    per_part = total // partitions
    start = time.perf_counter()
    ends: dict[TopicPartition, int] = {}
    for n in names:
        for p in range(per_topic):
            ends[TopicPartition(n, p)] = fill_partition(data / f"{n}-{p}", per_part, template)
    # What a clean shutdown of a broker holding this data would leave: every log
    # flushed to its end (the clean-shutdown marker is still there from the stop).
    for name in (RECOVERY_POINT_CHECKPOINT_FILE, REPLICATION_CHECKPOINT_FILE):
        entries = read_offset_checkpoint(data / name, allow_empty=True)
        entries.update(ends)
        write_offset_checkpoint(data / name, entries)
    files = log_files(data)
    on_disk = sum(p.stat().st_size for p in files)
    print(f"(filled {on_disk / GiB:.2f} GiB in {len(files)} segments in "
          f"{time.perf_counter() - start:.1f} s)")  # fmt: skip
    # No producer-state snapshot yet: this start replays every partition's log.
    first = timed_start(b)
    stops = [timed_stop(b)]
    clean = [timed_start(b)]
    stops.append(timed_stop(b))
    clean.append(timed_start(b))
    stops.append(timed_stop(b))
    clean.append(timed_start(b))
    # kill -9 while idle: the checkpoint on disk holds each log's end as recovery point.
    time.sleep(1.0)
    b.kill()
    re_bytes, re_segs = revalidated_bytes(data)
    unclean = timed_start(b)
    timed_stop(b)
    nbytes, secs = plain_read(files)
    plain = mb_s(nbytes, secs)
    print(f"{'measure':58} {'figure':>10}")
    print(f"{'start to ready, empty log dir (first start)':58} {empty_first:8.2f} s")
    print(f"{'first start after the fill (producer state replayed)':58} {first:8.2f} s")
    print(f"{f'start to ready, {partitions} empty partitions, clean shutdown':58} "
          f"{empty[0]:8.2f} s")  # fmt: skip
    print(f"{f'start to ready, {partitions} partitions / {on_disk / GiB:.1f} GiB, clean':58} "
          f"{statistics.median(clean):8.2f} s   (runs: "
          f"{', '.join(f'{x:.2f}' for x in clean)})")  # fmt: skip
    print(f"{'clean shutdown (SIGTERM to exit)':58} {statistics.median(stops):8.2f} s")
    print(f"{'start to ready after kill -9':58} {unclean:8.2f} s   "
          f"(re-validated {re_bytes / GiB:.2f} GiB in {re_segs} segments: "
          f"{mb_s(re_bytes, unclean):.0f} MB/s)")  # fmt: skip
    print(f"{'baseline: plain sequential read of the same segments':58} {plain:8.0f} MB/s")


# --- 3. produce while the cleaner runs -------------------------------------------------


def reset_dirty(part: Path, pristine: Path) -> None:
    """Put the uncleaned segments of step 1 into the broker's partition `part`."""
    for p in part.iterdir():
        if parse_segment_file_name(p.name) is not None:
            p.unlink()
    for p in pristine.iterdir():
        if parse_segment_file_name(p.name) is not None:
            shutil.copy(p, part / p.name)


def set_checkpoints(data: Path, tp: TopicPartition, end: int) -> None:
    for name in (RECOVERY_POINT_CHECKPOINT_FILE, REPLICATION_CHECKPOINT_FILE):
        entries = read_offset_checkpoint(data / name, allow_empty=True)
        entries[tp] = end
        write_offset_checkpoint(data / name, entries)
    (data / CLEANER_CHECKPOINT_FILE).unlink(missing_ok=True)


def cleanings(b: BrokerProcess) -> int:
    """How many cleanings of dirty-0 the broker's log (all its runs) reports."""
    return b.log().count("cleaned dirty-0:")


def bench_produce(root: Path, pristine: Path, total: int, rounds: int) -> None:
    print(f"\n## produce while cleaning: {total >> 20} MiB per run, 1 partition, acks=1")
    data = root / "data"
    data.mkdir(parents=True)
    b = BrokerProcess(data, free_port(), {"log.segment.bytes": str(256 << 20),
                                          "log.cleaner.backoff.ms": "500"})  # fmt: skip
    from confluent_kafka.admin import AdminClient, NewTopic

    b.start()
    admin = AdminClient({"bootstrap.servers": b.bootstrap})
    for fut in admin.create_topics([
        NewTopic("dirty", 1, 1, config={"cleanup.policy": "compact",
                                        "segment.bytes": str(SEGMENT)}),
        NewTopic("bench", 1, 1),
    ]).values():  # fmt: skip
        fut.result()
    del admin
    timed_stop(b)
    record_file(total)
    end = PartitionLog.open(pristine, had_clean_shutdown=True)
    leo = end.log_end_offset
    end.close()
    busy: list[float] = []
    idle: list[float] = []
    clean_secs: list[float] = []
    skipped = 0
    for _ in range(rounds):
        reset_dirty(data / "dirty-0", pristine)
        set_checkpoints(data, TopicPartition("dirty", 0), leo)
        os.sync()
        before = cleanings(b)
        b.start(timeout=120)
        started = time.perf_counter()  # the cleaner's first round starts with the broker
        runs = 0
        while cleanings(b) == before:
            os.sync()
            mb = produce(b.bootstrap, "bench", total, "1")
            if cleanings(b) > before:
                skipped += 1  # the cleaning ended during this run: neither busy nor idle
                break
            busy.append(mb)
            runs += 1
        while cleanings(b) == before:
            time.sleep(0.05)
        clean_secs.append(time.perf_counter() - started)
        for _ in range(max(2, runs)):
            os.sync()
            idle.append(produce(b.bootstrap, "bench", total, "1"))
        timed_stop(b)
        if runs:
            b_med = statistics.median(busy[-runs:])
            i_med = statistics.median(idle[-max(2, runs) :])
            print(f"(round {len(clean_secs)}: busy {', '.join(f'{x:.0f}' for x in busy[-runs:])}"
                  f" MB/s, then idle {', '.join(f'{x:.0f}' for x in idle[-max(2, runs):])} "
                  f"MB/s: medians {b_med:.0f} / {i_med:.0f} = {b_med / i_med:.0%})")  # fmt: skip
    size = sum(p.stat().st_size for p in log_files(pristine))
    print(f"{'measure':52} {'figure':>10}")
    print(f"{'produce while the cleaner cleans dirty-0 (median)':52} "
          f"{statistics.median(busy):6.0f} MB/s   (runs: "
          f"{', '.join(f'{x:.0f}' for x in busy)})")  # fmt: skip
    print(f"{'baseline: same broker, cleaner idle (median)':52} "
          f"{statistics.median(idle):6.0f} MB/s   (runs: "
          f"{', '.join(f'{x:.0f}' for x in idle)})")  # fmt: skip
    print(f"{'  ratio':52} {statistics.median(busy) / statistics.median(idle):8.0%}")
    print(f"(the broker's cleaning of {size / 1e6:.0f} MB took "
          f"{', '.join(f'{x:.1f}' for x in clean_secs)} s from ready to its log line while "
          f"producing: ~{mb_s(size, statistics.median(clean_secs)):.0f} MB/s; {skipped} runs "
          "straddling its end were dropped)")  # fmt: skip


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--clean-mib", type=int, default=1024, help="compacted partition (1024)")
    ap.add_argument("--startup-gib", type=float, default=10.0, help="startup data set (10)")
    ap.add_argument("--partitions", type=int, default=1000, help="startup partitions (1000)")
    ap.add_argument("--produce-mib", type=int, default=128, help="bytes per produce run (128)")
    ap.add_argument("--rounds", type=int, default=4, help="cleanings produced against (4)")
    ap.add_argument("--only", choices=["cleaner", "startup", "produce"], action="append")
    ap.add_argument("--keep", action="store_true", help="keep bench/out/log-management")
    args = ap.parse_args()
    only = set(args.only or ["cleaner", "startup", "produce"])
    if OUT.exists():
        shutil.rmtree(OUT)
    OUT.mkdir(parents=True)
    try:
        pristine = OUT / "pristine" / "dirty-0"
        if "cleaner" in only or "produce" in only:
            bench_cleaner(pristine, args.clean_mib << 20)
        if "startup" in only:
            total = int(args.startup_gib * GiB)
            free = shutil.disk_usage(OUT).free
            if free < NEEDED_FREE:
                scaled = min(total, int(free / 2.5))
                print(f"\nNOTE: only {free / GiB:.1f} GiB free (< 25 GiB): the startup "
                      f"data set is scaled down from {total / GiB:.1f} to "
                      f"{scaled / GiB:.1f} GiB")  # fmt: skip
                total = scaled
            bench_startup(OUT / "startup", total, args.partitions)
            shutil.rmtree(OUT / "startup")
        if "produce" in only:
            bench_produce(OUT / "produce", pristine, args.produce_mib << 20, args.rounds)
    finally:
        if not args.keep:
            shutil.rmtree(OUT, ignore_errors=True)
    print(f"\n(python {sys.version.split()[0]}, {os.cpu_count()} cores; page cache warm "
          "throughout: the data sets fit in memory)")  # fmt: skip


if __name__ == "__main__":
    main()
