"""The cluster's transactions (`t` on the brokers screen): every transactional id the
brokers list (ListTransactions), and for the ongoing ones what their coordinator
says (DescribeTransactions): producer id and epoch, partitions, timeout and how long
the transaction has been running. One running longer than its own timeout or than
LONG_TRANSACTION_MS is highlighted; aborting stays in `kt transactions abort`."""

from __future__ import annotations

from typing import ClassVar

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.widgets import DataTable, Static

from kt.tui.model import LONG_TRANSACTION_MS, TransactionInfo
from kt.tui.screens.base import DashboardScreen, fill_table
from kt.tui.widgets.format import counts_line, human_duration, num, plain, tone

ONGOING = "Ongoing"


def partitions_text(partitions: tuple[tuple[str, int], ...], limit: int = 3) -> str:
    """'orders-0,orders-3 +2': the first `limit` partitions, then how many more."""
    shown = ",".join(f"{t}-{p}" for t, p in partitions[:limit])
    more = len(partitions) - limit
    return f"{shown} +{more}" if more > 0 else shown or "-"


def ordered(txns: tuple[TransactionInfo, ...], now_ms: int) -> list[TransactionInfo]:
    """The longest-running first, then the ids without a transaction running."""
    return sorted(txns, key=lambda t: (-t.duration_ms(now_ms), t.transactional_id))


class TransactionsScreen(DashboardScreen):
    """Transactional ids, the ongoing ones with their duration."""

    TITLE_TEXT = "Transactions"
    MODE = "brokers"
    VIEW = "transactions"

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "app.pop_screen", "Back"),
    ]

    def nav_detail(self) -> str:
        return "transactions"

    def body(self) -> ComposeResult:
        yield Static(id="txn-summary")
        table: DataTable[object] = DataTable(
            id="transactions", cursor_type="row", zebra_stripes=True
        )
        for key, header in (
            # what an operator looks for first, so it fits in 80 columns
            ("id", "transactional id"),
            ("state", "state"),
            ("duration", "duration"),
            ("timeout", "timeout"),
            ("partitions", "partitions"),
            ("pid", "producer id"),
            ("epoch", "epoch"),
            ("coordinator", "coord"),
        ):
            table.add_column(header, key=key)
        yield table

    def on_mount(self) -> None:
        self.query_one("#transactions", DataTable).focus()

    def refresh_view(self) -> None:
        snap = self.snapshot
        summary = self.query_one("#txn-summary", Static)
        table = self.query_one("#transactions", DataTable)
        if snap is None or snap.transactions is None:
            summary.update("Waiting for the brokers to list their transactions…")
            fill_table(table, [])
            return
        now = snap.wall_ms
        txns = snap.transactions
        ongoing = [t for t in txns if t.state == ONGOING]
        long = [t for t in ongoing if t.long_running(now)]
        text = plain(f"Transactional ids {len(txns)}   ")
        text.append_text(
            counts_line(
                self.app,
                [("Ongoing", len(ongoing), "accent"), ("Long-running", len(long), "warning")],
            )
        )
        text.append(f" (over timeout or {human_duration(LONG_TRANSACTION_MS / 1000)})")
        summary.update(text)
        rows = [(t.transactional_id, self._cells(t, now)) for t in ordered(txns, now)]
        fill_table(table, rows)

    def _cells(self, t: TransactionInfo, now: int) -> list[object]:
        duration_ms = t.duration_ms(now)
        duration: Text
        if duration_ms < 0:
            duration = num("-")
        elif t.long_running(now):
            duration = tone(self.app, human_duration(duration_ms / 1000), "error")
            duration.justify = "right"  # a duration, aligned with the others
        else:
            duration = num(human_duration(duration_ms / 1000))
        state = (
            tone(self.app, t.state, "accent", bold=False) if t.state == ONGOING else plain(t.state)
        )
        return [
            plain(t.transactional_id),
            state,
            duration,
            num(human_duration(t.timeout_ms / 1000) if t.timeout_ms >= 0 else "-"),
            plain(partitions_text(t.partitions)),
            num(t.producer_id),
            num(t.producer_epoch if t.producer_epoch >= 0 else "-"),
            num(t.coordinator),
        ]
