"""kt topic / cluster / configs / log-dirs against a real kt broker, end to end."""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

from kt.cli import cli

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    from broker_harness import BrokerProcess, free_port

    b = BrokerProcess(tmp_path_factory.mktemp("topic") / "data", free_port()).start()
    yield b
    b.kill()


def kt(broker: Any, *args: str, input: bytes | None = None) -> Result:
    return CliRunner().invoke(cli, [*args, "-b", broker.bootstrap], input=input)


def one_error(result: Result, code: int) -> str:
    assert result.exit_code == code, (result.stdout, result.stderr)
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("kt: error: "), result.stderr
    return lines[0]


def test_topic_lifecycle(broker: Any) -> None:
    r = kt(broker, "topic", "create", "--topic", "life", "--partitions", "3",
           "--replication-factor", "1", "--config", "retention.ms=3600000")  # fmt: skip
    assert r.exit_code == 0 and r.stdout == "Created topic life.\n"
    assert "already exists" in one_error(kt(broker, "topic", "create", "--topic", "life"), 1)
    assert kt(broker, "topic", "create", "--topic", "life", "--if-not-exists").exit_code == 0
    r = kt(broker, "topic", "create", "--topic", "assigned", "--replica-assignment", "1,1")
    assert r.exit_code == 0, r.stderr

    listed = kt(broker, "topic", "list")
    assert {"life", "assigned"} <= set(listed.stdout.split())
    assert json.loads(kt(broker, "topic", "list", "--topic", "li.*", "--json").stdout) == ["life"]

    d = kt(broker, "topic", "describe", "--topic", "life").stdout.splitlines()
    head = d[0].split("\t")
    assert head[0] == "Topic: life" and head[1].startswith("TopicId: ")
    assert len(head[1]) == len("TopicId: ") + 22  # Kafka's base64 Uuid
    assert head[2:] == [
        "PartitionCount: 3",
        "ReplicationFactor: 1",
        "Configs: retention.ms=3600000",
    ]
    assert d[1:] == [
        f"\tTopic: life\tPartition: {p}\tLeader: 1\tReplicas: 1\tIsr: 1"
        "\tElr: N/A\tLastKnownElr: N/A"
        for p in range(3)
    ]
    js = json.loads(kt(broker, "topic", "describe", "--topic", "life", "--json").stdout)
    assert js["partition_count"] == 3 and js["configs"] == {"retention.ms": "3600000"}
    # Filters: a healthy single broker has nothing under-replicated or unavailable...
    for flag in ("--under-replicated-partitions", "--unavailable-partitions",
                 "--under-min-isr-partitions"):  # fmt: skip
        assert kt(broker, "topic", "describe", "--topic", "life", flag).stdout == ""
    # ...while ISR 1 = min.insync.replicas 1 is "at min ISR", partitions only.
    at_min = kt(broker, "topic", "describe", "--topic", "life", "--at-min-isr-partitions")
    assert len(at_min.stdout.splitlines()) == 3 and at_min.stdout.startswith("\tTopic: life")
    overrides = kt(broker, "topic", "describe", "--topics-with-overrides").stdout.splitlines()
    assert [line.split("\t")[0] for line in overrides] == ["Topic: life"]

    r = kt(broker, "topic", "alter", "--topic", "life", "--partitions", "5")
    assert r.exit_code == 0, r.stderr
    assert "PartitionCount: 5" in kt(broker, "topic", "describe", "--topic", "life").stdout
    r = kt(broker, "topic", "delete", "--topic", "life")
    assert r.stdout == "Deleted topic life.\n"
    assert "life" not in kt(broker, "topic", "list").stdout.split()
    assert kt(broker, "topic", "delete", "--topic", "life", "--if-exists").exit_code == 0


