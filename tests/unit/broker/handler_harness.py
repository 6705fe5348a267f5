"""Calling request handlers in process, requests and responses passed through the wire
codec (so version rules apply as on the wire) and answered by the dispatcher (the one
error path: what a handler raises becomes the request's error response).

A handler's unit test builds only the services that handler reads and hands them over
as `HandlerServices.only(...)` (`call_with`, `dispatch_with`): `ReplicasOnly` (a log
manager and a replica manager leading the topics asked for, the topics view over its
metadata cache, this node), `group_coordinator()` (a group coordinator alone over an
in-memory record store). Any service not given fails the test when touched.

Tests of a flow across services start the whole broker instead (`open_broker`: on a
temp dir without sockets, its single-node cluster joined, its controller running on
this harness's event loop) and say why in their module docstring."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Coroutine
from pathlib import Path
from typing import Any

from kt.broker.broker import Broker
from kt.broker.config import load_config
from kt.broker.config_settings import handler_settings
from kt.broker.dispatcher import RequestDispatcher
from kt.broker.handlers import resolve
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
    """One request through its handler, answered by the dispatcher as on the wire
    (what the handler raises becomes the request's error response): the decoded
    response body (None: no response). `services` replaces the broker's (a test
    giving a handler only what it uses)."""
    given = broker.broker.services if services is None else services
    return dispatch_with(given, api, version, body, broker.loop)


class ReplicasOnly:
    """No broker: a LogManager and a ReplicaManager (with its log-dir mover) on a
    temp dir, leading the topics it was asked for, the topics view over its
    metadata cache, this node, and the config. A test hands a handler only what it
    reads: `services` is `HandlerServices.only(replicas=..., settings=...)` (the
    handlers' settings built from the config);
    `only(...)` is the replica manager and the services named (`topics=b.topics`,
    `node=b.node`, ...); any other service fails loudly when touched.

    Topics are made as the controller makes them (`add_topic`): their overrides
    where the replica manager reads a new replica's config, a LeaderAndIsr making
    this broker the leader (so a log dir a move asked for first is used), then an
    UpdateMetadata naming every topic."""

    TOPIC_ID = bytes(range(16))

    def __init__(
        self,
        tmp_path: Path,
        topics: dict[str, int] | None = None,
        configs: dict[str, dict[str, str]] | None = None,
        *,
        move_rate: float | None = None,
        **overrides: str,
    ) -> None:
        from kt.broker.log_manager import LogManager
        from kt.broker.metadata.cache import MetadataCache
        from kt.broker.metadata.topics import TopicsView
        from kt.broker.replica_manager import ReplicaManager
        from kt.broker.replication.alter_log_dirs import ReplicaAlterLogDirsManager
        from kt.broker.services import NodeState

        props = {"log.dirs": str(tmp_path / "data"), "listeners": "PLAINTEXT://127.0.0.1:9092"}
        self.config = load_config(None, {**props, **overrides})
        self.node_id = self.config.node_id
        self.node = NodeState(self.node_id, "PLAINTEXT")
        self.node.cluster_id = "kt-test-cluster"
        self.loop = asyncio.new_event_loop()
        self.logs = LogManager(self.config.log_dirs, self.node_id, self.config.log_config)
        self.logs.lock_and_validate(None)
        self.logs.load_logs({}, 1)
        self.cache = MetadataCache()
        self.topics = TopicsView(self.cache)
        self.replica_manager = rm = ReplicaManager(
            self.node_id,
            self.logs,
            cache=self.cache,
            # A new replica's log gets its topic's overrides, as the root's TopicConfigs gives.
            topic_configs=lambda topic: dict(self.topics.configs.get(topic, {})),
            txn_verification_enabled=self.config.transaction_partition_verification_enable,
            # As the root wires them: the mover (built next) needs the replica manager.
            move_replica=lambda tp, path: self.mover.alter(tp, path),
        )
        # Moves between log dirs, at `move_rate` bytes/s (None: unthrottled).
        self.mover = ReplicaAlterLogDirsManager(rm, self.logs, lambda: move_rate)
        self._states: list[tuple[str, bytes, int, Any]] = []
        # The controller's first view (this broker alone, no topics yet): ready.
        self._update_metadata()
        for topic, count in (topics or {}).items():
            self.add_topic(topic, count, (configs or {}).get(topic))
        self.services = HandlerServices.only(replicas=rm, settings=handler_settings(self.config))

    def only(self, **more: Any) -> HandlerServices:
        """`replicas` plus the services named (e.g. `topics=self.topics`)."""
        return HandlerServices.only(replicas=self.replica_manager, **more)

    def add_topic(self, name: str, partitions: int, configs: dict[str, str] | None = None) -> None:
        """Create a topic led by this broker, as the controller would: its overrides,
        a LeaderAndIsr, then an UpdateMetadata with every topic so far."""
        from kt.broker.metadata.cache import PartitionView
        from kt.broker.replica_manager import PartitionStateChange
        from kt.storage.checkpoint import TopicPartition

        topic_id = self.TOPIC_ID if not self._states else uuid.uuid4().bytes
        self.topics.set_configs(name, configs or {})
        me = self.node_id
        changes = [
            PartitionStateChange(TopicPartition(name, p), topic_id, 1, me, 0, (me,), 0, (me,),
                                 is_new=True)
            for p in range(partitions)
        ]  # fmt: skip
        error, results = self.run(
            self.replica_manager.become_leader_or_follower(me, 1, -1, changes, {})
        )
        assert error == 0 and not any(results.values()), results
        view = PartitionView(leader=me, leader_epoch=0, isr=(me,), replicas=(me,))
        self._states += [(name, topic_id, p, view) for p in range(partitions)]
        self._update_metadata()

    def _update_metadata(self) -> None:
        from kt.broker.metadata.cache import Endpoint, LiveBroker

        me = self.node_id
        live = [LiveBroker(me, (Endpoint("PLAINTEXT", "127.0.0.1", 9092),))]
        assert self.replica_manager.update_metadata(me, 1, -1, live, self._states) == 0

    def run(self, coro: Coroutine[Any, Any, Any]) -> Any:
        """Run a coroutine on this harness's loop."""
        return self.loop.run_until_complete(coro)

    def call(
        self, api: Any, version: int, body: Any, services: HandlerServices | None = None
    ) -> Struct | None:
        """One request through its handler with only these services (or `services`)."""
        return call_with(self.services if services is None else services, api, version, body,
                         self.loop)  # fmt: skip

    def close(self) -> None:
        """Stop the moves, close the logs and the loop."""
        self.run(self.mover.stop())
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
    `HandlerServices.only(cluster=...)`), on `loop` or a loop of its own, answered
    by the dispatcher: the decoded response body (None: no response)."""
    return dispatch_with(services, api, version, body, loop)


class _LoudDispatcher(RequestDispatcher):
    """The dispatcher, except that an AssertionError (a test's assertion, or a
    handler touching a service the test did not give it: `HandlerServices.only`)
    fails the test instead of being answered UNKNOWN_SERVER_ERROR."""

    def answer_error(self, header: Any, body: Struct, exc: Exception, client_host: str) -> Any:
        if isinstance(exc, AssertionError):
            raise exc
        return super().answer_error(header, body, exc, client_host)


def dispatch_with(
    services: HandlerServices,
    api: Any,
    version: int,
    body: Any,
    loop: asyncio.AbstractEventLoop | None = None,
    **connection: str,
) -> Struct | None:
    """As `call_with`, through the RequestDispatcher (the one error path): what the
    handler raises comes back as the request's error response; CloseConnection
    (no response may be sent) is raised. `connection` gives the `principal` and
    `listener` the network layer would (an authorizer checks only those)."""
    frame = encode_request(api.key, version, 1, body, "kt-test", size_prefix=False)
    header, request = decode_request(bytearray(frame))
    assert request is not None
    dispatcher = _LoudDispatcher(services)
    own = loop is None
    run_on = asyncio.new_event_loop() if loop is None else loop
    try:
        coro = dispatcher.dispatch(header, request, "127.0.0.1", 1, **connection)
        response = run_on.run_until_complete(resolve_call(coro))
    finally:
        if own:
            run_on.close()
    if response is None:
        return None
    data = encode_response(api.key, version, 1, response, size_prefix=False)
    return decode_response(api.key, version, data)[1]


async def group_coordinator(partitions: int = 1, **settings: Any) -> Any:
    """A started GroupCoordinator alone: its records in memory (a `MemoryRecordStore`
    of `partitions` partitions, all led here), no log, no broker."""
    from kt.broker.coordinator_log import MemoryRecordStore
    from kt.broker.groups import CoordinatorSettings, GroupCoordinator

    given = {"initial_rebalance_delay_ms": 0, **settings}
    coord = GroupCoordinator(CoordinatorSettings(**given), MemoryRecordStore(partitions))
    await coord.start()
    return coord
