"""One topic: every partition's leader, preferred leader, replicas, ISR, offsets,
size and rate; a leader that is not the preferred one is highlighted. Below, the
transactions open on its partitions (DescribeProducers, asked only for the topic on
view: the screen tells the app which one) with their age and the partition's LSO
lag (high watermark minus last stable offset); an old one is highlighted."""

from __future__ import annotations

from typing import ClassVar

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.widgets import DataTable, Static

from kt.tui.host import AddPartitions, AlterConfig, DeleteTopic, OpenMessages, WatchTopic
from kt.tui.model import LONG_TRANSACTION_MS, ClusterSnapshot, OpenTransaction, TransactionInfo
from kt.tui.screens.base import DashboardScreen, fill_table, selected_key
from kt.tui.widgets.format import (
    human_bytes,
    human_count,
    human_duration,
    ids,
    num,
    plain,
    tone,
)


def partition_rates(
    prev: ClusterSnapshot | None, cur: ClusterSnapshot, topic: str
) -> dict[int, float]:
    """Records/s per partition of `topic` between two snapshots."""
    if prev is None:
        return {}
    a, b = prev.topic(topic), cur.topic(topic)
    dt = cur.taken_at - prev.taken_at
    if a is None or b is None or dt <= 0:
        return {}
    before = {p.partition: p.log_end_offset for p in a.partitions}
    out = {}
    for p in b.partitions:
        if p.partition in before and before[p.partition] >= 0 and p.log_end_offset >= 0:
            out[p.partition] = max(0.0, (p.log_end_offset - before[p.partition]) / dt)
    return out


