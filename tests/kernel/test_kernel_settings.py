"""Bad settings never stop the kernel: each falls back with a warning, shown once in the first ``%pi`` output.

A setting is read in the kernel's constructor, where an exception kills the
process and JupyterLab restarts it forever. So an unknown ``PI_APPROVAL``, an
approval timeout that is not a number above 0 (``0`` once meant "wait
forever"; nothing may), or approval overrides that are not JSON are logged,
that setting keeps its default, and the session's first ``%pi`` / ``%%pi``
output says so, without quoting a key.
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Iterator

import pytest
from fake_openai import FakeOpenAI, text_chunks
from kernel_helpers import FAKE_KEY, KernelDriver, kernel_env

from pi_kernel.kernel.config import PiSettings, apply_config, settings_from_env

# -- the settings functions ---------------------------------------------------------------------


def test_bad_environment_values_fall_back_to_the_defaults() -> None:
    problems: list[str] = []
    settings = settings_from_env({"PI_APPROVAL": "sometimes", "PI_APPROVAL_TIMEOUT": "soon"}, problems=problems)
    assert (settings.approval, settings.approval_timeout) == ("ask", 600.0)
    assert problems == [
        "PI_APPROVAL: 'sometimes' is not one of ask, auto, deny, read-only; using 'ask' (the default).",
        "PI_APPROVAL_TIMEOUT: 'soon' must be a number of seconds above 0 (nothing waits forever); "
        "using 600 (the default).",
    ]


@pytest.mark.parametrize("timeout", ["0", "-5", "inf", "nan"])
def test_no_approval_timeout_waits_forever(timeout: str) -> None:
    problems: list[str] = []
    assert settings_from_env({"PI_APPROVAL_TIMEOUT": timeout}, problems=problems).approval_timeout == 600.0
    assert len(problems) == 1 and "nothing waits forever" in problems[0]
    with pytest.raises(ValueError, match="above 0"):
        settings_from_env({"PI_APPROVAL_TIMEOUT": timeout})  # nobody collects: raised, as before


def test_bad_config_values_keep_the_lower_layers_value() -> None:
    problems: list[str] = []
    base = PiSettings(approval="deny", approval_overrides={"bash": "ask"})
    values = {"approval": "maybe", "approval_overrides": "{bash: ask", "approval_timeout": 0, "max_turns": "x"}
    settings = apply_config(base, {**values, "model": "m"}, problems)
    assert (settings.approval, settings.approval_overrides, settings.approval_timeout) == ("deny", {"bash": "ask"}, 600)
    assert (settings.max_turns, settings.model) == (None, "m")  # the good value still applies
    assert problems[0] == "PiKernel.approval: 'maybe' is not one of ask, auto, deny, read-only; using 'deny'."
    assert problems[1].startswith("PiKernel.approval_overrides: not valid JSON (Expecting property name")
    assert "bash: ask" not in problems[1]  # JSON text is never quoted: it may hold anything
    assert problems[2].startswith("PiKernel.approval_timeout: '0' must be a number of seconds above 0")
    assert problems[3] == "PiKernel.max_turns: 'x' is not a whole number above 0; using None (the default)."
    wrong_mode = apply_config(PiSettings(), {"approval_overrides": {"bash": "sometimes"}}, problems)
    assert wrong_mode.approval_overrides == {} and "the mode of bash is not one of ask, auto, deny" in problems[-1]


def test_a_warning_never_quotes_a_key() -> None:
    env = {"OPENAI_API_KEY": FAKE_KEY, "PI_APPROVAL": FAKE_KEY, "PI_APPROVAL_TIMEOUT": "x" * 100}
    problems: list[str] = []
    settings_from_env(env, problems=problems)
    assert FAKE_KEY[-12:] not in problems[0] and re.match(r"PI_APPROVAL: '(sk-)?\*\*\*' is not one of", problems[0])
    assert "'" + "x" * 40 + "...'" in problems[1]  # a long value is shortened


# -- the real kernel ----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def server() -> Iterator[FakeOpenAI]:
    with FakeOpenAI() as fake:
        yield fake


@pytest.fixture(scope="module")
def misconfigured(server: FakeOpenAI, tmp_path_factory: pytest.TempPathFactory) -> Iterator[KernelDriver]:
    """The Pi kernel with a bad value in each layer: the environment, the config file, the command line."""
    root = tmp_path_factory.mktemp("misconfigured")
    profile = root / "ipython" / "profile_default"
    profile.mkdir(parents=True)
    config = (
        f'c.PiKernel.approval_overrides = "{{not json"\nc.PiKernel.approval = "{FAKE_KEY}"\n'
        # Wrong types, which typed traits would reject with a TraitError that stops the kernel:
        'c.PiKernel.max_turns = "many"\nc.PiKernel.widgets = 3\nc.PiKernel.builtin_tools = 5\nc.PiKernel.model = 42\n'
    )
    (profile / "ipython_kernel_config.py").write_text(config)
    spec = root / "kernels" / "pi"
    spec.mkdir(parents=True)
    argv = [sys.executable, "-m", "pi_kernel", "-f", "{connection_file}", "--PiKernel.approval_timeout=-5"]
    (spec / "kernel.json").write_text(json.dumps({"argv": argv, "display_name": "pi", "language": "python"}))
    env = kernel_env(server.base_url, PI_APPROVAL="bogus", PI_APPROVAL_TIMEOUT="0", IPYTHONDIR=str(root / "ipython"))
    with KernelDriver(env=env, jupyter_path=root) as driver:
        yield driver


SETTINGS = (
    "from pi_kernel.kernel.extension import get_session\n"
    "s = get_session()\n"
    "(s.settings.approval, s.settings.approval_overrides, s.broker.timeout, s.policy.describe())"
)


@pytest.mark.kernel
def test_the_kernel_starts_and_the_first_pi_output_says_what_fell_back(misconfigured: KernelDriver) -> None:
    assert misconfigured.run("1+1").text.strip() == "2"
    first = misconfigured.run("%pi")
    assert first.status == "ok"
    warnings = [line for line in first.text.splitlines() if line.startswith("pi_kernel warning: ")]
    assert warnings == [
        "pi_kernel warning: PI_APPROVAL: 'bogus' is not one of ask, auto, deny, read-only; using 'ask' (the default).",
        "pi_kernel warning: PI_APPROVAL_TIMEOUT: '0' must be a number of seconds above 0 (nothing waits forever); "
        "using 600 (the default).",
        "pi_kernel warning: PiKernel.model: '42' is not a string; using 'fake-model'.",
        "pi_kernel warning: PiKernel.approval: '***' is not one of ask, auto, deny, read-only; "
        "using 'ask' (the default).",
        "pi_kernel warning: PiKernel.approval_overrides: not valid JSON (Expecting property name enclosed in "
        "double quotes: line 1 column 2 (char 1)); using {} (the default).",
        "pi_kernel warning: PiKernel.approval_timeout: '-5' must be a number of seconds above 0 "
        "(nothing waits forever); using 600 (the default).",
        "pi_kernel warning: PiKernel.builtin_tools: '5' is not a list of tool names; "
        "using ('read', 'write', 'edit', 'bash', 'python', 'inspect', 'cells', 'edit_cell', 'insert_cells', "
        "'run_cells', 'delete_cells') (the default).",
        "pi_kernel warning: PiKernel.widgets: '3' is not true or false; using None (the default).",
        "pi_kernel warning: PiKernel.max_turns: 'many' is not a whole number above 0; using None (the default).",
    ]
    assert "mode: ask" in first.text  # the status itself follows
    assert "pi_kernel warning" not in misconfigured.run("%pi").text  # shown once
    assert misconfigured.run(SETTINGS).text.strip() == "('ask', {}, 600.0, 'mode: ask')"
    assert not [m for m in misconfigured.iopub_log if FAKE_KEY in json.dumps(m, default=str)]


@pytest.mark.kernel
def test_a_restarted_kernel_shows_the_warnings_in_its_first_pi_cell(
    misconfigured: KernelDriver, server: FakeOpenAI
) -> None:
    misconfigured.restart()
    server.enqueue(text_chunks("Hello."))
    first = misconfigured.run("%%pi\nHi", cell_id="first")
    assert first.status == "ok" and "Hello." in first.text
    assert first.text.count("pi_kernel warning: ") == 9 and "PI_APPROVAL: 'bogus'" in first.text
    server.enqueue(text_chunks("Again."))
    assert "pi_kernel warning" not in misconfigured.run("%%pi\nHi again", cell_id="second").text


def test_a_bad_url_folder_or_flag_warns_instead_of_breaking_pi_later() -> None:
    """Values that used to pass here and fail at the first %pi (a base URL with no scheme, a ``~user`` that
    names nobody) or be read as something else (``PI_WIDGETS=maybe`` as on)."""
    problems: list[str] = []
    env = {"OPENAI_BASE_URL": "my-server/v1", "PI_WIDGETS": "maybe", "PI_WORKSPACE_ROOT": "~no-such-user-xyz/w"}
    settings = settings_from_env(env, problems=problems)
    assert (settings.base_url, settings.widgets, settings.workspace_root) == (None, None, None)
    assert problems[0] == "OPENAI_BASE_URL: 'my-server/v1' is not an http:// or https:// URL; using None (the default)."
    assert problems[1].startswith("PI_WIDGETS: 'maybe' is not one of 1, true, yes, on or 0, false, no, off")
    assert problems[2].startswith("PI_WORKSPACE_ROOT: '~no-such-user-xyz/w' cannot be resolved")
    good = settings_from_env({"OPENAI_BASE_URL": " http://127.0.0.1:8000/v1 ", "PI_WIDGETS": "Off"})
    assert (good.base_url, good.widgets) == ("http://127.0.0.1:8000/v1", False)
    configured = apply_config(PiSettings(), {"base_url": "ftp://x", "widgets": "maybe"}, problems)
    assert (configured.base_url, configured.widgets) == (None, None) and len(problems) == 5


def test_values_that_cannot_even_be_shown_or_converted_still_only_warn() -> None:
    class Unprintable:
        def __str__(self) -> str:
            raise RuntimeError("no text")

    problems: list[str] = []
    values = {
        "approval_timeout": 10**400,  # float() overflows
        "approval": Unprintable(),
        "model": "  ",
        "workspace_root": "a\x00b",
    }
    settings = apply_config(PiSettings(), values, problems)
    assert (settings.approval_timeout, settings.approval, settings.model, settings.workspace_root) == (
        600.0,
        "ask",
        None,
        None,
    )
    assert len(problems) == 4 and "'<Unprintable>' is not one of" in problems[1]
    assert apply_config(PiSettings(), {"approval_timeout": True}, problems).approval_timeout == 600.0  # not 1 s


def test_blank_environment_names_and_values_that_cannot_compare_are_not_taken() -> None:
    settings = settings_from_env({"PI_PROVIDER": "  ", "PI_MODEL": "  "})
    assert (settings.provider, settings.model) == (None, None)

    class Incomparable:
        def __eq__(self, other: object) -> bool:
            raise RuntimeError("cannot compare")

        __hash__ = object.__hash__

    problems: list[str] = []
    assert apply_config(PiSettings(), {"approval": Incomparable()}, problems).approval == "ask"
    assert problems and problems[0].startswith("PiKernel.approval: cannot compare")


@pytest.mark.parametrize(
    "name, value",
    [
        ("PI_MCP_CONFIG", "~nosuchuser-r14a/mcp.json"),  # expanduser raises RuntimeError, not OSError
        ("PI_PRICES", "[" * 5000),  # json.loads raises RecursionError
        ("PI_ALLOWED_MODELS", "[" * 5000),
    ],
)
def test_a_bad_environment_value_of_any_kind_warns_and_falls_back(name: str, value: str) -> None:
    """Found by the r14a review: the environment's errors other than ``OSError`` / ``ValueError`` stopped the
    kernel (``settings_from_env`` runs in its constructor)."""
    problems: list[str] = []
    settings = settings_from_env({name: value}, problems=problems)
    assert (settings.mcp_servers, settings.prices, settings.allowed_models) == ({}, {}, ())
    assert len(problems) == 1 and problems[0].startswith(name + ": ")


def test_the_local_models_numbers_read_like_the_other_settings(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """``PI_LOCAL_CONTEXT`` / ``PI_LOCAL_THREADS`` (README's settings table) are read outside the table, by the
    local engine: ``8k`` (which ``PI_CONTEXT_WINDOW`` accepts) once raised at ``session.model``; a value that is
    no number warns and keeps the default."""
    from pi_kernel.ai.models import Model
    from pi_kernel.ai.providers.local_engine import DEFAULT_CONTEXT_TOKENS, default_threads
    from pi_kernel.kernel.session import with_context_window

    local = Model(id="smollm2", provider="local")
    monkeypatch.setenv("PI_LOCAL_CONTEXT", "8k")
    monkeypatch.setenv("PI_LOCAL_THREADS", "3")
    assert (with_context_window(local, None) or local).context_window == 8000 and default_threads() == 3
    monkeypatch.setenv("PI_LOCAL_CONTEXT", "lots")
    monkeypatch.setenv("PI_LOCAL_THREADS", "-2")
    with caplog.at_level("WARNING", logger="pi_kernel.local"):
        assert (with_context_window(local, None) or local).context_window == DEFAULT_CONTEXT_TOKENS
        assert 1 <= default_threads() <= 4
    assert [record.getMessage() for record in caplog.records] == [
        "pi_kernel: PI_LOCAL_CONTEXT: 'lots' is not a whole number above 0; using the default.",
        "pi_kernel: PI_LOCAL_THREADS: '-2' is not a whole number above 0; using the default.",
    ]


@pytest.mark.kernel
def test_the_pi_kernel_starts_with_an_unresolvable_mcp_config_path(pi_jupyter_path: str) -> None:
    """The same end to end: the Pi kernel died in its constructor (``wait_for_ready``: "Kernel died")."""
    env = kernel_env(PI_MCP_CONFIG="~nosuchuser-r14a/mcp.json")
    with KernelDriver(env=env, jupyter_path=pi_jupyter_path) as driver:
        result = driver.run("%pi")
        assert result.status == "ok" and "pi_kernel warning: PI_MCP_CONFIG: cannot read" in result.text
