"""What only the in-process store does: its JSON file, legacy migration, simulated expiry."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Coroutine
from pathlib import Path
from typing import Any

import pytest

from kt.broker.metadata import znodes
from kt.broker.metadata.cluster_store import ClusterStore
from kt.broker.metadata.in_process import (
    DATA_FILE,
    LEGACY_FILE,
    InProcessStore,
    migrate_legacy_metadata,
)
from kt.broker.metadata.store import Create, SessionEvent, SetData, StoreUnavailableError
from kt.broker.metadata_store import MetadataStore, TopicInfo


def run(coro: Coroutine[Any, Any, Any]) -> Any:
    """Run a test's coroutine on a fresh loop."""
    return asyncio.run(asyncio.wait_for(coro, 30))


def test_persistent_nodes_survive_a_restart_ephemeral_ones_do_not(tmp_path: Path) -> None:
    path = tmp_path / DATA_FILE

    async def first() -> int:
        s = InProcessStore(path)
        await s.start()
        await s.create("/p", b'{"a":1}')
        await s.set("/p", b'{"a":2}')
        await s.create("/bin", b"\xff\x00")
        await s.create("/e", b"x", ephemeral=True)
        await s.create("/q")
        await s.create("/q/s-", sequential=True)
        stat = await s.exists("/e")
        assert stat is not None
        return stat.czxid

    async def second(old_czxid: int) -> None:
        s = InProcessStore(path)
        await s.start()
        data, stat = await s.get("/p")
        assert (data, stat.version) == (b'{"a":2}', 1)
        assert (await s.get("/bin"))[0] == b"\xff\x00"
        assert await s.exists("/e") is None
        # zxids go on from where they were: a new broker epoch is always larger.
        await s.create("/e", ephemeral=True)
        again = await s.exists("/e")
        assert again is not None and again.czxid > old_czxid
        assert await s.create("/q/s-", sequential=True) == "/q/s-0000000001"

    czxid = run(first())
    doc = json.loads(path.read_text())
    assert doc["nodes"]["/p"]["data"] == '{"a":2}'  # readable by a human
    assert "/e" not in doc["nodes"]
    run(second(czxid))


def test_expire_drops_ephemerals_and_starts_a_new_session() -> None:
    async def body() -> None:
        s = InProcessStore()
        await s.start()
        events: list[SessionEvent] = []
        s.on_session_event(events.append)
        await s.create("/e", ephemeral=True)
        old = s.session_id
        seen: list[list[str]] = []
        s.watch_children("/", seen.append)
        await asyncio.sleep(0)
        await s.expire()
        await asyncio.sleep(0)
        assert events == [SessionEvent.EXPIRED, SessionEvent.RECONNECTED]
        assert s.session_id != old
        assert await s.exists("/e") is None
        assert seen == [["e"], []]

    run(body())


def _legacy_store(log_dir: Path) -> None:
    legacy = MetadataStore(log_dir / LEGACY_FILE)
    legacy.cluster_id = "Cl-uster-id_000000000w"
    legacy.next_producer_id_block = 2000
    legacy.topics["t"] = TopicInfo(
        "t", bytes(range(16)), 2, 1, {"cleanup.policy": "compact"}, {0: [0], 1: [0]}
    )
    legacy.topics["u"] = TopicInfo("u", bytes(16), 1, 1, {}, {})
    legacy.save()


def test_migrate_legacy_metadata(tmp_path: Path) -> None:
    _legacy_store(tmp_path)
    nodes = dict(migrate_legacy_metadata(tmp_path / LEGACY_FILE, broker_id=3))
    assert nodes == {
        "/cluster/id": b'{"version":"1","id":"Cl-uster-id_000000000w"}',
        "/brokers/topics/t": (
            b'{"version":3,"partitions":{"0":[0],"1":[0]},"adding_replicas":{},'
            b'"removing_replicas":{},"topic_id":"AAECAwQFBgcICQoLDA0ODw"}'
        ),
        "/config/topics/t": b'{"version":1,"config":{"cleanup.policy":"compact"}}',
        "/brokers/topics/u": (
            b'{"version":3,"partitions":{"0":[3]},"adding_replicas":{},'
            b'"removing_replicas":{},"topic_id":"AAAAAAAAAAAAAAAAAAAAAA"}'
        ),
        "/config/topics/u": b'{"version":1,"config":{}}',
        "/latest_producer_id_block": (
            b'{"version":1,"broker":3,"block_start":"1000","block_end":"1999"}'
        ),
    }


