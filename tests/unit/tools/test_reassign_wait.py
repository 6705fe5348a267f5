"""`kt reassign-partitions --execute --throttle R --clear-throttles-when-done`: usage
errors before any connection, and the wait against a scripted fake client — a plan
that completes clears the throttles and prints --verify's lines (exit 0), one
cancelled by someone else clears them too (exit 1), a signal, --wait-timeout or
lasting client errors leave them in place with one line saying to run --verify
(exit 143 / 130 / 1); passing client errors are retried."""

from __future__ import annotations

import asyncio
import json
import os
import signal
from pathlib import Path
from types import SimpleNamespace as NS
from typing import Any

import click
import pytest
from click.testing import CliRunner, Result

from kt.cli import cli
from kt.client import (
    OP_DELETE,
    RESOURCE_BROKER,
    RESOURCE_TOPIC,
    KafkaConnectionError,
    LogDirInfo,
    LogDirPartition,
)
from kt.client import PartitionReassignment as PR
from kt.protocol import ErrorCode
from kt.tools.reassign_cmd import ProgressDisplay
from kt.tools.reassign_wait import report, wait_then_clear
from kt.tools.wire import Wire

PLAN = {"version": 1, "partitions": [{"topic": "t", "partition": 0, "replicas": [2, 3]}]}


class FakeClient:
    """Partition t-0 moving from [1, 2] to [2, 3]: in progress for `polls` samples of
    the plan, then `end` ("completed": replicas [2, 3]; "cancelled": back to [1, 2]).
    `on_poll(n)` runs at each sample of the plan (e.g. to send a signal)."""

    def __init__(self, polls: int = 2, end: str = "completed", on_poll: Any = None) -> None:
        self.metadata = NS(brokers={1: None, 2: None, 3: None})
        self.polls, self.end, self.on_poll = polls, end, on_poll
        self.started = False
        self.samples = 0
        self.configs: list[tuple[int, str, list[tuple[str, int, str | None]]]] = []

    async def start(self) -> None:
        pass

    async def close(self) -> None:
        pass

    def _running(self) -> bool:
        return self.started and self.samples <= self.polls

    def _replicas(self) -> list[int]:
        if self._running():
            return [2, 3, 1]
        return [2, 3] if self.started and self.end == "completed" else [1, 2]

    async def list_topics(self) -> dict[str, Any]:
        return {"t": NS(partitions={0: None})}

    async def describe_topics(self, topics: list[str]) -> dict[str, Any]:
        return {"t": NS(partitions={0: NS(leader=2, replicas=self._replicas())})}

    async def list_partition_reassignments(self, topics: Any = None) -> dict[Any, PR]:
        if topics is not None and self.started:  # a sample of the plan (plan_state)
            self.samples += 1
            if self.on_poll is not None:
                self.on_poll(self.samples)
        if not self._running():
            return {}
        return {("t", 0): PR("t", 0, [2, 3, 1], [3], [1])}

    async def alter_partition_reassignments(self, targets: Any) -> dict[Any, None]:
        self.started = True
        return {tp: None for tp in targets}

    async def describe_log_dirs(self, brokers: Any, topics: Any) -> list[LogDirInfo]:
        parts = {2: 1000, 3: 400 if self._running() else 1000}
        return [LogDirInfo(b, f"/d{b}", ErrorCode.NONE,
                           [LogDirPartition("t", 0, size, 0, False)])
                for b, size in parts.items()]  # fmt: skip

    async def incremental_alter_configs(self, rtype: int, name: str, ops: Any) -> None:
        self.configs.append((rtype, name, list(ops)))

    def deletes(self) -> list[tuple[int, str]]:
        return [(t, n) for t, n, ops in self.configs if ops and ops[0][1] == OP_DELETE]


