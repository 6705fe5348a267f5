"""A Jepsen-style fault campaign against a 3-broker kt cluster on loopback.

The cluster's links go through harness-controlled proxies (`proxy.ProxySet`):

- broker N listens on its own port but advertises its proxy `bN`, so clients *and*
  the other brokers' fetchers reach N only through `bN`: cutting `bN` isolates N's
  inbound side (nobody can produce to it or replicate from it, while N itself can
  still fetch from the others and talk to ZooKeeper);
- broker N's `zookeeper.connect` points at its own proxy `zkN`, so N alone can lose
  ZooKeeper (its session expires while the others keep theirs);
- the proxies know which broker process opened each connection (`proxy.socket_owner`),
  so `bN` can refuse broker M alone: N and M stop replicating from each other while
  clients, the third broker and ZooKeeper still reach both.

A workload (two idempotent acks=all producers, confluent-kafka and kafka-python, and
a consumer group committing offsets, plus `txn_workload`'s transactional producer and
READ_COMMITTED consumer on a second topic) runs while a seeded nemesis injects faults one
at a time and heals each; at the end everything is healed, every partition is read
from its start, and `checker.check` judges the recorded history.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import random
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from broker_harness import check_event_loop

from kt.tools.local_cluster import ClusterError, LocalBroker, LocalCluster, port_in_use

from .checker import Verdict, check, format_table, history_slice
from .clients import ClientThreads
from .history import History
from .proxy import ProxySet, socket_owner
from .txn_workload import TxnWorkload, create_txn_topic, txn_final_read

TOPIC = "jepsen"
PARTITIONS = 3
SESSION_MS = 6000
GROUP = "checker-group"

FAULT_KINDS = (
    "kill-leader",
    "kill-follower",
    "kill-controller",
    "kill-two",
    "pause-leader",
    "zk-partition",
    "isolate-leader",
    "partition-broker",
    "blackhole-broker",
    "rolling-restart",
    "partition-pair",
    "overlap-pause-partition",
    "zk-restart",
)

BROKER_PROPS = {
    "zookeeper.session.timeout.ms": str(SESSION_MS),
    "replica.lag.time.max.ms": "3000",
    "min.insync.replicas": "2",
    "default.replication.factor": "3",
    "offsets.topic.num.partitions": "3",
    "offsets.topic.replication.factor": "3",
    "group.initial.rebalance.delay.ms": "0",
    "unclean.leader.election.enable": "false",
    "controlled.shutdown.retry.backoff.ms": "500",
    # the transactional workload's coordinator: few partitions, replicated as the data
    "transaction.state.log.num.partitions": "3",
    "transaction.state.log.replication.factor": "3",
    "transaction.state.log.min.isr": "2",
}


class ProxiedCluster(LocalCluster):
    """A LocalCluster whose brokers advertise proxies and reach ZooKeeper through one
    proxy each (see the module docstring)."""

    proxies: ProxySet

    def attach(self, proxies: ProxySet) -> None:
        """Create the proxies (the ZooKeeper port must be known: call after create)."""
        self.proxies = proxies
        for b in self.brokers:
            proxies.add(f"b{b.broker_id}", b.port)

    def _broker_args(self, b: LocalBroker) -> list[str]:
        args = super()._broker_args(b)
        assert self.zookeeper is not None
        zk_link = self.proxies.links.get(f"zk{b.broker_id}")
        if zk_link is None:
            zk_link = self.proxies.add(f"zk{b.broker_id}", self.zookeeper.port)
        adv = self.proxies.links[f"b{b.broker_id}"].listen_port
        return [
            *args,
            "--override",
            f"advertised.listeners=PLAINTEXT://127.0.0.1:{adv}",
            "--override",
            f"zookeeper.connect=127.0.0.1:{zk_link.listen_port}{self.chroot}",
        ]

    def broker_pids(self) -> dict[int, str]:
        """pid -> "brokerN" for the broker processes (the proxies' source names)."""
        return {b.pid: f"broker{b.broker_id}" for b in self.brokers if b.pid}

    @property
    def proxied_bootstrap(self) -> str:
        """The client bootstrap list: every broker's proxy."""
        return ",".join(
            f"127.0.0.1:{self.proxies.links[f'b{b.broker_id}'].listen_port}" for b in self.brokers
        )


# --- ZooKeeper views ----------------------------------------------------------------------


class ZkView:
    """Reads who leads what and who controls, straight from ZooKeeper (kazoo)."""

    def __init__(self, connect: str) -> None:
        from kazoo.client import KazooClient  # type: ignore[import-untyped]

        self.zk = KazooClient(hosts=connect, timeout=5.0)
        self.zk.start(timeout=10)

    def _json(self, path: str) -> Any:
        try:
            data, _ = self.zk.get(path)
            return json.loads(data)
        except Exception:
            return None

    def controller(self) -> int | None:
        """The broker id in /controller."""
        doc = self._json("/controller")
        return int(doc["brokerid"]) if doc else None

    def partition_state(self, p: int) -> dict[str, Any] | None:
        """/brokers/topics/T/partitions/P/state."""
        return self._json(f"/brokers/topics/{TOPIC}/partitions/{p}/state")  # type: ignore[no-any-return]

    def registered(self) -> set[int]:
        """Ids under /brokers/ids."""
        try:
            return {int(c) for c in self.zk.get_children("/brokers/ids")}
        except Exception:
            return set()

    def close(self) -> None:
        """Close the session."""
        with contextlib.suppress(Exception):
            self.zk.stop()
            self.zk.close()


# --- workload -----------------------------------------------------------------------------


class Workload(ClientThreads):
    """Producers and a consumer writing to / reading from TOPIC, recording everything."""

    def start(self, rate: float = 40.0) -> None:
        """Start the producer and consumer threads (each writes `rate` values/s at most)."""
        # kafka-python logs every refused connection and retry at WARNING/ERROR: under
        # faults that is expected, and the history records what matters
        logging.getLogger("kafka").setLevel(logging.CRITICAL)
        logging.getLogger("kazoo").setLevel(logging.CRITICAL)  # ZkView's, during zk-restart
        self.run_loops(
            [
                ("p-confluent", self._confluent_producer),
                ("p-kafkapython", self._kafkapython_producer),
                ("c-group", self._consumer),
            ],
            rate,
        )

    def join(self, timeout: float = 75.0) -> None:
        """Stop sending and wait for outstanding acknowledgements."""
        self.join_all(timeout)

    def _confluent_producer(self, proc: str, rate: float) -> None:
        from confluent_kafka import KafkaException, Producer

        p = Producer(
            {
                "bootstrap.servers": self.bootstrap,
                "enable.idempotence": True,
                "acks": "all",
                "message.timeout.ms": 15000,
                "request.timeout.ms": 4000,
                "retry.backoff.ms": 200,
                "linger.ms": 5,
                "socket.connection.setup.timeout.ms": 3000,
                "log_level": 3,
            }
        )
        seq = 0
        while not self.stop.is_set():
            value = f"{proc}-{seq}"
            part = seq % PARTITIONS

            def done(err: Any, msg: Any, value: str = value) -> None:
                if err is None:
                    self.history.record(
                        proc, "send", "ok", value=value,
                        partition=msg.partition(), offset=msg.offset(),
                    )  # fmt: skip
                else:
                    self.history.record(proc, "send", "info", value=value, error=err.name())

            self.history.record(proc, "send", "invoke", value=value, partition=part, seq=seq)
            try:
                p.produce(TOPIC, value.encode(), partition=part, on_delivery=done)
            except (BufferError, KafkaException) as exc:
                # not enqueued (queue full, or the metadata said the topic is unknown):
                # nothing can be written
                err = exc.args[0].name() if isinstance(exc, KafkaException) else "BufferError"
                self.history.record(proc, "send", "fail", value=value, error=err)
            seq += 1
            p.poll(1.0 / rate)
        p.flush(30)

    def _kafkapython_producer(self, proc: str, rate: float) -> None:
        from kafka import KafkaProducer

        p = KafkaProducer(
            bootstrap_servers=self.bootstrap.split(","),
            enable_idempotence=True,
            acks="all",
            request_timeout_ms=4000,
            # Longer than any fault keeps a partition unavailable: in kafka-python
            # 3.0.12 a batch that expires after it was sent makes the producer drop
            # its producer id without asking for a new one (reset_producer_id leaves
            # the state READY, and init_producer_id only runs from UNINITIALIZED), so
            # no send resolves ever again (`_livelocked` below). Kafka's Java
            # producer returns to UNINITIALIZED there (KAFKA-7737).
            delivery_timeout_ms=120000,
            retry_backoff_ms=200,
            linger_ms=5,
            max_block_ms=5000,
        )
        seq = 0
        pending: dict[str, int] = {}  # value -> partition, until the future resolves
        while not self.stop.is_set():
            value = f"{proc}-{seq}"
            part = seq % PARTITIONS
            self.history.record(proc, "send", "invoke", value=value, partition=part, seq=seq)
            pending[value] = part

            def ok(md: Any, value: str = value) -> None:
                pending.pop(value, None)
                self.history.record(
                    proc, "send", "ok", value=value, partition=md.partition, offset=md.offset
                )

            def bad(exc: BaseException, value: str = value) -> None:
                pending.pop(value, None)
                self.history.record(proc, "send", "info", value=value, error=type(exc).__name__)

            try:
                fut = p.send(TOPIC, value.encode(), partition=part)
                fut.add_callback(ok)
                fut.add_errback(bad)
            except Exception as exc:  # not enqueued: nothing can be written
                self.history.record(proc, "send", "fail", value=value, error=type(exc).__name__)
            seq += 1
            time.sleep(1.0 / rate)
        try:
            p.flush(60)
        except Exception as exc:
            # Say which sends never resolved (neither acknowledged nor failed), so a
            # stuck client can be told from a partition that stopped answering.
            left = dict(pending)
            per_partition = {q: sum(1 for v in left.values() if v == q) for q in set(left.values())}
            raise RuntimeError(
                f"{type(exc).__name__} after 60 s: {len(left)} sends unresolved "
                f"(per partition {dict(sorted(per_partition.items()))}; "
                f"first {sorted(left, key=lambda v: int(v.rsplit('-', 1)[1]))[:3]})"
                + _livelocked(p)
            ) from exc
        p.close(5)

    def _consumer(self, proc: str, rate: float) -> None:
        from confluent_kafka import Consumer, TopicPartition

        c = Consumer(
            {
                "bootstrap.servers": self.bootstrap,
                "group.id": GROUP,
                "enable.auto.commit": False,
                "auto.offset.reset": "earliest",
                "session.timeout.ms": 10000,
                "socket.connection.setup.timeout.ms": 3000,
                "log_level": 3,
            }
        )
        c.subscribe([TOPIC])
        last_commit = last_read = time.monotonic()
        try:
            while not self.stop.is_set():
                msgs = c.consume(200, 0.5)
                recs = [
                    [m.partition(), m.offset(), m.value().decode()]
                    for m in msgs
                    if m.error() is None
                ]
                if recs:
                    self.history.record(proc, "poll", "ok", records=recs)
                now = time.monotonic()
                if now - last_commit >= 1.0:
                    last_commit = now
                    self._commit(c, proc)
                if now - last_read >= 3.0:
                    last_read = now
                    parts = [TopicPartition(TOPIC, p) for p in range(PARTITIONS)]
                    self.history.record(proc, "committed", "invoke", group=GROUP)
                    try:
                        got = c.committed(parts, timeout=5)
                        offs = {str(tp.partition): tp.offset for tp in got if tp.error is None}
                        self.history.record(proc, "committed", "ok", group=GROUP, offsets=offs)
                    except Exception as exc:
                        self.history.record(
                            proc, "committed", "fail", group=GROUP, error=str(exc)[:80]
                        )
        finally:
            with contextlib.suppress(Exception):
                c.close()

    def _commit(self, c: Any, proc: str) -> None:
        try:
            positions = [tp for tp in c.position(c.assignment()) if tp.offset >= 0]
        except Exception:
            return
        if not positions:
            return
        want = {str(tp.partition): tp.offset for tp in positions}
        self.history.record(proc, "commit", "invoke", group=GROUP, offsets=want)
        try:
            got = c.commit(offsets=positions, asynchronous=False)
        except Exception as exc:
            self.history.record(proc, "commit", "fail", group=GROUP, error=str(exc)[:80])
            return
        offs = {str(tp.partition): tp.offset for tp in got or [] if tp.error is None}
        self.history.record(proc, "commit", "ok", group=GROUP, offsets=offs)


def _livelocked(producer: Any) -> str:
    """Why a kafka-python producer stopped resolving sends, when it is its own
    livelock: no producer id, and a state from which it never asks for one."""
    tm = getattr(producer, "_transaction_manager", None)
    if tm is None or tm.has_producer_id():
        return ""
    state = getattr(getattr(tm, "_current_state", None), "name", "?")
    return (
        f"; the client dropped its producer id and, in state {state}, never asks for a "
        "new one (kafka-python reset_producer_id after an expired batch): a client "
        "livelock, no broker answer pending"
    )


def final_read(history: History, bootstrap: str, timeout: float = 45.0) -> bool:
    """Read every partition from its start to its end; records a final-read event.
    False (and a `fail` event) when some partition could not be read in time."""
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

    c = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "final-reader",
            "enable.auto.commit": False,
            "socket.connection.setup.timeout.ms": 3000,
            "log_level": 3,
        }
    )
    deadline = time.monotonic() + timeout
    ends: dict[int, int] = {}
    try:
        for p in range(PARTITIONS):
            while p not in ends:
                try:
                    ends[p] = c.get_watermark_offsets(TopicPartition(TOPIC, p), timeout=5)[1]
                except Exception as exc:
                    if time.monotonic() > deadline:
                        history.record("final", "final-read", "fail", error=str(exc)[:120])
                        return False
                    time.sleep(0.5)
        c.assign([TopicPartition(TOPIC, p, OFFSET_BEGINNING) for p in range(PARTITIONS)])
        recs: list[list[Any]] = []
        nxt = {p: 0 for p in range(PARTITIONS)}
        while any(nxt[p] < ends[p] for p in ends) and time.monotonic() < deadline:
            for m in c.consume(500, 0.5):
                if m.error() is None:
                    recs.append([m.partition(), m.offset(), m.value().decode()])
                    nxt[m.partition()] = m.offset() + 1
        short = {p: (nxt[p], ends[p]) for p in ends if nxt[p] < ends[p]}
        history.record(
            "final", "final-read", "ok" if not short else "fail",
            records=recs, end={str(p): e for p, e in ends.items()},
            **({"error": f"read stopped short: {short}"} if short else {}),
        )  # fmt: skip
        return not short
    finally:
        with contextlib.suppress(Exception):
            c.close()


