"""Helpers for the cluster test suite (tests/integration/test_cluster_*.py).

Built on `kt.tools.local_cluster.LocalCluster`: one ZooKeeper and three real `kt broker`
processes. Everything here reads the cluster the way an operator or a client does:
ZooKeeper through kazoo (the controller's truth), Metadata through real clients
(confluent-kafka), the `kt` CLI through click. Every wait is bounded and polls a
condition; none relies on the machine's speed.
"""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any, TypeVar

from broker_harness import check_event_loop

from kt.tools.local_cluster import LocalCluster, port_in_use

T = TypeVar("T")

#: lean settings for a loaded 2-core machine: quick failure detection, fast groups
LEAN_OVERRIDES = {
    "group.initial.rebalance.delay.ms": "0",
    "offsets.topic.replication.factor": "3",
    "offsets.topic.num.partitions": "3",
    "transaction.state.log.replication.factor": "3",
    "replica.lag.time.max.ms": "3000",
    "zookeeper.session.timeout.ms": "6000",
    "zookeeper.connection.timeout.ms": "10000",
    "controlled.shutdown.max.retries": "3",
    "default.replication.factor": "3",
}
SESSION_TIMEOUT_S = 6.0
#: generous bound for anything that should happen "soon" (elections, ISR changes)
DEADLINE_S = 45.0


class Timeout(AssertionError):
    """A bounded wait ran out."""


def wait_for(
    check: Callable[[], T], what: str, timeout: float = DEADLINE_S, interval: float = 0.2
) -> T:
    """Poll `check` until it returns something truthy (returned); exceptions count as
    not yet. Timeout (an AssertionError naming `what`) after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    last: Any = None
    while True:
        try:
            value = check()
            if value:
                return value
            last = value
        except Exception as exc:
            last = exc
        if time.monotonic() >= deadline:
            raise Timeout(f"timed out after {timeout:g}s waiting for {what} (last: {last!r})")
        time.sleep(interval)


def start_cluster(
    directory: Path,
    brokers: int = 3,
    racks: Sequence[str] | None = ("r1", "r2", "r3"),
    secure: bool = False,
    **overrides: str,
) -> LocalCluster:
    """A started LocalCluster with LEAN_OVERRIDES (plus `overrides`, dots as '_').
    `secure`: as `kt cluster up --secure` makes it (a CA and certificates, SASL_SSL
    with SCRAM between every broker), which takes longer to start."""
    props = dict(LEAN_OVERRIDES)
    props.update({k.replace("_", "."): v for k, v in overrides.items()})
    c = LocalCluster.create(directory, brokers, racks=list(racks) if racks else None,
                            overrides=props, secure=secure)  # fmt: skip
    if secure:
        c.start(timeout=120.0, register_timeout=60.0)
    else:
        c.start(timeout=90.0, register_timeout=30.0)
    try:
        for b in c.brokers:
            check_event_loop(b.log_path.read_text(errors="replace"))
    except RuntimeError:
        c.stop(kill=True)
        raise
    return c


# --- ZooKeeper ---------------------------------------------------------------------------


@contextlib.contextmanager
def zk_client(cluster: LocalCluster) -> Iterator[Any]:
    """A kazoo client on the cluster's chroot, closed afterwards."""
    from kazoo.client import KazooClient

    zk = KazooClient(hosts=cluster.zookeeper_connect, timeout=10.0)
    zk.start(timeout=15.0)
    try:
        yield zk
    finally:
        with contextlib.suppress(Exception):
            zk.stop()
            zk.close()


def zk_get(cluster: LocalCluster, path: str) -> bytes | None:
    """The data of a znode (None when missing)."""
    from kazoo.exceptions import NoNodeError

    with zk_client(cluster) as zk:
        try:
            return bytes(zk.get(path)[0])
        except NoNodeError:
            return None


def zk_json(cluster: LocalCluster, path: str) -> Any:
    """A znode's JSON (None when missing)."""
    data = zk_get(cluster, path)
    return None if data is None else json.loads(data)


def registered(cluster: LocalCluster) -> list[int]:
    """The broker ids under /brokers/ids."""
    ids = cluster.registered_brokers()
    assert ids is not None, "kazoo is not installed"
    return ids


def wait_registered(cluster: LocalCluster, broker_id: int, timeout: float = DEADLINE_S) -> None:
    """Until /brokers/ids/N exists."""
    wait_for(lambda: broker_id in registered(cluster), f"broker {broker_id} to register", timeout)


