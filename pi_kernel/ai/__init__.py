"""Messages, schema-driven tools, validation, streaming JSON and providers.

The bottom layer: it imports nothing else from ``pi_kernel``. Its names are
imported on first use (``__getattr__`` below), so that a light module of the
layer, such as the masking module, which the kernel's settings need at
start, does not pull in pydantic, the validators and the providers with it
(about 100 ms of every kernel start; ``benchmarks/kernel_startup.py``).
"""

from __future__ import annotations

import importlib
import sys
import types
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pi_kernel.ai.json_stream import IncrementalJSONParser, parse_streaming_json
    from pi_kernel.ai.messages import (
        AssistantMessage,
        Content,
        ImageContent,
        Message,
        StopReason,
        TextContent,
        ThinkingContent,
        ToolCall,
        ToolResultMessage,
        Usage,
        UserMessage,
        content_from_dict,
        message_from_dict,
        to_dict,
    )
    from pi_kernel.ai.models import (
        AbortController,
        AbortSignal,
        AssistantMessageEvent,
        AssistantMessageStream,
        Compat,
        Context,
        Model,
        ModelCost,
        StreamOptions,
        detect_compat,
        detect_provider,
        parse_model_spec,
    )
    from pi_kernel.ai.stream import complete, stream
    from pi_kernel.ai.tool import ConstrainedSampling, Tool, ToolArgumentsError, validate_tool_arguments

_HOMES = ("messages", "models", "stream", "json_stream", "tool")
"""Where the names of ``__all__`` live (as imported under ``TYPE_CHECKING`` above), lightest first."""


class _Package(types.ModuleType):
    """Keeps a lazy name from being shadowed by the submodule of the same name (``stream``): importing
    ``pi_kernel.ai.stream`` binds the module on the package, where the function was meant, as eager
    imports had it."""

    def __setattr__(self, name: str, value: Any) -> None:
        if name in __all__ and isinstance(value, types.ModuleType):
            return
        super().__setattr__(name, value)


sys.modules[__name__].__class__ = _Package


def __getattr__(name: str) -> Any:
    if name in __all__:
        for home in _HOMES:
            module = importlib.import_module(f"pi_kernel.ai.{home}")
            if name in vars(module):
                value = globals()[name] = vars(module)[name]
                return value
    raise AttributeError(f"module 'pi_kernel.ai' has no attribute {name!r}")


__all__ = [
    "AbortController",
    "AbortSignal",
    "AssistantMessage",
    "AssistantMessageEvent",
    "AssistantMessageStream",
    "Compat",
    "ConstrainedSampling",
    "Content",
    "Context",
    "ImageContent",
    "IncrementalJSONParser",
    "Message",
    "Model",
    "ModelCost",
    "StopReason",
    "StreamOptions",
    "TextContent",
    "ThinkingContent",
    "Tool",
    "ToolArgumentsError",
    "ToolCall",
    "ToolResultMessage",
    "Usage",
    "UserMessage",
    "complete",
    "content_from_dict",
    "detect_compat",
    "detect_provider",
    "message_from_dict",
    "parse_model_spec",
    "parse_streaming_json",
    "stream",
    "to_dict",
    "validate_tool_arguments",
]
