"""`kt-segments`: a batch PySpark data source over Kafka log segments on disk.

    spark.read.format("kt-segments").load("/var/lib/kafka/data")            # a log dir
    spark.read.format("kt-segments").option("topic", "orders*").load(paths)  # filtered

PATHS are log directories, partition directories, segment files (an index file
stands for its segment) or globs of these, comma-separated or as a list. One row
per record (or per batch with `level=batch`); the schemas are RECORD_SCHEMA and
BATCH_SCHEMA below. Decoding is the storage core's (`FileRecords.batches`,
`iter_record_tuples`, the legacy reader): this module only plans and shapes rows.

Planning (on the driver) makes one input partition per segment, and several for a
segment larger than `maxBytesPerPartition`: split points are offset-index entries
(checked to start a valid batch), so every range starts at a batch; the reader of
a range stops at the first batch starting at or after the range's end. Offset and
time ranges are pushed down: segments are skipped by their base offsets and
largest timestamps, the first read position comes from the offset and time
indexes, and each range stops at the ending offset.

Damage: without `resync=true` a damaged region fails the task with a one-line
`kt-segments: ...` message; with it the reader skips to the next valid batch and
reports the region as a row whose `error` column says why. A zero-filled tail
(preallocated, never written) is not damage: it is skipped silently, or reported
as a row under `resync=true`.

Counters: with `metricsDir=DIR` the planner and every read task write a JSON file
of what they read (bytes, batches scanned, rows) to DIR, so tests and benchmarks
can check what pushdown saves.
"""

from __future__ import annotations

import contextlib
import fnmatch
import glob as globmod
import json
import os
import re
import uuid
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    BooleanType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
)

from kt.storage import record_batch as v2
from kt.storage.errors import CorruptIndexError, StorageError
from kt.storage.file_records import Damage, FileRecords, LogBatch
from kt.storage.index_check import find_segment_logs
from kt.storage.log_files import (
    list_segments,
    parse_partition_dir_name,
    parse_segment_file_name,
    segment_file_name,
)
from kt.storage.offset_index import OffsetIndexView, read_offset_index
from kt.storage.time_index import TimeIndexView, read_time_index

SOURCE_NAME = "kt-segments"
DEFAULT_MAX_BYTES_PER_PARTITION = 128 * 1024 * 1024
DEFAULT_ARROW_ROWS = 8192
ZERO_FILLED = "zero-filled"

HEADER_TYPE = StructType(
    [StructField("key", StringType(), False), StructField("value", BinaryType(), True)]
)

RECORD_SCHEMA = StructType(
    [
        StructField("topic", StringType()),
        StructField("partition", IntegerType()),
        StructField("offset", LongType()),
        StructField("timestamp", LongType()),
        StructField("timestamp_type", StringType()),
        StructField("key", BinaryType()),
        StructField("value", BinaryType()),
        StructField("headers", ArrayType(HEADER_TYPE, containsNull=False)),
        StructField("producer_id", LongType()),
        StructField("producer_epoch", IntegerType()),
        StructField("sequence", IntegerType()),
        StructField("leader_epoch", IntegerType()),
        StructField("is_transactional", BooleanType()),
        StructField("is_control", BooleanType()),
        StructField("batch_base_offset", LongType()),
        StructField("codec", StringType()),
        StructField("magic", IntegerType()),
        StructField("segment", StringType()),
        StructField("position", LongType()),
        StructField("crc_valid", BooleanType()),
        StructField("error", StringType()),
        StructField("error_bytes", LongType()),
    ]
)

BATCH_SCHEMA = StructType(
    [
        StructField("topic", StringType()),
        StructField("partition", IntegerType()),
        StructField("segment", StringType()),
        StructField("position", LongType()),
        StructField("size", LongType()),
        StructField("magic", IntegerType()),
        StructField("base_offset", LongType()),
        StructField("last_offset", LongType()),
        StructField("record_count", IntegerType()),
        StructField("base_timestamp", LongType()),
        StructField("max_timestamp", LongType()),
        StructField("timestamp_type", StringType()),
        StructField("producer_id", LongType()),
        StructField("producer_epoch", IntegerType()),
        StructField("base_sequence", IntegerType()),
        StructField("last_sequence", IntegerType()),
        StructField("leader_epoch", IntegerType()),
        StructField("is_transactional", BooleanType()),
        StructField("is_control", BooleanType()),
        StructField("codec", StringType()),
        StructField("delete_horizon_ms", LongType()),
        StructField("crc_valid", BooleanType()),
        StructField("error", StringType()),
        StructField("error_bytes", LongType()),
    ]
)

