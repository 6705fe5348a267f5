"""The contract between the dashboard's screens and the app that hosts them.

Screens never import the app (`kt.tui.app` imports them). They read the state the
app keeps through `DashboardHost`, and ask it to navigate, to watch a topic or to
start an action by posting one of the Textual messages below to it; the app handles
each in an `on_<message>` method (`tests/unit/test_layering.py` keeps screens from
importing the app).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol

from textual.message import Message

from kt.tui.model import History

if TYPE_CHECKING:
    from kt.client import KafkaClient

TopicPartition = tuple[str, int]


class DashboardHost(Protocol):
    """What screens read of the app (kt.tui.app.KtApp)."""

    history: History
    bootstrap: str
    interval: float
    paused: bool
    client_factory: Callable[[], KafkaClient] | None
    #: who the connections authenticate as (SASL user, TLS certificate subject), if known
    principal: str | None


# --- navigation ----------------------------------------------------------------------


class OpenMessages(Message):
    """Show the Messages screen on a partition."""

    def __init__(self, topic: str, partition: int) -> None:
        super().__init__()
        self.topic = topic
        self.partition = partition


class OpenTopic(Message):
    """Show the detail of a topic (above the topics screen)."""

    def __init__(self, topic: str) -> None:
        super().__init__()
        self.topic = topic


class OpenGroup(Message):
    """Show the detail of a consumer group (above the groups screen)."""

    def __init__(self, group_id: str) -> None:
        super().__init__()
        self.group_id = group_id


class OpenReassignments(Message):
    """Show reassignments and preferred leaders (above the brokers screen)."""


class OpenTransactions(Message):
    """Show the cluster's transactions (above the brokers screen)."""


class WatchTopic(Message):
    """The topic whose detail is on view (None: none), whose open transactions the
    sampler asks for."""

    def __init__(self, topic: str | None) -> None:
        super().__init__()
        self.topic = topic


# --- actions: each goes form (when it needs input) -> confirmation -> worker ---------


class CreateTopic(Message):
    """Create a topic."""


class DeleteTopic(Message):
    """Delete a topic."""

    def __init__(self, topic: str) -> None:
        super().__init__()
        self.topic = topic


class AddPartitions(Message):
    """Add partitions to a topic."""

    def __init__(self, topic: str) -> None:
        super().__init__()
        self.topic = topic


class AlterConfig(Message):
    """Set or remove a topic config."""

    def __init__(self, topic: str) -> None:
        super().__init__()
        self.topic = topic


class ResetOffsets(Message):
    """Reset a group's committed offsets."""

    def __init__(self, group_id: str) -> None:
        super().__init__()
        self.group_id = group_id


class StartReassignment(Message):
    """Start a reassignment from a plan file."""


class CancelReassignments(Message):
    """Cancel reassignments in progress (None: all of them)."""

    def __init__(self, partitions: list[TopicPartition] | None) -> None:
        super().__init__()
        self.partitions = partitions


class ElectPreferredLeaders(Message):
    """Elect preferred leaders (None: wherever one is needed)."""

    def __init__(self, partitions: list[TopicPartition] | None) -> None:
        super().__init__()
        self.partitions = partitions
