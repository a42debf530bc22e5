"""``before_tool_call`` for a session: the policy first, then a person if it says "ask".

Arguments were validated by the loop before this hook runs, so a malformed
call never reaches a person. Who can answer, in order:

1. the front-end (widgets, or a client holding a ``pi.approval`` comm): the
   request waits in the broker until a button or comm message resolves it;
2. stdin, when the cell's request allows it: a question through ipykernel's
   ``raw_input`` (answers can also still come from a comm meanwhile);
3. nobody (nbclient, papermill without stdin): denied with a reason that says
   how to allow such calls.

With ``%autoawait off`` outside a kernel the turn runs to its end on IPython's
loop and blocks the shell, so no click or comm message can reach it: only
stdin can answer, and without it the call is denied at once, saying to turn
autoawait back on (see ``SessionApprovals.route``), rather than waiting out
the timeout. (In a kernel such a cell does not run: ``cell_runner.run_cell_sync``.)

Every wait ends: a decision, the broker's timeout, or an interrupt (the
signal's abort and ``deny_all`` resolve it as denied).

This module is the session's one home for approvals: ``SessionApprovals``
builds the broker and the policy on first use, answers who can be asked in a
turn (``route``), takes decisions from comm messages and magics
(``resolve_fields``) and tells ``pi.approval`` comms of every request and
decision; ``ApprovalGate`` is the hook itself. A ``%%pi`` cell passes its
``Turn`` (``gate(turn)``, a per-run override of the agent's hook); the
agent's own hook (``gate()``) serves runs started from code, with no turn.

``pi_kernel.tools`` (the broker, the policy), ``pi_kernel.agent`` (the hook's
result type), ``pi_kernel.kernel.view_choice`` and
``pi_kernel.kernel.stdin_prompt`` are imported lazily, inside the functions
that use them: this module loads with the kernel, and each of them pulls in
the whole tool and agent layers (about 100 ms of a kernel's start), which a
kernel that never prompts the agent should not pay.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, Protocol

from pi_kernel.ai.secrets import unmask
from pi_kernel.kernel.config import PiSettings
from pi_kernel.kernel.frontend import FrontendTracker

if TYPE_CHECKING:
    from pi_kernel.agent.types import BeforeToolCallContext, BeforeToolCallResult
    from pi_kernel.ai import AbortSignal
    from pi_kernel.kernel.turn import Turn
    from pi_kernel.tools.approval import ApprovalBroker, ApprovalDecision, ApprovalRequest
    from pi_kernel.tools.approval_policy import ApprovalPolicy
    from pi_kernel.tools.definition import ToolDefinition

Route = Literal["frontend", "stdin"] | None

USER_DENIED = "The user denied this tool call."


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


def decision_from_fields(fields: dict[str, Any], source: str) -> ApprovalDecision:
    """A comm message's or stdin answer's fields → ``ApprovalDecision`` (``ValueError`` if malformed)."""
    from pi_kernel.tools.approval import ApprovalDecision

    kind = fields.get("decision")
    if kind not in ("approve", "always", "deny"):
        raise ValueError(f"decision must be approve, always or deny; got {kind!r}")
    args = fields.get("args")
    if args is not None and not isinstance(args, dict):
        raise ValueError("args must be a JSON object")
    reason = fields.get("reason")
    return ApprovalDecision(kind, str(reason) if reason else None, args, source=source)


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
        args = unmask(decision.args, original) if original is not None else decision.args
        return BeforeToolCallResult(args=args)
    return None


@dataclass
class ApprovalGate:
    """The hook. The session gives it callables so that it reads the current state each call."""

    policy: Callable[[], ApprovalPolicy]
    broker: Callable[[], ApprovalBroker]
    definition: Callable[[str], ToolDefinition | None]
    route: Callable[[], Route]
    mode_override: Callable[[], str | None] = lambda: None
    """A ``%%pi --approve MODE`` for the running cell."""
    raw_input: Callable[[], Callable[[str], str] | None] = lambda: None
    """The front-end's ``input()`` for the running cell, when it allows stdin."""
    nobody_reason: Callable[[str], str] = nobody_to_ask
    """Why nobody can answer (route ``None``), given the tool's name; the session knows the reason."""
    tool_context: Callable[[], Any] = lambda: None
    """The session's ``ToolContext``, for a tool's ``approval_preview``."""
    _stdin_turns: dict[asyncio.AbstractEventLoop, asyncio.Lock] = field(default_factory=dict, init=False, repr=False)
    """One stdin question at a time (parallel tool calls); a lock per loop (``%%pi`` may run on a private one)."""

    async def __call__(self, ctx: BeforeToolCallContext, signal: AbortSignal | None = None) -> Any:
        from pi_kernel.tools.approval import ApprovalRequest, plain_arguments

        name = ctx.tool_call.name
        definition = self.definition(name)
        policy = self.policy()
        mode = self.mode_override()
        verdict = policy.decide(definition, ctx.args, name, mode=mode)
        cells_secret = await self._run_cells_secret(definition, name, ctx.args) if verdict != "deny" else None
        if cells_secret is not None:
            verdict = "ask"  # as a secret named in ``python`` code asks, whatever the mode
        if verdict == "run":
            return None
        schema = None
        if definition is not None and isinstance(definition.parameters, dict):
            schema = definition.parameters
        request = ApprovalRequest(
            tool_call_id=ctx.tool_call.id,
            tool_name=name,
            args=plain_arguments(ctx.args),
            label=definition.label if definition is not None else name,
            schema=schema,
        )
        secret = policy.secret_reason(definition, ctx.args, name) or cells_secret
        if secret is not None:
            request.warning = f"This call may read secrets: {secret}."
        route = self.route()
        if verdict == "deny" or route is None:
            reason = policy.deny_reason(name, mode, secret) if verdict == "deny" else self.nobody_reason(name)
            return self._deny_by_policy(request, reason)
        preview = getattr(definition, "approval_preview", None)
        if preview is not None:
            failure = await self._preview(request, preview, ctx.args)
            if failure is not None:
                return failure
        notebook = getattr(self.tool_context(), "notebook", None)
        highlight = request.preview.cell_id if request.preview is not None else None
        if highlight and notebook is not None:  # sent, not awaited: a slow front-end never delays the card
            _in_background(notebook.highlight(highlight))
        try:
            decision = await self._wait(request, route, signal)
        finally:
            if highlight and notebook is not None:
                _in_background(notebook.highlight(None))
        return result_of(decision, policy, name, request.args)

    async def _run_cells_secret(self, definition: ToolDefinition | None, name: str, args: Any) -> str | None:
        """Why the cells a built-in ``run_cells`` will run may read secrets (their sources read from the
        notebook, as its approval card reads them), or ``None``; a notebook that cannot be read: ``None``
        (the card's preview then fails the call)."""
        from pi_kernel.tools.approval_policy import BUILTIN_PACKAGE, cell_code_reason
        from pi_kernel.tools.builtin.notebook_edits import read_refs

        origin = getattr(getattr(definition, "execute", None), "__module__", "") or ""
        if name != "run_cells" or not origin.startswith(BUILTIN_PACKAGE + "."):
            return None

        notebook = getattr(self.tool_context(), "notebook", None)
        refs = getattr(args, "cells", None)
        if notebook is None or not isinstance(refs, list):
            return None
        try:
            _, cells = await read_refs(notebook, refs)
        except Exception:  # noqa: BLE001 - the preview reads them again and fails the call with the reason
            return None
        return cell_code_reason([cell.source for cell in cells if cell.type == "code"])

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

    async def _wait(self, request: ApprovalRequest, route: Route, signal: AbortSignal | None) -> ApprovalDecision:
        broker = self.broker()
        reader = self.raw_input() if route == "stdin" else None
        asker = asyncio.ensure_future(self._ask_on_stdin(broker, request, reader)) if reader else None
        try:
            return await broker.request(request, signal)
        finally:
            if asker is not None:
                asker.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await asker

    async def _ask_on_stdin(
        self, broker: ApprovalBroker, request: ApprovalRequest, reader: Callable[[str], str]
    ) -> None:
        from pi_kernel.kernel.stdin_prompt import ask_on_stdin, parse_answer, question

        turn = self._stdin_turns.setdefault(asyncio.get_running_loop(), asyncio.Lock())
        async with turn:
            if request.decision is not None:
                return
            prompt = question(request.tool_name, request.args, request.warning, request.preview)
            answer = await ask_on_stdin(reader, prompt)
            fields = (
                parse_answer(answer) if answer is not None else {"decision": "deny", "reason": "No answer on stdin."}
            )
            broker.resolve(request.tool_call_id, decision_from_fields(fields, "stdin"))


