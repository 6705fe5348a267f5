"""Unclean leader election on one topic: the checker reports exactly the loss Kafka's
contract allows, and `kt replica diff` over the brokers' log dirs agrees.

A scripted, deterministic scenario on the shared 3-broker cluster. Topic `unclean`
has one partition on brokers [1, 2], min.insync.replicas=1 and
unclean.leader.election.enable=true:

1. acks=all writes while both replicas are in sync (kept: broker 2 has them);
2. broker 2 is killed, the ISR shrinks to [1]; acks=all writes go on, acknowledged
   by broker 1 alone: Kafka's contract allows losing exactly these;
3. broker 1 stops; broker 2 comes back and is elected uncleanly (it lacks step 2);
   more writes land on it, at the offsets step 2 had used;
4. with both brokers stopped, `kt replica diff` finds broker 1's step-2 batches
   missing from the new leader's log (exit 1: below the high watermark broker 1
   recorded); then both start, broker 1 truncates and follows, and the checker's
   final read judges the history.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from cluster_harness import (
    create_topic,
    heal,
    live_bootstrap,
    partition_state,
    wait_for_isr,
    wait_zk_leader,
)

from kt.tools.local_cluster import LocalCluster

from .checker import check, format_table
from .history import History

pytestmark = [pytest.mark.integration, pytest.mark.cluster]

TOPIC = "unclean"
STEP = 20  # records per step


def _produce(history: History, bootstrap: str, proc: str, first_seq: int) -> list[str]:
    """STEP acks=all sends, one at a time (flushed): each acknowledged at its offset."""
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 0,
                  "message.timeout.ms": 20000, "log_level": 0})  # fmt: skip
    values = []
    for seq in range(first_seq, first_seq + STEP):
        value = f"{proc}-{seq}"
        history.record(proc, "send", "invoke", value=value, partition=0, seq=seq)
        got: list[Any] = []
        p.produce(TOPIC, value.encode(), partition=0, on_delivery=lambda *a, g=got: g.extend(a))
        p.flush(30)
        err, msg = got
        assert err is None, f"{value}: {err}"
        history.record(proc, "send", "ok", value=value, partition=0, offset=msg.offset())
        values.append(value)
    return values


def _final_read(history: History, bootstrap: str) -> None:
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "unclean-final",
                  "enable.auto.commit": False, "log_level": 0})  # fmt: skip
    try:
        end = c.get_watermark_offsets(TopicPartition(TOPIC, 0), timeout=10)[1]
        c.assign([TopicPartition(TOPIC, 0, OFFSET_BEGINNING)])
        recs: list[list[Any]] = []
        while len(recs) < end:
            for m in c.consume(100, 1.0):
                if m.error() is None:
                    recs.append([0, m.offset(), m.value().decode()])
        history.record("final", "final-read", "ok", records=recs, end={"0": end})
    finally:
        c.close()


def _replica_diff(cluster: LocalCluster) -> tuple[int, dict[str, Any]]:
    dirs = [str(cluster.broker(b).data_dir / f"{TOPIC}-0") for b in (1, 2)]
    kt = Path(sys.executable).with_name("kt")
    out = subprocess.run([str(kt), "replica", "diff", "--json", *dirs],
                         capture_output=True, text=True, timeout=60)  # fmt: skip
    return out.returncode, json.loads(out.stdout)


@pytest.mark.timeout(300)
def test_unclean_election_loses_exactly_what_kafka_allows(
    cluster: LocalCluster, tmp_path: Path
) -> None:
    history = History(tmp_path / "history.jsonl")
    configs = ["min.insync.replicas=1", "unclean.leader.election.enable=true"]
    create_topic(cluster, TOPIC, "--replica-assignment", "1:2",
                 *(a for c in configs for a in ("--config", c)))  # fmt: skip
    assert partition_state(cluster, TOPIC, 0)["leader"] == 1  # type: ignore[index]
    try:
        kept = _produce(history, live_bootstrap(cluster), "in-sync", 0)
        cluster.stop_broker(2, kill=True)
        wait_for_isr(cluster, TOPIC, 0, [1])
        history.record("nemesis", "start", "info", fault="isr-shrunk-to-leader")
        allowed_loss = _produce(history, live_bootstrap(cluster), "leader-alone", 0)
        cluster.stop_broker(1)  # SIGTERM: its checkpoints (high watermark) are written
        history.record("nemesis", "start", "info", fault="leader-gone")
        cluster.start_broker(2, timeout=60)
        assert wait_zk_leader(cluster, TOPIC, 0, not_in=(-1, 1)) == 2  # unclean
        history.record("nemesis", "info", "info", fault="unclean-election", leader=2)
        after = _produce(history, live_bootstrap(cluster), "new-leader", 0)
        cluster.stop_broker(2)
        code, diff = _replica_diff(cluster)
        # the new leader first: were broker 1 alone again, it would be elected
        # uncleanly in turn and the new leader's records would go instead
        cluster.start_broker(2, timeout=60)
        assert wait_zk_leader(cluster, TOPIC, 0, not_in=(-1, 1)) == 2
        cluster.start_broker(1, timeout=60)
        wait_for_isr(cluster, TOPIC, 0, [1, 2])
    finally:
        heal(cluster)
    _final_read(history, live_bootstrap(cluster))
    history.close()

    verdict = check(history.events)
    table = format_table(verdict)
    lost = {a.message.split("'")[1]: a for a in verdict.anomalies if a.kind == "lost"}
    # exactly the records acknowledged by the leader alone are lost...
    assert set(lost) == set(allowed_loss), table
    # ...their offsets now hold the new leader's records (seen twice: an
    # inconsistent offset each), and nothing else is wrong
    kinds = {a.kind for a in verdict.anomalies}
    assert kinds == {"lost", "inconsistent-offset"}, table
    acked = {e["value"]: e["offset"] for e in history.events if e["f"] == "send"
             and e["type"] == "ok"}  # fmt: skip
    lost_offsets = sorted(acked[v] for v in allowed_loss)
    assert lost_offsets == list(range(len(kept), len(kept) + STEP))
    assert all(acked[v] < len(kept) for v in kept)
    assert sorted(acked[v] for v in after) == lost_offsets  # the new leader reused them

    # kt replica diff, run while both brokers were down, names the same offsets
    assert code == 1, diff
    [part] = diff["partitions"]
    by_path = {r["path"]: r for r in part["replicas"]}
    b1 = by_path[str(cluster.broker(1).data_dir / f"{TOPIC}-0")]
    assert part["reference"] == str(cluster.broker(2).data_dir / f"{TOPIC}-0")
    offsets = [o for first, last in b1["acknowledged_lost"] for o in range(first, last + 1)]
    assert offsets == lost_offsets, json.dumps(diff, indent=1)[:3000]
