"""``python -m pi_kernel serve-local``: the local model as an OpenAI-compatible server.

Other clients (the ``openai`` package, another notebook, an editor plugin) can
then use the offline model with tools: ``POST /v1/chat/completions`` (streamed
or not, ``tools`` and ``tool_choice`` honoured through the local provider's
grammar-constrained decoding) and ``GET /v1/models``. It listens on 127.0.0.1
only and needs no key. Requests are decoded one at a time (one model in
memory); a client that disconnects aborts its request.

Built on the standard library's ``http.server``: one thread per connection,
each running the provider's async stream on a private event loop.
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import json
import time
import uuid
from collections.abc import Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from pi_kernel.ai.json_stream import IncrementalJSONParser
from pi_kernel.ai.messages import AssistantMessage, Message, TextContent, ToolCall, ToolResultMessage, UserMessage
from pi_kernel.ai.models import AbortController, AssistantMessageEvent, Context, Model, StreamOptions
from pi_kernel.ai.providers.local import ToolChoiceError, is_request_error, stream_local, tool_heads
from pi_kernel.ai.providers.local_engine import INSTALL_HINT, LOCAL_MODEL_ID, get_engine, local_model_available
from pi_kernel.ai.providers.openai_format import convert_tool_call
from pi_kernel.ai.tool import Tool

DEFAULT_PORT = 8765
HOST = "127.0.0.1"
FINISH_REASONS = {"stop": "stop", "length": "length", "tool_use": "tool_calls"}


class BadRequest(ValueError):
    """A request the server answers with 400."""


# ---------------------------------------------------------------------------- request → provider


def _text(content: Any) -> str:
    """The text of an OpenAI message ``content`` (a string or a list of parts)."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(part.get("text", "") for part in content if isinstance(part, dict))
    raise BadRequest("message content must be a string or a list of parts")


def _tool_call(raw: dict[str, Any]) -> ToolCall:
    function = raw.get("function") or {}
    call = ToolCall(id=str(raw.get("id", "")), name=str(function.get("name", "")))
    arguments = function.get("arguments") or {}
    if not isinstance(arguments, str):
        call.arguments = arguments
        return call
    # Replayed history holds what models wrote: the same JSON repair as a streamed call gets.
    parser = IncrementalJSONParser()
    parser.feed(arguments)
    try:
        call.arguments = parser.finish()
    except ValueError:
        call.raw_arguments = arguments
    return call


def context_from_request(body: dict[str, Any]) -> Context:
    """The provider's ``Context`` from a chat-completions body."""
    raw_messages = body.get("messages")
    if not isinstance(raw_messages, list) or not raw_messages:
        raise BadRequest("'messages' must be a non-empty list")
    system: list[str] = []
    messages: list[Message] = []
    names: dict[str, str] = {}
    for raw in raw_messages:
        role = raw.get("role") if isinstance(raw, dict) else None
        if role in ("system", "developer"):
            system.append(_text(raw.get("content")))
        elif role == "user":
            messages.append(UserMessage(_text(raw.get("content"))))
        elif role == "assistant":
            content: list[Any] = [TextContent(text)] if (text := _text(raw.get("content"))) else []
            calls = [_tool_call(call) for call in raw.get("tool_calls") or []]
            names.update({call.id: call.name for call in calls})
            messages.append(AssistantMessage(content=[*content, *calls], stop_reason="tool_use" if calls else "stop"))
        elif role == "tool":
            call_id = str(raw.get("tool_call_id", ""))
            result = TextContent(_text(raw.get("content")))
            messages.append(ToolResultMessage(call_id, names.get(call_id, raw.get("name") or "tool"), [result]))
        else:
            raise BadRequest(f"unknown message role {role!r}")
    tools = []
    for raw in body.get("tools") or []:
        function = raw.get("function") if isinstance(raw, dict) else None
        if not isinstance(function, dict) or not function.get("name"):
            raise BadRequest("each tool needs a 'function' with a 'name'")
        parameters = function.get("parameters") or {"type": "object", "properties": {}}
        tools.append(Tool(function["name"], function.get("description") or "", parameters))
    return Context(system_prompt="\n\n".join(system) or None, messages=messages, tools=tools or None)


