"""Bounds of the local model's decoding: no string or list runs away, no call is cut by the answer's cap.

Issue 11: SmolLM2 wrote ``{"fruit": ",12,0.95`` and went on inside the
string until the answer's 64-token cap cut the call. The grammar tests push
the real model towards one token with a large logit bias, so that it would
write that token for ever where the grammar allows it: the bound, not the
model's taste, decides where the string or the list ends. The cap tests ask
for arguments whose longest form fits the tool-call bound, with an answer
cap far below it: the call completes whatever the model samples.
"""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from llama_cpp import LlamaGrammar

from pi_kernel.ai import AssistantMessage, Context, Model, StreamOptions, Tool, UserMessage, stream
from pi_kernel.ai.providers.local import TOOL_CALL_MAX_TOKENS, head_token_cap
from pi_kernel.ai.providers.local_engine import (
    LOCAL_MODEL_ID,
    MAX_ITEMS,
    MAX_STRING_CHARS,
    bound_lists,
    bounded_gbnf,
    get_engine,
)

MODEL = Model(id=LOCAL_MODEL_ID, provider="local")


def decode_favouring(schema: dict[str, Any], favoured: dict[str, float], max_tokens: int = 700) -> str:
    """The arguments the real model writes under ``schema``'s grammar when ``favoured`` tokens get a bias."""
    engine = get_engine()
    llama = engine.load()
    grammar = engine.schema_grammar(schema)
    bias = {llama.tokenize(text.encode(), add_bos=False, special=False)[0]: value for text, value in favoured.items()}

    def favour(_input_ids: Any, scores: Any) -> Any:
        for token, value in bias.items():
            scores[token] += value
        return scores

    prompt = engine.tokenize(engine.render([{"role": "user", "content": "Write the arguments as JSON."}])[0])

    def decode() -> list[int]:  # on the decoding thread, as every decode
        out: list[int] = []
        tokens = llama.generate(prompt, temp=0, grammar=grammar, logits_processor=[favour])
        try:
            for token in tokens:
                if token in engine._end_tokens:  # the grammar is complete: only an end token is allowed
                    break
                out.append(token)
                if len(out) >= max_tokens:
                    break
        finally:
            tokens.close()
        return out

    return llama.detokenize(engine.run_in_decoder_thread(decode).result()).decode("utf-8", "replace")


@pytest.mark.local_model
@pytest.mark.parametrize(
    ("schema", "path"),
    [
        ({"type": "object", "properties": {"fruit": {"type": "string"}}, "required": ["fruit"]}, ["fruit"]),
        (  # Optional[str]: the string branch of a union
            {
                "type": "object",
                "properties": {"note": {"anyOf": [{"type": "string"}, {"type": "null"}]}},
                "required": ["note"],
            },
            ["note"],
        ),
        (  # list[str]: each item
            {
                "type": "object",
                "properties": {"tags": {"type": "array", "items": {"type": "string"}, "minItems": 1, "maxItems": 1}},
                "required": ["tags"],
            },
            ["tags", 0],
        ),
    ],
    ids=["property", "optional", "list-item"],
)
def test_a_string_the_schema_does_not_bound_ends_at_the_default_bound(schema: dict[str, Any], path: list[Any]) -> None:
    text = decode_favouring(schema, {"a": 1000.0})

    value: Any = json.loads(text)  # the string ended and the JSON closed
    for key in path:
        value = value[key]
    assert value == "a" * MAX_STRING_CHARS


@pytest.mark.local_model
@pytest.mark.parametrize("limit", [5, MAX_STRING_CHARS + 40])
def test_a_schemas_own_max_length_is_kept(limit: int) -> None:
    schema = {"type": "object", "properties": {"code": {"type": "string", "maxLength": limit}}, "required": ["code"]}

    assert json.loads(decode_favouring(schema, {"a": 1000.0}, max_tokens=limit + 40))["code"] == "a" * limit


@pytest.mark.local_model
def test_a_list_the_schema_does_not_bound_ends_at_the_default_bound() -> None:
    schema = {
        "type": "object",
        "properties": {"days": {"type": "array", "items": {"type": "integer"}}},
        "required": ["days"],
    }

    # "," beats "1" wherever both may follow: one item after the other, as long as the grammar allows.
    days = json.loads(decode_favouring(schema, {",": 1000.0, "1": 500.0}))["days"]

    assert len(days) == MAX_ITEMS


def unbounded_repetitions(gbnf: str) -> list[str]:
    """The grammar's rules that use ``*`` or ``+`` outside literals and character classes."""
    found = []
    for line in gbnf.splitlines():
        name, _, rule = line.partition(" ::= ")
        operators = re.sub(r'"(?:\\.|[^"\\])*"|\[(?:\\.|[^\]\\])*\]', "", rule)
        if "*" in operators or "+" in operators:
            found.append(name)
    return found


