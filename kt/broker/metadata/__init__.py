"""Cluster metadata: the coordination store (ZooKeeper or in-process) and Kafka's layout."""
