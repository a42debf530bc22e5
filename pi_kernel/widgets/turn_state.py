"""What a turn looks like, built from agent events: the state every view renders.

``TurnState`` folds the agent's events (and the approval broker's) into an
ordered list of blocks: text, thinking, tool calls and notices, plus the usage
and the model. It holds no loop logic and no widgets: the live widget view,
the static rendering of a finished turn and the kernel's text view all read
it. The block types are in ``turn_blocks``; every block carries a ``version``
that grows on each change, so a view redraws only what changed since it last
looked.

A "turn" here is one ``%%pi`` cell: everything between ``agent_start`` and
``agent_end``, however many model requests it takes.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

from pi_kernel.agent import OPERATION_ABORTED
from pi_kernel.agent.types import (
    AgentEndEvent,
    AgentEvent,
    AgentStartEvent,
    AgentToolResult,
    CompactionEvent,
    MessageEndEvent,
    MessageStartEvent,
    MessageUpdateEvent,
    ToolExecutionEndEvent,
    ToolExecutionStartEvent,
    ToolExecutionUpdateEvent,
    TurnEndEvent,
    TurnStartEvent,
)
from pi_kernel.ai import AssistantMessage, TextContent, ThinkingContent, ToolCall, ToolResultMessage, Usage, UserMessage
from pi_kernel.ai.messages import text_of
from pi_kernel.tools.approval import ApprovalRequest
from pi_kernel.widgets.turn_blocks import Block, NoticeBlock, TextBlock, ToolCallBlock, live_output_text

__all__ = ["Block", "NoticeBlock", "TextBlock", "ToolCallBlock", "TurnState"]
"""The block types live in ``turn_blocks``; the views import them from here, beside the state."""


@dataclass(eq=False)
class TurnState:
    """The blocks of one turn, in display order, plus its usage; fed by ``apply`` and ``apply_approval``."""

    model: str = ""
    provider: str = ""
    label_of: Callable[[str], str] | None = None
    """Tool name → label shown in the UI (from the tool's definition)."""
    clock: Callable[[], float] = time.monotonic
    blocks: list[Block] = field(default_factory=list)
    tool_calls: dict[str, ToolCallBlock] = field(default_factory=dict)
    usage: Usage = field(default_factory=Usage)
    usage_version: int = 0
    context_window: int | None = None
    """The model's context window (tokens), for the footer's meter; ``None``: no meter."""
    context_tokens: int = 0
    """The conversation's size at the last answer (its prompt plus its output, as reported)."""
    saves_thinking: bool = True
    """Whether the static output (what a notebook saves) keeps the model's thinking; the kernel sets it
    from its ``save_thinking`` setting (default off: thinking is shown live, collapsed, and not saved)."""
    started: bool = False
    ended: bool = False
    aborted: bool = False
    stop_reason: str | None = None
    started_at: float | None = None
    ended_at: float | None = None
    _message_count: int = 0
    _user_messages: int = 0
    _streaming: dict[tuple[int, int], Block] = field(default_factory=dict)
    """(message number, content index) → block, for the message being streamed."""

    # ------------------------------------------------------------------ agent events

    def apply(self, event: AgentEvent) -> None:
        match event:
            case AgentStartEvent():
                self._on_agent_start(event)
            case AgentEndEvent():
                self._on_agent_end(event)
            case MessageStartEvent():
                self._on_message_start(event)
            case MessageUpdateEvent():
                self._on_message_update(event)
            case MessageEndEvent():
                self._on_message_end(event)
            case CompactionEvent():
                self._on_compaction(event)
            case ToolExecutionStartEvent():
                self._on_tool_execution_start(event)
            case ToolExecutionUpdateEvent():
                self._on_tool_execution_update(event)
            case ToolExecutionEndEvent():
                self._on_tool_execution_end(event)
            case TurnStartEvent() | TurnEndEvent():
                pass  # a turn of the loop (one model request) draws nothing of its own

    def _on_agent_start(self, event: AgentStartEvent) -> None:
        self.started = True
        self.started_at = self.clock()

    def _on_agent_end(self, event: AgentEndEvent) -> None:
        self.finish()

    def _on_message_start(self, event: MessageStartEvent) -> None:
        message = event.message
        if isinstance(message, AssistantMessage):
            self._message_count += 1
            self._streaming.clear()
            self._note_model(message)
        elif isinstance(message, UserMessage):
            # The first prompt is the cell itself; later ones were steered or followed up.
            self._user_messages += 1
            if self._user_messages > 1:
                self._add(NoticeBlock("user", text_of(message.content)))

    def _on_message_update(self, event: MessageUpdateEvent) -> None:
        update = event.assistant_message_event
        kind, index = update.type, update.content_index
        if index is None:
            return
        key = (self._message_count, index)
        if kind in ("text_start", "thinking_start"):
            self._streaming[key] = self._add(TextBlock("text" if kind == "text_start" else "thinking"))
        elif kind in ("text_delta", "thinking_delta"):
            block = self._text_block(key, "text" if kind == "text_delta" else "thinking")
            block.append(update.delta or "")
            block.version += 1
        elif kind in ("text_end", "thinking_end"):
            block = self._text_block(key, "text" if kind == "text_end" else "thinking")
            block.settle(update.content)
            block.version += 1
        elif kind in ("toolcall_start", "toolcall_delta", "toolcall_end"):
            source = update.tool_call
            content = update.partial.content
            if source is None and index < len(content):
                part = content[index]
                source = part if isinstance(part, ToolCall) else None
            delta = update.delta if kind == "toolcall_delta" else None
            self._update_tool_call(key, source, delta, ended=kind == "toolcall_end")

    def _update_tool_call(self, key: tuple[int, int], source: ToolCall | None, delta: str | None, ended: bool) -> None:
        block = self._streaming.get(key)
        if not isinstance(block, ToolCallBlock):
            block = self._add(ToolCallBlock(id="", name=""))
            self._streaming[key] = block
        if source is not None:
            if source.id and source.id != block.id:
                self.tool_calls.pop(block.id, None)
                block.id = source.id
                self.tool_calls[block.id] = block
            if source.name and not block.name:
                block.name = source.name
                block.label = self._label(source.name)
            block.arguments = source.arguments
        if delta:
            block.raw.append(delta)
        if ended and block.status == "streaming":
            block.status = "pending"
        block.version += 1

    def _on_message_end(self, event: MessageEndEvent) -> None:
        message = event.message
        if isinstance(message, AssistantMessage):
            self._end_assistant_message(message)
        elif isinstance(message, ToolResultMessage):
            block = self._tool_block(message.tool_call_id, message.tool_name)
            if block.result is None:
                block.result = AgentToolResult(list(message.content), message.details, message.usage)
                block.is_error = message.is_error
                block.version += 1

    def _end_assistant_message(self, message: AssistantMessage) -> None:
        self._note_model(message)
        self.usage = self.usage.add(message.usage)
        self.usage_version += 1
        if message.usage.prompt_tokens:
            self.context_tokens = message.usage.prompt_tokens + message.usage.output
        self.stop_reason = message.stop_reason
        # Blocks that never streamed (a provider that sends whole messages) appear now.
        for index, content in enumerate(message.content):
            key = (self._message_count, index)
            if isinstance(content, ToolCall):
                self._update_tool_call(key, content, None, ended=True)
            elif isinstance(content, (TextContent, ThinkingContent)):
                text = content.text if isinstance(content, TextContent) else content.thinking
                block = self._text_block(key, "text" if isinstance(content, TextContent) else "thinking")
                if block.settle(text):
                    block.version += 1
        if message.stop_reason == "aborted":
            self.aborted = True
            self._add(NoticeBlock("interrupted", message.error_message or "Interrupted"))
        elif message.stop_reason == "error":
            self._add(NoticeBlock("error", message.error_message or "The model request failed"))

    def _on_compaction(self, event: CompactionEvent) -> None:
        """Older turns were summarised: a visible marker, and the summary request's cost counts."""
        plural = "turn" if event.compacted_turns == 1 else "turns"
        why = {"overflow": " (the provider said the request was too long)", "manual": " (%pi compact)"}
        text = f"compacted {event.compacted_turns} {plural} into a summary{why.get(event.reason, '')}"
        if event.error:
            text += f"; the model's summary failed ({event.error}), a plain list stands in"
        self._add(NoticeBlock("compaction", text))
        if event.usage is not None:
            self.usage = self.usage.add(event.usage)
            self.usage_version += 1

    def _on_tool_execution_start(self, event: ToolExecutionStartEvent) -> None:
        block = self._tool_block(event.tool_call_id, event.tool_name)
        block.arguments = event.args
        block.started_at = self.clock()
        if block.status in ("streaming", "pending"):
            block.status = "running"
        block.version += 1

    def _on_tool_execution_update(self, event: ToolExecutionUpdateEvent) -> None:
        block = self._tool_block(event.tool_call_id, event.tool_name)
        if block.finished:
            return
        block.output = live_output_text(event.partial_result)
        block.output_updates += 1
        block.version += 1

    def _on_tool_execution_end(self, event: ToolExecutionEndEvent) -> None:
        block = self._tool_block(event.tool_call_id, event.tool_name)
        block.result = event.result
        block.is_error = event.is_error
        block.ended_at = self.clock()
        if block.status not in ("denied", "interrupted"):
            if not event.is_error:
                block.status = "done"
            elif self.aborted or block.result_text() == OPERATION_ABORTED:
                # An abort during tools ends the run with no aborted assistant message: the loop's own
                # result text (one constant, the agent layer's) is then the only sign of it.
                block.status = "interrupted"
            else:
                block.status = "error"
        block.version += 1

    # ------------------------------------------------------------------ approvals

    def apply_approval(self, event: str, request: ApprovalRequest) -> ToolCallBlock | None:
        """Fold a broker notification (``requested`` / ``resolved``) into the call's block.

        Returns the block, or ``None`` when the request is not one of this turn's calls.
        """
        block = self.tool_calls.get(request.tool_call_id)
        if block is None:
            if self.ended or not self.started:
                return None
            block = self._tool_block(request.tool_call_id, request.tool_name)
        block.request = request
        if request.label and block.label in ("", block.name):
            block.label = request.label
        if event == "requested" and request.decision is None and not block.finished:
            block.status = "waiting"
            block.waiting_since = self.clock()
        elif request.decision is not None:
            block.decision = request.decision
            if request.decision.args is not None:
                block.arguments = request.decision.args  # what will run
            if request.decision.kind == "deny":
                block.status = "interrupted" if request.decision.source == "interrupt" else "denied"
                block.ended_at = self.clock()
            elif block.status == "waiting":
                block.status = "running"
                block.started_at = self.clock()
        block.version += 1
        return block

    # ------------------------------------------------------------------ the end

    def finish(self) -> None:
        """The turn is over: calls that never finished were interrupted."""
        if self.ended:
            return
        self.ended = True
        self.ended_at = self.clock()
        for call in self.tool_calls.values():
            if not call.finished:
                call.status = "interrupted"
                call.ended_at = self.ended_at
                call.version += 1
        for block in self.blocks:
            if isinstance(block, TextBlock) and not block.final:
                block.settle(None)  # what was held back (it might have begun a key) is shown, masked
                block.version += 1

    # ------------------------------------------------------------------ helpers

    def text(self) -> str:
        """The assistant's text of the whole turn, blocks joined by blank lines."""
        return "\n\n".join(block.text for block in self.blocks if isinstance(block, TextBlock) and block.kind == "text")

    def _add(self, block: Any) -> Any:
        self.blocks.append(block)
        return block

    def _text_block(self, key: tuple[int, int], kind: Literal["text", "thinking"]) -> TextBlock:
        block = self._streaming.get(key)
        if not isinstance(block, TextBlock):
            block = self._add(TextBlock(kind))
            self._streaming[key] = block
        return block

    def _tool_block(self, tool_call_id: str, name: str) -> ToolCallBlock:
        block = self.tool_calls.get(tool_call_id)
        if block is None:
            block = self._add(ToolCallBlock(id=tool_call_id, name=name, label=self._label(name), status="pending"))
            self.tool_calls[tool_call_id] = block
        return block

    def _label(self, name: str) -> str:
        if self.label_of is not None:
            try:
                return self.label_of(name) or name
            except Exception:  # noqa: BLE001 - a label is cosmetic; never break the view for it
                return name
        return name

    def _note_model(self, message: AssistantMessage) -> None:
        if message.model:
            self.model = message.model
        if message.provider:
            self.provider = message.provider
