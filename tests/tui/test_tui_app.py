"""The app driven by Textual's pilot on the fake cluster: navigation, sorting and
filtering, pause and interval, outages, and every action's form -> confirmation ->
action path (against a fake ClusterActions)."""

from __future__ import annotations

import asyncio
import sys

import tui_fakes as fakes
from textual.widgets import DataTable, Input, Select

from kt.tui.app import KtApp
from kt.tui.model import History
from kt.tui.screens.dialogs import ConfirmScreen, parse_configs, parse_when
from kt.tui.screens.group_detail import GroupDetailScreen
from kt.tui.screens.groups import GroupsScreen
from kt.tui.screens.help import HelpScreen
from kt.tui.screens.logdirs import LogDirsScreen
from kt.tui.screens.messages import MessagesScreen, parse_start
from kt.tui.screens.overview import OverviewScreen
from kt.tui.screens.topic_detail import TopicDetailScreen
from kt.tui.screens.topics import TopicsScreen
from kt.tui.widgets.payload import as_hex, as_json, one_line
from kt.tui.widgets.status import StatusBar


def _column(table: DataTable[object], index: int) -> list[str]:
    return [str(table.get_row_at(r)[index]) for r in range(table.row_count)]


async def _started(app: KtApp, pilot) -> None:  # type: ignore[no-untyped-def]
    while app.refreshes < 1:
        await pilot.pause(0.01)
    await pilot.pause()


@fakes.run_async
async def test_navigates_every_screen() -> None:
    app = fakes.fake_app()
    async with app.run_test(size=(80, 24)) as pilot:
        await _started(app, pilot)
        assert isinstance(app.screen, OverviewScreen)
        for key, kind in (
            ("2", TopicsScreen),
            ("3", GroupsScreen),
            ("4", LogDirsScreen),
            ("5", MessagesScreen),
            ("question_mark", HelpScreen),
            ("1", OverviewScreen),
        ):
            await pilot.press("escape", key)  # escape leaves an input that has focus
            await pilot.pause()
            assert isinstance(app.screen, kind), key
        await pilot.press("2", "down", "enter")
        await pilot.pause()
        assert isinstance(app.screen, TopicDetailScreen)
        assert app.screen.topic == "orders"
        table = app.screen.query_one("#partitions", DataTable)
        assert table.row_count == 6
        leaders = _column(table, 1)
        assert leaders[2] == "1 !"  # led by replica 1, preferred is 3
        await pilot.press("escape", "3", "down", "enter")
        await pilot.pause()
        assert isinstance(app.screen, GroupDetailScreen)
        assert app.screen.group_id == "billing"
        assert app.screen.query_one("#lags", DataTable).row_count == 6
        assert app.screen.query_one("#members", DataTable).row_count == 2


@fakes.run_async
async def test_topics_sort_and_filter() -> None:
    app = fakes.fake_app()
    async with app.run_test(size=(80, 24)) as pilot:
        await _started(app, pilot)
        await pilot.press("2")
        await pilot.pause()
        table = app.screen.query_one("#topics", DataTable)
        assert _column(table, 0) == ["audit-log", "orders", "payments"]
        await pilot.press("s")  # partitions, biggest first
        await pilot.pause()
        assert _column(table, 0) == ["orders", "payments", "audit-log"]
        await pilot.press("S")
        await pilot.pause()
        assert _column(table, 0) == ["audit-log", "payments", "orders"]
        await pilot.press("i")  # internal topics too
        await pilot.pause()
        assert "__consumer_offsets" in _column(table, 0)
        await pilot.press("slash", "o", "r", "d", "enter")
        await pilot.pause()
        assert _column(table, 0) == ["orders"]
        await pilot.press("slash", "backspace", "backspace", "backspace", "^", "p", "a")
        await pilot.pause()
        assert _column(table, 0) == ["payments"]


@fakes.run_async
async def test_pause_interval_and_refresh() -> None:
    sampler = fakes.FakeSampler([fakes.make_snapshot(i) for i in range(3)])
    app = KtApp(sampler, bootstrap="x:1", interval=0.2, history=History())
    async with app.run_test(size=(80, 24)) as pilot:
        while app.refreshes < 3:
            await pilot.pause(0.05)
        await pilot.press("p")
        await pilot.pause(0.3)
        frozen = app.refreshes
        await pilot.pause(0.6)
        assert app.refreshes == frozen
        status = str(app.screen.query_one(StatusBar).render())
        assert "paused" in status
        await pilot.press("f5")  # refresh now works while paused
        while app.refreshes == frozen:
            await pilot.pause(0.05)
        await pilot.press("minus")
        assert app.interval == 0.5
        await pilot.press("plus", "plus")
        assert app.interval == 0.5  # 0.5 is the fastest
        await pilot.press("p")
        assert not app.paused


