"""Brokers: who is live, on which rack, which one is the controller, what each leads and
hosts; and the partitions that are under-replicated or offline, highlighted. `r` opens
the reassignments and preferred leaders (kt/tui/screens/reassignments.py), `t` the
transactions (kt/tui/screens/transactions.py).

Each refresh's Metadata carries the replicas, ISR and offline replicas of every
partition, so ISR shrinks and expansions show up here as they happen.
"""

from __future__ import annotations

from typing import ClassVar

from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.widgets import DataTable, Static

from kt.tui.host import OpenReassignments, OpenTransactions
from kt.tui.model import BrokerInfo, PartitionInfo
from kt.tui.screens.base import DashboardScreen, fill_table
from kt.tui.widgets.format import counts_line, ids, num, plain, tone


class BrokersScreen(DashboardScreen):
    """Live brokers with their load, then the unhealthy partitions."""

    TITLE_TEXT = "Brokers"
    MODE = "brokers"

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("r", "reassignments", "Reassignments & leaders"),
        Binding("t", "transactions", "Transactions"),
    ]

    def action_reassignments(self) -> None:
        self.ask(OpenReassignments())

    def action_transactions(self) -> None:
        self.ask(OpenTransactions())

    def body(self) -> ComposeResult:
        yield Static(id="brokers-summary")
        table: DataTable[object] = DataTable(
            id="broker-list", cursor_type="row", zebra_stripes=True
        )
        for key, header in (
            ("id", "id"),
            ("status", "status"),
            ("rack", "rack"),
            ("ctrl", "ctrl"),
            ("leaders", "leads"),
            ("replicas", "replicas"),
            ("oos", "not in ISR"),
            ("urp", "URP"),
            ("offline", "offline"),
            ("host", "host:port"),
        ):
            table.add_column(header, key=key)
        yield table
        yield Static(id="unhealthy-title")
        parts: DataTable[object] = DataTable(
            id="unhealthy-partitions", cursor_type="row", zebra_stripes=True
        )
        for key, header in (
            ("topic", "topic"),
            ("partition", "partition"),
            ("state", "state"),
            ("leader", "leader"),
            ("replicas", "replicas"),
            ("isr", "isr"),
            ("offline", "offline replicas"),
        ):
            parts.add_column(header, key=key)
        yield parts

    def on_mount(self) -> None:
        self.query_one("#broker-list", DataTable).focus()

    def refresh_view(self) -> None:
        snap = self.snapshot
        summary = self.query_one("#brokers-summary", Static)
        if snap is None:
            summary.update("Waiting for the first refresh…")
            return
        latest = self.history.latest
        down = latest is not None and latest.error is not None
        loads = snap.broker_loads()
        live = {b.node_id: b for b in snap.brokers}
        # a broker seen in an earlier refresh, or named as a replica, but missing now
        known: dict[int, BrokerInfo | None] = dict(live)
        for s in self.history.snapshots():
            for b in s.brokers:
                known.setdefault(b.node_id, b)
        # internal topics (__consumer_offsets: 50 partitions) after the users' own
        internal = {t.name for t in snap.topics if t.internal}
        bad = sorted(
            (p for p in snap.partitions if p.offline or p.under_replicated),
            key=lambda p: p.topic in internal,
        )
        under = sum(1 for p in bad if p.under_replicated)
        offline = sum(1 for p in bad if p.offline)

        text = plain(f"Live brokers {len(live)}   Controller ")
        if snap.controller_id >= 0:
            text.append_text(tone(self.app, str(snap.controller_id), "accent"))
        else:
            text.append_text(tone(self.app, "none", "error"))
        lost = sorted(set(known) | set(loads)) if not down else []
        missing = [n for n in lost if n not in live]
        if missing:
            text.append("   Down ")
            text.append_text(tone(self.app, ids(missing), "error"))
        text.append("   ")
        text.append_text(
            counts_line(
                self.app, [("Under-replicated", under, "error"), ("Offline", offline, "error")]
            )
        )
        if snap.reassignments:
            # the detail is one key away (r)
            text.append("   Reassigning ")
            text.append_text(tone(self.app, str(len(snap.reassignments)), "warning"))
        summary.update(text)

        rows = []
        for n in sorted(set(known) | set(loads)):
            info = known.get(n)
            load = loads.get(n)
            if down:
                status = tone(self.app, "unreachable", "error")
            elif n in live:
                status = tone(self.app, "up", "success", bold=False)
            else:
                status = tone(self.app, "DOWN", "error")
            urp = load.under_replicated if load else 0
            off = load.offline if load else 0
            oos = load.out_of_sync if load else 0
            rows.append(
                (
                    str(n),
                    [
                        num(n),
                        status,
                        plain(info.rack or "-") if info else plain("-"),
                        tone(self.app, "yes", "accent")
                        if n == snap.controller_id and n in live
                        else plain(""),
                        num(load.leaders if load else 0),
                        num(load.replicas if load else 0),
                        tone(self.app, str(oos), "warning") if oos else num(0),
                        tone(self.app, str(urp), "error") if urp else num(0),
                        tone(self.app, str(off), "error") if off else num(0),
                        plain(f"{info.host}:{info.port}") if info else plain("-"),
                    ],
                )
            )
        fill_table(self.query_one("#broker-list", DataTable), rows)

        self.query_one("#unhealthy-title", Static).update(
            plain(
                f"Unhealthy partitions: {len(bad)}"
                if bad
                else "Unhealthy partitions: none (every partition has a leader and a full ISR)"
            )
        )
        fill_table(
            self.query_one("#unhealthy-partitions", DataTable),
            [(f"{p.topic}\0{p.partition}", self._partition_cells(p)) for p in bad],
        )

    def _partition_cells(self, p: PartitionInfo) -> list[object]:
        state = (
            tone(self.app, "OFFLINE", "error")
            if p.offline
            else tone(self.app, "under-replicated", "error")
        )
        return [
            plain(p.topic),
            num(p.partition),
            state,
            tone(self.app, "none", "error") if p.offline else num(p.leader),
            plain(ids(p.replicas)),
            tone(self.app, ids(p.isr), "warning"),
            tone(self.app, ids(p.offline_replicas), "error") if p.offline_replicas else plain("-"),
        ]
