"""Fast rendering of metadata records straight from their bytes to Kafka's JSON.

The dump of a metadata log prints one JSON payload per record, and a metadata log
holds millions of small records, so the general codec (decode to a dict, then
render) is too slow for the dump's hot loop. This module generates, once per
record type and version, a Python function from the schema data that reads the
bytes and builds the JSON text in one pass. It handles only well-formed records:
on anything unexpected it raises `FastPathMiss` (or fails on the bytes), and the
caller falls back to the general codec, which produces Kafka's exact error message.
The tests check that both paths print the same text for every record type and
version, and agree on arbitrary bytes.
"""

from __future__ import annotations

import base64
import itertools
import json
import struct
from collections.abc import Callable, Mapping

from kt.storage.metadata_codec import is_sensitive_config, jackson_string, java_double
from kt.storage.metadata_schema import METADATA_RECORDS, Field, MessageSchema, in_range


class FastPathMiss(Exception):
    """The record is not one the fast path renders; use the general codec."""


def _uv(buf: bytes, pos: int) -> tuple[int, int]:
    """An unsigned varint at pos (slow path of the generated code's inline fast case)."""
    value = 0
    shift = 0
    while True:
        b = buf[pos]
        pos += 1
        value |= (b & 0x7F) << shift
        if b < 0x80:
            return value, pos
        shift += 7
        if shift > 28:
            raise FastPathMiss


_STR_CACHE: dict[bytes, str] = {}

# json's C string encoder, non-ASCII kept as is: where it escapes nothing, its text is
# Jackson's too (one C call instead of the checks jackson_string makes in Python).
_ENCODE_STR: Callable[[str], str] = json.encoder.encode_basestring


def _str(buf: bytes, pos: int, n: int) -> str:
    raw = buf[pos : pos + n]
    # Config names, topic names and hosts repeat throughout a log: remember their text.
    text = _STR_CACHE.get(raw)
    if text is not None:
        return text
    if len(raw) != n:
        raise FastPathMiss
    # The text made inline: a log of distinct values (config values, resource names)
    # misses often, and a call is a measurable share of a miss.
    s = raw.decode("utf-8")
    text = _ENCODE_STR(s)
    if len(text) != len(s) + 2:
        text = jackson_string(s)
    if len(_STR_CACHE) > 100_000:
        _STR_CACHE.clear()
    _STR_CACHE[raw] = text
    return text


def _bytes(buf: bytes, pos: int, n: int) -> str:
    raw = buf[pos : pos + n]
    if len(raw) != n:
        raise FastPathMiss
    return '"' + base64.b64encode(raw).decode("ascii") + '"'


_UUID_CACHE: dict[bytes, str] = {}


def _uuid(buf: bytes, pos: int) -> str:
    raw = buf[pos : pos + 16]
    text = _UUID_CACHE.get(raw)
    if text is not None:
        return text
    if len(raw) != 16:
        raise FastPathMiss
    # A log names few topics and brokers, each many times: remember their ids' text.
    if len(_UUID_CACHE) > 100_000:
        _UUID_CACHE.clear()
    text = _UUID_CACHE[raw] = '"' + base64.urlsafe_b64encode(raw).decode("ascii")[:22] + '"'
    return text


_INTS_CACHE: dict[bytes, str] = {}


def _ints(buf: bytes, pos: int, n: int) -> str:
    # Replica lists, ISRs and ELRs repeat endlessly in a metadata log: remember their text.
    raw = buf[pos : pos + 4 * n]
    text = _INTS_CACHE.get(raw)
    if text is not None:
        return text
    if len(raw) != 4 * n:
        raise FastPathMiss
    if len(_INTS_CACHE) > 100_000:
        _INTS_CACHE.clear()
    text = _INTS_CACHE[raw] = "[" + ",".join(map(str, struct.unpack(f">{n}i", raw))) + "]"
    return text


def _ints_new(raw: bytes, n: int) -> str:
    """The text of an int32 array not yet in the cache (the generated code looks it up)."""
    text = "[" + ",".join(map(str, struct.unpack(f">{n}i", raw))) + "]"
    if len(raw) == 4 * n:
        if len(_INTS_CACHE) > 100_000:
            _INTS_CACHE.clear()
        _INTS_CACHE[raw] = text
    return text


_UUIDS_CACHE: dict[bytes, str] = {}


