"""
A request as the provider's cache sees it: its blocks in order, which can carry
a breakpoint, the tokens through each, and a key naming the request up to each.
"""

from __future__ import annotations

import bisect
import hashlib
import itertools
import operator
import threading
from collections.abc import Callable, Iterator, Sequence
from operator import attrgetter
from typing import Any, overload

import attrs

from workingctx import _checks
from workingctx.cache._rules import TTL
from workingctx.messages import ContentBlock, Message, TextBlock, ToolCall
from workingctx.tokens import ApproxTokenCounter, MessageCounter, TiktokenCounter, checked_count, counting

__all__ = [
    "AT",
    "MESSAGE_OF",
    "TOKENS_OF",
    "Layout",
    "Position",
    "bisect_left",
    "bisect_right",
    "cache_blocks",
    "can_carry_breakpoint",
    "chain_modulus",
    "chain_power",
    "chain_root",
    "chained_through",
    "find_position",
    "is_layout_key",
    "keys",
    "last_tokens",
    "lay_out",
    "layout_key",
    "per_message",
]


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
    kind = type(block)
    found = _CACHEABLE.get(kind)
    if found is None:
        found = _CACHEABLE[kind] = "cache" in attrs.fields_dict(kind)
    return found


_CACHEABLE: dict[type, bool] = {}
"""Whether each block type has a ``cache`` field (types are few; a race only computes one twice)."""


def _preset(block: str | ContentBlock | ToolCall) -> TTL | None:
    """
    The lifetime of a breakpoint already set on *block* (``cache=CacheBreakpoint(...)``), or None.
    """
    mark = getattr(block, "cache", None)
    if mark is None:
        return None
    return "1h" if mark.ttl == "1h" else "5m"


@attrs.frozen
class Position:
    message: int
    block: int
    tokens: int  # request tokens up to and including this block
    carries: bool
    key: str  # identity of the request up to and including this block
    preset: TTL | None = None  # a breakpoint the block already carries


def _position_maker() -> Callable[[int, int, int, bool, str, TTL | None], Position]:
    """
    A maker of positions that fills their slots directly: :func:`lay_out`
    makes one per block of every request, where the frozen class's own
    ``__init__`` (one ``object.__setattr__`` per field) is most of the cost.
    Falls back to the constructor when a field is not a plain slot.
    """
    names = [field.name for field in attrs.fields(Position)]
    descriptors = [Position.__dict__.get(name) for name in names]
    if not all(type(found).__name__ == "member_descriptor" for found in descriptors) or "__attrs_post_init__" in (
        Position.__dict__
    ):
        return Position
    (
        set_message,
        set_block,
        set_tokens,
        set_carries,
        set_key,
        set_preset,
    ) = (found.__set__ for found in descriptors)  # type: ignore[union-attr]  # member descriptors
    new = object.__new__

    def made(message: int, block: int, tokens: int, carries: bool, key: str, preset: TTL | None) -> Position:
        position: Position = new(Position)
        set_message(position, message)
        set_block(position, block)
        set_tokens(position, tokens)
        set_carries(position, carries)
        set_key(position, key)
        set_preset(position, preset)
        return position

    return made


_made = _position_maker()


_BUILT_IN = frozenset({ApproxTokenCounter, TiktokenCounter})
"""The counters of this package, message counters without a protocol check."""


def per_message(counter: MessageCounter) -> Callable[[Message], int]:
    """
    The per-message count of *counter*, resolved once for a whole request (a
    runtime protocol check costs more than counting a cached message).

    Raises:
        ArgumentValueError: a negative count (a layout's tokens never decrease,
            and the cache simulation relies on it), as for a message counter.
    """
    if type(counter) in _BUILT_IN or isinstance(counter, MessageCounter):  # a protocol check costs microseconds
        return counting(counter)

    name = getattr(counter, "name", None) or type(counter).__name__

    def count(message: Message) -> int:  # an older counter with only count(messages)
        return checked_count(int(counter.count([message])), name)

    return count


