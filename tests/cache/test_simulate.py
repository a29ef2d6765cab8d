"""
Tests for simulate(): a whole run replayed request by request under a provider's cache,
with each strategy, and with entries expiring as time passes.
"""

from __future__ import annotations

import itertools
from decimal import Decimal
from typing import Any

import attrs
import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.cache.contexts import PRICED_MODELS, PerMessage, _big, _context
from tests.strategies import transcripts
from workingctx import Message, PrefixContext, ToolCall, Usage, WorkingContext
from workingctx.cache import CachePlan, plan, simulate
from workingctx.exceptions import CacheRuleError
from workingctx.managers import TokenBudgetContextManager
from workingctx.messages import CacheBreakpoint, TextBlock
from workingctx.pricing import Price, add_price, cost, remove_price


def _tool_turns(count: int, fan_out: int) -> list[list[Message]]:
    turns = []
    for t in range(count):
        calls = [ToolCall(f"t{t}c{i}", "lookup", {"q": i}) for i in range(fan_out)]
        turns.append(
            [
                Message.user(f"question {t} " * 40),
                Message.assistant(tool_calls=calls),
                *(Message.tool("result " * 60, call_id=c.id) for c in calls),
                Message.assistant(f"answer {t} " * 30),
            ]
        )
    return turns


class TestSimulate:
    def test_plan_reads_almost_everything(self):
        """
        With plan(), every request after the first reads the whole previous request.
        """
        sim = simulate(
            _tool_turns(12, 3),
            provider="anthropic",
            model="claude-sonnet-4-6",
            context=_context(5_000, []),
        )
        assert 24 == len(sim.requests)
        assert sim.cached_share > 0.85
        assert 0 == sim.lookback_misses
        assert sim.cost == sum((r.cost for r in sim.requests), Decimal(0))
        assert sim.cost < sim.uncached_cost
        assert sim.input_cost < sim.uncached_input_cost

    def test_the_totals_add_up_every_request(self):
        """
        A run's usage is its requests' usages added up, and its cached share the part of it read from the cache.
        """
        sim = simulate(
            _tool_turns(12, 3),
            provider="anthropic",
            model="claude-sonnet-4-6",
            manager=TokenBudgetContextManager(9_000, low_watermark=7_000),
            context=_context(5_000, []),
        )
        total = Usage()
        for request in sim.requests:
            total += request.usage
        assert total == sim.usage
        assert total.cache_write_tokens > total.cache_write_1h_tokens > 0
        inputs = total.input_tokens + total.cache_read_tokens + total.cache_write_tokens
        assert (inputs, total.cache_read_tokens / inputs) == (sim.input_tokens, sim.cached_share)
        assert Usage() == simulate([], provider="anthropic", model="claude-sonnet-4-6").usage

    @pytest.mark.parametrize("model", ["claude-sonnet-4-6", "claude-3-7-sonnet-20250219"])
    def test_each_request_costs_what_cost_prices_its_usage_at(self, model):
        """
        Every cost of a request is cost() of its usage (or of the usage it
        compares with), whether the model's price is in the table (found once
        for the run) or only genai-prices knows it (priced by name each request).
        """
        sim = simulate(
            _tool_turns(8, 3),
            provider="anthropic",
            model=model,
            manager=TokenBudgetContextManager(9_000, low_watermark=7_000),
            context=_context(5_000, []),
            gaps=400,
        )
        usages = [r.usage for r in sim.requests]
        assert any(u.cache_write_1h_tokens for u in usages)
        assert any(u.cache_write_5m_tokens for u in usages)
        assert any(u.cache_read_tokens for u in usages)
        for request, usage in zip(sim.requests, usages, strict=True):
            total = usage.input_tokens + usage.cache_read_tokens + usage.cache_write_tokens
            assert request.cost == cost(model, usage)
            assert request.input_cost == cost(model, attrs.evolve(usage, output_tokens=0))
            assert request.uncached_cost == cost(model, Usage(input_tokens=total, output_tokens=usage.output_tokens))
            assert request.uncached_input_cost == cost(model, Usage(input_tokens=total))
            assert request.input_cost >= request.best_input_cost

    def test_a_price_with_a_cost_of_its_own_prices_each_request(self):
        """
        A subclass of Price whose cost() adds a fee prices every simulated request as cost() does.
        """

        class WithFee(Price):
            def cost(self, usage: Usage) -> Decimal:
                return super().cost(usage) + Decimal("0.01")

        add_price("model-with-a-fee", WithFee(3, 15, cache_read=0.3))
        try:
            sim = simulate(
                _tool_turns(3, 2), provider="anthropic", model="model-with-a-fee", context=_context(5_000, [])
            )
        finally:
            remove_price("model-with-a-fee")
        assert sim.requests
        for request in sim.requests:
            assert request.cost == WithFee(3, 15, cache_read=0.3).cost(request.usage)
            assert request.uncached_input_cost > Decimal("0.01")

    def test_automatic_caching_misses_after_a_wide_fan_out(self):
        """
        Only the automatic breakpoint: a turn adding more than 20 blocks is read from cache
        no further than its lookback; plan() reads it all.
        """
        turns = _tool_turns(4, 12)
        auto = simulate(
            turns, provider="anthropic", model="claude-sonnet-4-6", context=_context(5_000, []), cache="auto"
        )
        planned = simulate(turns, provider="anthropic", model="claude-sonnet-4-6", context=_context(5_000, []))
        assert auto.lookback_misses > 0
        assert 0 == planned.lookback_misses
        assert planned.cost < auto.cost

    def test_a_cut_keeps_the_prefix_cached(self):
        """
        Under the watermark manager, a cut re-writes the tail but the planned prefix is still read.
        """
        manager = TokenBudgetContextManager(9_000, low_watermark=7_000)
        sim = simulate(
            _tool_turns(20, 2),
            provider="anthropic",
            model="claude-sonnet-4-6",
            manager=manager,
            context=_context(5_000, []),
        )
        assert all(r.usage.cache_read_tokens >= 5_000 for r in sim.requests[1:])

    def test_output_from_usage_when_set(self):
        """
        A reply carrying usage gives the output tokens of its request.
        """
        turns = [[Message.user("hi"), Message.assistant("hello", usage=Usage(output_tokens=77))]]
        sim = simulate(turns, provider="openai", model="gpt-5")
        assert 77 == sim.usage.output_tokens

    def test_bad_arguments(self):
        """
        A bad turn, manager or strategy raises with the fix named.
        """
        with pytest.raises(TypeError, match="turns must hold messages"):
            simulate([3], provider="openai", model="gpt-5")  # type: ignore[list-item]
        with pytest.raises(TypeError, match="trim_context"):
            simulate([], provider="openai", model="gpt-5", manager=object())
        with pytest.raises(CacheRuleError, match="cache must be"):
            simulate(
                [Message.user("q"), Message.assistant("a")],
                provider="openai",
                model="gpt-5",
                cache="sometimes",  # type: ignore[arg-type]
            )


