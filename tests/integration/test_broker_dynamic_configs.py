"""Dynamic broker configs on the single-node broker, with real clients.

Per-broker (`"1"`) and cluster-default (`""`) configs through confluent-kafka's and
kafka-python's admin clients (incremental and legacy), the answers Kafka 3.x's
ZooKeeper-mode brokers give to refused changes, DescribeConfigs sources and
synonyms, the values applied live (retention, segment size, message.max.bytes),
persistence across a restart, and `kt configs` for brokers.
"""

from __future__ import annotations

import json
import socket
import time
from collections.abc import Callable
from typing import Any

import pytest
from click.testing import CliRunner, Result
from confluent_kafka import KafkaError, KafkaException, Producer
from confluent_kafka import TopicPartition as CTP
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
    NewTopic,
)

from kt.cli import cli
from kt.protocol import ClientConnection, apis

pytestmark = [pytest.mark.integration, pytest.mark.timeout(90)]

SET, DELETE, APPEND = AlterConfigOpType.SET, AlterConfigOpType.DELETE, AlterConfigOpType.APPEND


def op(key: str, value: str | None, kind: AlterConfigOpType = SET) -> ConfigEntry:
    return ConfigEntry(key, value, incremental_operation=kind)


def call(broker: Any, api: Any, version: int, **body: Any) -> Any:
    """One request with kt's codec on a fresh connection; the decoded response body."""
    conn = ClientConnection("kt-test")
    _, data = conn.send_request(api.key, version, api.request(**body))
    with socket.create_connection(("127.0.0.1", broker.port), timeout=10) as s:
        s.sendall(data)
        while True:
            chunk = s.recv(65536)
            assert chunk, "broker closed the connection"
            got = conn.receive_data(chunk)
            if got:
                return got[0].body


def wait_until(check: Callable[[], Any], timeout: float = 15.0) -> Any:
    """Poll until `check()` is truthy (dynamic configs apply asynchronously, as in Kafka)."""
    deadline = time.monotonic() + timeout
    while True:
        got = check()
        if got or time.monotonic() > deadline:
            return got
        time.sleep(0.1)


def incremental(a: AdminClient, name: str, *ops: ConfigEntry, validate: bool = False) -> Any:
    res = ConfigResource("broker", name, incremental_configs=list(ops))
    try:
        a.incremental_alter_configs([res], validate_only=validate)[res].result(timeout=10)
    except KafkaException as exc:
        return exc.args[0]
    return None


def raw_describe(broker: Any, name: str, keys: list[str] | None = None) -> Any:
    """DescribeConfigs v4 with synonyms (confluent-kafka keys synonyms by name)."""
    body = call(broker, apis.DESCRIBE_CONFIGS, 4, include_synonyms=True,
                include_documentation=False,
                resources=[{"resource_type": 4, "resource_name": name,
                            "configuration_keys": keys}])  # fmt: skip
    return body.results[0]


def entries(result: Any) -> dict[str, Any]:
    return {c.name: c for c in result.configs}


def raw_incremental(broker: Any, name: str, *ops: tuple[str, int, str | None],
                    validate_only: bool = False) -> tuple[int, str | None]:  # fmt: skip
    body = call(broker, apis.INCREMENTAL_ALTER_CONFIGS, 1, validate_only=validate_only,
                resources=[{"resource_type": 4, "resource_name": name,
                            "configs": [{"name": k, "config_operation": op, "value": v}
                                        for k, op, v in ops]}])  # fmt: skip
    r = body.responses[0]
    return r.error_code, r.error_message


def raw_legacy(broker: Any, name: str, configs: dict[str, str | None]) -> tuple[int, str | None]:
    body = call(broker, apis.ALTER_CONFIGS, 2, validate_only=False,
                resources=[{"resource_type": 4, "resource_name": name,
                            "configs": [{"name": k, "value": v}
                                        for k, v in configs.items()]}])  # fmt: skip
    r = body.responses[0]
    return r.error_code, r.error_message


def source_of(broker: Any, name: str, key: str) -> int | None:
    e = entries(raw_describe(broker, name, [key])).get(key)
    return None if e is None else e.config_source


