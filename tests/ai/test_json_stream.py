"""Tests for pi_kernel.ai.json_stream: partial JSON previews and strict finish."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pi_kernel.ai.json_stream import IncrementalJSONParser, parse_prefix, parse_streaming_json

SETTINGS = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def feed_in_chunks(text: str, sizes: list[int]) -> IncrementalJSONParser:
    """Feed ``text`` in chunks of the given sizes (cycled), snapshotting after each."""
    parser = IncrementalJSONParser()
    position = 0
    index = 0
    while position < len(text):
        size = sizes[index % len(sizes)]
        index += 1
        parser.feed(text[position : position + size])
        position += size
        assert isinstance(parser.snapshot(), dict)
    return parser


_VALID_ESCAPES = frozenset('"\\/bfnrt')
_HEX = frozenset("0123456789abcdefABCDEF")


def pi_repair(text: str) -> str:
    """pi's JSON repair spelt out on the whole text, char by char: inside strings a raw control
    character becomes its escape and the backslash of an invalid escape becomes ``\\\\`` (text)."""
    out: list[str] = []
    in_string = False
    i = 0
    while i < len(text):
        char = text[i]
        if not in_string:
            in_string = char == '"'
            out.append(char)
        elif char == '"':
            in_string = False
            out.append(char)
        elif char == "\\":
            follower = text[i + 1 : i + 2]
            if follower == "u" and len(text) >= i + 6 and set(text[i + 2 : i + 6]) <= _HEX:
                out.append(text[i : i + 6])
                i += 6
                continue
            if follower and follower in _VALID_ESCAPES:
                out.append(text[i : i + 2])
                i += 2
                continue
            out.append("\\\\" if follower else "\\")  # a backslash at the very end: unterminated anyway
        else:
            out.append(f"\\u{ord(char):04x}" if char < " " else char)
        i += 1
    return "".join(out)


def strict_oracle(text: str) -> dict[str, Any] | None:
    """What finish() must return, or None when it must raise."""
    if not text.strip(" \t\n\r"):
        return {}

    def reject_constant(name: str) -> Any:
        raise ValueError(f"{name} is not valid JSON")

    try:
        value = json.loads(pi_repair(text), parse_constant=reject_constant)
    except (ValueError, RecursionError):
        return None
    return value if isinstance(value, dict) else None


# ---------------------------------------------------------------- examples

PARTIAL_EXAMPLES = [
    ("", {}),
    ("   ", {}),
    ("garbage", {}),
    ("[1, 2]", {}),
    ('"abc', {}),
    ("{", {}),
    ('{"ab', {}),
    ('{"a"', {}),
    ('{"a":', {}),
    ('{"a": ', {}),
    ('{"a":"', {"a": ""}),
    ('{"a":"hel', {"a": "hel"}),
    ('{"a":"h\\', {"a": "h"}),
    ('{"a":"h\\u00', {"a": "h"}),
    ('{"a":"h\\u00e9', {"a": "hé"}),
    ('{"a":"x\\ud83d', {"a": "x"}),
    ('{"a":"x\\ud83d\\ude0', {"a": "x"}),
    ('{"a":"x\\ud83d\\ude00', {"a": "x😀"}),
    ('{"a":"\\t\\"\\\\\\/\\n', {"a": '\t"\\/\n'}),
    ('{"a":tru', {}),
    ('{"a":true', {"a": True}),
    ('{"a":nul', {}),
    ('{"a":fals', {}),
    ('{"a":-', {}),
    ('{"a":1.', {}),
    ('{"a":1e', {}),
    ('{"a":1e-', {}),
    ('{"a":12', {"a": 12}),
    ('{"a":-0', {"a": 0}),
    ('{"a":1.5e3', {"a": 1500.0}),
    ('{"a":12,', {"a": 12}),
    ('{"a":12, "b', {"a": 12}),
    ('{"a":[', {"a": []}),
    ('{"a":[1, 2.', {"a": [1]}),
    ('{"a":[true, fa', {"a": [True]}),
    ('{"a":[1,"x', {"a": [1, "x"]}),
    ('{"a":{"b', {"a": {}}),
    ('{"a":[{"b":[1,{"c":"d', {"a": [{"b": [1, {"c": "d"}]}]}),
    ('{"a": 1, "b": [null, {}], "c": "x"}', {"a": 1, "b": [None, {}], "c": "x"}),
    ('{"a":"\\ud800"}', {"a": "\ud800"}),  # lone surrogates: json.loads keeps them
    ('{"a":"x\\ud83d"}', {"a": "x\ud83d"}),
    ('{"a":1-2}', {"a": 1}),  # invalid: frozen at the longest valid prefix
    # pi's repair: raw control characters and invalid escapes inside strings are text
    ('{"a":"ok", "b":"x\\q', {"a": "ok", "b": "x\\q"}),
    ('{"p":"C:\\Users\\x"}', {"p": "C:\\Users\\x"}),
    ('{"p":"C:\\users', {"p": "C:\\users"}),
    ('{"p":"\\u12G4"}', {"p": "\\u12G4"}),
    ('{"p":"x\\ud83d\\uZZZZ"}', {"p": "x\ud83d\\uZZZZ"}),
    ('{"code":"def f():\n\treturn 1\n"}', {"code": "def f():\n\treturn 1\n"}),
    ('{"code":"a\n\tb', {"code": "a\n\tb"}),
    ('{"k\tey":"\x01\x1f"}', {"k\tey": "\x01\x1f"}),
    ('{"a":"\n\\n\\', {"a": "\n\n"}),  # a trailing backslash waits for the next delta
]


@pytest.mark.parametrize(("text", "expected"), PARTIAL_EXAMPLES)
def test_parse_streaming_json_examples(text: str, expected: dict[str, Any]) -> None:
    assert parse_streaming_json(text) == expected


@pytest.mark.parametrize(("text", "expected"), PARTIAL_EXAMPLES)
def test_incremental_snapshot_examples_char_by_char(text: str, expected: dict[str, Any]) -> None:
    parser = IncrementalJSONParser()
    for char in text:
        parser.feed(char)
        assert isinstance(parser.snapshot(), dict)
    assert parser.snapshot() == expected
    assert parser.text == text


def test_parse_streaming_json_never_raises_on_odd_input() -> None:
    for text in [
        '{"a":1} x',
        '{"a":NaN}',
        "{" * 5000,
        '{"a":' + "[" * 5000,
        "\ufeff{}",
        "{\x00",
        '{"a":1' + "0" * 5000,
    ]:
        assert isinstance(parse_streaming_json(text), dict)


def test_finish_strict() -> None:
    assert IncrementalJSONParser().finish() == {}
    parser = IncrementalJSONParser()
    parser.feed('{"a": [1, 2.5e-3, "x\\u00e9", true, false, null, {}]}\n')
    assert parser.finish() == {"a": [1, 2.5e-3, "xé", True, False, None, {}]}
    bad = ['{"a":1,}', "[1]", '"x"', "1", '{"a":01}', '{"a":NaN}', "{} {}", "{'a':1}", "{\n\x01}", '{"a":1\x00}']
    bad += ['{"a":1]', '{"a":[1}}', '{"a":[1,]}', "{,}", '{"a" 1}', '{"a":1 "b":2}', '{"a":tru}', '{"a":nulll}']
    bad += ['{"a":-}', '{"a":1.}', '{"a":.5}', '{"a":1e}', '{"a":+1}']
    for text in [*bad, '{"a":', '{"a":"x', '{"a":1', "{"]:
        parser = IncrementalJSONParser()
        parser.feed(text)
        with pytest.raises(json.JSONDecodeError):
            parser.finish()


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('{"a":"\\x"}', "\\x"),
        ('{"a":"\n"}', "\n"),
        ('{"a":"\\u12G4"}', "\\u12G4"),
        ('{"a":"\\ud83d\\uZZZZ"}', "\ud83d\\uZZZZ"),
        ('{"a":"C:\\Users\\x\tend"}', "C:\\Users\\x\tend"),
        ('{"a":"\\\\q"}', "\\q"),  # an escaped backslash stays one backslash
    ],
)
def test_finish_keeps_control_characters_and_invalid_escapes_as_text(text: str, expected: str) -> None:
    """pi's JSON repair: what json.loads refuses inside a string is kept, in one piece or char by char."""
    for sizes in ([len(text)], [1], [2, 3]):
        parser = feed_in_chunks(text, sizes)
        assert parser.snapshot() == {"a": expected}
        assert parser.finish() == {"a": expected} == json.loads(pi_repair(text))
    assert parse_streaming_json(text) == {"a": expected}


