"""
Tests for workingctx.cache: rules, plans, reports and simulations.
"""

from __future__ import annotations

import itertools
import pickle
import threading
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from decimal import Decimal
from typing import Any

import attrs
import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.strategies import messages, transcripts
from workingctx import Message, PrefixContext, ToolCall, Usage, WorkingContext
from workingctx.cache import (
    RULES,
    Breakpoint,
    CachePlan,
    CacheRules,
    cache_blocks,
    can_carry_breakpoint,
    plan,
    report,
    simulate,
)
from workingctx.exceptions import CacheRuleError, PricingError
from workingctx.managers import TokenBudgetContextManager
from workingctx.messages import CacheBreakpoint, ImageBlock, MediaRef, ReasoningBlock, TextBlock, ToolCallBlock
from workingctx.pricing import cost

ANTHROPIC_MODELS = [*RULES["anthropic"].minimum_tokens, "claude-unknown-9"]
# Built-in prices, minimums of 512, 1,024 and 4,096 tokens, and a long-context tier.
PRICED_MODELS = {
    "anthropic": ["claude-sonnet-4-6", "claude-opus-5", "claude-haiku-4-5"],
    "openai": ["gpt-5", "gpt-5.4"],
}


class PerMessage:
    """
    A token counter that gives every message *each* tokens plus its text length.
    """

    name = "per-message"
    exact = False

    def __init__(self, each: int) -> None:
        self.each = each

    def count_message(self, message: Message) -> int:
        return self.each + len(message.text())

    def count(self, messages: Iterable[Message]) -> int:
        return sum(self.count_message(m) for m in messages)

    async def estimate(self, messages: Iterable[Message]) -> int:
        return self.count(messages)


def _big(tokens: int) -> str:
    return "x" * (tokens * 4)


def _context(prefix_tokens: int, tail: list[Message]) -> WorkingContext:
    return WorkingContext(prefix=PrefixContext(system_prompt=_big(prefix_tokens)), messages=tail)


# -- plans obey every rule --------------------------------------------------------


def _presets(request: list[Message]) -> list[tuple[tuple[int, int], str]]:
    """
    The breakpoints the request's blocks carry already, found independently of the library.
    """
    found = []
    for m, message in enumerate(request):
        for k, block in enumerate(cache_blocks(message)):
            mark = getattr(block, "cache", None)
            if mark is not None and can_carry_breakpoint(block):
                found.append(((m, k), mark.ttl or "5m"))
    return found


def _presets_valid(request: list[Message], automatic: bool) -> bool:
    presets = sorted(_presets(request))
    ttls = [ttl for _, ttl in presets]
    in_order = ttls == sorted(ttls, key=lambda t: t != "1h")
    return in_order and len(presets) + automatic <= RULES["anthropic"].max_breakpoints


def _check_rules(made: CachePlan, ctx: WorkingContext, counter: PerMessage) -> None:
    rules = RULES[made.provider]
    minimum = rules.minimum_for(made.model)
    request = ctx.assembled()
    presets = _presets(request)
    count = len(made.breakpoints) + len(presets) + (1 if made.automatic else 0)
    assert count <= rules.max_breakpoints
    positions = [(b.message, b.block) for b in made.breakpoints]
    assert positions == sorted(set(positions))
    assert not set(positions) & {at for at, _ in presets}
    ttls = [
        ttl for _, ttl in sorted([*((at, b.ttl) for at, b in zip(positions, made.breakpoints, strict=True)), *presets])
    ]
    assert ttls == sorted(ttls, key=lambda t: t != "1h")  # every 1h before every 5m, on blocks included
    for point in made.breakpoints:
        assert point.tokens >= minimum
        assert can_carry_breakpoint(cache_blocks(request[point.message])[point.block])
        before = counter.count(request[: point.message])
        assert before < point.tokens <= before + counter.count_message(request[point.message])


@st.composite
def runs(draw: st.DrawFn) -> tuple[str, int, list[list[Message]], PerMessage]:
    """
    A model, a prefix size and a run of requests (each the one before it,
    grown, sometimes with its oldest messages cut), with a token scale.
    """
    model = draw(st.sampled_from(ANTHROPIC_MODELS))
    prefix_tokens = draw(st.sampled_from([0, 100, 600, 1_500, 5_000]))
    counter = PerMessage(draw(st.sampled_from([5, 60, 400, 2_500])))
    requests: list[list[Message]] = []
    tail: list[Message] = []
    for _ in range(draw(st.integers(1, 4))):
        if tail and draw(st.booleans()):
            tail = tail[draw(st.integers(1, len(tail))) :]
        tail = tail + draw(st.lists(messages(), min_size=1, max_size=12))
        requests.append(tail)
    return model, prefix_tokens, requests, counter


class TestPlanRules:
    @given(runs(), st.booleans(), st.sampled_from(["5m", "1h"]), st.sampled_from(["5m", "1h"]))
    def test_plans_respect_every_rule(self, run, automatic, prefix_ttl, tail_ttl):
        """
        Over random transcripts, models and lifetimes, every plan of a run obeys Anthropic's
        rules, and each plan keeps a breakpoint on the furthest breakpoint of the plan before
        that is still part of the request (so the lookback never loses it).
        """
        model, prefix_tokens, requests, counter = run
        if (prefix_ttl, tail_ttl) == ("5m", "1h"):
            with pytest.raises(CacheRuleError, match="use prefix_ttl='1h' too"):
                plan(_context(prefix_tokens, requests[0]), provider="anthropic", model=model, tail_ttl=tail_ttl,
                     prefix_ttl=prefix_ttl)  # fmt: skip
            return
        previous = None
        previous_request: list[Message] = []
        for tail in requests:
            ctx = _context(prefix_tokens, tail)
            try:
                made = plan(
                    ctx,
                    provider="anthropic",
                    model=model,
                    previous=previous,
                    automatic=automatic,
                    prefix_ttl=prefix_ttl,
                    counter=counter,
                    tail_ttl=tail_ttl,
                )
            except CacheRuleError:
                # Only when the breakpoints already on the request's blocks break a rule.
                assert not _presets_valid(ctx.assembled(), automatic)
                previous = None
                continue
            _check_rules(made, ctx, counter)
            if previous is not None and previous.breakpoints:
                request = ctx.assembled()
                last = max(previous.breakpoints, key=lambda b: b.tokens)
                marks = [(b.message, b.block) for b in made.breakpoints] + [at for at, _ in _presets(request)]
                room = len(marks) + automatic < RULES["anthropic"].max_breakpoints
                if room and request[: last.message + 1] == previous_request[: last.message + 1]:
                    assert any(at >= (last.message, last.block) for at in marks)
            previous, previous_request = made, ctx.assembled()

    @given(st.lists(messages(), min_size=1, max_size=20), st.sampled_from(["openai", "gemini"]))
    def test_implicit_providers_place_none(self, tail, provider):
        """
        OpenAI and Gemini plans carry no breakpoint; OpenAI's carries a cache key from the prefix.
        """
        ctx = _context(2_000, tail)
        made = plan(ctx, provider=provider, model="gpt-5" if provider == "openai" else "gemini-2.5-flash")
        assert () == made.breakpoints
        if provider == "openai":
            assert made.cache_key == f"workingctx-{ctx.prefix.digest()[:32]}"
        else:
            assert made.cache_key is None

    def test_prefix_then_last(self):
        """
        A first request gets a 1h breakpoint at the end of the prefix and a 5m one at the end.
        """
        ctx = _context(5_000, [Message.user(_big(3_000))])
        made = plan(ctx, provider="anthropic", model="claude-sonnet-4-6")
        assert [(0, 0, "1h"), (1, 0, "5m")] == [(b.message, b.block, b.ttl) for b in made.breakpoints]
        assert {0: {0: "1h"}, 1: {0: "5m"}} == made.marks()

    def test_below_minimum_left_out(self):
        """
        A prefix below the model's minimum gets no breakpoint; the whole request may.
        """
        ctx = _context(1_000, [Message.user(_big(4_000))])
        made = plan(ctx, provider="anthropic", model="claude-opus-4-6")
        assert [(1, 0, "5m")] == [(b.message, b.block, b.ttl) for b in made.breakpoints]

    def test_never_on_thinking_or_empty_text(self):
        """
        The last breakpoint skips a trailing thinking block and lands on the last block that can carry one.
        """
        reply = Message(
            "assistant",
            [TextBlock(_big(2_000)), TextBlock(""), ReasoningBlock("thinking")],
        )
        ctx = _context(2_000, [reply])
        made = plan(ctx, provider="anthropic", model="claude-sonnet-4-6")
        assert (1, 0) == (made.breakpoints[-1].message, made.breakpoints[-1].block)

    def test_bridge_reaches_a_previous_breakpoint_far_back(self):
        """
        When more than 20 blocks arrive between requests, the plan still reads the previous
        request's cache, through a breakpoint on its last breakpoint.
        """
        first = [Message.user(_big(1_500))]
        ctx = _context(2_000, first)
        before = plan(ctx, provider="anthropic", model="claude-sonnet-4-6")
        calls = [ToolCall(f"c{i}", "lookup") for i in range(25)]
        ctx.append(
            Message.assistant(tool_calls=calls),
            *(Message.tool("ok", call_id=f"c{i}") for i in range(25)),
            Message.user("and?"),
        )
        after = plan(ctx, provider="anthropic", model="claude-sonnet-4-6", previous=before)
        assert (1, 0) in {(b.message, b.block) for b in after.breakpoints}
        assert 0 == report(before, after, provider="anthropic", model="claude-sonnet-4-6").lookback_miss_tokens
        auto_before = plan(ctx.fork().replace_tail(first), provider="anthropic", model="claude-sonnet-4-6")
        auto = CachePlan("anthropic", "claude-sonnet-4-6", (), automatic=True, _layout=after._layout)
        missed = report(auto_before, auto, provider="anthropic", model="claude-sonnet-4-6")
        assert missed.lookback_miss_tokens > 0


