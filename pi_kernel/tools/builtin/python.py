"""The ``python`` tool: run code in the notebook's namespace, like a cell.

The code runs in ``ctx.namespace`` (the kernel's user namespace) or, without one, in the namespace given to
``create_python_tool`` or a private one kept by the tool; variables persist between calls. As in a notebook
(``ast_node_interactivity='last_expr'``) the value of a final expression statement is shown unless the code
ends with ``;``. Top-level ``await`` runs on an event loop of its own in a thread of its own
(``run_coroutine``: the kernel's loop is the caller's); an interrupt cancels it (``CancelledError`` at its
``await``).

Threads: by default the code runs on a tool worker thread while the event loop goes on. In a kernel (the
context's ``python_on_main_thread``) it runs on the main thread, as a cell does, while the kernel's event
loop waits for it: only there does a kernel interrupt (SIGINT) reach code blocked in a C call
(``time.sleep``, a socket read, a lock). ``Interrupter`` turns that SIGINT (after the handler it replaced,
the turn's interrupt hook, has scheduled the turn's abort) or an abort from elsewhere
(``PyThreadState_SetAsyncExc``: code blocked in a C call on a worker thread notices when that call returns)
into ``KeyboardInterrupt`` in the running code, and re-sends SIGINT every ``_RESEND_SECONDS`` until the code
returns, so code that swallows it (a bare ``except:``) is stopped too and the next call finds the namespace
free. One call runs at a time in the whole process (``_RUN_LOCK``): the namespace and matplotlib's pyplot
are not thread-safe, and notebook code is written to run alone. Output capture is per context, not per
process (``python_capture``), so the kernel's own prints are not swallowed.

What the model gets: stdout, stderr, the text/plain of displayed objects and of the result, in order,
tail-truncated like ``bash`` (full text in a temp file), plus up to ``max_images`` images (PNG/JPEG from
``display`` and matplotlib figures). Figures the code created and left open are rendered and closed at the
end, so they show in the tool's output rather than leaking into the cell. An exception gives an error
result with the output so far and the traceback of the user's code only.

``details``: ``{"outputs": [nbformat output dicts: stream / display_data / execute_result], "truncation":
dict | None, "full_output_path": str | None, "run": int, "code": str}``; ``run`` numbers the calls in the
order they ran (calls of one message may run in any order: ``%%pi --cells`` replays them in this one);
``code`` is the code that ran (after an approval that edited it). Updates while running carry
``{"outputs": [...]}`` so far.

Long: the tool and its run on the kernel's main thread, which an interrupt must reach, with its await path.
"""

from __future__ import annotations

import ast
import asyncio
import base64
import builtins
import contextlib
import ctypes
import functools
import inspect
import itertools
import linecache
import signal as signals
import sys
import threading
import time
import traceback
from collections import deque
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

from pydantic import BaseModel, Field

from pi_kernel.agent import OPERATION_ABORTED
from pi_kernel.agent.tool_execution import run_in_worker
from pi_kernel.agent.types import AgentToolResult
from pi_kernel.ai import AbortSignal, ImageContent, TextContent
from pi_kernel.ai.user_objects import has_base
from pi_kernel.tools.builtin.output import OutputSpool
from pi_kernel.tools.builtin.python_capture import OutputCapture, capturing, current_shell, kept_events, removed_note
from pi_kernel.tools.definition import ToolContext, ToolDefinition
from pi_kernel.tools.results import display_bundle, fit_image, image_png_bytes
from pi_kernel.tools.turn_journal import TurnJournal

MAX_MODEL_IMAGES = 3
UPDATE_INTERVAL_SECONDS = 0.1
_MODEL_IMAGE_TYPES = ("image/png", "image/jpeg")
_RUN_LOCK = threading.Lock()
_cell_numbers = itertools.count(1)
_run_numbers = itertools.count(1)
_recent_cells: deque[str] = deque()
_MAX_CACHED_CELLS = 200
_main_thread_runs = [0]
T = TypeVar("T")
"""Main-thread calls ended so far (only the event loop's thread changes it)."""


class PythonParams(BaseModel):
    code: str = Field(
        description="Python code to run, like a notebook cell. The value of the last expression is shown; end the "
        "code with ';' to hide it."
    )


