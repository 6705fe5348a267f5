"""`ClusterSampler`: one `ClusterSnapshot` of a cluster per call, in as few round trips
as the protocol allows.

A refresh is two round trips deep, everything else runs side by side:

- Metadata (brokers, controller, topics, partitions, leaders, replicas, ISR,
  offline replicas, topic ids), then, per leader, ListOffsets earliest and
  latest (two requests: Kafka refuses a partition twice in one request), per
  broker DescribeLogDirs, and one DescribeConfigs for every topic;
- at the same time, per broker (known from the previous refresh), ListGroups, then
  DescribeGroups for all of that broker's groups and one OffsetFetch v8 carrying
  all of them (one request per group on brokers older than v8);
- one ListPartitionReassignments to the controller. The progress of the adding
  replicas comes from the DescribeLogDirs above (no request of its own); only while
  reassignments are in progress, or replication throttles are set, a third round
  trip asks each broker for its throttle rates (DescribeConfigs).

The sampler runs its client on a private event loop in a thread of its own:
`sample()` may be awaited from any event loop (a Textual worker's included),
and decoding large responses (thousands of partitions) never stalls the
caller's loop, which stays free to draw and take input.

Failures never raise: a cluster that cannot be reached yields a snapshot with
`error` set, and a request that failed while others worked leaves its fields
unknown (-1) with a line in `warnings`. After any connection failure or timeout the
client is thrown away, so the next refresh reconnects from the bootstrap list
rather than waiting on a dead or wedged socket.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import threading
import time
from collections.abc import Awaitable, Coroutine
from dataclasses import dataclass, field, replace
from typing import Any, TypeVar

from kt.admin.describe import (
    GroupMember,
    consumer_protocol,
    group_description,
    log_dir_usage,
    min_insync_replicas,
    replica_sizes,
)
from kt.admin.reassignment import LISTS, RATES, replica_progress
from kt.client import BrokerInfo as ClientBroker
from kt.client import (
    KafkaClient,
    KafkaConnectionError,
    KafkaError,
    KafkaTimeoutError,
    SecurityConfig,
)
from kt.client import LogDirInfo as ClientLogDir
from kt.client.admin import RESOURCE_BROKER, RESOURCE_TOPIC, log_dirs_of
from kt.client.groups import assignment_pairs
from kt.protocol import apis
from kt.protocol.errors import DecodeError, ErrorCode, error_for_code
from kt.protocol.schema import Struct
from kt.tui.model import (
    BrokerInfo,
    BrokerThrottle,
    ClusterSnapshot,
    GroupInfo,
    OpenTransaction,
    PartitionInfo,
    ReassignmentInfo,
    TopicInfo,
    TransactionInfo,
)

T = TypeVar("T")

TopicPartition = tuple[str, int]

EARLIEST = -2
LATEST = -1
#: config_source of a topic's own override
DYNAMIC_TOPIC_CONFIG = 1
#: ListOffsets isolation levels (read_committed's latest is the last stable offset)
READ_UNCOMMITTED = 0
READ_COMMITTED = 1
#: the transaction state DescribeTransactions is asked about (the others have no
#: transaction running)
ONGOING = "Ongoing"
#: errors after which the connections are not to be trusted any more
_TRANSPORT_ERRORS = (KafkaConnectionError, KafkaTimeoutError, OSError)


@dataclass
class _Raw:
    """What the requests of one refresh returned, before it is shaped into a snapshot."""

    cluster_id: str | None = None
    controller_id: int = -1
    brokers: list[Struct] = field(default_factory=list)
    topics: list[Struct] = field(default_factory=list)
    #: (topic, partition) -> offset, per ListOffsets timestamp
    earliest: dict[TopicPartition, int] = field(default_factory=dict)
    latest: dict[TopicPartition, int] = field(default_factory=dict)
    #: node id -> its log directories (DescribeLogDirs)
    log_dirs: dict[int, list[ClientLogDir]] = field(default_factory=dict)
    #: topic -> DescribeConfigs result
    configs: dict[str, Struct] = field(default_factory=dict)
    #: group id -> (coordinator, DescribeGroups entry, OffsetFetch topics or None)
    groups: dict[str, tuple[int, Struct, list[Struct] | None]] = field(default_factory=dict)
    #: ListPartitionReassignments topics
    reassignments: list[Struct] = field(default_factory=list)
    #: node id -> its throttle rates (config name -> value), when asked
    throttles: dict[int, dict[str, str]] = field(default_factory=dict)
    #: ListTransactions entries (coordinator, entry), None when no broker answered
    txn_listing: list[tuple[int, Struct]] | None = None
    #: transactional id -> DescribeTransactions entry (ongoing ones only)
    txn_described: dict[str, Struct] = field(default_factory=dict)
    #: the watched topic's last stable offsets and DescribeProducers partitions
    stable: dict[TopicPartition, int] = field(default_factory=dict)
    producers: dict[TopicPartition, list[Struct]] = field(default_factory=dict)
    watched_topic: str | None = None
    warnings: list[str] = field(default_factory=list)
    transport_failed: bool = False


class ClusterSampler:
    """Polls a cluster and returns immutable snapshots; see the module docstring.

    `request_timeout` bounds each request (and so a refresh: it is two requests
    deep); `connect_timeout` bounds reaching a broker. `isolate=False` runs the
    client on the caller's event loop instead of a private one (the benchmark
    compares both).
    """

    def __init__(
        self,
        bootstrap: str,
        *,
        request_timeout: float = 5.0,
        connect_timeout: float | None = None,
        client_id: str = "kt-tui",
        isolate: bool = True,
        security: SecurityConfig | None = None,
    ) -> None:
        self.bootstrap = bootstrap
        #: TLS/SASL of the sampler's connections (PLAINTEXT when None)
        self.security = security
        self.request_timeout = request_timeout
        self.connect_timeout = request_timeout if connect_timeout is None else connect_timeout
        self.client_id = client_id
        self.isolate = isolate
        self._client: KafkaClient | None = None
        self._lock: asyncio.Lock | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._thread_lock = threading.Lock()
        self._closed = False
        #: broker ids of the last successful Metadata (to start ListGroups early)
        self._known_brokers: list[int] = []
        #: whether the last refresh found throttle rates (keep asking until they go)
        self._throttles_seen = False
        #: the topic whose producers and last stable offsets each refresh asks for
        #: (the one the operator views; set by the app); None: no such requests
        self.watched_topic: str | None = None
        #: the last refresh's timings: wall seconds per request kind (the slowest
        #: request of that kind), "build" and "client_cpu"
        self.last_timings: dict[str, float] = {}

    # --- public API ----------------------------------------------------------------

    async def sample(self) -> ClusterSnapshot:
        """One refresh. Never raises (but can be cancelled): an unreachable
        cluster gives a snapshot with `error` set."""
        if self._closed:
            return _failed(self.bootstrap, time.monotonic(), time.time(), "sampler closed")
        return await self._run(self._sample_serialised())

    async def close(self) -> None:
        """Close the connections and stop the private loop. Idempotent."""
        if self._closed:
            return
        self._closed = True
        with contextlib.suppress(Exception):
            await self._run(self._drop_client())
        with self._thread_lock:
            loop, thread = self._loop, self._thread
            self._loop = self._thread = None
        if loop is not None and thread is not None:
            loop.call_soon_threadsafe(loop.stop)
            await asyncio.get_running_loop().run_in_executor(None, thread.join, 5.0)
            if not thread.is_alive():
                loop.close()

    async def __aenter__(self) -> ClusterSampler:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    # --- the private loop ----------------------------------------------------------

    async def _run(self, coro: Coroutine[Any, Any, T]) -> T:
        if not self.isolate:
            return await coro
        loop = self._private_loop()
        fut = asyncio.run_coroutine_threadsafe(coro, loop)
        try:
            return await asyncio.wrap_future(fut)
        except asyncio.CancelledError:
            fut.cancel()
            raise

    def _private_loop(self) -> asyncio.AbstractEventLoop:
        with self._thread_lock:
            if self._loop is None:
                loop = asyncio.new_event_loop()
                started = concurrent.futures.Future[None]()

                def main() -> None:
                    asyncio.set_event_loop(loop)
                    loop.call_soon(started.set_result, None)
                    loop.run_forever()

                thread = threading.Thread(target=main, name="kt-tui-sampler", daemon=True)
                thread.start()
                started.result()
                self._loop, self._thread = loop, thread
            return self._loop

    # --- one refresh ---------------------------------------------------------------

    async def _sample_serialised(self) -> ClusterSnapshot:
        if self._lock is None:
            self._lock = asyncio.Lock()
        async with self._lock:
            return await self._sample()

    async def _sample(self) -> ClusterSnapshot:
        taken_at, wall = time.monotonic(), time.time()
        cpu0 = time.thread_time()
        self.last_timings = {}
        for attempt in (1, 2):
            raw = _Raw()
            reused = self._client is not None
            try:
                await self._gather(raw)
                break
            except asyncio.CancelledError:
                await self._drop_client()
                raise
            except Exception as exc:
                await self._drop_client()
                # A connection kept from the last refresh may have died since (a
                # broker restarted): one immediate retry on fresh connections tells
                # that apart from a cluster that is really unreachable. Timeouts
                # are not retried: that would only double the wait.
                if attempt == 1 and reused and isinstance(exc, KafkaConnectionError):
                    continue
                return _failed(self.bootstrap, taken_at, wall, _describe_error(exc))
        if raw.transport_failed:
            await self._drop_client()
        t0 = time.monotonic()
        snap = build_snapshot(raw, self.bootstrap, taken_at, wall, 0.0)
        self.last_timings["build"] = time.monotonic() - t0
        # CPU this thread spent on the refresh (encode, decode, shape): with the
        # private loop, that is all the client's work and nothing else's.
        self.last_timings["client_cpu"] = time.thread_time() - cpu0
        return _with_refresh_seconds(snap, time.monotonic() - taken_at)

    def _new_client(self) -> KafkaClient:
        # No retries: a refresh is itself retried a second later, and a dashboard
        # must say "unreachable" quickly rather than back off for seconds.
        return KafkaClient(
            self.bootstrap,
            client_id=self.client_id,
            request_timeout=self.request_timeout,
            connect_timeout=self.connect_timeout,
            retries=0,
            security=self.security,
        )

    async def _drop_client(self) -> None:
        client, self._client = self._client, None
        if client is not None:
            with contextlib.suppress(Exception):
                await client.close()

    async def _timed(self, label: str, aw: Awaitable[T]) -> T:
        t0 = time.monotonic()
        try:
            return await aw
        finally:
            took = time.monotonic() - t0
            self.last_timings[label] = max(self.last_timings.get(label, 0.0), took)

    async def _gather(self, raw: _Raw) -> None:
        if self._client is None:
            self._client = self._new_client()
        client = self._client
        # Group requests do not depend on Metadata: start them at once on the brokers
        # the previous refresh knew, and on new brokers once Metadata names them. A
        # fresh client waits for Metadata: until it knows the brokers, each request
        # would open a bootstrap connection of its own.
        early = self._known_brokers if client.metadata.brokers else []
        group_tasks: dict[int, asyncio.Task[None]] = {
            node: asyncio.create_task(self._groups_of(client, node, raw)) for node in early
        }
        try:
            md = await self._timed("metadata", client.send(apis.METADATA, _METADATA_ALL))
        except BaseException:
            for t in group_tasks.values():
                t.cancel()
            await asyncio.gather(*group_tasks.values(), return_exceptions=True)
            raise
        raw.cluster_id = md.cluster_id
        raw.controller_id = md.controller_id
        raw.brokers = sorted(md.brokers, key=lambda b: b.node_id)
        raw.topics = sorted(md.topics, key=lambda t: t.name or "")
        _update_client_metadata(client, md)
        nodes = [b.node_id for b in raw.brokers]
        self._known_brokers = nodes
        for node in nodes:
            if node not in group_tasks:
                group_tasks[node] = asyncio.create_task(self._groups_of(client, node, raw))
        for node in list(group_tasks):
            if node not in nodes:
                # A broker that left: its groups moved to another coordinator.
                group_tasks.pop(node).cancel()
        by_leader: dict[int, dict[str, list[int]]] = {}
        for mt in raw.topics:
            if mt.error_code not in (ErrorCode.NONE, ErrorCode.LEADER_NOT_AVAILABLE):
                continue
            for p in mt.partitions:
                if p.leader_id >= 0:
                    by_leader.setdefault(p.leader_id, {}).setdefault(mt.name, []).append(
                        p.partition_index
                    )
        jobs: list[Awaitable[None]] = []
        for node, topics in by_leader.items():
            jobs.append(self._offsets(client, node, topics, EARLIEST, raw.earliest, raw))
            jobs.append(self._offsets(client, node, topics, LATEST, raw.latest, raw))
        for node in nodes:
            jobs.append(self._log_dirs(client, node, raw))
        names = [t.name for t in raw.topics if t.error_code == ErrorCode.NONE]
        if names:
            jobs.append(self._configs(client, names, raw))
        if raw.controller_id >= 0:
            jobs.append(self._reassignments(client, raw.controller_id, raw))
        jobs.append(self._transactions(client, nodes, raw))
        watched = self.watched_topic
        if watched is not None:
            raw.watched_topic = watched
            for node, topics in by_leader.items():
                if watched in topics:
                    mine = {watched: topics[watched]}
                    jobs.append(
                        self._offsets(client, node, mine, LATEST, raw.stable, raw, READ_COMMITTED)
                    )
                    jobs.append(self._producers(client, node, watched, topics[watched], raw))
        jobs.extend(group_tasks.values())
        await asyncio.gather(*jobs)
        throttled_lists = any(
            c.name in _THROTTLED_LISTS and c.value
            for cfg in raw.configs.values()
            for c in cfg.configs
        )
        if raw.reassignments or throttled_lists or self._throttles_seen:
            await asyncio.gather(*(self._throttle_rates(client, n, raw) for n in nodes))
        self._throttles_seen = any(raw.throttles.values())

    async def _reassignments(self, client: KafkaClient, node: int, raw: _Raw) -> None:
        async def go() -> None:
            if not await client.supports(apis.LIST_PARTITION_REASSIGNMENTS, node):
                return
            resp = await self._timed(
                "list_partition_reassignments",
                client.send(apis.LIST_PARTITION_REASSIGNMENTS, _REASSIGNMENTS_ALL, node),
            )
            if resp.error_code:
                raise KafkaError(resp.error_code, "list partition reassignments")
            raw.reassignments = list(resp.topics)

        await self._guard(raw, f"broker {node}: ListPartitionReassignments", go())

    async def _transactions(self, client: KafkaClient, nodes: list[int], raw: _Raw) -> None:
        """ListTransactions on every broker (each lists the ids it coordinates), then
        one DescribeTransactions per coordinator for its ongoing ones only."""

        async def one(node: int) -> None:
            async def go() -> None:
                if not await client.supports(apis.LIST_TRANSACTIONS, node):
                    return
                resp = await self._timed(
                    "list_transactions", client.send(apis.LIST_TRANSACTIONS, _LIST_TXNS, node)
                )
                if resp.error_code:
                    raise KafkaError(resp.error_code, "list transactions")
                listed = [(node, t) for t in resp.transaction_states]
                raw.txn_listing = (raw.txn_listing or []) + listed
                ongoing = sorted(
                    t.transactional_id for _, t in listed if t.transaction_state == ONGOING
                )
                if not ongoing:
                    return
                body = apis.DESCRIBE_TRANSACTIONS.request(transactional_ids=ongoing)
                described = await self._timed(
                    "describe_transactions", client.send(apis.DESCRIBE_TRANSACTIONS, body, node)
                )
                for d in described.transaction_states:
                    # NOT_COORDINATOR: it moved since the listing; the next refresh
                    # finds it at its new coordinator
                    if d.error_code == 0:
                        raw.txn_described[d.transactional_id] = d

            await self._guard(raw, f"broker {node}: transactions", go())

        await asyncio.gather(*(one(n) for n in nodes))

    async def _producers(
        self, client: KafkaClient, node: int, topic: str, partitions: list[int], raw: _Raw
    ) -> None:
        """DescribeProducers for the watched topic's partitions this broker leads."""
        body = apis.DESCRIBE_PRODUCERS.request(
            topics=[{"name": topic, "partition_indexes": sorted(partitions)}]
        )

        async def go() -> None:
            if not await client.supports(apis.DESCRIBE_PRODUCERS, node):
                return
            resp = await self._timed(
                "describe_producers", client.send(apis.DESCRIBE_PRODUCERS, body, node)
            )
            failed = 0
            for t in resp.topics:
                for p in t.partitions:
                    if p.error_code:
                        failed += 1
                        continue
                    raw.producers[(t.name, p.partition_index)] = list(p.active_producers)
            if failed:
                raw.warnings.append(f"broker {node}: no producers for {failed} partition(s)")

        await self._guard(raw, f"broker {node}: DescribeProducers", go())

    async def _throttle_rates(self, client: KafkaClient, node: int, raw: _Raw) -> None:
        # Broker configs are answered by that broker only (Kafka refuses another id).
        body = apis.DESCRIBE_CONFIGS.request(
            resources=[
                {
                    "resource_type": RESOURCE_BROKER,
                    "resource_name": str(node),
                    "configuration_keys": list(RATES),
                }
            ],
            include_synonyms=False,
            include_documentation=False,
        )

        async def go() -> None:
            resp = await self._timed(
                "describe_broker_configs", client.send(apis.DESCRIBE_CONFIGS, body, node)
            )
            for r in resp.results:
                if r.error_code:
                    raise KafkaError(r.error_code, f"configs of broker {node}")
                raw.throttles[node] = {
                    c.name: c.value for c in r.configs if c.name in RATES and c.value
                }

        await self._guard(raw, f"broker {node}: throttle rates", go())

    async def _guard(self, raw: _Raw, what: str, aw: Awaitable[None]) -> None:
        """Run one request of the refresh; a failure becomes a warning."""
        try:
            await aw
        except _TRANSPORT_ERRORS as exc:
            raw.transport_failed = True
            raw.warnings.append(f"{what}: {_describe_error(exc)}")
        except (KafkaError, DecodeError, ValueError) as exc:
            raw.warnings.append(f"{what}: {_describe_error(exc)}")

    async def _offsets(
        self,
        client: KafkaClient,
        node: int,
        topics: dict[str, list[int]],
        timestamp: int,
        out: dict[TopicPartition, int],
        raw: _Raw,
        isolation: int = READ_UNCOMMITTED,
    ) -> None:
        body = apis.LIST_OFFSETS.request(
            replica_id=-1,
            isolation_level=isolation,
            timeout_ms=int(self.request_timeout * 1000),
            topics=[
                {
                    "name": t,
                    "partitions": [{"partition_index": p, "timestamp": timestamp} for p in ps],
                }
                for t, ps in topics.items()
            ],
        )
        label = "list_offsets"

        async def go() -> None:
            resp = await self._timed(label, client.send(apis.LIST_OFFSETS, body, node))
            failed = 0
            for rt in resp.topics:
                for rp in rt.partitions:
                    if rp.error_code:
                        failed += 1
                        continue
                    off = rp.offset
                    if rp.old_style_offsets and off == -1:
                        off = rp.old_style_offsets[0]
                    out[(rt.name, rp.partition_index)] = off
            if failed:
                kind = "earliest" if timestamp == EARLIEST else "latest"
                kind = "last stable" if isolation == READ_COMMITTED else kind
                raw.warnings.append(f"broker {node}: no {kind} offset for {failed} partition(s)")

        await self._guard(raw, f"broker {node}: ListOffsets", go())

    async def _log_dirs(self, client: KafkaClient, node: int, raw: _Raw) -> None:
        async def go() -> None:
            resp = await self._timed(
                "describe_log_dirs",
                client.send(apis.DESCRIBE_LOG_DIRS, _LOG_DIRS_ALL, node),
            )
            if getattr(resp, "error_code", 0):
                raise KafkaError(resp.error_code, f"broker {node}")
            raw.log_dirs[node] = log_dirs_of(node, resp.results)

        await self._guard(raw, f"broker {node}: DescribeLogDirs", go())

    async def _configs(self, client: KafkaClient, names: list[str], raw: _Raw) -> None:
        body = apis.DESCRIBE_CONFIGS.request(
            resources=[
                {"resource_type": RESOURCE_TOPIC, "resource_name": n, "configuration_keys": None}
                for n in names
            ],
            include_synonyms=False,
            include_documentation=False,
        )

        async def go() -> None:
            resp = await self._timed("describe_configs", client.send(apis.DESCRIBE_CONFIGS, body))
            for r in resp.results:
                if r.error_code == 0:
                    raw.configs[r.resource_name] = r

        await self._guard(raw, "DescribeConfigs", go())

    async def _groups_of(self, client: KafkaClient, node: int, raw: _Raw) -> None:
        async def go() -> None:
            listing = await self._timed(
                "list_groups", client.send(apis.LIST_GROUPS, _LIST_GROUPS, node)
            )
            if listing.error_code:
                raise KafkaError(listing.error_code, f"list groups on broker {node}")
            ids = sorted(g.group_id for g in listing.groups)
            if not ids:
                return
            described, offsets = await asyncio.gather(
                self._timed(
                    "describe_groups",
                    client.send(
                        apis.DESCRIBE_GROUPS,
                        apis.DESCRIBE_GROUPS.request(
                            groups=ids, include_authorized_operations=False
                        ),
                        node,
                    ),
                ),
                self._timed("offset_fetch", self._offset_fetch(client, node, ids, raw)),
            )
            for g in described.groups:
                if g.error_code:
                    raw.warnings.append(
                        f"group {g.group_id!r}: {error_for_code(g.error_code).name}"
                    )
                    continue
                raw.groups[g.group_id] = (node, g, offsets.get(g.group_id))

        await self._guard(raw, f"broker {node}: groups", go())

    async def _offset_fetch(
        self, client: KafkaClient, node: int, ids: list[str], raw: _Raw
    ) -> dict[str, list[Struct] | None]:
        """Committed offsets of every group of `node`: one v8+ request for all of
        them, or one request per group before v8."""
        out: dict[str, list[Struct] | None] = {}
        version = await client.api_version(apis.OFFSET_FETCH, node)
        if version >= 8:
            body = apis.OFFSET_FETCH.request(
                groups=[{"group_id": g, "topics": None} for g in ids], require_stable=False
            )
            resp = await client.send(apis.OFFSET_FETCH, body, node)
            for g in resp.groups:
                if g.error_code:
                    raw.warnings.append(
                        f"offsets of group {g.group_id!r}: {error_for_code(g.error_code).name}"
                    )
                    out[g.group_id] = None
                else:
                    out[g.group_id] = list(g.topics)
            return out

        async def one(gid: str) -> None:
            body = apis.OFFSET_FETCH.request(group_id=gid, topics=None, require_stable=False)
            resp = await client.send(apis.OFFSET_FETCH, body, node)
            if resp.error_code:
                raw.warnings.append(
                    f"offsets of group {gid!r}: {error_for_code(resp.error_code).name}"
                )
                out[gid] = None
            else:
                out[gid] = list(resp.topics)

        await asyncio.gather(*(one(g) for g in ids))
        return out


