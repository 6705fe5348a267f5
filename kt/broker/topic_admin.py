"""TopicAdmin: creating, growing, reconfiguring and deleting topics, as Kafka's
ZooKeeper-mode brokers do it (AdminManager / AdminZkClient).

The broker that receives the request validates it, places the replicas (Kafka's
rack-aware round robin over the live brokers, or the caller's manual assignment),
and writes ZooKeeper: `/config/topics/T` and `/brokers/topics/T` for a new topic,
a new assignment for CreatePartitions, `/admin/delete_topics/T` for a deletion, the
config znode plus a change notification for new configs. It never touches logs:
the controller sees the znodes and tells the replicas (LeaderAndIsr, StopReplica).
A request then waits, up to its timeout, until the metadata cache shows the
result (every partition with a leader, or the topic gone); on timeout it answers
REQUEST_TIMED_OUT as Kafka's DelayedCreatePartitions does, although the topic
will still appear.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable

from kt.broker.errors import TopicError
from kt.broker.metadata import cluster_store as cs
from kt.broker.metadata import znodes
from kt.broker.metadata.cache import MetadataCache
from kt.broker.metadata.topics import TopicsView
from kt.broker.metadata_store import INTERNAL_TOPICS, TopicInfo, topic_name_problem
from kt.broker.topic_configs import (
    MESSAGE_FORMAT_VERSION,
    record_format_before_v2,
    validate_topic_configs,
)
from kt.cluster import assignment as placement
from kt.protocol import ErrorCode
from kt.storage.partition_metadata import random_uuid

log = logging.getLogger("kt.broker.topic_admin")

# The inter-broker protocol kt speaks (Kafka 3.8); named in the message.format.version
# warning.
INTER_BROKER_PROTOCOL_VERSION = "3.8-IV0"


class TopicAdmin:
    """Topic changes through the cluster store, answered once the controller acted."""

    def __init__(
        self,
        cluster: cs.ClusterStore,
        cache: MetadataCache,
        topics: TopicsView,
        metadata_changed: Callable[[float], Awaitable[bool]],
    ) -> None:
        self.cluster = cluster
        self.cache = cache
        self.topics = topics
        self._metadata_changed = metadata_changed

    # --- validation ----------------------------------------------------------

    def colliding_topic(self, name: str) -> str | None:
        """An existing topic whose name differs from `name` only in '.' versus '_'
        (their metric names would collide, so Kafka refuses the pair)."""
        if "." not in name and "_" not in name:
            return None
        unified = name.replace(".", "_")
        for other in self.topics.topics:
            if other != name and other.replace(".", "_") == unified:
                return other
        return None

    def replica_assignment_problem(self, replicas: list[int], expected: int | None) -> str | None:
        """Why a manual replica list is unusable (Kafka's messages), or None."""
        live = {b.broker_id for b in self.cache.alive_brokers()}
        return placement.replica_assignment_problem(replicas, live, expected)

    def _brokers(self) -> list[placement.BrokerMetadata]:
        racks = {b.broker_id: b.rack for b in self.cache.alive_brokers()}
        try:
            return placement.broker_metadatas(racks, placement.RackAwareMode.SAFE)
        except placement.AssignmentError as exc:
            raise TopicError(exc.error_code, str(exc)) from None

    # --- operations ------------------------------------------------------------

    async def create_topic(
        self,
        name: str,
        partitions: int,
        replication_factor: int,
        configs: dict[str, str] | None = None,
        *,
        validate_only: bool = False,
        assignment: dict[int, list[int]] | None = None,
        timeout_s: float = 30.0,
        internal: bool = False,
    ) -> TopicInfo:
        """Create a topic (TopicError with Kafka's codes and messages)."""
        problem = topic_name_problem(name)
        if problem:
            raise TopicError(ErrorCode.INVALID_TOPIC_EXCEPTION, problem)
        if name in self.topics.topics or await self.cluster.get_topic_assignment(name):
            raise TopicError(ErrorCode.TOPIC_ALREADY_EXISTS, f"Topic '{name}' already exists.")
        collides = self.colliding_topic(name)
        if collides is not None:
            raise TopicError(
                ErrorCode.INVALID_TOPIC_EXCEPTION,
                f"Topic '{name}' collides with existing topic: {collides}",
            )
        if assignment is None:
            if partitions <= 0:
                raise TopicError(
                    ErrorCode.INVALID_PARTITIONS,
                    "Number of partitions was set to an invalid non-positive value.",
                )
            if replication_factor <= 0:
                raise TopicError(
                    ErrorCode.INVALID_REPLICATION_FACTOR,
                    "Replication factor must be larger than 0, or -1 to use the default value.",
                )
            try:
                assignment = placement.assign_replicas_to_brokers(
                    self._brokers(), partitions, replication_factor
                )
            except placement.AssignmentError as exc:
                raise TopicError(exc.error_code, str(exc)) from None
        else:
            partitions = len(assignment)
            replication_factor = len(next(iter(assignment.values()), []))
        try:
            clean = validate_topic_configs(configs or {})
        except ValueError as exc:
            raise TopicError(ErrorCode.INVALID_CONFIG, str(exc)) from None
        if not validate_only:
            _warn_ignored_configs(name, clean)
        topic_id = random_uuid()
        info = TopicInfo(name, topic_id, partitions, replication_factor, clean,
                         {p: list(r) for p, r in assignment.items()})  # fmt: skip
        if validate_only:
            return info
        try:
            await self.cluster.create_topic(name, topic_id, assignment, clean)
        except cs.TopicExistsError:
            raise TopicError(
                ErrorCode.TOPIC_ALREADY_EXISTS, f"Topic '{name}' already exists."
            ) from None
        self.topics.set_configs(name, clean)
        log.info("created topic %s: %d partitions, replication factor %d%s", name, partitions,
                 replication_factor, " (internal)" if internal else "")  # fmt: skip
        if timeout_s > 0 and not await self._wait(lambda: self._all_led(name, partitions),
                                                  timeout_s):  # fmt: skip
            raise TopicError(
                ErrorCode.REQUEST_TIMED_OUT,
                f"Timed out waiting for the leaders of topic '{name}' (it will still be created).",
            )
        return self.topics.get(name) or info

    async def add_partitions(
        self,
        name: str,
        total: int,
        *,
        validate_only: bool = False,
        assignments: list[list[int]] | None = None,
        timeout_s: float = 30.0,
    ) -> None:
        """Grow a topic to `total` partitions (optionally with the new replica lists)."""
        current = await self.cluster.get_topic_assignment(name)
        if current is None or name in await self.cluster.topics_marked_for_deletion():
            raise TopicError(
                ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"Topic '{name}' does not exist."
            )
        existing = {p: list(r) for p, r in current.partitions.items()}
        if assignments is not None:
            additional = total - len(existing)
            if total <= len(existing):
                raise TopicError(
                    ErrorCode.INVALID_PARTITIONS,
                    f"Topic already has {len(existing)} partition(s)."
                    if total == len(existing)
                    else f"The topic {name} currently has {len(existing)} partition(s); "
                    f"{total} would not be an increase.",
                )
            if len(assignments) != additional:
                raise TopicError(
                    ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                    f"Attempted to add {additional} additional partition(s), but only "
                    f"{len(assignments)} assignment(s) were specified.",
                )
            factor = len(existing.get(0, []))
            for replicas in assignments:
                problem = self.replica_assignment_problem(replicas, factor)
                if problem:
                    raise TopicError(ErrorCode.INVALID_REPLICA_ASSIGNMENT, problem)
            added = {len(existing) + i: list(r) for i, r in enumerate(assignments)}
        else:
            try:
                added = placement.assign_new_partitions(name, existing, self._brokers(), total)
            except placement.AssignmentError as exc:
                raise TopicError(exc.error_code, str(exc)) from None
        if validate_only:
            return
        new = znodes.TopicAssignment(
            {**existing, **added},
            current.topic_id,
            dict(current.adding_replicas),
            dict(current.removing_replicas),
        )
        await self.cluster.set_topic_assignment(name, new)
        log.info("topic %s: %d partitions now", name, total)
        if timeout_s > 0:
            await self._wait(lambda: self._all_led(name, total), timeout_s)

    async def delete_topic(self, name: str, *, timeout_s: float = 30.0) -> None:
        """Mark a topic for deletion and wait until the controller removed it."""
        if await self.cluster.get_topic_assignment(name) is None:
            raise TopicError(
                ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"Topic '{name}' does not exist."
            )
        if name in INTERNAL_TOPICS:
            raise TopicError(ErrorCode.INVALID_REQUEST, f"Topic '{name}' is internal.")
        try:
            await self.cluster.mark_topic_for_deletion(name)
        except cs.TopicAlreadyMarkedForDeletionError:
            pass  # a retry: wait as for the first request
        if timeout_s > 0 and not await self._wait(lambda: not self.cache.contains(name), timeout_s):
            raise TopicError(
                ErrorCode.REQUEST_TIMED_OUT,
                f"Timed out waiting for the deletion of topic '{name}' (it is marked for "
                "deletion and will go when all its replicas are reachable).",
            )
        self.topics.drop_configs(name)

    async def alter_topic_configs(self, name: str, configs: dict[str, str]) -> None:
        """Replace a topic's overrides (validated); every broker applies them when the
        change notification reaches it."""
        if await self.cluster.get_topic_assignment(name) is None:
            raise TopicError(
                ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"Topic '{name}' does not exist."
            )
        try:
            clean = validate_topic_configs(configs)
        except ValueError as exc:
            raise TopicError(ErrorCode.INVALID_CONFIG, str(exc)) from None
        _warn_ignored_configs(name, clean)
        await self.cluster.set_topic_config(name, clean)
        self.topics.set_configs(name, clean)

    # --- waiting -----------------------------------------------------------------

    def _all_led(self, name: str, partitions: int) -> bool:
        parts = self.cache.partitions(name)
        return len(parts) >= partitions and all(v.leader >= 0 for v in parts.values())

    async def _wait(self, done: Callable[[], bool], timeout_s: float) -> bool:
        deadline = time.monotonic() + timeout_s
        while not done():
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return False
            # Woken by the next UpdateMetadata; the short cap covers one that raced us.
            await self._metadata_changed(min(remaining, 0.5))
        return True


def _warn_ignored_configs(topic: str, configs: dict[str, str]) -> None:
    """Kafka 3.x keeps a topic's message.format.version but ignores it (the
    inter-broker protocol is past 3.0); it warns when the value names a record
    format older than v2 (LogConfig.MessageFormatVersion.shouldWarn)."""
    value = configs.get(MESSAGE_FORMAT_VERSION)
    if value is not None and record_format_before_v2(value):
        log.warning(
            "Topic configuration %s with value `%s` is ignored for `%s` because the "
            "inter-broker protocol version `%s` is greater or equal than 3.0. This "
            "configuration is deprecated and it will be removed in Apache Kafka 4.0.",
            MESSAGE_FORMAT_VERSION, value, topic, INTER_BROKER_PROTOCOL_VERSION,
        )  # fmt: skip