def test_parser_freezes_at_last_good_snapshot_after_invalid_input() -> None:
    parser = IncrementalJSONParser()
    parser.feed('{"a": "abc')
    assert parser.snapshot() == {"a": "abc"}
    parser.feed('d", "b": 12x, "c": 1}')
    frozen = parser.snapshot()
    assert frozen == {"a": "abcd", "b": 12}  # the longest valid prefix
    parser.feed('"more": "data"}')
    assert parser.snapshot() == frozen
    with pytest.raises(json.JSONDecodeError):
        parser.finish()


def test_number_that_turns_invalid_is_hidden_like_one_shot() -> None:
    parser = IncrementalJSONParser()
    parser.feed('{"a": "x", "b": 1')
    assert parser.snapshot() == {"a": "x", "b": 1}
    parser.feed(".}")
    assert parser.snapshot() == parse_streaming_json('{"a": "x", "b": 1.}') == {"a": "x"}


@pytest.mark.parametrize("escaped", ["\\ud83d\\ude00", "\\uD83D\\uDE00", "\\\\", '\\"', "\\u00e9", "\\n"])
def test_escapes_split_at_every_position(escaped: str) -> None:
    text = '{"e\\u00e9": "a' + escaped + 'b", "k": ["' + escaped + '"]}'
    expected = json.loads(text)
    for cut in range(len(text) + 1):
        parser = IncrementalJSONParser()
        parser.feed(text[:cut])
        partial = parser.snapshot()
        assert partial == parse_streaming_json(text[:cut])
        for value in partial.values():  # never a dangling half of a surrogate pair
            assert "\ud83d" not in str(value)
        parser.feed(text[cut:])
        assert parser.snapshot() == expected
        assert parser.finish() == expected


