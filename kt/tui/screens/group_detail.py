"""One consumer group: members and their assignment, lag per partition, the lag
trend and how long catching up would take at the current consume rate."""

from __future__ import annotations

from typing import ClassVar

from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal
from textual.widgets import DataTable, Label, Sparkline, Static

from kt.tui.host import ResetOffsets
from kt.tui.screens.base import DashboardScreen, fill_table
from kt.tui.widgets.format import human_count, human_duration, num, plain, tone


class GroupDetailScreen(DashboardScreen):
    """Members, assignment and per-partition lag of one group."""

    TITLE_TEXT = "Group"
    MODE = "groups"
    VIEW = "group"

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "app.pop_screen", "Back"),
        Binding("r", "reset_offsets", "Reset offsets"),
    ]

    def __init__(self, group_id: str) -> None:
        super().__init__()
        self.group_id = group_id

    def nav_detail(self) -> str:
        return f"group {self.group_id}"

    def body(self) -> ComposeResult:
        yield Static(id="group-summary")
        with Horizontal(classes="rate-row"):
            yield Label("Lag trend", classes="rate-label")
            yield Sparkline([], id="lag-spark", classes="spark")
        members: DataTable[object] = DataTable(id="members", cursor_type="row")
        for header in ("member", "client", "host", "assignment"):
            members.add_column(header, key=header)
        yield members
        lags: DataTable[object] = DataTable(id="lags", cursor_type="row", zebra_stripes=True)
        for header in ("topic", "part", "committed", "log end", "lag", "consumer"):
            lags.add_column(header, key=header)
        yield lags

    def on_mount(self) -> None:
        self.query_one("#lags", DataTable).focus()

    def refresh_view(self) -> None:
        snap = self.snapshot
        summary = self.query_one("#group-summary", Static)
        g = snap.group(self.group_id) if snap else None
        if g is None:
            summary.update(plain(f"{self.group_id}: no such group (deleted?)"))
            return
        rate = self.history.group_consume_rate(self.group_id)
        secs = self.history.group_lag_seconds(self.group_id)
        text = plain(
            f"state {g.state}  protocol {g.protocol_type or '-'}/"
            f"{g.protocol or '-'}  members {len(g.members)}\n"
        )
        text.append("total lag ")
        text.append(tone(self.app, str(g.total_lag), "warning" if g.total_lag else "success"))
        text.append(f"  consuming {human_count(rate)} rec/s  caught up in ")
        text.append(tone(self.app, human_duration(secs), "warning" if secs is None else "success"))
        summary.update(text)
        trend = self.history.group_lag_series(self.group_id)
        self.query_one("#lag-spark", Sparkline).data = [float(v) for v in trend] or [0.0]

        short = {m.member_id: m.client_id or m.member_id[:12] for m in g.members}
        member_rows = []
        for m in sorted(g.members, key=lambda m: m.member_id):
            assignment = ", ".join(f"{t}-{p}" for t, p in sorted(m.assignment))
            member_rows.append(
                (
                    m.member_id,
                    [
                        plain(m.member_id),
                        plain(m.client_id),
                        plain(m.host),
                        plain(assignment or "-"),
                    ],
                )
            )
        fill_table(self.query_one("#members", DataTable), member_rows)
        lag_rows = []
        for pl in sorted(g.lags, key=lambda pl: (pl.topic, pl.partition)):
            lag_rows.append(
                (
                    f"{pl.topic}\0{pl.partition}",
                    [
                        plain(pl.topic),
                        num(pl.partition),
                        num(pl.committed if pl.committed >= 0 else "-"),
                        num(pl.log_end_offset),
                        tone(self.app, str(pl.lag), "warning") if pl.lag else num(0),
                        plain(short.get(pl.consumer, pl.consumer) if pl.consumer else "-"),
                    ],
                )
            )
        fill_table(self.query_one("#lags", DataTable), lag_rows)

    def action_reset_offsets(self) -> None:
        self.ask(ResetOffsets(self.group_id))
