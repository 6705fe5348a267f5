"""Partition reassignment on 4 real brokers and ZooKeeper (Kafka's ducktape
reassign_partitions_test and throttling_test, as kt's tests).

- 20 partitions with RF 3 are shuffled (every partition moves a replica) while
  idempotent acks=all producers (librdkafka and kafka-python) run; the controller
  is killed -9 and another broker restarted cleanly during the throttled copy;
  `--verify` is polled to completion: every acknowledged record is read exactly
  once at its acknowledged offset, replicas and ISRs are the plan's, and the
  throttles are gone from ZooKeeper.
- A replica removed while its broker is down is deleted when the broker returns.
- A throttled copy of a known amount of data takes at least 0.9 x bytes / rate,
  and `--progress --watch --json` accounts for every byte.

The cluster's replication quota measures over 2 windows of 1 s (Kafka's
replication.quota.window.num/size.seconds) and followers fetch at most 16 KiB per
partition, so a throttle's initial burst is about one second's worth: the duration
bound then holds for a copy of a few dozen seconds' worth, not minutes.
"""

from __future__ import annotations

import json
import random
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from cluster_harness import (
    BackgroundProducer,
    controller_id,
    create_topic,
    kt,
    live_bootstrap,
    log_tail,
    partition_state,
    start_cluster,
    wait_for,
    wait_registered,
    wait_unregistered,
    zk_json,
)

from kt.tools.local_cluster import LocalCluster

pytestmark = [pytest.mark.integration, pytest.mark.cluster]

BROKERS = [1, 2, 3, 4]


@pytest.fixture(scope="module")
def cluster4(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    c = start_cluster(
        tmp_path_factory.mktemp("reassign4") / "c",
        brokers=4,
        racks=None,
        replication_quota_window_num="2",
        replication_quota_window_size_seconds="1",
        replica_fetch_max_bytes="16384",
        auto_leader_rebalance_enable="false",
    )
    yield c
    c.stop(kill=True)


def reassign(c: LocalCluster, *args: str) -> Any:
    return kt("reassign-partitions", "-b", live_bootstrap(c), *args)


def plan_json(plan: dict[tuple[str, int], list[int]]) -> str:
    parts = [{"topic": t, "partition": p, "replicas": r} for (t, p), r in sorted(plan.items())]
    return json.dumps({"version": 1, "partitions": parts})


def assignment(c: LocalCluster, topic: str) -> dict[int, list[int]]:
    doc = zk_json(c, f"/brokers/topics/{topic}")
    return {int(p): r for p, r in doc["partitions"].items()}


def throttle_configs(c: LocalCluster, topic: str) -> dict[str, dict[str, str]]:
    """The throttle settings left in ZooKeeper: the topic's and each broker's."""
    out = {}
    for path in [f"/config/topics/{topic}"] + [f"/config/brokers/{b}" for b in BROKERS]:
        doc = zk_json(c, path) or {}
        found = {k: v for k, v in doc.get("config", {}).items() if "throttled" in k}
        if found:
            out[path] = found
    return out


def prefill(bootstrap: str, topic: str, partitions: int, per_partition: int,
            size: int) -> dict[tuple[int, bytes], int]:  # fmt: skip
    """Acked records (partition, value) -> offset, written with acks=all."""
    from confluent_kafka import Producer

    acked: dict[tuple[int, bytes], int] = {}
    p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True,
                  "linger.ms": 5, "batch.size": 16384})  # fmt: skip

    def done(err: Any, msg: Any) -> None:
        assert err is None, err
        acked[(msg.partition(), msg.value())] = msg.offset()

    pad = b"." * size
    for n in range(per_partition):
        for part in range(partitions):
            p.produce(topic, value=b"fill-%d-%06d-" % (part, n) + pad, partition=part,
                      on_delivery=done)  # fmt: skip
            p.poll(0)
    assert p.flush(60) == 0
    return acked


def read_partitions(bootstrap: str, topic: str, ends: dict[int, int]) -> dict[int, list[Any]]:
    """Every record of each partition up to `ends` (the end offsets), one consumer."""
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

    con = Consumer({"bootstrap.servers": bootstrap, "group.id": "kt-reassign4-unused",
                    "enable.auto.commit": False, "fetch.wait.max.ms": 100})  # fmt: skip
    con.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in ends])
    out: dict[int, list[Any]] = {p: [] for p in ends}
    deadline = time.monotonic() + 90
    try:
        while time.monotonic() < deadline and any(
            (out[p][-1][0] + 1 if out[p] else 0) < end for p, end in ends.items()
        ):
            for m in con.consume(num_messages=1000, timeout=0.5):
                if m.error() is None:
                    out[m.partition()].append((m.offset(), m.value()))
    finally:
        con.close()
    return out


