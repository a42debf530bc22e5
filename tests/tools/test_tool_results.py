"""Return values → ``AgentToolResult``, errors, and the ``ToolRetry`` budget.

No recursion on model- or tool-controlled depth: deeply nested JSON text and return values give a clean result.
"""

from __future__ import annotations

import asyncio
import base64
import dataclasses
import datetime
import io
import json
import sys
import threading

import matplotlib
import pandas as pd
import pytest
from coercion_helpers import coerce_with_schema
from PIL import Image
from pydantic import BaseModel
from scripted_model import ScriptedModel, text_message, tool_call, tool_call_message, tool_results

from pi_kernel.agent import Agent
from pi_kernel.agent.types import AgentToolResult
from pi_kernel.ai import ImageContent, TextContent
from pi_kernel.tools import ToolRegistry, ToolRetry, tool, wrap_tool_definition
from pi_kernel.tools.builtin import prepare_edit_arguments
from pi_kernel.tools.definition import ToolRetryError
from pi_kernel.tools.results import MAX_IMAGE_BASE64_BYTES, MAX_SUMMARY_CHARS, to_agent_tool_result

matplotlib.use("Agg")
import matplotlib.pyplot as plt

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


class Point(BaseModel):
    x: int
    y: int


@dataclasses.dataclass
class Box:
    width: float
    tags: list[str]


def texts(result: AgentToolResult) -> list[str]:
    return [block.text for block in result.content if isinstance(block, TextContent)]


def decoded_image(result: AgentToolResult) -> tuple[str, bytes]:
    (block,) = result.content
    assert isinstance(block, ImageContent)
    return block.mime_type, base64.b64decode(block.data)


# --------------------------------------------------------------------------- the conversion table


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("plain text", "plain text"),
        ({"a": 1, "b": [True, None]}, '{"a": 1, "b": [true, null]}'),
        ([1, "two", 3.5], '[1, "two", 3.5]'),
        ((1, 2), "[1, 2]"),
        (42, "42"),
        (2.5, "2.5"),
        (True, "true"),
        (None, "null"),
        ([], "[]"),
        (Point(x=1, y=2), '{"x":1,"y":2}'),
        ({"p": Point(x=3, y=4)}, '{"p": {"x": 3, "y": 4}}'),
        (Box(1.5, ["a"]), '{"width": 1.5, "tags": ["a"]}'),
        ("héllo ✓", "héllo ✓"),
        (b"utf-8 bytes", "utf-8 bytes"),
        (b"\x00\xff\xfe", "<3 bytes of binary data>"),
    ],
    ids=lambda value: type(value).__name__,
)
def test_values_become_text_or_json(value: object, expected: str) -> None:
    result = to_agent_tool_result(value)
    assert texts(result) == [expected]
    assert result.details is None


def test_png_and_jpeg_bytes_become_images_with_their_mime_type() -> None:
    buffer = io.BytesIO()
    Image.new("RGB", (4, 3), "red").save(buffer, format="JPEG")
    jpeg = buffer.getvalue()
    png = PNG_MAGIC + b"rest-of-png"
    assert decoded_image(to_agent_tool_result(png)) == ("image/png", png)
    assert decoded_image(to_agent_tool_result(jpeg)) == ("image/jpeg", jpeg)


def test_pil_image_becomes_a_png_image() -> None:
    mime, data = decoded_image(to_agent_tool_result(Image.new("RGB", (5, 7), "blue")))
    assert mime == "image/png" and data.startswith(PNG_MAGIC)
    assert Image.open(io.BytesIO(data)).size == (5, 7)
    # A mode PNG cannot store is converted instead of failing.
    mime, data = decoded_image(to_agent_tool_result(Image.new("CMYK", (2, 2))))
    assert mime == "image/png" and Image.open(io.BytesIO(data)).mode == "RGBA"


def test_a_big_image_from_a_tool_is_bounded_as_read_bounds_it() -> None:
    @tool(registry=False)
    def render(width: int, height: int) -> Image.Image:
        """Render a picture."""
        return Image.new("RGB", (width, height), "green")

    result = wrap_tool_definition(render).execute("c1", {"width": 3000, "height": 1500})
    note, image = result.content
    assert isinstance(note, TextContent) and isinstance(image, ImageContent)
    assert note.text == (
        "[Image: original 3000x1500, displayed at 2000x1000. Multiply coordinates by 1.50 to map to original image.]"
    )
    assert Image.open(io.BytesIO(base64.b64decode(image.data))).size == (2000, 1000)
    assert len(image.data) < MAX_IMAGE_BASE64_BYTES
    # Image bytes go through the same bounds.
    buffer = io.BytesIO()
    Image.new("L", (2500, 100)).save(buffer, format="PNG")
    note, image = to_agent_tool_result(buffer.getvalue()).content
    assert isinstance(image, ImageContent)
    assert Image.open(io.BytesIO(base64.b64decode(image.data))).size == (2000, 80)


