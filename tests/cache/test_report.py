"""
Tests for report(): what the next request reads from the cache the previous one left,
and what it costs, at once or after a pause.
"""

from __future__ import annotations

import pytest

from tests.cache.contexts import PerMessage, _big, _context
from workingctx import Message, Usage, WorkingContext
from workingctx.cache import RULES, plan, report
from workingctx.exceptions import CacheRuleError, PricingError
from workingctx.pricing import cost


class TestReport:
    def test_a_planned_prefix_is_read_at_the_cached_rate(self):
        """
        With a 20,000-token prefix planned, the next request reads it and pays the cached rate.
        """
        ctx = _context(20_000, [Message.user("q1")])
        before = ctx.freeze()
        ctx.append(Message.assistant("a1"), Message.user("q2"))
        result = report(before, ctx, provider="anthropic", model="claude-sonnet-4-6")
        prefix = RULES["anthropic"]  # the prefix message alone is 20,004 tokens with its overhead
        assert prefix.provider == "anthropic"
        assert result.usage.cache_read_tokens >= 20_000
        assert result.usage.cache_read_tokens == result.shared_tokens
        assert result.cost == cost("claude-sonnet-4-6", result.usage)
        assert result.uncached_cost == cost("claude-sonnet-4-6", Usage(input_tokens=result.input_tokens))
        assert result.saved > 0
        assert result.cached_share > 0.99

    def test_openai_steps_of_128(self):
        """
        OpenAI reads the shared prefix rounded down to 1,024 + a multiple of 128; nothing below 1,024.
        """
        counter = PerMessage(0)
        shared = Message.user("y" * 1_300)
        before = WorkingContext(messages=[shared], counter=counter)
        after = WorkingContext(messages=[shared, Message.user("z" * 500)], counter=counter)
        result = report(before, after, provider="openai", model="gpt-5")
        assert 1_280 == result.usage.cache_read_tokens
        small = WorkingContext(messages=[Message.user("y" * 1_000)], counter=counter)
        grown = WorkingContext(messages=[Message.user("y" * 1_000), Message.user("z")], counter=counter)
        assert 0 == report(small, grown, provider="openai", model="gpt-5").usage.cache_read_tokens

    def test_plan_for_another_model_refused(self):
        """
        A plan made for one model cannot be reported for another.
        """
        ctx = _context(5_000, [Message.user("q")])
        made = plan(ctx, provider="anthropic", model="claude-sonnet-4-6")
        with pytest.raises(CacheRuleError, match="plan again"):
            report(made, ctx, provider="anthropic", model="claude-opus-4-8")

    def test_unpriced_model(self):
        """
        A model without a price raises PricingError from the report.
        """
        ctx = _context(5_000, [Message.user("q")])
        with pytest.raises(PricingError, match="claude-unpriced"):
            report(ctx.freeze(), ctx, provider="anthropic", model="claude-unpriced")


class TestExpiry:
    def test_report_after_a_pause(self):
        """
        report(elapsed=...) says what the next request reads after that many idle seconds.
        """
        ctx = _context(5_000, [Message.user(_big(1_500))])
        before = plan(ctx, provider="anthropic", model="claude-sonnet-4-6")
        ctx.append(Message.assistant("a1"), Message.user("q2"))
        now = report(before, ctx, provider="anthropic", model="claude-sonnet-4-6")
        assert now == report(before, ctx, provider="anthropic", model="claude-sonnet-4-6", elapsed=300)
        later = report(before, ctx, provider="anthropic", model="claude-sonnet-4-6", elapsed=600)
        assert 5_004 == later.usage.cache_read_tokens
        assert later.expired_tokens == now.usage.cache_read_tokens - 5_004
        assert later.cost > now.cost
        assert 0 == now.expired_tokens

    def test_bad_elapsed(self):
        """
        A negative elapsed time is refused.
        """
        ctx = _context(5_000, [Message.user("q")])
        with pytest.raises(CacheRuleError, match="elapsed must be a finite, non-negative"):
            report(ctx.freeze(), ctx, provider="anthropic", model="claude-sonnet-4-6", elapsed=-1)
