"""Offset checkpoints, leader-epoch checkpoints and the leader-epoch cache."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kt.storage.checkpoint import (
    TopicPartition,
    encode_offset_checkpoint,
    parse_offset_checkpoint,
    read_offset_checkpoint,
    salvage_offset_checkpoint,
    write_offset_checkpoint,
)
from kt.storage.errors import CorruptCheckpointError
from kt.storage.leader_epoch import (
    EpochEntry,
    LeaderEpochCache,
    encode_leader_epoch_checkpoint,
    parse_leader_epoch_checkpoint,
    read_leader_epoch_checkpoint,
    salvage_leader_epoch_checkpoint,
)

OFFSET_FIXTURES = [
    "logdir-3.x/recovery-point-offset-checkpoint",
    "logdir-3.x/replication-offset-checkpoint",
    "logdir-3.x/log-start-offset-checkpoint",
    "logdir-3.x/cleaner-offset-checkpoint",
    "logdir-0.10/recovery-point-offset-checkpoint",
    "logdir-0.10/replication-offset-checkpoint",
]
EPOCH_FIXTURES = [
    f"{p}/leader-epoch-checkpoint"
    for p in (
        "test-0",
        "tenitems-0",
        "quickstart-events-0",
        "some-topic-0",
        "__consumer_offsets-16",
    )
]


@pytest.mark.parametrize("rel", OFFSET_FIXTURES)
def test_real_offset_checkpoints_round_trip(fixtures_dir: Path, rel: str) -> None:
    path = fixtures_dir / rel
    entries = read_offset_checkpoint(path)
    assert encode_offset_checkpoint(entries) == path.read_bytes()


def test_real_offset_checkpoint_content(fixtures_dir: Path) -> None:
    entries = read_offset_checkpoint(fixtures_dir / OFFSET_FIXTURES[0])
    assert len(entries) == 57
    assert next(iter(entries.items())) == (TopicPartition("__consumer_offsets", 22), 0)
    assert read_offset_checkpoint(fixtures_dir / OFFSET_FIXTURES[1]) == {
        TopicPartition("tesot", 0): 0
    }


@pytest.mark.parametrize("rel", EPOCH_FIXTURES)
def test_real_leader_epoch_checkpoints_round_trip(fixtures_dir: Path, rel: str) -> None:
    path = fixtures_dir / rel
    entries = read_leader_epoch_checkpoint(path)
    assert entries == [EpochEntry(0, 0)]
    assert encode_leader_epoch_checkpoint(entries) == path.read_bytes()


def test_exact_bytes() -> None:
    data = encode_offset_checkpoint({TopicPartition("a", 1): 5, TopicPartition("b.c", 0): 0})
    assert data == b"0\n2\na 1 5\nb.c 0 0\n"
    assert encode_offset_checkpoint({}) == b"0\n0\n"
    assert (
        encode_leader_epoch_checkpoint([EpochEntry(0, 0), EpochEntry(3, 17)])
        == b"0\n2\n0 0\n3 17\n"
    )


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "empty file"),
        ("1\n0\n", "line 1: unsupported version 1"),
        ("x\n0\n", "line 1: malformed version"),
        ("0\n", "line 2: missing entry count"),
        ("0\nabc\n", "line 2: malformed entry count"),
        ("0\n2\na 0 1\n", "line 2 says 2 entries but the file has 1"),
        ("0\n1\na 0 1\nb 0 2\n", "line 2 says 1 entry but the file has 2"),
        ("0\n1\na 0\n", "line 3: expected 3 fields"),
        ("0\n1\na 0 1 2\n", "line 3: expected 3 fields"),
        ("0\n1\n a 0 1\n", "line 3: expected 3 fields"),  # Java split: leading empty field
        ("0\n1\na x 1\n", "line 3: partition 'x' is not an int32"),
        ("0\n1\na 0 1.5\n", "line 3: offset '1.5' is not an int64"),
        ("0\n1\na 99999999999 1\n", "is not an int32"),
        ("0\n1\na -1 1\n", "line 3: negative partition -1"),
        ("0\n1\na 1 -1\n", "line 3: negative offset"),
        ("0\n2\na 0 1\na 0 2\n", "line 4: duplicate entry for a 0 \\(first on line 3\\)"),
        ("0\n1\na 0 1\n\n", "line 4: expected 3 fields"),
    ],
)
def test_offset_checkpoint_errors(text: str, message: str) -> None:
    with pytest.raises(CorruptCheckpointError, match=message):
        parse_offset_checkpoint(text.encode(), "cp")


def test_offset_checkpoint_java_leniencies() -> None:
    # Java readLine accepts \r\n; \s+ splits on tabs; a last line without newline is fine.
    assert parse_offset_checkpoint(b"0\r\n1\r\na\t0  7") == {TopicPartition("a", 0): 7}
    assert parse_offset_checkpoint(b"", allow_empty=True) == {}
    assert parse_offset_checkpoint(b"0\n", allow_empty=True) == {}
    with pytest.raises(CorruptCheckpointError, match="not UTF-8"):
        parse_offset_checkpoint(b"\x00\x01\xff\xfe")


def test_salvage() -> None:
    entries, problems = salvage_offset_checkpoint(b"0\n3\na 0 1\nbroken\na 0 2\n")
    assert entries == {TopicPartition("a", 0): 2}  # last wins, as Kafka's map does
    assert len(problems) == 2  # malformed line 4, duplicate on line 5
    epochs, problems = salvage_leader_epoch_checkpoint(b"0\n2\n0 5\n1 3\n")
    assert epochs == [EpochEntry(0, 5), EpochEntry(1, 3)] and problems


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("0\n2\n0 0\n0 5\n", "line 4: epoch 0 is not greater"),
        ("0\n2\n1 10\n2 5\n", "line 4: start offset 5 of epoch 2 is less"),
        ("0\n1\n-1 0\n", "negative epoch"),
        ("0\n1\n0 0 0\n", "expected 2 fields"),
        ("0\n2\n0 0\n", "line 2 says 2 entries"),
    ],
)
def test_leader_epoch_errors(text: str, message: str) -> None:
    with pytest.raises(CorruptCheckpointError, match=message):
        parse_leader_epoch_checkpoint(text.encode())
    # equal start offsets are allowed (an epoch with no records)
    assert parse_leader_epoch_checkpoint(b"0\n2\n1 5\n2 5\n") == [
        EpochEntry(1, 5),
        EpochEntry(2, 5),
    ]


topics = st.text(st.characters(min_codepoint=33, max_codepoint=0x2FFF), min_size=1, max_size=20)


@given(
    st.dictionaries(
        st.builds(TopicPartition, topics, st.integers(0, 2**31 - 1)), st.integers(0, 2**63 - 1)
    )
)
def test_offset_checkpoint_round_trip(entries: dict[TopicPartition, int]) -> None:
    assert parse_offset_checkpoint(encode_offset_checkpoint(entries)) == entries


@given(st.lists(st.tuples(st.integers(0, 1000), st.integers(0, 10**6)), max_size=30))
def test_leader_epoch_round_trip(raw: list[tuple[int, int]]) -> None:
    epochs = sorted({e for e, _ in raw})
    starts = sorted(s for _, s in raw)[: len(epochs)]
    entries = [EpochEntry(e, s) for e, s in zip(epochs, starts)]
    assert parse_leader_epoch_checkpoint(encode_leader_epoch_checkpoint(entries)) == entries


def test_write_offset_checkpoint(tmp_path: Path) -> None:
    path = tmp_path / "recovery-point-offset-checkpoint"
    write_offset_checkpoint(path, {TopicPartition("t", 0): 3})
    assert path.read_bytes() == b"0\n1\nt 0 3\n"
    with pytest.raises(ValueError, match="whitespace"):
        write_offset_checkpoint(path, {TopicPartition("a b", 0): 3})
    assert path.read_bytes() == b"0\n1\nt 0 3\n"


# --- the cache --------------------------------------------------------------------


def test_cache_assign_is_append_only(tmp_path: Path) -> None:
    path = tmp_path / "leader-epoch-checkpoint"
    cache = LeaderEpochCache(path)
    assert cache.assign(0, 0)
    assert not cache.assign(0, 5)  # same epoch, later offset: nothing to do
    assert cache.assign(2, 10)
    assert cache.assign(3, 20)
    assert path.read_bytes() == b"0\n3\n0 0\n2 10\n3 20\n"
    # A lower epoch at a lower offset evicts the trailing entries it conflicts with.
    assert cache.assign(1, 8)
    assert cache.entries == [EpochEntry(0, 0), EpochEntry(1, 8)]
    assert LeaderEpochCache.load(path).entries == cache.entries
    with pytest.raises(ValueError):
        cache.assign(-1, 0)


def test_cache_end_offset_for() -> None:
    cache = LeaderEpochCache(None, [EpochEntry(1, 0), EpochEntry(3, 100), EpochEntry(5, 200)])
    assert cache.end_offset_for(-1, 300) == (-1, -1)
    assert cache.end_offset_for(5, 300) == (5, 300)  # latest epoch: the log end offset
    assert cache.end_offset_for(3, 300) == (3, 200)
    assert cache.end_offset_for(4, 300) == (3, 200)  # unknown epoch: floor epoch, next start
    assert cache.end_offset_for(0, 300) == (0, 0)  # below all: requested epoch, first start
    assert cache.end_offset_for(6, 300) == (-1, -1)
    assert cache.epoch_for_offset(150) == 3
    assert LeaderEpochCache().end_offset_for(0, 5) == (-1, -1)


def test_cache_truncation(tmp_path: Path) -> None:
    path = tmp_path / "leader-epoch-checkpoint"
    cache = LeaderEpochCache(path, [EpochEntry(1, 0), EpochEntry(3, 100), EpochEntry(5, 200)])
    cache.truncate_from_end(150)
    assert cache.entries == [EpochEntry(1, 0), EpochEntry(3, 100)]
    cache.truncate_from_end(150)  # nothing at or past 150 any more
    cache.truncate_from_start(120)
    assert cache.entries == [EpochEntry(3, 120)]
    assert cache.latest_epoch == 3
    assert read_leader_epoch_checkpoint(path) == [EpochEntry(3, 120)]
    cache.clear()
    assert read_leader_epoch_checkpoint(path, allow_empty=True) == []


def test_cache_load_replays_like_kafka(tmp_path: Path) -> None:
    path = tmp_path / "leader-epoch-checkpoint"
    path.write_bytes(b"0\n3\n0 0\n2 50\n1 20\n")  # non-monotonic: assign repairs it
    assert LeaderEpochCache.load(path).entries == [EpochEntry(0, 0), EpochEntry(1, 20)]
    path.write_bytes(b"0\n3\n0 0\n")
    with pytest.raises(CorruptCheckpointError):
        LeaderEpochCache.load(path)
    assert LeaderEpochCache.load(tmp_path / "missing").entries == []
