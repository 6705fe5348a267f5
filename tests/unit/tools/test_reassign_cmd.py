"""kafka-reassign-partitions.sh's files and lines: plan parsing and checks, the
single-line sorted plan format, --generate (Kafka's placement, --minimal-movement),
--verify / --list lines, --progress rates, and usage errors before any connection."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import click
import pytest
from click.testing import CliRunner
from hypothesis import given
from hypothesis import strategies as st

from kt.admin.reassign_plan import (
    PlanError,
    check_plan,
    format_plan,
    generate,
    generate_minimal,
    moved_replicas,
    parse_log_dirs,
    parse_plan,
    parse_topics,
    throttle_lists,
)
from kt.admin.reassignment import ReplicaProgress, move_statuses, verify_statuses, with_rates
from kt.cli import cli
from kt.client import LogDirInfo, LogDirPartition, PartitionReassignment
from kt.cluster.assignment import BrokerMetadata
from kt.protocol import ErrorCode
from kt.tools.reassign_cmd import list_line, move_line, progress_line, verify_line


def test_plan_format_is_kafkas_single_line_sorted_with_log_dirs():
    plan = {("foo", 1): [2, 3], ("bar", 0): [1], ("foo", 0): [0, 1, 3]}
    assert format_plan(plan) == (
        '{"version":1,"partitions":[{"topic":"bar","partition":0,"replicas":[1],'
        '"log_dirs":["any"]},{"topic":"foo","partition":0,"replicas":[0,1,3],'
        '"log_dirs":["any","any","any"]},{"topic":"foo","partition":1,"replicas":[2,3],'
        '"log_dirs":["any","any"]}]}'
    )


@given(
    st.dictionaries(
        st.tuples(st.text(min_size=1, max_size=5), st.integers(0, 50)),
        st.lists(st.integers(0, 20), min_size=1, max_size=4, unique=True),
        min_size=1,
    )
)
def test_plan_round_trips(plan: dict[tuple[str, int], list[int]]) -> None:
    assert parse_plan(format_plan(plan)) == plan


def test_plan_log_dirs_optional_on_input():
    assert parse_plan(
        '{"version":1,"partitions":[{"topic":"t","partition":0,"replicas":[1]}]}'
    ) == {("t", 0): [1]}


@pytest.mark.parametrize(
    "text, message",
    [
        ("{not json", "reassignment file is not valid JSON"),
        ('{"version":2,"partitions":[]}', "Not supported version field value 2"),
        ('{"version":1,"partitions":[]}', "Partition reassignment list cannot be empty"),
        ('{"version":1}', "reassignment file: expected"),
        ('{"version":1,"partitions":[{"topic":"t","partition":"0","replicas":[1]}]}',
         "bad partition entry"),
        ('{"version":1,"partitions":[{"topic":"t","partition":0,"replicas":[1]},'
         '{"topic":"t","partition":0,"replicas":[2]}]}',
         "Partition reassignment contains duplicate topic partitions: t-0"),
        ('{"version":1,"partitions":[{"topic":"t","partition":0,"replicas":[1,1]}]}',
         "Partition replica lists may not contain duplicate entries: t-0 contains 1"),
        ('{"version":1,"partitions":[{"topic":"t","partition":0,"replicas":[1],'
         '"log_dirs":[7]}]}', 'must be directory paths or "any"'),
        ('{"version":1,"partitions":[{"topic":"t","partition":0,"replicas":[1],'
         '"log_dirs":["/d","/e"]}]}', "must list one directory per replica"),
    ],
)  # fmt: skip
def test_malformed_plans(text: str, message: str) -> None:
    with pytest.raises(PlanError, match=None) as e:
        parse_plan(text)
    assert message in str(e.value)


def test_plan_checked_against_the_cluster():
    plan = {("t", 0): [1, 2]}
    check_plan(plan, {"t": [0, 1]}, [1, 2, 3])
    with pytest.raises(PlanError, match="non-existent partitions: t-0"):
        check_plan(plan, {"u": [0]}, [1, 2])
    with pytest.raises(PlanError, match="non-existent brokerIDs: 2"):
        check_plan(plan, {"t": [0]}, [1, 3])


def test_topics_file():
    assert parse_topics('{"topics":[{"topic":"foo"},{"topic":"bar"}],"version":1}') == [
        "foo",
        "bar",
    ]
    with pytest.raises(PlanError):
        parse_topics('{"topics":[]}')


def test_generate_uses_kafkas_placement_and_keeps_the_replication_factor():
    current = {("t", 0): [1, 2], ("t", 1): [2, 1], ("t", 2): [1, 2]}
    brokers = [BrokerMetadata(b) for b in (2, 3, 4)]
    plan = generate(current, brokers, start_index=0)
    assert plan == {("t", 0): [2, 3], ("t", 1): [3, 4], ("t", 2): [4, 2]}
    racked = [BrokerMetadata(2, "a"), BrokerMetadata(3, "a"), BrokerMetadata(4, "b")]
    for rs in generate(current, racked).values():
        assert {dict((b.id, b.rack) for b in racked)[r] for r in rs} == {"a", "b"}


def test_generate_minimal_movement_moves_only_what_it_must():
    current = {("t", 0): [1, 2], ("t", 1): [2, 1], ("t", 2): [1, 3]}
    brokers = [BrokerMetadata(b) for b in (2, 3, 4)]
    plan = generate_minimal(current, brokers)
    assert plan[("t", 0)][0] == 2 and plan[("t", 1)][0] == 2  # kept replicas stay first
    assert plan[("t", 2)][0] == 3
    assert all(1 not in rs and len(set(rs)) == 2 for rs in plan.values())
    assert moved_replicas(current, plan) == 3  # one per partition: only broker 1 leaves
    with pytest.raises(PlanError, match="larger than available brokers"):
        generate_minimal({("t", 0): [1, 2, 3]}, brokers[:2])


def test_verify_and_list_lines_are_kafkas():
    plan = {("foo", 0): [3, 4], ("foo", 1): [1, 2], ("foo", 2): [3, 4]}
    current = {("foo", 0): [3, 4, 1, 2], ("foo", 1): [1, 2], ("foo", 2): [1, 2]}
    running = {("foo", 0): PartitionReassignment("foo", 0, [3, 4, 1, 2], [3, 4], [1, 2])}
    lines = [verify_line(s) for s in verify_statuses(plan, current, running)]
    assert lines == [
        "Reassignment of partition foo-0 is still in progress.",
        "Reassignment of partition foo-1 is completed.",
        "There is no active reassignment of partition foo-2, but replica set is 1,2 rather "
        "than 3,4.",
    ]
    assert list_line(running[("foo", 0)]) == (
        "foo-0: replicas: 3,4,1,2. adding: 3,4. removing: 1,2."
    )


def test_plan_log_dirs_are_replica_moves():
    text = json.dumps({"version": 1, "partitions": [
        {"topic": "foo", "partition": 0, "replicas": [1, 2], "log_dirs": ["/d/b", "any"]},
        {"topic": "foo", "partition": 1, "replicas": [2]},
    ]})  # fmt: skip
    assert parse_plan(text) == {("foo", 0): [1, 2], ("foo", 1): [2]}
    assert parse_log_dirs(text) == {("foo", 0, 1): "/d/b"}


def test_replica_move_lines_are_kafkas():
    def part(t: str, p: int, future: bool = False) -> LogDirPartition:
        return LogDirPartition(t, p, 10, 0, future)

    dirs = [
        LogDirInfo(0, "/l0", ErrorCode.NONE, [part("bar", 0), part("foo", 0), part("quux", 1)]),
        LogDirInfo(0, "/l1", ErrorCode.NONE, [part("foo", 0, True), part("foo", 1)]),
        LogDirInfo(0, "/l2", ErrorCode.NONE, [part("quux", 1, True)]),
        LogDirInfo(1, "/l0", ErrorCode.KAFKA_STORAGE_ERROR, []),
    ]
    moves = {("bar", 0, 0): "/l0", ("foo", 0, 0): "/l1", ("foo", 1, 0): "/l0",
             ("quux", 0, 0): "/l1", ("quux", 1, 0): "/l1", ("quux", 2, 1): "/l1"}  # fmt: skip
    states = move_statuses(moves, dirs)
    assert [m.done for m in states] == [True, False, True, True, False, True]
    assert [move_line(m) for m in states] == [
        "Reassignment of replica bar-0-0 completed successfully.",
        "Reassignment of replica foo-0-0 is still in progress.",
        "Partition foo-1 on broker 0 is not being moved from log dir /l1 to /l0.",
        "Partition quux-0 cannot be found in any live log directory on broker 0.",
        "Partition quux-1 on broker 0 is being moved to log dir /l2 instead of /l1.",
        "Partition quux-2 is not found in any live log dir on broker 1. There is likely an "
        "offline log directory on the broker.",
    ]


def test_progress_rate_and_eta():
    before = [ReplicaProgress("t-0", 3, 1000, 5000)]
    now = [ReplicaProgress("t-0", 3, 3000, 5000)]
    now = with_rates(now, before, 2.0)
    assert now[0].rate == 1000 and now[0].eta_s == 2 and now[0].remaining == 2000
    assert progress_line(now[0]) == (
        "t-0 broker 3: copied 3000 of 5000 bytes (60.0%), remaining 2000 bytes, "
        "rate 1000 B/s, eta 2s"
    )


def test_finished_replicas_are_reported_completed_or_cancelled():
    """--watch's last word on a replica whose reassignment ended: completed with the
    new replica's size when the broker holds it, cancelled (0 bytes) when not."""
    from types import SimpleNamespace as NS

    from kt.admin.reassignment import sample_finished

    class FakeClient:
        metadata = NS(brokers={1: None, 2: None, 3: None})

        async def describe_topics(self, topics):  # type: ignore[no-untyped-def]
            assert topics == ["t"]
            return {"t": NS(partitions={0: NS(leader=1, replicas=[1, 2]),
                                        1: NS(leader=1, replicas=[1])})}  # fmt: skip

        async def describe_log_dirs(self, brokers, wanted):  # type: ignore[no-untyped-def]
            assert brokers == [1, 2, 3] and wanted == {"t": [0, 1]}
            lp = lambda p, size, future=False: NS(  # noqa: E731
                topic="t", partition=p, size=size, is_future=future
            )
            return [NS(broker=1, partitions=[lp(0, 900), lp(1, 400)]),
                    NS(broker=2, partitions=[lp(0, 900), lp(0, 5, True)]),
                    NS(broker=3, partitions=[lp(1, 120)])]  # fmt: skip

    gone = [ReplicaProgress("t-0", 2, 800, 900), ReplicaProgress("t-1", 3, 100, 400)]
    rows = asyncio.run(sample_finished(FakeClient(), gone))  # type: ignore[arg-type]
    assert [(x.partition, x.broker, x.copied, x.total, x.state) for x in rows] == [
        ("t-0", 2, 900, 900, "completed"),
        ("t-1", 3, 0, 400, "cancelled"),
    ]
    assert progress_line(rows[0]) == "t-0 broker 2: completed, 900 of 900 bytes"
    assert progress_line(rows[1]) == "t-1 broker 3: cancelled, 0 of 400 bytes"
    # rates keep the state (with_rates returns new rows)
    assert with_rates(rows, gone, 1.0)[1].state == "cancelled"


