"""A scripted, real-HTTP fake of an OpenAI-compatible chat-completions server.

Tests talk to it through the real ``openai`` client: it serves
``POST /v1/chat/completions`` (streamed as SSE, or as one JSON body when the
request says ``stream: false``) and ``GET /v1/models`` on 127.0.0.1, from a
thread, with the standard library only (so it also runs as a subprocess for
browser tests; see ``main``). This file is longer than the usual ~400 lines
because it is one tool: the server, its response types, the chunk builders
that mimic each real server's shapes, and its command line.

Scripting. Each chat request takes the next queued response; when the queue is
empty, ``responder(request_body)`` decides (a "smart" script: reply with a tool
call first, then with text once a tool result is in the messages). A response
is one of:

* ``Chunks(list_of_chunk_dicts, delay=..., disconnect_after=N)``: each chunk
  is sent as ``data: {json}\\n\\n``, then ``data: [DONE]\\n\\n``;
* ``RawSSE(bytes)``: a recorded body replayed byte for byte (``recorded_stream``);
* ``HTTPError(status, body, headers={"Retry-After": "0.1"})``;
* ``Completion(dict)``: a whole non-streamed JSON body.

Shorthands (also what a responder may return): a list of chunk dicts, bytes
(raw SSE), a str (a text answer), or, in JSON scripts, dicts (``as_response``).

Every request is recorded (``server.requests``: method, path, lower-cased
headers, parsed JSON body) so tests can assert what was sent.
"""

from __future__ import annotations

import argparse
import json
import os
import runpy
import select
import socket
import sys
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

RECORDED_STREAMS_IN_REPO = Path(__file__).resolve().parent / "data" / "recorded-streams"
"""Real SSE bodies recorded from OpenAI and DeepSeek, kept in the repository (byte-identical copies of the
project's ``shared/data/recorded-streams``; its README, with the sources, is copied beside them)."""


def _recorded_streams_dir() -> Path:
    if os.environ.get("PI_RECORDED_STREAMS"):
        return Path(os.environ["PI_RECORDED_STREAMS"])
    return RECORDED_STREAMS_IN_REPO


RECORDED_STREAMS = _recorded_streams_dir()


def needs_recorded_streams(directory: Path | None = None, environ: dict[str, str] | None = None) -> Any:
    """The ``pytestmark`` of tests that replay ``RECORDED_STREAMS``: they skip when pointed at a folder that
    is not there (``PI_RECORDED_STREAMS``), but not in CI (``CI`` set), where a missing folder must fail the
    run instead of silently dropping every replay. The repository's own copy is always there."""
    import pytest  # here: this file also runs as a standalone server, without pytest

    directory = RECORDED_STREAMS if directory is None else directory
    env = os.environ if environ is None else environ
    return pytest.mark.skipif(
        not directory.is_dir() and not env.get("CI"),
        reason=f"recorded streams not found at {directory}",
    )


DEFAULT_MODEL = "fake-model"
JSONDict = dict[str, Any]

# --------------------------------------------------------------------------- responses


@dataclass
class Chunks:
    """A streamed answer built from chunk dicts."""

    chunks: list[JSONDict]
    delay: float | None = None
    """Seconds to wait before each chunk; ``None``: the server's default delay."""
    disconnect_after: int | None = None
    """Close the connection abruptly after this many chunks (no ``[DONE]``)."""
    done: bool = True
    """Send ``data: [DONE]`` at the end."""
    headers: dict[str, str] = field(default_factory=dict)


@dataclass
class RawSSE:
    """A raw SSE body, replayed byte for byte (event by event, so delays work)."""

    body: bytes
    delay: float | None = None
    disconnect_after: int | None = None
    """Close the connection abruptly after this many events."""


@dataclass
class HTTPError:
    status: int
    body: JSONDict | list[Any] | str | None = None
    """JSON body (dict, or a list as Gemini sends) or raw text; ``None``: an OpenAI-style error object."""
    headers: dict[str, str] = field(default_factory=dict)
    """E.g. ``{"Retry-After": "0.1"}``."""
    message: str = "Fake error"
    """Used in the default body."""

    def payload(self) -> bytes:
        if isinstance(self.body, str):
            return self.body.encode()
        body = self.body
        if body is None:
            body = {"error": {"message": self.message, "type": "fake_error", "code": None, "param": None}}
        return json.dumps(body).encode()


