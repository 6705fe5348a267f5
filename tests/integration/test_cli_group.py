"""kt consume --group, kt group list|describe|delete|reset-offsets against a real broker,
and the client's group membership (two members, range assignment, rebalance)."""

from __future__ import annotations

import asyncio
import json
import subprocess
import time
from collections.abc import Iterator
from typing import Any

import pytest
from click.testing import CliRunner, Result

from kt.cli import cli

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    from broker_harness import BrokerProcess, free_port

    b = BrokerProcess(tmp_path_factory.mktemp("grp") / "data", free_port()).start()
    yield b
    b.kill()


def kt(broker: Any, *args: str, input: bytes | None = None) -> Result:
    return CliRunner().invoke(cli, [*args, "-b", broker.bootstrap], input=input)


def ok(result: Result) -> Result:
    assert result.exit_code == 0, (result.stdout, result.stderr)
    return result


def offsets_table(broker: Any, group: str) -> dict[tuple[str, int], list[str]]:
    out = ok(kt(broker, "group", "describe", "--group", group)).stdout.splitlines()
    assert out[0].split() == ["GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET",
                              "LAG", "CONSUMER-ID", "HOST", "CLIENT-ID"]  # fmt: skip
    # Piped: kafka-consumer-groups.sh's rows alone (the total is for a terminal).
    assert not any(line.startswith("TOTAL LAG") for line in out)
    return {(r.split()[1], int(r.split()[2])): r.split()[3:] for r in out[1:]}


