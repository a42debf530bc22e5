"""``build_system_prompt``: layout and exact texts."""

from __future__ import annotations

import datetime
from pathlib import Path

from pi_kernel.tools import ToolDefinition, build_system_prompt
from pi_kernel.tools.registry import ALWAYS_GUIDELINES, DEFAULT_INTRO, OTHER_TOOLS_NOTE


def definition(name: str, snippet: str | None = None, guidelines: tuple[str, ...] = ()) -> ToolDefinition:
    return ToolDefinition(
        name=name,
        description=f"{name} description",
        parameters={"type": "object", "properties": {}},
        execute=lambda *args: "",
        prompt_snippet=snippet,
        prompt_guidelines=guidelines,
    )


def test_default_prompt_layout_exactly() -> None:
    tools = [
        definition("summarize", "Summarize a DataFrame", ("Use summarize before plotting",)),
        definition("plot", None, ("  Use summarize before plotting  ", "Label every axis", "")),
    ]
    prompt = build_system_prompt(tools, cwd="/data/project", date=datetime.date(2025, 3, 4))
    assert prompt == (
        f"{DEFAULT_INTRO}\n"
        "\n"
        "Available tools:\n"
        "- summarize: Summarize a DataFrame\n"
        "\n"
        f"{OTHER_TOOLS_NOTE}\n"
        "\n"
        "Guidelines:\n"
        "- Use summarize before plotting\n"
        "- Label every axis\n"
        "- Be concise in your responses\n"
        "- Show file paths clearly when working with files\n"
        "Current date: 2025-03-04\n"
        "Current working directory: /data/project"
    )


def test_no_snippets_gives_none_and_only_always_on_guidelines() -> None:
    prompt = build_system_prompt([definition("quiet")], cwd="/w", date="2025-01-01")
    assert "Available tools:\n(none)\n\n" in prompt
    assert "quiet" not in prompt
    assert prompt.endswith(
        "Guidelines:\n"
        + "".join(f"- {line}\n" for line in ALWAYS_GUIDELINES)
        + "Current date: 2025-01-01\nCurrent working directory: /w"
    )
    assert "Available tools:\n(none)" in build_system_prompt([], cwd="/w")


def test_snippets_are_one_line_and_guidelines_deduplicated_in_first_seen_order() -> None:
    tools = [
        definition("a", "  first line\n   second   line "),
        definition("b", "   ", ("Be concise in your responses", " Zeta ", "Alpha")),
        definition("c", "c snippet", ("alpha.", "Zeta", "Show  file paths clearly when working with files.")),
    ]
    prompt = build_system_prompt(tools, cwd="/w", date="2025-01-01", guidelines=["Extra one", "Alpha"])
    assert "Available tools:\n- a: first line second line\n- c: c snippet\n\n" in prompt
    guidelines = prompt.split("Guidelines:\n")[1].split("\nCurrent date:")[0].splitlines()
    assert guidelines == [
        "- Extra one",
        "- Alpha",
        "- Be concise in your responses",
        "- Zeta",
        "- Show  file paths clearly when working with files.",
    ]


def test_builtin_tool_names_bring_pi_default_guidelines_when_they_have_none() -> None:
    bare = [definition(name, f"{name} snippet") for name in ("read", "bash", "edit", "write", "python")]
    prompt = build_system_prompt(bare, cwd="/w", date="2025-01-01")
    guidelines = prompt.split("Guidelines:\n")[1].split("\nCurrent date:")[0].splitlines()
    assert guidelines == [
        "- Use bash for file operations like ls, rg, find",
        "- Use python to inspect and compute with the notebook's live variables (DataFrames, models, figures); "
        "what it defines stays in the user's namespace",
        "- Use read to examine files before editing. You must use this tool instead of cat or sed.",
        "- Use edit for precise changes (old text must match exactly)",
        "- Use write only for new files or complete rewrites",
        "- When summarizing your actions, output plain text directly - do NOT use cat or bash to display what you did",
        *(f"- {line}" for line in ALWAYS_GUIDELINES),
    ]


def test_a_tool_with_its_own_guidelines_replaces_the_defaults_about_it() -> None:
    tools = [
        definition("read", "r", ("Use read to examine files instead of cat or sed.",)),
        definition("edit", "e", ("Use edit for precise changes (edits[].old_text must match exactly)",)),
        definition("write", "w", ("Use write only for new files or complete rewrites.",)),
        definition("bash", "b", ("Use bash for file operations like ls, rg, find",)),
    ]
    prompt = build_system_prompt(tools, cwd="/w", date="2025-01-01")
    guidelines = prompt.split("Guidelines:\n")[1].split("\nCurrent date:")[0].splitlines()
    assert guidelines == [
        # A default about a combination of tools stays.
        "- When summarizing your actions, output plain text directly - do NOT use cat or bash to display what you did",
        "- Use read to examine files instead of cat or sed.",
        "- Use edit for precise changes (edits[].old_text must match exactly)",
        "- Use write only for new files or complete rewrites.",
        "- Use bash for file operations like ls, rg, find",
        *(f"- {line}" for line in ALWAYS_GUIDELINES),
    ]
    with_grep = [*tools, definition("grep", "g")]
    assert "- Prefer grep/find/ls tools over bash for file exploration (faster, respects .gitignore)\n" in (
        build_system_prompt(with_grep, cwd="/w")
    )


def test_custom_prompt_replaces_the_default_and_append_is_added() -> None:
    tools = [definition("summarize", "Summarize a DataFrame", ("Use summarize first",))]
    prompt = build_system_prompt(
        tools,
        custom_prompt="You are a terse statistician.",
        append_prompt="Always answer in French.",
        cwd="/w",
        date="2025-06-07",
    )
    assert prompt == (
        "You are a terse statistician.\n\n"
        "Always answer in French.\n"
        "Current date: 2025-06-07\n"
        "Current working directory: /w"
    )


def test_append_prompt_follows_the_default_text_and_defaults_use_today_and_cwd() -> None:
    before = datetime.date.today()
    prompt = build_system_prompt([definition("x", "x it")], append_prompt="Notebook: analysis.ipynb")
    after = datetime.date.today()
    assert "- Show file paths clearly when working with files\n\nNotebook: analysis.ipynb\nCurrent date: " in prompt
    # Today's date as read during the call: midnight may pass between the reads around it.
    shown = prompt.split("Current date: ")[1].split("\n")[0]
    assert shown in {before.isoformat(), after.isoformat()}
    assert prompt.endswith(f"Current working directory: {Path.cwd()}")


def test_windows_paths_are_shown_with_forward_slashes() -> None:
    assert build_system_prompt([], cwd="C:\\Users\\ada\\work", date="2025-01-01").endswith(
        "Current working directory: C:/Users/ada/work"
    )
