"""SIGKILL cycles against one `kt broker`: every record acknowledged before the kill
is there after the restart, at its acknowledged offset.

One broker (single node) hosts four topics, one per mode: acks=1 and acks=all, each
with `flush.messages` unset (the OS writes the pages back when it likes) and with
`flush.messages=1` (an fsync after every append). Each cycle starts the broker,
produces to all four topics through two confluent-kafka producers (acks=1, acks=all)
and SIGKILLs the broker at a random moment mid-stream. A process kill loses nothing
the kernel already has, so with or without flushes every acknowledged record must
survive: after each restart every partition must still reach past its highest
acknowledged offset, and at the end every acknowledged (partition, offset) is read
back holding the acknowledged value.
"""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from broker_harness import BrokerProcess, free_port

PARTITIONS = 2
#: mode -> (acks, topic configs)
MODES: dict[str, tuple[str, dict[str, str]]] = {
    "acks=1": ("1", {}),
    "acks=all": ("all", {}),
    "acks=1 flush.messages=1": ("1", {"flush.messages": "1"}),
    "acks=all flush.messages=1": ("all", {"flush.messages": "1"}),
}


def topic_of(mode: str) -> str:
    """The topic a mode writes to."""
    return "kill-" + mode.replace("=", "").replace(" ", "-").replace(".", "")


@dataclass
class ModeResult:
    """What one mode acknowledged and what of it was missing afterwards."""

    acknowledged: int = 0
    #: (cycle, partition, offset, acknowledged value, value found or None)
    lost: list[tuple[int, int, int, str, str | None]] = field(default_factory=list)
    #: (cycle, partition, highest acknowledged offset, log end after the restart)
    truncated: list[tuple[int, int, int, int]] = field(default_factory=list)


@dataclass
class KillResult:
    """A run's outcome per mode, and its figures."""

    cycles: int
    seed: int
    modes: dict[str, ModeResult]
    seconds: float

    @property
    def ok(self) -> bool:
        """Nothing acknowledged went missing, nothing was truncated."""
        return all(not m.lost and not m.truncated for m in self.modes.values())

    def report(self) -> str:
        """A table: per mode, records acknowledged, lost, truncations seen."""
        lines = [
            f"SIGKILL cycles: {self.cycles}, seed {self.seed}, {self.seconds:.0f} s",
            f"{'mode':<28}{'acknowledged':>14}{'lost':>8}{'truncated':>11}",
        ]
        for mode, m in self.modes.items():
            lines.append(f"{mode:<28}{m.acknowledged:>14}{len(m.lost):>8}{len(m.truncated):>11}")
        for mode, m in self.modes.items():
            for c, p, o, want, got in m.lost[:5]:
                lines.append(f"  LOST {mode} cycle {c}: p{p}@{o} acked {want!r}, found {got!r}")
            for c, p, o, end in m.truncated[:5]:
                lines.append(f"  TRUNCATED {mode} cycle {c}: p{p} acked up to {o}, log end {end}")
        return "\n".join(lines)


def run_kill_cycles(
    directory: Path,
    cycles: int,
    seed: int,
    *,
    log: Callable[[str], None] = print,
) -> KillResult:
    """Run `cycles` produce-and-SIGKILL cycles on one broker in `directory`."""
    rng = random.Random(seed)
    t0 = time.monotonic()
    directory.mkdir(parents=True, exist_ok=True)
    broker = BrokerProcess(directory / "data", free_port(), {"num.partitions": str(PARTITIONS)})
    # (topic, partition, offset) -> (cycle, value), for every acknowledgement
    acked: dict[tuple[str, int, int], tuple[int, str]] = {}
    results = {mode: ModeResult() for mode in MODES}
    try:
        broker.start(timeout=60)
        _create_topics(broker.bootstrap)
        for cycle in range(cycles):
            if cycle:
                broker.start(timeout=60)
                _check_ends(broker.bootstrap, acked, cycle, results)
            _produce_and_kill(broker, cycle, rng, acked)
            log(f"  cycle {cycle + 1}/{cycles}: {len(acked)} acknowledged so far")
        broker.start(timeout=60)
        _check_ends(broker.bootstrap, acked, cycles, results)
        _read_back(broker.bootstrap, acked, results)
    finally:
        broker.kill()
    for mode in MODES:
        results[mode].acknowledged = sum(1 for k in acked if k[0] == topic_of(mode))
    return KillResult(cycles, seed, results, time.monotonic() - t0)


