"""ZooKeeperStore against a real ZooKeeper: chroot, unreachable servers, session expiry,
a server restart. (Znode semantics are in tests/unit/broker/metadata, on both stores.)
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Coroutine
from pathlib import Path
from typing import Any

import pytest
from kazoo.client import KazooClient
from zk_harness import ZooKeeperServer, free_port

from kt.broker.metadata import znodes as z
from kt.broker.metadata.cluster_store import ClusterStore
from kt.broker.metadata.store import SessionEvent, StoreUnavailableError
from kt.broker.metadata.zookeeper import ZooKeeperStore, split_connect

pytestmark = pytest.mark.integration


def run(coro: Coroutine[Any, Any, Any]) -> Any:
    """Run a test's coroutine on a fresh loop; a hang fails instead of blocking."""
    return asyncio.run(asyncio.wait_for(coro, 90))


async def wait_for(predicate: Any, timeout: float = 20.0) -> None:
    """Poll `predicate()` until true (AssertionError after `timeout`)."""
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "condition not reached in time"
        await asyncio.sleep(0.05)


def test_split_connect() -> None:
    assert split_connect("a:1,b:2/kafka/x") == ("a:1,b:2", "/kafka/x")
    assert split_connect("a:1") == ("a:1", "")
    assert split_connect("a:1/") == ("a:1", "")
    with pytest.raises(ValueError):
        split_connect("/chroot")


def test_chroot_is_created(zookeeper: str) -> None:
    hosts, chroot = split_connect(zookeeper)

    async def body() -> None:
        s = ZooKeeperStore(zookeeper)
        await s.start(10)
        await s.create("/node", b"x")
        assert await s.children("/") == ["node"]
        await s.close()
        root = ZooKeeperStore(hosts)
        await root.start(10)
        assert (await root.get(f"{chroot}/node"))[0] == b"x"
        await root.delete(chroot, recursive=True)
        await root.close()

    run(body())


def test_unreachable_zookeeper_fails_start_after_the_timeout() -> None:
    connect = f"127.0.0.1:{free_port()}"

    async def body() -> None:
        s = ZooKeeperStore(connect)
        started = time.monotonic()
        with pytest.raises(StoreUnavailableError, match=f"ZooKeeper at {connect} within 1 s"):
            await s.start(1.0)
        assert 0.9 < time.monotonic() - started < 5

    run(body())


def _kill_session(hosts: str, session: tuple[int, bytes]) -> None:
    # The reliable way to expire a session on demand: attach a second client to it
    # (same id and password) and close that client, which ends the session server-side.
    other = KazooClient(hosts=hosts, client_id=session, timeout=6)
    other.start(10)
    other.stop()
    other.close()


def test_session_expiry_drops_ephemerals_and_reconnects_with_a_new_session(
    zookeeper: str,
) -> None:
    async def body() -> None:
        s = ZooKeeperStore(zookeeper, session_timeout_ms=4000)
        watcher = ZooKeeperStore(zookeeper)
        await s.start(10)
        await watcher.start(10)
        cs = ClusterStore(s)
        await cs.ensure_persistent_paths()
        await cs.register_broker(z.BrokerRegistration(1, (z.Endpoint("PLAINTEXT", "h", 1),), 0))
        events: list[SessionEvent] = []
        s.on_session_event(events.append)
        seen: list[list[str]] = []
        watcher.watch_children(z.BROKER_IDS, seen.append)
        mine: list[list[str]] = []
        s.watch_children("/w", mine.append)
        await wait_for(lambda: seen == [["1"]] and mine == [[]])
        old_session = s.session_id

        await asyncio.to_thread(_kill_session, s.hosts, s.client.client_id)
        await wait_for(lambda: SessionEvent.EXPIRED in events and seen[-1] == [])
        await wait_for(lambda: events[-1] == SessionEvent.RECONNECTED)
        assert s.session_id != old_session
        assert await s.exists(z.broker_path(1)) is None
        # The broker registers again in its new session, with a larger epoch.
        await cs.register_broker(z.BrokerRegistration(1, (z.Endpoint("PLAINTEXT", "h", 1),), 0))
        await wait_for(lambda: seen[-1] == ["1"])
        # Watches of the store survive the expiry.
        await watcher.create("/w")
        await watcher.create("/w/x")
        await wait_for(lambda: mine[-1] == ["x"])
        await s.close()
        await watcher.close()

    run(body())


def test_zookeeper_restart_keeps_the_session(tmp_path: Path) -> None:
    server = ZooKeeperServer(tmp_path / "zk").start()
    try:

        async def body() -> None:
            s = ZooKeeperStore(server.connect, session_timeout_ms=10000)
            await s.start(10)
            events: list[SessionEvent] = []
            s.on_session_event(events.append)
            await s.create("/e", b"x", ephemeral=True)
            session = s.session_id

            await asyncio.to_thread(server.stop)
            await wait_for(lambda: events == [SessionEvent.SUSPENDED])
            # A read during the outage waits for the server instead of failing.
            pending = asyncio.ensure_future(s.get("/e"))
            await asyncio.sleep(0.5)
            assert not pending.done()
            await asyncio.to_thread(server.start)
            data, stat = await pending
            assert (data, stat.ephemeral_owner) == (b"x", session)
            await wait_for(lambda: events == [SessionEvent.SUSPENDED, SessionEvent.RECONNECTED])
            assert s.session_id == session
            await s.close()

        run(body())
    finally:
        server.stop()


def test_long_outage_is_store_unavailable(tmp_path: Path) -> None:
    server = ZooKeeperServer(tmp_path / "zk").start()
    try:

        async def body() -> None:
            s = ZooKeeperStore(server.connect, session_timeout_ms=2000)
            await s.start(10)
            await asyncio.to_thread(server.stop)
            started = time.monotonic()
            with pytest.raises(StoreUnavailableError, match="unreachable"):
                await s.children("/")
            assert time.monotonic() - started < 10
            await s.close()

        run(body())
    finally:
        server.stop()
