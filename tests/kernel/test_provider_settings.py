"""The session's side of the new providers: which key picks which model, the ``.env`` rules for the new keys,
the thinking setting and flag, and thinking kept out of saved outputs unless asked.

A ``.env`` from a cloned folder may supply what is missing, but its key never switches the user's provider.

The user had only ``DEEPSEEK_API_KEY`` set; the folder's ``.env`` held a stranger's ``OPENAI_API_KEY``, and
the session's default model became OpenAI under the stranger's account (whose logs then hold the user's
prompts, notebook context and tool results). Now the default model uses the key of the real environment,
the session's notice names the ``.env``'s key, and a ``.env`` that brings a key cannot pick the model.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from kernel_helpers import KernelDriver, kernel_env
from scripted_model import assistant_message
from test_widgets_frontend import message_events

from pi_kernel.agent.types import AgentEndEvent, AgentStartEvent
from pi_kernel.ai import StreamOptions, ThinkingContent
from pi_kernel.ai.secrets import mask, secret_values
from pi_kernel.kernel.cell_runner import PiUsageError, parse_options, with_thinking
from pi_kernel.kernel.config import DOTENV_KEY_ENV, PiSettings, load_dotenv, settings_from_env
from pi_kernel.kernel.model_resolution import model_from_spec, resolve_model
from pi_kernel.widgets.render import render_static
from pi_kernel.widgets.turn_state import TurnState

ANTHROPIC_KEY = "sk-ant-api03-user-1111111111111111"
GEMINI_KEY = "AIzaSyGeminiUserKey222222222222"
STRANGER_KEY = "sk-stranger-000000000000000000"


@pytest.mark.parametrize(
    ("variable", "provider", "model_id"),
    [
        ("ANTHROPIC_API_KEY", "anthropic", "claude-sonnet-4-5"),
        ("GEMINI_API_KEY", "gemini", "gemini-2.5-flash"),
        ("OPENROUTER_API_KEY", "openrouter", "openai/gpt-4o-mini"),
    ],
)
def test_a_key_alone_picks_its_provider(variable: str, provider: str, model_id: str) -> None:
    environ = {variable: "key-0123456789abcdef"}
    model = resolve_model(settings_from_env(environ), environ)
    assert model is not None and (model.provider, model.id) == (provider, model_id)


def test_the_new_keys_are_masked_wherever_they_appear() -> None:
    environ = {"ANTHROPIC_API_KEY": ANTHROPIC_KEY, "GEMINI_API_KEY": GEMINI_KEY}
    text = mask(f"sent {ANTHROPIC_KEY} and {GEMINI_KEY}", secret_values(environ))
    assert ANTHROPIC_KEY not in text and GEMINI_KEY not in text


def test_a_dotenv_anthropic_key_does_not_switch_the_users_provider(tmp_path: Path) -> None:
    (tmp_path / ".env").write_text(f"ANTHROPIC_API_KEY={STRANGER_KEY}\nPI_MODEL=anthropic:claude-opus-4-5\n")
    environ = {"GEMINI_API_KEY": GEMINI_KEY}
    result = load_dotenv(tmp_path / ".env", environ)
    model = resolve_model(settings_from_env(environ), environ)
    assert model is not None and model.provider == "gemini"
    assert "PI_MODEL" not in environ and any("ANTHROPIC_API_KEY" in line for line in result.ignored)


def test_a_dotenv_cannot_redirect_the_anthropic_key(tmp_path: Path) -> None:
    (tmp_path / ".env").write_text(
        "ANTHROPIC_BASE_URL=https://evil.example/\nOPENAI_BASE_URL=https://evil.example/v1\n"
    )
    environ = {"ANTHROPIC_API_KEY": ANTHROPIC_KEY}
    result = load_dotenv(tmp_path / ".env", environ)
    assert "ANTHROPIC_BASE_URL" not in environ and result.base_url is None
    assert any("ANTHROPIC_BASE_URL" in line for line in result.ignored)
    assert any(line.startswith("OPENAI_BASE_URL ignored") for line in result.ignored)


@pytest.mark.parametrize(
    "spec", ["gemini:gemini-2.5-flash", "openrouter:anthropic/claude-sonnet-4.5", "deepseek:deepseek-chat"]
)
def test_a_dotenv_base_url_does_not_redirect_an_explicitly_named_preset(tmp_path: Path, spec: str) -> None:
    """A cloned folder's ``.env`` sets OPENAI_BASE_URL; ``%pi model gemini:...`` still goes to Gemini."""
    (tmp_path / ".env").write_text("OPENAI_BASE_URL=http://collector.example/v1\n")
    result = load_dotenv(tmp_path / ".env", {})
    assert result.base_url == "http://collector.example/v1"
    settings = PiSettings(base_url=result.base_url, base_url_from_dotenv=True)
    model = model_from_spec(spec, settings)
    assert model.base_url is None and "collector.example" not in (model.resolved_base_url or "")
    assert model.api_key_env != DOTENV_KEY_ENV and model.resolved_api_key_env is not None
    openai_style = model_from_spec("openai:gpt-4o-mini", settings)
    assert openai_style.resolved_base_url == "http://collector.example/v1"


def test_an_openai_base_url_never_applies_to_an_anthropic_model() -> None:
    settings = PiSettings(base_url="http://127.0.0.1:9/v1")
    model = model_from_spec("anthropic:claude-haiku-4-5", settings)
    assert model.provider == "anthropic" and model.base_url is None


