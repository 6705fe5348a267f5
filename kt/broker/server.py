"""Running a broker: open the logs, listen, serve until SIGTERM/SIGINT, shut down cleanly.

Startup order: check that every listener's address can be bound, then open the
log directories (locks, meta.properties, recovery), then listen. A broker that
cannot listen (port taken) fails before it creates or touches a data directory.

Services start after the listeners are bound: the group coordinator (loads
`__consumer_offsets`), then the log cleaner. Shutdown order: stop accepting,
close connections, stop the log cleaner and the group coordinator, stop
background tasks, then flush every log, write the checkpoints and the
clean-shutdown marker, and release the directory locks — so a restart after a
clean stop skips recovery.
"""

from __future__ import annotations

import asyncio
import logging
import signal
import socket
import time

from kt.broker.broker import Broker
from kt.broker.config import BrokerConfig, Listener
from kt.broker.network import NetworkServer

log = logging.getLogger("kt.broker")


async def serve(config: BrokerConfig, ready: asyncio.Event | None = None) -> None:
    """Run the broker until cancelled or signalled."""
    started = time.monotonic()
    check_listeners(config.listeners)
    broker = Broker(config)
    broker.open()
    running = False
    net = NetworkServer(
        broker,
        config.get_int("socket.request.max.bytes"),
        config.get_int("connections.max.idle.ms"),
    )
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        try:
            loop.add_signal_handler(sig, stop.set)
        except (NotImplementedError, RuntimeError):
            pass
    try:
        for lst in config.listeners:
            port = await net.start(lst.host, lst.port)
            broker.bound_listeners.append(Listener(lst.name, lst.host, port))
            log.info("listening on %s://%s:%d", lst.name, lst.host or "0.0.0.0", port)
        broker.start_background_tasks()
        await broker.group_coordinator.start()
        await broker.log_cleaner.start()
        log.info(
            "kt broker %d started in %.2fs (cluster %s, %d partitions, log dirs %s)",
            broker.node_id, time.monotonic() - started, broker.cluster_id,
            len(broker.replica_manager), ",".join(str(d) for d in broker.logs.log_dirs),
        )  # fmt: skip
        # A line scripts and tests can wait for.
        print(
            "kt broker ready: "
            + " ".join(f"{lst.host}:{lst.port}" for lst in broker.bound_listeners),
            flush=True,
        )
        if ready is not None:
            ready.set()
        running = True
        await stop.wait()
        log.info("shutting down")
    finally:
        broker.stopping = True
        broker.replica_manager.wake_all()
        await net.stop()
        # The reverse of the start order; stopping a service never started is harmless.
        await broker.log_cleaner.stop()
        await broker.group_coordinator.stop()
        await broker.stop_background_tasks()
        broker.close()
        if running:
            log.info("stopped cleanly")
        else:
            # The error that stopped the start is reported by the caller.
            log.info("start failed: logs closed")


def check_listeners(listeners: list[Listener]) -> None:
    """Bind (and release) each listener's addresses as the server will, so a port in
    use fails the start before any log directory is created or locked.

    Raises the OSError of the first address that cannot be bound (EADDRINUSE for a
    port taken). A port taken between this check and the real bind still fails the
    start then, after the logs were opened.
    """
    for lst in listeners:
        if lst.port == 0:
            continue  # any free port: nothing to check
        infos = socket.getaddrinfo(
            lst.host or None, lst.port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
        )
        for family, kind, proto, _, address in infos:
            with socket.socket(family, kind, proto) as probe:
                # As asyncio's create_server: SO_REUSEADDR, and IPv6 sockets only for
                # IPv6 (else binding :: after 0.0.0.0 would clash with ourselves).
                probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                if family == socket.AF_INET6:
                    probe.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
                probe.bind(address)
