"""``approval.decide``: each rule of the ordered table, its precedence, and the declared origin."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from builtin_helpers import call_tool, make_ctx, text_of

from pi_kernel.tools import tool
from pi_kernel.tools.approval import RULES, OriginKind, PolicyState, decide
from pi_kernel.tools.builtin import builtin_tools
from pi_kernel.tools.definition import ToolDefinition

BUILTINS = {definition.name: definition for definition in builtin_tools()}


def _tool(name: str, approval: Any = "ask", read_only: bool | None = None, origin: OriginKind | None = None) -> Any:
    definition = ToolDefinition(
        name=name,
        description="d",
        parameters={"type": "object", "properties": {}},
        execute=lambda *a: None,
        approval=approval,
        read_only=read_only,
    )
    if origin is not None:
        definition.origin = origin
    return definition


def _state(mode: str = "ask", cell: str | None = None, allowed: tuple[str, ...] = (), **overrides: str) -> PolicyState:
    return PolicyState(mode, overrides, frozenset(allowed), cell)


def test_the_table_is_ordered_deny_rules_first_and_the_tools_own_rule_last() -> None:
    names = [rule.name for rule in RULES]
    assert names[0] == "cell-deny" and names[-1] == "own-rule"
    assert names.index("read-only") < names.index("always-allowed")
    assert names.index("tool-deny") < names.index("secret-read") < names.index("tool-auto")
    assert names.index("secret-read") < names.index("auto-mode") < names.index("always-allowed")
    assert names.index("tool-auto") < names.index("always-allowed") < names.index("tool-ask")


@pytest.mark.parametrize(
    ("state", "approval", "verdict", "rule"),
    [
        (_state("auto", cell="deny", allowed=("t",), t="auto"), "auto", "deny", "cell-deny"),
        (_state("auto", allowed=("t",), t="deny"), "auto", "deny", "tool-deny"),
        (_state("auto", **{"t*": "deny", "*": "auto"}), "auto", "deny", "tool-deny"),  # the strictest pattern
        (_state("read-only", allowed=("t",)), "auto", "deny", "read-only"),
        (_state("ask"), "deny", "deny", "own-deny"),
        (_state("auto"), "deny", "run", "auto-mode"),  # auto runs everything
        (_state("deny"), "ask", "deny", "deny-mode"),
        (_state("deny"), "auto", "run", "own-rule"),
        (_state("ask", t="auto"), "ask", "run", "tool-auto"),
        (_state("ask", cell="ask", t="auto"), "ask", "ask", "own-rule"),  # a cell's ask drops a per-tool auto
        (_state("ask", allowed=("t",)), "ask", "run", "always-allowed"),
        (_state("deny", allowed=("t",)), "ask", "deny", "deny-mode"),  # "always allow" never lifts a deny
        (_state("ask", t="ask"), "auto", "ask", "tool-ask"),
        (_state("read-only", t="ask"), "auto", "ask", "tool-ask"),
        (_state("read-only", cell="read-only", t="ask"), "auto", "deny", "read-only"),
        (_state("read-only", allowed=("t",), t="ask"), "ask", "ask", "tool-ask"),  # mode refuses the allow
        (_state("ask"), "ask", "ask", "own-rule"),
        (_state("ask"), lambda args: "auto", "run", "own-rule"),
    ],
)
def test_each_rule_decides_in_its_place(state: PolicyState, approval: Any, verdict: str, rule: str) -> None:
    decision = decide(_tool("t", approval), None, {}, state)
    assert (decision.verdict, decision.rule) == (verdict, rule)
    assert (decision.reason is not None) == (verdict == "deny")


@pytest.mark.parametrize(
    "state",
    [_state("auto"), _state("ask", allowed=("read",)), _state("ask", read="auto"), _state("read-only")],
)
def test_a_secret_read_asks_in_every_mode_also_after_auto_and_always_allow(state: PolicyState) -> None:
    decision = decide(BUILTINS["read"], None, {"path": "/proc/self/environ"}, state)
    assert (decision.verdict, decision.rule) == ("ask", "secret-read")
    assert decision.secret is not None and "environment" in decision.secret


def test_a_secret_read_is_refused_in_deny_mode_with_the_reason() -> None:
    decision = decide(BUILTINS["bash"], None, {"command": "cat .env"}, _state("deny", bash="auto"))
    assert (decision.verdict, decision.rule) == ("deny", "secret-read")
    assert decision.reason is not None and "denies such calls" in decision.reason


def test_builtins_declare_their_origin_and_the_arguments_that_may_name_secrets() -> None:
    assert {definition.origin for definition in BUILTINS.values()} == {"builtin"}
    assert BUILTINS["bash"].secret_arguments == {"command": "command"}
    assert BUILTINS["python"].secret_arguments == {"code": "code"}
    assert BUILTINS["inspect"].secret_arguments == {"name": "attribute"}
    assert BUILTINS["read"].secret_arguments == {"path": "path"}


def test_a_builtin_is_judged_by_its_declared_arguments_only() -> None:
    auto = _state("auto")
    assert decide(BUILTINS["bash"], None, {"command": "env | grep KEY"}, auto).rule == "secret-read"
    assert decide(BUILTINS["inspect"], None, {"name": "os.environ"}, auto).rule == "secret-read"
    assert decide(BUILTINS["inspect"], None, {"name": "df.columns"}, auto).verdict == "run"


def test_the_origin_is_declared_not_guessed_from_the_code_module() -> None:
    """A user's tool called ``read`` whose code lives in the built-in package is still a user tool; a user
    tool declaring ``secret_arguments`` is still checked on every string."""
    impostor = _tool("read", "auto", origin=None)
    impostor.execute = BUILTINS["read"].execute  # the module of its code says "built-in": not read
    assert decide(impostor, None, {}, _state("read-only")).verdict == "deny"
    narrowed = _tool("fetch", "auto")
    narrowed.secret_arguments = {"url": "path"}  # only honoured for built-ins
    assert decide(narrowed, None, {"url": "x", "other": "~/.aws/credentials"}, _state("auto")).rule == "secret-read"


def test_tool_decorator_declares_a_user_origin() -> None:
    @tool(registry=False)
    def lookup(city: str) -> str:
        """Look up."""
        return city

    assert lookup.origin == "user"


def test_an_mcp_tool_reading_the_environment_in_a_command_asks_a_user_tool_does_not() -> None:
    args = {"command": "printenv"}
    assert decide(_tool("srv__run", "auto", origin="mcp"), None, args, _state("auto")).verdict == "ask"
    assert decide(_tool("run", "auto"), None, args, _state("auto")).verdict == "run"


def test_decide_is_pure_the_state_is_not_changed() -> None:
    state = _state("ask", allowed=("t",), t="ask")
    before = (state.mode, dict(state.overrides or {}), state.always_allowed, state.cell_mode)
    decide(_tool("t"), None, {}, state)
    assert (state.mode, dict(state.overrides or {}), state.always_allowed, state.cell_mode) == before


@pytest.mark.parametrize(("trust", "verdicts"), [(True, ("run", "run")), (False, ("ask", "deny"))])
def test_an_mcp_read_only_hint_counts_only_for_a_trusted_server(trust: bool, verdicts: tuple[str, str]) -> None:
    import mcp_types

    from pi_kernel.tools.mcp.adapt import tool_definition
    from pi_kernel.tools.mcp.server_config import McpServerConfig

    async def never(*_: Any) -> Any:
        raise AssertionError("not called")

    hinted = mcp_types.Tool(
        name="look", inputSchema={"type": "object"}, annotations=mcp_types.ToolAnnotations(readOnlyHint=True)
    )
    definition = tool_definition(McpServerConfig(name="docs", command="x", trust_read_only_hint=trust), hinted, never)
    assert (definition.origin, definition.mcp_server) == ("mcp", "docs")
    assert (
        decide(definition, None, {}, _state("ask")).verdict,
        decide(definition, None, {}, _state("read-only")).verdict,
    ) == verdicts


def test_run_cells_is_judged_by_the_code_of_the_cells_it_names() -> None:
    """``run_cells`` declares its ``cells`` argument; ``decide`` reads the code the host found for those refs."""
    from pi_kernel.tools.builtin.run_cells import RunCellsParams, create_run_cells_tool

    run_cells = create_run_cells_tool()
    args = RunCellsParams(cells=["#2", "#3"])
    leak = {"#2": "x = 1", "#3": "print(list(os.environ['OPENAI_API_KEY'].encode()))"}
    asked = decide(run_cells, None, args, _state("auto"), leak)
    assert (asked.verdict, asked.rule) == ("ask", "secret-read") and asked.secret is not None
    assert decide(run_cells, None, args, _state("auto"), {"#2": "x = 1", "#3": "y = 2"}).verdict == "run"
    assert decide(run_cells, None, args, _state("auto")).verdict == "run"  # no notebook: no code to judge
    assert decide(run_cells, None, args, _state("ask", run_cells="auto"), leak).verdict == "ask"
    assert decide(run_cells, None, args, _state("deny", run_cells="auto"), leak).verdict == "deny"


async def test_a_relative_path_is_judged_in_the_folder_the_tool_reads_it_in(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The turn's tools resolve paths in their ``ToolContext.cwd``; a ``python`` call may ``os.chdir`` the
    process mid-turn. ``notes.txt`` is a link to ``.env`` in the turn's folder and an ordinary file in the
    process's: the call is judged where the read tool reads it, not where the process happens to be."""
    turn_folder, elsewhere = tmp_path / "project", tmp_path / "elsewhere"
    turn_folder.mkdir()
    elsewhere.mkdir()
    (turn_folder / ".env").write_text("# the project's keys\n")
    (turn_folder / "notes.txt").symlink_to(".env")
    (elsewhere / "notes.txt").write_text("just notes\n")
    monkeypatch.chdir(elsewhere)  # the process's folder, as a python call's os.chdir left it
    read, ctx = BUILTINS["read"], make_ctx(turn_folder)
    args = read.parameters.model_validate({"path": "notes.txt"})

    asked = decide(read, None, args, _state("auto"), cwd=ctx.cwd)
    assert (asked.verdict, asked.rule) == ("ask", "secret-read") and ".env" in (asked.secret or "")
    assert "the project's keys" in text_of(await call_tool(read, {"path": "notes.txt"}, ctx))  # what it reads
    assert decide(read, None, args, _state("auto"), cwd=elsewhere).verdict == "run"  # there it is only notes


