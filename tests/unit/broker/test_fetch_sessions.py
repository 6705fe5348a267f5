"""Incremental fetch sessions (KIP-227): the leader's cache and the follower's side."""

from __future__ import annotations

import itertools
from typing import Any

import pytest

from kt.broker.fetch_sessions import (
    FINAL_EPOCH,
    INITIAL_EPOCH,
    FetchPartition,
    FetchSessionCache,
    next_epoch,
)
from kt.broker.replication.fetcher import FollowerFetchSession
from kt.protocol import ErrorCode
from kt.protocol.regions import ExternalRecords
from kt.storage.checkpoint import TopicPartition


def fp(partition: int, offset: int = 0, topic: str = "t") -> FetchPartition:
    return FetchPartition((topic, partition), topic, None, partition, offset, 1 << 20)


def entry(partition: int, hw: int = 0, records: Any = b"", error: int = 0, **kw: Any) -> dict:
    out = {"partition_index": partition, "error_code": error, "high_watermark": hw,
           "last_stable_offset": hw, "log_start_offset": 0, "records": records}  # fmt: skip
    out.update(kw)
    return out


def ids() -> Any:
    counter = itertools.count(100)
    return lambda lo, hi: next(counter)


def open_session(cache: FetchSessionCache, parts: list[FetchPartition], now: int = 0) -> int:
    ctx = cache.new_context(0, INITIAL_EPOCH, parts, [], privileged=True,
                            uses_topic_ids=False, now_ms=now)  # fmt: skip
    assert ctx.kind == "full"
    error, sid, out = cache.finish(ctx, [(p, entry(p.partition)) for p in parts], now)
    assert error == ErrorCode.NONE and sid != 0 and len(out) == len(parts)
    return sid


def test_next_epoch_wraps_to_one_and_final_stays_final() -> None:
    assert next_epoch(0) == 1
    assert next_epoch(41) == 42
    assert next_epoch(2**31 - 1) == 1
    assert next_epoch(FINAL_EPOCH) == FINAL_EPOCH


def test_sessionless_requests_create_nothing() -> None:
    cache = FetchSessionCache(rng=ids())
    ctx = cache.new_context(0, FINAL_EPOCH, [fp(0)], [], privileged=False,
                            uses_topic_ids=False, now_ms=0)  # fmt: skip
    assert ctx.kind == "sessionless"
    error, sid, out = cache.finish(ctx, [(ctx.partitions[0], entry(0))], 0)
    assert (error, sid, len(out), len(cache)) == (ErrorCode.NONE, 0, 1, 0)


def test_incremental_fetch_reads_every_cached_partition_and_answers_only_news() -> None:
    cache = FetchSessionCache(rng=ids())
    a, b, c = fp(0, 10), fp(1, 20), fp(2, 30)
    sid = open_session(cache, [a, b, c])
    assert sid == 100
    # Epoch 1: only partition 1 moved on (the fetcher appended what it got).
    ctx = cache.new_context(sid, 1, [fp(1, 25)], [], privileged=True,
                            uses_topic_ids=False, now_ms=1)  # fmt: skip
    assert ctx.kind == "incremental"
    # Every cached partition is read, partition 1 at its new offset.
    assert [(p.partition, p.fetch_offset) for p in ctx.partitions] == [(0, 10), (1, 25), (2, 30)]
    results = [
        (ctx.partitions[0], entry(0, records=ExternalRecords(100, (3, 0)))),  # data
        (ctx.partitions[1], entry(1)),  # nothing new
        (ctx.partitions[2], entry(2, hw=7)),  # the HW moved
    ]
    error, out_sid, out = cache.finish(ctx, results, 1)
    assert (error, out_sid) == (ErrorCode.NONE, sid)
    assert [e["partition_index"] for _, e in out] == [0, 2]
    # Answered partitions move to the back: the next response budget goes to 1 first.
    assert list(cache.get(sid).partitions) == [("t", 1), ("t", 0), ("t", 2)]
    # Epoch 2: nothing changed anywhere, an empty answer; the HW already told stays out.
    ctx = cache.new_context(sid, 2, [], [], privileged=True, uses_topic_ids=False, now_ms=2)
    error, _, out = cache.finish(ctx, [(p, entry(p.partition, hw=7 if p.partition == 2 else 0))
                                       for p in ctx.partitions], 2)  # fmt: skip
    assert (error, out) == (ErrorCode.NONE, [])


