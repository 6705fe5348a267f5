"""Spark tests: one local SparkSession for the whole session, and generated segments.

The session starts once (JVM start is the slow part) and is shared by every test
module here. Skipped when PySpark is not installed.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("pyspark")

from kt.storage import legacy
from kt.storage import record_batch as v2
from kt.storage.index_check import apply_rebuild, plan_rebuild
from kt.storage.log_files import segment_file_name

TS0 = 1_700_000_000_000


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    """The one local[2] SparkSession of the test run, kt sources registered."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from kt.spark.jobs import session

    s = session("local[2]", {"spark.sql.shuffle.partitions": "4"}, "kt-tests", progress=False)
    yield s
    s.stop()


def _write_partition(d: Path, batches: list[bytes], per_segment: int, interval: int) -> None:
    """Write `batches` (offsets already set) as segments of `per_segment` batches,
    with the indexes Kafka's recovery would write (`interval` index bytes)."""
    d.mkdir(parents=True)
    logs = []
    for i in range(0, len(batches), per_segment):
        chunk = batches[i : i + per_segment]
        base = int.from_bytes(chunk[0][:8], "big", signed=True)
        if chunk[0][16] != 2:  # legacy: the entry holds the last offset; use the first
            base = _legacy_first(chunk[0])
        log = d / segment_file_name(base, ".log")
        log.write_bytes(b"".join(chunk))
        logs.append(log)
    for i, log in enumerate(logs):
        apply_rebuild(plan_rebuild(log, index_interval_bytes=interval, prior_segments=logs[:i]))


def _legacy_first(entry: bytes) -> int:
    msg = legacy.parse_message(entry)
    for inner in legacy.iter_inner(msg):
        return inner.offset
    return msg.offset


def v2_batches(n_batches: int = 60, per_batch: int = 8, keys: int = 13) -> list[bytes]:
    """Batches of every codec with headers, tombstones, idempotent producers and one
    committed transaction; offsets consecutive from 0."""
    out = []
    offset = 0
    for b in range(n_batches):
        specs = []
        for i in range(per_batch):
            o = offset + i
            key = None if o % 17 == 5 else b"key-%d" % (o % keys)
            value = None if o % 11 == 3 else b"value-%d-" % o + bytes(range(o % 7)) * 20
            headers = [("h", b"%d" % o), ("n", None)] if o % 3 == 0 else []
            specs.append(v2.RecordSpec(key, value, headers, timestamp=TS0 + o * 10))
        pid = 1000 + b % 2 if b % 4 else -1
        out.append(
            v2.build_batch(
                specs,
                base_offset=offset,
                codec=b % 5,
                producer_id=pid,
                producer_epoch=0 if pid >= 0 else -1,
                base_sequence=(offset if pid >= 0 else -1),
                partition_leader_epoch=b // 20,
            )
        )
        offset += per_batch
    # A transaction: two data batches of producer 7 and its COMMIT marker.
    for _ in range(2):
        spec = [v2.RecordSpec(b"txn-key", b"txn-value", timestamp=TS0 + offset * 10)]
        out.append(
            v2.build_batch(
                spec,
                base_offset=offset,
                producer_id=7,
                producer_epoch=0,
                base_sequence=0 if len(out) == n_batches else 1,
                is_transactional=True,
            )
        )
        offset += 1
    out.append(
        v2.build_end_txn_marker(
            commit=True,
            producer_id=7,
            producer_epoch=0,
            coordinator_epoch=0,
            base_offset=offset,
            timestamp=TS0 + offset * 10,
        )
    )
    return out


def legacy_batches() -> list[bytes]:
    """Magic 0 and 1 message sets, plain and compressed (gzip, snappy, lz4)."""
    out = []
    offset = 0
    for magic in (0, 1):
        for codec in (0, 1, 2, 3):
            recs = [
                (b"lk-%d" % ((offset + i) % 5), b"lv-%d" % (offset + i), TS0 + (offset + i) * 10)
                for i in range(4)
            ]
            out.append(legacy.build_message_set(recs, magic=magic, base_offset=offset, codec=codec))
            offset += 4
    # Uncompressed message sets are one entry per message: split them into batches.
    split = []
    for data in out:
        pos = 0
        while pos < len(data):
            size = int.from_bytes(data[pos + 8 : pos + 12], "big") + 12
            split.append(data[pos : pos + size])
            pos += size
    return split


@pytest.fixture(scope="session")
def gen_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A log directory: gen-0 (v2, every codec, 9 segments), legacy-0 (magic 0/1)."""
    root = tmp_path_factory.mktemp("logdir")
    _write_partition(root / "gen-0", v2_batches(), per_segment=8, interval=256)
    _write_partition(root / "legacy-0", legacy_batches(), per_segment=10, interval=64)
    (root / "meta.properties").write_text("version=1\n")
    return root


@pytest.fixture(scope="session")
def damaged_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A partition with a CRC-failing batch and a damaged region."""
    root = tmp_path_factory.mktemp("damaged")
    d = root / "broken-0"
    _write_partition(d, v2_batches(20), per_segment=10, interval=4096)
    # Garbage inside a batch of the first segment: its CRC fails, framing holds.
    log = d / segment_file_name(0, ".log")
    data = bytearray(log.read_bytes())
    mid = len(data) // 2
    data[mid : mid + 40] = b"\xff" * 40
    log.write_bytes(bytes(data))
    # 100 bytes of garbage between two batches of the second: a damaged region.
    log = d / segment_file_name(80, ".log")
    data = bytearray(log.read_bytes())
    second = int.from_bytes(data[8:12], "big") + 12
    log.write_bytes(bytes(data[:second]) + b"\x07" * 100 + bytes(data[second:]))
    return root
