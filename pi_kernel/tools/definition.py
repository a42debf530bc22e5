"""``ToolDefinition``: a tool as the product knows it, and as the agent runs it.

Adds to the agent's ``AgentTool`` what only the product layer needs: prompt metadata for the system
prompt (never sent in the API ``tools`` array), render hooks for the notebook views, and the approval
declaration. ``wrap_tool_definition`` adapts one to an ``AgentTool`` (a ``DefinedTool``, which keeps its
definition for the UI and the approval hook): sync ``execute`` for a sync definition (the loop runs it in
a worker thread), async for an async one; either returns ``to_agent_tool_result`` of the value.

**The retry budget.** A tool raises ``ToolRetry("no city named 'Pariss'; did you mean 'Paris'?")`` when
the arguments passed validation but are still wrong: the model receives the message and a hint to fix
them. After more than ``ToolDefinition.max_retries`` such failures in a row the text tells the model to
stop retrying; a success resets the count. The count lives on the wrapped tool (shared by parallel calls,
hence the lock) and belongs to one agent run, recognised by its abort signal (the agent makes a fresh one
per run), so an earlier prompt's failures never make a later one's first failure say "stop retrying".
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Awaitable, Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel

from pi_kernel.agent.tool_execution import is_async_callable
from pi_kernel.agent.types import AgentTool, AgentToolResult, ToolExecutionMode
from pi_kernel.ai import AbortSignal, ConstrainedSampling
from pi_kernel.ai.messages import clean_text
from pi_kernel.ai.tool import check_tool_schema
from pi_kernel.tools.approval import ApprovalPreview, OriginKind, SecretKind, check_approval_option
from pi_kernel.tools.notebook_document import NotebookDocument
from pi_kernel.tools.results import to_agent_tool_result
from pi_kernel.tools.turn_journal import TurnJournal

if TYPE_CHECKING:
    from pi_kernel.tools.notebook_document import CellSource

ToolApproval = Literal["ask", "auto", "deny"] | Callable[[Any], Any]
"""A tool's own approval option. ``"ask"``: a person approves each call;
``"auto"``: runs at once; ``"deny"``: never runs; a callable gets the validated
arguments and returns ``True``/``"auto"`` (run), ``False``/``"ask"`` (ask) or
``"deny"``. ``approval.approval_verdict`` evaluates it; the session's
policy (``approval.decide``) may override it per tool or for all."""


@dataclass
class ToolContext:
    """What a running tool may know of where it runs (pi's ExtensionContext).

    The host (the kernel's session) fills in what it has; every service is ``None`` where there is none. A
    ``%%pi`` turn gives the tools of its run a copy of the session's (``dataclasses.replace``) with its own
    ``cwd`` and ``journal``: nothing of a turn is set on the session's context.
    """

    cwd: Path = field(default_factory=Path.cwd)
    """Relative paths resolve against this."""
    workspace_root: Path | None = None
    """When set, the file tools refuse paths outside it."""
    namespace: dict[str, Any] | None = None
    """The notebook's user namespace, for the ``python`` tool."""
    notebook: NotebookDocument | None = None
    """The live notebook document (a front-end's ``pi.notebook`` bridge); ``None`` where none is connected."""
    cell_history: CellSource | None = None
    """The notebook's executed cells, for the ``cells`` tool (the kernel's ``CellHistory``)."""
    hidden_names: frozenset[str] | None = None
    """Names the host itself put in ``namespace`` (IPython's), left out by ``inspect``."""
    describe_limit: int | None = None
    """Characters per value description (``inspect``, ``cells``); ``None``: the tools' default."""
    python_on_main_thread: bool = False
    """The host's event loop runs on the main thread of a kernel: the ``python`` tool runs its code there,
    where a kernel interrupt reaches it (see ``builtin.python``)."""
    journal: TurnJournal | None = None
    """The running turn's undo journal: tools that change files, variables or the notebook record into it."""


@dataclass(eq=False, kw_only=True)
class ToolDefinition:
    name: str
    """The name the model calls it by."""
    description: str
    """What it does, for the model (the API ``tools`` channel)."""
    parameters: type[BaseModel] | dict[str, Any]
    """The single schema: a pydantic model class or a JSON-schema dict."""
    execute: Callable[..., Any]
    """``execute(tool_call_id, params, signal, on_update, ctx) -> AgentToolResult``;
    sync or async."""
    label: str = ""
    """Name shown in the UI; defaults to ``name``."""
    prompt_snippet: str | None = None
    """One line for ``Available tools:`` in the system prompt; without one the
    tool is left out of that list (it stays in the API channel)."""
    prompt_guidelines: Sequence[str] = ()
    """Lines added under ``Guidelines:`` while the tool is active."""
    execution_mode: ToolExecutionMode = "parallel"
    prepare_arguments: Callable[[Any], Any] | None = None
    """Rewrites an older argument shape into the current one, before validation."""
    render_call: Callable[[Any], Any] | None = None
    """``render_call(args) -> str | IPython display object``: how the UI shows
    the call (the default is pretty JSON)."""
    render_result: Callable[[Any], Any] | None = None
    """``render_result(result: AgentToolResult) -> str | display object``."""
    approval: ToolApproval = "auto"
    approval_preview: Callable[[str, Any, ToolContext], Awaitable[ApprovalPreview | None]] | None = None
    """``await approval_preview(tool_call_id, params, ctx)``: the change a call will make, shown on its
    approval card when it asks (a ``NotebookError`` there fails the call with that text, unasked)."""
    forget_preview: Callable[[str], None] | None = None
    """``forget_preview(tool_call_id)``: the call was denied (or its turn ended): drop what
    ``approval_preview`` kept for it."""
    read_only: bool | None = None
    """``True``: the tool changes nothing (files, state, the world), so the
    session's ``read-only`` approval mode lets it run."""
    origin: OriginKind = "user"
    """Where the tool comes from: ``user`` (``@tool``, a hand-made definition), ``builtin`` (set by
    pi-kernel's factories), ``mcp`` (set by the MCP wrapper). The approval rules read it
    (``approval``); nothing guesses it from the code's module."""
    mcp_server: str | None = None
    """The MCP server a ``mcp`` tool belongs to."""
    secret_arguments: Mapping[str, SecretKind] | None = None
    """For a built-in: which arguments may name secrets and how they are read (``{"command": "command"}``,
    ``{"path": "path"}``); only these are checked (``approval.secret_reason``). Ignored for other
    origins, and ``None``: every string of the arguments is checked as a path."""
    constrained_sampling: bool | ConstrainedSampling = False
    max_retries: int = 3
    """How many ``ToolRetry`` failures in a row before the model is told to stop
    retrying this tool."""

    def __post_init__(self) -> None:
        if not self.label:
            self.label = self.name
        # Text for every request and the system prompt: a lone surrogate (a docstring escape, an MCP
        # server's tools/list) would make every later request fail to encode, so it becomes U+FFFD.
        self.description = clean_text(self.description) if isinstance(self.description, str) else self.description
        self.label = clean_text(self.label) if isinstance(self.label, str) else self.label
        if isinstance(self.prompt_snippet, str):
            self.prompt_snippet = clean_text(self.prompt_snippet)
        lines = [self.prompt_guidelines] if isinstance(self.prompt_guidelines, str) else self.prompt_guidelines
        self.prompt_guidelines = tuple(clean_text(line) if isinstance(line, str) else line for line in lines)
        check_approval_option(self.approval, self.name)
        check_tool_schema(self.name, self.parameters)  # a bad schema fails here, never in a request


class ToolRetry(Exception):
    """Raise from a tool: the arguments are wrong; the message says how to fix them."""


class ToolRetryError(ToolRetry):
    """What the wrapper raises in place of a ``ToolRetry``: the agent loop turns its message, hint
    included, into the error result the model reads."""


@dataclass(eq=False)
class RetryBudget:
    """Counts consecutive ``ToolRetry`` failures of one wrapped tool."""

    tool_name: str
    max_retries: int = 3
    failures: int = 0
    """``ToolRetry`` failures since the last success in this run."""
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)
    _run: weakref.ref[AbortSignal] | None = field(default=None, repr=False)
    """The signal of the run being counted; weak, so a finished run is not kept alive."""

    @contextmanager
    def attempt(self, signal: AbortSignal | None = None) -> Iterator[None]:
        """Wrap one execution (sync or around an ``await``): a new run's ``signal`` starts a fresh count,
        success resets it, ``ToolRetry`` is counted and re-raised with the hint, other exceptions pass."""
        with self._lock:
            if signal is not None and (self._run is None or self._run() is not signal):
                self._run = weakref.ref(signal)
                self.failures = 0
        try:
            yield
        except ToolRetryError:
            raise  # already counted by an inner budget (a wrapped tool calling another)
        except ToolRetry as retry:
            with self._lock:
                self.failures += 1
                attempt = self.failures
            name, limit, text = self.tool_name, self.max_retries, str(retry) or "Invalid arguments."
            if attempt <= limit:
                text += f"\n\nFix the arguments and call {name} again (retry {attempt} of {limit})."
            else:
                text += (
                    f"\n\nTool {name} has failed {attempt} times in a row; the retry limit ({limit}) is reached. "
                    f"Stop retrying {name}: tell the user what went wrong or take another approach."
                )
            raise ToolRetryError(text) from retry
        with self._lock:
            self.failures = 0


@dataclass(eq=False)
class DefinedTool(AgentTool):
    """An ``AgentTool`` made from a ``ToolDefinition``; remembers where it came from."""

    definition: ToolDefinition | None = None
    context: ToolContext | None = None
    """Passed to the definition's ``execute``; ``None``: a fresh ``ToolContext()`` per call
    (so relative paths follow the current working directory)."""
    retry_budget: RetryBudget | None = None


def wrap_tool_definition(defn: ToolDefinition, ctx: ToolContext | None = None) -> DefinedTool:
    """Adapt ``defn`` to an ``AgentTool`` whose ``execute(tool_call_id, params, signal, on_update)``
    calls ``defn.execute(tool_call_id, params, signal, on_update, ctx)``."""
    budget = RetryBudget(defn.name, defn.max_retries)

    def execute(
        tool_call_id: str,
        params: Any,
        signal: AbortSignal | None = None,
        on_update: Callable[[AgentToolResult], None] | None = None,
    ) -> Any:
        with budget.attempt(signal):
            value = defn.execute(tool_call_id, params, signal, on_update, ctx or ToolContext())
        return to_agent_tool_result(value)

    async def execute_async(
        tool_call_id: str,
        params: Any,
        signal: AbortSignal | None = None,
        on_update: Callable[[AgentToolResult], None] | None = None,
    ) -> AgentToolResult:
        with budget.attempt(signal):
            value = await defn.execute(tool_call_id, params, signal, on_update, ctx or ToolContext())
        return to_agent_tool_result(value)

    return DefinedTool(
        name=defn.name,
        description=defn.description,
        parameters=defn.parameters,
        constrained_sampling=defn.constrained_sampling,
        label=defn.label,
        prepare_arguments=defn.prepare_arguments,
        execution_mode=defn.execution_mode,
        execute=execute_async if is_async_callable(defn.execute) else execute,
        definition=defn,
        context=ctx,
        retry_budget=budget,
    )