def _uuids(buf: bytes, pos: int, n: int) -> str:
    # Directory and log-dir lists repeat the same few ids: remember the whole list's text.
    raw = buf[pos : pos + 16 * n]
    text = _UUIDS_CACHE.get(raw)
    if text is not None:
        return text
    if len(raw) != 16 * n:
        raise FastPathMiss
    if len(_UUIDS_CACHE) > 100_000:
        _UUIDS_CACHE.clear()
    text = _UUIDS_CACHE[raw] = (
        "[" + ",".join([_uuidtext(raw[i : i + 16]) for i in range(0, 16 * n, 16)]) + "]"
    )
    return text


_SENSITIVE: dict[str, bool] = {}


def _sensitive(name_json: str) -> bool:
    """Whether the config named by this JSON string text is a secret (cached by name)."""
    hit = _SENSITIVE.get(name_json)
    if hit is None:
        if len(_SENSITIVE) > 10_000:
            _SENSITIVE.clear()
        hit = _SENSITIVE[name_json] = is_sensitive_config(name_json[1:-1])
    return hit


def _uuidtext(raw: bytes) -> str:
    text = _UUID_CACHE.get(raw)
    if text is None:
        if len(_UUID_CACHE) > 100_000:
            _UUID_CACHE.clear()
        text = _UUID_CACHE[raw] = '"' + base64.urlsafe_b64encode(raw).decode("ascii")[:22] + '"'
    return text


_GLOBALS: dict[str, object] = {
    "_uuidtext": _uuidtext,
    "_uv": _uv,
    "_str": _str,
    "_bytes": _bytes,
    "_uuid": _uuid,
    "_ints": _ints,
    "_ints_new": _ints_new,
    "_IC": _INTS_CACHE,
    "_UC": _UUID_CACHE,
    "_uuids": _uuids,
    "_I8": struct.Struct(">b").unpack_from,
    "_I16": struct.Struct(">h").unpack_from,
    "_U16": struct.Struct(">H").unpack_from,
    "_I32": struct.Struct(">i").unpack_from,
    "_I64": struct.Struct(">q").unpack_from,
    "_F64": struct.Struct(">d").unpack_from,
    "_dbl": java_double,
    "_sensitive": _sensitive,
    "Miss": FastPathMiss,
}

_FIXED = {
    "int8": (1, "_I8"),
    "int16": (2, "_I16"),
    "uint16": (2, "_U16"),
    "int32": (4, "_I32"),
    "int64": (8, "_I64"),
}


