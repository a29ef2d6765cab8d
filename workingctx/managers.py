"""
Context managers: trim or summarize a context before each model call.

Each manager is a composition of scopes plus, for summarizing, one injected
summarizer call. A manager edits the context it is given in place (the prefix,
scratchpad and journal stay as they are, so the cache key of the prefix and the
journal's history survive) and returns that same context, so calls chain.
A manager never drops a system message and never leaves a tool result without
its call, or a call it keeps without its results.

>>> from workingctx import Message, WorkingContext
>>> ctx = WorkingContext(messages=[
...     Message("system", "You are terse."),
...     Message("user", "First question"),
...     Message("assistant", "First answer"),
...     Message("user", "Second question"),
... ])
>>> trimmed = MessageContextManager(max_messages=1).trim_context(ctx)
>>> trimmed is ctx, [m.text() for m in ctx.messages]
(True, ['You are terse.', 'Second question'])
"""

from __future__ import annotations

import abc
import asyncio
import bisect
import concurrent.futures
import functools
import inspect
import itertools
import logging
import os
import threading
import warnings
from collections.abc import Awaitable, Callable, Coroutine, Sequence
from typing import Any, ClassVar, Generic, Protocol, Self, TypeVar, cast

import attrs

from workingctx import _checks
from workingctx._tail import TailView
from workingctx.context import WorkingContext
from workingctx.exceptions import ScopeError
from workingctx.messages import Message
from workingctx.scopes import (
    CompletedToolSequences,
    LastNTurns,
    Newest,
    PendingCalls,
    RoleFilter,
    Since,
    Tagged,
    ValidRequest,
    WholeExchanges,
    surviving_indices,
)
from workingctx.scopes._algebra import Scope, _ScopeOps, scope_field
from workingctx.scopes._exchanges import exchange_units, starts_turn
from workingctx.scopes._index import TailIndex
from workingctx.scopes._tools import WITHOUT_COMPLETED_TOOL_SEQUENCES, _newest_turn_before
from workingctx.tokens import MessageCounter, counting
from workingctx.validity import STRUCTURAL_RULES, _is_empty

__all__ = [
    "SUMMARY_NAME",
    "BaseContextManager",
    "BudgetCut",
    "MessageContextManager",
    "Summarizer",
    "SummaryContextManager",
    "TokenBudgetContextManager",
    "TrimReport",
    "fit",
]

logger = logging.getLogger("workingctx.managers")

C = TypeVar("C")

SUMMARY_NAME = "context_summary"
"""The ``name`` of the system message that holds the running summary."""

DEFAULT_SUMMARY_PROMPT = (
    "Summarize the conversation below concisely, in the third person and the past tense. "
    "Keep every fact, decision and tool result needed to continue it; be specific; "
    "add no commentary about the summary itself."
)

_SYSTEM = RoleFilter({"system"})
_NOT_SYSTEM = ~_SYSTEM
_NO_EARLIER_SUMMARY = ~(_SYSTEM & Tagged(SUMMARY_NAME))
"""Every message but an earlier summary: a new summary opens with its text."""


class Summarizer(Protocol):
    """
    What :class:`SummaryContextManager` calls: an async callable returning the summary text.

    It receives the messages to summarize, the instruction to follow and an upper
    bound on the summary's length in tokens.
    """

    def __call__(self, messages: Sequence[Message], *, prompt: str, max_tokens: int) -> Awaitable[str]:
        """
        Summarize *messages* following *prompt*, in at most *max_tokens* tokens.
        """
        ...


class BaseContextManager(abc.ABC, Generic[C]):
    """
    The base of every context manager: a synchronous and an asynchronous trim.

    Both methods are abstract; a subclass that implements only one of them
    cannot be instantiated (``TypeError`` naming the missing method). When the
    trim never awaits anything, ``atrim_context`` can return
    ``self.trim_context(ctx)``.

    >>> class KeepLast(BaseContextManager[list[str]]):
    ...     def trim_context(self, ctx):
    ...         return ctx[-2:]
    ...     async def atrim_context(self, ctx):
    ...         return self.trim_context(ctx)
    >>> KeepLast().trim_context(["a", "b", "c"])
    ['b', 'c']
    """

    __slots__ = ()

    def __new__(cls, *args: Any, **kwargs: Any) -> Self:  # noqa: ARG004  # __init__ takes them
        """
        Refuse a subclass that left a trim method abstract, saying how to fix it.
        """
        missing = sorted(getattr(cls, "__abstractmethods__", ()))
        if missing:
            msg = (
                f"cannot instantiate {cls.__name__}: it does not implement {' and '.join(missing)}; "
                "a context manager implements both trim_context(ctx) and async atrim_context(ctx) "
                "(atrim_context can return self.trim_context(ctx) when nothing needs awaiting)"
            )
            raise TypeError(msg)
        return super().__new__(cls)

    @abc.abstractmethod
    def trim_context(self, ctx: C) -> C:
        """
        Trim *ctx* and return it.
        """

    @abc.abstractmethod
    async def atrim_context(self, ctx: C) -> C:
        """
        Trim *ctx* and return it, for async callers (agents call this one).
        """


# -- shared helpers ------------------------------------------------------------------


def _check_context(ctx: object, where: str) -> WorkingContext:
    return _checks.check_instance(
        ctx,
        "ctx",
        WorkingContext,
        "a WorkingContext",
        label=where,
        verb="takes",
        fix="wrap a message list with WorkingContext(messages=...)",
    )


def _count_check(*, optional: bool = False) -> Callable[[object, attrs.Attribute[Any], object], None]:
    """
    An attrs validator: an int (or None when *optional*), 0 or more; a negative one is a ScopeError.
    """
    return _checks.count(optional=optional, error=ScopeError)


_flag_check = _checks.flag()


_pin_check = scope_field(optional=True)


def _counter_check(inst: object, _attribute: attrs.Attribute[Any], value: object) -> None:
    # what isinstance(value, MessageCounter) asks, without the protocol check's cost on every cut
    if value is not None and not (hasattr(value, "name") and callable(getattr(value, "count_message", None))):
        raise _checks.wrong_type(
            value,
            "counter",
            "a token counter with count_message(message) and a name",
            label=f"{type(inst).__name__}(counter=...)",
            verb="needs",
            fix="use ApproxTokenCounter() or TiktokenCounter()",
        )