def test_total_lag_line_only_on_a_terminal(broker: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    ok(kt(broker, "topic", "create", "--topic", "lagt", "--partitions", "1"))
    ok(kt(broker, "produce", "lagt", input=b"a\nb\nc\n"))
    ok(kt(broker, "consume", "lagt", "-G", "lagg", "-o", "beginning", "-c", "1"))
    assert offsets_table(broker, "lagg") == {("lagt", 0): ["1", "3", "2", "-", "-", "-"]}
    js = json.loads(ok(kt(broker, "group", "describe", "--group", "lagg", "--json")).stdout)
    assert js["total_lag"] == 2
    monkeypatch.setattr("kt.tools.console.stdout_is_terminal", lambda: True)
    monkeypatch.setattr("kt.tools.group_cmd.stdout_is_terminal", lambda: True)
    shown = ok(kt(broker, "group", "describe", "--group", "lagg")).stdout.splitlines()
    assert shown[-1] == "TOTAL LAG: 2"
    assert any("lagt" in line and "CURRENT-OFFSET" not in line for line in shown)


def test_group_consume_commits_visible_in_describe_and_reset(broker: Any) -> None:
    ok(kt(broker, "topic", "create", "--topic", "gt", "--partitions", "2"))
    ok(kt(broker, "produce", "gt", "-p", "0", input=b"".join(b"a%d\n" % i for i in range(6))))
    ok(kt(broker, "produce", "gt", "-p", "1", input=b"b0\nb1\n"))
    # First run: 5 records from the beginning, committed exactly where it stopped.
    first = ok(kt(broker, "consume", "gt", "-G", "g1", "-o", "beginning", "-c", "5"))
    assert len(first.stdout.splitlines()) == 5
    table = offsets_table(broker, "g1")
    assert sum(int(v[0]) for v in table.values()) == 5
    assert {k: v[1] for k, v in table.items()} == {("gt", 0): "6", ("gt", 1): "2"}
    # Second run resumes from the commits and drains the rest.
    second = ok(kt(broker, "consume", "gt", "-G", "g1", "-e"))
    assert sorted(first.stdout.split() + second.stdout.split()) == sorted(
        [f"a{i}" for i in range(6)] + ["b0", "b1"]
    )
    table = offsets_table(broker, "g1")
    assert table == {("gt", 0): ["6", "6", "0", "-", "-", "-"],
                     ("gt", 1): ["2", "2", "0", "-", "-", "-"]}  # fmt: skip
    js = json.loads(ok(kt(broker, "group", "describe", "--group", "g1", "--json")).stdout)
    assert js["state"] == "Empty" and js["total_lag"] == 0

    assert "g1" in ok(kt(broker, "group", "list")).stdout.split()
    states = ok(kt(broker, "group", "list", "--state")).stdout.splitlines()
    assert ["g1", "Empty"] in [line.split() for line in states]

    # reset-offsets: the default is a dry run that commits nothing.
    plan = ok(kt(broker, "group", "reset-offsets", "--group", "g1", "--topic", "gt",
                 "--to-earliest"))  # fmt: skip
    assert plan.stdout.splitlines()[1:] == ["g1       gt       0            0",
                                            "g1       gt       1            0"]  # fmt: skip
    assert offsets_table(broker, "g1")[("gt", 0)][0] == "6"
    shifted = json.loads(ok(kt(broker, "group", "reset-offsets", "--group", "g1", "--all-topics",
                               "--shift-by", "-4", "--execute", "--json")).stdout)  # fmt: skip
    assert [(x["partition"], x["new_offset"]) for x in shifted] == [(0, 2), (1, 0)]
    assert offsets_table(broker, "g1")[("gt", 0)][:3] == ["2", "6", "4"]
    ok(kt(broker, "group", "reset-offsets", "--group", "g1", "--topic", "gt:1", "--to-offset",
          "99", "--execute"))  # fmt: skip
    assert offsets_table(broker, "g1")[("gt", 1)][0] == "2"  # clamped to the log end
    ok(kt(broker, "group", "reset-offsets", "--group", "g1", "--topic", "gt", "--to-datetime",
          "2000-01-01T00:00:00", "--execute"))  # fmt: skip
    assert offsets_table(broker, "g1")[("gt", 0)][0] == "0"
    assert ok(kt(broker, "consume", "gt", "-G", "g1", "-e")).stdout.count("\n") == 8

    assert "successful" in ok(kt(broker, "group", "delete", "--group", "g1")).stdout
    r = kt(broker, "group", "describe", "--group", "g1")
    assert r.exit_code == 1 and "does not exist" in r.stderr


def test_reset_refuses_active_group_and_usage_errors(broker: Any) -> None:
    from broker_harness import KT

    ok(kt(broker, "produce", "act", input=b"x\n"))
    proc = subprocess.Popen([KT, "consume", "act", "-G", "busy", "-b", broker.bootstrap],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)  # fmt: skip
    try:
        for _ in range(100):
            r = kt(broker, "group", "describe", "--group", "busy", "--json")
            if r.exit_code == 0 and json.loads(r.stdout)["state"] == "Stable":
                break
            time.sleep(0.1)
        members = ok(kt(broker, "group", "describe", "--group", "busy", "--members"))
        assert members.stdout.splitlines()[1].split()[0] == "busy"
        assert members.stdout.splitlines()[1].split()[-1] == "1"
        r = kt(broker, "group", "reset-offsets", "--group", "busy", "--topic", "act",
               "--to-earliest", "--execute")  # fmt: skip
        assert r.exit_code == 1 and "inactive" in r.stderr and "Stable" in r.stderr
        r = kt(broker, "group", "delete", "--group", "busy")
        assert r.exit_code == 1 and "not empty" in r.stderr
    finally:
        proc.terminate()
        assert proc.wait(timeout=20) == 0

    def usage(*args: str) -> None:
        r = kt(broker, "group", *args)
        assert r.exit_code == 2, r.stderr

    usage("reset-offsets", "--group", "busy", "--topic", "act")
    usage("reset-offsets", "--group", "busy", "--to-latest")
    usage("reset-offsets", "--group", "busy", "--topic", "act", "--to-latest", "--to-earliest")
    usage("reset-offsets", "--group", "b", "--topic", "act", "--to-datetime", "yesterday")
    usage("describe")
    assert kt(broker, "consume", "act", "-G", "x", "-p", "0").exit_code == 2


def test_two_members_split_partitions_with_the_range_assignor(broker: Any) -> None:
    from kt.client import KafkaClient, NewTopic

    async def go() -> None:
        async with KafkaClient(broker.bootstrap) as c1, KafkaClient(broker.bootstrap) as c2:
            await c1.create_topics([NewTopic("ranged", 4, 1)])
            m1 = c1.group_member("pair", ["ranged"], heartbeat_interval_ms=200)
            await m1.join()
            assert m1.assignment == [("ranged", p) for p in range(4)] and m1.is_leader
            m2 = c2.group_member("pair", ["ranged"], heartbeat_interval_ms=200)
            join2 = asyncio.create_task(m2.join())
            for _ in range(100):  # m1 learns of the rebalance from its heartbeat
                if m1.rejoin_needed:
                    break
                await asyncio.sleep(0.05)
            assert m1.rejoin_needed
            await asyncio.gather(m1.join(), join2)
            assert sorted(m1.assignment + m2.assignment) == [("ranged", p) for p in range(4)]
            assert len(m1.assignment) == len(m2.assignment) == 2
            await m1.commit({("ranged", 0): 0} if ("ranged", 0) in m1.assignment else {})
            (desc,) = await c1.describe_groups(["pair"])
            assert desc.state == "Stable" and len(desc.members) == 2
            await m2.leave()
            await m1.leave()
            (desc,) = await c1.describe_groups(["pair"])
            assert desc.state == "Empty"

    asyncio.run(go())