_METADATA_ALL = apis.METADATA.request(topics=None, allow_auto_topic_creation=False)
_LOG_DIRS_ALL = apis.DESCRIBE_LOG_DIRS.request(topics=None)
_LIST_GROUPS = apis.LIST_GROUPS.request()
_REASSIGNMENTS_ALL = apis.LIST_PARTITION_REASSIGNMENTS.request(timeout_ms=5000, topics=None)
_LIST_TXNS = apis.LIST_TRANSACTIONS.request(
    state_filters=[], producer_id_filters=[], duration_filter=-1
)
_THROTTLED_LISTS = frozenset(LISTS)


def _update_client_metadata(client: KafkaClient, md: Struct) -> None:
    """Tell the client where the brokers are, so it can route to them by id."""
    client.metadata.cluster_id = md.cluster_id
    client.metadata.controller_id = md.controller_id
    client.metadata.brokers = {
        b.node_id: ClientBroker(b.node_id, b.host, b.port, b.rack) for b in md.brokers
    }


def _describe_error(exc: BaseException) -> str:
    text = str(exc)
    if isinstance(exc, KafkaConnectionError | KafkaTimeoutError | KafkaError):
        return text or type(exc).__name__
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def _failed(bootstrap: str, taken_at: float, wall: float, error: str) -> ClusterSnapshot:
    return ClusterSnapshot(
        taken_at=taken_at,
        wall_time=wall,
        bootstrap=bootstrap,
        cluster_id=None,
        controller_id=-1,
        brokers=(),
        topics=(),
        groups=(),
        log_dirs=(),
        refresh_seconds=time.monotonic() - taken_at,
        error=error,
    )


