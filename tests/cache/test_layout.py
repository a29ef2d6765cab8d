"""
Tests for a request's layout as the cache sees it: its blocks, tokens and keys, worked out
once per message, read from its lists, reused across requests and grown in place.
"""

from __future__ import annotations

import pickle
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import attrs
import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.strategies import messages, transcripts
from workingctx import Message, PrefixContext, ToolCall, WorkingContext
from workingctx.cache import CachePlan, cache_blocks, can_carry_breakpoint, plan
from workingctx.messages import CacheBreakpoint, ReasoningBlock, TextBlock


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
            assert [layout.token(i) for i in range(len(layout))] == [e[2] for e in expected]
            assert [layout.message_at(i) for i in range(len(layout))] == [e[0] for e in expected]
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


def test_a_front_cut_again_and_again_keeps_the_lists_and_one_piece():
    """
    A run cut at the front at every request and grown at its end keeps the
    chain numbers, token ends and positions' tokens and messages its moved
    messages had (the cut copies them, computing nothing per message or
    block: the run's bases move instead) and one lifted piece however many
    cuts came before, and every layout equals the one laid out alone, keys included.
    """
    from workingctx.cache import _layout  # noqa: PLC0415  # the private parts under test
    from workingctx.tokens import ApproxTokenCounter  # noqa: PLC0415

    counter = ApproxTokenCounter()
    system = Message.system("Be brief.")
    messages = [Message.user(f"question {i}", id=i) for i in range(600)]
    request = [system, *messages[:50]]
    previous, presets = _layout.lay_out(request, counter)
    for i in range(50, 600, 2):
        request = [system, *request[3:], *messages[i : i + 2]]  # two dropped after the system message, two added
        made, presets = _layout.lay_out(request, counter, previous, 1, presets)
        run, before = made._run, previous._run
        assert run.values[1:-2] == before.values[3 : previous.message_count]
        assert run.ends[1:-2] == before.ends[3 : previous.message_count]
        assert run.tokens[1:-2] == before.tokens[3 : len(previous)]  # one block a message
        assert run.messages[1:-2] == before.messages[3 : len(previous)]
        assert len(run.starts) == 1
        alone, _ = _layout.lay_out(request, counter)
        assert list(made) == list(alone)
        assert [made.head(m) for m in range(len(request))] == [alone.head(m) for m in range(len(request))]
        previous = made


@given(reads=st.lists(st.tuples(st.booleans(), st.integers(0, 80), st.integers(0, 80), st.integers(0, 3)), max_size=30))
def test_a_cut_run_reads_each_chain_value_as_laid_out_alone_in_any_order(reads):
    """
    Property: the chain values of a run cut at the front (lifted as they are
    read, and kept) read one at a time or over any range, in any order, with
    the run grown in place between reads, are those of the request laid out
    alone.
    """
    from workingctx.cache import _layout  # noqa: PLC0415  # the private parts under test
    from workingctx.tokens import ApproxTokenCounter  # noqa: PLC0415

    counter = ApproxTokenCounter()
    system = Message.system("Be brief.")
    messages = [Message.user(f"question {i}", id=i) for i in range(200)]
    first, presets = _layout.lay_out([system, *messages[:60]], counter)
    request = [system, *messages[5:60]]
    layout, _ = _layout.lay_out(request, counter, first, 1, presets)
    run = layout._run
    assert run.starts  # lifted
    added = 60
    for single, start, stop, grow in reads:
        if grow:  # the next request appends in place to the run
            request = [*request, *messages[added : added + grow]]
            layout, _ = _layout.lay_out(request, counter, layout, len(request) - grow, ())
            assert layout._run is run
            added += grow
        expected = [int(_layout.layout_key(request[: m + 1]), 16) for m in range(len(request))]
        low, high = min(start, len(request)), min(stop, len(request))
        if single:
            assert [run.value(m) for m in range(low, high)] == expected[low:high]
        else:
            assert run.values_between(low, high) == expected[low:high]


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
