"""Consumer groups: state, members, total lag, its trend and the time to catch up."""

from __future__ import annotations

from typing import ClassVar

from textual import on
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.widgets import DataTable, Input

from kt.tui.host import OpenGroup, ResetOffsets
from kt.tui.screens.base import DashboardScreen, fill_table, selected_key
from kt.tui.screens.topics import filter_matches
from kt.tui.widgets.format import human_count, human_duration, num, plain, spark_text, tone


class GroupsScreen(DashboardScreen):
    """Every consumer group with its lag; Enter opens members and per-partition lag."""

    TITLE_TEXT = "Consumer groups"
    MODE = "groups"

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("slash", "focus_filter", "Filter"),
        Binding("enter", "open", "Detail", show=False),
        Binding("r", "reset_offsets", "Reset offsets"),
        Binding("escape", "focus_table", "Table", show=False),
    ]

    def body(self) -> ComposeResult:
        yield Input(
            placeholder="filter groups (substring or regex) — / to focus", id="filter", compact=True
        )
        table: DataTable[object] = DataTable(id="groups", cursor_type="row", zebra_stripes=True)
        for key, header in (
            ("group", "group"),
            ("state", "state"),
            ("members", "members"),
            ("parts", "parts"),
            ("lag", "lag"),
            ("trend", "lag trend"),
            ("rate", "rec/s"),
            ("secs", "lag time"),
        ):
            table.add_column(header, key=key)
        yield table

    def on_mount(self) -> None:
        self.query_one("#groups", DataTable).focus()

    def refresh_view(self) -> None:
        snap = self.snapshot
        if snap is None:
            return
        pattern = self.query_one("#filter", Input).value.strip()
        rows = []
        for g in sorted(snap.groups, key=lambda g: g.group_id):
            if not filter_matches(pattern, g.group_id):
                continue
            trend = self.history.group_lag_series(g.group_id)
            secs = self.history.group_lag_seconds(g.group_id)
            rate = self.history.group_consume_rate(g.group_id)
            state = (
                tone(self.app, g.state, "success", bold=False)
                if g.state == "Stable"
                else tone(self.app, g.state, "warning", bold=False)
                if g.state in ("PreparingRebalance", "CompletingRebalance", "Dead")
                else plain(g.state)
            )
            lag_cell = tone(self.app, str(g.total_lag), "warning") if g.total_lag else num(0)
            rows.append(
                (
                    g.group_id,
                    [
                        plain(g.group_id),
                        state,
                        num(len(g.members)),
                        num(len(g.lags)),
                        lag_cell,
                        plain(spark_text(trend)),
                        num(human_count(rate)),
                        num(human_duration(secs)),
                    ],
                )
            )
        fill_table(self.query_one("#groups", DataTable), rows)

    def selected_group(self) -> str | None:
        """The group under the cursor."""
        return selected_key(self.query_one("#groups", DataTable))

    @on(Input.Changed, "#filter")
    def _filter_changed(self) -> None:
        self.refresh_view()

    @on(Input.Submitted, "#filter")
    def _filter_done(self) -> None:
        self.query_one("#groups", DataTable).focus()

    @on(DataTable.RowSelected, "#groups")
    def _row_selected(self) -> None:
        self.action_open()

    def action_focus_filter(self) -> None:
        self.query_one("#filter", Input).focus()

    def action_focus_table(self) -> None:
        self.query_one("#groups", DataTable).focus()

    def action_open(self) -> None:
        gid = self.selected_group()
        if gid is not None:
            self.ask(OpenGroup(gid))

    def action_reset_offsets(self) -> None:
        gid = self.selected_group()
        if gid is not None:
            self.ask(ResetOffsets(gid))
