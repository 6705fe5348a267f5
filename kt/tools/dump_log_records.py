"""Dumping a `.log` segment (or a KRaft snapshot) the way `kafka-dump-log.sh` does.

Text lines match Kafka's `DumpLogSegments.dumpLog` byte for byte; `--json` gives
one object per batch and record instead. This is the hot path of the command, so
each batch is formatted into one list of lines and written with a single call,
the per-batch constant parts of a record line are built once per batch, and the
v2 record loop reads the decoded records' fields directly.

Damage handling goes beyond Kafka, which stops (or throws) at the first bad
byte: a region that does not frame as a batch is reported with its position and
reason, and `--resync` carries on at the next valid batch. A batch whose CRC
fails is still printed (`isvalid: false`) and its records decoded if they
decode; a batch whose records do not decode is reported and skipped.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable

import crc32c as _crc32c

from kt.storage import legacy as legacy_format
from kt.storage import record_batch as v2
from kt.storage.errors import CorruptIndexError, CorruptRecordError, StorageError
from kt.storage.file_records import Damage, FileRecords, LogBatch
from kt.storage.metadata_codec import decode_control, kafka_json
from kt.storage.metadata_schema import CONTROL_RECORDS
from kt.tools.console import warn
from kt.tools.dump_log_context import INT_MAX, DumpContext, jbool, jopt, jstr
from kt.tools.dump_log_decoders import json_renderer, text_renderer
from kt.tools.dump_log_indexes import sibling_file as _sibling

# A metadata batch's record lines in one go, or None (`dump_log_metadata.plain_batch_lines`).
PlainLines = Callable[[v2.BatchHeader, "bytes | memoryview", str, bool], "list[str] | None"]

_CODEC_NAMES = {0: "none", 1: "gzip", 2: "snappy", 3: "lz4", 4: "zstd"}
_KRAFT_SNAPSHOT = re.compile(r"^(\d{20})-(\d{10})\.checkpoint$")
_BOOTSTRAP_SNAPSHOT = "bootstrap.checkpoint"


def codec_name(codec_id: int) -> str:
    """Kafka's CompressionType name, `unknown(N)` for ids 5-7."""
    return _CODEC_NAMES.get(codec_id, f"unknown({codec_id})")


def java_optional_long(value: int | None) -> str:
    """How Java prints an OptionalLong."""
    return "OptionalLong.empty" if value is None else f"OptionalLong[{value}]"


def control_description(key: bytes | None, value: bytes | None) -> tuple[str, dict[str, object]]:
    """Kafka's text for a control record (` endTxnMarker: ...`) and its JSON fields."""
    _version, type_id = v2.parse_control_key(key)
    name = v2.control_type_name(type_id)
    if type_id in (v2.CONTROL_ABORT, v2.CONTROL_COMMIT):
        _mv, epoch = v2.parse_end_txn_marker(value)
        return (
            f" endTxnMarker: {name} coordinatorEpoch: {epoch}",
            {"type": name, "type_id": type_id, "coordinator_epoch": epoch},
        )
    if type_id in CONTROL_RECORDS:
        # KRaft's control records, as Kafka prints them: a label and the record's JSON.
        schema, label = CONTROL_RECORDS[type_id]
        _schema, data = decode_control(type_id, value)
        text = kafka_json(schema, 0, data)
        return f" {label} {text}", {"type": name, "type_id": type_id, "data": json.loads(text)}
    return f" controlType: {name}({type_id})", {"type": name, "type_id": type_id}


