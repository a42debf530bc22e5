"""Once broken (fixed):
a key in another spelling (hex, base64, spaced, decimal bytes, ``\\x`` escapes) that
arrives in small pieces is not masked by ``MaskedStream``, so neither the view model's live tool output
(``ToolCallBlock.set_output``) nor streamed text (``TextBlock.append``) masks it.

``mask`` finds these forms in whole text (``secrets`` module doc), and ``MaskedStream.feed`` masks each piece
with them, but what it holds back (``_unfinished_start``) is only what may begin the *plain* key (or a key
spaced by markup tags): a piece ending in the first hex digits of the key goes out at once, each piece shorter
than a ``FRAGMENT_CHARS`` run of the form, and the whole encoded key is on the screen. A program printing its
output a few characters at a time (a progress-style loop, ``xxd -p`` through a slow pipe, a streaming HTTP
response) or a model's token deltas give such pieces; ``test_widgets_secrets.test_masked_stream_masks_keys_
cut_anywhere`` tries the plain key only.
"""

from __future__ import annotations

import base64

import pytest

from pi_kernel.ai.secrets import MaskedStream, mask
from pi_kernel.widgets.turn_state import TextBlock, ToolCallBlock

KEY = "sk-live-Zq8Lm2Np4Rt6Vx8Bq0Wc"
FORMS = {
    "hex": KEY.encode().hex(),
    "base64": base64.b64encode(KEY.encode()).decode(),
    "spaced": " ".join(KEY),
    "decimal": " ".join(str(byte) for byte in KEY.encode()),
    "xhex": "".join(f"\\x{byte:02x}" for byte in KEY.encode()),
}


@pytest.fixture(autouse=True)
def keys(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", KEY)


def _pieces(text: str, size: int) -> list[str]:
    return [text[i : i + size] for i in range(0, len(text), size)]


@pytest.mark.parametrize("form", FORMS)
def test_masked_stream_masks_an_encoded_key_sent_in_pieces(form: str) -> None:
    text = f"value: {FORMS[form]}\n"
    assert FORMS[form] not in mask(text, [KEY])  # masked whole
    stream = MaskedStream([KEY])
    shown = "".join(stream.feed(piece) for piece in _pieces(text, 4)) + stream.flush()
    assert FORMS[form] not in shown


def test_a_tools_live_output_printing_the_hex_of_a_key_a_few_characters_at_a_time_is_masked() -> None:
    block = ToolCallBlock(id="c1", name="python")
    printed = ""
    for piece in _pieces(f"key hex: {FORMS['hex']}\n", 6):
        printed += piece
        block.set_output(printed)  # each tool_execution_update carries the whole output so far
    assert FORMS["hex"] not in block.output


def test_streamed_text_spelling_the_key_in_base64_is_masked() -> None:
    block = TextBlock("text")
    for piece in _pieces(f"Encoded: {FORMS['base64']} done", 3):
        block.append(piece)
    assert FORMS["base64"] not in block.text


PASSWORD = "Zq7!pW2#vR9$kT4%mX8^bN3&"
"""A value of a secret-named variable (``DB_PASSWORD``), not shaped like a key."""


@pytest.mark.parametrize(
    "spelled",
    [
        "".join(f"\\x{byte:02x}" for byte in PASSWORD.encode()),
        "".join(f"&#{byte};" for byte in PASSWORD.encode()),
        "".join(f"%{byte:02x}" for byte in PASSWORD.encode()),
        "<b></b>".join(PASSWORD),
    ],
)
def test_a_cut_that_ends_inside_an_escape_leaves_nothing_of_the_value(spelled: str) -> None:
    """``cut`` stops before what may begin a masked form; an escape or tag begun at the very end (``\\x``,
    ``&#``, ``%``, ``<b></``) is the next byte's separator, so the mask that follows finds the value whole."""
    from pi_kernel.ai.secrets import cut

    text = "value: " + spelled + " and more text after it"
    for limit in range(len("value: "), len("value: ") + len(spelled) + 1):
        shown = mask(cut(text, limit, [PASSWORD]), [PASSWORD])
        assert not any(spelled[:size] in shown for size in range(6, len(spelled) + 1)), (limit, shown[-40:])


@pytest.mark.parametrize("form", ["spaced", "decimal", "hex spaced", "entities"])
def test_a_key_sent_one_character_per_piece_is_masked(form: str) -> None:
    """A program that writes a spelled-out key a character or two at a time (each piece flushed) must not get
    it past ``MaskedStream``: a short lone word may be a piece of a form, not a word that ended."""
    text = {
        "spaced": " ".join(KEY),
        "decimal": str(list(KEY.encode())),
        "hex spaced": KEY.encode().hex(" "),
        "entities": "".join(f"&#{byte};" for byte in KEY.encode()),
    }[form]
    for size in (1, 2):
        stream = MaskedStream([KEY])
        shown = "".join(stream.feed(piece) for piece in _pieces(text, size)) + stream.flush()
        assert text[: len(text) // 2] not in shown, (size, shown[:80])
