"""The widgets' plumbing: the throttle, append-only Output streams, the front-end mirror.

Also the shared helpers of the ``test_widgets_*`` files (``WidgetHarness``):
widgets talk through a recording comm and a recording iopub sender into one
message log, shaped as ``jupyter_client`` delivers iopub messages, and the
``FrontEndMirror`` replays that log into what JupyterLab would show. Time is
a fake clock with a fake timer queue, so throttling is deterministic.
"""

from __future__ import annotations

import heapq
import itertools
import json
from collections.abc import Callable
from typing import Any

import comm
import pytest
from comm.base_comm import BaseComm
from frontend_mirror import FrontEndMirror

from pi_kernel.widgets.stream_output import OutputRouter, StreamOutput
from pi_kernel.widgets.throttle import Throttle

PARENT = "execute-request-1"

# --------------------------------------------------------------------------- helpers (imported by other files)


def iopub(msg_type: str, content: dict[str, Any], parent: str = PARENT) -> dict[str, Any]:
    # A JSON round trip, as the kernel's session would do: non-JSON values fail here too.
    return {
        "header": {"msg_type": msg_type},
        "parent_header": {"msg_id": parent},
        "content": json.loads(json.dumps(content)),
    }


class RecordingSender:
    """An ``IopubSender`` that appends to a message log."""

    def __init__(self, log: list[dict[str, Any]], parent: str = PARENT) -> None:
        self.log = log
        self.parent = parent

    @property
    def parent_msg_id(self) -> str:
        return self.parent

    def send(self, msg_type: str, content: dict[str, Any]) -> None:
        self.log.append(iopub(msg_type, content, self.parent))


def install_recording_comms(monkeypatch: pytest.MonkeyPatch, log: list[dict[str, Any]]) -> None:
    """Make every widget's comm append its ``comm_*`` messages to ``log``."""

    class RecordingComm(BaseComm):
        def publish_msg(
            self, msg_type: str, data: Any = None, metadata: Any = None, buffers: Any = None, **keys: Any
        ) -> None:
            content = {"comm_id": self.comm_id, "data": data or {}, **keys}
            log.append(iopub(msg_type, content))

    monkeypatch.setattr(comm, "create_comm", lambda *args, **kwargs: RecordingComm(*args, **kwargs))


class FakeTimers:
    """A clock and a timer queue: ``advance(seconds)`` runs what falls due, in order."""

    def __init__(self) -> None:
        self.now = 1000.0
        self._queue: list[tuple[float, int, list[Any]]] = []
        self._order = itertools.count()

    def clock(self) -> float:
        return self.now

    def schedule(self, delay: float, callback: Callable[[], None]) -> Any:
        entry: list[Any] = [callback]
        heapq.heappush(self._queue, (self.now + delay, next(self._order), entry))

        class Handle:
            def cancel(self) -> None:
                entry[0] = None

        return Handle()

    @property
    def pending(self) -> int:
        return sum(1 for _, _, entry in self._queue if entry[0] is not None)

    def advance(self, seconds: float) -> None:
        end = self.now + seconds
        while self._queue and self._queue[0][0] <= end:
            when, _, entry = heapq.heappop(self._queue)
            self.now = max(self.now, when)
            if entry[0] is not None:
                entry[0]()
        self.now = end


# --------------------------------------------------------------------------- throttle


def test_throttle_flushes_first_change_at_once_then_coalesces_to_one_trailing_flush() -> None:
    timers = FakeTimers()
    seen: list[int] = []
    counter = {"value": 0}
    throttle = Throttle(lambda: seen.append(counter["value"]), 0.05, clock=timers.clock, scheduler=timers.schedule)

    counter["value"] = 1
    throttle.request()
    assert seen == [1]  # leading edge: the first token shows at once
    for value in range(2, 200):  # 198 changes within 10 ms
        counter["value"] = value
        timers.advance(0.00005)
        throttle.request()
    assert seen == [1]
    timers.advance(0.05)
    assert seen == [1, 199]  # one trailing flush with the final state
    timers.advance(1.0)
    assert seen == [1, 199] and timers.pending == 0


def test_throttle_rate_stays_at_most_one_flush_per_interval_under_a_steady_stream() -> None:
    timers = FakeTimers()
    throttle = Throttle(lambda: None, 0.05, clock=timers.clock, scheduler=timers.schedule)
    for _ in range(2000):  # 2,000 requests a second for 1 s
        throttle.request()
        timers.advance(0.0005)
    timers.advance(0.1)
    assert 19 <= throttle.flushes <= 21


