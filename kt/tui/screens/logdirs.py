"""Log directories per broker: size, partitions, capacity, offline directories."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.widgets import DataTable, Static

from kt.tui.screens.base import DashboardScreen, fill_table
from kt.tui.widgets.format import human_bytes, num, plain, tone


class LogDirsScreen(DashboardScreen):
    """Every log directory of every broker."""

    TITLE_TEXT = "Log directories"
    MODE = "logdirs"

    def body(self) -> ComposeResult:
        yield Static(id="dirs-summary")
        table: DataTable[object] = DataTable(id="logdirs", cursor_type="row", zebra_stripes=True)
        for key, header in (
            ("broker", "broker"),
            ("path", "path"),
            ("status", "status"),
            ("size", "size"),
            ("parts", "parts"),
            ("used", "disk used"),
            ("free", "free"),
        ):
            table.add_column(header, key=key)
        yield table

    def on_mount(self) -> None:
        self.query_one("#logdirs", DataTable).focus()

    def refresh_view(self) -> None:
        snap = self.snapshot
        if snap is None:
            return
        offline = [d for d in snap.log_dirs if d.error is not None]
        total = sum(d.size_bytes for d in snap.log_dirs if d.size_bytes >= 0)
        text = plain(f"{len(snap.log_dirs)} directories on {len(snap.brokers)} broker(s), ")
        text.append(f"{human_bytes(total)} of logs; offline ")
        text.append(tone(self.app, str(len(offline)), "error" if offline else "success"))
        self.query_one("#dirs-summary", Static).update(text)
        rows = []
        for d in sorted(snap.log_dirs, key=lambda d: (d.broker, d.path)):
            if d.total_bytes > 0 and d.usable_bytes >= 0:
                used = f"{100 * (d.total_bytes - d.usable_bytes) / d.total_bytes:.0f}%"
            else:
                used = "-"
            status = (
                tone(self.app, f"OFFLINE: {d.error}", "error")
                if d.error is not None
                else tone(self.app, "online", "success", bold=False)
            )
            rows.append(
                (
                    f"{d.broker}\0{d.path}",
                    [
                        num(d.broker),
                        plain(d.path),
                        status,
                        num(human_bytes(d.size_bytes)),
                        num(d.partitions),
                        num(used),
                        num(human_bytes(d.usable_bytes)),
                    ],
                )
            )
        fill_table(self.query_one("#logdirs", DataTable), rows)
