"""
Prompt caching: the providers' rules as data, plans that hit, and what a run costs.

A provider serves the start of a request from its cache when an earlier request
began the same way. The rules that decide whether it does differ by provider and
model, and breaking one costs money silently:

* **Anthropic** caches up to *breakpoints* the client marks on content blocks:
  at most four per request, the automatic (top-level) one included; a
  breakpoint below the model's minimum prefix caches nothing; the cache looks
  for an earlier entry only about twenty blocks back from each breakpoint;
  one-hour breakpoints must come before five-minute ones; writes cost 1.25x
  (five minutes) or 2x (one hour) the input price, reads 0.1x.
* **OpenAI** caches automatically from 1,024 tokens in steps of 128 tokens;
  ``prompt_cache_key`` routes requests that share a prefix to the same cache.
* **Gemini** caches implicitly above a per-model minimum.

:data:`RULES` holds these facts (checked on :data:`RULES_AS_OF`); :func:`plan`
places breakpoints that obey them, :func:`report` says in tokens and dollars
what the next request will read, write and cost, and :func:`simulate` replays a
whole run request by request.

>>> from workingctx import Message, PrefixContext, WorkingContext
>>> ctx = WorkingContext(prefix=PrefixContext(system_prompt="Rules. " * 2_000))
>>> _ = ctx.append(Message("user", "First question?"))
>>> first = plan(ctx, provider="anthropic", model="claude-sonnet-4-6")
>>> [(b.message, b.block, b.ttl) for b in first.breakpoints]
[(0, 0, '1h'), (1, 0, '5m')]
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable, Mapping, Sequence
from decimal import Decimal
from types import MappingProxyType
from typing import Any, Literal, TypeAlias

import attrs

from workingctx.context import WorkingContext
from workingctx.exceptions import CacheRuleError
from workingctx.frozen import FrozenDict
from workingctx.messages import (
    CacheBreakpoint,
    ContentBlock,
    Message,
    TextBlock,
    ToolCall,
    ToolCallBlock,
    Usage,
)
from workingctx.pricing import cost as _price
from workingctx.snapshot import FrozenContext
from workingctx.tokens import ApproxTokenCounter

__all__ = [
    "RULES",
    "RULES_AS_OF",
    "TTL",
    "Breakpoint",
    "CachePlan",
    "CacheReport",
    "CacheRules",
    "SimulatedRequest",
    "Simulation",
    "cache_blocks",
    "can_carry_breakpoint",
    "plan",
    "prompt_cache_key",
    "report",
    "simulate",
]

TTL: TypeAlias = Literal["5m", "1h"]
"""A cache entry's lifetime: five minutes (the default) or one hour."""

RULES_AS_OF = "2026-12-01"
"""The day the rules below were checked against the providers' documentation."""

_TTL_ORDER = {"1h": 0, "5m": 1}


# -- the rules ----------------------------------------------------------------------


def _minimums(value: object) -> Mapping[str, int]:
    if not isinstance(value, Mapping):
        msg = f"minimum_tokens must be a mapping of model-name prefix to tokens, got {value!r}"
        raise TypeError(msg)
    for name, tokens in value.items():
        if not isinstance(name, str) or not isinstance(tokens, int) or isinstance(tokens, bool) or tokens < 0:
            msg = f"minimum_tokens[{name!r}] must map a str to a non-negative int, got {tokens!r}"
            raise CacheRuleError(msg)
    return FrozenDict(value)


def _nonneg(_inst: object, attribute: attrs.Attribute[Any], value: object) -> None:
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        msg = f"{attribute.name} must be a non-negative int, got {value!r}"
        raise CacheRuleError(msg)


def _positive(_inst: object, attribute: attrs.Attribute[Any], value: object) -> None:
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        msg = f"{attribute.name} must be a positive int, got {value!r}"
        raise CacheRuleError(msg)


def _no_write_charge() -> Mapping[str, Decimal]:
    return FrozenDict({"5m": Decimal(1)})


def _read_only(value: Mapping[str, Decimal]) -> Mapping[str, Decimal]:
    return FrozenDict(value)