def create_python_tool(
    *, namespace: dict[str, Any] | None = None, max_images: int = MAX_MODEL_IMAGES
) -> ToolDefinition:
    """The ``python`` tool. ``namespace``: where code runs when the context has none (default: a private dict
    kept by this tool); ``max_images``: images sent to the model per call."""
    private: dict[str, Any] = namespace if namespace is not None else {"__name__": "__main__", "__builtins__": builtins}

    async def execute(
        tool_call_id: str,
        params: PythonParams,
        signal: AbortSignal | None,
        on_update: Callable[[AgentToolResult], None] | None,
        ctx: ToolContext,
    ) -> AgentToolResult:
        run = functools.partial(
            run_python,
            params.code,
            ctx.namespace if ctx.namespace is not None else private,
            signal=signal,
            on_update=on_update,
            max_images=max_images,
            journal=ctx.journal,
        )
        return await run_agent_code(run, signal, ctx)

    return ToolDefinition(
        origin="builtin",
        secret_arguments={"code": "code"},  # what of a call may name secrets (approval.secret_reason)
        name="python",
        label="python",
        description=(
            "Run Python code in the notebook's namespace, like a notebook cell: variables persist between calls and "
            "are shared with the user's cells. Returns stdout, stderr, the value of the last expression and the text "
            "of displayed objects; images (matplotlib figures, displayed images) are attached. Output is truncated "
            "to the last 2000 lines or 50KB."
        ),
        parameters=PythonParams,
        execute=execute,
        prompt_snippet="Run Python code in the notebook's namespace (variables persist and are shared with the user)",
        prompt_guidelines=(
            "Use python to inspect and compute with the notebook's live variables (DataFrames, models, figures); "
            "what it defines stays in the user's namespace",
        ),
        approval="ask",
        # a call is judged just before it runs: an earlier call of the batch may have moved the process's folder
        # (os.chdir) or defined what a later one reads, so its batch runs one call after the other
        execution_mode="sequential",
    )


async def run_agent_code(run: Callable[..., T], signal: AbortSignal | None, ctx: ToolContext) -> T:
    """``run()`` on a tool worker thread; in a kernel (``ctx.python_on_main_thread``) ``run(interrupt_on_sigint=True)``
    on the main thread, blocking the loop as a cell does, so that an interrupt reaches it."""
    if not (ctx.python_on_main_thread and threading.current_thread() is threading.main_thread()):
        return await run_in_worker(run)
    # An interrupt during a main-thread call only schedules the turn's abort on the loop that call blocked
    # (``call_soon_threadsafe``); another call of the batch may already be queued to resume before that
    # callback. A yield that begins after the last main-thread call ended resumes after the callback.
    while True:
        seen = _main_thread_runs[0]
        await asyncio.sleep(0)
        if _main_thread_runs[0] == seen:
            break
    if signal is not None and signal.aborted:
        raise RuntimeError(OPERATION_ABORTED)
    try:
        return run(interrupt_on_sigint=True)
    finally:
        _main_thread_runs[0] += 1


def run_python(
    code: str,
    namespace: dict[str, Any],
    *,
    signal: AbortSignal | None = None,
    on_update: Callable[[AgentToolResult], None] | None = None,
    max_images: int = MAX_MODEL_IMAGES,
    interrupt_on_sigint: bool = False,
    journal: TurnJournal | None = None,
) -> AgentToolResult:
    """Run ``code`` in ``namespace`` as a cell; blocking (call it off the event loop). ``interrupt_on_sigint``
    (main thread only): a SIGINT raises ``KeyboardInterrupt`` in the code; ``journal``: the turn's undo journal."""
    removed_callbacks: list[str] = []
    spool = OutputSpool("pi-python")
    last_update = 0.0

    def on_text(text: str) -> None:
        nonlocal last_update
        spool.add(text.encode("utf-8", "replace"))
        if on_update is not None and time.monotonic() - last_update >= UPDATE_INTERVAL_SECONDS:
            last_update = time.monotonic()
            with contextlib.suppress(Exception):  # a broken listener must not break the user's code
                on_update(AgentToolResult([], details={"outputs": [dict(output) for output in capture.outputs]}))

    with _agent_code_run(code, namespace, signal, journal, removed_callbacks), capturing(on_text) as capture:
        run_number = next(_run_numbers)
        error = _run_in_capture(capture, code, namespace, signal, interrupt_on_sigint)
    note = removed_note(removed_callbacks)
    for extra in (f"{note}\n" if note else "", error or ""):
        if extra:
            separator = "\n" if spool.last_line_bytes else ""  # the output so far ends mid-line
            spool.add(f"{separator}{extra}".encode("utf-8", "replace"))
    if error is not None:
        raise RuntimeError(spool.final()[0])
    text, details = spool.final()
    images, left_out = _model_images(capture.outputs, max_images)
    if left_out:
        text += f"\n[{left_out} more image(s) not attached; at most {max_images} per call]"
    details = {"outputs": capture.outputs, **details, "run": run_number, "code": code}
    return AgentToolResult([TextContent(text), *images], details=details)


