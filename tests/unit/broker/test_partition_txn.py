"""Transactions on a Partition: the last stable offset, `.txnindex` entries, what a
READ_COMMITTED reader of the fetch results gets, followers rebuilding the leader's
state from its batches, and a restart rebuilding it from the log."""

from __future__ import annotations

import time
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st
from replication_helpers import new_partition, state

from kt.broker.errors import ProducerError, error_code_for
from kt.broker.partition import Partition, whole_batches
from kt.protocol import ErrorCode
from kt.storage import record_batch as v2
from kt.storage.log import PartitionLog
from kt.storage.log_config import LogConfig
from kt.storage.txn_index import AbortedTxn

T = int(time.time() * 1000)


def txn(pid: int, seq: int, values: list[bytes], *, epoch: int = 0) -> bytes:
    recs = [v2.RecordSpec(b"k", v, timestamp=T) for v in values]
    return v2.build_batch(
        recs, producer_id=pid, producer_epoch=epoch, base_sequence=seq, is_transactional=True
    )


def plain(values: list[bytes]) -> bytes:
    return v2.build_batch([v2.RecordSpec(b"k", v, timestamp=T) for v in values])


def leader(tmp_path: Path, broker: int = 1, segment_bytes: int = 1024 * 1024) -> Partition:
    p = new_partition(tmp_path, broker, segment_bytes=segment_bytes)
    assert p.make_leader(state(broker, 0, [broker]), now_ms=T)
    return p


def all_txn_entries(p: Partition) -> list[AbortedTxn]:
    return [t for s in p.log.segments for t in s.txn_index.entries]


def read_committed(p: Partition, max_bytes: int = 300) -> list[bytes]:
    """What a READ_COMMITTED consumer keeps of fetches from offset 0: records below
    the LSO, without those of the aborted transactions the fetches reported (Kafka's
    consumer: an aborted producer id is skipped from its transaction's first offset
    until its ABORT marker)."""
    out: list[bytes] = []
    offset = p.log_start_offset
    while True:
        lso = p.last_stable_offset()
        sl = p.log.read(offset, max_bytes, upper_bound=lso)
        if sl is None:
            return out
        aborted = sorted(p.aborted_transactions(offset, lso), key=lambda t: t.first_offset)
        data = bytes(whole_batches(sl.read_bytes()))
        skipping: set[int] = set()
        pos = 0
        while pos < len(data):
            h = v2.parse_header(data, pos)
            body = data[pos : pos + h.size_in_bytes]
            pos += h.size_in_bytes
            while aborted and aborted[0].first_offset <= h.last_offset:
                skipping.add(aborted.pop(0).producer_id)
            if h.is_control:
                skipping.discard(h.producer_id)
            elif not (h.is_transactional and h.producer_id in skipping):
                out.extend(r.value for r in v2.iter_records(h, body) if r.offset >= offset)
            offset = h.last_offset + 1


def test_lso_waits_for_the_marker_to_be_replicated(tmp_path: Path) -> None:
    p = new_partition(tmp_path, 1)
    assert p.make_leader(state(1, 0, [1, 2], [1, 2]), now_ms=T)
    p.append_records(txn(7, 0, [b"a", b"b"]))
    p.update_follower_fetch_state(2, 2, T, 2)
    assert p.high_watermark == 2 and p.last_stable_offset() == 0
    p.append_txn_marker(7, 0, 0, commit=True, now_ms=T)
    # Marker at 2 written, not replicated: the transaction still bounds the LSO.
    assert p.high_watermark == 2 and p.last_stable_offset() == 0
    p.update_follower_fetch_state(2, 3, T, 3)
    assert p.high_watermark == 3 and p.last_stable_offset() == 3


def test_marker_checks(tmp_path: Path) -> None:
    p = leader(tmp_path)
    p.append_records(txn(7, 0, [b"a"], epoch=1))
    p.append_txn_marker(7, 1, 5, commit=False, now_ms=T)
    for epoch, coord, code in (
        (0, 5, ErrorCode.INVALID_PRODUCER_EPOCH),
        (1, 4, ErrorCode.TRANSACTION_COORDINATOR_FENCED),
    ):
        try:
            p.append_txn_marker(7, epoch, coord, commit=True, now_ms=T)
        except ProducerError as exc:
            assert error_code_for(exc) == code
        else:
            raise AssertionError("marker accepted")
    # A bumped producer epoch from the coordinator (an aborted, fenced producer).
    p.append_txn_marker(7, 2, 5, commit=False, now_ms=T)
    entry = p.producer_state.last_entry(7)  # type: ignore[union-attr]
    assert entry is not None and entry.producer_epoch == 2
    # The old epoch's producer is now fenced on produce.
    try:
        p.append_records(txn(7, 1, [b"z"], epoch=1))
    except ProducerError as exc:
        assert error_code_for(exc) == ErrorCode.INVALID_PRODUCER_EPOCH
    else:
        raise AssertionError("fenced producer accepted")