@attrs.frozen
class CacheRules:
    """
    One provider's prompt-caching rules.

    Attributes:
        provider: ``"anthropic"``, ``"openai"`` or ``"gemini"``.
        explicit: Whether the client marks breakpoints (Anthropic); otherwise
            the provider caches every prefix it has seen (OpenAI, Gemini).
        max_breakpoints: Breakpoints allowed in one request, the automatic one included.
        lookback_blocks: How many blocks back from a breakpoint (itself
            included) the provider looks for an earlier cache entry.
        minimum_tokens: The shortest cacheable prefix, by model-name prefix
            (the longest matching prefix wins).
        default_minimum: The minimum for a model none of those match.
        step_tokens: Cached prefixes grow in steps of this many tokens past the minimum.
        ttls: The lifetimes a breakpoint can ask for, longest first.
        read_multiplier: A cache read's price as a multiple of the input price
            (what the built-in prices say; :mod:`workingctx.pricing` bills it).
        write_multipliers: A cache write's price as a multiple of the input price, by lifetime.
    """

    provider: str
    explicit: bool
    max_breakpoints: int = attrs.field(validator=_nonneg)
    lookback_blocks: int = attrs.field(validator=_positive)
    minimum_tokens: Mapping[str, int] = attrs.field(converter=_minimums)
    default_minimum: int = attrs.field(validator=_nonneg)
    step_tokens: int = attrs.field(default=1, validator=_positive)
    ttls: tuple[TTL, ...] = ("5m",)
    read_multiplier: Decimal = Decimal("0.1")
    write_multipliers: Mapping[str, Decimal] = attrs.field(factory=_no_write_charge, converter=_read_only)

    def minimum_for(self, model: str) -> int:
        """
        The shortest prefix *model* caches, in tokens.

        >>> RULES["anthropic"].minimum_for("claude-opus-4-6-20260101")
        4096
        """
        if not isinstance(model, str):
            msg = f"model must be a str, got {model!r} of type {type(model).__name__}"
            raise TypeError(msg)
        name = model.rsplit("/", 1)[-1]
        best = ""
        for prefix in self.minimum_tokens:
            if name.startswith(prefix) and len(prefix) > len(best):
                best = prefix
        return self.minimum_tokens[best] if best else self.default_minimum


RULES: Mapping[str, CacheRules] = MappingProxyType(
    {
        "anthropic": CacheRules(
            provider="anthropic",
            explicit=True,
            max_breakpoints=4,
            lookback_blocks=20,
            minimum_tokens={
                "claude-opus-5": 512,
                "claude-fable-5": 512,
                "claude-mythos-5": 512,
                "claude-opus-4-8": 1024,
                "claude-sonnet-5": 1024,
                "claude-sonnet-4": 1024,
                "claude-opus-4": 1024,
                "claude-3-7-sonnet": 1024,
                "claude-opus-4-7": 2048,
                "claude-3-5-haiku": 2048,
                "claude-3-haiku": 2048,
                "claude-opus-4-6": 4096,
                "claude-opus-4-5": 4096,
                "claude-haiku-4-5": 4096,
            },
            # An unknown model: the highest minimum, so no breakpoint is wasted.
            default_minimum=4096,
            ttls=("1h", "5m"),
            read_multiplier=Decimal("0.1"),
            write_multipliers={"5m": Decimal("1.25"), "1h": Decimal(2)},
        ),
        "openai": CacheRules(
            provider="openai",
            explicit=False,
            max_breakpoints=0,
            lookback_blocks=1,
            minimum_tokens={},
            default_minimum=1024,
            step_tokens=128,
            read_multiplier=Decimal("0.1"),
        ),
        "gemini": CacheRules(
            provider="gemini",
            explicit=False,
            max_breakpoints=0,
            lookback_blocks=1,
            minimum_tokens={
                "gemini-2.5-flash": 1024,
                "gemini-2.5-pro": 4096,
                "gemini-3-flash": 1024,
                "gemini-3.5-flash": 1024,
                "gemini-3-pro": 4096,
                "gemini-3.1-pro": 4096,
            },
            default_minimum=4096,
            read_multiplier=Decimal("0.1"),
        ),
    }
)
"""The caching rules of each provider (see :data:`RULES_AS_OF`)."""


