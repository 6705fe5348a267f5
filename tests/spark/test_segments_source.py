"""`kt-segments` against the storage core, and the jobs behind `kt analyze`/`kt export`."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from kt.spark.jobs import CompactionParams, Scan, analyze_topics
from kt.spark.segments_source import read_counters
from kt.storage.cleaner import estimate
from kt.storage.errors import StorageError
from kt.storage.file_records import Damage, FileRecords
from kt.storage.index_check import find_segment_logs
from kt.storage.log_config import LogConfig
from kt.storage.log_files import parse_partition_dir_name

pytestmark = pytest.mark.integration
KT = str(Path(sys.executable).with_name("kt"))
NOW = 1_800_000_000_000
KEY_COLS = ["topic", "partition", "offset", "timestamp", "key", "value", "headers", "sequence"]


def core_records(paths: list[Path], resync: bool = False) -> list[tuple[Any, ...]]:
    """What the storage core decodes, as sorted comparable tuples."""
    out = []
    for log in find_segment_logs(paths):
        parsed = parse_partition_dir_name(log.parent.name)
        assert parsed is not None
        with open(log, "rb") as f:
            for item in FileRecords(f).batches(resync=resync):
                if isinstance(item, Damage):
                    assert resync or item.reason.startswith("zero-filled"), item
                    continue
                try:
                    records = list(item.records())
                except StorageError:
                    assert resync  # the source reports it as one error row
                    continue
                for r in records:
                    hdrs = tuple((k, None if v is None else bytes(v)) for k, v in r.headers)
                    out.append(
                        (parsed.topic, parsed.partition, r.offset, r.timestamp,
                         r.key, r.value, hdrs, r.sequence)
                    )  # fmt: skip
    return sorted(out, key=repr)


def spark_records(df: Any) -> list[tuple[Any, ...]]:
    out = []
    for row in df.where("error is null").select(*KEY_COLS).collect():
        t = list(row)
        t[4] = None if t[4] is None else bytes(t[4])
        t[5] = None if t[5] is None else bytes(t[5])
        t[6] = tuple((h["key"], None if h["value"] is None else bytes(h["value"])) for h in t[6])
        out.append(tuple(t))
    return sorted(out, key=repr)


def load(spark: Any, paths: list[Path], **options: Any) -> Any:
    return (
        spark.read.format("kt-segments")
        .options(**{k: str(v) for k, v in options.items()})
        .load([str(p) for p in paths])
    )


def test_records_match_the_storage_core(spark: Any, fixtures_dir: Path, gen_dir: Path) -> None:
    paths = [fixtures_dir, fixtures_dir / "logdir-0.10", gen_dir]
    expected = core_records(paths)
    assert len(expected) > 1000
    df = load(spark, paths)
    got = spark_records(df)
    assert got == expected
    magics = {r.magic for r in df.select("magic").distinct().collect()}
    codecs = {r.codec for r in df.select("codec").distinct().collect()}
    assert magics == {0, 1, 2}
    assert codecs == {"none", "gzip", "snappy", "lz4", "zstd"}
    assert df.where("not crc_valid").count() == 0
    # level=batch: one row per batch, same batches the core frames.
    batches = load(spark, paths, level="batch").where("error is null").count()
    n = 0
    for log in find_segment_logs(paths):
        with open(log, "rb") as f:
            n += sum(1 for b in FileRecords(f).batches() if not isinstance(b, Damage))
    assert batches == n


def test_byte_range_splits_give_the_same_rows(spark: Any, gen_dir: Path, tmp_path: Path) -> None:
    whole, split = tmp_path / "whole", tmp_path / "split"
    one = spark_records(load(spark, [gen_dir], metricsDir=whole))
    many = spark_records(load(spark, [gen_dir], metricsDir=split, maxBytesPerPartition=1000))
    assert many == one
    segments = len(find_segment_logs([gen_dir]))
    assert read_counters(whole)["splits"] == segments
    assert read_counters(split)["splits"] > segments + 8
    # Each batch is read by exactly one range.
    assert read_counters(split)["batches_scanned"] == read_counters(whole)["batches_scanned"]


def test_pushdown_reads_less_and_returns_the_same_rows(
    spark: Any, gen_dir: Path, tmp_path: Path
) -> None:
    full_dir, off_dir, ts_dir = tmp_path / "full", tmp_path / "off", tmp_path / "ts"
    part = gen_dir / "gen-0"
    full = load(spark, [part], metricsDir=full_dir).where("error is null")
    expected = spark_records(full.where("offset >= 300 and offset < 420"))
    got = spark_records(
        load(spark, [part], metricsDir=off_dir, startingOffset=300, endingOffset=420)
    )
    assert got == expected and len(got) == 120
    ts_from = 1_700_000_000_000 + 400 * 10
    expected_ts = spark_records(full.where(f"timestamp >= {ts_from}"))
    got_ts = spark_records(load(spark, [part], metricsDir=ts_dir, startingTimestamp=ts_from))
    assert got_ts == expected_ts and got_ts
    total, by_off, by_ts = (read_counters(d) for d in (full_dir, off_dir, ts_dir))
    assert by_off["bytes_read"] < total["bytes_read"] / 2
    assert by_off["batches_scanned"] < total["batches_scanned"] / 2
    assert by_off["segments_skipped"] >= 4
    assert by_ts["bytes_read"] < total["bytes_read"] * 0.6
    assert by_ts["segments_skipped"] >= 4


def test_damaged_segment_fails_or_resyncs(spark: Any, damaged_dir: Path) -> None:
    with pytest.raises(Exception, match=r"kt-segments: .*position .*resync=true"):
        load(spark, [damaged_dir]).count()
    df = load(spark, [damaged_dir], resync="true")
    errors = df.where("error is not null").collect()
    assert [e.error_bytes for e in errors if e.crc_valid is None] == [100]
    assert df.where("not crc_valid").count() > 0
    assert spark_records(df) == core_records([damaged_dir], resync=True)


def test_analyze_topics_agrees_with_compaction_estimate(spark: Any, gen_dir: Path) -> None:
    params = CompactionParams(NOW, 1000)
    rows = analyze_topics(spark, Scan([str(gen_dir)]), params)
    gen = next(r for r in rows if r["topic"] == "gen")
    want = estimate(gen_dir / "gen-0", config=LogConfig(cleanup_policy="compact",
                    delete_retention_ms=1000), now_ms=NOW).stats  # fmt: skip
    assert gen["compaction_records_dropped"] == want.records_dropped > 0
    assert gen["compaction_bytes_dropped"] == want.bytes_dropped > 0
    assert gen["compaction"]["records_read"] == want.records_read
    assert gen["records"] == 60 * 8 + 2 and gen["control_records"] == 1
    assert gen["codecs"] == ["gzip", "lz4", "none", "snappy", "zstd"]
    assert gen["first_offset"] == 0 and gen["distinct_keys"] == 14
    assert gen["producers"] == 3


def kt(*args: str, check: int | None = 0) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable}
    res = subprocess.run([KT, *args], capture_output=True, text=True, env=env, timeout=240)
    if check is not None:
        assert res.returncode == check, res.stderr[-3000:]
    return res


def test_cli_analyze_topics_matches_kt_compaction_estimate(gen_dir: Path) -> None:
    res = kt("analyze", "topics", "--master", "local[2]", "--json", "--now", str(NOW),
             "--delete-retention-ms", "1000", str(gen_dir))  # fmt: skip
    rows = {r["topic"]: r for r in map(json.loads, res.stdout.splitlines())}
    est = json.loads(
        kt(
            "compaction",
            "estimate",
            "--json",
            "--now",
            str(NOW),
            "--delete-retention-ms",
            "1000",
            str(gen_dir / "gen-0"),
        ).stdout
    )
    assert rows["gen"]["compaction_records_dropped"] == est["records_dropped"]
    assert rows["gen"]["compaction_bytes_dropped"] == est["bytes_dropped"]
    assert rows["legacy"]["records"] == 32


def test_cli_analyze_anomalies(damaged_dir: Path) -> None:
    res = kt("analyze", "anomalies", "--master", "local[2]", "--json", str(damaged_dir), check=1)
    kinds = {json.loads(line)["kind"] for line in res.stdout.splitlines()}
    assert {"damaged-region", "crc-mismatch"} <= kinds


def test_cli_analyze_keys(gen_dir: Path) -> None:
    res = kt("analyze", "keys", "--master", "local[2]", "--json", "--key", "key-3", str(gen_dir))
    rows = [json.loads(line) for line in res.stdout.splitlines()]
    offsets = [r["offset"] for r in rows]
    assert offsets == sorted(offsets) and len(rows) > 10
    assert all(r["key"] == "key-3" for r in rows)


def test_cli_export_parquet(spark: Any, gen_dir: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    res = kt("export", "--master", "local[2]", "--to", str(out), "--json", str(gen_dir))
    summary = json.loads(res.stdout)
    back = spark.read.parquet(str(out))
    assert back.count() == summary["rows"] == len(core_records([gen_dir]))
    missing = kt("export", "--to", str(tmp_path / "x"), str(tmp_path / "nope"), check=2)
    assert "no such file" in missing.stderr
    shutil.rmtree(out)
