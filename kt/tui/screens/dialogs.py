"""Dialogs behind every action: a form that asks what to do, and a confirmation
that shows exactly what will happen (the `describe_*` text of kt/tui/actions.py)
before anything is sent to the cluster."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any, ClassVar

from textual import on
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical
from textual.screen import ModalScreen
from textual.widgets import Button, Input, Label, Select, Static

from kt.admin.reassign_plan import PlanError, check_plan, parse_plan
from kt.tui.widgets.format import plain


@dataclass(frozen=True)
class ActionRequest:
    """An action the operator asked for: `kind` names the methods of
    kt.tui.actions.ClusterActions (`kind(**params)` and `describe_kind(**params)`)."""

    kind: str
    params: dict[str, Any] = field(default_factory=dict)

    @property
    def title(self) -> str:
        """'create topic' for 'create_topic'."""
        return self.kind.replace("_", " ")


class ConfirmScreen(ModalScreen[bool]):
    """Yes/no over a description of what will happen; No is the default."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape,n", "answer(False)", "Cancel"),
        Binding("y", "answer(True)", "Confirm"),
    ]

    def __init__(self, title: str, description: str, *, danger: bool = False) -> None:
        super().__init__()
        self.title_text = title
        self.description = description
        self.danger = danger

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog" + (" -danger" if self.danger else "")):
            yield Label(self.title_text, classes="dialog-title")
            yield Static(plain(self.description), classes="dialog-body", id="confirm-text")
            with Horizontal(classes="dialog-buttons"):
                yield Button("No (n)", id="no", variant="primary")
                yield Button("Yes (y)", id="yes", variant="error" if self.danger else "success")

    def on_mount(self) -> None:
        self.query_one("#no", Button).focus()

    @on(Button.Pressed)
    def _pressed(self, event: Button.Pressed) -> None:
        self.dismiss(event.button.id == "yes")

    def action_answer(self, yes: bool) -> None:
        self.dismiss(yes)


class FormScreen(ModalScreen["ActionRequest | None"]):
    """A small form; Enter in the last field or OK submits, Escape cancels."""

    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape", "cancel", "Cancel")]

    title_text = ""
    hint = ""

    def fields(self) -> ComposeResult:
        """The form's inputs."""
        yield from ()

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog"):
            yield Label(self.title_text, classes="dialog-title")
            if self.hint:
                yield Static(plain(self.hint), classes="dialog-hint")
            yield from self.fields()
            yield Static("", id="form-error", classes="dialog-error")
            with Horizontal(classes="dialog-buttons"):
                yield Button("Cancel", id="cancel")
                yield Button("OK", id="ok", variant="primary")

    def on_mount(self) -> None:
        inputs = self.query(Input)
        if inputs:
            inputs.first().focus()

    def build(self) -> ActionRequest:
        """The request from the fields; raise ValueError with a message when invalid."""
        raise NotImplementedError

    def value(self, field_id: str) -> str:
        """A field's text, stripped."""
        return self.query_one(f"#{field_id}", Input).value.strip()

    def submit(self) -> None:
        """Validate and close with the request, or show what is wrong."""
        try:
            request = self.build()
        except ValueError as exc:
            self.query_one("#form-error", Static).update(plain(str(exc)))
            return
        self.dismiss(request)

    @on(Input.Submitted)
    def _enter(self, event: Input.Submitted) -> None:
        inputs = list(self.query(Input))
        if event.input is inputs[-1]:
            self.submit()
        else:
            inputs[inputs.index(event.input) + 1].focus()

    @on(Button.Pressed)
    def _pressed(self, event: Button.Pressed) -> None:
        if event.button.id == "ok":
            self.submit()
        else:
            self.dismiss(None)

    def action_cancel(self) -> None:
        self.dismiss(None)


def _labelled(label: str, widget: Input | Select[str]) -> ComposeResult:
    with Horizontal(classes="form-row"):
        yield Label(label, classes="form-label")
        yield widget


def parse_configs(text: str) -> dict[str, str]:
    """'a=1,b=2' -> {'a': '1', 'b': '2'}; ValueError on an entry without '='."""
    out: dict[str, str] = {}
    for part in filter(None, (p.strip() for p in text.split(","))):
        key, sep, value = part.partition("=")
        if not sep or not key.strip():
            raise ValueError(f"config {part!r}: expected NAME=VALUE")
        out[key.strip()] = value.strip()
    return out


def _positive(text: str, what: str, *, default: int | None = None) -> int:
    if not text and default is not None:
        return default
    try:
        n = int(text)
    except ValueError:
        raise ValueError(f"{what}: a whole number, please") from None
    if n <= 0 and not (default is not None and n == default):
        raise ValueError(f"{what}: must be at least 1")
    return n


class CreateTopicForm(FormScreen):
    """Name, partitions, replication factor, configs."""

    title_text = "Create topic"
    hint = "Empty partitions / replication factor: the broker's defaults."

    def fields(self) -> ComposeResult:
        yield from _labelled("name", Input(id="f-name", placeholder="orders"))
        yield from _labelled("partitions", Input(id="f-partitions", placeholder="default"))
        yield from _labelled("replication", Input(id="f-rf", placeholder="default"))
        yield from _labelled(
            "configs", Input(id="f-configs", placeholder="retention.ms=86400000,...")
        )

    def build(self) -> ActionRequest:
        name = self.value("f-name")
        if not name:
            raise ValueError("name: required")
        return ActionRequest(
            "create_topic",
            {
                "name": name,
                "partitions": _positive(self.value("f-partitions"), "partitions", default=-1),
                "replication_factor": _positive(self.value("f-rf"), "replication", default=-1),
                "configs": parse_configs(self.value("f-configs")),
            },
        )


