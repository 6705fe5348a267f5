"""Connection limits, as Kafka's ConnectionQuotas: `max.connections` for the broker and
`max.connections.per.ip` (with `max.connections.per.ip.overrides`) per client address.

Kafka closes a connection from an address already at its limit right after
accepting it (TooManyConnectionsException, logged). At the broker-wide limit Kafka's
acceptor stops accepting until a slot frees (the connection waits in the listen
backlog); kt closes the new connection at once instead, which bounds resources the
same way. Connections from the broker's own inter-broker listener are not exempted
here (kt serves every listener from one pool).
"""

from __future__ import annotations

from collections import Counter

#: Kafka's default for both limits: unlimited in practice
UNLIMITED = 2**31 - 1


class ConfigValueError(ValueError):
    """A malformed `max.connections.per.ip.overrides`."""


def parse_overrides(text: str) -> dict[str, int]:
    """`host:count,host:count` (Kafka's format) as a dict; '' is none."""
    out: dict[str, int] = {}
    for item in filter(None, (part.strip() for part in text.split(","))):
        host, sep, count = item.rpartition(":")
        if not sep or not host or not count.isdigit():
            raise ConfigValueError(f"max.connections.per.ip.overrides: {item!r} is not host:count")
        out[host] = int(count)
    return out


class ConnectionQuotas:
    """Counts open connections, in total and per address; refuses beyond the limits."""

    def __init__(
        self,
        max_connections: int = UNLIMITED,
        max_per_ip: int = UNLIMITED,
        per_ip_overrides: dict[str, int] | None = None,
    ) -> None:
        self.max_connections = max_connections
        self.max_per_ip = max_per_ip
        self.per_ip_overrides = dict(per_ip_overrides or {})
        self.total = 0
        self.by_host: Counter[str] = Counter()

    def admit(self, host: str) -> str | None:
        """Count a new connection from `host`; or, when it would exceed a limit, count
        nothing and return why (one line for the log)."""
        limit = self.per_ip_overrides.get(host, self.max_per_ip)
        if self.by_host[host] >= limit:
            return f"{host} already has the configured maximum of {limit} connections"
        if self.total >= self.max_connections:
            return f"the broker has the configured maximum of {self.max_connections} connections"
        self.total += 1
        self.by_host[host] += 1
        return None

    def release(self, host: str) -> None:
        """An admitted connection from `host` closed."""
        self.total -= 1
        self.by_host[host] -= 1
        if self.by_host[host] <= 0:
            del self.by_host[host]