# --- nemesis --------------------------------------------------------------------------------


@dataclass
class Nemesis:
    """Injects one fault at a time, chosen by a seeded RNG, and heals it."""

    cluster: ProxiedCluster
    history: History
    rng: random.Random
    zk: ZkView
    counts: Counter[str] = field(default_factory=Counter)
    problems: list[str] = field(default_factory=list)

    def _note(self, f: str, **fields: Any) -> None:
        self.history.record("nemesis", f, "info", **fields)

    def _leader(self) -> tuple[int | None, list[int]]:
        p = self.rng.randrange(PARTITIONS)
        st = self.zk.partition_state(p) or {}
        leader = st.get("leader")
        replicas = [b.broker_id for b in self.cluster.brokers]
        return (leader if isinstance(leader, int) and leader >= 0 else None), replicas

    def _pick(self, kind: str) -> int:
        leader, replicas = self._leader()
        if kind.endswith("leader") and leader is not None:
            return leader
        if kind == "kill-follower" and leader is not None:
            return self.rng.choice([r for r in replicas if r != leader])
        if kind == "kill-controller" or (kind == "zk-partition" and self.rng.random() < 0.5):
            ctl = self.zk.controller()
            if ctl is not None:
                return ctl
        return self.rng.choice(replicas)

    def inject(self, kind: str, hold: float) -> None:
        """Inject fault `kind`, hold it `hold` seconds, heal it, wait for recovery. A
        broker that does not stop or start as told is a finding (`problems`), not a
        harness crash: it is killed or started again and the campaign goes on."""
        self.counts[kind] += 1
        try:
            self._inject(kind, hold)
        except ClusterError as exc:
            broker = next((b for b in self.cluster.brokers if str(b.broker_id) in str(exc)), None)
            tail = _tail_lines(broker.log_path, 6) if broker else []
            self.problems.append(f"{kind}: {exc}")
            self._note("fault-error", fault=kind, error=str(exc), broker_log=tail)
            self._recover()

    def _recover(self) -> None:
        c = self.cluster
        c.proxies.heal()
        if c.zookeeper is not None and not c.zookeeper.running:
            with contextlib.suppress(ClusterError):
                _start_zookeeper_again(c)
        for b in c.brokers:
            with contextlib.suppress(ClusterError):
                if b.running:
                    c.resume_broker(b.broker_id)
                else:
                    c.start_broker(b.broker_id, timeout=60)
        self._await_registered(30)

    def _inject(self, kind: str, hold: float) -> None:
        c = self.cluster
        if kind == "zk-restart":
            # ZooKeeper itself goes away (killed or stopped) and comes back on the same
            # port and data: the brokers' sessions survive a short outage (the server
            # restores them from its snapshot), and every broker must reconnect
            assert c.zookeeper is not None
            kill = self.rng.random() < 0.5
            self._note("start", fault=kind, kill=kill)
            c.zookeeper.stop(kill=kill)
            time.sleep(hold)
            _start_zookeeper_again(c)
            self._note("stop", fault=kind)
            self._await_registered(30)
            return
        if kind == "partition-pair":
            a, b = self._pair()
            self._note("start", fault=kind, brokers=[a, b])
            self._cut_pair(a, b)
            time.sleep(hold)
            self._cut_pair(a, b, heal=True)
            self._note("stop", fault=kind, brokers=[a, b])
            self._await_registered(30)
            return
        if kind == "overlap-pause-partition":
            # two faults in force at once: a network fault on one broker (cut off from
            # everyone, blackholed, or cut from one peer), and, while it holds, another
            # broker paused past its session; healed in the reverse order
            net = self.rng.choice(("partition-broker", "blackhole-broker", "partition-pair"))
            a, b = self._pair()
            paused = self.rng.choice([x.broker_id for x in c.brokers if x.broker_id != a])
            self._note("start", fault=kind, net=net, brokers=[a, b], paused=paused)
            if net == "partition-pair":
                self._cut_pair(a, b)
            else:
                c.proxies.set_mode(f"b{a}", "refuse" if net == "partition-broker" else "blackhole")
            time.sleep(hold / 2)
            c.pause_broker(paused)
            time.sleep(SESSION_MS / 1000 + 2)
            c.resume_broker(paused)
            time.sleep(hold / 2)
            if net == "partition-pair":
                self._cut_pair(a, b, heal=True)
            else:
                c.proxies.set_mode(f"b{a}", "open")
            self._note("stop", fault=kind)
            self._await_registered(30)
            return
        if kind == "rolling-restart":
            self._note("start", fault=kind)
            for b in c.brokers:
                self._note("restart", fault=kind, broker=b.broker_id)
                c.restart_broker(b.broker_id, timeout=60)
                self._await_registered(30)
            self._note("stop", fault=kind)
            return
        if kind == "kill-two":
            # the leader and a follower at once: one replica is left (the partition is
            # unavailable for acks=all with min.insync.replicas=2); the follower comes
            # back first, then the old leader, which must not bring back anything the
            # survivors lack
            leader, replicas = self._leader()
            first = leader if leader is not None else self.rng.choice(replicas)
            second = self.rng.choice([r for r in replicas if r != first])
            self._note("start", fault=kind, brokers=[first, second])
            c.stop_broker(first, kill=True)
            c.stop_broker(second, kill=True)
            time.sleep(hold)
            c.start_broker(second, timeout=60)
            time.sleep(1.0)
            c.start_broker(first, timeout=60)
            self._note("stop", fault=kind, brokers=[first, second])
            self._await_registered(30)
            return
        target = self._pick(kind)
        self._note("start", fault=kind, broker=target)
        if kind.startswith("kill-"):
            c.stop_broker(target, kill=True)
            time.sleep(hold)
            c.start_broker(target, timeout=60)
        elif kind == "pause-leader":
            c.pause_broker(target)
            # longer than the session: the zombie wakes up after its session expired
            time.sleep(max(hold, SESSION_MS / 1000 + 2))
            c.resume_broker(target)
        elif kind == "zk-partition":
            c.proxies.set_mode(f"zk{target}", "blackhole")
            time.sleep(max(hold, SESSION_MS / 1000 + 2))
            c.proxies.set_mode(f"zk{target}", "open")
        elif kind == "isolate-leader":
            # a leader cut off from ZooKeeper and from everyone connecting to it: its
            # session expires, another replica is elected, and on healing the old
            # leader (which kept running) must step down and truncate what it alone has
            for name in (f"zk{target}", f"b{target}"):
                c.proxies.set_mode(name, "blackhole")
            time.sleep(max(hold, SESSION_MS / 1000 + 2))
            for name in (f"zk{target}", f"b{target}"):
                c.proxies.set_mode(name, "open")
        elif kind in ("partition-broker", "blackhole-broker"):
            mode = "refuse" if kind == "partition-broker" else "blackhole"
            c.proxies.set_mode(f"b{target}", mode)
            time.sleep(hold)
            c.proxies.set_mode(f"b{target}", "open")
        else:
            raise ValueError(kind)
        self._note("stop", fault=kind, broker=target)
        self._await_registered(30)

    def _pair(self) -> tuple[int, int]:
        """A partition's leader (or any broker) and another broker."""
        leader, replicas = self._leader()
        a = leader if leader is not None else self.rng.choice(replicas)
        return a, self.rng.choice([r for r in replicas if r != a])

    def _cut_pair(self, a: int, b: int, *, heal: bool = False) -> None:
        """Cut (or heal) the links between brokers a and b in both directions."""
        px = self.cluster.proxies
        px.deny(f"b{a}", () if heal else {f"broker{b}"})
        px.deny(f"b{b}", () if heal else {f"broker{a}"})

    def _await_registered(self, timeout: float) -> None:
        want = {b.broker_id for b in self.cluster.brokers}
        deadline = time.monotonic() + timeout
        while self.zk.registered() != want and time.monotonic() < deadline:
            time.sleep(0.25)


