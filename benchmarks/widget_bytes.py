"""Benchmark: bytes a live view sends to the front end while a 40 KB answer streams at 2,000 tokens/s.

Setup (the most faithful one that needs no browser): a real ipykernel started
with ``jupyter_client`` (``PYTHONPATH`` = this repository). A cell in that
kernel makes a ``WidgetTurnView`` exactly as the ``%%pi`` runner does (the cell's
parent header, the kernel's iopub socket, ipywidgets' comms) and feeds it the
agent events of a 40 KiB markdown answer in 4-character tokens, 2,000 a
second, with real timing (``asyncio.sleep`` to each token's due time). This
script subscribes to the kernel's iopub socket with its own raw ZeroMQ socket
and counts the exact frames of every message that is a child of that cell
(comm_open/comm_msg/comm_close of the widgets, and the stream, display and
clear messages routed into ``Output`` widgets): wire bytes (identity, HMAC
signature, delimiter, header, parent header, metadata, content) and content
bytes alone (what the field notes' anchors count). Only the kernel's own
``status`` and ``execute_input`` are left out. A counter wrapped around the
kernel session's ``send`` checks that nothing was dropped on the way.

Phases: "live" is everything up to the end of the answer (widget setup,
streaming, the markdown swap if one happens); "finish" is the static
replacement of the turn (one ``update_display_data`` with text/html,
text/markdown and text/plain, three copies of the answer by design, so a saved
notebook renders without widgets) and the widgets' ``comm_close``. The target
(at most 3x the answer) is for the live phase; both are printed.

Baseline, side by side: a naive view that sets an ``HTML`` widget's full
``value`` per token. It is quadratic, so it runs on a prefix of the answer
and is extrapolated to the whole answer with a per-message linear fit
(bytes = a + b * len(value)).

The front end's final state is checked with ``FrontEndMirror`` (the rules of
JupyterLab's widget manager replayed on the captured messages): the live
``Output`` widget must hold exactly the answer, and the cell's saved output
must carry it. Run from the repository root: ``python benchmarks/widget_bytes.py``.
Reports PASS/FAIL; exits 1 on FAIL.
"""

from __future__ import annotations

import ast
import json
import os
import re
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import zmq
from jupyter_client.manager import KernelManager

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))  # the front-end mirror is test code

from frontend_mirror import FrontEndMirror  # noqa: E402

ANSWER_BYTES = 40 * 1024
TOKEN_CHARS = 4
TOKENS_PER_SECOND = 2000
BASELINE_TOKENS = 1200
TARGET_RATIO = 3.0
FIELD_NOTES_NAIVE_RATIO = 4177

_KERNEL_SETUP = r"""
import asyncio, time
import ipywidgets
from pi_kernel.agent.types import (AgentEndEvent, AgentStartEvent, MessageEndEvent, MessageStartEvent,
    MessageUpdateEvent, TurnEndEvent, TurnStartEvent)
from pi_kernel.ai import AssistantMessage, TextContent, Usage
from pi_kernel.ai.stream_types import AssistantMessageEvent
from pi_kernel.widgets.stream_output import KernelIopub
from pi_kernel.widgets.turn_view import WidgetTurnView
from IPython.display import display

_kernel = get_ipython().kernel

def _count_iopub():
    # Count what the session sends on iopub, to detect messages lost before they reach us.
    counter = {"messages": 0}
    original = _kernel.session.send
    def send(stream, *args, **kwargs):
        if stream is _kernel.iopub_socket:
            counter["messages"] += 1
        return original(stream, *args, **kwargs)
    _kernel.session.send = send
    return counter, lambda: setattr(_kernel.session, "send", original)

async def _tokens(answer, chars, rate):
    start = time.perf_counter()
    for index in range(0, len(answer), chars):
        delay = start + (index // chars) / rate - time.perf_counter()
        if delay > 0:
            await asyncio.sleep(delay)
        yield answer[index:index + chars]

async def run_view(answer, chars, rate):
    counter, restore = _count_iopub()
    try:
        view = WidgetTurnView(KernelIopub.current(), model="bench-model", provider="bench")
        view.display()
        handle = view.handle_event
        partial = AssistantMessage(model="bench-model", provider="bench")
        for event in (AgentStartEvent(), TurnStartEvent(), MessageStartEvent(partial)):
            handle(event)
        block = TextContent("")
        partial.content.append(block)
        handle(MessageUpdateEvent(partial, AssistantMessageEvent("text_start", partial, 0)))
        started = time.perf_counter()
        async for piece in _tokens(answer, chars, rate):
            block.text += piece
            handle(MessageUpdateEvent(partial, AssistantMessageEvent("text_delta", partial, 0, delta=piece)))
        handle(MessageUpdateEvent(partial, AssistantMessageEvent("text_end", partial, 0, content=answer)))
        partial.usage = Usage(input=1200, output=len(answer) // chars, total_tokens=1200 + len(answer) // chars)
        handle(MessageEndEvent(partial))
        handle(TurnEndEvent(partial))
        streamed = time.perf_counter() - started
        handle(AgentEndEvent([partial]))
        return {"seconds": streamed, "flushes": view.flushes, "sent": counter["messages"]}
    finally:
        restore()

async def run_naive(answer, chars, rate):
    counter, restore = _count_iopub()
    try:
        box = ipywidgets.HTML()
        display(box)
        text = ""
        started = time.perf_counter()
        async for piece in _tokens(answer, chars, rate):
            text += piece
            box.value = text
        return {"seconds": time.perf_counter() - started, "sent": counter["messages"]}
    finally:
        restore()
"""


