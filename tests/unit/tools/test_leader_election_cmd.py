"""`kt leader-election`: kafka-leader-election.sh's output lines and exit status, the
JSON file's errors; `kt topic describe --under-preferred-replica-partitions` and the
leader balance of `kt cluster describe` on hand-made metadata."""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from kt.cli import cli
from kt.client import KafkaError, PartitionInfo, TopicInfo
from kt.protocol import ErrorCode
from kt.tools import leader_election_cmd
from kt.tools.cluster_cmd import broker_loads
from kt.tools.leader_election_cmd import (
    ElectionFileError,
    ElectionOutcome,
    parse_election_json,
)
from kt.tools.topic_cmd import PartitionFilter, describe_topic

NOT_AVAILABLE = KafkaError(
    ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE,
    "foo-3",
    "Failed to elect leader for partition foo-3 under strategy "
    "PreferredReplicaPartitionLeaderElectionStrategy",
)
RESULTS: dict[tuple[str, int], KafkaError | None] = {
    ("foo", 1): None,
    ("foo", 0): None,
    ("foo", 2): KafkaError(ErrorCode.ELECTION_NOT_NEEDED, "foo-2"),
    ("foo", 3): NOT_AVAILABLE,
}


def test_kafka_lines() -> None:
    assert ElectionOutcome.of("preferred", RESULTS).lines() == [
        "Successfully completed leader election (PREFERRED) for partitions foo-0, foo-1",
        "Valid replica already elected for partitions foo-2",
        "Error completing leader election (PREFERRED) for partition: foo-3: "
        "org.apache.kafka.common.errors.PreferredLeaderNotAvailableException: Failed to elect "
        "leader for partition foo-3 under strategy PreferredReplicaPartitionLeaderElectionStrategy",
    ]


def test_exception_names_follow_kafka() -> None:
    unknown = KafkaError(
        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "x-0", "The partition does not exist."
    )
    timeout = KafkaError(ErrorCode.REQUEST_TIMED_OUT, "x-0")
    lines = ElectionOutcome.of("unclean", {("x", 0): unknown, ("y", 0): timeout}).lines()
    assert lines[0].endswith(
        "(UNCLEAN) for partition: x-0: org.apache.kafka.common.errors."
        "UnknownTopicOrPartitionException: The partition does not exist."
    )
    assert "y-0: org.apache.kafka.common.errors.TimeoutException: " in lines[1]


def test_nothing_printed_when_nothing_was_elected() -> None:
    assert ElectionOutcome.of("preferred", {}).lines() == []


