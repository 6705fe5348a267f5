"""Topic config overrides as this broker applies them.

Overrides live in the coordination store (`/config/topics/T`); the config manager
tells this service of changes, a handler asks it to re-read one topic before
answering (DescribeConfigs, IncrementalAlterConfigs). Applying a change updates
the topics view (what handlers report) and the live logs (segment size, retention,
cleanup policy...).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from kt.broker.log_manager import LogManager
    from kt.broker.metadata.topics import TopicsView

#: reads one topic's overrides from the coordination store
ReadTopicConfig = Callable[[str], Awaitable[dict[str, str]]]


class TopicConfigs:
    """Applies topic overrides to the topics view and the logs."""

    def __init__(self, topics: TopicsView, logs: LogManager, read: ReadTopicConfig) -> None:
        self._topics = topics
        self._logs = logs
        self._read = read

    def apply(self, name: str, configs: dict[str, str]) -> None:
        """A topic's overrides were loaded or changed: remember and apply them live."""
        self._topics.set_configs(name, configs)
        self._logs.update_config(name, configs)

    def of(self, name: str) -> dict[str, str]:
        """A topic's overrides as applied here ({} for none)."""
        return self._topics.configs.get(name, {})

    async def refresh(self, name: str) -> dict[str, str]:
        """A topic's overrides read from the coordination store (and applied)."""
        configs = await self._read(name)
        if configs != self._topics.configs.get(name):
            self.apply(name, configs)
        return configs
