"""Kafka's bin/ command lines, run unchanged through `kt compat install`'s scripts
(real subprocesses) against one real kt broker; output compared with Kafka's formats
(the golden lines follow Kafka 3.x's TopicCommand, ConfigCommand, DeleteRecordsCommand,
GetOffsetShell, ClusterTool, LogDirsCommand and DefaultMessageFormatter)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.integration

DEADLINE = 120  # seconds per tool run: generous on a loaded machine


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    from broker_harness import BrokerProcess, free_port

    b = BrokerProcess(tmp_path_factory.mktemp("compat") / "data", free_port()).start()
    yield b
    b.kill()


@pytest.fixture(scope="module")
def bin_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("kafka-home")
    done = subprocess.run(
        [sys.executable, "-m", "kt", "compat", "install", str(root)],
        capture_output=True,
        text=True,
        timeout=DEADLINE,
    )
    assert done.returncode == 0, done.stderr
    return root / "bin"


def tool(
    bin_dir: Path, name: str, *args: str, input: str | None = None
) -> subprocess.CompletedProcess[str]:
    """Run bin/NAME.sh ARGS as a runbook would."""
    return subprocess.run(
        [str(bin_dir / f"{name}.sh"), *args],
        capture_output=True,
        text=True,
        input=input,
        timeout=DEADLINE,
        env={**os.environ},
    )


def test_install_writes_both_names(bin_dir: Path) -> None:
    for name in ("kafka-topics", "kafka-configs", "kafka-consumer-groups", "kafka-dump-log"):
        for file_name in (f"{name}.sh", name):
            path = bin_dir / file_name
            assert path.is_file() and os.access(path, os.X_OK), path


def test_kafka_topics_lifecycle(broker: Any, bin_dir: Path) -> None:
    b = ["--bootstrap-server", broker.bootstrap]
    made = tool(bin_dir, "kafka-topics", *b, "--create", "--topic", "orders",
                "--partitions", "3", "--replication-factor", "1",
                "--config", "cleanup.policy=compact")  # fmt: skip
    assert (made.returncode, made.stdout) == (0, "Created topic orders.\n"), made.stderr
    again = tool(bin_dir, "kafka-topics", *b, "--create", "--topic", "orders", "--partitions", "1")
    assert again.returncode == 1
    assert again.stdout == "Error while executing topic command : Topic 'orders' already exists.\n"
    quiet = tool(bin_dir, "kafka-topics", *b, "--create", "--if-not-exists", "--topic", "orders")
    assert (quiet.returncode, quiet.stdout) == (0, "")

    listed = tool(bin_dir, "kafka-topics", *b, "--list")
    assert listed.returncode == 0 and "orders" in listed.stdout.splitlines()

    desc = tool(bin_dir, "kafka-topics", *b, "--describe", "--topic", "orders")
    assert desc.returncode == 0, desc.stderr
    lines = desc.stdout.splitlines()
    assert re.fullmatch(
        r"Topic: orders\tTopicId: [A-Za-z0-9_-]{22}\tPartitionCount: 3\tReplicationFactor: 1"
        r"\tConfigs: cleanup.policy=compact",
        lines[0],
    ), lines[0]
    assert lines[1:] == [
        f"\tTopic: orders\tPartition: {p}\tLeader: 1\tReplicas: 1\tIsr: 1\tElr: N/A"
        "\tLastKnownElr: N/A"
        for p in range(3)
    ]
    # Kafka's --alter prints nothing on success.
    alter = tool(bin_dir, "kafka-topics", *b, "--alter", "--topic", "orders", "--partitions", "4")
    assert (alter.returncode, alter.stdout) == (0, ""), alter.stderr
    over = tool(bin_dir, "kafka-topics", *b, "--describe", "--topics-with-overrides")
    assert over.stdout.count("\n") == 1 and "PartitionCount: 4" in over.stdout
    under = tool(bin_dir, "kafka-topics", *b, "--describe", "--under-replicated-partitions")
    assert (under.returncode, under.stdout) == (0, "")
    # Kafka 3.x refuses --alter --config with --bootstrap-server.
    refused = tool(bin_dir, "kafka-topics", *b, "--alter", "--topic", "orders", "--config", "a=b")
    assert refused.returncode == 1 and "kafka-configs" in refused.stderr

    gone = tool(bin_dir, "kafka-topics", *b, "--delete", "--topic", "orders")
    assert (gone.returncode, gone.stdout) == (0, ""), gone.stderr
    missing = tool(bin_dir, "kafka-topics", *b, "--delete", "--topic", "orders")
    assert missing.returncode == 1
    assert missing.stdout == (
        "Error while executing topic command : Topic 'orders' does not exist as expected\n"
    )
    ok = tool(bin_dir, "kafka-topics", *b, "--delete", "--topic", "orders", "--if-exists")
    assert ok.returncode == 0


def test_zookeeper_and_unknown_options_are_refused(bin_dir: Path) -> None:
    zk = tool(bin_dir, "kafka-topics", "--zookeeper", "localhost:2181", "--list")
    assert zk.returncode == 1
    assert "zookeeper is not a recognized option" in zk.stderr
    not_ours = tool(bin_dir, "kafka-topics", "--bootstrap-server", "x:1", "--list",
                    "--topic-id", "abc")  # fmt: skip
    assert not_ours.returncode == 1
    assert not_ours.stderr.strip().splitlines() == [
        "kt: error: kafka-topics: option --topic-id is not supported by kt: kt selects "
        "topics by name (see 'kt compat list kafka-topics')"
    ]
    no_action = tool(bin_dir, "kafka-topics", "--bootstrap-server", "x:1")
    assert no_action.returncode == 1 and "exactly one action" in no_action.stderr
    quotas = tool(bin_dir, "kafka-configs", "--bootstrap-server", "x:1", "--describe",
                  "--entity-type", "clients")  # fmt: skip
    assert quotas.returncode == 1 and "clients" in quotas.stderr


def test_kafka_configs(broker: Any, bin_dir: Path) -> None:
    b = ["--bootstrap-server", broker.bootstrap]
    assert tool(bin_dir, "kafka-topics", *b, "--create", "--topic", "cfg").returncode == 0
    # --bootstrap-server abbreviated, as joptsimple allows
    alter = tool(bin_dir, "kafka-configs", "--bootstrap-serv", broker.bootstrap, "--alter",
                 "--entity-type", "topics", "--entity-name", "cfg",
                 "--add-config", "retention.ms=1000,max.message.bytes=2000")  # fmt: skip
    assert (alter.returncode, alter.stdout) == (0, "Completed updating config for topic cfg.\n")
    desc = tool(bin_dir, "kafka-configs", *b, "--describe", "--topic", "cfg")
    assert desc.returncode == 0
    lines = desc.stdout.splitlines()
    assert lines[0] == "Dynamic configs for topic cfg are:"
    assert any(ln.startswith("  retention.ms=1000 sensitive=false synonyms={") for ln in lines)
    delete = tool(bin_dir, "kafka-configs", *b, "--alter", "--entity-type", "topics",
                  "--entity-name", "cfg", "--delete-config", "retention.ms")  # fmt: skip
    assert delete.returncode == 0
    after = tool(bin_dir, "kafka-configs", *b, "--describe", "--entity-type", "topics",
                 "--entity-name", "cfg").stdout  # fmt: skip
    assert "retention.ms" not in after and "max.message.bytes=2000" in after
    # --add-config-file: each value as the file has it (a comma is part of the value)
    props = bin_dir.parent / "cfg.properties"
    props.write_text("cleanup.policy=compact,delete\nretention.ms=5000\n")
    from_file = tool(bin_dir, "kafka-configs", *b, "--alter", "--topic", "cfg",
                     "--add-config-file", str(props))  # fmt: skip
    assert from_file.returncode == 0, from_file.stderr
    after = tool(bin_dir, "kafka-configs", *b, "--describe", "--topic", "cfg").stdout
    assert "  cleanup.policy=compact,delete sensitive=false" in after
    assert "  retention.ms=5000 sensitive=false" in after
    # --describe with an alteration: ConfigCommand's refusal, one line, exit 1
    mixed = tool(bin_dir, "kafka-configs", *b, "--describe", "--topic", "cfg",
                 "--add-config", "retention.ms=1")  # fmt: skip
    assert (mixed.returncode, mixed.stdout) == (1, "")
    assert mixed.stderr == (
        'kt: error: kafka-configs: Option "[describe]" can\'t be used with option "[add-config]"\n'
    )
    brokers = tool(bin_dir, "kafka-configs", *b, "--alter", "--entity-type", "brokers",
                   "--entity-default", "--add-config", "log.retention.ms=3600000")  # fmt: skip
    assert brokers.returncode == 0, brokers.stderr
    assert brokers.stdout == "Completed updating default config for brokers in the cluster.\n"
    # users: SCRAM credentials, kafka-configs.sh's form
    scram = tool(bin_dir, "kafka-configs", *b, "--alter", "--entity-type", "users",
                 "--entity-name", "alice", "--add-config",
                 "SCRAM-SHA-256=[iterations=8192,password=alice-secret]")  # fmt: skip
    assert (scram.returncode, scram.stdout) == (0, "Completed updating config for user alice.\n")
    users = tool(bin_dir, "kafka-configs", *b, "--describe", "--user", "alice")
    assert users.stdout == ("SCRAM credential configs for user-principal 'alice' are "
                            "SCRAM-SHA-256=iterations=8192\n")  # fmt: skip
    gone = tool(bin_dir, "kafka-configs", *b, "--alter", "--entity-type", "users",
                "--entity-name", "alice", "--delete-config", "SCRAM-SHA-256")  # fmt: skip
    assert gone.returncode == 0, gone.stderr


def test_console_producer_consumer_and_groups(broker: Any, bin_dir: Path) -> None:
    b = ["--bootstrap-server", broker.bootstrap]
    assert tool(bin_dir, "kafka-topics", *b, "--create", "--topic", "lines",
                "--partitions", "1").returncode == 0  # fmt: skip
    sent = tool(bin_dir, "kafka-console-producer", *b, "--topic", "lines",
                "--property", "parse.key=true", "--property", "key.separator=:",
                input="k1:v1\nk2:v2\nk3:v3\n")  # fmt: skip
    assert (sent.returncode, sent.stdout) == (0, ""), sent.stderr
    got = tool(bin_dir, "kafka-console-consumer", *b, "--topic", "lines", "--from-beginning",
               "--max-messages", "3", "--property", "print.key=true",
               "--property", "print.offset=true", "--group", "billing")  # fmt: skip
    assert got.returncode == 0, got.stderr
    assert got.stdout == "Offset:0\tk1\tv1\nOffset:1\tk2\tv2\nOffset:2\tk3\tv3\n"

    listed = tool(bin_dir, "kafka-consumer-groups", *b, "--list")
    assert "billing" in listed.stdout.splitlines()
    desc = tool(bin_dir, "kafka-consumer-groups", *b, "--describe", "--group", "billing")
    assert desc.returncode == 0, desc.stderr
    # ConsumerGroupCommand's table: a blank line, columns padded to Kafka's widths.
    lines = desc.stdout.split("\n")
    assert lines[0] == "" and lines[-1] == ""
    assert lines[1] == (
        "GROUP           TOPIC           PARTITION  CURRENT-OFFSET  LOG-END-OFFSET  LAG"
        "             CONSUMER-ID     HOST            CLIENT-ID"
    )
    assert lines[2] == (
        "billing         lines           0          3               3               0"
        "               -               -               -"
    )
    reset = tool(bin_dir, "kafka-consumer-groups", *b, "--reset-offsets", "--group", "billing",
                 "--topic", "lines", "--to-earliest", "--execute")  # fmt: skip
    assert reset.returncode == 0, reset.stderr
    # printOffsetsToReset: %-30s %-30s %-10s %-15s, padding and leading newline kept
    assert reset.stdout == (
        "\nGROUP" + " " * 26 + "TOPIC" + " " * 26 + "PARTITION  NEW-OFFSET     "
        "\nbilling" + " " * 24 + "lines" + " " * 26 + "0" + " " * 10 + "0" + " " * 14 + "\n"
    )
    # neither --dry-run nor --execute: a dry run, with ConsumerGroupCommand's warning
    dry = tool(bin_dir, "kafka-consumer-groups", *b, "--reset-offsets", "--group", "billing",
               "--topic", "lines", "--to-latest")  # fmt: skip
    assert dry.returncode == 0 and dry.stdout.endswith("3" + " " * 14 + "\n")
    assert dry.stderr.startswith(
        "WARN: No action will be performed as the --execute option is missing.In a future "
    )
    states = tool(bin_dir, "kafka-consumer-groups", *b, "--list", "--state")
    assert states.returncode == 0, states.stderr
    assert "GROUP" + " " * 20 + " STATE" + " " * 15 + "\n" in states.stdout
    assert "billing" + " " * 18 + " Empty" + " " * 15 + "\n" in states.stdout
    deleted = tool(bin_dir, "kafka-consumer-groups", *b, "--delete", "--group", "billing")
    assert deleted.stdout == "Deletion of requested consumer groups ('billing') was successful.\n"
    # a group nobody knows: ConsumerGroupCommand's printError line on stdout, exit 0
    gone = tool(bin_dir, "kafka-consumer-groups", *b, "--describe", "--group", "billing")
    assert (gone.returncode, gone.stdout, gone.stderr) == (
        0, "\nError: Consumer group 'billing' does not exist.\n", "")  # fmt: skip

    offsets = tool(bin_dir, "kafka-get-offsets", *b, "--topic", "lines", "--time", "-1")
    assert (offsets.returncode, offsets.stdout) == (0, "lines:0:3\n")

    plan = Path(broker.data_dir.parent / "delete.json")
    plan.write_text(json.dumps({"partitions": [{"topic": "lines", "partition": 0, "offset": 2}],
                                "version": 1}))  # fmt: skip
    dr = tool(bin_dir, "kafka-delete-records", *b, "--offset-json-file", str(plan))
    assert dr.returncode == 0, dr.stderr
    assert dr.stdout == (
        "Executing records delete operation\n"
        "Records delete operation completed:\n"
        "partition: lines-0\tlow_watermark: 2\n"
    )
    earliest = tool(bin_dir, "kafka-get-offsets", *b, "--topic", "lines", "--time", "earliest")
    assert earliest.stdout == "lines:0:2\n"


def test_cluster_log_dirs_dump_log_and_others(broker: Any, bin_dir: Path) -> None:
    b = ["--bootstrap-server", broker.bootstrap]
    cid = tool(bin_dir, "kafka-cluster", "cluster-id", *b)
    assert cid.returncode == 0 and re.fullmatch(r"Cluster ID: [A-Za-z0-9_-]{22}\n", cid.stdout)
    # ClusterTool's -c/--config (the admin client's properties), and unregister as it
    # answers for a ZooKeeper-mode cluster (ClusterToolTest's legacy-mode case), exit 0
    props = broker.data_dir.parent / "cluster-admin.properties"
    props.write_text(f"bootstrap.servers={broker.bootstrap}\n")
    assert tool(bin_dir, "kafka-cluster", "cluster-id", "-c", str(props)).stdout == cid.stdout
    gone = tool(bin_dir, "kafka-cluster", "unregister", "-b", broker.bootstrap, "--id", "3")
    assert (gone.returncode, gone.stdout) == (
        0, "The target cluster does not support the broker unregistration API.\n")  # fmt: skip

    assert tool(bin_dir, "kafka-topics", *b, "--create", "--topic", "dirs").returncode == 0
    tool(bin_dir, "kafka-console-producer", *b, "--topic", "dirs", input="a\nb\n")
    ld = tool(bin_dir, "kafka-log-dirs", *b, "--describe", "--topic-list", "dirs")
    assert ld.returncode == 0, ld.stderr
    head, received, doc = ld.stdout.split("\n", 2)
    assert head == "Querying brokers for log directories information"
    assert received == "Received log directory information from brokers 1"
    parsed = json.loads(doc)
    assert parsed["version"] == 1
    assert parsed["brokers"][0]["logDirs"][0]["partitions"][0]["partition"] == "dirs-0"

    # DefaultMessageFormatter prints a null key as "null"; the count goes to stderr.
    read = tool(bin_dir, "kafka-console-consumer", *b, "--topic", "dirs", "--from-beginning",
                "--max-messages", "2", "--property", "print.key=true")  # fmt: skip
    assert (read.returncode, read.stdout) == (0, "null\ta\nnull\tb\n"), read.stderr
    assert read.stderr == "Processed a total of 2 messages\n"

    segment = broker.data_dir / "dirs-0" / "00000000000000000000.log"
    dump = tool(bin_dir, "kafka-dump-log", "--files", str(segment), "--print-data-log")
    assert dump.returncode == 0, dump.stderr
    assert dump.stdout.startswith(f"Dumping {segment}\nLog starting offset: 0\n")
    assert "| offset: 1 " in dump.stdout and dump.stdout.rstrip().endswith("payload: b")

    txns = tool(bin_dir, "kafka-transactions", *b, "list")
    # TransactionsCommand.prettyPrintTable: a tab after every (padded) cell
    assert (txns.returncode, txns.stdout) == (
        0, "TransactionalId\tCoordinator\tProducerId\tTransactionState\t\n")  # fmt: skip
    elect = tool(bin_dir, "kafka-leader-election", *b, "--election-type", "PREFERRED",
                 "--all-topic-partitions")  # fmt: skip
    assert elect.returncode == 0, elect.stderr


def test_kt_answers_to_the_tool_names(broker: Any) -> None:
    via_kt = subprocess.run(
        [
            sys.executable,
            "-m",
            "kt",
            "kafka-topics",
            "--bootstrap-server",
            broker.bootstrap,
            "--list",
        ],
        capture_output=True,
        text=True,
        timeout=DEADLINE,
    )
    assert via_kt.returncode == 0, via_kt.stderr


def test_kafka_broker_api_versions(broker: Any, bin_dir: Path) -> None:
    got = tool(bin_dir, "kafka-broker-api-versions", "--bootstrap-server", broker.bootstrap)
    assert got.returncode == 0, got.stderr
    lines = got.stdout.split("\n")
    assert lines[0] == f"{broker.bootstrap} (id: 1 rack: null) -> ("
    assert lines[-2:] == [")", ""]
    # NodeApiVersions' lines: tab, Name(key): range [usable: N], comma but the last
    assert re.fullmatch(r"\tProduce\(0\): \d+ to \d+ \[usable: \d+\],", lines[1]), lines[1]
    entries = lines[1:-2]
    assert all(re.fullmatch(r"\t\w+\(\d+\): .+,", e) for e in entries[:-1])
    assert not entries[-1].endswith(",")
    keys = [int(re.search(r"\((\d+)\)", e).group(1)) for e in entries]  # type: ignore[union-attr]
    assert keys == sorted(keys)
    assert any(e.startswith("\tApiVersions(18): ") for e in entries)


# The command lines librdkafka's test suite runs through system() (tests/test.c's
# test_kafka_topics(), used by 0052 and 0077, and test_kafka_cmd(), used by 0109),
# with KAFKA_PATH pointing at the installed scripts.
LIBRDKAFKA_COMMANDS = [
    '$KAFKA_PATH/bin/kafka-topics.sh --bootstrap-server $BROKERS --create --topic "rdk_0052" '
    "--replication-factor 1 --partitions 1 --config message.timestamp.type=LogAppendTime",
    '$KAFKA_PATH/bin/kafka-topics.sh --bootstrap-server $BROKERS --create --topic "rdk_0077" '
    "--partitions 1 --replication-factor 1 --config cleanup.policy=compact "
    "--config segment.ms=500 --config segment.bytes=1048576 "
    "--config min.cleanable.dirty.ratio=0.01 --config delete.retention.ms=86400 "
    "--config file.delete.delay.ms=10000 --config max.compaction.lag.ms=100",
    "$KAFKA_PATH/bin/kafka-topics.sh --bootstrap-server $BROKERS --alter --topic rdk_0052 "
    "--partitions 2",
    '$KAFKA_PATH/bin/kafka-topics.sh --bootstrap-server $BROKERS --delete --topic "rdk_0077" ',
]


def test_librdkafka_test_suite_command_lines(broker: Any, bin_dir: Path) -> None:
    env = {**os.environ, "KAFKA_PATH": str(bin_dir.parent), "BROKERS": broker.bootstrap}
    for command in LIBRDKAFKA_COMMANDS:
        done = subprocess.run(
            ["sh", "-c", command], capture_output=True, text=True, env=env, timeout=DEADLINE
        )
        assert done.returncode == 0, (command, done.stdout, done.stderr)
    desc = tool(bin_dir, "kafka-topics", "--bootstrap-server", broker.bootstrap, "--describe",
                "--topic", "rdk_0052")  # fmt: skip
    assert "PartitionCount: 2" in desc.stdout
    assert "Configs: message.timestamp.type=LogAppendTime" in desc.stdout
    # 0109's kafka-acls.sh call against a broker without an authorizer: what Kafka's
    # tool does there (the block it meant to add, then the broker's SECURITY_DISABLED
    # as AclCommand prints it, exit 1); test_kafka_cmd() fails the test then, so 0109
    # needs a broker with an authorizer, as it does with Kafka (trivup configures one).
    acls = subprocess.run(["sh", "-c", ACLS_0109 % "x"], capture_output=True, text=True,
                          env=env, timeout=DEADLINE)  # fmt: skip
    assert acls.returncode == 1
    assert acls.stdout == added("x", DENY_ALL) + (
        "Error while executing ACL command: org.apache.kafka.common.errors."
        "SecurityDisabledException: No Authorizer is configured.\n"
    )


# librdkafka's 0109 (test_kafka_cmd), the topic name in %s
ACLS_0109 = ("$KAFKA_PATH/bin/kafka-acls.sh --bootstrap-server $BROKERS --add --deny-principal "
             "'User:*' --operation All --deny-host '*' --topic '%s'")  # fmt: skip
DENY_ALL = "(principal=User:*, host=*, operation=ALL, permissionType=DENY)"


def pattern(name: str, rtype: str = "TOPIC", ptype: str = "LITERAL") -> str:
    return f"ResourcePattern(resourceType={rtype}, name={name}, patternType={ptype})"


def block(title: str, name: str, *entries: str, rtype: str = "TOPIC", ptype: str = "LITERAL"):
    """AclCommand 3.x: s"$title `$resource`: $Newline ${acls.mkString(Newline)} $Newline"
    and println's newline."""
    body = "\n".join("\t" + e for e in entries)
    return f"{title} `{pattern(name, rtype, ptype)}`: \n {body} \n\n"


