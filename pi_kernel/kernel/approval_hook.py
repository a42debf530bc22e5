"""A kernel session's approvals: the ``before_tool_call`` gate, and who can answer when it asks.

``SessionApprovals`` builds the broker and the policy on first use, takes decisions from comm messages and
magics, and tells ``pi.approval`` comms of every request and decision; ``ApprovalGate`` is the hook. The
decision is ``pi_kernel.tools.approval.decide`` (docs/security.md "Approvals"). Every wait ends: a
decision, the broker's timeout, or an interrupt (``deny_all``).

Who can answer: the first answerer that can answer the turn now: ``widget`` (an Approve / Deny card),
``comm`` (a ``pi.approval`` client), ``stdin`` (ipykernel's ``raw_input``, in a worker thread so the loop
keeps running; when the approval is settled another way, a ``KeyboardInterrupt`` raised in the worker
ends ``raw_input``'s poll), ``nobody`` (nbclient, papermill: denied at once, saying how to allow such
calls). A blocking cell (``%autoawait off`` outside a kernel) blocks the shell: only stdin can answer it.

``pi_kernel.tools``, ``pi_kernel.agent`` and ``pi_kernel.widgets`` are imported lazily, inside the
functions that use them: each pulls in whole layers (about 100 ms of a kernel's start).

Long: the gate and every answerer it can hand a question to (widget, comm, stdin, nobody) are one flow, read
top to bottom.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import ctypes
import json
import reprlib
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from pi_kernel.kernel.config import PiSettings
from pi_kernel.kernel.outgoing import restored
from pi_kernel.kernel.turn import FrontendTracker

if TYPE_CHECKING:
    from pi_kernel.agent.types import BeforeToolCallContext, BeforeToolCallResult
    from pi_kernel.ai import AbortSignal
    from pi_kernel.kernel.turn import Turn
    from pi_kernel.tools.approval import (
        Answerer,
        ApprovalBroker,
        ApprovalDecision,
        ApprovalPolicy,
        ApprovalPreview,
        ApprovalRequest,
    )
    from pi_kernel.tools.definition import ToolDefinition

USER_DENIED = "The user denied this tool call."


def decision_from_fields(fields: dict[str, Any], source: str) -> ApprovalDecision:
    """A comm message's or stdin answer's fields → ``ApprovalDecision`` (``ValueError`` if malformed)."""
    from pi_kernel.tools.approval import ApprovalDecision

    kind = fields.get("decision")
    if kind not in ("approve", "always", "deny"):
        raise ValueError(f"decision must be approve, always or deny; got {kind!r}")
    args = fields.get("args")
    if args is not None and not isinstance(args, dict):
        raise ValueError("args must be a JSON object")
    return ApprovalDecision(kind, str(fields["reason"]) if fields.get("reason") else None, args, source=source)


def result_of(
    decision: ApprovalDecision, policy: ApprovalPolicy, tool_name: str, original: Any = None
) -> BeforeToolCallResult | None:
    """What the loop gets for a person's decision (``None``: run as is). Edited arguments get back every
    value the person saw masked and left as it was (``original``: the arguments as asked)."""
    from pi_kernel.agent.types import BeforeToolCallResult

    if decision.kind == "deny":
        return BeforeToolCallResult(block=True, reason=decision.reason or USER_DENIED)
    if decision.kind == "always":
        policy.allow_always(tool_name)
    if decision.args is not None:
        return BeforeToolCallResult(args=restored(decision.args, original) if original is not None else decision.args)
    return None


@dataclass
class ApprovalGate:
    """The hook. The session gives it callables so that it reads the current state each call."""

    policy: Callable[[], ApprovalPolicy]
    broker: Callable[[], ApprovalBroker]
    definition: Callable[[str], ToolDefinition | None]
    turn: Turn | None = None
    """The running ``Turn`` (``None``: a run started from code), handed to the answerers."""
    tool_context: Callable[[], Any] = lambda: None
    """The session's ``ToolContext``, for a tool's ``approval_preview`` and the cells a call names."""

    def mode_override(self) -> str | None:
        """The running cell's ``%%pi --approve MODE``."""
        return self.turn.options.approve if self.turn is not None else None

    def answerer(self) -> Answerer:
        """Who takes a request now: the first of the broker's answerers that can answer the turn."""
        return self.broker().answerer_for(self.turn) or NOBODY

    async def __call__(self, ctx: BeforeToolCallContext, signal: AbortSignal | None = None) -> Any:
        from pi_kernel.tools.approval import decide

        name = ctx.tool_call.name
        definition = self.definition(name)
        policy = self.policy()
        cells = await self._named_cells(definition, ctx.tool_call.id, ctx.args)
        cwd = getattr((self.turn.context if self.turn else None) or self.tool_context(), "cwd", None)  # turn's folder
        decision = decide(definition, name, ctx.args, policy.state(self.mode_override()), cells, cwd)
        if decision.verdict == "run":
            return None
        result = await self._asked(ctx, definition, decision, signal)
        if result is not None and result.block and cells is not None:  # not run: its pinned cells go now
            from pi_kernel.tools.builtin.notebook_edits import forget_plan

            forget_plan(ctx.tool_call.id)
        return result

    async def _asked(
        self, ctx: BeforeToolCallContext, definition: ToolDefinition | None, decision: Any, signal: AbortSignal | None
    ) -> Any:
        from pi_kernel.tools.approval import ApprovalRequest, plain_arguments

        name = ctx.tool_call.name
        policy = self.policy()
        parameters = getattr(definition, "parameters", None)
        request = ApprovalRequest(
            tool_call_id=ctx.tool_call.id,
            tool_name=name,
            args=plain_arguments(ctx.args),
            label=definition.label if definition is not None else name,
            schema=parameters if isinstance(parameters, dict) else None,
        )
        if decision.secret is not None:
            request.warning = f"This call may read secrets: {decision.secret}."
        if decision.verdict == "deny":
            return self._deny_by_policy(request, decision.reason or USER_DENIED)
        answerer = self.answerer()
        if not answerer.person:
            return self._deny_by_policy(request, answerer.refusal(name, self.turn))
        preview = getattr(definition, "approval_preview", None)
        if preview is not None:
            failure = await self._preview(request, preview, ctx.args)
            if failure is not None:
                return failure
        notebook = getattr(self.tool_context(), "notebook", None)
        highlight = request.preview.cell_id if request.preview is not None else None
        if highlight and notebook is not None:  # sent, not awaited: a slow front-end never delays the card
            _in_background(notebook.highlight(highlight))
        answered = False
        try:
            answer = await answerer.answer(request, self.broker(), self.turn, signal)
            result = result_of(answer, policy, name, request.args)
            answered = result is None or not result.block
        finally:
            if highlight and notebook is not None:
                _in_background(notebook.highlight(None))
            forget = getattr(definition, "forget_preview", None)
            if not answered and callable(forget):  # denied (or the wait was cut): its plan goes now
                forget(request.tool_call_id)
        return result

    async def _named_cells(
        self, definition: ToolDefinition | None, tool_call_id: str, args: Any
    ) -> dict[str, str] | None:
        """The code of the cells a built-in's ``cells`` arguments name, for ``decide`` (``None``: it names none,
        or there is no notebook, so the tool fails). The cells are pinned (``pin_cells``): the call runs
        exactly the cells judged here, by id, or is refused as stale. Unreadable: an empty mapping, so
        ``decide`` asks (fails closed, ``approval.UNREADABLE_CELLS``)."""
        from pi_kernel.tools.approval import declared_secret_arguments
        from pi_kernel.tools.builtin.notebook_edits import pin_cells, read_refs

        names = [argument for argument, kind in declared_secret_arguments(definition).items() if kind == "cells"]
        refs = [ref for argument in names for ref in getattr(args, argument, None) or ()]
        notebook = getattr(self.tool_context(), "notebook", None)
        if not refs or notebook is None:
            return None
        try:
            _, cells = await read_refs(notebook, refs)
        except Exception:  # noqa: BLE001 - unreadable now: nothing judged, so decide asks (fail closed)
            return {}
        pin_cells(tool_call_id, args, cells)
        return {ref: cell.source if cell.type == "code" else "" for ref, cell in zip(refs, cells, strict=True)}

    async def _preview(self, request: ApprovalRequest, preview: Any, args: Any) -> BeforeToolCallResult | None:
        """Put the change on the card; a change that cannot be made fails the call unasked (``None``: ask)."""
        from pi_kernel.agent.types import BeforeToolCallResult
        from pi_kernel.tools.notebook_document import NotebookError

        try:
            request.preview = await preview(request.tool_call_id, args, self.tool_context())
        except NotebookError as error:
            return BeforeToolCallResult(block=True, reason=str(error))
        except Exception as error:  # noqa: BLE001 - a broken preview fails the call, with the reason
            return BeforeToolCallResult(block=True, reason=f"Could not prepare the change: {error}")
        return None

    def _deny_by_policy(self, request: ApprovalRequest, reason: str) -> BeforeToolCallResult:
        """Denied with nobody asked; the broker's listeners (views, approval comms) still hear of it."""
        from pi_kernel.agent.types import BeforeToolCallResult
        from pi_kernel.tools.approval import ApprovalDecision

        request.decision = ApprovalDecision("deny", reason, source="policy")
        self.broker().announce(request)
        return BeforeToolCallResult(block=True, reason=reason)


