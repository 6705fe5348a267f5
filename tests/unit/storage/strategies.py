"""Hypothesis strategies and small helpers shared by the storage format tests."""

from __future__ import annotations

import struct

from hypothesis import strategies as st

from kt.storage.compression import Codec
from kt.storage.record_batch import RecordSpec

INT32_MIN, INT32_MAX = -(2**31), 2**31 - 1
INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1
INT16_MIN, INT16_MAX = -(2**15), 2**15 - 1

codecs = st.sampled_from(list(Codec))
int16s = st.integers(INT16_MIN, INT16_MAX)
int32s = st.integers(INT32_MIN, INT32_MAX)
int64s = st.integers(INT64_MIN, INT64_MAX)

# Mostly short payloads, some empty, some null: the shapes that hit every branch of
# the length encodings without making examples slow.
payloads = st.binary(max_size=64)
nullable_payloads = st.none() | payloads
header_keys = st.text(max_size=12)
headers = st.lists(st.tuples(header_keys, nullable_payloads), max_size=3)
# Timestamps a producer could really write; the batch fields themselves take any int64.
timestamps = st.integers(0, 2**41)


@st.composite
def record_specs(draw: st.DrawFn, max_records: int = 12) -> list[RecordSpec]:
    """Records for a v2 batch, with increasing offset deltas and optional timestamps."""
    n = draw(st.integers(0, max_records))
    gaps = draw(st.lists(st.integers(1, 3), min_size=n, max_size=n))
    with_offsets = draw(st.booleans())
    out: list[RecordSpec] = []
    delta = -1
    for gap in gaps:
        delta += gap if with_offsets else 1
        out.append(
            RecordSpec(
                key=draw(nullable_payloads),
                value=draw(nullable_payloads),
                headers=draw(headers),
                timestamp=draw(st.none() | timestamps),
                offset_delta=delta if with_offsets else None,
            )
        )
    return out


legacy_records = st.lists(st.tuples(nullable_payloads, nullable_payloads, timestamps), max_size=8)


def xxh32(data: bytes, seed: int = 0) -> int:
    """XXH32 written from the xxHash specification (the LZ4 frame checksum)."""
    p1, p2, p3, p4, p5 = 2654435761, 2246822519, 3266489917, 668265263, 374761393
    mask = 0xFFFFFFFF

    def rotl(x: int, r: int) -> int:
        return ((x << r) | (x >> (32 - r))) & mask

    def round_(acc: int, lane: int) -> int:
        return (rotl((acc + lane * p2) & mask, 13) * p1) & mask

    n = len(data)
    pos = 0
    if n >= 16:
        v = [(seed + p1 + p2) & mask, (seed + p2) & mask, seed & mask, (seed - p1) & mask]
        while pos + 16 <= n:
            lanes = struct.unpack_from("<4I", data, pos)
            v = [round_(a, lane) for a, lane in zip(v, lanes)]
            pos += 16
        acc = (rotl(v[0], 1) + rotl(v[1], 7) + rotl(v[2], 12) + rotl(v[3], 18)) & mask
    else:
        acc = (seed + p5) & mask
    acc = (acc + n) & mask
    while pos + 4 <= n:
        (word,) = struct.unpack_from("<I", data, pos)
        acc = (rotl((acc + word * p3) & mask, 17) * p4) & mask
        pos += 4
    while pos < n:
        acc = (rotl((acc + data[pos] * p5) & mask, 11) * p1) & mask
        pos += 1
    acc ^= acc >> 15
    acc = (acc * p2) & mask
    acc ^= acc >> 13
    acc = (acc * p3) & mask
    acc ^= acc >> 16
    return acc


class XxhashShim:
    """Stands in for the `xxhash` module where kafka-python's old-Kafka lz4 needs it."""

    class _Digest:
        def __init__(self, data: bytes) -> None:
            self._value = xxh32(bytes(data))

        def digest(self) -> bytes:
            return self._value.to_bytes(4, "big")

    @classmethod
    def xxh32(cls, data: bytes) -> XxhashShim._Digest:
        return cls._Digest(data)
