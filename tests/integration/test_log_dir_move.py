"""Moving partitions between the two log directories of a real broker under load,
with `kt reassign-partitions` (a plan whose log_dirs name directories), real
clients producing acks=all all along, and every acknowledged record consumed
once, in order, afterwards."""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path

import pytest
from broker_harness import KT, BrokerProcess, free_port
from cluster_harness import BackgroundProducer, consume_all

pytestmark = pytest.mark.integration

TOPIC = "moving"
PARTITIONS = 3


def kt(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([KT, *args], capture_output=True, text=True, timeout=120)


def placement(broker: BrokerProcess) -> dict[int, tuple[str, bool]]:
    """partition -> (log dir, is future) of the topic's replicas, from DescribeLogDirs."""
    out = kt("log-dirs", "describe", "--json", "--topic-list", TOPIC,
             "--bootstrap-server", broker.bootstrap)  # fmt: skip
    doc = json.loads(out.stdout)
    found: dict[int, tuple[str, bool]] = {}
    for d in doc["brokers"][0]["logDirs"]:
        for p in d["partitions"]:
            index = int(p["partition"].rsplit("-", 1)[1])
            if p["isFuture"] or index not in found:
                found[index] = (d["logDir"], p["isFuture"])
    return found


def prefill(
    broker: BrokerProcess, count: int, size: int, partitions: int = PARTITIONS
) -> dict[int, dict[bytes, int]]:
    """`count` records of `size` bytes per partition (kafka-python, acks=all):
    partition -> value -> offset."""
    from kafka import KafkaProducer

    p = KafkaProducer(bootstrap_servers=broker.bootstrap, acks="all", linger_ms=20)
    futures = []
    for index in range(partitions):
        for i in range(count):
            value = f"fill-{index}-{i:06d}-".encode().ljust(size, b"x")
            futures.append((index, value, p.send(TOPIC, value=value, partition=index)))
    p.flush(60)
    out: dict[int, dict[bytes, int]] = {i: {} for i in range(partitions)}
    for index, value, fut in futures:
        out[index][value] = fut.get(timeout=60).offset
    p.close(timeout=10)
    return out


@pytest.fixture
def broker(tmp_path: Path) -> BrokerProcess:
    dirs = [(tmp_path / "disk-a").resolve(), (tmp_path / "disk-b").resolve()]
    b = BrokerProcess(tmp_path / "broker", free_port(), {
        "log.dirs": ",".join(map(str, dirs)),
        "log.segment.bytes": "65536",
        "log.segment.delete.delay.ms": "500",
    }).start()  # fmt: skip
    yield b
    b.stop()


def test_a_move_between_log_dirs_under_load_keeps_every_record(
    broker: BrokerProcess, tmp_path: Path
) -> None:
    out = kt("topic", "create", "--topic", TOPIC, "--partitions", str(PARTITIONS),
             "--bootstrap-server", broker.bootstrap)  # fmt: skip
    assert out.returncode == 0, out.stderr
    filled = prefill(broker, 120, 10_000)  # 3.6 MB: the throttled copy takes seconds
    producers = [
        BackgroundProducer(client, broker.bootstrap, TOPIC, f"{client}-{p}", p, rate=150).start()
        for p in range(PARTITIONS)
        for client in ("kafka-python", "confluent")
    ]
    try:
        deadline = time.monotonic() + 30
        while sum(len(p.acked) for p in producers) < 600:
            assert time.monotonic() < deadline, "the producers did not get going"
            time.sleep(0.1)
        before = placement(broker)
        dirs = [str((tmp_path / n).resolve()) for n in ("disk-a", "disk-b")]
        target = {p: next(d for d in dirs if d != before[p][0]) for p in range(PARTITIONS)}
        plan = tmp_path / "plan.json"
        plan.write_text(json.dumps({"version": 1, "partitions": [
            {"topic": TOPIC, "partition": p, "replicas": [1], "log_dirs": [target[p]]}
            for p in range(PARTITIONS)]}))  # fmt: skip
        out = kt("reassign-partitions", "--execute", "--reassignment-json-file", str(plan),
                 "--replica-alter-log-dirs-throttle", "200000",
                 "--bootstrap-server", broker.bootstrap)  # fmt: skip
        assert out.returncode == 0, out.stderr
        lines = out.stdout.splitlines()
        assert "The replica-alter-dir throttle limit was set to 200000 B/s" in lines
        assert lines[-1] == "Successfully started log directory moves for: " + ",".join(
            f"{TOPIC}-{p}-1" for p in range(PARTITIONS)
        )
        deadline = time.monotonic() + 120
        in_progress = 0
        while True:
            out = kt("reassign-partitions", "--verify", "--reassignment-json-file", str(plan),
                     "--bootstrap-server", broker.bootstrap)  # fmt: skip
            assert out.returncode == 0, out.stderr
            done = [f"Reassignment of replica {TOPIC}-{p}-1 completed successfully."
                    for p in range(PARTITIONS)]  # fmt: skip
            if all(line in out.stdout.splitlines() for line in done):
                break
            assert "is still in progress." in out.stdout, out.stdout
            in_progress += 1
            assert time.monotonic() < deadline, out.stdout
            time.sleep(0.5)
        assert "Clearing broker-level throttles on broker 1" in out.stdout
        # Copying ~1.6 MB past the quota's burst at 200 kB/s takes seconds: the moves
        # were seen running while the producers wrote.
        assert in_progress > 0
        time.sleep(1.0)  # a little more load on the moved logs
    finally:
        for p in producers:
            p.stop()
    assert placement(broker) == {p: (target[p], False) for p in range(PARTITIONS)}
    for p in producers:
        assert not p.errors, p.errors[:5]
    for index in range(PARTITIONS):
        mine = [p for p in producers if p.partition == index]
        acked = {v: off for p in mine for v, off in p.acked.items()}
        acked.update(filled[index])
        got = consume_all(broker.bootstrap, TOPIC, index, len(acked))
        values = [v for _, _, v in got]
        assert len(values) == len(set(values)), "a record was consumed twice"
        offsets = {v: off for off, _, v in got}
        assert {v: offsets.get(v) for v in acked} == acked  # every ack, at its offset
        for p in mine:  # each producer's records in the order it sent them
            own = [v for v in values if v is not None and v.startswith(p.tag.encode() + b"-")]
            assert own == sorted(own)
    # The old directories go after log.segment.delete.delay.ms.
    deadline = time.monotonic() + 30
    while any(list(Path(before[p][0]).glob(f"{TOPIC}-{p}*")) for p in range(PARTITIONS)):
        assert time.monotonic() < deadline, "old partition directories left behind"
        time.sleep(0.2)


def test_a_plan_naming_a_missing_dir_fails_in_one_line(
    broker: BrokerProcess, tmp_path: Path
) -> None:
    out = kt("topic", "create", "--topic", TOPIC, "--partitions", "1",
             "--bootstrap-server", broker.bootstrap)  # fmt: skip
    assert out.returncode == 0, out.stderr
    plan = tmp_path / "plan.json"
    plan.write_text(
        json.dumps(
            {
                "version": 1,
                "partitions": [
                    {"topic": TOPIC, "partition": 0, "replicas": [1], "log_dirs": ["/no/such/dir"]}
                ],
            }
        )
    )
    out = kt("reassign-partitions", "--execute", "--reassignment-json-file", str(plan),
             "--bootstrap-server", broker.bootstrap)  # fmt: skip
    assert out.returncode == 1
    assert out.stdout == ""
    [line] = out.stderr.splitlines()
    assert "Failed to alter dir for moving-0-1" in line and "LOG_DIR_NOT_FOUND" in line
    assert "/no/such/dir" in line


def replica_dirs(bootstrap: str, topic: str) -> dict[tuple[int, int], tuple[str, bool]]:
    """(partition, broker) -> (log dir, is future), from DescribeLogDirs of every broker."""
    out = kt("log-dirs", "describe", "--json", "--topic-list", topic, "--bootstrap-server",
             bootstrap)  # fmt: skip
    found: dict[tuple[int, int], tuple[str, bool]] = {}
    for b in json.loads(out.stdout)["brokers"]:
        for d in b["logDirs"]:
            for p in d["partitions"]:
                key = (int(p["partition"].rsplit("-", 1)[1]), b["broker"])
                if p["isFuture"] or key not in found:
                    found[key] = (d["logDir"], p["isFuture"])
    return found


@pytest.mark.cluster
def test_moves_on_cluster_members_leader_and_follower(zookeeper: str, tmp_path: Path) -> None:
    dirs = {i: [str((tmp_path / f"b{i}-{n}").resolve()) for n in "ab"] for i in (1, 2)}
    brokers = [
        BrokerProcess(tmp_path / f"b{i}", free_port(), {
            "zookeeper.connect": zookeeper, "broker.id": str(i), "log.dirs": ",".join(dirs[i]),
            "offsets.topic.replication.factor": "2", "replica.lag.time.max.ms": "3000",
            "zookeeper.session.timeout.ms": "6000", "log.segment.bytes": "65536",
            "log.segment.delete.delay.ms": "500",
        }).start(timeout=60)
        for i in (1, 2)
    ]  # fmt: skip
    bootstrap = ",".join(b.bootstrap for b in brokers)
    try:
        deadline = time.monotonic() + 60
        while True:
            out = kt("topic", "create", "--topic", TOPIC, "--partitions", "2",
                     "--replication-factor", "2", "--bootstrap-server", bootstrap)  # fmt: skip
            if out.returncode == 0:
                break
            assert time.monotonic() < deadline, out.stderr
            time.sleep(0.5)
        producers = [
            BackgroundProducer(client, bootstrap, TOPIC, f"{client}-{p}", p, rate=100).start()
            for p in range(2)
            for client in ("kafka-python", "confluent")
        ]
        try:
            deadline = time.monotonic() + 60
            while sum(len(p.acked) for p in producers) < 300:
                assert time.monotonic() < deadline, "the producers did not get going"
                time.sleep(0.1)
            before = replica_dirs(bootstrap, TOPIC)
            assert sorted(before) == [(0, 1), (0, 2), (1, 1), (1, 2)]
            target = {k: next(d for d in dirs[k[1]] if d != before[k][0]) for k in before}
            plan = tmp_path / "plan.json"
            plan.write_text(json.dumps({"version": 1, "partitions": [
                {"topic": TOPIC, "partition": p, "replicas": [1, 2],
                 "log_dirs": [target[(p, 1)], target[(p, 2)]]} for p in range(2)]}))  # fmt: skip
            out = kt("reassign-partitions", "--execute", "--reassignment-json-file", str(plan),
                     "--bootstrap-server", bootstrap)  # fmt: skip
            assert out.returncode == 0, out.stderr
            deadline = time.monotonic() + 120
            while True:
                out = kt("reassign-partitions", "--verify", "--reassignment-json-file",
                         str(plan), "--bootstrap-server", bootstrap)  # fmt: skip
                done = [f"Reassignment of replica {TOPIC}-{p}-{b} completed successfully."
                        for p in range(2) for b in (1, 2)]  # fmt: skip
                if all(line in out.stdout.splitlines() for line in done):
                    break
                assert time.monotonic() < deadline, out.stdout + out.stderr
                time.sleep(0.5)
            time.sleep(1.0)
        finally:
            for p in producers:
                p.stop()
        assert replica_dirs(bootstrap, TOPIC) == {k: (d, False) for k, d in target.items()}
        for p in producers:
            assert not p.errors, p.errors[:5]
        for index in range(2):
            acked = {v: off for p in producers if p.partition == index
                     for v, off in p.acked.items()}  # fmt: skip
            got = consume_all(bootstrap, TOPIC, index, len(acked))
            values = [v for _, _, v in got]
            assert len(values) == len(set(values)), "a record was consumed twice"
            offsets = {v: off for off, _, v in got}
            assert {v: offsets.get(v) for v in acked} == acked
    finally:
        for b in brokers:
            b.stop()


def test_a_throttled_move_is_cancelled(broker: BrokerProcess, tmp_path: Path) -> None:
    out = kt("topic", "create", "--topic", TOPIC, "--partitions", "1",
             "--bootstrap-server", broker.bootstrap)  # fmt: skip
    assert out.returncode == 0, out.stderr
    prefill(broker, 200, 10_000, partitions=1)  # 2 MB: 1 B/s stops the copy after 1 MiB
    src = placement(broker)[0][0]
    dst = next(str((tmp_path / n).resolve()) for n in ("disk-a", "disk-b") if
               str((tmp_path / n).resolve()) != src)  # fmt: skip
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps({"version": 1, "partitions": [
        {"topic": TOPIC, "partition": 0, "replicas": [1], "log_dirs": [dst]}]}))  # fmt: skip
    args = ["--reassignment-json-file", str(plan), "--bootstrap-server", broker.bootstrap]
    out = kt("reassign-partitions", "--execute", "--replica-alter-log-dirs-throttle", "1", *args)
    assert out.returncode == 0, out.stderr
    assert placement(broker)[0] == (dst, True)
    out = kt("reassign-partitions", "--verify", *args)
    assert f"Reassignment of replica {TOPIC}-0-1 is still in progress." in out.stdout
    assert "Clearing broker-level throttles" not in out.stdout
    out = kt("reassign-partitions", "--cancel", *args)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert f"Successfully started log directory move for: {TOPIC}-0-1" in lines
    # then the throttles go, as after any --cancel without --preserve-throttles
    assert lines[-2:] == ["Clearing broker-level throttles on broker 1",
                          f"Clearing topic-level throttles on topic {TOPIC}"]  # fmt: skip
    assert placement(broker)[0] == (src, False)
    assert not list(Path(dst).glob(f"{TOPIC}-0.*-future"))
    out = kt("reassign-partitions", "--verify", *args)
    assert (f"Partition {TOPIC}-0 on broker 1 is not being moved from log dir {src} to {dst}."
            in out.stdout.splitlines())  # fmt: skip


