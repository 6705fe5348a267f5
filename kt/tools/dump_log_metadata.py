"""`--cluster-metadata-decoder`: KRaft metadata records as Kafka's dump tool prints them.

Kafka's `ClusterMetadataLogMessageParser` prints no key and the payload
`{"type":"<RECORD_TYPE>","version":N,"data":{...}}` (the generated JSON converter's
output, compact); a record that does not decode prints the payload
`Error at <offset>, skipping. <message>` and the dump goes on. kt does the same,
reports the record as a problem (exit 1), and prints secrets as "[redacted]".
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from kt.storage import record_batch as v2
from kt.storage.errors import StorageError
from kt.storage.metadata_codec import MetadataParseError, decode_metadata_record
from kt.storage.metadata_fastjson import (
    READ_ERRORS,
    READERS,
    SHORT_MAX,
    SHORT_TEXTS,
    fast_kafka_json,
    text_parser,
)
from kt.tools.dump_log_context import jstr

ErrorSink = Callable[[int, str], None]

# The four bytes after a record's length as a controller writes them: attributes 0,
# timestamp delta 0 (one timestamp per batch), offset delta i (zig-zag, one byte up
# to 63), null key (zig-zag -1). Indexed by the record's position i, not i & 63:
# from i = 64 on the delta takes two bytes, so no four bytes are record i's frame,
# and the entry is None (never equal). With i & 63, record 64 with a one-byte delta
# 0 would pass as offset base + 64 where Kafka prints base + 0.
_HEADS_SIZE = 8192
_HEADS: list[bytes | None] = [bytes((0, 0, i << 1, 1)) for i in range(64)]
_HEADS += [None] * (_HEADS_SIZE - 64)


class _SizeTexts(dict[int, str]):
    """A record line's text from its value size to its payload, by the size: made on
    first use (values of the fast path are under 8192 bytes, so it stays small)."""

    def __missing__(self, size: int) -> str:
        text = self[size] = f"{size} sequence: -1 headerKeys: [] payload: "
        return text


# One lookup instead of formatting the size into every line.
_SIZES = _SizeTexts()


def metadata_payload(offset: int, value: bytes | None) -> tuple[str, bool]:
    """(Kafka's payload text, whether it decoded) for one metadata record."""
    text = fast_kafka_json(value)
    if text is not None:
        return text, True
    try:
        return decode_metadata_record(value).kafka_json(), True
    except MetadataParseError as exc:
        return f"Error at {offset}, skipping. {exc.message}", False


def metadata_parser(
    as_json: bool, on_error: ErrorSink
) -> Callable[[int, bytes | None, bytes | None], tuple[Any, Any]]:
    """A (offset, key, value) -> (key, payload) parser for the dump's record loop.

    Text mode gives strings; JSON mode (fragment, '"encoding"') pairs: the record
    as an embedded object ("json") or the error line ("text").
    """
    if as_json:

        def parse_json(off: int, k: bytes | None, v: bytes | None) -> tuple[Any, Any]:
            text, ok = metadata_payload(off, v)
            if ok:
                return None, (text, '"json"')
            on_error(off, text.split("skipping. ", 1)[1])
            return None, (jstr(text), '"text"')

        return parse_json

    def slow(off: int, v: bytes | None) -> str:
        text, ok = metadata_payload(off, v)
        if not ok:
            on_error(off, text.split("skipping. ", 1)[1])
        return text

    # The hot path: the fast renderer inlined in one call per well-formed record.
    return text_parser(slow)


def plain_batch_lines(
    h: v2.BatchHeader, data: bytes | memoryview, label: str, meta: bool
) -> list[str] | None:
    """The text lines of a metadata batch's records, or None for the general path.

    The dump's hot path, one tight loop per batch with nothing called per record but
    the record type's reader. It takes the plain shape KRaft's controllers write:
    offset deltas 0, 1, 2, ..., no key, a value, no headers, every length and delta
    a one- or two-byte varint (`record_batch`'s layout), and every value rendered by
    the fast path (`metadata_fastjson`). Anything else (damage, an unusual record, a
    value the fast path does not render, a sequence number) gives None, and the
    caller's general loop prints the batch, errors and reports included, with the
    same text. `label` is the timestamp type's name; `meta` false is
    `--skip-record-metadata`.
    """
    count = h.record_count
    if h.base_sequence != -1 or count < 0:
        return None
    attributes = h.attributes
    if attributes & v2.CODEC_MASK:
        try:
            buf = v2.records_section(h, data)
        except StorageError:
            return None
    else:
        buf = bytes(data[v2.HEADER_SIZE : h.batch_length + v2.LOG_OVERHEAD])
    base = h.base_offset
    if attributes & v2.TIMESTAMP_TYPE_MASK:
        # LogAppendTime: every record shows the batch's max timestamp; `& keep` drops deltas.
        first, keep = h.max_timestamp, 0
    else:
        first, keep = h.base_timestamp, -1
    head = f" {label}: "
    # The line's middle when the record's timestamp is the batch's (KRaft writes one
    # timestamp per batch): one int fewer to format per record.
    same = f"{head}{first} keySize: -1 valueSize: "
    readers = READERS
    short_texts = SHORT_TEXTS
    short_max = SHORT_MAX
    heads = _HEADS
    if count > _HEADS_SIZE:
        heads = heads + [None] * (count - _HEADS_SIZE)
    sizes = _SIZES
    lines: list[str] = []
    add = lines.append
    end = len(buf)
    pos = 0
    try:
        for i in range(count):
            b = buf[pos]
            # A small record as a controller writes it, six bytes checked: an even
            # one-byte length 2L (under 64 bytes), attributes 0, timestamp delta 0,
            # offset delta i and a null key (heads[i]), the value's one-byte length
            # 2(L - 6) (what is left after those and the header count). From record
            # 64 on heads[i] is None: its delta takes two bytes, and a one-byte delta
            # there is not i (the general loop prints it as Kafka does).
            if not b & 0x81 and buf[pos + 1 : pos + 5] == heads[i] and buf[pos + 5] == b - 12:
                rec_end = pos + 1 + (b >> 1)
                size = (b >> 1) - 6
                if buf[rec_end - 1]:
                    return None
                value = buf[pos + 6 : rec_end - 1]
                mid = same
                pos = rec_end
            else:
                # Record length (non-negative), then the attributes byte, which is unused.
                if b < 0x80:
                    rec_end = pos + 1 + (b >> 1)
                    pos += 1
                else:
                    b2 = buf[pos + 1]
                    if b2 >= 0x80:
                        return None
                    rec_end = pos + 2 + (((b & 0x7F) | (b2 << 7)) >> 1)
                    pos += 2
                if b & 1:
                    return None
                # The usual frame, four bytes checked at once (a longer record).
                if buf[pos : pos + 4] == heads[i]:
                    mid = same
                    pos += 4
                else:
                    # Timestamp delta (zig-zag).
                    b = buf[pos + 1]
                    if b < 0x80:
                        tsd = (b >> 1) ^ -(b & 1)
                        pos += 2
                    else:
                        b2 = buf[pos + 2]
                        if b2 >= 0x80:
                            return None
                        raw = (b & 0x7F) | (b2 << 7)
                        tsd = (raw >> 1) ^ -(raw & 1)
                        pos += 3
                    # Offset delta i (zig-zag 2i), then a null key (zig-zag -1: one byte 0x01).
                    b = buf[pos]
                    if b < 0x80:
                        if b != i << 1 or buf[pos + 1] != 1:
                            return None
                        pos += 2
                    else:
                        b2 = buf[pos + 1]
                        if b2 >= 0x80 or ((b & 0x7F) | (b2 << 7)) != i << 1 or buf[pos + 2] != 1:
                            return None
                        pos += 3
                    tsd &= keep
                    mid = f"{head}{first + tsd} keySize: -1 valueSize: " if tsd else same
                # Value length (not null), the value, then a zero header count at the end:
                # the record's length gives the value's, checked against its varint, one
                # byte or two (a record shorter than 8192 bytes holds no longer one).
                size = rec_end - pos - 2
                if size < 64:
                    if buf[pos] != size << 1 or buf[rec_end - 1]:
                        return None
                    value = buf[pos + 1 : rec_end - 1]
                else:
                    size -= 1
                    if (
                        buf[pos] != ((size << 1) & 0x7F) | 0x80
                        or buf[pos + 1] != size >> 6
                        or buf[rec_end - 1]
                    ):
                        return None
                    value = buf[pos + 2 : rec_end - 1]
                pos = rec_end
            # The payload: the shortest values (NoOps) repeat byte for byte.
            if size <= short_max:
                text = short_texts.get(value)
                if text is None:
                    reader = readers[value[:3]]
                    if reader is None:
                        return None
                    text = reader(value, 3)
                    if len(short_texts) >= 10_000:
                        short_texts.clear()
                    short_texts[value] = text
            else:
                reader = readers[value[:3]]
                if reader is None:
                    return None
                text = reader(value, 3)
            if meta:
                add(f"| offset: {base + i}{mid}{sizes[size]}{text}")
            else:
                add(f" payload: {text}")
    except READ_ERRORS:  # IndexError among them: a record runs past the section
        return None
    if pos != end:
        return None
    return lines
