"""`kt cluster up|down|status|describe`: run a local ZooKeeper-coordinated cluster, and
describe any cluster: controller, brokers, racks, what each broker leads and hosts.
`kt cluster start|stop|restart|logs` (one process at a time) are in
kt/tools/local_cluster_cmd.py."""

from __future__ import annotations

import warnings
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import click
from click.core import ParameterSource

from kt.admin.describe import BrokerLoad, controller_warning
from kt.admin.describe import broker_loads as describe_loads
from kt.client import ClusterDescription, KafkaClient, TopicInfo
from kt.tools.console import emit_json, fail, handle_errors, render_table, usage_error, warn
from kt.tools.local_cluster import STATE_FILE, ClusterError, LocalCluster, check_java
from kt.tools.local_cluster_cmd import COMMANDS as LOCAL_COMMANDS
from kt.tools.local_cluster_cmd import DEFAULT_DIR as DEFAULT_DIR  # re-exported
from kt.tools.local_cluster_cmd import dir_option, down_hints, load_cluster, where
from kt.tools.wire import Wire, wire_options


@click.group()
def cluster() -> None:
    """Run a local cluster (ZooKeeper and kt brokers) and describe clusters.

    \b
    Examples:
      kt cluster up --brokers 3 --racks r1,r2,r3
      kt cluster stop --broker 2 --kill     # practise a crash
      kt cluster status                     # broker 2 is down, and how to start it
      kt cluster start --broker 2
      kt cluster logs --broker 2
      kt cluster describe -b 127.0.0.1:9092
      kt cluster describe --json | jq .controller
      kt cluster down
    """


for _command in LOCAL_COMMANDS:
    cluster.add_command(_command)


def _parse_racks(text: str | None) -> list[str] | None:
    if text is None:
        return None
    racks = [r.strip() for r in text.split(",")]
    if not all(racks):
        usage_error(f"--racks: empty rack name in {text!r}")
    return racks


@cluster.command()
@click.option("--brokers", "count", type=click.IntRange(min=1, max=64), default=3,
              help="How many brokers (ids 1..N; default: the last run's in --dir, "
                   "else 3).")  # fmt: skip
@dir_option
@click.option("--racks", metavar="R1,R2,...",
              help="Racks given out in turn: broker N gets the ((N-1) mod count)-th.")  # fmt: skip
@click.option("--port-base", type=click.IntRange(min=1, max=65535), metavar="PORT",
              help="Broker N listens on PORT+N-1 (default: the last run's ports, "
                   "else free ones).")  # fmt: skip
@click.option("--zookeeper-port", type=click.IntRange(min=0, max=65535), default=0,
              metavar="PORT", help="ZooKeeper's client port (default: the last run's, "
                                   "else a free one).")  # fmt: skip
@click.option("--chroot", default="", metavar="/PATH",
              help="The brokers' ZooKeeper chroot (zookeeper.connect=HOST:PORT/PATH).")  # fmt: skip
@click.option("--override", "overrides", multiple=True, metavar="KEY=VALUE",
              help="A broker property for every broker; repeatable.")  # fmt: skip
@click.option("--timeout", type=click.FloatRange(min=1), default=60.0, show_default=True,
              metavar="SECONDS", help="How long to wait for the brokers to be ready.")  # fmt: skip
@click.option("--no-registration-check", "no_check", is_flag=True, hidden=True,
              help="Do not wait for the brokers to register in ZooKeeper.")  # fmt: skip
@click.option("--secure", is_flag=True,
              help="SASL_SSL with SCRAM-SHA-512 on every broker, brokers to each other "
                   "included: a local CA, an admin super user and a client properties "
                   "file (kept in DIR/security).")  # fmt: skip