class _Gen:
    """Emits the source of one module of reader functions."""

    # One counter for every generator: their functions share one namespace.
    _names = itertools.count(1)

    def __init__(self) -> None:
        self.lines: list[str] = []

    def name(self, prefix: str) -> str:
        return f"{prefix}{next(self._names)}"

    def uvarint(self, out: list[str], ind: str, var: str) -> None:
        out.append(f"{ind}{var} = buf[pos]")
        out.append(f"{ind}if {var} < 128: pos += 1")
        out.append(f"{ind}else: {var}, pos = _uv(buf, pos)")

    def value(
        self, out: list[str], ind: str, f: Field, t: str, version: int, var: str, nullable: bool
    ) -> None:
        """Code reading one value of type t at pos into the JSON text `var`."""
        if t in _FIXED:
            size, fn = _FIXED[t]
            out.append(f"{ind}{var} = str({fn}(buf, pos)[0]); pos += {size}")
        elif t == "bool":
            out.append(f"{ind}{var} = 'true' if buf[pos] else 'false'; pos += 1")
        elif t == "float64":
            out.append(f"{ind}{var} = _dbl(_F64(buf, pos)[0]); pos += 8")
        elif t == "uuid":
            out.append(f"{ind}{var} = _uuid(buf, pos); pos += 16")
        elif t in ("string", "bytes"):
            n = self.name("n")
            self.uvarint(out, ind, n)
            out.append(f"{ind}if {n} == 0:")
            out.append(f"{ind}    {'' if nullable else 'raise Miss; '}{var} = 'null'")
            out.append(f"{ind}else:")
            fn = "_str" if t == "string" else "_bytes"
            out.append(f"{ind}    {var} = {fn}(buf, pos, {n} - 1); pos += {n} - 1")
        else:
            fn = self.struct(f.fields, version)
            out.append(f"{ind}{var}, pos = {fn}(buf, pos)")

    def field(self, out: list[str], ind: str, f: Field, version: int, var: str) -> None:
        nullable = in_range(version, f.nullable)
        if not f.is_array:
            self.value(out, ind, f, f.type, version, var, nullable)
            return
        n = self.name("n")
        self.uvarint(out, ind, n)
        out.append(f"{ind}if {n} == 0:")
        out.append(f"{ind}    {'' if nullable else 'raise Miss; '}{var} = 'null'")
        if f.element == "int32":
            # The cache lookup inline: most lists are ones already seen.
            raw = self.name("raw")
            out.append(f"{ind}else:")
            out.append(f"{ind}    {n} = 4 * ({n} - 1); {raw} = buf[pos : pos + {n}]")
            out.append(f"{ind}    {var} = _IC.get({raw})")
            out.append(f"{ind}    if {var} is None: {var} = _ints_new({raw}, {n} >> 2)")
            out.append(f"{ind}    pos += {n}")
            return
        if f.element == "uuid":
            out.append(f"{ind}else:")
            out.append(f"{ind}    {var} = _uuids(buf, pos, {n} - 1); pos += 16 * ({n} - 1)")
            return
        items = self.name("items")
        item = self.name("it")
        out.append(f"{ind}else:")
        out.append(f"{ind}    {items} = []")
        out.append(f"{ind}    for _ in range({n} - 1):")
        self.value(out, ind + "        ", f, f.element, version, item, False)
        out.append(f"{ind}        {items}.append({item})")
        out.append(f"{ind}    {var} = '[' + ','.join({items}) + ']'")

    def struct(
        self,
        fields: tuple[Field, ...],
        version: int,
        redact: Callable[[Field], str | None] | None = None,
        top: bool = False,
        prefix: str = "",
    ) -> str:
        """Emit a reader function for a struct; return its name.

        For a record (`top`) whose tagged fields all come after its other fields, the
        text of its tail (the tagged section and any UUIDs just before it) is cached
        by its bytes: leader/ISR changes repeat the same few topic ids and tagged
        sections for different partitions.

        Runs of fixed-size fields are read with one precompiled Struct; the JSON is one
        f-string when the record carries no tagged fields (the common case), else the
        fields in schema order with the tagged ones that are present and not default.

        A record's reader (`top`) returns the whole payload text, `prefix` (the type
        and version) included, and raises FastPathMiss unless the record ends where
        its bytes do; a nested struct's returns (text, position).
        """
        # The opening and closing of the returned text, as f-string source.
        fopen = prefix.replace("{", "{{").replace("}", "}}") + "{{"
        fclose = "}}" + ("}}" if top else "")

        def ret(ftext: str, end: str = "pos") -> str:
            if not top:
                return f"return {ftext}, {end}"
            check = "" if end == "len(buf)" else f"if {end} != len(buf): raise Miss\n{ind}"
            return f"{check}return {ftext}"

        fn = self.name("_s")
        out = [f"def {fn}(buf, pos):"]
        ind = "    "
        order: list[tuple[Field, str, bool]] = []  # field, var, tagged
        tagged: list[tuple[Field, str]] = []
        run: list[tuple[Field, str]] = []
        inits: list[str] = []  # tagged fields start unset (None), after any cache hit

        def flush() -> None:
            if not run:
                return
            fmt = ">" + "".join(_STRUCT_CODES[f.type] for f, _ in run)
            packer = self.name("_P")
            _GLOBALS[packer] = struct.Struct(fmt).unpack_from
            size = struct.calcsize(fmt)
            names = ", ".join(v for _, v in run)
            out.append(f"{ind}{names}, = {packer}(buf, pos); pos += {size}")
            for f, v in run:
                if f.type == "uuid":
                    out.append(f"{ind}{v} = _UC.get({v}) or _uuidtext({v})")
                elif f.type == "bool":
                    out.append(f"{ind}{v} = 'true' if {v} else 'false'")
                elif f.type == "float64":
                    out.append(f"{ind}{v} = _dbl({v})")
            run.clear()

        active = [f for f in fields if in_range(version, f.versions)]
        flags = [f.tag is not None and in_range(version, f.tagged) for f in active]
        # A record whose tagged fields all come last caches the text of its tail by its
        # bytes: the tagged section, and before it any run of UUIDs (a leader/ISR change's
        # topic id), which repeat where the leading fields (partition ids, epochs) do not.
        cut = -1  # where the cached tail starts (an index into active), -1: no cache
        if top and True in flags and flags == sorted(flags):
            cut = flags.index(True)
            while cut > 1 and redact is None and _cached_in_tail(active[cut - 1]):
                cut -= 1
            if cut == 0:
                cut = -1  # nothing before the tail: the cache would hold whole records
        cache = self.name("_TAIL") if cut >= 0 else ""
        lead = ""  # the JSON of the fields before the tail, as f-string source
        # Where the tail starts in `order`: not `cut`, which indexes `active`, since a
        # run of int arrays before the tail is one entry of `order` for several fields.
        tail_at = -1
        arrays = self._int_array_runs(active, flags, cut, redact)
        skip = -1  # fields up to this index were read as part of a run of int arrays

        for index, f in enumerate(active):
            if index <= skip:
                continue
            var = self.name("v")
            if index in arrays:
                flush()
                group = arrays[index]
                self.int_array_run(out, ind, group, version, var)
                order.append((f, var, False))
                skip = index + len(group) - 1
                continue
            if index == cut:
                flush()
                tail_at = len(order)
                lead = ",".join(f'"{g.json_name}":{{{v}}}' for g, v, _t in order)
                _GLOBALS[cache] = {}
                out.append(f"{ind}tail = buf[pos:]")
                out.append(f"{ind}hit = {cache}.get(tail)")
                out.append(f"{ind}if hit is not None:")
                hit_text = "f'" + fopen + lead + "{hit}" + fclose + "'"
                out.append(f"{ind}    {ret(hit_text, 'len(buf)')}")
            if f.tag is not None and in_range(version, f.tagged):
                inits.append(f"{ind}{var} = None")
                tagged.append((f, var))
                order.append((f, var, True))
                continue
            special = redact(f) if redact else None
            if not f.is_array and f.type in _STRUCT_CODES and special is None:
                run.append((f, var))
                order.append((f, var, False))
                continue
            flush()
            self.field(out, ind, f, version, var)
            if special is not None:
                out.append(f"{ind}{special.format(var=var)}")
            order.append((f, var, False))
        flush()
        plain = ",".join(f'"{f.json_name}":{{{v}}}' for f, v, t in order if not t)
        tail_mode = cut >= 0
        out.extend(inits)
        count = self.name("c")
        self.uvarint(out, ind, count)
        out.append(f"{ind}if {count} == 0:")
        bare_text = "f'" + fopen + plain + fclose + "'"
        out.append(f"{ind}    " + ret(bare_text).replace("\n", "\n    "))
        out.append(f"{ind}for _ in range({count}):")
        tag, size = self.name("tag"), self.name("sz")
        self.uvarint(out, ind + "    ", tag)
        self.uvarint(out, ind + "    ", size)
        out.append(f"{ind}    stop = pos + {size}")
        first = True
        for f, var in tagged:
            kw = "if" if first else "elif"
            first = False
            out.append(f"{ind}    {kw} {tag} == {f.tag}:")
            self.field(out, ind + "        ", f, version, var)
            out.append(f"{ind}        if pos != stop: raise Miss")
        out.append(f"{ind}    pos = stop")
        if tail_mode:
            # The tail's untagged fields, then the tagged ones present and not default.
            in_tail = [f"f'\"{g.json_name}\":{{{v}}}'" for g, v, t in order[tail_at:] if not t]
            out.append(f"{ind}tparts = [{', '.join(in_tail)}]")
            for f, var in tagged:
                default = _default_json(f)
                out.append(f"{ind}if {var} is not None and {var} != {default!r}:")
                out.append(f"{ind}    tparts.append(f'\"{f.json_name}\":{{{var}}}')")
            out.append(f"{ind}ttext = (',' + ','.join(tparts)) if tparts else ''")
            out.append(f"{ind}if pos == len(buf):")
            out.append(f"{ind}    if len({cache}) > 50000: {cache}.clear()")
            out.append(f"{ind}    {cache}[tail] = ttext")
            tail_text = "f'" + fopen + lead + "{ttext}" + fclose + "'"
            out.append(f"{ind}{ret(tail_text)}")
            self.lines.extend(out)
            self.lines.append("")
            return fn
        # Tagged fields only when read and not at their default, all in schema order.
        out.append(f"{ind}out = []")
        for f, var, is_tagged in order:
            if is_tagged:
                default = _default_json(f)
                out.append(f"{ind}if {var} is not None and {var} != {default!r}:")
                out.append(f"{ind}    out.append(f'\"{f.json_name}\":{{{var}}}')")
            else:
                out.append(f"{ind}out.append(f'\"{f.json_name}\":{{{var}}}')")
        closing = "}}" if top else "}"
        opening = prefix + "{"
        joined = f"{opening!r} + ','.join(out) + {closing!r}"
        out.append(f"{ind}{ret(joined)}")
        self.lines.extend(out)
        self.lines.append("")
        return fn

    @staticmethod
    def _int_array_runs(
        active: list[Field],
        flags: list[bool],
        cut: int,
        redact: Callable[[Field], str | None] | None,
    ) -> dict[int, list[Field]]:
        """Runs of two or more int32 arrays in a row (before any cached tail), by the
        index of their first field: a partition's replicas, ISR, removing and adding
        replicas, read as one by `int_array_run`."""
        runs: dict[int, list[Field]] = {}
        start = -1
        for index, f in enumerate([*active, None]):
            fits = (
                f is not None
                and (cut < 0 or index < cut)
                and not flags[index]
                and f.is_array
                and f.element == "int32"
                and (redact is None or redact(f) is None)
            )
            if fits and start < 0:
                start = index
            elif not fits and start >= 0:
                if index - start >= 2:
                    runs[start] = active[start:index]
                start = -1
        return runs

    def int_array_run(
        self, out: list[str], ind: str, group: list[Field], version: int, var: str
    ) -> None:
        """Code reading int32 arrays in a row into `var`: the JSON text of the first
        one's value, then `,"name":value` for each of the others.

        The text is cached by the run's bytes. A first pass steps over the arrays
        taking each count as one byte (fewer than 127 items, not null) to find the
        key. On a miss the arrays are read field by field, and the text is remembered
        only where that reading took exactly the key's bytes: a hit is then what
        reading those bytes gives, and reading goes on right after them, whatever
        the first pass made of the bytes.
        """
        start, key, cache = self.name("a"), self.name("key"), self.name("_RUN")
        _GLOBALS[cache] = {}
        out.append(f"{ind}{start} = pos")
        # Where a count is not one byte the first pass may step past the end: the key
        # is then whatever it is, and the arrays are read one by one.
        out.append(f"{ind}try:")
        for _f in group:
            n = self.name("n")
            # A one-byte count c is the varint of c - 1 items: 1 + 4 * (c - 1) bytes.
            out.append(f"{ind}    {n} = buf[pos]; pos += 4 * {n} - 3")
        out.append(f"{ind}except IndexError:")
        out.append(f"{ind}    pass")
        out.append(f"{ind}{key} = buf[{start}:pos]")
        out.append(f"{ind}{var} = {cache}.get({key})")
        out.append(f"{ind}if {var} is None:")
        out.append(f"{ind}    pos = {start}")
        parts = []
        for i, f in enumerate(group):
            v = self.name("v")
            self.field(out, ind + "    ", f, version, v)
            parts.append(f"{{{v}}}" if i == 0 else f'"{f.json_name}":{{{v}}}')
        out.append(f"{ind}    {var} = f'{','.join(parts)}'")
        out.append(f"{ind}    if pos - {start} == len({key}):")
        out.append(f"{ind}        if len({cache}) > 50000: {cache}.clear()")
        out.append(f"{ind}        {cache}[{key}] = {var}")
        out.append(f"{ind}else:")
        out.append(f"{ind}    pos = {start} + len({key})")


