"""ZooKeeper semantics of both CoordinationStores (the zookeeper variant is integration).

Running the same assertions on the in-process store and on a real ZooKeeper is what
keeps single-node mode honest: anything the controller relies on must hold on both.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Coroutine
from typing import Any

import pytest

from kt.broker.metadata.store import (
    BadVersionError,
    Check,
    Create,
    Delete,
    NoChildrenForEphemeralsError,
    NodeExistsError,
    NoNodeError,
    NotEmptyError,
    RolledBackError,
    RuntimeInconsistencyError,
    SetData,
    Stat,
    TransactionFailedError,
)


def run(coro: Coroutine[Any, Any, Any]) -> Any:
    """Run a test's coroutine on a fresh loop; a hang fails instead of blocking."""
    return asyncio.run(asyncio.wait_for(coro, 60))


async def settle() -> None:
    """Let watch callbacks (posted to the loop, or from ZooKeeper's threads) arrive."""
    await asyncio.sleep(0.3)


def test_create_get_set_versions(sessions: Any) -> None:
    async def body() -> None:
        async with sessions(1) as [s]:
            assert await s.create("/a", b"one") == "/a"
            data, stat = await s.get("/a")
            assert (data, stat.version, stat.ephemeral_owner, stat.num_children) == (
                b"one",
                0,
                0,
                0,
            )
            new = await s.set("/a", b"two", 0)
            assert new.version == 1 and new.czxid == stat.czxid and new.mzxid > stat.mzxid
            with pytest.raises(BadVersionError):
                await s.set("/a", b"three", 0)
            assert (await s.set("/a", b"three")).version == 2  # -1: any version
            with pytest.raises(NodeExistsError):
                await s.create("/a")
            with pytest.raises(NoNodeError):
                await s.get("/missing")
            with pytest.raises(NoNodeError):
                await s.set("/missing", b"")
            assert await s.exists("/missing") is None
            with pytest.raises(NoNodeError):
                await s.create("/no/parent")
            assert await s.create("/x/y/z", b"deep", make_parents=True) == "/x/y/z"
            assert await s.children("/x") == ["y"]
            assert (await s.exists("/x")) is not None

    run(body())


def test_czxid_increases_across_the_tree(sessions: Any) -> None:
    async def body() -> None:
        async with sessions(1) as [s]:
            await s.create("/a")
            await s.create("/b")
            a, b = await s.exists("/a"), await s.exists("/b")
            assert a is not None and b is not None and b.czxid > a.czxid
            await s.delete("/a")
            await s.create("/a")
            again = await s.exists("/a")
            assert again is not None and again.czxid > b.czxid and again.version == 0

    run(body())


def test_delete(sessions: Any) -> None:
    async def body() -> None:
        async with sessions(1) as [s]:
            await s.create("/p/c/d", make_parents=True)
            with pytest.raises(NotEmptyError):
                await s.delete("/p")
            await s.set("/p/c/d", b"x")
            with pytest.raises(BadVersionError):
                await s.delete("/p/c/d", 0)
            await s.delete("/p", recursive=True)
            assert await s.exists("/p") is None
            with pytest.raises(NoNodeError):
                await s.delete("/p")

    run(body())


def test_children_are_sorted_and_counted(sessions: Any) -> None:
    async def body() -> None:
        async with sessions(1) as [s]:
            await s.create("/p")
            for name in ("b", "a", "c"):
                await s.create(f"/p/{name}")
            assert await s.children("/p") == ["a", "b", "c"]
            stat = await s.exists("/p")
            assert stat is not None and stat.num_children == 3

    run(body())


def test_ephemeral_nodes_belong_to_their_session(sessions: Any) -> None:
    async def body() -> None:
        async with sessions(2) as [s1, s2]:
            await s1.create("/e", b"mine", ephemeral=True)
            stat = await s2.exists("/e")
            assert stat is not None and stat.ephemeral_owner == s1.session_id != 0
            assert s1.session_id != s2.session_id
            with pytest.raises(NoChildrenForEphemeralsError):
                await s1.create("/e/child")
            await s1.close()
            await asyncio.sleep(0.1)
            assert await s2.exists("/e") is None

    run(body())