@fakes.run_async
async def test_outage_and_reconnect() -> None:
    snaps = [fakes.make_snapshot(0), fakes.down_snapshot(1), fakes.make_snapshot(2)]
    sampler = fakes.FakeSampler(snaps)
    app = KtApp(sampler, bootstrap=fakes.BOOTSTRAP, interval=3600, history=History())
    async with app.run_test(size=(80, 24)) as pilot:
        await _started(app, pilot)
        app.refresh_now()
        while app.refreshes < 2:
            await pilot.pause(0.01)
        await pilot.pause()
        bar = app.screen.query_one(StatusBar)
        assert bar.has_class("-error")
        assert "UNREACHABLE" in str(bar.render())
        brokers = app.screen.query_one("#brokers", DataTable)
        assert _column(brokers, 1) == ["unreachable"] * 3  # last good data, marked
        app.refresh_now()
        while app.refreshes < 3:
            await pilot.pause(0.01)
        await pilot.pause()
        assert not bar.has_class("-error")
        assert _column(brokers, 1) == ["up"] * 3


@fakes.run_async
async def test_lost_broker_is_shown() -> None:
    first = fakes.make_snapshot(0)
    from dataclasses import replace

    second = replace(fakes.make_snapshot(1), brokers=first.brokers[:2])
    app = KtApp(fakes.FakeSampler([first, second]), bootstrap="x:1", interval=3600)
    async with app.run_test(size=(80, 24)) as pilot:
        await _started(app, pilot)
        app.refresh_now()
        while app.refreshes < 2:
            await pilot.pause(0.01)
        await pilot.pause()
        table = app.screen.query_one("#brokers", DataTable)
        assert _column(table, 1) == ["up", "up", "LOST"]
        # a lost broker's load is unknown, not its last numbers
        assert [_column(table, i)[2] for i in (5, 6, 7)] == ["-", "-", "-"]
        assert _column(table, 5)[:2] != ["-", "-"]


async def _confirm(app: KtApp, pilot) -> ConfirmScreen:  # type: ignore[no-untyped-def]
    for _ in range(100):
        if isinstance(app.screen, ConfirmScreen):
            return app.screen
        await pilot.pause(0.02)
    raise AssertionError(f"no confirmation dialog, screen is {app.screen}")


@fakes.run_async
async def test_actions_ask_then_act() -> None:
    actions = fakes.FakeActions()
    app = fakes.fake_app(actions=actions)
    async with app.run_test(size=(80, 24)) as pilot:
        await _started(app, pilot)
        await pilot.press("2", "c")
        await pilot.pause()
        for ch in "audit-2":
            await pilot.press(ch)
        await pilot.press("enter", "3", "enter", "enter")
        for ch in "retention.ms=1000":
            await pilot.press(ch)
        await pilot.press("enter")
        confirm = await _confirm(app, pilot)
        text = str(confirm.query_one("#confirm-text").render())
        assert "create topic" in text and "audit-2" in text
        assert actions.performed == []  # nothing before yes
        await pilot.press("y")
        await pilot.pause(0.1)
        assert actions.performed == [
            (
                "create_topic",
                {
                    "name": "audit-2",
                    "partitions": 3,
                    "replication_factor": -1,
                    "configs": {"retention.ms": "1000"},
                },
            )
        ]

        # delete: No is the default, Enter on it does nothing
        await pilot.press("down", "d")
        await _confirm(app, pilot)
        await pilot.press("enter")
        await pilot.pause(0.1)
        assert len(actions.performed) == 1
        await pilot.press("d")
        await _confirm(app, pilot)
        await pilot.press("y")
        await pilot.pause(0.1)
        assert actions.performed[-1] == ("delete_topic", {"name": "orders"})

        await pilot.press("a")  # orders has 6 partitions: the form proposes 7
        await pilot.pause()
        await pilot.press("enter")
        await _confirm(app, pilot)
        await pilot.press("y")
        await pilot.pause(0.1)
        assert actions.performed[-1] == ("add_partitions", {"topic": "orders", "total": 7})

        await pilot.press("e")
        await pilot.pause()
        for ch in "retention.ms":
            await pilot.press(ch)
        await pilot.press("enter", "enter")  # empty value: delete the override
        await _confirm(app, pilot)
        await pilot.press("y")
        await pilot.pause(0.1)
        assert actions.performed[-1] == (
            "alter_topic_config",
            {"topic": "orders", "key": "retention.ms", "value": None},
        )

        await pilot.press("3", "r")  # analytics: the first group
        await pilot.pause()
        app.screen.query_one("#f-target", Select).value = "offset"
        app.screen.query_one("#f-value", Input).value = "42"
        await pilot.click("#ok")
        await _confirm(app, pilot)
        await pilot.press("y")
        await pilot.pause(0.1)
        assert actions.performed[-1] == (
            "reset_offsets",
            {"group_id": "analytics", "to": "offset", "value": 42, "topics": ["payments"]},
        )


