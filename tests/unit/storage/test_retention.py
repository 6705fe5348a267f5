"""Retention on the storage core: PartitionLog.delete_old_segments and its halves.

Each policy at its boundary (Kafka's: strictly older than retention.ms; a log of
exactly retention.bytes keeps everything), -1 as unlimited, the high-watermark and
empty-active-segment guards, rolling when every segment goes, future timestamps,
compact-only logs, the log start offset breach, delayed unlinking, reloading after
a pass (clean, unclean, and crashed between the checkpoint and the renames), the
leader-epoch cache, and the maintenance claim.
"""

from __future__ import annotations

import threading
from pathlib import Path

import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kt.cli import cli
from kt.storage.errors import OffsetOutOfRangeError, StorageError
from kt.storage.index_check import verify_segment
from kt.storage.log import PartitionLog
from kt.storage.log_config import LogConfig
from kt.storage.record_batch import RecordSpec, build_batch
from kt.storage.retention import RetentionPlan, RetentionReason, select_deletable

DAY = 24 * 3600 * 1000
T0 = 1_700_000_000_000


def batch(n: int = 3, ts: int = T0, tag: bytes = b"") -> bytes:
    """n records, all at timestamp `ts`, of a fixed size (so segments match in bytes)."""
    return build_batch([RecordSpec(b"k%d" % i + tag, b"v" * 40, timestamp=ts) for i in range(n)])


def make_log(
    d: Path, stamps: list[int], *, active: int | None = None, epochs: bool = False, **cfg: object
) -> PartitionLog:
    """A log with one sealed segment per timestamp in `stamps` (3 records each) and
    an active segment holding one batch at `active` (empty when None); HW = LEO."""
    config = LogConfig(**{"file_delete_delay_ms": 1000, **cfg})  # type: ignore[arg-type]
    log = PartitionLog.open(d, config)
    for i, ts in enumerate(stamps):
        log.append_as_leader(batch(ts=ts), i + 1 if epochs else 0, now_ms=ts)
        log.roll(now_ms=ts)
    if active is not None:
        log.append_as_leader(batch(ts=active), len(stamps) + 1 if epochs else 0, now_ms=active)
    log.update_high_watermark(log.log_end_offset)
    return log


def bases(log: PartitionLog) -> list[int]:
    return [s.base_offset for s in log.segments]


def offsets(log: PartitionLog) -> list[int]:
    start = log.log_start_offset
    return [r.offset for b in log.iter_batches() for r in b.records() if r.offset >= start]


def deleted_files(d: Path) -> list[str]:
    return sorted(p.name for p in d.iterdir() if p.name.endswith(".deleted"))


@pytest.fixture
def d(tmp_path: Path) -> Path:
    return tmp_path / "topic-0"


# --- retention.ms ------------------------------------------------------------------


def test_time_retention_is_strictly_older_than_the_limit(d: Path) -> None:
    log = make_log(d, [T0, T0 + 10, T0 + 20], active=T0 + 30, retention_ms=DAY)
    # exactly retention.ms old: kept
    assert log.delete_old_segments(T0 + DAY).deleted_segments == 0
    assert bases(log) == [0, 3, 6, 9]
    # one millisecond more: the first segment goes, the second (10 ms younger) stays
    result = log.delete_old_segments(T0 + DAY + 1)
    assert [(x.base_offset, x.next_offset, x.reason) for x in result.deleted] == [
        (0, 3, RetentionReason.RETENTION_MS)
    ]
    assert bases(log) == [3, 6, 9]
    assert log.log_start_offset == 3 == result.log_start_offset
    assert result.old_log_start_offset == 0 and result.log_start_moved
    assert offsets(log) == list(range(3, 12))
    log.close()


