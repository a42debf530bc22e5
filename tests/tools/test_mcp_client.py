"""MCP client against real servers: the PyPI reference ``mcp-server-time`` and the FastMCP server
in ``tests/mcp_demo_server.py`` over stdio and streamable HTTP (no mocks: real processes, the SDK)."""

from __future__ import annotations

import asyncio
import sys
import time
from collections.abc import Iterator

import pytest
from mcp_helpers import alive, demo, http_demo_server

from pi_kernel.agent import AbortController
from pi_kernel.ai import ImageContent, TextContent
from pi_kernel.tools import ToolRegistry
from pi_kernel.tools.mcp import McpManager, McpServerConfig, McpToolError, parse_servers, server_config, tool_name
from pi_kernel.tools.mcp.server import McpServerError


@pytest.fixture
def loop() -> Iterator[asyncio.AbstractEventLoop]:
    """The loop the servers live on, as a kernel's own loop is: they stay on it from test step to step."""
    made = asyncio.new_event_loop()
    yield made
    made.close()


@pytest.fixture
def manager(loop: asyncio.AbstractEventLoop) -> Iterator[McpManager]:
    made = McpManager(registry=ToolRegistry())
    yield made
    made.close()


def add(loop: asyncio.AbstractEventLoop, manager: McpManager, config: McpServerConfig) -> None:
    """``%pi mcp add``: record the server and start it on ``loop``."""
    manager.add(config)
    loop.run_until_complete(manager.start_server(config.name))


async def run(manager: McpManager, name: str, args: dict[str, object]) -> object:
    assert manager.registry is not None
    definition = manager.registry.get(name)
    assert definition is not None, f"{name} not in {manager.registry.names()}"
    return await definition.execute("call-1", args, None, None, None)


def test_time_server_from_pypi_gives_its_tools_and_answers(
    loop: asyncio.AbstractEventLoop, manager: McpManager
) -> None:
    add(
        loop,
        manager,
        server_config(
            "time", {"command": sys.executable, "args": ["-m", "mcp_server_time", "--local-timezone", "UTC"]}
        ),
    )
    assert manager.registry is not None
    assert {"time__get_current_time", "time__convert_time"} <= set(manager.registry.names())
    definition = manager.registry.get("time__get_current_time")
    assert definition is not None and definition.parameters["required"] == ["timezone"]
    assert definition.approval == "ask" and definition.read_only is False
    result = loop.run_until_complete(run(manager, "time__get_current_time", {"timezone": "UTC"}))
    text = result.content[0].text  # type: ignore[attr-defined]
    assert '"timezone": "UTC"' in text and "datetime" in text


def test_demo_stdio_results_map_to_content(loop: asyncio.AbstractEventLoop, manager: McpManager) -> None:
    add(loop, manager, server_config("demo", demo()))
    echo = loop.run_until_complete(run(manager, "demo__echo", {"text": "hi"}))
    assert [block.text for block in echo.content] == ["echo: hi"]  # type: ignore[attr-defined]
    added = loop.run_until_complete(run(manager, "demo__add", {"a": 2, "b": 3}))
    assert '"sum": 5' in added.content[0].text  # type: ignore[attr-defined]
    assert added.details["structured_content"] == {"sum": 5}  # type: ignore[attr-defined]
    pixel = loop.run_until_complete(run(manager, "demo__pixel", {}))
    assert isinstance(pixel.content[0], ImageContent) and pixel.content[0].mime_type == "image/png"  # type: ignore[attr-defined]
    with pytest.raises(McpToolError, match="nope"):
        loop.run_until_complete(run(manager, "demo__fail", {"message": "nope"}))


