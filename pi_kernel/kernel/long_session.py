"""Long sessions in the kernel: the context window, compaction, usage, prices and budgets as the
person sees and sets them (the mechanics are the agent layer's: ``pi_kernel.agent.compaction`` and
``pi_kernel.agent.usage``; ``docs/long-sessions.md`` describes the behaviour).

This module owns the ``%pi`` commands ``compact``, ``usage``, ``price`` and ``budget``, the
``--context`` flag of ``%pi model``, the ``context:`` and ``budget:`` lines of ``%pi``, how the
session's settings reach its agent, the context window asked of a local server (``/models`` of
vLLM, ``/props`` of llama.cpp, ``/api/ps`` and ``/api/show`` of Ollama), and ``_pi_results``: the
whole value of each tool result that was cut before it reached the model.

``pi_kernel.agent``, ``pi_kernel.widgets`` (the footer's context meter), ``pi_kernel.ai``'s
``Context`` (pydantic comes with it) and ``pi_kernel.ai.providers.local_engine`` are imported lazily,
inside the functions that use them: this module loads at kernel start, where the agent layer would cost
about 25 ms, the widgets (through the tool layer) about 100 ms, pydantic about 100 ms and the local
engine about 5 ms.
"""

from __future__ import annotations

import asyncio
import json
import urllib.request
from typing import TYPE_CHECKING, Any, Protocol

from IPython.core.error import UsageError

from pi_kernel.ai.models import KNOWN_COSTS, ModelCost, detect_provider, known_cost
from pi_kernel.kernel.cell_turns import CellTurns
from pi_kernel.kernel.config import dollars, positive_int
from pi_kernel.kernel.interrupt import interrupt_hook
from pi_kernel.kernel.undo import ConversationVersions, Version

if TYPE_CHECKING:
    from pi_kernel.agent import Agent
    from pi_kernel.agent.events import ToolExecutionEndEvent
    from pi_kernel.ai import Model
    from pi_kernel.kernel.config import PiSettings
    from pi_kernel.kernel.turn import Turn

RESULTS_VARIABLE = "_pi_results"
"""The user's variable holding the whole value of cut tool results: tool call id → text."""
KEPT_RESULTS = 20
"""How many cut results ``_pi_results`` keeps (the oldest go first)."""
SERVERS_THAT_SAY = ("vllm", "llamacpp", "ollama")
OLLAMA_DEFAULT_CONTEXT = 4_096
"""The context Ollama serves a model with when nothing sets it (its smallest default, by VRAM)."""

_server_windows: dict[tuple[str, str], int | None] = {}


class LongSession(Protocol):
    """What the ``%pi`` commands here read of the session (``PiSession`` has it)."""

    @property
    def agent(self) -> Agent: ...

    @property
    def model(self) -> Model | None: ...

    @property
    def turn(self) -> Turn | None:
        """The ``%%pi`` turn running now."""

    @property
    def cell_turns(self) -> CellTurns: ...

    @property
    def versions(self) -> ConversationVersions: ...


# ---------------------------------------------------------------- settings → agent and model


def configure_long_session(agent: Agent, settings: PiSettings) -> None:
    """The session's tool-result limit, budget and extra prices, on its agent."""
    from pi_kernel.agent.usage import Budget

    if settings.tool_result_limit is not None:
        agent.max_tool_result_chars = settings.tool_result_limit
    agent.budget = Budget(settings.budget, settings.token_budget)
    for model_id, (price_in, price_out) in settings.prices.items():
        set_price(model_id, price_in, price_out)


def set_price(
    model_id: str, price_in: float, price_out: float, cache_read: float = 0.0, cache_write: float = 0.0
) -> None:
    """USD per million input / output (and cache read / write) tokens for ``model_id``, from the next request on."""
    KNOWN_COSTS[model_id] = ModelCost(price_in, price_out, cache_read, cache_write)


def describe_price(cost: ModelCost) -> str:
    """``$3 in, $15 out`` and, where the model has them, its cache prices."""
    text = f"${cost.input:g} in, ${cost.output:g} out"
    if cost.cache_read:
        text += f", ${cost.cache_read:g} cache read"
    if cost.cache_write:
        text += f", ${cost.cache_write:g} cache write"
    return text


