"""Regenerate docs/tui.md's screenshots of `kt tui` that come from a REAL cluster:
docs/screenshots/overview.svg, topic-detail.svg, brokers.svg and reassignments.svg.

`.venv/bin/python tests/tui/make_cluster_screenshots.py` starts a local three-broker
cluster (ZooKeeper plus `kt broker start` x3, racks az-a/az-b/az-c, in a temporary
directory), creates a few replicated topics, produces to them and commits consumer
offsets in the background, then SIGKILLs one broker that is not the controller and
waits until the TUI shows it gone and its partitions under-replicated with shrunk
ISRs. Three screenshots are taken in that state; then the TUI's action starts a
throttled reassignment of topic `archive` (8 MB on the controller, moving to another
live broker at 100 kB/s) and the reassignments view is taken while it copies, beside the
leader imbalance the kill left behind; then everything is stopped.
Needs java and Debian's zookeeper (scripts/setup). The other screenshots come from
the fake cluster: tests/tui/make_screenshots.py.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from kt.client import KafkaClient, NewTopic, RecordSpec
from kt.tools.local_cluster import LocalCluster, port_in_use
from kt.tui.actions import ClusterActions
from kt.tui.app import KtApp
from kt.tui.sampler import ClusterSampler

OUT = Path(__file__).resolve().parents[2] / "docs" / "screenshots"
SIZE = (100, 30)
RACKS = ["az-a", "az-b", "az-c"]
#: ports 19092..19094 when free (tidier screenshots), else any free ones
PORT_BASE = 19092
#: name -> (partitions, replication factor, share of the load)
TOPICS = {
    "orders": (6, 3, 0.5),
    "payments": (3, 3, 0.3),
    "clicks": (4, 2, 0.2),
    "audit-log": (1, 3, 0.0),
}
#: group -> (topic, fraction of the produced records it has committed)
GROUPS = {"billing": ("payments", 0.9), "fraud-check": ("orders", 0.6)}
#: the topic the reassignment screenshot moves: one partition, this many 1 kB records
ARCHIVE, ARCHIVE_RECORDS, THROTTLE = "archive", 8000, 100_000
OVERRIDES = {
    "zookeeper.session.timeout.ms": "6000",
    "replica.lag.time.max.ms": "3000",
    "group.initial.rebalance.delay.ms": "0",
}


async def traffic(bootstrap: str, stop: asyncio.Event) -> None:
    """A bumpy load on every topic (acks=1) and consumer groups committing behind it;
    errors while leadership moves are expected and skipped."""
    produced: dict[tuple[str, int], int] = {}
    step = 0
    while not stop.is_set():
        with contextlib.suppress(Exception):
            async with KafkaClient(bootstrap, request_timeout=2, connect_timeout=1, retries=0) as c:
                failed = False
                while not stop.is_set() and not failed:
                    step += 1
                    load = 40 + 30 * (step % 7)
                    for topic, (parts, _, share) in TOPICS.items():
                        n = int(load * share / parts) + (1 if topic == "audit-log" else 0)
                        for p in range(parts):
                            recs = [
                                RecordSpec(f"k{i}".encode(), f'{{"n": {step}}}'.encode())
                                for i in range(n)
                            ]
                            try:
                                await c.produce(topic, p, recs, acks=1)
                            except Exception:
                                failed = True  # a new client: fresh metadata, leaders
                            else:
                                produced[(topic, p)] = produced.get((topic, p), 0) + n
                    for group, (topic, frac) in GROUPS.items():
                        offsets = {
                            (topic, p): int(produced.get((topic, p), 0) * frac)
                            for p in range(TOPICS[topic][0])
                        }
                        with contextlib.suppress(Exception):
                            await c.commit_offsets(group, offsets)
                    await asyncio.sleep(0.5)
        await asyncio.sleep(0.3)


async def until(pilot, cond, what: str, timeout: float = 90.0) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            raise SystemExit(f"timed out waiting for {what}")
        await pilot.pause(0.1)


async def shoot(c: LocalCluster) -> None:
    bs = c.bootstrap_servers
    async with KafkaClient(bs) as admin:
        await admin.create_topics([NewTopic(t, n, rf) for t, (n, rf, _) in TOPICS.items()])
        controller = await admin.controller()
        await admin.create_topics([NewTopic(ARCHIVE, assignments={0: [controller]})])
        for _ in range(100):
            try:
                for _ in range(ARCHIVE_RECORDS // 100):
                    batch = [RecordSpec(None, b"a" * 1000) for _ in range(100)]
                    await admin.produce(ARCHIVE, 0, batch, acks=-1)
                break
            except Exception:  # no leader yet
                await asyncio.sleep(0.2)
    stop = asyncio.Event()
    producer = asyncio.create_task(traffic(bs, stop))
    app = KtApp(
        ClusterSampler(bs, request_timeout=2.0, connect_timeout=1.0),
        bootstrap=bs,
        interval=1.0,
        actions=ClusterActions(bs, request_timeout=5.0),
    )
    try:
        async with app.run_test(size=SIZE) as pilot:

            def full() -> bool:
                s = app.history.latest
                return (
                    s is not None
                    and s.error is None
                    and len(s.brokers) == 3
                    and len(s.topics) >= len(TOPICS)
                    and all(len(p.isr) == len(p.replicas) for p in s.partitions)
                )

            await until(pilot, full, "a healthy cluster")
            await pilot.pause(8.0)  # some history for the rates and sparklines
            victim = max(n for n in (1, 2, 3) if n != controller)
            await asyncio.to_thread(c.stop_broker, victim, kill=True)

            def incident() -> bool:
                s = app.history.latest
                return (
                    s is not None
                    and s.error is None
                    and victim not in [b.node_id for b in s.brokers]
                    and all(p.leader >= 0 and victim not in p.isr for p in s.partitions)
                )

            await until(pilot, incident, f"broker {victim} gone and out of every ISR")
            await pilot.pause(3.0)
            app.save_screenshot("overview.svg", path=str(OUT))
            app.open_topic("orders")
            await pilot.pause(1.0)
            app.save_screenshot("topic-detail.svg", path=str(OUT))
            await pilot.press("6")
            await pilot.pause(1.0)
            app.save_screenshot("brokers.svg", path=str(OUT))

            target = min(n for n in (1, 2, 3) if n not in (controller, victim))
            started = await ClusterActions(bs).start_reassignment(
                {(ARCHIVE, 0): [target]}, THROTTLE
            )
            if not started.ok:
                raise SystemExit(f"cannot start the reassignment: {started.message}")
            await pilot.press("r")

            def copying() -> bool:
                rows = app.history.reassignment_progress()
                return bool(rows) and rows[0].rate is not None and rows[0].copied > 0

            await until(pilot, copying, "the reassignment copying")
            await pilot.pause(12.0)  # a rate over the last 10 refreshes
            app.save_screenshot("reassignments.svg", path=str(OUT))
            await app.close_sampler()
    finally:
        stop.set()
        await producer


def main() -> None:
    os.environ["TZ"] = "UTC"
    time.tzset()
    OUT.mkdir(parents=True, exist_ok=True)
    free = not any(port_in_use(PORT_BASE + i) for i in range(3))
    with tempfile.TemporaryDirectory(prefix="kt-tui-shots-") as d:
        c = LocalCluster.create(
            Path(d) / "cluster",
            3,
            racks=RACKS,
            port_base=PORT_BASE if free else None,
            overrides=OVERRIDES,
        )
        c.start(register_timeout=15.0)
        try:
            asyncio.run(shoot(c))
        finally:
            c.stop(kill=True)
    print(f"wrote overview.svg, topic-detail.svg, brokers.svg, reassignments.svg in {OUT}")


if __name__ == "__main__":
    main()
