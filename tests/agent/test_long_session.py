"""Long sessions (issue 15) through the real ``Agent``, the real ``openai`` client and the scripted server:
bounded tool results, compaction, context-length retries, the context meter, cost and budgets.

Long sessions (issue 15): the breaks a review found, through the real ``Agent``, the real ``openai``
client and the scripted server (each test failed before its fix).

The budget's estimate of the next request counts prompt caching: the part the previous request of the model
sent at the cache-read price, the rest at the cache-write price (input price where writes are not billed).
"""

from __future__ import annotations

import asyncio
import base64
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import SimpleNamespace
from typing import Any

import pytest
from fake_openai import Chunks, FakeOpenAI, HTTPError, ToolCallSpec, text_chunks, tool_call_chunks, usage_dict
from test_widgets_frontend import WidgetHarness

from pi_kernel.agent import Agent, AgentEndEvent, AgentStartEvent, MessageEndEvent, MessageStartEvent
from pi_kernel.agent.agent import Budget, UsageLedger, budget_stop, request_estimate
from pi_kernel.agent.compaction import SUMMARY_PROMPT, CompactionSettings, estimate_context_tokens
from pi_kernel.agent.types import DEFAULT_TOOL_RESULT_CHARS, CompactionEvent
from pi_kernel.ai import (
    AssistantMessage,
    Context,
    ImageContent,
    Model,
    ModelCost,
    TextContent,
    ToolResultMessage,
    Usage,
    UserMessage,
)
from pi_kernel.ai.overflow import is_context_overflow
from pi_kernel.kernel.config import PiSettings, apply_config, settings_from_env
from pi_kernel.kernel.session import budget, with_context_window
from pi_kernel.tools import ToolRegistry, tool
from pi_kernel.widgets.kit import WidgetKit
from pi_kernel.widgets.render import Footer, render_static
from pi_kernel.widgets.turn_state import TurnState

TWENTY_MB = 20 * 1024 * 1024


def user_text(text: str) -> UserMessage:
    return UserMessage([TextContent(text)])


def agent_for(server: FakeOpenAI, registry: ToolRegistry | None = None, **options: object) -> Agent:
    model = Model("fake-model", provider="llamacpp", base_url=server.base_url, **options)  # type: ignore[arg-type]
    hook = registry.prepare_next_turn if registry is not None else None
    return Agent(model, prepare_next_turn=hook)


async def test_a_20_mb_user_tool_result_reaches_the_model_cut_to_the_limit(fake_openai: FakeOpenAI) -> None:
    registry = ToolRegistry()

    @tool(registry=registry)
    def dump() -> str:
        """Return a huge text."""
        return "x" * TWENTY_MB

    fake_openai.enqueue(tool_call_chunks([ToolCallSpec("dump", {}, "call_dump")]), text_chunks("done"))
    agent = agent_for(fake_openai, registry)
    ends: list[object] = []
    agent.subscribe(lambda event: ends.append(event) if event.type == "tool_execution_end" else None)
    await agent.prompt("dump it")

    sent = next(m for m in fake_openai.bodies[1]["messages"] if m["role"] == "tool")["content"]
    assert len(sent) < DEFAULT_TOOL_RESULT_CHARS + 500
    assert sent.startswith("x" * DEFAULT_TOOL_RESULT_CHARS)
    assert f"showing the first {DEFAULT_TOOL_RESULT_CHARS:,} of {TWENTY_MB:,} characters" in sent
    assert "asking for less" in sent
    # The full value stays with the user: the event the notebook renders holds it whole.
    assert len(ends[0].result.content[0].text) == TWENTY_MB  # type: ignore[attr-defined]
    result = next(m for m in agent.state.messages if isinstance(m, ToolResultMessage))
    assert len(result.text) < DEFAULT_TOOL_RESULT_CHARS + 500


async def test_the_tool_result_limit_is_a_setting(fake_openai: FakeOpenAI) -> None:
    registry = ToolRegistry()

    @tool(registry=registry)
    def lines() -> str:
        """Some text."""
        return "0123456789" * 100

    fake_openai.enqueue(tool_call_chunks([ToolCallSpec("lines", {}, "call_1")]), text_chunks("done"))
    agent = agent_for(fake_openai, registry)
    agent.max_tool_result_chars = 50
    await agent.prompt("go")
    sent = next(m for m in fake_openai.bodies[1]["messages"] if m["role"] == "tool")["content"]
    assert sent.startswith("0123456789" * 5 + "\n\n[Tool result cut: showing the first 50 of 1,000 characters")


