"""Around one run of the agent's code in the shell: what it prints and displays is captured per call (not
per process), and the event callbacks it registered are removed when it ends.

The ``python`` tool runs user code on a worker thread while the kernel's main thread stays live (it streams
widgets, prints to cells), so swapping ``sys.stdout`` for a buffer would swallow every other thread's output.
Instead, while a capture is active:

- ``sys.stdout`` / ``sys.stderr`` are proxies that write to the capture of the *current context* (a
  ``ContextVar`` the tool sets in the worker's own context: threads the code starts print to the real
  stream, as in a notebook), else to the real stream;
- inside IPython, ``shell.display_pub`` is such a proxy too: ``display()``, ``update_display`` and
  ``clear_output`` from the captured context become nbformat outputs; the kernel's own publishing goes
  through. Outside IPython, ``display`` prints the object's text form, which the stdout proxy captures
  (patching ``display`` itself is not robust: code binds it with ``from IPython.display import display``).

What is written to file descriptors 1/2 directly (C extensions, ``os.system``) is not captured.

**Event callbacks.** Code the ``python`` tool (or ``run_cells``) runs could register an IPython event
callback (``get_ipython().events.register('post_run_cell', ...)``) that then runs in every later cell of the
user: planting a cell (``set_next_input``), reading the namespace, or unregistering pi's own callbacks.
``kept_events`` snapshots the shell's ``events`` callbacks around one run and puts them back as they were
afterwards (also when the code replaced ``shell.events``); the names of the callbacks it took away are
listed for the tool result, so the model and the person see that the code tried.
"""

from __future__ import annotations

import re
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

MAX_DETAIL_STREAM_CHARS = 200_000
"""Stream text kept for ``details`` (the model's text is spooled separately, with no limit)."""

_current: ContextVar[OutputCapture | None] = ContextVar("pi_python_capture", default=None)


class OutputCapture:
    """Outputs of one call, as nbformat output dicts, in order."""

    def __init__(self, on_text: Callable[[str], None] | None = None) -> None:
        self.outputs: list[dict[str, Any]] = []
        self._on_text = on_text
        """Called with each piece of model-visible text (streams, display text)."""
        self._stream_chars = 0
        self._dropped_stream = False
        self._display_ids: dict[str, int] = {}
        self._clear_pending = False
        self._lock = threading.Lock()

    def write_stream(self, name: str, text: str) -> None:
        if not text:
            return
        with self._lock:
            self._maybe_clear()
            if self._stream_chars + len(text) > MAX_DETAIL_STREAM_CHARS:
                if not self._dropped_stream:
                    self._dropped_stream = True
                    self._append_stream(name, "\n[... more output not kept here; see the tool result text]\n")
            else:
                self._stream_chars += len(text)
                self._append_stream(name, text)
        if self._on_text is not None:
            self._on_text(text)

    def _append_stream(self, name: str, text: str) -> None:
        last = self.outputs[-1] if self.outputs else None
        if last is not None and last["output_type"] == "stream" and last["name"] == name:
            last["text"] += text
        else:
            self.outputs.append({"output_type": "stream", "name": name, "text": text})

    def add_display(
        self,
        data: dict[str, Any],
        metadata: dict[str, Any] | None = None,
        *,
        transient: Any = None,
        update: bool = False,
        output_type: str = "display_data",
    ) -> None:
        output: dict[str, Any] = {"output_type": output_type, "data": dict(data), "metadata": dict(metadata or {})}
        if output_type == "execute_result":
            output["execution_count"] = None
        display_id = transient.get("display_id") if isinstance(transient, dict) else None
        with self._lock:
            self._maybe_clear()
            if update:
                index = self._display_ids.get(display_id) if display_id is not None else None
                if index is None:
                    return
                self.outputs[index] = output
            else:
                if display_id is not None:
                    self._display_ids[display_id] = len(self.outputs)
                self.outputs.append(output)
        if self._on_text is not None:
            self._on_text(display_text(output) + "\n")

    def clear(self, wait: bool = False) -> None:
        with self._lock:
            self._clear_pending = True
            if not wait:
                self._maybe_clear()

    def _maybe_clear(self) -> None:
        if not self._clear_pending:
            return
        self._clear_pending = False
        self.outputs.clear()
        self._display_ids.clear()
        self._stream_chars = 0


_DEFAULT_REPR = re.compile(r"^<[\w.]+ object( at 0x[0-9a-fA-F]+)?>$")


def display_text(output: dict[str, Any]) -> str:
    """What the model reads for a display/execute output: Markdown, else the plain text unless it is only a
    default ``<X object>`` repr, else HTML or LaTeX source, else the MIME types."""
    data = output.get("data", {})
    plain = _text(data.get("text/plain"))
    candidates = (
        _text(data.get("text/markdown")),
        None if plain is not None and _DEFAULT_REPR.match(plain.strip()) else plain,
        _text(data.get("text/html")),
        _text(data.get("text/latex")),
        plain,
    )
    for text in candidates:
        if text is not None:
            return text
    return "[" + ", ".join(sorted(data)) + "]"


