"""The notebook bridge extension in a real JupyterLab 4 and Notebook 7 (headless Chromium).

The kernel side here is a probe, not pi-kernel's: an IPython startup file in
a stock ``python3`` kernel registers the ``pi.notebook`` comm target at start
(as the Pi kernel does) and keeps the front-end's replies; notebook cells then
send each request of the protocol (docs/notebook.md) and print the reply. The
tests assert the reply and what the notebook in the browser shows: an edit in
place, a stale edit refused, markdown and code cells inserted, cells deleted
(all or nothing), outputs and execution count set, a cell highlighted and
scrolled into view, the comm opened again after a restart and on
``pi.notebook.hello``.
"""

from __future__ import annotations

import json
import re
import shutil
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from browser_helpers import CHROMIUM, CHROMIUM_ARGS, JupyterLabServer, NotebookPage

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(not Path(CHROMIUM).exists(), reason=f"{CHROMIUM} is missing (apt-get install chromium)"),
]

PROBE = """
import asyncio, json, uuid
from IPython import get_ipython

_bridge = {"comm": None, "opens": [], "closed": 0, "replies": {}}


def _bridge_target(comm, msg):
    _bridge["comm"] = comm
    _bridge["opens"].append(msg["content"]["data"])

    def on_msg(message):
        data = message["content"]["data"]
        _bridge["replies"][data.get("reply_to")] = data

    def on_close(message):
        _bridge["closed"] += 1

    comm.on_msg(on_msg)
    comm.on_close(on_close)


get_ipython().kernel.comm_manager.register_target("pi.notebook", _bridge_target)


async def bridge(op, quiet=False, wait=10, **fields):
    request = uuid.uuid4().hex
    _bridge["comm"].send({"request": request, "op": op, **fields})
    for _ in range(int(wait / 0.025)):
        if request in _bridge["replies"]:
            reply = _bridge["replies"].pop(request)
            if not quiet:
                print("REPLY " + json.dumps(reply, sort_keys=True))
            return reply
        await asyncio.sleep(0.025)
    print("NO REPLY")


async def opens(count):
    for _ in range(400):
        if len(_bridge["opens"]) >= count:
            break
        await asyncio.sleep(0.025)
    print("OPENS " + json.dumps({"opens": _bridge["opens"], "closed": _bridge["closed"]}))
"""

FILLER = "\n\n".join(f"Filler paragraph {n}." for n in range(60))


def cell(
    kind: str, cell_id: str, source: str, outputs: list[dict[str, Any]] | None = None, count: int | None = None
) -> dict[str, Any]:
    if kind == "markdown":
        return {"cell_type": "markdown", "id": cell_id, "metadata": {}, "source": source}
    return {
        "cell_type": "code",
        "id": cell_id,
        "metadata": {},
        "source": source,
        "outputs": outputs or [],
        "execution_count": count,
    }


def op_cell(name: str, source: str) -> dict[str, Any]:
    return cell("code", f"op-{name}", f"# op: {name}\n{source}")


