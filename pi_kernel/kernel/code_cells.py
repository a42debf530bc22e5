"""Code becomes cells: the ``python`` code of a ``%%pi`` turn, as one new notebook cell.

``%%pi --cells`` (or ``%pi cells on`` for every turn): when the turn ends,
the code each successful ``python`` call ran, in the order the calls were
made, each headed by a comment line, is offered as the next cell through
IPython's ``set_next_input`` (the execute reply's ``set_next_input``
payload; JupyterLab inserts it as a new cell below). Running that cell does
again what the agent did. Failed and denied calls are left out.
"""

from __future__ import annotations

from typing import Any

CELL_HEADER = "# pi: python call {index} of {total}"


def code_cell_text(messages: list[Any]) -> str:
    """The successful ``python`` calls' code among ``messages`` (a turn's), ``""`` when there is none."""
    failed = {
        message.tool_call_id
        for message in messages
        if getattr(message, "role", "") == "tool_result" and message.is_error
    }
    answered = {message.tool_call_id for message in messages if getattr(message, "role", "") == "tool_result"}
    codes: list[str] = []
    for message in messages:
        if getattr(message, "role", "") != "assistant":
            continue
        for call in message.tool_calls:
            code = call.arguments.get("code") if isinstance(call.arguments, dict) else None
            if call.name == "python" and isinstance(code, str) and call.id in answered and call.id not in failed:
                codes.append(code.strip("\n"))
    total = len(codes)
    return "\n\n".join(f"{CELL_HEADER.format(index=i, total=total)}\n{code}" for i, code in enumerate(codes, 1))


def offer_code_cell(shell: Any, messages: list[Any]) -> bool:
    """Put the turn's code in the next cell (``set_next_input``); whether there was any."""
    text = code_cell_text(messages)
    setter = getattr(shell, "set_next_input", None)
    if not text or setter is None:
        return False
    setter(text, replace=False)
    return True
