"""`KtApp`: the Textual application behind `kt tui`.

The app owns the refresh loop: every `interval` seconds (unless paused) a
Textual worker asks the sampler for a `ClusterSnapshot`, adds it to the
`History` and redraws the active screen. Samplers are injected (any object with
`sample()` and `close()`, sync or async), so tests feed deterministic snapshots
and the real `ClusterSampler` never runs on the interface's loop. A failed
refresh is just a snapshot with `error` set: the status line shows the outage,
the screens keep the last good data, and the next tick tries again (the
sampler reconnects from the bootstrap list on its own).

Actions (create/delete topic, add partitions, alter a config, reset a group's
offsets, start or cancel a reassignment, elect preferred leaders) go form (when
they need input) -> confirmation showing what will happen -> worker.

The app imports its screens; screens never import the app. They ask it for
navigation and actions with the messages of `kt.tui.host`, handled below.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any, ClassVar, Protocol, runtime_checkable

from textual.app import App, SystemCommand
from textual.binding import Binding, BindingType
from textual.screen import ModalScreen, Screen
from textual.timer import Timer

from kt.tui import host
from kt.tui.model import ClusterSnapshot, History
from kt.tui.screens.base import DashboardScreen
from kt.tui.screens.brokers import BrokersScreen
from kt.tui.screens.dialogs import (
    ActionRequest,
    AddPartitionsForm,
    AlterConfigForm,
    ConfirmScreen,
    CreateTopicForm,
    ResetOffsetsForm,
    StartReassignmentForm,
)
from kt.tui.screens.group_detail import GroupDetailScreen
from kt.tui.screens.groups import GroupsScreen
from kt.tui.screens.help import HelpScreen
from kt.tui.screens.logdirs import LogDirsScreen
from kt.tui.screens.messages import MessagesScreen
from kt.tui.screens.overview import OverviewScreen
from kt.tui.screens.reassignments import ReassignmentsScreen
from kt.tui.screens.topic_detail import TopicDetailScreen
from kt.tui.screens.topics import TopicsScreen
from kt.tui.screens.transactions import TransactionsScreen

if TYPE_CHECKING:
    from kt.client import KafkaClient

#: refresh intervals the +/- keys step through (seconds)
INTERVAL_STEPS = (0.5, 1.0, 2.0, 5.0, 10.0, 30.0, 60.0)
#: actions that destroy something: their confirmation is styled as dangerous
DANGEROUS = frozenset({"delete_topic", "reset_offsets", "cancel_reassignments"})


class Sampler(Protocol):
    """What the app needs of a sampler (kt.tui.sampler.ClusterSampler or a fake)."""

    def sample(self) -> Any:  # ClusterSnapshot or an awaitable of one
        """One refresh; never raises."""

    def close(self) -> Any:  # None or an awaitable
        """Release connections."""


@runtime_checkable
class TopicWatcher(Protocol):
    """A sampler that asks more about one topic (its producers and last stable
    offsets) when told which one is on view (ClusterSampler)."""

    watched_topic: str | None


class Outcome(Protocol):
    """What an action or its description returns (kt.tui.actions.ActionResult)."""

    @property
    def ok(self) -> bool: ...

    @property
    def message(self) -> str: ...


# Actions are any object with, for each ActionRequest kind, `async describe_<kind>(**params)`
# and `async <kind>(**params)` returning an Outcome: kt.tui.actions.ClusterActions, or a
# fake in tests. They never raise for cluster-side problems (ok is False instead).


class KtApp(App[None]):
    """The live cluster dashboard."""

    TITLE = "kt tui"
    CSS_PATH = "app.tcss"
    MODES: ClassVar[dict[str, str | Callable[[], Screen[Any]]]] = {
        "overview": OverviewScreen,
        "topics": TopicsScreen,
        "groups": GroupsScreen,
        "logdirs": LogDirsScreen,
        "messages": MessagesScreen,
        "brokers": BrokersScreen,
        "help": HelpScreen,
    }
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("1", "switch_mode('overview')", show=False, description="Overview"),
        Binding("2", "switch_mode('topics')", show=False, description="Topics"),
        Binding("3", "switch_mode('groups')", show=False, description="Groups"),
        Binding("4", "switch_mode('logdirs')", show=False, description="Log dirs"),
        Binding("5", "switch_mode('messages')", show=False, description="Messages"),
        Binding("6", "switch_mode('brokers')", show=False, description="Brokers"),
        Binding("question_mark,f1", "switch_mode('help')", "Help"),
        Binding("p", "toggle_pause", "Pause"),
        Binding("f5,ctrl+r", "refresh_now", "Refresh now", show=False),
        Binding("plus", "faster", "Faster refresh", show=False),
        Binding("minus", "slower", "Slower refresh", show=False),
        Binding("q", "quit", "Quit"),
        Binding("ctrl+p", "command_palette", "Commands", show=False),
    ]

    def __init__(
        self,
        sampler: Sampler,
        *,
        bootstrap: str,
        interval: float = 2.0,
        client_factory: Callable[[], KafkaClient] | None = None,
        actions: Any = None,
        history: History | None = None,
        paused: bool = False,
        theme: str | None = None,
        principal: str | None = None,
    ) -> None:
        super().__init__()
        #: who the connections authenticate as, shown in the status line
        self.principal = principal
        self.sampler = sampler
        self.bootstrap = bootstrap
        self.interval = interval
        self.client_factory = client_factory
        self.actions = actions
        self.history = history if history is not None else History()
        self.paused = paused
        self._kt_theme = theme
        self._refresh_timer: Timer | None = None
        self._kt_sampling = False
        self._kt_was_down = False
        self._sampler_closed = False
        #: the topic whose detail is on view (its open transactions are sampled)
        self.watched_topic: str | None = None
        #: how many snapshots this app has taken (tests wait on it)
        self.refreshes = 0

    # --- lifecycle -----------------------------------------------------------------------

    def on_mount(self) -> None:
        if self._kt_theme:
            self.theme = self._kt_theme
        self.switch_mode("overview")
        self._refresh_timer = self.set_interval(self.interval, self._tick)
        if not self.paused:
            self.refresh_now()

    async def close_sampler(self) -> None:
        """Release the sampler's connections (idempotent)."""
        if self._sampler_closed:
            return
        self._sampler_closed = True
        with contextlib.suppress(Exception):
            result = self.sampler.close()
            if inspect.isawaitable(result):
                await result

    async def action_quit(self) -> None:
        await self.close_sampler()
        self.exit()

    # --- refreshing ----------------------------------------------------------------------

    def _tick(self) -> None:
        if not self.paused:
            self.refresh_now()

    def refresh_now(self) -> None:
        """Start a refresh in a worker unless one is under way."""
        if self._kt_sampling or self._sampler_closed:
            return
        self._kt_sampling = True
        self.run_worker(self._sample(), group="sample", exit_on_error=False)

    async def _sample(self) -> None:
        try:
            if inspect.iscoroutinefunction(self.sampler.sample):
                snap = await self.sampler.sample()
            else:
                snap = await asyncio.to_thread(self.sampler.sample)
                if inspect.isawaitable(snap):
                    snap = await snap
        finally:
            self._kt_sampling = False
        self.add_snapshot(snap)

    def add_snapshot(self, snap: ClusterSnapshot) -> None:
        """Record a snapshot and redraw (also how tests inject one)."""
        self.history.add(snap)
        self.refreshes += 1
        if snap.error is not None and not self._kt_was_down:
            self.notify(f"Lost the cluster: {snap.error}", severity="error", timeout=5)
        elif snap.error is None and self._kt_was_down:
            self.notify("Reconnected to the cluster", timeout=3)
        self._kt_was_down = snap.error is not None
        self.redraw()

    def redraw(self) -> None:
        """Redraw the active dashboard screen."""
        screen = self.screen
        if isinstance(screen, DashboardScreen) and screen.is_mounted:
            screen.redraw()

    def watch_topic(self, name: str | None) -> None:
        """Tell the sampler which topic's transactions to ask for (None: none);
        a new one is sampled at once rather than at the next tick."""
        if name == self.watched_topic:
            return
        self.watched_topic = name
        if isinstance(self.sampler, TopicWatcher):
            self.sampler.watched_topic = name
            if name is not None and not self.paused:
                self.refresh_now()

    def action_refresh_now(self) -> None:
        self.refresh_now()

    def action_toggle_pause(self) -> None:
        self.paused = not self.paused
        self.notify("Refresh paused" if self.paused else "Refresh resumed", timeout=2)
        if not self.paused:
            self.refresh_now()
        self.redraw()

    def set_interval_seconds(self, seconds: float) -> None:
        """Change the refresh interval (restarts the timer)."""
        self.interval = seconds
        if self._refresh_timer is not None:
            self._refresh_timer.stop()
        self._refresh_timer = self.set_interval(self.interval, self._tick)
        self.notify(f"Refreshing every {seconds:g}s", timeout=2)
        self.redraw()

    def action_faster(self) -> None:
        faster = [s for s in INTERVAL_STEPS if s < self.interval]
        if faster:
            self.set_interval_seconds(faster[-1])

    def action_slower(self) -> None:
        slower = [s for s in INTERVAL_STEPS if s > self.interval]
        if slower:
            self.set_interval_seconds(slower[0])

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        # No screen switching from inside a dialog: answer it first.
        return not (action == "switch_mode" and isinstance(self.screen, ModalScreen))

    # --- navigation ------------------------------------------------------------------------

    def open_messages(self, topic: str, partition: int) -> None:
        """Switch to the Messages screen on `topic`-`partition`."""
        self.switch_mode("messages")
        screen = self.screen
        if isinstance(screen, MessagesScreen):
            screen.open(topic, partition)

    def open_topic(self, name: str) -> None:
        """Topics screen, then the detail of `name`."""
        self.switch_mode("topics")
        self.push_screen(TopicDetailScreen(name))

    def open_group(self, group_id: str) -> None:
        """Groups screen, then the detail of `group_id`."""
        self.switch_mode("groups")
        self.push_screen(GroupDetailScreen(group_id))

    def open_reassignments(self) -> None:
        """Brokers screen, then reassignments and preferred leaders."""
        self.switch_mode("brokers")
        if not isinstance(self.screen, ReassignmentsScreen):
            self.push_screen(ReassignmentsScreen())

    def open_transactions(self) -> None:
        """Brokers screen, then the cluster's transactions."""
        self.switch_mode("brokers")
        if not isinstance(self.screen, TransactionsScreen):
            self.push_screen(TransactionsScreen())

    # --- actions -------------------------------------------------------------------------

    def start_create_topic(self) -> None:
        """Form, confirmation, then create."""
        self._ask(CreateTopicForm())

    def start_delete_topic(self, name: str) -> None:
        """Confirmation, then delete."""
        self.confirm(ActionRequest("delete_topic", {"name": name}))

    def start_add_partitions(self, name: str) -> None:
        """Form (new total), confirmation, then add partitions."""
        snap = self.history.latest_ok
        info = snap.topic(name) if snap else None
        self._ask(AddPartitionsForm(name, len(info.partitions) if info else 0))

    def start_alter_config(self, name: str) -> None:
        """Form (name=value), confirmation, then alter."""
        snap = self.history.latest_ok
        info = snap.topic(name) if snap else None
        self._ask(AlterConfigForm(name, dict(info.overridden_configs) if info else {}))

    def start_reset_offsets(self, group_id: str) -> None:
        """Form (topic, target), confirmation, then reset."""
        snap = self.history.latest_ok
        g = snap.group(group_id) if snap else None
        topics = sorted({pl.topic for pl in g.lags}) if g else []
        self._ask(ResetOffsetsForm(group_id, topics))

    def start_reassignment(self) -> None:
        """Form (plan file, throttle; checked there), confirmation, then start."""
        snap = self.history.latest_ok
        topics = snap.topics if snap else ()
        partitions = {t.name: [p.partition for p in t.partitions] for t in topics}
        brokers = [b.node_id for b in snap.brokers] if snap else []
        self._ask(StartReassignmentForm(partitions, brokers))

    def start_cancel_reassignments(self, partitions: list[tuple[str, int]] | None) -> None:
        """Confirmation, then cancel those reassignments (None: all in progress)."""
        self.confirm(ActionRequest("cancel_reassignments", {"partitions": partitions}))

    def start_elect_preferred_leaders(self, partitions: list[tuple[str, int]] | None) -> None:
        """Confirmation, then a preferred leader election (None: every partition)."""
        self.confirm(ActionRequest("elect_preferred_leaders", {"partitions": partitions}))

    def _ask(self, form: Screen[ActionRequest | None]) -> None:
        def done(request: ActionRequest | None) -> None:
            if request is not None:
                self.confirm(request)

        self.push_screen(form, done)

    def confirm(self, request: ActionRequest) -> None:
        """Ask the cluster what `request` would do, show it, run it on yes."""
        if self.actions is None:
            self.notify("Actions are not available here", severity="error")
            return
        self.run_worker(self._describe(request), group="action", exit_on_error=False)

    async def _describe(self, request: ActionRequest) -> None:
        try:
            describe = getattr(self.actions, f"describe_{request.kind}")
            outcome: Outcome = await describe(**request.params)
        except Exception as exc:  # a bug in an action must not end the dashboard
            self.notify(f"{request.title}: {exc}", severity="error", timeout=8)
            return
        if not outcome.ok:
            self.notify(
                outcome.message, title=f"Cannot {request.title}", severity="error", timeout=8
            )
            return

        def answered(yes: bool | None) -> None:
            if yes:
                self.run_worker(self._perform(request), group="action", exit_on_error=False)

        title = request.title.capitalize() + "?"
        danger = request.kind in DANGEROUS
        self.push_screen(ConfirmScreen(title, outcome.message, danger=danger), answered)

    async def _perform(self, request: ActionRequest) -> None:
        try:
            outcome: Outcome = await getattr(self.actions, request.kind)(**request.params)
        except Exception as exc:
            self.notify(f"{request.title} failed: {exc}", severity="error", timeout=8)
            return
        if outcome.ok:
            self.notify(outcome.message, timeout=5)
        else:
            self.notify(
                outcome.message, title=f"{request.title} failed", severity="error", timeout=8
            )
        self.refresh_now()

    # --- what screens ask for (kt.tui.host's messages) ------------------------------------

    def on_open_messages(self, message: host.OpenMessages) -> None:
        self.open_messages(message.topic, message.partition)

    def on_open_topic(self, message: host.OpenTopic) -> None:
        self.open_topic(message.topic)

    def on_open_group(self, message: host.OpenGroup) -> None:
        self.open_group(message.group_id)

    def on_open_reassignments(self, message: host.OpenReassignments) -> None:
        self.open_reassignments()

    def on_open_transactions(self, message: host.OpenTransactions) -> None:
        self.open_transactions()

    def on_watch_topic(self, message: host.WatchTopic) -> None:
        self.watch_topic(message.topic)

    def on_create_topic(self, message: host.CreateTopic) -> None:
        self.start_create_topic()

    def on_delete_topic(self, message: host.DeleteTopic) -> None:
        self.start_delete_topic(message.topic)

    def on_add_partitions(self, message: host.AddPartitions) -> None:
        self.start_add_partitions(message.topic)

    def on_alter_config(self, message: host.AlterConfig) -> None:
        self.start_alter_config(message.topic)

    def on_reset_offsets(self, message: host.ResetOffsets) -> None:
        self.start_reset_offsets(message.group_id)

    def on_start_reassignment(self, message: host.StartReassignment) -> None:
        self.start_reassignment()

    def on_cancel_reassignments(self, message: host.CancelReassignments) -> None:
        self.start_cancel_reassignments(message.partitions)

    def on_elect_preferred_leaders(self, message: host.ElectPreferredLeaders) -> None:
        self.start_elect_preferred_leaders(message.partitions)

    # --- command palette -----------------------------------------------------------------

    def get_system_commands(self, screen: Screen[Any]) -> Iterable[SystemCommand]:
        yield from super().get_system_commands(screen)
        for mode, title in (
            ("overview", "Cluster overview"),
            ("topics", "Topics"),
            ("groups", "Consumer groups"),
            ("logdirs", "Log directories"),
            ("messages", "Messages"),
            ("brokers", "Brokers"),
            ("help", "Help: key bindings"),
        ):
            yield SystemCommand(
                f"Go to: {title}", f"Show the {title.lower()} screen", _mode(self, mode)
            )
        yield SystemCommand(
            "Pause / resume refresh",
            "Stop or restart the periodic refresh",
            self.action_toggle_pause,
        )
        yield SystemCommand("Refresh now", "Sample the cluster at once", self.refresh_now)
        yield SystemCommand("Create topic", "Create a topic (asks first)", self.start_create_topic)
        yield SystemCommand(
            "Reassignments and preferred leaders",
            "Reassignments in progress, throttles, leader imbalance per broker",
            self.open_reassignments,
        )
        yield SystemCommand(
            "Transactions",
            "Transactional ids, the ongoing ones with their duration",
            self.open_transactions,
        )
        yield SystemCommand(
            "Start a reassignment", "From a plan file (asks first)", self.start_reassignment
        )
        snap = self.history.latest_ok
        if snap is not None:
            for t in snap.topics:
                yield SystemCommand(
                    f"Topic: {t.name}",
                    f"{len(t.partitions)} partitions",
                    _bind(self.open_topic, t.name),
                    discover=False,
                )
            for g in snap.groups:
                yield SystemCommand(
                    f"Group: {g.group_id}",
                    f"{g.state}, lag {g.total_lag}",
                    _bind(self.open_group, g.group_id),
                    discover=False,
                )


def _mode(app: App[Any], mode: str) -> Callable[[], None]:
    def go() -> None:
        app.switch_mode(mode)

    return go


def _bind(func: Callable[[str], None], arg: str) -> Callable[[], None]:
    def go() -> None:
        func(arg)

    return go
