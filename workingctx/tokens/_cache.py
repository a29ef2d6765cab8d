"""
The token counts cached on each message, and the approximation's fast paths.

Each message carries its counts in one private slot, keyed by counter name:
:func:`count_cache` is its one reader and writer. Counting a grown transcript
again costs only its new messages; a fresh transcript counted by the
approximation is counted in one loop (:func:`approx_counts`).
"""

from __future__ import annotations

import operator
from itertools import compress, repeat
from operator import attrgetter, is_
from typing import TYPE_CHECKING, Any, NamedTuple

from workingctx import _checks
from workingctx.exceptions import ArgumentTypeError, ArgumentValueError
from workingctx.messages import Message
from workingctx.tokens._rules import (
    CHARS_PER_TOKEN,
    ENCODER,
    MESSAGE_OVERHEAD,
    TOOL_CALL_OVERHEAD,
    ImageRule,
    approx_count,
    call_arguments,
)

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Sequence

__all__ = [
    "APPROX_ANTHROPIC_CACHE",
    "APPROX_CACHE",
    "BATCH_MIN",
    "CountCache",
    "approx_counts",
    "approx_name",
    "approx_total",
    "as_sequence",
    "cached_total",
    "checked_count",
    "count_all",
    "count_cache",
    "relocate",
]

_APPROX = "approx"

BATCH_MIN = 64
"""Fewer uncounted messages than this are counted one by one (and encoded one by one by a tokenizer)."""


def _not_a_message(value: object, position: int) -> TypeError:
    msg = (
        f"token counting needs Message values, got {value!r} of type {type(value).__name__} "
        f"at position {position}; wrap text as Message('user', text)"
    )
    return ArgumentTypeError(msg, argument=f"messages[{position}]", value=value, expected="a Message")


class CountCache(NamedTuple):
    """
    The per-message count cache under one key: see :func:`count_cache`.
    """

    count: Callable[[Message], int]
    """The count of a message: the cached one, else computed and cached."""
    peek: Callable[[Message], int | None]
    """The cached count of a message, or None."""
    store: Callable[[Message, int], None]
    """Cache a count computed elsewhere (by a batch)."""


def _added(found: tuple[str, int] | dict[str, int] | None, key: str, count: int) -> tuple[str, int] | dict[str, int]:
    """
    A message's count slot with *key*'s *count* added: ``(key, count)`` for a
    message one counter counted (most of them), ``{key: count, ...}`` once a
    second counter counts it. Always a new value, so a reader on another
    thread sees the old counts or the new ones.
    """
    if found is None:
        return (key, count)
    if isinstance(found, tuple):
        return {found[0]: found[1], key: count}
    return {**found, key: count}


def cached_total(messages: Sequence[Message], key: str) -> int | None:
    """
    The sum of the counts cached under *key* on every one of *messages*, or
    None as soon as one has none (or is not a message): a warm count in one
    loop, without a call per message.
    """
    total = 0
    try:
        for message in messages:
            found = message._token_counts  # noqa: SLF001  # the cache this module owns, see count_cache
            if found is None:
                return None
            if isinstance(found, tuple):
                if found[0] != key:
                    return None
                total += found[1]
            else:
                hit = found.get(key)
                if hit is None:
                    return None
                total += hit
    except AttributeError:  # not a message: the caller's per-message path names it
        return None
    return total


