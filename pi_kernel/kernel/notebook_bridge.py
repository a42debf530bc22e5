"""The kernel side of the ``pi.notebook`` comm: ``NotebookBridge`` implements ``NotebookDocument`` over it.

A front-end extension (JupyterLab 4, Notebook 7) opens ``pi.notebook`` when its kernel is ready; at
``%load_ext pi_kernel`` the kernel opens ``pi.notebook.hello`` so a front-end already open connects.
Requests and replies: docs/notebook.md. A reply may arrive on another thread (subshells), so futures are
settled with ``call_soon_threadsafe``. Nothing waits for a front-end that is not there: no open comm, a
time limit, or a comm closed meanwhile fails the request (``BridgeGone``); for a change (``CHANGES``) the
outcome is unknown (``OutcomeUnknown``, noted in ``uncertain`` for undo). Replies are untrusted: a
malformed one fails with ``MALFORMED``.

What the tools of a context see is a ``BridgeDocument`` (``document``), made for that context's cell and
client: a turn's tools know their own cell (``running_cell_id``) and send to the client that sent it (else to
the newest).

``pi_kernel.tools.notebook_document`` is imported lazily: the bridge is made at kernel start, where the
tools layer (with pydantic) would cost about 100 ms.
"""

from __future__ import annotations

import asyncio
import threading
import uuid
from collections.abc import Callable
from contextlib import suppress
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, cast

from pi_kernel.kernel.turn import comm_manager, message_session

if TYPE_CHECKING:
    from pi_kernel.tools.notebook_document import BridgeGone, CellInfo

NOTEBOOK_TARGET = "pi.notebook"
HELLO_TARGET = "pi.notebook.hello"
PROTOCOL = 1
REQUEST_TIMEOUT = 15.0
"""Seconds a request waits for the front-end's reply."""
CHANGES = frozenset({"edit", "insert", "delete", "set_outputs"})
"""Ops that change the notebook: when their reply never comes, the outcome is unknown."""
MAX_CELLS = 100_000
MAX_TEXT = 100_000_000
"""The largest number of cells and characters of a field a reply may hold."""
MALFORMED = "The notebook front-end sent a malformed reply"
UNCERTAIN_KEPT = 64
NO_BRIDGE = (
    "No notebook front-end is connected (the pi.notebook bridge needs JupyterLab 4 or Notebook 7 with "
    "pi-kernel's extension), so cells cannot be changed from here."
)


@dataclass
class _Client:
    comm: Any
    session: str | None


@dataclass
class _Waiting:
    loop: asyncio.AbstractEventLoop
    future: asyncio.Future[dict[str, Any]]
    comm_id: str
    op: str = ""
    cells: tuple[str, ...] = ()


@dataclass
class UncertainChange:
    """A change whose reply never came (a time-out or a disconnect), and its late reply if it arrives."""

    request: str
    op: str
    cells: tuple[str, ...]
    reason: str
    late_reply: dict[str, Any] | None = None

    @property
    def applied(self) -> bool | None:
        """``True`` / ``False`` once a late reply said so, ``None`` while unknown."""
        return None if self.late_reply is None else self.late_reply.get("ok") is True


class DocumentOperations:
    """The ``NotebookDocument`` operations, each one ``request`` to a front-end."""

    running_cell_id: str | None = None
    """The ``%%pi`` cell whose tools use this document (``None``: none)."""

    async def request(self, op: str, **fields: Any) -> dict[str, Any]:
        raise NotImplementedError

    async def read(self, cell_ids: list[str] | None = None, max_chars: int | None = None) -> list[CellInfo]:
        given = {"cell_ids": cell_ids, "max_chars": max_chars}
        reply = await self.request("read", **{name: value for name, value in given.items() if value is not None})
        cells = reply.get("cells")
        if not isinstance(cells, list) or len(cells) > MAX_CELLS:
            from pi_kernel.tools.notebook_document import NotebookError

            raise NotebookError(f"{MALFORMED} to read (cells is not a list of cells).")
        return [cell_from_json(cell) for cell in cells]

    async def edit(self, cell_id: str, expected: str, new: str) -> None:
        await self.request("edit", cell_id=cell_id, expected=expected, new=new)

    async def insert(self, index: int, cells: list[tuple[str, str]]) -> list[str]:
        reply = await self.request("insert", index=index, cells=[{"type": t, "source": s} for t, s in cells])
        return _ids_from_reply(reply.get("ids"), len(cells))

    async def delete(self, cell_ids: list[str], expected: list[str]) -> None:
        await self.request("delete", cell_ids=list(cell_ids), expected=list(expected))

    async def set_outputs(self, cell_id: str, outputs: list[dict], execution_count: int | None) -> None:
        await self.request("set_outputs", cell_id=cell_id, outputs=outputs, execution_count=execution_count)

    async def highlight(self, cell_id: str | None) -> None:
        await self.request("highlight", cell_id=cell_id)


