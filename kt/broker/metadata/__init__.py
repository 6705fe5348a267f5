"""Cluster metadata: the coordination store (ZooKeeper or in-process) and Kafka's layout.

`open_store` picks the store the way the broker's config does: ZooKeeper when
`zookeeper.connect` is set, else the in-process store kept in the metadata log dir.
"""

from __future__ import annotations

from pathlib import Path

from .store import CoordinationStore


def open_store(
    zookeeper_connect: str | None,
    metadata_dir: Path,
    *,
    broker_id: int = 0,
    session_timeout_ms: int = 18000,
) -> CoordinationStore:
    """The broker's CoordinationStore (not started yet: call `start(timeout_s)`)."""
    if zookeeper_connect:
        # Imported here so single-node brokers never load kazoo.
        from .zookeeper import ZooKeeperStore

        return ZooKeeperStore(zookeeper_connect, session_timeout_ms=session_timeout_ms)
    from .in_process import InProcessStore

    return InProcessStore.in_dir(metadata_dir, broker_id)