def test_keys_of_the_kernel_environment_do_not_reach_a_server(
    loop: asyncio.AbstractEventLoop, manager: McpManager, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-SECRET-not-for-mcp")
    add(loop, manager, server_config("demo", demo(env={"DEMO_SETTING": "given"})))
    assert (
        loop.run_until_complete(run(manager, "demo__getenv", {"name": "OPENAI_API_KEY"})).content[0].text == "(unset)"
    )  # type: ignore[attr-defined]
    assert loop.run_until_complete(run(manager, "demo__getenv", {"name": "DEMO_SETTING"})).content[0].text == "given"  # type: ignore[attr-defined]


def test_read_only_hint_counts_only_when_trusted(loop: asyncio.AbstractEventLoop, manager: McpManager) -> None:
    add(loop, manager, server_config("plain", demo()))
    add(loop, manager, server_config("trusted", demo(trustReadOnlyHint=True)))
    registry = manager.registry
    assert registry is not None
    untrusted, trusted, other = (
        registry.get("plain__peek"),
        registry.get("trusted__peek"),
        registry.get("trusted__echo"),
    )
    assert untrusted is not None and (untrusted.approval, untrusted.read_only) == ("ask", False)
    assert trusted is not None and (trusted.approval, trusted.read_only) == ("auto", True)
    assert other is not None and (other.approval, other.read_only) == ("ask", False)


@pytest.fixture
def http_server() -> Iterator[str]:
    with http_demo_server() as url:
        yield url


def test_streamable_http_server(loop: asyncio.AbstractEventLoop, manager: McpManager, http_server: str) -> None:
    add(loop, manager, server_config("web", {"url": http_server}))
    assert manager.servers["web"].state == "running"
    echo = loop.run_until_complete(run(manager, "web__echo", {"text": "over http"}))
    assert echo.content[0].text == "echo: over http"  # type: ignore[attr-defined]


def test_names_are_cut_to_64_characters_and_stay_distinct() -> None:
    assert tool_name("time", "get_current_time") == "time__get_current_time"
    assert tool_name("my-srv", "do.thing") == "my-srv__do_thing"
    long_a, long_b = tool_name("server", "x" * 80 + "a"), tool_name("server", "x" * 80 + "b")
    assert len(long_a) == len(long_b) == 64 and long_a != long_b and long_a.startswith("server__xxx")


def test_config_shape_and_bad_entries() -> None:
    problems: list[str] = []
    servers = parse_servers(
        {
            "time": {"command": "uvx", "args": ["mcp-server-time"], "env": {"TZ": "UTC"}, "type": "stdio"},
            "web": {"url": "http://127.0.0.1:9/mcp", "headers": {"X": "1"}, "timeout": 5000},
            "both": {"command": "x", "url": "http://h/"},
            "bad name": {"command": "x"},
            "a__b": {"command": "x"},
        },
        problems,
    )
    assert list(servers) == ["time", "web"]
    assert servers["time"].transport == "stdio" and servers["time"].env == {"TZ": "UTC"}
    assert servers["web"].transport == "http" and servers["web"].call_timeout == 5.0
    assert len(problems) == 3 and all("left out" in problem for problem in problems)


def test_start_failures_leave_notices_and_the_other_servers_work(
    loop: asyncio.AbstractEventLoop, manager: McpManager
) -> None:
    manager.servers.clear()
    for name, entry in {
        "missing": {"command": "no-such-mcp-command-xyz"},
        "hang": demo("hang", startTimeout=1500),
        "demo": demo(),
    }.items():
        manager.add(server_config(name, entry), start=False)
    loop.run_until_complete(manager.ensure_started())
    states = {name: server.state for name, server in manager.servers.items()}
    assert states == {"missing": "failed", "hang": "failed", "demo": "running"}
    notices = manager.take_notices()
    assert any('"missing"' in notice and "not found" in notice for notice in notices)
    assert any('"hang"' in notice and "did not answer within 1.5 s" in notice for notice in notices)
    assert "hang: failed" in manager.describe() and "demo__echo" in manager.describe()
    assert loop.run_until_complete(run(manager, "demo__echo", {"text": "ok"})).content[0].text == "echo: ok"  # type: ignore[attr-defined]


def test_crash_mid_call_is_an_error_then_the_next_call_restarts(
    loop: asyncio.AbstractEventLoop, manager: McpManager
) -> None:
    add(loop, manager, server_config("demo", demo()))
    with pytest.raises(McpServerError, match=r'(?s)"demo" stopped during the call.*code 3.*crashing on purpose'):
        loop.run_until_complete(run(manager, "demo__crash", {}))
    assert manager.servers["demo"].state == "crashed"
    assert any("stopped during the call" in notice for notice in manager.take_notices())
    assert loop.run_until_complete(run(manager, "demo__echo", {"text": "back"})).content[0].text == "echo: back"  # type: ignore[attr-defined]


def test_a_call_that_hangs_times_out(loop: asyncio.AbstractEventLoop, manager: McpManager) -> None:
    add(loop, manager, server_config("demo", demo(timeout=1000)))
    with pytest.raises(McpServerError, match="did not answer the call of sleep within 1 s"):
        loop.run_until_complete(run(manager, "demo__sleep", {"seconds": 30}))
    assert manager.servers["demo"].state == "running"


def test_abort_cancels_a_call(loop: asyncio.AbstractEventLoop, manager: McpManager) -> None:
    add(loop, manager, server_config("demo", demo()))
    assert manager.registry is not None
    definition = manager.registry.get("demo__sleep")
    assert definition is not None

    async def call_then_abort() -> float:
        controller = AbortController()
        asyncio.get_running_loop().call_later(0.3, controller.abort)
        started = time.monotonic()
        with pytest.raises(McpServerError, match="was cancelled"):
            await definition.execute("c", {"seconds": 30}, controller.signal, None, None)
        return time.monotonic() - started

    assert loop.run_until_complete(call_then_abort()) < 10
    assert loop.run_until_complete(run(manager, "demo__echo", {"text": "still"})).content[0].text == "echo: still"  # type: ignore[attr-defined]


def test_close_leaves_no_process_behind(loop: asyncio.AbstractEventLoop, manager: McpManager) -> None:
    add(loop, manager, server_config("demo", demo()))
    server_pid = manager.servers["demo"].pid
    child = int(loop.run_until_complete(run(manager, "demo__spawn", {})).content[0].text)  # type: ignore[attr-defined]
    assert server_pid is not None and alive(server_pid) and alive(child)
    manager.close()
    deadline = time.monotonic() + 10
    while (alive(server_pid) or alive(child)) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not alive(server_pid) and not alive(child)


def test_remove_stops_the_server_and_forgets_its_tools(loop: asyncio.AbstractEventLoop, manager: McpManager) -> None:
    add(loop, manager, server_config("demo", demo()))
    pid = manager.servers["demo"].pid
    loop.run_until_complete(manager.remove("demo"))
    assert manager.registry is not None and not any(n.startswith("demo__") for n in manager.registry.names())
    deadline = time.monotonic() + 10
    while pid is not None and alive(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert pid is not None and not alive(pid)


def test_text_block_kinds() -> None:
    import mcp_types

    from pi_kernel.tools.mcp import to_result

    result = mcp_types.CallToolResult(
        content=[
            mcp_types.EmbeddedResource(
                type="resource", resource=mcp_types.TextResourceContents(uri="file:///a.txt", text="inside")
            ),
            mcp_types.ResourceLink(type="resource_link", name="b", uri="file:///b.txt"),
            mcp_types.AudioContent(type="audio", data="AAAA", mime_type="audio/wav"),
        ],
        structured_content=None,
    )
    texts = [block.text for block in to_result("s", "t", result).content if isinstance(block, TextContent)]
    assert texts[0] == "[resource file:///a.txt]\ninside"
    assert texts[1] == "[resource b at file:///b.txt]" and "audio" in texts[2]
    empty = mcp_types.CallToolResult(content=[], structured_content={"n": 1})
    assert to_result("s", "t", empty).content[0].text == '{\n  "n": 1\n}'  # type: ignore[attr-defined]


def test_per_server_and_per_tool_policy_patterns() -> None:
    from pi_kernel.tools.approval import ApprovalPolicy, deny_reason

    policy = ApprovalPolicy()
    policy.apply_spec(["demo__*=auto", "demo__crash=deny", "time__*=deny"])
    assert policy.decide(None, {}, name="demo__echo") == "run"
    assert policy.decide(None, {}, name="demo__crash") == "deny"
    assert policy.decide(None, {}, name="time__get_current_time") == "deny"
    assert policy.decide(None, {}, name="other__echo") == "ask"
    assert "disabled by the approval policy" in deny_reason(policy.state(), "time__convert_time")


def test_servers_answer_only_on_the_loop_they_live_on(loop: asyncio.AbstractEventLoop, manager: McpManager) -> None:
    """The servers live on the loop that started them (the kernel's): a call from another loop (a kernel
    subshell's turn) is a clear error, a start from there is left for a notice, and the servers keep
    answering on their own loop."""
    add(loop, manager, server_config("demo", demo()))
    manager.add(server_config("later", demo()), start=False)
    with pytest.raises(McpServerError, match="run on another event loop"):
        asyncio.run(run(manager, "demo__echo", {"text": "elsewhere"}))
    asyncio.run(manager.ensure_started())
    assert manager.servers["later"].state == "not started"
    assert any("another event loop" in notice for notice in manager.take_notices())
    echo = loop.run_until_complete(run(manager, "demo__echo", {"text": "home"}))
    assert echo.content[0].text == "echo: home"  # type: ignore[attr-defined]