@dataclass
class Captured:
    """The iopub messages that are children of one execute request, with their sizes."""

    messages: list[dict[str, Any]] = field(default_factory=list)
    wire: list[int] = field(default_factory=list)
    content: list[int] = field(default_factory=list)

    def phase(self, start: int, end: int | None = None) -> tuple[int, int, int]:
        """(messages, wire bytes, content bytes) of messages[start:end]."""
        wire, content = self.wire[start:end], self.content[start:end]
        return len(wire), sum(wire), sum(content)


class IopubTap:
    """A raw SUB socket on the kernel's iopub port: exact frames, read on a thread so nothing queues."""

    def __init__(self, km: KernelManager) -> None:
        self._session = km.session
        self._socket = zmq.Context.instance().socket(zmq.SUB)
        self._socket.setsockopt(zmq.RCVHWM, 0)
        self._socket.setsockopt(zmq.SUBSCRIBE, b"")
        info = km.get_connection_info()
        self._socket.connect(f"ipc://{info['ip']}-{info['iopub_port']}")
        self._frames: list[list[bytes]] = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._read, daemon=True)
        self._thread.start()

    def _read(self) -> None:
        poller = zmq.Poller()
        poller.register(self._socket, zmq.POLLIN)
        while not self._stop.is_set():
            if poller.poll(50):
                frames = self._socket.recv_multipart()
                with self._lock:
                    self._frames.append(frames)

    def take(self) -> list[tuple[dict[str, Any], int, int]]:
        """Parsed messages so far with (wire bytes, content bytes); clears the buffer."""
        with self._lock:
            batch, self._frames = self._frames, []
        parsed = []
        for frames in batch:
            _, parts = self._session.feed_identities(frames, copy=True)
            message = self._session.deserialize(parts, content=True)
            parsed.append((message, sum(len(frame) for frame in frames), len(parts[4])))
        return parsed

    def close(self) -> None:
        self._stop.set()
        self._thread.join(timeout=2)
        self._socket.close(linger=0)


def execute(client: Any, tap: IopubTap, code: str, expression: str | None = None) -> tuple[Captured, Any]:
    """Run ``code``; returns its iopub children (view messages only) and the value of ``expression``."""
    tap.take()
    expressions = {"result": f"__import__('json').dumps({expression})"} if expression else {}
    msg_id = client.execute(code, user_expressions=expressions, store_history=False)
    reply = None
    while reply is None:
        message = client.get_shell_msg(timeout=120)
        if message["parent_header"].get("msg_id") == msg_id:
            reply = message
    captured = Captured()
    deadline = time.monotonic() + 30
    idle = False
    while not idle and time.monotonic() < deadline:
        for message, wire, content in tap.take():
            if message["parent_header"].get("msg_id") != msg_id:
                continue
            kind = message["header"]["msg_type"]
            if kind == "status":
                idle = idle or message["content"]["execution_state"] == "idle"
                continue
            if kind == "execute_input":
                continue
            captured.messages.append(message)
            captured.wire.append(wire)
            captured.content.append(content)
        time.sleep(0.02)
    if reply["content"]["status"] != "ok":
        raise RuntimeError(f"kernel cell failed: {reply['content'].get('ename')}: {reply['content'].get('evalue')}")
    value = None
    if expression:
        result = reply["content"]["user_expressions"]["result"]
        if result["status"] != "ok":
            raise RuntimeError(f"{result.get('ename')}: {result.get('evalue')}")
        value = json.loads(ast.literal_eval(result["data"]["text/plain"]))
    return captured, value


