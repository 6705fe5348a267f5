"""Running a broker: join the cluster, serve until SIGTERM/SIGINT, leave cleanly.

Start, in order (each step can fail with one clear line and no half-made state):
1. bind the listeners (a taken port fails here, before any data directory is
   touched), without accepting yet;
2. connect to the coordination store — ZooKeeper when `zookeeper.connect` is set,
   else the in-process store in the first log directory — and agree on the
   cluster id;
3. lock the log directories and load every partition log (recovering after an
   unclean stop); each is hosted with no role until the controller assigns one;
4. accept connections, register `/brokers/ids/N`, stand for controller; the
   single-node broker elects itself and sends itself its LeaderAndIsr;
5. wait until the controller's view reached us (roles and metadata), start the
   group coordinator and the log cleaner, print the ready line.

Stop: controlled shutdown first (the controller moves leadership away), then stop
accepting and close connections, stop the services, leave the cluster (the
registration disappears with the session), and flush every log, write the
checkpoints and the clean-shutdown marker, release the directory locks.
"""

from __future__ import annotations

import asyncio
import logging
import signal
import time
from pathlib import Path

from kt.broker.broker import Broker
from kt.broker.config import BrokerConfig, Listener, new_cluster_id
from kt.broker.connection_quotas import ConnectionQuotas, parse_overrides
from kt.broker.membership import ClusterMembership
from kt.broker.metadata.in_process import InProcessStore
from kt.broker.metadata.store import CoordinationStore
from kt.broker.metadata.zookeeper import ZooKeeperStore
from kt.broker.network import NetworkServer
from kt.broker.security.broker_security import BrokerSecurity
from kt.broker.security.inter_broker import reload_client_tls
from kt.broker.security.listeners import EndPoint
from kt.storage.meta_properties import read_meta_properties

log = logging.getLogger("kt.broker")

READY_TIMEOUT_S = 30.0


def make_store(config: BrokerConfig) -> CoordinationStore:
    """ZooKeeper for a cluster member; the in-process store for the single node."""
    connect = config.zookeeper_connect
    if connect is not None:
        return ZooKeeperStore(
            connect, session_timeout_ms=config.get_int("zookeeper.session.timeout.ms")
        )
    return InProcessStore.in_dir(config.log_dirs[0].resolve(), broker_id=config.node_id)


def _candidate_cluster_id(config: BrokerConfig) -> str:
    """The id to propose if the store has none: configured, else the one in an
    existing meta.properties (an existing data directory), else a new one."""
    if config.cluster_id:
        return config.cluster_id
    for d in config.log_dirs:
        try:
            meta = read_meta_properties(Path(d) / "meta.properties")
        except Exception:
            continue
        if meta.cluster_id:
            return meta.cluster_id
    return new_cluster_id()


