"""Transactions in the TUI against a live `kt broker`: a confluent-kafka transactional
producer holds a transaction open; the topic detail shows it (producer, first offset,
LSO lag) with a growing age, the transactions view lists it as ongoing on its
partition, and after the commit both show it gone."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

import pytest
import tui_fakes as fakes
from confluent_kafka import Producer
from textual.widgets import DataTable

from kt.client import KafkaClient, NewTopic, RecordSpec
from kt.tui.app import KtApp
from kt.tui.sampler import ClusterSampler
from kt.tui.screens.topic_detail import TopicDetailScreen
from kt.tui.screens.transactions import TransactionsScreen

pytestmark = pytest.mark.integration


async def _until(pilot, cond: Callable[[], bool], what: str, timeout: float = 20.0) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await pilot.pause(0.05)


def _rows(table: DataTable[object]) -> list[list[str]]:
    return [[str(c).strip() for c in table.get_row_at(r)] for r in range(table.row_count)]


def _seconds(text: str) -> int:
    """'7s' or '1m05s' as seconds."""
    minutes, _, seconds = text.removesuffix("s").rpartition("m")
    return int(minutes or 0) * 60 + int(seconds)


@fakes.run_async
async def test_open_transaction_shows_with_growing_age_and_goes_on_commit(kt_broker) -> None:  # type: ignore[no-untyped-def]
    bs = kt_broker.bootstrap
    async with KafkaClient(bs) as c:
        await c.create_topics([NewTopic("ledger", 2, 1)])
        await c.produce("ledger", 1, [RecordSpec(b"k", b"before") for _ in range(3)])
    producer = Producer({"bootstrap.servers": bs, "transactional.id": "ledger-tx"})
    await asyncio.to_thread(producer.init_transactions, 30)
    producer.begin_transaction()
    for i in range(5):
        producer.produce("ledger", value=b"open%d" % i, partition=1)
    assert await asyncio.to_thread(producer.flush, 30) == 0

    app = KtApp(ClusterSampler(bs, request_timeout=2.0), bootstrap=bs, interval=0.3)
    async with app.run_test(size=(120, 40)) as pilot:
        await _until(pilot, lambda: app.history.latest_ok is not None, "a refresh")
        app.open_topic("ledger")
        await pilot.pause()
        screen = app.screen
        assert isinstance(screen, TopicDetailScreen)
        table = screen.query_one("#open-txns", DataTable)
        await _until(pilot, lambda: table.row_count == 1, "the open transaction")
        [row] = _rows(table)
        # part, transactional id, producer id, epoch, first offset, LSO, LSO lag, age
        assert row[0] == "1" and row[1] == "ledger-tx"
        assert row[4] == "3" and row[5] == "3" and row[6] == "5"
        assert "open transactions 1  LSO lag 5" in str(screen.query_one("#topic-summary").render())
        first = _seconds(row[7])
        await _until(
            pilot,
            lambda: table.row_count == 1 and _seconds(_rows(table)[0][7]) > first,
            "the age to grow",
        )

        await pilot.press("escape")
        await pilot.pause()
        app.open_transactions()
        await pilot.pause()
        view = app.screen
        assert isinstance(view, TransactionsScreen)
        txns = view.query_one("#transactions", DataTable)

        def ledger() -> list[str]:
            return next((r for r in _rows(txns) if r[0] == "ledger-tx"), [])

        await _until(pilot, lambda: ledger()[1:2] == ["Ongoing"], "ledger-tx listed as ongoing")
        # id, state, duration, timeout, partitions, producer id, epoch, coordinator
        assert ledger()[3] == "1m00s" and ledger()[4] == "ledger-1"
        assert ledger()[5] == row[2] and ledger()[6] == row[3]

        await asyncio.to_thread(producer.commit_transaction, 30)
        await _until(pilot, lambda: ledger()[1:2] == ["CompleteCommit"], "the commit")
        assert ledger()[2] == "-"

        await pilot.press("escape")
        await pilot.pause()
        app.open_topic("ledger")
        await pilot.pause()
        screen = app.screen
        assert isinstance(screen, TopicDetailScreen)
        await _until(
            pilot,
            lambda: (
                "open transactions" not in str(screen.query_one("#topic-summary").render())
                and app.history.latest_ok is not None
                and app.history.latest_ok.watched_topic == "ledger"
            ),
            "the transaction gone",
        )
        assert not screen.query_one("#open-txns", DataTable).display
        snap = app.history.latest_ok
        assert snap is not None
        info = snap.topic("ledger")
        assert info is not None
        # the commit marker is the last record: everything is stable
        assert [p.lso_lag for p in info.partitions] == [0, 0]
        await app.close_sampler()


def test_sampler_asks_producers_only_for_the_watched_topic(kt_broker) -> None:  # type: ignore[no-untyped-def]
    bs = kt_broker.bootstrap

    async def setup() -> None:
        async with KafkaClient(bs) as c:
            await c.create_topics([NewTopic("open", 2, 1), NewTopic("other", 1, 1)])

    asyncio.run(setup())
    done = Producer({"bootstrap.servers": bs, "transactional.id": "done-tx"})
    done.init_transactions(30)
    done.begin_transaction()
    done.produce("other", value=b"x", partition=0)
    done.commit_transaction(30)
    held = Producer({"bootstrap.servers": bs, "transactional.id": "held-tx"})
    held.init_transactions(30)
    held.begin_transaction()
    for i in range(4):
        held.produce("open", value=b"v%d" % i, partition=0)
    assert held.flush(30) == 0

    sampler = ClusterSampler(bs, request_timeout=5.0)
    try:
        snap = asyncio.run(sampler.sample())
        assert snap.error is None and snap.watched_topic is None
        assert snap.open_transactions == ()
        assert "describe_producers" not in sampler.last_timings
        assert all(p.last_stable_offset == -1 for p in snap.partitions)
        assert snap.transactions is not None
        txns = {t.transactional_id: t for t in snap.transactions}
        assert txns["held-tx"].state == "Ongoing"
        assert txns["held-tx"].partitions == (("open", 0),)
        assert txns["held-tx"].start_ms > 0 and txns["held-tx"].timeout_ms == 60_000
        # only the ongoing ones are described
        assert txns["done-tx"].state == "CompleteCommit"
        assert txns["done-tx"].start_ms == -1 and txns["done-tx"].producer_epoch == -1

        sampler.watched_topic = "open"
        snap = asyncio.run(sampler.sample())
        assert snap.watched_topic == "open"
        [o] = snap.open_transactions
        assert (o.topic, o.partition, o.first_offset) == ("open", 0, 0)
        assert (o.producer_id, o.producer_epoch) == (
            txns["held-tx"].producer_id,
            txns["held-tx"].producer_epoch,
        )
        assert o.age_ms(snap.wall_ms) >= 0
        info = snap.topic("open")
        assert info is not None
        assert [(p.log_end_offset, p.last_stable_offset, p.lso_lag) for p in info.partitions] == [
            (4, 0, 4),
            (0, 0, 0),
        ]
        other = snap.topic("other")
        assert other is not None and other.partitions[0].last_stable_offset == -1
        held.abort_transaction(30)
    finally:
        asyncio.run(sampler.close())
