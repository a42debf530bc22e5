"""A scripted notebook front-end: the ``pi.notebook`` bridge answered from an in-memory nbformat notebook.

``ScriptedFrontend(driver, notebook)`` opens the ``pi.notebook`` comm on a
``KernelDriver``'s kernel (as the JupyterLab extension does when a notebook's
kernel is ready) and answers the kernel's requests (``read``, ``edit``,
``insert``, ``delete``, ``set_outputs``, ``highlight``: the protocol of
docs/notebook.md) from ``notebook``, an ``nbformat`` notebook it changes in
place, with the same stale checks as the real extension. Pass
``frontend.on_iopub`` to ``driver.run`` (or call ``frontend.handle``) so
requests are answered while a cell runs. It also answers ``pi.notebook.hello``
by reconnecting.

Tests script what a person or a broken front-end would do through hooks:
``before_reply(request) -> "drop" | "close" | None`` (leave a request
unanswered, or close the comm instead of answering it), and ``user_edit``
(change a cell's source as a person typing would).

``run_notebook(driver, frontend)`` executes every code cell of the notebook in
order with its cell id (as JupyterLab does, ``metadata.cellId``) and keeps the
outputs in the notebook: how a notebook executed in CI has a bridge.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import nbformat
from kernel_helpers import CellResult, KernelDriver

OUTPUT_SUMMARY_CHARS = 200


def new_notebook(sources: list[str | tuple[str, str]]) -> Any:
    """A notebook of cells (a source: code; ``(type, source)``: that type), each with a fresh id."""
    notebook = nbformat.v4.new_notebook()
    for item in sources:
        kind, source = item if isinstance(item, tuple) else ("code", item)
        maker = {"code": nbformat.v4.new_code_cell, "markdown": nbformat.v4.new_markdown_cell}.get(
            kind, nbformat.v4.new_raw_cell
        )
        notebook.cells.append(maker(source))
    return notebook


def output_summary(outputs: list[dict[str, Any]]) -> str:
    """About 200 characters: each stream's tail, ``ename: evalue``, mime types and the start of text/plain."""
    parts = []
    for output in outputs:
        kind = output.get("output_type")
        if kind == "stream":
            parts.append(str(output.get("text", ""))[-120:])
        elif kind == "error":
            parts.append(f"{output.get('ename')}: {output.get('evalue')}")
        else:
            data = output.get("data", {})
            text = str(data.get("text/plain", ""))[:120]
            others = [mime for mime in data if mime != "text/plain"]
            parts.append(text + (f" [{', '.join(others)}]" if others else ""))
    return " | ".join(part.strip() for part in parts)[:OUTPUT_SUMMARY_CHARS]