_MODULUS = (1 << 127) - 1
"""The Mersenne prime the chain of a request's keys is computed modulo."""


def _constant(name: bytes) -> int:
    return int(hashlib.sha256(name).hexdigest()[:32], 16) % _MODULUS


_BASE = _constant(b"workingctx.cache.layout base")
"""The number a request's chain value is multiplied by at each message (see :func:`lay_out`)."""
_ROOT = _constant(b"workingctx.cache.layout")
"""The chain value of an empty request, where every request's chain starts."""
_ROOT_KEY = hex(_ROOT)
"""The chain key of an empty request."""


def _chained(value: int, digest: str) -> int:
    """
    The chain value of a request through a message, from *value*, the chain
    value of the request before it, and *digest*, the message's digest
    without breakpoints (see :func:`_shape`).
    """
    return (value * _BASE + int(digest[:32], 16)) % _MODULUS


_POWERS = [1]
"""``_BASE ** k % _MODULUS`` at each index *k*, as far as a layout has needed; it only grows in place."""

_GROWING = threading.Lock()


def _grow_powers(count: int) -> list[int]:
    """
    :data:`_POWERS`, grown in place to hold ``_BASE ** count % _MODULUS``.
    """
    powers = _POWERS
    if len(powers) <= count:
        with _GROWING:
            last, more = powers[-1], []
            for _ in range(count + 1 - len(powers)):
                last = last * _BASE % _MODULUS
                more.append(last)
            powers += more
    return powers


def chain_power(count: int) -> int:
    """
    ``B ** count mod P``, the factor a chain value is lifted by over *count*
    messages (see :func:`lay_out`), without copying the powers before it.
    """
    powers = _POWERS
    return powers[count] if count < len(powers) else _grow_powers(count)[count]


def chain_root() -> int:
    """
    The chain value of an empty request (``R``, see :func:`lay_out`).
    """
    return _ROOT


def chain_modulus() -> int:
    """
    The prime chain values are computed modulo (``P``, see :func:`lay_out`).
    """
    return _MODULUS


def chained_through(value: int, message: Message) -> int:
    """
    The chain value of a request through *message*, from *value*, the chain value of the request before it.
    """
    return _chained(value, _shape(message)[0])


def _shape(message: Message) -> tuple[str, tuple[tuple[bool, TTL | None], ...], bool]:
    """
    How *message* lays out, computed once and kept on it (a message is
    immutable): the digest of its content without breakpoints (see
    :func:`_unmarked`), for each of its blocks (see :func:`cache_blocks`)
    whether it can carry a breakpoint and the lifetime of one it carries,
    and whether any carries one.
    """
    try:
        shape = message._cache_shape  # the cache this module owns (see Message)
    except AttributeError:  # a message unpickled from a version without the slot
        shape = None
    if shape is None:
        facts = []
        for block in cache_blocks(message):
            carries = can_carry_breakpoint(block)
            facts.append((carries, _preset(block) if carries else None))
        shape = (_unmarked(message).digest(), tuple(facts), any(preset is not None for _, preset in facts))
        object.__setattr__(message, "_cache_shape", shape)
    return shape


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


_PLACING = threading.Lock()
"""Held while a layout's lists grow in place at their end."""


