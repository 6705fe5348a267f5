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

from kt.storage.metadata_codec import MetadataParseError, decode_metadata_record
from kt.storage.metadata_fastjson import fast_kafka_json, text_parser
from kt.tools.dump_log_context import jstr

ErrorSink = Callable[[int, str], None]


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
