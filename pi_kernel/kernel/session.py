"""``PiSession``: one agent per kernel (or IPython) session, its ``Conversation``, and how it lasts long.

This module owns three things:

- **the session** (``PiSession``): the agent, the tool registry and the session's base ``ToolContext``, its
  approvals (``approval_hook``), the settings, MCP servers, what is known of the front-end, and whether a
  ``%%pi`` turn runs now and how to stop it (``busy``, ``interrupt``, ``reassert_busy``: the turn itself, made
  per cell, is ``turn.Turn``, passed explicitly, and nothing outside the session reads it here). It is
  created when the kernel starts (or at ``%load_ext pi_kernel``) but builds the expensive parts (the
  agent, the registry, pydantic models, ``openai``) on first use, so that a kernel starts as fast as a
  stock one: ``pi_kernel.agent`` and ``pi_kernel.tools`` (the registry, the built-in and MCP tools) are
  imported lazily, in the properties that build them (together about 100 ms; ``pi_kernel.tools.mcp`` also
  needs the optional ``mcp`` SDK);
- **the conversation** (``Conversation``): the agent's messages, which part of them each ``%%pi`` cell
  owns (``CellTurns``: re-running a cell replaces its turn and everything after it, a new cell appends,
  cells without an id always append), and the versions ``%pi undo`` brings back. Whatever replaces the
  messages goes through it, so the conversation replaced is kept;
- **long sessions** as the person sees and sets them (the mechanics are the agent layer's:
  ``pi_kernel.agent.compaction`` and ``pi_kernel.agent.agent``; ``docs/long-sessions.md`` describes the
  behaviour): the ``%pi`` commands ``compact``, ``usage``, ``price`` and ``budget``, the ``--context``
  flag of ``%pi model``, the ``context:`` and ``budget:`` lines of ``%pi``, how the settings reach the
  agent, the context window asked of a local server (``/models`` of vLLM, ``/props`` of llama.cpp,
  ``/api/ps`` and ``/api/show`` of Ollama), and ``_pi_results``: the whole value of each tool result that
  was cut before it reached the model. ``pi_kernel.agent``, ``pi_kernel.widgets`` (the footer's context
  meter), ``pi_kernel.ai``'s ``Context`` (pydantic comes with it) and
  ``pi_kernel.ai.providers.local_engine`` are imported inside the functions that use them, for the same
  reason.
"""

from __future__ import annotations

import asyncio
import functools
import json
import sys
import threading
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from IPython.core.error import UsageError

from pi_kernel.ai.models import KNOWN_COSTS, ModelCost, detect_provider, known_cost
from pi_kernel.kernel import outgoing
from pi_kernel.kernel.approval_hook import SessionApprovals
from pi_kernel.kernel.config import PiSettings, dollars, positive_int
from pi_kernel.kernel.model_resolution import model_from_spec, resolve_model, restrict_default
from pi_kernel.kernel.notebook_bridge import NotebookBridge
from pi_kernel.kernel.notebook_context import CellHistory, NotebookContext
from pi_kernel.kernel.turn import FrontendTracker, Turn, TurnViewFactory, interrupt_hook
from pi_kernel.kernel.undo import ConversationVersions, TurnJournals, Version, was_compacted

if TYPE_CHECKING:
    from pi_kernel.agent import Agent
    from pi_kernel.agent.types import AgentEvent, CompactionEvent, ToolExecutionEndEvent
    from pi_kernel.ai import Context, Model
    from pi_kernel.tools import ApprovalBroker, ToolContext, ToolDefinition, ToolRegistry
    from pi_kernel.tools.approval import ApprovalPolicy
    from pi_kernel.tools.mcp import McpManager

MCP_MISSING = 'MCP servers need the "mcp" package: pip install "pi-kernel[mcp]"'


class McpUnavailable(RuntimeError):
    """MCP servers are configured or added but the ``mcp`` SDK is not installed."""


NO_TOOLS_NOTE = "Tools are disabled for this request: answer without calling any tool."


