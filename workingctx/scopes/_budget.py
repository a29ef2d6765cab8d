"""
``TokenBudget``: the newest whole exchanges that fit a token budget.
"""

from __future__ import annotations

from bisect import bisect_left
from typing import TYPE_CHECKING, Any, ClassVar, Literal

import attrs

from workingctx import _checks
from workingctx.exceptions import ScopeError
from workingctx.scopes._algebra import _ScopeOps
from workingctx.scopes._exchanges import call_ids, is_reasoning_only, result_ids, starts_turn
from workingctx.tokens import ApproxTokenCounter, MessageCounter, counting

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

    from workingctx.messages import Message

__all__ = ["TokenBudget"]

_START_ON = ("exchange", "user", "user_only")
_DEFAULT = ApproxTokenCounter()


_budget = _checks.count(label="TokenBudget(max_tokens)", error=ScopeError)


def _counter(_inst: object, _attribute: attrs.Attribute[Any], value: object) -> None:
    if value is not None and not isinstance(value, MessageCounter):
        raise _checks.wrong_type(
            value,
            "counter",
            "a token counter with a count_message(message) method and a name",
            label="TokenBudget(counter=...)",
            verb="needs",
            fix="use ApproxTokenCounter() or TiktokenCounter()",
        )


_start_on = _checks.one_of(*_START_ON, label="TokenBudget start_on", error=ScopeError)
_flag = _checks.flag(label="TokenBudget(include_system=...)")


