"""The frame every dashboard screen shares: header, status line, body, footer.

Screens never talk to the network for cluster state: the app samples in a
worker and calls `refresh_view()` on the active screen with each snapshot;
a screen coming back to the front redraws from the history at once. Screens do not
import the app: they read it as a `DashboardHost` and ask it for things with the
messages of `kt.tui.host`.
"""

from __future__ import annotations

from typing import Any, cast

from textual.app import ComposeResult
from textual.message import Message
from textual.screen import Screen
from textual.widgets import DataTable, Footer, Static

from kt.tui.host import DashboardHost
from kt.tui.model import ClusterSnapshot, History, authorization_denials
from kt.tui.widgets.nav import NavBar
from kt.tui.widgets.status import StatusBar


class DashboardScreen(Screen[None]):
    """A screen of the dashboard; subclasses compose `body()` and draw `refresh_view()`."""

    #: shown in the palette and help
    TITLE_TEXT = ""
    #: the mode this screen belongs to (highlighted in the top line)
    MODE = "overview"
    #: which requests' authorization failures this screen reports (model._VIEW_REQUESTS;
    #: "overview" shows them all); defaults to MODE
    VIEW = ""

    DEFAULT_CSS = """
    DashboardScreen #denied {
        height: auto;
        max-height: 4;
        padding: 0 1;
        background: $warning-muted;
        color: $text;
        display: none;
    }
    DashboardScreen #denied.-shown {
        display: block;
    }
    """

    @property
    def kt(self) -> DashboardHost:
        """The app, as far as screens read it."""
        return cast("DashboardHost", self.app)

    def ask(self, request: Message) -> None:
        """Ask the app for something (one of kt.tui.host's messages)."""
        self.app.post_message(request)

    @property
    def history(self) -> History:
        """Every snapshot the app kept."""
        return self.kt.history

    @property
    def snapshot(self) -> ClusterSnapshot | None:
        """The newest snapshot that reached the cluster (stale data beats none)."""
        return self.history.latest_ok

    def compose(self) -> ComposeResult:
        yield NavBar(self.MODE, self.nav_detail())
        yield StatusBar(id="status")
        yield Static("", id="denied", markup=False)
        yield from self.body()
        yield Footer()

    def nav_detail(self) -> str:
        """What a detail screen shows after the screens in the top line."""
        return ""

    def body(self) -> ComposeResult:
        """The screen's own widgets."""
        yield from ()

    def on_mount(self) -> None:
        # Textual calls this itself after a subclass's own on_mount (it dispatches
        # handlers along the MRO), so subclasses must not call super().on_mount().
        self.sub_title = self.TITLE_TEXT
        self.redraw()

    def on_screen_resume(self) -> None:
        self.redraw()

    def redraw(self) -> None:
        """Status line and view from the current history."""
        self.query_one(StatusBar).show(
            self.history,
            bootstrap=self.kt.bootstrap,
            interval=self.kt.interval,
            paused=self.kt.paused,
            principal=getattr(self.kt, "principal", None),
        )
        self.show_denials()
        self.refresh_view()

    def show_denials(self) -> None:
        """Say what this view cannot show because the principal is not authorized
        (rather than an empty table that looks like an empty cluster)."""
        lines = authorization_denials(self.history.latest, self.VIEW or self.MODE)
        notice = self.query_one("#denied", Static)
        if lines:
            who = getattr(self.kt, "principal", None)
            head = f"As {who}: " if who else ""
            notice.update(head + "\n".join(lines))
        notice.set_class(bool(lines), "-shown")

    def refresh_view(self) -> None:
        """Draw the view from `self.history` (called on every snapshot)."""


def fill_table(table: DataTable[Any], rows: list[tuple[str, list[Any]]]) -> None:
    """Replace a table's rows (key, cells), keeping the cursor on the same key."""
    current: str | None = None
    if table.row_count and table.cursor_row >= 0:
        try:
            current = table.coordinate_to_cell_key(table.cursor_coordinate).row_key.value
        except Exception:  # cursor outside after a shrink: start at the top
            current = None
    column = table.cursor_column
    scroll_y = table.scroll_y
    table.clear()
    for key, cells in rows:
        table.add_row(*cells, key=key)
    if current is not None:
        try:
            index = table.get_row_index(current)
        except Exception:
            index = min(table.cursor_row, max(0, table.row_count - 1))
        table.move_cursor(row=index, column=column, animate=False, scroll=False)
    # clear() scrolls to the top; put the view back where the operator left it
    if scroll_y:
        table.call_after_refresh(table.scroll_to, y=scroll_y, animate=False)


def selected_key(table: DataTable[Any]) -> str | None:
    """The row key under the cursor, if any."""
    if not table.row_count:
        return None
    try:
        return table.coordinate_to_cell_key(table.cursor_coordinate).row_key.value
    except Exception:
        return None