def wait_unregistered(cluster: LocalCluster, broker_id: int, timeout: float = DEADLINE_S) -> None:
    """Until /brokers/ids/N is gone (a SIGKILLed broker: within the session timeout)."""
    wait_for(lambda: broker_id not in registered(cluster), f"/brokers/ids/{broker_id} to go",
             timeout)  # fmt: skip


def controller_id(cluster: LocalCluster) -> int | None:
    """The brokerid in /controller (None when there is no controller)."""
    doc = zk_json(cluster, "/controller")
    return None if doc is None else int(doc["brokerid"])


def controller_epoch(cluster: LocalCluster) -> int | None:
    """/controller_epoch (plain integer text)."""
    data = zk_get(cluster, "/controller_epoch")
    return None if data is None else int(data)


def wait_controller(
    cluster: LocalCluster, not_in: Sequence[int] = (), timeout: float = DEADLINE_S
) -> int:
    """Until some broker not in `not_in` is the controller; its id."""
    return wait_for(
        lambda: (c := controller_id(cluster)) is not None and c not in not_in and c,
        f"a controller other than {list(not_in)}",
        timeout,
    )


def partition_state(cluster: LocalCluster, topic: str, partition: int) -> dict[str, Any] | None:
    """/brokers/topics/T/partitions/P/state (leader, isr, leader_epoch, ...)."""
    return zk_json(cluster, f"/brokers/topics/{topic}/partitions/{partition}/state")  # type: ignore[no-any-return]


def wait_for_isr(
    cluster: LocalCluster,
    topic: str,
    partition: int,
    expected: Sequence[int],
    timeout: float = DEADLINE_S,
) -> dict[str, Any]:
    """Until the partition's ISR in ZooKeeper is exactly `expected` (as a set)."""

    seen: list[Any] = [None]

    def check() -> dict[str, Any] | None:
        s = seen[0] = partition_state(cluster, topic, partition)
        return s if s is not None and set(s["isr"]) == set(expected) else None

    try:
        return wait_for(check, f"ISR of {topic}-{partition} to be {sorted(expected)}", timeout)
    except Timeout as exc:
        raise Timeout(f"{exc}; state: {seen[0]}") from None


def wait_zk_leader(
    cluster: LocalCluster,
    topic: str,
    partition: int,
    not_in: Sequence[int] = (-1,),
    timeout: float = DEADLINE_S,
) -> int:
    """Until ZooKeeper names a leader for the partition not in `not_in`; its id."""

    def check() -> int | None:
        s = partition_state(cluster, topic, partition)
        if s is None or s["leader"] in (-1, *not_in):
            return None
        return int(s["leader"])

    return wait_for(check, f"a leader of {topic}-{partition} not in {list(not_in)}", timeout)


def offline_partitions(cluster: LocalCluster) -> list[str]:
    """Partitions whose state in ZooKeeper names no running leader."""
    out = []
    with zk_client(cluster) as zk:
        for t in zk.get_children("/brokers/topics"):
            for p in zk.get_children(f"/brokers/topics/{t}/partitions"):
                state = json.loads(zk.get(f"/brokers/topics/{t}/partitions/{p}/state")[0])
                leader = state["leader"]
                if leader < 0 or not cluster.broker(leader).running:
                    out.append(f"{t}-{p}")
    return out


def wait_all_led(cluster: LocalCluster, timeout: float = DEADLINE_S) -> None:
    """Until every partition of every topic has a running leader."""
    seen: list[Any] = [None]

    def check() -> bool:
        seen[0] = offline_partitions(cluster)
        return not seen[0]

    try:
        wait_for(check, "every partition to have a running leader", timeout)
    except Timeout as exc:
        raise Timeout(f"{exc}; without a leader: {seen[0]}") from None


# --- Metadata through a real client --------------------------------------------------------


def live_bootstrap(cluster: LocalCluster) -> str:
    """host:port of the brokers whose processes run."""
    return ",".join(b.bootstrap for b in cluster.brokers if b.running)


def metadata(bootstrap: str, topic: str | None = None, timeout: float = 10.0) -> Any:
    """confluent-kafka's ClusterMetadata (brokers, controller_id, topics)."""
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": bootstrap, "socket.timeout.ms": 5000})
    return admin.list_topics(topic=topic, timeout=timeout)


def leader_of(cluster: LocalCluster, topic: str, partition: int, via: str | None = None) -> int:
    """The partition's leader as Metadata reports it (-1: none)."""
    md = metadata(via or live_bootstrap(cluster), topic)
    t = md.topics[topic]
    if t.error is not None:
        return -1
    p = t.partitions.get(partition)
    return -1 if p is None or p.error is not None else int(p.leader)


