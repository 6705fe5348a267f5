"""The generic codec: compiles a StructSchema, per version, into flat decode/encode plans.

For each (struct, version, flexible) we build, once, a list of small closures: runs
of consecutive fixed-width fields are fused into a single `struct.Struct` call, and
every other field gets the one primitive reader/writer that fits its type,
nullability and encoding (classic or compact) in that version. Decoding then is a
loop over that list plus one dict assignment per struct; there is no per-message
interpretation of the schema. Plans are built lazily and cached on the schema.

`Api`, `MessageSchema` and `DataSchema` are the entry points built on top.
"""

from __future__ import annotations

import operator
import struct
from collections.abc import Callable
from typing import Any

from kt.protocol import primitives as p
from kt.protocol.errors import DecodeError, EncodeError, UnsupportedVersionError
from kt.protocol.schema import FieldSpec, Struct, StructSchema, VersionRange, parse_struct

Decoder = Callable[[memoryview, int], tuple[Any, int]]
Encoder = Callable[[bytearray, Any], None]
_DecodeOp = Callable[[memoryview, int, list[Any]], int]

#: the one API whose version 0 uses request header v0 (see Api.request_header_version)
_CONTROLLED_SHUTDOWN_KEY = 7
#: exceptions a malformed value can raise inside an encoder; turned into EncodeError
_ENCODE_FAILURES = (struct.error, TypeError, AttributeError, ValueError, OverflowError, KeyError)
#: safety net: primitives raise DecodeError themselves, but nothing else may escape
_DECODE_FAILURES = (struct.error, IndexError, ValueError, OverflowError, MemoryError)


def _field_reader(f: FieldSpec, version: int, flexible: bool) -> Decoder:
    nullable = f.is_nullable(version)
    t = f.type
    if t == "array":
        assert f.elem_type is not None
        if f.elem_type == "struct":
            assert f.struct is not None
            elem = struct_decoder(f.struct, version, flexible)
        elif f.elem_type in p.FIXED_READERS:
            elem = p.FIXED_READERS[f.elem_type]
        else:
            elem = p.READERS[(f.elem_type, flexible, False)]
        return p.array_reader(elem, flexible, nullable)
    if t == "struct":
        assert f.struct is not None
        return struct_decoder(f.struct, version, flexible)
    if t in p.FIXED_READERS:
        return p.FIXED_READERS[t]
    return p.READERS[(t, flexible, nullable)]


def _field_writer(f: FieldSpec, version: int, flexible: bool) -> Encoder:
    nullable = f.is_nullable(version)
    t = f.type
    if t == "array":
        assert f.elem_type is not None
        if f.elem_type == "struct":
            assert f.struct is not None
            elem = struct_encoder(f.struct, version, flexible)
        elif f.elem_type in p.FIXED_WRITERS:
            elem = p.FIXED_WRITERS[f.elem_type]
        else:
            elem = p.WRITERS[(f.elem_type, flexible, False)]
        return p.array_writer(elem, flexible, nullable)
    if t == "struct":
        assert f.struct is not None
        return struct_encoder(f.struct, version, flexible)
    if t in p.FIXED_WRITERS:
        return p.FIXED_WRITERS[t]
    return p.WRITERS[(t, flexible, nullable)]


def _layout(
    schema: StructSchema, version: int, flexible: bool
) -> tuple[list[list[FieldSpec]], list[FieldSpec], list[FieldSpec]]:
    """Split the fields for one version into wire groups (fused fixed runs or single
    fields, in order), tagged fields, and fields absent from this version."""
    groups: list[list[FieldSpec]] = []
    tagged: list[FieldSpec] = []
    absent: list[FieldSpec] = []
    run: list[FieldSpec] = []
    for f in schema.fields:
        if flexible and f.is_tagged(version):
            tagged.append(f)
            continue
        if version not in f.versions:
            absent.append(f)
            continue
        if f.type in p.FIXED_FORMATS:
            run.append(f)
            continue
        if run:
            groups.append(run)
            run = []
        groups.append([f])
    if run:
        groups.append(run)
    return groups, tagged, absent


