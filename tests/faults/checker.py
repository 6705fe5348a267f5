"""An independent checker for histories of a Kafka produce/consume workload under faults.

It knows nothing of kt's broker: it reads a history (a list of event dicts, as written
by `history.History`, one JSON object a line) and decides, like Jepsen's Kafka
workload, whether what clients were told agrees with what they could read.

Events (every one has `i` (its index), `t` (seconds since the run began) and `proc`):

- `{"f": "send", "type": "invoke", "value": v, "partition": p, "seq": n}`
- `{"f": "send", "type": "ok", "value": v, "partition": p, "offset": o}` (acknowledged;
  `offset` null when the client was not told where)
- `{"f": "send", "type": "fail" | "info", "value": v, "error": "..."}` (not acknowledged:
  `fail` when the client says nothing was written, `info` when it cannot know)
- `{"f": "poll", "type": "ok", "records": [[p, o, v], ...]}` (a consumer's reads)
- `{"f": "final-read", "type": "ok", "records": [...], "end": {p: end_offset}}` (after
  every fault is healed: each partition read from its start to its end)
- `{"f": "commit", "type": "ok", "group": g, "offsets": {p: o}}` (a commit the group
  coordinator acknowledged)
- `{"f": "committed", "type": "ok", "group": g, "offsets": {p: o}}` (offsets read back)
- `{"f": "log-batches", "type": "ok", "batches": {p: [[first, last, pid, epoch], ...]}}`
  (optional, read from a replica's log files at the end: which producer id and epoch
  wrote each offset)
- `{"proc": "nemesis", ...}` (faults; only shown in the slices)

Anomaly kinds (`KINDS`), each with the events that show it:

- `lost`: an acknowledged value is not in the final read at its acknowledged offset;
- `inconsistent-offset`: one (partition, offset) seen holding two different values
  (acknowledgements and reads alike);
- `duplicate`: a value seen at two different (partition, offset) positions; the
  producers are idempotent, so any value (acknowledged or not) must appear at most once
  within one producer id and epoch. A broker can only deduplicate retries within an
  epoch (Kafka's too): when the log batches show the copies were written under
  different (producer id, epoch) pairs, the client re-sent the value after bumping its
  own epoch (librdkafka does so after OUT_OF_ORDER_SEQUENCE on a later in-flight
  request during a leader change, confluentinc/librdkafka#4953). Those are counted as
  `resent`, not anomalies;
- `reorder`: two values of one producer in one partition in the wrong order (by the
  producer's sequence) among acknowledgements or in the final read;
- `phantom`: a read value that no producer ever sent;
- `offset-regression`: a group's committed offset for a partition went backwards (a
  commit lower than an earlier acknowledged commit, or a read-back lower than the
  highest commit acknowledged before the read began).

Transactions (`txn-*` events, written by `txn_workload`; see `check_transactions`):

- `aborted-read`: a value of a transaction whose abort the coordinator acknowledged was
  read by a READ_COMMITTED consumer (while faults ran, or in the final read);
- `txn-partial`: in the final READ_COMMITTED read, a transaction whose commit was
  acknowledged lacks some of its values, or an indeterminate one (its outcome unknown
  to the client) shows some of its values but not all.
"""

from __future__ import annotations

import bisect
import itertools
from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

KINDS = (
    "lost",
    "inconsistent-offset",
    "duplicate",
    "reorder",
    "phantom",
    "offset-regression",
    # the transactional workload's checks (`check_transactions`)
    "aborted-read",
    "txn-partial",
)

Event = dict[str, Any]
Position = tuple[int, int]  # (partition, offset)


@dataclass
class Anomaly:
    """One violation: its kind, a one-line description and the event indices showing it."""

    kind: str
    message: str
    events: list[int] = field(default_factory=list)


