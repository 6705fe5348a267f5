"""Log compaction (kt.storage.cleaner) against a model, and Kafka's retain rules."""

from __future__ import annotations

import asyncio
import tempfile
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kt.storage import record_batch as v2
from kt.storage.checkpoint import TopicPartition
from kt.storage.cleaner import (
    Cleaner,
    clean_log,
    estimate,
    iter_live_records,
    plan_cleaning,
)
from kt.storage.index_check import verify_segment
from kt.storage.log import AppendOrigin, PartitionLog
from kt.storage.log_config import LogConfig
from kt.storage.offset_map import OffsetMap, capacity_for

NOW = 1_700_000_000_000
RETENTION = 60_000
PID = 42


def _cfg(**kw: Any) -> LogConfig:
    base: dict[str, Any] = {
        "segment_bytes": 400,
        "index_interval_bytes": 150,
        "cleanup_policy": "compact",
        "delete_retention_ms": RETENTION,
        "min_cleanable_dirty_ratio": 0.0,
    }
    base.update(kw)
    return LogConfig(**base)


def _append(log: PartitionLog, records: list[tuple[bytes | None, bytes | None]], **kw: Any) -> int:
    specs = [v2.RecordSpec(k, v, timestamp=NOW) for k, v in records]
    # Not as a producer, which may not write records without a key to a compacted log:
    # such records still get there (written before the topic became compacted).
    batch = v2.build_batch(specs, **kw)
    return log.append_as_leader(batch, 0, now_ms=NOW, origin=AppendOrigin.COORDINATOR).first_offset


def _seal(log: PartitionLog) -> None:
    """Make everything cleanable: roll, and commit it all (HW = LEO)."""
    log.roll(now_ms=NOW)
    log.update_high_watermark(log.log_end_offset)


def _records(log: PartitionLog) -> list[tuple[int, bytes | None, bytes | None]]:
    return [(o, k, v) for o, _t, k, v, _h, _s in iter_live_records(log)]


def _verify(log: PartitionLog) -> None:
    for seg in log.segments:
        check = verify_segment(seg.log_path)
        assert check.ok, [str(p) for p in check.problems]


# --- against a model -----------------------------------------------------------

