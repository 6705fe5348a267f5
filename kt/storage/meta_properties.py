"""``meta.properties``: the identity of a log directory, a Java properties file.

Version 0 (ZooKeeper era): ``version=0``, ``broker.id`` (optional), ``cluster.id``
(optional). Version 1 (KRaft): ``version=1``, ``node.id`` and ``cluster.id``
(required), ``directory.id`` (optional, a Kafka Uuid, KIP-858). A file without
``version`` is version 0, as in Kafka's ``MetaProperties.Builder``.

Kafka writes it with ``Properties.store(writer, "")``: a ``#`` line, a ``#<date>``
line, then ``key=value`` lines in hash-table order (so the key order of Kafka's
files is not deterministic). kt writes the same shape with a fixed key order and a
UTC date. Unknown keys are kept and written back.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from kt.storage.atomic import atomic_write
from kt.storage.checkpoint import decode_text, java_lines, parse_java_int
from kt.storage.errors import CorruptCheckpointError, UnsupportedFormatError
from kt.storage.partition_metadata import uuid_from_str

VERSION_PROP = "version"
BROKER_ID_PROP = "broker.id"
NODE_ID_PROP = "node.id"
CLUSTER_ID_PROP = "cluster.id"
DIRECTORY_ID_PROP = "directory.id"
_KNOWN = (VERSION_PROP, BROKER_ID_PROP, NODE_ID_PROP, CLUSTER_ID_PROP, DIRECTORY_ID_PROP)


@dataclass(frozen=True, slots=True)
class MetaProperties:
    """The content of a meta.properties file.

    ``node_id`` is ``broker.id`` in version 0 and ``node.id`` in version 1.
    """

    version: int
    node_id: int | None = None
    cluster_id: str | None = None
    directory_id: str | None = None
    extra: dict[str, str] = field(default_factory=dict)

    def problems(self) -> list[str]:
        """Why this would not be a valid meta.properties (empty when valid)."""
        out: list[str] = []
        if self.version not in (0, 1):
            out.append(f"unsupported version {self.version} (expected 0 or 1)")
        if self.version == 1:
            if self.node_id is None:
                out.append("node.id is required in version 1")
            if self.cluster_id is None:
                out.append("cluster.id is required in version 1")
        if self.node_id is not None and not 0 <= self.node_id <= 2**31 - 1:
            out.append(f"node id {self.node_id} is not an int32 >= 0")
        if self.directory_id is not None:
            try:
                uuid_from_str(self.directory_id)
            except ValueError as exc:
                out.append(f"invalid directory.id: {exc}")
        for key in self.extra:
            if key in _KNOWN:
                out.append(f"{key} must not be given in extra")
        return out


# --- Java properties syntax -------------------------------------------------------

_ESCAPES = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}


def _unescape(text: str, path: str | None, lineno: int) -> str:
    out: list[str] = []
    i = 0
    while i < len(text):
        c = text[i]
        if c != "\\" or i + 1 >= len(text):
            out.append(c)
            i += 1
            continue
        nxt = text[i + 1]
        if nxt == "u":
            digits = text[i + 2 : i + 6]
            if not re.fullmatch(r"[0-9a-fA-F]{4}", digits):
                raise CorruptCheckpointError(f"line {lineno}: malformed \\uxxxx escape", path=path)
            out.append(chr(int(digits, 16)))
            i += 6
            continue
        out.append(_ESCAPES.get(nxt, nxt))
        i += 2
    return "".join(out)


def _logical_lines(text: str) -> list[tuple[int, str]]:
    """Java ``Properties.load`` logical lines: comments and blanks dropped, continuations joined."""
    out: list[tuple[int, str]] = []
    pending: str | None = None
    start = 0
    for lineno, raw in enumerate(java_lines(text), start=1):
        line = raw.lstrip(" \t\f")
        if pending is None:
            if not line or line[0] in "#!":
                continue
            start = lineno
            pending = ""
        trailing = len(line) - len(line.rstrip("\\"))
        if trailing % 2 == 1:
            pending += line[:-1]
            continue
        out.append((start, pending + line))
        pending = None
    if pending is not None:
        out.append((start, pending))
    return out


def parse_properties(data: bytes | str, path: str | None = None) -> dict[str, str]:
    """Parse Java properties text (``key=value``, ``key: value`` or ``key value``)."""
    props: dict[str, str] = {}
    for lineno, line in _logical_lines(decode_text(data, path)):
        i = 0
        while i < len(line):
            c = line[i]
            if c == "\\":
                i += 2
                continue
            if c in "=: \t\f":
                break
            i += 1
        key, rest = line[:i], line[i:]
        rest = rest.lstrip(" \t\f")
        if rest[:1] in ("=", ":"):
            rest = rest[1:].lstrip(" \t\f")
        props[_unescape(key, path, lineno)] = _unescape(rest, path, lineno)
    return props


def _escape(text: str, is_key: bool) -> str:
    # Properties.saveConvert with escUnicode=false (store(Writer, ...)).
    out: list[str] = []
    for i, c in enumerate(text):
        if c == " ":
            out.append("\\ " if (i == 0 or is_key) else " ")
        elif c in "\t\n\r\f":
            out.append("\\" + {"\t": "t", "\n": "n", "\r": "r", "\f": "f"}[c])
        elif c in "=:#!\\":
            out.append("\\" + c)
        else:
            out.append(c)
    return "".join(out)


def java_date(now: datetime) -> str:
    """``java.util.Date.toString()`` in UTC: ``Sun Feb 12 10:26:07 UTC 2023``."""
    return now.astimezone(UTC).strftime("%a %b %d %H:%M:%S UTC %Y")


# --- meta.properties -------------------------------------------------------------


def _int_prop(props: dict[str, str], key: str, path: str | None) -> int | None:
    if key not in props:
        return None
    value = parse_java_int(props[key].strip())
    if value is None:
        raise CorruptCheckpointError(f"{key}={props[key]!r} is not an integer", path=path)
    return value


def parse_meta_properties(data: bytes | str, path: str | None = None) -> MetaProperties:
    """Parse and validate meta.properties (CorruptCheckpointError / UnsupportedFormatError)."""
    props = parse_properties(data, path)
    if not props:
        raise CorruptCheckpointError("no properties (empty file or only comments)", path=path)
    version = _int_prop(props, VERSION_PROP, path)
    if version is None:
        version = 0
    if version not in (0, 1):
        raise UnsupportedFormatError(
            f"meta.properties version {version} (kt reads 0 and 1)", path=path
        )
    node_key = BROKER_ID_PROP if version == 0 else NODE_ID_PROP
    node_id = _int_prop(props, node_key, path)
    extra = {
        k: v
        for k, v in props.items()
        if k not in (VERSION_PROP, node_key, CLUSTER_ID_PROP, DIRECTORY_ID_PROP)
    }
    meta = MetaProperties(
        version=version,
        node_id=node_id,
        cluster_id=props.get(CLUSTER_ID_PROP),
        directory_id=props.get(DIRECTORY_ID_PROP),
        extra=extra,
    )
    problems = meta.problems()
    if problems:
        raise CorruptCheckpointError(problems[0], path=path)
    return meta


def read_meta_properties(path: str | os.PathLike[str]) -> MetaProperties:
    """Read and validate a meta.properties file."""
    return parse_meta_properties(Path(path).read_bytes(), str(path))


def encode_meta_properties(meta: MetaProperties, now: datetime | None = None) -> bytes:
    """The file Kafka's ``PropertiesUtils.writePropertiesFile`` would write (fixed key order)."""
    problems = meta.problems()
    if problems:
        raise ValueError(problems[0])
    props: list[tuple[str, str]] = [(VERSION_PROP, str(meta.version))]
    if meta.node_id is not None:
        props.append((BROKER_ID_PROP if meta.version == 0 else NODE_ID_PROP, str(meta.node_id)))
    if meta.cluster_id is not None:
        props.append((CLUSTER_ID_PROP, meta.cluster_id))
    if meta.directory_id is not None:
        props.append((DIRECTORY_ID_PROP, meta.directory_id))
    props.extend(meta.extra.items())
    lines = ["#", "#" + java_date(now or datetime.now(UTC))]
    lines += [f"{_escape(k, True)}={_escape(v, False)}" for k, v in props]
    return "".join(line + "\n" for line in lines).encode("utf-8")


def write_meta_properties(
    path: str | os.PathLike[str], meta: MetaProperties, now: datetime | None = None
) -> None:
    """Write meta.properties atomically."""
    atomic_write(path, encode_meta_properties(meta, now))