def end_offsets(bootstrap: str, topic: str, partitions: int) -> dict[int, int]:
    from confluent_kafka import Consumer, TopicPartition

    con = Consumer({"bootstrap.servers": bootstrap, "group.id": "kt-reassign4-unused"})
    try:
        return {p: con.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1]
                for p in range(partitions)}  # fmt: skip
    finally:
        con.close()


def shuffled(current: dict[int, list[int]], rng: random.Random) -> dict[int, list[int]]:
    """Each partition on a different set of 3 brokers (one replica moves), in a
    random order (so preferred leaders move too)."""
    out = {}
    for p, replicas in current.items():
        left_out = next(iter(set(BROKERS) - set(replicas)))
        keep = rng.choice(replicas)
        target = [b for b in BROKERS if b != keep] if keep != left_out else BROKERS[:3]
        rng.shuffle(target)
        assert set(target) != set(replicas) and len(set(target)) == 3
        out[p] = target
    return out


def bounce_kill(c: LocalCluster, broker_id: int) -> None:
    """kill -9, wait until ZooKeeper noticed (its session expired), start again."""
    c.stop_broker(broker_id, kill=True)
    wait_unregistered(c, broker_id, timeout=30)
    c.start_broker(broker_id, timeout=90)
    wait_registered(c, broker_id)


def test_shuffle_twenty_partitions_under_load_with_bounces(
    cluster4: LocalCluster, tmp_path: Path
) -> None:
    c = cluster4
    topic, n = "shuffle", 20
    create_topic(c, topic, "--partitions", str(n), "--replication-factor", "3",
                 "--config", "min.insync.replicas=2")  # fmt: skip
    acked = prefill(live_bootstrap(c), topic, n, 40, 2000)  # ~1.6 MB to copy once each
    producers = [
        BackgroundProducer(client, live_bootstrap(c), topic, f"{client}-{p}", partition=p,
                           rate=25).start()
        for client, p in [("confluent", 0), ("confluent", 7), ("kafka-python", 13),
                          ("kafka-python", 19)]
    ]  # fmt: skip
    try:
        current = assignment(c, topic)
        plan = shuffled(current, random.Random(11))
        plan_file = tmp_path / "plan.json"
        plan_file.write_text(plan_json({(topic, p): r for p, r in plan.items()}))
        props = tmp_path / "admin.properties"
        props.write_text(f"bootstrap.servers={live_bootstrap(c)}\nclient.id=reassign-test\n")
        time.sleep(1)
        r = reassign(c, "--execute", "--reassignment-json-file", str(plan_file),
                     "--throttle", "300000")  # fmt: skip
        assert r.exit_code == 0, r.stderr
        assert r.stdout.splitlines()[-1].startswith("Successfully started partition")
        assert throttle_configs(c, topic), "no throttle was set"

        # The controller dies mid-reassignment (kill -9); another broker restarts
        # cleanly (controlled shutdown) while the copy goes on.
        first = controller_id(c)
        assert first is not None
        bounce_kill(c, first)
        other = next(b for b in BROKERS if b != first and b != controller_id(c))
        c.restart_broker(other, timeout=90)
        wait_registered(c, other)

        def verified() -> bool:
            # through the properties file, as an operator would
            r = kt("reassign-partitions", "--verify", "--reassignment-json-file",
                   str(plan_file), "--command-config", str(props),
                   "-b", live_bootstrap(c))  # fmt: skip
            assert r.exit_code == 0, r.stderr
            return "is still in progress." not in r.stdout

        wait_for(verified, "the reassignment to complete", timeout=120, interval=1.0)
    finally:
        for prod in producers:
            prod.stop()
    for prod in producers:
        assert not prod.errors, prod.errors[:5]
        assert prod.acked, f"{prod.tag} had nothing acknowledged"

    # replicas, and (once the bounced brokers caught up) ISRs, as planned
    assert assignment(c, topic) == plan

    def isrs_match() -> bool:
        for p, target in plan.items():
            s = partition_state(c, topic, p)
            if s is None or set(s["isr"]) != set(target) or s["leader"] not in target:
                return False
        return True

    wait_for(isrs_match, "every ISR to be its planned replica set", timeout=60)
    assert throttle_configs(c, topic) == {}
    r = reassign(c, "--list")
    assert r.stdout == "No partition reassignments found.\n"

    # every acknowledged record, exactly once, at its acknowledged offset
    ends = end_offsets(live_bootstrap(c), topic, n)
    records = read_partitions(live_bootstrap(c), topic, ends)
    expected = dict(acked)
    for prod in producers:
        expected.update({(prod.partition, v): off for v, off in prod.acked.items()})
    seen: dict[tuple[int, bytes], list[int]] = {}
    for p, recs in records.items():
        for off, value in recs:
            seen.setdefault((p, value), []).append(off)
    for key, off in expected.items():
        assert seen.get(key) == [off], (key, off, seen.get(key))


