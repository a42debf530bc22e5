"""The kernel side of the ``pi.notebook`` comm: ``NotebookBridge`` implements ``NotebookDocument`` over it.

A front-end extension (JupyterLab 4, Notebook 7; or the scripted front-end of
the tests) opens a ``pi.notebook`` comm when its notebook's kernel is ready,
with ``{"protocol": 1, "frontend": ..., "path": ...}``. The kernel registers
the target at start (the Pi kernel) or at ``%load_ext pi_kernel``, where it
also opens a ``pi.notebook.hello`` comm so a front-end already open connects
(it answers by opening ``pi.notebook``).

Requests go out as ``{"request": ID, "op": ..., ...}``; replies come back as
``{"reply_to": ID, "ok": true, ...}`` or ``{"reply_to": ID, "ok": false,
"error": "stale" | "not_found" | "bad_request" | "failed", "message": ...}``
(the protocol: docs/notebook.md). A reply may arrive on another thread
(JupyterLab routes comms to subshells), so each request's future is resolved
with ``loop.call_soon_threadsafe``. Nothing waits for a front-end that is not
there: without an open comm a request fails at once (``BridgeGone``), each
request has a time limit, and a comm closed while requests wait fails them
all with ``BridgeGone``.

With several front-ends connected (two browser tabs), requests go to the
comm of the client that sent the running cell when it opened one, else to
the newest.

``pi_kernel.tools.notebook_document`` (its errors and ``CellInfo``) is imported
lazily, inside the functions that use it: the session makes the bridge at kernel start,
where the tools layer (with pydantic) would cost about 100 ms.
"""

from __future__ import annotations

import asyncio
import threading
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pi_kernel.kernel.frontend import comm_manager, message_session

if TYPE_CHECKING:
    from pi_kernel.tools.notebook_document import CellInfo

NOTEBOOK_TARGET = "pi.notebook"
HELLO_TARGET = "pi.notebook.hello"
PROTOCOL = 1
REQUEST_TIMEOUT = 15.0
"""Seconds a request waits for the front-end's reply."""
NO_BRIDGE = (
    "No notebook front-end is connected (the pi.notebook bridge needs JupyterLab 4 or Notebook 7 with "
    "pi-kernel's extension), so cells cannot be changed from here."
)


@dataclass
class _Client:
    comm: Any
    session: str | None
    info: dict[str, Any]


@dataclass
class _Waiting:
    loop: asyncio.AbstractEventLoop
    future: asyncio.Future[dict[str, Any]]
    comm_id: str


