"""Retention, DeleteRecords clean-up and topic deletion on a real `kt broker`.

Brokers run with short background delays (log.initial.task.delay.ms,
log.retention.check.interval.ms) so passes happen within the test; records are
produced with old CreateTime timestamps to be past retention.ms at once.

The broker works on its own schedule, so the tests never assume they look in time:
short-lived states (`.deleted` files, `-delete` directories) are checked only where a
long delay keeps them, and elsewhere the tests wait for the end state.
"""

from __future__ import annotations

import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from broker_harness import KT
from confluent_kafka import Consumer, Producer
from confluent_kafka import TopicPartition as CTP
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewTopic,
)

pytestmark = [pytest.mark.integration, pytest.mark.timeout(60)]

FAST = {
    "log.initial.task.delay.ms": "100",
    "log.retention.check.interval.ms": "200",
}
HOUR = 3600 * 1000


def wait_for(what: str, check: Callable[[], Any], timeout: float = 15.0) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        got = check()
        if got:
            return got
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


def create(broker: Any, name: str, **configs: str) -> None:
    a = AdminClient({"bootstrap.servers": broker.bootstrap})
    a.create_topics([NewTopic(name, 1, 1, config=configs)])[name].result(timeout=10)


def set_configs(broker: Any, topic: str, **configs: str) -> None:
    """Set topic configs with IncrementalAlterConfigs (the broker applies them live)."""
    entries = [ConfigEntry(k, v, incremental_operation=AlterConfigOpType.SET)
               for k, v in configs.items()]  # fmt: skip
    res = ConfigResource("topic", topic, incremental_configs=entries)
    a = AdminClient({"bootstrap.servers": broker.bootstrap})
    a.incremental_alter_configs([res])[res].result(timeout=10)


def produce(broker: Any, topic: str, n: int, ts: int, *, idempotent: bool = False) -> None:
    p = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 0,
                  "enable.idempotence": idempotent})  # fmt: skip
    for i in range(n):
        p.produce(topic, key=b"k%d" % i, value=b"v%d-" % i + b"x" * 50, timestamp=ts + i)
        p.flush(10)  # one batch per record
    assert p.flush(10) == 0


def watermarks(broker: Any, topic: str) -> tuple[int, int]:
    c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "wm"})
    try:
        low, high = c.get_watermark_offsets(CTP(topic, 0), timeout=10)
        return int(low), int(high)
    finally:
        c.close()


def consume_all(broker: Any, topic: str, expect: int) -> list[int]:
    c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": f"g{time.monotonic()}",
                  "auto.offset.reset": "earliest", "enable.auto.commit": False})  # fmt: skip
    c.assign([CTP(topic, 0, -2)])  # OFFSET_BEGINNING
    out: list[int] = []
    deadline = time.monotonic() + 15
    while len(out) < expect and time.monotonic() < deadline:
        msg = c.poll(0.3)
        if msg is not None and msg.error() is None:
            out.append(msg.offset())
    c.close()
    return out


def segment_bases(part: Path, suffix: str = ".log") -> list[int]:
    return sorted(int(p.name.split(".")[0]) for p in part.iterdir() if p.name.endswith(suffix))


def index_verify(data: Path) -> None:
    out = subprocess.run([KT, "index", "verify", "-q", str(data)], capture_output=True, text=True)
    assert out.returncode == 0, out.stdout + out.stderr