class AddPartitionsForm(FormScreen):
    """The new (larger) partition count of a topic."""

    title_text = "Add partitions"

    def __init__(self, topic: str, current: int) -> None:
        super().__init__()
        self.topic = topic
        self.current = current
        self.hint = f"{topic} has {current} partition(s). New total:"

    def fields(self) -> ComposeResult:
        yield from _labelled("total", Input(id="f-count", value=str(self.current + 1)))

    def build(self) -> ActionRequest:
        count = _positive(self.value("f-count"), "total")
        if count <= self.current:
            raise ValueError(f"total: must be more than {self.current}")
        return ActionRequest("add_partitions", {"topic": self.topic, "total": count})


class AlterConfigForm(FormScreen):
    """Set (or, with an empty value, delete) one config of a topic."""

    title_text = "Alter topic config"

    def __init__(self, topic: str, overridden: dict[str, str]) -> None:
        super().__init__()
        self.topic = topic
        now = ", ".join(f"{k}={v}" for k, v in sorted(overridden.items())) or "none"
        self.hint = f"{topic} overrides: {now}\nAn empty value deletes the override."

    def fields(self) -> ComposeResult:
        yield from _labelled("config", Input(id="f-key", placeholder="retention.ms"))
        yield from _labelled("value", Input(id="f-value", placeholder="(empty: delete)"))

    def build(self) -> ActionRequest:
        key = self.value("f-key")
        if not key:
            raise ValueError("config: required")
        value = self.value("f-value")
        return ActionRequest(
            "alter_topic_config", {"topic": self.topic, "key": key, "value": value or None}
        )


RESET_TARGETS = [
    ("earliest", "earliest"),
    ("latest", "latest"),
    ("offset N", "offset"),
    ("date-time", "timestamp"),
]


def parse_when(text: str) -> int:
    """An ISO date-time (local time unless it ends in Z or +hh:mm), or @epoch-ms,
    as ms since the epoch; ValueError otherwise."""
    raw = text.strip()
    if raw.startswith("@"):
        return int(raw[1:])
    if raw.endswith(("Z", "z")):
        raw = raw[:-1] + "+00:00"
    return int(datetime.fromisoformat(raw).timestamp() * 1000)


class ResetOffsetsForm(FormScreen):
    """Where to move a group's committed offsets (the group must be inactive)."""

    title_text = "Reset group offsets"

    def __init__(self, group_id: str, topics: list[str]) -> None:
        super().__init__()
        self.group_id = group_id
        self.topics = topics
        self.hint = f"Group {group_id} (must have no active members)."

    def fields(self) -> ComposeResult:
        yield from _labelled(
            "topics",
            Input(
                id="f-topic",
                value=self.topics[0] if len(self.topics) == 1 else "",
                placeholder="empty: all of " + (", ".join(self.topics) or "the group's topics"),
            ),
        )
        yield from _labelled(
            "to", Select(RESET_TARGETS, id="f-target", value="earliest", allow_blank=False)
        )
        yield from _labelled(
            "value", Input(id="f-value", placeholder="offset, or ISO date-time / @epoch-ms")
        )

    def build(self) -> ActionRequest:
        target = str(self.query_one("#f-target", Select).value)
        raw = self.value("f-value")
        value: int | None = None
        if target == "offset":
            try:
                value = int(raw)
            except ValueError:
                raise ValueError("value: the offset, a whole number") from None
            if value < 0:
                raise ValueError("value: an offset is at least 0")
        elif target == "timestamp":
            try:
                value = parse_when(raw)
            except ValueError:
                raise ValueError("value: an ISO date-time, e.g. 2026-01-31T10:00:00") from None
        topics = [t.strip() for t in self.value("f-topic").split(",") if t.strip()]
        return ActionRequest(
            "reset_offsets",
            {"group_id": self.group_id, "to": target, "value": value, "topics": topics or None},
        )


class StartReassignmentForm(FormScreen):
    """A reassignment plan file (kafka-reassign-partitions.sh's JSON) and an optional
    throttle. The file is read and checked here, with the CLI's parser and checks
    against the last refresh; a bad file keeps the dialog open with the error."""

    title_text = "Start a reassignment"
    hint = (
        'A plan file: {"version":1,"partitions":[{"topic":...,"partition":...,'
        '"replicas":[...]}]}\n(kt reassign-partitions --generate writes one.) '
        "Empty throttle: none."
    )

    def __init__(self, partitions: Mapping[str, Iterable[int]], brokers: Iterable[int]) -> None:
        super().__init__()
        self.partitions = {t: list(ps) for t, ps in partitions.items()}
        self.brokers = list(brokers)

    def fields(self) -> ComposeResult:
        yield from _labelled("plan file", Input(id="f-path", placeholder="plan.json"))
        yield from _labelled("throttle B/s", Input(id="f-throttle", placeholder="none"))

    def build(self) -> ActionRequest:
        path = self.value("f-path")
        if not path:
            raise ValueError("plan file: required")
        file = Path(path).expanduser()
        try:
            text = file.read_text()
        except OSError as exc:
            raise ValueError(f"plan file: {exc.strerror or exc}: {path}") from None
        except UnicodeDecodeError:
            raise ValueError(f"plan file: not a text file: {path}") from None
        try:
            plan = parse_plan(text)
            check_plan(plan, self.partitions, self.brokers)
        except PlanError as exc:
            raise ValueError(str(exc)) from None
        raw = self.value("f-throttle")
        throttle = -1
        if raw:
            try:
                throttle = int(raw)
            except ValueError:
                raise ValueError("throttle: bytes per second, a whole number") from None
            if throttle < 1:
                raise ValueError("throttle: at least 1 B/s (empty: no throttle)")
        return ActionRequest(
            "start_reassignment", {"plan": plan, "throttle": throttle, "source": path}
        )
