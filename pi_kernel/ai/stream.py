"""``stream()``: one entry point over every provider.

The providers (``pi_kernel.ai.providers.remote``: OpenAI-compatible servers and Anthropic;
``pi_kernel.ai.providers.local``) are imported lazily, on first use: this
module loads with ``pi_kernel.ai`` at kernel start, and a kernel that never
prompts a model should not pay for them (and for ``openai``, ``anthropic`` and
``llama_cpp``, which they import when they run).
"""

from __future__ import annotations

from pi_kernel.ai.messages import AssistantMessage
from pi_kernel.ai.models import AssistantMessageStream, Context, Model, StreamOptions


def stream(model: Model, context: Context, options: StreamOptions | None = None) -> AssistantMessageStream:
    """Stream one assistant message from ``model``; never raises."""
    options = options or StreamOptions()
    if model.provider == "local":
        from pi_kernel.ai.providers.local import stream_local

        return stream_local(model, context, options)
    if model.provider == "anthropic":
        from pi_kernel.ai.providers.remote import stream_anthropic

        return stream_anthropic(model, context, options)
    from pi_kernel.ai.providers.remote import stream_openai_compatible

    return stream_openai_compatible(model, context, options)


async def complete(model: Model, context: Context, options: StreamOptions | None = None) -> AssistantMessage:
    """The final message of ``stream()``, for callers that want no events."""
    return await stream(model, context, options).result()