@dataclass
class Verdict:
    """The checker's result: counts and every anomaly found."""

    acknowledged: int
    unacknowledged: int
    read_values: int
    anomalies: list[Anomaly]
    #: values found twice, written under different producer ids or epochs (the
    #: client re-sent them after bumping its epoch; see `duplicate`)
    resent: list[Anomaly] = field(default_factory=list)
    #: transactions by outcome (committed, aborted, indeterminate), when any ran, and
    #: how many were open when a fault began
    transactions: dict[str, int] = field(default_factory=dict)

    @property
    def valid(self) -> bool:
        """True when no anomaly was found."""
        return not self.anomalies

    def by_kind(self) -> dict[str, list[Anomaly]]:
        """Anomalies grouped by kind (every kind present, possibly empty)."""
        out: dict[str, list[Anomaly]] = {k: [] for k in KINDS}
        for a in self.anomalies:
            out.setdefault(a.kind, []).append(a)
        return out


def _records(ev: Event) -> Iterable[tuple[int, int, str]]:
    for p, o, v in ev.get("records", ()):
        yield int(p), int(o), str(v)


def check(history: Sequence[Event]) -> Verdict:
    """Check a history; see the module docstring for what counts as an anomaly."""
    anomalies: list[Anomaly] = []
    # who sent what: value -> (proc, seq, index of the invoke)
    sent: dict[str, tuple[str, int, int]] = {}
    acked: dict[str, tuple[Position, int]] = {}  # value -> (position, index of the ok)
    not_acked: dict[str, int] = {}  # value -> index of the fail/info
    acked_anywhere: dict[str, tuple[int, int]] = {}  # value -> (partition, index of the ok)
    ack_dups: list[tuple[str, Position, Position, list[int]]] = []
    for ev in history:
        if ev.get("f") != "send":
            continue
        v = str(ev["value"])
        if ev["type"] == "invoke":
            sent[v] = (str(ev["proc"]), int(ev.get("seq", 0)), int(ev["i"]))
        elif ev["type"] == "ok" and ev.get("offset") is None:
            # acknowledged without an offset (librdkafka does so for a retried batch
            # the broker calls a duplicate): it must be readable, at some offset
            acked_anywhere.setdefault(v, (int(ev["partition"]), int(ev["i"])))
        elif ev["type"] == "ok":
            pos = (int(ev["partition"]), int(ev["offset"]))
            if v in acked and acked[v][0] != pos:
                ack_dups.append((v, acked[v][0], pos, [acked[v][1], int(ev["i"])]))
            acked.setdefault(v, (pos, int(ev["i"])))
        else:
            not_acked.setdefault(v, int(ev["i"]))

    writer = _writers(history)
    for v, a, b, evs in ack_dups:
        ids = (writer(*a), writer(*b))
        if ids[0] is None or ids[1] is None or ids[0] == ids[1]:
            anomalies.append(
                Anomaly("duplicate", f"value {v!r} acknowledged at {a} and at {b}", evs)
            )

    # every observation of a position: acknowledgements and reads
    at: dict[Position, dict[str, list[int]]] = defaultdict(lambda: defaultdict(list))
    where: dict[str, dict[Position, list[int]]] = defaultdict(lambda: defaultdict(list))
    for v, (pos, i) in acked.items():
        at[pos][v].append(i)
        where[v][pos].append(i)
    final: Event | None = None
    for ev in history:
        if ev.get("f") in ("poll", "final-read") and ev.get("type") == "ok":
            if ev["f"] == "final-read":
                final = ev
            for p, o, v in _records(ev):
                at[(p, o)][v].append(int(ev["i"]))
                where[v][(p, o)].append(int(ev["i"]))

    for pos, values in sorted(at.items()):
        if len(values) > 1:
            shown = ", ".join(f"{v!r}" for v in sorted(values))
            evs = sorted({i for idx in values.values() for i in idx[:2]})
            anomalies.append(
                Anomaly(
                    "inconsistent-offset", f"partition {pos[0]} offset {pos[1]} holds {shown}", evs
                )
            )
    resent: list[Anomaly] = []
    read_values = 0
    for v, positions in sorted(where.items()):
        read_values += 1
        if v not in sent:
            evs = sorted({i for idx in positions.values() for i in idx[:1]})
            anomalies.append(Anomaly("phantom", f"value {v!r} read but never sent", evs))
        if len(positions) > 1:
            shown = ", ".join(f"p{p}@{o}" for p, o in sorted(positions))
            evs = sorted({i for idx in positions.values() for i in idx[:2]})
            if v in sent:
                evs = [sent[v][2], *evs]
            status = "acknowledged" if v in acked else "unacknowledged"
            ids = [writer(p, o) for p, o in sorted(positions)]
            if all(ids) and len(set(ids)) == len(ids):
                who = ", ".join(f"pid {i[0]} epoch {i[1]}" for i in ids if i)
                resent.append(Anomaly("resent", f"{status} value {v!r} at {shown} ({who})", evs))
                continue
            anomalies.append(Anomaly("duplicate", f"{status} value {v!r} at {shown}", evs))

    # lost: judged against the final read, taken after every fault healed; an
    # acknowledged write must survive every fault, so missing there means lost
    if final is not None:
        final_at = {(p, o): v for p, o, v in _records(final)}
        ends = {int(k): int(e) for k, e in final.get("end", {}).items()}
        for v, (pos, i) in sorted(acked.items(), key=lambda kv: kv[1][0]):
            got = final_at.get(pos)
            if got == v:
                continue
            p, o = pos
            if got is not None:
                why = f"offset holds {got!r}"
            elif o >= ends.get(p, 0):
                why = f"the log ends at {ends.get(p, 0)}"
            else:
                why = "offset missing from the read"
            anomalies.append(
                Anomaly(
                    "lost",
                    f"value {v!r} acknowledged at p{p}@{o}: {why}",
                    [sent[v][2], i, int(final["i"])] if v in sent else [i, int(final["i"])],
                )
            )

        read_in: dict[str, set[int]] = defaultdict(set)
        for p, _o, v in _records(final):
            read_in[v].add(p)
        for v, (p, i) in sorted(acked_anywhere.items()):
            if v not in acked and p not in read_in.get(v, ()):
                anomalies.append(
                    Anomaly(
                        "lost",
                        f"value {v!r} acknowledged (without an offset) in partition {p}: "
                        "not in the final read",
                        [sent[v][2], i, int(final["i"])] if v in sent else [i, int(final["i"])],
                    )
                )

    anomalies += _check_order(sent, acked, final)
    anomalies += _check_commits(history)
    txn_anomalies, txn_counts = check_transactions(history)
    anomalies += txn_anomalies
    n_acked = len(set(acked) | set(acked_anywhere))
    unacked = set(not_acked) - set(acked) - set(acked_anywhere)
    return Verdict(n_acked, len(unacked), read_values, anomalies, resent, txn_counts)


