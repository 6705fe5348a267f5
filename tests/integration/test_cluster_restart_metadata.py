"""A broker SIGKILLed and started again at once must not tell clients that topics do not
exist (issue 19 §1).

Until the controller's first UpdateMetadata reaches the new process (it registers
only once its previous ZooKeeper session expired, ~6 s here), it knows nothing of
the cluster. librdkafka believes an answer calling a topic unknown once the topic's
metadata has been stable for `topic.metadata.propagation.max.ms`, and then fails
the queued messages with "Unknown topic". Here a confluent-kafka idempotent acks=all
producer that has produced for longer than that (set short) keeps producing through
the kill and restart of its partition's leader, while a probe asks the restarted
broker for Metadata in a tight loop from the moment its port opens.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from typing import Any

import pytest
from broker_harness import RawConnection
from cluster_harness import (
    BackgroundProducer,
    Timeout,
    consume_all,
    create_topic,
    log_tail,
    wait_controller,
    wait_for,
    wait_for_isr,
    wait_zk_leader,
)

from kt.protocol import ErrorCode, apis
from kt.tools.local_cluster import LocalCluster

pytestmark = [pytest.mark.integration, pytest.mark.cluster]

#: librdkafka's topic.metadata.propagation.max.ms in this test (default 30 s): after it,
#: a single answer calling the topic unknown makes librdkafka fail its messages
PROPAGATION_MS = 500

#: Metadata versions the probe cycles through: v1 to v3 always allow auto-creation,
#: v4+ ask for it; v12 is what librdkafka and the Java client send today
PROBE_VERSIONS = (1, 4, 9, 12)


@dataclass
class ProbeLog:
    """What the restarted broker's Metadata answers said, in order."""

    answers: int = 0
    not_ready: int = 0  # retriable: the broker has no view of the cluster yet
    ready: int = 0  # brokers, and the topic with its partitions
    unknown: list[str] = field(default_factory=list)  # answers that deny the topic
    first_answer_at: float | None = None
    first_ready_at: float | None = None


def _judge(log: ProbeLog, topic: str, version: int, all_topics: bool, resp: Any) -> None:
    """Classify one Metadata answer; an answer denying the topic is recorded."""
    now = time.monotonic()
    log.answers += 1
    if log.first_answer_at is None:
        log.first_answer_at = now
    brokers = list(resp.brokers)
    mine = [t for t in resp.topics if t.name == topic]
    what = f"v{version} {'all topics' if all_topics else 'topic'}"
    for t in mine:
        if t.error_code in (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.UNKNOWN_TOPIC_ID):
            log.unknown.append(f"{what}: {topic} error {t.error_code}, {len(brokers)} brokers")
            return
    if brokers and not mine:
        # a broker list without the topic is a claim that the cluster lacks it
        log.unknown.append(f"{what}: {len(brokers)} brokers and no {topic}")
        return
    if brokers and mine and mine[0].error_code == ErrorCode.NONE and mine[0].partitions:
        log.ready += 1
        if log.first_ready_at is None:
            log.first_ready_at = now
    else:
        log.not_ready += 1


def _probe(bootstrap: str, topic: str, log: ProbeLog, stop: threading.Event) -> None:
    """Connect as soon as the port opens (retrying refused connections), then ask for
    Metadata back to back until `stop`; a dropped connection is reopened."""
    while not stop.is_set():
        try:
            conn = RawConnection(bootstrap)
        except OSError:
            time.sleep(0.002)
            continue
        try:
            while not stop.is_set():
                for version in PROBE_VERSIONS:
                    for all_topics in (False, True):
                        body = apis.METADATA.request(
                            topics=None if all_topics else [{"name": topic}],
                            allow_auto_topic_creation=True,
                        )
                        resp = conn.call(apis.METADATA.key, version, body)
                        _judge(log, topic, version, all_topics, resp)
        except (OSError, AssertionError):
            pass  # the broker closed the connection (e.g. still starting): again
        finally:
            conn.close()


def _errors(producer: BackgroundProducer) -> dict[str, int]:
    """The producer's distinct errors (the record's value cut off) and how often."""
    out: dict[str, int] = {}
    for e in list(producer.errors):
        kind = e.split(": ", 1)[-1]
        out[kind] = out.get(kind, 0) + 1
    return out


