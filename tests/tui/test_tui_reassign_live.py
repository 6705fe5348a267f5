"""The reassignments view against the shared three-broker cluster (ZooKeeper plus three
`kt broker` processes): a throttled reassignment started from the TUI's dialog is
listed with its replicas, progress and throttle; cancelled from the TUI, the
partition is back on its original replica and the throttles are gone."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import tui_fakes as fakes
from textual.widgets import DataTable

from kt.client import KafkaClient, NewTopic, RecordSpec
from kt.tui.actions import ClusterActions
from kt.tui.app import KtApp
from kt.tui.sampler import ClusterSampler
from kt.tui.screens.dialogs import ConfirmScreen, StartReassignmentForm
from kt.tui.screens.reassignments import ReassignmentsScreen

pytestmark = [pytest.mark.integration, pytest.mark.cluster]

TOPIC = "tui-move"
#: 3 MB at 10 kB/s: the first fetch may bring up to replica.fetch.max.bytes (1 MiB)
#: at once, then the quota holds the follower back for minutes, so the reassignment
#: is still in progress when the test cancels it
RECORDS, RECORD_BYTES, THROTTLE = 3000, 1000, 10_000


async def _until(pilot, cond: Callable[[], bool], what: str, timeout: float = 60.0) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:g}s waiting for {what}")
        await pilot.pause(0.1)


def _rows(table: DataTable[object]) -> list[list[str]]:
    return [[str(c).strip() for c in table.get_row_at(r)] for r in range(table.row_count)]


@fakes.run_async
async def test_start_and_cancel_a_throttled_reassignment(cluster: Any, tmp_path: Path) -> None:
    bs = cluster.bootstrap_servers
    async with KafkaClient(bs) as admin:
        err = (await admin.create_topics([NewTopic(TOPIC, assignments={0: [1]})]))[TOPIC]
        assert err is None, err
        deadline = time.monotonic() + 30
        while True:
            try:
                for _ in range(0, RECORDS, 100):
                    batch = [RecordSpec(None, b"x" * RECORD_BYTES) for _ in range(100)]
                    await admin.produce(TOPIC, 0, batch, acks=-1)
                break
            except Exception:  # the leader is not elected yet
                assert time.monotonic() < deadline
                await asyncio.sleep(0.5)
    plan = tmp_path / "plan.json"
    entry = {"topic": TOPIC, "partition": 0, "replicas": [2]}
    plan.write_text(json.dumps({"version": 1, "partitions": [entry]}))
    app = KtApp(
        ClusterSampler(bs, request_timeout=3.0, connect_timeout=2.0),
        bootstrap=bs,
        interval=0.5,
        actions=ClusterActions(bs, request_timeout=10.0),
    )
    async with app.run_test(size=(100, 30)) as pilot:
        try:
            await _until(pilot, lambda: app.history.latest_ok is not None, "a first refresh")
            await _until(
                pilot,
                lambda: app.history.latest_ok.topic(TOPIC) is not None,  # type: ignore[union-attr]
                f"topic {TOPIC} in the metadata",
            )
            await pilot.press("6", "r")
            await pilot.pause()
            screen = app.screen
            assert isinstance(screen, ReassignmentsScreen)
            moving = screen.query_one("#reassignments", DataTable)
            summary = screen.query_one("#reassign-summary")
            await _until(
                pilot, lambda: "Reassignments none" in str(summary.render()), "no reassignment"
            )

            # start it from the dialog, throttled
            await pilot.press("e")
            await pilot.pause()
            form = app.screen
            assert isinstance(form, StartReassignmentForm)
            form.query_one("#f-path").value = str(plan)  # type: ignore[attr-defined]
            form.query_one("#f-throttle").value = str(THROTTLE)  # type: ignore[attr-defined]
            form.submit()
            await _until(pilot, lambda: isinstance(app.screen, ConfirmScreen), "the confirmation")
            text = str(app.screen.query_one("#confirm-text").render())
            assert f"{TOPIC}-0: 1 -> 2" in text and "10,000 B/s" in text, text
            await pilot.press("y")
            await _until(pilot, lambda: moving.row_count == 1, "the reassignment listed")
            row = _rows(moving)[0]
            assert row[:2] == [f"{TOPIC}-0", "2,1 +2 -1"], row
            await _until(
                pilot,
                lambda: "Throttle 9.8 KiB/s on brokers 1,2 (tui-move)" in str(summary.render()),
                "the throttle in the summary",
                timeout=15,
            )
            # a refresh later the copy has a rate (the CLI's numbers)
            await _until(pilot, lambda: _rows(moving)[0][5] != "-", "a copy rate", timeout=15)
            snap = app.history.latest_ok
            assert snap is not None and snap.reassignments[0].target == (2,)
            [progress] = app.history.reassignment_progress()
            assert progress.broker == 2 and progress.total >= RECORDS * RECORD_BYTES
            assert progress.copied < progress.total  # throttled: far from done

            # cancel it from the TUI: back to broker 1 alone, throttles cleared
            moving.focus()
            await pilot.press("c")
            await _until(pilot, lambda: isinstance(app.screen, ConfirmScreen), "the confirmation")
            text = str(app.screen.query_one("#confirm-text").render())
            assert f"{TOPIC}-0: to 1 (the copy on 2 is dropped)" in text, text
            await pilot.press("y")

            def back() -> bool:
                s = app.history.latest_ok
                t = s.topic(TOPIC) if s else None
                return (
                    s is not None
                    and not s.reassignments
                    and t is not None
                    and t.partitions[0].replicas == (1,)
                )

            await _until(pilot, back, "the original replicas back")
            await _until(pilot, lambda: moving.row_count == 0, "an empty list")
            await _until(
                pilot,
                lambda: str(summary.render()) == "Reassignments none   Throttle none",
                "the throttles cleared",
                timeout=15,
            )
        finally:
            await app.close_sampler()
    async with KafkaClient(bs) as admin:
        assert await admin.list_partition_reassignments() == {}
        await admin.delete_topics([TOPIC])
