"""The controller over the real stores: the in-process tree and a real ZooKeeper.

The event logic is pinned by tests/unit/broker/test_controller_events.py over a fake;
here the same controller drives Kafka's znodes through ClusterStore, so the state
znodes, the fencing on /controller_epoch and the watches are the stores' own.
"""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any

from kt.broker.controller.channel import ControllerChannel
from kt.broker.controller.controller import KafkaController
from kt.broker.controller.zk import ZkControllerStore
from kt.broker.metadata import znodes
from kt.broker.metadata.cluster_store import ClusterStore
from kt.protocol import apis
from kt.protocol.codec import Api


class _Link:
    def __init__(self, sent: list[tuple[int, str, Any]], broker_id: int) -> None:
        self.sent, self.broker_id = sent, broker_id

    async def send(self, api: Api, body: Any) -> Any:
        self.sent.append((self.broker_id, api.name, body))
        if api is apis.STOP_REPLICA:
            return apis.STOP_REPLICA.response(error_code=0, partition_errors=[])
        return api.response(error_code=0)

    async def close(self) -> None:
        pass


async def _register(cluster: ClusterStore, broker_id: int) -> int:
    reg = znodes.BrokerRegistration(
        broker_id,
        (znodes.Endpoint("PLAINTEXT", "127.0.0.1", 9000 + broker_id),),
        int(time.time() * 1000),
    )
    return await cluster.register_broker(reg)


async def _until(check: Any, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not await check():
        assert time.monotonic() < deadline, "condition not reached"
        await asyncio.sleep(0.02)


async def _state(store: Any, topic: str, p: int) -> dict[str, Any] | None:
    try:
        data, _ = await store.get(f"/brokers/topics/{topic}/partitions/{p}/state")
    except Exception:
        return None
    doc: dict[str, Any] = json.loads(data)
    return doc


def test_controller_elects_and_fails_over_on_real_stores(sessions: Any) -> None:
    async def go() -> None:
        async with sessions(3) as stores:
            clusters = [ClusterStore(s) for s in stores]
            await clusters[0].ensure_persistent_paths()
            for i, c in enumerate(clusters, start=1):
                await _register(c, i)
            sent: list[tuple[int, str, Any]] = []

            def controller(i: int) -> KafkaController:
                return KafkaController(
                    i,
                    ZkControllerStore(clusters[i - 1]),
                    lambda: ControllerChannel(lambda b: _Link(sent, b), backoff_s=0.01),
                )

            first = controller(1)
            await first.startup()
            await _until(lambda: _async(first.active))
            await clusters[1].create_topic("t", bytes(range(16)), {0: [1, 2, 3], 1: [2, 3, 1]})

            async def elected() -> bool:
                s0, s1 = await _state(stores[0], "t", 0), await _state(stores[0], "t", 1)
                return s0 is not None and s1 is not None

            await _until(elected)
            s0 = await _state(stores[0], "t", 0)
            assert s0 == {"controller_epoch": first.view.epoch, "leader": 1, "version": 1,
                          "leader_epoch": 0, "isr": [1, 2, 3]}  # fmt: skip
            await _until(lambda: _async(any(n == "LeaderAndIsr" and b == 2 for b, n, _ in sent)))

            # Broker 2 dies (its session closes): partition 1's leadership moves to 3.
            await stores[1].close()

            async def moved() -> bool:
                s1 = await _state(stores[0], "t", 1)
                return s1 is not None and s1["leader"] == 3

            await _until(moved)
            s1 = await _state(stores[0], "t", 1)
            assert s1 is not None and s1["isr"] == [3, 1] and s1["leader_epoch"] == 1

            # The controller's broker dies: broker 3 takes over with the next epoch and
            # elects away from broker 1.
            standby = controller(3)
            await standby.startup()
            await asyncio.sleep(0.1)
            assert not standby.active
            epoch = first.view.epoch
            await first.shutdown()
            await stores[0].close()
            await _until(lambda: _async(standby.active))
            assert standby.view.epoch == epoch + 1

            async def away() -> bool:
                s = await _state(stores[2], "t", 0)
                return s is not None and s["leader"] == 3

            await _until(away)
            await standby.shutdown()

    asyncio.run(asyncio.wait_for(go(), 60))


async def _async(value: bool) -> bool:
    return value