STDOUT = {"output_type": "stream", "name": "stdout", "text": "before\n"}
ERROR = {"output_type": "error", "ename": "ZeroDivisionError", "evalue": "division by zero", "traceback": []}
CELLS = [
    cell("markdown", "md-0", "# Title\nSome text"),
    cell("code", "cell-1", "print('before')", [STDOUT], 1),
    cell("code", "cell-2", "1/0", [ERROR], 2),
    cell("code", "cell-3", "pass"),
    cell("markdown", "filler", FILLER),
    op_cell("read", 'await bridge("read", max_chars=10)'),
    op_cell("edit", 'await bridge("edit", cell_id="cell-1", expected="print(\'before\')", new="print(\'after\')")'),
    op_cell(
        "stale",
        'await bridge("edit", cell_id="cell-1", expected="print(\'before\')", new="print(\'lost\')")\n'
        'await bridge("edit", cell_id="no-such-cell", expected="", new="x")',
    ),
    op_cell(
        "outputs",
        'await bridge("set_outputs", cell_id="cell-3", execution_count=42, outputs=['
        '{"output_type": "stream", "name": "stdout", "text": "hello from the kernel\\n"}, '
        '{"output_type": "execute_result", "execution_count": 42, "metadata": {}, "data": {"text/plain": "42"}}])',
    ),
    op_cell("highlight", 'await bridge("highlight", cell_id="cell-1")'),
    op_cell("unhighlight", 'await bridge("highlight", cell_id=None)'),
    op_cell(
        "insert",
        '_count = len((await bridge("read", quiet=True))["cells"])\n'
        'await bridge("insert", index=_count, cells=['
        '{"type": "markdown", "source": "## Inserted by the kernel"}, '
        '{"type": "code", "source": "inserted = 6 * 7"}])',
    ),
    op_cell("delete-stale", 'await bridge("delete", cell_ids=["cell-2", "cell-3"], expected=["1/0", "changed"])'),
    op_cell("delete-ok", 'await bridge("delete", cell_ids=["cell-2"], expected=["1/0"])'),
    op_cell("opens-first", "await opens(1)"),
    op_cell("hello", 'from comm import create_comm\n_hello = create_comm(target_name="pi.notebook.hello", data={})'),
    op_cell("opens-again", "await opens(2)"),
]


def notebook_json(cells: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "nbformat": 4,
        "nbformat_minor": 5,
        "metadata": {
            "kernelspec": {"name": "python3", "display_name": "Python 3 (ipykernel)", "language": "python"},
            "language_info": {"name": "python"},
        },
        "cells": cells,
    }


class BridgePage(NotebookPage):
    """A notebook whose cells are found by their ``# op: name`` marker (positions change as cells come and go)."""

    def wait_idle(self, timeout: float = 60) -> None:
        if self.server.app == "lab":
            self.page.get_by_text(re.compile(r"\|\s*Idle")).first.wait_for(timeout=timeout * 1000)
        else:
            self.page.wait_for_selector(".jp-Notebook-ExecutionIndicator[data-status='idle']", timeout=timeout * 1000)

    def choose_kernel_if_asked(self, wait: float = 3) -> None:
        """Notebook 7 on a busy machine sometimes asks for the kernel (the kernelspecs came late): choose it."""
        from playwright.sync_api import Error as PlaywrightError

        dialog = self.page.locator(".jp-Dialog", has_text="Select Kernel")
        try:
            dialog.wait_for(timeout=wait * 1000)
        except PlaywrightError:  # no dialog: the kernel started as the notebook asked
            return
        dialog.locator("select").select_option(label="Python 3 (ipykernel)")
        dialog.locator(".jp-mod-accept").click()
        dialog.wait_for(state="detached", timeout=10_000)
        self.wait_idle()

    def output_text(self, index: int) -> str:
        # textContent: a cell out of view (content-visibility: auto) has no innerText.
        return str(self.output(index).text_content())

    def prompt(self, index: int) -> str:
        return str(self.cell(index).locator(".jp-InputPrompt").text_content()).strip()

    def index_of(self, marker: str, timeout: float = 15) -> int:
        """The position of the cell whose source shows ``marker`` (editors may still be coming)."""
        deadline = time.monotonic() + timeout
        while True:
            index = int(
                self.page.evaluate(
                    """marker => Array.from(document.querySelectorAll('.jp-Notebook .jp-Cell'))
                        .findIndex(cell => {
                            const editor = cell.querySelector('.jp-InputArea-editor');
                            return editor !== null && editor.textContent.includes(marker);
                        })""",
                    marker,
                )
            )
            if index >= 0:
                return index
            if time.monotonic() > deadline:
                raise AssertionError(f"no cell shows {marker!r}")
            time.sleep(0.1)

    def run_op(self, name: str, expect: str = "REPLY", timeout: float = 30) -> str:
        """Run the ``# op: name`` cell; its output once it shows ``expect`` (the cell may move meanwhile)."""
        marker = f"# op: {name}"
        from playwright.sync_api import Error as PlaywrightError

        try:
            self.run(self.index_of(marker))
        except (TimeoutError, PlaywrightError):
            dialogs = [str(text) for text in self.page.locator(".jp-Dialog").all_inner_texts()]
            self.screenshot(f"notebook-bridge-{self.server.app}-run-failed")
            raise AssertionError(f"{marker} did not run; dialogs: {dialogs}") from None
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            index = self.index_of(marker)
            if re.fullmatch(r"\[\d+\]:", self.prompt(index)) and expect in self.output_text(index):
                return self.output_text(index)
            time.sleep(0.1)
        raise TimeoutError(f"{marker}: no {expect!r} in {self.output_text(self.index_of(marker))!r}")

    def replies(self, name: str, timeout: float = 30) -> list[dict[str, Any]]:
        text = self.run_op(name, timeout=timeout)
        return [json.loads(line[len("REPLY ") :]) for line in text.splitlines() if line.startswith("REPLY ")]

    def sources(self) -> list[str]:
        return list(
            self.page.evaluate(
                """() => Array.from(document.querySelectorAll('.jp-Notebook .jp-Cell')).map(cell => {
                    const editor = cell.querySelector('.cm-content');
                    return editor ? editor.textContent : cell.textContent;
                })"""
            )
        )


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            yield chromium
        finally:
            chromium.close()


