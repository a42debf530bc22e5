"""The ``python`` tool: a notebook cell run by the agent — outputs, namespace, rich displays, figures, errors."""

from __future__ import annotations

import asyncio
import base64
import json
import os
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import matplotlib
import pytest
from builtin_helpers import call_tool, make_ctx, text_of
from scripted_model import ScriptedModel, run_loop, text_message, tool_call, tool_call_message, tool_results, user

from pi_kernel.ai import AbortController, ImageContent
from pi_kernel.tools import wrap_tool_definition
from pi_kernel.tools.builtin import create_python_tool

matplotlib.use("Agg")

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


async def run(code: str, tmp_path: Path, namespace: dict[str, Any] | None = None, **kwargs: Any) -> Any:
    tool = kwargs.pop("tool", None) or create_python_tool()
    return await call_tool(tool, {"code": code}, make_ctx(tmp_path, namespace=namespace), **kwargs)


async def test_stdout_stderr_and_last_expression(tmp_path: Path) -> None:
    result = await run("import sys\nprint('hello')\nprint('warn', file=sys.stderr)\n6 * 7", tmp_path)
    assert text_of(result) == "hello\nwarn\n42\n"
    assert result.details["outputs"] == [
        {"output_type": "stream", "name": "stdout", "text": "hello\n"},
        {"output_type": "stream", "name": "stderr", "text": "warn\n"},
        {"output_type": "execute_result", "data": {"text/plain": "42"}, "metadata": {}, "execution_count": None},
    ]
    assert result.details["truncation"] is None


async def test_semicolon_hides_the_value_and_none_shows_nothing(tmp_path: Path) -> None:
    assert text_of(await run("1 + 1;", tmp_path)) == "(no output)"
    assert text_of(await run("x = 5\nNone", tmp_path)) == "(no output)"


async def test_namespace_is_shared_between_calls(tmp_path: Path) -> None:
    tool = create_python_tool()
    await run("counter = 1\ndef bump():\n    global counter\n    counter += 1", tmp_path, tool=tool)
    await run("bump()", tmp_path, tool=tool)
    assert text_of(await run("counter", tmp_path, tool=tool)) == "2\n"
    notebook: dict[str, Any] = {"data": [3, 1, 2]}
    assert text_of(await run("sorted(data)", tmp_path, namespace=notebook, tool=tool)) == "[1, 2, 3]\n"
    await run("result = sum(data)", tmp_path, namespace=notebook, tool=tool)
    assert notebook["result"] == 6
    assert "result" not in text_of(await run("dir()", tmp_path, tool=tool))  # the private namespace stayed apart


async def test_exception_gives_output_and_the_user_traceback_only(tmp_path: Path) -> None:
    code = "print('before')\ndef f(x):\n    return 1 / x\nf(0)"
    with pytest.raises(RuntimeError) as failed:
        await run(code, tmp_path)
    text = str(failed.value)
    assert text.startswith("before\nTraceback (most recent call last):\n")
    assert "line 4, in <module>" in text and "return 1 / x" in text
    assert text.endswith("ZeroDivisionError: division by zero")
    assert "pi_kernel" not in text  # no frames of the tool itself


async def test_syntax_error_is_reported(tmp_path: Path) -> None:
    with pytest.raises(RuntimeError, match="SyntaxError"):
        await run("def broken(:\n    pass", tmp_path)


async def test_matplotlib_figure_lands_as_png_and_is_closed(tmp_path: Path) -> None:
    import matplotlib.pyplot as plt

    before = set(plt.get_fignums())
    result = await run("import matplotlib.pyplot as plt\nplt.plot([1, 2, 3])\nplt.title('t');", tmp_path)
    (output,) = [o for o in result.details["outputs"] if o["output_type"] == "display_data"]
    assert base64.b64decode(output["data"]["image/png"]).startswith(PNG_MAGIC)
    assert output["data"]["text/plain"].startswith("<Figure size")
    images = [block for block in result.content if isinstance(block, ImageContent)]
    assert len(images) == 1 and images[0].mime_type == "image/png"
    assert set(plt.get_fignums()) == before  # not left open to leak into the cell


async def test_figure_as_last_value_is_shown_once(tmp_path: Path) -> None:
    result = await run("import matplotlib.pyplot as plt\nfig, ax = plt.subplots()\nax.plot([0, 1])\nfig", tmp_path)
    kinds = [o["output_type"] for o in result.details["outputs"]]
    assert kinds == ["execute_result"]
    assert base64.b64decode(result.details["outputs"][0]["data"]["image/png"]).startswith(PNG_MAGIC)


async def test_at_most_three_images_reach_the_model(tmp_path: Path) -> None:
    code = "import matplotlib.pyplot as plt\nfor i in range(5):\n    plt.figure(); plt.plot([i, i + 1])"
    result = await run(code, tmp_path)
    assert len([o for o in result.details["outputs"] if o["output_type"] == "display_data"]) == 5
    assert len([b for b in result.content if isinstance(b, ImageContent)]) == 3
    assert "[2 more image(s) not attached; at most 3 per call]" in text_of(result)


async def test_rich_last_value_outside_ipython(tmp_path: Path) -> None:
    code = (
        "class Table:\n"
        "    def _repr_html_(self):\n        return '<b>t</b>'\n"
        "    def __repr__(self):\n        return 'Table()'\n"
        "Table()"
    )
    result = await run(code, tmp_path)
    assert result.details["outputs"][-1]["data"] == {"text/plain": "Table()", "text/html": "<b>t</b>"}
    assert text_of(result) == "Table()\n"


