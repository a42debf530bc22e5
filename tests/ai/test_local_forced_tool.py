"""``first_tool_choice`` on the real SmolLM2-135M: the forced tool is called, and the answer states its result.

The grammar allows only the named head on the first request (``tool_heads``); after the result the model
answers in text, opened by the short result (``local.answer_seed``). Temperature 0: the same every run.
"""

from __future__ import annotations

import re
from typing import Any

import pytest
from pydantic import BaseModel

from pi_kernel.agent import Agent, AgentTool, AgentToolResult
from pi_kernel.ai import Model, StreamOptions, TextContent
from pi_kernel.ai.providers.local_engine import LOCAL_MODEL_ID

pytestmark = pytest.mark.local_model


class Text(BaseModel):
    text: str
    """The text whose words to count."""


def tool(name: str, description: str, run: Any) -> AgentTool:
    def execute(tool_call_id: str, params: Text, signal: Any, on_update: Any) -> AgentToolResult:
        return AgentToolResult([TextContent(run(params.text))])

    return AgentTool(name=name, description=description, parameters=Text, execute=execute)


async def test_the_forced_tool_is_called_first_and_the_answer_states_its_result() -> None:
    tools = [
        tool("shout", "Upper-case a text.", str.upper),
        tool("word_count", "Count the words in a piece of text.", lambda text: str(len(text.split()))),
    ]
    agent = Agent(
        Model(LOCAL_MODEL_ID, provider="local"),
        tools=tools,
        stream_options=StreamOptions(max_tokens=48, temperature=0),
        max_turns=3,
    )
    agent.first_tool_choice = "word_count"

    await agent.prompt('Shout this: "the quick brown fox jumps over the lazy dog"')

    _, call, result, answer = agent.state.messages
    assert [c.name for c in call.tool_calls] == ["word_count"]  # not shout, which the prompt asks for
    assert result.text == "9" and not result.is_error
    assert re.search(r"\b9\b", answer.text) and not answer.tool_calls
    assert answer.stop_reason in ("stop", "length") and answer.text.rstrip()[-1:] in ".!?`"
