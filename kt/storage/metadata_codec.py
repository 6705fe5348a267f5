"""Reading and writing KRaft metadata and control records, driven by `metadata_schema`.

A metadata record's value is `frame_version | apiKey | version` (unsigned varints,
each at most Short.MAX_VALUE) followed by the message at that version; control
records of the metadata log are the bare message at version 0. Decoding checks
what Kafka's `MetadataRecordSerde` checks and raises `MetadataParseError` with
Kafka's messages (the dump tool prints them after `Error at <offset>, skipping.`).

Decoded messages are dicts keyed by the schema's field names, in schema order,
holding every field of that version (tagged fields absent on the wire hold their
default): ints, floats, bools, str, bytes, lists, nested dicts, and UUIDs as
Kafka prints them (URL-safe base64, no padding). `kafka_json` renders them as
Kafka's generated JSON converters and Jackson do.
"""

from __future__ import annotations

import base64
import math
import struct
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from kt.storage.errors import CorruptRecordError
from kt.storage.metadata_schema import (
    CONTROL_RECORDS,
    METADATA_RECORDS,
    Field,
    MessageSchema,
    in_range,
)

FRAME_VERSION = 1
SHORT_MAX = 0x7FFF
ZERO_UUID = "AAAAAAAAAAAAAAAAAAAAAA"

_I8 = struct.Struct(">b")
_I16 = struct.Struct(">h")
_U16 = struct.Struct(">H")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")
_F64 = struct.Struct(">d")


class MetadataParseError(CorruptRecordError):
    """A metadata or control record that does not decode (Kafka's MetadataParseException)."""


@dataclass(frozen=True, slots=True)
class MetadataRecord:
    """A decoded metadata record: its schema, version and data."""

    schema: MessageSchema
    version: int
    data: dict[str, Any]

    @property
    def api_key(self) -> int:
        """The record's apiKey."""
        assert self.schema.api_key is not None
        return self.schema.api_key

    @property
    def type_name(self) -> str:
        """Kafka's MetadataRecordType name, e.g. PARTITION_CHANGE_RECORD."""
        return self.schema.type_name

    def kafka_json(self, *, redact: bool = True) -> str:
        """`{"type":...,"version":...,"data":{...}}` exactly as kafka-dump-log prints it.

        With `redact` (the default) secrets print as "[redacted]": SCRAM salts and
        keys, and the values of configs whose names mark them as passwords or keys.
        """
        data = redacted(self.api_key, self.data) if redact else self.data
        return (
            f'{{"type":"{self.type_name}","version":{self.version},'
            f'"data":{kafka_json(self.schema, self.version, data)}}}'
        )


class _Redacted:
    """Stands in for a secret's value; prints as the string "[redacted]"."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "[redacted]"


REDACTED: Any = _Redacted()
_SCRAM_SECRETS = ("Salt", "StoredKey", "ServerKey")


def is_sensitive_config(name: str) -> bool:
    """Whether a config's value is a secret (Kafka's PASSWORD-type configs and their kin)."""
    n = name.lower()
    return (
        "password" in n
        or "secret" in n
        or "jaas.config" in n
        or n.endswith((".key", "keystore.certificate.chain", "credentials"))
    )


def redacted(api_key: int, data: dict[str, Any]) -> dict[str, Any]:
    """`data` with its secrets replaced by REDACTED (a copy when anything changed)."""
    if api_key == 11:
        return {k: (REDACTED if k in _SCRAM_SECRETS else v) for k, v in data.items()}
    if api_key == 4 and data.get("Value") is not None and is_sensitive_config(data["Name"]):
        return {**data, "Value": REDACTED}
    return data


# --- UUIDs -------------------------------------------------------------------


def uuid_str(raw: bytes) -> str:
    """Kafka's Uuid.toString: URL-safe base64 of the 16 bytes, without padding."""
    return base64.urlsafe_b64encode(raw).decode("ascii").rstrip("=")


def uuid_bytes(text: str) -> bytes:
    """The 16 bytes of a UUID in Kafka's string form."""
    try:
        raw = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
    except (ValueError, TypeError) as exc:
        raise ValueError(f"{text!r} is not a Kafka UUID") from exc
    if len(raw) != 16:
        raise ValueError(f"{text!r} is not a Kafka UUID (not 16 bytes)")
    return raw


# --- reading -------------------------------------------------------------------