def _with_refresh_seconds(snap: ClusterSnapshot, seconds: float) -> ClusterSnapshot:
    return replace(snap, refresh_seconds=seconds)


# --- shaping ------------------------------------------------------------------------


def build_snapshot(
    raw: _Raw, bootstrap: str, taken_at: float, wall: float, refresh_seconds: float
) -> ClusterSnapshot:
    """Shape the responses of one refresh into a `ClusterSnapshot`."""
    # Partition sizes: the leader's replica when its broker answered, else the
    # largest replica reported (a follower's copy is as good a guess as any).
    all_dirs = [d for _, ds in sorted(raw.log_dirs.items()) for d in ds]
    sizes = replica_sizes(all_dirs)
    dirs = log_dir_usage(all_dirs)
    dir_bytes: dict[int, int] = {}
    offline_dirs: dict[int, int] = {}
    for u in dirs:
        if u.error is not None:
            offline_dirs[u.broker] = offline_dirs.get(u.broker, 0) + 1
        else:
            dir_bytes[u.broker] = dir_bytes.get(u.broker, 0) + u.size_bytes

    led: dict[int, int] = {}
    topics: list[TopicInfo] = []
    adding: dict[tuple[str, int], tuple[int, ...]] = {
        (t.name, p.partition_index): tuple(p.adding_replicas)
        for t in raw.reassignments
        for p in t.partitions
    }
    for t in raw.topics:
        if t.error_code not in (ErrorCode.NONE, ErrorCode.LEADER_NOT_AVAILABLE) or not t.name:
            continue
        parts: list[PartitionInfo] = []
        for p in sorted(t.partitions, key=lambda p: p.partition_index):
            tp = (t.name, p.partition_index)
            if p.leader_id >= 0:
                led[p.leader_id] = led.get(p.leader_id, 0) + 1
            size = sizes.get((t.name, p.partition_index, p.leader_id), -1)
            if size < 0:
                size = max(
                    (sizes.get((t.name, p.partition_index, r), -1) for r in p.replica_nodes),
                    default=-1,
                )
            parts.append(
                PartitionInfo(
                    topic=t.name,
                    partition=p.partition_index,
                    leader=p.leader_id,
                    leader_epoch=p.leader_epoch,
                    replicas=tuple(p.replica_nodes),
                    isr=tuple(p.isr_nodes),
                    offline_replicas=tuple(p.offline_replicas),
                    log_start_offset=raw.earliest.get(tp, -1),
                    log_end_offset=raw.latest.get(tp, -1),
                    size_bytes=size,
                    last_stable_offset=raw.stable.get(tp, -1),
                    adding_replicas=tuple(r for r in adding.get(tp, ()) if r in p.replica_nodes),
                )
            )
        overridden: dict[str, str] = {}
        cfg = raw.configs.get(t.name)
        configs = list(cfg.configs) if cfg is not None else []
        for c in configs:
            if c.config_source == DYNAMIC_TOPIC_CONFIG and c.value is not None:
                overridden[c.name] = c.value
        min_isr = min_insync_replicas((c.name, c.value) for c in configs)
        # kafka-topics.sh's ReplicationFactor: the first partition's replicas less
        # those a reassignment is adding.
        rf = len(parts[0].replicas) - len(parts[0].adding_replicas) if parts else 0
        topics.append(
            TopicInfo(
                name=t.name,
                topic_id=str(t.topic_id),
                internal=bool(t.is_internal),
                partitions=tuple(parts),
                replication_factor=rf,
                min_insync_replicas=min_isr,
                overridden_configs=overridden,
            )
        )
    topics.sort(key=lambda t: t.name)

    brokers = tuple(
        BrokerInfo(
            node_id=b.node_id,
            host=b.host,
            port=b.port,
            rack=b.rack,
            is_controller=b.node_id == raw.controller_id,
            partitions_led=led.get(b.node_id, 0),
            log_dir_bytes=dir_bytes.get(b.node_id, -1 if b.node_id not in raw.log_dirs else 0),
            offline_log_dirs=offline_dirs.get(b.node_id, 0),
        )
        for b in raw.brokers
    )
    groups = tuple(
        _group_info(node, g, committed, raw.latest)
        for _, (node, g, committed) in sorted(raw.groups.items())
    )
    reassignments = tuple(
        sorted(
            (
                ReassignmentInfo(
                    t.name,
                    p.partition_index,
                    tuple(p.replicas),
                    tuple(p.adding_replicas),
                    tuple(p.removing_replicas),
                )
                for t in raw.reassignments
                for p in t.partitions
            ),
            key=lambda r: (r.topic, r.partition),
        )
    )
    leaders = {(p.topic, p.partition): p.leader for t in topics for p in t.partitions}
    progress = replica_progress(
        {(r.topic, r.partition): r.adding for r in reassignments}, leaders, sizes
    )
    throttles = tuple(
        BrokerThrottle(node, _rate(rates.get(RATES[0])), _rate(rates.get(RATES[1])))
        for node, rates in sorted(raw.throttles.items())
        if rates
    )
    return ClusterSnapshot(
        taken_at=taken_at,
        wall_time=wall,
        bootstrap=bootstrap,
        cluster_id=raw.cluster_id,
        controller_id=raw.controller_id,
        brokers=brokers,
        topics=tuple(topics),
        groups=groups,
        log_dirs=tuple(dirs),
        refresh_seconds=refresh_seconds,
        error=None,
        warnings=tuple(raw.warnings),
        reassignments=reassignments,
        reassignment_progress=tuple(progress),
        throttles=throttles,
        transactions=_transactions(raw),
        watched_topic=raw.watched_topic,
        open_transactions=_open_transactions(raw),
    )


