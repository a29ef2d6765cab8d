"""
Tests for workingctx.pricing.
"""

from __future__ import annotations

import builtins
from decimal import Decimal
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.strategies import usages
from workingctx import Message, Usage, WorkingContext
from workingctx.cache import RULES
from workingctx.exceptions import PricingError, WorkingCtxError
from workingctx.pricing import BUILTIN_PRICES, Price, add_price, close_names, cost, find_price, prices, remove_price


class TestClaudeSonnetCosts:
    def test_prefix_resent_fresh_and_cached(self):
        """
        A 20,000-token prefix on 30 turns costs 1.89 fresh and 0.27 read from cache.
        """
        fresh = Usage(input_tokens=20_000, output_tokens=200)
        cached = Usage(output_tokens=200, cache_read_tokens=20_000)
        assert Decimal("1.89") == round(cost("claude-sonnet-4-6", fresh) * 30, 4)
        assert Decimal("0.27") == round(cost("claude-sonnet-4-6", cached) * 30, 4)

    def test_sonnet_rates(self):
        """
        claude-sonnet-4-6 is 3.00 / 15.00 / 0.30 / 3.75 / 6.00 per million tokens.
        """
        million = 1_000_000
        assert Decimal(3) == cost("claude-sonnet-4-6", Usage(input_tokens=million))
        assert Decimal(15) == cost("claude-sonnet-4-6", Usage(output_tokens=million))
        assert Decimal("0.3") == cost("claude-sonnet-4-6", Usage(cache_read_tokens=million))
        assert Decimal("3.75") == cost("claude-sonnet-4-6", Usage(cache_write_tokens=million))
        one_hour = Usage(cache_write_tokens=million, cache_write_1h_tokens=million)
        assert Decimal(6) == cost("claude-sonnet-4-6", one_hour)

    def test_write_split_priced_apart(self):
        """
        Five-minute and one-hour writes are priced each at its own rate.
        """
        usage = Usage.from_cache_writes(cache_write_5m_tokens=400_000, cache_write_1h_tokens=600_000)
        assert Decimal("3.75") * 4 / 10 + Decimal(6) * 6 / 10 == cost("claude-sonnet-4-6", usage)


class TestTable:
    def test_names_normalised(self):
        """
        Provider prefixes and date suffixes find the same price.
        """
        base = find_price("claude-sonnet-4-6")
        for name in ("anthropic/claude-sonnet-4-6", "claude-sonnet-4-6-20260217", "claude-sonnet-4-6@20260217"):
            assert base == find_price(name)
        assert find_price("gpt-5-2025-08-07") == find_price("gpt-5")
        assert find_price("no-such-model") is None

    def test_added_price_wins_and_goes(self):
        """
        add_price overrides the table for this process; remove_price restores it.
        """
        add_price("claude-sonnet-4-6", Price(1, 1))
        try:
            assert Decimal(1) == cost("claude-sonnet-4-6", Usage(input_tokens=1_000_000))
            assert Price(1, 1) == prices()["claude-sonnet-4-6"]
        finally:
            remove_price("claude-sonnet-4-6")
        assert Decimal(3) == cost("claude-sonnet-4-6", Usage(input_tokens=1_000_000))

    def test_builtin_table_read_only(self):
        """
        The built-in table cannot be edited in place.
        """
        with pytest.raises(TypeError):
            BUILTIN_PRICES["x"] = Price(1, 1)  # type: ignore[index]

    def test_defaults_fill_cache_rates(self):
        """
        Cache reads and writes default to the input price, one-hour writes to five-minute ones.
        """
        price = Price("2", "8", cache_write_5m="2.5")
        assert (Decimal(2), Decimal("2.5"), Decimal("2.5")) == (
            price.cache_read,
            price.cache_write_5m,
            price.cache_write_1h,
        )

    def test_long_context_rates(self):
        """
        Above the long-context threshold every token is billed at the long-context rates.
        """
        price = Price(1, 2, long_context_above=100, long_context=Price(10, 20))
        assert Decimal(100 * 1 + 10 * 2) / 1_000_000 == price.cost(Usage(input_tokens=100, output_tokens=10))
        assert Decimal(101 * 10 + 10 * 20) / 1_000_000 == price.cost(Usage(input_tokens=101, output_tokens=10))

    @given(usages, usages)
    def test_cost_adds_up(self, one, two):
        """
        The cost of a sum of usages is the sum of their costs (below any long-context threshold).
        """
        for model in ("claude-sonnet-4-6", "gpt-5", "gemini-2.5-flash"):
            assert cost(model, one) + cost(model, two) == cost(model, one + two)