class PiSession:
    """The long-lived session: see the module docstring."""

    def __init__(
        self, shell: Any, settings: PiSettings | None = None, kernel: Any = None, notices: list[str] | None = None
    ) -> None:
        self.shell = shell
        self.kernel = kernel if kernel is not None else getattr(shell, "kernel", None)
        self.settings = settings or PiSettings()
        self.conversation = Conversation(lambda: self.agent)
        self.cell_history = CellHistory()
        """The cells run so far (``post_run_cell``), for the ``cells`` tool and the notebook context."""
        self.context_enabled = self.settings.notebook_context is not False
        """``%pi context on|off``: each turn starts with what changed in the notebook."""
        self.context_for_local = False
        """``%pi context local``: the local model is told too (by default it is not: SmolLM2-135M repeats it)."""
        self._notebook_context = NotebookContext(self.cell_history)
        self.turn_journals = TurnJournals()
        """Each ``%%pi`` turn's undo journal (``undo``): what ``%pi undo`` reverts."""
        self.undo_news: str | None = None
        """What ``%pi undo`` reverted of a turn: the next turn's prompt tells the model (``prompt_message``)."""
        self.code_cells = False
        """``%pi cells on``: every turn's ``python`` code comes back as a new cell (as ``%%pi --cells``)."""
        self.approvals = SessionApprovals(self)
        """The approval broker and policy, who can answer now, decisions from comms and magics."""
        self.frontend = FrontendTracker(self.approvals.resolve_fields, self.approvals.pending, self.settings.widgets)
        self.notebook = NotebookBridge(self.settings.notebook_timeout)
        """The ``pi.notebook`` comm of a front-end extension: the live document for the notebook tools."""
        self.notebook.subscribe(self._notebook_connected)
        self._notebook_users: dict[int, tuple[ToolContext, str | None, str | None]] = {}
        """The contexts whose ``notebook`` follows the bridge (``lend_notebook``), with their cell and client."""
        self.view_factory: TurnViewFactory | None = None
        """Overrides ``text_view.make_turn_view`` (tests, other front-ends)."""
        self._running: Turn | None = None
        """The ``%%pi`` turn running now (``set_turn``), only to stop it and to re-send its ``busy``."""
        self._running_lock = threading.Lock()
        """Orders a re-sent ``busy`` (``reassert_busy``, from the kernel's control thread) before a turn's end."""
        self._agent: Agent | None = None
        self._registry: ToolRegistry | None = None
        self._tool_context: ToolContext | None = None
        self._mcp: McpManager | None = None
        self._mcp_waiting: asyncio.Task[Any] | None = None
        """The turn's task while it waits for MCP servers to start."""
        self._model: Model | None = None
        self._model_resolved = False
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
        """What the tools are given outside a turn; a ``%%pi`` turn gives them a copy with its own ``cwd`` and
        undo journal (``Turn.context``)."""
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
            )
            self.lend_notebook(self._tool_context)
        return self._tool_context

    def lend_notebook(
        self, context: ToolContext, cell: str | None = None, client: str | None = None
    ) -> Callable[[], object]:
        """Keep ``context.notebook`` the bridge's document for the tools of ``cell`` (sent by ``client``) while a
        front-end is connected, ``None`` while none is; returns what ends that (a turn's end)."""
        self._notebook_users[id(context)] = (context, cell, client)
        context.notebook = self.notebook.document(cell, client) if self.notebook.connected else None
        return functools.partial(self._notebook_users.pop, id(context), None)

    def _notebook_connected(self, connected: bool) -> None:
        """A front-end opened or closed ``pi.notebook``: each lent context sees its document, or ``None``."""
        for context, cell, client in list(self._notebook_users.values()):
            context.notebook = self.notebook.document(cell, client)

    @property
    def notebook_context(self) -> NotebookContext:
        """What changed in the notebook since the previous turn (``notebook_context``)."""
        self._notebook_context.enabled = self.context_enabled
        return self._notebook_context

    @property
    def registry(self) -> ToolRegistry:
        """The session's tools; ``@tool`` registers here (it is the default registry)."""
        if self._registry is None:
            from pi_kernel.tools import ToolRegistry, set_default_registry
            from pi_kernel.tools.builtin import builtin_tools

            registry = ToolRegistry(context=self.tool_context)
            for definition in builtin_tools(self.tool_context):
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
        if self._agent is None:
            from pi_kernel.agent import Agent

            gate = self.approvals.gate()  # runs from code; a ``%%pi`` turn passes its own (``run_turn``)
            self._agent = Agent(self.model, before_tool_call=gate, prepare_next_turn=self.prepare_request)
            configure_long_session(self._agent, self.settings)
            self._agent.subscribe(self._on_agent_event)
        return self._agent

    def _on_agent_event(self, event: AgentEvent) -> None:
        """Keep the cell → turn marks right after a compaction, and what it replaced for ``%pi undo``;
        keep cut tool results for the user."""
        from pi_kernel.agent.types import CompactionEvent, ToolExecutionEndEvent  # loaded with the agent

        match event:
            case CompactionEvent():
                self.conversation.compacted(event, during_turn=self.busy)
            case ToolExecutionEndEvent() if self._agent is not None:
                keep_full_result(getattr(self.shell, "user_ns", None), event, self._agent.tool_result_limit())
        if self._agent is not None:
            self.conversation.seen(self._agent.state.messages)

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
        """IPython's ``pre_run_cell``: put the comm targets back; wire up ``@tool`` when the cell needs it."""
        self.frontend.ensure_targets()
        raw = getattr(info, "raw_cell", "") or ""
        if self._registry is None and "pi_kernel" in raw:
            _ = self.registry  # so that ``@tool`` in this very cell lands in the session's registry

    def hidden_names(self) -> set[str]:
        """Names IPython itself put in the user namespace (``inspect`` and the context leave them out)."""
        return set(getattr(self.shell, "user_ns_hidden", None) or ())

    def add_notice(self, text: str) -> None:
        """A notice for the person, shown by the next ``show_notices`` (a ``%%pi`` cell's end shows them)."""
        self._notices.append(text)

    def take_notices(self) -> list[str]:
        """The start-up warnings not shown yet (each is shown once)."""
        if self.settings.allowed_models:
            _ = self.model  # a default model that is not allowed is replaced now, with a notice
        notices, self._notices = self._notices, []
        if self._mcp is not None:
            notices += self._mcp.take_notices()
        return notices

    def reset(self) -> None:
        """``%pi reset``: a new conversation (the old one is kept for ``%pi undo``), usage and all."""
        if self._agent is not None:
            self.conversation.keep("%pi reset")
            self._agent.reset()
        self.conversation.cell_turns.clear()
        self._notebook_context.forget()  # the next turn is told everything again, as a first turn is

    def undo(self, number: int = 1) -> Version:
        """``%pi undo``: bring back the ``number``-th newest kept conversation (``Conversation.undo``)."""
        version = self.conversation.undo(number)
        self._notebook_context.forget()  # what that conversation was told of the notebook is not known
        return version

    def replace_conversation(
        self, messages: list[Any], cells: dict[str, int] | None = None, reason: str = "%pi load"
    ) -> None:
        """``%pi load``: the conversation becomes ``messages`` (``Conversation.replace``)."""
        self.conversation.replace(Version(messages, dict(cells or {}), reason))
        self._notebook_context.forget()  # what that conversation was told of the notebook is not known

    # -- the running turn: whether one runs, and how to stop it -------------------------------

    @property
    def busy(self) -> bool:
        """A ``%%pi`` turn runs now (commands that change its conversation or approvals wait for its end)."""
        return self._running is not None

    def interrupt(self) -> None:
        """Stop the running turn: abort the model stream and tools, deny waiting approvals, stop waiting
        for MCP servers to start. Runs on the turn's loop (``interrupt_hook`` schedules it there)."""
        if self._running is not None:
            self._running.cancel()
        if self._agent is not None:
            self._agent.abort()
        self.approvals.deny_all()
        waiting, self._mcp_waiting = self._mcp_waiting, None
        if waiting is not None:  # the servers go on starting; the turn stops waiting (never its agent run)
            waiting.cancel()

    def set_turn(self, turn: Turn | None) -> None:
        """``turn`` runs now (``cell_runner.run_turn``, at its start; ``None`` at its end)."""
        with self._running_lock:
            self._running = turn

    def reassert_busy(self, publish: Callable[[dict[str, Any]], None]) -> bool:
        """If a turn runs, ``publish(its execute_request)``; returns whether it did. Any thread (the kernel's
        control thread, a subshell's).

        The lock orders this before the turn's end (``set_turn(None)``), which comes before ipykernel's
        ``idle`` for the cell, so a re-sent ``busy`` can never land after that ``idle``.
        """
        with self._running_lock:
            turn = self._running
            if turn is None or not turn.parent:
                return False
            publish(turn.parent)
            return True


