"""The fault campaign's transactional workload: a confluent-kafka transactional
producer writing small transactions across TXN_TOPIC's partitions (committing most,
aborting every ABORT_EVERY-th on purpose), a READ_COMMITTED consumer reading them
while faults are injected, and a final READ_COMMITTED read after healing.

What it records (the `txn-*` events `checker.check_transactions` judges):

- `{"f": "txn-begin", "type": "ok", "txn": n}`
- `{"f": "txn-send", "type": "invoke" | "fail", "txn": n, "value": v, "partition": p}`
  (`fail`: produce() refused it, nothing enqueued)
- `{"f": "txn-end", "type": "invoke", "txn": n, "action": "commit" | "abort"}`
- `{"f": "txn-end", "type": "ok", "txn": n, "outcome": "committed" | "aborted"}` (the
  coordinator acknowledged the commit or the abort), or `"type": "info"` with the error
  when the outcome is unknown (a fatal error, retries exhausted): indeterminate
- `{"f": "txn-renew", "type": "info", "txn": n, "unacked": [v, ...]}` (a new producer
  replaces the one that aborted transaction n with those sends unacknowledged; below)
- `{"f": "txn-poll", "type": "ok", "records": [[p, o, v], ...]}` (READ_COMMITTED reads)
- `{"f": "txn-final-read", "type": "ok" | "fail", "records": [...], "end": {p: o}}`

Errors are handled as confluent-kafka documents for transactional producers:
retriable -> call the same method again; txn_requires_abort -> abort_transaction;
fatal -> a new producer with the same transactional.id, whose init_transactions
fences the old epoch (and completes or aborts what it left).

One more rule works around a librdkafka bug (2.16 and earlier; docs/transactions.md
has the evidence): abort_transaction() purges the messages still queued, including
ones already sent whose request failed in transit (their status "possibly persisted")
and that wait to be retried, and then hands their sequence numbers to the next
transaction. When such a message had in fact been appended, the next transaction's
first batch on that partition carries the same producer epoch and sequence, and the
partition leader (Kafka's as kt's) takes it for a retry of the appended batch: it is
acknowledged and not written, and the committed transaction lacks it. So after an
abort that had sends not yet acknowledged, the workload starts a new producer: its
init_transactions bumps the epoch and the sequences start over.
"""

from __future__ import annotations

import contextlib
import os
import time
from typing import Any

from .clients import ClientThreads
from .history import History

TXN_TOPIC = "jepsen-txn"
TXN_PARTITIONS = 3
TXN_ID = "jepsen-txn-producer"
PER_TXN = 4  # values per transaction, spread over every partition
ABORT_EVERY = 5  # every 5th transaction is aborted on purpose
END_DEADLINE = 40.0  # seconds a commit/abort is retried before its outcome is unknown


class _Fatal(Exception):
    """The producer is unusable (fatal error or fenced): make a new one."""


class _Renew(Exception):
    """The transaction ended, but the producer's sequence state cannot be trusted
    (an abort purged sends that may have been appended): make a new one."""