def test_removed_replica_on_a_dead_broker_is_deleted_when_it_returns(
    cluster4: LocalCluster, tmp_path: Path
) -> None:
    c = cluster4
    create_topic(c, "stray", "--replica-assignment", "3:4")
    prefill(live_bootstrap(c), "stray", 1, 50, 100)
    replica_dir = c.broker(4).data_dir / "stray-0"
    assert replica_dir.is_dir()
    c.stop_broker(4, kill=True)
    wait_unregistered(c, 4, timeout=30)
    plan = tmp_path / "stray.json"
    plan.write_text(plan_json({("stray", 0): [1, 2]}))
    try:
        r = reassign(c, "--execute", "--reassignment-json-file", str(plan))
        assert r.exit_code == 0, r.stderr

        def done() -> bool:
            r = reassign(c, "--verify", "--reassignment-json-file", str(plan))
            return "Reassignment of partition stray-0 is completed." in r.stdout

        wait_for(done, "the reassignment without broker 4", timeout=60, interval=1.0)
        assert replica_dir.is_dir()  # broker 4 was down: nobody could delete it
    finally:
        c.start_broker(4, timeout=90)
    wait_registered(c, 4)
    wait_for(lambda: not replica_dir.exists(), "broker 4 to delete its stray replica",
             timeout=30)  # fmt: skip
    assert "deleting stray replica stray-0" in log_tail(c, 4, 400)


def test_throttled_copy_takes_at_least_bytes_over_rate_and_progress_adds_up(
    cluster4: LocalCluster, tmp_path: Path
) -> None:
    c = cluster4
    rate = 100_000
    create_topic(c, "thr", "--replica-assignment", "1")
    prefill(live_bootstrap(c), "thr", 1, 2500, 1000)  # ~2.6 MB: ~26 s at 100 kB/s
    r = kt("log-dirs", "describe", "-b", live_bootstrap(c), "--broker-list", "1",
           "--topic-list", "thr", "--json")  # fmt: skip
    assert r.exit_code == 0, r.stderr
    size = _partition_size(r.stdout, "thr", 0)
    assert size > 2_500_000
    plan = tmp_path / "thr.json"
    plan.write_text(plan_json({("thr", 0): [2]}))
    r = reassign(c, "--execute", "--reassignment-json-file", str(plan), "--throttle", str(rate))
    assert r.exit_code == 0, r.stderr
    started = time.monotonic()  # the reassignment began before this
    progress = subprocess.Popen(
        [sys.executable, "-m", "kt.cli", "reassign-partitions", "--progress", "--watch",
         "--json", "--interval", "0.5", "-b", live_bootstrap(c)],
        stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    last_in_progress = started
    try:
        while True:
            r = reassign(c, "--verify", "--reassignment-json-file", str(plan),
                         "--preserve-throttles")  # fmt: skip
            if "is completed." in r.stdout:
                break
            assert "is still in progress." in r.stdout, r.stdout
            last_in_progress = time.monotonic()
            assert last_in_progress - started < 120, "the throttled copy did not finish"
            time.sleep(0.5)
        out, _ = progress.communicate(timeout=30)
    finally:
        progress.kill()
    # a lower bound of the copy's duration: it began before `started` and was still
    # going at `last_in_progress`
    took = last_in_progress - started
    assert took >= 0.9 * size / rate, f"{size} B at {rate} B/s took only {took:.1f}s"

    samples = [json.loads(line)["replicas"] for line in out.splitlines()]
    rows = [x for s in samples for x in s]
    copying = [x for x in rows if x["state"] == "copying"]
    assert copying, out
    for x in copying:
        assert (x["partition"], x["broker"], x["total"]) == ("thr-0", 2, size), x
        assert x["copied"] + x["remaining"] == size and 0 <= x["copied"] <= size, x
    # (a sample may see the whole copy before the new replica joins the ISR)
    copied = [x["copied"] for x in copying]
    assert copied == sorted(copied), copied
    final = [x for x in rows if x["state"] != "copying"]
    assert final == [{**final[0], "state": "completed", "copied": size, "total": size,
                      "remaining": 0}], final  # fmt: skip
    r = reassign(c, "--verify", "--reassignment-json-file", str(plan))
    assert "Clearing topic-level throttles on topic thr" in r.stdout


def _partition_size(doc: str, topic: str, partition: int) -> int:
    """The replica's size in kafka-log-dirs.sh's JSON (`kt log-dirs describe --json`)."""
    sizes = [
        p["size"]
        for b in json.loads(doc)["brokers"]
        for d in b["logDirs"]
        for p in d["partitions"]
        if p["partition"] == f"{topic}-{partition}"
    ]
    assert sizes, doc
    return int(max(sizes))