def test_per_broker_config_sources_synonyms_and_refusals(broker_factory: Any) -> None:
    b = broker_factory(**{"log.retention.hours": "24"})
    a = AdminClient({"bootstrap.servers": b.bootstrap})
    assert incremental(a, "1", op("log.retention.ms", "600000")) is None
    assert wait_until(lambda: source_of(b, "1", "log.retention.ms") == 2)

    got = entries(raw_describe(b, "1"))
    ret = got["log.retention.ms"]
    assert (ret.value, ret.read_only, ret.is_sensitive) == ("600000", False, False)
    # Kafka's order: the dynamic value, then the static synonym it hides
    assert [(s.name, s.value, s.source) for s in ret.synonyms][:2] == [
        ("log.retention.ms", "600000", 2), ("log.retention.hours", "24", 4)]  # fmt: skip
    hours = got["log.retention.hours"]
    assert (hours.value, hours.config_source, hours.read_only) == ("24", 4, True)
    assert got["num.partitions"].config_source == 5 and got["num.partitions"].read_only
    # a topic without its own retention.ms inherits the dynamic value
    fs = a.create_topics([NewTopic("inherit", 1, 1)])
    fs["inherit"].result(timeout=10)
    res = ConfigResource("topic", "inherit")
    t = a.describe_configs([res])[res].result(timeout=10)
    assert t["retention.ms"].value == "600000"
    assert t["retention.ms"].source == ConfigSource.DYNAMIC_BROKER_CONFIG.value

    # refused changes, worded as Kafka 3.8's ZooKeeper-mode broker words them
    err = incremental(a, "1", op("log.retention.hours", "3"))
    assert err.code() == KafkaError.INVALID_REQUEST
    assert err.str() == "Cannot update these configs dynamically: Set(log.retention.hours)"
    err = incremental(a, "1", op("num.io.threads", "3"))
    assert err.code() == KafkaError.INVALID_REQUEST
    assert err.str().startswith("Cannot update these configs dynamically: Set(num.io.threads)")
    err = incremental(a, "1", op("log.segment.bytes", "1"))
    assert err.code() == KafkaError.INVALID_REQUEST
    assert (
        err.str()
        == "Invalid value 1 for configuration log.segment.bytes: Value must be at least 14"
    )
    err = incremental(a, "1", op("message.max.bytes", "x"))
    assert (
        err.str() == "Invalid value x for configuration message.max.bytes: Not a number of type INT"
    )
    err = incremental(a, "1", op("log.segment.bytes", "2", APPEND))
    assert err.code() == KafkaError.INVALID_CONFIG
    assert err.str() == "Config value append is not allowed for config key: log.segment.bytes"
    # validate_only changes nothing
    append = op("log.cleanup.policy", "compact", APPEND)
    assert incremental(a, "1", append, validate=True) is None
    assert incremental(a, "1", op("log.retention.bytes", "5"),
                       validate=True) is None  # fmt: skip
    time.sleep(0.5)
    assert source_of(b, "1", "log.retention.bytes") == 5

    # protocol-level answers: another broker's id, a non-integer id, null values
    assert raw_incremental(b, "2", ("log.retention.ms", 0, "1")) == (
        42, "Unexpected broker id, expected 1, but received 2")  # fmt: skip
    assert raw_incremental(b, "x", ("log.retention.ms", 0, "1")) == (
        42, "Node id must be an integer, but it is: x")  # fmt: skip
    assert raw_incremental(b, "1", ("log.retention.ms", 0, None)) == (
        42, "Null value not supported for : log.retention.ms")  # fmt: skip
    assert raw_incremental(b, "", ("listeners", 0, "PLAINTEXT://:1")) == (
        42, "Cannot update these configs at default cluster level, broker id must be "
        "specified: Set(listeners)")  # fmt: skip
    body = call(b, apis.DESCRIBE_CONFIGS, 4, include_synonyms=False, include_documentation=False,
                resources=[{"resource_type": 4, "resource_name": "7",
                            "configuration_keys": None}])  # fmt: skip
    assert body.results[0].error_code == 42
    assert body.results[0].error_message == (
        "Unexpected broker id, expected 1 or empty string, but received 7"
    )

    # DELETE: back to the static setting
    assert incremental(a, "1", op("log.retention.ms", None, DELETE)) is None
    assert wait_until(lambda: source_of(b, "1", "log.retention.ms") is None or
                      source_of(b, "1", "log.retention.ms") == 5)  # fmt: skip
    t = a.describe_configs([res])[res].result(timeout=10)
    assert t["retention.ms"].value == str(24 * 3_600_000)
    assert t["retention.ms"].source == ConfigSource.STATIC_BROKER_CONFIG.value