class TxnWorkload(ClientThreads):
    """The transactional producer and READ_COMMITTED consumer threads."""

    def start(self, rate: float = 4.0) -> None:
        """Start both threads (about `rate` transactional values a second at most)."""
        self.run_loops([("p-txn", self._producer), ("c-txn", self._consumer)], rate)

    def join(self, timeout: float = 90.0) -> None:
        """Stop starting transactions; wait for the last one to end."""
        self.join_all(timeout)

    # --- producer ---------------------------------------------------------------------------

    def _new_producer(self) -> Any:
        from confluent_kafka import KafkaException, Producer

        p = Producer(
            {
                "bootstrap.servers": self.bootstrap,
                "transactional.id": TXN_ID,
                "transaction.timeout.ms": 30000,
                "message.timeout.ms": 15000,
                "request.timeout.ms": 4000,
                "retry.backoff.ms": 200,
                "linger.ms": 5,
                "socket.connection.setup.timeout.ms": 3000,
                "log_level": 2,
                **_debug_config(),
            }
        )
        # init_transactions fences any earlier epoch of TXN_ID; the coordinator may be
        # down or moving, so retry it (retriable or a timeout) until the campaign ends
        deadline = time.monotonic() + 120
        while True:
            try:
                p.init_transactions(20)
                return p
            except KafkaException as exc:
                err = exc.args[0]
                if err.fatal() or time.monotonic() > deadline:
                    raise
                time.sleep(0.5)

    def _producer(self, proc: str, rate: float) -> None:
        p = self._new_producer()
        n = 0
        while not self.stop.is_set():
            n += 1
            try:
                self._one_transaction(p, proc, n, rate)
            except (_Fatal, _Renew):
                with contextlib.suppress(Exception):
                    p.flush(0)
                p = self._new_producer()
        with contextlib.suppress(Exception):
            p.flush(10)

    def _one_transaction(self, p: Any, proc: str, n: int, rate: float) -> None:
        from confluent_kafka import KafkaException

        rec = self.history.record
        try:
            p.begin_transaction()
        except KafkaException as exc:
            # begin is local: only a fatal state makes it fail
            rec(proc, "txn-begin", "fail", txn=n, error=exc.args[0].name())
            raise _Fatal from exc
        rec(proc, "txn-begin", "ok", txn=n)
        action = "abort" if n % ABORT_EVERY == 0 else "commit"
        # values sent but not yet acknowledged (see _Renew)
        unacked: set[str] = set()

        def delivered(err: Any, msg: Any) -> None:
            if err is None:
                unacked.discard((msg.value() or b"").decode())

        for k in range(PER_TXN):
            value = f"t{n}-{k}"
            part = k % TXN_PARTITIONS
            rec(proc, "txn-send", "invoke", txn=n, value=value, partition=part)
            try:
                p.produce(TXN_TOPIC, value.encode(), partition=part, on_delivery=delivered)
                unacked.add(value)
            except (BufferError, KafkaException) as exc:
                err = exc.args[0].name() if isinstance(exc, KafkaException) else "BufferError"
                rec(proc, "txn-send", "fail", txn=n, value=value, error=err)
                # a transaction missing a value it meant to hold is not to be committed
                action = "abort"
                break
            # values spaced out: a transaction stays open about PER_TXN / rate
            # seconds, so most faults strike one mid-transaction
            p.poll(1.0 / rate)
        rec(proc, "txn-end", "invoke", txn=n, action=action)
        self._end(p, proc, n, action, unacked)

    def _end(self, p: Any, proc: str, n: int, action: str, unacked: set[str]) -> None:
        """commit or abort transaction n, recording its outcome; raises _Renew after
        an abort that purged sends which may have been appended."""
        from confluent_kafka import KafkaException

        rec = self.history.record
        deadline = time.monotonic() + END_DEADLINE
        while True:
            # what an abort may purge after having sent it
            purged = sorted(unacked) if action == "abort" else []
            try:
                if action == "commit":
                    p.commit_transaction(15)
                else:
                    p.abort_transaction(15)
                rec(proc, "txn-end", "ok", txn=n,
                    outcome="committed" if action == "commit" else "aborted")  # fmt: skip
                if purged:
                    rec(proc, "txn-renew", "info", txn=n, unacked=purged)
                    raise _Renew
                return
            except KafkaException as exc:
                err = exc.args[0]
                if err.fatal():
                    rec(proc, "txn-end", "info", txn=n, action=action, error=err.name())
                    raise _Fatal from exc
                if err.txn_requires_abort() and action == "commit":
                    # the commit cannot go through (a send failed): abort instead
                    rec(proc, "txn-end", "invoke", txn=n, action="abort", error=err.name())
                    action = "abort"
                elif not err.retriable() and not err.txn_requires_abort():
                    rec(proc, "txn-end", "info", txn=n, action=action, error=err.name())
                    raise _Fatal from exc
                if time.monotonic() > deadline:
                    rec(proc, "txn-end", "info", txn=n, action=action, error=err.name())
                    # the producer may still hold the transaction open: a new one
                    # fences it, and the coordinator completes or aborts it
                    raise _Fatal from exc
                time.sleep(0.2)

    # --- consumer ---------------------------------------------------------------------------

    def _consumer(self, proc: str, rate: float) -> None:
        from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

        c = Consumer(_reader_config(self.bootstrap, "txn-reader"))
        c.assign([TopicPartition(TXN_TOPIC, q, OFFSET_BEGINNING) for q in range(TXN_PARTITIONS)])
        try:
            while not self.stop.is_set():
                recs = [
                    [m.partition(), m.offset(), (m.value() or b"").decode()]
                    for m in c.consume(200, 0.5)
                    if m.error() is None
                ]
                if recs:
                    self.history.record(proc, "txn-poll", "ok", records=recs)
        finally:
            with contextlib.suppress(Exception):
                c.close()