@click.option("--json", "as_json", is_flag=True, help="One JSON object: addresses and pids.")
@handle_errors
def up(
    count: int,
    directory: Path,
    racks: str | None,
    port_base: int | None,
    zookeeper_port: int,
    chroot: str,
    overrides: tuple[str, ...],
    timeout: float,
    no_check: bool,
    secure: bool,
    as_json: bool,
) -> None:
    """Start a local cluster in the background, or the parts of it that are down.

    A standalone ZooKeeper and N `kt broker start` processes on 127.0.0.1 joined
    through it.

    Returns once every broker is ready and registered in ZooKeeper; the processes keep
    running. Prints the bootstrap servers, the ZooKeeper address and how to stop it.
    Data persists in --dir across `kt cluster down` and `up`, and so do the ports
    and the settings: the next `up` in the same --dir gives every process the port
    it had (one that another process took meanwhile moves to a free port, with a
    warning), and options not given are those of the last run (--brokers, --racks,
    --chroot, --override; --override given replaces the recorded ones). Each broker
    logs to DIR/broker-N/broker.log (`kt cluster logs`).

    On a cluster that partly runs (a broker was stopped or died), `up` starts what
    is down, as `kt cluster start` does, and says what already ran; on one that
    fully runs it only prints the addresses. Options that differ from the running
    cluster's are refused: `kt cluster down` first. Needs java and Debian's
    zookeeper package (scripts/setup installs them).

    \b
    Examples:
      kt cluster up
      kt cluster up --brokers 5 --racks r1,r2,r3 --port-base 9092 --dir /tmp/c1
      kt cluster up --override default.replication.factor=3 --override min.insync.replicas=2
      kt cluster up --secure && kcat -F kt-cluster/security/client.properties -L

    With --secure every listener is SASL_SSL with SCRAM-SHA-512 (the brokers' own
    connections too) and an ACL authorizer runs with the user admin as super user:
    DIR/security holds the local CA (ca.crt), the brokers' certificates and the
    admin's client.properties (mode 0600), which kcat -F and kt --command-config
    read; kt commands run in the cluster's parent directory (or with
    KT_CLUSTER_DIR) use it by themselves. Passwords are never printed.

    Exit codes: 0 up, 1 it could not start (a running cluster in --dir has other
    settings, a port is taken, java missing, a broker failed), 2 usage error.
    """
    ctx = click.get_current_context()

    def given(name: str) -> bool:
        return ctx.get_parameter_source(name) not in (ParameterSource.DEFAULT, None)

    props: dict[str, str] = {}
    for item in overrides:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            usage_error(f"--override expects KEY=VALUE, got {item!r}")
        props[key.strip()] = value.strip()
    rack_list = _parse_racks(racks)
    previous = None
    if (directory / STATE_FILE).exists():
        try:
            previous = LocalCluster.load(directory)
        except ClusterError as exc:
            # as if new: the data stays, ports and settings are chosen afresh
            warn(f"{exc}; starting with the options given")
    if previous is not None:
        # what was not given this time is what the cluster had
        if not given("count"):
            count = len(previous.brokers) or count
        if not given("racks"):
            rack_list = previous.racks
        if not given("chroot"):
            chroot = previous.chroot
        if not given("overrides"):
            props = dict(previous.user_overrides)
        if not given("secure"):
            secure = previous.secure
    if port_base is not None and port_base + count - 1 > 65535:
        usage_error(f"--port-base {port_base}: {count} brokers do not fit below port 65536")
    try:
        check_java()
        c = LocalCluster.create(
            directory,
            count,
            racks=rack_list,
            port_base=port_base,
            zookeeper_port=zookeeper_port,
            chroot=chroot,
            overrides=props,
            previous=previous,
            secure=secure,
        )
    except ClusterError as exc:
        fail(str(exc))
    already: list[str] = []
    started: list[str] = []
    if previous is not None and previous.running:
        differs = _differences(previous, c, port_base is not None, zookeeper_port != 0)
        if differs:
            fail(
                f"a cluster runs in {previous.directory} with other settings "
                f"({'; '.join(differs)}): kt cluster down{where(directory)} first"
            )
        c = previous
        if c.zookeeper is not None and c.zookeeper.running:
            already.append("ZooKeeper")
        already += [f"broker {b.broker_id}" for b in c.brokers if b.running]
        try:
            started = c.start_missing(
                timeout=timeout,
                verify_registration=not no_check,
                progress=lambda m: click.echo(f"kt: {m}", err=True),
            )
        except ClusterError as exc:
            fail(str(exc))
    else:
        for note in c.notes:
            warn(note)
        try:
            c.start(timeout=timeout, verify_registration=not no_check)
        except ClusterError as exc:
            fail(str(exc))
        started = ["ZooKeeper", *(f"broker {b.broker_id}" for b in c.brokers)]
    if as_json:
        emit_json(
            {
                "dir": str(c.directory),
                "bootstrap_servers": c.bootstrap_servers,
                "zookeeper": c.zookeeper_connect,
                "already_running": already,
                "started": started,
                "processes": c.status(),
                "client_properties": str(c.client_properties) if c.client_properties else None,
            }
        )
        return
    click.echo(f"Cluster up in {c.directory}: {len(c.brokers)} broker(s)")
    if already:
        click.echo(f"Already running: {', '.join(already)}")
        click.echo(f"Started: {', '.join(started) or 'nothing (all was running)'}")
    click.echo(f"Bootstrap servers: {c.bootstrap_servers}")
    click.echo(f"ZooKeeper: {c.zookeeper_connect}")
    if c.client_properties is not None:
        props_file = c.client_properties
        click.echo("Security: SASL_SSL with SCRAM-SHA-512 everywhere; super user admin")
        click.echo(f"Client properties: {props_file} (mode 0600: it holds the password)")
        click.echo(f"Try: kcat -F {props_file} -L")
        click.echo(f"     kt topic list --command-config {props_file}")
        click.echo(f"A kt profile: kt profile create local-secure --from-file {props_file}")
    click.echo(f"Logs: kt cluster logs{where(directory)} (each broker's in its directory)")
    click.echo(f"Stop it with: kt cluster down{where(directory)}")