def _wait_acks(producer: BackgroundProducer, count: int, what: str) -> None:
    """Until the producer has `count` acknowledgements (its errors in the failure)."""
    try:
        wait_for(lambda: len(producer.acked) >= count, f"{count} acks {what}")
    except Timeout as exc:
        raise Timeout(f"{exc}; producer errors: {_errors(producer)}") from None


def test_restarted_broker_never_calls_an_existing_topic_unknown(cluster: LocalCluster) -> None:
    topic = "restart-md"
    controller = wait_controller(cluster)
    victim, other = (b for b in (1, 2, 3) if b != controller)
    # The victim leads (the producer's connection follows it back up) and is not the
    # controller (its restart is a plain broker restart, no failover).
    create_topic(cluster, topic, "--replica-assignment", f"{victim}:{controller}:{other}",
                 "--config", "min.insync.replicas=2")  # fmt: skip
    producer = BackgroundProducer(
        "confluent", cluster.bootstrap_servers, topic, "rs",
        config={
            "topic.metadata.propagation.max.ms": PROPAGATION_MS,
            # ask often, so an answer from the restarted broker is likely to be used
            "topic.metadata.refresh.interval.ms": 300,
            "retry.backoff.ms": 50,
            "reconnect.backoff.ms": 20,
            "reconnect.backoff.max.ms": 200,
        },
    ).start()  # fmt: skip
    started = time.monotonic()
    log = ProbeLog()
    stop_probe = threading.Event()
    stalled = ""
    broker = cluster.broker(victim)
    probe = threading.Thread(target=_probe, args=(broker.bootstrap, topic, log, stop_probe),
                             name="metadata-probe", daemon=True)  # fmt: skip
    try:
        # producing for longer than the propagation allowance, so librdkafka would
        # believe an "unknown topic" answer at once
        _wait_acks(producer, 50, "to get going")
        wait_for(lambda: time.monotonic() - started > 4 * PROPAGATION_MS / 1000, "a while")
        assert wait_zk_leader(cluster, topic, 0) == victim
        cluster.stop_broker(victim, kill=True)
        probe.start()
        cluster.start_broker(victim, timeout=90)
        # the window the issue is about: the probe answered before the broker's view
        wait_for(lambda: log.ready >= 20, "the restarted broker to answer with the topic")
        wait_for_isr(cluster, topic, 0, [1, 2, 3])
        try:
            _wait_acks(producer, len(producer.acked) + 50, "after the restart")
        except Timeout as exc:
            stalled = str(exc)  # reported with the other findings below
    finally:
        stop_probe.set()
        producer.stop()
        if probe.is_alive():
            probe.join(30)
    window = (log.first_ready_at or 0.0) - (log.first_answer_at or 0.0)
    print(f"probe: {log.answers} answers, {log.not_ready} in the {window:.1f} s before the "
          f"broker's view, {log.ready} with it; sent {producer.sent}, "
          f"acked {len(producer.acked)}")  # fmt: skip
    # every finding at once: which of them fail tells what is wrong
    problems = [stalled] if stalled else []
    if log.unknown:
        problems.append(f"{len(log.unknown)} of {log.answers} Metadata answers of the "
                        f"restarted broker denied {topic}: {log.unknown[:4]}")  # fmt: skip
    if not log.not_ready:
        problems.append("the probe never reached the broker before its first view")
    unknown_errors = [e for e in producer.errors if "nknown topic" in e]
    if unknown_errors:
        problems.append(f"{len(unknown_errors)} 'Unknown topic' errors: {unknown_errors[:3]}")
    if producer.errors:
        problems.append(f"producer errors: {_errors(producer)}")
    if len(producer.acked) != producer.sent:
        problems.append(f"{producer.sent} records sent, {len(producer.acked)} acknowledged")
    assert not problems, "\n".join(problems) + "\n" + log_tail(cluster, victim)
    records = consume_all(cluster.bootstrap_servers, topic, 0, producer.sent)
    values = [v for _, _, v in records]
    assert len(values) == len(set(values)), "a record was written twice"
    by_value = {v: o for o, _, v in records}
    lost = [v for v in producer.acked if v not in by_value]
    assert not lost, f"{len(lost)} acknowledged records lost: {lost[:5]}"
    moved = [(v, o, by_value[v]) for v, o in producer.acked.items() if by_value[v] != o]
    assert not moved, f"records acknowledged at another offset: {moved[:5]}"
