"""ConfigManager: topic config overrides, kept current from ZooKeeper on every broker.

Kafka's ZkConfigManager: at start every topic's `/config/topics/T` is read; then
each sequential `/config/changes/config_change_N` naming an entity makes the
broker re-read that entity's config and apply it live (its logs get the new
retention, segment size, cleanup policy, ...). Notifications are processed in
sequence order and each only once; the ones older than the start are covered by
the initial read.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

from kt.broker.metadata.cluster_store import ClusterStore
from kt.broker.metadata.store import Watch

log = logging.getLogger("kt.broker.config_manager")

CONFIG_CHANGES = "/config/changes"

ApplyTopic = Callable[[str, dict[str, str]], None]
# (the <default> broker configs, this broker's own) -> None
ApplyBroker = Callable[[dict[str, str], dict[str, str]], None]
DEFAULT_BROKER = "<default>"


def _sequence(name: str) -> int:
    digits = name.rsplit("_", 1)[-1]
    return int(digits) if digits.isdigit() else -1


class ConfigManager:
    """Applies topic (and dynamic broker) config changes announced in /config/changes."""

    def __init__(
        self,
        cluster: ClusterStore,
        apply_topic: ApplyTopic,
        broker_id: int | None = None,
        apply_broker: ApplyBroker | None = None,
    ) -> None:
        self.cluster = cluster
        self.apply_topic = apply_topic
        self.broker_id = broker_id
        self.apply_broker = apply_broker
        self._last_seen = -1
        self._watch: Watch | None = None
        self._lock = asyncio.Lock()

    async def start(self) -> None:
        """Read every topic's config, then follow the notifications."""
        pending = await self.cluster.config_change_notifications()
        self._last_seen = max((_sequence(n) for n in pending), default=-1)
        for topic, configs in (await self.cluster.get_all_entity_configs("topics")).items():
            self.apply_topic(topic, configs)
        await self.apply_broker_configs()
        self._watch = self.cluster.store.watch_children(CONFIG_CHANGES, self._on_children)

    def _on_children(self, children: list[str]) -> None:
        if any(_sequence(c) > self._last_seen for c in children):
            asyncio.get_running_loop().create_task(self._process(children))

    async def _process(self, children: list[str]) -> None:
        async with self._lock:
            for name in sorted(children, key=_sequence):
                seq = _sequence(name)
                if seq <= self._last_seen:
                    continue
                self._last_seen = seq
                try:
                    change = await self.cluster.read_config_change(name)
                    if change is not None and change[0] == "brokers":
                        if change[1] in (DEFAULT_BROKER, str(self.broker_id)):
                            await self.apply_broker_configs()
                        continue
                    if change is None or change[0] != "topics":
                        continue
                    configs = await self.cluster.get_entity_config("topics", change[1])
                    self.apply_topic(change[1], configs)
                    log.info("applied new config of topic %s: %s", change[1], configs)
                except Exception:
                    log.exception("cannot apply config change %s", name)

    async def apply_broker_configs(self) -> None:
        """Kafka's BrokerConfigHandler: this broker's dynamic configs over the
        cluster-wide <default> ones."""
        if self.apply_broker is None or self.broker_id is None:
            return
        defaults = await self.cluster.get_entity_config("brokers", DEFAULT_BROKER)
        own = await self.cluster.get_entity_config("brokers", str(self.broker_id))
        self.apply_broker(defaults, own)
        if defaults or own:
            log.info("applied dynamic broker configs: %s", {**defaults, **own})

    def stop(self) -> None:
        """Stop following notifications."""
        if self._watch is not None:
            self._watch.cancel()
