"""Delayed operations: requests that wait for replication (Kafka's DelayedOperationPurgatory).

An acks=all produce waits until every partition's high watermark passes what it
wrote (:class:`DelayedProduce`); a fetch waits until ``min_bytes`` are readable or
``max_wait_ms`` passed (:class:`DelayedFetch`). Each waits in the purgatory under
the keys (partitions) it depends on; whoever moves a partition's offsets calls
:meth:`DelayedOperationPurgatory.check_and_complete` for it (the replica manager
wires that to :attr:`Partition.offsets_listener`), and every waiting operation on
that key checks again. A timer completes whatever is left at its deadline.

The broker is single-threaded on its asyncio loop, so there is none of Kafka's
locking here: an operation is checked once before it is watched and again on
every change of its keys; completion is idempotent and happens exactly once.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Hashable, Iterable, Mapping
from dataclasses import dataclass
from typing import Generic, Protocol, TypeVar

from kt.broker.errors import BrokerError, RequestTimedOutError

K = TypeVar("K", bound=Hashable)


class DelayedOperation:
    """An operation that completes when :meth:`try_complete` finds it can, or at its
    deadline (then :attr:`expired` is True). Subclasses implement ``try_complete``
    (calling :meth:`force_complete` when done) and ``on_complete``."""

    def __init__(self, timeout_ms: int) -> None:
        self.timeout_ms = max(0, timeout_ms)
        self.completed = False
        self.expired = False
        # One future per waiter, so a cancelled waiter cancels only its own.
        self._waiters: list[asyncio.Future[None]] = []
        self._timer: asyncio.TimerHandle | None = None
        # Called once at completion (the purgatory stops watching the operation).
        self._on_done: Callable[[DelayedOperation], None] | None = None

    def try_complete(self) -> bool:
        """Check whether the operation can complete now; if so complete it (with
        :meth:`force_complete`) and return True."""
        raise NotImplementedError

    def on_complete(self) -> None:
        """Build the result; called exactly once, on completion or expiry."""
        raise NotImplementedError

    def force_complete(self) -> bool:
        """Complete now unless already completed; True if this call completed it."""
        if self.completed:
            return False
        self.completed = True
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        self.on_complete()
        waiters, self._waiters = self._waiters, []
        for fut in waiters:
            if not fut.done():
                fut.set_result(None)
        if self._on_done is not None:
            self._on_done(self)
            self._on_done = None
        return True

    def _expire(self) -> None:
        self._timer = None
        if not self.completed:
            self.expired = True
            self.force_complete()

    async def wait(self) -> None:
        """Until the operation completed (at once if it already has)."""
        if self.completed:
            return
        fut = asyncio.get_running_loop().create_future()
        self._waiters.append(fut)
        try:
            await fut
        finally:
            if fut in self._waiters:  # cancelled before completion
                self._waiters.remove(fut)


class DelayedOperationPurgatory(Generic[K]):
    """Operations waiting on keys; completed by key changes or their timers."""

    def __init__(self, name: str) -> None:
        self.name = name
        self._watchers: dict[K, list[DelayedOperation]] = {}
        self._keys: dict[int, tuple[K, ...]] = {}

    def try_complete_else_watch(self, op: DelayedOperation, keys: Iterable[K]) -> bool:
        """Complete `op` now if it can (True); else watch it under `keys` and arm its
        timer (False). Must run on the event loop."""
        if op.try_complete():
            return True
        key_list = tuple(keys)
        loop = asyncio.get_running_loop()
        if op.timeout_ms == 0 or not key_list:
            # Nothing could ever complete it early.
            op.expired = True
            op.force_complete()
            return True
        for key in key_list:
            self._watchers.setdefault(key, []).append(op)
        self._keys[id(op)] = key_list
        op._on_done = self._unwatch
        op._timer = loop.call_later(op.timeout_ms / 1000, op._expire)
        return False

    def check_and_complete(self, key: K) -> int:
        """Check every operation watching `key` (its partition's offsets moved);
        returns how many completed."""
        ops = self._watchers.get(key)
        if not ops:
            return 0
        done = 0
        for op in list(ops):
            if not op.completed and op.try_complete():
                done += 1
        return done

    def watched(self, key: K) -> int:
        """Operations waiting on `key`."""
        return len(self._watchers.get(key, ()))

    def __len__(self) -> int:
        """Operations waiting, in all."""
        return len(self._keys)

    def expire_all(self) -> None:
        """Complete every waiting operation as expired (broker shutdown)."""
        for ops in list(self._watchers.values()):
            for op in list(ops):
                op._expire()

    def _unwatch(self, op: DelayedOperation) -> None:
        for key in self._keys.pop(id(op), ()):
            ops = self._watchers.get(key)
            if ops is None:
                continue
            ops.remove(op)
            if not ops:
                del self._watchers[key]


# --- produce -------------------------------------------------------------------


class CommitCheckable(Protocol):
    """A partition as a delayed produce sees it."""

    def is_offset_committed(self, required_offset: int) -> tuple[bool, BrokerError | None]:
        """(done, error) for an acks=all write ending before `required_offset`."""
        ...


@dataclass(slots=True)
class _ProduceStatus:
    required_offset: int
    pending: bool = True
    error: BaseException | None = None


class DelayedProduce(DelayedOperation, Generic[K]):
    """An acks=all produce waiting for its partitions' HWs (Kafka's DelayedProduce).

    `required_offsets` maps each partition whose append succeeded to its last
    written offset + 1; `lookup` finds the partition, raising the broker's typed
    error when it is gone or no longer led here. :attr:`result` maps each
    partition to None (replicated), the partition's error, or RequestTimedOutError.
    """

    def __init__(
        self,
        timeout_ms: int,
        required_offsets: Mapping[K, int],
        lookup: Callable[[K], CommitCheckable],
    ) -> None:
        super().__init__(timeout_ms)
        self._lookup = lookup
        self._status = {k: _ProduceStatus(off) for k, off in required_offsets.items()}
        self.result: dict[K, BaseException | None] = {}

    def try_complete(self) -> bool:
        for key, st in self._status.items():
            if not st.pending:
                continue
            try:
                part = self._lookup(key)
            except Exception as exc:  # the broker's typed "not here / not leader" errors
                st.pending, st.error = False, exc
                continue
            done, error = part.is_offset_committed(st.required_offset)
            if done or error is not None:
                st.pending, st.error = False, error
        if any(st.pending for st in self._status.values()):
            return False
        return self.force_complete()

    def on_complete(self) -> None:
        for key, st in self._status.items():
            if st.pending:
                st.error = RequestTimedOutError(
                    f"not replicated to the ISR within {self.timeout_ms} ms"
                )
            self.result[key] = st.error


# --- fetch ---------------------------------------------------------------------


class Fetchable(Protocol):
    """A partition as a delayed fetch sees it."""

    @property
    def leader_epoch(self) -> int: ...
    @property
    def high_watermark(self) -> int: ...
    @property
    def log_end_offset(self) -> int: ...
    def last_stable_offset(self) -> int: ...
    def available_bytes(self, fetch_offset: int, upper_bound: int, max_bytes: int) -> int:
        """Bytes a fetch from `fetch_offset` would return below `upper_bound`."""
        ...


@dataclass(frozen=True, slots=True)
class FetchPartitionStatus:
    """One partition of a waiting fetch."""

    fetch_offset: int
    max_bytes: int
    # The fetcher's view of the leader epoch (-1: not checked).
    current_leader_epoch: int = -1


class DelayedFetch(DelayedOperation, Generic[K]):
    """A fetch waiting for ``min_bytes`` (Kafka's DelayedFetch). It completes early
    when enough bytes are readable below each partition's bound — the LEO for a
    follower, the HW (or LSO for read_committed) for a consumer — or when a
    partition errs, changed leader epoch or was truncated below the fetch offset;
    the caller then reads again and answers. :attr:`satisfied` is False after a
    plain timeout."""

    def __init__(
        self,
        timeout_ms: int,
        min_bytes: int,
        partitions: Mapping[K, FetchPartitionStatus],
        lookup: Callable[[K], Fetchable],
        *,
        from_follower: bool = False,
        read_committed: bool = False,
    ) -> None:
        super().__init__(timeout_ms)
        self.min_bytes = min_bytes
        self.partitions = dict(partitions)
        self._lookup = lookup
        self.from_follower = from_follower
        self.read_committed = read_committed
        self.satisfied = False

    def _bound(self, part: Fetchable) -> int:
        if self.from_follower:
            return part.log_end_offset
        return part.last_stable_offset() if self.read_committed else part.high_watermark

    def try_complete(self) -> bool:
        total = 0
        for key, st in self.partitions.items():
            try:
                part = self._lookup(key)
                if 0 <= st.current_leader_epoch != part.leader_epoch:
                    return self.force_complete()  # the answer is an epoch error
                bound = self._bound(part)
                if st.fetch_offset > bound:
                    return self.force_complete()  # truncated: the answer says so
                if st.fetch_offset < bound:
                    total += part.available_bytes(st.fetch_offset, bound, st.max_bytes)
            except Exception:  # gone, not led here, out of range: answer with the error
                return self.force_complete()
        if total >= self.min_bytes:
            return self.force_complete()
        return False

    def on_complete(self) -> None:
        self.satisfied = not self.expired