def _fused_decode_op(s: struct.Struct) -> _DecodeOp:
    unpack_from = s.unpack_from
    size = s.size

    def op(buf: memoryview, pos: int, vals: list[Any]) -> int:
        try:
            vals.extend(unpack_from(buf, pos))
        except struct.error:
            raise DecodeError(f"truncated fixed-width fields at offset {pos}") from None
        return pos + size

    return op


def _single_decode_op(read: Decoder) -> _DecodeOp:
    def op(buf: memoryview, pos: int, vals: list[Any]) -> int:
        v, pos = read(buf, pos)
        vals.append(v)
        return pos

    return op


def struct_decoder(schema: StructSchema, version: int, flexible: bool) -> Decoder:
    """The compiled decoder of `schema` in `version` (cached on the schema)."""
    key = (version, flexible)
    cached: Decoder | None = schema.decoders.get(key)
    if cached is not None:
        return cached
    groups, tagged, absent = _layout(schema, version, flexible)
    names: list[str] = []
    ops: list[_DecodeOp] = []
    for g in groups:
        if g[0].type in p.FIXED_FORMATS:
            fmt = ">" + "".join(p.FIXED_FORMATS[f.type] for f in g)
            ops.append(_fused_decode_op(struct.Struct(fmt)))
        else:
            ops.append(_single_decode_op(_field_reader(g[0], version, flexible)))
        names.extend(f.name for f in g)
    const: dict[str, Any] = {}
    factories: list[tuple[str, Callable[[], Any]]] = []
    for f in absent + tagged:
        mutable, factory = f.default_factory()
        if mutable:
            factories.append((f.name, factory))
        else:
            const[f.name] = factory()
    tag_readers: dict[int, tuple[str, Decoder]] = {
        f.tag: (f.name, _field_reader(f, version, flexible)) for f in tagged if f.tag is not None
    }
    cls = schema.cls
    new = object.__new__
    read_uvarint = p.read_uvarint
    names_t = tuple(names)
    factories_t = tuple(factories)

    def decode(buf: memoryview, pos: int) -> tuple[Any, int]:
        vals: list[Any] = []
        for op in ops:
            pos = op(buf, pos, vals)
        d = dict(zip(names_t, vals))
        if const:
            d.update(const)
        for name, factory in factories_t:
            d[name] = factory()
        if flexible:
            count, pos = read_uvarint(buf, pos)
            for _ in range(count):
                tag, pos = read_uvarint(buf, pos)
                size, pos = read_uvarint(buf, pos)
                end = pos + size
                if end > len(buf):
                    raise DecodeError(f"tagged field {tag} at offset {pos} runs past the data")
                known = tag_readers.get(tag)
                if known is None:
                    d.setdefault("_unknown_tagged", []).append((tag, bytes(buf[pos:end])))
                else:
                    # Read within the field's declared size, then trust the size: a
                    # newer writer may have appended data we do not know about.
                    d[known[0]] = known[1](buf[:end], pos)[0]
                pos = end
        obj = new(cls)
        obj.__dict__ = d
        return obj, pos

    schema.decoders[key] = decode
    return decode


def _fused_encode_op(s: struct.Struct, names: list[str]) -> Encoder:
    pack = s.pack
    get = operator.attrgetter(*names)

    def op(out: bytearray, obj: Any) -> None:
        out += pack(*get(obj))

    return op


def _single_encode_op(write: Encoder, name: str) -> Encoder:
    get = operator.attrgetter(name)

    def op(out: bytearray, obj: Any) -> None:
        write(out, get(obj))

    return op