def test_errors_are_always_answered_and_resent_once_they_clear() -> None:
    cache = FetchSessionCache(rng=ids())
    p = fp(0)
    sid = open_session(cache, [p])
    ctx = cache.new_context(sid, 1, [], [], privileged=True, uses_topic_ids=False, now_ms=1)
    err = entry(0, hw=-1, error=ErrorCode.NOT_LEADER_OR_FOLLOWER)
    assert len(cache.finish(ctx, [(ctx.partitions[0], err)], 1)[2]) == 1
    ctx = cache.new_context(sid, 2, [], [], privileged=True, uses_topic_ids=False, now_ms=2)
    assert len(cache.finish(ctx, [(ctx.partitions[0], err)], 2)[2]) == 1
    # The error cleared with the same HW as before it: sent again all the same.
    ctx = cache.new_context(sid, 3, [], [], privileged=True, uses_topic_ids=False, now_ms=3)
    assert len(cache.finish(ctx, [(ctx.partitions[0], entry(0))], 3)[2]) == 1


def test_log_start_lso_and_diverging_epoch_are_news() -> None:
    cache = FetchSessionCache(rng=ids())
    sid = open_session(cache, [fp(0)])
    epoch = 1
    for news in ({"log_start_offset": 5}, {"last_stable_offset": 3, "high_watermark": 0},
                 {"diverging_epoch": {"epoch": 2, "end_offset": 9}}):  # fmt: skip
        ctx = cache.new_context(sid, epoch, [], [], privileged=True,
                                uses_topic_ids=False, now_ms=epoch)  # fmt: skip
        e = entry(0)
        e.update(news)
        assert len(cache.finish(ctx, [(ctx.partitions[0], e)], epoch)[2]) == 1, news
        epoch += 1


def test_session_errors() -> None:
    cache = FetchSessionCache(rng=ids())
    sid = open_session(cache, [fp(0)])
    unknown = cache.new_context(sid + 1, 1, [], [], privileged=True,
                                uses_topic_ids=False, now_ms=1)  # fmt: skip
    assert unknown.error == ErrorCode.FETCH_SESSION_ID_NOT_FOUND
    assert cache.finish(unknown, [], 1) == (ErrorCode.FETCH_SESSION_ID_NOT_FOUND, 0, [])
    stale = cache.new_context(sid, 5, [], [], privileged=True, uses_topic_ids=False, now_ms=1)
    assert stale.error == ErrorCode.INVALID_FETCH_SESSION_EPOCH
    ids_now = cache.new_context(sid, 1, [], [], privileged=True, uses_topic_ids=True, now_ms=1)
    assert ids_now.error == ErrorCode.FETCH_SESSION_TOPIC_ID_ERROR
    # None of these touched the session: epoch 1 still works.
    ok = cache.new_context(sid, 1, [], [], privileged=True, uses_topic_ids=False, now_ms=1)
    assert ok.kind == "incremental"


def test_a_duplicate_request_answered_late_gets_an_epoch_error() -> None:
    # The same epoch sent twice (a retry on a new connection while the first long-polls):
    # the second is refused at once; the first, answered after a newer request moved
    # the session on, is refused when it finishes.
    cache = FetchSessionCache(rng=ids())
    sid = open_session(cache, [fp(0)])
    first = cache.new_context(sid, 1, [], [], privileged=True, uses_topic_ids=False, now_ms=1)
    again = cache.new_context(sid, 1, [], [], privileged=True, uses_topic_ids=False, now_ms=1)
    assert again.error == ErrorCode.INVALID_FETCH_SESSION_EPOCH
    newer = cache.new_context(sid, 2, [], [], privileged=True, uses_topic_ids=False, now_ms=2)
    assert newer.kind == "incremental"
    error, _, out = cache.finish(first, [(first.partitions[0], entry(0, hw=4))], 3)
    assert (error, out) == (ErrorCode.INVALID_FETCH_SESSION_EPOCH, [])