def _writers(history: Sequence[Event]) -> Callable[[int, int], tuple[int, int] | None]:
    """(partition, offset) -> (producer id, epoch) of the batch holding it, from the
    last `log-batches` event (None where unknown)."""
    batches: dict[int, list[tuple[int, int, int, int]]] = {}
    for ev in history:
        if ev.get("f") == "log-batches" and ev.get("type") == "ok":
            batches = {int(p): sorted(tuple(b) for b in bs) for p, bs in ev["batches"].items()}
    firsts = {p: [b[0] for b in bs] for p, bs in batches.items()}

    def writer(p: int, o: int) -> tuple[int, int] | None:
        bs = batches.get(p)
        if not bs:
            return None
        k = bisect.bisect_right(firsts[p], o) - 1
        if k < 0 or not bs[k][0] <= o <= bs[k][1]:
            return None
        return bs[k][2], bs[k][3]

    return writer


def _check_order(
    sent: dict[str, tuple[str, int, int]],
    acked: dict[str, tuple[Position, int]],
    final: Event | None,
) -> list[Anomaly]:
    out: list[Anomaly] = []
    # by acknowledgement: (proc, partition) -> [(offset, seq, value, index)]
    streams: dict[tuple[str, int], list[tuple[int, int, str, int]]] = defaultdict(list)
    for v, ((p, o), i) in acked.items():
        if v in sent:
            proc, seq, _ = sent[v]
            streams[(proc, p)].append((o, seq, v, i))
    if final is not None:
        for p, o, v in sorted(_records(final)):
            if v in sent and v not in acked:
                proc, seq, _ = sent[v]
                streams[(proc, p)].append((o, seq, v, int(final["i"])))
    for (proc, p), entries in sorted(streams.items()):
        entries.sort()
        for a, b in itertools.pairwise(entries):
            if b[1] < a[1]:
                out.append(
                    Anomaly(
                        "reorder",
                        f"{proc} in partition {p}: seq {b[1]} ({b[2]!r}) at offset {b[0]} "
                        f"after seq {a[1]} ({a[2]!r}) at offset {a[0]}",
                        sorted({a[3], b[3], sent[a[2]][2], sent[b[2]][2]}),
                    )
                )
    return out