class NotebookBridge:
    """``NotebookDocument`` over the ``pi.notebook`` comm (see the module docstring)."""

    def __init__(
        self,
        running_cell: Callable[[], str | None] = lambda: None,
        client_session: Callable[[], str | None] = lambda: None,
        timeout: float = REQUEST_TIMEOUT,
    ) -> None:
        self._running_cell = running_cell
        self._client_session = client_session
        self.timeout = timeout
        self._clients: dict[str, _Client] = {}
        self._waiting: dict[str, _Waiting] = {}
        self._lock = threading.Lock()
        self._listeners: list[Callable[[bool], None]] = []
        self._hello: Any = None

    # -- connection ---------------------------------------------------------------------------

    @property
    def running_cell_id(self) -> str | None:
        return self._running_cell()

    @property
    def connected(self) -> bool:
        with self._lock:
            return bool(self._clients)

    def document(self) -> NotebookBridge | None:
        """This bridge when a front-end is connected, else ``None`` (what ``ToolContext.notebook`` holds)."""
        return self if self.connected else None

    def frontend(self) -> dict[str, Any]:
        """The open data of the front-end requests go to (``{}`` when none)."""
        client = self._client()
        return dict(client.info) if client is not None else {}

    def subscribe(self, listener: Callable[[bool], None]) -> None:
        """``listener(connected)`` after each open and close."""
        self._listeners.append(listener)

    def ensure_target(self) -> None:
        manager = comm_manager()
        if manager is None or not hasattr(manager, "register_target"):
            return
        if getattr(manager, "targets", {}).get(NOTEBOOK_TARGET) is not self._open:
            manager.register_target(NOTEBOOK_TARGET, self._open)

    def remove_target(self) -> None:
        manager = comm_manager()
        targets = getattr(manager, "targets", None)
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
        data = (msg.get("content") or {}).get("data") or {}
        info = {key: data.get(key) for key in ("protocol", "frontend", "path") if key in data}
        with self._lock:
            self._clients[comm.comm_id] = _Client(comm, message_session(msg), info)
        comm.on_msg(self._on_msg)
        comm.on_close(lambda _message: self._closed(comm.comm_id))
        self._notify()

    def _closed(self, comm_id: str) -> None:
        from pi_kernel.tools.notebook_document import BridgeGone

        with self._lock:
            self._clients.pop(comm_id, None)
            lost = [key for key, waiting in self._waiting.items() if waiting.comm_id == comm_id]
            entries = [self._waiting.pop(key) for key in lost]
        for waiting in entries:
            _settle(waiting, BridgeGone("The notebook front-end disconnected before answering; nothing was changed."))
        self._notify()

    def _notify(self) -> None:
        connected = self.connected
        for listener in list(self._listeners):
            try:
                listener(connected)
            except Exception:  # noqa: BLE001 - a broken listener must not break the comm
                pass

    def _client(self) -> _Client | None:
        wanted = self._client_session()
        with self._lock:
            clients = list(self._clients.values())
        if not clients:
            return None
        return next((client for client in reversed(clients) if wanted and client.session == wanted), clients[-1])

    def _on_msg(self, msg: dict[str, Any]) -> None:
        """A front-end message: the reply it names settles that request; anything else is dropped.

        Never raises: ipykernel fires ``pre_execute`` before a comm handler and skips ``post_execute``
        when the handler raises, so a raising handler would leave other listeners of those events unpaired.
        """
        try:
            content = msg.get("content") if isinstance(msg, dict) else None
            data = content.get("data") if isinstance(content, dict) else None
            if not isinstance(data, dict):
                return
            key = data.get("reply_to")
            if not isinstance(key, str):
                return
            with self._lock:
                waiting = self._waiting.pop(key, None)
            if waiting is not None:
                _settle(waiting, data)
        except Exception:  # noqa: BLE001 - a hostile or broken front-end message changes nothing
            return

    # -- requests -----------------------------------------------------------------------------

    async def request(self, op: str, **fields: Any) -> dict[str, Any]:
        """Send one request and wait for its reply (``NotebookError`` for a refusal)."""
        from pi_kernel.tools.notebook_document import STALE_TEXT, BridgeGone, NoSuchCell, NotebookError, StaleCell

        client = self._client()
        if client is None:
            raise BridgeGone(NO_BRIDGE)
        key = uuid.uuid4().hex
        loop = asyncio.get_running_loop()
        future: asyncio.Future[dict[str, Any]] = loop.create_future()
        with self._lock:
            self._waiting[key] = _Waiting(loop, future, client.comm.comm_id)
        try:
            try:
                client.comm.send({"request": key, "op": op, **fields})
            except Exception as error:  # noqa: BLE001 - a closed comm
                raise BridgeGone(f"Could not reach the notebook front-end ({error}); nothing was changed.") from None
            try:
                reply = await asyncio.wait_for(future, self.timeout)
            except asyncio.TimeoutError:
                raise BridgeGone(
                    f"The notebook front-end did not answer {op} within {self.timeout:g} s; the change may not have "
                    "been made: read the cells again before retrying."
                ) from None
        finally:
            with self._lock:
                self._waiting.pop(key, None)
        if reply.get("ok"):
            return reply
        message = str(reply.get("message") or reply.get("error") or "the front-end refused")
        kind = reply.get("error")
        if kind == "stale":
            raise StaleCell(STALE_TEXT)
        if kind == "not_found":
            raise NoSuchCell(f"{message} Use cells to see the notebook.")
        raise NotebookError(f"The notebook front-end could not {op}: {message}")

    async def read(self, cell_ids: list[str] | None = None, max_chars: int | None = None) -> list[CellInfo]:
        fields: dict[str, Any] = {}
        if cell_ids is not None:
            fields["cell_ids"] = list(cell_ids)
        if max_chars is not None:
            fields["max_chars"] = int(max_chars)
        reply = await self.request("read", **fields)
        return [cell_from_json(cell) for cell in reply.get("cells") or []]

    async def edit(self, cell_id: str, expected: str, new: str) -> None:
        await self.request("edit", cell_id=cell_id, expected=expected, new=new)

    async def insert(self, index: int, cells: list[tuple[str, str]]) -> list[str]:
        reply = await self.request("insert", index=index, cells=[{"type": t, "source": s} for t, s in cells])
        return [str(cell_id) for cell_id in reply.get("ids") or []]

    async def delete(self, cell_ids: list[str], expected: list[str]) -> None:
        await self.request("delete", cell_ids=list(cell_ids), expected=list(expected))

    async def set_outputs(self, cell_id: str, outputs: list[dict], execution_count: int | None) -> None:
        await self.request("set_outputs", cell_id=cell_id, outputs=outputs, execution_count=execution_count)

    async def highlight(self, cell_id: str | None) -> None:
        await self.request("highlight", cell_id=cell_id)


def _settle(waiting: _Waiting, value: dict[str, Any] | BaseException) -> None:
    def settle() -> None:
        if waiting.future.done():
            return
        if isinstance(value, BaseException):
            waiting.future.set_exception(value)
        else:
            waiting.future.set_result(value)

    try:
        waiting.loop.call_soon_threadsafe(settle)
    except RuntimeError:  # the loop closed meanwhile: nobody waits any more
        pass


def cell_from_json(data: Any) -> CellInfo:
    """One cell of a ``read`` reply; a malformed field becomes a clear ``NotebookError``."""
    from pi_kernel.tools.notebook_document import CellInfo, NotebookError

    if not isinstance(data, dict):
        raise NotebookError("The notebook front-end sent a malformed cell.")
    source = str(data.get("source") or "")
    kind = data.get("type")
    count = data.get("execution_count")
    return CellInfo(
        id=str(data.get("id") or ""),
        index=int(data.get("index") or 0),
        type=kind if kind in ("code", "markdown", "raw") else "raw",
        source=source,
        execution_count=count if isinstance(count, int) else None,
        outputs=str(data.get("outputs") or ""),
        source_length=int(data.get("source_length") or len(source)),
        truncated=bool(data.get("truncated")),
    )
