"""Ask for an approval on the front-end's stdin (consoles, nbclient with stdin).

The question goes through ipykernel's own ``raw_input`` (an ``input_request``
to the client of the running cell) in a worker thread, so the event loop keeps
running while the person types. ``raw_input`` polls its socket until a reply
comes; when the approval is settled another way (a comm, a timeout, an
interrupt) the worker is stopped by raising ``KeyboardInterrupt`` in it, which
that poll loop handles by returning: it checks for interrupts every 10 ms.
The arguments in the question are masked before they are cut (a cut key would
escape the mask every stdin message gets on its way out, ``outgoing``).
"""

from __future__ import annotations

import asyncio
import contextvars
import ctypes
import json
import threading
from collections.abc import Callable
from typing import Any

from pi_kernel.kernel.outgoing import masked
from pi_kernel.tools.approval import ApprovalPreview, cut_middle, invisible_warning, reveal_invisible

QUESTION_ARGS_CHARS = 4_000
"""Arguments longer than this are shown as their head and tail around a "characters hidden" warning."""
ANSWERS_HELP = "[y]es / [a]lways / [n]o[: reason] / {json} to edit the arguments"


def parse_answer(answer: str) -> dict[str, Any]:
    """A typed answer → decision fields (``decision``, ``reason``, ``args``)."""
    text = answer.strip()
    lowered = text.lower()
    if lowered in ("y", "yes", "ok", "approve"):
        return {"decision": "approve"}
    if lowered in ("a", "always"):
        return {"decision": "always"}
    if text.startswith("{"):
        try:
            args = json.loads(text)
        except ValueError as error:
            return {"decision": "deny", "reason": f"The edited arguments were not valid JSON ({error})."}
        except RecursionError:  # would kill the asking task: the turn would wait for the approval timeout
            return {"decision": "deny", "reason": "The edited arguments were nested too deeply to read."}
        return {"decision": "approve", "args": args}
    if lowered in ("n", "no", "deny") or lowered.startswith(("n:", "no:", "n ", "no ")):
        reason = text.split(":", 1)[1] if ":" in text else text.partition(" ")[2]
        return {"decision": "deny", "reason": reason.strip() or None}
    return {"decision": "deny", "reason": f"Not approved (the user answered {text!r})."}


def preview_text(preview: ApprovalPreview, limit: int = QUESTION_ARGS_CHARS) -> str:
    """A change's title and diff as plain lines (masked, invisible characters shown, head and tail kept)."""
    diff, invisible = reveal_invisible(masked(preview.diff))
    title, in_title = reveal_invisible(masked(preview.title))
    note = f"[{invisible_warning(invisible + in_title)}]\n" if invisible + in_title else ""
    return f"{note}{title}\n{cut_middle(diff.rstrip(), limit)}\n"


def question(tool_name: str, args: Any, warning: str | None = None, preview: ApprovalPreview | None = None) -> str:
    try:
        shown = json.dumps(args, ensure_ascii=False, default=str)
    except (TypeError, ValueError):
        shown = repr(args)
    shown = masked(shown)  # before the cut: a cut key would no longer be found
    shown, invisible = reveal_invisible(shown, json_text=True)  # bidi overrides, zero-width: visible
    notes = [warning] if warning else []
    notes += [invisible_warning(invisible)] if invisible else []
    note = "".join(f"[{text}] " for text in notes)
    if preview is not None:  # the change as a diff; the arguments, shorter, below it
        return f"{preview_text(preview)}{note}Allow {tool_name} {cut_middle(shown, 300)}? {ANSWERS_HELP}: "
    return f"{note}Allow {tool_name} {cut_middle(shown, QUESTION_ARGS_CHARS)}? {ANSWERS_HELP}: "


def _raise_in_thread(thread: threading.Thread) -> None:
    if thread.ident is not None and thread.is_alive():
        ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(thread.ident), ctypes.py_object(KeyboardInterrupt))


async def ask_on_stdin(raw_input: Callable[[str], str], prompt: str) -> str | None:
    """``raw_input(prompt)`` in a worker; ``None`` if it failed. Cancelling this stops the worker."""
    loop = asyncio.get_running_loop()
    future: asyncio.Future[str | None] = loop.create_future()
    context = contextvars.copy_context()  # ipykernel finds the cell's request through context vars

    def settle(value: str | None) -> None:
        if not future.done():
            future.set_result(value)

    reading = threading.Event()
    reading.set()

    def work() -> None:
        try:
            try:
                value: str | None = context.run(raw_input, prompt)
            except BaseException:  # noqa: BLE001 - EOF, no stdin, or stopped by _raise_in_thread
                value = None
            reading.clear()
            loop.call_soon_threadsafe(settle, value)
        except BaseException:  # noqa: BLE001 - a late stop request, or the loop closed meanwhile
            pass

    worker = threading.Thread(target=work, name="pi-approval-stdin", daemon=True)
    worker.start()
    try:
        return await future
    finally:
        if reading.is_set():
            _raise_in_thread(worker)