# ------------------------------------------------------------------------------ compaction


def content_text(message: dict[str, Any]) -> str:
    content = message["content"]
    return content if isinstance(content, str) else "".join(part.get("text", "") for part in content)


def is_summary_request(body: dict[str, Any]) -> bool:
    return body["messages"][0]["content"] == SUMMARY_PROMPT


def request_tokens(body: dict[str, Any]) -> int:
    return len(json.dumps(body["messages"])) // 4 + len(json.dumps(body.get("tools", []))) // 4


def assert_pairs_whole(body: dict[str, Any]) -> None:
    """Every tool call of the request has its result in it, and every result its call."""
    called: list[str] = []
    answered: list[str] = []
    for message in body["messages"]:
        called += [call["id"] for call in message.get("tool_calls") or []]
        if message["role"] == "tool":
            assert message["tool_call_id"] in called, "a tool result without its call"
            answered.append(message["tool_call_id"])
    assert sorted(called) == sorted(answered), "a tool call without its result"


def working_model(body: dict[str, Any]) -> Any:
    """Summaries for summary requests; else a tool call after a user message, an answer after a result.
    Usage reports the request's real size, as a server would."""
    usage = usage_dict(request_tokens(body), 20)
    if is_summary_request(body):
        return text_chunks("## Goal\nread files\n## Pending\nmore files", usage=usage)
    last = body["messages"][-1]
    if last["role"] == "user":
        turn = len([m for m in body["messages"] if m["role"] == "tool"])
        return tool_call_chunks(
            [ToolCallSpec("read_page", {"page": turn}, f"call_{len(body['messages'])}")], usage=usage
        )
    return text_chunks("page read", usage=usage)


async def test_a_conversation_past_a_small_window_keeps_working_turn_after_turn(fake_openai: FakeOpenAI) -> None:
    registry = ToolRegistry()

    @tool(registry=registry)
    def read_page(page: int) -> str:
        """Read one page of a long file.

        Args:
            page: Page number.
        """
        return f"page {page}: " + "lorem ipsum " * 300  # about 900 tokens

    fake_openai.responder = working_model
    agent = agent_for(fake_openai, registry, context_window=4_000, max_tokens=500)
    compactions: list[Any] = []
    agent.subscribe(lambda event: compactions.append(event) if event.type == "compaction" else None)
    for turn in range(12):
        await agent.prompt(f"read the next page ({turn})")
        assert agent.state.messages[-1].text == "page read", agent.state.messages[-1].error_message

    assert compactions, "the conversation was never compacted"
    bodies = fake_openai.bodies
    summaries = [body for body in bodies if is_summary_request(body)]
    assert len(summaries) == len(compactions)
    assert "[Assistant called read_page]" in content_text(summaries[0]["messages"][1])
    for body in bodies:
        if not is_summary_request(body):
            assert_pairs_whole(body)
            assert request_tokens(body) < 4_000
    first = agent.state.messages[0]
    assert isinstance(first, UserMessage) and first.content[0].text.startswith("[compacted ")  # type: ignore[union-attr]
    assert "read files" in first.content[0].text  # type: ignore[union-attr]
    # The summary request's cost counts.
    assert agent.usage.by_model["llamacpp:fake-model"].requests == len(bodies)


