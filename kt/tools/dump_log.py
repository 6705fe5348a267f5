"""`kt dump-log-segments` (alias `kt dump-segment`): Kafka's kafka-dump-log.sh, and more.

Text output uses the options and the line formats of Apache Kafka's
`kafka.tools.DumpLogSegments`, so runbooks and greps written for
`kafka-dump-log.sh` keep working on kt's and on Apache Kafka's segments.

Beyond Kafka: `--json` (the schema below), `--decode`, offset/time ranges that
seek with the segment's indexes, `--resync` past damaged regions, `.deleted`,
`.cleaned` and `.swap` files dumped as their underlying kind, the
leader-epoch-checkpoint, and exit codes (0 clean, 1 something wrong was found,
2 usage error).

JSON output schema (NDJSON: one object per line; every object has "type" and
"file", the path as given; fields marked "?" are present only where noted):

  {"type":"file","file":F,"kind":K}   # each file starts; K: log, index,
                                       # timeindex, snapshot, txnindex, leader-epoch
  {"type":"batch","file":F,"position":P,"base_offset":N,"last_offset":N,
   "count":N|null,"magic":0|1|2,"codec":"none|gzip|snappy|lz4|zstd",
   "timestamp_type":"CreateTime|LogAppendTime|NoTimestampType","max_timestamp":T,
   "producer_id":N,"producer_epoch":N,"base_sequence":N,"last_sequence":N,
   "partition_leader_epoch":N,"is_transactional":B,"is_control":B,
   "delete_horizon_ms":T|null,"size":N,"crc":N,"crc_valid":B}
      # legacy (magic 0/1): count null, producer fields -1, base_offset null if
      # a compressed wrapper does not decompress
  {"type":"record","file":F,"offset":N,"timestamp":T,
   "key":S|null,"key_encoding":E|null,"value":S|null,"value_encoding":E|null,
   "headers":[{"key":S,"value":S|null,"value_encoding":E|null}],
   "key_size":N,"value_size":N,"sequence":N,"batch_base_offset":N,
   "control"?:{"type":"COMMIT|ABORT|...","type_id":N,"coordinator_epoch"?:N,
               "data"?:{...}},
   "crc"?:N,"crc_valid"?:B}
      # control: records of control batches only; data: a KRaft control record
      # (LEADER_CHANGE, SNAPSHOT_HEADER/FOOTER, KRAFT_VERSION, KRAFT_VOTERS) as
      # Kafka's JSON; crc/crc_valid: legacy only. With --cluster-metadata-decoder
      # the value is {"type":T,"version":V,"data":{...}} (encoding "json") as Kafka
      # prints it, or Kafka's "Error at <offset>, skipping. ..." (encoding "text").
      # E is how key/value/header values are rendered: "utf8" (a string),
      # "hex", "base64", "json" (an embedded JSON value) or "text" (a decoder's
      # text); invalid UTF-8 under --decode utf8/json falls back to "hex".
  {"type":"index_entry","file":F,"offset":N,"position":P}
  {"type":"index_empty","file":F}
  {"type":"time_index_entry","file":F,"timestamp":T,"offset":N}
  {"type":"sanity_check","file":F,"passed":true}
  {"type":"snapshot_entry","file":F,"producer_id":N,"producer_epoch":N,
   "coordinator_epoch":N,"current_txn_first_offset":N|null,"last_timestamp":T,
   "first_sequence":N|null,"last_sequence":N|null,"last_offset":N|null,
   "offset_delta":N|null,"timestamp":T|null}
  {"type":"txn_entry","file":F,"version":N,"producer_id":N,"first_offset":N,
   "last_offset":N,"last_stable_offset":N}
  {"type":"leader_epoch_entry","file":F,"epoch":N,"start_offset":N}
  {"type":"damage","file":F,"position":P,"length":N,"reason":S}
      # bytes that do not hold a valid batch; without --resync reading stops
      # there and length runs to the end of the range read
  {"type":"problem","file":F,"kind":K,...}
      # K: index_offset_mismatch (index_offset, log_offset),
      # time_index_timestamp_mismatch (index_timestamp, log_timestamp),
      # time_index_out_of_order (index_timestamp, previous_index_timestamp),
      # indexed_offset_not_found (index_offset, log_offset),
      # non_consecutive_offsets (offset, next_offset) -- these come last;
      # and, with a "message": invalid_batch (position), record_decode_error,
      # sanity_check_failed, corrupt_snapshot, corrupt_txn_index,
      # corrupt_checkpoint, bad_file_name, unknown_file.
"""

