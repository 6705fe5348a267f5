"""Replica fetchers: followers copy their leaders' logs (Kafka's ReplicaFetcherThread).

One :class:`ReplicaFetcher` task per source broker fetches every partition this
broker follows from it in one Fetch request (v12+: replica id, or v15+
``ReplicaState``; fetch offset = our LEO; ``LastFetchedEpoch``;
``CurrentLeaderEpoch``) within an incremental fetch session (KIP-227,
:class:`FollowerFetchSession`: after the first, a request names only partitions
whose fetch offset or epochs moved, and the answer only partitions with news),
then for each partition in the answer:

* data: appended as the leader wrote it (:meth:`Partition.append_records_as_follower`),
  then our HW = min(leader HW, our LEO), and our log start follows the leader's;
* ``DivergingEpoch``: truncate to where our log agrees with the leader's (facts
  §3: min of the leader's end for that epoch and ours; an epoch we do not have
  truncates to our end of the previous one and the next fetch asks again);
* OFFSET_OUT_OF_RANGE: ask the leader's end offset; above it we truncate to it,
  else below the leader's log start we restart empty at that start;
* FENCED_LEADER_EPOCH: the leader is newer than our LeaderAndIsr: the partition
  is dropped until the next LeaderAndIsr re-adds it;
* other errors (NOT_LEADER_OR_FOLLOWER: the leader has not heard of its election
  yet; UNKNOWN_LEADER_EPOCH, ...): retried after ``replica.fetch.backoff.ms``, as
  Kafka does.

The network is behind :class:`LeaderEndpoint` (so tests fake it);
:class:`BrokerEndpoint` speaks to a real broker with kt.client's BrokerConnection.
:class:`ReplicaFetcherManager` maps partitions to fetchers by leader. All of it
runs on the broker's asyncio loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import uuid
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from kt.broker import timeline
from kt.broker.errors import LeaderEndpointError
from kt.broker.fetch_sessions import INITIAL_EPOCH, INVALID_SESSION_ID, next_epoch
from kt.broker.partition import Partition
from kt.broker.replication.quota import ReplicationThrottles
from kt.protocol import ErrorCode, apis
from kt.protocol.schema import Struct
from kt.storage.checkpoint import TopicPartition
from kt.storage.errors import StorageError
from kt.storage.leader_epoch import UNDEFINED_EPOCH_OFFSET

log = logging.getLogger("kt.broker.replication")

# ListOffsets timestamps meaning "the log start" and "the log end".
EARLIEST_TIMESTAMP = -2
LATEST_TIMESTAMP = -1
MIN_FETCH_VERSION = 12
# Top-level Fetch errors that only say our session is gone or stale.
_SESSION_ERRORS = frozenset({ErrorCode.FETCH_SESSION_ID_NOT_FOUND,
                             ErrorCode.INVALID_FETCH_SESSION_EPOCH,
                             ErrorCode.FETCH_SESSION_TOPIC_ID_ERROR})  # fmt: skip


@dataclass(frozen=True, slots=True)
class FetcherConfig:
    """The replica.fetch.* settings (Kafka's names and defaults)."""

    max_bytes: int = 1024 * 1024  # replica.fetch.max.bytes (per partition)
    response_max_bytes: int = 10 * 1024 * 1024  # replica.fetch.response.max.bytes
    wait_max_ms: int = 500  # replica.fetch.wait.max.ms
    min_bytes: int = 1  # replica.fetch.min.bytes
    backoff_ms: int = 1000  # replica.fetch.backoff.ms
    socket_timeout_ms: int = 30_000  # replica.socket.timeout.ms


class LeaderEndpoint(Protocol):
    """The source broker, as a fetcher talks to it (Kafka's LeaderEndPoint)."""

    async def fetch(self, request: Struct) -> Any:
        """Send a FetchRequest (built for any version >= 12); the decoded response."""
        ...

    async def earliest_offset(self, tp: TopicPartition, current_leader_epoch: int) -> int:
        """The leader's log start offset (ListOffsets, timestamp -2)."""
        ...

    async def latest_offset(self, tp: TopicPartition, current_leader_epoch: int) -> int:
        """The leader's log end offset (ListOffsets, timestamp -1, as a replica)."""
        ...

    async def close(self) -> None:
        """Release the connection."""
        ...


# A fetch response is read from the socket in pieces of up to this size (asyncio's
# default 64 KiB would take many event-loop turns per 1 MiB response).
_READ_SIZE = 1 << 20


class BrokerEndpoint:
    """A LeaderEndpoint over one BrokerConnection, reconnecting after failures."""

    def __init__(
        self,
        node_id: int,
        host: str,
        port: int,
        *,
        local_broker_id: int,
        config: FetcherConfig | None = None,
        client_id: str | None = None,
        security: Any = None,
    ) -> None:
        self.node_id = node_id
        # the inter-broker listener's TLS/SASL (kt.client.security.SecurityConfig)
        self.security = security
        self.host = host
        self.port = port
        self.local_broker_id = local_broker_id
        self.config = config or FetcherConfig()
        self.client_id = client_id or f"broker-{local_broker_id}-fetcher-{node_id}"
        self._conn: Any = None

    async def _connection(self) -> Any:
        from kt.client.core import BrokerConnection

        if self._conn is not None and self._conn.connected:
            return self._conn
        await self.close()
        # The fetch itself waits up to replica.fetch.wait.max.ms on the leader.
        timeout = (self.config.socket_timeout_ms + self.config.wait_max_ms) / 1000
        conn = BrokerConnection(
            self.host,
            self.port,
            node_id=self.node_id,
            client_id=self.client_id,
            connect_timeout=self.config.socket_timeout_ms / 1000,
            request_timeout=timeout,
            read_size=_READ_SIZE,
            security=self.security,
        )
        await conn.connect()
        self._conn = conn
        return conn

    async def fetch(self, request: Struct) -> Any:
        """Fetch in the highest version both speak (at least 12)."""
        conn = await self._connection()
        try:
            version = conn.version_for(apis.FETCH)
            if version < MIN_FETCH_VERSION:
                raise LeaderEndpointError(
                    ErrorCode.UNSUPPORTED_VERSION,
                    f"broker {self.node_id} speaks Fetch up to v{version}, replication needs v12",
                )
            return await conn.request(apis.FETCH, request, version=version)
        except Exception:
            await self.close()
            raise

    async def _list_offset(self, tp: TopicPartition, epoch: int, timestamp: int) -> int:
        conn = await self._connection()
        body = apis.LIST_OFFSETS.request(
            replica_id=self.local_broker_id,
            isolation_level=0,
            topics=[
                {
                    "name": tp.topic,
                    "partitions": [
                        {
                            "partition_index": tp.partition,
                            "current_leader_epoch": epoch,
                            "timestamp": timestamp,
                        }
                    ],
                }
            ],
            timeout_ms=self.config.socket_timeout_ms,
        )
        try:
            resp = await conn.request(apis.LIST_OFFSETS, body)
        except Exception:
            await self.close()
            raise
        for t in resp.topics:
            for p in t.partitions:
                if t.name == tp.topic and p.partition_index == tp.partition:
                    if p.error_code != ErrorCode.NONE:
                        raise LeaderEndpointError(
                            p.error_code, f"ListOffsets {tp} on broker {self.node_id}"
                        )
                    return int(p.offset)
        raise LeaderEndpointError(ErrorCode.UNKNOWN_SERVER_ERROR, f"no ListOffsets answer for {tp}")

    async def earliest_offset(self, tp: TopicPartition, current_leader_epoch: int) -> int:
        """The leader's log start offset."""
        return await self._list_offset(tp, current_leader_epoch, EARLIEST_TIMESTAMP)

    async def latest_offset(self, tp: TopicPartition, current_leader_epoch: int) -> int:
        """The leader's log end offset (a replica's ListOffsets is not bounded by the HW)."""
        return await self._list_offset(tp, current_leader_epoch, LATEST_TIMESTAMP)

    async def close(self) -> None:
        """Close the connection (the next call reconnects)."""
        conn, self._conn = self._conn, None
        if conn is not None:
            await conn.close()


# How soon a partition held back by its replication throttle is considered again.
THROTTLE_RECHECK_S = 0.1


@dataclass(slots=True)
class _FetchState:
    partition: Partition
    # Not fetched before this time.monotonic() (error back-off).
    delayed_until: float = 0.0


@dataclass(frozen=True, slots=True)
class _Sent:
    partition: Partition
    fetch_offset: int
    leader_epoch: int


def _code_name(code: int) -> str:
    try:
        return ErrorCode(code).name
    except ValueError:
        return str(code)


def _tp_name(tp: TopicPartition) -> str:
    return f"{tp.topic}-{tp.partition}"


def _topic_uuid(topic_id: bytes) -> uuid.UUID:
    return uuid.UUID(bytes=bytes(topic_id)) if len(topic_id) == 16 else uuid.UUID(int=0)


# What a leader's fetch session caches for one partition, as this follower last
# sent it: (topic id, fetch offset, current leader epoch, last fetched epoch, log
# start offset, max bytes). A partition is named again only when this changes.
_SessionParams = tuple[bytes, int, int, int, int, int]


class FollowerFetchSession:
    """This follower's side of an incremental fetch session (KIP-227) with one
    leader (Kafka's FetchSessionHandler): the first request is full and asks for a
    session (epoch 0); once the leader gave one, each request names only the
    partitions that are new or whose parameters changed, lists those no longer
    fetched as forgotten, and carries the next epoch. Any failure or top-level error
    starts over with a full request (closing the old session); a leader that
    declined to create one is asked again on every full request."""

    __slots__ = ("epoch", "id", "partitions")

    def __init__(self) -> None:
        self.id = INVALID_SESSION_ID
        self.epoch = INITIAL_EPOCH
        self.partitions: dict[TopicPartition, _SessionParams] = {}

    @property
    def full(self) -> bool:
        """Whether the next request is a full one."""
        return self.epoch == INITIAL_EPOCH

    def plan(
        self, wanted: Mapping[TopicPartition, _SessionParams]
    ) -> tuple[list[TopicPartition], list[tuple[TopicPartition, bytes]]]:
        """(partitions to name, (partition, topic id) to forget) for a request
        wanting `wanted`. A partition whose topic was recreated (same name, a new
        topic id) starts the session over: the leader's session holds it under the
        old id, which a name-keyed (v12) session could not tell from the new."""
        if not self.full and any(
            tp in self.partitions and self.partitions[tp][0] != params[0]
            for tp, params in wanted.items()
        ):
            self.failed()
        if self.full:
            return list(wanted), []
        send = [tp for tp, params in wanted.items() if self.partitions.get(tp) != params]
        forget = [(tp, p[0]) for tp, p in self.partitions.items() if tp not in wanted]
        return send, forget

    def answered(
        self, wanted: Mapping[TopicPartition, _SessionParams], error: int, session_id: int
    ) -> bool:
        """Take a response to the request planned for `wanted`; False when it must be
        ignored (a session error: the next request is full)."""
        if error != ErrorCode.NONE:
            if error == ErrorCode.FETCH_SESSION_ID_NOT_FOUND:
                self.id = INVALID_SESSION_ID
            self.failed()
            return False
        if self.full:
            self.id = session_id
            self.epoch = next_epoch(INITIAL_EPOCH) if session_id != INVALID_SESSION_ID else 0
        elif session_id == INVALID_SESSION_ID:
            # The leader ended the session with this answer (still a valid one):
            # the next request is full (Kafka's FetchSessionHandler does the same).
            self.id = INVALID_SESSION_ID
            self.failed()
            return True
        else:
            self.epoch = next_epoch(self.epoch)
        self.partitions = dict(wanted)
        return True

    def failed(self) -> None:
        """The request got no answer: start over (closing the session)."""
        self.epoch = INITIAL_EPOCH
        self.partitions = {}


class ReplicaFetcher:
    """Fetches every partition this broker follows from one source broker."""

    def __init__(
        self,
        source_broker_id: int,
        endpoint: LeaderEndpoint,
        local_broker_id: int,
        config: FetcherConfig | None = None,
        *,
        broker_epoch: int = -1,
        on_partition_failed: Callable[[Partition, BaseException], None] | None = None,
        throttles: ReplicationThrottles | None = None,
    ) -> None:
        self.source_broker_id = source_broker_id
        #: the source broker's address this fetcher was made for (None: not known)
        self.source_address: object = None
        self.throttles = throttles
        self.endpoint = endpoint
        self.local_broker_id = local_broker_id
        self.config = config or FetcherConfig()
        self.broker_epoch = broker_epoch
        self.on_partition_failed = on_partition_failed
        self._states: dict[TopicPartition, _FetchState] = {}
        #: the incremental fetch session with the source broker
        self.session = FollowerFetchSession()
        self._task: asyncio.Task[None] | None = None
        self._wakeup = asyncio.Event()
        self._stopping = False

    # --- partitions -----------------------------------------------------------

    @property
    def partitions(self) -> dict[TopicPartition, Partition]:
        """The partitions fetched, by topic partition."""
        return {tp: st.partition for tp, st in self._states.items()}

    def add_partitions(self, parts: Iterable[Partition]) -> None:
        """Start fetching these (a partition already here is replaced: new epoch)."""
        for part in parts:
            self._states[part.tp] = _FetchState(part)
        self._wakeup.set()

    def remove_partitions(self, tps: Iterable[TopicPartition]) -> list[Partition]:
        """Stop fetching these; returns those that were fetched. A response in
        flight for them is ignored."""
        out = []
        for tp in tps:
            st = self._states.pop(tp, None)
            if st is not None:
                out.append(st.partition)
        return out

    def _delay(self, tps: Iterable[TopicPartition]) -> None:
        until = time.monotonic() + self.config.backoff_ms / 1000
        for tp in tps:
            st = self._states.get(tp)
            if st is not None:
                st.delayed_until = until

    # --- the loop -------------------------------------------------------------

    def start(self) -> None:
        """Run the fetch loop as a task on the current loop."""
        if self._task is None:
            self._task = asyncio.create_task(
                self._run(), name=f"replica-fetcher-{self.source_broker_id}"
            )

    async def stop(self) -> None:
        """Stop the loop (a fetch in flight is abandoned) and close the endpoint."""
        self._stopping = True
        self._wakeup.set()
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        await self.endpoint.close()

    async def _run(self) -> None:
        while not self._stopping:
            try:
                fetched = await self.fetch_once()
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # a bug must not end replication for good
                log.exception(
                    "replica fetcher for broker %d failed: %s", self.source_broker_id, exc
                )
                self._delay(list(self._states))
                fetched = False
            if not fetched:
                await self._idle()
            else:
                # Let the rest of the broker run even if the leader answers at once.
                await asyncio.sleep(0)

    async def _idle(self) -> None:
        """Wait until a partition is added or the earliest back-off ends."""
        self._wakeup.clear()
        now = time.monotonic()
        delays = [st.delayed_until - now for st in self._states.values()]
        timeout = max(0.0, min(delays)) if delays else None
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._wakeup.wait(), timeout)

    def build_request(
        self,
    ) -> tuple[Struct, dict[TopicPartition, _Sent], dict[TopicPartition, _SessionParams]] | None:
        """The Fetch request for every partition not backing off (None: nothing to
        fetch), what was asked for each, and the parameters the leader's session
        holds for them once it answers. In an incremental session the request names
        only partitions whose parameters changed."""
        now = time.monotonic()
        sent: dict[TopicPartition, _Sent] = {}
        wanted: dict[TopicPartition, _SessionParams] = {}
        for tp, st in self._states.items():
            if st.delayed_until > now:
                continue
            part = st.partition
            if self.throttles is not None and self.throttles.should_follower_throttle(
                tp, self.local_broker_id in part.isr
            ):
                # KIP-73: a throttled replica out of the ISR waits for the quota
                # (briefly, so an idle fetcher does not spin on it).
                st.delayed_until = now + THROTTLE_RECHECK_S
                continue
            fetch_offset = part.log_end_offset
            sent[tp] = _Sent(part, fetch_offset, part.leader_epoch)
            wanted[tp] = (bytes(part.topic_id), fetch_offset, part.leader_epoch,
                          part.last_fetched_epoch(), part.log_start_offset,
                          self.config.max_bytes)  # fmt: skip
        if not sent:
            return None
        send, forget = self.session.plan(wanted)
        topics: dict[str, dict[str, Any]] = {}
        for tp in send:
            part = sent[tp].partition
            topic = topics.get(tp.topic)
            if topic is None:
                topic = topics[tp.topic] = {
                    "topic": tp.topic,
                    "topic_id": _topic_uuid(part.topic_id),
                    "partitions": [],
                }
            _, fetch_offset, leader_epoch, last_epoch, log_start, max_bytes = wanted[tp]
            topic["partitions"].append(
                {
                    "partition": tp.partition,
                    "current_leader_epoch": leader_epoch,
                    "fetch_offset": fetch_offset,
                    "last_fetched_epoch": last_epoch,
                    "log_start_offset": log_start,
                    "partition_max_bytes": max_bytes,
                }
            )
        forgotten: dict[tuple[str, bytes], dict[str, Any]] = {}
        for tp, topic_id in forget:
            entry = forgotten.get((tp.topic, topic_id))
            if entry is None:
                entry = forgotten[(tp.topic, topic_id)] = {
                    "topic": tp.topic,
                    "topic_id": _topic_uuid(topic_id),
                    "partitions": [],
                }
            entry["partitions"].append(tp.partition)
        request = apis.FETCH.request(
            replica_id=self.local_broker_id,
            replica_state={"replica_id": self.local_broker_id, "replica_epoch": self.broker_epoch},
            max_wait_ms=self.config.wait_max_ms,
            min_bytes=self.config.min_bytes,
            max_bytes=self.config.response_max_bytes,
            isolation_level=0,
            session_id=self.session.id,
            session_epoch=self.session.epoch,
            topics=list(topics.values()),
            forgotten_topics_data=list(forgotten.values()),
        )
        return request, sent, wanted

    async def fetch_once(self) -> bool:
        """One Fetch round trip and its processing; False when there was nothing to
        fetch or the request failed (the partitions then back off)."""
        built = self.build_request()
        if built is None:
            return False
        request, sent, wanted = built
        if timeline.armed():
            for tp, s in sent.items():
                timeline.once(_tp_name(tp), "follower_fetch_sent", source=self.source_broker_id,
                              offset=s.fetch_offset, epoch=s.leader_epoch)  # fmt: skip
        try:
            response = await self.endpoint.fetch(request)
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            timeline.mark("follower_fetch_failed", source=self.source_broker_id, error=repr(exc))
            log.warning(
                "fetch from broker %d failed, retrying in %d ms: %s",
                self.source_broker_id, self.config.backoff_ms, exc,
            )  # fmt: skip
            self.session.failed()
            self._delay(sent)
            return False
        if not self.session.answered(wanted, response.error_code, response.session_id):
            if response.error_code in _SESSION_ERRORS:
                # The leader lost or moved past our session (it restarted, or evicted
                # it): the next request, at once, is a full one.
                log.info(
                    "fetch session with broker %d: %s; starting a new one",
                    self.source_broker_id, _code_name(response.error_code),
                )  # fmt: skip
                return True
            log.warning(
                "fetch from broker %d: error %s", self.source_broker_id, response.error_code
            )
            self._delay(sent)
            return False
        by_id = {_topic_uuid(s.partition.topic_id): tp.topic for tp, s in sent.items()}
        for topic in response.responses:
            name = topic.topic if topic.topic else by_id.get(topic.topic_id)
            if name is None:
                # A topic the leader's session holds that we do not fetch (it cannot
                # be forgotten by a name we no longer know): start over.
                self.session.failed()
                continue
            for p in topic.partitions:
                tp = TopicPartition(name, p.partition_index)
                await self._process_partition(tp, sent.get(tp), p)
        return True

    def _current(self, tp: TopicPartition, asked: _Sent | None) -> Partition | None:
        """The partition if the answer still applies: still fetched, same epoch, and
        nothing appended or truncated since the request."""
        st = self._states.get(tp)
        if asked is None or st is None or st.partition is not asked.partition:
            return None
        part = st.partition
        if part.leader_epoch != asked.leader_epoch or part.log_end_offset != asked.fetch_offset:
            return None
        return part

    async def _process_partition(self, tp: TopicPartition, asked: _Sent | None, p: Any) -> None:
        part = self._current(tp, asked)
        if part is None:
            return
        code = p.error_code
        if timeline.armed():
            timeline.once(_tp_name(tp), "follower_fetch_answered", source=self.source_broker_id,
                          error=_code_name(code), hw=p.high_watermark,
                          diverging=p.diverging_epoch.epoch)  # fmt: skip
        try:
            if code == ErrorCode.NONE:
                diverging = p.diverging_epoch
                if diverging.epoch >= 0 and diverging.end_offset >= 0:
                    self._truncate_on_divergence(part, diverging.epoch, diverging.end_offset)
                    return
                records = p.records
                if records is not None and len(records) > 0:
                    part.append_records_as_follower(records)
                    if self.throttles is not None and self.throttles.follower_throttled(tp):
                        self.throttles.follower.record(len(records))
                part.update_follower_high_watermark(p.high_watermark)
                if p.log_start_offset >= 0:
                    part.update_follower_log_start_offset(p.log_start_offset)
            elif code == ErrorCode.OFFSET_OUT_OF_RANGE:
                await self._handle_out_of_range(tp, part)
            elif code == ErrorCode.FENCED_LEADER_EPOCH:
                log.info(
                    "%s: leader epoch %d is fenced by broker %d; waiting for LeaderAndIsr",
                    tp, part.leader_epoch, self.source_broker_id,
                )  # fmt: skip
                self._states.pop(tp, None)
            else:
                log.info(
                    "%s: fetch from broker %d: error %s; retrying",
                    tp, self.source_broker_id, _code_name(code),
                )  # fmt: skip
                self._delay([tp])
        except (StorageError, OSError) as exc:
            # The log cannot take the leader's data: the partition goes (Kafka marks
            # it failed) and the broker decides about the log directory.
            log.error("%s: replication stopped: %s", tp, exc)
            self._states.pop(tp, None)
            if self.on_partition_failed is not None:
                self.on_partition_failed(part, exc)

    def _truncate_on_divergence(self, part: Partition, epoch: int, leader_end: int) -> None:
        """Cut our log where it stops agreeing with the leader's (AbstractFetcherThread
        getOffsetTruncationState)."""
        leo = part.log_end_offset
        found_epoch, found_end = part.end_offset_for_epoch(epoch)
        if found_end == UNDEFINED_EPOCH_OFFSET:
            # We know nothing of that epoch or before it: the leader's end bounds us.
            target = min(leader_end, leo)
        elif found_epoch != epoch:
            # We never had the leader's epoch: cut to the end of our last epoch below
            # it; the next fetch carries that epoch and the leader checks again.
            target = min(found_end, leo)
        else:
            target = min(found_end, leader_end, leo)
        log.info(
            "%s: diverged from broker %d at epoch %d (leader end %d): truncating %d -> %d",
            part.tp, self.source_broker_id, epoch, leader_end, leo, target,
        )  # fmt: skip
        part.truncate_to(target)

    async def _handle_out_of_range(self, tp: TopicPartition, part: Partition) -> None:
        """Reset from the leader's offsets (AbstractFetcherThread fetchOffsetAndTruncate)."""
        epoch = part.leader_epoch
        try:
            leader_end = await self.endpoint.latest_offset(tp, epoch)
            if self._current(tp, _Sent(part, part.log_end_offset, epoch)) is None:
                return
            if leader_end < part.log_end_offset:
                log.info("%s: above the leader's end %d: truncating", tp, leader_end)
                part.truncate_to(leader_end)
                return
            leader_start = await self.endpoint.earliest_offset(tp, epoch)
            if self._current(tp, _Sent(part, part.log_end_offset, epoch)) is None:
                return
            if leader_start > part.log_end_offset:
                log.info("%s: below the leader's log start %d: restarting there", tp, leader_start)
                part.truncate_fully_and_start_at(leader_start)
        except Exception as exc:  # unreachable leader, or an error code: try later
            log.warning("%s: cannot reset from broker %d: %s", tp, self.source_broker_id, exc)
            self._delay([tp])