def test_kafka_python_admin_moves_a_replica(broker: BrokerProcess, tmp_path: Path) -> None:
    """kafka-python's AlterReplicaLogDirs and DescribeLogDirs as the oracle."""
    from kafka import KafkaAdminClient, TopicPartitionReplica
    from kafka.errors import LogDirNotFoundError, NoError

    out = kt("topic", "create", "--topic", TOPIC, "--partitions", "1",
             "--bootstrap-server", broker.bootstrap)  # fmt: skip
    assert out.returncode == 0, out.stderr
    filled = prefill(broker, 50, 1000, partitions=1)
    src = placement(broker)[0][0]
    dst = next(str((tmp_path / n).resolve()) for n in ("disk-a", "disk-b") if
               str((tmp_path / n).resolve()) != src)  # fmt: skip
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    try:
        replica = TopicPartitionReplica(TOPIC, 0, 1)
        assert admin.alter_replica_log_dirs({replica: "/no/such/dir"}) == {
            replica: LogDirNotFoundError
        }
        assert admin.alter_replica_log_dirs({replica: dst}) == {replica: NoError}

        def where() -> list[tuple[str, bool]]:
            [doc] = admin.describe_log_dirs({TOPIC: [0]})
            return sorted(
                (d["log_dir"], p["is_future_key"])
                for d in doc["log_dirs"]
                for t in d["topics"]
                for p in t["partitions"]
            )

        deadline = time.monotonic() + 30
        while where() != [(dst, False)]:
            assert time.monotonic() < deadline, where()
            time.sleep(0.2)
    finally:
        admin.close()
    got = consume_all(broker.bootstrap, TOPIC, 0, len(filled[0]))
    assert {v: off for off, _, v in got} == filled[0]
