"""Placeholders for record bytes that the transport sends itself, without copying.

A broker's Fetch response carries record batches that already sit in segment
files. Reading them into Python only to write them to a socket again wastes a
copy, so a response body may hold an `ExternalRecords(length, source)` in any
`records` field instead of bytes. The encoder writes the field's length prefix
for `length` bytes and leaves a gap; `headers.encode_response_parts` returns the
frame as a list of parts - bytes chunks and the placeholders, in wire order - and
the transport fills each gap from `source` (e.g. with `os.sendfile`). The protocol
never looks inside `source`.

Registration costs ordinary encoding nothing: the records writers only come here
after `len()` of the value failed, and the collector of gaps lives in a context
variable that only `encode_response_parts` sets.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

from kt.protocol.errors import EncodeError

_MAX_INT32 = 0x7FFFFFFF


@dataclass(frozen=True, slots=True)
class ExternalRecords:
    """`length` bytes of records the transport will send from `source`.

    `source` is opaque to the protocol: whatever the transport needs to produce
    the bytes, e.g. `(fd, position)` for `os.sendfile`.
    """

    length: int
    source: Any = None

    def __post_init__(self) -> None:
        if type(self.length) is not int or not 0 <= self.length <= _MAX_INT32:
            raise ValueError(f"ExternalRecords length must be an int in 0..{_MAX_INT32}")


#: one piece of an encoded frame: bytes to write, or a gap the transport fills
Part = bytes | ExternalRecords


class _Collector:
    __slots__ = ("marks", "out")

    def __init__(self, out: bytearray) -> None:
        self.out = out
        #: (offset in `out` where the external bytes belong, placeholder)
        self.marks: list[tuple[int, ExternalRecords]] = []


_COLLECTOR: ContextVar[_Collector | None] = ContextVar("kt_external_records", default=None)


def mark(out: bytearray, value: ExternalRecords) -> None:
    """Record that `value`'s bytes belong at the end of `out` (prefix already written).

    Raises EncodeError outside `encode_response_parts`, and inside a tagged field
    (whose payload is built apart and copied, so the gap would be lost).
    """
    collector = _COLLECTOR.get()
    if collector is None:
        raise EncodeError(
            "ExternalRecords can only be encoded by encode_response_parts "
            "(send_response_parts), which return the placeholders"
        )
    if collector.out is not out:
        raise EncodeError("ExternalRecords is not supported inside a tagged field")
    collector.marks.append((len(out), value))


def encode_collecting(
    encode: Callable[[bytearray], None], out: bytearray
) -> list[tuple[int, ExternalRecords]]:
    """Run `encode(out)`; returns the placeholders it wrote to `out`, with their offsets."""
    collector = _Collector(out)
    token = _COLLECTOR.set(collector)
    try:
        encode(out)
    finally:
        _COLLECTOR.reset(token)
    return collector.marks


@contextmanager
def collecting(out: bytearray) -> Iterator[list[tuple[int, ExternalRecords]]]:
    """Within the block, placeholders written to `out` are listed in the yielded list."""
    collector = _Collector(out)
    token = _COLLECTOR.set(collector)
    try:
        yield collector.marks
    finally:
        _COLLECTOR.reset(token)


def split(out: bytearray, marks: list[tuple[int, ExternalRecords]]) -> list[Part]:
    """Cut `out` at the marked offsets into bytes chunks with the placeholders between.

    Empty chunks (two placeholders back to back, or one at the very end) are left out.
    """
    view = memoryview(out)
    parts: list[Part] = []
    start = 0
    for pos, ext in marks:
        if pos > start:
            parts.append(bytes(view[start:pos]))
        parts.append(ext)
        start = pos
    if start < len(out):
        parts.append(bytes(view[start:]))
    view.release()
    return parts


def parts_size(parts: list[Part]) -> int:
    """The number of bytes the parts put on the wire."""
    return sum(p.length if isinstance(p, ExternalRecords) else len(p) for p in parts)


def join_parts(
    parts: list[Part], resolve: Callable[[ExternalRecords], bytes | bytearray | memoryview]
) -> bytes:
    """The whole frame as bytes, each placeholder replaced by `resolve(placeholder)`.

    For transports that cannot send from a file (TLS) and for tests. Raises
    EncodeError when `resolve` gives a different number of bytes than announced.
    """
    out = bytearray()
    for part in parts:
        if isinstance(part, ExternalRecords):
            data = resolve(part)
            n = data.nbytes if isinstance(data, memoryview) else len(data)
            if n != part.length:
                raise EncodeError(f"ExternalRecords announced {part.length} bytes, got {n}")
            out += data
        else:
            out += part
    return bytes(out)
