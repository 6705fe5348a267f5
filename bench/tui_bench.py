"""TUI refresh benchmark: how long `ClusterSampler.sample()` takes on a big cluster,
where the time goes, and whether it ever stalls the caller's event loop.

Run by hand (not a test):  .venv/bin/python bench/tui_bench.py
[--topics 100] [--partitions 10] [--groups 100] [--topics-per-group 1] [--refreshes 20]

Setup: one `kt broker` with `--topics` x `--partitions` partitions (1,000 by
default), a few records in each, and `--groups` consumer groups, each with
committed offsets on every partition of `--topics-per-group` topics.

Measured, for the sampler on its private loop (the default) and on the caller's
loop (`isolate=False`), over `--refreshes` refreshes after one warm-up:
- wall time of `sample()` (median, p95);
- broker time: the broker process's CPU time (utime + stime from /proc) per refresh;
- client time: the CPU time of the thread running the client (encode, decode, shape);
- the largest delay of an asyncio ticker that wakes every 10 ms on the caller's loop
  while refreshes run back to back: how long the caller's loop was blocked at worst.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

from broker_harness import BrokerProcess, free_port  # noqa: E402

from kt.client import KafkaClient, NewTopic, RecordSpec  # noqa: E402
from kt.tui.sampler import ClusterSampler  # noqa: E402

TICK = 0.010


def proc_cpu(pid: int) -> float:
    """utime + stime of a process, in seconds."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    ticks = int(fields[11]) + int(fields[12])
    return ticks / os.sysconf("SC_CLK_TCK")


async def populate(bootstrap: str, topics: int, partitions: int, groups: int, per: int) -> None:
    names = [f"bench-{i:03d}" for i in range(topics)]
    async with KafkaClient(bootstrap, request_timeout=60) as c:
        errs = await c.create_topics([NewTopic(n, partitions, 1) for n in names])
        bad = {n: e for n, e in errs.items() if e is not None}
        if bad:
            raise SystemExit(f"create topics: {bad}")
        await c.refresh_metadata()
        recs = [RecordSpec(b"key-%d" % i, b"x" * 100) for i in range(20)]
        sem = asyncio.Semaphore(64)

        async def fill(t: str, p: int) -> None:
            async with sem:
                await c.produce(t, p, recs)

        await asyncio.gather(*(fill(t, p) for t in names for p in range(partitions)))

        async def commit(g: int) -> None:
            offsets = {
                (names[(g + k) % topics], p): 10 + (g % 10)
                for k in range(per)
                for p in range(partitions)
            }
            async with sem:
                await c.commit_offsets(f"bench-group-{g:03d}", offsets)

        await asyncio.gather(*(commit(g) for g in range(groups)))


async def measure(bootstrap: str, pid: int, refreshes: int, isolate: bool) -> dict[str, float]:
    sampler = ClusterSampler(bootstrap, request_timeout=30, isolate=isolate)
    warm = await sampler.sample()
    if warm.error:
        raise SystemExit(f"sample failed: {warm.error}")
    walls: list[float] = []
    cpus: list[float] = []
    max_delay = 0.0
    running = True

    async def ticker() -> None:
        nonlocal max_delay
        loop = asyncio.get_running_loop()
        while running:
            t0 = loop.time()
            await asyncio.sleep(TICK)
            max_delay = max(max_delay, loop.time() - t0 - TICK)

    tick = asyncio.create_task(ticker())
    await asyncio.sleep(0.05)
    b0 = proc_cpu(pid)
    snap = warm
    for _ in range(refreshes):
        t0 = time.perf_counter()
        snap = await sampler.sample()
        walls.append(time.perf_counter() - t0)
        cpus.append(sampler.last_timings.get("client_cpu", 0.0))
        if snap.error:
            raise SystemExit(f"sample failed: {snap.error}")
    b1 = proc_cpu(pid)
    running = False
    await tick
    await sampler.close()
    walls.sort()
    nparts = sum(len(t.partitions) for t in snap.topics)
    lags = sum(len(g.lags) for g in snap.groups)
    print(
        f"  snapshot: {len(snap.topics)} topics, {nparts} partitions, {len(snap.groups)} groups,"
        f" {lags} group partitions; warnings {len(snap.warnings)}"
    )
    return {
        "wall_median": statistics.median(walls),
        "wall_p95": walls[max(0, round(0.95 * len(walls)) - 1)],
        "broker_cpu": (b1 - b0) / refreshes,
        "client_cpu": statistics.median(cpus),
        "max_tick_delay": max_delay,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--topics", type=int, default=100)
    ap.add_argument("--partitions", type=int, default=10)
    ap.add_argument("--groups", type=int, default=100)
    ap.add_argument("--topics-per-group", type=int, default=1)
    ap.add_argument("--refreshes", type=int, default=20)
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="kt-tui-bench-"))
    broker = BrokerProcess(tmp / "data", free_port(), {"num.partitions": "1"}).start(60)
    try:
        t0 = time.perf_counter()
        asyncio.run(
            populate(
                broker.bootstrap, args.topics, args.partitions, args.groups, args.topics_per_group
            )
        )
        print(f"setup: {time.perf_counter() - t0:.1f} s")
        assert broker.proc is not None
        rows = []
        for isolate in (True, False):
            label = "private loop (default)" if isolate else "caller's loop (isolate=False)"
            print(f"{label}:")
            r = asyncio.run(measure(broker.bootstrap, broker.proc.pid, args.refreshes, isolate))
            rows.append((label, r))
        print()
        print("| sampler | wall median | wall p95 | broker CPU | client CPU | max tick delay |")
        print("| --- | --- | --- | --- | --- | --- |")
        for label, r in rows:
            print(
                f"| {label} | {r['wall_median'] * 1000:.0f} ms | {r['wall_p95'] * 1000:.0f} ms"
                f" | {r['broker_cpu'] * 1000:.0f} ms | {r['client_cpu'] * 1000:.0f} ms"
                f" | {r['max_tick_delay'] * 1000:.1f} ms |"
            )
    finally:
        broker.kill()
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
