"""`kt transactions list|describe|describe-producers|abort|find-hanging`:
kafka-transactions.sh over kt's client, same commands, options and columns."""

from __future__ import annotations

import time
from typing import Any

import click

from kt.client import KafkaClient, KafkaError
from kt.client.transactions import (
    ProducerState,
    TransactionDescription,
    TransactionListing,
    abort_transaction,
    describe_producers,
    describe_transaction,
    list_transactions,
)
from kt.protocol.errors import ErrorCode
from kt.tools.console import emit_json, fail, handle_errors, render_table, usage_error
from kt.tools.wire import Wire, wire_options


@click.group()
def transactions() -> None:
    """Inspect transactions and recover from hanging ones (like kafka-transactions.sh).

    \b
    Examples:
      kt transactions list
      kt transactions describe --transactional-id orders-app-1
      kt transactions describe-producers --topic orders --partition 0
      kt transactions find-hanging --topic orders --max-transaction-timeout 15
      kt transactions abort --topic orders --partition 0 --start-offset 1200

    Exit codes: 0 ok, 1 the operation failed (unknown transactional id, broker
    error, unreachable cluster) or find-hanging found some, 2 usage error.
    """


def _listing_json(t: TransactionListing) -> dict[str, Any]:
    return {"transactionalId": t.transactional_id, "coordinator": t.coordinator,
            "producerId": t.producer_id, "transactionState": t.state}  # fmt: skip


@transactions.command("list")
@wire_options
@click.option("--duration-filter", type=int, default=None, metavar="MS",
              help="Only transactions running longer than this (ms); < 0: all.")  # fmt: skip
@click.option("--json", "as_json", is_flag=True, help="One JSON object per line (NDJSON).")
@handle_errors
def list_cmd(wire: Wire, duration_filter: int | None, as_json: bool) -> None:
    """List the transactions of every broker: TransactionalId Coordinator
    ProducerId TransactionState."""

    async def go(c: KafkaClient) -> list[TransactionListing]:
        return await list_transactions(c, duration_ms=-1 if duration_filter is None
                                       else duration_filter)  # fmt: skip

    found = wire.run(go)
    if as_json:
        for t in found:
            emit_json(_listing_json(t))
        return
    render_table(["TransactionalId", "Coordinator", "ProducerId", "TransactionState"],
                 [[t.transactional_id, t.coordinator, t.producer_id, t.state]
                  for t in found])  # fmt: skip


def _description_json(d: TransactionDescription, now: int) -> dict[str, Any]:
    return {
        "coordinatorId": d.coordinator, "transactionalId": d.transactional_id,
        "producerId": d.producer_id, "producerEpoch": d.producer_epoch,
        "transactionState": d.state, "transactionTimeoutMs": d.timeout_ms,
        "currentTransactionStartTimeMs": d.start_ms if d.start_ms >= 0 else None,
        "transactionDurationMs": now - d.start_ms if d.start_ms >= 0 else None,
        "topicPartitions": [f"{t}-{p}" for t, p in d.partitions],
    }  # fmt: skip


@transactions.command()
@wire_options
@click.option("--transactional-id", required=True, help="The transactional id.")
@click.option("--json", "as_json", is_flag=True, help="One JSON object.")
@handle_errors
def describe(wire: Wire, transactional_id: str, as_json: bool) -> None:
    """Describe the state of a transactional id at its coordinator."""

    async def go(c: KafkaClient) -> TransactionDescription:
        return await describe_transaction(c, transactional_id)

    d = wire.run(go)
    now = int(time.time() * 1000)
    if as_json:
        emit_json(_description_json(d, now))
        return
    start = str(d.start_ms) if d.start_ms >= 0 else "None"
    duration = str(now - d.start_ms) if d.start_ms >= 0 else "None"
    render_table(
        ["CoordinatorId", "TransactionalId", "ProducerId", "ProducerEpoch", "TransactionState",
         "TransactionTimeoutMs", "CurrentTransactionStartTimeMs", "TransactionDurationMs",
         "TopicPartitions"],
        [[d.coordinator, d.transactional_id, d.producer_id, d.producer_epoch, d.state,
          d.timeout_ms, start, duration, ",".join(f"{t}-{p}" for t, p in d.partitions)]],
    )  # fmt: skip


def _producer_json(tp: tuple[str, int], s: ProducerState) -> dict[str, Any]:
    return {
        "topic": tp[0], "partition": tp[1], "producerId": s.producer_id,
        "producerEpoch": s.producer_epoch,
        "latestCoordinatorEpoch": s.coordinator_epoch if s.coordinator_epoch >= 0 else None,
        "lastSequence": s.last_sequence, "lastTimestamp": s.last_timestamp,
        "currentTransactionStartOffset": (
            s.current_txn_start_offset if s.current_txn_start_offset >= 0 else None
        ),
    }  # fmt: skip