class TestBreakpointsOnBlocks:
    def test_counted_and_kept_in_order(self):
        """
        Breakpoints already on blocks count against the limit, and a planned breakpoint
        before a one-hour one on a block lasts an hour too.
        """
        late = Message("user", [TextBlock(_big(2_000), cache=CacheBreakpoint("1h"))])
        ctx = _context(2_000, [Message.user(_big(1_000)), late, Message.user("and?")])
        made = plan(ctx, provider="anthropic", model="claude-sonnet-4-6", prefix_ttl="5m")
        assert [(0, 0, "1h"), (3, 0, "5m")] == [(b.message, b.block, b.ttl) for b in made.breakpoints]

    def test_too_many_on_blocks(self):
        """
        A request whose blocks carry more breakpoints than allowed is refused with the fix.
        """
        marked = [Message("user", [TextBlock(_big(300), cache=CacheBreakpoint())]) for _ in range(5)]
        with pytest.raises(CacheRuleError, match=r"already carry 5 breakpoints.*remove cache="):
            plan(_context(10, marked), provider="anthropic", model="claude-sonnet-4-6")

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


class TestPlanErrors:
    def test_too_many_breakpoints(self):
        """
        More breakpoints than the provider allows, the automatic one counted, are refused.
        """
        points = [Breakpoint(i, 0, "5m", 5_000 + i) for i in range(4)]
        with pytest.raises(CacheRuleError, match=r"5 breakpoints .*exceed the 4"):
            CachePlan("anthropic", "claude-sonnet-4-6", points, automatic=True)

    def test_one_hour_after_five_minutes(self):
        """
        A 1h breakpoint after a 5m one is refused.
        """
        points = [Breakpoint(0, 0, "5m", 5_000), Breakpoint(1, 0, "1h", 6_000)]
        with pytest.raises(CacheRuleError, match="1h breakpoint must come before"):
            CachePlan("anthropic", "claude-sonnet-4-6", points)

    def test_below_minimum(self):
        """
        A breakpoint below the model's minimum is refused, naming the minimum.
        """
        with pytest.raises(CacheRuleError, match=r"below the 4096-token minimum of claude-haiku-4-5"):
            CachePlan("anthropic", "claude-haiku-4-5", [Breakpoint(0, 0, "5m", 4_000)])

    def test_block_that_cannot_carry(self):
        """
        A breakpoint on a thinking block is refused when the plan knows its request.
        """
        ctx = _context(2_000, [Message("assistant", [TextBlock(_big(2_000)), ReasoningBlock("hm")])])
        made = plan(ctx, provider="anthropic", model="claude-sonnet-4-6")
        with pytest.raises(CacheRuleError, match="cannot carry a breakpoint"):
            CachePlan("anthropic", "claude-sonnet-4-6", [Breakpoint(1, 1, "5m", 4_000)], _layout=made._layout)

    def test_unknown_provider_and_bad_input(self):
        """
        An unknown provider, a non-context and a bad TTL raise with the fix named.
        """
        ctx = _context(10, [])
        with pytest.raises(CacheRuleError, match=r"provider 'mistral'.*anthropic"):
            plan(ctx, provider="mistral", model="m")
        with pytest.raises(TypeError, match="WorkingContext or a FrozenContext"):
            plan([Message.user("hi")], provider="anthropic", model="claude-sonnet-4-6")  # type: ignore[arg-type]
        with pytest.raises(CacheRuleError, match="prefix_ttl"):
            plan(ctx, provider="anthropic", model="claude-sonnet-4-6", prefix_ttl="2h")  # type: ignore[arg-type]
        with pytest.raises(TypeError, match="previous"):
            plan(ctx, provider="anthropic", model="claude-sonnet-4-6", previous="x")  # type: ignore[arg-type]


# -- reports --------------------------------------------------------------------------


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


# -- simulations ----------------------------------------------------------------------


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


class TestApply:
    def test_breakpoints_set_on_blocks(self):
        """
        apply() puts each planned breakpoint on its block; text becomes a TextBlock and
        marked tool calls become ToolCallBlock content in order; other messages are unchanged.
        """
        calls = [ToolCall("c1", "lookup", {"q": 1}), ToolCall("c2", "lookup", {"q": 2})]
        ctx = _context(3_000, [Message.user(_big(100)), Message.assistant("Looking.", tool_calls=calls)])
        made = plan(ctx, provider="anthropic", model="claude-sonnet-4-6")
        assert [(0, 0, "1h"), (2, 2, "5m")] == [(b.message, b.block, b.ttl) for b in made.breakpoints]
        request = ctx.assembled()
        applied = made.apply(request)
        assert (TextBlock(request[0].text(), cache=CacheBreakpoint("1h")),) == applied[0].content
        assert applied[1] is request[1]
        reply = applied[2]
        assert () == reply.tool_calls
        assert [
            TextBlock("Looking."),
            ToolCallBlock("c1", "lookup", {"q": 1}),
            ToolCallBlock("c2", "lookup", {"q": 2}, cache=CacheBreakpoint("5m")),
        ] == list(reply.content)
        assert ("c1", "c2") == reply.call_ids

    def test_marked_block_content(self):
        """
        A breakpoint on a content block sets its cache field and keeps the message's tool calls.
        """
        reply = Message("user", [TextBlock("a" * 8_000), ImageBlock(MediaRef(kind="url", url="https://x/y.png"))])
        ctx = _context(10, [reply])
        made = plan(ctx, provider="anthropic", model="claude-sonnet-4-6")
        applied = made.apply(ctx.assembled())
        assert CacheBreakpoint("5m") == applied[1].content[1].cache

    def test_tool_result_marked_on_the_result(self):
        """
        A breakpoint on a tool result's text goes on a TextBlock inside the result, for the same call.
        """
        ctx = _context(3_000, [Message.assistant(tool_calls=[ToolCall("c1", "f")]), Message.tool("done", call_id="c1")])
        made = plan(ctx, provider="anthropic", model="claude-sonnet-4-6")
        applied = made.apply(ctx.assembled())
        assert (TextBlock("done", cache=CacheBreakpoint("5m")),) == applied[2].content
        assert ("c1",) == applied[2].result_ids

    def test_other_request_refused(self):
        """
        Messages that are not the planned request are refused.
        """
        ctx = _context(3_000, [Message.user("q")])
        made = plan(ctx, provider="anthropic", model="claude-sonnet-4-6")
        with pytest.raises(CacheRuleError, match="not the request the plan was made for"):
            made.apply([*ctx.assembled(), Message.user("more")])
        with pytest.raises(TypeError, match="request's messages"):
            made.apply(["q"])  # type: ignore[list-item]

    def test_a_plan_of_an_earlier_version_applies_to_its_request(self):
        """
        A plan unpickled from a version whose keys were a sha256 chain over the
        messages' digests (its layout a tuple of positions, as pickled) applies
        to its own request, and refuses another.
        """
        import hashlib  # noqa: PLC0415

        from workingctx.cache._layout import _unmarked  # noqa: PLC0415  # the earlier definition of keys

        ctx = _context(3_000, [Message.user("q"), Message.assistant("a", tool_calls=[ToolCall("c1", "f")])])
        made = plan(ctx, provider="anthropic", model="claude-sonnet-4-6")
        request = ctx.assembled()
        head, heads = hashlib.sha256(b"workingctx.cache.layout").hexdigest(), []
        for message in request:
            head = hashlib.sha256(f"{head}:{_unmarked(message).digest()}".encode("ascii")).hexdigest()
            heads.append(head)
        old = attrs.evolve(
            made, _layout=tuple(attrs.evolve(p, key=f"{heads[p.message]}:{p.block}") for p in made._layout)
        )
        assert old.apply(request) == made.apply(request)
        with pytest.raises(CacheRuleError, match="not the request the plan was made for"):
            old.apply([*request, Message.user("more")])