OPTIONS_HELP = {
    "topic": "glob(s) of topic names to read, comma-separated (e.g. 'orders*,users')",
    "topicPattern": "regular expression a topic name must match in full",
    "startingOffset": "first offset to return (inclusive)",
    "endingOffset": "offset to stop at (exclusive)",
    "startingTimestamp": "earliest record timestamp to return, ms or ISO-8601 (inclusive)",
    "endingTimestamp": "timestamp to stop at, ms or ISO-8601 (exclusive)",
    "level": "record (default) or batch: one row per batch, headers only, no decompression",
    "resync": "true: skip damaged regions and report them as rows with an error",
    "maxBytesPerPartition": f"split segments larger than this (default {128} MiB)",
    "metricsDir": "directory for per-task counter files (bytes read, batches scanned)",
    "arrowBatchRows": f"rows per Arrow batch handed to Spark (default {DEFAULT_ARROW_ROWS})",
}


class SegmentsSourceError(Exception):
    """A problem reading segments; its message is one line starting `kt-segments:`."""

    def __init__(self, message: str) -> None:
        super().__init__(f"{SOURCE_NAME}: {message}")


# --- options -------------------------------------------------------------------


@dataclass(slots=True)
class ScanOptions:
    """The parsed options of one read."""

    paths: list[str]
    topic_globs: list[str] = field(default_factory=list)
    topic_regex: str | None = None
    start_offset: int | None = None
    end_offset: int | None = None
    start_ts: int | None = None
    end_ts: int | None = None
    level: str = "record"
    resync: bool = False
    max_bytes: int = DEFAULT_MAX_BYTES_PER_PARTITION
    metrics_dir: str | None = None
    arrow_rows: int = DEFAULT_ARROW_ROWS

    def wants_topic(self, topic: str | None) -> bool:
        """True when a segment of `topic` passes the topic filters."""
        if not self.topic_globs and self.topic_regex is None:
            return True
        if topic is None:
            return False
        if self.topic_globs and not any(fnmatch.fnmatchcase(topic, g) for g in self.topic_globs):
            return False
        return self.topic_regex is None or re.fullmatch(self.topic_regex, topic) is not None


def parse_time_ms(text: str, name: str) -> int:
    """Milliseconds since the epoch from ms or ISO-8601 (UTC when no zone is given)."""
    value = text.strip()
    try:
        return int(value)
    except ValueError:
        pass
    try:
        dt = datetime.fromisoformat(value)
    except ValueError:
        raise SegmentsSourceError(
            f"option {name}: {text!r} is neither milliseconds nor an ISO-8601 time"
        ) from None
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=UTC)
    return int(dt.timestamp() * 1000)


def _int_option(options: Mapping[str, str], name: str, minimum: int = 0) -> int | None:
    raw = _get(options, name)
    if raw is None or raw == "":
        return None
    try:
        value = int(raw)
    except ValueError:
        raise SegmentsSourceError(f"option {name}: {raw!r} is not an integer") from None
    if value < minimum:
        raise SegmentsSourceError(f"option {name}: must be at least {minimum}, got {value}")
    return value


def _get(options: Mapping[str, str], name: str) -> str | None:
    # Spark hands Python sources case-insensitive options; plain dicts (tests) are not.
    if name in options:
        return options[name]
    lower = name.lower()
    for k, v in options.items():
        if k.lower() == lower:
            return v
    return None


def _split_paths(options: Mapping[str, str]) -> list[str]:
    out: list[str] = []
    raw_list = _get(options, "paths")
    if raw_list:
        try:
            decoded = json.loads(raw_list)
        except ValueError:
            decoded = raw_list.split(",")
        if isinstance(decoded, str):
            decoded = [decoded]
        for item in decoded:
            out.extend(p for p in str(item).split(",") if p.strip())
    raw = _get(options, "path")
    if raw:
        out.extend(p for p in raw.split(",") if p.strip())
    return [p.strip() for p in out]