@dataclass
class Completion:
    """A non-streamed ``chat.completion`` body."""

    body: JSONDict


Response = Chunks | RawSSE | HTTPError | Completion
Responder = Callable[[JSONDict], Any]


def as_response(spec: Any) -> Response:
    """Normalize a shorthand into a response.

    list → ``Chunks``; bytes → ``RawSSE``; str → a text answer; dict (JSON
    scripts): ``{"chunks": [...]}``, ``{"text": "...", "parts": 3}``,
    ``{"tool_calls": [{"name", "arguments", "id"?}], "style": "openai"}``,
    ``{"sse_file": "name or path"}``, ``{"error": 429, "body": ..., "headers": ...}``,
    ``{"completion": {...}}``; any of them may add ``"delay"``.
    """
    if isinstance(spec, (Chunks, RawSSE, HTTPError, Completion)):
        return spec
    if isinstance(spec, (bytes, bytearray)):
        return RawSSE(bytes(spec))
    if isinstance(spec, str):
        return Chunks(text_chunks(spec))
    if isinstance(spec, list):
        return Chunks(spec)
    if isinstance(spec, dict):
        delay = spec.get("delay")
        if "error" in spec:
            return HTTPError(
                int(spec["error"]), spec.get("body"), spec.get("headers", {}), spec.get("message", "Fake error")
            )
        if "completion" in spec:
            return Completion(spec["completion"])
        if "sse_file" in spec:
            return RawSSE(recorded_stream(spec["sse_file"]), delay, spec.get("disconnect_after"))
        if "chunks" in spec:
            return Chunks(spec["chunks"], delay, spec.get("disconnect_after"))
        if "tool_calls" in spec:
            options = {key: spec[key] for key in ("style", "parts", "text", "reasoning") if key in spec}
            return Chunks(tool_call_chunks(spec["tool_calls"], **options), delay, spec.get("disconnect_after"))
        if "text" in spec:
            chunks = text_chunks(spec["text"], parts=spec.get("parts", 3), reasoning=spec.get("reasoning"))
            return Chunks(chunks, delay, spec.get("disconnect_after"))
    raise TypeError(f"Not a fake_openai response: {spec!r}")


def recorded_stream(name: str) -> bytes:
    """The bytes of a recorded SSE body, by file name (``.sse`` optional) or path."""
    path = Path(name)
    if not path.is_absolute():
        path = RECORDED_STREAMS / (name if name.endswith(".sse") else f"{name}.sse")
    return path.read_bytes()


# --------------------------------------------------------------------------- chunk builders


def chunk(
    delta: JSONDict | None = None,
    *,
    finish_reason: str | None = None,
    usage: JSONDict | None = None,
    model: str = DEFAULT_MODEL,
    chunk_id: str = "chatcmpl-fake",
    no_choices: bool = False,
) -> JSONDict:
    """One ``chat.completion.chunk``; ``no_choices`` makes a usage-only chunk."""
    choices = (
        [] if no_choices else [{"index": 0, "delta": delta or {}, "logprobs": None, "finish_reason": finish_reason}]
    )
    return {
        "id": chunk_id,
        "object": "chat.completion.chunk",
        "created": 1_700_000_000,
        "model": model,
        "choices": choices,
        "usage": usage,
    }


def usage_dict(prompt: int = 10, completion: int = 5, *, cached: int = 0, style: str = "openai") -> JSONDict:
    """A usage object; ``style="deepseek"`` adds ``prompt_cache_hit_tokens``/``miss``."""
    result: JSONDict = {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
        "prompt_tokens_details": {"cached_tokens": cached},
    }
    if style == "deepseek":
        result["prompt_cache_hit_tokens"] = cached
        result["prompt_cache_miss_tokens"] = prompt - cached
    return result


def split_text(text: str, parts: int) -> list[str]:
    """``text`` cut into ``parts`` pieces (fewer if it is shorter), in order."""
    parts = max(1, min(parts, len(text))) if text else 1
    size, rest = divmod(len(text), parts)
    pieces, start = [], 0
    for index in range(parts):
        end = start + size + (1 if index < rest else 0)
        pieces.append(text[start:end])
        start = end
    return pieces