def invoke(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, fake: FakeClient | None, *args: str
) -> Result:
    if fake is not None:
        monkeypatch.setattr(Wire, "client", lambda self: fake)
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps(PLAN))
    return CliRunner().invoke(cli, ["reassign-partitions", "-b", "127.0.0.1:1", "--execute",
                                    "--reassignment-json-file", str(plan), *args])  # fmt: skip


def test_usage_errors_before_connecting(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    r = invoke(monkeypatch, tmp_path, None, "--clear-throttles-when-done")
    assert r.exit_code == 2 and "nothing to clear" in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1
    r = invoke(monkeypatch, tmp_path, None, "--throttle", "100", "--wait-timeout", "5")
    assert r.exit_code == 2 and "--wait-timeout needs --clear-throttles-when-done" in r.stderr
    r = CliRunner().invoke(cli, ["reassign-partitions", "-b", "127.0.0.1:1", "--list",
                                 "--clear-throttles-when-done"])  # fmt: skip
    assert r.exit_code == 2 and "with --execute only" in r.stderr
    r = invoke(monkeypatch, tmp_path, None, "--throttle", "1", "--clear-throttles-when-done",
               "--wait-timeout", "0")  # fmt: skip
    assert r.exit_code == 2


def test_completed_plan_clears_the_throttles(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    fake = FakeClient(polls=2)
    r = invoke(monkeypatch, tmp_path, fake, "--throttle", "1000", "--clear-throttles-when-done",
               "--interval", "0.1")  # fmt: skip
    assert r.exit_code == 0, r.stderr
    out = r.stdout.splitlines()
    assert "Successfully started partition reassignment for t-0" in out
    # progress lines while it copies (piped output), as --progress --watch prints them
    assert any(x.startswith("t-0 broker 3: copied 400 of 1000 bytes") for x in out), out
    assert out[-4:] == [
        "Status of partition reassignment:",
        "Reassignment of partition t-0 is completed.",
        "Clearing broker-level throttles on brokers 1,2,3",
        "Clearing topic-level throttles on topic t",
    ]
    assert fake.deletes() == [(RESOURCE_BROKER, "1"), (RESOURCE_BROKER, "2"),
                              (RESOURCE_BROKER, "3"), (RESOURCE_TOPIC, "t")]  # fmt: skip
    assert fake.samples == 3


def test_cancelled_plan_clears_the_throttles_and_says_so(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    fake = FakeClient(polls=1, end="cancelled")
    r = invoke(monkeypatch, tmp_path, fake, "--throttle", "1000", "--clear-throttles-when-done",
               "--interval", "0.1")  # fmt: skip
    assert r.exit_code == 1
    assert "There is no active reassignment of partition t-0, but replica set is 1,2 rather " \
        "than 2,3." in r.stdout  # fmt: skip
    assert r.stdout.splitlines()[-1] == "Clearing topic-level throttles on topic t"
    assert r.stderr.strip().splitlines() == [
        "kt: error: the reassignment was cancelled or replaced before it completed; its "
        "throttles are cleared"
    ]
    assert len(fake.deletes()) == 4


@pytest.mark.parametrize("sig,code", [(signal.SIGTERM, 143), (signal.SIGINT, 130)])
def test_signal_stops_the_wait_and_leaves_the_throttles(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, sig: signal.Signals, code: int
) -> None:
    # a real signal to this process while the plan is still in progress
    fake = FakeClient(polls=100, on_poll=lambda n: n == 2 and os.kill(os.getpid(), sig))
    r = invoke(monkeypatch, tmp_path, fake, "--throttle", "1000", "--clear-throttles-when-done",
               "--interval", "0.1")  # fmt: skip
    assert r.exit_code == code, (r.stdout, r.stderr)
    assert fake.deletes() == []
    assert fake.samples == 2
    err = r.stderr.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(f"kt: error: stopped waiting ({sig.name}); "
                                               "the throttles stay in place: run kt "
                                               "reassign-partitions --verify")  # fmt: skip
    assert "Clearing" not in r.stdout
    # the process's own handlers are back once the wait is over
    assert signal.getsignal(signal.SIGTERM) == signal.SIG_DFL


def test_wait_timeout_leaves_the_throttles(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    fake = FakeClient(polls=1000)
    r = invoke(monkeypatch, tmp_path, fake, "--throttle", "1000", "--clear-throttles-when-done",
               "--interval", "0.1", "--wait-timeout", "0.3")  # fmt: skip
    assert r.exit_code == 1
    assert "--wait-timeout reached" in r.stderr and "throttles stay in place" in r.stderr
    assert fake.deletes() == []


def test_json_is_ndjson_ending_with_the_outcome(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    fake = FakeClient(polls=1)
    r = invoke(monkeypatch, tmp_path, fake, "--throttle", "1000", "--clear-throttles-when-done",
               "--interval", "0.1", "--json")  # fmt: skip
    assert r.exit_code == 0, r.stderr
    docs = [json.loads(x) for x in r.stdout.splitlines()]
    assert docs[0]["started"] == ["t-0"]
    assert any("replicas" in d and d["replicas"] for d in docs[1:-1])
    assert docs[-1]["outcome"] == "completed" and docs[-1]["throttles_cleared"] is True
    assert docs[-1]["partitions"][0]["status"] == "completed"


def test_terminal_shows_rich_progress_then_the_lines(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setattr("kt.tools.reassign_cmd.stdout_is_terminal", lambda: True)
    fake = FakeClient(polls=2)
    r = invoke(monkeypatch, tmp_path, fake, "--throttle", "1000", "--clear-throttles-when-done",
               "--interval", "0.1")  # fmt: skip
    assert r.exit_code == 0, r.stderr
    assert "Partition reassignment progress" in r.stdout
    assert "copied 400 of 1000" not in r.stdout  # the table, not the piped lines
    assert r.stdout.splitlines()[-1] == "Clearing topic-level throttles on topic t"
    assert len(fake.deletes()) == 4


class FlakyClient(FakeClient):
    """Samples of the plan fail with a connection error while `failing(n)`."""

    def __init__(self, failing: Any, **kw: Any) -> None:
        super().__init__(**kw)
        self.failing = failing

    async def describe_topics(self, topics: list[str]) -> dict[str, Any]:
        if self.started and self.failing(self.samples):
            raise KafkaConnectionError("cannot reach broker 2")
        return await super().describe_topics(topics)


def test_client_errors_while_waiting_are_retried(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    fake = FlakyClient(lambda n: n in (2, 3), polls=4)
    r = invoke(monkeypatch, tmp_path, fake, "--throttle", "1000", "--clear-throttles-when-done",
               "--interval", "0.1")  # fmt: skip
    assert r.exit_code == 0, r.stderr
    # one warning for the streak of two failures
    assert r.stderr.strip().splitlines() == [
        "kt: warning: cannot reach broker 2; retrying every 0.1s"
    ]
    assert r.stdout.splitlines()[-1] == "Clearing topic-level throttles on topic t"
    assert len(fake.deletes()) == 4


def test_lasting_client_errors_end_the_wait_leaving_the_throttles() -> None:
    fake = FlakyClient(lambda n: n >= 1, polls=1)
    fake.started = True
    plan = {("t", 0): [2, 3]}
    out = asyncio.run(wait_then_clear(
        fake, plan, {}, interval=0.05, stop=asyncio.Event(), deadline=None,  # type: ignore[arg-type]
        display=ProgressDisplay(as_json=True), retry_for=0.3,
    ))  # fmt: skip
    assert out.state == "failed" and out.error == "cannot reach broker 2"
    assert fake.deletes() == []
    with pytest.raises(click.ClickException) as exc:
        report(out, ["t"], "plan.json", as_json=False)
    assert exc.value.exit_code == 1
    assert exc.value.format_message() == (
        "gave up waiting: cannot reach broker 2; the throttles stay in place: run kt "
        "reassign-partitions --verify --reassignment-json-file plan.json once the "
        "reassignment completes"
    )
