"""Reassignments and preferred leaders (opened from the brokers screen with `r`).

- Every partition being reassigned: its replicas, those being added and removed, how
  many bytes the adding replicas hold against the leader's (a progress bar), the copy
  rate over the last refreshes and the ETA: the numbers of `kt reassign-partitions
  --progress`, summed over a partition's adding replicas; and the replication
  throttles in force.
- Preferred-leader imbalance per broker, measured as the controller's auto leader
  rebalance measures it (kt.cluster.rebalance), and every partition not led
  by its preferred replica, with whether an election could move it back.

Actions (each behind a confirmation): start a reassignment from a plan file, cancel
the selected reassignment or all of them, elect the preferred leader of the selected
partition or of all.
"""

from __future__ import annotations

from typing import ClassVar

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.widgets import DataTable, Static

from kt.admin.reassignment import ReplicaProgress, eta_text
from kt.tui.host import CancelReassignments, ElectPreferredLeaders, StartReassignment
from kt.tui.model import BrokerThrottle, ClusterSnapshot, PartitionInfo, ReassignmentInfo
from kt.tui.screens.base import DashboardScreen, fill_table, selected_key
from kt.tui.widgets.format import human_bytes, ids, num, plain, tone

#: leader.imbalance.per.broker.percentage's default: above it the controller rebalances
IMBALANCE_PERCENTAGE = 10
BAR_WIDTH = 7


def partition_progress(rows: list[ReplicaProgress]) -> dict[str, ReplicaProgress]:
    """Per partition ("topic-N"), its adding replicas' progress summed: bytes copied
    and to copy, rate; the ETA of the slowest (unknown if any is)."""
    out: dict[str, ReplicaProgress] = {}
    for x in rows:
        a = out.get(x.partition)
        if a is None:
            out[x.partition] = x
            continue
        rate = None if a.rate is None or x.rate is None else a.rate + x.rate
        eta = None if a.eta_s is None or x.eta_s is None else max(a.eta_s, x.eta_s)
        out[x.partition] = ReplicaProgress(
            x.partition, -1, a.copied + x.copied, a.total + x.total, rate, eta
        )
    return out


def bar(fraction: float, width: int = BAR_WIDTH) -> str:
    """'█████░░░ 62%'."""
    filled = round(fraction * width)
    return "█" * filled + "░" * (width - filled) + f" {100 * fraction:3.0f}%"


def throttle_text(throttles: tuple[BrokerThrottle, ...], topics: list[str]) -> str:
    """'10.0 KiB/s on brokers 1,2,3 (mv)': rates, then the topics with throttled
    replicas; or 'none'."""
    if not throttles and not topics:
        return "none"
    by_rate: dict[tuple[int | None, int | None], list[int]] = {}
    for t in throttles:
        by_rate.setdefault((t.leader_rate, t.follower_rate), []).append(t.broker)
    parts = []
    for (lead, follow), brokers in sorted(by_rate.items(), key=lambda kv: kv[1]):
        if lead == follow:
            rate = f"{_rate(lead)}"
        else:
            rate = f"leader {_rate(lead)} follower {_rate(follow)}"
        s = "" if len(brokers) == 1 else "s"
        parts.append(f"{rate} on broker{s} {ids(brokers)}")
    text = "; ".join(parts) if parts else "no rate set"
    if topics:
        text += f" ({', '.join(topics)})"
    return text


def _inline(text: Text) -> Text:
    # a numeric cell is right-justified; inside a sentence it must not be
    text.justify = None
    return text


def _rate(value: int | None) -> str:
    return "-" if value is None else human_bytes(value) + "/s"


