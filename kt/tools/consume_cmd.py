"""`kt consume TOPIC...`: read records from offsets or as a group member, kcat -C style."""

from __future__ import annotations

import asyncio
import base64
import binascii
import json
import re
import signal
import sys
from collections.abc import Callable
from dataclasses import dataclass

import click

from kt.client import (
    EARLIEST,
    LATEST,
    ConsumerRecord,
    GroupMember,
    KafkaClient,
    KafkaError,
    TopicPartition,
)
from kt.protocol.errors import ErrorCode
from kt.tools.console import handle_errors, usage_error
from kt.tools.wire import Wire, unescape, wire_options

_TOKEN = re.compile(r"%(.)")


def compile_format(fmt: str) -> Callable[[ConsumerRecord, bytes], bytes]:
    """A kcat -f format string as a function of (record, null text) -> bytes.

    %t topic, %p partition, %o offset, %k key, %s value, %K key length (-1:
    null), %S value length, %h headers (k=v,...), %T timestamp (ms), %%; the
    escapes \\n \\t \\r \\0 \\\\. Unknown %x sequences are kept as typed.
    """
    text = unescape(fmt)
    parts: list[Callable[[ConsumerRecord, bytes], bytes]] = []
    pos = 0
    for m in _TOKEN.finditer(text):
        if m.start() > pos:
            parts.append(_literal(text[pos : m.start()].encode()))
        pos = m.end()
        tok = m.group(1)
        getter = _TOKENS.get(tok)
        if getter is None:
            parts.append(_literal(m.group(0).encode()))
        else:
            parts.append(getter)
    if pos < len(text):
        parts.append(_literal(text[pos:].encode()))
    return lambda r, n: b"".join(p(r, n) for p in parts)


def _literal(lit: bytes) -> Callable[[ConsumerRecord, bytes], bytes]:
    return lambda r, n: lit


def _headers_text(r: ConsumerRecord, null: bytes) -> bytes:
    return b",".join(k.encode() + b"=" + (null if v is None else v) for k, v in r.headers)


_TOKENS: dict[str, Callable[[ConsumerRecord, bytes], bytes]] = {
    "t": lambda r, n: r.topic.encode(),
    "p": lambda r, n: str(r.partition).encode(),
    "o": lambda r, n: str(r.offset).encode(),
    "k": lambda r, n: n if r.key is None else r.key,
    "s": lambda r, n: n if r.value is None else r.value,
    "K": lambda r, n: str(-1 if r.key is None else len(r.key)).encode(),
    "S": lambda r, n: str(-1 if r.value is None else len(r.value)).encode(),
    "h": _headers_text,
    "T": lambda r, n: str(r.timestamp).encode(),
    "%": lambda r, n: b"%",
}


def encode_bytes(data: bytes | None, mode: str) -> tuple[str | None, str | None]:
    """(text, encoding) for JSON: utf8 text when `mode` is auto and the bytes are
    valid UTF-8 (encoding None), else base64 or hex (encoding named)."""
    if data is None:
        return None, None
    if mode == "auto":
        try:
            return data.decode("utf-8"), None
        except UnicodeDecodeError:
            mode = "base64"
    if mode == "hex":
        return binascii.hexlify(data).decode(), "hex"
    return base64.b64encode(data).decode(), "base64"


def record_json(r: ConsumerRecord, mode: str) -> str:
    """One NDJSON line (without newline) for a record."""
    key, key_enc = encode_bytes(r.key, mode)
    value, value_enc = encode_bytes(r.value, mode)
    obj: dict[str, object] = {
        "topic": r.topic,
        "partition": r.partition,
        "offset": r.offset,
        "timestamp": r.timestamp,
        "timestamp_type": {0: "CreateTime", 1: "LogAppendTime"}.get(r.timestamp_type, "None"),
        "key": key,
        "value": value,
    }
    if key_enc:
        obj["key_encoding"] = key_enc
    if value_enc:
        obj["value_encoding"] = value_enc
    hdrs = []
    for k, v in r.headers:
        hv, henc = encode_bytes(v, mode)
        h: dict[str, object] = {"key": k, "value": hv}
        if henc:
            h["value_encoding"] = henc
        hdrs.append(h)
    obj["headers"] = hdrs
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False)


