"""Calling request handlers in process: a broker started on a temp dir without sockets
(its single-node cluster joined, its controller running on this harness's event loop),
requests and responses passed through the wire codec (so version rules apply as on
the wire)."""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from pathlib import Path
from typing import Any

from kt.broker.broker import Broker
from kt.broker.config import load_config
from kt.broker.config_settings import handler_settings
from kt.broker.handlers import HANDLERS, RequestContext, load_all, resolve
from kt.broker.metadata_store import TopicInfo
from kt.broker.server import RunningBroker
from kt.broker.services import HandlerServices
from kt.protocol import Struct, decode_request, decode_response, encode_request, encode_response


class InProcessBroker:
    """A started broker and the loop it runs on; attribute access reaches the Broker."""

    def __init__(self, tmp_path: Path, **overrides: str) -> None:
        props = {"log.dirs": str(tmp_path / "data"), "listeners": "PLAINTEXT://127.0.0.1:9092"}
        self.loop = asyncio.new_event_loop()
        self.running = RunningBroker(load_config(None, {**props, **overrides}), network=False)
        self.run(self.running.start())
        self.broker: Broker = self.running.broker

    def run(self, coro: Coroutine[Any, Any, Any]) -> Any:
        """Run a coroutine on the broker's loop."""
        return self.loop.run_until_complete(coro)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.broker, name)

    def create_topic(
        self,
        name: str,
        partitions: int,
        replication_factor: int = 1,
        configs: dict[str, str] | None = None,
        **kw: Any,
    ) -> TopicInfo:
        """Create a topic and wait for its leaders (TopicError as the API's)."""
        info: TopicInfo = self.run(
            self.broker.admin.create_topic(name, partitions, replication_factor, configs, **kw)
        )
        return info

    def alter_topic_configs(self, name: str, configs: dict[str, str]) -> None:
        """Replace a topic's overrides."""
        self.run(self.broker.admin.alter_topic_configs(name, configs))

    def close(self) -> None:
        """Stop the broker (without a controlled shutdown) and close the loop."""
        self.run(self.running.stop(controlled=False))
        self.loop.close()


def open_broker(tmp_path: Path, **overrides: str) -> InProcessBroker:
    """A started broker on `tmp_path` (not listening; close it with `close()`)."""
    return InProcessBroker(tmp_path, **overrides)


async def resolve_call(call: Coroutine[Any, Any, Any]) -> Any:
    """A handler's response body, a deferred one awaited."""
    return await resolve(await call)


def call(
    broker: InProcessBroker,
    api: Any,
    version: int,
    body: Any,
    services: HandlerServices | None = None,
) -> Struct | None:
    """One request through its handler: the decoded response body (None: no response).
    `services` replaces the broker's (a test giving a handler only what it uses)."""
    load_all()
    frame = encode_request(api.key, version, 1, body, "kt-test", size_prefix=False)
    header, request = decode_request(bytearray(frame))
    assert request is not None
    given = broker.broker.services if services is None else services
    ctx = RequestContext(given, header, "127.0.0.1", 1)
    response = broker.run(resolve_call(HANDLERS[api.key](ctx, request)))
    if response is None:
        return None
    data = encode_response(api.key, version, 1, response, size_prefix=False)
    return decode_response(api.key, version, data)[1]


class ReplicasOnly:
    """No broker: a LogManager and a ReplicaManager (with its log-dir mover) on a
    temp dir, leading the topics it was asked for, and the config; a handler that
    reads only `replicas` and `settings` gets `HandlerServices.only(replicas=...,
    settings=...)` (the handlers' settings built from the config) and nothing else
    (any other service fails loudly when touched)."""

    TOPIC_ID = bytes(range(16))

    def __init__(self, tmp_path: Path, topics: dict[str, int], **overrides: str) -> None:
        from kt.broker.log_manager import LogManager
        from kt.broker.metadata.cache import LiveBroker, PartitionView
        from kt.broker.replica_manager import ReplicaManager
        from kt.broker.replication.alter_log_dirs import ReplicaAlterLogDirsManager
        from kt.storage.checkpoint import TopicPartition

        props = {"log.dirs": str(tmp_path / "data"), "listeners": "PLAINTEXT://127.0.0.1:9092"}
        self.config = load_config(None, {**props, **overrides})
        self.node_id = self.config.node_id
        self.loop = asyncio.new_event_loop()
        self.logs = LogManager(self.config.log_dirs, self.node_id, self.config.log_config)
        self.logs.lock_and_validate(None)
        self.logs.load_logs({}, 1)
        self.replica_manager = rm = ReplicaManager(
            self.node_id,
            self.logs,
            txn_verification_enabled=self.config.transaction_partition_verification_enable,
            # As the root wires them: the mover (built next) needs the replica manager.
            move_replica=lambda tp, path: self.mover.alter(tp, path),
        )
        # Moves between log dirs, unthrottled.
        self.mover = ReplicaAlterLogDirsManager(rm, self.logs, lambda: None)
        view = PartitionView(leader=self.node_id, leader_epoch=0, isr=(self.node_id,),
                             replicas=(self.node_id,))  # fmt: skip
        states = []
        for topic, count in topics.items():
            for p in range(count):
                tp = TopicPartition(topic, p)
                rm.create_partition(tp, self.TOPIC_ID, self.logs.create(tp, self.TOPIC_ID, {}))
                states.append((topic, self.TOPIC_ID, p, view))
        live = [LiveBroker(self.node_id, ())]
        rm.metadata_cache.update(
            controller_id=self.node_id, controller_epoch=1, brokers=live, partitions=states
        )
        self.services = HandlerServices.only(replicas=rm, settings=handler_settings(self.config))

    def run(self, coro: Coroutine[Any, Any, Any]) -> Any:
        """Run a coroutine on this harness's loop."""
        return self.loop.run_until_complete(coro)

    def call(self, api: Any, version: int, body: Any) -> Struct | None:
        """One request through its handler with only these services."""
        return call_with(self.services, api, version, body, self.loop)

    def close(self) -> None:
        """Close the logs and the loop."""
        self.replica_manager.close()
        self.logs.shutdown()
        self.loop.close()


def call_with(
    services: HandlerServices,
    api: Any,
    version: int,
    body: Any,
    loop: asyncio.AbstractEventLoop | None = None,
) -> Struct | None:
    """One request through its handler given only `services` (no broker; e.g.
    `HandlerServices.only(cluster=...)`), on `loop` or a loop of its own: the decoded
    response body (None: no response)."""
    load_all()
    frame = encode_request(api.key, version, 1, body, "kt-test", size_prefix=False)
    header, request = decode_request(bytearray(frame))
    assert request is not None
    ctx = RequestContext(services, header, "127.0.0.1", 1)
    own = loop is None
    run_on = asyncio.new_event_loop() if loop is None else loop
    try:
        response = run_on.run_until_complete(resolve_call(HANDLERS[api.key](ctx, request)))
    finally:
        if own:
            run_on.close()
    if response is None:
        return None
    data = encode_response(api.key, version, 1, response, size_prefix=False)
    return decode_response(api.key, version, data)[1]
