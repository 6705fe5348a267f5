"""The reassignments and preferred-leaders view on the fake cluster: what it lists, the
progress numbers (rate and ETA from successive refreshes), the confirmations of its actions,
and a bad plan file that starts nothing."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import tui_fakes as fakes
from textual.widgets import DataTable

from kt.admin.reassignment import ReplicaProgress
from kt.tui.app import KtApp
from kt.tui.model import History
from kt.tui.screens.dialogs import ConfirmScreen, StartReassignmentForm
from kt.tui.screens.reassignments import ReassignmentsScreen, bar, partition_progress


def _column(table: DataTable[object], index: int) -> list[str]:
    return [str(table.get_row_at(r)[index]).strip() for r in range(table.row_count)]


async def _open(app: KtApp, pilot) -> ReassignmentsScreen:  # type: ignore[no-untyped-def]
    while app.refreshes < 1:
        await pilot.pause(0.01)
    await pilot.press("6", "r")
    await pilot.pause()
    screen = app.screen
    assert isinstance(screen, ReassignmentsScreen)
    return screen


async def _settle(app: KtApp, pilot) -> None:  # type: ignore[no-untyped-def]
    await app.workers.wait_for_complete()
    await pilot.pause()


def test_rate_and_eta_come_from_the_last_two_snapshots() -> None:
    h = History()
    h.add(fakes.reassigning_snapshot(3))
    # one snapshot: sizes, but no rate or ETA yet
    [first, _] = h.reassignment_progress()
    assert (first.partition, first.broker, first.copied, first.total) == (
        "events-0",
        3,
        9_000_000,
        50_000_000,
    )
    assert first.rate is None and first.eta_s is None
    h.add(fakes.reassigning_snapshot(4))  # 2 s later: +3 MB and +1 MB
    e0, e1 = h.reassignment_progress()
    assert e0.copied == 12_000_000 and e0.remaining == 38_000_000
    assert e0.rate == 1_500_000 and e0.eta_s is not None and round(e0.eta_s, 3) == 25.333
    assert e1.rate == 500_000 and e1.eta_s == 32.0
    # a failed refresh in between does not count as a sample
    h.add(fakes.down_snapshot(5))
    assert h.reassignment_progress() == [e0, e1]


def test_rate_spans_the_window_so_bursts_do_not_read_as_a_stall() -> None:
    # a throttled follower: 1 MB in one fetch, then nothing for a while
    h = History()
    for i, copied in enumerate((0, 1_000_000, 1_000_000)):
        snap = fakes.reassigning_snapshot(i)
        row = replace(snap.reassignment_progress[0], copied=copied)
        h.add(replace(snap, reassignment_progress=(row,)))
    [over_window] = h.reassignment_progress()
    assert over_window.rate == 250_000 and over_window.eta_s == 49_000_000 / 250_000
    [last_pair] = h.reassignment_progress(window=1)
    assert last_pair.rate == 0 and last_pair.eta_s is None


def test_partition_progress_sums_adding_replicas() -> None:
    rows = [
        ReplicaProgress("t-0", 4, 300, 1000, 100.0, 7.0),
        ReplicaProgress("t-0", 5, 500, 1000, 50.0, 10.0),
        ReplicaProgress("t-1", 4, 10, 10, None, None),
    ]
    got = partition_progress(rows)
    assert got["t-0"].copied == 800 and got["t-0"].total == 2000
    assert got["t-0"].rate == 150.0 and got["t-0"].eta_s == 10.0  # the slowest
    assert got["t-1"].fraction == 1.0 and got["t-1"].rate is None
    assert bar(0.5, 8) == "████░░░░  50%"


@fakes.run_async
async def test_view_lists_reassignments_throttles_and_imbalance() -> None:
    app = fakes.reassigning_app()
    async with app.run_test(size=(100, 30)) as pilot:
        screen = await _open(app, pilot)
        summary = str(screen.query_one("#reassign-summary").render())
        assert summary == (
            "Reassignments 2   Copied 53.4 MiB of 66.8 MiB   "
            "Throttle 2.0 MiB/s on brokers 1,2,3 (events)"
        )
        moving = screen.query_one("#reassignments", DataTable)
        assert _column(moving, 0) == ["events-0", "events-1"]
        assert _column(moving, 1) == ["2,3,1 +3 -1", "3,1,2 +3 -2"]
        # snapshot 14 after 13: events-0 holds 42 of 50 MB, +3 MB in 2 s
        assert _column(moving, 2) == ["██████░  84%", "█████░░  70%"]
        assert _column(moving, 3) == ["40.1 MiB", "13.4 MiB"]  # copied
        assert _column(moving, 4) == ["7.6 MiB", "5.7 MiB"]  # left: 8 MB, 6 MB
        assert _column(moving, 5) == ["1.4 MiB", "488.3 KiB"]  # 1.5 MB/s, 0.5 MB/s
        assert _column(moving, 6) == ["5s", "12s"]

        snap = app.history.latest_ok
        assert snap is not None
        balance = screen.query_one("#imbalance", DataTable)
        assert _column(balance, 0) == ["1", "2", "3"]
        for row, n in enumerate((1, 2, 3)):
            preferred = [p for p in snap.partitions if p.replicas[0] == n]
            elsewhere = [p for p in preferred if p.leader != n]
            cells = [str(c).strip() for c in balance.get_row_at(row)]
            assert cells[1] == str(sum(1 for p in snap.partitions if p.leader == n))
            assert cells[2:5] == [
                str(len(preferred)),
                str(len(preferred) - len(elsewhere)),
                str(len(elsewhere)),
            ]
            assert cells[5] == f"{100 * len(elsewhere) / len(preferred):.1f}%"
        others = screen.query_one("#not-preferred", DataTable)
        assert list(zip(_column(others, 0), _column(others, 1), strict=True)) == [
            ("audit-log", "0"),
            ("events", "1"),
            ("orders", "2"),
        ]
        assert _column(others, 6) == ["offline", "preferred not in ISR", "possible"]
        title = str(screen.query_one("#leaders-title").render())
        assert title.startswith("Not led by the preferred replica 3")

        await pilot.press("escape")
        await pilot.pause()
        assert "Reassigning 2" in str(app.screen.query_one("#brokers-summary").render())


@fakes.run_async
async def test_nothing_in_progress() -> None:
    app = fakes.fake_app()
    async with app.run_test(size=(100, 30)) as pilot:
        screen = await _open(app, pilot)
        assert str(screen.query_one("#reassign-summary").render()) == (
            "Reassignments none   Throttle none"
        )
        assert screen.query_one("#reassignments", DataTable).row_count == 0
        await pilot.press("c")  # nothing selected: no dialog
        await pilot.pause()
        assert app.screen is screen


@fakes.run_async
async def test_answering_no_does_nothing_and_yes_acts() -> None:
    actions = fakes.FakeActions()
    app = fakes.reassigning_app(actions=actions)
    async with app.run_test(size=(100, 30)) as pilot:
        screen = await _open(app, pilot)
        for key in ("c", "C", "l", "L"):
            await pilot.press(key)
            await _settle(app, pilot)
            assert isinstance(app.screen, ConfirmScreen), key
            await pilot.press("n")
            await pilot.pause()
            assert app.screen is screen
        assert actions.performed == []

        await pilot.press("down", "c")  # the second reassignment
        await _settle(app, pilot)
        confirm = app.screen
        assert isinstance(confirm, ConfirmScreen) and confirm.danger
        text = str(confirm.query_one("#confirm-text").render())
        assert text == "Will cancel reassignments: partitions=[('events', 1)]."
        await pilot.press("y")
        await _settle(app, pilot)
        assert actions.performed == [("cancel_reassignments", {"partitions": [("events", 1)]})]

        # elect: the partition under the cursor of the focused table, else the first
        # one not led by its preferred replica
        await pilot.press("tab", "tab")
        await pilot.pause()
        assert app.focused is screen.query_one("#not-preferred")
        await pilot.press("down", "down", "l")
        await _settle(app, pilot)
        await pilot.press("y")
        await _settle(app, pilot)
        await pilot.press("L")
        await _settle(app, pilot)
        await pilot.press("y")
        await _settle(app, pilot)
        assert actions.performed[1:] == [
            ("elect_preferred_leaders", {"partitions": [("orders", 2)]}),
            ("elect_preferred_leaders", {"partitions": None}),
        ]


@fakes.run_async
async def test_bad_plan_file_stays_in_the_dialog_and_starts_nothing(tmp_path: Path) -> None:
    actions = fakes.FakeActions()
    app = fakes.reassigning_app(actions=actions)
    bad_json = tmp_path / "bad.json"
    bad_json.write_text("{oops")
    unknown_broker = tmp_path / "broker9.json"
    entry = {"topic": "orders", "partition": 0, "replicas": [2, 9]}
    unknown_broker.write_text(json.dumps({"version": 1, "partitions": [entry]}))
    unknown_partition = tmp_path / "orders9.json"
    unknown_partition.write_text(
        '{"version":1,"partitions":[{"topic":"orders","partition":9,"replicas":[1]}]}'
    )
    good = tmp_path / "plan.json"
    good.write_text(
        '{"version":1,"partitions":[{"topic":"orders","partition":0,"replicas":[2,3,1]}]}'
    )
    async with app.run_test(size=(100, 30)) as pilot:
        await _open(app, pilot)
        await pilot.press("e")
        await pilot.pause()
        form = app.screen
        assert isinstance(form, StartReassignmentForm)
        path = form.query_one("#f-path")
        error = form.query_one("#form-error")
        cases = [
            ("", "plan file: required"),
            (str(tmp_path / "missing.json"), "plan file: No such file or directory: "),
            (str(bad_json), "reassignment file is not valid JSON: "),
            (str(unknown_broker), "The proposed assignment contains non-existent brokerIDs: 9"),
            (
                str(unknown_partition),
                "The proposed assignment contains non-existent partitions: orders-9",
            ),
        ]
        for value, message in cases:
            path.value = value  # type: ignore[attr-defined]
            form.submit()
            await pilot.pause()
            assert app.screen is form
            assert str(error.render()).startswith(message), str(error.render())
        path.value = str(good)  # type: ignore[attr-defined]
        form.query_one("#f-throttle").value = "lots"  # type: ignore[attr-defined]
        form.submit()
        await pilot.pause()
        assert str(error.render()) == "throttle: bytes per second, a whole number"
        assert actions.performed == []

        form.query_one("#f-throttle").value = "20000"  # type: ignore[attr-defined]
        form.submit()
        await _settle(app, pilot)
        assert isinstance(app.screen, ConfirmScreen)
        await pilot.press("y")
        await _settle(app, pilot)
        assert actions.performed == [
            (
                "start_reassignment",
                {"plan": {("orders", 0): [2, 3, 1]}, "throttle": 20000, "source": str(good)},
            )
        ]
