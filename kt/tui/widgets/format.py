"""Formatting of numbers, sizes, rates and times for the TUI's tables.

Cells are returned as `rich.text.Text` (never markup strings: topic names and
record payloads may contain `[`), styled with the current theme's semantic
colours so they stay readable on light and dark themes alike.
"""

from __future__ import annotations

import time

from rich.text import Text
from textual.app import App

_UNITS = ("B", "KiB", "MiB", "GiB", "TiB", "PiB")


def human_bytes(n: float) -> str:
    """1536 -> '1.5 KiB'; negative (unknown) -> '-'."""
    if n < 0:
        return "-"
    value = float(n)
    for unit in _UNITS:
        if value < 1024 or unit == _UNITS[-1]:
            return f"{int(value)} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{value:.1f} PiB"  # pragma: no cover - loop always returns


def human_count(n: float) -> str:
    """A count or rate, compact: 950, 12.3k, 4.1M."""
    if n < 0:
        return "-"
    if n < 1000:
        return f"{n:.0f}" if float(n).is_integer() or n >= 100 else f"{n:.1f}"
    for unit, div in (("k", 1e3), ("M", 1e6), ("G", 1e9)):
        if n < div * 1000 or unit == "G":
            return f"{n / div:.1f}{unit}"
    return str(n)  # pragma: no cover


def human_duration(seconds: float | None) -> str:
    """Lag in seconds as '0s', '42s', '3m05s', '2h10m', or '∞' when unknown."""
    if seconds is None:
        return "∞"
    s = round(seconds)
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m{s % 60:02d}s"
    if s < 86400:
        return f"{s // 3600}h{(s % 3600) // 60:02d}m"
    return f"{s // 86400}d{(s % 86400) // 3600:02d}h"


def clock(wall: float) -> str:
    """Local wall-clock time of a refresh, HH:MM:SS."""
    return time.strftime("%H:%M:%S", time.localtime(wall))


def timestamp_ms(ms: int) -> str:
    """A record timestamp (ms since the epoch) in local time; '-' when absent."""
    if ms < 0:
        return "-"
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(ms / 1000)) + f".{ms % 1000:03d}"


def ids(nodes: tuple[int, ...] | list[int]) -> str:
    """Broker ids as '1,2,3'."""
    return ",".join(str(n) for n in nodes) if nodes else "-"


def tone(app: App[object], text: str, kind: str, *, bold: bool = True) -> Text:
    """`text` in the theme's `kind` colour (error, warning, success, accent...)."""
    variables = app.theme_variables
    color = variables.get(f"text-{kind}") or variables.get(kind)
    style = f"bold {color}" if (bold and color) else (color or ("bold" if bold else ""))
    numeric = text.replace(",", "").replace(".", "").isdigit()
    return Text(text, style=style, end="", justify="right" if numeric else None)


def counts_line(app: App[object], items: list[tuple[str, int, str]]) -> Text:
    """'Label N   Label N ...': each count in `kind`'s colour when non-zero (success
    when zero). The separator goes before each label, so a count never runs into the
    next label, whatever happens to trailing spaces at a wrap."""
    out = Text(end="")
    for i, (label, n, kind) in enumerate(items):
        if i:
            out.append("   ")
        out.append(f"{label} ")
        count = tone(app, str(n), kind if n else "success")
        count.justify = None  # inline, not a right-aligned cell
        out.append_text(count)
    return out


def plain(text: str) -> Text:
    """User data as a cell, never interpreted as markup."""
    return Text(text, end="", no_wrap=True)


def num(value: float | str) -> Text:
    """A right-aligned numeric cell."""
    return Text(str(value), justify="right", end="", no_wrap=True)


_BARS = "▁▂▃▄▅▆▇█"


def spark_text(values: list[float] | list[int], width: int = 12) -> str:
    """A sparkline in a table cell: the last `width` values as block characters."""
    vals = [float(v) for v in values[-width:]]
    if not vals:
        return ""
    lo, hi = min(vals), max(vals)
    if hi == lo:
        return (_BARS[0] if hi == 0 else _BARS[3]) * len(vals)
    return "".join(_BARS[int((v - lo) / (hi - lo) * (len(_BARS) - 1))] for v in vals)