def _differences(
    running: LocalCluster, wanted: LocalCluster, port_base: bool, zookeeper_port: bool
) -> list[str]:
    """The settings in which `wanted` (this `up`'s options) differs from the cluster
    that runs, as the options that ask for them."""
    out = []
    if len(wanted.brokers) != len(running.brokers):
        out.append(f"--brokers {len(wanted.brokers)}, it has {len(running.brokers)}")
    if port_base and [b.port for b in wanted.brokers] != [b.port for b in running.brokers]:
        out.append(f"--port-base {wanted.brokers[0].port}, it has {running.bootstrap_servers}")
    if zookeeper_port and wanted.zookeeper_address != running.zookeeper_address:
        out.append(f"--zookeeper-port, it has {running.zookeeper_address}")
    if [b.rack for b in wanted.brokers] != [b.rack for b in running.brokers]:
        out.append("--racks")
    if wanted.chroot != running.chroot:
        out.append(f"--chroot {wanted.chroot or '(none)'}, it has {running.chroot or '(none)'}")
    if wanted.overrides != running.overrides:
        out.append("--override")
    if wanted.secure != running.secure:
        out.append("--secure" if wanted.secure else "no --secure")
    return out


@cluster.command()
@dir_option
@click.option("--kill", is_flag=True, help="SIGKILL instead of a clean (controlled) shutdown.")
@click.option("--timeout", type=click.FloatRange(min=1), default=60.0, show_default=True,
              metavar="SECONDS", help="How long each broker may take to stop.")  # fmt: skip
@handle_errors
def down(directory: Path, kill: bool, timeout: float) -> None:
    """Stop the cluster `kt cluster up` started in --dir.

    Every broker with SIGTERM (a controlled shutdown) and wait, then ZooKeeper. The
    data, the ports and the settings stay in --dir for the next `kt cluster up`; to
    stop a single broker, `kt cluster stop --broker N`.

    Exit codes: 0 stopped (or nothing was running), 1 no cluster in --dir or a
    broker had to be killed after --timeout, 2 usage error.
    """
    c = load_cluster(directory)
    was = {s["id"]: s["running"] for s in c.status() if s["role"] == "broker"}
    zk_was = c.zookeeper is not None and c.zookeeper.running
    problems = c.stop(kill=kill, timeout=timeout)
    verb = "Killed" if kill else "Stopped"
    for b in c.brokers:
        if was.get(b.broker_id):
            click.echo(f"{verb} broker {b.broker_id} ({b.bootstrap})")
    if zk_was:
        click.echo(f"{verb} ZooKeeper ({c.zookeeper_address})")
    if not zk_was and not any(was.values()):
        click.echo(f"Nothing was running in {c.directory}")
    for p in problems:
        click.echo(f"kt: error: {p}", err=True)
    if problems:
        raise SystemExit(1)


@cluster.command()
@dir_option
@click.option("--json", "as_json", is_flag=True, help="A JSON array of processes.")
@handle_errors
def status(directory: Path, as_json: bool) -> None:
    """Which processes of the cluster in --dir run: ZooKeeper and each broker.

    STATE is running, paused (SIGSTOP) or stopped. For each process that is down a
    line on stderr says how to start it again (`kt cluster start --broker N`) and
    where its log is.

    Exit codes: 0 all running, 1 some process is down (or no cluster in --dir).
    """
    c = load_cluster(directory)
    procs = c.status()
    if as_json:
        emit_json(procs)
    else:
        render_table(
            ["ROLE", "ID", "ADDRESS", "RACK", "PID", "STATE"],
            [
                [
                    p["role"],
                    "-" if p["id"] is None else p["id"],
                    p["address"],
                    p.get("rack") or "-",
                    p["pid"] if p["running"] else "-",
                    p["state"],
                ]
                for p in procs
            ],
        )
        for hint in down_hints(c, directory):
            click.echo(f"kt: {hint}", err=True)
    if not all(p["running"] for p in procs):
        raise SystemExit(1)


def broker_loads(topics: Iterable[TopicInfo], broker_ids: Sequence[int]) -> dict[int, BrokerLoad]:
    """Per broker (the live ones and any other named as a replica): see
    `kt.admin.describe.BrokerLoad` (the TUI's brokers view counts the same)."""
    return describe_loads((p for t in topics for p in t.partitions.values()), broker_ids)


