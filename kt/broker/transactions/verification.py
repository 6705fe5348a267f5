"""A partition leader's transaction verification state (KIP-890 part 1), pure.

Before the first transactional batch of a producer on a partition with no ongoing
transaction there is appended, the leader asks the transaction coordinator whether
the partition is in the producer's transaction (a verify-only AddPartitionsToTxn,
`verifier.TxnVerifier`). While that question is out, the partition keeps a
`VerificationEntry` for the producer (Kafka's ProducerStateManager
verificationStates):

- its `VerificationGuard` names this verification. The produce that started it
  carries the guard to the append, and the append is allowed only if the entry
  still holds that very guard. Any transactional batch or marker of the producer
  written meanwhile clears the entry, so a verification that completes after the
  transaction ended (an abort marker came in while the question was out) cannot
  let its old batch open a transaction nobody will end.
- it keeps the lowest sequence (and the newest epoch) seen while unverified, so a
  later batch of the producer cannot be appended ahead of an earlier one that is
  still being retried (Kafka refuses it OUT_OF_ORDER_SEQUENCE_NUMBER).

Entries are dropped `producer.id.expiration.ms` after they were created (Kafka
removes them with the expired producers).
"""

from __future__ import annotations

from dataclasses import dataclass, field

#: producer.id.expiration.ms's default: how long an entry is kept.
DEFAULT_EXPIRATION_MS = 86_400_000


class VerificationGuard:
    """The identity of one verification: equal only to itself."""

    __slots__ = ()

    def __repr__(self) -> str:
        return f"<VerificationGuard {id(self):#x}>"


@dataclass(slots=True)
class VerificationEntry:
    """One producer's verification on one partition."""

    created_ms: int
    lowest_sequence: int
    epoch: int
    guard: VerificationGuard = field(default_factory=VerificationGuard)

    def update(self, sequence: int, epoch: int) -> None:
        """Another unverified batch of the producer: keep the lowest sequence of the
        newest epoch (Kafka's maybeUpdateLowestSequenceAndEpoch)."""
        if epoch > self.epoch:
            self.epoch = epoch
            self.lowest_sequence = sequence
        elif epoch == self.epoch and sequence < self.lowest_sequence:
            self.lowest_sequence = sequence


class VerificationStates:
    """The verification entries of one partition, by producer id."""

    def __init__(self, expiration_ms: int = DEFAULT_EXPIRATION_MS) -> None:
        self.expiration_ms = expiration_ms
        self._entries: dict[int, VerificationEntry] = {}

    def __len__(self) -> int:
        return len(self._entries)

    def start(self, producer_id: int, sequence: int, epoch: int, now_ms: int) -> VerificationGuard:
        """The guard of the producer's verification: the entry's if one is open (a
        retry, or another in-flight batch, joins it), else a new one."""
        self.expire(now_ms)
        entry = self._entries.get(producer_id)
        if entry is None:
            entry = VerificationEntry(now_ms, sequence, epoch)
            self._entries[producer_id] = entry
        else:
            entry.update(sequence, epoch)
        return entry.guard

    def entry(self, producer_id: int) -> VerificationEntry | None:
        """The producer's open verification, if any."""
        return self._entries.get(producer_id)

    def verified(self, producer_id: int, guard: VerificationGuard | None) -> bool:
        """Whether `guard` (the one a produce carries) is the producer's current one
        (Kafka's VerificationGuard.verify: never for no guard)."""
        entry = self._entries.get(producer_id)
        return guard is not None and entry is not None and entry.guard is guard

    def clear(self, producer_id: int) -> None:
        """A transactional batch or a marker of the producer was written: its
        verification, done or not, is over."""
        self._entries.pop(producer_id, None)

    def clear_all(self) -> None:
        """Forget every entry."""
        self._entries.clear()

    def expire(self, now_ms: int) -> int:
        """Drop entries created `expiration_ms` or longer ago; returns how many."""
        limit = now_ms - self.expiration_ms
        old = [pid for pid, e in self._entries.items() if e.created_ms <= limit]
        for pid in old:
            del self._entries[pid]
        return len(old)
