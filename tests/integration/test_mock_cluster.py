"""kt against a Kafka implementation nobody here wrote: librdkafka's mock cluster.

confluent-kafka (a test dependency) starts it in this process with
`test.mock.num.brokers`: three brokers on loopback that answer Produce, Fetch,
Metadata, the offset APIs and the group APIs, and lack every admin API. Its
Metadata names controller 0, which is none of its brokers (1, 2, 3). kt's online
commands run against it as real `kt` processes: those the mock can serve must work,
those it cannot must end in one `kt: error:` line naming the API and the broker,
exit 1, and never a traceback or an asyncio warning about pending tasks.
"""

from __future__ import annotations

import asyncio
import re
import subprocess
import sys
from collections.abc import Iterator

import pytest

from kt.client import (
    ControllerUnknownError,
    GroupMember,
    KafkaClient,
    UnsupportedApiError,
)
from kt.protocol import apis

pytestmark = pytest.mark.integration

confluent_kafka = pytest.importorskip("confluent_kafka")

#: What must never appear on kt's stderr, whatever the outcome.
NOISE = (
    "Traceback",
    "Task was destroyed but it is pending",
    "exception was never retrieved",
    "unhandled exception during asyncio.run() shutdown",
    "Exception ignored",
)


@pytest.fixture(scope="module")
def mock() -> Iterator[str]:
    """The mock cluster's bootstrap list; it lives as long as its producer."""
    producer = confluent_kafka.Producer({"test.mock.num.brokers": 3, "log_level": 3})
    md = producer.list_topics(timeout=30)
    assert sorted(md.brokers) == [1, 2, 3]
    # What makes describe's old controller lookup fail: a controller not among them.
    assert md.controller_id not in md.brokers
    yield ",".join(f"{b.host}:{b.port}" for b in md.brokers.values())
    producer.flush(10)
    del producer


def kt(bootstrap: str, *args: str, input: str | None = None) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(
        [sys.executable, "-m", "kt.cli", *args, "-b", bootstrap, "--timeout", "20"],
        input=input,
        capture_output=True,
        text=True,
        timeout=120,
    )
    for noise in NOISE:
        assert noise not in proc.stderr, (args, proc.stderr)
    return proc


def ok(proc: subprocess.CompletedProcess[str]) -> subprocess.CompletedProcess[str]:
    assert proc.returncode == 0, (proc.args, proc.stdout, proc.stderr)
    return proc


@pytest.fixture(scope="module")
def topic(mock: str) -> str:
    """A topic with six records (the mock creates it on first produce)."""
    ok(kt(mock, "produce", "orders", input="".join(f"r{i}\n" for i in range(6))))
    return "orders"


def test_cluster_describe_lists_the_mock_brokers(mock: str) -> None:
    got = ok(kt(mock, "cluster", "describe"))
    rows = [line.split() for line in got.stdout.splitlines()]
    assert sorted(r[0] for r in rows if r and r[0].isdigit()) == ["1", "2", "3"]
    assert "Controller: 0" in got.stdout.splitlines()
    # The mock's controller 0 is none of its brokers: flagged once, on stderr only.
    assert got.stderr.splitlines() == [
        "kt: warning: controller 0 is not among the listed brokers (1,2,3)"
    ]
    js = ok(kt(mock, "cluster", "describe", "--json"))
    assert js.stderr == got.stderr and '"controller":0' in js.stdout


def test_topic_list_and_describe_without_configs(mock: str, topic: str) -> None:
    assert topic in ok(kt(mock, "topic", "list")).stdout.split()
    got = ok(kt(mock, "topic", "describe", "--topic", topic))
    lines = got.stdout.splitlines()
    assert lines[0].startswith(f"Topic: {topic}\t")
    parts = [line for line in lines[1:] if "Partition:" in line]
    assert parts and all("Leader:" in p for p in parts)
    # The configs are missing, and stderr says why, once.
    warning = got.stderr.splitlines()
    assert len(warning) == 1, got.stderr
    assert warning[0].startswith("kt: warning: broker ")
    assert warning[0].endswith("does not support the DescribeConfigs API: configs not shown")


