"""Groups land on Kafka's __consumer_offsets partition: Java's String.hashCode, Utils.abs."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from kt.broker.groups import java_string_hash, partition_for


def _reference_hash(s: str) -> int:
    # The definition in the Java docs: sum of s[i]*31^(n-1-i) over UTF-16 units, mod 2^32.
    units = s.encode("utf-16-be", "surrogatepass")
    codes = [int.from_bytes(units[i : i + 2], "big") for i in range(0, len(units), 2)]
    n = len(codes)
    h = sum(c * pow(31, n - 1 - i, 2**32) for i, c in enumerate(codes)) % 2**32
    return h - 2**32 if h >= 2**31 else h


def test_known_java_hash_codes() -> None:
    assert java_string_hash("") == 0
    assert java_string_hash("a") == 97
    assert java_string_hash("hello") == 99162322
    assert java_string_hash("Aa") == java_string_hash("BB") == 2112
    assert java_string_hash("polygenelubricants") == -(2**31)
    assert java_string_hash("é") == 0xE9
    # A character outside the BMP counts as its two UTF-16 surrogates.
    assert java_string_hash("\U0001f600") == 0xD83D * 31 + 0xDE00


def test_partition_uses_kafka_utils_abs() -> None:
    assert partition_for("polygenelubricants", 50) == 0  # abs(MIN_VALUE) is 0, not negative
    h = java_string_hash("my-group")
    assert partition_for("my-group", 50) == abs(h) % 50
    negative = next(g for g in (f"group-{i}" for i in range(1000)) if java_string_hash(g) < 0)
    assert partition_for(negative, 50) == abs(java_string_hash(negative)) % 50
    assert partition_for("console-consumer-1", 1) == 0


@given(st.text())
def test_hash_matches_definition(s: str) -> None:
    assert java_string_hash(s) == _reference_hash(s)
    assert 0 <= partition_for(s, 50) < 50