@dataclass
class ToolCallSpec:
    name: str
    arguments: JSONDict | str = field(default_factory=dict)
    """A dict (serialized compactly) or the exact argument text to stream."""
    id: str | None = None
    """``None``: ``call_<n>``."""


def _tool_spec(value: Any, position: int) -> ToolCallSpec:
    if isinstance(value, ToolCallSpec):
        spec = value
    elif isinstance(value, dict):
        spec = ToolCallSpec(value["name"], value.get("arguments", {}), value.get("id"))
    else:
        name, arguments = value
        spec = ToolCallSpec(name, arguments)
    if spec.id is None:
        spec = ToolCallSpec(spec.name, spec.arguments, f"call_{position}")
    return spec


def _argument_text(spec: ToolCallSpec) -> str:
    return spec.arguments if isinstance(spec.arguments, str) else json.dumps(spec.arguments, separators=(",", ":"))


def text_chunks(
    text: str,
    *,
    parts: int = 3,
    finish_reason: str = "stop",
    usage: JSONDict | bool | None = True,
    reasoning: str | None = None,
    reasoning_field: str = "reasoning_content",
    style: str = "openai",
    model: str = DEFAULT_MODEL,
) -> list[JSONDict]:
    """A text answer in ``parts`` deltas (optionally after reasoning), OpenAI- or DeepSeek-shaped."""
    return tool_call_chunks(
        [],
        text=text,
        parts=parts,
        finish_reason=finish_reason,
        usage=usage,
        reasoning=reasoning,
        reasoning_field=reasoning_field,
        style=style,
        model=model,
    )


def tool_call_chunks(
    calls: Iterable[Any],
    *,
    style: str = "openai",
    parts: int = 4,
    text: str | None = None,
    reasoning: str | None = None,
    reasoning_field: str = "reasoning_content",
    finish_reason: str = "tool_calls",
    usage: JSONDict | bool | None = True,
    model: str = DEFAULT_MODEL,
) -> list[JSONDict]:
    """Chunks of an answer with tool calls, shaped like a given server.

    ``style``:
      ``openai``   id and name in the first delta only, arguments in ``parts``
                   fragments, finish chunk, then a usage-only chunk;
      ``llamacpp`` id and name repeated in every delta, usage with the finish chunk;
      ``ollama``   every call whole in one chunk, then finish and usage-only chunks;
      ``ollama_per_chunk`` one chunk per whole call, each numbered ``index: 0``;
      ``deepseek`` like openai, with ``reasoning_content`` deltas and the usage
                   (``prompt_cache_hit_tokens``) in the finish chunk.
    ``calls``: ``ToolCallSpec``s, ``(name, arguments)`` pairs or dicts.
    ``usage``: a ``usage_dict(...)``, ``True`` for a default one, ``None``/``False`` for none.
    ``reasoning`` streams first, under ``reasoning_field``.
    """
    specs = [_tool_spec(call, position) for position, call in enumerate(calls)]
    final_usage = usage_dict(10, 5, style=style) if usage is True else (usage or None)
    out: list[JSONDict] = [chunk({"role": "assistant", "content": None}, model=model)]
    if reasoning:
        out += [chunk({"content": None, reasoning_field: piece}, model=model) for piece in split_text(reasoning, parts)]
    if text:
        extra = {reasoning_field: None} if style == "deepseek" else {}
        out += [chunk({"content": piece, **extra}, model=model) for piece in split_text(text, parts)]
    for index, spec in enumerate(specs):
        arguments = _argument_text(spec)
        header = {"index": index, "id": spec.id, "type": "function"}
        if style in ("openai", "deepseek"):
            out.append(
                chunk({"tool_calls": [{**header, "function": {"name": spec.name, "arguments": ""}}]}, model=model)
            )
            for piece in split_text(arguments, parts):
                out.append(chunk({"tool_calls": [{"index": index, "function": {"arguments": piece}}]}, model=model))
        elif style == "llamacpp":
            for piece in split_text(arguments, parts):
                call = {**header, "function": {"name": spec.name, "arguments": piece}}
                out.append(chunk({"tool_calls": [call]}, model=model))
        elif style == "ollama_per_chunk":
            call = {**header, "index": 0, "function": {"name": spec.name, "arguments": arguments}}
            out.append(chunk({"tool_calls": [call]}, model=model))
        elif style != "ollama":
            raise ValueError(f"Unknown style {style!r}")
    if style == "ollama" and specs:
        whole = [
            {
                "index": index,
                "id": spec.id,
                "type": "function",
                "function": {"name": spec.name, "arguments": _argument_text(spec)},
            }
            for index, spec in enumerate(specs)
        ]
        out.append(chunk({"tool_calls": whole}, model=model))
    if style in ("llamacpp", "deepseek"):
        out.append(chunk({}, finish_reason=finish_reason, usage=final_usage, model=model))
    else:
        out.append(chunk({}, finish_reason=finish_reason, model=model))
        if final_usage is not None:
            out.append(chunk(usage=final_usage, no_choices=True, model=model))
    return out