class ScriptedFrontend:
    def __init__(self, driver: KernelDriver, notebook: Any, path: str = "scripted.ipynb") -> None:
        self.driver = driver
        self.notebook = notebook
        self.path = path
        self.comm_id: str | None = None
        self.requests: list[dict[str, Any]] = []
        """Every request the kernel sent, in order."""
        self.highlighted: list[str | None] = []
        """Each ``highlight`` request's cell id (``None``: cleared)."""
        self.before_reply: Callable[[dict[str, Any]], str | None] | None = None

    # -- connection ---------------------------------------------------------------------------

    def connect(self) -> ScriptedFrontend:
        self.comm_id = self.driver.comm_open("pi.notebook", {"protocol": 1, "frontend": "scripted", "path": self.path})
        self.driver.run("pass")  # the open is handled before the next cell
        return self

    def disconnect(self) -> None:
        if self.comm_id is not None:
            self.driver.comm_close(self.comm_id)
            self.comm_id = None

    # -- the notebook -------------------------------------------------------------------------

    def cell(self, ref: int | str) -> Any:
        """A cell by 0-based index or id."""
        if isinstance(ref, int):
            return self.notebook.cells[ref]
        return next(cell for cell in self.notebook.cells if cell.id == ref)

    def sources(self) -> list[str]:
        return [cell.source for cell in self.notebook.cells]

    def user_edit(self, index: int, source: str) -> None:
        """A person changes cell ``index`` (0-based)."""
        self.notebook.cells[index].source = source

    # -- answering ----------------------------------------------------------------------------

    def on_iopub(self, message: dict[str, Any]) -> None:
        self.handle(message)

    def handle(self, message: dict[str, Any]) -> bool:
        """Answer ``message`` if it is for this front-end; whether it was."""
        kind, content = message["msg_type"], message["content"]
        if kind == "comm_open" and content.get("target_name") == "pi.notebook.hello":
            self.comm_id = None
            self.comm_id = self.driver.comm_open("pi.notebook", {"protocol": 1, "frontend": "scripted"})
            return True
        if kind != "comm_msg" or content.get("comm_id") != self.comm_id or self.comm_id is None:
            return False
        request = content.get("data") or {}
        if "request" not in request:
            return False
        self.requests.append(request)
        action = self.before_reply(request) if self.before_reply is not None else None
        if action == "drop":
            return True
        if action == "close":
            self.disconnect()
            return True
        if isinstance(action, dict):  # a reply of the test's making (a malformed one)
            self.driver.comm_send(self.comm_id, {"reply_to": request["request"], **action})
            return True
        try:
            reply = {"ok": True, **self.answer(request)}
        except _Refusal as refusal:
            reply = {"ok": False, "error": refusal.kind, "message": str(refusal)}
        self.driver.comm_send(self.comm_id, {"reply_to": request["request"], **reply})
        return True

    def answer(self, request: dict[str, Any]) -> dict[str, Any]:
        op = request.get("op")
        handler = getattr(self, f"_op_{op}", None)
        if handler is None:
            raise _Refusal("bad_request", f"unknown op {op!r}")
        result: dict[str, Any] = handler(request)
        return result

    def _find(self, cell_id: str) -> tuple[int, Any]:
        for index, cell in enumerate(self.notebook.cells):
            if cell.id == cell_id:
                return index, cell
        raise _Refusal("not_found", f"No cell with id {cell_id!r}.")

    def _op_read(self, request: dict[str, Any]) -> dict[str, Any]:
        limit = request.get("max_chars")
        wanted = request.get("cell_ids")
        cells = []
        for index, cell in enumerate(self.notebook.cells):
            if wanted is not None and cell.id not in wanted:
                continue
            source = cell.source
            shown = source[:limit] if isinstance(limit, int) else source
            cells.append(
                {
                    "id": cell.id,
                    "index": index,
                    "type": cell.cell_type,
                    "source": shown,
                    "execution_count": cell.get("execution_count"),
                    "outputs": output_summary(cell.get("outputs", [])),
                    "source_length": len(source),
                    "truncated": len(shown) < len(source),
                }
            )
        return {"cells": cells}

    def _op_edit(self, request: dict[str, Any]) -> dict[str, Any]:
        _, cell = self._find(request["cell_id"])
        if cell.source != request["expected"]:
            raise _Refusal("stale", "The cell changed.")
        cell.source = request["new"]
        return {}

    def _op_insert(self, request: dict[str, Any]) -> dict[str, Any]:
        index = int(request["index"])
        if not 0 <= index <= len(self.notebook.cells):
            raise _Refusal("bad_request", f"index {index} out of range")
        made = new_notebook([(cell["type"], cell["source"]) for cell in request["cells"]]).cells
        self.notebook.cells[index:index] = made
        return {"ids": [cell.id for cell in made]}

    def _op_delete(self, request: dict[str, Any]) -> dict[str, Any]:
        found = [self._find(cell_id) for cell_id in request["cell_ids"]]
        for (_, cell), expected in zip(found, request["expected"], strict=True):
            if cell.source != expected:
                raise _Refusal("stale", "A cell changed.")
        gone = {cell.id for _, cell in found}
        self.notebook.cells = [cell for cell in self.notebook.cells if cell.id not in gone]
        return {}

    def _op_set_outputs(self, request: dict[str, Any]) -> dict[str, Any]:
        _, cell = self._find(request["cell_id"])
        if cell.cell_type != "code":
            raise _Refusal("bad_request", "not a code cell")
        cell.outputs = [nbformat.from_dict(output) for output in request["outputs"]]
        cell.execution_count = request.get("execution_count")
        return {}

    def _op_highlight(self, request: dict[str, Any]) -> dict[str, Any]:
        self.highlighted.append(request.get("cell_id"))
        return {}


class _Refusal(Exception):
    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind


def run_notebook(
    driver: KernelDriver,
    frontend: ScriptedFrontend,
    *,
    timeout: float = 120,
    on_iopub: Callable[[dict[str, Any]], None] | None = None,
) -> list[CellResult]:
    """Run every code cell in order (cells the agent inserts run too, when reached); outputs kept in the
    notebook, like nbclient. Stops at a cell that fails, unless it is tagged ``raises-exception``."""
    results = []
    index = 0

    def both(message: dict[str, Any]) -> None:
        frontend.handle(message)
        if on_iopub is not None:
            on_iopub(message)

    while index < len(frontend.notebook.cells):
        cell = frontend.notebook.cells[index]
        index += 1
        if cell.cell_type != "code":
            continue
        result = driver.run(cell.source, cell_id=cell.id, timeout=timeout, on_iopub=both)
        cell.outputs = [
            nbformat.v4.output_from_msg(message)
            for message in result.messages
            if message["msg_type"] in ("stream", "display_data", "execute_result", "error")
        ]
        results.append(result)
        if result.status != "ok" and "raises-exception" not in cell.metadata.get("tags", []):
            break
        index = next((i + 1 for i, c in enumerate(frontend.notebook.cells) if c.id == cell.id), index)
    return results
