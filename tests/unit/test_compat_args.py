"""Kafka tool command lines parsed as joptsimple parses them, and translated to kt's
consumer format."""

from __future__ import annotations

import base64

import pytest

from kt.tools.compat_acls import ACLS, check, exception_line
from kt.tools.compat_args import (
    Arity,
    CompatUsageError,
    Parsed,
    Spec,
    UnrecognizedOption,
    UnsupportedOption,
    parse,
)
from kt.tools.compat_tools import TOOLS, MessageFormat, tool_name

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