# --- the campaign -----------------------------------------------------------------------------


@dataclass
class CampaignResult:
    """What a campaign did and found."""

    seed: int
    faults: Counter[str]
    verdict: Verdict
    history: list[dict[str, Any]]
    final_read_ok: bool
    harness_errors: list[str]
    history_path: Path
    #: faults the cluster did not go through as told (a broker that would not stop...)
    problems: list[str] = field(default_factory=list)
    #: the transactional workload's final READ_COMMITTED read reached every end
    txn_final_read_ok: bool = True

    def report(self) -> str:
        """The table: faults by kind, records acknowledged, anomalies (with slices)."""
        lines = [f"seed {self.seed}", "faults injected:"]
        lines += [f"  {k:<24} {self.faults.get(k, 0)}" for k in FAULT_KINDS]
        lines.append(format_table(self.verdict))
        if not self.final_read_ok:
            lines.append("final read INCOMPLETE (a partition unreadable after healing)")
        if not self.txn_final_read_ok:
            lines.append("transactional final read INCOMPLETE (read_committed stopped short)")
        for problem in self.problems:
            lines.append(f"cluster problem: {problem}")
        for err in self.harness_errors:
            lines.append(f"harness error: {err}")
        for a in self.verdict.anomalies[:10]:
            lines.append(f"--- {a.kind}: {a.message}")
            for ev in history_slice(self.history, a):
                lines.append("    " + json.dumps(ev)[:400])
        lines.append(f"history: {self.history_path}")
        return "\n".join(lines)


