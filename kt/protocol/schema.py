"""The schema model and our compact schema notation (a small indented text DSL).

A message schema is written as text, one field per line, children indented by two
spaces under their array or struct field::

    topics [] ?1+                 # array of structs, nullable from v1
      topic_id uuid 10+
      name string ?10+
    allow_auto_topic_creation bool 4+ =true
    cluster_id string ?0+ @0 =null   # tagged field, tag 0

Tokens after the name and type may come in any order:

* ``3+`` / ``3-5`` / ``3`` - the versions the field exists in (omitted: ``0+``);
* ``?R`` - the versions in which the field is nullable;
* ``@N`` - tagged with tag N in the field's versions; ``@N:R`` - tagged in versions R;
* ``=V`` - a custom default (``true``, ``-1``, ``0x7fffffff``, ``null``...).

Types: ``int8 int16 int32 int64 uint16 uint32 float64 bool uuid string bytes
records``; ``[]T`` is an array of a primitive T; ``[]`` is an array of the struct
described by the indented lines below it, ``{}`` a single such struct; ``[]Name`` or
``Name`` (capitalised) refers to a common struct given to the parser.

Parsing builds `StructSchema` trees whose `Struct` subclasses are what decoding
returns and encoding accepts. `codec.py` compiles them per version.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar

from kt.protocol.primitives import ZERO_UUID

PRIMITIVES = frozenset(
    {
        "int8",
        "int16",
        "int32",
        "int64",
        "uint16",
        "uint32",
        "float64",
        "bool",
        "uuid",
        "string",
        "bytes",
        "records",
    }
)


@dataclass(frozen=True)
class VersionRange:
    """An inclusive version range; `hi` None means open-ended ("3+")."""

    lo: int
    hi: int | None

    @classmethod
    def parse(cls, text: str) -> VersionRange | None:
        """Parse "3+", "3-5" or "3"; "none" gives None (no version at all)."""
        text = text.strip()
        if text == "none":
            return None
        if text.endswith("+"):
            return cls(int(text[:-1]), None)
        if "-" in text:
            lo, hi = text.split("-", 1)
            return cls(int(lo), int(hi))
        return cls(int(text), int(text))

    def __contains__(self, version: object) -> bool:
        if not isinstance(version, int):
            return False
        return self.lo <= version and (self.hi is None or version <= self.hi)

    def __str__(self) -> str:
        if self.hi is None:
            return f"{self.lo}+"
        return f"{self.lo}" if self.lo == self.hi else f"{self.lo}-{self.hi}"


ALL_VERSIONS = VersionRange(0, None)


@dataclass(eq=False)
class FieldSpec:
    """One field of a struct as stated in the schema."""

    name: str
    #: a primitive type name, "array" or "struct"
    type: str
    versions: VersionRange
    nullable: VersionRange | None = None
    tag: int | None = None
    tagged_versions: VersionRange | None = None
    #: the default as written (None: the type's natural default)
    default_literal: str | None = None
    #: for arrays: the element's primitive type name, or "struct"
    elem_type: str | None = None
    #: for struct fields and arrays of structs
    struct: StructSchema | None = None

    def is_nullable(self, version: int) -> bool:
        """Whether a null may be written/read for this field in `version`."""
        return self.nullable is not None and version in self.nullable

    def is_tagged(self, version: int) -> bool:
        """Whether the field travels in the tagged-field section in `version`."""
        return self.tagged_versions is not None and version in self.tagged_versions

    def default_factory(self) -> tuple[bool, Callable[[], Any]]:
        """(is_mutable, factory) producing this field's default value."""
        lit = self.default_literal
        t = self.type
        if t == "array":
            if lit == "null":
                return False, lambda: None
            return True, list
        if t == "struct":
            assert self.struct is not None
            cls = self.struct.cls
            return True, cls
        value: Any
        if t in ("int8", "int16", "int32", "int64", "uint16", "uint32"):
            value = int(lit, 0) if lit is not None else 0
        elif t == "float64":
            value = float(lit) if lit is not None else 0.0
        elif t == "bool":
            value = lit == "true"
        elif t == "string":
            value = None if lit == "null" else (lit or "")
        elif t == "bytes":
            value = None if lit == "null" else b""
        elif t == "records":
            value = None
        elif t == "uuid":
            value = ZERO_UUID
        else:  # pragma: no cover - the parser rejects unknown types
            raise ValueError(f"unknown type {t}")
        return False, lambda: value