class _Run:
    """
    The lists behind the layouts of a growing run, which only grow in place:
    for each message, its chain number (see below), the request tokens
    through it and the message itself; for each position, its message, its
    block, the request tokens through it and its block's facts (whether it
    can carry a breakpoint, and the lifetime of one it carries). A message's
    positions are its blocks, in order: the first of message *m* is where a
    binary search of the positions' messages finds *m*.

    The chain value of the request through a message (its chain key is the
    hex form, made when a key is read) is its chain number, lifted by the
    piece of the run holding it: a run of messages moved after others (a cut
    front) keeps the chain numbers it had, and one ``(start, lift)`` piece
    says what they become, ``V(m) = (lift * B**(m - start + 1) + number(m)) mod P``
    (see :func:`lay_out`), so a cut costs no arithmetic per message. Messages
    before the first piece are not lifted. A message appended after the last
    piece goes on with that piece: its number is chained from the number
    before it, as its value would be from the value before it.

    A run with pieces keeps the values it has lifted (``lifted``, None where
    not read yet), so each is lifted once however many requests read it.

    The lists of tokens (a message's end, a position's tokens) and of
    positions' messages hold each value less the run's ``token_base`` and
    ``message_base``: a cut moves the bases, and copies the lists of the
    messages it moves as they are.
    """

    __slots__ = (
        "blocks", "ends", "facts", "lifted", "lifts", "message_base", "messages", "sources", "starts", "token_base",
        "tokens", "values",
    )  # fmt: skip

    def __init__(self) -> None:
        self.values: list[int] = []  # chain numbers
        self.ends: list[int] = []
        self.sources: list[Message] = []
        self.messages: list[int] = []
        self.blocks: list[int] = []
        self.tokens: list[int] = []
        self.facts: list[tuple[bool, TTL | None]] = []
        self.starts: list[int] = []  # the first message of each piece, ascending
        self.lifts: list[int] = []  # the lift of each piece
        self.lifted: list[int | None] | None = None  # with pieces: each message's value once lifted, else None
        # the lists of tokens (ends, tokens) and of positions' messages hold each value less these
        self.token_base = 0
        self.message_base = 0

    def value(self, message: int) -> int:
        """
        The chain value of the request through *message*.
        """
        lifted = self.lifted
        if lifted is None:
            return self.values[message]
        if message < len(lifted):  # the run may have just grown its numbers, not yet this list
            found = lifted[message]
            if found is not None:
                return found
        number = self.values[message]
        starts = self.starts
        if message < starts[0]:
            return number
        piece = bisect.bisect_right(starts, message) - 1
        lift = self.lifts[piece]
        value = (lift * chain_power(message - starts[piece] + 1) + number) % _MODULUS if lift else number
        if message < len(lifted):
            lifted[message] = value  # the same value whichever thread writes it
        return value

    def values_between(self, low: int, high: int) -> list[int]:
        """
        The chain values of the requests through messages *low* to *high*
        (excluded), piece by piece, without a Python call per message.
        """
        lifted = self.lifted
        if lifted is None:
            return self.values[low:high]
        kept = lifted[low:high]
        if len(kept) < high - low:  # the run has just grown its numbers, not yet this list
            return self._lift_between(low, high)
        try:
            start = low + kept.index(None)  # those before it are lifted already (most often, all but the newest)
        except ValueError:
            return kept  # type: ignore[return-value]  # no None in it
        out = self._lift_between(start, high)
        lifted[start:high] = out  # the same values whichever thread writes them, the length unchanged
        return [*kept[: start - low], *out]  # type: ignore[list-item]  # lifted before start

    def _lift_between(self, low: int, high: int) -> list[int]:
        values, starts = self.values, self.starts
        out: list[int] = []
        bounds = [*starts, high]
        piece = max(bisect.bisect_right(starts, low) - 1, -1)
        at = low
        while at < high:
            end = min(bounds[piece + 1], high)
            lift = self.lifts[piece] if piece >= 0 else 0
            if lift:
                repeat = itertools.repeat
                powers = _grow_powers(end - starts[piece])[at - starts[piece] + 1 : end - starts[piece] + 1]
                lifted = map(operator.add, map(operator.mul, repeat(lift), powers), values[at:end])
                out += map(operator.mod, lifted, repeat(_MODULUS))
            else:
                out += values[at:end]
            at, piece = end, piece + 1
        return out

    def piece_of(self, message: int) -> tuple[int, int]:
        """
        The start and the lift of the piece holding *message* (``(0, 0)``
        before the first: no lift), which messages appended after it go on with.
        """
        piece = bisect.bisect_right(self.starts, message) - 1
        return (self.starts[piece], self.lifts[piece]) if piece >= 0 else (0, 0)

    def lift(self, head: list[int | None] | None, moved: int) -> None:
        """
        Keep the values lifted of a new run with pieces: those of its first
        messages, *head* (None: they are its numbers), then *moved* not read yet.
        """
        if self.starts:
            self.lifted = (self.values[: len(self.values) - moved] if head is None else head) + [None] * moved

    def cut(self, count: int, size: int) -> _Run:
        """
        A new run holding the first *count* messages and *size* positions of this one.
        """
        run = _Run()
        run.token_base, run.message_base = self.token_base, self.message_base
        run.values, run.ends = self.values[:count], self.ends[:count]
        run.sources = self.sources[:count]
        run.messages, run.blocks = self.messages[:size], self.blocks[:size]
        run.tokens, run.facts = self.tokens[:size], self.facts[:size]
        kept = bisect.bisect_left(self.starts, count)
        run.starts, run.lifts = self.starts[:kept], self.lifts[:kept]
        if kept and self.lifted is not None:
            run.lifted = self.lifted[:count]
        return run

    def extend(self, more: _Run) -> None:
        """
        Append *more*, whose chain numbers go on from this run's last one, and
        whose tokens and messages are less this run's bases (*more* has no pieces).
        """
        self.values += more.values
        self.ends += more.ends
        self.sources += more.sources
        self.messages += more.messages
        self.blocks += more.blocks
        self.tokens += more.tokens
        self.facts += more.facts
        if self.lifted is not None:
            self.lifted += itertools.repeat(None, len(more.values))


