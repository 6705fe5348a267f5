"""Incremental fetch sessions (KIP-227), the leader's side: Kafka's FetchSessionCache.

A fetcher that keeps fetching the same partitions need not list them all in every
request, nor get them all back: the first (full) request creates a session that
caches each partition's request parameters and the last high watermark and log
start offset sent; later (incremental) requests name only partitions whose
parameters changed, added or forgotten, and the response carries only partitions
with records, a moved HW / log start / last stable offset, an error or a diverging
epoch. A follower of many partitions then costs the leader one small request and
response per round instead of an entry per partition each way.

The request's (session id, epoch) say what it is, as in Kafka's FetchMetadata:

- epoch -1 (FINAL): sessionless; a session id given is closed first.
- epoch 0 (INITIAL): full; closes the session id given, creates a new session when
  the cache has (or can make) room, else answers with session id 0.
- epoch N > 0: incremental on session id, which must exist (else
  FETCH_SESSION_ID_NOT_FOUND) and expect epoch N (else INVALID_FETCH_SESSION_EPOCH);
  each one moves the session to the next epoch (after 2**31-1 comes 1).

The cache holds `max.incremental.fetch.session.cache.slots` sessions. When full, a
new session may evict one unused for two minutes, else the least valuable one
evictable: a follower's (privileged) session outranks a consumer's, a larger one a
smaller one, and a session younger than two minutes is evictable only by a
privileged newcomer and only if it is itself unprivileged (Kafka's rule). Sessions are
not tied to a connection. A partition a session caches is read on every fetch of
the session even when its request leaves it out, so a follower of idle partitions
keeps being seen as caught up.

Pure bookkeeping: no I/O, no event loop; the Fetch handler drives it.
"""

from __future__ import annotations

import random
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from kt.protocol import ErrorCode
from kt.protocol.regions import ExternalRecords

INVALID_SESSION_ID = 0
INITIAL_EPOCH = 0
FINAL_EPOCH = -1
#: Kafka's FetchSessionCache eviction age (not a broker setting there either).
EVICTION_MS = 120_000
#: max.incremental.fetch.session.cache.slots's default.
DEFAULT_SLOTS = 1000
_MAX_INT32 = 2**31 - 1

#: A cached partition's identity in its session: (topic id bytes, partition) when
#: the session speaks topic ids (Fetch v13+), else (topic name, partition).
PartitionKey = tuple[bytes | str, int]


def next_epoch(epoch: int) -> int:
    """The session epoch after `epoch` (Kafka's FetchMetadata.nextEpoch)."""
    if epoch < 0:
        return FINAL_EPOCH
    return 1 if epoch == _MAX_INT32 else epoch + 1


@dataclass(slots=True)
class FetchPartition:
    """One partition a fetch reads, with the fetcher's parameters for it; in a
    session also what the fetcher was last told (to leave unchanged ones out)."""

    key: PartitionKey
    topic: str | None  # None when the fetch names topics by id (resolved per read)
    topic_id: uuid.UUID | None  # set when the session or request speaks topic ids
    partition: int
    fetch_offset: int
    partition_max_bytes: int
    current_leader_epoch: int = -1
    last_fetched_epoch: int = -1
    log_start_offset: int = -1  # the fetcher's
    # What the last response that carried this partition said (-1: nothing yet).
    high_watermark: int = -1
    last_stable_offset: int = -1
    leader_log_start_offset: int = -1

    def update_request(self, other: FetchPartition) -> None:
        """Take the parameters of a request that named this partition again."""
        self.topic = other.topic
        self.fetch_offset = other.fetch_offset
        self.partition_max_bytes = other.partition_max_bytes
        self.current_leader_epoch = other.current_leader_epoch
        self.last_fetched_epoch = other.last_fetched_epoch
        self.log_start_offset = other.log_start_offset

    def must_respond(self, entry: dict[str, Any]) -> bool:
        """Whether an incremental response must carry this partition's `entry`
        (Kafka's CachedPartition.maybeUpdateResponseData), remembering what it says
        for the next one. An error always goes out, and forgets the HW sent so the
        partition is sent again once the error clears."""
        respond = False
        records = entry.get("records")
        if isinstance(records, ExternalRecords):
            respond = records.length > 0
        elif records is not None and len(records) > 0:
            respond = True
        hw = entry.get("high_watermark", -1)
        lso = entry.get("last_stable_offset", -1)
        start = entry.get("log_start_offset", -1)
        if hw != self.high_watermark or lso != self.last_stable_offset:
            respond = True
        if start != self.leader_log_start_offset:
            respond = True
        diverging = entry.get("diverging_epoch")
        if diverging is not None and diverging.get("epoch", -1) >= 0:
            respond = True
        if entry.get("preferred_read_replica", -1) >= 0:
            respond = True
        error = entry.get("error_code", ErrorCode.NONE) != ErrorCode.NONE
        self.high_watermark, self.last_stable_offset = (-1, -1) if error else (hw, lso)
        self.leader_log_start_offset = start
        return respond or error