def added(name: str, *entries: str, **kw: str) -> str:
    return block("Adding ACLs for resource", name, *entries, **kw)


def current(name: str, *entries: str, **kw: str) -> str:
    return block("Current ACLs for resource", name, *entries, **kw)


JAAS = ("org.apache.kafka.common.security.plain.PlainLoginModule required "
        'user_admin="admin-pw" user_alice="alice-pw";')  # fmt: skip


@pytest.fixture(scope="module")
def secured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """A broker with an authorizer, as librdkafka's trivup configures one (ZooKeeper
    mode's SimpleAclAuthorizer name, everyone allowed where no ACL is found), plus a
    SASL_PLAINTEXT listener for alice and the super user admin."""
    from broker_harness import BrokerProcess, free_port

    port, sasl = free_port(), free_port()
    overrides = {
        "listeners": f"PLAINTEXT://127.0.0.1:{port},SASL_PLAINTEXT://127.0.0.1:{sasl}",
        "sasl.enabled.mechanisms": "PLAIN",
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": JAAS,
        "authorizer.class.name": "kafka.security.auth.SimpleAclAuthorizer",
        "allow.everyone.if.no.acl.found": "true",
        "super.users": "User:admin",
        "offsets.topic.num.partitions": "1",
        "connection.failed.authentication.delay.ms": "0",
    }
    b = BrokerProcess(tmp_path_factory.mktemp("compat-acls") / "data", port, overrides)
    b.start(timeout=60)
    b.sasl_bootstrap = f"127.0.0.1:{sasl}"  # type: ignore[attr-defined]
    yield b
    b.kill()


