"""`kt analyze metadata`: KRaft metadata logs of many clusters, on the `kt-segments` source.

The records of every `__cluster_metadata-0` under the given paths are read with
`kt-segments` (the storage core's decoder), grouped by metadata directory (one
per cluster, or per replica of a cluster's log) and replayed in offset order in
Spark tasks by the storage core's timeline (`kt.storage.metadata_timeline`), so
each event is exactly what `kt metadata timeline` says. From the events:

- `events`: every event, one row each;
- `leaders`: per cluster, hour and broker, the leaderships gained and lost and the
  times it was fenced (leader changes per broker per hour);
- `offline`: every interval a partition had no leader, with its length;
- `unavailable`: per cluster and hour, the partitions offline and the unavailable
  partition-seconds (offline intervals cut at hour boundaries).

A log that no longer starts at offset 0 builds on the snapshot ending where it
starts, read by the task from beside the log.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from kt.spark.jobs import Scan, read

HOUR_MS = 3_600_000
METADATA_TOPIC = "__cluster_metadata"
REPORTS = ("leaders", "offline", "unavailable", "events")

EVENT_COLUMNS = [
    "cluster",
    "metadata_dir",
    "offset",
    "timestamp",
    "epoch",
    "kind",
    "topic",
    "partition",
    "broker",
    "leader",
    "previous_leader",
    "message",
]
LEADER_COLUMNS = ["cluster", "hour", "broker", "leaderships_gained", "leaderships_lost", "fenced"]
OFFLINE_COLUMNS = [
    "cluster",
    "topic",
    "partition",
    "start",
    "end",
    "start_offset",
    "end_offset",
    "seconds",
    "still_offline",
]
UNAVAILABLE_COLUMNS = ["cluster", "hour", "partitions_offline", "partition_seconds"]


def _cluster_id(partition_dir: Path) -> str:
    """cluster.id from the meta.properties beside __cluster_metadata-0, else the dir."""
    meta = partition_dir.parent / "meta.properties"
    try:
        for line in meta.read_text(encoding="utf-8").splitlines():
            key, sep, value = line.partition("=")
            if sep and key.strip() == "cluster.id":
                return value.strip()
    except OSError:
        pass
    return str(partition_dir.parent)


def cluster_events(item: tuple[str, Iterable[tuple[Any, ...]]]) -> Iterator[dict[str, Any]]:
    """The timeline of one metadata directory from its records (a Spark task's work).

    `item` is (partition dir, records as (offset, timestamp, epoch, is_control, key,
    value)); yields one dict per event, plus the cluster's last timestamp as an
    event of kind "_end" (the jobs use it to close intervals still open).
    """
    from kt.storage.metadata_image import MetadataImage
    from kt.storage.metadata_log import entry_from_record
    from kt.storage.metadata_replay import replay_files, timeline_baseline
    from kt.storage.metadata_timeline import TimelineBuilder

    part_dir, raw = item
    records = sorted(raw, key=lambda r: r[0])
    d = Path(part_dir)
    cluster = _cluster_id(d)
    first = records[0][0] if records else 0
    baseline = timeline_baseline(d, first) if d.is_dir() else None
    image = replay_files(baseline, [], None).image if baseline is not None else MetadataImage()
    builder = TimelineBuilder(image)
    last_offset = -1
    last_ts = -1
    for off, ts, epoch, control, key, value in records:
        if off <= last_offset:
            continue  # the same offset twice (overlapping segment copies)
        last_offset = off
        last_ts = max(last_ts, ts)
        entry = entry_from_record(
            off,
            ts,
            epoch,
            bool(control),
            None if key is None else bytes(key),
            None if value is None else bytes(value),
        )
        for e in builder.feed(entry):
            yield {
                "cluster": cluster,
                "metadata_dir": part_dir,
                "offset": e.offset,
                "timestamp": e.timestamp,
                "epoch": e.epoch,
                "kind": e.kind,
                "topic": e.topic,
                "partition": e.partition,
                "broker": e.broker if e.broker is not None else e.controller,
                "leader": e.details.get("leader"),
                "previous_leader": e.details.get("previous_leader"),
                "message": e.message,
            }
    yield {
        "cluster": cluster,
        "metadata_dir": part_dir,
        "offset": last_offset,
        "timestamp": last_ts,
        "kind": "_end",
    }


def metadata_dirs(scan: Scan) -> list[str]:
    """Every `__cluster_metadata-0` directory holding segments under the scan's paths."""
    from kt.spark.segments_source import expand_paths

    return sorted(
        {
            str(log.parent.resolve())
            for log in expand_paths(scan.paths)
            if log.parent.name == f"{METADATA_TOPIC}-0"
        }
    )


def _event_rows(spark: Any, scan: Scan) -> Any:
    """An RDD of event dicts over every metadata directory of the scan."""
    from pyspark.sql import functions as F

    frames = []
    for d in metadata_dirs(scan):
        # One read per directory: the source names segments by file name only, and the
        # directory says which cluster (and which replica of its log) a record is from.
        whole = dataclasses.replace(
            scan,
            paths=[d],
            topic=METADATA_TOPIC,
            topic_pattern=None,
            start_offset=None,
            end_offset=None,
            start_time=None,
            end_time=None,
        )
        df = read(spark, whole, "record").where(F.col("error").isNull())
        frames.append(
            df.select(
                F.lit(d).alias("dir"),
                "offset",
                "timestamp",
                "leader_epoch",
                "is_control",
                "key",
                "value",
            )
        )
    if not frames:
        return spark.sparkContext.emptyRDD()
    cols = frames[0]
    for f in frames[1:]:
        cols = cols.unionByName(f)
    pairs = cols.rdd.map(
        lambda r: (
            r[0],
            (
                r[1],
                r[2],
                r[3],
                r[4],
                None if r[5] is None else bytes(r[5]),
                None if r[6] is None else bytes(r[6]),
            ),
        )
    )
    return pairs.groupByKey().flatMap(cluster_events)


def _in_range(scan: Scan, ts: int, offset: int) -> bool:
    if scan.start_time is not None and ts < scan.start_time:
        return False
    if scan.end_time is not None and ts >= scan.end_time:
        return False
    if scan.start_offset is not None and offset < scan.start_offset:
        return False
    return not (scan.end_offset is not None and offset >= scan.end_offset)


def metadata_events(spark: Any, scan: Scan) -> list[dict[str, Any]]:
    """Every event of every metadata log in the scan, ordered by cluster and offset."""
    rows = _event_rows(spark, scan).filter(lambda e: e["kind"] != "_end").collect()
    rows = [r for r in rows if _in_range(scan, r["timestamp"], r["offset"])]
    rows.sort(key=lambda r: (r["cluster"], r["metadata_dir"], r["offset"]))
    return [{c: r.get(c) for c in EVENT_COLUMNS} for r in rows]


def _hour(ts: int) -> str:
    from kt.storage.metadata_image import format_time

    return format_time(ts - ts % HOUR_MS)[:13] + ":00Z"


def leader_changes(spark: Any, scan: Scan) -> list[dict[str, Any]]:
    """Per cluster, hour and broker: leaderships gained, lost, and fencings."""
    counts: dict[tuple[str, str, int], list[int]] = {}
    for e in metadata_events(spark, scan):
        hour = _hour(e["timestamp"])
        if e["kind"] == "leader_changed" and e["leader"] != e["previous_leader"]:
            if e["leader"] is not None and e["leader"] >= 0:
                counts.setdefault((e["cluster"], hour, e["leader"]), [0, 0, 0])[0] += 1
            if e["previous_leader"] is not None and e["previous_leader"] >= 0:
                counts.setdefault((e["cluster"], hour, e["previous_leader"]), [0, 0, 0])[1] += 1
        elif e["kind"] == "broker_fenced" and e["broker"] is not None:
            counts.setdefault((e["cluster"], hour, e["broker"]), [0, 0, 0])[2] += 1
    return [
        dict(zip(LEADER_COLUMNS, (c, h, b, *v), strict=True))
        for (c, h, b), v in sorted(counts.items())
    ]


def _offline_intervals(spark: Any, scan: Scan) -> list[dict[str, Any]]:
    from kt.storage.metadata_timeline import Event, summarize

    by_dir: dict[str, list[dict[str, Any]]] = {}
    for e in _event_rows(spark, scan).collect():
        by_dir.setdefault(e["metadata_dir"], []).append(e)
    out = []
    for _dir, evs in sorted(by_dir.items()):
        evs.sort(key=lambda e: e["offset"])
        end = next((e for e in evs if e["kind"] == "_end"), None)
        until = end["timestamp"] if end is not None else 0
        cluster = evs[0]["cluster"]
        events = [
            Event(
                e["offset"],
                e["timestamp"],
                e["epoch"],
                e["kind"],
                e["message"],
                topic=e["topic"],
                partition=e["partition"],
                broker=e["broker"],
                details={
                    "leader": e["leader"],
                    "previous_leader": e["previous_leader"],
                    "leader_epoch": None,
                    "leader_recovery_state": None,
                },
            )
            for e in evs
            if e["kind"] in ("leader_changed", "partition_created", "topic_deleted")
        ]
        for ps in summarize(events).partitions.values():
            for iv in ps.offline:
                stop = iv.end if iv.end is not None else until
                if not _overlaps(scan, iv.start, stop):
                    continue
                out.append(
                    {
                        "cluster": cluster,
                        "topic": ps.topic,
                        "partition": ps.partition,
                        "start": iv.start,
                        "end": iv.end,
                        "start_offset": iv.start_offset,
                        "end_offset": iv.end_offset,
                        "seconds": (stop - iv.start) / 1000,
                        "still_offline": iv.end is None,
                    }
                )
    out.sort(key=lambda r: (r["cluster"], r["start"], r["topic"], r["partition"]))
    return out


def _overlaps(scan: Scan, start: int, stop: int) -> bool:
    if scan.start_time is not None and stop < scan.start_time:
        return False
    return not (scan.end_time is not None and start >= scan.end_time)


def offline_partitions(spark: Any, scan: Scan) -> list[dict[str, Any]]:
    """Every interval a partition had no leader (open ones counted to the log's end)."""
    return _offline_intervals(spark, scan)


def unavailability(spark: Any, scan: Scan) -> list[dict[str, Any]]:
    """Per cluster and hour: partitions offline and unavailable partition-seconds."""
    acc: dict[tuple[str, str], tuple[set[tuple[str, int]], float]] = {}
    for iv in _offline_intervals(spark, scan):
        start = iv["start"]
        stop = start + int(iv["seconds"] * 1000)
        if scan.start_time is not None:
            start = max(start, scan.start_time)
        if scan.end_time is not None:
            stop = min(stop, scan.end_time)
        t = start
        while t < stop or (t == stop == start):
            hour_end = t - t % HOUR_MS + HOUR_MS
            piece = min(stop, hour_end) - t
            key = (iv["cluster"], _hour(t))
            parts, secs = acc.get(key, (set(), 0.0))
            parts.add((iv["topic"], iv["partition"]))
            acc[key] = (parts, secs + piece / 1000)
            if piece <= 0:
                break
            t = hour_end
    return [
        {"cluster": c, "hour": h, "partitions_offline": len(p), "partition_seconds": s}
        for (c, h), (p, s) in sorted(acc.items())
    ]


def analyze_metadata(spark: Any, scan: Scan, report: str) -> list[dict[str, Any]]:
    """The rows of one report (see REPORTS)."""
    if report == "events":
        return metadata_events(spark, scan)
    if report == "leaders":
        return leader_changes(spark, scan)
    if report == "offline":
        return offline_partitions(spark, scan)
    if report == "unavailable":
        return unavailability(spark, scan)
    raise ValueError(report)


COLUMNS = {
    "events": EVENT_COLUMNS,
    "leaders": LEADER_COLUMNS,
    "offline": OFFLINE_COLUMNS,
    "unavailable": UNAVAILABLE_COLUMNS,
}