def _check_commits(history: Sequence[Event]) -> list[Anomaly]:
    out: list[Anomaly] = []
    # (group, partition) -> (highest acknowledged commit, its event index)
    high: dict[tuple[str, int], tuple[int, int]] = {}
    # reads compare against commits acknowledged before the read began: its invoke
    began: dict[str, dict[tuple[str, int], tuple[int, int]]] = {}
    for ev in history:
        if ev.get("f") not in ("commit", "committed"):
            continue
        proc = str(ev.get("proc"))
        if ev["type"] == "invoke" and ev["f"] == "committed":
            began[proc] = dict(high)
            continue
        if ev["type"] != "ok":
            continue
        group = str(ev["group"])
        for k, o in ev.get("offsets", {}).items():
            key, off = (group, int(k)), int(o)
            if off < 0:
                continue  # nothing committed yet
            if ev["f"] == "commit":
                prev = high.get(key)
                if prev is not None and off < prev[0]:
                    out.append(
                        Anomaly(
                            "offset-regression",
                            f"group {group} partition {k}: commit {off} after commit {prev[0]}",
                            [prev[1], int(ev["i"])],
                        )
                    )
                if prev is None or off >= prev[0]:
                    high[key] = (off, int(ev["i"]))
            else:
                floor = began.get(proc, high).get(key)
                if floor is not None and off < floor[0]:
                    out.append(
                        Anomaly(
                            "offset-regression",
                            f"group {group} partition {k}: read back {off} after commit "
                            f"{floor[0]} was acknowledged",
                            [floor[1], int(ev["i"])],
                        )
                    )
    return out


def history_slice(
    history: Sequence[Event], anomaly: Anomaly, *, max_records: int = 3
) -> list[Event]:
    """The smallest slice showing an anomaly: its events (reads cut down to the
    positions concerned and their neighbours) plus the nemesis events between them."""
    by_index = {int(ev["i"]): ev for ev in history}
    picked = [by_index[i] for i in anomaly.events if i in by_index]
    if not picked:
        return []
    lo, hi = min(int(e["i"]) for e in picked), max(int(e["i"]) for e in picked)
    values = set()
    positions = set()
    for ev in picked:
        if "value" in ev:
            values.add(str(ev["value"]))
        if ev.get("f") == "send" and ev.get("type") == "ok":
            positions.add((int(ev["partition"]), int(ev["offset"])))
    for token in anomaly.message.replace(",", " ").split():
        if token.startswith("'") and token.endswith("'"):
            values.add(token.strip("'"))
    out = []
    for ev in history:
        i = int(ev["i"])
        if i in anomaly.events:
            if "records" in ev:
                keep = [
                    r
                    for r in ev["records"]
                    if str(r[2]) in values
                    or any(r[0] == p and abs(int(r[1]) - o) <= 1 for p, o in positions)
                ][: max_records * 3]
                ev = {**ev, "records": keep}
            out.append(ev)
        elif ev.get("proc") == "nemesis" and lo <= i <= hi:
            out.append(ev)
    return out


def format_table(verdict: Verdict) -> str:
    """The verdict table: one row per anomaly kind, with its count and first example."""
    rows = [("check", "count", "first example")]
    for kind, found in verdict.by_kind().items():
        rows.append((kind, str(len(found)), found[0].message if found else "ok"))
    w0 = max(len(r[0]) for r in rows)
    w1 = max(len(r[1]) for r in rows)
    lines = [f"{a:<{w0}}  {b:>{w1}}  {c}" for a, b, c in rows]
    if verdict.resent:
        lines.append(
            f"{len(verdict.resent)} values re-sent by a client under a new producer epoch "
            f"(not deduplicable by any broker), e.g. {verdict.resent[0].message}"
        )
    if verdict.transactions:
        lines.append(
            "transactions: "
            + ", ".join(f"{k} {n}" for k, n in sorted(verdict.transactions.items()))
        )
    lines.append(
        f"acknowledged {verdict.acknowledged}, unacknowledged {verdict.unacknowledged}, "
        f"values read {verdict.read_values}: {'VALID' if verdict.valid else 'INVALID'}"
    )
    return "\n".join(lines)


