"""Messages: tail a partition live, jump to an offset or a time, filter by key;
keys and values as text, pretty JSON or hex.

Records are fetched with kt's client library in a Textual worker (an asyncio
task on the app's loop: the network never blocks input); a lost broker makes
the worker reconnect on its own and carry on from the next offset.
"""

from __future__ import annotations

import asyncio
import contextlib
from datetime import datetime
from typing import TYPE_CHECKING, ClassVar

from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, VerticalScroll
from textual.css.query import NoMatches
from textual.widgets import DataTable, Input, Static

from kt.tui.screens.base import DashboardScreen, selected_key
from kt.tui.widgets.format import num, plain, timestamp_ms, tone
from kt.tui.widgets.payload import FORMATS, as_text, one_line, render

if TYPE_CHECKING:
    from kt.client import ConsumerRecord, KafkaClient

#: records kept in memory (and in the table) per tail
MAX_RECORDS = 1000
DEFAULT_START = "-100"


def parse_start(text: str) -> tuple[str, int]:
    """What the 'from' field asks for: ('earliest'|'latest', 0), ('offset', n),
    ('back', n records before the end) or ('time', ms since the epoch).

    Accepts: earliest/beginning, latest/end, an offset, -N, an ISO date-time
    (local time unless it has an offset or a Z), or @<epoch ms>. Raises ValueError.
    """
    t = text.strip().lower()
    if t in ("", "latest", "end"):
        return ("latest", 0) if t else ("back", int(DEFAULT_START[1:]))
    if t in ("earliest", "beginning", "start"):
        return ("earliest", 0)
    if t.startswith("@"):
        return ("time", int(t[1:]))
    if t.lstrip("-").isdigit():
        n = int(t)
        return ("back", -n) if n < 0 else ("offset", n)
    raw = text.strip()
    if raw.endswith(("Z", "z")):
        raw = raw[:-1] + "+00:00"
    when = datetime.fromisoformat(raw)
    return ("time", int(when.timestamp() * 1000))


