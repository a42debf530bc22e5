"""The Agent end to end: the real provider (``pi_kernel.ai.stream``, the ``openai``
client, HTTP + SSE) against the scripted fake OpenAI-compatible server."""

from __future__ import annotations

import asyncio
import json
import threading
from typing import Any

from fake_openai import Chunks, FakeOpenAI, HTTPError, text_chunks, tool_call_chunks
from pydantic import BaseModel
from scripted_model import assert_one_result_per_call

from pi_kernel.agent import Agent, AgentTool, AgentToolResult, BeforeToolCallResult
from pi_kernel.agent.tool_execution import FinalizedToolCall, create_tool_result_message
from pi_kernel.ai import Model, TextContent, ToolCall
from pi_kernel.kernel.persistence import save_conversation


class ReadParams(BaseModel):
    path: str
    """The file to read."""
    limit: int = 10


def read_tool(files: dict[str, str], calls: list[Any] | None = None) -> AgentTool:
    def execute(tool_call_id: str, params: ReadParams, signal: Any, on_update: Any) -> AgentToolResult:
        if calls is not None:
            calls.append(params)
        if params.path not in files:
            raise FileNotFoundError(f"No such file: {params.path}")
        return AgentToolResult([TextContent(files[params.path][: params.limit])])

    return AgentTool(name="read", description="Read a file", parameters=ReadParams, execute=execute)


def agent_for(server: FakeOpenAI, **options: Any) -> Agent:
    model = Model("fake-model", provider="llamacpp", base_url=server.base_url)
    return Agent(model, system_prompt="You are terse.", **options)


def tool_messages(body: dict[str, Any]) -> list[dict[str, Any]]:
    return [message for message in body["messages"] if message["role"] == "tool"]


async def test_a_tool_round_trip_over_http(fake_openai: FakeOpenAI) -> None:
    fake_openai.enqueue(
        tool_call_chunks([{"name": "read", "arguments": {"path": "a.txt"}, "id": "call_a"}]),
        text_chunks("It says hello."),
    )
    agent = agent_for(fake_openai, tools=[read_tool({"a.txt": "hello"})])
    types: list[str] = []
    agent.subscribe(lambda event: types.append(event.type))

    await agent.prompt("What is in a.txt?")

    assert [m.role for m in agent.state.messages] == ["user", "assistant", "tool_result", "assistant"]
    assert agent.state.messages[2].text == "hello" and agent.state.messages[-1].text == "It says hello."
    first, second = fake_openai.bodies
    assert first["messages"][0] == {"role": "system", "content": "You are terse."}
    assert [tool["function"]["name"] for tool in first["tools"]] == ["read"]
    assert first["tools"][0]["function"]["parameters"]["required"] == ["path"]
    assert tool_messages(second) == [{"role": "tool", "tool_call_id": "call_a", "content": "hello"}]
    assert types.count("turn_start") == 2 and types[-1] == "agent_end"
    assert "message_update" in types


async def test_a_validation_error_goes_back_to_the_model_which_fixes_the_call(fake_openai: FakeOpenAI) -> None:
    calls: list[Any] = []
    fake_openai.enqueue(
        tool_call_chunks([{"name": "read", "arguments": {"limit": "lots"}, "id": "bad"}]),
        tool_call_chunks([{"name": "read", "arguments": {"path": "a.txt", "limit": "3"}, "id": "good"}]),
        text_chunks("hel it is"),
    )
    agent = agent_for(fake_openai, tools=[read_tool({"a.txt": "hello"}, calls)])
    await agent.prompt("read it")

    [bad] = tool_messages(fake_openai.bodies[1])
    assert bad["tool_call_id"] == "bad"
    assert bad["content"].startswith('Validation failed for tool "read":')
    assert "path" in bad["content"] and '"limit": "lots"' in bad["content"]
    assert [(p.path, p.limit) for p in calls] == [("a.txt", 3)]
    assert tool_messages(fake_openai.bodies[2])[-1]["content"] == "hel"


async def test_parallel_calls_are_answered_in_source_order(fake_openai: FakeOpenAI) -> None:
    fake_openai.enqueue(
        tool_call_chunks(
            [
                {"name": "read", "arguments": {"path": "a.txt"}, "id": "c1"},
                {"name": "read", "arguments": {"path": "missing.txt"}, "id": "c2"},
                {"name": "write", "arguments": {}, "id": "c3"},
            ]
        ),
        text_chunks("done"),
    )
    agent = agent_for(fake_openai, tools=[read_tool({"a.txt": "A"})])
    await agent.prompt("read both")
    answers = tool_messages(fake_openai.bodies[1])
    assert [answer["tool_call_id"] for answer in answers] == ["c1", "c2", "c3"]
    assert answers[0]["content"] == "A"
    assert answers[1]["content"] == "No such file: missing.txt"
    assert answers[2]["content"].startswith("Tool write not found")
    assert_one_result_per_call(agent.state.messages)