class TestBreakpointsOnBlocks:
    def test_read_through_a_block_breakpoint(self):
        """
        The simulated cache reads and writes at breakpoints set on blocks.
        """
        marked = Message("user", [TextBlock(_big(3_000), cache=CacheBreakpoint())])
        turns = [[marked, Message.assistant("a1")], [Message.user("q2"), Message.assistant("a2")]]
        sim = simulate(turns, provider="anthropic", model="claude-sonnet-4-6", cache=_only_blocks)
        assert sim.requests[1].usage.cache_read_tokens >= 3_000

    def test_a_breakpoint_that_moves_keeps_the_prefix(self):
        """
        A breakpoint says where to cache, not what is sent: the block the last request
        marked, unmarked in the next one, still begins the prefix that one reads.
        """

        class MarkLast:
            def trim_context(self, ctx: WorkingContext) -> WorkingContext:
                tail = [Message(m.role, (TextBlock(m.text()),)) for m in ctx.messages]
                tail[-1] = Message(tail[-1].role, (TextBlock(tail[-1].text(), cache=CacheBreakpoint()),))
                return ctx.replace_tail(tail)

        turns = [[Message.user(_big(2_000)), Message.assistant("a1")], [Message.user("q2"), Message.assistant("a2")]]
        sim = simulate(turns, provider="anthropic", model="claude-sonnet-4-6", manager=MarkLast(), cache=_only_blocks)
        first = sim.requests[0].usage
        assert first.cache_write_tokens == sim.requests[1].usage.cache_read_tokens >= 2_000


