"""How `kt dump-log-segments` renders record keys, values and header values.

Text mode follows Kafka's `StringDecoder` by default: the bytes decoded as UTF-8,
malformed sequences replaced by U+FFFD. `--decode hex|base64|json` changes that.

JSON mode must be lossless, so every rendered field comes with an encoding name:

- `utf8`: the bytes were valid UTF-8 and the field is that string;
- `hex`: lower-case hex of the bytes (the utf8 and json fallbacks for bytes that
  are not valid UTF-8, and what `--decode hex` always gives);
- `base64`: standard base64 with padding (`--decode base64`);
- `json`: the bytes parsed as JSON and embedded as a JSON value (`--decode json`
  when they parse, and the `--offsets-decoder` output);
- `text`: a decoder's text rendering (`--transaction-log-decoder`).

A null key or value is JSON null with encoding null.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Callable

from kt.tools.dump_log_context import jstr

DECODE_CHOICES = ("utf8", "hex", "base64", "json")

TextRenderer = Callable[[bytes], str]
# Returns (JSON fragment, encoding name).
JsonRenderer = Callable[[bytes], tuple[str, str]]


def _text_utf8(data: bytes) -> str:
    return data.decode("utf-8", "replace")


def _text_hex(data: bytes) -> str:
    return data.hex()


def _text_base64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def _text_json(data: bytes) -> str:
    try:
        return json.dumps(json.loads(data), separators=(",", ":"), ensure_ascii=False)
    except (ValueError, RecursionError):
        return data.decode("utf-8", "replace")


def text_renderer(mode: str) -> TextRenderer:
    """The text-mode renderer for `--decode mode`."""
    return {"utf8": _text_utf8, "hex": _text_hex, "base64": _text_base64, "json": _text_json}[mode]


# Bytes a JSON string must escape; when a value has none of them (the common case)
# the decoded text can be quoted as is, which is much cheaper than escaping it.
_JSON_SPECIAL = bytes(range(32)) + b'"\\'


def _json_utf8(data: bytes) -> tuple[str, str]:
    # ASCII is the common case and the cheapest check; anything else tries UTF-8.
    if data.isascii():
        if len(data.translate(None, _JSON_SPECIAL)) == len(data):
            return f'"{data.decode("ascii")}"', "utf8"
        return jstr(data.decode("ascii")), "utf8"
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return f'"{data.hex()}"', "hex"
    if len(data.translate(None, _JSON_SPECIAL)) == len(data):
        return f'"{text}"', "utf8"
    return jstr(text), "utf8"


def _json_hex(data: bytes) -> tuple[str, str]:
    return f'"{data.hex()}"', "hex"


def _json_base64(data: bytes) -> tuple[str, str]:
    return f'"{binascii.b2a_base64(data, newline=False).decode("ascii")}"', "base64"


def _json_json(data: bytes) -> tuple[str, str]:
    try:
        return json.dumps(json.loads(data), separators=(",", ":"), ensure_ascii=False), "json"
    except (ValueError, RecursionError):
        return _json_utf8(data)


def json_renderer(mode: str) -> JsonRenderer:
    """The JSON-mode renderer for `--decode mode` (fragment and encoding name)."""
    return {"utf8": _json_utf8, "hex": _json_hex, "base64": _json_base64, "json": _json_json}[mode]