def _transactions(raw: _Raw) -> tuple[TransactionInfo, ...] | None:
    if raw.txn_listing is None:
        return None
    out = []
    for node, t in raw.txn_listing:
        d = raw.txn_described.get(t.transactional_id)
        if d is None:
            out.append(TransactionInfo(t.transactional_id, node, t.producer_id, -1,
                                       t.transaction_state, -1, -1))  # fmt: skip
            continue
        parts = tuple(sorted((x.topic, p) for x in d.topics for p in x.partitions))
        out.append(TransactionInfo(d.transactional_id, node, d.producer_id, d.producer_epoch,
                                   d.transaction_state, d.transaction_timeout_ms,
                                   d.transaction_start_time_ms, parts))  # fmt: skip
    return tuple(sorted(out, key=lambda x: x.transactional_id))


def _open_transactions(raw: _Raw) -> tuple[OpenTransaction, ...]:
    return tuple(
        OpenTransaction(
            tp[0],
            tp[1],
            a.producer_id,
            a.producer_epoch,
            a.coordinator_epoch,
            a.current_txn_start_offset,
            a.last_timestamp,
        )
        for tp, states in sorted(raw.producers.items())
        for a in sorted(states, key=lambda a: a.producer_id)
        if a.current_txn_start_offset >= 0
    )


def _rate(value: str | None) -> int | None:
    try:
        return int(value) if value else None
    except ValueError:
        return None


def _group_info(
    node: int, g: Struct, committed: list[Struct] | None, ends: dict[TopicPartition, int]
) -> GroupInfo:
    members = [
        GroupMember(
            member_id=m.member_id,
            client_id=m.client_id,
            host=m.client_host,
            group_instance_id=m.group_instance_id,
            assignment=tuple(assignment_pairs(m.member_assignment))
            if consumer_protocol(g.protocol_type)
            else (),
        )
        for m in g.members
    ]
    offsets = {
        (t.name, p.partition_index): p.committed_offset
        for t in committed or ()
        for p in t.partitions
        if p.error_code == 0
    }
    return group_description(
        g.group_id,
        g.group_state,
        g.protocol_type,
        g.protocol_data,
        sorted(members, key=lambda m: m.member_id),
        offsets,
        ends,
        coordinator=node,
    )