def test_throttle_delayed_request_waits_and_earlier_request_wins() -> None:
    timers = FakeTimers()
    calls: list[float] = []
    throttle = Throttle(lambda: calls.append(timers.now), 0.05, clock=timers.clock, scheduler=timers.schedule)
    throttle.request(delay=1.0)
    timers.advance(0.5)
    assert calls == []
    throttle.request()  # a real change: flushes now, the tick is superseded
    assert calls == [timers.now]
    timers.advance(2.0)
    assert len(calls) == 1


def test_throttle_without_an_event_loop_flushes_at_once() -> None:
    seen: list[int] = []
    throttle = Throttle(lambda: seen.append(1), 10.0)
    throttle.request()
    throttle.request()  # no running loop to wait on: draw now rather than never
    assert seen == [1, 1]


# --------------------------------------------------------------------------- append-only output


class FakeOutputWidget:
    def __init__(self, name: str, log: list[dict[str, Any]]) -> None:
        self.name = name
        self._log = log
        self._msg_id = ""

    @property
    def msg_id(self) -> str:
        return self._msg_id

    @msg_id.setter
    def msg_id(self, value: str) -> None:
        self._msg_id = value
        self._log.append(
            iopub("comm_msg", {"comm_id": self.name, "data": {"method": "update", "state": {"msg_id": value}}})
        )


def _output_pair(log: list[dict[str, Any]]) -> tuple[FakeOutputWidget, FakeOutputWidget, OutputRouter]:
    first, second = FakeOutputWidget("out-1", log), FakeOutputWidget("out-2", log)
    for widget in (first, second):
        state = {"_model_name": "OutputModel", "msg_id": "", "outputs": []}
        log.append(
            iopub("comm_open", {"comm_id": widget.name, "target_name": "jupyter.widget", "data": {"state": state}})
        )
    return first, second, OutputRouter(RecordingSender(log))


def test_stream_output_sends_only_new_text_and_routes_to_its_widget() -> None:
    log: list[dict[str, Any]] = []
    first, second, router = _output_pair(log)
    a, b = StreamOutput(first, router), StreamOutput(second, router)
    a.append("Hello ")
    a.append("world")
    b.sync("$ ls\n")
    b.sync("$ ls\nfile.txt\n")
    a.append("!")
    a.done()
    streams = [msg["content"]["text"] for msg in log if msg["header"]["msg_type"] == "stream"]
    assert streams == ["Hello ", "world", "$ ls\n", "file.txt\n", "!"]
    mirror = FrontEndMirror().feed_all(log)
    assert mirror.output_text("out-1") == "Hello world!"
    assert mirror.output_text("out-2") == "$ ls\nfile.txt\n"
    assert mirror.capturing(PARENT) is None  # the cell has its output back
    assert mirror.cell_outputs(PARENT) == []


def test_stream_output_bounds_a_long_output_to_its_tail() -> None:
    log: list[dict[str, Any]] = []
    first, _, router = _output_pair(log)
    live = StreamOutput(first, router, limit=1000, keep=300)
    text = ""
    for line in range(200):
        text += f"line {line:04d}\n"
        live.sync(text)
    mirror = FrontEndMirror().feed_all(log)
    shown = mirror.output_text("out-1")
    assert text.endswith(shown.split("\n", 1)[1])  # after the "… earlier characters" note: the true tail
    assert shown.startswith("… ")
    assert len(shown) <= 1000 + 100
    sent = sum(len(msg["content"]["text"]) for msg in log if msg["header"]["msg_type"] == "stream")
    assert sent < 3 * len(text)  # bounded rewrites, not a resend per update


def test_stream_output_rewrites_when_the_text_is_not_an_append() -> None:
    log: list[dict[str, Any]] = []
    first, _, router = _output_pair(log)
    live = StreamOutput(first, router)
    live.sync("progress 10%")
    live.sync("progress 50%")
    assert FrontEndMirror().feed_all(log).output_text("out-1") == "progress 50%"