def nobody_to_ask(tool_name: str) -> str:
    return (
        f'Tool "{tool_name}" needs approval, but nobody can approve it here (no widget front-end, no '
        f"pi.approval comm, no stdin), so it was not run. To allow such calls, set PI_APPROVAL=auto, "
        f"or run `%pi approve auto` or `%pi approve {tool_name}=auto` in the notebook."
    )


def blocked_cell(tool_name: str) -> str:
    """The reason of a denial in a ``%%pi`` cell run with ``%autoawait off`` and no stdin."""
    return (
        f'Tool "{tool_name}" needs approval, but this %%pi cell runs with %autoawait off, so it blocks the '
        f"kernel: no Approve click or comm message can reach it, and this front-end allows no stdin prompt. "
        f"It was not run. Run `%autoawait on` (the default) and re-run the cell, or run "
        f"`%pi approve {tool_name}=auto` to let it run without asking."
    )


def _blocking(asking: Any) -> bool:
    return bool(getattr(asking, "blocking", False))


@dataclass
class WaitInBroker:
    """An answerer whose answer comes from outside (a button, a comm message, a magic) while the request waits
    in the broker, when ``when(asking)``; ``blocking``: also in a blocking turn. ``NOBODY`` is no ``person``."""

    name: str
    when: Callable[[Any], bool]
    person: bool = True
    blocking: bool = False

    def can_answer(self, asking: Any) -> bool:
        return (self.blocking or not _blocking(asking)) and self.when(asking)

    async def answer(
        self, request: ApprovalRequest, broker: ApprovalBroker, asking: Any, signal: AbortSignal | None
    ) -> ApprovalDecision:
        return await broker.request(request, signal)

    def refusal(self, tool_name: str, asking: Any) -> str:
        return blocked_cell(tool_name) if _blocking(asking) else nobody_to_ask(tool_name)


