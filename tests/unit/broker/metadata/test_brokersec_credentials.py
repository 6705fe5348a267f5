"""SCRAM credentials in `/config/users` on both coordination stores: Kafka's node
format and notifications, other config keys kept, a second broker's cache following
changes, and the Alter/DescribeUserScramCredentials rules with Kafka's errors."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Coroutine
from typing import Any

from kt.broker.security import scram
from kt.broker.security.credentials import (
    DUPLICATE_RESOURCE,
    RESOURCE_NOT_FOUND,
    UNACCEPTABLE_CREDENTIAL,
    UNSUPPORTED_SASL_MECHANISM,
    CredentialCache,
    Deletion,
    DescribeResult,
    ScramCredentialStore,
    Upsertion,
    UserResult,
    alter_results,
    describe_results,
)

S256, S512 = scram.MECHANISMS["SCRAM-SHA-256"], scram.MECHANISMS["SCRAM-SHA-512"]


def run(coro: Coroutine[Any, Any, Any]) -> Any:
    return asyncio.run(asyncio.wait_for(coro, 60))


async def until(cond: Any, what: str) -> None:
    deadline = asyncio.get_running_loop().time() + 30
    while not cond():
        assert asyncio.get_running_loop().time() < deadline, f"timed out waiting for {what}"
        await asyncio.sleep(0.05)


def test_kafkas_node_and_notification(sessions: Any) -> None:
    async def go() -> None:
        async with sessions(1) as [zk]:
            store = ScramCredentialStore(zk)
            # a node as kafka-configs.sh leaves it, with a quota beside the credential
            await zk.create("/config/users/bob%20smith", json.dumps(
                {"version": 1, "config": {"producer_byte_rate": "1024"}}).encode(),
                make_parents=True)  # fmt: skip
            cred = scram.make_credential(S512, "pw", 8192)
            assert await store.set_credential("bob smith", "SCRAM-SHA-512", cred)
            assert not await store.set_credential("bob smith", "SCRAM-SHA-512", cred)
            data, _ = await zk.get("/config/users/bob%20smith")
            doc = json.loads(data)
            assert doc["version"] == 1
            assert doc["config"]["producer_byte_rate"] == "1024"
            assert doc["config"]["SCRAM-SHA-512"].endswith(",iterations=8192")
            changes = await zk.children("/config/changes")
            assert len(changes) == 1 and changes[0].startswith("config_change_")
            note = json.loads((await zk.get(f"/config/changes/{changes[0]}"))[0])
            assert note == {"version": 2, "entity_path": "users/bob%20smith"}
            assert await store.users() == ["bob smith"]
            assert await store.load_all() == {"bob smith": {"SCRAM-SHA-512": cred}}
            assert await store.delete_credential("bob smith", "SCRAM-SHA-512")
            assert not await store.delete_credential("bob smith", "SCRAM-SHA-512")
            assert await store.load_all() == {}

    run(go())


def test_a_brokers_cache_follows_another_writer(sessions: Any) -> None:
    async def go() -> None:
        async with sessions(2) as [a, b]:
            writer = ScramCredentialStore(a)
            await writer.set_credential("early", "SCRAM-SHA-256", scram.make_credential(S256, "x"))
            cache = CredentialCache(ScramCredentialStore(b), ["SCRAM-SHA-256", "PLAIN"])
            await cache.start()
            assert cache.lookup("SCRAM-SHA-256")("early") is not None
            cred = scram.make_credential(S256, "alice-secret")
            await writer.set_credential("alice", "SCRAM-SHA-256", cred)
            await writer.set_credential("alice", "SCRAM-SHA-512", scram.make_credential(S512, "y"))
            await until(lambda: cache.lookup("SCRAM-SHA-256")("alice") == cred, "alice")
            # SCRAM-SHA-512 is not enabled on this broker: not cached
            assert cache.lookup("SCRAM-SHA-512")("alice") is None
            await writer.delete_credential("early", "SCRAM-SHA-256")
            await until(lambda: cache.lookup("SCRAM-SHA-256")("early") is None, "the deletion")
            # and the cached credential authenticates
            server = scram.ScramServer(S256, cache.lookup("SCRAM-SHA-256"), nonce=lambda: "N")
            assert server.evaluate(b"n,,n=alice,r=c").startswith(b"r=cN,")
            cache.close()

    run(go())


def test_alter_rules_are_kafkas() -> None:
    existing = {"alice": {"SCRAM-SHA-256"}}
    results, dels, ups = alter_results(
        [Deletion("alice", 1), Deletion("bob", 1), Deletion("", 1)],
        [Upsertion("carol", 2, 4096, b"s", b"p"), Upsertion("dave", 1, 100, b"s", b"p"),
         Upsertion("erin", 2, 20000, b"s", b"p"), Upsertion("frank", 9, 4096, b"s", b"p"),
         Upsertion("gina", 1, 4096, b"s", b"p"), Upsertion("gina", 1, 8192, b"s", b"p")],
        existing,
    )  # fmt: skip
    assert results == [
        UserResult("alice"),
        UserResult("bob", RESOURCE_NOT_FOUND,
                   "Attempt to delete a user credential that does not exist"),
        UserResult("", UNACCEPTABLE_CREDENTIAL, "Username must not be empty"),
        UserResult("carol"),
        UserResult("dave", UNACCEPTABLE_CREDENTIAL, "Too few iterations"),
        UserResult("erin", UNACCEPTABLE_CREDENTIAL, "Too many iterations"),
        UserResult("frank", UNSUPPORTED_SASL_MECHANISM, "Unknown SCRAM mechanism"),
        UserResult("gina", DUPLICATE_RESOURCE,
                   "A user credential cannot be altered twice in the same request"),
    ]  # fmt: skip
    assert dels == [Deletion("alice", 1)]
    assert [u.user for u in ups] == ["carol"]


def test_describe_rules_are_kafkas() -> None:
    cred = scram.make_credential(S256, "pw", 8192)
    known = {"bob": {"SCRAM-SHA-256": cred}, "alice": {"SCRAM-SHA-256": cred,
                                                        "SCRAM-SHA-512": cred}}  # fmt: skip
    assert [r.user for r in describe_results(None, known)] == ["alice", "bob"]
    assert describe_results([], known)[0].credentials == ((1, 8192), (2, 8192))
    assert describe_results(["bob", "zed", "bob", ""], known) == [
        DescribeResult("bob", DUPLICATE_RESOURCE, "Cannot describe SCRAM credentials for the "
                       "same user twice in a single request: bob"),
        DescribeResult("zed", RESOURCE_NOT_FOUND,
                       "Attempt to describe a user credential that does not exist: zed"),
        DescribeResult("", RESOURCE_NOT_FOUND, "Username must not be empty"),
    ]  # fmt: skip