def test_topic_errors(broker: Any) -> None:
    assert "does not exist" in one_error(kt(broker, "topic", "describe", "--topic", "nope"), 1)
    assert kt(broker, "topic", "describe", "--topic", "nope", "--if-exists").exit_code == 0
    one_error(kt(broker, "topic", "delete", "--topic", "nope"), 1)
    one_error(kt(broker, "topic", "alter", "--topic", "nope", "--partitions", "2"), 1)
    one_error(kt(broker, "topic", "create", "--topic", "bad/name"), 1)
    assert kt(broker, "topic", "create", "--topic", "x", "--partitions", "0").exit_code == 2
    one_error(kt(broker, "topic", "create", "--topic", "x", "--config", "novalue"), 2)
    one_error(kt(broker, "topic", "create", "--topic", "x", "--replica-assignment", "1:a"), 2)
    assert kt(broker, "topic", "bogus").exit_code == 2
    assert "Examples" in CliRunner().invoke(cli, ["topic", "--help"]).stdout


def test_topic_as_an_argument(broker: Any) -> None:
    """`kt topic create orders` as rpk and `kt produce TOPIC` take it; --topic (as
    kafka-topics.sh spells it) still works, both agreeing is fine, both differing or
    neither is a usage error (exit 2) before anything is sent."""
    r = kt(broker, "topic", "create", "orders", "--partitions", "2")
    assert r.exit_code == 0 and r.stdout == "Created topic orders.\n", r.stderr
    r = kt(broker, "topic", "create", "orders", "--topic", "orders", "--if-not-exists")
    assert r.exit_code == 0, r.stderr
    d = kt(broker, "topic", "describe", "orders")
    assert d.exit_code == 0 and d.stdout.splitlines()[0].startswith("Topic: orders\t")
    assert len(d.stdout.splitlines()) == 3
    r = kt(broker, "topic", "alter", "orders", "--partitions", "3")
    assert r.stdout == "Altered topic orders: 3 partitions.\n", r.stderr
    assert "PartitionCount: 3" in kt(broker, "topic", "describe", "orders").stdout

    for args in (
        ("create", "orders", "--topic", "other"),
        ("describe", "orders", "--topic", "other"),
        ("alter", "orders", "--topic", "other", "--partitions", "4"),
        ("delete", "orders", "--topic", "other"),
    ):
        line = one_error(kt(broker, "topic", *args), 2)
        assert line == (
            "kt: error: the topic is given twice and differs: 'orders' and --topic 'other'"
        )
    for args in (("create",), ("alter", "--partitions", "4"), ("delete",)):
        line = one_error(kt(broker, "topic", *args), 2)
        assert f"(kt topic {args[0]} TOPIC) or with --topic" in line
    assert "PartitionCount: 3" in kt(broker, "topic", "describe", "orders").stdout

    r = kt(broker, "topic", "delete", "orders")
    assert r.stdout == "Deleted topic orders.\n", r.stderr
    assert "does not exist" in one_error(kt(broker, "topic", "describe", "orders"), 1)


def test_unreachable_broker_is_one_line_after_a_bounded_time(tmp_path: Path) -> None:
    from broker_harness import KT, free_port

    start = time.monotonic()
    r = subprocess.run([KT, "topic", "list", "-b", f"127.0.0.1:{free_port()}", "--timeout", "2"],
                       capture_output=True, text=True, timeout=30)  # fmt: skip
    assert time.monotonic() - start < 10
    assert r.returncode == 1 and r.stdout == ""
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and "cannot connect to any bootstrap server" in lines[0]
    r = subprocess.run([KT, "cluster", "describe", "-b", "host:notaport"],
                       capture_output=True, text=True, timeout=30)  # fmt: skip
    assert r.returncode == 2 and r.stderr.startswith("kt: error: --bootstrap-server")


def test_env_var_sets_the_bootstrap_server(broker: Any) -> None:
    r = CliRunner().invoke(cli, ["cluster", "describe", "--json"],
                           env={"KT_BOOTSTRAP_SERVER": broker.bootstrap})  # fmt: skip
    assert r.exit_code == 0, r.stderr
    d = json.loads(r.stdout)
    assert d["controller"] == 1 and d["brokers"][0]["port"] == broker.port and d["cluster_id"]


