"""A ZooKeeper-coordinated kt cluster on this machine: one standalone ZooKeeper and N
`kt broker start` processes on loopback, all under one directory.

`kt cluster up/down` and the test suite use the same classes:

- `LocalZooKeeper`: a standalone ZooKeeper (Debian's `zookeeper` package, started with
  `java ... QuorumPeerMain zoo.cfg`), ready once it answers `ruok` with `imok`.
- `LocalCluster`: ZooKeeper plus brokers 1..N with free (or chosen) ports, optional
  racks, a data directory and a log file each; it records pids, ports, paths and
  the settings it was created with in `cluster.json` (written atomically) so another
  process (`kt cluster down`, `start`, `stop`) can find and stop them, and so the
  next `kt cluster up` gives every process its port again; it stops, kills, pauses,
  resumes and restarts single brokers (and starts whatever is down) for failure
  tests and for `kt cluster start|stop|restart`. What it does to a process is also
  written as a line into that process's log (`log_marker`).

The processes run in their own sessions, so they outlive the command that started
them (and a Ctrl-C in its terminal). Each recorded pid carries the process's start
time from /proc, so a stale `cluster.json` never signals an unrelated process that
got the same pid later.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kt.storage.atomic import atomic_write

ZOOKEEPER_JAR = Path("/usr/share/java/zookeeper.jar")
ZOOKEEPER_CONF_DIR = Path("/etc/zookeeper/conf")  # log4j/logback config on the classpath
ZOOKEEPER_MAIN = "org.apache.zookeeper.server.quorum.QuorumPeerMain"
#: an slf4j binding: zookeeper.jar's manifest names none, and without one the server
#: logs nothing (used when present)
ZOOKEEPER_LOG_JARS = (
    Path("/usr/share/java/slf4j-log4j12.jar"),
    Path("/usr/share/java/log4j-1.2.jar"),
)
STATE_FILE = "cluster.json"
STATE_VERSION = 1
LOOPBACK = "127.0.0.1"
#: printed on stdout by `kt broker start` once it listens
READY_MARKER = b"kt broker ready"
#: logged by a broker whose id is still registered by its previous (killed) run
SESSION_WAIT_MARKER = b"waiting for that session to expire"


class ClusterError(Exception):
    """A local cluster could not be started, found or stopped (one-line message)."""


class ClusterModeUnsupportedError(ClusterError):
    """`kt broker start` refused or ignored `zookeeper.connect` (no cluster mode yet)."""


def check_java() -> str:
    """The path of `java`; ClusterError when java or ZooKeeper's jar is missing."""
    java = shutil.which("java")
    if java is None:
        raise ClusterError("java not found: scripts/setup installs it (Debian's zookeeper)")
    if not ZOOKEEPER_JAR.is_file():
        raise ClusterError(
            f"{ZOOKEEPER_JAR} not found: scripts/setup installs it (Debian's zookeeper)"
        )
    return java


def free_port(host: str = LOOPBACK) -> int:
    """A TCP port on `host` that nothing listens on right now."""
    with socket.socket() as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


def port_in_use(port: int, host: str = LOOPBACK) -> bool:
    """True when something listens on host:port (connections in TIME_WAIT do not count:
    servers bind with SO_REUSEADDR)."""
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((host, port))
        except OSError:
            return True
    return False


#: how long a port may stay bound after its process ended before it counts as taken
PORT_RELEASE_TIMEOUT = 15.0


def wait_ports_free(ports: Sequence[int], timeout: float) -> bool:
    """Wait until nothing listens on any of `ports`; False if one still is after
    `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while any(port_in_use(p) for p in ports):
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.05)
    return True


def four_letter_word(port: int, word: str, *, host: str = LOOPBACK, timeout: float = 2.0) -> str:
    """Send a ZooKeeper four-letter command (`ruok`, `srvr`, `stat`); '' on failure."""
    try:
        with socket.create_connection((host, port), timeout=timeout) as s:
            s.sendall(word.encode())
            chunks = []
            while True:
                data = s.recv(4096)
                if not data:
                    break
                chunks.append(data)
    except OSError:
        return ""
    return b"".join(chunks).decode(errors="replace")


# --- processes we did not necessarily start ---------------------------------------------


def process_start_time(pid: int) -> int | None:
    """The start time of a live process (clock ticks since boot, /proc/PID/stat field
    22); None when there is no such process or it is a zombie."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    # the command name (field 2) is in parentheses and may contain spaces
    fields = stat[stat.rindex(")") + 2 :].split()
    if fields[0] in ("Z", "X"):
        return None
    return int(fields[19])