class ReassignmentsScreen(DashboardScreen):
    """Reassignments in progress, throttles, preferred-leader imbalance."""

    TITLE_TEXT = "Reassignments and preferred leaders"
    MODE = "brokers"
    VIEW = "reassignments"

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "app.pop_screen", "Back"),
        Binding("e", "execute", "Start plan"),
        Binding("c", "cancel", "Cancel"),
        Binding("C", "cancel_all", "Cancel all"),
        Binding("l", "elect", "Elect"),
        Binding("L", "elect_all", "Elect all"),
    ]

    def nav_detail(self) -> str:
        return "reassignments"

    def body(self) -> ComposeResult:
        yield Static(id="reassign-summary")
        moving: DataTable[object] = DataTable(
            id="reassignments", cursor_type="row", zebra_stripes=True
        )
        for key, header in (
            ("partition", "partition"),
            ("replicas", "replicas"),
            ("progress", "progress"),
            ("copied", "copied"),
            ("left", "left"),
            ("rate", "rate/s"),
            ("eta", "eta"),
        ):
            moving.add_column(header, key=key)
        yield moving
        yield Static(id="leaders-title")
        balance: DataTable[object] = DataTable(
            id="imbalance", cursor_type="row", zebra_stripes=True
        )
        for key, header in (
            ("broker", "broker"),
            ("leads", "leads"),
            ("preferred", "preferred for"),
            ("led", "leads of those"),
            ("not_led", "led elsewhere"),
            ("ratio", "imbalance"),
        ):
            balance.add_column(header, key=key)
        yield balance
        others: DataTable[object] = DataTable(
            id="not-preferred", cursor_type="row", zebra_stripes=True
        )
        for key, header in (
            ("topic", "topic"),
            ("partition", "part"),
            ("leader", "leader"),
            ("preferred", "preferred"),
            ("replicas", "replicas"),
            ("isr", "isr"),
            ("election", "election"),
        ):
            others.add_column(header, key=key)
        yield others

    def on_mount(self) -> None:
        self.query_one("#reassignments", DataTable).focus()

    def refresh_view(self) -> None:
        snap = self.snapshot
        summary = self.query_one("#reassign-summary", Static)
        if snap is None:
            summary.update("Waiting for the first refresh…")
            return
        self._draw_reassignments(snap, summary)
        self._draw_leaders(snap)

    def _draw_reassignments(self, snap: ClusterSnapshot, summary: Static) -> None:
        progress = partition_progress(self.history.reassignment_progress())
        throttled = sorted(snap.throttled_replicas())
        text = plain("Reassignments ")
        if snap.reassignments:
            copied = sum(x.copied for x in progress.values())
            total = sum(x.total for x in progress.values())
            text.append_text(_inline(tone(self.app, str(len(snap.reassignments)), "warning")))
            text.append(f"   Copied {human_bytes(copied)} of {human_bytes(total)}")
        else:
            text.append_text(tone(self.app, "none", "success"))
        text.append("   Throttle ")
        rates = throttle_text(snap.throttles, throttled)
        text.append_text(tone(self.app, rates, "warning") if rates != "none" else plain("none"))
        summary.update(text)
        rows = []
        for r in snap.reassignments:
            x = progress.get(f"{r.topic}-{r.partition}")
            cells: list[object] = [plain(f"{r.topic}-{r.partition}"), self._replicas(r)]
            if x is None:
                cells += [plain("-")] + [num("-")] * 4
            else:
                cells += [
                    tone(self.app, bar(x.fraction), "accent", bold=False),
                    num(human_bytes(x.copied)),
                    num(human_bytes(x.remaining)),
                    num("-" if x.rate is None else human_bytes(x.rate)),
                    num(eta_text(x.eta_s)),
                ]
            rows.append((f"{r.topic}\0{r.partition}", cells))
        fill_table(self.query_one("#reassignments", DataTable), rows)

    def _replicas(self, r: ReassignmentInfo) -> Text:
        """'2,3,1 +3 -1': the full set, then the moving replicas in colour."""
        text = plain(ids(r.replicas))
        if r.adding:
            text.append(" ")
            text.append_text(tone(self.app, "+" + ids(r.adding), "success", bold=False))
        if r.removing:
            text.append(" ")
            text.append_text(tone(self.app, "-" + ids(r.removing), "warning", bold=False))
        return text

    def _draw_leaders(self, snap: ClusterSnapshot) -> None:
        imbalance = snap.leader_imbalance()
        loads = snap.broker_loads()
        not_preferred = [p for p in snap.partitions if p.leader != p.preferred_leader]
        title = plain("Not led by the preferred replica ")
        count = tone(self.app, str(len(not_preferred)), "warning" if not_preferred else "success")
        title.append_text(_inline(count))
        title.append(f"   (auto rebalance above {IMBALANCE_PERCENTAGE}% imbalance)")
        self.query_one("#leaders-title", Static).update(title)
        rows = []
        for n in sorted(set(loads) | set(imbalance)):
            m = imbalance.get(n)
            preferred = len(m.preferred) if m else 0
            elsewhere = len(m.not_led) if m else 0
            ratio = m.ratio if m else 0.0
            pct = f"{100 * ratio:.1f}%"
            rows.append(
                (
                    str(n),
                    [
                        num(n),
                        num(loads[n].leaders if n in loads else 0),
                        num(preferred),
                        num(preferred - elsewhere),
                        tone(self.app, str(elsewhere), "warning") if elsewhere else num(0),
                        tone(self.app, pct, "error")
                        if ratio > IMBALANCE_PERCENTAGE / 100
                        else tone(self.app, pct, "warning")
                        if ratio
                        else num(pct),
                    ],
                )
            )
        fill_table(self.query_one("#imbalance", DataTable), rows)
        internal = {t.name for t in snap.topics if t.internal}
        not_preferred.sort(key=lambda p: (p.topic in internal, p.topic, p.partition))
        fill_table(
            self.query_one("#not-preferred", DataTable),
            [(f"{p.topic}\0{p.partition}", self._partition_cells(p)) for p in not_preferred],
        )

    def _partition_cells(self, p: PartitionInfo) -> list[object]:
        election: Text
        if p.offline:
            election = tone(self.app, "offline", "error")
        elif p.preferred_leader in p.isr:
            election = tone(self.app, "possible", "success", bold=False)
        else:
            election = tone(self.app, "preferred not in ISR", "warning")
        return [
            plain(p.topic),
            num(p.partition),
            tone(self.app, "none", "error") if p.offline else num(p.leader),
            num(p.preferred_leader),
            plain(ids(p.replicas)),
            plain(ids(p.isr)),
            election,
        ]

    # --- actions -------------------------------------------------------------------

    def _selected(self, table_id: str) -> tuple[str, int] | None:
        key = selected_key(self.query_one(f"#{table_id}", DataTable))
        if key is None:
            return None
        topic, _, partition = key.partition("\0")
        return topic, int(partition)

    def action_execute(self) -> None:
        self.ask(StartReassignment())

    def action_cancel(self) -> None:
        tp = self._selected("reassignments")
        if tp is None:
            self.notify("No reassignment selected (none in progress)", severity="warning")
            return
        self.ask(CancelReassignments([tp]))

    def action_cancel_all(self) -> None:
        self.ask(CancelReassignments(None))

    def action_elect(self) -> None:
        # the partition under the cursor of the focused table, else of the list of
        # partitions not led by their preferred replica
        focused = self.focused.id if isinstance(self.focused, DataTable) else None
        tp = self._selected("reassignments") if focused == "reassignments" else None
        tp = tp or self._selected("not-preferred")
        if tp is None:
            self.notify("No partition selected", severity="warning")
            return
        self.ask(ElectPreferredLeaders([tp]))

    def action_elect_all(self) -> None:
        self.ask(ElectPreferredLeaders(None))
