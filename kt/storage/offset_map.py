"""The log cleaner's dedupe map: key hash -> latest offset (Kafka's SkimpyOffsetMap).

Compaction's first pass records, for every key of the dirty section, the offset of
its newest record. As Kafka's map, it stores a 16-byte MD5 digest of each key rather
than the key, so a key of any size costs the same, and its capacity comes from a
memory budget: `log.cleaner.dedupe.buffer.size` bytes per thread hold
`size // 24` slots (digest + int64 offset), filled to at most
`log.cleaner.io.buffer.load.factor` of them. A cleaning whose dirty keys do not
fit covers a prefix of the dirty section and continues at the next round.

kt keeps the entries in a dict: the *number* of entries follows Kafka's budget
exactly, the Python memory per entry is a few times Kafka's 24 bytes.
"""

from __future__ import annotations

import hashlib

HASH_SIZE = 16
BYTES_PER_ENTRY = HASH_SIZE + 8
# Kafka caps one thread's dedupe buffer at 2 GiB.
MAX_BUFFER_PER_THREAD = 2**31 - 1


def key_digest(key: bytes) -> bytes:
    """The 16-byte digest a key is stored under."""
    return hashlib.md5(key, usedforsecurity=False).digest()


def capacity_for(buffer_bytes: int, load_factor: float = 0.9) -> int:
    """Entries a map may hold given a per-thread buffer of `buffer_bytes`."""
    if buffer_bytes <= 0:
        raise ValueError(f"dedupe buffer size must be positive, got {buffer_bytes}")
    if not 0.0 < load_factor <= 1.0:
        raise ValueError(f"load factor must be in (0, 1], got {load_factor}")
    slots = min(buffer_bytes, MAX_BUFFER_PER_THREAD) // BYTES_PER_ENTRY
    return max(1, int(slots * load_factor))


class OffsetMap:
    """Key digest -> highest offset seen, bounded to `capacity` entries (None: unbounded)."""

    __slots__ = ("_map", "capacity", "latest_offset")

    def __init__(self, capacity: int | None = None) -> None:
        if capacity is not None and capacity <= 0:
            raise ValueError(f"offset map capacity must be positive, got {capacity}")
        self.capacity = capacity
        self._map: dict[bytes, int] = {}
        # The last offset put (Kafka's latestOffset), -1 when empty.
        self.latest_offset = -1

    def __len__(self) -> int:
        return len(self._map)

    def room_for(self, new_keys: int) -> bool:
        """True when `new_keys` more distinct keys would still fit."""
        return self.capacity is None or len(self._map) + new_keys <= self.capacity

    def put(self, key: bytes, offset: int) -> None:
        """Record `offset` as the latest for `key` (offsets arrive in increasing order)."""
        self._map[key_digest(key)] = offset
        if offset > self.latest_offset:
            self.latest_offset = offset

    def get(self, key: bytes) -> int:
        """The latest offset recorded for `key`, -1 when none."""
        return self._map.get(key_digest(key), -1)

    def clear(self) -> None:
        """Forget every entry (between logs)."""
        self._map.clear()
        self.latest_offset = -1