@dataclass
class StartSpec:
    """Where to start: a ListOffsets timestamp, an absolute offset, an offset
    relative to the end, or the group's stored offset."""

    kind: str  # "ts" | "abs" | "rel" | "stored"
    value: int = 0


def parse_offset(text: str) -> tuple[StartSpec | None, int | None]:
    """--offset value -> (start, end timestamp); a usage error when malformed."""
    t = text.strip()
    if t == "beginning":
        return StartSpec("ts", EARLIEST), None
    if t == "end":
        return StartSpec("ts", LATEST), None
    if t == "stored":
        return StartSpec("stored"), None
    try:
        if t.startswith("s@"):
            return StartSpec("ts", int(t[2:])), None
        if t.startswith("e@"):
            return None, int(t[2:])
        n = int(t)
    except ValueError:
        usage_error(f"--offset: expected beginning, end, stored, N, -N, s@MS or e@MS, got {text!r}")
    return (StartSpec("rel", -n) if n < 0 else StartSpec("abs", n)), None


@click.command()
@click.argument("topics", nargs=-1, required=True)
@wire_options
@click.option(
    "--partition", "-p", "partitions", type=click.IntRange(min=0), multiple=True,
    help="Only this partition (repeatable; default: all).",
)  # fmt: skip
@click.option(
    "--offset",
    "-o",
    "offsets",
    multiple=True,
    metavar="OFFSET",
    help="Start at beginning, end, stored, N, -N (N before the end) or s@MS (first "
    "record at or after the time); e@MS stops at that time. Default: beginning "
    "(with --group: the committed offset, else end).",
)
@click.option("--group", "-G", help="Consume as a member of this consumer group, committing.")
@click.option("--count", "-c", type=click.IntRange(min=1), help="Stop after N records.")
@click.option(
    "--exit", "-e", "exit_at_end", is_flag=True, help="Stop at the end of the partitions."
)
@click.option("--format", "-f", "fmt", help="kcat-style output format (see above).")
@click.option("--key-delimiter", "-K", metavar="DELIM", help="Print KEY DELIM VALUE.")
@click.option(
    "--delimiter", "-D", default="\\n", show_default=True, metavar="DELIM",
    help="Written after each record (without --format).",
)  # fmt: skip
@click.option("--null-text", "-Z", is_flag=True, help="Print null keys and values as NULL.")
@click.option("--json", "as_json", is_flag=True, help="One JSON object per record (NDJSON).")
@click.option(
    "--binary-encoding",
    type=click.Choice(["auto", "base64", "hex"]),
    default="auto",
    show_default=True,
    help="JSON: auto = UTF-8 text, base64 when not valid UTF-8.",
)
@click.option("--read-committed", is_flag=True, help="Skip records of aborted transactions.")
@handle_errors
def consume(
    wire: Wire,
    topics: tuple[str, ...],
    partitions: tuple[int, ...],
    offsets: tuple[str, ...],
    group: str | None,
    count: int | None,
    exit_at_end: bool,
    fmt: str | None,
    key_delimiter: str | None,
    delimiter: str,
    null_text: bool,
    as_json: bool,
    binary_encoding: str,
    read_committed: bool,
) -> None:
    """Print records of TOPIC... to stdout, like kcat -C.

    Without --format each record is its value then the delimiter (with -K:
    key, DELIM, value). --format takes kcat's tokens: %t topic, %p partition,
    %o offset, %k key, %s value, %K / %S key / value length (-1 for null), %h
    headers as k=v,..., %T timestamp in ms, %% a percent sign, and the escapes
    \\n \\t \\r \\0.

    --json prints NDJSON objects with topic, partition, offset, timestamp,
    timestamp_type, key, value and headers ([{key, value}]). Keys, values and
    header values are UTF-8 strings; bytes that are not valid UTF-8 are given in
    base64 and flagged with key_encoding / value_encoding: "base64" (or all in
    --binary-encoding base64|hex). Null stays null.

    With --group the partitions are assigned by the group (range assignor),
    consumption starts at the committed offsets (else --offset beginning|end,
    default end) and offsets are committed as records are printed and on exit.

    \b
    Examples:
      kt consume orders -o beginning -e
      kt consume orders -p 0 -o -10 -f '%p@%o %k=%s\\n'
      kt consume orders -o s@1700000000000 -c 5 --json
      kt consume orders -G billing -e
    """
    start: StartSpec | None = None
    end_ts: int | None = None
    for o in offsets:
        s, e = parse_offset(o)
        if s is not None:
            start = s
        if e is not None:
            end_ts = e
    if group is not None:
        if partitions:
            usage_error("--partition cannot be used with --group (the group assigns them)")
        if start is not None and not (
            start.kind == "stored" or (start.kind == "ts" and start.value in (EARLIEST, LATEST))
        ):
            usage_error("with --group, --offset takes only beginning, end or stored")
    elif start is not None and start.kind == "stored":
        usage_error("--offset stored needs --group")
    if len(topics) > 1 and partitions and group is None:
        usage_error("--partition works with a single topic")
    if as_json and fmt:
        usage_error("--json and --format exclude each other")
    null = b"NULL" if null_text else b""
    if as_json:

        def render(r: ConsumerRecord) -> bytes:
            return (record_json(r, binary_encoding) + "\n").encode()

    elif fmt is not None:
        fn = compile_format(fmt)

        def render(r: ConsumerRecord) -> bytes:
            return fn(r, null)

    else:
        kd = unescape(key_delimiter).encode() if key_delimiter is not None else None
        d = unescape(delimiter).encode()

        def render(r: ConsumerRecord) -> bytes:
            v = null if r.value is None else r.value
            if kd is None:
                return v + d
            return (null if r.key is None else r.key) + kd + v + d

    out = sys.stdout.buffer
    isolation = 1 if read_committed else 0

    async def go(c: KafkaClient) -> None:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            try:
                loop.add_signal_handler(sig, stop.set)
            except (NotImplementedError, RuntimeError):
                pass
        try:
            await _consume_loop(
                c, topics, partitions, start, end_ts, group, count, exit_at_end,
                render, out, stop, isolation,
            )  # fmt: skip
        finally:
            for sig in (signal.SIGINT, signal.SIGTERM):
                try:
                    loop.remove_signal_handler(sig)
                except (NotImplementedError, RuntimeError):
                    pass

    wire.run(go)


