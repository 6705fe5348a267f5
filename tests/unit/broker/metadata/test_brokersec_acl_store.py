"""ACLs in Kafka's ZooKeeper layout, on both coordination stores (the ZooKeeper
variant is integration): the node paths and JSON, the change notifications, racing
writers, and two brokers' caches following each other's changes."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Coroutine
from typing import Any

import pytest

from kt.broker.security import acl_store
from kt.broker.security.acl import (
    AccessControlEntry,
    AclOperation,
    PatternType,
    PermissionType,
    ResourcePattern,
    ResourceType,
)
from kt.broker.security.acl_store import AclCache, CoordinationAclStore
from kt.broker.security.authorizer import AclAuthorizer

READ = AccessControlEntry("User:alice", "*", AclOperation.READ, PermissionType.ALLOW)
DENY = AccessControlEntry("User:bob", "10.0.0.1", AclOperation.ALL, PermissionType.DENY)
ORDERS = ResourcePattern(ResourceType.TOPIC, "orders", PatternType.LITERAL)
PAY = ResourcePattern(ResourceType.TOPIC, "pay-", PatternType.PREFIXED)
TXN = ResourcePattern(ResourceType.TRANSACTIONAL_ID, "tx", PatternType.LITERAL)


def run(coro: Coroutine[Any, Any, Any]) -> Any:
    return asyncio.run(asyncio.wait_for(coro, 60))


async def until(cond: Any, what: str, timeout: float = 30.0) -> None:
    deadline = asyncio.get_running_loop().time() + timeout
    while not cond():
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.05)


def test_codecs_are_kafkas() -> None:
    assert acl_store.acl_path(ORDERS) == "/kafka-acl/Topic/orders"
    assert acl_store.acl_path(PAY) == "/kafka-acl-extended/prefixed/Topic/pay-"
    assert acl_store.acl_path(TXN) == "/kafka-acl/TransactionalId/tx"
    data = acl_store.encode_acls([READ])
    assert json.loads(data) == {
        "version": 1,
        "acls": [
            {"principal": "User:alice", "permissionType": "Allow", "operation": "Read", "host": "*"}
        ],
    }
    # Kafka's readers take upper case without underscores too, in any key order
    kafka_wrote = (b'{"acls":[{"host":"10.0.0.1","operation":"ALL","permissionType":"DENY",'
                   b'"principal":"User:bob"},{"operation":"IDEMPOTENTWRITE","host":"*",'
                   b'"principal":"User:p","permissionType":"Allow"}],"version":1}')  # fmt: skip
    assert acl_store.decode_acls(kafka_wrote) == {
        DENY, AccessControlEntry("User:p", "*", AclOperation.IDEMPOTENT_WRITE,
                                 PermissionType.ALLOW)}  # fmt: skip
    with pytest.raises(ValueError):
        acl_store.decode_acls(b'{"version":2,"acls":[]}')
    assert acl_store.change_payload(ORDERS) == ("/kafka-acl-changes", b"TOPIC:orders")
    root, payload = acl_store.change_payload(PAY)
    assert root == "/kafka-acl-extended-changes"
    assert json.loads(payload) == {"version": 1, "resourceType": "TOPIC", "name": "pay-",
                                   "patternType": "PREFIXED"}  # fmt: skip
    assert acl_store.decode_change(root, payload) == PAY
    assert acl_store.decode_change("/kafka-acl-changes", b"Topic:a:b") == ResourcePattern(
        ResourceType.TOPIC, "a:b", PatternType.LITERAL)  # fmt: skip


def test_layout_updates_and_notifications(sessions: Any) -> None:
    async def go() -> None:
        async with sessions(1) as [zk]:
            store = CoordinationAclStore(zk)
            assert await store.start() == {}
            assert "Topic" in await zk.children("/kafka-acl")
            assert "TransactionalId" in await zk.children("/kafka-acl-extended/prefixed")
            assert await store.update(ORDERS, lambda cur: cur | {READ})
            assert not await store.update(ORDERS, lambda cur: cur | {READ})  # no change
            assert await store.update(PAY, lambda cur: cur | {DENY})
            data, _ = await zk.get("/kafka-acl/Topic/orders")
            assert acl_store.decode_acls(data) == {READ}
            lit = await zk.children("/kafka-acl-changes")
            ext = await zk.children("/kafka-acl-extended-changes")
            assert len(lit) == 1 and lit[0].startswith("acl_changes_") and len(lit[0]) == 22
            assert (await zk.get(f"/kafka-acl-changes/{lit[0]}"))[0] == b"TOPIC:orders"
            assert len(ext) == 1
            assert await store.start() == {ORDERS: {READ}, PAY: {DENY}}
            # emptied: the node is deleted
            assert await store.update(ORDERS, lambda cur: frozenset())
            assert await zk.exists("/kafka-acl/Topic/orders") is None

    run(go())


def test_racing_writers_lose_nothing(sessions: Any) -> None:
    async def go() -> None:
        async with sessions(2) as [a, b]:
            sa, sb = CoordinationAclStore(a), CoordinationAclStore(b)
            await sa.start()
            entries = [AccessControlEntry(f"User:u{i}", "*", AclOperation.READ,
                                          PermissionType.ALLOW) for i in range(12)]  # fmt: skip
            await asyncio.gather(*(
                (sa if i % 2 else sb).update(ORDERS, lambda cur, e=e: cur | {e})
                for i, e in enumerate(entries)))  # fmt: skip
            assert await sa.read(ORDERS) == set(entries)

    run(go())


def test_caches_follow_each_others_changes(sessions: Any) -> None:
    async def go() -> None:
        async with sessions(2) as [a, b]:
            seed = CoordinationAclStore(a)
            await seed.start()
            await seed.update(TXN, lambda cur: cur | {READ})
            auth_a, auth_b = AclAuthorizer(), AclAuthorizer()
            cache_a = AclCache(auth_a, CoordinationAclStore(a))
            cache_b = AclCache(auth_b, CoordinationAclStore(b))
            await cache_a.start()
            await cache_b.start()
            assert auth_b.acls(TXN) == {READ}
            await cache_a.store.update(ORDERS, lambda cur: cur | {READ})
            await until(lambda: auth_b.acls(ORDERS) == {READ}, "b to see the literal ACL")
            await cache_b.store.update(PAY, lambda cur: cur | {DENY})
            await until(lambda: auth_a.acls(PAY) == {DENY}, "a to see the prefixed ACL")
            assert not auth_a.explain("User:bob", "10.0.0.1", AclOperation.READ,
                                      ResourceType.TOPIC, "pay-x").allowed  # fmt: skip
            await cache_b.store.update(ORDERS, lambda cur: frozenset())
            await until(lambda: not auth_a.acls(ORDERS), "a to see the removal")
            cache_a.close()
            cache_b.close()

    run(go())


def test_old_notifications_are_purged(sessions: Any) -> None:
    async def go() -> None:
        async with sessions(1) as [zk]:
            now = [0.0]
            store = CoordinationAclStore(zk, clock=lambda: now[0])
            await store.start()
            seen: list[ResourcePattern] = []
            store.watch(seen.append)
            await store.update(ORDERS, lambda cur: cur | {READ})
            await until(lambda: seen == [ORDERS], "the notification")
            now[0] = acl_store.NOTIFICATION_EXPIRY_S + 1
            await store.update(TXN, lambda cur: cur | {READ})
            await until(lambda: len(seen) == 2, "the second notification")

            async def purged() -> bool:
                return len(await zk.children("/kafka-acl-changes")) == 1

            deadline = asyncio.get_running_loop().time() + 30
            while not await purged():
                assert asyncio.get_running_loop().time() < deadline, "not purged"
                await asyncio.sleep(0.05)
            store.close()

    run(go())
