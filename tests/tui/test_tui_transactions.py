"""Transactions in the TUI on the fake cluster: the transactions view (durations, the
long-running ones highlighted), the open transactions of a topic in its detail (age,
LSO lag), the ages computed as Kafka's tools compute them, and the app telling the
sampler which topic is on view."""

from __future__ import annotations

import tui_fakes as fakes
from rich.text import Text
from textual.widgets import DataTable

from kt.tui.app import KtApp
from kt.tui.model import OpenTransaction, PartitionInfo, TransactionInfo
from kt.tui.screens.topic_detail import TopicDetailScreen
from kt.tui.screens.transactions import TransactionsScreen, partitions_text
from kt.tui.widgets.format import tone


def _column(table: DataTable[object], index: int) -> list[str]:
    return [str(table.get_row_at(r)[index]).strip() for r in range(table.row_count)]


def _is_error(app: KtApp, cell: object) -> bool:
    assert isinstance(cell, Text)
    return cell.style == tone(app, cell.plain, "error").style


async def _first_refresh(app: KtApp, pilot) -> None:  # type: ignore[no-untyped-def]
    while app.refreshes < 1:
        await pilot.pause(0.01)
    await pilot.pause()


def test_duration_and_long_running() -> None:
    t = TransactionInfo("a", 1, 7, 0, "Ongoing", 20_000, 1_000, (("x", 0),))
    assert t.duration_ms(6_000) == 5_000
    assert not t.long_running(21_000)  # 20 s: at its timeout, not past it
    assert t.long_running(21_001)
    # a threshold shorter than its timeout wins
    assert t.long_running(6_001, threshold_ms=5_000)
    idle = TransactionInfo("b", 1, 8, -1, "Empty", -1, -1)
    assert idle.duration_ms(10**12) == -1 and not idle.long_running(10**12)


def test_age_is_now_minus_the_last_timestamp() -> None:
    # kafka-transactions.sh find-hanging: now - lastTimestamp (DescribeProducers
    # has no start time)
    o = OpenTransaction("t", 0, 7, 0, 1, first_offset=40, last_timestamp=10_000)
    assert o.age_ms(70_000) == 60_000
    assert o.age_ms(9_000) == 0  # a clock behind the broker's: no negative age
    assert OpenTransaction("t", 0, 7, 0, 1, 40, -1).age_ms(5) == -1


def test_lso_lag() -> None:
    p = PartitionInfo("t", 0, 1, 0, (1,), (1,), (), 0, 150, 10, last_stable_offset=100)
    assert p.lso_lag == 50
    unknown = PartitionInfo("t", 0, 1, 0, (1,), (1,), (), 0, 150, 10)
    assert unknown.lso_lag == -1


def test_partitions_text() -> None:
    parts = tuple(("o", p) for p in range(5))
    assert partitions_text(parts) == "o-0,o-1,o-2 +2"
    assert partitions_text(parts[:2]) == "o-0,o-1"
    assert partitions_text(()) == "-"


@fakes.run_async
async def test_transactions_view_longest_first_and_overdue_highlighted() -> None:
    app = fakes.transactions_app()
    async with app.run_test(size=(120, 30)) as pilot:
        await _first_refresh(app, pilot)
        await pilot.press("6", "t")
        await pilot.pause()
        screen = app.screen
        assert isinstance(screen, TransactionsScreen)
        summary = str(screen.query_one("#txn-summary").render())
        assert summary == (
            "Transactional ids 4   Ongoing 2   Long-running 1 (over timeout or 1m00s)"
        )
        table = screen.query_one("#transactions", DataTable)
        # snapshot 14 is T0 + 28 s: billing-txn started 95 s before T0, orders-writer-1
        # 10 s after it
        assert _column(table, 0) == ["billing-txn", "orders-writer-1", "legacy-tx", "payments-tx"]
        assert _column(table, 1) == ["Ongoing", "Ongoing", "Empty", "CompleteCommit"]
        assert _column(table, 2) == ["2m03s", "18s", "-", "-"]
        assert _column(table, 3) == ["15s", "1m00s", "-", "-"]
        assert _column(table, 4) == ["orders-3", "orders-0,orders-3", "-", "-"]
        assert _column(table, 5) == ["4002", "4001", "4004", "4003"]
        assert _column(table, 6) == ["0", "0", "-", "-"]
        assert _column(table, 7) == ["2", "1", "1", "3"]
        # past its 15 s timeout: highlighted; 18 s of 60 s: not
        assert _is_error(app, table.get_row_at(0)[2])
        assert not _is_error(app, table.get_row_at(1)[2])

        await pilot.press("escape")
        await pilot.pause()
        assert app.screen is not screen


