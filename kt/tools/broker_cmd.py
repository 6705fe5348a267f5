"""`kt broker start`: run a Kafka-compatible broker."""

from __future__ import annotations

import asyncio
import errno
import json
import logging
import os
import socket
import sys
import time
from collections.abc import Callable, Coroutine
from typing import Any

import click

from kt.tools.console import fail, handle_errors, usage_error


@click.group()
def broker() -> None:
    """Run a Kafka-compatible broker."""


class _JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        doc = {
            "ts": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created))
            + f".{int(record.msecs):03d}Z",
            "level": record.levelname.lower(),
            "logger": record.name,
            "msg": record.getMessage(),
        }
        if record.exc_info:
            doc["exc"] = self.formatException(record.exc_info)
        return json.dumps(doc)


@broker.command()
@click.option("--config", "config_file", type=click.Path(dir_okay=False),
              help="A Kafka server.properties file (Kafka's key names).")  # fmt: skip
@click.option("--override", "overrides", multiple=True, metavar="KEY=VALUE",
              help="Set one property; repeatable; wins over --config.")  # fmt: skip
@click.option("--log-format", type=click.Choice(["text", "json"]), default="text",
              show_default=True, help="JSON lines or plain text logs (stderr).")  # fmt: skip
@click.option("--log-level", type=click.Choice(["debug", "info", "warning", "error"]),
              default="info", show_default=True)  # fmt: skip
@handle_errors
def start(
    config_file: str | None, overrides: tuple[str, ...], log_format: str, log_level: str
) -> None:
    """Run the broker in the foreground until SIGTERM or SIGINT.

    With no options this is the embedded default: one broker (node 1), data in
    ./kt-data, listener 127.0.0.1:9092, topics auto-created. Configuration uses
    Apache Kafka's key names (log.dirs, listeners, advertised.listeners, node.id or
    broker.id, num.partitions, log.segment.bytes, log.retention.*,
    auto.create.topics.enable, ...). A clean stop flushes every log, writes the
    checkpoints and a clean-shutdown marker; after a crash (kill -9) the next
    start recovers the logs above their recovery points.

    The broker runs on asyncio's own event loop; KT_EVENT_LOOP=uvloop runs it on
    uvloop instead (when installed).

    \b
    Examples:
      kt broker start
      kt broker start --config /etc/kafka/server.properties
      kt broker start --override listeners=PLAINTEXT://0.0.0.0:9092 \\
          --override log.dirs=/var/lib/kt/data --override num.partitions=3
    """
    from kt.broker.config import ConfigError, load_config
    from kt.broker.server import serve
    from kt.storage.errors import LogDirLockedError, StorageError

    props: dict[str, str] = {}
    for item in overrides:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            usage_error(f"--override expects KEY=VALUE, got {item!r}")
        props[key.strip()] = value.strip()
    try:
        cfg = load_config(config_file, props)
    except ConfigError as exc:
        usage_error(str(exc))
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(
        _JsonFormatter()
        if log_format == "json"
        else logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s")
    )
    root = logging.getLogger("kt")
    root.handlers[:] = [handler]
    root.setLevel(log_level.upper())
    # Kafka's authorizer log (who was denied what) keeps its own logger name, so it
    # can be routed apart; its INFO lines are the denials.
    audit = logging.getLogger("kafka.authorizer.logger")
    audit.handlers[:] = [handler]
    audit.setLevel(log_level.upper())
    audit.propagate = False
    # Named loggers at debug level whatever --log-level says (e.g. kt.timeline, the
    # failover timeline marks bench/cluster_bench.py reads): a diagnostic switch.
    for name in os.environ.get("KT_DEBUG_LOGGERS", "").split(","):
        if name.strip():
            logging.getLogger(name.strip()).setLevel(logging.DEBUG)
    for key in cfg.unknown_keys:
        logging.getLogger("kt.broker").warning("unknown configuration key %s (ignored)", key)
    from kt.broker.membership import MembershipError

    try:
        _run(lambda: serve(cfg))
    except LogDirLockedError as exc:
        fail(f"{exc.path}: another broker is running on this log directory (.lock is held)")
    except MembershipError as exc:
        # ZooKeeper unreachable, a broker id in use, a cluster id mismatch.
        fail(str(exc))
    except StorageError as exc:
        fail(str(exc))
    except OSError as exc:
        # A listener that cannot be bound: a port in use, an address not on this
        # host, a host name that does not resolve (socket.gaierror).
        if isinstance(exc, socket.gaierror) or exc.errno in (
            errno.EADDRINUSE,
            errno.EADDRNOTAVAIL,
        ):
            where = ", ".join(f"{lst.host}:{lst.port}" for lst in cfg.listeners)
            # asyncio wraps the bind error's text; the errno's own words are clearer.
            reason = os.strerror(exc.errno) if exc.errno else exc.strerror
            fail(f"cannot listen on {where}: {reason}")
        raise
    except KeyboardInterrupt:
        pass


#: KT_EVENT_LOOP's values, the default first. asyncio's own loop is the default even
#: where uvloop is installed: measured side by side (bench/event_loop_bench.py,
#: docs/design/event-loops.md) uvloop was no faster for this broker, whose time goes
#: to Python handlers rather than the loop, and it has no sendfile (fetches copy).
EVENT_LOOPS = ("asyncio", "uvloop")


def _loop_factory() -> tuple[str, Callable[[], asyncio.AbstractEventLoop]]:
    """The event loop KT_EVENT_LOOP asks for: its name and a factory for it."""
    choice = os.environ.get("KT_EVENT_LOOP", "").strip().lower() or EVENT_LOOPS[0]
    if choice not in EVENT_LOOPS:
        usage_error(f"KT_EVENT_LOOP: expected one of {', '.join(EVENT_LOOPS)}, got {choice!r}")
    if choice == "uvloop":
        try:
            import uvloop
        except ImportError:
            fail("KT_EVENT_LOOP=uvloop, but uvloop is not installed (pip install uvloop)")
        return f"uvloop {uvloop.__version__}", uvloop.new_event_loop
    return "asyncio", asyncio.new_event_loop


def _run(main: Callable[[], Coroutine[Any, Any, None]]) -> None:
    """Run `main()` on the event loop KT_EVENT_LOOP chooses (chosen first, so a bad
    choice leaves no coroutine never awaited)."""
    _name, factory = _loop_factory()
    with asyncio.Runner(loop_factory=factory) as runner:
        runner.run(main())