class Layout(Sequence[Position]):
    """
    The positions of one request: the first ``len(layout)`` positions (and
    first :attr:`count` messages) of a run whose lists only grow in place.
    A position is made when it is read; what the cache simulation reads of
    every position (tokens, messages, keys) is read from the lists.

    A request that only adds messages to the one before shares that one's
    run: its new messages are appended in place when the run ends where the
    earlier layout ends (else the run is copied), so laying out a growing run
    costs the new messages, not the whole request, and every layout made so
    far still reads the positions it had.
    """

    __slots__ = ("_count", "_run", "_size")

    def __init__(self, run: _Run, count: int, size: int) -> None:
        self._run = run
        self._count = count  # messages
        self._size = size  # positions

    @property
    def message_count(self) -> int:
        """
        How many messages the request holds (some may have no position).
        """
        return self._count

    def head(self, message: int) -> str:
        """
        The chain key of the request through message *message*: the key of
        each of its positions is this key, ``":"`` and the block's index.
        """
        if not 0 <= message < self._count:
            msg = f"layout message {message!r} out of range for {self._count} messages"
            raise IndexError(msg)
        return hex(self._run.value(message))

    def key(self, index: int) -> str:
        """
        The key of the position at *index* (``layout[index].key``, without making the position).
        """
        run = self._run
        return f"{hex(run.value(run.messages[index] + run.message_base))}:{run.blocks[index]}"

    def token(self, index: int) -> int:
        """
        The request tokens through the position at *index* (``layout[index].tokens``, without making the position).
        """
        run = self._run
        return run.tokens[index] + run.token_base

    def message_at(self, index: int) -> int:
        """
        The message of the position at *index* (``layout[index].message``, without making the position).
        """
        run = self._run
        return run.messages[index] + run.message_base

    def _position(self, index: int) -> Position:
        run = self._run
        message, block = run.messages[index] + run.message_base, run.blocks[index]
        carries, preset = run.facts[index]
        tokens = run.tokens[index] + run.token_base
        return _made(message, block, tokens, carries, f"{hex(run.value(message))}:{block}", preset)

    def __len__(self) -> int:
        return self._size

    @overload
    def __getitem__(self, index: int) -> Position: ...

    @overload
    def __getitem__(self, index: slice) -> list[Position]: ...

    def __getitem__(self, index: int | slice) -> Position | list[Position]:
        if isinstance(index, slice):
            return [self._position(i) for i in range(self._size)[index]]
        position = index + self._size if index < 0 else index
        if not 0 <= position < self._size:
            msg = f"layout index {index!r} out of range for {self._size} positions"
            raise IndexError(msg)
        return self._position(position)

    def __iter__(self) -> Iterator[Position]:
        return map(self._position, range(self._size))

    def __reversed__(self) -> Iterator[Position]:
        return map(self._position, range(self._size - 1, -1, -1))

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Layout | tuple | list):
            return NotImplemented
        return len(self) == len(other) and all(map(operator.eq, self, other))

    __hash__ = None  # type: ignore[assignment]  # compared by value, like the tuple it stands for

    def __reduce__(self) -> tuple[type[tuple[Position, ...]], tuple[tuple[Position, ...]]]:
        # a stored plan holds its layout as a tuple, as it always has (earlier versions load it)
        return tuple, (tuple(self),)

    def __repr__(self) -> str:
        return f"Layout({list(self)!r})"


