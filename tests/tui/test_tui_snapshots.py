"""Snapshot tests of every screen (pytest-textual-snapshot) on the fake cluster.

The SVGs under __snapshots__/ are the reference; after an intended change to a
screen, regenerate them with `pytest tests/tui --snapshot-update` and look at the
report before committing.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence

import pytest
import tui_fakes as fakes
from textual.pilot import Pilot

from kt.tui.screens.messages import MessagesScreen


async def _settle(pilot: Pilot[None]) -> None:
    while getattr(pilot.app, "refreshes", 1) < 1:
        await pilot.pause(0.01)
    await pilot.pause()


def _keys(*keys: str) -> Callable[[Pilot[None]], Awaitable[None]]:
    async def run(pilot: Pilot[None]) -> None:
        await _settle(pilot)
        for k in keys:
            await pilot.press(k)
            await pilot.pause()
        await pilot.app.workers.wait_for_complete()  # e.g. an action's description
        await pilot.pause()

    return run


async def _messages(pilot: Pilot[None]) -> None:
    await _settle(pilot)
    await pilot.press("5")
    await pilot.pause()
    screen = pilot.app.screen
    assert isinstance(screen, MessagesScreen)
    screen.query_one("#msg-topic").value = "orders"  # type: ignore[attr-defined]
    screen.state = "orders-0 from offset 41000"
    screen.add_records(fakes.records())
    screen.action_focus_table()
    await pilot.press("up", "up", "f")
    screen.show_state()
    await pilot.pause()


SCREENS: Sequence[tuple[str, Callable[[Pilot[None]], Awaitable[None]]]] = [
    ("overview", _keys()),
    ("topics", _keys("2")),
    ("topics_sorted_by_size", _keys("2", "s", "s", "s")),
    ("topics_filtered", _keys("2", "slash", "p", "a", "y", "enter")),
    ("topic_detail", _keys("2", "down", "enter")),
    ("groups", _keys("3")),
    ("group_detail", _keys("3", "down", "enter")),
    ("log_dirs", _keys("4")),
    ("messages", _messages),
    ("brokers", _keys("6")),
    ("help", _keys("question_mark")),
    ("create_topic_form", _keys("2", "c", "n", "e", "w", "tab", "3")),
    ("confirm_delete", _keys("2", "down", "d")),
]


@pytest.mark.parametrize(("name", "run_before"), SCREENS, ids=[n for n, _ in SCREENS])
def test_screen(snap_compare, name: str, run_before) -> None:  # type: ignore[no-untyped-def]
    assert snap_compare(fakes.fake_app(), run_before=run_before, terminal_size=(80, 24))


def test_overview_light_theme(snap_compare) -> None:  # type: ignore[no-untyped-def]
    app = fakes.fake_app(theme="textual-light")
    assert snap_compare(app, run_before=_keys(), terminal_size=(80, 24))


def test_topic_detail_light_theme(snap_compare) -> None:  # type: ignore[no-untyped-def]
    app = fakes.fake_app(theme="textual-light")
    assert snap_compare(app, run_before=_keys("2", "down", "enter"), terminal_size=(80, 24))


def test_overview_large_terminal(snap_compare) -> None:  # type: ignore[no-untyped-def]
    assert snap_compare(fakes.fake_app(), run_before=_keys(), terminal_size=(140, 40))


def test_cluster_unreachable(snap_compare) -> None:  # type: ignore[no-untyped-def]
    # the last refresh failed: the status line says so, the data is the last good one
    assert snap_compare(fakes.fake_app(down=True), run_before=_keys(), terminal_size=(80, 24))


def test_reassignments(snap_compare) -> None:  # type: ignore[no-untyped-def]
    # topic events moving to broker 3 under a 2 MiB/s throttle; leaders not preferred
    app = fakes.reassigning_app()
    assert snap_compare(app, run_before=_keys("6", "r"), terminal_size=(80, 24))


def test_reassignments_cancel_confirmation(snap_compare) -> None:  # type: ignore[no-untyped-def]
    app = fakes.reassigning_app()
    assert snap_compare(app, run_before=_keys("6", "r", "C"), terminal_size=(80, 24))


def test_transactions(snap_compare) -> None:  # type: ignore[no-untyped-def]
    # billing-txn open for 2m03s, past its 15 s timeout: highlighted
    app = fakes.transactions_app()
    assert snap_compare(app, run_before=_keys("6", "t"), terminal_size=(80, 24))


def test_topic_detail_open_transactions(snap_compare) -> None:  # type: ignore[no-untyped-def]
    app = fakes.transactions_app()

    async def run(pilot: Pilot[None]) -> None:
        await _settle(pilot)
        app.open_topic("orders")
        await pilot.pause()

    assert snap_compare(app, run_before=run, terminal_size=(100, 30))
