"""Kafka tool command lines parsed as joptsimple parses them, and translated to kt's
consumer format."""

from __future__ import annotations

import base64
from pathlib import Path

import pytest

from kt.tools.compat_acls import ACLS, check, exception_line
from kt.tools.compat_args import (
    Arity,
    CompatUsageError,
    KafkaMessage,
    Parsed,
    Spec,
    UnrecognizedOption,
    UnsupportedOption,
    parse,
)
from kt.tools.compat_configs import unknown
from kt.tools.compat_kraft import (
    FEATURES,
    STORAGE,
    feature_updates,
    features_text,
    log_directories,
    metadata_level,
    storage_info,
)
from kt.tools.compat_tools import (
    TOOLS,
    MessageFormat,
    _should_print,
    members_table,
    state_table,
    tool_name,
)

SPEC = Spec(
    {"bootstrap-server": Arity.VALUE, "bootstrap-controller": Arity.VALUE, "list": Arity.FLAG,
     "config": Arity.VALUE, "state": Arity.OPTIONAL},
    {"topic-id": "by name"},
)  # fmt: skip


def test_values_flags_equals_and_repeats() -> None:
    p = parse("t", SPEC, ["--bootstrap-server", "b:1", "--list", "--config=a=1", "--config", "b=2"])
    assert p.value("bootstrap-server") == "b:1" and p.has("list")
    assert p.values("config") == ["a=1", "b=2"]


def test_unique_prefixes_and_ambiguity() -> None:
    assert parse("t", SPEC, ["--bootstrap-s", "b:1"]).value("bootstrap-server") == "b:1"
    with pytest.raises(UnrecognizedOption, match=r"^bootstrap is not a recognized option$"):
        parse("t", SPEC, ["--bootstrap", "b:1"])
    with pytest.raises(UnrecognizedOption, match=r"^zookeeper is not a recognized option$"):
        parse("t", SPEC, ["--zookeeper", "z:2181"])


def test_unsupported_option_is_named() -> None:
    with pytest.raises(
        UnsupportedOption, match=r"t: option --topic-id is not supported by kt: by name"
    ):
        parse("t", SPEC, ["--topic-id", "x"])


def test_optional_value_and_missing_value() -> None:
    assert parse("t", SPEC, ["--state", "--list"]).value("state") is None
    assert parse("t", SPEC, ["--state", "Stable"]).value("state") == "Stable"
    with pytest.raises(CompatUsageError, match="requires an argument"):
        parse("t", SPEC, ["--bootstrap-server"])
    with pytest.raises(CompatUsageError, match="does not take an argument"):
        parse("t", SPEC, ["--list=yes"])


def test_tool_names() -> None:
    assert tool_name("/opt/kafka/bin/kafka-topics.sh") == "kafka-topics"
    assert tool_name("kafka-configs") == "kafka-configs"
    assert "kafka-acls" in TOOLS


def acls(*argv: str) -> Parsed:
    return parse("kafka-acls", ACLS, list(argv))


def test_kafka_acls_checks_in_kafka_order() -> None:
    assert check(acls("--bootstrap-server", "b:1", "--list", "--principal", "User:a")) == "list"
    # joptsimple: a unique prefix, repeatable --operation, --principal's value optional
    p = acls("--bootstrap-s", "b:1", "--add", "--operation", "Read", "--operation=All",
             "--allow-principal", "User:*", "--topic", "t")  # fmt: skip
    assert check(p) == "add" and p.values("operation") == ["Read", "All"]
    with pytest.raises(CompatUsageError, match=r'^Missing required argument "\[authorizer-'):
        check(acls("--list", "--command-config", "c.properties"))
    with pytest.raises(UnsupportedOption, match="authorizer-properties"):
        check(acls("--authorizer-properties", "zookeeper.connect=z:2181", "--list"))
    with pytest.raises(CompatUsageError, match="Unknown resource-pattern-type: regex"):
        check(acls("--bootstrap-server", "b", "--list", "--resource-pattern-type", "regex"))
    with pytest.raises(UnsupportedOption, match="bootstrap-controller"):
        acls("--bootstrap-controller", "c:9093", "--list")


def test_kafka_acls_broker_errors_as_aclcommand_prints_them() -> None:
    assert exception_line("SECURITY_DISABLED: No Authorizer is configured.") == (
        "Error while executing ACL command: org.apache.kafka.common.errors."
        "SecurityDisabledException: No Authorizer is configured."
    )
    assert exception_line("CLUSTER_AUTHORIZATION_FAILED: Cluster authorization failed.") == (
        "Error while executing ACL command: org.apache.kafka.common.errors."
        "ClusterAuthorizationException: Cluster authorization failed."
    )
    assert exception_line("cannot reach 127.0.0.1:1") is None


