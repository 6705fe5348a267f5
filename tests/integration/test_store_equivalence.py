"""The in-process store behaves like ZooKeeper: random operation sequences, both stores.

Hypothesis draws sequences of creates, sets, deletes and multis over a few paths; each
is applied to a fresh InProcessStore and to a real ZooKeeper, and every result (value
or error type) and the final tree (data, version, children) must be the same.
"""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kt.broker.metadata.in_process import InProcessStore
from kt.broker.metadata.store import (
    Check,
    CoordinationStore,
    Create,
    Delete,
    Op,
    SetData,
    Stat,
    StoreError,
    TransactionFailedError,
)
from kt.broker.metadata.zookeeper import ZooKeeperStore

pytestmark = pytest.mark.integration

PATHS = ["/a", "/b", "/a/x", "/a/y", "/b/x", "/a/x/z"]
paths = st.sampled_from(PATHS)
datas = st.sampled_from([b"", b"1", b"two"])
versions = st.sampled_from([-1, 0, 1, 2])

creates = st.builds(Create, paths, datas, ephemeral=st.booleans(), sequential=st.booleans())
sets = st.builds(SetData, paths, datas, versions)
checks = st.builds(Check, paths, versions)
deletes = st.builds(Delete, paths, versions)
single_ops = st.one_of(creates, sets, deletes)
steps = st.one_of(
    single_ops.map(lambda op: ("one", op)),
    st.lists(st.one_of(creates, sets, checks, deletes), min_size=1, max_size=3).map(
        lambda ops: ("multi", ops)
    ),
)


def _rebase(op: Op, root: str) -> Op:
    if isinstance(op, Create):
        return Create(root + op.path, op.data, op.ephemeral, op.sequential)
    if isinstance(op, SetData):
        return SetData(root + op.path, op.data, op.version)
    if isinstance(op, Check):
        return Check(root + op.path, op.version)
    return Delete(root + op.path, op.version)


def _norm(value: object, root: str) -> object:
    if isinstance(value, Stat):
        return ("stat", value.version, value.num_children)
    if isinstance(value, str):
        return value.removeprefix(root)
    if isinstance(value, list):
        return [_norm(v, root) for v in value]
    return value


async def _apply(store: CoordinationStore, root: str, step: tuple[str, Any]) -> object:
    kind, arg = step
    try:
        if kind == "multi":
            return _norm(await store.multi([_rebase(op, root) for op in arg]), root)
        op = _rebase(arg, root)
        if isinstance(op, Create):
            return _norm(
                await store.create(
                    op.path, op.data, ephemeral=op.ephemeral, sequential=op.sequential
                ),
                root,
            )
        if isinstance(op, SetData):
            return _norm(await store.set(op.path, op.data, op.version), root)
        assert isinstance(op, Delete)
        await store.delete(op.path, op.version)
        return None
    except TransactionFailedError as e:
        return ("failed", [type(r).__name__ for r in e.results])
    except StoreError as e:
        return ("error", type(e).__name__)


async def _snapshot(store: CoordinationStore, root: str) -> dict[str, object]:
    out: dict[str, object] = {}

    async def walk(path: str) -> None:
        data, stat = await store.get(path)
        out[path.removeprefix(root) or "/"] = (data, stat.version, stat.ephemeral_owner != 0)
        for name in await store.children(path):
            await walk(f"{path}/{name}")

    await walk(root)
    return out


@settings(
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(st.lists(steps, min_size=1, max_size=12))
def test_in_process_store_matches_zookeeper(zookeeper: str, sequence: list[Any]) -> None:
    async def body() -> None:
        zk = ZooKeeperStore(zookeeper)
        mem = InProcessStore()
        await zk.start(10)
        await mem.start()
        try:
            root = f"/r{uuid.uuid4().hex[:8]}"
            await zk.create(root)
            await mem.create(root)
            for step in sequence:
                expected = await _apply(zk, root, step)
                assert await _apply(mem, root, step) == expected, step
            assert await _snapshot(mem, root) == await _snapshot(zk, root)
        finally:
            await zk.close()
            await mem.close()

    asyncio.run(asyncio.wait_for(body(), 60))
