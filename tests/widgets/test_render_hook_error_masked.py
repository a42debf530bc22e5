"""Once broken (fixed):
a ``render_call`` hook that fails quotes its (unmasked) arguments in the error note.

``render._run_hook`` masks what a hook returns, but when the hook raises, the text of the exception is
returned unmasked and drawn by ``_hook_error`` under the call. The hook is given ``block.arguments``
(the raw, unmasked arguments), so any ordinary error that quotes a value (``int('sk-...')``,
``ValueError(f"bad {arg}")``) puts the key in the widget HTML.
"""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from pi_kernel.widgets.render import call_html
from pi_kernel.widgets.turn_state import ToolCallBlock

KEY = "sk-live-Zq8Lm2Np4Rt6Vx8Bq0Wc"


@pytest.fixture(autouse=True)
def keys(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", KEY)


def test_a_failing_render_call_hook_does_not_show_the_key_in_its_error_note() -> None:
    block = ToolCallBlock(id="c1", name="deploy")
    block.arguments = {"retries": KEY}
    block.status = "pending"
    definition = SimpleNamespace(render_call=lambda args: f"deploy x{int(args['retries'])}")
    html = call_html(block, definition)
    assert "render hook failed" in html  # the hook's error is drawn
    assert KEY not in html
    assert KEY[8:20] not in html