def _systems_first(messages: Sequence[Message]) -> list[Message]:
    """
    The system messages, in order, then every other message, in order.
    """
    return [m for m in messages if m.role == "system"] + [m for m in messages if m.role != "system"]


def _count(counter: MessageCounter, messages: Sequence[Message]) -> int:
    """
    Tokens of *messages* with any message counter (all a budget's counter needs).
    """
    return sum(map(counting(counter), messages))


def _replace_tail(ctx: WorkingContext, messages: list[Message]) -> None:
    """
    Make *messages* the tail of *ctx*: messages a manager kept of its tail, with a summary it made.
    """
    ctx._replace_kept(messages)  # noqa: SLF001  # messages already: no check of each


def _set_last_trim(manager: object, report: TrimReport) -> None:
    """
    Record *report* as the manager's ``last_trim`` (a record of its last call, not part of its value).
    """
    object.__setattr__(manager, "last_trim", report)


# -- validity at every exit ----------------------------------------------------------


@attrs.frozen
class TrimReport:
    """
    What a manager's last trim did (``manager.last_trim``).

    Attributes:
        kept: Messages in the tail afterwards.
        dropped: Messages removed from the tail (a summary counts as one added).
        repaired: The rule ids (see :mod:`workingctx.validity`) of what was
            wrong in the transcript and was made right: a broken exchange
            dropped whole, a user message kept in front of the window.
        tokens: The context's tokens afterwards (prefix and tail), when the
            manager counts tokens; otherwise None.
        over_budget: Even the messages that are always kept (system messages,
            the pinned ones, the newest exchange, the user message in front of
            the window) exceed the budget: they were kept anyway (and a warning
            was logged on the ``workingctx.managers`` logger).
    """

    kept: int
    dropped: int
    repaired: tuple[str, ...] = ()
    tokens: int | None = None
    over_budget: bool = False


def _pinned(pin: Scope | None) -> WholeExchanges | None:
    """
    The pinned messages with their whole exchanges, as a scope.
    """
    return None if pin is None else WholeExchanges(pin, mode="expand")


def _with_pin(scope: Scope, pin: Scope | None) -> Scope:
    pinned = _pinned(pin)
    return scope if pinned is None else scope | pinned


def _user_first(ctx: WorkingContext) -> bool:
    """
    Whether the tail must open with a user message: the prefix holds none of its own.
    """
    return all(m.role == "system" for m in ctx.prefix.as_messages())


def _needs_repair(view: TailView, user_first: bool) -> bool:
    """
    Whether the tail breaks a rule a manager repairs, in O(1) from the context's index.
    """
    index = view.tail_index
    if index is None:  # pragma: no cover  # a context's view always has one
        return True
    state = index.walk
    if state.broken:
        return True
    if not user_first or not index.turn_count():
        return False
    return state.first < 0 or not index.opens_turn(state.first)


def _broken_rules(view: TailView) -> list[str]:
    """
    The tool rules the tail breaks, from the context's index.
    """
    index = view.tail_index
    if index is None:  # pragma: no cover  # a context's view always has one
        return []
    return [p.rule for p in index.walk.problems if p.rule in STRUCTURAL_RULES]


def _report(before: int, after: int, repaired: Sequence[str], tokens: int | None = None) -> TrimReport:
    return TrimReport(after, max(before - after, 0), tuple(repaired), tokens)


# -- MessageContextManager -----------------------------------------------------------