def test_matplotlib_figure_and_axes_become_png_images() -> None:
    figure, axes = plt.subplots(figsize=(2, 2))
    try:
        axes.plot([1, 2, 3], [3, 1, 2])
        for value in (figure, axes):
            mime, data = decoded_image(to_agent_tool_result(value))
            assert mime == "image/png" and data.startswith(PNG_MAGIC)
    finally:
        plt.close(figure)


def test_dataframe_gives_text_to_the_model_and_html_in_the_display_details() -> None:
    frame = pd.DataFrame({"city": ["Paris", "Oslo"], "temp": [21, 9]})
    result = to_agent_tool_result(frame)
    assert texts(result) == [str(frame)]
    display = result.details["display"]
    assert display["text/html"] == frame._repr_html_()
    assert display["text/plain"] == str(frame)


def test_markdown_repr_is_the_model_text_and_html_only_summaries_are_truncated() -> None:
    class Report:
        def _repr_markdown_(self) -> str:
            return "# Report\n\n*all good*"

        def _repr_html_(self) -> str:
            return "<h1>Report</h1>"

    result = to_agent_tool_result(Report())
    assert texts(result) == ["# Report\n\n*all good*"]
    assert result.details["display"]["text/html"] == "<h1>Report</h1>"
    assert result.details["display"]["text/markdown"] == "# Report\n\n*all good*"

    class Huge:
        def _repr_html_(self) -> str:
            return "<p>huge</p>"

        def __str__(self) -> str:
            return "x" * (MAX_SUMMARY_CHARS + 50)

    (text,) = texts(to_agent_tool_result(Huge()))
    assert text.startswith("x" * MAX_SUMMARY_CHARS)
    assert text.endswith("[... 50 more characters truncated]")


def test_a_failing_rich_repr_falls_back_to_str() -> None:
    class Broken:
        def _repr_html_(self) -> str:
            raise RuntimeError("no html today")

        def __str__(self) -> str:
            return "broken but readable"

    result = to_agent_tool_result(Broken())
    assert texts(result) == ["broken but readable"] and result.details is None


def test_results_and_content_blocks_pass_through() -> None:
    original = AgentToolResult([TextContent("kept")], details={"diff": "+1"}, terminate=True)
    assert to_agent_tool_result(original) is original
    blocks = [TextContent("a"), ImageContent("aGk=", "image/png")]
    assert to_agent_tool_result(blocks).content == blocks
    assert to_agent_tool_result(TextContent("one")).content == [TextContent("one")]


def test_a_decorated_tool_converts_its_return_value() -> None:
    @tool(registry=False)
    def table(rows: int) -> pd.DataFrame:
        """A table."""
        return pd.DataFrame({"n": range(rows)})

    result = wrap_tool_definition(table).execute("c1", {"rows": 2})
    assert "text/html" in result.details["display"]
    assert texts(result) == [str(pd.DataFrame({"n": range(2)}))]


def test_an_exception_propagates_for_the_loop_to_turn_into_an_error_result() -> None:
    @tool(registry=False)
    def explode(reason: str) -> str:
        """Fail."""
        raise ValueError(f"cannot: {reason}")

    with pytest.raises(ValueError, match="cannot: because"):
        wrap_tool_definition(explode).execute("c1", {"reason": "because"})


# --------------------------------------------------------------------------- ToolRetry


def make_flaky(max_retries: int = 3):
    outcomes: list[str] = []

    @tool(registry=False, max_retries=max_retries)
    def lookup(city: str) -> str:
        """Look a city up."""
        if city == "boom":
            raise RuntimeError("backend down")
        if city != "Paris":
            raise ToolRetry(f"Unknown city {city!r}; did you mean 'Paris'?")
        outcomes.append(city)
        return "found"

    return wrap_tool_definition(lookup)


def retry_text(wrapped, city: str = "Pariss") -> str:
    with pytest.raises(ToolRetry) as caught:
        wrapped.execute("c1", {"city": city})
    assert isinstance(caught.value, ToolRetryError)
    return str(caught.value)


def test_tool_retry_gives_a_hint_then_stops_after_the_budget() -> None:
    wrapped = make_flaky()
    for attempt in (1, 2, 3):
        text = retry_text(wrapped)
        assert text == (
            f"Unknown city 'Pariss'; did you mean 'Paris'?\n\n"
            f"Fix the arguments and call lookup again (retry {attempt} of 3)."
        )
    stop = retry_text(wrapped)
    assert stop.startswith("Unknown city 'Pariss'; did you mean 'Paris'?\n\n")
    assert "Tool lookup has failed 4 times in a row; the retry limit (3) is reached." in stop
    assert "Stop retrying lookup" in stop
    assert "Stop retrying lookup" in retry_text(wrapped)  # still told to stop until a success


def test_a_success_resets_the_retry_count() -> None:
    wrapped = make_flaky(max_retries=2)
    retry_text(wrapped)
    retry_text(wrapped)
    assert wrapped.execute("c1", {"city": "Paris"}).content == [TextContent("found")]
    assert retry_text(wrapped).endswith("(retry 1 of 2).")


