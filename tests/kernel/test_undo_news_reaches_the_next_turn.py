"""The news of a ``%pi undo`` goes to the very next turn, whichever model runs it (issue 23 review).

The local model is not told the notebook context, but a local turn must not leave the undo news pending
for a later turn of another model, where it would arrive stale.
"""

from __future__ import annotations

from pi_kernel.ai import TextContent
from pi_kernel.kernel.cell_runner import prompt_message
from pi_kernel.kernel.session import PiSession


def _texts(session: PiSession, provider: str) -> list[str]:
    message = prompt_message(session, "What now?", provider)
    return [block.text for block in message.content if isinstance(block, TextContent)]


def test_a_local_turn_is_told_the_undo_and_the_news_is_not_kept_for_later() -> None:
    session = PiSession(shell=object())
    session.undo_news = "the turn 'fix it': its notebook changes were undone"
    texts = _texts(session, "local")
    assert texts[0] == "What now?" and "undid an earlier turn's changes" in texts[1] and "'fix it'" in texts[1]
    assert "Notebook context" not in texts[1]  # the local model still gets no notebook context
    assert session.undo_news is None
    assert _texts(session, "local") == ["What now?"]  # told once


def test_a_local_turn_without_undo_news_gets_the_prompt_alone() -> None:
    session = PiSession(shell=object())
    assert _texts(session, "local") == ["What now?"]
