"""
Cache plans: where a request asks the provider to cache (:class:`Breakpoint`,
:class:`CachePlan`), placed by :func:`plan` to obey the provider's rules, and
OpenAI's :func:`prompt_cache_key`.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from operator import is_not
from typing import Any, NamedTuple, overload

import attrs

from workingctx import _checks
from workingctx.cache._layout import (
    AT,
    MESSAGE_OF,
    Layout,
    Position,
    bisect_left,
    cache_blocks,
    find_position,
    is_layout_key,
    last_tokens,
    lay_out,
)
from workingctx.cache._rules import TTL, TTL_ORDER, CacheRules, rules_for
from workingctx.context import TailView, WorkingContext
from workingctx.exceptions import ArgumentTypeError, CacheRuleError
from workingctx.messages import CacheBreakpoint, ContentBlock, Message, TextBlock, ToolCall, ToolCallBlock
from workingctx.snapshot import FrozenContext
from workingctx.tokens import ApproxTokenCounter, MessageCounter

__all__ = [
    "Breakpoint",
    "CachePlan",
    "last_carrying_index",
    "marked_positions",
    "plan",
    "prompt_cache_key",
]

_nonneg = _checks.count(error=CacheRuleError)


@attrs.frozen
class Breakpoint:
    """
    A cache breakpoint: cache the request up to and including one block.

    Attributes:
        message: The message's index in the assembled request (prefix messages first).
        block: The block's index in :func:`cache_blocks` of that message.
        ttl: ``"5m"`` or ``"1h"``.
        tokens: Request tokens up to and including the block.
    """

    message: int = attrs.field(validator=_nonneg)
    block: int = attrs.field(validator=_nonneg)
    ttl: TTL = attrs.field()
    tokens: int = attrs.field(validator=_nonneg)


def _presets(positions: Iterable[Position]) -> list[tuple[tuple[int, int], TTL]]:
    """
    The breakpoints the request's blocks already carry, as ((message, block), ttl),
    of its positions (all of them, or those carrying one).
    """
    return [((p.message, p.block), p.preset) for p in positions if p.preset is not None]


def _carrying_presets(plan: CachePlan) -> tuple[Position, ...]:
    """
    The positions of *plan*'s layout whose blocks already carry a breakpoint,
    when the plan was not given them (:func:`lay_out` finds them as it goes).
    """
    layout = plan._layout
    if isinstance(layout, Layout):
        facts = layout._run.facts
        return tuple(layout[i] for i in range(len(layout)) if facts[i][1] is not None)
    return tuple(p for p in layout if p.preset is not None)


def _check_ttl_order(where: str, marks: Sequence[tuple[tuple[int, int], TTL]]) -> None:
    seen_5m: tuple[int, int] | None = None
    for at, ttl in sorted(marks):
        if ttl == "5m" and seen_5m is None:
            seen_5m = at
        elif ttl == "1h" and seen_5m is not None:
            msg = (
                f"{where}: the 1h breakpoint at message {at[0]} block {at[1]} comes after the 5m one at "
                f"message {seen_5m[0]} block {seen_5m[1]}; every 1h breakpoint must come before every 5m one"
            )
            raise CacheRuleError(msg)


def _breakpoints(value: Iterable[Breakpoint]) -> tuple[Breakpoint, ...]:
    if type(value) is tuple and all(type(point) is Breakpoint for point in value):
        return value  # what plan() gives: checked without the protocol checks below
    if isinstance(value, str | bytes) or not isinstance(value, Iterable):
        raise _checks.wrong_type(value, "breakpoints", "a sequence of Breakpoint values")
    points = tuple(value)
    for position, point in enumerate(points):
        if not isinstance(point, Breakpoint):
            msg = f"breakpoints hold {_checks.described(point)}, not a Breakpoint"
            raise ArgumentTypeError(msg, argument=f"breakpoints[{position}]", value=point, expected="a Breakpoint")
    return points


@attrs.frozen
class CachePlan:
    """
    Where one request asks the provider to cache, and what a writer needs to apply it.

    Attributes:
        provider: The provider whose rules the plan obeys.
        model: The model it was planned for (minimums differ by model).
        breakpoints: Explicit breakpoints in request order, one-hour ones first.
        automatic: Whether the request also asks for the provider's automatic
            breakpoint (Anthropic's top-level ``cache_control``), which counts
            against the limit; for OpenAI and Gemini, whether implicit caching applies.
        cache_key: For OpenAI, a ``prompt_cache_key`` derived from the prefix digest.
        total_tokens: The request's input tokens.
        prefix_messages: How many leading messages of the request are the prefix.

    Raises:
        CacheRuleError: the plan breaks a rule of its provider (too many
            breakpoints, out of order, one-hour after five-minute, below the
            model's minimum, or on a block that cannot carry one).
    """

    provider: str
    model: str
    breakpoints: tuple[Breakpoint, ...] = attrs.field(converter=_breakpoints)
    automatic: bool = False
    cache_key: str | None = None
    total_tokens: int = 0
    prefix_messages: int = 0
    _layout: Sequence[Position] = attrs.field(default=(), eq=False, repr=False, alias="_layout")
    # what a later plan() needs to reuse this layout (with prefix_messages): the
    # prefix digest and the counter's name, and the request's tail messages
    _signature: tuple[str, str] | None = attrs.field(default=None, eq=False, repr=False, alias="_signature")
    _tail: Sequence[Message] = attrs.field(default=(), eq=False, repr=False, alias="_tail")
    # the positions of the layout whose blocks already carry a breakpoint, in order
    _presets: tuple[Position, ...] = attrs.field(
        default=attrs.Factory(_carrying_presets, takes_self=True), eq=False, repr=False, alias="_presets"
    )
    # marked_positions() of this plan, made when first asked (the cache serving
    # the request and the next plan both ask)
    _marked: tuple[tuple[int, Position, TTL], ...] | None = attrs.field(default=None, init=False, eq=False, repr=False)

    def __attrs_post_init__(self) -> None:
        rules = rules_for(self.provider, self.model)
        where = f"cache plan for {self.provider} {self.model}"
        # Only Anthropic reads breakpoints set on blocks; the others cache on their own.
        presets = _presets(self._presets) if rules.explicit else []
        count = len(self.breakpoints) + len(presets) + (1 if self.automatic and rules.explicit else 0)
        if count > rules.max_breakpoints:
            msg = (
                f"{where}: {count} breakpoints ({len(presets)} already on blocks, automatic included) exceed "
                f"the {rules.max_breakpoints} {self.provider} allows; drop some"
            )
            raise CacheRuleError(msg)
        minimum = rules.minimum_for(self.model)
        previous: Breakpoint | None = None
        for point in self.breakpoints:
            if point.ttl not in rules.ttls:
                msg = f"{where}: ttl {point.ttl!r} is not one of {list(rules.ttls)}"
                raise CacheRuleError(msg)
            if point.tokens < minimum:
                msg = (
                    f"{where}: breakpoint at message {point.message} block {point.block} caches {point.tokens} "
                    f"tokens, below the {minimum}-token minimum of {self.model}; it would cache nothing"
                )
                raise CacheRuleError(msg)
            if previous is not None and (point.message, point.block) <= (previous.message, previous.block):
                msg = f"{where}: breakpoints must be in request order without repeats, got {self.breakpoints!r}"
                raise CacheRuleError(msg)
            if self._layout:
                found = find_position(self._layout, point.message, point.block)
                facts = None if found is None else _facts_at(self._layout, found)
                if facts is None or not facts[0]:
                    msg = (
                        f"{where}: message {point.message} block {point.block} cannot carry a breakpoint "
                        "(missing, empty text, thinking, citation, audio, video, data or a provider block); "
                        "put it on the last text, image, document, tool call or tool result before it"
                    )
                    raise CacheRuleError(msg)
                if facts[1] is not None:
                    msg = f"{where}: message {point.message} block {point.block} already carries a breakpoint"
                    raise CacheRuleError(msg)
            previous = point
        _check_ttl_order(where, [((b.message, b.block), b.ttl) for b in self.breakpoints] + presets)

    def marks(self) -> dict[int, dict[int, TTL]]:
        """
        The breakpoints as ``{message index: {block index: ttl}}``, for a writer.
        """
        out: dict[int, dict[int, TTL]] = {}
        for point in self.breakpoints:
            out.setdefault(point.message, {})[point.block] = point.ttl
        return out

    def apply(self, messages: Sequence[Message]) -> list[Message]:
        """
        The request's messages with the plan's breakpoints set on their blocks
        (``cache=CacheBreakpoint(ttl)``), ready for an adapter to write.

        Text content becomes a :class:`~workingctx.messages.TextBlock` (inside the
        result, on a tool result); when a tool call
        carries a breakpoint, the message's tool calls become
        :class:`~workingctx.messages.ToolCallBlock` content in the same order. Other
        messages are returned as they are. The automatic breakpoint and
        OpenAI's ``cache_key`` are request options: :attr:`automatic`,
        :attr:`cache_key`.

        Raises:
            CacheRuleError: *messages* are not the request the plan was made for
                (pass ``ctx.assembled()`` of the planned context).
        """
        checked = list(messages)
        for position, message in enumerate(checked):
            if not isinstance(message, Message):
                msg = f"apply() needs the request's messages, got {message!r} at {position}"
                raise ArgumentTypeError(msg, argument=f"messages[{position}]", value=message, expected="a Message")
        if self._layout and not is_layout_key(checked, self._layout[-1].key.rsplit(":", 1)[0]):
            msg = (
                "apply(): these messages are not the request the plan was made for; "
                "pass ctx.assembled() of the context given to plan()"
            )
            raise CacheRuleError(msg)
        for m, marked in self.marks().items():
            checked[m] = _marked_message(checked[m], marked)
        return checked


def _facts_at(layout: Sequence[Position], index: int) -> tuple[bool, TTL | None]:
    """
    Whether the block at *index* of *layout* can carry a breakpoint, and the lifetime of one it carries.
    """
    if isinstance(layout, Layout):
        return layout._run.facts[index]
    position = layout[index]
    return position.carries, position.preset


def last_carrying_index(layout: Sequence[Position], end: int) -> int | None:
    """
    The index in *layout* of the last position that can carry a breakpoint
    among the first *end* messages, or None.
    """
    stop = bisect_left(layout, end, MESSAGE_OF)
    if isinstance(layout, Layout):
        facts = layout._run.facts
        for i in range(stop - 1, -1, -1):
            if facts[i][0]:  # the block can carry a breakpoint
                return i
        return None
    for i in range(stop - 1, -1, -1):
        if layout[i].carries:
            return i
    return None


def marked_positions(request: CachePlan) -> tuple[tuple[int, Position, TTL], ...]:
    """
    The positions of *request* that carry a breakpoint, with their indices in
    its layout and their lifetimes, in layout order: the plan's, those already
    on blocks, and the automatic one (last). Made once per plan.
    """
    marked = getattr(request, "_marked", None)  # a plan unpickled from a version without it has none
    if marked is None:
        marked = tuple(_marked_positions(request))
        object.__setattr__(request, "_marked", marked)
    return marked


def _marked_positions(request: CachePlan) -> list[tuple[int, Position, TTL]]:
    layout = request._layout
    if not layout:
        return []
    ttls: dict[tuple[int, int], TTL] = {(b.message, b.block): b.ttl for b in request.breakpoints}
    at = [*ttls, *((p.message, p.block) for p in request._presets)]
    indices = sorted({i for i in (find_position(layout, m, k) for m, k in at) if i is not None})
    positions = [layout[i] for i in indices]  # each made once: a position's key is made when it is
    found = [(i, p, ttls.get(AT(p)) or p.preset or "5m") for i, p in zip(indices, positions, strict=True)]
    if request.automatic and rules_for(request.provider, request.model).explicit:
        last = last_carrying_index(layout, layout[-1].message + 1)
        if last is not None and last not in indices:
            found.append((last, layout[last], "5m"))
    return found


def _planned_layout(
    messages: Sequence[Message],
    counter: MessageCounter,
    previous: CachePlan | None,
    prefix: tuple[str, int],
    tail: Sequence[Message],
) -> tuple[tuple[Layout, tuple[Position, ...]], tuple[str, str] | None, Sequence[Message]]:
    """
    The layout of a request whose prefix has the digest and message count
    *prefix*, with its positions carrying a breakpoint (see :func:`lay_out`),
    reusing what it shares with the request *previous* was planned
    for (the same prefix, then the same message objects, counted by a
    counter of the same name); with what a later plan needs to reuse it.
    """
    name = getattr(counter, "name", None)
    if not isinstance(name, str):  # an older counter without a name: nothing to match on
        return lay_out(messages, counter), None, ()
    digest, size = prefix
    signature = (digest, name)
    if previous is None or previous._signature != signature or previous.prefix_messages != size:
        return lay_out(messages, counter), signature, tail
    old = previous._tail
    if isinstance(old, TailView) and isinstance(tail, TailView) and tail.extends(old):
        shared = len(old)  # the context only appended since: told in O(1)
    else:
        # The first message that is not the same object, compared without a Python-level loop.
        shared = next(itertools.compress(itertools.count(), map(is_not, old, tail)), min(len(old), len(tail)))
    return lay_out(messages, counter, previous._layout, size + shared, previous._presets), signature, tail


def _marked_message(message: Message, marked: Mapping[int, TTL]) -> Message:
    """
    *message* with a breakpoint of the given lifetime on each block index of *marked*.
    """
    blocks = cache_blocks(message)
    head = len(blocks) - len(message.tool_calls)
    converted: list[ContentBlock] = []
    for k, block in enumerate(blocks):
        mark = CacheBreakpoint(marked[k]) if k in marked else None
        if isinstance(block, str):
            converted.append(TextBlock(block, cache=mark))
        elif isinstance(block, ToolCall):
            converted.append(ToolCallBlock(block.id, block.name, block.arguments, cache=mark))
        elif mark is not None:
            converted.append(attrs.evolve(block, cache=mark))  # type: ignore[arg-type]  # only blocks with a cache field are marked
        else:
            converted.append(block)
    if any(k >= head for k in marked):
        return attrs.evolve(message, content=tuple(converted), tool_calls=())
    return attrs.evolve(message, content=tuple(converted[:head]))


class _Request(Sequence[Message]):
    """
    A context's request, its prefix's messages then its tail, read in place (made in O(1)).
    """

    __slots__ = ("_head", "_tail")

    def __init__(self, head: Sequence[Message], tail: Sequence[Message]) -> None:
        self._head = head
        self._tail = tail

    def __len__(self) -> int:
        return len(self._head) + len(self._tail)

    @overload
    def __getitem__(self, index: int) -> Message: ...

    @overload
    def __getitem__(self, index: slice) -> list[Message]: ...

    def __getitem__(self, index: int | slice) -> Message | list[Message]:
        if isinstance(index, slice):
            picked = range(len(self))[index]
            if picked.step != 1:
                return [self[i] for i in picked]
            head = len(self._head)
            start, stop = picked.start, max(picked.start, picked.stop)
            return [
                *self._head[min(start, head) : min(stop, head)],
                *self._tail[max(start - head, 0) : max(stop - head, 0)],
            ]
        head = len(self._head)
        position = index + len(self) if index < 0 else index
        if not 0 <= position < len(self):
            msg = f"request index {index!r} out of range for {len(self)} messages"
            raise IndexError(msg)
        return self._head[position] if position < head else self._tail[position - head]

    def __iter__(self) -> Iterator[Message]:
        return itertools.chain(self._head, self._tail)


def _request(source: object) -> tuple[Sequence[Message], int, Any, str, Sequence[Message]]:
    """
    The request of *source*, its prefix's message count, counter and digest, and its tail.
    """
    if isinstance(source, WorkingContext):
        prefix = source.prefix
        head = prefix.as_messages()
        tail: Sequence[Message] = source.tail_view()
        return _Request(head, tail), len(head), source.counter, prefix.digest(), tail
    if isinstance(source, FrozenContext):
        prefix = source.prefix
        messages = source.assembled()
        count = len(prefix.as_messages())
        return messages, count, None, prefix.digest(), tuple(messages[count:])
    expected = "a WorkingContext or a FrozenContext (ctx.freeze())"
    raise _checks.wrong_type(source, "ctx", expected, label="", verb="expected")


def plan(
    ctx: WorkingContext | FrozenContext,
    *,
    provider: str,
    model: str,
    previous: CachePlan | None = None,
    automatic: bool = False,
    prefix_ttl: TTL = "1h",
    counter: MessageCounter | None = None,
    tail_ttl: TTL = "5m",
) -> CachePlan:
    """
    Place cache breakpoints for the request *ctx* makes, obeying *provider*'s rules.

    For Anthropic, up to three explicit breakpoints:

    1. the end of the frozen prefix, for *prefix_ttl* (one hour by default: the
       prefix outlives any tail, and forks and sub-agents share it);
    2. the furthest breakpoint of *previous* (the plan of the request before)
       that is still part of this request, so this request reads everything the
       previous one cached however many blocks were added since (the
       provider's own lookback reaches only about twenty blocks back);
    3. the last block of the request that can carry one (or, with
       *automatic*, the provider's automatic breakpoint there).

    The last two live *tail_ttl*: five minutes by default, which is cheaper
    to write (1.25 times the input price, against twice for an hour) and
    enough while requests keep coming, since every read renews an entry. When
    the run pauses for longer than five minutes between requests (a person
    answering, a slow tool), ``tail_ttl="1h"`` keeps the tail cached through
    the pause; :func:`simulate` with ``gaps=`` says which is cheaper for a cadence.

    Breakpoints below the model's minimum are left out, never more than the
    provider allows are placed, and none lands on a block that cannot carry
    one. For OpenAI and Gemini no breakpoint is placed: the plan carries a
    ``cache_key`` derived from the prefix digest (OpenAI's ``prompt_cache_key``).

    Args:
        ctx: The request: a live context or a snapshot of one.
        provider: ``"anthropic"``, ``"openai"`` or ``"gemini"``.
        model: The model name; minimums differ by model.
        previous: The previous request's plan.
        automatic: Use the provider's automatic breakpoint for the last block.
        prefix_ttl: The prefix breakpoint's lifetime.
        counter: The token counter (default: the context's, or the approximation).
        tail_ttl: The lifetime of the other breakpoints.

    Raises:
        CacheRuleError: an unknown provider, a *prefix_ttl* or *tail_ttl* it
            does not offer, or a one-hour tail after a five-minute prefix.
        TypeError: *ctx* is not a context or snapshot, *previous* not a plan.
    """
    laid = laid_out(
        ctx, provider, model, previous, automatic=automatic, prefix_ttl=prefix_ttl, counter=counter, tail_ttl=tail_ttl
    )
    if not laid.rules.explicit:
        return laid.made(())
    layout, messages, prefix_count, presets = laid.layout, laid.messages, laid.prefix_count, laid.presets
    minimum, budget = laid.rules.minimum_for(model), laid.budget
    # the chosen positions by index in the layout (the layout's order is the request's)
    chosen: dict[int, tuple[Position, TTL]] = {}

    def add(index: int | None, ttl: TTL, position: Position | None = None) -> None:
        if index is None or index in chosen or len(chosen) >= budget:
            return
        position = layout[index] if position is None else position
        if position.tokens >= minimum and position.preset is None:
            chosen[index] = (position, ttl)

    add(last_carrying_index(layout, prefix_count), prefix_ttl)
    if previous is not None and previous.provider == provider:
        found, position = _furthest_reached(layout, previous)
        add(found, tail_ttl, position)
    if not automatic:
        add(last_carrying_index(layout, len(messages)), tail_ttl)
    # Every 1h breakpoint must come before every 5m one, those on blocks included:
    # a planned one before a 1h one on a block lasts an hour too, and one after a
    # 5m one (planned or on a block) five minutes.
    last_1h = max((at for at, ttl in presets if ttl == "1h"), default=(-1, -1))
    first_5m = min((at for at, ttl in presets if ttl == "5m"), default=(len(messages), 0))
    ordered: list[Breakpoint] = []
    marked: list[tuple[int, Position, TTL]] = []
    seen_5m = False
    for index, (position, wanted) in sorted(chosen.items()):
        at = (position.message, position.block)
        ttl: TTL = "1h" if at < last_1h else "5m" if (seen_5m or at > first_5m) else wanted
        seen_5m = seen_5m or ttl == "5m"
        ordered.append(_breakpoint(position.message, position.block, ttl, position.tokens))
        marked.append((index, position, ttl))
    return laid.made(tuple(ordered), tuple(marked))


def _furthest_reached(layout: Layout, previous: CachePlan) -> tuple[int | None, Position | None]:
    """
    The index in *layout* of the furthest position *previous* marked that
    this request still holds (None when it holds none), with that position.
    A key names the request up to its block, so a position can only be at
    the same (message, block) here; a layout that grew in place from
    *previous*'s holds each of its positions as they were.
    """
    old = previous._layout
    grown = isinstance(old, Layout) and old._run is layout._run and len(old) <= len(layout)
    best: tuple[int | None, Position | None] = (None, None)
    most = -1
    for i, p, _ttl in marked_positions(previous):
        if grown:
            found: int | None = i
            position = p
        else:
            found = find_position(layout, p.message, p.block)
            if found is None:
                continue
            position = layout[found]
            if position.key != p.key:
                continue
        if position.tokens > most:
            best, most = (found, position), position.tokens
    return best


def _filler(cls: type[Any]) -> Callable[..., Any]:
    """
    A maker of *cls* from the values of its ``__init__`` fields, in order,
    that fills its slots directly (a field left out of ``__init__`` gets its
    default): no converter, check or ``__attrs_post_init__`` runs. For values
    the planner made and checked as it made them; the constructor itself
    (checks included) when a field is not a plain slot.
    """
    fields = attrs.fields(cls)
    descriptors = [cls.__dict__.get(field.name) for field in fields]
    plain = all(type(found).__name__ == "member_descriptor" for found in descriptors)
    if not plain or any(isinstance(f.default, attrs.Factory) for f in fields if not f.init):  # type: ignore[arg-type]
        return cls  # pragma: no cover  # the classes given are slotted, their memo's default None
    given = [found.__set__ for found, f in zip(descriptors, fields, strict=True) if f.init]  # type: ignore[union-attr]
    left = [(found.__set__, f.default) for found, f in zip(descriptors, fields, strict=True) if not f.init]  # type: ignore[union-attr]
    new = object.__new__

    def made(*values: Any) -> Any:
        built = new(cls)
        for set_slot, value in zip(given, values, strict=True):
            set_slot(built, value)
        for set_slot, default in left:
            set_slot(built, default)
        return built

    return made


_breakpoint: Callable[[int, int, TTL, int], Breakpoint] = _filler(Breakpoint)
"""A :class:`Breakpoint` the planner placed (indices and tokens of its layout, a lifetime it checked)."""

_plan: Callable[..., CachePlan] = _filler(CachePlan)
"""
A :class:`CachePlan` the planner made, from its fields in order: the
checks its constructor makes are those the planner made as it placed each
breakpoint (see ``LaidOut.made``).
"""


class LaidOut(NamedTuple):
    """
    A request laid out for a plan, its arguments checked: all :func:`plan` and
    the simulation's other strategies need before placing breakpoints.
    """

    provider: str
    model: str
    automatic: bool
    rules: CacheRules
    messages: Sequence[Message]
    prefix_count: int
    prefix_digest: str
    layout: Layout
    carrying: tuple[Position, ...]  # the positions whose blocks already carry a breakpoint
    signature: tuple[str, str] | None
    tail: Sequence[Message]
    presets: list[tuple[tuple[int, int], TTL]]  # those breakpoints, for explicit rules
    budget: int  # how many breakpoints may still be placed, for explicit rules

    def made(
        self, breakpoints: tuple[Breakpoint, ...], marked: tuple[tuple[int, Position, TTL], ...] | None = None
    ) -> CachePlan:
        """
        The plan of the request with *breakpoints* (none with implicit rules: a
        cache key, for OpenAI); *marked*, the breakpoints' indices in the
        layout, positions and lifetimes, in order, saves
        :func:`marked_positions` finding them when they are all it finds (no
        breakpoint on a block, no automatic one).
        """
        layout = self.layout
        explicit = self.rules.explicit
        made = _plan(
            self.provider,
            self.model,
            breakpoints if explicit else (),
            self.automatic if explicit else True,
            None if explicit or self.provider != "openai" else f"workingctx-{self.prefix_digest[:32]}",
            last_tokens(layout),
            self.prefix_count,
            layout,
            self.signature,
            self.tail,
            self.carrying,
        )
        if marked is not None and explicit and not self.carrying and not self.automatic:
            object.__setattr__(made, "_marked", marked)
        return made


def laid_out(
    ctx: WorkingContext | FrozenContext,
    provider: str,
    model: str,
    previous: CachePlan | None,
    *,
    automatic: bool,
    prefix_ttl: TTL,
    counter: MessageCounter | None,
    tail_ttl: TTL,
) -> LaidOut:
    """
    The request of *ctx* laid out (reusing *previous*'s layout), with :func:`plan`'s
    arguments and the breakpoints already on its blocks checked.
    """
    rules = rules_for(provider, model)
    messages, prefix_count, own_counter, prefix_digest, request_tail = _request(ctx)
    if previous is not None:
        _checks.check_instance(previous, "previous", CachePlan, "the CachePlan of the previous request or None")
    if prefix_ttl not in rules.ttls and rules.explicit:
        msg = f"prefix_ttl must be one of {list(rules.ttls)} for {provider}, got {prefix_ttl!r}"
        raise CacheRuleError(msg, argument="prefix_ttl", value=prefix_ttl)
    if tail_ttl not in rules.ttls and rules.explicit:
        msg = f"tail_ttl must be one of {list(rules.ttls)} for {provider}, got {tail_ttl!r}"
        raise CacheRuleError(msg, argument="tail_ttl", value=tail_ttl)
    if rules.explicit and TTL_ORDER[tail_ttl] < TTL_ORDER[prefix_ttl]:
        msg = (
            f"tail_ttl={tail_ttl!r} after prefix_ttl={prefix_ttl!r} would put a longer-lived breakpoint after a "
            f"shorter one, which {provider} refuses; use prefix_ttl={tail_ttl!r} too"
        )
        raise CacheRuleError(msg)
    (layout, carrying), signature, tail = _planned_layout(
        messages, counter or own_counter or ApproxTokenCounter(), previous, (prefix_digest, prefix_count), request_tail
    )
    if not rules.explicit:
        presets: list[tuple[tuple[int, int], TTL]] = []
        return LaidOut(
            provider, model, automatic, rules, messages, prefix_count, prefix_digest, layout, carrying, signature, tail,
            presets, 0
        )  # fmt: skip
    where = f"cache plan for {provider} {model}"
    presets = _presets(carrying)
    _check_ttl_order(where, presets)
    budget = rules.max_breakpoints - len(presets) - (1 if automatic else 0)
    if budget < 0:
        msg = (
            f"{where}: the request's blocks already carry {len(presets)} breakpoints (messages "
            f"{sorted({m for (m, _), _ in presets})}){' and the automatic one' if automatic else ''}, more than the "
            f"{rules.max_breakpoints} {provider} allows; remove cache= from some blocks"
        )
        raise CacheRuleError(msg)
    return LaidOut(
        provider, model, automatic, rules, messages, prefix_count, prefix_digest, layout, carrying, signature, tail,
        presets, budget
    )  # fmt: skip


def prompt_cache_key(source: object, cache: object = True) -> str | None:
    """
    The ``prompt_cache_key`` an OpenAI request gets for *cache*: None for
    None or False, the key of a :class:`CachePlan`, a str as it is, and for
    True a key derived from the prefix digest of *source* (a context or
    snapshot), so requests that share the prefix reach the same cache.

    >>> from workingctx import PrefixContext, WorkingContext
    >>> ctx = WorkingContext(prefix=PrefixContext(system_prompt="Be brief."))
    >>> prompt_cache_key(ctx) == plan(ctx, provider="openai", model="gpt-5").cache_key
    True

    Raises:
        TypeError: *cache* is True but *source* has no prefix, or *cache* is of another kind.
        CacheRuleError: a plan made for a provider without cache keys.
    """
    if cache is None or cache is False:
        return None
    if isinstance(cache, str):
        return cache
    if isinstance(cache, CachePlan):
        if cache.cache_key is None:
            msg = f"a {cache.provider} cache plan has no prompt_cache_key; plan with provider='openai'"
            raise CacheRuleError(msg)
        return cache.cache_key
    if cache is True:
        prefix = getattr(source, "prefix", None)
        digest = getattr(prefix, "digest", None)
        if not callable(digest):
            msg = (
                "cache=True derives prompt_cache_key from the prefix: pass a WorkingContext or a FrozenContext, "
                "or give the key as a str"
            )
            raise ArgumentTypeError(
                msg, argument="source", value=source, expected="a WorkingContext or a FrozenContext"
            )
        return f"workingctx-{str(digest())[:32]}"
    raise _checks.wrong_type(cache, "cache", "True, False, None, a str key or a CachePlan")