class MessagesScreen(DashboardScreen):
    """Tail one partition, jump around in it, filter by key."""

    TITLE_TEXT = "Messages"
    MODE = "messages"

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("t", "toggle_tail", "Tail on/off"),
        Binding("f", "cycle_format", "Format"),
        Binding("g", "focus_from", "Go to"),
        Binding("slash", "focus_key", "Key filter"),
        Binding("T", "focus_topic", "Topic", show=False),
        Binding("escape", "focus_table", "Table", show=False),
    ]

    def __init__(self) -> None:
        super().__init__()
        self.records: list[ConsumerRecord] = []
        self.format = "text"
        self.tailing = True
        self.state = "enter a topic and partition, then Enter"
        self._resume = asyncio.Event()
        self._resume.set()
        self._position: tuple[str, int, int] | None = None  # topic, partition, next offset
        self._high_watermark = -1
        self._pending: tuple[str, int, str] | None = None

    def body(self) -> ComposeResult:
        with Horizontal(id="msg-controls"):
            yield Input(placeholder="topic", id="msg-topic", compact=True)
            yield Input(
                value="0", placeholder="part", id="msg-partition", type="integer", compact=True
            )
            yield Input(
                value=DEFAULT_START,
                placeholder="offset|-N|earliest|latest|time",
                id="msg-from",
                compact=True,
            )
            yield Input(placeholder="key filter", id="msg-key", compact=True)
        yield Static(id="msg-state")
        table: DataTable[object] = DataTable(id="records", cursor_type="row", zebra_stripes=True)
        table.add_column("offset", key="offset")
        table.add_column("timestamp", key="ts")
        table.add_column("key", key="key")
        table.add_column("value", key="value")
        yield table
        with VerticalScroll(id="record-detail"):
            yield Static(id="record-body")

    def on_mount(self) -> None:
        topic = self.query_one("#msg-topic", Input)
        snap = self.snapshot
        if not topic.value and snap is not None:
            user = [t for t in snap.topics if not t.internal]
            if user:  # the busiest topic is the likeliest to be looked at
                topic.value = max(user, key=lambda t: (t.end_offsets_sum, t.name)).name
        self.show_state()
        topic.focus()
        if self._pending is not None:
            pending, self._pending = self._pending, None
            self.open(*pending)

    # --- starting, tailing, jumping ------------------------------------------------------

    def open(self, topic: str, partition: int, start: str = DEFAULT_START) -> None:
        """Show `topic`-`partition` from `start` (see parse_start) and tail it."""
        if not self.query("#msg-topic"):  # not composed yet: on_mount opens it
            self._pending = (topic, partition, start)
            return
        self.query_one("#msg-topic", Input).value = topic
        self.query_one("#msg-partition", Input).value = str(partition)
        self.query_one("#msg-from", Input).value = start
        self.start()

    def start(self) -> None:
        """(Re)start reading with the values of the input fields."""
        topic = self.query_one("#msg-topic", Input).value.strip()
        part_text = self.query_one("#msg-partition", Input).value.strip() or "0"
        try:
            partition = int(part_text)
            spec = parse_start(self.query_one("#msg-from", Input).value)
        except ValueError as exc:
            self.state = f"bad position: {exc}"
            self.show_state()
            return
        if not topic:
            self.state = "which topic?"
            self.show_state()
            return
        self.records.clear()
        self.rebuild_table()
        self.state = f"reading {topic}-{partition}…"
        self.show_state()
        self._resume.set()
        if self.kt.client_factory is None:
            return  # no cluster behind this app (tests with canned records)
        self.tail(topic, partition, spec)
        self.query_one("#records", DataTable).focus()

    @work(exclusive=True, group="tail")
    async def tail(self, topic: str, partition: int, spec: tuple[str, int]) -> None:
        """Fetch from the partition until cancelled, reconnecting after failures."""
        from kt.client import EARLIEST, LATEST, KafkaConnectionError, KafkaError, KafkaTimeoutError
        from kt.protocol.errors import ErrorCode

        factory = self.kt.client_factory
        assert factory is not None
        tp = (topic, partition)
        offset: int | None = None
        while True:
            client: KafkaClient = factory()
            try:
                await client.start()
                if offset is None:
                    offset = await self._resolve(client, tp, spec, EARLIEST, LATEST)
                self.state = f"{topic}-{partition} from offset {offset}"
                self.show_state()
                while True:
                    await self._resume.wait()
                    got = await client.fetch({tp: offset}, max_wait_ms=500)
                    res = got[tp]
                    if res.error == ErrorCode.OFFSET_OUT_OF_RANGE:
                        offset = (await client.list_offsets([tp], EARLIEST))[tp][0]
                        continue
                    if res.error != ErrorCode.NONE:
                        raise KafkaError(res.error, f"fetch {topic}-{partition}")
                    offset = res.next_offset
                    self._high_watermark = res.high_watermark
                    self._position = (topic, partition, offset)
                    if res.records:
                        self.add_records(res.records)
                    if not self.tailing:
                        self._resume.clear()  # one page per jump; 't' follows again
                    self.show_state()
            except asyncio.CancelledError:
                raise
            except NoMatches:
                # The screen's widgets went (the screen closing) while a fetch was out:
                # nothing is left to show. A busy machine let a fetch land in that gap.
                return
            except (KafkaConnectionError, KafkaTimeoutError, KafkaError, OSError) as exc:
                self.state = f"{topic}-{partition}: {exc} — retrying"
                self.show_state(error=True)
                await asyncio.sleep(1.0)
            finally:
                with contextlib.suppress(Exception):
                    await client.close()

    async def _resolve(
        self,
        client: KafkaClient,
        tp: tuple[str, int],
        spec: tuple[str, int],
        earliest: int,
        latest: int,
    ) -> int:
        kind, n = spec
        if kind == "offset":
            return n
        if kind == "earliest":
            return (await client.list_offsets([tp], earliest))[tp][0]
        end = (await client.list_offsets([tp], latest))[tp][0]
        if kind == "latest":
            return end
        if kind == "back":
            start = (await client.list_offsets([tp], earliest))[tp][0]
            return max(start, end - n)
        found = (await client.list_offsets([tp], n))[tp][0]
        return end if found < 0 else found

    # --- the table -----------------------------------------------------------------------

    def key_filter(self) -> str:
        """The key filter (substring of the key as text)."""
        return self.query_one("#msg-key", Input).value

    def _matches(self, rec: ConsumerRecord) -> bool:
        f = self.key_filter()
        return not f or (rec.key is not None and f in as_text(rec.key))

    def _row(self, rec: ConsumerRecord) -> list[object]:
        return [
            num(rec.offset),
            plain(timestamp_ms(rec.timestamp)),
            plain(one_line(rec.key, self.format, 20)),
            plain(one_line(rec.value, self.format, 120)),
        ]

    def add_records(self, records: list[ConsumerRecord]) -> None:
        """Append records (the newest last), dropping the oldest beyond MAX_RECORDS."""
        table = self.query_one("#records", DataTable)
        following = table.row_count == 0 or table.cursor_row >= table.row_count - 1
        self.records.extend(records)
        overflow = len(self.records) - MAX_RECORDS
        if overflow > 0:
            for rec in self.records[:overflow]:
                with contextlib.suppress(Exception):
                    table.remove_row(str(rec.offset))
            del self.records[:overflow]
        for rec in records:
            if self._matches(rec):
                table.add_row(*self._row(rec), key=str(rec.offset))
        if following and table.row_count:
            table.move_cursor(row=table.row_count - 1, animate=False)
        self.show_detail()

    def rebuild_table(self) -> None:
        """Redraw every kept record (after a filter or format change)."""
        table = self.query_one("#records", DataTable)
        current = selected_key(table)
        table.clear()
        for rec in self.records:
            if self._matches(rec):
                table.add_row(*self._row(rec), key=str(rec.offset))
        if current is not None:
            with contextlib.suppress(Exception):
                table.move_cursor(row=table.get_row_index(current), animate=False)
        self.show_detail()

    def show_state(self, *, error: bool = False) -> None:
        """The line above the table: position, counts, modes."""
        shown = self.query_one("#records", DataTable).row_count
        extra = f" · end {self._high_watermark}" if self._high_watermark >= 0 else ""
        modes = (
            f" · {shown}/{len(self.records)} shown · {self.format} (f) · "
            f"tail {'on' if self.tailing else 'off'} (t)"
        )
        text = tone(self.app, self.state, "error") if error else plain(self.state)
        text.append(extra + modes)
        self.query_one("#msg-state", Static).update(text)

    def show_detail(self) -> None:
        """The selected record in full, in the chosen format."""
        body = self.query_one("#record-body", Static)
        key = selected_key(self.query_one("#records", DataTable))
        rec = next((r for r in self.records if str(r.offset) == key), None)
        if rec is None:
            body.update("")
            return
        text = Text(end="")
        text.append(f"offset {rec.offset}  {timestamp_ms(rec.timestamp)}", style="bold")
        if rec.headers:
            hdrs = ", ".join(f"{k}={as_text(v)}" for k, v in rec.headers)
            text.append(f"  headers: {hdrs}")
        text.append("\nkey: ", style="bold")
        text.append(render(rec.key, self.format))
        text.append("\nvalue: ", style="bold")
        text.append(render(rec.value, self.format))
        body.update(text)

    @on(DataTable.RowHighlighted, "#records")
    def _highlighted(self) -> None:
        self.show_detail()

    @on(Input.Submitted, "#msg-topic, #msg-partition, #msg-from")
    def _submitted(self) -> None:
        self.start()

    @on(Input.Changed, "#msg-key")
    def _key_changed(self) -> None:
        self.rebuild_table()
        self.show_state()

    @on(Input.Submitted, "#msg-key")
    def _key_done(self) -> None:
        self.query_one("#records", DataTable).focus()

    def action_toggle_tail(self) -> None:
        self.tailing = not self.tailing
        if self.tailing:
            self._resume.set()
        self.show_state()

    def action_cycle_format(self) -> None:
        self.format = FORMATS[(FORMATS.index(self.format) + 1) % len(FORMATS)]
        self.rebuild_table()
        self.show_state()

    def action_focus_from(self) -> None:
        self.query_one("#msg-from", Input).focus()

    def action_focus_key(self) -> None:
        self.query_one("#msg-key", Input).focus()

    def action_focus_topic(self) -> None:
        self.query_one("#msg-topic", Input).focus()

    def action_focus_table(self) -> None:
        self.query_one("#records", DataTable).focus()
