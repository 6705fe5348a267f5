"""replica_diff: the pure comparison of replicas, checked with hypothesis on logs
made of a common history and divergent tails, plus `read_replica` on a real log."""

from __future__ import annotations

import itertools
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from kt.storage.checkpoint import TopicPartition, write_offset_checkpoint
from kt.storage.leader_epoch import EpochEntry
from kt.storage.log import PartitionLog
from kt.storage.record_batch import RecordSpec, build_batch
from kt.storage.replica_diff import (
    BatchSummary,
    Replica,
    compare_partition,
    group_ranges,
    read_replica,
)

TP = TopicPartition("t", 0)
SETTINGS = settings(max_examples=200, deadline=None)

# A tail: batches as (record count, offset gap before it) of one epoch.
shape = st.tuples(st.integers(1, 5), st.sampled_from([0, 0, 0, 2]))
shapes = st.lists(shape, max_size=6)
nonempty_shapes = st.lists(shape, min_size=1, max_size=6)


def make_batches(
    shape: list[tuple[int, int]], start: int, epoch: int, tag: int, file: str
) -> list[BatchSummary]:
    out = []
    offset = start
    position = 0
    for i, (n, gap) in enumerate(shape):
        offset += gap if out else 0
        size = 70 + 10 * n
        crc = hash((tag, epoch, offset, n, i)) & 0xFFFFFFFF
        out.append(
            BatchSummary(offset, offset + n - 1, epoch, crc, n, 1000 * offset, 1000 * offset + n,
                         file, position, size)
        )  # fmt: skip
        offset += n
        position += size
    return out


def replica(label: str, batches: list[BatchSummary], hw: int | None, start: int = 0) -> Replica:
    epochs: list[EpochEntry] = []
    for b in batches:
        if not epochs or epochs[-1].epoch != b.epoch:
            epochs.append(EpochEntry(b.epoch, b.base_offset))
    end = batches[-1].last_offset + 1 if batches else start
    hw_clamped = None if hw is None else min(hw, end)
    return Replica(label, f"/{label}/t-0", TP, None, batches, min(start, end), end, hw_clamped,
                   epochs)  # fmt: skip


@SETTINGS
@given(shapes)
def test_a_replica_equals_its_copy(shape: list[tuple[int, int]]) -> None:
    batches = make_batches(shape, 0, 0, 1, "a")
    diff = compare_partition([replica("a", batches, 5), replica("b", list(batches), 5)])
    assert diff.verdict == "identical" and diff.ok
    assert diff.diverges_at is None
    assert all(not c.extra and not c.missing for c in diff.replicas)


@SETTINGS
@given(nonempty_shapes, st.integers(0, 6), st.integers(0, 40))
def test_a_prefix_lags(shape: list[tuple[int, int]], cut: int, hw: int) -> None:
    batches = make_batches(shape, 0, 3, 1, "a")
    cut = min(cut, len(batches))
    diff = compare_partition([replica("f", batches[:cut], hw), replica("l", batches, hw)])
    follower, leader = diff.replicas
    if cut < len(batches):
        assert diff.reference is leader.replica  # the longer log, same epoch
    assert follower.diverges_at is None and not follower.extra
    assert follower.missing == batches[cut:]
    assert diff.verdict == ("lagging" if cut < len(batches) else "identical")
    assert diff.ok


