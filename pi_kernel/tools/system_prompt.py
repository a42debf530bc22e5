"""``build_system_prompt``: the text channel that tells the model which tool to pick.

Follows pi's ``coding-agent/src/core/system-prompt.ts``, adapted to an
assistant working in a Jupyter notebook beside a data scientist:

- the default intro, then ``Available tools:`` with ``- <name>: <snippet>``
  for each given tool that has a snippet (``(none)`` when none has one) — the
  full schemas travel in the API ``tools`` array, not here;
- ``Guidelines:``: pi's defaults that depend on which tools are present (see
  ``tool_dependent_guidelines``), any extra ``guidelines``, the tools'
  ``prompt_guidelines``, then the always-on ones; each trimmed, empty ones
  dropped, duplicates (ignoring case, spacing and a final period) dropped
  with the first occurrence's wording and position kept;
- a ``custom_prompt`` replaces all of the above (as in pi, no tool list or
  guidelines are added to it);
- ``append_prompt`` follows, then ``Current date: YYYY-MM-DD`` and
  ``Current working directory: <cwd>`` always come last.
"""

from __future__ import annotations

import datetime
import os
from collections.abc import Iterable, Sequence
from pathlib import Path

from pi_kernel.tools.definition import ToolDefinition

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


def normalize_snippet(text: str | None) -> str | None:
    """One line: newlines and runs of whitespace become single spaces; blank → None."""
    if not text:
        return None
    one_line = " ".join(text.split())
    return one_line or None


def _dedup_key(text: str) -> str:
    # "Use write only for new files." and "use write only for new files" are one guideline.
    return " ".join(text.split()).rstrip(".").casefold()


def unique_guidelines(guidelines: Iterable[str]) -> list[str]:
    """Trimmed, blank ones dropped, duplicates dropped (first wording and position kept).

    Two guidelines are duplicates when they differ only in case, spacing or a
    final period.
    """
    seen: dict[str, str] = {}
    for guideline in guidelines:
        text = guideline.strip()
        if text:
            seen.setdefault(_dedup_key(text), text)
    return list(seen.values())


def tool_dependent_guidelines(tools: Sequence[ToolDefinition]) -> list[str]:
    """pi's defaults that depend on which built-in tools are active.

    A default about one tool applies only when that tool brings no guidelines
    of its own (its own replace pi's texts for it); defaults about a
    combination of tools always apply.
    """
    own = {tool.name: any(line.strip() for line in _guideline_lines(tool)) for tool in tools}

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


def _guideline_lines(tool: ToolDefinition) -> Sequence[str]:
    # A lone string is one guideline, not a sequence of one-character guidelines.
    lines = tool.prompt_guidelines
    return [lines] if isinstance(lines, str) else lines


def format_date(date: str | datetime.date | None) -> str:
    if date is None:
        return datetime.date.today().isoformat()
    if isinstance(date, datetime.datetime):
        return date.date().isoformat()
    if isinstance(date, datetime.date):
        return date.isoformat()
    return date


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
        listed = [(tool.name, normalize_snippet(tool.prompt_snippet)) for tool in tools]
        tools_list = "\n".join(f"- {name}: {snippet}" for name, snippet in listed if snippet) or "(none)"
        all_guidelines = unique_guidelines(
            [
                *tool_dependent_guidelines(tools),
                *guidelines,
                *(line for tool in tools for line in _guideline_lines(tool)),
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
    prompt += f"\nCurrent date: {format_date(date)}"
    prompt += f"\nCurrent working directory: {working_directory}"
    return prompt