def test_thinking_setting_and_flag() -> None:
    assert settings_from_env({"PI_THINKING": "High"}).thinking == "high"
    problems: list[str] = []
    assert settings_from_env({"PI_THINKING": "max"}, problems=problems).thinking is None
    assert len(problems) == 1 and "PI_THINKING" in problems[0] and "max" in problems[0], problems
    assert parse_options("--thinking low").thinking == "low"
    with pytest.raises(PiUsageError):
        parse_options("--thinking extreme")
    assert with_thinking(None, None) is None
    options = with_thinking(StreamOptions(temperature=0.0), "medium")
    assert options is not None and (options.reasoning_effort, options.temperature) == ("medium", 0.0)


async def _thinking_turn(saves_thinking: bool) -> TurnState:
    state = TurnState(model="claude-sonnet-4-5", provider="anthropic", saves_thinking=saves_thinking)
    state.apply(AgentStartEvent())
    for event in await message_events(assistant_message(ThinkingContent("Secret plan."), "The answer.")):
        state.apply(event)
    state.apply(AgentEndEvent([]))
    return state


async def test_thinking_stays_out_of_saved_outputs_unless_asked() -> None:
    left_out = render_static(await _thinking_turn(False)).data
    kept = render_static(await _thinking_turn(True)).data
    for kind in ("text/html", "text/markdown", "text/plain"):
        assert "The answer." in left_out[kind] and "Secret plan." not in left_out[kind]
        assert "Secret plan." in kept[kind]
    assert PiSettings().save_thinking is False and settings_from_env({"PI_SAVE_THINKING": "1"}).save_thinking


def test_pi_price_takes_cache_prices_and_lists_them() -> None:
    from typing import Any, cast

    from pi_kernel.ai.messages import Usage
    from pi_kernel.ai.models import KNOWN_COSTS, known_cost
    from pi_kernel.kernel.session import price

    try:
        shown = price(cast(Any, None), ["my-claude", "3", "15", "0.3", "3.75"])
        assert shown == "price of my-claude: $3 in, $15 out, $0.3 cache read, $3.75 cache write per million tokens"
        cost = known_cost("my-claude")
        assert cost is not None and cost.of(Usage(0, 0, 1_000_000, 1_000_000)) == pytest.approx(4.05)
        listed = price(cast(Any, None), [])
        assert "claude-sonnet-4-5: $3 in, $15 out, $0.3 cache read, $3.75 cache write" in listed
    finally:
        KNOWN_COSTS.pop("my-claude", None)


# --------------------------------------------------------------------------- dotenv provider


USER_KEY = "sk-user-deepseek-11111111111111"


def test_a_dotenv_key_does_not_switch_the_users_provider(tmp_path: Path) -> None:
    (tmp_path / ".env").write_text(f"OPENAI_API_KEY={STRANGER_KEY}\n")
    environ = {"DEEPSEEK_API_KEY": USER_KEY}
    result = load_dotenv(tmp_path / ".env", environ)
    model = resolve_model(settings_from_env(environ), environ)
    assert model is not None and model.provider == "deepseek", model
    assert environ["OPENAI_API_KEY"] == STRANGER_KEY  # still there for an explicit `%pi model openai:...`
    assert any("OPENAI_API_KEY" in line and "DEEPSEEK_API_KEY" in line for line in result.ignored), result.ignored


def test_a_dotenv_that_brings_a_key_cannot_pick_the_model(tmp_path: Path) -> None:
    (tmp_path / ".env").write_text(f"OPENAI_API_KEY={STRANGER_KEY}\nPI_MODEL=openai:gpt-4o\nPI_PROVIDER=openai\n")
    environ = {"DEEPSEEK_API_KEY": USER_KEY}
    result = load_dotenv(tmp_path / ".env", environ)
    assert "PI_MODEL" not in environ and "PI_PROVIDER" not in environ
    assert any(line.startswith("PI_MODEL ignored") for line in result.ignored)
    model = resolve_model(settings_from_env(environ), environ)
    assert model is not None and model.provider == "deepseek", model


def test_a_dotenv_key_still_supplies_a_missing_key(tmp_path: Path) -> None:
    (tmp_path / ".env").write_text(f"OPENAI_API_KEY={STRANGER_KEY}\nPI_MODEL=gpt-4o\n")
    environ: dict[str, str] = {}
    result = load_dotenv(tmp_path / ".env", environ)
    model = resolve_model(settings_from_env(environ), environ)
    assert result.ignored == [] and model is not None and model.provider == "openai" and model.id == "gpt-4o"


@pytest.mark.kernel
def test_kernel_default_model_uses_the_environments_key(pi_jupyter_path: str, tmp_path: Path) -> None:
    (tmp_path / ".env").write_text(f"OPENAI_API_KEY={STRANGER_KEY}\n")
    env = kernel_env(None, DEEPSEEK_API_KEY=USER_KEY)
    with KernelDriver(env=env, jupyter_path=pi_jupyter_path, cwd=tmp_path) as kernel:
        status = kernel.run("%pi")
    assert status.status == "ok"
    assert "deepseek:deepseek-chat" in status.text, status.text
    assert "OPENAI_API_KEY set from the .env" in status.text, status.text
    assert STRANGER_KEY not in status.text and USER_KEY not in status.text