def _cached_in_tail(f: Field) -> bool:
    """Whether a field just before a record's tagged section joins its cached tail."""
    return not f.is_array and f.type == "uuid"


_STRUCT_CODES = {
    "int8": "b",
    "int16": "h",
    "uint16": "H",
    "int32": "i",
    "int64": "q",
    "uuid": "16s",
    "bool": "?",
    "float64": "d",
}


def _default_json(f: Field) -> str:
    """The JSON text of a field's default value (what Kafka leaves out when tagged)."""
    d = f.default
    if d == "null":
        return "null"
    if f.is_array:
        return "[]"
    t = f.type
    if t in _FIXED:
        return str(int(d, 0)) if d else "0"
    if t == "bool":
        return "true" if d == "true" else "false"
    if t == "string":
        return jackson_string(d or "")
    if t == "float64":
        return java_double(float(d) if d else 0.0)
    if t == "uuid":
        return '"AAAAAAAAAAAAAAAAAAAAAA"'
    if t == "bytes":
        return '""'
    return "{}"


def _redactor(schema: MessageSchema) -> Callable[[Field], str | None] | None:
    if schema.api_key == 11:
        secret = {"Salt", "StoredKey", "ServerKey"}
        return lambda f: "{var} = '\"[redacted]\"'" if f.name in secret else None
    if schema.api_key == 4:
        # ConfigRecord: Name is read before Value; the name decides.
        def config(f: Field) -> str | None:
            if f.name == "Name":
                return "_cfg_name = {var}"
            if f.name == "Value":
                return "if {var} != 'null' and _sensitive(_cfg_name): {var} = '\"[redacted]\"'"
            return None

        return config
    return None