@attrs.frozen(repr=False)
class MessageContextManager(BaseContextManager[WorkingContext]):
    """
    Keeps every system message and the last *max_messages* user turns.

    The scope is ``LastNTurns(max_messages)``, intersected with
    ``~CompletedToolSequences()`` when *remove_tool_msgs* is set, inside
    ``WholeExchanges(..., mode="drop")`` so that no exchange is ever split,
    with the *pin* scope's whole exchanges added, inside ``ValidRequest``:
    :meth:`scope_for` returns that whole composition.
    A turn starts at a user message, so the window holds the last
    *max_messages* user messages and everything after the oldest of them (a
    user message that only carries tool results answers a call and does not
    start a turn).

    - When the context holds more user turns than *max_messages*, the older
      turns are dropped and the system messages are placed first.
    - Otherwise the context is left as it is (with *remove_tool_msgs*, only
      the completed tool sequences are removed, in place).
    - With *remove_tool_msgs*, a completed tool sequence (an assistant message
      asking for tools, its results and the final answer that used them) is
      removed before counting; a sequence still waiting for a result or for
      its answer is kept whole.

    The result is always a valid request (see :mod:`workingctx.validity`),
    also when nothing needed trimming: an exchange that is broken (a result
    whose call is nowhere, a call left without its result before other
    messages, two calls with one id) is dropped whole, and when the window
    would open with something other than a user message, the newest user
    message before it is kept in front of it. Checking a transcript that
    needs nothing costs only what was appended since the last call.

    Args:
        max_messages: How many user turns to keep, 0 or more.
        remove_tool_msgs: Remove completed tool sequences first.
        pin: A scope whose messages, with their whole exchanges, are always
            kept (the task message, say: ``pin=Tagged("task")``).

    Attributes:
        last_trim: A :class:`TrimReport` of the last trim (None before the first):
            a record of the last call, not part of the manager's value (equal
            managers may hold different ones).

    Raises:
        TypeError: *max_messages* is not an int, *remove_tool_msgs* not a
            bool, or *pin* not a scope.
        ScopeError: *max_messages* is negative.

    >>> from workingctx import Message, WorkingContext
    >>> ctx = WorkingContext(messages=[
    ...     Message("system", "You are terse."),
    ...     Message("user", "First question"),
    ...     Message("assistant", "First answer"),
    ...     Message("user", "Second question"),
    ...     Message("assistant", "Second answer"),
    ...     Message("user", "Third question"),
    ... ])
    >>> manager = MessageContextManager(max_messages=2)
    >>> print(manager.scope_for(ctx))
    ValidRequest(WholeExchanges(LastNTurns(2), mode='drop'))
    >>> for message in manager.trim_context(ctx).messages:
    ...     print(message.role, "|", message.text())
    system | You are terse.
    user | Second question
    assistant | Second answer
    user | Third question
    """

    max_messages: int = attrs.field(default=10, validator=_count_check())
    remove_tool_msgs: bool = attrs.field(default=False, validator=_flag_check)
    pin: Scope | None = attrs.field(default=None, kw_only=True, validator=_pin_check)
    last_trim: TrimReport | None = attrs.field(default=None, init=False, eq=False, repr=False)
    _scopes: tuple[ValidRequest, ValidRequest] | None = attrs.field(default=None, init=False, eq=False, repr=False)

    def scope_for(self, ctx: WorkingContext) -> ValidRequest:
        """
        The whole scope a trim of *ctx* applies: ``trim_context`` keeps exactly its messages.

        When the trim cuts turns, it also moves the system messages first.

        Raises:
            TypeError: *ctx* is not a :class:`~workingctx.WorkingContext`.
        """
        _check_context(ctx, "MessageContextManager.scope_for()")
        return self._scope(_user_first(ctx))

    def _scope(self, user_first: bool) -> ValidRequest:
        scopes = self._scopes
        if scopes is None:  # built on first use (a manager made per request may never cut)
            window: Scope = LastNTurns(self.max_messages)
            if self.remove_tool_msgs:
                window = window & ~CompletedToolSequences()
            kept = _with_pin(WholeExchanges(window, mode="drop"), self.pin)
            scopes = (ValidRequest(kept, user_first=False), ValidRequest(kept, user_first=True))
            object.__setattr__(self, "_scopes", scopes)
        return scopes[user_first]

    def trim_context(self, ctx: WorkingContext) -> WorkingContext:
        """
        Trim *ctx* in place and return it.

        Raises:
            TypeError: *ctx* is not a :class:`~workingctx.WorkingContext`.
        """
        view = _check_context(ctx, "MessageContextManager.trim_context()").tail_view()
        size = len(view)
        user_first = _user_first(ctx)
        over = self._over(view)
        if not over and not self.remove_tool_msgs and not _needs_repair(view, user_first):
            _set_last_trim(self, TrimReport(size, 0))
            return ctx
        keep, repaired = self._scope(user_first).repair(view)
        # the scope drops broken exchanges itself: report them from the context's index
        repaired = list(dict.fromkeys([*_broken_rules(view), *repaired]))
        _set_last_trim(self, _report(size, len(keep), repaired))
        if len(keep) == size:
            return ctx
        messages = view._pick(keep)  # noqa: SLF001  # repair() gives ascending, unique indices
        _replace_tail(ctx, _systems_first(messages) if over else messages)
        return ctx

    def _over(self, view: TailView) -> bool:
        """
        Whether the tail holds more user turns than the window, from the context's index (O(1)).
        """
        if self.max_messages == 0:
            return len(view) > len(view.system_positions)
        index = view.tail_index
        if index is None:  # pragma: no cover  # a context's view always has one
            return len(surviving_indices(LastNTurns(self.max_messages), view)) < len(view)
        return index.turn_count() > self.max_messages

    async def atrim_context(self, ctx: WorkingContext) -> WorkingContext:
        """
        The same as :meth:`trim_context`, for async callers.
        """
        return self.trim_context(ctx)

    def __repr__(self) -> str:
        pin = "" if self.pin is None else f", pin={self.pin!r}"
        return (
            f"MessageContextManager(max_messages={self.max_messages!r}, "
            f"remove_tool_msgs={self.remove_tool_msgs!r}{pin})"
        )


# -- BudgetCut --------------------------------------------------------------------