def test_first_start_migrates_the_legacy_file(tmp_path: Path) -> None:
    _legacy_store(tmp_path)

    async def body() -> None:
        s = InProcessStore.in_dir(tmp_path, broker_id=0)
        await s.start()
        cs = ClusterStore(s)
        await cs.ensure_persistent_paths()
        assert await cs.get_cluster_id() == "Cl-uster-id_000000000w"
        assigned = await cs.get_topic_assignments()
        assert assigned["t"].partitions == {0: [0], 1: [0]}
        assert assigned["t"].topic_id == bytes(range(16))
        assert await cs.get_entity_config("topics", "t") == {"cleanup.policy": "compact"}
        # Producer ids continue after the last id the legacy store handed out.
        assert (await cs.allocate_producer_id_block(0)).start == 2000
        await s.create("/marker")

    run(body())
    assert (tmp_path / DATA_FILE).exists() and (tmp_path / LEGACY_FILE).exists()

    async def again() -> None:
        # Migration happens once: later starts read kt-metadata.json only.
        s = InProcessStore.in_dir(tmp_path)
        await s.start()
        assert await s.exists("/marker") is not None
        block = znodes.decode_producer_id_block((await s.get(znodes.PRODUCER_ID_BLOCK))[0])
        assert block is not None and block.start == 2000

    run(again())


def test_open_store_picks_the_store_from_the_config(tmp_path: Path) -> None:
    from kt.broker.metadata import open_store
    from kt.broker.metadata.zookeeper import ZooKeeperStore

    single = open_store(None, tmp_path, broker_id=1)
    assert isinstance(single, InProcessStore)
    zk = open_store("h:2181/kafka", tmp_path, session_timeout_ms=6000)
    assert isinstance(zk, ZooKeeperStore)
    assert (zk.hosts, zk.chroot, zk.session_timeout_s) == ("h:2181", "/kafka", 6.0)


def test_a_write_that_cannot_be_saved_is_not_applied(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from kt.broker.metadata import in_process

    async def body() -> None:
        s = InProcessStore(tmp_path / DATA_FILE)
        await s.start()
        await s.create("/a", b"1")
        before = await s.exists("/a")

        def disk_full(path: Path, data: bytes) -> None:
            raise OSError(28, "No space left on device")

        monkeypatch.setattr(in_process, "atomic_write", disk_full)
        with pytest.raises(StoreUnavailableError, match="No space left"):
            await s.multi([SetData("/a", b"2"), Create("/b")])
        with pytest.raises(StoreUnavailableError):
            await s.create("/q-", sequential=True)
        monkeypatch.undo()
        assert await s.get("/a") == (b"1", before)
        assert await s.exists("/b") is None
        assert await s.create("/c") == "/c"
        after = await s.exists("/c")
        assert before is not None and after is not None and after.czxid == before.czxid + 1
        assert await s.create("/q-", sequential=True) == "/q-0000000002"

    run(body())


def test_a_corrupt_data_file_is_store_unavailable(tmp_path: Path) -> None:
    (tmp_path / DATA_FILE).write_text("{not json")

    async def body() -> None:
        with pytest.raises(StoreUnavailableError, match=DATA_FILE):
            await InProcessStore(tmp_path / DATA_FILE).start()

    run(body())


def test_cancelled_and_closed_watches_are_forgotten() -> None:
    async def body() -> None:
        s = InProcessStore()
        other = s.new_session()
        await s.start()
        await other.start()
        w = s.watch_children("/", lambda c: None)
        other.watch_data("/x", lambda d, st: None)
        await asyncio.sleep(0)
        w.cancel()
        await s.create("/a")  # the next change drops the cancelled watch
        await asyncio.sleep(0)
        await other.close()
        assert s._tree.watches == {}

    run(body())
