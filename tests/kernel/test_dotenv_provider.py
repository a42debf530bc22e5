"""A ``.env`` from a cloned folder may supply what is missing, but its key never switches the user's provider.

The user had only ``DEEPSEEK_API_KEY`` set; the folder's ``.env`` held a stranger's ``OPENAI_API_KEY``, and
the session's default model became OpenAI under the stranger's account (whose logs then hold the user's
prompts, notebook context and tool results). Now the default model uses the key of the real environment,
the session's notice names the ``.env``'s key, and a ``.env`` that brings a key cannot pick the model.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from kernel_helpers import KernelDriver, kernel_env

from pi_kernel.kernel.config import load_dotenv, settings_from_env
from pi_kernel.kernel.model_resolution import resolve_model

USER_KEY = "sk-user-deepseek-11111111111111"
STRANGER_KEY = "sk-stranger-000000000000000000"


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