def test_consume_without_a_group(mock: str, topic: str) -> None:
    out = ok(kt(mock, "consume", topic, "-o", "beginning", "-e")).stdout.split()
    assert sorted(out) == [f"r{i}" for i in range(6)]


def test_consume_with_a_group_commits_and_resumes(mock: str, topic: str) -> None:
    # The mock parses only the group API versions librdkafka sends; kt's newer
    # JoinGroup made it close the connection ("connection closed by the broker").
    first = ok(kt(mock, "consume", topic, "-G", "g1", "-o", "beginning", "-c", "4"))
    assert len(first.stdout.split()) == 4
    rest = ok(kt(mock, "consume", topic, "-G", "g1", "-e"))
    assert sorted(first.stdout.split() + rest.stdout.split()) == [f"r{i}" for i in range(6)]


@pytest.mark.parametrize(
    ("args", "api"),
    [
        (("topic", "create", "--topic", "new", "--partitions", "1"), "CreateTopics"),
        (("topic", "delete", "--topic", "orders"), "DeleteTopics"),
        (("group", "list"), "ListGroups"),
        (("group", "describe", "--group", "g1"), "DescribeGroups"),
        (("configs", "describe", "--entity-type", "topics", "--entity-name", "orders"),
         "DescribeConfigs"),
        (("configs", "alter", "--entity-type", "topics", "--entity-name", "orders",
          "--add-config", "retention.ms=1000"),
         # alter reads the current configs first (kafka-configs.sh does too)
         "DescribeConfigs|IncrementalAlterConfigs|AlterConfigs"),
        (("log-dirs", "describe"), "DescribeLogDirs"),
        (("leader-election", "--election-type", "preferred", "--all-topic-partitions"),
         "ElectLeaders"),
    ],
    ids=lambda v: v.split("|")[0] if isinstance(v, str) else " ".join(v[:2]),
)  # fmt: skip
def test_a_missing_api_is_one_error_line(
    mock: str, topic: str, args: tuple[str, ...], api: str
) -> None:
    got = kt(mock, *args)
    assert got.returncode == 1, (got.stdout, got.stderr)
    lines = got.stderr.splitlines()
    assert len(lines) == 1, got.stderr
    assert lines[0].startswith("kt: error: broker "), lines
    assert re.search(rf"\) does not support the ({api}) API \(UNSUPPORTED_VERSION\)$", lines[0])


def test_client_library_against_the_mock(mock: str, topic: str) -> None:
    async def go() -> None:
        async with KafkaClient(mock, retries=2) as c:
            conn = await c.any_connection()
            # Negotiated as librdkafka does: the versions the mock parses.
            assert conn.version_for(apis.JOIN_GROUP) <= 5
            assert conn.version_for(apis.SYNC_GROUP) <= 3
            with pytest.raises(UnsupportedApiError) as unsupported:
                await c.list_groups()
            assert unsupported.value.api_name == "ListGroups"
            assert not unsupported.value.retriable
            # A controller request: the missing API is what is reported...
            with pytest.raises(UnsupportedApiError):
                await c.controller(apis.CREATE_TOPICS)
            # ...and without one, the controller that is not a broker.
            with pytest.raises(ControllerUnknownError, match="names broker 0 as the controller"):
                await c.controller()
            # A group member joins, is assigned every partition, commits.
            member = GroupMember(
                c,
                "lib-group",
                [topic],
                session_timeout_ms=10_000,
                rebalance_timeout_ms=10_000,
                heartbeat_interval_ms=1_000,
                group_instance_id=None,
            )
            assignment = await member.join()
            assert {t for t, _ in assignment} == {topic} and assignment
            await member.commit({tp: 1 for tp in assignment})
            assert set((await member.committed()).values()) == {1}
            await member.leave()
        # Nothing of the client is left running.
        me = asyncio.current_task()
        assert [t for t in asyncio.all_tasks() if t is not me] == []

    asyncio.run(go())