@contextlib.contextmanager
def _agent_code_run(
    code: str, namespace: dict[str, Any], signal: AbortSignal | None, journal: TurnJournal | None, removed: list[str]
) -> Iterator[None]:
    """One run of agent code at a time (``_RUN_LOCK``; an abort while waiting gives up), told to the turn's
    ``journal`` under the lock (no other call changes the namespace meanwhile), the shell's event callbacks
    kept (those it added are named in ``removed``)."""
    while not _RUN_LOCK.acquire(timeout=0.05):
        if signal is not None and signal.aborted:
            raise RuntimeError(OPERATION_ABORTED)
    try:
        if signal is not None and signal.aborted:
            raise RuntimeError(OPERATION_ABORTED)
        token = journal.before_code(namespace, code) if journal is not None else None
        try:
            with kept_events(removed):
                yield
        finally:
            if journal is not None:
                journal.after_code(namespace, token)
    finally:
        _RUN_LOCK.release()


def _run_in_capture(
    capture: OutputCapture,
    code: str,
    namespace: dict[str, Any],
    signal: AbortSignal | None,
    on_sigint: bool,
    errors: list[BaseException] | None = None,
) -> str | None:
    """Run the cell inside ``capture``; the error text or ``None``; the exception is added to ``errors``."""
    error: str | None = None
    pyplot = sys.modules.get("matplotlib.pyplot")
    figures_before = set(pyplot.get_fignums()) if pyplot is not None else set()
    interrupter = Interrupter(signal, on_sigint)
    shown_figure = None
    try:
        with interrupter:
            value, shown_figure = _run_cell(code, namespace)
            if value is not None and not interrupter.fired:  # its repr is user code too: interruptible
                as_cell_code(_add_result, capture, value, shown_figure is not None)
        if interrupter.fired:  # it swallowed the interrupt and went on to its end
            raise KeyboardInterrupt
    except BaseException as exception:  # noqa: BLE001 - any failure of user code becomes the error text
        error = OPERATION_ABORTED if interrupter.fired else _user_traceback(exception)
        if errors is not None:
            errors.append(exception)
    _capture_new_figures(capture, figures_before, shown_figure)
    return error


def run_notebook_cell(
    code: str,
    namespace: dict[str, Any],
    *,
    signal: AbortSignal | None = None,
    interrupt_on_sigint: bool = False,
    journal: TurnJournal | None = None,
) -> tuple[list[dict[str, Any]], str, dict[str, Any] | None]:
    """Run ``code`` as a notebook cell would (blocking, one run at a time like ``run_python``, the
    ``journal`` told as there): ``(nbformat outputs, their text for the model, the nbformat error output
    or None)``. An interrupt gives a ``KeyboardInterrupt`` error output."""
    removed_callbacks: list[str] = []
    errors: list[BaseException] = []
    texts: list[str] = []
    with _agent_code_run(code, namespace, signal, journal, removed_callbacks), capturing(texts.append) as capture:
        error = _run_in_capture(capture, code, namespace, signal, interrupt_on_sigint, errors)
    outputs = [dict(output) for output in capture.outputs]
    text = "".join(texts)
    note = removed_note(removed_callbacks)
    if note:
        text += f"{'' if not text or text.endswith(chr(10)) else chr(10)}{note}\n"
    error_output = None
    if error is not None:
        aborted = error == OPERATION_ABORTED
        error_output = {
            "output_type": "error",
            "ename": "KeyboardInterrupt" if aborted else type(errors[0]).__name__,
            "evalue": "" if aborted else str(errors[0]),
            "traceback": error.splitlines(),
        }
        outputs.append(error_output)
        text = f"{text}\n{error}" if text else error
    return outputs, text, error_output


def _run_cell(code: str, namespace: dict[str, Any]) -> tuple[Any, Any]:
    """Execute the cell: ``(value of the last expression or None, that value if it is a figure)``."""
    filename = _register_source(code)
    tree = ast.parse(code, filename=filename)
    last: ast.expr | None = None
    final = tree.body[-1] if tree.body else None
    if isinstance(final, ast.Expr) and not code.rstrip().endswith(";"):
        tree.body.pop()
        last = final.value
    flags = ast.PyCF_ALLOW_TOP_LEVEL_AWAIT
    body = compile(tree, filename, "exec", flags=flags)
    _evaluate(body, namespace)
    if last is None:
        return None, None
    value = _evaluate(compile(ast.Expression(last), filename, "eval", flags=flags), namespace)
    figure_module = sys.modules.get("matplotlib.figure")
    is_figure = figure_module is not None and has_base(value, figure_module.Figure)  # no __class__ of the user's
    return value, (value if is_figure else None)