def process_state(pid: int, start_time: int | None) -> str:
    """'running', 'paused' (stopped by SIGSTOP: /proc state T) or 'stopped' (gone)."""
    if not is_alive(pid, start_time):
        return "stopped"
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return "stopped"
    return "paused" if stat[stat.rindex(")") + 2 :].split()[0] in ("T", "t") else "running"


def log_marker(path: Path, text: str) -> None:
    """Append one line saying what `kt cluster` did to a process (started, stopped,
    killed) to its log, stamped like the broker's own lines: a SIGKILLed process
    cannot say it died, and a reader of the log should see why it ends there."""
    now = time.time()
    stamp = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(now))
    line = f"{stamp},{int(now * 1000) % 1000:03d} --- kt cluster: {text} ---\n"
    with contextlib.suppress(OSError):
        path.parent.mkdir(parents=True, exist_ok=True)
        # O_APPEND, as the process's own output: lines interleave, never overwrite
        with open(path, "ab") as f:
            f.write(line.encode())


def _reap(pid: int) -> None:
    # Our own children must be waited for, or they stay zombies.
    with contextlib.suppress(ChildProcessError, OSError):
        os.waitpid(pid, os.WNOHANG)


def is_alive(pid: int, start_time: int | None) -> bool:
    """True while `pid` runs and is the process that started at `start_time`."""
    if pid <= 0:
        return False
    _reap(pid)
    now = process_start_time(pid)
    return now is not None and (start_time is None or now == start_time)


def wait_gone(pid: int, start_time: int | None, timeout: float) -> bool:
    """Wait until the process is gone; False if it still runs after `timeout`."""
    deadline = time.monotonic() + timeout
    while is_alive(pid, start_time):
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.05)
    return True


def signal_process(pid: int, start_time: int | None, sig: int) -> bool:
    """Send `sig` if the process still is the recorded one; False when it is gone."""
    if not is_alive(pid, start_time):
        return False
    try:
        os.kill(pid, sig)
    except ProcessLookupError:
        return False
    return True


def _spawn(args: Sequence[str], log_path: Path, cwd: Path) -> tuple[int, int | None]:
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with open(log_path, "ab") as log:
        proc = subprocess.Popen(
            list(args),
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            cwd=cwd,
            start_new_session=True,  # outlive the command (and its terminal's Ctrl-C)
        )
    return proc.pid, process_start_time(proc.pid)


def _tail(path: Path, lines: int = 1) -> str:
    try:
        text = path.read_text(errors="replace").strip().splitlines()
    except OSError:
        return ""
    return " | ".join(line.strip() for line in text[-lines:])


# --- ZooKeeper --------------------------------------------------------------------------


#: ZooKeeper's tickTime in its sample configuration, and the most kt cluster up uses.
DEFAULT_TICK_TIME_MS = 2000
#: Kafka's default zookeeper.session.timeout.ms.
DEFAULT_SESSION_TIMEOUT_MS = 18000


