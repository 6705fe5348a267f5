"""Running a broker: open the logs, listen, serve until SIGTERM/SIGINT, shut down cleanly.

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
import time

from kt.broker.broker import Broker
from kt.broker.config import BrokerConfig, Listener
from kt.broker.network import NetworkServer

log = logging.getLogger("kt.broker")


async def serve(config: BrokerConfig, ready: asyncio.Event | None = None) -> None:
    """Run the broker until cancelled or signalled."""
    started = time.monotonic()
    broker = Broker(config)
    broker.open()
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
        log.info("stopped cleanly")
