"""`kt analyze metadata`: KRaft metadata logs of several clusters on the kt-segments source."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from kraft_fixtures import incident_log

from kt.spark.jobs import Scan
from kt.spark.metadata_jobs import analyze_metadata
from kt.storage.metadata_log import read_entries
from kt.storage.metadata_timeline import timeline

pytestmark = pytest.mark.integration
KT = str(Path(sys.executable).with_name("kt"))


@pytest.fixture
def clusters(tmp_path: Path) -> list[Path]:
    out = []
    for name in ("cluster-a", "cluster-b"):
        root = tmp_path / name
        incident_log(root)
        (root / "meta.properties").write_text(f"version=1\ncluster.id={name}\nnode.id=1\n")
        out.append(root)
    return out


def test_events_are_the_timelines(spark: Any, clusters: list[Path]) -> None:
    rows = analyze_metadata(spark, Scan([str(c) for c in clusters]), "events")
    a = [r for r in rows if r["cluster"] == "cluster-a"]
    entries = [
        e
        for seg in sorted((clusters[0] / "__cluster_metadata-0").glob("*.log"))
        for e in read_entries(seg)
    ]
    local = list(timeline(entries))
    assert [(r["offset"], r["kind"], r["message"]) for r in a] == [
        (e.offset, e.kind, e.message) for e in local
    ]
    assert {r["cluster"] for r in rows} == {"cluster-a", "cluster-b"}


def test_leaders_offline_and_unavailable(spark: Any, clusters: list[Path]) -> None:
    scan = Scan([str(c) for c in clusters])
    leaders = analyze_metadata(spark, scan, "leaders")
    assert {
        (r["cluster"], r["broker"]): (r["leaderships_gained"], r["leaderships_lost"], r["fenced"])
        for r in leaders
        if r["cluster"] == "cluster-a"
    } == {
        ("cluster-a", 2): (1, 2, 1),
        ("cluster-a", 3): (1, 0, 1),
    }
    offline = analyze_metadata(spark, scan, "offline")
    assert [
        (r["cluster"], r["topic"], r["partition"], r["seconds"], r["still_offline"])
        for r in offline
    ] == [
        ("cluster-a", "orders", 1, 12.0, False),
        ("cluster-b", "orders", 1, 12.0, False),
    ]
    unavailable = analyze_metadata(spark, scan, "unavailable")
    assert unavailable == [
        {
            "cluster": "cluster-a",
            "hour": "2026-01-30T03:00Z",
            "partitions_offline": 1,
            "partition_seconds": 12.0,
        },
        {
            "cluster": "cluster-b",
            "hour": "2026-01-30T03:00Z",
            "partitions_offline": 1,
            "partition_seconds": 12.0,
        },
    ]
    # A time range counts only what falls inside it.
    late = Scan([str(clusters[0])], start_time=1_769_742_735_000)  # 03:12:15
    assert analyze_metadata(spark, late, "unavailable")[0]["partition_seconds"] == 4.0


def test_cli(clusters: list[Path]) -> None:
    res = subprocess.run(
        [
            KT,
            "analyze",
            "metadata",
            "--master",
            "local[2]",
            "--report",
            "unavailable",
            "--json",
            *map(str, clusters),
        ],
        capture_output=True,
        text=True,
        timeout=900,
        env=os.environ,
    )
    assert res.returncode == 0, res.stderr
    rows = [json.loads(line) for line in res.stdout.splitlines()]
    assert [(r["cluster"], r["partition_seconds"]) for r in rows] == [
        ("cluster-a", 12.0),
        ("cluster-b", 12.0),
    ]