@pytest.fixture
def fake_cluster(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """The command's elect_leaders call answered from RESULTS; records its arguments."""
    calls: list[Any] = []

    class FakeClient:
        async def elect_leaders(self, election_type: int, partitions: Any) -> Any:
            calls.append((election_type, partitions))
            if partitions is None:
                return dict(RESULTS)
            return {tp: RESULTS.get(tp) for tp in partitions}

    def run(self: Any, func: Any) -> Any:
        import asyncio

        return asyncio.run(func(FakeClient()))

    monkeypatch.setattr(leader_election_cmd.Wire, "run", run)
    return calls


def invoke(*args: str) -> Any:
    return CliRunner().invoke(cli, ["leader-election", *args])


def test_cli_output_and_exit_status(fake_cluster: list[Any]) -> None:
    r = invoke("--election-type", "preferred", "--all-topic-partitions")
    assert r.exit_code == 1
    assert r.stdout.splitlines()[:2] == [
        "Successfully completed leader election (PREFERRED) for partitions foo-0, foo-1",
        "Valid replica already elected for partitions foo-2",
    ]
    assert r.stderr == "kt: error: 1 replica(s) could not be elected\n"
    assert fake_cluster == [(0, None)]


def test_cli_one_partition_success(fake_cluster: list[Any]) -> None:
    r = invoke("--election-type", "UNCLEAN", "--topic", "foo", "--partition", "1")
    assert (r.exit_code, r.stdout) == (
        0,
        "Successfully completed leader election (UNCLEAN) for partitions foo-1\n",
    )
    assert fake_cluster == [(1, [("foo", 1)])]


def test_cli_json(fake_cluster: list[Any], tmp_path: Path) -> None:
    f = tmp_path / "e.json"
    f.write_text('{"partitions":[{"topic":"foo","partition":2},{"topic":"foo","partition":3}]}')
    r = invoke("--election-type", "preferred", "--path-to-json-file", str(f), "--json")
    assert r.exit_code == 1
    doc = json.loads(r.stdout)
    assert doc["succeeded"] == [] and doc["not_needed"] == [{"topic": "foo", "partition": 2}]
    assert doc["failed"][0]["error"] == "PREFERRED_LEADER_NOT_AVAILABLE"
    assert fake_cluster == [(0, [("foo", 2), ("foo", 3)])]


@pytest.mark.parametrize(
    "args",
    [
        [],
        ["--all-topic-partitions", "--topic", "foo", "--partition", "0"],
        ["--topic", "foo"],
        ["--partition", "0", "--all-topic-partitions"],
    ],
)
def test_cli_option_errors(fake_cluster: list[Any], args: list[str]) -> None:
    r = invoke("--election-type", "preferred", *args)
    assert r.exit_code == 2 and r.stderr.startswith("kt: error: ")
    assert fake_cluster == []


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('{"partitions":[', "not valid JSON"),
        ("null", "Replica election data is empty"),
        ('{"version":1}', 'Replica election data is missing "partitions" field'),
        ('{"partitions":{"topic":"a"}}', '"partitions" must be an array'),
        ('{"partitions":[{"partition":1}]}', '"topic" must be a non-empty string'),
        ('{"partitions":[{"topic":"a","partition":"1"}]}', '"partition" must be an integer'),
        ('{"partitions":[{"topic":"a","partition":-1}]}', '"partition" must be an integer'),
        (
            '{"partitions":[{"topic":"a","partition":1},{"topic":"a","partition":1}]}',
            "Replica election data contains duplicate partitions: a-1",
        ),
    ],
)
def test_malformed_json_file_is_one_usage_error(
    fake_cluster: list[Any], tmp_path: Path, text: str, message: str
) -> None:
    with pytest.raises(ElectionFileError, match=message):
        parse_election_json(text)
    f = tmp_path / "e.json"
    f.write_text(text)
    r = invoke("--election-type", "preferred", "--path-to-json-file", str(f))
    assert r.exit_code == 2
    assert r.stderr.count("\n") == 1 and message in r.stderr
    assert fake_cluster == []


def test_missing_json_file(fake_cluster: list[Any], tmp_path: Path) -> None:
    r = invoke("--election-type", "preferred", "--path-to-json-file", str(tmp_path / "no.json"))
    assert r.exit_code == 2 and "no such file" in r.stderr


def test_json_file_partitions_in_file_order() -> None:
    text = '{"partitions":[{"topic":"b","partition":1},{"topic":"a","partition":0}]}'
    assert parse_election_json(text) == [("b", 1), ("a", 0)]


# --- preferred leaders in topic describe and cluster describe --------------------


def topic(*parts: tuple[int, int, list[int]]) -> TopicInfo:
    infos = {
        p: PartitionInfo("t", p, leader, 1, replicas, replicas) for p, leader, replicas in parts
    }
    return TopicInfo("t", uuid.UUID(int=1), False, infos)


T = topic((0, 1, [1, 2]), (1, 1, [2, 1]), (2, -1, [3, 1]), (3, 3, [3, 1]))


def test_under_preferred_replica_partitions_filter() -> None:
    lines, doc = describe_topic(T, [], {1, 2, 3}, {}, PartitionFilter(under_preferred=True))
    assert [line.split("\t")[2] for line in lines] == ["Partition: 1", "Partition: 2"]
    assert doc is not None and [p["partition"] for p in doc["partitions"]] == [1, 2]


def test_broker_loads_count_preferred_leaders_and_imbalance() -> None:
    loads = broker_loads([T], [1, 2, 3])
    assert (loads[1].leaders, loads[1].preferred, loads[1].imbalance_percent) == (2, 1, 0.0)
    assert (loads[2].leaders, loads[2].preferred, loads[2].imbalance_percent) == (0, 1, 100.0)
    assert (loads[3].preferred, loads[3].preferred_not_led, loads[3].imbalance_percent) == (
        2,
        1,
        50.0,
    )
