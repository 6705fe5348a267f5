"""ControllerChannel: the controller's ordered, retried requests to each live broker.

Kafka's ControllerChannelManager keeps one queue and one sending thread per live
broker; requests to a broker go out one at a time, in the order the controller
made them, and a request that fails for a network reason is sent again (after a
reconnect and a backoff) until it succeeds or the broker leaves the cluster.
Order matters: a LeaderAndIsr must not overtake the UpdateMetadata the controller
queued before it, and a broker must see a partition's states in epoch order.

Here each broker gets an asyncio queue and a sender task. How bytes reach the
broker is a `BrokerLink`: a TCP connection for other brokers, and the same codec
without a socket for the controller's own broker (single-node mode sends its
LeaderAndIsr to itself through exactly the handlers a remote broker runs).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Protocol

from kt.broker import timeline
from kt.protocol import Struct
from kt.protocol.codec import Api

log = logging.getLogger("kt.broker.controller.channel")

ResponseCallback = Callable[[Struct], Awaitable[None] | None]


class BrokerLink(Protocol):
    """Sends one request to one broker and returns its response."""

    async def send(self, api: Api, body: Any) -> Struct:
        """Send and await the response; raise on any failure to get one."""
        ...

    async def close(self) -> None:
        """Drop the connection (a new send reconnects)."""
        ...


LinkFactory = Callable[[int], BrokerLink]


@dataclass(slots=True)
class _Queued:
    api: Api
    body: Any
    callback: ResponseCallback | None


class _BrokerQueue:
    """One broker's queue and its sender task."""

    def __init__(self, broker_id: int, link: BrokerLink, backoff_s: float) -> None:
        self.broker_id = broker_id
        self.link = link
        self.backoff_s = backoff_s
        self.queue: asyncio.Queue[_Queued] = asyncio.Queue()
        self.task: asyncio.Task[None] | None = None
        # Set by stop(): the retry loop ends even if a cancellation got lost on the way
        self.stopped = False

    def start(self) -> None:
        self.task = asyncio.get_running_loop().create_task(self._run())

    async def _run(self) -> None:
        while True:
            item = await self.queue.get()
            timeline.mark("ctl_send", api=item.api.name, to=self.broker_id)
            response = await self._send_until_answered(item)
            timeline.mark("ctl_answered", api=item.api.name, to=self.broker_id)
            if item.callback is not None:
                try:
                    result = item.callback(response)
                    if asyncio.iscoroutine(result):
                        await result
                except Exception:
                    log.exception(
                        "controller: handling the %s response of broker %d failed",
                        item.api.name, self.broker_id,
                    )  # fmt: skip

    async def _send_until_answered(self, item: _Queued) -> Struct:
        failures = 0
        while True:
            if self.stopped:
                raise asyncio.CancelledError
            try:
                return await self.link.send(item.api, item.body)
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                failures += 1
                # One line per outage, not per retry: a dead broker is normal.
                if failures == 1:
                    log.warning(
                        "controller: %s to broker %d failed (%r); retrying until it is "
                        "answered or the broker leaves", item.api.name, self.broker_id, exc,
                    )  # fmt: skip
                await self.link.close()
                await asyncio.sleep(min(self.backoff_s * failures, 5 * self.backoff_s))

    async def stop(self) -> None:
        self.stopped = True
        if self.task is not None:
            self.task.cancel()
            try:
                await self.task
            except (asyncio.CancelledError, Exception):
                pass
        await self.link.close()


class ControllerChannel:
    """Per-broker ordered request queues of the active controller."""

    def __init__(self, link_factory: LinkFactory, *, backoff_s: float = 0.1) -> None:
        self._link_factory = link_factory
        self._backoff_s = backoff_s
        self._brokers: dict[int, _BrokerQueue] = {}

    @property
    def broker_ids(self) -> list[int]:
        """The brokers with a queue."""
        return sorted(self._brokers)

    def add_broker(self, broker_id: int) -> None:
        """Open a queue to a broker (a no-op when it has one)."""
        if broker_id in self._brokers:
            return
        q = _BrokerQueue(broker_id, self._link_factory(broker_id), self._backoff_s)
        self._brokers[broker_id] = q
        q.start()

    async def remove_broker(self, broker_id: int) -> None:
        """Drop a broker's queue with whatever it still held (it left the cluster)."""
        q = self._brokers.pop(broker_id, None)
        if q is not None:
            await q.stop()

    def send(
        self, broker_id: int, api: Api, body: Any, callback: ResponseCallback | None = None
    ) -> bool:
        """Queue a request; False when the broker has no queue (not live)."""
        q = self._brokers.get(broker_id)
        if q is None:
            return False
        q.queue.put_nowait(_Queued(api, body, callback))
        return True

    def pending(self, broker_id: int) -> int:
        """Requests queued to a broker and not yet sent."""
        q = self._brokers.get(broker_id)
        return q.queue.qsize() if q is not None else 0

    async def close(self) -> None:
        """Stop every sender (the controller resigned or the broker stops)."""
        for broker_id in list(self._brokers):
            await self.remove_broker(broker_id)
