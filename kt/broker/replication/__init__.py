"""Replication: followers fetching from their leaders (see fetcher.py)."""

from kt.broker.replication.fetcher import (
    BrokerEndpoint,
    FetcherConfig,
    LeaderEndpoint,
    LeaderEndpointError,
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