def last_tokens(layout: Sequence[Position]) -> int:
    """
    The request tokens through the last position of *layout* (0 for none), without making the position.
    """
    if isinstance(layout, Layout):
        return layout.token(layout._size - 1) if layout._size else 0
    return layout[-1].tokens if layout else 0


def keys(layout: Sequence[Position]) -> Iterator[str]:
    """
    The key of every position of *layout*, in order.
    """
    if isinstance(layout, Layout):
        # each message's chain key made once, for all its blocks
        run, size = layout._run, layout._size
        heads = list(map(hex, run.values_between(0, layout._count)))
        messages = map(operator.add, run.messages[:size], itertools.repeat(run.message_base))
        return map("{}:{}".format, map(heads.__getitem__, messages), run.blocks[:size])
    return (position.key for position in layout)


def _search(layout: Sequence[Position], value: Any, key: Callable[[Position], Any], *, right: bool) -> int:
    """
    :func:`bisect.bisect_left` (or, when *right*, :func:`bisect.bisect_right`)
    over *layout* by *key*: over a :class:`Layout`'s list of tokens or of
    messages as it is (it may run on past the layout), and by
    ``(message, block)`` from its messages (a message's positions are its
    blocks in order, from 0); over any other sequence with *key*.
    """
    search: Callable[..., int] = bisect.bisect_right if right else bisect.bisect_left
    if not isinstance(layout, Layout):
        return search(layout, value, 0, len(layout), key=key)
    run, size = layout._run, layout._size
    if key is TOKENS_OF:
        return search(run.tokens, value - run.token_base, 0, size)
    if key is MESSAGE_OF:
        return search(run.messages, value - run.message_base, 0, size)
    if key is AT:
        at: tuple[int, int] = value
        message, block = at
        message -= run.message_base
        low = bisect.bisect_left(run.messages, message, 0, size)
        high = bisect.bisect_right(run.messages, message, low, size)
        return low + min(max(block + right, 0), high - low)
    return search(list(layout), value, 0, size, key=key)


def bisect_left(layout: Sequence[Position], value: Any, key: Callable[[Position], Any]) -> int:
    """
    :func:`bisect.bisect_left` over *layout* by *key*, without a Python call per probe.
    """
    return _search(layout, value, key, right=False)


def bisect_right(layout: Sequence[Position], value: Any, key: Callable[[Position], Any]) -> int:
    """
    :func:`bisect.bisect_right` over *layout* by *key*, without a Python call per probe.
    """
    return _search(layout, value, key, right=True)


