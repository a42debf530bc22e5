"""Code becomes cells: the ``python`` code of a ``%%pi`` turn, as one new notebook cell.

``%%pi --cells`` (or ``%pi cells on`` for every turn): when the turn ends,
the code each successful ``python`` call ran (as run: the tool's
``details["code"]``, so an approval that edited the code gives the edited
code, never the model's refused proposal), in the order the calls ran, each
headed by a comment line, is offered as the next cell through
IPython's ``set_next_input`` (the execute reply's ``set_next_input``
payload; JupyterLab inserts it as a new cell below). Running that cell runs
the same code again in the namespace as it is then. Failed and denied calls
are left out.

Nothing else from a ``%%pi`` cell reaches the front-end as a payload: what the
agent's own code asked for (``get_ipython().set_next_input(...)``, a pager,
``exit``) is dropped at the turn's end (``drop_agent_payloads``) and a notice
says so, so no cell is planted unseen, whatever the approval mode.
"""

from __future__ import annotations

from typing import Any

CELL_HEADER = "# pi: python call {index} of {total}"


def code_cell_text(messages: list[Any]) -> str:
    """The code the successful ``python`` calls among ``messages`` (a turn's) ran (``details["code"]``),
    in the order they ran (the tool's ``details["run"]``; calls of one message may run in any order),
    ``""`` when there is none."""
    runs: list[tuple[int, int, str]] = []
    for index, message in enumerate(messages):
        if getattr(message, "role", "") != "assistant":
            continue
        results = _results_after(messages, index)  # ids may repeat across requests (some servers count from 0)
        for call in message.tool_calls:
            result = results.get(call.id)
            if call.name != "python" or result is None or result.is_error:
                continue
            details = result.details if isinstance(result.details, dict) else {}
            code = details.get("code")  # what ran (an approval may have edited the model's code), not the proposal
            run = details.get("run")
            if not isinstance(code, str) or not isinstance(run, int):
                continue  # not run by the python tool (denied, refused, or a result without its code)
            runs.append((run, len(runs), code.strip("\n")))
    codes = [code for _run, _position, code in sorted(runs)]
    total = len(codes)
    return "\n\n".join(f"{CELL_HEADER.format(index=i, total=total)}\n{code}" for i, code in enumerate(codes, 1))


def _results_after(messages: list[Any], index: int) -> dict[str, Any]:
    """The tool results answering the assistant message at ``index`` (up to the next assistant message)."""
    results: dict[str, Any] = {}
    for message in messages[index + 1 :]:
        role = getattr(message, "role", "")
        if role == "assistant":
            break
        if role == "tool_result":
            results.setdefault(message.tool_call_id, message)
    return results


def drop_agent_payloads(shell: Any) -> list[str]:
    """Remove the payloads written while the turn ran (the agent's code: ``set_next_input``, pager, exit);
    returns their sources. Called at the turn's end, before ``offer_code_cell`` adds pi's own."""
    manager = getattr(shell, "payload_manager", None)
    if manager is None:
        return []
    payloads = manager.read_payload() or []
    sources = [str(payload.get("source", "?")) if isinstance(payload, dict) else "?" for payload in payloads]
    if sources:
        manager.clear_payload()
    return sources


def offer_code_cell(shell: Any, messages: list[Any]) -> bool:
    """Put the turn's code in the next cell (``set_next_input``); whether there was any."""
    text = code_cell_text(messages)
    setter = getattr(shell, "set_next_input", None)
    if not text or setter is None:
        return False
    setter(text, replace=False)
    return True