def test_time_retention_end_to_end(broker_factory: Any) -> None:
    broker = broker_factory(**FAST)
    # "old" keeps its `.deleted` files for 10 minutes, so they are there whenever the
    # test looks (a busy machine may look late); "old-fast" unlinks them after 100 ms,
    # where the test waits for that end state instead of catching the files in between.
    # Retention is switched on only once every record is in, so that one pass does it
    # all and the test knows the outcome: a pass during production would be a race.
    keep = {"segment.bytes": "300", "retention.ms": "-1"}
    create(broker, "old", **keep, **{"file.delete.delay.ms": "600000"})
    create(broker, "old-fast", **keep, **{"file.delete.delay.ms": "100"})
    now = int(time.time() * 1000)
    for topic in ("old", "old-fast"):
        produce(broker, topic, 12, now - 2 * HOUR, idempotent=True)
        produce(broker, topic, 4, now, idempotent=True)
    part, fast = broker.data_dir / "old-0", broker.data_dir / "old-fast-0"
    # the segments holding only old records (0-11) go; the one with offset 12 stays
    low = max(b for b in segment_bases(part) if b <= 12)
    low_f = max(b for b in segment_bases(fast) if b <= 12)
    assert low > 0 and low_f > 0
    for topic in ("old", "old-fast"):
        set_configs(broker, topic, **{"retention.ms": str(HOUR)})

    wait_for("retention", lambda: watermarks(broker, "old") == (low, 16))
    # The log start moves (in memory) before the checkpoint is written and the files
    # renamed: wait for the first kept segment to start the log.
    wait_for("renames", lambda: segment_bases(part)[0] == low)
    doomed = segment_bases(part, ".log.deleted")
    assert doomed[0] == 0 and all(b < low for b in doomed)
    # producer snapshots below the new log start are gone
    wait_for("snapshots", lambda: all(b >= low for b in segment_bases(part, ".snapshot")))
    assert consume_all(broker, "old", 16 - low) == list(range(low, 16))

    # unlinked after file.delete.delay.ms: no segment below the log start is left,
    # neither as `.log` nor as `.deleted`
    wait_for("retention", lambda: watermarks(broker, "old-fast") == (low_f, 16))
    wait_for(
        "unlink",
        lambda: segment_bases(fast)[0] == low_f and not segment_bases(fast, ".deleted"),
    )
    assert consume_all(broker, "old-fast", 16 - low_f) == list(range(low_f, 16))

    # a restart drops the `.deleted` files still waiting and keeps the log start
    broker.restart()
    assert not segment_bases(part, ".deleted")
    assert watermarks(broker, "old") == (low, 16)
    assert consume_all(broker, "old", 16 - low) == list(range(low, 16))
    broker.stop()
    index_verify(broker.data_dir)


def test_kill_right_after_a_retention_pass_reexposes_nothing(broker_factory: Any) -> None:
    broker = broker_factory(**FAST)
    create(broker, "crash", **{"segment.bytes": "300", "retention.ms": "-1",
                               "file.delete.delay.ms": "600000"})  # fmt: skip
    now = int(time.time() * 1000)
    produce(broker, "crash", 10, now - 2 * HOUR)
    produce(broker, "crash", 3, now)
    part = broker.data_dir / "crash-0"
    low = max(b for b in segment_bases(part) if b <= 10)
    set_configs(broker, "crash", **{"retention.ms": str(HOUR)})  # one pass does it all
    wait_for("retention", lambda: watermarks(broker, "crash") == (low, 13))
    wait_for("renames", lambda: segment_bases(part)[0] == low)
    broker.kill()  # before the unlink: the `.deleted` files are still on disk
    assert segment_bases(part, ".log.deleted")
    broker.start()
    assert not [p for p in part.iterdir() if p.name.endswith(".deleted")]
    assert watermarks(broker, "crash") == (low, 13)
    assert consume_all(broker, "crash", 13 - low) == list(range(low, 13))
    broker.stop()
    index_verify(broker.data_dir)