def wait_metadata_leader(
    cluster: LocalCluster,
    topic: str,
    partition: int,
    not_in: Sequence[int] = (),
    timeout: float = DEADLINE_S,
) -> int:
    """Until every running broker's Metadata names the same live leader, not in
    `not_in`; its id."""
    views: dict[int, int] = {}

    def check() -> int | None:
        views.clear()
        for b in cluster.brokers:
            if b.running:
                views[b.broker_id] = leader_of(cluster, topic, partition, via=b.bootstrap)
        leaders = set(views.values())
        if len(leaders) != 1:
            return None
        leader = leaders.pop()
        if leader < 0 or leader in not_in or not cluster.broker(leader).running:
            return None
        return leader

    try:
        return wait_for(check, f"every broker's Metadata to name a leader of {topic}-"
                        f"{partition} not in {list(not_in)}", timeout)  # fmt: skip
    except Timeout as exc:
        raise Timeout(f"{exc}; leader by broker: {views}") from None


# --- the kt CLI -----------------------------------------------------------------------------


def kt(*args: str) -> Any:
    """Run a kt command in-process (click's CliRunner); the Result."""
    from click.testing import CliRunner

    from kt.cli import cli

    return CliRunner().invoke(cli, list(args))


def create_topic(cluster: LocalCluster, topic: str, *args: str, wait_isr: bool = True) -> None:
    """`kt topic create` and (with `wait_isr`) wait until every partition has a leader
    and its full ISR in ZooKeeper."""
    r = kt("topic", "create", "-b", live_bootstrap(cluster), "--topic", topic, *args)
    assert r.exit_code == 0, r.stderr
    if not wait_isr:
        return

    def ready() -> bool:
        assignment = zk_json(cluster, f"/brokers/topics/{topic}")
        if assignment is None:
            return False
        for p, replicas in assignment["partitions"].items():
            s = partition_state(cluster, topic, int(p))
            if s is None or s["leader"] < 0 or set(s["isr"]) != set(replicas):
                return False
        return True

    wait_for(ready, f"topic {topic} to have leaders and full ISRs")


# --- keeping a shared cluster whole --------------------------------------------------------


def heal(cluster: LocalCluster, timeout: float = 60.0) -> None:
    """Resume paused brokers, start stopped ones, wait until all are registered."""
    import signal

    for b in cluster.brokers:
        if b.running:
            with contextlib.suppress(OSError):
                import os

                os.kill(b.pid, signal.SIGCONT)
    for b in cluster.brokers:
        if not b.running:
            wait_for(lambda b=b: not port_in_use(b.port), f"port of broker {b.broker_id}", 30)
            cluster.start_broker(b.broker_id, timeout=timeout)
    for b in cluster.brokers:
        wait_registered(cluster, b.broker_id, timeout)
    wait_controller(cluster)


def log_tail(cluster: LocalCluster, broker_id: int, lines: int = 30) -> str:
    """The end of a broker's log, for assertion messages."""
    try:
        text = cluster.broker(broker_id).log_path.read_text(errors="replace")
    except OSError:
        return ""
    return "\n".join(text.splitlines()[-lines:])


# --- producers and consumers (the oracle: real clients) -----------------------------------