class StdinAnswerer(WaitInBroker):
    """Asks on the turn's stdin while the request waits in the broker (a comm may still answer first).

    One question at a time without a lock: only a ``%%pi`` turn has a stdin, one turn runs at a time, and the
    agent asks ``before_tool_call`` of a batch's calls one after the other (``agent.tool_execution``)."""

    def __init__(self) -> None:
        super().__init__("stdin", lambda asking: getattr(asking, "stdin", None) is not None, blocking=True)

    async def answer(
        self, request: ApprovalRequest, broker: ApprovalBroker, asking: Any, signal: AbortSignal | None
    ) -> ApprovalDecision:
        asker = asyncio.ensure_future(self._ask(broker, request, asking.stdin))
        try:
            return await broker.request(request, signal)
        finally:
            asker.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await asker

    async def _ask(self, broker: ApprovalBroker, request: ApprovalRequest, reader: Callable[[str], str]) -> None:
        if request.decision is not None:  # decided (a comm, another thread) before this task started
            return
        answer = await ask_on_stdin(reader, question(request.tool_name, request.args, request.warning, request.preview))
        fields = parse_answer(answer) if answer is not None else {"decision": "deny", "reason": "No answer on stdin."}
        broker.resolve(request.tool_call_id, decision_from_fields(fields, "stdin"))


