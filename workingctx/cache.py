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
whole run request by request, with time passing if you say so: an entry older
than its lifetime (:attr:`CacheRules.lifetimes`) is gone and written again.

>>> from workingctx import Message, PrefixContext, WorkingContext
>>> ctx = WorkingContext(prefix=PrefixContext(system_prompt="Rules. " * 2_000))
>>> _ = ctx.append(Message("user", "First question?"))
>>> first = plan(ctx, provider="anthropic", model="claude-sonnet-4-6")
>>> [(b.message, b.block, b.ttl) for b in first.breakpoints]
[(0, 0, '1h'), (1, 0, '5m')]
"""

from __future__ import annotations

import bisect
import hashlib
import itertools
import math
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from decimal import Decimal
from operator import attrgetter, is_not
from types import MappingProxyType
from typing import Any, Literal, TypeAlias

import attrs

from workingctx import _checks
from workingctx.context import WorkingContext
from workingctx.exceptions import ArgumentTypeError, CacheRuleError
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
from workingctx.tokens import ApproxTokenCounter, MessageCounter, _checked_count, counting

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
    value = _checks.check_instance(value, "minimum_tokens", Mapping, "a mapping of model-name prefix to tokens")
    for name, tokens in value.items():
        _checks.check_instance(name, "minimum_tokens", str, "a str", label="minimum_tokens keys")
        _checks.check_count(tokens, f"minimum_tokens[{name!r}]", error=CacheRuleError)
    return FrozenDict(value)


_nonneg = _checks.count(error=CacheRuleError)
_positive = _checks.integer(minimum=1, error=CacheRuleError)


def _no_write_charge() -> Mapping[str, Decimal]:
    return FrozenDict({"5m": Decimal(1)})


def _read_only(value: Mapping[str, Decimal]) -> Mapping[str, Decimal]:
    return FrozenDict(value)


def _five_minutes() -> Mapping[str, int]:
    return FrozenDict({"5m": 300})


def _lifetimes(value: object) -> Mapping[str, int]:
    value = _checks.check_instance(value, "lifetimes", Mapping, "a mapping of TTL name to seconds, such as {'5m': 300}")
    for name, seconds in value.items():
        if name not in _TTL_ORDER:
            msg = f"lifetimes[{name!r}] must map '5m' or '1h' to a positive int of seconds, got {seconds!r}"
            raise CacheRuleError(msg, argument="lifetimes", value=name)
        _checks.check_int(seconds, f"lifetimes[{name!r}]", minimum=1, fix="a number of seconds", error=CacheRuleError)
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
        lifetimes: How many seconds an entry of each TTL lives after it was
            last written or read (every read renews it); an entry older than
            that is gone, and the next request writes it again. For implicit
            caches, the ``"5m"`` lifetime is how long an unused prefix stays.

    Raises:
        CacheRuleError: a negative limit, or a TTL of *ttls* without a lifetime.
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
    lifetimes: Mapping[str, int] = attrs.field(factory=_five_minutes, converter=_lifetimes)

    def __attrs_post_init__(self) -> None:
        missing = [ttl for ttl in self.ttls if ttl not in self.lifetimes]
        if missing:
            msg = (
                f"{self.provider} caching rules offer the TTLs {list(self.ttls)} but give no lifetime for "
                f"{missing}; pass lifetimes={{'5m': 300, '1h': 3600}} (seconds)"
            )
            raise CacheRuleError(msg)

    def minimum_for(self, model: str) -> int:
        """
        The shortest prefix *model* caches, in tokens.

        >>> RULES["anthropic"].minimum_for("claude-opus-4-6-20260101")
        4096
        """
        _checks.check_instance(model, "model", str, "a str")
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
            # Every read renews an entry for its whole lifetime, at no charge.
            lifetimes={"5m": 300, "1h": 3_600},
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
            # In-memory retention: cleared after five to ten idle minutes; the
            # simulation takes the shorter figure.
            lifetimes={"5m": 300},
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
            # Google gives no idle lifetime for implicit caching (entries go
            # within a day, most much sooner); the simulation takes five minutes.
            lifetimes={"5m": 300},
        ),
    }
)
"""The caching rules of each provider (see :data:`RULES_AS_OF`)."""


def _rules(provider: object, model: object) -> CacheRules:
    provider = _checks.check_instance(provider, "provider", str, "a str such as 'anthropic'")
    _checks.check_instance(model, "model", str, "a str such as 'claude-sonnet-4-6'")
    rules = RULES.get(provider)
    if rules is None:
        msg = f"no caching rules for provider {provider!r}; use one of {sorted(RULES)}"
        raise CacheRuleError(msg, argument="provider", value=provider)
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
    _checks.check_instance(message, "message", Message, "a Message", label="cache_blocks()", verb="needs")
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


def _counts(counter: MessageCounter) -> Callable[[Message], int]:
    """
    The per-message count of *counter*, resolved once for a whole request (a
    runtime protocol check costs more than counting a cached message).

    Raises:
        ArgumentValueError: a negative count (a layout's tokens never decrease,
            and the cache simulation relies on it), as for a message counter.
    """
    if isinstance(counter, MessageCounter):
        return counting(counter)

    name = getattr(counter, "name", None) or type(counter).__name__

    def count(message: Message) -> int:  # an older counter with only count(messages)
        return _checked_count(int(counter.count([message])), name)

    return count


_ROOT_KEY = hashlib.sha256(b"workingctx.cache.layout").hexdigest()
"""The key of an empty request, where every request's chain of keys starts."""


