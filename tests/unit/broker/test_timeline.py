"""kt.timeline marks: off by default, one line per mark when on, `once` marks only
what a role change armed, `changed` only new values."""

from __future__ import annotations

import logging
import re
from collections.abc import Iterator

import pytest

from kt.broker import timeline

LINE = re.compile(r"^timeline (\S+) mono=(\d+\.\d{6}) wall=(\d+\.\d{6}) ?(.*)$")


@pytest.fixture
def on(caplog: pytest.LogCaptureFixture) -> Iterator[None]:
    """The timeline logger at debug level; no armed events or values left over."""
    timeline.reset()
    caplog.set_level(logging.DEBUG, logger="kt.timeline")
    yield
    timeline.reset()


def lines(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == "kt.timeline"]


def test_off_by_default_logs_nothing_and_arms_nothing(caplog: pytest.LogCaptureFixture) -> None:
    timeline.reset()
    caplog.set_level(logging.INFO, logger="kt.timeline")
    assert not timeline.enabled()
    timeline.mark("x", a=1)
    timeline.arm("t-0", ("e",))
    timeline.once("t-0", "e")
    timeline.changed("k", 1, "c")
    assert lines(caplog) == [] and not timeline.armed()
    # nothing was armed while off: turning it on later marks nothing stale
    caplog.set_level(logging.DEBUG, logger="kt.timeline")
    timeline.once("t-0", "e")
    assert lines(caplog) == []


def test_mark_line_format(on: None, caplog: pytest.LogCaptureFixture) -> None:
    timeline.mark("lai_leader", tp="t-0", epoch=3)
    (line,) = lines(caplog)
    m = LINE.match(line)
    assert m is not None, line
    assert m.group(1) == "lai_leader" and m.group(4) == "tp=t-0 epoch=3"


def test_once_marks_each_armed_event_once_per_arming(
    on: None, caplog: pytest.LogCaptureFixture
) -> None:
    timeline.once("t-0", "leader_hw", hw=1)  # not armed: nothing
    assert not timeline.armed()
    timeline.arm("t-0", ("leader_hw", "leader_produce"))
    assert timeline.armed()
    timeline.once("t-0", "leader_hw", hw=5)
    timeline.once("t-0", "leader_hw", hw=6)
    timeline.once("t-1", "leader_hw", hw=7)  # another partition, not armed
    timeline.once("t-0", "leader_produce")
    assert not timeline.armed()  # every armed event was marked
    timeline.once("t-0", "leader_produce")
    timeline.arm("t-0", ("leader_hw",))  # a new role change re-arms
    timeline.once("t-0", "leader_hw", hw=9)
    got = [(LINE.match(x).group(1), LINE.match(x).group(4)) for x in lines(caplog)]  # type: ignore[union-attr]
    assert got == [
        ("leader_hw", "key=t-0 hw=5"),
        ("leader_produce", "key=t-0"),
        ("leader_hw", "key=t-0 hw=9"),
    ]


def test_changed_marks_new_values_only(on: None, caplog: pytest.LogCaptureFixture) -> None:
    for leader in (1, 1, -1, -1, 2, 2, 1):
        timeline.changed("metadata:t-0", leader, "metadata_answer")
    got = [LINE.match(x).group(4) for x in lines(caplog)]  # type: ignore[union-attr]
    assert got == [f"key=metadata:t-0 value={v}" for v in (1, -1, 2, 1)]
