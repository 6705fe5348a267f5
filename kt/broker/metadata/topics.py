"""TopicsView: the topics as this broker knows them, for the handlers.

A topic's partitions, replicas and id come from the metadata cache (what the
controller last said); its config overrides from `/config/topics/T`, loaded at
start and kept current by the config change notifications (the config manager).
Handlers read topics only through this view, so every broker of a cluster answers
from the controller's state, and the single-node broker from the same code.
"""

from __future__ import annotations

from kt.broker.metadata.cache import MetadataCache
from kt.broker.metadata_store import TopicInfo


class TopicsView:
    """Read-only topics: cache plus configs, rebuilt when either changes."""

    def __init__(self, cache: MetadataCache) -> None:
        self.cache = cache
        self.configs: dict[str, dict[str, str]] = {}
        self._configs_version = 0
        self._built_for: tuple[int, int] = (-1, -1)
        self._topics: dict[str, TopicInfo] = {}

    def set_configs(self, topic: str, configs: dict[str, str]) -> None:
        """A topic's overrides changed (or were loaded)."""
        self.configs[topic] = dict(configs)
        self._configs_version += 1

    def drop_configs(self, topic: str) -> None:
        """A deleted topic's overrides."""
        if self.configs.pop(topic, None) is not None:
            self._configs_version += 1

    @property
    def topics(self) -> dict[str, TopicInfo]:
        """Every topic with at least one partition in the cache, by name."""
        key = (self.cache.version, self._configs_version)
        if key != self._built_for:
            out: dict[str, TopicInfo] = {}
            for name in self.cache.topics():
                parts = self.cache.partitions(name)
                replicas = {p: list(v.replicas) for p, v in sorted(parts.items())}
                first = next(iter(replicas.values()), [])
                out[name] = TopicInfo(
                    name,
                    self.cache.topic_id(name) or bytes(16),
                    len(parts),
                    len(first),
                    dict(self.configs.get(name, {})),
                    replicas,
                )
            self._topics = out
            self._built_for = key
        return self._topics

    def get(self, name: str) -> TopicInfo | None:
        """One topic, if it exists."""
        return self.topics.get(name)

    def by_id(self, topic_id: bytes) -> TopicInfo | None:
        """The topic with this id, if any."""
        name = self.cache.topic_by_id(topic_id)
        return self.topics.get(name) if name is not None else None