def struct_encoder(schema: StructSchema, version: int, flexible: bool) -> Encoder:
    """The compiled encoder of `schema` in `version` (cached on the schema).

    It accepts an instance of the schema's Struct class or a plain dict of fields.
    """
    key = (version, flexible)
    cached: Encoder | None = schema.encoders.get(key)
    if cached is not None:
        return cached
    groups, tagged, _ = _layout(schema, version, flexible)
    ops: list[Encoder] = []
    for g in groups:
        if len(g) > 1:
            fmt = ">" + "".join(p.FIXED_FORMATS[f.type] for f in g)
            ops.append(_fused_encode_op(struct.Struct(fmt), [f.name for f in g]))
        else:
            ops.append(_single_encode_op(_field_writer(g[0], version, flexible), g[0].name))
    tag_writers: list[tuple[int, str, Encoder, Any, Any]] = []
    for f in tagged:
        assert f.tag is not None
        _, factory = f.default_factory()
        # A struct given as a dict must be compared with the default as a struct.
        as_struct = f.struct.cls if f.type == "struct" and f.struct is not None else None
        tag_writers.append(
            (f.tag, f.name, _field_writer(f, version, flexible), factory(), as_struct)
        )
    cls = schema.cls

    def encode(out: bytearray, obj: Any) -> None:
        if type(obj) is dict:
            obj = cls(**obj)
        for op in ops:
            op(out, obj)
        if flexible:
            entries: list[tuple[int, bytes | bytearray]] = []
            for tag, name, write, default, as_struct in tag_writers:
                value = getattr(obj, name)
                if as_struct is not None and type(value) is dict:
                    value = as_struct(**value)
                # Kafka only sends a tagged field whose value differs from its default.
                if value != default:
                    payload = bytearray()
                    write(payload, value)
                    entries.append((tag, payload))
            unknown = getattr(obj, "__dict__", {}).get("_unknown_tagged")
            if unknown:
                entries.extend(unknown)
            if not entries:
                out.append(0)
            else:
                p.write_tagged_fields(out, entries)

    schema.encoders[key] = encode
    return encode


class MessageSchema:
    """One side (request or response, or a data record) of a versioned message."""

    def __init__(
        self,
        name: str,
        struct_schema: StructSchema,
        versions: VersionRange,
        flexible: VersionRange | None,
    ) -> None:
        self.name = name
        self.struct = struct_schema
        self.versions = versions
        self.flexible = flexible
        #: the class decoding returns and encoding accepts (keyword constructor)
        self.cls: type[Struct] = struct_schema.cls

    def __repr__(self) -> str:
        return f"<MessageSchema {self.name} v{self.versions}>"

    def is_flexible(self, version: int) -> bool:
        """Whether `version` uses compact encodings and tagged fields."""
        return self.flexible is not None and version in self.flexible

    def _check(self, version: int) -> None:
        if version not in self.versions:
            raise UnsupportedVersionError(f"{self.name} has no version {version}")

    def __call__(self, **fields: Any) -> Struct:
        """Build a message object: `METADATA.request(topics=None)`."""
        return self.cls(**fields)

    def decoder(self, version: int) -> Decoder:
        """The compiled `(buf, pos) -> (obj, pos)` decoder for `version`."""
        self._check(version)
        return struct_decoder(self.struct, version, self.is_flexible(version))

    def encoder(self, version: int) -> Encoder:
        """The compiled `(out, obj) -> None` encoder for `version`."""
        self._check(version)
        return struct_encoder(self.struct, version, self.is_flexible(version))

    def decode_from(self, buf: memoryview, pos: int, version: int) -> tuple[Struct, int]:
        """Decode one message at `pos`; returns it and the position after it."""
        dec = self.decoder(version)
        try:
            obj, end = dec(buf, pos)
        except DecodeError:
            raise
        except _DECODE_FAILURES as exc:
            raise DecodeError(f"{self.name} v{version}: {exc}") from exc
        return obj, end

    def decode(self, data: bytes | bytearray | memoryview, version: int) -> Struct:
        """Decode a whole message body; trailing bytes are ignored, like Kafka does."""
        buf = data if isinstance(data, memoryview) else memoryview(data)
        return self.decode_from(buf, 0, version)[0]

    def encode_into(self, out: bytearray, obj: Any, version: int) -> None:
        """Append the encoding of `obj` (a Struct or dict) in `version` to `out`."""
        enc = self.encoder(version)
        try:
            enc(out, obj)
        except EncodeError:
            raise
        except _ENCODE_FAILURES as exc:
            raise EncodeError(f"{self.name} v{version}: {exc}") from exc

    def encode(self, obj: Any, version: int) -> bytes:
        """The encoding of `obj` (a Struct or dict) in `version`."""
        out = bytearray()
        self.encode_into(out, obj, version)
        return bytes(out)