NOBODY = WaitInBroker("nobody", lambda asking: True, person=False, blocking=True)


def kernel_answerers(frontend: FrontendTracker, view_factory: Callable[[], Any]) -> list[Answerer]:
    """The kernel's answerers in order: widget, comm, stdin, nobody (see the module docstring)."""

    def widgets(asking: Any) -> bool:
        if not (asking.widgets if asking is not None else frontend.widgets):
            return False
        try:  # without views of the session's own, the widgets package draws the card
            if view_factory() is None:
                from pi_kernel.widgets.factory import make_widget_view  # noqa: F401
        except ImportError:
            return False
        return True

    return [
        WaitInBroker("widget", widgets),
        WaitInBroker("comm", lambda asking: bool(frontend.approval_clients)),
        StdinAnswerer(),
        NOBODY,
    ]


# -- the stdin question ----------------------------------------------------------------------------

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


def short_json(value: Any, limit: int = 300) -> str:
    """``value`` (masked in the view model) as one line of JSON, invisible characters shown (``[note]`` first),
    beyond ``limit`` its head and tail around the hidden middle, named (``cut_middle``)."""
    from pi_kernel.tools.approval import cut_middle, invisible_warning, reveal_invisible

    try:
        text = json.dumps(value, ensure_ascii=False, default=str)
    except (TypeError, ValueError, RecursionError):  # too deep: arguments still streaming, say
        text = reprlib.repr(value)
    text, invisible = reveal_invisible(text, json_text=True)  # bidi overrides, zero-width: shown as \uXXXX
    note = f"[{invisible_warning(invisible)}] " if invisible else ""
    return note + cut_middle(text, limit)


def preview_text(preview: ApprovalPreview, limit: int = QUESTION_ARGS_CHARS) -> str:
    """A change's title and diff as plain lines (masked in the view model: ``ShownRequest.preview``; invisible
    characters shown, head and tail kept)."""
    from pi_kernel.tools.approval import cut_middle, invisible_warning, reveal_invisible

    diff, invisible = reveal_invisible(preview.diff)
    title, in_title = reveal_invisible(preview.title)
    note = f"[{invisible_warning(invisible + in_title)}]\n" if invisible + in_title else ""
    return f"{note}{title}\n{cut_middle(diff.rstrip(), limit)}\n"


def question(tool_name: str, args: Any, warning: str | None = None, preview: ApprovalPreview | None = None) -> str:
    """The stdin question for a call: the request as the view model draws it (``ShownRequest``: masked before
    any cut), invisible characters shown, cut in the middle."""
    from pi_kernel.tools.approval import ApprovalRequest
    from pi_kernel.widgets.turn_state import ShownRequest

    shown = ShownRequest(ApprovalRequest("", tool_name, args, warning=warning, preview=preview))
    note = f"[{shown.warning}] " if shown.warning else ""
    # with a preview: the change as a diff, the arguments, shorter, below it
    head, limit = (preview_text(shown.preview), 300) if shown.preview is not None else ("", QUESTION_ARGS_CHARS)
    return f"{head}{note}Allow {tool_name} {short_json(shown.args, limit)}? {ANSWERS_HELP}: "


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