class LogDumper:
    """Dumps one log file into a DumpContext."""

    def __init__(self, ctx: DumpContext, path: str) -> None:
        self.ctx = ctx
        self.opts = ctx.opts
        self.path = path
        self.jfile = jstr(path)
        # Kafka's deep-iteration offset tracking (lastOffset), across batches.
        self.last_offset = -1
        self.stop = False
        self.end = 0
        self.time_started = self.opts.start_time is None
        self._key_parser = None
        # Text dumps of metadata batches take the whole-batch fast path when they can.
        self._plain_metadata: PlainLines | None = None
        if self.opts.offsets_decoder or self.opts.transaction_log_decoder:
            from kt.tools.dump_log_coordinator import record_parser

            self._key_parser = record_parser(self.opts.offsets_decoder, self.opts.json)
        elif self.opts.cluster_metadata_decoder:
            from kt.tools.dump_log_metadata import metadata_parser, plain_batch_lines

            self._key_parser = metadata_parser(self.opts.json, self._metadata_error)
            if not self.opts.json and not self.opts.has_range:
                self._plain_metadata = plain_batch_lines
        self.text = text_renderer(self.opts.decode)
        self.jrender = json_renderer(self.opts.decode)

    def _metadata_error(self, offset: int, message: str) -> None:
        self.ctx.report(
            self.path,
            "record_decode_error",
            f"metadata record at offset {offset} does not decode: {message}",
            offset=offset,
        )

    # --- header lines ---
    def _print_header(self) -> None:
        name = os.path.basename(self.path)
        if self.opts.json:
            self.ctx.emit({"type": "file", "file": self.path, "kind": "log"})
            return
        m = _KRAFT_SNAPSHOT.match(name)
        if name == _BOOTSTRAP_SNAPSHOT:
            self.ctx.out("KRaft bootstrap snapshot\n")
        elif m:
            self.ctx.out(f"Snapshot end offset: {int(m[1])}, epoch: {int(m[2])}\n")
        else:
            try:
                self.ctx.out(f"Log starting offset: {int(name.split('.')[0])}\n")
            except ValueError:
                pass

    # --- seeking with the indexes ---
    def _seek(self, fr: FileRecords) -> int:
        opts = self.opts
        if opts.start_offset is None and opts.start_time is None:
            return 0
        index_path = _sibling(self.path, ".index")
        if index_path is None:
            warn(f"{self.path}: no offset index next to it; scanning from the start")
            return 0
        from kt.storage.offset_index import read_offset_index

        try:
            index = read_offset_index(index_path)
            position = 0
            if opts.start_offset is not None:
                position = index.lookup(opts.start_offset).position
            if opts.start_time is not None:
                time_path = _sibling(self.path, ".timeindex")
                if time_path is None:
                    warn(f"{self.path}: no time index next to it; scanning from the start")
                    return 0
                from kt.storage.time_index import read_time_index

                # The floor entry below start-time: every record up to its offset is older.
                entry = read_time_index(time_path).lookup(opts.start_time - 1)
                position = max(position, index.lookup(entry.offset).position)
        except (OSError, CorruptIndexError) as exc:
            warn(f"{self.path}: cannot use its indexes ({exc}); scanning from the start")
            return 0
        if position == 0:
            return 0
        first = next(fr.batches(position, validate=True), None)
        if not isinstance(first, LogBatch):
            warn(
                f"{self.path}: the index points at position {position}, which does not "
                "start a batch; scanning from the start"
            )
            return 0
        return position

    # --- the dump ---
    def run(self) -> None:
        """Dump the whole file (or the selected range) and report what is wrong."""
        self._print_header()
        with open(self.path, "rb") as f:
            fr = FileRecords(f)
            start = self._seek(fr) if self.opts.has_range else 0
            limited = self.opts.max_bytes != INT_MAX
            end = min(fr.size, start + self.opts.max_bytes) if limited else fr.size
            if start == 0 and limited:
                end = min(fr.size, self.opts.max_bytes)
            limited = limited and end < fr.size
            self._dump(fr, start, end, limited)

    def _dump(self, fr: FileRecords, start: int, end: int, limited: bool) -> None:
        opts = self.opts
        ctx = self.ctx
        out = ctx.out
        deep = opts.deep
        self.end = end
        ranged = opts.has_range
        fmt = self._json_batch if opts.json else self._text_batch
        for item in fr.batches(start, end, resync=opts.resync):
            if isinstance(item, Damage):
                self._damage(item, limited)
                continue
            if ranged:
                verdict = self._batch_verdict(item)
                if verdict < 0:
                    continue
                if verdict > 0:
                    break
            lines = fmt(item, deep)
            lines.append("")  # the last newline, without copying the batch's text again
            out("\n".join(lines))
            if self.stop:
                break

    def _damage(self, d: Damage, limited: bool) -> None:
        ctx = self.ctx
        if d.at_end and limited:
            # Like Kafka: a batch cut off by --max-bytes is simply not shown.
            return
        if d.at_end or d.length == 0:
            # Reading ends here: Kafka's "invalid bytes" are all the bytes not read.
            if not self.opts.json and not limited:
                name = os.path.basename(self.path)
                ctx.out(f"Found {self.end - d.position} invalid bytes at the end of {name}\n")
            note = "" if d.at_end else "; stopped here (--resync scans on for later batches)"
            ctx.damage(self.path, d.position, self.end - d.position, d.reason, note)
        else:
            ctx.damage(
                self.path,
                d.position,
                d.length,
                d.reason,
                f"; skipped {d.length} bytes to the next valid batch at {d.position + d.length}",
            )

    def _batch_verdict(self, b: LogBatch) -> int:
        """-1 skip this batch, 0 show it, 1 stop before it (range filters)."""
        opts = self.opts
        if opts.end_offset is not None:
            first = b.header.base_offset if b.header is not None else _legacy_base(b)
            if first > opts.end_offset:
                return 1
        if opts.start_offset is not None and b.last_offset < opts.start_offset:
            return -1
        if not self.time_started:
            assert opts.start_time is not None
            if b.max_timestamp < opts.start_time:
                return -1
            if not opts.deep:
                self.time_started = True
        if opts.end_time is not None and not opts.deep and b.max_timestamp > opts.end_time:
            # Shallow: the batch holding the first record past end-time is the last one.
            self.stop = True
        return 0

    # --- text ---
    def _text_batch(self, b: LogBatch, deep: bool) -> list[str]:
        h = b.header
        pos = b.position
        data = b.data
        if h is not None:
            valid = h.crc == _crc32c.crc32c(data[21:])
            label = b.timestamp_type_name
            codec_id = h.attributes & 7
            attrs = h.attributes
            last = h.base_offset + h.last_offset_delta
            seq = h.base_sequence
            last_seq = -1 if seq == -1 else v2.increment_sequence(seq, h.last_offset_delta)
            dh = f"OptionalLong[{h.base_timestamp}]" if attrs & 0x40 else "OptionalLong.empty"
            lines = [
                f"baseOffset: {h.base_offset} lastOffset: {last} count: {h.record_count} "
                f"baseSequence: {seq} lastSequence: {last_seq} producerId: {h.producer_id} "
                f"producerEpoch: {h.producer_epoch} partitionLeaderEpoch: "
                f"{h.partition_leader_epoch} isTransactional: "
                f"{'true' if attrs & 0x10 else 'false'} isControl: "
                f"{'true' if attrs & 0x20 else 'false'} deleteHorizonMs: {dh} "
                f"position: {pos} {label}: {h.max_timestamp} size: {len(data)} magic: 2 "
                f"compresscodec: {codec_name(codec_id)} crc: {h.crc} "
                f"isvalid: {'true' if valid else 'false'}"
            ]
            if not valid:
                self._invalid(b)
            if deep:
                self._text_records_v2(b, h, label, lines)
            return lines
        msg = b.legacy
        valid = msg.is_valid
        label = b.timestamp_type_name
        lines = [
            f"offset: {b.last_offset} position: {pos} {label}: {msg.timestamp} "
            f"size: {len(data)} magic: {msg.magic} compresscodec: {codec_name(msg.codec_id)} "
            f"crc: {msg.crc} isvalid: {'true' if valid else 'false'}"
        ]
        if not valid:
            self._invalid(b)
        if deep:
            self._text_records_legacy(b, label, lines)
        return lines

    def _invalid(self, b: LogBatch) -> None:
        self.ctx.report(
            self.path,
            "invalid_batch",
            f"batch at position {b.position} fails its CRC check "
            f"(stored {b.stored_crc}, computed {b.computed_crc()})",
            position=b.position,
        )

    def _track(self, offset: int) -> None:
        # Kafka's non-consecutive check, outside the hot loop's fast case.
        if self.last_offset != -1 and offset != self.last_offset + 1:
            self.ctx.offsets_not_consecutive(self.path, self.last_offset, offset)
        self.last_offset = offset

    def _record_filter(self, offset: int, timestamp: int) -> int:
        """-1 skip the record, 0 show it, 1 stop (range filters)."""
        opts = self.opts
        if opts.end_offset is not None and offset > opts.end_offset:
            self.stop = True
            return 1
        if opts.start_offset is not None and offset < opts.start_offset:
            return -1
        if not self.time_started:
            assert opts.start_time is not None
            if timestamp < opts.start_time:
                return -1
            self.time_started = True
        if opts.end_time is not None and timestamp > opts.end_time:
            self.stop = True
            return 1
        return 0

    def _decode_failed(self, b: LogBatch, exc: StorageError) -> None:
        self.ctx.damage(
            self.path,
            b.position,
            len(b.data),
            f"the records of the batch do not decode: {exc.message}",
        )

    def _text_records_v2(
        self, b: LogBatch, h: v2.BatchHeader, label: str, lines: list[str]
    ) -> None:
        opts = self.opts
        meta = not opts.skip_record_metadata
        control = h.is_control
        if self._plain_metadata is not None and not control:
            fast = self._plain_metadata(h, b.data, label, meta)
            if fast is not None:
                if fast:
                    # The records' offsets run base, base + 1, ...: track the first and last.
                    base = h.base_offset
                    if self.last_offset != -1 and base != self.last_offset + 1:
                        self._track(base)
                    self.last_offset = base + len(fast) - 1
                lines.extend(fast)
                return
        data_log = opts.print_data and not control
        ranged = opts.has_range
        parser = self._key_parser
        render = self.text
        ts_part = f" {label}: "
        append = lines.append
        expect = self.last_offset + 1 if self.last_offset != -1 else None
        try:
            for off, ts, k, val, hdrs, seq in v2.iter_record_tuples(h, b.data):
                if ranged:
                    verdict = self._record_filter(off, ts)
                    if verdict < 0:
                        continue
                    if verdict > 0:
                        break
                if off != expect:
                    self._track(off)
                else:
                    self.last_offset = off
                expect = off + 1
                if meta:
                    line = (
                        f"| offset: {off}{ts_part}{ts} keySize: "
                        f"{-1 if k is None else len(k)} valueSize: "
                        f"{-1 if val is None else len(val)} sequence: {seq} "
                        f"headerKeys: [{','.join([x[0] for x in hdrs]) if hdrs else ''}]"
                    )
                    if control:
                        line += self._control_text(b, off, k, val)
                    prefix = " "
                else:
                    line = ""
                    prefix = "| "
                if data_log:
                    if parser is not None:
                        pk, pv = parser(off, k, val)
                        if pk is not None:
                            line += f"{prefix}key: {pk}"
                        if pv is not None:
                            line += f" payload: {pv}"
                    else:
                        if k is not None:
                            line += f"{prefix}key: {render(k)}"
                        if val is not None:
                            line += f" payload: {render(val)}"
                append(line)
        except StorageError as exc:
            self._decode_failed(b, exc)

    def _control_text(self, b: LogBatch, off: int, k: bytes | None, val: bytes | None) -> str:
        try:
            return control_description(k, val)[0]
        except CorruptRecordError as exc:
            self._control_failed(b, off, exc)
            try:
                type_id = v2.parse_control_key(k)[1]
            except CorruptRecordError:
                return ""
            return f" controlType: {v2.control_type_name(type_id)}({type_id})"

    def _control_failed(self, b: LogBatch, off: int, exc: CorruptRecordError) -> None:
        self.ctx.report(
            self.path,
            "record_decode_error",
            f"control record at offset {off} (batch at position {b.position}) "
            f"does not decode: {exc.message}",
            position=b.position,
            offset=off,
        )

    def _text_records_legacy(self, b: LogBatch, label: str, lines: list[str]) -> None:
        opts = self.opts
        meta = not opts.skip_record_metadata
        parser = self._key_parser
        render = self.text
        try:
            for m in legacy_format.iter_inner(b.legacy):
                off = m.offset
                if opts.has_range:
                    verdict = self._record_filter(off, m.timestamp)
                    if verdict < 0:
                        continue
                    if verdict > 0:
                        break
                self._track(off)
                k, val = m.key, m.value
                if meta:
                    line = (
                        f"| offset: {off} {label}: {m.timestamp} keySize: {m.key_size} "
                        f"valueSize: {m.value_size} isValid: "
                        f"{'true' if m.is_valid else 'false'} crc: {m.crc}}}"
                    )
                    prefix = " "
                else:
                    line = ""
                    prefix = "| "
                if opts.print_data:
                    if parser is not None:
                        pk, pv = parser(off, k, val)
                        if pk is not None:
                            line += f"{prefix}key: {pk}"
                        if pv is not None:
                            line += f" payload: {pv}"
                    else:
                        if k is not None:
                            line += f"{prefix}key: {render(k)}"
                        if val is not None:
                            line += f" payload: {render(val)}"
                lines.append(line)
        except StorageError as exc:
            self._decode_failed(b, exc)

    # --- JSON ---
    def _json_batch(self, b: LogBatch, deep: bool) -> list[str]:
        h = b.header
        f = self.jfile
        if h is not None:
            valid = h.crc == _crc32c.crc32c(b.data[21:])
            attrs = h.attributes
            seq = h.base_sequence
            last_seq = -1 if seq == -1 else v2.increment_sequence(seq, h.last_offset_delta)
            lines = [
                f'{{"type":"batch","file":{f},"position":{b.position},'
                f'"base_offset":{h.base_offset},'
                f'"last_offset":{h.base_offset + h.last_offset_delta},'
                f'"count":{h.record_count},"magic":2,"codec":"{codec_name(attrs & 7)}",'
                f'"timestamp_type":"{b.timestamp_type_name}","max_timestamp":{h.max_timestamp},'
                f'"producer_id":{h.producer_id},"producer_epoch":{h.producer_epoch},'
                f'"base_sequence":{seq},"last_sequence":{last_seq},'
                f'"partition_leader_epoch":{h.partition_leader_epoch},'
                f'"is_transactional":{jbool(bool(attrs & 0x10))},'
                f'"is_control":{jbool(bool(attrs & 0x20))},'
                f'"delete_horizon_ms":{h.base_timestamp if attrs & 0x40 else "null"},'
                f'"size":{len(b.data)},"crc":{h.crc},"crc_valid":{jbool(valid)}}}'
            ]
            if not valid:
                self._invalid(b)
            if deep:
                self._json_records_v2(b, h, lines)
            return lines
        msg = b.legacy
        try:
            base: int | None = _legacy_base(b)
        except StorageError:
            base = None
        lines = [
            f'{{"type":"batch","file":{f},"position":{b.position},'
            f'"base_offset":{jopt(base)},"last_offset":{b.last_offset},"count":null,'
            f'"magic":{msg.magic},"codec":"{codec_name(msg.codec_id)}",'
            f'"timestamp_type":"{b.timestamp_type_name}","max_timestamp":{msg.timestamp},'
            f'"producer_id":-1,"producer_epoch":-1,"base_sequence":-1,"last_sequence":-1,'
            f'"partition_leader_epoch":-1,"is_transactional":false,"is_control":false,'
            f'"delete_horizon_ms":null,"size":{len(b.data)},"crc":{msg.crc},'
            f'"crc_valid":{jbool(msg.is_valid)}}}'
        ]
        if not msg.is_valid:
            self._invalid(b)
        if deep:
            self._json_records_legacy(b, lines)
        return lines

    def _json_kv(
        self,
        off: int,
        k: bytes | None,
        val: bytes | None,
        hdrs: list[tuple[str, bytes | None]],
        control: bool = False,
    ) -> str:
        """The key, value and headers part of a JSON record object."""
        # Decoders read data records; a control record's key and value are raw bytes.
        parser = None if control else self._key_parser
        if parser is not None:
            pk, pv = parser(off, k, val)
            kj, ke = ("null", "null") if pk is None else pk
            vj, ve = ("null", "null") if pv is None else pv
        else:
            render = self.jrender
            if k is None:
                kj, ke = "null", "null"
            else:
                kj, ke = render(k)
                ke = f'"{ke}"'
            if val is None:
                vj, ve = "null", "null"
            else:
                vj, ve = render(val)
                ve = f'"{ve}"'
        if not hdrs:
            return f'"key":{kj},"key_encoding":{ke},"value":{vj},"value_encoding":{ve},"headers":[]'
        hs = []
        for hk, hv in hdrs:
            if hv is None:
                hs.append(f'{{"key":{jstr(hk)},"value":null,"value_encoding":null}}')
            else:
                hj, he = self.jrender(hv)
                hs.append(f'{{"key":{jstr(hk)},"value":{hj},"value_encoding":"{he}"}}')
        return (
            f'"key":{kj},"key_encoding":{ke},"value":{vj},"value_encoding":{ve},'
            f'"headers":[{",".join(hs)}]'
        )

    def _json_records_v2(self, b: LogBatch, h: v2.BatchHeader, lines: list[str]) -> None:
        f = self.jfile
        base = h.base_offset
        control = h.is_control
        ranged = self.opts.has_range
        append = lines.append
        kv = self._json_kv
        expect = self.last_offset + 1 if self.last_offset != -1 else None
        # The common case (no decoder, no headers, not control) renders inline: this
        # loop is the whole cost of `--deep-iteration --json`.
        render = self.jrender if self._key_parser is None and not control else None
        try:
            for off, ts, k, val, hdrs, seq in v2.iter_record_tuples(h, b.data):
                if ranged:
                    verdict = self._record_filter(off, ts)
                    if verdict < 0:
                        continue
                    if verdict > 0:
                        break
                if off != expect:
                    self._track(off)
                else:
                    self.last_offset = off
                expect = off + 1
                if render is not None and not hdrs:
                    if k is None:
                        kj = ke = "null"
                    else:
                        kj, kname = render(k)
                        ke = f'"{kname}"'
                    if val is None:
                        vj = ve = "null"
                    else:
                        vj, vname = render(val)
                        ve = f'"{vname}"'
                    append(
                        f'{{"type":"record","file":{f},"offset":{off},"timestamp":{ts},'
                        f'"key":{kj},"key_encoding":{ke},"value":{vj},"value_encoding":{ve},'
                        f'"headers":[],"key_size":{-1 if k is None else len(k)},'
                        f'"value_size":{-1 if val is None else len(val)},'
                        f'"sequence":{seq},"batch_base_offset":{base}}}'
                    )
                    continue
                extra = self._control_json(b, off, k, val) if control else ""
                append(
                    f'{{"type":"record","file":{f},"offset":{off},"timestamp":{ts},'
                    f"{kv(off, k, val, hdrs, control)},"
                    f'"key_size":{-1 if k is None else len(k)},'
                    f'"value_size":{-1 if val is None else len(val)},'
                    f'"sequence":{seq},"batch_base_offset":{base}{extra}}}'
                )
        except StorageError as exc:
            self._decode_failed(b, exc)

    def _control_json(self, b: LogBatch, off: int, k: bytes | None, val: bytes | None) -> str:
        try:
            fields = control_description(k, val)[1]
        except CorruptRecordError as exc:
            self._control_failed(b, off, exc)
            return ',"control":null'
        return ',"control":' + json.dumps(fields, separators=(",", ":"))

    def _json_records_legacy(self, b: LogBatch, lines: list[str]) -> None:
        f = self.jfile
        try:
            base = _legacy_base(b)
            for m in legacy_format.iter_inner(b.legacy):
                off = m.offset
                if self.opts.has_range:
                    verdict = self._record_filter(off, m.timestamp)
                    if verdict < 0:
                        continue
                    if verdict > 0:
                        break
                self._track(off)
                lines.append(
                    f'{{"type":"record","file":{f},"offset":{off},"timestamp":{m.timestamp},'
                    f"{self._json_kv(off, m.key, m.value, [])},"
                    f'"key_size":{m.key_size},"value_size":{m.value_size},"sequence":-1,'
                    f'"batch_base_offset":{base},"crc":{m.crc},"crc_valid":{jbool(m.is_valid)}}}'
                )
        except StorageError as exc:
            self._decode_failed(b, exc)


def _legacy_base(b: LogBatch) -> int:
    """First offset of a legacy entry (decompresses a wrapper)."""
    return b.base_offset