class _Reader:
    __slots__ = ("buf", "end", "pos")

    def __init__(self, buf: bytes, pos: int = 0, end: int | None = None) -> None:
        self.buf = buf
        self.pos = pos
        self.end = len(buf) if end is None else end

    def need(self, n: int) -> int:
        p = self.pos
        if p + n > self.end:
            raise MetadataParseError(
                f"Tried to read {n} bytes, but only {self.end - p} bytes remain"
            )
        self.pos = p + n
        return p

    def uvarint(self) -> int:
        value = 0
        shift = 0
        buf = self.buf
        while True:
            if self.pos >= self.end:
                raise MetadataParseError("Unexpected end of data in an unsigned varint")
            b = buf[self.pos]
            self.pos += 1
            value |= (b & 0x7F) << shift
            if b < 0x80:
                return value & 0xFFFFFFFF
            shift += 7
            if shift > 28:
                raise MetadataParseError(
                    "Varint is too long, the most significant bit in the 5th byte is set"
                )


def _default(f: Field) -> Any:
    """The value a field holds when it is absent (Kafka's default)."""
    d = f.default
    if d == "null":
        return None
    if f.is_array:
        return []
    t = f.type
    if f.is_struct:
        return {g.name: _default(g) for g in f.fields}
    if t in ("int8", "int16", "int32", "int64", "uint16"):
        return int(d, 0) if d else 0
    if t == "float64":
        return float(d) if d else 0.0
    if t == "bool":
        return d == "true"
    if t == "string":
        return d or ""
    if t == "bytes":
        return b""
    if t == "uuid":
        return ZERO_UUID
    raise AssertionError(t)


def _read_value(r: _Reader, f: Field, t: str, version: int, nullable: bool) -> Any:
    buf = r.buf
    if t == "int32":
        return _I32.unpack_from(buf, r.need(4))[0]
    if t == "int64":
        return _I64.unpack_from(buf, r.need(8))[0]
    if t == "int16":
        return _I16.unpack_from(buf, r.need(2))[0]
    if t == "int8":
        return _I8.unpack_from(buf, r.need(1))[0]
    if t == "uint16":
        return _U16.unpack_from(buf, r.need(2))[0]
    if t == "bool":
        return buf[r.need(1)] != 0
    if t == "float64":
        return _F64.unpack_from(buf, r.need(8))[0]
    if t == "uuid":
        p = r.need(16)
        return uuid_str(bytes(buf[p : p + 16]))
    if t in ("string", "bytes"):
        n = r.uvarint() - 1
        if n < 0:
            if not nullable:
                raise MetadataParseError(f"non-nullable field {f.json_name} was serialized as null")
            return None
        p = r.need(n)
        raw = bytes(buf[p : p + n])
        if t == "bytes":
            return raw
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise MetadataParseError(f"field {f.json_name} is not valid UTF-8") from exc
    # a struct (non-array)
    return _read_struct(r, f.fields, version)


def _read_field(r: _Reader, f: Field, version: int) -> Any:
    nullable = in_range(version, f.nullable)
    if f.is_array:
        n = r.uvarint() - 1
        if n < 0:
            if not nullable:
                raise MetadataParseError(f"non-nullable field {f.json_name} was serialized as null")
            return None
        if n > r.end - r.pos:
            raise MetadataParseError(
                f"Tried to read {n} array elements, but only {r.end - r.pos} bytes remain"
            )
        el = f.element
        if el == "int32":
            p = r.need(4 * n)
            return list(struct.unpack_from(f">{n}i", r.buf, p))
        return [_read_value(r, f, el, version, False) for _ in range(n)]
    return _read_value(r, f, f.type, version, nullable)


def _read_struct(r: _Reader, fields: tuple[Field, ...], version: int) -> dict[str, Any]:
    out: dict[str, Any] = {}
    tagged: dict[int, Field] = {}
    for f in fields:
        if not in_range(version, f.versions):
            continue
        if f.tag is not None and in_range(version, f.tagged):
            out[f.name] = _default(f)
            tagged[f.tag] = f
            continue
        out[f.name] = _read_field(r, f, version)
    # Every flexible struct ends with its tagged fields.
    count = r.uvarint()
    for _ in range(count):
        tag = r.uvarint()
        size = r.uvarint()
        start = r.need(size)
        f_or_none = tagged.get(tag)
        if f_or_none is None:
            continue  # an unknown tagged field: kept by Kafka, not printed; skipped here
        sub = _Reader(r.buf, start, start + size)
        out[f_or_none.name] = _read_field(sub, f_or_none, version)
        if sub.pos != sub.end:
            raise MetadataParseError(
                f"tagged field {f_or_none.json_name} has {sub.end - sub.pos} bytes left over"
            )
    return out