def parse_options(options: Mapping[str, str]) -> ScanOptions:
    """Check and parse a read's options (raises SegmentsSourceError)."""
    paths = _split_paths(options)
    if not paths:
        raise SegmentsSourceError("no path given: load(PATHS) with log or partition directories")
    opts = ScanOptions(paths)
    topics = _get(options, "topic")
    if topics:
        opts.topic_globs = [t.strip() for t in topics.split(",") if t.strip()]
    regex = _get(options, "topicPattern")
    if regex:
        try:
            re.compile(regex)
        except re.error as exc:
            raise SegmentsSourceError(f"option topicPattern: {exc}") from None
        opts.topic_regex = regex
    opts.start_offset = _int_option(options, "startingOffset")
    opts.end_offset = _int_option(options, "endingOffset")
    for name, attr in (("startingTimestamp", "start_ts"), ("endingTimestamp", "end_ts")):
        raw = _get(options, name)
        if raw:
            setattr(opts, attr, parse_time_ms(raw, name))
    level = (_get(options, "level") or "record").lower()
    if level not in ("record", "batch"):
        raise SegmentsSourceError(f"option level: {level!r} is not record or batch")
    opts.level = level
    resync = (_get(options, "resync") or "false").lower()
    if resync not in ("true", "false"):
        raise SegmentsSourceError(f"option resync: {resync!r} is not true or false")
    opts.resync = resync == "true"
    opts.max_bytes = (
        _int_option(options, "maxBytesPerPartition", 1) or DEFAULT_MAX_BYTES_PER_PARTITION
    )
    opts.metrics_dir = _get(options, "metricsDir") or None
    opts.arrow_rows = _int_option(options, "arrowBatchRows", 1) or DEFAULT_ARROW_ROWS
    return opts


# --- planning ------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class SegmentInfo:
    """A `.log` file to read and what its directory says about it."""

    path: str
    topic: str | None
    partition: int | None
    base_offset: int
    # Base offset of the next live segment of the same directory (None: the last).
    next_base_offset: int | None
    size: int


class SegmentSplit(InputPartition):  # type: ignore[misc]
    """One input partition: bytes [start, end) of a segment (end None: to EOF)."""

    def __init__(
        self, index: int, segment: SegmentInfo, start: int, end: int | None, whole: bool
    ) -> None:
        super().__init__(index)
        self.index = index
        self.segment = segment
        self.start = start
        self.end = end
        # True when the split starts at 0 and runs to EOF (no pushdown, no splitting).
        self.whole = whole

    def __repr__(self) -> str:
        return f"SegmentSplit({self.segment.path}, {self.start}, {self.end})"


def expand_paths(paths: Sequence[str]) -> list[Path]:
    """Globs, log dirs, partition dirs and segment files → `.log` paths, deduplicated.

    Raises FileNotFoundError for a path (or a glob matching nothing) that is missing,
    WrongFileKindError for a path of the wrong kind.
    """
    expanded: list[str] = []
    for p in paths:
        if any(c in p for c in "*?["):
            matches = sorted(globmod.glob(p))
            if not matches:
                raise FileNotFoundError(2, "No such file or directory (glob matched nothing)", p)
            expanded.extend(matches)
        else:
            expanded.append(p)
    # A glob over a directory's files also catches indexes: keep their segments once.
    return find_segment_logs(expanded)


def find_segments(opts: ScanOptions) -> list[SegmentInfo]:
    """The segments a read covers, topic filter applied, in path order."""
    logs = expand_paths(opts.paths)
    neighbours: dict[Path, list[int]] = {}
    out = []
    for log in logs:
        d = log.parent
        parsed_dir = parse_partition_dir_name(d.name)
        topic = parsed_dir.topic if parsed_dir else None
        partition = parsed_dir.partition if parsed_dir else None
        if not opts.wants_topic(topic):
            continue
        parsed = parse_segment_file_name(log.name)
        assert parsed is not None
        if d not in neighbours:
            neighbours[d] = [s.base_offset for s in list_segments(d) if s.log is not None]
        bases = neighbours[d]
        later = [b for b in bases if b > parsed.base_offset]
        size = log.stat().st_size
        out.append(
            SegmentInfo(
                str(log), topic, partition, parsed.base_offset, min(later, default=None), size
            )
        )
    return out