class TopicDetailScreen(DashboardScreen):
    """Partitions of one topic."""

    TITLE_TEXT = "Topic"
    MODE = "topics"
    VIEW = "topic"

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "app.pop_screen", "Back"),
        Binding("m", "messages", "Messages"),
        Binding("a", "add_partitions", "Partitions+"),
        Binding("e", "alter_config", "Config"),
        Binding("d", "delete", "Delete"),
    ]

    def __init__(self, topic: str) -> None:
        super().__init__()
        self.topic = topic

    def nav_detail(self) -> str:
        return f"topic {self.topic}"

    def body(self) -> ComposeResult:
        yield Static(id="topic-summary")
        table: DataTable[object] = DataTable(id="partitions", cursor_type="row", zebra_stripes=True)
        for key, header in (
            ("p", "part"),
            ("leader", "leader"),
            ("pref", "pref"),
            ("replicas", "replicas"),
            ("isr", "isr"),
            ("start", "log start"),
            ("end", "log end"),
            ("size", "size"),
            ("rate", "rec/s"),
        ):
            table.add_column(header, key=key)
        yield table
        yield Static(id="open-txns-title")
        txns: DataTable[object] = DataTable(id="open-txns", cursor_type="row", zebra_stripes=True)
        for key, header in (
            ("p", "part"),
            ("txn", "transactional id"),
            ("pid", "producer id"),
            ("epoch", "epoch"),
            ("first", "first offset"),
            ("lso", "LSO"),
            ("lag", "LSO lag"),
            ("age", "age"),
        ):
            txns.add_column(header, key=key)
        yield txns

    def on_mount(self) -> None:
        self.ask(WatchTopic(self.topic))
        self.query_one("#partitions", DataTable).focus()

    def on_screen_resume(self) -> None:
        # Textual calls DashboardScreen's handler too (it dispatches along the MRO)
        self.ask(WatchTopic(self.topic))

    def on_screen_suspend(self) -> None:
        self.ask(WatchTopic(None))

    def on_unmount(self) -> None:
        self.ask(WatchTopic(None))

    def refresh_view(self) -> None:
        snap = self.snapshot
        summary = self.query_one("#topic-summary", Static)
        info = snap.topic(self.topic) if snap else None
        if snap is None or info is None:
            summary.update(plain(f"{self.topic}: not in the cluster (deleted?)"))
            fill_table(self.query_one("#partitions", DataTable), [])
            self._draw_transactions(None)
            return
        ok = [s for s in self.history.snapshots() if s.error is None]
        rates = partition_rates(ok[-2] if len(ok) > 1 else None, snap, self.topic)
        text = plain(
            f"{len(info.partitions)} partitions  rf {info.replication_factor}  "
            f"min.insync {info.min_insync_replicas}  {human_bytes(info.size_bytes)}  "
            f"id {info.topic_id}\n"
        )
        not_pref = sum(1 for p in info.partitions if p.leader_not_preferred)
        text.append("under-replicated ")
        text.append(
            tone(
                self.app,
                str(info.under_replicated),
                "error" if info.under_replicated else "success",
            )
        )
        text.append("  offline ")
        text.append(tone(self.app, str(info.offline), "error" if info.offline else "success"))
        text.append("  leader not preferred ")
        text.append(tone(self.app, str(not_pref), "warning" if not_pref else "success"))
        if snap.watched_topic == self.topic:
            open_txns = sum(1 for o in snap.open_transactions if o.topic == self.topic)
            lso_lag = sum(p.lso_lag for p in info.partitions if p.lso_lag > 0)
            if open_txns or lso_lag:
                text.append("  open transactions ")
                text.append(tone(self.app, str(open_txns), "accent"))
                text.append("  LSO lag ")
                text.append(tone(self.app, str(lso_lag), "warning" if lso_lag else "success"))
        configs = ", ".join(f"{k}={v}" for k, v in sorted(info.overridden_configs.items()))
        text.append(f"\nconfigs: {configs or '(defaults)'}")
        summary.update(text)
        rows = []
        for p in sorted(info.partitions, key=lambda p: p.partition):
            if p.offline:
                leader = tone(self.app, "none", "error")
            elif p.leader_not_preferred:
                leader = tone(self.app, f"{p.leader} !", "warning")
            else:
                leader = num(p.leader)
            isr = tone(self.app, ids(p.isr), "error") if p.under_replicated else plain(ids(p.isr))
            rows.append(
                (
                    str(p.partition),
                    [
                        num(p.partition),
                        leader,
                        num(p.preferred_leader),
                        plain(ids(p.replicas)),
                        isr,
                        num(p.log_start_offset),
                        num(p.log_end_offset),
                        num(human_bytes(p.size_bytes)),
                        num(human_count(rates[p.partition]) if p.partition in rates else "-"),
                    ],
                )
            )
        fill_table(self.query_one("#partitions", DataTable), rows)
        self._draw_transactions(snap)

    def _draw_transactions(self, snap: ClusterSnapshot | None) -> None:
        """The open transactions of the topic, oldest first; title and table hidden
        while there are none (or the refresh did not ask for this topic yet)."""
        title = self.query_one("#open-txns-title", Static)
        table = self.query_one("#open-txns", DataTable)
        info = snap.topic(self.topic) if snap is not None else None
        if snap is None or info is None or snap.watched_topic != self.topic:
            opened: list[OpenTransaction] = []
        else:
            opened = [o for o in snap.open_transactions if o.topic == self.topic]
        title.display = table.display = bool(opened)
        if snap is None or info is None or not opened:
            fill_table(table, [])
            return
        now = snap.wall_ms
        by_pid = {t.producer_id: t for t in snap.transactions or ()}
        parts = {p.partition: p for p in info.partitions}
        opened.sort(key=lambda o: (-o.age_ms(now), o.partition, o.producer_id))
        old = sum(1 for o in opened if _old(o, by_pid.get(o.producer_id), now))
        text = plain(f"Open transactions {len(opened)}")
        if old:
            text.append("   older than their timeout or ")
            text.append(human_duration(LONG_TRANSACTION_MS / 1000) + " ")
            count = tone(self.app, str(old), "warning")
            count.justify = None
            text.append_text(count)
        title.update(text)
        rows = []
        for o in opened:
            p = parts.get(o.partition)
            txn = by_pid.get(o.producer_id)
            age_ms = o.age_ms(now)
            age: Text = num(human_duration(age_ms / 1000) if age_ms >= 0 else "-")
            if _old(o, txn, now):
                age = tone(self.app, age.plain, "error")
                age.justify = "right"
            lag = p.lso_lag if p is not None else -1
            lso = p.last_stable_offset if p is not None else -1
            rows.append(
                (
                    f"{o.partition}\0{o.producer_id}",
                    [
                        num(o.partition),
                        plain(txn.transactional_id if txn is not None else "?"),
                        num(o.producer_id),
                        num(o.producer_epoch),
                        num(o.first_offset),
                        num(lso if lso >= 0 else "-"),
                        tone(self.app, str(lag), "warning") if lag > 0 else num(max(lag, 0)),
                        age,
                    ],
                )
            )
        fill_table(table, rows)

    def selected_partition(self) -> int:
        """The partition under the cursor (0 when none)."""
        key = selected_key(self.query_one("#partitions", DataTable))
        return int(key) if key is not None else 0

    def action_messages(self) -> None:
        self.ask(OpenMessages(self.topic, self.selected_partition()))

    def action_add_partitions(self) -> None:
        self.ask(AddPartitions(self.topic))

    def action_alter_config(self) -> None:
        self.ask(AlterConfig(self.topic))

    def action_delete(self) -> None:
        self.ask(DeleteTopic(self.topic))


def _old(o: OpenTransaction, txn: TransactionInfo | None, now_ms: int) -> bool:
    """Open longer than its transaction's timeout (when its coordinator described
    it) or than LONG_TRANSACTION_MS."""
    limit = LONG_TRANSACTION_MS
    if txn is not None and txn.timeout_ms > 0:
        limit = min(limit, txn.timeout_ms)
    return o.age_ms(now_ms) > limit