def completion_from_chunks(chunks: Sequence[JSONDict]) -> JSONDict:
    """The non-streamed body equivalent to a list of chunks (tool calls merged by index)."""
    content, reasoning, finish_reason, usage_ = "", "", None, None
    calls: dict[int, JSONDict] = {}
    model = DEFAULT_MODEL
    for item in chunks:
        model = item.get("model", model)
        usage_ = item.get("usage") or usage_
        for choice in item.get("choices") or []:
            finish_reason = choice.get("finish_reason") or finish_reason
            delta = choice.get("delta") or {}
            content += delta.get("content") or ""
            reasoning += delta.get("reasoning_content") or ""
            for call in delta.get("tool_calls") or []:
                merged = calls.setdefault(
                    call.get("index", 0), {"id": None, "type": "function", "function": {"name": None, "arguments": ""}}
                )
                merged["id"] = merged["id"] or call.get("id")
                function = call.get("function") or {}
                merged["function"]["name"] = merged["function"]["name"] or function.get("name")
                merged["function"]["arguments"] += function.get("arguments") or ""
    message: JSONDict = {"role": "assistant", "content": content or None}
    if reasoning:
        message["reasoning_content"] = reasoning
    if calls:
        message["tool_calls"] = [calls[index] for index in sorted(calls)]
    return {
        "id": "chatcmpl-fake",
        "object": "chat.completion",
        "created": 1_700_000_000,
        "model": model,
        "choices": [{"index": 0, "message": message, "finish_reason": finish_reason or "stop", "logprobs": None}],
        "usage": usage_,
    }


def sse_events(body: bytes) -> list[bytes]:
    """``body`` cut after each blank line; the pieces join back to ``body`` exactly."""
    pieces, start = [], 0
    while start < len(body):
        end = body.find(b"\n\n", start)
        end = len(body) if end < 0 else end + 2
        pieces.append(body[start:end])
        start = end
    return pieces


def chunks_of_sse(body: bytes) -> list[JSONDict]:
    """The JSON chunks in a raw SSE body (for answering a non-streamed request)."""
    found = []
    for line in body.decode().splitlines():
        if line.startswith("data:") and line[5:].strip() not in ("", "[DONE]"):
            found.append(json.loads(line[5:]))
    return found


# --------------------------------------------------------------------------- server


@dataclass
class RecordedRequest:
    method: str
    path: str
    headers: dict[str, str]
    """Lower-cased names."""
    body: Any
    """Parsed JSON, or ``None`` (no or invalid JSON body)."""


class _ClientGone(Exception):
    """The client closed the connection while we were streaming."""


