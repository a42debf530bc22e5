"""Long sessions (issue 15): the breaks a review found, through the real ``Agent``, the real ``openai``
client and the scripted server (each test failed before its fix)."""

from __future__ import annotations

import asyncio
import base64
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import SimpleNamespace
from typing import Any

from fake_openai import Chunks, FakeOpenAI, HTTPError, ToolCallSpec, text_chunks, tool_call_chunks, usage_dict

from pi_kernel.agent import Agent
from pi_kernel.agent.agent import Budget
from pi_kernel.agent.compaction import SUMMARY_PROMPT, CompactionSettings
from pi_kernel.ai import AssistantMessage, ImageContent, Model, TextContent, UserMessage
from pi_kernel.kernel.session import budget, with_context_window
from pi_kernel.tools import ToolRegistry, tool

OVERFLOW = {
    "error": {"message": "This model's maximum context length is 4000 tokens.", "code": "context_length_exceeded"}
}


def request_tokens(body: dict[str, Any]) -> int:
    return len(json.dumps(body["messages"])) // 4 + len(json.dumps(body.get("tools", []))) // 4


def is_summary_request(body: dict[str, Any]) -> bool:
    return body["messages"][0]["content"] == SUMMARY_PROMPT


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