class _CountingRecords(FileRecords):
    """FileRecords that counts the bytes it reads (the source's own counters)."""

    def __init__(self, fd: int) -> None:
        super().__init__(fd)
        self.bytes_read = 0

    def read(self, position: int, length: int) -> bytes:
        data = super().read(position, length)
        self.bytes_read += len(data)
        return data


@dataclass(slots=True)
class Counters:
    """What one task (or the planner) read and produced."""

    role: str
    # Planner: input partitions made, segments seen. Tasks: 1 each.
    splits: int = 0
    tasks: int = 0
    segments: int = 0
    segments_skipped: int = 0
    bytes_read: int = 0
    index_bytes_read: int = 0
    batches_scanned: int = 0
    rows: int = 0
    damaged_regions: int = 0

    def write(self, metrics_dir: str | None) -> None:
        """Write the counters as one JSON file in `metrics_dir` (if given)."""
        if not metrics_dir:
            return
        os.makedirs(metrics_dir, exist_ok=True)
        name = f"{self.role}-{os.getpid()}-{uuid.uuid4().hex}.json"
        tmp = os.path.join(metrics_dir, "." + name)
        with open(tmp, "w", encoding="utf-8") as f:
            json.dump({k: getattr(self, k) for k in self.__dataclass_fields__}, f)
        os.replace(tmp, os.path.join(metrics_dir, name))


def read_counters(metrics_dir: str | os.PathLike[str]) -> dict[str, int]:
    """Sum the counter files of a metrics directory (planner and tasks together)."""
    total: dict[str, int] = {}
    for name in sorted(os.listdir(metrics_dir)):
        if not name.endswith(".json") or name.startswith("."):
            continue
        with open(os.path.join(metrics_dir, name), encoding="utf-8") as f:
            data = json.load(f)
        for k, v in data.items():
            if isinstance(v, int):
                total[k] = total.get(k, 0) + v
    return total


def _batch_at(records: FileRecords, position: int, full: bool) -> LogBatch | None:
    """The valid batch starting at `position` (framing, and the CRC when `full`)."""
    if position >= records.size:
        return None
    for item in records.batches(position, validate=full):
        return item if isinstance(item, LogBatch) else None
    return None


def _load_indexes(
    seg: SegmentInfo, counters: Counters, want_time: bool
) -> tuple[OffsetIndexView | None, TimeIndexView | None]:
    d = Path(seg.path).parent
    offset_index: OffsetIndexView | None = None
    time_index: TimeIndexView | None = None
    with contextlib.suppress(OSError, CorruptIndexError):
        view = read_offset_index(d / segment_file_name(seg.base_offset, ".index"))
        counters.index_bytes_read += len(view.data)
        if len(view) and not view.problems():
            offset_index = view
    if want_time:
        with contextlib.suppress(OSError, CorruptIndexError):
            tview = read_time_index(d / segment_file_name(seg.base_offset, ".timeindex"))
            counters.index_bytes_read += len(tview.data)
            if len(tview) and not tview.problems():
                time_index = tview
    return offset_index, time_index


def _indexed_position(
    records: FileRecords, offset_index: OffsetIndexView, target_offset: int
) -> int:
    """A position at or before the first batch holding offsets >= target (0 if unsure)."""
    entry = offset_index.lookup(target_offset)
    if entry.position == 0:
        return 0
    batch = _batch_at(records, entry.position, full=False)
    if batch is None or batch.last_offset != entry.offset:
        return 0  # a stale or corrupt index: read from the start instead
    return entry.position


def _largest_timestamp(
    records: FileRecords, offset_index: OffsetIndexView | None, time_index: TimeIndexView
) -> int | None:
    """The segment's largest timestamp: the time index's last entry, raised by the
    header-only scan of the batches after it (None when it cannot be told)."""
    last = time_index[len(time_index) - 1]
    start = 0 if offset_index is None else _indexed_position(records, offset_index, last.offset)
    largest = last.timestamp
    for head in records.headers(start):
        if isinstance(head, Damage):
            return None
        if head.magic == 0:
            return None
        largest = max(largest, head.max_timestamp)
    return largest