async def test_a_context_length_error_leads_to_one_compaction_and_a_successful_retry(fake_openai: FakeOpenAI) -> None:
    overflow = {
        "error": {
            "message": "This model's maximum context length is 8192 tokens. However, your messages resulted in "
            "9000 tokens. Please reduce the length of the messages.",
            "type": "invalid_request_error",
            "code": "context_length_exceeded",
            "param": "messages",
        }
    }
    fake_openai.enqueue(
        HTTPError(400, body=overflow),
        text_chunks("## Goal\nearlier work"),
        text_chunks("the answer"),
    )
    agent = agent_for(fake_openai)
    agent.compaction = CompactionSettings(keep_recent_tokens=1)
    history: list[Any] = []
    for turn in range(3):
        history += [user_text(f"question {turn}"), AssistantMessage([TextContent(f"answer {turn}")], model="x")]
    agent.replace_messages(history)
    compactions: list[Any] = []
    agent.subscribe(lambda event: compactions.append(event) if event.type == "compaction" else None)

    await agent.prompt("the new question")

    assert [c.reason for c in compactions] == ["overflow"]
    first, summary_request, retry = fake_openai.bodies
    assert is_summary_request(summary_request) and not is_summary_request(retry)
    assert [m["role"] for m in retry["messages"]] == ["user", "user"]
    assert content_text(retry["messages"][0]).startswith("[compacted 3 turns]")
    assert content_text(retry["messages"][-1]) == "the new question"
    assert len(retry["messages"]) < len(first["messages"])
    messages = agent.state.messages
    assert messages[-1].text == "the answer"
    assert not any(getattr(m, "error_message", None) for m in messages), "the failed request stayed"


async def test_a_second_context_length_error_is_not_retried_again(fake_openai: FakeOpenAI) -> None:
    overflow = HTTPError(400, message="prompt too long; exceeded max context length by 12 tokens")
    fake_openai.enqueue(overflow, text_chunks("summary"), overflow)
    agent = agent_for(fake_openai)
    agent.compaction = CompactionSettings(keep_recent_tokens=10)
    agent.replace_messages([user_text("q"), AssistantMessage([TextContent("a")], model="x")])
    await agent.prompt("again")
    assert len(fake_openai.bodies) == 3
    assert "exceeded max context length" in (agent.state.messages[-1].error_message or "")


async def test_compact_on_demand_keeps_the_recent_turns(fake_openai: FakeOpenAI) -> None:
    fake_openai.enqueue(text_chunks("the summary"))
    agent = agent_for(fake_openai)
    agent.compaction = CompactionSettings(keep_recent_tokens=10)
    history: list[Any] = []
    for turn in range(4):
        history += [user_text(f"question {turn}"), AssistantMessage([TextContent(f"answer {turn}")], model="x")]
    agent.replace_messages(history)
    result = await agent.compact()
    assert result is not None and result.compacted_turns == 3
    assert [m.role for m in agent.state.messages] == ["user", "user", "assistant"]
    assert agent.state.messages[1].content[0].text == "question 3"


# ------------------------------------------------------------------------------ budgets


async def test_a_token_budget_stops_a_running_turn_at_the_first_request_past_it(fake_openai: FakeOpenAI) -> None:
    registry = ToolRegistry()

    @tool(registry=registry)
    def note() -> str:
        """Write a note."""
        return "noted " * 50

    fake_openai.enqueue(tool_call_chunks([ToolCallSpec("note", {}, "call_note")], usage=usage_dict(9_950, 10)))
    agent = agent_for(fake_openai, registry)
    agent.budget = Budget(tokens=10_000)
    await agent.prompt("note it")

    assert len(fake_openai.bodies) == 1, "the request past the budget was sent"
    last = agent.state.messages[-1]
    assert last.stop_reason == "error" and "Token budget reached: 9,960 of 10,000 tokens spent" in (
        last.error_message or ""
    )
    assert "Nothing was sent" in (last.error_message or "")
    result = next(m for m in agent.state.messages if isinstance(m, ToolResultMessage))
    assert result.text.startswith("noted"), "the work done before the budget was lost"


async def test_a_dollar_budget_stops_a_turn_before_its_request(fake_openai: FakeOpenAI) -> None:
    agent = agent_for(fake_openai, cost=ModelCost(input=1_000_000.0, output=0.0))  # $1 a token in
    agent.budget = Budget(usd=5.0)
    await agent.prompt("a question far longer than five tokens, so it would cost more than five dollars")
    assert fake_openai.bodies == []
    assert "Budget reached: $0.0000 of $5.00 spent" in (agent.state.messages[-1].error_message or "")
    assert agent.state.messages[0].content[0].text.startswith("a question")  # type: ignore[union-attr]


# ------------------------------------------------------------------------------ recognising overflow


