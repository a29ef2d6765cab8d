"""
Scopes about tool calls: ``CompletedToolSequences`` and ``WholeExchanges``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar, Literal

import attrs

from workingctx.exceptions import ArgumentTypeError, ScopeError
from workingctx.scopes._algebra import Scope, _is_scope, _not_a_scope, _ScopeOps, check_nesting, surviving_indices
from workingctx.scopes._exchanges import completed_tool_sequences, exchange_units

if TYPE_CHECKING:
    from collections.abc import Sequence

    from workingctx.messages import Message

__all__ = ["CompletedToolSequences", "WholeExchanges"]


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

    def matches(self, message: Message, index: int) -> bool:  # noqa: ARG002  # the protocol's signature
        """
        Always raises: completeness depends on the messages around.

        Raises:
            PositionalScopeError: Always; use ``surviving_indices(scope, messages)``.
        """
        raise self._refuse_matches()

    def surviving_indices(self, messages: Sequence[Message]) -> frozenset[int]:
        """
        The indices of every message in a completed tool sequence.
        """
        return completed_tool_sequences(messages)

    _index_set = surviving_indices

    def __repr__(self) -> str:
        return "CompletedToolSequences()"


_MODES = ("expand", "drop")


def _inner(_inst: object, _attribute: attrs.Attribute[Any], value: object) -> None:
    if not _is_scope(value):
        raise _not_a_scope(value, "WholeExchanges()")


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
    - ``mode="drop"`` drops the partial exchange, so nothing it left out comes back.

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

    def matches(self, message: Message, index: int) -> bool:  # noqa: ARG002  # the protocol's signature
        """
        Always raises: exchanges span several messages.

        Raises:
            PositionalScopeError: Always; use ``surviving_indices(scope, messages)``.
        """
        raise self._refuse_matches()

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
        return frozenset(i for i in inner if unit[i] not in broken)

    _index_set = surviving_indices

    def __repr__(self) -> str:
        return f"WholeExchanges({self.scope!r}, mode={self.mode!r})"

    def __str__(self) -> str:
        return f"WholeExchanges({self.scope}, mode={self.mode!r})"