@transactions.command("describe-producers")
@wire_options
@click.option("--topic", required=True, help="Topic name.")
@click.option("--partition", required=True, type=click.IntRange(min=0), help="Partition number.")
@click.option("--broker-id", type=int, default=None,
              help="The replica to ask (default: the leader).")  # fmt: skip
@click.option("--json", "as_json", is_flag=True, help="One JSON object per line (NDJSON).")
@handle_errors
def describe_producers_cmd(
    wire: Wire, topic: str, partition: int, broker_id: int | None, as_json: bool
) -> None:
    """The active producers of a partition: ProducerId ProducerEpoch
    LatestCoordinatorEpoch LastSequence LastTimestamp CurrentTransactionStartOffset."""

    async def go(c: KafkaClient) -> list[ProducerState]:
        return (await describe_producers(c, [(topic, partition)], broker_id))[(topic, partition)]

    states = wire.run(go)
    if as_json:
        for s in states:
            emit_json(_producer_json((topic, partition), s))
        return

    def none(v: int) -> str:
        return str(v) if v >= 0 else "None"

    render_table(
        ["ProducerId", "ProducerEpoch", "LatestCoordinatorEpoch", "LastSequence",
         "LastTimestamp", "CurrentTransactionStartOffset"],
        [[s.producer_id, s.producer_epoch, none(s.coordinator_epoch), s.last_sequence,
          s.last_timestamp, none(s.current_txn_start_offset)] for s in states],
    )  # fmt: skip


@transactions.command()
@wire_options
@click.option("--topic", required=True, help="Topic name.")
@click.option("--partition", required=True, type=click.IntRange(min=0), help="Partition number.")
@click.option(
    "--start-offset",
    type=int,
    default=None,
    help="The offset where the transaction to abort starts.",
)
@click.option("--producer-id", type=int, default=None, help="Producer id (without --start-offset).")
@click.option("--producer-epoch", type=int, default=None, help="Producer epoch.")
@click.option("--coordinator-epoch", type=int, default=None, help="Coordinator epoch.")
@handle_errors
def abort(
    wire: Wire, topic: str, partition: int, start_offset: int | None, producer_id: int | None,
    producer_epoch: int | None, coordinator_epoch: int | None,
) -> None:  # fmt: skip
    """Abort a transaction on one partition: an ABORT marker is written there for
    its producer (as Admin.abortTransaction). Name the transaction by the offset
    where it starts (found with DescribeProducers), or by producer id, epoch and
    coordinator epoch."""
    given = [v is not None for v in (producer_id, producer_epoch, coordinator_epoch)]
    if start_offset is not None and any(given):
        usage_error("give either --start-offset or --producer-id/--producer-epoch/"
                    "--coordinator-epoch, not both")  # fmt: skip
    if start_offset is None and not all(given):
        usage_error("--start-offset, or all of --producer-id, --producer-epoch and "
                    "--coordinator-epoch, are required")  # fmt: skip

    async def go(c: KafkaClient) -> tuple[int, int, int]:
        if start_offset is None:
            assert producer_id is not None and producer_epoch is not None
            assert coordinator_epoch is not None
            spec = (producer_id, producer_epoch, coordinator_epoch)
        else:
            states = (await describe_producers(c, [(topic, partition)]))[(topic, partition)]
            match = [s for s in states if s.current_txn_start_offset == start_offset]
            if not match:
                fail(f"Could not find any open transactions starting at offset {start_offset} "
                     f"on partition {topic}-{partition}")  # fmt: skip
            s = match[0]
            spec = (s.producer_id, s.producer_epoch, max(s.coordinator_epoch, 0))
        await abort_transaction(c, topic, partition, *spec)
        return spec

    pid, epoch, cepoch = wire.run(go)
    click.echo(f"Aborted the transaction of producer {pid} (epoch {epoch}, coordinator epoch "
               f"{cepoch}) on {topic}-{partition}")  # fmt: skip