def test_mirror_sends_uncaptured_output_to_the_cell_and_applies_display_updates() -> None:
    log = [
        iopub("display_data", {"data": {"text/plain": "live"}, "metadata": {}, "transient": {"display_id": "d1"}}),
        iopub("stream", {"name": "stdout", "text": "a"}),
        iopub("stream", {"name": "stdout", "text": "b"}),
        iopub(
            "update_display_data",
            {"data": {"text/plain": "final"}, "metadata": {"k": 1}, "transient": {"display_id": "d1"}},
        ),
    ]
    outputs = FrontEndMirror().feed_all(log).cell_outputs(PARENT)
    assert outputs[0]["data"] == {"text/plain": "final"} and outputs[0]["metadata"] == {"k": 1}
    assert outputs[1] == {"output_type": "stream", "name": "stdout", "text": "ab"}


# ------------------------------------------------------------------- a view under test (imported by other files)


class WidgetHarness:
    """A ``TurnView`` talking into a message log, on fake time (``interval=0``: every change drawn at once)."""

    def __init__(
        self,
        monkeypatch: pytest.MonkeyPatch,
        *,
        broker: Any = None,
        definitions: Callable[[str], Any] | None = None,
        interval: float = 0.05,
        fake_time: bool = True,
    ) -> None:
        from pi_kernel.widgets.turn_view import WidgetTurnView

        self.log: list[dict[str, Any]] = []
        install_recording_comms(monkeypatch, self.log)
        self.timers = FakeTimers()
        timing: dict[str, Any] = {"clock": self.timers.clock, "scheduler": self.timers.schedule} if fake_time else {}
        self.view = WidgetTurnView(
            RecordingSender(self.log),
            broker=broker,
            definitions=definitions,
            model="gpt-test",
            provider="openai",
            interval=interval,
            **timing,
        )
        self.view.display()

    def feed(self, *events: Any, step: float = 0.0) -> None:
        for event in events:
            self.view.handle_event(event)
            if step:
                self.timers.advance(step)

    def settle(self) -> None:
        """Let every trailing redraw happen."""
        self.timers.advance(0.2)

    def mirror(self) -> FrontEndMirror:
        return FrontEndMirror().feed_all(self.log)

    def widget_state(self, widget: Any) -> dict[str, Any]:
        return self.mirror().models[widget.model_id]

    def sent(self, msg_type: str) -> list[dict[str, Any]]:
        return [msg for msg in self.log if msg["header"]["msg_type"] == msg_type]


async def play_message(harness: WidgetHarness, message: Any, *, chunk_chars: int | None = 8, step: float = 0.0) -> None:
    """Stream ``message`` through the scripted model, feeding the view each event as the loop would."""
    await message_events(message, chunk_chars=chunk_chars, feed=lambda event: harness.feed(event, step=step))


async def message_events(
    message: Any, *, chunk_chars: int | None = 8, feed: Callable[[Any], None] | None = None
) -> list[Any]:
    """The ``message_*`` agent events of streaming ``message`` (each passed to ``feed`` as it is made:
    the partial message is one object that keeps changing, as with a real provider)."""
    from scripted_model import ScriptedModel

    from pi_kernel.agent.types import MessageEndEvent, MessageStartEvent, MessageUpdateEvent
    from pi_kernel.ai import Context, StreamOptions

    model = ScriptedModel([message], chunk_chars=chunk_chars, record=False)
    events: list[Any] = []
    async for update in model(model.model, Context(), StreamOptions()):
        if update.type == "start":
            event: Any = MessageStartEvent(update.partial)
        elif update.type in ("done", "error"):
            event = MessageEndEvent(update.partial)
        else:
            event = MessageUpdateEvent(update.partial, update)
        events.append(event)
        if feed is not None:
            feed(event)
    return events


def test_stream_output_follows_a_rolling_tail_without_resending_it() -> None:
    log: list[dict[str, Any]] = []
    first, _, router = _output_pair(log)
    live = StreamOutput(first, router, limit=None)
    full = ""
    for line in range(3000):
        full += f"output line {line:05d}\n"
        if line % 50 == 49:
            live.sync(full[-20_000:])  # bash sends the last N KB once its output is long
    sent = sum(len(msg["content"]["text"]) for msg in log if msg["header"]["msg_type"] == "stream")
    assert sent < len(full) + 25_000  # the overlap is found: each line sent about once
    shown = FrontEndMirror().feed_all(log).output_text("out-1")
    assert shown.endswith(full[-20_000:])
