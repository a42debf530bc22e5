"""A scripted, real-HTTP fake of Anthropic's Messages API (``POST /v1/messages``, streamed as SSE).

Tests talk to it through the real ``anthropic`` SDK (``base_url`` = this
server). Like ``fake_openai``: a thread on 127.0.0.1, standard library only,
every request recorded (``requests``: path, lower-cased headers, JSON body),
and each request takes the next queued response, else ``responder(body)``
decides. A response is one of:

* ``Events(list_of_event_dicts, delay=..., disconnect_after=N)``: each sent as
  ``event: <type>\\ndata: <json>\\n\\n`` (the documented sequence, built by
  ``message_events``);
* ``HTTPError(status, error_type, message, headers)``: an Anthropic error body;
* a str (a text answer) or a list of event dicts (shorthands).

A body that breaks one of the API's documented rules (``api_rule_violation``)
gets the API's 400 instead, without taking a queued response.

``PromptCache.usage_for(body)`` models the API's prompt cache: it counts the
request's tokens (about four characters each) block by block in cache order,
reads the longest prefix an earlier request wrote that it finds at a
breakpoint or up to 20 blocks before one, and writes the prompt up to the
last breakpoint; a responder puts that usage into ``message_events`` (see
``benchmarks/prompt_caching.py``), so the usage the client sees follows what
it sent. Entries expire ``ttl`` seconds after their last use (``clock`` is moved
by the caller to model a pause).
"""

from __future__ import annotations

import hashlib
import json
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

JSONDict = dict[str, Any]
DEFAULT_MODEL = "claude-sonnet-4-5"
CHARS_PER_TOKEN = 4


@dataclass
class Events:
    events: list[JSONDict]
    delay: float = 0.0
    """Seconds before each event."""
    disconnect_after: int | None = None
    """Close the connection abruptly after this many events."""
    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)


@dataclass
class HTTPError:
    status: int
    error_type: str = "api_error"
    message: str = "Fake error"
    headers: dict[str, str] = field(default_factory=dict)

    def payload(self) -> bytes:
        return json.dumps({"type": "error", "error": {"type": self.error_type, "message": self.message}}).encode()


Response = Events | HTTPError

MAX_CACHE_BREAKPOINTS = 4


def api_rule_violation(body: JSONDict) -> HTTPError | None:
    """The 400 the real API answers for a body that breaks one of its documented rules, else ``None``:
    at most four ``cache_control`` breakpoints; thinking's ``budget_tokens`` at least 1,024 and below
    ``max_tokens``; no thinking with a forced tool; with thinking on, a request continuing a tool loop (the last
    message is tool results) needs the loop's assistant message to start with a thinking block."""
    marks = sum("cache_control" in tool for tool in body.get("tools") or [])
    system = body.get("system")
    marks += (
        sum("cache_control" in block for block in system if isinstance(block, dict)) if isinstance(system, list) else 0
    )
    for message in body.get("messages") or []:
        content = message.get("content")
        if isinstance(content, list):
            marks += sum(isinstance(block, dict) and "cache_control" in block for block in content)
    if marks > MAX_CACHE_BREAKPOINTS:
        return HTTPError(
            400, "invalid_request_error", f"A maximum of 4 blocks with cache_control may be provided. Found {marks}."
        )
    thinking_on = isinstance(body.get("thinking"), dict) and body["thinking"].get("type") == "enabled"
    if not thinking_on:
        return None
    budget = body["thinking"].get("budget_tokens", 0)
    if budget < 1024:
        return HTTPError(400, "invalid_request_error", "thinking.enabled.budget_tokens: Input should be >= 1024")
    if budget >= body.get("max_tokens", 0):
        return HTTPError(400, "invalid_request_error", "`max_tokens` must be greater than `thinking.budget_tokens`.")
    choice = body.get("tool_choice") or {}
    if choice.get("type") in ("any", "tool"):
        return HTTPError(400, "invalid_request_error", "Thinking may not be enabled when tool_choice forces tool use.")
    messages = body.get("messages") or []
    index = len(messages)
    while index > 0 and messages[index - 1].get("role") == "user":
        index -= 1  # the API joins consecutive user messages into one turn
    trailing = [block for message in messages[index:] for block in _blocks(message)]
    if index > 0 and any(block.get("type") == "tool_result" for block in trailing):
        first = (_blocks(messages[index - 1]) or [{}])[0]
        kind = first.get("type")
        if kind not in ("thinking", "redacted_thinking"):
            return HTTPError(
                400,
                "invalid_request_error",
                f"messages.{index - 1}.content.0.type: Expected `thinking` or `redacted_thinking`, "
                f"but found `{kind}`. When `thinking` is enabled, a final `assistant` message must start with "
                "a thinking block.",
            )
    return None