from __future__ import annotations

import os
import sys
from datetime import UTC, datetime

import click

from kt.storage.log_files import STATE_SUFFIXES
from kt.tools.console import EXIT_OK, handle_errors, usage_error
from kt.tools.dump_log_context import INT_MAX, DumpContext, DumpOptions
from kt.tools.dump_log_decoders import DECODE_CHOICES

_JSON_SCHEMA = __doc__.split("JSON output schema", 1)[1] if __doc__ else ""

EPILOG = """\b
Examples:
  kt dump-log-segments --files 00000000000000000000.log
  kt dump-log-segments --deep-iteration --print-data-log \\
      --files 00000000000000000000.log,00000000000000000000.index
  kt dump-segment --verify-index-only --files 00000000000000000000.index
  kt dump-segment --offsets-decoder --files __consumer_offsets-16/00000000000000000000.log
  kt dump-log-segments --cluster-metadata-decoder \\
      --files __cluster_metadata-0/00000000000000000000.log
  kt dump-log-segments --cluster-metadata-decoder --skip-record-metadata \\
      --files __cluster_metadata-0/00000000000000004929-0000000001.checkpoint
  kt dump-segment --json --deep-iteration --start-offset 1000 --end-offset 1099 \\
      --files t-0/00000000000000000000.log | jq .value
  kt dump-segment --resync --files damaged/00000000000000000000.log

\b
Files are dumped by suffix: .log (and KRaft .checkpoint snapshots), .index,
.timeindex, .snapshot, .txnindex, leader-epoch-checkpoint; a .deleted,
.cleaned or .swap name is dumped as its underlying kind. Other names are
reported ("Ignoring unknown file") and make the exit code 2.
Kafka's --key-decoder-class/--value-decoder-class are not supported: use --decode.

\b
Exit codes: 0 clean; 1 damage, a CRC-invalid batch, an index mismatch or
non-consecutive offsets found; 2 usage error (missing path, a directory, an
unknown file kind, bad option values).

\b
JSON output schema""" + _JSON_SCHEMA.replace("\n\n", "\n")

_DUMPERS = {
    ".log": "log",
    ".index": "index",
    ".timeindex": "timeindex",
    ".snapshot": "snapshot",
    ".txnindex": "txnindex",
    ".checkpoint": "log",  # KRaft snapshots, as Kafka (Snapshots.SUFFIX)
}


def file_kind(path: str) -> str | None:
    """Which dumper handles `path`, by suffix as Kafka (plus .deleted/.cleaned/.swap)."""
    name = os.path.basename(path)
    for state in STATE_SUFFIXES:
        if name.endswith(state) and name != state:
            name = name[: -len(state)]
            break
    if name == "leader-epoch-checkpoint":
        return "leader-epoch"
    dot = name.rfind(".")
    if dot < 0:
        return None
    return _DUMPERS.get(name[dot:])


def parse_time(value: str, option: str) -> int:
    """Milliseconds since the epoch, or an ISO-8601 time (UTC when no zone is given)."""
    text = value.strip()
    try:
        return int(text)
    except ValueError:
        pass
    try:
        dt = datetime.fromisoformat(text)
    except ValueError:
        usage_error(f"{option}: {value!r} is neither milliseconds nor an ISO-8601 time")
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=UTC)
    return int(dt.timestamp() * 1000)


def _split_files(values: tuple[str, ...]) -> list[str]:
    files = [f for v in values for f in v.split(",") if f.strip()]
    if not files:
        usage_error("--files: no file given")
    return files