def show_notices(session: PiSession, label: str = "pi_kernel warning") -> None:
    """Print the session's notices not shown yet (``take_notices``) on stderr, which a cell may capture."""
    for notice in session.take_notices():
        outgoing.print_masked(f"{label}: {notice}", sys.stderr)


class Conversation:
    """The session's conversation: the agent's messages, which part each cell owns, the versions kept.

    Every change that drops messages keeps the conversation as it was first (``versions``, ``undo.py``): a
    re-run (``begin`` / ``settle``), a compaction during a turn (``compacted``), ``%pi compact``,
    ``reset``, ``load`` (``replace``) and ``undo`` itself.
    """

    def __init__(self, agent: Callable[[], Agent]) -> None:
        self._agent = agent
        """The session's agent (built on first use): its ``state.messages`` are the conversation."""
        self.cell_turns = CellTurns()
        self.versions = ConversationVersions()
        self._seen: list[Any] | None = None
        """The agent's message list as of its last event: what a compaction during a turn replaces."""

    def version(self, reason: str) -> Version:
        """The conversation as it is now, kept under ``reason`` if it is replaced."""
        return Version(list(self._agent().state.messages), dict(self.cell_turns.starts), reason)

    def restore(self, version: Version) -> None:
        """The conversation becomes ``version`` (messages and cell marks)."""
        self._agent().state.messages = version.messages
        self.cell_turns.starts = dict(version.cells)

    def keep(self, reason: str) -> None:
        """Keep the conversation as it is now for ``%pi undo``."""
        self.versions.keep(self._agent().state.messages, self.cell_turns.starts, reason)

    def replace(self, version: Version) -> None:
        """The conversation becomes ``version``; the one it replaces is kept under ``version.reason``."""
        self.keep(version.reason)
        self.restore(version)

    def undo(self, number: int = 1) -> Version:
        """Bring back the ``number``-th newest kept conversation; the current one is kept in its place."""
        version = self.versions.take(number)
        self.keep("%pi undo")
        self.restore(version)
        return version

    def begin(self, cell_id: str | None) -> Version | None:
        """Cut the conversation back to where this cell's turn starts (re-run) or keep it (new cell).

        A re-run returns the conversation as it was: ``settle`` then either keeps it for ``%pi undo``
        (the new turn produced something) or puts it back (the new turn failed or was interrupted
        before it produced anything), so a re-run that did nothing loses nothing.
        """
        messages = self._agent().state.messages
        before = self.version("re-running a %%pi cell")
        start = self.cell_turns.begin(cell_id, len(messages))
        if start >= len(messages):
            return None
        self._agent().state.messages = messages[:start]
        return before

    def settle(self, replaced: Version | None, added: list[Any]) -> bool:
        """Settle a re-run (see ``begin``); returns whether the replacement took effect."""
        if replaced is None:
            return True
        produced = any(
            getattr(message, "role", "") == "assistant" and message.stop_reason not in ("error", "aborted")
            for message in added
        )
        if produced:
            self.versions.keep(replaced.messages, replaced.cells, replaced.reason)
        else:
            self.restore(replaced)
        return produced

    def seen(self, messages: list[Any]) -> None:
        """The agent's list after an event (appended in place; a compaction replaces it)."""
        self._seen = messages

    def compacted(self, event: CompactionEvent, during_turn: bool) -> None:
        """A compaction replaced the first messages with a summary: keep what it replaced when it ran during a
        turn (``%pi compact`` keeps its own) and move the cell marks back."""
        before, self._seen = self._seen, None
        if during_turn and was_compacted(before, event.messages, event.compacted_messages):
            self.versions.keep(before or [], self.cell_turns.starts, "a compaction")
        self.cell_turns.compacted(event.compacted_messages)