@attrs.frozen(cache_hash=True, repr=False)
class TokenBudget(_ScopeOps):
    """
    Keeps the newest whole exchanges that fit *max_tokens*, plus every system message. Positional.

    The kept tail is a suffix of the list that never splits an exchange (a tool
    call, its results and its reasoning stay together) and is the longest such
    suffix that fits. System messages anywhere in the list are kept and counted
    first (``include_system=False`` treats them like any other message). When
    they alone exceed the budget, only they are kept: a scope never drops a
    system message. Each message is counted once by *counter* and the count is
    cached on the message, so asking again after an append costs only what is
    new; the work is proportional to what is kept.

    ``start_on`` says where the kept tail may begin:

    - ``"exchange"`` (the default): at any exchange boundary;
    - ``"user"``: at a user turn (or the start of the list); when not even the
      newest turn fits, the newest whole exchanges that fit are kept rather
      than nothing;
    - ``"user_only"``: at a user turn (or the start of the list), or nothing.

    A result whose call is nowhere earlier in the list is counted like any
    other message; wrap the scope in :class:`WholeExchanges` to drop it.

    Applied through a context (``ctx.slice(scope)``, ``explain(scope, ctx)``,
    ``surviving_indices(scope, ctx.tail_view())``), the budget counts the
    context's prefix first, as managers and ``ctx.fit`` do: every request
    sends it, so the slice's whole request fits *max_tokens*. A bare list of
    messages has no prefix, and only its messages are counted.

    Args:
        max_tokens: The budget, 0 or more.
        counter: A :class:`~workingctx.tokens.MessageCounter`
            (``ApproxTokenCounter()``, ``TiktokenCounter()``, or any object with
            a ``name`` and ``count_message(message) -> int``); ``None`` for the
            approximate counter.
        start_on: ``"exchange"``, ``"user"`` or ``"user_only"``.
        include_system: Keep and count every system message first.

    Raises:
        TypeError: *max_tokens* is not an int, *counter* cannot count messages,
            or *include_system* is not a bool.
        ScopeError: *max_tokens* is negative, or *start_on* is unknown.

    >>> from workingctx import Message, ToolCall
    >>> from workingctx.scopes import surviving_indices
    >>> msgs = [
    ...     Message("system", "Be brief."),
    ...     Message("user", "What is the weather in Oslo, and should I bring an umbrella today?"),
    ...     Message("assistant", tool_calls=(ToolCall("c1", "weather", {"city": "Oslo"}),)),
    ...     Message("tool", "rain, 9 degrees", tool_call_id="c1"),
    ...     Message("assistant", "Rain: bring one."),
    ... ]
    >>> sorted(surviving_indices(TokenBudget(50), msgs))
    [0, 2, 3, 4]
    >>> sorted(surviving_indices(TokenBudget(50, start_on="user"), msgs))
    [0, 2, 3, 4]
    >>> sorted(surviving_indices(TokenBudget(50, start_on="user_only"), msgs))
    [0]
    >>> sorted(surviving_indices(TokenBudget(60, start_on="user_only"), msgs))
    [0, 1, 2, 3, 4]
    """

    positional: ClassVar[bool] = True

    max_tokens: int = attrs.field(validator=_budget)
    counter: MessageCounter | None = attrs.field(default=None, validator=_counter)
    start_on: Literal["exchange", "user", "user_only"] = attrs.field(
        default="exchange", kw_only=True, validator=_start_on
    )
    include_system: bool = attrs.field(default=True, kw_only=True, validator=_flag)

    def surviving_indices(self, messages: Sequence[Message]) -> frozenset[int]:
        """
        The indices of every system message and of the newest whole exchanges that fit.
        """
        fast = self._from_index(messages, self.counter)
        if fast is not None:
            return fast
        count = counting(self.counter)
        size = len(messages)
        system: list[int] = []
        budget = self.max_tokens - prefix_tokens(messages, count)
        if self.include_system:
            # A context's tail view knows its system messages already (found once
            # per message); a plain list needs the pass.
            known = getattr(messages, "system_positions", None)
            system = list(known) if known is not None else [i for i, m in enumerate(messages) if m.role == "system"]
            budget -= sum(count(messages[i]) for i in system)
        cut = size
        if budget >= 0:
            any_cut, user_cut, blocked = self._scan(messages, budget, count, frozenset())
            if blocked:
                orphans = _orphan_results(messages)
                any_cut, user_cut, _ = self._scan(messages, budget, count, orphans)
            if self.start_on == "exchange":
                cut = any_cut
            elif self.start_on == "user_only" or user_cut < size:
                cut = user_cut
            else:
                cut = any_cut
        if not system:
            return frozenset(range(cut, size))
        kept = [i for i in system if i < cut]
        kept.extend(range(cut, size))
        return frozenset(kept)

    _index_set = surviving_indices

    def _from_index(self, messages: Sequence[Message], counter: MessageCounter | None) -> frozenset[int] | None:
        """
        The same answer from a context's tail view, in time that grows with the
        log of the transcript (plus the few messages between the fitting point
        and the next clean cut), or None when the view cannot answer.

        The view carries running token sums under the context's counter, the
        system messages' positions and a :class:`TailIndex` of clean cuts.
        """
        # A context never counted nor sliced before (one converted from a
        # transcript) is walked from its end instead, counting only the suffix
        # it keeps; see TailView.warm.
        warm = getattr(messages, "warm", None)
        if warm is None or not self.include_system or not warm():
            return None
        index = messages.tail_index  # type: ignore[attr-defined]  # a TailView
        running = messages.running  # type: ignore[attr-defined]
        if running is None:
            return None
        if running.counter is not counter and running.counter.name != (counter or _DEFAULT).name:
            return None
        size = len(messages)
        upto = running.upto
        system: tuple[int, ...] = messages.system_positions  # type: ignore[attr-defined]  # a TailView
        # cumulative tokens of the system messages before each system position
        system_before = [0]
        for position in system:
            system_before.append(system_before[-1] + upto(position + 1) - upto(position))
        budget = self.max_tokens - system_before[-1] - prefix_tokens(messages, counting(counter))
        if budget < 0:
            return frozenset(system)
        total = upto(size)

        def rest(cut: int) -> int:
            """The tokens of the non-system messages from *cut* on."""
            return int(total - upto(cut) - (system_before[-1] - system_before[bisect_left(system, cut)]))

        lo, hi = 0, size  # rest(size) == 0 always fits
        while lo < hi:
            mid = (lo + hi) // 2
            if rest(mid) <= budget:
                hi = mid
            else:
                lo = mid + 1
        any_cut = index.first_cut(lo, size, user_turn=False)
        cut = any_cut
        if self.start_on != "exchange":
            user_cut = index.first_cut(any_cut, size, user_turn=True)
            if self.start_on == "user_only" or user_cut < size:
                cut = user_cut
        if not system:
            return frozenset(range(cut, size))
        kept = [i for i in system if i < cut]
        kept.extend(range(cut, size))
        return frozenset(kept)

    def _scan(
        self,
        messages: Sequence[Message],
        budget: int,
        count: Callable[[Message], int],
        orphans: frozenset[tuple[int, str]],
    ) -> tuple[int, int, bool]:
        """
        Walk back from the end while the suffix fits; return the smallest
        exchange cut, the smallest user-turn cut, and whether an unanswered
        result blocked every cut before it (an orphan, found by walking on).

        This loop is the whole cost of the scope, so the common case (text
        content) is written out inline.
        """
        skip_system = self.include_system
        pending: set[str] = set()
        add, discard = pending.add, pending.discard
        total = 0
        size = len(messages)
        any_cut = user_cut = size
        user_head = False
        i = size
        for message in reversed(messages):
            i -= 1
            role = message.role
            if not skip_system or role != "system":
                total += count(message)
                if total > budget:
                    break
            if message.content.__class__ is str:
                if role == "tool":
                    answered = message.tool_call_id
                    if answered is not None and not (orphans and (i, answered) in orphans):
                        add(answered)
                    user_head = False
                    if pending:
                        continue
                elif role == "assistant":
                    user_head = False
                    calls = message.tool_calls
                    if calls:
                        for call in calls:
                            discard(call.id)
                        if pending or (i > 0 and is_reasoning_only(messages[i - 1])):
                            continue
                elif role == "user":
                    user_head = True
            else:
                ids = call_ids(message)
                pending.difference_update(ids)
                for answered in result_ids(message):
                    if not (orphans and (i, answered) in orphans):
                        add(answered)
                if role != "system":
                    user_head = starts_turn(message)
                if pending or (ids and i > 0 and is_reasoning_only(messages[i - 1])):
                    continue
            if not pending:
                any_cut = i
                if user_head or i == 0:
                    user_cut = i
        else:
            i = -1
        if not pending or orphans:
            return any_cut, user_cut, False
        # Stopped with results whose call is before the stop: walk on to find
        # those calls. Normally they are a few messages back; if some are never
        # found, they are orphans, and they must not block the cut.
        while i >= 0 and pending:
            pending.difference_update(call_ids(messages[i]))
            i -= 1
        return any_cut, user_cut, bool(pending)

    def __repr__(self) -> str:
        parts = [repr(self.max_tokens)]
        if self.counter is not None:
            parts.append(f"counter={self.counter!r}")
        if self.start_on != "exchange":
            parts.append(f"start_on={self.start_on!r}")
        if not self.include_system:
            parts.append("include_system=False")
        return f"TokenBudget({', '.join(parts)})"


def prefix_tokens(messages: Sequence[Message], count: Callable[[Message], int]) -> int:
    """
    The tokens of the prefix sent before *messages*: the ``prefix_messages`` a
    context's tail view carries (none for a bare list).
    """
    prefix: Sequence[Message] = getattr(messages, "prefix_messages", ())
    return sum(count(message) for message in prefix)


def _orphan_results(messages: Sequence[Message]) -> frozenset[tuple[int, str]]:
    """
    Every ``(index, call id)`` where a message answers a call no earlier message asked for.
    """
    asked: set[str] = set()
    orphans: list[tuple[int, str]] = []
    for i, message in enumerate(messages):
        orphans.extend((i, answered) for answered in result_ids(message) if answered not in asked)
        asked.update(call_ids(message))
    return frozenset(orphans)