async def test_a_bash_command_is_judged_in_the_folder_it_runs_in(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``bash`` runs in the turn's ``ToolContext.cwd``, not the process's folder of the moment: ``cat
    ./notes.txt``, where ``notes.txt`` is a link to ``.env`` only in the turn's folder, asks."""
    turn_folder, elsewhere = tmp_path / "project", tmp_path / "elsewhere"
    turn_folder.mkdir()
    elsewhere.mkdir()
    (turn_folder / ".env").write_text("# the project's keys\n")
    (turn_folder / "notes.txt").symlink_to(".env")
    (elsewhere / "notes.txt").write_text("just notes\n")
    monkeypatch.chdir(elsewhere)  # the process's folder, as a python call's os.chdir left it
    bash, ctx = BUILTINS["bash"], make_ctx(turn_folder)
    args = bash.parameters.model_validate({"command": "cat ./notes.txt"})

    asked = decide(bash, None, args, _state("auto"), cwd=ctx.cwd)
    assert (asked.verdict, asked.rule) == ("ask", "secret-read") and ".env" in (asked.secret or "")
    assert "the project's keys" in text_of(await call_tool(bash, {"command": "cat ./notes.txt"}, ctx))  # what it reads
    assert decide(bash, None, args, _state("auto"), cwd=elsewhere).verdict == "run"  # there it is only notes


def test_a_user_tools_relative_path_is_judged_in_the_process_folder_too(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A user's (or an MCP) tool may ``open()`` a relative path in the process's folder, which a ``python``
    call could ``os.chdir`` mid-turn: ``config.txt`` links to a key file only there, and the call asks."""
    turn_folder, moved = tmp_path / "project", tmp_path / "project" / "data"
    moved.mkdir(parents=True)
    (moved / "id_rsa").write_text("-----BEGIN OPENSSH PRIVATE KEY-----\n")
    (moved / ".env").write_text("OPENAI_API_KEY=sk-x\n")
    (moved / "config.txt").symlink_to(".env")
    monkeypatch.chdir(moved)  # where the python call's os.chdir('data') left the process
    read_notes = _tool("read_notes", "auto")
    asked = decide(read_notes, None, {"path": "config.txt"}, _state("auto"), cwd=turn_folder)
    assert (asked.verdict, asked.rule) == ("ask", "secret-read") and ".env" in (asked.secret or "")