KEYS = [b"a", b"b", b"c", b"d", b"e"]
record_st = st.tuples(
    st.one_of(st.none(), st.sampled_from(KEYS)),
    st.one_of(st.none(), st.binary(min_size=0, max_size=12)),
)
batch_st = st.tuples(st.lists(record_st, min_size=1, max_size=3), st.booleans())


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(batch_st, min_size=1, max_size=45))
def test_compaction_matches_model(batches: list[tuple[list[Any], bool]]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        d = Path(tmp) / "t-0"
        cfg = _cfg()
        log = PartitionLog.open(d, cfg)
        model: dict[bytes, tuple[int, bytes | None]] = {}
        seq = 0
        last_producer_batch: tuple[int, int] | None = None
        for records, idempotent in batches:
            kw: dict[str, Any] = {}
            if idempotent:
                kw = {"producer_id": PID, "producer_epoch": 0, "base_sequence": seq}
                seq += len(records)
            first = _append(log, records, **kw)
            if idempotent:
                last_producer_batch = (first + len(records) - 1, kw["base_sequence"])
            for i, (key, value) in enumerate(records):
                if key is not None:
                    model[key] = (first + i, value)
        _seal(log)

        predicted = estimate(d, config=cfg, now_ms=NOW)
        done = clean_log(log, now_ms=NOW)
        assert predicted.stats.to_dict() == done.stats.to_dict()
        assert predicted.end_offset == done.end_offset == log.active_segment.base_offset
        assert done.stats.distinct_keys == len(model)
        _verify(log)
        after_first = _records(log)
        # Each key once, at its latest offset; tombstones still there (horizon ahead).
        assert [(k, o, v) for o, k, v in after_first] == sorted(
            ((k, o, v) for k, (o, v) in model.items()), key=lambda t: t[1]
        )

        clean_log(log, first_dirty_offset=done.end_offset, now_ms=NOW + RETENTION)
        _verify(log)
        final = _records(log)
        live = sorted(((o, k, v) for k, (o, v) in model.items() if v is not None))
        assert final == live
        offsets = [b.last_offset for b in log.iter_batches()]
        assert offsets == sorted(set(offsets))
        if last_producer_batch is not None:
            kept = [b.header for b in log.iter_batches() if b.producer_id == PID]
            assert kept and kept[-1] is not None
            assert (kept[-1].last_offset, kept[-1].base_sequence) == last_producer_batch
        log.close()
        reopened = PartitionLog.open(d, cfg)
        assert _records(reopened) == final
        reopened.close()


# --- Kafka's rules --------------------------------------------------------------


def test_tombstone_gets_horizon_then_goes(tmp_path: Path) -> None:
    log = PartitionLog.open(tmp_path / "t-0", _cfg())
    _append(log, [(b"k", b"v1")])
    _append(log, [(b"k", None), (b"x", b"1")])
    _seal(log)
    clean_log(log, now_ms=NOW)
    batch = next(b for b in log.iter_batches() if b.header and b.header.record_count == 2)
    assert batch.delete_horizon_ms == NOW + RETENTION
    # Not yet: the horizon is not passed.
    clean_log(log, now_ms=NOW + RETENTION - 1)
    assert (1, b"k", None) in _records(log)
    clean_log(log, now_ms=NOW + RETENTION)
    assert _records(log) == [(2, b"x", b"1")]
    _verify(log)


def test_keyless_records_are_dropped_and_counted(tmp_path: Path) -> None:
    log = PartitionLog.open(tmp_path / "t-0", _cfg())
    _append(log, [(None, b"a"), (b"k", b"v"), (None, b"b")])
    _seal(log)
    res = clean_log(log, now_ms=NOW)
    assert res.stats.keyless_dropped == 2
    assert _records(log) == [(1, b"k", b"v")]
    batch = next(log.iter_batches())
    assert batch.header is not None
    assert (batch.base_offset, batch.last_offset) == (0, 2)  # offsets preserved


def test_small_map_cleans_in_rounds(tmp_path: Path) -> None:
    log = PartitionLog.open(tmp_path / "t-0", _cfg(segment_bytes=10_000))
    for rnd in range(3):
        for i in range(20):
            _append(log, [(b"key%d" % i, b"v%d" % rnd)])
        log.roll(now_ms=NOW)
    _seal(log)
    checkpoint = None
    rounds = 0
    while True:
        plan = plan_cleaning(log, first_dirty_offset=checkpoint, now_ms=NOW)
        if plan.cleanable_bytes == 0:
            break
        res = clean_log(log, first_dirty_offset=checkpoint, now_ms=NOW, map_capacity=15)
        assert res.end_offset > (checkpoint or 0)
        checkpoint = res.end_offset
        rounds += 1
    assert rounds > 1
    assert sorted(k for _o, k, _v in _records(log)) == sorted(b"key%d" % i for i in range(20))
    assert {v for _o, _k, v in _records(log)} == {b"v2"}
    _verify(log)


def test_dedupe_buffer_capacity() -> None:
    assert capacity_for(24 * 100, 0.9) == 90
    m = OffsetMap(2)
    m.put(b"a", 1)
    assert m.get(b"a") == 1 and m.get(b"b") == -1
    assert m.room_for(1) and not m.room_for(2)


def test_aborted_transactions_and_markers(tmp_path: Path) -> None:
    log = PartitionLog.open(tmp_path / "t-0", _cfg(segment_bytes=100_000))
    txn = {"producer_id": 7, "producer_epoch": 0, "is_transactional": True}
    _append(log, [(b"k", b"committed")], base_sequence=0, **txn)
    marker = v2.build_end_txn_marker(commit=True, producer_id=7, producer_epoch=0,
                                     coordinator_epoch=0, timestamp=NOW)  # fmt: skip
    log.append_as_leader(marker, 0, now_ms=NOW, origin=AppendOrigin.COORDINATOR)
    _append(log, [(b"k", b"aborted"), (b"z", b"aborted")], base_sequence=1, **txn)
    marker = v2.build_end_txn_marker(commit=False, producer_id=7, producer_epoch=0,
                                     coordinator_epoch=0, timestamp=NOW)  # fmt: skip
    log.append_as_leader(marker, 0, now_ms=NOW, origin=AppendOrigin.COORDINATOR)
    _append(log, [(b"k2", b"committed")], base_sequence=3, **txn)
    marker = v2.build_end_txn_marker(commit=True, producer_id=7, producer_epoch=0,
                                     coordinator_epoch=0, timestamp=NOW)  # fmt: skip
    log.append_as_leader(marker, 0, now_ms=NOW, origin=AppendOrigin.COORDINATOR)
    _append(log, [(b"y", b"plain")])
    _seal(log)
    res = clean_log(log, now_ms=NOW)
    assert res.stats.discarded_dropped == 2
    assert _records(log) == [(0, b"k", b"committed"), (5, b"k2", b"committed"), (7, b"y", b"plain")]
    # Every marker stays: the ABORT because its records were only just removed.
    assert [b.base_offset for b in log.iter_batches() if b.is_control] == [1, 4, 6]
    _verify(log)
    # Next round the ABORT's transaction is empty: it gets a delete horizon...
    clean_log(log, first_dirty_offset=res.end_offset, now_ms=NOW)
    horizons = {b.base_offset: b.delete_horizon_ms for b in log.iter_batches() if b.is_control}
    assert horizons == {1: None, 4: NOW + RETENTION, 6: None}
    # ... and goes once it passed; COMMITs whose records remain stay.
    clean_log(log, first_dirty_offset=res.end_offset, now_ms=NOW + RETENTION)
    assert [b.base_offset for b in log.iter_batches() if b.is_control] == [1, 6]
    assert len(_records(log)) == 3
    _verify(log)


def test_last_batch_of_producer_is_kept_empty(tmp_path: Path) -> None:
    log = PartitionLog.open(tmp_path / "t-0", _cfg())
    _append(log, [(b"k", b"old")], producer_id=9, producer_epoch=2, base_sequence=0)
    _append(log, [(b"k", b"old2"), (b"j", b"x")], producer_id=9, producer_epoch=2, base_sequence=1)
    _append(log, [(b"k", b"new"), (b"j", b"y")])
    _seal(log)
    clean_log(log, now_ms=NOW)
    batches = [b.header for b in log.iter_batches()]
    assert [(h.base_offset, h.last_offset_delta, h.record_count, h.producer_id, h.base_sequence)
            for h in batches if h is not None] == [(1, 1, 0, 9, 1), (3, 1, 2, -1, -1)]  # fmt: skip
    _verify(log)


def test_lag_and_ratio_rules(tmp_path: Path) -> None:
    log = PartitionLog.open(tmp_path / "t-0", _cfg(min_cleanable_dirty_ratio=0.5))
    for i in range(10):
        _append(log, [(b"k%d" % i, b"v")])
    _seal(log)
    plan = plan_cleaning(log, now_ms=NOW)
    assert plan.first_uncleanable_offset == log.active_segment.base_offset
    assert plan.cleanable_ratio == 1.0 and plan.eligible
    # min.compaction.lag.ms holds recent segments back.
    log.config = _cfg(min_compaction_lag_ms=10_000)
    plan = plan_cleaning(log, now_ms=NOW + 5_000)
    assert plan.first_uncleanable_offset == 0 and not plan.eligible
    # Nothing beyond the high watermark (the last stable offset).
    log.config = _cfg()
    plan = plan_cleaning(log, now_ms=NOW, last_stable_offset=3)
    assert plan.first_uncleanable_offset <= 3
    # max.compaction.lag.ms makes a barely dirty log due.
    res = clean_log(log, now_ms=NOW)
    _append(log, [(b"k0", b"v2")])
    _seal(log)
    log.config = _cfg(min_cleanable_dirty_ratio=0.99, max_compaction_lag_ms=1000)
    plan = plan_cleaning(log, first_dirty_offset=res.end_offset, now_ms=NOW + 500)
    assert not plan.eligible
    plan = plan_cleaning(log, first_dirty_offset=res.end_offset, now_ms=NOW + 5_000)
    assert plan.needs_compaction_now and plan.eligible


def test_replace_segments_refuses_bad_runs(tmp_path: Path) -> None:
    from kt.storage.errors import StorageError

    log = PartitionLog.open(tmp_path / "t-0", _cfg())
    for i in range(20):
        _append(log, [(b"k%d" % i, b"v" * 20)])
    segs = log.segments
    with pytest.raises(StorageError):
        log.replace_segments([segs[0]], [segs[-1]])  # the active segment
    with pytest.raises(StorageError):
        log.replace_segments([segs[0]], [segs[0], segs[2]])  # not consecutive


def test_aborted_round_leaves_no_files(tmp_path: Path) -> None:
    from kt.storage.cleaner import CleaningAbortedError

    d = tmp_path / "t-0"
    log = PartitionLog.open(d, _cfg())
    for i in range(30):
        _append(log, [(b"k%d" % (i % 3), b"v")])
    _seal(log)
    plan = plan_cleaning(log, now_ms=NOW)
    plan.open()
    cleaner = Cleaner()
    cleaner.abort.set()
    with pytest.raises(CleaningAbortedError):
        cleaner.clean(plan)
    plan.close()
    assert not [p for p in d.iterdir() if p.name.endswith(".cleaned")]


def test_broker_service_marks_failing_partition_uncleanable(tmp_path: Path) -> None:
    from kt.broker.log_cleaner import CleanerSettings, LogCleaner

    d = tmp_path / "logs"
    good = PartitionLog.open(d / "good-0", _cfg())
    bad = PartitionLog.open(d / "bad-0", _cfg())
    for plog in (good, bad):
        for i in range(30):
            _append(plog, [(b"k%d" % (i % 3), b"v")])
        _seal(plog)
    # Corrupt a sealed segment of `bad`: its CRC no longer matches.
    seg = bad.segments[0]
    with open(seg.log_path, "r+b") as f:
        f.seek(seg.size - 1)
        f.write(b"\xff")
    tps = {TopicPartition("good", 0): good, TopicPartition("bad", 0): bad}
    parts = {
        tp: SimpleNamespace(
            tp=tp, log=plog, offline=False, last_stable_offset=lambda p=plog: p.high_watermark
        )
        for tp, plog in tps.items()
    }
    errors: list[Any] = []

    class Replicas:
        """The slice of the ReplicaManager the cleaner uses."""

        def get(self, tp: TopicPartition) -> Any:
            return parts.get(tp)

        def __iter__(self) -> Any:
            return iter(list(parts.values()))

        def __contains__(self, tp: object) -> bool:
            return tp in parts

        def on_storage_error(self, part: Any, exc: BaseException) -> None:
            errors.append(exc)

    logs = SimpleNamespace(log_dirs=[d], dir_of={tp: d for tp in tps})
    service = LogCleaner(CleanerSettings(backoff_ms=10), Replicas(), logs)  # type: ignore[arg-type]

    async def run() -> None:
        cleaner = Cleaner(service.map_capacity)
        while await service.clean_filthiest(cleaner):
            pass

    asyncio.run(run())
    assert set(service.uncleanable) == {TopicPartition("bad", 0)}
    assert service.uncleanable_partitions() == {str(d): [TopicPartition("bad", 0)]}
    assert service.checkpoints[TopicPartition("good", 0)] == good.active_segment.base_offset
    assert (d / "cleaner-offset-checkpoint").read_text().splitlines()[2] == (
        f"good 0 {good.active_segment.base_offset}"
    )
    assert good.maintenance is None and bad.maintenance is None
    assert not errors
    assert sorted(k for _o, k, _v in _records(good)) == [b"k0", b"k1", b"k2"]
