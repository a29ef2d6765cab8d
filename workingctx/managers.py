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
from typing import Any, Generic, Protocol, Self, TypeVar

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

__all__ = [
    "SUMMARY_NAME",
    "BaseContextManager",
    "MessageContextManager",
    "Summarizer",
    "SummaryContextManager",
    "TokenBudgetContextManager",
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


def _kept(scope: object, messages: Sequence[Message]) -> list[Message]:
    """
    The messages *scope* keeps, in order.
    """
    return [messages[i] for i in sorted(surviving_indices(scope, messages))]


def _systems_first(messages: Sequence[Message]) -> list[Message]:
    """
    The system messages, in order, then every other message, in order.
    """
    return [m for m in messages if m.role == "system"] + [m for m in messages if m.role != "system"]


def _count(counter: Any, messages: Sequence[Message]) -> int:
    """
    Tokens of *messages* with any counter that has ``count_message`` (the one
    method a budget's counter needs).
    """
    count_message = counter.count_message
    return sum(int(count_message(message)) for message in messages)


def _replace_tail(ctx: WorkingContext, messages: Sequence[Message]) -> None:
    ctx.replace_tail(messages)


_WHOLE_EXCHANGES = WholeExchanges(Since(0), mode="drop")
"""Every message, less the tool results whose call is nowhere earlier (which no provider accepts)."""


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

    Args:
        max_messages: How many user turns to keep, 0 or more.
        remove_tool_msgs: Remove completed tool sequences first.

    Raises:
        TypeError: *max_messages* is not an int, or *remove_tool_msgs* not a bool.
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

    __slots__ = ("_scope", "_window", "max_messages", "remove_tool_msgs")

    def __init__(self, max_messages: int = 10, remove_tool_msgs: bool = False) -> None:
        _check_count("MessageContextManager", "max_messages", max_messages)
        _check_flag("MessageContextManager", "remove_tool_msgs", remove_tool_msgs)
        self.max_messages = max_messages
        self.remove_tool_msgs = remove_tool_msgs
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
        messages = _check_context(ctx, "MessageContextManager.trim_context()").messages
        over = len(surviving_indices(self._window, messages)) < len(messages)
        if not over and not self.remove_tool_msgs:
            return ctx
        kept = _kept(self._scope, messages)
        if len(kept) == len(messages):
            return ctx
        _replace_tail(ctx, _systems_first(kept) if over else kept)
        return ctx

    async def atrim_context(self, ctx: WorkingContext) -> WorkingContext:
        """
        The same as :meth:`trim_context`, for async callers.
        """
        return self.trim_context(ctx)

    def __repr__(self) -> str:
        return f"MessageContextManager(max_messages={self.max_messages!r}, remove_tool_msgs={self.remove_tool_msgs!r})"


# -- TokenBudgetContextManager -------------------------------------------------------


class TokenBudgetContextManager(BaseContextManager[WorkingContext]):
    """
    Keeps the system messages and the newest whole exchanges that fit a token budget, cache-stably.

    Two watermarks decide when to cut. While the context (prefix and tail)
    holds *max_tokens* or fewer, nothing changes, so between cuts the
    transcript only grows at its end and every request shares its whole prefix
    with the one before: the provider's prompt cache keeps hitting. When the
    context passes *max_tokens*, the tail is cut down to *low_watermark*: the
    scope is ``TokenBudget(low_watermark - prefix tokens, start_on="user")``,
    every system message and the newest whole exchanges that fit, starting on
    a user turn (or, when not even the newest turn fits, on the newest
    exchange boundary that does). An exchange (a call, its results and its
    reasoning) is never split, and the kept messages keep their order; a
    kept tool result whose call is nowhere in the context is dropped.

    A lower *low_watermark* means fewer, larger cuts: more of each request is
    served from the cache, and less history is kept right after a cut.

    Args:
        max_tokens: The high watermark: cut when the context holds more tokens.
        low_watermark: What a cut trims down to; ``max_tokens // 2`` by default.
        counter: The token counter; ``None`` for the context's own counter
            (counted incrementally, so a check costs only what was appended).

    Raises:
        TypeError: A watermark is not an int, or *counter* cannot count messages.
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

    __slots__ = ("counter", "low_watermark", "max_tokens")

    def __init__(self, max_tokens: int, *, low_watermark: int | None = None, counter: Any = None) -> None:
        owner = "TokenBudgetContextManager"
        _check_count(owner, "max_tokens", max_tokens)
        _check_count(owner, "low_watermark", low_watermark, optional=True)
        low = max_tokens // 2 if low_watermark is None else low_watermark
        if low > max_tokens:
            msg = (
                f"{owner}: low_watermark={low!r} is above max_tokens={max_tokens!r}; "
                "a cut trims down to the low watermark, so it must be at most max_tokens"
            )
            raise ScopeError(msg)
        if counter is not None and not callable(getattr(counter, "count_message", None)):
            msg = (
                f"{owner}(counter=...) needs a token counter with count_message(message), "
                f"got {counter!r} of type {type(counter).__name__}; use ApproxTokenCounter() or TiktokenCounter()"
            )
            raise TypeError(msg)
        self.max_tokens = max_tokens
        self.low_watermark = low
        self.counter = counter

    def _counter(self, ctx: WorkingContext) -> Any:
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
        # The view keeps the context's index of clean cuts up to date, one new
        # message per turn, so the cut itself never walks the whole tail.
        messages = ctx.tail_view()
        if self._tokens(ctx) <= self.max_tokens:
            return ctx
        kept = _kept(_WHOLE_EXCHANGES, _kept(self.scope_for(ctx), messages))
        if len(kept) < len(messages):
            _replace_tail(ctx, kept)
        return ctx

    async def atrim_context(self, ctx: WorkingContext) -> WorkingContext:
        """
        The same as :meth:`trim_context`, for async callers.
        """
        return self.trim_context(ctx)

    def __repr__(self) -> str:
        counter = "" if self.counter is None else f", counter={self.counter!r}"
        return f"TokenBudgetContextManager({self.max_tokens!r}, low_watermark={self.low_watermark!r}{counter})"


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

    Args:
        summarizer: An async callable ``(messages, *, prompt, max_tokens) -> str``.
        max_messages: Summarize past this many tail messages; ``None`` disables it.
        token_budget: Summarize past this many tokens; ``None`` disables it.
        keep_recent: How many of the newest non-system messages stay verbatim.
        remove_tool_msgs: Remove completed tool sequences first.
        summary_prompt: The instruction for the summarizer; a concise, factual,
            third-person summary keeping facts, decisions and tool results by default.
        max_summary_tokens: The upper bound passed to the summarizer.

    Raises:
        TypeError: *summarizer* is not callable, or a setting has the wrong type.
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
        "max_messages",
        "max_summary_tokens",
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
    ) -> None:
        owner = "SummaryContextManager"
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

    async def _over(self, ctx: WorkingContext, messages: Sequence[Message], stripped: bool) -> bool:
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
        given = _check_context(ctx, "SummaryContextManager.atrim_context()").messages
        messages: Sequence[Message] = given
        if self.remove_tool_msgs:
            messages = _kept(_without_completed_tool_sequences(), given)
        stripped = len(messages) < len(given)
        if not await self._over(ctx, messages, stripped):
            if stripped:
                _replace_tail(ctx, messages)
            return ctx
        kept = surviving_indices(self.scope_for(messages), messages)
        old = [m for i, m in enumerate(messages) if i not in kept and m.role != "system"]
        if not old:
            if stripped:
                _replace_tail(ctx, messages)
            return ctx
        summary = await self._summarize(old)
        if summary is None:
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
        _replace_tail(ctx, head + [messages[i] for i in sorted(kept)] + late)
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
