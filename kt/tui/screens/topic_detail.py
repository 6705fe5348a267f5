"""One topic: every partition's leader, preferred leader, replicas, ISR, offsets,
size and rate; a leader that is not the preferred one is highlighted."""

from __future__ import annotations

from typing import ClassVar

from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.widgets import DataTable, Static

from kt.tui.model import ClusterSnapshot
from kt.tui.screens.base import DashboardScreen, fill_table, selected_key
from kt.tui.widgets.format import human_bytes, human_count, ids, num, plain, tone


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

    def on_mount(self) -> None:
        super().on_mount()
        self.query_one("#partitions", DataTable).focus()

    def refresh_view(self) -> None:
        snap = self.snapshot
        summary = self.query_one("#topic-summary", Static)
        info = snap.topic(self.topic) if snap else None
        if snap is None or info is None:
            summary.update(plain(f"{self.topic}: not in the cluster (deleted?)"))
            fill_table(self.query_one("#partitions", DataTable), [])
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

    def selected_partition(self) -> int:
        """The partition under the cursor (0 when none)."""
        key = selected_key(self.query_one("#partitions", DataTable))
        return int(key) if key is not None else 0

    def action_messages(self) -> None:
        self.kt.open_messages(self.topic, self.selected_partition())

    def action_add_partitions(self) -> None:
        self.kt.start_add_partitions(self.topic)

    def action_alter_config(self) -> None:
        self.kt.start_alter_config(self.topic)

    def action_delete(self) -> None:
        self.kt.start_delete_topic(self.topic)
