"""The status line under the header: where we are connected, when the data is
from, whether refreshing is paused, and an outage when the cluster is lost."""

from __future__ import annotations

from textual.widgets import Static

from kt.tui.model import History
from kt.tui.widgets.format import clock


class StatusBar(Static):
    """One line of connection and refresh state, coloured on outage or pause."""

    DEFAULT_CSS = """
    StatusBar {
        height: 1;
        padding: 0 1;
        background: $panel;
        color: $text;
    }
    StatusBar.-error {
        background: $error-muted;
        color: $text;
        text-style: bold;
    }
    StatusBar.-paused {
        background: $warning-muted;
        color: $text;
    }
    """

    def show(
        self,
        history: History,
        *,
        bootstrap: str,
        interval: float,
        paused: bool,
        principal: str | None = None,
    ) -> None:
        """Render the state of the newest snapshot (and who we connected as)."""
        latest = history.latest
        ok = history.latest_ok
        who = f" as {principal}" if principal else ""
        every = "paused (p resumes)" if paused else f"every {interval:g}s"
        if latest is None:
            text = f"{bootstrap}{who} · connecting… · {every}"
        elif latest.error is not None:
            since = f", showing data of {clock(ok.wall_time)}" if ok else ""
            retry = "paused: p to retry" if paused else f"retrying every {interval:g}s"
            text = f"CLUSTER UNREACHABLE ({retry}{since}): {latest.error}"
        else:
            cid = f" · cluster {latest.cluster_id}" if latest.cluster_id else ""
            warnings = getattr(latest, "warnings", ())
            partial = f" · {len(warnings)} request(s) failed" if warnings else ""
            text = (
                f"{bootstrap}{who} · data {clock(latest.wall_time)} "
                f"({latest.refresh_seconds:.2f}s) · {every}{partial}{cid}"
            )
        self.set_class(latest is not None and latest.error is not None, "-error")
        self.set_class(paused and not self.has_class("-error"), "-paused")
        self.update(text)
