"""
Tests for the simulated provider cache: what it serves each request, implicit or explicit,
equals what walking every position of every request served, and what it keeps of the prefixes sent.
"""

from __future__ import annotations

from typing import Any

import attrs
from hypothesis import given
from hypothesis import strategies as st

from tests.cache.contexts import PRICED_MODELS, _big, _context
from workingctx import Message, PrefixContext, WorkingContext
from workingctx.cache import RULES, Breakpoint, CachePlan, CacheRules, plan
from workingctx.cache._plan import marked_positions
from workingctx.exceptions import CacheRuleError
from workingctx.messages import CacheBreakpoint, ReasoningBlock, TextBlock

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
            assert brute == prefixes.sent(layout)[0]
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
        assert prefixes.sent(previous._layout)[0] == shared
    edges, pieces = [prefixes._root], 0
    while edges:
        for edge in edges.pop().values():
            pieces += len(edge.pieces)
            edges += [edge.child] if edge.child is not None else []
    assert len(prefixes._chain) == len(prefixes._messages) <= 1 + 40 + requests
    assert pieces <= 1 + requests  # the prefix, then one a request: the run of the list it moved and its new message


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
        if last is not None and all(p != last for p, _ in found):  # positions are values: a Layout makes them
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
    entry for entry, whether or not it bounds its walk by the prefixes sent before, and
    says what an earlier request sent as a set of every prefix does; and a hand-made
    breakpoint is refused for the same rule.
    """
    from workingctx.cache._rules import rules_for  # noqa: PLC0415  # the private parts under test
    from workingctx.cache._served import SimulatedCache, seen_before  # noqa: PLC0415

    rules = rules_for("anthropic", model)
    seen: set[int] = set()  # the chain value of every prefix sent
    ours, walked = (
        SimulatedCache(rules, rules.minimum_for(model)),
        _WalkedExplicitCache(rules, rules.minimum_for(model)),
    )
    unbounded = SimulatedCache(rules, rules.minimum_for(model), prefixes=False)  # walks every message
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
        # the planner builds plans without the constructor's checks: each passes them, and is the plan they build
        assert attrs.evolve(made) == made
        implicit = plan(ctx, provider="openai", model="gpt-5")
        assert attrs.evolve(implicit) == implicit
        layout = implicit._layout  # the same layout, without Anthropic's checks
        assert layout == made._layout
        assert tuple(p for p in layout if p.preset is not None) == made._presets
        marked = marked_positions(made)  # made with the plan, when the plan marked every one
        assert [(p, ttl) for _i, p, ttl in marked] == _walked_marked(made)
        assert [layout[i] for i, _p, _ttl in marked] == [p for _i, p, _ttl in marked]
        served = ours.send(made, now)
        *usage, known = attrs.astuple(served)
        assert walked.send(made, now) == tuple(usage)
        assert seen_before(made._layout, seen) == known
        assert attrs.evolve(unbounded.send(made, now), known=known) == served
        assert {k: [e.tokens, e.ttl, e.used] for k, e in ours.entries.items()} == walked.entries
        previous = made


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