async def test_a_call_cut_off_by_the_token_limit_is_not_run(fake_openai: FakeOpenAI) -> None:
    calls: list[Any] = []
    fake_openai.enqueue(
        tool_call_chunks([{"name": "read", "arguments": {"path": "a.txt"}, "id": "cut"}], finish_reason="length"),
        text_chunks("ok"),
    )
    agent = agent_for(fake_openai, tools=[read_tool({"a.txt": "A"}, calls)])
    await agent.prompt("read")
    assert calls == []
    [answer] = tool_messages(fake_openai.bodies[1])
    assert answer["content"].startswith('Tool call "read" was not executed: the response hit the output token limit')


async def test_an_approval_from_another_thread_with_edited_arguments(fake_openai: FakeOpenAI) -> None:
    calls: list[Any] = []
    fake_openai.enqueue(
        tool_call_chunks([{"name": "read", "arguments": {"path": "secret.txt"}, "id": "c1"}]),
        text_chunks("ok"),
    )

    async def approval(ctx: Any, signal: Any) -> BeforeToolCallResult:
        loop = asyncio.get_running_loop()
        decision: asyncio.Future[BeforeToolCallResult] = loop.create_future()

        def click() -> None:  # a widget button callback on a comm thread
            edited = BeforeToolCallResult(args={"path": "public.txt"})
            loop.call_soon_threadsafe(decision.set_result, edited)

        threading.Timer(0.05, click).start()
        return await decision

    agent = agent_for(fake_openai, tools=[read_tool({"public.txt": "public"}, calls)], before_tool_call=approval)
    await agent.prompt("read the secret")
    assert [p.path for p in calls] == ["public.txt"]
    assert tool_messages(fake_openai.bodies[1])[0]["content"] == "public"


async def test_abort_while_streaming_closes_the_request(fake_openai: FakeOpenAI) -> None:
    fake_openai.enqueue(Chunks(text_chunks("a long answer " * 20, parts=40), delay=0.05), text_chunks("never"))
    agent = agent_for(fake_openai)

    def listener(event: Any) -> None:
        if event.type == "message_update" and event.assistant_message_event.type == "text_delta":
            agent.abort()

    agent.subscribe(listener)
    await asyncio.wait_for(agent.prompt("talk"), 10)
    last = agent.state.messages[-1]
    assert last.stop_reason == "aborted" and last.text  # partial text kept
    assert agent.state.error_message
    assert await fake_openai.wait_for_async(lambda server: server.client_disconnects >= 1)
    assert len(fake_openai.chat_requests) == 1


async def test_a_provider_failure_ends_the_run_with_an_error_message(fake_openai: FakeOpenAI) -> None:
    fake_openai.enqueue(HTTPError(400, message="bad request: context too long"))
    agent = agent_for(fake_openai)
    await agent.prompt("hi")
    last = agent.state.messages[-1]
    assert last.role == "assistant" and last.stop_reason == "error"
    assert agent.state.error_message and "400" in agent.state.error_message
    assert not agent.state.is_streaming


async def test_a_cancelled_prompt_leaves_a_history_the_server_accepts(fake_openai: FakeOpenAI) -> None:
    # A kernel interrupt cancels the cell's task while one call has finished and one runs.
    fake_openai.enqueue(
        tool_call_chunks(
            [
                {"name": "read", "arguments": {"path": "a.txt"}, "id": "c1"},
                {"name": "wait", "arguments": {"path": "x"}, "id": "c2"},
            ]
        ),
        text_chunks("fine"),
    )
    read_done = asyncio.Event()

    async def wait_forever(tool_call_id: str, params: Any, signal: Any, on_update: Any) -> AgentToolResult:
        await asyncio.Event().wait()
        raise AssertionError("unreachable")

    wait = AgentTool(name="wait", description="Wait", parameters=ReadParams, execute=wait_forever)
    agent = agent_for(fake_openai, tools=[read_tool({"a.txt": "hello"}), wait])
    agent.subscribe(lambda event: read_done.set() if event.type == "tool_execution_end" else None)
    run = asyncio.create_task(agent.prompt("read and wait"))
    await read_done.wait()
    run.cancel()
    await asyncio.gather(run, return_exceptions=True)

    await agent.prompt("again")
    replay = fake_openai.bodies[1]["messages"]
    assert [message["role"] for message in replay] == ["system", "user", "assistant", "tool", "tool", "user"]
    assert [call["id"] for call in replay[2]["tool_calls"]] == ["c1", "c2"]
    assert [(m["tool_call_id"], m["content"]) for m in replay[3:5]] == [("c1", "hello"), ("c2", "Operation aborted")]
    assert agent.state.messages[-1].text == "fine" and not agent.state.is_streaming


