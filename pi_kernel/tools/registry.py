"""``ToolRegistry``: the notebook's set of tools, and both channels built from it each turn.

A notebook defines tools in cells and re-runs cells, so defining a tool with an existing name replaces the
old definition in place (same position, same enabled state). Tools can be disabled without being
forgotten. Before every model request the agent calls ``registry.prepare_next_turn(context)``, which sets
both channels from the active set: ``context.tools`` (the API ``tools`` array) and
``context.system_prompt``, as pi's ``_rebuildSystemPrompt`` does after ``setActiveToolsByName``. Wrapped
tools are cached per name until that definition or the tool context changes, so a turn costs a list copy
and each wrapped tool keeps its retry budget across the turns of a run.

``build_system_prompt`` follows pi's ``coding-agent/src/core/system-prompt.ts``, adapted to a notebook: the
intro, ``Available tools:`` (``- <name>: <snippet>`` for tools with a snippet; the schemas travel in the
API channel), ``Guidelines:`` (pi's defaults for the tools present, extra ``guidelines``, the tools' own,
the always-on ones; trimmed, de-duplicated ignoring case, spacing and a final period, first wording
kept), or a ``custom_prompt`` instead of all that; then ``append_prompt``, the date and the working folder.
"""

from __future__ import annotations

import builtins
import datetime
import os
import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from pi_kernel.agent.types import AgentTool
from pi_kernel.ai import Context
from pi_kernel.tools.definition import DefinedTool, ToolContext, ToolDefinition, wrap_tool_definition

DEFAULT_INTRO = (
    "You are an expert data science and coding assistant working inside a Jupyter notebook, "
    "next to a data scientist. You help by running Python in the notebook's own kernel, "
    "reading files, executing commands, editing code, and writing new files."
)

OTHER_TOOLS_NOTE = "In addition to the tools above, you may have access to other custom tools defined in the notebook."

ALWAYS_GUIDELINES: tuple[str, ...] = (
    "Be concise in your responses",
    "Show file paths clearly when working with files",
)


def unique_guidelines(guidelines: Iterable[str]) -> list[str]:
    """Trimmed, blank ones dropped, duplicates (differing only in case, spacing or a final period) dropped."""
    seen: dict[str, str] = {}
    for guideline in guidelines:
        if text := guideline.strip():
            seen.setdefault(" ".join(text.split()).rstrip(".").casefold(), text)
    return list(seen.values())


def tool_dependent_guidelines(tools: Sequence[ToolDefinition]) -> list[str]:
    """pi's defaults that depend on which built-in tools are active: one about a single tool only when that
    tool brings no guidelines of its own (they replace pi's), one about a combination always."""
    own = {tool.name: any(line.strip() for line in tool.prompt_guidelines) for tool in tools}

    def bare(name: str) -> bool:
        return name in own and not own[name]

    lines: list[str] = []
    if "bash" in own and own.keys() & {"grep", "find", "ls"}:
        lines.append("Prefer grep/find/ls tools over bash for file exploration (faster, respects .gitignore)")
    elif bare("bash"):
        lines.append("Use bash for file operations like ls, rg, find")
    if bare("python"):
        lines.append(
            "Use python to inspect and compute with the notebook's live variables (DataFrames, models, figures); "
            "what it defines stays in the user's namespace"
        )
    if bare("read") and "edit" in own:
        lines.append("Use read to examine files before editing. You must use this tool instead of cat or sed.")
    if bare("edit"):
        lines.append("Use edit for precise changes (old text must match exactly)")
    if bare("write"):
        lines.append("Use write only for new files or complete rewrites")
    if "edit" in own or "write" in own:
        lines.append(
            "When summarizing your actions, output plain text directly - do NOT use cat or bash to display what you did"
        )
    return lines


def build_system_prompt(
    tools: Sequence[ToolDefinition],
    *,
    custom_prompt: str | None = None,
    append_prompt: str | None = None,
    cwd: str | os.PathLike[str] | None = None,
    date: str | datetime.date | None = None,
    guidelines: Iterable[str] = (),
) -> str:
    """The system prompt for the active ``tools`` (see the module docstring for the layout)."""
    if custom_prompt:
        prompt = custom_prompt
    else:
        listed = [(tool.name, " ".join((tool.prompt_snippet or "").split())) for tool in tools]  # one line each
        tools_list = "\n".join(f"- {name}: {snippet}" for name, snippet in listed if snippet) or "(none)"
        all_guidelines = unique_guidelines(
            [
                *tool_dependent_guidelines(tools),
                *guidelines,
                *(line for tool in tools for line in tool.prompt_guidelines),
                *ALWAYS_GUIDELINES,
            ]
        )
        guidelines_text = "\n".join(f"- {line}" for line in all_guidelines)
        prompt = (
            f"{DEFAULT_INTRO}\n\nAvailable tools:\n{tools_list}\n\n{OTHER_TOOLS_NOTE}\n\nGuidelines:\n{guidelines_text}"
        )
    if append_prompt:
        prompt += f"\n\n{append_prompt}"
    working_directory = str(Path(cwd) if cwd is not None else Path.cwd()).replace("\\", "/")
    day = date.date() if isinstance(date, datetime.datetime) else datetime.date.today() if date is None else date
    prompt += f"\nCurrent date: {day if isinstance(day, str) else day.isoformat()}"
    prompt += f"\nCurrent working directory: {working_directory}"
    return prompt