def test_console_consumer_format_follows_kafka_field_order() -> None:
    record = {"topic": "t", "partition": 2, "offset": 7, "timestamp": 1700000000000,
              "timestamp_type": "LogAppendTime", "key": None,
              "value": base64.b64encode(b"v\x00").decode(),
              "headers": [{"key": "h", "value": base64.b64encode(b"1").decode()},
                          {"key": "n", "value": None}]}  # fmt: skip
    assert MessageFormat.from_properties({}).render(record) == b"v\x00\n"
    every = MessageFormat.from_properties(
        {"print.key": "true", "print.timestamp": "TRUE", "print.partition": "true",
         "print.offset": "true", "print.headers": "true", "key.separator": " | "}
    )  # fmt: skip
    assert every.render(record) == (
        b"LogAppendTime:1700000000000 | Partition:2 | Offset:7 | h:1,n:null | null | v\x00\n"
    )
    no_value = MessageFormat.from_properties({"print.value": "false", "print.key": "true",
                                              "null.literal": "-"})  # fmt: skip
    assert no_value.render({**record, "headers": []}) == b"-\n"


def test_storage_info_as_storagetool_prints_it(tmp_path: Path) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir()
    b.mkdir()
    (a / "meta.properties").write_text("#\nversion=0\nbroker.id=3\ncluster.id=abc\n")
    text, code = storage_info([str(b), str(a)], kraft=False)
    assert code == 1
    assert text == (
        f"Found log directories:\n  {a}\n  {b}\n\n"
        "Found metadata: {broker.id=3, cluster.id=abc, version=0}\n\n"
        f"Found problem:\n  {b} is not formatted.\n\n"
    )
    (b / "meta.properties").write_text("version=0\nbroker.id=3\ncluster.id=abc\n")
    assert storage_info([str(a), str(b)], kraft=False)[1] == 0
    text, code = storage_info([str(a)], kraft=True)
    assert code == 1 and "formatted for legacy mode." in text
    assert storage_info([], kraft=False) == ("No directories specified.\n", 0)
    assert log_directories({"log.dirs": "/x,/a", "metadata.log.dir": "/m"}) == ["/a", "/m", "/x"]
    assert log_directories({}) == ["/tmp/kafka-logs"]


def test_feature_levels_and_updates() -> None:
    assert metadata_level("3.3-IV3") == 7 and metadata_level("3.7") == 19
    with pytest.raises(KafkaMessage, match=r"^Unsupported metadata version 2\.0\. Supported "
                       r"metadata versions are 3\.3-IV0, 3\.3-IV1, .*, 3\.8-IV0$"):  # fmt: skip
        metadata_level("2.0")
    p = parse("kafka-features", FEATURES, ["upgrade", "--feature", "a=1", "--metadata", "3.8"])
    assert feature_updates(p, "upgrade") == {"metadata.version": 20, "a": 1}
    with pytest.raises(KafkaMessage, match="equals sign not found"):
        feature_updates(parse("kafka-features", FEATURES, ["upgrade", "--feature", "a"]), "upgrade")
    with pytest.raises(KafkaMessage, match="unable to parse x as a short"):
        feature_updates(parse("kafka-features", FEATURES, ["upgrade", "--feature", "a=x"]), "x")
    with pytest.raises(KafkaMessage, match=r"^You must specify at least one feature to disable$"):
        feature_updates(parse("kafka-features", FEATURES, ["disable"]), "disable")


def test_features_text_follows_featurecommand() -> None:
    from types import SimpleNamespace as NS

    resp = NS(
        supported_features=[NS(name="metadata.version", min_version=1, max_version=20),
                            NS(name="group.version", min_version=0, max_version=1)],
        finalized_features=[NS(name="metadata.version", max_version_level=19,
                               min_version_level=19)],
        finalized_features_epoch=5,
    )  # fmt: skip
    assert features_text(resp) == (
        "Feature: group.version\tSupportedMinVersion: 0\tSupportedMaxVersion: 1\t"
        "FinalizedVersionLevel: 0\tEpoch: 5\n"
        "Feature: metadata.version\tSupportedMinVersion: 3.0-IV1\tSupportedMaxVersion: "
        "3.8-IV0\tFinalizedVersionLevel: 3.7-IV4\tEpoch: 5\n"
    )


def test_argparse_short_options() -> None:
    p = parse("kafka-storage", STORAGE, ["format", "-c", "s.properties", "-t", "id", "-g"])
    assert p.positional == ["format"] and p.value("config") == "s.properties"
    assert p.value("cluster-id") == "id" and p.has("ignore-formatted")


