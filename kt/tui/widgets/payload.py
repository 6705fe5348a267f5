"""Rendering of record keys and values as text, pretty JSON or hex."""

from __future__ import annotations

import json

FORMATS = ("text", "json", "hex")


def as_text(data: bytes | None) -> str:
    """UTF-8 with undecodable bytes replaced and control characters escaped."""
    if data is None:
        return "null"
    s = data.decode("utf-8", errors="replace")
    return "".join(c if c.isprintable() or c in "\n\t" else f"\\x{ord(c):02x}" for c in s)


def as_hex(data: bytes | None) -> str:
    """Hex dump: 16 bytes a line, offset, hex pairs and printable ASCII."""
    if data is None:
        return "null"
    lines = []
    for i in range(0, len(data), 16):
        chunk = data[i : i + 16]
        hexes = " ".join(f"{b:02x}" for b in chunk)
        ascii_ = "".join(chr(b) if 32 <= b < 127 else "." for b in chunk)
        lines.append(f"{i:08x}  {hexes:<47}  {ascii_}")
    return "\n".join(lines) if lines else "(empty)"


def as_json(data: bytes | None) -> str:
    """Pretty JSON when the bytes parse as JSON, else the text rendering."""
    if data is None:
        return "null"
    try:
        return json.dumps(json.loads(data), indent=2, ensure_ascii=False, sort_keys=False)
    except (ValueError, UnicodeDecodeError):
        return as_text(data)


def render(data: bytes | None, fmt: str) -> str:
    """The full rendering of `data` in format `fmt` (text, json or hex)."""
    if fmt == "hex":
        return as_hex(data)
    if fmt == "json":
        return as_json(data)
    return as_text(data)


def one_line(data: bytes | None, fmt: str, width: int = 60) -> str:
    """A one-line preview for a table cell, cut to `width` characters."""
    if data is None:
        s = "null"
    elif fmt == "hex":
        s = data[: width // 3 + 1].hex(" ")
    elif fmt == "json":
        try:
            s = json.dumps(json.loads(data), ensure_ascii=False, separators=(",", ":"))
        except (ValueError, UnicodeDecodeError):
            s = as_text(data)
    else:
        s = as_text(data)
    s = s.replace("\n", "⏎").replace("\t", " ")
    return s if len(s) <= width else s[: width - 1] + "…"