def run_campaign(
    directory: Path,
    seed: int,
    duration: float = 120.0,
    *,
    kinds: tuple[str, ...] = FAULT_KINDS,
    log: Callable[[str], None] = print,
    transactions: bool = True,
) -> CampaignResult:
    """Run the workload for about `duration` seconds under the seeded nemesis (every
    kind in `kinds` once, in a seeded order, then random ones while time remains),
    heal, read everything back and check the history."""
    rng = random.Random(seed)
    log(f"fault campaign seed {seed}")
    _brokers_run_this_kt()
    directory.mkdir(parents=True, exist_ok=True)
    history_path = directory / "history.jsonl"
    history = History(history_path)
    cluster = ProxiedCluster.create(directory / "cluster", 3, overrides=BROKER_PROPS)
    proxies = ProxySet(identify=lambda port: socket_owner(port, cluster.broker_pids()))
    zk: ZkView | None = None
    workload: Workload | None = None
    txn_workload: TxnWorkload | None = None
    final_ok = False
    txn_final_ok = not transactions  # nothing to read back without them
    nemesis: Nemesis | None = None
    try:
        cluster.attach(proxies)
        cluster.start(timeout=90)
        for b in cluster.brokers:
            check_event_loop(b.log_path.read_text(errors="replace"))
        zk = ZkView(cluster.zookeeper_connect)
        _create_topic(cluster.proxied_bootstrap)
        workload = Workload(history, cluster.proxied_bootstrap)
        workload.start()
        if transactions:
            # transactions spanning TXN_TOPIC's partitions, whose leaders and
            # coordinator are on the brokers the nemesis kills, pauses and cuts off
            create_txn_topic(cluster.proxied_bootstrap)
            txn_workload = TxnWorkload(history, cluster.proxied_bootstrap)
            txn_workload.start()
        nemesis = Nemesis(cluster, history, rng, zk)
        t_end = time.monotonic() + duration
        plan = list(kinds)
        rng.shuffle(plan)
        time.sleep(3)  # some clean traffic first
        while time.monotonic() < t_end or plan:
            kind = plan.pop(0) if plan else rng.choice(kinds)
            hold = rng.uniform(2.0, 6.0)
            log(f"  t={time.monotonic() - t_end + duration:5.1f}s {kind} ({hold:.1f}s)")
            nemesis.inject(kind, hold)
            time.sleep(rng.uniform(1.0, 3.0))
        proxies.heal()
        time.sleep(3)
        if txn_workload is not None:
            txn_workload.stop.set()  # no new transactions while the others drain
        workload.join()
        final_ok = final_read(history, cluster.proxied_bootstrap)
        if txn_workload is not None:
            txn_workload.join()
            txn_final_ok = txn_final_read(history, cluster.proxied_bootstrap)
    finally:
        if workload is not None:
            workload.stop.set()
        if txn_workload is not None:
            txn_workload.stop.set()
        if zk is not None:
            zk.close()
        cluster.stop(kill=True)
        proxies.close()
        record_log_batches(history, cluster)
        history.close()
    verdict = check(history.events)
    return CampaignResult(
        seed,
        nemesis.counts if nemesis else Counter(),
        verdict,
        history.events,
        final_ok,
        (workload.errors if workload else []) + (txn_workload.errors if txn_workload else []),
        history_path,
        nemesis.problems if nemesis else [],
        txn_final_ok,
    )