def _next_key(head: str, message: Message) -> str:
    return hashlib.sha256(f"{head}:{_unmarked(message).digest()}".encode("ascii")).hexdigest()


def _unmarked(message: Message) -> Message:
    """
    *message* without the breakpoints on its blocks: a breakpoint says where to
    cache, not what is sent, so moving one (the last block of one request is
    not the last of the next) leaves the prefix the provider caches as it was.
    """
    content = message.content
    if isinstance(content, str) or all(getattr(b, "cache", None) is None for b in content):
        return message
    blocks = tuple(
        attrs.evolve(b, cache=None)  # type: ignore[arg-type]  # only blocks with a cache field carry one
        if getattr(b, "cache", None) is not None
        else b
        for b in content
    )
    return attrs.evolve(message, content=blocks)


def _layout(
    messages: Sequence[Message],
    counter: MessageCounter,
    reused: Sequence[_Position] = (),
    start: int = 0,
    reused_presets: Sequence[_Position] = (),
) -> tuple[tuple[_Position, ...], tuple[_Position, ...]]:
    """
    The positions of every block of *messages*: the request tokens through it
    (which never decrease along the layout: counts are not negative), whether
    it can carry a breakpoint, and a key naming the request up to it (a chain
    over the messages' digests, so equal requests share keys); with the
    positions whose blocks already carry a breakpoint, in order.

    The first *start* messages may be those of an earlier layout, *reused*,
    made with a counter of the same name, whose positions carrying a
    breakpoint are *reused_presets*: their positions are taken as they
    are and the chain goes on from the last of them, so a request that grows
    by a few messages costs those messages.
    """
    cut = bisect.bisect_left(reused, start, key=_MESSAGE_OF) if start else 0
    positions = list(reused[:cut])
    presets = [p for p in reused_presets if p.message < start] if cut else []
    if positions:
        last = positions[-1]
        m0, before, head = last.message + 1, last.tokens, last.key.rpartition(":")[0]
    else:
        m0, before, head = 0, 0, _ROOT_KEY
    count = _counts(counter)
    append = positions.append
    for m in range(m0, len(messages)):
        message = messages[m]
        tokens = count(message)
        blocks = cache_blocks(message)
        head = _next_key(head, message)
        size = len(blocks)
        for k, block in enumerate(blocks):
            # A message's tokens are shared evenly among its blocks; the last block ends the message.
            through = before + (tokens * (k + 1)) // size
            carries = can_carry_breakpoint(block)
            preset = _preset(block) if carries else None
            position = _Position(m, k, through, carries, f"{head}:{k}", preset)
            append(position)
            if preset is not None:
                presets.append(position)
        before += tokens
    return tuple(positions), tuple(presets)


