"""The brokers view and the overview's health line, on the fake cluster."""

from __future__ import annotations

from dataclasses import replace

import tui_fakes as fakes
from textual.widgets import DataTable

from kt.tui.app import KtApp
from kt.tui.model import PartitionInfo
from kt.tui.screens.brokers import BrokersScreen


def _column(table: DataTable[object], index: int) -> list[str]:
    return [str(table.get_row_at(r)[index]) for r in range(table.row_count)]


async def _started(app: KtApp, pilot) -> None:  # type: ignore[no-untyped-def]
    while app.refreshes < 1:
        await pilot.pause(0.01)
    await pilot.pause()


@fakes.run_async
async def test_health_line_keeps_counts_and_labels_apart() -> None:
    app = fakes.fake_app()
    async with app.run_test(size=(80, 24)) as pilot:
        await _started(app, pilot)
        text = str(app.screen.query_one("#counts").render())
        assert text.splitlines()[1].rstrip() == (
            "Under-replicated 2   Under-min-ISR 1   Offline 1   Not preferred leader 1"
        )


@fakes.run_async
async def test_brokers_view() -> None:
    app = fakes.fake_app()
    async with app.run_test(size=(100, 30)) as pilot:
        await _started(app, pilot)
        await pilot.press("6")
        await pilot.pause()
        assert isinstance(app.screen, BrokersScreen)
        summary = str(app.screen.query_one("#brokers-summary").render())
        assert summary == "Live brokers 3   Controller 1   Under-replicated 2   Offline 1"
        table = app.screen.query_one("#broker-list", DataTable)
        assert _column(table, 0) == ["1", "2", "3"]
        assert _column(table, 2) == ["a", "b", "c"]  # racks
        assert _column(table, 3) == ["yes", "", ""]  # the controller
        snap = app.history.latest_ok
        assert snap is not None
        led = [sum(1 for p in snap.partitions if p.leader == n) for n in (1, 2, 3)]
        hosted = [sum(1 for p in snap.partitions if n in p.replicas) for n in (1, 2, 3)]
        assert _column(table, 4) == [str(n) for n in led]
        assert _column(table, 5) == [str(n) for n in hosted]
        parts = app.screen.query_one("#unhealthy-partitions", DataTable)
        assert _column(parts, 0) == ["orders", "audit-log"]
        assert _column(parts, 2) == ["under-replicated", "OFFLINE"]
        assert _column(parts, 3) == ["2", "none"]


def _shrunk(p: PartitionInfo) -> PartitionInfo:
    # broker 3 died: it leaves every ISR, and partitions it led lose their leader
    isr = tuple(r for r in p.isr if r != 3)
    leader = -1 if p.leader == 3 else p.leader
    offline = tuple(r for r in p.replicas if r == 3)
    return replace(p, isr=isr, leader=leader, offline_replicas=offline)


@fakes.run_async
async def test_brokers_view_follows_isr_changes() -> None:
    first = fakes.make_snapshot(0)
    topics = tuple(
        replace(t, partitions=tuple(_shrunk(p) for p in t.partitions)) for t in first.topics
    )
    second = replace(fakes.make_snapshot(1), brokers=first.brokers[:2], topics=topics)
    app = KtApp(fakes.FakeSampler([first, second]), bootstrap="x:1", interval=3600)
    async with app.run_test(size=(100, 30)) as pilot:
        await _started(app, pilot)
        await pilot.press("6")
        await pilot.pause()
        table = app.screen.query_one("#broker-list", DataTable)
        assert _column(table, 1) == ["up", "up", "up"]
        app.refresh_now()
        while app.refreshes < 2:
            await pilot.pause(0.01)
        await pilot.pause()
        assert _column(table, 1) == ["up", "up", "DOWN"]
        assert "Down 3" in str(app.screen.query_one("#brokers-summary").render())
        parts = app.screen.query_one("#unhealthy-partitions", DataTable)
        want = sum(1 for p in second.partitions if p.under_replicated or p.offline)
        assert parts.row_count == want > 2


@fakes.run_async
async def test_unhealthy_internal_partitions_come_last() -> None:
    snap = fakes.make_snapshot(0)
    orders = next(t for t in snap.topics if t.name == "orders")
    offsets = replace(
        orders,
        name="__consumer_offsets",
        internal=True,
        partitions=tuple(replace(p, topic="__consumer_offsets") for p in orders.partitions),
    )
    app = KtApp(
        fakes.FakeSampler([replace(snap, topics=(offsets, *snap.topics))]),
        bootstrap="x:1",
        interval=3600,
    )
    async with app.run_test(size=(100, 30)) as pilot:
        await _started(app, pilot)
        await pilot.press("6")
        await pilot.pause()
        parts = app.screen.query_one("#unhealthy-partitions", DataTable)
        assert _column(parts, 0) == ["orders", "audit-log", "__consumer_offsets"]
