"""The local provider's rules that need no model: tool-choice heads, request errors, the CI switch.

``tool_heads`` decides what the choice grammar may pick, so it decides whether
the model may answer in text, must call a tool, or may only call one named
tool; the model only chooses among what it returns. These tests run
everywhere, with or without llama.cpp.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from pi_kernel.ai import (
    AssistantMessage,
    Context,
    StreamOptions,
    TextContent,
    Tool,
    ToolCall,
    ToolResultMessage,
    UserMessage,
)
from pi_kernel.ai.providers.local import (
    MESSAGE_HEAD,
    ContextOverflowError,
    ToolChoiceError,
    class_and_message,
    is_request_error,
    tool_heads,
)
from pi_kernel.ai.providers.local_server import failure_of

TESTS = Path(__file__).resolve().parents[1]
SCHEMA = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}
WEATHER, TIME = Tool("get_weather", "Weather.", SCHEMA), Tool("get_time", "Time.", SCHEMA)
CALLS = ["functions.get_weather:", "functions.get_time:"]


def asked(tools: list[Tool] | None = None) -> Context:
    return Context(messages=[UserMessage("What is the weather in Paris?")], tools=tools)


def answered(tools: list[Tool]) -> Context:
    """The model called a tool and its result came back: the next turn."""
    call = ToolCall(id="c1", name="get_weather", arguments={"city": "Paris"})
    return Context(
        messages=[
            UserMessage("What is the weather in Paris?"),
            AssistantMessage(content=[call], stop_reason="tool_use"),
            ToolResultMessage("c1", "get_weather", [TextContent("Sunny")]),
        ],
        tools=tools,
    )


def heads(context: Context, choice: str | None) -> list[str]:
    return tool_heads(context, StreamOptions(tool_choice=choice))


# ------------------------------------------------------------------------------ tool-choice heads


def test_none_allows_only_a_text_answer() -> None:
    assert heads(asked([WEATHER, TIME]), "none") == [MESSAGE_HEAD]


@pytest.mark.parametrize("choice", ["auto", None])
def test_auto_offers_every_tool_and_still_a_text_answer(choice: str | None) -> None:
    assert heads(asked([WEATHER, TIME]), choice) == [MESSAGE_HEAD, *CALLS]
    assert heads(asked(None), choice) == [MESSAGE_HEAD]  # no tools: text only


def test_required_offers_every_tool_and_no_text_answer() -> None:
    assert heads(asked([WEATHER, TIME]), "required") == CALLS


def test_a_named_choice_offers_only_that_tool() -> None:
    assert heads(asked([WEATHER, TIME]), "get_time") == ["functions.get_time:"]


@pytest.mark.parametrize("choice", ["auto", "required", "get_weather", "none"])
def test_after_a_tool_result_the_model_is_steered_to_answer(choice: str) -> None:
    """A forced choice means "call a tool in reply to this user message": this model would repeat the call."""
    assert heads(answered([WEATHER, TIME]), choice) == [MESSAGE_HEAD]


@pytest.mark.parametrize(
    ("tools", "choice", "needle"),
    [([WEATHER], "get_stock_price", "get_stock_price"), (None, "required", "at least one tool"), (None, "x", "none")],
)
def test_an_impossible_choice_is_an_error(tools: list[Tool] | None, choice: str, needle: str) -> None:
    with pytest.raises(ToolChoiceError, match=needle):
        heads(asked(tools), choice)
    with pytest.raises(ToolChoiceError):  # even after a tool result: the request itself is wrong
        heads(answered(tools or []), choice)


# ------------------------------------------------------------------------------ request errors


def failed(error: Exception) -> AssistantMessage:
    return AssistantMessage(stop_reason="error", error_message=class_and_message(error))


def test_request_errors_answer_400_and_model_failures_500() -> None:
    """``serve-local``: the ``openai`` client retries a 5xx, and a prompt too long fails the same way again."""
    overflow = failed(ContextOverflowError("the prompt has 5000 tokens; the local model's context holds 4096"))
    choice = failed(ToolChoiceError('tool_choice names "x"'))
    broken = failed(RuntimeError("llama_decode returned -3"))
    assert [is_request_error(m) for m in (overflow, choice, broken)] == [True, True, False]
    assert [failure_of(m)[0] for m in (overflow, choice, broken)] == [400, 400, 500]
    body = failure_of(overflow)[1]
    assert body["error"]["type"] == "invalid_request_error" and "5000 tokens" in body["error"]["message"]
    assert failure_of(broken)[1]["error"]["type"] == "server_error"
    assert not is_request_error(AssistantMessage(stop_reason="error", error_message="ContextOverflowError"))


# ------------------------------------------------------------------------------ PI_REQUIRE_LOCAL_MODEL


def test_require_local_model_turns_the_skip_into_a_failure(tmp_path: Path) -> None:
    """``make test`` sets it, so CI cannot pass without running a tutorial on the model."""
    (tmp_path / "test_needs_model.py").write_text(
        textwrap.dedent(
            """
            import sys

            import pytest

            sys.modules["llama_cpp"] = None  # this machine has no llama-cpp-python (find_spec gives None)


            @pytest.mark.local_model
            def test_on_the_model():
                pass
            """
        )
    )

    def run(**env: str) -> subprocess.CompletedProcess[str]:
        environ = {k: v for k, v in os.environ.items() if k != "PI_REQUIRE_LOCAL_MODEL"} | env
        environ["PYTHONPATH"] = os.pathsep.join([str(TESTS), str(TESTS.parent)])
        command = [sys.executable, "-m", "pytest", "-p", "conftest", "-p", "no:cacheprovider", "-q", "-rsfE"]
        return subprocess.run(
            [*command, "-W", "ignore", str(tmp_path)], cwd=tmp_path, env=environ, capture_output=True, text=True
        )

    relaxed, strict = run(), run(PI_REQUIRE_LOCAL_MODEL="1")
    assert relaxed.returncode == 0 and "1 skipped" in relaxed.stdout, relaxed.stdout + relaxed.stderr
    assert "llama-cpp-python is not installed" in relaxed.stdout
    assert strict.returncode != 0 and "1 error" in strict.stdout, strict.stdout + strict.stderr
    assert "PI_REQUIRE_LOCAL_MODEL=1 but llama-cpp-python is not installed" in strict.stdout
