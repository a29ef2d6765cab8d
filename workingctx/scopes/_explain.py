"""
``explain``: a dry run of a scope on a transcript.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import attrs

from workingctx import _checks
from workingctx.exceptions import ArgumentTypeError
from workingctx.messages import Message
from workingctx.prefix import PrefixContext
from workingctx.scopes._algebra import Scope, surviving_indices
from workingctx.tokens import MessageCounter, counting

if TYPE_CHECKING:
    from collections.abc import Iterable

__all__ = ["ScopeReport", "explain"]


def _runs(indices: Iterable[int]) -> str:
    """
    Indices as short runs: ``0, 3-5, 9``.
    """
    parts: list[str] = []
    start = end = -2
    for index in indices:
        if index == end + 1:
            end = index
            continue
        if start >= 0:
            parts.append(str(start) if start == end else f"{start}-{end}")
        start = end = index
    if start >= 0:
        parts.append(str(start) if start == end else f"{start}-{end}")
    return ", ".join(parts) if parts else "none"


@attrs.frozen
class ScopeReport:
    """
    What a scope keeps and drops on a transcript, and what that saves.

    Attributes:
        scope: The scope explained.
        total: How many messages the transcript holds.
        kept: The kept indices, in order.
        dropped: The dropped indices, in order.
        kept_tokens: The tokens of the kept messages.
        saved_tokens: The tokens of the dropped messages: what the scope saves.
        cache_break: The first dropped index: from there on the next request
            differs from the last one, so a provider's prompt cache cannot serve
            it. ``None`` when nothing is dropped.
        cached_tokens: The tokens before ``cache_break``: what the cache can
            still serve (every kept token when nothing is dropped).
        prefix_tokens: The tokens of the context's prefix when a context was
            explained (0 for a bare list): every slice keeps the prefix, so it
            stays cached wherever the tail breaks.
    """

    scope: object
    total: int
    kept: tuple[int, ...]
    dropped: tuple[int, ...]
    kept_tokens: int
    saved_tokens: int
    cache_break: int | None
    cached_tokens: int
    prefix_tokens: int = 0

    def __str__(self) -> str:
        lines = [
            f"{self.scope} keeps {len(self.kept)} of {self.total} messages: {_runs(self.kept)}",
            f"drops {len(self.dropped)}: {_runs(self.dropped)}",
            f"tokens: {self.kept_tokens} kept, {self.saved_tokens} saved of {self.kept_tokens + self.saved_tokens}",
        ]
        if self.cache_break is None:
            lines.append("cached prefix: intact, nothing is dropped")
        elif self.cached_tokens == 0:
            stays = (
                f"the prefix ({self.prefix_tokens} tokens) stays cached"
                if self.prefix_tokens
                else "nothing stays cached"
            )
            lines.append(f"cached prefix: breaks at message {self.cache_break}; {stays}")
        else:
            prefix = f", the prefix's {self.prefix_tokens} included" if self.prefix_tokens else ""
            lines.append(
                f"cached prefix: breaks at message {self.cache_break}; "
                f"the {self.cached_tokens + self.prefix_tokens} tokens before it stay cached{prefix}"
            )
        return "\n".join(lines)


def explain(scope: Scope, messages: object, counter: MessageCounter | None = None) -> ScopeReport:
    """
    A dry run: what *scope* would keep and drop on *messages*, and what that saves.

    Nothing is changed. Messages are numbered as in the tail, and the kept and
    saved tokens are the tail's; a context's prefix is kept by every slice, so it
    is counted apart, in ``prefix_tokens``, and always stays cached. Given a
    context, the scope decides as ``ctx.slice(scope)`` does: a
    :class:`~workingctx.TokenBudget` in it counts the prefix first.

    Args:
        scope: Any scope.
        messages: A sequence of messages, or a context (anything with ``messages``).
        counter: The token counter; ``None`` for the approximate counter.

    Returns:
        A :class:`ScopeReport`.

    Raises:
        TypeError: *scope* is not a scope, or *messages* is not a sequence of messages.

    >>> from workingctx import LastNTurns, Message
    >>> msgs = [Message("system", "House rules.")]
    >>> for i in range(3):
    ...     msgs += [Message("user", f"q{i}"), Message("assistant", f"a{i}")]
    >>> print(explain(LastNTurns(1), msgs))
    LastNTurns(1) keeps 3 of 7 messages: 0, 5-6
    drops 4: 1-4
    tokens: 15 kept, 16 saved of 31
    cached prefix: breaks at message 1; the 7 tokens before it stay cached
    """
    items = _messages_of(messages)
    kept_set = surviving_indices(scope, _as_request(messages, items))
    count = counting(counter)
    counts = [count(message) for message in items]
    kept = tuple(sorted(kept_set))
    dropped = tuple(i for i in range(len(items)) if i not in kept_set)
    kept_tokens = sum(counts[i] for i in kept)
    cache_break = dropped[0] if dropped else None
    prefix = getattr(messages, "prefix", None)
    prefix_messages = prefix.as_messages() if isinstance(prefix, PrefixContext) else []
    return ScopeReport(
        scope=scope,
        total=len(items),
        kept=kept,
        dropped=dropped,
        kept_tokens=kept_tokens,
        saved_tokens=sum(counts) - kept_tokens,
        cache_break=cache_break,
        cached_tokens=kept_tokens if cache_break is None else sum(counts[:cache_break]),
        prefix_tokens=sum(count(message) for message in prefix_messages),
    )


class _Request(Sequence[Message]):
    """
    A context's messages with its prefix's messages beside them, as
    ``ctx.tail_view()`` carries them: what a budget counts.
    """

    __slots__ = ("_items", "prefix_messages")

    def __init__(self, items: Sequence[Message], prefix: Sequence[Message]) -> None:
        self._items = items
        self.prefix_messages = tuple(prefix)

    def __len__(self) -> int:
        return len(self._items)

    def __getitem__(self, index: Any) -> Any:
        return self._items[index]


def _as_request(value: object, items: Sequence[Message]) -> Sequence[Message]:
    """
    What a scope decides over for *value*: a context's tail view (or its
    messages with its prefix), else the messages as they are.
    """
    view = getattr(value, "tail_view", None)
    if callable(view) and not isinstance(value, Sequence):
        found = view()
        if isinstance(found, Sequence) and len(found) == len(items):
            return found
    prefix = getattr(value, "prefix", None)
    if isinstance(prefix, PrefixContext) and not isinstance(value, Sequence):
        return _Request(items, prefix.as_messages())
    return items


def _messages_of(value: object) -> Sequence[Message]:
    items = value if isinstance(value, Sequence) and not isinstance(value, str | bytes) else None
    if items is None:
        inner = getattr(value, "messages", None)
        items = inner if isinstance(inner, Sequence) and not isinstance(inner, str | bytes) else None
    if items is None:
        raise _checks.wrong_type(
            value,
            "messages",
            "a sequence of messages or a context",
            label="explain()",
            verb="needs",
            fix="pass ctx or ctx.messages",
        )
    for position, item in enumerate(items):
        if not isinstance(item, Message):
            msg = f"explain() needs Message values, got {_checks.described(item)} at position {position}"
            raise ArgumentTypeError(msg, argument=f"messages[{position}]", value=item, expected="a Message")
    return items