def test_unknown_client_config_names() -> None:
    assert unknown({"acks": "1", "sasl.username": "u", "linger.ms.typo": "5"}, "producer") == [
        "linger.ms.typo"
    ]
    assert unknown({"group.id": "g"}, "admin") == ["group.id"]
    assert unknown({"group.id": "g", "isolation.level": "read_committed"}, "consumer") == []


GROUP_DOC = {
    "group": "billing", "state": "Stable", "assignment_strategy": "range", "coordinator": 1,
    "members": [
        {"consumer_id": "c-1", "group_instance_id": None, "host": "/10.0.0.1",
         "client_id": "app", "assignment": [{"topic": "t", "partition": 1},
                                            {"topic": "a", "partition": 0},
                                            {"topic": "t", "partition": 0}]},
        {"consumer_id": "c-2", "group_instance_id": None, "host": "/10.0.0.2",
         "client_id": "app", "assignment": []},
    ],
}  # fmt: skip


def test_group_tables_in_consumergroupcommand_widths() -> None:
    # printStates: "\n%-Ls %-25s %-20s %-15s %s", L = max(25, len("host:port (id)"))
    coordinator = "broker-with-a-long-name.example:9092 (1)"  # 40 > 25 wide
    assert state_table(GROUP_DOC, {1: "broker-with-a-long-name.example:9092"}) == (
        f"\n{'GROUP':40} {'COORDINATOR (ID)':25} {'ASSIGNMENT-STRATEGY':20} {'STATE':15} #MEMBERS"
        f"\n{'billing':40} {coordinator:25} {'range':20} {'Stable':15} 2\n"
    )
    assert (
        state_table(GROUP_DOC, {1: "h:1"})
        .split("\n")[2]
        .startswith("billing" + " " * 19 + "h:1 (1)")
    )
    # printMembers --verbose: ASSIGNMENT after "%-15s ", topics sorted, ", " between
    lines = members_table(GROUP_DOC, verbose=True).split("\n")
    assert lines[1] == ("GROUP           CONSUMER-ID     HOST            CLIENT-ID       "
                        "#PARTITIONS     ASSIGNMENT")  # fmt: skip
    assert lines[2].endswith("3               a(0), t(0,1)")
    assert lines[3].endswith("0               -")


def test_group_notes_on_stderr(capsys: pytest.CaptureFixture[str]) -> None:
    assert _should_print("g", "Empty", 0) is False
    assert _should_print("g", "PreparingRebalance", 2) is True
    assert _should_print("g", "Dead", 1) is False
    got = capsys.readouterr()
    assert got.err == (
        "\nConsumer group 'g' has no active members.\n"
        "\nWarning: Consumer group 'g' is rebalancing.\n"
    )
    # printError: stdout, after a blank line
    assert got.out == "\nError: Consumer group 'g' does not exist.\n"


def test_kafka_tables_as_prettyprinttable() -> None:
    from kt.tools.console import kafka_table

    assert kafka_table(["TransactionalId", "Coordinator"], [["payments-1", 1], ["p", None]]) == (
        "TransactionalId\tCoordinator\t\n"
        "payments-1     \t1          \t\n"
        "p              \tNone       \t\n"
    )