class BackgroundProducer:
    """An idempotent acks=all producer writing `<tag>-<n>` values (key = tag) to one
    partition from a thread until stopped, remembering what was acknowledged (value ->
    offset) and every delivery error. `client` is "confluent" or "kafka-python"."""

    def __init__(self, client: str, bootstrap: str, topic: str, tag: str,
                 partition: int = 0, rate: float = 40.0,
                 config: dict[str, Any] | None = None) -> None:  # fmt: skip
        import threading

        self.client, self.bootstrap, self.topic, self.tag = client, bootstrap, topic, tag
        self.partition, self.interval = partition, 1.0 / rate
        # extra client settings (confluent-kafka's names), over the defaults below
        self.config = dict(config or {})
        self.sent = 0
        self.acked: dict[bytes, int] = {}
        self.ack_order: list[bytes] = []
        self.errors: list[str] = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"producer-{tag}", daemon=True)

    def start(self) -> BackgroundProducer:
        self._thread.start()
        return self

    def _ack(self, value: bytes, offset: int) -> None:
        with self._lock:
            assert value not in self.acked, f"{value!r} acknowledged twice"
            self.acked[value] = offset
            self.ack_order.append(value)

    def _error(self, value: bytes, err: object) -> None:
        with self._lock:
            self.errors.append(f"{value!r}: {err}")

    def _run(self) -> None:
        if self.client == "confluent":
            self._run_confluent()
        else:
            self._run_kafka_python()

    def _run_confluent(self) -> None:
        from confluent_kafka import KafkaException, Producer

        p = Producer({
            "bootstrap.servers": self.bootstrap,
            "enable.idempotence": True,
            "acks": "all",
            "linger.ms": 5,
            "message.timeout.ms": 120000,
            "socket.timeout.ms": 10000,
            "topic.metadata.refresh.interval.ms": 2000,
            **self.config,
        })  # fmt: skip

        def report(err: Any, msg: Any) -> None:
            if err is None:
                self._ack(msg.value(), msg.offset())
            else:
                self._error(msg.value(), err)

        while not self._stop.is_set():
            value = f"{self.tag}-{self.sent:06d}".encode()
            try:
                p.produce(self.topic, value=value, key=self.tag.encode(),
                          partition=self.partition, on_delivery=report)  # fmt: skip
                self.sent += 1
            except BufferError:
                pass
            except KafkaException as exc:
                # produce() itself refuses, e.g. a topic librdkafka believes gone
                self._error(value, exc)
            p.poll(self.interval)
        remaining = p.flush(150)
        if remaining:
            self._error(b"", f"{remaining} records still in flight after 150 s")

    def _run_kafka_python(self) -> None:
        from kafka import KafkaProducer

        p = KafkaProducer(
            bootstrap_servers=self.bootstrap,
            enable_idempotence=True,
            acks="all",
            linger_ms=5,
            retries=2**31 - 1,
            delivery_timeout_ms=120000,
            request_timeout_ms=10000,
            metadata_max_age_ms=2000,
            max_in_flight_requests_per_connection=5,
        )
        try:
            while not self._stop.is_set():
                value = f"{self.tag}-{self.sent:06d}".encode()
                fut = p.send(self.topic, value=value, key=self.tag.encode(),
                             partition=self.partition)  # fmt: skip
                fut.add_callback(lambda md, v=value: self._ack(v, md.offset))
                fut.add_errback(lambda exc, v=value: self._error(v, repr(exc)))
                self.sent += 1
                time.sleep(self.interval)
            p.flush(150)
        except Exception as exc:
            self._error(b"", repr(exc))
        finally:
            p.close(timeout=10)

    def stop(self, timeout: float = 180.0) -> None:
        self._stop.set()
        self._thread.join(timeout)
        assert not self._thread.is_alive(), f"producer {self.tag} did not finish"


def consume_all(bootstrap: str, topic: str, partition: int, count: int,
                timeout: float = 60.0) -> list[tuple[int, bytes | None, bytes | None]]:  # fmt: skip
    """(offset, key, value) of the partition from the start until at least `count`
    records were read and the end is reached, with confluent-kafka (read_committed)."""
    from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, TopicPartition

    c = Consumer({
        "bootstrap.servers": bootstrap,
        "group.id": "kt-cluster-tests-unused",
        "enable.auto.commit": False,
        "enable.partition.eof": True,
        "fetch.wait.max.ms": 100,
        "topic.metadata.refresh.interval.ms": 2000,
    })  # fmt: skip
    c.assign([TopicPartition(topic, partition, OFFSET_BEGINNING)])
    out: list[tuple[int, bytes | None, bytes | None]] = []
    deadline = time.monotonic() + timeout
    at_end = False
    try:
        while time.monotonic() < deadline and not (at_end and len(out) >= count):
            for m in c.consume(num_messages=500, timeout=0.5):
                if m.error() is not None:
                    if m.error().code() == KafkaError._PARTITION_EOF:
                        at_end = True
                        continue
                    continue  # transient (leader moves); the deadline bounds it
                at_end = False
                out.append((m.offset(), m.key(), m.value()))
    finally:
        c.close()
    return out


def read_all_confluent(
    conf: dict[str, Any], topic: str, want: set[bytes], timeout: float = DEADLINE_S
) -> set[bytes]:
    """Every value confluent-kafka's consumer (`conf`: its group and security) reads
    from `topic` until it has all of `want` or `timeout` passes; commits before
    closing, so the group's offsets are exercised too."""
    from confluent_kafka import Consumer

    got: set[bytes] = set()
    cons = Consumer({"auto.offset.reset": "earliest", "enable.auto.commit": False, **conf})
    cons.subscribe([topic])
    deadline = time.monotonic() + timeout
    try:
        while not want <= got and time.monotonic() < deadline:
            m = cons.poll(1.0)
            if m is not None and m.error() is None:
                got.add(m.value())
        cons.commit(asynchronous=False)
    finally:
        cons.close()
    return got
