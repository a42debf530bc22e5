"""``Model`` and the compatibility flags detected per provider, by name and by base URL."""

from __future__ import annotations

import dataclasses

import pytest

from pi_kernel.ai.messages import Usage
from pi_kernel.ai.models import Compat, Model, ModelCost, detect_compat, detect_provider, parse_model_spec

# What each provider needs, flag by flag (only the flags that differ from ``Compat()``).
OPENAI = Compat(
    supports_strict_mode=True, max_tokens_field="max_completion_tokens", empty_tools_with_tool_history=False
)
OPENAI_REASONING = dataclasses.replace(OPENAI, supports_developer_role=True, thinking_format="openai")
DEEPSEEK = Compat(thinking_format="deepseek", empty_tools_with_tool_history=False)
DEEPSEEK_REASONER = dataclasses.replace(DEEPSEEK, requires_reasoning_content_on_assistant_messages=True)
OPENROUTER = Compat(supports_strict_mode=True, thinking_format="openrouter", usage_cost_field=True)
GEMINI = Compat(
    send_strict_field=False,
    empty_tools_with_tool_history=False,
    thinking_format="openai",
    reasoning_tokens_outside_completion=True,
    reasoning_effort_off="none",
)
NO_STRICT_KEY = Compat(send_strict_field=False)
"""Ollama, llama.cpp and unknown servers: no ``strict`` key at all."""
VLLM = Compat(send_strict_field=False, empty_tools_with_tool_history=False)
"""vLLM also answers 400 to ``tools: []`` (as OpenAI and DeepSeek do)."""

# (provider name, a base URL that names the same server, model id, expected flags)
PROVIDERS = [
    ("openai", "https://api.openai.com/v1", "gpt-4o-mini", OPENAI),
    ("openai", "https://api.openai.com/v1", "o3-mini", OPENAI_REASONING),
    ("deepseek", "https://api.deepseek.com", "deepseek-chat", DEEPSEEK),
    ("deepseek", "https://api.deepseek.com/v1", "deepseek-reasoner", DEEPSEEK_REASONER),
    ("ollama", "http://127.0.0.1:11434/v1", "qwen3", NO_STRICT_KEY),
    ("ollama", "http://ollama.internal/v1", "qwen3", NO_STRICT_KEY),
    ("vllm", "http://gpu-box:8000/v1", "Qwen/Qwen3-8B", VLLM),
    ("llamacpp", "http://localhost:8080/v1", "any", NO_STRICT_KEY),
    ("openrouter", "https://openrouter.ai/api/v1", "openai/gpt-4o", OPENROUTER),
    ("gemini", "https://generativelanguage.googleapis.com/v1beta/openai/", "gemini-2.5-flash", GEMINI),
    ("openai-compatible", "https://api.together.xyz/v1", "meta-llama/Llama-3-70b", NO_STRICT_KEY),
]


@pytest.mark.parametrize(("provider", "url", "model_id", "expected"), PROVIDERS)
def test_compat_detected_from_the_provider_name(provider: str, url: str, model_id: str, expected: Compat) -> None:
    model = Model(model_id, provider=provider)
    assert model.resolved_compat() == expected


@pytest.mark.parametrize(("provider", "url", "model_id", "expected"), PROVIDERS)
def test_compat_detected_from_the_base_url(provider: str, url: str, model_id: str, expected: Compat) -> None:
    assert detect_provider(url) == provider
    # A generic provider name: the URL alone decides.
    assert Model(model_id, provider="openai-compatible", base_url=url).resolved_compat() == expected


@pytest.mark.parametrize(
    ("url", "provider"),
    [
        ("http://localhost:11434/v1", "ollama"),
        ("https://api.deepseek.com", "deepseek"),
        ("https://openrouter.ai/api/v1", "openrouter"),
        ("http://127.0.0.1:8080/v1", "llamacpp"),
    ],
)
def test_default_openai_provider_defers_to_a_url_naming_another_server(url: str, provider: str) -> None:
    # ``Model``'s provider defaults to "openai"; a base URL of Ollama must not get OpenAI's ``strict`` key.
    model = Model("some-model", base_url=url)
    assert model.provider == "openai"
    assert model.resolved_compat() == detect_compat(provider, url, "some-model", False)