def count_cache(key: str, compute: Callable[[Message], int], *, approx: bool = False) -> CountCache:
    """
    The one reader and writer of the token counts cached on messages.

    Each message carries its counts in one private slot: a pair ``(key, count)``
    when one counter counted it (a transcript counted by one counter pays one
    small tuple per message), a dict ``{key: count}`` once several did. *key* is the counter's name (two counters with
    the same name give the same counts); *compute* counts a message the cache
    does not know. The functions returned raise a :class:`TypeError` naming
    any value that is not a :class:`~workingctx.Message`. With *approx*, a
    message whose content is text (most of a transcript) is counted by the
    approximation right here, without calling *compute*.
    """

    def peek(message: Message) -> int | None:
        try:
            found = message._token_counts  # noqa: SLF001  # the cache this module owns, see above
        except AttributeError:
            raise _not_a_message(message, 0) from None
        if found is not None:
            if isinstance(found, tuple):
                if found[0] == key:
                    return found[1]
            else:
                hit = found.get(key)
                if hit is not None:
                    return hit
        elif not isinstance(message, Message):
            raise _not_a_message(message, 0)
        return None

    def store(message: Message, count: int) -> None:
        found = message._token_counts  # noqa: SLF001  # the cache this module owns, see above
        if found is not None and (found[0] == key if isinstance(found, tuple) else key in found):
            return  # counted already (the same message twice in one batch)
        object.__setattr__(message, "_token_counts", _added(found, key, count))

    def count(message: Message) -> int:
        # peek() and store() inlined: this is the cost of every count, warm or cold
        try:
            found = message._token_counts  # noqa: SLF001  # the cache this module owns, see above
        except AttributeError:
            raise _not_a_message(message, 0) from None
        if found is not None:
            if isinstance(found, tuple):
                if found[0] == key:
                    return found[1]
            else:
                hit = found.get(key)
                if hit is not None:
                    return hit
        elif not isinstance(message, Message):
            raise _not_a_message(message, 0)
        content = message.content
        if approx and content.__class__ is str:  # approx_count, inlined for text content
            chars = len(content)
            name, answered, calls = message.name, message.tool_call_id, message.tool_calls
            if name is not None:
                chars += len(name)
            if answered is not None:
                chars += len(answered)
            for call in calls:
                chars += len(call.id) + len(call.name) + len(call_arguments(call))
            tokens = chars // CHARS_PER_TOKEN + MESSAGE_OVERHEAD + TOOL_CALL_OVERHEAD * len(calls)
        else:
            tokens = compute(message)
            if tokens.__class__ is not int or tokens < 0:
                tokens = checked_count(tokens, key)
        object.__setattr__(message, "_token_counts", (key, tokens) if found is None else _added(found, key, tokens))
        return tokens

    return CountCache(count, peek, store)


def checked_count(tokens: object, name: str) -> int:
    """
    A count a counter gave, as an int: what sums, budgets and cache plans
    rely on (a negative count would make a longer request cost less).

    Raises:
        ArgumentTypeError: It is not an int (a bool is not a count).
        ArgumentValueError: It is negative.
    """
    if isinstance(tokens, bool) or not hasattr(tokens, "__index__"):
        raise _checks.wrong_type(
            tokens, "counter", "an int count", label=f"token counter {name!r}", verb="gave", fix="return an int >= 0"
        )
    count = operator.index(tokens)
    if count < 0:
        msg = f"token counter {name!r} counted {count} tokens for a message; a count is an int >= 0"
        raise ArgumentValueError(msg, argument="counter", value=tokens)
    return count


_CACHED = attrgetter("_token_counts")
# the slot's own setter: writes the cache of a frozen message without a name lookup per message
_SET_CACHED: Callable[[Message, tuple[Any, ...]], None] = Message.__dict__["_token_counts"].__set__


def approx_counts(sequence: Sequence[Message], images: ImageRule = "openai") -> list[int]:
    """
    The approximate count of each of *sequence*, each cached on its message
    (a fresh list in one pass, see :func:`_one_pass`).

    Raises:
        TypeError: An item is not a :class:`~workingctx.Message`; the message names its position.
    """
    if len(sequence) >= BATCH_MIN and getattr(sequence[0], "_token_counts", 0) is None:
        counts = _one_pass(sequence, images)
        if counts is not None:
            return counts
    cache = APPROX_CACHE if images == "openai" else APPROX_ANTHROPIC_CACHE
    try:
        return list(map(cache.count, sequence))
    except TypeError:
        relocate(sequence)
        raise