@dataclass(eq=False)
class StructSchema:
    """A struct: the top level of a message, an array element or a nested struct."""

    name: str
    fields: list[FieldSpec]
    #: the name of the common struct this is, if any
    common_name: str | None = None
    cls: type[Struct] = field(init=False)
    #: compiled decoders / encoders, keyed by (version, flexible); filled by codec.py
    decoders: dict[tuple[int, bool], Any] = field(default_factory=dict, init=False)
    encoders: dict[tuple[int, bool], Any] = field(default_factory=dict, init=False)

    def __post_init__(self) -> None:
        self.cls = _make_struct_class(self)

    def field(self, name: str) -> FieldSpec:
        """The field called `name`; KeyError if there is none."""
        for f in self.fields:
            if f.name == name:
                return f
        raise KeyError(name)

    def walk(self) -> Iterator[StructSchema]:
        """This struct and every struct nested in it, depth first."""
        yield self
        for f in self.fields:
            if f.struct is not None:
                yield from f.struct.walk()


class Struct:
    """Base of every message/struct class: keyword constructor, attribute access.

    Instances keep their field values in `__dict__`, which lets the decoder build an
    object with one dict assignment instead of one setattr per field. Fields not
    given to the constructor take their schema defaults; unknown names are refused.
    """

    _schema: ClassVar[StructSchema]
    _field_names: ClassVar[tuple[str, ...]]
    _field_set: ClassVar[frozenset[str]]
    _const_defaults: ClassVar[dict[str, Any]]
    _factory_defaults: ClassVar[tuple[tuple[str, Callable[[], Any]], ...]]

    def __init__(self, **kwargs: Any) -> None:
        d = dict(self._const_defaults)
        for name, factory in self._factory_defaults:
            if name not in kwargs:
                d[name] = factory()
        for name in kwargs:
            if name not in self._field_set:
                raise TypeError(f"{type(self).__qualname__} has no field {name!r}")
        d.update(kwargs)
        self.__dict__ = d

    if TYPE_CHECKING:
        # Field attributes are created per schema at run time; tell mypy they exist.
        def __getattr__(self, name: str) -> Any: ...

    def __eq__(self, other: object) -> bool:
        if type(other) is not type(self):
            return NotImplemented
        mine, theirs = self.__dict__, other.__dict__
        return all(mine.get(n) == theirs.get(n) for n in self._field_names)

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        inner = ", ".join(f"{n}={self.__dict__.get(n)!r}" for n in self._field_names)
        return f"{type(self).__qualname__}({inner})"

    def to_dict(self) -> dict[str, Any]:
        """A plain-dict copy, recursing into nested structs and arrays of structs."""
        return {n: _plain(self.__dict__.get(n)) for n in self._field_names}


def _plain(value: Any) -> Any:
    if isinstance(value, Struct):
        return value.to_dict()
    if isinstance(value, list):
        return [_plain(v) for v in value]
    if isinstance(value, memoryview):
        return bytes(value)
    return value


def _make_struct_class(schema: StructSchema) -> type[Struct]:
    names = tuple(f.name for f in schema.fields)
    const: dict[str, Any] = {}
    factories: list[tuple[str, Callable[[], Any]]] = []
    for f in schema.fields:
        mutable, factory = f.default_factory()
        if mutable:
            factories.append((f.name, factory))
        else:
            const[f.name] = factory()
    ns: dict[str, Any] = {
        "_schema": schema,
        "_field_names": names,
        "_field_set": frozenset(names),
        "_const_defaults": const,
        "_factory_defaults": tuple(factories),
        "__module__": "kt.protocol.messages",
    }
    cls = type(schema.name.rsplit(".", 1)[-1], (Struct,), ns)
    cls.__qualname__ = schema.name
    for f in schema.fields:
        # Nested classes hang off their parent (MetadataResponse.Topics.Partitions)
        # so callers can build nested values without hunting for the class.
        if f.struct is not None and f.struct.common_name is None:
            setattr(cls, _camel(f.name), f.struct.cls)
    return cls