def with_context_window(model: Model | None, window: int | None) -> Model | None:
    """``model`` with the window the person set, else (when neither it nor the table knows one) the one
    its local server reports."""
    if model is None:
        return None
    if window is not None:
        return model.with_(context_window=window)
    if model.context_window:
        return model
    if model.provider == "local":  # the window the local engine is loaded with
        from pi_kernel.ai.providers.local_engine import local_context_tokens

        return model.with_(context_window=local_context_tokens())
    if model.context_window_source == "known":
        return model

    provider = model.provider if model.provider in SERVERS_THAT_SAY else detect_provider(model.resolved_base_url)
    base_url = model.resolved_base_url
    if provider not in SERVERS_THAT_SAY or not base_url:
        return model
    key = (base_url, model.id)
    if key not in _server_windows:
        _server_windows[key] = server_context_window(base_url, model.id, provider)
    found = _server_windows[key]
    return model.with_(context_window=found) if found else model


def _get_json(url: str, body: dict[str, Any] | None = None, timeout: float = 3.0) -> Any:
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(url, data=data, headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=timeout) as response:
        return json.loads(response.read())


def _window_of(entry: dict[str, Any]) -> int | None:
    """vLLM's ``max_model_len``, llama.cpp's ``meta.n_ctx`` / ``n_ctx_train``, or a ``context_length``."""
    found = entry.get("meta")
    meta: dict[str, Any] = found if isinstance(found, dict) else {}
    for value in (
        entry.get("max_model_len"),
        entry.get("context_length"),
        entry.get("context_window"),
        meta.get("n_ctx"),
        meta.get("n_ctx_train"),
    ):
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            return value
    return None