def test_cluster_default_with_kafka_python_and_custom_keys(kt_broker: Any) -> None:
    from kafka.admin import ConfigResource as KRes
    from kafka.admin import ConfigResourceType, KafkaAdminClient

    b = kt_broker
    k = KafkaAdminClient(bootstrap_servers=b.bootstrap, request_timeout_ms=10000)
    try:
        # legacy AlterConfigs on the "" resource, the cluster-wide default (neither
        # kafka-python nor librdkafka lets a broker resource have an empty name)
        assert raw_legacy(b, "", {"log.retention.bytes": "1000000", "my.custom": "x"}) == (0, None)
        assert wait_until(lambda: source_of(b, "", "log.retention.bytes") == 3)
        default = entries(raw_describe(b, ""))
        assert set(default) == {"log.retention.bytes", "my.custom"}
        rb = default["log.retention.bytes"]
        assert (rb.value, rb.config_source, rb.read_only) == ("1000000", 3, False)
        assert [(s.name, s.value, s.source) for s in rb.synonyms] == [
            ("log.retention.bytes", "1000000", 3)]  # fmt: skip
        # a custom key: kept, unused, and (of no known type) sensitive, as Kafka shows it
        custom = default["my.custom"]
        assert (custom.value, custom.is_sensitive, custom.read_only) == (None, True, True)
        one = entries(raw_describe(b, "1"))
        assert one["log.retention.bytes"].config_source == 3
        assert one["log.retention.bytes"].value == "1000000"
        # the per-broker value wins over the default
        k.alter_configs([KRes(ConfigResourceType.BROKER, "1",
                              configs={"log.retention.bytes": "2000000"})])  # fmt: skip
        assert wait_until(lambda: source_of(b, "1", "log.retention.bytes") == 2)
        syn = entries(raw_describe(b, "1"))["log.retention.bytes"].synonyms
        assert [(s.value, s.source) for s in syn] == [("2000000", 2), ("1000000", 3), ("-1", 5)]
        out = k.describe_configs([KRes(ConfigResourceType.BROKER, "1")])
        assert "log.retention.bytes" in repr(out) and "2000000" in repr(out)
        # legacy AlterConfigs replaces the whole set: the default loses both keys
        assert raw_legacy(b, "", {}) == (0, None)
        assert wait_until(lambda: not entries(raw_describe(b, "")))
    finally:
        k.close()


def test_dynamic_log_defaults_apply_live_and_survive_a_restart(broker_factory: Any) -> None:
    b = broker_factory(**{"log.initial.task.delay.ms": "100",
                          "log.retention.check.interval.ms": "300"})  # fmt: skip
    a = AdminClient({"bootstrap.servers": b.bootstrap})
    a.create_topics([NewTopic("live", 1, 1)])["live"].result(timeout=10)
    # smaller segments and a lower message.max.bytes for every topic without its own
    err = incremental(a, "1", op("log.segment.bytes", "2048"),
                      op("message.max.bytes", "3000"))  # fmt: skip
    assert err is None
    assert wait_until(lambda: source_of(b, "1", "message.max.bytes") == 2)

    p = Producer({"bootstrap.servers": b.bootstrap, "linger.ms": 0, "batch.size": 1000})
    errors: list[Any] = []
    big = p.produce("live", b"x" * 5000, on_delivery=lambda e, m: errors.append(e))
    assert big is None
    p.flush(10)
    assert errors and errors[0].code() == KafkaError.MSG_SIZE_TOO_LARGE
    errors.clear()
    for i in range(40):
        p.produce("live", b"%03d" % i + b"y" * 500, on_delivery=lambda e, m: errors.append(e))
        p.flush(10)
    assert errors == [None] * 40
    segments = sorted((b.data_dir / "live-0").glob("*.log"))
    assert len(segments) > 3  # rolled at ~2 KiB

    # lowering the retention default makes the topic lose its old segments
    assert raw_incremental(b, "", ("log.retention.ms", 0, "1")) == (0, None)
    c = _consumer(b)
    try:
        low = wait_until(lambda: c.get_watermark_offsets(CTP("live", 0), timeout=5)[0] > 0, 20)
        assert low, "retention did not remove segments"
    finally:
        c.close()

    # a restart reads them from the store before the logs open
    b.restart()
    assert source_of(b, "1", "message.max.bytes") == 2
    assert source_of(b, "", "log.retention.ms") == 3
    t = entries(raw_describe(b, "1"))
    assert t["log.segment.bytes"].value == "2048"


def _consumer(b: Any) -> Any:
    from confluent_kafka import Consumer

    return Consumer({"bootstrap.servers": b.bootstrap, "group.id": "dyn-live"})


# --- kt configs ------------------------------------------------------------------------


def kt(b: Any, *args: str) -> Result:
    return CliRunner().invoke(cli, [*args, "-b", b.bootstrap])