def _blocks(message: JSONDict) -> list[JSONDict]:
    content = message.get("content")
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    return [block for block in content or [] if isinstance(block, dict)]


# --------------------------------------------------------------------------- event builders


def _split(text: str, parts: int) -> list[str]:
    parts = max(1, min(parts, len(text))) if text else 1
    size = -(-len(text) // parts) if text else 1
    return [text[start : start + size] for start in range(0, len(text), size)] or [""]


def tool_use(name: str, arguments: JSONDict | str, call_id: str = "toolu_01") -> JSONDict:
    """A tool call for ``message_events``: ``arguments`` a dict or the exact JSON text to stream."""
    return {"type": "tool_use", "name": name, "arguments": arguments, "id": call_id}


def thinking(text: str, signature: str = "sig-abc123") -> JSONDict:
    return {"type": "thinking", "thinking": text, "signature": signature}


def redacted(data: str = "encrypted-data") -> JSONDict:
    return {"type": "redacted_thinking", "data": data}


def message_events(
    *blocks: str | JSONDict,
    stop_reason: str | None = None,
    usage: JSONDict | None = None,
    parts: int = 3,
    model: str = DEFAULT_MODEL,
) -> list[JSONDict]:
    """The documented event sequence of one message: ``message_start``, each block's start/deltas/stop,
    ``message_delta`` (stop reason and usage), ``message_stop``; a ``ping`` after the start.

    ``blocks``: a str is a text block; ``thinking(...)``, ``redacted(...)``, ``tool_use(...)``. ``usage``:
    ``input_tokens`` etc. of ``message_start`` (``output_tokens`` goes to ``message_delta``)."""
    usage = dict(usage or {"input_tokens": 25, "output_tokens": 10})
    output = usage.pop("output_tokens", 10)
    start_usage = {"input_tokens": 0, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0, **usage}
    events: list[JSONDict] = [
        {
            "type": "message_start",
            "message": {
                "id": "msg_fake",
                "type": "message",
                "role": "assistant",
                "model": model,
                "content": [],
                "stop_reason": None,
                "stop_sequence": None,
                "usage": {**start_usage, "output_tokens": 1},
            },
        },
        {"type": "ping"},
    ]
    has_tools = False
    for index, block in enumerate(blocks):
        spec: JSONDict = {"type": "text", "text": block} if isinstance(block, str) else block
        kind = spec["type"]
        if kind == "text":
            events.append(
                {"type": "content_block_start", "index": index, "content_block": {"type": "text", "text": ""}}
            )
            for piece in _split(spec["text"], parts):
                events.append(
                    {"type": "content_block_delta", "index": index, "delta": {"type": "text_delta", "text": piece}}
                )
        elif kind == "thinking":
            start = {"type": "thinking", "thinking": "", "signature": ""}
            events.append({"type": "content_block_start", "index": index, "content_block": start})
            for piece in _split(spec["thinking"], parts):
                delta = {"type": "thinking_delta", "thinking": piece}
                events.append({"type": "content_block_delta", "index": index, "delta": delta})
            delta = {"type": "signature_delta", "signature": spec["signature"]}
            events.append({"type": "content_block_delta", "index": index, "delta": delta})
        elif kind == "redacted_thinking":
            events.append({"type": "content_block_start", "index": index, "content_block": spec})
        elif kind == "tool_use":
            has_tools = True
            start = {"type": "tool_use", "id": spec["id"], "name": spec["name"], "input": {}}
            events.append({"type": "content_block_start", "index": index, "content_block": start})
            arguments = spec["arguments"]
            text = arguments if isinstance(arguments, str) else json.dumps(arguments)
            for piece in _split(text, parts):
                delta = {"type": "input_json_delta", "partial_json": piece}
                events.append({"type": "content_block_delta", "index": index, "delta": delta})
        events.append({"type": "content_block_stop", "index": index})
    reason = stop_reason or ("tool_use" if has_tools else "end_turn")
    events.append(
        {
            "type": "message_delta",
            "delta": {"stop_reason": reason, "stop_sequence": None},
            "usage": {"output_tokens": output},
        }
    )
    events.append({"type": "message_stop"})
    return events


def error_event(error_type: str = "overloaded_error", message: str = "Overloaded") -> JSONDict:
    """An ``error`` event sent inside a started stream."""
    return {"type": "error", "error": {"type": error_type, "message": message}}


def as_response(spec: Any) -> Response:
    if isinstance(spec, (Events, HTTPError)):
        return spec
    if isinstance(spec, str):
        return Events(message_events(spec))
    if isinstance(spec, list):
        return Events(spec)
    raise TypeError(f"Not a fake_anthropic response: {spec!r}")


# --------------------------------------------------------------------------- a model of the prompt cache


def _tokens(value: Any) -> int:
    """About four characters a token; a breakpoint's ``cache_control`` is a marker, not prompt."""
    if isinstance(value, dict):
        value = {key: item for key, item in value.items() if key != "cache_control"}
    return max(1, len(json.dumps(value, sort_keys=True, ensure_ascii=False)) // CHARS_PER_TOKEN)


def prompt_segments(body: JSONDict) -> list[tuple[int, bool]]:
    """The request's prompt in cache order (tools, system, messages' blocks): ``(tokens, breakpoint)`` per
    block, ``breakpoint`` where it carries ``cache_control``."""
    segments: list[tuple[int, bool]] = []
    for tool in body.get("tools") or []:
        segments.append((_tokens(tool), "cache_control" in tool))
    system = body.get("system")
    if isinstance(system, str):
        segments.append((_tokens(system), False))
    for block in system or [] if not isinstance(system, str) else []:
        segments.append((_tokens(block), "cache_control" in block))
    for message in body.get("messages") or []:
        content = message.get("content")
        for block in [content] if isinstance(content, str) else content or []:
            segments.append((_tokens(block), isinstance(block, dict) and "cache_control" in block))
    return segments


LOOKBACK_BLOCKS = 20
"""The API looks for a cached prefix at each breakpoint and at up to 20 blocks before it."""


def _prefixes(body: JSONDict) -> list[tuple[str, int, bool]]:
    """``(hash of the prompt up to the block, tokens so far, breakpoint)`` after each block, in order."""
    flat: list[Any] = [("tool", tool) for tool in body.get("tools") or []]
    system = body.get("system")
    flat.extend(("system", block) for block in (system if isinstance(system, list) else [system] if system else []))
    for message in body.get("messages") or []:
        content = message.get("content")
        flat.extend(
            (message.get("role"), block) for block in ([content] if isinstance(content, str) else content or [])
        )
    prefixes: list[tuple[str, int, bool]] = []
    digest = hashlib.sha256(str(body.get("model")).encode())
    tokens = 0
    for (role, block), (count, breakpoint) in zip(flat, prompt_segments(body), strict=True):
        stripped = {k: v for k, v in block.items() if k != "cache_control"} if isinstance(block, dict) else block
        digest.update(json.dumps([role, stripped], sort_keys=True).encode())
        tokens += count
        prefixes.append((digest.hexdigest(), tokens, breakpoint))
    return prefixes


MIN_CACHE_TOKENS = {
    "claude-opus-4-5": 4096,
    "claude-haiku-4-5": 4096,
    "claude-3-5-haiku": 2048,
    "claude-3-haiku": 2048,
}
"""The shortest prefix the API caches, by model id prefix (Anthropic's prompt-caching docs); 1,024 for the
rest (Sonnet 4.5, Sonnet 4, Opus 4.1, Opus 4, Sonnet 3.7)."""


def min_cache_tokens(model_id: str) -> int:
    prefixes = [prefix for prefix in MIN_CACHE_TOKENS if model_id.startswith(prefix)]
    return MIN_CACHE_TOKENS[max(prefixes, key=len)] if prefixes else 1024


@dataclass
class PromptCache:
    """Prefixes written so far (by hash, with the time each was last used); ``min_tokens``: shorter prefixes
    are not cached (as the API; ``None``: the request's model's minimum, ``min_cache_tokens``); ``ttl``: seconds
    an entry lives after its last use (the API's default five minutes); ``clock``: the time now (a test or
    benchmark moves it to model a pause)."""

    written: dict[str, float] = field(default_factory=dict)
    min_tokens: int | None = None
    ttl: float = 300.0
    clock: float = 0.0

    def usage_for(self, body: JSONDict) -> JSONDict:
        """``input_tokens``, ``cache_read_input_tokens``, ``cache_creation_input_tokens`` of ``body``: the
        longest written prefix found at a breakpoint or up to ``LOOKBACK_BLOCKS`` blocks before one is read;
        the prompt up to the last breakpoint is written (when long enough); the rest is plain input."""
        prefixes = _prefixes(body)
        minimum = self.min_tokens if self.min_tokens is not None else min_cache_tokens(str(body.get("model")))
        self.written = {key: used for key, used in self.written.items() if self.clock - used <= self.ttl}
        total = prefixes[-1][1] if prefixes else 0
        breakpoints = [index for index, (_, _, breakpoint) in enumerate(prefixes) if breakpoint]
        read = 0
        for point in breakpoints:
            for index in range(point, max(point - LOOKBACK_BLOCKS, -1), -1):
                key, tokens, _ = prefixes[index]
                if key in self.written:
                    read = max(read, tokens)
                    self.written[key] = self.clock  # a read refreshes the entry's lifetime
                    break
        cached_to = max((prefixes[index][1] for index in breakpoints), default=0)
        write = max(cached_to - read, 0) if cached_to >= minimum else 0
        for index in breakpoints:
            if prefixes[index][1] >= minimum:
                self.written[prefixes[index][0]] = self.clock
        return {
            "input_tokens": total - read - write,
            "cache_read_input_tokens": read,
            "cache_creation_input_tokens": write,
        }


# --------------------------------------------------------------------------- the server


@dataclass
class RecordedRequest:
    method: str
    path: str
    headers: dict[str, str]
    body: Any


class FakeAnthropic:
    def __init__(self, responder: Callable[[JSONDict], Any] | None = None) -> None:
        self.responder = responder
        self.requests: list[RecordedRequest] = []
        self._queue: deque[Response] = deque()
        self._lock = threading.Lock()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), _make_handler(self))
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def base_url(self) -> str:
        """The SDK's ``base_url`` (it adds ``/v1/messages``)."""
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def start(self) -> FakeAnthropic:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    def __enter__(self) -> FakeAnthropic:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def enqueue(self, *responses: Any) -> FakeAnthropic:
        with self._lock:
            self._queue.extend(as_response(response) for response in responses)
        return self

    @property
    def bodies(self) -> list[Any]:
        return [request.body for request in self.requests if request.path.endswith("/messages")]

    def _next(self, body: JSONDict) -> Response:
        with self._lock:
            self.requests.append(RecordedRequest("POST", "", {}, body))
            violation = api_rule_violation(body)
            if violation is not None:
                return violation
            if self._queue:
                return self._queue.popleft()
        if self.responder is not None:
            return as_response(self.responder(body))
        return HTTPError(500, "api_error", "fake_anthropic: nothing scripted for this request")