def tick_time_for(session_timeout_ms: int) -> int:
    """The tickTime an operator would give ZooKeeper for brokers with this session
    timeout: ZooKeeper expires sessions in tickTime buckets, so a dead broker's
    session ends up to one tick after its timeout, and that lag is part of every
    failover. A sixtieth of the timeout bounds it under 2% (300 ms for Kafka's
    default 18 s, 100 ms for 6 s), at most the usual 2000 ms and at least 100 ms.
    ZooKeeper lets a session last 2 ticks to `maxSessionTimeout`, which zoo.cfg
    sets to the usual 40 s, so any timeout a broker asks for is granted. A
    standalone server's tick costs nothing measurable (its session tracker wakes
    once per tick; ticks also pace an ensemble's followers, which it has none of)."""
    return max(100, min(DEFAULT_TICK_TIME_MS, session_timeout_ms // 60))


@dataclass
class LocalZooKeeper:
    """A standalone ZooKeeper server with its config, data and log in `directory`."""

    directory: Path
    port: int = 0  # 0: a free port, chosen at start
    pid: int = 0
    start_time: int | None = None
    #: ZooKeeper's tickTime (see tick_time_for)
    tick_time_ms: int = DEFAULT_TICK_TIME_MS

    @property
    def address(self) -> str:
        """host:port for clients (`zookeeper.connect`)."""
        return f"{LOOPBACK}:{self.port}"

    @property
    def log_path(self) -> Path:
        """ZooKeeper's console output."""
        return self.directory / "zookeeper.log"

    @property
    def config_path(self) -> Path:
        """Its zoo.cfg."""
        return self.directory / "zoo.cfg"

    def config_text(self) -> str:
        """zoo.cfg: standalone, loopback only, no admin server, a few 4lw commands; the
        largest session timeout stays ZooKeeper's 40 s of the usual 2000 ms tick."""
        return (
            f"tickTime={self.tick_time_ms}\n"
            f"maxSessionTimeout={20 * DEFAULT_TICK_TIME_MS}\n"
            f"dataDir={self.directory / 'data'}\n"
            f"clientPort={self.port}\n"
            f"clientPortAddress={LOOPBACK}\n"
            "admin.enableServer=false\n"
            "4lw.commands.whitelist=ruok,srvr,stat\n"
            "maxClientCnxns=0\n"
        )

    def start(self, timeout: float = 30.0) -> LocalZooKeeper:
        """Start the server; wait until `ruok` answers `imok` and `srvr` shows it serving."""
        java = check_java()
        self.directory.mkdir(parents=True, exist_ok=True)
        (self.directory / "data").mkdir(exist_ok=True)
        if self.port == 0:
            self.port = free_port()
        elif port_in_use(self.port):
            raise ClusterError(f"ZooKeeper port {self.address} is already in use")
        self.config_path.write_text(self.config_text())
        log_marker(self.log_path, f"starting ZooKeeper on {self.address}")
        jars = [ZOOKEEPER_JAR, *(j for j in ZOOKEEPER_LOG_JARS if j.is_file())]
        classpath = ":".join(str(p) for p in (ZOOKEEPER_CONF_DIR, *jars))
        self.pid, self.start_time = _spawn(
            [
                java,
                "-Dzookeeper.root.logger=INFO,CONSOLE",  # Debian's log4j.properties: to stdout
                "-cp",
                classpath,
                ZOOKEEPER_MAIN,
                str(self.config_path),
            ],
            self.log_path,
            self.directory,
        )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if not self.running:
                raise ClusterError(f"ZooKeeper exited at start: {_tail(self.log_path)}")
            # imok comes as soon as the port is open; srvr tells when it serves
            if four_letter_word(self.port, "ruok", timeout=1.0) == "imok" and (
                "Mode:" in four_letter_word(self.port, "srvr", timeout=1.0)
            ):
                return self
            time.sleep(0.1)
        self.stop(kill=True)
        raise ClusterError(f"ZooKeeper did not answer ruok within {timeout:g}s ({self.log_path})")

    @property
    def running(self) -> bool:
        """True while the server process runs."""
        return is_alive(self.pid, self.start_time)

    def stop(self, *, kill: bool = False, timeout: float = 10.0) -> None:
        """SIGTERM (or SIGKILL) and wait; escalates to SIGKILL after `timeout`. Returns
        once the process is gone and its port free (so a start right after finds it
        free), or PORT_RELEASE_TIMEOUT later."""
        sig = signal.SIGKILL if kill else signal.SIGTERM
        if not self.running:
            return
        how = "killing" if kill else "stopping"
        log_marker(self.log_path, f"{how} ZooKeeper (pid {self.pid}, {sig.name})")
        if signal_process(self.pid, self.start_time, sig) and not wait_gone(
            self.pid, self.start_time, timeout
        ):
            signal_process(self.pid, self.start_time, signal.SIGKILL)
            wait_gone(self.pid, self.start_time, 5.0)
        wait_ports_free([self.port], PORT_RELEASE_TIMEOUT)

    def __enter__(self) -> LocalZooKeeper:
        return self if self.running else self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def to_json(self) -> dict[str, Any]:
        """The part of cluster.json describing this server."""
        return {
            "port": self.port,
            "pid": self.pid,
            "start_time": self.start_time,
            "dir": str(self.directory),
            "tick_time_ms": self.tick_time_ms,
        }

    @classmethod
    def from_json(cls, doc: Mapping[str, Any]) -> LocalZooKeeper:
        """Back from `to_json`."""
        return cls(
            Path(doc["dir"]),
            int(doc["port"]),
            int(doc["pid"]),
            doc.get("start_time"),
            int(doc.get("tick_time_ms", DEFAULT_TICK_TIME_MS)),
        )


# --- brokers ----------------------------------------------------------------------------


@dataclass
class LocalBroker:
    """One `kt broker start` of a local cluster."""

    broker_id: int
    port: int
    directory: Path  # holds data/ and broker.log
    rack: str | None = None
    pid: int = 0
    start_time: int | None = None

    @property
    def bootstrap(self) -> str:
        """host:port for clients."""
        return f"{LOOPBACK}:{self.port}"

    @property
    def data_dir(self) -> Path:
        """Its log directory (`log.dirs`)."""
        return self.directory / "data"

    @property
    def log_path(self) -> Path:
        """Its stdout and stderr."""
        return self.directory / "broker.log"

    @property
    def running(self) -> bool:
        """True while the process runs (paused counts as running)."""
        return is_alive(self.pid, self.start_time)

    def to_json(self) -> dict[str, Any]:
        """The part of cluster.json describing this broker."""
        return {
            "id": self.broker_id,
            "port": self.port,
            "rack": self.rack,
            "pid": self.pid,
            "start_time": self.start_time,
            "dir": str(self.directory),
        }

    @classmethod
    def from_json(cls, doc: Mapping[str, Any]) -> LocalBroker:
        """Back from `to_json`."""
        return cls(
            int(doc["id"]),
            int(doc["port"]),
            Path(doc["dir"]),
            doc.get("rack"),
            int(doc.get("pid") or 0),
            doc.get("start_time"),
        )


def internal_topic_defaults(brokers: int) -> dict[str, str]:
    """The properties `LocalCluster.create` gives every broker of a cluster of
    `brokers`: the internal topics' replication factors are strict in a cluster (as
    in Kafka), so a cluster smaller than the default 3 gets ones it can meet."""
    props = {"offsets.topic.replication.factor": str(min(3, brokers))}
    if brokers < 3:
        # __transaction_state's defaults (3 replicas, 2 in sync) need three
        # brokers; with fewer, one replica each and one in sync.
        props["transaction.state.log.replication.factor"] = str(brokers)
        props["transaction.state.log.min.isr"] = "1"
    return props


def kt_command() -> list[str]:
    """How to run this kt: the interpreter running us, so venvs need no PATH."""
    return [sys.executable, "-m", "kt.cli"]


@dataclass
class LocalCluster:
    """ZooKeeper plus brokers 1..N under `directory`, described by its cluster.json.

    `start()` launches everything and waits until each broker printed its ready line
    and (with `verify_registration`) registered under /brokers/ids in ZooKeeper;
    `stop()` stops the brokers first and ZooKeeper last. `LocalCluster.load(dir)`
    finds a cluster another process started.
    """

    directory: Path
    brokers: list[LocalBroker] = field(default_factory=list)
    zookeeper: LocalZooKeeper | None = None
    chroot: str = ""
    #: extra broker properties, the same for every broker
    overrides: dict[str, str] = field(default_factory=dict)
    #: the racks given out in turn (as `create` took them), kept for the next `up`
    racks: list[str] | None = None
    #: the properties the operator asked for (`overrides` adds kt's own defaults)
    user_overrides: dict[str, str] = field(default_factory=dict)
    #: what `create` could not keep from the previous run (a port taken: moved)
    notes: list[str] = field(default_factory=list)
    #: SASL_SSL with SCRAM-SHA-512 everywhere, brokers to each other included
    #: (kt.tools.local_cluster_security); the material is in `<dir>/security/`
    secure: bool = False

    # --- construction -------------------------------------------------------------------

    @classmethod
    def create(
        cls,
        directory: str | os.PathLike[str],
        brokers: int,
        *,
        racks: Sequence[str] | None = None,
        port_base: int | None = None,
        zookeeper_port: int = 0,
        chroot: str = "",
        overrides: Mapping[str, str] | None = None,
        previous: LocalCluster | None = None,
        secure: bool = False,
    ) -> LocalCluster:
        """A cluster description (nothing started yet). Broker N listens on
        port_base + N - 1 when `port_base` is given, else on the port it had in
        `previous` (the cluster.json of the last run) while that port is free, else
        on a free port; ZooKeeper likewise unless `zookeeper_port` is given. A port
        that had to move is said in `notes`. Racks are given out in order
        (racks[(N - 1) % len(racks)])."""
        if brokers < 1:
            raise ClusterError("a cluster needs at least one broker")
        if chroot and not chroot.startswith("/"):
            raise ClusterError(f"the chroot must start with '/': {chroot!r}")
        root = Path(directory).absolute()
        # The addresses printed yesterday should still be right today: each process
        # gets its old port back when nothing else took it meanwhile.
        before = {b.broker_id: b.port for b in previous.brokers} if previous else {}
        zk_before = previous.zookeeper.port if previous and previous.zookeeper else 0
        reserved = {p for p in (*before.values(), zk_before, zookeeper_port) if p}
        taken: set[int] = set()
        notes: list[str] = []

        def fresh() -> int:
            port = free_port()
            while port in taken or port in reserved:
                port = free_port()
            return port

        def keep(what: str, port: int) -> int:
            if port not in taken and not port_in_use(port):
                return port
            new = fresh()
            notes.append(
                f"{what}'s port {LOOPBACK}:{port} is taken by another process: "
                f"{what} listens on {LOOPBACK}:{new} now"
            )
            return new

        members = []
        for n in range(1, brokers + 1):
            if port_base is not None:
                port = port_base + n - 1
            elif n in before:
                port = keep(f"broker {n}", before[n])
            else:
                port = fresh()
            taken.add(port)
            rack = racks[(n - 1) % len(racks)] if racks else None
            members.append(LocalBroker(n, port, root / f"broker-{n}", rack))
        if not zookeeper_port and zk_before:
            zookeeper_port = keep("ZooKeeper", zk_before)
        props = internal_topic_defaults(brokers)
        props.update(overrides or {})
        try:
            session_ms = int(props.get("zookeeper.session.timeout.ms", DEFAULT_SESSION_TIMEOUT_MS))
        except ValueError:
            session_ms = DEFAULT_SESSION_TIMEOUT_MS  # the broker itself will refuse it
        zk = LocalZooKeeper(
            root / "zookeeper", zookeeper_port, tick_time_ms=tick_time_for(session_ms)
        )
        return cls(
            root,
            members,
            zk,
            chroot.rstrip("/"),
            props,
            list(racks) if racks else None,
            dict(overrides or {}),
            notes,
            secure,
        )

    @classmethod
    def load(cls, directory: str | os.PathLike[str]) -> LocalCluster:
        """The cluster recorded in `directory`/cluster.json (ClusterError if none)."""
        root = Path(directory).absolute()
        path = root / STATE_FILE
        try:
            doc = json.loads(path.read_text())
        except FileNotFoundError:
            raise ClusterError(f"{path}: no cluster here (kt cluster up creates one)") from None
        except (OSError, ValueError) as exc:
            raise ClusterError(f"{path}: unreadable cluster state: {exc}") from None
        if doc.get("version") != STATE_VERSION:
            raise ClusterError(f"{path}: unknown state version {doc.get('version')!r}")
        zk = doc.get("zookeeper")
        brokers = [LocalBroker.from_json(b) for b in doc.get("brokers", [])]
        overrides = dict(doc.get("overrides", {}))
        # files written before racks and user_overrides were kept: the closest reading
        # (the overrides less kt's own defaults for that many brokers)
        user = doc.get("user_overrides")
        if user is None:
            defaults = internal_topic_defaults(max(1, len(brokers)))
            user = {k: v for k, v in overrides.items() if defaults.get(k) != v}
        racks = doc.get("racks")
        if racks is None and brokers and all(b.rack for b in brokers):
            racks = [b.rack for b in brokers]
        return cls(
            root,
            brokers,
            LocalZooKeeper.from_json(zk) if zk else None,
            doc.get("chroot", ""),
            overrides,
            racks,
            dict(user),
            secure=bool(doc.get("secure", False)),
        )

    # --- addresses ----------------------------------------------------------------------

    @property
    def state_path(self) -> Path:
        """cluster.json."""
        return self.directory / STATE_FILE

    @property
    def bootstrap_servers(self) -> str:
        """Every broker's host:port, comma-separated."""
        return ",".join(b.bootstrap for b in self.brokers)

    @property
    def zookeeper_address(self) -> str:
        """host:port of ZooKeeper ('' without one)."""
        return self.zookeeper.address if self.zookeeper else ""

    @property
    def zookeeper_connect(self) -> str:
        """The brokers' `zookeeper.connect`: host:port plus the chroot."""
        return self.zookeeper_address + self.chroot

    def broker(self, broker_id: int) -> LocalBroker:
        """The broker with that id (ClusterError if none)."""
        for b in self.brokers:
            if b.broker_id == broker_id:
                return b
        raise ClusterError(f"no broker {broker_id} in {self.directory}")

    @property
    def running(self) -> bool:
        """True when ZooKeeper or any broker still runs."""
        return bool(
            (self.zookeeper and self.zookeeper.running) or any(b.running for b in self.brokers)
        )

    # --- state file ---------------------------------------------------------------------

    def save(self) -> None:
        """Write cluster.json atomically."""
        doc = {
            "version": STATE_VERSION,
            "bootstrap_servers": self.bootstrap_servers,
            "zookeeper_connect": self.zookeeper_connect,
            "chroot": self.chroot,
            "overrides": self.overrides,
            "racks": self.racks,
            "user_overrides": self.user_overrides,
            "secure": self.secure,
            "zookeeper": self.zookeeper.to_json() if self.zookeeper else None,
            "brokers": [b.to_json() for b in self.brokers],
        }
        self.directory.mkdir(parents=True, exist_ok=True)
        atomic_write(self.state_path, (json.dumps(doc, indent=2) + "\n").encode())

    # --- lifecycle ----------------------------------------------------------------------

    def start(
        self,
        *,
        timeout: float = 60.0,
        verify_registration: bool = True,
        register_timeout: float = 15.0,
    ) -> LocalCluster:
        """Start ZooKeeper, then every broker; wait for their ready lines and (with
        `verify_registration`) for /brokers/ids to list them all. On any failure
        everything started is stopped again and ClusterError is raised."""
        if self.state_path.exists():
            try:
                other = LocalCluster.load(self.directory)
            except ClusterError:
                other = None
            if other is not None and other.running:
                raise ClusterError(f"a cluster is already running in {self.directory}")
        for b in self.brokers:
            if port_in_use(b.port):
                raise ClusterError(f"broker {b.broker_id}'s port {b.bootstrap} is already in use")
        assert self.zookeeper is not None
        try:
            self.zookeeper.start(timeout=min(timeout, 30.0))
            self.save()
            self.prepare_security()
            for b in self.brokers:
                self._launch(b)
                self.save()
            deadline = time.monotonic() + timeout
            for b in self.brokers:
                self._await_ready(b, deadline, offset=0)
            if verify_registration:
                self.wait_registered(register_timeout)
        except BaseException:
            self.stop(kill=True)
            raise
        return self

    @property
    def client_properties(self) -> Path | None:
        """The admin's client properties of a secure cluster (None otherwise)."""
        if not self.secure:
            return None
        from kt.tools.local_cluster_security import files_for

        return files_for(self.directory).client_properties

    def prepare_security(self) -> None:
        """A secure cluster's CA, certificates, settings and client properties
        (made once, kept after), and the admin's SCRAM credential in ZooKeeper, which
        must be there before a broker starts (they log in to each other with it)."""
        if not self.secure:
            return
        from kt.tools import local_cluster_security as sec

        try:
            files = sec.prepare(self.directory, [b.broker_id for b in self.brokers],
                                self.bootstrap_servers, host=LOOPBACK)  # fmt: skip
            sec.create_admin_user(self.zookeeper_connect, files)
        except ImportError as exc:
            raise ClusterError(f"kt cluster up --secure needs {exc.name}") from None
        except Exception as exc:
            raise ClusterError(f"could not set up the cluster's security: {exc}") from None

    def _broker_args(self, b: LocalBroker) -> list[str]:
        protocol = "PLAINTEXT"
        secure: dict[str, str] = {}
        args = [*kt_command(), "broker", "start"]
        if self.secure:
            from kt.tools import local_cluster_security as sec

            files = sec.files_for(self.directory)
            protocol = sec.LISTENER
            secure = sec.broker_keystore_overrides(files, b.broker_id)
            # the password is in this file (0600), never on the command line
            args += ["--config", str(files.broker_properties)]
        props = {
            "broker.id": str(b.broker_id),
            "log.dirs": str(b.data_dir),
            "listeners": f"{protocol}://{b.bootstrap}",
            "zookeeper.connect": self.zookeeper_connect,
            **({"broker.rack": b.rack} if b.rack else {}),
            **secure,
            **self.overrides,
        }
        for k, v in props.items():
            args += ["--override", f"{k}={v}"]
        return args

    def _launch(self, b: LocalBroker) -> int:
        b.data_dir.mkdir(parents=True, exist_ok=True)
        offset = b.log_path.stat().st_size if b.log_path.exists() else 0
        log_marker(b.log_path, f"starting broker {b.broker_id} on {b.bootstrap}")
        b.pid, b.start_time = _spawn(self._broker_args(b), b.log_path, b.directory)
        return offset

    def _await_ready(
        self,
        b: LocalBroker,
        deadline: float,
        offset: int,
        progress: Callable[[str], None] | None = None,
    ) -> None:
        announced = False
        while True:
            try:
                with open(b.log_path, "rb") as f:
                    f.seek(offset)
                    text = f.read()
                if READY_MARKER in text:
                    return
                if progress and not announced and SESSION_WAIT_MARKER in text:
                    # after a SIGKILL the old registration lingers until its session
                    # expires: say why this start takes that long
                    progress(
                        f"broker {b.broker_id} waits for its previous ZooKeeper session "
                        "to expire (zookeeper.session.timeout.ms) before it registers"
                    )
                    announced = True
            except FileNotFoundError:
                pass
            if not b.running:
                last = _tail(b.log_path, 3)
                if "zookeeper" in last.lower():
                    raise ClusterModeUnsupportedError(
                        f"kt broker start refused zookeeper.connect: {_tail(b.log_path)}"
                    )
                raise ClusterError(f"broker {b.broker_id} exited at start: {_tail(b.log_path)}")
            if time.monotonic() >= deadline:
                raise ClusterError(f"broker {b.broker_id} was not ready in time ({b.log_path})")
            time.sleep(0.05)

    def registered_brokers(self) -> list[int] | None:
        """The ids under /brokers/ids in ZooKeeper (None when kazoo is missing)."""
        try:
            from kazoo.client import KazooClient  # type: ignore[import-untyped, unused-ignore]
            from kazoo.exceptions import NoNodeError  # type: ignore[import-untyped, unused-ignore]
        except ImportError:
            return None
        zk = KazooClient(hosts=self.zookeeper_connect, timeout=5.0)
        try:
            zk.start(timeout=5.0)
            try:
                return sorted(int(c) for c in zk.get_children("/brokers/ids"))
            except NoNodeError:
                return []
        finally:
            with contextlib.suppress(Exception):
                zk.stop()
                zk.close()

    def wait_registered(self, timeout: float, ids: Sequence[int] | None = None) -> None:
        """Wait until the brokers `ids` (default all) are registered in ZooKeeper;
        ClusterModeUnsupportedError when none of them ever registers."""
        want = set(ids if ids is not None else (b.broker_id for b in self.brokers))
        deadline = time.monotonic() + timeout
        seen: list[int] | None = []
        while True:
            seen = self.registered_brokers()
            if seen is None or want <= set(seen):
                return
            if time.monotonic() >= deadline:
                break
            time.sleep(0.2)
        if not seen:
            raise ClusterModeUnsupportedError(
                "the brokers started but none registered in ZooKeeper: this kt broker "
                "ignores zookeeper.connect (no cluster mode yet)"
            )
        missing = ",".join(str(i) for i in sorted(want - set(seen)))
        raise ClusterError(f"brokers {missing} did not register in ZooKeeper in {timeout:g}s")

    def stop_broker(self, broker_id: int, *, kill: bool = False, timeout: float = 30.0) -> None:
        """Stop one broker: SIGTERM (a controlled shutdown) and wait, or SIGKILL.
        A broker that does not stop within `timeout` is killed (ClusterError)."""
        b = self.broker(broker_id)
        sig = signal.SIGKILL if kill else signal.SIGTERM
        if not b.running:
            return
        self._mark_stop(b, kill)
        if not signal_process(b.pid, b.start_time, sig):
            return
        # a paused broker cannot handle SIGTERM until it runs again
        signal_process(b.pid, b.start_time, signal.SIGCONT)
        if not wait_gone(b.pid, b.start_time, timeout):
            signal_process(b.pid, b.start_time, signal.SIGKILL)
            wait_gone(b.pid, b.start_time, 5.0)
            raise ClusterError(f"broker {broker_id} did not stop in {timeout:g}s; killed it")
        wait_ports_free([b.port], PORT_RELEASE_TIMEOUT)

    @staticmethod
    def _mark_stop(b: LocalBroker, kill: bool) -> None:
        how = "killing" if kill else "stopping"
        why = "SIGKILL" if kill else "SIGTERM: a controlled shutdown"
        log_marker(b.log_path, f"{how} broker {b.broker_id} (pid {b.pid}, {why})")

    def pause_broker(self, broker_id: int) -> None:
        """SIGSTOP: the process freezes (sessions time out, connections hang)."""
        b = self.broker(broker_id)
        if not signal_process(b.pid, b.start_time, signal.SIGSTOP):
            raise ClusterError(f"broker {broker_id} is not running")

    def resume_broker(self, broker_id: int) -> None:
        """SIGCONT after `pause_broker`."""
        b = self.broker(broker_id)
        if not signal_process(b.pid, b.start_time, signal.SIGCONT):
            raise ClusterError(f"broker {broker_id} is not running")

    def restart_broker(
        self, broker_id: int, *, kill: bool = False, timeout: float = 60.0
    ) -> LocalBroker:
        """Stop a broker (SIGTERM, or SIGKILL) if it runs, then start it again on the
        same port and data directory and wait for its ready line."""
        b = self.broker(broker_id)
        self.stop_broker(broker_id, kill=kill)
        deadline = time.monotonic() + timeout
        while port_in_use(b.port) and time.monotonic() < deadline:
            time.sleep(0.05)
        return self.start_broker(broker_id, timeout=max(1.0, deadline - time.monotonic()))

    def start_broker(self, broker_id: int, *, timeout: float = 60.0) -> LocalBroker:
        """Start a stopped broker again (same port, same data); waits until ready."""
        b = self.broker(broker_id)
        if b.running:
            raise ClusterError(f"broker {broker_id} is already running")
        offset = self._launch(b)
        self.save()
        try:
            self._await_ready(b, time.monotonic() + timeout, offset)
        except ClusterError:
            self.stop_broker(broker_id, kill=True)
            raise
        return b

    def start_missing(
        self,
        broker_ids: Sequence[int] | None = None,
        *,
        timeout: float = 60.0,
        verify_registration: bool = True,
        register_timeout: float = 30.0,
        progress: Callable[[str], None] | None = None,
    ) -> list[str]:
        """Start ZooKeeper if it is down, then those of the brokers `broker_ids`
        (default: all) that are down, each on its recorded port and data; wait as
        `start` does. Returns what it started ('ZooKeeper', 'broker 2'); processes
        that already run are left alone. On a failure what it started is killed
        again and ClusterError is raised."""
        targets = [self.broker(i) for i in broker_ids] if broker_ids is not None else self.brokers
        down = [b for b in targets if not b.running]
        zk = self.zookeeper
        # A process that just ended may hold its port a moment longer (a JVM's
        # threads outlive its main one, whose pid already looks gone): wait a while
        # before calling the port taken.
        ports = [b.port for b in down]
        if zk is not None and not zk.running and zk.port:
            ports.append(zk.port)
        wait_ports_free(ports, min(timeout, PORT_RELEASE_TIMEOUT))
        for b in down:
            if port_in_use(b.port):
                raise ClusterError(
                    f"broker {b.broker_id}'s port {b.bootstrap} is taken by another process "
                    "(kt cluster down, then kt cluster up, gives it a free one)"
                )
        started: list[str] = []
        launched: list[LocalBroker] = []
        zk_started = False
        try:
            if zk is not None and not zk.running:
                zk.start(timeout=min(timeout, 30.0))
                zk_started = True
                started.append("ZooKeeper")
                self.save()
            deadline = time.monotonic() + timeout
            offsets = {}
            for b in down:
                offsets[b.broker_id] = self._launch(b)
                launched.append(b)
                self.save()
            for b in down:
                self._await_ready(b, deadline, offsets[b.broker_id], progress)
                started.append(f"broker {b.broker_id}")
            if verify_registration and down:
                self.wait_registered(register_timeout, [b.broker_id for b in down])
        except BaseException:
            for b in launched:
                with contextlib.suppress(ClusterError):
                    self.stop_broker(b.broker_id, kill=True)
            if zk is not None and zk_started:
                zk.stop(kill=True)
            raise
        return started

    def stop(self, *, kill: bool = False, timeout: float = 30.0) -> list[str]:
        """Stop every broker (together, SIGTERM or SIGKILL), then ZooKeeper. Returns a
        line per broker that had to be killed after `timeout`."""
        problems = []
        sig = signal.SIGKILL if kill else signal.SIGTERM
        stopped = [b.port for b in self.brokers if b.running]
        for b in self.brokers:
            if b.running:
                self._mark_stop(b, kill)
            if signal_process(b.pid, b.start_time, sig):
                signal_process(b.pid, b.start_time, signal.SIGCONT)
        deadline = time.monotonic() + timeout
        for b in self.brokers:
            if not wait_gone(b.pid, b.start_time, max(0.0, deadline - time.monotonic())):
                signal_process(b.pid, b.start_time, signal.SIGKILL)
                wait_gone(b.pid, b.start_time, 5.0)
                problems.append(f"broker {b.broker_id} did not stop in {timeout:g}s; killed it")
        # the next `up` should find every port as it left it: free
        wait_ports_free(stopped, PORT_RELEASE_TIMEOUT)
        if self.zookeeper is not None:
            self.zookeeper.stop(kill=kill)
        return problems

    def __enter__(self) -> LocalCluster:
        return self if self.running else self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop(kill=True)

    def status(self) -> list[dict[str, Any]]:
        """One entry per process: role, id, address, pid, running, state ('running',
        'paused' or 'stopped') and its log file."""
        out: list[dict[str, Any]] = []
        if self.zookeeper is not None:
            out.append(
                {
                    "role": "zookeeper",
                    "id": None,
                    "address": self.zookeeper_address,
                    "pid": self.zookeeper.pid,
                    "running": self.zookeeper.running,
                    "state": process_state(self.zookeeper.pid, self.zookeeper.start_time),
                    "log": str(self.zookeeper.log_path),
                }
            )
        for b in self.brokers:
            out.append(
                {
                    "role": "broker",
                    "id": b.broker_id,
                    "address": b.bootstrap,
                    "rack": b.rack,
                    "pid": b.pid,
                    "running": b.running,
                    "state": process_state(b.pid, b.start_time),
                    "log": str(b.log_path),
                }
            )
        return out
