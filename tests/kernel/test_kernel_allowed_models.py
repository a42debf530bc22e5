"""``allowed_models`` and the JupyterHub example config (docs/examples/ipython_kernel_config.py).

The kernel test starts the real Pi kernel with the documented example file as
its site config (copied into the profile the kernel reads, the way
``/etc/ipython`` would be), the key only in its environment, and checks the
defaults the file sets and the restriction it makes.
"""

from __future__ import annotations

import json
import shutil
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import NamedTuple

import pytest
from fake_openai import FakeOpenAI, text_chunks
from kernel_helpers import FAKE_KEY, REPO, KernelDriver, kernel_env

from pi_kernel.kernel.config import PiSettings, apply_config, parse_allowed_models, settings_from_env
from pi_kernel.kernel.model_resolution import is_allowed, refusal, restrict_default

EXAMPLE = REPO / "docs" / "examples" / "ipython_kernel_config.py"


class Named(NamedTuple):
    provider: str
    id: str


# -- the rule -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (["gpt-4o-mini", " ollama:* "], ("gpt-4o-mini", "ollama:*")),
        ("gpt-4o-mini, deepseek:deepseek-chat  qwen3*", ("gpt-4o-mini", "deepseek:deepseek-chat", "qwen3*")),
        ('["gpt-4o", "o3"]', ("gpt-4o", "o3")),
        ("", ()),
        ([], ()),
    ],
)
def test_allowed_models_are_read_from_a_list_a_json_list_or_a_string(value: object, expected: tuple[str, ...]) -> None:
    assert parse_allowed_models(value) == expected


def test_an_entry_matches_the_id_from_any_provider_or_exactly_provider_and_id() -> None:
    allowed = ("gpt-4o-mini", "deepseek:deepseek-chat", "ollama:*", "qwen3*")
    assert is_allowed(Named("openai", "gpt-4o-mini"), allowed)
    assert is_allowed(Named("openai-compatible", "gpt-4o-mini"), allowed)  # behind a site's gateway URL
    assert is_allowed(Named("deepseek", "deepseek-chat"), allowed)
    assert not is_allowed(Named("openai-compatible", "deepseek-chat"), allowed)  # that entry names a provider
    assert is_allowed(Named("ollama", "llama3.1:8b"), allowed) and is_allowed(Named("vllm", "qwen3-8b"), allowed)
    assert not is_allowed(Named("openai", "gpt-4o"), allowed)
    assert not is_allowed(Named("openai", "GPT-4O-MINI"), allowed)  # case-sensitive
    assert is_allowed(Named("openai", "anything"), ())  # unset: every model
    assert refusal(Named("openai", "gpt-4.1"), ("gpt-4o-mini", "o3")) == (
        "model openai:gpt-4.1 is not allowed here (allowed: gpt-4o-mini, o3)"
    )


def test_a_default_model_that_is_not_allowed_gives_way_to_the_first_named_one() -> None:
    def resolve(spec: str) -> Named:
        return Named("openai-compatible", spec)

    allowed = ("qwen3*", "gpt-4o-mini", "gpt-4o")
    assert restrict_default(Named("openai", "gpt-4o"), allowed, resolve) == (Named("openai", "gpt-4o"), None)
    model, notice = restrict_default(Named("openai", "gpt-4.1"), allowed, resolve)
    assert model == Named("openai-compatible", "gpt-4o-mini")
    assert notice == (
        "model openai:gpt-4.1 is not allowed here (allowed: qwen3*, gpt-4o-mini, gpt-4o); "
        "using openai-compatible:gpt-4o-mini."
    )
    assert restrict_default(Named("openai", "gpt-4.1"), ("qwen3*",), resolve)[0] is None  # nothing to fall back on
    assert restrict_default(None, allowed, resolve) == (None, None)


def test_allowed_models_from_the_environment_and_from_config() -> None:
    assert settings_from_env({"PI_ALLOWED_MODELS": "gpt-4o-mini,gpt-4o"}).allowed_models == ("gpt-4o-mini", "gpt-4o")
    problems: list[str] = []
    assert settings_from_env({"PI_ALLOWED_MODELS": "[not json"}, problems=problems).allowed_models == ()
    assert problems[0].startswith("PI_ALLOWED_MODELS: not a valid JSON list")
    configured = apply_config(PiSettings(allowed_models=("a",)), {"allowed_models": ["b", "c"]}, problems)
    assert configured.allowed_models == ("b", "c")
    kept = apply_config(PiSettings(allowed_models=("a",)), {"allowed_models": 5}, problems)
    assert kept.allowed_models == ("a",) and problems[-1].startswith("PiKernel.allowed_models: not a list of model")


# -- the real kernel with the example config ----------------------------------------------------


class Hub(NamedTuple):
    driver: KernelDriver
    server: FakeOpenAI