def _rules(provider: object, model: object) -> CacheRules:
    if not isinstance(provider, str):
        msg = f"provider must be a str such as 'anthropic', got {provider!r} of type {type(provider).__name__}"
        raise TypeError(msg)
    if not isinstance(model, str):
        msg = f"model must be a str such as 'claude-sonnet-4-6', got {model!r} of type {type(model).__name__}"
        raise TypeError(msg)
    rules = RULES.get(provider)
    if rules is None:
        msg = f"no caching rules for provider {provider!r}; use one of {sorted(RULES)}"
        raise CacheRuleError(msg)
    return rules


# -- blocks ---------------------------------------------------------------------


def cache_blocks(message: Message) -> tuple[str | ContentBlock | ToolCall, ...]:
    """
    The blocks of *message* as a provider sees them, in order: its text (when
    the content is a non-empty string) or its content blocks, then its tool calls.

    A :class:`Breakpoint`'s ``block`` indexes this tuple.

    >>> from workingctx import Message, ToolCall
    >>> cache_blocks(Message.assistant("Checking.", tool_calls=[ToolCall("c1", "lookup")]))
    ('Checking.', ToolCall(id='c1', name='lookup', arguments={}))
    """
    if not isinstance(message, Message):
        msg = f"cache_blocks() needs a Message, got {message!r} of type {type(message).__name__}"
        raise TypeError(msg)
    content = message.content
    head: tuple[str | ContentBlock, ...] = content if not isinstance(content, str) else (content,) if content else ()
    return (*head, *message.tool_calls)


def can_carry_breakpoint(block: str | ContentBlock | ToolCall) -> bool:
    """
    Whether a breakpoint can be put on *block*: non-empty text, an image, a
    document, a tool call or a tool result (the blocks with a ``cache``
    field); never empty text, thinking, a citation, audio, video, raw data or
    a provider's own block.

    >>> from workingctx.messages import ReasoningBlock, TextBlock
    >>> can_carry_breakpoint(TextBlock("Runbook")), can_carry_breakpoint(ReasoningBlock("hmm"))
    (True, False)
    """
    if isinstance(block, str):
        return bool(block)
    if isinstance(block, ToolCall):
        return True
    if isinstance(block, TextBlock):
        return bool(block.text)
    return "cache" in attrs.fields_dict(type(block))


def _preset(block: str | ContentBlock | ToolCall) -> TTL | None:
    """
    The lifetime of a breakpoint already set on *block* (``cache=CacheBreakpoint(...)``), or None.
    """
    mark = getattr(block, "cache", None)
    if mark is None:
        return None
    return "1h" if mark.ttl == "1h" else "5m"


@attrs.frozen
class _Position:
    message: int
    block: int
    tokens: int  # request tokens up to and including this block
    carries: bool
    key: str  # identity of the request up to and including this block
    preset: TTL | None = None  # a breakpoint the block already carries


def _count(counter: Any, message: Message) -> int:
    counting = getattr(counter, "count_message", None)
    if callable(counting):
        return int(counting(message))
    return int(counter.count([message]))


def _layout(messages: Sequence[Message], counter: Any) -> tuple[_Position, ...]:
    positions: list[_Position] = []
    running = hashlib.sha256()
    before = 0
    for m, message in enumerate(messages):
        tokens = _count(counter, message)
        blocks = cache_blocks(message)
        running.update(message.digest().encode())
        head = running.hexdigest()
        for k, block in enumerate(blocks):
            # A message's tokens are shared evenly among its blocks; the last block ends the message.
            through = before + (tokens * (k + 1)) // len(blocks)
            carries = can_carry_breakpoint(block)
            preset = _preset(block) if carries else None
            positions.append(_Position(m, k, through, carries, f"{head}:{k}", preset))
        before += tokens
    return tuple(positions)


def _layout_key(messages: Sequence[Message]) -> str:
    """
    The running digest of *messages*, as :func:`_layout` keys the last of them.
    """
    running = hashlib.sha256()
    for message in messages:
        running.update(message.digest().encode())
    return running.hexdigest()


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


