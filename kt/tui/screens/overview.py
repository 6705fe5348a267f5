"""Cluster overview: brokers, partition health counts, produce and consume
throughput with sparklines."""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical
from textual.widgets import DataTable, Label, Sparkline, Static

from kt.tui.screens.base import DashboardScreen, fill_table
from kt.tui.widgets.format import counts_line, human_bytes, human_count, num, plain, tone


class OverviewScreen(DashboardScreen):
    """Brokers, counts of topics and unhealthy partitions, throughput."""

    TITLE_TEXT = "Cluster overview"
    MODE = "overview"

    def body(self) -> ComposeResult:
        with Vertical(id="overview"):
            yield Static(id="counts")
            with Horizontal(classes="rate-row"):
                yield Label("Produce", classes="rate-label")
                yield Label("-", id="produce-rate", classes="rate-value")
                yield Sparkline([], id="produce-spark", classes="spark")
            with Horizontal(classes="rate-row"):
                yield Label("Consume", classes="rate-label")
                yield Label("-", id="consume-rate", classes="rate-value")
                yield Sparkline([], id="consume-spark", classes="spark")
            with Horizontal(classes="rate-row"):
                yield Label("Log growth", classes="rate-label")
                yield Label("-", id="bytes-rate", classes="rate-value")
                yield Sparkline([], id="bytes-spark", classes="spark")
            table: DataTable[object] = DataTable(
                id="brokers", cursor_type="row", zebra_stripes=True
            )
            table.add_column("id", key="id")
            table.add_column("status", key="status")
            table.add_column("host:port", key="host")
            table.add_column("rack", key="rack")
            table.add_column("ctrl", key="ctrl")
            table.add_column("led", key="led")
            table.add_column("log dirs", key="size")
            table.add_column("offline dirs", key="offline")
            yield table

    def refresh_view(self) -> None:
        snap = self.snapshot
        counts = self.query_one("#counts", Static)
        if snap is None:
            counts.update("Waiting for the first refresh…")
            return
        parts = list(snap.partitions)
        internal = sum(1 for t in snap.topics if t.internal)
        under = sum(t.under_replicated for t in snap.topics)
        under_min = sum(t.under_min_isr for t in snap.topics)
        offline = sum(t.offline for t in snap.topics)
        not_pref = sum(1 for p in parts if p.leader_not_preferred)
        text = Text(
            f"Topics {len(snap.topics) - internal} (+{internal} internal)   "
            f"Partitions {len(parts)}   Brokers {len(snap.brokers)}   "
            f"Controller {snap.controller_id}\n"
        )
        text.append_text(
            counts_line(
                self.app,
                [
                    ("Under-replicated", under, "error"),
                    ("Under-min-ISR", under_min, "error"),
                    ("Offline", offline, "error"),
                    ("Not preferred leader", not_pref, "warning"),
                ],
            )
        )
        counts.update(text)

        produce = self.history.produce_rate_series()
        consume = self.history.consume_rate_series()
        growth = self.history.bytes_rate_series()
        self.query_one("#produce-spark", Sparkline).data = produce or [0.0]
        self.query_one("#consume-spark", Sparkline).data = consume or [0.0]
        self.query_one("#bytes-spark", Sparkline).data = growth or [0.0]
        self.query_one("#produce-rate", Label).update(_rate(produce, "rec/s"))
        self.query_one("#consume-rate", Label).update(_rate(consume, "rec/s"))
        growth_now = f"{human_bytes(growth[-1])}/s" if growth else "-"
        self.query_one("#bytes-rate", Label).update(growth_now)

        # A broker seen before but missing from the cluster's metadata now is lost;
        # when the whole cluster is unreachable every broker's state is unknown.
        latest = self.history.latest
        down = latest is not None and latest.error is not None
        brokers = {b.node_id: b for b in snap.brokers}
        for s in reversed(self.history.snapshots()):  # the newest sighting of each
            for b in s.brokers:
                brokers.setdefault(b.node_id, b)
        current = {b.node_id for b in snap.brokers}
        rows = []
        for b in sorted(brokers.values(), key=lambda b: b.node_id):
            dirs_off = b.offline_log_dirs
            # A lost broker leads nothing and its log dirs are not known any more:
            # its last numbers would read as current ones.
            lost = not down and b.node_id not in current
            if down:
                status = tone(self.app, "unreachable", "error")
            elif b.node_id not in current:
                status = tone(self.app, "LOST", "error")
            else:
                status = tone(self.app, "up", "success", bold=False)
            rows.append(
                (
                    str(b.node_id),
                    [
                        num(b.node_id),
                        status,
                        plain(f"{b.host}:{b.port}"),
                        plain(b.rack or "-"),
                        tone(self.app, "yes", "accent")
                        if b.is_controller and b.node_id in current
                        else plain(""),
                        num("-" if lost else b.partitions_led),
                        num("-" if lost else human_bytes(b.log_dir_bytes)),
                        num("-")
                        if lost
                        else tone(self.app, str(dirs_off), "error")
                        if dirs_off
                        else num(0),
                    ],
                )
            )
        fill_table(self.query_one("#brokers", DataTable), rows)


def _rate(series: list[float], unit: str) -> str:
    if not series:
        return "-"
    return f"{human_count(series[-1])} {unit} (max {human_count(max(series))})"
