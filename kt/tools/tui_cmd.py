"""`kt tui`: the live cluster dashboard (kt/tui), started from the command line."""

from __future__ import annotations

import asyncio
import contextlib
import sys

import click

from kt.tools.connect_settings import ConnectSettings
from kt.tools.console import handle_errors, usage_error
from kt.tools.wire import MAX_CONNECT_TIMEOUT, connection_options, wire_from_settings


@click.command()
@connection_options
@click.option(
    "--interval",
    "-i",
    type=click.FloatRange(min=0.2),
    default=2.0,
    show_default=True,
    metavar="SECONDS",
    help="Refresh every SECONDS (+/- change it, p pauses).",
)
@click.option(
    "--timeout",
    type=click.FloatRange(min=0.1),
    default=5.0,
    show_default=True,
    metavar="SECONDS",
    help="Per-request timeout of a refresh; a cluster slower than this shows as unreachable.",
)
@click.option(
    "--theme",
    default=None,
    metavar="NAME",
    help="Textual theme, e.g. textual-light, textual-dark, nord (the palette changes it too).",
)
@click.option("--paused", is_flag=True, help="Start with the periodic refresh paused.")
@handle_errors
def tui(
    settings: ConnectSettings, interval: float, timeout: float, theme: str | None, paused: bool
) -> None:
    """Watch a cluster live in a terminal dashboard.

    Brokers, topics, partitions, consumer lag, log directories and messages,
    refreshed in the background.

    \b
    Screens (keys): 1 overview, 2 topics, 3 consumer groups, 4 log directories,
    5 messages, 6 brokers (racks, the controller, leaders and replicas per
    broker, under-replicated and offline partitions), ? help (every key
    binding); Ctrl+P opens the command palette.
    p pauses the refresh, +/- change its interval, q quits. Actions (create
    or delete a topic, add partitions, alter a config, reset a group's
    offsets) each ask for confirmation, showing what will happen.

    \b
    Examples:
      kt tui -b broker1:9092,broker2:9092
      kt tui --interval 1 --theme textual-light
      KT_BOOTSTRAP_SERVER=localhost:9092 kt tui

    Exit codes: 0 ok, 2 usage error (bad option or bootstrap list).
    """
    from kt.client import KafkaClient, parse_bootstrap
    from kt.tui.actions import ClusterActions
    from kt.tui.app import KtApp
    from kt.tui.sampler import ClusterSampler

    bootstrap = settings.bootstrap
    try:
        parse_bootstrap(bootstrap)
    except ValueError as exc:
        usage_error(f"--bootstrap-server: {exc}")
    # TLS/SASL settings checked now (a bad one is a usage error), shared by every client
    security = wire_from_settings(settings, timeout, True).security()

    def client_factory() -> KafkaClient:
        return KafkaClient(
            bootstrap,
            client_id="kt-tui",
            request_timeout=max(timeout, 5.0),
            connect_timeout=min(timeout, MAX_CONNECT_TIMEOUT),
            security=security,
        )

    sampler = ClusterSampler(bootstrap, request_timeout=timeout, security=security)
    app = KtApp(
        sampler,
        bootstrap=bootstrap,
        interval=interval,
        client_factory=client_factory,
        actions=ClusterActions(bootstrap, request_timeout=max(timeout, 15.0), security=security),
        paused=paused,
        theme=theme,
        principal=security.describe_principal(),
    )
    if theme is not None and theme not in app.available_themes:
        names = ", ".join(sorted(app.available_themes))
        usage_error(f"--theme: unknown theme {theme!r} (one of {names})")
    # The sampler's client runs in its own thread; a 1 ms GIL switch interval
    # (CPython's default is 5 ms) keeps the interface's loop responsive while it
    # decodes a large refresh (bench/tui_bench.py: worst tick 38 -> 21 ms).
    sys.setswitchinterval(0.001)
    try:
        app.run()
    finally:
        with contextlib.suppress(Exception):
            asyncio.run(app.close_sampler())