@dataclass
class CellTurns:
    """Which part of the conversation each ``%%pi`` cell owns (see the module docstring)."""

    starts: dict[str, int] = field(default_factory=dict)
    """Cell id → index of the first message of that cell's turn."""

    def begin(self, cell_id: str | None, message_count: int) -> int:
        """Where the turn of ``cell_id`` starts now: the caller cuts the conversation to that length."""
        start = message_count
        if cell_id and cell_id in self.starts:
            start = min(self.starts[cell_id], message_count)
            self.starts = {key: value for key, value in self.starts.items() if value < start}
        else:
            # Marks beyond the conversation (after a reset elsewhere, say) mean nothing any more.
            self.starts = {key: value for key, value in self.starts.items() if value <= message_count}
        if cell_id:
            self.starts[cell_id] = start
        return start

    def compacted(self, replaced: int) -> None:
        """The first ``replaced`` messages became one summary: later marks move back; cells whose turn
        began inside the summarised part are forgotten (re-running one appends)."""
        self.starts = {key: value - replaced + 1 for key, value in self.starts.items() if value >= replaced}

    def clear(self) -> None:
        self.starts.clear()


# ---------------------------------------------------------------- long sessions: settings → agent and model

RESULTS_VARIABLE = "_pi_results"
"""The user's variable holding the whole value of cut tool results: tool call id → text."""
KEPT_RESULTS = 20
"""How many cut results ``_pi_results`` keeps (the oldest go first)."""
SERVERS_THAT_SAY = ("vllm", "llamacpp", "ollama")
OLLAMA_DEFAULT_CONTEXT = 4_096
"""The context Ollama serves a model with when nothing sets it (its smallest default, by VRAM)."""

