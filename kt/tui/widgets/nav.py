"""The top line: the app's name and its screens with their keys (clickable),
the current one highlighted."""

from __future__ import annotations

from textual.content import Content
from textual.widgets import Static

#: (mode, key, label) in the order of the number keys
SCREENS = (
    ("overview", "1", "Overview"),
    ("topics", "2", "Topics"),
    ("groups", "3", "Groups"),
    ("logdirs", "4", "Log dirs"),
    ("messages", "5", "Messages"),
    ("brokers", "6", "Brokers"),
    ("help", "?", "Help"),
)


class NavBar(Static):
    """`kt │ 1 Overview  2 Topics  …` with the active screen marked."""

    DEFAULT_CSS = """
    NavBar {
        height: 1;
        background: $primary-muted;
        color: $text;
        padding: 0 1;
    }
    """

    def __init__(self, current: str, detail: str = "") -> None:
        super().__init__()
        self.current = current
        self.detail = detail

    def on_mount(self) -> None:
        self.update(self.render_nav())

    def render_nav(self) -> Content:
        """The markup of the bar."""
        parts = [Content.from_markup("[b]kt[/b] │")]
        for mode, key, label in SCREENS:
            if mode == self.current:
                parts.append(
                    Content.from_markup(" [reverse b] $key $label [/]", key=key, label=label)
                )
            else:
                parts.append(
                    Content.from_markup(
                        f" [@click=app.switch_mode('{mode}')][b $text-accent]$key[/] $label[/]",
                        key=key,
                        label=label,
                    )
                )
        if self.detail:
            parts.append(Content.from_markup(" │ [b]$detail[/]", detail=self.detail))
        return Content("").join(parts)
