"""The offset-reset planning `kt group reset-offsets` and the TUI share: every target
moves a partition where kafka-consumer-groups.sh --reset-offsets would, clamped to
the log."""

from __future__ import annotations

import pytest

from kt.admin.offset_reset import TARGETS, ResetPlan, ResetTarget

# a log spanning 100..200, a committed offset of 150
START, END, CURRENT = 100, 200, 150


@pytest.mark.parametrize(
    ("target", "current", "at_time", "expected"),
    [
        (ResetTarget("earliest"), CURRENT, -1, START),
        (ResetTarget("latest"), CURRENT, -1, END),
        (ResetTarget("current"), CURRENT, -1, CURRENT),
        (ResetTarget("current"), -1, -1, END),  # nothing committed: the log end
        (ResetTarget("offset", 120), CURRENT, -1, 120),
        (ResetTarget("offset", 5), CURRENT, -1, START),  # clamped up to the log start
        (ResetTarget("offset", 10_000), CURRENT, -1, END),  # and down to its end
        (ResetTarget("timestamp", 1_700_000_000_000), CURRENT, 170, 170),
        (ResetTarget("timestamp", 1_700_000_000_000), CURRENT, -1, END),  # none after it
        (ResetTarget("shift", -30), CURRENT, -1, 120),
        (ResetTarget("shift", -100), CURRENT, -1, START),
        (ResetTarget("shift", 80), CURRENT, -1, END),
        (ResetTarget("shift", -10), -1, -1, 190),  # from the log end when none committed
    ],
)
def test_each_target_moves_where_kafka_would(
    target: ResetTarget, current: int, at_time: int, expected: int
) -> None:
    assert target.new_offset(current, START, END, at_time) == expected


def test_a_target_is_checked_when_made() -> None:
    with pytest.raises(ValueError, match="reset target must be one of"):
        ResetTarget("sideways")
    for kind in ("offset", "timestamp", "shift"):
        with pytest.raises(ValueError, match=f"a reset to {kind} needs a value"):
            ResetTarget(kind)
    assert {ResetTarget(k, 0).kind for k in TARGETS} == set(TARGETS)


def test_a_plan_knows_whether_kafka_allows_it_and_what_it_commits() -> None:
    moves = (("orders", 0, 150, 100), ("orders", 1, -1, 7))
    assert ResetPlan("g", "Empty", 0, moves).inactive
    assert ResetPlan("g", "Dead", 0, moves).inactive
    assert not ResetPlan("g", "Stable", 2, moves).inactive
    assert ResetPlan("g", "Empty", 0, moves).offsets() == {("orders", 0): 100, ("orders", 1): 7}