def sasl_properties(path: Path, b: Any, user: str) -> Path:
    """A client properties file as Kafka's docs write one for SASL/PLAIN."""
    path.write_text(
        f"bootstrap.servers={b.sasl_bootstrap}\n"
        "security.protocol=SASL_PLAINTEXT\n"
        "sasl.mechanism=PLAIN\n"
        "sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required "
        f'username="{user}" password="{user}-pw";\n'
    )
    return path


def test_librdkafka_0109_acl_command_on_a_broker_with_an_authorizer(
    secured: Any, bin_dir: Path
) -> None:
    env = {**os.environ, "KAFKA_PATH": str(bin_dir.parent), "BROKERS": secured.bootstrap}
    b = ["--bootstrap-server", secured.bootstrap]
    assert (
        tool(bin_dir, "kafka-topics", *b, "--create", "--topic", "rdk_0109_unauth").returncode == 0
    )
    done = subprocess.run(["sh", "-c", ACLS_0109 % "rdk_0109_unauth"], capture_output=True,
                          text=True, env=env, timeout=DEADLINE)  # fmt: skip
    assert (done.returncode, done.stderr) == (0, ""), done.stdout
    assert done.stdout == added("rdk_0109_unauth", DENY_ALL) + current("rdk_0109_unauth", DENY_ALL)
    # the ACL does what 0109 relies on: the topic is refused to everyone but the super user
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": secured.bootstrap, "message.timeout.ms": 20000})
    errors: list[Any] = []
    p.produce("rdk_0109_unauth", b"v", on_delivery=lambda err, msg: errors.append(err))
    p.flush(60)
    assert errors and errors[0] is not None and errors[0].name() == "TOPIC_AUTHORIZATION_FAILED"