def run(*args: str):  # type: ignore[no-untyped-def]
    # an unreachable bootstrap: these must fail before connecting
    return CliRunner().invoke(cli, ["reassign-partitions", "-b", "127.0.0.1:1", *args])


def test_usage_errors_exit_2_in_one_line(tmp_path: Path) -> None:
    r = run()
    assert r.exit_code == 2 and "exactly one action" in r.stderr
    r = run("--execute")
    assert r.exit_code == 2 and "--reassignment-json-file" in r.stderr
    bad = tmp_path / "bad.json"
    bad.write_text("{oops")
    r = run("--execute", "--reassignment-json-file", str(bad))
    assert r.exit_code == 2 and len(r.stderr.strip().splitlines()) == 1
    bad.write_text(json.dumps({"version": 3, "partitions": []}))
    r = run("--verify", "--reassignment-json-file", str(bad))
    assert r.exit_code == 2 and "Not supported version field value 3" in r.stderr
    r = run("--execute", "--reassignment-json-file", str(tmp_path / "missing.json"))
    assert r.exit_code == 2


def test_throttle_lists_are_kafkas():
    current = {("foo", 0): [1, 2], ("foo", 1): [2, 3], ("bar", 0): [1]}
    plan = {("foo", 0): [3, 2], ("foo", 1): [2, 3], ("bar", 0): [4]}
    lists, brokers = throttle_lists(current, plan)
    assert lists == {
        "bar": {"leader.replication.throttled.replicas": "0:1",
                "follower.replication.throttled.replicas": "0:4"},
        "foo": {"leader.replication.throttled.replicas": "0:1,0:2",
                "follower.replication.throttled.replicas": "0:3"},
    }  # fmt: skip
    assert brokers == [1, 2, 3, 4]  # foo-1 does not move: not involved


