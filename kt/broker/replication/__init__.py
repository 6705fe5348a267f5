"""Replication: followers fetching from their leaders (see fetcher.py)."""

from kt.broker.errors import LeaderEndpointError
from kt.broker.replication.fetcher import (
    BrokerEndpoint,
    FetcherConfig,
    LeaderEndpoint,
    ReplicaFetcher,
    ReplicaFetcherManager,
)

__all__ = [
    "BrokerEndpoint",
    "FetcherConfig",
    "LeaderEndpoint",
    "LeaderEndpointError",
    "ReplicaFetcher",
    "ReplicaFetcherManager",
]