def test_explicit_openai_at_an_unknown_url_keeps_openai_flags() -> None:
    # A proxy (or a test server) the user says speaks OpenAI's dialect.
    model = Model("gpt-4o", provider="openai", base_url="http://127.0.0.1:45678/v1")
    assert model.resolved_compat() == OPENAI


def test_explicit_provider_name_wins_over_a_port_heuristic() -> None:
    # A DeepSeek(-compatible) server on llama.cpp's usual port keeps DeepSeek's flags.
    assert detect_provider("http://gpu:8080/v1") == "llamacpp"
    model = Model("m", provider="deepseek", base_url="http://gpu:8080/v1")
    assert model.resolved_compat() == DEEPSEEK


def test_unknown_url_is_generic() -> None:
    assert detect_provider(None) == detect_provider("") == "openai-compatible"
    assert detect_provider("https://llm.example.com/v1") == "openai-compatible"


def test_per_model_override_replaces_only_the_named_flags() -> None:
    ollama = Model("qwen3", provider="ollama", compat={"send_strict_field": True, "supports_strict_mode": True})
    assert ollama.resolved_compat() == Compat(send_strict_field=True, supports_strict_mode=True)
    openai = Model("gpt-4o", provider="openai", compat={"max_tokens_field": "max_tokens"})
    assert openai.resolved_compat() == dataclasses.replace(OPENAI, max_tokens_field="max_tokens")
    assert Model("gpt-4o", provider="openai").resolved_compat() == OPENAI  # overrides are per model


def test_misspelt_compat_flag_is_a_clear_error_at_definition() -> None:
    with pytest.raises(ValueError, match=r"Unknown compat flag.*suports_strict_mode.*known flags: send_strict_field"):
        Model("gpt-4o", compat={"suports_strict_mode": True})


def test_reasoning_guessed_from_the_id_unless_given() -> None:
    assert [Model(name).is_reasoning for name in ("o1", "o3-mini", "o4-mini", "gpt-5", "deepseek-reasoner")] == [
        True
    ] * 5
    assert not Model("gpt-4o").is_reasoning and not Model("deepseek-chat", provider="deepseek").is_reasoning
    assert Model("gpt-4o", reasoning=True).is_reasoning
    assert not Model("o3", reasoning=False).resolved_compat().supports_developer_role


def test_default_urls_and_key_variables() -> None:
    assert Model("gpt-4o").resolved_base_url == "https://api.openai.com/v1"
    assert Model("gpt-4o").resolved_api_key_env == "OPENAI_API_KEY"
    assert Model("deepseek-chat", provider="deepseek").resolved_api_key_env == "DEEPSEEK_API_KEY"
    assert Model("qwen3", provider="ollama").resolved_api_key_env is None
    custom = Model("m", provider="ollama", base_url="http://box:11434/v1", api_key_env="MY_KEY")
    assert (custom.resolved_base_url, custom.resolved_api_key_env) == ("http://box:11434/v1", "MY_KEY")


def test_parse_model_spec() -> None:
    assert parse_model_spec("gpt-4o-mini") == Model("gpt-4o-mini", provider="openai")
    assert parse_model_spec("deepseek-chat") == Model("deepseek-chat", provider="deepseek")
    assert parse_model_spec("ollama:qwen3:8b") == Model("qwen3:8b", provider="ollama")
    assert parse_model_spec("llama3", provider="vllm") == Model("llama3", provider="vllm")
    assert parse_model_spec("unknown:thing") == Model("unknown:thing", provider="openai")


def test_cost_prices_each_kind_of_token_once() -> None:
    # input excludes cache reads and writes (as pi), so nothing is subtracted or counted twice.
    usage = Usage(input=176, output=40, cache_read=1024, cache_write=100)
    cost = ModelCost(input=1.0, output=2.0, cache_read=0.1, cache_write=1.25).of(usage)
    assert cost == pytest.approx((176 * 1.0 + 40 * 2.0 + 1024 * 0.1 + 100 * 1.25) / 1_000_000)