def make_answer(size: int) -> str:
    """A markdown answer of exactly ``size`` ASCII characters (paragraphs, a list, a code block)."""
    words = "the kernel streams tokens into a widget while the model writes its answer about data frames".split()
    pieces, index = [], 0
    while sum(map(len, pieces)) < size:
        section = index % 6
        if section == 0:
            pieces.append(f"## Section {index // 6 + 1}\n\n")
        elif section == 4:
            pieces.append("```python\nfor row in frame.itertuples():\n    print(row.Index, row.total)\n```\n\n")
        elif section == 5:
            pieces.append("".join(f"- item {n}: {words[(index + n) % len(words)]}\n" for n in range(4)) + "\n")
        else:
            sentence = " ".join(words[(index + n) % len(words)] for n in range(60))
            pieces.append(sentence.capitalize() + ".\n\n")
        index += 1
    return "".join(pieces)[:size]


def linear_fit(xs: list[int], ys: list[int]) -> tuple[float, float]:
    count = len(xs)
    mean_x, mean_y = sum(xs) / count, sum(ys) / count
    spread = sum((x - mean_x) ** 2 for x in xs) or 1.0
    slope = sum((x - mean_x) * (y - mean_y) for x, y in zip(xs, ys, strict=True)) / spread
    return mean_y - slope * mean_x, slope


def main() -> int:
    answer = make_answer(ANSWER_BYTES)
    tokens = (len(answer) + TOKEN_CHARS - 1) // TOKEN_CHARS
    print(
        f"widget_bytes: {len(answer):,}-byte answer, {tokens:,} tokens of {TOKEN_CHARS} chars "
        f"at {TOKENS_PER_SECOND:,} tokens/s, real ipykernel, raw iopub capture"
    )
    env = {**os.environ, "PYTHONPATH": f"{ROOT}{os.pathsep}{os.environ.get('PYTHONPATH', '')}".rstrip(os.pathsep)}
    # Local sockets in a temporary directory: no TCP (and its warning), nothing left in the working tree.
    km = KernelManager(kernel_name="python3", transport="ipc", ip=os.path.join(tempfile.mkdtemp(), "kernel"))
    km.start_kernel(env=env)
    client = km.client()
    client.start_channels()
    tap = IopubTap(km)
    try:
        client.wait_for_ready(timeout=60)
        execute(client, tap, _KERNEL_SETUP)
        args = f"{answer!r}, {TOKEN_CHARS}, {TOKENS_PER_SECOND}"
        view, view_info = execute(client, tap, f"_r = await run_view({args})", "_r")
        prefix = answer[: BASELINE_TOKENS * TOKEN_CHARS]
        naive_args = f"{prefix!r}, {TOKEN_CHARS}, {TOKENS_PER_SECOND}"
        naive, naive_info = execute(client, tap, f"_n = await run_naive({naive_args})", "_n")
    finally:
        tap.close()
        client.stop_channels()
        km.shutdown_kernel(now=True)
    return 0 if report(answer, view, view_info, naive, naive_info) else 1


