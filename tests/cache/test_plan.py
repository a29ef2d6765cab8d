"""
Tests for cache plans: breakpoints placed to obey each provider's rules, the plans refused,
a plan applied to its request, and a plan reusing the layout of the plan before it.
"""

from __future__ import annotations

from collections.abc import Iterable

import attrs
import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.cache.contexts import PerMessage, _big, _context
from tests.strategies import messages, transcripts
from workingctx import Message, PrefixContext, ToolCall, WorkingContext
from workingctx.cache import RULES, Breakpoint, CachePlan, cache_blocks, can_carry_breakpoint, plan, report
from workingctx.exceptions import CacheRuleError
from workingctx.messages import CacheBreakpoint, ImageBlock, MediaRef, ReasoningBlock, TextBlock, ToolCallBlock

ANTHROPIC_MODELS = [*RULES["anthropic"].minimum_tokens, "claude-unknown-9"]


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

    def test_a_plan_unpickled_without_its_marked_positions_plans_the_next_request(self):
        """
        A plan pickled by a version that did not keep its marked positions
        (its state has no ``_marked``) serves as the previous plan as the plan itself does.
        """
        ctx = _context(3_000, [Message.user("q " * 2_000), Message.assistant("a " * 2_000)])
        made = plan(ctx, provider="anthropic", model="claude-sonnet-4-6")
        state = made.__getstate__()
        del state["_marked"]
        old = CachePlan.__new__(CachePlan)
        old.__setstate__(state)
        ctx.append(Message.user("more " * 2_000))
        again = plan(ctx, provider="anthropic", model="claude-sonnet-4-6", previous=old)
        same = plan(ctx, provider="anthropic", model="claude-sonnet-4-6", previous=made)
        assert again.breakpoints == same.breakpoints
        assert len(again.breakpoints) == 3


class TestRuleValues:
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


class TestExpiry:
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