class TestRuleValues:
    def test_bad_rules(self):
        """
        Rules built from bad numbers are refused, naming the field.
        """
        with pytest.raises(TypeError, match="minimum_tokens must be a mapping"):
            CacheRules(
                "p", explicit=True, max_breakpoints=4, lookback_blocks=20, minimum_tokens=[("a", 1)], default_minimum=0
            )  # type: ignore[arg-type]
        with pytest.raises(CacheRuleError, match=r"minimum_tokens\['a'\]"):
            CacheRules(
                "p", explicit=True, max_breakpoints=4, lookback_blocks=20, minimum_tokens={"a": -1}, default_minimum=0
            )
        with pytest.raises(CacheRuleError, match="max_breakpoints must be 0 or more"):
            CacheRules("p", explicit=True, max_breakpoints=-1, lookback_blocks=20, minimum_tokens={}, default_minimum=0)
        with pytest.raises(CacheRuleError, match="lookback_blocks must be a positive int"):
            CacheRules("p", explicit=True, max_breakpoints=4, lookback_blocks=0, minimum_tokens={}, default_minimum=0)

    def test_bad_names(self):
        """
        A provider or model that is not a str, and a non-message, raise TypeError.
        """
        ctx = _context(10, [])
        with pytest.raises(TypeError, match="provider must be a str"):
            plan(ctx, provider=1, model="m")  # type: ignore[arg-type]
        with pytest.raises(TypeError, match="model must be a str"):
            plan(ctx, provider="anthropic", model=None)  # type: ignore[arg-type]
        with pytest.raises(TypeError, match="model must be a str"):
            RULES["anthropic"].minimum_for(3)  # type: ignore[arg-type]
        with pytest.raises(TypeError, match="needs a Message"):
            cache_blocks("hi")  # type: ignore[arg-type]

    def test_bad_breakpoints(self):
        """
        Breakpoints that are not Breakpoint values, out of order, or with an unknown TTL are refused.
        """
        with pytest.raises(TypeError, match="sequence of Breakpoint"):
            CachePlan("anthropic", "claude-sonnet-4-6", 3)  # type: ignore[arg-type]
        with pytest.raises(TypeError, match="not a Breakpoint"):
            CachePlan("anthropic", "claude-sonnet-4-6", [(0, 0)])  # type: ignore[list-item]
        with pytest.raises(CacheRuleError, match="request order"):
            CachePlan("anthropic", "claude-sonnet-4-6", [Breakpoint(2, 0, "5m", 9_000), Breakpoint(1, 0, "5m", 8_000)])
        with pytest.raises(CacheRuleError, match="ttl '2h'"):
            CachePlan("anthropic", "claude-sonnet-4-6", [Breakpoint(0, 0, "2h", 9_000)])  # type: ignore[arg-type]

    def test_planned_on_a_marked_block_refused(self):
        """
        A planned breakpoint on a block that already carries one is refused.
        """
        ctx = _context(10, [Message("user", [TextBlock(_big(2_000), cache=CacheBreakpoint())])])
        made = plan(ctx, provider="anthropic", model="claude-sonnet-4-6")
        with pytest.raises(CacheRuleError, match="already carries a breakpoint"):
            CachePlan("anthropic", "claude-sonnet-4-6", [Breakpoint(1, 0, "5m", 2_000)], _layout=made._layout)


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

    def test_an_async_counter(self):
        """
        A counter with only count() still counts each message.
        """

        class Whole:
            def count(self, messages: Iterable[Message]) -> int:
                return 1_000 * len(list(messages))

        ctx = _context(10, [Message.user("q")])
        made = plan(ctx, provider="anthropic", model="claude-sonnet-4-6", counter=Whole())
        assert 2_000 == made.total_tokens


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

    def test_bad_tail_ttl(self):
        """
        A tail lifetime the provider does not offer, or longer than the prefix's, is refused.
        """
        ctx = _context(5_000, [Message.user("q")])
        with pytest.raises(CacheRuleError, match="tail_ttl must be one of"):
            plan(ctx, provider="anthropic", model="claude-sonnet-4-6", tail_ttl="2h")  # type: ignore[arg-type]
        with pytest.raises(CacheRuleError, match="longer-lived breakpoint after a shorter one"):
            plan(ctx, provider="anthropic", model="claude-sonnet-4-6", prefix_ttl="5m", tail_ttl="1h")
        assert () == plan(ctx, provider="openai", model="gpt-5", tail_ttl="1h").breakpoints

    def test_bad_elapsed(self):
        """
        A negative elapsed time is refused.
        """
        ctx = _context(5_000, [Message.user("q")])
        with pytest.raises(CacheRuleError, match="elapsed must be a finite, non-negative"):
            report(ctx.freeze(), ctx, provider="anthropic", model="claude-sonnet-4-6", elapsed=-1)

    def test_rules_need_a_lifetime_per_ttl(self):
        """
        Rules that offer a TTL without a lifetime, or with a bad one, are refused.
        """
        with pytest.raises(CacheRuleError, match=r"no lifetime for \['1h'\]"):
            CacheRules(
                "p",
                explicit=True,
                max_breakpoints=4,
                lookback_blocks=20,
                minimum_tokens={},
                default_minimum=0,
                ttls=("1h", "5m"),
            )
        with pytest.raises(CacheRuleError, match=r"lifetimes\['2h'\]"):
            CacheRules(
                "p", explicit=False, max_breakpoints=0, lookback_blocks=1, minimum_tokens={}, default_minimum=0,
                lifetimes={"5m": 300, "2h": 7200},
            )  # fmt: skip
        with pytest.raises(CacheRuleError, match=r"lifetimes\['5m'\]"):
            CacheRules(
                "p", explicit=False, max_breakpoints=0, lookback_blocks=1, minimum_tokens={}, default_minimum=0,
                lifetimes={"5m": 0},
            )  # fmt: skip
        with pytest.raises(TypeError, match="lifetimes must be a mapping"):
            CacheRules(
                "p", explicit=False, max_breakpoints=0, lookback_blocks=1, minimum_tokens={}, default_minimum=0,
                lifetimes=300,  # type: ignore[arg-type]
            )  # fmt: skip
        assert {"5m": 300, "1h": 3_600} == dict(RULES["anthropic"].lifetimes)


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