_server_windows: dict[tuple[str, str], int | None] = {}


def configure_long_session(agent: Agent, settings: PiSettings) -> None:
    """The session's tool-result limit, budget and extra prices, on its agent."""
    from pi_kernel.agent.agent import Budget

    if settings.tool_result_limit is not None:
        agent.max_tool_result_chars = settings.tool_result_limit
    agent.budget = Budget(settings.budget, settings.token_budget)
    for model_id, (price_in, price_out) in settings.prices.items():
        set_price(model_id, price_in, price_out)


def set_price(
    model_id: str, price_in: float, price_out: float, cache_read: float = 0.0, cache_write: float = 0.0
) -> None:
    """USD per million input / output (and cache read / write) tokens for ``model_id``, from the next request on."""
    KNOWN_COSTS[model_id] = ModelCost(price_in, price_out, cache_read, cache_write)


def describe_price(cost: ModelCost) -> str:
    """``$3 in, $15 out`` and, where the model has them, its cache prices."""
    text = f"${cost.input:g} in, ${cost.output:g} out"
    if cost.cache_read:
        text += f", ${cost.cache_read:g} cache read"
    if cost.cache_write:
        text += f", ${cost.cache_write:g} cache write"
    return text


def with_context_window(model: Model | None, window: int | None) -> Model | None:
    """``model`` with the window the person set, else (when neither it nor the table knows one) the one
    its local server reports."""
    if model is None:
        return None
    if window is not None:
        return model.with_(context_window=window)
    if model.context_window:
        return model
    if model.provider == "local":  # the window the local engine is loaded with
        from pi_kernel.ai.providers.local_engine import local_context_tokens

        return model.with_(context_window=local_context_tokens())
    if model.context_window_source == "known":
        return model

    provider = model.provider if model.provider in SERVERS_THAT_SAY else detect_provider(model.resolved_base_url)
    base_url = model.resolved_base_url
    if provider not in SERVERS_THAT_SAY or not base_url:
        return model
    key = (base_url, model.id)
    if key not in _server_windows:
        _server_windows[key] = server_context_window(base_url, model.id, provider)
    found = _server_windows[key]
    return model.with_(context_window=found) if found else model


def _get_json(url: str, body: dict[str, Any] | None = None, timeout: float = 3.0) -> Any:
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(url, data=data, headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=timeout) as response:
        return json.loads(response.read())


