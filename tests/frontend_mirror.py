"""``FrontEndMirror``: what JupyterLab would show, replayed from the kernel's iopub messages.

The tests and the byte benchmark feed it every message a view sent (dicts as
``jupyter_client`` delivers them: ``header``, ``parent_header``, ``content``)
and then ask what a person would see: a widget's state, the text an
``Output`` widget holds, a cell's outputs. It follows the rules of the real
front end (``@jupyterlab/services`` and ``@jupyter-widgets/output``, 8.x):

- widget models are opened, updated and closed by ``comm_*`` messages;
- an ``Output`` model whose ``msg_id`` is set registers a hook for messages of
  that parent; the most recently registered hook takes them all (stream,
  display and clear messages are added to it, the rest swallowed);
- other messages go to their cell's output area, where consecutive streams
  merge and ``update_display_data`` rewrites every output with its display id;
- ``clear_output(wait=True)`` clears on the next output.

No ipywidgets here; the mirror reads only messages.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"
_OUTPUT_TYPES = ("stream", "display_data", "execute_result", "error")


@dataclass
class OutputArea:
    """A list of nbformat-like outputs with the output area's merge and clear rules."""

    outputs: list[dict[str, Any]] = field(default_factory=list)
    clear_pending: bool = False

    def add(self, msg_type: str, content: dict[str, Any]) -> None:
        if msg_type == "clear_output":
            if content.get("wait"):
                self.clear_pending = True
            else:
                self.outputs.clear()
            return
        if self.clear_pending:
            self.outputs.clear()
            self.clear_pending = False
        last = self.outputs[-1] if self.outputs else None
        if msg_type == "stream" and last and last["output_type"] == "stream" and last["name"] == content["name"]:
            last["text"] += content["text"]
            return
        output = {key: value for key, value in content.items() if key != "transient"}
        output["output_type"] = msg_type
        display_id = (content.get("transient") or {}).get("display_id")
        if display_id:
            output["_display_id"] = display_id
        self.outputs.append(output)

    def text(self) -> str:
        """All stream text, concatenated."""
        return "".join(output["text"] for output in self.outputs if output["output_type"] == "stream")


class FrontEndMirror:
    def __init__(self) -> None:
        self.models: dict[str, dict[str, Any]] = {}
        """comm id → the widget model's state."""
        self.output_widgets: dict[str, OutputArea] = {}
        """comm id of each ``Output`` model → what it shows."""
        self.cells: dict[str, OutputArea] = defaultdict(OutputArea)
        """parent msg id (the cell's execute request) → the cell's output area."""
        self._hooks: dict[str, list[str]] = defaultdict(list)
        self.closed: set[str] = set()

    def feed(self, msg: dict[str, Any]) -> None:
        msg_type = msg["header"]["msg_type"]
        content = msg.get("content") or {}
        if msg_type.startswith("comm_"):
            self._comm(msg_type, content)
            return
        if msg_type not in (*_OUTPUT_TYPES, "clear_output", "update_display_data"):
            return
        parent = (msg.get("parent_header") or {}).get("msg_id", "")
        hooks = self._hooks.get(parent)
        if hooks:
            if msg_type != "update_display_data":  # the Output model swallows what it does not add
                self.output_widgets[hooks[-1]].add(msg_type, content)
            return
        if msg_type == "update_display_data":
            self._update_display(content)
        else:
            self.cells[parent].add(msg_type, content)

    def feed_all(self, messages: list[dict[str, Any]]) -> FrontEndMirror:
        for msg in messages:
            self.feed(msg)
        return self

    # ------------------------------------------------------------------ queries

    def output_text(self, comm_id: str) -> str:
        return self.output_widgets[comm_id].text()

    def outputs(self, comm_id: str) -> list[dict[str, Any]]:
        return self.output_widgets[comm_id].outputs

    def cell_outputs(self, parent_msg_id: str) -> list[dict[str, Any]]:
        return self.cells[parent_msg_id].outputs

    def capturing(self, parent_msg_id: str) -> str | None:
        """The comm id of the ``Output`` model that takes this cell's output now, if any."""
        hooks = self._hooks.get(parent_msg_id)
        return hooks[-1] if hooks else None

    def open_widgets(self) -> list[str]:
        return list(self.models)

    # ------------------------------------------------------------------ internals

    def _comm(self, msg_type: str, content: dict[str, Any]) -> None:
        comm_id = content.get("comm_id", "")
        data = content.get("data") or {}
        if msg_type == "comm_open":
            if content.get("target_name") != "jupyter.widget":
                return
            state = dict(data.get("state") or {})
            self.models[comm_id] = state
            if state.get("_model_name") == "OutputModel":
                self.output_widgets[comm_id] = OutputArea([dict(o) for o in state.get("outputs") or []])
                self._set_hook(comm_id, "", state.get("msg_id") or "")
        elif msg_type == "comm_msg" and comm_id in self.models:
            if data.get("method") not in ("update", "echo_update"):
                return
            state = self.models[comm_id]
            changes = data.get("state") or {}
            old_msg_id = state.get("msg_id") or ""
            state.update(changes)
            if comm_id in self.output_widgets:
                if "outputs" in changes:
                    self.output_widgets[comm_id].outputs = [dict(o) for o in changes["outputs"]]
                if "msg_id" in changes:
                    self._set_hook(comm_id, old_msg_id, changes["msg_id"] or "")
        elif msg_type == "comm_close":
            closed = self.models.pop(comm_id, {})
            self.closed.add(comm_id)
            if closed and comm_id in self.output_widgets:
                self._set_hook(comm_id, closed.get("msg_id") or "", "")

    def _set_hook(self, comm_id: str, old: str, new: str) -> None:
        if old and comm_id in self._hooks.get(old, []):
            self._hooks[old].remove(comm_id)
        if new:
            self._hooks[new].append(comm_id)

    def _update_display(self, content: dict[str, Any]) -> None:
        display_id = (content.get("transient") or {}).get("display_id")
        for area in self.cells.values():
            for output in area.outputs:
                if display_id and output.get("_display_id") == display_id:
                    output["data"] = content.get("data", {})
                    output["metadata"] = content.get("metadata", {})