def test_a_session_evicted_while_its_fetch_waited_still_answers_it() -> None:
    cache = FetchSessionCache(rng=ids())
    sid = open_session(cache, [fp(0)])
    ctx = cache.new_context(sid, 1, [], [], privileged=True, uses_topic_ids=False, now_ms=1)
    cache.remove(sid)
    error, out_sid, out = cache.finish(ctx, [(ctx.partitions[0], entry(0, hw=4))], 2)
    assert (error, out_sid, len(out)) == (ErrorCode.NONE, sid, 1)
    # The fetcher's next incremental request finds no session and starts over.
    again = cache.new_context(sid, 2, [], [], privileged=True, uses_topic_ids=False, now_ms=3)
    assert again.error == ErrorCode.FETCH_SESSION_ID_NOT_FOUND


def test_forgetting_every_partition_closes_the_session_and_full_requests_close_theirs() -> None:
    cache = FetchSessionCache(rng=ids())
    sid = open_session(cache, [fp(0), fp(1)])
    ctx = cache.new_context(sid, 1, [], [("t", 0)], privileged=True,
                            uses_topic_ids=False, now_ms=1)  # fmt: skip
    assert [p.partition for p in ctx.partitions] == [1]
    ctx = cache.new_context(sid, 2, [], [("t", 1)], privileged=True,
                            uses_topic_ids=False, now_ms=2)  # fmt: skip
    assert ctx.kind == "sessionless" and cache.get(sid) is None
    sid = open_session(cache, [fp(0)])
    # A full request naming the session closes it (and opens a new one).
    new = open_session_with(cache, sid, [fp(0)])
    assert new != sid and cache.get(sid) is None and cache.get(new) is not None
    cache.new_context(new, FINAL_EPOCH, [fp(0)], [], privileged=True,
                      uses_topic_ids=False, now_ms=3)  # fmt: skip
    assert len(cache) == 0


def open_session_with(cache: FetchSessionCache, close: int, parts: list[FetchPartition]) -> int:
    ctx = cache.new_context(close, INITIAL_EPOCH, parts, [], privileged=True,
                            uses_topic_ids=False, now_ms=0)  # fmt: skip
    return cache.finish(ctx, [(p, entry(p.partition)) for p in parts], 0)[1]


def test_a_full_cache_evicts_as_kafka_does() -> None:
    cache = FetchSessionCache(max_sessions=2, eviction_ms=1000, rng=ids())

    def create(privileged: bool, size: int, now: int) -> int:
        parts = [fp(i) for i in range(size)]
        ctx = cache.new_context(0, INITIAL_EPOCH, parts, [], privileged=privileged,
                                uses_topic_ids=False, now_ms=now)  # fmt: skip
        return cache.finish(ctx, [(p, entry(p.partition)) for p in parts], now)[1]

    consumer = create(False, 5, 0)
    follower = create(True, 1, 0)
    # Young sessions: a consumer may not evict anything; no session for it (id 0).
    assert create(False, 50, 10) == 0
    # A follower evicts the young consumer session (privileged beats unprivileged).
    f2 = create(True, 1, 20)
    assert f2 != 0 and cache.get(consumer) is None and cache.get(follower) is not None
    # Two young followers: nothing evictable for anyone.
    assert create(True, 9, 30) == 0
    # Stale (unused for longer than eviction_ms): the least recently used goes.
    ctx = cache.new_context(f2, 1, [], [], privileged=True, uses_topic_ids=False, now_ms=900)
    cache.finish(ctx, [], 900)
    assert create(False, 1, 1500) != 0
    assert cache.get(follower) is None and cache.get(f2) is not None
    assert cache.evictions == 2


def test_no_slots_means_no_sessions() -> None:
    cache = FetchSessionCache(max_sessions=0, rng=ids())
    ctx = cache.new_context(0, INITIAL_EPOCH, [fp(0)], [], privileged=True,
                            uses_topic_ids=False, now_ms=0)  # fmt: skip
    assert cache.finish(ctx, [(fp(0), entry(0))], 0)[1] == 0


# --- the follower's side ----------------------------------------------------------------

T0, T1, T2 = (TopicPartition("t", i) for i in range(3))


TID, TID2 = b"\1" * 16, b"\2" * 16


def params(offset: int, epoch: int = 0, tid: bytes = TID) -> tuple[bytes, int, int, int, int, int]:
    return (tid, offset, epoch, epoch, 0, 1 << 20)