_MESSAGE_OF = attrgetter("message")
_TOKENS_OF = attrgetter("tokens")
_AT = attrgetter("message", "block")


def _find(layout: Sequence[_Position], message: int, block: int) -> int | None:
    """
    The index of the position of block *block* of message *message* in
    *layout*, or None: a layout is in (message, block) order, so a binary search.
    """
    at = (message, block)
    i = bisect.bisect_left(layout, at, key=_AT)
    return i if i < len(layout) and _AT(layout[i]) == at else None


def _planned_layout(
    messages: Sequence[Message], counter: MessageCounter, previous: CachePlan | None, prefix: tuple[str, int]
) -> tuple[tuple[tuple[_Position, ...], tuple[_Position, ...]], tuple[str, str] | None, tuple[Message, ...]]:
    """
    The layout of a request whose prefix has the digest and message count
    *prefix*, with its positions carrying a breakpoint (see :func:`_layout`),
    reusing what it shares with the request *previous* was planned
    for (the same prefix, then the same message objects, counted by a
    counter of the same name); with what a later plan needs to reuse it.
    """
    name = getattr(counter, "name", None)
    if not isinstance(name, str):  # an older counter without a name: nothing to match on
        return _layout(messages, counter), None, ()
    digest, size = prefix
    signature = (digest, name)
    tail = tuple(messages[size:])
    if previous is None or previous._signature != signature or previous.prefix_messages != size:
        return _layout(messages, counter), signature, tail
    old = previous._tail
    # The first message that is not the same object, compared without a Python-level loop.
    shared = next(itertools.compress(itertools.count(), map(is_not, old, tail)), min(len(old), len(tail)))
    return _layout(messages, counter, previous._layout, size + shared, previous._presets), signature, tail


def _layout_key(messages: Sequence[Message]) -> str:
    """
    The key :func:`_layout` gives the last message of *messages*.
    """
    head = _ROOT_KEY
    for message in messages:
        head = _next_key(head, message)
    return head


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
    expected = "a WorkingContext or a FrozenContext (ctx.freeze())"
    raise _checks.wrong_type(source, "ctx", expected, label="", verb="expected")


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


def _presets(positions: Iterable[_Position]) -> list[tuple[tuple[int, int], TTL]]:
    """
    The breakpoints the request's blocks already carry, as ((message, block), ttl),
    of its positions (all of them, or those carrying one).
    """
    return [((p.message, p.block), p.preset) for p in positions if p.preset is not None]


def _carrying_presets(plan: CachePlan) -> tuple[_Position, ...]:
    """
    The positions of *plan*'s layout whose blocks already carry a breakpoint,
    when the plan was not given them (:func:`_layout` finds them as it goes).
    """
    return tuple(p for p in plan._layout if p.preset is not None)


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
    _layout: tuple[_Position, ...] = attrs.field(default=(), eq=False, repr=False, alias="_layout")
    # what a later plan() needs to reuse this layout (with prefix_messages): the
    # prefix digest and the counter's name, and the request's tail messages
    _signature: tuple[str, str] | None = attrs.field(default=None, eq=False, repr=False, alias="_signature")
    _tail: tuple[Message, ...] = attrs.field(default=(), eq=False, repr=False, alias="_tail")
    # the positions of the layout whose blocks already carry a breakpoint, in order
    _presets: tuple[_Position, ...] = attrs.field(
        default=attrs.Factory(_carrying_presets, takes_self=True), eq=False, repr=False, alias="_presets"
    )

    def __attrs_post_init__(self) -> None:
        rules = _rules(self.provider, self.model)
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
                found = _find(self._layout, point.message, point.block)
                position = None if found is None else self._layout[found]
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
                raise ArgumentTypeError(msg, argument=f"messages[{position}]", value=message, expected="a Message")
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
    i = _last_carrying_index(layout, end)
    return None if i is None else layout[i]


