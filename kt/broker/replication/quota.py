"""Replication throttles (Kafka's KIP-73 ReplicationQuotaManager), pure.

Two quotas per broker, both in bytes per second, set by the dynamic broker configs
`leader.replication.throttled.rate` (what this broker serves to throttled followers)
and `follower.replication.throttled.rate` (what it fetches for throttled replicas).
Which replicas are throttled comes from the topic configs
`leader.replication.throttled.replicas` / `follower.replication.throttled.replicas`:
`"P:B,P:B,..."` (partition P is throttled on broker B) or `"*"` (every partition).

A replica is throttled only when it is listed, **not in the ISR**, and the quota is
exceeded: the leader then leaves its data out of the fetch response, and the
follower leaves the partition out of its fetch request. So a reassignment's new
replicas copy at the throttled rate while the ISR's replication is never slowed.

The rate is measured like Kafka's `Rate` over `replication.quota.window.num` (11)
windows of `replication.quota.window.size.seconds` (1 s), both broker settings.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import lru_cache

from kt.storage.checkpoint import TopicPartition

LEADER_RATE = "leader.replication.throttled.rate"
FOLLOWER_RATE = "follower.replication.throttled.rate"
LEADER_REPLICAS = "leader.replication.throttled.replicas"
FOLLOWER_REPLICAS = "follower.replication.throttled.replicas"
#: the dynamic broker configs kt lets AlterConfigs change
DYNAMIC_BROKER_CONFIGS = (LEADER_RATE, FOLLOWER_RATE)


class ReplicationQuota:
    """A bytes-per-second quota over a sliding set of windows (None: unlimited)."""

    def __init__(
        self,
        rate: float | None = None,
        *,
        windows: int = 11,
        window_s: float = 1.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.rate = rate
        self.windows = windows
        self.window_s = window_s
        self.clock = clock
        # (window start, bytes) oldest first
        self._samples: list[list[float]] = []

    def _purge(self, now: float) -> None:
        horizon = now - self.windows * self.window_s
        self._samples = [s for s in self._samples if s[0] > horizon]

    def record(self, nbytes: int) -> None:
        """Count bytes replicated for throttled replicas."""
        now = self.clock()
        self._purge(now)
        if self._samples and now - self._samples[-1][0] < self.window_s:
            self._samples[-1][1] += nbytes
        else:
            self._samples.append([now, float(nbytes)])

    def measured(self) -> float:
        """The measured rate in bytes/s. As Kafka's Rate, the elapsed time counts at
        least windows - 1 whole windows, so a burst right after a quiet spell is not
        taken for a huge rate."""
        now = self.clock()
        self._purge(now)
        if not self._samples:
            return 0.0
        total = sum(s[1] for s in self._samples)
        elapsed = max(now - self._samples[0][0], (self.windows - 1) * self.window_s)
        return total / elapsed

    def is_exceeded(self) -> bool:
        """Whether throttled replicas must wait (never when no rate is set)."""
        return self.rate is not None and self.measured() > self.rate


@lru_cache(maxsize=1024)
def throttled_partitions(value: str, broker_id: int) -> frozenset[int] | None:
    """The partitions a `*.replication.throttled.replicas` value throttles on
    `broker_id`: None means all of them ("*"); malformed entries are ignored."""
    value = value.strip()
    if value == "*":
        return None
    out = set()
    for item in value.split(","):
        p, sep, b = item.strip().partition(":")
        if sep and p.strip().isdigit() and b.strip().lstrip("-").isdigit() and int(b) == broker_id:
            out.add(int(p))
    return frozenset(out)


def parse_rate(value: str | None) -> float | None:
    """A throttled rate as its dynamic broker config holds it, in bytes/s (None:
    unset, empty, malformed or negative: no throttle)."""
    if value is None or value.strip() == "":
        return None
    try:
        rate = float(value)
    except ValueError:
        return None
    # Kafka's default is Long.MaxValue: effectively no throttle.
    return rate if rate >= 0 else None


@dataclass(frozen=True, slots=True)
class ThrottleRates:
    """The replication throttles' rates in bytes/s (None: not throttled), from the
    dynamic broker configs: this broker's value, else the cluster default's."""

    leader: float | None = None
    follower: float | None = None


class ReplicationThrottles:
    """One broker's leader and follower quotas and the topics' throttled replicas."""

    def __init__(
        self,
        broker_id: int,
        topic_configs: Callable[[str], Mapping[str, str]],
        *,
        windows: int = 11,
        window_s: float = 1.0,
    ) -> None:
        self.broker_id = broker_id
        self.topic_configs = topic_configs
        self.leader = ReplicationQuota(windows=windows, window_s=window_s)
        self.follower = ReplicationQuota(windows=windows, window_s=window_s)

    def reconfigure(self, rates: ThrottleRates) -> None:
        """The dynamic broker configs changed: take the new rates (the measured
        windows are kept)."""
        self.leader.rate = rates.leader
        self.follower.rate = rates.follower

    def _listed(self, key: str, tp: TopicPartition) -> bool:
        value = self.topic_configs(tp.topic).get(key)
        if not value:
            return False
        parts = throttled_partitions(value, self.broker_id)
        return parts is None or tp.partition in parts

    def leader_throttled(self, tp: TopicPartition) -> bool:
        """Whether this broker, leading `tp`, throttles what it serves for it."""
        return self.leader.rate is not None and self._listed(LEADER_REPLICAS, tp)

    def follower_throttled(self, tp: TopicPartition) -> bool:
        """Whether this broker, following `tp`, throttles what it fetches for it."""
        return self.follower.rate is not None and self._listed(FOLLOWER_REPLICAS, tp)

    def should_leader_throttle(self, tp: TopicPartition, replica_in_isr: bool) -> bool:
        """Kafka's shouldLeaderThrottle: listed, the follower not in the ISR, and the
        leader quota exceeded."""
        return not replica_in_isr and self.leader_throttled(tp) and self.leader.is_exceeded()

    def should_follower_throttle(self, tp: TopicPartition, in_sync: bool) -> bool:
        """Kafka's shouldFollowerThrottle: listed, this replica not in sync, and the
        follower quota exceeded."""
        return not in_sync and self.follower_throttled(tp) and self.follower.is_exceeded()
