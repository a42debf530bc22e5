"""Running one ``%%pi`` cell: a prompt to the session's agent, shown by a turn view, its code offered as a cell.

A turn runs one way: as a task on the shell's own event loop (``run_turn``, which a ``%%pi`` cell awaits
once ``extension.PiCellRewriter`` rewrote it), so the cell stays busy while it awaits and comm messages
(approval buttons) are still dispatched meanwhile (ipykernel >= 7.4). ``run_cell_sync`` is the path where
no ``await`` was possible (see ``extension``). No private loop, no worker thread.

``run_turn`` makes the cell's ``Turn`` (``turn.py``) and passes it on: its
model, turn limit, approval gate, request hook and thinking effort (stream
options) go to ``Agent.prompt`` as per-run overrides, so the agent's own
settings are never swapped. The turn's tools are the registry's, run with the
turn's own ``ToolContext`` (``turn_tool``: the session's context with the
turn's working directory and undo journal, and a notebook document made for
the turn's cell and client: ``PiSession.lend_notebook``), so nothing of the
turn is set on the session's context (each tool is wrapped once per turn:
its ``ToolRetry`` budget is the turn's).

Code becomes cells: with ``%%pi --cells`` (or ``%pi cells on`` for every
turn), when the turn ends, the code each successful ``python`` call ran (as
run: the tool's ``details["code"]``, so an approval that edited the code gives
the edited code, never the model's refused proposal), in the order the calls
ran, each headed by a comment line, is offered as the next cell through
IPython's ``set_next_input`` (the execute reply's ``set_next_input`` payload;
JupyterLab inserts it as a new cell below). Failed and denied calls are left
out. Nothing else from a ``%%pi`` cell reaches the front-end as a payload: what
the agent's own code asked for (``get_ipython().set_next_input(...)``, a pager,
``exit``) is dropped at the turn's end (``drop_agent_payloads``) and a notice
says so, so no cell is planted unseen, whatever the approval mode. Likewise a message typed into the
turn's box that the turn ended without taking (an interrupt, an error, the turn limit) is dropped, never
sent with the next cell's request, and a notice names it (``unsent_notice``).

``pi_kernel.ai.models`` (in ``with_thinking``) and ``pi_kernel.tools.builtin.notebook_edits`` (in
``first_tool_choice``) are imported lazily: this module loads at kernel start.

Long: one cell's run from its options to its outcome, with the code it offers back as a cell, in the order it happens.
"""

from __future__ import annotations

import argparse
import asyncio
import builtins
import contextlib
import contextvars
import dataclasses
import shlex
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pi_kernel.agent.types import AgentEvent, MessageEndEvent
from pi_kernel.ai import AssistantMessage, Message, TextContent, UserMessage
from pi_kernel.ai.messages import text_of
from pi_kernel.kernel.config import THINKING_LEVELS
from pi_kernel.kernel.model_resolution import NO_MODEL_HELP, model_from_spec, refusal
from pi_kernel.kernel.outgoing import install_payload_gate, payload_gate
from pi_kernel.kernel.session import PiSession, show_notices, with_context_window
from pi_kernel.kernel.text_view import make_turn_view
from pi_kernel.kernel.turn import Turn, TurnOptions, TurnOutcome, interrupt_hook, message_session, shell_request
from pi_kernel.tools.approval import SESSION_MODES, ApprovalRequest
from pi_kernel.tools.definition import wrap_tool_definition

if TYPE_CHECKING:
    from pi_kernel.ai import Context, Tool
    from pi_kernel.ai.models import StreamOptions

CELL_HEADER = "# pi: python call {index} of {total}"


class PiUsageError(Exception):
    """A ``%%pi`` cell that cannot run (bad options, no model); shown without a traceback."""

    def _render_traceback_(self) -> list[str]:
        return [f"UsageError: {self}"]


class PiInterrupted(KeyboardInterrupt):
    """The turn was interrupted; the conversation is kept and the next ``%%pi`` continues it."""

    def _render_traceback_(self) -> list[str]:
        return ["Interrupted: the turn was stopped (every tool call has a result; the next %%pi continues)."]