def lay_out(
    messages: Sequence[Message],
    counter: MessageCounter,
    reused: Sequence[Position] = (),
    start: int = 0,
    reused_presets: Sequence[Position] = (),
) -> tuple[Layout, tuple[Position, ...]]:
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
    by a few messages costs those messages. When the messages after those
    are those of a run of *reused*'s later messages (the same objects, see
    :func:`_moved`), as when a manager cut the front of the tail, that run's
    positions are taken too, moved and shifted by list operations, and only
    the messages after it are laid out one by one.
    (Only a :class:`Layout` is reused; the positions of any other sequence
    are laid out again.)

    The chain key of the request through a message is the hex form of its
    chain value, ``V(m) = (V(m - 1) * B + d(m)) mod P`` over the request's
    messages, from ``V(-1) = R``: ``P`` is the Mersenne prime ``2**127 - 1``,
    ``d(m)`` the number in the first 128 bits of the message's digest without
    breakpoints, ``B`` and ``R`` constants drawn from sha256 (:data:`_BASE`,
    :data:`_ROOT`). So equal request prefixes have equal keys in every
    process, and the values of a run of messages moved after other ones
    follow from the values the run had, one arithmetic step each:
    ``V'(m) = (V'(k) - V(i - 1)) * B**(m - i + 1) + V(m) mod P`` for the run
    from message *i*, now after message *k*.

    Two different request prefixes of at most *n* messages share a value
    only when two different messages' ``d`` are equal modulo ``P`` (a
    collision of sha256 on 127 bits), or when ``B`` is a root of their
    difference, a nonzero polynomial of degree at most *n*: for requests not
    made with ``B`` in mind, with probability at most ``n / P`` (about
    ``n * 2**-127``). A replay sending ``10**9`` different prefixes of up to
    ``10**4`` messages compares about ``5 * 10**17`` pairs, and finds two
    that share a key with probability below ``10**-16``. (``B`` is public:
    keys tell requests apart in a simulation; they do not resist requests
    built to collide.)
    """
    old = reused if isinstance(reused, Layout) else None
    count = min(start, old._count, len(messages)) if old is not None else 0
    rest = messages[count:]  # a slice: one copy, no call per message
    if type(rest) is not list:
        rest = list(rest)
    base, presets = _moved(old, count, rest, reused_presets) if old is not None else (None, [])
    if base is not None:  # a run of the earlier layout's messages follows the first count
        at = len(base.values)  # where the messages laid out one by one begin
        rest = rest[at - count :]
        size, before, value, token_base, message_base = (
            len(base.tokens), base.ends[-1], base.values[-1], base.token_base, base.message_base
        )  # fmt: skip
        start, lift = base.piece_of(len(base.values) - 1)
    elif old is not None and count:
        at, run, token_base, message_base = count, old._run, old._run.token_base, old._run.message_base
        size = bisect.bisect_left(run.messages, count - message_base, 0, old._size)  # message count's first position
        before, value = run.ends[count - 1], run.values[count - 1]
        start, lift = run.piece_of(count - 1)  # the piece the messages after the first count go on with
    else:
        at, size, before, value, start, lift, token_base, message_base = count, 0, 0, _ROOT, 0, 0, 0, 0
    more = _Run()
    values, ends = more.values, more.ends
    of_message, of_block, through, facts = more.messages, more.blocks, more.tokens, more.facts
    more.sources = rest
    tokens_of = per_message(counter)
    repeat, made, base_value, modulus = itertools.repeat, _made, _BASE, _MODULUS
    first = size
    # the tokens and messages kept less the bases of the run they join (before is read from it)
    for m, message in enumerate(rest, at - message_base):
        tokens = tokens_of(message)
        digest, blocks, marked = _shape(message)
        value = (value * base_value + int(digest[:32], 16)) % modulus  # _chained, inlined
        values.append(value)
        width = len(blocks)
        if width == 1:
            of_message.append(m)
            of_block.append(0)
            through.append(before + tokens)
        elif width:
            # A message's tokens are shared evenly among its blocks; the last block ends the message.
            of_message += repeat(m, width)
            of_block += range(width)
            through += [before + (tokens * (k + 1)) // width for k in range(width)]
        facts += blocks
        if marked:
            actual = m + message_base
            head = hex((lift * chain_power(actual - start + 1) + value) % modulus if lift else value)
            presets.extend(
                made(actual, k, through[first - size + k] + token_base, carries, f"{head}:{k}", preset)
                for k, (carries, preset) in enumerate(blocks)
                if preset is not None
            )
        first += width
        before += tokens
        ends.append(before)
    if base is not None:
        base.extend(more)
        return Layout(base, at + len(rest), first), tuple(presets)
    return _extended(old, count, size, more), tuple(presets)


def _moved(
    reused: Layout, count: int, rest: list[Message], reused_presets: Sequence[Position]
) -> tuple[_Run | None, list[Position]]:
    """
    The run of a request whose first *count* messages are those of *reused*
    and whose next messages, *rest*, go on with a run of *reused*'s later
    messages, one for one, made by :func:`_shifted`, or
    None; with the positions of the first *count* messages and the run
    carrying a breakpoint, of *reused*'s, *reused_presets*.

    The run starts at *reused*'s first message after its first *count* that
    is ``rest[0]`` (the same object), and goes on while the messages are the
    same objects (an equal message may lay out otherwise: ``1 == 1.0``, yet
    their digests and tokens differ): both found without a Python call per message.
    """
    presets = [p for p in reused_presets if p.message < count]
    end = reused._count
    if count >= end or not rest:
        return None, presets
    sources, is_ = reused._run.sources, operator.is_
    found = next(
        itertools.compress(
            itertools.count(count), map(is_, itertools.islice(sources, count, end), itertools.repeat(rest[0]))
        ),
        None,
    )
    if found is None:
        return None, presets
    length = min(len(rest), end - found)
    # the same objects only: equal messages may still differ in digest and tokens (1 == 1.0 == True)
    moved = next(itertools.compress(itertools.count(), map(operator.is_not, rest[:length], sources[found:])), length)
    return _shifted(reused, count, found, moved, reused_presets, presets), presets


def _shifted(
    reused: Layout, count: int, found: int, moved: int, reused_presets: Sequence[Position], presets: list[Position]
) -> _Run:
    """
    The run of a request holding the first *count* messages of *reused*, then
    its *moved* messages from message *found* on (``found >= count``), with
    the positions that carry a breakpoint. The moved messages' lists are
    copied as they are: the new run's bases move by the messages dropped
    before them and those messages' tokens (the first *count* messages'
    lists are shifted back by as much), and its pieces lift their chain
    numbers as :func:`lay_out` says (see :class:`_Run`). The moved positions
    of *reused_presets* (*reused*'s positions carrying a breakpoint) are added
    to *presets*, shifted.
    """
    run = reused._run
    end = found + moved
    messages, size, first = run.messages, reused._size, run.message_base
    # the first positions of messages count, found and end (a message's positions are its blocks, in order)
    low = bisect.bisect_left(messages, count - first, 0, size)
    start = bisect.bisect_left(messages, found - first, low, size)
    stop = bisect.bisect_left(messages, end - first, start, size)
    shift = count - found
    base = run.token_base  # the request tokens through a message are its end and the base
    tokens = (run.ends[count - 1] + base if count else 0) - (run.ends[found - 1] + base if found else 0)
    lift = ((run.value(count - 1) if count else _ROOT) - (run.value(found - 1) if found else _ROOT)) % _MODULUS
    new = run.cut(count, low)
    new.values += run.values[found:end]  # the chain numbers as they were: the moved pieces lift them
    _move_pieces(run, new, found, end, shift, lift)
    new.lift(new.lifted, moved)
    # The moved messages keep their lists as they were, and the new run's bases move by the
    # cut: only the first count messages' lists (the prefix, most often) are shifted back.
    if shift or tokens:
        add, repeat = operator.add, itertools.repeat
        new.token_base += tokens
        new.message_base += shift
        new.ends[:] = map(add, new.ends, repeat(-tokens))
        new.messages[:] = map(add, new.messages, repeat(-shift))
        new.tokens[:] = map(add, new.tokens, repeat(-tokens))
    new.ends += run.ends[found:end]
    new.sources += run.sources[found:end]
    new.messages += run.messages[start:stop]
    new.blocks += run.blocks[start:stop]
    new.tokens += run.tokens[start:stop]
    new.facts += run.facts[start:stop]
    made = _made
    presets += [
        made(
            p.message + shift,
            p.block,
            p.tokens + tokens,
            p.carries,
            f"{hex(new.value(p.message + shift))}:{p.block}",
            p.preset,
        )
        for p in reused_presets
        if found <= p.message < end
    ]
    return new


def _move_pieces(run: _Run, new: _Run, found: int, end: int, shift: int, lift: int) -> None:
    """
    Add to *new* the pieces of *run*'s messages *found* to *end* (excluded),
    moved by *shift* messages and lifted by *lift* more: a piece from
    message *p* lifted by ``λ`` that now starts at ``q >= p``, after messages
    whose chain values rose by *lift* from message *found* on, is lifted by
    ``lift * B**(q - found) + λ * B**(q - p)`` (see :class:`_Run`).
    """
    starts, lifts = run.starts, run.lifts
    piece = bisect.bisect_right(starts, found) - 1  # the piece holding message found (-1: none, not lifted)
    pieces = [(found, 0)] if piece < 0 else []
    pieces += zip(starts[max(piece, 0) :], lifts[max(piece, 0) :], strict=True)
    for p, old in pieces:
        if p >= end:
            break
        q = max(p, found)
        moved = (lift * chain_power(q - found) + old * chain_power(q - p)) % _MODULUS
        if moved or (new.lifts and new.lifts[-1]):  # a piece of no lift after none is no piece
            new.starts.append(q + shift)
            new.lifts.append(moved)


def _extended(reused: Layout | None, count: int, size: int, more: _Run) -> Layout:
    """
    The layout of the first *count* messages (*size* positions) of *reused*
    then *more*: in place at the end of *reused*'s run when it ends there,
    else in a new run.
    """
    added = len(more.values)
    if reused is None or not count:
        return Layout(more, added, len(more.tokens))
    run = reused._run
    if count == reused._count:
        if not added:
            return reused
        with _PLACING:
            if len(run.values) == count and len(run.tokens) == size:
                run.extend(more)
                return Layout(run, count + added, size + len(more.tokens))
    run = run.cut(count, size)
    run.extend(more)
    return Layout(run, count + added, size + len(more.tokens))


MESSAGE_OF = attrgetter("message")
TOKENS_OF = attrgetter("tokens")
AT = attrgetter("message", "block")


def find_position(layout: Sequence[Position], message: int, block: int) -> int | None:
    """
    The index of the position of block *block* of message *message* in
    *layout*, or None: a layout is in (message, block) order, so a binary search.
    """
    at = (message, block)
    i = bisect_left(layout, at, AT)
    if isinstance(layout, Layout):
        run = layout._run
        return (
            i if i < layout._size and run.messages[i] + run.message_base == message and run.blocks[i] == block else None
        )
    return i if i < len(layout) and AT(layout[i]) == at else None


def layout_key(messages: Sequence[Message]) -> str:
    """
    The chain key :func:`lay_out` gives the last message of *messages*.
    """
    value = _ROOT
    for message in messages:
        value = _chained(value, _shape(message)[0])
    return hex(value)


def is_layout_key(messages: Sequence[Message], head: str) -> bool:
    """
    Whether *head* is the chain key of the last message of *messages*: the
    key :func:`layout_key` gives, or the sha256 chain earlier versions gave
    (held by a plan unpickled from one, whose layout is kept as it was).
    """
    if head.startswith("0x"):
        return layout_key(messages) == head
    chained = hashlib.sha256(b"workingctx.cache.layout").hexdigest()
    for message in messages:
        chained = hashlib.sha256(f"{chained}:{_shape(message)[0]}".encode("ascii")).hexdigest()
    return chained == head
