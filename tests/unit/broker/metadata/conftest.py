"""Fixtures for the coordination store tests: the same tests run on both stores.

`stores` makes sessions of one ensemble: an in-process tree (every session after the
first is `new_session()` of the first) or the shared real ZooKeeper (integration).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest

from kt.broker.metadata.in_process import InProcessStore
from kt.broker.metadata.store import CoordinationStore
from kt.broker.metadata.zookeeper import ZooKeeperStore

Sessions = Callable[[int], Any]


@pytest.fixture(params=["in_process", pytest.param("zookeeper", marks=pytest.mark.integration)])
def sessions(request: pytest.FixtureRequest, tmp_path: Path) -> Sessions:
    """`async with sessions(n) as [s1, ...]`: n started sessions of one ensemble."""
    if request.param == "in_process":
        data_file = tmp_path / "kt-metadata.json"

        def make_all(n: int) -> list[CoordinationStore]:
            first = InProcessStore(data_file)
            return [first, *(first.new_session() for _ in range(n - 1))]

    else:
        connect = request.getfixturevalue("zookeeper")

        def make_all(n: int) -> list[CoordinationStore]:
            return [ZooKeeperStore(connect, session_timeout_ms=6000) for _ in range(n)]

    @asynccontextmanager
    async def open_sessions(n: int = 1) -> AsyncIterator[list[CoordinationStore]]:
        stores = make_all(n)
        for s in stores:
            await s.start(10)
        try:
            yield stores
        finally:
            for s in stores:
                await s.close()

    return open_sessions