def test_each_wrapped_instance_has_its_own_budget_and_other_errors_do_not_count() -> None:
    first, second = make_flaky(max_retries=1), make_flaky(max_retries=1)
    retry_text(first)
    with pytest.raises(RuntimeError, match="backend down"):
        first.execute("c1", {"city": "boom"})
    assert "Stop retrying" in retry_text(first)  # the RuntimeError neither reset nor counted
    assert first.retry_budget.failures == 2
    assert retry_text(second).endswith("(retry 1 of 1).")


def test_retry_count_is_exact_under_parallel_calls() -> None:
    wrapped = make_flaky(max_retries=1000)
    barrier = threading.Barrier(8)

    def worker() -> None:
        barrier.wait()
        for _ in range(50):
            with pytest.raises(ToolRetry):
                wrapped.execute("c1", {"city": "Nowhere"})

    threads = [threading.Thread(target=worker) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert wrapped.retry_budget.failures == 400


def test_async_tool_retry_uses_the_same_budget() -> None:
    @tool(registry=False, max_retries=1)
    async def fetch(url: str) -> str:
        """Fetch."""
        raise ToolRetry("URL must start with https://")

    wrapped = wrap_tool_definition(fetch)

    async def run_twice() -> list[str]:
        messages = []
        for _ in range(2):
            with pytest.raises(ToolRetry) as caught:
                await wrapped.execute("c1", {"url": "ftp://x"})
            messages.append(str(caught.value))
        return messages

    first, second = asyncio.run(run_twice())
    assert first.endswith("(retry 1 of 1).")
    assert "Stop retrying fetch" in second


async def test_the_retry_budget_starts_afresh_with_each_prompt() -> None:
    """Failures spent in one prompt do not tell an unrelated later prompt to stop retrying."""
    registry = ToolRegistry()

    @tool(registry=registry, max_retries=1)
    def lookup(city: str) -> str:
        """Look a city up."""
        raise ToolRetry(f"Unknown city {city!r}")

    bad = {"city": "Pariss"}
    model = ScriptedModel(
        [
            tool_call_message(tool_call("lookup", bad)),
            tool_call_message(tool_call("lookup", bad)),
            text_message("I give up."),
            tool_call_message(tool_call("lookup", bad)),
            text_message("Still unknown."),
        ]
    )
    agent = Agent(model.model, stream_fn=model, prepare_next_turn=registry.prepare_next_turn)
    await agent.prompt("Where is Pariss?")
    first_prompt = [result.content[0].text for result in tool_results(agent.state.messages)]
    assert first_prompt[0].endswith("(retry 1 of 1).")
    assert "Stop retrying lookup" in first_prompt[1]  # within a prompt the budget is spent

    await agent.prompt("And Pariss again, a new question?")
    later = tool_results(agent.state.messages)[len(first_prompt) :]
    assert [result.content[0].text for result in later] == [
        "Unknown city 'Pariss'\n\nFix the arguments and call lookup again (retry 1 of 1)."
    ]


def test_json_text_is_valid_json_for_nested_values() -> None:
    value = {"points": [Point(x=1, y=2)], "box": Box(2.0, ["t"]), "when": datetime.date(2024, 5, 1)}
    assert json.loads(texts(to_agent_tool_result(value))[0]) == {
        "points": [{"x": 1, "y": 2}],
        "box": {"width": 2.0, "tags": ["t"]},
        "when": "2024-05-01",
    }


# --------------------------------------------------------------------------- recursion depth


DEPTH = sys.getrecursionlimit() * 20


def test_edit_arguments_with_edits_as_deeply_nested_json_text_do_not_recurse() -> None:
    """edit.py prepare_edit_arguments: ``json.loads(edits)`` catches ValueError only."""
    raw = {"path": "f.txt", "edits": "[" * DEPTH + "]" * DEPTH}
    prepare_edit_arguments(raw)  # RecursionError today


def test_coercing_deeply_nested_json_text_to_an_array_does_not_recurse() -> None:
    """tool.py _convert: a string given for an array/object parameter is json.loads'ed, catching ValueError only."""
    schema = {"type": "object", "properties": {"rows": {"type": "array"}}}
    coerce_with_schema({"rows": "[" * DEPTH + "]" * DEPTH}, schema)  # RecursionError today


def test_a_user_tool_returning_deeply_nested_data_gets_a_result_text() -> None:
    """results.py to_json_text: ``json.dumps`` of a user tool's return value recurses on its depth
    (the tool ran; its result becomes a RecursionError text instead of a bounded rendering)."""
    from pi_kernel.tools.results import to_json_text

    value: list[object] = []
    for _ in range(DEPTH):
        value = [value]
    text = to_json_text(value)
    assert text.startswith("[value nested too deeply for JSON"), text[:200]
    assert len(text) < 10_000
