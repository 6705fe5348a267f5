"""Several log directories (JBOD): placement, restart, and one directory failing.

Disk failures are simulated with kt.broker.faults (root ignores chmod): the
broker is started with KT_TEST_FAULT_EIO_FILE naming a control file, and writing
a directory into it makes every write/fsync/read under that directory fail with
EIO from then on.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from broker_harness import KT, BrokerProcess, free_port

from kt.broker import faults
from kt.client import KafkaClient
from kt.protocol import ErrorCode, apis
from kt.storage.meta_properties import read_meta_properties
from kt.storage.record_batch import RecordSpec, build_batch

pytestmark = pytest.mark.integration


def start(tmp_path: Path, dirs: list[Path], **overrides: str) -> BrokerProcess:
    props = {"log.dirs": ",".join(map(str, dirs)), **overrides}
    return BrokerProcess(tmp_path / "broker", free_port(), props).start()


def run_client(broker: BrokerProcess, job: Any) -> Any:
    async def go() -> Any:
        async with KafkaClient(broker.bootstrap) as c:
            return await job(c)

    return asyncio.run(go())


def create_topic(broker: BrokerProcess, name: str, partitions: int) -> None:
    subprocess.run(
        [KT, "topic", "create", "--topic", name, "--partitions", str(partitions),
         "--bootstrap-server", broker.bootstrap],
        check=True, capture_output=True,
    )  # fmt: skip


def describe_dirs(broker: BrokerProcess) -> dict[str, Any]:
    out = subprocess.run(
        [KT, "log-dirs", "describe", "--json", "--bootstrap-server", broker.bootstrap],
        capture_output=True, text=True,
    )  # fmt: skip
    doc = json.loads(out.stdout)
    return {d["logDir"]: d for d in doc["brokers"][0]["logDirs"]}


def placement(dirs: list[Path], topic: str) -> dict[int, Path]:
    out = {}
    for d in dirs:
        for child in d.glob(f"{topic}-*"):
            out[int(child.name.rsplit("-", 1)[1])] = d
    return out


async def produce_codes(c: KafkaClient, topic: str, partitions: list[int]) -> dict[int, int]:
    body = apis.PRODUCE.request(
        transactional_id=None, acks=-1, timeout_ms=5000,
        topic_data=[{"name": topic, "partition_data": [
            {"index": p, "records": build_batch([RecordSpec(b"k", b"v")])} for p in partitions
        ]}],
    )  # fmt: skip
    resp = await c.send(apis.PRODUCE, body, 1)
    return {p.index: p.error_code for t in resp.responses for p in t.partition_responses}


async def list_offset_codes(c: KafkaClient, topic: str, partitions: list[int]) -> dict[int, Any]:
    body = apis.LIST_OFFSETS.request(
        replica_id=-1, isolation_level=0, timeout_ms=5000,
        topics=[{"name": topic, "partitions": [
            {"partition_index": p, "timestamp": -1} for p in partitions
        ]}],
    )  # fmt: skip
    resp = await c.send(apis.LIST_OFFSETS, body, 1)
    return {p.partition_index: p for t in resp.topics for p in t.partitions}


async def fetch_codes(c: KafkaClient, topic: str, partitions: list[int]) -> dict[int, int]:
    await c.topic(topic)
    body = apis.FETCH.request(
        replica_id=-1, max_wait_ms=0, min_bytes=0, max_bytes=1 << 20, isolation_level=0,
        session_id=0, session_epoch=-1,
        topics=[{"topic": topic, "topic_id": c.metadata.topics[topic].topic_id, "partitions": [
            {"partition": p, "fetch_offset": 0, "partition_max_bytes": 1 << 20,
             "current_leader_epoch": -1, "log_start_offset": -1, "last_fetched_epoch": -1}
            for p in partitions
        ]}],
        forgotten_topics_data=[], rack_id="",
    )  # fmt: skip
    resp = await c.send(apis.FETCH, body, 1)
    return {p.partition_index: p.error_code for t in resp.responses for p in t.partitions}


async def metadata_of(c: KafkaClient, topic: str) -> dict[int, Any]:
    body = apis.METADATA.request(topics=[{"name": topic}], allow_auto_topic_creation=False)
    resp = await c.send(apis.METADATA, body, 1)
    return {p.partition_index: p for p in resp.topics[0].partitions}


def test_placement_identity_and_restart_across_three_dirs(tmp_path: Path) -> None:
    dirs = [tmp_path / n for n in ("d0", "d1", "d2")]
    broker = start(tmp_path, dirs, **{"num.recovery.threads.per.data.dir": "3"})
    try:
        create_topic(broker, "spread", 6)
        where = placement(dirs, "spread")
        assert sorted(where) == list(range(6))
        # The directory holding the fewest partitions gets the next one: 2 each.
        assert sorted(sum(1 for d in where.values() if d == x) for x in dirs) == [2, 2, 2]
        metas = [read_meta_properties(d / "meta.properties") for d in dirs]
        assert len({m.cluster_id for m in metas}) == 1 and {m.node_id for m in metas} == {1}
        assert len({m.directory_id for m in metas}) == 3 and all(m.version == 1 for m in metas)
        assert all((d / ".lock").exists() for d in dirs)

        async def fill(c: KafkaClient) -> None:
            for p in range(6):
                await c.produce("spread", p, [RecordSpec(b"k", f"v{p}".encode())] * (p + 1))

        run_client(broker, fill)
        broker.restart()
        assert all((d / ".kafka_cleanshutdown").exists() is False for d in dirs)  # consumed
        assert placement(dirs, "spread") == where

        async def ends(c: KafkaClient) -> dict[int, int]:
            got = await list_offset_codes(c, "spread", list(range(6)))
            return {p: got[p].offset for p in got}

        assert run_client(broker, ends) == {p: p + 1 for p in range(6)}
        described = describe_dirs(broker)
        assert set(described) == {str(d) for d in dirs}
        for d in dirs:
            names = {p["partition"] for p in described[str(d)]["partitions"]}
            assert names == {f"spread-{p}" for p, x in where.items() if x == d}
            assert described[str(d)]["error"] is None
        # The new partitions of a second topic keep balancing by count.
        create_topic(broker, "more", 3)
        assert sorted(placement(dirs, "more").values()) == sorted(dirs)
    finally:
        broker.kill()


def test_one_failed_dir_while_producing_to_the_other_then_last_dir_halts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from kafka import KafkaProducer

    control = tmp_path / "failing-dirs"
    control.write_text("")
    monkeypatch.setenv(faults.ENV_VAR, str(control))
    good, bad = tmp_path / "good", tmp_path / "bad"
    broker = start(
        tmp_path, [good, bad],
        **{"log.flush.offset.checkpoint.interval.ms": "200",
           "replica.high.watermark.checkpoint.interval.ms": "200"},
    )  # fmt: skip
    try:
        create_topic(broker, "t", 4)
        where = placement([good, bad], "t")
        on_good = sorted(p for p, d in where.items() if d == good)
        on_bad = sorted(p for p, d in where.items() if d == bad)
        assert on_good == [0, 2] and on_bad == [1, 3]

        producer = KafkaProducer(bootstrap_servers=broker.bootstrap, acks="all", linger_ms=0,
                                 request_timeout_ms=5000, retries=0)  # fmt: skip
        sent: list[Any] = []
        errors: list[BaseException] = []
        stop = threading.Event()

        def keep_producing() -> None:
            i = 0
            while not stop.is_set():
                try:
                    sent.append(producer.send("t", f"m{i}".encode(), partition=on_good[i % 2])
                                .get(timeout=10))  # fmt: skip
                except BaseException as exc:
                    errors.append(exc)
                i += 1
                time.sleep(0.01)

        worker = threading.Thread(target=keep_producing, daemon=True)
        worker.start()
        time.sleep(0.5)
        control.write_text(f"{bad}\n")

        async def after_failure(c: KafkaClient) -> tuple[Any, ...]:
            # The first write to the failed dir fails with the I/O error itself.
            first = await produce_codes(c, "t", [1])
            return (
                first,
                await produce_codes(c, "t", [0, 1, 2, 3]),
                await fetch_codes(c, "t", [0, 1, 2, 3]),
                await list_offset_codes(c, "t", [0, 1, 2, 3]),
                await metadata_of(c, "t"),
            )

        first, produced, fetched, listed, meta = run_client(broker, after_failure)
        storage = ErrorCode.KAFKA_STORAGE_ERROR
        assert first == {1: storage}
        assert produced == {0: 0, 1: storage, 2: 0, 3: storage}
        assert fetched == {0: 0, 1: storage, 2: 0, 3: storage}
        assert {p: listed[p].error_code for p in listed} == {0: 0, 1: storage, 2: 0, 3: storage}
        for p in on_bad:
            assert meta[p].error_code == ErrorCode.LEADER_NOT_AVAILABLE
            assert meta[p].leader_id == -1 and list(meta[p].offline_replicas) == [1]
        for p in on_good:
            assert meta[p].error_code == 0 and meta[p].leader_id == 1
            assert list(meta[p].offline_replicas) == []
        described = describe_dirs(broker)
        assert described[str(bad)]["error"] == "KAFKA_STORAGE_ERROR"
        assert described[str(bad)]["partitions"] == []
        assert described[str(good)]["error"] is None
        assert {p["partition"] for p in described[str(good)]["partitions"]} == {"t-0", "t-2"}

        # The producer on the healthy dir never noticed; checkpoints of the failed
        # dir are no longer attempted (one failure line, no repeats).
        time.sleep(1.0)  # checkpoint passes run meanwhile (the log must not repeat)
        count_before = len(sent)
        deadline = time.monotonic() + 15  # more sends, however slow the machine
        while len(sent) <= count_before and not errors and time.monotonic() < deadline:
            time.sleep(0.05)
        assert len(sent) > count_before and not errors, errors[:3]
        failure_lines = [
            line for line in broker.log().splitlines() if "failed and is offline" in line
        ]
        assert len(failure_lines) == 1 and str(bad) in failure_lines[0]
        assert "(2 partitions offline)" in failure_lines[0]

        # The last directory failing halts the broker with one clear line.
        stop.set()
        worker.join(15)
        producer.close(timeout=2)
        control.write_text(f"{bad}\n{good}\n")

        async def poke(c: KafkaClient) -> None:
            await produce_codes(c, "t", [0])

        try:
            run_client(broker, poke)
        except Exception:
            pass
        assert broker.proc is not None
        code = broker.proc.wait(10)
        assert code != 0
        fatal = [line for line in broker.log().splitlines() if "Shutdown broker" in line]
        assert len(fatal) == 1, broker.log()
        assert "CRITICAL" in fatal[0] and "all log dirs in" in fatal[0] and str(good) in fatal[0]
    finally:
        broker.kill()


def test_unusable_dir_at_startup_is_offline_unless_all_are(tmp_path: Path) -> None:
    a, not_a_dir, c = tmp_path / "a", tmp_path / "file", tmp_path / "c"
    not_a_dir.write_text("I am a file")
    broker = start(tmp_path, [a, not_a_dir, c])
    try:
        described = describe_dirs(broker)
        assert described[str(not_a_dir)]["error"] == "KAFKA_STORAGE_ERROR"
        assert described[str(a)]["error"] is None and described[str(c)]["error"] is None
        create_topic(broker, "x", 4)
        assert sorted(placement([a, c], "x")) == [0, 1, 2, 3]
        assert "log directory " + str(not_a_dir) + " is offline" in broker.log()
    finally:
        broker.kill()

    # Every directory unusable, or the first (metadata) one: the broker refuses.
    for dirs, expected in (
        ([not_a_dir], "none of the log dirs"),
        ([not_a_dir, c], "the metadata log dir (the first of log.dirs) is offline"),
    ):
        props = [
            f"log.dirs={','.join(map(str, dirs))}",
            f"listeners=PLAINTEXT://127.0.0.1:{free_port()}",
        ]
        proc = subprocess.run(
            [KT, "broker", "start", *[arg for p in props for arg in ("--override", p)]],
            capture_output=True, text=True, timeout=30,
        )  # fmt: skip
        assert proc.returncode == 1
        errors = [line for line in proc.stderr.splitlines() if line.startswith("kt: error:")]
        assert len(errors) == 1 and expected in errors[0], proc.stderr


def test_clean_shutdown_marker_decides_recovery(tmp_path: Path) -> None:
    d = tmp_path / "d"
    broker = start(tmp_path, [d])
    try:
        create_topic(broker, "r", 1)

        async def fill(c: KafkaClient) -> None:
            for i in range(5):
                await c.produce("r", 0, [RecordSpec(b"k", f"v{i}".encode())])

        run_client(broker, fill)
        seg = d / "r-0" / "00000000000000000000.log"
        for marker_kept in (True, False):
            broker.stop()
            assert (d / ".kafka_cleanshutdown").exists()
            good_size = seg.stat().st_size
            with open(seg, "ab") as fh:
                fh.write(b"\x00\x00\x00\x00\x00\x00\x00\x05\x00\x00\x10\x00torn")
            if not marker_kept:
                (d / ".kafka_cleanshutdown").unlink()
            broker.start()
            if marker_kept:
                # A clean shutdown skips recovery: nothing is re-validated or cut.
                assert seg.stat().st_size == good_size + 16
                assert "recovery truncated" not in broker.log()
                broker.kill()  # unclean now: no marker left behind
                assert not (d / ".kafka_cleanshutdown").exists()
                with open(seg, "r+b") as fh:
                    fh.truncate(good_size)
                broker.start()
            else:
                assert seg.stat().st_size == good_size
                assert "recovery truncated" in broker.log()

        async def end(c: KafkaClient) -> int:
            return (await list_offset_codes(c, "r", [0]))[0].offset

        assert run_client(broker, end) == 5
    finally:
        broker.kill()


def test_log_start_checkpoint_beyond_log_end(tmp_path: Path) -> None:
    d = tmp_path / "d"
    broker = start(tmp_path, [d])
    try:
        create_topic(broker, "s", 1)

        async def fill(c: KafkaClient) -> None:
            for i in range(3):
                await c.produce("s", 0, [RecordSpec(b"k", f"v{i}".encode())])

        run_client(broker, fill)
        broker.stop()
        (d / "log-start-offset-checkpoint").write_text("0\n1\ns 0 1000\n")
        broker.start()

        async def offsets(c: KafkaClient) -> tuple[int, int]:
            body = apis.LIST_OFFSETS.request(
                replica_id=-1, isolation_level=0, timeout_ms=5000,
                topics=[{"name": "s", "partitions": [
                    {"partition_index": 0, "timestamp": ts} for ts in (-2,)]}],
            )  # fmt: skip
            earliest = (await c.send(apis.LIST_OFFSETS, body, 1)).topics[0].partitions[0]
            latest = (await list_offset_codes(c, "s", [0]))[0]
            return earliest.offset, latest.offset

        # As Kafka's LogLoader: every segment goes, the log restarts empty at 1000.
        assert run_client(broker, offsets) == (1000, 1000)
        assert sorted(p.name for p in (d / "s-0").glob("*.log")) == ["00000000000000001000.log"]
    finally:
        broker.kill()