def test_time_retention_stops_at_the_first_kept_segment(d: Path) -> None:
    log = make_log(d, [T0, T0 + DAY, T0], active=T0 + 2 * DAY, retention_ms=1000)
    result = log.delete_old_segments(T0 + DAY + 500)
    # the third segment is as old as the first but the second, kept, shields it
    assert [x.base_offset for x in result.deleted] == [0]
    assert bases(log) == [3, 6, 9]
    log.close()


def test_unlimited_retention_deletes_nothing(d: Path) -> None:
    log = make_log(d, [T0, T0 + 1], active=T0 + 2, retention_ms=-1, retention_bytes=-1)
    result = log.delete_old_segments(T0 + 1000 * DAY)
    assert result.deleted_segments == 0 and not result.log_start_moved
    assert bases(log) == [0, 3, 6] and log.log_start_offset == 0
    log.close()


def test_future_timestamp_blocks_time_retention(d: Path) -> None:
    now = T0 + 10 * DAY
    log = make_log(d, [T0, now + 5000, T0], active=T0, retention_ms=DAY)
    # the first (old) segment goes; the future one stops the pass, shielding the rest
    result = log.delete_old_segments(now)
    assert [x.base_offset for x in result.deleted] == [0]
    assert result.future_timestamps == [(3, now + 5000)]
    assert bases(log) == [3, 6, 9]
    # once the clock passes it (and retention.ms more), it goes too
    later = log.delete_old_segments(now + 5000 + DAY + 1)
    assert later.future_timestamps == []
    assert [x.base_offset for x in later.deleted] == [3, 6, 9]
    log.close()


def test_segment_without_timestamps_ages_by_file_mtime(d: Path) -> None:
    import os

    log = make_log(d, [T0], active=None, retention_ms=DAY)
    # no records with a timestamp: Kafka falls back to the file's last modification
    log.segments[0].max_timestamp_so_far = -1
    os.utime(log.segments[0].log_path, ns=(T0 * 10**6, T0 * 10**6))
    assert log.delete_old_segments(T0 + DAY).deleted_segments == 0
    assert log.delete_old_segments(T0 + DAY + 1).deleted_segments == 1
    log.close()


# --- retention.bytes ---------------------------------------------------------------


def test_size_retention_boundaries(tmp_path: Path) -> None:
    def run(limit_of: int, extra: int) -> list[int]:
        d = tmp_path / f"t{limit_of}{extra}-0"
        log = make_log(d, [T0, T0, T0], active=T0, retention_ms=-1)
        seg = log.segments[0].size
        assert log.size == 4 * seg  # equal segments
        log.config = LogConfig(
            retention_ms=-1, retention_bytes=limit_of * seg + extra, file_delete_delay_ms=0
        )
        result = log.delete_old_segments(T0)
        assert all(x.reason is RetentionReason.RETENTION_BYTES for x in result.deleted)
        if result.deleted:
            assert log.size >= log.config.retention_bytes
        out = bases(log)
        log.close()
        return out

    assert run(4, 0) == [0, 3, 6, 9]  # exactly at the limit: nothing
    assert run(4, -1) == [0, 3, 6, 9]  # one byte over: not a whole segment's worth
    assert run(3, 0) == [3, 6, 9]  # exactly one segment over
    assert run(3, -1) == [3, 6, 9]  # a byte more than one segment: still one
    assert run(1, 0) == [9]  # the active segment is kept at exactly the limit
    assert run(0, 0) == [12]  # 0: every segment, the active one replaced by a new one


def test_size_retention_counts_what_the_start_offset_pass_left(d: Path) -> None:
    log = make_log(d, [T0, T0, T0], active=T0, retention_ms=-1)
    seg = log.segments[0].size
    log.config = LogConfig(retention_ms=-1, retention_bytes=2 * seg)
    log.maybe_increment_log_start_offset(3)
    result = log.delete_old_segments(T0)
    assert [(x.base_offset, x.reason) for x in result.deleted] == [
        (0, RetentionReason.LOG_START_OFFSET),
        (3, RetentionReason.RETENTION_BYTES),
    ]
    assert bases(log) == [6, 9]
    log.close()


