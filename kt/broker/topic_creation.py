"""Topics created on a client's behalf: auto-created topics and the internal ones.

Kafka's AutoTopicCreationManager: a Metadata request naming a missing topic creates
it with the broker's defaults when `auto.create.topics.enable` is on; the group and
transaction coordinators create `__consumer_offsets` and `__transaction_state` on
first use. Both go through the topic admin of the cluster membership.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING

from kt.broker.errors import TopicError
from kt.broker.metadata_store import TopicInfo, topic_name_problem
from kt.protocol import ErrorCode

if TYPE_CHECKING:
    from kt.broker.metadata.topics import TopicsView
    from kt.broker.settings import TopicCreationSettings
    from kt.broker.topic_admin import TopicAdmin

log = logging.getLogger("kt.broker")


class TopicCreator:
    """Creates topics for clients and coordinators.

    `admin` returns the topic admin (it raises TopicError(NOT_CONTROLLER) until the
    broker joined its cluster)."""

    def __init__(
        self,
        settings: TopicCreationSettings,
        topics: TopicsView,
        admin: Callable[[], TopicAdmin],
    ) -> None:
        self._settings = settings
        self._topics = topics
        self._admin = admin

    def auto_create_enabled(self) -> bool:
        """True when metadata requests may create topics."""
        return self._settings.auto_create_topics_enable

    async def maybe_auto_create(self, name: str, *, wait_s: float = 2.0) -> TopicInfo | None:
        """Create `name` with the broker defaults if auto-creation is on; waits a
        moment for its leaders, so a client's first Metadata usually finds the topic
        ready rather than LEADER_NOT_AVAILABLE."""
        info = self._topics.get(name)
        if info is not None:
            return info
        if not self.auto_create_enabled() or topic_name_problem(name):
            return None
        factor = min(
            self._settings.default_replication_factor,
            max(1, len(self._topics.cache.alive_brokers())),
        )
        try:
            return await self._admin().create_topic(
                name, self._settings.num_partitions, factor, timeout_s=wait_s
            )
        except TopicError as exc:
            if exc.code not in (ErrorCode.TOPIC_ALREADY_EXISTS, ErrorCode.REQUEST_TIMED_OUT):
                log.warning("cannot auto-create topic %s: %s", name, exc.message)
            return self._topics.get(name)

    async def ensure_internal_topic(
        self,
        name: str,
        partitions: int,
        configs: dict[str, str],
        replication_factor: int,
        *,
        factor_key: str = "offsets.topic.replication.factor",
    ) -> TopicInfo | None:
        """Create an internal topic (__consumer_offsets, __transaction_state) on first
        use; `factor_key` names the setting the replication factor came from.

        In a cluster the replication factor is strict, as in Kafka since 0.11: while
        fewer brokers are alive than it asks for, the topic is not created (callers
        answer COORDINATOR_NOT_AVAILABLE and clients retry). Capping it instead would
        create the topic with fewer replicas for good whenever the first consumer
        arrives while a broker is down. The single-node broker has one broker, ever,
        so there the factor is 1."""
        info = self._topics.get(name)
        if info is not None:
            return info
        alive = len(self._topics.cache.alive_brokers())
        if not self._settings.in_cluster:
            factor = 1
        elif alive < replication_factor:
            log.warning(
                "not creating %s yet: %d live brokers do not meet its replication factor %d "
                "(%s); this is expected while a cluster starts",
                name, alive, replication_factor, factor_key,
            )  # fmt: skip
            return None
        else:
            factor = replication_factor
        try:
            return await self._admin().create_topic(
                name, partitions, factor, configs, timeout_s=10.0, internal=True
            )
        except TopicError as exc:
            if exc.code != ErrorCode.TOPIC_ALREADY_EXISTS:
                log.warning("cannot create %s: %s", name, exc.message)
            return self._topics.get(name)
