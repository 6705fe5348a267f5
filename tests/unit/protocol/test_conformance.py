"""Our hand-written schemas against Kafka's JSON message specs.

Every API and data schema we state is compared field by field with the reference
JSON: API key, valid and flexible versions, and for every field (recursively) its
name, order, type (array element types, struct nesting, common structs), versions,
nullable versions, tag and tagged versions, and default value. Any missing, extra
or reordered field fails.

Kafka's specs are Apache's text, so they are not part of kt: the tests read them from
the directory named by KT_KAFKA_MESSAGE_SPECS (either a directory laid out like
../shared/reference/kafka-message-specs, or a Kafka checkout's
clients/src/main/resources/common/message), else from ../shared beside the checkout
when it exists, else they skip. CI (.ci/run) fails when any of them skipped.
"""

from __future__ import annotations

from typing import Any

import pytest
from kafka_specs import load_spec

from kt.protocol.apis import ALL_APIS
from kt.protocol.codec import MessageSchema
from kt.protocol.data import ALL_DATA_SCHEMAS
from kt.protocol.schema import PRIMITIVES, FieldSpec, StructSchema, VersionRange


def norm(name: str) -> str:
    return name.replace("_", "").lower()


def vr(text: str | None) -> VersionRange | None:
    return None if text is None else VersionRange.parse(text)


def json_default(f: dict[str, Any], kind: str, elem: str | None) -> Any:
    """The default value the spec implies, computed the way our schema computes it."""
    lit = f.get("default")
    if lit is not None and not isinstance(lit, str):
        lit = str(lit).lower()
    spec = FieldSpec(f["name"], kind, VersionRange(0, None), default_literal=lit, elem_type=elem)
    if kind == "struct":
        return "struct"
    return spec.default_factory()[1]()


def our_default(f: FieldSpec) -> Any:
    if f.type == "struct":
        return "struct"
    return f.default_factory()[1]()


def compare_fields(
    path: str, ours: StructSchema, theirs: list[dict[str, Any]], common: dict[str, Any]
) -> None:
    our_names = [f.name for f in ours.fields]
    their_names = [f["name"] for f in theirs]
    assert [norm(n) for n in our_names] == [norm(n) for n in their_names], (
        f"{path}: fields differ:\n ours   {our_names}\n theirs {their_names}"
    )
    for o, t in zip(ours.fields, theirs):
        where = f"{path}.{o.name}"
        ttype: str = t["type"]
        children: list[dict[str, Any]] | None = t.get("fields")
        if ttype.startswith("[]"):
            elem = ttype[2:]
            kind = "array"
            if elem in PRIMITIVES:
                elem_kind: str | None = elem
            else:
                elem_kind = "struct"
                if children is None:
                    children = common[elem]["fields"]
        elif ttype in PRIMITIVES:
            kind, elem_kind = ttype, None
        else:
            kind, elem_kind = "struct", None
            if children is None:
                children = common[ttype]["fields"]
        assert (o.type, o.elem_type) == (kind, elem_kind), f"{where}: type {ttype}"
        versions = t.get("versions") or t.get("taggedVersions")
        assert o.versions == vr(versions), f"{where}: versions {versions} vs {o.versions}"
        assert o.nullable == vr(t.get("nullableVersions")), f"{where}: nullableVersions"
        assert o.tag == t.get("tag"), f"{where}: tag"
        assert o.tagged_versions == vr(t.get("taggedVersions")), f"{where}: taggedVersions"
        assert "flexibleVersions" not in t, f"{where}: per-field flexibleVersions unsupported"
        assert our_default(o) == json_default(t, kind, elem_kind), f"{where}: default"
        if children is not None:
            assert o.struct is not None, f"{where}: expected a struct"
            compare_fields(where, o.struct, children, common)
            if (ttype.startswith("[]") and ttype[2:] in common) or ttype in common:
                assert o.struct.common_name == ttype.removeprefix("[]"), f"{where}: common"
        else:
            assert o.struct is None, f"{where}: unexpected struct"


def check_message(ms: MessageSchema, spec: dict[str, Any]) -> None:
    assert ms.versions == vr(spec["validVersions"]), f"{ms.name}: validVersions"
    assert ms.flexible == vr(spec.get("flexibleVersions", "none")), f"{ms.name}: flexibleVersions"
    common = {c["name"]: c for c in spec.get("commonStructs", [])}
    compare_fields(ms.name, ms.struct, spec["fields"], common)


@pytest.mark.parametrize("api", ALL_APIS, ids=lambda a: a.name)
def test_api_matches_spec(api: Any) -> None:
    for side, ms in (("Request", api.request), ("Response", api.response)):
        spec = load_spec(api.name + side)
        assert spec["type"] == side.lower()
        assert spec["apiKey"] == api.key
        check_message(ms, spec)


@pytest.mark.parametrize("schema", ALL_DATA_SCHEMAS, ids=lambda s: s.name)
def test_data_schema_matches_spec(schema: MessageSchema) -> None:
    spec = load_spec(schema.name)
    check_message(schema, spec)


def test_required_apis_present() -> None:
    keys = {a.key for a in ALL_APIS}
    required = {18, 3, 0, 1, 2, 10, 11, 14, 12, 13, 8, 9, 16, 15, 42, 47, 19, 20, 37, 32, 33}
    required |= {44, 22, 21, 23, 60, 35, 61, 17, 36, 45, 46, 43}
    required |= {4, 5, 6, 7, 56, 34}  # inter-broker
    required |= {24, 25, 26, 27, 28, 65, 66}  # transactions
    assert required <= keys


def test_conformance_detects_a_reordered_field() -> None:
    """The checker itself must notice a difference (guards against a vacuous test)."""
    from kt.protocol.apis import HEARTBEAT

    spec = load_spec("HeartbeatRequest")
    spec["fields"][0], spec["fields"][1] = spec["fields"][1], spec["fields"][0]
    with pytest.raises(AssertionError):
        check_message(HEARTBEAT.request, spec)