def _evaluate(code: Any, namespace: dict[str, Any]) -> Any:
    result = eval(code, namespace)
    if code.co_flags & inspect.CO_COROUTINE:
        result = run_coroutine(result)
    return result


def _register_source(code: str) -> str:
    """A cell file name whose source ``linecache`` knows, so tracebacks show the lines."""
    filename = f"<python-tool-{next(_cell_numbers)}>"
    linecache.cache[filename] = (len(code), None, code.splitlines(keepends=True), filename)
    _recent_cells.append(filename)
    while len(_recent_cells) > _MAX_CACHED_CELLS:
        linecache.cache.pop(_recent_cells.popleft(), None)
    return filename


def _user_traceback(exception: BaseException) -> str:
    """The traceback from the first frame of the user's code (the tool's own frames left out)."""
    tb = exception.__traceback__
    while tb is not None and not tb.tb_frame.f_code.co_filename.startswith("<python-tool-"):
        tb = tb.tb_next
    if tb is None:  # a syntax error, or raised before user code ran
        return "".join(traceback.format_exception_only(type(exception), exception)).rstrip()
    return "".join(traceback.format_exception(type(exception), exception, tb)).rstrip()


def _add_result(capture: OutputCapture, value: Any, is_figure: bool) -> None:
    """The cell's value as an ``execute_result``: IPython's formatters inside a shell, the results table outside."""
    shell = current_shell()
    if shell is not None:
        data, metadata = shell.display_formatter.format(value)
    else:
        data, metadata = {"text/plain": repr(value)}, {}
        data.update(display_bundle(value) or {})
    if (shell is None or is_figure) and "image/png" not in data:
        # A figure is shown as an image even where no inline backend registered a PNG formatter.
        png = image_png_bytes(value)
        if png is not None:
            data["image/png"] = base64.b64encode(png).decode("ascii")
    capture.add_display(data, metadata, output_type="execute_result")


def _capture_new_figures(capture: OutputCapture, before: set[int], shown: Any) -> None:
    """Render and close figures the code opened and left open (as the inline backend's flush does)."""
    pyplot = sys.modules.get("matplotlib.pyplot")
    if pyplot is None:
        return
    for number in pyplot.get_fignums():
        if number in before:
            continue
        figure = pyplot.figure(number)
        png = image_png_bytes(figure) if figure is not shown else None
        if png is not None:
            capture.add_display({"image/png": base64.b64encode(png).decode("ascii"), "text/plain": repr(figure)})
        pyplot.close(figure)


def _model_images(outputs: list[dict[str, Any]], limit: int) -> tuple[list[ImageContent], int]:
    """Up to ``limit`` images (PNG/JPEG) from the outputs, fitted for the model; and how many were left out."""
    images: list[ImageContent] = []
    left_out = 0
    for output in outputs:
        data = output.get("data", {})
        mime = next((mime for mime in _MODEL_IMAGE_TYPES if isinstance(data.get(mime), str)), None)
        if mime is None:
            continue
        if len(images) >= limit:
            left_out += 1
            continue
        fitted = fit_image(base64.b64decode(data[mime]), mime)
        if fitted is not None:
            images.append(ImageContent(fitted.data, fitted.mime_type))
    return images, left_out


_RESEND_SECONDS = 0.1
_CANCEL_GRACE_SECONDS = 1.0


def run_coroutine(coroutine: Any) -> Any:
    """Run the cell's top-level ``await`` code on its own event loop, in a thread of its own (in a kernel this
    thread's loop is running, blocked by this call). A ``KeyboardInterrupt`` here (SIGINT, an abort) cancels
    the coroutine and waits up to ``_CANCEL_GRACE_SECONDS`` for it to end."""
    outcome: dict[str, Any] = {}
    finished = threading.Event()

    async def main() -> Any:
        outcome["task"] = asyncio.current_task()
        outcome["loop"] = asyncio.get_running_loop()
        if outcome.get("cancel"):  # interrupted before it started
            coroutine.close()
            raise asyncio.CancelledError
        return await coroutine

    def run() -> None:
        try:
            outcome["value"] = asyncio.run(main())
        except BaseException as exception:  # noqa: BLE001 - re-raised on the calling thread
            outcome["error"] = exception
        finally:
            finished.set()

    threading.Thread(target=run, name="pi-python-await", daemon=True).start()
    # Only lock-free waits here: a KeyboardInterrupt raised inside a lock's acquire (Event.wait) can
    # leave the lock wedged, and repeated interrupts land wherever this thread is.
    deadline: float | None = None
    while not finished.is_set() and (deadline is None or time.monotonic() < deadline):
        try:
            time.sleep(0.02)
        except KeyboardInterrupt:
            if deadline is None:
                deadline = time.monotonic() + _CANCEL_GRACE_SECONDS
                outcome["cancel"] = True
                loop, task = outcome.get("loop"), outcome.get("task")
                if loop is not None and task is not None:
                    loop.call_soon_threadsafe(task.cancel)
    if deadline is not None:
        raise KeyboardInterrupt
    if "error" in outcome:
        raise outcome["error"]
    return outcome.get("value")