class FetchSession:
    """One session: its partitions in response order (those just sent move to the
    end, so a response budget smaller than the session's data rotates fairly)."""

    __slots__ = ("creation_ms", "epoch", "id", "last_used_ms", "partitions", "privileged",
                 "uses_topic_ids")  # fmt: skip

    def __init__(
        self, session_id: int, privileged: bool, uses_topic_ids: bool, now_ms: int
    ) -> None:
        self.id = session_id
        self.privileged = privileged
        self.uses_topic_ids = uses_topic_ids
        self.partitions: dict[PartitionKey, FetchPartition] = {}
        self.creation_ms = now_ms
        self.last_used_ms = now_ms
        self.epoch = next_epoch(INITIAL_EPOCH)

    def __len__(self) -> int:
        return len(self.partitions)


@dataclass(slots=True)
class FetchContext:
    """What one Fetch request reads and how its response is made (Kafka's
    Sessionless/Full/Incremental/SessionErrorFetchContext in one)."""

    kind: str  # "sessionless", "full", "incremental" or "error"
    partitions: list[FetchPartition]
    error: ErrorCode = ErrorCode.NONE
    privileged: bool = False
    uses_topic_ids: bool = False
    session: FetchSession | None = None
    expected_epoch: int = 0


class FetchSessionCache:
    """The broker's fetch sessions (Kafka's FetchSessionCache and FetchManager)."""

    def __init__(
        self,
        max_sessions: int = DEFAULT_SLOTS,
        eviction_ms: int = EVICTION_MS,
        rng: Callable[[int, int], int] | None = None,
    ) -> None:
        self.max_sessions = max_sessions
        self.eviction_ms = eviction_ms
        self._rng = rng or random.randint
        self._sessions: dict[int, FetchSession] = {}
        self.evictions = 0

    def __len__(self) -> int:
        return len(self._sessions)

    def get(self, session_id: int) -> FetchSession | None:
        """The session with this id, if cached."""
        return self._sessions.get(session_id)

    @property
    def cached_partitions(self) -> int:
        """Partitions cached over all sessions."""
        return sum(len(s) for s in self._sessions.values())

    # --- a request's context ----------------------------------------------------------

    def new_context(
        self,
        session_id: int,
        epoch: int,
        requested: list[FetchPartition],
        forgotten: Iterable[PartitionKey],
        *,
        privileged: bool,
        uses_topic_ids: bool,
        now_ms: int,
    ) -> FetchContext:
        """The context of a request with this session id and epoch, its partitions
        (`requested`, in request order) and forgotten partitions."""
        if epoch in (INITIAL_EPOCH, FINAL_EPOCH):
            if session_id != INVALID_SESSION_ID:
                self.remove(session_id)  # a full request closes the session it names
            kind = "sessionless" if epoch == FINAL_EPOCH else "full"
            return FetchContext(kind, requested, privileged=privileged,
                                uses_topic_ids=uses_topic_ids)  # fmt: skip
        session = self._sessions.get(session_id)
        if session is None:
            return FetchContext("error", [], ErrorCode.FETCH_SESSION_ID_NOT_FOUND)
        if session.epoch != epoch:
            return FetchContext("error", [], ErrorCode.INVALID_FETCH_SESSION_EPOCH)
        if session.uses_topic_ids != uses_topic_ids:
            # Created with topic ids and continued without (or the reverse).
            return FetchContext("error", [], ErrorCode.FETCH_SESSION_TOPIC_ID_ERROR)
        parts = session.partitions
        for p in requested:
            cached = parts.get(p.key)
            if cached is None:
                parts[p.key] = p
            else:
                cached.update_request(p)
        for key in forgotten:
            parts.pop(key, None)
        if not parts:
            # Nothing left: the session ends; this request is answered without one.
            self.remove(session.id)
            return FetchContext("sessionless", requested, privileged=privileged,
                                uses_topic_ids=uses_topic_ids)  # fmt: skip
        session.last_used_ms = now_ms
        session.epoch = next_epoch(session.epoch)
        return FetchContext(
            "incremental",
            list(parts.values()),
            privileged=privileged,
            uses_topic_ids=uses_topic_ids,
            session=session,
            expected_epoch=session.epoch,
        )

    def finish(
        self, ctx: FetchContext, results: list[tuple[FetchPartition, dict[str, Any]]], now_ms: int
    ) -> tuple[ErrorCode, int, list[tuple[FetchPartition, dict[str, Any]]]]:
        """The response's (error, session id, partitions) for the entries read under
        `ctx`: all of them for a full or sessionless fetch (a full one creates its
        session now, caching what was sent), only those that changed for an
        incremental one, nothing for a session error."""
        if ctx.kind == "error":
            return ctx.error, INVALID_SESSION_ID, []
        if ctx.kind == "sessionless":
            return ErrorCode.NONE, INVALID_SESSION_ID, results
        if ctx.kind == "full":
            session = self._maybe_create(ctx.privileged, ctx.uses_topic_ids, len(results), now_ms)
            if session is not None:
                for part, entry in results:
                    part.must_respond(entry)
                    session.partitions[part.key] = part
                return ErrorCode.NONE, session.id, results
            return ErrorCode.NONE, INVALID_SESSION_ID, results
        session = ctx.session
        assert session is not None
        if session.epoch != ctx.expected_epoch:
            # Another request of this session came in while this one waited (a
            # client's retry on a new connection): this answer is stale. (A session
            # evicted meanwhile still answers from what it holds, as Kafka's.)
            return ErrorCode.INVALID_FETCH_SESSION_EPOCH, session.id, []
        out = []
        for part, entry in results:
            if session.partitions.get(part.key) is not part:
                continue  # replaced while this request waited
            if part.must_respond(entry):
                out.append((part, entry))
                # Sent: to the back of the session's order.
                del session.partitions[part.key]
                session.partitions[part.key] = part
        return ErrorCode.NONE, session.id, out

    # --- the cache --------------------------------------------------------------------

    def remove(self, session_id: int) -> FetchSession | None:
        """Drop a session (closed by its fetcher, or evicted)."""
        return self._sessions.pop(session_id, None)

    def _new_id(self) -> int:
        while True:
            sid = self._rng(1, _MAX_INT32)
            if sid not in self._sessions:
                return sid

    def _maybe_create(
        self, privileged: bool, uses_topic_ids: bool, size: int, now_ms: int
    ) -> FetchSession | None:
        if len(self._sessions) >= self.max_sessions and not self._try_evict(
            privileged, size, now_ms
        ):
            return None
        session = FetchSession(self._new_id(), privileged, uses_topic_ids, now_ms)
        self._sessions[session.id] = session
        return session

    def _try_evict(self, privileged: bool, size: int, now_ms: int) -> bool:
        """Make room for a new session of `size` partitions: evict the least recently
        used one if it is stale, else the least valuable evictable one if it is worth
        less than the newcomer (Kafka's tryEvict)."""
        if not self._sessions:
            return False
        stale = min(self._sessions.values(), key=lambda s: (s.last_used_ms, s.id))
        if now_ms - stale.last_used_ms > self.eviction_ms:
            self.remove(stale.id)
            self.evictions += 1
            return True

        def evictable(s: FetchSession) -> bool:
            old = now_ms - s.creation_ms > self.eviction_ms
            # A privileged newcomer may also evict young unprivileged sessions.
            return old or (privileged and not s.privileged)

        candidates = [s for s in self._sessions.values() if evictable(s)]
        if not candidates:
            return False
        victim = min(candidates, key=lambda s: (s.privileged, len(s), s.id))
        if (privileged, size, 0) < (victim.privileged, len(victim), victim.id):
            return False
        self.remove(victim.id)
        self.evictions += 1
        return True