def _last_carrying_index(layout: Sequence[_Position], end: int) -> int | None:
    """
    The index of :func:`_last_carrying`'s position in *layout*, or None.
    """
    for i in range(bisect.bisect_left(layout, end, key=_MESSAGE_OF) - 1, -1, -1):
        if layout[i].carries:
            return i
    return None


def _marked(request: CachePlan) -> list[tuple[int, _Position, TTL]]:
    """
    The positions of *request* that carry a breakpoint, with their indices in
    its layout and their lifetimes, in layout order: the plan's, those already
    on blocks, and the automatic one (last).
    """
    layout = request._layout
    if not layout:
        return []
    ttls: dict[tuple[int, int], TTL] = {(b.message, b.block): b.ttl for b in request.breakpoints}
    at = [*ttls, *((p.message, p.block) for p in request._presets)]
    indices = sorted({i for i in (_find(layout, m, k) for m, k in at) if i is not None})
    found = [(i, layout[i], ttls.get(_AT(layout[i])) or layout[i].preset or "5m") for i in indices]
    if request.automatic and _rules(request.provider, request.model).explicit:
        last = _last_carrying_index(layout, layout[-1].message + 1)
        if last is not None and last not in indices:
            found.append((last, layout[last], "5m"))
    return found


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
    rules = _rules(provider, model)
    messages, prefix_count, own_counter, prefix_digest = _request(ctx)
    if previous is not None:
        _checks.check_instance(previous, "previous", CachePlan, "the CachePlan of the previous request or None")
    if prefix_ttl not in rules.ttls and rules.explicit:
        msg = f"prefix_ttl must be one of {list(rules.ttls)} for {provider}, got {prefix_ttl!r}"
        raise CacheRuleError(msg, argument="prefix_ttl", value=prefix_ttl)
    if tail_ttl not in rules.ttls and rules.explicit:
        msg = f"tail_ttl must be one of {list(rules.ttls)} for {provider}, got {tail_ttl!r}"
        raise CacheRuleError(msg, argument="tail_ttl", value=tail_ttl)
    if rules.explicit and _TTL_ORDER[tail_ttl] < _TTL_ORDER[prefix_ttl]:
        msg = (
            f"tail_ttl={tail_ttl!r} after prefix_ttl={prefix_ttl!r} would put a longer-lived breakpoint after a "
            f"shorter one, which {provider} refuses; use prefix_ttl={tail_ttl!r} too"
        )
        raise CacheRuleError(msg)
    (layout, carrying), signature, tail = _planned_layout(
        messages, counter or own_counter or ApproxTokenCounter(), previous, (prefix_digest, prefix_count)
    )
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
            _signature=signature,
            _tail=tail,
            _presets=carrying,
        )
    minimum = rules.minimum_for(model)
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
    chosen: dict[tuple[int, int], tuple[_Position, TTL]] = {}

    def add(position: _Position | None, ttl: TTL) -> None:
        if position is None or position.tokens < minimum or len(chosen) >= budget or position.preset is not None:
            return
        chosen.setdefault((position.message, position.block), (position, ttl))

    add(_last_carrying(layout, prefix_count), prefix_ttl)
    if previous is not None and previous.provider == provider:
        # A key names the request up to its block, so it can only be at the same (message, block) here.
        reached = []
        for _i, p, _ttl in _marked(previous):
            found = _find(layout, p.message, p.block)
            if found is not None and layout[found].key == p.key:
                reached.append(layout[found])
        if reached:
            add(max(reached, key=lambda p: p.tokens), tail_ttl)
    if not automatic:
        add(_last_carrying(layout, len(messages)), tail_ttl)
    points = sorted(
        (Breakpoint(m, k, ttl, position.tokens) for (m, k), (position, ttl) in chosen.items()),
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
        _signature=signature,
        _tail=tail,
        _presets=carrying,
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
            raise ArgumentTypeError(
                msg, argument="source", value=source, expected="a WorkingContext or a FrozenContext"
            )
        return f"workingctx-{str(digest())[:32]}"
    raise _checks.wrong_type(cache, "cache", "True, False, None, a str key or a CachePlan")


# -- what a request reads and writes ------------------------------------------------


_FOREVER = 10**15  # seconds; anything longer is taken for a mistake


def _seconds(value: object, what: str) -> float:
    """
    *value* as a number of seconds: finite and not negative.
    """
    if isinstance(value, bool) or not isinstance(value, int | float | Decimal):
        raise _checks.wrong_type(value, what, "a number of seconds")
    number: int | float | Decimal = value
    finite = number.is_finite() if isinstance(number, Decimal) else isinstance(number, int) or math.isfinite(number)
    if not finite or not 0 <= number < _FOREVER:
        msg = f"{what} must be a finite, non-negative number of seconds (below 10**15), got {value!r}"
        raise CacheRuleError(msg, argument=what, value=value)
    return float(number)


@attrs.define
class _Entry:
    """
    One cache entry: the tokens it holds, its lifetime, and when it was last written or read.
    """

    tokens: int
    ttl: TTL
    used: float


@attrs.frozen
class _Served:
    """
    What one request read and wrote, and what it paid again.
    """

    read: int
    written_5m: int
    written_1h: int
    missed: int  # tokens a live entry held that no breakpoint's lookback reached
    expired: int  # tokens an expired entry held beyond what was read


@attrs.define
class _Cache:
    """
    The provider's cache as a simulation sees it: entries by request identity,
    each gone once it is older than its lifetime (a read renews it).
    """

    rules: CacheRules
    minimum: int
    entries: dict[str, _Entry] = attrs.Factory(dict)

    def _live(self, key: str, now: float) -> _Entry | None:
        entry = self.entries.get(key)
        if entry is None or now - entry.used > self.rules.lifetimes[entry.ttl]:
            return None
        return entry

    def _keep(self, position: _Position, ttl: TTL, now: float) -> None:
        """
        Write the entry ending at *position* for *ttl*, or renew the live one
        there for its own lifetime (renewing is not billed, so it does not
        lengthen the entry).
        """
        entry = self._live(position.key, now)
        if entry is not None:
            entry.used = now
        else:
            self.entries[position.key] = _Entry(position.tokens, ttl, now)

    def _beyond(self, layout: Sequence[_Position], read: int, now: float) -> tuple[int, int]:
        """
        The tokens of the longest live entry of *layout* and of the longest
        expired one after it, where they exceed *read* (else 0): all a
        request's misses depend on. Tokens never decrease along a layout, so
        the positions holding more than *read* are its end, found by a binary
        search, and the walk over them goes back from the end and stops at the
        first live entry. (Which positions hold entries is not a prefix of the
        layout, only marked positions are written, so no search finds them.)
        """
        entries, lifetimes = self.entries, self.rules.lifetimes
        past = bisect.bisect_right(layout, read, key=_TOKENS_OF)
        expired = 0
        for position in itertools.islice(reversed(layout), len(layout) - past):
            if position.key in entries:
                entry = entries[position.key]
                if now - entry.used <= lifetimes[entry.ttl]:
                    return position.tokens, expired
                expired = expired or position.tokens
        return 0, expired

    def send(self, request: CachePlan, now: float = 0.0) -> _Served:
        """
        Serve *request* at *now* (seconds since the run began).
        """
        layout = request._layout
        if not layout:
            return _Served(0, 0, 0, 0, 0)
        if not self.rules.explicit:
            return self._implicit(layout, now)
        marks = [(i, ttl) for i, p, ttl in _marked(request) if p.tokens >= self.minimum]
        read = 0
        hit: _Position | None = None
        for at, _ttl in marks:
            # Each breakpoint looks back for the nearest live entry; the longest found is read.
            for j in range(at, max(at - self.rules.lookback_blocks, -1), -1):
                if self._live(layout[j].key, now) is not None:
                    if layout[j].tokens > read:
                        read, hit = layout[j].tokens, layout[j]
                    break
        reachable, expired = self._beyond(layout, read, now)
        end = max((layout[i].tokens for i, _ in marks), default=0)
        end_1h = max((layout[i].tokens for i, ttl in marks if ttl == "1h"), default=0)
        written_1h = max(0, end_1h - read)
        written = max(0, end - read)
        if hit is not None:
            self.entries[hit.key].used = now
        for i, ttl in marks:
            self._keep(layout[i], ttl, now)
        return _Served(
            read, written - written_1h, written_1h, max(0, reachable - read), max(0, expired - max(read, reachable))
        )

    def _implicit(self, layout: Sequence[_Position], now: float) -> _Served:
        # Every implicit request keeps all its positions, and a position's key
        # names the whole request up to it: a request holding a key holds the
        # keys before it. So the keys of a layout the cache holds are a prefix
        # of it, and so are the live ones (each was used at least as recently
        # as any after it): two binary searches find them, where the longest
        # live one is what is shared and the longest held one what expired.
        entries = self.entries
        held = _prefix_where(len(layout), lambda i: layout[i].key in entries)
        live = _prefix_where(held, lambda i: self._live(layout[i].key, now) is not None)
        shared = layout[live - 1].tokens if live else 0
        expired = layout[held - 1].tokens if held > live else 0
        read = 0
        if shared >= self.minimum:
            read = shared - (shared - self.minimum) % self.rules.step_tokens
        for position in layout[:live]:  # renewed, each for its own lifetime
            entries[position.key].used = now
        for position in layout[live:]:
            entries[position.key] = _Entry(position.tokens, "5m", now)
        return _Served(read, 0, 0, 0, max(0, expired - max(read, shared)))


def _seen_before(layout: Sequence[_Position], seen: set[str]) -> int:
    """
    The tokens of the longest prefix of *layout* an earlier request sent, and
    add its keys to *seen*, which holds the keys of every earlier layout.
    Those keys name their prefixes, so what *seen* holds of *layout* is a
    prefix of it (see :meth:`_Cache._implicit`), found by a binary search,
    and only the keys after it are new.
    """
    held = _prefix_where(len(layout), lambda i: layout[i].key in seen)
    seen.update(p.key for p in layout[held:])
    return layout[held - 1].tokens if held else 0


def _prefix_where(size: int, holds: Callable[[int], bool]) -> int:
    """
    The length of the longest prefix of ``range(size)`` where *holds* is
    true, for a *holds* that is true up to some index and false from there on.
    """
    low, high = 0, size
    while low < high:
        middle = (low + high) // 2
        if holds(middle):
            low = middle + 1
        else:
            high = middle
    return low


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
        expired_tokens: Tokens a cache entry held that had expired (older
            than its lifetime) before the request, beyond what a live entry
            held, so they were paid again.
    """

    shared_tokens: int
    input_tokens: int
    usage: Usage
    cost: Decimal
    uncached_cost: Decimal
    lookback_miss_tokens: int = 0
    expired_tokens: int = 0

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


def _as_plan(
    source: object, provider: str, model: str, previous: CachePlan | None, counter: MessageCounter | None
) -> CachePlan:
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
    counter: MessageCounter | None = None,
    elapsed: float = 0,
) -> CacheReport:
    """
    What *current* will read from the cache *previous* left, and what it will cost.

    Either side is a context, a snapshot, or the :class:`CachePlan` it is sent
    with; a context or snapshot is planned with :func:`plan` (the current one
    with the previous one's plan). *elapsed* is the seconds from the previous
    request to the current one: an entry the previous request wrote that is
    older than its lifetime by then (:attr:`CacheRules.lifetimes`) is written again.

    Raises:
        CacheRuleError: an unknown provider, a plan made for another model, or
            a negative or non-finite *elapsed*.
        PricingError: *model* has no price.
    """
    rules = _rules(provider, model)
    wait = _seconds(elapsed, "elapsed")
    before = _as_plan(previous, provider, model, None, counter)
    after = _as_plan(current, provider, model, before, counter)
    cache = _Cache(rules, rules.minimum_for(model))
    cache.send(before, 0.0)
    served = cache.send(after, wait)
    keys = {p.key for p in before._layout}
    shared = max((p.tokens for p in after._layout if p.key in keys), default=0)
    return _report(model, _total(after), shared, served)


def _total(request: CachePlan) -> int:
    """
    The input tokens of *request*: a plan built by hand may leave total_tokens out, its layout knows them.
    """
    return request._layout[-1].tokens if request._layout else request.total_tokens


def _sent(total: int, served: _Served) -> Usage:
    """
    The input usage of a request of *total* tokens the cache served as *served*.
    """
    written = served.written_5m + served.written_1h
    return Usage(
        input_tokens=max(0, total - served.read - written),
        cache_read_tokens=served.read,
        cache_write_tokens=written,
        cache_write_1h_tokens=served.written_1h,
    )


def _report(model: str, total: int, shared: int, served: _Served) -> CacheReport:
    usage = _sent(total, served)
    return CacheReport(
        shared_tokens=shared,
        input_tokens=total,
        usage=usage,
        cost=_price(model, usage),
        uncached_cost=_price(model, Usage(input_tokens=total)),
        lookback_miss_tokens=served.missed,
        expired_tokens=served.expired,
    )


# -- simulation -----------------------------------------------------------------------


@attrs.frozen
class SimulatedRequest:
    """
    One request of a simulated run: its usage (output included) and cost.

    Attributes:
        at: When it was sent, in seconds since the run's first request.
        lookback_miss_tokens: Tokens a live cache entry held that no
            breakpoint's lookback reached, so they were paid again.
        expired_tokens: Tokens a cache entry held that had expired before
            the request, beyond what a live entry held, so they were paid again.
        best_input_cost: The input cost if the request read from the cache
            everything an earlier request of the run sent, and paid for the
            rest as fresh input.
    """

    usage: Usage
    cost: Decimal
    input_cost: Decimal
    uncached_cost: Decimal
    uncached_input_cost: Decimal
    breakpoints: int
    lookback_miss_tokens: int
    at: float = 0.0
    expired_tokens: int = 0
    best_input_cost: Decimal = Decimal(0)


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

    @property
    def expiry_misses(self) -> int:
        """
        How many requests paid again for tokens a cache entry held, because
        the entry had expired (it was older than its lifetime) when they were sent.
        """
        return sum(1 for r in self.requests if r.expired_tokens)

    @property
    def best_input_cost(self) -> Decimal:
        """
        The lowest input cost any cache plan could reach for these same
        requests: each reads from the cache everything an earlier request
        sent, and pays for the rest as fresh input, with no write premium and
        nothing expired. :attr:`input_cost` is never below it (at prices where
        a read costs no more than fresh input and a write no less).
        """
        return sum((r.best_input_cost for r in self.requests), Decimal(0))


Strategy: TypeAlias = Literal["plan", "auto", "last"] | Callable[[WorkingContext, "CachePlan | None"], CachePlan]


def _flatten(turns: Iterable[Message | Iterable[Message]]) -> Iterable[Message]:
    for turn in turns:
        if isinstance(turn, Message):
            yield turn
        elif isinstance(turn, str | bytes) or not isinstance(turn, Iterable):
            msg = f"turns must hold messages or sequences of messages, got {_checks.described(turn)}"
            raise ArgumentTypeError(msg, argument="turns", value=turn, expected="messages or sequences of messages")
        else:
            for message in turn:
                if not isinstance(message, Message):
                    msg = f"a turn holds {_checks.described(message)}, not a Message"
                    raise ArgumentTypeError(msg, argument="turns", value=message, expected="a Message")
                yield message


def _strategy_plan(
    strategy: Strategy,
    ctx: WorkingContext,
    provider: str,
    model: str,
    previous: CachePlan | None,
    counter: MessageCounter | None,
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
        room = len(made._presets) < rules.max_breakpoints
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
            raise ArgumentTypeError(msg, argument="cache", value=strategy, expected="a strategy returning a CachePlan")
        return made
    msg = f"cache must be 'plan', 'auto', 'last' or a callable (ctx, previous_plan) -> CachePlan, got {strategy!r}"
    raise CacheRuleError(msg)


def _gaps(gaps: object) -> Iterator[float] | None:
    """
    The gaps between requests as an iterator of seconds (a number repeats), or None.
    """
    if gaps is None:
        return None
    if isinstance(gaps, int | float | Decimal) and not isinstance(gaps, bool):
        return itertools.repeat(_seconds(gaps, "gaps"))
    if isinstance(gaps, str | bytes) or not isinstance(gaps, Iterable):
        msg = (
            "gaps must be a number of seconds, an iterable of them (one per gap between requests) or None, "
            f"got {gaps!r} of type {type(gaps).__name__}"
        )
        raise ArgumentTypeError(msg, argument="gaps", value=gaps, expected="seconds, an iterable of them or None")
    return iter(gaps)


def _next_gap(waits: Iterator[float] | None, sent: int) -> float:
    """
    The gap before request number *sent* (counting from 0), checked.
    """
    if waits is None:
        return 0.0
    try:
        gap = next(waits)
    except StopIteration:
        msg = (
            f"gaps ran out after {sent} requests; give one gap per request after the first "
            "(an endless iterator will do), or one number for every gap"
        )
        raise CacheRuleError(msg) from None
    return _seconds(gap, f"gaps[{sent - 1}]")


def simulate(
    turns: Iterable[Message | Iterable[Message]],
    *,
    provider: str,
    model: str,
    manager: Any = None,
    context: WorkingContext | None = None,
    cache: Strategy = "plan",
    counter: MessageCounter | None = None,
    gaps: float | Iterable[float] | None = None,
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

    With *gaps*, time passes between requests: a cache entry older than its
    lifetime when a request is sent (five minutes or an hour for Anthropic,
    five idle minutes for OpenAI and Gemini; see :attr:`CacheRules.lifetimes`)
    is gone, and what it held is written again. A read renews the entry it
    reads. Without *gaps* no time passes and nothing expires.

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
        gaps: Seconds from each request to the next: one number for every
            gap, or an iterable with one per gap in order (it may be endless;
            the first request is sent at 0). None: no time passes.

    Raises:
        CacheRuleError: an unknown provider or strategy, a negative or
            non-finite gap, or fewer gaps than the run needs.
        PricingError: *model* has no price.
        TypeError: a gap that is not a number.
    """
    rules = _rules(provider, model)
    waits = _gaps(gaps)
    ctx = WorkingContext() if context is None else context
    ctx = _checks.check_instance(ctx, "context", WorkingContext, "a WorkingContext or None")
    if manager is not None and not callable(getattr(manager, "trim_context", None)):
        raise _checks.wrong_type(manager, "manager", "a manager with trim_context(ctx)")
    counter = counter or ctx.counter
    count = _counts(counter)
    served = _Cache(rules, rules.minimum_for(model))
    previous: CachePlan | None = None
    requests: list[SimulatedRequest] = []
    seen: set[str] = set()  # every prefix an earlier request sent, for the best cost
    now = 0.0
    for message in _flatten(turns):
        if message.role == "assistant":
            if manager is not None:
                manager.trim_context(ctx)
            made = _strategy_plan(cache, ctx, provider, model, previous, counter)
            if requests:
                now += _next_gap(waits, len(requests))
            result = served.send(made, now)
            output = message.usage.output_tokens if message.usage is not None else count(message)
            total = _total(made)
            sent = _sent(total, result)
            usage = attrs.evolve(sent, output_tokens=output)
            known = _seen_before(made._layout, seen)
            requests.append(
                SimulatedRequest(
                    usage=usage,
                    cost=_price(model, usage),
                    input_cost=_price(model, sent),
                    uncached_cost=_price(model, Usage(input_tokens=total, output_tokens=output)),
                    uncached_input_cost=_price(model, Usage(input_tokens=total)),
                    breakpoints=len(made.breakpoints) + (1 if made.automatic and rules.explicit else 0),
                    lookback_miss_tokens=result.missed,
                    at=now,
                    expired_tokens=result.expired,
                    best_input_cost=_price(model, Usage(input_tokens=total - known, cache_read_tokens=known)),
                )
            )
            previous = made
        ctx.append(message)
    return Simulation(tuple(requests))
