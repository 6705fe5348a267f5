"""The broker: network, request handlers, partition state, group coordinator, log manager."""