def _make_handler(server: FakeAnthropic) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:
            pass

        def do_POST(self) -> None:
            length = int(self.headers.get("content-length") or 0)
            raw = self.rfile.read(length)
            try:
                body = json.loads(raw)
            except ValueError:
                body = raw.decode(errors="replace")
            response = server._next(body if isinstance(body, dict) else {})
            recorded = server.requests[-1]
            recorded.path = self.path
            recorded.headers = {key.lower(): value for key, value in self.headers.items()}
            recorded.body = body
            if isinstance(response, HTTPError):
                payload = response.payload()
                self.send_response(response.status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(payload)))
                for key, value in response.headers.items():
                    self.send_header(key, value)
                self.end_headers()
                self.wfile.write(payload)
                return
            self._stream(response)

        def _stream(self, response: Events) -> None:
            self.send_response(response.status)
            self.send_header("content-type", "text/event-stream")
            self.send_header("cache-control", "no-cache")
            self.send_header("connection", "close")
            for key, value in response.headers.items():
                self.send_header(key, value)
            self.end_headers()
            self.close_connection = True
            try:
                for number, event in enumerate(response.events):
                    if response.disconnect_after is not None and number >= response.disconnect_after:
                        self._drop()
                        return
                    if response.delay:
                        time.sleep(response.delay)
                    data = json.dumps(event)
                    self.wfile.write(f"event: {event['type']}\ndata: {data}\n\n".encode())
                    self.wfile.flush()
            except (BrokenPipeError, ConnectionResetError):
                return

        def _drop(self) -> None:
            import socket

            try:
                self.connection.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    return Handler