@attrs.frozen(cache_hash=True, repr=False)
class BudgetCut(_ScopeOps):
    """
    The cut of a :class:`TokenBudgetContextManager`: what it keeps when it cuts. Positional.

    First the messages always kept, counted first: every system message, the
    *pin* scope's messages with their whole exchanges, and the newest
    exchange (the newest question, or the newest call with its results) that
    says something, with the turns after it that say nothing (no content,
    no call), so a cut never keeps only empty turns, which providers leave
    out or refuse, while it drops what the transcript says.
    Then, in what is left of *max_tokens*, the newest messages from a cut
    that splits no exchange, on a user turn when one fits; with *user_first*,
    the cut moves on until the newest user message before the window fits in
    front of it as well. When the messages always kept exceed *max_tokens*,
    only they are kept. The manager applies it inside
    :class:`~workingctx.scopes.ValidRequest`; its :meth:`~TokenBudgetContextManager.scope_for`
    returns both, with *max_tokens* the low watermark less the prefix's tokens.

    Args:
        max_tokens: The tokens the kept messages may hold, 0 or more.
        counter: The token counter; ``None`` for the approximate counter.
        pin: A scope whose messages are always kept, with their exchanges.
        user_first: Leave room for a user message in front of the window.

    Raises:
        TypeError: A setting has the wrong type, or *pin* is not a scope.
        ScopeError: *max_tokens* is negative.

    >>> from workingctx import Message
    >>> from workingctx.scopes import surviving_indices
    >>> msgs = [Message("system", "Be brief.")]
    >>> for i in range(3):
    ...     msgs += [Message("user", f"question {i} " * 5), Message("assistant", f"answer {i} " * 5)]
    >>> sorted(surviving_indices(BudgetCut(80), msgs))
    [0, 3, 4, 5, 6]
    """

    positional: ClassVar[bool] = True

    max_tokens: int = attrs.field(validator=_count_check())
    counter: MessageCounter | None = attrs.field(default=None, validator=_counter_check)
    pin: Scope | None = attrs.field(default=None, kw_only=True, validator=_pin_check)
    user_first: bool = attrs.field(default=True, kw_only=True, validator=_flag_check)

    def surviving_indices(self, messages: Sequence[Message]) -> frozenset[int]:
        """
        The messages always kept, and the newest whole exchanges that fit what is left.
        """
        fast = self._from_index(messages)
        if fast is not None:
            return fast
        size = len(messages)
        count = counting(self.counter)
        counts = [count(message) for message in messages]
        unit, _ = exchange_units(messages)
        others = [i for i in range(size) if messages[i].role != "system"]
        known = getattr(messages, "system_positions", None)
        system = known if known is not None else [i for i in range(size) if messages[i].role == "system"]
        always = set(system)
        pinned = _pinned(self.pin)
        if pinned is not None:
            always |= surviving_indices(pinned, messages)
        if others:
            said = _newest_with_content(messages, others[-1])
            last = others[-1] if said is None else said
            newest = unit[last]
            always.update(i for i in range(others[0], size) if unit[i] == newest)
            # what follows it carries nothing (all of it, when nothing does): kept, it costs little
            always.update(range(others[0] if said is None else said + 1, size))
        budget = self.max_tokens - sum(counts[i] for i in always)
        if budget < 0:
            return frozenset(always)
        # rest[c]: the tokens of the messages from c on that are not always kept
        rest = [0] * (size + 1)
        for i in range(size - 1, -1, -1):
            rest[i] = rest[i + 1] + (0 if i in always else counts[i])
        index = getattr(messages, "tail_index", None)
        if index is None:
            index = TailIndex()
            index.update(messages)
        fits = next(c for c in range(size + 1) if rest[c] <= budget)
        cut = index.first_cut(fits, size, user_turn=False)
        user_cut = index.first_cut(cut, size, user_turn=True)
        if user_cut < size:
            cut = user_cut
        if self.user_first:
            cut = _room_for_a_user(messages, index, always, counts.__getitem__, rest.__getitem__, budget, cut)
        return frozenset(itertools.chain(range(cut, size), always))  # one set built, not three

    def _from_index(self, messages: Sequence[Message]) -> frozenset[int] | None:
        """
        :meth:`surviving_indices` of a context's view, read from the context's
        running sums and cut index: no pass over the messages the cut drops,
        so a trim that runs on every request costs the same however long the
        run; None when the view cannot tell (a pin, another counter).
        """
        if self.pin is not None or not isinstance(messages, TailView):
            return None
        running = messages.running
        if running is None or self.counter is None or running.counter != self.counter:
            return None
        index = messages.tail_index
        size = len(messages)
        if index.size < size or len(running) < size:  # pragma: no cover  # a view's sums and index reach it
            return None
        upto = running.upto

        def count_at(i: int) -> int:
            return upto(i + 1) - upto(i)

        always = set(messages.system_positions)
        last = size - 1
        while last >= 0 and messages[last].role == "system":
            last -= 1
        if last >= 0:
            first = next(i for i in range(size) if messages[i].role != "system")
            said = _newest_with_content(messages, last)
            empty_after = range(first if said is None else said + 1, size)
            last = last if said is None else said
            # the newest exchange lies past the last cut before its last message that splits none
            blocker = index.blocker
            clean = last
            while blocker(clean) < size:
                clean -= 1
            unit, _ = exchange_units(messages[clean:size])
            newest = unit[last - clean]
            always.update(clean + j for j in range(max(first - clean, 0), size - clean) if unit[j] == newest)
            always.update(empty_after)
        ordered = sorted(always)
        # after[j]: the tokens of the messages always kept from ordered[j] on
        after = list(itertools.accumulate(map(count_at, reversed(ordered)), initial=0))[::-1]
        budget = self.max_tokens - after[0]
        if budget < 0:
            return frozenset(always)
        total = upto(size)

        def rest_at(cut: int) -> int:
            return total - upto(cut) - after[bisect.bisect_left(ordered, cut)]

        # the first cut whose rest fits (the rest only shrinks as the cut moves on)
        low, high = 0, size
        while low < high:
            middle = (low + high) // 2
            if rest_at(middle) <= budget:
                high = middle
            else:
                low = middle + 1
        cut = index.first_cut(low, size, user_turn=False)
        user_cut = index.first_cut(cut, size, user_turn=True)
        if user_cut < size:
            cut = user_cut
        if self.user_first:
            cut = _room_for_a_user(messages, index, always, count_at, rest_at, budget, cut)
        return frozenset(itertools.chain(range(cut, size), always))  # one set built, not three

    _index_set = surviving_indices

    def __repr__(self) -> str:
        parts = [repr(self.max_tokens)]
        if self.counter is not None:
            parts.append(f"counter={self.counter!r}")
        if self.pin is not None:
            parts.append(f"pin={self.pin!r}")
        if not self.user_first:
            parts.append("user_first=False")
        return f"BudgetCut({', '.join(parts)})"


def _newest_with_content(messages: Sequence[Message], last: int) -> int | None:
    """
    The newest message from *last* back that carries something to send (not
    a system message, nor a user or assistant message with no content and no
    call), or None. The newest exchange a cut always keeps is the newest that
    says something, with the empty turns after it, so a cut never keeps only
    turns a provider leaves out or refuses while it drops what says something.
    """
    for i in range(last, -1, -1):
        message = messages[i]
        if message.role != "system" and not _is_empty(message):
            return i
    return None


def _room_for_a_user(
    messages: Sequence[Message],
    index: TailIndex,
    always: set[int],
    count_at: Callable[[int], int],
    rest_at: Callable[[int], int],
    budget: int,
    cut: int,
) -> int:
    """
    The first clean cut from *cut* on that leaves room for the newest user
    message before the window, when the window does not open with one.
    """
    size = len(messages)
    pinned = sorted(i for i in always if messages[i].role != "system")
    while cut < size:
        first = next((i for i in range(cut, size) if messages[i].role != "system"), size)
        if pinned:
            first = min(first, pinned[0])
        if first >= size or starts_turn(messages[first]):
            return cut
        user = _newest_turn_before(messages, first)
        extra = 0 if user is None or user in always else count_at(user)
        if rest_at(cut) + extra <= budget:
            return cut
        cut = index.first_cut(cut + 1, size, user_turn=False)
    return cut


# -- TokenBudgetContextManager -------------------------------------------------------


