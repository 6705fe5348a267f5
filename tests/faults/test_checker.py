"""The fault checker on hand-made histories: a clean one passes, each anomaly kind is
found, and (hypothesis) any history generated from a consistent log passes."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from .checker import check, format_table, history_slice


class H:
    """Builds a history by hand."""

    def __init__(self) -> None:
        self.events: list[dict[str, Any]] = []

    def add(self, proc: str, f: str, type_: str, **kw: Any) -> H:
        self.events.append(
            {"i": len(self.events), "t": 0.0, "proc": proc, "f": f, "type": type_, **kw}
        )
        return self

    def send(self, proc: str, seq: int, p: int, offset: int | None, **kw: Any) -> H:
        v = f"{proc}-{seq}"
        self.add(proc, "send", "invoke", value=v, partition=p, seq=seq)
        if offset is None:
            return self.add(proc, "send", "info", value=v, error="REQUEST_TIMED_OUT")
        return self.add(proc, "send", "ok", value=v, partition=p, offset=offset)

    def final(self, records: list[list[Any]], end: dict[str, int] | None = None) -> H:
        if end is None:
            end = {}
            for p, o, _ in records:
                end[str(p)] = max(end.get(str(p), 0), o + 1)
        return self.add("final", "final-read", "ok", records=records, end=end)


def kinds(h: H) -> set[str]:
    return {a.kind for a in check(h.events).anomalies}


def clean() -> H:
    h = H().send("a", 0, 0, 0).send("b", 0, 0, 1).send("a", 1, 0, 2).send("a", 2, 1, 0)
    h.add("c", "poll", "ok", records=[[0, 0, "a-0"], [0, 1, "b-0"]])
    h.add("c", "commit", "ok", group="g", offsets={"0": 2})
    h.add("c", "committed", "invoke", group="g")
    h.add("c", "committed", "ok", group="g", offsets={"0": 2})
    return h.final([[0, 0, "a-0"], [0, 1, "b-0"], [0, 2, "a-1"], [1, 0, "a-2"]])


def test_clean_history_passes() -> None:
    v = check(clean().events)
    assert v.valid, v.anomalies
    assert v.acknowledged == 4
    assert "VALID" in format_table(v)


def test_unacknowledged_value_present_once_or_absent_is_fine() -> None:
    h = H().send("a", 0, 0, 0).send("a", 1, 0, None).send("a", 2, 0, None)
    h.final([[0, 0, "a-0"], [0, 1, "a-1"]])
    assert check(h.events).valid


def test_lost_acknowledged_value() -> None:
    h = H().send("a", 0, 0, 0).send("a", 1, 0, 1).final([[0, 0, "a-0"]])
    v = check(h.events)
    assert [a.kind for a in v.anomalies] == ["lost"]
    assert "the log ends at 1" in v.anomalies[0].message
    assert "INVALID" in format_table(v)


def test_lost_when_offset_holds_another_value() -> None:
    h = H().send("a", 0, 0, 0).send("b", 0, 0, None).final([[0, 0, "b-0"]])
    assert {"lost", "inconsistent-offset"} <= kinds(h)


def test_acknowledged_without_an_offset_must_be_read_somewhere() -> None:
    h = H().send("a", 0, 0, 0)
    h.add("a", "send", "invoke", value="a-1", partition=0, seq=1)
    h.add("a", "send", "ok", value="a-1", partition=0, offset=None)
    h.add("a", "send", "invoke", value="a-2", partition=0, seq=2)
    h.add("a", "send", "ok", value="a-2", partition=0, offset=None)
    h.final([[0, 0, "a-0"], [0, 1, "a-2"]])
    v = check(h.events)
    assert [a.kind for a in v.anomalies] == ["lost"]
    assert "'a-1'" in v.anomalies[0].message
    assert v.acknowledged == 3


def test_inconsistent_offset_between_reads() -> None:
    h = H().send("a", 0, 0, None).send("b", 0, 0, None)
    h.add("c", "poll", "ok", records=[[0, 0, "a-0"]])
    h.final([[0, 0, "b-0"]])
    assert kinds(h) == {"inconsistent-offset"}


def test_duplicate_value_at_two_offsets() -> None:
    h = H().send("a", 0, 0, 0).final([[0, 0, "a-0"], [0, 1, "a-0"]])
    assert kinds(h) == {"duplicate"}


def test_unacknowledged_duplicate() -> None:
    h = H().send("a", 0, 0, None).final([[0, 0, "a-0"], [0, 1, "a-0"]])
    v = check(h.events)
    assert [a.kind for a in v.anomalies] == ["duplicate"]
    assert "unacknowledged" in v.anomalies[0].message


def _resend_history(epochs: tuple[int, int]) -> H:
    # a-1 written at 1 (its ack lost), then again at 2 after the client's epoch bump
    h = H().send("a", 0, 0, 0)
    h.add("a", "send", "invoke", value="a-1", partition=0, seq=1)
    h.add("a", "send", "ok", value="a-1", partition=0, offset=2)
    h.add("log", "log-batches", "ok",
          batches={"0": [[0, 1, 1000, epochs[0]], [2, 2, 1000, epochs[1]]]})  # fmt: skip
    return h.final([[0, 0, "a-0"], [0, 1, "a-1"], [0, 2, "a-1"]])


def test_copies_under_two_producer_epochs_are_a_client_resend() -> None:
    # the broker cannot deduplicate across epochs: counted, not an anomaly
    v = check(_resend_history((9, 11)).events)
    assert v.valid, v.anomalies
    assert [a.kind for a in v.resent] == ["resent"] and "epoch 11" in v.resent[0].message
    assert "re-sent by a client" in format_table(v)


def test_copies_under_one_producer_epoch_are_a_duplicate() -> None:
    # the same epoch: a retry the broker should have answered with the first offset
    v = check(_resend_history((9, 9)).events)
    assert [a.kind for a in v.anomalies] == ["duplicate"] and not v.resent


def test_reorder_within_a_partition() -> None:
    h = H().send("a", 0, 0, 1).send("a", 1, 0, 0).final([[0, 0, "a-1"], [0, 1, "a-0"]])
    assert kinds(h) == {"reorder"}


def test_reorder_of_unacknowledged_values_in_the_final_read() -> None:
    h = H().send("a", 0, 0, None).send("a", 1, 0, None)
    h.final([[0, 0, "a-1"], [0, 1, "a-0"]])
    assert kinds(h) == {"reorder"}


def test_phantom_value() -> None:
    h = H().send("a", 0, 0, 0).final([[0, 0, "a-0"], [0, 1, "zz-9"]])
    assert kinds(h) == {"phantom"}


def test_commit_going_backwards() -> None:
    h = clean()
    h.add("c", "commit", "ok", group="g", offsets={"0": 1})
    assert kinds(h) == {"offset-regression"}


def test_committed_read_back_lower_than_an_earlier_commit() -> None:
    h = clean()
    h.add("c", "committed", "invoke", group="g")
    h.add("c", "committed", "ok", group="g", offsets={"0": -1001})  # lost entirely
    h.add("c", "committed", "invoke", group="g")
    h.add("c", "committed", "ok", group="g", offsets={"0": 1})
    v = check(h.events)
    assert [a.kind for a in v.anomalies] == ["offset-regression"]


def test_read_back_racing_a_commit_is_not_a_regression() -> None:
    # the read began before the commit of 5 was acknowledged: 2 is a legal answer
    h = clean()
    h.add("c2", "committed", "invoke", group="g")
    h.add("c", "commit", "ok", group="g", offsets={"0": 5})
    h.add("c2", "committed", "ok", group="g", offsets={"0": 2})
    assert check(h.events).valid


def test_slice_shows_the_anomaly_and_the_faults_between() -> None:
    h = H().send("a", 0, 0, 0)
    h.add("nemesis", "start", "info", fault="kill-leader", broker=1)
    h.add("other", "poll", "ok", records=[[1, 5, "x"]])
    h.final([[0, 0, "b-0"], [1, 0, "q"]], end={"0": 1, "1": 1})
    v = check(h.events)
    lost = next(a for a in v.anomalies if a.kind == "lost")
    sl = history_slice(h.events, lost)
    assert [e["f"] for e in sl] == ["send", "send", "start", "final-read"]
    assert sl[-1]["records"] == [[0, 0, "b-0"]]


@st.composite
def consistent_histories(draw: st.DrawFn) -> list[dict[str, Any]]:
    """Producers append to partition logs in sequence order; some acknowledgements get
    lost (info), some unacknowledged values never land; reads show log prefixes."""
    n_parts = draw(st.integers(1, 3))
    logs: list[list[str]] = [[] for _ in range(n_parts)]
    h = H()
    seqs: dict[str, int] = {}
    for _ in range(draw(st.integers(0, 25))):
        proc = draw(st.sampled_from(["a", "b", "c"]))
        seq = seqs.get(proc, 0)
        seqs[proc] = seq + 1
        p = draw(st.integers(0, n_parts - 1))
        outcome = draw(st.sampled_from(["ok", "ok", "info-written", "info-absent"]))
        v = f"{proc}-{seq}"
        h.add(proc, "send", "invoke", value=v, partition=p, seq=seq)
        if outcome == "info-absent":
            h.add(proc, "send", "info", value=v, error="TIMEOUT")
            continue
        logs[p].append(v)
        if outcome == "ok":
            h.add(proc, "send", "ok", value=v, partition=p, offset=len(logs[p]) - 1)
        else:
            h.add(proc, "send", "info", value=v, error="TIMEOUT")
        if draw(st.booleans()):
            q = draw(st.integers(0, n_parts - 1))
            upto = draw(st.integers(0, len(logs[q])))
            h.add("c", "poll", "ok", records=[[q, o, x] for o, x in enumerate(logs[q][:upto])])
    h.final([[p, o, x] for p in range(n_parts) for o, x in enumerate(logs[p])])
    return h.events


@settings(max_examples=150, deadline=None)
@given(consistent_histories())
def test_consistent_histories_pass(events: list[dict[str, Any]]) -> None:
    v = check(events)
    assert v.valid, v.anomalies