class ReplicaFetcherManager:
    """The fetchers of this broker, one per source broker (Kafka's
    ReplicaFetcherManager with num.replica.fetchers=1)."""

    def __init__(
        self,
        local_broker_id: int,
        endpoint_for: Callable[[int], LeaderEndpoint],
        config: FetcherConfig | None = None,
        *,
        broker_epoch: int = -1,
        on_partition_failed: Callable[[Partition, BaseException], None] | None = None,
        throttles: ReplicationThrottles | None = None,
        address_for: Callable[[int], object] | None = None,
    ) -> None:
        self.throttles = throttles
        self.local_broker_id = local_broker_id
        self.endpoint_for = endpoint_for
        #: where a source broker is now (host, port); a fetcher made for another
        #: address is replaced (Kafka's addFetcherForPartitions compares endpoints)
        self.address_for = address_for
        self.config = config or FetcherConfig()
        self.broker_epoch = broker_epoch
        self.on_partition_failed = on_partition_failed
        self.fetchers: dict[int, ReplicaFetcher] = {}
        # Retired fetchers still stopping (a reference keeps their task alive).
        self._retiring: set[asyncio.Task[None]] = set()

    def add_partitions(self, parts: Iterable[Partition]) -> None:
        """Fetch each partition from its leader (``Partition.leader_id``), moving it
        off a fetcher of another leader first."""
        by_leader: dict[int, list[Partition]] = {}
        for part in parts:
            if part.leader_id < 0 or part.is_leader:
                continue
            by_leader.setdefault(part.leader_id, []).append(part)
        for leader, group in by_leader.items():
            tps = [p.tp for p in group]
            for source, other in self.fetchers.items():
                if source != leader:
                    other.remove_partitions(tps)
            fetcher = self.fetchers.get(leader)
            address = self.address_for(leader) if self.address_for is not None else None
            moved: list[Partition] = []
            if fetcher is not None and address is not None and address != fetcher.source_address:
                # the source broker came back elsewhere: its partitions here go to a
                # fetcher for the new address (Kafka drops them until the next
                # LeaderAndIsr; moving them keeps them fetched)
                moved = fetcher.remove_partitions(list(fetcher.partitions))
                self._retire(self.fetchers.pop(leader), leader)
                fetcher = None
            created = fetcher is None
            if fetcher is None:
                fetcher = ReplicaFetcher(
                    leader,
                    self.endpoint_for(leader),
                    self.local_broker_id,
                    self.config,
                    broker_epoch=self.broker_epoch,
                    on_partition_failed=self.on_partition_failed,
                    throttles=self.throttles,
                )
                fetcher.source_address = address
                self.fetchers[leader] = fetcher
                fetcher.start()
            fetcher.add_partitions([p for p in moved if p.tp not in tps] + group)
            if timeline.enabled():
                for part in group:
                    timeline.mark("fetcher_switch", tp=_tp_name(part.tp), source=leader,
                                  new_fetcher=created)  # fmt: skip

    def remove_partitions(self, tps: Iterable[TopicPartition]) -> list[Partition]:
        """Stop fetching these wherever they are fetched."""
        tp_list = list(tps)
        out: list[Partition] = []
        for fetcher in self.fetchers.values():
            out.extend(fetcher.remove_partitions(tp_list))
        return out

    def source_of(self, tp: TopicPartition) -> int | None:
        """The broker `tp` is fetched from, if any."""
        for source, fetcher in self.fetchers.items():
            if tp in fetcher.partitions:
                return source
        return None

    def retire_idle_fetchers(self) -> list[int]:
        """Drop the fetchers left without partitions now and stop them in the
        background (Kafka's shutdownIdleFetcherThreads after every LeaderAndIsr and
        StopReplica): a fetcher of a dead leader stops retrying it, and a partition
        that later follows that broker again gets a fetcher with its current
        address. Returns the source brokers retired."""
        idle = [source for source, fetcher in self.fetchers.items() if not fetcher.partitions]
        for source in idle:
            self._retire(self.fetchers.pop(source), source)
        return idle

    def _retire(self, fetcher: ReplicaFetcher, source: int) -> None:
        """Stop a fetcher already out of `fetchers`, in the background."""
        task = asyncio.get_running_loop().create_task(
            fetcher.stop(), name=f"stop-replica-fetcher-{source}"
        )
        self._retiring.add(task)
        task.add_done_callback(self._retiring.discard)

    async def shutdown_idle_fetchers(self) -> None:
        """Stop fetchers left without partitions, and wait until they have."""
        self.retire_idle_fetchers()
        if self._retiring:
            await asyncio.gather(*self._retiring, return_exceptions=True)

    async def shutdown(self) -> None:
        """Stop every fetcher."""
        fetchers, self.fetchers = self.fetchers, {}
        for fetcher in fetchers.values():
            await fetcher.stop()
        if self._retiring:
            await asyncio.gather(*self._retiring, return_exceptions=True)