def test_the_context_length_errors_of_each_provider_are_recognised() -> None:
    seen = [
        "400 This model's maximum context length is 128000 tokens. However, your messages resulted in 130000 "
        "tokens. Please reduce the length of the messages. (context_length_exceeded)",  # OpenAI
        "400 This model's maximum context length is 65536 tokens. However, you requested 70000 tokens",  # DeepSeek
        "400 The decoder prompt (length 5000) is longer than the maximum model length of 4096.",  # vLLM
        "400 the request exceeds the available context size, try increasing it",  # llama.cpp
        "400 prompt too long; exceeded max context length by 12 tokens",  # Ollama
        "ContextOverflowError: the prompt has 5000 tokens; the local model's context holds 4096",  # local
    ]
    assert all(is_context_overflow(text) for text in seen)
    others = ["429 You exceeded your current quota", "401 Incorrect API key", "500 Internal error", None]
    assert not any(is_context_overflow(text) for text in others)


# ------------------------------------------------------------------------------ the window and the settings


def test_the_context_window_comes_from_the_setting_the_table_or_the_default() -> None:
    assert Model("gpt-4o-mini").resolved_context_window == 128_000
    assert Model("gpt-4.1-2025-04-14").resolved_context_window == 1_047_576  # a dated variant
    assert Model("gpt-4.1-mini").context_window_source == "known"
    assert Model("my-own-model").resolved_context_window == 128_000
    assert Model("my-own-model").context_window_source == "default"
    assert Model("gpt-4o", context_window=9_000).resolved_context_window == 9_000


def test_a_server_that_says_its_window_gives_it() -> None:
    """vLLM lists ``max_model_len`` and llama.cpp ``meta.n_ctx_train`` at ``/models``."""
    listings = {
        "vllm": {"data": [{"id": "qwen", "object": "model", "max_model_len": 32_768}]},
        "llamacpp": {"data": [{"id": "m.gguf", "object": "model", "meta": {"n_ctx_train": 8_192}}]},
    }
    for provider, listing in listings.items():
        body = json.dumps(listing).encode()

        class Handler(BaseHTTPRequestHandler):
            payload = body

            def do_GET(self) -> None:
                self.send_response(200)
                self.send_header("Content-Length", str(len(self.payload)))
                self.end_headers()
                self.wfile.write(self.payload)

            def log_message(self, *args: Any) -> None:
                pass

        httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=httpd.serve_forever, daemon=True).start()
        try:
            url = f"http://127.0.0.1:{httpd.server_address[1]}/v1"
            model_id = listing["data"][0]["id"]
            model = with_context_window(Model(model_id, provider=provider, base_url=url), None)
            assert model is not None and model.resolved_context_window == listing["data"][0].get("max_model_len", 8_192)
            chosen = with_context_window(Model(model_id, provider=provider, base_url=url), 1_000)
            assert chosen is not None and chosen.context_window == 1_000
        finally:
            httpd.shutdown()


def test_long_session_settings_from_the_environment_and_config() -> None:
    env = {
        "PI_TOOL_RESULT_LIMIT": "10k",
        "PI_CONTEXT_WINDOW": "32000",
        "PI_BUDGET": "$2.50",
        "PI_TOKEN_BUDGET": "1_000_000",
        "PI_PRICES": '{"my-model": [0.5, 1.5]}',
    }
    settings = settings_from_env(env)
    assert (settings.tool_result_limit, settings.context_window, settings.budget, settings.token_budget) == (
        10_000,
        32_000,
        2.5,
        1_000_000,
    )
    assert settings.prices == {"my-model": (0.5, 1.5)}
    problems: list[str] = []
    bad = settings_from_env({"PI_BUDGET": "lots", "PI_CONTEXT_WINDOW": "-3"}, problems=problems)
    assert bad.budget is None and bad.context_window is None and len(problems) == 2
    configured = apply_config(PiSettings(), {"budget": 1, "context_window": "8000", "tool_result_limit": 500})
    assert (configured.budget, configured.context_window, configured.tool_result_limit) == (1.0, 8_000, 500)


async def test_after_compaction_the_old_reported_usage_no_longer_counts(fake_openai: FakeOpenAI) -> None:
    fake_openai.enqueue(text_chunks("the summary"))
    agent = agent_for(fake_openai)
    big = AssistantMessage([TextContent("answer")], model="x")
    big.usage.input = 100_000  # the prompt this answer saw, before compaction
    agent.replace_messages([user_text("q1"), AssistantMessage([TextContent("a1")], model="x"), user_text("q2"), big])
    await agent.compact()
    state = agent.state
    context = Context(state.system_prompt, state.messages, state.tools)
    assert estimate_context_tokens(context) < 1_000