def _text(value: Any) -> str | None:
    if isinstance(value, list):
        value = "".join(value)
    return value if isinstance(value, str) else None


class _StreamProxy:
    """Stands in for ``sys.stdout``/``sys.stderr``: captured context → capture, else the real stream."""

    def __init__(self, name: str, inner: Any) -> None:
        self._pi_name = name
        self._pi_inner = inner

    def write(self, text: str) -> int:
        capture = _current.get()
        if capture is None:
            return self._pi_inner.write(text)
        capture.write_stream(self._pi_name, str(text))
        return len(text)

    def writelines(self, lines: Any) -> None:
        for line in lines:
            self.write(line)

    def flush(self) -> None:
        if _current.get() is None:
            self._pi_inner.flush()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._pi_inner, name)


class _DisplayPublisherProxy:
    """Stands in for an IPython shell's ``display_pub`` (see the module docstring)."""

    def __init__(self, inner: Any) -> None:
        object.__setattr__(self, "_pi_inner", inner)

    def publish(self, *args: Any, **kwargs: Any) -> Any:
        capture = _current.get()
        if capture is None:
            return self._pi_inner.publish(*args, **kwargs)
        data = kwargs.get("data", args[0] if args else {})
        metadata = kwargs.get("metadata", args[1] if len(args) > 1 else None)
        capture.add_display(data, metadata, transient=kwargs.get("transient"), update=bool(kwargs.get("update")))
        return None

    def clear_output(self, wait: bool = False) -> Any:
        capture = _current.get()
        if capture is None:
            return self._pi_inner.clear_output(wait)
        capture.clear(wait)
        return None

    def __getattr__(self, name: str) -> Any:
        return getattr(self._pi_inner, name)

    def __setattr__(self, name: str, value: Any) -> None:
        setattr(self._pi_inner, name, value)


def current_shell() -> Any:
    """The running IPython shell, or None (IPython is only looked up when already imported)."""
    ipython = sys.modules.get("IPython")
    if ipython is None:
        return None
    return ipython.get_ipython()


def _install() -> None:
    for name in ("stdout", "stderr"):
        if not isinstance(getattr(sys, name), _StreamProxy):
            setattr(sys, name, _StreamProxy(name, getattr(sys, name)))
    shell = current_shell()
    if shell is not None and not isinstance(shell.display_pub, _DisplayPublisherProxy):
        shell.display_pub = _DisplayPublisherProxy(shell.display_pub)


def _uninstall() -> None:
    """After the capture: put the real objects back where ours are still on top."""
    for name in ("stdout", "stderr"):
        if isinstance(getattr(sys, name), _StreamProxy):
            setattr(sys, name, getattr(sys, name)._pi_inner)
    shell = current_shell()
    if shell is not None and isinstance(shell.display_pub, _DisplayPublisherProxy):
        shell.display_pub = shell.display_pub._pi_inner


@contextmanager
def capturing(on_text: Callable[[str], None] | None = None) -> Iterator[OutputCapture]:
    """Capture this context's prints and displays into a new ``OutputCapture``. One capture at a time: the
    ``python`` tool enters it only while it holds its process-wide run lock."""
    capture = OutputCapture(on_text)
    _install()
    token = _current.set(capture)
    try:
        yield capture
    finally:
        _current.reset(token)
        _uninstall()


def _callbacks(events: Any) -> dict[str, list[Any]] | None:
    callbacks = getattr(events, "callbacks", None)
    return callbacks if isinstance(callbacks, dict) else None


def _name(callback: Any) -> str:
    try:
        return str(getattr(callback, "__qualname__", None) or type(callback).__name__)
    except Exception:  # noqa: BLE001 - a hostile object's attribute may raise
        return "?"


@contextmanager
def kept_events(removed: list[str]) -> Iterator[None]:
    """Around one run of the agent's code: afterwards the shell's event callbacks are as before; each one
    the code added is appended to ``removed`` as ``"event: name"``."""
    shell = current_shell()
    events: Any = getattr(shell, "events", None)
    callbacks = _callbacks(events)
    if callbacks is None:
        yield
        return
    before = {event: list(registered) for event, registered in callbacks.items()}
    try:
        yield
    finally:
        if getattr(shell, "events", None) is not events:
            removed.append("shell.events (replaced)")
            shell.events = events
        now = _callbacks(events) or {}
        for event, registered in list(now.items()):
            known = {id(callback) for callback in before.get(event, [])}
            removed.extend(f"{event}: {_name(callback)}" for callback in list(registered) if id(callback) not in known)
        callbacks.clear()
        callbacks.update({event: list(kept) for event, kept in before.items()})
        if now is not callbacks:
            events.callbacks = callbacks


def removed_note(removed: list[str]) -> str:
    """The line the tool result gets when callbacks were removed (``""`` when none)."""
    if not removed:
        return ""
    return (
        f"[pi removed what this code registered as notebook event callbacks ({', '.join(removed)}): "
        "agent code may not run in the user's later cells]"
    )