@fakes.run_async
async def test_topic_detail_lists_open_transactions_with_age_and_lso_lag() -> None:
    app = fakes.transactions_app()
    async with app.run_test(size=(120, 40)) as pilot:
        await _first_refresh(app, pilot)
        app.open_topic("orders")
        await pilot.pause()
        screen = app.screen
        assert isinstance(screen, TopicDetailScreen)
        summary = str(screen.query_one("#topic-summary").render())
        # p0: 120 records behind the LSO, p3: 500 (the older transaction's start)
        assert "open transactions 3  LSO lag 620" in summary
        title = str(screen.query_one("#open-txns-title").render())
        assert title == "Open transactions 3   older than their timeout or 1m00s 1"
        table = screen.query_one("#open-txns", DataTable)
        assert table.display
        snap = app.history.latest_ok
        assert snap is not None
        orders = snap.topic("orders")
        assert orders is not None
        ends = {p.partition: p.log_end_offset for p in orders.partitions}
        assert _column(table, 0) == ["3", "0", "3"]
        assert _column(table, 1) == ["billing-txn", "orders-writer-1", "orders-writer-1"]
        assert _column(table, 2) == ["4002", "4001", "4001"]
        assert _column(table, 4) == [str(ends[3] - 500), str(ends[0] - 120), str(ends[3] - 120)]
        assert _column(table, 5) == [str(ends[3] - 500), str(ends[0] - 120), str(ends[3] - 500)]
        assert _column(table, 6) == ["500", "120", "500"]
        # age: now - last timestamp (start + 1 s)
        assert _column(table, 7) == ["2m02s", "17s", "17s"]
        assert [_is_error(app, table.get_row_at(r)[7]) for r in range(3)] == [True, False, False]

        # a topic without open transactions: no table, no transaction figures
        await pilot.press("escape")
        await pilot.pause()
        app.open_topic("payments")
        await pilot.pause()
        screen = app.screen
        assert isinstance(screen, TopicDetailScreen)
        assert not screen.query_one("#open-txns", DataTable).display
        assert not screen.query_one("#open-txns-title").display
        assert "open transactions" not in str(screen.query_one("#topic-summary").render())


@fakes.run_async
async def test_producers_of_another_topic_are_not_shown() -> None:
    # the refresh asked about payments (the screen before): orders shows nothing yet
    app = KtApp(
        fakes.FakeSampler([fakes.transactions_snapshot(14, watched="payments")]),
        bootstrap=fakes.BOOTSTRAP,
        interval=3600,
    )
    async with app.run_test(size=(120, 40)) as pilot:
        await _first_refresh(app, pilot)
        app.open_topic("orders")
        await pilot.pause()
        screen = app.screen
        assert isinstance(screen, TopicDetailScreen)
        assert not screen.query_one("#open-txns", DataTable).display


class WatchingSampler(fakes.FakeSampler):
    """A fake sampler that, like ClusterSampler, takes the topic on view."""

    def __init__(self) -> None:
        super().__init__([fakes.make_snapshot(1)])
        self.watched_topic: str | None = None
        self.seen: list[str | None] = []

    async def sample(self):  # type: ignore[no-untyped-def]
        self.seen.append(self.watched_topic)
        return await super().sample()


@fakes.run_async
async def test_the_sampler_is_told_which_topic_is_on_view() -> None:
    sampler = WatchingSampler()
    app = KtApp(sampler, bootstrap=fakes.BOOTSTRAP, interval=3600)
    async with app.run_test(size=(120, 40)) as pilot:
        await _first_refresh(app, pilot)
        assert sampler.seen == [None]
        app.open_topic("orders")
        await pilot.pause()
        await app.workers.wait_for_complete()
        # entering the detail samples at once, for that topic
        assert sampler.watched_topic == "orders" and sampler.seen[-1] == "orders"
        await pilot.press("m")  # to the messages of the topic: no longer on view
        await pilot.pause()
        assert sampler.watched_topic is None
        app.switch_mode("topics")
        await pilot.pause()
        assert sampler.watched_topic == "orders"  # back on the detail
        await pilot.press("escape")
        await pilot.pause()
        assert sampler.watched_topic is None