# ------------------------------------------------------------------------------ what the turn shows


def test_the_footer_shows_context_use_and_the_compaction_marker() -> None:
    state = TurnState(model="gpt-4o-mini", provider="openai", context_window=128_000)
    state.apply(AgentStartEvent())
    summary = user_text("[compacted 3 turns] ...")
    state.apply(
        CompactionEvent([summary], summary, 3, 6, 90_000, "threshold", Usage(input=900, output=100, cost=0.001))
    )
    usage = Usage(input=12_000, output=345, cost=0.002)
    message = AssistantMessage([TextContent("hi")], usage=usage, model="gpt-4o-mini", provider="openai")
    state.apply(MessageStartEvent(message))
    state.apply(MessageEndEvent(message))
    state.apply(AgentEndEvent([message]))

    static = render_static(state, lambda name: None)
    text, html = static.data["text/plain"], static.data["text/html"]
    for shown in (text, html):
        assert "context 12,345 / 128,000 (10%)" in shown
        assert "$0.0030" in shown  # the summary request's cost counts in the turn
        assert "compacted 3 turns into a summary" in shown
    footer = Footer(WidgetKit())
    footer.update(state)
    assert "context 12,345 / 128,000 (10%)" in footer.widget.value


async def test_a_failed_summary_request_still_compacts_with_the_plain_list(fake_openai: FakeOpenAI) -> None:
    fake_openai.enqueue(HTTPError(400, message="summaries are not allowed here"))
    agent = agent_for(fake_openai)
    history: list[Any] = []
    for turn in range(3):
        history += [user_text(f"question {turn}"), AssistantMessage([TextContent(f"answer {turn}")], model="x")]
    agent.replace_messages(history)
    result = await agent.compact()
    assert result is not None and "summaries are not allowed here" in (result.error or "")
    text = agent.state.messages[0].content[0].text  # type: ignore[union-attr]
    assert text.startswith("[compacted 2 turns]") and "- user: question 0" in text and "- user: question 1" in text
    assert agent.state.messages[1].content[0].text == "question 2"  # type: ignore[union-attr]


async def test_the_live_widget_view_shows_the_meter_and_the_marker(monkeypatch: pytest.MonkeyPatch) -> None:
    harness = WidgetHarness(monkeypatch)
    harness.view.state.context_window = 3_000
    harness.feed(AgentStartEvent())
    summary = user_text("[compacted 2 turns] ...")
    harness.feed(CompactionEvent([summary], summary, 2, 4, 2_900, "overflow"))
    message = AssistantMessage([TextContent("ok")], usage=Usage(input=1_200, output=300), model="gpt-test")
    harness.feed(MessageStartEvent(message), MessageEndEvent(message))
    harness.settle()
    footer = harness.widget_state(harness.view.footer.widget)["value"]
    assert "context 1,500 / 3,000 (50%)" in footer
    values = [str(state.get("value", "")) for state in harness.mirror().models.values()]
    assert any("⇣ compacted 2 turns into a summary (the provider said the request was too long)" in v for v in values)


# --------------------------------------------------------------------------- long session edge cases


OVERFLOW = {
    "error": {"message": "This model's maximum context length is 4000 tokens.", "code": "context_length_exceeded"}
}


def small_window_model(server: FakeOpenAI) -> Model:
    return Model("fake-model", provider="llamacpp", base_url=server.base_url, context_window=4_000, max_tokens=500)


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


def cjk_tokens(body: dict[str, Any]) -> int:
    """Tokens as a real tokenizer counts Chinese text: about one per character (ASCII: four characters)."""
    text = json.dumps(body["messages"], ensure_ascii=False)
    wide = sum(1 for ch in text if ord(ch) > 0x2E80)
    return wide + (len(text) - wide) // 4


