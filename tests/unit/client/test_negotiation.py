"""Version negotiation and the error paths a broker lacking an API takes (issue 19, §2).

The group membership APIs stop at the versions librdkafka sends (librdkafka's mock
cluster advertises JoinGroup v6 but parses v5); a missing API is an
UnsupportedApiError naming the API and the broker; parallel requests are cancelled
when one fails, so nothing is left running."""

from __future__ import annotations

import asyncio

import pytest

from kt.client import BrokerConnection, KafkaError, UnsupportedApiError
from kt.client.core import gather_or_cancel
from kt.protocol import apis


def connection(versions: dict[int, tuple[int, int]], node_id: int = 2) -> BrokerConnection:
    conn = BrokerConnection("127.0.0.1", 9092, node_id=node_id)
    conn.broker_versions = versions
    return conn


def test_group_apis_stop_at_librdkafkas_versions() -> None:
    conn = connection({
        apis.JOIN_GROUP.key: (0, 9),
        apis.SYNC_GROUP.key: (0, 5),
        apis.HEARTBEAT.key: (0, 4),
        apis.LEAVE_GROUP.key: (0, 5),
        apis.OFFSET_COMMIT.key: (0, 8),
        apis.FETCH.key: (0, 12),
    })  # fmt: skip
    assert conn.version_for(apis.JOIN_GROUP) == 5
    assert conn.version_for(apis.SYNC_GROUP) == 3
    assert conn.version_for(apis.HEARTBEAT) == 3
    assert conn.version_for(apis.LEAVE_GROUP) == 2
    # the others: the highest both speak, as before
    assert conn.version_for(apis.OFFSET_COMMIT) == 8
    assert conn.version_for(apis.FETCH) == 12
    # a broker offering less still gets its own highest
    assert connection({apis.JOIN_GROUP.key: (0, 2)}).version_for(apis.JOIN_GROUP) == 2


def test_a_missing_api_names_the_api_and_the_broker() -> None:
    with pytest.raises(UnsupportedApiError) as exc:
        connection({}).version_for(apis.LIST_GROUPS)
    err = exc.value
    assert isinstance(err, KafkaError) and not err.retriable
    assert err.api_name == "ListGroups" and err.broker == "broker 2 (127.0.0.1:9092)"
    assert str(err) == (
        "broker 2 (127.0.0.1:9092) does not support the ListGroups API (UNSUPPORTED_VERSION)"
    )
    # before the broker's id is known (the bootstrap connection)
    with pytest.raises(UnsupportedApiError, match=r"^the broker at 127\.0\.0\.1:9092 does not"):
        connection({}, node_id=-1).version_for(apis.LIST_GROUPS)


def test_no_version_in_common_says_both_ranges() -> None:
    lo = apis.LIST_GROUPS.max_version + 1
    with pytest.raises(UnsupportedApiError) as exc:
        connection({apis.LIST_GROUPS.key: (lo, lo + 2)}).version_for(apis.LIST_GROUPS)
    assert f"offers ListGroups v{lo}-{lo + 2}, kt speaks v" in str(exc.value)


def test_gather_or_cancel_leaves_nothing_running() -> None:
    async def go() -> None:
        stopped = asyncio.Event()

        async def slow() -> int:
            try:
                await asyncio.sleep(3600)
            finally:
                stopped.set()
            return 1

        async def failing() -> int:
            await asyncio.sleep(0)
            raise UnsupportedApiError("ListGroups", "broker 1 (h:1)")

        async def also_failing() -> int:
            await asyncio.sleep(0)
            raise KafkaError(7, "other")

        with pytest.raises(UnsupportedApiError):
            await gather_or_cancel(slow(), failing(), also_failing())
        assert stopped.is_set()
        me = asyncio.current_task()
        assert [t for t in asyncio.all_tasks() if t is not me] == []
        assert await gather_or_cancel(asyncio.sleep(0, 1), asyncio.sleep(0, 2)) == [1, 2]

    asyncio.run(go())
