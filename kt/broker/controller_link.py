"""ControllerLink: a broker's requests to whichever broker is the controller.

Kafka's BrokerToControllerChannelManager: the broker finds the active controller
(from its metadata cache, which UpdateMetadata keeps current, or through a lookup
the owner provides, e.g. /controller in ZooKeeper), keeps one connection to it,
and when the controller moves or the connection drops, reconnects to the new one.
A request is retried on connection failures until its deadline; what the
controller answers (NOT_CONTROLLER included) is the caller's to judge, because
retrying a request that was applied is the caller's decision, not the link's.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any

from kt.client.core import BrokerConnection
from kt.client.security import SecurityConfig
from kt.protocol import Struct
from kt.protocol.codec import Api

log = logging.getLogger("kt.broker.controller_link")

# (controller id, host, port) or None while no controller is known.
ControllerLookup = Callable[[], Awaitable[tuple[int, str, int] | None]]


class ControllerUnavailableError(Exception):
    """No controller answered before the deadline."""


class ControllerLink:
    """One connection to the current controller, re-aimed when it moves."""

    def __init__(
        self,
        lookup: ControllerLookup,
        *,
        client_id: str,
        backoff_s: float = 0.1,
        request_timeout_s: float = 30.0,
        security: SecurityConfig | None = None,
    ) -> None:
        self._lookup = lookup
        # the inter-broker listener's TLS/SASL, as a client of that listener
        self._security = security
        self._client_id = client_id
        self._backoff_s = backoff_s
        self._request_timeout_s = request_timeout_s
        self._conn: BrokerConnection | None = None
        self._target: tuple[int, str, int] | None = None
        self._lock = asyncio.Lock()

    async def send(self, api: Api, body: Any, *, timeout_s: float | None = None) -> Struct:
        """Send to the controller and return its response; retried on connection
        failures (with the controller looked up again) until `timeout_s`."""
        deadline = time.monotonic() + (timeout_s or self._request_timeout_s)
        failures = 0
        while True:
            try:
                conn = await self._connection()
                remaining = max(0.1, deadline - time.monotonic())
                return await conn.request(api, body, timeout=remaining)
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                failures += 1
                await self._drop()
                if time.monotonic() >= deadline:
                    raise ControllerUnavailableError(
                        f"no controller answered {api.name}: {exc}"
                    ) from None
                if failures == 1:
                    log.info("%s to the controller failed (%s); retrying", api.name, exc)
                await asyncio.sleep(min(self._backoff_s * failures, 1.0))

    async def controller_moved(self) -> None:
        """Drop the connection (the caller learned that the controller moved)."""
        await self._drop()

    async def _connection(self) -> BrokerConnection:
        async with self._lock:
            target = await self._lookup()
            if target is None:
                raise ControllerUnavailableError("no controller is known")
            if self._conn is not None and self._target == target and self._conn.connected:
                return self._conn
            if self._conn is not None:
                await self._conn.close()
            conn = BrokerConnection(
                target[1],
                target[2],
                node_id=target[0],
                client_id=self._client_id,
                request_timeout=self._request_timeout_s,
                security=self._security,
            )
            await conn.connect()
            self._conn, self._target = conn, target
            return conn

    async def _drop(self) -> None:
        async with self._lock:
            if self._conn is not None:
                await self._conn.close()
            self._conn = None
            self._target = None

    async def close(self) -> None:
        """Close the connection."""
        await self._drop()