async def test_a_chinese_conversation_past_a_small_window_keeps_working(fake_openai: FakeOpenAI) -> None:
    """In Chinese (about one token per character) an estimate of characters / 4 made compaction keep about the
    whole window verbatim: every later request overflowed, and the retry too."""

    def server(body: dict[str, Any]) -> Any:
        tokens = cjk_tokens(body)
        if tokens > 4_000:
            return HTTPError(400, body=OVERFLOW)
        usage = usage_dict(tokens, 300)
        if is_summary_request(body):
            return text_chunks("## 目标\n读文件", usage=usage)
        return text_chunks("好的。" + "这是一个很长的回答。" * 60, usage=usage)  # ~600 tokens

    fake_openai.responder = server
    model = small_window_model(fake_openai)
    agent = Agent(model)
    failed = []
    for turn in range(12):
        await agent.prompt(f"第{turn}个问题:" + "请继续分析数据。" * 20)
        last = agent.state.messages[-1]
        if last.stop_reason == "error":
            failed.append((turn, last.error_message))
    assert not failed, f"{len(failed)} of 12 turns failed, first: {failed[0]}"
    assert any(is_summary_request(body) for body in fake_openai.bodies)


async def test_a_tool_result_under_the_limit_but_over_the_window_does_not_fail_the_turn(
    fake_openai: FakeOpenAI,
) -> None:
    """A 30,000-character result (under the 64,000 default, ~7,500 tokens) with a 4,000-token window: the
    server rejects every request over its window. Compaction kept the result verbatim, so the retry
    overflowed too and the turn ended in an error."""
    registry = ToolRegistry()

    @tool(registry=registry)
    def dump() -> str:
        """Return a table."""
        return "row, " * 6_000

    def server(body: dict[str, Any]) -> Any:
        if request_tokens(body) > 4_000:
            return HTTPError(400, body=OVERFLOW)
        if is_summary_request(body):
            return text_chunks("## Goal\nsummary")
        if body["messages"][-1]["role"] == "tool":
            return text_chunks("table seen")
        return tool_call_chunks([ToolCallSpec("dump", {}, "call_dump")])

    fake_openai.responder = server
    model = small_window_model(fake_openai)
    agent = Agent(model, prepare_next_turn=registry.prepare_next_turn)
    await agent.prompt("show me the table")
    last = agent.state.messages[-1]
    assert last.text == "table seen", f"the turn failed: {last.error_message}"
    sent = [m for m in fake_openai.bodies[-1]["messages"] if m["role"] == "tool"]
    assert "Tool result cut" in sent[0]["content"]


async def test_a_cancelled_run_keeps_a_finished_user_tool_result_bounded(fake_openai: FakeOpenAI) -> None:
    """A run cancelled from outside (a second kernel interrupt) gives each finished call its real result
    (``state.closing_events_for_cancelled_run``): it was not bounded, and went whole to the model."""
    registry = ToolRegistry()

    @tool(registry=registry)
    def dump() -> str:
        """Return a huge text."""
        return "x" * 300_000  # over the 64,000 limit, under the 128,000-token window

    @tool(registry=registry)
    async def hang() -> str:
        """Wait."""
        await asyncio.sleep(60)
        return "late"

    fake_openai.enqueue(
        tool_call_chunks([ToolCallSpec("dump", {}, "call_dump"), ToolCallSpec("hang", {}, "call_hang")]),
        text_chunks("next answer"),
    )
    model = Model("fake-model", provider="llamacpp", base_url=fake_openai.base_url)
    agent = Agent(model, prepare_next_turn=registry.prepare_next_turn)
    dumped = asyncio.Event()
    agent.subscribe(
        lambda event: dumped.set() if event.type == "tool_execution_end" and event.tool_call_id == "call_dump" else None
    )
    run = asyncio.ensure_future(agent.prompt("dump and hang"))
    await asyncio.wait_for(dumped.wait(), 20)
    run.cancel()
    try:
        await run
    except asyncio.CancelledError:
        pass
    await agent.prompt("go on")
    sent = [m for m in fake_openai.bodies[-1]["messages"] if m["role"] == "tool" and m["tool_call_id"] == "call_dump"]
    assert len(sent[0]["content"]) < 70_000, f"{len(sent[0]['content']):,} characters of a tool result were sent"


