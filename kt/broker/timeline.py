"""Leadership-change timeline marks: debug lines that time a failover step by step.

Each mark is one line on the ``kt.timeline`` logger at debug level::

    timeline lai_leader mono=12345.678901 wall=1764037000.123456 tp=failover-0 epoch=7

``mono`` is ``time.monotonic()`` (CLOCK_MONOTONIC, one clock for every process on
the host, so a benchmark can line up several brokers' logs with its own
timestamps); ``wall`` is ``time.time()``. Enable it with
``KT_DEBUG_LOGGERS=kt.timeline`` in a broker's environment (see
kt/tools/broker_cmd.py); bench/cluster_bench.py ``--failover-only --timeline``
reads the lines back.

The marks sit on paths a failover takes once (the controller's election, a
LeaderAndIsr) or are limited to the first occurrence after a partition got a new
leader or follower role (:func:`arm` then :func:`once`), so a busy partition does
not log per request. With the logger off nothing is armed, and the per-request call
sites test :func:`armed` (an empty dict) before building a key or fields.
"""

from __future__ import annotations

import logging
import time

log = logging.getLogger("kt.timeline")

#: Marked once on a new leader after its LeaderAndIsr.
LEADER_EVENTS = ("leader_follower_fetch", "leader_hw", "leader_produce", "leader_produce_acked")
#: Marked once on a new follower after its LeaderAndIsr.
FOLLOWER_EVENTS = ("follower_fetch_sent", "follower_fetch_answered")

# What is still to be marked once, per key (a partition's name), since it was armed.
_pending: dict[str, set[str]] = {}
# The last value marked by `changed`, per key.
_last: dict[str, object] = {}


def enabled() -> bool:
    """Whether timeline marks are logged."""
    return log.isEnabledFor(logging.DEBUG)


def armed() -> bool:
    """Whether any `once` event is armed: hot paths check this before building the
    key and fields of a :func:`once` call."""
    return bool(_pending)


def mark(event: str, **fields: object) -> None:
    """Log `event` now with its fields (a no-op unless enabled)."""
    if not log.isEnabledFor(logging.DEBUG):
        return
    extra = " ".join(f"{k}={v}" for k, v in fields.items())
    log.debug("timeline %s mono=%.6f wall=%.6f %s", event, time.monotonic(), time.time(), extra)


def arm(key: str, events: tuple[str, ...]) -> None:
    """Make each of `events` markable once more for `key` (a role change)."""
    if log.isEnabledFor(logging.DEBUG):
        _pending[key] = set(events)


def once(key: str, event: str, **fields: object) -> None:
    """Mark `event` for `key` if it is armed, and disarm it."""
    if not _pending:
        return
    left = _pending.get(key)
    if left is None or event not in left:
        return
    left.discard(event)
    if not left:
        del _pending[key]
    mark(event, key=key, **fields)


def changed(key: str, value: object, event: str, **fields: object) -> None:
    """Mark `event` when `value` differs from the last one marked for `key`."""
    if not log.isEnabledFor(logging.DEBUG) or _last.get(key, _last) == value:
        return
    _last[key] = value
    mark(event, key=key, value=value, **fields)


def reset() -> None:
    """Forget armed events and last values (tests)."""
    _pending.clear()
    _last.clear()