# --- transactions -------------------------------------------------------------------------


def check_transactions(history: Sequence[Event]) -> tuple[list[Anomaly], dict[str, int]]:
    """The transactional workload's rules: `aborted-read` and `txn-partial` (see the
    module docstring); also the transactions counted by outcome."""
    values: dict[int, dict[str, int]] = defaultdict(dict)  # txn -> value -> invoke index
    refused: set[str] = set()  # produce() refused: never part of the transaction
    outcome: dict[int, tuple[str, int]] = {}  # txn -> (committed/aborted/unknown, index)
    final: Event | None = None
    reads: list[Event] = []
    open_txn: int | None = None
    struck: set[int] = set()  # transactions open when a fault began
    for ev in history:
        f, type_ = ev.get("f"), ev.get("type")
        if f == "txn-begin" and type_ == "ok":
            open_txn = int(ev["txn"])
        elif f == "txn-end" and type_ != "invoke":
            open_txn = None
        elif ev.get("proc") == "nemesis" and f in ("start", "restart") and open_txn:
            struck.add(open_txn)
        if f == "txn-send":
            if type_ == "invoke":
                values[int(ev["txn"])][str(ev["value"])] = int(ev["i"])
            else:
                refused.add(str(ev["value"]))
        elif f == "txn-end" and type_ == "ok":
            outcome[int(ev["txn"])] = (str(ev["outcome"]), int(ev["i"]))
        elif f == "txn-end" and type_ in ("info", "fail"):
            outcome.setdefault(int(ev["txn"]), ("indeterminate", int(ev["i"])))
        elif f == "txn-poll" and type_ == "ok":
            reads.append(ev)
        elif f == "txn-final-read" and type_ == "ok":
            final = ev
            reads.append(ev)
    # a transaction begun but never ended (the run stopped) is indeterminate too
    for n, vals in values.items():
        if n not in outcome:
            outcome[n] = ("indeterminate", max(vals.values()))
    txn_of = {v: n for n, vals in values.items() for v in vals if v not in refused}
    out: list[Anomaly] = []

    for ev in reads:
        seen: set[int] = set()
        for p, o, v in _records(ev):
            txn = txn_of.get(v)
            if txn is None or txn in seen or outcome[txn][0] != "aborted":
                continue
            n = txn
            seen.add(n)  # one anomaly per transaction and read
            where = "the final read" if ev["f"] == "txn-final-read" else "a poll"
            out.append(
                Anomaly(
                    "aborted-read",
                    f"value {v!r} of aborted transaction {n} read at p{p}@{o} in {where}",
                    [values[n][v], outcome[n][1], int(ev["i"])],
                )
            )

    if final is not None:
        got = {v for _p, _o, v in _records(final)}
        for n, vals in sorted(values.items()):
            state, end_i = outcome[n]
            if state == "aborted":
                continue
            want = [v for v in vals if v not in refused]
            present = [v for v in want if v in got]
            missing = [v for v in want if v not in got]
            if not missing or (state != "committed" and not present):
                continue
            what = "committed" if state == "committed" else "indeterminate"
            out.append(
                Anomaly(
                    "txn-partial",
                    f"{what} transaction {n}: {len(present)} of {len(want)} values in the "
                    f"final read, missing {', '.join(repr(v) for v in missing)}",
                    sorted({values[n][missing[0]], end_i, int(final["i"])}),
                )
            )
    counts: dict[str, int] = defaultdict(int)
    for state, _ in outcome.values():
        counts[state] += 1
    if struck:
        counts["open when a fault began"] = len(struck)
    return out, dict(counts)
