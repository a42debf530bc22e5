"""``%pi tools`` shows the approval the gate would decide under the session's mode (issue 23).

The word comes from ``approval.decide`` with the session policy's state, so in ``auto`` mode a tool
that asks in ``ask`` mode shows ``runs``, and in ``deny`` / ``read-only`` an always-allowed tool shows
``denied``; the header names the mode.
"""

from __future__ import annotations

import re

from pi_kernel.kernel import line_commands
from pi_kernel.kernel.session import PiSession
from pi_kernel.tools.approval import decide
from pi_kernel.tools.decorator import tool


@tool(approval="ask", registry=False)
def shout(text: str) -> str:
    """Upper-case a text."""
    return text.upper()


def _session(mode: str) -> PiSession:
    session = PiSession(shell=object())
    session.registry.add(shout)
    session.policy.allow_always("shout")
    session.policy.set_mode(mode)
    return session


def _row(table: str, name: str) -> str:
    return next(line for line in table.splitlines() if line.split()[:1] == [name])


def test_in_auto_mode_a_tool_that_asks_shows_runs() -> None:
    session = _session("auto")
    session.policy.always_allowed.clear()
    table = line_commands.tools(session, [])
    assert "approval (mode: auto)" in table.splitlines()[0]
    assert re.fullmatch(r"shout +on +runs \(auto mode\)", _row(table, "shout"))
    assert decide(session.registry.get("shout"), "shout", {}, session.policy.state(None)).verdict == "run"


def test_in_deny_mode_an_always_allowed_tool_shows_denied() -> None:
    session = _session("deny")
    table = line_commands.tools(session, [])
    assert "approval (mode: deny)" in table.splitlines()[0]
    assert re.fullmatch(r"shout +on +denied \(deny mode\)", _row(table, "shout"))
    assert "always allowed" not in table


def test_in_read_only_mode_a_writing_tool_shows_denied_and_read_still_runs() -> None:
    session = _session("read-only")
    table = line_commands.tools(session, [])
    assert "approval (mode: read-only)" in table.splitlines()[0]
    assert re.fullmatch(r"shout +on +denied \(read-only mode\)", _row(table, "shout"))
    assert re.fullmatch(r"read +on +runs", _row(table, "read"))


def test_in_ask_mode_an_always_allowed_tool_runs_and_others_ask() -> None:
    session = _session("ask")
    table = line_commands.tools(session, [])
    assert re.fullmatch(r"shout +on +runs \(always allowed\)", _row(table, "shout"))
    session.policy.always_allowed.clear()
    assert re.fullmatch(r"shout +on +asks", _row(line_commands.tools(session, []), "shout"))


def test_a_mode_that_agrees_with_the_tool_adds_no_note() -> None:
    session = _session("auto")
    session.registry.add(tool(name="quiet", approval="auto", registry=False)(_quiet))
    assert re.fullmatch(r"quiet +on +runs", _row(line_commands.tools(session, []), "quiet"))


def _quiet(text: str) -> str:
    """Return a text as it is."""
    return text


def test_a_callable_approval_is_not_called_to_draw_the_table() -> None:
    calls: list[object] = []

    def rule(args: object) -> bool:
        calls.append(args)
        return True

    session = _session("ask")
    session.registry.add(tool(name="ruled", approval=rule, registry=False)(_quiet))
    assert re.fullmatch(r"ruled +on +its own rule", _row(line_commands.tools(session, []), "ruled"))
    session.policy.set_mode("deny")
    assert re.fullmatch(r"ruled +on +its own rule", _row(line_commands.tools(session, []), "ruled"))  # it may run
    session.policy.set_mode("read-only")
    assert re.fullmatch(r"ruled +on +denied \(read-only mode\)", _row(line_commands.tools(session, []), "ruled"))
    assert calls == []
