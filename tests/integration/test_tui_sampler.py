"""The TUI's sampler and actions against a live `kt broker`: what a snapshot says,
lag following a kafka-python consumer group, surviving a broker restart, and each
action with the text its confirmation dialog shows."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable
from typing import Any, TypeVar

import pytest

from kt.client import EARLIEST, KafkaClient, NewTopic, RecordSpec
from kt.tui.actions import ClusterActions
from kt.tui.model import ClusterSnapshot, History
from kt.tui.sampler import ClusterSampler

pytestmark = pytest.mark.integration

T = TypeVar("T")
FAST_GROUPS = {"group.min.session.timeout.ms": "500", "num.partitions": "1"}


def run(aw: Awaitable[T]) -> T:
    """Each call on a fresh event loop: the sampler must not care which loop calls it."""

    async def main() -> T:
        return await aw

    return asyncio.run(main())


def sample(sampler: ClusterSampler) -> ClusterSnapshot:
    return run(sampler.sample())


async def _setup(bootstrap: str, script: Any) -> Any:
    async with KafkaClient(bootstrap) as c:
        return await script(c)


def produce(
    bootstrap: str, topic: str, per_partition: dict[int, int], ts: int | None = None
) -> None:
    async def go(c: KafkaClient) -> None:
        for p, n in per_partition.items():
            if n:
                recs = [RecordSpec(b"k%d" % i, b"value-%d" % i, timestamp=ts) for i in range(n)]
                await c.produce(topic, p, recs)

    run(_setup(bootstrap, go))


def test_snapshot_lists_brokers_topics_offsets_and_log_dirs(kt_broker) -> None:
    boot = kt_broker.bootstrap

    async def setup(c: KafkaClient) -> dict[str, str]:
        errs = await c.create_topics(
            [
                NewTopic("orders", 3, 1, configs={"retention.ms": "3600000"}),
                NewTopic("audit", 1, 1, configs={"min.insync.replicas": "1"}),
            ]
        )
        assert not any(errs.values())
        for p, n in {0: 10, 1: 4, 2: 0}.items():
            if n:
                await c.produce("orders", p, [RecordSpec(b"k", b"v" * 100)] * n)
        await c.produce("audit", 0, [RecordSpec(None, b"a")] * 7)
        await c.delete_records({("orders", 0): 3})
        await c.commit_offsets("billing", {("orders", 0): 5, ("orders", 1): 4})
        md = await c.refresh_metadata()
        return {n: str(t.topic_id) for n, t in md.topics.items()}

    ids = run(_setup(boot, setup))
    sampler = ClusterSampler(boot, request_timeout=5)
    try:
        s = sample(sampler)
        assert s.error is None, s.error
        assert s.warnings == ()
        assert s.bootstrap == boot and s.cluster_id
        assert s.refresh_seconds > 0 and s.wall_time == pytest.approx(time.time(), abs=60)
        # Brokers
        assert len(s.brokers) == 1
        b = s.brokers[0]
        assert (b.host, b.port) == ("127.0.0.1", kt_broker.port)
        assert b.is_controller and s.controller_id == b.node_id
        assert b.partitions_led == sum(1 for _ in s.partitions)
        assert b.log_dir_bytes > 0 and b.offline_log_dirs == 0
        # Topics and partitions
        orders = s.topic("orders")
        assert orders is not None
        assert orders.topic_id == ids["orders"]
        assert not orders.internal and orders.replication_factor == 1
        assert orders.overridden_configs == {"retention.ms": "3600000"}
        assert orders.min_insync_replicas == 1
        got = [
            (p.partition, p.leader, p.replicas, p.isr, p.log_start_offset, p.log_end_offset)
            for p in orders.partitions
        ]
        n = b.node_id
        assert got == [
            (0, n, (n,), (n,), 3, 10),
            (1, n, (n,), (n,), 0, 4),
            (2, n, (n,), (n,), 0, 0),
        ]
        sizes = [p.size_bytes for p in orders.partitions]
        assert sizes[0] > sizes[1] > 0 and sizes[2] == 0
        assert orders.end_offsets_sum == 14
        audit = s.topic("audit")
        assert audit is not None and audit.overridden_configs == {"min.insync.replicas": "1"}
        offsets = s.topic("__consumer_offsets")
        assert offsets is not None and offsets.internal
        # Log dirs: the one directory, holding every partition
        assert len(s.log_dirs) == 1
        d = s.log_dirs[0]
        assert d.path == str(kt_broker.data_dir) and d.error is None
        assert d.partitions == sum(1 for _ in s.partitions)
        assert d.size_bytes == b.log_dir_bytes == sum(t.size_bytes for t in s.topics)
        assert d.total_bytes > 0 and 0 <= d.usable_bytes <= d.total_bytes
        # Groups: committed offsets against log end offsets
        g = s.group("billing")
        assert g is not None and g.state == "Empty" and g.members == ()
        assert [(x.topic, x.partition, x.committed, x.log_end_offset, x.lag) for x in g.lags] == [
            ("orders", 0, 5, 10, 5),
            ("orders", 1, 4, 4, 0),
        ]
        assert g.total_lag == 5
        timings = sampler.last_timings
        for kind in ("metadata", "list_offsets", "describe_log_dirs", "describe_configs"):
            assert kind in timings
    finally:
        run(sampler.close())


def _kafka_python_consumer(bootstrap: str, topic: str, group: str) -> Any:
    from kafka import KafkaConsumer

    consumer = KafkaConsumer(
        topic,
        bootstrap_servers=bootstrap,
        group_id=group,
        auto_offset_reset="earliest",
        enable_auto_commit=False,
        session_timeout_ms=6000,
        heartbeat_interval_ms=500,
        max_poll_records=50,
    )
    # Know the topic before the first join: a leader that assigns without metadata
    # rejoins at once, and kafka-python 3.0.12 can drop that rejoin's result when its
    # poll() returns first (see test_groups.py), leaving the consumer idle.
    consumer.partitions_for_topic(topic)
    return consumer


def _consume(consumer: Any, n: int, timeout: float = 20.0) -> int:
    """Poll until `n` records are read (then commit); returns how many."""
    got = 0
    deadline = time.monotonic() + timeout
    while got < n and time.monotonic() < deadline:
        batches = consumer.poll(timeout_ms=200, max_records=n - got)
        got += sum(len(v) for v in batches.values())
    consumer.commit()
    return got


def test_lag_grows_while_producing_and_shrinks_while_consuming(broker_factory) -> None:
    broker = broker_factory(**FAST_GROUPS)
    boot = broker.bootstrap
    run(_setup(boot, lambda c: c.create_topics([NewTopic("events", 2, 1)])))
    produce(boot, "events", {0: 100, 1: 100})
    sampler = ClusterSampler(boot)
    history = History()
    consumer = _kafka_python_consumer(boot, "events", "workers")
    try:
        assert _consume(consumer, 50) == 50
        history.add(sample(sampler))
        lag0 = history.group_lag_series("workers")[-1]
        assert lag0 == 150
        # Producing: lag grows.
        produce(boot, "events", {0: 60, 1: 40})
        history.add(sample(sampler))
        assert history.group_lag_series("workers")[-1] == 250
        s = history.latest
        assert s is not None
        g = s.group("workers")
        assert g is not None
        assert g.state == "Stable" and g.protocol_type == "consumer" and len(g.members) == 1
        m = g.members[0]
        assert m.assignment == (("events", 0), ("events", 1))
        assert {x.consumer for x in g.lags} == {m.member_id}
        assert {x.log_end_offset for x in g.lags} == {160, 140}
        # Consuming: lag shrinks, step by step, to zero.
        for _ in range(3):
            time.sleep(0.2)
            assert _consume(consumer, 80) == 80
            history.add(sample(sampler))
        time.sleep(0.2)
        assert _consume(consumer, 10) == 10
        history.add(sample(sampler))
        series = history.group_lag_series("workers")
        assert series == [150, 250, 170, 90, 10, 0]
        assert history.group_consume_rate("workers") > 0
        assert history.group_lag_seconds("workers") == 0.0
        rates = history.consume_rate_series()
        assert rates[0] == 0.0 and all(r > 0 for r in rates[1:])
    finally:
        consumer.close()
        run(sampler.close())
    # The consumer left: the group is empty, its offsets remain.
    sampler = ClusterSampler(boot)
    try:
        g = sample(sampler).group("workers")
        assert g is not None and g.state == "Empty" and g.members == () and g.total_lag == 0
    finally:
        run(sampler.close())


def test_broker_lost_then_back(kt_broker) -> None:
    boot = kt_broker.bootstrap
    produce(boot, "t", {0: 5})
    sampler = ClusterSampler(boot, request_timeout=2)
    try:
        first = sample(sampler)
        assert first.error is None and first.topic("t") is not None
        kt_broker.kill()
        t0 = time.monotonic()
        lost = sample(sampler)
        assert time.monotonic() - t0 < 5
        assert lost.error is not None and "refused" in lost.error
        assert lost.topics == () and lost.brokers == ()
        again = sample(sampler)  # still down: still an error, no exception
        assert again.error is not None
        kt_broker.start()
        back = sample(sampler)
        assert back.error is None, back.error
        t = back.topic("t")
        assert t is not None and t.partitions[0].log_end_offset == 5
        # The History bridges the outage.
        h = History()
        for s in (first, lost, again, back):
            h.add(s)
        assert h.latest_ok is back and h.topic_rate_series("t") == [0.0]
    finally:
        run(sampler.close())


def test_broker_restarted_between_refreshes_is_no_outage(kt_broker) -> None:
    """The connection kept from the last refresh is dead after a restart: the
    sampler notices and retries at once on a new one."""
    produce(kt_broker.bootstrap, "t", {0: 3})
    sampler = ClusterSampler(kt_broker.bootstrap)
    try:
        assert sample(sampler).error is None
        kt_broker.restart()
        s = sample(sampler)
        assert s.error is None, s.error
        t = s.topic("t")
        assert t is not None and t.partitions[0].log_end_offset == 3
    finally:
        run(sampler.close())


def test_sampler_from_one_loop_and_after_close(kt_broker) -> None:
    async def go() -> None:
        async with ClusterSampler(kt_broker.bootstrap) as s:
            snaps = await asyncio.gather(s.sample(), s.sample())
            assert all(x.error is None for x in snaps)
        closed = await s.sample()
        assert closed.error == "sampler closed"

    run(go())


def test_sampler_on_the_callers_loop(kt_broker) -> None:
    async def go() -> None:
        s = ClusterSampler(kt_broker.bootstrap, isolate=False)
        try:
            snap = await s.sample()
            assert snap.error is None and snap.brokers
        finally:
            await s.close()

    run(go())


# --- actions -----------------------------------------------------------------------


def test_create_add_partitions_alter_delete_topic(kt_broker) -> None:
    boot = kt_broker.bootstrap
    acts = ClusterActions(boot)
    sampler = ClusterSampler(boot)
    try:
        d = run(acts.describe_create_topic("pay", 3, 1, {"retention.ms": "60000"}))
        assert d.ok, d.message
        assert d.message == (
            "Create topic 'pay' with 3 partitions and replication factor 1, "
            "configs retention.ms=60000."
        )
        assert sample(sampler).topic("pay") is None  # validate_only created nothing
        r = run(acts.create_topic("pay", 3, 1, {"retention.ms": "60000"}))
        assert r.ok and r.message == "Created topic 'pay' with 3 partitions, replication factor 1."
        t = sample(sampler).topic("pay")
        assert t is not None and len(t.partitions) == 3
        assert t.overridden_configs == {"retention.ms": "60000"}
        again = run(acts.describe_create_topic("pay", 3, 1))
        assert not again.ok and "pay" in again.message and "exists" in again.message
        assert not run(acts.create_topic("pay", 3, 1)).ok
        d = run(acts.describe_create_topic("dflt"))
        assert d.ok and d.message == (
            "Create topic 'dflt' with the broker's default number of partitions and "
            "the broker's default replication factor."
        )
        assert run(acts.create_topic("dflt")).ok

        # Add partitions
        d = run(acts.describe_add_partitions("pay", 5))
        assert d.ok and d.message.startswith(
            "Increase topic 'pay' from 3 to 5 partitions (new: 3, 4)."
        )
        t = sample(sampler).topic("pay")
        assert t is not None and len(t.partitions) == 3
        r = run(acts.add_partitions("pay", 5))
        assert r.ok and r.message == "Topic 'pay' now has 5 partitions (was 3)."
        t = sample(sampler).topic("pay")
        assert t is not None and [p.partition for p in t.partitions] == [0, 1, 2, 3, 4]
        shrink = run(acts.describe_add_partitions("pay", 2))
        assert not shrink.ok and "can only grow" in shrink.message
        assert not run(acts.add_partitions("pay", 5)).ok
        missing = run(acts.describe_add_partitions("nope", 4))
        assert not missing.ok and missing.message == "topic 'nope' does not exist"

        # Alter a config: set, change, remove the override
        d = run(acts.describe_alter_topic_config("pay", "cleanup.policy", "compact"))
        assert d.ok and d.message == (
            "Set cleanup.policy on topic 'pay' from delete (the default) to compact."
        )
        assert run(acts.alter_topic_config("pay", "cleanup.policy", "compact")).ok
        d = run(acts.describe_alter_topic_config("pay", "retention.ms", "120000"))
        assert d.message == "Set retention.ms on topic 'pay' from 60000 (its override) to 120000."
        r = run(acts.alter_topic_config("pay", "retention.ms", "120000"))
        assert r.ok and r.message == "Set retention.ms=120000 on topic 'pay'."
        t = sample(sampler).topic("pay")
        assert t is not None
        assert t.overridden_configs == {"cleanup.policy": "compact", "retention.ms": "120000"}
        d = run(acts.describe_alter_topic_config("pay", "retention.ms", None))
        assert d.ok and d.message == (
            "Remove the override of retention.ms on topic 'pay' (120000): "
            "it reverts to the default 604800000."
        )
        r = run(acts.alter_topic_config("pay", "retention.ms", None))
        assert r.ok and r.message == (
            "Removed the override of retention.ms on topic 'pay'; it is now 604800000."
        )
        t = sample(sampler).topic("pay")
        assert t is not None and t.overridden_configs == {"cleanup.policy": "compact"}
        bad = run(acts.describe_alter_topic_config("pay", "min.insync.replicas", "zero"))
        assert not bad.ok
        t = sample(sampler).topic("pay")
        assert t is not None and "min.insync.replicas" not in t.overridden_configs

        # Delete
        produce(boot, "pay", {0: 7, 3: 5})
        d = run(acts.describe_delete_topic("pay"))
        assert d.ok
        assert d.message.startswith("Delete topic 'pay': 5 partitions, 12 records, ")
        assert d.message.endswith("on disk. Its data is removed and cannot be recovered.")
        assert sample(sampler).topic("pay") is not None
        r = run(acts.delete_topic("pay"))
        assert r.ok and r.message == "Deleted topic 'pay'."
        assert sample(sampler).topic("pay") is None
        gone = run(acts.describe_delete_topic("pay"))
        assert not gone.ok and gone.message == "topic 'pay' does not exist"
        # A commit makes the broker create __consumer_offsets.
        run(_setup(boot, lambda c: c.commit_offsets("g", {("dflt", 0): 0})))
        internal = run(acts.describe_delete_topic("__consumer_offsets"))
        assert not internal.ok and "internal" in internal.message
    finally:
        run(sampler.close())


def test_reset_offsets(broker_factory) -> None:
    broker = broker_factory(**FAST_GROUPS)
    boot = broker.bootstrap
    run(_setup(boot, lambda c: c.create_topics([NewTopic("events", 2, 1)])))
    base = 1_700_000_000_000
    produce(boot, "events", {0: 10, 1: 10}, ts=base)
    produce(boot, "events", {0: 10, 1: 10}, ts=base + 60_000)
    run(_setup(boot, lambda c: c.delete_records({("events", 1): 4})))
    acts = ClusterActions(boot)
    consumer = _kafka_python_consumer(boot, "events", "readers")
    try:
        assert _consume(consumer, 30) == 30
        # Active: refused, like Kafka.
        d = run(acts.describe_reset_offsets("readers", "earliest"))
        assert not d.ok
        assert d.message == (
            "group 'readers' is Stable with 1 member: offsets can only be reset while "
            "it is inactive (stop its consumers first)"
        )
        r = run(acts.reset_offsets("readers", "earliest"))
        assert not r.ok and r.message == d.message
    finally:
        consumer.close()

    def committed() -> dict[tuple[str, int], int]:
        got = run(_setup(boot, lambda c: c.fetch_committed("readers")))
        return {tp: o.offset for tp, o in got.items()}

    before = committed()
    c0, c1 = before[("events", 0)], before[("events", 1)]
    assert c0 + (c1 - 4) == 30  # partition 1 starts at 4
    d = run(acts.describe_reset_offsets("readers", "earliest"))
    assert d.ok, d.message
    assert d.message == (
        "Reset group 'readers' to earliest on 2 partitions (new offsets are clamped to "
        f"each log):\n  events-0: {c0} -> 0\n  events-1: {c1} -> 4"
    )
    assert committed() == before  # describing commits nothing
    r = run(acts.reset_offsets("readers", "earliest"))
    assert r.ok and r.message == "Reset group 'readers' to earliest on 2 partitions."
    assert committed() == {("events", 0): 0, ("events", 1): 4}

    assert run(acts.reset_offsets("readers", "latest")).ok
    assert committed() == {("events", 0): 20, ("events", 1): 20}

    d = run(acts.describe_reset_offsets("readers", "offset", 2))
    assert d.message.endswith("  events-0: 20 -> 2\n  events-1: 20 -> 4")  # clamped
    assert run(acts.reset_offsets("readers", "offset", 2)).ok
    assert committed() == {("events", 0): 2, ("events", 1): 4}

    d = run(acts.describe_reset_offsets("readers", "timestamp", base + 30_000))
    assert d.ok and "the first offset at or after 2023-11-14T22:13:50.000+00:00" in d.message
    assert run(acts.reset_offsets("readers", "timestamp", base + 30_000)).ok
    assert committed() == {("events", 0): 10, ("events", 1): 10}
    # Past every record: the log end.
    assert run(acts.reset_offsets("readers", "timestamp", base + 3_600_000)).ok
    assert committed() == {("events", 0): 20, ("events", 1): 20}

    # One topic only, and what the sampler then shows.
    run(_setup(boot, lambda c: c.create_topics([NewTopic("other", 1, 1)])))
    produce(boot, "other", {0: 3})
    d = run(acts.describe_reset_offsets("readers", "earliest", topics=["other"]))
    assert d.ok and d.message.endswith(
        "on 1 partition (new offsets are clamped to each log):\n  other-0: none -> 0"
    )
    assert run(acts.reset_offsets("readers", "earliest", topics=["other"])).ok
    sampler = ClusterSampler(boot)
    try:
        g = sample(sampler).group("readers")
        assert g is not None
        assert [(x.topic, x.partition, x.committed, x.lag) for x in g.lags] == [
            ("events", 0, 20, 0),
            ("events", 1, 20, 0),
            ("other", 0, 0, 3),
        ]
    finally:
        run(sampler.close())

    bad = run(acts.describe_reset_offsets("readers", "offset"))
    assert not bad.ok and bad.message == "a reset to offset needs a value"
    bad = run(acts.reset_offsets("readers", "sideways"))
    assert not bad.ok and "earliest, latest, offset, timestamp" in bad.message
    nothing = run(acts.describe_reset_offsets("nobody", "earliest"))
    assert nothing.ok and nothing.message == (
        "Group 'nobody' has no committed offsets: nothing to reset."
    )
    assert not run(acts.reset_offsets("nobody", "earliest")).ok
    assert EARLIEST == -2
