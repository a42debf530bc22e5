"""Once broken (fixed):
a key that becomes a secret *during* a turn (``load_dotenv()`` in the agent's code)
is not masked in the tool's live output.

``ToolCallBlock._output_masking`` is a ``MaskedStream``, which reads the secret values once, when the block
is made (at the call's first streamed byte, before the tool runs). The widget view's live output goes out as
``stream`` messages (``StreamOutput``), which ``outgoing`` masks through one ``MaskedStream`` per request and
stream name, made at the request's first ``stream`` message: also before the tool ran when an earlier call
of the same turn printed anything. So a python call that loads a ``.env`` and prints (or logs) the key has it
in the view model's live output unmasked (``block.output``, what the live views draw). In a real kernel run
(widgets, auto mode, approve clicked) the key did not reach iopub in my probe: the python tool's live output
was not streamed before its result, and comm messages are masked with fresh secrets; the gap is in the view
model (and, in principle, in outgoing's per-request ``MaskedStream``, whose secrets are read once too).
"""

from __future__ import annotations

import pytest

from pi_kernel.widgets.turn_state import ToolCallBlock

KEY = "Zq8Lm2Np4Rt6Vx8Bq0WcHx7K"


def test_the_view_model_masks_live_output_of_a_key_set_after_the_block_was_made(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("WEATHER_API_KEY", raising=False)
    block = ToolCallBlock(id="c1", name="python")
    monkeypatch.setenv("WEATHER_API_KEY", KEY)  # the tool loads it
    block.set_output(f"loaded {KEY}\n")
    assert KEY not in block.output
