"""Hypothesis strategies that build valid message objects from our schemas.

A value is generated only for the fields present in the requested version (with
null only where the version allows it); the others keep their defaults, which is
exactly what decoding produces, so encode -> decode must give an equal object.
"""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st

from kt.protocol.codec import MessageSchema
from kt.protocol.schema import FieldSpec, StructSchema

_INT_RANGES = {
    "int8": (-(2**7), 2**7 - 1),
    "int16": (-(2**15), 2**15 - 1),
    "int32": (-(2**31), 2**31 - 1),
    "int64": (-(2**63), 2**63 - 1),
    "uint16": (0, 2**16 - 1),
    "uint32": (0, 2**32 - 1),
}

_text = st.text(max_size=12)
_binary = st.binary(max_size=24)


def primitive(t: str) -> st.SearchStrategy[Any]:
    if t in _INT_RANGES:
        lo, hi = _INT_RANGES[t]
        return st.integers(lo, hi)
    if t == "float64":
        return st.floats(allow_nan=False)
    if t == "bool":
        return st.booleans()
    if t == "uuid":
        return st.uuids()
    if t == "string":
        return _text
    if t in ("bytes", "records"):
        return _binary
    raise AssertionError(t)


def field_values(f: FieldSpec, version: int, flexible: bool) -> st.SearchStrategy[Any]:
    if f.type == "array":
        assert f.elem_type is not None
        if f.elem_type == "struct":
            assert f.struct is not None
            elem = struct_values(f.struct, version, flexible)
        else:
            elem = primitive(f.elem_type)
        base: st.SearchStrategy[Any] = st.lists(elem, max_size=3)
    elif f.type == "struct":
        assert f.struct is not None
        base = struct_values(f.struct, version, flexible)
    else:
        base = primitive(f.type)
    if f.is_nullable(version):
        return st.none() | base
    return base


def struct_values(schema: StructSchema, version: int, flexible: bool) -> st.SearchStrategy[Any]:
    kwargs = {}
    for f in schema.fields:
        tagged = flexible and f.is_tagged(version)
        if version in f.versions or tagged:
            kwargs[f.name] = field_values(f, version, flexible)
    return st.builds(schema.cls, **kwargs)


def message_values(ms: MessageSchema, version: int) -> st.SearchStrategy[Any]:
    """Objects of `ms` valid in `version`."""
    return struct_values(ms.struct, version, ms.is_flexible(version))