def _hanging_row(tp: tuple[str, int], s: ProducerState, now: int) -> list[Any]:
    return [tp[0], tp[1], s.producer_id, s.producer_epoch, s.coordinator_epoch,
            s.current_txn_start_offset, s.last_timestamp,
            (now - s.last_timestamp) // 60_000]  # fmt: skip


@transactions.command("find-hanging")
@wire_options
@click.option(
    "--broker-id",
    type=int,
    default=None,
    help="Search the partitions with a replica on this broker.",
)
@click.option("--topic", default=None, help="Only this topic (required with --partition).")
@click.option("--partition", type=click.IntRange(min=0), default=None, help="Only this partition.")
@click.option(
    "--max-transaction-timeout",
    type=click.IntRange(min=0),
    default=15,
    show_default=True,
    metavar="MINUTES",
    help="Only transactions open longer than this (the largest transaction.timeout.ms "
    "of your producers).",
)
@click.option(
    "--include-tracked",
    is_flag=True,
    help="Also report open transactions their coordinator still tracks (it aborts them "
    "at their timeout), with when (beyond Kafka's tool).",
)
@click.option("--json", "as_json", is_flag=True, help="One JSON object per line (NDJSON).")
@handle_errors
def find_hanging(
    wire: Wire, broker_id: int | None, topic: str | None, partition: int | None,
    max_transaction_timeout: int, include_tracked: bool, as_json: bool,
) -> None:  # fmt: skip
    """Find hanging transactions: open on a partition (DescribeProducers) for longer
    than --max-transaction-timeout, and unknown to their coordinator — no
    transactional id has the producer id, or its current transaction does not
    include the partition — so no marker will ever end them and they hold back
    READ_COMMITTED consumers. Columns: Topic Partition ProducerId ProducerEpoch
    CoordinatorEpoch StartOffset LastTimestamp Duration(min). Exit 1 when any are
    found; `kt transactions abort` ends them.

    --include-tracked also reports, beyond Kafka's tool, the open transactions
    their coordinator still tracks (a producer that died mid-transaction): they
    hold back READ_COMMITTED consumers too, until the coordinator aborts them at
    their timeout. A last column, Coordinator, says "unknown" (hanging) or when the
    coordinator aborts it (JSON: trackedByCoordinator, coordinatorAbortsAtMs)."""
    if topic is None and broker_id is None:
        usage_error("find-hanging requires either --topic or --broker-id to limit the scope of "
                    "the search")  # fmt: skip
    if partition is not None and topic is None:
        usage_error("--partition requires --topic")
    max_ms = max_transaction_timeout * 60_000

    async def go(
        c: KafkaClient,
    ) -> list[tuple[tuple[str, int], ProducerState, TransactionDescription | None]]:
        if topic is not None and partition is not None:
            tps = [(topic, partition)]
        else:
            topics = [topic] if topic is not None else sorted(await c.list_topics())
            info = await c.describe_topics(topics)
            tps = [(t, p.partition) for t in topics for p in info[t].partitions.values()
                   if broker_id is None or broker_id in p.replicas]  # fmt: skip
        if not tps:
            return []
        producers = await describe_producers(c, tps, broker_id)
        now = int(time.time() * 1000)
        candidates = [(tp, s) for tp, states in producers.items() for s in states
                      if s.current_txn_start_offset >= 0
                      and now - s.last_timestamp > max_ms]  # fmt: skip
        if not candidates:
            return []
        pids = {s.producer_id for _, s in candidates}
        ids = {t.producer_id: t.transactional_id
               for t in await list_transactions(c, producer_ids=sorted(pids))
               if t.producer_id in pids}  # fmt: skip
        described: dict[str, TransactionDescription | None] = {}
        for tid in set(ids.values()):
            try:
                described[tid] = await describe_transaction(c, tid)
            except KafkaError as exc:
                if exc.code != ErrorCode.TRANSACTIONAL_ID_NOT_FOUND:
                    raise
                described[tid] = None
        found: list[tuple[tuple[str, int], ProducerState, TransactionDescription | None]] = []
        for tp, s in candidates:
            owner = ids.get(s.producer_id)
            d = described.get(owner) if owner is not None else None
            if d is None or tp not in d.partitions:
                found.append((tp, s, None))  # hanging: no marker will ever come
            elif include_tracked:
                found.append((tp, s, d))
        return found

    found = wire.run(go)
    now = int(time.time() * 1000)
    if as_json:
        for tp, s, d in found:
            row = _producer_json(tp, s)
            row["durationMinutes"] = (now - s.last_timestamp) // 60_000
            if include_tracked:
                row["trackedByCoordinator"] = d is not None
                row["coordinatorAbortsAtMs"] = _aborts_at(d)
            emit_json(row)
    else:
        headers = ["Topic", "Partition", "ProducerId", "ProducerEpoch", "CoordinatorEpoch",
                   "StartOffset", "LastTimestamp", "Duration(min)"]  # fmt: skip
        rows = [_hanging_row(tp, s, now) for tp, s, _ in found]
        if include_tracked:
            headers.append("Coordinator")
            for cells, (_, _, d) in zip(rows, found, strict=True):
                at = _aborts_at(d)
                cells.append("unknown" if at is None else f"aborts in {max(0, at - now) // 1000}s")
        render_table(headers, rows)
    if found:
        raise SystemExit(1)


def _aborts_at(d: TransactionDescription | None) -> int | None:
    """When the coordinator aborts a transaction it tracks (its start + timeout)."""
    if d is None or d.start_ms < 0:
        return None
    return d.start_ms + d.timeout_ms