def _request(source: object) -> tuple[list[Message], int, Any, str]:
    if isinstance(source, WorkingContext):
        prefix = source.prefix
        return source.assembled(), len(prefix.as_messages()), source.counter, prefix.digest()
    if isinstance(source, FrozenContext):
        prefix = source.prefix
        return source.assembled(), len(prefix.as_messages()), None, prefix.digest()
    msg = f"expected a WorkingContext or a FrozenContext (ctx.freeze()), got {source!r} of type {type(source).__name__}"
    raise TypeError(msg)


# -- plans ----------------------------------------------------------------------


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


def _presets(layout: Sequence[_Position]) -> list[tuple[tuple[int, int], TTL]]:
    """
    The breakpoints the request's blocks already carry, as ((message, block), ttl).
    """
    return [((p.message, p.block), p.preset) for p in layout if p.preset is not None]


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
    if isinstance(value, str | bytes) or not isinstance(value, Iterable):
        msg = f"breakpoints must be a sequence of Breakpoint values, got {value!r}"
        raise TypeError(msg)
    points = tuple(value)
    for point in points:
        if not isinstance(point, Breakpoint):
            msg = f"breakpoints hold {point!r} of type {type(point).__name__}, not a Breakpoint"
            raise TypeError(msg)
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
    _layout: tuple[_Position, ...] = attrs.field(default=(), eq=False, repr=False, alias="_layout")

    def __attrs_post_init__(self) -> None:
        rules = _rules(self.provider, self.model)
        where = f"cache plan for {self.provider} {self.model}"
        # Only Anthropic reads breakpoints set on blocks; the others cache on their own.
        presets = _presets(self._layout) if rules.explicit else []
        count = len(self.breakpoints) + len(presets) + (1 if self.automatic and rules.explicit else 0)
        if count > rules.max_breakpoints:
            msg = (
                f"{where}: {count} breakpoints ({len(presets)} already on blocks, automatic included) exceed "
                f"the {rules.max_breakpoints} {self.provider} allows; drop some"
            )
            raise CacheRuleError(msg)
        minimum = rules.minimum_for(self.model)
        carrying = {(p.message, p.block): p for p in self._layout}
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
                position = carrying.get((point.message, point.block))
                if position is None or not position.carries:
                    msg = (
                        f"{where}: message {point.message} block {point.block} cannot carry a breakpoint "
                        "(missing, empty text, thinking, citation, audio, video, data or a provider block); "
                        "put it on the last text, image, document, tool call or tool result before it"
                    )
                    raise CacheRuleError(msg)
                if position.preset is not None:
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
                raise TypeError(msg)
        if self._layout and _layout_key(checked) != self._layout[-1].key.rsplit(":", 1)[0]:
            msg = (
                "apply(): these messages are not the request the plan was made for; "
                "pass ctx.assembled() of the context given to plan()"
            )
            raise CacheRuleError(msg)
        for m, marked in self.marks().items():
            checked[m] = _marked_message(checked[m], marked)
        return checked


def _last_carrying(layout: Sequence[_Position], end: int) -> _Position | None:
    """
    The last position that can carry a breakpoint among the first *end* messages.
    """
    for position in reversed(layout):
        if position.message < end and position.carries:
            return position
    return None


def _marked(request: CachePlan) -> list[tuple[_Position, TTL]]:
    """
    The positions of *request* that carry a breakpoint, with its lifetime: the
    plan's, those already on blocks, and the automatic one.
    """
    ttls: dict[tuple[int, int], TTL] = {(b.message, b.block): b.ttl for b in request.breakpoints}
    found = [
        (p, ttls.get((p.message, p.block)) or p.preset or "5m")
        for p in request._layout
        if (p.message, p.block) in ttls or p.preset is not None
    ]
    if request.automatic and request._layout and _rules(request.provider, request.model).explicit:
        last = _last_carrying(request._layout, request._layout[-1].message + 1)
        if last is not None and all(p is not last for p, _ in found):
            found.append((last, "5m"))
    return found