def options_from_request(body: dict[str, Any]) -> StreamOptions:
    choice = body.get("tool_choice")
    if isinstance(choice, dict):
        choice = (choice.get("function") or {}).get("name")
    max_tokens = body.get("max_completion_tokens") or body.get("max_tokens")
    temperature = body.get("temperature")
    return StreamOptions(
        tool_choice=choice,
        max_tokens=int(max_tokens) if max_tokens else None,
        temperature=float(temperature) if temperature is not None else None,
    )


# ---------------------------------------------------------------------------- provider → response


class ChunkWriter:
    """Turns provider events into ``chat.completion.chunk`` objects."""

    def __init__(self, model: str) -> None:
        self.id = f"chatcmpl-{uuid.uuid4().hex[:24]}"
        self.model = model
        self.created = int(time.time())

    def envelope(self, kind: str) -> dict[str, Any]:
        return {"id": self.id, "object": kind, "created": self.created, "model": self.model}

    def chunk(self, delta: dict[str, Any] | None, finish_reason: str | None = None, **extra: Any) -> dict[str, Any]:
        choices = [] if delta is None else [{"index": 0, "delta": delta, "finish_reason": finish_reason}]
        return {**self.envelope("chat.completion.chunk"), "choices": choices, **extra}

    def for_event(self, event: AssistantMessageEvent) -> dict[str, Any] | None:
        if event.type == "text_delta":
            return self.chunk({"content": event.delta})
        if event.type == "toolcall_start":
            call = event.partial.content[event.content_index or 0]
            assert isinstance(call, ToolCall)
            head = {"index": 0, "id": call.id, "type": "function", "function": {"name": call.name, "arguments": ""}}
            return self.chunk({"tool_calls": [head]})
        if event.type == "toolcall_delta":
            return self.chunk({"tool_calls": [{"index": 0, "function": {"arguments": event.delta}}]})
        if event.type == "done":
            return self.chunk({}, FINISH_REASONS[event.partial.stop_reason])
        return None


def usage_of(message: AssistantMessage) -> dict[str, Any]:
    """OpenAI's usage object: ``prompt_tokens`` is the whole prompt, cache reads included."""
    usage = message.usage
    result: dict[str, Any] = {
        "prompt_tokens": usage.prompt_tokens,
        "completion_tokens": usage.output,
        "total_tokens": usage.total_tokens,
    }
    if usage.cache_read:
        result["prompt_tokens_details"] = {"cached_tokens": usage.cache_read}
    return result


def completion_of(message: AssistantMessage, writer: ChunkWriter) -> dict[str, Any]:
    """The non-streamed ``chat.completion`` object."""
    reply: dict[str, Any] = {"role": "assistant", "content": message.text or None}
    if message.tool_calls:
        reply["tool_calls"] = [convert_tool_call(call) for call in message.tool_calls]
    choice = {"index": 0, "message": reply, "finish_reason": FINISH_REASONS[message.stop_reason]}
    return {**writer.envelope("chat.completion"), "choices": [choice], "usage": usage_of(message)}


def error_body(message: str, kind: str = "invalid_request_error") -> dict[str, Any]:
    return {"error": {"message": message, "type": kind}}


def failure_of(message: AssistantMessage) -> tuple[int, dict[str, Any]]:
    """The status and body of a failed message: 400 when the request was at fault (a prompt
    longer than the context, an impossible ``tool_choice``), else 500. Clients such as the
    ``openai`` package retry a 5xx, and the same request would only fail the same way again."""
    text = message.error_message or "the local model failed"
    if is_request_error(message):
        return 400, error_body(text)
    return 500, error_body(text, "server_error")


# ---------------------------------------------------------------------------- HTTP