class Api:
    """A Kafka API: its key, name, version range and both message schemas."""

    def __init__(
        self,
        key: int,
        name: str,
        versions: str,
        flexible: str,
        request: str,
        response: str,
        common: dict[str, str] | None = None,
    ) -> None:
        self.key = key
        self.name = name
        vr = VersionRange.parse(versions)
        assert vr is not None and vr.hi is not None
        self.versions = vr
        self.min_version = vr.lo
        self.max_version = vr.hi
        self.flexible = VersionRange.parse(flexible)
        self.request = _message(f"{name}Request", request, vr, self.flexible, common)
        self.response = _message(f"{name}Response", response, vr, self.flexible, common)

    def __repr__(self) -> str:
        return f"<Api {self.key} {self.name} v{self.versions}>"

    def is_flexible(self, version: int) -> bool:
        """Whether `version` uses compact encodings, tagged fields and header v2/v1.

        Also answers for versions above our maximum, which is what header parsing
        of an unsupported (newer) version needs.
        """
        return self.flexible is not None and version in self.flexible

    def request_header_version(self, version: int) -> int:
        """Request header version Kafka uses for this API version (0, 1 or 2).

        Header v0 (no client_id) exists only for ControlledShutdown v0, which
        predates the client_id field; everything else uses v1, or v2 when flexible.
        """
        if self.key == _CONTROLLED_SHUTDOWN_KEY and version == 0:
            return 0
        return 2 if self.is_flexible(version) else 1

    def response_header_version(self, version: int) -> int:
        """Response header version (0 or 1); ApiVersions always answers with 0 so a
        client that does not know the broker's versions yet can always parse it."""
        if self.key == 18:
            return 0
        return 1 if self.is_flexible(version) else 0


def _message(
    name: str,
    text: str,
    versions: VersionRange,
    flexible: VersionRange | None,
    common: dict[str, str] | None,
) -> MessageSchema:
    from kt.protocol.schema import parse_common

    # A common struct may use the common structs listed before it.
    commons: dict[str, StructSchema] = {}
    for cn, ct in (common or {}).items():
        commons[cn] = parse_common(cn, ct, name, commons)
    st = parse_struct(text, name, commons)
    for cn, cs in commons.items():
        setattr(st.cls, cn, cs.cls)
    return MessageSchema(name, st, versions, flexible)


class DataSchema(MessageSchema):
    """A versioned data record: int16 version, then the struct in that version.

    Used for the consumer protocol blobs and the coordinators' log records.
    """

    def __init__(
        self,
        name: str,
        versions: str,
        flexible: str,
        text: str,
        common: dict[str, str] | None = None,
    ) -> None:
        vr = VersionRange.parse(versions)
        assert vr is not None
        m = _message(name, text, vr, VersionRange.parse(flexible), common)
        super().__init__(name, m.struct, vr, m.flexible)

    def encode_versioned(self, obj: Any, version: int) -> bytes:
        """int16 `version` followed by the encoding of `obj` in that version."""
        out = bytearray(p.INT16.pack(version))
        self.encode_into(out, obj, version)
        return bytes(out)

    def decode_versioned(
        self, data: bytes | bytearray | memoryview, *, clamp: bool = False
    ) -> tuple[int, Struct]:
        """Read the int16 version and the struct; returns (version, obj).

        With `clamp`, versions above the highest known are read as the highest
        (the consumer protocol's forward compatibility rule); otherwise an unknown
        version raises DecodeError.
        """
        buf = data if isinstance(data, memoryview) else memoryview(data)
        version, pos = p.read_int16(buf, 0)
        read_as = version
        if clamp and self.versions.hi is not None and version > self.versions.hi:
            read_as = self.versions.hi
        if read_as not in self.versions:
            raise DecodeError(f"{self.name}: unknown version {version}")
        return version, self.decode_from(buf, pos, read_as)[0]