@attrs.frozen(repr=False, init=False)
class TokenBudgetContextManager(BaseContextManager[WorkingContext]):
    """
    Keeps the system messages and the newest whole exchanges that fit a token budget, cache-stably.

    Two watermarks decide when to cut. While the context (prefix and tail)
    holds *max_tokens* or fewer, nothing changes, so between cuts the
    transcript only grows at its end and every request shares its whole prefix
    with the one before: the provider's prompt cache keeps hitting. When the
    context passes *max_tokens*, the tail is cut down to *low_watermark*
    (:class:`BudgetCut`), with the messages always kept (below) counted first:
    every system message and the newest whole exchanges that fit, starting on
    a user turn (or, when not even the newest turn fits, on the newest
    exchange boundary that does). :meth:`scope_for` returns the whole scope a
    trim applies. An exchange (a call, its results and its
    reasoning) is never split, and the kept messages keep their order; a
    kept tool result whose call is nowhere in the context is dropped.

    A lower *low_watermark* means fewer, larger cuts: more of each request is
    served from the cache, and less history is kept right after a cut.

    Both watermarks count the whole request: the prefix and the tail. Some
    messages are always kept and counted first: every system message, the
    *pin* scope's messages with their exchanges, the newest exchange (the
    user's newest question, or the newest call with its results) that says
    something, with the empty turns after it, and, when
    the window would open with something other than a user message, the
    newest user message before it (kept in front of it). When those alone
    exceed *low_watermark*, they are kept anyway: the trim logs a warning on
    the ``workingctx.managers`` logger and sets ``last_trim.over_budget``;
    the conversation is never emptied.

    The result is always a valid request (see :mod:`workingctx.validity`),
    also below the watermark: a broken exchange is dropped whole and a user
    message is kept first. Checking a transcript that needs nothing costs
    only what was appended since the last call.

    Args:
        max_tokens: The high watermark: cut when the context holds more tokens.
        low_watermark: What a cut trims down to; ``max_tokens // 2`` by default.
        counter: The token counter; ``None`` for the context's own counter
            (counted incrementally, so a check costs only what was appended).
        pin: A scope whose messages, with their whole exchanges, are always
            kept and counted first.

    Attributes:
        last_trim: A :class:`TrimReport` of the last trim (None before the first):
            a record of the last call, not part of the manager's value.

    Raises:
        TypeError: A watermark is not an int, *counter* cannot count messages,
            or *pin* is not a scope.
        ScopeError: A watermark is negative, or *low_watermark* exceeds *max_tokens*.

    >>> from workingctx import Message, WorkingContext
    >>> ctx = WorkingContext(messages=[Message("system", "Be brief.")])
    >>> for i in range(6):
    ...     _ = ctx.append(Message("user", f"question {i} " * 5), Message("assistant", f"answer {i} " * 5))
    >>> manager = TokenBudgetContextManager(120, low_watermark=60)
    >>> ctx.count_tokens()
    198
    >>> [m.text()[:10] for m in manager.trim_context(ctx).messages]
    ['Be brief.', 'question 5', 'answer 5 a']
    >>> ctx.count_tokens()
    38
    """

    max_tokens: int = attrs.field(validator=_count_check())
    low_watermark: int = attrs.field(validator=_count_check())
    counter: MessageCounter | None = attrs.field(validator=_counter_check)
    pin: Scope | None = attrs.field(validator=_pin_check)
    last_trim: TrimReport | None = attrs.field(default=None, init=False, eq=False, repr=False)

    def __init__(
        self,
        max_tokens: int,
        *,
        low_watermark: int | None = None,
        counter: MessageCounter | None = None,
        pin: Scope | None = None,
    ) -> None:
        if low_watermark is None and isinstance(max_tokens, int):
            low_watermark = max_tokens // 2
        self.__attrs_init__(max_tokens, low_watermark, counter, pin)

    def __attrs_post_init__(self) -> None:
        if self.low_watermark > self.max_tokens:
            msg = (
                f"TokenBudgetContextManager: low_watermark={self.low_watermark!r} is above "
                f"max_tokens={self.max_tokens!r}; a cut trims down to the low watermark, "
                "so it must be at most max_tokens"
            )
            raise ScopeError(msg, argument="low_watermark", value=self.low_watermark)

    def _counter(self, ctx: WorkingContext) -> MessageCounter:
        return ctx.counter if self.counter is None else self.counter

    def _tokens(self, ctx: WorkingContext) -> int:
        if self.counter is None or self.counter == ctx.counter:
            return ctx.count_tokens()
        return _count(self.counter, ctx.assembled())

    def scope_for(self, ctx: WorkingContext) -> ValidRequest:
        """
        The whole scope a trim of *ctx* applies: ``trim_context`` keeps exactly its messages.

        Over *max_tokens*, the cut down to the low watermark less the prefix's
        tokens (:class:`BudgetCut`), made a valid request; at or under it,
        every message, made a valid request.

        Raises:
            TypeError: *ctx* is not a :class:`~workingctx.WorkingContext`.
        """
        _check_context(ctx, "TokenBudgetContextManager.scope_for()")
        return self._scope(ctx, cutting=self._tokens(ctx) > self.max_tokens, user_first=_user_first(ctx))

    def _scope(self, ctx: WorkingContext, *, cutting: bool, user_first: bool) -> ValidRequest:
        if not cutting:
            return ValidRequest(Since(0), user_first=user_first)
        counter = self._counter(ctx)
        budget = max(0, self.low_watermark - _count(counter, ctx.prefix.as_messages()))
        cut = BudgetCut(budget, counter, pin=self.pin, user_first=user_first)
        return ValidRequest(cut, user_first=user_first)

    def trim_context(self, ctx: WorkingContext) -> WorkingContext:
        """
        Cut *ctx* in place when it holds more than ``max_tokens``, and return it.

        Raises:
            TypeError: *ctx* is not a :class:`~workingctx.WorkingContext`.
        """
        _check_context(ctx, "TokenBudgetContextManager.trim_context()")
        # The view keeps the context's index of clean cuts and of the provider
        # rules up to date, one new message per turn, so a check that finds
        # nothing to do never walks the whole tail.
        view = ctx.tail_view()
        size = len(view)
        user_first = _user_first(ctx)
        tokens = self._tokens(ctx)
        cutting = tokens > self.max_tokens
        if not cutting and not _needs_repair(view, user_first):
            _set_last_trim(self, TrimReport(size, 0, tokens=tokens))
            return ctx
        keep, repaired = self._scope(ctx, cutting=cutting, user_first=user_first).repair(view)
        if len(keep) < size:
            _replace_tail(ctx, view._pick(keep))  # noqa: SLF001  # repair() gives ascending, unique indices
        tokens = self._tokens(ctx)
        over = cutting and tokens > self.low_watermark
        _set_last_trim(self, TrimReport(len(keep), size - len(keep), tuple(repaired), tokens, over))
        if over:
            logger.warning(
                "TokenBudgetContextManager: the context holds %d tokens after the cut, over the low watermark of "
                "%d: the messages always kept (system messages, pinned ones, the newest exchange and the user "
                "message before it) do not fit; they are kept anyway",
                tokens,
                self.low_watermark,
            )
        return ctx

    async def atrim_context(self, ctx: WorkingContext) -> WorkingContext:
        """
        The same as :meth:`trim_context`, for async callers.
        """
        return self.trim_context(ctx)

    def __repr__(self) -> str:
        counter = "" if self.counter is None else f", counter={self.counter!r}"
        pin = "" if self.pin is None else f", pin={self.pin!r}"
        return f"TokenBudgetContextManager({self.max_tokens!r}, low_watermark={self.low_watermark!r}{counter}{pin})"