def _check_paths(files: list[str]) -> None:
    for f in files:
        if os.path.isdir(f):
            inside = sorted(
                n for n in os.listdir(f) if file_kind(n) is not None and not n.startswith(".")
            )
            hint = ""
            if inside:
                shown = ",".join(os.path.join(f, n) for n in inside[:4])
                more = ",..." if len(inside) > 4 else ""
                hint = f"; give the files inside, e.g. --files {shown}{more}"
            usage_error(f"{f}: is a directory{hint}")
        if not os.path.exists(f):
            usage_error(f"{f}: no such file or directory")


@click.command(
    "dump-log-segments",
    epilog=EPILOG,
    context_settings={"max_content_width": 100},
)
@click.option(
    "--files",
    "files",
    multiple=True,
    required=True,
    metavar="FILE[,FILE...]",
    help="REQUIRED: the comma-separated list of data and index files to dump "
    "(may also be repeated).",
)
@click.option(
    "--deep-iteration",
    is_flag=True,
    help="Iterate the records inside each batch. Implied by --print-data-log and the decoders.",
)
@click.option(
    "--print-data-log",
    is_flag=True,
    help="Print the records' keys and values (implies --deep-iteration).",
)
@click.option(
    "--skip-record-metadata",
    is_flag=True,
    help="Do not print each record's metadata (offset, timestamp, sizes, ...).",
)
@click.option(
    "--verify-index-only",
    is_flag=True,
    help="Check .index/.timeindex entries against the log without printing them.",
)
@click.option(
    "--index-sanity-check",
    is_flag=True,
    help="Only run the index sanity check a broker runs on startup, printing nothing else.",
)
@click.option(
    "--max-bytes",
    type=click.IntRange(min=0),
    default=INT_MAX,
    show_default=True,
    metavar="SIZE",
    help="Read at most this many bytes of each .log (from the start, or from the "
    "--start-* position); a batch cut off at the limit is not shown.",
)
@click.option(
    "--max-message-size",
    type=click.IntRange(min=1),
    default=5 * 1024 * 1024,
    show_default=True,
    metavar="SIZE",
    help="Largest batch expected when checking index entries against the log.",
)
@click.option(
    "--offsets-decoder",
    is_flag=True,
    help="Decode keys and values as __consumer_offsets records (implies --print-data-log).",
)
@click.option(
    "--transaction-log-decoder",
    is_flag=True,
    help="Decode keys and values as __transaction_state records (implies --print-data-log).",
)
@click.option(
    "--cluster-metadata-decoder",
    is_flag=True,
    help="Decode records as KRaft metadata records (__cluster_metadata-0 logs, snapshots, "
    "bootstrap.checkpoint), as Kafka prints them (implies --print-data-log). Secrets "
    '(SCRAM keys, password configs) print as "[redacted]".',
)
@click.option(
    "--decode",
    type=click.Choice(DECODE_CHOICES),
    default="utf8",
    show_default=True,
    help="How to render keys, values and header values: utf8 (invalid bytes: U+FFFD in "
    "text, hex in JSON), hex, base64, or json (parsed; else as utf8).",
)
@click.option(
    "--json",
    "as_json",
    is_flag=True,
    help="NDJSON output: one object per batch, record, index entry, damage or problem "
    "(schema below).",
)
@click.option(
    "--start-offset",
    type=click.IntRange(min=0),
    metavar="OFFSET",
    help="Show records from this offset on; seeks with the segment's .index.",
)
@click.option(
    "--end-offset",
    type=click.IntRange(min=0),
    metavar="OFFSET",
    help="Show records up to this offset (inclusive), then stop reading.",
)
@click.option(
    "--start-time",
    metavar="MS|ISO",
    help="Start at the first record with a timestamp >= this (ms since the epoch or "
    "ISO-8601, UTC unless a zone is given); seeks with the .timeindex and .index.",
)
@click.option(
    "--end-time",
    metavar="MS|ISO",
    help="Stop at the first record with a timestamp > this (shallow: after the first "
    "batch whose max timestamp is later).",
)
@click.option(
    "--resync",
    is_flag=True,
    help="After a damaged region, scan forward to the next valid batch and go on.",
)
@handle_errors
def dump_log_segments(
    files: tuple[str, ...],
    deep_iteration: bool,
    print_data_log: bool,
    skip_record_metadata: bool,
    verify_index_only: bool,
    index_sanity_check: bool,
    max_bytes: int,
    max_message_size: int,
    offsets_decoder: bool,
    transaction_log_decoder: bool,
    cluster_metadata_decoder: bool,
    decode: str,
    as_json: bool,
    start_offset: int | None,
    end_offset: int | None,
    start_time: str | None,
    end_time: str | None,
    resync: bool,
) -> None:
    """Dump the contents of log segment files, like Kafka's kafka-dump-log.sh.

    Prints the batches of .log files (with --deep-iteration their records), the
    entries of .index, .timeindex, .txnindex, producer .snapshot and
    leader-epoch-checkpoint files, checks indexes against their log, and
    reports damage. Text output matches Apache Kafka's tool line for line.
    """
    if offsets_decoder + transaction_log_decoder + cluster_metadata_decoder > 1:
        usage_error(
            "--offsets-decoder, --transaction-log-decoder and --cluster-metadata-decoder "
            "exclude each other"
        )
    if start_offset is not None and end_offset is not None and end_offset < start_offset:
        usage_error(f"--end-offset {end_offset} is before --start-offset {start_offset}")
    t0 = parse_time(start_time, "--start-time") if start_time is not None else None
    t1 = parse_time(end_time, "--end-time") if end_time is not None else None
    if t0 is not None and t1 is not None and t1 < t0:
        usage_error("--end-time is before --start-time")
    print_data = (
        print_data_log or offsets_decoder or transaction_log_decoder or cluster_metadata_decoder
    )
    opts = DumpOptions(
        deep=deep_iteration or print_data,
        print_data=print_data,
        skip_record_metadata=skip_record_metadata,
        index_sanity_only=index_sanity_check,
        verify_index_only=verify_index_only,
        max_bytes=max_bytes,
        max_message_size=max_message_size,
        offsets_decoder=offsets_decoder,
        transaction_log_decoder=transaction_log_decoder,
        cluster_metadata_decoder=cluster_metadata_decoder,
        decode=decode,
        json=as_json,
        resync=resync,
        start_offset=start_offset,
        end_offset=end_offset,
        start_time=t0,
        end_time=t1,
    )
    paths = _split_files(files)
    _check_paths(paths)
    ctx = DumpContext(opts)
    for path in paths:
        dump_file(ctx, path)
    ctx.finish()
    sys.stdout.flush()
    if ctx.status != EXIT_OK:
        sys.exit(ctx.status)


def dump_file(ctx: DumpContext, path: str) -> None:
    """Dump one file by its kind into `ctx`."""
    kind = file_kind(path)
    if not ctx.opts.json:
        ctx.out(f"Dumping {path}\n")
    if kind is None:
        ctx.usage()
        if ctx.opts.json:
            ctx.emit(
                {
                    "type": "problem",
                    "kind": "unknown_file",
                    "file": path,
                    "message": f"Ignoring unknown file {path}",
                }
            )
        else:
            ctx.err(f"Ignoring unknown file {path}")
        return
    if kind == "log":
        from kt.tools.dump_log_records import LogDumper

        LogDumper(ctx, path).run()
        return
    from kt.tools import dump_log_indexes as ix

    if ctx.opts.json:
        ctx.emit({"type": "file", "file": path, "kind": kind})
    {
        "index": ix.dump_offset_index,
        "timeindex": ix.dump_time_index,
        "snapshot": ix.dump_producer_snapshot,
        "txnindex": ix.dump_txn_index,
        "leader-epoch": ix.dump_leader_epoch_checkpoint,
    }[kind](ctx, path)