def approx_total(sequence: Sequence[Message], images: ImageRule = "openai") -> int:
    """
    The approximate count of *sequence*: the sum of :func:`approx_counts`, without the list when it is cached.
    """
    if len(sequence) >= BATCH_MIN and getattr(sequence[0], "_token_counts", 0) is None:
        counts = _one_pass(sequence, images)
        if counts is not None:
            return sum(counts)
    return count_all(APPROX_CACHE.count if images == "openai" else APPROX_ANTHROPIC_CACHE.count, sequence)


def _one_pass(sequence: Sequence[Message], images: ImageRule) -> list[int] | None:
    """
    For a list that starts with a message never counted (a fresh transcript):
    the messages no counter has counted yet, counted in one loop without a
    call per message and their counts cached in one step, when there are
    enough of them. Returns every count when all were fresh, else None (the
    others are for the per-message cache). The counts are those of
    :func:`approx_count`; a list holding a non-message is left to the
    per-message path, which names it.
    """
    if ENCODER is None:
        return None
    try:
        found = list(map(_CACHED, sequence))
    except AttributeError:  # not a message
        return None
    fresh = list(compress(sequence, map(is_, found, repeat(None))))
    if len(fresh) < BATCH_MIN or not all(map(isinstance, fresh, repeat(Message))):
        return None
    counts = _count_fresh(fresh, images)
    # a new tuple per message, as the per-message cache writes it (the same message twice: the same count)
    list(map(_SET_CACHED, fresh, zip(repeat(approx_name(images)), counts)))
    return counts if len(fresh) == len(sequence) else None


def _count_fresh(messages: list[Message], images: ImageRule) -> list[int]:
    """
    :func:`approx_count` of each of *messages*, with text content counted inline.
    """
    encode: Any = ENCODER
    counts: list[int] = []
    append = counts.append
    for message in messages:
        content = message.content
        if content.__class__ is not str:
            append(approx_count(message, images))
            continue
        chars = len(content)
        name = message.name
        if name is not None:
            chars += len(name)
        answered = message.tool_call_id
        if answered is not None:
            chars += len(answered)
        calls = message.tool_calls
        if calls:
            for call in calls:
                try:  # wire_json(), inlined: the C encoder is all but always enough
                    chars += len("".join(encode(call.arguments, 0)) if call.arguments else call_arguments(call))
                except (TypeError, ValueError, RecursionError):
                    chars += len(call_arguments(call))
                chars += len(call.id) + len(call.name)
            append(chars // CHARS_PER_TOKEN + MESSAGE_OVERHEAD + TOOL_CALL_OVERHEAD * len(calls))
        else:
            append(chars // CHARS_PER_TOKEN + MESSAGE_OVERHEAD)
    return counts


def as_sequence(messages: Iterable[Message]) -> Sequence[Message]:
    return messages if isinstance(messages, list | tuple) else list(messages)


def relocate(messages: Sequence[Message]) -> None:
    """
    After a count failed with a TypeError: raise one that names the first non-message and its position.
    """
    for position, message in enumerate(messages):
        if not isinstance(message, Message):
            raise _not_a_message(message, position) from None


def count_all(count: Callable[[Message], int], messages: Iterable[Message]) -> int:
    """
    The sum of *count* over *messages*, naming the position of a non-message.
    """
    sequence = as_sequence(messages)
    try:
        return sum(map(count, sequence))
    except TypeError:
        relocate(sequence)
        raise


def approx_name(images: ImageRule) -> str:
    """
    The cache key of the approximation's counts under an image rule.
    """
    return _APPROX if images == "openai" else f"{_APPROX}+{images}-images"


APPROX_CACHE = count_cache(_APPROX, approx_count, approx=True)
"""The approximation's counts, images counted by OpenAI's rule."""
APPROX_ANTHROPIC_CACHE = count_cache(
    approx_name("anthropic"), lambda message: approx_count(message, "anthropic"), approx=True
)
"""The approximation's counts, images counted by Anthropic's rule."""
