"""
Scopes about tool calls and valid requests: ``CompletedToolSequences``,
``WholeExchanges``, ``PendingCalls`` and ``ValidRequest``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar, Literal

import attrs

from workingctx import _checks
from workingctx.exceptions import ArgumentTypeError, ScopeError
from workingctx.scopes._algebra import (
    AllOf,
    Scope,
    _ScopeOps,
    check_nesting,
    scope_field,
    surviving_indices,
)
from workingctx.scopes._budget import TokenBudget, prefix_tokens
from workingctx.scopes._exchanges import (
    call_ids,
    completed_tool_sequences,
    exchange_units,
    is_reasoning_only,
    result_ids,
    starts_turn,
)
from workingctx.tokens import counting
from workingctx.validity import STRUCTURAL_RULES, RuleState

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Sequence

    from workingctx.messages import Message

__all__ = [
    "WITHOUT_COMPLETED_TOOL_SEQUENCES",
    "CompletedToolSequences",
    "PendingCalls",
    "ValidRequest",
    "WholeExchanges",
]


@attrs.frozen(cache_hash=True, repr=False)
class CompletedToolSequences(_ScopeOps):
    """
    Keeps every completed tool sequence. Positional.

    A completed sequence is an assistant message asking for tool calls, every
    result of those calls (and of calls chained after them), and the final
    assistant answer that used them; a reasoning-only assistant message just
    before the call belongs to it, and so does a tool message without a call
    id inside it. A sequence still waiting for a result or for its final
    answer is not complete. ``~CompletedToolSequences()`` removes the finished
    tool work and keeps everything else, incomplete sequences whole.

    >>> from workingctx import Message, ToolCall
    >>> from workingctx.scopes import surviving_indices
    >>> msgs = [
    ...     Message("user", "cert?"),
    ...     Message("assistant", tool_calls=(ToolCall("c1", "openssl"),)),
    ...     Message("tool", "notAfter=2026-08-01", tool_call_id="c1"),
    ...     Message("assistant", "It expires on 1 August."),
    ...     Message("user", "and the other host?"),
    ...     Message("assistant", tool_calls=(ToolCall("c2", "openssl"),)),
    ... ]
    >>> sorted(surviving_indices(CompletedToolSequences(), msgs))
    [1, 2, 3]
    >>> sorted(surviving_indices(~CompletedToolSequences(), msgs))
    [0, 4, 5]
    """

    positional: ClassVar[bool] = True

    def surviving_indices(self, messages: Sequence[Message]) -> frozenset[int]:
        """
        The indices of every message in a completed tool sequence.
        """
        return completed_tool_sequences(messages)

    _index_set = surviving_indices

    def __repr__(self) -> str:
        return "CompletedToolSequences()"


_MODES = ("expand", "drop")


def _dangling_calls(messages: Sequence[Message]) -> list[int]:
    """
    The indices of the calls whose results do not follow them before other
    messages do (the rules' ``dangling-call``; the calls pending at the end
    are not dangling).
    """
    index = getattr(messages, "tail_index", None)
    if index is not None and index.size == len(messages):
        # a context's tail view: the rules' state is kept up to date, one message at a time
        if not index.walk.broken:
            return []
        return [p.index for p in index.walk.problems if p.rule == "dangling-call" and p.index is not None]
    dangling: list[int] = []
    waiting: set[str] = set()
    at = last = -1  # the first and the last message of the open exchange's calls
    for i, message in enumerate(messages):
        answered = result_ids(message)
        asked = call_ids(message)
        # assistant turns that only call, one right after another, are one exchange (as the rules join them)
        joined = bool(asked) and message.role == "assistant" and last == i - 1 and not answered
        if answered or message.role == "tool":
            waiting.difference_update(answered)
        elif waiting and not joined:
            dangling.append(at)
            waiting = set()
        if asked:
            if joined:
                waiting.update(asked)
            else:
                if waiting:
                    dangling.append(at)
                waiting, at = set(asked), i
            last = i if message.role == "assistant" else -1
    return dangling


_inner = scope_field("WholeExchanges()")


def _mode(_inst: object, _attribute: attrs.Attribute[Any], value: object) -> None:
    if value not in _MODES:
        msg = (
            f"WholeExchanges mode must be 'expand' (add the missing partners) or "
            f"'drop' (drop what lost a partner), got {value!r}"
        )
        if not isinstance(value, str):
            raise ArgumentTypeError(msg, argument="mode", value=value, expected="'expand' or 'drop'")
        raise ScopeError(msg, argument="mode", value=value)


@attrs.frozen(cache_hash=True, repr=False)
class WholeExchanges(_ScopeOps):
    """
    Makes any scope keep tool calls and their results together. Positional.

    The unit is the exchange: an assistant message asking for tool calls
    (parallel calls included), every message answering them, and a
    reasoning-only assistant message just before the call. Where the inner
    scope keeps part of an exchange:

    - ``mode="expand"`` (the default) adds the missing partners, so nothing the
      inner scope chose is lost;
    - ``mode="drop"`` drops the partial exchange, so nothing it left out comes
      back, and every exchange the list itself breaks: one with a call whose
      results do not follow it before other messages do (a call whose results
      never came, mid-transcript). What it keeps is whole and valid.

    Either way the result holds no tool result without its call and no call
    without those of its results the list holds. A call still waiting for its
    results at the end of the list is kept as it is. A result whose call is
    nowhere earlier in the list can never be made valid and is dropped, with
    its whole exchange. A tool message without a call id is a unit of its own:
    kept or dropped as the inner scope says.

    Args:
        scope: Any scope.
        mode: ``"expand"`` or ``"drop"``.

    Raises:
        TypeError: *scope* is not a scope.
        ScopeError: *mode* is neither ``"expand"`` nor ``"drop"``.

    >>> from workingctx import Message, Since, ToolCall
    >>> from workingctx.scopes import surviving_indices
    >>> msgs = [
    ...     Message("user", "cert?"),
    ...     Message("assistant", tool_calls=(ToolCall("c1", "openssl"), ToolCall("c2", "dig"))),
    ...     Message("tool", "notAfter=2026-08-01", tool_call_id="c1"),
    ...     Message("tool", "93.184.215.14", tool_call_id="c2"),
    ...     Message("assistant", "It expires on 1 August."),
    ... ]
    >>> sorted(surviving_indices(Since(3), msgs))
    [3, 4]
    >>> sorted(surviving_indices(WholeExchanges(Since(3)), msgs))
    [1, 2, 3, 4]
    >>> sorted(surviving_indices(WholeExchanges(Since(3), mode="drop"), msgs))
    [4]
    """

    positional: ClassVar[bool] = True

    scope: Scope = attrs.field(validator=_inner)
    mode: Literal["expand", "drop"] = attrs.field(default="expand", kw_only=True, validator=_mode)
    _depth: int = attrs.field(init=False, default=1, eq=False, repr=False)

    def __attrs_post_init__(self) -> None:
        object.__setattr__(self, "_depth", check_nesting(self, (self.scope,)))

    def surviving_indices(self, messages: Sequence[Message]) -> frozenset[int]:
        """
        The inner scope's indices, made of whole exchanges.
        """
        inner = surviving_indices(self.scope, messages)
        unit, orphans = exchange_units(messages)
        poisoned = {unit[i] for i in orphans}
        if self.mode == "expand":
            touched = {unit[i] for i in inner}
            touched -= poisoned
            return frozenset(i for i, u in enumerate(unit) if u in touched)
        broken = {unit[i] for i in range(len(messages)) if i not in inner}
        broken |= poisoned
        broken |= {unit[at] for at in _dangling_calls(messages)}
        return frozenset(i for i in inner if unit[i] not in broken)

    _index_set = surviving_indices

    def __repr__(self) -> str:
        return f"WholeExchanges({self.scope!r}, mode={self.mode!r})"

    def __str__(self) -> str:
        return f"WholeExchanges({self.scope}, mode={self.mode!r})"


WITHOUT_COMPLETED_TOOL_SEQUENCES = WholeExchanges(~CompletedToolSequences(), mode="drop")
"""Every message outside a completed tool sequence, in whole exchanges: what
``remove_tool_msgs=True`` and :func:`~workingctx.reducers.remove_tool_messages` keep."""


@attrs.frozen(cache_hash=True, repr=False)
class PendingCalls(_ScopeOps):
    """
    Keeps the calls still waiting for their results at the end of the list. Positional.

    That is the assistant message whose calls are not all answered yet, when
    nothing but their results follows it, with those results and the
    reasoning-only assistant message just before it. The results that come
    next need that call, so a trim that drops it would orphan them; keep it
    with ``scope | PendingCalls()``. A list that does not end waiting for
    results gives nothing.

    >>> from workingctx import Message, ToolCall
    >>> from workingctx.scopes import surviving_indices
    >>> msgs = [
    ...     Message("user", "cert and dns?"),
    ...     Message("assistant", tool_calls=(ToolCall("c1", "openssl"), ToolCall("c2", "dig"))),
    ...     Message("tool", "notAfter=2026-08-01", tool_call_id="c1"),
    ... ]
    >>> sorted(surviving_indices(PendingCalls(), msgs))
    [1, 2]
    >>> sorted(surviving_indices(PendingCalls(), msgs[:1]))
    []
    """

    positional: ClassVar[bool] = True

    def surviving_indices(self, messages: Sequence[Message]) -> frozenset[int]:
        """
        The indices of the waiting call, its results so far and its reasoning.
        """
        state = RuleState()
        for message in messages:
            state.feed(message)
        at, ids = state.pending()
        if not ids:
            return frozenset()
        start = at - 1 if at > 0 and is_reasoning_only(messages[at - 1]) else at
        return frozenset(range(start, len(messages)))

    _index_set = surviving_indices

    def __repr__(self) -> str:
        return "PendingCalls()"


def _flag(_inst: object, attribute: attrs.Attribute[Any], value: object) -> None:
    _checks.check_flag(value, attribute.name, label=f"ValidRequest({attribute.name}=...)")


_inner_of_valid = scope_field("ValidRequest()")


@attrs.frozen(cache_hash=True, repr=False)
class ValidRequest(_ScopeOps):
    """
    Makes what any scope keeps a valid request (see :mod:`workingctx.validity`). Positional.

    It keeps what *scope* keeps and every system message, then checks the
    kept messages as the request a provider would get, and repairs it:

    - an exchange the kept messages break (a result whose call is not kept,
      a call whose results do not follow it, two calls with one id) is
      dropped whole; a second result for one call is dropped alone;
    - with *user_first*, the first message after the system messages is a
      user message (Anthropic and Gemini refuse anything else): the newest
      user message before the kept ones is kept in front of them; without
      one, what comes before the first kept user message is dropped.

    A budget keeps its promise through it: when *scope* is bounded by a
    :class:`~workingctx.TokenBudget` (the budget itself, or an ``&`` with it,
    at any depth), bringing a user message in front is done only if the
    request still fits; otherwise what comes before the first kept user
    message is dropped. Only when the kept messages hold no user message at
    all is one brought in over the budget: a request must have one.

    Every context manager's :meth:`scope_for` ends in this scope:
    :meth:`repair` says which rules it had to enforce.

    Args:
        scope: Any scope.
        user_first: Make a user message the first non-system message. A
            manager sets it when the context's prefix holds no user message.

    Raises:
        TypeError: *scope* is not a scope, or *user_first* is not a bool.
        ScopeError: The scopes would nest more than
            :data:`~workingctx.scopes.MAX_SCOPE_DEPTH` levels.

    >>> from workingctx import Message, Since, ToolCall
    >>> from workingctx.scopes import surviving_indices
    >>> msgs = [
    ...     Message("system", "Be brief."),
    ...     Message("user", "cert?"),
    ...     Message("assistant", tool_calls=(ToolCall("c1", "openssl"),)),
    ...     Message("tool", "notAfter=2026-08-01", tool_call_id="c1"),
    ...     Message("assistant", "It expires on 1 August."),
    ... ]
    >>> sorted(surviving_indices(Since(3), msgs))
    [3, 4]
    >>> sorted(surviving_indices(ValidRequest(Since(3)), msgs))
    [0, 1, 4]
    >>> ValidRequest(Since(3)).repair(msgs)
    ([0, 1, 4], ['orphan-result', 'first-not-user'])
    """

    positional: ClassVar[bool] = True

    scope: Scope = attrs.field(validator=_inner_of_valid)
    user_first: bool = attrs.field(default=True, kw_only=True, validator=_flag)
    _depth: int = attrs.field(init=False, default=1, eq=False, repr=False)

    def __attrs_post_init__(self) -> None:
        object.__setattr__(self, "_depth", check_nesting(self, (self.scope,)))

    def repair(self, messages: Sequence[Message], kept: Iterable[int] | None = None) -> tuple[list[int], list[str]]:
        """
        The indices kept, ascending, and the rule ids of what was repaired.

        Args:
            messages: The messages to decide over.
            kept: The inner scope's answer, when the caller has it already.
        """
        inner = surviving_indices(self.scope, messages) if kept is None else kept
        return _valid(messages, inner, user_first=self.user_first, fits=_fits(messages, _bounds(self.scope)))

    def surviving_indices(self, messages: Sequence[Message]) -> frozenset[int]:
        """
        The inner scope's indices and the system messages, made a valid request.
        """
        return frozenset(self.repair(messages)[0])

    _index_set = surviving_indices

    def __repr__(self) -> str:
        flag = "" if self.user_first else ", user_first=False"
        return f"ValidRequest({self.scope!r}{flag})"

    def __str__(self) -> str:
        flag = "" if self.user_first else ", user_first=False"
        return f"ValidRequest({self.scope}{flag})"


def _newest_turn_before(messages: Sequence[Message], position: int) -> int | None:
    for i in range(position - 1, -1, -1):
        if starts_turn(messages[i]):
            return i
    return None


def _bounds(scope: Scope) -> list[TokenBudget]:
    """
    The budgets whose promise binds what *scope* keeps: the scope itself, the
    members of an ``AllOf``, and what the scopes that only drop (a valid
    request, whole exchanges in ``"drop"`` mode) wrap.
    """
    if isinstance(scope, TokenBudget):
        return [scope]
    if isinstance(scope, AllOf):
        return [bound for inner in scope.scopes for bound in _bounds(inner)]
    if isinstance(scope, ValidRequest) or (isinstance(scope, WholeExchanges) and scope.mode == "drop"):
        return _bounds(scope.scope)
    return []


def _fits(messages: Sequence[Message], bounds: list[TokenBudget]) -> Callable[[list[int]], bool] | None:
    """
    Whether the kept indices, with the prefix the messages carry, fit every
    budget in *bounds* as each counts; None when nothing binds.
    """
    if not bounds:
        return None

    def fits(keep: list[int]) -> bool:
        for bound in bounds:
            count = counting(bound.counter)
            if prefix_tokens(messages, count) + sum(count(messages[i]) for i in keep) > bound.max_tokens:
                return False
        return True

    return fits


def _valid(
    messages: Sequence[Message],
    kept: Iterable[int],
    *,
    user_first: bool,
    fits: Callable[[list[int]], bool] | None = None,
) -> tuple[list[int], list[str]]:
    """
    *kept*, made a valid request: every system message, broken exchanges dropped
    whole, and (with *user_first*) a user message first, brought in front only
    when the result *fits* (or the kept messages hold no user message).

    Returns:
        The indices to keep, ascending, and the rule ids of what was repaired.
    """
    known = getattr(messages, "system_positions", None)
    system = set(known) if known is not None else {i for i, m in enumerate(messages) if m.role == "system"}
    # a set the system messages are in already (a budget's cut keeps them) is sorted as it is
    keep = sorted(kept if isinstance(kept, set | frozenset) and system.issubset(kept) else system.union(kept))
    repaired: list[str] = []
    for _ in range(0 if _kept_whole(messages, keep) else 4):  # dropping whole exchanges cannot break another one
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
        keep, fixed = _open_with_user(messages, keep, fits)
        if fixed:
            repaired.append(fixed)
    return keep, list(dict.fromkeys(repaired))


def _kept_whole(messages: Sequence[Message], keep: list[int]) -> bool:
    """
    Whether *keep* breaks no tool rule, told from a context's index without
    walking the kept messages: the transcript breaks no rule, and *keep* is
    system messages that neither call nor answer, then every message from a
    cut that splits no exchange on (what a trim keeps). Then every exchange
    kept is kept whole (see :meth:`TailIndex.rebased`).
    """
    index = getattr(messages, "tail_index", None)
    size = len(messages)
    if index is None or index.size != size or index.walk.problems or not keep or keep[-1] != size - 1:
        return False
    # keep[j] - j never decreases: the newest messages kept in one run are where it is largest
    run = size - len(keep)
    j = 0
    while keep[j] - j != run:
        message = messages[keep[j]]
        if message.role != "system" or call_ids(message) or result_ids(message):
            return False
        j += 1
    return bool(index.blocker(keep[j]) >= size)


def _open_with_user(
    messages: Sequence[Message], keep: list[int], fits: Callable[[list[int]], bool] | None = None
) -> tuple[list[int], str | None]:
    """
    *keep* with a user message first: the newest user turn before the window
    is kept in front of it (when the result *fits*); else what comes before
    the first kept user turn goes; a window with no user turn at all gets the
    newest one before it, fitting or not.
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
    pinned = None if before is None else sorted([*keep, before])
    if pinned is not None and (fits is None or fits(pinned)):
        return pinned, "first-not-user"
    later = next((j for j in range(first, len(keep)) if starts_turn(messages[keep[j]])), None)
    if later is None:
        return (keep, None) if pinned is None else (pinned, "first-not-user")
    return [i for j, i in enumerate(keep) if j >= later or messages[i].role == "system"], "first-not-user"