def start(browser: Any, app: str) -> Iterator[tuple[JupyterLabServer, Any]]:
    """A server whose kernels run the probe at start, and a page."""
    ipython_dir = Path(tempfile.mkdtemp(prefix="pi-bridge-ipython-"))
    startup = ipython_dir / "profile_default" / "startup"
    startup.mkdir(parents=True)
    (startup / "00-bridge-probe.py").write_text(PROBE)
    server = JupyterLabServer({}, app=app, extra_env={"IPYTHONDIR": str(ipython_dir)}).start()
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    try:
        yield server, page
    finally:
        page.close()
        server.stop()
        shutil.rmtree(ipython_dir, ignore_errors=True)


@pytest.fixture(scope="module")
def lab(browser: Any) -> Iterator[BridgePage]:
    for server, page in start(browser, "lab"):
        (server.notebooks / "bridge.ipynb").write_text(json.dumps(notebook_json(CELLS), indent=1))
        notebook = BridgePage(page, server, "bridge.ipynb").open()
        yield notebook


def test_the_bridge_opens_its_comm_when_the_kernel_is_ready(lab: BridgePage) -> None:
    state = json.loads(lab.run_op("opens-first", "OPENS").split("OPENS ", 1)[1])
    assert state == {"opens": [{"protocol": 1, "frontend": "jupyterlab", "path": "bridge.ipynb"}], "closed": 0}


def test_read_lists_every_cell_in_order_with_outputs_summarized(lab: BridgePage) -> None:
    [reply] = lab.replies("read")
    assert reply["ok"] is True
    cells = reply["cells"]
    assert [c["id"] for c in cells] == [c["id"] for c in CELLS]
    assert [c["index"] for c in cells] == list(range(len(CELLS)))
    assert [c["type"] for c in cells[:5]] == ["markdown", "code", "code", "code", "markdown"]
    title, printed, failed = cells[0], cells[1], cells[2]
    assert title["source"] == "# Title\nSo" and title["truncated"] is True and title["source_length"] == 17
    assert title["execution_count"] is None and title["outputs"] == ""
    assert printed["source"] == "print('bef" and printed["execution_count"] == 1 and printed["outputs"] == "before"
    assert failed["source"] == "1/0" and failed["truncated"] is False and failed["source_length"] == 3
    assert failed["execution_count"] == 2 and failed["outputs"] == "ZeroDivisionError: division by zero"