@pytest.fixture(scope="module")
def hub(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Hub]:
    """The Pi kernel as a hub user's server starts it: the example as site config, the key in the environment
    (as ``c.Spawner.environment`` gives it), the base URL pointed at the scripted server on the command line
    (which outranks config files; the example's own URL is a placeholder)."""
    root = tmp_path_factory.mktemp("hub")
    profile = root / "ipython" / "profile_default"
    profile.mkdir(parents=True)
    shutil.copy(EXAMPLE, profile / "ipython_kernel_config.py")
    with FakeOpenAI() as server:
        spec = root / "kernels" / "pi"
        spec.mkdir(parents=True)
        argv = [sys.executable, "-m", "pi_kernel", "-f", "{connection_file}", f"--PiKernel.base_url={server.base_url}"]
        (spec / "kernel.json").write_text(json.dumps({"argv": argv, "display_name": "pi", "language": "python"}))
        env = kernel_env(OPENAI_API_KEY=FAKE_KEY, IPYTHONDIR=str(root / "ipython"))
        with KernelDriver(env=env, jupyter_path=root) as driver:
            yield Hub(driver, server)


@pytest.mark.kernel
def test_the_example_config_sets_the_site_defaults(hub: Hub) -> None:
    status = hub.driver.run("%pi")
    assert status.status == "ok" and "pi_kernel warning" not in status.text
    assert f"model:     openai-compatible:gpt-4o-mini at {hub.server.base_url}" in status.text
    assert "mode: ask" in status.text
    settings = hub.driver.run(
        "from pi_kernel.kernel.extension import get_session\n"
        "s = get_session()\n"
        "(s.settings.allowed_models, s.broker.timeout, s.settings.budget)"
    )
    assert settings.text.strip() == "(('gpt-4o-mini', 'gpt-4o', 'deepseek-chat', 'qwen3*'), 300.0, 5.0)"
    hub.server.enqueue(text_chunks("Hello from the gateway."))
    turn = hub.driver.run("%%pi\nHi", cell_id="hub-hi")
    assert turn.status == "ok" and "Hello from the gateway." in turn.text
    assert hub.server.last_body["model"] == "gpt-4o-mini"
    assert hub.server.chat_requests[-1].headers["authorization"] == f"Bearer {FAKE_KEY}"
    assert not [m for m in hub.driver.iopub_log if FAKE_KEY in json.dumps(m, default=str)]


@pytest.mark.kernel
def test_a_model_outside_the_list_is_refused_in_one_line(hub: Hub) -> None:
    refused = hub.driver.run("%pi model gpt-4.1")
    assert refused.status == "error"
    (line,) = [line for line in refused.text.splitlines() if line.strip()]
    allowed = "gpt-4o-mini, gpt-4o, deepseek-chat, qwen3*"
    assert line == f"UsageError: model openai-compatible:gpt-4.1 is not allowed here (allowed: {allowed})"
    assert "model:     openai-compatible:gpt-4o-mini" in hub.driver.run("%pi").text  # unchanged
    requests = len(hub.server.chat_requests)
    cell = hub.driver.run("%%pi --model deepseek:deepseek-reasoner\nHi", cell_id="hub-refused")
    assert cell.status == "error" and "model deepseek:deepseek-reasoner is not allowed here" in cell.text
    assert len([line for line in cell.text.splitlines() if line.strip()]) == 1
    assert len(hub.server.chat_requests) == requests  # nothing was sent


@pytest.mark.kernel
def test_an_allowed_model_can_be_chosen_and_models_lists_only_allowed_ones(hub: Hub) -> None:
    chosen = hub.driver.run("%pi model qwen3-8b")
    assert chosen.status == "ok" and "model: openai-compatible:qwen3-8b" in chosen.text
    hub.server.enqueue(text_chunks("From qwen."))
    assert hub.driver.run("%%pi\nHi", cell_id="hub-qwen").status == "ok"
    assert hub.server.last_body["model"] == "qwen3-8b"
    listed = hub.driver.run("%pi models").text.split()
    # The scripted server lists "fake-model", which is not allowed; the site's named models are offered.
    assert "openai-compatible:fake-model" not in listed
    assert {"openai-compatible:gpt-4o-mini", "openai-compatible:gpt-4o", "openai-compatible:deepseek-chat"} <= set(
        listed
    )
    hub.driver.run("%pi model gpt-4o-mini")


def test_the_example_config_is_the_one_the_guide_shows() -> None:
    guide = (REPO / "docs" / "jupyterhub.md").read_text()
    assert "docs/examples/ipython_kernel_config.py" in guide
    for line in Path(EXAMPLE).read_text().splitlines():
        if line.startswith("c.PiKernel."):
            assert line in guide, line


def test_a_session_whose_default_model_is_not_allowed_starts_with_an_allowed_one_and_says_so() -> None:
    from pi_kernel.kernel.session import PiSession

    settings = PiSettings(model="gpt-4.1", base_url="http://127.0.0.1:9/v1", allowed_models=("o3*", "gpt-4o"))
    session = PiSession(shell=object(), settings=settings, notices=["an earlier warning"])
    assert session.take_notices() == [
        "an earlier warning",
        "model openai-compatible:gpt-4.1 is not allowed here (allowed: o3*, gpt-4o); using openai-compatible:gpt-4o.",
    ]
    assert session.model is not None and (session.model.provider, session.model.id) == ("openai-compatible", "gpt-4o")
    assert session.take_notices() == []
