"""Dumping and verifying a segment's side files as `kafka-dump-log.sh` does.

`.index` and `.timeindex` entries are printed in Kafka's format and checked
against the segment's `.log` (the last offset of the batch an offset-index entry
points at; the max timestamp of the batch a time-index entry names), with the
mismatches reported at the end of the run like Kafka. Producer snapshots and
transaction indexes print Kafka's lines; `leader-epoch-checkpoint`, which Kafka's
tool cannot dump, prints `epoch: E startOffset: O` per entry.

Index files are at most a few MiB (10 MiB preallocated), so they are read whole;
the `.log` is only read at the positions the entries point to.
"""

from __future__ import annotations

import os
from pathlib import Path

from kt.storage import legacy as legacy_format
from kt.storage import record_batch as v2
from kt.storage.errors import StorageError
from kt.storage.file_records import FileRecords, LogBatch
from kt.storage.log_files import STATE_SUFFIXES, offset_file_prefix, parse_segment_file_name
from kt.tools.console import warn
from kt.tools.dump_log_context import DumpContext, jstr


def _base_offset(path: str) -> int | None:
    # Kafka: file.getName.split("\\.")(0).toLong
    try:
        return int(os.path.basename(path).split(".")[0])
    except ValueError:
        return None


def sibling_file(path: str, suffix: str) -> str | None:
    """The file of the same segment with `suffix` (keeping a .deleted/... state)."""
    p = Path(path)
    parsed = parse_segment_file_name(p.name)
    if parsed is not None:
        stem = offset_file_prefix(parsed.base_offset) + suffix
        # The same state first (a .swap index belongs to the .swap log), then any.
        candidates = [stem + parsed.state] if parsed.state else []
        candidates += [stem] + [stem + st for st in STATE_SUFFIXES if st != parsed.state]
    else:
        candidates = [p.name.split(".")[0] + suffix]
    for name in candidates:
        if (p.parent / name).is_file():
            return str(p.parent / name)
    return None


def _first_batch(fr: FileRecords, position: int, limit: int) -> LogBatch | None:
    for item in fr.batches(position, min(fr.size, position + limit)):
        return item if isinstance(item, LogBatch) else None
    return None


def _sanity(ctx: DumpContext, path: str, problems: list[str]) -> None:
    if problems:
        for p in problems:
            ctx.report(path, "sanity_check_failed", f"failed sanity check: {p}")
        return
    if ctx.opts.json:
        ctx.emit({"type": "sanity_check", "file": path, "passed": True})
    else:
        ctx.out(f"{path} passed sanity check.\n")


def _no_base(ctx: DumpContext, path: str) -> None:
    ctx.report(
        path, "bad_file_name", "cannot tell the base offset: the name is not <offset>.<suffix>"
    )


def dump_offset_index(ctx: DumpContext, path: str) -> None:
    """Kafka's dumpIndex: entries, or only the check with --verify-index-only."""
    from kt.storage.offset_index import OffsetIndexView

    opts = ctx.opts
    base = _base_offset(path)
    if base is None:
        _no_base(ctx, path)
        return
    index = OffsetIndexView(Path(path).read_bytes(), base, path)
    if len(index) == 0:
        if opts.json:
            ctx.emit({"type": "index_empty", "file": path})
        else:
            ctx.out(f"{path} is empty.\n")
        return
    if opts.index_sanity_only:
        _sanity(ctx, path, index.problems())
        return
    log_path = sibling_file(path, ".log")
    if log_path is None:
        warn(f"{path}: no .log next to it; entries are not checked against the log")
    f = open(log_path, "rb") if log_path is not None else None  # noqa: SIM115
    try:
        fr = FileRecords(f) if f is not None else None
        lines: list[str] = []
        jfile = jstr(path)
        for i, (offset, position) in enumerate(index):
            # A zero-filled preallocated tail: Kafka stops at the first repeat of the base.
            if offset == base and i > 0:
                break
            if fr is not None:
                batch = _first_batch(fr, position, opts.max_message_size)
                log_offset = batch.last_offset if batch is not None else -1
                if log_offset != offset:
                    ctx.index_mismatch(path, offset, log_offset)
            if not opts.verify_index_only:
                if opts.json:
                    lines.append(
                        f'{{"type":"index_entry","file":{jfile},"offset":{offset},'
                        f'"position":{position}}}'
                    )
                else:
                    lines.append(f"offset: {offset} position: {position}")
            if len(lines) >= 4096:
                ctx.out("\n".join(lines) + "\n")
                lines.clear()
        if lines:
            ctx.out("\n".join(lines) + "\n")
    finally:
        if f is not None:
            f.close()