def _camel(snake: str) -> str:
    return "".join(p[:1].upper() + p[1:] for p in snake.split("_"))


_LINE = re.compile(r"^( *)(\S.*)$")


def parse_struct(
    text: str, name: str, common: dict[str, StructSchema] | None = None
) -> StructSchema:
    """Parse the DSL text of one struct (see the module docstring) into a StructSchema."""
    common = common or {}
    lines: list[tuple[int, list[str], int]] = []
    for lineno, raw in enumerate(text.splitlines(), 1):
        code = raw.split("#", 1)[0].rstrip()
        if not code.strip():
            continue
        m = _LINE.match(code)
        assert m is not None
        indent = len(m.group(1))
        if indent % 2:
            raise SyntaxError(f"{name}: line {lineno}: odd indentation")
        lines.append((indent // 2, m.group(2).split(), lineno))
    pos, fields = _parse_block(lines, 0, 0, name, common)
    if pos != len(lines):
        raise SyntaxError(f"{name}: line {lines[pos][2]}: unexpected indentation")
    return StructSchema(name, fields)


def _parse_block(
    lines: list[tuple[int, list[str], int]],
    pos: int,
    depth: int,
    parent: str,
    common: dict[str, StructSchema],
) -> tuple[int, list[FieldSpec]]:
    fields: list[FieldSpec] = []
    while pos < len(lines) and lines[pos][0] == depth:
        _, tokens, lineno = lines[pos]
        pos += 1
        where = f"{parent}: line {lineno}"
        if len(tokens) < 2:
            raise SyntaxError(f"{where}: expected 'name type ...'")
        fname, ftype = tokens[0], tokens[1]
        versions: VersionRange | None = ALL_VERSIONS
        spec = FieldSpec(fname, ftype, ALL_VERSIONS)
        tagged_text: str | None = None
        for tok in tokens[2:]:
            if tok[0].isdigit() or tok == "none":
                versions = VersionRange.parse(tok)
            elif tok[0] == "?":
                spec.nullable = VersionRange.parse(tok[1:])
            elif tok[0] == "@":
                tag, _, tagged_text = tok[1:].partition(":")
                spec.tag = int(tag)
            elif tok[0] == "=":
                spec.default_literal = tok[1:]
            else:
                raise SyntaxError(f"{where}: unexpected token {tok!r}")
        if versions is None:
            raise SyntaxError(f"{where}: a field needs versions")
        spec.versions = versions
        if spec.tag is not None:
            spec.tagged_versions = VersionRange.parse(tagged_text) if tagged_text else versions
        has_children = pos < len(lines) and lines[pos][0] > depth
        if has_children and lines[pos][0] != depth + 1:
            raise SyntaxError(f"{where}: children must be indented by one level")
        sub_name = f"{parent}.{_camel(fname)}"
        if ftype in ("[]", "{}"):
            if not has_children:
                raise SyntaxError(f"{where}: struct field without children")
            pos, children = _parse_block(lines, pos, depth + 1, sub_name, common)
            spec.struct = StructSchema(sub_name, children)
            spec.type = "array" if ftype == "[]" else "struct"
            spec.elem_type = "struct" if ftype == "[]" else None
        elif has_children:
            raise SyntaxError(f"{where}: only [] and {{}} fields take children")
        elif ftype.startswith("[]"):
            elem = ftype[2:]
            spec.type = "array"
            if elem in PRIMITIVES:
                spec.elem_type = elem
            elif elem in common:
                spec.elem_type = "struct"
                spec.struct = common[elem]
            else:
                raise SyntaxError(f"{where}: unknown element type {elem!r}")
        elif ftype in common:
            spec.type = "struct"
            spec.struct = common[ftype]
        elif ftype not in PRIMITIVES:
            raise SyntaxError(f"{where}: unknown type {ftype!r}")
        fields.append(spec)
    return pos, fields


def parse_common(
    name: str, text: str, owner: str, common: dict[str, StructSchema] | None = None
) -> StructSchema:
    """Parse a common struct (shared by several fields of one message); it may refer
    to the common structs in `common`."""
    s = parse_struct(text, f"{owner}.{name}", common)
    s.common_name = name
    return s
