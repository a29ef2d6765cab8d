"""
The built-in scopes: the leaves ``LastNTurns``, ``RoleFilter``, ``Tagged`` and
``Since``, and ``Newest``, the newest messages another scope keeps.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any, ClassVar

import attrs

from workingctx import _checks
from workingctx.exceptions import ScopeError
from workingctx.messages import ROLES
from workingctx.scopes._algebra import (
    AllOf,
    Scope,
    _ScopeOps,
    check_nesting,
    scope_field,
    surviving_indices,
)
from workingctx.scopes._exchanges import starts_turn

if TYPE_CHECKING:
    from collections.abc import Sequence

    from workingctx.messages import Message

__all__ = ["LastNTurns", "Newest", "RoleFilter", "Since", "Tagged"]


def _count(what: str, fix: str) -> Any:
    return _checks.count(owner=what, fix=fix, error=ScopeError)


@attrs.frozen(cache_hash=True, repr=False)
class LastNTurns(_ScopeOps):
    """
    Keeps the last *n* turns, plus every system message. Positional.

    A turn starts at a user message and runs up to the next one. The messages
    before the first user message (a greeting, say) belong to the first turn,
    so when the list holds *n* turns or fewer, everything is kept.
    ``LastNTurns(0)`` keeps only the system messages. A user message that
    carries tool results answers a call and does not start a turn.

    Args:
        n: How many turns to keep, 0 or more.

    Raises:
        TypeError: *n* is not an int.
        ScopeError: *n* is negative.

    >>> from workingctx import Message
    >>> msgs = [Message("system", "House rules.")]
    >>> for i in range(3):
    ...     msgs += [Message("user", f"q{i}"), Message("assistant", f"a{i}")]
    >>> from workingctx.scopes import surviving_indices
    >>> [msgs[i].content for i in sorted(surviving_indices(LastNTurns(1), msgs))]
    ['House rules.', 'q2', 'a2']
    """

    positional: ClassVar[bool] = True

    n: int = attrs.field(validator=_count("LastNTurns(n)", "use LastNTurns(0) to keep only the system messages"))

    def surviving_indices(self, messages: Sequence[Message]) -> frozenset[int]:
        """
        The indices of every system message and of the last *n* turns.
        """
        size = len(messages)
        cut = self._window_start(messages)
        kept = [i for i in range(cut) if messages[i].role == "system"]
        kept.extend(range(cut, size))
        return frozenset(kept)

    _index_set = surviving_indices

    def _window_start(self, messages: Sequence[Message]) -> int:
        if self.n == 0:
            return len(messages)
        seen = 0
        for i in range(len(messages) - 1, -1, -1):
            if starts_turn(messages[i]):
                seen += 1
                if seen == self.n:
                    # The opening messages belong to the first turn: keep them
                    # when the window reaches back to it.
                    return i if any(starts_turn(messages[j]) for j in range(i - 1, -1, -1)) else 0
        return 0

    def __repr__(self) -> str:
        return f"LastNTurns({self.n!r})"


def _roles(given: object) -> frozenset[str]:
    value = (given,) if isinstance(given, str) else given
    if not isinstance(value, Iterable):
        raise _checks.wrong_type(
            value,
            "roles",
            "roles",
            label="RoleFilter",
            verb="needs",
            fix="pass a set such as RoleFilter({'user', 'assistant'})",
        )
    roles = frozenset(value)
    unknown = sorted(repr(role) for role in roles if role not in ROLES)
    if unknown:
        msg = (
            f"RoleFilter got unknown role(s) {', '.join(unknown)}; a role is one of "
            "'system', 'user', 'assistant' or 'tool' (exact, lower case)"
        )
        raise ScopeError(msg, argument="roles", value=given)
    return roles


@attrs.frozen(cache_hash=True, repr=False)
class RoleFilter(_ScopeOps):
    """
    Keeps the messages whose role is one of *roles*.

    Args:
        roles: Any iterable of roles (stored as a frozenset); a single role
            string is accepted as one role.

    Raises:
        TypeError: *roles* is not iterable.
        ScopeError: A role is not ``"system"``, ``"user"``, ``"assistant"`` or ``"tool"``.

    >>> from workingctx import Message
    >>> RoleFilter(["user", "assistant"])
    RoleFilter({'assistant', 'user'})
    >>> RoleFilter({"tool"}).matches(Message("tool", "42", tool_call_id="c1"), 3)
    True
    """

    roles: frozenset[str] = attrs.field(converter=_roles)

    def matches(self, message: Message, index: int) -> bool:  # noqa: ARG002  # the protocol's signature
        """
        Whether the message's role is one of the roles.
        """
        return message.role in self.roles

    def _index_set(self, messages: Sequence[Message]) -> frozenset[int]:
        roles = self.roles
        return frozenset(i for i, message in enumerate(messages) if message.role in roles)

    def __repr__(self) -> str:
        inner = ", ".join(repr(role) for role in sorted(self.roles))
        return f"RoleFilter({{{inner}}})" if inner else "RoleFilter(frozenset())"


def _tag(_inst: object, _attribute: attrs.Attribute[Any], value: object) -> None:
    if not isinstance(value, str):
        raise _checks.wrong_type(value, "tag", "the name to match as a str", label="Tagged(tag)", verb="needs")


@attrs.frozen(cache_hash=True, repr=False)
class Tagged(_ScopeOps):
    """
    Keeps the messages whose ``name`` equals *tag*.

    Args:
        tag: The name to match, such as a tool's name or a speaker's.

    Raises:
        TypeError: *tag* is not a str.

    >>> from workingctx import Message
    >>> Tagged("lookup").matches(Message("tool", "cert expired", name="lookup"), 0)
    True
    """

    tag: str = attrs.field(validator=_tag)

    def matches(self, message: Message, index: int) -> bool:  # noqa: ARG002  # the protocol's signature
        """
        Whether the message's name equals the tag.
        """
        return message.name == self.tag

    def _index_set(self, messages: Sequence[Message]) -> frozenset[int]:
        tag = self.tag
        return frozenset(i for i, message in enumerate(messages) if message.name == tag)

    def __repr__(self) -> str:
        return f"Tagged({self.tag!r})"


@attrs.frozen(cache_hash=True, repr=False)
class Since(_ScopeOps):
    """
    Keeps the messages at *index* and after.

    Args:
        index: The first index kept, 0 or more; past the end keeps nothing.

    Raises:
        TypeError: *index* is not an int.
        ScopeError: *index* is negative.

    >>> from workingctx import Message
    >>> from workingctx.scopes import surviving_indices
    >>> msgs = [Message("user", "q0"), Message("assistant", "a0"), Message("user", "q1")]
    >>> sorted(surviving_indices(Since(1), msgs))
    [1, 2]
    """

    index: int = attrs.field(
        validator=_count("Since(index)", "count from the start of the tail, as len(ctx.messages) does")
    )

    def matches(self, message: Message, index: int) -> bool:  # noqa: ARG002  # the protocol's signature
        """
        Whether *index* is at or after the scope's index.
        """
        return index >= self.index

    def _index_set(self, messages: Sequence[Message]) -> frozenset[int]:
        return frozenset(range(self.index, len(messages)))

    def __repr__(self) -> str:
        return f"Since({self.index!r})"


_EVERY = AllOf(())


_newest_scope = scope_field("Newest(n, scope)")


@attrs.frozen(cache_hash=True, repr=False)
class Newest(_ScopeOps):
    """
    Keeps the newest *n* of the messages *scope* keeps. Positional.

    ``Newest(3)`` keeps the last three messages; ``Newest(8, ~RoleFilter({"system"}))``
    keeps the eight newest messages that are not system messages (the window a
    :class:`~workingctx.managers.SummaryContextManager` keeps verbatim). When
    *scope* keeps *n* messages or fewer, all of them are kept; ``Newest(0, ...)``
    keeps nothing. Unlike :class:`LastNTurns`, it counts messages and keeps no
    system message of its own accord; wrap it in :class:`WholeExchanges` to keep
    tool calls with their results.

    Args:
        n: How many messages to keep, 0 or more.
        scope: The scope to take them from; every message by default.

    Raises:
        TypeError: *n* is not an int, or *scope* is not a scope.
        ScopeError: *n* is negative, or the scopes would nest more than
            :data:`~workingctx.scopes.MAX_SCOPE_DEPTH` levels.

    >>> from workingctx import Message, RoleFilter
    >>> from workingctx.scopes import surviving_indices
    >>> msgs = [Message("system", "rules"), Message("user", "q0"), Message("assistant", "a0"),
    ...         Message("system", "note"), Message("user", "q1")]
    >>> sorted(surviving_indices(Newest(2), msgs))
    [3, 4]
    >>> sorted(surviving_indices(Newest(2, ~RoleFilter({"system"})), msgs))
    [2, 4]
    >>> print(Newest(2, ~RoleFilter({"system"})) | RoleFilter({"system"}))
    Newest(2, ~RoleFilter({'system'})) | RoleFilter({'system'})
    """

    positional: ClassVar[bool] = True

    n: int = attrs.field(validator=_count("Newest(n)", "use Newest(0, scope) to keep none of them"))
    scope: Scope = attrs.field(default=_EVERY, validator=_newest_scope)
    _depth: int = attrs.field(init=False, default=1, eq=False, repr=False)

    def __attrs_post_init__(self) -> None:
        object.__setattr__(self, "_depth", check_nesting(self, (self.scope,)))

    def surviving_indices(self, messages: Sequence[Message]) -> frozenset[int]:
        """
        The *n* highest indices the inner scope keeps.
        """
        if self.n == 0:
            return frozenset()
        if self.scope == _EVERY:
            return frozenset(range(max(len(messages) - self.n, 0), len(messages)))
        return frozenset(sorted(surviving_indices(self.scope, messages))[-self.n :])

    _index_set = surviving_indices

    def __repr__(self) -> str:
        if self.scope == _EVERY:
            return f"Newest({self.n!r})"
        return f"Newest({self.n!r}, {self.scope!r})"

    def __str__(self) -> str:
        if self.scope == _EVERY:
            return f"Newest({self.n!r})"
        return f"Newest({self.n!r}, {self.scope})"
