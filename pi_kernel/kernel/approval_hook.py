"""``before_tool_call`` for a session: the policy's rules first, then whoever can answer if they say "ask".

Arguments were validated by the loop before this hook runs, so a malformed
call never reaches a person. The decision is ``approval_rules.decide`` (one
pure function over an ordered rule table, docs/security.md "Approvals"); who
can answer is the list of answerers registered with the broker
(``approval_answerers``: widget, comm client, stdin, nobody), the first that
can answer the turn now takes the request.

With ``%autoawait off`` outside a kernel the turn runs to its end on IPython's
loop and blocks the shell, so no click or comm message can reach it: only
stdin can answer, and without it the call is denied at once, saying to turn
autoawait back on, rather than waiting out the timeout. (In a kernel such a
cell does not run: ``cell_runner.run_cell_sync``.)

Every wait ends: a decision, the broker's timeout, or an interrupt (the
signal's abort and ``deny_all`` resolve it as denied).

This module is the session's one home for approvals: ``SessionApprovals``
builds the broker (with its answerers) and the policy on first use, takes
decisions from comm messages and magics (``resolve_fields``) and tells
``pi.approval`` comms of every request and decision; ``ApprovalGate`` is the
hook itself. A ``%%pi`` cell passes its ``Turn`` (``gate(turn)``, a per-run
override of the agent's hook); the agent's own hook (``gate()``) serves runs
started from code, with no turn.

``pi_kernel.tools`` (the broker, the policy, the rules), ``pi_kernel.agent``
(the hook's result type) are imported lazily, inside the functions that use
them: this module loads with the kernel, and each of them pulls in the whole
tool and agent layers (about 100 ms of a kernel's start), which a kernel that
never prompts the agent should not pay.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Literal, Protocol

from pi_kernel.kernel.approval_answerers import (
    NOBODY,
    ROUTES,
    StdinAnswerer,
    WaitInBroker,
    blocked_cell,
    kernel_answerers,
    nobody_to_ask,
)
from pi_kernel.kernel.config import PiSettings
from pi_kernel.kernel.outgoing import restored
from pi_kernel.kernel.turn import FrontendTracker

if TYPE_CHECKING:
    from pi_kernel.agent.types import BeforeToolCallContext, BeforeToolCallResult
    from pi_kernel.ai import AbortSignal
    from pi_kernel.kernel.turn import Turn
    from pi_kernel.tools.approval import Answerer, ApprovalBroker, ApprovalDecision, ApprovalRequest
    from pi_kernel.tools.approval_policy import ApprovalPolicy
    from pi_kernel.tools.definition import ToolDefinition

Route = Literal["frontend", "stdin"] | None

USER_DENIED = "The user denied this tool call."


__all__ = ["ApprovalGate", "SessionApprovals", "blocked_cell", "decision_from_fields", "nobody_to_ask"]


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
        args = restored(decision.args, original) if original is not None else decision.args
        return BeforeToolCallResult(args=args)
    return None


@dataclass
class ApprovalGate:
    """The hook. The session gives it callables so that it reads the current state each call."""

    policy: Callable[[], ApprovalPolicy]
    broker: Callable[[], ApprovalBroker]
    definition: Callable[[str], ToolDefinition | None]
    route: Callable[[], Route] | None = None
    """A fixed route (``frontend``, ``stdin``, ``None``: nobody) instead of the broker's answerers; without
    one, ``route()`` says which answerer would take a request now."""
    turn: Any = None
    """The running ``Turn`` (``None``: a run started from code), handed to the answerers."""
    mode_override: Callable[[], str | None] = lambda: None
    """A ``%%pi --approve MODE`` for the running cell."""
    raw_input: Callable[[], Callable[[str], str] | None] = lambda: None
    """The front-end's ``input()`` for the running cell, when it allows stdin."""
    nobody_reason: Callable[[str], str] | None = None
    """Why nobody can answer, given the tool's name (default: the ``nobody`` answerer's refusal)."""
    tool_context: Callable[[], Any] = lambda: None
    """The session's ``ToolContext``, for a tool's ``approval_preview``."""
    _fixed: Callable[[], Route] | None = field(default=None, init=False, repr=False)

    def __post_init__(self) -> None:
        self._fixed = self.route
        if self.route is None:
            self.route = lambda: ROUTES[self.answerer().name]  # the answerer's name as a route word
        if self.nobody_reason is None:
            self.nobody_reason = lambda name: NOBODY.refusal(name, self.turn)

    def answerer(self) -> Answerer:
        """Who takes a request now: the first of the broker's answerers that can answer the turn."""
        if self._fixed is not None:
            return _FIXED_ROUTES[self._fixed()]
        return self.broker().answerer_for(self.turn) or NOBODY

    async def __call__(self, ctx: BeforeToolCallContext, signal: AbortSignal | None = None) -> Any:
        from pi_kernel.tools.approval import ApprovalRequest, plain_arguments
        from pi_kernel.tools.approval_rules import decide

        name = ctx.tool_call.name
        definition = self.definition(name)
        policy = self.policy()
        decision = decide(definition, name, ctx.args, policy.state(self.mode_override()))
        if decision.verdict != "deny":
            cells_secret = await self._run_cells_secret(definition, name, ctx.args)
            if cells_secret is not None:  # as a secret named in ``python`` code asks, whatever the mode
                verdict = "ask" if decision.verdict == "run" else decision.verdict
                decision = replace(decision, verdict=verdict, secret=decision.secret or cells_secret)
        if decision.verdict == "run":
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
        if decision.secret is not None:
            request.warning = f"This call may read secrets: {decision.secret}."
        if decision.verdict == "deny":
            return self._deny_by_policy(request, decision.reason or USER_DENIED)
        answerer = self.answerer()
        if not answerer.person:
            reason = self.nobody_reason(name) if self.nobody_reason is not None else answerer.refusal(name, self.turn)
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
        answered = False
        try:
            answer = await answerer.answer(request, self.broker(), _Asking(self.turn, self.raw_input), signal)
            result = result_of(answer, policy, name, request.args)
            answered = result is None or not result.block
        finally:
            if highlight and notebook is not None:
                _in_background(notebook.highlight(None))
            forget = getattr(definition, "forget_preview", None)
            if not answered and callable(forget):  # denied (or the wait was cut): its plan goes now
                forget(request.tool_call_id)
        return result

    async def _run_cells_secret(self, definition: ToolDefinition | None, name: str, args: Any) -> str | None:
        """Why the cells a built-in ``run_cells`` will run may read secrets (their sources read from the
        notebook, as its approval card reads them), or ``None``; a notebook that cannot be read: ``None``
        (the card's preview then fails the call)."""
        from pi_kernel.tools.approval_rules import cell_code_reason, origin_of
        from pi_kernel.tools.builtin.notebook_edits import read_refs

        if name != "run_cells" or origin_of(definition) != "builtin":
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


@dataclass(frozen=True)
class _Asking:
    """The turn as the answerers read it, with the gate's stdin reader (a gate may be given one)."""

    turn: Any
    reader: Callable[[], Callable[[str], str] | None]

    @property
    def stdin(self) -> Callable[[str], str] | None:
        return self.reader()

    @property
    def blocking(self) -> bool:
        return bool(getattr(self.turn, "blocking", False))


_FIXED_ROUTES: dict[Route, Answerer] = {
    "frontend": WaitInBroker("frontend", lambda asking: True),
    "stdin": StdinAnswerer(lambda fields, source: decision_from_fields(fields, source)),
    None: NOBODY,
}


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
                session = self._session
                for answerer in kernel_answerers(session.frontend, lambda: session.view_factory, decision_from_fields):
                    self._broker.register(answerer)
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
            turn=turn,
            mode_override=lambda: turn.options.approve if turn is not None else None,
            raw_input=lambda: turn.stdin if turn is not None else None,
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
