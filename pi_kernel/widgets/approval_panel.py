"""Approve / Always allow / Deny, a reason for denying, and an editor for the arguments.

The panel only proposes a decision: ``resolve(decision)`` (the broker's,
bound to the call's id) decides, from whatever thread the click arrives on
(JupyterLab may route comms to a subshell thread; the broker is thread-safe).
It disables its own controls and shows the decision at once, for feedback
without waiting on a busy loop (a widget's trait change goes out through the
kernel's thread-safe iopub), and when the broker reports a decision made
elsewhere (a timeout, an interrupt, a comm message): ``show_decision``.
Edited arguments must be a JSON object; anything else shows an error and
decides nothing.

The panel draws the request as the view model holds it (``ShownRequest``:
arguments, warning and change masked as they entered it). A value left masked
in the edit keeps its original (so editing one argument does not turn a key
in another into ``***``; ``turn_state.restored``, which the approval hook
also applies to arguments edited on stdin, a comm or ``%pi allow --args``).
"""

from __future__ import annotations

from collections.abc import Callable
from html import escape
from typing import Any

from pi_kernel.tools.approval import PREVIEW_DIFF_CHARS, ApprovalDecision, DecisionKind, reveal_invisible
from pi_kernel.widgets.render import (
    STATUS_COLORS,
    decision_text,
    diff_html,
    parse_arguments,
    pretty_json,
)
from pi_kernel.widgets.turn_state import ShownRequest, jsonable, restored

Resolve = Callable[[ApprovalDecision], bool]


class ApprovalPanel:
    def __init__(self, kit: Any, request: ShownRequest, resolve: Resolve) -> None:
        self._kit = kit
        self._request = request
        self._resolve = resolve
        name = request.request.tool_name
        self.approve = kit.button("Approve", "success", "Run this call once")
        self.always = kit.button(
            "Always allow",
            "info",
            f"Run {name} without asking for the rest of the session (a stricter mode set later wins)",
        )
        self.deny = kit.button("Deny", "danger", "Do not run it; the model is told why")
        self.edit = kit.button("Edit arguments", "", "Change the arguments before approving")
        self.reason = kit.text("Reason for denying (optional, sent to the model)")
        warning = request.warning  # why a call that would run unasked asks (it may read secrets)
        shown = f'<span style="color:{STATUS_COLORS["error"]}">⚠ {escape(warning)}</span>' if warning else ""
        self.message = kit.html(shown)
        self.change = kit.html(preview_html(request))
        """The change as a coloured diff of the cell (the notebook tools), above the buttons."""
        self.editor: Any = None
        self.decided = False
        self.approve.on_click(lambda _: self._decide("approve"))
        self.always.on_click(lambda _: self._decide("always"))
        self.deny.on_click(lambda _: self._decide("deny"))
        self.edit.on_click(lambda _: self._toggle_editor())
        buttons = kit.hbox([self.approve, self.always, self.deny, self.edit])
        self.widget = kit.vbox([self.change, buttons, self.reason, self.message])

    @property
    def controls(self) -> list[Any]:
        return [self.approve, self.always, self.deny, self.edit, self.reason] + ([self.editor] if self.editor else [])

    @property
    def editing(self) -> bool:
        """The arguments editor is open: approving uses its text."""
        return self.editor is not None and self.editor in self.widget.children

    def disable(self) -> None:
        self.decided = True
        for control in self.controls:
            control.disabled = True

    def show_decision(self, decision: ApprovalDecision) -> None:
        self.disable()
        color = STATUS_COLORS["done"] if decision.kind != "deny" else STATUS_COLORS["denied"]
        self.message.value = f'<span style="color:{color}">Decision: {escape(decision_text(decision))}</span>'

    def _decide(self, kind: DecisionKind) -> None:
        if self.decided:
            return
        args: dict[str, Any] | None = None
        if kind != "deny" and self.editing:
            args, error = parse_arguments(self.editor.value)
            if error is not None:
                self.message.value = f'<span style="color:{STATUS_COLORS["error"]}">{escape(error)}</span>'
                return
            original = jsonable(self._request.request.args)
            args = restored(args, original)
            if args == original:
                args = None  # unchanged: approve as asked
        reason = (self.reason.value.strip() or None) if kind == "deny" else None
        decision = ApprovalDecision(kind, reason=reason, args=args)
        if self._resolve(decision):
            self.show_decision(decision)
        else:
            self.disable()
            self.message.value = "This call is no longer waiting for a decision."

    def _toggle_editor(self) -> None:
        if self.editor is None:
            # bidi overrides, zero-width characters as JSON escapes: seen, and parsed back to the same value
            text, _ = reveal_invisible(pretty_json(self._request.args), json_text=True)
            self.editor = self._kit.textarea(text, rows=min(20, max(3, text.count("\n") + 2)))
            self.widget.children = [*self.widget.children[:2], self.editor, self.message]
            self.edit.description = "Hide editor"
        else:
            shown = self.editing
            rest = [child for child in self.widget.children if child is not self.editor]
            self.widget.children = rest if shown else [*rest[:2], self.editor, rest[-1]]
            self.edit.description = "Edit arguments" if shown else "Hide editor"


PREVIEW_CHARS = 2 * PREVIEW_DIFF_CHARS
"""A change's diff is shown up to this length, then as its head and tail (the tools refuse a change over
``PREVIEW_DIFF_CHARS``; the margin is for invisible characters written out as escapes)."""


def preview_html(request: ShownRequest) -> str:
    """The request's change (``ApprovalRequest.preview``): its title and its diff tinted; ``""`` without one."""
    preview = request.preview
    if preview is None:
        return ""
    diff, _ = reveal_invisible(preview.diff)
    title = f"<b>{escape(reveal_invisible(preview.title)[0])}</b>"
    return title + diff_html(diff, limit=PREVIEW_CHARS, middle=True)
