"""The TUI against a live `kt broker`: screens fill from the real sampler, the
Messages screen shows produced records and tails new ones, consumer lag grows
while producing and shrinks while consuming, a topic created from the TUI is
visible to `kt topic list`, and a lost broker shows and is reconnected to."""

from __future__ import annotations

import asyncio
import subprocess
import time
from collections.abc import Callable

import pytest
import tui_fakes as fakes
from broker_harness import KT
from textual.widgets import DataTable, Input

from kt.client import KafkaClient, NewTopic, RecordSpec
from kt.tui.actions import ClusterActions
from kt.tui.app import KtApp
from kt.tui.sampler import ClusterSampler
from kt.tui.screens.dialogs import ConfirmScreen
from kt.tui.screens.messages import MessagesScreen
from kt.tui.widgets.status import StatusBar

pytestmark = pytest.mark.integration


def _app(bootstrap: str, interval: float = 0.3) -> KtApp:
    return KtApp(
        ClusterSampler(bootstrap, request_timeout=2.0),
        bootstrap=bootstrap,
        interval=interval,
        client_factory=lambda: KafkaClient(
            bootstrap, client_id="kt-tui-test", request_timeout=5, connect_timeout=2
        ),
        actions=ClusterActions(bootstrap, request_timeout=5.0),
    )


async def _until(pilot, cond: Callable[[], bool], what: str, timeout: float = 15.0) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await pilot.pause(0.05)


def _group_lag(app: KtApp, group: str) -> int | None:
    snap = app.history.latest_ok
    g = snap.group(group) if snap else None
    return g.total_lag if g else None


async def _produce(c: KafkaClient, topic: str, partition: int, n: int, tag: str) -> None:
    recs = [RecordSpec(f"k{i}".encode(), f'{{"{tag}": {i}}}'.encode()) for i in range(n)]
    await c.produce(topic, partition, recs)


@fakes.run_async
async def test_screens_messages_and_lag(kt_broker) -> None:  # type: ignore[no-untyped-def]
    bs = kt_broker.bootstrap
    async with KafkaClient(bs) as c:
        await c.create_topics([NewTopic("events", 2, 1)])
        await _produce(c, "events", 0, 20, "first")
        await c.commit_offsets("watchers", {("events", 0): 0, ("events", 1): 0})
        app = _app(bs)
        async with app.run_test(size=(100, 30)) as pilot:
            await _until(pilot, lambda: _group_lag(app, "watchers") == 20, "lag 20")
            # every screen shows the live cluster
            brokers = app.screen.query_one("#brokers", DataTable)
            await _until(pilot, lambda: brokers.row_count == 1, "the broker row")
            await pilot.press("2")
            await pilot.pause()
            topics = app.screen.query_one("#topics", DataTable)
            assert "events" in [str(topics.get_row_at(r)[0]) for r in range(topics.row_count)]
            await pilot.press("4")
            await pilot.pause()
            assert app.screen.query_one("#logdirs", DataTable).row_count >= 1

            # Messages: the produced records, then new ones as they arrive
            app.open_messages("events", 0)
            await pilot.pause()
            screen = app.screen
            assert isinstance(screen, MessagesScreen)
            table = screen.query_one("#records", DataTable)
            await _until(pilot, lambda: table.row_count == 20, "20 records")
            assert str(table.get_row_at(0)[3]) == '{"first": 0}'
            await _produce(c, "events", 0, 5, "second")
            await _until(pilot, lambda: table.row_count == 25, "tailed records")
            screen.query_one("#msg-from", Input).value = "22"  # jump to an offset
            screen.start()
            await _until(pilot, lambda: table.row_count == 3, "records from offset 22")

            # lag grows while producing...
            await pilot.press("3")
            await pilot.pause()
            for _ in range(4):
                await _produce(c, "events", 1, 10, "more")
                await pilot.pause(0.35)
            await _until(pilot, lambda: _group_lag(app, "watchers") == 65, "lag 65")
            groups = app.screen.query_one("#groups", DataTable)
            await _until(pilot, lambda: str(groups.get_row_at(0)[4]) == "65", "lag in the table")
            # ...and shrinks while consuming (fetch and commit, step by step)
            pos = {("events", 0): 0, ("events", 1): 0}
            for _ in range(6):
                got = await c.fetch(dict(pos), partition_max_bytes=200)
                for tp, res in got.items():
                    pos[tp] = res.next_offset
                await c.commit_offsets("watchers", pos)
                await pilot.pause(0.35)
            while any(r.records for r in (await c.fetch(dict(pos), max_wait_ms=10)).values()):
                for tp, res in (await c.fetch(dict(pos), max_wait_ms=10)).items():
                    pos[tp] = res.next_offset
            await c.commit_offsets("watchers", pos)
            await _until(pilot, lambda: _group_lag(app, "watchers") == 0, "lag 0")
            trend = app.history.group_lag_series("watchers")
            peak = trend.index(max(trend))
            assert max(trend) >= 65 and trend[-1] == 0
            assert any(b < a for a, b in zip(trend[peak:], trend[peak + 1 :]))  # went down
            assert app.history.group_lag_seconds("watchers") == 0.0
            await app.close_sampler()


@fakes.run_async
async def test_topic_created_from_tui_is_listed(kt_broker) -> None:  # type: ignore[no-untyped-def]
    bs = kt_broker.bootstrap
    app = _app(bs)
    async with app.run_test(size=(80, 24)) as pilot:
        await _until(pilot, lambda: app.history.latest_ok is not None, "first refresh")
        await pilot.press("2", "c")
        await pilot.pause()
        for ch in "made-in-tui":
            await pilot.press(ch)
        await pilot.press("enter", "3", "enter", "enter", "enter")
        await _until(pilot, lambda: isinstance(app.screen, ConfirmScreen), "confirmation")
        text = str(app.screen.query_one("#confirm-text").render())
        assert "made-in-tui" in text
        await pilot.press("y")
        await _until(
            pilot,
            lambda: (
                app.history.latest_ok is not None
                and app.history.latest_ok.topic("made-in-tui") is not None
            ),
            "the new topic in a snapshot",
        )
        info = app.history.latest_ok.topic("made-in-tui")  # type: ignore[union-attr]
        assert info is not None and len(info.partitions) == 3
        await app.close_sampler()
    out = subprocess.run(
        [KT, "topic", "list", "-b", bs], capture_output=True, text=True, timeout=30, check=True
    )
    assert "made-in-tui" in out.stdout.split()


@fakes.run_async
async def test_lost_broker_shows_and_reconnects(kt_broker) -> None:  # type: ignore[no-untyped-def]
    app = _app(kt_broker.bootstrap, interval=0.3)
    async with app.run_test(size=(80, 24)) as pilot:
        await _until(pilot, lambda: app.history.latest_ok is not None, "first refresh")
        bar = app.screen.query_one(StatusBar)
        await asyncio.to_thread(kt_broker.stop)
        await _until(pilot, lambda: bar.has_class("-error"), "the outage in the status line")
        assert "UNREACHABLE" in str(bar.render())
        await asyncio.to_thread(kt_broker.start)
        await _until(pilot, lambda: not bar.has_class("-error"), "reconnection", timeout=20)
        assert app.history.latest is not None and app.history.latest.error is None
        await app.close_sampler()