async def test_a_key_in_a_prompt_or_a_provider_error_reaches_no_request_and_no_saved_session(
    fake_openai: FakeOpenAI, monkeypatch: Any, tmp_path: Any
) -> None:
    # Keys are masked as a message enters the transcript (``secrets.admit``): a key pasted into a prompt is
    # never sent to a model provider, and a provider's error quoting one is kept masked.
    key = "tok-4f9a8b7c6d5e4f3a2b1c0d9e"  # not ``sk-`` shaped: only the environment says it is a key
    monkeypatch.setenv("BILLING_SERVICE_TOKEN", key)
    fake_openai.enqueue(HTTPError(400, message=f"bad header X-Billing: {key}"), text_chunks("noted"))
    agent = agent_for(fake_openai)
    await agent.prompt(f"my billing token is {key}")
    assert agent.state.messages[-1].stop_reason == "error"
    await agent.prompt(f"and {key} again, please")

    assert len(fake_openai.chat_requests) == 2
    for request in fake_openai.chat_requests:
        assert key not in json.dumps(request.body) and key not in json.dumps(request.headers)
    assert "my billing token is ***" in json.dumps(fake_openai.bodies[1])
    monkeypatch.delenv("BILLING_SERVICE_TOKEN")  # the saved file's own mask no longer knows the key
    saved = save_conversation(tmp_path / "chat.jsonl", agent.state.messages).read_text()
    assert key not in saved and "***" in saved
    assert all(key not in repr(message) for message in agent.state.messages)


def test_a_tool_result_cut_across_a_key_leaves_no_piece_of_it(monkeypatch: Any) -> None:
    # The result enters the transcript (keys masked) before it is bounded: wherever the limit falls, nothing
    # of the key reaches the model.
    key = "tok-4f9a8b7c6d5e4f3a2b1c0d9e"
    monkeypatch.setenv("BILLING_SERVICE_TOKEN", key)
    for pad in range(0, len(key) + 2):
        result = AgentToolResult([TextContent("x" * (100 - pad) + key + " tail" * 50)])
        call = FinalizedToolCall(ToolCall("c1", "read", {}), result, False)
        sent = create_tool_result_message(call, max_chars=100 + 3).content[0].text
        assert "Tool result cut" in sent and not any(key[:size] in sent for size in range(4, len(key) + 1))
        assert result.content[0].text.endswith(key + " tail" * 50)  # the notebook keeps the whole result


class _NoArgs(BaseModel):
    x: int = 0


async def test_a_result_whose_blocks_are_not_content_blocks_still_answers_its_call() -> None:
    """A tool that returns ``AgentToolResult(content=["notes"])`` (or dicts, a tuple, a string) is a slip, not
    a reason to lose the call's result: each call still gets exactly one, and the run ends normally."""
    for content in (["plain str"], [{"type": "text", "text": "hi"}], ("tuple",), "abc"):
        with FakeOpenAI() as server:
            server.enqueue(tool_call_chunks([("t", {})]), text_chunks("done"))

            def execute(tool_call_id: str, params: Any, signal: Any, on_update: Any, content: Any = content) -> Any:
                return AgentToolResult(content=content)

            tool = AgentTool(name="t", description="t", parameters=_NoArgs, execute=execute)
            agent = Agent(Model("fake-model", provider="llamacpp", base_url=server.base_url), tools=[tool])
            await agent.prompt("go")
            roles = [(m.role, getattr(m, "stop_reason", None)) for m in agent.state.messages]
            assert roles == [("user", None), ("assistant", "tool_use"), ("tool_result", None), ("assistant", "stop")]
            assert_one_result_per_call(server.last_body["messages"])


async def test_a_key_in_a_tool_schema_or_the_system_prompt_is_not_sent(monkeypatch: Any) -> None:
    """A ``@tool`` parameter that defaults to ``os.environ["OPENAI_API_KEY"]`` puts the key in the tool's JSON
    schema, and a system prompt may quote one: neither enters the transcript, so both are masked as the request
    is made."""
    key = "sk-test-SCHEMA-0123456789abcdef"
    monkeypatch.setenv("OPENAI_API_KEY", key)

    class Ask(BaseModel):
        question: str = "q"
        api_key: str = key

    with FakeOpenAI() as server:
        server.enqueue(text_chunks("ok"))
        tool = AgentTool(name="ask", description=f"asks with {key}", parameters=Ask, execute=lambda *a: None)
        model = Model("fake-model", provider="llamacpp", base_url=server.base_url)
        agent = Agent(model, tools=[tool], system_prompt=f"The key is {key}.")
        await agent.prompt("go")
        sent = json.dumps(server.last_body)
    assert '"tools"' in sent and key not in sent and key[-12:] not in sent and "***" in sent
