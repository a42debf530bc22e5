"""``PiSession``: one agent per kernel (or IPython) session, and everything around it.

A session owns the agent, the tool registry, its approvals (``approval_hook``),
the settings, the cell → turn map and what is known of the front-end; what
holds for one ``%%pi`` cell only is that cell's ``Turn`` (``turn.py``), passed
explicitly, of which the session knows only which one runs now. It is
created when the kernel starts (or at ``%load_ext pi_kernel``) but builds the
expensive parts (the agent, the registry, pydantic models, ``openai``) on first
use, so that a kernel starts as fast as a stock one: ``pi_kernel.agent``,
``pi_kernel.tools`` (the registry, the built-in and MCP tools) and
``pi_kernel.kernel.notebook_context`` are imported lazily, in the properties
that build them (together about 100 ms; ``pi_kernel.tools.mcp`` also needs the
optional ``mcp`` SDK). Long (about 400 lines): it is where those parts are
wired together; each concept's logic lives in its
own module (``cell_turns``, ``undo``, ``long_session``, ``approval_hook``, ...).
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pi_kernel.kernel.allowed_models import restrict_default
from pi_kernel.kernel.approval_hook import SessionApprovals
from pi_kernel.kernel.cell_history import CellHistory
from pi_kernel.kernel.cell_turns import CellTurns
from pi_kernel.kernel.config import PiSettings
from pi_kernel.kernel.frontend import FrontendTracker
from pi_kernel.kernel.long_session import configure_long_session, keep_full_result, with_context_window
from pi_kernel.kernel.model_resolution import model_from_spec, resolve_model
from pi_kernel.kernel.notebook_bridge import NotebookBridge
from pi_kernel.kernel.undo import ConversationVersions, Version, was_compacted
from pi_kernel.kernel.views import TurnViewFactory

if TYPE_CHECKING:
    from pi_kernel.agent import Agent
    from pi_kernel.agent.events import AgentEvent, CompactionEvent
    from pi_kernel.ai import Context, Model
    from pi_kernel.kernel.notebook_context import NotebookContext
    from pi_kernel.kernel.turn import Turn
    from pi_kernel.kernel.turn_undo import TurnJournals
    from pi_kernel.tools import ApprovalBroker, ToolContext, ToolDefinition, ToolRegistry
    from pi_kernel.tools.approval_policy import ApprovalPolicy
    from pi_kernel.tools.mcp import McpManager

MCP_MISSING = 'MCP servers need the "mcp" package: pip install "pi-kernel[mcp]"'


class McpUnavailable(RuntimeError):
    """MCP servers are configured or added but the ``mcp`` SDK is not installed."""


NO_TOOLS_NOTE = "Tools are disabled for this request: answer without calling any tool."


class PiSession:
    def __init__(
        self, shell: Any, settings: PiSettings | None = None, kernel: Any = None, notices: list[str] | None = None
    ) -> None:
        self.shell = shell
        self.kernel = kernel if kernel is not None else getattr(shell, "kernel", None)
        self.settings = settings or PiSettings()
        self.cell_turns = CellTurns()
        self.versions = ConversationVersions()
        """Conversations replaced by a re-run, a compaction, ``%pi reset`` / ``load`` / ``undo``: ``%pi undo``
        brings them back."""
        self._conversation: list[Any] | None = None
        """The agent's message list as of its last event: what a compaction during a turn replaces."""
        self.cell_history = CellHistory()
        """The cells run so far (``post_run_cell``), for the ``cells`` tool and the notebook context."""
        self.context_enabled = self.settings.notebook_context is not False
        """``%pi context on|off``: each turn starts with what changed in the notebook."""
        self.context_for_local = False
        """``%pi context local``: the local model is told too (by default it is not: SmolLM2-135M repeats it)."""
        self._notebook_context: NotebookContext | None = None
        self._turn_journals: TurnJournals | None = None
        self.undo_news: str | None = None
        """What ``%pi undo`` reverted of a turn: the next turn's prompt tells the model (``prompt_message``)."""
        self.code_cells = False
        """``%pi cells on``: every turn's ``python`` code comes back as a new cell (as ``%%pi --cells``)."""
        self.approvals = SessionApprovals(self)
        """The approval broker and policy, who can answer now, decisions from comms and magics."""
        self.frontend = FrontendTracker(self.approvals.resolve_fields, self.approvals.pending, self.settings.widgets)
        self.notebook = NotebookBridge(self._running_cell_id, self._running_client, self.settings.notebook_timeout)
        """The ``pi.notebook`` comm of a front-end extension: the live document for the notebook tools."""
        self.notebook.subscribe(self._notebook_connected)
        self.view_factory: TurnViewFactory | None = None
        """Overrides ``text_view.make_turn_view`` (tests, other front-ends)."""
        self.turn: Turn | None = None
        """The ``%%pi`` turn running now; set and cleared under ``turn_lock`` (``set_turn``)."""
        self.turn_lock = threading.Lock()
        self._agent: Agent | None = None
        self._registry: ToolRegistry | None = None
        self._tool_context: ToolContext | None = None
        self._mcp: McpManager | None = None
        self._mcp_waiting: asyncio.Task[Any] | None = None
        """The turn's task while it waits for MCP servers to start."""
        self._model: Model | None = None
        self._model_resolved = False
        self._cell_ids: dict[int, str | None] = {}
        self._lock = threading.RLock()
        self._notices = list(notices or [])
        """Warnings about settings that fell back at start: the kernel log is out of sight, so the first
        ``%pi`` / ``%%pi`` output shows them (``take_notices``)."""

    # -- the model ----------------------------------------------------------------------------

    @property
    def model(self) -> Model | None:
        """The session's model (resolved from the settings on first use); ``None``: none configured."""
        if not self._model_resolved:
            settings = self.settings
            model, notice = restrict_default(
                resolve_model(settings), settings.allowed_models, lambda spec: model_from_spec(spec, settings)
            )
            self._model = with_context_window(model, settings.context_window)
            self._notices += [notice] if notice else []
            self._model_resolved = True
        return self._model

    def set_model(self, model: Model | None) -> None:
        self._model, self._model_resolved = model, True
        if self._agent is not None:
            self._agent.state.model = model

    # -- lazily built parts -------------------------------------------------------------------

    @property
    def tool_context(self) -> ToolContext:
        with self._lock:
            if self._tool_context is None:
                from pi_kernel.tools import ToolContext

                root = Path(self.settings.workspace_root).expanduser() if self.settings.workspace_root else None
                self._tool_context = ToolContext(
                    workspace_root=root,
                    namespace=getattr(self.shell, "user_ns", None),
                    cell_history=self.cell_history,
                    hidden_names=frozenset(self.hidden_names()),
                    describe_limit=self.settings.describe_limit,
                    python_on_main_thread=True,  # the python tool is interruptible like a cell
                    notebook=self.notebook.document(),
                )
            return self._tool_context

    def _notebook_connected(self, _connected: bool) -> None:
        """A front-end opened or closed ``pi.notebook``: the tools see the document, or ``None``."""
        context = self._tool_context
        if context is not None:
            context.notebook = self.notebook.document()

    def _running_cell_id(self) -> str | None:
        turn = self.turn
        return turn.cell_id if turn is not None else None

    def _running_client(self) -> str | None:
        from pi_kernel.kernel.frontend import message_session

        turn = self.turn
        return message_session(turn.parent) if turn is not None else None

    @property
    def turn_journals(self) -> TurnJournals:
        """Each ``%%pi`` turn's undo journal (``turn_undo``): what ``%pi undo`` reverts."""
        with self._lock:
            if self._turn_journals is None:
                from pi_kernel.kernel.turn_undo import TurnJournals

                self._turn_journals = TurnJournals()
            return self._turn_journals

    @property
    def notebook_context(self) -> NotebookContext:
        """What changed in the notebook since the previous turn (``notebook_context``)."""
        with self._lock:
            if self._notebook_context is None:
                from pi_kernel.kernel.notebook_context import NotebookContext

                self._notebook_context = NotebookContext(self.cell_history)
            self._notebook_context.enabled = self.context_enabled
            return self._notebook_context

    @property
    def registry(self) -> ToolRegistry:
        """The session's tools; ``@tool`` registers here (it is the default registry)."""
        with self._lock:
            if self._registry is None:
                from pi_kernel.tools import ToolRegistry, set_default_registry

                registry = ToolRegistry(context=self.tool_context)
                for definition in _builtin_definitions(self.tool_context):
                    registry.add(definition, enabled=definition.name in self.settings.builtin_tools)
                if self.settings.system_prompt:
                    registry.configure_prompt(append_prompt=self.settings.system_prompt)
                self._registry = registry
                set_default_registry(registry)
            return self._registry

    @property
    def broker(self) -> ApprovalBroker:
        """``approvals.broker``: where tool calls wait for a person."""
        return self.approvals.broker

    @property
    def policy(self) -> ApprovalPolicy:
        """``approvals.policy``: which calls run, ask or are denied (``%pi approve``)."""
        return self.approvals.policy

    @property
    def mcp(self) -> McpManager:
        """The session's MCP servers (``settings.mcp_servers``); none starts before it is used."""
        with self._lock:
            if self._mcp is None:
                try:
                    from pi_kernel.tools.mcp import McpManager, parse_servers
                except ImportError as error:
                    raise McpUnavailable(f"{MCP_MISSING} ({error})") from None

                problems: list[str] = []
                configs = parse_servers(self.settings.mcp_servers, problems)
                self._notices.extend(problems)
                self._mcp = McpManager(configs, self.registry)
            return self._mcp

    async def start_mcp(self) -> None:
        """Start the configured MCP servers not started yet (before a turn): lazily, so a session that
        never prompts the agent starts none. Failures become notices (``take_notices``)."""
        if self._mcp is None and not self.settings.mcp_servers:
            return
        try:
            manager = self.mcp
        except McpUnavailable as error:
            with self._lock:
                self._notices.append(f"{error}; the configured MCP servers are not started.")
            return
        self._mcp_waiting = asyncio.current_task()  # an interrupt stops the wait (``interrupt``)
        try:
            await manager.ensure_started()
        finally:
            self._mcp_waiting = None

    def close(self) -> None:
        """The kernel is shutting down: stop the MCP servers and everything they started."""
        if self._mcp is not None:
            self._mcp.close()

    @property
    def agent(self) -> Agent:
        """The session's agent (``from pi_kernel import agent``)."""
        with self._lock:
            if self._agent is None:
                from pi_kernel.agent import Agent

                gate = self.approvals.gate()  # runs from code; a ``%%pi`` turn passes its own (``run_turn``)
                self._agent = Agent(
                    self.model,
                    before_tool_call=gate,
                    prepare_next_turn=self.prepare_request,
                )
                configure_long_session(self._agent, self.settings)
                self._agent.subscribe(self._on_agent_event)
            return self._agent

    def _on_agent_event(self, event: AgentEvent) -> None:
        """Keep the cell → turn marks right after a compaction, and what it replaced for ``%pi undo``;
        keep cut tool results for the user."""
        from pi_kernel.agent.events import CompactionEvent, ToolExecutionEndEvent  # loaded with the agent

        match event:
            case CompactionEvent():
                self._keep_compacted(event)
                self.cell_turns.compacted(event.compacted_messages)
            case ToolExecutionEndEvent() if self._agent is not None:
                keep_full_result(getattr(self.shell, "user_ns", None), event, self._agent.tool_result_limit())
        if self._agent is not None:
            self._conversation = self._agent.state.messages  # appended in place; a compaction replaces it

    def _keep_compacted(self, event: CompactionEvent) -> None:
        """Keep the conversation a compaction during a turn replaced (``%pi compact`` keeps its own)."""
        before, self._conversation = self._conversation, None
        if self.turn is not None and was_compacted(before, event.messages, event.compacted_messages):
            self.versions.keep(before or [], self.cell_turns.starts, "a compaction")

    def tool_definition(self, name: str) -> ToolDefinition | None:
        return self.registry.get(name)

    def hidden_tools(self) -> tuple[str, ...]:
        """Enabled tools not offered now: the notebook bridge's while no front-end is connected."""
        if self.notebook.connected:
            return ()
        from pi_kernel.tools.builtin.notebook_edits import BRIDGE_TOOLS  # loaded with the registry

        return BRIDGE_TOOLS

    def prepare_request(self, context: Context, no_tools: bool = False) -> None:
        """Before each model request: the registry's tools and system prompt (none with ``no_tools``); the
        notebook bridge's tools only while a front-end is connected."""
        self.registry.prepare_next_turn(context, exclude=self.hidden_tools())
        if no_tools:
            context.tools = []
            context.system_prompt = f"{context.system_prompt or ''}\n\n{NO_TOOLS_NOTE}".strip()

    # -- cells --------------------------------------------------------------------------------

    def note_cell(self, info: Any) -> None:
        """IPython's ``pre_run_cell``: remember the cell id; wire up ``@tool`` when the cell needs it."""
        self._cell_ids[threading.get_ident()] = getattr(info, "cell_id", None)
        self.frontend.ensure_targets()
        raw = getattr(info, "raw_cell", "") or ""
        if self._registry is None and "pi_kernel" in raw:
            _ = self.registry  # so that ``@tool`` in this very cell lands in the session's registry

    def hidden_names(self) -> set[str]:
        """Names IPython itself put in the user namespace (``inspect`` and the context leave them out)."""
        return set(getattr(self.shell, "user_ns_hidden", None) or ())

    def take_notices(self) -> list[str]:
        """The start-up warnings not shown yet (each is shown once)."""
        if self.settings.allowed_models:
            _ = self.model  # a default model that is not allowed is replaced now, with a notice
        with self._lock:
            notices, self._notices = self._notices, []
        if self._mcp is not None:
            notices += self._mcp.take_notices()
        return notices

    def current_cell_id(self) -> str | None:
        return self._cell_ids.get(threading.get_ident())

    def begin_turn(self, cell_id: str | None) -> Version | None:
        """Cut the conversation back to where this cell's turn starts (re-run) or keep it (new cell).

        A re-run returns the conversation as it was: ``end_turn`` then either keeps it for ``%pi undo``
        (the new turn produced something) or puts it back (the new turn failed or was interrupted
        before it produced anything), so a re-run that did nothing loses nothing.
        """
        messages = self.agent.state.messages
        before = Version(list(messages), dict(self.cell_turns.starts), "re-running a %%pi cell")
        start = self.cell_turns.begin(cell_id, len(messages))
        if start >= len(messages):
            return None
        self.agent.state.messages = messages[:start]
        return before

    def end_turn(self, replaced: Version | None, added: list[Any]) -> bool:
        """Settle a re-run (see ``begin_turn``); returns whether the replacement took effect."""
        if replaced is None:
            return True
        produced = any(
            getattr(message, "role", "") == "assistant" and message.stop_reason not in ("error", "aborted")
            for message in added
        )
        if produced:
            self.versions.keep(replaced.messages, replaced.cells, replaced.reason)
        else:
            self.agent.state.messages = replaced.messages
            self.cell_turns.starts = dict(replaced.cells)
        return produced

    def reset(self) -> None:
        if self._agent is not None:
            self.versions.keep(self._agent.state.messages, self.cell_turns.starts, "%pi reset")
            self._agent.reset()
        self.cell_turns.clear()
        self._forget_notebook_news()

    def undo(self, number: int = 1) -> Version:
        """Bring back the ``number``-th newest kept conversation; the current one is kept in its place."""
        version = self.versions.take(number)
        self.versions.keep(self.agent.state.messages, self.cell_turns.starts, "%pi undo")
        self.agent.state.messages = version.messages
        self.cell_turns.starts = dict(version.cells)
        self._forget_notebook_news()
        return version

    def interrupt(self) -> None:
        """Stop the running turn: abort the model stream and tools, deny waiting approvals, stop waiting
        for MCP servers to start. Runs on the turn's loop (``interrupt_hook`` schedules it there)."""
        if self.turn is not None:
            self.turn.cancel()
        if self._agent is not None:
            self._agent.abort()
        self.approvals.deny_all()
        waiting, self._mcp_waiting = self._mcp_waiting, None
        if waiting is not None:  # the servers go on starting; the turn stops waiting (never its agent run)
            waiting.cancel()

    def set_turn(self, turn: Turn | None) -> None:
        with self.turn_lock:
            self.turn = turn

    def reassert_busy(self, publish: Callable[[dict[str, Any]], None]) -> bool:
        """If a turn runs, ``publish(its execute_request)`` under ``turn_lock``; returns whether it did.

        The lock orders this before the turn's end (``set_turn(None)``), which comes before ipykernel's
        ``idle`` for the cell, so a re-sent ``busy`` can never land after that ``idle``.
        """
        with self.turn_lock:
            turn = self.turn
            if turn is None or not turn.parent:
                return False
            publish(turn.parent)
            return True

    def replace_conversation(
        self, messages: list[Any], cells: dict[str, int] | None = None, reason: str = "%pi load"
    ) -> None:
        """The conversation becomes ``messages``; ``cells`` (cell id → first message of its turn) come with it.
        The conversation it replaces is kept for ``%pi undo``."""
        self.versions.keep(self.agent.state.messages, self.cell_turns.starts, reason)
        self.agent.state.messages = messages
        self.cell_turns.clear()
        self.cell_turns.starts.update(cells or {})
        self._forget_notebook_news()

    def _forget_notebook_news(self) -> None:
        """Another conversation came in (``%pi undo``, ``load``): what it was told of the notebook is not
        known, so the next turn is told everything again, as after ``%pi reset``."""
        if self._notebook_context is not None:
            self._notebook_context.forget()


def _builtin_definitions(ctx: ToolContext) -> list[ToolDefinition]:
    try:
        from pi_kernel.tools.builtin import builtin_tools
    except ImportError:
        return []
    return list(builtin_tools(ctx))