def _create_topics(bootstrap: str) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 3})
    new = [NewTopic(topic_of(m), PARTITIONS, 1, config=cfg) for m, (_, cfg) in MODES.items()]
    for fut in admin.create_topics(new, operation_timeout=20).values():
        fut.result(30)


def _produce_and_kill(
    broker: BrokerProcess,
    cycle: int,
    rng: random.Random,
    acked: dict[tuple[str, int, int], tuple[int, str]],
) -> None:
    """Produce to every mode's topic until the broker is SIGKILLed at a random moment;
    record each acknowledgement (partition, offset, value)."""
    from confluent_kafka import Producer

    lock = threading.Lock()
    producers: dict[str, Any] = {}
    for acks in ("1", "all"):
        producers[acks] = Producer(
            {
                "bootstrap.servers": broker.bootstrap,
                "acks": acks,
                "linger.ms": 2,
                "message.timeout.ms": 3000,
                "socket.connection.setup.timeout.ms": 2000,
                "log_level": 0,
            }
        )

    def done(err: Any, msg: Any) -> None:
        if err is None:
            with lock:
                acked[(msg.topic(), msg.partition(), msg.offset())] = (
                    cycle,
                    msg.value().decode(),
                )

    kill_at = time.monotonic() + rng.uniform(0.3, 1.2)
    killer = threading.Timer(max(0.0, kill_at - time.monotonic()), broker.kill)
    killer.start()
    n = 0
    try:
        # keep producing past the kill: requests in flight when it lands
        while time.monotonic() < kill_at + 0.3:
            for mode, (acks, _) in MODES.items():
                p = producers[acks]
                for _ in range(20):
                    value = f"c{cycle}-{n}"
                    n += 1
                    try:
                        p.produce(topic_of(mode), value.encode(), partition=n % PARTITIONS,
                                  on_delivery=done)  # fmt: skip
                    except BufferError:
                        break
                p.poll(0)
            time.sleep(0.005)
    finally:
        killer.join()
        for p in producers.values():
            p.poll(0.1)  # acknowledgements already received before the kill
            p.purge()
            p.flush(2)


def _check_ends(
    bootstrap: str,
    acked: dict[tuple[str, int, int], tuple[int, str]],
    cycle: int,
    results: dict[str, ModeResult],
) -> None:
    """After a restart: each partition's log end is past its highest acked offset."""
    from confluent_kafka import Consumer, TopicPartition

    highest: dict[tuple[str, int], int] = {}
    for t, p, o in acked:
        highest[(t, p)] = max(o, highest.get((t, p), -1))
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "kill-check", "log_level": 0})
    try:
        for mode in MODES:
            t = topic_of(mode)
            for p in range(PARTITIONS):
                top = highest.get((t, p))
                if top is None:
                    continue
                end = c.get_watermark_offsets(TopicPartition(t, p), timeout=10)[1]
                if end <= top:
                    results[mode].truncated.append((cycle, p, top, end))
    finally:
        c.close()


def _read_back(
    bootstrap: str,
    acked: dict[tuple[str, int, int], tuple[int, str]],
    results: dict[str, ModeResult],
) -> None:
    """Read every partition from its start; compare each acknowledged offset."""
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "kill-read",
                  "enable.auto.commit": False, "log_level": 0})  # fmt: skip
    found: dict[tuple[str, int, int], str] = {}
    try:
        tps = [TopicPartition(topic_of(m), p, OFFSET_BEGINNING) for m in MODES
               for p in range(PARTITIONS)]  # fmt: skip
        ends = {(tp.topic, tp.partition): c.get_watermark_offsets(tp, timeout=10)[1] for tp in tps}
        c.assign(tps)
        nxt = {k: 0 for k in ends}
        deadline = time.monotonic() + 120
        while any(nxt[k] < ends[k] for k in ends) and time.monotonic() < deadline:
            for m in c.consume(5000, 0.5):
                if m.error() is None:
                    found[(m.topic(), m.partition(), m.offset())] = m.value().decode()
                    nxt[(m.topic(), m.partition())] = m.offset() + 1
    finally:
        c.close()
    for mode in MODES:
        t = topic_of(mode)
        for (topic, p, o), (cycle, value) in sorted(acked.items()):
            if topic == t and found.get((topic, p, o)) != value:
                results[mode].lost.append((cycle, p, o, value, found.get((topic, p, o))))