class TestLayoutReuse:
    @given(
        transcripts(max_turns=6),
        st.integers(0, 30),
        st.integers(0, 6),
        st.sampled_from(["anthropic", "openai"]),
        st.booleans(),
    )
    def test_a_plan_after_another_is_the_plan_made_alone(self, transcript, cut, dropped, provider, empty):
        """
        A plan made with previous= reuses the earlier request's layout for what the two
        share; whatever they share (a grown tail, a trimmed one, a message with no block),
        it equals the plan made without it, position by position, and so do their breakpoints.
        """
        prefix = PrefixContext(system_prompt="Runbook. " * 400)
        extra = [Message("user", "")] if empty else []
        first = WorkingContext(prefix=prefix, messages=[*transcript[:cut], *extra])
        model = "claude-sonnet-4-6" if provider == "anthropic" else "gpt-5"
        before = plan(first, provider=provider, model=model)
        kept = list(first.messages)[dropped:]  # the same objects, fewer at the front: a trimmed tail
        second = WorkingContext(prefix=prefix, messages=[*kept, *transcript[cut:]])
        after = plan(second, provider=provider, model=model, previous=before)
        alone = plan(second, provider=provider, model=model)
        assert after._layout == alone._layout
        unshared = attrs.evolve(before, _signature=None)  # the same previous plan, with nothing to reuse
        assert after.breakpoints == plan(second, provider=provider, model=model, previous=unshared).breakpoints
        assert after.total_tokens == alone.total_tokens

    def test_reuse_needs_the_same_counter(self):
        """
        A counter of another name counts again: the layout follows the new counts.
        """

        class Doubled:
            name = "doubled"

            def count_message(self, message: Message) -> int:
                return 2 * len(message.text())

        ctx = WorkingContext(prefix=PrefixContext(system_prompt="Runbook. " * 400), messages=[Message.user("hi")])
        before = plan(ctx, provider="anthropic", model="claude-sonnet-4-6")
        after = plan(ctx, provider="anthropic", model="claude-sonnet-4-6", previous=before, counter=Doubled())
        assert after._layout == plan(ctx, provider="anthropic", model="claude-sonnet-4-6", counter=Doubled())._layout
        assert after.total_tokens != before.total_tokens

    def test_an_older_counter_counting_below_zero_is_refused(self):
        """
        An older counter (only count(messages)) that counts a message below zero is refused
        by name, as a message counter is: a layout's tokens never decrease.
        """

        class Old:
            def count(self, messages: Iterable[Message]) -> int:
                return -len(list(messages))

        ctx = WorkingContext(prefix=PrefixContext(system_prompt="Runbook. " * 400), messages=[Message.user("hi")])
        with pytest.raises(
            ValueError, match=r"token counter 'Old' counted -1 tokens for a message; a count is an int >= 0"
        ):
            plan(ctx, provider="anthropic", model="claude-sonnet-4-6", counter=Old())  # type: ignore[arg-type]


# -- the implicit cache's binary searches against a walk of every position --------


class _WalkedCache:
    """
    The implicit cache simulated by walking every position of every request
    (what ``SimulatedCache`` did before it searched): the reference for the law below.
    """

    def __init__(self, rules: CacheRules, minimum: int) -> None:
        self.rules, self.minimum = rules, minimum
        self.entries: dict[str, list[Any]] = {}  # key -> [tokens, used]

    def live(self, key: str, now: float) -> bool:
        entry = self.entries.get(key)
        return entry is not None and now - entry[1] <= self.rules.lifetimes["5m"]

    def send(self, layout: Any, now: float) -> tuple[int, int]:
        shared = max((p.tokens for p in layout if self.live(p.key, now)), default=0)
        expired = max((p.tokens for p in layout if p.key in self.entries and not self.live(p.key, now)), default=0)
        read = shared - (shared - self.minimum) % self.rules.step_tokens if shared >= self.minimum else 0
        for p in layout:
            if self.live(p.key, now):
                self.entries[p.key][1] = now
            else:
                self.entries[p.key] = [p.tokens, now]
        return read, max(0, expired - max(read, shared))


# Changes to a context between two requests, made by _change; each law adds its own.
_CHANGES = (
    st.tuples(st.just("turn"), st.integers(50, 900)),  # a user and an assistant message of that many tokens
    st.tuples(st.just("trim"), st.integers(1, 4)),  # drop that many of the oldest tail messages
    st.tuples(st.just("edit"), st.integers(0, 3)),  # rewrite the message that many from the end
    st.tuples(st.just("blocks"), st.integers(1, 4)),  # a user message of that many text blocks
    st.tuples(st.just("prefix"), st.integers(0, 2)),  # switch to one of three system prompts
    st.tuples(st.just("repeat"), st.integers(0, 2)),  # append again a message already in the tail
    st.tuples(st.just("blockless"), st.integers(1, 2)),  # that many messages without a block (counted, no position)
)

_steps = st.lists(
    st.one_of(
        *_CHANGES,
        st.tuples(st.just("drop"), st.integers(1, 3)),  # drop that many of the newest tail messages
        st.tuples(st.just("send"), st.sampled_from([0, 30, 299, 301, 900])),  # a request after that gap
    ),
    max_size=40,
)


@given(steps=_steps, provider=st.sampled_from(["openai", "gemini"]))
def test_implicit_cache_equals_walking_every_position(steps, provider):
    """
    For any run of requests (growing, trimmed, edited, with messages of
    several blocks or met twice, under changing system prompts, planned
    reusing the previous request's layout, with gaps past the lifetime), the
    implicit cache's searches give what walking every position
    of every request gives, entry for entry; and ``seen_before`` finds the
    longest prefix an earlier request sent.
    """
    from workingctx.cache._rules import rules_for  # noqa: PLC0415  # the private parts under test
    from workingctx.cache._served import SentPrefixes, SimulatedCache, seen_before  # noqa: PLC0415

    model = "gpt-4.1" if provider == "openai" else "gemini-2.5-flash"
    rules = rules_for(provider, model)
    ours, walked = SimulatedCache(rules, rules.minimum_for(model)), _WalkedCache(rules, rules.minimum_for(model))
    ctx = _context(1_200, [])
    seen: set[int] = set()
    prefixes = SentPrefixes()
    sent: list[Any] = []
    heads: set[int] = set()
    now, turn = 0.0, 0
    previous: CachePlan | None = None
    for kind, value in steps:
        if kind != "send":
            turn += kind == "turn"
            ctx = _change(ctx, kind, value, turn)
        else:
            now += value
            made = plan(ctx, provider=provider, model=model, previous=previous)
            assert made._layout == plan(ctx, provider=provider, model=model)._layout
            previous, layout = made, made._layout
            served = ours.send(made, now)
            assert walked.send(layout, now) == (served.read, served.expired)
            assert {k: [e.tokens, e.used] for k, e in ours.entries.items()} == walked.entries
            brute = max((p.tokens for p in layout if any(p.key in s for s in sent)), default=0)
            assert brute == seen_before(layout, seen)
            assert brute == prefixes.known(layout)
            sent.append({p.key for p in layout})
            heads.update(int(layout.head(m), 16) for m in range(layout.message_count))
            # one value per message sent, its chain value (of which its chain key is the hex form): those of
            # the messages with a position, and maybe of some without
            assert {int(key.rpartition(":")[0], 16) for keys in sent for key in keys} <= seen <= heads


def test_the_prefixes_sent_keep_a_piece_per_request_not_a_value_per_prefix():
    """
    A run cut at the front at every request sends a new prefix per message
    of every request; what the best cost keeps of them is each message once
    (its chain value in the list of messages sent) and a piece or two per
    request, so it grows with the run, not with the run times the window.
    """
    from workingctx.cache._served import SentPrefixes  # noqa: PLC0415  # the private part under test

    prefixes = SentPrefixes()
    ctx = _context(1_200, [Message.user(f"kept {i} " + _big(50)) for i in range(40)])
    previous: CachePlan | None = None
    requests = 200
    for turn in range(requests):
        ctx.append(Message.user(f"turn {turn} " + _big(50)))
        ctx.replace_tail(ctx.messages[1:])
        previous = plan(ctx, provider="anthropic", model="claude-sonnet-4-6", previous=previous)
        shared = previous._layout[len(ctx.prefix.as_messages()) - 1].tokens if turn else 0  # the prefix, once sent
        assert prefixes.known(previous._layout) == shared
    edges, pieces = [prefixes._root], 0
    while edges:
        for edge in edges.pop().values():
            pieces += len(edge.pieces)
            edges += [edge.child] if edge.child is not None else []
    assert len(prefixes._chain) == len(prefixes._messages) <= 1 + 40 + requests
    assert pieces <= 1 + requests  # the prefix, then one a request: the run of the list it moved and its new message