def decode_message(schema: MessageSchema, version: int, buf: bytes) -> dict[str, Any]:
    """Decode a whole message at `version` from `buf` (all bytes must be used)."""
    if not in_range(version, schema.valid):
        raise MetadataParseError(f"Can't read version {version} of {schema.name}")
    r = _Reader(buf)
    data = _read_struct(r, schema.fields, version)
    if r.pos != r.end:
        raise MetadataParseError(f"Found {r.end - r.pos} byte(s) of garbage after {schema.name}")
    return data


def _frame_short(r: _Reader, entity: str) -> int:
    value = r.uvarint()
    if value > SHORT_MAX:
        raise MetadataParseError(f"Value for {entity} was too large.")
    return value


def decode_metadata_record(value: bytes | None) -> MetadataRecord:
    """Decode a metadata record value (frame, apiKey, version, message) as Kafka does."""
    if value is None:
        raise MetadataParseError("the record has a null value")
    r = _Reader(value)
    frame = _frame_short(r, "frame version")
    if frame == 0:
        raise MetadataParseError(
            "Could not deserialize metadata record with frame version 0. Note that upgrades "
            "from the preview release of KRaft in 2.8 to newer versions are not supported."
        )
    if frame != FRAME_VERSION:
        raise MetadataParseError(
            f"Could not deserialize metadata record due to unknown frame version {frame}"
            f"(only frame version {FRAME_VERSION} is supported)"
        )
    api_key = _frame_short(r, "type")
    version = _frame_short(r, "version")
    schema = METADATA_RECORDS.get(api_key)
    if schema is None:
        # Kafka's exact words (retired apiKeys 6, 13, 16 included: RETIRED_API_KEYS).
        raise MetadataParseError(
            "org.apache.kafka.common.errors.UnsupportedVersionException: "
            f"Unknown metadata id {api_key}"
        )
    if not in_range(version, schema.valid):
        raise MetadataParseError(
            f"Failed to deserialize record with type {api_key}: "
            f"Can't read version {version} of {schema.name}"
        )
    try:
        data = _read_struct(r, schema.fields, version)
    except MetadataParseError as exc:
        raise MetadataParseError(
            f"Failed to deserialize record with type {api_key}: {exc.message}"
        ) from exc
    if r.pos != r.end:
        raise MetadataParseError(f"Found {r.end - r.pos} byte(s) of garbage after {api_key}")
    return MetadataRecord(schema, version, data)


def decode_control(type_id: int, value: bytes | None) -> tuple[MessageSchema, dict[str, Any]]:
    """Decode a KRaft control record's value (types 2-6) at version 0."""
    entry = CONTROL_RECORDS.get(type_id)
    if entry is None:
        raise MetadataParseError(f"control type {type_id} is not a KRaft control record")
    if value is None:
        raise MetadataParseError("the control record has a null value")
    return entry[0], decode_message(entry[0], 0, value)


# --- writing -------------------------------------------------------------------


def _uvarint(out: bytearray, value: int) -> None:
    value &= 0xFFFFFFFF
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)


def _write_value(out: bytearray, f: Field, t: str, value: Any, version: int) -> None:
    if t == "int32":
        out += _I32.pack(value)
    elif t == "int64":
        out += _I64.pack(value)
    elif t == "int16":
        out += _I16.pack(value)
    elif t == "int8":
        out += _I8.pack(value)
    elif t == "uint16":
        out += _U16.pack(value)
    elif t == "bool":
        out.append(1 if value else 0)
    elif t == "float64":
        out += _F64.pack(value)
    elif t == "uuid":
        out += uuid_bytes(value)
    elif t in ("string", "bytes"):
        if value is None:
            out.append(0)
            return
        raw = value.encode("utf-8") if t == "string" else bytes(value)
        _uvarint(out, len(raw) + 1)
        out += raw
    else:
        _write_struct(out, f.fields, value, version)


def _write_field(out: bytearray, f: Field, value: Any, version: int) -> None:
    if f.is_array:
        if value is None:
            out.append(0)
            return
        _uvarint(out, len(value) + 1)
        for item in value:
            _write_value(out, f, f.element, item, version)
    else:
        _write_value(out, f, f.type, value, version)


def _write_struct(
    out: bytearray, fields: tuple[Field, ...], data: dict[str, Any], version: int
) -> None:
    tagged: list[tuple[int, bytes]] = []
    for f in fields:
        if not in_range(version, f.versions):
            continue
        value = data.get(f.name, _default(f)) if f.name in data else _default(f)
        if f.tag is not None and in_range(version, f.tagged):
            if value == _default(f):
                continue  # tagged fields at their default are not written
            sub = bytearray()
            _write_field(sub, f, value, version)
            tagged.append((f.tag, bytes(sub)))
            continue
        _write_field(out, f, value, version)
    _uvarint(out, len(tagged))
    for tag, raw in sorted(tagged):
        _uvarint(out, tag)
        _uvarint(out, len(raw))
        out += raw