def plan_splits(opts: ScanOptions, counters: Counters | None = None) -> list[SegmentSplit]:
    """Input partitions for a read: per segment, split by byte ranges, pushdown applied."""
    counters = counters or Counters("plan")
    splits: list[SegmentSplit] = []
    pushdown = opts.start_offset is not None or opts.start_ts is not None
    for seg in find_segments(opts):
        counters.segments += 1
        if opts.start_offset is not None and (
            seg.next_base_offset is not None and seg.next_base_offset <= opts.start_offset
        ):
            counters.segments_skipped += 1
            continue
        if opts.end_offset is not None and seg.base_offset >= opts.end_offset:
            counters.segments_skipped += 1
            continue
        if seg.size <= opts.max_bytes and not pushdown:
            splits.append(SegmentSplit(len(splits), seg, 0, None, True))
            continue
        fd = os.open(seg.path, os.O_RDONLY)
        try:
            records = _CountingRecords(fd)
            offset_index, time_index = _load_indexes(seg, counters, opts.start_ts is not None)
            start = 0
            if offset_index is not None and opts.start_offset is not None:
                start = _indexed_position(records, offset_index, opts.start_offset)
            if opts.start_ts is not None and time_index is not None:
                largest = _largest_timestamp(records, offset_index, time_index)
                if largest is not None and largest < opts.start_ts:
                    counters.segments_skipped += 1
                    counters.bytes_read += records.bytes_read
                    continue
                entry = time_index.lookup(opts.start_ts - 1)
                if entry.timestamp >= 0 and offset_index is not None:
                    start = max(start, _indexed_position(records, offset_index, entry.offset))
            bounds = [start]
            if offset_index is not None and seg.size - start > opts.max_bytes:
                for entry in offset_index:
                    if entry.position >= bounds[-1] + opts.max_bytes:
                        batch = _batch_at(records, entry.position, full=True)
                        if batch is None or batch.last_offset != entry.offset:
                            continue
                        if opts.end_offset is not None and batch.base_offset >= opts.end_offset:
                            break
                        bounds.append(entry.position)
            counters.bytes_read += records.bytes_read
        finally:
            os.close(fd)
        for i, lo in enumerate(bounds):
            hi = bounds[i + 1] if i + 1 < len(bounds) else None
            splits.append(SegmentSplit(len(splits), seg, lo, hi, lo == 0 and hi is None))
    counters.splits = len(splits)
    return splits


# --- reading ---------------------------------------------------------------------


_TS_NAMES = {(m, t): v2.timestamp_type_name(m, t) for m in (0, 1, 2) for t in (0, 1)}


class _Columns:
    """Column lists of the rows being built, flushed as Arrow record batches."""

    def __init__(self, names: list[str]) -> None:
        self.names = names
        self.cols: dict[str, list[Any]] = {n: [] for n in names}
        self.rows = 0

    def reset(self) -> None:
        for v in self.cols.values():
            v.clear()
        self.rows = 0


