"""The TUI against a real three-broker cluster (ZooKeeper plus `kt broker start` x3):
the brokers screen lists the live brokers, their racks, the controller, what each
leads and hosts; a SIGKILLed broker shows as DOWN, the partitions it hosted as
under-replicated with a shrunk ISR (overview, brokers screen and topic detail), and
once it is restarted the ISRs are full again and every count is back to 0."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import tui_fakes as fakes
from textual.widgets import DataTable

from kt.client import KafkaClient, NewTopic, RecordSpec
from kt.tui.actions import ClusterActions
from kt.tui.app import KtApp
from kt.tui.model import ClusterSnapshot
from kt.tui.sampler import ClusterSampler
from kt.tui.screens.brokers import BrokersScreen
from kt.tui.screens.topic_detail import TopicDetailScreen

pytestmark = [pytest.mark.integration, pytest.mark.cluster]

TOPIC = "replicated"
RACKS = ["rack-a", "rack-b", "rack-c"]
#: ZooKeeper's session timeout (a killed broker leaves /brokers/ids after it) and the
#: leaders' lag limit (a follower that stopped fetching leaves the ISR after it)
OVERRIDES = {
    "zookeeper.session.timeout.ms": "6000",
    "replica.lag.time.max.ms": "3000",
    "group.initial.rebalance.delay.ms": "0",
}


@pytest.fixture
def three_brokers(tmp_path: Path) -> Iterator[object]:
    from kt.tools.local_cluster import ClusterModeUnsupportedError, LocalCluster

    c = LocalCluster.create(tmp_path / "c", 3, racks=RACKS, overrides=OVERRIDES)
    try:
        c.start(register_timeout=15.0)
    except ClusterModeUnsupportedError as exc:
        pytest.skip(f"kt broker start has no cluster mode yet: {exc}")
    try:
        yield c
    finally:
        c.stop(kill=True)


def _app(bootstrap: str) -> KtApp:
    return KtApp(
        ClusterSampler(bootstrap, request_timeout=2.0, connect_timeout=1.0),
        bootstrap=bootstrap,
        interval=0.5,
        actions=ClusterActions(bootstrap, request_timeout=5.0),
    )


async def _until(pilot, cond: Callable[[], bool], what: str, timeout: float = 60.0) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:g}s waiting for {what}")
        await pilot.pause(0.1)


def _column(table: DataTable[object], index: int) -> list[str]:
    return [str(table.get_row_at(r)[index]).strip() for r in range(table.row_count)]


def _snap(app: KtApp) -> ClusterSnapshot | None:
    latest = app.history.latest
    return latest if latest is not None and latest.error is None else None


def _healthy(app: KtApp) -> bool:
    s = _snap(app)
    t = s.topic(TOPIC) if s else None
    return (
        s is not None
        and t is not None
        and [b.node_id for b in s.brokers] == [1, 2, 3]
        and all(p.leader >= 0 and len(p.isr) == 3 for p in t.partitions)
        and sum(1 for p in s.partitions if p.under_replicated or p.offline) == 0
    )


async def _keep_producing(bootstrap: str, stop: asyncio.Event) -> None:
    """A record to every partition twice a second (acks=1), so that the leaders see a
    dead follower fall behind; failures while leadership moves are expected."""
    n = 0
    while not stop.is_set():
        with contextlib.suppress(Exception):
            async with KafkaClient(bootstrap, request_timeout=2, connect_timeout=1, retries=0) as c:
                while not stop.is_set():
                    for p in range(3):
                        await c.produce(TOPIC, p, [RecordSpec(None, f"r{n}".encode())], acks=1)
                    n += 1
                    await asyncio.sleep(0.5)
        await asyncio.sleep(0.2)


@pytest.mark.parametrize("kill_controller", [False, True], ids=["follower", "controller"])
@fakes.run_async
async def test_brokers_screen_follows_a_broker_kill_and_restart(  # type: ignore[no-untyped-def]
    three_brokers, kill_controller: bool
) -> None:
    c = three_brokers
    bs = c.bootstrap_servers
    async with KafkaClient(bs) as admin:
        assert (await admin.create_topics([NewTopic(TOPIC, 3, 3)]))[TOPIC] is None
        controller = await admin.controller()
    app = _app(bs)
    stop = asyncio.Event()
    producer: asyncio.Task[None] | None = None
    async with app.run_test(size=(110, 32)) as pilot:
        try:
            await _until(pilot, lambda: _healthy(app), "three brokers and a full ISR everywhere")
            await pilot.press("6")
            await pilot.pause()
            screen = app.screen
            assert isinstance(screen, BrokersScreen)
            table = screen.query_one("#broker-list", DataTable)
            await _until(pilot, lambda: table.row_count == 3, "three broker rows")
            snap = _snap(app)
            assert snap is not None
            assert snap.controller_id == controller
            assert _column(table, 0) == ["1", "2", "3"]
            assert _column(table, 1) == ["up", "up", "up"]
            assert _column(table, 2) == RACKS
            assert _column(table, 3) == ["yes" if n == controller else "" for n in (1, 2, 3)]
            led = {n: sum(1 for p in snap.partitions if p.leader == n) for n in (1, 2, 3)}
            assert _column(table, 4) == [str(led[n]) for n in (1, 2, 3)]
            assert sum(led.values()) == len(list(snap.partitions))
            assert _column(table, 5) == [
                str(sum(1 for p in snap.partitions if n in p.replicas)) for n in (1, 2, 3)
            ]
            assert _column(table, 7) == ["0", "0", "0"]  # URP
            assert _column(table, 9) == [b.bootstrap for b in c.brokers]
            summary = screen.query_one("#brokers-summary")
            assert str(summary.render()).startswith(f"Live brokers 3   Controller {controller}")

            # SIGKILL the controller, or a broker that leads a partition and is not
            # the controller
            victim = (
                controller
                if kill_controller
                else next(n for n in (1, 2, 3) if n != controller and led[n] > 0)
            )
            producer = asyncio.create_task(_keep_producing(bs, stop))
            await asyncio.to_thread(c.stop_broker, victim, kill=True)

            def victim_gone() -> bool:
                s = _snap(app)
                t = s.topic(TOPIC) if s else None
                return (
                    s is not None
                    and t is not None
                    and victim not in [b.node_id for b in s.brokers]
                    and all(p.leader not in (victim, -1) for p in t.partitions)
                    and all(victim not in p.isr for p in t.partitions)
                    and s.controller_id not in (victim, -1)
                )

            await _until(pilot, victim_gone, f"broker {victim} out of the metadata and the ISRs")
            await pilot.pause(0.2)
            await _until(
                pilot,
                lambda: _column(table, 1)[victim - 1] == "DOWN",
                f"broker {victim} DOWN on the brokers screen",
                timeout=10,
            )
            assert f"Down {victim}" in str(summary.render())
            new_controller = _snap(app).controller_id  # type: ignore[union-attr]
            assert f"Controller {new_controller}" in str(summary.render())
            assert _column(table, 3) == ["yes" if n == new_controller else "" for n in (1, 2, 3)]
            assert "Under-replicated 3" in str(summary.render())
            assert _column(table, 7) == ["3", "3", "3"]  # every broker hosts all three
            unhealthy = screen.query_one("#unhealthy-partitions", DataTable)
            assert _column(unhealthy, 0) == [TOPIC] * 3
            assert _column(unhealthy, 2) == ["under-replicated"] * 3
            assert all(str(victim) not in isr.split(",") for isr in _column(unhealthy, 5))

            await pilot.press("1")
            await pilot.pause(0.2)
            counts = str(app.screen.query_one("#counts").render())
            assert "Under-replicated 3" in counts, counts
            brokers = app.screen.query_one("#brokers", DataTable)
            assert any("LOST" in " ".join(map(str, brokers.get_row_at(r)))
                       for r in range(brokers.row_count))  # fmt: skip

            app.open_topic(TOPIC)
            await pilot.pause(0.2)
            detail = app.screen
            assert isinstance(detail, TopicDetailScreen)
            parts = detail.query_one("#partitions", DataTable)
            await _until(pilot, lambda: parts.row_count == 3, "the partitions", timeout=10)
            isrs = _column(parts, 4)
            assert all(len(isr.split(",")) == 2 and str(victim) not in isr for isr in isrs), isrs
            assert "under-replicated 3" in str(detail.query_one("#topic-summary").render())

            # back again: the follower catches up and rejoins every ISR
            await asyncio.to_thread(c.start_broker, victim)
            await _until(pilot, lambda: _healthy(app), f"broker {victim} back in every ISR")
            await pilot.pause(0.2)
            await _until(
                pilot,
                lambda: all(len(i.split(",")) == 3 for i in _column(parts, 4)),
                "full ISRs on the topic detail",
                timeout=10,
            )
            assert "under-replicated 0" in str(detail.query_one("#topic-summary").render())
            await pilot.press("6")
            await pilot.pause(0.2)
            table = app.screen.query_one("#broker-list", DataTable)
            await _until(
                pilot,
                lambda: _column(table, 1) == ["up", "up", "up"],
                "every broker up again",
                timeout=10,
            )
            assert _column(table, 7) == ["0", "0", "0"]
            assert "Under-replicated 0" in str(app.screen.query_one("#brokers-summary").render())
        finally:
            stop.set()
            if producer is not None:
                await producer
            await app.close_sampler()