def as_cell_code(fn: Callable[..., Any], *args: Any) -> Any:
    """``fn(*args)``, stopped by an interrupt as the cell's own code is (the ``repr`` of the cell's value: the
    user's code, run by IPython's formatters)."""
    return fn(*args)


def _runs_cell_code(frame: Any) -> bool:
    """Whether the cell's code is on the stack from ``frame`` down (it may be calling library code)."""
    while frame is not None:
        code = frame.f_code
        if str(code.co_filename).startswith("<python-tool-") or code in (run_coroutine.__code__, as_cell_code.__code__):
            return True
        frame = frame.f_back
    return False


class Interrupter:
    """While active, an abort raises ``KeyboardInterrupt`` in the thread running the code."""

    def __init__(self, signal: AbortSignal | None, on_sigint: bool = False) -> None:
        self._signal = signal
        self._lock = threading.Lock()
        self._thread_id: int | None = None
        self.fired = False
        self._remove: Callable[[], None] | None = None
        self._on_sigint = on_sigint and threading.current_thread() is threading.main_thread()
        self._previous_handler: Any = None
        self._active = False
        """Read by the SIGINT handler (no lock: it runs on this very thread, between two bytecodes)."""
        self._done = threading.Event()
        self._watchdog: threading.Thread | None = None

    def __enter__(self) -> Interrupter:
        with self._lock:
            self._thread_id = threading.get_ident()
        if self._signal is not None:
            self._remove = self._signal.add_listener(self._interrupt)
        if self._on_sigint:
            self._previous_handler = signals.signal(signals.SIGINT, self._sigint)
            self._active = True
            self._watchdog = threading.Thread(target=self._resend_sigint, name="pi-python-interrupt", daemon=True)
            self._watchdog.start()
        return self

    def _sigint(self, signum: int, frame: Any) -> None:
        """The previous handler first, for the first SIGINT only (the turn's hook aborts the turn once; the
        watchdog's repeats are ours), then stop the code: raised only while the cell's code is on the stack
        (not while it is compiled or cleaned up after)."""
        previous = self._previous_handler
        if callable(previous) and not self.fired:
            try:
                previous(signum, frame)
            except KeyboardInterrupt:
                pass  # ours follows
        if self._active:
            self.fired = True
            if _runs_cell_code(frame):
                raise KeyboardInterrupt

    def _resend_sigint(self) -> None:
        """The watchdog (started with the code, as the handler must not start threads): once fired, re-send."""
        while not self._done.wait(_RESEND_SECONDS):
            if self.fired:
                signals.pthread_kill(threading.main_thread().ident or 0, signals.SIGINT)

    def _interrupt(self, _reason: Any) -> None:
        with self._lock:
            if self._thread_id is None:
                return
            self.fired = True
            ctypes.pythonapi.PyThreadState_SetAsyncExc(
                ctypes.c_ulong(self._thread_id), ctypes.py_object(KeyboardInterrupt)
            )

    def __exit__(self, *exc_info: Any) -> None:
        self._active = False
        self._done.set()
        if self._watchdog is not None:
            self._watchdog.join()  # a SIGINT it sent lands here, still in our handler (which now ignores it)
        if self._on_sigint and signals.getsignal(signals.SIGINT) == self._sigint:
            previous = self._previous_handler
            signals.signal(signals.SIGINT, previous if previous is not None else signals.default_int_handler)
        # Stop interrupting before leaving the user's code, and cancel an
        # interrupt that is scheduled but has not landed yet; one landing
        # during this very step is caught and the step retried.
        thread_id = threading.get_ident()
        while True:
            try:
                with self._lock:
                    self._thread_id = None
                    if self.fired:
                        ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(thread_id), None)
                break
            except KeyboardInterrupt:
                self.fired = True
        if self._remove is not None:
            self._remove()