class SegmentsReader(DataSourceReader):  # type: ignore[misc]
    """Plans the input partitions and reads one of them into Arrow batches."""

    def __init__(self, opts: ScanOptions, schema: StructType) -> None:
        self.opts = opts
        self.schema = schema

    def partitions(self) -> Sequence[InputPartition]:
        counters = Counters("plan")
        try:
            splits = plan_splits(self.opts, counters)
        except (OSError, StorageError) as exc:
            raise SegmentsSourceError(str(exc)) from None
        counters.write(self.opts.metrics_dir)
        # Spark needs at least one partition; an empty one reads nothing.
        return splits or [InputPartition(None)]

    def read(self, partition: InputPartition) -> Iterator[Any]:
        import pyarrow as pa
        from pyspark.sql.pandas.types import to_arrow_schema

        if not isinstance(partition, SegmentSplit):
            return
        arrow_schema = to_arrow_schema(self.schema, timezone="UTC")
        cols = _Columns(self.schema.fieldNames())
        counters = Counters("read", tasks=1)
        fd = os.open(partition.segment.path, os.O_RDONLY)
        records = _CountingRecords(fd)
        try:
            for _ in self._fill(partition, records, cols, counters):
                if cols.rows >= self.opts.arrow_rows:
                    yield _to_arrow(pa, cols, arrow_schema)
            if cols.rows:
                yield _to_arrow(pa, cols, arrow_schema)
        finally:
            os.close(fd)
            counters.bytes_read = records.bytes_read
            counters.write(self.opts.metrics_dir)

    def _fill(
        self, split: SegmentSplit, records: FileRecords, cols: _Columns, counters: Counters
    ) -> Iterator[None]:
        """Walk the split's batches, appending rows to `cols`; yields after each batch."""
        opts = self.opts
        seg = split.segment
        name = Path(seg.path).name
        batch_level = opts.level == "batch"
        for item in records.batches(split.start, None, resync=opts.resync):
            if split.end is not None and item.position >= split.end:
                break
            if isinstance(item, Damage):
                zero = item.reason.startswith(ZERO_FILLED)
                if not zero:
                    counters.damaged_regions += 1
                if not opts.resync:
                    if zero:
                        break
                    raise SegmentsSourceError(
                        f"{seg.path}: damaged at position {item.position}: {item.reason} "
                        "(option resync=true skips damaged regions and reports them as rows)"
                    )
                _damage_row(cols, seg, name, item.position, item.length, item.reason)
                counters.rows += 1
                yield None
                continue
            counters.batches_scanned += 1
            if (
                opts.end_offset is not None
                and item.header is not None
                and item.header.base_offset >= opts.end_offset
            ):
                break
            if opts.start_offset is not None and item.last_offset < opts.start_offset:
                continue
            if opts.start_ts is not None and item.max_timestamp < opts.start_ts:
                continue
            crc_valid = item.is_valid()
            if not crc_valid and not opts.resync:
                counters.damaged_regions += 1
                raise SegmentsSourceError(
                    f"{seg.path}: batch at position {item.position} fails its CRC check "
                    f"(stored {item.stored_crc}, computed {item.computed_crc()}) (option "
                    "resync=true reads on and marks its rows crc_valid=false)"
                )
            if batch_level:
                if (
                    opts.end_offset is not None
                    and item.header is None
                    and _legacy_first_offset(item) >= opts.end_offset
                ):
                    break
                _batch_row(cols, seg, name, item, crc_valid)
                counters.rows += 1
            else:
                try:
                    added = _record_rows(cols, seg, name, item, crc_valid, opts)
                except StorageError as exc:
                    counters.damaged_regions += 1
                    if not opts.resync:
                        raise SegmentsSourceError(
                            f"{seg.path}: batch at position {item.position} does not decode: "
                            f"{exc.message} (option resync=true reports it as a row and "
                            "carries on)"
                        ) from None
                    _damage_row(cols, seg, name, item.position, item.size_in_bytes, exc.message)
                    cols.cols["crc_valid"][-1] = crc_valid
                    cols.cols["magic"][-1] = item.magic
                    added = 1
                counters.rows += added
            yield None


def _to_arrow(pa: Any, cols: _Columns, schema: Any) -> Any:
    arrays = [pa.array(cols.cols[n], type=schema.field(n).type) for n in cols.names]
    batch = pa.RecordBatch.from_arrays(arrays, schema=schema)
    cols.reset()
    return batch


def _legacy_first_offset(batch: LogBatch) -> int:
    try:
        return batch.base_offset
    except StorageError:
        return batch.last_offset


def _damage_row(
    cols: _Columns, seg: SegmentInfo, name: str, position: int, length: int, reason: str
) -> None:
    c = cols.cols
    for n in cols.names:
        c[n].append(None)
    c["topic"][-1] = seg.topic
    c["partition"][-1] = seg.partition
    c["segment"][-1] = name
    c["position"][-1] = position
    c["error"][-1] = reason
    c["error_bytes"][-1] = length
    cols.rows += 1


