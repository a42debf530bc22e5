"""What a session spent, per model, and the budget that stops it.

``UsageLedger`` adds up every assistant message's ``Usage`` (and the summary
requests of compaction) as the agent sees them, so the totals survive
compaction, which removes the old messages from the conversation. ``Budget``
(US dollars and/or tokens) is checked before each model request
(``budget_stop``): a request whose estimated cost (cache reads and writes at
their own prices) would take the session past it is not sent, and the run ends with a message saying so; nothing already
done is lost.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from pi_kernel.agent.compaction import estimate_context_tokens
from pi_kernel.ai import Context, Model, ModelCost, Usage


@dataclass
class ModelTotals:
    requests: int = 0
    input: int = 0
    """Prompt tokens, cached ones included."""
    output: int = 0
    cache_read: int = 0
    cache_write: int = 0
    """Prompt tokens written to the provider's cache (Anthropic bills them apart)."""
    cost: float = 0.0
    priced: bool = False
    """At least one request had a known price."""
    last_prompt_tokens: int = 0
    """The prompt size of the latest request (for the context meter)."""


@dataclass
class UsageLedger:
    by_model: dict[str, ModelTotals] = field(default_factory=dict)
    """``provider:model`` → totals."""

    def add(self, model: str, usage: Usage) -> None:
        totals = self.by_model.setdefault(model, ModelTotals())
        totals.requests += 1
        totals.input += usage.prompt_tokens
        totals.output += usage.output
        totals.cache_read += usage.cache_read
        totals.cache_write += usage.cache_write
        if usage.cost is not None:
            totals.cost += usage.cost
            totals.priced = True
        if usage.prompt_tokens:
            totals.last_prompt_tokens = usage.prompt_tokens

    @property
    def cost(self) -> float:
        return sum(totals.cost for totals in self.by_model.values())

    @property
    def tokens(self) -> int:
        return sum(totals.input + totals.output for totals in self.by_model.values())

    def clear(self) -> None:
        self.by_model.clear()


class BudgetExceeded(RuntimeError):
    """A request (``Agent.compact``'s summary) was not sent: it would cross the budget; ``str()`` says why."""


@dataclass
class Budget:
    usd: float | None = None
    """US dollars the session may spend; ``None``: no limit."""
    tokens: int | None = None
    """Tokens (in + out) the session may spend; ``None``: no limit."""


def usd(amount: float) -> str:
    """``$5.00``, or four decimals under ten cents (``$0.0010``), so a small budget never reads ``$0.00``."""
    return f"${amount:.2f}" if amount >= 0.1 or amount == 0 else f"${amount:.4f}"


def budget_stop(ledger: UsageLedger, budget: Budget, model: Model, context: Context) -> str | None:
    """Why the next request must not be sent (its estimated prompt would cross the budget), or ``None``."""
    prompt = estimate_context_tokens(context)
    if budget.tokens is not None and ledger.tokens + prompt > budget.tokens:
        return (
            f"Token budget reached: {ledger.tokens:,} of {budget.tokens:,} tokens spent, and the next request "
            f"needs about {prompt:,} more. Nothing was sent. Raise it with %pi budget --tokens N "
            "(or PI_TOKEN_BUDGET)."
        )
    if budget.usd is not None:
        price: ModelCost | None = model.resolved_cost
        totals = ledger.by_model.get(f"{model.provider}:{model.id}")
        estimate = request_estimate(prompt, totals.last_prompt_tokens if totals else 0, price)
        if ledger.cost + estimate > budget.usd or ledger.cost >= budget.usd:
            return (
                f"Budget reached: ${ledger.cost:.4f} of {usd(budget.usd)} spent, and the next request would "
                f"cost about ${estimate:.4f} more. Nothing was sent. Raise it with %pi budget USD (or PI_BUDGET)."
            )
    return None


def request_estimate(prompt: int, last_prompt: int, price: ModelCost | None) -> float:
    """US dollars a ``prompt``-token request will cost at least: where the model has a cache price, the
    part the previous request sent (``last_prompt``) is read from the cache and the rest is written to it
    (or sent at the input price when writes are not billed apart); elsewhere all of it at the input price."""
    if price is None:
        return 0.0
    if not price.cache_read:
        return prompt * price.input / 1_000_000
    cached = min(last_prompt, prompt)
    return (cached * price.cache_read + (prompt - cached) * (price.cache_write or price.input)) / 1_000_000