def _only_blocks(ctx: WorkingContext, _previous: CachePlan | None) -> CachePlan:
    made = plan(ctx, provider="anthropic", model="claude-sonnet-4-6")
    return CachePlan(made.provider, made.model, (), _layout=made._layout)


class TestStrategies:
    def test_last_and_custom_strategies(self):
        """
        "last" keeps one breakpoint on the last block; a callable strategy's plans are used as given.
        """
        turns = _tool_turns(3, 2)
        last = simulate(
            turns, provider="anthropic", model="claude-sonnet-4-6", context=_context(5_000, []), cache="last"
        )
        assert all(r.breakpoints == 1 for r in last.requests)
        none = simulate(
            turns, provider="anthropic", model="claude-sonnet-4-6", context=_context(5_000, []), cache=_only_blocks
        )
        assert 0 == none.usage.cache_read_tokens
        with pytest.raises(TypeError, match="must return a CachePlan"):
            simulate(turns, provider="openai", model="gpt-5", cache=lambda _ctx, _previous: None)  # type: ignore[arg-type,return-value]
        with pytest.raises(TypeError, match="not a Message"):
            simulate([[Message.user("q"), "a"]], provider="openai", model="gpt-5")  # type: ignore[list-item]
        with pytest.raises(TypeError, match="context must be a WorkingContext"):
            simulate([], provider="openai", model="gpt-5", context=[])  # type: ignore[arg-type]


# -- expiry -------------------------------------------------------------------------------


def _chat(count: int) -> list[list[Message]]:
    return [[Message.user(_big(1_500) + f" q{t}"), Message.assistant(_big(200) + f" a{t}")] for t in range(count)]


def _timed(gaps: object, *, cache: object = "plan", provider: str = "anthropic", count: int = 2) -> object:
    model = "claude-sonnet-4-6" if provider == "anthropic" else "gpt-5"
    return simulate(
        _chat(count),
        provider=provider,
        model=model,
        context=_context(5_000, []),
        cache=cache,  # type: ignore[arg-type]
        gaps=gaps,  # type: ignore[arg-type]
    )