def test_sequential_names_use_the_parents_counter(sessions: Any) -> None:
    async def body() -> None:
        async with sessions(1) as [s]:
            await s.create("/q")
            first = await s.create("/q/item-", b"1", sequential=True)
            second = await s.create("/q/item-", b"2", sequential=True)
            assert first == "/q/item-0000000000"
            assert second == "/q/item-0000000001"
            await s.delete(first)
            # The counter counts creates, so a deleted name is not reused.
            assert await s.create("/q/item-", sequential=True) == "/q/item-0000000002"

    run(body())


def test_multi_applies_everything(sessions: Any) -> None:
    async def body() -> None:
        async with sessions(1) as [s]:
            await s.create("/c", b"0")
            results = await s.multi(
                [
                    Check("/c", 0),
                    Create("/n", b"new"),
                    SetData("/c", b"1", 0),
                    Create("/n/s-", sequential=True),
                ]
            )
            assert results[0] is True
            assert results[1] == "/n"
            assert isinstance(results[2], Stat) and results[2].version == 1
            assert results[3] == "/n/s-0000000000"
            n, c = await s.exists("/n"), await s.exists("/c")
            assert n is not None and c is not None
            assert n.czxid == c.mzxid  # one transaction, one zxid
            await s.multi([Delete("/n/s-0000000000"), Delete("/n")])
            assert await s.exists("/n") is None

    run(body())


def test_failed_multi_applies_nothing(sessions: Any) -> None:
    async def body() -> None:
        async with sessions(1) as [s]:
            await s.create("/c", b"0")
            with pytest.raises(TransactionFailedError) as failed:
                await s.multi([Create("/new"), Create("/c"), SetData("/c", b"x")])
            kinds = [type(r) for r in failed.value.results]
            assert kinds == [RolledBackError, NodeExistsError, RuntimeInconsistencyError]
            assert isinstance(failed.value.failure, NodeExistsError)
            assert await s.exists("/new") is None
            assert await s.get("/c") == (b"0", await s.exists("/c"))

            with pytest.raises(TransactionFailedError) as failed:
                await s.multi([Check("/c", 5), SetData("/c", b"x")])
            assert [type(r) for r in failed.value.results] == [
                BadVersionError,
                RuntimeInconsistencyError,
            ]
            stat = await s.exists("/c")
            assert stat is not None and stat.version == 0
            # A failed sequential create does not consume a counter value.
            with pytest.raises(TransactionFailedError):
                await s.multi([Create("/c/s-", sequential=True), Check("/c", 9)])
            assert await s.create("/c/s-", sequential=True) == "/c/s-0000000000"

    run(body())


def test_child_watch_is_persistent_and_runs_on_the_loop(sessions: Any) -> None:
    async def body() -> None:
        async with sessions(2) as [s, other]:
            seen: list[list[str]] = []
            threads: set[int] = set()

            def on_children(children: list[str]) -> None:
                threads.add(threading.get_ident())
                seen.append(children)

            watch = s.watch_children("/w", on_children)
            await settle()
            assert seen == [[]]  # a missing node has no children
            await other.create("/w")
            await other.create("/w/a")
            await settle()
            assert seen[-1] == ["a"]
            await other.create("/w/b")
            await settle()
            assert seen[-1] == ["a", "b"]
            assert threads == {threading.get_ident()}
            watch.cancel()
            await other.create("/w/c")
            await settle()
            assert seen[-1] == ["a", "b"]

    run(body())


def test_data_watch_sees_create_change_delete(sessions: Any) -> None:
    async def body() -> None:
        async with sessions(2) as [s, other]:
            seen: list[tuple[bytes | None, int | None]] = []
            s.watch_data(
                "/d", lambda data, stat: seen.append((data, stat.version if stat else None))
            )
            await settle()
            assert seen == [(None, None)]
            await other.create("/d", b"1")
            await settle()
            await other.set("/d", b"2")
            await settle()
            await other.delete("/d")
            await settle()
            assert seen == [(None, None), (b"1", 0), (b"2", 1), (None, None)]

    run(body())


def test_ephemeral_owner_close_fires_watches(sessions: Any) -> None:
    async def body() -> None:
        async with sessions(2) as [owner, watcher]:
            await owner.create("/ids")
            await owner.create("/ids/1", b"b1", ephemeral=True)
            seen: list[list[str]] = []
            watcher.watch_children("/ids", seen.append)
            await settle()
            await owner.close()
            await settle()
            assert seen == [["1"], []]

    run(body())