def test_kafka_acls_add_list_remove(secured: Any, bin_dir: Path, tmp_path: Path) -> None:
    admin = sasl_properties(tmp_path / "admin.properties", secured, "admin")
    b = ["--bootstrap-server", secured.sasl_bootstrap, "--command-config", str(admin)]
    read = "(principal=User:alice, host=*, operation=READ, permissionType=ALLOW)"
    write = "(principal=User:alice, host=*, operation=WRITE, permissionType=ALLOW)"
    # Kafka's docs (ops.html): --add --allow-principal ... --operation Read --operation Write
    made = tool(bin_dir, "kafka-acls", *b, "--add", "--allow-principal", "User:alice",
                "--operation", "Read", "--operation", "Write", "--topic", "ledger")  # fmt: skip
    assert made.returncode == 0, made.stderr
    assert made.stdout == added("ledger", read, write) + current("ledger", read, write)
    listed = tool(bin_dir, "kafka-acls", *b, "--list", "--topic", "ledger")
    assert (listed.returncode, listed.stdout) == (0, current("ledger", read, write))
    mine = tool(
        bin_dir, "kafka-acls", *b, "--list", "--principal", "User:alice", "--topic", "ledger"
    )
    assert mine.stdout == "ACLs for principal `User:alice`\n" + current("ledger", read, write)
    prefixed = tool(bin_dir, "kafka-acls", *b, "--add", "--allow-principal", "User:alice",
                    "--consumer", "--topic", "pay-", "--group", "alice-",
                    "--resource-pattern-type", "PREFIXED")  # fmt: skip
    assert prefixed.returncode == 0, prefixed.stderr
    assert added("alice-", read, rtype="GROUP", ptype="PREFIXED") in prefixed.stdout
    # --remove without --force asks, as Kafka's tool does; "n" keeps them
    kept = tool(bin_dir, "kafka-acls", *b, "--remove", "--allow-principal", "User:alice",
                "--operation", "Write", "--topic", "ledger", input="n\n")  # fmt: skip
    assert kept.returncode == 0, kept.stderr
    assert kept.stdout == (
        f"Are you sure you want to remove ACLs: \n \t{write} \n from resource filter "
        f"`{pattern('ledger')}`? (y/n)\n" + current("ledger", read, write)
    )
    gone = tool(bin_dir, "kafka-acls", *b, "--remove", "--allow-principal", "User:alice",
                "--operation", "Write", "--topic", "ledger", input="y\n")  # fmt: skip
    assert gone.stdout.endswith(current("ledger", read)), gone.stdout
    forced = tool(bin_dir, "kafka-acls", *b, "--remove", "--force", "--topic", "ledger")
    assert (forced.returncode, forced.stdout) == (0, ""), forced.stderr
    everything = tool(bin_dir, "kafka-acls", *b, "--list")
    assert "ledger" not in everything.stdout and "alice-" in everything.stdout


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("--list",), 'Missing required argument "[authorizer-properties]"'),
        (("--bootstrap-server", "x:1", "--authorizer", "a.B", "--list"),
         "Only one of --bootstrap-server or --authorizer must be specified"),
        (("--bootstrap-server", "x:1", "--authorizer-properties", "zookeeper.connect=z:2181",
          "--list"), "The --authorizer-properties option can only be used with --authorizer"),
        (("--authorizer-properties", "zookeeper.connect=z:2181", "--list"),
         "option --authorizer-properties is not supported by kt"),
        (("--bootstrap-server", "x:1"), "Command must include exactly one action: --list, "
         "--add, --remove. "),
        (("--bootstrap-server", "x:1", "--list", "--allow-principal", "User:a"),
         'Option "[list]" can\'t be used with option "[allow-principal]"'),
        (("--bootstrap-server", "x:1", "--add", "--producer", "--operation", "Read", "--topic",
          "t", "--allow-principal", "User:a"),
         'Option "[producer]" can\'t be used with option "[operation]"'),
        (("--bootstrap-server", "x:1", "--add", "--principal", "User:a", "--topic", "t"),
         "The --principal option is only available if --list is set"),
        (("--bootstrap-server", "x:1", "--add", "--idempotent", "--topic", "t"),
         "The --idempotent option is only available if --producer is set"),
        (("--bootstrap-server", "x:1", "--add", "--consumer", "--topic", "t"),
         "With --consumer you must specify a --topic and a --group and no --cluster or "
         "--transactional-id option should be specified."),
    ],
)  # fmt: skip
def test_kafka_acls_usage_errors(bin_dir: Path, args: tuple[str, ...], message: str) -> None:
    r = tool(bin_dir, "kafka-acls", *args)
    assert r.returncode == 1 and r.stdout == ""
    assert len(r.stderr.splitlines()) == 1 and message in r.stderr, r.stderr