def test_kafka_metadata_shell_runs_kt_metadata_shell(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from kraft_fixtures import incident_log

    from kt.tools.compat_tools import run_tool

    incident = incident_log(tmp_path)
    # MetadataShellTool's command line: -s/--snapshot, then the command
    assert run_tool("kafka-metadata-shell.sh", ["-s", str(incident.directory), "ls", "/image"]) == 0
    listed = capsys.readouterr().out.split()
    assert "topics" in listed and "cluster" in listed
    assert run_tool("kafka-metadata-shell", ["ls", "/image"]) == 1
    assert "--snapshot must be specified" in capsys.readouterr().err


def test_every_refused_option_names_why() -> None:
    from click.testing import CliRunner

    from kt.cli import cli

    for tool in TOOLS.values():
        for name, why in {**tool.spec.unsupported, **tool.spec.refused}.items():
            assert why.strip(), f"{tool.name} --{name}"
    listed = CliRunner().invoke(cli, ["compat", "list", "kafka-acls"]).output.splitlines()
    assert "--topic VALUE\tsupported" in listed
    assert any(line.startswith("--authorizer-properties\trefused: ") for line in listed)
    assert not any(line.startswith("--authorizer VALUE\tsupported") for line in listed)


def test_storage_info_lists_an_unreadable_directory_without_a_traceback(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import os

    # stat fails with EACCES under `locked` (root ignores chmod 000, so fake it)
    locked, readable = tmp_path / "locked", tmp_path / "readable"
    (locked / "x").mkdir(parents=True)
    readable.mkdir()
    (readable / "meta.properties").write_text("version=0\nbroker.id=1\ncluster.id=c\n")
    real_stat = os.stat

    def stat(path: object, *args: object, **kwargs: object) -> os.stat_result:
        if str(path).startswith(str(locked) + os.sep):
            raise PermissionError(13, "Permission denied", str(path))
        return real_stat(path, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(os, "stat", stat)
    # Java's Files.isDirectory/exists answer false when stat fails: StorageTool lists it
    text, code = storage_info([str(locked / "x")], kraft=False)
    assert (text, code) == (f"Found problem:\n  {locked / 'x'} does not exist\n\n", 1)

    # a meta.properties that cannot be read is one problem line, not a traceback
    meta = readable / "meta.properties"
    real_read = Path.read_bytes

    def read_bytes(self: Path) -> bytes:
        if self == meta:
            raise PermissionError(13, "Permission denied", str(self))
        return real_read(self)

    monkeypatch.setattr(Path, "read_bytes", read_bytes)
    text, code = storage_info([str(readable)], kraft=False)
    assert code == 1
    assert text.endswith(f"Found problem:\n  Error loading {meta}: Permission denied\n\n")


def run_compat(capsys: pytest.CaptureFixture[str], tool: str, *argv: str) -> tuple[int, str, str]:
    from kt.tools.compat_tools import run_tool

    code = run_tool(tool, list(argv))
    got = capsys.readouterr()
    return code, got.out, got.err


@pytest.mark.parametrize(
    ("tool", "argv", "word"),
    [
        ("kafka-features", ["describe", "--feature", "a=1"], "--feature"),
        ("kafka-features", ["describe", "--metadata=3.7"], "--metadata=3.7"),
        ("kafka-features", ["describe", "--dry-run", "--feature", "a=1"], "--dry-run"),
        ("kafka-features", ["disable", "--metadata", "3.7", "--feature", "a"], "--metadata"),
        ("kafka-features", ["upgrade", "--unsafe", "--feature", "a=1"], "--unsafe"),
        ("kafka-storage", ["random-uuid", "--config", "s.properties"], "--config"),
        ("kafka-storage", ["random-uuid", "-t", "id"], "-t"),
        ("kafka-storage", ["info", "-c", "s.properties", "-g"], "-g"),
    ],
)
def test_subcommands_refuse_options_they_lack_as_argparse4j_does(
    capsys: pytest.CaptureFixture[str], tool: str, argv: list[str], word: str
) -> None:
    # the subparser has no such option: parseArgs stops at the first one, nothing runs
    connect = ["--bootstrap-server", "127.0.0.1:1"] if tool == "kafka-features" else []
    code, out, err = run_compat(capsys, tool, *connect, *argv)
    assert (code, out) == (1, "")
    assert err == f"kt: error: {tool}: unrecognized arguments: '{word}'\n"


@pytest.mark.parametrize("option", ["add-config", "delete-config", "add-config-file"])
def test_kafka_configs_describe_refuses_alterations(
    capsys: pytest.CaptureFixture[str], option: str
) -> None:
    code, out, err = run_compat(
        capsys, "kafka-configs", "--bootstrap-server", "127.0.0.1:1", "--describe",
        "--entity-type", "topics", "--entity-name", "t", f"--{option}", "x",
    )  # fmt: skip
    assert (code, out) == (1, "")
    assert err == (
        f'kt: error: kafka-configs: Option "[describe]" can\'t be used with option "[{option}]"\n'
    )


def test_kafka_configs_add_config_file_values_go_through_verbatim(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from kt.client import OP_SET
    from kt.tools.wire import Wire

    sent: list[list[tuple[str, int, str | None]]] = []

    class Client:
        async def topic(self, name: str) -> None:
            return None

        async def incremental_alter_configs(
            self, rtype: int, name: str, ops: list[tuple[str, int, str | None]]
        ) -> None:
            sent.append(ops)

    def run(self: Wire, go: object) -> object:
        import asyncio

        return asyncio.run(go(Client()))  # type: ignore[operator]

    monkeypatch.setattr(Wire, "run", run)
    # Utils.loadProps: a value is whatever follows the separator, brackets and commas too
    props = tmp_path / "topic.properties"
    props.write_text("a=[x]\nb=a],b\ncleanup.policy=compact,delete\n")
    code, out, err = run_compat(
        capsys, "kafka-configs", "--bootstrap-server", "127.0.0.1:1", "--alter",
        "--entity-type", "topics", "--entity-name", "t", "--add-config-file", str(props),
        "--add-config", "retention.ms=1",
    )  # fmt: skip
    assert (code, out, err) == (0, "Completed updating config for topic t.\n", "")
    assert sent == [
        [("a", OP_SET, "[x]"), ("b", OP_SET, "a],b"), ("cleanup.policy", OP_SET, "compact,delete"),
         ("retention.ms", OP_SET, "1")]
    ]  # fmt: skip
