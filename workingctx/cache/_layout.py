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
from workingctx.tokens import MessageCounter, checked_count, counting

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
    "find_position",
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


def per_message(counter: MessageCounter) -> Callable[[Message], int]:
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
        return checked_count(int(counter.count([message])), name)

    return count


_ROOT_KEY = hashlib.sha256(b"workingctx.cache.layout").hexdigest()
"""The key of an empty request, where every request's chain of keys starts."""


def _next_key(head: str, message: Message) -> str:
    return _sha256(f"{head}:{_shape(message)[0]}".encode("ascii")).hexdigest()


_sha256 = hashlib.sha256


def _shape(message: Message) -> tuple[str, tuple[tuple[bool, TTL | None], ...]]:
    """
    How *message* lays out, computed once and kept on it (a message is
    immutable): the digest of its content without breakpoints (see
    :func:`_unmarked`), and for each of its blocks (see :func:`cache_blocks`)
    whether it can carry a breakpoint and the lifetime of one it carries.
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
        shape = (_unmarked(message).digest(), tuple(facts))
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
"""Held while positions are appended in place at the end of a layout's list."""


class Layout(Sequence[Position]):
    """
    The positions of one request: the first ``len(layout)`` items of a list
    that only grows in place.

    A request that only adds messages to the one before shares that one's
    list: its new positions are appended in place when the list ends where the
    earlier layout ends (else the list is copied), so laying out a growing run
    costs the new messages, not the whole request, and every layout made so far
    still reads the positions it had.
    """

    __slots__ = ("_items", "_size")

    def __init__(self, items: list[Position], size: int) -> None:
        self._items = items
        self._size = size

    @classmethod
    def extending(cls, reused: Sequence[Position], cut: int, more: list[Position]) -> Layout:
        """
        The first *cut* positions of *reused*, then *more* (given away): in
        place at the end of *reused*'s list when it ends there, else in a new list.
        """
        if isinstance(reused, Layout) and cut == reused._size:
            items = reused._items
            if not more:
                return cls(items, cut)
            with _PLACING:
                if len(items) == cut:
                    items.extend(more)
                    return cls(items, cut + len(more))
        items = list(itertools.islice(reused, cut))
        items.extend(more)
        return cls(items, len(items))

    def __len__(self) -> int:
        return self._size

    @overload
    def __getitem__(self, index: int) -> Position: ...

    @overload
    def __getitem__(self, index: slice) -> list[Position]: ...

    def __getitem__(self, index: int | slice) -> Position | list[Position]:
        if isinstance(index, slice):
            picked = range(self._size)[index]
            if picked.step == 1:
                return self._items[picked.start : picked.stop]
            return [self._items[i] for i in picked]
        position = index + self._size if index < 0 else index
        if not 0 <= position < self._size:
            msg = f"layout index {index!r} out of range for {self._size} positions"
            raise IndexError(msg)
        return self._items[position]

    def __iter__(self) -> Iterator[Position]:
        return itertools.islice(self._items, self._size)

    def __reversed__(self) -> Iterator[Position]:
        items = self._items
        return (items[i] for i in range(self._size - 1, -1, -1))

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


def _plain(layout: Sequence[Position]) -> tuple[Sequence[Position], int]:
    """
    A sequence the :mod:`bisect` functions read at C speed holding *layout*'s
    positions first, and how many of them there are: a :class:`Layout`'s
    list (which may run on past it), any other sequence as it is.
    """
    if isinstance(layout, Layout):
        return layout._items, layout._size  # the list the layout reads in place
    return layout, len(layout)


def bisect_left(layout: Sequence[Position], value: Any, key: Callable[[Position], Any]) -> int:
    """
    :func:`bisect.bisect_left` over *layout* by *key*, without a Python call per probe.
    """
    items, size = _plain(layout)
    found: int = bisect.bisect_left(items, value, 0, size, key=key)
    return found


def bisect_right(layout: Sequence[Position], value: Any, key: Callable[[Position], Any]) -> int:
    """
    :func:`bisect.bisect_right` over *layout* by *key*, without a Python call per probe.
    """
    items, size = _plain(layout)
    found: int = bisect.bisect_right(items, value, 0, size, key=key)
    return found


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
    by a few messages costs those messages.
    """
    cut = bisect_left(reused, start, MESSAGE_OF) if start else 0
    positions: list[Position] = []  # the new ones
    presets = [p for p in reused_presets if p.message < start] if cut else []
    if cut:
        last = reused[cut - 1]
        m0, before, head = last.message + 1, last.tokens, last.key.rpartition(":")[0]
    else:
        m0, before, head = 0, 0, _ROOT_KEY
    count = per_message(counter)
    append = positions.append
    made = _made
    for m, message in enumerate(messages[m0:], m0):  # a slice: one copy, no call per message
        tokens = count(message)
        shape = _shape(message)
        head = _sha256(f"{head}:{shape[0]}".encode("ascii")).hexdigest()  # _next_key, inlined
        blocks = shape[1]
        size = len(blocks)
        for k, (carries, preset) in enumerate(blocks):
            # A message's tokens are shared evenly among its blocks; the last block ends the message.
            position = made(m, k, before + (tokens * (k + 1)) // size, carries, f"{head}:{k}", preset)
            append(position)
            if preset is not None:
                presets.append(position)
        before += tokens
    return Layout.extending(reused, cut, positions), tuple(presets)


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
    return i if i < len(layout) and AT(layout[i]) == at else None


def layout_key(messages: Sequence[Message]) -> str:
    """
    The key :func:`lay_out` gives the last message of *messages*.
    """
    head = _ROOT_KEY
    for message in messages:
        head = _next_key(head, message)
    return head