def test_cluster_describe(broker: Any) -> None:
    lines = kt(broker, "cluster", "describe").stdout.splitlines()
    assert lines[0].startswith("Cluster ID: ") and lines[1] == "Controller: 1"
    assert lines[2].split() == ["ID", "HOST", "PORT", "RACK", "LEADERS", "REPLICAS", "URP",
                                "OFFLINE", "PREFERRED", "IMBALANCE"]  # fmt: skip
    row = lines[3].split()
    assert row[:4] == ["1", "127.0.0.1", str(broker.port), "-"] and row[6:8] == ["0", "0"]
    assert int(row[4]) == int(row[5])  # a single broker leads every partition it hosts
    assert int(row[8]) == int(row[4]) and row[9] == "0.0%"  # ... and is preferred for each
    js = json.loads(kt(broker, "cluster", "describe", "--json").stdout)
    assert js["brokers"][0]["controller"] and js["brokers"][0]["live"]


def test_configs_describe_and_alter(broker: Any) -> None:
    assert kt(broker, "topic", "create", "--topic", "cfg", "--partitions", "1").exit_code == 0
    base = ["--entity-type", "topics", "--entity-name", "cfg"]
    assert kt(broker, "configs", "describe", *base).stdout == "Dynamic configs for topic cfg are:\n"
    r = kt(broker, "configs", "alter", *base,
           "--add-config", "retention.ms=1000,cleanup.policy=[compact,delete]")  # fmt: skip
    assert r.exit_code == 0 and r.stdout == "Completed updating config for topic cfg.\n"
    lines = kt(broker, "configs", "describe", *base).stdout.splitlines()
    assert lines[0] == "Dynamic configs for topic cfg are:"
    assert lines[1].startswith("  cleanup.policy=compact,delete sensitive=false synonyms={")
    assert lines[2].startswith(
        "  retention.ms=1000 sensitive=false synonyms={DYNAMIC_TOPIC_CONFIG:"
    )
    assert kt(broker, "configs", "alter", *base, "--delete-config", "retention.ms").exit_code == 0
    js = json.loads(kt(broker, "configs", "describe", *base, "--json").stdout)
    assert [c["name"] for c in js["configs"]] == ["cleanup.policy"]
    all_cfg = kt(broker, "configs", "describe", *base, "--all").stdout
    assert all_cfg.startswith("All configs for topic cfg are:") and "segment.bytes=" in all_cfg
    brokers = kt(broker, "configs", "describe", "--entity-type", "brokers", "--entity-name", "1",
                 "--all")  # fmt: skip
    assert brokers.exit_code == 0 and "All configs for broker 1 are:" in brokers.stdout
    # errors
    one_error(
        kt(broker, "configs", "describe", "--entity-type", "topics", "--entity-name", "no"), 1
    )
    one_error(kt(broker, "configs", "alter", *base, "--add-config", "retention.ms=abc"), 1)
    one_error(kt(broker, "configs", "alter", *base, "--add-config", "novalue"), 2)
    one_error(kt(broker, "configs", "alter", *base), 2)
    # users are SCRAM credentials (tests/integration/test_brokersec_user_cmd.py); client
    # quotas are not kt's yet: a usage error, not an empty answer.
    assert kt(broker, "configs", "describe", "--entity-type", "clients").exit_code == 2
    users = kt(broker, "configs", "describe", "--entity-type", "users")
    assert users.exit_code == 0, users.stderr


def test_log_dirs_describe(broker: Any) -> None:
    assert kt(broker, "topic", "create", "--topic", "dirs", "--partitions", "2").exit_code == 0
    assert kt(broker, "produce", "dirs", "-p", "1", input=b"x\ny\n").exit_code == 0
    js = json.loads(kt(broker, "log-dirs", "describe", "--topic-list", "dirs", "--json").stdout)
    assert js["version"] == 1 and js["brokers"][0]["broker"] == 1
    d = js["brokers"][0]["logDirs"][0]
    assert d["error"] is None and d["logDir"] == str(broker.data_dir)
    sizes = {p["partition"]: p["size"] for p in d["partitions"]}
    assert sizes["dirs-0"] == 0 and sizes["dirs-1"] > 0
    table = kt(broker, "log-dirs", "describe", "--broker-list", "1").stdout.splitlines()
    assert table[0].split()[:4] == ["BROKER", "LOG-DIR", "TOPIC", "PARTITION"]
    assert any(row.split()[2:4] == ["dirs", "1"] for row in table[1:])
    one_error(kt(broker, "log-dirs", "describe", "--broker-list", "x"), 2)
