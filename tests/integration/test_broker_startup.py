"""Starting a broker that cannot listen: it fails before touching its data directory,
and a failed start is not logged as a clean stop (issue 9 #9)."""

from __future__ import annotations

import asyncio
import errno
import logging
import socket
import subprocess
from pathlib import Path

import pytest
from broker_harness import KT, free_port

from kt.broker.config import load_config
from kt.broker.network import NetworkServer
from kt.broker.server import serve

pytestmark = pytest.mark.integration


def test_port_in_use_fails_before_creating_the_data_dir(tmp_path: Path) -> None:
    data = tmp_path / "data"
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = subprocess.run(
            [KT, "broker", "start", "--override", f"log.dirs={data}",
             "--override", f"listeners=PLAINTEXT://127.0.0.1:{port}"],
            capture_output=True, text=True, timeout=60,
        )  # fmt: skip
    assert result.returncode == 1
    assert result.stderr.splitlines() == [
        f"kt: error: cannot listen on 127.0.0.1:{port}: Address already in use"
    ]
    assert not data.exists()


def test_unresolvable_listener_host_is_one_error_line(tmp_path: Path) -> None:
    data = tmp_path / "data"
    result = subprocess.run(
        [KT, "broker", "start", "--override", f"log.dirs={data}",
         "--override", "listeners=PLAINTEXT://no-such-host.invalid:9092"],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert result.returncode == 1
    [line] = result.stderr.splitlines()
    assert line.startswith("kt: error: cannot listen on no-such-host.invalid:9092: ")
    assert not data.exists()


def test_a_failed_start_is_not_logged_as_a_clean_stop(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """The listener cannot be bound: the start fails before any log directory is
    made or opened, and nothing claims a clean stop."""

    async def taken(self: NetworkServer, host: str, port: int, **kw: object) -> int:
        raise OSError(errno.EADDRINUSE, "Address already in use")

    monkeypatch.setattr(NetworkServer, "start", taken)
    data = tmp_path / "data"
    cfg = load_config(
        None, {"log.dirs": str(data), "listeners": f"PLAINTEXT://127.0.0.1:{free_port()}"}
    )
    with caplog.at_level(logging.DEBUG, logger="kt.broker"), pytest.raises(OSError):
        asyncio.run(serve(cfg))
    messages = [r.getMessage() for r in caplog.records]
    assert "stopped cleanly" not in messages
    assert "start failed" in messages
    assert not data.exists()