_background: set[asyncio.Future[Any]] = set()
"""Cosmetic front-end requests under way (kept referenced until they end)."""


def _in_background(awaitable: Any) -> None:
    """Run a cosmetic front-end request (a highlight) on its own; its failure never changes the approval."""

    async def quietly() -> None:
        with contextlib.suppress(Exception):  # a gone or slow front-end: the card still shows the change
            await awaitable

    task = asyncio.ensure_future(quietly())
    _background.add(task)
    task.add_done_callback(_background.discard)


class ApprovalHost(Protocol):
    """What ``SessionApprovals`` reads of its session (``PiSession``), each time it needs it."""

    settings: PiSettings
    frontend: FrontendTracker

    @property
    def view_factory(self) -> Callable[..., Any] | None: ...

    @property
    def tool_context(self) -> Any: ...

    def tool_definition(self, name: str) -> ToolDefinition | None: ...


class SessionApprovals:
    """A session's approvals (``PiSession.approvals``): see the module docstring."""

    def __init__(self, session: ApprovalHost) -> None:
        self._session = session
        self._broker: ApprovalBroker | None = None
        self._policy: ApprovalPolicy | None = None
        self._lock = threading.Lock()

    @property
    def broker(self) -> ApprovalBroker:
        with self._lock:
            if self._broker is None:
                from pi_kernel.tools.approval import ApprovalBroker

                self._broker = ApprovalBroker(timeout=self._session.settings.approval_timeout)
                self._broker.subscribe(self._announce)
                session = self._session
                for answerer in kernel_answerers(session.frontend, lambda: session.view_factory):
                    self._broker.register(answerer)
            return self._broker

    @property
    def policy(self) -> ApprovalPolicy:
        with self._lock:
            if self._policy is None:
                from pi_kernel.tools.approval import ApprovalPolicy

                settings = self._session.settings
                self._policy = ApprovalPolicy()
                self._policy.set_mode(settings.approval)
                for name, mode in settings.approval_overrides.items():
                    self._policy.set_override(name, mode)
            return self._policy

    def gate(self, turn: Turn | None = None) -> ApprovalGate:
        """A ``before_tool_call`` for the calls of ``turn`` (``None``: a run started from code)."""
        return ApprovalGate(
            policy=lambda: self.policy,
            broker=lambda: self.broker,
            definition=self._session.tool_definition,
            turn=turn,
            tool_context=lambda: self._session.tool_context,
        )

    def resolve_fields(self, tool_call_id: str, fields: dict[str, Any], source: str = "user") -> bool:
        """Resolve a waiting approval from a comm message or a magic (any thread)."""
        if self._broker is None:
            return False
        return self._broker.resolve(tool_call_id, decision_from_fields(fields, source))

    def pending(self) -> list[dict[str, Any]]:
        """The waiting requests, as ``pi.approval`` comms and ``%pi allow`` / ``deny`` see them."""
        if self._broker is None:
            return []
        return [request_fields(request) for request in self._broker.pending()]

    def deny_all(self) -> None:
        """Deny every waiting request (an interrupt)."""
        if self._broker is not None:
            self._broker.deny_all()

    def _announce(self, event: str, request: ApprovalRequest) -> None:
        message: dict[str, Any] = {"event": event, "request": request_fields(request)}
        if (decision := request.decision) is not None:
            message["decision"] = {"kind": decision.kind, "reason": decision.reason, "source": decision.source}
        self._session.frontend.broadcast(message)


def request_fields(request: ApprovalRequest) -> dict[str, Any]:
    """A request as the front-end gets it over the comm (masked there, on its way out: ``outgoing``)."""
    return {
        "tool_call_id": request.tool_call_id,
        "tool_name": request.tool_name,
        "label": request.label,
        "args": request.args,
        **({"preview": {"title": p.title, "diff": p.diff, "cell_id": p.cell_id}} if (p := request.preview) else {}),
    }
