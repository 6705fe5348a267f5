"""Registering /brokers/ids/N at start: the previous run's registration (same
endpoints) is waited out, another broker's is an error, and one that expires between
the failed create and the read of it is simply registered over (the fault campaign
saw a restart fail there: 'already registered by another live broker' for a node
that was gone)."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import Any

import pytest

from kt.broker.membership import ClusterMembership, MembershipError, MembershipSettings
from kt.broker.metadata import znodes
from kt.broker.metadata.cluster_store import BrokerIdInUseError
from kt.broker.services import NodeState

ENDPOINTS = (znodes.Endpoint("PLAINTEXT", "127.0.0.1", 9092),)


class ScriptedCluster:
    """register_broker fails `busy` times; get_broker answers from `owners` in turn."""

    def __init__(self, busy: int, owners: list[tuple[znodes.Endpoint, ...] | None]) -> None:
        self.busy = busy
        self.owners = owners
        self.registered = 0

    async def register_broker(self, reg: Any) -> int:
        if self.busy:
            self.busy -= 1
            raise BrokerIdInUseError("broker id 1 is already registered by another live broker")
        self.registered += 1
        return 4242

    async def get_broker(self, broker_id: int) -> Any:
        endpoints = self.owners.pop(0) if self.owners else None
        if endpoints is None:
            return None
        return SimpleNamespace(registration=SimpleNamespace(endpoints=endpoints))


def _membership(cluster: ScriptedCluster) -> ClusterMembership:
    # Only what registering uses: the node, its listeners, rack and session timeout.
    m = ClusterMembership.__new__(ClusterMembership)
    m._node = NodeState(1, "PLAINTEXT")
    m._advertised_listeners = lambda: [  # type: ignore[assignment,return-value]
        SimpleNamespace(name="PLAINTEXT", host="127.0.0.1", port=9092, protocol="PLAINTEXT")
    ]
    m._settings = MembershipSettings(
        connection_timeout_ms=6000,
        session_timeout_ms=6000,
        rack=None,
        controlled_shutdown_enable=True,
        controlled_shutdown_max_retries=3,
        controlled_shutdown_retry_backoff_ms=5000,
    )
    m.cluster = cluster  # type: ignore[assignment]
    return m


def test_a_registration_gone_before_it_is_read_is_registered_over() -> None:
    cluster = ScriptedCluster(busy=1, owners=[None])
    m = _membership(cluster)
    asyncio.run(m._register())
    assert cluster.registered == 1 and m._node.broker_epoch == 4242


def test_our_previous_registration_is_waited_out() -> None:
    cluster = ScriptedCluster(busy=2, owners=[ENDPOINTS, ENDPOINTS])
    m = _membership(cluster)
    asyncio.run(m._register())
    assert cluster.registered == 1


def test_another_brokers_registration_is_an_error() -> None:
    other = (znodes.Endpoint("PLAINTEXT", "10.0.0.2", 9092),)
    cluster = ScriptedCluster(busy=1, owners=[other])
    with pytest.raises(MembershipError, match="already registered"):
        asyncio.run(_membership(cluster)._register())
