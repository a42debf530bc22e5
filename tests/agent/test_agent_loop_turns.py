"""Between turns: steering, follow-ups, should_stop_after_turn, transform_context,
convert_to_llm, prepare_next_turn, max_turns."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from scripted_model import (
    ScriptedModel,
    echo_tool,
    event_types,
    make_tool,
    run_loop,
    text_message,
    tool_call,
    tool_call_message,
    user,
)

from pi_kernel.agent import AgentLoopConfig, agent_loop_continue
from pi_kernel.agent.loop import DefaultLlmMessages
from pi_kernel.ai import Context


@dataclass
class Notification:
    """An app-only message kind: it lives in the transcript, never reaches the model."""

    text: str
    role: str = "notification"


def texts(messages: list[Any]) -> list[str]:
    out = []
    for message in messages:
        if message.role == "user":
            out.append(f"user:{message.content}")
        elif message.role == "tool_result":
            out.append(f"tool:{message.tool_call_id}")
        else:
            out.append(message.role)
    return out


async def test_steering_is_injected_after_the_whole_tool_batch() -> None:
    executed: list[str] = []
    delivered = False

    def steering() -> list[Any]:
        nonlocal delivered
        if executed and not delivered:
            delivered = True
            return [user("interrupt")]
        return []

    model = ScriptedModel(
        [
            tool_call_message(tool_call("echo", {"value": "a"}, id="t1"), tool_call("echo", {"value": "b"}, id="t2")),
            text_message("done"),
        ]
    )
    events, messages = await run_loop(
        model,
        [user("start")],
        tools=[echo_tool(executed=executed)],
        tool_execution="sequential",
        get_steering_messages=steering,
    )
    assert executed == ["a", "b"]  # steering does not skip calls of the batch
    starts = [texts([event.message])[0] for event in events if event.type == "message_start"]
    assert starts == ["user:start", "assistant", "tool:t1", "tool:t2", "user:interrupt", "assistant"]
    assert texts(model.requests[1].messages) == ["user:start", "assistant", "tool:t1", "tool:t2", "user:interrupt"]
    assert texts(messages) == ["user:start", "assistant", "tool:t1", "tool:t2", "user:interrupt", "assistant"]


async def test_steering_queued_before_the_run_goes_with_the_first_request() -> None:
    queue = [[user("early")], []]
    model = ScriptedModel([text_message("ok")])
    events, messages = await run_loop(
        model, [user("prompt")], get_steering_messages=lambda: queue.pop(0) if queue else []
    )
    assert texts(model.requests[0].messages) == ["user:prompt", "user:early"]
    assert event_types(events, updates=False)[:6] == [
        "agent_start",
        "turn_start",
        "message_start",
        "message_end",
        "message_start",
        "message_end",
    ]
    assert texts(messages) == ["user:prompt", "user:early", "assistant"]


async def test_steering_after_a_plain_answer_starts_another_turn() -> None:
    queue = [[], [user("and also")], []]
    model = ScriptedModel([text_message("first"), text_message("second")])
    events, messages = await run_loop(model, [user("p")], get_steering_messages=lambda: queue.pop(0) if queue else [])
    assert texts(messages) == ["user:p", "assistant", "user:and also", "assistant"]
    assert event_types(events).count("turn_start") == 2


async def test_follow_ups_run_only_when_the_agent_would_stop() -> None:
    follow = [[user("follow")], []]
    polls: list[str] = []

    def follow_ups() -> list[Any]:
        polls.append("follow")
        return follow.pop(0) if follow else []

    model = ScriptedModel(
        [tool_call_message(tool_call("echo", {"value": "a"}, id="t1")), text_message("one"), text_message("two")]
    )
    _, messages = await run_loop(model, [user("go")], tools=[echo_tool()], get_follow_up_messages=follow_ups)
    assert texts(messages) == ["user:go", "assistant", "tool:t1", "assistant", "user:follow", "assistant"]
    assert polls == ["follow", "follow"]  # once after "one", once after "two"


async def test_should_stop_after_turn_ends_the_run_after_that_turn() -> None:
    steering_polls = follow_up_polls = 0
    seen: list[tuple[list[str], list[str]]] = []

    def steering() -> list[Any]:
        nonlocal steering_polls
        steering_polls += 1
        return []

    def follow_ups() -> list[Any]:
        nonlocal follow_up_polls
        follow_up_polls += 1
        return [user("should stay queued")]

    async def stop(turn_end: Any) -> bool:
        seen.append(([result.tool_call_id for result in turn_end.tool_results], [turn_end.message.role]))
        return True

    model = ScriptedModel(
        [tool_call_message(tool_call("echo", {"value": "hello"}, id="tool-1")), text_message("never")]
    )
    events, messages = await run_loop(
        model,
        [user("echo")],
        tools=[echo_tool()],
        get_steering_messages=steering,
        get_follow_up_messages=follow_ups,
        should_stop_after_turn=stop,
    )
    assert model.call_count == 1 and steering_polls == 1 and follow_up_polls == 0
    assert seen == [(["tool-1"], ["assistant"])]
    assert texts(messages) == ["user:echo", "assistant", "tool:tool-1"]
    assert event_types(events, updates=False) == [
        "agent_start",
        "turn_start",
        "message_start",
        "message_end",
        "message_start",
        "message_end",
        "tool_execution_start",
        "tool_execution_end",
        "message_start",
        "message_end",
        "turn_end",
        "agent_end",
    ]


async def test_transform_context_runs_before_convert_to_llm() -> None:
    history = [user("old 1"), text_message("old answer 1"), user("old 2"), text_message("old answer 2")]
    calls: list[tuple[str, int]] = []

    async def transform(messages: list[Any], signal: Any) -> list[Any]:
        calls.append(("transform", len(messages)))
        return messages[-2:]

    def convert(messages: list[Any]) -> list[Any]:
        calls.append(("convert", len(messages)))
        return list(messages)

    model = ScriptedModel([text_message("ok")])
    await run_loop(model, [user("new")], history=history, transform_context=transform, convert_to_llm=convert)
    assert calls == [("transform", 5), ("convert", 2)]
    assert texts(model.requests[0].messages) == ["assistant", "user:new"]


async def test_convert_to_llm_turns_app_messages_into_llm_messages() -> None:
    def convert(messages: list[Any]) -> list[Any]:
        return [user(f"[note] {m.text}") if m.role == "notification" else m for m in messages]

    model = ScriptedModel([text_message("ok")])
    await run_loop(model, [user("hi")], history=[Notification("build passed")], convert_to_llm=convert)
    assert texts(model.requests[0].messages) == ["user:[note] build passed", "user:hi"]


async def test_default_conversion_drops_app_messages() -> None:
    model = ScriptedModel([text_message("ok")])
    await run_loop(model, [user("hi")], history=[Notification("internal"), user("before")])
    assert texts(model.requests[0].messages) == ["user:before", "user:hi"]


def test_default_conversion_checks_only_new_messages_and_hands_over_the_list() -> None:
    convert = DefaultLlmMessages()
    messages: list[Any] = [user("a"), text_message("b")]
    assert convert(messages) is messages
    messages.append(user("c"))
    assert convert(messages) is messages
    messages.append(Notification("app only"))
    filtered = convert(messages)
    assert filtered is not messages and texts(filtered) == ["user:a", "assistant", "user:c"]
    other: list[Any] = [Notification("x"), user("y")]
    assert texts(convert(other)) == ["user:y"]  # a different list is checked from the start
    shorter: list[Any] = [user("z")]
    assert convert(shorter) is shorter


async def test_an_app_message_a_transform_inserts_in_place_never_reaches_the_model() -> None:
    # The transform edits the loop's own list and returns it: the same list,
    # longer, with the new message before the part the filter had checked.
    requests = 0

    def transform(messages: list[Any], signal: Any) -> list[Any]:
        nonlocal requests
        requests += 1
        if requests == 2:
            messages.insert(0, Notification("context was pruned"))
        return messages

    model = ScriptedModel([tool_call_message(tool_call("echo", {"value": 1}, id="c1")), text_message("done")])
    await run_loop(model, [user("go")], tools=[echo_tool()], transform_context=transform)
    assert requests == 2
    assert texts(model.requests[1].messages) == ["user:go", "assistant", "tool:c1"]


def test_the_non_incremental_default_conversion_rechecks_the_whole_list() -> None:
    convert = DefaultLlmMessages(incremental=False)
    messages: list[Any] = [user("a"), text_message("b")]
    assert convert(messages) is messages
    messages.insert(0, Notification("app only"))
    assert texts(convert(messages)) == ["user:a", "assistant"]


async def test_prepare_next_turn_runs_before_every_request_and_can_change_tools() -> None:
    read = make_tool("read")
    write = make_tool("write")
    prepared: list[list[str]] = []

    def prepare(context: Context) -> None:
        prepared.append([tool.name for tool in context.tools or ()])
        if any(getattr(message, "role", None) == "tool_result" for message in context.messages):
            context.tools = [read, write]
            context.system_prompt = "Available tools:\n- read\n- write"

    model = ScriptedModel(
        [
            tool_call_message(tool_call("read", {"value": "a"})),
            tool_call_message(tool_call("write", {"value": "b"})),
            text_message("done"),
        ]
    )
    _, messages = await run_loop(
        model, [user("go")], tools=[read], system_prompt="Available tools:\n- read", prepare_next_turn=prepare
    )
    assert prepared == [["read"], ["read"], ["read", "write"]]
    assert [request.tool_names for request in model.requests] == [["read"], ["read", "write"], ["read", "write"]]
    assert model.requests[0].system_prompt == "Available tools:\n- read"
    assert model.requests[1].system_prompt == "Available tools:\n- read\n- write"
    assert not messages[4].is_error and messages[4].text == "echoed: b"  # "write" was found in turn 2


async def test_prepare_next_turn_may_return_a_new_context() -> None:
    def prepare(context: Context) -> Context:
        return Context("replaced", context.messages, context.tools)

    model = ScriptedModel([text_message("ok")])
    await run_loop(model, [user("go")], system_prompt="original", prepare_next_turn=prepare)
    assert model.requests[0].system_prompt == "replaced"


async def test_max_turns_stops_after_that_many_requests_and_continue_resumes() -> None:
    model = ScriptedModel(
        [
            tool_call_message(tool_call("echo", {"value": 1}, id="c1")),
            tool_call_message(tool_call("echo", {"value": 2}, id="c2")),
            tool_call_message(tool_call("echo", {"value": 3}, id="c3")),
            text_message("finished"),
        ]
    )
    tools: list[Any] = [echo_tool()]
    events, messages = await run_loop(model, [user("go")], tools=tools, max_turns=2)
    assert model.call_count == 2
    # The last assistant message's tool calls have run: the transcript ends with their results.
    assert texts(messages) == ["user:go", "assistant", "tool:c1", "assistant", "tool:c2"]
    assert event_types(events)[-2:] == ["turn_end", "agent_end"]

    stream = agent_loop_continue(Context("", messages, tools), AgentLoopConfig(model.model, model))
    more: list[Any] = await stream.result()
    assert texts(more) == ["assistant", "tool:c3", "assistant"]
    assert more[-1].text == "finished"


async def test_continue_accepts_an_app_message_as_the_last_message() -> None:
    # pi: "should allow custom message types as last message (caller responsibility)"
    def convert(messages: list[Any]) -> list[Any]:
        return [user(f"[note] {m.text}") if m.role == "notification" else m for m in messages]

    model = ScriptedModel([text_message("noted")])
    context = Context("", [user("hi"), text_message("hello"), Notification("build passed")], [])
    messages = await agent_loop_continue(context, AgentLoopConfig(model.model, model, convert_to_llm=convert)).result()
    assert texts(model.requests[0].messages)[-1] == "user:[note] build passed"
    assert [message.role for message in messages] == ["assistant"]