class RunningBroker:
    """A broker through its start and stop sequence (see the module docstring).

    `network=False` runs it without sockets (in-process tests): the controller
    reaches its own broker through the loopback link either way.
    """

    def __init__(self, config: BrokerConfig, *, network: bool = True) -> None:
        self.config = config
        self.broker = Broker(config, make_store(config))
        self.net = (
            NetworkServer(
                self.broker.dispatcher,
                config.get_int("socket.request.max.bytes"),
                config.get_int("connections.max.idle.ms"),
                quotas=ConnectionQuotas(
                    config.get_int("max.connections"),
                    config.get_int("max.connections.per.ip"),
                    parse_overrides(config.value("max.connections.per.ip.overrides")),
                ),
            )
            if network
            else None
        )
        self.membership: ClusterMembership = self.broker.membership
        # Every listener's TLS context and SASL settings (checked by load_config).
        endpoints = (
            config.listener_settings.listeners
            if config.listener_settings is not None
            else [EndPoint(lst.name, lst.host, lst.port, lst.protocol) for lst in config.listeners]
        )
        self.security = BrokerSecurity(config.props, endpoints)
        # KIP-226: a keystore replaced through the dynamic configs reaches new connections
        self.broker.reconfigure_hooks.append(self._reload_tls)
        self._opened = False
        self._joined = False

    def _reload_tls(self, config: BrokerConfig) -> None:
        """KIP-226: a keystore or truststore replaced through the dynamic configs
        reaches new connections, accepted (the listeners) and made (to the peers)."""
        props = {**config.props, **config.dynamic_own}
        self.security.reload_tls(props)
        if config.listener_settings is not None:
            reload_client_tls(props, config.listener_settings, config.inter_broker_client)

    async def start(self) -> None:
        """Bind, connect, open the logs, join, wait for the controller's view, start
        the services. Raises on failure (the caller runs `stop()`)."""
        started = time.monotonic()
        config, broker = self.config, self.broker
        for lst in config.listeners:
            port = (
                await self.net.start(
                    lst.host, lst.port, serving=False, security=self.security.listener(lst.name)
                )
                if self.net
                else lst.port
            )
            broker.bound_listeners.append(Listener(lst.name, lst.host, port, lst.protocol))
        membership = self.membership
        candidate = _candidate_cluster_id(config)
        if config.zookeeper_connect is None:
            # The in-process store keeps its file in the first log directory: the
            # directories are validated and locked before it is opened.
            candidate = broker.lock_dirs(candidate)
        cluster_id = await membership.connect(candidate)
        # SCRAM credentials and JWKS keys, before the first connection is accepted
        await self.security.start(membership.store, broker.authorizer)
        await membership.load_dynamic_broker_configs()
        broker.open(cluster_id, await membership.topic_configs())
        self._opened = True
        if config.zookeeper_connect is None:
            await _adopt_orphans(broker, membership)
        if self.net is not None:
            for lst in broker.bound_listeners:
                log.info("listening on %s://%s:%d", lst.name, lst.host or "0.0.0.0", lst.port)
            await self.net.serve()
        broker.start_background_tasks()
        await membership.join()
        self._joined = True
        broker.start_replication_tasks()
        await _wait_until_ready(broker)
        await broker.group_coordinator.start()
        await broker.transactions.start()
        await broker.log_cleaner.start()
        log.info(
            "kt broker %d started in %.2fs (cluster %s, %s, %d partitions, log dirs %s)",
            broker.node_id, time.monotonic() - started, broker.cluster_id,
            f"ZooKeeper {config.zookeeper_connect}" if config.zookeeper_connect else "single node",
            len(broker.replica_manager), ",".join(str(d) for d in broker.logs.log_dirs),
        )  # fmt: skip
        # Logged once started, not before: a start-up failure stays one error line.
        # (uvloop's loop class lives in the uvloop package, asyncio's in asyncio.)
        loop_kind = type(asyncio.get_running_loop()).__module__.split(".")[0]
        log.info("event loop: %s", "uvloop" if loop_kind == "uvloop" else "asyncio")

    async def stop(self, *, controlled: bool = True) -> None:
        """Controlled shutdown (when asked and joined), then stop everything."""
        broker = self.broker
        if controlled and self._joined:
            await self.membership.controlled_shutdown()
        broker.stopping = True
        broker.replica_manager.wake_all()
        if self.net is not None:
            await self.net.stop()
        # The reverse of the start order; stopping a service never started is harmless.
        await broker.log_cleaner.stop()
        await broker.transactions.stop()
        await broker.group_coordinator.stop()
        await broker.stop_replication_tasks()
        await self.membership.leave()
        await broker.stop_background_tasks()
        self.security.close()
        if self._opened:
            broker.close()
        if self._joined:
            log.info("stopped cleanly")
        else:
            # The error that stopped the start is reported by the caller (one line).
            if self._opened:
                log.info("start failed: logs closed")
            else:
                log.debug("start failed")


async def serve(config: BrokerConfig, ready: asyncio.Event | None = None) -> None:
    """Run the broker until cancelled or signalled."""
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        try:
            loop.add_signal_handler(sig, stop.set)
        except (NotImplementedError, RuntimeError):
            pass
    running = RunningBroker(config)
    interrupted = False
    try:
        await running.start()
        # A line scripts and tests can wait for.
        print(
            "kt broker ready: "
            + " ".join(f"{lst.host}:{lst.port}" for lst in running.broker.bound_listeners),
            flush=True,
        )
        if ready is not None:
            ready.set()
        await stop.wait()
        interrupted = True
        log.info("shutting down")
    finally:
        await running.stop(controlled=interrupted)


async def _adopt_orphans(broker: Broker, membership: ClusterMembership) -> None:
    """Single node: logs on disk that no topic knows (a copied Kafka log directory,
    or data from before the metadata store) become topics led here."""
    known = set(await membership.cluster.get_all_topics())
    for name, (topic_id, count) in broker.orphan_partitions().items():
        if name in known:
            continue
        assignment = {p: [broker.node_id] for p in range(count)}
        await membership.cluster.create_topic(name, topic_id, assignment, {})
        log.info("adopted topic %s (%d partitions found on disk)", name, count)


async def _wait_until_ready(broker: Broker) -> None:
    """Until the controller's metadata reached us and every partition hosted here
    that it knows got its role (bounded: a slow controller only delays the line)."""
    cache = broker.metadata.cache
    deadline = time.monotonic() + READY_TIMEOUT_S
    while time.monotonic() < deadline:
        if cache.controller_id is not None and all(
            part.leader_epoch >= 0
            for part in broker.replica_manager
            if cache.partition(part.tp.topic, part.tp.partition) is not None
        ):
            return
        await broker.replica_manager.metadata_changed(0.2)
    log.warning("the controller's metadata did not arrive within %.0fs", READY_TIMEOUT_S)