def test_command_config_is_read_and_unsupported_properties_refused(tmp_path: Path) -> None:
    props = tmp_path / "admin.properties"

    def invoke(text: str, *args: str):  # type: ignore[no-untyped-def]
        props.write_text(text)
        return CliRunner().invoke(
            cli, ["reassign-partitions", "--list", "--command-config", str(props), *args],
            env={"KT_BOOTSTRAP_SERVER": None},
        )  # fmt: skip

    # the file's bootstrap.servers is the one tried (nothing listens on port 1) ...
    r = invoke("# ops\nbootstrap.servers=127.0.0.1:1\nclient.id=ops\nrequest.timeout.ms=2000\n"
               "security.protocol=PLAINTEXT\n")  # fmt: skip
    assert r.exit_code == 1 and "127.0.0.1:1" in r.stderr, r.stderr
    # ... unless --bootstrap-server is given, which wins, as in Kafka's tools
    r = invoke("bootstrap.servers=127.0.0.1:1\n", "-b", "127.0.0.1:2", "--timeout", "2")
    assert r.exit_code == 1 and "127.0.0.1:2" in r.stderr and "127.0.0.1:1" not in r.stderr
    for text, message in [
        ("bootstrap.servers=127.0.0.1:1\nsasl.login.class=x.Y\n",
         "unsupported property sasl.login.class"),
        ("security.protocol=SSLv3\n", "security.protocol=SSLv3: expected one of"),
        ("security.protocol=SASL_SSL\n", "needs sasl.mechanism"),
        ("request.timeout.ms=soon\n", "request.timeout.ms=soon: not a positive integer"),
    ]:  # fmt: skip
        r = invoke(text)
        assert r.exit_code == 2, r.stderr
        assert len(r.stderr.strip().splitlines()) == 1 and message in r.stderr, r.stderr
    r = CliRunner().invoke(cli, ["reassign-partitions", "--list", "--command-config",
                                 str(tmp_path / "none.properties")])  # fmt: skip
    assert r.exit_code == 2 and "no such file" in r.stderr


def test_command_config_sets_the_client_id_and_timeout(tmp_path: Path) -> None:
    from click.testing import CliRunner as Runner

    from kt.tools.wire import Wire, wire_options

    props = tmp_path / "admin.properties"
    props.write_text("bootstrap.servers=h:1\nclient.id=ops\nrequest.timeout.ms=5000\n"
                     "default.api.timeout.ms=60000\n")  # fmt: skip
    seen: list[Wire] = []

    @click.command()
    @wire_options
    def cmd(wire: Wire) -> None:
        seen.append(wire)

    env = {"KT_BOOTSTRAP_SERVER": None, "KT_PROFILE": None}
    assert Runner().invoke(cmd, ["--command-config", str(props)], env=env).exit_code == 0
    assert seen[-1] == Wire("h:1", 60.0, "ops")
    r = Runner().invoke(cmd, ["--command-config", str(props), "--timeout", "3"], env=env)
    assert r.exit_code == 0
    assert seen[-1] == Wire("h:1", 3.0, "ops")