def _batch_row(
    cols: _Columns, seg: SegmentInfo, name: str, batch: LogBatch, crc_valid: bool
) -> None:
    c = cols.cols
    h = batch.header
    magic = batch.magic
    if h is not None:
        base, count, base_ts = h.base_offset, h.record_count, h.base_timestamp
        horizon = h.delete_horizon_ms
    else:
        base, count, base_ts, horizon = _legacy_first_offset(batch), None, None, None
        if batch.legacy.codec_id == 0:
            count = 1
    try:
        codec: str | None = batch.codec.label
    except StorageError:
        codec = f"unknown-{batch.codec_id}"
    values = {
        "topic": seg.topic,
        "partition": seg.partition,
        "segment": name,
        "position": batch.position,
        "size": batch.size_in_bytes,
        "magic": magic,
        "base_offset": base,
        "last_offset": batch.last_offset,
        "record_count": count,
        "base_timestamp": base_ts,
        "max_timestamp": batch.max_timestamp,
        "timestamp_type": _TS_NAMES[(magic, batch.timestamp_type)],
        "producer_id": batch.producer_id,
        "producer_epoch": batch.producer_epoch,
        "base_sequence": batch.base_sequence,
        "last_sequence": batch.last_sequence,
        "leader_epoch": batch.partition_leader_epoch,
        "is_transactional": batch.is_transactional,
        "is_control": batch.is_control,
        "codec": codec,
        "delete_horizon_ms": horizon,
        "crc_valid": crc_valid,
        "error": None,
        "error_bytes": None,
    }
    for n in cols.names:
        c[n].append(values[n])
    cols.rows += 1


def _record_rows(
    cols: _Columns,
    seg: SegmentInfo,
    name: str,
    batch: LogBatch,
    crc_valid: bool,
    opts: ScanOptions,
) -> int:
    """Decode a batch (whole, before any row is added) and append its records."""
    h = batch.header
    if h is not None:
        recs: list[v2.RecordTuple] = list(v2.iter_record_tuples(h, batch.data))
        base = h.base_offset
        codec = h.codec.label
        ts_type = _TS_NAMES[(2, h.timestamp_type)]
        pid, epoch, leader = h.producer_id, h.producer_epoch, h.partition_leader_epoch
        txn, control = h.is_transactional, h.is_control
    else:
        recs = [
            (r.offset, r.timestamp, r.key, r.value, r.headers, r.sequence) for r in batch.records()
        ]
        base = recs[0][0] if recs else batch.last_offset
        codec = batch.codec.label
        ts_type = _TS_NAMES[(batch.magic, batch.timestamp_type)]
        pid, epoch, leader, txn, control = -1, -1, -1, False, False
    if opts.start_offset is not None or opts.end_offset is not None:
        lo = opts.start_offset if opts.start_offset is not None else -(2**63)
        hi = opts.end_offset if opts.end_offset is not None else 2**63
        recs = [r for r in recs if lo <= r[0] < hi]
    if opts.start_ts is not None or opts.end_ts is not None:
        lo = opts.start_ts if opts.start_ts is not None else -(2**63)
        hi = opts.end_ts if opts.end_ts is not None else 2**63
        recs = [r for r in recs if lo <= r[1] < hi]
    n = len(recs)
    if not n:
        return 0
    c = cols.cols
    offsets, timestamps, keys, values, headers, sequences = zip(*recs, strict=True)
    c["offset"].extend(offsets)
    c["timestamp"].extend(timestamps)
    c["key"].extend(keys)
    c["value"].extend(values)
    c["headers"].extend(headers)
    c["sequence"].extend(sequences)
    for col, value in (
        ("topic", seg.topic),
        ("partition", seg.partition),
        ("timestamp_type", ts_type),
        ("producer_id", pid),
        ("producer_epoch", epoch),
        ("leader_epoch", leader),
        ("is_transactional", txn),
        ("is_control", control),
        ("batch_base_offset", base),
        ("codec", codec),
        ("magic", batch.magic),
        ("segment", name),
        ("position", batch.position),
        ("crc_valid", crc_valid),
        ("error", None),
        ("error_bytes", None),
    ):
        c[col].extend([value] * n)
    cols.rows += n
    return n


class SegmentsDataSource(DataSource):  # type: ignore[misc]
    """`spark.read.format("kt-segments")`: records (or batches) of Kafka segment files."""

    @classmethod
    def name(cls) -> str:
        return SOURCE_NAME

    def __init__(self, options: Mapping[str, str]) -> None:
        super().__init__(options)
        self.opts = parse_options(options)

    def schema(self) -> StructType:
        return BATCH_SCHEMA if self.opts.level == "batch" else RECORD_SCHEMA

    def reader(self, schema: StructType) -> DataSourceReader:
        return SegmentsReader(self.opts, schema)
