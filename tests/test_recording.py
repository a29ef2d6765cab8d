"""
Tests for workingctx._recording: a context's usage adds that of every reply, and its
cost prices each reply for its own model.
"""

from __future__ import annotations

from decimal import Decimal

import pytest

from workingctx import Message, Usage, WorkingContext
from workingctx.exceptions import PricingError


class TestContextCost:
    def test_usage_adds_every_reply(self):
        """
        ctx.usage adds the usage of every message that carries one.
        """
        ctx = WorkingContext().append(
            Message.user("q"),
            Message.assistant("a", usage=Usage(input_tokens=10, output_tokens=2)),
            Message.assistant("b", usage=Usage(cache_read_tokens=5, output_tokens=3)),
        )
        assert Usage(input_tokens=10, output_tokens=5, cache_read_tokens=5) == ctx.usage
        assert Usage() == WorkingContext().usage

    def test_each_reply_priced_for_its_model(self):
        """
        A reply naming its model in metadata is priced for it; the others for the model given.
        """
        million = Usage(input_tokens=1_000_000)
        ctx = WorkingContext().append(
            Message("assistant", "a", usage=million, metadata={"model": "gpt-5"}),
            Message.assistant("b", usage=million),
        )
        assert Decimal("1.25") + Decimal(3) == ctx.cost("claude-sonnet-4-6")

    def test_reply_without_model(self):
        """
        A reply with usage but no model, and no model given, raises PricingError naming the reply.
        """
        ctx = WorkingContext().append(Message.user("q"), Message.assistant("a", usage=Usage(input_tokens=1)))
        with pytest.raises(PricingError, match=r"message 1 .*cost\(model="):
            ctx.cost()
