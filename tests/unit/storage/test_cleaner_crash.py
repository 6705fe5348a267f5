"""Crash safety of the compaction swap: a failure at every step, then a reopen."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from kt.storage import record_batch as v2
from kt.storage.cleaner import Cleaner, iter_live_records, plan_cleaning
from kt.storage.index_check import verify_segment
from kt.storage.log import PartitionLog
from kt.storage.log_config import LogConfig

NOW = 1_700_000_000_000


class Crash(Exception):
    """Stands for the process dying at that point."""


def _cfg() -> LogConfig:
    return LogConfig(segment_bytes=500, index_interval_bytes=120, cleanup_policy="compact",
                     min_cleanable_dirty_ratio=0.0)  # fmt: skip


def _write(d: Path) -> tuple[PartitionLog, dict[bytes, tuple[int, bytes]]]:
    log = PartitionLog.open(d, _cfg())
    model: dict[bytes, tuple[int, bytes]] = {}
    for i in range(80):
        key, value = b"key%d" % (i % 9), b"value-%d" % i
        res = log.append_as_leader(v2.build_batch([v2.RecordSpec(key, value, timestamp=NOW)]),
                                   0, now_ms=NOW)  # fmt: skip
        model[key] = (res.first_offset, value)
    log.roll(now_ms=NOW)
    log.update_high_watermark(log.log_end_offset)
    log.flush()
    return log, model


def _check(d: Path, model: dict[bytes, tuple[int, bytes]], leo: int) -> None:
    log = PartitionLog.open(d, _cfg(), recovery_point=0, had_clean_shutdown=False)
    try:
        names = os.listdir(d)
        assert not [n for n in names if n.endswith((".cleaned", ".swap", ".deleted"))], names
        records = [(o, k, v) for o, _t, k, v, _h, _s in iter_live_records(log)]
        offsets = [o for o, _k, _v in records]
        assert offsets == sorted(set(offsets)), "duplicate or unordered offsets"
        latest: dict[bytes, tuple[int, bytes | None]] = {}
        for o, k, v in records:
            assert k is not None
            latest[k] = (o, v)
        assert latest == model, "an acknowledged latest value was lost"
        assert log.log_end_offset == leo
        for seg in log.segments:
            check = verify_segment(seg.log_path)
            assert check.ok, [str(p) for p in check.problems]
    finally:
        log.close()


def _round(log: PartitionLog) -> Any:
    plan = plan_cleaning(log, now_ms=NOW)
    plan.open()
    try:
        return Cleaner().clean(plan)
    finally:
        plan.close()


@pytest.mark.parametrize("step", ["swap", "deleted", "live"])
@pytest.mark.parametrize("group", [0, 1])
@pytest.mark.parametrize("merging", [False, True])
def test_crash_during_replace(tmp_path: Path, step: str, group: int, merging: bool) -> None:
    d = tmp_path / "t-0"
    log, model = _write(d)
    if merging:
        # A first round shrinks the segments; the second merges several per group.
        for g in _round(log).groups:
            log.replace_segments([g.new], [s.segment for s in g.old], now_ms=NOW)
        for i in range(40):
            key, value = b"key%d" % (i % 5), b"again-%d" % i
            batch = v2.build_batch([v2.RecordSpec(key, value, timestamp=NOW)])
            model[key] = (log.append_as_leader(batch, 0, now_ms=NOW).first_offset, value)
        log.roll(now_ms=NOW)
        log.update_high_watermark(log.log_end_offset)
    leo = log.log_end_offset
    result = _round(log)
    assert len(result.groups) > group + 1
    if merging:
        assert max(len(g.old) for g in result.groups[: group + 1]) > 1
    for g in result.groups[:group]:
        log.replace_segments([g.new], [s.segment for s in g.old], now_ms=NOW)

    def hook(name: str) -> None:
        if name == step:
            raise Crash(name)

    g = result.groups[group]
    with pytest.raises(Crash):
        log.replace_segments([g.new], [s.segment for s in g.old], now_ms=NOW, on_step=hook)
    # The process is gone: nothing more happens to the files (not even close()).
    _check(d, model, leo)


def test_crash_after_cleaned_written(tmp_path: Path) -> None:
    d = tmp_path / "t-0"
    log, model = _write(d)
    leo = log.log_end_offset
    _round(log)
    assert [n for n in os.listdir(d) if n.endswith(".cleaned")]
    _check(d, model, leo)


@pytest.mark.parametrize("renamed", [1, 2, 3])
def test_crash_midway_through_renaming_to_swap(tmp_path: Path, renamed: int) -> None:
    """Only some files of the cleaned segment became `.swap`: the swap is discarded."""
    d = tmp_path / "t-0"
    log, model = _write(d)
    leo = log.log_end_offset
    result = _round(log)
    new = result.groups[0].new
    for ext in (".log", ".index", ".timeindex")[:renamed]:
        name = f"{new.base_offset:020d}{ext}"
        os.replace(d / (name + ".cleaned"), d / (name + ".swap"))
    _check(d, model, leo)


def test_crash_midway_through_renaming_live(tmp_path: Path) -> None:
    """The `.log` is live, its indexes still `.swap`: the loader finishes the rename."""
    d = tmp_path / "t-0"
    log, model = _write(d)
    leo = log.log_end_offset
    result = _round(log)
    g = result.groups[0]

    def hook(name: str) -> None:
        if name == "deleted":
            base = g.new.base_offset
            os.replace(d / f"{base:020d}.log.swap", d / f"{base:020d}.log")
            raise Crash(name)

    with pytest.raises(Crash):
        log.replace_segments([g.new], [s.segment for s in g.old], now_ms=NOW, on_step=hook)
    _check(d, model, leo)


def test_clean_swap_then_reopen(tmp_path: Path) -> None:
    d = tmp_path / "t-0"
    log, model = _write(d)
    leo = log.log_end_offset
    result = _round(log)
    for g in result.groups:
        log.replace_segments([g.new], [s.segment for s in g.old], now_ms=NOW)
    log.close()
    _check(d, model, leo)