# --- the active segment and the high watermark ------------------------------------------


def test_breached_active_segment_is_replaced_by_a_new_empty_one(d: Path) -> None:
    log = make_log(d, [], active=T0, retention_ms=DAY)
    assert bases(log) == [0] and log.log_end_offset == 3
    result = log.delete_old_segments(T0 + DAY + 1)
    assert result.rolled and [x.base_offset for x in result.deleted] == [0]
    # never without a segment: a fresh empty active segment at the log end offset
    assert bases(log) == [3] and log.active_segment.size == 0
    assert log.log_start_offset == log.high_watermark == log.log_end_offset == 3
    # an empty active segment is never deleted, however old the log
    again = log.delete_old_segments(T0 + 100 * DAY)
    assert again.deleted_segments == 0 and not again.rolled and bases(log) == [3]
    # and appends continue
    assert log.append_as_leader(batch(), 0).first_offset == 3
    log.close()


def test_empty_log_is_left_alone(d: Path) -> None:
    log = PartitionLog.open(d, LogConfig(retention_ms=0, retention_bytes=0))
    result = log.delete_old_segments(T0)
    assert result.deleted_segments == 0 and not result.rolled and bases(log) == [0]
    log.close()


def test_nothing_at_or_above_the_high_watermark_goes(d: Path) -> None:
    log = make_log(d, [T0, T0, T0], active=T0, retention_ms=0)
    log.update_high_watermark(5)  # inside the second segment [3, 6)
    result = log.delete_old_segments(T0 + DAY)
    assert [x.base_offset for x in result.deleted] == [0]  # [0, 3) is below the HW
    assert log.log_start_offset == 3 <= log.high_watermark
    log.update_high_watermark(9)  # exactly the active segment's base
    result = log.delete_old_segments(T0 + DAY)
    assert [x.base_offset for x in result.deleted] == [3, 6]
    assert bases(log) == [9] and not result.rolled  # the active one is not below the HW
    log.update_high_watermark(11)  # inside the active segment
    assert log.delete_old_segments(T0 + DAY).deleted_segments == 0
    log.close()


# --- log start offset breach; cleanup.policy ------------------------------------------


def test_log_start_offset_breach_deletes_wholly_skipped_segments(d: Path) -> None:
    log = make_log(d, [T0, T0, T0], active=T0, retention_ms=-1)
    log.maybe_increment_log_start_offset(7)  # DeleteRecords to inside [6, 9)
    result = log.delete_old_segments(T0)
    assert [(x.base_offset, x.reason) for x in result.deleted] == [
        (0, RetentionReason.LOG_START_OFFSET),
        (3, RetentionReason.LOG_START_OFFSET),
    ]
    assert bases(log) == [6, 9] and log.log_start_offset == 7
    assert not result.log_start_moved  # it had moved already
    assert offsets(log) == list(range(7, 12))
    # a start exactly at a segment's base deletes the segment before it
    log.maybe_increment_log_start_offset(9)
    assert [x.base_offset for x in log.delete_old_segments(T0).deleted] == [6]
    # the active segment is never deleted for the log start offset
    log.maybe_increment_log_start_offset(12)
    assert log.delete_old_segments(T0).deleted_segments == 0 and bases(log) == [9]
    log.close()


def test_compact_only_log_is_deleted_by_log_start_offset_only(d: Path) -> None:
    log = make_log(
        d, [T0, T0, T0], active=T0, cleanup_policy="compact", retention_ms=0, retention_bytes=0
    )
    assert log.delete_old_segments(T0 + 100 * DAY).deleted_segments == 0
    assert bases(log) == [0, 3, 6, 9]
    log.maybe_increment_log_start_offset(6)
    result = log.delete_old_segments(T0 + 100 * DAY)
    assert [(x.base_offset, x.reason) for x in result.deleted] == [
        (0, RetentionReason.LOG_START_OFFSET),
        (3, RetentionReason.LOG_START_OFFSET),
    ]
    assert bases(log) == [6, 9]
    log.close()