@dataclass(frozen=True)
class BridgeDocument(DocumentOperations):
    """The notebook as the tools of one context see it (``NotebookBridge.document``)."""

    bridge: NotebookBridge
    running_cell_id: str | None = None
    client: str | None = None
    """The client session (``header.session``) that sent the running cell: requests go to it if it is connected."""

    async def request(self, op: str, **fields: Any) -> dict[str, Any]:
        return await self.bridge.request(op, to=self.client, **fields)


class NotebookBridge(DocumentOperations):
    """The ``pi.notebook`` comms; a document itself too (the newest client, no running cell)."""

    def __init__(self, timeout: float = REQUEST_TIMEOUT) -> None:
        self.timeout = timeout
        self._clients: dict[str, _Client] = {}
        self.connected = False
        """Whether a front-end has ``pi.notebook`` open (kept at each open and close)."""
        self._waiting: dict[str, _Waiting] = {}
        self._lock = threading.Lock()
        self._listeners: list[Callable[[bool], None]] = []
        self._hello: Any = None
        self.uncertain: list[UncertainChange] = []
        """Changes whose outcome is unknown, oldest first (the last ``UNCERTAIN_KEPT``)."""

    # -- connection ---------------------------------------------------------------------------

    def document(self, running_cell: str | None = None, client: str | None = None) -> BridgeDocument | None:
        """The notebook for the tools of ``running_cell`` (sent by ``client``) while a front-end is connected,
        else ``None`` (what ``ToolContext.notebook`` holds)."""
        return BridgeDocument(self, running_cell, client) if self.connected else None

    def subscribe(self, listener: Callable[[bool], None]) -> None:
        """``listener(connected)`` after each open and close."""
        self._listeners.append(listener)

    def ensure_target(self) -> None:
        manager = comm_manager()
        registered = getattr(manager, "targets", {}).get(NOTEBOOK_TARGET)
        if hasattr(manager, "register_target") and registered is not self._open:
            manager.register_target(NOTEBOOK_TARGET, self._open)

    def remove_target(self) -> None:
        targets = getattr(comm_manager(), "targets", None)
        if isinstance(targets, dict) and targets.get(NOTEBOOK_TARGET) is self._open:
            del targets[NOTEBOOK_TARGET]

    def say_hello(self) -> None:
        """Open ``pi.notebook.hello``: a front-end already open (re)opens ``pi.notebook`` (``%load_ext``)."""
        try:
            from comm import create_comm

            self._hello = create_comm(target_name=HELLO_TARGET, data={"protocol": PROTOCOL})
        except Exception:  # noqa: BLE001 - no kernel (terminal IPython): nobody to greet
            self._hello = None

    def _open(self, comm: Any, msg: dict[str, Any]) -> None:
        with self._lock:
            self._clients[comm.comm_id] = _Client(comm, message_session(msg))
            self.connected = True
        comm.on_msg(self._on_msg)
        comm.on_close(lambda _message: self._closed(comm.comm_id))
        self._notify()

    def _closed(self, comm_id: str) -> None:
        with self._lock:
            self._clients.pop(comm_id, None)
            self.connected = bool(self._clients)
            lost = [key for key, waiting in self._waiting.items() if waiting.comm_id == comm_id]
            entries = {key: self._waiting.pop(key) for key in lost}
        for key, waiting in entries.items():
            _settle(waiting, self._lost(key, waiting, f"disconnected before answering {waiting.op}"))
        self._notify()

    def _lost(self, key: str, waiting: _Waiting, what: str) -> BridgeGone:
        """The error for a request whose reply will not come; for a change, noted in ``uncertain``."""
        from pi_kernel.tools.notebook_document import BridgeGone, OutcomeUnknown

        if waiting.op not in CHANGES:
            return BridgeGone(f"The notebook front-end {what}; nothing was changed.")
        with self._lock:
            self.uncertain.append(UncertainChange(key, waiting.op, waiting.cells, what))
            del self.uncertain[:-UNCERTAIN_KEPT]
        return OutcomeUnknown(
            f"The notebook front-end {what}; whether the change was applied is unknown (it may have been): "
            "read the cells again before retrying."
        )

    def _notify(self) -> None:
        connected = self.connected
        for listener in list(self._listeners):
            with suppress(Exception):  # a broken listener must not break the comm
                listener(connected)

    def _client(self, wanted: str | None) -> _Client | None:
        with self._lock:
            clients = list(self._clients.values())
        if not clients:
            return None
        return next((client for client in reversed(clients) if wanted and client.session == wanted), clients[-1])

    def _on_msg(self, msg: dict[str, Any]) -> None:
        """A front-end message: the reply it names settles that request. Never raises: ipykernel skips
        ``post_execute`` when a comm handler raises, leaving listeners of ``pre_execute`` unpaired."""
        try:
            content = msg.get("content") if isinstance(msg, dict) else None
            data: Any = content.get("data") if isinstance(content, dict) else None
            key = data.get("reply_to") if isinstance(data, dict) else None
            if not isinstance(key, str):
                return
            with self._lock:
                waiting = self._waiting.pop(key, None)
                if waiting is None:
                    for note in self.uncertain:
                        if note.request == key and note.late_reply is None:
                            note.late_reply = {"ok": data.get("ok") is True, "error": str(data.get("error"))[:40]}
            if waiting is not None:
                _settle(waiting, data)
        except Exception:  # noqa: BLE001 - a hostile or broken front-end message changes nothing
            return

    # -- requests -----------------------------------------------------------------------------

    async def request(self, op: str, *, to: str | None = None, **fields: Any) -> dict[str, Any]:
        """Send one request (to the client session ``to`` if it is connected, else the newest) and wait for its
        reply (``NotebookError`` for a refusal)."""
        from pi_kernel.tools.notebook_document import STALE_TEXT, BridgeGone, NoSuchCell, NotebookError, StaleCell

        client = self._client(to)
        if client is None:
            raise BridgeGone(NO_BRIDGE)
        key = uuid.uuid4().hex
        loop = asyncio.get_running_loop()
        future: asyncio.Future[dict[str, Any]] = loop.create_future()
        waiting = _Waiting(loop, future, client.comm.comm_id, op, _cells_of(fields))
        with self._lock:
            self._waiting[key] = waiting
        try:
            try:
                client.comm.send({"request": key, "op": op, **fields})
            except Exception as error:  # noqa: BLE001 - a closed comm
                raise BridgeGone(f"Could not reach the notebook front-end ({error}); nothing was changed.") from None
            try:
                reply = await asyncio.wait_for(future, self.timeout)
            except asyncio.TimeoutError:
                raise self._lost(key, waiting, f"did not answer {op} within {self.timeout:g} s") from None
        finally:
            with self._lock:
                self._waiting.pop(key, None)
        if reply.get("ok") is True:
            return reply
        if reply.get("ok") is not False:
            raise NotebookError(f"{MALFORMED} to {op} (no ok: true/false).")
        given, kind = reply.get("message"), reply.get("error")
        message = _clip(given if isinstance(given, str) else kind if isinstance(kind, str) else "the front-end refused")
        if kind == "stale":
            raise StaleCell(STALE_TEXT)
        if kind == "not_found":
            raise NoSuchCell(f"{message} Use cells to see the notebook.")
        raise NotebookError(f"The notebook front-end could not {op}: {message}")