_background: set[asyncio.Future[Any]] = set()
"""Cosmetic front-end requests under way (kept referenced until they end)."""


def _in_background(awaitable: Any) -> None:
    """Run a cosmetic front-end request (a highlight) on its own; its failure never changes the approval."""

    async def quietly() -> None:
        try:
            await awaitable
        except Exception:  # noqa: BLE001 - a gone or slow front-end: the card still shows the change
            pass

    task = asyncio.ensure_future(quietly())
    _background.add(task)
    task.add_done_callback(_background.discard)


class ApprovalHost(Protocol):
    """What ``SessionApprovals`` reads of its session (``PiSession``), each time it needs it."""

    @property
    def settings(self) -> PiSettings: ...

    @property
    def frontend(self) -> FrontendTracker: ...

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
            return self._broker

    @property
    def policy(self) -> ApprovalPolicy:
        with self._lock:
            if self._policy is None:
                from pi_kernel.tools.approval_policy import ApprovalPolicy

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
            route=lambda: self.route(turn),
            mode_override=lambda: turn.options.approve if turn is not None else None,
            raw_input=lambda: turn.stdin if turn is not None else None,
            nobody_reason=lambda name: self.nobody_reason(name, turn),
            tool_context=lambda: self._session.tool_context,
        )

    def route(self, turn: Turn | None) -> Route:
        """Who can answer an approval of ``turn`` now: the front-end, stdin, or nobody. A blocking cell
        (``Turn.blocking``) never gets a click or comm message, so there only stdin can answer."""
        from pi_kernel.kernel.view_choice import widget_view_factory

        session = self._session
        stdin = turn is not None and turn.stdin is not None
        if turn is not None and turn.blocking:
            return "stdin" if stdin else None
        widgets = turn.widgets if turn is not None else session.frontend.widgets
        widgets_answer = widgets and (session.view_factory is not None or widget_view_factory() is not None)
        if widgets_answer or session.frontend.approval_clients:
            return "frontend"
        return "stdin" if stdin else None

    def nobody_reason(self, tool_name: str, turn: Turn | None = None) -> str:
        """What the model is told when nobody can answer (see ``route``)."""
        return blocked_cell(tool_name) if turn is not None and turn.blocking else nobody_to_ask(tool_name)

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
        if request.decision is not None:
            decision = request.decision
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
