"""The budget's estimate of the next request counts prompt caching: the part the previous request of the model
sent at the cache-read price, the rest at the cache-write price (input price where writes are not billed)."""

from __future__ import annotations

import pytest

from pi_kernel.agent.agent import Budget, UsageLedger, budget_stop, request_estimate
from pi_kernel.ai import Context, Model, ModelCost, Usage, UserMessage

CLAUDE = ModelCost(3.0, 15.0, 0.3, 3.75)


def test_cached_part_at_the_read_price_and_the_rest_at_the_write_price() -> None:
    assert request_estimate(10_000, 9_000, CLAUDE) == pytest.approx((9_000 * 0.3 + 1_000 * 3.75) / 1e6)
    assert request_estimate(10_000, 0, CLAUDE) == pytest.approx(10_000 * 3.75 / 1e6)  # a first request writes
    gpt = ModelCost(0.15, 0.6, 0.075)  # OpenAI: reads cheaper, writes not billed apart
    assert request_estimate(10_000, 9_000, gpt) == pytest.approx((9_000 * 0.075 + 1_000 * 0.15) / 1e6)
    assert request_estimate(10_000, 9_000, ModelCost(1.0, 2.0)) == pytest.approx(10_000 * 1.0 / 1e6)
    assert request_estimate(10_000, 9_000, None) == 0.0


def test_a_long_cached_session_is_not_stopped_by_an_uncached_estimate() -> None:
    model = Model("claude-sonnet-4-5", provider="anthropic")
    ledger = UsageLedger()
    prompt_text = "x" * 400_000  # about 100,000 tokens
    ledger.add("anthropic:claude-sonnet-4-5", Usage(input=10, output=100, cache_read=99_000, cache_write=900))
    spent = ledger.cost
    budget = Budget(usd=spent + 0.1)  # 100k tokens at $3/M would be $0.30; from the cache about $0.03
    assert ledger.by_model["anthropic:claude-sonnet-4-5"].cache_write == 900
    assert budget_stop(ledger, budget, model, Context(None, [UserMessage(prompt_text)])) is None
    assert budget_stop(ledger, Budget(usd=spent + 0.01), model, Context(None, [UserMessage(prompt_text)]))
