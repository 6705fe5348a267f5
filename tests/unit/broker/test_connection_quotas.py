"""max.connections, max.connections.per.ip and its overrides (Kafka's ConnectionQuotas)."""

from __future__ import annotations

import pytest

from kt.broker.config import ConfigError, load_config
from kt.broker.connection_quotas import ConfigValueError, ConnectionQuotas, parse_overrides


def test_per_ip_limit_with_overrides_and_release() -> None:
    q = ConnectionQuotas(max_connections=10, max_per_ip=2, per_ip_overrides={"10.0.0.9": 3})
    assert q.admit("10.0.0.1") is None and q.admit("10.0.0.1") is None
    refused = q.admit("10.0.0.1")
    assert refused is not None and "maximum of 2" in refused
    assert [q.admit("10.0.0.9") for _ in range(3)] == [None, None, None]
    assert q.admit("10.0.0.9") is not None
    q.release("10.0.0.1")
    assert q.admit("10.0.0.1") is None  # a slot freed
    assert q.total == 5


def test_broker_wide_limit() -> None:
    q = ConnectionQuotas(max_connections=2)
    assert q.admit("a") is None and q.admit("b") is None
    refused = q.admit("c")
    assert refused is not None and "broker has the configured maximum of 2" in refused
    q.release("a")
    assert q.admit("c") is None


def test_overrides_format() -> None:
    assert parse_overrides("") == {}
    assert parse_overrides("hostA:5, 10.0.0.1:0") == {"hostA": 5, "10.0.0.1": 0}
    with pytest.raises(ConfigValueError):
        parse_overrides("hostA=5")


def test_config_refuses_bad_limits() -> None:
    with pytest.raises(ConfigError, match=r"max\.connections\.per\.ip must be > 0"):
        load_config(None, {"max.connections.per.ip": "0"})
    with pytest.raises(ConfigError, match="not host:count"):
        load_config(None, {"max.connections.per.ip.overrides": "x"})
    cfg = load_config(None, {"max.connections": "5"})
    assert cfg.get_int("max.connections") == 5 and not cfg.unknown_keys
