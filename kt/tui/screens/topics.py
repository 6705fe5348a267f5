"""Topics: a sortable, filterable table; Enter opens a topic's partitions."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any, ClassVar

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.widgets import DataTable, Input
from textual.widgets.data_table import ColumnKey

from kt.tui.host import AddPartitions, AlterConfig, CreateTopic, DeleteTopic, OpenTopic
from kt.tui.model import TopicInfo
from kt.tui.screens.base import DashboardScreen, fill_table, selected_key
from kt.tui.widgets.format import human_bytes, human_count, num, plain, tone

#: (column key, header, sort key over (topic, rate))
_COLUMNS: list[tuple[str, str, Callable[[TopicInfo, float], Any]]] = [
    ("name", "topic", lambda t, r: t.name),
    ("parts", "parts", lambda t, r: len(t.partitions)),
    ("rf", "rf", lambda t, r: t.replication_factor),
    ("size", "size", lambda t, r: t.size_bytes),
    ("rate", "rec/s", lambda t, r: r),
    ("urp", "under-repl", lambda t, r: t.under_replicated),
    ("offline", "offline", lambda t, r: t.offline),
    ("configs", "configs overridden", lambda t, r: len(t.overridden_configs)),
]


def filter_matches(pattern: str, name: str) -> bool:
    """Substring match, or a regex search when the filter is a valid regex."""
    if not pattern:
        return True
    if pattern.lower() in name.lower():
        return True
    try:
        return re.search(pattern, name) is not None
    except re.error:
        return False


class TopicsScreen(DashboardScreen):
    """Every topic with size, rate and health; sort, filter, act."""

    TITLE_TEXT = "Topics"
    MODE = "topics"

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("slash", "focus_filter", "Filter"),
        Binding("s", "sort_next", "Sort"),
        Binding("S", "sort_reverse", "Reverse", show=False),
        Binding("i", "toggle_internal", "Internal"),
        Binding("enter", "open", "Detail", show=False),
        Binding("c", "create", "Create"),
        Binding("d", "delete", "Delete"),
        Binding("a", "add_partitions", "Partitions+"),
        Binding("e", "alter_config", "Config"),
        Binding("escape", "focus_table", "Table", show=False),
    ]

    def __init__(self) -> None:
        super().__init__()
        self.sort_column = "name"
        self.sort_reverse = False
        self.show_internal = False

    def body(self) -> ComposeResult:
        yield Input(
            placeholder="filter topics (substring or regex) — / to focus", id="filter", compact=True
        )
        table: DataTable[object] = DataTable(id="topics", cursor_type="row", zebra_stripes=True)
        for key, header, _ in _COLUMNS:
            table.add_column(header + "  ", key=key)  # room for the sort arrow
        yield table

    def on_mount(self) -> None:
        self.query_one("#topics", DataTable).focus()

    def refresh_view(self) -> None:
        snap = self.snapshot
        if snap is None:
            return
        pattern = self.query_one("#filter", Input).value.strip()
        rates = {t.name: (self.history.topic_rate_series(t.name) or [0.0])[-1] for t in snap.topics}
        topics = [
            t
            for t in snap.topics
            if (self.show_internal or not t.internal) and filter_matches(pattern, t.name)
        ]
        sorter = next(f for k, _, f in _COLUMNS if k == self.sort_column)
        topics.sort(key=lambda t: (sorter(t, rates[t.name]), t.name), reverse=self.sort_reverse)
        rows = []
        for t in topics:
            configs = ",".join(f"{k}={v}" for k, v in sorted(t.overridden_configs.items()))
            rows.append(
                (
                    t.name,
                    [
                        plain(t.name),
                        num(len(t.partitions)),
                        num(t.replication_factor),
                        num(human_bytes(t.size_bytes)),
                        num(human_count(rates[t.name])),
                        tone(self.app, str(t.under_replicated), "error")
                        if t.under_replicated
                        else num(0),
                        tone(self.app, str(t.offline), "error") if t.offline else num(0),
                        plain(configs or "-"),
                    ],
                )
            )
        table = self.query_one("#topics", DataTable)
        arrow = " ▼" if self.sort_reverse else " ▲"
        for key, header, _ in _COLUMNS:
            label = header + (arrow if key == self.sort_column else "")
            table.columns[ColumnKey(key)].label = Text(label.ljust(len(header) + 2))
        fill_table(table, rows)

    # --- selection and sorting ---------------------------------------------------------

    def selected_topic(self) -> str | None:
        """The topic under the cursor."""
        return selected_key(self.query_one("#topics", DataTable))

    @on(Input.Changed, "#filter")
    def _filter_changed(self) -> None:
        self.refresh_view()

    @on(Input.Submitted, "#filter")
    def _filter_done(self) -> None:
        self.query_one("#topics", DataTable).focus()

    @on(DataTable.HeaderSelected, "#topics")
    def _header(self, event: DataTable.HeaderSelected) -> None:
        key = event.column_key.value
        if key == self.sort_column:
            self.sort_reverse = not self.sort_reverse
        elif key is not None:
            self.sort_column, self.sort_reverse = key, False
        self.refresh_view()

    @on(DataTable.RowSelected, "#topics")
    def _row_selected(self) -> None:
        self.action_open()

    def action_focus_filter(self) -> None:
        self.query_one("#filter", Input).focus()

    def action_focus_table(self) -> None:
        self.query_one("#topics", DataTable).focus()

    def action_sort_next(self) -> None:
        keys = [k for k, _, _ in _COLUMNS]
        self.sort_column = keys[(keys.index(self.sort_column) + 1) % len(keys)]
        self.sort_reverse = self.sort_column not in ("name",)  # biggest first for numbers
        self.refresh_view()

    def action_sort_reverse(self) -> None:
        self.sort_reverse = not self.sort_reverse
        self.refresh_view()

    def action_toggle_internal(self) -> None:
        self.show_internal = not self.show_internal
        self.notify("internal topics " + ("shown" if self.show_internal else "hidden"))
        self.refresh_view()

    def action_open(self) -> None:
        name = self.selected_topic()
        if name is not None:
            self.ask(OpenTopic(name))

    # --- actions -------------------------------------------------------------------------

    def action_create(self) -> None:
        self.ask(CreateTopic())

    def action_delete(self) -> None:
        name = self.selected_topic()
        if name:
            self.ask(DeleteTopic(name))

    def action_add_partitions(self) -> None:
        name = self.selected_topic()
        if name:
            self.ask(AddPartitions(name))

    def action_alter_config(self) -> None:
        name = self.selected_topic()
        if name:
            self.ask(AlterConfig(name))