def test_edit_changes_the_cell_source_in_place(lab: BridgePage) -> None:
    [reply] = lab.replies("edit")
    assert reply["ok"] is True and reply["index"] == 1
    lab.cell(1).locator(".jp-InputArea-editor").get_by_text("print('after')").wait_for(timeout=5000)
    assert lab.sources()[1] == "print('after')"


def test_a_stale_edit_is_refused_and_leaves_the_cell_as_it_is(lab: BridgePage) -> None:
    stale, missing = lab.replies("stale")
    assert stale["ok"] is False and stale["error"] == "stale"
    assert "#2" in stale["message"]
    assert missing["ok"] is False and missing["error"] == "not_found" and "no-such-cell" in missing["message"]
    assert lab.sources()[1] == "print('after')"


def test_set_outputs_shows_the_outputs_and_the_execution_count(lab: BridgePage) -> None:
    [reply] = lab.replies("outputs")
    assert reply["ok"] is True
    lab.wait_text(3, "hello from the kernel")
    assert "42" in lab.output_text(3)
    assert lab.prompt(3) == "[42]:"


def test_highlight_marks_the_cell_and_scrolls_it_into_view(lab: BridgePage) -> None:
    target = lab.cell(1)
    assert not in_view(lab, target)  # the op cells below pushed it out of view
    [reply] = lab.replies("highlight")
    assert reply["ok"] is True
    marked = lab.page.locator(".jp-Notebook .jp-Cell.pi-bridge-highlight")
    assert marked.count() == 1
    assert "print('after')" in str(marked.locator(".jp-InputArea-editor").text_content())
    outline = marked.evaluate("node => getComputedStyle(node).outlineStyle + ' ' + getComputedStyle(node).outlineWidth")
    assert outline == "solid 3px"
    deadline = time.monotonic() + 5
    while not in_view(lab, target) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert in_view(lab, target)
    lab.screenshot("notebook-bridge-highlight")
    [cleared] = lab.replies("unhighlight")
    assert cleared["ok"] is True and marked.count() == 0


def test_insert_appends_a_rendered_markdown_cell_and_a_code_cell(lab: BridgePage) -> None:
    [reply] = lab.replies("insert")
    assert reply["ok"] is True and len(reply["ids"]) == 2
    cells = lab.page.locator(".jp-Notebook .jp-Cell")
    assert cells.count() == len(CELLS) + 2
    heading = cells.nth(len(CELLS)).locator(".jp-RenderedMarkdown h2")
    heading.wait_for(timeout=5000)
    assert str(heading.text_content()).rstrip("¶") == "Inserted by the kernel"
    assert lab.sources()[-1] == "inserted = 6 * 7"


def test_delete_is_all_or_nothing_and_refuses_stale_cells(lab: BridgePage) -> None:
    [stale] = lab.replies("delete-stale")
    assert stale["ok"] is False and stale["error"] == "stale" and "#4" in stale["message"]
    assert lab.sources()[2:4] == ["1/0", "pass"]
    [reply] = lab.replies("delete-ok")
    assert reply["ok"] is True
    sources = lab.sources()
    assert "1/0" not in sources and sources[1:3] == ["print('after')", "pass"]
    assert len(sources) == len(CELLS) + 1


def test_hello_from_the_kernel_opens_the_comm_again(lab: BridgePage) -> None:
    lab.run_op("hello", expect="")
    state = json.loads(lab.run_op("opens-again", "OPENS").split("OPENS ", 1)[1])
    assert len(state["opens"]) == 2 and state["closed"] == 1
    [reply] = lab.replies("read")  # the new comm answers
    assert reply["ok"] is True


def test_the_bridge_opens_the_comm_again_after_a_kernel_restart(lab: BridgePage) -> None:
    lab.page.keyboard.press("Escape")
    lab.page.locator("[data-command='notebook:restart-kernel']").first.click()
    lab.page.locator(".jp-Dialog .jp-mod-accept").click()
    lab.page.locator(".jp-Dialog").wait_for(state="detached", timeout=10_000)
    time.sleep(1)
    lab.wait_idle()
    state = json.loads(lab.run_op("opens-first", "OPENS").split("OPENS ", 1)[1])
    assert state["opens"] == [{"protocol": 1, "frontend": "jupyterlab", "path": "bridge.ipynb"}]
    [reply] = lab.replies("read")
    assert reply["ok"] is True and len(reply["cells"]) == len(CELLS) + 1


