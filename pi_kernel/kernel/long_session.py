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
import threading
import urllib.request
from collections.abc import Coroutine
from typing import TYPE_CHECKING, Any, Protocol

from IPython.core.error import UsageError

from pi_kernel.ai.models import KNOWN_COSTS, ModelCost, detect_provider, known_cost
from pi_kernel.kernel.cell_turns import CellTurns
from pi_kernel.kernel.config import dollars, positive_int
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

    def private_loop(self) -> asyncio.AbstractEventLoop: ...


# ---------------------------------------------------------------- settings → agent and model


def configure_long_session(agent: Agent, settings: PiSettings) -> None:
    """The session's tool-result limit, budget and extra prices, on its agent."""
    from pi_kernel.agent.usage import Budget

    if settings.tool_result_limit is not None:
        agent.max_tool_result_chars = settings.tool_result_limit
    agent.budget = Budget(settings.budget, settings.token_budget)
    for model_id, (price_in, price_out) in settings.prices.items():
        set_price(model_id, price_in, price_out)


def set_price(model_id: str, price_in: float, price_out: float) -> None:
    """USD per million input / output tokens for ``model_id``, from the next request on."""
    KNOWN_COSTS[model_id] = ModelCost(price_in, price_out)


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
    if not isinstance(kept, dict):
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
    from pi_kernel.widgets.footer import context_meter

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
            estimate = ((totals.input - totals.cache_read) * price.input + totals.output * price.output) / 1e6
            cost = f"~${estimate:.4f} at today's price"
        cached = f" ({totals.cache_read:,} cached)" if totals.cache_read else ""
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
    """``%pi price [MODEL IN OUT]``: set or list prices (USD per million input and output tokens)."""
    if words:
        if len(words) != 3:
            raise UsageError("%pi price MODEL IN OUT   (USD per million input and output tokens)")
        try:
            price_in, price_out = dollars(words[1]), dollars(words[2])
        except ValueError as error:
            raise UsageError(f"%pi price: {error}") from None
        set_price(words[0], price_in, price_out)
        return f"price of {words[0]}: ${price_in:g} in, ${price_out:g} out per million tokens"
    rows = [f"{name}: ${cost.input:g} in, ${cost.output:g} out" for name, cost in sorted(KNOWN_COSTS.items())]
    return "USD per million tokens:\n" + "\n".join(rows)


def budget(session: LongSession, words: list[str]) -> str:
    """``%pi budget [USD] [--tokens N]`` (``off`` removes both)."""
    agent = session.agent
    if words == ["off"]:
        agent.budget.usd = agent.budget.tokens = None
    elif words:
        try:
            if "--tokens" in words:
                at = words.index("--tokens")
                agent.budget.tokens = positive_int(words[at + 1]) if at + 1 < len(words) else positive_int("")
                words = words[:at] + words[at + 2 :]
            if words:
                agent.budget.usd = dollars(words[0])
        except ValueError as error:
            raise UsageError(f"%pi budget USD [--tokens N]: {error}") from None
    model = agent.state.model
    if agent.budget.usd is not None and model is not None and model.resolved_cost is None:
        return (
            f"budget: {describe_budget(session)}\n"
            f"warning: {model.id} has no price, so its requests count $0 and a dollar budget cannot stop them; "
            f"set one with %pi price {model.id} IN OUT, or use a token budget (%pi budget --tokens N)."
        )
    return f"budget: {describe_budget(session)}"


def compact(session: LongSession, words: list[str]) -> str:
    """``%pi compact``: summarise the older turns now."""
    if session.turn is not None:
        raise UsageError("a turn is running; interrupt it first")
    if session.model is None:
        raise UsageError("no model to write the summary (see %pi model)")
    agent = session.agent
    before = Version(list(agent.state.messages), dict(session.cell_turns.starts), "%pi compact")
    # Here, not at the top: this module loads with the kernel, which should not import the agent at start.
    from pi_kernel.agent.usage import BudgetExceeded

    try:
        result = run_to_end(session, agent.compact())
    except BudgetExceeded as error:
        raise UsageError(str(error)) from None
    if result is None:
        return "Nothing to compact yet."
    if result.error:  # a plain list would stand in: on demand, nothing is worth losing the answers for
        agent.state.messages = before.messages
        session.cell_turns.starts = dict(before.cells)
        return f"Not compacted: the model's summary failed ({result.error}); the conversation is unchanged."
    session.versions.keep(before.messages, before.cells, before.reason)
    turns = f"{result.compacted_turns} turn" + ("" if result.compacted_turns == 1 else "s")
    return f"compacted {turns} into a summary; %pi undo brings the turns back."


def run_to_end(session: LongSession, work: Coroutine[Any, Any, Any]) -> Any:
    """Run a coroutine from a line magic: on the session's private loop, in a worker thread when this
    thread already runs a loop (ipykernel). An interrupt aborts the agent's work (``%pi compact``: the
    summary request stops, nothing changes), waits for it to end, and is raised."""
    loop = session.private_loop()
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        task = loop.create_task(work)
        try:
            return loop.run_until_complete(task)
        except KeyboardInterrupt:
            session.agent.abort()
            loop.run_until_complete(asyncio.wait([task]))
            raise
    outcome: dict[str, Any] = {}

    def target() -> None:
        try:
            outcome["value"] = loop.run_until_complete(work)
        except BaseException as error:  # noqa: BLE001 - re-raised in the cell's thread below
            outcome["error"] = error

    worker = threading.Thread(target=target, name="pi-compact", daemon=True)
    worker.start()
    try:
        worker.join()
    except KeyboardInterrupt:
        session.agent.abort()  # safe from any thread
        worker.join()
        raise
    if "error" in outcome:
        raise outcome["error"]
    return outcome.get("value")