def test_command_config_and_broker_configs(broker: Any, bin_dir: Path, tmp_path: Path) -> None:
    props = tmp_path / "admin.properties"
    props.write_text(f"bootstrap.servers={broker.bootstrap}\nrequest.timeout.ms=60000\n")
    listed = tool(bin_dir, "kafka-topics", "--command-config", str(props), "--list")
    assert listed.returncode == 0, listed.stderr
    desc = tool(bin_dir, "kafka-configs", "--command-config", str(props), "--describe",
                "--entity-type", "brokers", "--entity-name", "1")  # fmt: skip
    assert desc.returncode == 0, desc.stderr
    assert desc.stdout.splitlines()[0] == "Dynamic configs for broker 1 are:"
    # Incomplete security settings are refused in one line, never dropped.
    sasl = tmp_path / "sasl.properties"
    sasl.write_text(f"bootstrap.servers={broker.bootstrap}\nsecurity.protocol=SASL_SSL\n")
    refused = tool(bin_dir, "kafka-topics", "--command-config", str(sasl), "--list")
    assert refused.returncode == 1 and "security.protocol=SASL_SSL" in refused.stderr
    assert len(refused.stderr.strip().splitlines()) == 1


def test_a_link_named_after_a_tool_runs_it(broker: Any, tmp_path: Path) -> None:
    from broker_harness import KT

    link = tmp_path / "kafka-topics.sh"
    link.symlink_to(KT)
    made = subprocess.run(
        [str(link), "--bootstrap-server", broker.bootstrap, "--create", "--topic", "linked"],
        capture_output=True, text=True, timeout=DEADLINE,
    )  # fmt: skip
    assert (made.returncode, made.stdout) == (0, "Created topic linked.\n"), made.stderr