def _start_zookeeper_again(c: LocalCluster) -> None:
    """Start the cluster's ZooKeeper on its old port once the port is free."""
    assert c.zookeeper is not None
    deadline = time.monotonic() + 20
    while port_in_use(c.zookeeper.port) and time.monotonic() < deadline:
        time.sleep(0.1)
    c.zookeeper.start(timeout=30)


def record_log_batches(history: History, cluster: LocalCluster) -> None:
    """Record which producer id and epoch wrote each offset (a `log-batches` event),
    read from the longest replica of each partition once the brokers stopped: the
    checker tells a broker's failure to deduplicate from a client's re-send under a
    new epoch with it."""
    from kt.storage.file_records import BatchHead, open_file_records
    from kt.storage.log_files import list_segments

    batches: dict[str, list[list[int]]] = {}
    for p in range(PARTITIONS):
        best: list[list[int]] = []
        for b in cluster.brokers:
            pdir = b.data_dir / f"{TOPIC}-{p}"
            if not pdir.is_dir():
                continue
            found: list[list[int]] = []
            for seg in list_segments(pdir):
                if seg.log is None:
                    continue
                records, f = open_file_records(seg.log)
                with f:
                    for h in records.headers():
                        if isinstance(h, BatchHead) and h.header is not None:
                            hd = h.header
                            found.append([hd.base_offset, hd.last_offset, hd.producer_id,
                                          hd.producer_epoch])  # fmt: skip
            if found and (not best or found[-1][1] > best[-1][1]):
                best = found
        batches[str(p)] = best
    history.record("log", "log-batches", "ok", batches=batches)


def _tail_lines(path: Path, n: int) -> list[str]:
    try:
        return [line[:300] for line in path.read_text(errors="replace").splitlines()[-n:]]
    except OSError:
        return []


def _brokers_run_this_kt() -> None:
    # The brokers are `python -m kt.cli` subprocesses: they must import the kt we run
    # (this worktree's), not the one the venv was installed from.
    import kt

    root = str(Path(kt.__file__).resolve().parent.parent)
    paths = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    if not paths or paths[0] != root:
        os.environ["PYTHONPATH"] = os.pathsep.join([root, *paths])


def _create_topic(bootstrap: str) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    fut = admin.create_topics(
        [NewTopic(TOPIC, PARTITIONS, 3, config={"min.insync.replicas": "2"})],
        operation_timeout=20,
    )
    fut[TOPIC].result(30)