def _batch_max_record_timestamp(batch: LogBatch) -> int:
    """Kafka's max over the records' timestamps (deep, like DumpLogSegments)."""
    best = v2.NO_TIMESTAMP
    if batch.header is not None:
        for r in v2.iter_records(batch.header, batch.data):
            best = max(best, r.timestamp)
    else:
        for m in legacy_format.iter_inner(batch.legacy):
            best = max(best, m.timestamp)
    return best


def dump_time_index(ctx: DumpContext, path: str) -> None:
    """Kafka's dumpTimeIndex: entries, checked against the offset index and the log."""
    from kt.storage.offset_index import OffsetIndexView
    from kt.storage.time_index import TimeIndexView

    opts = ctx.opts
    base = _base_offset(path)
    if base is None:
        _no_base(ctx, path)
        return
    tindex = TimeIndexView(Path(path).read_bytes(), base, path)
    if opts.index_sanity_only:
        _sanity(ctx, path, tindex.problems())
        return
    index_path = sibling_file(path, ".index")
    oindex = None
    if index_path is not None:
        oindex = OffsetIndexView(Path(index_path).read_bytes(), base, index_path)
    log_path = sibling_file(path, ".log")
    if log_path is None:
        warn(f"{path}: no .log next to it; entries are not checked against the log")
    f = open(log_path, "rb") if log_path is not None else None  # noqa: SIM115
    try:
        fr = FileRecords(f) if f is not None else None
        lines: list[str] = []
        jfile = jstr(path)
        prev_ts = v2.NO_TIMESTAMP
        # Time-index offsets only grow, so a scan never needs to restart before
        # the batch the previous entry was found in (Kafka rescans each time).
        resume = 0
        for i, (timestamp, offset) in enumerate(tindex):
            if offset == base and i > 0:
                break
            if fr is not None:
                position = oindex.lookup(offset).position if oindex is not None else 0
                if position < resume:
                    position = resume
                found: LogBatch | None = None
                for item in fr.batches(position):
                    if not isinstance(item, LogBatch):
                        break
                    if item.last_offset >= offset:
                        found = item
                        break
                if found is None:
                    ctx.time_offset_not_found(path, offset, -1)
                elif found.last_offset != offset:
                    resume = found.position
                    ctx.time_offset_not_found(path, offset, found.last_offset)
                else:
                    resume = found.position
                    try:
                        max_ts = _batch_max_record_timestamp(found)
                    except StorageError as exc:
                        ctx.damage(
                            log_path or path,
                            found.position,
                            len(found.data),
                            f"the records of the batch do not decode: {exc.message}",
                        )
                        max_ts = v2.NO_TIMESTAMP
                    if max_ts != timestamp:
                        ctx.time_mismatch(path, timestamp, max_ts)
                    if prev_ts >= timestamp:
                        ctx.time_out_of_order(path, timestamp, prev_ts)
            if not opts.verify_index_only:
                if opts.json:
                    lines.append(
                        f'{{"type":"time_index_entry","file":{jfile},"timestamp":{timestamp},'
                        f'"offset":{offset}}}'
                    )
                else:
                    lines.append(f"timestamp: {timestamp} offset: {offset}")
            prev_ts = timestamp
            if len(lines) >= 4096:
                ctx.out("\n".join(lines) + "\n")
                lines.clear()
        if lines:
            ctx.out("\n".join(lines) + "\n")
    finally:
        if f is not None:
            f.close()


