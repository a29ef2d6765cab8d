"""
Tests for workingctx.pricing.
"""

from __future__ import annotations

import functools
import re
import warnings
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, date, datetime, time, timedelta
from decimal import Decimal
from typing import Any

import genai_prices
import pytest
from genai_prices import data as gdata
from genai_prices import data_snapshot as gsnapshot
from genai_prices import types as gtypes
from hypothesis import given
from hypothesis import strategies as st

from tests.strategies import usages
from workingctx import Usage, pricing
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
        add_price overrides the table for this process, also for a model priced
        before (and one only genai-prices knew); remove_price restores it.
        """
        million = Usage(input_tokens=1_000_000)
        before = cost("claude-sonnet-4-5", million)  # priced by genai-prices
        assert Decimal(3) == cost("claude-sonnet-4-6", million)
        add_price("claude-sonnet-4-6", Price(1, 1))
        add_price("claude-sonnet-4-5", Price(2, 1))
        try:
            assert Decimal(1) == cost("claude-sonnet-4-6", million)
            assert Decimal(2) == cost("claude-sonnet-4-5", million)
            assert Price(1, 1) == prices()["claude-sonnet-4-6"]
        finally:
            remove_price("claude-sonnet-4-6")
            remove_price("claude-sonnet-4-5")
        assert Decimal(3) == cost("claude-sonnet-4-6", million)
        assert before == cost("claude-sonnet-4-5", million)

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

    @given(
        price=st.sampled_from(sorted(BUILTIN_PRICES.items())),
        counts=st.lists(st.integers(0, 2_000_000), min_size=6, max_size=6),
    )
    def test_a_simulated_requests_costs_are_cost_of_each_usage(self, price, counts):
        """
        The five costs the simulation gives each request from its counts are,
        digit for digit, the costs of the usages they stand for, on both
        sides of a long-context threshold.
        """
        _name, rates = price
        fresh, output, read, write_5m, write_1h, known = counts
        total = fresh + read + write_5m + write_1h
        known = min(known, total)
        made = rates._request_costs(fresh, output, read, write_5m, write_1h, known)  # noqa: SLF001  # what the simulation calls
        written = {"cache_write_tokens": write_5m + write_1h, "cache_write_1h_tokens": write_1h}
        expected = (
            rates.cost(Usage(input_tokens=fresh, output_tokens=output, cache_read_tokens=read, **written)),
            rates.cost(Usage(input_tokens=fresh, cache_read_tokens=read, **written)),
            rates.cost(Usage(input_tokens=total, output_tokens=output)),
            rates.cost(Usage(input_tokens=total)),
            rates.cost(Usage(input_tokens=total - known, cache_read_tokens=known)),
        )
        assert [c.as_tuple() for c in made] == [c.as_tuple() for c in expected]


class TestErrors:
    @pytest.mark.usefixtures("without_genai_prices")
    def test_unknown_model_names_it_and_the_fix(self):
        """
        Without genai-prices an unknown model raises PricingError naming it and add_price.
        """
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
            "claude-sonnet-4-5",
            "claude-opus-4-5",
            "claude-opus-4-1",
            "claude-haiku-4-5",
            "gemini-2.5-pro",
            "gemini-2.5-flash",
        ],
    )
    @pytest.mark.usefixtures("without_genai_prices")
    def test_the_models_people_use_need_no_extra(self, model):
        """
        The models people use are in the built-in table, so they are priced
        without genai-prices (the command line's ``cli`` extra alone).
        """
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


# -- genai-prices, computed by workingctx ------------------------------------------

HUGE = (10**18, 10**27 + 1, 10**30 + 7, 10**4299)
"""Counts past Decimal's 28 digits, where the order of the operations shows in the last digit."""


def genai_models() -> list[tuple[str, gtypes.ModelInfo]]:
    """
    Every model of every provider in genai-prices' bundled data, with its provider's id.
    """
    return [(provider.id, model) for provider in gdata.providers for model in provider.models]


def model_prices(model: gtypes.ModelInfo) -> list[gtypes.ModelPrice]:
    """
    Every price *model* may bill at: its one price, or each of its conditional prices.
    """
    return [model.prices] if isinstance(model.prices, gtypes.ModelPrice) else [c.prices for c in model.prices]


def tier_starts(model: gtypes.ModelInfo) -> list[int]:
    starts = {
        tier.start
        for price in model_prices(model)
        for value in vars(price).values()
        if isinstance(value, gtypes.TieredPrices)
        for tier in value.tiers
    }
    return sorted(starts)


def their_usage(usage: Usage) -> genai_prices.Usage:
    """
    *usage* as genai-prices counts it: input_tokens is every input token, cache reads and writes included.
    """
    return genai_prices.Usage(
        input_tokens=usage.input_tokens + usage.cache_read_tokens + usage.cache_write_tokens,
        output_tokens=usage.output_tokens,
        cache_read_tokens=usage.cache_read_tokens,
        cache_write_tokens=usage.cache_write_tokens,
        cache_write_1h_tokens=usage.cache_write_1h_tokens,
    )


def reference(model: str, usage: Usage, moment: datetime | None = None) -> Decimal:
    """
    The amount genai-prices' own calculation gives, as workingctx priced every call before.
    """
    return Decimal(genai_prices.calc_price(their_usage(usage), model, genai_request_timestamp=moment).total_price)


# The parts of workingctx.pricing the laws below are about.
genai_cost = pricing._genai_cost  # noqa: SLF001  # cost() for a name in the table gives the table's price
rates_of = pricing._rates_of  # noqa: SLF001
genai_rates = pricing._genai_rates  # noqa: SLF001
Tiered = pricing._Tiered  # noqa: SLF001
models_found = pricing._genai_models  # noqa: SLF001


def ours(model: str, usage: Usage) -> Decimal:
    """
    workingctx's genai-prices amount: cost() itself for names outside workingctx's table.
    """
    return cost(model, usage) if find_price(model) is None else genai_cost(model, usage)


def assert_same(mine: Decimal, theirs: Decimal) -> None:
    """
    The same Decimal, digit for digit (exponent included), not only an equal one.
    """
    assert (mine, mine.as_tuple()) == (theirs, theirs.as_tuple())


@functools.cache
def known(model: str) -> bool:
    """
    Whether genai-prices finds *model* by its name (some ids of its data are reached only through a provider).
    """
    try:
        reference(model, Usage())
    except LookupError:
        return False
    return True


def assert_agrees(model: str, usage: Usage, moment: datetime | None = None) -> None:
    """
    workingctx prices *model* as genai-prices does, or both know no such model.
    """
    try:
        theirs = reference(model, usage, moment)
    except LookupError as error:
        with pytest.raises(PricingError, match=re.escape(f"({error})")):
            ours(model, usage)
    else:
        assert_same(ours(model, usage), theirs)


def split(total_input: int, draw: st.DrawFn | None = None) -> Usage:
    """
    A usage with *total_input* input tokens, split into fresh, read and written (some of it for an hour).
    """
    if draw is None:
        read, write = total_input // 3, total_input // 4
        return Usage(
            input_tokens=total_input - read - write,
            cache_read_tokens=read,
            cache_write_tokens=write,
            cache_write_1h_tokens=write // 2,
            output_tokens=total_input // 5,
        )
    read = draw(st.integers(0, total_input))
    write = draw(st.integers(0, total_input - read))
    return Usage(
        input_tokens=total_input - read - write,
        cache_read_tokens=read,
        cache_write_tokens=write,
        cache_write_1h_tokens=draw(st.integers(0, write)),
        output_tokens=draw(st.sampled_from([0, 1, 999, *HUGE]) | st.integers(0, 10**7)),
    )


def edge_usages(model: gtypes.ModelInfo) -> list[Usage]:
    """
    Zeros, ones, each kind of token alone, huge counts, and each tier boundary -1, 0 and +1.
    """
    found = [
        Usage(),
        Usage(input_tokens=1, output_tokens=1, cache_read_tokens=1, cache_write_tokens=1, cache_write_1h_tokens=1),
        Usage(input_tokens=1_000_000),
        Usage(output_tokens=1_000_000),
        Usage(cache_read_tokens=1_000_000),
        Usage(cache_write_tokens=1_000_000),
        Usage(cache_write_tokens=1_000_000, cache_write_1h_tokens=1_000_000),
    ]
    found += [split(huge) for huge in HUGE]
    found += [split(start + step) for start in tier_starts(model) for step in (-1, 0, 1) if start + step >= 0]
    return found


@st.composite
def usages_for(draw: st.DrawFn, model: gtypes.ModelInfo) -> Usage:
    """
    Usages near *model*'s tier boundaries, zero, small, large or huge.
    """
    boundaries = [start + step for start in tier_starts(model) for step in (-1, 0, 1) if start + step >= 0]
    total = st.sampled_from([0, 1, *HUGE]) | st.integers(0, 3_000_000)
    if boundaries:
        total |= st.sampled_from(boundaries)
    return split(draw(total), draw)


@pytest.fixture
def snapshot():
    """
    Installs genai-prices data of the test's own making (as genai-prices' UpdatePrices installs fresh data).
    """

    def install(*models: gtypes.ModelInfo) -> gsnapshot.DataSnapshot:
        data = gsnapshot.DataSnapshot(
            providers=[
                gtypes.Provider(
                    id="acme",
                    name="Acme",
                    api_pattern=r"https://api\.acme\.test",
                    model_match=gtypes.ClauseStartsWith(starts_with="acme-"),
                    models=list(models),
                )
            ],
            from_auto_update=False,
        )
        gsnapshot.set_custom_snapshot(data)
        return data

    yield install
    gsnapshot.set_custom_snapshot(None)


def acme(name: str, prices: gtypes.ModelPrice | list[gtypes.ConditionalPrice]) -> gtypes.ModelInfo:
    return gtypes.ModelInfo(id=name, match=gtypes.ClauseEquals(equals=name), prices=prices)


@pytest.fixture
def calls(monkeypatch):
    """
    Counts the calls of genai_prices.calc_price (the calculation workingctx leaves to genai-prices).
    """
    made: list[str] = []
    real = genai_prices.calc_price

    def counted(usage: Any, model: str, **kwargs: Any) -> Any:
        made.append(model)
        return real(usage, model, **kwargs)

    monkeypatch.setattr(genai_prices, "calc_price", counted)
    return made


def at(moment: datetime, monkeypatch) -> datetime:
    monkeypatch.setattr(pricing, "_utcnow", lambda: moment)
    return moment


USAGE = Usage(input_tokens=300_000, output_tokens=2_000, cache_read_tokens=50_000, cache_write_tokens=9_000)


class TestGenaiPricesComputedByWorkingctx:
    """
    cost() works out the amount of a model genai-prices prices without its
    per-call machinery; the laws: the amount is the Decimal genai-prices gives,
    digit for digit, for every model it knows, and any price shape workingctx
    does not cover is left to genai-prices.
    """

    def test_every_price_at_the_edges(self):
        """
        Every price of every model of every provider (each conditional price
        too, which a name may not reach now), at zeros, huge counts and each
        tier boundary -1, 0 and +1: workingctx's rates, where it has them,
        give what genai-prices' own calculation of that price gives.
        """
        checked = 0
        for _, model in genai_models():
            for price in model_prices(model):
                rates = rates_of(price)
                for usage in edge_usages(model) if rates is not None else ():
                    assert_same(rates.cost(usage), price.calc_price(their_usage(usage))["total_price"])
                    checked += 1
        assert checked > 10 * len(genai_models())

    def test_every_name_at_the_edges(self):
        """
        Every model id of genai-prices' data, priced by name through cost() at
        the same edges, or refused as genai-prices refuses it (some ids are
        reached only through their provider).
        """
        found = 0
        for _, model in genai_models():
            if not known(model.id):
                with pytest.raises(LookupError) as theirs:
                    reference(model.id, USAGE)
                with pytest.raises(LookupError) as mine:
                    genai_rates(model.id)
                assert str(theirs.value) == str(mine.value)
                continue
            found += 1
            for usage in edge_usages(model):
                assert_agrees(model.id, usage)
        assert found > 300

    @given(data=st.data())
    def test_any_model_any_usage(self, data):
        """
        A model drawn from all providers' models and any usage: the amount genai-prices gives.
        """
        _, model = data.draw(st.sampled_from(genai_models()))
        usage = data.draw(usages_for(model))
        assert_agrees(model.id, usage)

    @given(data=st.data())
    def test_every_price_of_every_model(self, data):
        """
        Every price in genai-prices' data, each provider's and each conditional
        one (which a name may not reach now): workingctx's rates give what
        genai-prices' own calculation of that price gives.
        """
        _, model = data.draw(st.sampled_from(genai_models()))
        price = data.draw(st.sampled_from(model_prices(model)))
        usage = data.draw(usages_for(model))
        rates = rates_of(price)
        if rates is not None:
            assert_same(rates.cost(usage), price.calc_price(their_usage(usage))["total_price"])

    def test_most_prices_are_computed_by_workingctx(self):
        """
        The shapes workingctx covers are most of genai-prices' data, tiered prices included.
        """
        prices = [price for _, model in genai_models() for price in model_prices(model)]
        covered = [price for price in prices if rates_of(price) is not None]
        assert len(covered) > 0.9 * len(prices)
        assert any(any(isinstance(rate, Tiered) for _, rate, _ in rates_of(p).terms) for p in covered)

    def test_handled_shape_does_not_call_genai_prices(self, calls):
        """
        A model genai-prices knows, in a shape workingctx covers, is priced without calc_price.
        """
        expected = reference("claude-sonnet-4-5", USAGE)
        calls.clear()
        assert_same(cost("claude-sonnet-4-5", USAGE), expected)
        assert [] == calls

    @pytest.mark.parametrize(
        ("prices", "error"),
        [
            # A price for audio tokens: a unit workingctx does not bill.
            ({"input_mtok": Decimal(1), "output_mtok": Decimal(2), "input_audio_mtok": Decimal(40)}, None),
            # A key genai-prices does not know: it warns and leaves it out.
            ({"input_mtok": Decimal(1), "shiny_mtok": Decimal(9)}, None),
            # Prices genai-prices refuses, with ValueError.
            ({"input_mtok": 1, "output_mtok": Decimal(2)}, "Invalid price value"),
            ({"input_mtok": Decimal("NaN")}, "Invalid price value"),
            ({"input_mtok": Decimal(-1)}, "Invalid price value"),
            ({"output_mtok": Decimal(1), "cache_read_mtok": Decimal(1)}, "Missing ancestor"),
            ({"input_mtok": Decimal(1), "cache_write_1h_mtok": Decimal(2)}, "Missing ancestor"),
            (
                {
                    "input_mtok": gtypes.TieredPrices(
                        base=Decimal(1),
                        tiers=[gtypes.Tier(start=5, price=Decimal(2)), gtypes.Tier(start=2.5, price=Decimal(3))],
                    )
                },
                "Invalid price value",
            ),
        ],
    )
    def test_other_shapes_are_left_to_genai_prices(self, snapshot, calls, prices, error):
        """
        A shape workingctx does not cover is priced by calc_price itself:
        the same amount, warning or error as genai-prices'.
        """
        snapshot(acme("acme-other", gtypes.ModelPrice(**prices)))
        if error is not None:
            with pytest.raises(ValueError, match=error):
                reference("acme-other", USAGE)
            calls.clear()
            with pytest.raises(ValueError, match=error):
                cost("acme-other", USAGE)
        else:
            with warnings.catch_warnings(record=True) as theirs:
                warnings.simplefilter("always")
                expected = reference("acme-other", USAGE)
            calls.clear()
            with warnings.catch_warnings(record=True) as mine:
                warnings.simplefilter("always")
                assert_same(cost("acme-other", USAGE), expected)
            assert [str(w.message) for w in theirs] == [str(w.message) for w in mine]
        assert ["acme-other"] == calls

    def test_covered_shape_of_own_making(self, snapshot, calls):
        """
        A shape workingctx covers (tiers, one-hour writes, searches, a per-request
        price) is priced without calc_price, to the digit.
        """

        def tiered(base: str, *tiers: tuple[int, str]) -> gtypes.TieredPrices:
            return gtypes.TieredPrices(
                base=Decimal(base), tiers=[gtypes.Tier(start=s, price=Decimal(p)) for s, p in tiers]
            )

        price = gtypes.ModelPrice(
            requests_kcount=Decimal("0.7"),
            cache_write_1h_mtok=tiered("6", (200_000, "12"), (200_000, "13"), (1_000_000, "20")),
            output_mtok=Decimal("15.000"),
            cache_write_mtok=Decimal("3.75"),
            input_mtok=tiered("3.0", (200_000, "6"), (1_000_000, "9")),
            web_searches_kcount=Decimal(10),
        )
        snapshot(acme("acme-tiers", price))
        for total in (0, 199_999, 200_000, 200_001, 999_999, 1_000_000, 1_000_001, 10**30):
            usage = split(total)
            calls.clear()
            mine = cost("acme-tiers", usage)
            assert [] == calls
            assert_same(mine, reference("acme-tiers", usage))

    def test_fresh_data_is_used(self, snapshot):
        """
        When genai-prices installs new data, cost() prices with it, not with the model it found before.
        """
        snapshot(acme("acme-1", gtypes.ModelPrice(input_mtok=Decimal(1))))
        assert Decimal(1) == cost("acme-1", Usage(input_tokens=1_000_000))
        snapshot(acme("acme-1", gtypes.ModelPrice(input_mtok=Decimal(2))))
        assert Decimal(2) == cost("acme-1", Usage(input_tokens=1_000_000))

    def test_unknown_model_message_kept(self, snapshot):
        """
        A model genai-prices does not know raises the PricingError naming it, as before.
        """
        snapshot(acme("acme-1", gtypes.ModelPrice(input_mtok=Decimal(1))))
        with pytest.raises(
            PricingError, match=r"no price for model 'other-1': .*Unable to find provider with model matching"
        ):
            cost("other-1", USAGE)
        with pytest.raises(PricingError, match=r"no price for model 'acme-2': .*Unable to find model"):
            cost("acme-2", USAGE)

    def test_price_from_a_date(self, snapshot, monkeypatch):
        """
        A price that starts on a date applies from that UTC midnight: a model
        looked up the day before is priced at the new price the moment it starts.
        """
        new = date(2030, 1, 1)
        snapshot(
            acme(
                "acme-dated",
                [
                    gtypes.ConditionalPrice(prices=gtypes.ModelPrice(input_mtok=Decimal(1), output_mtok=Decimal(2))),
                    gtypes.ConditionalPrice(
                        constraint=gtypes.StartDateConstraint(start_date=new),
                        prices=gtypes.ModelPrice(input_mtok=Decimal(3), output_mtok=Decimal(4)),
                    ),
                ],
            )
        )
        million = Usage(input_tokens=1_000_000)
        before = datetime(2029, 12, 31, 23, 59, 59, 999_999, tzinfo=UTC)
        for moment, expected in [
            (before, Decimal(1)),
            (before, Decimal(1)),
            (datetime(2030, 1, 1, tzinfo=UTC), Decimal(3)),
            (datetime(2030, 1, 1, 12, tzinfo=UTC), Decimal(3)),
            (before, Decimal(1)),  # a clock set back
        ]:
            at(moment, monkeypatch)
            assert expected == cost("acme-dated", million) == reference("acme-dated", million, moment)

    def test_price_for_times_of_day(self, snapshot, monkeypatch):
        """
        A price for hours of the day (an off-peak price) applies from its first
        second to its last, several times in the same day.
        """
        snapshot(
            acme(
                "acme-night",
                [
                    gtypes.ConditionalPrice(prices=gtypes.ModelPrice(input_mtok=Decimal(2))),
                    gtypes.ConditionalPrice(
                        constraint=gtypes.TimeOfDateConstraint(start_time=time(0, 30), end_time=time(16, 30)),
                        prices=gtypes.ModelPrice(input_mtok=Decimal(1)),
                    ),
                ],
            )
        )
        million = Usage(input_tokens=1_000_000)
        day = date(2027, 3, 4)
        for hours, minutes, seconds, expected in [
            (0, 29, 59, 2),
            (0, 30, 0, 1),
            (16, 29, 59, 1),
            (16, 30, 0, 2),
            (23, 59, 59, 2),
        ]:
            moment = at(datetime.combine(day, time(hours, minutes, seconds), tzinfo=UTC), monkeypatch)
            assert Decimal(expected) == cost("acme-night", million) == reference("acme-night", million, moment)

    def test_every_conditional_price_at_its_edges(self, monkeypatch):
        """
        Every model of genai-prices' data whose price changes with time, a
        second before and at each date and time of day it changes.
        """
        checked = 0
        for _, model in genai_models():
            if isinstance(model.prices, gtypes.ModelPrice) or not known(model.id):
                continue
            moments = []
            for choice in model.prices:
                constraint = choice.constraint
                if isinstance(constraint, gtypes.StartDateConstraint):
                    moments.append(datetime.combine(constraint.start_date, time(), tzinfo=UTC))
                elif isinstance(constraint, gtypes.TimeOfDateConstraint):
                    edges = (constraint.start_time, constraint.end_time)
                    moments.extend(datetime.combine(date(2027, 2, 1), edge).astimezone(UTC) for edge in edges)
            for moment in moments:
                for when in (moment - timedelta(seconds=1), moment):
                    at(when, monkeypatch)
                    assert_agrees(model.id, USAGE, when)
                    checked += 1
        assert checked > 100

    def test_threads_agree(self):
        """
        Threads pricing the same and different models at once get genai-prices' amounts.
        """
        names = [model.id for _, model in genai_models()[::40] if known(model.id)]
        expected = {name: reference(name, USAGE) for name in names}
        models_found.clear()

        def price_all(offset: int) -> dict[str, Decimal]:
            return {name: ours(name, USAGE) for name in names[offset:] + names[:offset]}

        with ThreadPoolExecutor(4) as pool:
            for got in pool.map(price_all, range(8)):
                assert expected == got

    def test_models_kept_are_bounded(self, monkeypatch):
        """
        The models looked up are kept up to a bound, then forgotten and looked up again.
        """
        monkeypatch.setattr(pricing, "_GENAI_MODELS_KEPT", 3)
        models_found.clear()
        names = ["o1", "o3-pro", "claude-sonnet-4-5", "claude-3-5-haiku-latest"]
        for name in names:
            assert_same(ours(name, USAGE), reference(name, USAGE))
            assert len(models_found) <= 3