RegistryChange = Literal["added", "replaced", "removed", "enabled", "disabled", "context", "prompt"]
RegistryListener = Callable[[RegistryChange, "str | None"], object]
"""``listener(change, tool_name)``; ``tool_name`` is ``None`` for ``context`` and ``prompt``."""


@dataclass
class PromptConfig:
    """System prompt options; read afresh every turn, so edits apply to the next request."""

    custom_prompt: str | None = None
    """Replaces the default intro, tool list and guidelines (as pi's ``customPrompt``)."""
    append_prompt: str | None = None
    """Added after the prompt (pi's ``appendSystemPrompt``)."""
    cwd: str | os.PathLike[str] | None = None
    """Shown as the working directory; ``None``: the tool context's ``cwd``."""
    date: str | datetime.date | None = None
    """Shown as the current date; ``None``: today."""
    guidelines: Sequence[str] = ()
    """Extra guidelines, after the tools' own."""


@dataclass(frozen=True, slots=True)
class ToolInfo:
    """One row of ``ToolRegistry.list()``."""

    name: str
    label: str
    enabled: bool
    description: str
    """The first line of the tool's description."""


@dataclass(slots=True)
class _Entry:
    definition: ToolDefinition
    enabled: bool


@dataclass(eq=False)
class ToolRegistry:
    context: ToolContext | None = None
    """Given to every tool's ``execute``; ``None``: a fresh ``ToolContext()`` per call."""
    prompt: PromptConfig = field(default_factory=PromptConfig)
    _entries: dict[str, _Entry] = field(default_factory=dict, init=False, repr=False)
    _wrapped: dict[str, DefinedTool] = field(default_factory=dict, init=False, repr=False)
    _active: list[AgentTool] | None = field(default=None, init=False, repr=False)
    _listeners: list[RegistryListener] = field(default_factory=list, init=False, repr=False)
    _lock: threading.RLock = field(default_factory=threading.RLock, init=False, repr=False)
    version: int = field(default=0, init=False, repr=False)
    """Bumped on every change to the tool set, their state or the context."""

    @classmethod
    def of(cls, tools: Iterable[ToolDefinition], **options: Any) -> ToolRegistry:
        """A registry holding ``tools`` (all enabled)."""
        registry = cls(**options)
        for definition in tools:
            registry.add(definition)
        return registry

    # -- the tool set -------------------------------------------------------------------------

    def add(self, definition: ToolDefinition, *, enabled: bool | None = None) -> ToolDefinition:
        """Add ``definition``, replacing a tool of the same name in place (``enabled=None``: keeping its state)."""
        with self._lock:
            previous = self._entries.get(definition.name)
            state = enabled if enabled is not None else (previous.enabled if previous else True)
            self._entries[definition.name] = _Entry(definition, state)
            self._wrapped.pop(definition.name, None)
            self._changed()
        self._notify("replaced" if previous else "added", definition.name)
        return definition

    def remove(self, name: str) -> ToolDefinition:
        with self._lock:
            entry = self._entry(name)
            del self._entries[name]
            self._wrapped.pop(name, None)
            self._changed()
        self._notify("removed", name)
        return entry.definition

    def enable(self, name: str) -> None:
        self._set_enabled(name, True)

    def disable(self, name: str) -> None:
        self._set_enabled(name, False)

    def set_active(self, names: Iterable[str]) -> None:
        """Enable exactly ``names`` (pi's ``setActiveToolsByName``); unknown names raise ``KeyError``."""
        wanted = set(names)
        with self._lock:
            for name in wanted:
                self._entry(name)
        for name in self.names():
            self._set_enabled(name, name in wanted)

    def get(self, name: str) -> ToolDefinition | None:
        entry = self._entries.get(name)
        return entry.definition if entry else None

    def is_enabled(self, name: str) -> bool:
        return self._entry(name).enabled

    def names(self) -> list[str]:
        return list(self._entries)

    def list(self) -> builtins.list[ToolInfo]:
        with self._lock:
            entries = list(self._entries.values())
        return [
            ToolInfo(
                entry.definition.name,
                entry.definition.label,
                entry.enabled,
                (entry.definition.description.strip().splitlines() or [""])[0],
            )
            for entry in entries
        ]

    def definitions(self) -> builtins.list[ToolDefinition]:
        with self._lock:
            return [entry.definition for entry in self._entries.values()]

    def active_definitions(self) -> builtins.list[ToolDefinition]:
        with self._lock:
            return [entry.definition for entry in self._entries.values() if entry.enabled]

    def __contains__(self, name: object) -> bool:
        return name in self._entries

    def __len__(self) -> int:
        return len(self._entries)

    def __iter__(self) -> Iterator[ToolDefinition]:
        return iter(self.definitions())

    # -- what the agent receives --------------------------------------------------------------

    def set_context(self, context: ToolContext | None) -> None:
        """Use ``context`` for every tool from now on (re-wraps the tools, resetting retry budgets)."""
        with self._lock:
            if context is self.context:
                return
            self.context = context
            self._wrapped.clear()
            self._changed()
        self._notify("context", None)

    def active_tools(self, ctx: ToolContext | None = None) -> builtins.list[AgentTool]:
        """The enabled tools, wrapped; the same list until the registry changes (``ctx``: ``set_context`` first)."""
        if ctx is not None:
            self.set_context(ctx)
        with self._lock:
            if self._active is None:
                self._active = [self._wrap(entry.definition) for entry in self._entries.values() if entry.enabled]
            return self._active

    def wrapped(self, name: str) -> DefinedTool:
        """The wrapped tool for ``name`` (enabled or not), from the cache."""
        with self._lock:
            return self._wrap(self._entry(name).definition)

    def system_prompt(self, exclude: Iterable[str] = ()) -> str:
        """The system prompt for the active tools (but ``exclude``) and ``self.prompt``."""
        config = self.prompt
        cwd = config.cwd if config.cwd is not None else (self.context.cwd if self.context else None)
        left_out = set(exclude)
        tools = [definition for definition in self.active_definitions() if definition.name not in left_out]
        return build_system_prompt(tools, **{**vars(config), "cwd": cwd})  # PromptConfig's fields are its options

    def configure_prompt(self, **changes: Any) -> PromptConfig:
        """Change ``PromptConfig`` fields by name (``append_prompt="..."``); unknown names raise."""
        for key in changes:
            if key not in PromptConfig.__dataclass_fields__:
                raise TypeError(f"Unknown prompt option {key!r}; known: {', '.join(PromptConfig.__dataclass_fields__)}")
        with self._lock:
            for key, value in changes.items():
                setattr(self.prompt, key, value)
        self._notify("prompt", None)
        return self.prompt

    def prepare_next_turn(self, context: Context, exclude: Iterable[str] = ()) -> None:
        """For ``AgentLoopConfig.prepare_next_turn``: set both channels on ``context`` from the active set
        (less the tools named in ``exclude``: not offered now)."""
        left_out = set(exclude)
        context.tools = [tool for tool in self.active_tools() if tool.name not in left_out]
        context.system_prompt = self.system_prompt(left_out)

    # -- change listeners ---------------------------------------------------------------------

    def subscribe(self, listener: RegistryListener) -> Callable[[], None]:
        """Call ``listener(change, tool_name)`` after every change; returns an unsubscribe function."""
        with self._lock:
            self._listeners.append(listener)

        def unsubscribe() -> None:
            with self._lock:
                if listener in self._listeners:
                    self._listeners.remove(listener)

        return unsubscribe

    # -- internals ----------------------------------------------------------------------------

    def _entry(self, name: str) -> _Entry:
        entry = self._entries.get(name)
        if entry is None:
            known = ", ".join(self._entries) or "none"
            raise KeyError(f"No tool named {name!r} (known: {known})")
        return entry

    def _set_enabled(self, name: str, enabled: bool) -> None:
        with self._lock:
            entry = self._entry(name)
            if entry.enabled == enabled:
                return
            entry.enabled = enabled
            self._changed()
        self._notify("enabled" if enabled else "disabled", name)

    def _wrap(self, definition: ToolDefinition) -> DefinedTool:
        wrapped = self._wrapped.get(definition.name)
        if wrapped is None or wrapped.definition is not definition:
            wrapped = wrap_tool_definition(definition, self.context)
            self._wrapped[definition.name] = wrapped
        return wrapped

    def _changed(self) -> None:
        self._active = None
        self.version += 1

    def _notify(self, change: RegistryChange, name: str | None) -> None:
        with self._lock:
            listeners = list(self._listeners)
        for listener in listeners:
            try:
                listener(change, name)
            except Exception:  # noqa: BLE001 - a broken listener (a view) must not break the registry
                pass


_default_registry: ToolRegistry | None = None


def set_default_registry(registry: ToolRegistry | None) -> None:
    """Where ``@tool`` without ``registry=`` registers (the kernel sets its session's registry)."""
    global _default_registry
    _default_registry = registry


def get_default_registry() -> ToolRegistry | None:
    return _default_registry