def _window_of(entry: dict[str, Any]) -> int | None:
    """vLLM's ``max_model_len``, llama.cpp's ``meta.n_ctx`` / ``n_ctx_train``, or a ``context_length``."""
    found = entry.get("meta")
    meta: dict[str, Any] = found if isinstance(found, dict) else {}
    candidates = [entry.get("max_model_len"), entry.get("context_length"), entry.get("context_window")]
    return next(filter(None, map(_positive, [*candidates, meta.get("n_ctx"), meta.get("n_ctx_train")])), None)


def _positive(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None


def _ollama_window(root: str, model_id: str) -> int | None:
    """The context Ollama serves ``model_id`` with: ``/api/ps`` (a loaded model's ``context_length``), else
    the model's ``num_ctx`` parameter, else Ollama's smallest default (4,096) within the model's training
    length (``/api/show``'s ``*.context_length`` is that length, not what is served)."""
    try:
        running = _get_json(f"{root}/api/ps").get("models") or []
    except (OSError, ValueError, AttributeError):
        running = []
    for entry in running:
        if isinstance(entry, dict) and model_id in (entry.get("name"), entry.get("model")):
            found = _positive(entry.get("context_length"))
            if found:
                return found
    shown = _get_json(f"{root}/api/show", {"model": model_id})
    for line in str(shown.get("parameters") or "").splitlines():
        name, _, value = line.partition(" ")
        if name == "num_ctx" and value.strip().isdigit():
            return int(value.strip())
    info = shown.get("model_info") or {}
    lengths = [v for k, v in info.items() if k.endswith(".context_length") and _positive(v)]
    return min(lengths[0], OLLAMA_DEFAULT_CONTEXT) if lengths else None


def _llama_cpp_window(root: str) -> int | None:
    """The context llama.cpp serves (``--ctx-size``): ``/props`` ``default_generation_settings.n_ctx``."""
    try:
        props = _get_json(f"{root}/props")
    except (OSError, ValueError):
        return None
    if not isinstance(props, dict):
        return None
    settings = props.get("default_generation_settings")
    nested = settings.get("n_ctx") if isinstance(settings, dict) else None
    return _positive(nested) or _positive(props.get("n_ctx"))


def server_context_window(base_url: str, model_id: str, provider: str) -> int | None:
    """The context window a local server reports for ``model_id`` (``None``: it does not say)."""
    root = base_url.rstrip("/").removesuffix("/v1")
    try:
        if provider == "ollama":
            return _ollama_window(root, model_id)
        if provider == "llamacpp":
            served = _llama_cpp_window(root)
            if served:
                return served
        listed = _get_json(base_url.rstrip("/") + "/models").get("data") or []
    except (OSError, ValueError, AttributeError):
        return None
    entries = [entry for entry in listed if isinstance(entry, dict)]
    chosen = [entry for entry in entries if entry.get("id") == model_id] or entries[:1]
    return _window_of(chosen[0]) if chosen else None


def keep_full_result(namespace: dict[str, Any] | None, event: ToolExecutionEndEvent, limit: int | None) -> None:
    """A tool result longer than ``limit`` reached the model cut: its whole text goes to ``_pi_results``."""
    if namespace is None or not limit:
        return
    text = "".join(getattr(block, "text", "") for block in event.result.content or ())
    if len(text) <= limit:
        return
    kept = namespace.get(RESULTS_VARIABLE)
    if type(kept) is not dict:  # exact: a subclass (or a __class__ property) put there would run user code
        kept = namespace[RESULTS_VARIABLE] = {}
    kept[event.tool_call_id] = text
    while len(kept) > KEPT_RESULTS:
        del kept[next(iter(kept))]


# ---------------------------------------------------------------- what %pi shows


def context_flag(words: list[str]) -> tuple[list[str], int | None]:
    """``%pi model NAME --context TOKENS``: the words without the flag, and the window it gives."""
    if "--context" not in words:
        return words, None
    at = words.index("--context")
    if at + 1 >= len(words):
        raise UsageError("%pi model NAME --context TOKENS")
    try:
        window = positive_int(words[at + 1])
    except ValueError as error:
        raise UsageError(f"--context: {error}") from None
    return words[:at] + words[at + 2 :], window


def conversation_tokens(session: PiSession) -> int:
    from pi_kernel.agent.compaction import estimate_context_tokens
    from pi_kernel.ai import Context

    state = session.agent.state
    return estimate_context_tokens(Context(state.system_prompt, state.messages, state.tools))


def status_lines(session: PiSession) -> list[str]:
    """The ``context:`` and ``budget:`` lines of ``%pi``."""
    model = session.model
    lines = []
    if model is not None:
        window = model.resolved_context_window
        source = {"set": "set", "known": "known model", "default": "default; set it with %pi model NAME --context N"}
        used = conversation_tokens(session) if session.agent.state.messages else 0
        share = f" ({100 * used / window:.0f}%)" if used else ""
        lines.append(f"context:   {used:,} / {window:,} tokens{share} [{source[model.context_window_source]}]")
    budget = session.agent.budget
    if budget.usd is not None or budget.tokens is not None:
        lines.append(f"budget:    {describe_budget(session)}")
    return lines


def describe_budget(session: PiSession) -> str:
    from pi_kernel.agent.agent import usd

    agent = session.agent
    parts = []
    if agent.budget.usd is not None:
        parts.append(f"${agent.usage.cost:.4f} of {usd(agent.budget.usd)} spent")
    if agent.budget.tokens is not None:
        parts.append(f"{agent.usage.tokens:,} of {agent.budget.tokens:,} tokens spent")
    return "; ".join(parts) if parts else "none (%pi budget USD, %pi budget --tokens N)"


# ---------------------------------------------------------------- the commands


def usage(session: PiSession, words: list[str]) -> str:
    """``%pi usage``: the session's totals per model (compacted turns included), cost and context use."""
    from pi_kernel.ai.messages import Usage as TokenUsage
    from pi_kernel.widgets.render import cache_note, context_meter

    ledger = session.agent.usage
    if not ledger.by_model:
        return "No model requests yet."
    totals_in = sum(totals.input for totals in ledger.by_model.values())
    totals_out = sum(totals.output for totals in ledger.by_model.values())
    requests = sum(totals.requests for totals in ledger.by_model.values())
    priced = any(totals.priced for totals in ledger.by_model.values())
    head = f"tokens: {totals_in} in · {totals_out} out" + (f" · ${ledger.cost:.4f}" if priced else "")
    rows = [f"{head} over {requests} model request(s)"]
    for name, totals in ledger.by_model.items():
        cost = f"${totals.cost:.4f}" if totals.priced else "price unknown (%pi price MODEL IN OUT)"
        price = known_cost(name.split(":", 1)[-1])
        if not totals.priced and price is not None:
            uncached = totals.input - totals.cache_read - totals.cache_write
            written = TokenUsage(uncached, totals.output, totals.cache_read, totals.cache_write)
            cost = f"~${price.of(written):.4f} at today's price"
        cached = cache_note(totals.cache_read, totals.cache_write)
        rows.append(
            f"  {name}: {totals.requests} request(s) · {totals.input:,} in{cached} · {totals.output:,} out · {cost}"
        )
    model = session.model
    if model is not None and session.agent.state.messages:
        rows.append(f"  {context_meter(conversation_tokens(session), model.resolved_context_window)}")
    if session.agent.budget.usd is not None or session.agent.budget.tokens is not None:
        rows.append(f"  budget: {describe_budget(session)}")
    return "\n".join(rows)


def price(session: PiSession, words: list[str]) -> str:
    """``%pi price [MODEL IN OUT [CACHE_READ [CACHE_WRITE]]]``: set or list prices (USD per million tokens)."""
    if words:
        if not 3 <= len(words) <= 5:
            raise UsageError(
                "%pi price MODEL IN OUT [CACHE_READ [CACHE_WRITE]]   (USD per million input and output tokens)"
            )
        try:
            amounts = [dollars(word) for word in words[1:]]
        except ValueError as error:
            raise UsageError(f"%pi price: {error}") from None
        set_price(words[0], *amounts)
        return f"price of {words[0]}: {describe_price(KNOWN_COSTS[words[0]])} per million tokens"
    rows = [f"{name}: {describe_price(cost)}" for name, cost in sorted(KNOWN_COSTS.items())]
    return "USD per million tokens:\n" + "\n".join(rows)


def budget(session: PiSession, words: list[str]) -> str:
    """``%pi budget [USD] [--tokens N]`` (``off`` removes both)."""
    agent = session.agent
    if words == ["off"]:
        agent.budget.usd = agent.budget.tokens = None
    elif words:
        usd, tokens = parse_budget(words)  # everything checked before anything changes
        if tokens is not None:
            agent.budget.tokens = tokens
        if usd is not None:
            agent.budget.usd = usd
    model = agent.state.model
    if agent.budget.usd is not None and model is not None and model.resolved_cost is None:
        return (
            f"budget: {describe_budget(session)}\n"
            f"warning: {model.id} has no price, so its requests count $0 and a dollar budget cannot stop them; "
            f"set one with %pi price {model.id} IN OUT, or use a token budget (%pi budget --tokens N)."
        )
    return f"budget: {describe_budget(session)}"


def parse_budget(words: list[str]) -> tuple[float | None, int | None]:
    """``USD`` and ``--tokens N`` of ``%pi budget`` (each ``None`` when not given); ``UsageError`` for
    anything else, before any change."""
    rest, tokens = list(words), None
    try:
        if "--tokens" in rest:
            at = rest.index("--tokens")
            tokens = positive_int(rest[at + 1] if at + 1 < len(rest) else "")
            del rest[at : at + 2]
        usd = dollars(rest[0]) if rest else None
    except ValueError as error:
        raise UsageError(f"%pi budget USD [--tokens N]: {error}") from None
    if len(rest) > 1:
        raise UsageError(f"%pi budget USD [--tokens N]: unexpected {' '.join(rest[1:])!r}; nothing was changed")
    return usd, tokens


COMPACT_WAITS = (
    "%pi compact waits for the model on the kernel's event loop, which is busy running this cell: run "
    "`%pi compact` as a cell of its own (with %autoawait on)."
)


def compact(session: PiSession, words: list[str]) -> str:
    """``%pi compact`` from the synchronous magic: run to the end on IPython's loop when no loop runs (IPython
    outside a kernel); in a kernel such a line is awaited (``compact_async``), or told to be."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        from IPython.core.async_helpers import get_asyncio_loop

        return str(get_asyncio_loop().run_until_complete(compact_async(session, words)))
    raise UsageError(COMPACT_WAITS)


async def compact_async(session: PiSession, words: list[str]) -> str:
    """``%pi compact``: summarise the older turns now. An interrupt aborts the summary request (nothing
    changes) and ends the cell in ``KeyboardInterrupt``."""
    if words:
        raise UsageError(f"%pi compact takes no words (got {' '.join(words)!r}); nothing was changed")
    if session.busy:
        raise UsageError("a turn is running; interrupt it first")
    if session.model is None:
        raise UsageError("no model to write the summary (see %pi model)")
    agent, conversation = session.agent, session.conversation
    before = conversation.version("%pi compact")
    from pi_kernel.agent.agent import BudgetExceeded

    interrupted: list[bool] = []

    def on_interrupt() -> None:
        interrupted.append(True)
        agent.abort()

    try:
        with interrupt_hook(on_interrupt, asyncio.get_running_loop()):
            result = await agent.compact()
    except BudgetExceeded as error:
        raise UsageError(str(error)) from None
    if interrupted:  # whatever came back: the conversation stays as it was
        conversation.restore(before)
        raise KeyboardInterrupt
    if result is None:
        return "Nothing to compact yet."
    if result.error:  # a plain list would stand in: on demand, nothing is worth losing the answers for
        conversation.restore(before)
        return f"Not compacted: the model's summary failed ({result.error}); the conversation is unchanged."
    conversation.versions.keep(before.messages, before.cells, before.reason)
    turns = f"{result.compacted_turns} turn" + ("" if result.compacted_turns == 1 else "s")
    return f"compacted {turns} into a summary; %pi undo brings the turns back."