def _positive(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None


def _ollama_window(root: str, model_id: str) -> int | None:
    """The context Ollama serves ``model_id`` with: ``/api/ps`` (a loaded model's ``context_length``), else
    the model's ``num_ctx`` parameter, else Ollama's smallest default (4,096) within the model's training
    length (``/api/show``'s ``*.context_length`` is that length, not what is served)."""
    try:
        running = _get_json(f"{root}/api/ps").get("models") or []
    except (OSError, ValueError, AttributeError):
        running = []
    for entry in running:
        if isinstance(entry, dict) and model_id in (entry.get("name"), entry.get("model")):
            found = _positive(entry.get("context_length"))
            if found:
                return found
    shown = _get_json(f"{root}/api/show", {"model": model_id})
    for line in str(shown.get("parameters") or "").splitlines():
        name, _, value = line.partition(" ")
        if name == "num_ctx" and value.strip().isdigit():
            return int(value.strip())
    info = shown.get("model_info") or {}
    lengths = [v for k, v in info.items() if k.endswith(".context_length") and _positive(v)]
    return min(lengths[0], OLLAMA_DEFAULT_CONTEXT) if lengths else None


def _llama_cpp_window(root: str) -> int | None:
    """The context llama.cpp serves (``--ctx-size``): ``/props`` ``default_generation_settings.n_ctx``."""
    try:
        props = _get_json(f"{root}/props")
    except (OSError, ValueError):
        return None
    if not isinstance(props, dict):
        return None
    settings = props.get("default_generation_settings")
    nested = settings.get("n_ctx") if isinstance(settings, dict) else None
    return _positive(nested) or _positive(props.get("n_ctx"))


def server_context_window(base_url: str, model_id: str, provider: str) -> int | None:
    """The context window a local server reports for ``model_id`` (``None``: it does not say)."""
    root = base_url.rstrip("/").removesuffix("/v1")
    try:
        if provider == "ollama":
            return _ollama_window(root, model_id)
        if provider == "llamacpp":
            served = _llama_cpp_window(root)
            if served:
                return served
        listed = _get_json(base_url.rstrip("/") + "/models").get("data") or []
    except (OSError, ValueError, AttributeError):
        return None
    entries = [entry for entry in listed if isinstance(entry, dict)]
    chosen = [entry for entry in entries if entry.get("id") == model_id] or entries[:1]
    return _window_of(chosen[0]) if chosen else None


def keep_full_result(namespace: dict[str, Any] | None, event: ToolExecutionEndEvent, limit: int | None) -> None:
    """A tool result longer than ``limit`` reached the model cut: its whole text goes to ``_pi_results``."""
    if namespace is None or not limit:
        return
    text = "".join(getattr(block, "text", "") for block in event.result.content or ())
    if len(text) <= limit:
        return
    kept = namespace.get(RESULTS_VARIABLE)
    if type(kept) is not dict:  # exact: a subclass (or a __class__ property) put there would run user code
        kept = namespace[RESULTS_VARIABLE] = {}
    kept[event.tool_call_id] = text
    while len(kept) > KEPT_RESULTS:
        del kept[next(iter(kept))]


# ---------------------------------------------------------------- what %pi shows


def context_flag(words: list[str]) -> tuple[list[str], int | None]:
    """``%pi model NAME --context TOKENS``: the words without the flag, and the window it gives."""
    if "--context" not in words:
        return words, None
    at = words.index("--context")
    if at + 1 >= len(words):
        raise UsageError("%pi model NAME --context TOKENS")
    try:
        window = positive_int(words[at + 1])
    except ValueError as error:
        raise UsageError(f"--context: {error}") from None
    return words[:at] + words[at + 2 :], window


def conversation_tokens(session: LongSession) -> int:
    from pi_kernel.agent.compaction import estimate_context_tokens
    from pi_kernel.ai import Context

    state = session.agent.state
    return estimate_context_tokens(Context(state.system_prompt, state.messages, state.tools))


def status_lines(session: LongSession) -> list[str]:
    """The ``context:`` and ``budget:`` lines of ``%pi``."""
    model = session.model
    lines = []
    if model is not None:
        window = model.resolved_context_window
        source = {"set": "set", "known": "known model", "default": "default; set it with %pi model NAME --context N"}
        used = conversation_tokens(session) if session.agent.state.messages else 0
        share = f" ({100 * used / window:.0f}%)" if used else ""
        lines.append(f"context:   {used:,} / {window:,} tokens{share} [{source[model.context_window_source]}]")
    budget = session.agent.budget
    if budget.usd is not None or budget.tokens is not None:
        lines.append(f"budget:    {describe_budget(session)}")
    return lines


def describe_budget(session: LongSession) -> str:
    from pi_kernel.agent.usage import usd

    agent = session.agent
    parts = []
    if agent.budget.usd is not None:
        parts.append(f"${agent.usage.cost:.4f} of {usd(agent.budget.usd)} spent")
    if agent.budget.tokens is not None:
        parts.append(f"{agent.usage.tokens:,} of {agent.budget.tokens:,} tokens spent")
    return "; ".join(parts) if parts else "none (%pi budget USD, %pi budget --tokens N)"


# ---------------------------------------------------------------- the commands


def usage(session: LongSession, words: list[str]) -> str:
    """``%pi usage``: the session's totals per model (compacted turns included), cost and context use."""
    from pi_kernel.ai.messages import Usage as TokenUsage
    from pi_kernel.widgets.render import cache_note, context_meter

    ledger = session.agent.usage
    if not ledger.by_model:
        return "No model requests yet."
    totals_in = sum(totals.input for totals in ledger.by_model.values())
    totals_out = sum(totals.output for totals in ledger.by_model.values())
    requests = sum(totals.requests for totals in ledger.by_model.values())
    priced = any(totals.priced for totals in ledger.by_model.values())
    head = f"tokens: {totals_in} in · {totals_out} out" + (f" · ${ledger.cost:.4f}" if priced else "")
    rows = [f"{head} over {requests} model request(s)"]
    for name, totals in ledger.by_model.items():
        cost = f"${totals.cost:.4f}" if totals.priced else "price unknown (%pi price MODEL IN OUT)"
        price = known_cost(name.split(":", 1)[-1])
        if not totals.priced and price is not None:
            uncached = totals.input - totals.cache_read - totals.cache_write
            written = TokenUsage(uncached, totals.output, totals.cache_read, totals.cache_write)
            cost = f"~${price.of(written):.4f} at today's price"
        cached = cache_note(totals.cache_read, totals.cache_write)
        rows.append(
            f"  {name}: {totals.requests} request(s) · {totals.input:,} in{cached} · {totals.output:,} out · {cost}"
        )
    model = session.model
    if model is not None and session.agent.state.messages:
        rows.append(f"  {context_meter(conversation_tokens(session), model.resolved_context_window)}")
    if session.agent.budget.usd is not None or session.agent.budget.tokens is not None:
        rows.append(f"  budget: {describe_budget(session)}")
    return "\n".join(rows)


def price(session: LongSession, words: list[str]) -> str:
    """``%pi price [MODEL IN OUT [CACHE_READ [CACHE_WRITE]]]``: set or list prices (USD per million tokens)."""
    if words:
        if not 3 <= len(words) <= 5:
            raise UsageError(
                "%pi price MODEL IN OUT [CACHE_READ [CACHE_WRITE]]   (USD per million input and output tokens)"
            )
        try:
            amounts = [dollars(word) for word in words[1:]]
        except ValueError as error:
            raise UsageError(f"%pi price: {error}") from None
        set_price(words[0], *amounts)
        return f"price of {words[0]}: {describe_price(KNOWN_COSTS[words[0]])} per million tokens"
    rows = [f"{name}: {describe_price(cost)}" for name, cost in sorted(KNOWN_COSTS.items())]
    return "USD per million tokens:\n" + "\n".join(rows)


def budget(session: LongSession, words: list[str]) -> str:
    """``%pi budget [USD] [--tokens N]`` (``off`` removes both)."""
    agent = session.agent
    if words == ["off"]:
        agent.budget.usd = agent.budget.tokens = None
    elif words:
        usd, tokens = parse_budget(words)  # everything checked before anything changes
        if tokens is not None:
            agent.budget.tokens = tokens
        if usd is not None:
            agent.budget.usd = usd
    model = agent.state.model
    if agent.budget.usd is not None and model is not None and model.resolved_cost is None:
        return (
            f"budget: {describe_budget(session)}\n"
            f"warning: {model.id} has no price, so its requests count $0 and a dollar budget cannot stop them; "
            f"set one with %pi price {model.id} IN OUT, or use a token budget (%pi budget --tokens N)."
        )
    return f"budget: {describe_budget(session)}"


def parse_budget(words: list[str]) -> tuple[float | None, int | None]:
    """``USD`` and ``--tokens N`` of ``%pi budget`` (each ``None`` when not given); ``UsageError`` for
    anything else, before any change."""
    rest, tokens = list(words), None
    try:
        if "--tokens" in rest:
            at = rest.index("--tokens")
            tokens = positive_int(rest[at + 1] if at + 1 < len(rest) else "")
            del rest[at : at + 2]
        usd = dollars(rest[0]) if rest else None
    except ValueError as error:
        raise UsageError(f"%pi budget USD [--tokens N]: {error}") from None
    if len(rest) > 1:
        raise UsageError(f"%pi budget USD [--tokens N]: unexpected {' '.join(rest[1:])!r}; nothing was changed")
    return usd, tokens


COMPACT_WAITS = (
    "%pi compact waits for the model on the kernel's event loop, which is busy running this cell: run "
    "`%pi compact` as a cell of its own (with %autoawait on)."
)


def compact(session: LongSession, words: list[str]) -> str:
    """``%pi compact`` from the synchronous magic: run to the end on IPython's loop when no loop runs (IPython
    outside a kernel); in a kernel such a line is awaited (``compact_async``), or told to be."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        from IPython.core.async_helpers import get_asyncio_loop

        return str(get_asyncio_loop().run_until_complete(compact_async(session, words)))
    raise UsageError(COMPACT_WAITS)


async def compact_async(session: LongSession, words: list[str]) -> str:
    """``%pi compact``: summarise the older turns now. An interrupt aborts the summary request (nothing
    changes) and ends the cell in ``KeyboardInterrupt``."""
    if words:
        raise UsageError(f"%pi compact takes no words (got {' '.join(words)!r}); nothing was changed")
    if session.turn is not None:
        raise UsageError("a turn is running; interrupt it first")
    if session.model is None:
        raise UsageError("no model to write the summary (see %pi model)")
    agent = session.agent
    before = Version(list(agent.state.messages), dict(session.cell_turns.starts), "%pi compact")
    # Here, not at the top: this module loads with the kernel, which should not import the agent at start.
    from pi_kernel.agent.usage import BudgetExceeded

    interrupted: list[bool] = []

    def on_interrupt() -> None:
        interrupted.append(True)
        agent.abort()

    try:
        with interrupt_hook(on_interrupt, asyncio.get_running_loop()):
            result = await agent.compact()
    except BudgetExceeded as error:
        raise UsageError(str(error)) from None
    if interrupted:  # whatever came back: the conversation stays as it was
        agent.state.messages = before.messages
        session.cell_turns.starts = dict(before.cells)
        raise KeyboardInterrupt
    if result is None:
        return "Nothing to compact yet."
    if result.error:  # a plain list would stand in: on demand, nothing is worth losing the answers for
        agent.state.messages = before.messages
        session.cell_turns.starts = dict(before.cells)
        return f"Not compacted: the model's summary failed ({result.error}); the conversation is unchanged."
    session.versions.keep(before.messages, before.cells, before.reason)
    turns = f"{result.compacted_turns} turn" + ("" if result.compacted_turns == 1 else "s")
    return f"compacted {turns} into a summary; %pi undo brings the turns back."
