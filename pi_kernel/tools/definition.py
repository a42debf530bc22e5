"""``ToolDefinition``: a tool as the product knows it.

Adds to the agent's ``AgentTool`` what only the product layer needs: prompt
metadata for the system prompt (kept here, never sent in the API ``tools``
array), render hooks for the notebook views, and an approval policy.
``wrap_tool_definition`` (in ``wrapper.py``) adapts one to an ``AgentTool``.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel

from pi_kernel.agent.types import ToolExecutionMode
from pi_kernel.ai import ConstrainedSampling
from pi_kernel.ai.messages import clean_text
from pi_kernel.ai.tool import check_tool_schema
from pi_kernel.tools.approval import ApprovalPreview, OriginKind, SecretKind, check_approval_option
from pi_kernel.tools.notebook_document import NotebookDocument
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
    session's ``read-only`` approval mode lets it run. ``None``: only the
    built-in ``read`` counts as read-only."""
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
        self.prompt_guidelines = tuple(
            clean_text(line) if isinstance(line, str) else line for line in self.prompt_guidelines
        )
        check_approval_option(self.approval, self.name)
        check_tool_schema(self.name, self.parameters)  # a bad schema fails here, never in a request
