"""The ``edit`` tool: exact, unique, non-overlapping text replacements in one file.

Port of pi's ``edit.ts`` (multi-edit form). All ``edits[].old_text`` are matched against the original file
and applied together; matching, error texts and the diff come from ``edit_diff``. A UTF-8 BOM and CRLF line
endings are kept; bytes that are not valid UTF-8 survive unchanged (carried as surrogate escapes). The
read-modify-write runs inside the file mutation queue. ``prepare_arguments`` accepts older shapes:
top-level ``old_text``/``new_text`` (or pi's ``oldText``/``newText``), camelCase keys inside ``edits``, and
``edits`` sent as a JSON string.

``details``: ``{"path": <absolute path>, "diff": <numbered diff>, "first_changed_line": int | None}``.
"""

from __future__ import annotations

import contextlib
import json
import os
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from pi_kernel.agent import OPERATION_ABORTED
from pi_kernel.agent.types import AgentToolResult
from pi_kernel.ai import AbortSignal, TextContent
from pi_kernel.tools.builtin.edit_diff import (
    EditError,
    LineEnding,
    apply_edits,
    detect_line_ending,
    generate_diff_string,
    normalize_to_lf,
    restore_line_endings,
    strip_bom,
)
from pi_kernel.tools.builtin.write import save_file
from pi_kernel.tools.definition import ToolContext, ToolDefinition
from pi_kernel.tools.file_queue import with_file_mutation_queue
from pi_kernel.tools.paths import resolve_tool_path

EDIT_DESCRIPTION = (
    "Edit a single file using exact text replacement. Every edits[].old_text must match a unique, non-overlapping "
    "region of the original file. If two changes affect the same block or nearby lines, merge them into one edit "
    "instead of emitting overlapping edits. Do not include large unchanged regions just to connect distant changes."
)
EDIT_GUIDELINES = (
    "Use edit for precise changes (edits[].old_text must match exactly)",
    "When changing multiple separate locations in one file, use one edit call with multiple entries in edits[] "
    "instead of multiple edit calls",
    "Each edits[].old_text is matched against the original file, not after earlier edits are applied. Do not emit "
    "overlapping or nested edits. Merge nearby changes into one edit.",
    "Keep edits[].old_text as small as possible while still being unique in the file. Do not pad with large "
    "unchanged regions.",
)


class ReplaceEdit(BaseModel):
    model_config = ConfigDict(extra="forbid")

    old_text: str = Field(
        description="Exact text for one targeted replacement. It must be unique in the original file and must not "
        "overlap with any other edits[].old_text in the same call."
    )
    new_text: str = Field(description="Replacement text for this targeted edit.")


class EditParams(BaseModel):
    model_config = ConfigDict(extra="forbid")

    path: str = Field(description="Path to the file to edit (relative or absolute)")
    edits: list[ReplaceEdit] = Field(
        description="One or more targeted replacements. Each edit is matched against the original file, not "
        "incrementally. Do not include overlapping or nested edits. If two changes touch the same block or nearby "
        "lines, merge them into one edit instead."
    )


_LEGACY_KEYS = (("old_text", "new_text"), ("oldText", "newText"))


def prepare_edit_arguments(raw: Any) -> Any:
    """Fold older argument shapes into ``{"path", "edits": [{"old_text", "new_text"}, ...]}``; ``raw`` itself
    when it already has that shape (or is not an object)."""
    if not isinstance(raw, dict):
        return raw
    args = dict(raw)
    edits = args.get("edits")
    if isinstance(edits, str):
        with contextlib.suppress(ValueError, RecursionError):  # not JSON, or nested deeper than the parser recurses
            decoded = json.loads(edits)
            edits = decoded if isinstance(decoded, list) else edits
    edits = [_snake_case_edit(edit) for edit in edits] if isinstance(edits, list) else edits
    for old_key, new_key in _LEGACY_KEYS:
        if isinstance(args.get(old_key), str) and isinstance(args.get(new_key), str):
            edits = [
                *(edits if isinstance(edits, list) else []),
                {"old_text": args[old_key], "new_text": args[new_key]},
            ]
            del args[old_key], args[new_key]
    if edits is not None:
        args["edits"] = edits
    return raw if args == raw else args


def _snake_case_edit(edit: Any) -> Any:
    if not isinstance(edit, dict) or not ({"oldText", "newText"} & edit.keys()):
        return edit
    renamed = {key: value for key, value in edit.items() if key not in ("oldText", "newText")}
    return {"old_text": edit.get("oldText"), "new_text": edit.get("newText"), **renamed}


def _pairs(params: EditParams) -> list[tuple[str, str]]:
    if not params.edits:
        raise EditError("Edit tool input is invalid. edits must contain at least one replacement.")
    return [(edit.old_text, edit.new_text) for edit in params.edits]


def _read_for_edit(absolute: str, shown_path: str) -> tuple[str, LineEnding, str]:
    """``(bom, line ending, LF-normalised text)`` of the file; pi's ``File not found`` when unusable."""
    if not os.path.isfile(absolute) or not os.access(absolute, os.R_OK | os.W_OK):
        raise FileNotFoundError(f"File not found: {shown_path}")
    with open(absolute, "rb") as file:
        raw = file.read().decode("utf-8", "surrogateescape")
    bom, text = strip_bom(raw)
    return bom, detect_line_ending(text), normalize_to_lf(text)


def create_edit_tool() -> ToolDefinition:
    async def execute(
        tool_call_id: str, params: EditParams, signal: AbortSignal | None, on_update: Any, ctx: ToolContext
    ) -> AgentToolResult:
        pairs = _pairs(params)
        absolute = resolve_tool_path(params.path, ctx)

        def edit() -> tuple[str, int | None]:
            if signal is not None and signal.aborted:
                raise RuntimeError(OPERATION_ABORTED)
            bom, ending, base = _read_for_edit(absolute, params.path)
            new_content = apply_edits(base, pairs, params.path)
            data = (bom + restore_line_endings(new_content, ending)).encode("utf-8", "surrogateescape")
            save_file(absolute, data, ctx, signal)  # a failed write leaves the file as it was
            return generate_diff_string(base, new_content)

        diff, first_changed_line = await with_file_mutation_queue(absolute, edit)
        return AgentToolResult(
            [TextContent(f"Successfully replaced {len(pairs)} block(s) in {params.path}.")],
            details={"path": absolute, "diff": diff, "first_changed_line": first_changed_line},
        )

    return ToolDefinition(
        origin="builtin",
        secret_arguments={"path": "path"},  # what of a call may name secrets (approval.secret_reason)
        name="edit",
        description=EDIT_DESCRIPTION,
        parameters=EditParams,
        execute=execute,
        prompt_snippet=(
            "Make precise file edits with exact text replacement, including multiple disjoint edits in one call"
        ),
        prompt_guidelines=EDIT_GUIDELINES,
        prepare_arguments=prepare_edit_arguments,
        approval="ask",
    )
