"""``is_context_overflow``: whether a failed request failed because the prompt did not fit the model.

Providers say it in their own words (as pi's ``isContextOverflow`` lists them);
the agent layer compacts the conversation and retries once when one of them
answers so. Texts seen:

- OpenAI (code ``context_length_exceeded``), DeepSeek, OpenRouter, vLLM (older):
  "This model's maximum context length is 128000 tokens. However, your
  messages resulted in ..."; Groq: "... reduce the length of the messages"
- vLLM: "... is longer than the maximum model length of 4096"
- llama.cpp server: "the request exceeds the available context size, try
  increasing it" (type ``exceed_context_size_error``)
- Ollama: "prompt too long; exceeded max context length by 12 tokens",
  "input length exceeds maximum context length"
- Anthropic: "prompt is too long: 208000 tokens > 200000 maximum"; "input length and
  `max_tokens` exceed context limit: 195000 + 16384 > 200000"
- Gemini: "The input token count (1200000) exceeds the maximum number of tokens
  allowed (1048576)."
- the local model: ``ContextOverflowError: the prompt has ... tokens``
"""

from __future__ import annotations

import re

_OVERFLOW = re.compile(
    r"context[_ ]length[_ ]exceeded"
    r"|maximum context length"
    r"|max context length"
    r"|reduce the length of the messages"
    r"|longer than the maximum model length"
    r"|exceeds? the available context size"
    r"|exceed_context_size"
    r"|exceeds? (?:the )?(?:model'?s? )?context (?:window|length|size)"
    r"|prompt is too long"
    r"|exceed context limit"
    r"|prompt too long"
    r"|input is too long"
    r"|greater than the context length"
    r"|too many tokens"
    r"|token limit exceeded"
    r"|exceeds the maximum number of tokens allowed"
    r"|ContextOverflowError",
    re.IGNORECASE,
)


def is_context_overflow(error_message: str | None) -> bool:
    """Whether a provider's error text says the request was longer than the model's context."""
    return bool(error_message) and _OVERFLOW.search(error_message or "") is not None
