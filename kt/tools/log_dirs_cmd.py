"""`kt log-dirs describe`: brokers' log directories and partition sizes."""

from __future__ import annotations

import click

from kt.client import KafkaClient, LogDirInfo
from kt.protocol.errors import ErrorCode
from kt.tools.console import emit_json, handle_errors, render_table, usage_error
from kt.tools.wire import Wire, wire_options


@click.group("log-dirs")
def log_dirs() -> None:
    """Describe brokers' log directories (like kafka-log-dirs.sh).

    \b
    Examples:
      kt log-dirs describe
      kt log-dirs describe --broker-list 1,2 --topic-list orders
      kt log-dirs describe --json | jq '.brokers[].logDirs[].partitions | length'
    """


def _ints(text: str | None, option: str) -> list[int] | None:
    if text is None:
        return None
    try:
        return [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        usage_error(f"{option}: expected comma-separated broker ids, got {text!r}")


@log_dirs.command()
@wire_options
@click.option("--broker-list", metavar="ID,...", help="Only these brokers (default: all).")
@click.option("--topic-list", metavar="TOPIC,...", help="Only these topics' partitions.")
@click.option(
    "--json", "as_json", is_flag=True, help="kafka-log-dirs.sh's JSON document (version 1)."
)
@handle_errors
def describe(wire: Wire, broker_list: str | None, topic_list: str | None, as_json: bool) -> None:
    """Per broker and log directory: each partition's size, offset lag and whether
    it is a future replica; offline directories are reported with their error.

    Plain output is a table BROKER LOG-DIR TOPIC PARTITION SIZE OFFSET-LAG
    IS-FUTURE, with one row per directory (TOPIC '-') for empty or offline
    directories (ERROR column). Exit 1 when a directory is offline.
    """
    brokers = _ints(broker_list, "--broker-list")
    topics = [t for t in topic_list.split(",") if t] if topic_list else None

    async def go(c: KafkaClient) -> list[LogDirInfo]:
        wanted = None
        if topics is not None:
            wanted = {t: await c.partitions_for(t) for t in topics}
        return await c.describe_log_dirs(brokers, wanted)

    dirs = wire.run(go)
    offline = [d for d in dirs if d.error != ErrorCode.NONE]
    if as_json:
        by_broker: dict[int, list[LogDirInfo]] = {}
        for d in dirs:
            by_broker.setdefault(d.broker, []).append(d)
        emit_json(
            {
                "version": 1,
                "brokers": [
                    {
                        "broker": b,
                        "logDirs": [
                            {
                                "logDir": d.path,
                                "error": None if d.error == ErrorCode.NONE else d.error.name,
                                "totalBytes": d.total_bytes,
                                "usableBytes": d.usable_bytes,
                                "partitions": [
                                    {
                                        "partition": f"{p.topic}-{p.partition}",
                                        "size": p.size,
                                        "offsetLag": p.offset_lag,
                                        "isFuture": p.is_future,
                                    }
                                    for p in d.partitions
                                ],
                            }
                            for d in ds
                        ],
                    }
                    for b, ds in sorted(by_broker.items())
                ],
            }
        )
    else:
        rows = []
        for d in dirs:
            err = "-" if d.error == ErrorCode.NONE else d.error.name
            if not d.partitions:
                rows.append([d.broker, d.path, "-", "-", "-", "-", "-", err])
            for p in d.partitions:
                rows.append(
                    [d.broker, d.path, p.topic, p.partition, p.size, p.offset_lag,
                     str(p.is_future).lower(), err]
                )  # fmt: skip
        render_table(
            ["BROKER", "LOG-DIR", "TOPIC", "PARTITION", "SIZE", "OFFSET-LAG", "IS-FUTURE", "ERROR"],
            rows,
        )
    if offline:
        raise SystemExit(1)