def _decrement_sequence(sequence: int, decrement: int) -> int:
    # Kafka's DefaultRecordBatch.decrementSequence: sequences wrap at Int.MaxValue.
    if sequence < decrement:
        return 2**31 - 1 - (decrement - sequence) + 1
    return sequence - decrement


def dump_producer_snapshot(ctx: DumpContext, path: str) -> None:
    """Kafka's dumpProducerIdSnapshot."""
    from kt.storage.errors import CorruptSnapshotError
    from kt.storage.producer_snapshot import parse_producer_snapshot

    try:
        entries, _crc = parse_producer_snapshot(Path(path).read_bytes(), path)
    except CorruptSnapshotError as exc:
        ctx.report(path, "corrupt_snapshot", exc.message)
        return
    lines: list[str] = []
    for e in entries:
        txn_first = e.current_txn_first_offset if e.current_txn_first_offset >= 0 else None
        has_batch = e.last_offset >= 0
        first_seq = _decrement_sequence(e.last_sequence, e.offset_delta)
        if ctx.opts.json:
            ctx.emit(
                {
                    "type": "snapshot_entry",
                    "file": path,
                    "producer_id": e.producer_id,
                    "producer_epoch": e.epoch,
                    "coordinator_epoch": e.coordinator_epoch,
                    "current_txn_first_offset": txn_first,
                    "last_timestamp": e.timestamp,
                    "first_sequence": first_seq if has_batch else None,
                    "last_sequence": e.last_sequence if has_batch else None,
                    "last_offset": e.last_offset if has_batch else None,
                    "offset_delta": e.offset_delta if has_batch else None,
                    "timestamp": e.timestamp if has_batch else None,
                }
            )
            continue
        txn = "OptionalLong.empty" if txn_first is None else f"OptionalLong[{txn_first}]"
        line = (
            f"producerId: {e.producer_id} producerEpoch: {e.epoch} "
            f"coordinatorEpoch: {e.coordinator_epoch} currentTxnFirstOffset: {txn} "
            f"lastTimestamp: {e.timestamp} "
        )
        if has_batch:
            line += (
                f"firstSequence: {first_seq} lastSequence: {e.last_sequence} "
                f"lastOffset: {e.last_offset} offsetDelta: {e.offset_delta} "
                f"timestamp: {e.timestamp}"
            )
        lines.append(line)
    if lines:
        ctx.out("\n".join(lines) + "\n")


def dump_txn_index(ctx: DumpContext, path: str) -> None:
    """Kafka's dumpTxnIndex."""
    from kt.storage.errors import CorruptIndexError
    from kt.storage.txn_index import parse_txn_index

    try:
        entries = parse_txn_index(Path(path).read_bytes(), path)
    except CorruptIndexError as exc:
        ctx.report(path, "corrupt_txn_index", str(exc.message))
        return
    for t in entries:
        if ctx.opts.json:
            ctx.emit(
                {
                    "type": "txn_entry",
                    "file": path,
                    "version": t.version,
                    "producer_id": t.producer_id,
                    "first_offset": t.first_offset,
                    "last_offset": t.last_offset,
                    "last_stable_offset": t.last_stable_offset,
                }
            )
        else:
            ctx.out(
                f"version: {t.version} producerId: {t.producer_id} firstOffset: "
                f"{t.first_offset} lastOffset: {t.last_offset} "
                f"lastStableOffset: {t.last_stable_offset}\n"
            )


def dump_leader_epoch_checkpoint(ctx: DumpContext, path: str) -> None:
    """kt extension: the entries of a leader-epoch-checkpoint, and what is wrong with it."""
    from kt.storage.leader_epoch import salvage_leader_epoch_checkpoint

    entries, problems = salvage_leader_epoch_checkpoint(Path(path).read_bytes(), path)
    for e in entries:
        if ctx.opts.json:
            ctx.emit(
                {
                    "type": "leader_epoch_entry",
                    "file": path,
                    "epoch": e.epoch,
                    "start_offset": e.start_offset,
                }
            )
        else:
            ctx.out(f"epoch: {e.epoch} startOffset: {e.start_offset}\n")
    for p in problems:
        ctx.report(path, "corrupt_checkpoint", p.message)