@attrs.frozen
class _SummaryPlan:
    """
    What a summary manager's call does: the scope it keeps (less an earlier summary when it
    summarizes), whether it summarizes, and what the scope's valid request keeps and repairs.
    """

    scope: Scope
    keep: list[int]
    repaired: list[str]
    summarizing: bool = attrs.field(default=False, kw_only=True)


def _summarizer_check(inst: object, _attribute: attrs.Attribute[Any], value: object) -> None:
    if not callable(value):
        raise _checks.wrong_type(
            value,
            "summarizer",
            "a summarizer: an async callable (messages, *, prompt, max_tokens) -> str",
            label=type(inst).__name__,
            verb="needs",
        )


def _prompt(value: str | None) -> str:
    """
    The summary prompt: the default for None.
    """
    if value is None:
        return DEFAULT_SUMMARY_PROMPT
    return _checks.check_instance(value, "summary_prompt", str, "a str or None", owner="SummaryContextManager")


# -- SummaryContextManager ----------------------------------------------------------


class _SummarizingLoop:
    """
    One event loop, in a daemon thread for the life of the process, where
    the sync path awaits the summarizer: the same loop for every call (a
    client bound to the loop it first ran in keeps working, where a new
    ``asyncio.run`` loop per call would find it closed), and usable from a
    thread whose own loop is running, where ``asyncio.run`` cannot be.

    A child process made by ``fork`` starts a loop of its own on first use
    (the parent's thread is not in it); a ``KeyboardInterrupt`` or
    ``SystemExit`` a summarizer raises reaches its caller, not the loop's thread.
    """

    def __init__(self) -> None:
        self._forget()

    def _forget(self) -> None:
        self._lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None

    def running_here(self) -> bool:
        """
        Whether this thread is the loop's (a summary of :meth:`run` is under way in it).
        """
        return threading.current_thread() is self._thread

    def run(self, coroutine: Coroutine[Any, Any, C], caller: str) -> C:
        """
        The result of *coroutine*, run in the loop, with this thread's context
        variables (a tracer's current run, say), while this thread waits.
        When the wait ends early (``KeyboardInterrupt``), the coroutine is cancelled.
        """
        with self._lock:
            thread = self._thread
            if self._loop is None or thread is None or not thread.is_alive():
                self._loop = asyncio.new_event_loop()
                thread = self._thread = threading.Thread(
                    target=self._loop.run_forever, name="workingctx-summarizer", daemon=True
                )
                thread.start()
            loop = self._loop
        if threading.current_thread() is thread:
            coroutine.close()
            msg = f"{caller} was called by a summarizer while it summarizes; await atrim_context() there"
            raise RuntimeError(msg)
        wrapped = _caught(coroutine)
        future: concurrent.futures.Future[tuple[C, BaseException | None]] | None = None
        try:
            future = asyncio.run_coroutine_threadsafe(wrapped, loop)  # in a copy of this thread's context
            result, escaped = future.result()
        except BaseException:
            # the caller stopped waiting: the summary does not land later behind its back,
            # also when the interrupt came while it was being handed to the loop
            if future is not None:
                future.cancel()
            else:
                loop.call_soon_threadsafe(_cancel_running, loop, wrapped)
            raise
        if escaped is not None:
            raise escaped
        return result


def _cancel_running(loop: asyncio.AbstractEventLoop, coroutine: Coroutine[Any, Any, Any]) -> None:
    """
    Cancel the task of *loop* running *coroutine*, if any (in the loop's thread,
    after the callback that made the task: the loop runs callbacks in order).
    """
    for task in asyncio.all_tasks(loop):
        if task.get_coro() is coroutine:
            task.cancel()


async def _caught(coroutine: Coroutine[Any, Any, C]) -> tuple[C, BaseException | None]:
    """
    *coroutine*'s result, or the ``KeyboardInterrupt`` or ``SystemExit`` it
    raised, which would otherwise stop the loop running it.
    """
    try:
        return await coroutine, None
    except (KeyboardInterrupt, SystemExit) as exc:
        return cast("C", None), exc


_SUMMARIZING = _SummarizingLoop()
if hasattr(os, "register_at_fork"):  # a forked child has the loop but not its thread, nor a free lock
    os.register_at_fork(after_in_child=_SUMMARIZING._forget)  # noqa: SLF001  # the module's own object