@SETTINGS
@given(
    shapes,
    shapes,
    shapes,
    st.integers(0, 60),
    st.integers(0, 60),
    st.booleans(),
)
def test_divergent_tails(
    common: list[tuple[int, int]],
    old_tail: list[tuple[int, int]],
    new_tail: list[tuple[int, int]],
    old_hw: int,
    new_hw: int,
    old_first: bool,
) -> None:
    """The old leader (epoch 1) and the new one (epoch 2) share a history and then
    wrote different batches from the same offset."""
    history = make_batches(common, 0, 0, 1, "shared")
    fork = history[-1].last_offset + 1 if history else 0
    old = history + make_batches(old_tail, fork, 1, 2, "old")
    new = history + make_batches(new_tail, fork, 2, 3, "new")
    old_rep, new_rep = replica("old", old, old_hw), replica("new", new, new_hw)
    new_rep.leader_epochs = [*(new_rep.leader_epochs or []), EpochEntry(2, fork)]
    new_rep.leader_epochs = sorted(set(new_rep.leader_epochs))
    order = [old_rep, new_rep] if old_first else [new_rep, old_rep]
    diff = compare_partition(order)
    assert diff.reference is new_rep  # the highest latest leader epoch
    c = next(c for c in diff.replicas if c.replica is old_rep)
    old_extra = old[len(history) :]
    new_extra = new[len(history) :]
    assert c.extra == old_extra
    assert c.missing == new_extra
    if old_extra:
        assert c.diverges_at == old_extra[0].base_offset == diff.diverges_at
        assert c.state == ("diverged" if new_extra else "ahead")
        hw = old_rep.high_watermark
        assert c.committed == (hw is not None and hw > fork)
        assert c.acknowledged_lost == [
            (r.first_offset, min(r.last_offset, (hw or 0) - 1))
            for r in group_ranges(old_extra)
            if c.committed and r.first_offset < (hw or 0)
        ]
        assert c.epoch_truncation_offset == fork
    else:
        assert c.diverges_at is None and not c.committed
    assert diff.ok == (not c.committed)
    expected = (
        "diverged-committed"
        if c.committed
        else "diverged-uncommitted"
        if old_extra
        else "lagging"
        if new_extra
        else "identical"
    )
    assert diff.verdict == expected
    # The verdict does not depend on the order the replicas were given in.
    again = compare_partition(order[::-1])
    assert (again.verdict, again.diverges_at) == (diff.verdict, diff.diverges_at)


@SETTINGS
@given(shapes, st.integers(0, 30))
def test_log_start_offsets_bound_the_comparison(shape: list[tuple[int, int]], start: int) -> None:
    """Batches below the higher log start offset are not compared: retention on one
    replica is no divergence."""
    batches = make_batches(shape, 0, 0, 1, "a")
    kept = [b for b in batches if b.last_offset >= start]
    trimmed = replica("b", kept, None, start)
    full = replica("a", batches, None)
    diff = compare_partition([full, trimmed])
    assert diff.diverges_at is None
    assert diff.ok


@SETTINGS
@given(shapes, st.integers(0, 5))
def test_ranges_partition_the_batches(shape: list[tuple[int, int]], epoch: int) -> None:
    batches = make_batches(shape, 10, epoch, 1, "f")
    ranges = group_ranges(batches)
    assert sum(r.batches for r in ranges) == len(batches)
    assert sum(r.records or 0 for r in ranges) == sum(b.records or 0 for b in batches)
    for a, b in itertools.pairwise(ranges):
        assert b.first_offset > a.last_offset + 1  # a gap separates ranges
    covered = sorted(o for r in ranges for o in range(r.first_offset, r.last_offset + 1))
    assert covered == sorted(o for b in batches for o in range(b.base_offset, b.last_offset + 1))


def test_read_replica_of_a_real_log(tmp_path: Path) -> None:
    log = PartitionLog.open(tmp_path / "t-0")
    for epoch in (0, 0, 2):
        log.append_as_leader(
            build_batch([RecordSpec(b"k", b"v", timestamp=5), RecordSpec(None, b"w")]), epoch
        )
    log.close()
    write_offset_checkpoint(tmp_path / "replication-offset-checkpoint", {TP: 4})
    rep = read_replica(tmp_path / "t-0", "label")
    assert rep.tp == TP and rep.problems == []
    assert [(b.base_offset, b.last_offset, b.epoch, b.records) for b in rep.batches] == [
        (0, 1, 0, 2),
        (2, 3, 0, 2),
        (4, 5, 2, 2),
    ]
    assert (rep.log_start_offset, rep.log_end_offset, rep.high_watermark) == (0, 6, 4)
    assert rep.leader_epochs == [EpochEntry(0, 0), EpochEntry(2, 4)]
    assert rep.latest_epoch == 2


def test_a_hole_below_the_high_watermark_is_a_committed_difference() -> None:
    """A follower missing a batch in the middle of committed data (it would never fetch
    it again) has nothing the reference lacks, but the committed data differs."""
    batches = make_batches([(2, 0)] * 4, 0, 0, 1, "a")
    holed = replica("b", batches[:1] + batches[2:], 8)
    diff = compare_partition([replica("a", batches, 8), holed])
    c = diff.replicas[1]
    assert c.diverges_at == 2 and c.committed
    assert c.extra == [] and c.missing == [batches[1]]
    assert c.acknowledged_lost == []
    assert diff.verdict == "diverged-committed" and not diff.ok