class PiTurnFailed(Exception):
    """The model request failed (the provider's message, keys masked where it entered)."""

    def _render_traceback_(self) -> list[str]:
        return [f"Error: {self}"]


class _OptionParser(argparse.ArgumentParser):
    def error(self, message: str) -> Any:  # argparse would exit the kernel
        raise PiUsageError(f"%%pi: {message}")


def _positive(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError("must be at least 1")
    return value


def parse_options(line: str) -> TurnOptions:
    """``--model NAME --no-tools --max-turns N --approve MODE --cells --thinking LEVEL --tool NAME|any`` (the ``%%pi``
    line)."""
    parser = _OptionParser(prog="%%pi", add_help=False)
    parser.add_argument("--model", "-m")
    parser.add_argument("--no-tools", action="store_true")
    parser.add_argument("--max-turns", type=_positive)
    parser.add_argument("--approve", choices=SESSION_MODES)
    parser.add_argument("--cells", action="store_true")
    parser.add_argument("--thinking", choices=THINKING_LEVELS)
    parser.add_argument("--tool")
    try:
        words = shlex.split(line)
    except ValueError as error:
        raise PiUsageError(f"%%pi: {error}") from None
    args = parser.parse_args(words)
    if args.tool is not None and args.no_tools:
        raise PiUsageError("%%pi: --tool and --no-tools exclude each other")
    return TurnOptions(**vars(args))  # one option per field, by the same name


def with_thinking(options: StreamOptions | None, level: str | None) -> StreamOptions | None:
    """The agent's stream options with the turn's thinking effort (each provider maps it to its own knob)."""
    if level is None:
        return options
    from pi_kernel.ai.models import StreamOptions  # with pydantic: not at kernel start

    return dataclasses.replace(options or StreamOptions(), reasoning_effort=level)


def first_tool_choice(session: PiSession, tool: str | None) -> str | None:
    """The ``tool_choice`` of the turn's first request for ``--tool`` (``any`` → ``required``); a tool that is not
    there or switched off is a usage error, before anything is sent."""
    if tool is None:
        return None
    registry = session.registry
    if tool == "any":
        if not registry.active_definitions():
            raise PiUsageError("%%pi --tool any: every tool is switched off (%pi tools enable NAME)")
        return "required"
    if tool not in registry:
        raise PiUsageError(f"%%pi --tool: no tool named {tool!r} (known: {', '.join(registry.names()) or 'none'})")
    if not registry.is_enabled(tool):
        raise PiUsageError(f"%%pi --tool: {tool} is switched off (%pi tools enable {tool})")
    if tool in session.hidden_tools():
        raise PiUsageError(f"%%pi --tool: {tool} needs the notebook bridge, and no notebook front-end is connected")
    return tool


def _stdin_reader(session: PiSession, request: dict[str, Any] | None) -> tuple[bool, Any]:
    """Whether the running cell may read stdin, and the function that asks."""
    kernel = session.kernel
    if kernel is not None:
        allowed = bool(((request or {}).get("content") or {}).get("allow_stdin", False))
        return allowed, (kernel.raw_input if allowed else None)
    return sys.stdin is not None and sys.stdin.isatty(), builtins.input


def outcome_of(added: list[Message], interrupted: bool) -> TurnOutcome:
    last = next((message for message in reversed(added) if isinstance(message, AssistantMessage)), None)
    if interrupted or (last is not None and last.stop_reason == "aborted"):
        return TurnOutcome("interrupted", added)
    if last is not None and last.stop_reason == "error":
        return TurnOutcome("error", added, last.error_message or "the model request failed")
    return TurnOutcome("done", added)


async def run_turn(session: PiSession, prompt: str, options: TurnOptions, *, blocking: bool = False) -> TurnOutcome:
    """Run this cell's turn; raises ``PiInterrupted`` / ``PiTurnFailed`` so the cell ends in error like Python does.

    ``blocking``: the cell blocks the shell (``run_cell_sync`` outside a kernel), so only stdin can answer approvals.
    """
    prompt = prompt.strip()
    if not prompt:
        raise PiUsageError("%%pi needs a prompt in the cell body")
    if options.model:  # the window the person set holds for the cell's model too
        model = with_context_window(model_from_spec(options.model, session.settings), session.settings.context_window)
    else:
        model = session.model
    if model is None:
        raise PiUsageError(NO_MODEL_HELP)
    refused = refusal(model, session.settings.allowed_models) if options.model else None
    if refused:
        raise PiUsageError(refused)
    agent = session.agent
    if agent.is_running:
        raise PiUsageError("the agent is already running a turn (interrupt it first)")
    if options.tool not in (None, "any") and options.tool not in session.registry:
        with interrupt_hook(session.interrupt, asyncio.get_running_loop()):
            await session.start_mcp()  # it may be an MCP server's tool (servers start before the first turn)
    forced = first_tool_choice(session, options.tool)
    loop = asyncio.get_running_loop()
    request = shell_request(session.kernel)
    cell_id = ((request or {}).get("metadata") or {}).get("cellId")  # as ipykernel gives it to IPython
    allow_stdin, raw_input = _stdin_reader(session, request)
    client = message_session(request)
    widgets = session.frontend.renders_widgets(client)
    turn = Turn(
        options,
        cell_id,
        model,
        options.max_turns or session.settings.max_turns,
        allow_stdin=allow_stdin,
        raw_input=raw_input,
        widgets=widgets,
        blocking=blocking,
        parent=request,
    )
    gate = payload_gate(session.shell)
    if gate is not None:
        gate.mark_pi_cell()  # nothing the agent's code writes leaves this cell as a payload (outgoing.PayloadGate)
    session.turn_journals.retire_offer()
    turn.journal = session.turn_journals.begin(session.settings.undo_memory, prompt.splitlines()[0][:60])
    # relative paths from the cwd of now; what the tools change goes into the turn's journal
    turn.context = dataclasses.replace(session.tool_context, cwd=Path.cwd(), journal=turn.journal)
    turn.view = view = make_turn_view(session, prompt, options, widgets=widgets, model=turn.model)
    replaced = session.conversation.begin(cell_id)  # settled below, whatever happens
    context_before = session.notebook_context.begin(cell_id, rerun=replaced is not None)
    context = contextvars.copy_context()  # approvals resolved on other threads update the view in this cell

    def on_approval(kind: str, request: ApprovalRequest) -> None:
        loop.call_soon_threadsafe(view.handle_approval, kind, request, context=context)

    # The turn's messages, as stored, collected from their ``message_end`` (not by index: a compaction
    # during the turn replaces the list with a shorter one).
    added: list[Message] = []

    def collect(event: AgentEvent) -> None:
        if isinstance(event, MessageEndEvent) and agent.state.messages:
            added.append(agent.state.messages[-1])

    unsubscribe_collect = agent.subscribe(collect)
    unsubscribe_view = agent.subscribe(view.handle_event)
    unsubscribe_approvals = session.broker.subscribe(on_approval)
    # its notebook tools know the cell they run in, and ask the client that sent it
    end_notebook = session.lend_notebook(turn.context, cell_id, client)
    session.set_turn(turn)
    cancelled = False
    try:
        with interrupt_hook(session.interrupt, loop):
            # inside: a re-run's cut conversation is settled by ``conversation.settle``
            message = prompt_message(session, prompt, model.provider)
            await asyncio.sleep(0)  # an interrupt pressed while the context was read lands here
            await session.start_mcp()
            show_notices(session, "pi_kernel")  # an MCP server that did not start
            if not turn.interrupted:
                await agent.prompt(
                    message,
                    model=turn.model,
                    max_turns=turn.max_turns,
                    # its approval previews resolve paths as its tools do: with the turn's context
                    before_tool_call=dataclasses.replace(
                        session.approvals.gate(turn), tool_context=lambda: turn.context
                    ),
                    prepare_next_turn=lambda request: prepare_request(session, turn, request),
                    stream_options=with_thinking(agent.stream_options, options.thinking or session.settings.thinking),
                    first_tool_choice=forced,  # %%pi --tool: the turn's first request only
                )
    except asyncio.CancelledError:
        cancelled = True  # a second interrupt (the turn did not stop on the first)
    finally:
        session.set_turn(None)
        end_notebook()
        if turn.journal is not None:
            session.turn_journals.end(turn.journal, added)
        unsubscribe_collect()
        unsubscribe_view()
        unsubscribe_approvals()
        outcome = outcome_of(added, turn.interrupted or cancelled)
        took_effect = session.conversation.settle(replaced, outcome.messages)
        view.finish(outcome)  # its message box is closed: nothing more is queued for this turn
        unsent_notice(session, agent.take_unsent() + agent.clear_all_queues())
        if turn.journal is not None:
            session.turn_journals.offer(view, turn.journal, session)
        if took_effect and outcome.messages:
            session.notebook_context.after_turn(session.tool_context.namespace, session.hidden_names())
        else:  # the context the turn was told is not in the conversation: tell the next turn
            session.notebook_context.restore(context_before)
        gate = install_payload_gate(session.shell)  # put back if the agent's code replaced or unwrapped it
        if gate is not None:
            gate.mark_pi_cell()
        dropped = drop_agent_payloads(session.shell) + (gate.take_dropped() if gate is not None else [])
        if dropped:
            print(
                f"pi_kernel: the agent's code asked the notebook for {', '.join(dropped)} (a new cell, a pager or an "
                "exit); it was not passed on: only %%pi --cells puts the agent's code in a cell.",
                file=sys.stderr,
            )
        if options.cells or session.code_cells:
            with gate.own() if gate is not None else contextlib.nullcontext():
                offer_code_cell(session.shell, outcome.messages)
        show_notices(session, "pi_kernel")  # an MCP server that crashed
    if outcome.status == "interrupted":
        raise PiInterrupted
    if outcome.status == "error":
        raise PiTurnFailed(outcome.error)
    return outcome


def unsent_notice(session: PiSession, unsent: list[Message]) -> None:
    """Tell the person which messages typed into the turn's box it ended without sending (they are dropped,
    never carried into the next cell's turn)."""
    texts = [text_of(message.content) for message in unsent if isinstance(message, UserMessage)]
    if texts:
        quoted = "; ".join(repr(" ".join(text.split())[:200]) for text in texts)
        session.add_notice(f"the turn ended before it took these messages, so they were not sent: {quoted}")


def prepare_request(session: PiSession, turn: Turn, request: Context) -> None:
    """Before each model request of the turn: the session's tools and system prompt (``--no-tools``: none),
    each tool run with the turn's context."""
    session.prepare_request(request, no_tools=turn.options.no_tools)
    request.tools = [turn_tool(turn, tool) for tool in request.tools or ()]


def turn_tool(turn: Turn, tool: Tool) -> Tool:
    """The registry's wrapped ``tool``, run with ``turn.context`` (wrapped once per turn and definition)."""
    definition = getattr(tool, "definition", None)
    if definition is None or turn.context is None:
        return tool
    bound = turn.tools.get(tool.name)
    if bound is None or getattr(bound, "definition", None) is not definition:
        bound = turn.tools[tool.name] = wrap_tool_definition(definition, turn.context)
    return bound


def prompt_message(session: PiSession, prompt: str, provider: str = "") -> UserMessage:
    """The turn's user message: the prompt exactly as written, then the notebook context (when there is
    news) as a second text part (see ``notebook_context``). The local model (``provider`` ``local``) is not
    told the notebook context unless ``%pi context local``: SmolLM2-135M repeats the context instead of
    answering. A ``%pi undo`` since the last turn is told to whichever model runs this turn (one short
    sentence), so it never waits for a later turn and arrives stale."""
    told = not (provider == "local" and not session.context_for_local)
    context = session.notebook_context.take(session.tool_context.namespace, session.hidden_names()) if told else None
    if session.undo_news:
        news = f"The user undid an earlier turn's changes with %pi undo:\n{session.undo_news}"
        context = f"{context}\n\n{news}" if context else news
        session.undo_news = None
    if context is None:
        return UserMessage([TextContent(prompt)])
    # The blank line keeps the two apart where a provider joins a message's text parts (the local model).
    # Keys in the context are masked as the message enters the transcript (``agent.types.admit``).
    return UserMessage([TextContent(prompt), TextContent(f"\n\n{context}")])


CANNOT_AWAIT = (
    "%%pi runs as a task on the kernel's event loop, and top-level await is off here (%autoawait off), so "
    "this cell would block that loop: run `%autoawait on` (the default) and re-run the cell."
)
NESTED = (
    "%%pi runs as a task on the kernel's event loop, which is busy running the cell this one runs inside "
    "(%%capture, %%time, %run, shell.run_cell): run the %%pi cell as a cell of its own. Its output stays "
    "in that cell, and `%pi history` shows the turn afterwards."
)


def run_cell_sync(session: PiSession, body: str, line: str = "", *, autoawait: bool = True) -> None:
    """The ``%%pi`` magic where the cell was not rewritten to an ``await`` (see ``extension``): with no loop
    running here, the turn runs to its end on IPython's own loop (the one its top-level ``await`` and so the
    MCP sessions use), approvals on stdin only (``Turn.blocking``); where one runs, it is busy with this very
    cell, and a ``PiUsageError`` says what to do instead."""
    options = parse_options(line)
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        from IPython.core.async_helpers import get_asyncio_loop

        turn = run_turn(session, body, options, blocking=True)
        get_asyncio_loop().run_until_complete(turn)
        return
    raise PiUsageError(NESTED if autoawait else CANNOT_AWAIT)


def code_cell_text(messages: list[Any]) -> str:
    """The code the successful ``python`` calls among ``messages`` (a turn's) ran (``details["code"]``),
    in the order they ran (the tool's ``details["run"]``; calls of one message may run in any order),
    ``""`` when there is none."""
    runs: list[tuple[int, int, str]] = []
    for index, message in enumerate(messages):
        if getattr(message, "role", "") != "assistant":
            continue
        results = _results_after(messages, index)  # ids may repeat across requests (some servers count from 0)
        for call in message.tool_calls:
            result = results.get(call.id)
            if call.name != "python" or result is None or result.is_error:
                continue
            details = result.details if isinstance(result.details, dict) else {}
            code = details.get("code")  # what ran (an approval may have edited the model's code), not the proposal
            run = details.get("run")
            if not isinstance(code, str) or not isinstance(run, int):
                continue  # not run by the python tool (denied, refused, or a result without its code)
            runs.append((run, len(runs), code.strip("\n")))
    codes = [code for _run, _position, code in sorted(runs)]
    total = len(codes)
    return "\n\n".join(f"{CELL_HEADER.format(index=i, total=total)}\n{code}" for i, code in enumerate(codes, 1))


def _results_after(messages: list[Any], index: int) -> dict[str, Any]:
    """The tool results answering the assistant message at ``index`` (up to the next assistant message)."""
    results: dict[str, Any] = {}
    for message in messages[index + 1 :]:
        role = getattr(message, "role", "")
        if role == "assistant":
            break
        if role == "tool_result":
            results.setdefault(message.tool_call_id, message)
    return results


def drop_agent_payloads(shell: Any) -> list[str]:
    """Remove the payloads written while the turn ran (the agent's code: ``set_next_input``, pager, exit);
    returns their sources. Called at the turn's end, before ``offer_code_cell`` adds pi's own."""
    manager = getattr(shell, "payload_manager", None)
    if manager is None:
        return []
    payloads = manager.read_payload() or []
    sources = [str(payload.get("source", "?")) if isinstance(payload, dict) else "?" for payload in payloads]
    if sources:
        manager.clear_payload()
    return sources


def offer_code_cell(shell: Any, messages: list[Any]) -> bool:
    """Put the turn's code in the next cell (``set_next_input``); whether there was any."""
    text = code_cell_text(messages)
    setter = getattr(shell, "set_next_input", None)
    if not text or setter is None:
        return False
    setter(text, replace=False)
    return True
