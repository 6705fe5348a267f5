"""partition.metadata and meta.properties."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kt.storage.errors import CorruptCheckpointError, UnsupportedFormatError
from kt.storage.meta_properties import (
    MetaProperties,
    encode_meta_properties,
    parse_meta_properties,
    parse_properties,
    read_meta_properties,
    write_meta_properties,
)
from kt.storage.partition_metadata import (
    PartitionMetadata,
    encode_partition_metadata,
    parse_partition_metadata,
    random_uuid,
    read_partition_metadata,
    uuid_from_str,
    uuid_to_str,
    write_partition_metadata,
)

PM_FIXTURES = [
    f"{p}/partition.metadata"
    for p in ("test-0", "tenitems-0", "quickstart-events-0", "some-topic-0")
]


@pytest.mark.parametrize("rel", PM_FIXTURES)
def test_real_partition_metadata_round_trips(fixtures_dir: Path, rel: str) -> None:
    path = fixtures_dir / rel
    meta = read_partition_metadata(path)
    assert len(meta.topic_id_bytes) == 16
    assert encode_partition_metadata(meta) == path.read_bytes()


def test_partition_metadata_exact_bytes(tmp_path: Path) -> None:
    raw = bytes(range(16))
    meta = PartitionMetadata(uuid_to_str(raw))
    assert encode_partition_metadata(meta) == b"version: 0\ntopic_id: AAECAwQFBgcICQoLDA0ODw"
    path = tmp_path / "partition.metadata"
    write_partition_metadata(path, meta)
    assert read_partition_metadata(path) == meta
    # Kafka accepts a trailing newline and the uuid with padding
    assert (
        parse_partition_metadata(b"version: 0\ntopic_id: AAECAwQFBgcICQoLDA0ODw==\n").topic_id_bytes
        == raw
    )


@pytest.mark.parametrize(
    ("text", "error", "message"),
    [
        (b"", CorruptCheckpointError, "empty"),
        (b"version: 1\ntopic_id: AAECAwQFBgcICQoLDA0ODw", UnsupportedFormatError, "version 1"),
        (b"version:0\ntopic_id: AAECAwQFBgcICQoLDA0ODw", CorruptCheckpointError, "line 1"),
        (b"version: 0\n", CorruptCheckpointError, "line 2: missing"),
        (b"version: 0\ntopic_id: shorter", CorruptCheckpointError, "decodes to"),
        (b"version: 0\ntopic_id: short", CorruptCheckpointError, "not valid base64"),
        (b"version: 0\ntopic_id: AAAAAAAAAAAAAAAAAAAAAA", CorruptCheckpointError, "all-zero"),
        (b"version: 0\ntopic_id: AAECAwQFBgcICQoLDA0ODw\njunk", CorruptCheckpointError, "line 3"),
        (b"\x89PNG\r\n\x1a\n\x00", CorruptCheckpointError, "not UTF-8"),
    ],
)
def test_partition_metadata_errors(text: bytes, error: type[Exception], message: str) -> None:
    with pytest.raises(error, match=message):
        parse_partition_metadata(text)


@given(st.binary(min_size=16, max_size=16).filter(lambda b: b != bytes(16)))
def test_uuid_and_partition_metadata_round_trip(raw: bytes) -> None:
    text = uuid_to_str(raw)
    assert len(text) == 22 and uuid_from_str(text) == raw
    meta = PartitionMetadata(text)
    assert parse_partition_metadata(encode_partition_metadata(meta)) == meta


def test_random_uuid() -> None:
    raw = random_uuid()
    assert len(raw) == 16 and not uuid_to_str(raw).startswith("-")


def test_real_meta_properties(fixtures_dir: Path) -> None:
    v3 = read_meta_properties(fixtures_dir / "logdir-3.x/meta.properties")
    assert v3 == MetaProperties(version=0, node_id=1, cluster_id="bhKx9kzDTW6IYAX6MriLZQ")
    v010 = read_meta_properties(fixtures_dir / "logdir-0.10/meta.properties")
    assert v010 == MetaProperties(version=0, node_id=0)


def test_meta_properties_write_and_read(tmp_path: Path) -> None:
    meta = MetaProperties(
        1,
        node_id=3,
        cluster_id="bhKx9kzDTW6IYAX6MriLZQ",
        directory_id=uuid_to_str(bytes(range(1, 17))),
    )
    now = datetime(2023, 2, 12, 10, 26, 7, tzinfo=UTC)
    data = encode_meta_properties(meta, now)
    assert data.startswith(b"#\n#Sun Feb 12 10:26:07 UTC 2023\nversion=1\nnode.id=3\n")
    path = tmp_path / "meta.properties"
    write_meta_properties(path, meta, now)
    assert read_meta_properties(path) == meta


@pytest.mark.parametrize(
    ("text", "error", "message"),
    [
        ("", CorruptCheckpointError, "no properties"),
        ("#only\n", CorruptCheckpointError, "no properties"),
        ("version=2\n", UnsupportedFormatError, "version 2"),
        ("version=1\ncluster.id=x\n", CorruptCheckpointError, "node.id is required"),
        ("version=1\nnode.id=1\n", CorruptCheckpointError, "cluster.id is required"),
        ("version=0\nbroker.id=abc\n", CorruptCheckpointError, "not an integer"),
        (
            "version=1\nnode.id=1\ncluster.id=c\ndirectory.id=zz\n",
            CorruptCheckpointError,
            "directory.id",
        ),
    ],
)
def test_meta_properties_errors(text: str, error: type[Exception], message: str) -> None:
    with pytest.raises(error, match=message):
        parse_meta_properties(text.encode())


def test_java_properties_syntax() -> None:
    props = parse_properties("! comment\n  key1 = a\\\n    b\nkey2:c\nkey3 d\nk\\=4=\\u0041\\t\n")
    assert props == {"key1": "ab", "key2": "c", "key3": "d", "k=4": "A\t"}
    # v0 without version key is version 0 (Kafka's default)
    assert parse_meta_properties(b"broker.id=5\n").version == 0


@given(
    st.integers(0, 2**31 - 1),
    st.text(st.characters(min_codepoint=32, max_codepoint=0x2FFF), min_size=1, max_size=30),
)
def test_meta_properties_round_trip(node_id: int, cluster_id: str) -> None:
    meta = MetaProperties(1, node_id=node_id, cluster_id=cluster_id)
    assert parse_meta_properties(encode_meta_properties(meta)) == meta