class TestErrors:
    def test_unknown_model_names_it_and_the_fix(self, monkeypatch):
        """
        Without genai-prices an unknown model raises PricingError naming it and add_price.
        """
        real_import = builtins.__import__

        def no_genai(name: str, *args: Any, **kwargs: Any) -> Any:
            if name == "genai_prices":
                raise ImportError(name)
            return real_import(name, *args, **kwargs)

        monkeypatch.setattr(builtins, "__import__", no_genai)
        with pytest.raises(
            PricingError, match=r"'my-model'.*add_price\('my-model'.*pip install \"\.\[prices\]\""
        ) as info:
            cost("my-model", Usage(input_tokens=1))
        assert isinstance(info.value, ValueError)
        assert isinstance(info.value, WorkingCtxError)
        with pytest.raises(PricingError, match=r"close names: gpt-4\.1-mini, gpt-4o-mini"):
            cost("gpt4.1-mini", Usage(input_tokens=1))

    @pytest.mark.parametrize(
        "model",
        [
            "gpt-4.1",
            "gpt-4.1-mini",
            "gpt-4o",
            "gpt-4o-mini",
            "o4-mini",
            "claude-sonnet-4-6",
            "claude-opus-4-1",
            "claude-haiku-4-5",
            "gemini-2.5-pro",
            "gemini-2.5-flash",
        ],
    )
    def test_the_models_people_use_need_no_extra(self, monkeypatch, model):
        """
        The models people use are in the built-in table, so they are priced
        without genai-prices (the command line's ``cli`` extra alone).
        """
        real_import = builtins.__import__

        def no_genai(name: str, *args: Any, **kwargs: Any) -> Any:
            if name.startswith("genai_prices"):
                raise ImportError(name)
            return real_import(name, *args, **kwargs)

        monkeypatch.setattr(builtins, "__import__", no_genai)
        assert model in BUILTIN_PRICES
        usage = Usage(input_tokens=1_000, output_tokens=100, cache_read_tokens=2_000)
        assert cost(model, usage) == BUILTIN_PRICES[model].cost(usage) > 0

    def test_model_unknown_everywhere(self):
        """
        A model genai-prices does not know either raises PricingError with the fix.
        """
        with pytest.raises(PricingError, match=r"'surely-no-such-model-xyz'.*add_price"):
            cost("surely-no-such-model-xyz", Usage(input_tokens=1))

    def test_close_names_of_a_misspelt_model(self):
        """
        A misspelt model's error lists the priced names closest to it, best
        first, found in the table and in genai-prices (provider prefix and
        date suffix left out).
        """
        with pytest.raises(PricingError, match=r"close names: claude-sonnet-4-6\b"):
            cost("anthropic/claude-sonet-4-6-20260101", Usage(input_tokens=1))
        assert "gemini-2.5-flash" == close_names("gemini-2.5-flsh")[0]
        assert [] == close_names("zzzz")

    @pytest.mark.parametrize(
        ("args", "kwargs", "error", "match"),
        [
            (("1", -1), {}, PricingError, "non-negative"),
            (("nan", 1), {}, PricingError, "finite"),
            ((1, True), {}, TypeError, "must be a number"),
            ((1, "abc"), {}, PricingError, "must be a number"),
            ((1, 1), {"long_context_above": 5}, PricingError, "both"),
            ((1, 1), {"long_context_above": 0, "long_context": Price(1, 1)}, PricingError, "positive int"),
        ],
    )
    def test_bad_prices(self, args, kwargs, error, match):
        """
        Bad prices are refused with the offending value named.
        """
        with pytest.raises(error, match=match):
            Price(*args, **kwargs)

    def test_bad_arguments(self):
        """
        A model that is not a name, or usage that is not a Usage, raises TypeError.
        """
        with pytest.raises(TypeError, match="model name"):
            cost(3, Usage())  # type: ignore[arg-type]
        with pytest.raises(PricingError, match="empty"):
            cost(" ", Usage())
        with pytest.raises(TypeError, match="needs a Usage"):
            cost("gpt-5", {"input_tokens": 1})  # type: ignore[arg-type]
        with pytest.raises(TypeError, match="needs a Price"):
            add_price("x", (1, 2))  # type: ignore[arg-type]