def _settle(waiting: _Waiting, value: dict[str, Any] | BaseException) -> None:
    def settle() -> None:
        if waiting.future.done():
            return
        if isinstance(value, BaseException):
            waiting.future.set_exception(value)
        else:
            waiting.future.set_result(value)

    with suppress(RuntimeError):  # the loop closed meanwhile: nobody waits any more
        waiting.loop.call_soon_threadsafe(settle)


def _cells_of(fields: dict[str, Any]) -> tuple[str, ...]:
    """The cell ids a request names (for the note of an uncertain change)."""
    ids = fields.get("cell_ids") or ([fields["cell_id"]] if fields.get("cell_id") else [])
    if not ids and "index" in fields:
        return (f"#{int(fields['index']) + 1}",)
    return tuple(str(cell_id) for cell_id in ids)


def _clip(text: str, limit: int = 500) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _ids_from_reply(ids: Any, wanted: int) -> list[str]:
    from pi_kernel.tools.notebook_document import NotebookError

    if not isinstance(ids, list) or len(ids) != wanted or not all(_is_id(cell_id) for cell_id in ids):
        raise NotebookError(
            f"{MALFORMED} to insert (ids is not a list of {wanted} cell id(s)); the cells may have been "
            "inserted: read the cells again before retrying."
        )
    return list(ids)


def _is_id(value: Any) -> bool:
    return isinstance(value, str) and 0 < len(value) <= 256


def cell_from_json(data: Any) -> CellInfo:
    """One cell of a ``read`` reply; a field of the wrong type or size is a clear ``NotebookError``."""
    from pi_kernel.tools.notebook_document import CellInfo, NotebookError

    if not isinstance(data, dict):
        raise NotebookError(f"{MALFORMED} to read (a cell is not an object).")
    source, outputs, count = data.get("source", ""), data.get("outputs"), data.get("execution_count")
    truncated, length = data.get("truncated", False), data.get("source_length")
    outputs = "" if outputs is None else outputs
    if length is None and isinstance(source, str):
        length = len(source)
    valid = {
        "id": _is_id(data.get("id")),
        "index": type(data.get("index")) is int and 0 <= data["index"] < MAX_CELLS,
        "type": data.get("type") in ("code", "markdown", "raw"),
        "source": isinstance(source, str) and len(source) <= MAX_TEXT,
        "outputs": isinstance(outputs, str) and len(outputs) <= MAX_TEXT,
        "execution_count": count is None or (type(count) is int and count >= 0),
        "source_length": isinstance(source, str) and type(length) is int and len(source) <= length,
        "truncated": isinstance(truncated, bool),
    }
    bad = next((field for field, ok in valid.items() if not ok), None)
    if bad is not None:
        raise NotebookError(f"{MALFORMED} to read (a cell's {bad} is not valid).")
    return CellInfo(data["id"], data["index"], data["type"], source, count, outputs, cast(int, length), truncated)