def test_compact_and_delete_applies_time_retention(d: Path) -> None:
    log = make_log(d, [T0, T0 + DAY], active=T0 + DAY, cleanup_policy="compact,delete",
                   retention_ms=DAY)  # fmt: skip
    assert [x.base_offset for x in log.delete_old_segments(T0 + DAY + 1).deleted] == [0]
    log.close()


# --- files: delayed unlink, reloads, crashes ----------------------------------------------


def test_files_renamed_at_once_and_unlinked_after_the_delay(d: Path) -> None:
    log = make_log(d, [T0, T0], active=T0 + DAY, retention_ms=DAY, file_delete_delay_ms=5000)
    old = log.read(0, 10_000)  # a fetch in flight keeps sending from the old file
    assert old is not None
    now = T0 + DAY + 1
    result = log.delete_old_segments(now)
    assert result.deleted_segments == 2
    names = deleted_files(d)
    assert "00000000000000000000.log.deleted" in names
    assert "00000000000000000003.index.deleted" in names
    assert not (d / "00000000000000000000.log").exists()
    assert old.read_bytes()  # still readable through the open file
    assert log.pending_deletes == 2
    with pytest.raises(OffsetOutOfRangeError):
        log.read(0, 100)
    # unlinked file.delete.delay.ms after the pass, on the same clock
    assert log.delete_expired_files(now + 4999) == 0 and deleted_files(d)
    assert log.delete_expired_files(now + 5000) == 2
    assert deleted_files(d) == [] and log.pending_deletes == 0
    log.close()


def test_restart_after_retention_exposes_nothing(d: Path) -> None:
    log = make_log(d, [T0, T0, T0], active=T0 + DAY, retention_ms=DAY)
    log.delete_old_segments(T0 + DAY + 1)
    assert log.log_start_offset == 9
    log.close()  # a clean close unlinks pending deletions
    assert deleted_files(d) == []
    again = PartitionLog.open(d, LogConfig(retention_ms=DAY), had_clean_shutdown=True)
    assert again.log_start_offset == 9 and bases(again) == [9]
    assert offsets(again) == [9, 10, 11]
    with pytest.raises(OffsetOutOfRangeError):
        again.read(8, 100)
    again.close()


def test_crash_after_the_renames_exposes_nothing(d: Path) -> None:
    log = make_log(d, [T0, T0, T0], active=T0 + DAY, retention_ms=DAY, file_delete_delay_ms=60_000)
    log.delete_old_segments(T0 + DAY + 1)
    log.flush()
    assert deleted_files(d)
    # kill -9 now: no close, the `.deleted` files are still there; the checkpoint
    # holds no entry (the start is the first segment's base)
    again = PartitionLog.open(d, LogConfig(), recovery_point=0, had_clean_shutdown=False)
    assert deleted_files(d) == []  # loading drops them
    assert again.log_start_offset == 9 and offsets(again) == [9, 10, 11]
    again.close()


def test_crash_between_checkpoint_and_renames_keeps_the_new_start(d: Path) -> None:
    log = make_log(d, [T0, T0], active=T0 + DAY, retention_ms=DAY)
    plan = log.plan_retention(T0 + DAY + 1)
    assert plan.log_start_moved and plan.new_log_start_offset == 6
    # the start moved in memory; the files are untouched until apply_retention
    assert log.log_start_offset == 6 and bases(log) == [0, 3, 6] and deleted_files(d) == []
    with pytest.raises(OffsetOutOfRangeError):
        log.read(2, 100)
    # kill -9 here, after the broker checkpointed the new start (6): reload with it
    log.flush()
    again = PartitionLog.open(d, LogConfig(retention_ms=DAY), log_start_offset=6)
    assert again.log_start_offset == 6 and offsets(again) == [6, 7, 8]
    # the next pass deletes the segments as below the log start offset
    again.update_high_watermark(again.log_end_offset)
    result = again.delete_old_segments(T0)
    assert [(x.base_offset, x.reason) for x in result.deleted] == [
        (0, RetentionReason.LOG_START_OFFSET),
        (3, RetentionReason.LOG_START_OFFSET),
    ]
    again.close()


