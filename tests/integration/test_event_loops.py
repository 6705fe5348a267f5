"""`kt broker start` on each event loop KT_EVENT_LOOP can choose (issue 19, §3).

With uvloop installed the broker ran on it and reset every connection (an
isinstance check on the transport). Here a real broker runs on asyncio's loop and
on uvloop in turn and serves real clients: confluent-kafka produces, kcat (a C
client, large fetches: the sendfile path, or its copy on uvloop) and kt's own
client read everything back. A bad KT_EVENT_LOOP is one error line.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from broker_harness import KT, BrokerProcess, free_port

pytestmark = pytest.mark.integration

RECORDS = 3000
VALUE = b"v" * 1000


@pytest.fixture(params=["asyncio", "uvloop"])
def broker(
    request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[tuple[str, BrokerProcess]]:
    loop = request.param
    if loop == "uvloop":
        pytest.importorskip("uvloop")
    monkeypatch.setenv("KT_EVENT_LOOP", loop)
    b = BrokerProcess(tmp_path / "data", free_port()).start()
    try:
        yield loop, b
    finally:
        b.kill()


def test_the_broker_serves_clients_on_each_loop(broker: tuple[str, BrokerProcess]) -> None:
    from confluent_kafka import Producer

    loop, b = broker
    assert f"event loop: {loop}" in b.log()
    p = Producer({"bootstrap.servers": b.bootstrap, "linger.ms": 5, "acks": "all"})
    for i in range(RECORDS):
        p.produce("loops", value=VALUE, key=str(i).encode(), partition=0)
    assert p.flush(60) == 0
    # kcat (librdkafka): fetches of up to 1 MiB, the sendfile path (copied on uvloop)
    got = subprocess.run(
        ["kcat", "-C", "-b", b.bootstrap, "-t", "loops", "-o", "beginning", "-e", "-q",
         "-f", "%k\n"],
        capture_output=True, timeout=120, check=True,
    )  # fmt: skip
    assert got.stdout.split() == [str(i).encode() for i in range(RECORDS)]
    # kt's own client, through the CLI
    out = subprocess.run(
        [KT, "consume", "loops", "-b", b.bootstrap, "-o", "beginning", "-e", "-f", "%k\n"],
        capture_output=True, timeout=120,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == [str(i).encode() for i in range(RECORDS)]
    log = b.log()
    assert "Traceback" not in log and "AssertionError" not in log, log
    if loop == "uvloop":
        assert "this event loop has no sendfile: fetched records are copied" in log


def _start(tmp_path: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [KT, "broker", "start", "--override", f"log.dirs={tmp_path / 'data'}",
         "--override", f"listeners=PLAINTEXT://127.0.0.1:{free_port()}"],
        capture_output=True, text=True, timeout=60, env=env,
    )  # fmt: skip


def test_an_unknown_loop_is_a_usage_error(tmp_path: Path) -> None:
    got = _start(tmp_path, {**os.environ, "KT_EVENT_LOOP": "trio"})
    assert got.returncode == 2
    assert got.stderr.splitlines() == [
        "kt: error: KT_EVENT_LOOP: expected one of asyncio, uvloop, got 'trio'"
    ]


def test_uvloop_asked_for_but_missing_is_one_error_line(tmp_path: Path) -> None:
    # A uvloop module that cannot be imported, first on the path.
    fake = tmp_path / "fake"
    fake.mkdir()
    (fake / "uvloop.py").write_text("raise ImportError('no uvloop here')\n")
    path = os.pathsep.join([str(fake), *sys.path])
    got = _start(tmp_path, {**os.environ, "KT_EVENT_LOOP": "uvloop", "PYTHONPATH": path})
    assert got.returncode == 1
    assert got.stderr.splitlines() == [
        "kt: error: KT_EVENT_LOOP=uvloop, but uvloop is not installed (pip install uvloop)"
    ]
