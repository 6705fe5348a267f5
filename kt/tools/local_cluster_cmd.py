"""`kt cluster start|stop|restart|logs`: one process at a time of the local cluster
`kt cluster up` started, so it is a place to practise failures (a clean stop, a
SIGKILL, a ZooKeeper outage) and to read what each process logged about them.

The `cluster` group (kt/tools/cluster_cmd.py) adds these commands; the options and
hints both modules share live here.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import click

from kt.tools.cluster_logs import LogSource, ended_on_its_own, follow_logs, tail_lines
from kt.tools.console import fail, handle_errors, usage_error, warn
from kt.tools.local_cluster import ClusterError, LocalCluster

#: where `kt cluster up` and friends keep the cluster unless --dir says otherwise
DEFAULT_DIR = "./kt-cluster"


def dir_option(func: Any) -> Any:
    """--dir, the cluster's directory (default ./kt-cluster)."""
    return click.option(
        "--dir",
        "directory",
        type=click.Path(file_okay=False, path_type=Path),
        default=DEFAULT_DIR,
        show_default=True,
        help="The cluster's directory: cluster.json, ZooKeeper, brokers' data and logs.",
    )(func)


def where(directory: Path) -> str:
    """' --dir D' when the cluster is not in the default directory, else ''."""
    return "" if directory == Path(DEFAULT_DIR) else f" --dir {directory}"


def load_cluster(directory: Path) -> LocalCluster:
    """The cluster recorded in `directory`; one error line (exit 1) when there is none."""
    try:
        return LocalCluster.load(directory)
    except ClusterError as exc:
        fail(str(exc))


def check_ids(c: LocalCluster, broker_ids: Sequence[int]) -> list[int]:
    """The ids in the order given, without repeats; a usage error for one the cluster
    does not have."""
    known = [b.broker_id for b in c.brokers]
    out: list[int] = []
    for i in broker_ids:
        if i not in known:
            have = ",".join(map(str, known)) or "none"
            usage_error(f"--broker {i}: the cluster in {c.directory} has brokers {have}")
        if i not in out:
            out.append(i)
    return out


def down_hints(c: LocalCluster, directory: Path) -> list[str]:
    """What to type to bring back what is down (for `kt cluster status`)."""
    w = where(directory)
    zk_down = c.zookeeper is not None and not c.zookeeper.running
    down = [b.broker_id for b in c.brokers if not b.running]
    if zk_down and len(down) == len(c.brokers):
        return [f"nothing runs: start the cluster with: kt cluster up{w}"]
    hints = []
    if zk_down and c.zookeeper is not None:
        last = ended_on_its_own(c.zookeeper.log_path)
        if last is not None:
            hints.append(
                f"ZooKeeper exited, not stopped by kt cluster; its last log line: {last[:300]}"
            )
        hints.append(
            f"ZooKeeper is down (its log: kt cluster logs --zookeeper{w}); "
            f"start it with: kt cluster start --zookeeper{w}"
        )
    for i in down:
        last = ended_on_its_own(c.broker(i).log_path)
        if last is not None:
            # it died by itself: a crash, an error at start, the OOM killer
            hints.append(
                f"broker {i} exited, not stopped by kt cluster; its last log line: {last[:300]}"
            )
        hints.append(
            f"broker {i} is down (its log: kt cluster logs --broker {i}{w}); "
            f"start it with: kt cluster start --broker {i}{w}"
        )
    if (zk_down and down) or len(down) > 1:
        hints.append(f"start everything that is down with: kt cluster start{w}")
    return hints


def _progress(message: str) -> None:
    click.echo(f"kt: {message}", err=True)


def _start(c: LocalCluster, ids: list[int] | None, timeout: float, check: bool) -> list[str]:
    try:
        return c.start_missing(ids, timeout=timeout, verify_registration=check, progress=_progress)
    except ClusterError as exc:
        fail(str(exc))


def _describe(c: LocalCluster, name: str) -> str:
    """'broker 2 (127.0.0.1:PORT)' or 'ZooKeeper (127.0.0.1:PORT)'."""
    if name == "ZooKeeper":
        return f"ZooKeeper ({c.zookeeper_address})"
    return f"{name} ({c.broker(int(name.split()[1])).bootstrap})"


def _timeout_option(what: str) -> Callable[[Any], Any]:
    return click.option("--timeout", type=click.FloatRange(min=1), default=60.0,
                        show_default=True, metavar="SECONDS", help=what)  # fmt: skip