class TestExpiry:
    def test_five_minute_entries_expire_the_hour_long_prefix_stays(self):
        """
        After 301 idle seconds the five-minute entries are gone: the next request reads only
        the one-hour prefix and writes the rest again; at exactly 300 s it reads everything.
        """
        on_time, late = _timed(300), _timed(301)
        first = on_time.requests[0].usage
        assert first.cache_write_1h_tokens == 5_004  # the prefix message, for an hour
        assert on_time.requests[1].usage.cache_read_tokens == sum(
            (first.cache_read_tokens, first.cache_write_tokens, first.input_tokens)
        )
        assert 0 == on_time.expiry_misses
        second = late.requests[1]
        assert 5_004 == second.usage.cache_read_tokens
        assert second.usage.cache_write_tokens > 1_500
        assert 0 == second.usage.cache_write_1h_tokens
        assert 1 == late.expiry_misses
        assert second.expired_tokens == on_time.requests[1].usage.cache_read_tokens - 5_004
        assert (0.0, 301.0) == (late.requests[0].at, late.requests[1].at)
        assert late.input_cost > on_time.input_cost

    def test_after_an_hour_nothing_is_read(self):
        """
        Past the one-hour lifetime even the prefix is written again, for an hour.
        """
        sim = _timed(3_601)
        assert 0 == sim.requests[1].usage.cache_read_tokens
        assert 5_004 == sim.requests[1].usage.cache_write_1h_tokens

    def test_reads_renew_entries(self):
        """
        Requests 200 s apart keep their entries alive far past five minutes: each read renews them.
        """
        sim = _timed(200, count=10)
        assert 0 == sim.expiry_misses
        assert sim.requests[-1].at == 1_800
        assert all(r.usage.cache_read_tokens > 5_004 for r in sim.requests[1:])

    def test_five_minute_prefix_expires_with_the_rest(self):
        """
        With only the automatic (five-minute) breakpoint, a pause of six minutes loses the prefix too.
        """
        sim = _timed(360, cache="auto")
        assert 0 == sim.requests[1].usage.cache_read_tokens
        assert 1 == sim.expiry_misses

    def test_implicit_caches_expire_when_idle(self):
        """
        OpenAI's cache is gone after five idle minutes; before that it reads in 128-token steps.
        """
        assert _timed(299, provider="openai").requests[1].usage.cache_read_tokens > 5_000
        late = _timed(301, provider="openai")
        assert 0 == late.requests[1].usage.cache_read_tokens
        assert 1 == late.expiry_misses

    def test_gaps_one_per_request(self):
        """
        An iterable gives one gap per request after the first; too few is an error naming the fix.
        """
        sim = _timed([10, 400, 10], count=4)
        assert [0, 10, 410, 420] == [r.at for r in sim.requests]
        assert [0, 0, 1, 0] == [1 if r.expired_tokens else 0 for r in sim.requests]
        with pytest.raises(CacheRuleError, match="gaps ran out after 2 requests"):
            _timed([10], count=3)

    @pytest.mark.parametrize(
        ("gaps", "error", "match"),
        [
            (-1, CacheRuleError, "non-negative"),
            (float("nan"), CacheRuleError, "finite"),
            (float("inf"), CacheRuleError, "finite"),
            (Decimal("sNaN"), CacheRuleError, "finite"),
            (10**400, CacheRuleError, "below 10"),
            (True, TypeError, "number of seconds"),
            ("60", TypeError, "gaps must be a number"),
            ([10, "x"], TypeError, r"gaps\[1\] must be a number"),
            ([-5], CacheRuleError, r"gaps\[0\] must be a finite, non-negative"),
        ],
    )
    def test_bad_gaps(self, gaps, error, match):
        """
        A gap that is not a finite, non-negative number of seconds is refused, naming it.
        """
        with pytest.raises(error, match=match):
            _timed(gaps, count=3)

    def test_an_hour_long_tail_outlives_a_pause(self):
        """
        With tail_ttl="1h" every breakpoint lasts an hour: a ten-minute pause loses
        nothing, at the price of writing for an hour.
        """

        def long_tail(ctx: WorkingContext, previous: CachePlan | None) -> CachePlan:
            return plan(ctx, provider="anthropic", model="claude-sonnet-4-6", previous=previous, tail_ttl="1h")

        held, lost = _timed(600, cache=long_tail, count=4), _timed(600, count=4)
        assert {b.ttl for b in plan(_context(5_000, [Message.user(_big(1_500))]), provider="anthropic",
                                    model="claude-sonnet-4-6", tail_ttl="1h").breakpoints} == {"1h"}  # fmt: skip
        first = held.requests[0].usage
        assert first.cache_write_1h_tokens == first.cache_write_tokens
        assert 0 == held.expiry_misses
        assert held.requests[1].usage.cache_read_tokens > lost.requests[1].usage.cache_read_tokens
        assert held.input_cost < lost.input_cost
        assert _timed(0, cache=long_tail).input_cost > _timed(0).input_cost  # no pause: the hour costs more


@st.composite
def timed_runs(draw: st.DrawFn) -> tuple[str, str, object, int, list[Message], list[float], PerMessage, bool]:
    """
    A provider and model, a strategy, a prefix size, a transcript, gaps between
    requests (cycled), a token scale, and whether a watermark manager cuts the run.
    """
    provider = draw(st.sampled_from(["anthropic", "openai"]))
    model = draw(st.sampled_from(PRICED_MODELS[provider]))
    strategy = draw(st.sampled_from(["plan", "auto", "last"]))
    prefix_tokens = draw(st.sampled_from([0, 600, 1_500, 5_000]))
    transcript = draw(transcripts(max_turns=5, allow_pending=False))
    gaps = draw(st.lists(st.floats(0, 5_000, allow_nan=False), min_size=1, max_size=6))
    counter = PerMessage(draw(st.sampled_from([60, 400, 2_500])))
    return provider, model, strategy, prefix_tokens, transcript, gaps, counter, draw(st.booleans())