def test_non_transactional_write_inside_a_transaction_is_refused(tmp_path: Path) -> None:
    p = leader(tmp_path)
    p.append_records(txn(7, 0, [b"a"]))
    idem = v2.build_batch(
        [v2.RecordSpec(b"k", b"v", timestamp=T)], producer_id=7, producer_epoch=0, base_sequence=1
    )
    try:
        p.append_records(idem)
    except ProducerError as exc:
        assert error_code_for(exc) == ErrorCode.INVALID_TXN_STATE
    else:
        raise AssertionError("accepted")


def test_restart_rebuilds_open_transactions_and_txnindex(tmp_path: Path) -> None:
    p = leader(tmp_path, segment_bytes=400)
    p.append_records(txn(1, 0, [b"a" * 50]))
    p.append_records(txn(2, 0, [b"b" * 50]))
    for i in range(6):
        p.append_records(plain([b"x%d" % i * 40]))
    p.append_txn_marker(2, 0, 0, commit=False, now_ms=T)
    p.append_records(txn(3, 0, [b"c"]))
    assert len(p.log.segments) > 2
    lso, entries = p.last_stable_offset(), all_txn_entries(p)
    assert lso == 0 and entries == [AbortedTxn(2, 1, 8, 0)]
    ongoing = p.producer_state.ongoing_txns()  # type: ignore[union-attr]
    assert ongoing == {1: 0, 3: 9}
    hw = p.high_watermark
    for clean in (True, False):
        if clean:
            p.close()
        p.log.close()
        log = PartitionLog.open(
            p.log.dir, LogConfig(segment_bytes=400), had_clean_shutdown=clean,
            recovery_point=0,
        )  # fmt: skip
        log.update_high_watermark(hw)
        p = Partition(p.tp, p.topic_id, log, 1, 0, [1], [1])
        p.load_producer_state()
        assert p.producer_state.ongoing_txns() == ongoing  # type: ignore[union-attr]
        assert (p.last_stable_offset(), all_txn_entries(p)) == (lso, entries)
    p.append_txn_marker(1, 0, 0, commit=True, now_ms=T)
    p.append_txn_marker(3, 0, 0, commit=True, now_ms=T)
    assert p.last_stable_offset() == p.log_end_offset


# --- random interleavings ----------------------------------------------------------

PIDS = [11, 12, 13]
op = st.one_of(
    st.tuples(st.just("send"), st.sampled_from(PIDS), st.integers(1, 3)),
    st.tuples(st.just("end"), st.sampled_from(PIDS), st.booleans()),
    st.tuples(st.just("plain"), st.just(0), st.integers(1, 2)),
)


@settings(max_examples=25, deadline=None)
@given(ops=st.lists(op, max_size=30), fetch_bytes=st.sampled_from([90, 300, 5000]))
def test_read_committed_reader_gets_exactly_the_committed_records(
    ops: list[tuple[str, int, object]], fetch_bytes: int
) -> None:
    import tempfile

    with tempfile.TemporaryDirectory() as d:
        root = Path(d)
        p = leader(root, 1, segment_bytes=600)
        f = new_partition(root, 2, segment_bytes=600)
        assert f.make_follower(state(1, 0, [1], [1, 2]))
        seqs = dict.fromkeys(PIDS, 0)
        open_values: dict[int, list[bytes]] = {pid: [] for pid in PIDS}
        committed: list[bytes] = []
        n = 0
        for kind, pid, arg in ops:
            if kind == "send":
                values = [b"%d-%d" % (pid, n + i) for i in range(int(arg))]  # type: ignore[call-overload]
                n += len(values)
                p.append_records(txn(pid, seqs[pid], values))
                seqs[pid] += len(values)
                open_values[pid].extend(values)
            elif kind == "end":
                p.append_txn_marker(pid, 0, 0, commit=bool(arg), now_ms=T)
                if arg:
                    committed.extend(open_values[pid])
                open_values[pid] = []
            else:
                values = [b"p-%d" % (n + i) for i in range(int(arg))]  # type: ignore[call-overload]
                n += len(values)
                p.append_records(plain(values))
                committed.extend(values)
        # Close every transaction left (aborting): then everything is stable.
        for pid in PIDS:
            if open_values[pid]:
                p.append_txn_marker(pid, 0, 0, commit=False, now_ms=T)
        assert p.last_stable_offset() == p.log_end_offset
        got = read_committed(p, fetch_bytes)
        # Each value carries its send number, which grows with its offset.
        assert got == sorted(committed, key=lambda v: int(v.split(b"-")[1]))
        # A follower copying the leader's log rebuilds the same .txnindex and LSO.
        if p.log_end_offset:
            # Batch by batch, as small follower fetches would bring them.
            for b in p.log.iter_batches():
                f.append_records_as_follower(bytes(b.data))
            f.update_follower_high_watermark(p.high_watermark)
            assert all_txn_entries(f) == all_txn_entries(p)
            assert f.last_stable_offset() == p.last_stable_offset()
            assert read_committed(f, fetch_bytes) == got
