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
import inspect
import logging
import warnings
from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Any, Generic, Protocol, Self, TypeVar, cast

import attrs

from workingctx.context import WorkingContext
from workingctx.exceptions import ScopeError
from workingctx.messages import Message
from workingctx.scopes import (
    AllOf,
    CompletedToolSequences,
    LastNTurns,
    RoleFilter,
    Since,
    TokenBudget,
    WholeExchanges,
    surviving_indices,
)
from workingctx.scopes._algebra import Scope, _is_scope, _not_a_scope
from workingctx.scopes._exchanges import exchange_units, is_reasoning_only, starts_turn
from workingctx.tokens import MessageCounter, counting
from workingctx.validity import STRUCTURAL_RULES, RuleState

if TYPE_CHECKING:
    from collections.abc import Iterable

    from workingctx.context import TailView

__all__ = [
    "SUMMARY_NAME",
    "BaseContextManager",
    "MessageContextManager",
    "Summarizer",
    "SummaryContextManager",
    "TokenBudgetContextManager",
    "TrimReport",
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
    if not isinstance(ctx, WorkingContext):
        msg = (
            f"{where} takes a WorkingContext, got {ctx!r} of type {type(ctx).__name__}; "
            "wrap a message list with WorkingContext(messages=...)"
        )
        raise TypeError(msg)
    return ctx


def _check_count(owner: str, name: str, value: object, *, optional: bool = False) -> None:
    if value is None and optional:
        return
    if not isinstance(value, int) or isinstance(value, bool):
        kind = "an int or None" if optional else "an int"
        msg = f"{owner}: {name} must be {kind}, got {value!r} of type {type(value).__name__}"
        raise TypeError(msg)
    if value < 0:
        msg = f"{owner}: {name} must be 0 or more, got {value!r}"
        raise ScopeError(msg)


def _check_flag(owner: str, name: str, value: object) -> None:
    if not isinstance(value, bool):
        msg = f"{owner}: {name} must be True or False, got {value!r} of type {type(value).__name__}"
        raise TypeError(msg)


def _kept(scope: Scope, messages: Sequence[Message]) -> list[Message]:
    """
    The messages *scope* keeps, in order.
    """
    return [messages[i] for i in sorted(surviving_indices(scope, messages))]


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


def _replace_tail(ctx: WorkingContext, messages: Sequence[Message]) -> None:
    ctx.replace_tail(messages)


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


def _check_pin(owner: str, pin: object) -> None:
    if pin is not None and not _is_scope(pin):
        raise _not_a_scope(pin, f"{owner}(pin=...)")


def _pinned(pin: object, messages: Sequence[Message]) -> set[int]:
    """
    The indices of the pinned messages, with their whole exchanges.
    """
    if pin is None:
        return set()
    scope = cast("Scope", pin)  # checked by _check_pin when the manager was built
    return set(surviving_indices(WholeExchanges(scope, mode="expand"), messages))


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
    if not user_first or not index.turns:
        return False
    return state.first < 0 or not index.turn_start[state.first]


def _broken_rules(view: TailView) -> list[str]:
    """
    The tool rules the tail breaks, from the context's index.
    """
    index = view.tail_index
    if index is None:  # pragma: no cover  # a context's view always has one
        return []
    return [p.rule for p in index.walk.problems if p.rule in STRUCTURAL_RULES]


def _newest_turn_before(messages: Sequence[Message], position: int) -> int | None:
    for i in range(position - 1, -1, -1):
        if starts_turn(messages[i]):
            return i
    return None


def _valid(messages: Sequence[Message], kept: Iterable[int], *, user_first: bool) -> tuple[list[int], list[str]]:
    """
    *kept*, made a valid request: every system message, broken exchanges dropped
    whole, and (with *user_first*) a user message first.

    Returns:
        The indices to keep, ascending, and the rule ids of what was repaired.
    """
    system = {i for i, m in enumerate(messages) if m.role == "system"}
    keep = sorted(set(kept) | system)
    repaired: list[str] = []
    for _ in range(4):  # dropping whole exchanges cannot break another one: one round is the rule
        sub = [messages[i] for i in keep]
        state = RuleState()
        for message in sub:
            state.feed(message)
        bad = [p for p in state.problems if p.rule in STRUCTURAL_RULES and p.index is not None]
        if not bad:
            break
        repaired.extend(p.rule for p in bad)
        unit, _ = exchange_units(sub)
        units: set[int] = set()
        alone: set[int] = set()
        for problem in bad:
            at = problem.index
            assert at is not None  # noqa: S101  # filtered above
            if problem.rule == "duplicate-result" and sub[at].role == "tool":
                alone.add(at)  # the second answer goes; the exchange stays
            else:
                units.add(unit[at])
        keep = [
            keep[j] for j in range(len(sub)) if sub[j].role == "system" or (j not in alone and unit[j] not in units)
        ]
    if user_first:
        keep, fixed = _open_with_user(messages, keep)
        if fixed:
            repaired.append(fixed)
    return keep, list(dict.fromkeys(repaired))


def _open_with_user(messages: Sequence[Message], keep: list[int]) -> tuple[list[int], str | None]:
    """
    *keep* with a user message first: the newest user turn before the window
    is kept in front of it; without one, what comes before the first kept user
    turn goes; a window with nothing but system messages gets the newest user turn.
    """
    first = next((j for j, i in enumerate(keep) if messages[i].role != "system"), None)
    if first is None:
        newest = _newest_turn_before(messages, len(messages))
        if newest is None:
            return keep, None
        return sorted([*keep, newest]), "no-user-message"
    at = keep[first]
    if starts_turn(messages[at]):
        return keep, None
    before = _newest_turn_before(messages, at)
    if before is not None:
        return sorted([*keep, before]), "first-not-user"
    later = next((j for j in range(first, len(keep)) if starts_turn(messages[keep[j]])), None)
    if later is None:
        return keep, None
    return [i for j, i in enumerate(keep) if j >= later or messages[i].role == "system"], "first-not-user"


def _report(before: int, after: int, repaired: Sequence[str], tokens: int | None = None) -> TrimReport:
    return TrimReport(after, max(before - after, 0), tuple(repaired), tokens)


def _waiting(messages: Sequence[Message]) -> set[int]:
    """
    The exchange whose calls still wait for their results at the end (its reasoning included).
    """
    state = RuleState()
    for message in messages:
        state.feed(message)
    at, ids = state.pending()
    if not ids:
        return set()
    start = at - 1 if at > 0 and is_reasoning_only(messages[at - 1]) else at
    return set(range(start, len(messages)))


def _without_completed_tool_sequences() -> WholeExchanges:
    """
    Every message outside a completed tool sequence; incomplete sequences stay whole.
    """
    return WholeExchanges(~CompletedToolSequences(), mode="drop")


# -- MessageContextManager -----------------------------------------------------------


class MessageContextManager(BaseContextManager[WorkingContext]):
    """
    Keeps every system message and the last *max_messages* user turns.

    The scope is ``LastNTurns(max_messages)``, intersected with
    ``~CompletedToolSequences()`` when *remove_tool_msgs* is set, inside
    ``WholeExchanges(..., mode="drop")`` so that no exchange is ever split.
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
        last_trim: A :class:`TrimReport` of the last trim (None before the first).

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
    WholeExchanges(LastNTurns(2), mode='drop')
    >>> for message in manager.trim_context(ctx).messages:
    ...     print(message.role, "|", message.text())
    system | You are terse.
    user | Second question
    assistant | Second answer
    user | Third question
    """

    __slots__ = ("_scope", "_window", "last_trim", "max_messages", "pin", "remove_tool_msgs")

    def __init__(self, max_messages: int = 10, remove_tool_msgs: bool = False, *, pin: object = None) -> None:
        _check_count("MessageContextManager", "max_messages", max_messages)
        _check_flag("MessageContextManager", "remove_tool_msgs", remove_tool_msgs)
        _check_pin("MessageContextManager", pin)
        self.max_messages = max_messages
        self.remove_tool_msgs = remove_tool_msgs
        self.pin = pin
        self.last_trim: TrimReport | None = None
        self._window = LastNTurns(max_messages)
        inner = self._window & ~CompletedToolSequences() if remove_tool_msgs else self._window
        self._scope = WholeExchanges(inner, mode="drop")

    def scope_for(self, ctx: WorkingContext) -> WholeExchanges:  # noqa: ARG002  # one signature for every manager
        """
        The scope of the messages this manager keeps (the same for every context).
        """
        return self._scope

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
            self.last_trim = TrimReport(size, 0)
            return ctx
        kept = set(surviving_indices(self._scope, view)) | _pinned(self.pin, view)
        keep, repaired = _valid(view, kept, user_first=user_first)
        # the scope drops broken exchanges itself: report them from the context's index
        repaired = list(dict.fromkeys([*_broken_rules(view), *repaired]))
        self.last_trim = _report(size, len(keep), repaired)
        if len(keep) == size:
            return ctx
        messages = [view[i] for i in keep]
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
            return len(surviving_indices(self._window, view)) < len(view)
        return len(index.turns) > self.max_messages

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


# -- TokenBudgetContextManager -------------------------------------------------------


class TokenBudgetContextManager(BaseContextManager[WorkingContext]):
    """
    Keeps the system messages and the newest whole exchanges that fit a token budget, cache-stably.

    Two watermarks decide when to cut. While the context (prefix and tail)
    holds *max_tokens* or fewer, nothing changes, so between cuts the
    transcript only grows at its end and every request shares its whole prefix
    with the one before: the provider's prompt cache keeps hitting. When the
    context passes *max_tokens*, the tail is cut down to *low_watermark*, as
    ``TokenBudget(low_watermark - prefix tokens, start_on="user")`` would
    (:meth:`scope_for`) with the messages always kept (below) counted first:
    every system message and the newest whole exchanges that fit, starting on
    a user turn (or, when not even the newest turn fits, on the newest
    exchange boundary that does). An exchange (a call, its results and its
    reasoning) is never split, and the kept messages keep their order; a
    kept tool result whose call is nowhere in the context is dropped.

    A lower *low_watermark* means fewer, larger cuts: more of each request is
    served from the cache, and less history is kept right after a cut.

    Both watermarks count the whole request: the prefix and the tail. Some
    messages are always kept and counted first: every system message, the
    *pin* scope's messages with their exchanges, the newest exchange (the
    user's newest question, or the newest call with its results), and, when
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
        last_trim: A :class:`TrimReport` of the last trim (None before the first).

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

    __slots__ = ("counter", "last_trim", "low_watermark", "max_tokens", "pin")

    def __init__(
        self,
        max_tokens: int,
        *,
        low_watermark: int | None = None,
        counter: MessageCounter | None = None,
        pin: object = None,
    ) -> None:
        owner = "TokenBudgetContextManager"
        _check_pin(owner, pin)
        _check_count(owner, "max_tokens", max_tokens)
        _check_count(owner, "low_watermark", low_watermark, optional=True)
        low = max_tokens // 2 if low_watermark is None else low_watermark
        if low > max_tokens:
            msg = (
                f"{owner}: low_watermark={low!r} is above max_tokens={max_tokens!r}; "
                "a cut trims down to the low watermark, so it must be at most max_tokens"
            )
            raise ScopeError(msg)
        if counter is not None and not isinstance(counter, MessageCounter):
            msg = (
                f"{owner}(counter=...) needs a token counter with count_message(message) and a name, "
                f"got {counter!r} of type {type(counter).__name__}; use ApproxTokenCounter() or TiktokenCounter()"
            )
            raise TypeError(msg)
        self.max_tokens = max_tokens
        self.low_watermark = low
        self.counter = counter
        self.pin = pin
        self.last_trim: TrimReport | None = None

    def _counter(self, ctx: WorkingContext) -> MessageCounter:
        return ctx.counter if self.counter is None else self.counter

    def _tokens(self, ctx: WorkingContext) -> int:
        if self.counter is None or self.counter == ctx.counter:
            return ctx.count_tokens()
        return _count(self.counter, ctx.assembled())

    def scope_for(self, ctx: WorkingContext) -> TokenBudget:
        """
        The scope a cut applies to *ctx*: the low watermark, less the prefix's tokens.
        """
        counter = self._counter(ctx)
        prefix_tokens = _count(counter, ctx.prefix.as_messages())
        return TokenBudget(max(0, self.low_watermark - prefix_tokens), counter, start_on="user")

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
        if not cutting:
            if not _needs_repair(view, user_first):
                self.last_trim = TrimReport(size, 0, tokens=tokens)
                return ctx
            keep, repaired = _valid(view, range(size), user_first=user_first)
        else:
            keep, repaired = _valid(view, self._cut(ctx, view, user_first), user_first=user_first)
        if len(keep) < size:
            _replace_tail(ctx, [view[i] for i in keep])
        tokens = self._tokens(ctx)
        over = cutting and tokens > self.low_watermark
        self.last_trim = TrimReport(len(keep), size - len(keep), tuple(repaired), tokens, over)
        if over:
            logger.warning(
                "TokenBudgetContextManager: the context holds %d tokens after the cut, over the low watermark of "
                "%d: the messages always kept (system messages, pinned ones, the newest exchange and the user "
                "message before it) do not fit; they are kept anyway",
                tokens,
                self.low_watermark,
            )
        return ctx

    def _cut(self, ctx: WorkingContext, view: TailView, user_first: bool) -> set[int]:
        """
        The indices a cut keeps before the request is made valid: the messages
        always kept, and the newest whole exchanges that fit what is left of
        the low watermark, from a user turn when one fits.
        """
        size = len(view)
        counter = self._counter(ctx)
        count = counting(counter)
        counts = [count(message) for message in view]
        unit, _ = exchange_units(view)
        others = [i for i in range(size) if view[i].role != "system"]
        always = set(view.system_positions) | _pinned(self.pin, view)
        if others:
            newest = unit[others[-1]]
            always.update(i for i in range(others[0], size) if unit[i] == newest)
        budget = self.low_watermark - _count(counter, ctx.prefix.as_messages()) - sum(counts[i] for i in always)
        if budget < 0:
            return always
        # rest[c]: the tokens of the messages from c on that are not always kept
        rest = [0] * (size + 1)
        for i in range(size - 1, -1, -1):
            rest[i] = rest[i + 1] + (0 if i in always else counts[i])
        index = view.tail_index
        assert index is not None  # noqa: S101  # a context's view always has one
        fits = next(c for c in range(size + 1) if rest[c] <= budget)
        cut = index.first_cut(fits, size, user_turn=False)
        user_cut = index.first_cut(cut, size, user_turn=True)
        if user_cut < size:
            cut = user_cut
        if user_first:
            cut = self._room_for_a_user(view, always, counts, rest, budget, cut)
        return always | set(range(cut, size))

    @staticmethod
    def _room_for_a_user(
        view: TailView, always: set[int], counts: list[int], rest: list[int], budget: int, cut: int
    ) -> int:
        """
        The first clean cut from *cut* on that leaves room for the newest user
        message before the window, when the window does not open with one.
        """
        size = len(view)
        index = view.tail_index
        assert index is not None  # noqa: S101  # a context's view always has one
        pinned = sorted(i for i in always if view[i].role != "system")
        while cut < size:
            first = next((i for i in range(cut, size) if view[i].role != "system"), size)
            if pinned:
                first = min(first, pinned[0])
            if first >= size or starts_turn(view[first]):
                return cut
            user = _newest_turn_before(view, first)
            extra = 0 if user is None or user in always else counts[user]
            if rest[cut] + extra <= budget:
                return cut
            cut = index.first_cut(cut + 1, size, user_turn=False)
        return cut

    async def atrim_context(self, ctx: WorkingContext) -> WorkingContext:
        """
        The same as :meth:`trim_context`, for async callers.
        """
        return self.trim_context(ctx)

    def __repr__(self) -> str:
        counter = "" if self.counter is None else f", counter={self.counter!r}"
        pin = "" if self.pin is None else f", pin={self.pin!r}"
        return f"TokenBudgetContextManager({self.max_tokens!r}, low_watermark={self.low_watermark!r}{counter}{pin})"


# -- SummaryContextManager ----------------------------------------------------------


class SummaryContextManager(BaseContextManager[WorkingContext]):
    """
    Replaces older messages with a summary written by an injected summarizer.

    A summary runs when the tail holds more than *max_messages* messages or
    the context (prefix and tail) more than *token_budget* tokens, counted
    with the context's counter. Then:

    1. the non-system messages older than the *keep_recent* newest ones go to
       ``await summarizer(messages, prompt=..., max_tokens=max_summary_tokens)``;
       the boundary moves back when it would separate a tool result from its
       call (the scope is ``WholeExchanges(Since(...) & ~RoleFilter({'system'}))``),
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

    Attributes:
        last_trim: A :class:`TrimReport` of the last call (None before the first).

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

    __slots__ = (
        "keep_recent",
        "last_trim",
        "max_messages",
        "max_summary_tokens",
        "pin",
        "remove_tool_msgs",
        "summarizer",
        "summary_prompt",
        "token_budget",
    )

    def __init__(
        self,
        summarizer: Summarizer | Callable[..., Awaitable[str]],
        *,
        max_messages: int | None = 30,
        token_budget: int | None = None,
        keep_recent: int = 8,
        remove_tool_msgs: bool = False,
        summary_prompt: str | None = None,
        max_summary_tokens: int = 600,
        pin: object = None,
    ) -> None:
        owner = "SummaryContextManager"
        _check_pin(owner, pin)
        if not callable(summarizer):
            msg = (
                f"{owner} needs a summarizer: an async callable (messages, *, prompt, max_tokens) -> str, "
                f"got {summarizer!r} of type {type(summarizer).__name__}"
            )
            raise TypeError(msg)
        _check_count(owner, "max_messages", max_messages, optional=True)
        _check_count(owner, "token_budget", token_budget, optional=True)
        _check_count(owner, "keep_recent", keep_recent)
        _check_count(owner, "max_summary_tokens", max_summary_tokens)
        _check_flag(owner, "remove_tool_msgs", remove_tool_msgs)
        if summary_prompt is not None and not isinstance(summary_prompt, str):
            msg = f"{owner}: summary_prompt must be a str or None, got {summary_prompt!r}"
            raise TypeError(msg)
        if max_messages is None and token_budget is None:
            warnings.warn(
                f"{owner}(max_messages=None, token_budget=None) will never summarize: "
                "set max_messages or token_budget (or both) to say when to summarize",
                UserWarning,
                stacklevel=2,
            )
        self.summarizer = summarizer
        self.max_messages = max_messages
        self.token_budget = token_budget
        self.keep_recent = keep_recent
        self.remove_tool_msgs = remove_tool_msgs
        self.summary_prompt = DEFAULT_SUMMARY_PROMPT if summary_prompt is None else summary_prompt
        self.max_summary_tokens = max_summary_tokens
        self.pin = pin
        self.last_trim: TrimReport | None = None

    def scope_for(self, ctx: WorkingContext | Sequence[Message]) -> WholeExchanges:
        """
        The scope of the non-system messages a summary keeps verbatim in *ctx*.

        The newest *keep_recent* non-system messages, widened to whole exchanges.
        """
        messages = ctx.messages if isinstance(ctx, WorkingContext) else ctx
        others = sorted(surviving_indices(~_SYSTEM, messages))
        keep = self.keep_recent
        start = len(messages) if keep == 0 else others[-keep] if keep <= len(others) else 0
        return WholeExchanges(AllOf((Since(start), ~_SYSTEM)), mode="expand")

    async def _over(self, ctx: WorkingContext, messages: Sequence[Message], *, stripped: bool) -> bool:
        if self.max_messages is not None and len(messages) > self.max_messages:
            return True
        if self.token_budget is None:
            return False
        if not stripped:
            tokens = await ctx.tokens()
        else:
            tokens = int(await ctx.counter.estimate([*ctx.prefix.as_messages(), *messages]))
        return tokens > self.token_budget

    async def _summarize(self, old: Sequence[Message]) -> str | None:
        try:
            result: object = self.summarizer(tuple(old), prompt=self.summary_prompt, max_tokens=self.max_summary_tokens)
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
            and not await self._over(ctx, view, stripped=False)
            and not _needs_repair(view, user_first)
        ):
            # the common case, checked without walking the transcript
            self.last_trim = TrimReport(len(view), 0)
            return ctx
        given = ctx.messages
        messages: Sequence[Message] = given
        if self.remove_tool_msgs:
            messages = _kept(_without_completed_tool_sequences(), given)
        stripped = len(messages) < len(given)
        if not await self._over(ctx, messages, stripped=stripped):
            return self._leave(ctx, given, messages, stripped, user_first)
        window = set(surviving_indices(self.scope_for(messages), messages))
        window |= _waiting(messages) | _pinned(self.pin, messages)
        keep, repaired = _valid(messages, window, user_first=user_first)
        kept = set(keep)
        old = [m for i, m in enumerate(messages) if i not in kept and m.role != "system"]
        if not old:
            return self._leave(ctx, given, messages, stripped, user_first)
        summary = await self._summarize(old)
        if summary is None:
            self.last_trim = TrimReport(len(given), 0)
            return ctx
        # Other coroutines may have written while the summarizer ran: messages
        # appended meanwhile are kept after the window; any other change wins
        # over this summary, which is dropped (and logged) rather than undo it.
        now = ctx.messages
        if len(now) < len(given) or any(a is not b for a, b in zip(now, given, strict=False)):
            logger.warning("the context changed while the summarizer ran; the summary is dropped, nothing else")
            return ctx
        late = list(now[len(given) :])
        systems = [m for m in messages if m.role == "system"]
        earlier = [m.text() for m in systems if m.name == SUMMARY_NAME]
        text = "\n\n".join([*earlier, summary])
        head = [m for m in systems if m.name != SUMMARY_NAME]
        head.append(Message("system", text, name=SUMMARY_NAME))
        _replace_tail(ctx, head + [messages[i] for i in keep if messages[i].role != "system"] + late)
        self.last_trim = TrimReport(ctx.size(), len(given) - ctx.size() + 1, tuple(repaired))
        return ctx

    def _leave(
        self,
        ctx: WorkingContext,
        given: Sequence[Message],
        messages: Sequence[Message],
        stripped: bool,
        user_first: bool,
    ) -> WorkingContext:
        """
        No summary: the tail as it is (less the completed tool sequences, when
        they are removed), made a valid request.
        """
        keep, repaired = _valid(messages, range(len(messages)), user_first=user_first)
        if stripped or len(keep) < len(messages):
            _replace_tail(ctx, [messages[i] for i in keep])
        self.last_trim = TrimReport(len(keep), len(given) - len(keep), tuple(repaired))
        return ctx

    def trim_context(self, ctx: WorkingContext) -> WorkingContext:
        """
        :meth:`atrim_context` run to completion, for code that is not async.

        Raises:
            RuntimeError: Called while an event loop is running in this thread;
                use ``await manager.atrim_context(ctx)`` there.
            TypeError: *ctx* is not a :class:`~workingctx.WorkingContext`.
        """
        _check_context(ctx, "SummaryContextManager.trim_context()")
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            return asyncio.run(self.atrim_context(ctx))
        msg = (
            "SummaryContextManager.trim_context() was called inside a running event loop, "
            "where it cannot wait for the summarizer; use `await manager.atrim_context(ctx)` instead"
        )
        raise RuntimeError(msg)

    def __repr__(self) -> str:
        return (
            f"SummaryContextManager({self.summarizer!r}, max_messages={self.max_messages!r}, "
            f"token_budget={self.token_budget!r}, keep_recent={self.keep_recent!r}, "
            f"remove_tool_msgs={self.remove_tool_msgs!r}, max_summary_tokens={self.max_summary_tokens!r})"
        )