def test_log_start_is_persisted_before_any_file_is_renamed(d: Path) -> None:
    log = make_log(d, [T0, T0], active=T0 + DAY, retention_ms=DAY)
    seen: list[tuple[int, list[str], list[int]]] = []

    def persist(plan: RetentionPlan) -> None:
        seen.append((plan.new_log_start_offset, deleted_files(d), bases(log)))

    log.delete_old_segments(T0 + DAY + 1, persist_log_start=persist)
    assert seen == [(6, [], [0, 3, 6])]
    assert bases(log) == [6] and deleted_files(d)
    # not called when the start does not move
    log.delete_old_segments(T0 + DAY + 1, persist_log_start=persist)
    assert len(seen) == 1
    log.close()


def test_apply_keeps_segments_the_log_start_no_longer_covers(d: Path) -> None:
    log = make_log(d, [T0, T0], active=T0 + DAY, retention_ms=DAY)
    plan = log.plan_retention(T0 + DAY + 1)
    assert plan.new_log_start_offset == 6
    log.truncate_to(4)  # a truncation in between lowers the log start to 4
    result = log.apply_retention(plan)
    assert [x.base_offset for x in result.deleted] == [0]  # [3, 6) holds offset 4
    assert bases(log) == [3] and log.log_start_offset == 4
    log.close()


def test_leader_epoch_cache_truncated_from_the_start(d: Path) -> None:
    log = make_log(d, [T0, T0, T0], active=T0 + DAY, epochs=True, retention_ms=DAY)
    assert [(e.epoch, e.start_offset) for e in log.leader_epoch_cache.entries] == [
        (1, 0), (2, 3), (3, 6), (4, 9)
    ]  # fmt: skip
    log.delete_old_segments(T0 + DAY + 1)
    assert [(e.epoch, e.start_offset) for e in log.leader_epoch_cache.entries] == [(4, 9)]
    log.close()
    again = PartitionLog.open(d, LogConfig())
    assert [(e.epoch, e.start_offset) for e in again.leader_epoch_cache.entries] == [(4, 9)]
    again.close()


def test_indexes_verify_clean_after_retention(tmp_path: Path) -> None:
    d = tmp_path / "data" / "topic-0"
    log = make_log(d, [T0, T0, T0 + DAY], active=T0 + DAY, retention_ms=DAY,
                   file_delete_delay_ms=60_000)  # fmt: skip
    log.delete_old_segments(T0 + DAY + 1)
    log.flush()
    for seg in log.segments:
        assert verify_segment(seg.log_path).ok
    result = CliRunner().invoke(cli, ["index", "verify", str(d)])  # `.deleted` still there
    assert result.exit_code == 0, result.output
    assert "2 segments checked, 0 with problems" in result.output
    log.close()
    result = CliRunner().invoke(cli, ["index", "verify", str(d)])
    assert result.exit_code == 0, result.output


# --- the maintenance claim ------------------------------------------------------------


def test_maintenance_claim(d: Path) -> None:
    log = PartitionLog.open(d, LogConfig())
    assert log.maintenance is None
    assert log.try_begin_maintenance("retention")
    assert log.maintenance == "retention"
    assert not log.try_begin_maintenance("compaction")
    assert not log.try_begin_maintenance("retention")  # not reentrant
    with pytest.raises(StorageError):
        log.end_maintenance("compaction")
    log.end_maintenance("retention")
    assert log.try_begin_maintenance("compaction")
    log.end_maintenance("compaction")
    log.close()


