"""Long sessions (issue 15): the breaks a review found, through the real ``Agent``, the real ``openai``
client and the scripted server (each test failed before its fix)."""

from __future__ import annotations

import asyncio
import json
from typing import Any

from fake_openai import Chunks, FakeOpenAI, text_chunks

from pi_kernel.agent import Agent
from pi_kernel.agent.compaction import SUMMARY_PROMPT
from pi_kernel.ai import AssistantMessage, Model, TextContent, UserMessage

OVERFLOW = {
    "error": {"message": "This model's maximum context length is 4000 tokens.", "code": "context_length_exceeded"}
}


def request_tokens(body: dict[str, Any]) -> int:
    return len(json.dumps(body["messages"])) // 4 + len(json.dumps(body.get("tools", []))) // 4


def is_summary_request(body: dict[str, Any]) -> bool:
    return body["messages"][0]["content"] == SUMMARY_PROMPT


def short_history(turns: int) -> list[Any]:
    history: list[Any] = []
    for turn in range(turns):
        history += [UserMessage([TextContent(f"q{turn}")]), AssistantMessage([TextContent(f"a{turn}")], model="x")]
    return history


async def test_a_prompt_sent_while_a_manual_compaction_runs_is_not_lost(fake_openai: FakeOpenAI) -> None:
    """``Agent.compact()`` marks the agent busy: a ``prompt()`` meanwhile is refused (or, if it ran, its turn
    survives the compaction); before, the summary replaced ``state.messages`` with the old snapshot."""
    fake_openai.enqueue(Chunks(text_chunks("the summary", parts=6), delay=0.2), text_chunks("the new answer"))
    agent = Agent(Model("fake-model", provider="llamacpp", base_url=fake_openai.base_url))
    agent.replace_messages(short_history(3))

    compacting = asyncio.ensure_future(agent.compact())
    while not fake_openai.bodies:
        await asyncio.sleep(0.01)
    try:
        await agent.prompt("the new question")
    except RuntimeError:
        pass  # refusing while compacting is a fine answer too
    await compacting
    texts = [m.text if hasattr(m, "text") else m.content[0].text for m in agent.state.messages]
    if any("the new answer" in t for t in texts) or fake_openai.bodies[1:] == []:
        return
    raise AssertionError(f"the turn that ran during the compaction was lost: {texts}")


async def test_an_aborted_manual_compaction_changes_nothing(fake_openai: FakeOpenAI) -> None:
    fake_openai.enqueue(Chunks(text_chunks("the summary", parts=6), delay=0.3))
    agent = Agent(Model("fake-model", provider="llamacpp", base_url=fake_openai.base_url))
    history = short_history(3)
    agent.replace_messages(history)
    compacting = asyncio.ensure_future(agent.compact())
    while not fake_openai.bodies:
        await asyncio.sleep(0.01)
    agent.abort()
    assert await compacting is None
    assert agent.state.messages == history
    assert not agent.is_running
