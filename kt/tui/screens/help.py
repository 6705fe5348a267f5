"""Help: every key binding of every screen, read from the bindings themselves so
the list cannot go stale."""

from __future__ import annotations

from typing import Any

from textual.app import App, ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import VerticalScroll
from textual.screen import Screen
from textual.widgets import Static

from kt.tui.screens.base import DashboardScreen
from kt.tui.widgets.format import plain

_KEY_NAMES = {
    "slash": "/",
    "question_mark": "?",
    "escape": "Esc",
    "enter": "Enter",
    "plus": "+",
    "minus": "-",
    "full_stop": ".",
    "ctrl+p": "Ctrl+P",
    "ctrl+q": "Ctrl+Q",
    "f1": "F1",
    "f5": "F5",
}


def key_label(key: str) -> str:
    """'slash' -> '/', 'ctrl+p' -> 'Ctrl+P'."""
    return ", ".join(_KEY_NAMES.get(k.strip(), k.strip()) for k in key.split(","))


def binding_lines(bindings: list[BindingType]) -> list[tuple[str, str]]:
    """(keys, description) for each binding with a description."""
    out = []
    for b in bindings:
        if isinstance(b, Binding):
            desc = b.description or b.action.replace("_", " ").removeprefix("app.")
            out.append((key_label(b.key), desc))
        elif isinstance(b, tuple):
            out.append((key_label(b[0]), b[2] if len(b) > 2 else b[1]))
    return out


class HelpScreen(DashboardScreen):
    """Every binding, per screen, and how the dashboard behaves."""

    TITLE_TEXT = "Help"
    MODE = "help"

    def body(self) -> ComposeResult:
        with VerticalScroll(id="help"):
            yield Static(id="help-text")

    def refresh_view(self) -> None:
        from kt.tui.screens.brokers import BrokersScreen
        from kt.tui.screens.group_detail import GroupDetailScreen
        from kt.tui.screens.groups import GroupsScreen
        from kt.tui.screens.messages import MessagesScreen
        from kt.tui.screens.reassignments import ReassignmentsScreen
        from kt.tui.screens.topic_detail import TopicDetailScreen
        from kt.tui.screens.topics import TopicsScreen
        from kt.tui.screens.transactions import TransactionsScreen

        # the app's own bindings, read from the running app (screens never import it)
        sections: list[tuple[str, type[Screen[None]] | type[App[Any]]]] = [
            ("Everywhere", type(self.app)),
            ("Topics", TopicsScreen),
            ("Topic detail", TopicDetailScreen),
            ("Consumer groups", GroupsScreen),
            ("Group detail", GroupDetailScreen),
            ("Messages", MessagesScreen),
            ("Brokers", BrokersScreen),
            ("Reassignments & leaders", ReassignmentsScreen),
            ("Transactions", TransactionsScreen),
        ]
        text = plain("")
        for title, cls in sections:
            text.append(f"{title}\n", style="bold underline")
            for keys, desc in binding_lines(list(cls.BINDINGS)):
                text.append(f"  {keys:<14}", style="bold")
                text.append(f"{desc}\n")
            text.append("\n")
        text.append("Notes\n", style="bold underline")
        text.append(
            "  Tables: arrows/PgUp/PgDn move, Enter opens, click a header to sort.\n"
            "  The data refreshes every --interval seconds in the background; p pauses.\n"
            "  A lost cluster shows in the status line; the TUI reconnects on its own.\n"
            "  Every action asks for confirmation and shows what it will do.\n"
            "  Messages 'from': offset, -N (N before the end), earliest, latest,\n"
            "  an ISO date-time (2026-01-31T10:00:00, local time unless Z/+hh:mm)\n"
            "  or @epoch-ms. The key filter matches a substring of the key.\n"
        )
        self.query_one("#help-text", Static).update(text)