class TestGenaiPrices:
    def test_unknown_model_priced_with_total_input(self):
        """
        A model outside the table is priced by genai-prices, which is given total input tokens.
        """
        usage = Usage(input_tokens=1_000, cache_read_tokens=1_000, output_tokens=1_000)
        # o1: $15 input, $7.50 cached input, $60 output per million.
        assert "o1" not in BUILTIN_PRICES
        assert Decimal("0.0825") == cost("o1", usage)

    @pytest.mark.parametrize("model", sorted(BUILTIN_PRICES))
    @given(
        usage=st.builds(
            Usage.from_cache_writes,
            input_tokens=st.integers(0, 300_000),
            output_tokens=st.integers(0, 10_000),
            cache_read_tokens=st.integers(0, 100_000),
            cache_write_5m_tokens=st.integers(0, 50_000),
            cache_write_1h_tokens=st.integers(0, 50_000),
        )
    )
    def test_builtin_table_agrees_with_genai_prices(self, model, usage):
        """
        Every built-in price gives what genai-prices gives (one-hour writes on Anthropic models only).
        """
        import genai_prices  # noqa: PLC0415

        if not model.startswith("claude"):
            usage = Usage(
                input_tokens=usage.input_tokens,
                output_tokens=usage.output_tokens,
                cache_read_tokens=usage.cache_read_tokens,
                cache_write_tokens=usage.cache_write_5m_tokens,
            )
        theirs = genai_prices.calc_price(
            genai_prices.Usage(
                input_tokens=usage.input_tokens + usage.cache_read_tokens + usage.cache_write_tokens,
                output_tokens=usage.output_tokens,
                cache_read_tokens=usage.cache_read_tokens,
                cache_write_tokens=usage.cache_write_tokens,
                cache_write_1h_tokens=usage.cache_write_1h_tokens,
            ),
            model,
        )
        assert theirs.total_price == BUILTIN_PRICES[model].cost(usage)


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


OLDER_READ_MULTIPLIERS = {
    "gpt-4.1": Decimal("0.25"),
    "gpt-4.1-mini": Decimal("0.25"),
    "gpt-4.1-nano": Decimal("0.25"),
    "o3": Decimal("0.25"),
    "o4-mini": Decimal("0.25"),
    "gpt-4o": Decimal("0.5"),
    "gpt-4o-mini": Decimal("0.5"),
    "gemini-2.0-flash": Decimal("0.25"),
}
"""Models of older families, whose cache reads their providers discount less than the current rules state."""


class TestRulesAgreeWithPrices:
    @pytest.mark.parametrize("model", sorted(BUILTIN_PRICES))
    def test_multipliers_match_the_table(self, model):
        """
        Each built-in price bills cache reads and writes at the multiples of the input
        price its provider's caching rules state (long-context rates included), so the
        two tables cannot drift apart unnoticed.
        """
        provider = (
            "anthropic" if model.startswith("claude") else "openai" if model.startswith(("gpt", "o")) else "gemini"
        )
        rules = RULES[provider]
        price = BUILTIN_PRICES[model]
        read = OLDER_READ_MULTIPLIERS.get(model, rules.read_multiplier)
        for rates in (price, price.long_context):
            if rates is None:
                continue
            assert rates.cache_read == rates.input * read
            assert rates.cache_write_5m == rates.input * rules.write_multipliers["5m"]
            one_hour = rules.write_multipliers.get("1h", rules.write_multipliers["5m"])
            assert rates.cache_write_1h == rates.input * one_hour
