"""Cluster metadata: which topics exist, their ids, partition counts and configs.

The embedded single-node broker keeps it in one JSON document written atomically
in the first log directory (`kt-cluster-metadata.json`). Multi-broker clusters
will keep the same model in ZooKeeper; the broker only talks to `MetadataStore`.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path

from kt.storage.atomic import atomic_write

METADATA_FILE = "kt-cluster-metadata.json"
#: Kafka's internal topics: the group coordinator's and the transaction
#: coordinator's logs (the one definition of each name).
CONSUMER_OFFSETS = "__consumer_offsets"
TRANSACTION_STATE = "__transaction_state"
INTERNAL_TOPICS = frozenset({CONSUMER_OFFSETS, TRANSACTION_STATE})
MAX_TOPIC_NAME = 249
_LEGAL = re.compile(r"^[a-zA-Z0-9._-]+$")


def topic_name_problem(name: str) -> str | None:
    """Why `name` is not a legal topic name (Kafka's Topic.validate), or None."""
    if not name:
        return "topic name is empty"
    if name in (".", ".."):
        return f"topic name cannot be '{name}'"
    if len(name) > MAX_TOPIC_NAME:
        return f"topic name is longer than {MAX_TOPIC_NAME} characters"
    if not _LEGAL.match(name):
        return (
            f"topic name '{name}' is illegal: it may contain only ASCII letters, digits, "
            "'.', '_' and '-'"
        )
    return None


@dataclass(slots=True)
class TopicInfo:
    """One topic as the cluster knows it."""

    name: str
    topic_id: bytes  # 16 bytes
    partitions: int
    replication_factor: int = 1
    configs: dict[str, str] = field(default_factory=dict)
    # partition -> replica broker ids (the first is the preferred leader)
    assignment: dict[int, list[int]] = field(default_factory=dict)

    @property
    def internal(self) -> bool:
        """True for Kafka's internal topics."""
        return self.name in INTERNAL_TOPICS


class MetadataStore:
    """Topics of the cluster, persisted on every change."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.topics: dict[str, TopicInfo] = {}
        self.cluster_id: str | None = None
        # The first producer id not yet reserved by any broker (ids are handed out
        # in blocks, so a restart never reuses one).
        self.next_producer_id_block = 0

    @classmethod
    def load(cls, log_dir: Path) -> MetadataStore:
        """Read the store from `log_dir` (an absent file is an empty cluster)."""
        store = cls(log_dir / METADATA_FILE)
        if store.path.exists():
            doc = json.loads(store.path.read_text(encoding="utf-8"))
            store.cluster_id = doc.get("cluster_id")
            store.next_producer_id_block = int(doc.get("next_producer_id_block", 0))
            for t in doc.get("topics", []):
                info = TopicInfo(
                    t["name"],
                    bytes.fromhex(t["topic_id"]),
                    int(t["partitions"]),
                    int(t.get("replication_factor", 1)),
                    dict(t.get("configs", {})),
                    {int(k): list(v) for k, v in t.get("assignment", {}).items()},
                )
                store.topics[info.name] = info
        return store

    def save(self) -> None:
        """Write the whole store atomically."""
        doc = {
            "version": 1,
            "cluster_id": self.cluster_id,
            "next_producer_id_block": self.next_producer_id_block,
            "topics": [
                {
                    "name": t.name,
                    "topic_id": t.topic_id.hex(),
                    "partitions": t.partitions,
                    "replication_factor": t.replication_factor,
                    "configs": t.configs,
                    "assignment": {str(k): v for k, v in sorted(t.assignment.items())},
                }
                for t in sorted(self.topics.values(), key=lambda t: t.name)
            ],
        }
        atomic_write(self.path, (json.dumps(doc, indent=2, sort_keys=True) + "\n").encode())

    def add(self, info: TopicInfo) -> None:
        """Register a topic and persist."""
        self.topics[info.name] = info
        self.save()

    def remove(self, name: str) -> TopicInfo | None:
        """Forget a topic and persist."""
        info = self.topics.pop(name, None)
        if info is not None:
            self.save()
        return info

    def by_id(self, topic_id: bytes) -> TopicInfo | None:
        """The topic with this id, if any."""
        for t in self.topics.values():
            if t.topic_id == topic_id:
                return t
        return None