def report(answer: str, view: Captured, view_info: dict[str, Any], naive: Captured, naive_info: dict[str, Any]) -> bool:
    """Print the tables and the verdict; ``True`` on PASS."""
    size = len(answer.encode())
    kinds = [message["header"]["msg_type"] for message in view.messages]
    finish_at = kinds.index("update_display_data") if "update_display_data" in kinds else len(kinds)
    live_n, live_wire, live_content = view.phase(0, finish_at)
    end_n, end_wire, end_content = view.phase(finish_at)
    streams = kinds[:finish_at].count("stream")
    comms = sum(1 for kind in kinds[:finish_at] if kind.startswith("comm_"))

    # The front end's state, replayed: the live Output widget before the finish, the saved output after.
    mirror = FrontEndMirror().feed_all(view.messages[:finish_at])
    live_texts = [mirror.output_text(comm_id) for comm_id in mirror.output_widgets]
    live_html = [
        output["data"].get("text/html", "")
        for comm_id in mirror.output_widgets
        for output in mirror.outputs(comm_id)
        if output["output_type"] == "display_data"
    ]
    live_ok = answer in live_texts or any(_renders(answer, html) for html in live_html)
    mirror.feed_all(view.messages[finish_at:])
    parent = view.messages[0]["parent_header"]["msg_id"]
    saved = mirror.cell_outputs(parent)
    saved_ok = (
        len(saved) == 1
        and saved[0]["data"]["text/markdown"].startswith(answer)
        and answer in saved[0]["data"]["text/plain"]
        and not mirror.models
    )
    lost = view_info["sent"] - len(view.messages)

    # Naive baseline: fit bytes per message against the value's length, extrapolate to the whole answer.
    values = [len(m["content"]["data"]["state"]["value"]) for m in naive.messages if _is_value_update(m)]
    wires = [w for m, w in zip(naive.messages, naive.wire, strict=True) if _is_value_update(m)]
    contents = [c for m, c in zip(naive.messages, naive.content, strict=True) if _is_value_update(m)]
    lengths = [
        min(len(answer), TOKEN_CHARS * (index + 1)) for index in range((len(answer) + TOKEN_CHARS - 1) // TOKEN_CHARS)
    ]
    wire_a, wire_b = linear_fit(values, wires)
    content_a, content_b = linear_fit(values, contents)
    naive_wire = sum(wire_a + wire_b * length for length in lengths)
    naive_content = sum(content_a + content_b * length for length in lengths)
    naive_prefix_chars = BASELINE_TOKENS * TOKEN_CHARS
    naive_last = naive.messages and _is_value_update(naive.messages[-1]) and values[-1] == naive_prefix_chars

    print(
        f"  stream time {view_info['seconds']:.2f} s, {view_info['flushes']} redraws "
        f"({view_info['flushes'] / view_info['seconds']:.1f}/s), {streams} stream messages, {comms} comm messages"
    )
    print(f"  {'':34} {'messages':>9} {'wire bytes':>12} {'x answer':>9} {'content bytes':>14} {'x answer':>9}")
    rows = [
        ("live view (setup + streaming)", live_n, live_wire, live_content),
        ("finish (static output, closes)", end_n, end_wire, end_content),
        ("whole turn", live_n + end_n, live_wire + end_wire, live_content + end_content),
    ]
    for label, count, wire, content in rows:
        print(f"  {label:34} {count:>9,} {wire:>12,} {wire / size:>8.2f}x {content:>14,} {content / size:>8.2f}x")
    print(
        f"  {'naive, full value per token':34} {len(lengths):>9,} {naive_wire:>12,.0f} {naive_wire / size:>8.0f}x "
        f"{naive_content:>14,.0f} {naive_content / size:>8.0f}x"
    )
    print(
        f"    (naive measured on a {BASELINE_TOKENS:,}-token prefix: {len(values)} updates, "
        f"{sum(naive.wire):,} wire bytes; extrapolated per message: {wire_a:.0f} + {wire_b:.3f} x len(value); "
        f"field notes measured {FIELD_NOTES_NAIVE_RATIO:,}x)"
    )
    ratio = live_wire / size
    speedup = naive_wire / live_wire
    print(f"  live view vs naive: {speedup:,.0f}x fewer bytes")
    print(
        f"  final state: live Output == answer: {'yes' if live_ok else 'NO'}; saved output carries it and no "
        f"widget is left open: {'yes' if saved_ok else 'NO'}; messages lost on the way: {lost}; "
        f"naive prefix's last update arrived: {'yes' if naive_last else 'NO'}"
    )
    passed = ratio <= TARGET_RATIO and live_ok and saved_ok and lost == 0
    print(
        f"{'PASS' if passed else 'FAIL'}: live view sends {ratio:.2f}x the answer in wire bytes "
        f"({live_content / size:.2f}x in content bytes); target at most {TARGET_RATIO:g}x"
    )
    return passed


def _renders(answer: str, html: str) -> bool:
    """The markdown rendering of ``answer`` (when the swap happened before the end): its first and last headings."""
    headings = re.findall(r"^## (Section \d+)$", answer, re.MULTILINE)
    visible = re.sub(r"<[^>]+>", "", html)
    return bool(headings) and headings[0] in visible and headings[-1] in visible


def _is_value_update(message: dict[str, Any]) -> bool:
    if message["header"]["msg_type"] != "comm_msg":
        return False
    state = message["content"].get("data", {}).get("state", {})
    return "value" in state


if __name__ == "__main__":
    sys.exit(main())
