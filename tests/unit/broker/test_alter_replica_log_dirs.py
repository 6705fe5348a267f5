"""AlterReplicaLogDirs and DescribeLogDirs through their handlers, with two or three
log directories: error codes, a move remembered for a replica not created yet, a
move replaced or cancelled, offline directories, the throttle (read at every chunk)
and a move seen to completion.

AlterReplicaLogDirs reads only the replica manager (which reaches the log-dir mover
the root wires to it): those tests build `handler_harness.ReplicasOnly` and nothing
else. `test_a_throttled_move_shows_as_future_then_completes` keeps the in-process
broker: a dynamic config set through IncrementalAlterConfigs (config manager, the
root's reconfigure) changes the rate of a running copy, seen through
DescribeLogDirs."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

import pytest
from handler_harness import InProcessBroker, ReplicasOnly, call, open_broker

from kt.protocol import ErrorCode, apis
from kt.storage import record_batch as v2
from kt.storage.checkpoint import TopicPartition

RATE = "replica.alter.log.dirs.io.max.bytes.per.second"


@pytest.fixture
def dirs(tmp_path: Path) -> list[Path]:
    return [(tmp_path / "a").resolve(), (tmp_path / "b").resolve()]


def broker_on(tmp_path: Path, dirs: list[Path], **overrides: str) -> InProcessBroker:
    return open_broker(tmp_path, **{"log.dirs": ",".join(map(str, dirs)), **overrides})


def alter(
    b: InProcessBroker | ReplicasOnly, moves: dict[tuple[str, int], str], version: int = 2
) -> dict[tuple[str, int], int]:
    by_dir: dict[str, dict[str, list[int]]] = {}
    for (t, p), d in moves.items():
        by_dir.setdefault(d, {}).setdefault(t, []).append(p)
    body = {"dirs": [{"path": d, "topics": [{"name": t, "partitions": ps} for t, ps in ts.items()]}
                     for d, ts in by_dir.items()]}  # fmt: skip
    api = apis.ALTER_REPLICA_LOG_DIRS
    resp = (
        b.call(api, version, body) if isinstance(b, ReplicasOnly) else call(b, api, version, body)
    )
    assert resp is not None
    return {(r.topic_name, p.partition_index): p.error_code for r in resp.results
            for p in r.partitions}  # fmt: skip


def describe(b: InProcessBroker) -> dict[str, list[tuple[str, int, bool, int]]]:
    resp = call(b, apis.DESCRIBE_LOG_DIRS, 4, {"topics": None})
    assert resp is not None
    out: dict[str, list[tuple[str, int, bool, int]]] = {}
    for r in resp.results:
        out[r.log_dir] = [
            (t.name, p.partition_index, p.is_future_key, p.offset_lag)
            for t in r.topics
            for p in t.partitions
        ]
    return out


def fill(b: InProcessBroker | ReplicasOnly, tp: TopicPartition, nbytes: int) -> None:
    now = int(time.time() * 1000)
    value = b"v" * 10_000
    for _ in range(nbytes // len(value)):
        batch = v2.build_batch([v2.RecordSpec(b"k", value, timestamp=now)])
        b.replica_manager.append_records(tp.topic, tp.partition, batch, now_ms=now)


def wait_until(b: InProcessBroker, check: Any, seconds: float = 20.0) -> None:
    deadline = time.monotonic() + seconds
    while not check():
        assert time.monotonic() < deadline, "timed out"
        b.run(asyncio.sleep(0.05))


@pytest.mark.parametrize("version", [0, 1, 2])
def test_error_codes(tmp_path: Path, dirs: list[Path], version: int) -> None:
    # The handler reads only the replica manager: no broker behind it.
    b = ReplicasOnly(tmp_path, {"t": 1}, **{"log.dirs": ",".join(map(str, dirs))})
    try:
        assert alter(b, {("t", 0): str(tmp_path / "nope")}, version) == {
            ("t", 0): ErrorCode.LOG_DIR_NOT_FOUND
        }
        assert alter(b, {("t", 0): "a"}, version) == {("t", 0): ErrorCode.LOG_DIR_NOT_FOUND}
        # Already there: nothing to do.
        here = b.logs.dir_of[TopicPartition("t", 0)]
        assert alter(b, {("t", 0): str(here)}, version) == {("t", 0): ErrorCode.NONE}
        assert not b.logs.future_logs
    finally:
        b.close()


def test_a_replica_not_hosted_yet_is_created_in_the_asked_dir(
    tmp_path: Path, dirs: list[Path]
) -> None:
    b = ReplicasOnly(tmp_path, **{"log.dirs": ",".join(map(str, dirs))})
    try:
        # The least loaded directory would be a (log.dirs order); b was asked for.
        assert alter(b, {("later", 0): str(dirs[1])}) == {
            ("later", 0): ErrorCode.REPLICA_NOT_AVAILABLE
        }
        b.add_topic("later", 1)  # the controller's LeaderAndIsr creates the replica
        assert b.logs.dir_of[TopicPartition("later", 0)] == dirs[1]
    finally:
        b.close()


def test_a_throttled_move_shows_as_future_then_completes(tmp_path: Path, dirs: list[Path]) -> None:
    # 1 B/s: after its first chunk (1 MiB) the copy waits for minutes.
    b = broker_on(tmp_path, dirs, **{RATE: "1"})
    try:
        b.create_topic("t", 1)
        tp = TopicPartition("t", 0)
        src = b.logs.dir_of[tp]
        dst = next(d for d in dirs if d != src)
        fill(b, tp, 3_000_000)
        expected = [bytes(x.data) for x in b.logs.get(tp).iter_batches()]
        assert alter(b, {("t", 0): str(dst)}) == {("t", 0): ErrorCode.NONE}
        b.run(asyncio.sleep(0.5))
        seen = describe(b)
        [(name, part, is_future, lag)] = seen[str(dst)]
        assert (name, part, is_future) == ("t", 0, True) and lag > 0
        assert seen[str(src)] == [("t", 0, False, 0)]
        # A dynamic value applies to the running copy at once.
        fast = {"name": RATE, "config_operation": 0, "value": "1000000000"}
        body = {"validate_only": False, "resources": [
            {"resource_type": 4, "resource_name": str(b.node_id), "configs": [fast]}]}  # fmt: skip
        resp = call(b, apis.INCREMENTAL_ALTER_CONFIGS, 1, body)
        assert resp is not None and resp.responses[0].error_code == ErrorCode.NONE
        wait_until(b, lambda: b.logs.dir_of[tp] == dst)
        assert describe(b) == {str(src): [], str(dst): [("t", 0, False, 0)]}
        assert [bytes(x.data) for x in b.logs.get(tp).iter_batches()] == expected
        assert not (src / "t-0").exists()
    finally:
        b.close()


def test_a_move_to_another_dir_cancels_the_running_one(tmp_path: Path) -> None:
    dirs = [(tmp_path / n).resolve() for n in "abc"]
    # 1 B/s: after its first chunk the copy waits for minutes.
    b = ReplicasOnly(tmp_path, {"t": 1}, move_rate=1, **{"log.dirs": ",".join(map(str, dirs))})
    try:
        tp = TopicPartition("t", 0)
        src = b.logs.dir_of[tp]
        first, second = [d for d in dirs if d != src]
        fill(b, tp, 2_000_000)
        assert alter(b, {("t", 0): str(first)}) == {("t", 0): ErrorCode.NONE}
        b.run(asyncio.sleep(0.2))
        assert b.logs.future_dir_of[tp] == first
        assert alter(b, {("t", 0): str(second)}) == {("t", 0): ErrorCode.NONE}
        assert b.logs.future_dir_of[tp] == second
        assert not list(first.glob("t-0.*-future"))
        # Asking for the current directory cancels the move.
        assert alter(b, {("t", 0): str(src)}) == {("t", 0): ErrorCode.NONE}
        assert not b.logs.future_logs and not list(second.glob("t-0.*-future"))
    finally:
        b.close()


def test_offline_dirs_and_long_names(tmp_path: Path) -> None:
    dirs = [(tmp_path / n).resolve() for n in "abc"]
    b = ReplicasOnly(tmp_path, {"t": 3}, **{"log.dirs": ",".join(map(str, dirs))})
    try:
        where = {d: p for p in range(3) for d in [b.logs.dir_of[TopicPartition("t", p)]]}
        assert set(where) == set(dirs)  # one partition per directory
        b.replica_manager.fail_log_dir(dirs[2], "test: disk gone")
        on_a, on_c = where[dirs[0]], where[dirs[2]]
        # The destination is offline; the partition is offline; some dir is offline
        # (no future log is made then: the partition might have a log there).
        assert alter(b, {("t", on_a): str(dirs[2])}) == {("t", on_a): ErrorCode.KAFKA_STORAGE_ERROR}
        assert alter(b, {("t", on_c): str(dirs[0])}) == {("t", on_c): ErrorCode.KAFKA_STORAGE_ERROR}
        assert alter(b, {("t", on_a): str(dirs[1])}) == {("t", on_a): ErrorCode.KAFKA_STORAGE_ERROR}
        assert not b.logs.future_logs
        # Kafka's limit on the future directory's name (255).
        long = "x" * 249
        assert alter(b, {(long, 0): str(dirs[0])}) == {(long, 0): ErrorCode.INVALID_TOPIC_EXCEPTION}
    finally:
        b.close()