async def test_a_user_tool_returning_image_blocks_is_bounded_too(fake_openai: FakeOpenAI) -> None:
    """Content blocks a ``@tool`` returns pass through untouched and the bound counted text only: 40 images of
    1 MB of base64 each reached the model whole, 40 MB in one request."""
    registry = ToolRegistry()
    blob = base64.b64encode(b"\x89PNG\r\n\x1a\n" + b"\0" * 750_000).decode()

    @tool(registry=registry)
    def shots() -> list[ImageContent]:
        """Screenshots."""
        return [ImageContent(blob, "image/png") for _ in range(40)]

    fake_openai.enqueue(tool_call_chunks([ToolCallSpec("shots", {}, "call_shots")]), text_chunks("seen"))
    model = Model("fake-model", provider="llamacpp", base_url=fake_openai.base_url)
    agent = Agent(model, prepare_next_turn=registry.prepare_next_turn)
    await agent.prompt("take screenshots")
    size = len(json.dumps(fake_openai.bodies[-1]["messages"]))
    assert size < 5_000_000, f"{size:,} bytes of tool result went to the model"
    result = next(m for m in agent.state.messages if getattr(m, "role", "") == "tool_result")
    assert "images left out" in result.content[0].text


async def test_the_summary_request_and_retry_after_an_overflow_respect_the_token_budget(
    fake_openai: FakeOpenAI,
) -> None:
    """The budget was checked once, before the first request; an overflow answer then led to a summary
    request and a retry sent without looking at the budget again."""
    fake_openai.enqueue(
        HTTPError(400, body=OVERFLOW),
        text_chunks("## Goal\nsummary", usage=usage_dict(950, 40)),  # the summary request: 990 tokens
        text_chunks("the answer", usage=usage_dict(200, 10)),
    )
    model = Model("fake-model", provider="llamacpp", base_url=fake_openai.base_url)
    agent = Agent(model, compaction=CompactionSettings(keep_recent_tokens=1))
    agent.replace_messages(short_history(3))
    agent.budget = Budget(tokens=1_000)
    await agent.prompt("next")
    assert agent.usage.tokens <= 1_000, f"{agent.usage.tokens} tokens spent against a budget of 1,000"
    assert "budget reached" in (agent.state.messages[-1].error_message or "")


async def test_a_dollar_budget_on_a_model_without_a_price_says_it_cannot_hold(fake_openai: FakeOpenAI) -> None:
    """A model with no known price costs $0 to the ledger, so ``%pi budget 0.01`` silently never stopped
    anything; now ``%pi budget`` says the budget cannot work without a price."""
    for _ in range(3):
        fake_openai.enqueue(text_chunks("a", usage=usage_dict(1_000_000, 10)))
    model = Model("fake-unpriced-model", provider="llamacpp", base_url=fake_openai.base_url)
    agent = Agent(model)
    session: Any = SimpleNamespace(agent=agent)
    shown = budget(session, ["0.01"])
    for turn in range(3):
        await agent.prompt(f"turn {turn}")
    shown_after = budget(session, [])
    assert "no price" in shown and "no price" in shown_after, (shown, shown_after)
    assert "%pi price fake-unpriced-model" in shown


def test_a_dated_model_id_has_its_family_price_as_it_has_its_window() -> None:
    dated = Model("gpt-4o-mini-2024-07-18")
    assert dated.context_window_source == "known"
    assert dated.resolved_cost is not None
    assert dated.resolved_cost == Model("gpt-4o-mini").resolved_cost


async def test_a_summary_longer_than_asked_is_bounded(fake_openai: FakeOpenAI) -> None:
    """A server that does not honour ``max_tokens`` gave a summary bigger than the window, used whole."""
    fake_openai.enqueue(text_chunks("## Goal\n" + "details " * 12_000), text_chunks("the answer"))  # ~24k tokens
    model = Model("fake-model", provider="llamacpp", base_url=fake_openai.base_url, context_window=8_000)
    agent = Agent(model)
    agent.replace_messages(short_history(4))
    await agent.compact()
    summary = agent.state.messages[0].content[0].text  # type: ignore[union-attr]
    assert len(summary) // 4 < 8_000 // 2, f"a {len(summary) // 4:,}-token summary in an 8,000-token window"
    assert "characters left out" in summary