async def test_long_output_is_tail_truncated_with_the_full_text_saved(tmp_path: Path) -> None:
    result = await run("for i in range(1, 5001):\n    print(i)", tmp_path)
    path = result.details["full_output_path"]
    assert text_of(result).endswith(f"5000\n\n\n[Showing lines 3002-5001 of 5001. Full output: {path}]")
    assert Path(path).read_text() == "".join(f"{i}\n" for i in range(1, 5001))
    os.unlink(path)


async def test_top_level_await(tmp_path: Path) -> None:
    assert text_of(await run("import asyncio\nawait asyncio.sleep(0)\n'awaited'", tmp_path)) == "'awaited'\n"


async def test_capture_does_not_swallow_other_threads_output(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    started, release = threading.Event(), threading.Event()
    namespace: dict[str, Any] = {"started": started, "release": release}
    code = "print('from the tool')\nstarted.set()\nrelease.wait(10)\nprint('tool again')"
    task = asyncio.create_task(run(code, tmp_path, namespace=namespace))
    await asyncio.to_thread(started.wait, 10)
    print("from the kernel thread")  # while the tool's capture is active
    release.set()
    result = await task
    assert text_of(result) == "from the tool\ntool again\n"
    assert capsys.readouterr().out == "from the kernel thread\n"


async def test_abort_interrupts_running_code_and_frees_the_tool(tmp_path: Path) -> None:
    controller = AbortController()
    namespace: dict[str, Any] = {"started": threading.Event()}
    code = "started.set()\nwhile True:\n    pass"
    task = asyncio.create_task(run(code, tmp_path, namespace=namespace, signal=controller.signal))
    await asyncio.to_thread(namespace["started"].wait, 10)
    controller.abort()
    with pytest.raises(RuntimeError, match=r"^Operation aborted$"):
        await asyncio.wait_for(task, 10)
    assert text_of(await run("'still usable'", tmp_path)) == "'still usable'\n"


async def test_python_through_the_agent_loop_uses_the_context_namespace(tmp_path: Path) -> None:
    notebook: dict[str, Any] = {"__name__": "__main__"}
    tool = wrap_tool_definition(create_python_tool(), make_ctx(tmp_path, namespace=notebook))
    calls = [tool_call("python", {"code": "import math\nanswer = math.factorial(5)\nanswer"})]
    calls_2 = [tool_call("python", {"code": "raise ValueError('bad input')"})]
    model = ScriptedModel([tool_call_message(*calls), tool_call_message(*calls_2), text_message("done")])
    _events, messages = await run_loop(model, [user("compute")], tools=[tool])
    ok, failed = tool_results(messages)
    assert ok.content[0].text == "120\n" and not ok.is_error  # type: ignore[union-attr]
    assert notebook["answer"] == 120
    assert failed.is_error and failed.content[0].text.endswith("ValueError: bad input")  # type: ignore[union-attr]


CELL_WITH_DISPLAYS = """
from IPython.display import display, HTML, Markdown
print("text")
display(HTML("<i>rich</i>"))
handle = display(Markdown("first"), display_id=True)
handle.update(Markdown("second"))
import matplotlib.pyplot as plt
plt.plot([1, 2]);
"""

FIGURE_AS_VALUE = "import matplotlib.pyplot as plt\nfig = plt.figure()\nfig.gca().plot([3, 1])\nfig"

IPYTHON_SCRIPT = f"""
import json, sys, threading
import matplotlib
matplotlib.use("Agg")
from traitlets.config import Config
from IPython.core.interactiveshell import InteractiveShell

config = Config()
config.HistoryManager.hist_file = ":memory:"
shell = InteractiveShell.instance(config=config)
from pi_kernel.tools.builtin.python import run_python

box = {{}}
# On a worker thread, as the agent loop runs sync tools.
worker = threading.Thread(target=lambda: box.update(result=run_python({CELL_WITH_DISPLAYS!r}, shell.user_ns)))
worker.start()
worker.join()
figure_result = run_python({FIGURE_AS_VALUE!r}, shell.user_ns)
shell.display_pub.publish({{"text/plain": "kernel's own display"}})  # after the call: the real publisher
result = box["result"]
sys.stdout.write("\\nRESULT:" + json.dumps({{
    "text": result.content[0].text,
    "outputs": result.details["outputs"],
    "publisher": type(shell.display_pub).__name__,
    "figure_outputs": figure_result.details["outputs"],
}}))
"""


def test_display_in_ipython_lands_in_details_with_mime_bundles() -> None:
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(Path(__file__).parents[2]), os.environ.get("PYTHONPATH", "")]),
    }
    completed = subprocess.run(
        [sys.executable, "-c", IPYTHON_SCRIPT], capture_output=True, text=True, env=env, timeout=120, check=True
    )
    before, _, payload = completed.stdout.rpartition("RESULT:")
    report = json.loads(payload)
    outputs = report["outputs"]
    assert outputs[0] == {"output_type": "stream", "name": "stdout", "text": "text\n"}
    assert outputs[1]["output_type"] == "display_data" and outputs[1]["data"]["text/html"] == "<i>rich</i>"
    assert outputs[2]["data"]["text/markdown"] == "second"  # update_display replaced it in place
    assert base64.b64decode(outputs[3]["data"]["image/png"]).startswith(PNG_MAGIC)
    assert len(outputs) == 4
    assert report["text"].startswith("text\n<i>rich</i>\nfirst\nsecond\n")  # source forms, updates too
    assert report["publisher"] == "DisplayPublisher"  # the proxy was removed after the call
    assert "kernel's own display" in before  # not captured by the finished tool call
    (figure_output,) = report["figure_outputs"]  # a figure as the value: one image, not two
    assert figure_output["output_type"] == "execute_result"
    assert base64.b64decode(figure_output["data"]["image/png"]).startswith(PNG_MAGIC)