def test_delete_records_then_retention_removes_skipped_segments(broker_factory: Any) -> None:
    broker = broker_factory(**FAST)
    create(broker, "dr", **{"segment.bytes": "300", "retention.ms": "-1",
                            "file.delete.delay.ms": "100"})  # fmt: skip
    produce(broker, "dr", 15, int(time.time() * 1000))
    part = broker.data_dir / "dr-0"
    before = segment_bases(part)
    assert len(before) >= 4
    target = before[2] + 1  # inside the third segment
    a = AdminClient({"bootstrap.servers": broker.bootstrap})
    (f,) = a.delete_records([CTP("dr", 0, target)]).values()
    assert f.result(timeout=10).low_watermark == target
    # the next pass removes the segments wholly below the log start, and only them
    wait_for("log start breach", lambda: segment_bases(part)[0] == before[2])
    wait_for("unlink", lambda: not segment_bases(part, ".deleted"))
    assert segment_bases(part) == before[2:]
    assert consume_all(broker, "dr", 15 - target) == list(range(target, 15))
    broker.kill()
    broker.start()
    assert watermarks(broker, "dr") == (target, 15)


def test_size_retention_and_compact_topics(broker_factory: Any) -> None:
    broker = broker_factory(**FAST)
    create(broker, "sized", **{"segment.bytes": "300", "retention.bytes": "-1",
                               "file.delete.delay.ms": "100"})  # fmt: skip
    compact = {"segment.bytes": "300", "retention.ms": "1000", "retention.bytes": "0"}
    create(broker, "compacted", **compact, **{"cleanup.policy": "compact"})
    now = int(time.time() * 1000)
    produce(broker, "sized", 20, now)
    produce(broker, "compacted", 10, now - 2 * HOUR)
    part = broker.data_dir / "sized-0"
    # switched on after the last append, so one pass reaches the end state
    set_configs(broker, "sized", **{"retention.bytes": "600"})
    low = wait_for("size retention", lambda: watermarks(broker, "sized")[0])
    # the log start moves before the files are renamed, and those go 100 ms later
    wait_for(
        "unlink",
        lambda: segment_bases(part)[0] == low and not segment_bases(part, ".deleted"),
    )
    sizes = {b: (part / f"{b:020d}.log").stat().st_size for b in segment_bases(part)}
    first = sizes[min(sizes)]
    # never below retention.bytes, and as close to it as whole segments allow
    assert sum(sizes.values()) >= 600 > sum(sizes.values()) - first
    assert watermarks(broker, "sized")[0] == low
    # several passes later the compact-only topic still starts at 0
    assert watermarks(broker, "compacted") == (0, 10)
    assert segment_bases(broker.data_dir / "compacted-0")[0] == 0


def test_topic_deletion_is_deferred(broker_factory: Any) -> None:
    # A delay the test cannot outlast, so the renamed directory is there when it looks.
    broker = broker_factory(**FAST, **{"log.segment.delete.delay.ms": "600000"})
    data = broker.data_dir
    a = AdminClient({"bootstrap.servers": broker.bootstrap})
    create(broker, "doomed")
    produce(broker, "doomed", 3, int(time.time() * 1000))
    a.delete_topics(["doomed"])["doomed"].result(timeout=10)
    assert not (data / "doomed-0").exists()
    (renamed,) = [p for p in data.iterdir() if p.name.startswith("doomed-0.")]
    assert renamed.name.endswith("-delete") and renamed.is_dir()
    # a broker killed before the delay ran out removes the directory at startup
    broker.kill()
    assert renamed.exists()
    broker.start()
    assert not renamed.exists()
    assert (
        "doomed"
        not in AdminClient({"bootstrap.servers": broker.bootstrap}).list_topics(timeout=10).topics
    )
    broker.stop()

    # with a short delay the broker removes the directory by itself
    quick = broker_factory(**FAST, **{"log.segment.delete.delay.ms": "100"})
    create(quick, "gone")
    produce(quick, "gone", 3, int(time.time() * 1000))
    a = AdminClient({"bootstrap.servers": quick.bootstrap})
    a.delete_topics(["gone"])["gone"].result(timeout=10)
    assert not (quick.data_dir / "gone-0").exists()
    wait_for(
        "deferred removal",
        lambda: not [p for p in quick.data_dir.iterdir() if p.name.startswith("gone-0")],
    )
