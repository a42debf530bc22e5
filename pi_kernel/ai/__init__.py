"""Messages, schema-driven tools, validation, streaming JSON and providers.

The bottom layer: it imports nothing else from ``pi_kernel``.
"""

from pi_kernel.ai.abort import AbortController, AbortSignal
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
from pi_kernel.ai.models import Compat, Model, ModelCost, detect_compat, detect_provider, parse_model_spec
from pi_kernel.ai.stream import complete, stream
from pi_kernel.ai.stream_types import AssistantMessageEvent, AssistantMessageStream, Context, StreamOptions
from pi_kernel.ai.tool import ConstrainedSampling, Tool
from pi_kernel.ai.validation import ToolArgumentsError, validate_tool_arguments

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