# A record's reader: (value, 3) -> the payload text; raises on anything else.
Reader = Callable[[bytes, int], str]


def _build(code: int) -> Reader | None:
    """Generate the reader of one (apiKey << 8 | version), None when there is none.

    Readers are made on first use: a dump meets a handful of record types, and
    generating all of them would cost every run the time of the others.
    """
    key, version = code >> 8, code & 0xFF
    schema = METADATA_RECORDS.get(key)
    if schema is None or not in_range(version, schema.valid):
        return None
    return _reader(schema, version)


def _reader(schema: MessageSchema, version: int) -> Reader:
    """Generate the reader of `schema` at `version` (a record type's, or a test's)."""
    key = schema.api_key
    gen = _Gen()
    prefix = f'{{"type":"{schema.type_name}","version":{version},"data":'
    fn = gen.struct(schema.fields, version, _redactor(schema), top=True, prefix=prefix)
    exec(compile("\n".join(gen.lines), f"<kt metadata reader {key}v{version}>", "exec"), _GLOBALS)
    return _GLOBALS[fn]  # type: ignore[return-value]


class _Table(dict[bytes, "Reader | None"]):
    """Readers by a value's first three bytes (frame version, apiKey, version),
    generated on first lookup: one slice and one lookup check the frame version and
    pick the reader."""

    def __missing__(self, head: bytes) -> Reader | None:
        # One-byte apiKey and version (< 128): a longer varint makes no entry.
        # Heads of damaged values are not remembered: the table stays small.
        if len(head) != 3 or head[0] != 1 or head[1] >= 128 or head[2] >= 128:
            return None
        entry = self[head] = _build(head[1] << 8 | head[2])
        return entry