async def _start_offsets(
    c: KafkaClient, tps: list[TopicPartition], start: StartSpec
) -> dict[TopicPartition, int]:
    if start.kind == "abs":
        return {tp: start.value for tp in tps}
    if start.kind == "rel":
        ends = await c.list_offsets(tps, LATEST)
        begins = await c.list_offsets(tps, EARLIEST)
        return {tp: max(begins[tp][0], ends[tp][0] - start.value) for tp in tps}
    got = await c.list_offsets(tps, start.value)
    out = {tp: got[tp][0] for tp in tps}
    missing = [tp for tp, off in out.items() if off < 0]
    if missing:
        # No record at or after the time: start at the end, as kcat does.
        ends = await c.list_offsets(missing, LATEST)
        out.update({tp: ends[tp][0] for tp in missing})
    return out


async def _consume_loop(
    c: KafkaClient,
    topics: tuple[str, ...],
    partitions: tuple[int, ...],
    start: StartSpec | None,
    end_ts: int | None,
    group: str | None,
    count: int | None,
    exit_at_end: bool,
    render: Callable[[ConsumerRecord], bytes],
    out: object,
    stop: asyncio.Event,
    isolation: int,
) -> None:
    write = out.write  # type: ignore[attr-defined]
    flush = out.flush  # type: ignore[attr-defined]
    member: GroupMember | None = None
    positions: dict[TopicPartition, int] = {}
    committed: dict[TopicPartition, int] = {}
    done: set[TopicPartition] = set()
    printed = 0
    reset = start if start is not None and start.kind == "ts" else None

    async def assign_group() -> None:
        assert member is not None
        assigned = await member.join()
        stored = await member.committed()
        positions.clear()
        committed.clear()
        done.clear()
        have = {tp: off for tp, off in stored.items() if off >= 0}
        if start is not None and start.kind == "ts":
            # An explicit beginning/end applies where nothing is committed yet.
            pass
        need = [tp for tp in assigned if tp not in have]
        positions.update(have)
        committed.update(have)
        if need:
            policy = reset or StartSpec("ts", LATEST)
            positions.update(await _start_offsets(c, need, policy))

    if group is not None:
        for t in topics:
            await c.topic(t)
        member = c.group_member(group, topics)
        await assign_group()
    else:
        tps: list[TopicPartition] = []
        for t in topics:
            avail = await c.partitions_for(t)
            if partitions:
                for p in partitions:
                    if p not in avail:
                        raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"partition {t}-{p}")
                tps.extend((t, p) for p in partitions)
            else:
                tps.extend((t, p) for p in avail)
        positions.update(await _start_offsets(c, tps, start or StartSpec("ts", EARLIEST)))

    async def commit() -> None:
        if member is None:
            return
        changed = {tp: off for tp, off in positions.items() if committed.get(tp) != off}
        if changed:
            await member.commit(changed)
            committed.update(changed)

    try:
        while not stop.is_set():
            if member is not None and member.rejoin_needed:
                try:
                    await commit()
                except KafkaError:
                    pass  # the generation is gone; the next owner re-reads from the last commit
                await assign_group()
            active = {tp: off for tp, off in positions.items() if tp not in done}
            if not active:
                if exit_at_end or member is None:
                    break
                await asyncio.sleep(0.2)
                continue
            fetch = asyncio.create_task(c.fetch(active, max_wait_ms=500, isolation_level=isolation))
            stopper = asyncio.create_task(stop.wait())
            finished, _ = await asyncio.wait({fetch, stopper}, return_when=asyncio.FIRST_COMPLETED)
            stopper.cancel()
            if fetch not in finished:
                fetch.cancel()
                break
            results = fetch.result()
            limit_hit = False
            for tp, r in sorted(results.items()):
                if r.error == ErrorCode.OFFSET_OUT_OF_RANGE:
                    policy = reset if reset is not None else StartSpec("ts", EARLIEST)
                    positions.update(await _start_offsets(c, [tp], policy))
                    continue
                if r.error != ErrorCode.NONE:
                    if r.error.retriable:
                        continue
                    raise KafkaError(r.error, f"fetch from {tp[0]}-{tp[1]}")
                stopped = False
                for rec in r.records:
                    if end_ts is not None and rec.timestamp >= end_ts:
                        done.add(tp)
                        stopped = True
                        break
                    write(render(rec))
                    positions[tp] = rec.offset + 1
                    printed += 1
                    if count is not None and printed >= count:
                        limit_hit = stopped = True
                        break
                if limit_hit:
                    break
                if not stopped:
                    positions[tp] = max(positions[tp], r.next_offset)
                if exit_at_end and positions[tp] >= r.high_watermark:
                    done.add(tp)
            flush()
            await commit()
            if limit_hit:
                break
    finally:
        flush()
        if member is not None:
            try:
                await commit()
            finally:
                await member.leave()