def in_view(notebook: BridgePage, locator: Any) -> bool:
    """The element's box overlaps the notebook's scrolled viewport."""
    return bool(
        locator.evaluate(
            """node => {
                const box = node.getBoundingClientRect();
                const view = node.closest('.jp-WindowedPanel-outer').getBoundingClientRect();
                return box.bottom > view.top + 10 && box.top < view.bottom - 10;
            }"""
        )
    )


@pytest.fixture(scope="module")
def notebook7(browser: Any) -> Iterator[BridgePage]:
    # Short: Notebook 7 attaches only the cells in view.
    short = [c for c in CELLS if c["id"] in {"md-0", "cell-1", "cell-2", "op-opens-first", "op-edit", "op-stale"}]
    for server, page in start(browser, "notebook"):
        (server.notebooks / "bridge.ipynb").write_text(json.dumps(notebook_json(short), indent=1))
        notebook = BridgePage(page, server, "bridge.ipynb").open()
        notebook.choose_kernel_if_asked()
        yield notebook


def test_notebook_7_opens_the_bridge_and_takes_an_edit(notebook7: BridgePage) -> None:
    state = json.loads(notebook7.run_op("opens-first", "OPENS").split("OPENS ", 1)[1])
    assert state["opens"] == [{"protocol": 1, "frontend": "notebook", "path": "bridge.ipynb"}]
    [reply] = notebook7.replies("edit")
    assert reply["ok"] is True
    notebook7.cell(1).locator(".jp-InputArea-editor").get_by_text("print('after')").wait_for(timeout=5000)
    [stale, _missing] = notebook7.replies("stale")
    assert stale["error"] == "stale" and notebook7.sources()[1] == "print('after')"


BIG_SOURCE = "# ten megabytes\n" + ("z" * 99 + "\n") * 100_000
BIG_CELLS = [
    op_cell(
        "big-read",
        "import time\n_t = time.perf_counter()\n"
        '_r = await bridge("read", quiet=True, wait=60, max_chars=50)\n'
        "_big = _r['cells'][2]\n"
        'print("REPLY " + json.dumps({"cells": len(_r["cells"]), "last": _r["cells"][-1]["source"], '
        '"big_length": _big["source_length"], "big_shown": len(_big["source"]), "truncated": _big["truncated"], '
        '"seconds": time.perf_counter() - _t}))',
    ),
    op_cell(
        "big-edit",
        '_big = (await bridge("read", quiet=True, wait=60, cell_ids=["big"]))["cells"][0]["source"]\n'
        'await bridge("edit", wait=60, cell_id="big", expected=_big, new="# small now")',
    ),
    cell("code", "big", BIG_SOURCE),
    *[cell("code", f"many-{n}", f"n = {n}") for n in range(10_000)],
]


@pytest.fixture(scope="module")
def big(browser: Any) -> Iterator[BridgePage]:
    for server, page in start(browser, "lab"):
        (server.notebooks / "big.ipynb").write_text(json.dumps(notebook_json(BIG_CELLS)))
        yield BridgePage(page, server, "big.ipynb").open(timeout=180)


def test_a_notebook_of_10_000_cells_and_a_10_mb_cell_is_read_bounded_and_edited(big: BridgePage) -> None:
    [read] = big.replies("big-read", timeout=120)
    assert read["cells"] == len(BIG_CELLS) and read["last"] == "n = 9999"
    assert read["big_length"] == len(BIG_SOURCE) and read["big_shown"] == 50 and read["truncated"] is True
    assert read["seconds"] < 10, read
    [edit] = big.replies("big-edit", timeout=120)
    assert edit["ok"] is True
    assert big.sources()[2] == "# small now"