_TABLE = _Table()
_ERRORS = (FastPathMiss, struct.error, IndexError, KeyError, UnicodeDecodeError, ValueError)


# The smallest records (NoOp, EndTransaction: four bytes) repeat
# byte for byte: their text is remembered, bounded. Longer ones, fencing and
# registration changes too (they carry broker epochs), rarely repeat whole and are not
# worth a lookup and an insert each (on a log of distinct records ~3% of the dump's loop).
_SHORT: dict[bytes, str] = {}
_SHORT_MAX = 8


# For the dump's whole-batch loop (`kt.tools.dump_log_metadata.plain_batch_lines`), which
# inlines the lookups `text_parser` makes: readers by a value's first three bytes, the
# text of short values (bounded: clear it when it holds 10,000), what a reader raises.
READERS: Mapping[bytes, Reader | None] = _TABLE
SHORT_TEXTS: dict[bytes, str] = _SHORT
SHORT_MAX = _SHORT_MAX
READ_ERRORS = _ERRORS


TextParser = Callable[[int, bytes | None, bytes | None], tuple[None, str | None]]


def text_parser(slow: Callable[[int, bytes | None], str | None]) -> TextParser:
    """The dump's (offset, key, value) -> (None, payload) parser for metadata records.

    The fast path is inlined here, not called: the dump calls this once per record,
    and on a log of distinct records a Python call layer is a measurable share of the
    time. A value the fast path does not render goes to `slow(offset, value)`.
    """
    table = _TABLE
    short_cache = _SHORT
    short_max = _SHORT_MAX
    errors = _ERRORS

    def parse(off: int, key: bytes | None, value: bytes | None) -> tuple[None, str | None]:
        if value is None:
            return None, slow(off, value)
        short = len(value) <= short_max
        if short:
            text = short_cache.get(value)
            if text is not None:
                return None, text
        reader = table[value[:3]]
        if reader is None:
            return None, slow(off, value)
        try:
            text = reader(value, 3)
        except errors:
            return None, slow(off, value)
        if short:
            if len(short_cache) >= 10_000:
                short_cache.clear()
            short_cache[bytes(value)] = text
        return None, text

    return parse


_FAST_ONLY = text_parser(lambda off, value: None)


def fast_kafka_json(value: bytes | None) -> str | None:
    """Kafka's payload JSON for a well-formed record value (secrets redacted), else None."""
    return _FAST_ONLY(0, None, value)[1]