def controller_epoch(zookeeper: str, timeout: float) -> int | None:
    """/controller_epoch read with kazoo from HOST:PORT[/chroot]; None when absent."""
    try:
        from kazoo.client import KazooClient  # type: ignore[import-untyped, unused-ignore]
        from kazoo.exceptions import NoNodeError  # type: ignore[import-untyped, unused-ignore]
        from kazoo.handlers.threading import (  # type: ignore[import-untyped, unused-ignore]
            KazooTimeoutError,
        )
    except ImportError:
        fail("--zookeeper needs kazoo (pip install kazoo; scripts/setup installs it)")
    zk = KazooClient(hosts=zookeeper, timeout=timeout, read_only=True)
    try:
        with warnings.catch_warnings():  # e.g. "No chroot path exists": we report it ourselves
            warnings.simplefilter("ignore")
            zk.start(timeout=timeout)
    except KazooTimeoutError:
        fail(f"cannot connect to ZooKeeper at {zookeeper} within {timeout:g}s")
    try:
        data, _ = zk.get("/controller_epoch")
        return int(data.decode().strip())
    except NoNodeError:
        return None
    except ValueError:
        fail(f"{zookeeper}: /controller_epoch is not an integer")
    finally:
        zk.stop()
        zk.close()


@cluster.command()
@wire_options
@click.option("--zookeeper", metavar="HOST:PORT[/CHROOT]",
              help="Also read the controller epoch from this ZooKeeper.")  # fmt: skip
@click.option("--json", "as_json", is_flag=True, help="One JSON object.")
@handle_errors
def describe(wire: Wire, zookeeper: str | None, as_json: bool) -> None:
    """Print the cluster id, the controller and a table of brokers.

    Columns: ID HOST PORT RACK LEADERS REPLICAS URP (under-replicated partitions it
    leads) OFFLINE (its replicas reported offline) PREFERRED (partitions whose
    preferred, first, replica it is) IMBALANCE (the share of those it does not lead:
    Kafka's leader imbalance, which the auto leader rebalance keeps under
    leader.imbalance.per.broker.percentage).

    Brokers named as replicas but missing from the cluster's metadata are listed
    with host 'offline'. Uses DescribeCluster when the broker has it, else Metadata;
    with --zookeeper also prints the controller epoch from /controller_epoch. A
    controller id that is not among the brokers listed is flagged with a warning
    line on stderr.
    """

    async def go(c: KafkaClient) -> tuple[ClusterDescription, dict[str, TopicInfo]]:
        return await c.describe_cluster(), await c.list_topics(include_internal=True)

    d, topics = wire.run(go)
    epoch = controller_epoch(zookeeper, min(wire.timeout, 10.0)) if zookeeper else None
    live = {b.node_id: b for b in d.brokers}
    loads = broker_loads(topics.values(), sorted(live))
    if (odd := controller_warning(d.controller_id, live)) is not None:
        warn(odd)
    rows: list[dict[str, Any]] = []
    for node in sorted(loads):
        b = live.get(node)
        load = loads[node]
        rows.append(
            {
                "id": node,
                "live": b is not None,
                "host": b.host if b else None,
                "port": b.port if b else None,
                "rack": b.rack if b else None,
                "controller": node == d.controller_id,
                "leaders": load.leaders,
                "replicas": load.replicas,
                "under_replicated": load.under_replicated_led,
                "offline_replicas": load.offline_replicas,
                "preferred_leaders": load.preferred,
                "leader_imbalance_percent": round(load.imbalance_percent, 1),
            }
        )
    if as_json:
        doc: dict[str, Any] = {
            "cluster_id": d.cluster_id,
            "controller": d.controller_id,
            "brokers": rows,
        }
        if zookeeper:
            doc["controller_epoch"] = epoch
        emit_json(doc)
        return
    click.echo(f"Cluster ID: {d.cluster_id or '-'}")
    click.echo(f"Controller: {d.controller_id if d.controller_id >= 0 else '-'}")
    if zookeeper:
        click.echo(f"Controller epoch: {epoch if epoch is not None else '-'}")
    render_table(
        [
            "ID",
            "HOST",
            "PORT",
            "RACK",
            "LEADERS",
            "REPLICAS",
            "URP",
            "OFFLINE",
            "PREFERRED",
            "IMBALANCE",
        ],
        [
            [
                r["id"],
                r["host"] if r["live"] else "offline",
                r["port"] if r["live"] else "-",
                r["rack"] or "-",
                r["leaders"],
                r["replicas"],
                r["under_replicated"],
                r["offline_replicas"],
                r["preferred_leaders"],
                f"{r['leader_imbalance_percent']:.1f}%",
            ]
            for r in rows
        ],
    )