class FakeOpenAI:
    """The server. ``with FakeOpenAI() as server: ...`` or ``start()``/``stop()``."""

    def __init__(
        self,
        responses: Iterable[Any] = (),
        *,
        responder: Responder | None = None,
        host: str = "127.0.0.1",
        port: int = 0,
        models: Sequence[str] = (DEFAULT_MODEL,),
        default_delay: float = 0.0,
    ) -> None:
        self._queue: deque[Any] = deque(responses)
        self.responder = responder
        """Called with the request body when the queue is empty."""
        self.models = list(models)
        self.default_delay = default_delay
        self.requests: list[RecordedRequest] = []
        self.client_disconnects = 0
        """Streams the client closed before their end (an abort, say)."""
        self._lock = threading.Lock()
        self._changed = threading.Condition(self._lock)
        self._httpd = ThreadingHTTPServer((host, port), _make_handler(self))
        self._httpd.daemon_threads = True
        self._httpd.block_on_close = False
        self._thread: threading.Thread | None = None

    # lifecycle
    @property
    def port(self) -> int:
        return int(self._httpd.server_address[1])

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def start(self) -> FakeOpenAI:
        self._thread = threading.Thread(target=self._httpd.serve_forever, args=(0.05,), name="fake-openai", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def __enter__(self) -> FakeOpenAI:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    # scripting
    def enqueue(self, *responses: Any) -> FakeOpenAI:
        """Queue responses (or shorthands) for the next chat requests, in order."""
        with self._lock:
            self._queue.extend(responses)
        return self

    @property
    def pending(self) -> int:
        """Queued responses not used yet."""
        with self._lock:
            return len(self._queue)

    @property
    def chat_requests(self) -> list[RecordedRequest]:
        with self._lock:
            return [request for request in self.requests if request.path.endswith("/chat/completions")]

    @property
    def bodies(self) -> list[Any]:
        """The JSON bodies of the chat requests, in order."""
        return [request.body for request in self.chat_requests]

    @property
    def last_body(self) -> Any:
        bodies = self.bodies
        return bodies[-1] if bodies else None

    def tool_results(self, call_id: str) -> list[Any]:
        """Every ``tool`` message content sent for the call ``call_id``, in every request so far."""
        return [
            message["content"]
            for body in self.bodies
            for message in body["messages"]
            if message["role"] == "tool" and message.get("tool_call_id") == call_id
        ]

    def wait_for(self, predicate: Callable[[FakeOpenAI], bool], timeout: float = 5.0) -> bool:
        """Block until ``predicate(self)`` holds (re-checked when a request or disconnect happens)."""
        deadline = time.monotonic() + timeout
        with self._changed:
            while not predicate(self):
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return False
                self._changed.wait(remaining)
        return True

    async def wait_for_async(self, predicate: Callable[[FakeOpenAI], bool], timeout: float = 5.0) -> bool:
        """``wait_for`` without blocking the event loop (for async tests)."""
        import asyncio

        return await asyncio.to_thread(self.wait_for, predicate, timeout)

    # used by the handler
    def _record(self, request: RecordedRequest) -> None:
        with self._changed:
            self.requests.append(request)
            self._changed.notify_all()

    def _note_disconnect(self) -> None:
        with self._changed:
            self.client_disconnects += 1
            self._changed.notify_all()

    def _next_response(self, body: Any) -> Response:
        with self._lock:
            queued = self._queue.popleft() if self._queue else None
        if queued is not None:
            return as_response(queued)
        if self.responder is not None:
            return as_response(self.responder(body))
        return HTTPError(500, message="fake_openai: no scripted response left")


def _make_handler(server: FakeOpenAI) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:
            pass

        def do_GET(self) -> None:
            server._record(RecordedRequest("GET", self.path, self._headers(), None))
            if self.path.rstrip("/").endswith("/models"):
                data = [{"id": name, "object": "model", "created": 0, "owned_by": "fake"} for name in server.models]
                self._send_json(200, {"object": "list", "data": data})
            else:
                self._send_json(404, {"error": {"message": f"Not found: {self.path}", "type": "not_found"}})

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length) if length else b""
            try:
                body = json.loads(raw) if raw else None
            except ValueError:
                body = None
            server._record(RecordedRequest("POST", self.path, self._headers(), body))
            if not self.path.rstrip("/").endswith("/chat/completions"):
                self._send_json(404, {"error": {"message": f"Not found: {self.path}", "type": "not_found"}})
                return
            try:
                response = server._next_response(body)
            except Exception as error:  # noqa: BLE001 - a broken responder becomes a visible 500
                response = HTTPError(500, message=f"fake_openai responder failed: {type(error).__name__}: {error}")
            streaming = isinstance(body, dict) and bool(body.get("stream"))
            try:
                self._respond(response, streaming)
            except (_ClientGone, BrokenPipeError, ConnectionResetError):
                server._note_disconnect()
                self.close_connection = True

        def _headers(self) -> dict[str, str]:
            return {name.lower(): value for name, value in self.headers.items()}

        def _send_json(self, status: int, payload: Any, headers: dict[str, str] | None = None) -> None:
            data = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            for name, value in (headers or {}).items():
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(data)
            self.wfile.flush()

        def _respond(self, response: Response, streaming: bool) -> None:
            if isinstance(response, HTTPError):
                self._send_json(response.status, response.payload(), response.headers)
                return
            if isinstance(response, Completion):
                self._send_json(200, response.body)
                return
            if not streaming:
                chunks = response.chunks if isinstance(response, Chunks) else chunks_of_sse(response.body)
                self._send_json(200, completion_from_chunks(chunks))
                return
            if isinstance(response, Chunks):
                pieces = [f"data: {json.dumps(item)}\n\n".encode() for item in response.chunks]
                if response.done and response.disconnect_after is None:
                    pieces.append(b"data: [DONE]\n\n")
                self._stream(pieces, response.delay, response.disconnect_after, response.headers)
            else:
                self._stream(sse_events(response.body), response.delay, response.disconnect_after, {})

        def _stream(
            self, pieces: list[bytes], delay: float | None, disconnect_after: int | None, headers: dict[str, str]
        ) -> None:
            delay = server.default_delay if delay is None else delay
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream; charset=utf-8")
            self.send_header("Cache-Control", "no-cache")
            self.send_header("Transfer-Encoding", "chunked")
            for name, value in headers.items():
                self.send_header(name, value)
            self.end_headers()
            self.wfile.flush()
            for count, piece in enumerate(pieces):
                if disconnect_after is not None and count >= disconnect_after:
                    self._drop_connection()
                    return
                if delay:
                    self._sleep_watching_client(delay)
                self.wfile.write(b"%x\r\n%s\r\n" % (len(piece), piece))
                self.wfile.flush()
            if disconnect_after is not None:
                self._drop_connection()
                return
            self.wfile.write(b"0\r\n\r\n")
            self.wfile.flush()

        def _drop_connection(self) -> None:
            # No terminating chunk: the client sees a body cut short.
            self.close_connection = True
            try:
                self.connection.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

        def _sleep_watching_client(self, seconds: float) -> None:
            # The client sends nothing while reading a response, so a readable
            # socket here means it closed the connection (an abort).
            deadline = time.monotonic() + seconds
            while (remaining := deadline - time.monotonic()) > 0:
                readable, _, _ = select.select([self.connection], [], [], remaining)
                if readable:
                    try:
                        data = self.connection.recv(1, socket.MSG_PEEK)
                    except OSError as error:
                        raise _ClientGone from error
                    if not data:
                        raise _ClientGone
                    time.sleep(min(remaining, 0.01))

    return Handler