@attrs.frozen(repr=False)
class SummaryContextManager(BaseContextManager[WorkingContext]):
    """
    Replaces older messages with a summary written by an injected summarizer.

    A summary runs when the tail holds more than *max_messages* messages or
    the context (prefix and tail) more than *token_budget* tokens, counted
    with the context's counter. Then:

    1. the non-system messages older than the *keep_recent* newest ones go to
       ``await summarizer(messages, prompt=..., max_tokens=max_summary_tokens)``;
       the boundary moves back when it would separate a tool result from its
       call (the window is ``WholeExchanges(Newest(keep_recent, ~RoleFilter({'system'})))``),
       so the kept window never starts with an orphaned result;
    2. the summary becomes the system message named ``context_summary``: after
       the other system messages and before every other message (never in
       the prefix, which would invalidate the prompt cache). An earlier
       summary is kept, and the new one appended after a blank line;
    3. the tail becomes the system messages, the summary, and the kept window.

    The context is left as it was when nothing is older than *keep_recent*,
    when the summarizer returns an empty string, or when it raises (logged
    on the ``workingctx.managers`` logger: nothing is lost). With
    *remove_tool_msgs*, completed tool sequences are removed first, on every
    call, before the thresholds are checked.

    The result is always a valid request (see :mod:`workingctx.validity`),
    also below the thresholds: a broken exchange is dropped whole; calls still
    waiting for their results at the end are never summarized (the results
    that come next need them); the *pin* scope's messages stay verbatim; and
    when the kept window would open with something other than a user message,
    the newest user message before it stays verbatim in front of it.

    Args:
        summarizer: An async callable ``(messages, *, prompt, max_tokens) -> str``.
        max_messages: Summarize past this many tail messages; ``None`` disables it.
        token_budget: Summarize past this many tokens; ``None`` disables it.
        keep_recent: How many of the newest non-system messages stay verbatim.
        remove_tool_msgs: Remove completed tool sequences first.
        summary_prompt: The instruction for the summarizer; a concise, factual,
            third-person summary keeping facts, decisions and tool results by default.
        max_summary_tokens: The upper bound passed to the summarizer.
        pin: A scope whose messages, with their whole exchanges, are never summarized.

    :meth:`scope_for` returns the whole scope of the messages a call keeps
    verbatim (assuming the summarizer returns a summary).

    Attributes:
        last_trim: A :class:`TrimReport` of the last call (None before the first):
            a record of the last call, not part of the manager's value.

    Raises:
        TypeError: *summarizer* is not callable, a setting has the wrong type,
            or *pin* is not a scope.
        ScopeError: A count is negative.

    Warns:
        UserWarning: Both *max_messages* and *token_budget* are ``None``, so it
            would never summarize.

    >>> import asyncio
    >>> from workingctx import Message, WorkingContext
    >>> async def first_words(messages, *, prompt, max_tokens):
    ...     return "Earlier: " + "; ".join(m.text().split()[0] for m in messages)
    >>> ctx = WorkingContext(messages=[Message("system", "Be brief.")])
    >>> for i in range(3):
    ...     _ = ctx.append(Message("user", f"q{i} ..."), Message("assistant", f"a{i} ..."))
    >>> manager = SummaryContextManager(first_words, max_messages=4, keep_recent=2)
    >>> for message in asyncio.run(manager.atrim_context(ctx)).messages:
    ...     print(message.role, message.name, "|", message.text())
    system None | Be brief.
    system context_summary | Earlier: q0; a0; q1; a1
    user None | q2 ...
    assistant None | a2 ...
    """

    summarizer: Summarizer | Callable[..., Awaitable[str]] = attrs.field(validator=_summarizer_check)
    max_messages: int | None = attrs.field(default=30, kw_only=True, validator=_count_check(optional=True))
    token_budget: int | None = attrs.field(default=None, kw_only=True, validator=_count_check(optional=True))
    keep_recent: int = attrs.field(default=8, kw_only=True, validator=_count_check())
    remove_tool_msgs: bool = attrs.field(default=False, kw_only=True, validator=_flag_check)
    summary_prompt: str = attrs.field(default=None, kw_only=True, converter=_prompt)
    max_summary_tokens: int = attrs.field(default=600, kw_only=True, validator=_count_check())
    pin: Scope | None = attrs.field(default=None, kw_only=True, validator=_pin_check)
    last_trim: TrimReport | None = attrs.field(default=None, init=False, eq=False, repr=False)
    _scopes: tuple[tuple[ValidRequest, ValidRequest], tuple[ValidRequest, ValidRequest]] | None = attrs.field(
        default=None, init=False, eq=False, repr=False
    )

    def _built_scopes(self) -> tuple[tuple[ValidRequest, ValidRequest], tuple[ValidRequest, ValidRequest]]:
        """
        The scopes a call leaves and keeps by (whether the request starts with a
        user message), built on first use: a manager made per request may never summarize.
        """
        scopes = self._scopes
        if scopes is None:
            strip = self._stripped()
            base: Scope = Since(0) if strip is None else strip
            others: Scope = _NOT_SYSTEM if strip is None else _NOT_SYSTEM & strip
            window: Scope = _with_pin(WholeExchanges(Newest(self.keep_recent, others)) | PendingCalls(), self.pin)
            if strip is not None:
                window = strip & window
            leave = (ValidRequest(base, user_first=False), ValidRequest(base, user_first=True))
            keep = (ValidRequest(window, user_first=False), ValidRequest(window, user_first=True))
            scopes = (leave, keep)
            object.__setattr__(self, "_scopes", scopes)
        return scopes

    def __attrs_post_init__(self) -> None:
        if self.max_messages is None and self.token_budget is None:
            warnings.warn(
                "SummaryContextManager(max_messages=None, token_budget=None) will never summarize: "
                "set max_messages or token_budget (or both) to say when to summarize",
                UserWarning,
                stacklevel=3,
            )

    def scope_for(self, ctx: WorkingContext) -> Scope:
        """
        The whole scope of the messages a call on *ctx* keeps verbatim.

        Under the thresholds: every message (less the completed tool
        sequences, with *remove_tool_msgs*), made a valid request. Over them:
        the newest *keep_recent* non-system messages in whole exchanges, the
        calls still waiting at the end and the pinned exchanges, made a valid
        request, less the earlier summary (it opens the new one). The
        non-system messages it drops are the ones summarized (or removed as
        completed tool sequences); the summary goes after the system messages
        it keeps.

        Raises:
            TypeError: *ctx* is not a :class:`~workingctx.WorkingContext`.
        """
        _check_context(ctx, "SummaryContextManager.scope_for()")
        return self._plan(ctx).scope

    def _stripped(self) -> WholeExchanges | None:
        return WITHOUT_COMPLETED_TOOL_SEQUENCES if self.remove_tool_msgs else None

    def _over(self, ctx: WorkingContext, messages: Sequence[Message], *, stripped: bool) -> bool:
        if self.max_messages is not None and len(messages) > self.max_messages:
            return True
        if self.token_budget is None:
            return False
        if not stripped:
            return ctx.count_tokens() > self.token_budget
        return int(ctx.counter.count([*ctx.prefix.as_messages(), *messages])) > self.token_budget

    def _plan(self, ctx: WorkingContext) -> _SummaryPlan:
        """
        What a call on *ctx* does: the scope it keeps verbatim and whether it summarizes.

        The scopes decide over the context's view, as every manager's do: a
        pinned :class:`~workingctx.TokenBudget` counts the prefix first.
        """
        given = ctx.tail_view()
        user_first = _user_first(ctx)
        strip = self._stripped()
        kept_by_strip = range(len(given)) if strip is None else surviving_indices(strip, given)
        stripped = len(kept_by_strip) < len(given)
        messages = given if not stripped else [given[i] for i in sorted(kept_by_strip)]
        leaves, keeps = self._built_scopes()
        leave = leaves[user_first]
        if not self._over(ctx, messages, stripped=stripped):
            return _SummaryPlan(leave, *leave.repair(given, kept_by_strip))
        keep = keeps[user_first]
        indices, repaired = keep.repair(given)
        kept = set(indices)
        if all(i in kept or given[i].role == "system" for i in kept_by_strip):
            return _SummaryPlan(leave, *leave.repair(given, kept_by_strip))
        return _SummaryPlan(keep & _NO_EARLIER_SUMMARY, indices, repaired, summarizing=True)

    async def _summarize(self, old: Sequence[Message]) -> str | None:
        try:
            call = functools.partial(
                self.summarizer, tuple(old), prompt=self.summary_prompt, max_tokens=self.max_summary_tokens
            )
            if _SUMMARIZING.running_here() and not inspect.iscoroutinefunction(self.summarizer):
                # a sync summarizer would hold up every trim_context of the process: it runs beside the loop
                result: object = await asyncio.to_thread(call)
            else:
                result = call()
            if inspect.isawaitable(result):
                result = await result
        except Exception:  # any summarizer failure leaves the context as it was
            logger.exception(
                "summarizer call failed; the context is left unchanged (%d messages were to be summarized)", len(old)
            )
            return None
        if not isinstance(result, str):
            logger.error(
                "summarizer returned %r of type %s, not a str; the context is left unchanged",
                result,
                type(result).__name__,
            )
            return None
        if not result.strip():
            logger.warning("summarizer returned an empty summary; the context is left unchanged")
            return None
        return result

    async def atrim_context(self, ctx: WorkingContext) -> WorkingContext:
        """
        Summarize *ctx* in place when a threshold is passed, and return it.

        Raises:
            TypeError: *ctx* is not a :class:`~workingctx.WorkingContext`.
        """
        view = _check_context(ctx, "SummaryContextManager.atrim_context()").tail_view()
        user_first = _user_first(ctx)
        if (
            not self.remove_tool_msgs
            and not self._over(ctx, view, stripped=False)
            and not _needs_repair(view, user_first)
        ):
            # the common case, checked without walking the transcript
            _set_last_trim(self, TrimReport(len(view), 0))
            return ctx
        given = ctx.messages
        plan = self._plan(ctx)
        keep, repaired = plan.keep, plan.repaired
        if not plan.summarizing:
            if len(keep) < len(given):
                _replace_tail(ctx, [given[i] for i in keep])
            _set_last_trim(self, TrimReport(len(keep), len(given) - len(keep), tuple(repaired)))
            return ctx
        kept = set(keep)
        strip = self._stripped()
        removed = frozenset() if strip is None else frozenset(range(len(given))) - surviving_indices(strip, given)
        old = [m for i, m in enumerate(given) if i not in kept and i not in removed and m.role != "system"]
        summary = await self._summarize(old)
        if summary is None:
            _set_last_trim(self, TrimReport(len(given), 0))
            return ctx
        # Other coroutines may have written while the summarizer ran: messages
        # appended meanwhile are kept after the window; any other change wins
        # over this summary, which is dropped (and logged) rather than undo it.
        now = ctx.messages
        if len(now) < len(given) or any(a is not b for a, b in zip(now, given, strict=False)):
            logger.warning("the context changed while the summarizer ran; the summary is dropped, nothing else")
            return ctx
        late = list(now[len(given) :])
        systems = [given[i] for i in keep if given[i].role == "system"]
        earlier = [m.text() for m in systems if m.name == SUMMARY_NAME]
        text = "\n\n".join([*earlier, summary])
        head = [m for m in systems if m.name != SUMMARY_NAME]
        head.append(Message("system", text, name=SUMMARY_NAME))
        _replace_tail(ctx, head + [given[i] for i in keep if given[i].role != "system"] + late)
        _set_last_trim(self, TrimReport(ctx.size(), len(given) - ctx.size() + 1, tuple(repaired)))
        return ctx

    def trim_context(self, ctx: WorkingContext) -> WorkingContext:
        """
        :meth:`atrim_context` run to completion, for code that is not async,
        in plain code and inside a running event loop (Jupyter, an async app
        calling sync code) alike.

        Every call runs in one event loop, in a thread of its own, with the
        caller's context variables: a summarizer whose client is bound to the
        loop it first ran in keeps working from one call to the next.

        Raises:
            RuntimeError: Called by a summarizer while it summarizes; it can
                ``await manager.atrim_context(ctx)``.
            TypeError: *ctx* is not a :class:`~workingctx.WorkingContext`.
        """
        _check_context(ctx, "SummaryContextManager.trim_context()")
        return _SUMMARIZING.run(self.atrim_context(ctx), "SummaryContextManager.trim_context()")

    def __repr__(self) -> str:
        parts = [
            repr(self.summarizer),
            f"max_messages={self.max_messages!r}",
            f"token_budget={self.token_budget!r}",
            f"keep_recent={self.keep_recent!r}",
            f"remove_tool_msgs={self.remove_tool_msgs!r}",
        ]
        if self.summary_prompt != DEFAULT_SUMMARY_PROMPT:
            parts.append(f"summary_prompt={self.summary_prompt!r}")
        parts.append(f"max_summary_tokens={self.max_summary_tokens!r}")
        if self.pin is not None:
            parts.append(f"pin={self.pin!r}")
        return f"SummaryContextManager({', '.join(parts)})"


