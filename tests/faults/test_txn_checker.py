"""The checker's transaction rules (`aborted-read`, `txn-partial`) on hand-made
histories: each fails on a history violating it and passes on a valid one, and
(hypothesis) any history built from a log that honours transactions passes."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from .checker import check, check_transactions, format_table, history_slice


class T:
    """Builds a transactional history by hand: values `t{n}-{k}` on partition k % 3."""

    def __init__(self) -> None:
        self.events: list[dict[str, Any]] = []
        self.log: dict[int, list[str]] = {0: [], 1: [], 2: []}  # what a read returns

    def add(self, proc: str, f: str, type_: str, **kw: Any) -> T:
        self.events.append(
            {"i": len(self.events), "t": 0.0, "proc": proc, "f": f, "type": type_, **kw}
        )
        return self

    def txn(self, n: int, size: int, end: str, *, refused: int | None = None) -> list[str]:
        """Transaction n of `size` values; `end` is committed, aborted, indeterminate
        (the commit's outcome unknown) or open (never ended). Returns its values."""
        self.add("p", "txn-begin", "ok", txn=n)
        vals = []
        for k in range(size):
            v = f"t{n}-{k}"
            self.add("p", "txn-send", "invoke", txn=n, value=v, partition=k % 3)
            if k == refused:
                self.add("p", "txn-send", "fail", txn=n, value=v, error="BufferError")
            else:
                vals.append(v)
        if end == "open":
            return vals
        action = "abort" if end == "aborted" else "commit"
        self.add("p", "txn-end", "invoke", txn=n, action=action)
        if end == "indeterminate":
            self.add("p", "txn-end", "info", txn=n, action=action, error="_TIMED_OUT")
        else:
            self.add("p", "txn-end", "ok", txn=n, outcome=end)
        return vals

    def records(self, values: list[str]) -> list[list[Any]]:
        out = []
        for v in values:
            p = int(v.rsplit("-", 1)[1]) % 3
            out.append([p, len(self.log[p]), v])
            self.log[p].append(v)
        return out

    def poll(self, values: list[str]) -> T:
        return self.add("c", "txn-poll", "ok", records=self.records(values))

    def final(self, values: list[str]) -> T:
        recs = self.records(values)
        return self.add("final", "txn-final-read", "ok", records=recs, end={})


def kinds(t: T) -> list[str]:
    return [a.kind for a in check_transactions(t.events)[0]]


def test_valid_history_passes() -> None:
    t = T()
    a = t.txn(1, 4, "committed")
    t.txn(2, 4, "aborted")
    c = t.txn(3, 4, "committed")
    t.poll(a)
    t.final(a + c)
    anomalies, counts = check_transactions(t.events)
    assert anomalies == []
    assert counts == {"committed": 2, "aborted": 1}
    v = check(t.events)  # the whole checker: no other rule looks at txn-* events
    assert v.valid and v.transactions == counts
    assert "transactions: aborted 1, committed 2" in format_table(v)


def test_aborted_value_read_in_a_poll() -> None:
    t = T()
    a = t.txn(1, 3, "aborted")
    t.poll(a[:1])
    t.final([])
    assert kinds(t) == ["aborted-read"]
    (an,) = check_transactions(t.events)[0]
    assert "'t1-0' of aborted transaction 1" in an.message and "a poll" in an.message
    kinds_in_slice = [(e["f"], e["type"]) for e in history_slice(t.events, an)]
    assert kinds_in_slice == [("txn-send", "invoke"), ("txn-end", "ok"), ("txn-poll", "ok")]


def test_aborted_value_in_the_final_read_and_the_table_row() -> None:
    t = T()
    a = t.txn(1, 3, "aborted")
    t.final(a)
    v = check(t.events)
    assert [x.kind for x in v.anomalies] == ["aborted-read"]  # one per transaction and read
    assert "the final read" in v.anomalies[0].message
    row = next(line for line in format_table(v).splitlines() if line.startswith("aborted-read"))
    assert " 1 " in row and "INVALID" in format_table(v)


def test_committed_transaction_missing_a_value() -> None:
    t = T()
    a = t.txn(1, 4, "committed")
    t.final(a[:3])
    assert kinds(t) == ["txn-partial"]
    assert "3 of 4" in check_transactions(t.events)[0][0].message


def test_committed_transaction_missing_entirely() -> None:
    t = T()
    t.txn(1, 4, "committed")
    t.final([])
    assert kinds(t) == ["txn-partial"]


def test_indeterminate_transaction_all_or_nothing() -> None:
    for present, ok in ((4, True), (0, True), (2, False)):
        t = T()
        a = t.txn(1, 4, "indeterminate")
        t.txn(2, 2, "open")  # begun, never ended: indeterminate as well
        t.final(a[:present])
        assert (kinds(t) == []) is ok, (present, kinds(t))
    t = T()
    b = t.txn(2, 3, "open")
    t.final(b[:1])
    assert kinds(t) == ["txn-partial"]


def test_refused_value_is_not_expected() -> None:
    t = T()
    a = t.txn(1, 3, "committed", refused=1)  # produce() refused t1-1: never sent
    t.final(a)
    assert kinds(t) == []


def test_no_final_read_checks_only_the_polls() -> None:
    t = T()
    t.txn(1, 3, "committed")
    assert kinds(t) == []


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.integers(1, 5), st.sampled_from(["committed", "aborted", "indeterminate", "open"])
        ),
        max_size=12,
    ),
    st.data(),
)
def test_any_history_honouring_transactions_passes(
    txns: list[tuple[int, str]], data: st.DataObject
) -> None:
    # a log where committed transactions are whole, aborted ones invisible and
    # indeterminate ones whole or absent; polls see any prefix of what is visible
    t = T()
    visible: list[str] = []
    for n, (size, end) in enumerate(txns, 1):
        vals = t.txn(n, size, end)
        if end == "committed" or (end in ("indeterminate", "open") and data.draw(st.booleans())):
            visible += vals
    cut = data.draw(st.integers(0, len(visible)))
    if cut:
        t.poll(visible[:cut])
    t.log = {0: [], 1: [], 2: []}
    t.final(visible)
    assert kinds(t) == []


def test_counts_transactions_open_when_a_fault_began() -> None:
    t = T()
    t.txn(1, 2, "committed")
    t.add("nemesis", "start", "info", fault="kill-leader", broker=1)  # between transactions
    t.add("p", "txn-begin", "ok", txn=2)
    t.add("nemesis", "start", "info", fault="kill-leader", broker=2)  # mid-transaction
    t.add("p", "txn-end", "ok", txn=2, outcome="aborted")
    assert check_transactions(t.events)[1]["open when a fault began"] == 1
