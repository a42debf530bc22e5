"""Who can answer a kernel's approvals: the answerers a session registers with its broker, in order.

1. ``widget``: the front-end that sent the cell renders widgets (an Approve / Deny
   card); the request waits in the broker for a click;
2. ``comm``: a client holds a ``pi.approval`` comm (``frontend``); the request
   waits for its message;
3. ``stdin``: the cell's request allows stdin: a question through ipykernel's
   ``raw_input`` (answers can also still come from a comm meanwhile);
4. ``nobody`` (nbclient, papermill without stdin): denied at once, with a reason
   that says how to allow such calls.

A blocking cell (``Turn.blocking``: ``%autoawait off``) never gets a click or a
comm message, so only stdin can answer it, and ``nobody`` says to turn
autoawait back on rather than wait out the timeout.

The broker (``tools.approval.ApprovalBroker``) asks them in order; the first that
can answer takes the request. ``asking`` is the running ``Turn`` (``None``: a run
started from code). Nothing here imports the tool layer at load time (the kernel
loads this module at start): ``pi_kernel.kernel.text_view`` and
``pi_kernel.kernel.stdin_prompt`` (which pull in the tool layer) are imported
lazily, inside the functions that use them.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:
    from pi_kernel.ai import AbortSignal
    from pi_kernel.kernel.frontend import FrontendTracker
    from pi_kernel.tools.approval import Answerer, ApprovalBroker, ApprovalDecision, ApprovalRequest

Decide = Callable[[dict[str, Any], str], "ApprovalDecision"]
"""``decide(fields, source)``: an answer's fields as a decision (``approval_hook.decision_from_fields``)."""


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


def _stdin(asking: Any) -> Callable[[str], str] | None:
    return getattr(asking, "stdin", None) if asking is not None else None


@dataclass
class WaitInBroker:
    """An answerer whose answer comes from outside (a widget's button, a comm message, a magic): the request
    waits in the broker. ``when(asking)`` says whether that outside can answer now."""

    name: str
    when: Callable[[Any], bool]
    person: bool = True

    def can_answer(self, asking: Any) -> bool:
        return not _blocking(asking) and self.when(asking)

    async def answer(
        self, request: ApprovalRequest, broker: ApprovalBroker, asking: Any, signal: AbortSignal | None
    ) -> ApprovalDecision:
        return await broker.request(request, signal)

    def refusal(self, tool_name: str, asking: Any) -> str:
        return nobody_to_ask(tool_name)


@dataclass
class StdinAnswerer:
    """Asks on the turn's stdin while the request waits in the broker (a comm may still answer first)."""

    decide: Decide
    name: str = "stdin"
    person: bool = True
    _turns: dict[asyncio.AbstractEventLoop, asyncio.Lock] = field(default_factory=dict, repr=False)
    """One stdin question at a time (parallel tool calls); a lock per loop."""

    def can_answer(self, asking: Any) -> bool:
        return _stdin(asking) is not None

    async def answer(
        self, request: ApprovalRequest, broker: ApprovalBroker, asking: Any, signal: AbortSignal | None
    ) -> ApprovalDecision:
        import contextlib

        reader = _stdin(asking)
        asker = asyncio.ensure_future(self._ask(broker, request, reader)) if reader is not None else None
        try:
            return await broker.request(request, signal)
        finally:
            if asker is not None:
                asker.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await asker

    async def _ask(self, broker: ApprovalBroker, request: ApprovalRequest, reader: Callable[[str], str]) -> None:
        from pi_kernel.kernel.stdin_prompt import ask_on_stdin, parse_answer, question

        turn = self._turns.setdefault(asyncio.get_running_loop(), asyncio.Lock())
        async with turn:
            if request.decision is not None:
                return
            prompt = question(request.tool_name, request.args, request.warning, request.preview)
            answer = await ask_on_stdin(reader, prompt)
            fields = (
                parse_answer(answer) if answer is not None else {"decision": "deny", "reason": "No answer on stdin."}
            )
            broker.resolve(request.tool_call_id, self.decide(fields, "stdin"))

    def refusal(self, tool_name: str, asking: Any) -> str:
        return nobody_to_ask(tool_name)


@dataclass
class Nobody:
    """The last answerer: nobody can be asked, so the call is denied with a reason saying what to do."""

    name: str = "nobody"
    person: bool = False

    def can_answer(self, asking: Any) -> bool:
        return True

    async def answer(
        self, request: ApprovalRequest, broker: ApprovalBroker, asking: Any, signal: AbortSignal | None
    ) -> ApprovalDecision:
        raise RuntimeError("nobody answers: the gate denies with refusal()")  # pragma: no cover

    def refusal(self, tool_name: str, asking: Any) -> str:
        return blocked_cell(tool_name) if _blocking(asking) else nobody_to_ask(tool_name)


NOBODY = Nobody()


def kernel_answerers(frontend: FrontendTracker, view_factory: Callable[[], Any], decide: Decide) -> list[Answerer]:
    """The kernel's answerers in order: widget, comm, stdin, nobody (see the module docstring)."""

    def widgets(asking: Any) -> bool:
        from pi_kernel.kernel.text_view import widget_view_factory

        shown = asking.widgets if asking is not None else frontend.widgets
        return bool(shown) and (view_factory() is not None or widget_view_factory() is not None)

    return [
        WaitInBroker("widget", widgets),
        WaitInBroker("comm", lambda asking: bool(frontend.approval_clients)),
        StdinAnswerer(decide),
        NOBODY,
    ]


ROUTES: dict[str, Literal["frontend", "stdin"] | None] = {
    "widget": "frontend",
    "comm": "frontend",
    "stdin": "stdin",
    "nobody": None,
}
"""An answerer's name as the older route words (``ApprovalGate.route``)."""