# --------------------------------------------------------------------------- command line


def load_script(path: str) -> tuple[list[Any], Responder | None]:
    """``(responses, responder)`` from a ``.py`` file (``RESPONSES`` and/or ``responder``) or a JSON list."""
    if path.endswith(".json"):
        return list(json.loads(Path(path).read_text())), None
    # Scripts may ``import fake_openai`` for the builders: make that this very
    # module, so their response objects are the classes the server knows.
    sys.modules.setdefault("fake_openai", sys.modules[__name__])
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    namespace = runpy.run_path(path)
    return list(namespace.get("RESPONSES", [])), namespace.get("responder")


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="Scripted fake OpenAI-compatible server")
    parser.add_argument("--port", type=int, default=0, help="0: any free port (printed)")
    parser.add_argument("--script", help="a .py file defining responder(body) and/or RESPONSES, or a .json list")
    parser.add_argument("--delay", type=float, default=0.0, help="default seconds between streamed chunks")
    args = parser.parse_args(argv)
    responses, responder = load_script(args.script) if args.script else ([], None)
    server = FakeOpenAI(responses, responder=responder, port=args.port, default_delay=args.delay).start()
    print(f"READY {server.base_url}", flush=True)
    try:
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        pass
    finally:
        server.stop()


if __name__ == "__main__":
    main()