def plan(
    ctx: WorkingContext | FrozenContext,
    *,
    provider: str,
    model: str,
    previous: CachePlan | None = None,
    automatic: bool = False,
    prefix_ttl: TTL = "1h",
    counter: Any = None,
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

    Raises:
        CacheRuleError: an unknown provider, or a *prefix_ttl* it does not offer.
        TypeError: *ctx* is not a context or snapshot, *previous* not a plan.
    """
    rules = _rules(provider, model)
    messages, prefix_count, own_counter, prefix_digest = _request(ctx)
    if previous is not None and not isinstance(previous, CachePlan):
        msg = f"previous must be the CachePlan of the previous request or None, got {previous!r}"
        raise TypeError(msg)
    if prefix_ttl not in rules.ttls and rules.explicit:
        msg = f"prefix_ttl must be one of {list(rules.ttls)} for {provider}, got {prefix_ttl!r}"
        raise CacheRuleError(msg)
    layout = _layout(messages, counter or own_counter or ApproxTokenCounter())
    total = layout[-1].tokens if layout else 0
    if not rules.explicit:
        return CachePlan(
            provider,
            model,
            (),
            automatic=True,
            cache_key=f"workingctx-{prefix_digest[:32]}" if provider == "openai" else None,
            total_tokens=total,
            prefix_messages=prefix_count,
            _layout=layout,
        )
    minimum = rules.minimum_for(model)
    where = f"cache plan for {provider} {model}"
    presets = _presets(layout)
    _check_ttl_order(where, presets)
    budget = rules.max_breakpoints - len(presets) - (1 if automatic else 0)
    if budget < 0:
        msg = (
            f"{where}: the request's blocks already carry {len(presets)} breakpoints (messages "
            f"{sorted({m for (m, _), _ in presets})}){' and the automatic one' if automatic else ''}, more than the "
            f"{rules.max_breakpoints} {provider} allows; remove cache= from some blocks"
        )
        raise CacheRuleError(msg)
    chosen: dict[tuple[int, int], TTL] = {}

    def add(position: _Position | None, ttl: TTL) -> None:
        if position is None or position.tokens < minimum or len(chosen) >= budget or position.preset is not None:
            return
        chosen.setdefault((position.message, position.block), ttl)

    add(_last_carrying(layout, prefix_count), prefix_ttl)
    if previous is not None and previous.provider == provider:
        here = {p.key: p for p in layout}
        reached = [here[p.key] for p, _ttl in _marked(previous) if p.key in here]
        if reached:
            add(max(reached, key=lambda p: p.tokens), "5m")
    if not automatic:
        add(_last_carrying(layout, len(messages)), "5m")
    tokens = {(p.message, p.block): p.tokens for p in layout}
    points = sorted(
        (Breakpoint(m, k, ttl, tokens[(m, k)]) for (m, k), ttl in chosen.items()),
        key=lambda b: (b.message, b.block),
    )
    # Every 1h breakpoint must come before every 5m one, those on blocks included:
    # a planned one before a 1h one on a block lasts an hour too, and one after a
    # 5m one (planned or on a block) five minutes.
    last_1h = max((at for at, ttl in presets if ttl == "1h"), default=(-1, -1))
    first_5m = min((at for at, ttl in presets if ttl == "5m"), default=(len(messages), 0))
    ordered: list[Breakpoint] = []
    seen_5m = False
    for point in points:
        at = (point.message, point.block)
        ttl: TTL = "1h" if at < last_1h else "5m" if (seen_5m or at > first_5m) else point.ttl
        seen_5m = seen_5m or ttl == "5m"
        ordered.append(attrs.evolve(point, ttl=ttl))
    return CachePlan(
        provider,
        model,
        tuple(ordered),
        automatic=automatic,
        total_tokens=total,
        prefix_messages=prefix_count,
        _layout=layout,
    )


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
            raise TypeError(msg)
        return f"workingctx-{str(digest())[:32]}"
    msg = f"cache must be True, False, None, a str key or a CachePlan, got {cache!r} of type {type(cache).__name__}"
    raise TypeError(msg)


# -- what a request reads and writes ------------------------------------------------


@attrs.define
class _Cache:
    """
    The provider's cache as a simulation sees it: entries by request identity.
    """

    rules: CacheRules
    minimum: int
    entries: dict[str, int] = attrs.Factory(dict)

    def send(self, request: CachePlan) -> tuple[int, int, int, int]:
        """
        Serve *request*; return (read, written 5m, written 1h, tokens missed by the lookback).
        """
        layout = request._layout
        if not layout:
            return 0, 0, 0, 0
        if not self.rules.explicit:
            return self._implicit(layout)
        index = {(p.message, p.block): i for i, p in enumerate(layout)}
        marks = [(index[(p.message, p.block)], ttl) for p, ttl in _marked(request) if p.tokens >= self.minimum]
        read = 0
        for at, _ttl in marks:
            for j in range(at, max(at - self.rules.lookback_blocks, -1), -1):
                found = self.entries.get(layout[j].key)
                if found is not None:
                    read = max(read, found)
                    break
        reachable = max((p.tokens for p in layout if p.key in self.entries), default=0)
        end = max((layout[i].tokens for i, _ in marks), default=0)
        end_1h = max((layout[i].tokens for i, ttl in marks if ttl == "1h"), default=0)
        written_1h = max(0, end_1h - read)
        written = max(0, end - read)
        for i, _ttl in marks:
            self.entries[layout[i].key] = layout[i].tokens
        return read, written - written_1h, written_1h, max(0, reachable - read)

    def _implicit(self, layout: Sequence[_Position]) -> tuple[int, int, int, int]:
        shared = max((p.tokens for p in layout if p.key in self.entries), default=0)
        read = 0
        if shared >= self.minimum:
            read = shared - (shared - self.minimum) % self.rules.step_tokens
        for position in layout:
            self.entries[position.key] = position.tokens
        return read, 0, 0, 0


@attrs.frozen
class CacheReport:
    """
    What one request is expected to read from and write to the cache, in tokens and dollars.

    Attributes:
        shared_tokens: Tokens at the start of this request that the previous
            request had too (whole messages).
        input_tokens: All input tokens of this request.
        usage: The expected usage (input only: the output is not known yet).
        cost: Its input cost in dollars.
        uncached_cost: The same input with no cache at all.
        lookback_miss_tokens: Tokens a cache entry held that no breakpoint's
            lookback reached, so they were paid again.
    """

    shared_tokens: int
    input_tokens: int
    usage: Usage
    cost: Decimal
    uncached_cost: Decimal
    lookback_miss_tokens: int = 0

    @property
    def saved(self) -> Decimal:
        """
        Dollars saved against sending the request uncached.
        """
        return self.uncached_cost - self.cost

    @property
    def cached_share(self) -> float:
        """
        The share of input tokens read from the cache.
        """
        return self.usage.cache_read_tokens / self.input_tokens if self.input_tokens else 0.0


def _as_plan(source: object, provider: str, model: str, previous: CachePlan | None, counter: Any) -> CachePlan:
    if isinstance(source, CachePlan):
        if (source.provider, source.model) != (provider, model):
            msg = (
                f"the plan was made for {source.provider} {source.model}, not {provider} {model}; "
                "plan again with the same provider and model"
            )
            raise CacheRuleError(msg)
        return source
    return plan(source, provider=provider, model=model, previous=previous, counter=counter)  # type: ignore[arg-type]


def report(
    previous: WorkingContext | FrozenContext | CachePlan,
    current: WorkingContext | FrozenContext | CachePlan,
    *,
    provider: str,
    model: str,
    counter: Any = None,
) -> CacheReport:
    """
    What *current* will read from the cache *previous* left, and what it will cost.

    Either side is a context, a snapshot, or the :class:`CachePlan` it is sent
    with; a context or snapshot is planned with :func:`plan` (the current one
    with the previous one's plan).

    Raises:
        CacheRuleError: an unknown provider, or a plan made for another model.
        PricingError: *model* has no price.
    """
    rules = _rules(provider, model)
    before = _as_plan(previous, provider, model, None, counter)
    after = _as_plan(current, provider, model, before, counter)
    cache = _Cache(rules, rules.minimum_for(model))
    cache.send(before)
    read, written_5m, written_1h, missed = cache.send(after)
    keys = {p.key for p in before._layout}
    shared = max((p.tokens for p in after._layout if p.key in keys), default=0)
    return _report(model, after.total_tokens, shared, read, written_5m, written_1h, missed)


def _report(
    model: str, total: int, shared: int, read: int, written_5m: int, written_1h: int, missed: int
) -> CacheReport:
    usage = Usage(
        input_tokens=max(0, total - read - written_5m - written_1h),
        cache_read_tokens=read,
        cache_write_tokens=written_5m + written_1h,
        cache_write_1h_tokens=written_1h,
    )
    return CacheReport(
        shared_tokens=shared,
        input_tokens=total,
        usage=usage,
        cost=_price(model, usage),
        uncached_cost=_price(model, Usage(input_tokens=total)),
        lookback_miss_tokens=missed,
    )


# -- simulation -----------------------------------------------------------------------


@attrs.frozen
class SimulatedRequest:
    """
    One request of a simulated run: its usage (output included) and cost.
    """

    usage: Usage
    cost: Decimal
    input_cost: Decimal
    uncached_cost: Decimal
    uncached_input_cost: Decimal
    breakpoints: int
    lookback_miss_tokens: int


@attrs.frozen
class Simulation:
    """
    A replayed run: every request, and the totals.
    """

    requests: tuple[SimulatedRequest, ...]

    @property
    def usage(self) -> Usage:
        """
        The usage of every request added up.
        """
        total = Usage()
        for request in self.requests:
            total += request.usage
        return total

    @property
    def cost(self) -> Decimal:
        """
        What the run cost, in dollars.
        """
        return sum((r.cost for r in self.requests), Decimal(0))

    @property
    def input_cost(self) -> Decimal:
        """
        What the run's input cost, in dollars (cache reads and writes included).
        """
        return sum((r.input_cost for r in self.requests), Decimal(0))

    @property
    def uncached_cost(self) -> Decimal:
        """
        What the same requests would have cost with no cache.
        """
        return sum((r.uncached_cost for r in self.requests), Decimal(0))

    @property
    def uncached_input_cost(self) -> Decimal:
        """
        What the same requests' input would have cost with no cache.
        """
        return sum((r.uncached_input_cost for r in self.requests), Decimal(0))

    @property
    def input_tokens(self) -> int:
        """
        Every input token of every request.
        """
        usage = self.usage
        return usage.input_tokens + usage.cache_read_tokens + usage.cache_write_tokens

    @property
    def cached_share(self) -> float:
        """
        The share of input tokens read from the cache.
        """
        total = self.input_tokens
        return self.usage.cache_read_tokens / total if total else 0.0

    @property
    def lookback_misses(self) -> int:
        """
        How many requests paid again for tokens a cache entry held, because
        no breakpoint's lookback reached it.
        """
        return sum(1 for r in self.requests if r.lookback_miss_tokens)


Strategy: TypeAlias = Literal["plan", "auto", "last"] | Callable[[WorkingContext, "CachePlan | None"], CachePlan]


def _flatten(turns: Iterable[Message | Iterable[Message]]) -> Iterable[Message]:
    for turn in turns:
        if isinstance(turn, Message):
            yield turn
        elif isinstance(turn, str | bytes) or not isinstance(turn, Iterable):
            msg = f"turns must hold messages or sequences of messages, got {turn!r} of type {type(turn).__name__}"
            raise TypeError(msg)
        else:
            for message in turn:
                if not isinstance(message, Message):
                    msg = f"a turn holds {message!r} of type {type(message).__name__}, not a Message"
                    raise TypeError(msg)
                yield message


def _strategy_plan(
    strategy: Strategy, ctx: WorkingContext, provider: str, model: str, previous: CachePlan | None, counter: Any
) -> CachePlan:
    if strategy == "plan":
        return plan(ctx, provider=provider, model=model, previous=previous, counter=counter)
    if strategy == "auto":
        made = plan(ctx, provider=provider, model=model, counter=counter, automatic=True, prefix_ttl="5m")
        return attrs.evolve(made, breakpoints=(), _layout=made._layout)
    if strategy == "last":
        made = plan(ctx, provider=provider, model=model, counter=counter, prefix_ttl="5m")
        layout = made._layout
        tail = _last_carrying(layout, layout[-1].message + 1) if layout else None
        rules = _rules(provider, model)
        last: tuple[Breakpoint, ...] = ()
        room = len(_presets(layout)) < rules.max_breakpoints
        if (
            rules.explicit
            and room
            and tail is not None
            and tail.preset is None
            and tail.tokens >= rules.minimum_for(model)
        ):
            last = (Breakpoint(tail.message, tail.block, "5m", tail.tokens),)
        return attrs.evolve(made, breakpoints=last, _layout=layout)
    if callable(strategy):
        made = strategy(ctx, previous)
        if not isinstance(made, CachePlan):
            msg = f"the cache strategy must return a CachePlan, got {made!r}"
            raise TypeError(msg)
        return made
    msg = f"cache must be 'plan', 'auto', 'last' or a callable (ctx, previous_plan) -> CachePlan, got {strategy!r}"
    raise CacheRuleError(msg)


def simulate(
    turns: Iterable[Message | Iterable[Message]],
    *,
    provider: str,
    model: str,
    manager: Any = None,
    context: WorkingContext | None = None,
    cache: Strategy = "plan",
    counter: Any = None,
) -> Simulation:
    """
    Replay a run request by request and say what each request cost under *provider*'s cache.

    The messages of *turns* are appended to *context* (a new empty context by
    default) in order; before each assistant message the run makes a request:
    *manager* (anything with ``trim_context(ctx)``) trims the context, the
    request is planned with *cache*, served by a simulated cache that follows
    the provider's rules (minimums, lookback, steps), and the assistant
    message is its output (its ``usage.output_tokens`` when set, else its
    counted tokens).

    Args:
        turns: Messages, or sequences of messages, in order.
        provider: ``"anthropic"``, ``"openai"`` or ``"gemini"``.
        model: The model name (its price must be known).
        manager: A context manager run before each request, or None.
        context: The context to start from (its prefix included); it is changed.
        cache: ``"plan"`` (:func:`plan` with the previous plan), ``"auto"``
            (only the provider's automatic breakpoint), ``"last"`` (one
            five-minute breakpoint on the last block), or a callable
            ``(ctx, previous_plan) -> CachePlan``.
        counter: The token counter (default: the context's).

    Raises:
        CacheRuleError: an unknown provider or strategy.
        PricingError: *model* has no price.
    """
    rules = _rules(provider, model)
    ctx = WorkingContext() if context is None else context
    if not isinstance(ctx, WorkingContext):
        msg = f"context must be a WorkingContext or None, got {ctx!r} of type {type(ctx).__name__}"
        raise TypeError(msg)
    if manager is not None and not callable(getattr(manager, "trim_context", None)):
        msg = f"manager must have trim_context(ctx), got {manager!r} of type {type(manager).__name__}"
        raise TypeError(msg)
    counting = counter or ctx.counter
    served = _Cache(rules, rules.minimum_for(model))
    previous: CachePlan | None = None
    requests: list[SimulatedRequest] = []
    for message in _flatten(turns):
        if message.role == "assistant":
            if manager is not None:
                manager.trim_context(ctx)
            made = _strategy_plan(cache, ctx, provider, model, previous, counting)
            read, written_5m, written_1h, missed = served.send(made)
            output = message.usage.output_tokens if message.usage is not None else _count(counting, message)
            sent = Usage(
                input_tokens=max(0, made.total_tokens - read - written_5m - written_1h),
                cache_read_tokens=read,
                cache_write_tokens=written_5m + written_1h,
                cache_write_1h_tokens=written_1h,
            )
            usage = attrs.evolve(sent, output_tokens=output)
            requests.append(
                SimulatedRequest(
                    usage=usage,
                    cost=_price(model, usage),
                    input_cost=_price(model, sent),
                    uncached_cost=_price(model, Usage(input_tokens=made.total_tokens, output_tokens=output)),
                    uncached_input_cost=_price(model, Usage(input_tokens=made.total_tokens)),
                    breakpoints=len(made.breakpoints) + (1 if made.automatic and rules.explicit else 0),
                    lookback_miss_tokens=missed,
                )
            )
            previous = made
        ctx.append(message)
    return Simulation(tuple(requests))