def test_snapshot_is_live_and_cheap() -> None:
    parser = IncrementalJSONParser()
    parser.feed('{"a": "x')
    first = parser.snapshot()
    assert parser.snapshot() is first
    parser.feed('yz"}')
    assert parser.snapshot() is first and first == {"a": "xyz"}


def test_each_delta_is_scanned_once(monkeypatch: pytest.MonkeyPatch) -> None:
    # O(total bytes): the tokenizer sees every character once (plus the few of an
    # escape split across deltas), not the whole buffer again per delta.
    # (The wall-clock comparison with a re-parsing baseline is benchmarks/stream_args.py.)
    scanned: list[int] = []
    real_scan = IncrementalJSONParser._scan

    def counting_scan(self: IncrementalJSONParser, buf: str, base: int) -> None:
        scanned.append(len(buf))
        real_scan(self, buf, base)

    monkeypatch.setattr(IncrementalJSONParser, "_scan", counting_scan)
    content = 'line "one"\n\tunicode é 😀 \\ \u00e9\n' * 2000
    text = json.dumps({"path": "x.py", "content": content, "n": [1, 2.5, True, None]}, ensure_ascii=False)
    parser = IncrementalJSONParser()
    for position in range(0, len(text), 10):
        parser.feed(text[position : position + 10])
        parser.snapshot()
    assert parser.finish() == json.loads(text)
    assert len(scanned) == len(range(0, len(text), 10))
    assert sum(scanned) < len(text) * 1.2


# ---------------------------------------------------------------- properties

_interesting_chars = st.sampled_from(list('"\\/\b\f\n\r\t\x00\x1f\x7f é€\u2028😀'))
_text = st.text(
    st.one_of(st.characters(), _interesting_chars, st.characters(categories=["Cs"])),
    max_size=12,
)
_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.floats(allow_nan=False, allow_infinity=False),
    _text,
)
_json_values = st.recursive(
    _scalars,
    lambda children: st.lists(children, max_size=5) | st.dictionaries(_text, children, max_size=5),
    max_leaves=20,
)
_documents = st.dictionaries(_text, _json_values, max_size=6)
_dump_options = st.fixed_dictionaries(
    {
        "ensure_ascii": st.booleans(),
        "indent": st.sampled_from([None, 0, 2, "\t"]),
        "separators": st.sampled_from([None, (",", ":"), (" , ", " : ")]),
    }
)


@SETTINGS
@given(document=_documents, options=_dump_options)
def test_every_prefix_parses(document: dict[str, Any], options: dict[str, Any]) -> None:
    # parse_streaming_json hides any exception behind {}; call the unguarded
    # paths so that a prefix that raises fails the test.
    text = json.dumps(document, **options)
    parser = IncrementalJSONParser()
    for cut in range(len(text)):
        prefix = text[:cut]
        expected = parse_prefix(prefix)
        assert isinstance(expected, dict)
        assert parser.snapshot() == expected == parse_streaming_json(prefix)
        parser.feed(text[cut])  # char by char
    assert parser.snapshot() == parse_prefix(text) == document
    assert parser.finish() == document


@SETTINGS
@given(document=_documents, options=_dump_options, sizes=st.lists(st.integers(1, 12), min_size=1, max_size=8))
def test_incremental_matches_one_shot_on_every_chunk(
    document: dict[str, Any], options: dict[str, Any], sizes: list[int]
) -> None:
    text = json.dumps(document, **options)
    parser = IncrementalJSONParser()
    position = 0
    index = 0
    while position < len(text):
        size = sizes[index % len(sizes)]
        index += 1
        parser.feed(text[position : position + size])
        position += size
        assert parser.snapshot() == parse_streaming_json(text[:position])
        if position < len(text):  # a proper prefix of an object is never valid
            with pytest.raises(json.JSONDecodeError):
                parser.finish()
    assert parser.text == text
    assert parser.snapshot() == json.loads(text)
    assert parser.finish() == json.loads(text)


@SETTINGS
@given(
    document=_documents,
    edits=st.lists(
        st.tuples(st.integers(0, 10**6), st.sampled_from(["", *'{}[]:,"\\ 0-.eE+tfnu1x\n\t\x01'])), max_size=3
    ),
    delete=st.booleans(),
    sizes=st.lists(st.integers(1, 7), min_size=1, max_size=5),
)
def test_corrupted_documents_agree_with_json_loads(
    document: dict[str, Any], edits: list[tuple[int, str]], delete: bool, sizes: list[int]
) -> None:
    text = json.dumps(document, ensure_ascii=False)
    for position, char in edits:
        position %= len(text) + 1
        text = text[:position] + char + text[position + (1 if delete else 0) :]
    parser = feed_in_chunks(text, sizes)
    expected = strict_oracle(text)
    if expected is None:
        with pytest.raises(ValueError):
            parser.finish()
    else:
        assert parser.finish() == expected