def test_maintenance_claim_is_exclusive_across_threads(d: Path) -> None:
    log = PartitionLog.open(d, LogConfig())
    wins: list[str] = []
    barrier = threading.Barrier(8)

    def contend(name: str) -> None:
        barrier.wait()
        if log.try_begin_maintenance(name):
            wins.append(name)

    threads = [threading.Thread(target=contend, args=(f"job{i}",)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(wins) == 1 and log.maintenance == wins[0]
    log.close()


# --- properties over random logs ------------------------------------------------------


@settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(
    ages=st.lists(st.integers(-2, 6), min_size=0, max_size=6),
    active_age=st.none() | st.integers(-2, 6),
    retention_days=st.integers(-1, 4),
    retention_segments=st.integers(-1, 7),
    hw_back=st.integers(0, 8),
    start_forward=st.integers(0, 20),
    policy=st.sampled_from(["delete", "compact", "compact,delete"]),
)
def test_retention_invariants(
    tmp_path_factory: pytest.TempPathFactory,
    ages: list[int],
    active_age: int | None,
    retention_days: int,
    retention_segments: int,
    hw_back: int,
    start_forward: int,
    policy: str,
) -> None:
    """Whatever the layout: a prefix goes, never at or above the HW, never the empty
    active segment, at least one segment stays, everything from the new log start
    to the log end is still readable, and the rules hold for each deleted segment."""
    d = tmp_path_factory.mktemp("prop") / "t-0"
    now = T0 + 10 * DAY
    log = make_log(
        d,
        [now - a * DAY for a in ages],
        active=None if active_age is None else now - active_age * DAY,
        retention_ms=-1,
    )
    seg_size = len(batch())
    log.config = LogConfig(
        cleanup_policy=policy,
        retention_ms=retention_days * DAY if retention_days >= 0 else -1,
        retention_bytes=retention_segments * seg_size if retention_segments >= 0 else -1,
    )
    log.update_high_watermark(max(0, log.log_end_offset - hw_back))
    hw = log.high_watermark
    if start_forward:
        log.maybe_increment_log_start_offset(min(hw, log.log_start_offset + start_forward))
    start_before = log.log_start_offset
    before = [(s.base_offset, s.size, s.largest_timestamp) for s in log.segments]
    leo = log.log_end_offset
    expected = select_deletable(
        log.segments,
        config=log.config,
        log_start_offset=start_before,
        log_end_offset=leo,
        high_watermark=hw,
        now_ms=now,
    )
    result = log.delete_old_segments(now)
    assert [x.base_offset for x in result.deleted] == [x.base_offset for x in expected.selected]
    gone = result.deleted_segments
    assert [x.base_offset for x in result.deleted] == [b for b, _, _ in before[:gone]]
    assert log.segments and log.log_end_offset == leo
    assert log.log_start_offset <= log.high_watermark == hw <= leo
    assert log.log_start_offset == max(start_before, log.segments[0].base_offset)
    assert offsets(log) == list(range(log.log_start_offset, leo))
    for x in result.deleted:
        assert x.next_offset <= hw
        if x.reason is RetentionReason.LOG_START_OFFSET:
            assert x.next_offset <= start_before
        else:
            assert "delete" in policy
        if x.reason is RetentionReason.RETENTION_MS:
            assert now - x.largest_timestamp > log.config.retention_ms >= 0
    by_size = [
        i for i, x in enumerate(result.deleted) if x.reason is RetentionReason.RETENTION_BYTES
    ]
    if by_size:  # what the size pass left (time may have taken more after it)
        kept = sum(s for b, s, _ in before[by_size[-1] + 1 :])
        assert kept >= log.config.retention_bytes
    if result.rolled:
        assert gone == len(before) and bases(log) == [leo] and log.active_segment.size == 0
    else:
        assert bases(log) == [b for b, _, _ in before[gone:]]
    log.close()