def _debug_config() -> dict[str, Any]:
    """librdkafka's debug contexts from KT_TXN_DEBUG (e.g. "eos,msg,protocol"), to
    replay a campaign seed and see what the transactional producer did: librdkafka
    writes them to stderr (run pytest with -s and keep its stderr)."""
    contexts = os.environ.get("KT_TXN_DEBUG")
    return {"debug": contexts, "log_level": 7} if contexts else {}


def _reader_config(bootstrap: str, group: str) -> dict[str, Any]:
    return {
        "bootstrap.servers": bootstrap,
        "group.id": group,
        "enable.auto.commit": False,
        "isolation.level": "read_committed",
        "socket.connection.setup.timeout.ms": 3000,
        "log_level": 2,
    }


def txn_final_read(history: History, bootstrap: str, timeout: float = 45.0) -> bool:
    """Read every TXN_TOPIC partition from its start with READ_COMMITTED until the
    consumer's position reaches the high watermark (every transaction has ended by
    then, so the last stable offset has caught up); records a txn-final-read event."""
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

    c = Consumer(_reader_config(bootstrap, "txn-final-reader"))
    deadline = time.monotonic() + timeout
    ends: dict[int, int] = {}
    try:
        for q in range(TXN_PARTITIONS):
            while q not in ends:
                try:
                    ends[q] = c.get_watermark_offsets(TopicPartition(TXN_TOPIC, q), timeout=5)[1]
                except Exception as exc:
                    if time.monotonic() > deadline:
                        history.record("final", "txn-final-read", "fail", error=str(exc)[:120])
                        return False
                    time.sleep(0.5)
        tps = [TopicPartition(TXN_TOPIC, q, OFFSET_BEGINNING) for q in range(TXN_PARTITIONS)]
        c.assign(tps)
        recs: list[list[Any]] = []
        pos = {q: 0 for q in range(TXN_PARTITIONS)}
        while any(pos[q] < ends[q] for q in ends) and time.monotonic() < deadline:
            for m in c.consume(500, 0.5):
                mp, mo = m.partition(), m.offset()
                if m.error() is None and mp is not None and mo is not None:
                    recs.append([mp, mo, (m.value() or b"").decode()])
                    pos[mp] = max(pos[mp], mo + 1)
            # the position moves past control records (commit/abort markers) and
            # aborted data, which READ_COMMITTED never returns
            with contextlib.suppress(Exception):
                for tp in c.position([TopicPartition(TXN_TOPIC, q) for q in ends]):
                    if tp.offset >= 0:
                        pos[tp.partition] = max(pos[tp.partition], tp.offset)
        short = {q: (pos[q], ends[q]) for q in ends if pos[q] < ends[q]}
        history.record(
            "final", "txn-final-read", "ok" if not short else "fail",
            records=recs, end={str(q): e for q, e in ends.items()},
            **({"error": f"read stopped short: {short}"} if short else {}),
        )  # fmt: skip
        return not short
    finally:
        with contextlib.suppress(Exception):
            c.close()


def create_txn_topic(bootstrap: str) -> None:
    """TXN_TOPIC with RF 3 and min.insync.replicas 2, as the campaign's topic."""
    from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

    admin = AdminClient({"bootstrap.servers": bootstrap})
    fut = admin.create_topics(
        [NewTopic(TXN_TOPIC, TXN_PARTITIONS, 3, config={"min.insync.replicas": "2"})],
        operation_timeout=20,
    )
    fut[TXN_TOPIC].result(30)
