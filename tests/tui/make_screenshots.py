"""Regenerate docs/tui.md's screenshots of `kt tui` (docs/screenshots/*.svg) from
the fake cluster of tui_fakes: `.venv/bin/python tests/tui/make_screenshots.py`.

overview.svg, topic-detail.svg and brokers.svg come from a real three-broker cluster
instead: tests/tui/make_cluster_screenshots.py."""

from __future__ import annotations

import asyncio
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import tui_fakes as fakes

from kt.tui.app import KtApp
from kt.tui.screens.messages import MessagesScreen

OUT = Path(__file__).resolve().parents[2] / "docs" / "screenshots"

#: file name -> keys pressed from the overview
SHOTS = [
    ("topics", ["2"]),
    ("groups", ["3"]),
    ("group-detail", ["3", "down", "enter"]),
    ("log-dirs", ["4"]),
    ("messages", ["5"]),
    ("help", ["question_mark"]),
    ("confirm-delete", ["2", "down", "d"]),
]


async def shoot(
    name: str,
    keys: list[str],
    theme: str | None,
    size: tuple[int, int],
    app: KtApp | None = None,
) -> None:
    app = app if app is not None else fakes.fake_app(theme=theme, interval=2.0)
    async with app.run_test(size=size) as pilot:
        while app.refreshes < 1:
            await pilot.pause(0.01)
        for k in keys:
            await pilot.press(k)
            await pilot.pause()
        await app.workers.wait_for_complete()
        await pilot.pause()
        if isinstance(app.screen, MessagesScreen):
            screen = app.screen
            screen.state = "orders-0 from offset 41000"
            screen.add_records(fakes.records())
            screen.action_focus_table()
            await pilot.press("up", "up", "up", "f")
            screen.show_state()
            await pilot.pause()
        app.save_screenshot(f"{name}.svg", path=str(OUT))


async def main() -> None:
    os.environ["TZ"] = "UTC"
    time.tzset()
    OUT.mkdir(parents=True, exist_ok=True)
    for name, keys in SHOTS:
        await shoot(name, keys, None, (100, 30))
    await shoot("overview-light", [], "textual-light", (100, 30))
    await shoot("overview-80x24", [], None, (80, 24))
    # transactions open on orders, one past its timeout
    await shoot("transactions", ["6", "t"], None, (100, 30), fakes.transactions_app())


if __name__ == "__main__":
    asyncio.run(main())