def fit(ctx: WorkingContext, max_tokens: int, *, pin: Scope | None = None) -> WorkingContext:
    """
    A new private context whose whole request fits *max_tokens*: the prefix
    counts, and so does every tail message kept.

    It keeps what ``TokenBudgetContextManager(max_tokens, low_watermark=max_tokens, pin=pin)``
    keeps: every system message, the pinned messages with their exchanges,
    the newest whole exchanges that fit (from a user turn when one fits),
    and a user message first; a valid request, even when that means going
    over (see :class:`~workingctx.TokenBudgetContextManager`). *ctx* is left
    as it is, and the result merges back like a slice.

    Raises:
        TypeError: *max_tokens* is not an int, or *pin* is not a scope.
        ScopeError: *max_tokens* is negative.

    >>> from workingctx import Message, PrefixContext, WorkingContext
    >>> from workingctx.managers import fit
    >>> ctx = WorkingContext(prefix=PrefixContext(system_prompt="Be brief."))
    >>> for i in range(5):
    ...     _ = ctx.append(Message("user", f"question {i}"), Message("assistant", f"answer {i}"))
    >>> fitted = fit(ctx, 40)
    >>> [m.text() for m in fitted.messages], fitted.count_tokens() <= 40, ctx.size()
    (['question 3', 'answer 3', 'question 4', 'answer 4'], True, 10)
    """
    manager = TokenBudgetContextManager(max_tokens, low_watermark=max_tokens, pin=pin)
    fitted = _check_context(ctx, "fit()").slice(Since(0))
    manager.trim_context(fitted)
    return fitted