def encode_message(schema: MessageSchema, version: int, data: dict[str, Any]) -> bytes:
    """Encode `data` (missing fields take their defaults) as `schema` at `version`."""
    out = bytearray()
    _write_struct(out, schema.fields, data, version)
    return bytes(out)


def encode_metadata_record(api_key: int, version: int, data: dict[str, Any]) -> bytes:
    """A metadata record value: frame version 1, apiKey, version, then the message."""
    out = bytearray()
    _uvarint(out, FRAME_VERSION)
    _uvarint(out, api_key)
    _uvarint(out, version)
    out += encode_message(METADATA_RECORDS[api_key], version, data)
    return bytes(out)


# --- Kafka's JSON ----------------------------------------------------------------

_JSON_ESCAPES = {
    '"': '\\"',
    "\\": "\\\\",
    "\b": "\\b",
    "\f": "\\f",
    "\n": "\\n",
    "\r": "\\r",
    "\t": "\\t",
}


def jackson_string(s: str) -> str:
    """A JSON string as Jackson writes it (non-ASCII as is, \\u00XX upper-case hex)."""
    if s.isascii() and s.isprintable() and '"' not in s and "\\" not in s:
        return f'"{s}"'
    out = ['"']
    for c in s:
        e = _JSON_ESCAPES.get(c)
        if e is not None:
            out.append(e)
        elif ord(c) < 0x20:
            out.append(f"\\u{ord(c):04X}")
        else:
            out.append(c)
    out.append('"')
    return "".join(out)


def java_double(x: float) -> str:
    """A double as Java's Double.toString (and so Jackson) prints it.

    Java uses plain notation for magnitudes in [1e-3, 1e7) and "d.dddE[-]n"
    otherwise, always with a digit after the point; the digits are the shortest
    that round-trip, which is what Python's repr gives.
    """
    if math.isnan(x):
        return '"NaN"'  # Jackson quotes non-numeric numbers by default
    if math.isinf(x):
        return '"Infinity"' if x > 0 else '"-Infinity"'
    if x == 0:
        return "-0.0" if math.copysign(1.0, x) < 0 else "0.0"
    sign_bit, digit_tuple, exp = Decimal(repr(x)).as_tuple()
    assert isinstance(exp, int)
    digits = "".join(map(str, digit_tuple)).rstrip("0")
    exp += len("".join(map(str, digit_tuple))) - len(digits)
    sign = "-" if sign_bit else ""
    sci = len(digits) - 1 + exp  # the decimal exponent of the first digit
    if -3 <= sci < 7:
        if exp >= 0:
            return f"{sign}{digits}{'0' * exp}.0"
        point = len(digits) + exp
        if point > 0:
            return f"{sign}{digits[:point]}.{digits[point:]}"
        return f"{sign}0.{'0' * -point}{digits}"
    return f"{sign}{digits[0]}.{digits[1:] or '0'}E{sci}"


def _json_value(f: Field, t: str, value: Any, version: int) -> str:
    if value is None:
        return "null"
    if value is REDACTED:
        return '"[redacted]"'
    if t in ("int8", "int16", "int32", "int64", "uint16"):
        return str(value)
    if t == "bool":
        return "true" if value else "false"
    if t in ("string", "uuid"):
        return jackson_string(value)
    if t == "float64":
        return java_double(value)
    if t == "bytes":
        return '"' + base64.b64encode(value).decode("ascii") + '"'
    return _json_struct(f.fields, value, version)


def _json_field(f: Field, value: Any, version: int) -> str:
    if f.is_array:
        if value is None:
            return "null"
        el = f.element
        if el == "int32":
            return "[" + ",".join(map(str, value)) + "]"
        return "[" + ",".join(_json_value(f, el, v, version) for v in value) + "]"
    return _json_value(f, f.type, value, version)


def _json_struct(fields: tuple[Field, ...], data: dict[str, Any], version: int) -> str:
    parts = []
    for f in fields:
        if not in_range(version, f.versions):
            continue
        value = data.get(f.name) if f.name in data else _default(f)
        if f.tag is not None and in_range(version, f.tagged) and value == _default(f):
            continue  # Kafka's converters write tagged fields only when not default
        parts.append(f'"{f.json_name}":{_json_field(f, value, version)}')
    return "{" + ",".join(parts) + "}"


def kafka_json(schema: MessageSchema, version: int, data: dict[str, Any]) -> str:
    """`data` as Kafka's generated <Message>JsonConverter.write, printed by Jackson."""
    return _json_struct(schema.fields, data, version)