@fakes.run_async
async def test_form_validation_and_refusal() -> None:
    class Refusing(fakes.FakeActions):
        async def describe_delete_topic(self, name: str) -> fakes.Outcome:
            return fakes.Outcome(False, f"{name!r} is an internal topic")

    actions = Refusing()
    app = fakes.fake_app(actions=actions)
    async with app.run_test(size=(80, 24)) as pilot:
        await _started(app, pilot)
        await pilot.press("2", "a")
        await pilot.pause()
        app.screen.query_one("#f-count", Input).value = "1"  # audit-log has 1 already
        await pilot.press("enter")
        await pilot.pause()
        assert "more than 1" in str(app.screen.query_one("#form-error").render())
        await pilot.press("escape")
        await pilot.press("d")
        await pilot.pause(0.2)
        assert not isinstance(app.screen, ConfirmScreen)  # refused: no dialog
        assert actions.performed == []


@fakes.run_async
async def test_help_lists_every_binding() -> None:
    app = fakes.fake_app()
    async with app.run_test(size=(80, 24)) as pilot:
        await _started(app, pilot)
        await pilot.press("f1")
        await pilot.pause()
        text = str(app.screen.query_one("#help-text").render())
        for screen in (KtApp, TopicsScreen, TopicDetailScreen, GroupsScreen, MessagesScreen):
            for b in screen.BINDINGS:
                assert b.description in text  # type: ignore[union-attr]


@fakes.run_async
async def test_messages_screen_formats_and_filters() -> None:
    app = fakes.fake_app()
    async with app.run_test(size=(100, 30)) as pilot:
        await _started(app, pilot)
        await pilot.press("5")
        await pilot.pause()
        screen = app.screen
        assert isinstance(screen, MessagesScreen)
        assert screen.query_one("#msg-topic", Input).value == "orders"  # the busiest
        screen.add_records(fakes.records())
        table = screen.query_one("#records", DataTable)
        assert table.row_count == 12
        screen.query_one("#msg-key", Input).value = "customer-1"
        await pilot.pause()
        assert _column(table, 0) == ["41001", "41005", "41009"]
        screen.action_focus_table()
        await pilot.press("f", "f")  # hex
        await pilot.pause()
        assert screen.format == "hex"
        assert _column(table, 3)[0].startswith("7b 22")


def test_parsing_helpers() -> None:
    assert parse_start("") == ("back", 100)
    assert parse_start("-5") == ("back", 5)
    assert parse_start("17") == ("offset", 17)
    assert parse_start("earliest") == ("earliest", 0)
    assert parse_start("@1700000000000") == ("time", 1_700_000_000_000)
    assert parse_start("2026-01-01T10:00:00Z") == ("time", 1_767_261_600_000)
    assert parse_when("2026-01-01T10:00:00+00:00") == 1_767_261_600_000
    assert parse_configs("a=1, b = 2") == {"a": "1", "b": "2"}
    assert as_json(b'{"a":[1,2]}') == '{\n  "a": [\n    1,\n    2\n  ]\n}'
    assert as_json(b"not json") == "not json"
    assert as_hex(b"AB\x00").startswith("00000000  41 42 00")
    assert one_line(b"x" * 100, "text", 10) == "xxxxxxxxx…"


def test_sampler_may_be_synchronous() -> None:
    class SyncSampler:
        def __init__(self) -> None:
            self.closed = False

        def sample(self):  # type: ignore[no-untyped-def]
            return fakes.make_snapshot(0)

        def close(self) -> None:
            self.closed = True

    sampler = SyncSampler()

    async def go() -> None:
        app = KtApp(sampler, bootstrap="x:1", interval=3600)
        async with app.run_test() as pilot:
            await _started(app, pilot)
            assert app.history.latest is not None
            await app.close_sampler()

    asyncio.run(go())
    assert sampler.closed


@fakes.run_async
async def test_each_screen_draws_once_when_mounted(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """Textual calls every class's on_mount along the MRO, the base screen's too: a
    screen calling super().on_mount() as well drew itself twice on every mount."""
    from kt.tui.screens.base import DashboardScreen
    from kt.tui.screens.brokers import BrokersScreen
    from kt.tui.screens.reassignments import ReassignmentsScreen
    from kt.tui.screens.transactions import TransactionsScreen

    draws: dict[int, int] = {}
    original = DashboardScreen.redraw

    def counting(self: DashboardScreen) -> None:
        caller = sys._getframe(1).f_code.co_name
        if caller == "on_mount":
            draws[id(self)] = draws.get(id(self), 0) + 1
        original(self)

    monkeypatch.setattr(DashboardScreen, "redraw", counting)
    app = fakes.fake_app()
    seen: set[type] = set()
    async with app.run_test(size=(100, 30)) as pilot:
        await _started(app, pilot)
        seen.add(type(app.screen))
        for keys in (("2",), ("3",), ("4",), ("5",), ("6",), ("2", "down", "enter"),
                     ("3", "down", "enter")):  # fmt: skip
            await pilot.press("escape", *keys)
            await pilot.pause()
            seen.add(type(app.screen))
        for screen in (ReassignmentsScreen(), TransactionsScreen()):
            await app.push_screen(screen)
            await pilot.pause()
            seen.add(type(app.screen))
    assert {BrokersScreen, TopicDetailScreen, GroupDetailScreen, MessagesScreen,
            ReassignmentsScreen, TransactionsScreen} <= seen  # fmt: skip
    assert draws, "no screen drew on mount"
    assert set(draws.values()) == {1}, draws