def serve_json(answers: dict[str, Any]) -> ThreadingHTTPServer:
    """A local server answering GET and POST at each path of ``answers`` with its JSON (404 elsewhere)."""

    class Handler(BaseHTTPRequestHandler):
        def answer(self) -> None:
            body = json.dumps(answers.get(self.path, {})).encode()
            self.send_response(200 if self.path in answers else 404)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def do_GET(self) -> None:
            self.answer()

        def do_POST(self) -> None:
            self.rfile.read(int(self.headers.get("Content-Length") or 0))
            self.answer()

        def log_message(self, *args: Any) -> None:
            pass

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    return httpd


def test_llama_cpp_window_is_the_servers_context_not_the_models_training_length() -> None:
    """llama.cpp's ``/models`` ``meta.n_ctx_train`` is the length the model was trained on; the server's window
    is its ``--ctx-size`` (``/props``: ``default_generation_settings.n_ctx``)."""
    httpd = serve_json(
        {
            "/v1/models": {"data": [{"id": "qwen3.gguf", "object": "model", "meta": {"n_ctx_train": 262_144}}]},
            "/props": {"default_generation_settings": {"n_ctx": 32_768}},
        }
    )
    try:
        url = f"http://127.0.0.1:{httpd.server_address[1]}/v1"
        model = with_context_window(Model("qwen3.gguf", provider="llamacpp", base_url=url), None)
        assert model is not None and model.resolved_context_window == 32_768
    finally:
        httpd.shutdown()


def test_ollama_window_is_the_served_context_not_the_models_training_length() -> None:
    """``/api/show``'s ``*.context_length`` is the training length; Ollama serves ``num_ctx`` when the model sets
    it, a loaded model's ``context_length`` in ``/api/ps``, else its default (4,096 at the least)."""
    cases = [
        ({"models": []}, "", 4_096),
        ({"models": []}, "num_ctx 8192\nstop <eot>", 8_192),
        ({"models": [{"name": "qwen3:8b", "model": "qwen3:8b", "context_length": 16_384}]}, "", 16_384),
    ]
    for running, parameters, expected in cases:
        httpd = serve_json(
            {
                "/api/ps": running,
                "/api/show": {"model_info": {"qwen3.context_length": 131_072}, "parameters": parameters},
            }
        )
        try:
            url = f"http://127.0.0.1:{httpd.server_address[1]}/v1"
            model = with_context_window(Model("qwen3:8b", provider="ollama", base_url=url), None)
            assert model is not None and model.resolved_context_window == expected, (parameters, running)
        finally:
            httpd.shutdown()


# --------------------------------------------------------------------------- budget with cache


CLAUDE = ModelCost(3.0, 15.0, 0.3, 3.75)


def test_cached_part_at_the_read_price_and_the_rest_at_the_write_price() -> None:
    assert request_estimate(10_000, 9_000, CLAUDE) == pytest.approx((9_000 * 0.3 + 1_000 * 3.75) / 1e6)
    assert request_estimate(10_000, 0, CLAUDE) == pytest.approx(10_000 * 3.75 / 1e6)  # a first request writes
    gpt = ModelCost(0.15, 0.6, 0.075)  # OpenAI: reads cheaper, writes not billed apart
    assert request_estimate(10_000, 9_000, gpt) == pytest.approx((9_000 * 0.075 + 1_000 * 0.15) / 1e6)
    assert request_estimate(10_000, 9_000, ModelCost(1.0, 2.0)) == pytest.approx(10_000 * 1.0 / 1e6)
    assert request_estimate(10_000, 9_000, None) == 0.0


def test_a_long_cached_session_is_not_stopped_by_an_uncached_estimate() -> None:
    model = Model("claude-sonnet-4-5", provider="anthropic")
    ledger = UsageLedger()
    prompt_text = "x" * 400_000  # about 100,000 tokens
    ledger.add("anthropic:claude-sonnet-4-5", Usage(input=10, output=100, cache_read=99_000, cache_write=900))
    spent = ledger.cost
    budget = Budget(usd=spent + 0.1)  # 100k tokens at $3/M would be $0.30; from the cache about $0.03
    assert ledger.by_model["anthropic:claude-sonnet-4-5"].cache_write == 900
    assert budget_stop(ledger, budget, model, Context(None, [UserMessage(prompt_text)])) is None
    assert budget_stop(ledger, Budget(usd=spent + 0.01), model, Context(None, [UserMessage(prompt_text)]))
