"""The default ``convert_to_llm``: which agent messages a model request carries.

pi's default keeps user, assistant and tool-result messages and drops the
app-only kinds. This one does the same without looking at the whole history
each turn, as long as that is safe (see ``DefaultLlmMessages``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from pi_kernel.agent.types import AgentLoopConfig

__all__ = ["LLM_ROLES", "DefaultLlmMessages", "llm_converter"]

LLM_ROLES = frozenset(("user", "assistant", "tool_result"))


class DefaultLlmMessages:
    """The default ``convert_to_llm``: keep user, assistant and tool-result messages.

    As pi's filter, but incremental: when every message is an LLM message (the
    usual case) it returns the given list itself and, on the next turn, looks
    only at the messages appended since. A different list, or a shorter one,
    is checked from the start again. That relies on the list only growing at
    its end between turns, which the loop guarantees for its own list but not
    for one a ``transform_context`` edits in place and returns: with
    ``incremental=False`` every call checks the whole list.
    """

    __slots__ = ("_checked", "_incremental", "_source")

    def __init__(self, incremental: bool = True) -> None:
        self._source: list[Any] | None = None
        self._checked = 0
        self._incremental = incremental

    def __call__(self, messages: list[Any]) -> list[Any]:
        if not self._incremental or messages is not self._source or len(messages) < self._checked:
            self._source, self._checked = messages, 0
        checked = self._checked
        count = len(messages)
        while checked < count and getattr(messages[checked], "role", None) in LLM_ROLES:
            checked += 1
        self._checked = checked
        if checked == count:
            return messages
        return [message for message in messages if getattr(message, "role", None) in LLM_ROLES]


def llm_converter(config: AgentLoopConfig) -> Callable[[list[Any]], Any]:
    """``convert_to_llm``, or the default filter: incremental unless a
    ``transform_context`` may have edited the list in place (then it checks
    the whole list each turn, the cost pi's filter always has)."""
    if config.convert_to_llm is not None:
        return config.convert_to_llm
    return DefaultLlmMessages(incremental=config.transform_context is None)
