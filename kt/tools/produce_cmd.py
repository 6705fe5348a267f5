"""`kt produce TOPIC`: write records from stdin or files, kcat -P style."""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Iterator
from typing import BinaryIO

import click

from kt.client import Codec, KafkaClient, KafkaError, RecordSpec
from kt.client.partitioner import partition_for_key
from kt.protocol.errors import ErrorCode
from kt.tools.console import emit_json, handle_errors, usage_error
from kt.tools.wire import Wire, parse_kv, unescape, wire_options

CODECS = ("none", "gzip", "snappy", "lz4", "zstd")
#: records written per round before flushing every partition's batches
ROUND_RECORDS = 20000
ROUND_BYTES = 8 * 1024 * 1024


def split_stream(stream: BinaryIO, delimiter: bytes, chunk: int = 1 << 16) -> Iterator[bytes]:
    """The pieces of `stream` between delimiters; nothing after a final delimiter."""
    buf = b""
    while True:
        data = stream.read(chunk)
        if not data:
            break
        buf += data
        *pieces, buf = buf.split(delimiter)
        yield from pieces
    if buf:
        yield buf


@click.command()
@click.argument("topic")
@wire_options
@click.option("--partition", "-p", type=click.IntRange(min=0), help="Write every record here.")
@click.option(
    "--key-delimiter", "-K", metavar="DELIM", help="Split each input record into KEY DELIM VALUE."
)
@click.option("--key", "-k", "fixed_key", help="The key of every record.")
@click.option(
    "--header", "-H", "headers", multiple=True, metavar="K=V", help="Header on every record."
)
@click.option(
    "--null-empty",
    "-Z",
    is_flag=True,
    help="Send empty keys and values as null (a null value is a tombstone).",
)
@click.option(
    "--delimiter",
    "-D",
    default="\\n",
    show_default=True,
    metavar="DELIM",
    help="Record delimiter in the input (\\n, \\t, \\0 escapes).",
)
@click.option(
    "--file",
    "files",
    multiple=True,
    type=click.Path(exists=True, dir_okay=False),
    help="Read this file instead of stdin (repeatable).",
)
@click.option(
    "--whole", "-l", is_flag=True, help="Each input (file or stdin) is one record, undivided."
)
@click.option("--compression", "-z", type=click.Choice(CODECS), default="none", show_default=True)
@click.option(
    "--acks",
    type=click.Choice(["-1", "all", "0", "1"]),
    default="all",
    show_default=True,
    help="Replicas that must have a batch before the broker answers (0: no answer).",
)
@click.option(
    "--batch-size",
    type=click.IntRange(min=1),
    default=1000,
    show_default=True,
    help="Records per batch.",
)
@click.option("--json", "as_json", is_flag=True, help="Print a JSON summary of what was written.")
@handle_errors
def produce(
    wire: Wire,
    topic: str,
    partition: int | None,
    key_delimiter: str | None,
    fixed_key: str | None,
    headers: tuple[str, ...],
    null_empty: bool,
    delimiter: str,
    files: tuple[str, ...],
    whole: bool,
    compression: str,
    acks: str,
    batch_size: int,
    as_json: bool,
) -> None:
    """Write records to TOPIC: one per line of stdin (or of --file), like kcat -P.

    Keyed records go to the partition Kafka's Java producer would pick
    (murmur2 of the key); unkeyed records are spread round-robin by batch.
    With --null-empty an empty value is sent as null (a tombstone) and an empty
    key as no key. Unknown topics are created when the broker auto-creates them.
    Prints nothing unless --json.

    \b
    Examples:
      seq 100 | kt produce numbers
      printf 'k1:v1\\nk2:v2\\n' | kt produce orders -K: -H source=cli -z lz4
      printf 'k1:\\n' | kt produce orders -K: -Z          # a tombstone for k1
      kt produce blobs --file image.png --whole
    """
    if fixed_key is not None and key_delimiter is not None:
        usage_error("--key and --key-delimiter exclude each other")
    delim = unescape(delimiter).encode()
    if not delim:
        usage_error("--delimiter must not be empty")
    kdelim = unescape(key_delimiter).encode() if key_delimiter is not None else None
    if kdelim is not None and not kdelim:
        usage_error("--key-delimiter must not be empty")
    hdrs = [(k, v.encode()) for k, v in (parse_kv(h, "--header") for h in headers)]
    codec = Codec[compression.upper()]
    acks_n = -1 if acks == "all" else int(acks)

    def inputs() -> Iterator[bytes]:
        if not files:
            yield from read_one(sys.stdin.buffer)
        for f in files:
            with open(f, "rb") as s:
                yield from read_one(s)

    def read_one(s: BinaryIO) -> Iterator[bytes]:
        if whole:
            yield s.read()
        else:
            yield from split_stream(s, delim)

    def to_spec(raw: bytes) -> RecordSpec:
        key: bytes | None = fixed_key.encode() if fixed_key is not None else None
        value: bytes | None = raw
        if kdelim is not None:
            k, sep, v = raw.partition(kdelim)
            if sep:
                key, value = k, v
        if null_empty:
            if key == b"":
                key = None
            if value == b"":
                value = None
        return RecordSpec(key, value, hdrs)

    async def go(c: KafkaClient) -> dict[int, list[int]]:
        info = await c.topic(topic, auto_create=True)
        parts = sorted(info.partitions)
        if partition is not None and partition not in info.partitions:
            raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"partition {topic}-{partition}")
        written: dict[int, list[int]] = {}
        rr = 0

        async def flush(pending: dict[int, list[RecordSpec]]) -> None:
            async def one(p: int, recs: list[RecordSpec]) -> None:
                for i in range(0, len(recs), batch_size):
                    chunk = recs[i : i + batch_size]
                    res = await c.produce(
                        topic, p, chunk, acks=acks_n, codec=codec, auto_create=False
                    )
                    span = written.setdefault(p, [res.base_offset, res.base_offset, 0])
                    span[1] = res.base_offset + len(chunk) - 1 if res.base_offset >= 0 else -1
                    span[2] += len(chunk)

            await asyncio.gather(*(one(p, r) for p, r in pending.items() if r))

        pending: dict[int, list[RecordSpec]] = {}
        count = size = 0
        for raw in inputs():
            spec = to_spec(raw)
            if partition is not None:
                p = partition
            elif spec.key is not None:
                p = parts[partition_for_key(spec.key, len(parts))]
            else:
                p = parts[(rr // batch_size) % len(parts)]
                rr += 1
            pending.setdefault(p, []).append(spec)
            count += 1
            size += len(raw)
            if count >= ROUND_RECORDS or size >= ROUND_BYTES:
                await flush(pending)
                pending, count, size = {}, 0, 0
        await flush(pending)
        return written

    if not files and sys.stdin.isatty():
        click.echo("kt: reading records from the terminal; end with Ctrl-D", err=True)
    written = wire.run(go)
    if as_json:
        emit_json(
            {
                "topic": topic,
                "records": sum(w[2] for w in written.values()),
                "partitions": [
                    {"partition": p, "first_offset": w[0], "last_offset": w[1], "records": w[2]}
                    for p, w in sorted(written.items())
                ],
            }
        )