def _run(
    provider: str, model: str, strategy: object, prefix_tokens: int, transcript: list[Message], counter: PerMessage,
    cut: bool, gaps: object,
) -> object:  # fmt: skip
    context = WorkingContext(prefix=PrefixContext(system_prompt=_big(prefix_tokens)), counter=counter)
    # Room for the prefix and a few messages, so cuts happen but always fit.
    window = prefix_tokens + 12 * (counter.each + 200)
    manager = TokenBudgetContextManager(window, low_watermark=window * 2 // 3) if cut else None
    return simulate(
        transcript, provider=provider, model=model, context=context, manager=manager,
        cache=strategy, gaps=gaps,  # type: ignore[arg-type]
    )  # fmt: skip


class TestExpiryLaws:
    @given(timed_runs())
    def test_expiry_never_makes_a_run_cheaper(self, run):
        """
        Over random runs, providers, models, strategies and gaps: with time passing, no
        request's input costs less than with no time passing, every request costs at least
        the best any plan could do for it, which is at least every token read from the
        cache; gaps of zero are no time at all.
        """
        provider, model, strategy, prefix_tokens, transcript, gaps, counter, cut = run
        timeless = _run(provider, model, strategy, prefix_tokens, transcript, counter, cut, None)
        timed = _run(provider, model, strategy, prefix_tokens, transcript, counter, cut, itertools.cycle(gaps))
        zero = _run(provider, model, strategy, prefix_tokens, transcript, counter, cut, 0)
        assert zero == timeless
        assert len(timed.requests) == len(timeless.requests)
        for slow, fast in zip(timed.requests, timeless.requests, strict=True):
            assert slow.input_cost >= fast.input_cost
            assert slow.best_input_cost == fast.best_input_cost
            assert slow.uncached_input_cost == fast.uncached_input_cost
            sent = slow.usage.input_tokens + slow.usage.cache_read_tokens + slow.usage.cache_write_tokens
            floor = cost(model, Usage(cache_read_tokens=sent))
            assert slow.input_cost >= slow.best_input_cost >= floor
            assert fast.input_cost >= fast.best_input_cost
            assert slow.input_cost <= cost(model, Usage(cache_write_tokens=sent, cache_write_1h_tokens=sent))
            if slow.usage.cache_read_tokens < fast.usage.cache_read_tokens:
                assert slow.expired_tokens > 0
        assert timed.input_cost >= timeless.input_cost >= timeless.best_input_cost


class _EveryPrefix:
    """
    The best cost's answer from a set of every prefix sent (what :func:`simulate` kept before its tree),
    without the bound a tree gives the cache's walk (how many messages a request shares with those sent).
    """

    def __init__(self) -> None:
        self.seen: set[int] = set()

    def sent(self, layout: Any) -> tuple[int, None]:
        from workingctx.cache._served import seen_before  # noqa: PLC0415  # the private part under test

        return seen_before(layout, self.seen), None


@given(
    run=transcripts(max_turns=12, allow_pending=False),
    repeats=st.lists(st.integers(0, 6), max_size=6),
    window=st.integers(150, 1_500),
    low=st.integers(40, 100),
    cache=st.sampled_from(["plan", "last", "auto", "tuples"]),
    provider=st.sampled_from(["anthropic", "openai"]),
)
def test_simulate_with_a_window_equals_keeping_every_prefix_sent(run, repeats, window, low, cache, provider):
    """
    Property: over a run trimmed by a token window (a cut at every request
    past it, or down to a low watermark), with messages met twice, under
    each strategy, a strategy laying some requests out as tuples among them,
    every request :func:`simulate` reports (usage, costs, best cost, misses)
    is the one it reports keeping the chain value of every prefix ever sent,
    and walking every message of a request for the entries it holds.
    """
    from unittest import mock  # noqa: PLC0415

    from workingctx.cache import _served  # noqa: PLC0415  # the private part under test

    turns = list(run)
    for back in repeats:  # the same message objects again, as a manager or a caller may send them
        if len(turns) > back:
            turns.append(turns[-1 - back])
    model = "claude-sonnet-4-6" if provider == "anthropic" else "gpt-5"
    sent = 0

    def tuples(ctx: WorkingContext, previous: CachePlan | None) -> CachePlan:
        nonlocal sent
        sent += 1
        made = plan(ctx, provider=provider, model=model, previous=previous, counter=PerMessage(20))
        return attrs.evolve(made, _layout=tuple(made._layout)) if sent % 3 == 0 else made

    def simulated() -> Any:
        nonlocal sent
        sent = 0
        manager = TokenBudgetContextManager(window, low_watermark=window * low // 100, counter=PerMessage(20))
        return simulate(
            turns,
            provider=provider,
            model=model,
            manager=manager,
            context=WorkingContext(prefix=PrefixContext("Be brief. " * 40)),
            cache=tuples if cache == "tuples" else cache,
            counter=PerMessage(20),
        )

    ours = simulated()
    with mock.patch.object(_served, "SentPrefixes", _EveryPrefix):
        every = simulated()
    assert ours.requests == every.requests