class _EveryPrefix:
    """
    The best cost's answer from a set of every prefix sent (what :func:`simulate` kept before its tree).
    """

    def __init__(self) -> None:
        self.seen: set[int] = set()

    def known(self, layout: Any) -> int:
        from workingctx.cache._served import seen_before  # noqa: PLC0415  # the private part under test

        return seen_before(layout, self.seen)


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
    is the one it reports keeping the chain value of every prefix ever sent.
    """
    from unittest import mock  # noqa: PLC0415

    from workingctx.cache import _simulate  # noqa: PLC0415  # the private part under test

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
    with mock.patch.object(_simulate, "SentPrefixes", _EveryPrefix):
        every = simulated()
    assert ours.requests == every.requests


# -- the explicit cache's searches against the walks it replaced ---------------------


def _walked_last_carrying(layout: Any, end: int) -> Any:
    for position in reversed(layout):
        if position.message < end and position.carries:
            return position
    return None


def _walked_marked(made: CachePlan) -> list[tuple[Any, str]]:
    """
    The marked positions of *made*, found by walking its layout (what ``_marked`` did before it searched).
    """
    ttls = {(b.message, b.block): b.ttl for b in made.breakpoints}
    found = [
        (p, ttls.get((p.message, p.block)) or p.preset or "5m")
        for p in made._layout
        if (p.message, p.block) in ttls or p.preset is not None
    ]
    if made.automatic and made._layout:
        last = _walked_last_carrying(made._layout, made._layout[-1].message + 1)
        if last is not None and all(p is not last for p, _ in found):
            found.append((last, "5m"))
    return found


def _walked_plan(
    ctx: WorkingContext, model: str, previous: CachePlan | None, automatic: bool, prefix_ttl: str, tail_ttl: str
) -> tuple[Breakpoint, ...] | str:
    """
    The breakpoints ``plan`` placed before it searched, walking maps of every
    position of a layout made afresh, or the error it raised.
    """
    rules = RULES["anthropic"]
    layout = plan(ctx, provider="openai", model="gpt-5")._layout  # the same layout, without Anthropic's checks
    size = len(ctx.prefix.as_messages())
    presets = [((p.message, p.block), p.preset) for p in layout if p.preset is not None]
    ttls = [ttl for _, ttl in sorted(presets)]
    if "5m" in ttls and "1h" in ttls[ttls.index("5m") :]:
        return "every 1h breakpoint must come before every 5m one"
    budget = rules.max_breakpoints - len(presets) - automatic
    if budget < 0:
        return "already carry"
    minimum = rules.minimum_for(model)
    chosen: dict[tuple[int, int], str] = {}

    def add(position: Any, ttl: str) -> None:
        if position is None or position.tokens < minimum or len(chosen) >= budget or position.preset is not None:
            return
        chosen.setdefault((position.message, position.block), ttl)

    add(_walked_last_carrying(layout, size), prefix_ttl)
    if previous is not None:
        here = {p.key: p for p in layout}
        reached = [here[p.key] for p, _ in _walked_marked(previous) if p.key in here]
        if reached:
            add(max(reached, key=lambda p: p.tokens), tail_ttl)
    if not automatic:
        add(_walked_last_carrying(layout, len(ctx.assembled())), tail_ttl)
    tokens = {(p.message, p.block): p.tokens for p in layout}
    last_1h = max((at for at, ttl in presets if ttl == "1h"), default=(-1, -1))
    first_5m = min((at for at, ttl in presets if ttl == "5m"), default=(len(ctx.assembled()), 0))
    ordered, seen_5m = [], False
    for at, ttl in sorted(chosen.items()):
        kept = "1h" if at < last_1h else "5m" if (seen_5m or at > first_5m) else ttl
        seen_5m = seen_5m or kept == "5m"
        ordered.append(Breakpoint(*at, kept, tokens[at]))  # type: ignore[arg-type]
    return tuple(ordered)


class _WalkedExplicitCache:
    """
    The explicit cache simulated by walking every position of every request
    (what ``SimulatedCache.send`` did before it searched): the reference for the law below.
    """

    def __init__(self, rules: CacheRules, minimum: int) -> None:
        self.rules, self.minimum = rules, minimum
        self.entries: dict[str, list[Any]] = {}  # key -> [tokens, ttl, used]

    def live(self, key: str, now: float) -> bool:
        entry = self.entries.get(key)
        return entry is not None and now - entry[2] <= self.rules.lifetimes[entry[1]]

    def send(self, made: CachePlan, now: float) -> tuple[int, int, int, int, int]:
        layout = made._layout
        if not layout:
            return 0, 0, 0, 0, 0
        index = {(p.message, p.block): i for i, p in enumerate(layout)}
        marks = [(index[(p.message, p.block)], ttl) for p, ttl in _walked_marked(made) if p.tokens >= self.minimum]
        read, hit = 0, None
        for at, _ in marks:
            for j in range(at, max(at - self.rules.lookback_blocks, -1), -1):
                if self.live(layout[j].key, now):
                    if layout[j].tokens > read:
                        read, hit = layout[j].tokens, layout[j]
                    break
        reachable = max((p.tokens for p in layout if self.live(p.key, now)), default=0)
        expired = max((p.tokens for p in layout if p.key in self.entries and not self.live(p.key, now)), default=0)
        end = max((layout[i].tokens for i, _ in marks), default=0)
        end_1h = max((layout[i].tokens for i, ttl in marks if ttl == "1h"), default=0)
        written_1h, written = max(0, end_1h - read), max(0, end - read)
        if hit is not None:
            self.entries[hit.key][2] = now
        for i, ttl in marks:
            if self.live(layout[i].key, now):
                self.entries[layout[i].key][2] = now
            else:
                self.entries[layout[i].key] = [layout[i].tokens, ttl, now]
        return read, written - written_1h, written_1h, max(0, reachable - read), max(0, expired - max(read, reachable))


def _probe(made: CachePlan, message: int, block: int, ttl: str) -> str | None:
    """
    The rule a hand-made plan with one breakpoint at *message*, *block* on the layout of
    *made* breaks (a part of its error message), or None.
    """
    try:
        CachePlan("anthropic", made.model, [Breakpoint(message, block, ttl, 10**9)], _layout=made._layout)  # type: ignore[arg-type]
    except CacheRuleError as error:
        return next(
            part for part in ("exceed", "cannot carry", "already carries", "before every 5m") if part in str(error)
        )
    return None


def _walked_probe(made: CachePlan, message: int, block: int) -> str | None:
    """
    The rule :func:`_probe` finds broken, by a map of every position (a 1h breakpoint after
    a 5m one is the only other rule a breakpoint on a free block can break).
    """
    at = {(p.message, p.block): p for p in made._layout}.get((message, block))
    if sum(p.preset is not None for p in made._layout) + 1 > RULES["anthropic"].max_breakpoints:
        return "exceed"
    if at is None or not at.carries:
        return "cannot carry"
    return "already carries" if at.preset is not None else None


def _change(ctx: WorkingContext, kind: str, value: Any, turn: int) -> WorkingContext:
    """
    *ctx* after one change of the explicit cache's law (see ``_explicit_changes``).
    """
    tail = list(ctx.messages)
    if kind == "turn":
        ctx.append(Message.user(f"{turn} " + _big(value)), Message.assistant(f"answer {turn}"))
    elif kind == "trim" and tail:
        ctx.replace_tail(tail[value:])
    elif kind == "edit" and len(tail) > value:
        tail[-1 - value] = Message.user(f"edited {turn} {value}")
        ctx.replace_tail(tail)
    elif kind == "blocks":
        ctx.append(Message("user", tuple(TextBlock(f"part {i} " + _big(300)) for i in range(value))))
    elif kind == "many":
        ctx.append(*(m for i in range(value) for m in (Message.user(f"short {i}"), Message.assistant("ok"))))
    elif kind == "thinking":
        ctx.append(Message("assistant", (TextBlock(_big(200)), *[ReasoningBlock("hm")] * value, TextBlock(""))))
    elif kind == "preset":
        ctx.append(Message("user", (TextBlock(_big(400)), TextBlock(_big(300), cache=CacheBreakpoint(value)))))
    elif kind == "prefix":
        return ctx.with_prefix(PrefixContext(system_prompt=f"prompt {value} " + _big(1_200)))
    elif kind == "repeat" and len(tail) > value:
        ctx.append(tail[-1 - value])
    elif kind == "drop" and tail:
        ctx.replace_tail(tail[:-value])
    elif kind == "blockless":
        ctx.append(*[Message.assistant(""), Message("user", ())][:value])
    return ctx


_explicit_changes = st.lists(
    st.one_of(
        *_CHANGES,
        st.tuples(st.just("many"), st.integers(5, 15)),  # that many short turns: past a breakpoint's lookback
        st.tuples(st.just("thinking"), st.integers(0, 2)),  # an answer whose last blocks cannot carry one
        st.tuples(st.just("preset"), st.sampled_from([None, "5m", "1h"])),  # a block already carrying one
        st.tuples(st.just("probe"), st.integers(0, 60)),  # a hand-made breakpoint on some block of the last plan
    ),
    max_size=4,
)
# How a request is planned: plan()'s automatic, prefix_ttl and tail_ttl, or a strategy of simulate().
_EXPLICIT_PLANS: dict[str, tuple[bool, str, str]] = {
    "plan": (False, "1h", "5m"),
    "automatic": (True, "1h", "5m"),
    "hour tail": (False, "1h", "1h"),
    "short prefix": (False, "5m", "5m"),
}
# Rounds of a few changes, each followed by a request after a gap (seconds), planned one way.
_explicit_steps = st.lists(
    st.tuples(
        _explicit_changes,
        st.sampled_from([0, 30, 299, 301, 900, 3_599, 3_601, 5_000]),
        st.sampled_from([*_EXPLICIT_PLANS, "auto", "last"]),
    ),
    min_size=1,
    max_size=12,
)


def _planned(ctx: WorkingContext, model: str, previous: CachePlan | None, how: str) -> CachePlan | str:
    """
    The request *ctx* planned *how*, or the message of the error it was refused with.
    """
    from workingctx.cache._simulate import _strategy_plan  # noqa: PLC0415  # the private part under test

    try:
        if how in _EXPLICIT_PLANS:
            automatic, prefix_ttl, tail_ttl = _EXPLICIT_PLANS[how]
            return plan(
                ctx, provider="anthropic", model=model, previous=previous, automatic=automatic,
                prefix_ttl=prefix_ttl, tail_ttl=tail_ttl,  # type: ignore[arg-type]
            )  # fmt: skip
        return _strategy_plan(how, ctx, "anthropic", model, previous, None)  # type: ignore[arg-type]
    except CacheRuleError as error:
        return str(error)


def _walked_strategy(ctx: WorkingContext, model: str, previous: CachePlan | None, how: str) -> Any:
    """
    The breakpoints and automatic flag of the request *ctx* planned *how* by walking
    every position, or a part of the message of the error it was refused with.
    """
    if how in _EXPLICIT_PLANS:
        return _walked_plan(ctx, model, previous, *_EXPLICIT_PLANS[how]), _EXPLICIT_PLANS[how][0]
    refused = _walked_plan(ctx, model, None, how == "auto", "5m", "5m")
    if isinstance(refused, str):
        return refused, how == "auto"
    if how == "auto":
        return (), True
    layout = plan(ctx, provider="openai", model="gpt-5")._layout
    rules = RULES["anthropic"]
    last = _walked_last_carrying(layout, layout[-1].message + 1) if layout else None
    room = sum(p.preset is not None for p in layout) < rules.max_breakpoints
    if room and last is not None and last.preset is None and last.tokens >= rules.minimum_for(model):
        return (Breakpoint(last.message, last.block, "5m", last.tokens),), False
    return (), False


@given(steps=_explicit_steps, model=st.sampled_from(PRICED_MODELS["anthropic"]))
def test_explicit_cache_equals_walking_every_position(steps, model):
    """
    For any run of requests (growing, trimmed, edited, with messages of several blocks, of
    blocks that cannot carry a breakpoint and of blocks already carrying one, under changing
    system prompts, planned with previous=, automatically, with other lifetimes or by the
    simulation's other strategies, with gaps past five minutes and past an hour), plans
    place the breakpoints, and refuse the requests, that walking maps of every position
    did; the explicit cache's searches serve each request as walking every position did,
    entry for entry; and a hand-made breakpoint is refused for the same rule.
    """
    from workingctx.cache._rules import rules_for  # noqa: PLC0415  # the private parts under test
    from workingctx.cache._served import SimulatedCache  # noqa: PLC0415

    rules = rules_for("anthropic", model)
    ours, walked = (
        SimulatedCache(rules, rules.minimum_for(model)),
        _WalkedExplicitCache(rules, rules.minimum_for(model)),
    )
    ctx = _context(1_200, [])
    now, turn = 0.0, 0
    previous: CachePlan | None = None
    for changes, gap, how in steps:
        for kind, value in changes:
            turn += 1
            if kind == "probe" and previous is not None and previous._layout:
                at = (value % (previous._layout[-1].message + 1), value % 3)
                for ttl in ("5m", "1h"):
                    found = _probe(previous, *at, ttl)
                    assert _walked_probe(previous, *at) == found or found == "before every 5m"
            ctx = _change(ctx, kind, value, turn)
        now += gap
        made = _planned(ctx, model, previous, how)
        expected, automatic = _walked_strategy(ctx, model, previous, how)
        if isinstance(made, str):
            assert isinstance(expected, str)
            assert expected in made
            continue
        assert expected == made.breakpoints
        assert automatic == made.automatic
        layout = plan(ctx, provider="openai", model="gpt-5")._layout  # the same layout, without Anthropic's checks
        assert layout == made._layout
        assert tuple(p for p in layout if p.preset is not None) == made._presets
        served = ours.send(made, now)
        assert walked.send(made, now) == attrs.astuple(served)
        assert {k: [e.tokens, e.ttl, e.used] for k, e in ours.entries.items()} == walked.entries
        previous = made


class TestLayoutsGrowInPlace:
    def test_a_growing_run_shares_one_layout_run_and_every_plan_keeps_its_own(self):
        """
        A plan of a context that only appended since the previous plan extends
        that plan's layout in place; each plan still reads the positions it
        had, equal to a layout made from scratch, and pickles them as a tuple.
        """
        ctx = WorkingContext(messages=[Message("system", "Be brief. " * 400)])
        plans: list[tuple[CachePlan, int]] = []
        previous = None
        for i in range(6):
            ctx.append(Message("user", f"question {i} " * 50), Message("assistant", f"answer {i} " * 50))
            previous = plan(ctx, provider="anthropic", model="claude-sonnet-4-6", previous=previous)
            plans.append((previous, ctx.size()))
        runs = {id(p._layout._run) for p, _ in plans}  # type: ignore[attr-defined]  # a Layout
        assert len(runs) == 1
        for made, size in plans:
            alone = plan(
                WorkingContext(messages=list(ctx.messages[:size])), provider="anthropic", model="claude-sonnet-4-6"
            )
            assert made._layout == alone._layout
            assert list(made._layout) == list(alone._layout)
            assert pickle.loads(pickle.dumps(made))._layout == made._layout
            assert type(pickle.loads(pickle.dumps(made))._layout) is tuple

    def test_a_trimmed_context_gets_a_layout_of_its_own(self):
        """
        After a trim the previous layout is not extended: both stay as they were.
        """
        ctx = WorkingContext(messages=[Message("user", f"q{i} " * 300) for i in range(4)])
        first = plan(ctx, provider="anthropic", model="claude-sonnet-4-6")
        before = list(first._layout)
        ctx.replace_tail(ctx.messages[2:])
        second = plan(ctx, provider="anthropic", model="claude-sonnet-4-6", previous=first)
        assert list(first._layout) == before
        assert (
            second._layout
            == plan(
                WorkingContext(messages=list(ctx.messages)), provider="anthropic", model="claude-sonnet-4-6"
            )._layout
        )

    @given(transcripts(max_turns=6), st.lists(st.integers(0, 3), max_size=40))
    def test_a_layout_reused_across_appends_and_trims_is_the_layout_from_scratch(self, run, trims):
        """
        Property: planned request by request (appends, and now and then a trim
        keeping the newest messages), every plan's layout equals one laid out
        from scratch, and stays what it was when later plans extend its list.
        """
        ctx = WorkingContext(prefix=PrefixContext("Be brief. " * 50))
        previous = None
        made: list[tuple[CachePlan, list[Any]]] = []
        for step, message in enumerate(run):
            ctx.append(message)
            drop = trims[step] if step < len(trims) else 0
            if drop and drop < ctx.size():
                ctx.replace_tail(ctx.messages[drop:])
            previous = plan(ctx, provider="anthropic", model="claude-sonnet-4-6", previous=previous)
            fresh = WorkingContext(prefix=ctx.prefix, messages=list(ctx.messages))
            assert previous._layout == plan(fresh, provider="anthropic", model="claude-sonnet-4-6")._layout
            made.append((previous, list(previous._layout)))
        for each, positions in made:
            assert list(each._layout) == positions

    def test_threads_growing_one_layout_each_get_their_own_request(self):
        """
        Threads planning different requests that all grow one previous plan,
        at once: one of them may grow its layout in place, the others copy;
        each gets the layout of its own request, and the previous plan keeps its own.
        """
        base = WorkingContext(prefix=PrefixContext("Be brief. " * 200))
        base.append(*[Message.user(f"question {i} " * 40) for i in range(30)])
        first = plan(base, provider="anthropic", model="claude-sonnet-4-6")
        before = list(first._layout)
        contexts = []
        for n in range(8):
            ctx = base.fork()
            ctx.append(*[Message.assistant(f"answer {n}.{j} " * (n + 1)) for j in range(n + 1)])
            contexts.append(ctx)
        start = threading.Barrier(len(contexts))

        def planned(ctx: WorkingContext) -> CachePlan:
            start.wait()
            return plan(ctx, provider="anthropic", model="claude-sonnet-4-6", previous=first)

        for _ in range(20):
            with ThreadPoolExecutor(len(contexts)) as pool:
                made = list(pool.map(planned, contexts))
            for ctx, each in zip(contexts, made, strict=True):
                fresh = WorkingContext(prefix=ctx.prefix, messages=list(ctx.messages))
                assert list(each._layout) == list(plan(fresh, provider="anthropic", model="claude-sonnet-4-6")._layout)
            assert list(first._layout) == before


# -- a message's layout, worked out once -----------------------------------------------


def _layout_of(messages: list[Message]) -> tuple[Any, Any]:
    from workingctx.cache._layout import lay_out  # noqa: PLC0415  # the private part under test
    from workingctx.tokens import ApproxTokenCounter  # noqa: PLC0415

    layout, presets = lay_out(messages, ApproxTokenCounter())
    return tuple(layout), presets


@given(st.lists(messages(), max_size=6))
def test_a_layout_from_kept_shapes_equals_one_from_fresh_messages(batch):
    """
    A message keeps how it lays out after its first layout: laying out the
    same messages again, or equal messages that were never laid out, or the
    messages unpickled, gives the same positions and presets.
    """
    first = _layout_of(batch)
    assert _layout_of(batch) == first
    fresh = [attrs.evolve(m) for m in batch]
    assert all(m._cache_shape is None for m in fresh)
    assert _layout_of(fresh) == first
    assert _layout_of(pickle.loads(pickle.dumps(batch))) == first


def test_a_message_unpickled_without_the_shape_slot_lays_out():
    """
    A message pickled by a version whose messages had no layout cache
    (its state lacks the slot) is laid out like any other.
    """
    message = Message.assistant(
        [TextBlock("Checking.", cache=CacheBreakpoint("1h"))], tool_calls=[ToolCall("c1", "lookup", {"q": 1})]
    )
    state = message.__getstate__()
    state.pop("_cache_shape")
    old = Message.__new__(Message)
    old.__setstate__(state)
    with pytest.raises(AttributeError):
        _ = old._cache_shape
    assert _layout_of([old]) == _layout_of([message])
    assert _layout_of([old])[1][0].preset == "1h"


# -- a layout read from its lists against positions made one by one ------------------


def _positions_one_by_one(request: list[Message], counter: Any) -> list[tuple[int, int, int, bool, str, Any]]:
    """
    Every position of *request* made as the layout's definition says, block by
    block: the key of a block is the hex form of the chain value of the
    request through its message, ":" and its index, the chain value a
    polynomial over the first 128 bits of the messages' digests (without
    breakpoints), ``V(m) = (V(m - 1) * B + d(m)) mod (2**127 - 1)`` from ``V(-1) = R``.
    """
    import hashlib  # noqa: PLC0415

    from workingctx.cache._layout import _unmarked  # noqa: PLC0415  # the definition under test

    prime = 2**127 - 1
    base = int(hashlib.sha256(b"workingctx.cache.layout base").hexdigest()[:32], 16) % prime
    value = int(hashlib.sha256(b"workingctx.cache.layout").hexdigest()[:32], 16) % prime
    out = []
    before = 0
    for m, message in enumerate(request):
        tokens = counter.count([message])
        value = (value * base + int(_unmarked(message).digest()[:32], 16)) % prime
        blocks = cache_blocks(message)
        for k, block in enumerate(blocks):
            carries = can_carry_breakpoint(block)
            mark = getattr(block, "cache", None) if carries else None
            preset = None if mark is None else mark.ttl
            out.append((m, k, before + tokens * (k + 1) // len(blocks), carries, f"{hex(value)}:{k}", preset))
        before += tokens
    return out


_layout_messages = st.lists(
    st.one_of(
        st.builds(lambda n: Message.user("w " * n), st.integers(0, 60)),
        st.builds(lambda n: Message("user", tuple(TextBlock(f"part {i} ") for i in range(n))), st.integers(0, 4)),
        st.builds(
            lambda ttl: Message("user", (TextBlock("a " * 9), TextBlock("b " * 9, cache=CacheBreakpoint(ttl)))),
            st.sampled_from(["5m", "1h"]),
        ),
        st.builds(
            lambda n: Message.assistant("", tool_calls=[ToolCall(f"c{i}", "f") for i in range(n)]), st.integers(0, 3)
        ),
        st.just(Message("assistant", (ReasoningBlock("hm"), TextBlock("")))),
    ),
    max_size=12,
)


_front_cuts = st.lists(
    st.tuples(
        st.integers(0, 3),
        st.integers(0, 12),
        st.integers(0, 3),
        _layout_messages,
        st.sampled_from(["none", "leading", "run"]),
    ),
    max_size=4,
)
"""Cuts of a request's front: how many leading messages stay, how many after them go, how many
of its last messages go, the messages appended after, and which messages are equal copies
rather than the same objects: none, the leading ones (as a prefix is), or those of the run after its first."""


@given(first=_layout_messages, kept=st.integers(0, 12), more=_layout_messages, again=_layout_messages, cuts=_front_cuts)
def test_a_layout_reads_what_positions_made_one_by_one_hold(first, kept, more, again, cuts):
    """
    For any requests, each made of the one before cut after *kept* messages
    (shared or not) and grown, or with its front cut (some leading messages
    kept, then a run of the messages after them, maybe short of the last
    ones, then new ones; the same objects or equal copies): the layout, laid out alone or reusing the previous
    layout, holds the positions made one by one from the definition; its
    keys, tokens, message heads, binary searches and found positions agree
    with them; and every earlier layout still reads what it held.
    """
    from workingctx.cache._layout import (  # noqa: PLC0415  # the private parts under test
        AT,
        MESSAGE_OF,
        TOKENS_OF,
        bisect_left,
        bisect_right,
        find_position,
        keys,
        lay_out,
    )
    from workingctx.tokens import ApproxTokenCounter  # noqa: PLC0415

    counter = ApproxTokenCounter()
    # each request, with the count of its leading messages a caller vouches for (None: the same objects)
    requests: list[tuple[list[Message], int | None]] = [
        (first, None),
        (first[:kept] + more, None),
        (first[:kept] + more + again, None),
        (again, None),
    ]
    for leading, drop, trim, extra, copies in cuts:
        last = requests[-1][0]
        lead = min(leading, len(last))
        front, run = last[:lead], last[lead + drop : max(lead, len(last) - trim)]
        if copies == "leading":
            front = [attrs.evolve(m) for m in front]
        elif copies == "run":
            run = run[:1] + [attrs.evolve(m) for m in run[1:]]
        requests.append((front + run + extra, lead if copies == "leading" else None))
    layouts: list[Any] = []
    held: list[list[Any]] = []
    previous, presets, sent = None, (), []
    for request, vouched in requests:
        expected = _positions_one_by_one(request, counter)
        alone, alone_presets = lay_out(request, counter)
        if previous is None:
            made, made_presets = alone, alone_presets
        else:
            # the messages this request shares with the one before, as plan() finds them
            shared = next((i for i, (a, b) in enumerate(zip(request, sent, strict=False)) if a is not b), None)
            shared = min(len(request), len(sent)) if shared is None else shared
            made, made_presets = lay_out(request, counter, previous, shared if vouched is None else vouched, presets)
        for layout, found_presets in ((alone, alone_presets), (made, made_presets)):
            assert [attrs.astuple(p) for p in layout] == [tuple(e) for e in expected]
            assert [attrs.astuple(p) for p in found_presets] == [tuple(e) for e in expected if e[5] is not None]
            assert list(keys(layout)) == [e[4] for e in expected]
            assert layout.tokens()[: len(layout)] == [e[2] for e in expected]
            assert layout.message_count == len(request)
            assert [layout.head(m) for m, _ in enumerate(request) if any(e[0] == m for e in expected)] == [
                e[4].rpartition(":")[0] for e in expected if e[1] == 0
            ]
            assert list(reversed(layout)) == list(layout)[::-1]
            assert layout[1:-1] == list(layout)[1:-1]
            plain = tuple(layout)
            for m in range(len(request) + 2):
                for k in range(-1, 4):
                    at = find_position(layout, m, k)
                    assert at == find_position(plain, m, k)
                    assert at is None or AT(layout[at]) == (m, k)
                    for search in (bisect_left, bisect_right):
                        assert search(layout, (m, k), AT) == search(plain, (m, k), AT)
                for search in (bisect_left, bisect_right):
                    assert search(layout, m, MESSAGE_OF) == search(plain, m, MESSAGE_OF)
            for tokens in {0, 1, *(e[2] for e in expected), 10**9}:
                for search in (bisect_left, bisect_right):
                    assert search(layout, tokens, TOKENS_OF) == search(plain, tokens, TOKENS_OF)
        layouts.append(made)
        held.append([attrs.astuple(p) for p in made])
        previous, presets, sent = made, made_presets, request
    for layout, positions in zip(layouts, held, strict=True):  # a later layout grown in place changed none
        assert [attrs.astuple(p) for p in layout] == positions


def test_a_cut_front_lays_out_only_the_messages_after_the_run_it_shares(monkeypatch):
    """
    A request that keeps a previous request's first messages, then a run of
    its later ones (its front cut), then new ones, lays out only the new ones
    one by one; the rest are moved from the previous layout, which still
    reads what it held, and the layout equals the one laid out alone.
    """
    from workingctx.cache import _layout  # noqa: PLC0415  # the private parts under test
    from workingctx.tokens import ApproxTokenCounter  # noqa: PLC0415

    counter = ApproxTokenCounter()
    system = Message.system("Be brief.")
    tail = [Message.user(f"question {i}", id=i) for i in range(40)]
    marked = Message("user", (TextBlock("pinned " * 9, cache=CacheBreakpoint("1h")),))
    first = [system, *tail[:20], marked, *tail[20:]]
    previous, presets = _layout.lay_out(first, counter)
    held = list(previous)
    new = [Message.assistant("answer"), Message.user("next")]
    request = [attrs.evolve(system), *first[11:], *new]  # an equal system message, ten dropped after it
    shaped: list[Message] = []
    shape = _layout._shape

    def counted(message: Message) -> Any:
        shaped.append(message)
        return shape(message)

    monkeypatch.setattr(_layout, "_shape", counted)
    made, made_presets = _layout.lay_out(request, counter, previous, 1, presets)
    assert shaped == new
    monkeypatch.undo()
    alone, alone_presets = _layout.lay_out(request, counter)
    assert list(made) == list(alone)
    assert made_presets == alone_presets
    assert [p.message for p in made_presets] == [request.index(marked)]
    assert list(previous) == held


def test_a_layout_refuses_an_index_out_of_range():
    from workingctx.cache._layout import lay_out  # noqa: PLC0415  # the private parts under test
    from workingctx.tokens import ApproxTokenCounter  # noqa: PLC0415

    layout, _ = lay_out([Message.user("hi"), Message.assistant("")], ApproxTokenCounter())
    assert len(layout) == 1
    assert layout.message_count == 2
    with pytest.raises(IndexError, match=r"layout index 1 out of range for 1 positions"):
        layout[1]
    with pytest.raises(IndexError, match=r"layout message 2 out of range for 2 messages"):
        layout.head(2)


def test_a_cut_front_reuses_only_the_same_messages_not_equal_ones():
    """
    An equal message is not always the same request: ``1 == 1.0`` in a call's
    arguments, yet their bytes, digests and tokens differ. A request whose
    front was cut, holding such a copy of a later message, is laid out as if
    from scratch: the simulated cache serves what a provider would.
    """
    from workingctx.cache._rules import RULES  # noqa: PLC0415  # the private parts under test
    from workingctx.cache._served import SimulatedCache  # noqa: PLC0415

    prefix = PrefixContext(system_prompt="Rules. " * 800)
    first, question = Message.user("x " * 300), Message.user("c " * 400)
    call = Message.assistant("b", tool_calls=[ToolCall("c1", "f", {"x": 1, "flags": [True] * 40})])
    copy = Message.assistant("b", tool_calls=[ToolCall("c1", "f", {"x": 1.0, "flags": [1] * 40})])
    assert copy == call
    assert copy.digest() != call.digest()
    result = Message.tool("d " * 100, call_id="c1")

    def ctx(*messages: Message) -> WorkingContext:
        made = WorkingContext(prefix=prefix)
        made.append(*messages)
        return made

    served = []
    for reuse in (True, False):
        cache = SimulatedCache(RULES["anthropic"], 1024)
        p0 = plan(ctx(question, call, result), provider="anthropic", model="claude-sonnet-4-6")
        cache.send(p0)
        p1 = plan(ctx(first, question, call, result), provider="anthropic", model="claude-sonnet-4-6", previous=p0)
        cache.send(p1)
        previous = p1 if reuse else attrs.evolve(p1, _signature=None)  # no signature: nothing to reuse
        later = ctx(question, copy, result)
        p2 = plan(later, provider="anthropic", model="claude-sonnet-4-6", previous=previous)
        served.append((cache.send(p2), p2.total_tokens))
        p2.apply(later.assembled())
    assert served[0] == served[1]


def test_a_simulated_cache_holds_entries_of_keys_of_any_form():
    """
    A simulated cache given entries under keys that are not a layout's own
    (the hex form of a chain value) holds them, and a request's layout, whose
    keys are never of their form, reads none of them.
    """
    from workingctx.cache._served import SimulatedCache, _Entry  # noqa: PLC0415  # the private part under test

    ctx = _context(1_200, [Message.user(_big(2_000)), Message.assistant("ok")])
    made = plan(ctx, provider="anthropic", model="claude-sonnet-4-6")
    keys = {f"{head}:0" for head in ("custom", "0x0abc", "0XABC", "ab54e2", "0xzz")}
    cache = SimulatedCache(RULES["anthropic"], 1024, entries={key: _Entry(5_000, "5m", 0.0) for key in keys})
    assert cache.send(made).read == 0
    assert set(cache.entries) >= keys