def test_members_of_a_live_group(broker: Any, bin_dir: Path) -> None:
    import time

    b = ["--bootstrap-server", broker.bootstrap]
    assert tool(bin_dir, "kafka-topics", *b, "--create", "--topic", "live",
                "--partitions", "2").returncode == 0  # fmt: skip
    consumer = subprocess.Popen(
        [str(bin_dir / "kafka-console-consumer.sh"), *b, "--topic", "live", "--group", "watchers"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + DEADLINE
        while True:
            got = tool(bin_dir, "kafka-consumer-groups", *b, "--describe", "--group", "watchers",
                       "--members")  # fmt: skip
            lines = got.stdout.split("\n")
            if got.returncode == 0 and len(lines) >= 4 and lines[2].strip():
                break
            assert time.monotonic() < deadline, got
            time.sleep(0.2)  # polling for the member to join, not a fixed wait
        assert lines[0] == ""
        assert re.fullmatch(r"GROUP {11}CONSUMER-ID +HOST {12}CLIENT-ID +#PARTITIONS {5}", lines[1])
        # every cell starts where its header does (columns padded, one space apart)
        starts = [m.start() for m in re.finditer(r"\S+", lines[1])]
        assert [m.start() for m in re.finditer(r"\S+", lines[2])] == starts, lines[1:3]
        cells = lines[2].split()
        assert cells[0] == "watchers" and cells[-1] == "2", lines[2]
        assert lines[2].endswith("2" + " " * 15)
        verbose = tool(bin_dir, "kafka-consumer-groups", *b, "--describe", "--group", "watchers",
                       "--members", "--verbose").stdout.split("\n")  # fmt: skip
        assert verbose[1].endswith("#PARTITIONS     ASSIGNMENT")
        assert verbose[2].endswith("2               live(0,1)"), verbose
        state = tool(bin_dir, "kafka-consumer-groups", *b, "--describe", "--group", "watchers",
                     "--state").stdout  # fmt: skip
        coordinator = f"{broker.bootstrap} (1)"
        width = max(25, len(coordinator))
        assert state == (
            f"\n{'GROUP':{width}} {'COORDINATOR (ID)':25} {'ASSIGNMENT-STRATEGY':20} "
            f"{'STATE':15} #MEMBERS"
            f"\n{'watchers':{width}} {coordinator:25} {'range':20} {'Stable':15} 1\n"
        )
    finally:
        consumer.terminate()
        consumer.wait(timeout=DEADLINE)


WARN = re.compile(
    r"\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}\] WARN The configuration '(.+)' was supplied but "
    r"isn't a known config\. \((org\.apache\.kafka\.clients\.\w+\.\w+)\)"
)


def test_console_tools_take_client_config_files_with_security(
    secured: Any, bin_dir: Path, tmp_path: Path
) -> None:
    """--producer.config / --consumer.config / --command-config carry SASL settings to
    kt's client (the SASL listener takes nothing else); a name Kafka's client does not
    know gets its WARN line and is ignored, as with Kafka."""
    props = sasl_properties(tmp_path / "alice.properties", secured, "alice")
    with props.open("a") as f:
        f.write("acks=all\nlinger.ms.typo=5\n")
    b = ["--bootstrap-server", secured.sasl_bootstrap]
    admin = sasl_properties(tmp_path / "admin.properties", secured, "admin")
    made = tool(bin_dir, "kafka-topics", *b, "--command-config", str(admin), "--create",
                "--topic", "alice-orders")  # fmt: skip
    assert made.returncode == 0, made.stderr
    sent = tool(bin_dir, "kafka-console-producer", *b, "--topic", "alice-orders",
                "--producer.config", str(props), input="one\ntwo\n")  # fmt: skip
    assert (sent.returncode, sent.stdout) == (0, ""), sent.stderr
    warned = [WARN.fullmatch(line) for line in sent.stderr.splitlines()]
    assert [(m.group(1), m.group(2)) for m in warned if m] == [
        ("linger.ms.typo", "org.apache.kafka.clients.producer.ProducerConfig")
    ], sent.stderr
    consumer_props = sasl_properties(tmp_path / "consumer.properties", secured, "alice")
    with consumer_props.open("a") as f:
        f.write("group.id=alice-readers\nauto.offset.reset=earliest\n")
    got = tool(bin_dir, "kafka-console-consumer", *b, "--topic", "alice-orders",
               "--consumer.config", str(consumer_props), "--max-messages", "2")  # fmt: skip
    assert (got.returncode, got.stdout) == (0, "one\ntwo\n"), got.stderr
    # the group came from the file: its offsets are committed under it
    groups = tool(bin_dir, "kafka-consumer-groups", *b, "--command-config", str(admin),
                  "--describe", "--group", "alice-readers")  # fmt: skip
    assert groups.returncode == 0 and "alice-orders" in groups.stdout, groups.stderr
    offsets = tool(bin_dir, "kafka-get-offsets", *b, "--command-config", str(props),
                   "--topic", "alice-orders")  # fmt: skip
    assert offsets.stdout == "alice-orders:0:2\n", offsets.stderr
    # --producer-property / --consumer-property carry them too
    one = ["--producer-property", "security.protocol=SASL_PLAINTEXT",
           "--producer-property", "sasl.mechanism=PLAIN", "--producer-property",
           'sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule '
           'required username="alice" password="alice-pw";']  # fmt: skip
    again = tool(bin_dir, "kafka-console-producer", *b, "--topic", "alice-orders", *one,
                 input="three\n")  # fmt: skip
    assert (again.returncode, again.stderr) == (0, "")
    # a wrong password: one error line, exit 1, and the password is not printed
    bad = tmp_path / "bad.properties"
    bad.write_text(props.read_text().replace("alice-pw", "wrong-secret"))
    refused = tool(bin_dir, "kafka-console-producer", *b, "--topic", "alice-orders",
                   "--producer.config", str(bad), input="x\n")  # fmt: skip
    assert refused.returncode == 1
    assert "wrong-secret" not in refused.stdout + refused.stderr
    assert "Traceback" not in refused.stderr


def test_kraft_tools_against_a_zookeeper_mode_broker(
    broker: Any, bin_dir: Path, tmp_path: Path
) -> None:
    """What Kafka 3.x's MetadataQuorumCommand, FeatureCommand and StorageTool print
    against a ZooKeeper-mode broker (kt's): one line each, exit codes as Kafka's."""
    b = ["--bootstrap-server", broker.bootstrap]
    # Kafka's docs (ops.html): kafka-metadata-quorum.sh --bootstrap-server B describe --status
    for what in ("--status", "--replication"):
        q = tool(bin_dir, "kafka-metadata-quorum", *b, "describe", what)
        assert (q.returncode, q.stdout) == (1, "")
        assert q.stderr == (
            "org.apache.kafka.common.errors.UnsupportedVersionException: "
            "The node does not support DESCRIBE_QUORUM\n"
        )
    both = tool(bin_dir, "kafka-metadata-quorum", *b, "describe", "--status", "--replication")
    assert both.stderr == (
        "Only one of --status or --replication should be specified with describe sub-command\n"
    )
    # kt's broker reports no features in ApiVersions: describe prints none
    described = tool(bin_dir, "kafka-features", *b, "describe")
    assert (described.returncode, described.stdout, described.stderr) == (0, "", "")
    up = tool(bin_dir, "kafka-features", *b, "upgrade", "--metadata", "3.7-IV4")
    assert up.returncode == 1
    assert up.stdout == (
        "Could not upgrade metadata.version to 19. The node does not support UPDATE_FEATURES\n"
    )
    assert up.stderr == "1 out of 1 operation(s) failed.\n"
    dry = tool(bin_dir, "kafka-features", *b, "disable", "--feature", "x", "--dry-run")
    assert dry.stdout == "Can not disable x. The node does not support UPDATE_FEATURES\n"

    uuid = tool(bin_dir, "kafka-storage", "random-uuid")
    assert uuid.returncode == 0 and re.fullmatch(r"[A-Za-z0-9_][A-Za-z0-9_-]{21}\n", uuid.stdout)
    # options a subcommand lacks: argparse4j's refusal, nothing run or printed
    for name, args, word in [
        ("kafka-storage", ["random-uuid", "-c", "s.properties"], "-c"),
        ("kafka-features", [*b, "describe", "--feature", "x=1"], "--feature"),
    ]:
        refused = tool(bin_dir, name, *args)
        assert (refused.returncode, refused.stdout) == (1, "")
        assert refused.stderr == f"kt: error: {name}: unrecognized arguments: '{word}'\n"
    server = tmp_path / "server.properties"
    missing = tmp_path / "missing"
    server.write_text(f"zookeeper.connect=127.0.0.1:2181\nlog.dirs={broker.data_dir},{missing}\n")
    meta = dict(
        line.split("=", 1)
        for line in (broker.data_dir / "meta.properties").read_text().splitlines()
        if line and not line.startswith("#")
    )
    found = "{" + ", ".join(f"{k}={meta[k]}" for k in sorted(meta)) + "}"
    info = tool(bin_dir, "kafka-storage", "info", "-c", str(server))
    assert info.returncode == 1
    # StorageTool: kt writes version-1 meta.properties, which Kafka's tool calls
    # KRaft-formatted next to a ZooKeeper-mode configuration.
    assert info.stdout == (
        f"Found log directory:\n  {broker.data_dir}\n\nFound metadata: {found}\n\n"
        f"Found problems:\n  {missing} does not exist\n  The kafka configuration file "
        "appears to be for a legacy cluster, but the directories are formatted for a "
        "cluster in KRaft mode.\n\n"
    )
    fmt = tool(bin_dir, "kafka-storage", "format", "-t", uuid.stdout.strip(), "-c", str(server))
    assert (fmt.returncode, fmt.stdout) == (1, "")
    assert fmt.stderr == (
        "The kafka configuration file appears to be for a legacy cluster. Formatting is only "
        "supported for clusters in KRaft mode.\n"
    )


def test_kafka_acls_examples_of_kafkas_docs(secured: Any, bin_dir: Path, tmp_path: Path) -> None:
    """security.html's "Examples" command lines, unchanged but for the broker address."""
    admin = sasl_properties(tmp_path / "admin.properties", secured, "admin")
    b = ["--bootstrap-server", secured.sasl_bootstrap, "--command-config", str(admin)]
    added_ = tool(bin_dir, "kafka-acls", *b, "--add", "--allow-principal", "User:Bob",
                  "--allow-principal", "User:Alice", "--allow-host", "198.51.100.0",
                  "--allow-host", "198.51.100.1", "--operation", "Read", "--operation", "Write",
                  "--topic", "Test-topic")  # fmt: skip
    assert added_.returncode == 0, added_.stderr
    # the cross product: 2 principals x 2 hosts x 2 operations, one block per resource
    head = f"Adding ACLs for resource `{pattern('Test-topic')}`: \n \t"
    assert added_.stdout.startswith(head)
    adding = added_.stdout[len(head) - 1 : added_.stdout.index(" \n\n")].split("\n")
    assert sorted(line.lstrip(" ") for line in adding) == sorted(
        f"\t(principal=User:{who}, host={host}, operation={op}, permissionType=ALLOW)"
        for who in ("Bob", "Alice") for host in ("198.51.100.0", "198.51.100.1")
        for op in ("READ", "WRITE")
    )  # fmt: skip
    listed = tool(bin_dir, "kafka-acls", *b, "--list", "--topic", "Test-topic")
    assert listed.stdout.count("\n\t") + 1 == 8 and listed.stdout.endswith(" \n\n")
    consumer = tool(bin_dir, "kafka-acls", *b, "--add", "--allow-principal", "User:Bob",
                    "--consumer", "--topic", "Test-topic", "--group", "Group-1")  # fmt: skip
    assert consumer.returncode == 0, consumer.stderr
    group_read = "(principal=User:Bob, host=*, operation=READ, permissionType=ALLOW)"
    assert added("Group-1", group_read, rtype="GROUP") in consumer.stdout
    producer = tool(bin_dir, "kafka-acls", *b, "--add", "--allow-principal", "User:Jane",
                    "--producer", "--topic", "Test-topic")  # fmt: skip
    assert producer.returncode == 0, producer.stderr
    for op in ("WRITE", "DESCRIBE", "CREATE"):
        assert f"(principal=User:Jane, host=*, operation={op}, permissionType=ALLOW)" in (
            producer.stdout
        )
    removed = tool(bin_dir, "kafka-acls", *b, "--remove", "--allow-principal", "User:Bob",
                   "--allow-principal", "User:Alice", "--allow-host", "198.51.100.0",
                   "--allow-host", "198.51.100.1", "--operation", "Read", "--operation",
                   "Write", "--topic", "Test-topic", "--force")  # fmt: skip
    assert removed.returncode == 0, removed.stderr
    assert "User:Alice" not in removed.stdout and "User:Jane" in removed.stdout