_broker_option = click.option(
    "--broker",
    "broker_ids",
    type=click.IntRange(min=0),
    multiple=True,
    metavar="N",
    help="Broker id N; repeatable.",
)
_zookeeper_option = click.option("--zookeeper", is_flag=True, help="ZooKeeper.")
_no_check_option = click.option(
    "--no-registration-check", "no_check", is_flag=True, hidden=True,
    help="Do not wait for the brokers to register in ZooKeeper.",
)  # fmt: skip


@click.command()
@dir_option
@_broker_option
@_zookeeper_option
@_timeout_option("How long the brokers may take to be ready and registered.")
@_no_check_option
@handle_errors
def start(
    directory: Path, broker_ids: tuple[int, ...], zookeeper: bool, timeout: float, no_check: bool
) -> None:
    """Start stopped processes of the cluster in --dir again.

    The brokers --broker N (repeatable) and with --zookeeper ZooKeeper; with
    neither, everything that is down. Each comes back on its recorded port with
    its data; ZooKeeper first when it is down, since brokers need it. Waits until
    each broker is ready and registered in ZooKeeper. A broker killed a moment ago
    registers only once its previous ZooKeeper session expired
    (zookeeper.session.timeout.ms, 18 s by default): that wait is part of a
    restart after a crash.

    \b
    Examples:
      kt cluster start --broker 2
      kt cluster start            # everything that is down

    Exit codes: 0 started (or already running), 1 no cluster in --dir or a
    process did not start (its port taken, it exited), 2 usage error.
    """
    c = load_cluster(directory)
    ids = check_ids(c, broker_ids)
    # None: everything that is down; [] with --zookeeper alone: ZooKeeper only (it
    # is started whenever it is down, since the brokers need it)
    which: list[int] | None = ids if ids or zookeeper else None
    targets = c.brokers if which is None else [c.broker(i) for i in which]
    running = [f"broker {b.broker_id}" for b in targets if b.running]
    if (zookeeper or which is None) and c.zookeeper is not None and c.zookeeper.running:
        running.insert(0, "ZooKeeper")
    for name in running:
        text = _describe(c, name)
        click.echo(f"{text[0].upper()}{text[1:]} was already running")
    for name in _start(c, which, timeout, not no_check):
        click.echo(f"Started {_describe(c, name)}")


@click.command()
@dir_option
@_broker_option
@_zookeeper_option
@click.option("--kill", is_flag=True, help="SIGKILL (a crash) instead of a clean shutdown.")
@_timeout_option("How long a broker may take to stop cleanly before it is killed.")
@handle_errors
def stop(
    directory: Path, broker_ids: tuple[int, ...], zookeeper: bool, kill: bool, timeout: float
) -> None:
    """Stop brokers (--broker N, repeatable) or ZooKeeper of the cluster in --dir.

    A broker gets SIGTERM, a controlled shutdown: it hands its leaderships over,
    flushes its logs and leaves a clean-shutdown marker. With --kill it gets
    SIGKILL, as in a crash or an OOM kill: its ZooKeeper registration lingers
    until its session expires, and it recovers its logs at the next start. The
    other processes keep running; `kt cluster status` shows what is down, `kt
    cluster start` brings it back, `kt cluster down` stops everything.

    \b
    Examples:
      kt cluster stop --broker 2 --kill
      kt cluster stop --broker 1 --broker 3
      kt cluster stop --zookeeper

    Exit codes: 0 stopped (or was not running), 1 no cluster in --dir or a broker
    had to be killed after --timeout, 2 usage error.
    """
    if not broker_ids and not zookeeper:
        usage_error(
            "what to stop? --broker N (repeatable) or --zookeeper "
            f"(kt cluster down{where(directory)} stops everything)"
        )
    c = load_cluster(directory)
    ids = check_ids(c, broker_ids)
    _stop(c, ids, zookeeper, kill, timeout)


def _stop(c: LocalCluster, ids: list[int], zookeeper: bool, kill: bool, timeout: float) -> None:
    verb = "Killed" if kill else "Stopped"
    for i in ids:
        b = c.broker(i)
        if not b.running:
            click.echo(f"Broker {i} ({b.bootstrap}) was not running")
            continue
        try:
            c.stop_broker(i, kill=kill, timeout=timeout)
        except ClusterError as exc:
            fail(str(exc))
        click.echo(f"{verb} broker {i} ({b.bootstrap})")
    if zookeeper and c.zookeeper is not None:
        if c.zookeeper.running:
            c.zookeeper.stop(kill=kill, timeout=timeout)
            click.echo(f"{verb} ZooKeeper ({c.zookeeper_address})")
        else:
            click.echo(f"ZooKeeper ({c.zookeeper_address}) was not running")