@pytest.mark.local_model
@pytest.mark.parametrize(
    "schema",
    [
        {"type": "object", "properties": {"text": {"type": "string"}}},
        {"type": "object", "properties": {"scores": {"type": "object", "additionalProperties": {"type": "integer"}}}},
        {"type": "object", "properties": {"rows": {"type": "array", "items": {"type": "array", "items": {}}}}},
        {"type": "object", "properties": {"anything": {"type": "object"}}},
        {"type": "object"},
        {"type": "object", "properties": {"tags": {"type": ["array", "null"], "items": {"type": "string"}}}},
    ],
    ids=["string", "dict-of-int", "list-of-any", "free-form-object", "any-object", "optional-list"],
)
def test_no_rule_of_the_grammar_repeats_without_bound(schema: dict[str, Any]) -> None:
    """No ``*``/``+``: no string, list, or set of properties can go on for ever (only free-form nesting can)."""
    gbnf = bounded_gbnf(schema)

    assert unbounded_repetitions(gbnf) == []
    LlamaGrammar.from_string(gbnf, verbose=False)  # llama.cpp accepts it


def test_list_bounds_leave_a_schemas_own_bounds_and_data_alone() -> None:
    schema = {
        "type": "object",
        "properties": {
            "few": {"type": "array", "items": {"type": "integer"}, "maxItems": 3},
            "many": {"type": "array", "items": {"type": "integer"}, "minItems": MAX_ITEMS + 8},
            "nested": {"type": "array", "items": {"type": "array", "items": {"type": "string"}}},
            "choice": {"enum": [{"type": "array", "items": {}}]},
        },
        "$defs": {"Row": {"type": "array", "items": {"type": "number"}}},
    }

    bounded = bound_lists(schema)

    props = bounded["properties"]
    assert props["few"]["maxItems"] == 3
    assert props["many"]["maxItems"] == MAX_ITEMS + 8
    assert props["nested"]["maxItems"] == MAX_ITEMS and props["nested"]["items"]["maxItems"] == MAX_ITEMS
    assert props["choice"] == schema["properties"]["choice"]  # an enum value is data, not a schema
    assert bounded["$defs"]["Row"]["maxItems"] == MAX_ITEMS
    assert "maxItems" not in schema["properties"]["nested"]  # the tool's own schema is not changed


# ------------------------------------------------------------------------------ token caps


async def call_with_answer_cap(tools: list[Tool], choice: str, max_tokens: int) -> AssistantMessage:
    context = Context(
        system_prompt="You are a helpful assistant.",
        messages=[UserMessage("What is the weather in Paris?")],
        tools=tools,
    )
    return await stream(MODEL, context, StreamOptions(tool_choice=choice, max_tokens=max_tokens)).result()


CITY = {
    "type": "object",
    "properties": {"city": {"type": "string", "maxLength": 40}, "days": {"type": "integer"}},
    "required": ["city", "days"],
}
"""Its longest arguments (40 characters of 6-byte escapes, 16 digits) are far under ``TOOL_CALL_MAX_TOKENS``."""


@pytest.mark.local_model
async def test_a_tool_calls_arguments_are_not_cut_by_the_answers_token_cap() -> None:
    assert len(json.dumps({"city": "\\u0000" * 40, "days": -(10**16)})) + 8 < TOOL_CALL_MAX_TOKENS

    message = await call_with_answer_cap([Tool("get_weather", "Get the weather.", CITY)], "get_weather", max_tokens=2)

    assert message.stop_reason == "tool_use", message.error_message
    (call,) = message.tool_calls
    assert call.raw_arguments is None and set(call.arguments) == {"city", "days"}


@pytest.mark.local_model
async def test_a_long_tool_name_is_never_cut() -> None:
    """The tool-choice head gets a cap it always fits (one byte at least per token), not a fixed 64 tokens."""
    # At most 64 characters (all providers accept), yet more than 64 tokens with the "functions." head.
    names = [(f"{prefix}_" + "_".join(str(n) for n in range(40)))[:64] for prefix in ("w", "t")]
    engine = get_engine()
    assert all(len(engine.tokenize_continuation(f"functions.{name}:")) > 64 for name in names)

    message = await call_with_answer_cap([Tool(name, "Get the weather.", CITY) for name in names], "required", 2)

    assert message.stop_reason == "tool_use", message.error_message
    (call,) = message.tool_calls
    assert call.name in names


def test_the_head_cap_fits_every_head_byte_for_byte() -> None:
    heads = ["message:", "functions.é" + "x" * 90 + ":"]
    assert head_token_cap(heads) > len(heads[1].encode("utf-8"))
