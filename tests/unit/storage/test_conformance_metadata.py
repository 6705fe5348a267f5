"""kt's KRaft metadata schemas against Kafka's JSON specs, and the JSON it prints.

Every metadata record, control record and the quorum-state schema kt states in
`kt.storage.metadata_schema` is compared field by field (recursively) with Kafka's
spec: apiKey, valid versions, name, order, type, versions, nullable versions, tag,
tagged versions and default. Then, for every record type and version, the JSON
`kafka_json` prints must carry exactly the field names Kafka's generated converter
writes (lowerCaseFirst of the spec's names, in spec order, tagged fields only when
not default).

The specs are read from $KT_KAFKA_METADATA_SPECS (a directory like
../shared/reference/kafka-metadata-specs, or a Kafka checkout), else from ../shared
beside the checkout, else the tests skip; `.ci/run` fails when one skipped.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from kafka_specs import load_metadata_spec, load_spec, metadata_spec_names
from kraft_fixtures import sample_data

from kt.storage.metadata_codec import decode_metadata_record, encode_metadata_record, kafka_json
from kt.storage.metadata_schema import (
    CONTROL_RECORDS,
    METADATA_RECORDS,
    QUORUM_STATE,
    Field,
    MessageSchema,
    in_range,
    parse_versions,
)

FILE_NAMES = {"ZkMigrationStateRecord": "ZkMigrationRecord"}
PRIMITIVES = {
    "int8",
    "int16",
    "int32",
    "int64",
    "uint16",
    "float64",
    "bool",
    "string",
    "bytes",
    "uuid",
}


def _spec_fields(spec: dict[str, Any], fields: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Fields with struct types resolved through commonStructs."""
    common = {s["name"]: s["fields"] for s in spec.get("commonStructs", [])}
    out = []
    for f in fields:
        f = dict(f)
        elem = f["type"][2:] if f["type"].startswith("[]") else f["type"]
        if elem not in PRIMITIVES and "fields" not in f:
            f["fields"] = common[elem]
        out.append(f)
    return out


def _compare(
    ours: tuple[Field, ...], theirs: list[dict[str, Any]], spec: dict[str, Any], where: str
) -> None:
    theirs = _spec_fields(spec, theirs)
    assert [f.name for f in ours] == [f["name"] for f in theirs], where
    for o, t in zip(ours, theirs, strict=True):
        at = f"{where}.{o.name}"
        assert o.type == t["type"], at
        assert o.versions == parse_versions(t["versions"]), at
        assert o.nullable == parse_versions(t.get("nullableVersions")), at
        assert o.tagged == parse_versions(t.get("taggedVersions")), at
        tag = t.get("tag")
        assert o.tag == (None if tag is None else int(tag)), at
        default = t.get("default")
        assert o.default == (None if default is None else str(default)), at
        if "fields" in t:
            _compare(o.fields, t["fields"], spec, at)
        else:
            assert not o.fields, at


@pytest.mark.parametrize("api_key", sorted(METADATA_RECORDS))
def test_metadata_record_schema_matches_spec(api_key: int) -> None:
    ours = METADATA_RECORDS[api_key]
    spec = load_metadata_spec(FILE_NAMES.get(ours.name, ours.name))
    assert spec["apiKey"] == api_key
    assert spec["name"] == ours.name
    assert parse_versions(spec["validVersions"]) == ours.valid
    assert spec["flexibleVersions"] == "0+"
    _compare(ours.fields, spec["fields"], spec, ours.name)


def test_every_spec_file_has_a_schema() -> None:
    names = metadata_spec_names()
    if not names:
        load_metadata_spec("TopicRecord")  # skips with the reason when none are found
    ours = {FILE_NAMES.get(s.name, s.name) for s in METADATA_RECORDS.values()}
    assert set(names) - ours == set(), "a metadata record Kafka defines has no kt schema"


@pytest.mark.parametrize("type_id", sorted(CONTROL_RECORDS))
def test_control_record_schema_matches_spec(type_id: int) -> None:
    ours = CONTROL_RECORDS[type_id][0]
    spec = load_spec(ours.name)
    assert parse_versions(spec["validVersions"]) == ours.valid
    _compare(ours.fields, spec["fields"], spec, ours.name)


def test_quorum_state_schema_matches_spec() -> None:
    spec = load_metadata_spec("QuorumStateData")
    assert parse_versions(spec["validVersions"]) == QUORUM_STATE.valid
    _compare(QUORUM_STATE.fields, spec["fields"], spec, "QuorumStateData")


def _expected_names(fields: list[dict[str, Any]], version: int) -> list[str]:
    """Kafka's JSON names of the fields of `version` (all set to non-defaults)."""
    return [
        f["name"][:1].lower() + f["name"][1:]
        for f in fields
        if in_range(version, parse_versions(f["versions"]))
    ]


def _cases() -> list[tuple[int, int]]:
    return [
        (k, v)
        for k, s in sorted(METADATA_RECORDS.items())
        for v in range(s.valid[0], (s.valid[1] or 0) + 1)
    ]


@pytest.mark.parametrize(("api_key", "version"), _cases())
def test_printed_json_has_kafkas_field_names_in_order(api_key: int, version: int) -> None:
    schema: MessageSchema = METADATA_RECORDS[api_key]
    spec = load_metadata_spec(FILE_NAMES.get(schema.name, schema.name))
    data = sample_data(schema, version)  # every field set to a non-default value
    record = decode_metadata_record(encode_metadata_record(api_key, version, data))
    printed = json.loads(kafka_json(schema, version, record.data))
    assert list(printed) == _expected_names(spec["fields"], version)
    # And the whole line, as the dump tool prints it.
    line = json.loads(record.kafka_json(redact=False))
    assert line["type"] == schema.type_name and line["version"] == version
