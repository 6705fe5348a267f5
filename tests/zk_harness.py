"""A real standalone ZooKeeper for tests: free loopback port, temp dir, clean stops.

Debian's ZooKeeper 3.8 is started as its own JVM (QuorumPeerMain) with a config of
our own (no admin server, 4lw `ruok` allowed), its data and log in a temp directory.
`stop()` / `start()` keep the port and data dir, so fault tests can take ZooKeeper
down and bring the same ensemble (and its sessions) back.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

ZK_JAR = Path("/usr/share/java/zookeeper.jar")
ZK_CONF = Path("/etc/zookeeper/conf")  # holds the log4j.properties the jar's logging reads
MAIN = "org.apache.zookeeper.server.quorum.QuorumPeerMain"
# zookeeper.jar's manifest names no slf4j binding: without these jars the server logs
# nothing at all, and a failed start would leave no clue.
LOG_JARS = (Path("/usr/share/java/slf4j-log4j12.jar"), Path("/usr/share/java/log4j-1.2.jar"))


def zookeeper_available() -> bool:
    """True when Debian's ZooKeeper and a java are installed."""
    return ZK_JAR.exists() and (ZK_CONF / "log4j.properties").exists() and _java() is not None


def _java() -> str | None:
    for candidate in ("/usr/bin/java", os.environ.get("JAVA", "")):
        if candidate and Path(candidate).exists():
            return candidate
    return None


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def four_letter(port: int, word: str, timeout: float = 1.0) -> str:
    """Send a ZooKeeper four-letter command and return the answer ('' on failure)."""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
            s.sendall(word.encode("ascii"))
            chunks = []
            while chunk := s.recv(4096):
                chunks.append(chunk)
            return b"".join(chunks).decode("utf-8", "replace")
    except OSError:
        return ""


@dataclass
class ZooKeeperServer:
    """A standalone ZooKeeper process rooted in `base_dir`."""

    base_dir: Path
    port: int = 0
    proc: subprocess.Popen[bytes] | None = None

    def __post_init__(self) -> None:
        if not self.port:
            self.port = free_port()
        self.base_dir.mkdir(parents=True, exist_ok=True)
        (self.base_dir / "data").mkdir(exist_ok=True)
        self.config = self.base_dir / "zoo.cfg"
        self.config.write_text(
            "tickTime=2000\n"
            # A 4 s minimum session timeout (2 ticks) would slow expiry tests down;
            # 1 s lets them use short sessions.
            "minSessionTimeout=1000\n"
            f"dataDir={self.base_dir / 'data'}\n"
            f"clientPort={self.port}\n"
            "clientPortAddress=127.0.0.1\n"
            "admin.enableServer=false\n"
            "4lw.commands.whitelist=ruok,srvr,stat\n"
        )

    @property
    def connect(self) -> str:
        """host:port for clients."""
        return f"127.0.0.1:{self.port}"

    def chroot_connect(self) -> str:
        """A connect string with a fresh chroot, so tests sharing the server are apart."""
        return f"{self.connect}/kt-test-{uuid.uuid4().hex[:12]}"

    @property
    def log_path(self) -> Path:
        """ZooKeeper's own log (log4j ROLLINGFILE) in the temp dir."""
        return self.base_dir / "zookeeper.log"

    def start(self, timeout: float = 30.0) -> ZooKeeperServer:
        """Start the server and wait until it answers `ruok` with `imok`."""
        java = _java()
        if java is None:
            raise RuntimeError("no java found to run ZooKeeper")
        cmd = [
            java,
            "-Xmx128m",
            f"-Dzookeeper.log.dir={self.base_dir}",
            "-Dzookeeper.root.logger=INFO,ROLLINGFILE",
            "-cp",
            ":".join(map(str, [ZK_CONF, ZK_JAR, *(j for j in LOG_JARS if j.exists())])),
            MAIN,
            str(self.config),
        ]
        out = open(self.base_dir / "stdout.log", "ab")  # noqa: SIM115 - closed in stop()
        self.proc = subprocess.Popen(
            cmd, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
        )
        self._out = out
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(
                    f"ZooKeeper exited with {self.proc.returncode}; see {self.log_path}"
                )
            # ruok answers before the server serves sessions; srvr knows the mode.
            if four_letter(self.port, "ruok", 0.5) == "imok" and "Mode: standalone" in (
                four_letter(self.port, "srvr", 0.5)
            ):
                return self
            time.sleep(0.1)
        self.stop()
        raise RuntimeError(f"ZooKeeper did not answer ruok within {timeout} s; see {self.log_path}")

    def stop(self, grace: float = 5.0) -> None:
        """SIGTERM, then SIGKILL after `grace` seconds; the data dir is kept."""
        proc, self.proc = self.proc, None
        if proc is None:
            return
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(grace)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        self._out.close()

    def kill(self) -> None:
        """SIGKILL at once (a crash)."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
        self.stop()

    def restart(self) -> ZooKeeperServer:
        """Stop and start again on the same port and data dir."""
        self.stop()
        return self.start()