@click.command()
@dir_option
@_broker_option
@_zookeeper_option
@click.option("--kill", is_flag=True, help="SIGKILL (a crash) instead of a clean shutdown.")
@_timeout_option("How long each stop and each start may take.")
@_no_check_option
@handle_errors
def restart(
    directory: Path,
    broker_ids: tuple[int, ...],
    zookeeper: bool,
    kill: bool,
    timeout: float,
    no_check: bool,
) -> None:
    """Stop, then start again, brokers (--broker N, repeatable) or ZooKeeper.

    One broker after another: each is stopped (SIGTERM, or SIGKILL with --kill),
    started on the same port and data and waited for (ready and registered)
    before the next, as in a rolling restart. A broker that was not running is
    just started.

    \b
    Examples:
      kt cluster restart --broker 1
      kt cluster restart --broker 2 --kill
      kt cluster restart --broker 1 --broker 2 --broker 3

    Exit codes: 0 restarted, 1 no cluster in --dir or a process did not stop or
    start, 2 usage error.
    """
    if not broker_ids and not zookeeper:
        usage_error("what to restart? --broker N (repeatable) or --zookeeper")
    c = load_cluster(directory)
    ids = check_ids(c, broker_ids)
    if zookeeper:
        _stop(c, [], True, kill, timeout)
        for name in _start(c, [], timeout, not no_check):
            click.echo(f"Started {_describe(c, name)}")
    for i in ids:
        _stop(c, [i], False, kill, timeout)
        for name in _start(c, [i], timeout, not no_check):
            click.echo(f"Started {_describe(c, name)}")


@click.command()
@dir_option
@click.option("--broker", "broker_ids", type=click.IntRange(min=0), multiple=True,
              metavar="N", help="Broker N's log; repeatable.")  # fmt: skip
@click.option("--zookeeper", is_flag=True, help="ZooKeeper's log.")
@click.option("-f", "--follow", is_flag=True, help="Keep printing what is appended (Ctrl-C ends).")
@click.option("-n", "--lines", type=click.IntRange(min=0), metavar="N",
              help="Only the last N lines of each log (default: all).")  # fmt: skip
@handle_errors
def logs(
    directory: Path,
    broker_ids: tuple[int, ...],
    zookeeper: bool,
    follow: bool,
    lines: int | None,
) -> None:
    """Print the logs of the cluster in --dir: each broker's and ZooKeeper's.

    Each process writes its own log in its directory (broker N:
    DIR/broker-N/broker.log, ZooKeeper: DIR/zookeeper/zookeeper.log), kept across
    restarts; `kt cluster` adds a line when it starts, stops or kills a process,
    so a SIGKILL shows where a log ends. Without --broker or --zookeeper every
    log is printed, one after the other, each line prefixed with its process
    ('broker-2 | ...'); a single log is printed as it is. With --follow, lines
    appended later (from any selected log, as they come) are printed until Ctrl-C.

    \b
    Examples:
      kt cluster logs --broker 2 -n 50
      kt cluster logs -f
      kt cluster logs --zookeeper

    Exit codes: 0 ok (also when Ctrl-C ends --follow), 1 no cluster in --dir,
    2 usage error.
    """
    c = load_cluster(directory)
    ids = check_ids(c, broker_ids)
    sources: list[LogSource] = []
    everything = not ids and not zookeeper
    if (zookeeper or everything) and c.zookeeper is not None:
        sources.append(LogSource("zookeeper", c.zookeeper.log_path))
    for b in c.brokers:
        if everything or b.broker_id in ids:
            sources.append(LogSource(f"broker-{b.broker_id}", b.log_path))
    width = max(len(s.name) for s in sources)
    prefixed = len(sources) > 1

    def show(source: LogSource, line: str) -> None:
        click.echo(f"{source.name:<{width}} | {line}" if prefixed else line)

    missing = [s for s in sources if not s.path.exists()]
    if missing and not follow:
        for s in missing:
            warn(f"{s.name} has no log yet ({s.path})")
    ends: dict[Path, int] = {}
    for s in sources:
        text_lines, ends[s.path] = tail_lines(s.path, lines)
        for line in text_lines:
            show(s, line)
    if follow:
        try:
            follow_logs(sources, ends, show)
        except KeyboardInterrupt:
            return


COMMANDS = (start, stop, restart, logs)