def test_follower_session_names_only_what_changed() -> None:
    s = FollowerFetchSession()
    wanted = {T0: params(0), T1: params(0)}
    assert s.full and s.plan(wanted) == ([T0, T1], [])
    assert s.answered(wanted, ErrorCode.NONE, 77)
    assert (s.id, s.epoch, s.full) == (77, 1, False)
    # T0 got data (its offset moved), T1 did not, T2 is new.
    wanted = {T0: params(5), T1: params(0), T2: params(0)}
    assert s.plan(wanted) == ([T0, T2], [])
    assert s.answered(wanted, ErrorCode.NONE, 77) and s.epoch == 2
    # T1 left (moved to another leader): forgotten under its topic id; a new leader
    # epoch for T0 is named.
    wanted = {T0: params(5, epoch=1), T2: params(0)}
    assert s.plan(wanted) == ([T0], [(T1, TID)])


def test_follower_session_starts_over_when_a_topic_is_recreated() -> None:
    # Same name, new topic id, even with the same offsets and epochs: the leader's
    # session holds the partition under the old id, so the session starts over (a
    # full request closes it) instead of going on with an orphan.
    s = FollowerFetchSession()
    wanted = {T0: params(0), T1: params(0)}
    s.answered(wanted, ErrorCode.NONE, 77)
    again = {T0: params(0, tid=TID2), T1: params(0)}
    assert s.plan(again) == ([T0, T1], [])
    assert (s.id, s.full) == (77, True)


def test_follower_session_ends_when_the_leader_answers_without_one() -> None:
    s = FollowerFetchSession()
    wanted = {T0: params(0)}
    s.answered(wanted, ErrorCode.NONE, 77)
    # An incremental answer with session id 0: valid, but the session is over.
    assert s.answered(wanted, ErrorCode.NONE, 0)
    assert (s.id, s.full) == (0, True)


def test_follower_session_starts_over_after_errors() -> None:
    s = FollowerFetchSession()
    wanted = {T0: params(0)}
    s.answered(wanted, ErrorCode.NONE, 77)
    s.answered(wanted, ErrorCode.NONE, 77)
    # A stale epoch: the next request is full and closes session 77.
    assert not s.answered(wanted, ErrorCode.INVALID_FETCH_SESSION_EPOCH, 0)
    assert (s.id, s.epoch) == (77, INITIAL_EPOCH) and s.plan(wanted) == ([T0], [])
    s.answered(wanted, ErrorCode.NONE, 78)
    # The leader lost it (restarted): full again, with no id to close.
    assert not s.answered(wanted, ErrorCode.FETCH_SESSION_ID_NOT_FOUND, 0)
    assert (s.id, s.epoch) == (0, INITIAL_EPOCH)
    # A leader that declines a session (id 0) is asked again next time.
    assert s.answered(wanted, ErrorCode.NONE, 0) and s.full
    s.answered(wanted, ErrorCode.NONE, 79)
    s.failed()  # no answer at all
    assert (s.id, s.epoch) == (79, INITIAL_EPOCH)


@pytest.mark.parametrize("epoch", [INITIAL_EPOCH, FINAL_EPOCH])
def test_full_request_with_unknown_session_id_is_not_an_error(epoch: int) -> None:
    cache = FetchSessionCache(rng=ids())
    ctx = cache.new_context(12345, epoch, [fp(0)], [], privileged=True,
                            uses_topic_ids=False, now_ms=0)  # fmt: skip
    assert ctx.kind in ("full", "sessionless") and ctx.error == ErrorCode.NONE


def test_broker_config_sizes_the_cache() -> None:
    from kt.broker.config import ConfigError, load_config

    cfg = load_config(None, {})
    assert cfg.get_int("max.incremental.fetch.session.cache.slots") == 1000  # Kafka's default
    cfg = load_config(None, {"max.incremental.fetch.session.cache.slots": "0"})
    assert not cfg.unknown_keys  # a known key, and 0 (no sessions) is allowed
    with pytest.raises(ConfigError, match=r"cache\.slots must be >= 0"):
        load_config(None, {"max.incremental.fetch.session.cache.slots": "-1"})