class LocalModelHandler(BaseHTTPRequestHandler):
    server_version = "pi-kernel-local/1"
    protocol_version = "HTTP/1.1"
    model = Model(id=LOCAL_MODEL_ID, provider="local")
    quiet = False

    def log_message(self, format: str, *args: Any) -> None:
        if not self.quiet:
            super().log_message(format, *args)

    def _json(self, status: int, body: dict[str, Any]) -> None:
        data = json.dumps(body).encode("utf-8")
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self) -> None:
        if self.path.rstrip("/") in ("/v1/models", "/models"):
            entry = {"id": self.model.id, "object": "model", "created": 0, "owned_by": "pi-kernel"}
            self._json(200, {"object": "list", "data": [entry]})
        else:
            self._json(404, error_body(f"no route {self.path}", "not_found"))

    def do_POST(self) -> None:
        if self.path.rstrip("/") not in ("/v1/chat/completions", "/chat/completions"):
            self._json(404, error_body(f"no route {self.path}", "not_found"))
            return
        try:
            length = int(self.headers.get("Content-Length") or 0)
            body = json.loads(self.rfile.read(length) or b"{}")
            if not isinstance(body, dict):
                raise BadRequest("the body must be a JSON object")
            context = context_from_request(body)
            options = options_from_request(body)
            tool_heads(context, options)  # an impossible tool_choice is a 400, as OpenAI answers
        except (BadRequest, ToolChoiceError, ValueError, TypeError, AttributeError) as error:
            self._json(400, error_body(str(error)))
            return
        controller = AbortController()
        options.signal = controller.signal
        if body.get("stream"):
            include_usage = bool((body.get("stream_options") or {}).get("include_usage"))
            asyncio.run(self._stream(context, options, controller, include_usage))
        else:
            asyncio.run(self._complete(context, options))

    async def _complete(self, context: Context, options: StreamOptions) -> None:
        message = await stream_local(self.model, context, options).result()
        if message.stop_reason in ("error", "aborted"):
            self._json(*failure_of(message))
        else:
            self._json(200, completion_of(message, ChunkWriter(self.model.id)))

    async def _stream(
        self, context: Context, options: StreamOptions, controller: AbortController, include_usage: bool
    ) -> None:
        """SSE chunks; the 200 waits for the first event after ``start``, so that a request error
        found before any content (a prompt longer than the context) still gets its 400."""
        writer = ChunkWriter(self.model.id)
        send = functools.partial(self._send, controller=controller)
        started = False
        async for event in stream_local(self.model, context, options):
            if not started:
                if event.type == "start":
                    continue  # held back until the next event shows whether the request failed
                if event.type == "error":
                    self._json(*failure_of(event.partial))
                    return
                self._start_events()
                started = True
                if not send(writer.chunk({"role": "assistant", "content": ""})):
                    return
            if event.type == "error":
                send(failure_of(event.partial)[1])
                return
            chunk = writer.for_event(event)
            if chunk is not None and not send(chunk):
                return
            if event.type == "done" and include_usage:
                send(writer.chunk(None, usage=usage_of(event.partial)))
        send(None)

    def _start_events(self) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Connection", "close")
        self.end_headers()
        self.close_connection = True

    def _send(self, data: dict[str, Any] | None, controller: AbortController) -> bool:
        """Write one SSE event (``None``: ``[DONE]``); ``False`` once the client has gone (aborting the request)."""
        line = "[DONE]" if data is None else json.dumps(data)
        try:
            self.wfile.write(f"data: {line}\n\n".encode())
            self.wfile.flush()
        except OSError:
            controller.abort("the client disconnected")
            return False
        return True


def make_server(port: int = DEFAULT_PORT, *, quiet: bool = False) -> ThreadingHTTPServer:
    """A server bound to 127.0.0.1 (``port=0``: any free port); call ``serve_forever()``."""
    handler = type("Handler", (LocalModelHandler,), {"quiet": quiet})
    server = ThreadingHTTPServer((HOST, port), handler)
    server.daemon_threads = True
    return server


def main(argv: Sequence[str] = ()) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m pi_kernel serve-local",
        description="Serve the local model as an OpenAI-compatible chat-completions API on 127.0.0.1.",
    )
    parser.add_argument("--port", type=int, default=DEFAULT_PORT, help=f"port (default {DEFAULT_PORT}; 0: any)")
    parser.add_argument("--quiet", action="store_true", help="do not log each request")
    args = parser.parse_args(list(argv))
    if not local_model_available():
        print(INSTALL_HINT)
        return 1
    get_engine().load()  # fail here, not on the first request, if the model cannot load
    server = make_server(args.port, quiet=args.quiet)
    url = f"http://{HOST}:{server.server_address[1]}/v1"
    print(f"Serving local:{LOCAL_MODEL_ID} at {url} (OPENAI_BASE_URL={url}); Ctrl+C stops.", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
    return 0