def test_kt_configs_for_brokers(kt_broker: Any) -> None:
    b = kt_broker
    r = kt(b, "configs", "alter", "--entity-type", "brokers", "--entity-default",
           "--add-config",
           "log.retention.ms=3600000,follower.replication.throttled.rate=1024")  # fmt: skip
    assert r.exit_code == 0, r.stderr
    assert r.stdout == "Completed updating default config for brokers in the cluster.\n"
    r = kt(b, "configs", "alter", "--entity-type", "brokers", "--entity-name", "1",
           "--add-config", "log.retention.ms=7200000")  # fmt: skip
    assert r.stdout == "Completed updating config for broker 1.\n"
    assert wait_until(lambda: source_of(b, "1", "log.retention.ms") == 2)
    assert wait_until(lambda: source_of(b, "", "follower.replication.throttled.rate") == 3)

    r = kt(b, "configs", "describe", "--entity-type", "brokers", "--entity-default")
    assert r.exit_code == 0
    assert r.stdout.splitlines() == [
        "Default configs for brokers in the cluster are:",
        "  follower.replication.throttled.rate=1024 sensitive=false "
        "synonyms={DYNAMIC_DEFAULT_BROKER_CONFIG:follower.replication.throttled.rate=1024}",
        "  log.retention.ms=3600000 sensitive=false "
        "synonyms={DYNAMIC_DEFAULT_BROKER_CONFIG:log.retention.ms=3600000}",
    ]
    r = kt(b, "configs", "describe", "--entity-type", "brokers", "--entity-name", "1")
    assert r.stdout.splitlines() == [
        "Dynamic configs for broker 1 are:",
        "  log.retention.ms=7200000 sensitive=false "
        "synonyms={DYNAMIC_BROKER_CONFIG:log.retention.ms=7200000, "
        "DYNAMIC_DEFAULT_BROKER_CONFIG:log.retention.ms=3600000, "
        "DEFAULT_CONFIG:log.retention.hours=168}",
    ]
    # no entity: every broker, then the default
    r = kt(b, "configs", "describe", "--entity-type", "brokers")
    heads = [line for line in r.stdout.splitlines() if not line.startswith("  ")]
    assert heads == ["Dynamic configs for broker 1 are:",
                     "Default configs for brokers in the cluster are:"]  # fmt: skip
    r = kt(b, "configs", "describe", "--entity-type", "brokers", "--entity-name", "1", "--all")
    assert r.stdout.startswith("All configs for broker 1 are:\n")
    assert (
        "  num.partitions=1 sensitive=false synonyms={DEFAULT_CONFIG:num.partitions=1}" in r.stdout
    )
    r = kt(b, "configs", "describe", "--entity-type", "brokers", "--entity-default", "--json")
    doc = json.loads(r.stdout)
    assert doc["entity_name"] is None
    assert {c["name"]: (c["value"], c["source"]) for c in doc["configs"]} == {
        "follower.replication.throttled.rate": ("1024", "DYNAMIC_DEFAULT_BROKER_CONFIG"),
        "log.retention.ms": ("3600000", "DYNAMIC_DEFAULT_BROKER_CONFIG"),
    }

    # errors: a refused key (1), deleting a config the entity lacks (1), usage (2)
    r = kt(b, "configs", "alter", "--entity-type", "brokers", "--entity-name", "1",
           "--add-config", "num.partitions=3")  # fmt: skip
    lines = r.stderr.strip().splitlines()
    assert r.exit_code == 1 and len(lines) == 1
    assert "Cannot update these configs dynamically: Set(num.partitions)" in lines[0]
    r = kt(b, "configs", "alter", "--entity-type", "brokers", "--entity-name", "1",
           "--delete-config", "message.max.bytes")  # fmt: skip
    assert r.exit_code == 1 and "Invalid config(s): message.max.bytes" in r.stderr
    r = kt(b, "configs", "alter", "--entity-type", "brokers", "--entity-name", "one",
           "--add-config", "log.retention.ms=1")  # fmt: skip
    assert r.exit_code == 2 and len(r.stderr.strip().splitlines()) == 1
    assert "must be a valid integer broker id, found: one" in r.stderr

    # clean up: delete both
    r = kt(b, "configs", "alter", "--entity-type", "brokers", "--entity-default",
           "--delete-config", "log.retention.ms,follower.replication.throttled.rate")  # fmt: skip
    assert r.exit_code == 0, r.stderr
    assert wait_until(lambda: not entries(raw_describe(b, "")))
